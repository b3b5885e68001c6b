/* AVX2+FMA loss kernels. The scalar specification, with the derivation of
 * each formula, is lib/kernels/ref/loss_ref.c. Losses are accumulated in
 * double; gradients are formed in float. dx may be NULL (loss only) and may
 * alias x or the labels: every pass reads element i before writing dx[i],
 * and the exponentials are recomputed rather than kept in dx. */
#include "config.h"

#include <math.h>

#include "kernels/avx2/rowmath_avx2.h"
#include "kernels/avx2/vecmath_avx2.h"
#include "kernels/kernels.h"

/* lse(x) − x_l = log1p(S − 1) + (m − x_l),  S = Σ e^(x − m), m = max x
 * dx = scale·(e^(x − m)/S − onehot(l));  at l: p_l − 1 = ((e_l − 1) − (S − 1))/S
 * The exp pass leaves E = 2^64·e^(x − m) in dx (x[i] is read before dx[i]
 * is written, so dx may be x; rowmath_avx2.h) and a second pass over the
 * row, in L1 by then, scales it: one exponential per element. The 2^−64
 * comes first (exact unless e is subnormal), then the scale: scale/S may be
 * any float, which 2^−64 would take out of range. */
double cairn_sparse_xent_row_avx2(const float *x, int32_t label, float *dx, size_t n, float scale) {
  if (n == 0) return 0.0;
  const float m = cairn__r_max(x, n);
  const float xl = x[label];
  const double sm1 = cairn__r_expsum_m1(x, dx, dx && dx != x ? dx + n : NULL, n, m);
  const double s = 1.0 + sm1;
  const double loss = log1p(sm1) + ((double)m - (double)xl);
  if (dx) {
    /* e_l as the vector pass computed it (1 when x_l is a maximum) */
    const double el = (double)dx[label] * CAIRN__R_2M64;
    const __m256 c = _mm256_set1_ps((float)((double)scale / s));
    const __m256 f = _mm256_set1_ps((float)CAIRN__R_2M64);
#define CAIRN__P(v) _mm256_mul_ps(_mm256_mul_ps(v, f), c)
    CAIRN__AVX2_MAP1(dx, dx, n, CAIRN__P);
#undef CAIRN__P
    dx[label] = (float)((double)scale * ((el - 1.0) - sm1) / s);
  }
  return loss;
}

/* One vector of the xent exp pass: Z += Σ z, A += Σ z·(m − x) (exact
 * products in double), and the row exp-sum step of rowmath_avx2.h (E to *e). */
CAIRN__VINLINE void xent_step(__m256 xv, __m256 zv, __m256 nm, __m256d m, __m256 mkf, int tail, __m256 *e,
                              __m256d acc[6], __m256i *cnt) {
  const __m256d x0 = _mm256_cvtps_pd(_mm256_castps256_ps128(xv));
  const __m256d x1 = _mm256_cvtps_pd(_mm256_extractf128_ps(xv, 1));
  const __m256d z0 = _mm256_cvtps_pd(_mm256_castps256_ps128(zv));
  const __m256d z1 = _mm256_cvtps_pd(_mm256_extractf128_ps(zv, 1));
  acc[2] = _mm256_add_pd(acc[2], z0);
  acc[3] = _mm256_add_pd(acc[3], z1);
  /* z = 0 terms count as 0, also for x = −inf (a masked class) */
  const __m256d zero = _mm256_setzero_pd();
  acc[4] = _mm256_add_pd(acc[4], _mm256_and_pd(_mm256_mul_pd(z0, _mm256_sub_pd(m, x0)),
                                               _mm256_cmp_pd(z0, zero, _CMP_NEQ_UQ)));
  acc[5] = _mm256_add_pd(acc[5], _mm256_and_pd(_mm256_mul_pd(z1, _mm256_sub_pd(m, x1)),
                                               _mm256_cmp_pd(z1, zero, _CMP_NEQ_UQ)));
  cairn__r_expsum_step(xv, nm, mkf, tail, e, &acc[0], &acc[1], cnt);
}

