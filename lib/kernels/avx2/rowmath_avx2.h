/* Row passes of the AVX2 softmax-family and cross-entropy kernels
 * (math_avx2.c, loss_avx2.c): the row max and the exp-sum pass, with the
 * prefetches that let a row kernel run at memory speed.
 *
 * Why the prefetches: a row kernel makes two or three passes over its row.
 * The first reads the row from memory and does almost no arithmetic; the
 * later ones find it in L1 and are bound by the arithmetic (an exponential
 * per element). Left alone, memory idles while the core computes and the
 * core idles while the next row arrives, so the two times add up (measured
 * on Zen 3: softmax rows of 1000 at 0.25 of the in-place bandwidth from
 * memory, but at the arithmetic's full speed on a row already in cache).
 * The arithmetic pass therefore asks for the same offset of the n floats
 * that follow the row — the next row when rows are contiguous, as in a
 * batch — one prefetch per 64-byte line, up to CAIRN__ROW_PF_MAX floats so
 * that this row and the prefetched part both stay in L1/L2; the first pass
 * prefetches ahead inside its own row (what the hardware prefetchers alone
 * do too slowly for a read stream at one thread; see cairn_sum_avx2).
 * Prefetches never fault and change no value: past the end of the caller's
 * array they just fetch a line nobody reads. Where the next row is not
 * contiguous they cost one instruction per sixteen floats.
 *
 * The vector width appears only in the loop steps: a 16-lane port keeps
 * one prefetch per 64 bytes, i.e. one per vector. */
#ifndef CAIRN_ROWMATH_AVX2_H
#define CAIRN_ROWMATH_AVX2_H

#include "kernels/avx2/vecmath_avx2.h"

/* floats of the next row prefetched by an arithmetic pass (16 KB) */
#define CAIRN__ROW_PF_MAX 4096
/* distance of the first pass's in-row prefetch, in floats (1 KB) */
#define CAIRN__ROW_PF_AHEAD 256

/* One prefetch of the line holding p[i], for i a multiple of 16 below
 * CAIRN__ROW_PF_MAX, called once per 16 floats of an arithmetic pass with p
 * = (an array) + n: that array's next row. */
#define CAIRN__ROW_PF(p, i)                                                                        \
  do {                                                                                             \
    if ((i) < CAIRN__ROW_PF_MAX)                                                                  \
      _mm_prefetch((const char *)((uintptr_t)(p) + (i) * sizeof(float)), _MM_HINT_T0);             \
  } while (0)

/* max of x[0..n), n ≥ 1 (masked tail lanes read as −inf), with the first
 * pass's prefetch ahead in the row. */
static inline float cairn__r_max(const float *x, size_t n) {
  const __m256 ninf = _mm256_set1_ps(-__builtin_inff());
  __m256 m0 = ninf, m1 = ninf;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm_prefetch((const char *)((uintptr_t)(x + i) + CAIRN__ROW_PF_AHEAD * sizeof(float)), _MM_HINT_T0);
    m0 = _mm256_max_ps(m0, _mm256_loadu_ps(x + i));
    m1 = _mm256_max_ps(m1, _mm256_loadu_ps(x + i + 8));
  }
  for (; i < n; i += 8) {
    const __m256i mk = cairn__v_mask(n - i);
    m0 = _mm256_max_ps(m0, _mm256_blendv_ps(ninf, _mm256_maskload_ps(x + i, mk), _mm256_castsi256_ps(mk)));
  }
  m0 = _mm256_max_ps(m0, m1);
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m0), _mm256_extractf128_ps(m0, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
  return _mm_cvtss_f32(h);
}

