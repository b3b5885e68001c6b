/* Dense layer, activations, losses and accuracy: values against naive
 * double-precision references, gradients by central differences, bad input,
 * and bitwise determinism across thread counts. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "config.h"

#include <cblas.h>
#undef I /* cblas.h brings complex.h's I; a test below names a tensor I */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

#ifdef CAIRN_HAVE_OPENMP
#include <omp.h>
#endif

#include <cairn.h>
#include "gemm_impl.h"

TestSuite(nn, .timeout = 120);

static cairn_tensor *mk(int rank, int64_t d0, int64_t d1) {
  int64_t shape[2] = {d0, d1};
  cairn_tensor *t = NULL;
  cr_assert_eq(cairn_tensor_new(CAIRN_DTYPE_F32, rank, shape, &t), CAIRN_OK, "%s", cairn_errmsg());
  return t;
}

static cairn_tensor *mk_labels(int64_t n, int32_t classes, uint64_t seed) {
  cairn_tensor *t = NULL;
  cr_assert_eq(cairn_tensor_new(CAIRN_DTYPE_I32, 1, &n, &t), CAIRN_OK);
  cairn_rng r;
  cairn_rng_init(&r, seed, 3);
  for (int64_t i = 0; i < n; i++) cairn_tensor_i32(t)[i] = (int32_t)cairn_rng_below(&r, (uint64_t)classes);
  return t;
}

static void fill(cairn_tensor *t, float lo, float hi, uint64_t seed) {
  cairn_rng r;
  cairn_rng_init(&r, seed, 9);
  float *p = cairn_tensor_f32(t);
  for (int64_t i = 0; i < t->size; i++) p[i] = lo + (hi - lo) * cairn_rng_uniform(&r);
}

/* ---- dense ------------------------------------------------------------- */

Test(nn, dense_forward_matches_naive) {
  const int64_t B = 5, in = 7, out = 9;
  cairn_tensor *X = mk(2, B, in), *W = mk(2, in, out), *b = mk(1, out, 0), *Y = mk(2, B, out);
  fill(X, -1, 1, 1);
  fill(W, -1, 1, 2);
  fill(b, -1, 1, 3);
  for (int with_bias = 0; with_bias < 2; with_bias++) {
    cr_assert_eq(cairn_dense_forward(X, W, with_bias ? b : NULL, Y), CAIRN_OK, "%s", cairn_errmsg());
    for (int64_t i = 0; i < B; i++)
      for (int64_t j = 0; j < out; j++) {
        double s = with_bias ? cairn_tensor_f32(b)[j] : 0.0;
        for (int64_t k = 0; k < in; k++) s += (double)cairn_tensor_f32(X)[i * in + k] * cairn_tensor_f32(W)[k * out + j];
        cr_assert(fabs(cairn_tensor_f32(Y)[i * out + j] - s) < 1e-5, "Y[%lld,%lld] = %g, want %g", (long long)i,
                  (long long)j, (double)cairn_tensor_f32(Y)[i * out + j], s);
      }
  }
  cairn_tensor_free(X); cairn_tensor_free(W); cairn_tensor_free(b); cairn_tensor_free(Y);
}

/* L = Σ R ⊙ (X·W + b): dL/dY = R. Dense is linear, so central differences
 * are exact up to rounding. */
static double dense_loss(const cairn_tensor *X, const cairn_tensor *W, const cairn_tensor *b, const cairn_tensor *R,
                         cairn_tensor *Y) {
  cr_assert_eq(cairn_dense_forward(X, W, b, Y), CAIRN_OK);
  double s = 0;
  for (int64_t i = 0; i < Y->size; i++) s += (double)cairn_tensor_f32(Y)[i] * cairn_tensor_f32(R)[i];
  return s;
}

Test(nn, dense_backward_gradcheck_and_accumulates) {
  const int64_t B = 4, in = 6, out = 3;
  cairn_tensor *X = mk(2, B, in), *W = mk(2, in, out), *b = mk(1, out, 0), *Y = mk(2, B, out), *R = mk(2, B, out);
  cairn_tensor *dX = mk(2, B, in), *dW = mk(2, in, out), *db = mk(1, out, 0);
  fill(X, -1, 1, 4); fill(W, -1, 1, 5); fill(b, -1, 1, 6); fill(R, -1, 1, 7);
  fill(dX, 5, 6, 8); /* dX is overwritten, whatever it held */
  cr_assert_eq(cairn_dense_backward(X, W, R, dX, dW, db), CAIRN_OK, "%s", cairn_errmsg());
  cairn_tensor *params[3] = {X, W, b}, *grads[3] = {dX, dW, db};
  const float h = 1e-2f;
  for (int p = 0; p < 3; p++)
    for (int64_t i = 0; i < params[p]->size; i++) {
      float *v = cairn_tensor_f32(params[p]) + i, keep = *v;
      *v = keep + h;
      double lp = dense_loss(X, W, b, R, Y);
      *v = keep - h;
      double lm = dense_loss(X, W, b, R, Y);
      *v = keep;
      double num = (lp - lm) / (2 * h), got = cairn_tensor_f32(grads[p])[i];
      cr_assert(fabs(got - num) < 2e-3 * fmax(1, fabs(num)), "param %d elem %lld: analytic %g numeric %g", p,
                (long long)i, got, num);
    }
  /* A second call adds to dW and db and overwrites dX. */
  float dw0 = cairn_tensor_f32(dW)[4], db0 = cairn_tensor_f32(db)[1], dx0 = cairn_tensor_f32(dX)[2];
  cr_assert_eq(cairn_dense_backward(X, W, R, dX, dW, db), CAIRN_OK);
  cr_assert_float_eq(cairn_tensor_f32(dW)[4], 2 * dw0, 1e-5);
  cr_assert_float_eq(cairn_tensor_f32(db)[1], 2 * db0, 1e-5);
  cr_assert_float_eq(cairn_tensor_f32(dX)[2], dx0, 0);
  cairn_tensor *ts[] = {X, W, b, Y, R, dX, dW, db};
  for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) cairn_tensor_free(ts[i]);
}

Test(nn, dense_zero_sized) {
  cairn_tensor *X = mk(2, 0, 4), *W = mk(2, 4, 3), *b = mk(1, 3, 0), *Y = mk(2, 0, 3);
  cr_assert_eq(cairn_dense_forward(X, W, b, Y), CAIRN_OK);
  cairn_tensor *dW = mk(2, 4, 3);
  cr_assert_eq(cairn_dense_backward(X, W, Y, NULL, dW, NULL), CAIRN_OK);
  /* in = 0: Y is the bias broadcast */
  cairn_tensor *X0 = mk(2, 2, 0), *W0 = mk(2, 0, 3), *Y2 = mk(2, 2, 3);
  fill(b, 1, 2, 1);
  cr_assert_eq(cairn_dense_forward(X0, W0, b, Y2), CAIRN_OK);
  cr_assert_float_eq(cairn_tensor_f32(Y2)[4], cairn_tensor_f32(b)[1], 0);
  cairn_tensor *ts[] = {X, W, b, Y, dW, X0, W0, Y2};
  for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) cairn_tensor_free(ts[i]);
}

