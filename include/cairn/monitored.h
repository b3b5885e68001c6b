/* cairn/monitored.h — MonitoredSession, SingularMonitoredSession,
 * MonitoredTrainingSession, session creators and hooks with TensorFlow 1.x
 * semantics (tf.compat.v1.train.MonitoredSession and
 * basic_session_run_hooks).
 *
 * doc/session-semantics.md describes the TF behaviour reproduced here, the
 * TF source each part comes from, and where cairn differs; sessions, ops,
 * Scaffold and SessionManager are in cairn/session.h.
 *
 * ---- Layering ---------------------------------------------------------------
 * A monitored session holds a session creator and a list of hooks. It
 * calls every hook's begin() (registry still open for new variables), then
 * creates the session (ChiefSessionCreator: Scaffold finalize +
 * prepare_session; WorkerSessionCreator: Scaffold finalize +
 * wait_for_session), a coordinator, and calls after_create_session() on
 * every hook. Each run() calls before_run() on every hook (a hook may ask
 * for extra fetches, feeds and ops), runs the caller's ops and the hooks'
 * in one cairn_session_run, then after_run() on every hook with the values
 * it asked for. All callbacks go in hook-list order, never reversed (TF's
 * hook lifecycle, doc/session-semantics.md "Hook lifecycle"):
 *
 *   begin()                    once per hook, before the Scaffold finalizes
 *   after_create_session()     after every session (re)creation
 *   before_run → run → after_run   per run (retried on recovery)
 *   end()                      once, at close, only on a clean exit
 *
 * ---- Recovery (MonitoredSession only) --------------------------------------
 * A run (or a run_step_fn, or the session creation itself) failing with
 * CAIRN_E_ABORTED or CAIRN_E_UNAVAILABLE closes the session, creates a new
 * one through the creator (restoring the latest checkpoint of the chief's
 * checkpoint_dir — the newest intact one: a newest checkpoint whose data
 * is corrupt is skipped with a warning, see
 * cairn_session_manager_prepare_session — else initializing; hooks get
 * after_create_session()
 * again, not begin()) and retries the same call. TF retries forever; cairn
 * bounds it (max_recoveries) and says so in the error.
 * SingularMonitoredSession never recovers: those errors propagate.
 *
 * ---- Close -------------------------------------------------------------------
 * C has no with-block: cairn_monitored_session_close() is TF's close()
 * (hooks' end() always runs); cairn_monitored_session_close_with(ms, status) is
 * the with-block's exit for a body that ended with `status`: CAIRN_OK,
 * CAIRN_E_OUT_OF_RANGE (end of data) and CAIRN_E_STOP (a step function's
 * request_stop) are clean — end() runs and the exit returns CAIRN_OK;
 * any other status skips end() (so CheckpointSaverHook writes no final
 * checkpoint), closes the session and is returned.
 *
 * ---- Stopping on SIGTERM and SIGINT (stop_on_signals) ----------------------
 * Batch schedulers send SIGTERM some time before they preempt a job; Ctrl-C
 * sends SIGINT. With the option stop_on_signals (off by default: the library
 * installs no signal handler unless asked), the session installs handlers
 * for both once it is created, and the first signal only sets a flag: the
 * step in flight finishes, should_stop() then returns 1 (a WARNING log line
 * "received SIGTERM: stopping after step N"), and the usual clean exit
 * (cairn_monitored_session_close_with(ms, CAIRN_OK) or _close) runs end() of every
 * hook, so a CheckpointSaverHook writes the final step. Close returns its
 * usual status; cairn_monitored_session_stop_signal() says which signal
 * stopped the session (a tool then exits with 128 + that number, as a shell
 * does). The handler resets both signals to their default action: a second
 * SIGTERM or SIGINT ends the process at once, even during the final save.
 * Close (and free) put back the dispositions found at creation. A signal
 * the process ignores (SIG_IGN, e.g. SIGINT of a background job) stays
 * ignored. Dispositions are per process: one monitored session at a time
 * may use the option (another one fails to open with CAIRN_E_STATE). A
 * signal during the session's creation takes the default action (nothing
 * has been trained yet). Data-parallel jobs: every rank must stop after the
 * same step, which a per-process signal does not guarantee; the option is
 * for one process.
 *
 * ---- Status codes -----------------------------------------------------------
 * "Run called even after should_stop requested." CAIRN_E_STATE; "Session is
 * already closed." CAIRN_E_STATE; "Same tensor is fed by two hooks." /
 * "...by a SessionRunHook and user." CAIRN_E_INVALID; NaN loss
 * CAIRN_E_NAN_LOSS ("NaN loss during training."); StepContext.request_stop
 * CAIRN_E_STOP ("step_fn has requested the iterations to stop."); worker
 * timeout CAIRN_E_DEADLINE; ValueErrors of constructors CAIRN_E_INVALID
 * with TF's text. Details: cairn_monitored_session_errmsg() and
 * cairn_errmsg().
 *
 * ---- Threads ----------------------------------------------------------------
 * A monitored session, its hooks and its creator are used by one thread at
 * a time. A chief and workers in different threads each have their own, over
 * one registry (see cairn/session.h).
 */
#ifndef CAIRN_MONITORED_H
#define CAIRN_MONITORED_H

#include <stddef.h>
#include <stdint.h>

#include "cairn/saver.h"
#include "cairn/scaffold.h"
#include "cairn/session.h"
#include "cairn/status.h"
#include "cairn/var.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== Summary writer interface ================================================= */

/* TF's SessionLog statuses. */
typedef enum cairn_session_log_status {
  CAIRN_SESSION_LOG_START = 1,      /* training (re)starts at step */
  CAIRN_SESSION_LOG_STOP = 2,
  CAIRN_SESSION_LOG_CHECKPOINT = 3  /* a checkpoint was written at step */
} cairn_session_log_status;

/* Where hooks write summaries (the TensorBoard event-file writer is one
 * implementation, elsewhere). A function table: any member may be NULL
 * (that kind of record is dropped). Borrowed by the hooks and sessions it
 * is given to; one writer per directory, shared by them (TF's
 * SummaryWriterCache), so users can write their own scalars through it. */