/* ---- the row exponential -------------------------------------------------
 * E = e^(x − m)·2^64 for x ≤ m (m the row max), i.e. 2^64 times what
 * cairn__v_exp_shifted gives, by the same method (x − m carried exactly as
 * d + err by TwoSum, Cody–Waite reduction, Cephes degree-5 polynomial), with
 * fewer operations because d ≤ 0 is known:
 * - k = round(d·log2 e) comes from one FMA against the constant
 *   1.5·2^23 + 191, whose sum holds k + 191 in its low mantissa bits
 *   (no ROUNDPS, no CVTPS2DQ); d·log2 e is rounded once, to the integer;
 * - that float shifted left by 23 is the float 2^(k + 64) (the exponent
 *   field k + 191, in [2, 191] for d in [−131, 0]), so the scaling is one
 *   shift and one multiplication. The result is always a normal float:
 *   e^d for d ≥ −131 is ≥ 2^−189, and 2^64 of it ≥ 2^−125. The caller takes
 *   the 2^−64 out in double (the sums) or in its final multiplication, where
 *   a subnormal result is then rounded once.
 * d is clamped at −131 (e^d rounds to 0 in float below −103.97 and E·2^−64
 * still does); err is zeroed below −131 so that x = −inf (a masked logit)
 * gives 2^−125·2^−64 → 0, not inf − inf. E = 2^64 exactly where x = m. */
#define CAIRN__R_EXP_MIN (-131.0f)
/* E for x and nm = −m; *d gets x − m rounded (0 exactly where x = m). */
CAIRN__VINLINE __m256 cairn__r_exp64(__m256 x, __m256 nm, __m256 *d_out) {
  const __m256 lowest = _mm256_set1_ps(CAIRN__R_EXP_MIN);
  const __m256 d = _mm256_add_ps(x, nm);
  const __m256 bv = _mm256_sub_ps(d, x);
  const __m256 av = _mm256_sub_ps(d, bv);
  __m256 err = _mm256_add_ps(_mm256_sub_ps(x, av), _mm256_sub_ps(nm, bv));
  /* err is zeroed below −131 rather than −104: in between it is finite and
   * E·2^−64 rounds to 0 whatever it is; one constant fewer in registers */
  err = _mm256_and_ps(err, _mm256_cmp_ps(d, lowest, _CMP_GE_OQ));
  *d_out = d;
  /* MAXPS returns its second operand if either is NaN: NaN stays NaN */
  const __m256 dc = _mm256_max_ps(lowest, d);
  const __m256 magic = _mm256_set1_ps(12582912.0f + 191.0f);
  const __m256 t = _mm256_fmadd_ps(dc, _mm256_set1_ps(1.44269504f), magic);
  const __m256 fk = _mm256_sub_ps(t, magic);
  const __m256 r = cairn__v_exp_reduce(dc, fk, err);
  __m256 p = cairn__v_exp_p(r);
  p = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
  return _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(t), 23)));
}
#define CAIRN__R_2M64 5.421010862427522e-20 /* 2^−64 */

/* One vector of a row's exp pass: E = cairn__r_exp64(x, −m) to *e_out,
 * rest += Σ E over the lanes with x ≠ m (in double, exact widening), and
 * cnt −= the lanes with x = m (each has E = 2^64 exactly; the compare's −1
 * counts them without leaving the vector unit). Keeping the maxima out of
 * the sum lets the caller form S − 1 = Σ_{j≠argmax} e_j without
 * cancellation, for log S = log1p(S − 1) near S = 1. mkf: the lanes that
 * are elements (tail only; whole vectors pass tail = 0). One accumulator
 * pair: its two additions per vector are the only loop-carried chain, and
 * more accumulators made GCC keep them in memory (sixteen registers hold
 * the exponential's constants). */
CAIRN__VINLINE void cairn__r_expsum_step(__m256 xv, __m256 nm, __m256 mkf, int tail, __m256 *e_out,
                                         __m256d *lo, __m256d *hi, __m256i *cnt) {
  __m256 d;
  const __m256 e = cairn__r_exp64(xv, nm, &d);
  *e_out = e;
  __m256 eq = _mm256_cmp_ps(d, _mm256_setzero_ps(), _CMP_EQ_OQ), ev = e;
  if (tail) eq = _mm256_and_ps(eq, mkf), ev = _mm256_and_ps(e, mkf);
  cairn__v_acc_pd(_mm256_andnot_ps(eq, ev), lo, hi);
  *cnt = _mm256_sub_epi32(*cnt, _mm256_castps_si256(eq));
}

