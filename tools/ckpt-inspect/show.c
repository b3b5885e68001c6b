/* ckpt-inspect show CKPT NAME: one tensor's statistics and values, printed
 * as numpy prints them. */
#define _POSIX_C_SOURCE 200809L

#include "common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define EDGE_ITEMS 3
#define THRESHOLD 1000
/* NumPy's linewidth is 75, less 1 for the suffix ("," or ")") array_repr passes. */
#define LINE_WIDTH 74
#define MAX_FRAC 8 /* NumPy's default precision */

typedef struct fmt {
  cairn_dtype dt;
  const void *data;
  int rank;
  const int64_t *shape;
  uint64_t stride[CAIRN_MAX_RANK];
  int summarize;
  /* floats */
  int exp_mode, precision, pad_left, pad_right, exp_size;
  int any_finite;
  double max_abs, min_abs; /* over finite non-zero displayed values */
  int have_nonzero;
  /* integers and bool */
  int width;
} fmt;

typedef void (*visit_fn)(fmt *f, uint64_t i);

/* Visits the displayed elements (with summarization, the first and last
 * EDGE_ITEMS of every long axis) in order. */
static void visit(fmt *f, int dim, uint64_t off, visit_fn fn) {
  if (dim == f->rank) {
    fn(f, off);
    return;
  }
  int64_t n = f->shape[dim];
  int summary = f->summarize && n > 2 * EDGE_ITEMS;
  for (int64_t i = 0; i < n; i++) {
    if (summary && i == EDGE_ITEMS) i = n - EDGE_ITEMS;
    visit(f, dim + 1, off + (uint64_t)i * f->stride[dim], fn);
  }
}

/* v in positional (sci 0: "%.*f") or scientific (sci 1: "%.*e") notation
 * with d digits after the point. */
static void print_digits(char *b, size_t n, double v, int d, int sci) {
  if (sci) snprintf(b, n, "%.*e", d, v);
  else snprintf(b, n, "%.*f", d, v);
}

/* The digits after the point numpy gives v: the fewest that read back as v
 * in dt; when MAX_FRAC do not, that many less the trailing zeros. */
static int frac_digits(double v, cairn_dtype dt, int sci) {
  char b[400];
  for (int d = 0; d <= MAX_FRAC; d++) {
    print_digits(b, sizeof b, v, d, sci);
    if (narrow(strtod(b, NULL), dt) == v) return d;
  }
  print_digits(b, sizeof b, v, MAX_FRAC, sci);
  const char *end = sci ? strchr(b, 'e') : b + strlen(b);
  int d = MAX_FRAC;
  while (d > 0 && end[-1] == '0') {
    end--;
    d--;
  }
  return d;
}

static void scan_range(fmt *f, uint64_t i) {
  double v = get_d(f->dt, f->data, i);
  if (!isfinite(v)) return;
  f->any_finite = 1;
  double a = fabs(v);
  if (a == 0) return;
  if (!f->have_nonzero || a > f->max_abs) f->max_abs = a;
  if (!f->have_nonzero || a < f->min_abs) f->min_abs = a;
  f->have_nonzero = 1;
}

/* Splits a "%.*f"/"%.*e" string into integer-part length. */
static int int_part_len(const char *s) {
  const char *d = strchr(s, '.');
  if (d) return (int)(d - s);
  const char *e = strchr(s, 'e');
  return e ? (int)(e - s) : (int)strlen(s);
}

static void scan_widths(fmt *f, uint64_t i) {
  double v = get_d(f->dt, f->data, i);
  char b[400];
  if (dtype_is_float(f->dt)) {
    if (!isfinite(v)) return;
    if (f->exp_mode) {
      int d = frac_digits(v, f->dt, 1);
      if (d > f->precision) f->precision = d;
    } else {
      int d = frac_digits(v, f->dt, 0);
      if (d > f->pad_right) f->pad_right = d;
      snprintf(b, sizeof b, "%.*f", d, v);
      int il = int_part_len(b);
      if (il > f->pad_left) f->pad_left = il;
    }
  } else if (f->dt == CAIRN_DTYPE_BOOL) {
    f->width = 5;
  } else {
    if (dtype_is_signed(f->dt))
      snprintf(b, sizeof b, "%lld", (long long)get_i(f->dt, f->data, i));
    else
      snprintf(b, sizeof b, "%llu", (unsigned long long)get_u(f->dt, f->data, i));
    if ((int)strlen(b) > f->width) f->width = (int)strlen(b);
  }
}

