/* Scalar reference loss kernels: the specification the AVX2 kernels are
 * tested against. Everything is computed in double and rounded once;
 * losses return double. dx may be NULL (loss only) and may alias x or the
 * labels: each element is read before dx[i] is written, and the
 * exponentials are recomputed in the gradient pass rather than kept in dx.
 *
 * Softmax rows use m = max x (first index k) and S − 1 = Σ_{j≠k} e^(x_j − m),
 * summed without the term e^0 = 1, so that log S = log1p(S − 1) and
 * 1 − p_k = (S − 1)/S keep their relative accuracy when one logit dominates
 * (a confident, correct prediction: the common case late in training). */
#include "config.h"

#include <math.h>

#include "kernels/kernels.h"
#include "kernels/ref/rows_ref.h"

/* lse(x) − x_l = log1p(S − 1) + (m − x_l)   (two non-negative terms)
 * dx = scale·(p − onehot(l)),  p = e^(x − m)/S,
 * p_l − 1 = ((e_l − 1) − (S − 1))/S: e_l − 1 is exact (0 when l = k). */
double cairn_sparse_xent_row_ref(const float *x, int32_t label, float *dx, size_t n, float scale) {
  if (n == 0) return 0.0;
  const size_t k = argmax(x, n);
  const double m = x[k];
  const double xl = x[label];
  const double sm1 = expsum_m1(x, n, k);
  const double s = 1.0 + sm1;
  if (dx) {
    for (size_t i = 0; i < n; i++) {
      const double e = exp((double)x[i] - m);
      dx[i] = (float)(scale * ((size_t)label == i ? ((e - 1.0) - sm1) : e) / s);
    }
  }
  return log1p(sm1) + (m - xl);
}

/* Σ z·(lse(x) − x) = Z·log1p(S − 1) + Σ z·(m − x),  Z = Σ z
 * (for z ≥ 0 two sums of non-negative terms: no cancellation)
 * dx = scale·(p·Z − z) = scale·((e·Z − z) − z·(S − 1))/S,  e = e^(x − m):
 * for one-hot z at the max e·Z − z = 0 exactly and dx = −scale·(S − 1)/S. */
double cairn_xent_row_ref(const float *x, const float *z, float *dx, size_t n, float scale) {
  if (n == 0) return 0.0;
  const size_t k = argmax(x, n);
  const double m = x[k];
  const double sm1 = expsum_m1(x, n, k);
  const double s = 1.0 + sm1;
  double zs = 0.0, a = 0.0;
  for (size_t i = 0; i < n; i++) {
    zs += z[i];
    if (z[i] != 0.0f) a += z[i] * (m - x[i]); /* 0·(m − x) = 0 also for x = −inf */
  }
  if (dx) {
    for (size_t i = 0; i < n; i++) {
      const double e = exp((double)x[i] - m);
      dx[i] = (float)(scale * ((e * zs - z[i]) - z[i] * sm1) / s);
    }
  }
  return zs * log1p(sm1) + a;
}

/* Σ max(x,0) − x·z + log1p(e^−|x|)   (TF's stable sigmoid cross-entropy)
 * dx = scale·(σ(x) − z),  σ(x) = (x < 0 ? e : 1)/(1 + e),  e = e^−|x| */
double cairn_sigmoid_xent_ref(const float *x, const float *z, float *dx, size_t n, float scale) {
  double loss = 0.0;
  for (size_t i = 0; i < n; i++) {
    const double xi = x[i], zi = z[i];
    const double e = exp(-fabs(xi));
    const double sig = (xi < 0 ? e : 1.0) / (1.0 + e);
    loss += (fmax(xi, 0.0) - xi * zi) + log1p(e);
    if (dx) dx[i] = (float)(scale * (sig - zi));
  }
  return loss;
}

/* Σ (p − t)²;  dp = (p − t)·(2·scale) in float (the AVX2 kernel repeats
 * these operations bit for bit) */
double cairn_mse_ref(const float *p, const float *t, float *dp, size_t n, float scale) {
  double loss = 0.0;
  for (size_t i = 0; i < n; i++) {
    const double d = (double)p[i] - t[i];
    loss += d * d;
    if (dp) dp[i] = (p[i] - t[i]) * (2.0f * scale);
  }
  return loss;
}
