/* AVX-512 activations: the AVX2 tier's methods (lib/kernels/avx2/act_avx2.c,
 * where each is derived) at sixteen lanes. The scalar specification is
 * lib/kernels/ref/act_ref.c. The purely arithmetic kernels (relu, leaky
 * relu, the sigmoid and tanh backward passes) do the reference's float
 * operations in its order and give the same bits. */
#include "config.h"

#include "kernels/avx512/vecmath_avx512.h"
#include "kernels/kernels.h"

/* y = x > 0 ? x : 0, NaN kept: NLE_UQ is true for x > 0 and for NaN. */
CAIRN__ZINLINE __m512 relu16(__m512 x) {
  return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_NLE_UQ), x);
}
void cairn_relu_fwd_avx512(const float *x, float *y, size_t n) { CAIRN__AVX512_MAP1(x, y, n, relu16); }

/* dx = x > 0 ? dy : 0, as dy AND a vector of the compare's lanes: a
 * zero-masking move is folded by the compiler into a masked load of dy,
 * which on AMD Zen 5 streamed from memory at 0.7 of a plain load's speed
 * (bench_kernels beyond the L3: 39 against 53 GB/s). */
CAIRN__ZINLINE __m512 relu_bwd16(__m512 x, __m512 dy) {
  const __m512i k = _mm512_movm_epi32(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GT_OQ));
  return _mm512_castsi512_ps(_mm512_and_si512(k, _mm512_castps_si512(dy)));
}
void cairn_relu_bwd_avx512(const float *x, const float *dy, float *dx, size_t n) {
  CAIRN__AVX512_MAP2(x, dy, dx, n, relu_bwd16);
}

/* y = x > 0 ? x : α·x  (one masked multiplication) */
void cairn_leaky_relu_fwd_avx512(const float *x, float *y, size_t n, float alpha) {
  const __m512 a = _mm512_set1_ps(alpha);
#define CAIRN__LEAKY(v) _mm512_mask_mul_ps(v, _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_NGT_UQ), a, v)
  CAIRN__AVX512_MAP1(x, y, n, CAIRN__LEAKY);
#undef CAIRN__LEAKY
}

/* dx = x > 0 ? dy : α·dy */
void cairn_leaky_relu_bwd_avx512(const float *x, const float *dy, float *dx, size_t n, float alpha) {
  const __m512 a = _mm512_set1_ps(alpha);
#define CAIRN__LEAKY_BWD(v, d) _mm512_mask_mul_ps(d, _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_NGT_UQ), a, d)
  CAIRN__AVX512_MAP2(x, dy, dx, n, CAIRN__LEAKY_BWD);
#undef CAIRN__LEAKY_BWD
}

/* y = 1/(1 + e^−x) */
void cairn_sigmoid_fwd_avx512(const float *x, float *y, size_t n) {
  CAIRN__AVX512_MAP1(x, y, n, cairn__z_sigmoid);
}

/* dx = dy·(y·(1 − y)) */
CAIRN__ZINLINE __m512 sigmoid_bwd16(__m512 y, __m512 dy) {
  return _mm512_mul_ps(dy, _mm512_mul_ps(y, _mm512_sub_ps(_mm512_set1_ps(1.0f), y)));
}
void cairn_sigmoid_bwd_avx512(const float *y, const float *dy, float *dx, size_t n) {
  CAIRN__AVX512_MAP2(y, dy, dx, n, sigmoid_bwd16);
}

/* y = tanh x */
void cairn_tanh_fwd_avx512(const float *x, float *y, size_t n) { CAIRN__AVX512_MAP1(x, y, n, cairn__z_tanh); }

/* dx = dy·((1 − y)(1 + y)) */
CAIRN__ZINLINE __m512 tanh_bwd16(__m512 y, __m512 dy) {
  const __m512 one = _mm512_set1_ps(1.0f);
  return _mm512_mul_ps(dy, _mm512_mul_ps(_mm512_sub_ps(one, y), _mm512_add_ps(one, y)));
}
void cairn_tanh_bwd_avx512(const float *y, const float *dy, float *dx, size_t n) {
  CAIRN__AVX512_MAP2(y, dy, dx, n, tanh_bwd16);
}