typedef struct cairn_summary_writer {
  cairn_status (*scalar)(void *self, const char *tag, double value, int64_t step);
  cairn_status (*session_log)(void *self, cairn_session_log_status status, const char *checkpoint_path,
                              int64_t step);
  cairn_status (*flush)(void *self);
  void *self;
  /* The table's size (CONTRIBUTING, "Function tables"): 0 means this
     layout, the first one; otherwise sizeof(cairn_summary_writer), or
     CAIRN_SUMMARY_WRITER_SIZE. Members added later go after this one. The
     hooks given a writer copy the table when they are made (the writer's
     self stays borrowed); a size below the first layout is refused there
     with CAIRN_E_INVALID. */
  size_t struct_size;
} cairn_summary_writer;

#define CAIRN_SUMMARY_WRITER_SIZE sizeof(cairn_summary_writer)

/* ==== Coordinator ================================================================= */

/* TF's Coordinator, reduced to what monitored sessions use: a stop flag, the
 * first error reported by a side thread, and threads to join at close. No
 * status is a "clean stop" (TF's clean_stop_exception_types=[]). */
typedef struct cairn_coordinator cairn_coordinator;

/* Requests a stop; err != CAIRN_OK also records the error (the first one
 * wins) with a printf-style message. Thread-safe. */
