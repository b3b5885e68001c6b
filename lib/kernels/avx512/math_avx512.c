/* AVX-512 elementwise math, softmax rows and vector helpers: the AVX2
 * tier's methods (lib/kernels/avx2/math_avx2.c) at sixteen lanes. The
 * scalar specification is lib/kernels/ref/math_ref.c. */
#include "config.h"

#include <math.h>

#include "kernels/avx512/rowmath_avx512.h"
#include "kernels/avx512/vecmath_avx512.h"
#include "kernels/kernels.h"

/* y = e^x */
void cairn_exp_avx512(const float *x, float *y, size_t n) { CAIRN__AVX512_MAP1(x, y, n, cairn__z_exp); }

/* y = log x */
void cairn_log_avx512(const float *x, float *y, size_t n) { CAIRN__AVX512_MAP1(x, y, n, cairn__z_log); }

/* y = e^(x − m) / S,  m = max x,  S = Σ e^(x − m): the AVX2 tier's passes
 * and bits (rowmath_avx512.h). The exp-sum pass stores E = 2^64·e^(x − m)
 * in y (y may be x) and prefetches the next rows of x and y; the last pass
 * scales by 2^−64/S, a normal float, in one rounding. */
void cairn_softmax_row_avx512(const float *x, float *y, size_t n) {
  if (n == 0) return;
  const float m = cairn__zr_max(x, n);
  const double s = 1.0 + cairn__zr_expsum_m1(x, y, (const float *)y == x ? NULL : y + n, n, m);
  const __m512 inv = _mm512_set1_ps((float)(CAIRN__ZR_2M64 / s));
#define CAIRN__SCALE(v) _mm512_mul_ps(v, inv)
  CAIRN__AVX512_MAP1(y, y, n, CAIRN__SCALE);
#undef CAIRN__SCALE
}

/* y = (x − m) − log S,  log S = log1p(S − 1); the exp-sum pass prefetches
 * x's next row and this row of y, which the last pass writes. */
void cairn_log_softmax_row_avx512(const float *x, float *y, size_t n) {
  if (n == 0) return;
  const float m = cairn__zr_max(x, n);
  const __m512 vm = _mm512_set1_ps(m);
  const __m512 l =
      _mm512_set1_ps((float)log1p(cairn__zr_expsum_m1(x, NULL, (const float *)y == x ? NULL : y, n, m)));
#define CAIRN__LSM(v) _mm512_sub_ps(_mm512_sub_ps(v, vm), l)
  CAIRN__AVX512_MAP1(x, y, n, CAIRN__LSM);
#undef CAIRN__LSM
}

/* Σ a⊙b in double (products of floats are exact there): 16 per step into
 * two 8-lane accumulators, combined in a fixed order. Whole vectors use
 * plain loads (a masked load streamed from memory at 0.7 of a plain
 * load's speed on Zen 5, see relu_bwd16) and prefetch 1 KB ahead in the
 * row, as the first pass of a row does (rowmath_avx512.h). */
static double dot_pd(const float *a, const float *b, size_t n) {
  __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm_prefetch((const char *)((uintptr_t)(a + i) + CAIRN__ZR_PF_AHEAD * sizeof(float)), _MM_HINT_T0);
    _mm_prefetch((const char *)((uintptr_t)(b + i) + CAIRN__ZR_PF_AHEAD * sizeof(float)), _MM_HINT_T0);
    const __m512 av = _mm512_loadu_ps(a + i), bv = _mm512_loadu_ps(b + i);
    lo = _mm512_fmadd_pd(cairn__z_lo_pd(av), cairn__z_lo_pd(bv), lo);
    hi = _mm512_fmadd_pd(cairn__z_hi_pd(av), cairn__z_hi_pd(bv), hi);
  }
  if (i < n) {
    const __mmask16 mk = cairn__z_mask(n - i);
    const __m512 av = _mm512_maskz_loadu_ps(mk, a + i), bv = _mm512_maskz_loadu_ps(mk, b + i);
    lo = _mm512_fmadd_pd(cairn__z_lo_pd(av), cairn__z_lo_pd(bv), lo);
    hi = _mm512_fmadd_pd(cairn__z_hi_pd(av), cairn__z_hi_pd(bv), hi);
  }
  return cairn__z_hsum_pd(_mm512_add_pd(lo, hi));
}

/* dx[i] = F(y[i], dy[i]) for a backward row's second pass, two vectors per
 * step, prefetching the next rows of y and dy and, unless dx is dy, of dx
 * (one prefetch per array per 64 bytes, rowmath_avx512.h), as the AVX2
 * tier does: without them the row's arithmetic and the next row's
 * transfer take turns. */
