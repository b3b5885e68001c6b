/* tests/mpi/mpi_train: small MPI programs for tests/mpi.sh, run under
 * mpirun -np 2 (or 1).
 *
 *   mpi_train helpers
 *       cairn_mpi_shard and cairn_mpi_scaled_lr on many cases (1 rank).
 *   mpi_train equiv STEPS B
 *       Every rank builds the same MLP from a different seed, broadcasts
 *       rank 0's variables and checks that all ranks then hold the same
 *       bytes; trains STEPS SGD steps, each rank on its shard of the same
 *       global batch of B rows, gradients averaged by cairn_mpi_grads_fn;
 *       checks the ranks still agree; rank 0 then trains a reference model
 *       alone on the full batches and prints the largest differences.
 *       Exit 0 when the relative difference is within 1e-5.
 *   mpi_train allreduce
 *       cairn_mpi_allreduce_mean on 20 tensors of 70,000 floats (each
 *       reduced in place; more than the 16 allreduces kept in flight), small
 *       tensors between them (fused, several buckets with a small
 *       CAIRN_MPI_FUSION_BYTES) and an empty one. Values are small integers,
 *       so the mean over the ranks is exact: every element is checked, and
 *       the statistics count the bytes once.
 *   mpi_train train DIR_TEMPLATE STEPS [--kill-at K | --stall-at K]
 *       Horovod's recipe on MonitoredTrainingSession: every rank is_chief,
 *       checkpoint_dir = DIR_TEMPLATE with %d = rank, on rank 0 only
 *       (cairn_mpi_checkpoint_dir), BroadcastGlobalVariablesHook(0),
 *       StopAtStepHook(last_step = STEPS), a checkpoint every step. Prints
 *       the start step, checks the ranks agree after the broadcast and at
 *       the end, and prints a checksum of every GLOBAL variable.
 *       --kill-at K: rank 1 SIGKILLs itself when about to run step K;
 *       --stall-at K: rank 1 sleeps 600 s there instead (the others must
 *       time out: CAIRN_MPI_TIMEOUT).
 *       --stop-at-exit: rank 1 stops itself (SIGSTOP) after training, before
 *       cairn_mpi_free: the others must not wait for it in MPI_Finalize.
 *       --worker-role: rank 1 asks for TF's worker role (is_chief = 0) with
 *       the broadcast hook, as a TF user would: the session must be
 *       refused at once (every rank is a chief in this recipe), not after
 *       rank 0's broadcast deadline.
 * On any error a rank prints it and calls cairn_mpi_abort. */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cairn.h>
#include <cairn/mpi.h>

#define DIM 16
#define HIDDEN 32
#define CLASSES 4

static cairn_mpi *g_mpi;

static void die(const char *what, cairn_status st) {
  fprintf(stderr, "rank %d: %s failed: %s: %s\n", cairn_mpi_rank(g_mpi), what, cairn_status_str(st), cairn_errmsg());
  cairn_mpi_abort(g_mpi, 3);
}

/* The global batch of `step`: B rows around CLASSES centres; the same on
 * every rank. x is (B, DIM) f32, y (B) i32. */
static void make_batch(int64_t step, int64_t B, float *x, int32_t *y) {
  cairn_rng r;
  cairn_rng_init(&r, 1234, (uint64_t)step);
  for (int64_t i = 0; i < B; i++) {
    int32_t k = (int32_t)((i + step) % CLASSES);
    y[i] = k;
    for (int j = 0; j < DIM; j++) x[i * DIM + j] = (j % CLASSES == k ? 1.5f : 0.0f) + 0.7f * cairn_rng_normal(&r);
  }
}

/* Views of rows [b, e) of the batch. */
static void shard_views(float *x, int32_t *y, int64_t b, int64_t e, cairn_tensor *tx, cairn_tensor *ty) {
  int64_t xs[2] = {e - b, DIM}, ys[1] = {e - b};
  if (cairn_tensor_view(tx, x + b * DIM, CAIRN_DTYPE_F32, 2, xs) ||
      cairn_tensor_view(ty, y + b, CAIRN_DTYPE_I32, 1, ys))
    die("tensor view", CAIRN_E_INVALID);
}