/* ---- exact gelu: with xc = x clamped to ±14.99, u = |xc|, e^(−u²/2) = p·2^k
 * and A = p·M(u):
 *   x < 0:  scalef(A·xc, k)        one rounding of the scale, last
 *   x ≥ 0:  x − xc·scalef(A, k)    one FMA
 * chosen by the sign bit of x (−0 gives −0, NaN gives NaN). */
CAIRN__ZINLINE __m512 gelu16(__m512 x) {
  const __m512 um = _mm512_set1_ps(CAIRN__Z_TAIL_UMAX);
  const __m512 xc = _mm512_min_ps(um, _mm512_max_ps(_mm512_sub_ps(_mm512_setzero_ps(), um), x));
  const __m512 u = cairn__z_abs(xc);
  const cairn__z_exps g = cairn__z_gauss_split(u);
  const __m512 a = _mm512_mul_ps(g.p, cairn__z_tail_m(u));
  const __m512 neg = _mm512_scalef_ps(_mm512_mul_ps(a, xc), g.k);
  const __m512 pos = _mm512_fnmadd_ps(xc, _mm512_scalef_ps(a, g.k), x);
  return _mm512_mask_mov_ps(pos, cairn__z_signs(x), neg);
}
void cairn_gelu_fwd_avx512(const float *x, float *y, size_t n) { CAIRN__AVX512_MAP1(x, y, n, gelu16); }

/* gelu'(x) = G (x < 0) or 1 − G (x ≥ 0),  G = e^(−u²/2)·(M(u) − u/√(2π)) */
CAIRN__ZINLINE __m512 gelu_bwd16(__m512 x, __m512 dy) {
  const __m512 u = _mm512_min_ps(_mm512_set1_ps(CAIRN__Z_TAIL_UMAX), cairn__z_abs(x));
  const __m512 d = _mm512_fnmadd_ps(_mm512_set1_ps(0.398942280f), u, cairn__z_tail_m(u));
  const cairn__z_exps g = cairn__z_gauss_split(u);
  const __m512 gg = _mm512_scalef_ps(_mm512_mul_ps(g.p, d), g.k);
  const __m512 dg = _mm512_mask_mov_ps(_mm512_sub_ps(_mm512_set1_ps(1.0f), gg), cairn__z_signs(x), gg);
  return _mm512_mul_ps(dy, dg);
}
void cairn_gelu_bwd_avx512(const float *x, const float *dy, float *dx, size_t n) {
  CAIRN__AVX512_MAP2(x, dy, dx, n, gelu_bwd16);
}

/* ---- tanh-approximated gelu: x·σ(w), w = 2√(2/π)(x + 0.044715x³) formed in
 * double and passed as hi + lo floats, clamped to ±200 (AVX2 tier). */
#define CAIRN__GT_C1 1.5957691216057308   /* 2·√(2/π) */
#define CAIRN__GT_C3 0.071354816272842805 /* 2·√(2/π)·0.044715 */

CAIRN__ZINLINE __m256 gelu_tanh_w8(__m256 x8, __m256 *lo) {
  const __m512d x = _mm512_cvtps_pd(x8);
  __m512d w = _mm512_mul_pd(
      x, _mm512_fmadd_pd(_mm512_set1_pd(CAIRN__GT_C3), _mm512_mul_pd(x, x), _mm512_set1_pd(CAIRN__GT_C1)));
  w = _mm512_max_pd(_mm512_set1_pd(-200.0), _mm512_min_pd(_mm512_set1_pd(200.0), w));
  const __m256 hi = _mm512_cvtpd_ps(w);
  *lo = _mm512_cvtpd_ps(_mm512_sub_pd(w, _mm512_cvtps_pd(hi)));
  return hi;
}

/* With e = e^−|w| = p·2^k and t = 1/(1 + e): σ(w) = t for w ≥ 0, scalef(p·t, k)
 * for w < 0; σ(1 − σ) = scalef(p·t², k). The scale is returned apart (k)
 * so that callers apply it last. */