Test(nn, dense_bad_input_names_shapes) {
  cairn_tensor *X = mk(2, 32, 784), *W = mk(2, 512, 10), *Y = mk(2, 32, 10), *b = mk(1, 11, 0);
  cr_assert_eq(cairn_dense_forward(X, W, NULL, Y), CAIRN_E_SHAPE);
  cr_assert(strstr(cairn_errmsg(), "(32, 784)") && strstr(cairn_errmsg(), "(512, 10)"), "%s", cairn_errmsg());
  cairn_tensor *W2 = mk(2, 784, 10);
  cr_assert_eq(cairn_dense_forward(X, W2, b, Y), CAIRN_E_SHAPE);
  cr_assert(strstr(cairn_errmsg(), "(11)"), "%s", cairn_errmsg());
  cr_assert_eq(cairn_dense_forward(NULL, W2, NULL, Y), CAIRN_E_NULL);
  cr_assert(strstr(cairn_errmsg(), "X is NULL"), "%s", cairn_errmsg());
  cairn_tensor *Yi = NULL;
  int64_t ys[2] = {32, 10};
  cr_assert_eq(cairn_tensor_new(CAIRN_DTYPE_I32, 2, ys, &Yi), CAIRN_OK);
  cr_assert_eq(cairn_dense_forward(X, W2, NULL, Yi), CAIRN_E_DTYPE);
  cairn_tensor *dW = mk(2, 10, 784);
  cr_assert_eq(cairn_dense_backward(X, W2, Y, NULL, dW, NULL), CAIRN_E_SHAPE);
  cr_assert(strstr(cairn_errmsg(), "dW is (10, 784)"), "%s", cairn_errmsg());
  cairn_tensor *ts[] = {X, W, Y, b, W2, Yi, dW};
  for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) cairn_tensor_free(ts[i]);
}

/* ---- activations ------------------------------------------------------- */

static const cairn_act all_acts[] = {CAIRN_ACT_IDENTITY, CAIRN_ACT_RELU, CAIRN_ACT_LEAKY_RELU, CAIRN_ACT_SIGMOID,
                                     CAIRN_ACT_TANH, CAIRN_ACT_GELU, CAIRN_ACT_GELU_TANH, CAIRN_ACT_SOFTMAX,
                                     CAIRN_ACT_LOG_SOFTMAX};

static double act_loss(cairn_act a, const cairn_tensor *X, const cairn_tensor *R, cairn_tensor *Y) {
  cr_assert_eq(cairn_act_forward(a, 0.2f, X, Y), CAIRN_OK, "%s", cairn_errmsg());
  double s = 0;
  for (int64_t i = 0; i < Y->size; i++) s += (double)cairn_tensor_f32(Y)[i] * cairn_tensor_f32(R)[i];
  return s;
}

Test(nn, activation_gradcheck) {
  const int64_t B = 3, C = 7;
  for (size_t k = 0; k < sizeof all_acts / sizeof all_acts[0]; k++) {
    cairn_act a = all_acts[k];
    cairn_tensor *X = mk(2, B, C), *Y = mk(2, B, C), *R = mk(2, B, C), *dX = mk(2, B, C);
    fill(X, -3, 3, 10 + k);
    fill(R, -1, 1, 20 + k);
    /* keep away from the kink of relu / leaky relu */
    for (int64_t i = 0; i < X->size; i++)
      if (fabsf(cairn_tensor_f32(X)[i]) < 0.05f) cairn_tensor_f32(X)[i] = 0.3f;
    cr_assert_eq(cairn_act_forward(a, 0.2f, X, Y), CAIRN_OK);
    cr_assert_eq(cairn_act_backward(a, 0.2f, X, Y, R, dX), CAIRN_OK, "%s: %s", cairn_act_name(a), cairn_errmsg());
    const float h = 1e-2f;
    cairn_tensor *Yt = mk(2, B, C);
    for (int64_t i = 0; i < X->size; i++) {
      float *v = cairn_tensor_f32(X) + i, keep = *v;
      *v = keep + h;
      double lp = act_loss(a, X, R, Yt);
      *v = keep - h;
      double lm = act_loss(a, X, R, Yt);
      *v = keep;
      double num = (lp - lm) / (2 * h), got = cairn_tensor_f32(dX)[i];
      cr_assert(fabs(got - num) < 2e-3 * fmax(1, fabs(num)), "%s elem %lld: analytic %g numeric %g",
                cairn_act_name(a), (long long)i, got, num);
    }
    cairn_tensor_free(X); cairn_tensor_free(Y); cairn_tensor_free(R); cairn_tensor_free(dX); cairn_tensor_free(Yt);
  }
}

/* Written without the cancellation of 1 + erf and 1 + tanh for x << 0:
 * 1 + erf(x/√2) = erfc(−x/√2), and 1 + tanh(v) = 2/(1 + e^−2v). */
static double gelu_ref(double x) { return 0.5 * x * erfc(-x / sqrt(2.0)); }
static double gelu_tanh_ref(double x) {
  double v = sqrt(2 / M_PI) * (x + 0.044715 * x * x * x);
  return x / (1 + exp(-2 * v));
}

Test(nn, activation_values_against_double) {
  const int64_t n = 1000;
  cairn_tensor *X = mk(2, 10, 100), *Y = mk(2, 10, 100);
  fill(X, -30, 30, 99);
  for (size_t k = 1; k < sizeof all_acts / sizeof all_acts[0]; k++) {
    cairn_act a = all_acts[k];
    cr_assert_eq(cairn_act_forward(a, 0.2f, X, Y), CAIRN_OK);
    for (int64_t r = 0; r < 10; r++) {
      const float *x = cairn_tensor_f32(X) + r * 100;
      double mx = -INFINITY, se = 0;
      for (int j = 0; j < 100; j++) mx = fmax(mx, x[j]);
      for (int j = 0; j < 100; j++) se += exp((double)x[j] - mx);
      for (int j = 0; j < 100; j++) {
        double v = x[j], want = 0;
        switch (a) {
          case CAIRN_ACT_RELU: want = v > 0 ? v : 0; break;
          case CAIRN_ACT_LEAKY_RELU: want = v > 0 ? v : 0.2f * (float)v; break;
          case CAIRN_ACT_SIGMOID: want = 1 / (1 + exp(-v)); break;
          case CAIRN_ACT_TANH: want = tanh(v); break;
          case CAIRN_ACT_GELU: want = gelu_ref(v); break;
          case CAIRN_ACT_GELU_TANH: want = gelu_tanh_ref(v); break;
          case CAIRN_ACT_SOFTMAX: want = exp(v - mx) / se; break;
          case CAIRN_ACT_LOG_SOFTMAX: want = v - mx - log(se); break;
          default: break;
        }
        double got = cairn_tensor_f32(Y)[r * 100 + j];
        /* 1e-6 relative for sigmoid/softmax (the contract); gelu's tiny
         * negative tail is judged relative to 1e-30. */
        double tol = (a == CAIRN_ACT_SIGMOID || a == CAIRN_ACT_SOFTMAX || a == CAIRN_ACT_LOG_SOFTMAX) ? 1e-6 : 4e-6;
        cr_assert(fabs(got - want) <= tol * fmax(fabs(want), 1e-30), "%s(%.9g) = %.9g, want %.9g",
                  cairn_act_name(a), v, got, want);
      }
    }
  }
  (void)n;
  cairn_tensor_free(X);
  cairn_tensor_free(Y);
}

