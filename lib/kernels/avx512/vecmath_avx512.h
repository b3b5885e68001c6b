/* Private AVX-512 vector math for the lib/kernels/avx512 sources (the only
 * files built with -mavx512f -mavx512dq -mavx512bw -mavx512vl -mfma): the
 * functions of lib/kernels/avx2/vecmath_avx2.h at sixteen lanes, with the
 * same range reductions and polynomials, so the same accuracy bounds
 * (doc/kernels.md). What AVX-512 changes:
 *
 *  - tails are masked loads and stores (__mmask16) through the same code as
 *    whole vectors; masked-off lanes are never read from memory (fault
 *    suppression) nor written;
 *  - "x < 0" choices take their mask from the sign bits (VPMOVD2M), and
 *    blends are mask moves;
 *  - 2^k is applied with VSCALEFPS, which scales by 2^k and rounds once,
 *    subnormal results included: the two-factor split of the AVX2 exp
 *    (and its integer shifts) is not needed, and callers that multiply the
 *    mantissa part by something else apply the scale last as before;
 *  - log splits x with VGETMANTPS/VGETEXPPS, which normalise subnormals
 *    themselves (no pre-scale), and sets ±0, negatives, inf and NaN with one
 *    VFIXUPIMMPS: no special-case blends and no per-vector branch;
 *  - where one reciprocal serves two quotients it is a 14-bit estimate
 *    (VRCP14PS), one Newton step and one residual correction per quotient
 *    (see cairn__z_div1; single quotients are VDIVPS, as in the AVX2 tier);
 *  - loops take four vectors per step (two in the AVX2 tier), and the
 *    objects are compiled with -fschedule-insns (configure.ac), so that the
 *    vectors' dependency chains interleave.
 * With the same operations in the same order, most functions give the
 * AVX2 tier's bits (tests: avx512_elem_same_bits_as_avx2); the row passes
 * are in rowmath_avx512.h.
 *
 * Every function computes each lane from that lane's inputs alone, so the
 * value written for an element never depends on its position or on n.
 * Nothing depends on the MXCSR state other than round-to-nearest.
 */
#ifndef CAIRN_VECMATH_AVX512_H
#define CAIRN_VECMATH_AVX512_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"

#define CAIRN__ZINLINE static inline __attribute__((always_inline))

/* ---- loops ---------------------------------------------------------------- */

/* Lanes [0, r) set, for r in 0..16. */
CAIRN__ZINLINE __mmask16 cairn__z_mask(size_t r) { return (__mmask16)((1u << r) - 1u); }

/* Streaming stores (cairn__kernels_stream, kernels.h), as in the AVX2 tier:
 * y is aligned to 64 bytes by a masked head vector first. */
static inline size_t cairn__z_stream_head(const float *y, size_t n) {
  size_t mis = ((uintptr_t)y & 63u) / sizeof(float), head = mis ? 16 - mis : 0;
  return head < n ? head : n;
}

/* The whole vectors of y[i] = F(x[i]) (RUN1) or F(a[i], b[i]) (RUN2) from
 * i_ on, four per step, then one, each result written by STORE
 * (_mm512_storeu_ps, or _mm512_stream_ps on an aligned y); i_ is left at
 * the first element after them. As in the AVX2 tier (two per step there):
 * every result of a step is computed before any is stored (y may be an
 * input), and the independent dependency chains of a long F sit side by
 * side in the instruction stream, interleaved by -fschedule-insns
 * (configure.ac). Four rather than two: measured on Zen 5 in cache,
 * sigmoid 1.13×, gelu_tanh 1.2×, gelu_bwd 1.16×, gelu_tanh_bwd 1.12×,
 * exp 1.1× faster, tanh and gelu about the same (the 32 registers then
 * hold fewer of the constants; the loads that replace them are cheap).
 * Each lane's value is the same whichever loop computes it. */
