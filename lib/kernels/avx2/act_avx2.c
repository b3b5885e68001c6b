/* AVX2+FMA activations. The scalar specification is
 * lib/kernels/ref/act_ref.c; the vector math is vecmath_avx2.h. The purely
 * arithmetic kernels (relu, leaky relu, the sigmoid and tanh backward passes)
 * do the same float operations in the same order as the reference and give
 * the same bits. */
#include "config.h"

#include "kernels/avx2/vecmath_avx2.h"
#include "kernels/kernels.h"

/* y = x > 0 ? x : 0, NaN kept: NLE_UQ is true for x > 0 and for NaN. */
static inline __m256 relu8(__m256 x) {
  return _mm256_and_ps(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_NLE_UQ), x);
}
void cairn_relu_fwd_avx2(const float *x, float *y, size_t n) { CAIRN__AVX2_MAP1(x, y, n, relu8); }

/* dx = x > 0 ? dy : 0 */
static inline __m256 relu_bwd8(__m256 x, __m256 dy) {
  return _mm256_and_ps(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ), dy);
}
void cairn_relu_bwd_avx2(const float *x, const float *dy, float *dx, size_t n) {
  CAIRN__AVX2_MAP2(x, dy, dx, n, relu_bwd8);
}

/* y = x > 0 ? x : α·x */
void cairn_leaky_relu_fwd_avx2(const float *x, float *y, size_t n, float alpha) {
  const __m256 a = _mm256_set1_ps(alpha);
#define CAIRN__LEAKY(v) \
  _mm256_blendv_ps(_mm256_mul_ps(a, v), v, _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_GT_OQ))
  CAIRN__AVX2_MAP1(x, y, n, CAIRN__LEAKY);
#undef CAIRN__LEAKY
}

/* dx = x > 0 ? dy : α·dy */
void cairn_leaky_relu_bwd_avx2(const float *x, const float *dy, float *dx, size_t n, float alpha) {
  const __m256 a = _mm256_set1_ps(alpha);
#define CAIRN__LEAKY_BWD(v, d) \
  _mm256_blendv_ps(_mm256_mul_ps(a, d), d, _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_GT_OQ))
  CAIRN__AVX2_MAP2(x, dy, dx, n, CAIRN__LEAKY_BWD);
#undef CAIRN__LEAKY_BWD
}

/* y = 1/(1 + e^−x) */
void cairn_sigmoid_fwd_avx2(const float *x, float *y, size_t n) {
  CAIRN__AVX2_MAP1(x, y, n, cairn__v_sigmoid);
}

/* dx = dy·(y·(1 − y)); 1 − y is exact for y ≥ ½ */
CAIRN__VINLINE __m256 sigmoid_bwd8(__m256 y, __m256 dy) {
  return _mm256_mul_ps(dy, _mm256_mul_ps(y, _mm256_sub_ps(_mm256_set1_ps(1.0f), y)));
}
void cairn_sigmoid_bwd_avx2(const float *y, const float *dy, float *dx, size_t n) {
  CAIRN__AVX2_MAP2(y, dy, dx, n, sigmoid_bwd8);
}

/* y = tanh x */
void cairn_tanh_fwd_avx2(const float *x, float *y, size_t n) { CAIRN__AVX2_MAP1(x, y, n, cairn__v_tanh); }

/* dx = dy·((1 − y)(1 + y)): unlike 1 − y², keeps its relative accuracy as |y| → 1 */
CAIRN__VINLINE __m256 tanh_bwd8(__m256 y, __m256 dy) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_mul_ps(dy, _mm256_mul_ps(_mm256_sub_ps(one, y), _mm256_add_ps(one, y)));
}
void cairn_tanh_bwd_avx2(const float *y, const float *dy, float *dx, size_t n) {
  CAIRN__AVX2_MAP2(y, dy, dx, n, tanh_bwd8);
}

/* ---- exact gelu ----------------------------------------------------------------
 * gelu(x) = x·Φ(x),  Φ(x) = ½erfc(−x/√2).  With u = |x| and the tail
 * Φ(−u) = e^(−u²/2)·M(u) (vecmath_avx2.h):
 *   x < 0:  gelu = −u·e^(−u²/2)·M(u)      (no cancellation, down to subnormals)
 *   x ≥ 0:  gelu = x·(1 − e^(−u²/2)·M(u))
 * u is clamped to 14.99, past which x·Φ(x) rounds to −0 for x < 0 and the
 * tail is 0 for x > 0; x = −inf gives −0 (the limit), not NaN. */
