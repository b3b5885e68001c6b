/* AVX2+FMA optimizer updates, 8 floats at a time; the rules and their order
 * are those of lib/kernels/ref/optim_ref.c (TF 1.x's training_ops.cc).
 *
 * What differs from the reference: products that feed an addition are
 * contracted into one FMA (a single rounding instead of two), e.g.
 * m + (g − m)·c1, g·g − v and μ·a + g. Square roots and divisions are the
 * correctly rounded _mm256_sqrt_ps / _mm256_div_ps, never rsqrt/rcp
 * approximations, so every output stays within a few ulps of the reference.
 *
 * The last n % 8 elements go through the same arithmetic with masked loads
 * and stores (_mm256_maskload_ps / _mm256_maskstore_ps), so an element's
 * result never depends on its position or on n, nothing past n is read or
 * written, and pointers need no alignment. Masked-off lanes get benign
 * values (1 under square roots and in denominators) so they raise no
 * floating-point exceptions either. */
#include "config.h"

#include <immintrin.h>

#include "kernels/kernels.h"

/* Lanes 0..r-1 on (r in 0..8). */
static inline __m256i tail_mask(size_t r) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)r), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* x where the mask is on, 1 elsewhere. */
static inline __m256 on_or_one(__m256 x, __m256i mask) {
  return _mm256_blendv_ps(_mm256_set1_ps(1.0f), x, _mm256_castsi256_ps(mask));
}

/* ---- SGD: w -= lr·g  (one FMA: w − g·lr rounded once) ---- */
void cairn_sgd_avx2(float *w, const float *g, size_t n, float lr) {
  const __m256 vlr = _mm256_set1_ps(lr);
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(w + i, _mm256_fnmadd_ps(_mm256_loadu_ps(g + i), vlr, _mm256_loadu_ps(w + i)));
  if (i < n) {
    __m256i k = tail_mask(n - i);
    __m256 r = _mm256_fnmadd_ps(_mm256_maskload_ps(g + i, k), vlr, _mm256_maskload_ps(w + i, k));
    _mm256_maskstore_ps(w + i, k, r);
  }
}

/* ---- Momentum: a = μ·a + g;  w -= lr·a  or  w -= lr·g + lr·μ·a ---- */
static inline void momentum8(__m256 *w, __m256 *a, __m256 g, __m256 lr, __m256 mu, int nesterov) {
  __m256 an = _mm256_fmadd_ps(*a, mu, g);
  *a = an;
  if (nesterov)
    *w = _mm256_sub_ps(*w, _mm256_fmadd_ps(g, lr, _mm256_mul_ps(_mm256_mul_ps(an, mu), lr)));
  else
    *w = _mm256_fnmadd_ps(an, lr, *w);
}

void cairn_momentum_avx2(float *w, float *a, const float *g, size_t n, float lr, float mu,
                         int nesterov) {
  const __m256 vlr = _mm256_set1_ps(lr), vmu = _mm256_set1_ps(mu);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 wv = _mm256_loadu_ps(w + i), av = _mm256_loadu_ps(a + i);
    momentum8(&wv, &av, _mm256_loadu_ps(g + i), vlr, vmu, nesterov);
    _mm256_storeu_ps(a + i, av);
    _mm256_storeu_ps(w + i, wv);
  }
  if (i < n) {
    __m256i k = tail_mask(n - i);
    __m256 wv = _mm256_maskload_ps(w + i, k), av = _mm256_maskload_ps(a + i, k);
    momentum8(&wv, &av, _mm256_maskload_ps(g + i, k), vlr, vmu, nesterov);
    _mm256_maskstore_ps(a + i, k, av);
    _mm256_maskstore_ps(w + i, k, wv);
  }
}

/* ---- Adam / AdamW ----
 * m += (g − m)·(1 − β1);  v += (g² − v)·(1 − β2)
 * w ← w − wd·w − lr_t·m / (√v + ε)   (decay skipped when wd == 0, as in ref) */
typedef struct {
  __m256 lr_t, c1, c2, eps, wd;
  int decay;
} adam_consts;

static inline void adam8(__m256 *w, __m256 *m, __m256 *v, __m256 g, const adam_consts *c) {
  __m256 mn = _mm256_fmadd_ps(_mm256_sub_ps(g, *m), c->c1, *m);
  __m256 vn = _mm256_fmadd_ps(_mm256_fmsub_ps(g, g, *v), c->c2, *v);
  *m = mn;
  *v = vn;
  __m256 den = _mm256_add_ps(_mm256_sqrt_ps(vn), c->eps);
  __m256 upd = _mm256_div_ps(_mm256_mul_ps(mn, c->lr_t), den);
  __m256 wv = *w;
  if (c->decay) wv = _mm256_fnmadd_ps(c->wd, *w, wv);
  *w = _mm256_sub_ps(wv, upd);
}

