/* cairn-fmnist/dist.h — cairn-fmnist's one door to MPI (train --distributed).
 *
 * Every MPI call of the tool goes through these functions, so that
 * the rest of tools/cairn-fmnist/ reads the same in a build with MPI and in one
 * without, and has no conditional compilation. dist.c is the only
 * file that asks whether cairn has MPI (CAIRN_WITH_MPI of <cairn/build.h>,
 * and cairn_mpi_available() at run time); it holds the job's one context.
 *
 * Before fmnist_dist_init (or without MPI) the tool is a single process:
 * rank 0 of 1, and every function below is a no-op that succeeds, so the
 * callers need no "if distributed" of their own. Call them from the thread
 * that called fmnist_dist_init.
 */
#ifndef FMNIST_DIST_H
#define FMNIST_DIST_H
#include <stddef.h>
#include <stdint.h>

#include <cairn.h>

/* 1 if this cairn was built with MPI and --distributed can work. */
int fmnist_dist_available(void);
/* What to install when it is not: one line, no newline. */
const char *fmnist_dist_missing(void);

/* Starts MPI (MPI_Init_thread from argc/argv unless already initialized)
 * and makes this process one rank of the job; collective over
 * MPI_COMM_WORLD. Without MPI: CAIRN_E_UNAVAILABLE (ask
 * fmnist_dist_available() first and print fmnist_dist_missing()). */
cairn_status fmnist_dist_init(int *argc, char ***argv);
/* Finalizes MPI if fmnist_dist_init started it; nothing otherwise. */
void fmnist_dist_free(void);
/* Ends every rank of the job with `code` (MPI_Abort); returns only when
 * there is no job, doing nothing. */
void fmnist_dist_abort(int code);

int fmnist_dist_rank(void); /* 0 when not distributed */
int fmnist_dist_size(void); /* 1 when not distributed */

/* Rank 0's buf[0..n) on every rank. */
cairn_status fmnist_dist_broadcast(void *buf, size_t n);
/* This rank's rows [*begin, *end) of a global batch of `batch` rows. */
void fmnist_dist_shard(int64_t batch, int64_t *begin, int64_t *end);
/* *loss, this rank's mean over its equal shard, becomes the mean over the
 * ranks (the global batch's mean loss). */
cairn_status fmnist_dist_mean_loss(double *loss);
/* The BroadcastGlobalVariablesHook from rank 0, for every rank's hook
 * list; *out = NULL (and CAIRN_OK) when not distributed. */
cairn_status fmnist_dist_broadcast_hook_new(cairn_hook **out);
/* Makes mlp average its gradients over the ranks before each update. */
void fmnist_dist_average_grads(cairn_mlp *mlp);
/* On rank 0 of a job, prints what the gradients' allreduce cost the run
 * of `secs` seconds (one line on stdout); nothing otherwise. */
void fmnist_dist_print_stats(double secs);

#endif
