/* cairn/optim.h — optimizers with TF 1.x update rules and slot names.
 *
 * An optimizer is created for a list of trainable f32 variables and creates
 * its slots at once, as real variables in the same registry (GLOBAL, not
 * TRAINABLE, zero-initialized unless stated), so that a checkpoint carries
 * them and a Saver made afterwards sees them. Slot names follow TF:
 * "<var>/<Name>", "<var>/<Name>_1", where <Name> is the optimizer's name
 * (default below). Update rules, with g the (clipped) gradient:
 *
 *   SGD       w -= lr·g                                         (no slots)
 *   Momentum  a = μ·a + g;  w -= lr·a,  or with Nesterov
 *             w -= lr·g + lr·μ·a                          slot <v>/Momentum
 *   Adam      TF's formulation (Kingma & Ba, end of section 2, "efficient version"):
 *             m = β1·m + (1−β1)·g;  v = β2·v + (1−β2)·g²
 *             lr_t = lr·√(1 − β2^t) / (1 − β1^t)
 *             w -= lr_t · m / (√v + ε)
 *             β1^t, β2^t live in the non-slot GLOBAL variables
 *             "beta1_power", "beta2_power" (initialized to β1, β2, multiplied
 *             by β1, β2 in f32 after each step, as TF does; lr_t is
 *             computed in double from them); ε is TF's "epsilon hat", so
 *             results differ slightly from PyTorch's ε placement.
 *                                               slots <v>/Adam (m), <v>/Adam_1 (v)
 *   AdamW     Adam, then decoupled weight decay on the pre-update weights, as
 *             TF's contrib AdamWOptimizer and Loshchilov & Hutter (η_t = 1):
 *             w ← w − wd·w_old − lr_t·m/(√v + ε)   (wd is NOT multiplied by lr)
 *                                               slots <v>/AdamW, <v>/AdamW_1
 *   RMSProp   ms = ρ·ms + (1−ρ)·g²;  mom = μ·mom + lr·g/√(ms + ε);  w -= mom
 *                   slots <v>/RMSProp (ms, initialized to ONES as TF 1.x),
 *                         <v>/RMSProp_1 (mom)
 *   Adagrad   acc += g²;  w -= lr·g/√acc
 *                   slot <v>/Adagrad initialized to initial_accumulator (0.1)
 *
 * The element-wise arithmetic is f32 in the order of TF's training_ops.cc;
 * the AVX2 kernels contract some a·b + c into FMAs, so they differ from the
 * scalar ones by a few ulps (never in the rules). Updates run with
 * subnormal numbers flushed to zero (FTZ and DAZ, set and restored around
 * each chunk), as TF runs every op on the CPU: a slot value that would
 * become subnormal does not (m of a dead ReLU unit decays to 0 instead of
 * lingering below FLT_MIN, where each operation on it costs Intel CPUs a
 * ~100-cycle microcode assist: the Fashion-MNIST demo ran 2x faster).
 *
 * Gradient clipping by global norm (TF's clip_by_global_norm): with
 * N = √(Σ_i ||g_i||²), every g_i is scaled by clip_norm / max(N, clip_norm).
 * When N <= clip_norm the gradients are left bit-for-bit unchanged; when N
 * is infinite or NaN every gradient becomes NaN, as in TF. N is summed in a
 * fixed order, so the result does not depend on the thread count.
 *
 * An optimizer does not own the variables; free it before the registry.
 * Not thread-safe: one thread applies an optimizer at a time (the updates
 * themselves use the library's OpenMP threads).
 */
#ifndef CAIRN_OPTIM_H
#define CAIRN_OPTIM_H

#include <stddef.h>

#include "cairn/status.h"
#include "cairn/tensor.h"
#include "cairn/var.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cairn_optim_kind {
  CAIRN_OPTIM_SGD = 0,
  CAIRN_OPTIM_MOMENTUM,
  CAIRN_OPTIM_ADAM,
  CAIRN_OPTIM_ADAMW,
  CAIRN_OPTIM_RMSPROP,
  CAIRN_OPTIM_ADAGRAD
} cairn_optim_kind;

typedef struct cairn_optim_config {
  cairn_optim_kind kind;
  float learning_rate;
  float momentum;            /* Momentum μ; RMSProp μ */
  int nesterov;              /* Momentum only */
  float beta1, beta2;        /* Adam, AdamW */
  float epsilon;             /* Adam, AdamW, RMSProp */
  float weight_decay;        /* AdamW */
  float decay;               /* RMSProp ρ */
  float initial_accumulator; /* Adagrad */
  float clip_norm;           /* > 0: clip gradients by global norm first */
  const char *name;          /* slot-name suffix; NULL: the kind's TF name
                                "GradientDescent", "Momentum", "Adam",
                                "AdamW", "RMSProp", "Adagrad" (copied) */
} cairn_optim_config;

