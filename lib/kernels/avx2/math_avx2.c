/* AVX2+FMA elementwise math, softmax rows and vector helpers. The scalar
 * specification is lib/kernels/ref/math_ref.c; the vector functions and
 * their errors are described in vecmath_avx2.h, the row passes in
 * rowmath_avx2.h, both in doc/kernels.md. */
#include "config.h"

#include <math.h>

#include "kernels/avx2/rowmath_avx2.h"
#include "kernels/avx2/vecmath_avx2.h"
#include "kernels/kernels.h"

/* y = e^x */
void cairn_exp_avx2(const float *x, float *y, size_t n) { CAIRN__AVX2_MAP1(x, y, n, cairn__v_exp); }

/* y = log x */
void cairn_log_avx2(const float *x, float *y, size_t n) { CAIRN__AVX2_MAP1(x, y, n, cairn__v_log); }

/* y = e^(x − m) / S,  m = max x,  S = Σ e^(x − m)
 * Pass 2 stores E = 2^64·e^(x − m) in y (read x[i], then write y[i]: y may
 * be x) and prefetches the next rows of x and y (rowmath_avx2.h); pass 3
 * scales it by 2^−64/S, a normal float for any n < 2^62, in one rounding. */
void cairn_softmax_row_avx2(const float *x, float *y, size_t n) {
  if (n == 0) return;
  const float m = cairn__r_max(x, n);
  const double s = 1.0 + cairn__r_expsum_m1(x, y, (const float *)y == x ? NULL : y + n, n, m);
  const __m256 inv = _mm256_set1_ps((float)(CAIRN__R_2M64 / s));
#define CAIRN__SCALE(v) _mm256_mul_ps(v, inv)
  CAIRN__AVX2_MAP1(y, y, n, CAIRN__SCALE);
#undef CAIRN__SCALE
}

/* y = (x − m) − log S,  log S = log1p(S − 1)
 * The exp-sum pass prefetches x's next row and this row of y, which pass 3
 * writes. */
void cairn_log_softmax_row_avx2(const float *x, float *y, size_t n) {
  if (n == 0) return;
  const float m = cairn__r_max(x, n);
  const __m256 vm = _mm256_set1_ps(m);
  const __m256 l = _mm256_set1_ps((float)log1p(cairn__r_expsum_m1(x, NULL, (const float *)y == x ? NULL : y, n, m)));
  /* Both terms are ≤ 0: no cancellation, ≤ 1.5 ulp from the two roundings. */
#define CAIRN__LSM(v) _mm256_sub_ps(_mm256_sub_ps(v, vm), l)
  CAIRN__AVX2_MAP1(x, y, n, CAIRN__LSM);
#undef CAIRN__LSM
}

/* Σ a⊙b in double: the products of two floats are exact in double. */
static double dot_pd(const float *a, const float *b, size_t n) {
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  size_t i = 0;
  for (; i < n; i += 8) {
    __m256 av, bv;
    if (!(i & 15)) { /* first pass: prefetch ahead in the row (rowmath_avx2.h) */
      _mm_prefetch((const char *)((uintptr_t)(a + i) + CAIRN__ROW_PF_AHEAD * sizeof(float)), _MM_HINT_T0);
      _mm_prefetch((const char *)((uintptr_t)(b + i) + CAIRN__ROW_PF_AHEAD * sizeof(float)), _MM_HINT_T0);
    }
    if (i + 8 <= n) {
      av = _mm256_loadu_ps(a + i);
      bv = _mm256_loadu_ps(b + i);
    } else {
      const __m256i mk = cairn__v_mask(n - i);
      av = _mm256_maskload_ps(a + i, mk);
      bv = _mm256_maskload_ps(b + i, mk);
    }
    lo = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(av)),
                         _mm256_cvtps_pd(_mm256_castps256_ps128(bv)), lo);
    hi = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(av, 1)),
                         _mm256_cvtps_pd(_mm256_extractf128_ps(bv, 1)), hi);
  }
  return cairn__v_hsum_pd(_mm256_add_pd(lo, hi));
}

/* dx[i] = F(y[i], dy[i]) for a backward row's second pass, prefetching the
 * next rows of y and dy (rowmath_avx2.h) and, unless dx is dy, of dx. */