Test(nn, activation_in_place_and_errors) {
  cairn_tensor *X = mk(2, 4, 5), *Y = mk(2, 4, 5), *Z = mk(2, 5, 4);
  fill(X, -2, 2, 1);
  cr_assert_eq(cairn_act_forward(CAIRN_ACT_TANH, 0, X, Y), CAIRN_OK);
  cr_assert_eq(cairn_act_forward(CAIRN_ACT_TANH, 0, X, X), CAIRN_OK);
  cr_assert_arr_eq(cairn_tensor_f32(X), cairn_tensor_f32(Y), 20 * sizeof(float));
  cr_assert_eq(cairn_act_forward(CAIRN_ACT_RELU, 0, X, Z), CAIRN_E_SHAPE);
  cr_assert(strstr(cairn_errmsg(), "(4, 5)") && strstr(cairn_errmsg(), "(5, 4)"), "%s", cairn_errmsg());
  cr_assert_eq(cairn_act_forward((cairn_act)42, 0, X, Y), CAIRN_E_INVALID);
  cr_assert_eq(cairn_act_backward(CAIRN_ACT_SIGMOID, 0, X, NULL, X, Y), CAIRN_E_NULL);
  cr_assert(strstr(cairn_errmsg(), "Y is NULL"), "%s", cairn_errmsg());
  cairn_tensor_free(X); cairn_tensor_free(Y); cairn_tensor_free(Z);
}

/* Outputs larger than CAIRN_STREAM_MIN_BYTES (the last-level cache by
 * default) are written with streaming stores: the same bits as in place,
 * where streaming is never used, for every activation forward and
 * backward. Criterion runs each test in its own process, so the threshold
 * set here is the one the library reads first. */
Test(nn, activation_streamed_outputs_same_bits) {
  cr_assert_eq(setenv("CAIRN_STREAM_MIN_BYTES", "4096", 1), 0);
  const int64_t rows = 37, cols = 301; /* 44 KB, odd length: head and tail vectors */
  cairn_tensor *X = mk(2, rows, cols), *Y = mk(2, rows, cols), *D = mk(2, rows, cols), *G = mk(2, rows, cols),
               *I = mk(2, rows, cols);
  fill(X, -3, 3, 11);
  fill(G, -1, 1, 12);
  const size_t bytes = (size_t)(rows * cols) * sizeof(float);
  for (size_t k = 0; k < sizeof all_acts / sizeof all_acts[0]; k++) {
    const cairn_act a = all_acts[k];
    cr_assert_eq(cairn_act_forward(a, 0.1f, X, Y), CAIRN_OK, "%s", cairn_errmsg());
    memcpy(cairn_tensor_f32(I), cairn_tensor_f32(X), bytes);
    cr_assert_eq(cairn_act_forward(a, 0.1f, I, I), CAIRN_OK, "%s", cairn_errmsg());
    cr_assert_arr_eq(cairn_tensor_f32(Y), cairn_tensor_f32(I), bytes, "activation %d forward", (int)a);
    cr_assert_eq(cairn_act_backward(a, 0.1f, X, Y, G, D), CAIRN_OK, "%s", cairn_errmsg());
    memcpy(cairn_tensor_f32(I), cairn_tensor_f32(G), bytes);
    cr_assert_eq(cairn_act_backward(a, 0.1f, X, Y, I, I), CAIRN_OK, "%s", cairn_errmsg());
    cr_assert_arr_eq(cairn_tensor_f32(D), cairn_tensor_f32(I), bytes, "activation %d backward", (int)a);
  }
  cairn_tensor_free(X); cairn_tensor_free(Y); cairn_tensor_free(D); cairn_tensor_free(G); cairn_tensor_free(I);
}

/* ---- losses ------------------------------------------------------------ */

enum { L_SPARSE, L_XENT, L_SIGMOID, L_MSE };

static float loss_of(int kind, const cairn_tensor *x, const cairn_tensor *lab, cairn_tensor *d) {
  float l = NAN;
  cairn_status s = CAIRN_OK;
  switch (kind) {
    case L_SPARSE: s = cairn_loss_sparse_softmax_xent(x, lab, &l, d); break;
    case L_XENT: s = cairn_loss_softmax_xent(x, lab, &l, d); break;
    case L_SIGMOID: s = cairn_loss_sigmoid_xent(x, lab, &l, d); break;
    case L_MSE: s = cairn_loss_mse(x, lab, &l, d); break;
  }
  cr_assert_eq(s, CAIRN_OK, "%s", cairn_errmsg());
  return l;
}

/* The double-precision definition of each loss. */
static double loss_ref(int kind, const cairn_tensor *x, const cairn_tensor *lab) {
  int64_t B = x->shape[0], C = x->shape[1];
  const float *p = cairn_tensor_f32(x);
  double s = 0;
  for (int64_t r = 0; r < B; r++) {
    const float *row = p + r * C;
    double mx = -INFINITY, se = 0;
    for (int64_t j = 0; j < C; j++) mx = fmax(mx, row[j]);
    for (int64_t j = 0; j < C; j++) se += exp((double)row[j] - mx);
    double lse = mx + log(se);
    for (int64_t j = 0; j < C; j++) {
      double v = row[j];
      switch (kind) {
        case L_SPARSE: if (j == cairn_tensor_i32(lab)[r]) s += lse - v; break;
        case L_XENT: s += cairn_tensor_f32(lab)[r * C + j] * (lse - v); break;
        case L_SIGMOID: {
          double z = cairn_tensor_f32(lab)[r * C + j];
          s += fmax(v, 0) - v * z + log1p(exp(-fabs(v)));
          break;
        }
        case L_MSE: { double e = v - cairn_tensor_f32(lab)[r * C + j]; s += e * e; break; }
      }
    }
  }
  return kind <= L_XENT ? s / (double)B : s / (double)(B * C);
}

static cairn_tensor *labels_for(int kind, int64_t B, int64_t C, uint64_t seed) {
  if (kind == L_SPARSE) return mk_labels(B, (int32_t)C, seed);
  cairn_tensor *z = mk(2, B, C);
  fill(z, 0, 1, seed);
  if (kind == L_XENT) /* rows of probabilities */
    for (int64_t r = 0; r < B; r++) {
      double s = 0;
      for (int64_t j = 0; j < C; j++) s += cairn_tensor_f32(z)[r * C + j];
      for (int64_t j = 0; j < C; j++) cairn_tensor_f32(z)[r * C + j] /= (float)s;
    }
  return z;
}

Test(nn, losses_values_and_gradcheck) {
  const int64_t B = 6, C = 5;
  for (int kind = L_SPARSE; kind <= L_MSE; kind++) {
    cairn_tensor *x = mk(2, B, C), *d = mk(2, B, C), *lab = labels_for(kind, B, C, 40 + kind);
    fill(x, -4, 4, 30 + kind);
    float l = loss_of(kind, x, lab, d);
    double want = loss_ref(kind, x, lab);
    cr_assert(fabs(l - want) <= 1e-6 * fabs(want), "loss %d = %.9g, want %.9g", kind, (double)l, want);
    cr_assert_float_eq(loss_of(kind, x, lab, NULL), l, 0, "loss without gradient differs");
    const float h = 1e-2f;
    for (int64_t i = 0; i < x->size; i++) {
      float *v = cairn_tensor_f32(x) + i, keep = *v;
      *v = keep + h;
      double lp = loss_ref(kind, x, lab);
      *v = keep - h;
      double lm = loss_ref(kind, x, lab);
      *v = keep;
      double num = (lp - lm) / (2 * h), got = cairn_tensor_f32(d)[i];
      cr_assert(fabs(got - num) < 1e-3 * fmax(0.1, fabs(num)), "loss %d elem %lld: analytic %g numeric %g", kind,
                (long long)i, got, num);
    }
    cairn_tensor_free(x); cairn_tensor_free(d); cairn_tensor_free(lab);
  }
}

