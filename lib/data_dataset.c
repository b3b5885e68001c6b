/* The in-memory dataset iterator.
 *
 * The whole position is (epoch, position): epochs completed and examples
 * consumed in the current epoch. Epoch e's order is the identity, or with
 * shuffle a Fisher–Yates permutation driven by the Philox stream
 * (seed, stream e), so it is a pure function of (seed, e): resuming needs
 * those two integers and nothing else, whatever the batch size. The
 * permutation buffer is allocated once by _new and refilled when a batch is
 * first served from a new epoch, so next() allocates nothing.
 */
#include "tensor_impl.h"

#include <stdlib.h>
#include <string.h>

#include "cairn/data.h"
#include "cairn/rng.h"

struct cairn_dataset {
  const cairn_tensor *x; /* (N, ...) f32 */
  const cairn_tensor *y; /* (N) i32, or NULL */
  cairn_dataset_config cfg;
  int64_t n;          /* N */
  int64_t row;        /* f32 elements per example: x->size / N */
  int64_t epoch;      /* epochs completed */
  int64_t position;   /* examples consumed in the current epoch */
  int64_t *perm;      /* (N) order of epoch perm_epoch; NULL without shuffle */
  int64_t perm_epoch; /* -1: perm holds nothing yet */
};

cairn_status cairn_dataset_new(const cairn_tensor *x, const cairn_tensor *y, const cairn_dataset_config *cfg,
                               cairn_dataset **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "dataset_new: out is NULL");
  *out = NULL;
  if (!cfg) return cairn__fail(CAIRN_E_NULL, "dataset_new: cfg is NULL");
  cairn_status s = cairn__check_f32("dataset_new", "x", x);
  if (s) return s;
  char a[96], b[96];
  if (x->rank < 1) return cairn__fail(CAIRN_E_SHAPE, "dataset_new: x is a scalar, expected (N, ...)");
  const int64_t n = x->shape[0];
  if (n == 0) return cairn__fail(CAIRN_E_INVALID, "dataset_new: x is %s: no examples",
                                 cairn_tensor_shape_str(x, a, sizeof a));
  if (y) {
    if (y->dtype != CAIRN_DTYPE_I32)
      return cairn__fail(CAIRN_E_DTYPE, "dataset_new: y is %s, expected i32", cairn_dtype_name(y->dtype));
    if (y->rank != 1 || y->shape[0] != n)
      return cairn__fail(CAIRN_E_SHAPE, "dataset_new: x is %s but y is %s, expected (%lld)",
                         cairn_tensor_shape_str(x, a, sizeof a), cairn_tensor_shape_str(y, b, sizeof b),
                         (long long)n);
    if (!y->data) return cairn__fail(CAIRN_E_NULL, "dataset_new: y has no data");
  }
  if (cfg->batch_size <= 0)
    return cairn__fail(CAIRN_E_INVALID, "dataset_new: batch_size is %lld, must be > 0", (long long)cfg->batch_size);
  if (cfg->num_epochs < 0)
    return cairn__fail(CAIRN_E_INVALID, "dataset_new: num_epochs is %lld, must be >= 0 (0: forever)",
                       (long long)cfg->num_epochs);
  if (cfg->drop_remainder && cfg->batch_size > n)
    return cairn__fail(CAIRN_E_INVALID,
                       "dataset_new: drop_remainder with batch_size %lld > N = %lld would yield no batch",
                       (long long)cfg->batch_size, (long long)n);

  cairn_dataset *d = calloc(1, sizeof *d);
  if (!d) return cairn__fail(CAIRN_E_NOMEM, "dataset_new: out of memory");
  if (cfg->shuffle) {
    if ((uint64_t)n > SIZE_MAX / sizeof *d->perm || !(d->perm = malloc((size_t)n * sizeof *d->perm))) {
      free(d);
      return cairn__fail(CAIRN_E_NOMEM, "dataset_new: cannot allocate the permutation of %lld examples",
                         (long long)n);
    }
  }
  d->x = x;
  d->y = y;
  d->cfg = *cfg;
  d->cfg.shuffle = cfg->shuffle != 0;
  d->cfg.drop_remainder = cfg->drop_remainder != 0;
  d->n = n;
  d->row = x->size / n;
  d->perm_epoch = -1;
  *out = d;
  return CAIRN_OK;
}

