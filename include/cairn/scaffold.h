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

#ifdef __cplusplus
}
#endif
#endif
