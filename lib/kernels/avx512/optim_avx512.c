/* AVX-512 optimizer updates, 16 floats at a time: the rules and their order
 * of lib/kernels/ref/optim_ref.c (TF 1.x's training_ops.cc), with the AVX2
 * tier's FMA contractions (lib/kernels/avx2/optim_avx2.c), so the two
 * vector tiers give the same bits.
 *
 * Square roots and divisions are the correctly rounded _mm512_sqrt_ps and
 * _mm512_div_ps. Adam's ε stays outside the square root, m/(√v + ε). An
 * RSQRT14 + Newton form was not taken: these updates read four arrays and
 * write three, and are bound by memory, not by the divider
 * (bench/RESULTS.md), so an approximation would cost accuracy for nothing.
 *
 * The last n % 16 elements go through the same arithmetic with masked
 * loads and stores; the masked-off lanes load 1 where they meet a square
 * root or a denominator, so they raise no floating-point exceptions. */
#include "config.h"

#include <immintrin.h>

#include "kernels/kernels.h"

static inline __mmask16 tail_mask(size_t r) { return (__mmask16)((1u << r) - 1u); }
/* p[i] where the mask is on, 1 elsewhere */
static inline __m512 load_or_one(__mmask16 k, const float *p) {
  return _mm512_mask_loadu_ps(_mm512_set1_ps(1.0f), k, p);
}

/* ---- SGD: w -= lr·g (one FMA) ---- */
void cairn_sgd_avx512(float *w, const float *g, size_t n, float lr) {
  const __m512 vlr = _mm512_set1_ps(lr);
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(w + i, _mm512_fnmadd_ps(_mm512_loadu_ps(g + i), vlr, _mm512_loadu_ps(w + i)));
  if (i < n) {
    const __mmask16 k = tail_mask(n - i);
    _mm512_mask_storeu_ps(w + i, k,
                          _mm512_fnmadd_ps(_mm512_maskz_loadu_ps(k, g + i), vlr, _mm512_maskz_loadu_ps(k, w + i)));
  }
}

/* ---- Momentum: a = μ·a + g;  w -= lr·a  or  w -= lr·g + lr·μ·a ---- */
static inline void momentum16(__m512 *w, __m512 *a, __m512 g, __m512 lr, __m512 mu, int nesterov) {
  const __m512 an = _mm512_fmadd_ps(*a, mu, g);
  *a = an;
  if (nesterov)
    *w = _mm512_sub_ps(*w, _mm512_fmadd_ps(g, lr, _mm512_mul_ps(_mm512_mul_ps(an, mu), lr)));
  else
    *w = _mm512_fnmadd_ps(an, lr, *w);
}

void cairn_momentum_avx512(float *w, float *a, const float *g, size_t n, float lr, float mu, int nesterov) {
  const __m512 vlr = _mm512_set1_ps(lr), vmu = _mm512_set1_ps(mu);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 wv = _mm512_loadu_ps(w + i), av = _mm512_loadu_ps(a + i);
    momentum16(&wv, &av, _mm512_loadu_ps(g + i), vlr, vmu, nesterov);
    _mm512_storeu_ps(a + i, av);
    _mm512_storeu_ps(w + i, wv);
  }
  if (i < n) {
    const __mmask16 k = tail_mask(n - i);
    __m512 wv = _mm512_maskz_loadu_ps(k, w + i), av = _mm512_maskz_loadu_ps(k, a + i);
    momentum16(&wv, &av, _mm512_maskz_loadu_ps(k, g + i), vlr, vmu, nesterov);
    _mm512_mask_storeu_ps(a + i, k, av);
    _mm512_mask_storeu_ps(w + i, k, wv);
  }
}

/* ---- Adam / AdamW ----
 * m += (g − m)·(1 − β1);  v += (g² − v)·(1 − β2)
 * w ← w − wd·w − lr_t·m / (√v + ε)   (decay skipped when wd == 0, as in ref) */
typedef struct {
  __m512 lr_t, c1, c2, eps, wd;
  int decay;
} adam_consts;

static inline void adam16(__m512 *w, __m512 *m, __m512 *v, __m512 g, const adam_consts *c) {
  const __m512 mn = _mm512_fmadd_ps(_mm512_sub_ps(g, *m), c->c1, *m);
  const __m512 vn = _mm512_fmadd_ps(_mm512_fmsub_ps(g, g, *v), c->c2, *v);
  *m = mn;
  *v = vn;
  const __m512 den = _mm512_add_ps(_mm512_sqrt_ps(vn), c->eps);
  const __m512 upd = _mm512_div_ps(_mm512_mul_ps(mn, c->lr_t), den);
  __m512 wv = *w;
  if (c->decay) wv = _mm512_fnmadd_ps(c->wd, *w, wv);
  *w = _mm512_sub_ps(wv, upd);
}

