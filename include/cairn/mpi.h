/* cairn/mpi.h — data-parallel training over MPI, Horovod's model
 * (horovod/tensorflow: BroadcastGlobalVariablesHook, allreduce of averaged
 * gradients; doc/session-semantics.md, "Chief, workers and MPI ranks").
 *
 * Not included by <cairn.h>: it needs <mpi.h>. Built only when configure
 * found MPI (--with-mpi, the default when mpicc is found); the functions
 * live in libcairn itself, which then links libmpi (cairn.pc's
 * Libs.private). A binary is tied to the MPI it was built with (MPI_Comm is
 * a pointer in Open MPI, an int in MPICH).
 *
 * ---- The recipe (every rank runs the same program) --------------------------
 *   cairn_mpi *c;  cairn_mpi_new(&argc, &argv, NULL, &c);
 *   shard the data:      cairn_mpi_shard(rank, size, N, &begin, &end)
 *   scale the rate:      lr = cairn_mpi_scaled_lr(base_lr, size, step, warmup)
 *   average gradients:   cairn_mlp_set_grads_hook(mlp, cairn_mpi_grads_fn, c)
 *                        (or cairn_mpi_allreduce_mean(c, grads, n) before
 *                        cairn_optim_apply in a hand-written step)
 *   MonitoredTrainingSession on every rank with is_chief = 1 (each process
 *   prepares its own session: no parameter server), checkpoint_dir =
 *   cairn_mpi_checkpoint_dir(c, dir) — dir on rank 0, NULL elsewhere — and
 *   summary_dir likewise, so only rank 0 restores, writes checkpoints and
 *   summaries; hooks = [cairn_mpi_broadcast_hook(c, 0), ...]: after each
 *   session creation rank 0's GLOBAL variables (restored or initialized)
 *   overwrite every other rank's.
 *   On any error: report it and call cairn_mpi_abort(c, 1), which ends the
 *   whole job (MPI has no way to leave a collective one rank abandoned).
 *   cairn_mpi_free(c) at the end (finalizes MPI only if cairn initialized it).
 *
 * ---- Failures ---------------------------------------------------------------
 * The duplicated communicator has MPI_ERRORS_RETURN, and every collective is
 * nonblocking and polled against a deadline (timeout_secs, default 60 s as
 * Horovod's stall warning; CAIRN_MPI_TIMEOUT=SECS in the environment
 * overrides the default, 0 or less turning the deadline off). So the
 * deadline bounds how long any rank may stay outside MPI (computing,
 * writing a checkpoint) while the others wait for it.
 *
 * A collective cannot tell whose contribution is missing, so on a deadline
 * the rank sends every other rank a heartbeat (a one-byte message on a
 * communicator of its own) and waits up to 2 s (or timeout_secs if less)
 * for the answers, which ranks waiting in any cairn collective give at
 * once. It then fails with CAIRN_E_DEADLINE naming the silent ones:
 *   "mpi: allreduce of gradients (...): no completion after 60.0 s
 *    (timeout 60.0 s) on rank 0 of 4: rank 1 stopped answering (no reply to
 *    a heartbeat within 2.0 s: stopped, hung, dead, or busy outside MPI);
 *    ranks 2, 3 answered; abort the job (cairn_mpi_abort) and restart it
 *    from the chief's latest checkpoint"
 * and, when every rank answers, says so instead ("every other rank answers
 * a heartbeat (they wait in MPI too): the ranks may have called different
 * collectives, or MPI itself is stuck"). An MPI error fails with
 * CAIRN_E_UNAVAILABLE and MPI's text. Either leaves the context broken:
 * every later collective fails at once with CAIRN_E_UNAVAILABLE (so a
 * MonitoredSession's recovery cannot re-enter a collective the other ranks
 * are not in). A rank killed by a signal is normally noticed first by
 * mpirun, which then ends the job. cairn_mpi_free runs a barrier under the
 * same deadline before MPI_Finalize (which would wait forever for a stopped
 * rank) and skips MPI_Finalize, logging the error, if it fails. MPI_Init
 * and the communicator set-up in cairn_mpi_new are MPI's blocking calls,
 * without a deadline.
 *
 * ---- Threads ----------------------------------------------------------------
 * cairn asks for MPI_THREAD_FUNNELED when it initializes MPI: call these
 * functions from the thread that initialized MPI. One context is used by one
 * thread at a time.
 */
#ifndef CAIRN_MPI_H
#define CAIRN_MPI_H
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include "cairn/model.h"
#include "cairn/monitored.h"
#include "cairn/status.h"
#include "cairn/tensor.h"
#include "cairn/var.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cairn_mpi cairn_mpi;