/* Exponent mode, once the precision is known: int part and exponent widths. */
static void scan_exp_widths(fmt *f, uint64_t i) {
  double v = get_d(f->dt, f->data, i);
  if (!isfinite(v)) return;
  char b[64];
  snprintf(b, sizeof b, "%.*e", f->precision, v);
  int il = int_part_len(b);
  if (il > f->pad_left) f->pad_left = il;
  const char *e = strchr(b, 'e');
  int es = (int)strlen(e + 2);
  if (es > f->exp_size) f->exp_size = es;
}

static void scan_nonfinite(fmt *f, uint64_t i) {
  double v = get_d(f->dt, f->data, i);
  if (!isfinite(v)) {
    int w = isnan(v) ? 3 : 3 + (v < 0);
    int offset = f->pad_right + 1;
    if (w - offset > f->pad_left) f->pad_left = w - offset;
  }
}

/* Formats element i as NumPy would with the widths found by the scans. */
static void format_elem(const fmt *f, uint64_t i, char *out, size_t n) {
  double v = get_d(f->dt, f->data, i);
  char b[400];
  if (dtype_is_float(f->dt)) {
    if (!isfinite(v)) {
      const char *s = isnan(v) ? "nan" : v < 0 ? "-inf" : "inf";
      int total = f->pad_left + f->pad_right + 1;
      snprintf(out, n, "%*s", total, s);
      return;
    }
    if (f->exp_mode) {
      /* "-1.50e-05": mantissa int part padded left, exponent digits to exp_size */
      snprintf(b, sizeof b, "%.*e", f->precision, v);
      char *e = strchr(b, 'e');
      *e = '\0';
      int il = int_part_len(b);
      snprintf(out, n, "%*s%s%se%c%0*d", f->pad_left - il, "", b, f->precision == 0 ? "." : "", e[1],
               f->exp_size, atoi(e + 2));
    } else {
      int d = frac_digits(v, f->dt, 0);
      snprintf(b, sizeof b, "%.*f%s", d, v, d == 0 ? "." : "");
      int il = int_part_len(b);
      int frac = d;
      snprintf(out, n, "%*s%s%*s", f->pad_left - il, "", b, f->pad_right - frac, "");
    }
  } else if (f->dt == CAIRN_DTYPE_BOOL) {
    snprintf(out, n, "%*s", f->width, get_d(f->dt, f->data, i) != 0 ? "True" : "False");
  } else if (dtype_is_signed(f->dt)) {
    snprintf(out, n, "%*lld", f->width, (long long)get_i(f->dt, f->data, i));
  } else {
    snprintf(out, n, "%*llu", f->width, (unsigned long long)get_u(f->dt, f->data, i));
  }
}

/* Output of the array printer, tracking the column for the dtype suffix. */
static int g_col;
static void out_str(const char *s) {
  for (; *s; s++) {
    putchar(*s);
    g_col = *s == '\n' ? 0 : g_col + 1;
  }
}
static void out_ch(char c) {
  char b[2] = {c, 0};
  out_str(b);
}
static void put_spaces(int n) {
  for (int i = 0; i < n; i++) out_ch(' ');
}

/* NumPy's _formatArray, streamed: "[" is at column hang-1, the content
 * starts at column hang. */