/* Σ z·(lse(x) − x) = Z·log1p(S − 1) + Σ z·(m − x),  Z = Σ z: two sums of
 * non-negative terms for z ≥ 0.
 * dx = scale·(p·Z − z) = scale·((e·Z − z) − z·(S − 1))/S,  e = e^(x − m):
 * for one-hot z at the row maximum e·Z − z = 0 exactly, and the gradient is
 * −(S − 1)/S with full relative accuracy, as in the sparse kernel.
 * The exp pass leaves E = 2^64·e in dx unless dx is the label array z
 * (which the gradient pass still reads); then the gradient pass recomputes
 * E. Both give the same bits. The exp pass prefetches the next rows of x
 * and z (rowmath_avx2.h). */
double cairn_xent_row_avx2(const float *x, const float *z, float *dx, size_t n, float scale) {
  if (n == 0) return 0.0;
  const float m = cairn__r_max(x, n);
  const __m256 nm = _mm256_set1_ps(-m);
  const __m256d md = _mm256_set1_pd((double)m);
  float *const ey = dx && (const float *)dx != z ? dx : NULL;
  const __m256 all = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
  __m256d acc[6];
  for (int k = 0; k < 6; k++) acc[k] = _mm256_setzero_pd();
  __m256i cnt = _mm256_setzero_si256();
  size_t i = 0;
  __m256 e;
  for (; i + 8 <= n; i += 8) {
    if (!(i & 15)) {
      CAIRN__ROW_PF(x + n, i);
      CAIRN__ROW_PF(z + n, i);
    }
    xent_step(_mm256_loadu_ps(x + i), _mm256_loadu_ps(z + i), nm, md, all, 0, &e, acc, &cnt);
    if (ey) _mm256_storeu_ps(ey + i, e);
  }
  if (i < n) {
    const __m256i mk = cairn__v_mask(n - i);
    xent_step(_mm256_maskload_ps(x + i, mk), _mm256_maskload_ps(z + i, mk), nm, md,
              _mm256_castsi256_ps(mk), 1, &e, acc, &cnt);
    if (ey) _mm256_maskstore_ps(ey + i, mk, e);
  }
  const double sm1 = cairn__v_hsum_pd(_mm256_add_pd(acc[0], acc[1])) * CAIRN__R_2M64 +
                     (double)(cairn__r_hsum_epi32(cnt) - 1);
  const double zs = cairn__v_hsum_pd(_mm256_add_pd(acc[2], acc[3]));
  const double a = cairn__v_hsum_pd(_mm256_add_pd(acc[4], acc[5]));
  const double s = 1.0 + sm1;
  if (dx) {
    const __m256 vz = _mm256_set1_ps((float)zs);
    const __m256 vsm1 = _mm256_set1_ps((float)sm1);
    const __m256 c = _mm256_set1_ps((float)((double)scale / s));
    const __m256 f = _mm256_set1_ps((float)CAIRN__R_2M64);
#define CAIRN__G(ev, zv) \
  _mm256_mul_ps(_mm256_fnmadd_ps(zv, vsm1, _mm256_fmsub_ps(_mm256_mul_ps(ev, f), vz, zv)), c)
#define CAIRN__GX(xv, zv) CAIRN__G(cairn__r_exp64(xv, nm, &dd), zv)
    __m256 dd;
    if (ey) CAIRN__AVX2_MAP2(ey, z, dx, n, CAIRN__G);
    else CAIRN__AVX2_MAP2(x, z, dx, n, CAIRN__GX);
#undef CAIRN__GX
#undef CAIRN__G
  }
  return zs * log1p(sm1) + a;
}

/* One vector of sigmoid xent: returns the loss terms
 * max(x,0) − x·z + log1p(e^−|x|) summed into lo/hi (masked lanes give 0: x = z = 0
 * there, and the log1p term is masked), and σ(x) − z. max(x,0) − x·z is
 * formed in double, where x·z is exact: it cancels when x(1 − z) is small. */