/* With xc = x clamped to ±14.99 and A = m·M(u) (the normal part of Φ(−u)):
 *   x < 0:  (A·xc)·s          the sign comes from xc, s last (subnormals)
 *   x ≥ 0:  x − xc·(A·s)      one FMA: x·(1 − q) rounded once, not twice;
 *                              xc, not x, so that x = +inf gives inf − 0.
 * The blend takes its mask from the sign bit of x itself (BLENDVPS reads
 * only that bit): −0 goes to the first form and gives −0, NaN either way
 * gives NaN. */
CAIRN__VINLINE __m256 gelu8(__m256 x) {
  const __m256 um = _mm256_set1_ps(CAIRN__V_TAIL_UMAX);
  const __m256 xc = _mm256_min_ps(um, _mm256_max_ps(_mm256_sub_ps(_mm256_setzero_ps(), um), x));
  const __m256 u = cairn__v_abs(xc);
  if (__builtin_expect(cairn__v_gauss_fast_ok(u), 1)) { /* same bits, see vecmath_avx2.h */
    const __m256 a = _mm256_mul_ps(cairn__v_gauss_fast(u), cairn__v_tail_m(u));
    return _mm256_blendv_ps(_mm256_fnmadd_ps(xc, a, x), _mm256_mul_ps(a, xc), x);
  }
  const cairn__v_exps g = cairn__v_gauss_split(u);
  const __m256 a = _mm256_mul_ps(g.m, cairn__v_tail_m(u));
  const __m256 neg = _mm256_mul_ps(_mm256_mul_ps(a, xc), g.s);
  const __m256 pos = _mm256_fnmadd_ps(xc, _mm256_mul_ps(a, g.s), x);
  return _mm256_blendv_ps(pos, neg, x);
}
void cairn_gelu_fwd_avx2(const float *x, float *y, size_t n) { CAIRN__AVX2_MAP1(x, y, n, gelu8); }

/* gelu'(x) = Φ(x) + x·φ(x),  φ(x) = e^(−x²/2)/√(2π).  With
 * G = e^(−u²/2)·(M(u) − u/√(2π)):  gelu'(x) = G for x < 0,  1 − G for x ≥ 0.
 * M(u) − u/√(2π) changes sign at u ≈ 0.7518 (the root of gelu' at
 * x ≈ −0.7518); there the result is small and only absolutely accurate. */
CAIRN__VINLINE __m256 gelu_bwd8(__m256 x, __m256 dy) {
  const __m256 u = _mm256_min_ps(_mm256_set1_ps(CAIRN__V_TAIL_UMAX), cairn__v_abs(x));
  const __m256 d = _mm256_fnmadd_ps(_mm256_set1_ps(0.398942280f), u, cairn__v_tail_m(u));
  const cairn__v_exps g = cairn__v_gauss_split(u);
  const __m256 gg = _mm256_mul_ps(_mm256_mul_ps(g.m, d), g.s);
  /* the sign bit of x is the blend mask: −0 takes G = ½ = 1 − G, NaN is NaN */
  const __m256 dg = _mm256_blendv_ps(_mm256_sub_ps(_mm256_set1_ps(1.0f), gg), gg, x);
  return _mm256_mul_ps(dy, dg);
}
void cairn_gelu_bwd_avx2(const float *x, const float *dy, float *dx, size_t n) {
  CAIRN__AVX2_MAP2(x, dy, dx, n, gelu_bwd8);
}

/* ---- tanh-approximated gelu ---------------------------------------------------
 * gelu_tanh(x) = x/2·(1 + tanh v),  v = √(2/π)·(x + 0.044715x³)
 *              = x·σ(w),  w = 2v   (1 + tanh v = 2σ(2v): no cancellation for x ≪ 0)
 * σ(w) for w ≪ 0 is e^w, whose relative error is |w| times that of w; w is
 * therefore formed in double and passed on as hi + lo floats. Outside
 * |w| ≤ 200 σ is exactly 0 or 1 in float, so w is clamped there (and x·σ
 * uses max(x, −20) so that x = −inf gives −0, not NaN). */
#define CAIRN__GT_C1 1.5957691216057308   /* 2·√(2/π) */
#define CAIRN__GT_C3 0.071354816272842805 /* 2·√(2/π)·0.044715 */

CAIRN__VINLINE __m256 gelu_tanh_w4(__m128 x4, __m128 *lo) {
  const __m256d x = _mm256_cvtps_pd(x4);
  __m256d w = _mm256_mul_pd(
      x, _mm256_fmadd_pd(_mm256_set1_pd(CAIRN__GT_C3), _mm256_mul_pd(x, x), _mm256_set1_pd(CAIRN__GT_C1)));
  w = _mm256_max_pd(_mm256_set1_pd(-200.0), _mm256_min_pd(_mm256_set1_pd(200.0), w));
  const __m128 hi = _mm256_cvtpd_ps(w);
  *lo = _mm256_cvtpd_ps(_mm256_sub_pd(w, _mm256_cvtps_pd(hi)));
  return _mm256_castps128_ps256(hi);
}

