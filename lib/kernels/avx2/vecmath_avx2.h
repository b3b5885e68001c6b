/* Private AVX2+FMA vector math for the lib/kernels/avx2 sources (the only files
 * built with -mavx2 -mfma): exp, log, log1p, tanh, sigmoid and the normal
 * tail Φ(−u) = ½·erfc(u/√2), eight floats at a time, plus the loop and row
 * helpers the kernels share.
 *
 * Every function computes each lane from that lane's inputs alone, so the
 * value written for an element never depends on its position in the array
 * or on n (tails go through the same code with masked loads and stores).
 * Methods and measured maximum errors are in doc/kernels.md. None of this
 * depends on the MXCSR state other than round-to-nearest (the default).
 */
#ifndef CAIRN_VECMATH_AVX2_H
#define CAIRN_VECMATH_AVX2_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"

/* Per-vector functions are always inlined: GCC's size heuristics otherwise
 * leave the larger ones (gelu_tanh, sigmoid xent) as calls, which pass
 * every vector through memory and cost more than the arithmetic. */
#define CAIRN__VINLINE static inline __attribute__((always_inline))

/* ---- loops ---------------------------------------------------------------- */

/* Lanes [0, r) set, for r in 0..8. */
CAIRN__VINLINE __m256i cairn__v_mask(size_t r) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)r), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Streaming stores (cairn__kernels_stream, kernels.h): when the caller's
 * whole output is larger than the last-level cache, an ordinary store
 * first reads each line of y from memory (read for ownership) only to
 * overwrite it, 50 % more traffic for y = f(x); _mm256_stream_ps skips the
 * read. y is aligned to 32 bytes by a masked head vector first. Only for
 * outputs distinct from the inputs. The values are the same either way. */
static inline size_t cairn__v_stream_head(const float *y, size_t n) {
  size_t mis = ((uintptr_t)y & 31u) / sizeof(float), head = mis ? 8 - mis : 0;
  return head < n ? head : n;
}

/* The whole vectors of y[i] = F(x[i]) (RUN1) or F(a[i], b[i]) (RUN2) from
 * i_ on, two per step, then one, each result written by STORE
 * (_mm256_storeu_ps, or _mm256_stream_ps on an aligned y); i_ is left at
 * the first element after them. Both results of a step are computed before
 * either is stored, so y may be an input, and the two independent
 * dependency chains of a long F overlap in the core. */
#define CAIRN__AVX2_RUN1(x, y, i_, n, F, STORE)                                                    \
  do {                                                                                             \
    for (; (i_) + 16 <= (n); (i_) += 16) {                                                         \
      const __m256 r0_ = F(_mm256_loadu_ps((x) + (i_))), r1_ = F(_mm256_loadu_ps((x) + (i_) + 8)); \
      STORE((y) + (i_), r0_);                                                                      \
      STORE((y) + (i_) + 8, r1_);                                                                  \
    }                                                                                              \
    for (; (i_) + 8 <= (n); (i_) += 8) STORE((y) + (i_), F(_mm256_loadu_ps((x) + (i_))));          \
  } while (0)

#define CAIRN__AVX2_RUN2(a, b, y, i_, n, F, STORE)                                                 \
  do {                                                                                             \
    for (; (i_) + 16 <= (n); (i_) += 16) {                                                         \
      const __m256 r0_ = F(_mm256_loadu_ps((a) + (i_)), _mm256_loadu_ps((b) + (i_)));              \
      const __m256 r1_ = F(_mm256_loadu_ps((a) + (i_) + 8), _mm256_loadu_ps((b) + (i_) + 8));      \
      STORE((y) + (i_), r0_);                                                                      \
      STORE((y) + (i_) + 8, r1_);                                                                  \
    }                                                                                              \
    for (; (i_) + 8 <= (n); (i_) += 8)                                                             \
      STORE((y) + (i_), F(_mm256_loadu_ps((a) + (i_)), _mm256_loadu_ps((b) + (i_))));              \
  } while (0)

/* y[i] = F(x[i]) for i < n: whole vectors (RUN1), then one masked vector
 * for the tail (masked lanes load as 0 and are never stored). Each lane's
 * value is the same whichever loop computes it. */
#define CAIRN__AVX2_MAP1(x, y, n, F)                                                               \
  do {                                                                                             \
    size_t i_ = 0;                                                                                 \
    if (cairn__kernels_stream && (const void *)(y) != (const void *)(x) && (n) >= 64) {            \
      i_ = cairn__v_stream_head((y), (n));                                                         \
      if (i_) {                                                                                    \
        const __m256i m_ = cairn__v_mask(i_);                                                      \
        _mm256_maskstore_ps((y), m_, F(_mm256_maskload_ps((x), m_)));                              \
      }                                                                                            \
      CAIRN__AVX2_RUN1(x, y, i_, n, F, _mm256_stream_ps);                                          \
      _mm_sfence();                                                                                \
    }                                                                                              \
    CAIRN__AVX2_RUN1(x, y, i_, n, F, _mm256_storeu_ps);                                            \
    if (i_ < (n)) {                                                                                \
      const __m256i m_ = cairn__v_mask((n)-i_);                                                    \
      _mm256_maskstore_ps((y) + i_, m_, F(_mm256_maskload_ps((x) + i_, m_)));                      \
    }                                                                                              \
  } while (0)