#define CAIRN__AVX512_RUN1(x, y, i_, n, F, STORE)                                                  \
  do {                                                                                             \
    for (; (i_) + 64 <= (n); (i_) += 64) {                                                         \
      const __m512 r0_ = F(_mm512_loadu_ps((x) + (i_))), r1_ = F(_mm512_loadu_ps((x) + (i_) + 16)); \
      const __m512 r2_ = F(_mm512_loadu_ps((x) + (i_) + 32)), r3_ = F(_mm512_loadu_ps((x) + (i_) + 48)); \
      STORE((y) + (i_), r0_);                                                                      \
      STORE((y) + (i_) + 16, r1_);                                                                 \
      STORE((y) + (i_) + 32, r2_);                                                                 \
      STORE((y) + (i_) + 48, r3_);                                                                 \
    }                                                                                              \
    for (; (i_) + 16 <= (n); (i_) += 16) STORE((y) + (i_), F(_mm512_loadu_ps((x) + (i_))));        \
  } while (0)

#define CAIRN__AVX512_RUN2(a, b, y, i_, n, F, STORE)                                               \
  do {                                                                                             \
    for (; (i_) + 64 <= (n); (i_) += 64) {                                                         \
      const __m512 r0_ = F(_mm512_loadu_ps((a) + (i_)), _mm512_loadu_ps((b) + (i_)));              \
      const __m512 r1_ = F(_mm512_loadu_ps((a) + (i_) + 16), _mm512_loadu_ps((b) + (i_) + 16));    \
      const __m512 r2_ = F(_mm512_loadu_ps((a) + (i_) + 32), _mm512_loadu_ps((b) + (i_) + 32));    \
      const __m512 r3_ = F(_mm512_loadu_ps((a) + (i_) + 48), _mm512_loadu_ps((b) + (i_) + 48));    \
      STORE((y) + (i_), r0_);                                                                      \
      STORE((y) + (i_) + 16, r1_);                                                                 \
      STORE((y) + (i_) + 32, r2_);                                                                 \
      STORE((y) + (i_) + 48, r3_);                                                                 \
    }                                                                                              \
    for (; (i_) + 16 <= (n); (i_) += 16)                                                           \
      STORE((y) + (i_), F(_mm512_loadu_ps((a) + (i_)), _mm512_loadu_ps((b) + (i_))));              \
  } while (0)

/* y[i] = F(x[i]) for i < n: whole vectors (RUN1), then one masked vector
 * for the tail (masked lanes load as 0 and are never stored). y may be x. */
#define CAIRN__AVX512_MAP1(x, y, n, F)                                                             \
  do {                                                                                             \
    size_t i_ = 0;                                                                                 \
    if (cairn__kernels_stream && (const void *)(y) != (const void *)(x) && (n) >= 64) {            \
      i_ = cairn__z_stream_head((y), (n));                                                         \
      if (i_) {                                                                                    \
        const __mmask16 m_ = cairn__z_mask(i_);                                                    \
        _mm512_mask_storeu_ps((y), m_, F(_mm512_maskz_loadu_ps(m_, (x))));                         \
      }                                                                                            \
      CAIRN__AVX512_RUN1(x, y, i_, n, F, _mm512_stream_ps);                                        \
      _mm_sfence();                                                                                \
    }                                                                                              \
    CAIRN__AVX512_RUN1(x, y, i_, n, F, _mm512_storeu_ps);                                          \
    if (i_ < (n)) {                                                                                \
      const __mmask16 m_ = cairn__z_mask((n)-i_);                                                  \
      _mm512_mask_storeu_ps((y) + i_, m_, F(_mm512_maskz_loadu_ps(m_, (x) + i_)));                 \
    }                                                                                              \
  } while (0)

/* y[i] = F(a[i], b[i]) for i < n, same scheme. y may be a or b. */
#define CAIRN__AVX512_MAP2(a, b, y, n, F)                                                          \
  do {                                                                                             \
    size_t i_ = 0;                                                                                 \
    if (cairn__kernels_stream && (const void *)(y) != (const void *)(a) &&                         \
        (const void *)(y) != (const void *)(b) && (n) >= 64) {                                     \
      i_ = cairn__z_stream_head((y), (n));                                                         \
      if (i_) {                                                                                    \
        const __mmask16 m_ = cairn__z_mask(i_);                                                    \
        _mm512_mask_storeu_ps((y), m_, F(_mm512_maskz_loadu_ps(m_, (a)), _mm512_maskz_loadu_ps(m_, (b)))); \
      }                                                                                            \
      CAIRN__AVX512_RUN2(a, b, y, i_, n, F, _mm512_stream_ps);                                     \
      _mm_sfence();                                                                                \
    }                                                                                              \
    CAIRN__AVX512_RUN2(a, b, y, i_, n, F, _mm512_storeu_ps);                                       \
    if (i_ < (n)) {                                                                                \
      const __mmask16 m_ = cairn__z_mask((n)-i_);                                                  \
      _mm512_mask_storeu_ps((y) + i_, m_,                                                          \
                            F(_mm512_maskz_loadu_ps(m_, (a) + i_), _mm512_maskz_loadu_ps(m_, (b) + i_))); \
    }                                                                                              \
  } while (0)