#define CAIRN__BWD_PASS(y, dy, dx, n, F)                                                           \
  do {                                                                                             \
    const float *const pw_ = (const float *)(dx) == (dy) ? NULL : (dx) + (n);                     \
    size_t i_ = 0;                                                                                 \
    for (; i_ + 16 <= (n); i_ += 16) {                                                             \
      CAIRN__ROW_PF((y) + (n), i_);                                                                \
      CAIRN__ROW_PF((dy) + (n), i_);                                                               \
      if (pw_) CAIRN__ROW_PF(pw_, i_);                                                             \
      const __m256 a0_ = F(_mm256_loadu_ps((y) + i_), _mm256_loadu_ps((dy) + i_));                 \
      const __m256 a1_ = F(_mm256_loadu_ps((y) + i_ + 8), _mm256_loadu_ps((dy) + i_ + 8));         \
      _mm256_storeu_ps((dx) + i_, a0_);                                                            \
      _mm256_storeu_ps((dx) + i_ + 8, a1_);                                                        \
    }                                                                                              \
    for (; i_ + 8 <= (n); i_ += 8)                                                                 \
      _mm256_storeu_ps((dx) + i_, F(_mm256_loadu_ps((y) + i_), _mm256_loadu_ps((dy) + i_)));       \
    if (i_ < (n)) {                                                                                \
      const __m256i m_ = cairn__v_mask((n)-i_);                                                    \
      _mm256_maskstore_ps((dx) + i_, m_,                                                           \
                          F(_mm256_maskload_ps((y) + i_, m_), _mm256_maskload_ps((dy) + i_, m_))); \
    }                                                                                              \
  } while (0)

/* dx = y ⊙ (dy − s),  s = Σ dy⊙y (double, rounded to float once) */
void cairn_softmax_bwd_row_avx2(const float *y, const float *dy, float *dx, size_t n) {
  const __m256 s = _mm256_set1_ps((float)dot_pd(dy, y, n));
#define CAIRN__SMB(yv, dyv) _mm256_mul_ps(yv, _mm256_sub_ps(dyv, s))
  CAIRN__BWD_PASS(y, dy, dx, n, CAIRN__SMB);
#undef CAIRN__SMB
}

/* dx = dy − e^y · Σ dy */
void cairn_log_softmax_bwd_row_avx2(const float *y, const float *dy, float *dx, size_t n) {
  const __m256 s = _mm256_set1_ps((float)cairn_sum_avx2(dy, n));
#define CAIRN__LSMB(yv, dyv) _mm256_fnmadd_ps(cairn__v_exp(yv), s, dyv)
  CAIRN__BWD_PASS(y, dy, dx, n, CAIRN__LSMB);
#undef CAIRN__LSMB
}

/* Σ x and Σ x² in double, 16 floats per step into four 4-lane double
 * accumulators (tail: masked vectors of 8 into the first two), combined as
 * ((a0 + a1) + (a2 + a3)) and then lanes (0 + 2) + (1 + 3): a fixed order for
 * a given n. Floats and their squares are exact in double, so the only
 * rounding is the additions'. */
/* A read-only stream gets about half the in-place update's bandwidth from
 * the hardware prefetchers alone on Zen 3 (at 1 thread: too few misses in
 * flight); a software prefetch this far ahead (one per 64-byte line) keeps
 * more of them going. It changes no result. */
#define CAIRN__PF_AHEAD 1024
#define CAIRN__REDUCE(name, ACC)                                                                   \
  double name(const float *x, size_t n) {                                                          \
    __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;                                   \
    size_t i = 0;                                                                                  \
    for (; i + 16 <= n; i += 16) {                                                                 \
      _mm_prefetch((const char *)(x + i) + CAIRN__PF_AHEAD, _MM_HINT_T0);                          \
      const __m256 u = _mm256_loadu_ps(x + i), v = _mm256_loadu_ps(x + i + 8);                     \
      ACC(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(u)));                                         \
      ACC(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(u, 1)));                                       \
      ACC(a2, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));                                         \
      ACC(a3, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));                                       \
    }                                                                                              \
    for (; i < n; i += 8) {                                                                        \
      const __m256 u = _mm256_maskload_ps(x + i, cairn__v_mask(n - i));                            \
      ACC(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(u)));                                         \
      ACC(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(u, 1)));                                       \
    }                                                                                              \
    return cairn__v_hsum_pd(_mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3)));          \
  }
#define CAIRN__ACC_SUM(a, d) (a) = _mm256_add_pd((a), (d))
#define CAIRN__ACC_SQ(a, d) (a) = _mm256_fmadd_pd((d), (d), (a))

/* Σ x */
CAIRN__REDUCE(cairn_sum_avx2, CAIRN__ACC_SUM)
/* Σ x² */
CAIRN__REDUCE(cairn_sumsq_avx2, CAIRN__ACC_SQ)

/* y += x */
void cairn_add_avx2(const float *x, float *y, size_t n) {
  CAIRN__AVX2_MAP2(y, x, y, n, _mm256_add_ps);
}

/* x *= a */
void cairn_scale_avx2(float a, float *x, size_t n) {
  const __m256 va = _mm256_set1_ps(a);
#define CAIRN__MUL(v) _mm256_mul_ps(v, va)
  CAIRN__AVX2_MAP1(x, x, n, CAIRN__MUL);
#undef CAIRN__MUL
}
