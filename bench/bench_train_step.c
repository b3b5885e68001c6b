/* bench_train_step: the MLP 784-1024-1024-10 (ReLU, sparse softmax
 * cross-entropy), batch 256: a training step with Adam and with SGD, and
 * the inference forward, each next to its GEMM-only floor measured in the
 * same round (the floor of a step is its 8 cblas_sgemm calls: 3 forward,
 * 3 dW, 2 dX; of the forward, its 3 forward calls), at the run's thread
 * count, interleaved round by round. The ratio is cairn time / floor time
 * (lower is better; 1.0 is the floor). Extends bench_mlp_step.
 *
 *   bench_train_step [--threads T] [--repeats R] [--quick] [--no-machine]
 *                    [--batch B] [--steps K]
 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cairn.h>

#include "bench_common.h"

#define CHECK(x)                                                                                   \
  do {                                                                                             \
    if (x) {                                                                                       \
      fprintf(stderr, "bench_train_step: %s\n", cairn_errmsg());                                   \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static const int64_t sizes[4] = {784, 1024, 1024, 10};
static int64_t B = 256;
static float *A[4], *W[3], *G[3], *D[4];

static void fill(float *p, size_t n, uint64_t seed) {
  cairn_rng r;
  cairn_rng_init(&r, seed, 7);
  for (size_t i = 0; i < n; i++) p[i] = cairn_rng_uniform(&r) - 0.5f;
}

static void gemm_forward(void) {
  for (int i = 0; i < 3; i++) /* A_{i+1} = A_i·W_i */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)B, (int)sizes[i + 1], (int)sizes[i], 1.0f, A[i],
                (int)sizes[i], W[i], (int)sizes[i + 1], 0.0f, A[i + 1], (int)sizes[i + 1]);
}

static void gemm_step(void) {
  gemm_forward();
  for (int i = 2; i >= 0; i--) { /* dW_i = A_iᵀ·D_{i+1};  D_i = D_{i+1}·W_iᵀ for i > 0 */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)sizes[i], (int)sizes[i + 1], (int)B, 1.0f, A[i],
                (int)sizes[i], D[i + 1], (int)sizes[i + 1], 0.0f, G[i], (int)sizes[i + 1]);
    if (i > 0)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)B, (int)sizes[i], (int)sizes[i + 1], 1.0f, D[i + 1],
                  (int)sizes[i + 1], W[i], (int)sizes[i + 1], 0.0f, D[i], (int)sizes[i]);
  }
}

static cairn_mlp *make_mlp(cairn_optim_kind kind, cairn_registry **reg) {
  cairn_mlp *m;
  cairn_mlp_config cfg = {.n_layers = 3, .sizes = sizes, .hidden_act = CAIRN_ACT_RELU,
                          .loss = CAIRN_LOSS_SPARSE_SOFTMAX_XENT, .optim = cairn_optim_defaults(kind)};
  CHECK(cairn_registry_new(1, reg));
  CHECK(cairn_mlp_new(*reg, &cfg, &m));
  CHECK(cairn_registry_initialize_collection(*reg, CAIRN_COLL_GLOBAL));
  return m;
}

