/* Row helpers shared by the reference softmax and loss kernels. */
#ifndef CAIRN_ROWS_REF_H
#define CAIRN_ROWS_REF_H

#include <math.h>
#include <stddef.h>

/* Index of the first maximum of x[0..n), n ≥ 1 (NaN never wins a compare). */
static inline size_t argmax(const float *x, size_t n) {
  size_t k = 0;
  for (size_t i = 1; i < n; i++)
    if (x[i] > x[k]) k = i;
  return k;
}

/* S − 1 = Σ_{j ≠ k} e^(x_j − m) for the row max m = x[k]: summing the other
 * terms alone (e^(x_k − m) = 1) gives log S = log1p(S − 1) without the
 * cancellation of log(1 + tiny) when one logit dominates. x_j − m is exact in
 * double. */
static inline double expsum_m1(const float *x, size_t n, size_t k) {
  const double m = x[k];
  double s = 0.0;
  for (size_t j = 0; j < n; j++)
    if (j != k) s += exp((double)x[j] - m);
  return s;
}

#endif
