/* bench_common: options, machine context, statistics and output shared by
 * the bench suites (see bench_common.h). */
#define _POSIX_C_SOURCE 200809L
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include "bench_common.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cairn.h>

#include "gemm_impl.h"

#ifdef _OPENMP
#include <omp.h>
#endif

bench_machine bench_mach;
static const char *suite_name = "?";
static int run_threads = 1;

/* BENCH_CLOCK=cpu times with this process's CPU time instead of the wall
 * clock: on a shared machine, at 1 thread, it leaves out the time the
 * scheduler gave to other processes (torch_mlp_step.py reads the same
 * variable). Not for 2 threads: spinning threads count as well. */
double bench_now(void) {
  static int cpu = -1;
  if (cpu < 0) {
    const char *c = getenv("BENCH_CLOCK");
    cpu = c && strcmp(c, "cpu") == 0;
  }
  struct timespec ts;
  clock_gettime(cpu ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

bench_stats bench_stats_of(const double *v, int n) {
  bench_stats s = {0, 0, 0, n};
  if (n <= 0) return s;
  double t[BENCH_MAX_REPEATS];
  if (n > BENCH_MAX_REPEATS) n = BENCH_MAX_REPEATS;
  memcpy(t, v, (size_t)n * sizeof *t);
  qsort(t, (size_t)n, sizeof *t, cmp_double);
  s.min = t[0];
  s.max = t[n - 1];
  s.median = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
  return s;
}

void *bench_alloc(size_t n) {
  float *p = cairn_alloc(n ? n : 64);
  if (!p) {
    fprintf(stderr, "bench: out of memory (%zu bytes)\n", n);
    exit(1);
  }
  /* first touch by the threads that will use each part */
  size_t k = n / sizeof(float);
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < k; i++) p[i] = 0.0f;
  return p;
}

/* ---- machine context ------------------------------------------------------ */

static void cpu_model(char *buf, size_t len) {
  snprintf(buf, len, "unknown");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10) == 0) {
      char *c = strchr(line, ':');
      if (c) {
        c++;
        while (*c == ' ' || *c == '\t') c++;
        c[strcspn(c, "\n")] = 0;
        snprintf(buf, len, "%s", c);
      }
      break;
    }
  }
  fclose(f);
}

/* JSON string body: escapes quotes and backslashes. */
static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') fputc('\\', f);
    if ((unsigned char)*s >= 0x20) fputc(*s, f);
  }
  fputc('"', f);
}

/* The last-level cache in bytes (0: unknown). */
static size_t l3_bytes(void) {
  long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  return l3 > 0 ? (size_t)l3 : 0;
}

size_t bench_beyond_cache_floats(void) {
  size_t bytes = l3_bytes();
  if (bytes < (size_t)64 << 20) bytes = (size_t)64 << 20;
  return bytes / sizeof(float);
}

/* STREAM-like loops over n floats per array, each thread on its own
 * contiguous part (the same part it first touched). */
static void bandwidth(size_t n, int reps, double *triad, double *inplace) {
  float *a = bench_alloc(n * sizeof(float)), *b = bench_alloc(n * sizeof(float)),
        *c = bench_alloc(n * sizeof(float));
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i++) {
    b[i] = 1.0f;
    c[i] = 2.0f;
  }
  double bt = 1e30, bi = 1e30;
  for (int r = 0; r < reps; r++) {
    for (int which = BENCH_TRIAD; which <= BENCH_INPLACE; which++) {
      double t0 = bench_now();
#pragma omp parallel
      {
        int nt = 1, id = 0;
#ifdef _OPENMP
        nt = omp_get_num_threads();
        id = omp_get_thread_num();
#endif
        size_t per = (n + (size_t)nt - 1) / (size_t)nt, lo = (size_t)id * per, hi = lo + per < n ? lo + per : n;
        if (lo < hi) bench_stream_part(which, a, b, c, which == BENCH_TRIAD ? 0.5f : 1e-6f, lo, hi);
      }
      double dt = bench_now() - t0;
      double *best = which == BENCH_TRIAD ? &bt : &bi;
      if (dt < *best) *best = dt;
    }
  }
  /* STREAM reports the best time */
  *triad = 12.0 * (double)n / bt * 1e-9;
  *inplace = 12.0 * (double)n / bi * 1e-9;
  cairn_free(a);
  cairn_free(b);
  cairn_free(c);
}

