/* ulp_sweep: the accuracy figures of doc/kernels.md, measured.
 *
 * Elementwise kernels: every float32 bit pattern (or every --step'th) of
 * the function's domain through the chosen table's kernel (AVX2 by
 * default, --isa avx512 for the AVX-512 tier, --isa ref for the reference), against the exact value computed
 * in double (long double for the softmax rows): max error in ulps of the
 * exact result (of the larger term for the backward gelus, whose result
 * cancels near their roots: the `s` of doc/kernels.md's table), where it
 * occurs, and the max relative error over normal results.
 *
 * Row kernels and losses: rows of 10, 1000 and 32768 logits drawn from
 * N(0, σ²), σ = 1, 10, 100 (labels uniform in [0, 1) normalised to sum 1
 * for xent, in [0, 1) for sigmoid xent), --rows rows each: max ulp of the
 * softmax and log-softmax outputs, max relative error of the losses, and
 * the gradients' max error in the units of the test bounds.
 *
 * Not part of make check (a full sweep is minutes per function); the
 * sampled sweeps of tests/test_kernels.c assert the bounds there.
 *
 *   ulp_sweep [--isa avx2|avx512|ref] [--step K] [--only NAME] [--rows R] [--no-rows] [--no-elem]
 * Output: one JSON line per measurement on stdout, a table on stderr.
 */
#define _POSIX_C_SOURCE 200809L
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"

typedef void (*un_fn)(const float *, float *, size_t);
typedef void (*bin_fn)(const float *, const float *, float *, size_t);
#define FN(T, type, off) (*(type const *)((const char *)(T) + (off)))

/* Spacing of floats at |v| (subnormal spacing below 2^-126). */
static double ulpf(double v) {
  v = fabs(v);
  if (!(v >= 0x1p-126)) return 0x1p-149;
  if (isinf(v)) return INFINITY;
  int e;
  frexp(v, &e);
  return ldexp(1.0, e - 24);
}

static double phi_cdf(double x) { return 0.5 * erfc(-x / sqrt(2.0)); }
static double phi_pdf(double x) { return exp(-0.5 * x * x) / 2.5066282746310002; }
#define GT_C1 1.5957691216057308
#define GT_C3 0.071354816272842805

static double ex_exp(double x, double *s) { *s = 0; return exp(x); }
static double ex_log(double x, double *s) { *s = 0; return log(x); }
static double ex_sigmoid(double x, double *s) { *s = 0; return x < 0 ? exp(x) / (1 + exp(x)) : 1 / (1 + exp(-x)); }
static double ex_tanh(double x, double *s) { *s = 0; return tanh(x); }
static double ex_gelu(double x, double *s) { *s = 0; return x * phi_cdf(x); }
static double ex_gelu_tanh(double x, double *s) {
  *s = 0;
  const double w = x * (GT_C1 + GT_C3 * x * x);
  return w < 0 ? x * exp(w) / (1 + exp(w)) : x / (1 + exp(-w));
}
static double ex_gelu_bwd(double x, double *s) {
  *s = phi_cdf(x) + fabs(x) * phi_pdf(x);
  return phi_cdf(x) + x * phi_pdf(x);
}
static double ex_gelu_tanh_bwd(double x, double *s) {
  const double xc = fmax(-20.0, fmin(20.0, x));
  const double w = xc * (GT_C1 + GT_C3 * xc * xc), e = exp(-fabs(w));
  const double sg = (w < 0 ? e : 1.0) / (1.0 + e), sp = e / ((1 + e) * (1 + e));
  const double a = xc * (GT_C1 + 3 * GT_C3 * xc * xc) * sp;
  *s = sg + fabs(a);
  return sg + a;
}

typedef struct {
  const char *name;
  size_t off;
  int arity;
  float lo, hi; /* domain swept (beyond it the results are exactly 0, ±1, ±inf or x) */
  double (*exact)(double, double *);
} efn;

#define OFF(f) offsetof(cairn__kernel_table, f)
static const efn efns[] = {
    {"exp", OFF(exp), 1, -104.0f, 89.0f, ex_exp},
    {"log", OFF(log), 1, 0.0f, FLT_MAX, ex_log},
    {"sigmoid", OFF(sigmoid_fwd), 1, -104.0f, 104.0f, ex_sigmoid},
    {"tanh", OFF(tanh_fwd), 1, -20.0f, 20.0f, ex_tanh},
    {"gelu", OFF(gelu_fwd), 1, -15.0f, 20.0f, ex_gelu},
    {"gelu_tanh", OFF(gelu_tanh_fwd), 1, -12.0f, 20.0f, ex_gelu_tanh},
    {"gelu_bwd", OFF(gelu_bwd), 2, -15.0f, 20.0f, ex_gelu_bwd},
    {"gelu_tanh_bwd", OFF(gelu_tanh_bwd), 2, -12.0f, 20.0f, ex_gelu_tanh_bwd},
};

