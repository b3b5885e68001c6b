/* bench_kernels: every elementwise kernel of the private kernel table, the
 * scalar reference next to the AVX2 and AVX-512 tables (those this build
 * and CPU have; --isa picks one), in GB/s of explicit reads + writes and as
 * a fraction of this machine's in-place-update bandwidth, measured on the
 * same arrays in the same rounds (median of the per-round ratios).
 * Buffers are preallocated and touched; n floats per array, each array at
 * least as large as the last-level cache (so that the kernels stream from
 * memory, as the bandwidth loops do; 4 M floats with --quick, which may sit
 * in a large L3); each thread runs the kernel on its own
 * contiguous part, as lib/parallel.c does. Rows (softmax, cross-entropy)
 * are 1000 long. Rounds interleave the tables. The fused Adam update
 * (the optimizer kernel, 28 bytes per parameter: w, m, v read and written,
 * g read) is listed as "adam".
 *
 * --torch: after each kernel, the same function in PyTorch on the same
 * sizes and thread count (bench/torch_kernels.py run by /usr/bin/python3,
 * or the script given with --torch-script), emitted as "<kernel>/torch"
 * with ratio = PyTorch time / the best vector table's time (> 1: cairn is faster). Needs
 * Debian's python3-torch; without it, says so and skips the PyTorch rows.
 * --n N: floats per array (default: beyond the last-level cache);
 * --only a,b: only these kernels; --no-ref: skip the reference table;
 * --isa avx2|avx512: only that vector table (default: every one this build
 * and CPU have, so that the tiers are compared in the same rounds; the
 * AVX-512 rows then carry "speedup_vs_avx2").
 *
 *   bench_kernels [--threads T] [--repeats R] [--quick] [--no-machine] [--isa avx2|avx512]
 *                 [--n N] [--only k1,k2] [--no-ref] [--torch] [--torch-script PATH]
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cairn.h>

#include "bench_common.h"
#include "kernels/kernels.h"

#define ROW 1000

typedef enum { K_UNARY, K_UNARY_A, K_BINARY, K_BINARY_A, K_ROW, K_ROW_BWD, K_SPARSE_XENT, K_XENT_ROW,
               K_LOSS2, K_SUM, K_ADD, K_SCALE, K_ADAM, K_INPLACE_REF } kshape;

typedef struct kdesc {
  const char *name;
  kshape shape;
  size_t off; /* offset of the function pointer in the table */
  double bytes; /* explicit bytes per element */
} kdesc;

#define K(f, sh, b) {#f, sh, offsetof(cairn__kernel_table, f), b}
static const kdesc kernels[] = {
    K(relu_fwd, K_UNARY, 8),          K(relu_bwd, K_BINARY, 12),
    K(leaky_relu_fwd, K_UNARY_A, 8),  K(leaky_relu_bwd, K_BINARY_A, 12),
    K(sigmoid_fwd, K_UNARY, 8),       K(sigmoid_bwd, K_BINARY, 12),
    K(tanh_fwd, K_UNARY, 8),          K(tanh_bwd, K_BINARY, 12),
    K(gelu_fwd, K_UNARY, 8),          K(gelu_bwd, K_BINARY, 12),
    K(gelu_tanh_fwd, K_UNARY, 8),     K(gelu_tanh_bwd, K_BINARY, 12),
    K(exp, K_UNARY, 8),               K(log, K_UNARY, 8),
    K(softmax_row, K_ROW, 8),         K(log_softmax_row, K_ROW, 8),
    K(softmax_bwd_row, K_ROW_BWD, 12), K(log_softmax_bwd_row, K_ROW_BWD, 12),
    K(sparse_xent_row, K_SPARSE_XENT, 8), K(xent_row, K_XENT_ROW, 12),
    K(sigmoid_xent, K_LOSS2, 12),     K(mse, K_LOSS2, 12),
    K(sum, K_SUM, 4),                 K(sumsq, K_SUM, 4),
    K(add, K_ADD, 12),                K(scale, K_SCALE, 8),
    K(adam, K_ADAM, 28),
};

/* The in-place update Y += s·X over the same arrays (bench_common's
 * loop, no table): the reference each round's kernel figures are divided
 * by, so that the ratio is measured side by side (this host's memory
 * bandwidth moves between runs and within one). */
static const kdesc inplace_ref = {"inplace_update", K_INPLACE_REF, 0, 12};