void cairn_dataset_free(cairn_dataset *d) {
  if (!d) return;
  free(d->perm);
  free(d);
}

/* Epoch e's order: Fisher–Yates (Knuth, TAOCP vol. 2, Algorithm P) on the
 * identity, j drawn from [0, i] by the stream (seed, e). */
static void make_perm(cairn_dataset *d, int64_t epoch) {
  cairn_rng r;
  cairn_rng_init(&r, d->cfg.seed, (uint64_t)epoch);
  int64_t *p = d->perm;
  for (int64_t i = 0; i < d->n; i++) p[i] = i;
  for (int64_t i = d->n - 1; i > 0; i--) {
    int64_t j = (int64_t)cairn_rng_below(&r, (uint64_t)i + 1);
    int64_t t = p[i];
    p[i] = p[j];
    p[j] = t;
  }
  d->perm_epoch = epoch;
}

/* Rows a batch may still take from the current epoch (0: epoch is over). */
static int64_t batch_rows(const cairn_dataset *d) {
  int64_t left = d->n - d->position, b = d->cfg.batch_size;
  if (left >= b) return b;
  return d->cfg.drop_remainder ? 0 : left;
}

/* Checks that xb can hold batch_size rows shaped like x's. */
static cairn_status check_xb(const cairn_dataset *d, const cairn_tensor *xb) {
  cairn_status s = cairn__check_f32("dataset_next", "xb", xb);
  if (s) return s;
  char a[96], b[96];
  int same = xb->rank == d->x->rank;
  for (int i = 1; same && i < xb->rank; i++) same = xb->shape[i] == d->x->shape[i];
  if (!same)
    return cairn__fail(CAIRN_E_SHAPE, "dataset_next: xb is %s, x is %s: dimensions after the first must match",
                       cairn_tensor_shape_str(xb, a, sizeof a), cairn_tensor_shape_str(d->x, b, sizeof b));
  if (d->row > 0 && xb->capacity / d->row < d->cfg.batch_size)
    return cairn__fail(CAIRN_E_SHAPE, "dataset_next: xb %s has room for %lld rows, batch_size is %lld",
                       cairn_tensor_shape_str(xb, a, sizeof a), (long long)(xb->capacity / d->row),
                       (long long)d->cfg.batch_size);
  return CAIRN_OK;
}

static cairn_status check_yb(const cairn_dataset *d, const cairn_tensor *yb) {
  char a[96];
  if (!d->y) return cairn__fail(CAIRN_E_INVALID, "dataset_next: yb given but the dataset has no labels");
  if (yb->dtype != CAIRN_DTYPE_I32)
    return cairn__fail(CAIRN_E_DTYPE, "dataset_next: yb is %s, expected i32", cairn_dtype_name(yb->dtype));
  if (yb->rank != 1 || yb->capacity < d->cfg.batch_size)
    return cairn__fail(CAIRN_E_SHAPE, "dataset_next: yb is %s (room for %lld), expected (%lld)",
                       cairn_tensor_shape_str(yb, a, sizeof a), (long long)yb->capacity,
                       (long long)d->cfg.batch_size);
  if (!yb->data) return cairn__fail(CAIRN_E_NULL, "dataset_next: yb has no data");
  return CAIRN_OK;
}

static int all_done(const cairn_dataset *d) {
  return d->cfg.num_epochs > 0 && d->epoch >= d->cfg.num_epochs;
}

static cairn_status out_of_range(const cairn_dataset *d) {
  return cairn__fail(CAIRN_E_OUT_OF_RANGE, "dataset_next: all %lld epochs are done (reset to start again)",
                     (long long)d->cfg.num_epochs);
}