Test(nn, losses_extreme_logits_are_finite_and_accurate) {
  cairn_tensor *x = mk(2, 2, 3), *z = mk(2, 2, 3), *d = mk(2, 2, 3);
  float xv[6] = {1000, -1000, 0, -200, 300, 50}, zv[6] = {1, 0, 0, 0, 1, 1};
  memcpy(cairn_tensor_f32(x), xv, sizeof xv);
  memcpy(cairn_tensor_f32(z), zv, sizeof zv);
  float l = loss_of(L_SIGMOID, x, z, d);
  double want = loss_ref(L_SIGMOID, x, z);
  cr_assert(isfinite(l) && fabs(l - want) <= 1e-6 * fabs(want), "sigmoid xent %g want %g", (double)l, want);
  l = loss_of(L_XENT, x, z, d);
  want = loss_ref(L_XENT, x, z);
  cr_assert(isfinite(l) && fabs(l - want) <= 1e-6 * fabs(want), "softmax xent %g want %g", (double)l, want);
  for (int i = 0; i < 6; i++) cr_assert(isfinite(cairn_tensor_f32(d)[i]));
  cairn_tensor_free(x); cairn_tensor_free(z); cairn_tensor_free(d);
}

Test(nn, losses_bad_input) {
  cairn_tensor *x = mk(2, 4, 3), *lab = mk_labels(4, 3, 1), *lab5 = mk_labels(5, 3, 1), *e = mk(2, 0, 3);
  float l;
  cairn_tensor_i32(lab)[2] = 3;
  cr_assert_eq(cairn_loss_sparse_softmax_xent(x, lab, &l, NULL), CAIRN_E_INVALID);
  cr_assert(strstr(cairn_errmsg(), "label 3 of row 2"), "%s", cairn_errmsg());
  cr_assert_eq(cairn_loss_sparse_softmax_xent(x, lab5, &l, NULL), CAIRN_E_SHAPE);
  cr_assert(strstr(cairn_errmsg(), "5 labels"), "%s", cairn_errmsg());
  cr_assert_eq(cairn_loss_sparse_softmax_xent(x, x, &l, NULL), CAIRN_E_DTYPE);
  cr_assert_eq(cairn_loss_sparse_softmax_xent(e, lab, &l, NULL), CAIRN_E_INVALID);
  cr_assert_eq(cairn_loss_softmax_xent(x, NULL, &l, NULL), CAIRN_E_NULL);
  cr_assert_eq(cairn_loss_mse(x, x, NULL, NULL), CAIRN_E_NULL);
  cairn_tensor *y = mk(2, 3, 4);
  cr_assert_eq(cairn_loss_mse(x, y, &l, NULL), CAIRN_E_SHAPE);
  cr_assert_eq(cairn_loss_sigmoid_xent(x, x, &l, y), CAIRN_E_SHAPE);
  cr_assert(strstr(cairn_errmsg(), "gradient is (3, 4)"), "%s", cairn_errmsg());
  cairn_tensor_free(x); cairn_tensor_free(lab); cairn_tensor_free(lab5); cairn_tensor_free(e); cairn_tensor_free(y);
}

Test(nn, accuracy_metric) {
  cairn_tensor *x = mk(2, 4, 3), *lab = mk_labels(4, 3, 1);
  float xv[12] = {1, 2, 3, 5, 1, 1, 0, 0, 0, -1, 4, 4};
  int32_t yv[4] = {2, 0, 0, 2};
  memcpy(cairn_tensor_f32(x), xv, sizeof xv);
  memcpy(cairn_tensor_i32(lab), yv, sizeof yv);
  float acc;
  cr_assert_eq(cairn_metric_accuracy(x, lab, &acc), CAIRN_OK);
  cr_assert_float_eq(acc, 0.75f, 0, "ties go to the first index: rows 0,1,2 right, row 3 wrong");
  cairn_tensor_free(x); cairn_tensor_free(lab);
}

/* ---- determinism ------------------------------------------------------- */

#ifdef CAIRN_HAVE_OPENMP
/* Runs the big ops with t threads and returns a checksum-free copy of the
 * outputs to compare bitwise. */
static void big_ops(int t, float *out_act, float *out_sm, float *out_db, float *loss) {
  omp_set_num_threads(t);
  const int64_t B = 512, C = 1000;
  cairn_tensor *x = mk(2, B, C), *y = mk(2, B, C), *d = mk(2, B, C), *db = mk(1, C, 0), *W = mk(2, C, C);
  cairn_tensor *lab = mk_labels(B, (int32_t)C, 5), *dW = mk(2, C, C);
  fill(x, -5, 5, 77);
  cr_assert_eq(cairn_act_forward(CAIRN_ACT_GELU, 0, x, y), CAIRN_OK);
  memcpy(out_act, cairn_tensor_f32(y), (size_t)(B * C) * sizeof(float));
  cr_assert_eq(cairn_act_forward(CAIRN_ACT_SOFTMAX, 0, x, y), CAIRN_OK);
  memcpy(out_sm, cairn_tensor_f32(y), (size_t)(B * C) * sizeof(float));
  cr_assert_eq(cairn_loss_sparse_softmax_xent(x, lab, loss, d), CAIRN_OK);
  cr_assert_eq(cairn_dense_backward(x, W, x, NULL, dW, db), CAIRN_OK);
  memcpy(out_db, cairn_tensor_f32(db), (size_t)C * sizeof(float));
  cairn_tensor *ts[] = {x, y, d, db, W, lab, dW};
  for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) cairn_tensor_free(ts[i]);
}
#endif

Test(nn, bitwise_identical_for_1_and_2_threads) {
#ifdef CAIRN_HAVE_OPENMP
  size_t n = 512 * 1000;
  float *a1 = malloc(n * 4), *a2 = malloc(n * 4), *s1 = malloc(n * 4), *s2 = malloc(n * 4), d1[1000], d2[1000], l1, l2;
  big_ops(1, a1, s1, d1, &l1);
  big_ops(2, a2, s2, d2, &l2);
  cr_assert(memcmp(a1, a2, n * 4) == 0, "gelu differs between 1 and 2 threads");
  cr_assert(memcmp(s1, s2, n * 4) == 0, "softmax differs between 1 and 2 threads");
  cr_assert(memcmp(d1, d2, sizeof d1) == 0, "bias gradient differs between 1 and 2 threads");
  cr_assert(memcmp(&l1, &l2, sizeof l1) == 0, "loss differs: %.9g vs %.9g", (double)l1, (double)l2);
  free(a1); free(a2); free(s1); free(s2);
#else
  cr_skip_test("serial build (--disable-openmp)");
#endif
}

/* ---- GEMM formulation: every block rule, 1 vs 2 threads ------------------ */