typedef struct cairn_mpi_options {
  MPI_Comm comm;        /* the application's communicator; MPI_COMM_NULL:
                           MPI_COMM_WORLD. It is duplicated, never used. */
  size_t fusion_bytes;  /* allreduce fusion buffer; 0: 64 MiB
                           (CAIRN_MPI_FUSION_BYTES overrides the default) */
  double timeout_secs;  /* deadline of one collective; 0: 60 s
                           (CAIRN_MPI_TIMEOUT overrides; there 0 or less:
                           wait forever); < 0: wait forever */
} cairn_mpi_options;

/* comm MPI_COMM_NULL, fusion_bytes 0, timeout_secs 0. A zero-filled struct
 * is NOT the default where MPI_COMM_NULL is not all-zero bytes (Open MPI:
 * it is the address of a handle object), so start from this. */
CAIRN_API cairn_mpi_options cairn_mpi_options_default(void);

/* Calls MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED) unless MPI is
 * already initialized (argc, argv may be NULL), duplicates the communicator
 * (MPI_Comm_dup, errors returned, not fatal), and splits a node-local one
 * (MPI_Comm_split_type SHARED) for the local rank and size. o NULL: the
 * defaults. Collective over the communicator.
 * Errors: CAIRN_E_NULL, CAIRN_E_INVALID (fusion_bytes < 4), CAIRN_E_STATE
 * (MPI already finalized), CAIRN_E_UNAVAILABLE (an MPI call failed: its
 * text), CAIRN_E_NOMEM. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_mpi_new(int *argc, char ***argv, const cairn_mpi_options *o,
                                                  cairn_mpi **out);
/* Deprecated (doc/deprecated.md): the name and argument order of cairn
 * 0.1, the options first; calls cairn_mpi_new(argc, argv, o, out) (its
 * messages say "mpi_new"). Removed in the next release. */
CAIRN_API CAIRN_NODISCARD CAIRN_DEPRECATED("use cairn_mpi_new(argc, argv, o, out)") cairn_status
cairn_mpi_init(const cairn_mpi_options *o, int *argc, char ***argv, cairn_mpi **out);
/* Frees the communicators and, if cairn_mpi_new initialized MPI and the
 * context is not broken, calls MPI_Finalize, after a barrier under the
 * deadline (collective: every rank calls it; a rank that does not come in
 * time is named in an ERROR log line and MPI_Finalize is skipped). A broken context skips it
 * (MPI_Finalize would wait for the failed rank); use cairn_mpi_abort.
 * NULL does nothing. */
CAIRN_API void cairn_mpi_free(cairn_mpi *c);
/* MPI_Abort on the duplicated communicator: ends every rank of the job
 * with `code`. Does not return. */
CAIRN_API void cairn_mpi_abort(cairn_mpi *c, int code);

CAIRN_API int cairn_mpi_rank(const cairn_mpi *c);
CAIRN_API int cairn_mpi_size(const cairn_mpi *c);
CAIRN_API int cairn_mpi_local_rank(const cairn_mpi *c);
CAIRN_API int cairn_mpi_local_size(const cairn_mpi *c);
/* 1 on rank 0 (the chief: restores, writes checkpoints and summaries). */
CAIRN_API int cairn_mpi_is_chief(const cairn_mpi *c);
/* The duplicated communicator (borrowed; valid until cairn_mpi_free). */
CAIRN_API MPI_Comm cairn_mpi_comm(const cairn_mpi *c);
/* The thread level MPI provides (MPI_THREAD_*). */
CAIRN_API int cairn_mpi_thread_level(const cairn_mpi *c);
/* dir on the chief, NULL on the others: what to pass as
 * MonitoredTrainingSession's checkpoint_dir and summary_dir. */
CAIRN_API const char *cairn_mpi_checkpoint_dir(const cairn_mpi *c, const char *dir);

