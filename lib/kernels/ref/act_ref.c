/* Scalar reference activations: the specification the AVX2 kernels are
 * tested against. The transcendental ones are evaluated in double from the
 * float input and rounded once, so they are correctly rounded but for rare
 * double-rounding ties; the purely arithmetic ones use float operations in a
 * fixed order that the AVX2 versions repeat bit for bit. y may be x and dx
 * may be dy (each element is read before it is written). */
#include "config.h"

#include <math.h>

#include "kernels/kernels.h"

/* y = x > 0 ? x : 0 (NaN is kept, so a diverged net stays visibly NaN) */
void cairn_relu_fwd_ref(const float *x, float *y, size_t n) {
  for (size_t i = 0; i < n; i++) y[i] = (x[i] > 0.0f || isnan(x[i])) ? x[i] : 0.0f;
}

/* dx = x > 0 ? dy : 0 */
void cairn_relu_bwd_ref(const float *x, const float *dy, float *dx, size_t n) {
  for (size_t i = 0; i < n; i++) dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

/* y = x > 0 ? x : α·x */
void cairn_leaky_relu_fwd_ref(const float *x, float *y, size_t n, float alpha) {
  for (size_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : alpha * x[i];
}

/* dx = x > 0 ? dy : α·dy */
void cairn_leaky_relu_bwd_ref(const float *x, const float *dy, float *dx, size_t n, float alpha) {
  for (size_t i = 0; i < n; i++) dx[i] = x[i] > 0.0f ? dy[i] : alpha * dy[i];
}

/* σ(x) = 1/(1 + e^−x) = e^x/(1 + e^x): with e = e^−|x| both forms are one
 * division and neither subtracts, so σ keeps its relative accuracy for
 * x → −∞ (σ(x) ≈ e^x, down to the subnormals). */
static double sigmoid_d(double x) {
  const double e = exp(-fabs(x));
  return (x < 0 ? e : 1.0) / (1.0 + e);
}

/* y = σ(x) */
void cairn_sigmoid_fwd_ref(const float *x, float *y, size_t n) {
  for (size_t i = 0; i < n; i++) y[i] = (float)sigmoid_d(x[i]);
}

/* dx = dy·(y·(1 − y)) */
void cairn_sigmoid_bwd_ref(const float *y, const float *dy, float *dx, size_t n) {
  for (size_t i = 0; i < n; i++) dx[i] = dy[i] * (y[i] * (1.0f - y[i]));
}

/* y = tanh x */
void cairn_tanh_fwd_ref(const float *x, float *y, size_t n) {
  for (size_t i = 0; i < n; i++) y[i] = (float)tanh((double)x[i]);
}

/* dx = dy·((1 − y)(1 + y)): the factored form keeps relative accuracy as
 * |y| → 1, where 1 − y² would cancel. */
void cairn_tanh_bwd_ref(const float *y, const float *dy, float *dx, size_t n) {
  for (size_t i = 0; i < n; i++) dx[i] = dy[i] * ((1.0f - y[i]) * (1.0f + y[i]));
}

#define SQRT1_2 0.70710678118654752440      /* 1/√2 */
#define INV_SQRT_2PI 0.39894228040143267794 /* 1/√(2π) */

/* x clamped to [lo, hi]; NaN stays NaN (both compares are false). */
static double clampd(double x, double lo, double hi) { return x < lo ? lo : x > hi ? hi : x; }

/* Φ(x) = ½·erfc(−x/√2): erfc, unlike 1 + erf, has no cancellation for
 * x ≪ 0, where Φ(x) is tiny. */
static double ncdf(double x) { return 0.5 * erfc(-x * SQRT1_2); }

/* gelu(x) = x·Φ(x); gelu(−inf) = −0, the limit (not −inf·0). */
void cairn_gelu_fwd_ref(const float *x, float *y, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const double v = clampd(x[i], -40.0, HUGE_VAL);
    y[i] = (float)(v * ncdf(v));
  }
}

/* gelu'(x) = Φ(x) + x·φ(x),  φ(x) = e^(−x²/2)/√(2π); ±inf give the limits. */
void cairn_gelu_bwd_ref(const float *x, const float *dy, float *dx, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const double v = clampd(x[i], -40.0, 40.0);
    const double d = ncdf(v) + v * exp(-0.5 * v * v) * INV_SQRT_2PI;
    dx[i] = (float)(dy[i] * d);
  }
}

/* gelu_tanh(x) = x/2·(1 + tanh v),  v = √(2/π)·(x + 0.044715·x³)
 *             = x·σ(2v):  1 + tanh v = 2σ(2v) does not cancel for x ≪ 0.
 * x is clamped to ≥ −20, where the result is already −0 in float, so that
 * x = −inf gives −0 rather than −inf·0. */
#define GT_C1 1.5957691216057308   /* 2·√(2/π) */
#define GT_C3 0.071354816272842805 /* 2·√(2/π)·0.044715 */

void cairn_gelu_tanh_fwd_ref(const float *x, float *y, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const double v = clampd(x[i], -20.0, HUGE_VAL);
    y[i] = (float)(v * sigmoid_d(v * (GT_C1 + GT_C3 * v * v)));
  }
}

/* d/dx x·σ(w) = σ(w) + x·σ(w)(1 − σ(w))·w',  w = 2v,  w' = 2√(2/π)(1 + 3·0.044715·x²);
 * σ(1 − σ) = e/(1 + e)² with e = e^−|w| (no 1 − σ cancellation).
 * |x| > 20 gives exactly 0 or 1 in float; x is clamped there for ±inf. */
void cairn_gelu_tanh_bwd_ref(const float *x, const float *dy, float *dx, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const double v = clampd(x[i], -20.0, 20.0);
    const double w = v * (GT_C1 + GT_C3 * v * v);
    const double e = exp(-fabs(w));
    const double s = (w < 0 ? e : 1.0) / (1.0 + e);
    const double d = s + v * (GT_C1 + 3.0 * GT_C3 * v * v) * (e / ((1.0 + e) * (1.0 + e)));
    dx[i] = (float)(dy[i] * d);
  }
}
