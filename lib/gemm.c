/* cairn__sgemm: cblas_sgemm cut into blocks whose bits do not depend on the
 * thread count.
 *
 * OpenBLAS's own threading is not bitwise reproducible: with 2 threads its
 * Haswell kernels give other bits than with 1 (measured here on 0.3.21 for
 * every shape of the MLP step), because the partition decides which
 * micro-kernel, with which accumulation order, computes each element. So
 * cairn cuts C into row or column blocks and runs single-threaded BLAS on
 * each block inside its own OpenMP region (OpenBLAS's OpenMP flavour runs
 * single-threaded inside a parallel region). Either the blocks are fixed by
 * the shape (columns always, rows when the BLAS fails the check below), or
 * rows are cut only where the bits stay those of one call (see "Cutting
 * C's rows"); both give the same bits for any thread count. This also is
 * the "one thread budget": BLAS never spawns threads of its own under
 * cairn's loops. */
/* Which library runs a block, and which side of C is cut, is decided from
 * the GEMM's shape alone (never from timings), so two runs give the same
 * bits. The figures behind each rule are in bench/RESULTS.md ("GEMM
 * formulation", "Row cuts that keep the bits"). */
#define _POSIX_C_SOURCE 200809L
#include "tensor_impl.h"
#include "cairn/runtime.h"

#include <cblas.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef CAIRN_HAVE_OPENMP
#include <omp.h>
#endif
#ifdef CAIRN_BLAS_BLIS
#include <blis.h>
#endif
#include "gemm_impl.h"
#include "kernels/kernels.h"

/* The most blocks a large GEMM is cut into: the machine's processor count
 * (online processors, not the thread budget or the affinity mask, so that
 * taskset, mpirun binding and cairn_set_num_threads leave it alone) rounded
 * down to a power of two, at most 64. Fewer blocks cost less: each block
 * re-packs the operand the blocks share (measured on a 2-core machine at 1
 * thread, 784x1024 B256..1024: 0.95-0.98x raw sgemm with 1 block, 0.93-0.96
 * with 2, 0.83-0.90 with 8). CAIRN_GEMM_BLOCKS overrides it, e.g. to get the
 * same bits on machines with other core counts and the same BLAS kernels. */
static int max_blocks(void) {
  static int cached;
  int m = __atomic_load_n(&cached, __ATOMIC_RELAXED);
  if (m) return m;
  long n = cairn__env_long("CAIRN_GEMM_BLOCKS", sysconf(_SC_NPROCESSORS_ONLN), 1, 1 << 20);
  m = 1;
  while (m < 64 && m * 2 <= n) m *= 2;
  __atomic_store_n(&cached, m, __ATOMIC_RELAXED);
  return m;
}

/* Blocks for a dimension of length d of C whose other dimension is `other`:
 * a power of two, each block at least 128 long and the whole call worth
 * splitting (>= 2 MFLOP). A thin C (other < 64, the 1024->10 layer) takes
 * up to 8 blocks whatever the machine: OpenBLAS runs these shapes faster
 * in short blocks (measured 1.4x faster at 2 threads with 8 than with 2). */
static int block_count(int64_t d, int64_t other, double flops) {
  if (flops < 2.0 * (1 << 20)) return 1;
  int cap = max_blocks();
  if (other < 64 && cap < 8) cap = 8;
  int nb = 1;
  while (nb < cap && d / (nb * 2) >= 128) nb *= 2;
  return nb;
}

#ifdef CAIRN_BLAS_BLIS
/* BLIS would start threads of its own outside cairn's regions when
 * BLIS_NUM_THREADS or OMP_NUM_THREADS asks for them: hold it to one. */
static pthread_once_t blis_once = PTHREAD_ONCE_INIT;
static void blis_one_thread(void) { bli_thread_set_num_threads(1); }
#endif

