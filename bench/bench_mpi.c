/* bench_mpi: data-parallel training throughput (cairn/mpi.h). One MLP training
 * step (784-1024-1024-10, ReLU, sparse softmax cross-entropy, Adam) on a
 * global batch of B rows split across the ranks, gradients averaged by
 * cairn_mpi_grads_fn. Compare, on one machine:
 *
 *   mpirun -np 2 bench/bench_mpi --threads 1     (2 ranks x 1 thread)
 *   mpirun -np 1 bench/bench_mpi --threads 2     (1 rank  x 2 threads)
 *
 * Prints one JSON object (rank 0): examples/s over the global batch, the
 * median step time, the allreduce time per step and its share, and the time
 * the faster rank waited for the slower one before the allreduce (a barrier
 * ahead of it tells that wait from the allreduce proper; both figures are
 * the larger of the two ranks').
 *
 *   bench_mpi [--batch B] [--steps K] [--rounds R] [--threads T] [--optim adam|sgd]
 *             [--no-allreduce]
 *
 * --no-allreduce leaves the gradients unaveraged: the ranks' compute alone,
 * to tell the allreduce's cost from the ranks slowing each other down.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cairn.h>
#include <cairn/mpi.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The gradients hook: a timed barrier, then cairn_mpi_grads_fn. */
static double peer_wait_s;
static cairn_status grads_hook(void *c, cairn_tensor *const *grads, size_t n) {
  double t0 = now();
  cairn_status st = cairn_mpi_barrier(c);
  peer_wait_s += now() - t0;
  return st ? st : cairn_mpi_grads_fn(c, grads, n);
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void check(cairn_mpi *c, cairn_status st, const char *what) {
  if (!st) return;
  fprintf(stderr, "bench_mpi: %s: %s: %s\n", what, cairn_status_str(st), cairn_errmsg());
  cairn_mpi_abort(c, 1);
}

int main(int argc, char **argv) {
  cairn_blas_coretype_fix(argv); /* before MPI_Init: the exec keeps the pid */
  cairn_mpi *c;
  cairn_status st = cairn_mpi_new(&argc, &argv, NULL, &c);
  if (st) {
    fprintf(stderr, "bench_mpi: mpi_new: %s\n", cairn_errmsg());
    return 1;
  }
  int64_t B = 256;
  int steps = 10, rounds = 5, threads = 0, allreduce = 1;
  cairn_optim_kind optim = CAIRN_OPTIM_ADAM;
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--no-allreduce")) allreduce = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--batch")) B = atoll(argv[i + 1]);
    else if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--optim") && !strcmp(argv[i + 1], "sgd")) optim = CAIRN_OPTIM_SGD;
    else if (!strcmp(argv[i], "--optim") && strcmp(argv[i + 1], "adam")) {
      fprintf(stderr, "bench_mpi: --optim %s: expected adam or sgd\n", argv[i + 1]);
      cairn_mpi_abort(c, 2);
    }
  }
  if (threads > 0) check(c, cairn_set_num_threads(threads), "set_num_threads");
  int rank = cairn_mpi_rank(c), size = cairn_mpi_size(c);
  int64_t b, e;
  cairn_mpi_shard(rank, size, B, &b, &e);
  int64_t rows = e - b;

  int64_t sizes[4] = {784, 1024, 1024, 10};
  cairn_mlp_config cfg = {.n_layers = 3, .sizes = sizes, .hidden_act = CAIRN_ACT_RELU,
                          .loss = CAIRN_LOSS_SPARSE_SOFTMAX_XENT, .optim = cairn_optim_defaults(optim)};
  cairn_registry *r;
  cairn_mlp *m;
  check(c, cairn_registry_new(1, &r), "registry");
  check(c, cairn_mlp_new(r, &cfg, &m), "mlp_new");
  check(c, cairn_registry_initialize_collection(r, CAIRN_COLL_GLOBAL), "initialize");
  check(c, cairn_mpi_broadcast_variables(c, r, 0), "broadcast");
  if (size > 1 && allreduce) cairn_mlp_set_grads_hook(m, grads_hook, c);

  int64_t xs[2] = {rows, 784}, ys[1] = {rows};
  cairn_tensor *x, *y;
  check(c, cairn_tensor_new(CAIRN_DTYPE_F32, 2, xs, &x), "x");
  check(c, cairn_tensor_new(CAIRN_DTYPE_I32, 1, ys, &y), "y");
  cairn_rng g;
  cairn_rng_init(&g, 99, (uint64_t)rank);
  for (int64_t i = 0; i < rows * 784; i++) cairn_tensor_f32(x)[i] = cairn_rng_uniform(&g);
  for (int64_t i = 0; i < rows; i++) cairn_tensor_i32(y)[i] = (int32_t)((b + i) % 10);

  for (int k = 0; k < 3; k++) check(c, cairn_mlp_train_step(m, x, y, NULL), "warm-up step");
  double *step_s = malloc((size_t)rounds * sizeof *step_s), *ar_s = malloc((size_t)rounds * sizeof *ar_s),
         *wait_s = malloc((size_t)rounds * sizeof *wait_s);
  for (int k = 0; k < rounds; k++) {
    check(c, cairn_mpi_barrier(c), "barrier");
    cairn_mpi_reset_stats(c);
    peer_wait_s = 0;
    double t0 = now();
    for (int s = 0; s < steps; s++) check(c, cairn_mlp_train_step(m, x, y, NULL), "step");
    double t[3] = {(now() - t0) / steps, cairn_mpi_get_stats(c).allreduce_secs / steps, peer_wait_s / steps};
    /* The slowest rank sets the pace. */
    MPI_Allreduce(MPI_IN_PLACE, t, 3, MPI_DOUBLE, MPI_MAX, cairn_mpi_comm(c));
    step_s[k] = t[0];
    ar_s[k] = t[1];
    wait_s[k] = t[2];
  }
  qsort(step_s, (size_t)rounds, sizeof *step_s, cmp);
  qsort(ar_s, (size_t)rounds, sizeof *ar_s, cmp);
  qsort(wait_s, (size_t)rounds, sizeof *wait_s, cmp);
  double step = step_s[rounds / 2], ar = ar_s[rounds / 2], wait = wait_s[rounds / 2];
  if (rank == 0)
    printf("{\"bench\": \"mpi_step\", \"ranks\": %d, \"threads_per_rank\": %d, \"global_batch\": %lld, "
           "\"params\": %lld, \"step_ms\": %.3f, \"examples_per_s\": %.1f, \"allreduce_ms_per_step\": %.3f, "
           "\"allreduce_share\": %.3f, \"peer_wait_ms_per_step\": %.3f, \"allreduce_mb_per_step\": %.2f, "
           "\"optim\": \"%s\", \"allreduce\": %s}\n",
           size, cairn_get_num_threads(), (long long)B, (long long)cairn_mlp_num_params(m), 1e3 * step,
           (double)B / step, 1e3 * ar, ar / step, 1e3 * wait,
           size > 1 && allreduce ? 4.0 * (double)cairn_mlp_num_params(m) / 1e6 : 0.0,
           optim == CAIRN_OPTIM_SGD ? "sgd" : "adam", allreduce ? "true" : "false");
  free(step_s);
  free(ar_s);
  free(wait_s);
  cairn_tensor_free(x);
  cairn_tensor_free(y);
  cairn_mlp_free(m);
  cairn_registry_free(r);
  cairn_mpi_free(c);
  return 0;
}
