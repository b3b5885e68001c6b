/* bench_optim: every optimizer's cairn_optim_apply on one f32 variable of
 * 1 M and 10 M parameters (the public path: checks, library threads, the
 * kernel table), in ns/param and GB/s of explicit traffic per parameter
 * (weights, slots read and written, gradient read), next to this machine's
 * measured in-place-update bandwidth (the ratio).
 *
 *   bench_optim [--threads T] [--repeats R] [--quick] [--no-machine]
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>

#include <cairn.h>

#include "bench_common.h"

#define CHECK(x)                                                                                   \
  do {                                                                                             \
    if (x) {                                                                                       \
      fprintf(stderr, "bench_optim: %s\n", cairn_errmsg());                                        \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static const struct {
  cairn_optim_kind kind;
  const char *name;
  double bytes; /* per parameter: 8 per read-and-written array + 4 for g */
} kinds[] = {
    {CAIRN_OPTIM_SGD, "sgd", 12},         {CAIRN_OPTIM_MOMENTUM, "momentum", 20},
    {CAIRN_OPTIM_ADAM, "adam", 28},       {CAIRN_OPTIM_ADAMW, "adamw", 28},
    {CAIRN_OPTIM_RMSPROP, "rmsprop", 28}, {CAIRN_OPTIM_ADAGRAD, "adagrad", 20},
};

int main(int argc, char **argv) {
  bench_opts o;
  if (bench_begin("optim", &argc, argv, &o)) return 2;
  const int64_t sizes[2] = {1000000, 10000000};
  bench_section("optimizers, one variable; ns/param and GB/s; ratio = GB/s / in-place-update bandwidth");
  for (int si = 0; si < 2; si++) {
    int64_t n = sizes[si];
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
      cairn_registry *reg;
      cairn_var *v;
      cairn_optim *opt;
      CHECK(cairn_registry_new(1, &reg));
      CHECK(cairn_var_new(reg, "w", CAIRN_DTYPE_F32, 1, &n, cairn_init_uniform(-0.1, 0.1), CAIRN_COLL_MODEL, &v));
      cairn_optim_config cfg = cairn_optim_defaults(kinds[k].kind);
      CHECK(cairn_optim_new(reg, &cfg, &v, 1, &opt));
      CHECK(cairn_registry_initialize_collection(reg, CAIRN_COLL_GLOBAL));
      cairn_tensor *g;
      CHECK(cairn_tensor_new(CAIRN_DTYPE_F32, 1, &n, &g));
      CHECK(cairn_init_fill(g, cairn_init_uniform(-1e-3, 1e-3), 5, "g"));
      int calls = si == 0 ? 50 : 5;
      if (o.quick) calls = (calls + 1) / 2;
      double ns[BENCH_MAX_REPEATS], gb[BENCH_MAX_REPEATS];
      for (int rep = -1; rep < o.repeats; rep++) {
        double t0 = bench_now();
        for (int c = 0; c < calls; c++) CHECK(cairn_optim_apply(opt, &g, NULL));
        double dt = (bench_now() - t0) / calls;
        if (rep < 0) continue;
        ns[rep] = dt / (double)n * 1e9;
        gb[rep] = kinds[k].bytes * (double)n / dt * 1e-9;
      }
      char p[128], name[64];
      snprintf(p, sizeof p, "\"params\": %lld, \"bytes_per_param\": %g", (long long)n, kinds[k].bytes);
      bench_stats sg = bench_stats_of(gb, o.repeats);
      snprintf(name, sizeof name, "%s/%lldM", kinds[k].name, (long long)(n / 1000000));
      bench_emit(name, p, bench_stats_of(ns, o.repeats), "ns/param",
                 bench_mach.inplace_gbs > 0 ? sg.median / bench_mach.inplace_gbs : 0, "inplace_update_gbs");
      snprintf(name, sizeof name, "%s/%lldM/bandwidth", kinds[k].name, (long long)(n / 1000000));
      bench_emit(name, p, sg, "GB/s", bench_mach.inplace_gbs > 0 ? sg.median / bench_mach.inplace_gbs : 0,
                 "inplace_update_gbs");
      cairn_tensor_free(g);
      cairn_optim_free(opt);
      cairn_registry_free(reg);
    }
  }
  return 0;
}