/* The defaults for `kind`. Where TF 1.x's constructor has a default, it is
 * TF's; where TF makes the argument required, the value is cairn's choice
 * (a common starting point, not TF's):
 *   learning_rate  Adam, AdamW: 0.001, TF's (tf.compat.v1.train.AdamOptimizer
 *                  learning_rate=0.001; tf.contrib.opt.AdamWOptimizer the same).
 *                  RMSProp 0.001, SGD 0.01, Momentum 0.01, Adagrad 0.01:
 *                  cairn's (learning_rate is required by TF's
 *                  RMSPropOptimizer, GradientDescentOptimizer,
 *                  MomentumOptimizer and AdagradOptimizer).
 *   momentum       Momentum 0.9: cairn's (MomentumOptimizer's momentum is
 *                  required). RMSProp 0: TF's (RMSPropOptimizer momentum=0.0).
 *   nesterov       0: TF's (MomentumOptimizer use_nesterov=False).
 *   beta1, beta2   0.9, 0.999: TF's (AdamOptimizer beta1=0.9, beta2=0.999;
 *                  AdamWOptimizer the same).
 *   epsilon        Adam, AdamW 1e-8: TF's (AdamOptimizer epsilon=1e-8).
 *                  RMSProp 1e-10: TF's (RMSPropOptimizer epsilon=1e-10).
 *   weight_decay   AdamW 0.01: cairn's (AdamWOptimizer's weight_decay is
 *                  required); 0 for the other kinds, which do not use it.
 *   decay          0.9: TF's (RMSPropOptimizer decay=0.9).
 *   initial_accumulator  0.1: TF's (AdagradOptimizer
 *                  initial_accumulator_value=0.1).
 *   clip_norm      0 (off): cairn's (TF clips outside the optimizer, with
 *                  tf.clip_by_global_norm).
 *   name           NULL: TF's names ("Adam", ...; see cairn_optim_config). */
CAIRN_API cairn_optim_config cairn_optim_defaults(cairn_optim_kind kind);

typedef struct cairn_optim cairn_optim;

/* Creates the optimizer for vars[0..n) (n >= 1 distinct f32 variables of r)
 * and its slot and non-slot variables in r (uninitialized, like every new
 * variable). Only the fields the kind uses are checked, each must be finite:
 * learning_rate > 0; Momentum: momentum >= 0; Adam/AdamW: beta1, beta2 in
 * [0, 1), epsilon > 0, weight_decay in [0, 1) (AdamW); RMSProp: decay in
 * [0, 1), momentum >= 0, epsilon > 0; Adagrad: initial_accumulator > 0;
 * every kind: clip_norm >= 0. (TF accepts ε = 0; it is refused here because
 * a zero second moment then gives 0/0.)
 * Errors: CAIRN_E_NULL, CAIRN_E_INVALID (a bad hyper-parameter, named; bad
 * name; no variables; a variable listed twice or not in r),
 * CAIRN_E_DTYPE (a non-f32 variable), CAIRN_E_EXISTS (slots already exist:
 * give the second optimizer another name), CAIRN_E_NOMEM. Every check runs
 * before any variable is created; only CAIRN_E_NOMEM can leave some slots
 * behind (var.h cannot delete variables). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_optim_new(cairn_registry *r, const cairn_optim_config *cfg,
                                                    cairn_var *const *vars, size_t n,
                                                    cairn_optim **out);
CAIRN_API void cairn_optim_free(cairn_optim *o);

/* Applies grads[i] (same shape as vars[i]) to every variable, then, if
 * global_step is not NULL, increments it by one (TF's
 * minimize(loss, global_step=...)). Gradients are read-only unless clipping
 * is on, in which case they are scaled in place (pass distinct tensors).
 * Everything is checked first, so a failing call changes nothing.
 * Errors: CAIRN_E_NULL, CAIRN_E_DTYPE (a non-f32 gradient, a global_step
 * that is not an i64 scalar), CAIRN_E_SHAPE (names the variable and both
 * shapes), CAIRN_E_UNINITIALIZED (a variable, slot, beta power or
 * global_step is not initialized: names it). Allocates nothing. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_optim_apply(cairn_optim *o, cairn_tensor *const *grads,
                                                      cairn_var *global_step);

/* Sets the learning rate used by the next apply (a schedule). lr must be
 * finite and >= 0 (0 is allowed, e.g. at the start of a warm-up); any other
 * value is refused: the rate stays as it was and cairn_errmsg() says why. */
CAIRN_API void cairn_optim_set_learning_rate(cairn_optim *o, float lr);
/* The optimizer's configuration, owned by o; name is the name in use (the
 * kind's TF name if the config had NULL). NULL if o is NULL. */
CAIRN_API const cairn_optim_config *cairn_optim_get_config(const cairn_optim *o);

/* TF's get_slot(var, slot_name); slot names: "momentum" (Momentum), "m",
 * "v" (Adam, AdamW), "rms", "momentum" (RMSProp), "accumulator" (Adagrad).
 * CAIRN_E_NOT_FOUND if var is not optimized here or has no such slot. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_optim_get_slot(const cairn_optim *o, const cairn_var *var,
                                                         const char *slot_name, cairn_var **out);

/* Scales grads[0..n) in place by clip_norm / max(N, clip_norm), N their
 * global norm, written to *global_norm if not NULL (see the top of this
 * file for N <= clip_norm and a non-finite N). Errors: CAIRN_E_INVALID
 * (clip_norm not > 0 and finite), CAIRN_E_NULL, CAIRN_E_DTYPE (a missing or
 * non-f32 gradient); nothing is scaled on error. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_clip_by_global_norm(cairn_tensor *const *grads, size_t n,
                                                              float clip_norm, float *global_norm);

#ifdef __cplusplus
}
#endif
#endif