static cairn_mlp *build(cairn_registry *r, cairn_optim_kind kind, float lr) {
  int64_t sizes[3] = {DIM, HIDDEN, CLASSES};
  cairn_mlp_config cfg = {.n_layers = 2, .sizes = sizes, .hidden_act = CAIRN_ACT_RELU,
                          .loss = CAIRN_LOSS_SPARSE_SOFTMAX_XENT, .optim = cairn_optim_defaults(kind)};
  cfg.optim.learning_rate = lr;
  cairn_mlp *m = NULL;
  cairn_status st = cairn_mlp_new(r, &cfg, &m);
  if (st) die("mlp_new", st);
  return m;
}

/* FNV-1a over every GLOBAL variable's bytes and initialized flag. */
static uint64_t globals_hash(cairn_registry *r) {
  cairn_var *v[64];
  size_t n = cairn_registry_list(r, CAIRN_COLL_GLOBAL, v, 64);
  uint64_t h = 14695981039346656037ull;
  for (size_t i = 0; i < n && i < 64; i++) {
    const cairn_tensor *t = cairn_var_tensor(v[i]);
    const unsigned char *p = t->data;
    for (size_t k = 0; k < cairn_tensor_nbytes(t); k++) h = (h ^ p[k]) * 1099511628211ull;
    h = (h ^ (unsigned)cairn_var_is_initialized(v[i])) * 1099511628211ull;
  }
  return h;
}

/* 1 when every rank has the same hash. */
static int ranks_agree(uint64_t h) {
  uint64_t mx = h, mn = h;
  MPI_Comm comm = cairn_mpi_comm(g_mpi);
  if (MPI_Allreduce(MPI_IN_PLACE, &mx, 1, MPI_UINT64_T, MPI_MAX, comm) != MPI_SUCCESS ||
      MPI_Allreduce(MPI_IN_PLACE, &mn, 1, MPI_UINT64_T, MPI_MIN, comm) != MPI_SUCCESS)
    die("agreement allreduce", CAIRN_E_UNAVAILABLE);
  return mx == mn;
}

static int cmd_equiv(int64_t steps, int64_t B) {
  int rank = cairn_mpi_rank(g_mpi), size = cairn_mpi_size(g_mpi);
  const float lr = 0.1f;
  cairn_registry *r;
  cairn_status st;
  /* A different seed per rank: only the broadcast can make them agree. */
  if ((st = cairn_registry_new(1 + 1000 * (uint64_t)rank, &r))) die("registry_new", st);
  cairn_mlp *m = build(r, CAIRN_OPTIM_SGD, lr);
  if ((st = cairn_registry_initialize_collection(r, CAIRN_COLL_GLOBAL))) die("initialize", st);
  int before = ranks_agree(globals_hash(r));
  if ((st = cairn_mpi_broadcast_variables(g_mpi, r, 0))) die("broadcast_variables", st);
  int after = ranks_agree(globals_hash(r));
  if (rank == 0)
    printf("broadcast: ranks %s before, %s after\n", before ? "agree" : "differ", after ? "agree" : "differ");
  if (!after) return 1;

  float *x = malloc((size_t)B * DIM * sizeof *x);
  int32_t *y = malloc((size_t)B * sizeof *y);
  int64_t b, e;
  cairn_mpi_shard(rank, size, B, &b, &e);
  cairn_mlp_set_grads_hook(m, cairn_mpi_grads_fn, g_mpi);
  for (int64_t t = 0; t < steps; t++) {
    make_batch(t, B, x, y);
    cairn_tensor tx, ty;
    shard_views(x, y, b, e, &tx, &ty);
    if ((st = cairn_mlp_train_step(m, &tx, &ty, NULL))) die("train_step", st);
  }
  uint64_t h = globals_hash(r);
  int agree = ranks_agree(h);
  if (rank == 0)
    printf("after %lld steps: ranks %s, hash %016llx, %llu allreduce buckets\n", (long long)steps,
           agree ? "agree" : "differ", (unsigned long long)h,
           (unsigned long long)cairn_mpi_get_stats(g_mpi).allreduce_buckets);
  int rc = agree ? 0 : 1;

  if (rank == 0) {
    /* One process, batch B, the same initial values (seed 1 = rank 0's). */
    cairn_registry *r1;
    if ((st = cairn_registry_new(1, &r1))) die("registry_new", st);
    cairn_mlp *m1 = build(r1, CAIRN_OPTIM_SGD, lr);
    if ((st = cairn_registry_initialize_collection(r1, CAIRN_COLL_GLOBAL))) die("initialize", st);
    for (int64_t t = 0; t < steps; t++) {
      make_batch(t, B, x, y);
      cairn_tensor tx, ty;
      shard_views(x, y, 0, B, &tx, &ty);
      if ((st = cairn_mlp_train_step(m1, &tx, &ty, NULL))) die("reference train_step", st);
    }
    /* Largest |a - b| / max(|b|, 1e-2) (relative, with an absolute floor
       of 1e-7 for weights near 0) and largest |a - b| over every weight. */
    double max_rel = 0, max_abs = 0;
    int identical = 1;
    for (int i = 0; i < 2; i++) {
      for (int k = 0; k < 2; k++) {
        cairn_var *va = k ? cairn_mlp_bias(m, i) : cairn_mlp_kernel(m, i);
        cairn_var *vb = k ? cairn_mlp_bias(m1, i) : cairn_mlp_kernel(m1, i);
        const float *a = cairn_tensor_f32(cairn_var_tensor(va)), *bb = cairn_tensor_f32(cairn_var_tensor(vb));
        int64_t n = cairn_var_tensor(va)->size;
        for (int64_t j = 0; j < n; j++) {
          double d = a[j] > bb[j] ? (double)a[j] - bb[j] : (double)bb[j] - a[j];
          double ref = bb[j] < 0 ? -(double)bb[j] : bb[j];
          if (d != 0) identical = 0;
          if (d > max_abs) max_abs = d;
          if (d / (ref > 1e-2 ? ref : 1e-2) > max_rel) max_rel = d / (ref > 1e-2 ? ref : 1e-2);
        }
      }
    }
    printf("2-rank vs 1-rank: max abs diff %.3g, max rel diff %.3g (tolerance 1e-5)%s\n", max_abs, max_rel,
           identical ? ", bitwise identical" : "");
    if (max_rel > 1e-5) rc = 1;
    cairn_mlp_free(m1);
    cairn_registry_free(r1);
  }
  /* Every rank exits with rank 0's verdict. */
  int worst = rc;
  MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_INT, MPI_MAX, cairn_mpi_comm(g_mpi));
  free(x);
  free(y);
  cairn_mlp_free(m);
  cairn_registry_free(r);
  return worst;
}