/* y[i] = F(a[i], b[i]) for i < n, same scheme. y may be a or b (both
 * vectors of a step are loaded before either result is stored). */
#define CAIRN__AVX2_MAP2(a, b, y, n, F)                                                            \
  do {                                                                                             \
    size_t i_ = 0;                                                                                 \
    if (cairn__kernels_stream && (const void *)(y) != (const void *)(a) &&                         \
        (const void *)(y) != (const void *)(b) && (n) >= 64) {                                     \
      i_ = cairn__v_stream_head((y), (n));                                                         \
      if (i_) {                                                                                    \
        const __m256i m_ = cairn__v_mask(i_);                                                      \
        _mm256_maskstore_ps((y), m_, F(_mm256_maskload_ps((a), m_), _mm256_maskload_ps((b), m_))); \
      }                                                                                            \
      CAIRN__AVX2_RUN2(a, b, y, i_, n, F, _mm256_stream_ps);                                       \
      _mm_sfence();                                                                                \
    }                                                                                              \
    CAIRN__AVX2_RUN2(a, b, y, i_, n, F, _mm256_storeu_ps);                                         \
    if (i_ < (n)) {                                                                                \
      const __m256i m_ = cairn__v_mask((n)-i_);                                                    \
      _mm256_maskstore_ps((y) + i_, m_,                                                            \
                          F(_mm256_maskload_ps((a) + i_, m_), _mm256_maskload_ps((b) + i_, m_)));  \
    }                                                                                              \
  } while (0)

/* ---- small helpers ---------------------------------------------------------- */

CAIRN__VINLINE __m256 cairn__v_abs(__m256 x) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x); }