/* ---- small helpers ---------------------------------------------------------- */

CAIRN__ZINLINE __m512 cairn__z_abs(__m512 x) {
  return _mm512_castsi512_ps(_mm512_andnot_si512(_mm512_set1_epi32(INT32_MIN), _mm512_castps_si512(x)));
}
CAIRN__ZINLINE __m512 cairn__z_or(__m512 a, __m512 b) {
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(a), _mm512_castps_si512(b)));
}
CAIRN__ZINLINE __m512 cairn__z_and(__m512 a, __m512 b) {
  return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_castps_si512(b)));
}
CAIRN__ZINLINE __m512 cairn__z_xor(__m512 a, __m512 b) {
  return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), _mm512_castps_si512(b)));
}
/* The lanes whose sign bit is set (−0 and NaNs with the bit set included):
 * the AVX2 tier's BLENDVPS masks, which read only that bit. */
CAIRN__ZINLINE __mmask16 cairn__z_signs(__m512 x) { return _mm512_movepi32_mask(_mm512_castps_si512(x)); }

/* Low and high eight floats of v, widened to double (exact). */
CAIRN__ZINLINE __m512d cairn__z_lo_pd(__m512 v) { return _mm512_cvtps_pd(_mm512_castps512_ps256(v)); }
CAIRN__ZINLINE __m512d cairn__z_hi_pd(__m512 v) { return _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)); }

/* Sum of the eight lanes of a in the fixed order
 * ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)). */
static inline double cairn__z_hsum_pd(__m512d a) {
  const __m256d s4 = _mm256_add_pd(_mm512_castpd512_pd256(a), _mm512_extractf64x4_pd(a, 1));
  const __m128d s2 = _mm_add_pd(_mm256_castpd256_pd128(s4), _mm256_extractf128_pd(s4, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s2, _mm_unpackhi_pd(s2, s2)));
}

/* acc += the 16 floats of v, widened to double: low half into lo, high into hi. */
CAIRN__ZINLINE void cairn__z_acc_pd(__m512 v, __m512d *lo, __m512d *hi) {
  *lo = _mm512_add_pd(*lo, cairn__z_lo_pd(v));
  *hi = _mm512_add_pd(*hi, cairn__z_hi_pd(v));
}

/* Quotients whose denominator is 1 + e, e in [0, 1] (or NaN): every one in
 * this file. Where one reciprocal serves two quotients (sigmoid xent) it is
 * formed once: a 14-bit estimate (VRCP14PS), one Newton step (relative
 * error ~2^−28), then per quotient q = num·r and one residual correction
 * q + (num − q·den)·r, whose residual the FMA forms exactly: correctly
 * rounded but for a vanishing fraction of ties, like the AVX2 tier's
 * refined reciprocal. A single quotient (sigmoid, tanh, gelu_tanh) is one
 * VDIVPS, as in the AVX2 tier, which gives these functions its quotients
 * bit for bit. Which is faster depends on the core: on AMD Zen 5 (full
 * 512-bit datapaths) VDIVPS made sigmoid 1.3× and gelu_tanh 1.08× faster
 * in cache than the five FMA-pipe operations of the reciprocal; on Intel
 * Emerald Rapids, whose divider is busy twice as long for a 512-bit VDIVPS
 * as for a 256-bit one, the reciprocal measured 1.05–1.2× faster under
 * heavy load (bench/RESULTS.md).
 * -DCAIRN__Z_USE_RCP builds the reciprocal form for comparison. */