/* Y = X·W + b, dX, dW, db for one shape at t threads; out holds them in
 * that order. Shapes below are chosen so that each way lib/gemm.c cuts or
 * routes a GEMM runs: rows (B >= 256), columns (B < 256, wide out), the
 * weight gradient with a wide output, a short K (dX of a narrow layer), a
 * thin output (out < 64). */
static void dense_run(int t, int64_t B, int64_t in, int64_t out, float *res) {
#ifdef CAIRN_HAVE_OPENMP
  omp_set_num_threads(t);
#else
  (void)t;
#endif
  cairn_tensor *X = mk(2, B, in), *W = mk(2, in, out), *b = mk(1, out, 0), *Y = mk(2, B, out), *dY = mk(2, B, out);
  cairn_tensor *dX = mk(2, B, in), *dW = mk(2, in, out), *db = mk(1, out, 0);
  fill(X, -1, 1, 11); fill(W, -1, 1, 12); fill(b, -1, 1, 13); fill(dY, -1, 1, 14);
  cr_assert_eq(cairn_dense_forward(X, W, b, Y), CAIRN_OK, "%s", cairn_errmsg());
  memset(dW->data, 0, cairn_tensor_nbytes(dW));
  memset(db->data, 0, cairn_tensor_nbytes(db));
  cr_assert_eq(cairn_dense_backward(X, W, dY, dX, dW, db), CAIRN_OK, "%s", cairn_errmsg());
  size_t o = 0;
  cairn_tensor *outs[] = {Y, dX, dW, db};
  for (int i = 0; i < 4; i++) {
    memcpy(res + o, outs[i]->data, cairn_tensor_nbytes(outs[i]));
    o += (size_t)outs[i]->size;
  }
  /* spot checks against double precision: row 0 and the last row */
  const float *x = cairn_tensor_f32(X), *w = cairn_tensor_f32(W), *dy = cairn_tensor_f32(dY);
  for (int64_t r = 0; r < B; r += B - 1) {
    for (int64_t j = 0; j < out; j++) {
      double s = cairn_tensor_f32(b)[j];
      for (int64_t k = 0; k < in; k++) s += (double)x[r * in + k] * w[k * out + j];
      cr_assert(fabs(cairn_tensor_f32(Y)[r * out + j] - s) < 1e-4 * fmax(1, fabs(s)), "Y[%lld,%lld]", (long long)r,
                (long long)j);
    }
    for (int64_t k = 0; k < in; k++) {
      double s = 0;
      for (int64_t j = 0; j < out; j++) s += (double)dy[r * out + j] * w[k * out + j];
      cr_assert(fabs(cairn_tensor_f32(dX)[r * in + k] - s) < 1e-4 * fmax(1, fabs(s)), "dX[%lld,%lld]",
                (long long)r, (long long)k);
    }
    if (B == 1) break;
  }
  for (int64_t j = 0; j < out; j += out - 1) {
    double s = 0;
    for (int64_t r = 0; r < B; r++) s += (double)x[r * in + in - 1] * dy[r * out + j];
    cr_assert(fabs(cairn_tensor_f32(dW)[(in - 1) * out + j] - s) < 1e-4 * fmax(1, fabs(s)), "dW[%lld,%lld]",
              (long long)(in - 1), (long long)j);
    if (out == 1) break;
  }
  cairn_tensor *ts[] = {X, W, b, Y, dY, dX, dW, db};
  for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) cairn_tensor_free(ts[i]);
}

/* lib/gemm.c; the static core links its internals in */
void cairn__sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc, const float *bias);
int cairn__gemm_row_cut(void);
int cairn__gemm_on_dnnl(int trans_a, int trans_b, int N, int K);
int cairn__cpu_has_avx512(void);

/* Where the BLAS keeps its bits when C's rows are cut (found by the
 * library at its first GEMM), cairn's GEMMs on the row path give the bits
 * of one plain single-threaded cblas_sgemm call, at 1 thread and at 2. */
Test(nn, gemm_rows_cut_on_the_kernel_width_give_the_bits_of_one_call) {
#ifdef CAIRN_HAVE_OPENMP
  const int cut = cairn__gemm_row_cut();
  if (!cut) cr_skip_test("this BLAS gives other bits when C's rows are cut: cairn uses fixed blocks");
  /* ta, tb, M, N, K: every transpose pair, the MLP's shapes and odd ones */
  const int shapes[][5] = {{0, 0, 256, 1024, 784}, {0, 1, 300, 97, 130}, {1, 0, 1000, 10, 256},
                           {1, 1, 513, 64, 300}, {0, 0, 256, 10, 1024}, {1, 0, 784, 1024, 256}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    const int ta = shapes[s][0], tb = shapes[s][1], M = shapes[s][2], N = shapes[s][3], K = shapes[s][4];
    if (cairn__gemm_on_dnnl(ta, tb, N, K)) continue; /* oneDNN's shapes: gemm_onednn_* below */
    const int lda = ta ? M : K, ldb = tb ? K : N;
    cairn_tensor *A = mk(2, M, K), *B = mk(2, K, N), *bias = mk(1, N, 0), *ref = mk(2, M, N), *C = mk(2, M, N);
    fill(A, -1, 1, 21); fill(B, -1, 1, 22); fill(bias, -1, 1, 23);
    float *r = cairn_tensor_f32(ref), *c = cairn_tensor_f32(C);
    cr_assert_eq(cairn_set_num_threads(1), CAIRN_OK);
    for (int i = 0; i < M; i++) memcpy(r + (size_t)i * N, bias->data, (size_t)N * sizeof(float));
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0f,
                cairn_tensor_f32(A), lda, cairn_tensor_f32(B), ldb, 1.0f, r, N);
    for (int t = 1; t <= 2; t++) {
      cr_assert_eq(cairn_set_num_threads(t), CAIRN_OK);
      memset(c, 0xff, cairn_tensor_nbytes(C));
      cairn__sgemm(ta, tb, M, N, K, 1.0f, cairn_tensor_f32(A), lda, cairn_tensor_f32(B), ldb, 0.0f, c, N,
                   cairn_tensor_f32(bias));
      cr_assert(memcmp(c, r, cairn_tensor_nbytes(C)) == 0,
                "%c%c %dx%dx%d at %d thread(s), rows cut on multiples of %d: other bits than one call", ta ? 'T' : 'N',
                tb ? 'T' : 'N', M, N, K, t, cut);
    }
    cairn_tensor *ts[] = {A, B, bias, ref, C};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) cairn_tensor_free(ts[i]);
  }
#else
  cr_skip_test("serial build (--disable-openmp): the BLAS has the threads, cairn uses fixed blocks");
#endif
}

#ifdef CAIRN_HAVE_OPENMP
/* The oneDNN engine, forced for the test (on a CPU without AVX-512 the
 * default is OpenBLAS); skips in a build without oneDNN. */
static int force_onednn(void) {
  int prev = cairn__gemm_engine_force(CAIRN__GEMM_ONEDNN);
  if (prev < 0) cr_skip_test("no oneDNN in this build (--without-dnnl, --disable-openmp or libdnnl-dev missing)");
  return prev;
}

/* |C - op(A)·op(B) - bias| of every 97th element against a double
 * product: both engines compute the product, not just the same bits. */