CAIRN__VINLINE __m256 sigxent8(__m256 x, __m256 z, __m256 mkf, __m256d *lo, __m256d *hi) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 e = cairn__v_exp_nonpos(_mm256_or_ps(x, _mm256_set1_ps(-0.0f))); /* e^−|x| */
  const __m256 u = _mm256_add_ps(one, e);
  const __m256 r = cairn__v_rcp1(u);
  const __m256 l = _mm256_and_ps(cairn__v_log1p_pos_r(e, u, r), mkf);
  const __m256d zero = _mm256_setzero_pd();
  const __m256d x0 = _mm256_cvtps_pd(_mm256_castps256_ps128(x));
  const __m256d x1 = _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1));
  const __m256d z0 = _mm256_cvtps_pd(_mm256_castps256_ps128(z));
  const __m256d z1 = _mm256_cvtps_pd(_mm256_extractf128_ps(z, 1));
  const __m256d t0 = _mm256_fnmadd_pd(x0, z0, _mm256_max_pd(x0, zero));
  const __m256d t1 = _mm256_fnmadd_pd(x1, z1, _mm256_max_pd(x1, zero));
  *lo = _mm256_add_pd(*lo, _mm256_add_pd(t0, _mm256_cvtps_pd(_mm256_castps256_ps128(l))));
  *hi = _mm256_add_pd(*hi, _mm256_add_pd(t1, _mm256_cvtps_pd(_mm256_extractf128_ps(l, 1))));
  /* x's sign bit is the mask, as in cairn__v_sigmoid: −0 takes e = 1 */
  const __m256 num = _mm256_blendv_ps(one, e, x);
  return _mm256_sub_ps(cairn__v_div_r(num, u, r), z);
}

/* Σ max(x,0) − x·z + log1p(e^−|x|);  dx = scale·(σ(x) − z) */
double cairn_sigmoid_xent_avx2(const float *x, const float *z, float *dx, size_t n, float scale) {
  const __m256 c = _mm256_set1_ps(scale);
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = sigxent8(_mm256_loadu_ps(x + i), _mm256_loadu_ps(z + i),
                              _mm256_castsi256_ps(_mm256_set1_epi32(-1)), &lo, &hi);
    if (dx) _mm256_storeu_ps(dx + i, _mm256_mul_ps(g, c));
  }
  if (i < n) {
    const __m256i mk = cairn__v_mask(n - i);
    const __m256 g = sigxent8(_mm256_maskload_ps(x + i, mk), _mm256_maskload_ps(z + i, mk),
                              _mm256_castsi256_ps(mk), &lo, &hi);
    if (dx) _mm256_maskstore_ps(dx + i, mk, _mm256_mul_ps(g, c));
  }
  return cairn__v_hsum_pd(_mm256_add_pd(lo, hi));
}

/* One vector of mse: Σ (p − t)² into lo/hi, in double (p − t exact there). */
CAIRN__VINLINE __m256 mse8(__m256 p, __m256 t, __m256d *lo, __m256d *hi) {
  const __m256d d0 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(p)),
                                   _mm256_cvtps_pd(_mm256_castps256_ps128(t)));
  const __m256d d1 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(p, 1)),
                                   _mm256_cvtps_pd(_mm256_extractf128_ps(t, 1)));
  *lo = _mm256_fmadd_pd(d0, d0, *lo);
  *hi = _mm256_fmadd_pd(d1, d1, *hi);
  return _mm256_sub_ps(p, t);
}

/* Σ (p − t)²;  dp = (p − t)·(2·scale), the reference's float operations */
double cairn_mse_avx2(const float *p, const float *t, float *dp, size_t n, float scale) {
  const __m256 c = _mm256_set1_ps(2.0f * scale);
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    /* software prefetch, as for sum (math_avx2.c): results unchanged */
    if (!(i & 15)) {
      _mm_prefetch((const char *)(p + i) + 1024, _MM_HINT_T0);
      _mm_prefetch((const char *)(t + i) + 1024, _MM_HINT_T0);
    }
    const __m256 d = mse8(_mm256_loadu_ps(p + i), _mm256_loadu_ps(t + i), &lo, &hi);
    if (dp) _mm256_storeu_ps(dp + i, _mm256_mul_ps(d, c));
  }
  if (i < n) {
    const __m256i mk = cairn__v_mask(n - i);
    const __m256 d = mse8(_mm256_maskload_ps(p + i, mk), _mm256_maskload_ps(t + i, mk), &lo, &hi);
    if (dp) _mm256_maskstore_ps(dp + i, mk, _mm256_mul_ps(d, c));
  }
  return cairn__v_hsum_pd(_mm256_add_pd(lo, hi));
}
