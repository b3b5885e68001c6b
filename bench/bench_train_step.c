/* bench_train_step: the MLP 784-1024-1024-10 (ReLU, sparse softmax
 * cross-entropy), batch 256: a training step with Adam and with SGD, and
 * the inference forward, each next to its GEMM-only floor measured in the
 * same round (the floor of a step is its 8 GEMMs: 3 forward, 3 dW, 2 dX; of
 * the forward, its 3 forward GEMMs), at the run's thread count, interleaved
 * round by round. The ratio is cairn time / floor time (lower is better;
 * 1.0 is the floor). Extends bench_mlp_step.
 *
 * Two floors: gemm_floor_* runs the GEMMs as cairn runs them (cairn__sgemm:
 * the same blocks and libraries, without bias or activation);
 * gemm_best_floor_* takes, GEMM by GEMM and round by round, the fastest of
 * the alternatives measured next to it (gemm/<call> lines): cairn's blocks,
 * one plain cblas_sgemm call with the BLAS's own threads, the same with the
 * weight stored (out, in) as PyTorch stores it, and oneDNN's sgemm both ways
 * when libdnnl-dev is installed. The best floor is the distance to the
 * fastest GEMM on the machine, not to cairn's own.
 *
 * A third line, fma_peak_floor_*, is no program at all: the work's FLOPs
 * (2·M·N·K summed over its GEMMs) divided by the FMA peak measured at the
 * run's thread count in the same round (bench_fma.c). Nothing that does
 * these GEMMs in fp32 can run faster on this machine, so a peer's time over
 * it is the most any program could be faster than that peer here.
 *
 * bf16 rows (doc/bf16.md): the same model with CAIRN_PRECISION_BF16, its
 * Adam step and inference forward (train_step_adam_bf16,
 * inference_forward_bf16), next to bf16_peak_floor_*: the FLOPs at the
 * bf16 dot-product peak (a vdpbf16ps loop, bench_fma.c) measured in the
 * same round, when the CPU has avx512_bf16.
 *
 *   bench_train_step [--threads T] [--repeats R] [--quick] [--no-machine]
 *                    [--batch B] [--steps K]
 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#ifdef BENCH_HAVE_DNNL
#include <dnnl.h>
#endif

#include <cairn.h>

#include "bench_common.h"

/* lib/gemm.c (libcairn_core is linked in statically, hidden symbols too) */
void cairn__sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc, const float *bias);

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

/* The step's 8 GEMMs, C = op(A)·op(B): forward A_{i+1} = A_i·W_i (NN);
 * backward dW_i = A_iᵀ·D_{i+1} (TN) and, for i > 0, D_i = D_{i+1}·W_iᵀ (NT).
 * WT_i is W_i stored (out, in): the flipped form uses it (forward NT, dX NN). */
static float *WT[3];
typedef struct gemm_call {
  char name[32];
  int ta, tb, M, N, K, lda, ldb, ldc;
  const float *A, *B, *Bt; /* Bt: op(B) from the flipped storage (NULL: none) */
  float *C;
} gemm_call;
static gemm_call calls[8];
static int n_calls;

static void add_call(const char *what, int i, int ta, int tb, int M, int N, int K, const float *Am, const float *Bm,
                     const float *Bt, float *C) {
  gemm_call *c = &calls[n_calls++];
  snprintf(c->name, sizeof c->name, "%s%d_%dx%dx%d", what, i, M, N, K);
  c->ta = ta, c->tb = tb, c->M = M, c->N = N, c->K = K;
  c->lda = ta ? M : K, c->ldb = tb ? K : N, c->ldc = N;
  c->A = Am, c->B = Bm, c->Bt = Bt, c->C = C;
}

static void setup_calls(void) {
  for (int i = 0; i < 3; i++)
    add_call("fwd", i, 0, 0, (int)B, (int)sizes[i + 1], (int)sizes[i], A[i], W[i], WT[i], A[i + 1]);
  for (int i = 2; i >= 0; i--) {
    add_call("dW", i, 1, 0, (int)sizes[i], (int)sizes[i + 1], (int)B, A[i], D[i + 1], NULL, G[i]);
    if (i > 0) add_call("dX", i, 0, 1, (int)B, (int)sizes[i], (int)sizes[i + 1], D[i + 1], W[i], WT[i], D[i]);
  }
}