/* Cutting C's rows without changing a bit. In the Goto-style sgemm of
 * OpenBLAS (and BLIS), an element of C is a sum over K in panels that
 * depend on K alone, each accumulated by the micro-kernel that covers its
 * tile; cblas's row-major C is the BLAS's column-major C transposed, so
 * C's rows are the BLAS's columns, tiled from the first column of each
 * call in the kernel's unroll width. Cut the rows at a multiple of that
 * width and every element lands in the same kind of tile with the same
 * panels: the blocks give the bits of one call, whatever their number. The
 * width is not in any API, so it is found once, by computing the same
 * products in one call and cut at multiples of each candidate width and
 * comparing the bits (OpenBLAS 0.3.21's Haswell/Zen kernels: 12; its
 * Sandybridge kernels: 1). Then the row blocks can follow the thread count:
 * one call at 1 thread, one block per thread at 2, and the bits stay those
 * of one call. At 1 thread one call saves the second packing of the shared
 * operand (bench/RESULTS.md, "Row cuts that keep the bits"). When no candidate
 * passes (or CAIRN_GEMM_FIXED_BLOCKS=1), the rows are cut in the fixed,
 * shape-determined blocks below at every thread count, as before. Cutting
 * columns moves the BLAS's own blocking, so columns always get fixed blocks. */
/* One block, single-threaded, on the engine chosen for the whole GEMM. */
static void block_sgemm(int lib, int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                        int lda, const float *B, int ldb, float beta, float *C, int ldc) {
  /* cairn's GEMMs have alpha 1 and beta 0 or 1; anything else, and a block
   * oneDNN could not run (out of memory), goes to the BLAS */
  if (lib == CAIRN__GEMM_ONEDNN && alpha == 1.0f && (beta == 0.0f || beta == 1.0f) &&
      cairn__dnnl_sgemm(trans_a, trans_b, M, N, K, A, lda, B, ldb, beta == 1.0f, C, ldc) == 0)
    return;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K,
              alpha, A, lda, B, ldb, beta, C, ldc);
}

#ifdef CAIRN_HAVE_OPENMP
static float probe_value(uint32_t i) {
  i *= 2654435761u;
  i ^= i >> 15;
  return (float)(i % 2003u) / 997.0f - 1.0f;
}

/* 1 when rows cut at multiples of a give the bits of one call, for every
 * transpose pair, with one K panel and with several. buf holds
 * M·Kmax + Kmax·N + 2·M·N floats. Runs in a parallel region as the blocks
 * do, so the BLAS is single-threaded. */
static int cuts_keep_bits(int a, float *buf, int M, int N, int kmax) {
  static const int Ks[2] = {61, 0};
  float *A = buf, *B = A + (size_t)M * kmax, *C1 = B + (size_t)kmax * N, *C2 = C1 + (size_t)M * N;
  for (size_t i = 0; i < (size_t)M * kmax + (size_t)kmax * N; i++) buf[i] = probe_value((uint32_t)i);
  for (int k = 0; k < 2; k++)
    for (int t = 0; t < 4; t++) {
      const int K = Ks[k] ? Ks[k] : kmax, ta = t & 1, tb = t >> 1, lda = ta ? M : K, ldb = tb ? K : N;
      const enum CBLAS_TRANSPOSE oa = ta ? CblasTrans : CblasNoTrans, ob = tb ? CblasTrans : CblasNoTrans;
      cblas_sgemm(CblasRowMajor, oa, ob, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C1, N);
      /* blocks of a, 2a, 3a, a, ... rows: cuts at several multiples */
      for (int lo = 0, j = 0; lo < M; j++) {
        int hi = lo + a * (1 + j % 3) < M ? lo + a * (1 + j % 3) : M;
        cblas_sgemm(CblasRowMajor, oa, ob, hi - lo, N, K, 1.0f, ta ? A + lo : A + (size_t)lo * lda, lda, B, ldb, 0.0f,
                    C2 + (size_t)lo * N, N);
        lo = hi;
      }
      if (memcmp(C1, C2, (size_t)M * N * sizeof(float))) return 0;
    }
  return 1;
}

static int row_cut;
static pthread_once_t row_cut_once = PTHREAD_ONCE_INIT;
static void find_row_cut(void) {
  if (cairn__env_long("CAIRN_GEMM_FIXED_BLOCKS", 0, 0, 1)) return;
#ifdef CAIRN_BLAS_BLIS
  pthread_once(&blis_once, blis_one_thread); /* the check runs the BLAS as the blocks do */
#endif
  static const int widths[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64};
  const int M = 7 * 64 + 5, N = 37, kmax = 1000; /* kmax: several K panels */
  float *buf = malloc(((size_t)M * kmax + (size_t)kmax * N + 2 * (size_t)M * N) * sizeof(float));
  if (!buf) return; /* out of memory: the fixed blocks, which need no probe */
  int found = 0;
#pragma omp parallel num_threads(2)
#pragma omp single
  /* a team of one would leave the BLAS free to start threads of its own */
  for (size_t w = 0; w < sizeof widths / sizeof widths[0] && !found && omp_in_parallel(); w++)
    if (cuts_keep_bits(widths[w], buf, 7 * widths[w] + 5, N, kmax)) found = widths[w];
  free(buf);
  row_cut = found;
}
#endif