#define CAIRN__ZBWD_PASS(y, dy, dx, n, F)                                                          \
  do {                                                                                             \
    const float *const pw_ = (const float *)(dx) == (dy) ? NULL : (dx) + (n);                     \
    size_t i_ = 0;                                                                                 \
    for (; i_ + 32 <= (n); i_ += 32) {                                                             \
      CAIRN__ZR_PF((y) + (n), i_);                                                                 \
      CAIRN__ZR_PF((y) + (n), i_ + 16);                                                            \
      CAIRN__ZR_PF((dy) + (n), i_);                                                                \
      CAIRN__ZR_PF((dy) + (n), i_ + 16);                                                           \
      if (pw_) {                                                                                   \
        CAIRN__ZR_PF(pw_, i_);                                                                     \
        CAIRN__ZR_PF(pw_, i_ + 16);                                                                \
      }                                                                                            \
      const __m512 a0_ = F(_mm512_loadu_ps((y) + i_), _mm512_loadu_ps((dy) + i_));                 \
      const __m512 a1_ = F(_mm512_loadu_ps((y) + i_ + 16), _mm512_loadu_ps((dy) + i_ + 16));       \
      _mm512_storeu_ps((dx) + i_, a0_);                                                            \
      _mm512_storeu_ps((dx) + i_ + 16, a1_);                                                       \
    }                                                                                              \
    for (; i_ + 16 <= (n); i_ += 16)                                                               \
      _mm512_storeu_ps((dx) + i_, F(_mm512_loadu_ps((y) + i_), _mm512_loadu_ps((dy) + i_)));       \
    if (i_ < (n)) {                                                                                \
      const __mmask16 m_ = cairn__z_mask((n)-i_);                                                  \
      _mm512_mask_storeu_ps((dx) + i_, m_,                                                         \
                            F(_mm512_maskz_loadu_ps(m_, (y) + i_), _mm512_maskz_loadu_ps(m_, (dy) + i_))); \
    }                                                                                              \
  } while (0)

/* dx = y ⊙ (dy − s),  s = Σ dy⊙y (double, rounded to float once) */
void cairn_softmax_bwd_row_avx512(const float *y, const float *dy, float *dx, size_t n) {
  const __m512 s = _mm512_set1_ps((float)dot_pd(dy, y, n));
#define CAIRN__SMB(yv, dyv) _mm512_mul_ps(yv, _mm512_sub_ps(dyv, s))
  CAIRN__ZBWD_PASS(y, dy, dx, n, CAIRN__SMB);
#undef CAIRN__SMB
}

/* dx = dy − e^y · Σ dy */
void cairn_log_softmax_bwd_row_avx512(const float *y, const float *dy, float *dx, size_t n) {
  const __m512 s = _mm512_set1_ps((float)cairn_sum_avx512(dy, n));
#define CAIRN__LSMB(yv, dyv) _mm512_fnmadd_ps(cairn__z_exp(yv), s, dyv)
  CAIRN__ZBWD_PASS(y, dy, dx, n, CAIRN__LSMB);
#undef CAIRN__LSMB
}

/* Σ x and Σ x² in double: 32 floats per step into four 8-lane double
 * accumulators (the tail: masked vectors of 16 into the first two),
 * combined as ((a0 + a1) + (a2 + a3)) and then across lanes in the fixed
 * order of cairn__z_hsum_pd: a fixed order for a given n, whatever the
 * alignment (the order differs from the AVX2 tier's; both are exact but
 * for the additions' roundings). */
#define CAIRN__PF_AHEAD 1024
#define CAIRN__REDUCE(name, ACC)                                                                   \
  double name(const float *x, size_t n) {                                                          \
    __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;                                   \
    size_t i = 0;                                                                                  \
    for (; i + 32 <= n; i += 32) {                                                                 \
      _mm_prefetch((const char *)(x + i) + CAIRN__PF_AHEAD, _MM_HINT_T0);                          \
      _mm_prefetch((const char *)(x + i) + CAIRN__PF_AHEAD + 64, _MM_HINT_T0);                     \
      const __m512 u = _mm512_loadu_ps(x + i), v = _mm512_loadu_ps(x + i + 16);                    \
      ACC(a0, cairn__z_lo_pd(u));                                                                  \
      ACC(a1, cairn__z_hi_pd(u));                                                                  \
      ACC(a2, cairn__z_lo_pd(v));                                                                  \
      ACC(a3, cairn__z_hi_pd(v));                                                                  \
    }                                                                                              \
    for (; i < n; i += 16) {                                                                       \
      const __m512 u = _mm512_maskz_loadu_ps(n - i >= 16 ? (__mmask16)0xffff : cairn__z_mask(n - i), x + i); \
      ACC(a0, cairn__z_lo_pd(u));                                                                  \
      ACC(a1, cairn__z_hi_pd(u));                                                                  \
    }                                                                                              \
    return cairn__z_hsum_pd(_mm512_add_pd(_mm512_add_pd(a0, a1), _mm512_add_pd(a2, a3)));          \
  }
#define CAIRN__ACC_SUM(a, d) (a) = _mm512_add_pd((a), (d))
#define CAIRN__ACC_SQ(a, d) (a) = _mm512_fmadd_pd((d), (d), (a))

/* Σ x */
CAIRN__REDUCE(cairn_sum_avx512, CAIRN__ACC_SUM)
/* Σ x² */
CAIRN__REDUCE(cairn_sumsq_avx512, CAIRN__ACC_SQ)

/* y += x */
void cairn_add_avx512(const float *x, float *y, size_t n) { CAIRN__AVX512_MAP2(y, x, y, n, _mm512_add_ps); }

/* x *= a */
void cairn_scale_avx512(float a, float *x, size_t n) {
  const __m512 va = _mm512_set1_ps(a);
#define CAIRN__MUL(v) _mm512_mul_ps(v, va)
  CAIRN__AVX512_MAP1(x, x, n, CAIRN__MUL);
#undef CAIRN__MUL
}
