/* bench_mlp_step: one MLP training step (default 784-1024-1024-10, ReLU,
 * sparse softmax cross-entropy, Adam) next to the GEMM-only floor of the
 * same step (the cblas_sgemm calls it makes: per layer a forward, a dW and,
 * but for the first, a dX), interleaved round by round because the machine
 * is shared. Prints JSON.
 *
 * --sizes 784,256,128,10 times another model (the Fashion-MNIST demo's);
 * --compare-bf16 also times the same model in CAIRN_PRECISION_BF16 in every
 * round, right after the fp32 steps, and reports the bf16 step and the
 * ratio bf16 / fp32 (median and quartiles of the per-round ratios);
 * --cpu-time measures the process's CPU time (user + sys) instead of the
 * wall clock: at one thread, what the step costs whatever else the machine
 * runs.
 *
 *   bench_mlp_step [--batch B] [--rounds R] [--steps K] [--threads T]
 *                  [--sizes I,H1,...,O] [--compare-bf16] [--cpu-time]
 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cairn.h>

static int cpu_time;
static double now(void) {
  struct timespec ts;
  clock_gettime(cpu_time ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* v sorted in place; its quartile q (1, 2, 3) by linear interpolation */
static double quartile(double *v, int n, int q) {
  qsort(v, (size_t)n, sizeof(double), cmp);
  double pos = (n - 1) * q / 4.0;
  int i = (int)pos;
  return i + 1 < n ? v[i] + (pos - i) * (v[i + 1] - v[i]) : v[i];
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

#define MAXL CAIRN_MLP_MAX_LAYERS
static int64_t sizes[MAXL + 1] = {784, 1024, 1024, 10};
static int n_layers = 3;

/* "784,256,128,10" into sizes; 0, or -1 when it is not 2..MAXL+1 widths >= 1 */
static int parse_sizes(const char *s) {
  int n = 0;
  while (*s && n <= MAXL) {
    char *end;
    long long v = strtoll(s, &end, 10);
    if (end == s || v < 1 || (*end && *end != ',')) return -1;
    sizes[n++] = v;
    s = *end ? end + 1 : end;
  }
  if (*s || n < 2) return -1;
  n_layers = n - 1;
  return 0;
}

static cairn_mlp *make(cairn_precision p, cairn_registry **reg) {
  cairn_mlp *mlp;
  cairn_mlp_config cfg = {.n_layers = n_layers, .sizes = sizes, .hidden_act = CAIRN_ACT_RELU,
                          .loss = CAIRN_LOSS_SPARSE_SOFTMAX_XENT, .optim = cairn_optim_defaults(CAIRN_OPTIM_ADAM),
                          .precision = p};
  if (cairn_registry_new(1, reg) || cairn_mlp_new(*reg, &cfg, &mlp) ||
      cairn_registry_initialize_collection(*reg, CAIRN_COLL_GLOBAL))
    return NULL;
  return mlp;
}

/* Buffers of the GEMM-only step: activations A_i (B, sizes[i]), their
 * gradients D_i, weights W_i and weight gradients G_i. */
static float *A[MAXL + 1], *D[MAXL + 1], *W[MAXL], *G[MAXL];

static void gemm_step(int B) {
  for (int i = 0; i < n_layers; i++) /* A_{i+1} = A_i·W_i */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, (int)sizes[i + 1], (int)sizes[i], 1.0f, A[i],
                (int)sizes[i], W[i], (int)sizes[i + 1], 0.0f, A[i + 1], (int)sizes[i + 1]);
  for (int i = n_layers - 1; i >= 0; i--) { /* dW_i = A_iᵀ·D_{i+1};  D_i = D_{i+1}·W_iᵀ for i > 0 */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)sizes[i], (int)sizes[i + 1], B, 1.0f, A[i],
                (int)sizes[i], D[i + 1], (int)sizes[i + 1], 0.0f, G[i], (int)sizes[i + 1]);
    if (i > 0)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, (int)sizes[i], (int)sizes[i + 1], 1.0f, D[i + 1],
                  (int)sizes[i + 1], W[i], (int)sizes[i + 1], 0.0f, D[i], (int)sizes[i]);
  }
}

static void print_model(void) {
  printf("  \"model\": \"");
  for (int i = 0; i <= n_layers; i++) printf("%s%lld", i ? "-" : "", (long long)sizes[i]);
  printf(" relu, sparse softmax xent, adam\",\n");
}