int cairn__gemm_row_cut(void) {
#ifdef CAIRN_HAVE_OPENMP
  pthread_once(&row_cut_once, find_row_cut);
  return row_cut;
#else
  return 0; /* a serial build hands its threads to the BLAS: fixed blocks */
#endif
}

/* Which engine runs a GEMM, from the CPU's ISA and the shape alone (never
 * from timings, so two runs give the same bits):
 * - a CPU with AVX-512 (cpuid and XGETBV, as the kernel dispatch checks):
 *   every GEMM on oneDNN, whatever its shape. Measured on an Intel Emerald
 *   Rapids (bench_gemm, CPU time, every product of the MLP
 *   784-1024-1024-10 at batch 256 and 1024, bench/RESULTS.md "oneDNN on
 *   AVX-512"): at 1 thread oneDNN ran them at 1.05-1.77x the speed of
 *   OpenBLAS 0.3.21's SkylakeX kernels and 1.10-2.13x its Haswell ones
 *   (those an OPENBLAS_CORETYPE=Haswell environment gets), 104-137
 *   GFLOP/s on the wide products against a 156-167 GFLOP/s FMA peak; at 2
 *   threads 0.93-1.41x SkylakeX (within the noise of a load of 9-17) and
 *   1.34-2.02x Haswell. Without OPENBLAS_CORETYPE, 0.3.21 takes its SSE3
 *   kernels on this CPU (32 GFLOP/s). The one shape OpenBLAS's SkylakeX
 *   kernels won, the output layer's weight gradient TN 1024x10x256 (0.55x at
 *   1 thread, 1.25x against Haswell), is 0.06 ms of a 25 ms step: not worth
 *   a rule that depends on which kernels OpenBLAS picked.
 * - elsewhere (AVX2 machines like the AMD EPYC Zen 3 this was measured
 *   on): OpenBLAS for every shape. oneDNN ran the forward products there
 *   at about half OpenBLAS's speed and won only the weight gradients (by
 *   7-12 %) and the thin last layer, about 3 % of the step; on it the
 *   step took 1.35x the time (bench/RESULTS.md, "GEMM engines").
 * CAIRN_GEMM_ENGINE=openblas|onednn forces one, for A/B runs and to try the
 * oneDNN path on a machine without AVX-512. In a build without oneDNN (or
 * when its engine cannot be created) everything runs on the BLAS. */
static void engine_init(void);
static cairn__engine_choice choice = CAIRN__ENGINE_CHOICE(engine_init);
static void engine_init(void) {
  const char *e = getenv("CAIRN_GEMM_ENGINE");
  int want = -1;
  if (e && (!strcmp(e, "openblas") || !strcmp(e, "blas") || !strcmp(e, "blis"))) want = CAIRN__GEMM_OPENBLAS;
  if (e && !strcmp(e, "onednn")) want = CAIRN__GEMM_ONEDNN;
  if (want < 0) want = cairn__cpu_has_avx512() ? CAIRN__GEMM_ONEDNN : CAIRN__GEMM_OPENBLAS;
  if (want == CAIRN__GEMM_ONEDNN && !cairn__dnnl_available()) want = CAIRN__GEMM_OPENBLAS;
  choice.picked = want;
}

int cairn__engine_choice_get(cairn__engine_choice *c) {
  pthread_once(&c->once, c->init);
  int f = __atomic_load_n(&c->forced, __ATOMIC_RELAXED);
  return f >= 0 ? f : c->picked;
}

int cairn__engine_choice_force(cairn__engine_choice *c, int e, int valid) {
  int prev = cairn__engine_choice_get(c);
  __atomic_store_n(&c->forced, valid ? e : -1, __ATOMIC_RELAXED);
  return prev;
}

