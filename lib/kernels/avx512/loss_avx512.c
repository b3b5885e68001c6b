/* AVX-512 loss kernels: the AVX2 tier's formulas and passes
 * (lib/kernels/avx2/loss_avx2.c) at sixteen lanes. The scalar
 * specification, with the derivation of each formula, is
 * lib/kernels/ref/loss_ref.c. Losses are accumulated in double; gradients
 * are formed in float. dx may be NULL (loss only) and may alias x or the
 * labels: every pass reads element i before writing dx[i]. */
#include "config.h"

#include <math.h>

#include "kernels/avx512/rowmath_avx512.h"
#include "kernels/avx512/vecmath_avx512.h"
#include "kernels/kernels.h"

#define ALL16 ((__mmask16)0xffff)

/* lse(x) − x_l = log1p(S − 1) + (m − x_l);  dx = scale·(e^(x − m)/S − onehot(l)),
 * at l: ((e_l − 1) − (S − 1))/S. The exp pass leaves E = 2^64·e^(x − m) in
 * dx (rowmath_avx512.h: the AVX2 tier's passes and bits), the second pass
 * takes out 2^−64 first, then the scale (scale/S may be any float). */
double cairn_sparse_xent_row_avx512(const float *x, int32_t label, float *dx, size_t n, float scale) {
  if (n == 0) return 0.0;
  const float m = cairn__zr_max(x, n);
  const float xl = x[label];
  const double sm1 = cairn__zr_expsum_m1(x, dx, dx && dx != x ? dx + n : NULL, n, m);
  const double s = 1.0 + sm1;
  const double loss = log1p(sm1) + ((double)m - (double)xl);
  if (dx) {
    const double el = (double)dx[label] * CAIRN__ZR_2M64;
    const __m512 c = _mm512_set1_ps((float)((double)scale / s));
    const __m512 f = _mm512_set1_ps((float)CAIRN__ZR_2M64);
#define CAIRN__P(v) _mm512_mul_ps(_mm512_mul_ps(v, f), c)
    CAIRN__AVX512_MAP1(dx, dx, n, CAIRN__P);
#undef CAIRN__P
    dx[label] = (float)((double)scale * ((el - 1.0) - sm1) / s);
  }
  return loss;
}

/* acc[0] += Σ z, acc[1] += Σ z·(m − x) (exact products in double; z = 0
 * terms count as 0, also for x = −inf), and the row exp-sum step (E to *e),
 * each sum in the AVX2 tier's order: that tier adds eight floats per step,
 * so each 8-lane accumulator here takes the low eight, then the high
 * eight. mk: the element lanes. */
CAIRN__ZINLINE void xent_step(__m512 xv, __m512 zv, __m512 nm, __m512d m, __mmask16 mk, __m512 *e,
                              __m512d acc[3], __m512i *cnt) {
  const __m512d x0 = cairn__z_lo_pd(xv), x1 = cairn__z_hi_pd(xv);
  const __m512d z0 = cairn__z_lo_pd(zv), z1 = cairn__z_hi_pd(zv);
  acc[0] = _mm512_add_pd(_mm512_add_pd(acc[0], z0), z1);
  const __m512d zero = _mm512_setzero_pd();
  const __m512d a0 = _mm512_maskz_mul_pd(_mm512_cmp_pd_mask(z0, zero, _CMP_NEQ_UQ), z0, _mm512_sub_pd(m, x0));
  const __m512d a1 = _mm512_maskz_mul_pd(_mm512_cmp_pd_mask(z1, zero, _CMP_NEQ_UQ), z1, _mm512_sub_pd(m, x1));
  acc[1] = _mm512_add_pd(_mm512_add_pd(acc[1], a0), a1);
  cairn__zr_expsum_step(xv, nm, mk, 1, e, &acc[2], cnt);
}

/* Σ z·(lse(x) − x) = Z·log1p(S − 1) + Σ z·(m − x);
 * dx = scale·((e·Z − z) − z·(S − 1))/S. The exp pass leaves E = 2^64·e in
 * dx unless dx is the label array z (which the gradient pass still reads);
 * then the gradient pass recomputes E. Both give the same bits, and the
 * AVX2 tier's. The exp pass prefetches the next rows of x and z. */
double cairn_xent_row_avx512(const float *x, const float *z, float *dx, size_t n, float scale) {
  if (n == 0) return 0.0;
  const float m = cairn__zr_max(x, n);
  const __m512 nm = _mm512_set1_ps(-m);
  const __m512d md = _mm512_set1_pd((double)m);
  float *const ey = dx && (const float *)dx != z ? dx : NULL;
  __m512d acc[3] = {_mm512_setzero_pd(), _mm512_setzero_pd(), _mm512_setzero_pd()};
  __m512i cnt = _mm512_setzero_si512();
  size_t i = 0;
  __m512 e;
  for (; i + 16 <= n; i += 16) {
    CAIRN__ZR_PF(x + n, i);
    CAIRN__ZR_PF(z + n, i);
    xent_step(_mm512_loadu_ps(x + i), _mm512_loadu_ps(z + i), nm, md, ALL16, &e, acc, &cnt);
    if (ey) _mm512_storeu_ps(ey + i, e);
  }
  if (i < n) {
    const __mmask16 mk = cairn__z_mask(n - i);
    xent_step(_mm512_maskz_loadu_ps(mk, x + i), _mm512_maskz_loadu_ps(mk, z + i), nm, md, mk, &e, acc, &cnt);
    if (ey) _mm512_mask_storeu_ps(ey + i, mk, e);
  }
  const double sm1 = cairn__z_hsum_pd(acc[2]) * CAIRN__ZR_2M64 + (double)(cairn__zr_hsum_epi32(cnt) - 1);
  const double zs = cairn__z_hsum_pd(acc[0]);
  const double a = cairn__z_hsum_pd(acc[1]);
  const double s = 1.0 + sm1;
  if (dx) {
    const __m512 vz = _mm512_set1_ps((float)zs);
    const __m512 vsm1 = _mm512_set1_ps((float)sm1);
    const __m512 c = _mm512_set1_ps((float)((double)scale / s));
    const __m512 f = _mm512_set1_ps((float)CAIRN__ZR_2M64);
#define CAIRN__G(ev, zv) \
  _mm512_mul_ps(_mm512_fnmadd_ps(zv, vsm1, _mm512_fmsub_ps(_mm512_mul_ps(ev, f), vz, zv)), c)
#define CAIRN__GX(xv, zv) CAIRN__G(cairn__zr_exp64(xv, nm, &dd), zv)
    __m512 dd;
    if (ey) CAIRN__AVX512_MAP2(ey, z, dx, n, CAIRN__G);
    else CAIRN__AVX512_MAP2(x, z, dx, n, CAIRN__GX);
#undef CAIRN__GX
#undef CAIRN__G
  }
  return zs * log1p(sm1) + a;
}