CAIRN__ZINLINE __m512 cairn__z_rcp1(__m512 den) {
  const __m512 r = _mm512_rcp14_ps(den);
  return _mm512_fmadd_ps(r, _mm512_fnmadd_ps(den, r, _mm512_set1_ps(1.0f)), r);
}
CAIRN__ZINLINE __m512 cairn__z_div_r(__m512 num, __m512 den, __m512 r) {
  const __m512 q = _mm512_mul_ps(num, r);
  return _mm512_fmadd_ps(_mm512_fnmadd_ps(q, den, num), r, q);
}
CAIRN__ZINLINE __m512 cairn__z_div1(__m512 num, __m512 den) {
#ifdef CAIRN__Z_USE_RCP
  return cairn__z_div_r(num, den, cairn__z_rcp1(den));
#else
  return _mm512_div_ps(num, den);
#endif
}

/* ---- exp ------------------------------------------------------------------------
 * exp(x + lo) = 2^k · e^r,  k = round(x·log2 e),  r = x − k·ln2 + lo,  |r| ≤ ½ln2,
 * as in the AVX2 tier (Cody–Waite with an exact first FMA step, Cephes
 * degree-5 P). The result is scalef(p, k) = p·2^k rounded once, subnormals
 * and overflow to inf included. Callers that multiply e by c first form
 * scalef(c·p, k): c·p is rounded as c·m was in the AVX2 tier (p and m
 * differ by a power of two), and the scale rounds once at the end. */
typedef struct {
  __m512 p; /* e^r, in [0.7, 1.42] */
  __m512 k; /* k, an integer-valued float */
} cairn__z_exps;

/* x − k·ln 2 in two steps (ln 2 split hi + lo, so the first product is
 * exact) plus lo, the caller's low part of x (−0 when x is exact: the
 * compiler drops that addition). */
CAIRN__ZINLINE __m512 cairn__z_exp_reduce(__m512 x, __m512 fk, __m512 lo) {
  __m512 r = _mm512_fnmadd_ps(fk, _mm512_set1_ps(0.693147182464599609375f), x);
  r = _mm512_fnmadd_ps(fk, _mm512_set1_ps(-1.904654299957768e-09f), r);
  return _mm512_add_ps(r, lo);
}

/* P(r) of e^r = 1 + r + r²·P(r) on |r| ≤ ln2/2, degree 5. */
CAIRN__ZINLINE __m512 cairn__z_exp_p(__m512 r) {
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  return _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
}

/* e^r − 1 = r + r²·P(r) and *fk = k = round(x·log2 e) (the product rounded
 * first, then to the integer, as ROUNDPS does in the AVX2 tier: the same k). */
CAIRN__ZINLINE __m512 cairn__z_exp_poly_m1(__m512 x, __m512 lo, __m512 *fk_out) {
  const __m512 fk = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 r = cairn__z_exp_reduce(x, fk, lo);
  *fk_out = fk;
  return _mm512_fmadd_ps(cairn__z_exp_p(r), _mm512_mul_ps(r, r), r);
}

/* For x in [−174, 88.8] or NaN (no clamp: NaN gives NaN). */
CAIRN__ZINLINE cairn__z_exps cairn__z_exp_split_inrange(__m512 x, __m512 lo) {
  cairn__z_exps e;
  e.p = _mm512_add_ps(cairn__z_exp_poly_m1(x, lo, &e.k), _mm512_set1_ps(1.0f));
  return e;
}

/* The clamp keeps the range reduction meaningful (a huge |x| would give a
 * garbage r); e^x is inf above 88.72 and 0 below −103.97 either way.
 * MINPS/MAXPS return their second operand when one is NaN: NaN stays NaN.
 * (VRANGEPS would clamp |x| in one instruction, but it returns the other
 * operand for a NaN.) */
CAIRN__ZINLINE cairn__z_exps cairn__z_exp_split(__m512 x, __m512 lo) {
  x = _mm512_max_ps(_mm512_set1_ps(-174.0f), _mm512_min_ps(_mm512_set1_ps(88.8f), x));
  return cairn__z_exp_split_inrange(x, lo);
}