static void print_rec(const fmt *f, int dim, uint64_t off, int hang, int width) {
  int64_t n = f->shape[dim];
  int summary = f->summarize && n > 2 * EDGE_ITEMS;
  int axes_left = f->rank - dim;
  out_ch('[');
  if (axes_left == 1) {
    int elem_width = width - 1;
    int col = hang;
    char word[512];
    for (int64_t i = 0; i < n; i++) {
      int is_summary = summary && i == EDGE_ITEMS;
      if (is_summary)
        snprintf(word, sizeof word, "...");
      else
        format_elem(f, off + (uint64_t)i * f->stride[dim], word, sizeof word);
      int wl = (int)strlen(word);
      if (i > 0) {
        if (col + wl > elem_width && col > hang + 0) {
          out_ch('\n');
          put_spaces(hang);
          col = hang;
        } else {
          out_ch(' ');
        }
      }
      out_str(word);
      col += wl;
      if (i + 1 < n) {
        out_ch(',');
        col += 2; /* ", " as NumPy counts it */
      }
      if (is_summary) i = n - EDGE_ITEMS - 1;
    }
  } else {
    for (int64_t i = 0; i < n; i++) {
      if (i > 0) {
        out_ch(',');
        for (int k = 0; k < axes_left - 1; k++) out_ch('\n');
        put_spaces(hang);
      }
      if (summary && i == EDGE_ITEMS) {
        out_str("...");
        i = n - EDGE_ITEMS - 1;
        continue;
      }
      print_rec(f, dim + 1, off + (uint64_t)i * f->stride[dim], hang + 1, width - 1);
    }
  }
  out_ch(']');
}

static void print_array(const cairn_ckpt_entry *e, const void *data, int all) {
  fmt f;
  memset(&f, 0, sizeof f);
  f.dt = e->dtype;
  f.data = data;
  f.rank = e->rank;
  f.shape = e->shape;
  uint64_t count = elem_count(e->rank, e->shape);
  f.summarize = !all && count > THRESHOLD;
  uint64_t s = 1;
  for (int k = e->rank - 1; k >= 0; k--) {
    f.stride[k] = s;
    s *= (uint64_t)e->shape[k];
  }
  const char *np = numpy_name(e->dtype);
  int default_dtype = e->dtype == CAIRN_DTYPE_F64 || e->dtype == CAIRN_DTYPE_I64 || e->dtype == CAIRN_DTYPE_BOOL;
  if (count == 0) {
    char shp[256];
    shape_str(shp, sizeof shp, e->rank, e->shape);
    if (e->rank == 1)
      printf("array([], dtype=%s)\n", np);
    else
      printf("array([], shape=%s, dtype=%s)\n", shp, np);
    return;
  }
  if (dtype_is_float(f.dt)) {
    visit(&f, 0, 0, scan_range);
    f.exp_mode = f.have_nonzero && (f.max_abs >= 1e8 || f.min_abs < 1e-4 || f.max_abs / f.min_abs > 1e3);
  }
  visit(&f, 0, 0, scan_widths);
  if (dtype_is_float(f.dt)) {
    if (f.exp_mode && f.any_finite) {
      visit(&f, 0, 0, scan_exp_widths);
      f.pad_right = f.exp_size + 2 + f.precision;
    }
    visit(&f, 0, 0, scan_nonfinite);
  }
  g_col = 0;
  out_str("array(");
  if (e->rank == 0) {
    char word[512];
    format_elem(&f, 0, word, sizeof word);
    /* a scalar has no padding to share */
    const char *w = word;
    while (*w == ' ') w++;
    out_str(w);
  } else {
    print_rec(&f, 0, 0, 7, LINE_WIDTH);
  }
  if (default_dtype) {
    puts(")");
  } else {
    /* NumPy moves the dtype to its own line when it would pass column 75. */
    int wrap = g_col + 1 + 7 + (int)strlen(np) + 1 > LINE_WIDTH + 1;
    printf(",%sdtype=%s)\n", wrap ? "\n      " : " ", np);
  }
}

typedef struct stats {
  uint64_t count, nan, pinf, ninf, finite, n_true;
  double min, max, mean, std;
  int64_t imin, imax;
  uint64_t umin, umax;
} stats;

static void compute_stats(cairn_dtype dt, const void *data, uint64_t count, stats *st) {
  memset(st, 0, sizeof *st);
  st->count = count;
  double sum = 0;
  for (uint64_t i = 0; i < count; i++) {
    if (dtype_is_signed(dt)) {
      int64_t v = get_i(dt, data, i);
      if (i == 0 || v < st->imin) st->imin = v;
      if (i == 0 || v > st->imax) st->imax = v;
    } else if (dtype_is_unsigned(dt)) {
      uint64_t v = get_u(dt, data, i);
      if (i == 0 || v < st->umin) st->umin = v;
      if (i == 0 || v > st->umax) st->umax = v;
    }
    double v = get_d(dt, data, i);
    if (isnan(v)) {
      st->nan++;
      continue;
    }
    if (isinf(v)) {
      if (v > 0) st->pinf++;
      else st->ninf++;
      continue;
    }
    if (dt == CAIRN_DTYPE_BOOL && v != 0) st->n_true++;
    if (st->finite == 0 || v < st->min) st->min = v;
    if (st->finite == 0 || v > st->max) st->max = v;
    st->finite++;
    sum += v;
  }
  if (st->finite) {
    st->mean = sum / (double)st->finite;
    double ss = 0;
    for (uint64_t i = 0; i < count; i++) {
      double v = get_d(dt, data, i);
      if (isfinite(v)) ss += (v - st->mean) * (v - st->mean);
    }
    st->std = sqrt(ss / (double)st->finite);
  }
}

