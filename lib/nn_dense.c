/* Dense layer on cblas_sgemm (through cairn__sgemm): Y = X·W + b and its backward pass. */
#include "tensor_impl.h"

#include <string.h>

#include "cairn/nn.h"
#include "kernels/kernels.h"

/* Shapes for X (B, in), W (in, out), b (out), Y-like (B, out). */
static cairn_status check_dense(const char *fn, const cairn_tensor *X, const cairn_tensor *W,
                                const cairn_tensor *b, const char *yname, const cairn_tensor *Y) {
  cairn_status s;
  if ((s = cairn__check_f32(fn, "X", X)) || (s = cairn__check_f32(fn, "W", W)) ||
      (s = cairn__check_f32(fn, yname, Y)))
    return s;
  if (b && (s = cairn__check_f32(fn, "b", b))) return s;
  if ((s = cairn__check_rank(fn, "X", X, 2)) || (s = cairn__check_rank(fn, "W", W, 2)) ||
      (s = cairn__check_rank(fn, yname, Y, 2)))
    return s;
  char bx[96], bw[96], by[96];
  if (X->shape[1] != W->shape[0])
    return cairn__fail(CAIRN_E_SHAPE, "%s: X is %s but W is %s: X.cols != W.rows", fn,
                       cairn_tensor_shape_str(X, bx, sizeof bx), cairn_tensor_shape_str(W, bw, sizeof bw));
  if (Y->shape[0] != X->shape[0] || Y->shape[1] != W->shape[1])
    return cairn__fail(CAIRN_E_SHAPE, "%s: %s is %s, expected (%lld, %lld) from X %s and W %s", fn, yname,
                       cairn_tensor_shape_str(Y, by, sizeof by), (long long)X->shape[0],
                       (long long)W->shape[1], cairn_tensor_shape_str(X, bx, sizeof bx),
                       cairn_tensor_shape_str(W, bw, sizeof bw));
  if (b && (b->rank != 1 || b->shape[0] != W->shape[1]))
    return cairn__fail(CAIRN_E_SHAPE, "%s: b is %s, expected (%lld) to match W %s", fn,
                       cairn_tensor_shape_str(b, by, sizeof by), (long long)W->shape[1],
                       cairn_tensor_shape_str(W, bw, sizeof bw));
  return CAIRN_OK;
}

int cairn__act_fusable(cairn_act act) {
  return act != CAIRN_ACT_IDENTITY && act != CAIRN_ACT_SOFTMAX && act != CAIRN_ACT_LOG_SOFTMAX &&
         (unsigned)act <= CAIRN_ACT_LOG_SOFTMAX;
}

struct act_ep {
  const cairn__kernel_table *k;
  cairn_act act;
  float alpha;
  const float *z; /* (B, out) */
  float *a;       /* (B, out) */
  int out;
};

/* A[r0:r1, c0:c1] = act(Z[r0:r1, c0:c1]): one call for whole rows. */
static void act_block(void *p, int r0, int r1, int c0, int c1) {
  const struct act_ep *e = p;
  size_t off = (size_t)r0 * (size_t)e->out + (size_t)c0;
  if (c0 == 0 && c1 == e->out) {
    cairn__act_fwd_span(e->k, e->act, e->alpha, e->z + off, e->a + off, (size_t)(r1 - r0) * (size_t)e->out);
    return;
  }
  for (int r = r0; r < r1; r++, off += (size_t)e->out)
    cairn__act_fwd_span(e->k, e->act, e->alpha, e->z + off, e->a + off, (size_t)(c1 - c0));
}

/* Y = X·W + b, then A = act(Y) block by block when act is fusable. */
static cairn_status forward(const char *fn, const cairn_tensor *X, const cairn_tensor *W, const cairn_tensor *b,
                            cairn_act act, float alpha, cairn_tensor *Y, cairn_tensor *A) {
  cairn_status s = check_dense(fn, X, W, b, "Y", Y);
  if (s) return s;
  if (A) {
    char ba[96], by[96];
    if ((s = cairn__check_f32(fn, "A", A))) return s;
    if (!cairn_tensor_same_shape(A, Y))
      return cairn__fail(CAIRN_E_SHAPE, "%s: A is %s but Y is %s", fn, cairn_tensor_shape_str(A, ba, sizeof ba),
                         cairn_tensor_shape_str(Y, by, sizeof by));
  }
  const int B = (int)X->shape[0], in = (int)X->shape[1], out = (int)W->shape[1];
  if (B == 0 || out == 0) return CAIRN_OK;
  const float *bias = b ? b->data : NULL;
  struct act_ep e = {cairn__kernels(), act, alpha, Y->data, A ? A->data : NULL, out};
  cairn__gemm_epilogue ep = {act_block, &e};
  const cairn__gemm_epilogue *epp = A && cairn__act_fusable(act) ? &ep : NULL;
  if (in > 0) {
    /* Y = X·W + b: (B, in)·(in, out), each row of Y starting as b */
    cairn__sgemm_ep(0, 0, B, out, in, 1.0f, X->data, in, W->data, out, 0.0f, Y->data, out, bias, epp);
  } else {
    for (int r = 0; r < B; r++) {
      float *y = (float *)Y->data + (size_t)r * out;
      if (bias) memcpy(y, bias, (size_t)out * sizeof(float));
      else memset(y, 0, (size_t)out * sizeof(float));
    }
    if (epp) act_block(&e, 0, B, 0, out);
  }
  return CAIRN_OK;
}

