/* Row passes of the AVX-512 softmax-family and cross-entropy kernels
 * (math_avx512.c, loss_avx512.c): the row max and the exp-sum pass, the
 * AVX2 tier's (lib/kernels/avx2/rowmath_avx2.h, where the method, the
 * prefetches and their reasons are described) at sixteen lanes.
 *
 * Same bits as the AVX2 tier. The row exponential E = 2^64·e^(x − m) is
 * computed by the same operations in the same order, and the sums of a row
 * are taken in the AVX2 tier's order: it adds sixteen floats per step into
 * one pair of 4-lane double accumulators, lane j of the pair taking
 * x_j + x_(j+8); here one 8-lane accumulator takes the same pair sums, and
 * cairn__z_hsum_pd combines its lanes as cairn__v_hsum_pd combines the
 * pair's sum. A masked tail of r < 16 floats is added as its low then its
 * high eight, which is what the AVX2 tier's whole vector of eight plus its
 * masked tail do. So S − 1, and with it every probability, log-probability,
 * loss and gradient of softmax_row, log_softmax_row, sparse_xent_row and
 * xent_row, is the AVX2 tier's bit for bit (tests: avx512_rows_same_bits_as_avx2).
 *
 * VSCALEFPS could apply 2^k in one instruction, but the shift-and-multiply
 * form costs the same here (the exponent comes out of the FMA that rounds
 * k), keeps E a normal float for every d ≥ −131, so a subnormal probability
 * is rounded once, and gives the AVX2 tier's E. */
#ifndef CAIRN_ROWMATH_AVX512_H
#define CAIRN_ROWMATH_AVX512_H

#include "kernels/avx512/vecmath_avx512.h"

/* floats of the next row prefetched by an arithmetic pass (16 KB) */
#define CAIRN__ZR_PF_MAX 4096
/* distance of the first pass's in-row prefetch, in floats (1 KB) */
#define CAIRN__ZR_PF_AHEAD 256

/* One prefetch of the line holding p[i], for i a multiple of 16 below
 * CAIRN__ZR_PF_MAX: one per vector (64 bytes), p = (an array) + n being
 * that array's next row. Prefetches never fault and change no value. */
#define CAIRN__ZR_PF(p, i)                                                                         \
  do {                                                                                             \
    if ((i) < CAIRN__ZR_PF_MAX)                                                                   \
      _mm_prefetch((const char *)((uintptr_t)(p) + (i) * sizeof(float)), _MM_HINT_T0);             \
  } while (0)

/* max of x[0..n), n ≥ 1 (masked tail lanes read as −inf), prefetching
 * 1 KB ahead in the row. */
static inline float cairn__zr_max(const float *x, size_t n) {
  const __m512 ninf = _mm512_set1_ps(-__builtin_inff());
  __m512 m0 = ninf, m1 = ninf;
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    _mm_prefetch((const char *)((uintptr_t)(x + i) + CAIRN__ZR_PF_AHEAD * sizeof(float)), _MM_HINT_T0);
    _mm_prefetch((const char *)((uintptr_t)(x + i + 16) + CAIRN__ZR_PF_AHEAD * sizeof(float)), _MM_HINT_T0);
    m0 = _mm512_max_ps(m0, _mm512_loadu_ps(x + i));
    m1 = _mm512_max_ps(m1, _mm512_loadu_ps(x + i + 16));
  }
  for (; i < n; i += 16) {
    const __mmask16 mk = n - i >= 16 ? (__mmask16)0xffff : cairn__z_mask(n - i);
    m0 = _mm512_max_ps(m0, _mm512_mask_loadu_ps(ninf, mk, x + i));
  }
  m0 = _mm512_max_ps(m0, m1);
  __m256 h8 = _mm256_max_ps(_mm512_castps512_ps256(m0), _mm512_extractf32x8_ps(m0, 1));
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps(h8, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
  return _mm_cvtss_f32(h);
}

/* E = 2^64·e^(x − m) for x ≤ m, nm = −m, *d_out = x − m rounded (0 exactly
 * where x = m): the AVX2 tier's cairn__r_exp64, operation for operation.
 * x − m exact as d + err (TwoSum; err zeroed below −131 so that x = −inf
 * gives 0, not inf − inf); k = round(d·log2 e) from one FMA against
 * 1.5·2^23 + 191, whose result holds k + 191 in its low mantissa bits, and
 * that result shifted left by 23 is the float 2^(k + 64). */
#define CAIRN__ZR_EXP_MIN (-131.0f)
#define CAIRN__ZR_2M64 5.421010862427522e-20 /* 2^−64 */
CAIRN__ZINLINE __m512 cairn__zr_exp64(__m512 x, __m512 nm, __m512 *d_out) {
  const __m512 lowest = _mm512_set1_ps(CAIRN__ZR_EXP_MIN);
  const __m512 d = _mm512_add_ps(x, nm);
  const __m512 bv = _mm512_sub_ps(d, x);
  const __m512 av = _mm512_sub_ps(d, bv);
  const __m512 err = _mm512_maskz_add_ps(_mm512_cmp_ps_mask(d, lowest, _CMP_GE_OQ), _mm512_sub_ps(x, av),
                                         _mm512_sub_ps(nm, bv));
  *d_out = d;
  /* MAXPS returns its second operand if either is NaN: NaN stays NaN */
  const __m512 dc = _mm512_max_ps(lowest, d);
  const __m512 magic = _mm512_set1_ps(12582912.0f + 191.0f);
  const __m512 t = _mm512_fmadd_ps(dc, _mm512_set1_ps(1.44269504f), magic);
  const __m512 fk = _mm512_sub_ps(t, magic);
  const __m512 r = cairn__z_exp_reduce(dc, fk, err);
  const __m512 p = _mm512_add_ps(_mm512_fmadd_ps(cairn__z_exp_p(r), _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  return _mm512_mul_ps(p, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_castps_si512(t), 23)));
}

