/* The SessionManager (cairn/session.h): TF's
 * tf.compat.v1.train.SessionManager — prepare_session (chief),
 * recover_session, wait_for_session (worker) — plus cairn's first-class
 * partial restore and warm start.
 * TF behaviour and its sources: doc/session-semantics.md ("SessionManager",
 * "Partial restore and fine-tuning"). */
#define _POSIX_C_SOURCE 200809L
#include "session_impl.h"
#include "ckpt_backend.h" /* cairn__ckpt_open_in */
#include "restore_impl.h"
#include "checkpoint_dir_impl.h"
#include "saver_impl.h" /* cairn__saver_restore_in */

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cairn/checkpoint_dir.h"
#include "cairn/ckpt.h"
#include "cairn/saver.h"
#include "cairn/scaffold.h"
#include "cairn/session.h"
#include "table.h"

/* Room for one readiness message ("Variables not initialized: a, b, ..."). */
#define MSG_CAP 8192

struct cairn_session_manager {
  cairn_registry *r;
  cairn_op *local_init_op; /* referenced */
  const cairn_feed *local_init_feeds;
  size_t n_local_init_feeds;
  cairn_ready_op *ready_op;
  cairn_ready_op *ready_for_local_init_op;
  double recovery_wait_secs;
  unsigned session_flags;
  int require_checkpoint;
  const cairn_env *env;
  cairn_names *names; /* scratch list for ready ops */
  cairn_restore_report *report;
  char msg_local[MSG_CAP]; /* the last not-ready messages */
  char msg_ready[MSG_CAP];
  char restored_from[1024];
  char errmsg[CAIRN__ERRMSG_LEN];
};

cairn_session_manager_options cairn_session_manager_options_default(void) {
  return (cairn_session_manager_options){.recovery_wait_secs = 30.0};
}

cairn_prepare_options cairn_prepare_options_default(void) {
  return (cairn_prepare_options){.max_wait_secs = 7200.0};
}

cairn_status cairn_session_manager_new(cairn_registry *r, const cairn_session_manager_options *opts,
                                       cairn_session_manager **out) {
  static const char fn[] = "session_manager_new";
  if (!out) return cairn__fail(CAIRN_E_NULL, "%s: out is NULL", fn);
  *out = NULL;
  if (!r) return cairn__fail(CAIRN_E_NULL, "%s: registry is NULL", fn);
  cairn_session_manager_options o = opts ? *opts : cairn_session_manager_options_default();
  if (cairn__env_check(o.env, fn) != CAIRN_OK) return CAIRN_E_INVALID;
  if (o.ready_for_local_init_op && !o.local_init_op)
    return cairn__fail(CAIRN_E_INVALID,
                       "If you pass a ready_for_local_init_op you must also pass a local_init_op , "
                       "ready_for_local_init_op [%s]",
                       cairn_ready_op_name(o.ready_for_local_init_op));
  if (!(o.recovery_wait_secs > 0) || isinf(o.recovery_wait_secs))
    return cairn__fail(CAIRN_E_INVALID,
                       "%s: recovery_wait_secs must be a finite number > 0 (got %g); start from "
                       "cairn_session_manager_options_default()",
                       fn, o.recovery_wait_secs);
  if (o.session_flags & ~CAIRN_SESSION_FRESH)
    return cairn__fail(CAIRN_E_INVALID, "%s: unknown session flags 0x%x", fn, o.session_flags);
  cairn_session_manager *sm = calloc(1, sizeof *sm);
  if (!sm) return cairn__fail(CAIRN_E_NOMEM, "%s: cannot allocate the session manager", fn);
  cairn_status s = cairn_names_new(&sm->names);
  if (s) {
    free(sm);
    return s;
  }
  sm->r = r;
  sm->local_init_op = cairn_op_ref(o.local_init_op);
  sm->local_init_feeds = o.local_init_feeds;
  sm->n_local_init_feeds = o.n_local_init_feeds;
  sm->ready_op = cairn_ready_op_ref(o.ready_op);
  sm->ready_for_local_init_op = cairn_ready_op_ref(o.ready_for_local_init_op);
  sm->recovery_wait_secs = o.recovery_wait_secs;
  sm->session_flags = o.session_flags;
  sm->require_checkpoint = o.require_checkpoint;
  sm->env = o.env;
  *out = sm;
  return CAIRN_OK;
}

cairn_status cairn_session_manager_new_from_scaffold(const cairn_scaffold *sc,
                                                     const cairn_session_manager_options *base,
                                                     cairn_session_manager **out) {
  static const char fn[] = "session_manager_new_from_scaffold";
  if (out) *out = NULL;
  if (!sc) return cairn__fail(CAIRN_E_NULL, "%s: scaffold is NULL", fn);
  if (!cairn_scaffold_is_finalized(sc))
    return cairn__fail(CAIRN_E_STATE, "%s: the scaffold is not finalized (call cairn_scaffold_finalize)", fn);
  cairn_session_manager_options o = base ? *base : cairn_session_manager_options_default();
  o.local_init_op = cairn_scaffold_local_init_op(sc);
  o.local_init_feeds = cairn_scaffold_local_init_feeds(sc, &o.n_local_init_feeds);
  o.ready_op = cairn_scaffold_ready_op(sc);
  o.ready_for_local_init_op = cairn_scaffold_ready_for_local_init_op(sc);
  return cairn_session_manager_new(cairn_scaffold_registry(sc), &o, out);
}

