/* Scalar reference optimizer updates: the specification the AVX2 kernels are
 * tested against. Every rule is written in the order of TF 1.x's C++ kernels
 * (tensorflow/core/kernels/training_ops.cc, ApplyGradientDescent,
 * ApplyMomentum, ApplyAdam, ApplyRMSProp, ApplyAdagrad), in f32, one rounding
 * per operation (the file is built without -mfma and with -std=c11, so the
 * compiler does not contract a·b + c into an FMA).
 *
 * w, g and the slots are (n); w and the slots are updated in place; g is
 * read-only. */
#include "config.h"

#include <math.h>

#include "kernels/kernels.h"

/* w -= lr·g */
void cairn_sgd_ref(float *w, const float *g, size_t n, float lr) {
  for (size_t i = 0; i < n; i++) w[i] -= g[i] * lr;
}

/* a = μ·a + g;  w -= lr·a,  or (Nesterov) w -= lr·g + lr·μ·a  (a the new a) */
void cairn_momentum_ref(float *w, float *a, const float *g, size_t n, float lr, float mu,
                        int nesterov) {
  for (size_t i = 0; i < n; i++) {
    float ai = a[i] * mu + g[i];
    a[i] = ai;
    if (nesterov)
      w[i] -= g[i] * lr + ai * mu * lr;
    else
      w[i] -= ai * lr;
  }
}

/* m += (g − m)·(1 − β1)   (= β1·m + (1 − β1)·g, TF's form)
 * v += (g² − v)·(1 − β2)
 * w ← w − wd·w − lr_t·m / (√v + ε)     (wd = 0: plain Adam; wd > 0: AdamW)
 * lr_t is already bias-corrected by the caller. The decay term is skipped
 * when wd == 0 so that Adam never computes 0·w (NaN for an infinite w). */
void cairn_adam_ref(float *w, float *m, float *v, const float *g, size_t n, float lr_t, float b1,
                    float b2, float eps, float wd) {
  const float c1 = 1.0f - b1, c2 = 1.0f - b2;
  for (size_t i = 0; i < n; i++) {
    float gi = g[i];
    float mi = m[i] + (gi - m[i]) * c1;
    float vi = v[i] + (gi * gi - v[i]) * c2;
    m[i] = mi;
    v[i] = vi;
    float wi = w[i];
    if (wd != 0.0f) wi -= wd * w[i];
    w[i] = wi - (mi * lr_t) / (sqrtf(vi) + eps);
  }
}

/* ms += (g² − ms)·(1 − ρ)       (= ρ·ms + (1 − ρ)·g²)
 * mom = μ·mom + lr·g / √(ms + ε)
 * w -= mom */
void cairn_rmsprop_ref(float *w, float *ms, float *mom, const float *g, size_t n, float lr,
                       float rho, float mu, float eps) {
  const float c = 1.0f - rho;
  for (size_t i = 0; i < n; i++) {
    float gi = g[i];
    float msi = ms[i] + (gi * gi - ms[i]) * c;
    float momi = mom[i] * mu + (gi * lr) / sqrtf(msi + eps);
    ms[i] = msi;
    mom[i] = momi;
    w[i] -= momi;
  }
}

/* acc += g²;  w -= lr·g / √acc
 * (TF multiplies by rsqrt(acc); a true division differs by an ulp at most.) */
void cairn_adagrad_ref(float *w, float *acc, const float *g, size_t n, float lr) {
  for (size_t i = 0; i < n; i++) {
    float gi = g[i];
    float ai = acc[i] + gi * gi;
    acc[i] = ai;
    w[i] -= (gi * lr) / sqrtf(ai);
  }
}