static void check_product(int ta, int tb, int M, int N, int K, const float *A, const float *B, const float *bias,
                          const float *C, const char *what) {
  const int lda = ta ? M : K, ldb = tb ? K : N;
  for (size_t e = 0; e < (size_t)M * N; e += 97) {
    const int i = (int)(e / (size_t)N), j = (int)(e % (size_t)N);
    double s = bias ? bias[j] : 0;
    for (int k = 0; k < K; k++)
      s += (double)(ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]) * (tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j]);
    cr_assert(fabs(C[e] - s) <= 1e-5 * K * fmax(1, fabs(s)), "%s %c%c %dx%dx%d: C[%d,%d] = %g, the product is %g",
              what, ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, i, j, C[e], s);
  }
}
#endif

/* The oneDNN engine's GEMMs give the same bits at 1 and 2 threads: its
 * primitives run single-threaded inside cairn's blocks, even over a long
 * K, which oneDNN would otherwise split over the threads (64x64 with K
 * 65536 gives other bits at 2 threads when oneDNN runs it on its own). */
Test(nn, gemm_onednn_same_bits_for_1_and_2_threads) {
#ifdef CAIRN_HAVE_OPENMP
  const int prev = force_onednn();
  /* ta, tb, M, N, K: the long K, the MLP's shapes (forward, dX, dW of each
   * layer), column blocks (M < 256, wide N) and odd sizes */
  const int shapes[][5] = {{0, 0, 64, 64, 65536}, {1, 0, 64, 64, 65536}, {0, 1, 64, 64, 65536}, {0, 0, 256, 1024, 784},
                           {0, 1, 256, 784, 1024}, {1, 0, 784, 1024, 256}, {0, 0, 256, 10, 1024},
                           {0, 1, 256, 1024, 10},  {1, 0, 1024, 10, 256},  {0, 0, 100, 700, 300},
                           {1, 1, 513, 64, 300},   {0, 1, 300, 97, 130},   {0, 0, 64, 256, 65536}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    const int ta = shapes[s][0], tb = shapes[s][1], M = shapes[s][2], N = shapes[s][3], K = shapes[s][4];
    const int lda = ta ? M : K, ldb = tb ? K : N;
    cairn_tensor *A = mk(2, M, K), *B = mk(2, K, N), *bias = mk(1, N, 0), *one = mk(2, M, N), *two = mk(2, M, N);
    fill(A, -1, 1, 31); fill(B, -1, 1, 32); fill(bias, -1, 1, 33);
    cairn_tensor *outs[2] = {one, two};
    for (int t = 1; t <= 2; t++) {
      cr_assert_eq(cairn_set_num_threads(t), CAIRN_OK);
      float *c = cairn_tensor_f32(outs[t - 1]);
      /* C = bias + op(A)·op(B), then C += op(A)·op(B) (beta 1, as dW accumulates) */
      cairn__sgemm(ta, tb, M, N, K, 1.0f, cairn_tensor_f32(A), lda, cairn_tensor_f32(B), ldb, 0.0f, c, N,
                   cairn_tensor_f32(bias));
      if (t == 1)
        check_product(ta, tb, M, N, K, cairn_tensor_f32(A), cairn_tensor_f32(B), cairn_tensor_f32(bias), c,
                      "oneDNN");
      cairn__sgemm(ta, tb, M, N, K, 1.0f, cairn_tensor_f32(A), lda, cairn_tensor_f32(B), ldb, 1.0f, c, N, NULL);
    }
    cr_assert(memcmp(cairn_tensor_f32(one), cairn_tensor_f32(two), cairn_tensor_nbytes(one)) == 0,
              "%c%c %dx%dx%d on oneDNN: 1 and 2 threads give other bits", ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K);
    cairn_tensor *ts[] = {A, B, bias, one, two};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) cairn_tensor_free(ts[i]);
  }
  cairn__gemm_engine_force(prev);
#else
  cr_skip_test("serial build (--disable-openmp): no oneDNN engine");
#endif
}

#ifdef CAIRN_HAVE_OPENMP
static int term_blocked(void) {
  sigset_t cur;
  pthread_sigmask(SIG_BLOCK, NULL, &cur);
  return sigismember(&cur, SIGTERM);
}
#endif

/* A oneDNN run blocks the asynchronous signals only while it runs
 * (lib/gemm_dnnl_base.c); between cairn__dnnl_hold_signals and its release
 * they stay blocked from the first run to the release (once for several
 * products), nested holds release at the outermost, and the mask is then
 * the caller's again. */
Test(nn, gemm_onednn_signals_held_from_the_first_run_to_the_release) {
#ifdef CAIRN_HAVE_OPENMP
  const int prev = force_onednn();
  const int M = 64, N = 48, K = 40;
  cairn_tensor *A = mk(2, M, K), *B = mk(2, K, N), *C = mk(2, M, N), *D = mk(2, M, K);
  fill(A, -1, 1, 71); fill(B, -1, 1, 72);
  float *a = cairn_tensor_f32(A), *b = cairn_tensor_f32(B), *c = cairn_tensor_f32(C), *d = cairn_tensor_f32(D);
  cr_assert(!term_blocked(), "the test starts with SIGTERM deliverable");
  cairn__sgemm(0, 0, M, N, K, 1.0f, a, K, b, N, 0.0f, c, N, NULL);
  cr_assert(!term_blocked(), "a run without a hold left SIGTERM blocked");
  cairn__dnnl_hold_signals();
  cr_assert(!term_blocked(), "a hold alone blocks nothing (no run yet)");
  cairn__dnnl_hold_signals();
  cairn__sgemm(0, 0, M, N, K, 1.0f, a, K, b, N, 0.0f, c, N, NULL);
  cr_assert(term_blocked(), "inside a hold, the signals stay blocked after a run");
  cairn__dnnl_release_signals();
  cr_assert(term_blocked(), "an inner release keeps them blocked");
  cairn__sgemm(0, 1, M, K, N, 1.0f, c, N, b, N, 0.0f, d, K, NULL);
  check_product(0, 0, M, N, K, a, b, NULL, c, "C = A*B, signals held");
  check_product(0, 1, M, K, N, c, b, NULL, d, "D = C*B^T, signals held");
  cairn__dnnl_release_signals();
  cr_assert(!term_blocked(), "the outer release gave the caller's mask back");
  cairn__dnnl_release_signals(); /* unbalanced: ignored */
  cr_assert(!term_blocked());
  cairn_tensor_free(A), cairn_tensor_free(B), cairn_tensor_free(C), cairn_tensor_free(D);
  cairn__gemm_engine_force(prev);
#else
  cr_skip_test("serial build (--disable-openmp): no oneDNN engine");
#endif
}

/* A·Bᵀ (a layer's dX) runs on fixed-dimension primitives, one per
 * shape (lib/gemm_dnnl_fixed.c), made once: a second product of the same
 * shape and a block of another length reuse or add exactly one. */
