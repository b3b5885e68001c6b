/* bench_async: asynchronous checkpointing (cairn_saver_save_begin) next to
 * its peers, measured side by side, interleaved round by round (the order
 * of the peers rotates every round: the machine is shared).
 *
 *   bench_async [--threads T] [--repeats R] [--quick] [--no-machine] [--dir D]
 *               [--steps N] [--every K]
 *
 * (a) The training thread's stall per save of the 107.3 MB state of
 *     bench_ckpt (26.8 M float32: kernels (784, 4096), (4096, 4096),
 *     (4096, 1664), (1664, 10) and their biases, noise), as the variables
 *     of a Saver, default writer options (LZ4 AUTO, CRC32C, fsyncs):
 *       memcpy_state      one memcpy of the same bytes into a pre-touched
 *                         buffer (the floor of a snapshot)
 *       sync_save         cairn_saver_save
 *       async_save_stall  cairn_saver_save_begin (phase 1); phase 2 is then
 *                         waited for outside the timed region
 *       async_save_total  begin to the end of cairn_saver_save_wait
 *       async_phase2_cpu  CPU time (user + system, getrusage) the process
 *                         spent during that wait: the writer's share of the
 *                         cores, which it takes from training in (b)
 *     Ratios: stall / memcpy and stall / sync, per round, medians.
 * (b) The bench MLP training loop (784-1024-1024-10, ReLU, sparse softmax
 *     cross-entropy, batch 256, Adam; the run's thread count) for N steps
 *     (default 200; --quick 100) with a checkpoint of the whole training
 *     state (weights, Adam slots, beta powers: 22.4 MB) every K steps
 *     (default 50): no checkpoint, synchronous, asynchronous, and
 *     asynchronous with compact checkpoints (CAIRN_CKPT_COMPRESS_COMPACT:
 *     byte planes + zstd, which cost the writer more CPU). Throughput in
 *     steps/s and as a ratio to the loop without checkpoints of the same
 *     round. Steady state: the asynchronous block starts with a save in
 *     flight (begun before the clock starts) and ends with the last step,
 *     whose save is waited for outside the clock, so that it pays N/K stalls
 *     and N/K background writes overlapping its steps, as a long run does;
 *     the synchronous one pays N/K whole saves.
 * Files go to a fresh directory under --dir, else $TMPDIR, else the working
 * directory, with max_to_keep 2; its file system type is reported ("tmpfs":
 * fsync is free). JSON Lines on stdout (bench_common.h), a table on stderr.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cairn.h>

#include "bench_common.h"

#define CHECK(x)                                                                                   \
  do {                                                                                             \
    if (x) {                                                                                       \
      fprintf(stderr, "bench_async: %s\n", cairn_errmsg());                                        \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static char g_dir[512];

static void rm_dir(const char *dir) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "bench_async: could not remove %s\n", dir);
}

static const char *fs_name(const char *dir) {
  struct statfs sf;
  if (statfs(dir, &sf) != 0) return "unknown";
  switch ((unsigned long)sf.f_type) {
  case 0x01021994UL: return "tmpfs";
  case 0xEF53UL: return "ext4";
  case 0x794c7630UL: return "overlayfs";
  case 0x9123683EUL: return "btrfs";
  case 0x58465342UL: return "xfs";
  default: return "other";
  }
}

/* CPU seconds (user + system) of the whole process so far. */
static double cpu_secs(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec +
         1e-6 * (double)ru.ru_stime.tv_usec;
}

static cairn_saver *saver_for(cairn_registry *r, cairn_ckpt_compress compress) {
  cairn_saver_options so = cairn_saver_options_default();
  so.max_to_keep = 2;
  so.write.compress = compress;
  cairn_saver *s;
  CHECK(cairn_saver_new(r, &so, &s));
  return s;
}

/* ---- (a) the stall ------------------------------------------------------------------- */