enum { ALT_CAIRN, ALT_BLAS, ALT_BLAS_FLIP, ALT_DNNL, ALT_DNNL_FLIP, N_ALT };
static const char *alt_name[N_ALT] = {"cairn_blocks", "blas_one_call", "blas_weight_out_in", "dnnl_one_call",
                                      "dnnl_weight_out_in"};

/* Runs call c as alternative a; returns 0 when a does not apply. */
static int run_call(const gemm_call *c, int a) {
  int flip = a == ALT_BLAS_FLIP || a == ALT_DNNL_FLIP;
  if (flip && !c->Bt) return 0;
  int tb = flip ? !c->tb : c->tb, ldb = tb ? c->K : c->N;
  const float *Bm = flip ? c->Bt : c->B;
  switch (a) {
    case ALT_CAIRN:
      cairn__sgemm(c->ta, c->tb, c->M, c->N, c->K, 1.0f, c->A, c->lda, c->B, c->ldb, 0.0f, c->C, c->ldc, NULL);
      return 1;
    case ALT_BLAS:
    case ALT_BLAS_FLIP:
      cblas_sgemm(CblasRowMajor, c->ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, c->M, c->N, c->K,
                  1.0f, c->A, c->lda, Bm, ldb, 0.0f, c->C, c->ldc);
      return 1;
#ifdef BENCH_HAVE_DNNL
    case ALT_DNNL:
    case ALT_DNNL_FLIP:
      return dnnl_sgemm(c->ta ? 'T' : 'N', tb ? 'T' : 'N', c->M, c->N, c->K, 1.0f, c->A, c->lda, Bm, ldb, 0.0f, c->C,
                        c->ldc) == dnnl_success;
#endif
    default: return 0;
  }
}

/* The chosen formulation: the calls as cairn runs them. */
static void gemm_forward(void) {
  for (int c = 0; c < 3; c++) run_call(&calls[c], ALT_CAIRN);
}

static void gemm_step(void) {
  for (int c = 0; c < n_calls; c++) run_call(&calls[c], ALT_CAIRN);
}