/* ---- collectives (all ranks must call them, in the same order) ------------ */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_mpi_barrier(cairn_mpi *c);
/* Sums v[0..n) (f64) over the ranks in place (metrics, losses). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_mpi_allreduce_sum_f64(cairn_mpi *c, double *v, size_t n);
/* Averages t[0..n) (f32 tensors, same shapes on every rank) over the ranks
 * in place, every sum an MPI_Iallreduce(MPI_IN_PLACE, MPI_FLOAT, MPI_SUM)
 * and the result multiplied by 1/size. Tensors of 256 KiB or more are
 * summed where they are, by an allreduce of their own (copying them costs
 * more than fusing saves); smaller ones are copied into the fusion buffer in
 * order, each full bucket summed by one allreduce and copied back (a tensor
 * larger than the buffer is split across buckets). All of a call's
 * allreduces are in flight together. The buffer is allocated on the first
 * call (the smaller of fusion_bytes and the small tensors' total) and grown
 * only when a larger total arrives. Errors: CAIRN_E_NULL, CAIRN_E_DTYPE (a non-f32 tensor),
 * CAIRN_E_NOMEM, CAIRN_E_DEADLINE, CAIRN_E_UNAVAILABLE; on the last two the
 * tensors hold unspecified values. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_mpi_allreduce_mean(cairn_mpi *c, cairn_tensor *const *t, size_t n);
/* cairn_mpi_allreduce_mean(user, grads, n) as a cairn_grads_fn
 * (cairn/model.h): cairn_mlp_set_grads_hook(mlp, cairn_mpi_grads_fn, c). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_mpi_grads_fn(void *user, cairn_tensor *const *grads, size_t n);
/* Broadcasts buf[0..bytes) from root to every rank (small host data: a
 * data position, a configuration). Every rank passes the same bytes.
 * Errors: CAIRN_E_NULL, CAIRN_E_INVALID (root), CAIRN_E_DEADLINE,
 * CAIRN_E_UNAVAILABLE. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_mpi_broadcast(cairn_mpi *c, void *buf, size_t bytes, int root);
/* Horovod's broadcast_global_variables(root): every GLOBAL variable of r
 * (creation order; LOCAL ones are per-rank and not sent) and its
 * initialized flag become root's, bytes for bytes. The ranks first agree
 * that they hold the same variables (count, total bytes and a hash of the
 * names and shapes); if not, every rank fails with CAIRN_E_INVALID.
 * Memory: the values travel one bucket at a time through the fusion buffer
 * (fusion_bytes, or the variables' total if smaller), never as a copy of
 * the whole state (doc/restore-memory.md).
 * Errors: also CAIRN_E_NULL, CAIRN_E_INVALID (root out of range),
 * CAIRN_E_NOMEM, CAIRN_E_DEADLINE, CAIRN_E_UNAVAILABLE. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_mpi_broadcast_variables(cairn_mpi *c, cairn_registry *r, int root);
/* Horovod's BroadcastGlobalVariablesHook(root): a hook whose
 * after_create_session runs cairn_mpi_broadcast_variables on the session's
 * registry. Put it in every rank's hook list (after the chief-only hooks,
 * as MonitoredTrainingSession orders them, so rank 0's first checkpoint is
 * written before). Every rank is a chief (is_chief = 1): a
 * MonitoredTrainingSession with is_chief = 0 and this hook is refused at
 * once (CAIRN_E_INVALID), as a worker would wait for a model nobody
 * shares with it. c is borrowed and must outlive the hook.
 * Errors: CAIRN_E_NULL, CAIRN_E_INVALID (root), CAIRN_E_NOMEM. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_hook_new_mpi_broadcast(cairn_mpi *c, int root, cairn_hook **out);
/* Deprecated (doc/deprecated.md): 0.1's name of
 * cairn_hook_new_mpi_broadcast, same arguments; removed in the next
 * release. */
CAIRN_API CAIRN_NODISCARD CAIRN_DEPRECATED("use cairn_hook_new_mpi_broadcast") cairn_status
cairn_mpi_broadcast_hook_new(cairn_mpi *c, int root, cairn_hook **out);

/* Time spent in cairn_mpi_allreduce_mean since init (or the last reset). */
typedef struct cairn_mpi_stats {
  uint64_t allreduce_calls;   /* cairn_mpi_allreduce_mean calls */
  uint64_t allreduce_buckets; /* MPI_Iallreduce calls */
  uint64_t allreduce_bytes;   /* payload, per rank */
  double allreduce_secs;      /* wall time inside, copies included */
} cairn_mpi_stats;
CAIRN_API cairn_mpi_stats cairn_mpi_get_stats(const cairn_mpi *c);
CAIRN_API void cairn_mpi_reset_stats(cairn_mpi *c);

/* ---- helpers (no communication) ------------------------------------------- */
/* The learning rate for `size` ranks (Goyal et al., "Accurate, Large
 * Minibatch SGD", section 2.2): base·size, reached linearly from base over the
 * first warmup_steps steps (warmup_steps <= 0: no warm-up):
 *   lr(step) = base · (1 + (size − 1) · min(step, warmup) / warmup). */
CAIRN_API float cairn_mpi_scaled_lr(float base_lr, int size, int64_t step, int64_t warmup_steps);
/* Rank's contiguous share [*begin, *end) of n items: the first n % size
 * ranks get one more; every item belongs to exactly one rank. */
CAIRN_API void cairn_mpi_shard(int rank, int size, int64_t n, int64_t *begin, int64_t *end);

#ifdef __cplusplus
}
#endif
#endif
