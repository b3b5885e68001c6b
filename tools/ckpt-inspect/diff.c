/* ckpt-inspect diff A B: two checkpoints compared tensor by tensor, every
 * tensor decoded and checked. */
#define _POSIX_C_SOURCE 200809L

#include "common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef enum { D_ADDED, D_REMOVED, D_DTYPE, D_SHAPE, D_VALUES, D_CLOSE } dkind;

typedef struct dresult {
  dkind kind;
  const char *name;
  const cairn_ckpt_entry *a, *b;
  uint64_t n_diff, n, n_nan; /* n_nan: pairs where only one side is NaN */
  double max_abs, max_rel;
} dresult;

static int cmp_entry(const void *x, const void *y) {
  return strcmp(((const cairn_ckpt_entry *)x)->name, ((const cairn_ckpt_entry *)y)->name);
}

static cairn_ckpt_entry *load_entries(cairn_ckpt *c, const char *path, size_t *n) {
  *n = cairn_ckpt_count(c);
  cairn_ckpt_entry *es = calloc(*n ? *n : 1, sizeof *es);
  if (!es) {
    errorf("out of memory");
    return NULL;
  }
  for (size_t i = 0; i < *n; i++) {
    cairn_status s = cairn_ckpt_entry_at(c, i, &es[i]);
    if (s != CAIRN_OK) {
      error_status(path, s);
      free(es);
      return NULL;
    }
  }
  qsort(es, *n, sizeof *es, cmp_entry);
  return es;
}

/* Element-wise comparison: a value counts as different when
 * |a - b| > atol + rtol·|b| (numpy.isclose); NaN equals NaN, infinities
 * equal themselves. max_rel is |a - b| / |b| (inf where b == 0 != a). */
/* Folds one differing pair (|a - b| = dd, reference |b| = ref) into r. */
static void note_diff(dresult *r, double dd, double ref, double atol, double rtol) {
  if (dd > r->max_abs) r->max_abs = dd;
  double rel = ref == 0 ? INFINITY : dd / ref;
  if (rel > r->max_rel) r->max_rel = rel;
  if (isinf(dd) || dd > atol + rtol * ref) r->n_diff++;
}

static void compare_values(cairn_dtype dt, const void *pa, const void *pb, uint64_t n, double atol, double rtol,
                           dresult *r) {
  r->n = n;
  for (uint64_t i = 0; i < n; i++) {
    if (dt == CAIRN_DTYPE_I64) { /* exact: doubles lose bits beyond 2^53 */
      int64_t u = get_i(dt, pa, i), v = get_i(dt, pb, i);
      if (u == v) continue;
      uint64_t d = u > v ? (uint64_t)u - (uint64_t)v : (uint64_t)v - (uint64_t)u;
      note_diff(r, (double)d, fabs((double)v), atol, rtol);
      continue;
    }
    if (dt == CAIRN_DTYPE_U64) {
      uint64_t u = get_u(dt, pa, i), v = get_u(dt, pb, i);
      if (u == v) continue;
      note_diff(r, (double)(u > v ? u - v : v - u), (double)v, atol, rtol);
      continue;
    }
    double x = get_d(dt, pa, i), y = get_d(dt, pb, i);
    if (isnan(x) || isnan(y)) {
      if (!(isnan(x) && isnan(y))) { /* NaN equals only NaN; no finite difference */
        r->n_diff++;
        r->n_nan++;
      }
      continue;
    }
    if (x == y) continue;
    double dd = (isinf(x) || isinf(y)) ? INFINITY : fabs(x - y);
    note_diff(r, dd, fabs(y), atol, rtol);
  }
}

static void fmt_num(char *b, size_t n, double v) {
  if (isinf(v))
    snprintf(b, n, "inf");
  else
    snprintf(b, n, "%.6g", v);
}

static void json_entry_brief(const cairn_ckpt_entry *e) {
  fputs("{\"name\": ", stdout);
  json_str(stdout, e->name);
  printf(", \"dtype\": \"%s\", \"shape\": ", dtype_str(e->dtype));
  json_shape(stdout, e->rank, e->shape);
  fputc('}', stdout);
}

