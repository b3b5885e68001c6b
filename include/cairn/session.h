/* cairn/session.h — sessions, ops and SessionManager with TensorFlow 1.x
 * semantics (tf.compat.v1.Session / tf.compat.v1.train.SessionManager).
 *
 * doc/session-semantics.md describes the TF behaviour reproduced here, the
 * TF source each part comes from, and where cairn differs; users who know
 * TF 1.x find its behaviour and its error texts here.
 * The Scaffold (what a SessionManager prepares a session with) is in
 * cairn/scaffold.h; MonitoredSession, its session creators and the hooks
 * are in cairn/monitored.h.
 *
 * ---- What a session is ----------------------------------------------------
 * The registry (cairn/var.h) plays TF's server: variable values and their
 * "initialized" flags live there, and so do the graph collections the
 * Scaffold reads ("init_op", "savers", ...). A cairn_session is a handle
 * over a registry — TF's tf.Session connected to that server. "Creating a
 * new session" makes a new handle; it sees the registry as it is, the way a
 * TF session on a shared server sees the variables another session
 * initialized. With CAIRN_SESSION_FRESH a new session instead starts with
 * every variable of the registry marked uninitialized (values untouched),
 * which emulates TF's in-process target where each new tf.Session has its
 * own, empty variable state; use it when one thread at a time works on the
 * registry (it would un-initialize the variables under another thread's
 * feet).
 *
 * ---- Ops --------------------------------------------------------------------
 * An op is a named callback with user data: `cairn_status fn(session, user)`.
 * A ready op is a named callback that appends to a name list what is not
 * ready yet (empty list = ready), like TF's report_uninitialized_variables.
 * Ops are immutable and reference-counted: whoever stores one (a Scaffold, a
 * group, a registry collection) takes a reference, and cairn_op_free()
 * drops the caller's. Built-in constructors: initialize variables (a list or
 * a collection mask), group, no-op, and the ready ops reporting
 * uninitialized variables (a list or a collection mask).
 *
 * ---- Runs, feeds, fetches ----------------------------------------------------
 * cairn_session_run() runs ops in order with named feeds (tensors the ops
 * read: TF's feed_dict) and fills named fetches (TF's fetches). A training
 * step is an op: it reads its batch with cairn_session_feed(), does the
 * work (cairn_mlp_train_step...) and publishes named results ("loss",
 * "accuracy") with cairn_session_output_*(); hooks request those names
 * (cairn/monitored.h). A fetch the ops did not publish is resolved after the
 * ops ran as: "global_step" → the global step's value read *before* the ops
 * ran (TF's cached global-step read tensor, ordered before the step's
 * increment: hooks treat it as stale, +1, and re-read with
 * cairn_session_global_step()); the name of a variable → its value after
 * the ops; anything else → CAIRN_E_NOT_FOUND.
 *
 * ---- Errors ---------------------------------------------------------------------
 * Status codes map TF's error classes: RuntimeError "model not ready" →
 * CAIRN_E_NOT_READY, ValueError → CAIRN_E_INVALID, DeadlineExceededError →
 * CAIRN_E_DEADLINE, AbortedError / UnavailableError → CAIRN_E_ABORTED /
 * CAIRN_E_UNAVAILABLE (the "recoverable" errors of MonitoredSession),
 * FailedPreconditionError on an uninitialized variable →
 * CAIRN_E_UNINITIALIZED, OutOfRangeError → CAIRN_E_OUT_OF_RANGE, other
 * RuntimeErrors → CAIRN_E_STATE. The message keeps TF's text and adds
 * cairn's detail after it, e.g.
 *   Init operations did not make model ready for local_init.  Init op: init,
 *   init fn: None, error: Variables not initialized: a, b
 * The text is in cairn_errmsg() (per thread) and on the handle:
 * cairn_session_errmsg(), cairn_session_manager_errmsg(), whole up to
 * 16383 bytes in both (one size for every message buffer). Messages up to
 * that size arrive whole through every layer (session manager, session
 * creators, monitored sessions, hooks); a longer one is cut visibly: it
 * ends with "...".
 *
 * ---- Time and logging -----------------------------------------------------------
 * Every waiting loop reads a cairn_env (cairn/env.h): an injectable clock,
 * sleep and log sink, so that tests of recovery_wait_secs / max_wait_secs /
 * every_n_secs run in microseconds. NULL members (or a NULL env) mean
 * CLOCK_MONOTONIC, nanosleep and stderr.
 *
 * ---- Thread safety ---------------------------------------------------------------
 * A session, a Scaffold and a SessionManager are used by one thread at a
 * time. Several sessions and session managers on one registry may be used
 * concurrently from different threads (a chief thread preparing the model
 * while worker threads wait for it, as TF's tests share a server): the
 * variables' initialized flags are atomic (an initializer's values are
 * visible to a thread that sees its flag set) and the registry's
 * collections are locked. Running ops that write the same variable from two
 * threads at once is a data race, as in TF.
 */