/* acc += lo + hi (the pair sums of a whole vector of sixteen, AVX2 order) */
CAIRN__ZINLINE void cairn__zr_acc_pair(__m512 v, __m512d *acc) {
  *acc = _mm512_add_pd(*acc, _mm512_add_pd(cairn__z_lo_pd(v), cairn__z_hi_pd(v)));
}
/* acc += lo, then acc += hi (a masked tail, AVX2 order) */
CAIRN__ZINLINE void cairn__zr_acc_seq(__m512 v, __m512d *acc) {
  *acc = _mm512_add_pd(_mm512_add_pd(*acc, cairn__z_lo_pd(v)), cairn__z_hi_pd(v));
}

/* One vector of a row's exp pass over the element lanes mk: E to *e_out,
 * the E of the lanes with x ≠ m into *acc (pairwise for a whole vector,
 * sequentially for a tail: tail is a constant after inlining), and the
 * lanes with x = m (E = 2^64 exactly) counted in *cnt by a masked integer
 * addition. */
CAIRN__ZINLINE void cairn__zr_expsum_step(__m512 xv, __m512 nm, __mmask16 mk, int tail, __m512 *e_out,
                                          __m512d *acc, __m512i *cnt) {
  __m512 d;
  const __m512 e = cairn__zr_exp64(xv, nm, &d);
  *e_out = e;
  const __mmask16 eq = _mm512_mask_cmp_ps_mask(mk, d, _mm512_setzero_ps(), _CMP_EQ_OQ);
  const __m512 v = _mm512_maskz_mov_ps((__mmask16)(mk & ~eq), e);
  if (tail) cairn__zr_acc_seq(v, acc);
  else cairn__zr_acc_pair(v, acc);
  *cnt = _mm512_mask_add_epi32(*cnt, eq, *cnt, _mm512_set1_epi32(1));
}

/* the lanes' sum of a count vector */
static inline long cairn__zr_hsum_epi32(__m512i c) { return _mm512_reduce_add_epi32(c); }

/* S − 1 for S = Σ_j e^(x_j − m), m the row max, n ≥ 1: the sum over the
 * non-maximal elements plus (count of maxima − 1). Stores
 * E = 2^64·e^(x_j − m) to y unless y is NULL (y may be x: x[i] is read
 * before y[i] is written). Prefetches x's next row and, for w not NULL,
 * w[0..min(n, CAIRN__ZR_PF_MAX)) (the caller's next output row, or this
 * row's when a later pass writes it). The sum's bits depend only on n, and
 * are the AVX2 tier's. */
static inline double cairn__zr_expsum_m1(const float *x, float *y, const float *w, size_t n, float m) {
  const __m512 nm = _mm512_set1_ps(-m);
  const __mmask16 all = (__mmask16)0xffff;
  __m512d acc = _mm512_setzero_pd();
  __m512i cnt = _mm512_setzero_si512();
  size_t i = 0;
  __m512 e0, e1;
  for (; i + 32 <= n; i += 32) {
    CAIRN__ZR_PF(x + n, i);
    CAIRN__ZR_PF(x + n, i + 16);
    if (w) {
      CAIRN__ZR_PF(w, i);
      CAIRN__ZR_PF(w, i + 16);
    }
    cairn__zr_expsum_step(_mm512_loadu_ps(x + i), nm, all, 0, &e0, &acc, &cnt);
    cairn__zr_expsum_step(_mm512_loadu_ps(x + i + 16), nm, all, 0, &e1, &acc, &cnt);
    if (y) _mm512_storeu_ps(y + i, e0), _mm512_storeu_ps(y + i + 16, e1);
  }
  for (; i + 16 <= n; i += 16) {
    CAIRN__ZR_PF(x + n, i);
    if (w) CAIRN__ZR_PF(w, i);
    cairn__zr_expsum_step(_mm512_loadu_ps(x + i), nm, all, 0, &e0, &acc, &cnt);
    if (y) _mm512_storeu_ps(y + i, e0);
  }
  if (i < n) {
    const __mmask16 mk = cairn__z_mask(n - i);
    cairn__zr_expsum_step(_mm512_maskz_loadu_ps(mk, x + i), nm, mk, 1, &e0, &acc, &cnt);
    if (y) _mm512_mask_storeu_ps(y + i, mk, e0);
  }
  return cairn__z_hsum_pd(acc) * CAIRN__ZR_2M64 + (double)(cairn__zr_hsum_epi32(cnt) - 1);
}

#endif