/* diff reads every tensor of both files, so that "same" is a statement
 * about intact data: reads e into *t (NULL when its data is bad: the error
 * is printed, naming the file and tensor, and counted in *nbad). Returns
 * -1 when it could not be read for another reason (printed). */
static int diff_read(cairn_ckpt *c, const char *path, const cairn_ckpt_entry *e, cairn_tensor **t, size_t *nbad) {
  *t = NULL;
  cairn_status s = read_tensor(c, e, t);
  if (s == CAIRN_OK) return 0;
  error_tensor(path, e->name, s);
  if (!status_is_bad_file(s)) return -1;
  (*nbad)++;
  return 0;
}

/* For a tensor that is not compared (only in one file, or of another
 * dtype or shape): its data is checked all the same, through the reader's
 * chunk buffers (no copy of the tensor). As diff_read otherwise. */
static int diff_check(cairn_ckpt *c, const char *path, const cairn_ckpt_entry *e, size_t *nbad) {
  cairn_status s = cairn_ckpt_verify_tensor(c, e->name);
  if (s == CAIRN_OK) return 0;
  error_tensor(path, e->name, s);
  if (!status_is_bad_file(s)) return -1;
  (*nbad)++;
  return 0;
}

/* The second side of a compared pair, piece by piece against the first
 * held whole: diff holds one tensor and a chunk, never two tensors. */
typedef struct diff_stream {
  const options *o;
  const cairn_ckpt_entry *e;
  const unsigned char *a; /* the first side's raw bytes */
  int bytes_differ;
  dresult *r;
} diff_stream;

static cairn_status diff_piece(void *user, uint64_t off, const void *data, size_t len) {
  diff_stream *d = user;
  if (memcmp(d->a + off, data, len) == 0) return CAIRN_OK;
  d->bytes_differ = 1;
  size_t es = cairn_dtype_size(d->e->dtype);
  compare_values(d->e->dtype, d->a + off, data, len / es, d->o->atol, d->o->rtol, d->r);
  return CAIRN_OK;
}

