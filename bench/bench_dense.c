/* bench_dense: cairn_dense_forward / cairn_dense_backward (with bias) per
 * shape, in GFLOP/s (2·M·N·K per GEMM), next to raw cblas_sgemm on the same
 * shapes at the same thread count, interleaved round by round:
 *   forward   Y = X·W + b                 raw: sgemm NN
 *   backward  dX = dY·Wᵀ, dW += Xᵀ·dY, db  raw: sgemm NT + sgemm TN (beta 1)
 * The ratio is raw time / cairn time (≥ 1 means cairn is as fast).
 *
 *   bench_dense [--threads T] [--repeats R] [--quick] [--no-machine]
 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>

#include <cairn.h>

#include "bench_common.h"

static void fill(cairn_tensor *t, uint64_t seed) {
  cairn_rng r;
  cairn_rng_init(&r, seed, 3);
  float *p = cairn_tensor_f32(t);
  for (int64_t i = 0; i < t->size; i++) p[i] = cairn_rng_uniform(&r) - 0.5f;
}

static cairn_tensor *mk(int64_t a, int64_t b, uint64_t seed) {
  cairn_tensor *t;
  int64_t s[2] = {a, b};
  if (cairn_tensor_new(CAIRN_DTYPE_F32, b ? 2 : 1, b ? s : &a, &t)) {
    fprintf(stderr, "bench_dense: %s\n", cairn_errmsg());
    exit(1);
  }
  fill(t, seed);
  return t;
}

#define CHECK(x)                                                                                   \
  do {                                                                                             \
    if (x) {                                                                                       \
      fprintf(stderr, "bench_dense: %s\n", cairn_errmsg());                                        \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

int main(int argc, char **argv) {
  bench_opts o;
  if (bench_begin("dense", &argc, argv, &o)) return 2;
  static const int shapes[][3] = {{256, 784, 1024}, {256, 1024, 1024}, {256, 1024, 10},
                                  {1024, 784, 1024}, {1024, 1024, 1024}, {1024, 1024, 10}};
  int nshapes = o.quick ? 3 : 6;
  bench_section("dense layers vs raw cblas_sgemm, GFLOP/s; ratio = raw time / cairn time");
  for (int s = 0; s < nshapes; s++) {
    int B = shapes[s][0], in = shapes[s][1], out = shapes[s][2];
    cairn_tensor *X = mk(B, in, 1), *W = mk(in, out, 2), *b = mk(out, 0, 3), *Y = mk(B, out, 4),
                 *dY = mk(B, out, 5), *dX = mk(B, in, 6), *dW = mk(in, out, 7), *db = mk(out, 0, 8);
    float *x = cairn_tensor_f32(X), *w = cairn_tensor_f32(W), *y = cairn_tensor_f32(Y),
          *dy = cairn_tensor_f32(dY), *dx = cairn_tensor_f32(dX), *dw = cairn_tensor_f32(dW);
    const double f1 = 2.0 * B * in * out;
    /* enough calls per round for ~20 ms */
    int calls = (int)(0.02 / (3 * f1 / (50e9 * o.threads))) + 1;
    double cf[BENCH_MAX_REPEATS], rf[BENCH_MAX_REPEATS], cb[BENCH_MAX_REPEATS], rb[BENCH_MAX_REPEATS],
        qf[BENCH_MAX_REPEATS], qb[BENCH_MAX_REPEATS], qa[BENCH_MAX_REPEATS], ca[BENCH_MAX_REPEATS],
        ra[BENCH_MAX_REPEATS];
    for (int rep = -1; rep < o.repeats; rep++) { /* round -1 warms up */
      double t0 = bench_now();
      for (int c = 0; c < calls; c++) CHECK(cairn_dense_forward(X, W, b, Y));
      double t1 = bench_now();
      for (int c = 0; c < calls; c++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, out, in, 1.0f, x, in, w, out, 0.0f, y, out);
      double t2 = bench_now();
      for (int c = 0; c < calls; c++) CHECK(cairn_dense_backward(X, W, dY, dX, dW, db));
      double t3 = bench_now();
      for (int c = 0; c < calls; c++) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, in, out, 1.0f, dy, out, w, out, 0.0f, dx, in);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, in, out, B, 1.0f, x, in, dy, out, 1.0f, dw, out);
      }
      double t4 = bench_now();
      if (rep < 0) continue;
      double tcf = (t1 - t0) / calls, trf = (t2 - t1) / calls, tcb = (t3 - t2) / calls, trb = (t4 - t3) / calls;
      cf[rep] = f1 / tcf * 1e-9;
      rf[rep] = f1 / trf * 1e-9;
      cb[rep] = 2 * f1 / tcb * 1e-9;
      rb[rep] = 2 * f1 / trb * 1e-9;
      ca[rep] = 3 * f1 / (tcf + tcb) * 1e-9;
      ra[rep] = 3 * f1 / (trf + trb) * 1e-9;
      qf[rep] = trf / tcf;
      qb[rep] = trb / tcb;
      qa[rep] = (trf + trb) / (tcf + tcb);
    }
    char p[160], name[64];
    snprintf(p, sizeof p, "\"B\": %d, \"in\": %d, \"out\": %d", B, in, out);
    const char *what[3] = {"fwd", "bwd", "fwd+bwd"};
    double *cv[3] = {cf, cb, ca}, *rv[3] = {rf, rb, ra}, *qv[3] = {qf, qb, qa};
    for (int k = 0; k < 3; k++) {
      bench_stats rs = bench_stats_of(rv[k], o.repeats);
      snprintf(name, sizeof name, "sgemm_%s/B%d_%dx%d", what[k], B, in, out);
      bench_emit(name, p, rs, "GFLOP/s", bench_mach.peak_gflops > 0 ? rs.median / bench_mach.peak_gflops : 0,
                 "peak_gflops_fma");
      snprintf(name, sizeof name, "dense_%s/B%d_%dx%d", what[k], B, in, out);
      bench_emit(name, p, bench_stats_of(cv[k], o.repeats), "GFLOP/s", bench_stats_of(qv[k], o.repeats).median,
                 "raw_sgemm_same_shapes");
    }
    cairn_tensor_free(X); cairn_tensor_free(W); cairn_tensor_free(b); cairn_tensor_free(Y);
    cairn_tensor_free(dY); cairn_tensor_free(dX); cairn_tensor_free(dW); cairn_tensor_free(db);
  }
  return 0;
}