typedef struct {
  double ulp, at, rel, rel_at;
  uint64_t points, nan_bad;
} result;

static void merge(result *a, const result *b) {
  if (b->ulp > a->ulp) a->ulp = b->ulp, a->at = b->at;
  if (b->rel > a->rel) a->rel = b->rel, a->rel_at = b->rel_at;
  a->points += b->points;
  a->nan_bad += b->nan_bad;
}

static void check_block(const efn *f, const float *x, const float *y, size_t k, result *r) {
  for (size_t i = 0; i < k; i++) {
    double s;
    const double e = f->exact(x[i], &s);
    r->points++;
    if (isnan(e)) {
      if (!isnan(y[i])) r->nan_bad++;
      continue;
    }
    if (isnan(y[i])) {
      r->nan_bad++;
      continue;
    }
    if ((double)y[i] == e || (isinf(y[i]) && (float)e == y[i])) continue; /* e beyond FLT_MAX rounds to inf */
    const double err = fabs((double)y[i] - e);
    const double u = err / ulpf(fmax(fabs(e), s));
    if (u > r->ulp) r->ulp = u, r->at = x[i];
    if (fabs(e) >= 0x1p-126 && (f->arity == 1 || fabs(e) > 1e-3)) {
      const double rel = err / fabs(e);
      if (rel > r->rel) r->rel = rel, r->rel_at = x[i];
    }
  }
}

static void sweep_elem(const cairn__kernel_table *T, const efn *f, uint32_t step) {
  result tot = {0};
  for (int sgn = 0; sgn < 2; sgn++) {
    const float mag = sgn ? -f->lo : f->hi;
    if (!(mag > 0)) continue;
    uint32_t top;
    memcpy(&top, &mag, 4);
    const uint64_t blocks = ((uint64_t)top / step + 4096) / 4096;
#pragma omp parallel
    {
      enum { B = 4096 };
      float x[B], y[B], ones[B];
      for (int i = 0; i < B; i++) ones[i] = 1.0f;
      result r = {0};
#pragma omp for schedule(dynamic, 64)
      for (uint64_t b = 0; b < blocks; b++) {
        size_t k = 0;
        for (uint64_t j = 0; j < B; j++) {
          const uint64_t u = (b * B + j) * step;
          if (u > top) break;
          const uint32_t bits = (uint32_t)u | (sgn ? 0x80000000u : 0u);
          memcpy(&x[k++], &bits, 4);
        }
        if (!k) continue;
        if (f->arity == 1) FN(T, un_fn, f->off)(x, y, k);
        else FN(T, bin_fn, f->off)(x, ones, y, k);
        check_block(f, x, y, k, &r);
      }
#pragma omp critical
      merge(&tot, &r);
    }
  }
  printf("{\"bench\": \"ulp_sweep\", \"isa\": \"%s\", \"name\": \"%s\", \"lo\": %.9g, \"hi\": %.9g, \"step\": %u, "
         "\"points\": %llu, \"max_ulp\": %.3f, \"at\": %.9g, \"max_rel\": %.3g, \"rel_at\": %.9g, \"nan_mismatch\": %llu}\n",
         T->isa, f->name, (double)f->lo, (double)f->hi, step, (unsigned long long)tot.points, tot.ulp, tot.at,
         tot.rel, tot.rel_at, (unsigned long long)tot.nan_bad);
  fprintf(stderr, "%-14s [%-12.9g, %-12.9g] step %-3u %11llu points  max %.3f ulp at %.9g  max rel %.3g at %.9g%s\n",
          f->name, (double)f->lo, (double)f->hi, step, (unsigned long long)tot.points, tot.ulp, tot.at, tot.rel,
          tot.rel_at, tot.nan_bad ? "  NaN MISMATCH" : "");
  fflush(stdout);
}

/* ---- rows ---------------------------------------------------------------- */

static uint64_t rng_s = 0x9e3779b97f4a7c15ull;
static double urand(void) {
  rng_s ^= rng_s << 13, rng_s ^= rng_s >> 7, rng_s ^= rng_s << 17;
  return ((rng_s >> 11) + 0.5) * 0x1p-53;
}
static double gauss(void) { return sqrt(-2.0 * log(urand())) * cos(6.283185307179586 * urand()); }

typedef struct {
  double sm_ulp, lsm_ulp, smb_ulp, lsmb_ulp;
  double sx_rel, sx_grad, x_rel, x_grad, sig_rel, sig_grad;
} rowres;