CAIRN_API void cairn_coordinator_request_stop(cairn_coordinator *c, cairn_status err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
CAIRN_API int cairn_coordinator_should_stop(const cairn_coordinator *c);
/* The recorded error (CAIRN_OK if none) and its message (may be NULL). */
CAIRN_API cairn_status cairn_coordinator_error(const cairn_coordinator *c, const char **msg);
/* join(ctx) is called when the session closes, after the stop request
 * (TF's coord.join for a registered thread). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_coordinator_register_join(cairn_coordinator *c,
                                                                    void (*join)(void *ctx), void *ctx);

/* ==== Hooks =================================================================== */

typedef struct cairn_hook cairn_hook;
typedef struct cairn_run_context cairn_run_context;  /* TF's SessionRunContext */
typedef struct cairn_run_request cairn_run_request;  /* TF's SessionRunArgs returned by before_run */
typedef struct cairn_run_values cairn_run_values;    /* TF's SessionRunValues */

/* A hook: a function table (every member may be NULL: nothing to do) and
 * its state `self`. A callback returning an error stops the sequence: later
 * hooks are skipped and the error propagates from the monitored call. */
typedef struct cairn_hook_vtable {
  const char *name; /* for messages and logs */
  /* r: the monitored session's registry, still open for new variables
     (TF's default graph in begin()); NULL when a custom creator was given
     without cairn_monitored_session_options.registry. */
  cairn_status (*begin)(void *self, cairn_registry *r);
  cairn_status (*after_create_session)(void *self, cairn_session *s, cairn_coordinator *coord);
  cairn_status (*before_run)(void *self, cairn_run_context *ctx, cairn_run_request *req);
  cairn_status (*after_run)(void *self, cairn_run_context *ctx, const cairn_run_values *values);
  cairn_status (*end)(void *self, cairn_session *s);
  /* cairn addition (TF's hooks cannot tell a clean end from a failure):
     called instead of end() when the session closes on an error (why);
     optional. */
  void (*on_error)(void *self, cairn_status why);
  void (*destroy)(void *self); /* frees self; called by cairn_hook_free */
  /* The table's size, so that it can grow (CONTRIBUTING, "Function
     tables"): 0 means this layout, the one of cairn 0.1; otherwise the
     caller's sizeof(cairn_hook_vtable), or CAIRN_HOOK_VTABLE_SIZE. Members
     added later go after this one, and a table whose size stops short of
     them has them NULL. */
  size_t struct_size;
} cairn_hook_vtable;

#define CAIRN_HOOK_VTABLE_SIZE sizeof(cairn_hook_vtable)

/* A hook object over vt and self. The hook keeps its own copy of the
 * table (vt itself need not outlive the call). Errors: CAIRN_E_NULL,
 * CAIRN_E_INVALID (vt->struct_size neither 0 nor at least the size of the
 * first layout), CAIRN_E_NOMEM (destroy is not called). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_hook_new(const cairn_hook_vtable *vt, void *self, cairn_hook **out);
/* Calls vt->destroy(self) and frees h. NULL does nothing. */
CAIRN_API void cairn_hook_free(cairn_hook *h);
CAIRN_API void *cairn_hook_self(const cairn_hook *h);
CAIRN_API const char *cairn_hook_name(const cairn_hook *h);

/* --- run context: what the hook sees of the run ----------------------------- */
/* The raw session (runs on it bypass hooks). */
CAIRN_API cairn_session *cairn_run_context_session(const cairn_run_context *ctx);
/* The caller's run arguments (TF's original_args). */
CAIRN_API const cairn_run_args *cairn_run_context_args(const cairn_run_context *ctx);
/* Asks the monitored session to stop after this run (from before_run or
 * after_run): should_stop() then returns 1 and a further run fails with
 * "Run called even after should_stop requested.". */
CAIRN_API void cairn_run_context_request_stop(cairn_run_context *ctx);
CAIRN_API int cairn_run_context_stop_requested(const cairn_run_context *ctx);

/* --- run request: what a hook adds to the run (before_run) -------------------- */
/* Fetch name (resolved as cairn_session_run does: an op's output, the
 * pre-step "global_step", a variable). The name is copied. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_run_request_fetch(cairn_run_request *req, const char *name);
/* Feed name (the tensor is borrowed until after_run). A name fed by two
 * hooks fails the run: CAIRN_E_INVALID "Same tensor is fed by two hooks.
 * Conflict(s): [x]"; by a hook and the caller: "Same tensor is fed by a
 * SessionRunHook and user. Conflict(s): [x]". */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_run_request_feed(cairn_run_request *req, const char *name,
                                                           const cairn_tensor *value);
/* An extra op run after the caller's ops, in hook order (TF: an op among
 * the hook's fetches, e.g. a summary op). Referenced until the run ends. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_run_request_op(cairn_run_request *req, const cairn_op *op);
/* Collect the scalar summaries ops emit during this run for this hook. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_run_request_summaries(cairn_run_request *req);

/* --- run values: what the hook asked for (after_run) ---------------------------- */
/* The value of a name this hook fetched; CAIRN_E_NOT_FOUND if it did not
 * ask for it (TF: results is None for a hook that requested nothing). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_run_values_get(const cairn_run_values *v, const char *name,
                                                         cairn_value *out);
/* The same converted: F64/I64 either way, a 1-element TENSOR of a numeric
 * dtype too; else CAIRN_E_DTYPE. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_run_values_f64(const cairn_run_values *v, const char *name,
                                                         double *out);
CAIRN_API CAIRN_NODISCARD cairn_status cairn_run_values_i64(const cairn_run_values *v, const char *name,
                                                         int64_t *out);
/* The summaries collected for this hook (cairn_run_request_summaries), in
 * emission order; tag owned by v. */
CAIRN_API size_t cairn_run_values_summary_count(const cairn_run_values *v);
CAIRN_API CAIRN_NODISCARD cairn_status cairn_run_values_summary_at(const cairn_run_values *v, size_t i,
                                                                const char **tag, double *value);

/* ==== Session creators ======================================================== */

typedef struct cairn_session_creator cairn_session_creator;

/* A custom creator (tests use creators that yield failing sessions). */
typedef struct cairn_session_creator_vtable {
  cairn_status (*create_session)(void *self, cairn_session **out);
  void (*destroy)(void *self);
  /* The table's size, so that it can grow (CONTRIBUTING, "Function
     tables"): 0 means this layout, the first one; otherwise the caller's
     sizeof(cairn_session_creator_vtable), or
     CAIRN_SESSION_CREATOR_VTABLE_SIZE. Members added later go after this
     one, and a table whose size stops short of them has them NULL. */
  size_t struct_size;
} cairn_session_creator_vtable;

#define CAIRN_SESSION_CREATOR_VTABLE_SIZE sizeof(cairn_session_creator_vtable)

/* A creator object over vt and self; it keeps its own copy of the table
 * (vt need not outlive the call). Errors: CAIRN_E_NULL (out, vt or
 * vt->create_session NULL), CAIRN_E_INVALID (vt->struct_size neither 0 nor
 * at least the size of the first layout), CAIRN_E_NOMEM (destroy is not
 * called). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_session_creator_new(const cairn_session_creator_vtable *vt, void *self,
                                                              cairn_session_creator **out);
CAIRN_API CAIRN_NODISCARD cairn_status cairn_session_creator_create(cairn_session_creator *c, cairn_session **out);
CAIRN_API void cairn_session_creator_free(cairn_session_creator *c);

/* TF's ChiefSessionCreator(scaffold, checkpoint_dir,
 * checkpoint_filename_with_path): create = scaffold finalize, then (one
 * SessionManager, built on first use from the scaffold's ops and sm's
 * recovery_wait_secs / session_flags / env) prepare_session with the
 * scaffold's init_op, init feeds, init_fn, saver, restore and warm start.
 * Never waits for a checkpoint. */
typedef struct cairn_chief_session_creator_options {
  cairn_registry *registry;    /* required unless scaffold is given */
  cairn_scaffold *scaffold;    /* borrowed; NULL: a default Scaffold owned by the creator */
  const char *checkpoint_dir;  /* copied */
  const char *checkpoint_filename_with_path;
  cairn_session_manager_options sm; /* its op fields are ignored (the scaffold's are used) */
} cairn_chief_session_creator_options;

/* TF's WorkerSessionCreator(scaffold, max_wait_secs=1800): create =
 * scaffold finalize, then wait_for_session(max_wait_secs). */
typedef struct cairn_worker_session_creator_options {
  cairn_registry *registry;
  cairn_scaffold *scaffold;
  double max_wait_secs; /* default 1800 */
  cairn_session_manager_options sm;
} cairn_worker_session_creator_options;

/* A zero-filled struct of either is NOT the default: sm.recovery_wait_secs
 * 0 is refused and the worker's max_wait_secs 0 waits not at all. Start
 * from these (every other field's zero is its default). */
CAIRN_API cairn_chief_session_creator_options cairn_chief_session_creator_options_default(void);
CAIRN_API cairn_worker_session_creator_options cairn_worker_session_creator_options_default(void);
CAIRN_API CAIRN_NODISCARD cairn_status cairn_chief_session_creator_new(const cairn_chief_session_creator_options *o,
                                                                    cairn_session_creator **out);
CAIRN_API CAIRN_NODISCARD cairn_status cairn_worker_session_creator_new(
    const cairn_worker_session_creator_options *o, cairn_session_creator **out);

/* ==== Monitored sessions ========================================================= */

typedef struct cairn_monitored_session cairn_monitored_session;

typedef struct cairn_monitored_session_options {
  cairn_registry *registry;               /* for the default creator; also given to hooks'
                                             begin() with a custom creator */
  cairn_session_creator *session_creator; /* borrowed; NULL: ChiefSessionCreator with a default Scaffold */
  cairn_hook *const *hooks;               /* borrowed (the caller frees them after the session) */
  size_t n_hooks;
  double stop_grace_period_secs;          /* default 120 (coordinator join; a join callback cannot be
                                             abandoned as a TF thread is: one overrunning it is logged) */
  int max_recoveries;                     /* session re-creations allowed per call; default 10;
                                             < 0: unlimited (TF) */
  double recovery_backoff_secs;           /* sleep before each re-creation; default 0 (TF) */
  const cairn_env *env;
  int stop_on_signals;                    /* 1: SIGTERM/SIGINT stop after the step in flight (see the
                                             top); default 0: no handler installed */
} cairn_monitored_session_options;

/* stop_grace_period_secs 120, max_recoveries 10, every other field 0/NULL.
 * A zero-filled struct is NOT the default: stop_grace_period_secs 0 never
 * reports a slow join and max_recoveries 0 allows no re-creation. */
CAIRN_API cairn_monitored_session_options cairn_monitored_session_options_default(void);

/* TF's MonitoredSession(session_creator, hooks, stop_grace_period_secs):
 * begin() of every hook, then the session is created (retried on
 * CAIRN_E_ABORTED / CAIRN_E_UNAVAILABLE), then after_create_session(). If
 * creation fails otherwise, the error is returned and hooks never get
 * end(). Remembers whether the registry was finalized, to restore that at
 * close. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_monitored_session_new(const cairn_monitored_session_options *o,
                                                                cairn_monitored_session **out);

/* TF's SingularMonitoredSession(hooks, scaffold, checkpoint_dir,
 * checkpoint_filename_with_path): always a ChiefSessionCreator, no
 * recovery. */
typedef struct cairn_singular_monitored_session_options {
  cairn_registry *registry;
  cairn_scaffold *scaffold;
  const char *checkpoint_dir;
  const char *checkpoint_filename_with_path;
  cairn_hook *const *hooks;
  size_t n_hooks;
  double stop_grace_period_secs;
  cairn_session_manager_options sm;
  const cairn_env *env;
} cairn_singular_monitored_session_options;

/* stop_grace_period_secs 120, sm as cairn_session_manager_options_default(),
 * every other field 0/NULL. A zero-filled struct is NOT the default
 * (stop_grace_period_secs 0 never reports a slow join;
 * sm.recovery_wait_secs 0 is refused). */
CAIRN_API cairn_singular_monitored_session_options cairn_singular_monitored_session_options_default(void);
CAIRN_API CAIRN_NODISCARD cairn_status cairn_singular_monitored_session_new(
    const cairn_singular_monitored_session_options *o, cairn_monitored_session **out);

/* TF's MonitoredTrainingSession (doc/session-semantics.md,
 * "MonitoredTrainingSession"). CAIRN_USE_DEFAULT in the
 * save_* fields is TF's USE_DEFAULT; 0 (or less) is TF's None.
 * Defaults: summaries every 100 steps, checkpoints every 600 s; setting
 * both secs and steps of one kind fails (CAIRN_E_INVALID "Can not provide
 * both every_secs and every_steps.", as TF — despite its docstring).
 * Chief: ChiefSessionCreator(scaffold, checkpoint_dir) and hooks in TF's
 * order: chief_only_hooks; StepCounterHook (log_step_count_steps > 0) and
 * SummarySaverHook (a summary frequency > 0) when summary_dir or
 * checkpoint_dir is set; CheckpointSaverHook when checkpoint_dir is set
 * and a checkpoint frequency > 0; then hooks. Non-chief:
 * WorkerSessionCreator(scaffold, max_wait_secs) and hooks only.
 * One writer per directory: the chief's CheckpointSaverHook holds the
 * lock of checkpoint_dir (cairn_checkpoint_lock_new_prefix, cairn/saver.h) from
 * its begin() — before anything is restored — until end() or on_error();
 * a second chief on the directory fails at once with CAIRN_E_BUSY naming
 * the holder's pid, host and the lock file. A non-chief, an evaluator
 * (SingularMonitoredSession) and the tools only read, and take no lock.
 * Taking the lock removes the temporary files killed saves left there,
 * with one INFO log line.
 * checkpoint_dir need not exist: CheckpointSaverHook creates it. With no
 * checkpoint in it the chief logs "no checkpoint in 'DIR': initializing
 * (...)"; sm.require_checkpoint = 1 makes that an error (an evaluator). */
#define CAIRN_USE_DEFAULT (-1)

typedef struct cairn_monitored_training_session_options {
  cairn_registry *registry;       /* required */
  int is_chief;                   /* default 1 */
  const char *checkpoint_dir;
  cairn_scaffold *scaffold;       /* borrowed; NULL: a default Scaffold */
  cairn_hook *const *hooks;
  size_t n_hooks;
  cairn_hook *const *chief_only_hooks;
  size_t n_chief_only_hooks;
  double save_checkpoint_secs;    /* CAIRN_USE_DEFAULT */
  int64_t save_checkpoint_steps;  /* CAIRN_USE_DEFAULT */
  int64_t save_summaries_steps;   /* CAIRN_USE_DEFAULT */
  double save_summaries_secs;     /* CAIRN_USE_DEFAULT */
  double stop_grace_period_secs;  /* 120 */
  int64_t log_step_count_steps;   /* 100 */
  double max_wait_secs;           /* 7200 (worker's wait_for_session) */
  const char *summary_dir;        /* NULL: checkpoint_dir */
  cairn_summary_writer *summary_writer; /* borrowed; NULL: no summaries written
                                           (StepCounter still logs) */
  int max_recoveries;             /* as cairn_monitored_session_options */
  double recovery_backoff_secs;
  cairn_session_manager_options sm; /* recovery_wait_secs, session_flags, env */
  const cairn_env *env;
  int stop_on_signals;            /* as cairn_monitored_session_options; default 0 */
  /* Given to the CheckpointSaverHook this function creates (TF's
     saving_listeners; ignored when it creates none: a worker, no
     checkpoint_dir, or no save interval). Borrowed: they must outlive the
     session. */
  const struct cairn_checkpoint_listener *checkpoint_listeners;
  size_t n_checkpoint_listeners;
  /* A pretrained checkpoint (file or directory) the chief restores while
     checkpoint_dir holds no checkpoint (cairn's extension: TF's MTS has no
     such option); the run saves into checkpoint_dir. A restart whose
     checkpoint_dir holds a checkpoint resumes that one, restored whole
     with the scaffold's saver (or checkpoint_saver), not this file nor
     the scaffold's `restore` options, which say how to read this file;
     an INFO line names both paths at each session creation.
     (ChiefSessionCreator and the SessionManager keep TF's rule: both
     paths at once is an error there.) NULL: checkpoint_dir's newest. */
  const char *checkpoint_filename_with_path;
  /* The CheckpointSaverHook's saver (borrowed), when the scaffold's saver
     restores only part of the model (a warm start's). NULL: the scaffold's. */
  cairn_saver *checkpoint_saver;
  /* The CheckpointSaverHook's async and async_skip_busy (default 0: TF's
     synchronous saves). */
  int async_checkpoints;
  int async_checkpoints_skip_busy;
} cairn_monitored_training_session_options;

/* The values in the field comments above. A zero-filled struct is NOT the
 * default: is_chief 0 is a worker, a save_* 0 is TF's None (off),
 * log_step_count_steps 0 is off, max_recoveries 0 allows no re-creation,
 * stop_grace_period_secs 0 never reports a slow join, a worker's
 * max_wait_secs 0 waits not at all, and sm.recovery_wait_secs 0 is
 * refused. Start from this. */
CAIRN_API cairn_monitored_training_session_options cairn_monitored_training_session_options_default(void);
CAIRN_API CAIRN_NODISCARD cairn_status cairn_monitored_training_session_new(
    const cairn_monitored_training_session_options *o, cairn_monitored_session **out);

/* One step through the hooks (TF's _HookedSession.run): stop already
 * requested → CAIRN_E_STATE "Run called even after should_stop
 * requested."; before_run of every hook; one cairn_session_run of the
 * caller's ops then the hooks' ops with merged feeds and the caller's +
 * hooks' fetches; after_run of every hook (not when the run failed); stop
 * flag |= any request_stop. The caller's fetches are filled. Recovery as described above. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_monitored_session_run(cairn_monitored_session *ms,
                                                                const cairn_run_args *args);

/* ---- run_step_fn ---- */
typedef struct cairn_step_context cairn_step_context;
typedef cairn_status (*cairn_step_fn)(cairn_step_context *ctx, void *user);

/* The raw session: runs on it fire no hook and do not count as steps
 * (evaluation between training rounds). */
CAIRN_API cairn_session *cairn_step_context_session(const cairn_step_context *ctx);
/* The same as cairn_monitored_session_run but without recovery (recoverable
 * errors escape to run_step_fn, which re-runs the whole step function). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_step_context_run_with_hooks(cairn_step_context *ctx,
                                                                      const cairn_run_args *args);
/* TF's StepContext.request_stop: returns CAIRN_E_STOP "step_fn has
 * requested the iterations to stop." — return it from the step function;
 * later run_with_hooks calls in this step fail with it without calling any
 * hook. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_step_context_request_stop(cairn_step_context *ctx);

/* Calls fn(ctx, user) and returns its status (CAIRN_E_STOP after
 * request_stop; should_stop() is not changed by it). MonitoredSession: a
 * recoverable error from fn re-creates the session and runs fn again. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_monitored_session_run_step_fn(cairn_monitored_session *ms,
                                                                        cairn_step_fn fn, void *user);

/* TF's should_stop(): 1 when closed, a hook requested stop, or the
 * coordinator stops (a recoverable error recorded by a side thread
 * re-creates the session and returns 0 instead). */
CAIRN_API int cairn_monitored_session_should_stop(cairn_monitored_session *ms);
/* TF's close(): end() of every hook, then closes the stack (coordinator
 * stop, joins, session close); restores the registry's finalized state.
 * Returns the first error recorded by the coordinator or an end() error.
 * Second call: CAIRN_E_STATE "Session is already closed.". */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_monitored_session_close(cairn_monitored_session *ms);
/* The with-block exit described at the top: close, with the status the
 * body ended with. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_monitored_session_close_with(cairn_monitored_session *ms,
                                                                       cairn_status body_status);
/* Deprecated (doc/deprecated.md): the name of cairn 0.1 for
 * cairn_monitored_session_close_with, which it calls. Removed in the next
 * release. */
CAIRN_API CAIRN_NODISCARD CAIRN_DEPRECATED("use cairn_monitored_session_close_with") cairn_status
cairn_monitored_session_exit(cairn_monitored_session *ms, cairn_status body_status);
/* The current raw session (NULL when closed): TF's raw_session() of
 * SingularMonitoredSession, available on every monitored session. */
CAIRN_API cairn_session *cairn_monitored_session_raw_session(const cairn_monitored_session *ms);
/* Detail of the last failed call on ms, whole up to 16383 bytes like
 * cairn_errmsg() (a longer one is cut and ends with "..."). */
CAIRN_API const char *cairn_monitored_session_errmsg(const cairn_monitored_session *ms);
/* stop_on_signals: the signal (SIGTERM, SIGINT) that made should_stop()
 * true, or 0 if none did (or the option is off). Still valid after close,
 * until free. */
CAIRN_API int cairn_monitored_session_stop_signal(const cairn_monitored_session *ms);
/* Frees ms, closing it first (without end(); hooks get on_error(CAIRN_E_CANCELLED))
 * if open — a killed trainer writes no final checkpoint. NULL does nothing. */
CAIRN_API void cairn_monitored_session_free(cairn_monitored_session *ms);

/* ==== Timer ===================================================================== */

typedef struct cairn_timer cairn_timer;

/* TF's SecondOrStepTimer: exactly one of every_secs > 0, every_steps > 0
 * (0 or less = None). Errors: CAIRN_E_INVALID "Either every_secs or
 * every_steps should be provided." / "Can not provide both every_secs and
 * every_steps.". */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_timer_new(double every_secs, int64_t every_steps, const cairn_env *env,
                                                    cairn_timer **out);
CAIRN_API void cairn_timer_free(cairn_timer *t);
CAIRN_API int cairn_timer_should_trigger_for_step(const cairn_timer *t, int64_t step);
/* Records (now, step); returns 1 and the elapsed secs and steps since the
 * previous trigger, or 0 (TF's (None, None)) on the first call. */
CAIRN_API int cairn_timer_update_last_triggered_step(cairn_timer *t, int64_t step, double *elapsed_secs,
                                                     int64_t *elapsed_steps);
/* 1 and *step if triggered before, else 0. */
CAIRN_API int cairn_timer_last_triggered_step(const cairn_timer *t, int64_t *step);
CAIRN_API void cairn_timer_reset(cairn_timer *t);

/* ==== Built-in hooks (doc/session-semantics.md, "Built-in hooks") =============== */

/* Every built-in hook is made by cairn_hook_new_<kind>(required arguments,
 * const cairn_<kind>_hook_options *o, &out) and freed by cairn_hook_free
 * (CONTRIBUTING.md, "Constructor grammar"). The options structs end with
 * struct_size (0: their first layout, or the caller's sizeof: a struct
 * built against an older header stays valid), but for the SummarySaverHook's,
 * which has not changed since 0.1; every field's zero is its default, so a
 * zero-filled struct and cairn_<kind>_hook_options_default() are the same
 * (and NULL options too, where the header says so). The names of 0.1
 * (cairn_<kind>_hook_new) stay one release (doc/deprecated.md). */

typedef struct cairn_stop_at_step_hook_options {
  /* 0 (default): `step` is TF's last_step, the global step to stop at.
     1: `step` is TF's num_steps, the number of steps to run, counted from
     the global step at the first session creation. */
  int relative;
  size_t struct_size; /* 0 or sizeof(cairn_stop_at_step_hook_options) */
} cairn_stop_at_step_hook_options;
/* Every field 0 (a zero-filled struct, and NULL options, are the same). */
CAIRN_API cairn_stop_at_step_hook_options cairn_stop_at_step_hook_options_default(void);

/* StopAtStepHook: requests a stop once the global step reaches `step`
 * (TF's StopAtStepHook(last_step=step)), or, with o->relative, after
 * `step` more steps (StopAtStepHook(num_steps=step)). Errors: CAIRN_E_NULL,
 * CAIRN_E_INVALID ("hook_new_stop_at_step: step is -3, must be >= 0"; a
 * struct_size below the first layout), CAIRN_E_NOMEM. begin() needs a
 * global step ("Global step should be created to use StopAtStepHook."). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_hook_new_stop_at_step(int64_t step,
                                                                const cairn_stop_at_step_hook_options *o,
                                                                cairn_hook **out);
/* Deprecated (doc/deprecated.md): 0.1's StopAtStepHook, < 0 meaning None;
 * removed in the next release. */
CAIRN_API CAIRN_NODISCARD CAIRN_DEPRECATED("use cairn_hook_new_stop_at_step") cairn_status
cairn_stop_at_step_hook_new(int64_t num_steps, int64_t last_step, cairn_hook **out);

/* CheckpointSaverListener: every member may be NULL. Given as an array
 * (listeners, n_listeners) whose elements all have one struct_size: the
 * library steps through the array by it, so an array built against an
 * older header (smaller elements) is read correctly. */
typedef struct cairn_checkpoint_listener {
  cairn_status (*begin)(void *self);
  cairn_status (*before_save)(void *self, cairn_session *s, int64_t step);
  /* *request_stop = 1 asks training to stop. */
  cairn_status (*after_save)(void *self, cairn_session *s, int64_t step, int *request_stop);
  cairn_status (*end)(void *self, cairn_session *s, int64_t step);
  void *self;
  /* The table's size (CONTRIBUTING, "Function tables"): 0 means this
     layout, the first one; otherwise sizeof(cairn_checkpoint_listener), or
     CAIRN_CHECKPOINT_LISTENER_SIZE; the same in every element of an array.
     Members added later go after this one. A size below the first layout:
     CAIRN_E_INVALID from the hook's (or the training session's)
     constructor. */
  size_t struct_size;
} cairn_checkpoint_listener;

#define CAIRN_CHECKPOINT_LISTENER_SIZE sizeof(cairn_checkpoint_listener)

typedef struct cairn_checkpoint_saver_hook_options {
  /* Read only by the deprecated cairn_checkpoint_saver_hook_new (0.1's
     name), for one release (doc/deprecated.md): cairn_hook_new_checkpoint_saver
     takes checkpoint_dir as its first argument. Leave it NULL; if it is set,
     it must equal that argument (CAIRN_E_INVALID otherwise). */
  const char *checkpoint_dir;
  double save_secs;                 /* exactly one of save_secs, save_steps > 0 */
  int64_t save_steps;
  cairn_saver *saver;               /* not with scaffold ("You cannot provide both saver and scaffold.") */
  cairn_scaffold *scaffold;         /* its saver; neither: the single "savers" item */
  const char *checkpoint_basename;  /* NULL: "model.ckpt" */
  const cairn_checkpoint_listener *listeners; /* borrowed */
  size_t n_listeners;
  cairn_summary_writer *summary_writer; /* CHECKPOINT session logs; may be NULL */
  const cairn_env *env;
  /* 1: the timer's saves are asynchronous (cairn_saver_save_begin, see
     cairn/saver.h): before_save listeners and the state copy run at the
     step boundary, the write goes on behind training, and the CHECKPOINT
     log and after_save run at the first run, should_stop or close that
     sees the commit. A failed background save fails that call with its
     message. The save after session creation and the one at end() stay
     synchronous (close waits for the save in flight first). 0: every save
     is synchronous (TF). */
  int async;
  /* With async: a save due while the previous one is still being written
     is skipped, with the INFO line "Skipping the checkpoint of step 150:
     the save of step 100 (d/model.ckpt-100) is still being written."; 0
     (the default) waits for it. */
  int async_skip_busy;
  /* 0 or sizeof(cairn_checkpoint_saver_hook_options), read by
     cairn_hook_new_checkpoint_saver only (0.1's name reads the struct as
     0.1 laid it out, without this member). */
  size_t struct_size;
} cairn_checkpoint_saver_hook_options;

/* Every field 0/NULL (a zero-filled struct, and NULL options, are the
 * same); one of save_secs, save_steps must then be set. */
CAIRN_API cairn_checkpoint_saver_hook_options cairn_checkpoint_saver_hook_options_default(void);

/* CheckpointSaverHook: saves right after every session creation,
 * then when the timer triggers, and at end() unless that step was just
 * saved.
 * The hook is the directory's one writer: begin() takes the lock of
 * checkpoint_dir (cairn_checkpoint_lock_new_prefix; if the directory does not
 * exist yet, as soon as the first save has created it, before it writes) and fails with
 * CAIRN_E_BUSY when another trainer holds it:
 *   checkpoint_lock_new: checkpoint directory 'd' is in use by another
 *   trainer: pid 4242 on host 'node7' holds the lock 'd/.cairn.lock' (one
 *   writer per directory: wait for it to finish, or use another directory)
 * Taking it removes the writer's leftover temporary files and logs INFO
 * "Removed 2 temporary files of unfinished saves (5.6 MB) from d." The
 * lock is released after end()'s save, by on_error(), or when the hook
 * is freed (a process killed by a signal releases it with its files).
 *
 * Its first save of a session creates the directory the files go to and
 * every missing parent, as TF's hook does (mode 0777 less the umask);
 * failing that, CAIRN_E_IO "CheckpointSaverHook: cannot create directory
 * 'a/file' (for 'a/file/run'): it exists and is not a directory". Later
 * saves create nothing: before each one (and the Saver before each rename
 * of its commit, the asynchronous one too) the hook checks that
 * checkpoint_dir is still the directory it locked; removed or replaced, the
 * save fails with CAIRN_E_NOT_FOUND and training stops:
 *   CheckpointSaverHook: checkpoint directory 'd' was removed while
 *   training: the lock taken at start no longer protects it; not
 *   re-creating it; training stops (...)
 * The lock's cleanup removes only the temporary files of checkpoint_basename
 * and of the state file (cairn_checkpoint_lock_new_prefix). A save
 * that finds the checkpoint of its step already there with other contents
 * fails with CAIRN_E_EXISTS (cairn_saver_save; after session creation the
 * message says the restored variables were changed, e.g. by
 * local_init_op); one with the same contents rewrites nothing and logs
 * "<path> already holds exactly these values: not rewritten.". */
/* (TF's CheckpointSaverHook(checkpoint_dir, ...): checkpoint_dir is
 * required, the rest are options.) checkpoint_dir is copied. Errors of the
 * arguments: CAIRN_E_NULL (checkpoint_dir or out NULL, n_listeners > 0 with
 * listeners NULL), CAIRN_E_INVALID (saver and scaffold both given; save_secs
 * and save_steps both or neither; o->checkpoint_dir set and different from
 * checkpoint_dir: "hook_new_checkpoint_saver: checkpoint_dir is 'a' but
 * o->checkpoint_dir is 'b' ..."; a bad struct_size of the options, a
 * listener, the summary writer or env), CAIRN_E_NOMEM. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_hook_new_checkpoint_saver(const char *checkpoint_dir,
                                                                    const cairn_checkpoint_saver_hook_options *o,
                                                                    cairn_hook **out);
/* Deprecated (doc/deprecated.md): 0.1's CheckpointSaverHook, checkpoint_dir
 * inside the options (o->checkpoint_dir; o NULL: "options is NULL"); reads
 * o as 0.1 laid it out (up to async_skip_busy, not struct_size); removed in
 * the next release. */
CAIRN_API CAIRN_NODISCARD CAIRN_DEPRECATED("use cairn_hook_new_checkpoint_saver") cairn_status
cairn_checkpoint_saver_hook_new(const cairn_checkpoint_saver_hook_options *o, cairn_hook **out);

typedef struct cairn_step_counter_hook_options {
  /* At most one of every_n_steps, every_n_secs > 0; both 0: every 100
     steps (TF's default). Negative values are refused. */
  int64_t every_n_steps;
  double every_n_secs;
  cairn_summary_writer *summary_writer; /* "global_step/sec" goes here too; NULL: log only */
  const cairn_env *env;                 /* clock and log; NULL: the default */
  size_t struct_size;                   /* 0 or sizeof(cairn_step_counter_hook_options) */
} cairn_step_counter_hook_options;
/* Every field 0/NULL (a zero-filled struct, and NULL options, are the same). */
CAIRN_API cairn_step_counter_hook_options cairn_step_counter_hook_options_default(void);

/* StepCounterHook: logs (and writes through summary_writer)
 * "global_step/sec". Errors: CAIRN_E_NULL, CAIRN_E_INVALID (both
 * every_n_steps and every_n_secs: "exactly one of every_n_steps and
 * every_n_secs should be provided."; a negative one; a bad struct_size of
 * the options, the writer or env), CAIRN_E_NOMEM. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_hook_new_step_counter(const cairn_step_counter_hook_options *o,
                                                                cairn_hook **out);
/* Deprecated (doc/deprecated.md): 0.1's StepCounterHook, exactly one of
 * every_n_steps, every_n_secs > 0 (no default); removed in the next
 * release. */
CAIRN_API CAIRN_NODISCARD CAIRN_DEPRECATED("use cairn_hook_new_step_counter") cairn_status
cairn_step_counter_hook_new(int64_t every_n_steps, double every_n_secs, cairn_summary_writer *writer,
                            const cairn_env *env, cairn_hook **out);

/* LoggingTensorHook: logs the fetched names ("loss = 0.25, step = 7") on
 * local iterations 0, N, 2N... or every N seconds, and/or at end. */
typedef size_t (*cairn_logging_formatter)(void *ctx, const char *const *names, const cairn_value *values,
                                          size_t n, char *buf, size_t len);
typedef struct cairn_logging_tensor_hook_options {
  /* Read only by the deprecated cairn_logging_tensor_hook_new (0.1's name),
     for one release (doc/deprecated.md): cairn_hook_new_logging_tensor
     takes the names as arguments. Leave them NULL and 0; if they are set,
     they must equal those arguments (CAIRN_E_INVALID otherwise). */
  const char *const *names;
  size_t n_names;
  int64_t every_n_iter;     /* 0 = None */
  double every_n_secs;      /* 0 = None */
  int at_end;
  cairn_logging_formatter formatter; /* NULL: "name = value, ..." */
  void *formatter_ctx;
  const cairn_env *env;
  /* 0 or sizeof(cairn_logging_tensor_hook_options), read by
     cairn_hook_new_logging_tensor only (0.1's name reads the struct as 0.1
     laid it out, without this member). */
  size_t struct_size;
} cairn_logging_tensor_hook_options;
/* Every field 0/NULL (a zero-filled struct, and NULL options, are the
 * same); at_end or one of every_n_iter, every_n_secs must then be set. */
CAIRN_API cairn_logging_tensor_hook_options cairn_logging_tensor_hook_options_default(void);
/* (TF's LoggingTensorHook(tensors, ...): the tensors are required, the rest
 * are options.) names[0..n_names) are copied; n_names may be 0 (a hook that
 * logs empty lines, as TF's with tensors=[]), but names must not be NULL.
 * Errors: CAIRN_E_NULL (names, names[i] or out NULL), CAIRN_E_INVALID
 * (neither at_end nor exactly one of every_n_iter, every_n_secs, TF's
 * "either at_end and/or exactly one of every_n_iter and every_n_secs must
 * be provided."; "invalid every_n_iter=-1."; o->names or o->n_names set and
 * different from the arguments: "hook_new_logging_tensor: n_names is 2 but
 * o->n_names is 1 ..." or "names[1] is 'a' but o->names[1] is 'b' ..."; a
 * bad struct_size of the options or env), CAIRN_E_NOMEM. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_hook_new_logging_tensor(const char *const *names, size_t n_names,
                                                                  const cairn_logging_tensor_hook_options *o,
                                                                  cairn_hook **out);
/* Deprecated (doc/deprecated.md): 0.1's LoggingTensorHook, the names inside
 * the options (o->names, o->n_names; o NULL: "options are NULL"; n_names 0
 * with names NULL allowed); reads o as 0.1 laid it out (up to env, not
 * struct_size); removed in the next release. */
CAIRN_API CAIRN_NODISCARD CAIRN_DEPRECATED("use cairn_hook_new_logging_tensor") cairn_status
cairn_logging_tensor_hook_new(const cairn_logging_tensor_hook_options *o, cairn_hook **out);

typedef struct cairn_nan_tensor_hook_options {
  /* 1: a NaN loss logs a warning and requests a stop (TF's
     fail_on_nan_loss=False); 0 (default): it fails the run with
     CAIRN_E_NAN_LOSS (TF's default, True). */
  int warn_only;
  size_t struct_size; /* 0 or sizeof(cairn_nan_tensor_hook_options) */
} cairn_nan_tensor_hook_options;
/* Every field 0 (a zero-filled struct, and NULL options, are the same). */
CAIRN_API cairn_nan_tensor_hook_options cairn_nan_tensor_hook_options_default(void);

/* NanTensorHook: fetches loss_name (copied) on every run; NaN →
 * CAIRN_E_NAN_LOSS "NaN loss during training." or, with warn_only, a
 * warning and a stop request. Errors: CAIRN_E_NULL, CAIRN_E_INVALID (a bad
 * struct_size), CAIRN_E_NOMEM. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_hook_new_nan_tensor(const char *loss_name,
                                                              const cairn_nan_tensor_hook_options *o,
                                                              cairn_hook **out);
/* Deprecated (doc/deprecated.md): 0.1's NanTensorHook, fail_on_nan_loss
 * positional (its opposite is warn_only); removed in the next release. */
CAIRN_API CAIRN_NODISCARD CAIRN_DEPRECATED("use cairn_hook_new_nan_tensor") cairn_status
cairn_nan_tensor_hook_new(const char *loss_name, int fail_on_nan_loss, cairn_hook **out);

/* SummarySaverHook: exactly one of save_steps, save_secs; exactly one of
 * scaffold (its summary_op) and summary_op. Writes the summaries the op
 * emits at the real global step, and a START session log on the first
 * run. */
typedef struct cairn_summary_saver_hook_options {
  int64_t save_steps;
  double save_secs;
  cairn_summary_writer *writer;
  cairn_scaffold *scaffold;
  cairn_op *summary_op;
  const cairn_env *env;
} cairn_summary_saver_hook_options;
/* Every field 0/NULL (a zero-filled struct is the same); one of
 * save_steps, save_secs and one of scaffold, summary_op must then be set. */
CAIRN_API cairn_summary_saver_hook_options cairn_summary_saver_hook_options_default(void);
CAIRN_API CAIRN_NODISCARD cairn_status cairn_hook_new_summary_saver(const cairn_summary_saver_hook_options *o,
                                                                 cairn_hook **out);
/* Deprecated (doc/deprecated.md): 0.1's name of
 * cairn_hook_new_summary_saver, same arguments; removed in the next
 * release. */
CAIRN_API CAIRN_NODISCARD CAIRN_DEPRECATED("use cairn_hook_new_summary_saver") cairn_status
cairn_summary_saver_hook_new(const cairn_summary_saver_hook_options *o, cairn_hook **out);

typedef struct cairn_final_ops_hook_options {
  const cairn_feed *feeds; /* TF's final_ops_feed_dict: names copied, values borrowed; NULL: none */
  size_t n_feeds;
  size_t struct_size;      /* 0 or sizeof(cairn_final_ops_hook_options) */
} cairn_final_ops_hook_options;
/* Every field 0/NULL (a zero-filled struct, and NULL options, are the same). */
CAIRN_API cairn_final_ops_hook_options cairn_final_ops_hook_options_default(void);

/* FinalOpsHook: at end(), runs final_op (may be NULL) with the options'
 * feeds and fetches names (copied); the values are then available
 * (cairn_final_ops_hook_value: copied for scalars; tensors borrowed from
 * their producer). Errors: CAIRN_E_NULL (a NULL name or feed member),
 * CAIRN_E_INVALID (a bad struct_size), CAIRN_E_NOMEM. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_hook_new_final_ops(cairn_op *final_op, const char *const *names,
                                                             size_t n_names, const cairn_final_ops_hook_options *o,
                                                             cairn_hook **out);
/* Deprecated (doc/deprecated.md): 0.1's FinalOpsHook, feeds positional;
 * removed in the next release. */
CAIRN_API CAIRN_NODISCARD CAIRN_DEPRECATED("use cairn_hook_new_final_ops") cairn_status
cairn_final_ops_hook_new(cairn_op *final_op, const char *const *names, size_t n_names, const cairn_feed *feeds,
                         size_t n_feeds, cairn_hook **out);
/* CAIRN_E_NOT_FOUND before end() ran (TF: final_ops_values is None) or for
 * an unknown name. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_final_ops_hook_value(const cairn_hook *h, const char *name,
                                                               cairn_value *out);

typedef struct cairn_global_step_waiter_hook_options {
  const cairn_env *env; /* clock, sleep and log of the wait; NULL: the default */
  size_t struct_size;   /* 0 or sizeof(cairn_global_step_waiter_hook_options) */
} cairn_global_step_waiter_hook_options;
/* Every field 0/NULL (a zero-filled struct, and NULL options, are the same). */
CAIRN_API cairn_global_step_waiter_hook_options cairn_global_step_waiter_hook_options_default(void);