static void bench_stall(const bench_opts *o) {
  static const int64_t shapes[8][2] = {{784, 4096}, {4096, 1}, {4096, 4096}, {4096, 1},
                                       {4096, 1664}, {1664, 1}, {1664, 10}, {10, 1}};
  static const char *names[8] = {"h1/kernel", "h1/bias", "h2/kernel", "h2/bias",
                                 "h3/kernel", "h3/bias", "out/kernel", "out/bias"};
  cairn_registry *r;
  CHECK(cairn_registry_new(1, &r));
  size_t total = 0;
  cairn_var *v[8];
  for (int i = 0; i < 8; i++) {
    CHECK(cairn_var_new(r, names[i], CAIRN_DTYPE_F32, shapes[i][1] == 1 ? 1 : 2, shapes[i], cairn_init_zeros(),
                           CAIRN_COLL_GLOBAL, &v[i]));
    CHECK(cairn_var_initialize(v[i]));
    cairn_tensor *t = cairn_var_tensor(v[i]);
    cairn_rng g;
    cairn_rng_init(&g, 11, (uint64_t)i);
    for (int64_t k = 0; k < t->size; k++) ((float *)t->data)[k] = cairn_rng_normal(&g);
    total += cairn_tensor_nbytes(t);
  }
  cairn_saver *s = saver_for(r, CAIRN_CKPT_COMPRESS_AUTO);
  unsigned char *dst = bench_alloc(total);
  char prefix[600];
  snprintf(prefix, sizeof prefix, "%s/state.ckpt", g_dir);
  int R = o->repeats;
  double mc[BENCH_MAX_REPEATS], sy[BENCH_MAX_REPEATS], st[BENCH_MAX_REPEATS], at[BENCH_MAX_REPEATS];
  double cpu[BENCH_MAX_REPEATS];
  double q_mc[BENCH_MAX_REPEATS], q_sy[BENCH_MAX_REPEATS];
  int64_t step = 0;
  for (int rep = -1; rep < R; rep++) { /* round -1 warms up (the staging buffer's first touch) */
    double t_mc = 0, t_sy = 0, t_st = 0, t_at = 0, c_p2 = 0;
    for (int k = 0; k < 3; k++) {
      int which = (k + (rep < 0 ? 0 : rep)) % 3;
      if (which == 0) {
        double t0 = bench_now();
        size_t off = 0;
        for (int i = 0; i < 8; i++) {
          const cairn_tensor *t = cairn_var_tensor(v[i]);
          memcpy(dst + off, t->data, cairn_tensor_nbytes(t));
          off += cairn_tensor_nbytes(t);
        }
        t_mc = bench_now() - t0;
      } else if (which == 1) {
        double t0 = bench_now();
        CHECK(cairn_saver_save(s, prefix, ++step, NULL, 0));
        t_sy = bench_now() - t0;
      } else {
        double t0 = bench_now();
        CHECK(cairn_saver_save_begin(s, prefix, ++step, NULL, 0));
        double t1 = bench_now(), c0 = cpu_secs();
        CHECK(cairn_saver_save_wait(s));
        c_p2 = cpu_secs() - c0; /* this thread sleeps in the wait: the writer's CPU */
        t_st = t1 - t0;
        t_at = bench_now() - t0;
      }
    }
    if (rep < 0) continue;
    mc[rep] = 1e3 * t_mc;
    sy[rep] = 1e3 * t_sy;
    st[rep] = 1e3 * t_st;
    at[rep] = 1e3 * t_at;
    cpu[rep] = 1e3 * c_p2;
    q_mc[rep] = t_st / t_mc;
    q_sy[rep] = t_st / t_sy;
  }
  char p[300];
  snprintf(p, sizeof p, "\"bytes\": %zu, \"tensors\": 8, \"fs\": \"%s\"", total, fs_name(g_dir));
  bench_section("(a) stall on the training thread per save of the 107 MB state, ms");
  bench_emit("memcpy_state", p, bench_stats_of(mc, R), "ms", 0, NULL);
  bench_emit("sync_save", p, bench_stats_of(sy, R), "ms", 0, NULL);
  bench_emit("async_save_stall", p, bench_stats_of(st, R), "ms", bench_stats_of(q_mc, R).median, "memcpy_state");
  bench_emit("async_save_stall_vs_sync", p, bench_stats_of(st, R), "ms", bench_stats_of(q_sy, R).median, "sync_save");
  bench_emit("async_save_total", p, bench_stats_of(at, R), "ms", 0, NULL);
  bench_emit("async_phase2_cpu", p, bench_stats_of(cpu, R), "ms", 0, NULL);
  cairn_saver_free(s);
  cairn_free(dst);
  cairn_registry_free(r);
}

/* ---- (b) the training loop ------------------------------------------------------------ */