/* For w = hi + lo of x, with e = e^−|w| = m·s (vecmath_avx2.h) and
 * t = 1/(1 + e):  σ(w) = t for w ≥ 0,  m·t·s for w < 0;  σ(1 − σ) = m·t²·s.
 * The factor s is returned apart (*s) so that callers apply it last: for
 * x ≲ −9 e is subnormal, and multiplying a rounded subnormal σ by x (or by
 * x·w' ≈ 200 in the gradient) would magnify its rounding error. */
typedef struct {
  __m256 neg;   /* w < 0 */
  __m256 sig;   /* σ(w), or σ(w)/s where w < 0 */
  __m256 sp;    /* σ(1 − σ)/s */
  __m256 s;     /* the scale factor */
} gelu_tanh_parts;

CAIRN__VINLINE gelu_tanh_parts gelu_tanh_sigma(__m256 x) {
  __m128 lo0, lo1;
  const __m256 h0 = gelu_tanh_w4(_mm256_castps256_ps128(x), &lo0);
  const __m256 h1 = gelu_tanh_w4(_mm256_extractf128_ps(x, 1), &lo1);
  const __m256 hi = _mm256_insertf128_ps(h0, _mm256_castps256_ps128(h1), 1);
  const __m256 lo = _mm256_insertf128_ps(_mm256_castps128_ps256(lo0), lo1, 1);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  /* −|w| = −|hi| − sign(hi)·lo */
  const __m256 flip = _mm256_andnot_ps(hi, sign);
  const cairn__v_exps es = cairn__v_exp_split(_mm256_or_ps(hi, sign), _mm256_xor_ps(lo, flip));
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 t = _mm256_div_ps(one, _mm256_add_ps(one, _mm256_mul_ps(es.m, es.s)));
  gelu_tanh_parts g;
  /* only ever a BLENDVPS mask, which reads the sign bit: hi itself serves
   * (hi = −0 takes the w < 0 forms, which give the same there: m = s = 1) */
  g.neg = hi;
  g.sig = _mm256_blendv_ps(t, _mm256_mul_ps(es.m, t), g.neg);
  g.sp = _mm256_mul_ps(_mm256_mul_ps(es.m, t), t);
  g.s = es.s;
  return g;
}

CAIRN__VINLINE __m256 gelu_tanh8(__m256 x) {
  const gelu_tanh_parts g = gelu_tanh_sigma(x);
  const __m256 y = _mm256_mul_ps(_mm256_max_ps(_mm256_set1_ps(-20.0f), x), g.sig);
  return _mm256_blendv_ps(y, _mm256_mul_ps(y, g.s), g.neg);
}
void cairn_gelu_tanh_fwd_avx2(const float *x, float *y, size_t n) {
  CAIRN__AVX2_MAP1(x, y, n, gelu_tanh8);
}

/* d/dx x·σ(w) = σ + x·σ(1 − σ)·w',  w' = 2√(2/π)·(1 + 3·0.044715·x²).
 * Beyond |x| = 20 the result is exactly 0 or 1 in float; x is clamped there
 * so that ±inf gives the limit, not inf·0. */
CAIRN__VINLINE __m256 gelu_tanh_bwd8(__m256 x, __m256 dy) {
  const gelu_tanh_parts g = gelu_tanh_sigma(x);
  const __m256 xc = _mm256_max_ps(_mm256_set1_ps(-20.0f), _mm256_min_ps(_mm256_set1_ps(20.0f), x));
  const __m256 dw = _mm256_fmadd_ps(_mm256_set1_ps((float)(3.0 * CAIRN__GT_C3)), _mm256_mul_ps(xc, xc),
                                    _mm256_set1_ps((float)CAIRN__GT_C1));
  const __m256 a = _mm256_mul_ps(xc, dw);
  /* w < 0: (σ/s + x·w'·σ(1 − σ)/s)·s;  w ≥ 0: σ + (x·w'·σ(1 − σ)/s)·s */
  const __m256 dneg = _mm256_mul_ps(_mm256_fmadd_ps(a, g.sp, g.sig), g.s);
  const __m256 dpos = _mm256_fmadd_ps(_mm256_mul_ps(a, g.sp), g.s, g.sig);
  return _mm256_mul_ps(dy, _mm256_blendv_ps(dpos, dneg, g.neg));
}
void cairn_gelu_tanh_bwd_avx2(const float *x, const float *dy, float *dx, size_t n) {
  CAIRN__AVX2_MAP2(x, dy, dx, n, gelu_tanh_bwd8);
}
