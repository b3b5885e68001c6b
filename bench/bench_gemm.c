/* bench_gemm: cairn's GEMM (cairn__sgemm, the dense layers' products) on
 * each engine, OpenBLAS and oneDNN matmul, side by side, in GFLOP/s
 * (2·M·N·K per call), interleaved round by round so that load from other
 * programs falls on both alike. Shapes: 256x1024x1024 in every transpose
 * pair, and the three GEMMs of each layer of the MLP 784-1024-1024-10 at
 * batch 256 and 1024 (forward X·W NN, dX = dY·Wᵀ NT, dW = Xᵀ·dY TN). The ratio is
 * OpenBLAS time / oneDNN time (> 1: oneDNN is faster).
 *
 *   bench_gemm [--threads T] [--repeats R] [--quick] [--no-machine]
 *
 * Without oneDNN in the build, only OpenBLAS is timed. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>

#include <cairn.h>

#include "bench_common.h"
#include "gemm_impl.h"

void cairn__sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc, const float *bias);

static float *mk(size_t n, unsigned seed) {
  float *p = bench_alloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) p[i] = (float)((i * 2654435761u + seed) % 2003u) / 2003.0f - 0.5f;
  return p;
}

int main(int argc, char **argv) {
  bench_opts o;
  if (bench_begin("gemm", &argc, argv, &o)) return 2;
  /* ta, tb, M, N, K */
  static const int shapes[][5] = {
      {0, 0, 256, 1024, 1024}, {0, 1, 256, 1024, 1024}, {1, 0, 256, 1024, 1024}, {1, 1, 256, 1024, 1024},
      {0, 0, 256, 1024, 784},  {0, 1, 256, 784, 1024},  {1, 0, 784, 1024, 256},  /* layer 1 */
      {0, 0, 256, 1024, 1024}, {0, 1, 256, 1024, 1024}, {1, 0, 1024, 1024, 256}, /* layer 2 */
      {0, 0, 256, 10, 1024},   {0, 1, 256, 1024, 10},   {1, 0, 1024, 10, 256},   /* layer 3 */
      /* the same layers at batch 1024 */
      {0, 0, 1024, 1024, 784}, {0, 1, 1024, 784, 1024}, {1, 0, 784, 1024, 1024},
      {0, 0, 1024, 1024, 1024}, {0, 1, 1024, 1024, 1024}, {1, 0, 1024, 1024, 1024},
      {0, 0, 1024, 10, 1024},  {0, 1, 1024, 1024, 10},  {1, 0, 1024, 10, 1024}};
  static const char *what[] = {"square",     "square",     "square",     "square",     "mlp_l1_fwd",
                               "mlp_l1_dx",  "mlp_l1_dw",  "mlp_l2_fwd", "mlp_l2_dx",  "mlp_l2_dw",
                               "mlp_l3_fwd", "mlp_l3_dx",  "mlp_l3_dw",  "mlp_l1_fwd", "mlp_l1_dx",
                               "mlp_l1_dw",  "mlp_l2_fwd", "mlp_l2_dx",  "mlp_l2_dw",  "mlp_l3_fwd",
                               "mlp_l3_dx",  "mlp_l3_dw"};
  const int nshapes = o.quick ? 4 : (int)(sizeof shapes / sizeof shapes[0]);
  const int have_dnnl = cairn__dnnl_available();
  const int engines[2] = {CAIRN__GEMM_OPENBLAS, CAIRN__GEMM_ONEDNN};
  const char *names[2] = {"openblas", "onednn"};
  bench_section("cairn__sgemm on each engine, GFLOP/s; ratio = OpenBLAS time / oneDNN time");
  for (int s = 0; s < nshapes; s++) {
    const int ta = shapes[s][0], tb = shapes[s][1], M = shapes[s][2], N = shapes[s][3], K = shapes[s][4];
    const int lda = ta ? M : K, ldb = tb ? K : N;
    float *A = mk((size_t)M * K, 1), *B = mk((size_t)K * N, 2), *C = mk((size_t)M * N, 3);
    const double f = 2.0 * M * N * (double)K;
    int calls = (int)(0.03 / (f / (40e9 * o.threads))) + 1; /* ~30 ms per round */
    double g[2][BENCH_MAX_REPEATS], q[BENCH_MAX_REPEATS];
    for (int rep = -1; rep < o.repeats; rep++) { /* round -1 warms up (and makes the primitives) */
      double t[2] = {0, 0};
      for (int e = 0; e < 1 + have_dnnl; e++) {
        cairn__gemm_engine_force(engines[e]);
        double t0 = bench_now();
        for (int c = 0; c < calls; c++) cairn__sgemm(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, N, NULL);
        t[e] = (bench_now() - t0) / calls;
      }
      if (rep < 0) continue;
      for (int e = 0; e < 2; e++) g[e][rep] = t[e] > 0 ? f / t[e] * 1e-9 : 0;
      q[rep] = have_dnnl ? t[0] / t[1] : 0;
    }
    cairn__gemm_engine_force(-1);
    char p[160], name[96];
    snprintf(p, sizeof p, "\"ta\": %d, \"tb\": %d, \"M\": %d, \"N\": %d, \"K\": %d", ta, tb, M, N, K);
    for (int e = 0; e < 1 + have_dnnl; e++) {
      snprintf(name, sizeof name, "%s/%s_%c%c_%dx%dx%d", names[e], what[s], ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K);
      if (e == 0)
        bench_emit(name, p, bench_stats_of(g[0], o.repeats), "GFLOP/s",
                   bench_mach.peak_gflops > 0 ? bench_stats_of(g[0], o.repeats).median / bench_mach.peak_gflops : 0,
                   "peak_gflops_fma");
      else
        bench_emit(name, p, bench_stats_of(g[1], o.repeats), "GFLOP/s", bench_stats_of(q, o.repeats).median,
                   "openblas_time_over_onednn_time");
    }
    cairn_free(A), cairn_free(B), cairn_free(C);
  }
  return 0;
}