int cairn__gemm_block_at(int i, int split_n, int block_len, int M, int N, float *C, int ldc, const float *bias,
                         cairn__gemm_block *b) {
  const int d = split_n ? N : M;
  b->lo = i * block_len;
  b->hi = b->lo + block_len < d ? b->lo + block_len : d;
  if (b->lo >= b->hi) return 0;
  b->r0 = split_n ? 0 : b->lo, b->r1 = split_n ? M : b->hi;
  b->c0 = split_n ? b->lo : 0, b->c1 = split_n ? b->hi : N;
  if (bias)
    for (int r = b->r0; r < b->r1; r++)
      memcpy(C + (size_t)r * ldc + b->c0, bias + b->c0, (size_t)(b->c1 - b->c0) * sizeof(float));
  return 1;
}

int cairn__gemm_engine(void) { return cairn__engine_choice_get(&choice); }

int cairn__gemm_engine_force(int e) {
  if (e == CAIRN__GEMM_ONEDNN && !cairn__dnnl_available()) return -1;
  return cairn__engine_choice_force(&choice, e, e == CAIRN__GEMM_OPENBLAS || e == CAIRN__GEMM_ONEDNN);
}

const char *cairn_gemm_engine_name(void) {
  if (cairn__gemm_engine() == CAIRN__GEMM_ONEDNN) return "onednn";
#ifdef CAIRN_BLAS_BLIS
  return "blis";
#else
  return "openblas";
#endif
}

int cairn__gemm_on_dnnl(int trans_a, int trans_b, int N, int K) {
  (void)trans_a, (void)trans_b, (void)N, (void)K; /* the engine is per process, not per shape, today */
  return cairn__gemm_engine() == CAIRN__GEMM_ONEDNN;
}

/* oneDNN: whether the forward's columns, rather than its rows, follow the
 * threads. A product X·W (NN) of a batch of M rows no larger than its N
 * columns: at 2 threads, two blocks of N/2 columns each pack half of W
 * where two blocks of M/2 rows would each pack all of it. Measured on a
 * Zen 5 (oneDNN 2.6.3, gemm:jit, CPU time of both threads, shared machine):
 * 256x1024, K 784 and 1024: columns 0.970-0.980x the CPU time of rows
 * (bench/RESULTS.md, "The GEMMs' last percent"); Aᵀ·B (dW) level either
 * way, A·Bᵀ (brgemm) keeps its bits cut by rows only. Taken only where the
 * probe says the column blocks keep the bits of one call. */
static int dnnl_cols_follow(int trans_a, int trans_b, int M, int N, int K, int lda, int ldb, int ldc, int accumulate,
                            double flops, int *nb) {
  if (trans_a || trans_b || N <= M || accumulate < 0) return 0;
  *nb = block_count(N, M, flops);
  return *nb > 1 && cairn__dnnl_cuts_keep_bits(1, trans_a, trans_b, M, N, K, lda, ldb, ldc, accumulate, *nb, 16);
}

void cairn__gemm_plan(int engine, int trans_a, int trans_b, int M, int N, int K, int lda, int ldb, int ldc,
                      int accumulate, int *split_n, int *n_blocks, int *block_len) {
  const double flops = 2.0 * M * N * (double)K;
  /* Cut rows when there are enough of them for two blocks of 128: each
   * block then packs half of op(A) and shares op(B). Measured against
   * cutting the longer side (columns for every MLP shape but dW of the
   * 1024x1024 layer) at 1 thread, CPU time of the blocks: forward 0.95-0.97x,
   * dW 0.95x, dX 0.98-0.99x. */
  int split = !(M >= 2 * 128 || M >= N);
  int nb = block_count(split ? N : M, split ? M : N, flops);
  /* oneDNN: its JIT sgemm gives other bits when C's rows are cut for some
   * shapes and not for others (on AVX2, at every width tried for some
   * transpose pairs; bench/RESULTS.md, "GEMM engines" and "oneDNN on
   * AVX-512"), so the rows (or the forward's columns, dnnl_cols_follow)
   * follow the threads only where a probe of the shape says that every
   * thread count's blocks keep the bits of one call (gemm_dnnl.c); they
   * are cut on multiples of 16, a 512-bit vector of floats. Elsewhere
   * fixed blocks. */
  int cut = 0, nbc = 1;
  if (engine == CAIRN__GEMM_ONEDNN && !split &&
      dnnl_cols_follow(trans_a, trans_b, M, N, K, lda, ldb, ldc, accumulate, flops, &nbc))
    split = 1, nb = nbc, cut = 16;
  else if (!split && engine == CAIRN__GEMM_ONEDNN)
    cut = accumulate >= 0 && nb > 1 &&
                  cairn__dnnl_cuts_keep_bits(0, trans_a, trans_b, M, N, K, lda, ldb, ldc, accumulate, nb, 16)
              ? 16
              : 0;
  else if (!split)
    cut = cairn__gemm_row_cut();
  const int d = split ? N : M;
  /* block length: a multiple of 16 so that blocks start on kernel edges */
  int len = (((d + nb - 1) / nb) + 15) & ~15;
  if (cut) {
    /* cut where the bits do not change: one block per thread */
    int nt = 1;
#ifdef CAIRN_HAVE_OPENMP
    nt = omp_in_parallel() ? 1 : omp_get_max_threads();
#endif
    if (nb > nt) nb = nt;
    len = ((d + nb - 1) / nb + cut - 1) / cut * cut;
  }
  *split_n = split, *n_blocks = nb, *block_len = len;
}