/* Sum of the four lanes of a, in the fixed order (a0 + a2) + (a1 + a3). */
static inline double cairn__v_hsum_pd(__m256d a) {
  __m128d s = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

/* acc += the 8 floats of v, widened to double (exact), low half into lo,
 * high half into hi. */
CAIRN__VINLINE void cairn__v_acc_pd(__m256 v, __m256d *lo, __m256d *hi) {
  *lo = _mm256_add_pd(*lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
  *hi = _mm256_add_pd(*hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

/* 1/den for den ≥ 1 finite (every denominator here is 1 + e, e in
 * [0, 1]) and quotients num/den from it, without VDIVPS: a 12-bit reciprocal estimate, one Newton step
 * (relative error ≤ ~2^−22), the quotient, and one residual correction
 * q + (num − q·den)·r, whose residual the FMA forms exactly: the result
 * is within a hair of the correctly rounded quotient (the sweeps cannot
 * tell them apart from VDIVPS's). Used where one reciprocal serves two
 * quotients (sigmoid xent). For a single quotient VDIVPS stays: measured
 * side by side on this Zen 3 under load, the five extra FMA-pipe
 * operations made sigmoid, tanh and gelu_tanh 5–15 % slower, the divider
 * being a unit of its own that runs beside the FMAs. */
CAIRN__VINLINE __m256 cairn__v_rcp1(__m256 den) {
  const __m256 r = _mm256_rcp_ps(den);
  return _mm256_fmadd_ps(r, _mm256_fnmadd_ps(den, r, _mm256_set1_ps(1.0f)), r);
}
/* num/den given r = cairn__v_rcp1(den) (one reciprocal serves several quotients) */
CAIRN__VINLINE __m256 cairn__v_div_r(__m256 num, __m256 den, __m256 r) {
  const __m256 q = _mm256_mul_ps(num, r);
  return _mm256_fmadd_ps(_mm256_fnmadd_ps(q, den, num), r, q);
}

/* ---- exp ------------------------------------------------------------------------
 * exp(x + lo) = 2^k · e^r,  k = round(x·log2 e),  r = x − k·ln2 + lo,  |r| ≤ ½ln2.
 * ln2 is split into a float hi (24 bits) and lo (Cody–Waite); with FMA the
 * first reduction step is exact, so r carries only the rounding of the second.
 * e^r = 1 + r + r²·P(r), P of degree 5 (Cephes expf coefficients).
 * 2^k is applied as two factors 2^(k>>1)·2^(k−(k>>1)), so results in the
 * subnormal range are rounded once, like libm, and k = 128 overflows to inf.
 * lo is a small correction of the argument (|lo| ≤ ½ulp(x)), used where x
 * itself is the rounded value of an exact hi + lo (softmax, erfc, gelu_tanh).
 * The result is m·s; callers that multiply by something else apply s last so
 * a subnormal result is rounded once. */
typedef struct {
  __m256 m; /* e^r · 2^(k>>1), always a normal float */
  __m256 s; /* 2^(k − (k>>1)) */
} cairn__v_exps;

/* x − k·ln 2 in two steps (ln 2 split hi + lo, so the first product is
 * exact) plus lo, the caller's low part of x (0 when x is exact). */
CAIRN__VINLINE __m256 cairn__v_exp_reduce(__m256 x, __m256 fk, __m256 lo) {
  __m256 r = _mm256_fnmadd_ps(fk, _mm256_set1_ps(0.693147182464599609375f), x);
  r = _mm256_fnmadd_ps(fk, _mm256_set1_ps(-1.904654299957768e-09f), r);
  return _mm256_add_ps(r, lo);
}

/* P(r) of e^r = 1 + r + r²·P(r) on |r| ≤ ln2/2, degree 5. */
CAIRN__VINLINE __m256 cairn__v_exp_p(__m256 r) {
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  return _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
}

/* The reduction and polynomial shared by both scalings and by tanh:
 * returns e^r − 1 = r + r²·P(r) and *fk = k as a float. */
CAIRN__VINLINE __m256 cairn__v_exp_poly_m1(__m256 x, __m256 lo, __m256 *fk_out) {
  const __m256 fk = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 r = cairn__v_exp_reduce(x, fk, lo);
  const __m256 p = cairn__v_exp_p(r);
  *fk_out = fk;
  return _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r);
}
/* p = e^r (in [0.7, 1.42]) */
CAIRN__VINLINE __m256 cairn__v_exp_poly(__m256 x, __m256 lo, __m256 *fk_out) {
  return _mm256_add_ps(cairn__v_exp_poly_m1(x, lo, fk_out), _mm256_set1_ps(1.0f));
}

/* The same for x already known to be in [−174, 88.8] or NaN (no clamp:
 * callers whose argument is bounded by construction save its two
 * operations; NaN gives NaN, see below). */
CAIRN__VINLINE cairn__v_exps cairn__v_exp_split_inrange(__m256 x, __m256 lo) {
  __m256 fk;
  const __m256 p = cairn__v_exp_poly(x, lo, &fk);
  /* k is in [−251, 128] (NaN gives INT_MIN, harmless: p is NaN). */
  const __m256i k = _mm256_cvtps_epi32(fk);
  const __m256i k1 = _mm256_srai_epi32(k, 1);
  const __m256i k2 = _mm256_sub_epi32(k, k1);
  const __m256i bias = _mm256_set1_epi32(127);
  cairn__v_exps e;
  e.m = _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, bias), 23)));
  e.s = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, bias), 23));
  return e;
}

/* ---- the one-factor fast path ----------------------------------------------
 * For x in [−87, 88] the result p·2^k is a normal float, and so are both
 * products of the split form ((p·2^(k>>1))·2^(k−(k>>1)): each is exact), so
 * p·2^k in one multiplication gives the same bits with neither the clamp
 * nor the split (six operations fewer). (x ≥ −87 gives k ≥ −126, and
 * k = −126 only with r > 0.3, p > 1.) A vector takes it when all eight
 * lanes are in that range: a branch per vector, not per element, that no
 * result can see, since each lane's bits are the same on either path
 * (exp_fast_path_each_lane tests puts each out-of-range value in each lane
 * next to in-range ones). NaN fails the test and takes the full path. */
#define CAIRN__V_EXP_FAST_LO (-87.0f)
#define CAIRN__V_EXP_FAST_HI 88.0f

CAIRN__VINLINE __m256 cairn__v_exp_fast(__m256 x) {
  __m256 fk;
  const __m256 p = cairn__v_exp_poly(x, _mm256_set1_ps(-0.0f), &fk);
  const __m256i k = _mm256_cvtps_epi32(fk);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k, _mm256_set1_epi32(127)), 23)));
}

CAIRN__VINLINE cairn__v_exps cairn__v_exp_split(__m256 x, __m256 lo) {
  /* e^x is inf above 88.72 and rounds to 0 below −103.97; the low clamp is
   * −174 rather than −104 so that (c·m)·s still rounds to the right tiny
   * value when a caller scales m by a large c first (gelu_tanh: up to ~2^11);
   * k ≥ −251 keeps both factors normal floats.
   * MIN/MAXPS return their second operand when one is NaN: NaN stays NaN. */
  x = _mm256_max_ps(_mm256_set1_ps(-174.0f), _mm256_min_ps(_mm256_set1_ps(88.8f), x));
  return cairn__v_exp_split_inrange(x, lo);
}