static cairn_mlp *make_mlp_p(cairn_optim_kind kind, cairn_precision prec, cairn_registry **reg) {
  cairn_mlp *m;
  cairn_mlp_config cfg = {.n_layers = 3, .sizes = sizes, .hidden_act = CAIRN_ACT_RELU,
                          .loss = CAIRN_LOSS_SPARSE_SOFTMAX_XENT, .optim = cairn_optim_defaults(kind), .precision = prec};
  CHECK(cairn_registry_new(1, reg));
  CHECK(cairn_mlp_new(*reg, &cfg, &m));
  CHECK(cairn_registry_initialize_collection(*reg, CAIRN_COLL_GLOBAL));
  return m;
}
static cairn_mlp *make_mlp(cairn_optim_kind kind, cairn_registry **reg) {
  return make_mlp_p(kind, CAIRN_PRECISION_F32, reg);
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
  cairn_registry *rb;
  cairn_mlp *adam16 = make_mlp_p(CAIRN_OPTIM_ADAM, CAIRN_PRECISION_BF16, &rb);
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
    WT[i] = bench_alloc((size_t)(sizes[i] * sizes[i + 1]) * sizeof(float));
    for (int64_t r = 0; r < sizes[i]; r++)
      for (int64_t k = 0; k < sizes[i + 1]; k++) WT[i][k * sizes[i] + r] = W[i][r * sizes[i + 1] + k];
  }
  setup_calls();
  /* per call and alternative, ms per call; the best floors, ms */
  static double tc[8][N_ALT][BENCH_MAX_REPEATS], best_step[BENCH_MAX_REPEATS], best_fwd[BENCH_MAX_REPEATS];
  int have_alt[N_ALT] = {0};
  enum { T_ADAM, T_SGD, T_FWD, T_GSTEP, T_GFWD, NT };
  double t[NT][BENCH_MAX_REPEATS], q[3][BENCH_MAX_REPEATS];
  double peak_step[BENCH_MAX_REPEATS], peak_fwd[BENCH_MAX_REPEATS], q_peak[3][BENCH_MAX_REPEATS];
  double t16[2][BENCH_MAX_REPEATS], q16[2][BENCH_MAX_REPEATS], peak16_step[BENCH_MAX_REPEATS],
      peak16_fwd[BENCH_MAX_REPEATS], q16_peak[2][BENCH_MAX_REPEATS];
  int have_peak16 = 1;
  double flops_step = 0, flops_fwd = 0;
  for (int c = 0; c < n_calls; c++) {
    double f = 2.0 * calls[c].M * calls[c].N * (double)calls[c].K;
    flops_step += f;
    if (c < 3) flops_fwd += f;
  }
  int have_peak = 1;
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
    for (int k = 0; k < steps; k++) CHECK(cairn_mlp_train_step(adam16, X, Y, &loss));
    double t6 = bench_now();
    for (int k = 0; k < steps; k++) CHECK(cairn_mlp_forward(adam16, X, &logits));
    double t7 = bench_now();
    /* each GEMM alone, each alternative right after the other */
    double bs = 0, bf = 0;
    const int calls_per = steps < 3 ? steps : 3; /* 5 alternatives x 8 GEMMs: keep the round short */
    for (int c = 0; c < n_calls; c++) {
      double best = 1e30;
      for (int a = 0; a < N_ALT; a++) {
        double u0 = bench_now();
        int ok = 1;
        for (int k = 0; k < calls_per && ok; k++) ok = run_call(&calls[c], a);
        double u = 1e3 * (bench_now() - u0) / calls_per;
        if (!ok) continue;
        have_alt[a] = 1;
        if (rep >= 0) tc[c][a][rep] = u;
        if (u < best) best = u;
      }
      bs += best;
      if (c < 3) bf += best;
    }
    if (rep < 0) continue;
    best_step[rep] = bs;
    best_fwd[rep] = bf;
    t[T_ADAM][rep] = 1e3 * (t1 - t0) / steps;
    t[T_GSTEP][rep] = 1e3 * (t2 - t1) / steps;
    t[T_SGD][rep] = 1e3 * (t3 - t2) / steps;
    t[T_FWD][rep] = 1e3 * (t4 - t3) / steps;
    t[T_GFWD][rep] = 1e3 * (t5 - t4) / steps;
    q[0][rep] = t[T_ADAM][rep] / t[T_GSTEP][rep];
    q[1][rep] = t[T_SGD][rep] / t[T_GSTEP][rep];
    q[2][rep] = t[T_FWD][rep] / t[T_GFWD][rep];
    t16[0][rep] = 1e3 * (t6 - t5) / steps;
    t16[1][rep] = 1e3 * (t7 - t6) / steps;
    q16[0][rep] = t16[0][rep] / t[T_ADAM][rep]; /* bf16 / fp32, same round */
    q16[1][rep] = t16[1][rep] / t[T_FWD][rep];
    double peak16 = bench_bf16_peak(o.threads);
    if (peak16 > 0) {
      peak16_step[rep] = flops_step / (peak16 * 1e6);
      peak16_fwd[rep] = flops_fwd / (peak16 * 1e6);
      q16_peak[0][rep] = t16[0][rep] / peak16_step[rep];
      q16_peak[1][rep] = t16[1][rep] / peak16_fwd[rep];
    } else {
      have_peak16 = 0;
    }
    /* GFLOP/s of the FMA loop on this round's threads: FLOPs / it, in ms */
    double peak = bench_fma_peak(o.threads);
    if (peak <= 0) {
      have_peak = 0; /* no AVX2+FMA: no peak to divide by */
      continue;
    }
    peak_step[rep] = flops_step / (peak * 1e6);
    peak_fwd[rep] = flops_fwd / (peak * 1e6);
    q_peak[0][rep] = t[T_ADAM][rep] / peak_step[rep];
    q_peak[1][rep] = t[T_SGD][rep] / peak_step[rep];
    q_peak[2][rep] = t[T_FWD][rep] / peak_fwd[rep];
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
  bench_emit("gemm_best_floor_step", p, bench_stats_of(best_step, o.repeats), "ms", 0, NULL);
  bench_emit("gemm_best_floor_forward", p, bench_stats_of(best_fwd, o.repeats), "ms", 0, NULL);
  if (have_peak) {
    char pf[300];
    bench_section("the same work at the FMA peak (FLOPs / peak GFLOP/s of this round); ratio = cairn / it");
    snprintf(pf, sizeof pf, "%s, \"gflop\": %.4f", p, flops_step * 1e-9);
    bench_emit("fma_peak_floor_step", pf, bench_stats_of(peak_step, o.repeats), "ms", 0, NULL);
    bench_emit("train_step_adam_over_peak", pf, bench_stats_of(q_peak[0], o.repeats), "x", 0, NULL);
    bench_emit("train_step_sgd_over_peak", pf, bench_stats_of(q_peak[1], o.repeats), "x", 0, NULL);
    snprintf(pf, sizeof pf, "%s, \"gflop\": %.4f", p, flops_fwd * 1e-9);
    bench_emit("fma_peak_floor_forward", pf, bench_stats_of(peak_fwd, o.repeats), "ms", 0, NULL);
    bench_emit("inference_forward_over_peak", pf, bench_stats_of(q_peak[2], o.repeats), "x", 0, NULL);
  }
  bench_section("bf16 (CAIRN_PRECISION_BF16), ms; ratio = bf16 / fp32 of the same round");
  bench_emit("train_step_adam_bf16", p, bench_stats_of(t16[0], o.repeats), "ms", bench_stats_of(q16[0], o.repeats).median,
             "train_step_adam");
  bench_emit("inference_forward_bf16", p, bench_stats_of(t16[1], o.repeats), "ms",
             bench_stats_of(q16[1], o.repeats).median, "inference_forward");
  if (have_peak16) {
    char pf[300];
    bench_section("the same work at the bf16 dot-product peak (vdpbf16ps loop of this round); ratio = cairn bf16 / it");
    snprintf(pf, sizeof pf, "%s, \"gflop\": %.4f", p, flops_step * 1e-9);
    bench_emit("bf16_peak_floor_step", pf, bench_stats_of(peak16_step, o.repeats), "ms", 0, NULL);
    bench_emit("train_step_adam_bf16_over_peak", pf, bench_stats_of(q16_peak[0], o.repeats), "x", 0, NULL);
    snprintf(pf, sizeof pf, "%s, \"gflop\": %.4f", p, flops_fwd * 1e-9);
    bench_emit("bf16_peak_floor_forward", pf, bench_stats_of(peak16_fwd, o.repeats), "ms", 0, NULL);
    bench_emit("inference_forward_bf16_over_peak", pf, bench_stats_of(q16_peak[1], o.repeats), "x", 0, NULL);
  }
  bench_section("the step's GEMMs one by one, ms per call; ratio = cairn's blocks / this alternative");
  for (int c = 0; c < n_calls; c++)
    for (int a = 0; a < N_ALT; a++) {
      if (!have_alt[a] || (a == ALT_BLAS_FLIP || a == ALT_DNNL_FLIP ? !calls[c].Bt : 0)) continue;
      double q2[BENCH_MAX_REPEATS];
      for (int r = 0; r < o.repeats; r++) q2[r] = tc[c][ALT_CAIRN][r] / tc[c][a][r];
      char name[80], pp[120];
      snprintf(name, sizeof name, "gemm/%.31s", calls[c].name);
      snprintf(pp, sizeof pp, "\"alt\": \"%s\", \"trans\": \"%c%c\"", alt_name[a], calls[c].ta ? 'T' : 'N',
               (a == ALT_BLAS_FLIP || a == ALT_DNNL_FLIP) != !!calls[c].tb ? 'T' : 'N');
      bench_emit(name, pp, bench_stats_of(tc[c][a], o.repeats), "ms", bench_stats_of(q2, o.repeats).median,
                 "cairn_blocks");
    }
  fprintf(stderr, "last loss %.5f\n", (double)loss);
  for (int i = 0; i < 4; i++) {
    cairn_free(A[i]);
    cairn_free(D[i]);
  }
  for (int i = 0; i < 3; i++) {
    cairn_free(W[i]);
    cairn_free(G[i]);
    cairn_free(WT[i]);
  }
  cairn_tensor_free(X);
  cairn_tensor_free(Y);
  cairn_mlp_free(adam);
  cairn_mlp_free(sgd);
  cairn_mlp_free(adam16);
  cairn_registry_free(rb);
  cairn_registry_free(ra);
  cairn_registry_free(rs);
  return 0;
}