/* The same for x ≤ 0 or NaN: only the low clamp. */
CAIRN__ZINLINE cairn__z_exps cairn__z_exp_split_nonpos(__m512 x, __m512 lo) {
  return cairn__z_exp_split_inrange(_mm512_max_ps(_mm512_set1_ps(-174.0f), x), lo);
}

/* e^x. VSCALEFPS rounds p·2^k once for every x, so the AVX2 tier's
 * one-multiplication fast path (and its per-vector branch) has nothing to
 * save here. */
CAIRN__ZINLINE __m512 cairn__z_exp(__m512 x) {
  const cairn__z_exps e = cairn__z_exp_split(x, _mm512_set1_ps(-0.0f));
  return _mm512_scalef_ps(e.p, e.k);
}

/* e^−|x| (sigmoid, sigmoid xent) */
CAIRN__ZINLINE __m512 cairn__z_exp_negabs(__m512 x) {
  const cairn__z_exps e = cairn__z_exp_split_nonpos(cairn__z_or(x, _mm512_set1_ps(-0.0f)), _mm512_set1_ps(-0.0f));
  return _mm512_scalef_ps(e.p, e.k);
}

/* ---- log ------------------------------------------------------------------------
 * log x = e·ln2 + log1p(f),  x = 2^e·(1 + f),  1 + f in [√½, √2), with the
 * AVX2 tier's polynomial (Cephes degree 8) and split ln2. The split comes
 * from VGETMANTPS (mantissa in [1, 2)) and VGETEXPPS, which normalise
 * subnormals; a mantissa ≥ √2 (the float 0x3fb504f3, the AVX2 tier's
 * boundary) is halved and e raised by one: the same m and e, bit for bit,
 * as the AVX2 tier's integer arithmetic. */
