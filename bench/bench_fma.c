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
#include <cpuid.h>
#include <immintrin.h>

#include "kernels/kernels.h"

#define CHAINS 12

/* The loop body for a vector type T (set1/fmadd/add its intrinsics): twelve
 * named accumulators so that they live in registers (an array is kept in
 * memory at -O2 and the loop becomes store-bound), summed into `sum`. */
#define FMA_CHAINS(T, set1, fmadd, add, iters, sum)                                                \
  T c0 = set1(0.0f), c1 = set1(0.1f), c2 = set1(0.2f), c3 = set1(0.3f), c4 = set1(0.4f),           \
    c5 = set1(0.5f), c6 = set1(0.6f), c7 = set1(0.7f), c8 = set1(0.8f), c9 = set1(0.9f),           \
    c10 = set1(1.0f), c11 = set1(1.1f);                                                            \
  const T a_ = set1(0.999999f), b_ = set1(1e-7f);                                                  \
  for (long i_ = 0; i_ < (iters); i_++) {                                                          \
    c0 = fmadd(c0, a_, b_), c1 = fmadd(c1, a_, b_), c2 = fmadd(c2, a_, b_), c3 = fmadd(c3, a_, b_); \
    c4 = fmadd(c4, a_, b_), c5 = fmadd(c5, a_, b_), c6 = fmadd(c6, a_, b_), c7 = fmadd(c7, a_, b_); \
    c8 = fmadd(c8, a_, b_), c9 = fmadd(c9, a_, b_), c10 = fmadd(c10, a_, b_);                      \
    c11 = fmadd(c11, a_, b_);                                                                      \
  }                                                                                                \
  T sum = add(add(add(add(c0, c1), add(c2, c3)), add(add(c4, c5), add(c6, c7))),                   \
              add(add(c8, c9), add(c10, c11)))

static double fma_run(long iters) {
  FMA_CHAINS(__m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, iters, s);
  float out[8];
  _mm256_storeu_ps(out, s);
  return (double)out[0];
}

__attribute__((target("avx512f"))) static double fma_run512(long iters) {
  FMA_CHAINS(__m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, iters, s);
  return (double)_mm512_reduce_add_ps(s);
}

/* best GFLOP/s of 3 runs of the loop of `lanes` lanes on `threads` threads */
static double fma_peak(int threads, int lanes) {
  const long iters = 20L * 1000 * 1000;
  double best = 0.0;
  volatile double sink = 0.0;
  (void)threads; /* a serial build runs the loop on one thread */
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

double bench_fma_peak_256, bench_fma_peak_512;
/* The bf16 dot-product peak: twelve independent chains of vdpbf16ps
 * (each: 16 fp32 lanes += 2 products of bf16 pairs), built for
 * avx512bf16 by attribute and run only when cpuid says the CPU has it. */
__attribute__((target("avx512f,avx512bf16"))) static double dpbf16_run(long iters) {
  const __m512bh a_ = (__m512bh)_mm512_set1_epi16(0x3F80), b_ = (__m512bh)_mm512_set1_epi16(0x3F80);
  __m512 c0 = _mm512_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0, c8 = c0, c9 = c0,
         c10 = c0, c11 = c0;
  for (long i = 0; i < iters; i++) {
    c0 = _mm512_dpbf16_ps(c0, a_, b_), c1 = _mm512_dpbf16_ps(c1, a_, b_), c2 = _mm512_dpbf16_ps(c2, a_, b_);
    c3 = _mm512_dpbf16_ps(c3, a_, b_), c4 = _mm512_dpbf16_ps(c4, a_, b_), c5 = _mm512_dpbf16_ps(c5, a_, b_);
    c6 = _mm512_dpbf16_ps(c6, a_, b_), c7 = _mm512_dpbf16_ps(c7, a_, b_), c8 = _mm512_dpbf16_ps(c8, a_, b_);
    c9 = _mm512_dpbf16_ps(c9, a_, b_), c10 = _mm512_dpbf16_ps(c10, a_, b_), c11 = _mm512_dpbf16_ps(c11, a_, b_);
  }
  __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3)),
                           _mm512_add_ps(_mm512_add_ps(c4, c5), _mm512_add_ps(c6, c7)));
  s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(c8, c9), _mm512_add_ps(c10, c11)));
  return (double)_mm512_reduce_add_ps(s);
}

static int cpu_has_avx512_bf16(void) {
  unsigned a, b, c, d;
  if (!cairn__cpu_has_avx512() || __get_cpuid_max(0, NULL) < 7) return 0;
  __cpuid_count(7, 0, a, b, c, d);
  if (a < 1) return 0;
  __cpuid_count(7, 1, a, b, c, d);
  return (a >> 5) & 1;
}

double bench_bf16_peak(int threads) {
  if (!cpu_has_avx512_bf16()) return 0.0;
  const long iters = 10L * 1000 * 1000;
  double best = 0.0;
  volatile double sink = 0.0;
  (void)threads;
  for (int rep = 0; rep < 3; rep++) {
    double t0 = bench_now();
    double s = 0.0;
    int ran = 0;
#pragma omp parallel num_threads(threads) reduction(+ : s, ran)
    {
      s += dpbf16_run(iters);
      ran += 1;
    }
    double dt = bench_now() - t0;
    sink += s;
    /* 12 chains x 16 lanes x 2 pairs x 2 FLOPs per iteration */
    double gf = (double)ran * (double)iters * 12 * 16 * 2 * 2 / dt * 1e-9;
    if (gf > best) best = gf;
  }
  (void)sink;
  return best;
}

double bench_fma_peak(int threads) {
  if (!cairn__cpu_has_avx2_fma()) return 0.0;
  double p = bench_fma_peak_256 = fma_peak(threads, 8);
  if (cairn__cpu_has_avx512()) {
    double p512 = bench_fma_peak_512 = fma_peak(threads, 16);
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
double bench_fma_peak_256, bench_fma_peak_512;

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