/* e^x, every x (clamped, split scaling) */
CAIRN__VINLINE __m256 cairn__v_exp_full(__m256 x) {
  /* r + (−0) = r for every r: the compiler drops the correction's add. */
  const cairn__v_exps e = cairn__v_exp_split(x, _mm256_set1_ps(-0.0f));
  return _mm256_mul_ps(e.m, e.s);
}

/* e^x: the fast path for a vector of in-range lanes (above), else the full one. */
CAIRN__VINLINE __m256 cairn__v_exp(__m256 x) {
  const __m256 in = _mm256_and_ps(_mm256_cmp_ps(x, _mm256_set1_ps(CAIRN__V_EXP_FAST_LO), _CMP_GE_OQ),
                                  _mm256_cmp_ps(x, _mm256_set1_ps(CAIRN__V_EXP_FAST_HI), _CMP_LE_OQ));
  if (__builtin_expect(_mm256_movemask_ps(in) == 0xff, 1)) return cairn__v_exp_fast(x);
  return cairn__v_exp_full(x);
}

/* e^x for x ≤ 0 or NaN (sigmoid, tanh): only the low clamp is needed, and
 * only the low test for the fast path. */
CAIRN__VINLINE __m256 cairn__v_exp_nonpos(__m256 x) {
  const __m256 in = _mm256_cmp_ps(x, _mm256_set1_ps(CAIRN__V_EXP_FAST_LO), _CMP_GE_OQ);
  if (__builtin_expect(_mm256_movemask_ps(in) == 0xff, 1)) return cairn__v_exp_fast(x);
  const cairn__v_exps e =
      cairn__v_exp_split_inrange(_mm256_max_ps(_mm256_set1_ps(-174.0f), x), _mm256_set1_ps(-0.0f));
  return _mm256_mul_ps(e.m, e.s);
}

/* ---- log ------------------------------------------------------------------------
 * log x = e·ln2 + log1p(f),  x = 2^e·(1 + f),  1 + f in [√½, √2).
 * log1p(f) = f − f²/2 + f³·P(f), P of degree 8 (Cephes logf coefficients);
 * ln2 = 0.693359375 − 2.12194440e-4 so that e·ln2_hi is exact.
 * Subnormals are scaled by 2^23 first. log 0 = −inf, log(x<0) = NaN,
 * log inf = inf, log NaN = NaN. */
/* log x for x positive, normal and finite (no special cases). */
CAIRN__VINLINE __m256 cairn__v_log_core(__m256 xs, __m256 fe0) {
  const __m256i bits = _mm256_castps_si256(xs);
  /* Subtracting the bits of √½ puts the exponent boundary at √½. */
  const __m256i e = _mm256_srai_epi32(_mm256_sub_epi32(bits, _mm256_set1_epi32(0x3f3504f3)), 23);
  const __m256 m = _mm256_castsi256_ps(_mm256_sub_epi32(bits, _mm256_slli_epi32(e, 23)));
  const __m256 fe = _mm256_sub_ps(_mm256_cvtepi32_ps(e), fe0);
  const __m256 f = _mm256_sub_ps(m, _mm256_set1_ps(1.0f)); /* exact (Sterbenz) */
  const __m256 z = _mm256_mul_ps(f, f);
  __m256 p = _mm256_set1_ps(7.0376836292e-2f);
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(-1.1514610310e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.1676998740e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(-1.2420140846e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.4249322787e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(-1.6668057665e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(2.0000714765e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(-2.4999993993e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(3.3333331174e-1f));
  __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, f), z);
  y = _mm256_fmadd_ps(fe, _mm256_set1_ps(-2.12194440e-4f), y);
  y = _mm256_fnmadd_ps(_mm256_set1_ps(0.5f), z, y);
  return _mm256_fmadd_ps(fe, _mm256_set1_ps(0.693359375f), _mm256_add_ps(f, y));
}

/* log x with every special case blended in (subnormals, ±0, negatives,
 * inf, NaN). */
CAIRN__VINLINE __m256 cairn__v_log_full(__m256 x) {
  const __m256 sub = _mm256_cmp_ps(x, _mm256_set1_ps(1.17549435e-38f), _CMP_LT_OQ);
  const __m256 xs = _mm256_blendv_ps(x, _mm256_mul_ps(x, _mm256_set1_ps(8388608.0f)), sub);
  __m256 y = cairn__v_log_core(xs, _mm256_and_ps(sub, _mm256_set1_ps(23.0f)));
  /* Special cases, last: NaN or negative → NaN; ±0 → −inf; +inf → +inf. */
  const __m256 inf = _mm256_set1_ps(__builtin_inff());
  y = _mm256_blendv_ps(y, inf, _mm256_cmp_ps(x, inf, _CMP_EQ_OQ));
  y = _mm256_blendv_ps(y, _mm256_sub_ps(_mm256_setzero_ps(), inf),
                       _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_EQ_OQ));
  return _mm256_blendv_ps(y, _mm256_set1_ps(__builtin_nanf("")),
                          _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_NGE_UQ));
}