void cairn__sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc, const float *bias) {
  cairn__sgemm_ep(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias, NULL);
}

/* One product of cairn__sgemm_ep as its plan cut it: block i is one call. */
struct sgemm_run {
  int lib, trans_a, trans_b, M, N, K, lda, ldb, ldc, split_n, len;
  float alpha, beta;
  const float *A, *B, *bias;
  float *C;
  const cairn__gemm_epilogue *ep;
};
static void sgemm_block(void *p, size_t i, size_t end) {
  const struct sgemm_run *r = p;
  (void)end;
  cairn__gemm_block b;
  if (!cairn__gemm_block_at((int)i, r->split_n, r->len, r->M, r->N, r->C, r->ldc, r->bias, &b)) return;
  const int lo = b.lo, hi = b.hi;
  if (r->split_n) {
    /* columns [lo, hi) of C and of op(B) */
    const float *Bb = r->trans_b ? r->B + (size_t)lo * r->ldb : r->B + lo;
    block_sgemm(r->lib, r->trans_a, r->trans_b, r->M, hi - lo, r->K, r->alpha, r->A, r->lda, Bb, r->ldb, r->beta,
                r->C + lo, r->ldc);
  } else {
    /* rows [lo, hi) of C and of op(A) */
    const float *Ab = r->trans_a ? r->A + lo : r->A + (size_t)lo * r->lda;
    block_sgemm(r->lib, r->trans_a, r->trans_b, hi - lo, r->N, r->K, r->alpha, Ab, r->lda, r->B, r->ldb, r->beta,
                r->C + (size_t)lo * r->ldc, r->ldc);
  }
  /* and the epilogue (the activation) while the block is in cache */
  if (r->ep) r->ep->fn(r->ep->ctx, b.r0, b.r1, b.c0, b.c1);
}

void cairn__sgemm_ep(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                     const float *B, int ldb, float beta, float *C, int ldc, const float *bias,
                     const cairn__gemm_epilogue *ep) {
  if (M <= 0 || N <= 0) return;
  if (bias) beta = 1.0f;
#ifdef CAIRN_BLAS_BLIS
  pthread_once(&blis_once, blis_one_thread);
#endif
  const int lib = cairn__gemm_engine();
  int split_n, nb, len;
  /* -1: oneDNN does not run it (block_sgemm), no probe */
  const int acc = alpha == 1.0f && (beta == 0.0f || beta == 1.0f) ? beta == 1.0f : -1;
  cairn__gemm_plan(lib, trans_a, trans_b, M, N, K, lda, ldb, ldc, acc, &split_n, &nb, &len);
  struct sgemm_run r = {lib, trans_a, trans_b, M, N, K, lda, ldb, ldc, split_n, len, alpha, beta, A, B, bias, C, ep};
  if (lib == CAIRN__GEMM_ONEDNN) {
    cairn__par_each((size_t)nb, 1, sgemm_block, &r);
    return;
  }
  /* The BLAS keeps to one thread per block only inside a region (a team of
   * one included): called outside one it may thread the call itself, with
   * other bits than the blocks' (the 1-vs-2-thread test, --without-dnnl). */
#pragma omp parallel for schedule(static)
  for (int i = 0; i < nb; i++) sgemm_block(&r, (size_t)i, (size_t)i + 1);
}