cairn_status cairn_dataset_next(cairn_dataset *d, cairn_tensor *xb, cairn_tensor *yb) {
  if (!d) return cairn__fail(CAIRN_E_NULL, "dataset_next: dataset is NULL");
  cairn_status s = check_xb(d, xb);
  if (!s && yb) s = check_yb(d, yb);
  if (s) return s;

  if (all_done(d)) return out_of_range(d);
  int64_t rows = batch_rows(d);
  if (rows == 0) { /* only after importing a position at the end of an epoch */
    d->epoch++;
    d->position = 0;
    if (all_done(d)) return out_of_range(d);
    rows = batch_rows(d); /* > 0: _new rejects drop_remainder with batch_size > N */
  }

  /* x is (N, ...) with `row` elements per example; xb gets rows × row. */
  const size_t rb = (size_t)d->row * sizeof(float);
  const float *x = d->x->data;
  const int32_t *y = d->y ? d->y->data : NULL;
  float *xo = xb->data;
  int32_t *yo = yb ? yb->data : NULL;
  if (!d->cfg.shuffle) {
    if (rb) memcpy(xo, x + d->position * d->row, (size_t)rows * rb);
    if (yo) memcpy(yo, y + d->position, (size_t)rows * sizeof *yo);
  } else {
    if (d->perm_epoch != d->epoch) make_perm(d, d->epoch);
    const int64_t *p = d->perm + d->position;
    if (rb)
      for (int64_t i = 0; i < rows; i++) memcpy(xo + i * d->row, x + p[i] * d->row, rb);
    if (yo)
      for (int64_t i = 0; i < rows; i++) yo[i] = y[p[i]];
  }
  /* Both fit: checked above against batch_size >= rows. */
  s = cairn_tensor_set_rows(xb, rows);
  if (!s && yb) s = cairn_tensor_set_rows(yb, rows);
  if (s) return s;

  d->position += rows;
  if (batch_rows(d) == 0) { /* the epoch is over: the state says so at once */
    d->epoch++;
    d->position = 0;
  }
  return CAIRN_OK;
}

void cairn_dataset_reset(cairn_dataset *d) {
  if (!d) return;
  d->epoch = 0;
  d->position = 0;
}

int64_t cairn_dataset_size(const cairn_dataset *d) { return d ? d->n : 0; }

int64_t cairn_dataset_batches_per_epoch(const cairn_dataset *d) {
  if (!d) return 0;
  int64_t b = d->cfg.batch_size;
  return d->n / b + (!d->cfg.drop_remainder && d->n % b != 0);
}

void cairn_dataset_export(const cairn_dataset *d, cairn_dataset_state *st) {
  if (!d || !st) return;
  st->seed = d->cfg.seed;
  st->size = d->n;
  st->epoch = d->epoch;
  st->position = d->position;
}

cairn_status cairn_dataset_import(cairn_dataset *d, const cairn_dataset_state *st) {
  if (!d || !st) return cairn__fail(CAIRN_E_NULL, "dataset_import: %s is NULL", d ? "state" : "dataset");
  if (st->seed != d->cfg.seed)
    return cairn__fail(CAIRN_E_INVALID, "dataset_import: state has seed %llu, dataset has seed %llu",
                       (unsigned long long)st->seed, (unsigned long long)d->cfg.seed);
  if (st->size != d->n)
    return cairn__fail(CAIRN_E_INVALID, "dataset_import: state has size %lld, dataset has size %lld",
                       (long long)st->size, (long long)d->n);
  if (st->epoch < 0 || st->epoch == INT64_MAX)
    return cairn__fail(CAIRN_E_INVALID, "dataset_import: state has epoch %lld, outside [0, INT64_MAX)",
                       (long long)st->epoch);
  if (st->position < 0 || st->position > d->n)
    return cairn__fail(CAIRN_E_INVALID, "dataset_import: state has position %lld, outside [0, %lld]",
                       (long long)st->position, (long long)d->n);
  d->epoch = st->epoch;
  d->position = st->position;
  /* perm stays valid: it depends on (seed, perm_epoch) only. */
  return CAIRN_OK;
}