static int cmd_train(const char *tmpl, int64_t steps, int64_t kill_at, int64_t stall_at, int worker_role) {
  int rank = cairn_mpi_rank(g_mpi), size = cairn_mpi_size(g_mpi);
  const int64_t B = 32;
  char dir[4096];
  snprintf(dir, sizeof dir, tmpl, rank);
  /* Only the chief has a checkpoint directory (and creates it). */
  if (cairn_mpi_is_chief(g_mpi)) mkdir(dir, 0777);
  cairn_registry *r;
  cairn_status st;
  if ((st = cairn_registry_new(7 + (uint64_t)rank, &r))) die("registry_new", st);
  cairn_mlp *mlp = build(r, CAIRN_OPTIM_ADAM, cairn_mpi_scaled_lr(0.005f, size, 0, 0));
  cairn_mlp_set_grads_hook(mlp, cairn_mpi_grads_fn, g_mpi);
  cairn_op *op;
  if ((st = cairn_op_new_mlp_train(mlp, NULL, &op))) die("train op", st);
  cairn_hook *bcast, *stop;
  if ((st = cairn_hook_new_mpi_broadcast(g_mpi, 0, &bcast))) die("broadcast hook", st);
  if ((st = cairn_hook_new_stop_at_step(steps, NULL, &stop))) die("stop hook", st);
  cairn_hook *hooks[2] = {bcast, stop};
  cairn_monitored_training_session_options o = cairn_monitored_training_session_options_default();
  o.registry = r;
  o.is_chief = 1; /* every rank prepares its own session (Horovod) */
  if (worker_role && rank == 1) o.is_chief = 0; /* TF's worker role: refused */
  o.checkpoint_dir = cairn_mpi_checkpoint_dir(g_mpi, dir);
  o.save_checkpoint_steps = 1;
  o.save_summaries_steps = 0;
  o.log_step_count_steps = 0;
  o.hooks = hooks;
  o.n_hooks = 2;
  cairn_monitored_session *ms;
  if ((st = cairn_monitored_training_session_new(&o, &ms))) die("monitored training session", st);
  int64_t step;
  if ((st = cairn_session_global_step(cairn_monitored_session_raw_session(ms), &step))) die("global_step", st);
  int agree = ranks_agree(globals_hash(r));
  printf("rank %d: start at step %lld, ranks %s after the broadcast\n", rank, (long long)step,
         agree ? "agree" : "differ");
  fflush(stdout);
  if (!agree) cairn_mpi_abort(g_mpi, 4);

  float *x = malloc((size_t)B * DIM * sizeof *x);
  int32_t *y = malloc((size_t)B * sizeof *y);
  int64_t b, e;
  cairn_mpi_shard(rank, size, B, &b, &e);
  while (step < steps && !cairn_monitored_session_should_stop(ms)) {
    if ((st = cairn_session_global_step(cairn_monitored_session_raw_session(ms), &step))) break;
    if (rank == 1 && step == kill_at) {
      printf("rank 1: SIGKILL at step %lld\n", (long long)step);
      fflush(stdout);
      raise(SIGKILL);
    }
    if (rank == 1 && step == stall_at) {
      printf("rank 1: stalling at step %lld\n", (long long)step);
      fflush(stdout);
      sleep(600);
    }
    make_batch(step, B, x, y);
    cairn_tensor tx, ty;
    shard_views(x, y, b, e, &tx, &ty);
    cairn_feed feeds[2] = {{"x", &tx}, {"y", &ty}};
    cairn_run_args a = cairn_run_args_one(&op);
    a.feeds = feeds;
    a.n_feeds = 2;
    if ((st = cairn_monitored_session_run(ms, &a))) break;
  }
  if (st) {
    fprintf(stderr, "rank %d: training failed: %s: %s\n", rank, cairn_status_str(st),
            cairn_monitored_session_errmsg(ms));
    cairn_mpi_abort(g_mpi, 3);
  }
  if ((st = cairn_session_global_step(cairn_monitored_session_raw_session(ms), &step))) die("global_step", st);
  if ((st = cairn_monitored_session_close_with(ms, CAIRN_OK))) die("close", st);
  uint64_t h = globals_hash(r);
  agree = ranks_agree(h);
  printf("rank %d: done at step %lld hash %016llx, ranks %s\n", rank, (long long)step, (unsigned long long)h,
         agree ? "agree" : "differ");
  cairn_mpi_stats ms_stats = cairn_mpi_get_stats(g_mpi);
  if (rank == 0)
    printf("allreduce: %llu calls, %llu buckets, %.3f ms per call\n", (unsigned long long)ms_stats.allreduce_calls,
           (unsigned long long)ms_stats.allreduce_buckets,
           ms_stats.allreduce_calls ? 1e3 * ms_stats.allreduce_secs / (double)ms_stats.allreduce_calls : 0.0);
  cairn_monitored_session_free(ms);
  cairn_hook_free(bcast);
  cairn_hook_free(stop);
  cairn_op_free(op);
  cairn_mlp_free(mlp);
  cairn_registry_free(r);
  free(x);
  free(y);
  return agree ? 0 : 1;
}