int main(int argc, char **argv) {
  cairn_blas_coretype_fix(argv);
  int64_t B = 256;
  int rounds = 7, steps = 10, threads = 0, bf16 = 0, bad = 0;
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : "";
    if (!strcmp(argv[i], "--compare-bf16")) bf16 = 1;
    else if (!strcmp(argv[i], "--cpu-time")) cpu_time = 1;
    else if (!strcmp(argv[i], "--batch")) B = atoll(v), i++;
    else if (!strcmp(argv[i], "--rounds")) rounds = atoi(v), i++;
    else if (!strcmp(argv[i], "--steps")) steps = atoi(v), i++;
    else if (!strcmp(argv[i], "--threads")) threads = atoi(v), i++;
    else if (!strcmp(argv[i], "--sizes")) bad |= parse_sizes(v) != 0, i++;
    else bad = 1;
  }
  if (bad || B < 1 || rounds < 1 || rounds > 100 || steps < 1) {
    fprintf(stderr, "usage: bench_mlp_step [--batch B] [--rounds R<=100] [--steps K] [--threads T] "
                    "[--sizes I,H1,...,O (2..%d widths)] [--compare-bf16] [--cpu-time]\n", MAXL + 1);
    return 2;
  }
  if (threads > 0 && cairn_set_num_threads(threads)) DIE("threads");
  cairn_registry *reg, *reg16 = NULL;
  cairn_mlp *mlp = make(CAIRN_PRECISION_F32, &reg), *mlp16 = NULL;
  if (!mlp) DIE("model");
  if (bf16 && !(mlp16 = make(CAIRN_PRECISION_BF16, &reg16))) DIE("bf16 model");
  cairn_tensor *X, *Y;
  int64_t xs[2] = {B, sizes[0]};
  if (cairn_tensor_new(CAIRN_DTYPE_F32, 2, xs, &X) || cairn_tensor_new(CAIRN_DTYPE_I32, 1, &B, &Y)) DIE("data");
  fill(cairn_tensor_f32(X), (size_t)X->size, 3);
  for (int64_t i = 0; i < B; i++) cairn_tensor_i32(Y)[i] = (int32_t)(i % sizes[n_layers]);
  for (int i = 0; i <= n_layers; i++) {
    A[i] = cairn_alloc((size_t)(B * sizes[i]) * sizeof(float));
    D[i] = cairn_alloc((size_t)(B * sizes[i]) * sizeof(float));
    fill(A[i], (size_t)(B * sizes[i]), 10 + (uint64_t)i);
    fill(D[i], (size_t)(B * sizes[i]), 20 + (uint64_t)i);
  }
  for (int i = 0; i < n_layers; i++) {
    W[i] = cairn_alloc((size_t)(sizes[i] * sizes[i + 1]) * sizeof(float));
    G[i] = cairn_alloc((size_t)(sizes[i] * sizes[i + 1]) * sizeof(float));
    fill(W[i], (size_t)(sizes[i] * sizes[i + 1]), 30 + (uint64_t)i);
  }

  float loss;
  for (int w = 0; w < 3; w++)
    if (cairn_mlp_train_step(mlp, X, Y, &loss) || (mlp16 && cairn_mlp_train_step(mlp16, X, Y, &loss)))
      DIE("warm-up step");
  double t_step[100], t_gemm[100], t16[100], r16[100], ratio[100];
  for (int r = 0; r < rounds; r++) {
    double t0 = now();
    for (int k = 0; k < steps; k++)
      if (cairn_mlp_train_step(mlp, X, Y, &loss)) DIE("step");
    t_step[r] = (now() - t0) / steps;
    if (mlp16) {
      t0 = now();
      for (int k = 0; k < steps; k++)
        if (cairn_mlp_train_step(mlp16, X, Y, &loss)) DIE("bf16 step");
      t16[r] = (now() - t0) / steps;
      r16[r] = t16[r] / t_step[r];
    }
    t0 = now();
    for (int k = 0; k < steps; k++) gemm_step((int)B);
    t_gemm[r] = (now() - t0) / steps;
    ratio[r] = t_step[r] / t_gemm[r];
  }
  double flops = 0;
  for (int i = 0; i < n_layers; i++)
    flops += 2.0 * (double)B * (double)sizes[i] * (double)sizes[i + 1] * (i > 0 ? 3 : 2);
  /* sorted before their minima are read (an argument list has no order) */
  const double m_step = quartile(t_step, rounds, 2), m_gemm = quartile(t_gemm, rounds, 2);
  const double m16 = mlp16 ? quartile(t16, rounds, 2) : 0, m_ratio = quartile(ratio, rounds, 2);
  char info[512];
  printf("{\n  \"bench\": \"mlp_step\",\n  \"context\": \"%s\",\n", cairn_runtime_info(info, sizeof info));
  print_model();
  printf("  \"batch\": %lld,\n  \"clock\": \"%s\",\n", (long long)B, cpu_time ? "cpu" : "wall");
  printf("  \"rounds\": %d,\n  \"steps_per_round\": %d,\n", rounds, steps);
  printf("  \"step_over_gemm_median\": %.3f,\n", m_ratio);
  printf("  \"step_ms_median\": %.4f,\n  \"step_ms_min\": %.4f,\n", 1e3 * m_step, 1e3 * t_step[0]);
  if (mlp16) {
    printf("  \"bf16_step_ms_median\": %.4f,\n  \"bf16_step_ms_min\": %.4f,\n", 1e3 * m16,
           1e3 * t16[0]);
    double q1 = quartile(r16, rounds, 1), q3 = quartile(r16, rounds, 3);
    printf("  \"bf16_over_f32_quartiles\": [%.4f, %.4f, %.4f],\n", q1, quartile(r16, rounds, 2), q3);
    printf("  \"bf16_over_f32_median\": %.4f,\n", quartile(r16, rounds, 2));
  }
  printf("  \"gemm_only_ms_median\": %.4f,\n  \"gemm_only_ms_min\": %.4f,\n", 1e3 * m_gemm, 1e3 * t_gemm[0]);
  printf("  \"gemm_gflops_median\": %.1f,\n  \"last_loss\": %.5f\n}\n", flops / m_gemm * 1e-9,
         (double)loss);
  for (int i = 0; i <= n_layers; i++) cairn_free(A[i]), cairn_free(D[i]);
  for (int i = 0; i < n_layers; i++) cairn_free(W[i]), cairn_free(G[i]);
  cairn_tensor_free(X);
  cairn_tensor_free(Y);
  cairn_mlp_free(mlp);
  cairn_mlp_free(mlp16);
  cairn_registry_free(reg);
  cairn_registry_free(reg16);
  return 0;
}
