/* cairn/scaffold.h — the Scaffold: TF 1.x's tf.compat.v1.train.Scaffold,
 * the set of ops (init, ready, local init, summary) and the Saver that a
 * SessionManager (cairn/session.h) prepares a session with. finalize()
 * fills every field the caller left NULL from the registry's collections,
 * or builds TF's default for it.
 *
 * TF behaviour (fields, copy_from_scaffold, finalize order and defaults,
 * get_or_default) and its source: doc/session-semantics.md, "Scaffold".
 * cairn_scaffold itself is declared in cairn/session.h, where the
 * SessionManager takes one.
 *
 * Thread safety: a Scaffold is used by one thread at a time.
 */
#ifndef CAIRN_SCAFFOLD_H
#define CAIRN_SCAFFOLD_H

#include <stddef.h>

#include "cairn/saver.h"
#include "cairn/session.h"
#include "cairn/status.h"
#include "cairn/var.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cairn_scaffold cairn_scaffold;

/* The SessionManager's one-argument form (the Scaffold binds itself). */
typedef cairn_status (*cairn_session_init_fn)(cairn_session *s, void *user);

/* ==== Scaffold ==================================================================================== */

/* TF's init_fn(scaffold, session): extra initialization after init_op (a
 * warm start), run by the chief only, and only when nothing was restored. */
typedef cairn_status (*cairn_scaffold_init_cb)(cairn_scaffold *sc, cairn_session *s, void *user);

/* Every field may be left 0/NULL (zero-filled options are the defaults).
 * Ops given here are referenced (the caller keeps its own references); the
 * saver, the feeds, the restore options and copy_from_scaffold are
 * borrowed and must outlive the scaffold. */
typedef struct cairn_scaffold_options {
  cairn_op *init_op;                 /* TF's init_op */
  const cairn_feed *init_feeds;      /* TF's init_feed_dict: fed to init_op only */
  size_t n_init_feeds;
  cairn_scaffold_init_cb init_fn;    /* TF's init_fn */
  void *init_fn_user;
  const char *init_fn_name;          /* for messages ("init fn: warm_start"); NULL: "<init_fn>" */
  cairn_ready_op *ready_op;
  cairn_ready_op *ready_for_local_init_op;
  cairn_op *local_init_op;
  const cairn_feed *local_init_feeds; /* TF 2.x's local_init_feed_dict */
  size_t n_local_init_feeds;
  cairn_op *summary_op;
  cairn_saver *saver;
  const cairn_scaffold *copy_from_scaffold; /* unset fields are taken from it */

  /* cairn's first-class partial restore (TF has no equivalent; see
     cairn_prepare_options for the exact semantics): */
  const cairn_restore_options *restore; /* restore from checkpoint_dir (or the
                                           checkpoint_filename_with_path) partially,
                                           initialize the other GLOBAL variables. A
                                           MonitoredTrainingSession given both paths
                                           resumes checkpoint_dir's own checkpoint whole
                                           when it holds one (cairn/monitored.h) */
  const char *warm_start_path;          /* chief, nothing restored (checkpoint_dir holds
                                           no checkpoint): after init_op, restore from
                                           this checkpoint file or directory... */
  const cairn_restore_options *warm_start; /* ...the variables these options select
                                              (NULL: the whole save set, strict; a
                                              pattern that matches nothing fails) */
} cairn_scaffold_options;

/* Every field 0/NULL (a zero-filled struct is the same). */
CAIRN_API cairn_scaffold_options cairn_scaffold_options_default(void);