/* Two whole vectors: their non-maximal E are added in double first, so
 * that each accumulator takes one addition per sixteen floats. */
CAIRN__VINLINE void cairn__r_expsum_step2(__m256 x0, __m256 x1, __m256 nm, __m256 *e0_out, __m256 *e1_out,
                                          __m256d *lo, __m256d *hi, __m256i *cnt) {
  __m256 d0, d1;
  const __m256 e0 = cairn__r_exp64(x0, nm, &d0), e1 = cairn__r_exp64(x1, nm, &d1);
  *e0_out = e0, *e1_out = e1;
  const __m256 eq0 = _mm256_cmp_ps(d0, _mm256_setzero_ps(), _CMP_EQ_OQ);
  const __m256 eq1 = _mm256_cmp_ps(d1, _mm256_setzero_ps(), _CMP_EQ_OQ);
  const __m256 v0 = _mm256_andnot_ps(eq0, e0), v1 = _mm256_andnot_ps(eq1, e1);
  *lo = _mm256_add_pd(*lo, _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v0)),
                                         _mm256_cvtps_pd(_mm256_castps256_ps128(v1))));
  *hi = _mm256_add_pd(*hi, _mm256_add_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(v0, 1)),
                                         _mm256_cvtps_pd(_mm256_extractf128_ps(v1, 1))));
  *cnt = _mm256_sub_epi32(*cnt, _mm256_add_epi32(_mm256_castps_si256(eq0), _mm256_castps_si256(eq1)));
}

/* the lanes' sum of a count vector */
static inline long cairn__r_hsum_epi32(__m256i c) {
  __m128i h = _mm_add_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
  return _mm_cvtsi128_si32(h);
}

/* S − 1 for S = Σ_j e^(x_j − m), m the row max, n ≥ 1: the sum over the
 * non-maximal elements plus (count of maxima − 1); see above. Stores
 * E = 2^64·e^(x_j − m) to y unless y is NULL (y may be x: x[i] is read
 * before y[i] is written). Sixteen floats per step (then eight, then a
 * masked tail), in order: the sum's bits depend only on n. Prefetches x's next row and, for w not NULL,
 * w[0..min(n, CAIRN__ROW_PF_MAX)): the caller passes the next row of its
 * output, or this row's when a later pass writes it. */
static inline double cairn__r_expsum_m1(const float *x, float *y, const float *w, size_t n, float m) {
  const __m256 nm = _mm256_set1_ps(-m);
  const __m256 all = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
  __m256d lo = _mm256_setzero_pd(), hi = lo;
  __m256i cnt = _mm256_setzero_si256();
  size_t i = 0;
  __m256 e;
  for (; i + 16 <= n; i += 16) {
    CAIRN__ROW_PF(x + n, i);
    if (w) CAIRN__ROW_PF(w, i);
    __m256 e1;
    cairn__r_expsum_step2(_mm256_loadu_ps(x + i), _mm256_loadu_ps(x + i + 8), nm, &e, &e1, &lo, &hi, &cnt);
    if (y) _mm256_storeu_ps(y + i, e), _mm256_storeu_ps(y + i + 8, e1);
  }
  for (; i + 8 <= n; i += 8) {
    cairn__r_expsum_step(_mm256_loadu_ps(x + i), nm, all, 0, &e, &lo, &hi, &cnt);
    if (y) _mm256_storeu_ps(y + i, e);
  }
  if (i < n) {
    const __m256i mk = cairn__v_mask(n - i);
    cairn__r_expsum_step(_mm256_maskload_ps(x + i, mk), nm, _mm256_castsi256_ps(mk), 1, &e, &lo, &hi, &cnt);
    if (y) _mm256_maskstore_ps(y + i, mk, e);
  }
  return cairn__v_hsum_pd(_mm256_add_pd(lo, hi)) * CAIRN__R_2M64 + (double)(cairn__r_hsum_epi32(cnt) - 1);
}

#endif