typedef void (*unary_fn)(const float *, float *, size_t);
typedef void (*unary_a_fn)(const float *, float *, size_t, float);
typedef void (*binary_fn)(const float *, const float *, float *, size_t);
typedef void (*binary_a_fn)(const float *, const float *, float *, size_t, float);
typedef double (*sparse_fn)(const float *, int32_t, float *, size_t, float);
typedef double (*xent_fn)(const float *, const float *, float *, size_t, float);
typedef double (*sum_fn)(const float *, size_t);
typedef void (*add_fn)(const float *, float *, size_t);
typedef void (*scale_fn)(float, float *, size_t);
typedef void (*adam_fn)(float *, float *, float *, const float *, size_t, float, float, float, float, float);

static float *X, *Y, *Z, *V; /* V: Adam's second moment (allocated only for adam) */
static size_t N;

/* Runs kernel k of table t over [lo, hi) (whole rows for row kernels). */
static double run_part(const cairn__kernel_table *t, const kdesc *k, size_t lo, size_t hi) {
  void *fp = NULL;
  if (t) memcpy(&fp, (const char *)t + k->off, sizeof fp);
  size_t n = hi - lo;
  double s = 0.0;
  switch (k->shape) {
    case K_UNARY: ((unary_fn)fp)(X + lo, Y + lo, n); break;
    case K_UNARY_A: ((unary_a_fn)fp)(X + lo, Y + lo, n, 0.2f); break;
    case K_BINARY: ((binary_fn)fp)(X + lo, Z + lo, Y + lo, n); break;
    case K_BINARY_A: ((binary_a_fn)fp)(X + lo, Z + lo, Y + lo, n, 0.2f); break;
    case K_ROW:
      for (size_t i = lo; i + ROW <= hi; i += ROW) ((unary_fn)fp)(X + i, Y + i, ROW);
      break;
    case K_ROW_BWD:
      for (size_t i = lo; i + ROW <= hi; i += ROW) ((binary_fn)fp)(X + i, Z + i, Y + i, ROW);
      break;
    case K_SPARSE_XENT:
      for (size_t i = lo; i + ROW <= hi; i += ROW) s += ((sparse_fn)fp)(X + i, (int32_t)(i / ROW % ROW), Y + i, ROW, 1e-3f);
      break;
    case K_XENT_ROW:
      for (size_t i = lo; i + ROW <= hi; i += ROW) s += ((xent_fn)fp)(X + i, Z + i, Y + i, ROW, 1e-3f);
      break;
    case K_LOSS2: s = ((xent_fn)fp)(X + lo, Z + lo, Y + lo, n, 1e-3f); break;
    case K_SUM: s = ((sum_fn)fp)(X + lo, n); break;
    case K_ADD: ((add_fn)fp)(X + lo, Y + lo, n); break;
    case K_SCALE: ((scale_fn)fp)(1.0f, Y + lo, n); break;
    /* w = Y, m = Z, v = V, g = X; tiny steps keep the values in range */
    case K_ADAM: ((adam_fn)fp)(Y + lo, Z + lo, V + lo, X + lo, n, 1e-7f, 0.9f, 0.999f, 1e-7f, 0.0f); break;
    case K_INPLACE_REF: bench_stream_part(BENCH_INPLACE, NULL, Y, X, 1e-6f, lo, hi); break;
  }
  return s;
}

static volatile double sink;

#ifndef BENCH_TORCH_KERNELS
#define BENCH_TORCH_KERNELS "bench/torch_kernels.py"
#endif

/* The PyTorch peer of kernel `name`: runs the script for that one kernel
 * and reads its median time and its ratio to the in-place update it
 * measured in the same rounds. Returns 0 on success. */
static int torch_run(const char *script, const char *name, int threads, int repeats, double *median_s,
                     double *min_s, double *ratio_inplace) {
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s' --threads %d --repeats %d --n %zu --row %d --only %s 2>/dev/null",
           script, threads, repeats, N, ROW, name);
  FILE *f = popen(cmd, "r");
  if (!f) return -1;
  char line[2048];
  int found = -1;
  while (fgets(line, sizeof line, f)) {
    const char *m = strstr(line, "\"median_s\": "), *mi = strstr(line, "\"min_s\": "),
               *r = strstr(line, "\"ratio_inplace\": ");
    if (m && mi && r) {
      *median_s = strtod(m + 12, NULL);
      *min_s = strtod(mi + 9, NULL);
      *ratio_inplace = strtod(r + 17, NULL);
      found = 0;
    }
  }
  if (pclose(f) != 0) return -1;
  return found;
}

static int listed(const char *only, const char *name) {
  if (!only) return 1;
  size_t l = strlen(name);
  for (const char *p = only; (p = strstr(p, name)) != NULL; p += l)
    if ((p == only || p[-1] == ',') && (p[l] == ',' || p[l] == 0)) return 1;
  return 0;
}

/* The activations (names ending in _fwd or _bwd) stream their output when
 * it is larger than the last-level cache, as cairn_act_forward/backward do
 * (lib/nn_act.c); the other kernels' callers do not. */