static int find_entry(cairn_ckpt *c, const char *path, const char *name, cairn_ckpt_entry *e) {
  cairn_status s = cairn_ckpt_find(c, name, e);
  if (s == CAIRN_E_NOT_FOUND) {
    /* The name may have been typed as list printed it (escaped). */
    char *u = unescape(name);
    if (u && strcmp(u, name) != 0) {
      s = cairn_ckpt_find(c, u, e);
      if (s == CAIRN_OK) {
        free(u);
        return 0;
      }
    }
    free(u);
    error_tensor(path, name, CAIRN_E_NOT_FOUND);
    errorf("'ckpt-inspect list %s' lists the tensors", path);
    return -1;
  }
  if (s != CAIRN_OK) {
    error_tensor(path, name, s);
    return -1;
  }
  return 0;
}

int cmd_show(const options *o, const char *const *args) {
  const char *name = args[1];
  char path[4096];
  cairn_ckpt *c = open_arg(args[0], path, sizeof path); /* CKPT */
  if (!c) return EXIT_ERROR;
  cairn_ckpt_entry e;
  if (find_entry(c, path, name, &e) != 0) {
    cairn_ckpt_close(c);
    return EXIT_ERROR;
  }
  cairn_tensor *t = NULL;
  cairn_status s = read_tensor(c, &e, &t);
  if (s != CAIRN_OK) {
    error_tensor(path, e.name, s);
    cairn_ckpt_close(c);
    return EXIT_ERROR;
  }
  uint64_t count = elem_count(e.rank, e.shape);
  char shp[256];
  shape_str(shp, sizeof shp, e.rank, e.shape);
  put_esc(stdout, e.name);
  printf(": %s %s, %llu element%s, %llu bytes, crc32c %08x\n", dtype_str(e.dtype), shp,
         (unsigned long long)count, count == 1 ? "" : "s", (unsigned long long)e.raw_bytes,
         (unsigned)e.raw_crc32c);
  stats st;
  compute_stats(e.dtype, t->data, count, &st);
  char a[64], b[64], m[64], d[64];
  if (count == 0) {
    printf("empty\n");
  } else if (dtype_is_float(e.dtype)) {
    if (st.finite) {
      fmt_shortest(a, sizeof a, st.min, e.dtype);
      fmt_shortest(b, sizeof b, st.max, e.dtype);
      snprintf(m, sizeof m, "%.7g", st.mean);
      snprintf(d, sizeof d, "%.7g", st.std);
      printf("min %s  max %s  mean %s  std %s%s", a, b, m, d, st.finite < count ? " (finite values)" : "");
    } else {
      printf("no finite values");
    }
    printf("  nan %llu  +inf %llu  -inf %llu\n", (unsigned long long)st.nan, (unsigned long long)st.pinf,
           (unsigned long long)st.ninf);
  } else if (e.dtype == CAIRN_DTYPE_BOOL) {
    printf("true %llu  false %llu  mean %.7g\n", (unsigned long long)st.n_true,
           (unsigned long long)(count - st.n_true), st.mean);
  } else {
    if (dtype_is_signed(e.dtype))
      printf("min %lld  max %lld", (long long)st.imin, (long long)st.imax);
    else
      printf("min %llu  max %llu", (unsigned long long)st.umin, (unsigned long long)st.umax);
    printf("  mean %.7g  std %.7g\n", st.mean, st.std);
  }
  print_array(&e, t->data, o->all);
  cairn_tensor_free(t);
  cairn_ckpt_close(c);
  return EXIT_OK_;
}