/* The loop of an update that reads g and updates w and two state arrays a
 * and b: STEP(&w, &a, &b, g, c) 16 floats at a time, then once on the
 * masked tail, where b, the array under the square root, is 1 in the
 * masked-off lanes. One body for Adam (a = m, b = v) and RMSProp (a = mom,
 * b = ms). */
#define UPDATE_W_A_B(STEP, w, a, b, g, n, c)                                                     \
  do {                                                                                           \
    size_t i = 0;                                                                                \
    for (; i + 16 <= (n); i += 16) {                                                             \
      __m512 wv = _mm512_loadu_ps((w) + i), av = _mm512_loadu_ps((a) + i);                       \
      __m512 bv = _mm512_loadu_ps((b) + i);                                                      \
      STEP(&wv, &av, &bv, _mm512_loadu_ps((g) + i), (c));                                        \
      _mm512_storeu_ps((a) + i, av);                                                             \
      _mm512_storeu_ps((b) + i, bv);                                                             \
      _mm512_storeu_ps((w) + i, wv);                                                             \
    }                                                                                            \
    if (i < (n)) {                                                                               \
      const __mmask16 k = tail_mask((n) - i);                                                    \
      __m512 wv = _mm512_maskz_loadu_ps(k, (w) + i), av = _mm512_maskz_loadu_ps(k, (a) + i);     \
      __m512 bv = load_or_one(k, (b) + i);                                                       \
      STEP(&wv, &av, &bv, _mm512_maskz_loadu_ps(k, (g) + i), (c));                               \
      _mm512_mask_storeu_ps((a) + i, k, av);                                                     \
      _mm512_mask_storeu_ps((b) + i, k, bv);                                                     \
      _mm512_mask_storeu_ps((w) + i, k, wv);                                                     \
    }                                                                                            \
  } while (0)

void cairn_adam_avx512(float *w, float *m, float *v, const float *g, size_t n, float lr_t, float b1, float b2,
                       float eps, float wd) {
  const adam_consts c = {_mm512_set1_ps(lr_t), _mm512_set1_ps(1.0f - b1), _mm512_set1_ps(1.0f - b2),
                         _mm512_set1_ps(eps),  _mm512_set1_ps(wd),        wd != 0.0f};
  UPDATE_W_A_B(adam16, w, m, v, g, n, &c);
}

/* ---- RMSProp ----
 * ms += (g² − ms)·(1 − ρ);  mom = μ·mom + lr·g / √(ms + ε);  w -= mom */
typedef struct {
  __m512 lr, c, mu, eps;
} rmsprop_consts;

static inline void rmsprop16(__m512 *w, __m512 *mom, __m512 *ms, __m512 g, const rmsprop_consts *c) {
  const __m512 msn = _mm512_fmadd_ps(_mm512_fmsub_ps(g, g, *ms), c->c, *ms);
  const __m512 q = _mm512_div_ps(_mm512_mul_ps(g, c->lr), _mm512_sqrt_ps(_mm512_add_ps(msn, c->eps)));
  const __m512 momn = _mm512_fmadd_ps(*mom, c->mu, q);
  *ms = msn;
  *mom = momn;
  *w = _mm512_sub_ps(*w, momn);
}

void cairn_rmsprop_avx512(float *w, float *ms, float *mom, const float *g, size_t n, float lr, float rho,
                          float mu, float eps) {
  const rmsprop_consts c = {_mm512_set1_ps(lr), _mm512_set1_ps(1.0f - rho), _mm512_set1_ps(mu),
                            _mm512_set1_ps(eps)};
  UPDATE_W_A_B(rmsprop16, w, mom, ms, g, n, &c);
}

/* ---- Adagrad: acc += g²;  w -= lr·g / √acc ---- */
static inline void adagrad16(__m512 *w, __m512 *acc, __m512 g, __m512 lr) {
  const __m512 an = _mm512_fmadd_ps(g, g, *acc);
  *acc = an;
  *w = _mm512_sub_ps(*w, _mm512_div_ps(_mm512_mul_ps(g, lr), _mm512_sqrt_ps(an)));
}

void cairn_adagrad_avx512(float *w, float *acc, const float *g, size_t n, float lr) {
  const __m512 vlr = _mm512_set1_ps(lr);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 wv = _mm512_loadu_ps(w + i), av = _mm512_loadu_ps(acc + i);
    adagrad16(&wv, &av, _mm512_loadu_ps(g + i), vlr);
    _mm512_storeu_ps(acc + i, av);
    _mm512_storeu_ps(w + i, wv);
  }
  if (i < n) {
    const __mmask16 k = tail_mask(n - i);
    __m512 wv = _mm512_maskz_loadu_ps(k, w + i), av = load_or_one(k, acc + i);
    adagrad16(&wv, &av, _mm512_maskz_loadu_ps(k, g + i), vlr);
    _mm512_mask_storeu_ps(acc + i, k, av);
    _mm512_mask_storeu_ps(w + i, k, wv);
  }
}