int cmd_diff(const options *o, const char *const *args) {
  const char *arg_a = args[0], *arg_b = args[1];
  char pa[4096], pb[4096];
  if (resolve(arg_a, 1, pa, sizeof pa) != 0 || resolve(arg_b, 1, pb, sizeof pb) != 0) return EXIT_ERROR;
  cairn_ckpt *ca = NULL, *cb = NULL;
  cairn_ckpt_entry *ea = NULL, *eb = NULL;
  dresult *res = NULL;
  int rc = EXIT_ERROR;
  size_t na = 0, nb = 0, nres = 0, nsame = 0, nbad[2] = {0, 0};
  if (open_ckpt(pa, &ca) != CAIRN_OK || open_ckpt(pb, &cb) != CAIRN_OK) goto out;
  if (!(ea = load_entries(ca, pa, &na)) || !(eb = load_entries(cb, pb, &nb))) goto out;
  res = calloc(na + nb + 1, sizeof *res);
  if (!res) {
    errorf("out of memory");
    goto out;
  }
  size_t i = 0, j = 0;
  while (i < na || j < nb) {
    int c = i >= na ? 1 : j >= nb ? -1 : strcmp(ea[i].name, eb[j].name);
    dresult *r = &res[nres];
    memset(r, 0, sizeof *r);
    if (c < 0) {
      r->kind = D_REMOVED;
      r->name = ea[i].name;
      r->a = &ea[i++];
      nres++;
      if (diff_check(ca, pa, r->a, nbad) < 0) goto out;
      continue;
    }
    if (c > 0) {
      r->kind = D_ADDED;
      r->name = eb[j].name;
      r->b = &eb[j++];
      nres++;
      if (diff_check(cb, pb, r->b, nbad + 1) < 0) goto out;
      continue;
    }
    const cairn_ckpt_entry *x = &ea[i++], *y = &eb[j++];
    r->name = x->name;
    r->a = x;
    r->b = y;
    int same_shape = x->rank == y->rank;
    for (int k = 0; same_shape && k < x->rank; k++) same_shape = x->shape[k] == y->shape[k];
    if (x->dtype != y->dtype || !same_shape) {
      r->kind = x->dtype != y->dtype ? D_DTYPE : D_SHAPE;
      nres++;
      if (diff_check(ca, pa, x, nbad) < 0 || diff_check(cb, pb, y, nbad + 1) < 0) goto out;
      continue;
    }
    /* Both decoded, CRC checked, even when the index CRCs agree: equal
     * index entries say nothing about the bytes stored (a copy with a
     * flipped data bit has the same index). */
    cairn_tensor *ta = NULL;
    if (diff_read(ca, pa, x, &ta, nbad) < 0) goto out;
    if (!ta) { /* a is bad: b is checked all the same */
      if (diff_check(cb, pb, y, nbad + 1) < 0) goto out;
      continue;
    }
    diff_stream ds = {o, x, ta->data, 0, r};
    cairn_status sb = cairn_ckpt_read_pieces(cb, y->name, diff_piece, &ds);
    cairn_tensor_free(ta);
    if (sb != CAIRN_OK) {
      error_tensor(pb, y->name, sb);
      if (!status_is_bad_file(sb)) goto out;
      nbad[1]++;
      memset(r, 0, sizeof *r);
      continue;
    }
    if (!ds.bytes_differ) {
      memset(r, 0, sizeof *r);
      nsame++; /* the same bytes: no need to compare values */
    } else {
      r->name = x->name;
      r->a = x;
      r->b = y;
      r->n = elem_count(x->rank, x->shape);
      /* bytes differ but values may be equal within tolerance (or -0 vs
       * 0, NaN payloads): "close" */
      r->kind = r->n_diff ? D_VALUES : D_CLOSE;
      if (!r->n_diff) nsame++;
      nres++;
    }
  }
  /* Corrupt data is neither "same" nor "different": say so and stop. */
  if (nbad[0] || nbad[1]) {
    for (int f = 0; f < 2; f++) {
      if (!nbad[f]) continue;
      errorf("%s: %zu of %zu tensor%s cannot be read intact (corrupt data): the checkpoints are not "
             "compared; 'ckpt-inspect verify %s' checks the whole file",
             f ? pb : pa, nbad[f], f ? nb : na, (f ? nb : na) == 1 ? "" : "s", f ? pb : pa);
    }
    goto out;
  }
  size_t ndiff = 0, cnt[6] = {0};
  for (size_t k = 0; k < nres; k++) {
    cnt[res[k].kind]++;
    if (res[k].kind != D_CLOSE) ndiff++;
  }
  if (o->json) {
    fputs("{\"a\": ", stdout);
    json_str(stdout, pa);
    fputs(", \"b\": ", stdout);
    json_str(stdout, pb);
    printf(", \"same\": %s, \"atol\": ", ndiff ? "false" : "true");
    json_num(stdout, o->atol);
    fputs(", \"rtol\": ", stdout);
    json_num(stdout, o->rtol);
    printf(", \"n_same\": %zu, \"n_different\": %zu", nsame, ndiff);
    static const char *lists[] = {"added", "removed", "changed", "close"};
    for (int l = 0; l < 4; l++) {
      printf(", \"%s\": [", lists[l]);
      int first = 1;
      for (size_t k = 0; k < nres; k++) {
        const dresult *r = &res[k];
        int in = l == 0 ? r->kind == D_ADDED
               : l == 1 ? r->kind == D_REMOVED
               : l == 2 ? (r->kind == D_DTYPE || r->kind == D_SHAPE || r->kind == D_VALUES)
                        : r->kind == D_CLOSE;
        if (!in) continue;
        fputs(first ? "\n  " : ",\n  ", stdout);
        first = 0;
        if (l == 0) {
          json_entry_brief(r->b);
          continue;
        }
        if (l == 1) {
          json_entry_brief(r->a);
          continue;
        }
        fputs("{\"name\": ", stdout);
        json_str(stdout, r->name);
        printf(", \"change\": \"%s\", \"dtype_a\": \"%s\", \"dtype_b\": \"%s\", \"shape_a\": ",
               r->kind == D_DTYPE ? "dtype" : r->kind == D_SHAPE ? "shape" : "values", dtype_str(r->a->dtype),
               dtype_str(r->b->dtype));
        json_shape(stdout, r->a->rank, r->a->shape);
        fputs(", \"shape_b\": ", stdout);
        json_shape(stdout, r->b->rank, r->b->shape);
        if (r->kind == D_VALUES || r->kind == D_CLOSE) {
          printf(", \"n_elements\": %llu, \"n_different\": %llu, \"n_nan_mismatch\": %llu, \"max_abs_diff\": ",
                 (unsigned long long)r->n, (unsigned long long)r->n_diff, (unsigned long long)r->n_nan);
          json_num(stdout, r->max_abs);
          fputs(", \"max_rel_diff\": ", stdout);
          json_num(stdout, r->max_rel);
        }
        fputc('}', stdout);
      }
      fputs(first ? "]" : "\n]", stdout);
    }
    fputs("}\n", stdout);
  } else {
    char s1[256], s2[256], n1[32], n2[32];
    fputs("--- ", stdout);
    put_esc(stdout, pa);
    fputs("\n+++ ", stdout);
    put_esc(stdout, pb);
    fputc('\n', stdout);
    for (size_t k = 0; k < nres; k++) {
      const dresult *r = &res[k];
      switch (r->kind) {
        case D_ADDED:
        case D_REMOVED: {
          const cairn_ckpt_entry *e = r->kind == D_ADDED ? r->b : r->a;
          shape_str(s1, sizeof s1, e->rank, e->shape);
          fputs(r->kind == D_ADDED ? "added:   " : "removed: ", stdout);
          put_esc(stdout, r->name);
          printf("  %s %s\n", dtype_str(e->dtype), s1);
          break;
        }
        case D_DTYPE:
        case D_SHAPE: /* "dtype:   NAME  f32 (2,) -> f64 (2,)", "shape:   NAME  f32 (2,) -> (3,)" */
          shape_str(s1, sizeof s1, r->a->rank, r->a->shape);
          shape_str(s2, sizeof s2, r->b->rank, r->b->shape);
          fputs(r->kind == D_DTYPE ? "dtype:   " : "shape:   ", stdout);
          put_esc(stdout, r->name);
          printf("  %s %s -> %s%s%s\n", dtype_str(r->a->dtype), s1, r->kind == D_DTYPE ? dtype_str(r->b->dtype) : "",
                 r->kind == D_DTYPE ? " " : "", s2);
          break;
        case D_VALUES:
        case D_CLOSE:
          fmt_num(n1, sizeof n1, r->max_abs);
          fmt_num(n2, sizeof n2, r->max_rel);
          fputs(r->kind == D_VALUES ? "values:  " : "close:   ", stdout);
          put_esc(stdout, r->name);
          if (r->kind == D_VALUES) {
            printf("  %llu of %llu elements differ", (unsigned long long)r->n_diff, (unsigned long long)r->n);
            if (r->n_nan) printf(" (%llu NaN on one side only)", (unsigned long long)r->n_nan);
            printf(", max abs diff %s, max rel diff %s\n", n1, n2);
          }
          else
            printf("  equal within tolerance (max abs diff %s, max rel diff %s)\n", n1, n2);
          break;
      }
    }
    printf("# %zu same, %zu different (%zu added, %zu removed, %zu dtype, %zu shape, %zu values)\n", nsame,
           ndiff, cnt[D_ADDED], cnt[D_REMOVED], cnt[D_DTYPE], cnt[D_SHAPE], cnt[D_VALUES]);
  }
  rc = ndiff ? EXIT_DIFFERENT : EXIT_OK_;
out:
  free(res);
  free(ea);
  free(eb);
  cairn_ckpt_close(ca);
  cairn_ckpt_close(cb);
  return rc;
}