static int streams(const kdesc *k) {
  size_t l = strlen(k->name);
  return l > 4 && (!strcmp(k->name + l - 4, "_fwd") || !strcmp(k->name + l - 4, "_bwd")) &&
         N * sizeof(float) >= cairn__stream_min_bytes();
}

/* One timed pass of kernel k of table t (NULL for inplace_ref) over N
 * elements by `threads` threads. */
static double timed(const cairn__kernel_table *t, const kdesc *k, int threads) {
  const int stream = streams(k);
  double t0 = bench_now(), s = 0.0;
  size_t rows = N / ROW, per = (rows + (size_t)threads - 1) / (size_t)threads;
#pragma omp parallel for schedule(static) num_threads(threads) reduction(+ : s)
  for (int p = 0; p < threads; p++) {
    size_t lo = (size_t)p * per * ROW, hi = lo + per * ROW;
    if (hi > N) hi = N;
    cairn__kernels_stream = stream;
    if (lo < hi) s += run_part(t, k, lo, hi);
    cairn__kernels_stream = 0;
  }
  double dt = bench_now() - t0;
  sink += s;
  return dt;
}

#define MAXT 3

int main(int argc, char **argv) {
  bench_opts o;
  if (bench_begin("kernels", &argc, argv, &o)) return 2;
  const cairn__kernel_table *ref = cairn__kernels_ref();
  const char *only = NULL, *script = BENCH_TORCH_KERNELS, *isa = NULL;
  int no_ref = 0, torch = 0;
  size_t n_opt = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--n") && i + 1 < argc) n_opt = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    else if (!strcmp(argv[i], "--no-ref")) no_ref = 1;
    else if (!strcmp(argv[i], "--isa") && i + 1 < argc) isa = argv[++i];
    else if (!strcmp(argv[i], "--torch")) torch = 1;
    else if (!strcmp(argv[i], "--torch-script") && i + 1 < argc) script = argv[++i], torch = 1;
    else {
      fprintf(stderr, "bench_kernels: unknown option '%s'\n", argv[i]);
      return 2;
    }
  }
  /* the vector tables to measure, in rising order: tab[0..nv) */
  const cairn__kernel_table *tab[MAXT];
  int nv = 0;
  if (isa && strcmp(isa, "avx2") && strcmp(isa, "avx512")) {
    fprintf(stderr, "bench_kernels: --isa takes avx2 or avx512, not '%s'\n", isa);
    return 2;
  }
  if ((!isa || !strcmp(isa, "avx2")) && cairn__kernels_avx2()) tab[nv++] = cairn__kernels_avx2();
  if ((!isa || !strcmp(isa, "avx512")) && cairn__kernels_avx512()) tab[nv++] = cairn__kernels_avx512();
  if (isa && nv == 0) {
    fprintf(stderr, "bench_kernels: --isa %s: this build or CPU has no %s kernels\n", isa, isa);
    return 2;
  }
  if (no_ref && nv == 0) {
    fprintf(stderr, "bench_kernels: --no-ref needs vector kernels (this build or CPU has none)\n");
    return 2;
  }
  if (torch && system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
    fprintf(stderr, "bench_kernels: no PyTorch in /usr/bin/python3 (Debian: apt-get install python3-torch): "
                    "PyTorch rows skipped\n");
    torch = 0;
  }
  N = ((n_opt ? n_opt : o.quick ? (size_t)4 << 20 : bench_beyond_cache_floats()) + ROW - 1) / ROW * ROW;
  X = bench_alloc(N * sizeof(float));
  Y = bench_alloc(N * sizeof(float));
  Z = bench_alloc(N * sizeof(float));
  cairn_rng r;
  cairn_rng_init(&r, 1, 2);
  for (size_t i = 0; i < N; i++) {
    X[i] = 4.0f * (cairn_rng_uniform(&r) - 0.5f);
    Z[i] = cairn_rng_uniform(&r);
  }
  bench_section("elementwise kernels, GB/s (explicit bytes); ratio = fraction of the in-place-update bandwidth "
                "measured in the same rounds on the same arrays");
  char params[320];
  for (size_t i = 0; i < sizeof kernels / sizeof *kernels; i++) {
    const kdesc *k = &kernels[i];
    if (!listed(only, k->name)) continue;
    /* log wants positive inputs: |x| + tiny keeps the same range of work */
    if (k->shape == K_UNARY && !strcmp(k->name, "log"))
      for (size_t j = 0; j < N; j++) X[j] = X[j] < 0 ? -X[j] + 1e-3f : X[j] + 1e-3f;
    if (k->shape == K_ADAM && !V) {
      V = bench_alloc(N * sizeof(float));
      for (size_t j = 0; j < N; j++) V[j] = 1e-3f * cairn_rng_uniform(&r);
    }
    /* all[0] = ref (NULL with --no-ref), all[1..] = the vector tables */
    const cairn__kernel_table *all[MAXT + 1];
    int nt = 0;
    all[nt++] = no_ref ? NULL : ref;
    for (int v = 0; v < nv; v++) all[nt++] = tab[v];
    for (int t = 0; t < nt; t++)
      if (all[t]) timed(all[t], k, o.threads); /* warm-up */
    double g[MAXT + 1][BENCH_MAX_REPEATS], rat[MAXT + 1][BENCH_MAX_REPEATS], tm[MAXT + 1][BENCH_MAX_REPEATS],
        sp[MAXT + 1][BENCH_MAX_REPEATS], sv[MAXT + 1][BENCH_MAX_REPEATS], gi[BENCH_MAX_REPEATS];
    for (int rep = 0; rep < o.repeats; rep++) {
      gi[rep] = inplace_ref.bytes * (double)N / timed(NULL, &inplace_ref, o.threads) * 1e-9;
      /* rotate the order each round so no table always runs first */
      for (int q = 0; q < nt; q++) {
        const int t = (q + rep) % nt;
        if (!all[t]) continue;
        tm[t][rep] = timed(all[t], k, o.threads);
      }
      for (int t = 0; t < nt; t++) {
        if (!all[t]) continue;
        g[t][rep] = k->bytes * (double)N / tm[t][rep] * 1e-9;
        rat[t][rep] = g[t][rep] / gi[rep];
        sp[t][rep] = all[0] ? tm[0][rep] / tm[t][rep] : 0.0;
        sv[t][rep] = t >= 2 ? tm[1][rep] / tm[t][rep] : 0.0;
      }
    }
    const bench_stats si = bench_stats_of(gi, o.repeats);
    for (int t = 0; t < nt; t++) {
      if (!all[t]) continue;
      const bench_stats st = bench_stats_of(g[t], o.repeats), sr = bench_stats_of(rat[t], o.repeats);
      int len = snprintf(params, sizeof params, "\"n\": %zu, \"bytes_per_elem\": %g, \"isa\": \"%s\"", N, k->bytes,
                         all[t]->isa);
      if (t > 0 && all[0])
        len += snprintf(params + len, sizeof params - (size_t)len, ", \"speedup_vs_ref\": %.2f",
                        bench_stats_of(sp[t], o.repeats).median);
      if (t >= 2)
        len += snprintf(params + len, sizeof params - (size_t)len, ", \"speedup_vs_%s\": %.2f", all[1]->isa,
                        bench_stats_of(sv[t], o.repeats).median);
      snprintf(params + len, sizeof params - (size_t)len, ", \"inplace_gbs_same_rounds\": %.1f", si.median);
      char name[64];
      snprintf(name, sizeof name, "%s/%s", k->name, all[t]->isa);
      bench_emit(name, params, st, "GB/s", sr.median, "inplace_update_gbs_same_rounds");
    }
    double tmed, tmin, tri;
    if (torch && nv > 0 && k->shape != K_ADAM && strcmp(k->name, "add") && strcmp(k->name, "scale") &&
        strncmp(k->name, "relu", 4) && strncmp(k->name, "leaky", 5)) {
      const int best = nt - 1;
      if (torch_run(script, k->name, o.threads, o.repeats, &tmed, &tmin, &tri) == 0) {
        const double ta = bench_stats_of(tm[best], o.repeats).median;
        const bench_stats st = {k->bytes * (double)N / tmed * 1e-9, k->bytes * (double)N / tmed * 1e-9,
                                k->bytes * (double)N / tmin * 1e-9, o.repeats};
        snprintf(params, sizeof params,
                 "\"n\": %zu, \"bytes_per_elem\": %g, \"isa\": \"torch\", \"torch_ratio_to_inplace\": %.3f, "
                 "\"%s_ratio_to_inplace\": %.3f",
                 N, k->bytes, tri, all[best]->isa, bench_stats_of(rat[best], o.repeats).median);
        char name[64], unit[64];
        snprintf(name, sizeof name, "%s/torch", k->name);
        snprintf(unit, sizeof unit, "%s_speedup_over_torch", all[best]->isa);
        bench_emit(name, params, st, "GB/s", tmed / ta, unit);
      } else {
        fprintf(stderr, "bench_kernels: %s failed for %s\n", script, k->name);
      }
    }
    if (k->shape == K_UNARY && !strcmp(k->name, "log"))
      for (size_t j = 0; j < N; j++) X[j] = 4.0f * (cairn_rng_uniform(&r) - 0.5f);
  }
  cairn_free(X);
  cairn_free(Y);
  cairn_free(Z);
  if (V) cairn_free(V);
  return 0;
}