static void bench_train(const bench_opts *o, int steps, int every) {
  static const int64_t sizes[4] = {784, 1024, 1024, 10};
  const int64_t B = 256;
  cairn_registry *r;
  cairn_mlp *m;
  cairn_mlp_config cfg = {.n_layers = 3, .sizes = sizes, .hidden_act = CAIRN_ACT_RELU,
                          .loss = CAIRN_LOSS_SPARSE_SOFTMAX_XENT, .optim = cairn_optim_defaults(CAIRN_OPTIM_ADAM)};
  CHECK(cairn_registry_new(1, &r));
  CHECK(cairn_mlp_new(r, &cfg, &m));
  CHECK(cairn_registry_initialize_collection(r, CAIRN_COLL_GLOBAL));
  cairn_saver *s = saver_for(r, CAIRN_CKPT_COMPRESS_AUTO), *sc = saver_for(r, CAIRN_CKPT_COMPRESS_COMPACT);
  size_t state = 0;
  for (size_t i = 0; i < cairn_saver_count(s); i++) state += cairn_tensor_nbytes(cairn_var_tensor(cairn_saver_var_at(s, i)));
  cairn_tensor *X, *Y;
  int64_t xs[2] = {B, 784};
  CHECK(cairn_tensor_new(CAIRN_DTYPE_F32, 2, xs, &X));
  CHECK(cairn_tensor_new(CAIRN_DTYPE_I32, 1, &B, &Y));
  cairn_rng g;
  cairn_rng_init(&g, 3, 0);
  for (int64_t i = 0; i < X->size; i++) cairn_tensor_f32(X)[i] = cairn_rng_uniform(&g);
  for (int64_t i = 0; i < B; i++) cairn_tensor_i32(Y)[i] = (int32_t)(i % 10);
  char prefix[600];
  snprintf(prefix, sizeof prefix, "%s/mlp.ckpt", g_dir);
  int R = o->repeats;
  double sp[4][BENCH_MAX_REPEATS], q[3][BENCH_MAX_REPEATS];
  float loss;
  int64_t gstep = 0;
  for (int rep = -1; rep < R; rep++) {
    double secs[4] = {0, 0, 0, 0};
    for (int k = 0; k < 4; k++) {
      int mode = (k + (rep < 0 ? 0 : rep)) % 4; /* 0 none, 1 sync, 2 async, 3 async compact */
      cairn_saver *sv = mode == 3 ? sc : s;
      /* Steady state: a save every `every` steps whose phase 2 overlaps
         the steps after it. The block starts with one in flight (its phase
         1 untimed) and ends with the last one begun (its phase 2 waited for
         untimed): steps/every stalls and as many overlapped writes. */
      if (mode >= 2) { /* one untimed step first: a new step, new values to write */
        CHECK(cairn_mlp_train_step(m, X, Y, &loss));
        CHECK(cairn_saver_save_begin(sv, prefix, ++gstep, NULL, 0));
      }
      double t0 = bench_now();
      for (int i = 1; i <= steps; i++) {
        CHECK(cairn_mlp_train_step(m, X, Y, &loss));
        gstep++;
        if (i % every) continue;
        if (mode == 1) CHECK(cairn_saver_save(sv, prefix, gstep, NULL, 0));
        else if (mode >= 2) CHECK(cairn_saver_save_begin(sv, prefix, gstep, NULL, 0));
      }
      secs[mode] = bench_now() - t0;
      CHECK(cairn_saver_save_wait(sv)); /* untimed: see the header */
    }
    if (rep < 0) continue;
    for (int k = 0; k < 4; k++) sp[k][rep] = steps / secs[k];
    for (int k = 0; k < 3; k++) q[k][rep] = secs[0] / secs[k + 1];
  }
  char p[400];
  snprintf(p, sizeof p,
           "\"model\": \"784-1024-1024-10 relu sparse-xent adam\", \"batch\": %lld, \"steps\": %d, \"every\": %d, "
           "\"state_bytes\": %zu, \"fs\": \"%s\"",
           (long long)B, steps, every, state, fs_name(g_dir));
  bench_section("(b) MLP training loop with a checkpoint every K steps, steps/s; ratio = throughput / no checkpoint");
  bench_emit("train_no_ckpt", p, bench_stats_of(sp[0], R), "steps/s", 0, NULL);
  bench_emit("train_sync_ckpt", p, bench_stats_of(sp[1], R), "steps/s", bench_stats_of(q[0], R).median,
             "train_no_ckpt");
  bench_emit("train_async_ckpt", p, bench_stats_of(sp[2], R), "steps/s", bench_stats_of(q[1], R).median,
             "train_no_ckpt");
  bench_emit("train_async_compact_ckpt", p, bench_stats_of(sp[3], R), "steps/s", bench_stats_of(q[2], R).median,
             "train_no_ckpt");
  fprintf(stderr, "last loss %.5f\n", (double)loss);
  cairn_saver_free(s);
  cairn_saver_free(sc);
  cairn_tensor_free(X);
  cairn_tensor_free(Y);
  cairn_mlp_free(m);
  cairn_registry_free(r);
}

int main(int argc, char **argv) {
  bench_opts o;
  if (bench_begin("async-checkpoint", &argc, argv, &o)) return 2;
  const char *base = NULL;
  int steps = o.quick ? 100 : 200, every = 50;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--dir")) base = argv[i + 1];
    else if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--every")) every = atoi(argv[i + 1]);
  }
  if (steps < 1 || every < 1) {
    fprintf(stderr, "bench_async: --steps N>=1 --every K>=1\n");
    return 2;
  }
  if (!base) base = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : ".";
  snprintf(g_dir, sizeof g_dir, "%s/bench-async-XXXXXX", base);
  if (!mkdtemp(g_dir)) {
    perror("bench_async: mkdtemp");
    return 1;
  }
  bench_stall(&o);
  bench_train(&o, steps, every);
  rm_dir(g_dir);
  return 0;
}
