/* cairn__sgemm: cblas_sgemm cut into blocks that depend only on the shape.
 *
 * OpenBLAS's own threading is not bitwise reproducible: with 2 threads its
 * Haswell kernels give other bits than with 1 (measured here on 0.3.21 for
 * every shape of the MLP step), because the partition decides which
 * micro-kernel, with which accumulation order, computes each element. So
 * cairn cuts C into a shape-determined set of row or column blocks and runs
 * single-threaded BLAS on each block inside its own OpenMP region (OpenBLAS's
 * OpenMP flavour runs single-threaded inside a parallel region). Each block
 * is computed the same way whatever thread runs it, so the result has the
 * same bits for any thread count. This also is the "one thread budget":
 * BLAS never spawns threads of its own under cairn's loops. */
#include "internal.h"

#include <cblas.h>

#ifdef CAIRN_HAVE_OPENMP
#include <omp.h>
#endif

/* Blocks for a dimension of length d: a power of two up to 8, each at
 * least 128 long and the whole call worth splitting (>= 2 MFLOP). */
static int block_count(int64_t d, double flops) {
  if (flops < 2.0 * (1 << 20)) return 1;
  int nb = 1;
  while (nb < 8 && d / (nb * 2) >= 128) nb *= 2;
  return nb;
}

void cairn__sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc) {
  if (M <= 0 || N <= 0) return;
  const enum CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
  const double flops = 2.0 * M * N * (double)K;
  const int split_n = N >= M; /* split the longer side of C */
  const int d = split_n ? N : M;
  const int nb = block_count(d, flops);
  /* block length: a multiple of 16 so that blocks start on kernel edges */
  const int len = (((d + nb - 1) / nb) + 15) & ~15;
#pragma omp parallel for schedule(static)
  for (int i = 0; i < nb; i++) {
    int lo = i * len, hi = lo + len < d ? lo + len : d;
    if (lo >= hi) continue;
    if (split_n) {
      /* columns [lo, hi) of C and of op(B) */
      const float *Bb = trans_b ? B + (size_t)lo * ldb : B + lo;
      cblas_sgemm(CblasRowMajor, ta, tb, M, hi - lo, K, alpha, A, lda, Bb, ldb, beta, C + lo, ldc);
    } else {
      /* rows [lo, hi) of C and of op(A) */
      const float *Ab = trans_a ? A + lo : A + (size_t)lo * lda;
      cblas_sgemm(CblasRowMajor, ta, tb, hi - lo, N, K, alpha, Ab, lda, B, ldb, beta, C + (size_t)lo * ldc, ldc);
    }
  }
}
