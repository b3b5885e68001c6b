/* Kernel tests: every AVX2 and AVX-512 kernel against its scalar reference
 * (all the lengths around both vector widths, aligned and unaligned
 * pointers, in place, guard floats around the output), special inputs (one
 * in each lane of a vector), dense sweeps that assert the ulp bounds stated
 * in doc/kernels.md, and every table against a long-double reference for
 * the accuracy contract (sigmoid, softmax, log-softmax and the losses within
 * 1e-6 relative). A vector tier this build or CPU lacks skips its tests with
 * the reason. The optimizer kernels are tested in tests/test_optim.c. */
#include "config.h"

#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"

/* ---- helpers -------------------------------------------------------------- */

static const size_t lens[] = {0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 48, 49, 63, 64, 65, 1000};
#define NLENS (sizeof lens / sizeof lens[0])
#define MAXN 1000
#define GUARD 16
static const uint32_t guard_bits = 0x7fa5a5a5u; /* a NaN no kernel produces */

static uint64_t rng_next(uint64_t *s) { /* splitmix64 */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static float unif(uint64_t *s, float lo, float hi) {
  return lo + (hi - lo) * (float)((double)(rng_next(s) >> 40) / (double)(1ull << 24));
}

static const float specials[] = {0.0f,   -0.0f,  1e-8f,   -1e-8f, 20.0f,   -20.0f,  88.0f,
                                 -88.0f, 100.0f, -100.0f, 1e-40f, -1e-40f, 1e-45f,  -1e-45f,
                                 1.0f,   -1.0f,  0.5f,    -0.5f,  0.625f,  -0.625f, 9.1f,
                                 -9.1f,  14.99f, -15.0f,  1e-30f, -1e-30f, 0.75f,   -0.75f};
#define NSPECIALS (sizeof specials / sizeof specials[0])

/* A buffer of n floats at offset `off` floats (0..15) from a 64-byte
 * boundary, with at least GUARD sentinel floats on each side. */
typedef struct {
  float *mem, *p;
  size_t n;
} buf;

static buf buf_new(size_t n, size_t off) {
  buf b;
  const size_t bytes = (sizeof(float) * (n + 2 * GUARD + 16) + 63) / 64 * 64;
  b.mem = aligned_alloc(64, bytes);
  cr_assert_not_null(b.mem);
  b.p = b.mem + GUARD + off;
  b.n = n;
  for (size_t i = 0; i < n + 2 * GUARD + 16; i++) memcpy(b.mem + i, &guard_bits, 4);
  return b;
}
static int guards_ok(const buf *b) {
  for (float *q = b->mem; q < b->p; q++)
    if (memcmp(q, &guard_bits, 4) != 0) return 0;
  for (float *q = b->p + b->n; q < b->p + b->n + GUARD; q++)
    if (memcmp(q, &guard_bits, 4) != 0) return 0;
  return 1;
}
static void buf_free(buf *b) { free(b->mem); }

/* Spacing of floats at |v| (subnormal spacing below 2^-126). */
static double ulpf(double v) {
  v = fabs(v);
  if (!(v >= 0x1p-126)) return 0x1p-149;
  if (isinf(v)) return INFINITY;
  int e;
  frexp(v, &e);
  return ldexp(1.0, e - 24);
}

/* a within k ulps of max(|r|, scale) of r; equal values (inf) and two NaNs pass. */
static int close_ulps(float a, float r, double k, double scale) {
  if (isnan(a) || isnan(r)) return isnan(a) && isnan(r);
  if (a == r) return 1;
  return fabs((double)a - r) <= k * ulpf(fmax(fabs(r), scale));
}

static const cairn__kernel_table *avx2_or_skip(void) {
  const cairn__kernel_table *a = cairn__kernels_avx2();
  if (!a) cr_skip_test("AVX2+FMA kernels not compiled in or not supported by this CPU");
  return a;
}
static const cairn__kernel_table *avx512_or_skip(void) {
  const cairn__kernel_table *a = cairn__kernels_avx512();
#ifndef CAIRN_HAVE_AVX512
  cr_skip_test("AVX-512 kernels not compiled in (configure --disable-avx512, or the compiler lacks the flags)");
#endif
  if (!a) cr_skip_test("AVX-512 kernels: this CPU or OS lacks AVX-512 F+DQ+BW+VL with ZMM state");
  return a;
}

typedef void (*un_fn)(const float *, float *, size_t);
typedef void (*bin_fn)(const float *, const float *, float *, size_t);
#define FN(T, type, off) (*(type const *)((const char *)(T) + (off)))

/* ---- AVX2 against ref: elementwise and row kernels ------------------------ */

typedef struct {
  double dot, sumb; /* Σ a·b and Σ b over the row, in double */
} rowinfo;

typedef struct {
  const char *name;
  size_t off;
  int arity;
  void (*gen)(float *a, float *b, size_t n, uint64_t *s);
  double ulps;                                     /* bound, in ulps of max(|ref|, scale) */
  double (*scale)(float a, float b, rowinfo info); /* NULL: 0 */
} kcase;

static void gen_act(float *a, float *b, size_t n, uint64_t *s) {
  for (size_t i = 0; i < n; i++) {
    a[i] = i % 5 == 3 ? specials[rng_next(s) % NSPECIALS] : unif(s, -16.0f, 16.0f);
    if (b) b[i] = unif(s, -2.0f, 2.0f);
  }
}
static void gen_exp(float *a, float *b, size_t n, uint64_t *s) {
  (void)b;
  for (size_t i = 0; i < n; i++)
    a[i] = i % 5 == 3 ? specials[rng_next(s) % NSPECIALS] : unif(s, -110.0f, 95.0f);
}
static void gen_log(float *a, float *b, size_t n, uint64_t *s) {
  (void)b;
  static const float sp[] = {0.0f, -0.0f,   1e-45f,   1e-40f, 1.0f,        1.0000001f, 0.99999994f,
                             2.0f, FLT_MAX, INFINITY, -1.0f,  0.70710677f, 1.4142135f};
  for (size_t i = 0; i < n; i++)
    a[i] = i % 5 == 3 ? sp[rng_next(s) % (sizeof sp / sizeof sp[0])] : expf(unif(s, -100.0f, 88.0f));
}
static void gen_sig_y(float *a, float *b, size_t n, uint64_t *s) {
  for (size_t i = 0; i < n; i++) {
    a[i] = unif(s, 0.0f, 1.0f);
    b[i] = unif(s, -2.0f, 2.0f);
  }
}
static void gen_tanh_y(float *a, float *b, size_t n, uint64_t *s) {
  for (size_t i = 0; i < n; i++) {
    a[i] = unif(s, -1.0f, 1.0f);
    b[i] = unif(s, -2.0f, 2.0f);
  }
}
static void gen_row(float *a, float *b, size_t n, uint64_t *s) {
  const float spread = (rng_next(s) & 1) ? 30.0f : 3.0f;
  for (size_t i = 0; i < n; i++) a[i] = unif(s, -spread, spread);
  if (n > 4) a[n / 2] = -INFINITY; /* a masked logit */
  if (b)
    for (size_t i = 0; i < n; i++) b[i] = unif(s, -2.0f, 2.0f);
}
static void gen_softmax_y(float *a, float *b, size_t n, uint64_t *s) {
  gen_row(a, b, n, s);
  cairn__kernels_ref()->softmax_row(a, a, n);
}
static void gen_log_softmax_y(float *a, float *b, size_t n, uint64_t *s) {
  gen_row(a, b, n, s);
  if (n > 4) a[n / 2] = -100.0f; /* keep e^y finite for the comparison */
  cairn__kernels_ref()->log_softmax_row(a, a, n);
}

/* gelu'(x) = Φ(x) + xφ(x): the result cancels near x = −0.7518; errors are
 * measured against the larger term. */
static double scale_gelu_bwd(float x, float dy, rowinfo r) {
  (void)r;
  const double p = 0.5 * erfc(-x / sqrt(2.0)), q = fabs(x * exp(-0.5 * (double)x * x)) / 2.5066282746310002;
  return fabs(dy) * (p + q);
}
static double scale_gelu_tanh_bwd(float x, float dy, rowinfo r) {
  (void)r;
  const double xc = fmax(-20.0, fmin(20.0, x));
  const double w = xc * (1.5957691216057308 + 0.071354816272842805 * xc * xc);
  const double e = exp(-fabs(w)), sg = (w < 0 ? e : 1.0) / (1.0 + e);
  return fabs(dy) * (sg + fabs(xc * (1.5957691216057308 + 3 * 0.071354816272842805 * xc * xc)) * e /
                              ((1 + e) * (1 + e)));
}
/* softmax_bwd: y·(dy − s) cancels when dy ≈ s */
static double scale_softmax_bwd(float y, float dy, rowinfo r) { return fabs(y) * (fabs(dy) + fabs(r.dot)); }
/* log_softmax_bwd: dy − e^y·Σdy */
static double scale_log_softmax_bwd(float y, float dy, rowinfo r) { return fabs(dy) + exp(y) * fabs(r.sumb); }

/* The bounds below are the ones stated in doc/kernels.md. */
static const kcase kcases[] = {
    {"relu_fwd", offsetof(cairn__kernel_table, relu_fwd), 1, gen_act, 0, NULL},
    {"relu_bwd", offsetof(cairn__kernel_table, relu_bwd), 2, gen_act, 0, NULL},
    {"sigmoid_fwd", offsetof(cairn__kernel_table, sigmoid_fwd), 1, gen_act, 3, NULL},
    {"sigmoid_bwd", offsetof(cairn__kernel_table, sigmoid_bwd), 2, gen_sig_y, 0, NULL},
    {"tanh_fwd", offsetof(cairn__kernel_table, tanh_fwd), 1, gen_act, 2, NULL},
    {"tanh_bwd", offsetof(cairn__kernel_table, tanh_bwd), 2, gen_tanh_y, 0, NULL},
    {"gelu_fwd", offsetof(cairn__kernel_table, gelu_fwd), 1, gen_act, 3, NULL},
    {"gelu_bwd", offsetof(cairn__kernel_table, gelu_bwd), 2, gen_act, 4, scale_gelu_bwd},
    {"gelu_tanh_fwd", offsetof(cairn__kernel_table, gelu_tanh_fwd), 1, gen_act, 4, NULL},
    {"gelu_tanh_bwd", offsetof(cairn__kernel_table, gelu_tanh_bwd), 2, gen_act, 6, scale_gelu_tanh_bwd},
    {"exp", offsetof(cairn__kernel_table, exp), 1, gen_exp, 1, NULL},
    {"log", offsetof(cairn__kernel_table, log), 1, gen_log, 1, NULL},
    {"softmax_row", offsetof(cairn__kernel_table, softmax_row), 1, gen_row, 3, NULL},
    {"log_softmax_row", offsetof(cairn__kernel_table, log_softmax_row), 1, gen_row, 2, NULL},
    {"softmax_bwd_row", offsetof(cairn__kernel_table, softmax_bwd_row), 2, gen_softmax_y, 2,
     scale_softmax_bwd},
    {"log_softmax_bwd_row", offsetof(cairn__kernel_table, log_softmax_bwd_row), 2, gen_log_softmax_y, 3,
     scale_log_softmax_bwd},
};

/* Runs case c of table A on length n at offset off: ref and A out of
 * place, then A in place (y = x, or dx = dy), which must give the same
 * bits. */
static void run_case(const cairn__kernel_table *A, const kcase *c, size_t n, size_t off, uint64_t *seed) {
  const cairn__kernel_table *R = cairn__kernels_ref();
  buf a = buf_new(n, off), b = buf_new(n, off), yr = buf_new(n, off), ya = buf_new(n, off),
      yi = buf_new(n, off);
  c->gen(a.p, c->arity == 2 ? b.p : NULL, n, seed);
  float a0[MAXN], b0[MAXN];
  memcpy(a0, a.p, n * sizeof(float));
  memcpy(b0, b.p, n * sizeof(float));
  rowinfo info = {0, 0};
  for (size_t i = 0; i < n; i++) {
    info.dot += (double)a.p[i] * b.p[i];
    info.sumb += b.p[i];
  }
  if (c->arity == 1) {
    FN(R, un_fn, c->off)(a.p, yr.p, n);
    FN(A, un_fn, c->off)(a.p, ya.p, n);
    memcpy(yi.p, a.p, n * sizeof(float));
    FN(A, un_fn, c->off)(yi.p, yi.p, n);
  } else {
    FN(R, bin_fn, c->off)(a.p, b.p, yr.p, n);
    FN(A, bin_fn, c->off)(a.p, b.p, ya.p, n);
    memcpy(yi.p, b.p, n * sizeof(float));
    FN(A, bin_fn, c->off)(a.p, yi.p, yi.p, n);
  }
  cr_assert(memcmp(a0, a.p, n * sizeof(float)) == 0 && memcmp(b0, b.p, n * sizeof(float)) == 0,
            "%s n=%zu: input modified", c->name, n);
  cr_assert(guards_ok(&yr) && guards_ok(&ya) && guards_ok(&yi), "%s %s n=%zu off=%zu: wrote outside the output",
            A->isa, c->name, n, off);
  for (size_t i = 0; i < n; i++) {
    const double sc = c->scale ? c->scale(a.p[i], b.p[i], info) : 0.0;
    cr_assert(close_ulps(ya.p[i], yr.p[i], c->ulps, sc),
              "%s %s n=%zu off=%zu i=%zu: in %.9g %.9g, got %.9g, ref %.9g (bound %g ulp)", A->isa, c->name, n, off, i,
              (double)a.p[i], (double)b.p[i], (double)ya.p[i], (double)yr.p[i], c->ulps);
    cr_assert(memcmp(&yi.p[i], &ya.p[i], 4) == 0, "%s n=%zu i=%zu: in place %.9g, out of place %.9g", c->name,
              n, i, (double)yi.p[i], (double)ya.p[i]);
  }
  buf_free(&a), buf_free(&b), buf_free(&yr), buf_free(&ya), buf_free(&yi);
}

TestSuite(kernels, .timeout = 60);

/* element offsets from a 64-byte boundary: aligned, one float off, and the
 * far end of a 16-lane vector */
static const size_t offs3[] = {0, 1, 15};

static void matches_ref_all_lengths(const cairn__kernel_table *A) {
  uint64_t seed = 42;
  for (size_t k = 0; k < sizeof kcases / sizeof kcases[0]; k++)
    for (size_t l = 0; l < NLENS; l++)
      for (size_t o = 0; o < 3; o++) run_case(A, &kcases[k], lens[l], offs3[o], &seed);
}
Test(kernels, avx2_matches_ref_all_lengths) { matches_ref_all_lengths(avx2_or_skip()); }
Test(kernels, avx512_matches_ref_all_lengths) { matches_ref_all_lengths(avx512_or_skip()); }

static void leaky_relu_matches_ref(const cairn__kernel_table *A) {
  const cairn__kernel_table *R = cairn__kernels_ref();
  uint64_t seed = 7;
  for (size_t l = 0; l < NLENS; l++) {
    const size_t n = lens[l];
    buf x = buf_new(n, 1), dy = buf_new(n, 1), yr = buf_new(n, 1), ya = buf_new(n, 1);
    gen_act(x.p, dy.p, n, &seed);
    R->leaky_relu_fwd(x.p, yr.p, n, 0.2f);
    A->leaky_relu_fwd(x.p, ya.p, n, 0.2f);
    cr_assert(memcmp(yr.p, ya.p, n * sizeof(float)) == 0, "leaky_relu_fwd n=%zu", n);
    R->leaky_relu_bwd(x.p, dy.p, yr.p, n, 0.2f);
    A->leaky_relu_bwd(x.p, dy.p, ya.p, n, 0.2f);
    cr_assert(memcmp(yr.p, ya.p, n * sizeof(float)) == 0, "leaky_relu_bwd n=%zu", n);
    A->leaky_relu_bwd(x.p, dy.p, dy.p, n, 0.2f); /* in place */
    cr_assert(memcmp(dy.p, ya.p, n * sizeof(float)) == 0, "leaky_relu_bwd in place n=%zu", n);
    A->leaky_relu_fwd(x.p, x.p, n, 0.2f);
    R->leaky_relu_fwd(yr.p, yr.p, 0, 0.2f); /* n = 0 touches nothing */
    cr_assert(guards_ok(&x) && guards_ok(&dy) && guards_ok(&yr) && guards_ok(&ya));
    buf_free(&x), buf_free(&dy), buf_free(&yr), buf_free(&ya);
  }
}
Test(kernels, avx2_leaky_relu_matches_ref) { leaky_relu_matches_ref(avx2_or_skip()); }
Test(kernels, avx512_leaky_relu_matches_ref) { leaky_relu_matches_ref(avx512_or_skip()); }

/* Streaming stores (outputs larger than the cache) change how y is
 * written, never what: same bits as ordinary stores for every kernel, at
 * every alignment of y, with nothing written outside y; in place (where
 * streaming is not used) still right. */
static void streaming_stores_same_bits(const cairn__kernel_table *A, size_t lanes) {
  static const size_t slens[] = {63, 64, 65, 71, 100, 1000};
  uint64_t seed = 11;
  for (size_t k = 0; k < sizeof kcases / sizeof kcases[0]; k++) {
    const kcase *c = &kcases[k];
    for (size_t l = 0; l < sizeof slens / sizeof slens[0]; l++)
      for (size_t off = 0; off < lanes; off++) {
        const size_t n = slens[l];
        buf a = buf_new(n, (off * 3) % lanes), b = buf_new(n, off), y0 = buf_new(n, off), y1 = buf_new(n, off);
        c->gen(a.p, c->arity == 2 ? b.p : NULL, n, &seed);
        for (int stream = 0; stream < 2; stream++) {
          cairn__kernels_stream = stream;
          float *y = stream ? y1.p : y0.p;
          if (c->arity == 1) FN(A, un_fn, c->off)(a.p, y, n);
          else FN(A, bin_fn, c->off)(a.p, b.p, y, n);
          cairn__kernels_stream = 0;
        }
        cr_assert(memcmp(y0.p, y1.p, n * sizeof(float)) == 0, "%s n=%zu off=%zu: streamed bits differ", c->name,
                  n, off);
        cr_assert(guards_ok(&y1), "%s n=%zu off=%zu: streamed past the end", c->name, n, off);
        cairn__kernels_stream = 1; /* in place: ordinary stores whatever the flag */
        if (c->arity == 1) FN(A, un_fn, c->off)(a.p, a.p, n);
        else FN(A, bin_fn, c->off)(a.p, b.p, b.p, n);
        cairn__kernels_stream = 0;
        cr_assert(memcmp(c->arity == 1 ? a.p : b.p, y0.p, n * sizeof(float)) == 0, "%s n=%zu: in place", c->name,
                  n);
        buf_free(&a), buf_free(&b), buf_free(&y0), buf_free(&y1);
      }
  }
}
Test(kernels, avx2_streaming_stores_same_bits) { streaming_stores_same_bits(avx2_or_skip(), 8); }
Test(kernels, avx512_streaming_stores_same_bits) { streaming_stores_same_bits(avx512_or_skip(), 16); }

/* The value computed for an element must not depend on where it sits
 * (vector body or masked tail) nor on n. */
static void value_independent_of_position(const cairn__kernel_table *A) {
  static const size_t offs[] = {
      offsetof(cairn__kernel_table, sigmoid_fwd), offsetof(cairn__kernel_table, tanh_fwd),
      offsetof(cairn__kernel_table, gelu_fwd),    offsetof(cairn__kernel_table, gelu_tanh_fwd),
      offsetof(cairn__kernel_table, exp),         offsetof(cairn__kernel_table, log)};
  float x[40], y[40], one;
  uint64_t seed = 3;
  for (size_t f = 0; f < sizeof offs / sizeof offs[0]; f++)
    for (int t = 0; t < 50; t++) {
      for (size_t i = 0; i < 40; i++) x[i] = unif(&seed, 0.01f, 12.0f) * (i % 2 ? -1.0f : 1.0f);
      if (offs[f] == offsetof(cairn__kernel_table, log))
        for (size_t i = 0; i < 40; i++) x[i] = fabsf(x[i]);
      const size_t n = 1 + rng_next(&seed) % 40;
      FN(A, un_fn, offs[f])(x, y, n);
      for (size_t i = 0; i < n; i++) {
        FN(A, un_fn, offs[f])(&x[i], &one, 1);
        cr_assert(memcmp(&one, &y[i], 4) == 0, "%s kernel %zu: x=%.9g at %zu of %zu gives %.9g alone %.9g", A->isa,
                  f, (double)x[i], i, n, (double)y[i], (double)one);
      }
    }
}
Test(kernels, avx2_value_independent_of_position) { value_independent_of_position(avx2_or_skip()); }
Test(kernels, avx512_value_independent_of_position) { value_independent_of_position(avx512_or_skip()); }

/* Dense sweeps over float bit patterns: the ulp bounds of doc/kernels.md. */
static void sweep(const cairn__kernel_table *A, const char *name, size_t off, int arity, float lo, float hi,
                  double ulps, double (*scale)(float, float, rowinfo)) {
  const cairn__kernel_table *R = cairn__kernels_ref();
  enum { B = 4096 };
  float x[B], ones[B], ya[B], yr[B];
  for (size_t i = 0; i < B; i++) ones[i] = 1.0f;
  double worst = 0.0;
  size_t count = 0;
  for (int sgn = 0; sgn < 2; sgn++) {
    const float mag = sgn ? -lo : hi;
    if (!(mag > 0)) continue;
    uint32_t top;
    memcpy(&top, &mag, 4);
    const uint32_t step = top / 400000 + 1;
    size_t k = 0;
    for (uint64_t u = 0; u <= top; u += step) {
      const uint32_t bits = (uint32_t)u | (sgn ? 0x80000000u : 0u);
      memcpy(&x[k++], &bits, 4);
      if (k == B || u + step > top) {
        if (arity == 1) {
          FN(A, un_fn, off)(x, ya, k);
          FN(R, un_fn, off)(x, yr, k);
        } else {
          FN(A, bin_fn, off)(x, ones, ya, k);
          FN(R, bin_fn, off)(x, ones, yr, k);
        }
        for (size_t i = 0; i < k; i++) {
          const rowinfo none = {0, 0};
          const double sc = scale ? scale(x[i], 1.0f, none) : 0.0;
          cr_assert(close_ulps(ya[i], yr[i], ulps, sc), "%s %s(%.9g): %.9g ref %.9g (bound %g ulp)", A->isa, name,
                    (double)x[i], (double)ya[i], (double)yr[i], ulps);
          cr_assert(!isnan(ya[i]) || isnan(yr[i]), "%s %s(%.9g) is NaN", A->isa, name, (double)x[i]);
          if (!isnan(yr[i]) && ya[i] != yr[i]) {
            const double e = fabs((double)ya[i] - yr[i]) / ulpf(fmax(fabs(yr[i]), sc));
            if (e > worst) worst = e;
          }
          count++;
        }
        k = 0;
      }
    }
  }
  cr_assert_gt(count, 390000);
  cr_log_info("%s %s: %zu points, max |%s - ref| = %.2f ulp", A->isa, name, count, A->isa, worst);
}

/* The sweeps of one table, each against the bounds of doc/kernels.md. */
#define SWEEPS(isa, T)                                                                             \
  Test(kernels, sweep_exp##isa) { sweep(T, "exp", offsetof(cairn__kernel_table, exp), 1, -110.0f, 95.0f, 1, NULL); } \
  Test(kernels, sweep_log##isa) { sweep(T, "log", offsetof(cairn__kernel_table, log), 1, 0.0f, FLT_MAX, 1, NULL); } \
  Test(kernels, sweep_sigmoid##isa) {                                                              \
    sweep(T, "sigmoid", offsetof(cairn__kernel_table, sigmoid_fwd), 1, -110.0f, 110.0f, 3, NULL);   \
  }                                                                                                \
  Test(kernels, sweep_tanh##isa) {                                                                 \
    sweep(T, "tanh", offsetof(cairn__kernel_table, tanh_fwd), 1, -FLT_MAX, FLT_MAX, 2, NULL);       \
  }                                                                                                \
  Test(kernels, sweep_gelu##isa) {                                                                 \
    sweep(T, "gelu", offsetof(cairn__kernel_table, gelu_fwd), 1, -FLT_MAX, FLT_MAX, 3, NULL);       \
  }                                                                                                \
  Test(kernels, sweep_gelu_tanh##isa) {                                                            \
    sweep(T, "gelu_tanh", offsetof(cairn__kernel_table, gelu_tanh_fwd), 1, -FLT_MAX, FLT_MAX, 4, NULL); \
  }                                                                                                \
  Test(kernels, sweep_gelu_bwd##isa) {                                                             \
    sweep(T, "gelu_bwd", offsetof(cairn__kernel_table, gelu_bwd), 2, -30.0f, 30.0f, 4, scale_gelu_bwd); \
  }                                                                                                \
  Test(kernels, sweep_gelu_tanh_bwd##isa) {                                                        \
    sweep(T, "gelu_tanh_bwd", offsetof(cairn__kernel_table, gelu_tanh_bwd), 2, -30.0f, 30.0f, 6,    \
          scale_gelu_tanh_bwd);                                                                    \
  }
SWEEPS(, avx2_or_skip())
SWEEPS(_avx512, avx512_or_skip())

/* ---- special inputs --------------------------------------------------------- */

static void check_specials(const cairn__kernel_table *T) {
  float y[NSPECIALS];
  static const size_t offs[] = {
      offsetof(cairn__kernel_table, relu_fwd),      offsetof(cairn__kernel_table, sigmoid_fwd),
      offsetof(cairn__kernel_table, tanh_fwd),      offsetof(cairn__kernel_table, gelu_fwd),
      offsetof(cairn__kernel_table, gelu_tanh_fwd), offsetof(cairn__kernel_table, exp)};
  for (size_t f = 0; f < sizeof offs / sizeof offs[0]; f++) {
    FN(T, un_fn, offs[f])(specials, y, NSPECIALS);
    for (size_t i = 0; i < NSPECIALS; i++)
      cr_assert(!isnan(y[i]), "%s: kernel %zu(%g) is NaN", T->isa, f, (double)specials[i]);
  }
  float ones[NSPECIALS];
  for (size_t i = 0; i < NSPECIALS; i++) ones[i] = 1.0f;
  static const size_t boffs[] = {offsetof(cairn__kernel_table, gelu_bwd),
                                 offsetof(cairn__kernel_table, gelu_tanh_bwd)};
  for (size_t f = 0; f < 2; f++) {
    FN(T, bin_fn, boffs[f])(specials, ones, y, NSPECIALS);
    for (size_t i = 0; i < NSPECIALS; i++)
      cr_assert(!isnan(y[i]), "%s: bwd %zu(%g) is NaN", T->isa, f, (double)specials[i]);
  }
  /* Values with a known answer. */
  const float xs[] = {100.0f, -100.0f, 88.0f, -88.0f, -87.5f, 0.0f, -INFINITY, INFINITY};
  T->exp(xs, y, 8);
  cr_assert(isinf(y[0]) && y[0] > 0, "%s: exp(100) = %g", T->isa, (double)y[0]);
  cr_assert(y[1] == 0.0f || fabs(y[1] - exp(-100.0)) <= 0x1p-149, "%s: exp(-100) = %g", T->isa, (double)y[1]);
  cr_assert(close_ulps(y[2], (float)exp(88.0), 1, 0) && close_ulps(y[3], (float)exp(-88.0), 1, 0) &&
                close_ulps(y[4], (float)exp(-87.5), 1, 0),
            "%s: exp near the limits", T->isa);
  cr_assert(y[5] == 1.0f && y[6] == 0.0f && isinf(y[7]), "%s: exp(0), exp(-inf), exp(inf)", T->isa);
  const float ls[] = {0.0f, -0.0f, -1.0f, INFINITY, 1.0f, 1e-45f, NAN};
  T->log(ls, y, 7);
  cr_assert(isinf(y[0]) && y[0] < 0 && isinf(y[1]) && y[1] < 0, "%s: log(±0) = %g %g", T->isa, (double)y[0],
            (double)y[1]);
  cr_assert(isnan(y[2]) && isinf(y[3]) && y[3] > 0 && y[4] == 0.0f && isnan(y[6]), "%s: log specials",
            T->isa);
  cr_assert(close_ulps(y[5], (float)log(0x1p-149), 1, 0), "%s: log(min subnormal) = %.9g", T->isa,
            (double)y[5]);
  /* tanh near 0 keeps its relative accuracy; tanh(±20) = ±1; tanh(−0) = −0 */
  const float ts[] = {1e-8f, -1e-8f, 1e-3f, 20.0f, -20.0f, -0.0f, 0.3f};
  T->tanh_fwd(ts, y, 7);
  for (int i = 0; i < 7; i++)
    cr_assert(close_ulps(y[i], (float)tanh(ts[i]), 2, 0), "%s: tanh(%g) = %.9g", T->isa, (double)ts[i],
              (double)y[i]);
  cr_assert(signbit(y[5]), "%s: tanh(-0) must be -0", T->isa);
  /* gelu for very negative x: tiny, not cancelled to 0; and the limits */
  const float gs[] = {-10.0f, -5.0f, -13.0f, -20.0f, -INFINITY, INFINITY, 30.0f};
  T->gelu_fwd(gs, y, 7);
  for (int i = 0; i < 3; i++) {
    const double ref = gs[i] * 0.5 * erfc(-gs[i] / sqrt(2.0));
    cr_assert(fabs(y[i] - ref) <= 1e-6 * fabs(ref), "%s: gelu(%g) = %.9g, want %.9g", T->isa, (double)gs[i],
              (double)y[i], ref);
  }
  cr_assert(y[3] == 0.0f && y[4] == 0.0f && isinf(y[5]) && y[6] == 30.0f, "%s: gelu limits %g %g %g %g",
            T->isa, (double)y[3], (double)y[4], (double)y[5], (double)y[6]);
  T->gelu_tanh_fwd(gs, y, 7);
  cr_assert(y[3] == 0.0f && y[4] == 0.0f && isinf(y[5]) && y[6] == 30.0f, "%s: gelu_tanh limits", T->isa);
  {
    const double x = -5.0, w = x * (1.5957691216057308 + 0.071354816272842805 * x * x);
    const double ref = x * exp(w) / (1 + exp(w));
    cr_assert(fabs(y[1] - ref) <= 1e-6 * fabs(ref), "%s: gelu_tanh(-5) = %.9g, want %.9g", T->isa,
              (double)y[1], ref);
  }
  /* the backward gelus at ±inf: the limits 1 and 0, not inf·0 */
  const float infs[] = {INFINITY, -INFINITY, -1e30f, 1e30f};
  const float ones4[] = {1, 1, 1, 1};
  T->gelu_bwd(infs, ones4, y, 4);
  cr_assert(y[0] == 1.0f && y[1] == 0.0f && y[2] == 0.0f && y[3] == 1.0f, "%s: gelu_bwd at ±inf", T->isa);
  T->gelu_tanh_bwd(infs, ones4, y, 4);
  cr_assert(y[0] == 1.0f && y[1] == 0.0f && y[2] == 0.0f && y[3] == 1.0f, "%s: gelu_tanh_bwd at ±inf", T->isa);
  /* relu keeps NaN and maps -0 to +0 */
  const float rs[] = {NAN, -0.0f, -1.0f, 2.0f};
  T->relu_fwd(rs, y, 4);
  cr_assert(isnan(y[0]) && y[1] == 0.0f && !signbit(y[1]) && y[2] == 0.0f && y[3] == 2.0f,
            "%s: relu specials", T->isa);
}

/* −0 and NaNs of either sign: the AVX2 gelu, gelu_bwd and sigmoid take
 * their blend mask from the sign bit of x itself, so −0 and a NaN with the
 * sign bit set go down the x < 0 side; the results must still be those of
 * the reference (−0 for gelu(−0), ½ for gelu'(−0) and σ(−0), NaN for NaN). */
static void check_signed_zero_nan(const cairn__kernel_table *T) {
  const float xs[] = {-0.0f, 0.0f, NAN, -NAN};
  const float ones[] = {1, 1, 1, 1};
  float y[4];
  T->gelu_fwd(xs, y, 4);
  cr_assert(y[0] == 0.0f && signbit(y[0]) && y[1] == 0.0f && !signbit(y[1]) && isnan(y[2]) && isnan(y[3]),
            "%s: gelu(-0, 0, NaN, -NaN) = %g %g %g %g", T->isa, (double)y[0], (double)y[1], (double)y[2],
            (double)y[3]);
  T->gelu_bwd(xs, ones, y, 4);
  cr_assert(y[0] == 0.5f && y[1] == 0.5f && isnan(y[2]) && isnan(y[3]), "%s: gelu_bwd(-0, 0, NaN, -NaN) = %g %g %g %g",
            T->isa, (double)y[0], (double)y[1], (double)y[2], (double)y[3]);
  T->sigmoid_fwd(xs, y, 4);
  cr_assert(y[0] == 0.5f && y[1] == 0.5f && isnan(y[2]) && isnan(y[3]), "%s: sigmoid(-0, 0, NaN, -NaN) = %g %g %g %g",
            T->isa, (double)y[0], (double)y[1], (double)y[2], (double)y[3]);
  T->tanh_fwd(xs, y, 4);
  cr_assert(y[0] == 0.0f && signbit(y[0]) && isnan(y[2]) && isnan(y[3]), "%s: tanh(-0, NaN, -NaN)", T->isa);
}
/* A special value (±0, −1, inf, NaN, a subnormal, the smallest normal,
 * FLT_MAX) in each lane of a 16-lane vector and of the masked tail after
 * it, next to normal floats: its special result, and the neighbours' bits
 * unchanged. The AVX2 log takes a fast path only when all eight lanes of a
 * vector are positive normal floats; the AVX-512 log fixes the special
 * lanes up with VFIXUPIMMPS: either would fail here if a lane's result
 * depended on another lane. */
static void log_special_in_each_lane(const cairn__kernel_table *T) {
  const float sp[] = {0.0f, -0.0f, -1.0f, INFINITY, NAN, 1e-40f, 0x1p-126f, FLT_MAX, -INFINITY, 1e-45f};
  enum { L = 19 };
  float x[L], y[L], y0[L];
  for (int i = 0; i < L; i++) x[i] = 0.75f + 0.37f * (float)i;
  T->log(x, y0, L);
  for (size_t k = 0; k < sizeof sp / sizeof sp[0]; k++)
    for (int p = 0; p < L; p++) {
      float xs[L];
      memcpy(xs, x, sizeof xs);
      xs[p] = sp[k];
      T->log(xs, y, L);
      for (int i = 0; i < L; i++) {
        if (i != p) {
          cr_assert(y[i] == y0[i], "%s log: lane %d changed by %g in lane %d", T->isa, i, (double)sp[k], p);
          continue;
        }
        const double r = log((double)sp[k]);
        if (isnan(r)) cr_assert(isnan(y[i]), "%s log(%g) in lane %d = %g, want NaN", T->isa, (double)sp[k], p, (double)y[i]);
        else if (isinf(r)) cr_assert(y[i] == (float)r, "%s log(%g) in lane %d = %g", T->isa, (double)sp[k], p, (double)y[i]);
        else cr_assert(close_ulps(y[i], (float)r, 1, 0), "%s log(%g) in lane %d = %.9g, want %.9g", T->isa, (double)sp[k],
                       p, (double)y[i], r);
      }
    }
}
Test(kernels, log_special_in_each_lane) { log_special_in_each_lane(avx2_or_skip()); }
Test(kernels, avx512_log_special_in_each_lane) { log_special_in_each_lane(avx512_or_skip()); }

/* exp, sigmoid and tanh take a one-multiplication scaling for a vector whose
 * lanes are all inside the range where e^x is a normal float, and the
 * clamped two-factor scaling otherwise; gelu likewise for |x| ≤ 12
 * (vecmath_avx2.h; gelu_bwd is held to the same, should it take it). Each lane's bits must be the same either way:
 * every x of a dense grid across that range and its edges is computed in
 * a whole vector of in-range lanes and again next to a NaN, which sends
 * the vector down the other path. */
static const cairn__kernel_table *gelu_bwd_table;
static void gelu_bwd_dy1(const float *x, float *y, size_t n) {
  float dy[16];
  for (size_t i = 0; i < n; i++) dy[i] = 1.0f;
  gelu_bwd_table->gelu_bwd(x, dy, y, n);
}
static void exp_paths_same_bits(const cairn__kernel_table *T) {
  typedef void (*un)(const float *, float *, size_t);
  gelu_bwd_table = T;
  const un f[] = {T->exp, T->sigmoid_fwd, T->tanh_fwd, T->gelu_fwd, gelu_bwd_dy1};
  const char *nm[] = {"exp", "sigmoid", "tanh", "gelu", "gelu_bwd"};
  /* gelu: the one-factor Gaussian for |x| ≤ 12 */
  const float lo[] = {-87.0f, -87.0f, -87.0f, -12.0f, -12.0f}, span[] = {175.0f, 175.0f, 175.0f, 24.0f, 24.0f};
  const float edge[] = {-87.0f, nextafterf(-87.0f, 0.0f), nextafterf(-87.0f, -INFINITY), 88.0f, nextafterf(88.0f, 0.0f),
                        87.0f, -43.5f, 43.5f, -86.99f, 87.99f, 0.0f, -0.0f, 1e-40f, -1e-40f, 12.0f, -12.0f,
                        11.99f, -11.99f, 0.98f, -0.98f, -0.7518f};
  for (int k = 0; k < 5; k++)
    for (int j = 0; j < 4000 + (int)(sizeof edge / sizeof edge[0]); j++) {
      float x = j < 4000 ? lo[k] + span[k] * (float)j / 3999.0f : edge[j - 4000];
      float a[16], ya[16], yb[16];
      for (int i = 0; i < 16; i++) a[i] = x + (float)i * 1e-3f * (x < 0 ? 1.0f : -1.0f);
      f[k](a, ya, 16);
      a[15] = NAN; /* second vector only: the first stays in range */
      a[7] = NAN;  /* the first vector now takes the other path */
      f[k](a, yb, 16);
      for (int i = 0; i < 7; i++)
        cr_assert(memcmp(&ya[i], &yb[i], 4) == 0, "%s %s(%.9g): %.9g on one path, %.9g on the other", T->isa, nm[k],
                  (double)a[i], (double)ya[i], (double)yb[i]);
      cr_assert(isnan(yb[7]) && isnan(yb[15]), "%s %s(NaN) not NaN", T->isa, nm[k]);
    }
}
Test(kernels, exp_paths_same_bits) { exp_paths_same_bits(avx2_or_skip()); }

/* The same for every elementwise kernel of kcases: each special input in
 * each of 19 lanes (a whole 16-lane vector and a masked tail; two and a
 * bit 8-lane vectors), the other lanes normal. The special lane must match
 * the reference within the kernel's bound (NaN for NaN, the same infinity,
 * the same zero), and no other lane may change. */
static void specials_in_each_lane(const cairn__kernel_table *T) {
  const cairn__kernel_table *R = cairn__kernels_ref();
  const float sp[] = {0.0f,      -0.0f,    INFINITY, -INFINITY, NAN,    -NAN,   1e-40f, -1e-40f,
                      0x1p-126f, FLT_MAX,  -FLT_MAX, 88.8f,     -104.f, 14.99f, -15.0f, -0.75f};
  enum { L = 19 };
  for (size_t c = 0; c < sizeof kcases / sizeof kcases[0]; c++) {
    const kcase *kc = &kcases[c];
    if (kc->gen == gen_row || kc->gen == gen_softmax_y || kc->gen == gen_log_softmax_y) continue; /* rows */
    float x[L], b[L], y0[L], y[L], yr[L];
    for (int i = 0; i < L; i++) x[i] = (i % 2 ? -0.6f : 0.45f) * (float)(i + 1) / 4.0f, b[i] = 1.0f - 0.03f * (float)i;
    if (kc->gen == gen_log)
      for (int i = 0; i < L; i++) x[i] = fabsf(x[i]) + 0.1f;
    if (kc->arity == 1) FN(T, un_fn, kc->off)(x, y0, L);
    else FN(T, bin_fn, kc->off)(x, b, y0, L);
    for (size_t k = 0; k < sizeof sp / sizeof sp[0]; k++)
      for (int p = 0; p < L; p++) {
        float xs[L];
        memcpy(xs, x, sizeof xs);
        xs[p] = sp[k];
        if (kc->arity == 1) {
          FN(T, un_fn, kc->off)(xs, y, L);
          FN(R, un_fn, kc->off)(xs, yr, L);
        } else {
          FN(T, bin_fn, kc->off)(xs, b, y, L);
          FN(R, bin_fn, kc->off)(xs, b, yr, L);
        }
        for (int i = 0; i < L; i++) {
          if (i != p) {
            cr_assert(memcmp(&y[i], &y0[i], 4) == 0, "%s %s: lane %d changed by %g in lane %d", T->isa, kc->name, i,
                      (double)sp[k], p);
            continue;
          }
          const rowinfo none = {0, 0};
          const double sc = kc->scale ? kc->scale(xs[i], b[i], none) : 0.0;
          cr_assert(close_ulps(y[i], yr[i], kc->ulps, isnan(sc) ? 0.0 : sc),
                    "%s %s(%g) in lane %d = %.9g, ref %.9g", T->isa, kc->name, (double)sp[k], p, (double)y[i],
                    (double)yr[i]);
          if (y[i] == 0.0f && yr[i] == 0.0f && kc->ulps == 0)
            cr_assert(signbit(y[i]) == signbit(yr[i]), "%s %s(%g): zero of the wrong sign", T->isa, kc->name,
                      (double)sp[k]);
        }
      }
  }
}
Test(kernels, avx2_specials_in_each_lane) { specials_in_each_lane(avx2_or_skip()); }
Test(kernels, avx512_specials_in_each_lane) { specials_in_each_lane(avx512_or_skip()); }

Test(kernels, signed_zero_nan_ref) { check_signed_zero_nan(cairn__kernels_ref()); }
Test(kernels, signed_zero_nan_avx2) { check_signed_zero_nan(avx2_or_skip()); }
Test(kernels, signed_zero_nan_avx512) { check_signed_zero_nan(avx512_or_skip()); }

Test(kernels, specials_ref) { check_specials(cairn__kernels_ref()); }
Test(kernels, specials_avx2) { check_specials(avx2_or_skip()); }
Test(kernels, specials_avx512) { check_specials(avx512_or_skip()); }

/* ---- the accuracy contract against long double ------------------------------- */

static int rel_ok(double a, long double r, double tol, double floor_) {
  if (isnan(a) || isnan((double)r)) return isnan(a) && isnan((double)r);
  if (isinf(a) || isinf((double)r)) return a == (double)r;
  return fabsl(a - r) <= tol * fmaxl(fabsl(r), floor_);
}

static long double sigmoid_ld(long double x) { return 1.0L / (1.0L + expl(-x)); }

static void contract_sigmoid(const cairn__kernel_table *T) {
  enum { N = 4096 };
  static float x[N], y[N];
  uint64_t seed = 11;
  for (size_t i = 0; i < N; i++) x[i] = i < NSPECIALS ? specials[i] : unif(&seed, -104.0f, 30.0f);
  T->sigmoid_fwd(x, y, N);
  for (size_t i = 0; i < N; i++)
    cr_assert(rel_ok(y[i], sigmoid_ld(x[i]), 1e-6, 1e-30), "%s: sigmoid(%.9g) = %.9g, want %.9Lg", T->isa,
              (double)x[i], (double)y[i], sigmoid_ld(x[i]));
}
Test(kernels, contract_sigmoid_ref) { contract_sigmoid(cairn__kernels_ref()); }
Test(kernels, contract_sigmoid_avx2) { contract_sigmoid(avx2_or_skip()); }
Test(kernels, contract_sigmoid_avx512) { contract_sigmoid(avx512_or_skip()); }

/* Long-double softmax pieces: m, S − 1 over all but the first maximum. */
static void lse_ld(const float *x, size_t n, long double *m, long double *sm1) {
  size_t k = 0;
  for (size_t i = 1; i < n; i++)
    if (x[i] > x[k]) k = i;
  *m = x[k];
  *sm1 = 0;
  for (size_t i = 0; i < n; i++)
    if (i != k) *sm1 += expl((long double)x[i] - *m);
}

/* Rows of several shapes: random, wide spread, one dominant logit, ties,
 * masked (−inf) entries. */
static void contract_row(uint64_t *seed, int kind, float *x, size_t n) {
  for (size_t i = 0; i < n; i++) x[i] = unif(seed, kind == 1 ? -60.0f : -4.0f, kind == 1 ? 60.0f : 4.0f);
  if (kind == 2) x[rng_next(seed) % n] = 40.0f; /* dominant: S − 1 ~ e^−36 */
  if (kind == 3 && n > 2) x[0] = x[n - 1] = 9.0f;
  if (kind == 4 && n > 2) x[1] = -INFINITY;
}

static void contract_softmax(const cairn__kernel_table *T) {
  uint64_t seed = 5;
  float x[MAXN], y[MAXN], l[MAXN];
  for (size_t li = 1; li < NLENS; li++)
    for (int kind = 0; kind < 5; kind++) {
      const size_t n = lens[li];
      contract_row(&seed, kind, x, n);
      long double m, sm1;
      lse_ld(x, n, &m, &sm1);
      T->softmax_row(x, y, n);
      T->log_softmax_row(x, l, n);
      for (size_t i = 0; i < n; i++) {
        const long double t = (long double)x[i] - m;
        cr_assert(rel_ok(y[i], expl(t) / (1.0L + sm1), 1e-6, 1e-30),
                  "%s softmax n=%zu kind=%d i=%zu: %.9g vs %.9Lg", T->isa, n, kind, i, (double)y[i],
                  expl(t) / (1.0L + sm1));
        cr_assert(rel_ok(l[i], t - log1pl(sm1), 1e-6, 1e-30),
                  "%s log_softmax n=%zu kind=%d i=%zu: %.9g vs %.9Lg", T->isa, n, kind, i, (double)l[i],
                  t - log1pl(sm1));
      }
    }
}
Test(kernels, contract_softmax_ref) { contract_softmax(cairn__kernels_ref()); }
Test(kernels, contract_softmax_avx2) { contract_softmax(avx2_or_skip()); }
Test(kernels, contract_softmax_avx512) { contract_softmax(avx512_or_skip()); }

/* Losses and their gradients. Loss values: 1e-6 relative (floor 1e-30).
 * Gradients: 1e-6 relative where the formula has no cancellation (sparse
 * xent, one-hot xent, mse); where it subtracts two inputs' worth of terms
 * (soft-label xent p·Z − z, sigmoid xent σ − z) the floor is 2 float ulps of
 * the terms, |scale|·2^−23·(|p·Z| + |z|): the input labels themselves carry
 * that much rounding. */
static void contract_losses(const cairn__kernel_table *T) {
  uint64_t seed = 9;
  float x[MAXN], z[MAXN], dx[MAXN];
  const float scale = 0.25f;
  for (size_t li = 1; li < NLENS; li++)
    for (int kind = 0; kind < 5; kind++) {
      const size_t n = lens[li];
      contract_row(&seed, kind, x, n);
      long double m, sm1;
      lse_ld(x, n, &m, &sm1);
      const long double s = 1.0L + sm1, l1p = log1pl(sm1); /* lse = m + l1p */
      /* sparse: the label at the dominant logit when there is one */
      int32_t label = (int32_t)(rng_next(&seed) % n);
      if (kind == 2)
        for (size_t i = 0; i < n; i++)
          if (x[i] == 40.0f) label = (int32_t)i;
      if (kind == 4 && n > 2 && label == 1) label = 0;
      double loss = T->sparse_xent_row(x, label, dx, n, scale);
      const long double want = l1p + (m - x[label]);
      cr_assert(rel_ok(loss, want, 1e-6, 1e-30), "%s sparse n=%zu kind=%d: %.17g vs %.17Lg", T->isa, n, kind,
                loss, want);
      cr_assert(T->sparse_xent_row(x, label, NULL, n, scale) == loss, "%s sparse: dx=NULL changes the loss",
                T->isa);
      for (size_t i = 0; i < n; i++) {
        const long double p = expl((long double)x[i] - m) / s;
        long double g = scale * p;
        if ((int32_t)i == label)
          g = scale * ((x[i] == m ? 0.0L : expl((long double)x[i] - m) - 1.0L) - sm1) / s;
        cr_assert(rel_ok(dx[i], g, 1e-6, 1e-30), "%s sparse dx n=%zu kind=%d i=%zu: %.9g vs %.9Lg", T->isa, n,
                  kind, i, (double)dx[i], g);
      }
      /* xent, one-hot at the same label: same results */
      for (size_t i = 0; i < n; i++) z[i] = (int32_t)i == label ? 1.0f : 0.0f;
      float dx2[MAXN];
      loss = T->xent_row(x, z, dx2, n, scale);
      cr_assert(rel_ok(loss, want, 1e-6, 1e-30), "%s xent one-hot n=%zu kind=%d: %.17g vs %.17Lg", T->isa, n,
                kind, loss, want);
      for (size_t i = 0; i < n; i++)
        cr_assert(rel_ok(dx2[i], dx[i], 1e-6, 1e-30), "%s xent one-hot dx n=%zu i=%zu: %.9g vs %.9g", T->isa,
                  n, i, (double)dx2[i], (double)dx[i]);
      /* xent, soft labels summing to ~1 */
      double zsum = 0;
      for (size_t i = 0; i < n; i++) zsum += z[i] = unif(&seed, 0.0f, 1.0f);
      for (size_t i = 0; i < n; i++) z[i] = (float)(z[i] / zsum);
      long double zs = 0, lw = 0;
      for (size_t i = 0; i < n; i++) {
        zs += z[i];
        if (z[i] != 0) lw += z[i] * (l1p + (m - x[i]));
      }
      loss = T->xent_row(x, z, dx, n, scale);
      cr_assert(rel_ok(loss, lw, 1e-6, 1e-30), "%s xent n=%zu kind=%d: %.17g vs %.17Lg", T->isa, n, kind,
                loss, lw);
      for (size_t i = 0; i < n; i++) {
        const long double p = expl((long double)x[i] - m) / s, g = scale * (p * zs - z[i]);
        const double fl = scale * 0x1p-23 * (double)(p * zs + z[i]);
        cr_assert(fabsl(dx[i] - g) <= 1e-6L * fabsl(g) + fl, "%s xent dx n=%zu kind=%d i=%zu: %.9g vs %.9Lg",
                  T->isa, n, kind, i, (double)dx[i], g);
      }
    }
  /* sigmoid xent and mse over a long vector with specials */
  for (size_t li = 0; li < NLENS; li++) {
    const size_t n = lens[li];
    for (size_t i = 0; i < n; i++) {
      x[i] = i < NSPECIALS && n > 100 ? specials[i] : unif(&seed, -30.0f, 30.0f);
      z[i] = i % 3 == 0 ? (float)(i % 2) : unif(&seed, 0.0f, 1.0f);
    }
    long double want = 0;
    for (size_t i = 0; i < n; i++)
      want += (x[i] > 0 ? (long double)x[i] : 0.0L) - (long double)x[i] * z[i] + log1pl(expl(-fabsl(x[i])));
    double loss = T->sigmoid_xent(x, z, dx, n, scale);
    cr_assert(rel_ok(loss, want, 1e-6, 1e-30), "%s sigmoid_xent n=%zu: %.17g vs %.17Lg", T->isa, n, loss,
              want);
    cr_assert(T->sigmoid_xent(x, z, NULL, n, scale) == loss, "%s sigmoid_xent: dx=NULL changes the loss",
              T->isa);
    for (size_t i = 0; i < n; i++) {
      const long double sg = sigmoid_ld(x[i]), g = scale * (sg - z[i]);
      cr_assert(fabsl(dx[i] - g) <= 1e-6L * fabsl(g) + scale * 0x1p-23 * (double)(sg + z[i]),
                "%s sigmoid_xent dx n=%zu i=%zu: %.9g vs %.9Lg", T->isa, n, i, (double)dx[i], g);
    }
    want = 0;
    for (size_t i = 0; i < n; i++) want += ((long double)x[i] - z[i]) * ((long double)x[i] - z[i]);
    loss = T->mse(x, z, dx, n, scale);
    cr_assert(rel_ok(loss, want, 1e-6, 1e-30), "%s mse n=%zu: %.17g vs %.17Lg", T->isa, n, loss, want);
    for (size_t i = 0; i < n; i++)
      cr_assert(rel_ok(dx[i], 2.0L * scale * ((long double)x[i] - z[i]), 1e-6, 1e-30), "%s mse dx i=%zu",
                T->isa, i);
  }
}
Test(kernels, contract_losses_ref) { contract_losses(cairn__kernels_ref()); }
Test(kernels, contract_losses_avx2) { contract_losses(avx2_or_skip()); }
Test(kernels, contract_losses_avx512) { contract_losses(avx512_or_skip()); }

/* A dominant logit: the loss ~e^−40 and the label gradient −(S−1)/S must
 * keep their relative accuracy (log(1 + tiny) and p − 1 would give 0). */
static void dominant(const cairn__kernel_table *T) {
  float x[10] = {0};
  x[3] = 40.0f;
  float dx[10];
  const double loss = T->sparse_xent_row(x, 3, dx, 10, 1.0f);
  const long double sm1 = 9.0L * expl(-40.0L);
  cr_assert(rel_ok(loss, log1pl(sm1), 1e-6, 1e-300), "%s: loss %.17g vs %.17Lg", T->isa, loss, log1pl(sm1));
  cr_assert(rel_ok(dx[3], -sm1 / (1 + sm1), 1e-6, 1e-300), "%s: dx %.9g vs %.9Lg", T->isa, (double)dx[3],
            -sm1 / (1 + sm1));
  float l[10];
  T->log_softmax_row(x, l, 10);
  cr_assert(rel_ok(l[3], -log1pl(sm1), 1e-6, 1e-300), "%s: log_softmax %.9g", T->isa, (double)l[3]);
}
Test(kernels, dominant_logit_ref) { dominant(cairn__kernels_ref()); }
Test(kernels, dominant_logit_avx2) { dominant(avx2_or_skip()); }
Test(kernels, dominant_logit_avx512) { dominant(avx512_or_skip()); }

/* ---- losses: AVX2 against ref, lengths, offsets, NULL dx, aliasing, guards ---- */

static void losses_match_ref(const cairn__kernel_table *A) {
  const cairn__kernel_table *R = cairn__kernels_ref();
  uint64_t seed = 13;
  for (size_t li = 0; li < NLENS; li++)
    for (size_t o = 0; o < 3; o++) {
      const size_t n = lens[li], off = offs3[o];
      buf x = buf_new(n, off), z = buf_new(n, off), dr = buf_new(n, off), da = buf_new(n, off),
          xi = buf_new(n, off);
      for (int which = 0; which < 4; which++) {
        gen_row(x.p, z.p, n, &seed); /* x[n/2] = −inf for n > 4 */
        for (size_t i = 0; i < n; i++) z.p[i] = fabsf(z.p[i]) / 2.0f;
        int32_t label = n ? (int32_t)(rng_next(&seed) % n) : 0;
        if (n > 4) {
          if (label == (int32_t)(n / 2)) label = 0; /* a finite label logit */
          z.p[n / 2] = 0.0f;                        /* 0·(lse − (−inf)) counts as 0 */
          if (which >= 2) x.p[n / 2] = -50.0f;
        }
        double lr, la, ln, li_;
        const float sc = 0.5f;
        memcpy(xi.p, x.p, n * sizeof(float));
        switch (which) {
          case 0:
            lr = R->sparse_xent_row(x.p, label, dr.p, n, sc);
            la = A->sparse_xent_row(x.p, label, da.p, n, sc);
            ln = A->sparse_xent_row(x.p, label, NULL, n, sc);
            li_ = A->sparse_xent_row(xi.p, label, xi.p, n, sc);
            break;
          case 1:
            lr = R->xent_row(x.p, z.p, dr.p, n, sc);
            la = A->xent_row(x.p, z.p, da.p, n, sc);
            ln = A->xent_row(x.p, z.p, NULL, n, sc);
            li_ = A->xent_row(xi.p, z.p, xi.p, n, sc);
            break;
          case 2:
            for (size_t i = 0; i < n; i++) z.p[i] = fminf(z.p[i], 1.0f);
            lr = R->sigmoid_xent(x.p, z.p, dr.p, n, sc);
            la = A->sigmoid_xent(x.p, z.p, da.p, n, sc);
            ln = A->sigmoid_xent(x.p, z.p, NULL, n, sc);
            li_ = A->sigmoid_xent(xi.p, z.p, xi.p, n, sc);
            break;
          default:
            lr = R->mse(x.p, z.p, dr.p, n, sc);
            la = A->mse(x.p, z.p, da.p, n, sc);
            ln = A->mse(x.p, z.p, NULL, n, sc);
            li_ = A->mse(xi.p, z.p, xi.p, n, sc);
            break;
        }
        cr_assert(isfinite(lr) && isfinite(la), "loss %d n=%zu: %g %g", which, n, lr, la);
        cr_assert(rel_ok(la, lr, 1e-6, 1e-30), "%s loss %d n=%zu off=%zu: %.17g ref %.17g", A->isa, which, n, off,
                  la, lr);
        cr_assert(ln == la && li_ == la, "loss %d n=%zu: NULL dx %.17g / in place %.17g / %.17g", which, n,
                  ln, li_, la);
        for (size_t i = 0; i < n; i++) {
          /* gradients: 4 float ulps of the result, plus of the label term where
           * the formula subtracts it (soft xent, sigmoid xent; see contract_losses) */
          const double t = fabs(dr.p[i]) + sc * ((which == 1 || which == 2) ? fabs(z.p[i]) : 0.0) + 1e-37;
          cr_assert(fabs((double)da.p[i] - dr.p[i]) <= 4 * 0x1p-24 * t || (isnan(da.p[i]) && isnan(dr.p[i])),
                    "%s loss %d dx n=%zu i=%zu: %.9g ref %.9g", A->isa, which, n, i, (double)da.p[i],
                    (double)dr.p[i]);
          cr_assert(memcmp(&xi.p[i], &da.p[i], 4) == 0, "loss %d n=%zu i=%zu: in place differs", which, n, i);
        }
        if (which == 3)
          cr_assert(memcmp(da.p, dr.p, n * sizeof(float)) == 0, "mse dp must match bit for bit");
        cr_assert(guards_ok(&dr) && guards_ok(&da) && guards_ok(&xi), "%s loss %d n=%zu: wrote outside dx",
                  A->isa, which, n);
      }
      buf_free(&x), buf_free(&z), buf_free(&dr), buf_free(&da), buf_free(&xi);
    }
}
Test(kernels, avx2_losses_match_ref) { losses_match_ref(avx2_or_skip()); }
Test(kernels, avx512_losses_match_ref) { losses_match_ref(avx512_or_skip()); }

/* dx aliasing the labels z (allowed, kernels.h): the AVX2 soft-label xent
 * keeps e^(x − m) in dx between its passes except in this case, where it
 * recomputes them; both must give the bits of the out-of-place call, at
 * every length of the loop and tail split and at an unaligned offset. */
static void losses_dx_aliases_labels(const cairn__kernel_table *A) {
  uint64_t seed = 29;
  for (size_t li = 0; li < NLENS; li++)
    for (size_t o = 0; o < 3; o++) {
      const size_t n = lens[li], off = offs3[o];
      buf x = buf_new(n, off), z = buf_new(n, off), zi = buf_new(n, off), d = buf_new(n, off);
      for (int which = 0; which < 2; which++) {
        gen_row(x.p, z.p, n, &seed);
        for (size_t i = 0; i < n; i++) z.p[i] = fminf(fabsf(z.p[i]) / 2.0f, 1.0f);
        if (n > 4) {
          z.p[n / 2] = 0.0f;
          if (which) x.p[n / 2] = -50.0f; /* sigmoid xent of −inf is NaN (−inf·0), as in the reference */
        }
        memcpy(zi.p, z.p, n * sizeof(float));
        const double l = which ? A->sigmoid_xent(x.p, z.p, d.p, n, 0.5f) : A->xent_row(x.p, z.p, d.p, n, 0.5f);
        const double la = which ? A->sigmoid_xent(x.p, zi.p, zi.p, n, 0.5f) : A->xent_row(x.p, zi.p, zi.p, n, 0.5f);
        cr_assert(l == la, "%s n=%zu off=%zu: loss with dx == z %.17g, out of place %.17g",
                  which ? "sigmoid_xent" : "xent_row", n, off, la, l);
        cr_assert(memcmp(zi.p, d.p, n * sizeof(float)) == 0, "%s n=%zu off=%zu: dx == z differs from out of place",
                  which ? "sigmoid_xent" : "xent_row", n, off);
        cr_assert(guards_ok(&zi) && guards_ok(&d), "%s n=%zu: wrote outside dx", A->isa, n);
      }
      buf_free(&x), buf_free(&z), buf_free(&zi), buf_free(&d);
    }
}
Test(kernels, avx2_losses_dx_aliases_labels) { losses_dx_aliases_labels(avx2_or_skip()); }
Test(kernels, avx512_losses_dx_aliases_labels) { losses_dx_aliases_labels(avx512_or_skip()); }

/* ---- vector helpers --------------------------------------------------------- */

static void sum_sumsq_add_scale(const cairn__kernel_table *A) {
  const cairn__kernel_table *R = cairn__kernels_ref();
  uint64_t seed = 17;
  for (size_t li = 0; li < NLENS; li++) {
    const size_t n = lens[li];
    buf x = buf_new(n, 0), xu = buf_new(n, 1), yr = buf_new(n, 15), ya = buf_new(n, 15);
    double sabs = 0, ssq = 0;
    for (size_t i = 0; i < n; i++) {
      x.p[i] = unif(&seed, -1.0f, 1.0f) * (i % 7 == 0 ? 1e6f : 1.0f);
      sabs += fabs(x.p[i]);
      ssq += (double)x.p[i] * x.p[i];
    }
    memcpy(xu.p, x.p, n * sizeof(float));
    const double s = A->sum(x.p, n), q = A->sumsq(x.p, n);
    cr_assert(fabs(s - R->sum(x.p, n)) <= 1e-12 * sabs, "sum n=%zu: %.17g vs %.17g", n, s, R->sum(x.p, n));
    cr_assert(fabs(q - R->sumsq(x.p, n)) <= 1e-12 * ssq, "sumsq n=%zu: %.17g vs %.17g", n, q,
              R->sumsq(x.p, n));
    /* a fixed order for a given n: the same bits at another alignment */
    cr_assert(A->sum(xu.p, n) == s && A->sumsq(xu.p, n) == q, "sum n=%zu depends on alignment", n);
    if (n == 0) cr_assert(s == 0.0 && q == 0.0);
    for (size_t i = 0; i < n; i++) yr.p[i] = ya.p[i] = unif(&seed, -3.0f, 3.0f);
    R->add(xu.p, yr.p, n);
    A->add(xu.p, ya.p, n);
    cr_assert(memcmp(yr.p, ya.p, n * sizeof(float)) == 0, "add n=%zu", n);
    R->scale(-0.3f, yr.p, n);
    A->scale(-0.3f, ya.p, n);
    cr_assert(memcmp(yr.p, ya.p, n * sizeof(float)) == 0, "scale n=%zu", n);
    A->add(ya.p, ya.p, n); /* y += y in place */
    for (size_t i = 0; i < n; i++) cr_assert(ya.p[i] == 2.0f * yr.p[i]);
    cr_assert(guards_ok(&yr) && guards_ok(&ya), "%s add/scale n=%zu wrote outside y", A->isa, n);
    buf_free(&x), buf_free(&xu), buf_free(&yr), buf_free(&ya);
  }
}
Test(kernels, avx2_sum_sumsq_add_scale) { sum_sumsq_add_scale(avx2_or_skip()); }
Test(kernels, avx512_sum_sumsq_add_scale) { sum_sumsq_add_scale(avx512_or_skip()); }

/* The reference's own spot checks, so that the CAIRN_ISA=ref run and a
 * machine without AVX2 still test something beyond the contract. */
Test(kernels, ref_elementwise_values) {
  const cairn__kernel_table *R = cairn__kernels_ref();
  const float x[] = {-2.0f, -0.5f, 0.0f, 0.5f, 3.0f};
  float y[5], d[5];
  const float ones[] = {1, 1, 1, 1, 1};
  R->relu_fwd(x, y, 5);
  cr_assert(y[0] == 0 && y[1] == 0 && y[2] == 0 && y[3] == 0.5f && y[4] == 3.0f);
  R->leaky_relu_fwd(x, y, 5, 0.2f);
  cr_assert(y[0] == -0.4f && y[1] == -0.1f && y[4] == 3.0f);
  R->leaky_relu_bwd(x, ones, d, 5, 0.2f);
  cr_assert(d[0] == 0.2f && d[2] == 0.2f && d[3] == 1.0f);
  R->relu_bwd(x, ones, d, 5);
  cr_assert(d[0] == 0 && d[2] == 0 && d[3] == 1.0f);
  /* backward passes against central differences of the forward passes */
  static const size_t fw[] = {
      offsetof(cairn__kernel_table, gelu_fwd), offsetof(cairn__kernel_table, gelu_tanh_fwd),
      offsetof(cairn__kernel_table, sigmoid_fwd), offsetof(cairn__kernel_table, tanh_fwd)};
  static const size_t bw[] = {
      offsetof(cairn__kernel_table, gelu_bwd), offsetof(cairn__kernel_table, gelu_tanh_bwd),
      offsetof(cairn__kernel_table, sigmoid_bwd), offsetof(cairn__kernel_table, tanh_bwd)};
  for (int f = 0; f < 4; f++) {
    float xp[5], xm[5], yp[5], ym[5], y0[5];
    const float h = 1e-2f;
    for (int i = 0; i < 5; i++) xp[i] = x[i] + h, xm[i] = x[i] - h;
    FN(R, un_fn, fw[f])(xp, yp, 5);
    FN(R, un_fn, fw[f])(xm, ym, 5);
    FN(R, un_fn, fw[f])(x, y0, 5);
    /* gelu's backward takes x, sigmoid's and tanh's take y */
    FN(R, bin_fn, bw[f])(f < 2 ? x : y0, ones, d, 5);
    for (int i = 0; i < 5; i++) {
      const double fd = ((double)yp[i] - ym[i]) / (2.0 * h);
      cr_assert(fabs(d[i] - fd) <= 2e-3 * (1 + fabs(fd)), "kernel %d at %g: %.7g vs %.7g", f, (double)x[i],
                (double)d[i], fd);
    }
  }
  cr_assert(R->sum(x, 5) == -2.0 + -0.5 + 0 + 0.5 + 3.0 && R->sumsq(x, 5) == 4 + 0.25 + 0 + 0.25 + 9);
}

/* Every entry of the one kernel list is filled in every table, each with
 * its own ISA's function (a designated initializer left out would be a
 * NULL pointer found only when that kernel is first called). */
Test(kernels, every_listed_kernel_is_in_every_table) {
  const cairn__kernel_table *R = cairn__kernels_ref(), *A = cairn__kernels_avx2(), *Z = cairn__kernels_avx512();
  size_t n = 0;
#define CHECK_REF(ret, name, params) \
  cr_assert(R->name == cairn_##name##_ref, "ref table: " #name);                    \
  n++;
  CAIRN__KERNELS(CHECK_REF)
#undef CHECK_REF
  cr_assert_eq(n, (sizeof *R - sizeof R->isa) / sizeof(void (*)(void)), "the list has every member of the table");
#ifdef CAIRN_HAVE_AVX512
  if (Z) {
    cr_assert_str_eq(Z->isa, "avx512");
#define CHECK_AVX512(ret, name, params) cr_assert(Z->name == cairn_##name##_avx512, "avx512 table: " #name);
    CAIRN__KERNELS(CHECK_AVX512)
#undef CHECK_AVX512
  }
#else
  cr_assert_null(Z, "no AVX-512 table in a build without it");
#endif
  if (!A) cr_skip_test("AVX2+FMA kernels not compiled in or not supported by this CPU");
#ifdef CAIRN_HAVE_AVX2
#define CHECK_AVX2(ret, name, params) cr_assert(A->name == cairn_##name##_avx2, "avx2 table: " #name);
  CAIRN__KERNELS(CHECK_AVX2)
#undef CHECK_AVX2
#endif
}

/* ---- byte planes (checkpoint codecs 2 and 3) ----------------------------- */

/* A byte buffer of len bytes at offset off from a 32-byte boundary, with
 * GUARD guard bytes (0xA5) on each side. */
typedef struct {
  unsigned char *mem, *p;
  size_t len;
} bbuf;

static bbuf bbuf_new(size_t len, size_t off) {
  bbuf b;
  size_t bytes = (len + 2 * GUARD + 64 + 31) / 32 * 32;
  b.mem = aligned_alloc(32, bytes);
  cr_assert_not_null(b.mem);
  memset(b.mem, 0xA5, bytes);
  b.p = b.mem + 32 + off;
  b.len = len;
  return b;
}
static int bguards_ok(const bbuf *b) {
  for (const unsigned char *q = b->mem; q < b->p; q++)
    if (*q != 0xA5) return 0;
  for (const unsigned char *q = b->p + b->len; q < b->p + b->len + GUARD; q++)
    if (*q != 0xA5) return 0;
  return 1;
}

static const size_t shuffle_lens[] = {0, 1, 7, 8, 9, 31, 32, 33, 63, 64, 65, 95, 96, 97, 1000, 4099};

/* Planes written by a table's shuffle kernel, against the definition
 * dst[b·n + i] = src[i·es + b], and unshuffle back to the elements, for
 * element sizes 1-9 (2, 4 and 8 vectorized, the others the reference's),
 * at every offset 0-31 of source and destination from a 32-byte boundary
 * for the vector tiers. */
static void check_shuffle(const cairn__kernel_table *T, size_t max_off) {
  uint64_t s = 0x5eedull;
  for (size_t es = 1; es <= 9; es++)
    for (size_t li = 0; li < sizeof shuffle_lens / sizeof *shuffle_lens; li++)
      for (size_t off = 0; off <= max_off; off += off < 3 ? 1 : 7) {
        size_t n = shuffle_lens[li], len = n * es;
        bbuf a = bbuf_new(len, off), p = bbuf_new(len, (off * 5 + 3) % 32), back = bbuf_new(len, (off + 17) % 32);
        for (size_t k = 0; k < len; k++) a.p[k] = (unsigned char)rng_next(&s);
        T->shuffle(p.p, a.p, n, es);
        for (size_t i = 0; i < n; i++)
          for (size_t b = 0; b < es; b++)
            if (p.p[b * n + i] != a.p[i * es + b])
              cr_assert_fail("%s shuffle es=%zu n=%zu off=%zu: plane %zu, element %zu is %02x, expected %02x", T->isa, es,
                       n, off, b, i, p.p[b * n + i], a.p[i * es + b]);
        T->unshuffle(back.p, p.p, n, es);
        cr_assert(len == 0 || memcmp(back.p, a.p, len) == 0, "%s unshuffle es=%zu n=%zu off=%zu: not the elements",
                  T->isa, es, n, off);
        cr_assert(bguards_ok(&p) && bguards_ok(&back), "%s es=%zu n=%zu off=%zu: wrote outside its output", T->isa,
                  es, n, off);
        free(a.mem);
        free(p.mem);
        free(back.mem);
      }
}

Test(kernels, shuffle_ref_is_the_transpose) { check_shuffle(cairn__kernels_ref(), 2); }
Test(kernels, shuffle_avx2_is_the_transpose) { check_shuffle(avx2_or_skip(), 31); }
Test(kernels, shuffle_avx512_is_the_transpose) { check_shuffle(avx512_or_skip(), 31); }

/* The AVX2 planes byte for byte equal the reference's on real-looking
 * float, double and half data (the blocks of 32 elements and the tail). */
Test(kernels, avx2_shuffle_matches_ref) {
  const cairn__kernel_table *A = avx2_or_skip(), *R = cairn__kernels_ref();
  uint64_t s = 7;
  const size_t es_list[] = {2, 4, 8};
  for (size_t e = 0; e < 3; e++)
    for (size_t li = 0; li < sizeof shuffle_lens / sizeof *shuffle_lens; li++) {
      size_t es = es_list[e], n = shuffle_lens[li], len = n * es;
      unsigned char *x = malloc(len + 1), *pa = malloc(len + 1), *pr = malloc(len + 1), *ua = malloc(len + 1),
                    *ur = malloc(len + 1);
      for (size_t i = 0; i < n; i++) {
        float f = unif(&s, -0.2f, 0.2f);
        double d = f;
        uint32_t u;
        memcpy(&u, &f, 4);
        uint16_t h = (uint16_t)(u >> 16); /* bf16 */
        memcpy(x + i * es, es == 8 ? (void *)&d : es == 4 ? (void *)&f : (void *)&h, es);
      }
      A->shuffle(pa, x, n, es);
      R->shuffle(pr, x, n, es);
      cr_assert(len == 0 || memcmp(pa, pr, len) == 0, "shuffle es=%zu n=%zu", es, n);
      A->unshuffle(ua, pr, n, es);
      R->unshuffle(ur, pr, n, es);
      cr_assert(len == 0 || (memcmp(ua, ur, len) == 0 && memcmp(ua, x, len) == 0), "unshuffle es=%zu n=%zu", es, n);
      free(x);
      free(pa);
      free(pr);
      free(ua);
      free(ur);
    }
}

/* ---- bfloat16 conversions ------------------------------------------------- */

static uint32_t f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static float u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* The rule written out case by case (doc/bf16.md), independent of the ref
 * kernel's formula: NaN -> upper half with the quiet bit; otherwise the
 * nearer of the two bf16 neighbours, the even one on a tie. */
static uint16_t bf16_oracle(uint32_t u) {
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40u);
  uint32_t lo = u >> 16, rest = u & 0xFFFFu;
  if (rest > 0x8000u || (rest == 0x8000u && (lo & 1u))) lo++;
  return (uint16_t)lo;
}

static const uint32_t bf16_special_bits[] = {
    0x00000000u, 0x80000000u,                           /* ±0 */
    0x7F800000u, 0xFF800000u,                           /* ±inf */
    0x7FC00000u, 0xFFC00000u,                           /* quiet NaNs */
    0x7F800001u, 0xFF800001u, 0x7F80FFFFu, 0x7FBF0000u, /* NaNs with payload in the low bits only, sNaN */
    0x7FFFFFFFu, 0xFFFFFFFFu,                           /* all-ones NaN */
    0x00000001u, 0x80000001u, 0x00008000u, 0x00018000u, /* subnormals, ties to even */
    0x007FFFFFu, 0x00800000u,                           /* largest subnormal, smallest normal */
    0x7F7FFFFFu, 0xFF7FFFFFu, 0x7F7F7FFFu, 0x7F7F8000u, /* FLT_MAX rounds to inf; its tie */
    0x3F808000u, 0x3F818000u, 0x3F807FFFu, 0x3F808001u, /* 1 + half ulp: tie down, tie up, below, above */
    0xBF808000u, 0xBF818000u,                           /* negative ties */
    0x3F800000u, 0x40490FDBu,                           /* 1, pi */
};

static void bf16_check_table(const cairn__kernel_table *k) {
  enum { NS = sizeof bf16_special_bits / sizeof bf16_special_bits[0] };
  float x[NS];
  uint16_t y[NS];
  for (size_t i = 0; i < NS; i++) x[i] = u2f(bf16_special_bits[i]);
  /* every special at every position of a vector, so each lane sees it */
  for (size_t shift = 0; shift < 16; shift++) {
    float xs[NS + 16];
    uint16_t ys[NS + 16];
    for (size_t i = 0; i < NS + 16; i++) xs[i] = i < shift ? 1.0f : x[(i - shift) % NS];
    k->f32_to_bf16(xs, ys, NS + 16);
    for (size_t i = shift; i < NS + 16; i++) {
      const uint32_t u = f2u(xs[i]);
      cr_assert_eq(ys[i], bf16_oracle(u), "%s: f32 0x%08x at %zu -> 0x%04x, the rule says 0x%04x", k->isa, u, i,
                   ys[i], bf16_oracle(u));
    }
  }
  k->f32_to_bf16(x, y, NS);
  for (size_t i = 0; i < NS; i++) {
    float back;
    k->bf16_to_f32(&y[i], &back, 1);
    if (isnan(x[i])) cr_assert(isnan(back) && signbit(back) == signbit(x[i]), "%s: NaN 0x%08x lost", k->isa, f2u(x[i]));
    cr_assert_eq(f2u(back), (uint32_t)y[i] << 16, "%s: widening 0x%04x", k->isa, y[i]);
  }
}

Test(kernels, bf16_rule_ref) { bf16_check_table(cairn__kernels_ref()); }
Test(kernels, bf16_rule_avx2) { bf16_check_table(avx2_or_skip()); }
Test(kernels, bf16_rule_avx512) { bf16_check_table(avx512_or_skip()); }

/* The AVX-512 f32 -> bf16 both ways, vcvtne2ps2bf16 (where the CPU has
 * AVX512_BF16) and the integer arithmetic: the rule's special values in
 * every lane of a 32-float step, without a subnormal in the step (which
 * sends the step the integer way: the table above covers those), then the
 * table with its subnormals. */
Test(kernels, bf16_rule_avx512_with_and_without_the_instruction) {
  const cairn__kernel_table *k = avx512_or_skip();
  enum { NS = sizeof bf16_special_bits / sizeof bf16_special_bits[0] };
  const int had = cairn__bf16_native_force(1), native = cairn__bf16_native_force(1);
  for (int on = 0; on < 2; on++) {
    cairn__bf16_native_force(on);
    for (size_t shift = 0; shift < 32; shift++) {
      float xs[64];
      uint16_t ys[64];
      for (size_t i = 0, j = 0; i < 64; i++) {
        uint32_t u = 0x3F800000u;
        if (i >= shift) {
          do u = bf16_special_bits[j++ % NS];
          while ((u & 0x7F800000u) == 0 && (u & 0x007FFFFFu) != 0); /* no subnormal */
        }
        xs[i] = u2f(u);
      }
      k->f32_to_bf16(xs, ys, 64);
      for (size_t i = 0; i < 64; i++)
        cr_assert_eq(ys[i], bf16_oracle(f2u(xs[i])), "avx512 (instruction %s): f32 0x%08x at %zu -> 0x%04x, the rule "
                     "says 0x%04x", on && native ? "on" : "off", f2u(xs[i]), i, ys[i], bf16_oracle(f2u(xs[i])));
    }
    bf16_check_table(k);
  }
  cairn__bf16_native_force(-1);
  cr_assert_eq(cairn__bf16_native_force(-1), had, "back to the default");
  if (!native) cr_skip_test("this CPU has no AVX512_BF16 (or the compiler no vcvtne2ps2bf16): the integer way only");
}

/* Random bits (every exponent, NaNs included) and values near ties, every
 * length, unaligned; ref against the oracle and each vector tier against
 * ref bit for bit, with guards after the end untouched; widening is exact
 * both ways. */
Test(kernels, bf16_lengths_offsets) {
  const cairn__kernel_table *R = cairn__kernels_ref(), *A = cairn__kernels_avx2(), *V = cairn__kernels_avx512();
  uint64_t s = 7;
  static float x[MAXN + 32];
  static uint16_t yr[MAXN + 32 + GUARD], ya[MAXN + 32 + GUARD];
  static float wr[MAXN + 32 + GUARD], wa[MAXN + 32 + GUARD];
  for (size_t l = 0; l < NLENS; l++)
    for (size_t off = 0; off < 3; off++) {
      const size_t n = lens[l];
      for (size_t i = 0; i < n + off; i++) {
        uint32_t u = (uint32_t)rng_next(&s);
        if (i % 3 == 1) u = (u & 0xFFFF0000u) | 0x8000u; /* an exact tie */
        if (i % 5 == 2) u = (u & 0xFFFF0000u) | (0x7FFFu + (uint32_t)(i % 3)); /* around one */
        x[i] = u2f(u);
      }
      for (size_t i = 0; i < MAXN + 32 + GUARD; i++) yr[i] = ya[i] = 0xA5A5u, wr[i] = wa[i] = 1234.5f;
      R->f32_to_bf16(x + off, yr + off, n);
      for (size_t i = 0; i < n; i++)
        cr_assert_eq(yr[off + i], bf16_oracle(f2u(x[off + i])), "ref n=%zu off=%zu i=%zu: 0x%08x", n, off, i,
                     f2u(x[off + i]));
      R->bf16_to_f32(yr + off, wr + off, n);
      for (size_t i = 0; i < n; i++) cr_assert_eq(f2u(wr[off + i]), (uint32_t)yr[off + i] << 16);
      cr_assert_eq(yr[off + n], 0xA5A5u, "ref wrote past the end");
      /* the AVX-512 tier twice: with vcvtne2ps2bf16 where the CPU has it, and without */
      const cairn__kernel_table *tiers[3] = {A, V, V};
      for (int t = 0; t < 3; t++) {
        const cairn__kernel_table *T = tiers[t];
        if (!T) continue;
        if (t > 0) cairn__bf16_native_force(t == 1);
        for (size_t i = 0; i < MAXN + 32 + GUARD; i++) ya[i] = 0xA5A5u, wa[i] = 1234.5f;
        T->f32_to_bf16(x + off, ya + off, n);
        cr_assert(memcmp(ya, yr, sizeof ya) == 0, "%s f32_to_bf16 differs from ref at n=%zu off=%zu", T->isa, n, off);
        T->bf16_to_f32(yr + off, wa + off, n);
        cr_assert(memcmp(wa, wr, sizeof wa) == 0, "%s bf16_to_f32 differs from ref at n=%zu off=%zu", T->isa, n, off);
      }
      cairn__bf16_native_force(-1);
    }
  if (!A) cr_skip_test("AVX2+FMA kernels not compiled in or not supported by this CPU");
}

/* ---- rows of normal logits: the distributions of doc/kernels.md ---- */

/* N(0, σ²) by Box–Muller from two uniforms */
static float normal_sample(uint64_t *s, float sigma) {
  const double u1 = ((double)(rng_next(s) >> 11) + 0.5) / 9007199254740992.0;
  const double u2 = (double)(rng_next(s) >> 11) / 9007199254740992.0;
  return (float)(sigma * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* Rows of 10, 1000 and 32768 logits from N(0, σ²), σ = 1, 10, 100 (the
 * figures of doc/kernels.md come from bench/ulp_sweep on the same
 * distributions): every row and loss kernel of tier T against the
 * reference, with the bounds of the contract table. */
static void rows_normal_logits(const cairn__kernel_table *T) {
  const cairn__kernel_table *R = cairn__kernels_ref();
  static const size_t ns[] = {10, 1000, 32768};
  static const float sigmas[] = {1.0f, 10.0f, 100.0f};
  const size_t big = 32768;
  float *x = malloc(big * sizeof(float)), *z = malloc(big * sizeof(float)), *dy = malloc(big * sizeof(float));
  float *yr = malloc(big * sizeof(float)), *ya = malloc(big * sizeof(float));
  cr_assert(x && z && dy && yr && ya);
  uint64_t seed = 27;
  const float sc = 0.5f;
  for (size_t ni = 0; ni < 3; ni++)
    for (size_t si = 0; si < 3; si++)
      for (int rep = 0; rep < (ns[ni] == big ? 1 : 3); rep++) {
        const size_t n = ns[ni];
        double zs = 0.0;
        for (size_t i = 0; i < n; i++) {
          x[i] = normal_sample(&seed, sigmas[si]);
          z[i] = unif(&seed, 0.0f, 1.0f);
          dy[i] = unif(&seed, -1.0f, 1.0f);
          zs += z[i];
        }
        for (size_t i = 0; i < n; i++) z[i] = (float)(z[i] / zs);
        R->softmax_row(x, yr, n);
        T->softmax_row(x, ya, n);
        for (size_t i = 0; i < n; i++)
          cr_assert(close_ulps(ya[i], yr[i], 3, 0), "%s softmax n=%zu σ=%g i=%zu: %.9g vs %.9g", T->isa, n,
                    (double)sigmas[si], i, (double)ya[i], (double)yr[i]);
        /* backward rows on the softmax output */
        double dot = 0.0, sumb = 0.0;
        for (size_t i = 0; i < n; i++) dot += (double)dy[i] * yr[i], sumb += dy[i];
        float *const y = yr, *const gr = malloc(n * sizeof(float));
        cr_assert(gr);
        R->softmax_bwd_row(y, dy, gr, n);
        T->softmax_bwd_row(y, dy, ya, n);
        for (size_t i = 0; i < n; i++)
          cr_assert(close_ulps(ya[i], gr[i], 2, fabs(y[i]) * (fabs(dy[i]) + fabs(dot))),
                    "%s softmax_bwd n=%zu σ=%g i=%zu", T->isa, n, (double)sigmas[si], i);
        R->log_softmax_row(x, yr, n);
        T->log_softmax_row(x, ya, n);
        for (size_t i = 0; i < n; i++)
          cr_assert(close_ulps(ya[i], yr[i], 2, 0), "%s log_softmax n=%zu σ=%g i=%zu: %.9g vs %.9g", T->isa, n,
                    (double)sigmas[si], i, (double)ya[i], (double)yr[i]);
        R->log_softmax_bwd_row(yr, dy, gr, n);
        T->log_softmax_bwd_row(yr, dy, ya, n);
        for (size_t i = 0; i < n; i++)
          cr_assert(close_ulps(ya[i], gr[i], 3, fabs(dy[i]) + exp(yr[i]) * fabs(sumb)),
                    "%s log_softmax_bwd n=%zu σ=%g i=%zu", T->isa, n, (double)sigmas[si], i);
        /* losses and their gradients */
        const int32_t label = (int32_t)(rng_next(&seed) % n);
        double lr = R->sparse_xent_row(x, label, gr, n, sc), la = T->sparse_xent_row(x, label, ya, n, sc);
        cr_assert(fabs(la - lr) <= 1e-6 * fmax(fabs(lr), 1e-30), "%s sparse loss n=%zu σ=%g: %.17g vs %.17g",
                  T->isa, n, (double)sigmas[si], la, lr);
        for (size_t i = 0; i < n; i++)
          cr_assert(fabs((double)ya[i] - gr[i]) <= 4 * 0x1p-24 * fabs(gr[i]) + 0x1p-149,
                    "%s sparse dx n=%zu σ=%g i=%zu: %.9g vs %.9g", T->isa, n, (double)sigmas[si], i,
                    (double)ya[i], (double)gr[i]);
        lr = R->xent_row(x, z, gr, n, sc), la = T->xent_row(x, z, ya, n, sc);
        cr_assert(fabs(la - lr) <= 1e-6 * fmax(fabs(lr), 1e-30), "%s xent loss n=%zu σ=%g: %.17g vs %.17g",
                  T->isa, n, (double)sigmas[si], la, lr);
        for (size_t i = 0; i < n; i++)
          cr_assert(fabs((double)ya[i] - gr[i]) <= 4 * 0x1p-24 * (fabs(gr[i]) + sc * fabs(z[i])) + 0x1p-149,
                    "%s xent dx n=%zu σ=%g i=%zu: %.9g vs %.9g", T->isa, n, (double)sigmas[si], i,
                    (double)ya[i], (double)gr[i]);
        lr = R->sigmoid_xent(x, z, gr, n, sc), la = T->sigmoid_xent(x, z, ya, n, sc);
        cr_assert(fabs(la - lr) <= 1e-6 * fmax(fabs(lr), 1e-30), "%s sigmoid_xent loss n=%zu σ=%g", T->isa, n,
                  (double)sigmas[si]);
        for (size_t i = 0; i < n; i++)
          cr_assert(fabs((double)ya[i] - gr[i]) <= 4 * 0x1p-24 * (fabs(gr[i]) + sc * fabs(z[i])) + 0x1p-149,
                    "%s sigmoid_xent dx n=%zu σ=%g i=%zu", T->isa, n, (double)sigmas[si], i);
        free(gr);
      }
  free(x), free(z), free(dy), free(yr), free(ya);
}
Test(kernels, rows_normal_logits_avx2) { rows_normal_logits(avx2_or_skip()); }
Test(kernels, rows_normal_logits_avx512) { rows_normal_logits(avx512_or_skip()); }

/* The AVX-512 tier against the AVX2 tier, bit for bit. exp, log, sigmoid and
 * the four gelus do the same operations in the same order at both widths
 * (VSCALEFPS's one rounding of p·2^k is the rounding of the AVX2 tier's
 * split product; sigmoid and gelu_tanh divide with VDIVPS in both), so
 * their bits must be equal; tanh's last correction uses each ISA's
 * reciprocal estimate (RCPPS, VRCP14PS), so its bits may differ by one
 * ulp, rarely. (A NaN may come out with either sign.) The inputs: a dense grid over each function's working range,
 * its edges and specials, in lengths with a masked tail. */
static void tiers_elem_same_bits(const cairn__kernel_table *A, const cairn__kernel_table *Z) {
  enum { N = 40000 + 13 };
  float *x = malloc(N * sizeof *x), *dy = malloc(N * sizeof *dy), *ya = malloc(N * sizeof *ya),
        *yz = malloc(N * sizeof *yz);
  cr_assert(x && dy && ya && yz);
  uint64_t s = 2718;
  for (int i = 0; i < N; i++) dy[i] = unif(&s, -2.0f, 2.0f);
  const size_t off[] = {offsetof(cairn__kernel_table, exp), offsetof(cairn__kernel_table, log),
                        offsetof(cairn__kernel_table, sigmoid_fwd), offsetof(cairn__kernel_table, gelu_fwd),
                        offsetof(cairn__kernel_table, gelu_tanh_fwd), offsetof(cairn__kernel_table, tanh_fwd),
                        offsetof(cairn__kernel_table, gelu_bwd), offsetof(cairn__kernel_table, gelu_tanh_bwd)};
  const char *nm[] = {"exp", "log", "sigmoid", "gelu", "gelu_tanh", "tanh", "gelu_bwd", "gelu_tanh_bwd"};
  const float lo[] = {-110.0f, 0.0f, -110.0f, -16.0f, -13.0f, -10.0f, -16.0f, -13.0f};
  const float hi[] = {90.0f, 100.0f, 110.0f, 16.0f, 13.0f, 10.0f, 16.0f, 13.0f};
  for (int k = 0; k < 8; k++) {
    for (int i = 0; i < N; i++) x[i] = lo[k] + (hi[k] - lo[k]) * (float)i / (float)(N - 1);
    for (size_t i = 0; i < sizeof specials / sizeof specials[0] && i < N; i++) x[7 * i + 3] = specials[i];
    if (k == 1) /* log: also tiny and huge positive floats */
      for (int i = 0; i < 2000; i++) x[N - 1 - i] = ldexpf(1.0f + (float)i / 2000.0f, -149 + (i % 276));
    if (k < 6) {
      FN(A, un_fn, off[k])(x, ya, N);
      FN(Z, un_fn, off[k])(x, yz, N);
    } else {
      FN(A, bin_fn, off[k])(x, dy, ya, N);
      FN(Z, bin_fn, off[k])(x, dy, yz, N);
    }
    int diff = 0;
    for (int i = 0; i < N; i++) {
      if (memcmp(&ya[i], &yz[i], 4) == 0 || (isnan(ya[i]) && isnan(yz[i]))) continue; /* NaN's sign: either */
      cr_assert(k == 5, "%s(%.9g): avx2 %.9g, avx512 %.9g", nm[k], (double)x[i], (double)ya[i], (double)yz[i]);
      cr_assert(yz[i] == nextafterf(ya[i], INFINITY) || yz[i] == nextafterf(ya[i], -INFINITY),
                "tanh(%.9g): avx2 %.9g, avx512 %.9g: more than one ulp apart", (double)x[i], (double)ya[i],
                (double)yz[i]);
      diff++;
    }
    if (diff) cr_log_info("%s: %d of %d results differ by one ulp between the tiers", nm[k], diff, N);
    cr_assert(diff <= N / 100, "%s: %d of %d results differ between the tiers", nm[k], diff, N);
  }
  free(x), free(dy), free(ya), free(yz);
}
Test(kernels, avx512_elem_same_bits_as_avx2) { tiers_elem_same_bits(avx2_or_skip(), avx512_or_skip()); }

/* The row kernels (rowmath_avx512.h) take the AVX2 tier's row exponential
 * and its summation order: softmax, log-softmax, sparse and soft-label
 * cross-entropy give its bits, losses and gradients alike, whatever n,
 * including rows with ties for the max, −inf entries and dx aliasing x or
 * the labels. */
static void tiers_rows_same_bits(const cairn__kernel_table *A, const cairn__kernel_table *Z) {
  const size_t ns[] = {1, 2, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 47, 48, 63, 64, 65, 1000, 1003, 4099};
  const float sig[] = {1.0f, 10.0f, 100.0f};
  enum { M = 4099 };
  static float x[M], z[M], ya[M], yz[M], xa[M], xz[M];
  uint64_t s = 31415;
  for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
    for (int b = 0; b < 3; b++)
      for (int v = 0; v < 3; v++) {
        const size_t n = ns[a];
        float zs = 0.0f;
        for (size_t i = 0; i < n; i++) {
          float g = 0.0f; /* roughly normal: sum of four uniforms */
          for (int j = 0; j < 4; j++) g += unif(&s, -0.866f, 0.866f);
          x[i] = sig[b] * g;
          z[i] = unif(&s, 0.0f, 1.0f);
          zs += z[i];
        }
        for (size_t i = 0; i < n; i++) z[i] /= zs;
        if (v == 1 && n > 3) x[n / 3] = x[n - 1] = x[0] > x[n - 1] ? x[0] : x[n - 1]; /* ties */
        if (v == 2 && n > 2) x[1] = -INFINITY, z[1] = 0.0f;
        const int32_t label = (int32_t)(n / 2);
        A->softmax_row(x, ya, n);
        Z->softmax_row(x, yz, n);
        cr_assert(memcmp(ya, yz, n * 4) == 0, "softmax_row n=%zu σ=%g case %d", n, (double)sig[b], v);
        A->log_softmax_row(x, ya, n);
        Z->log_softmax_row(x, yz, n);
        cr_assert(memcmp(ya, yz, n * 4) == 0, "log_softmax_row n=%zu σ=%g case %d", n, (double)sig[b], v);
        double la = A->sparse_xent_row(x, label, ya, n, 0.37f), lz = Z->sparse_xent_row(x, label, yz, n, 0.37f);
        cr_assert(la == lz && memcmp(ya, yz, n * 4) == 0, "sparse_xent_row n=%zu σ=%g case %d: %.17g %.17g", n,
                  (double)sig[b], v, la, lz);
        la = A->xent_row(x, z, ya, n, 0.37f), lz = Z->xent_row(x, z, yz, n, 0.37f);
        cr_assert(la == lz && memcmp(ya, yz, n * 4) == 0, "xent_row n=%zu σ=%g case %d: %.17g %.17g", n,
                  (double)sig[b], v, la, lz);
        /* dx aliasing the labels (the gradient pass recomputes E) and x */
        memcpy(xa, z, n * 4), memcpy(xz, z, n * 4);
        la = A->xent_row(x, xa, xa, n, 0.37f), lz = Z->xent_row(x, xz, xz, n, 0.37f);
        cr_assert(la == lz && memcmp(xa, xz, n * 4) == 0, "xent_row dx = z, n=%zu", n);
        memcpy(xa, x, n * 4), memcpy(xz, x, n * 4);
        la = A->sparse_xent_row(xa, label, xa, n, 0.37f), lz = Z->sparse_xent_row(xz, label, xz, n, 0.37f);
        cr_assert(la == lz && memcmp(xa, xz, n * 4) == 0, "sparse_xent_row dx = x, n=%zu", n);
      }
}
Test(kernels, avx512_rows_same_bits_as_avx2) { tiers_rows_same_bits(avx2_or_skip(), avx512_or_skip()); }