/* A scaffold over r. Nothing is created (no op, no saver) before
 * cairn_scaffold_finalize(); the getters return what was given (or copied)
 * until then. copy_from_scaffold: each field given here wins, else the
 * source's current value is taken (NULL if the source was never finalized,
 * its default op if it was); init_fn is the source's original function,
 * re-bound to the new scaffold; its registry must be r.
 * Errors: CAIRN_E_NULL (r or out), CAIRN_E_INVALID (copy_from_scaffold of
 * another registry; warm_start without warm_start_path), CAIRN_E_NOMEM. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_scaffold_new(cairn_registry *r, const cairn_scaffold_options *opts,
                                                       cairn_scaffold **out);
CAIRN_API void cairn_scaffold_free(cairn_scaffold *sc);

/* TF's Scaffold.finalize(), in TF's order (doc/session-semantics.md,
 * "Scaffold"): for each field still NULL, in this
 * order, reuse the single item of its registry collection, else build the
 * default and add it to the collection:
 *   init_op                  "init": initialize every GLOBAL variable
 *   ready_op                 "ready": uninitialized GLOBAL and LOCAL variables
 *   ready_for_local_init_op  "ready_for_local_init": uninitialized GLOBAL variables
 *   local_init_op            "local_init": initialize every LOCAL variable
 *   summary_op               the collection's item, else none
 *   saver                    the single "savers" item, else a new default
 *                            Saver (every GLOBAL variable, max_to_keep 5,
 *                            allow_empty) added to "savers"
 * then finalizes the registry (cairn_registry_finalize: no more variables).
 * Finalizing twice is a no-op. Errors: CAIRN_E_STATE ("More than one item
 * in the collection \"init_op\". ..."; "More than one item in collection
 * savers. Please indicate which one to use by passing it to the
 * constructor."; a default to build while the registry is already
 * finalized: "Graph is finalized and cannot be modified."), CAIRN_E_NOMEM.
 * On error the fields already filled stay filled. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_scaffold_finalize(cairn_scaffold *sc);
CAIRN_API int cairn_scaffold_is_finalized(const cairn_scaffold *sc);

/* Getters (borrowed; NULL when unset). */
CAIRN_API cairn_registry *cairn_scaffold_registry(const cairn_scaffold *sc);
CAIRN_API cairn_op *cairn_scaffold_init_op(const cairn_scaffold *sc);
CAIRN_API const cairn_feed *cairn_scaffold_init_feeds(const cairn_scaffold *sc, size_t *n);
CAIRN_API cairn_ready_op *cairn_scaffold_ready_op(const cairn_scaffold *sc);
CAIRN_API cairn_ready_op *cairn_scaffold_ready_for_local_init_op(const cairn_scaffold *sc);
CAIRN_API cairn_op *cairn_scaffold_local_init_op(const cairn_scaffold *sc);
CAIRN_API const cairn_feed *cairn_scaffold_local_init_feeds(const cairn_scaffold *sc, size_t *n);
CAIRN_API cairn_op *cairn_scaffold_summary_op(const cairn_scaffold *sc);
CAIRN_API cairn_saver *cairn_scaffold_saver(const cairn_scaffold *sc);
CAIRN_API const cairn_restore_options *cairn_scaffold_restore(const cairn_scaffold *sc);
CAIRN_API const char *cairn_scaffold_warm_start_path(const cairn_scaffold *sc);
CAIRN_API const cairn_restore_options *cairn_scaffold_warm_start(const cairn_scaffold *sc);
/* The init_fn bound to sc, in the SessionManager's form: *fn and *user
 * (a trampoline calling the user's function with sc) and *name; all NULL
 * when the scaffold has no init_fn. Returns 1 if there is one. */
CAIRN_API int cairn_scaffold_bound_init_fn(const cairn_scaffold *sc, cairn_session_init_fn *fn, void **user,
                                           const char **name);

/* ==== SessionManager ============================================================================= */


typedef struct cairn_session_manager cairn_session_manager;

typedef struct cairn_session_manager_options {
  cairn_op *local_init_op;                 /* referenced */
  const cairn_feed *local_init_feeds;      /* borrowed */
  size_t n_local_init_feeds;
  cairn_ready_op *ready_op;                /* NULL: the model is never checked */
  cairn_ready_op *ready_for_local_init_op; /* needs local_init_op */
  double recovery_wait_secs;               /* default 30; must be > 0 */
  unsigned session_flags;                  /* for every session created (CAIRN_SESSION_FRESH) */
  const cairn_env *env;                    /* NULL: real clock, stderr */
  int require_checkpoint;                  /* 1: prepare_session / recover_session fail with
                                              CAIRN_E_NOT_FOUND instead of starting from fresh
                                              variables when checkpoint_dir holds no checkpoint
                                              (an evaluator); default 0 (TF) */
} cairn_session_manager_options;

/* recovery_wait_secs 30, every other field 0/NULL. A zero-filled struct is
 * NOT the default (recovery_wait_secs 0 is refused): start from this. */
CAIRN_API cairn_session_manager_options cairn_session_manager_options_default(void);

