/* Activations: shape checks, then the chosen kernels over chunks (elementwise)
 * or whole rows (softmax, log-softmax). */
#include "tensor_impl.h"

#include <string.h>

#include "cairn/nn.h"
#include "kernels/kernels.h"

#ifdef CAIRN_HAVE_OPENMP
#include <omp.h>
#endif

const char *cairn_act_name(cairn_act a) {
  switch (a) {
    case CAIRN_ACT_IDENTITY: return "identity";
    case CAIRN_ACT_RELU: return "relu";
    case CAIRN_ACT_LEAKY_RELU: return "leaky_relu";
    case CAIRN_ACT_SIGMOID: return "sigmoid";
    case CAIRN_ACT_TANH: return "tanh";
    case CAIRN_ACT_GELU: return "gelu";
    case CAIRN_ACT_GELU_TANH: return "gelu_tanh";
    case CAIRN_ACT_SOFTMAX: return "softmax";
    case CAIRN_ACT_LOG_SOFTMAX: return "log_softmax";
  }
  return "unknown";
}

/* One call shape for every kernel: in0 (x or y), in1 (dy or NULL), out. */
struct act_ctx {
  cairn_act act;
  float alpha;
  const float *in0, *in1;
  float *out;
  size_t cols; /* row length for the row-wise activations */
  const cairn__kernel_table *k;
  int stream; /* out is larger than the cache: streaming stores */
};

/* Streaming stores pay when the output exceeds the last-level cache and
 * is not one of the inputs (kernels.h). */
static int use_stream(const float *out, const float *in0, const float *in1, size_t n) {
  return n * sizeof(float) >= cairn__stream_min_bytes() && out != in0 && out != in1;
}

void cairn__act_fwd_span(const cairn__kernel_table *k, cairn_act act, float alpha, const float *x, float *y,
                         size_t n) {
  switch (act) {
    case CAIRN_ACT_RELU: k->relu_fwd(x, y, n); break;
    case CAIRN_ACT_LEAKY_RELU: k->leaky_relu_fwd(x, y, n, alpha); break;
    case CAIRN_ACT_SIGMOID: k->sigmoid_fwd(x, y, n); break;
    case CAIRN_ACT_TANH: k->tanh_fwd(x, y, n); break;
    case CAIRN_ACT_GELU: k->gelu_fwd(x, y, n); break;
    case CAIRN_ACT_GELU_TANH: k->gelu_tanh_fwd(x, y, n); break;
    default: break;
  }
}

static void fwd_range(void *p, size_t lo, size_t hi) {
  const struct act_ctx *c = p;
  cairn__kernels_stream = c->stream;
  cairn__act_fwd_span(c->k, c->act, c->alpha, c->in0 + lo, c->out + lo, hi - lo);
  cairn__kernels_stream = 0;
}

static void bwd_range(void *p, size_t lo, size_t hi) {
  const struct act_ctx *c = p;
  const cairn__kernel_table *k = c->k;
  const float *a = c->in0 + lo, *dy = c->in1 + lo;
  float *dx = c->out + lo;
  size_t n = hi - lo;
  cairn__kernels_stream = c->stream;
  switch (c->act) {
    case CAIRN_ACT_RELU: k->relu_bwd(a, dy, dx, n); break;
    case CAIRN_ACT_LEAKY_RELU: k->leaky_relu_bwd(a, dy, dx, n, c->alpha); break;
    case CAIRN_ACT_SIGMOID: k->sigmoid_bwd(a, dy, dx, n); break;
    case CAIRN_ACT_TANH: k->tanh_bwd(a, dy, dx, n); break;
    case CAIRN_ACT_GELU: k->gelu_bwd(a, dy, dx, n); break;
    case CAIRN_ACT_GELU_TANH: k->gelu_tanh_bwd(a, dy, dx, n); break;
    default: break;
  }
  cairn__kernels_stream = 0;
}

static void rows_fwd(void *p, size_t lo, size_t hi) {
  const struct act_ctx *c = p;
  for (size_t r = lo; r < hi; r++) {
    const float *x = c->in0 + r * c->cols;
    float *y = c->out + r * c->cols;
    if (c->act == CAIRN_ACT_SOFTMAX)
      c->k->softmax_row(x, y, c->cols);
    else
      c->k->log_softmax_row(x, y, c->cols);
  }
}

static void rows_bwd(void *p, size_t lo, size_t hi) {
  const struct act_ctx *c = p;
  for (size_t r = lo; r < hi; r++) {
    const float *y = c->in0 + r * c->cols, *dy = c->in1 + r * c->cols;
    float *dx = c->out + r * c->cols;
    if (c->act == CAIRN_ACT_SOFTMAX)
      c->k->softmax_bwd_row(y, dy, dx, c->cols);
    else
      c->k->log_softmax_bwd_row(y, dy, dx, c->cols);
  }
}

static int is_rowwise(cairn_act a) { return a == CAIRN_ACT_SOFTMAX || a == CAIRN_ACT_LOG_SOFTMAX; }

static cairn_status check_act(const char *fn, cairn_act a) {
  if ((unsigned)a > CAIRN_ACT_LOG_SOFTMAX) return cairn__fail(CAIRN_E_INVALID, "%s: unknown activation %d", fn, (int)a);
  return CAIRN_OK;
}