/* log x. A vector whose eight lanes are all positive normal finite floats
 * (the usual case) needs none of the special cases, which cost ten of the
 * thirty-odd operations: one integer test picks the core alone for it.
 * This is a branch per vector, not per element, and it changes no bit:
 * for such lanes every blend of cairn__v_log_full is a no-op (and its
 * subnormal pre-scale is not taken), so each lane's value is the same
 * whichever path its neighbours send the vector down. The test: with
 * v = bits − 0x00800000, x is positive, normal and finite exactly when
 * 0 ≤ v ≤ 0x7effffff (signed), i.e. when neither v nor (v > 0x7effffff)
 * has its top bit set. */
CAIRN__VINLINE __m256 cairn__v_log(__m256 x) {
  const __m256i v = _mm256_sub_epi32(_mm256_castps_si256(x), _mm256_set1_epi32(0x00800000));
  const __m256i bad = _mm256_or_si256(v, _mm256_cmpgt_epi32(v, _mm256_set1_epi32(0x7effffff)));
  if (__builtin_expect(_mm256_movemask_ps(_mm256_castsi256_ps(bad)) == 0, 1))
    return cairn__v_log_core(x, _mm256_setzero_ps());
  return cairn__v_log_full(x);
}

/* log(1 + a) for a ≥ 0: with u = 1 + a rounded, log1p(a) = log u + (a − (u − 1))/u
 * to first order; u − 1 is exact, so the correction recovers what the
 * rounding of 1 + a lost (and gives a exactly when u = 1). */
CAIRN__VINLINE __m256 cairn__v_log1p_pos(__m256 a) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 u = _mm256_add_ps(one, a);
  const __m256 c = _mm256_sub_ps(a, _mm256_sub_ps(u, one));
  return _mm256_add_ps(cairn__v_log(u), _mm256_div_ps(c, u));
}

/* The same for a in [0, 1] (or NaN), given u = 1 + a and r = cairn__v_rcp1(u):
 * u is in [1, 2], so log needs none of its special cases. */
CAIRN__VINLINE __m256 cairn__v_log1p_pos_r(__m256 a, __m256 u, __m256 r) {
  const __m256 c = _mm256_sub_ps(a, _mm256_sub_ps(u, _mm256_set1_ps(1.0f)));
  return _mm256_add_ps(cairn__v_log_core(u, _mm256_setzero_ps()), cairn__v_div_r(c, u, r));
}

/* ---- sigmoid, tanh ------------------------------------------------------------
 * σ(x) = 1/(1 + e^−x) for x ≥ 0, e^x/(1 + e^x) for x < 0: with e = e^−|x| ≤ 1
 * both are one division, and for x → −∞ the result is e^x with its full
 * relative accuracy (down to the subnormals) instead of 1 − (something ≈ 1). */
CAIRN__VINLINE __m256 cairn__v_sigmoid(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 e = cairn__v_exp_nonpos(_mm256_or_ps(x, _mm256_set1_ps(-0.0f))); /* e^−|x| */
  /* BLENDVPS reads only the sign bit of its mask, here x's own: x = −0 takes
   * e = e^0 = 1, the same as 1; NaN is NaN either way. */
  const __m256 num = _mm256_blendv_ps(one, e, x);
  return _mm256_div_ps(num, _mm256_add_ps(one, e));
}

/* tanh|x| = (1 − e)/(1 + e),  e = e^(−2|x|) = 2^k·e^r, one exponential for
 * both of the forms that keep it accurate, blended before one division:
 *   |x| < 0.625:  −q/(2 + q),  q = e − 1 = (2^k − 1) + 2^k·(e^r − 1)   (one
 *                 FMA, 2^k − 1 exact: k ≥ −2 here), e^r − 1 = r + r²P(r)
 *                 being exp's polynomial before its "+ 1". For |x| ≲ 0.17,
 *                 k = 0 and r = −2|x| exactly: full relative accuracy down
 *                 to the subnormals, tanh(±0) = ±0, and no second polynomial.
 *   elsewhere:    1 − 2e/(1 + e), e ≤ 0.287: the subtraction scales the
 *                 quotient's error down.
 * Either denominator is a + b (a = 2 or 1, b = q or e); its rounding costs
 * up to a whole ulp of the result where it lands just above 1 or 2, so the
 * quotient is refined against the exact a + b: den + dlo (Fast2Sum, a ≥ |b|),
 * residual num − Q·den exact by FMA, Q += (res − Q·dlo)·rcp(den) (the
 * correction is ~2^−24·Q, so RCPPS's 12 bits are plenty).
 * −2|x| is clamped at −18.5 (tanh rounds to 1 beyond |x| = 9.01; e stays a
 * normal float); MAXPS returns its second operand for NaN, so NaN goes to
 * the second form and stays NaN. The sign of x is ORed in last (the
 * magnitude is +0 or positive). */
