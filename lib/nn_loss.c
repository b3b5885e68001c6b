/* Losses (mean over the batch) and the accuracy metric. Row losses are
 * summed per fixed chunk of rows and the chunks added in order
 * (cairn__par_rows_sum), so the loss has the same bits for any thread count. */
#include "tensor_impl.h"

#include "cairn/nn.h"
#include "kernels/kernels.h"

struct loss_ctx {
  const float *x;      /* logits or predictions */
  const float *zf;     /* f32 labels/targets, or NULL */
  const int32_t *zi;   /* i32 labels, or NULL */
  float *dx;           /* gradient or NULL */
  size_t cols;
  float scale;         /* 1/B or 1/size: d(mean)/d(sum) */
  const cairn__kernel_table *k;
};

static double xent_rows(void *p, size_t lo, size_t hi) {
  const struct loss_ctx *c = p;
  double s = 0.0;
  for (size_t r = lo; r < hi; r++) {
    size_t o = r * c->cols;
    float *dx = c->dx ? c->dx + o : NULL;
    s += c->zi ? c->k->sparse_xent_row(c->x + o, c->zi[r], dx, c->cols, c->scale)
               : c->k->xent_row(c->x + o, c->zf + o, dx, c->cols, c->scale);
  }
  return s;
}

static double sigmoid_range(void *p, size_t lo, size_t hi) {
  const struct loss_ctx *c = p;
  return c->k->sigmoid_xent(c->x + lo, c->zf + lo, c->dx ? c->dx + lo : NULL, hi - lo, c->scale);
}

static double mse_range(void *p, size_t lo, size_t hi) {
  const struct loss_ctx *c = p;
  return c->k->mse(c->x + lo, c->zf + lo, c->dx ? c->dx + lo : NULL, hi - lo, c->scale);
}

static cairn_status check_grad(const char *fn, const cairn_tensor *x, const cairn_tensor *d) {
  if (!d) return CAIRN_OK;
  cairn_status s = cairn__check_f32(fn, "gradient", d);
  if (s) return s;
  if (!cairn_tensor_same_shape(x, d)) {
    char a[96], b[96];
    return cairn__fail(CAIRN_E_SHAPE, "%s: gradient is %s, input is %s", fn, cairn_tensor_shape_str(d, a, sizeof a),
                       cairn_tensor_shape_str(x, b, sizeof b));
  }
  return CAIRN_OK;
}

/* logits (B, C) f32 with B > 0, C > 0. */
static cairn_status check_logits(const char *fn, const cairn_tensor *logits, const float *loss) {
  cairn_status s;
  if (!loss) return cairn__fail(CAIRN_E_NULL, "%s: loss is NULL", fn);
  if ((s = cairn__check_f32(fn, "logits", logits)) || (s = cairn__check_rank(fn, "logits", logits, 2))) return s;
  if (logits->shape[0] == 0) return cairn__fail(CAIRN_E_INVALID, "%s: empty batch (B = 0): the mean is undefined", fn);
  if (logits->shape[1] == 0) return cairn__fail(CAIRN_E_SHAPE, "%s: logits have 0 classes", fn);
  return CAIRN_OK;
}

/* labels (B) i32 with every value in [0, C). */
static cairn_status check_class_ids(const char *fn, const cairn_tensor *logits, const cairn_tensor *labels) {
  cairn_status s;
  if (!labels) return cairn__fail(CAIRN_E_NULL, "%s: labels is NULL", fn);
  if (labels->dtype != CAIRN_DTYPE_I32)
    return cairn__fail(CAIRN_E_DTYPE, "%s: labels are %s, expected i32 class ids", fn, cairn_dtype_name(labels->dtype));
  if ((s = cairn__check_rank(fn, "labels", labels, 1))) return s;
  if (labels->shape[0] != logits->shape[0]) {
    char a[96];
    return cairn__fail(CAIRN_E_SHAPE, "%s: %lld labels for logits %s", fn, (long long)labels->shape[0],
                       cairn_tensor_shape_str(logits, a, sizeof a));
  }
  const int32_t *y = labels->data;
  for (int64_t r = 0; r < labels->shape[0]; r++)
    if (y[r] < 0 || y[r] >= logits->shape[1])
      return cairn__fail(CAIRN_E_INVALID, "%s: label %d of row %lld is outside [0, %lld)", fn, y[r], (long long)r,
                         (long long)logits->shape[1]);
  return CAIRN_OK;
}