static cairn_status check_same(const char *fn, const char *an, const cairn_tensor *a, const char *bn,
                               const cairn_tensor *b) {
  cairn_status s;
  if ((s = cairn__check_f32(fn, an, a)) || (s = cairn__check_f32(fn, bn, b))) return s;
  if (!cairn_tensor_same_shape(a, b)) {
    char ba[96], bb[96];
    return cairn__fail(CAIRN_E_SHAPE, "%s: %s is %s but %s is %s", fn, an, cairn_tensor_shape_str(a, ba, sizeof ba),
                       bn, cairn_tensor_shape_str(b, bb, sizeof bb));
  }
  return CAIRN_OK;
}

static size_t row_len(const cairn_tensor *t) { return t->rank ? (size_t)t->shape[t->rank - 1] : 1; }

cairn_status cairn_act_forward(cairn_act a, float alpha, const cairn_tensor *X, cairn_tensor *Y) {
  const char *fn = "act_forward";
  cairn_status s;
  if ((s = check_act(fn, a)) || (s = check_same(fn, "X", X, "Y", Y))) return s;
  if (a == CAIRN_ACT_IDENTITY) return cairn_tensor_copy(Y, X);
  struct act_ctx c = {a, alpha, X->data, NULL, Y->data, row_len(X), cairn__kernels(),
                      use_stream(Y->data, X->data, NULL, (size_t)Y->size)};
  if (is_rowwise(a)) {
    if (c.cols > 0) cairn__par_rows((size_t)X->size / c.cols, c.cols, rows_fwd, &c);
  } else {
    cairn__par_for((size_t)X->size, fwd_range, &c);
  }
  return CAIRN_OK;
}

cairn_status cairn_act_backward(cairn_act a, float alpha, const cairn_tensor *X, const cairn_tensor *Y,
                                const cairn_tensor *dY, cairn_tensor *dX) {
  const char *fn = "act_backward";
  cairn_status s;
  if ((s = check_act(fn, a)) || (s = check_same(fn, "dY", dY, "dX", dX))) return s;
  if (a == CAIRN_ACT_IDENTITY) return cairn_tensor_copy(dX, dY);
  /* Which forward tensor the derivative is written in terms of. */
  int needs_y = a == CAIRN_ACT_SIGMOID || a == CAIRN_ACT_TANH || is_rowwise(a);
  const cairn_tensor *ref = needs_y ? Y : X;
  if ((s = check_same(fn, needs_y ? "Y" : "X", ref, "dY", dY))) return s;
  struct act_ctx c = {a, alpha, ref->data, dY->data, dX->data, row_len(dY), cairn__kernels(),
                      use_stream(dX->data, ref->data, dY->data, (size_t)dX->size)};
  if (is_rowwise(a)) {
    if (c.cols > 0) cairn__par_rows((size_t)dY->size / c.cols, c.cols, rows_bwd, &c);
  } else {
    cairn__par_for((size_t)dY->size, bwd_range, &c);
  }
  return CAIRN_OK;
}

/* ---- the backward pass with the bias gradient in the same sweep ---- */

int cairn__act_bwd_colsum_fusable(cairn_act a) {
  return a == CAIRN_ACT_RELU || a == CAIRN_ACT_LEAKY_RELU || a == CAIRN_ACT_SIGMOID || a == CAIRN_ACT_TANH;
}

struct bwd_colsum {
  struct act_ctx c;
  float *db;
  size_t rows, cols, block;
};

/* Columns [c0, c1): row by row in order, dX's segment and then db += it,
 * while the segment is still in L1. */
static void bwd_colsum_block(const struct bwd_colsum *p, size_t c0, size_t c1) {
  if (c0 >= c1) return;
  memset(p->db + c0, 0, (c1 - c0) * sizeof(float));
  for (size_t r = 0, off = 0; r < p->rows; r++, off += p->cols) {
    bwd_range((void *)&p->c, off + c0, off + c1);
    p->c.k->add(p->c.out + off + c0, p->db + c0, c1 - c0);
  }
}

void cairn__act_backward_colsum(cairn_act a, float alpha, const float *z, const float *y, const float *dy, float *dx,
                                float *db, size_t rows, size_t cols) {
  if (cols == 0) return;
  const int needs_y = a == CAIRN_ACT_SIGMOID || a == CAIRN_ACT_TANH;
  struct bwd_colsum p = {{a, alpha, needs_y ? y : z, dy, dx, cols, cairn__kernels(), 0}, db, rows, cols, cols};
  int nt = 1;
#ifdef CAIRN_HAVE_OPENMP
  if (rows * cols >= CAIRN__PAR_MIN && !omp_in_parallel()) nt = omp_get_max_threads();
#endif
  /* each thread a block of columns, on 16-float (64-byte) edges; every
   * column is summed over the rows in order whatever the blocks */
  if (nt > 1) p.block = ((cols + (size_t)nt - 1) / (size_t)nt + 15) & ~(size_t)15;
  const int nb = (int)((cols + p.block - 1) / p.block);
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
  for (int i = 0; i < nb; i++)
    bwd_colsum_block(&p, (size_t)i * p.block, (size_t)i * p.block + p.block < cols ? (size_t)i * p.block + p.block : cols);
}