Test(nn, gemm_onednn_a_bt_on_fixed_dimension_primitives) {
#ifdef CAIRN_HAVE_OPENMP
  const int prev = force_onednn();
  const int M = 96, N = 40, K = 72;
  cairn_tensor *A = mk(2, M, K), *B = mk(2, N, K), *C = mk(2, M, N);
  fill(A, -1, 1, 61); fill(B, -1, 1, 62);
  const int before = cairn__dnnl_fixed_primitive_count(0);
  cairn__sgemm(0, 1, M, N, K, 1.0f, cairn_tensor_f32(A), K, cairn_tensor_f32(B), K, 0.0f, cairn_tensor_f32(C), N, NULL);
  check_product(0, 1, M, N, K, cairn_tensor_f32(A), cairn_tensor_f32(B), NULL, cairn_tensor_f32(C), "A*B^T");
  const int made = cairn__dnnl_fixed_primitive_count(0);
  cr_assert_eq(made, before + 1, "A*B^T %dx%dx%d made %d fixed-dimension primitives, not 1", M, N, K, made - before);
  cairn__sgemm(0, 1, M, N, K, 1.0f, cairn_tensor_f32(A), K, cairn_tensor_f32(B), K, 1.0f, cairn_tensor_f32(C), N, NULL);
  cairn__sgemm(0, 1, M, N, K, 1.0f, cairn_tensor_f32(A), K, cairn_tensor_f32(B), K, 0.0f, cairn_tensor_f32(C), N, NULL);
  cr_assert_eq(cairn__dnnl_fixed_primitive_count(0), made + 1, "the same shape made a primitive again "
               "(one more is the accumulating one)");
  cairn_tensor_free(A), cairn_tensor_free(B), cairn_tensor_free(C);
  cairn__gemm_engine_force(prev);
#else
  cr_skip_test("serial build (--disable-openmp): no oneDNN engine");
#endif
}

/* Where oneDNN keeps its bits when C's rows are cut (probed per shape,
 * lib/gemm_dnnl.c), the oneDNN engine's rows follow the thread count: one
 * call at 1 thread, and at 1 and 2 threads the bits of one oneDNN call
 * over all rows. Where it does not, the plan's blocks are the same at 1
 * and 2 threads. On a CPU with AVX-512 the MLP's batch-256 products all
 * keep their bits (measured on an Emerald Rapids), so some shape must
 * follow the threads there. The forward X·W with no more rows than
 * columns has its columns follow the threads instead (gemm.c). */
Test(nn, gemm_onednn_rows_follow_the_threads_where_the_bits_stay) {
#ifdef CAIRN_HAVE_OPENMP
  const int prev = force_onednn();
  /* ta, tb, M, N, K: forward, dX and dW of the MLP 784-1024-1024-10 at
   * batch 256, an odd batch and odd sizes */
  const int shapes[][5] = {{0, 0, 256, 1024, 784}, {0, 1, 256, 784, 1024}, {1, 0, 784, 1024, 256},
                           {0, 0, 256, 10, 1024},  {0, 1, 256, 1024, 10},  {1, 0, 1024, 10, 256},
                           {0, 0, 300, 700, 130},  {1, 1, 513, 64, 300},   {0, 1, 453, 37, 1000}};
  int followed = 0, cols_followed = 0;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int acc = 0; acc <= 1; acc++) {
      const int ta = shapes[s][0], tb = shapes[s][1], M = shapes[s][2], N = shapes[s][3], K = shapes[s][4];
      const int lda = ta ? M : K, ldb = tb ? K : N;
      cairn_tensor *A = mk(2, M, K), *B = mk(2, K, N), *ref = mk(2, M, N), *C = mk(2, M, N), *C0 = mk(2, M, N);
      fill(A, -1, 1, 51); fill(B, -1, 1, 52); fill(C0, -1, 1, 53);
      const float *a = cairn_tensor_f32(A), *b = cairn_tensor_f32(B);
      float *r = cairn_tensor_f32(ref), *c = cairn_tensor_f32(C);
      int split_n, nb[2], len[2];
      for (int t = 1; t <= 2; t++) {
        cr_assert_eq(cairn_set_num_threads(t), CAIRN_OK);
        cairn__gemm_plan(CAIRN__GEMM_ONEDNN, ta, tb, M, N, K, lda, ldb, N, acc, &split_n, &nb[t - 1], &len[t - 1]);
      }
      const int follows = nb[0] != nb[1] || len[0] != len[1];
      if (follows) {
        followed++;
        cols_followed += split_n;
        cr_assert(nb[0] == 1, "%c%c %dx%dx%d: %s that follow the threads are one call at 1 thread", ta ? 'T' : 'N',
                  tb ? 'T' : 'N', M, N, K, split_n ? "columns" : "rows");
        /* columns follow only for X·W with no more rows than columns (gemm.c) */
        cr_assert(!split_n || (!ta && !tb && N > M), "%c%c %dx%dx%d: columns follow the threads", ta ? 'T' : 'N',
                  tb ? 'T' : 'N', M, N, K);
        memcpy(r, C0->data, cairn_tensor_nbytes(C0));
        cr_assert_eq(cairn__dnnl_sgemm(ta, tb, M, N, K, a, lda, b, ldb, acc, r, N), 0);
        for (int t = 1; t <= 2; t++) {
          cr_assert_eq(cairn_set_num_threads(t), CAIRN_OK);
          memcpy(c, C0->data, cairn_tensor_nbytes(C0));
          cairn__sgemm(ta, tb, M, N, K, 1.0f, a, lda, b, ldb, acc ? 1.0f : 0.0f, c, N, NULL);
          cr_assert(memcmp(c, r, cairn_tensor_nbytes(C)) == 0,
                    "%c%c %dx%dx%d (accumulate %d) at %d thread(s): %s follow the threads but give other bits than "
                    "one oneDNN call", ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, acc, t, split_n ? "columns" : "rows");
        }
      }
      cairn_tensor *ts[] = {A, B, ref, C, C0};
      for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) cairn_tensor_free(ts[i]);
    }
  if (cairn__cpu_has_avx512()) {
    cr_assert_gt(followed, 0, "no MLP shape's rows follow the threads on this AVX-512 CPU");
    /* NN 256x1024x784 keeps its bits cut by columns on the Zen 5 */
    cr_assert_gt(cols_followed, 0, "no forward's columns follow the threads on this AVX-512 CPU");
  }
  cairn__gemm_engine_force(prev);
#else
  cr_skip_test("serial build (--disable-openmp): no oneDNN engine");
#endif
}

/* The oneDNN engine cuts C into the blocks of cairn__gemm_plan (fixed by
 * the shape, or rows that follow the thread count where oneDNN keeps its
 * bits), and each block is one oneDNN call: at 1 thread and at 2, cairn's
 * GEMM gives the bits of one oneDNN call per block of the plan, made here
 * one after the other, and of one call over the whole product where the
 * plan has one block. */