int main(int argc, char **argv) {
  bench_opts o;
  if (bench_begin("train-step", &argc, argv, &o)) return 2;
  int steps = o.quick ? 5 : 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--batch")) B = atoll(argv[i + 1]);
    else if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
  }
  if (B < 1 || steps < 1) {
    fprintf(stderr, "bench_train_step: --batch B>=1 --steps K>=1\n");
    return 2;
  }
  cairn_registry *ra, *rs;
  cairn_mlp *adam = make_mlp(CAIRN_OPTIM_ADAM, &ra), *sgd = make_mlp(CAIRN_OPTIM_SGD, &rs);
  cairn_tensor *X, *Y;
  int64_t xs[2] = {B, 784};
  CHECK(cairn_tensor_new(CAIRN_DTYPE_F32, 2, xs, &X));
  CHECK(cairn_tensor_new(CAIRN_DTYPE_I32, 1, &B, &Y));
  fill(cairn_tensor_f32(X), (size_t)X->size, 3);
  for (int64_t i = 0; i < B; i++) cairn_tensor_i32(Y)[i] = (int32_t)(i % 10);
  for (int i = 0; i < 4; i++) {
    A[i] = bench_alloc((size_t)(B * sizes[i]) * sizeof(float));
    D[i] = bench_alloc((size_t)(B * sizes[i]) * sizeof(float));
    fill(A[i], (size_t)(B * sizes[i]), 10 + (uint64_t)i);
    fill(D[i], (size_t)(B * sizes[i]), 20 + (uint64_t)i);
  }
  for (int i = 0; i < 3; i++) {
    W[i] = bench_alloc((size_t)(sizes[i] * sizes[i + 1]) * sizeof(float));
    G[i] = bench_alloc((size_t)(sizes[i] * sizes[i + 1]) * sizeof(float));
    fill(W[i], (size_t)(sizes[i] * sizes[i + 1]), 30 + (uint64_t)i);
  }
  enum { T_ADAM, T_SGD, T_FWD, T_GSTEP, T_GFWD, NT };
  double t[NT][BENCH_MAX_REPEATS], q[3][BENCH_MAX_REPEATS];
  float loss = 0;
  const cairn_tensor *logits;
  for (int rep = -1; rep < o.repeats; rep++) { /* round -1 warms up */
    double t0 = bench_now();
    for (int k = 0; k < steps; k++) CHECK(cairn_mlp_train_step(adam, X, Y, &loss));
    double t1 = bench_now();
    for (int k = 0; k < steps; k++) gemm_step();
    double t2 = bench_now();
    for (int k = 0; k < steps; k++) CHECK(cairn_mlp_train_step(sgd, X, Y, &loss));
    double t3 = bench_now();
    for (int k = 0; k < steps; k++) CHECK(cairn_mlp_forward(adam, X, &logits));
    double t4 = bench_now();
    for (int k = 0; k < steps; k++) gemm_forward();
    double t5 = bench_now();
    if (rep < 0) continue;
    t[T_ADAM][rep] = 1e3 * (t1 - t0) / steps;
    t[T_GSTEP][rep] = 1e3 * (t2 - t1) / steps;
    t[T_SGD][rep] = 1e3 * (t3 - t2) / steps;
    t[T_FWD][rep] = 1e3 * (t4 - t3) / steps;
    t[T_GFWD][rep] = 1e3 * (t5 - t4) / steps;
    q[0][rep] = t[T_ADAM][rep] / t[T_GSTEP][rep];
    q[1][rep] = t[T_SGD][rep] / t[T_GSTEP][rep];
    q[2][rep] = t[T_FWD][rep] / t[T_GFWD][rep];
  }
  char p[200];
  snprintf(p, sizeof p, "\"model\": \"784-1024-1024-10 relu sparse-xent\", \"batch\": %lld, \"steps_per_round\": %d",
           (long long)B, steps);
  bench_section("MLP 784-1024-1024-10, ms; ratio = cairn / GEMM-only floor of the same work, same round");
  bench_emit("gemm_floor_step", p, bench_stats_of(t[T_GSTEP], o.repeats), "ms", 0, NULL);
  bench_emit("train_step_adam", p, bench_stats_of(t[T_ADAM], o.repeats), "ms", bench_stats_of(q[0], o.repeats).median,
             "gemm_floor_step");
  bench_emit("train_step_sgd", p, bench_stats_of(t[T_SGD], o.repeats), "ms", bench_stats_of(q[1], o.repeats).median,
             "gemm_floor_step");
  bench_emit("gemm_floor_forward", p, bench_stats_of(t[T_GFWD], o.repeats), "ms", 0, NULL);
  bench_emit("inference_forward", p, bench_stats_of(t[T_FWD], o.repeats), "ms", bench_stats_of(q[2], o.repeats).median,
             "gemm_floor_forward");
  fprintf(stderr, "last loss %.5f\n", (double)loss);
  for (int i = 0; i < 4; i++) {
    cairn_free(A[i]);
    cairn_free(D[i]);
  }
  for (int i = 0; i < 3; i++) {
    cairn_free(W[i]);
    cairn_free(G[i]);
  }
  cairn_tensor_free(X);
  cairn_tensor_free(Y);
  cairn_mlp_free(adam);
  cairn_mlp_free(sgd);
  cairn_registry_free(ra);
  cairn_registry_free(rs);
  return 0;
}
