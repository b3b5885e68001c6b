/* cairn/model.h — a sequential MLP: dense layers, an activation between
 * them, a loss and an optimizer, so that a training step is one call.
 *
 * Variables are created as TF 1.x's tf.layers.dense names them, in order:
 *   dense/kernel (in, h1), dense/bias (h1), dense_1/kernel, dense_1/bias, ...
 * ("<scope>/dense/kernel" with a scope), GLOBAL|TRAINABLE, kernels
 * glorot-uniform and biases zero as TF's defaults; then the optimizer's slots
 * and "global_step" (get-or-create). Nothing is initialized by _new: run
 * cairn_registry_initialize_collection(r, CAIRN_COLL_GLOBAL) (or restore a
 * checkpoint) before the first step.
 *
 * Workspace for activations and gradients is allocated on the first step and
 * grown only when a larger batch arrives: steps of the same or a smaller
 * batch allocate nothing. One model is not safe for concurrent calls.
 */
#ifndef CAIRN_MODEL_H
#define CAIRN_MODEL_H

#include <stdint.h>

#include "cairn/nn.h"
#include "cairn/optim.h"
#include "cairn/status.h"
#include "cairn/tensor.h"
#include "cairn/var.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CAIRN_MLP_MAX_LAYERS 16

typedef enum cairn_loss_kind {
  CAIRN_LOSS_SPARSE_SOFTMAX_XENT = 0, /* labels (B) i32 */
  CAIRN_LOSS_SOFTMAX_XENT,            /* labels (B, C) f32 */
  CAIRN_LOSS_SIGMOID_XENT,            /* labels (B, C) f32 in [0, 1] */
  CAIRN_LOSS_MSE                      /* targets (B, C) f32 */
} cairn_loss_kind;

/* The arithmetic of the model's matrix products (doc/bf16.md).
 * CAIRN_PRECISION_BF16 is mixed precision: the inputs of every GEMM — X
 * (or the previous layer's activation), the kernels W and the gradient
 * dY coming down — are rounded to bfloat16 (round to nearest, ties to
 * even) and their products are summed in fp32. Everything else stays fp32:
 * the master kernels and biases the optimizer updates, its slots, the
 * pre-activations Z and activations A, the loss, dY itself and every
 * reduction (db). Activations are kept in fp32, with a bf16 copy of each
 * written by the GEMM's epilogue as the next product's input: the
 * elementwise backward then runs on fp32 values, so bf16 touches the
 * products only (PyTorch's autocast stores its matmul outputs in bf16;
 * here the fp32 activation costs one more store per element of a step
 * that the products dominate). The bf16 copy of each kernel is written by
 * the optimizer as it updates each chunk, and made again from the fp32
 * kernel after anything else wrote it (a restore, an initializer, an MPI
 * broadcast: calls that end with cairn_var_set_initialized). Checkpoints
 * hold the fp32 variables only, so they do not depend on the precision.
 * Fast where oneDNN has bf16 kernels for the CPU (avx512_bf16 or AMX,
 * cairn_runtime_info says "bf16: onednn"); elsewhere the products run
 * bf16-rounded on the fp32 GEMM, slower than fp32 (CAIRN_BF16_ENGINE=
 * reference forces that path). */
typedef enum cairn_precision {
  CAIRN_PRECISION_F32 = 0, /* the default */
  CAIRN_PRECISION_BF16
} cairn_precision;

typedef struct cairn_mlp_config {
  int n_layers;           /* dense layers, 1..CAIRN_MLP_MAX_LAYERS */
  const int64_t *sizes;   /* n_layers + 1 widths: input, hidden..., output */
  cairn_act hidden_act;   /* elementwise activation after every layer but the last */
  float act_alpha;        /* LEAKY_RELU slope */
  cairn_loss_kind loss;
  cairn_optim_config optim;
  const char *scope;      /* NULL or a name prefix */
  cairn_precision precision; /* 0: CAIRN_PRECISION_F32 */
} cairn_mlp_config;

typedef struct cairn_mlp cairn_mlp;

/* Errors: CAIRN_E_INVALID (layer count, a width < 1, a row-wise hidden
 * activation, bad optimizer settings, an unknown precision), CAIRN_E_EXISTS (names taken: use a
 * scope), CAIRN_E_NOMEM. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_mlp_new(cairn_registry *r, const cairn_mlp_config *cfg,
                                                  cairn_mlp **out);
CAIRN_API void cairn_mlp_free(cairn_mlp *m);

/* logits = the last layer's output (B, C) for X (B, in); *logits points
 * into the model's workspace and stays valid until the next call. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_mlp_forward(cairn_mlp *m, const cairn_tensor *X,
                                                      const cairn_tensor **logits);
/* One step: forward, loss, backward, optimizer update, global_step += 1.
 * labels as the loss kind says. *loss (may be NULL) gets the batch loss
 * before the update. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_mlp_train_step(cairn_mlp *m, const cairn_tensor *X,
                                                         const cairn_tensor *labels, float *loss);
/* Loss and, for the softmax losses with i32 labels, accuracy (else 0),
 * without changing anything. Either output may be NULL. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_mlp_evaluate(cairn_mlp *m, const cairn_tensor *X,
                                                       const cairn_tensor *labels, float *loss,
                                                       float *accuracy);

/* A function run by cairn_mlp_train_step after backward and before the
 * optimizer update ("after compute_gradients, before apply_gradients"; the
 * hook point a DistributedOptimizer needs: cairn/mpi.h's cairn_mpi_grads_fn
 * averages the gradients across ranks). grads[0..n) are dW0, db0, dW1, db1,
 * ... in layer order, f32, with the variables' shapes; fn may change them in
 * place. A non-OK return ends the step before any variable (global_step
 * included) changes, and is what cairn_mlp_train_step returns (fn sets the
 * message). fn NULL removes the hook; user is borrowed. */
typedef cairn_status (*cairn_grads_fn)(void *user, cairn_tensor *const *grads, size_t n);
CAIRN_API void cairn_mlp_set_grads_hook(cairn_mlp *m, cairn_grads_fn fn, void *user);
/* Changes the precision of the following steps and evaluations (e.g. an
 * fp32 evaluation of a model trained in bf16); the variables are not
 * touched. Errors: CAIRN_E_NULL, CAIRN_E_INVALID (unknown precision),
 * CAIRN_E_NOMEM (the bf16 copies of the kernels). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_mlp_set_precision(cairn_mlp *m, cairn_precision p);
CAIRN_API cairn_precision cairn_mlp_precision(const cairn_mlp *m);
CAIRN_API cairn_optim *cairn_mlp_optimizer(const cairn_mlp *m);
CAIRN_API cairn_var *cairn_mlp_global_step(const cairn_mlp *m);
/* Layer i's kernel and bias (i < n_layers), NULL otherwise. */
CAIRN_API cairn_var *cairn_mlp_kernel(const cairn_mlp *m, int i);
CAIRN_API cairn_var *cairn_mlp_bias(const cairn_mlp *m, int i);
/* Number of trainable parameters. */
CAIRN_API int64_t cairn_mlp_num_params(const cairn_mlp *m);

#ifdef __cplusplus
}
#endif

/* Compatibility, for one release: the MLP's train and eval ops moved to
 * cairn/mlp_ops.h, the top layer (they are session ops). Define
 * CAIRN_NO_COMPAT_INCLUDES to check that a program includes what it
 * uses. */
#ifndef CAIRN_NO_COMPAT_INCLUDES
#include "cairn/mlp_ops.h"
#endif
#endif