#ifndef CAIRN_SESSION_H
#define CAIRN_SESSION_H

#include <stddef.h>
#include <stdint.h>

/* cairn_env and the name lists were declared here first; they are base
 * headers now, included so that programs written against this header
 * still build. */
#include "cairn/env.h"
#include "cairn/names.h"
#include "cairn/saver.h"
#include "cairn/status.h"
#include "cairn/tensor.h"
#include "cairn/var.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== Sessions ========================================================================== */

typedef struct cairn_session cairn_session;
typedef struct cairn_op cairn_op;
typedef struct cairn_ready_op cairn_ready_op;

/* Session flags. */
#define CAIRN_SESSION_FRESH 1u /* mark every variable of the registry uninitialized */

/* A new session over r (normally made by a SessionManager). Errors:
 * CAIRN_E_NULL, CAIRN_E_INVALID (unknown flags), CAIRN_E_NOMEM. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_session_new(cairn_registry *r, unsigned flags, cairn_session **out);
/* Closes s: later runs fail with CAIRN_E_STATE "Attempted to use a closed
 * Session.". Closing twice is harmless. The registry keeps its values. */
CAIRN_API void cairn_session_close(cairn_session *s);
CAIRN_API int cairn_session_is_closed(const cairn_session *s);
/* Frees s (closing it). cairn_session_free(NULL) does nothing. */
CAIRN_API void cairn_session_free(cairn_session *s);
CAIRN_API cairn_registry *cairn_session_registry(const cairn_session *s);
/* A number unique in the process (1, 2, ...), in creation order: tells
 * re-created sessions apart (tests count them). */
CAIRN_API uint64_t cairn_session_id(const cairn_session *s);
/* The detail of the last failed call on s ("" if none); valid until the
 * next call on s. */
CAIRN_API const char *cairn_session_errmsg(const cairn_session *s);
/* The checkpoint file a SessionManager restored s from (prepare_session,
 * recover_session; also through the session creators and the monitored
 * sessions), or NULL when nothing was restored (initialized, or a worker's
 * session). After a fall back past a corrupt newest checkpoint it names the
 * older file really restored. Owned by s. */
CAIRN_API const char *cairn_session_restored_path(const cairn_session *s);
/* That checkpoint's metadata (global step, user.* keys, the train.state.*
 * blobs), read in the same pass as its variables, so training state kept
 * there (data position, RNG state) always matches the variables; NULL when
 * nothing was restored. Read it with the cairn_saver_meta_* calls; owned
 * by s. */
CAIRN_API const cairn_saver_meta *cairn_session_restored_meta(const cairn_session *s);
/* For ops written by users: sets the detail of s (and the calling thread's
 * cairn_errmsg()) printf-style and returns st, so an op can
 * `return cairn_session_fail(s, CAIRN_E_ABORTED, "worker %d lost", k);`. */