/* TF's SessionManager(local_init_op, ready_op, ready_for_local_init_op,
 * recovery_wait_secs). opts NULL: all defaults.
 * Errors: CAIRN_E_NULL, CAIRN_E_INVALID ("If you pass a
 * ready_for_local_init_op you must also pass a local_init_op ,
 * ready_for_local_init_op [name]"; recovery_wait_secs not > 0 — a
 * zero-filled options struct is not the default, start from
 * cairn_session_manager_options_default()), CAIRN_E_NOMEM. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_session_manager_new(cairn_registry *r,
                                                              const cairn_session_manager_options *opts,
                                                              cairn_session_manager **out);
CAIRN_API void cairn_session_manager_free(cairn_session_manager *sm);
/* Detail of the last failure of a call on sm, whole up to 16383 bytes
 * (longer: cut, ending with "..."). */
CAIRN_API const char *cairn_session_manager_errmsg(const cairn_session_manager *sm);
/* The report of the last partial restore (options `restore` or
 * `warm_start`) done by sm, or NULL. Owned by sm, valid until its next
 * prepare/recover call. */
CAIRN_API const cairn_restore_report *cairn_session_manager_restore_report(const cairn_session_manager *sm);

/* Arguments of prepare_session and recover_session. Borrowed. */
typedef struct cairn_prepare_options {
  cairn_op *init_op;                 /* prepare only */
  const cairn_feed *init_feeds;      /* prepare only: fed to init_op */
  size_t n_init_feeds;
  cairn_session_init_fn init_fn;     /* prepare only, after init_op */
  void *init_fn_user;
  const char *init_fn_name;          /* for messages; NULL: "<init_fn>" */
  cairn_saver *saver;                /* NULL: nothing is restored */
  const char *checkpoint_dir;        /* restore the state file's newest checkpoint */
  const char *checkpoint_filename_with_path; /* or exactly this file (not both) */
  int wait_for_checkpoint;           /* poll checkpoint_dir until a checkpoint appears */
  double max_wait_secs;              /* default 7200; the waiting budget (see below) */

  /* cairn's first-class partial restore. When `restore` is set, the
     restore from checkpoint_dir / checkpoint_filename_with_path is
     cairn_saver_restore_partial(saver, path, restore); on success the
     restored variables are initialized and every other GLOBAL variable of
     the registry is initialized by its own initializer (init_op and
     init_fn do not run: restore and init stay exclusive, as in TF); then
     local_init_op and the ready checks run as usual. Typical: {.lenient =
     1} when the checkpoint may lack variables added since (new layer, new
     optimizer slots): what is there is restored, the rest starts fresh, and
     later restarts restore everything. */
  const cairn_restore_options *restore;
  /* When nothing was restored (prepare only, chief): after init_op and
     before init_fn, restore the variables `warm_start` selects (NULL: all,
     strict) from the checkpoint file warm_start_path with the saver (TF's
     init_fn warm-start recipe, first-class): a later restart finds
     checkpoint_dir's own checkpoint and does not warm-start again. */
  const char *warm_start_path;
  const cairn_restore_options *warm_start;
} cairn_prepare_options;

/* max_wait_secs 7200, every other field 0/NULL. A zero-filled struct is
 * NOT the default (max_wait_secs 0 waits not at all): start from this. */
CAIRN_API cairn_prepare_options cairn_prepare_options_default(void);

/* The arguments a chief uses for sc (finalized): init_op, its feeds,
 * init_fn (bound), saver, restore, warm start; checkpoint_dir and
 * checkpoint_filename_with_path as given (NULL: none). */
CAIRN_API cairn_prepare_options cairn_prepare_options_from_scaffold(const cairn_scaffold *sc,
                                                                    const char *checkpoint_dir,
                                                                    const char *checkpoint_filename_with_path);