static float ar_value(int rank, size_t t, size_t j) { return (float)(rank * 4 + (int)((t * 7 + j) % 13)); }

static int cmd_allreduce(void) {
  enum { NT = 41 };
  cairn_tensor *t[NT];
  size_t total = 0;
  const int rank = cairn_mpi_rank(g_mpi), size = cairn_mpi_size(g_mpi);
  for (size_t i = 0; i < NT; i++) {
    /* even: 70,000 floats (280 KB, in place); odd: 1..100 floats (fused); 21: empty */
    int64_t n = i == 21 ? 0 : i % 2 == 0 ? 70000 : (int64_t)(1 + (i * 37) % 100);
    if (cairn_tensor_new(CAIRN_DTYPE_F32, 1, &n, &t[i])) {
      fprintf(stderr, "rank %d: tensor_new: %s\n", rank, cairn_errmsg());
      return 1;
    }
    for (int64_t j = 0; j < n; j++) cairn_tensor_f32(t[i])[j] = ar_value(rank, i, (size_t)j);
    total += (size_t)n;
  }
  cairn_mpi_reset_stats(g_mpi);
  cairn_status st = cairn_mpi_allreduce_mean(g_mpi, t, NT);
  if (st) {
    fprintf(stderr, "rank %d: allreduce_mean: %s\n", rank, cairn_errmsg());
    return 1;
  }
  long bad = 0;
  for (size_t i = 0; i < NT; i++)
    for (int64_t j = 0; j < t[i]->size; j++) {
      double want = 0;
      for (int r = 0; r < size; r++) want += ar_value(r, i, (size_t)j);
      want /= size;
      if (cairn_tensor_f32(t[i])[j] != (float)want) bad++;
    }
  cairn_mpi_stats s = cairn_mpi_get_stats(g_mpi);
  if (s.allreduce_bytes != total * sizeof(float)) bad++;
  printf("rank %d: allreduce of %d tensors (%zu floats) in %llu allreduces: %ld wrong\n", rank, NT, total,
         (unsigned long long)s.allreduce_buckets, bad);
  for (size_t i = 0; i < NT; i++) cairn_tensor_free(t[i]);
  return bad != 0;
}