CAIRN_API cairn_status cairn_session_fail(cairn_session *s, cairn_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* ---- Runs -------------------------------------------------------------------------------- */

/* A named input. The tensor is borrowed for the duration of the run. */
typedef struct cairn_feed {
  const char *name;
  const cairn_tensor *value;
} cairn_feed;

typedef enum cairn_value_kind {
  CAIRN_VALUE_NONE = 0, /* not produced (yet) */
  CAIRN_VALUE_F64,      /* f64 */
  CAIRN_VALUE_I64,      /* i64 */
  CAIRN_VALUE_TENSOR    /* tensor: borrowed, valid until the producer changes it
                           (a variable: until the next op writes it; an op's
                           output: as that op documents) */
} cairn_value_kind;

typedef struct cairn_value {
  cairn_value_kind kind;
  double f64;
  int64_t i64;
  const cairn_tensor *tensor;
} cairn_value;

/* A named output: the caller sets name; the run sets value. */
typedef struct cairn_fetch {
  const char *name;
  cairn_value value;
} cairn_fetch;

/* Receives the scalar summaries ops emit during a run (see
 * cairn_session_summary_scalar). */
typedef void (*cairn_summary_fn)(void *ctx, const char *tag, double value);

typedef struct cairn_run_args {
  const cairn_op *const *ops; /* run in this order (n_ops may be 0: fetch only) */
  size_t n_ops;
  const cairn_feed *feeds; /* names must be distinct */
  size_t n_feeds;
  cairn_fetch *fetches; /* names must be distinct; values filled on success */
  size_t n_fetches;
  cairn_summary_fn summary_fn; /* NULL: summaries are discarded */
  void *summary_ctx;
} cairn_run_args;

/* The run arguments of one op and nothing else (no feed, no fetch: the
 * hooks fetch what they need): `cairn_run_args a = cairn_run_args_one(&op);`.
 * *op is borrowed (the array of one the run reads): it must outlive a. */
CAIRN_API cairn_run_args cairn_run_args_one(cairn_op *const *op);

/* TF's Session.run: runs args->ops in order (stops at the first error),
 * then fills every fetch: the value an op published under its name, else
 * "global_step" read before the ops ran, else the variable of that name
 * (scalars as F64 or I64 by dtype: f32/f64 → F64, integers and bool →
 * I64; other shapes as TENSOR), else CAIRN_E_NOT_FOUND. Nothing is
 * allocated. Fetch values are undefined on error.
 * Errors: CAIRN_E_NULL, CAIRN_E_STATE (closed session), CAIRN_E_INVALID
 * (two feeds or two fetches of one name), CAIRN_E_NOT_FOUND (a fetch no op
 * produced and no variable has), CAIRN_E_UNINITIALIZED ("Attempting to use
 * uninitialized value v": a fetched variable), and whatever an op returns.
 * Runs may nest (an op may run other ops on its session). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_session_run(cairn_session *s, const cairn_run_args *args);
/* Runs one op with no feeds and no fetches. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_session_run_op(cairn_session *s, const cairn_op *op);
/* Runs one op with feeds (TF's init_feed_dict). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_session_run_op_feeds(cairn_session *s, const cairn_op *op,
                                                               const cairn_feed *feeds, size_t n_feeds);
/* Runs a ready op: clears `not_ready`, then the op appends the names of
 * what is not ready (empty = ready). Errors: those of the op. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_session_run_ready(cairn_session *s, const cairn_ready_op *op,
                                                            cairn_names *not_ready);
/* The real global step now (TF's global_step read via the session):
 * CAIRN_E_NOT_FOUND (no "global_step" variable), CAIRN_E_UNINITIALIZED. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_session_global_step(cairn_session *s, int64_t *step);

/* ---- Inside an op: feeds and outputs of the current run ------------------------------- */

/* The tensor fed under name in the innermost run in progress on s, or NULL. */
CAIRN_API const cairn_tensor *cairn_session_feed(const cairn_session *s, const char *name);
/* 1 if the run in progress fetches name (an op may skip computing outputs
 * nobody asked for). */
CAIRN_API int cairn_session_wants(const cairn_session *s, const char *name);
/* Publishes an output of the run in progress. Names nobody fetches are
 * ignored (CAIRN_OK); a later output of the same name replaces an earlier
 * one. A tensor is borrowed: it must stay valid until the run returns and
 * the caller has read the fetches. Errors: CAIRN_E_NULL, CAIRN_E_STATE (no
 * run in progress). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_session_output_f64(cairn_session *s, const char *name, double v);
CAIRN_API CAIRN_NODISCARD cairn_status cairn_session_output_i64(cairn_session *s, const char *name, int64_t v);
CAIRN_API CAIRN_NODISCARD cairn_status cairn_session_output_tensor(cairn_session *s, const char *name,
                                                                const cairn_tensor *t);
/* Emits a scalar summary (TF's tf.summary.scalar) to the run's summary_fn;
 * a no-op when the run has none or no run is in progress. */
CAIRN_API void cairn_session_summary_scalar(cairn_session *s, const char *tag, double value);

/* ==== Ops ======================================================================================= */

typedef cairn_status (*cairn_op_fn)(cairn_session *s, void *user);
/* Appends the names of what is not ready to not_ready. Returning
 * CAIRN_E_UNINITIALIZED (with cairn_session_fail's message) also means "not
 * ready" — TF's legacy ready op that raises FailedPrecondition
 * "...uninitialized..."; any other error propagates. */
typedef cairn_status (*cairn_ready_fn)(cairn_session *s, cairn_names *not_ready, void *user);
/* Releases an op's user data when the op's last reference goes. */
typedef void (*cairn_user_free_fn)(void *user);

/* Names: any non-empty text (copied); used in messages ("Init op: init").
 * Errors of every constructor: CAIRN_E_NULL (name, fn or out), CAIRN_E_INVALID
 * (empty name), CAIRN_E_NOMEM (user data is then not freed). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_op_new(const char *name, cairn_op_fn fn, void *user,
                                                 cairn_user_free_fn free_user, cairn_op **out);
/* TF's variables_initializer(vars): runs the initializers of vars[0..n) in
 * order and marks them initialized (n 0: a no-op). The list is copied. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_op_new_init_vars(const char *name, cairn_var *const *vars, size_t n,
                                                           cairn_op **out);
/* TF's global_variables_initializer() (mask GLOBAL) and
 * local_variables_initializer() (LOCAL): the variables of r in mask *now*
 * (a later variable is not included, as in TF). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_op_new_init(const char *name, cairn_registry *r, unsigned mask,
                                                      cairn_op **out);
/* TF's group(ops): runs ops[0..n) in order, stops at the first error. NULL
 * entries are skipped. Takes a reference to each. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_op_new_group(const char *name, cairn_op *const *ops, size_t n,
                                                       cairn_op **out);
/* TF's no_op. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_op_new_noop(const char *name, cairn_op **out);
/* A new reference to op (returns op). */
CAIRN_API cairn_op *cairn_op_ref(cairn_op *op);
/* Drops a reference; the last one frees the op. NULL does nothing. */
CAIRN_API void cairn_op_free(cairn_op *op);
CAIRN_API const char *cairn_op_name(const cairn_op *op);

CAIRN_API CAIRN_NODISCARD cairn_status cairn_ready_op_new(const char *name, cairn_ready_fn fn, void *user,
                                                       cairn_user_free_fn free_user, cairn_ready_op **out);
/* TF's report_uninitialized_variables(vars): the names of the
 * uninitialized variables among vars[0..n), in that order (n 0: always
 * ready — TF's "op returning an empty list"). The list is copied. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_ready_op_new_uninitialized_vars(const char *name,
                                                                          cairn_var *const *vars, size_t n,
                                                                          cairn_ready_op **out);
/* The same over the variables of r in mask now, in creation order
 * (GLOBAL|LOCAL: TF's report_uninitialized_variables() default). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_ready_op_new_uninitialized(const char *name, cairn_registry *r,
                                                                     unsigned mask, cairn_ready_op **out);
CAIRN_API cairn_ready_op *cairn_ready_op_ref(cairn_ready_op *op);
CAIRN_API void cairn_ready_op_free(cairn_ready_op *op);
CAIRN_API const char *cairn_ready_op_name(const cairn_ready_op *op);

/* ==== Graph collections used by the Scaffold ============================================ */

/* Keys of registry collections (cairn_registry_collection_add, var.h) and
 * the type of their items. Scaffold finalize reuses the single item of a
 * collection, fails with "More than one item in the collection" for
 * several, and adds the default it builds to an empty one. */
#define CAIRN_COLLECTION_INIT_OP "init_op"                                 /* cairn_op */
#define CAIRN_COLLECTION_READY_OP "ready_op"                               /* cairn_ready_op */
#define CAIRN_COLLECTION_READY_FOR_LOCAL_INIT_OP "ready_for_local_init_op" /* cairn_ready_op */
#define CAIRN_COLLECTION_LOCAL_INIT_OP "local_init_op"                     /* cairn_op */
#define CAIRN_COLLECTION_SUMMARY_OP "summary_op"                           /* cairn_op */
#define CAIRN_COLLECTION_SAVERS "savers"                                   /* cairn_saver */

/* Adds a reference to op / a ready op / a saver (which the registry then
 * owns and frees) to a collection of r. Errors: those of
 * cairn_registry_collection_add (CAIRN_E_STATE when r is finalized). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_registry_add_op(cairn_registry *r, const char *key, cairn_op *op);
CAIRN_API CAIRN_NODISCARD cairn_status cairn_registry_add_ready_op(cairn_registry *r, const char *key,
                                                                cairn_ready_op *op);
CAIRN_API CAIRN_NODISCARD cairn_status cairn_registry_add_saver(cairn_registry *r, cairn_saver *saver);

/* The SessionManager (cairn_session_manager_*) is declared in
 * cairn/scaffold.h, the header of its layer: it is made from a Scaffold. */

#ifdef __cplusplus
}
#endif

/* Compatibility, for one release: the SessionManager moved to
 * cairn/scaffold.h. Define CAIRN_NO_COMPAT_INCLUDES to check that a program
 * includes what it uses. */
#ifndef CAIRN_NO_COMPAT_INCLUDES
#include "cairn/scaffold.h"
#endif
#endif