void cairn_session_manager_free(cairn_session_manager *sm) {
  if (!sm) return;
  cairn_op_free(sm->local_init_op);
  cairn_ready_op_free(sm->ready_op);
  cairn_ready_op_free(sm->ready_for_local_init_op);
  cairn_names_free(sm->names);
  cairn_restore_report_free(sm->report);
  free(sm);
}

const char *cairn_session_manager_errmsg(const cairn_session_manager *sm) { return sm ? sm->errmsg : ""; }

const cairn_restore_report *cairn_session_manager_restore_report(const cairn_session_manager *sm) {
  return sm ? sm->report : NULL;
}

cairn_prepare_options cairn_prepare_options_from_scaffold(const cairn_scaffold *sc, const char *checkpoint_dir,
                                                          const char *checkpoint_filename_with_path) {
  cairn_prepare_options o = cairn_prepare_options_default();
  o.checkpoint_dir = checkpoint_dir;
  o.checkpoint_filename_with_path = checkpoint_filename_with_path;
  if (!sc) return o;
  o.init_op = cairn_scaffold_init_op(sc);
  o.init_feeds = cairn_scaffold_init_feeds(sc, &o.n_init_feeds);
  cairn_scaffold_bound_init_fn(sc, &o.init_fn, &o.init_fn_user, &o.init_fn_name);
  o.saver = cairn_scaffold_saver(sc);
  o.restore = cairn_scaffold_restore(sc);
  o.warm_start_path = cairn_scaffold_warm_start_path(sc);
  o.warm_start = cairn_scaffold_warm_start(sc);
  return o;
}

/* ---- errors ------------------------------------------------------------------------- */

