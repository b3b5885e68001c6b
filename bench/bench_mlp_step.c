/* bench_mlp_step: one MLP training step (784-1024-1024-10, ReLU, sparse
 * softmax cross-entropy, Adam) next to the GEMM-only floor of the same step
 * (the 8 cblas_sgemm calls it makes: 3 forward, 3 dW, 2 dX), interleaved
 * round by round because the machine is shared. Prints JSON.
 *
 *   bench_mlp_step [--batch B] [--rounds R] [--steps K] [--threads T]
 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cairn.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void fill(float *p, size_t n, uint64_t seed) {
  cairn_rng r;
  cairn_rng_init(&r, seed, 7);
  for (size_t i = 0; i < n; i++) p[i] = cairn_rng_uniform(&r) - 0.5f;
}

#define DIE(msg)                                                                                   \
  do {                                                                                             \
    fprintf(stderr, "bench_mlp_step: %s: %s\n", msg, cairn_errmsg());                              \
    return 1;                                                                                      \
  } while (0)

int main(int argc, char **argv) {
  cairn_blas_coretype_fix(argv);
  int64_t B = 256;
  int rounds = 7, steps = 10, threads = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--batch")) B = atoll(argv[i + 1]);
    else if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
  }
  if (B < 1 || rounds < 1 || rounds > 100 || steps < 1) {
    fprintf(stderr, "usage: bench_mlp_step [--batch B] [--rounds R<=100] [--steps K] [--threads T]\n");
    return 2;
  }
  if (threads > 0 && cairn_set_num_threads(threads)) DIE("threads");
  const int64_t sizes[4] = {784, 1024, 1024, 10};
  cairn_registry *reg;
  cairn_mlp *mlp;
  cairn_mlp_config cfg = {.n_layers = 3, .sizes = sizes, .hidden_act = CAIRN_ACT_RELU,
                          .loss = CAIRN_LOSS_SPARSE_SOFTMAX_XENT, .optim = cairn_optim_defaults(CAIRN_OPTIM_ADAM)};
  if (cairn_registry_new(1, &reg) || cairn_mlp_new(reg, &cfg, &mlp) ||
      cairn_registry_initialize_collection(reg, CAIRN_COLL_GLOBAL))
    DIE("model");
  cairn_tensor *X, *Y;
  int64_t xs[2] = {B, 784};
  if (cairn_tensor_new(CAIRN_DTYPE_F32, 2, xs, &X) || cairn_tensor_new(CAIRN_DTYPE_I32, 1, &B, &Y)) DIE("data");
  fill(cairn_tensor_f32(X), (size_t)X->size, 3);
  for (int64_t i = 0; i < B; i++) cairn_tensor_i32(Y)[i] = (int32_t)(i % 10);

  /* Buffers for the GEMM-only step: activations A_i (B, sizes[i]), weights
   * W_i, gradients. */
  float *A[4], *W[3], *G[3], *D[4];
  for (int i = 0; i < 4; i++) {
    A[i] = cairn_alloc((size_t)(B * sizes[i]) * sizeof(float));
    D[i] = cairn_alloc((size_t)(B * sizes[i]) * sizeof(float));
    fill(A[i], (size_t)(B * sizes[i]), 10 + (uint64_t)i);
    fill(D[i], (size_t)(B * sizes[i]), 20 + (uint64_t)i);
  }
  for (int i = 0; i < 3; i++) {
    W[i] = cairn_alloc((size_t)(sizes[i] * sizes[i + 1]) * sizeof(float));
    G[i] = cairn_alloc((size_t)(sizes[i] * sizes[i + 1]) * sizeof(float));
    fill(W[i], (size_t)(sizes[i] * sizes[i + 1]), 30 + (uint64_t)i);
  }

  float loss;
  for (int w = 0; w < 3; w++)
    if (cairn_mlp_train_step(mlp, X, Y, &loss)) DIE("warm-up step");
  double t_step[100], t_gemm[100];
  for (int r = 0; r < rounds; r++) {
    double t0 = now();
    for (int k = 0; k < steps; k++)
      if (cairn_mlp_train_step(mlp, X, Y, &loss)) DIE("step");
    t_step[r] = (now() - t0) / steps;
    t0 = now();
    for (int k = 0; k < steps; k++) {
      for (int i = 0; i < 3; i++) /* A_{i+1} = A_i·W_i */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)B, (int)sizes[i + 1], (int)sizes[i], 1.0f, A[i],
                    (int)sizes[i], W[i], (int)sizes[i + 1], 0.0f, A[i + 1], (int)sizes[i + 1]);
      for (int i = 2; i >= 0; i--) { /* dW_i = A_iᵀ·D_{i+1};  D_i = D_{i+1}·W_iᵀ for i > 0 */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)sizes[i], (int)sizes[i + 1], (int)B, 1.0f, A[i],
                    (int)sizes[i], D[i + 1], (int)sizes[i + 1], 0.0f, G[i], (int)sizes[i + 1]);
        if (i > 0)
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)B, (int)sizes[i], (int)sizes[i + 1], 1.0f,
                      D[i + 1], (int)sizes[i + 1], W[i], (int)sizes[i + 1], 0.0f, D[i], (int)sizes[i]);
      }
    }
    t_gemm[r] = (now() - t0) / steps;
  }
  double ratio[100];
  for (int r = 0; r < rounds; r++) ratio[r] = t_step[r] / t_gemm[r];
  qsort(t_step, (size_t)rounds, sizeof(double), cmp);
  qsort(t_gemm, (size_t)rounds, sizeof(double), cmp);
  qsort(ratio, (size_t)rounds, sizeof(double), cmp);
  double flops = 0;
  for (int i = 0; i < 3; i++) flops += 2.0 * (double)B * (double)sizes[i] * (double)sizes[i + 1] * (i > 0 ? 3 : 2);
  char info[512];
  printf("{\n  \"bench\": \"mlp_step\",\n  \"context\": \"%s\",\n", cairn_runtime_info(info, sizeof info));
  printf("  \"model\": \"784-1024-1024-10 relu, sparse softmax xent, adam\",\n  \"batch\": %lld,\n", (long long)B);
  printf("  \"rounds\": %d,\n  \"steps_per_round\": %d,\n", rounds, steps);
  printf("  \"step_ms_median\": %.3f,\n  \"step_ms_min\": %.3f,\n", 1e3 * t_step[rounds / 2], 1e3 * t_step[0]);
  printf("  \"gemm_only_ms_median\": %.3f,\n  \"gemm_only_ms_min\": %.3f,\n", 1e3 * t_gemm[rounds / 2], 1e3 * t_gemm[0]);
  printf("  \"step_over_gemm_median\": %.3f,\n", ratio[rounds / 2]);
  printf("  \"gemm_gflops_median\": %.1f,\n  \"last_loss\": %.5f\n}\n", flops / t_gemm[rounds / 2] * 1e-9, (double)loss);
  for (int i = 0; i < 4; i++) { cairn_free(A[i]); cairn_free(D[i]); }
  for (int i = 0; i < 3; i++) { cairn_free(W[i]); cairn_free(G[i]); }
  cairn_tensor_free(X);
  cairn_tensor_free(Y);
  cairn_mlp_free(mlp);
  cairn_registry_free(reg);
  return 0;
}