static void rows_case(const cairn__kernel_table *T, size_t n, double sigma, int rows) {
  float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *z = malloc(n * sizeof *z),
        *dy = malloc(n * sizeof *dy), *dx = malloc(n * sizeof *dx), *yy = malloc(n * sizeof *yy);
  long double *p = malloc(n * sizeof *p);
  rowres R = {0};
  const float scale = 0.5f;
  for (int r = 0; r < rows; r++) {
    double zs = 0;
    for (size_t i = 0; i < n; i++) {
      x[i] = (float)(sigma * gauss());
      z[i] = (float)urand();
      zs += z[i];
      dy[i] = (float)(2 * urand() - 1);
    }
    for (size_t i = 0; i < n; i++) z[i] = (float)(z[i] / zs);
    /* S − 1 without the term of the (first) maximum k, and log S as
     * log1p(S − 1): a long double 1 + S' would lose S' below 2^−64. */
    size_t k = 0;
    for (size_t i = 1; i < n; i++)
      if (x[i] > x[k]) k = i;
    long double m = x[k], sm1 = 0, zsum = 0;
    for (size_t i = 0; i < n; i++)
      if (i != k) sm1 += expl((long double)x[i] - m);
    const long double S = 1 + sm1, lS = log1pl(sm1);
    for (size_t i = 0; i < n; i++) p[i] = expl((long double)x[i] - m) / S, zsum += z[i];
    /* softmax, log_softmax */
    T->softmax_row(x, y, n);
    for (size_t i = 0; i < n; i++) {
      const double u = fabs(y[i] - (double)p[i]) / ulpf((double)p[i]);
      if (u > R.sm_ulp) R.sm_ulp = u;
    }
    T->log_softmax_row(x, yy, n);
    for (size_t i = 0; i < n; i++) {
      const long double e = ((long double)x[i] - m) - lS;
      const double u = fabs(yy[i] - (double)e) / ulpf((double)e);
      if (u > R.lsm_ulp) R.lsm_ulp = u;
    }
    /* softmax_bwd on the float softmax y, log_softmax_bwd on yy (exact from those) */
    {
      long double dot = 0, sdy = 0;
      for (size_t i = 0; i < n; i++) dot += (long double)dy[i] * y[i], sdy += dy[i];
      T->softmax_bwd_row(y, dy, dx, n);
      for (size_t i = 0; i < n; i++) {
        const long double e = (long double)y[i] * ((long double)dy[i] - dot);
        const double s = fabs(y[i]) * (fabs(dy[i]) + fabs((double)dot));
        const double u = fabs(dx[i] - (double)e) / ulpf(fmax(fabs((double)e), s));
        if (u > R.smb_ulp) R.smb_ulp = u;
      }
      T->log_softmax_bwd_row(yy, dy, dx, n);
      for (size_t i = 0; i < n; i++) {
        const long double e = (long double)dy[i] - expl((long double)yy[i]) * sdy;
        const double s = fabs(dy[i]) + exp(yy[i]) * fabs((double)sdy);
        const double u = fabs(dx[i] - (double)e) / ulpf(fmax(fabs((double)e), s));
        if (u > R.lsmb_ulp) R.lsmb_ulp = u;
      }
    }
    /* sparse xent, label r % n */
    {
      const size_t l = (size_t)r % n;
      const long double e = lS + (m - (long double)x[l]);
      const double got = T->sparse_xent_row(x, (int32_t)l, dx, n, scale);
      const double rel = fabs(got - (double)e) / fmax(fabs((double)e), 1e-30);
      if (rel > R.sx_rel) R.sx_rel = rel;
      for (size_t i = 0; i < n; i++) {
        const long double g = i != l ? scale * p[i] : l == k ? -scale * sm1 / S : scale * (p[i] - 1);
        const double u = fabs(dx[i] - (double)g) / (0x1p-24 * fmax(fabs((double)g), 0x1p-126)) /* relative; absolute for subnormal gradients */;
        if (u > R.sx_grad) R.sx_grad = u;
      }
    }
    /* soft-label xent */
    {
      long double e = 0;
      for (size_t i = 0; i < n; i++) e += (long double)z[i] * (lS + m - (long double)x[i]);
      const double got = T->xent_row(x, z, dx, n, scale);
      const double rel = fabs(got - (double)e) / fmax(fabs((double)e), 1e-30);
      if (rel > R.x_rel) R.x_rel = rel;
      for (size_t i = 0; i < n; i++) {
        const long double g = scale * (p[i] * zsum - z[i]);
        const double u = fabs(dx[i] - (double)g) / (0x1p-24 * fmax(fabs((double)g) + scale * fabs(z[i]), 0x1p-126));
        if (u > R.x_grad) R.x_grad = u;
      }
    }
    /* sigmoid xent over the row as n independent logits */
    {
      long double e = 0;
      for (size_t i = 0; i < n; i++) {
        const long double xi = x[i];
        e += fmaxl(xi, 0) - xi * z[i] + log1pl(expl(-fabsl(xi)));
      }
      const double got = T->sigmoid_xent(x, z, dx, n, scale);
      const double rel = fabs(got - (double)e) / fmax(fabs((double)e), 1e-30);
      if (rel > R.sig_rel) R.sig_rel = rel;
      for (size_t i = 0; i < n; i++) {
        const long double xi = x[i];
        const long double sg = xi < 0 ? expl(xi) / (1 + expl(xi)) : 1 / (1 + expl(-xi));
        const long double g = scale * (sg - z[i]);
        const double u = fabs(dx[i] - (double)g) / (0x1p-24 * fmax(fabs((double)g) + scale * fabs(z[i]), 0x1p-126));
        if (u > R.sig_grad) R.sig_grad = u;
      }
    }
  }
  printf("{\"bench\": \"ulp_sweep_rows\", \"isa\": \"%s\", \"n\": %zu, \"sigma\": %g, \"rows\": %d, "
         "\"softmax_ulp\": %.3f, \"log_softmax_ulp\": %.3f, \"softmax_bwd_ulp\": %.3f, \"log_softmax_bwd_ulp\": %.3f, "
         "\"sparse_xent_rel\": %.3g, \"sparse_xent_grad_u\": %.3f, \"xent_rel\": %.3g, \"xent_grad_u\": %.3f, "
         "\"sigmoid_xent_rel\": %.3g, \"sigmoid_xent_grad_u\": %.3f}\n",
         T->isa, n, sigma, rows, R.sm_ulp, R.lsm_ulp, R.smb_ulp, R.lsmb_ulp, R.sx_rel, R.sx_grad, R.x_rel, R.x_grad,
         R.sig_rel, R.sig_grad);
  fprintf(stderr,
          "n %-6zu sigma %-4g  softmax %.3f  log_softmax %.3f  softmax_bwd %.3f  log_softmax_bwd %.3f ulp | "
          "loss rel: sparse %.2g xent %.2g sigmoid %.2g | grad (2^-24 units): %.2f %.2f %.2f\n",
          n, sigma, R.sm_ulp, R.lsm_ulp, R.smb_ulp, R.lsmb_ulp, R.sx_rel, R.x_rel, R.sig_rel, R.sx_grad, R.x_grad,
          R.sig_grad);
  fflush(stdout);
  free(x), free(y), free(z), free(dy), free(dx), free(yy), free(p);
}