static cairn_status sm_fail(cairn_session_manager *sm, cairn_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static cairn_status sm_fail(cairn_session_manager *sm, cairn_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  cairn__errbuf_vfail(sm->errmsg, st, fmt, ap);
  va_end(ap);
  return st;
}

/* An error from a session run: its whole message is on the session. */
static cairn_status sm_keep_session(cairn_session_manager *sm, cairn_session *s, cairn_status st) {
  cairn__errbuf_keep(sm->errmsg, st, cairn__session_errbuf(s));
  return cairn__fail(st, "%s", sm->errmsg);
}

/* An error reported through cairn__fail (saver, registry). */
static cairn_status sm_keep(cairn_session_manager *sm, cairn_status st) {
  return cairn__errbuf_keep(sm->errmsg, st, NULL);
}

/* Nothing was restored from checkpoint_dir (no state file there, after
 * any waiting). TF goes on silently with fresh variables, so an evaluator
 * pointed at a wrong or empty directory reports the accuracy of random
 * weights; cairn says so in one INFO line, or fails when the options
 * require a checkpoint. `next` says what happens instead. */
static cairn_status no_checkpoint(cairn_session_manager *sm, const cairn_prepare_options *o, const char *fn,
                                  const char *next) {
  if (!o->checkpoint_dir) return CAIRN_OK;
  struct stat sb;
  int found = stat(o->checkpoint_dir, &sb) == 0;
  int exists = found && S_ISDIR(sb.st_mode);
  char waited[96] = "";
  if (o->wait_for_checkpoint)
    snprintf(waited, sizeof waited, ", after waiting up to max_wait_secs %g s", o->max_wait_secs);
  const char *why = !o->saver ? "no saver to restore with"
                  : exists    ? "the directory has no state file 'checkpoint'"
                  : found && S_ISREG(sb.st_mode) ? "it is a regular file, not a directory: checkpoint_dir names "
                                                   "the directory the checkpoints go to (to restore one file, pass "
                                                   "it as checkpoint_filename_with_path)"
                  : found     ? "it is not a directory"
                              : "the directory does not exist";
  if (sm->require_checkpoint)
    return sm_fail(sm, CAIRN_E_NOT_FOUND,
                   "%s: require_checkpoint is set and there is no checkpoint in '%s' (%s%s); refusing to start from "
                   "freshly initialized variables",
                   fn, o->checkpoint_dir, why, waited);
  if (o->saver)
    cairn_env_log(sm->env, CAIRN_LOG_INFO, "no checkpoint in '%s': %s (%s%s)", o->checkpoint_dir, next, why,
                  waited);
  return CAIRN_OK;
}

/* ---- readiness primitives (TF's _ready, _try_run_local_init_op) ---------------------- */

/* TF's _ready: *ready and, when not ready, msg ("Variables not initialized:
 * a, b" or a legacy op's "...uninitialized..." message). Other errors of
 * the op propagate. */
static cairn_status check_ready(cairn_session_manager *sm, cairn_session *s, const cairn_ready_op *op, int *ready,
                                char *msg) {
  msg[0] = '\0';
  *ready = 1;
  if (!op) return CAIRN_OK;
  cairn_status st = cairn_session_run_ready(s, op, sm->names);
  if (st == CAIRN_E_UNINITIALIZED) {
    *ready = 0;
    snprintf(msg, MSG_CAP, "%s", cairn_session_errmsg(s));
    return CAIRN_OK;
  }
  if (st) return sm_keep_session(sm, s, st);
  if (cairn_names_count(sm->names) == 0) return CAIRN_OK;
  *ready = 0;
  static const char head[] = "Variables not initialized: ";
  memcpy(msg, head, sizeof head);
  size_t used = sizeof head - 1;
  size_t total = cairn_names_join(sm->names, ", ", msg + used, MSG_CAP - used);
  if (used + total + 1 > MSG_CAP) memcpy(msg + MSG_CAP - 4, "...", 4); /* cut: say so */
  return CAIRN_OK;
}

static cairn_status try_local_init(cairn_session_manager *sm, cairn_session *s, int *ok);

/* How many changed variables the local_init_op warning names before "and
 * K more". */
#define WATCH_NAMES 8

/* try_local_init after a restore, watched. TF runs local_init_op after
 * every restore, so a local_init_op that loads pretrained weights into
 * GLOBAL variables (a common fine-tuning recipe) replaces the values just
 * restored on every restart, and the checkpoint saved next holds the
 * pretrained values again: the fine-tuned state is lost without a word.
 * cairn fingerprints (CRC32C) every variable the restore wrote before and
 * after local_init_op and warns, naming them and the remedy. */
static cairn_status local_init_watched(cairn_session_manager *sm, const cairn_prepare_options *o, cairn_session *s,
                                       int restored, int *ok) {
  if (!restored || !sm->local_init_op || !o->saver) return try_local_init(sm, s, ok);
  /* What the restore wrote: the report's list with the `restore` option,
     else the whole save set (a strict restore writes all of it). */
  const cairn_restore_report *rep = o->restore ? sm->report : NULL;
  size_t n = rep ? cairn_restore_report_count(rep, CAIRN_RESTORE_RESTORED) : cairn_saver_count(o->saver);
  cairn_var **vars = n ? malloc(n * sizeof *vars) : NULL;
  uint32_t *crc = n ? malloc(n * sizeof *crc) : NULL;
  if (n && (!vars || !crc)) {
    free(vars);
    free(crc);
    return sm_fail(sm, CAIRN_E_NOMEM, "prepare_session: cannot fingerprint %zu restored variables", n);
  }
  for (size_t i = 0; i < n; i++) {
    vars[i] = rep ? cairn_restore_report_item(rep, CAIRN_RESTORE_RESTORED, i)->var : cairn_saver_var_at(o->saver, i);
    const cairn_tensor *t = cairn_var_tensor(vars[i]);
    crc[i] = cairn_crc32c(0, t->data, cairn_tensor_nbytes(t));
  }
  cairn_status st = try_local_init(sm, s, ok);
  if (!st && *ok) {
    char names[1024] = "";
    size_t changed = 0;
    for (size_t i = 0; i < n; i++) {
      const cairn_tensor *t = cairn_var_tensor(vars[i]);
      if (cairn_crc32c(0, t->data, cairn_tensor_nbytes(t)) == crc[i]) continue;
      if (changed++ < WATCH_NAMES)
        cairn__strbuf_append(names, sizeof names, "%s'%s'", changed > 1 ? ", " : "", cairn_var_name(vars[i]));
    }
    if (changed > WATCH_NAMES) cairn__strbuf_append(names, sizeof names, " and %zu more", changed - WATCH_NAMES);
    if (changed)
      cairn_env_log(sm->env, CAIRN_LOG_WARN,
                    "local_init_op '%s' changed %zu of the %zu variables just restored from '%s': %s. "
                    "local_init_op runs after every restore, so the restored (trained) values are gone from this "
                    "session and the next checkpoint would hold the overwritten ones. To load pretrained weights "
                    "only when checkpoint_dir has no checkpoint yet, use the scaffold's warm_start_path / "
                    "warm_start options or its init_fn instead of local_init_op: they run only when nothing was "
                    "restored",
                    cairn_op_name(sm->local_init_op), changed, n, sm->restored_from, names);
  }
  free(vars);
  free(crc);
  return st;
}

/* TF's _try_run_local_init_op. */
static cairn_status try_local_init(cairn_session_manager *sm, cairn_session *s, int *ok) {
  *ok = 1;
  sm->msg_local[0] = '\0';
  if (!sm->local_init_op) return CAIRN_OK;
  int ready;
  cairn_status st = check_ready(sm, s, sm->ready_for_local_init_op, &ready, sm->msg_local);
  if (st) return st;
  if (!ready) {
    *ok = 0;
    return CAIRN_OK;
  }
  st = cairn_session_run_op_feeds(s, sm->local_init_op, sm->local_init_feeds, sm->n_local_init_feeds);
  if (st) return sm_keep_session(sm, s, st);
  return CAIRN_OK;
}

/* ---- restore (TF's _restore_checkpoint) ------------------------------------------------ */

/* Initializes every GLOBAL variable that the partial restore reported in
 * `report` did not restore. */
static cairn_status init_unrestored(cairn_session_manager *sm, const cairn_restore_report *report, size_t *count) {
  *count = 0;
  size_t n = cairn_registry_count(sm->r, CAIRN_COLL_GLOBAL);
  if (n == 0) return CAIRN_OK;
  cairn_var **vars = malloc(n * sizeof *vars);
  if (!vars) return sm_fail(sm, CAIRN_E_NOMEM, "prepare_session: cannot list %zu variables", n);
  cairn_registry_list(sm->r, CAIRN_COLL_GLOBAL, vars, n);
  size_t nr = cairn_restore_report_count(report, CAIRN_RESTORE_RESTORED);
  cairn_status st = CAIRN_OK;
  for (size_t i = 0; i < n && !st; i++) {
    int restored = 0;
    for (size_t k = 0; k < nr && !restored; k++)
      restored = cairn_restore_report_item(report, CAIRN_RESTORE_RESTORED, k)->var == vars[i];
    if (restored) continue;
    st = cairn_var_initialize(vars[i]);
    if (st) sm_keep(sm, st);
    else ++*count;
  }
  free(vars);
  return st;
}

/* Restores `path`: strictly with the saver (TF), or partially with `ropts`
 * and then initializes what was not restored. With meta not NULL, *meta
 * gets the file's metadata on success (NULL on failure). d: the directory
 * the file was found in (its files are opened in it), or NULL for a file
 * the caller named. */
static cairn_status restore_file(cairn_session_manager *sm, cairn_saver *saver, const cairn__dir *d,
                                 const char *path, const cairn_restore_options *ropts, int init_rest,
                                 cairn_saver_meta **meta) {
  if (meta) *meta = NULL;
  char src[4096];
  if (!d) { /* a path the caller gave may be a directory (restore_source.c) */
    int was_dir = 0;
    cairn_status rs = cairn__restore_source("prepare_session", path, src, sizeof src, &was_dir);
    if (rs) return sm_keep(sm, rs);
    if (was_dir) cairn_env_log(sm->env, CAIRN_LOG_INFO, "'%s' is a directory: restoring %s from it", path, src);
    path = src;
  }
  cairn_env_log(sm->env, CAIRN_LOG_INFO, "Restoring parameters from %s", path);
  if (!ropts) {
    cairn_status st = cairn__saver_restore_in(saver, d, path, NULL, NULL, meta);
    return st ? sm_keep(sm, st) : CAIRN_OK;
  }
  cairn_restore_report_free(sm->report);
  sm->report = NULL;
  cairn_restore_options ro = *ropts; /* its WARNINGs go to this manager's log */
  if (!ro.env) ro.env = sm->env;
  cairn_status st = cairn__saver_restore_in(saver, d, path, &ro, &sm->report, meta);
  if (st) return sm_keep(sm, st);
  size_t restored = cairn_restore_report_count(sm->report, CAIRN_RESTORE_RESTORED), fresh = 0;
  if (init_rest) {
    st = init_unrestored(sm, sm->report, &fresh);
    if (st) {
      if (meta) {
        cairn_saver_meta_free(*meta);
        *meta = NULL;
      }
      return st;
    }
  }
  char rest[96];
  if (init_rest) snprintf(rest, sizeof rest, "%zu initialized", fresh);
  else snprintf(rest, sizeof rest, "the others keep init_op's values");
  cairn_env_log(sm->env, CAIRN_LOG_INFO,
                "%s %zu variable%s from %s; %s (partial restore: %zu missing, %zu mismatched, %zu skipped)",
                init_rest ? "Restoring" : "Warm start: restoring", restored, restored == 1 ? "" : "s", path, rest,
                cairn_restore_report_count(sm->report, CAIRN_RESTORE_MISSING),
                cairn_restore_report_count(sm->report, CAIRN_RESTORE_MISMATCHED),
                cairn_restore_report_count(sm->report, CAIRN_RESTORE_SKIPPED));
  return CAIRN_OK;
}

/* 1 if `path` is a checkpoint that opens (its framing, index and metadata
 * are sound): a restore error from it is then about its content. */
static int checkpoint_opens(const cairn__dir *d, const char *path) {
  cairn_ckpt *c;
  if (cairn__ckpt_open_in(d, path, NULL, &c) != CAIRN_OK) return 0;
  cairn_ckpt_close(c);
  return 1;
}

/* 1 if restoring `path` failed with st because of the file itself: its
 * data failed its checksum, could not be decoded or is cut short, or the
 * file no longer opens (deleted, truncated). A variable missing from a
 * sound file, or one with another shape or dtype, is the model's fault
 * (a user's error): 0, as for running out of memory. */
static int file_at_fault(const cairn__dir *d, const char *path, cairn_status st) {
  if (st == CAIRN_E_CORRUPT || st == CAIRN_E_TRUNCATED || st == CAIRN_E_FORMAT) return 1;
  /* Written by a newer cairn (a newer format or a required feature this
     build lacks): an intact file, probably the job's newest state, so the
     walk back stops here rather than resume something older. */
  if (st == CAIRN_E_UNSUPPORTED) return 0;
  return st != CAIRN_E_NOMEM && !checkpoint_opens(d, path);
}

/* Step 1 of a restore from checkpoint_dir: the directory with a usable
 * state file, or one where a scan finds a checkpoint, waiting for one as
 * TF does (wait_for_checkpoint); the newest candidate in cur. *cd stays
 * NULL (and CAIRN_OK) when there is nothing to restore. The waiting
 * budget counts sleeps, not wall time, as TF's: it may overshoot
 * max_wait_secs by one recovery_wait_secs. */
static cairn_status find_checkpoint(cairn_session_manager *sm, const cairn_prepare_options *o,
                                    cairn_checkpoint_dir **cd, char *cur, size_t cur_len) {
  double wait_time = 0;
  *cd = NULL;
  cur[0] = '\0';
  for (;;) {
    cairn_checkpoint_dir *d = NULL;
    const cairn_checkpoint_state *state = NULL;
    cairn_status st = cairn__checkpoint_dir_open_as("latest_checkpoint", o->checkpoint_dir, NULL, &d);
    if (st == CAIRN_OK) {
      st = cairn_checkpoint_dir_state(d, &state);
    } else if (st != CAIRN_E_NOMEM) {
      /* no directory to open: the state file's own error, as it reads */
      cairn_checkpoint_state *none = NULL;
      st = cairn_checkpoint_state_read(o->checkpoint_dir, &none);
      cairn_checkpoint_state_free(none);
      if (st == CAIRN_OK) st = CAIRN_E_NOT_FOUND;
    }
    if (st == CAIRN_OK) {
      snprintf(cur, cur_len, "%s", cairn_checkpoint_state_model_path(state));
      *cd = d;
      return CAIRN_OK;
    }
    if (st == CAIRN_E_NOMEM) {
      cairn_checkpoint_dir_close(d);
      return sm_keep(sm, st);
    }
    /* A state file that is missing, unparsable or names nothing of the
     * directory, next to checkpoints: cairn restores the newest intact
     * checkpoint found by scanning the directory, with the WARNING the
     * lookup logs, as eval and ckpt-inspect do. TF's
     * get_checkpoint_state returns None here and the trainer silently
     * starts again from step 0 (missing) or fails (garbage); the next
     * save would then rotate a fresh run into the old one's files. */
    char *state_err = cairn__errmsg_hold();
    cairn_status ls = d ? cairn_checkpoint_dir_latest(d, cur, cur_len, NULL, 0, NULL) : CAIRN_E_NOT_FOUND;
    if (ls == CAIRN_OK) {
      free(state_err);
      *cd = d;
      return CAIRN_OK;
    }
    cairn_checkpoint_dir_close(d);
    cur[0] = '\0';
    cairn_status fs = CAIRN_OK;
    if (ls == CAIRN_E_UNSUPPORTED) /* never start afresh next to a newer cairn's checkpoint */
      fs = sm_fail(sm, ls, "%s", cairn__errmsg_copy());
    else if (st != CAIRN_E_NOT_FOUND) /* "Invalid checkpoint state" and nothing found by the scan */
      fs = sm_fail(sm, st, "%s (and no checkpoint found by scanning the directory)",
                   state_err ? state_err : "out of memory");
    free(state_err);
    if (fs != CAIRN_OK) return fs;
    if (!o->wait_for_checkpoint || wait_time >= o->max_wait_secs) return CAIRN_OK;
    cairn_env_log(sm->env, CAIRN_LOG_INFO, "Waiting for checkpoint to be available.");
    cairn_env_sleep(sm->env, sm->recovery_wait_secs);
    wait_time += sm->recovery_wait_secs;
  }
}

/* Step 2: restores the newest intact checkpoint, starting at cur.
 * cairn's way out of a TF trap: TF fails when the newest checkpoint is
 * unreadable (cut short, deleted, a flipped bit in its data), so a job
 * whose newest file was damaged cannot restart although the one before
 * is intact. When the file is at fault (file_at_fault), cairn warns,
 * asks the directory for the next intact candidate (which marks the bad
 * one corrupt for the rest of the process, so every later lookup, hooks'
 * and tools' included, skips it too), leaves it in place, and restores
 * that one instead, walking back as far as needed. A restore that fails
 * has changed nothing (the saver verifies every tensor before it writes
 * any), except when the file changed or failed after that verification:
 * the variables it wrote are then marked uninitialized and the older
 * checkpoint's restore writes them all again (doc/restore-memory.md).
 * Errors of the model (a variable missing, another shape) still
 * propagate. */
static cairn_status restore_newest_intact(cairn_session_manager *sm, const cairn_prepare_options *o,
                                          cairn_checkpoint_dir *cd, char *cur, size_t cur_len,
                                          cairn_saver_meta **meta) {
  static const char fn[] = "restore_checkpoint";
  char tried[2048] = "", next[4096];
  cairn_status first = CAIRN_OK, st;
  const cairn__dir *dd = cairn__checkpoint_dir_fd(cd);
  /* Found corrupt by an earlier restore of this process (a recovery, the
     next session): go straight to the checkpoint chosen then. */
  if (cairn_checkpoint_is_marked_corrupt(cur) &&
      cairn_checkpoint_dir_latest(cd, next, sizeof next, NULL, 0, NULL) == CAIRN_OK) {
    cairn_env_log(sm->env, CAIRN_LOG_INFO, "Skipping %s, found corrupt earlier in this process; restoring %s", cur,
                  next);
    snprintf(cur, cur_len, "%s", next);
  }
  for (int attempt = 0;; attempt++) {
    st = restore_file(sm, o->saver, dd, cur, o->restore, 1, meta);
    if (!st || !file_at_fault(dd, cur, st)) return st;
    char why[1024];
    snprintf(why, sizeof why, "%.1000s", sm->errmsg);
    if (!first) first = st;
    cairn__strbuf_append(tried, sizeof tried, "%s'%s': %.300s", tried[0] ? "; " : "", cur, why);
    cairn_status ls = cairn_checkpoint_dir_next_intact(cd, cur, why, next, sizeof next);
    if (ls == CAIRN_E_UNSUPPORTED) { /* the next older file was written by a newer cairn: stop there */
      return sm_fail(sm, ls, "%s: %.2047s (after skipping %s)", fn, cairn__errmsg_copy(), tried);
    }
    /* the comparison and the bound stop a walk that would not make progress */
    if (attempt >= 1000 || ls != CAIRN_OK || strcmp(next, cur) == 0)
      return sm_fail(sm, first,
                     "%s: no intact checkpoint in '%s' to restore: %s (the files are left in place; move them "
                     "away to start from scratch)",
                     fn, o->checkpoint_dir, tried);
    cairn_env_log(sm->env, CAIRN_LOG_WARN,
                  "Checkpoint %s is unusable (%s); restoring %s instead, the newest intact checkpoint (the "
                  "unusable file is left in place and skipped from now on)",
                  cur, why, next);
    snprintf(cur, cur_len, "%s", next);
  }
}

/* Step 3: the saver's rotation list, so that max_to_keep continues where
 * the last process left off; files marked corrupt stay out of it, so
 * rotation never deletes them. */
static cairn_status recover_rotation(cairn_session_manager *sm, cairn_saver *saver, cairn_checkpoint_dir *cd) {
  size_t n = cairn_checkpoint_dir_rotation_count(cd);
  const char **paths = n ? malloc(n * sizeof *paths) : NULL;
  if (n && !paths) return sm_fail(sm, CAIRN_E_NOMEM, "restore_checkpoint: cannot list %zu checkpoints", n);
  for (size_t i = 0; i < n; i++) paths[i] = cairn_checkpoint_dir_rotation_at(cd, i);
  cairn_status st = cairn_saver_recover_last_checkpoints(saver, paths, n);
  free(paths);
  return st ? sm_keep(sm, st) : CAIRN_OK;
}

/* The session restored from `path` with its metadata (taken over). */
static cairn_status mark_restored(cairn_session_manager *sm, cairn_session *s, const char *path,
                                  cairn_saver_meta *meta, int *restored) {
  cairn_status st = cairn__session_set_restored(s, path, meta);
  if (st) return sm_keep(sm, st);
  snprintf(sm->restored_from, sizeof sm->restored_from, "%.*s", (int)sizeof sm->restored_from - 1, path);
  *restored = 1;
  return CAIRN_OK;
}

/* TF's _restore_checkpoint: *out is always a new session on success. */
static cairn_status restore_checkpoint(cairn_session_manager *sm, const cairn_prepare_options *o,
                                       cairn_session **out, int *restored) {
  *restored = 0;
  sm->restored_from[0] = '\0';
  cairn_status st = cairn_session_new(sm->r, sm->session_flags, out);
  if (st) return sm_keep(sm, st);
  if (o->checkpoint_dir && o->checkpoint_filename_with_path)
    return sm_fail(sm, CAIRN_E_INVALID, "Can not provide both checkpoint_dir and checkpoint_filename_with_path.");
  if (!o->saver || (!o->checkpoint_dir && !o->checkpoint_filename_with_path)) return CAIRN_OK;

  cairn_saver_meta *meta = NULL;
  if (o->checkpoint_filename_with_path) {
    /* The file the caller named, or nothing: no fall back. */
    st = restore_file(sm, o->saver, NULL, o->checkpoint_filename_with_path, o->restore, 1, &meta);
    if (st) return st;
    return mark_restored(sm, *out, o->checkpoint_filename_with_path, meta, restored);
  }
  cairn_checkpoint_dir *cd = NULL;
  char cur[4096];
  if ((st = find_checkpoint(sm, o, &cd, cur, sizeof cur)) != CAIRN_OK || !cd) return st;
  st = restore_newest_intact(sm, o, cd, cur, sizeof cur, &meta);
  if (!st) st = recover_rotation(sm, o->saver, cd);
  if (!st) {
    st = mark_restored(sm, *out, cur, meta, restored);
    meta = NULL;
  }
  cairn_saver_meta_free(meta);
  cairn_checkpoint_dir_close(cd);
  return st;
}

/* ---- prepare_session ---------------------------------------------------------------------- */

static const char *op_label(const cairn_op *op) { return op ? cairn_op_name(op) : "None"; }

static const char *fn_label(const cairn_prepare_options *o) {
  if (!o->init_fn) return "None";
  return o->init_fn_name ? o->init_fn_name : "<init_fn>";
}

/* cairn's addition after TF's text: what to do about a model restored from
 * a checkpoint that does not cover every variable (a restore skips init_op
 * and init_fn, so the variables the checkpoint lacks stay uninitialized and
 * TF's message alone does not say why; doc/session-semantics.md, "Partial
 * restore and fine-tuning"). */
static void restored_hint(const cairn_session_manager *sm, char *buf, size_t cap) {
  buf[0] = '\0';
  if (!sm->restored_from[0]) return;
  snprintf(buf, cap,
           " [cairn: the model was restored from '%s', so init_op and init_fn did not run; variables that "
           "restore did not cover stay uninitialized. To restore some variables and initialize the rest, set "
           "the `restore` option (e.g. .lenient = 1) or warm-start with warm_start_path / init_fn]",
           sm->restored_from);
}

static cairn_status prepare(cairn_session_manager *sm, const cairn_prepare_options *o, cairn_session *s,
                            int restored) {
  cairn_status st;
  if (!restored) {
    if (!o->init_op && !o->init_fn && !sm->local_init_op)
      return sm_fail(sm, CAIRN_E_NOT_READY, "Model is not initialized and no init_op or init_fn or local_init_op "
                                            "was given");
    if (o->init_op) {
      st = cairn_session_run_op_feeds(s, o->init_op, o->init_feeds, o->n_init_feeds);
      if (st) return sm_keep_session(sm, s, st);
    }
    if (o->warm_start_path) {
      if (!o->saver)
        return sm_fail(sm, CAIRN_E_INVALID, "prepare_session: warm_start_path '%s' needs a saver",
                       o->warm_start_path);
      cairn_restore_options all;
      memset(&all, 0, sizeof all);
      st = restore_file(sm, o->saver, NULL, o->warm_start_path, o->warm_start ? o->warm_start : &all, 0, NULL);
      if (st) return st;
    }
    if (o->init_fn) {
      unsigned gen = cairn__session_errgen(s);
      st = o->init_fn(s, o->init_fn_user);
      if (st) {
        /* The message is the session's if init_fn used cairn_session_fail
           or a failing run; else the thread's. */
        const char *m = cairn__session_errgen(s) != gen ? cairn__session_errbuf(s) : cairn_errmsg();
        cairn__errbuf_keep(sm->errmsg, st, m);
        return cairn__fail(st, "%s", sm->errmsg);
      }
    }
  }
  int ok;
  st = local_init_watched(sm, o, s, restored, &ok);
  if (st) return st;
  char hint[1400];
  if (!ok) {
    restored_hint(sm, hint, sizeof hint);
    return sm_fail(sm, CAIRN_E_NOT_READY,
                   "Init operations did not make model ready for local_init.  Init op: %s, init fn: %s, error: "
                   "%s%s",
                   op_label(o->init_op), fn_label(o), sm->msg_local, hint);
  }
  int ready;
  st = check_ready(sm, s, sm->ready_op, &ready, sm->msg_ready);
  if (st) return st;
  if (!ready) {
    restored_hint(sm, hint, sizeof hint);
    return sm_fail(sm, CAIRN_E_NOT_READY,
                   "Init operations did not make model ready.  Init op: %s, init fn: %s, local_init_op: %s, "
                   "error: %s%s",
                   op_label(o->init_op), fn_label(o), op_label(sm->local_init_op), sm->msg_ready, hint);
  }
  return CAIRN_OK;
}

cairn_status cairn_session_manager_prepare_session(cairn_session_manager *sm, const cairn_prepare_options *opts,
                                                   cairn_session **out) {
  if (out) *out = NULL;
  if (!sm) return cairn__fail(CAIRN_E_NULL, "prepare_session: session manager is NULL");
  if (!opts || !out) return sm_fail(sm, CAIRN_E_NULL, "prepare_session: options or out is NULL");
  sm->errmsg[0] = '\0';
  cairn_session *s = NULL;
  int restored = 0;
  cairn_status st = restore_checkpoint(sm, opts, &s, &restored);
  if (!st && !restored) st = no_checkpoint(sm, opts, "prepare_session", "initializing");
  if (!st) st = prepare(sm, opts, s, restored);
  if (st) {
    cairn_session_free(s);
    return st;
  }
  *out = s;
  return CAIRN_OK;
}

/* ---- recover_session ------------------------------------------------------------------------- */

cairn_status cairn_session_manager_recover_session(cairn_session_manager *sm, const cairn_prepare_options *opts,
                                                   cairn_session **out, int *initialized) {
  if (out) *out = NULL;
  if (initialized) *initialized = 0;
  if (!sm) return cairn__fail(CAIRN_E_NULL, "recover_session: session manager is NULL");
  if (!opts || !out || !initialized)
    return sm_fail(sm, CAIRN_E_NULL, "recover_session: options, out or initialized is NULL");
  sm->errmsg[0] = '\0';
  cairn_session *s = NULL;
  int restored = 0, ok = 0, ready = 0;
  cairn_status st = restore_checkpoint(sm, opts, &s, &restored);
  if (!st && !restored)
    st = no_checkpoint(sm, opts, "recover_session", "the session is returned uninitialized");
  /* Always try local_init_op, even when nothing was restored. */
  if (!st) st = local_init_watched(sm, opts, s, restored, &ok);
  if (!st && restored) {
    if (!ok) {
      cairn_env_log(sm->env, CAIRN_LOG_INFO, "Restoring model from %s did not make model ready for local init: %s",
                    sm->restored_from, sm->msg_local);
    } else {
      st = check_ready(sm, s, sm->ready_op, &ready, sm->msg_ready);
      if (!st && !ready)
        cairn_env_log(sm->env, CAIRN_LOG_INFO, "Restoring model from %s did not make model ready: %s",
                      sm->restored_from, sm->msg_ready);
      if (!st && ready) {
        cairn_env_log(sm->env, CAIRN_LOG_INFO, "Restored model from %s", sm->restored_from);
        *initialized = 1;
      }
    }
  }
  if (st) {
    cairn_session_free(s);
    return st;
  }
  *out = s;
  return CAIRN_OK;
}

/* ---- wait_for_session ------------------------------------------------------------------------ */

cairn_status cairn_session_manager_wait_for_session(cairn_session_manager *sm, double max_wait_secs,
                                                    cairn_session **out) {
  if (out) *out = NULL;
  if (!sm) return cairn__fail(CAIRN_E_NULL, "wait_for_session: session manager is NULL");
  if (!out) return sm_fail(sm, CAIRN_E_NULL, "wait_for_session: out is NULL");
  if (isnan(max_wait_secs)) return sm_fail(sm, CAIRN_E_INVALID, "wait_for_session: max_wait_secs is NaN");
  sm->errmsg[0] = '\0';
  int unlimited = max_wait_secs < 0 || isinf(max_wait_secs);
  double start = cairn_env_now(sm->env);
  for (unsigned attempt = 1;; attempt++) {
    cairn_session *s;
    cairn_status st = cairn_session_new(sm->r, sm->session_flags, &s);
    if (st) return sm_keep(sm, st);
    int ok, ready = 0;
    sm->msg_ready[0] = '\0';
    st = try_local_init(sm, s, &ok);
    if (!st && ok) st = check_ready(sm, s, sm->ready_op, &ready, sm->msg_ready);
    if (st) {
      cairn_session_free(s);
      return st;
    }
    if (ok && ready) {
      *out = s;
      return CAIRN_OK;
    }
    cairn_session_free(s);
    const char *local = ok ? "None" : sm->msg_local;
    const char *rdy = ok ? sm->msg_ready : "None";
    if (!unlimited) {
      double remaining = max_wait_secs - (cairn_env_now(sm->env) - start);
      if (remaining - sm->recovery_wait_secs < 0)
        return sm_fail(sm, CAIRN_E_DEADLINE,
                       "Session was not ready after waiting %d secs. [cairn: %u attempts; last check: "
                       "ready_for_local_init_op: %s, ready: %s. A worker never initializes or restores GLOBAL "
                       "variables: the chief does (is the chief running and did it succeed?); variables a "
                       "worker initializes itself must be LOCAL]",
                       (int)max_wait_secs, attempt, local, rdy);
    }
    cairn_env_log(sm->env, CAIRN_LOG_INFO, "Waiting for model to be ready.  Ready_for_local_init_op:  %s, ready: %s",
                  local, rdy);
    cairn_env_sleep(sm->env, sm->recovery_wait_secs);
  }
}