CAIRN__ZINLINE __m512 cairn__z_log_poly(__m512 m, __m512 fe) {
  const __m512 f = _mm512_sub_ps(m, _mm512_set1_ps(1.0f)); /* exact (Sterbenz) */
  const __m512 z = _mm512_mul_ps(f, f);
  __m512 p = _mm512_set1_ps(7.0376836292e-2f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(-1.1514610310e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.1676998740e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(-1.2420140846e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.4249322787e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(-1.6668057665e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.0000714765e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(-2.4999993993e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(3.3333331174e-1f));
  __m512 y = _mm512_mul_ps(_mm512_mul_ps(p, f), z);
  y = _mm512_fmadd_ps(fe, _mm512_set1_ps(-2.12194440e-4f), y);
  y = _mm512_fnmadd_ps(_mm512_set1_ps(0.5f), z, y);
  return _mm512_fmadd_ps(fe, _mm512_set1_ps(0.693359375f), _mm512_add_ps(f, y));
}

/* log x for x positive and finite (normal or subnormal). */
CAIRN__ZINLINE __m512 cairn__z_log_core(__m512 x) {
  __m512 m = _mm512_getmant_ps(x, _MM_MANT_NORM_1_2, _MM_MANT_SIGN_zero);
  __m512 e = _mm512_getexp_ps(x);
  const __mmask16 hi = _mm512_cmp_ps_mask(m, _mm512_set1_ps(1.41421353816986083984375f), _CMP_GE_OQ);
  m = _mm512_mask_mul_ps(m, hi, m, _mm512_set1_ps(0.5f));
  e = _mm512_mask_add_ps(e, hi, e, _mm512_set1_ps(1.0f));
  return cairn__z_log_poly(m, e);
}

/* log x with every special case: VFIXUPIMMPS classes x and replaces the
 * core's value by −inf for ±0, NaN for negatives (−inf included) and NaN,
 * +inf for +inf; positive finite x (subnormals too) keep the core's value.
 * Table: one 4-bit token per class (QNaN, SNaN, ±0, +1, −inf, +inf,
 * negative, positive): 2 = quiet x, 0 = keep, 4 = −inf, 3 = default NaN,
 * 5 = +inf. */
CAIRN__ZINLINE __m512 cairn__z_log(__m512 x) {
  return _mm512_fixupimm_ps(cairn__z_log_core(x), x, _mm512_set1_epi32(0x03530422), 0);
}

/* log(1 + a) for a in [0, 1] (or NaN), given u = 1 + a and r = cairn__z_rcp1(u). */
CAIRN__ZINLINE __m512 cairn__z_log1p_pos_r(__m512 a, __m512 u, __m512 r) {
  const __m512 c = _mm512_sub_ps(a, _mm512_sub_ps(u, _mm512_set1_ps(1.0f)));
  return _mm512_add_ps(cairn__z_log_core(u), cairn__z_div_r(c, u, r));
}

/* ---- sigmoid, tanh ------------------------------------------------------------
 * As the AVX2 tier: σ = (x < 0 ? e : 1)/(1 + e), e = e^−|x|. */
CAIRN__ZINLINE __m512 cairn__z_sigmoid(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 e = cairn__z_exp_negabs(x);
  /* x's sign bit: −0 takes e = 1, the same as 1; NaN is NaN either way */
  const __m512 num = _mm512_mask_mov_ps(one, cairn__z_signs(x), e);
  return cairn__z_div1(num, _mm512_add_ps(one, e));
}

/* tanh|x| = (1 − e)/(1 + e), e = e^−2|x| = 2^k·e^r: the AVX2 tier's method
 * (vecmath_avx2.h, where it is derived): one exponential for both forms,
 * blended before one quotient,
 *   |x| < 0.625:  −q/(2 + q),  q = e − 1 = (2^k − 1) + 2^k·(e^r − 1)
 *   elsewhere:    1 − 2e/(1 + e),
 * the quotient num/(a + b) taken against the exact denominator den + dlo:
 * Q = num/den (VDIVPS), Q += (num − Q·den − Q·dlo)·rcp(den), the residual
 * against den exact by FMA. These are the AVX2 tier's operations but for
 * the estimate rcp(den) of the last step, RCPPS (12 bits) there and
 * VRCP14PS here: the correction is ~2^−24·Q, so either estimate is plenty,
 * and the two tiers agree but where the last rounding falls within the
 * estimates' difference of a tie, and there differ by one ulp
 * (avx512_tanh_near_avx2; RCPPS's estimates themselves differ between AMD
 * and Intel cores).
 * −2|x| is clamped at −18.5 as there; MAXPS keeps a NaN, which takes the
 * second form. 2^k (k in [−27, 0]) is VSCALEFPS(1, k), exact. The sign of
 * x goes back on with one VPTERNLOGD. */
CAIRN__ZINLINE __m512 cairn__z_tanh(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 sign = _mm512_set1_ps(-0.0f);
  const __m512 y = _mm512_max_ps(_mm512_set1_ps(-18.5f), _mm512_mul_ps(_mm512_set1_ps(-2.0f), cairn__z_abs(x)));
  __m512 fk;
  const __m512 em1r = cairn__z_exp_poly_m1(y, _mm512_set1_ps(-0.0f), &fk);
  const __m512 s = _mm512_scalef_ps(one, fk);
  const __m512 q = _mm512_fmadd_ps(s, em1r, _mm512_sub_ps(s, one)); /* e − 1 */
  const __m512 e = _mm512_fmadd_ps(s, em1r, s);
  const __mmask16 small = _mm512_cmp_ps_mask(y, _mm512_set1_ps(-1.25f), _CMP_GT_OQ);
  const __m512 num = _mm512_mask_xor_ps(_mm512_add_ps(e, e), small, q, sign);
  const __m512 a = _mm512_mask_mov_ps(one, small, _mm512_set1_ps(2.0f));
  const __m512 b = _mm512_mask_mov_ps(e, small, q);
  const __m512 den = _mm512_add_ps(a, b);
  const __m512 dlo = _mm512_sub_ps(b, _mm512_sub_ps(den, a));
  __m512 qt = cairn__z_div1(num, den);
  qt = _mm512_fmadd_ps(_mm512_fnmadd_ps(qt, dlo, _mm512_fnmadd_ps(qt, den, num)), _mm512_rcp14_ps(den), qt);
  const __m512 t = _mm512_mask_mov_ps(_mm512_sub_ps(one, qt), small, qt);
  /* t | (x & sign) */
  return _mm512_castsi512_ps(
      _mm512_ternarylogic_epi32(_mm512_castps_si512(t), _mm512_castps_si512(x), _mm512_castps_si512(sign), 0xf8));
}

/* ---- normal tail (erfc) --------------------------------------------------------
 * Φ(−u) = e^(−u²/2)·M(u), M a degree-8 polynomial on eight intervals of u
 * selected from the bits of u + 1 (the AVX2 tier's coefficients): the eight
 * entries sit in the low half of a 16-entry VPERMPS table (the high half
 * repeats them; indices are 0..7). */
#define CAIRN__Z_TAIL_UMAX 14.99f

CAIRN__ZINLINE __m512 cairn__z_tail_m(__m512 u) {
  const __m512i idx = _mm512_sub_epi32(
      _mm512_srli_epi32(_mm512_castps_si512(_mm512_add_ps(u, _mm512_set1_ps(1.0f))), 22),
      _mm512_set1_epi32(254));
#define CAIRN__T(a, b, c, d, e, f, g, h) \
  _mm512_permutexvar_ps(idx, _mm512_setr_ps(a, b, c, d, e, f, g, h, a, b, c, d, e, f, g, h))
  const __m512 v = _mm512_sub_ps(u, CAIRN__T(0.0f, 0.5f, 1.0f, 2.0f, 3.0f, 5.0f, 7.0f, 11.0f));
  __m512 p = CAIRN__T(0.0008725925f, -0.010667244f, 2.70660767e-05f, -1.29924756e-05f,
                      2.44825344e-07f, -1.84841369e-08f, 6.06239781e-10f, 5.02217018e-11f);
  p = _mm512_fmadd_ps(p, v, CAIRN__T(-0.00374008459f, 0.0223194491f, -0.000213964871f,
                                     4.18397431e-05f, -3.35905952e-06f, 5.76130361e-08f,
                                     -1.64179568e-08f, -1.24551192e-09f));
  p = _mm512_fmadd_ps(p, v, CAIRN__T(0.01057484f, -0.017486399f, 0.00092810113f, 1.37731222e-05f,
                                     2.37556815e-05f, 9.19258071e-07f, 2.23205532e-07f,
                                     1.71031687e-08f));
  p = _mm512_fmadd_ps(p, v, CAIRN__T(-0.0267112665f, 0.000941925391f, -0.00311606703f,
                                     -0.00042916424f, -0.000123174032f, -1.09417315e-05f,
                                     -2.16105104e-06f, -1.96287445e-07f));
  p = _mm512_fmadd_ps(p, v, CAIRN__T(0.0625355616f, 0.0202492997f, 0.00923777651f, 0.00191176229f,
                                     0.000552716141f, 7.60103649e-05f, 1.78231367e-05f,
                                     2.21582195e-06f));
  p = _mm512_fmadd_ps(p, v, CAIRN__T(-0.132986322f, -0.0545222014f, -0.0250819903f,
                                     -0.00668478431f, -0.00230911816f, -0.00045516339f,
                                     -0.000137897252f, -2.51939291e-05f));
  p = _mm512_fmadd_ps(p, v, CAIRN__T(0.250000417f, 0.118744411f, 0.0621067584f, 0.0213095639f,
                                     0.00915603898f, 0.00259484258f, 0.00103897206f,
                                     0.000285738381f));
  p = _mm512_fmadd_ps(p, v, CAIRN__T(-0.398942292f, -0.224131703f, -0.13736397f, -0.0627380461f,
                                     -0.034400411f, -0.0143456943f, -0.00768787879f,
                                     -0.00321849878f));
  p = _mm512_fmadd_ps(p, v, CAIRN__T(0.5f, 0.349618822f, 0.261578292f, 0.168101996f, 0.121513948f,
                                     0.0769193023f, 0.0558934808f, 0.03597489f));
#undef CAIRN__T
  return p;
}

/* e^(−u²/2) in split form, −u²/2 = hi + lo exact (FMA), for u in
 * [0, CAIRN__Z_TAIL_UMAX] or NaN: inside exp's range, no clamp. */
CAIRN__ZINLINE cairn__z_exps cairn__z_gauss_split(__m512 u) {
  const __m512 hu = _mm512_mul_ps(_mm512_set1_ps(-0.5f), u);
  const __m512 hi = _mm512_mul_ps(hu, u);
  return cairn__z_exp_split_inrange(hi, _mm512_fmsub_ps(hu, u, hi));
}

#endif