Test(nn, gemm_onednn_gives_the_bits_of_one_call_per_block) {
#ifdef CAIRN_HAVE_OPENMP
  const int prev = force_onednn();
  const int shapes[][5] = {{0, 0, 256, 1024, 784}, {0, 1, 300, 97, 130}, {1, 0, 1000, 10, 256},
                           {1, 1, 513, 64, 300},   {0, 0, 256, 10, 1024}, {1, 0, 784, 1024, 256},
                           {0, 1, 256, 784, 1024}, {0, 0, 100, 700, 300}, {0, 0, 64, 64, 65536},
                           {0, 1, 17, 1024, 64}};
  int one_block = 0, several = 0;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    const int ta = shapes[s][0], tb = shapes[s][1], M = shapes[s][2], N = shapes[s][3], K = shapes[s][4];
    const int lda = ta ? M : K, ldb = tb ? K : N;
    cairn_tensor *A = mk(2, M, K), *B = mk(2, K, N), *bias = mk(1, N, 0), *ref = mk(2, M, N), *C = mk(2, M, N);
    fill(A, -1, 1, 41); fill(B, -1, 1, 42); fill(bias, -1, 1, 43);
    const float *a = cairn_tensor_f32(A), *b = cairn_tensor_f32(B);
    float *r = cairn_tensor_f32(ref), *c = cairn_tensor_f32(C);
    for (int i = 0; i < M; i++) memcpy(r + (size_t)i * N, bias->data, (size_t)N * sizeof(float));
    int split_n, nb, len;
    cairn__gemm_plan(CAIRN__GEMM_ONEDNN, ta, tb, M, N, K, lda, ldb, N, 1, &split_n, &nb, &len);
    for (int i = 0; i < nb; i++) {
      const int lo = i * len, hi = lo + len < (split_n ? N : M) ? lo + len : (split_n ? N : M);
      if (lo >= hi) continue;
      const int ok = split_n ? cairn__dnnl_sgemm(ta, tb, M, hi - lo, K, a, lda, tb ? b + (size_t)lo * ldb : b + lo,
                                                 ldb, 1, r + lo, N)
                             : cairn__dnnl_sgemm(ta, tb, hi - lo, N, K, ta ? a + lo : a + (size_t)lo * lda, lda, b,
                                                 ldb, 1, r + (size_t)lo * N, N);
      cr_assert_eq(ok, 0, "a oneDNN call on block %d", i);
    }
    if (nb == 1) one_block++; else several++;
    check_product(ta, tb, M, N, K, a, b, cairn_tensor_f32(bias), r, "oneDNN calls per block");
    for (int t = 1; t <= 2; t++) {
      cr_assert_eq(cairn_set_num_threads(t), CAIRN_OK);
      memset(c, 0xff, cairn_tensor_nbytes(C));
      cairn__sgemm(ta, tb, M, N, K, 1.0f, a, lda, b, ldb, 0.0f, c, N, cairn_tensor_f32(bias));
      cr_assert(memcmp(c, r, cairn_tensor_nbytes(C)) == 0,
                "%c%c %dx%dx%d at %d thread(s) on oneDNN: other bits than one oneDNN call on each of %d %s blocks of "
                "%d", ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, t, nb, split_n ? "column" : "row", len);
    }
    cairn_tensor *ts[] = {A, B, bias, ref, C};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) cairn_tensor_free(ts[i]);
  }
  cr_assert(one_block && several, "the shapes cover one block (%d) and several (%d)", one_block, several);
  cairn__gemm_engine_force(prev);
#else
  cr_skip_test("serial build (--disable-openmp): no oneDNN engine");
#endif
}

Test(nn, dense_every_block_rule_same_bits_for_1_and_2_threads) {
#ifdef CAIRN_HAVE_OPENMP
  const int64_t shapes[][3] = {{512, 96, 300}, {64, 40, 700}, {512, 600, 16}, {300, 784, 1024}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    int64_t B = shapes[s][0], in = shapes[s][1], out = shapes[s][2];
    size_t n = (size_t)(B * out + B * in + in * out + out);
    float *one = malloc(n * sizeof(float)), *two = malloc(n * sizeof(float));
    dense_run(1, B, in, out, one);
    dense_run(2, B, in, out, two);
    cr_assert(memcmp(one, two, n * sizeof(float)) == 0, "B %lld, %lld -> %lld: 1 and 2 threads give other bits",
              (long long)B, (long long)in, (long long)out);
    free(one);
    free(two);
  }
#else
  cr_skip_test("serial build (--disable-openmp)");
#endif
}

/* The model's backward sweep that also sums the bias gradient
 * (cairn__act_backward_colsum) gives the bits of cairn_act_backward
 * followed by the column sums cairn__dense_backward makes (rows added in
 * order), for every activation it takes, in place (dX over dY) and not,
 * at 1 and 2 threads, on shapes below and above the parallel threshold
 * and with columns that are no multiple of 16. */
int cairn__act_bwd_colsum_fusable(cairn_act act); /* lib/tensor_impl.h */
void cairn__act_backward_colsum(cairn_act act, float alpha, const float *z, const float *y, const float *dy,
                                float *dx, float *db, size_t rows, size_t cols);
Test(nn, act_backward_colsum_same_bits_as_two_passes) {
  const cairn_act acts[] = {CAIRN_ACT_RELU, CAIRN_ACT_LEAKY_RELU, CAIRN_ACT_SIGMOID, CAIRN_ACT_TANH};
  const int64_t shapes[][2] = {{256, 1024}, {300, 1000}, {64, 17}, {1000, 37}, {3, 5}, {0, 5}};
  cr_assert(!cairn__act_bwd_colsum_fusable(CAIRN_ACT_GELU) && !cairn__act_bwd_colsum_fusable(CAIRN_ACT_SOFTMAX));
  for (size_t a = 0; a < sizeof acts / sizeof acts[0]; a++)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
      const int64_t rows = shapes[s][0], cols = shapes[s][1];
      cr_assert(cairn__act_bwd_colsum_fusable(acts[a]));
      cairn_tensor *z = mk(2, rows, cols), *y = mk(2, rows, cols), *dy = mk(2, rows, cols), *dx = mk(2, rows, cols);
      cairn_tensor *db = mk(1, cols, 0), *dx2 = mk(2, rows, cols), *db2 = mk(1, cols, 0);
      fill(z, -3, 3, 71 + s), fill(dy, -1, 1, 72 + s);
      /* a few exact zeros and ties where the derivatives branch */
      if (rows * cols > 0) cairn_tensor_f32(z)[0] = 0.0f, cairn_tensor_f32(z)[rows * cols - 1] = -0.0f;
      cr_assert_eq(cairn_act_forward(acts[a], 0.1f, z, y), CAIRN_OK);
      cr_assert_eq(cairn_act_backward(acts[a], 0.1f, z, y, dy, dx), CAIRN_OK);
      float *want = cairn_tensor_f32(db);
      memset(want, 0, (size_t)cols * sizeof(float));
      for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) want[c] += cairn_tensor_f32(dx)[r * cols + c];
      for (int t = 1; t <= 2; t++)
        for (int in_place = 0; in_place <= 1; in_place++) {
          cr_assert_eq(cairn_set_num_threads(t), CAIRN_OK);
          memcpy(dx2->data, dy->data, cairn_tensor_nbytes(dy));
          float *out = cairn_tensor_f32(dx2);
          memset(db2->data, 0xff, cairn_tensor_nbytes(db2)); /* overwritten, not added to */
          cairn__act_backward_colsum(acts[a], 0.1f, cairn_tensor_f32(z), cairn_tensor_f32(y),
                                     in_place ? out : cairn_tensor_f32(dy), out, cairn_tensor_f32(db2), (size_t)rows,
                                     (size_t)cols);
          cr_assert(memcmp(out, dx->data, cairn_tensor_nbytes(dx)) == 0, "%s %lldx%lld, %d thread(s), in place %d: dX",
                    cairn_act_name(acts[a]), (long long)rows, (long long)cols, t, in_place);
          cr_assert(memcmp(db2->data, want, (size_t)cols * sizeof(float)) == 0,
                    "%s %lldx%lld, %d thread(s), in place %d: db is not the column sums of dX in row order",
                    cairn_act_name(acts[a]), (long long)rows, (long long)cols, t, in_place);
        }
      cairn_tensor *ts[] = {z, y, dy, dx, db, dx2, db2};
      for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) cairn_tensor_free(ts[i]);
    }
}
