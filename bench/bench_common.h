/* bench_common: what every cairn bench suite shares.
 *
 * - Options: --threads T (default 1), --repeats R (default 7), --quick
 *   (smaller sizes and fewer repeats, for `make bench` smoke runs),
 *   --no-machine (skip measuring peak and bandwidth).
 * - The machine context: CPU model, cores, ISA chosen, OpenBLAS core and
 *   threads, peak GFLOP/s measured by an FMA loop (bench_fma.c: AVX2, and
 *   AVX-512 where the CPU has it) and memory bandwidth measured
 *   by a STREAM-like triad a = b + s·c and an in-place update y += s·x, at
 *   the run's thread count. Bytes count explicit reads and writes only
 *   (STREAM's rule): triad 12 B/element, in-place update 12 B/element.
 * - Output: JSON Lines on stdout, the first line {"context": {...}}, then
 *   one object per measurement (suite, name, params, threads, median, min,
 *   max, repeats, unit, ratio and what the ratio is to); a human table on
 *   stderr. Consumers must ignore unknown keys.
 * - Statistics: median/min/max over the repeats; a ratio is the median of
 *   the per-round ratios (the reference is measured in the same round, so
 *   interleaving cancels most of the host's noise).
 */
#ifndef CAIRN_BENCH_COMMON_H
#define CAIRN_BENCH_COMMON_H

#include <stddef.h>

#define BENCH_MAX_REPEATS 64

typedef struct bench_opts {
  int threads;
  int repeats;
  int quick;
  int machine; /* measure peak and bandwidth */
} bench_opts;

typedef struct bench_stats {
  double median, min, max;
  int repeats;
} bench_stats;

typedef struct bench_machine {
  double peak_gflops;   /* FMA loop, all run threads; 0 if not measured */
  double triad_gbs;     /* a = b + s·c */
  double inplace_gbs;   /* y += s·x */
  size_t l3_bytes;      /* last-level cache, from sysconf (0: unknown) */
  size_t array_bytes;   /* bytes per array of the bandwidth loops */
} bench_machine;

extern bench_machine bench_mach;

/* Parses the common options (unknown ones are left for the suite: returns
 * their count in *rest and their positions compacted into argv[1..]),
 * sets the thread budget, measures the machine and prints the context
 * line. Returns 0, or 2 on a bad option. */
int bench_begin(const char *suite, int *argc, char **argv, bench_opts *o);
double bench_now(void);
bench_stats bench_stats_of(const double *v, int n);
/* Touches n bytes so that timed loops do not pay page faults. */
void *bench_alloc(size_t n);
/* One measurement: a JSON line on stdout and a table row on stderr.
 * params is a JSON object body ("\"n\": 1000") or "". ratio_to may be NULL
 * (no ratio). */
void bench_emit(const char *name, const char *params, bench_stats v, const char *unit, double ratio,
                const char *ratio_to);
/* Prints a table heading on stderr. */
void bench_section(const char *title);

/* bench_fma.c: GFLOP/s of an FMA loop run by `threads` threads, the wider
 * of AVX2 and AVX-512 (0 if this build or CPU has no AVX2+FMA). */
double bench_fma_peak(int threads);
/* The two loops' own figures of the last bench_fma_peak call (0: not run):
 * a CPU that runs 512-bit FMAs in two halves shows about the same for both. */
extern double bench_fma_peak_256, bench_fma_peak_512;
/* bench_fma.c: GFLOP/s of a vdpbf16ps loop (avx512_bf16: 32 bf16 pairs,
 * 64 FLOPs, per instruction) on `threads` threads; 0 when the CPU lacks
 * avx512_bf16. */
double bench_bf16_peak(int threads);
/* bench_fma.c: elements [lo, hi) of the triad a = b + s·c (BENCH_TRIAD) or
 * of the in-place update b += s·c (BENCH_INPLACE), vectorized. */
enum { BENCH_TRIAD, BENCH_INPLACE };
void bench_stream_part(int which, float *a, float *b, const float *c, float s, size_t lo, size_t hi);
/* Floats per array for a measurement of memory, not cache: each array at
 * least as large as the last-level cache (sysconf; 64 MiB at least). */
size_t bench_beyond_cache_floats(void);

#endif
