/* The FMA loop that measures this machine's fp32 peak: each thread runs 12
 * independent chains of 8-lane FMAs (enough to cover 2 FMA pipes × 4-5
 * cycles latency), so the loop is bound by FMA throughput. Built with
 * -mavx2 -mfma when configure found them; run only when the CPU has them.
 * On an AVX-512 CPU the same loop runs on 16-lane FMAs too (a function
 * built for avx512f by attribute), and the peak is the faster of the two:
 * OpenBLAS's SkylakeX kernels use 512-bit FMAs, and a 256-bit peak would
 * put sgemm above "100 % of peak" there. */
#define _POSIX_C_SOURCE 200809L
#include <time.h>

#include "bench_common.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#include "kernels/kernels.h"

#define CHAINS 12

static double fma_run(long iters) {
  /* twelve named accumulators so that they live in registers (an array is
   * kept in memory at -O2 and the loop becomes store-bound) */
  __m256 c0 = _mm256_set1_ps(0.0f), c1 = _mm256_set1_ps(0.1f), c2 = _mm256_set1_ps(0.2f),
         c3 = _mm256_set1_ps(0.3f), c4 = _mm256_set1_ps(0.4f), c5 = _mm256_set1_ps(0.5f),
         c6 = _mm256_set1_ps(0.6f), c7 = _mm256_set1_ps(0.7f), c8 = _mm256_set1_ps(0.8f),
         c9 = _mm256_set1_ps(0.9f), c10 = _mm256_set1_ps(1.0f), c11 = _mm256_set1_ps(1.1f);
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (long i = 0; i < iters; i++) {
#define F(c) c = _mm256_fmadd_ps(c, a, b)
    F(c0); F(c1); F(c2); F(c3); F(c4); F(c5); F(c6); F(c7); F(c8); F(c9); F(c10); F(c11);
#undef F
  }
  __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3)),
                           _mm256_add_ps(_mm256_add_ps(c4, c5), _mm256_add_ps(c6, c7)));
  s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(c8, c9), _mm256_add_ps(c10, c11)));
  float out[8];
  _mm256_storeu_ps(out, s);
  return (double)out[0];
}

__attribute__((target("avx512f"))) static double fma_run512(long iters) {
  __m512 c0 = _mm512_set1_ps(0.0f), c1 = _mm512_set1_ps(0.1f), c2 = _mm512_set1_ps(0.2f),
         c3 = _mm512_set1_ps(0.3f), c4 = _mm512_set1_ps(0.4f), c5 = _mm512_set1_ps(0.5f),
         c6 = _mm512_set1_ps(0.6f), c7 = _mm512_set1_ps(0.7f), c8 = _mm512_set1_ps(0.8f),
         c9 = _mm512_set1_ps(0.9f), c10 = _mm512_set1_ps(1.0f), c11 = _mm512_set1_ps(1.1f);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (long i = 0; i < iters; i++) {
#define F(c) c = _mm512_fmadd_ps(c, a, b)
    F(c0); F(c1); F(c2); F(c3); F(c4); F(c5); F(c6); F(c7); F(c8); F(c9); F(c10); F(c11);
#undef F
  }
  __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3)),
                           _mm512_add_ps(_mm512_add_ps(c4, c5), _mm512_add_ps(c6, c7)));
  s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(c8, c9), _mm512_add_ps(c10, c11)));
  return (double)_mm512_reduce_add_ps(s);
}

/* best GFLOP/s of 3 runs of the loop of `lanes` lanes on `threads` threads */
static double fma_peak(int threads, int lanes) {
  const long iters = 20L * 1000 * 1000;
  double best = 0.0;
  volatile double sink = 0.0;
  for (int rep = 0; rep < 3; rep++) {
    double t0 = bench_now();
    double s = 0.0;
    int ran = 0; /* threads that ran the loop (1 in a serial build) */
#pragma omp parallel num_threads(threads) reduction(+ : s, ran)
    {
      s += lanes == 16 ? fma_run512(iters) : fma_run(iters);
      ran += 1;
    }
    double dt = bench_now() - t0;
    sink += s;
    double gf = (double)ran * (double)iters * CHAINS * lanes * 2 / dt * 1e-9;
    if (gf > best) best = gf;
  }
  (void)sink;
  return best;
}

double bench_fma_peak(int threads) {
  if (!cairn__cpu_has_avx2_fma()) return 0.0;
  double p = fma_peak(threads, 8);
  if (cairn__cpu_has_avx512()) {
    double p512 = fma_peak(threads, 16);
    if (p512 > p) p = p512;
  }
  return p;
}

/* The STREAM-like loops with 8-lane loads and stores: the compiler does not
 * vectorize them at -O2 (it cannot rule out aliasing), and scalar loops
 * understate the bandwidth (26 vs 40 GB/s for y += x measured on one
 * machine). Ordinary stores, as STREAM compiled plainly uses. */
void bench_stream_part(int which, float *a, float *b, const float *c, float s, size_t lo, size_t hi) {
  const __m256 vs = _mm256_set1_ps(s);
  size_t i = lo;
  if (which == BENCH_TRIAD) {
    for (; i + 8 <= hi; i += 8)
      _mm256_storeu_ps(a + i, _mm256_fmadd_ps(vs, _mm256_loadu_ps(c + i), _mm256_loadu_ps(b + i)));
    for (; i < hi; i++) a[i] = b[i] + s * c[i];
  } else {
    for (; i + 8 <= hi; i += 8)
      _mm256_storeu_ps(b + i, _mm256_fmadd_ps(vs, _mm256_loadu_ps(c + i), _mm256_loadu_ps(b + i)));
    for (; i < hi; i++) b[i] += s * c[i];
  }
}
#else
double bench_fma_peak(int threads) {
  (void)threads;
  return 0.0;
}

void bench_stream_part(int which, float *a, float *b, const float *c, float s, size_t lo, size_t hi) {
  for (size_t i = lo; i < hi; i++) {
    if (which == BENCH_TRIAD) a[i] = b[i] + s * c[i];
    else b[i] += s * c[i];
  }
}
#endif
