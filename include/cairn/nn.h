/* cairn/nn.h — dense layer, activations, losses and metrics (float32).
 *
 * All tensors are f32 and row-major unless stated. Shapes are checked on
 * every call; a mismatch returns CAIRN_E_SHAPE and cairn_errmsg() gives both
 * shapes. Outputs must be allocated by the caller with the exact shape;
 * nothing here allocates. Zero-sized batches are valid and do nothing
 * (losses over an empty batch return CAIRN_E_INVALID: a mean of nothing).
 * Elementwise work runs on OpenMP threads above a size threshold; every
 * result is bitwise identical for any thread count.
 */
#ifndef CAIRN_NN_H
#define CAIRN_NN_H

#include "cairn/status.h"
#include "cairn/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Dense: Y = X·W + b ------------------------------------------------
 * X is (B, in), W is (in, out) as TF stores dense/kernel, b is (out) or
 * NULL, Y is (B, out). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_dense_forward(const cairn_tensor *X, const cairn_tensor *W,
                                                        const cairn_tensor *b, cairn_tensor *Y);

/* dX  = dY·Wᵀ       (B, in)   overwritten; skipped if dX is NULL
 * dW += Xᵀ·dY       (in, out) accumulated
 * db += Σ_B dY      (out)     accumulated; skipped if db is NULL */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_dense_backward(const cairn_tensor *X, const cairn_tensor *W,
                                                         const cairn_tensor *dY, cairn_tensor *dX,
                                                         cairn_tensor *dW, cairn_tensor *db);

/* ---- Activations -------------------------------------------------------- */
typedef enum cairn_act {
  CAIRN_ACT_IDENTITY = 0,
  CAIRN_ACT_RELU,        /* max(x, 0) */
  CAIRN_ACT_LEAKY_RELU,  /* x > 0 ? x : alpha·x  (TF default alpha 0.2) */
  CAIRN_ACT_SIGMOID,     /* 1 / (1 + e^-x) */
  CAIRN_ACT_TANH,
  CAIRN_ACT_GELU,        /* x·Φ(x) = x/2·(1 + erf(x/√2)) */
  CAIRN_ACT_GELU_TANH,   /* x/2·(1 + tanh(√(2/π)·(x + 0.044715·x³))) */
  CAIRN_ACT_SOFTMAX,     /* over the last dimension, max-subtracted */
  CAIRN_ACT_LOG_SOFTMAX  /* x - max - log Σ e^(x - max), last dimension */
} cairn_act;

CAIRN_API const char *cairn_act_name(cairn_act a);

/* Y = act(X). Y may be X (in place). alpha is used by LEAKY_RELU only. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_act_forward(cairn_act a, float alpha, const cairn_tensor *X,
                                                      cairn_tensor *Y);
/* dX = dY ⊙ act'(·). Needs X for RELU, LEAKY_RELU, GELU, GELU_TANH and Y
 * (the forward output) for SIGMOID, TANH, SOFTMAX, LOG_SOFTMAX; the other
 * may be NULL. dX may alias dY. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_act_backward(cairn_act a, float alpha, const cairn_tensor *X,
                                                       const cairn_tensor *Y, const cairn_tensor *dY,
                                                       cairn_tensor *dX);

/* ---- Losses (mean over the batch) ---------------------------------------
 * Each writes the scalar loss to *loss and, if d is not NULL, dLoss/dinput
 * to d (same shape as the input). */

/* logits (B, C), labels (B, C) f32 rows of class probabilities (one-hot):
 * L = 1/B Σ_b Σ_c -z_bc · log softmax(x_b)_c */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_loss_softmax_xent(const cairn_tensor *logits,
                                                            const cairn_tensor *labels, float *loss,
                                                            cairn_tensor *dlogits);
/* logits (B, C), labels (B) i32 in [0, C): L = 1/B Σ_b -log softmax(x_b)_{y_b} */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_loss_sparse_softmax_xent(const cairn_tensor *logits,
                                                                   const cairn_tensor *labels,
                                                                   float *loss, cairn_tensor *dlogits);
/* logits and labels of one shape (B, ...), labels in [0, 1]; the mean over
 * all elements of TF's stable form max(x,0) − x·z + log(1 + e^−|x|). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_loss_sigmoid_xent(const cairn_tensor *logits,
                                                            const cairn_tensor *labels, float *loss,
                                                            cairn_tensor *dlogits);
/* pred and target of one shape: mean over all elements of (p − t)². */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_loss_mse(const cairn_tensor *pred, const cairn_tensor *target,
                                                   float *loss, cairn_tensor *dpred);

/* Fraction of rows b whose arg-max logit equals labels[b] (ties: first
 * index). logits (B, C) f32, labels (B) i32. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_metric_accuracy(const cairn_tensor *logits,
                                                          const cairn_tensor *labels, float *accuracy);

#ifdef __cplusplus
}
#endif
#endif