/* cairn_mpi_shard covers [0, n) exactly once, in order, with sizes that
 * differ by at most one; cairn_mpi_scaled_lr ramps from base to base·size. */
static int cmd_helpers(void) {
  int bad = 0;
  for (int size = 1; size <= 7; size++)
    for (int64_t n = 0; n <= 50; n++) {
      int64_t next = 0, lo = n, hi = 0;
      for (int r = 0; r < size; r++) {
        int64_t b, e;
        cairn_mpi_shard(r, size, n, &b, &e);
        if (b != next || e < b) bad++;
        next = e;
        if (e - b < lo) lo = e - b;
        if (e - b > hi) hi = e - b;
      }
      if (next != n || hi - lo > 1) bad++;
    }
  if (cairn_mpi_scaled_lr(0.1f, 4, 0, 0) != 0.4f) bad++;
  if (cairn_mpi_scaled_lr(0.1f, 4, 0, 10) != 0.1f) bad++;
  float mid = cairn_mpi_scaled_lr(0.1f, 4, 5, 10);
  if (mid < 0.2499f || mid > 0.2501f) bad++;
  if (cairn_mpi_scaled_lr(0.1f, 4, 10, 10) != 0.4f || cairn_mpi_scaled_lr(0.1f, 4, 99, 10) != 0.4f) bad++;
  if (cairn_mpi_scaled_lr(0.1f, 1, 3, 10) != 0.1f) bad++;
  printf("helpers: %d failures\n", bad);
  return bad != 0;
}

int main(int argc, char **argv) {
  cairn_status st = cairn_mpi_new(&argc, &argv, NULL, &g_mpi);
  if (st) {
    fprintf(stderr, "mpi_new failed: %s: %s\n", cairn_status_str(st), cairn_errmsg());
    return 2;
  }
  int rc = 2;
  if (argc >= 2 && !strcmp(argv[1], "helpers")) {
    rc = cmd_helpers();
  } else if (argc >= 2 && !strcmp(argv[1], "allreduce")) {
    rc = cmd_allreduce();
  } else if (argc >= 4 && !strcmp(argv[1], "equiv")) {
    rc = cmd_equiv(atoll(argv[2]), atoll(argv[3]));
  } else if (argc >= 4 && !strcmp(argv[1], "train")) {
    int64_t kill_at = -1, stall_at = -1;
    if (argc >= 6 && !strcmp(argv[4], "--kill-at")) kill_at = atoll(argv[5]);
    if (argc >= 6 && !strcmp(argv[4], "--stall-at")) stall_at = atoll(argv[5]);
    int worker_role = argc >= 5 && !strcmp(argv[4], "--worker-role");
    rc = cmd_train(argv[2], atoll(argv[3]), kill_at, stall_at, worker_role);
    if (argc >= 5 && !strcmp(argv[4], "--stop-at-exit") && cairn_mpi_rank(g_mpi) == 1) {
      printf("rank 1: SIGSTOP before cairn_mpi_free\n");
      fflush(stdout);
      raise(SIGSTOP);
    }
  } else {
    fprintf(stderr, "usage: mpi_train helpers | allreduce | equiv STEPS B | train DIR_TEMPLATE STEPS "
                    "[--kill-at K|--stall-at K|--stop-at-exit|--worker-role]\n");
  }
  cairn_mpi_free(g_mpi);
  return rc;
}