CAIRN__VINLINE __m256 cairn__v_tanh(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 y =
      _mm256_max_ps(_mm256_set1_ps(-18.5f), _mm256_mul_ps(_mm256_set1_ps(-2.0f), _mm256_andnot_ps(sign, x)));
  __m256 fk;
  const __m256 em1r = cairn__v_exp_poly_m1(y, _mm256_set1_ps(-0.0f), &fk);
  const __m256 s = _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fk), _mm256_set1_epi32(127)), 23));
  const __m256 q = _mm256_fmadd_ps(s, em1r, _mm256_sub_ps(s, one)); /* e − 1 */
  const __m256 e = _mm256_fmadd_ps(s, em1r, s);
  const __m256 small = _mm256_cmp_ps(y, _mm256_set1_ps(-1.25f), _CMP_GT_OQ);
  const __m256 num = _mm256_blendv_ps(_mm256_add_ps(e, e), _mm256_xor_ps(q, sign), small);
  const __m256 a = _mm256_blendv_ps(one, _mm256_set1_ps(2.0f), small);
  const __m256 b = _mm256_blendv_ps(e, q, small);
  const __m256 den = _mm256_add_ps(a, b);
  const __m256 dlo = _mm256_sub_ps(b, _mm256_sub_ps(den, a));
  __m256 qt = _mm256_div_ps(num, den);
  const __m256 res = _mm256_fnmadd_ps(qt, dlo, _mm256_fnmadd_ps(qt, den, num));
  qt = _mm256_fmadd_ps(res, _mm256_rcp_ps(den), qt);
  const __m256 t = _mm256_blendv_ps(_mm256_sub_ps(one, qt), qt, small);
  return _mm256_or_ps(t, _mm256_and_ps(sign, x));
}

/* ---- normal tail (erfc) --------------------------------------------------------
 * Φ(−u) = ½·erfc(u/√2) = e^(−u²/2) · M(u) for u ≥ 0, where M(u) = Φ(−u)·e^(u²/2)
 * is smooth, positive and slowly varying (0.5 at 0, ~1/(u√(2π)) for large u).
 * Writing the tail this way keeps it relatively accurate all the way into the
 * subnormals: nothing is subtracted from 1, and u²/2 is formed exactly as
 * hi + lo with an FMA, so the Gaussian factor carries no amplified argument
 * error (a plain e^(−x²/2) would lose |x|²·2^−24 relative, 6e-6 at x = 10).
 *
 * M is a degree-8 polynomial in v = u − a on eight intervals of u,
 * [0,.5) [.5,1) [1,2) [2,3) [3,5) [5,7) [7,11) [11,15), picked by the top
 * mantissa bit and exponent of u + 1 (no compares); the coefficients of all
 * intervals sit in one register per degree and are selected with one
 * VPERMPS each. v is exact (Sterbenz). Coefficients are least-squares fits on
 * Chebyshev nodes to relative error, rounded to float one degree at a time
 * (max relative error of the fitted M: 3.5e-8, about 0.3 ulp). */

/* u is clamped to ≤ 14.99: Φ(−u) underflows to 0 before that. */
#define CAIRN__V_TAIL_UMAX 14.99f