/* GlobalStepWaiterHook: the first before_run waits (polling every 0.5 s on
 * env) until the global step reaches wait_until_step. Errors: CAIRN_E_NULL,
 * CAIRN_E_INVALID (a bad struct_size of the options or env), CAIRN_E_NOMEM. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_hook_new_global_step_waiter(
    int64_t wait_until_step, const cairn_global_step_waiter_hook_options *o, cairn_hook **out);
/* Deprecated (doc/deprecated.md): 0.1's GlobalStepWaiterHook, env
 * positional; removed in the next release. */
CAIRN_API CAIRN_NODISCARD CAIRN_DEPRECATED("use cairn_hook_new_global_step_waiter") cairn_status
cairn_global_step_waiter_hook_new(int64_t wait_until_step, const cairn_env *env, cairn_hook **out);

/* FeedFnHook: before every run, fn(user, req) adds feeds to the request
 * (cairn_run_request_feed). A lone callback and its data, as
 * cairn_op_new's: no options. Errors: CAIRN_E_NULL, CAIRN_E_NOMEM. */
typedef cairn_status (*cairn_feed_fn)(void *user, cairn_run_request *req);
CAIRN_API CAIRN_NODISCARD cairn_status cairn_hook_new_feed_fn(cairn_feed_fn fn, void *user, cairn_hook **out);
/* Deprecated (doc/deprecated.md): 0.1's name of cairn_hook_new_feed_fn,
 * same arguments; removed in the next release. */
CAIRN_API CAIRN_NODISCARD CAIRN_DEPRECATED("use cairn_hook_new_feed_fn") cairn_status
cairn_feed_fn_hook_new(cairn_feed_fn fn, void *user, cairn_hook **out);

#ifdef __cplusplus
}
#endif
#endif
