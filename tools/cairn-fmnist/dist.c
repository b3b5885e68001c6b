/* cairn-fmnist/dist.c — the MPI side of cairn-fmnist (see dist.h).
 *
 * The one region of conditional compilation in the tool: whether
 * <cairn/mpi.h> exists is what the installed <cairn/build.h> says
 * (CAIRN_WITH_MPI), which is how any program built against cairn would ask.
 * Without MPI every function is the single-process answer.
 */
#include "dist.h"

#include <stdio.h>

#if CAIRN_WITH_MPI
#include <cairn/mpi.h>

static cairn_mpi *g_mpi; /* the job's context after fmnist_dist_init, else NULL */

cairn_status fmnist_dist_init(int *argc, char ***argv) {
  if (g_mpi) return CAIRN_OK;
  return cairn_mpi_new(argc, argv, NULL, &g_mpi);
}

void fmnist_dist_free(void) {
  cairn_mpi_free(g_mpi);
  g_mpi = NULL;
}

void fmnist_dist_abort(int code) {
  if (g_mpi) cairn_mpi_abort(g_mpi, code);
}

int fmnist_dist_rank(void) { return g_mpi ? cairn_mpi_rank(g_mpi) : 0; }
int fmnist_dist_size(void) { return g_mpi ? cairn_mpi_size(g_mpi) : 1; }

cairn_status fmnist_dist_broadcast(void *buf, size_t n) {
  return g_mpi ? cairn_mpi_broadcast(g_mpi, buf, n, 0) : CAIRN_OK;
}

void fmnist_dist_shard(int64_t batch, int64_t *begin, int64_t *end) {
  cairn_mpi_shard(fmnist_dist_rank(), fmnist_dist_size(), batch, begin, end);
}

cairn_status fmnist_dist_mean_loss(double *loss) {
  if (!g_mpi) return CAIRN_OK;
  /* Equal shards: the mean of the ranks' means is the global batch's. */
  cairn_status st = cairn_mpi_allreduce_sum_f64(g_mpi, loss, 1);
  if (st == CAIRN_OK) *loss /= cairn_mpi_size(g_mpi);
  return st;
}

cairn_status fmnist_dist_broadcast_hook_new(cairn_hook **out) {
  if (!out) return CAIRN_E_NULL;
  *out = NULL;
  return g_mpi ? cairn_hook_new_mpi_broadcast(g_mpi, 0, out) : CAIRN_OK;
}

void fmnist_dist_average_grads(cairn_mlp *mlp) {
  if (g_mpi) cairn_mlp_set_grads_hook(mlp, cairn_mpi_grads_fn, g_mpi);
}

void fmnist_dist_print_stats(double secs) {
  if (!g_mpi || cairn_mpi_rank(g_mpi) != 0) return;
  /* What data parallelism cost this run: the time in the gradients'
     allreduce, waiting for the slower ranks included. */
  cairn_mpi_stats ms = cairn_mpi_get_stats(g_mpi);
  if (ms.allreduce_calls > 0 && secs > 0)
    printf("allreduce of gradients: %.2f ms per step, %.0f %% of the %.1f s, %.2f MB per step\n",
           1e3 * ms.allreduce_secs / (double)ms.allreduce_calls, 100.0 * ms.allreduce_secs / secs, secs,
           (double)ms.allreduce_bytes / (double)ms.allreduce_calls / 1e6);
}

#else /* cairn without MPI: one process, rank 0 of 1 */

cairn_status fmnist_dist_init(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  return CAIRN_E_UNAVAILABLE;
}

void fmnist_dist_free(void) {}
void fmnist_dist_abort(int code) { (void)code; }
int fmnist_dist_rank(void) { return 0; }
int fmnist_dist_size(void) { return 1; }

cairn_status fmnist_dist_broadcast(void *buf, size_t n) {
  (void)buf;
  (void)n;
  return CAIRN_OK;
}

void fmnist_dist_shard(int64_t batch, int64_t *begin, int64_t *end) {
  *begin = 0;
  *end = batch;
}

cairn_status fmnist_dist_mean_loss(double *loss) {
  (void)loss;
  return CAIRN_OK;
}

cairn_status fmnist_dist_broadcast_hook_new(cairn_hook **out) {
  if (!out) return CAIRN_E_NULL;
  *out = NULL;
  return CAIRN_OK;
}

void fmnist_dist_average_grads(cairn_mlp *mlp) { (void)mlp; }
void fmnist_dist_print_stats(double secs) { (void)secs; }

#endif

/* The library's own answer, not the header's: a program may be compiled
   against one installation and run against another. */
int fmnist_dist_available(void) { return CAIRN_WITH_MPI && cairn_mpi_available(); }

const char *fmnist_dist_missing(void) {
  return "this cairn was built without MPI (configure --with-mpi; Debian: "
         "apt-get install libopenmpi-dev openmpi-bin)";
}