/* A manager with sc's local_init_op (+ feeds), ready_op and
 * ready_for_local_init_op; recovery_wait_secs, session_flags and env from
 * base (NULL: defaults). sc must be finalized (CAIRN_E_STATE). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_session_manager_new_from_scaffold(
    const cairn_scaffold *sc, const cairn_session_manager_options *base, cairn_session_manager **out);

/* TF's prepare_session — the chief path (doc/session-semantics.md,
 * "prepare_session (chief)"):
 *  1. create a session; restore (below); both checkpoint_dir and
 *     checkpoint_filename_with_path → CAIRN_E_INVALID "Can not provide both
 *     checkpoint_dir and checkpoint_filename_with_path.";
 *  2. not restored: no init_op, no init_fn and no local_init_op →
 *     CAIRN_E_NOT_READY "Model is not initialized and no init_op or init_fn
 *     or local_init_op was given"; else run init_op (with init_feeds), then
 *     the warm start, then init_fn. Restored: neither runs;
 *  3. local_init_op if ready_for_local_init_op passes, else
 *     CAIRN_E_NOT_READY "Init operations did not make model ready for
 *     local_init.  Init op: %s, init fn: %s, error: %s" (also on the
 *     restored path); errors of local_init_op itself propagate;
 *  4. ready_op, else CAIRN_E_NOT_READY "Init operations did not make model
 *     ready.  Init op: %s, init fn: %s, local_init_op: %s, error: %s".
 * Ops are named in messages by their names, "None" when absent; the error
 * is "Variables not initialized: a, b" (or a legacy ready op's message).
 * When the model was restored, cairn adds a bracketed note after TF's text
 * naming the remedy for a checkpoint that does not cover every variable
 * (the `restore` option, warm start); TF's text stays a prefix.
 *
 * Restore: checkpoint_filename_with_path → the saver restores that file
 * (no waiting). checkpoint_dir → read the state file; while it is missing
 * (or has no model_checkpoint_path), if wait_for_checkpoint and the time
 * waited < max_wait_secs: log "Waiting for checkpoint to be available.",
 * sleep recovery_wait_secs, add recovery_wait_secs to the time waited
 * (the budget counts sleeps, not wall time: it may overshoot by one
 * interval, as TF); else not restored. Then restore model_checkpoint_path
 * and recover the saver's rotation list from all_model_checkpoint_paths.
 * A state file with an empty model_checkpoint_path is an error
 * (CAIRN_E_FORMAT, TF's "Invalid checkpoint state").
 *
 * A damaged newest checkpoint (cairn; TF fails here): when restoring the
 * checkpoint_dir's newest checkpoint fails because of the file itself —
 * its tensor data fails a checksum, cannot be decoded or is cut short
 * (CAIRN_E_CORRUPT, CAIRN_E_TRUNCATED, CAIRN_E_FORMAT), or it no longer
 * opens — the manager logs a warning, at CAIRN_LOG_WARN,
 *   "Checkpoint <file> is unusable (<reason>); restoring <older file>
 *   instead, the newest intact checkpoint (the unusable file is left in
 *   place and skipped from now on)"
 * marks the file with cairn_checkpoint_mark_corrupt (cairn/saver.h: every
 * later cairn_latest_checkpoint of the process skips it, and it stays out
 * of the saver's rotation list, so it is never deleted by rotation), and
 * restores cairn_latest_checkpoint(checkpoint_dir) instead, walking back
 * as far as needed. A later session of the same process goes straight to
 * that older file. A failed restore changes no variable (the saver stages
 * every tensor before assigning any), so nothing of the damaged file is
 * left behind. Training resumes from the older file's step, and
 * cairn_session_restored_path / cairn_session_restored_meta give that
 * file and its metadata (read with the variables), so training state kept
 * there (data position, RNG state) matches. When no intact checkpoint is
 * left, the call fails with the first file's code (usually
 * CAIRN_E_CORRUPT) and "restore_checkpoint: no intact checkpoint in
 * '<dir>' to restore: '<file>': <reason>; '<older file>': <reason> (the
 * files are left in place; move them away to start from scratch)": it
 * does not silently start a new model, which would throw the job's
 * progress away and later overwrite those files.
 * checkpoint_filename_with_path names one file: its errors propagate, no
 * fall back. Errors that are the model's propagate in both cases, with
 * nothing marked: a variable missing from a sound checkpoint
 * (CAIRN_E_NOT_FOUND "Key ... not found in checkpoint"), another shape or
 * dtype (CAIRN_E_SHAPE, CAIRN_E_DTYPE), and the other errors of
 * cairn_saver_restore (CAIRN_E_NOMEM...).
 *
 * No checkpoint in checkpoint_dir (TF is silent here): INFO "no checkpoint
 * in 'DIR': initializing (the directory does not exist)" (or "(the
 * directory has no state file 'checkpoint')"); with the manager's
 * require_checkpoint, CAIRN_E_NOT_FOUND "prepare_session:
 * require_checkpoint is set and there is no checkpoint in 'DIR' (...);
 * refusing to start from freshly initialized variables".
 * After a restore, local_init_op runs as in TF; if it changed a variable
 * the restore wrote (CRC32C before and after), a WARNING names them and
 * the remedy ("local_init_op 'op' changed N of the M variables just
 * restored from 'path': 'a', ... . local_init_op runs after every
 * restore, ..."): load pretrained weights with warm_start_path or init_fn,
 * which run only when nothing was restored (doc/checkpoints-and-restarts.md).
 *
 * On success *out is a new session (free it with cairn_session_free); on
 * error *out is NULL and the session made is freed.
 * Errors: the above, CAIRN_E_NULL, and those of the ops. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_session_manager_prepare_session(cairn_session_manager *sm,
                                                                          const cairn_prepare_options *opts,
                                                                          cairn_session **out);

/* TF's recover_session (doc/session-semantics.md, "recover_session"):
 * restore as above (init_op, init_fn and warm
 * start are ignored); always try local_init_op (gated); *initialized = 1
 * only if restored, local init ran (or there is none) and the model is
 * ready; otherwise 0 with a log line ("Restoring model from %s did not make
 * model ready for local init: %s", "... did not make model ready: %s").
 * Never fails for "not ready"; the session is returned either way. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_session_manager_recover_session(cairn_session_manager *sm,
                                                                          const cairn_prepare_options *opts,
                                                                          cairn_session **out,
                                                                          int *initialized);

/* TF's wait_for_session — the worker path (doc/session-semantics.md,
 * "wait_for_session (worker)"). max_wait_secs < 0 or
 * INFINITY: no limit. Loop, the deadline counted on env's clock from entry:
 * create a new session; run local_init_op if ready_for_local_init_op
 * passes; if that ran (or there is none) and ready_op passes, return the
 * session; else close it; if remaining − recovery_wait_secs < 0 fail with
 * CAIRN_E_DEADLINE "Session was not ready after waiting %d secs." followed
 * by the last reasons; else log "Waiting for model to be ready.
 * Ready_for_local_init_op:  %s, ready: %s" (which variables) and sleep
 * recovery_wait_secs. Never restores, never runs init_op / init_fn. Errors
 * of local_init_op propagate. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_session_manager_wait_for_session(cairn_session_manager *sm,
                                                                           double max_wait_secs,
                                                                           cairn_session **out);

/* ==== The restore op ============================================================================ */