CAIRN__VINLINE __m256 cairn__v_tail_m(__m256 u) {
  const __m256i idx = _mm256_sub_epi32(
      _mm256_srli_epi32(_mm256_castps_si256(_mm256_add_ps(u, _mm256_set1_ps(1.0f))), 22),
      _mm256_set1_epi32(254));
#define CAIRN__T(a, b, c, d, e, f, g, h) \
  _mm256_permutevar8x32_ps(_mm256_setr_ps(a, b, c, d, e, f, g, h), idx)
  const __m256 v = _mm256_sub_ps(u, CAIRN__T(0.0f, 0.5f, 1.0f, 2.0f, 3.0f, 5.0f, 7.0f, 11.0f));
  __m256 p = CAIRN__T(0.0008725925f, -0.010667244f, 2.70660767e-05f, -1.29924756e-05f,
                      2.44825344e-07f, -1.84841369e-08f, 6.06239781e-10f, 5.02217018e-11f);
  p = _mm256_fmadd_ps(p, v, CAIRN__T(-0.00374008459f, 0.0223194491f, -0.000213964871f,
                                     4.18397431e-05f, -3.35905952e-06f, 5.76130361e-08f,
                                     -1.64179568e-08f, -1.24551192e-09f));
  p = _mm256_fmadd_ps(p, v, CAIRN__T(0.01057484f, -0.017486399f, 0.00092810113f, 1.37731222e-05f,
                                     2.37556815e-05f, 9.19258071e-07f, 2.23205532e-07f,
                                     1.71031687e-08f));
  p = _mm256_fmadd_ps(p, v, CAIRN__T(-0.0267112665f, 0.000941925391f, -0.00311606703f,
                                     -0.00042916424f, -0.000123174032f, -1.09417315e-05f,
                                     -2.16105104e-06f, -1.96287445e-07f));
  p = _mm256_fmadd_ps(p, v, CAIRN__T(0.0625355616f, 0.0202492997f, 0.00923777651f, 0.00191176229f,
                                     0.000552716141f, 7.60103649e-05f, 1.78231367e-05f,
                                     2.21582195e-06f));
  p = _mm256_fmadd_ps(p, v, CAIRN__T(-0.132986322f, -0.0545222014f, -0.0250819903f,
                                     -0.00668478431f, -0.00230911816f, -0.00045516339f,
                                     -0.000137897252f, -2.51939291e-05f));
  p = _mm256_fmadd_ps(p, v, CAIRN__T(0.250000417f, 0.118744411f, 0.0621067584f, 0.0213095639f,
                                     0.00915603898f, 0.00259484258f, 0.00103897206f,
                                     0.000285738381f));
  p = _mm256_fmadd_ps(p, v, CAIRN__T(-0.398942292f, -0.224131703f, -0.13736397f, -0.0627380461f,
                                     -0.034400411f, -0.0143456943f, -0.00768787879f,
                                     -0.00321849878f));
  p = _mm256_fmadd_ps(p, v, CAIRN__T(0.5f, 0.349618822f, 0.261578292f, 0.168101996f, 0.121513948f,
                                     0.0769193023f, 0.0558934808f, 0.03597489f));
#undef CAIRN__T
  return p;
}

/* e^(−u²/2) in split form, with −u²/2 = hi + lo exact (FMA), for u in
 * [0, CAIRN__V_TAIL_UMAX] or NaN. −u/2 is exact, so hi = (−u/2)·u rounded
 * and lo = its FMA residual are the same bits as −½ times the split of u²
 * (one multiplication fewer). −u²/2 ≥ −112.4 is inside exp's range: no
 * clamp. */
CAIRN__VINLINE cairn__v_exps cairn__v_gauss_split(__m256 u) {
  const __m256 hu = _mm256_mul_ps(_mm256_set1_ps(-0.5f), u);
  const __m256 hi = _mm256_mul_ps(hu, u);
  return cairn__v_exp_split_inrange(hi, _mm256_fmsub_ps(hu, u, hi));
}

/* e^(−u²/2) as one factor p·2^k, for a vector whose u are all ≤ 12
 * (CAIRN__V_GAUSS_FAST_UMAX): −u²/2 ≥ −72 is inside exp's one-multiplication
 * range, and every product gelu forms from it (M(u) ≥ 0.03; where k ≠ 0,
 * |x| ≥ 0.98) stays a normal float, so multiplying by 2^k first or last
 * gives the same bits: gelu branches per vector between this and the split
 * form, invisibly (exp_paths_same_bits). gelu_bwd keeps the split form: the
 * branch made its loop longer, not shorter (callgrind, bench/RESULTS.md). */
#define CAIRN__V_GAUSS_FAST_UMAX 12.0f
CAIRN__VINLINE int cairn__v_gauss_fast_ok(__m256 u) {
  return _mm256_movemask_ps(_mm256_cmp_ps(u, _mm256_set1_ps(CAIRN__V_GAUSS_FAST_UMAX), _CMP_LE_OQ)) == 0xff;
}
CAIRN__VINLINE __m256 cairn__v_gauss_fast(__m256 u) {
  const __m256 hu = _mm256_mul_ps(_mm256_set1_ps(-0.5f), u);
  const __m256 hi = _mm256_mul_ps(hu, u);
  __m256 fk;
  const __m256 p = cairn__v_exp_poly(hi, _mm256_fmsub_ps(hu, u, hi), &fk);
  const __m256i k = _mm256_cvtps_epi32(fk);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k, _mm256_set1_epi32(127)), 23)));
}

/* ---- rows --------------------------------------------------------------------- */

/* e^(x − m) for a row max m, with x − m carried exactly as d + err
 * (TwoSum): a rounded x − m would cost up to |x − m|·2^−24 relative
 * (4e-6 at a logit gap of 80). Elements more than 104 below the max give 0
 * whatever err is; err is zeroed there so that x = −inf (a masked logit)
 * gives 0, not inf − inf. e = 1 exactly where x = m. */