cairn_status cairn_dense_forward(const cairn_tensor *X, const cairn_tensor *W, const cairn_tensor *b,
                                 cairn_tensor *Y) {
  return forward("dense_forward", X, W, b, CAIRN_ACT_IDENTITY, 0.0f, Y, NULL);
}

cairn_status cairn__dense_forward_act(const cairn_tensor *X, const cairn_tensor *W, const cairn_tensor *b,
                                      cairn_act act, float alpha, cairn_tensor *Z, cairn_tensor *A) {
  return forward("dense_forward", X, W, b, act, alpha, Z, A);
}

struct colsum_ctx {
  const float *dy; /* (B, out) */
  float *db;       /* (out) */
  size_t rows, out;
};

/* db[lo:hi] += Σ_r dY[r, lo:hi], rows in order: each thread owns columns. */
static void colsum(void *p, size_t lo, size_t hi) {
  struct colsum_ctx *c = p;
  const cairn__kernel_table *k = cairn__kernels();
  for (size_t r = 0; r < c->rows; r++) k->add(c->dy + r * c->out + lo, c->db + lo, hi - lo);
}
/* block j of 256 columns */
static void colsum_block(void *p, size_t j, size_t end) {
  const struct colsum_ctx *c = p;
  (void)end;
  colsum(p, j * 256, j * 256 + 256 < c->out ? j * 256 + 256 : c->out);
}

void cairn__dense_bias_grad(const float *dy, float *db, size_t rows, size_t out) {
  struct colsum_ctx c = {dy, db, rows, out};
  /* Threads own blocks of columns; each column is summed over rows in
   * order, so the bits do not depend on how the columns are split. */
  cairn__par_each((out + 255) / 256, rows * out >= CAIRN__PAR_MIN, colsum_block, &c);
}

cairn_status cairn__dense_backward(const cairn_tensor *X, const cairn_tensor *W, const cairn_tensor *dY,
                                   cairn_tensor *dX, cairn_tensor *dW, cairn_tensor *db, int accumulate) {
  const char *fn = "dense_backward";
  cairn_status s = check_dense(fn, X, W, db, "dY", dY);
  if (s) return s;
  if ((s = cairn__check_f32(fn, "dW", dW))) return s;
  char bw[96], bd[96];
  if (!cairn_tensor_same_shape(dW, W))
    return cairn__fail(CAIRN_E_SHAPE, "%s: dW is %s, W is %s", fn, cairn_tensor_shape_str(dW, bd, sizeof bd),
                       cairn_tensor_shape_str(W, bw, sizeof bw));
  if (dX) {
    if ((s = cairn__check_f32(fn, "dX", dX))) return s;
    if (!cairn_tensor_same_shape(dX, X))
      return cairn__fail(CAIRN_E_SHAPE, "%s: dX is %s, X is %s", fn,
                         cairn_tensor_shape_str(dX, bd, sizeof bd), cairn_tensor_shape_str(X, bw, sizeof bw));
  }
  const int B = (int)X->shape[0], in = (int)X->shape[1], out = (int)W->shape[1];
  const float beta = accumulate ? 1.0f : 0.0f;
  /* The GEMM with beta = 0 overwrites dW: zero it only when no GEMM runs
   * (a memset before it was a whole extra pass, ~6 % of the backward). */
  if (!accumulate && (B == 0 || in == 0)) memset(dW->data, 0, cairn_tensor_nbytes(dW));
  if (!accumulate && db) memset(db->data, 0, cairn_tensor_nbytes(db));
  if (dX && out == 0) memset(dX->data, 0, cairn_tensor_nbytes(dX));
  if (B == 0 || out == 0) return CAIRN_OK;
  /* dX = dY·Wᵀ: (B, out)·(out, in) */
  if (dX && in > 0)
    cairn__sgemm(0, 1, B, in, out, 1.0f, dY->data, out, W->data, out, 0.0f, dX->data, in, NULL);
  /* dW (+)= Xᵀ·dY: (in, B)·(B, out) */
  if (in > 0)
    cairn__sgemm(1, 0, in, out, B, 1.0f, X->data, in, dY->data, out, beta, dW->data, out, NULL);
  /* db (+)= Σ_B dY */
  if (db) cairn__dense_bias_grad(dY->data, db->data, (size_t)B, (size_t)out);
  return CAIRN_OK;
}

cairn_status cairn_dense_backward(const cairn_tensor *X, const cairn_tensor *W, const cairn_tensor *dY,
                                  cairn_tensor *dX, cairn_tensor *dW, cairn_tensor *db) {
  return cairn__dense_backward(X, W, dY, dX, dW, db, 1);
}