int main(int argc, char **argv) {
  const cairn__kernel_table *T = cairn__kernels_avx2();
  const char *isa = "avx2";
  uint32_t step = 1;
  const char *only = NULL;
  int rows = 200, do_rows = 1, do_elem = 1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--isa") && i + 1 < argc) {
      isa = argv[++i];
      T = !strcmp(isa, "ref")      ? cairn__kernels_ref()
          : !strcmp(isa, "avx512") ? cairn__kernels_avx512()
          : !strcmp(isa, "avx2")   ? cairn__kernels_avx2()
                                   : NULL;
    } else if (!strcmp(argv[i], "--step") && i + 1 < argc) step = (uint32_t)strtoul(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    else if (!strcmp(argv[i], "--rows") && i + 1 < argc) rows = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--no-rows")) do_rows = 0;
    else if (!strcmp(argv[i], "--no-elem")) do_elem = 0;
    else {
      fprintf(stderr, "usage: ulp_sweep [--isa avx2|avx512|ref] [--step K] [--only NAME] [--rows R] [--no-rows] [--no-elem]\n");
      return 2;
    }
  }
  if (!T) {
    fprintf(stderr, "ulp_sweep: no %s kernels on this build or CPU (--isa avx2|avx512|ref)\n", isa);
    return 2;
  }
  if (step < 1) step = 1;
  if (do_elem)
    for (size_t i = 0; i < sizeof efns / sizeof *efns; i++)
      if (!only || !strcmp(only, efns[i].name)) sweep_elem(T, &efns[i], step);
  if (do_rows && !only) {
    static const size_t ns[] = {10, 1000, 32768};
    static const double sig[] = {1, 10, 100};
    for (size_t a = 0; a < 3; a++)
      for (size_t b = 0; b < 3; b++) rows_case(T, ns[a], sig[b], ns[a] > 10000 ? rows / 20 + 1 : rows);
  }
  return 0;
}