CAIRN__VINLINE __m256 cairn__v_exp_shifted(__m256 x, __m256 m) {
  const __m256 nm = _mm256_sub_ps(_mm256_setzero_ps(), m);
  const __m256 d = _mm256_add_ps(x, nm);
  const __m256 bv = _mm256_sub_ps(d, x);
  const __m256 av = _mm256_sub_ps(d, bv);
  __m256 err = _mm256_add_ps(_mm256_sub_ps(x, av), _mm256_sub_ps(nm, bv));
  err = _mm256_and_ps(err, _mm256_cmp_ps(d, _mm256_set1_ps(-104.0f), _CMP_GE_OQ));
  /* d ≤ 0 (m is the max; x = m = inf gives NaN): only the low clamp */
  const cairn__v_exps e = cairn__v_exp_split_inrange(_mm256_max_ps(_mm256_set1_ps(-174.0f), d), err);
  return _mm256_mul_ps(e.m, e.s);
}

/* One vector of a row's exp pass: e = e^(x − m), rest += Σ e over the
 * lanes with x ≠ m, and the number of lanes with x = m (each of which has
 * e = 1 exactly) returned. Keeping the maxima out of the sum lets the
 * caller form S − 1 = Σ_{j≠argmax} e_j without cancellation, for
 * log S = log1p(S − 1) near S = 1. *e_out gets e. mkf: the lanes that are
 * elements (all ones except in the tail). */
CAIRN__VINLINE int cairn__v_row_expsum_step_t(__m256 xv, __m256 vm, __m256 mkf, int tail, __m256 *e_out,
                                             __m256d *lo, __m256d *hi) {
  const __m256 e = cairn__v_exp_shifted(xv, vm);
  *e_out = e;
  /* the tail's masked lanes load as 0 and their e is cleared with them;
   * whole vectors (tail a constant 0 after inlining) skip the two ANDs */
  __m256 eq = _mm256_cmp_ps(xv, vm, _CMP_EQ_OQ), ev = e;
  if (tail) eq = _mm256_and_ps(eq, mkf), ev = _mm256_and_ps(e, mkf);
  cairn__v_acc_pd(_mm256_andnot_ps(eq, ev), lo, hi);
  return __builtin_popcount((unsigned)_mm256_movemask_ps(eq));
}
CAIRN__VINLINE int cairn__v_row_expsum_step(__m256 xv, __m256 vm, __m256 mkf, __m256 *e_out, __m256d *lo,
                                           __m256d *hi) {
  return cairn__v_row_expsum_step_t(xv, vm, mkf, 1, e_out, lo, hi);
}

/* S − 1 for S = Σ_j e^(x_j − m), m the row max, n ≥ 1: the sum over the
 * non-maximal elements plus (count of maxima − 1); see above. Stores the
 * e^(x_j − m) to y if y is not NULL (y may be x: x[i] is read before y[i]
 * is written). Whole vectors use plain stores: a masked store
 * (VMASKMOVPS) costs more than the exponential on AMD cores. Two vectors
 * per step into two accumulator pairs, combined at the end in a fixed order
 * (the sum's bits depend only on n). */
static inline double cairn__v_row_expsum_m1(const float *x, float *y, size_t n, float m) {
  const __m256 vm = _mm256_set1_ps(m);
  const __m256 all = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
  __m256d lo0 = _mm256_setzero_pd(), hi0 = lo0, lo1 = lo0, hi1 = lo0;
  long cnt = 0;
  size_t i = 0;
  __m256 e0, e1;
  for (; i + 16 <= n; i += 16) {
    cnt += cairn__v_row_expsum_step_t(_mm256_loadu_ps(x + i), vm, all, 0, &e0, &lo0, &hi0);
    cnt += cairn__v_row_expsum_step_t(_mm256_loadu_ps(x + i + 8), vm, all, 0, &e1, &lo1, &hi1);
    if (y) _mm256_storeu_ps(y + i, e0), _mm256_storeu_ps(y + i + 8, e1);
  }
  for (; i + 8 <= n; i += 8) {
    cnt += cairn__v_row_expsum_step_t(_mm256_loadu_ps(x + i), vm, all, 0, &e0, &lo0, &hi0);
    if (y) _mm256_storeu_ps(y + i, e0);
  }
  if (i < n) {
    const __m256i mk = cairn__v_mask(n - i);
    cnt += cairn__v_row_expsum_step(_mm256_maskload_ps(x + i, mk), vm, _mm256_castsi256_ps(mk), &e0, &lo0,
                                    &hi0);
    if (y) _mm256_maskstore_ps(y + i, mk, e0);
  }
  return cairn__v_hsum_pd(_mm256_add_pd(_mm256_add_pd(lo0, hi0), _mm256_add_pd(lo1, hi1))) + (double)(cnt - 1);
}

#endif