/* One vector of sigmoid xent: the loss terms max(x,0) − x·z (in double,
 * where x·z is exact) + log1p(e^−|x|) summed into lo/hi over the element
 * lanes mk, and σ(x) − z returned. One reciprocal serves σ and the log1p
 * correction. */
CAIRN__ZINLINE __m512 sigxent16(__m512 x, __m512 z, __mmask16 mk, __m512d *lo, __m512d *hi) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 e = cairn__z_exp_negabs(x); /* e^−|x| */
  const __m512 u = _mm512_add_ps(one, e);
  const __m512 r = cairn__z_rcp1(u);
  const __m512 l = _mm512_maskz_mov_ps(mk, cairn__z_log1p_pos_r(e, u, r));
  const __m512d zero = _mm512_setzero_pd();
  const __m512d x0 = cairn__z_lo_pd(x), x1 = cairn__z_hi_pd(x);
  const __m512d z0 = cairn__z_lo_pd(z), z1 = cairn__z_hi_pd(z);
  const __m512d t0 = _mm512_fnmadd_pd(x0, z0, _mm512_max_pd(x0, zero));
  const __m512d t1 = _mm512_fnmadd_pd(x1, z1, _mm512_max_pd(x1, zero));
  *lo = _mm512_add_pd(*lo, _mm512_add_pd(t0, cairn__z_lo_pd(l)));
  *hi = _mm512_add_pd(*hi, _mm512_add_pd(t1, cairn__z_hi_pd(l)));
  const __m512 num = _mm512_mask_mov_ps(one, cairn__z_signs(x), e);
  return _mm512_sub_ps(cairn__z_div_r(num, u, r), z);
}

/* Σ max(x,0) − x·z + log1p(e^−|x|);  dx = scale·(σ(x) − z) */
double cairn_sigmoid_xent_avx512(const float *x, const float *z, float *dx, size_t n, float scale) {
  const __m512 c = _mm512_set1_ps(scale);
  __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 g = sigxent16(_mm512_loadu_ps(x + i), _mm512_loadu_ps(z + i), ALL16, &lo, &hi);
    if (dx) _mm512_storeu_ps(dx + i, _mm512_mul_ps(g, c));
  }
  if (i < n) {
    const __mmask16 mk = cairn__z_mask(n - i);
    const __m512 g = sigxent16(_mm512_maskz_loadu_ps(mk, x + i), _mm512_maskz_loadu_ps(mk, z + i), mk, &lo, &hi);
    if (dx) _mm512_mask_storeu_ps(dx + i, mk, _mm512_mul_ps(g, c));
  }
  return cairn__z_hsum_pd(_mm512_add_pd(lo, hi));
}

/* One vector of mse: Σ (p − t)² into lo/hi, in double (p − t exact there). */
CAIRN__ZINLINE __m512 mse16(__m512 p, __m512 t, __m512d *lo, __m512d *hi) {
  const __m512d d0 = _mm512_sub_pd(cairn__z_lo_pd(p), cairn__z_lo_pd(t));
  const __m512d d1 = _mm512_sub_pd(cairn__z_hi_pd(p), cairn__z_hi_pd(t));
  *lo = _mm512_fmadd_pd(d0, d0, *lo);
  *hi = _mm512_fmadd_pd(d1, d1, *hi);
  return _mm512_sub_ps(p, t);
}

/* Σ (p − t)²;  dp = (p − t)·(2·scale), the reference's float operations */
double cairn_mse_avx512(const float *p, const float *t, float *dp, size_t n, float scale) {
  const __m512 c = _mm512_set1_ps(2.0f * scale);
  __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm_prefetch((const char *)(p + i) + 1024, _MM_HINT_T0);
    _mm_prefetch((const char *)(t + i) + 1024, _MM_HINT_T0);
    const __m512 d = mse16(_mm512_loadu_ps(p + i), _mm512_loadu_ps(t + i), &lo, &hi);
    if (dp) _mm512_storeu_ps(dp + i, _mm512_mul_ps(d, c));
  }
  if (i < n) {
    const __mmask16 mk = cairn__z_mask(n - i);
    const __m512 d = mse16(_mm512_maskz_loadu_ps(mk, p + i), _mm512_maskz_loadu_ps(mk, t + i), &lo, &hi);
    if (dp) _mm512_mask_storeu_ps(dp + i, mk, _mm512_mul_ps(d, c));
  }
  return cairn__z_hsum_pd(_mm512_add_pd(lo, hi));
}