/* z must have x's shape: "<fn>: <z_is> (2, 3), <x_is> (2, 4)" if not. */
static cairn_status same_shape(const char *fn, const char *z_is, const cairn_tensor *z, const char *x_is,
                               const cairn_tensor *x) {
  if (cairn_tensor_same_shape(x, z)) return CAIRN_OK;
  char a[96], b[96];
  return cairn__fail(CAIRN_E_SHAPE, "%s: %s %s, %s %s", fn, z_is, cairn_tensor_shape_str(z, a, sizeof a), x_is,
                     cairn_tensor_shape_str(x, b, sizeof b));
}

/* The mean softmax cross-entropy over the B rows of logits (B, C), against
 * probabilities (B, C) or class ids (B,); its gradient into dlogits when
 * given. */
static float xent_mean(const cairn_tensor *logits, const float *probs, const int32_t *ids, cairn_tensor *dlogits) {
  size_t B = (size_t)logits->shape[0], C = (size_t)logits->shape[1];
  struct loss_ctx c = {logits->data, probs, ids, dlogits ? dlogits->data : NULL, C, 1.0f / (float)B,
                       cairn__kernels()};
  return (float)(cairn__par_rows_sum(B, C, xent_rows, &c) / (double)B);
}

cairn_status cairn_loss_softmax_xent(const cairn_tensor *logits, const cairn_tensor *labels, float *loss,
                                     cairn_tensor *dlogits) {
  const char *fn = "loss_softmax_xent";
  cairn_status s;
  if ((s = check_logits(fn, logits, loss)) || (s = cairn__check_f32(fn, "labels", labels)) ||
      (s = check_grad(fn, logits, dlogits)))
    return s;
  if ((s = same_shape(fn, "labels are", labels, "logits are", logits))) return s;
  *loss = xent_mean(logits, labels->data, NULL, dlogits);
  return CAIRN_OK;
}

cairn_status cairn_loss_sparse_softmax_xent(const cairn_tensor *logits, const cairn_tensor *labels, float *loss,
                                            cairn_tensor *dlogits) {
  const char *fn = "loss_sparse_softmax_xent";
  cairn_status s;
  if ((s = check_logits(fn, logits, loss)) || (s = check_class_ids(fn, logits, labels)) ||
      (s = check_grad(fn, logits, dlogits)))
    return s;
  *loss = xent_mean(logits, NULL, labels->data, dlogits);
  return CAIRN_OK;
}

/* Elementwise losses: x and z of one non-empty shape; mean over all elements. */
static cairn_status elementwise_loss(const char *fn, const cairn_tensor *x, const cairn_tensor *z, float *loss,
                                     cairn_tensor *d, cairn__range_sum_fn range) {
  cairn_status s;
  if (!loss) return cairn__fail(CAIRN_E_NULL, "%s: loss is NULL", fn);
  if ((s = cairn__check_f32(fn, "input", x)) || (s = cairn__check_f32(fn, "target", z)) ||
      (s = check_grad(fn, x, d)))
    return s;
  if ((s = same_shape(fn, "target is", z, "input is", x))) return s;
  if (x->size == 0) return cairn__fail(CAIRN_E_INVALID, "%s: empty input: the mean is undefined", fn);
  struct loss_ctx c = {x->data, z->data, NULL, d ? d->data : NULL, 0, 1.0f / (float)x->size, cairn__kernels()};
  *loss = (float)(cairn__par_sum((size_t)x->size, range, &c) / (double)x->size);
  return CAIRN_OK;
}

cairn_status cairn_loss_sigmoid_xent(const cairn_tensor *logits, const cairn_tensor *labels, float *loss,
                                     cairn_tensor *dlogits) {
  return elementwise_loss("loss_sigmoid_xent", logits, labels, loss, dlogits, sigmoid_range);
}

cairn_status cairn_loss_mse(const cairn_tensor *pred, const cairn_tensor *target, float *loss, cairn_tensor *dpred) {
  return elementwise_loss("loss_mse", pred, target, loss, dpred, mse_range);
}

cairn_status cairn_metric_accuracy(const cairn_tensor *logits, const cairn_tensor *labels, float *accuracy) {
  const char *fn = "metric_accuracy";
  cairn_status s;
  if (!accuracy) return cairn__fail(CAIRN_E_NULL, "%s: accuracy is NULL", fn);
  if ((s = check_logits(fn, logits, accuracy)) || (s = check_class_ids(fn, logits, labels))) return s;
  const float *x = logits->data;
  const int32_t *y = labels->data;
  int64_t B = logits->shape[0], C = logits->shape[1], hits = 0;
  for (int64_t r = 0; r < B; r++) {
    const float *row = x + r * C;
    int64_t best = 0;
    for (int64_t j = 1; j < C; j++)
      if (row[j] > row[best]) best = j;
    hits += best == y[r];
  }
  *accuracy = (float)((double)hits / (double)B);
  return CAIRN_OK;
}