/* ---- the restore op ----
 * TF's `saver = tf.train.Saver(var_list); init_fn = lambda scaffold, sess:
 * saver.restore(sess, path)` as one call: an op that restores vars[0..n)
 * from the checkpoint file `path`, for a Scaffold's local_init_op or, with
 * cairn_op_init_fn, its init_fn (then the restore happens only when the
 * session was initialized, not when it was restored from its own
 * checkpoint_dir). opts NULL: the strict restore (cairn_saver_restore);
 * else cairn_saver_restore_partial with opts (include / exclude / rename /
 * lenient). The list and path are copied; opts and the arrays it points to
 * are borrowed (they must outlive the op). A strict opts is checked here
 * against vars: an include pattern or a rename's model side that names none
 * of them fails at once with CAIRN_E_NOT_FOUND ("op_new_restore: 1 pattern
 * of the restore options matches no variable of the list ...: include
 * pattern 'dense/kernal' ... (did you mean 'dense/kernel'?)"). path may be a
 * directory (as cairn_saver_restore; looked up at each run). Each run that
 * succeeds logs at INFO "<name>: Restored N variables from <file> (...)"
 * (to opts->env, else stderr). When report is not NULL, *report
 * is the last run's restore report (owned by the op: valid until the next
 * run or until the op is freed; NULL before the first run and for a strict
 * restore). A run fails with the restore's status and the message
 * "<name>: <the restore's message>".
 * Errors: those of cairn_saver_new_list (CAIRN_E_EXISTS, CAIRN_E_NULL ...),
 * CAIRN_E_NOT_FOUND (a pattern that names none of vars, above),
 * CAIRN_E_INVALID (bad options), CAIRN_E_NULL (path), CAIRN_E_NOMEM. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_op_new_restore(const char *name, const char *path, cairn_var *const *vars,
                                                         size_t n, const cairn_restore_options *opts,
                                                         const cairn_restore_report **report, cairn_op **out);
/* Runs the op `op` (a cairn_op *) on s: any op as a Scaffold init_fn
 * (so.init_fn = cairn_op_init_fn; so.init_fn_user = op; the op is
 * borrowed). Returns the run's status. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_op_init_fn(cairn_scaffold *sc, cairn_session *s, void *op);
#ifdef __cplusplus
}
#endif
#endif