static void context(const bench_opts *o) {
  char model[256], info[512];
  cpu_model(model, sizeof model);
  cairn_runtime_info(info, sizeof info);
  const char *core = "unknown";
#ifdef HAVE_OPENBLAS_GET_CORENAME
  core = openblas_get_corename();
#endif
  int blas_threads = 0;
#ifdef HAVE_OPENBLAS_GET_PARALLEL /* an OpenBLAS */
  blas_threads = openblas_get_num_threads();
#endif
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (o->machine) {
    bench_mach.peak_gflops = bench_fma_peak(o->threads);
    bench_mach.l3_bytes = l3_bytes();
    size_t n = o->quick ? (size_t)16 << 20 : bench_beyond_cache_floats();
    bench_mach.array_bytes = n * sizeof(float);
    bandwidth(n, o->quick ? 5 : 10, &bench_mach.triad_gbs, &bench_mach.inplace_gbs);
  }
  const char *cs = getenv("OPENBLAS_CORETYPE");
  printf("{\"context\": {\"suite\": ");
  json_str(stdout, suite_name);
  printf(", \"cpu\": ");
  json_str(stdout, model);
  printf(", \"cores\": %ld, \"threads\": %d, \"isa\": \"%s\", \"openblas_core\": ", cores, o->threads,
         cairn_isa_name());
  json_str(stdout, core);
  printf(", \"openblas_coretype_env\": ");
  json_str(stdout, cs ? cs : "");
  /* oneDNN's implementation and ISA ("none" on the BLAS engine) */
  const char *dnnl_impl = strcmp(cairn_gemm_engine_name(), "onednn") ? "none" : cairn__dnnl_impl();
  printf(", \"openblas_threads\": %d, \"gemm_engine\": \"%s\", \"onednn_impl\": ", blas_threads,
         cairn_gemm_engine_name());
  json_str(stdout, dnnl_impl);
  printf(", \"runtime\": ");
  json_str(stdout, info);
  printf(", \"peak_gflops_fma_256\": %.1f, \"peak_gflops_fma_512\": %.1f", bench_fma_peak_256, bench_fma_peak_512);
  printf(", \"peak_gflops_fma\": %.1f, \"triad_gbs\": %.1f, \"inplace_update_gbs\": %.1f, \"l3_bytes\": %zu, "
         "\"bandwidth_array_bytes\": %zu, \"repeats\": %d, \"quick\": %s}}\n",
         bench_mach.peak_gflops, bench_mach.triad_gbs, bench_mach.inplace_gbs, bench_mach.l3_bytes,
         bench_mach.array_bytes, o->repeats, o->quick ? "true" : "false");
  fflush(stdout);
  fprintf(stderr, "== %s: %s; %ld cores; %d thread(s); isa %s; OpenBLAS core %s, %d thread(s); gemm engine %s%s%s\n",
          suite_name, model, cores, o->threads, cairn_isa_name(), core, blas_threads, cairn_gemm_engine_name(),
          strcmp(dnnl_impl, "none") ? " " : "", strcmp(dnnl_impl, "none") ? dnnl_impl : "");
  if (o->machine)
    fprintf(stderr,
            "   measured: FMA peak %.1f GFLOP/s (256-bit %.1f, 512-bit %.1f), triad %.1f GB/s, in-place update %.1f GB/s\n",
            bench_mach.peak_gflops, bench_fma_peak_256, bench_fma_peak_512, bench_mach.triad_gbs, bench_mach.inplace_gbs);
}

int bench_begin(const char *suite, int *argc, char **argv, bench_opts *o) {
  suite_name = suite;
  cairn_blas_coretype_fix(argv); /* OpenBLAS's slow fallback core: re-run with a fitting one */
  o->threads = 1;
  o->repeats = 7;
  o->quick = 0;
  o->machine = 1;
  int rest = 1, repeats_set = 0;
  for (int i = 1; i < *argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < *argc) o->threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--repeats") && i + 1 < *argc) o->repeats = atoi(argv[++i]), repeats_set = 1;
    else if (!strcmp(argv[i], "--quick")) o->quick = 1;
    else if (!strcmp(argv[i], "--no-machine")) o->machine = 0;
    else argv[rest++] = argv[i];
  }
  *argc = rest;
  if (o->quick && !repeats_set) o->repeats = 5;
  if (o->threads < 1 || o->repeats < 1 || o->repeats > BENCH_MAX_REPEATS) {
    fprintf(stderr, "%s: --threads T>=1 --repeats 1..%d [--quick] [--no-machine]\n", suite, BENCH_MAX_REPEATS);
    return 2;
  }
  if (cairn_set_num_threads(o->threads)) {
    fprintf(stderr, "%s: threads: %s\n", suite, cairn_errmsg());
    return 2;
  }
  run_threads = o->threads;
  context(o);
  return 0;
}

void bench_section(const char *title) {
  fprintf(stderr, "\n-- %s (%d thread%s)\n%-34s %-30s %10s %10s %10s %-8s %8s  %s\n", title, run_threads,
          run_threads > 1 ? "s" : "", "name", "params", "median", "min", "max", "unit", "ratio", "ratio to");
}

void bench_emit(const char *name, const char *params, bench_stats v, const char *unit, double ratio,
                const char *ratio_to) {
  printf("{\"suite\": ");
  json_str(stdout, suite_name);
  printf(", \"name\": ");
  json_str(stdout, name);
  printf(", \"params\": {%s}, \"threads\": %d, \"median\": %.6g, \"min\": %.6g, \"max\": %.6g, \"repeats\": %d, "
         "\"unit\": ",
         params ? params : "", run_threads, v.median, v.min, v.max, v.repeats);
  json_str(stdout, unit);
  if (ratio_to) {
    printf(", \"ratio\": %.4f, \"ratio_to\": ", ratio);
    json_str(stdout, ratio_to);
  }
  printf("}\n");
  fflush(stdout);
  /* the table shows params without JSON quotes */
  char p[128];
  size_t k = 0;
  for (const char *s = params ? params : ""; *s && k + 1 < sizeof p; s++)
    if (*s != '"') p[k++] = *s;
  p[k] = 0;
  if (ratio_to)
    fprintf(stderr, "%-34s %-30s %10.4g %10.4g %10.4g %-8s %8.3f  %s\n", name, p, v.median, v.min, v.max, unit, ratio,
            ratio_to);
  else
    fprintf(stderr, "%-34s %-30s %10.4g %10.4g %10.4g %-8s\n", name, p, v.median, v.min, v.max, unit);
}
