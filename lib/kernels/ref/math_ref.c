/* Scalar reference elementwise math, softmax rows and vector helpers: the
 * specification the AVX2 kernels are tested against. exp and log are
 * evaluated in double and rounded once; row sums and reductions accumulate
 * in double, left to right. y may be x and dx may be dy. */
#include "config.h"

#include <math.h>

#include "kernels/kernels.h"
#include "kernels/ref/rows_ref.h"

/* y = e^x */
void cairn_exp_ref(const float *x, float *y, size_t n) {
  for (size_t i = 0; i < n; i++) y[i] = (float)exp((double)x[i]);
}

/* y = log x */
void cairn_log_ref(const float *x, float *y, size_t n) {
  for (size_t i = 0; i < n; i++) y[i] = (float)log((double)x[i]);
}


/* y = e^(x − m)/S,  m = max x,  S = Σ e^(x − m) */
void cairn_softmax_row_ref(const float *x, float *y, size_t n) {
  if (n == 0) return;
  const size_t k = argmax(x, n);
  const double m = x[k];
  const double s = 1.0 + expsum_m1(x, n, k);
  for (size_t i = 0; i < n; i++) y[i] = (float)(exp((double)x[i] - m) / s);
}

/* y = (x − m) − log S,  log S = log1p(S − 1) */
void cairn_log_softmax_row_ref(const float *x, float *y, size_t n) {
  if (n == 0) return;
  const size_t k = argmax(x, n);
  const double m = x[k];
  const double l = log1p(expsum_m1(x, n, k));
  for (size_t i = 0; i < n; i++) y[i] = (float)(((double)x[i] - m) - l);
}

/* dx = y ⊙ (dy − s),  s = Σ dy⊙y */
void cairn_softmax_bwd_row_ref(const float *y, const float *dy, float *dx, size_t n) {
  double s = 0.0;
  for (size_t i = 0; i < n; i++) s += (double)dy[i] * y[i];
  for (size_t i = 0; i < n; i++) dx[i] = (float)(y[i] * ((double)dy[i] - s));
}

/* dx = dy − e^y · Σ dy */
void cairn_log_softmax_bwd_row_ref(const float *y, const float *dy, float *dx, size_t n) {
  const double s = cairn_sum_ref(dy, n);
  for (size_t i = 0; i < n; i++) dx[i] = (float)(dy[i] - exp((double)y[i]) * s);
}

/* Σ x */
double cairn_sum_ref(const float *x, size_t n) {
  double s = 0.0;
  for (size_t i = 0; i < n; i++) s += x[i];
  return s;
}

/* Σ x² (each square exact in double) */
double cairn_sumsq_ref(const float *x, size_t n) {
  double s = 0.0;
  for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
  return s;
}

/* y += x */
void cairn_add_ref(const float *x, float *y, size_t n) {
  for (size_t i = 0; i < n; i++) y[i] += x[i];
}

/* x *= a */
void cairn_scale_ref(float a, float *x, size_t n) {
  for (size_t i = 0; i < n; i++) x[i] *= a;
}
