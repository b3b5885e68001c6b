/* Private helpers of the tensor layer and the layers' math (tensor.c,
 * gemm.c, nn_*.c, model.c, optim.c, ...): argument checks on tensors and the
 * GEMM the dense layer is made of. Never installed. */
#ifndef CAIRN_TENSOR_IMPL_H
#define CAIRN_TENSOR_IMPL_H

#include "internal.h"

#include "cairn/nn.h"
#include "cairn/tensor.h"

/* Argument checks that produce the standard messages. `fn` and `what` name
 * the call and the argument: "dense_forward: X is NULL". */
cairn_status cairn__check_f32(const char *fn, const char *what, const cairn_tensor *t);
cairn_status cairn__check_rank(const char *fn, const char *what, const cairn_tensor *t, int rank);
/* Element i of a numeric tensor as a double (f32, f64, bf16, the integer
 * dtypes, bool). Returns 0 and leaves *out alone for other dtypes (f16) or
 * i out of range (tensor.c). */
int cairn__tensor_get_f64(const cairn_tensor *t, int64_t i, double *out);

/* C = alpha·op(A)·op(B) + beta·C, row-major, through cblas_sgemm or
 * oneDNN in blocks: same bits for any thread count (gemm.c). With bias (N
 * floats) non-NULL, beta must be 0 and every row of C starts as bias
 * instead, on either engine: C = alpha·op(A)·op(B) + bias. */
void cairn__sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc, const float *bias);
/* cairn__sgemm that then calls ep->fn(ep->ctx, r0, r1, c0, c1) on each
 * finished block C[r0:r1, c0:c1], by the thread that computed it, while the
 * block is still in its cache (the dense layer's activation). */
typedef struct cairn__gemm_epilogue {
  void (*fn)(void *ctx, int r0, int r1, int c0, int c1);
  void *ctx;
} cairn__gemm_epilogue;
void cairn__sgemm_ep(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                     const float *B, int ldb, float beta, float *C, int ldc, const float *bias,
                     const cairn__gemm_epilogue *ep);

/* Y = act(X·W + b) with the activation applied to each block of the GEMM
 * while it is in cache; Z (B, out) receives X·W + b, A (B, out) act(Z).
 * An elementwise act only (identity, softmax and log-softmax: A is not
 * written, the caller runs cairn_act_forward). Same checks and messages as
 * cairn_dense_forward; A must have Z's shape. */
cairn_status cairn__dense_forward_act(const cairn_tensor *X, const cairn_tensor *W, const cairn_tensor *b,
                                      cairn_act act, float alpha, cairn_tensor *Z, cairn_tensor *A);
/* 1 when cairn__dense_forward_act applies act itself. */
int cairn__act_fusable(cairn_act act);
/* y[0:n] = act(x[0:n]) for an elementwise act, with the kernels k (nn_act.c). */
struct cairn__kernel_table;
void cairn__act_fwd_span(const struct cairn__kernel_table *k, cairn_act act, float alpha, const float *x, float *y,
                         size_t n);

/* dX = act'·dY (as cairn_act_backward: z is the forward's input X, y its
 * output Y, rows x cols each; dx may be dy) and db = Σ_rows dX (cols,
 * overwritten, the rows added in order as cairn__dense_backward sums
 * them), in one sweep: no second pass reads dX for the bias gradient.
 * Only for an act cairn__act_bwd_colsum_fusable says (arithmetic
 * derivatives, whose bits do not depend on where a span starts), so the
 * bits are those of the two passes, at any thread count. No checks. */
int cairn__act_bwd_colsum_fusable(cairn_act act);
void cairn__act_backward_colsum(cairn_act act, float alpha, const float *z, const float *y, const float *dy,
                                float *dx, float *db, size_t rows, size_t cols);

/* cairn_dense_backward with a choice: accumulate 0 overwrites dW and db
 * instead of adding to them (the model's step, which saves a zeroing pass). */
cairn_status cairn__dense_backward(const cairn_tensor *X, const cairn_tensor *W, const cairn_tensor *dY,
                                   cairn_tensor *dX, cairn_tensor *dW, cairn_tensor *db, int accumulate);
/* db += Σ_rows dY (dY is (rows, out), db (out)), the rows added in order,
 * columns split among the threads: the same bits at any thread count. */
void cairn__dense_bias_grad(const float *dy, float *db, size_t rows, size_t out);

#endif