/* The loop of an update that reads g and updates w and two state arrays a
 * and b: STEP(&w, &a, &b, g, c) 8 floats at a time, then once on the
 * masked tail, where b, the array under the square root, is 1 in the
 * masked-off lanes. One body for Adam (a = m, b = v) and RMSProp (a = mom,
 * b = ms). */
#define UPDATE_W_A_B(STEP, w, a, b, g, n, c)                                                    \
  do {                                                                                          \
    size_t i = 0;                                                                               \
    for (; i + 8 <= (n); i += 8) {                                                              \
      __m256 wv = _mm256_loadu_ps((w) + i), av = _mm256_loadu_ps((a) + i);                      \
      __m256 bv = _mm256_loadu_ps((b) + i);                                                     \
      STEP(&wv, &av, &bv, _mm256_loadu_ps((g) + i), (c));                                       \
      _mm256_storeu_ps((a) + i, av);                                                            \
      _mm256_storeu_ps((b) + i, bv);                                                            \
      _mm256_storeu_ps((w) + i, wv);                                                            \
    }                                                                                           \
    if (i < (n)) {                                                                              \
      __m256i k = tail_mask((n) - i);                                                           \
      __m256 wv = _mm256_maskload_ps((w) + i, k), av = _mm256_maskload_ps((a) + i, k);          \
      __m256 bv = on_or_one(_mm256_maskload_ps((b) + i, k), k);                                 \
      STEP(&wv, &av, &bv, _mm256_maskload_ps((g) + i, k), (c));                                 \
      _mm256_maskstore_ps((a) + i, k, av);                                                      \
      _mm256_maskstore_ps((b) + i, k, bv);                                                      \
      _mm256_maskstore_ps((w) + i, k, wv);                                                      \
    }                                                                                           \
  } while (0)

void cairn_adam_avx2(float *w, float *m, float *v, const float *g, size_t n, float lr_t, float b1,
                     float b2, float eps, float wd) {
  adam_consts c = {_mm256_set1_ps(lr_t), _mm256_set1_ps(1.0f - b1), _mm256_set1_ps(1.0f - b2),
                   _mm256_set1_ps(eps), _mm256_set1_ps(wd), wd != 0.0f};
  UPDATE_W_A_B(adam8, w, m, v, g, n, &c);
}

/* ---- RMSProp ----
 * ms += (g² − ms)·(1 − ρ);  mom = μ·mom + lr·g / √(ms + ε);  w -= mom */
typedef struct {
  __m256 lr, c, mu, eps;
} rmsprop_consts;

static inline void rmsprop8(__m256 *w, __m256 *mom, __m256 *ms, __m256 g, const rmsprop_consts *c) {
  __m256 msn = _mm256_fmadd_ps(_mm256_fmsub_ps(g, g, *ms), c->c, *ms);
  __m256 q = _mm256_div_ps(_mm256_mul_ps(g, c->lr), _mm256_sqrt_ps(_mm256_add_ps(msn, c->eps)));
  __m256 momn = _mm256_fmadd_ps(*mom, c->mu, q);
  *ms = msn;
  *mom = momn;
  *w = _mm256_sub_ps(*w, momn);
}

void cairn_rmsprop_avx2(float *w, float *ms, float *mom, const float *g, size_t n, float lr,
                        float rho, float mu, float eps) {
  const rmsprop_consts c = {_mm256_set1_ps(lr), _mm256_set1_ps(1.0f - rho), _mm256_set1_ps(mu), _mm256_set1_ps(eps)};
  UPDATE_W_A_B(rmsprop8, w, mom, ms, g, n, &c);
}

/* ---- Adagrad: acc += g²;  w -= lr·g / √acc ---- */
static inline void adagrad8(__m256 *w, __m256 *acc, __m256 g, __m256 lr) {
  __m256 an = _mm256_fmadd_ps(g, g, *acc);
  *acc = an;
  *w = _mm256_sub_ps(*w, _mm256_div_ps(_mm256_mul_ps(g, lr), _mm256_sqrt_ps(an)));
}

void cairn_adagrad_avx2(float *w, float *acc, const float *g, size_t n, float lr) {
  const __m256 vlr = _mm256_set1_ps(lr);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 wv = _mm256_loadu_ps(w + i), av = _mm256_loadu_ps(acc + i);
    adagrad8(&wv, &av, _mm256_loadu_ps(g + i), vlr);
    _mm256_storeu_ps(acc + i, av);
    _mm256_storeu_ps(w + i, wv);
  }
  if (i < n) {
    __m256i k = tail_mask(n - i);
    __m256 wv = _mm256_maskload_ps(w + i, k);
    __m256 av = on_or_one(_mm256_maskload_ps(acc + i, k), k);
    adagrad8(&wv, &av, _mm256_maskload_ps(g + i, k), vlr);
    _mm256_maskstore_ps(acc + i, k, av);
    _mm256_maskstore_ps(w + i, k, wv);
  }
}