typedef struct {
  __mmask16 neg; /* w < 0 (hi's sign bit) */
  __m512 sig;    /* σ(w), or σ(w)·2^−k where w < 0 */
  __m512 sp;     /* σ(1 − σ)·2^−k */
  __m512 k;
} gelu_tanh_parts;

CAIRN__ZINLINE gelu_tanh_parts gelu_tanh_sigma(__m512 x) {
  __m256 lo0, lo1;
  const __m256 h0 = gelu_tanh_w8(_mm512_castps512_ps256(x), &lo0);
  const __m256 h1 = gelu_tanh_w8(_mm512_extractf32x8_ps(x, 1), &lo1);
  const __m512 hi = _mm512_insertf32x8(_mm512_castps256_ps512(h0), h1, 1);
  const __m512 lo = _mm512_insertf32x8(_mm512_castps256_ps512(lo0), lo1, 1);
  const __m512 sign = _mm512_set1_ps(-0.0f);
  /* −|w| = −|hi| − sign(hi)·lo: flip lo's sign where hi is positive */
  const __m512 flip = _mm512_castsi512_ps(_mm512_andnot_si512(_mm512_castps_si512(hi), _mm512_castps_si512(sign)));
  const cairn__z_exps es = cairn__z_exp_split_nonpos(cairn__z_or(hi, sign), cairn__z_xor(lo, flip));
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 t = cairn__z_div1(one, _mm512_add_ps(one, _mm512_scalef_ps(es.p, es.k)));
  gelu_tanh_parts g;
  g.neg = cairn__z_signs(hi);
  const __m512 pt = _mm512_mul_ps(es.p, t);
  g.sig = _mm512_mask_mov_ps(t, g.neg, pt);
  g.sp = _mm512_mul_ps(pt, t);
  g.k = es.k;
  return g;
}

CAIRN__ZINLINE __m512 gelu_tanh16(__m512 x) {
  const gelu_tanh_parts g = gelu_tanh_sigma(x);
  const __m512 y = _mm512_mul_ps(_mm512_max_ps(_mm512_set1_ps(-20.0f), x), g.sig);
  return _mm512_mask_scalef_ps(y, g.neg, y, g.k);
}
void cairn_gelu_tanh_fwd_avx512(const float *x, float *y, size_t n) {
  CAIRN__AVX512_MAP1(x, y, n, gelu_tanh16);
}

/* d/dx x·σ(w) = σ + x·w'·σ(1 − σ),  w' = 2√(2/π)·(1 + 3·0.044715·x²), x
 * clamped to ±20 (the limits at ±inf). */
CAIRN__ZINLINE __m512 gelu_tanh_bwd16(__m512 x, __m512 dy) {
  const gelu_tanh_parts g = gelu_tanh_sigma(x);
  const __m512 xc = _mm512_max_ps(_mm512_set1_ps(-20.0f), _mm512_min_ps(_mm512_set1_ps(20.0f), x));
  const __m512 dw = _mm512_fmadd_ps(_mm512_set1_ps((float)(3.0 * CAIRN__GT_C3)), _mm512_mul_ps(xc, xc),
                                    _mm512_set1_ps((float)CAIRN__GT_C1));
  const __m512 a = _mm512_mul_ps(xc, dw);
  /* w < 0: scalef(σ/2^k + a·σ(1 − σ)/2^k, k);  w ≥ 0: σ + scalef(a·σ(1 − σ)/2^k, k) */
  const __m512 dneg = _mm512_scalef_ps(_mm512_fmadd_ps(a, g.sp, g.sig), g.k);
  const __m512 dpos = _mm512_add_ps(_mm512_scalef_ps(_mm512_mul_ps(a, g.sp), g.k), g.sig);
  return _mm512_mul_ps(dy, _mm512_mask_mov_ps(dpos, g.neg, dneg));
}
void cairn_gelu_tanh_bwd_avx512(const float *x, const float *dy, float *dx, size_t n) {
  CAIRN__AVX512_MAP2(x, dy, dx, n, gelu_tanh_bwd16);
}
