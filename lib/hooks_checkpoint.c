/* TF's CheckpointSaverHook with its CheckpointSaverListeners
 * (cairn/monitored.h; doc/session-semantics.md, "Built-in hooks"): a save
 * after every session creation, on its timer, and at end(), by the one
 * writer of the checkpoint directory (it holds the directory's lock). */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cairn/checkpoint_dir.h"
#include "cairn/monitored.h"
#include "cairn/saver.h"
#include "hook_impl.h"
#include "table.h"
#include "checkpoint_dir_impl.h" /* the directory's identity */

typedef struct ckpt_hook {
  char *dir;        /* checkpoint_dir as given: opened (and locked) once it exists */
  char *prefix;     /* dir/basename, for the log */
  char *prefix_dir; /* the directory the files go to: dir, or deeper with a basename "sub/name" */
  cairn_saver *saver;
  cairn_scaffold *scaffold;
  cairn_checkpoint_listener *listeners;
  size_t n_listeners;
  cairn_summary_writer *writer; /* &writer_copy or NULL */
  cairn_summary_writer writer_copy;
  const cairn_env *env;
  cairn_timer *timer;
  int64_t steps_per_run;
  /* The directory, open and locked from begin() (or the first save) to
     end(): its identity is checked before each save, and the saves go
     into it (cairn_saver_save_in). */
  cairn_checkpoint_dir *cdir;
  const char *base; /* the basename: the prefix relative to dir */
  int dirs_made;               /* this session's first save has run mkdir -p (it runs once) */
  char path[4096];
  /* asynchronous saves (cairn_saver_save_begin) */
  int async, skip_busy;
  int pending;           /* a save was begun and its commit not yet seen */
  int skipped;           /* the save of skipped_step was skipped (async_skip_busy): end() makes it */
  int64_t skipped_step;
  int64_t pending_step;
  cairn_saver *pending_saver;
  char pending_path[4096];
} ckpt_hook;

static const char ckpt_name[] = "CheckpointSaverHook";

/* One writer per directory: this hook writes into h->dir, so it holds the
 * directory's lock while its session lives, and clears the temporary files
 * a killed save of its prefix left there. A directory that does not exist
 * yet is locked as soon as it does: the first save creates it, then locks
 * it, then writes. */
static cairn_status ckpt_lock(ckpt_hook *h) {
  if (h->cdir) return CAIRN_OK;
  struct stat sb;
  if (stat(h->dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) return CAIRN_OK;
  cairn_checkpoint_dir_options o = cairn_checkpoint_dir_options_default();
  o.lock = 1;
  o.prefix = h->base;
  o.env = h->env;
  cairn_status st = cairn_checkpoint_dir_open(h->dir, &o, &h->cdir);
  if (st != CAIRN_OK) return st;
  size_t files;
  uint64_t bytes;
  cairn_checkpoint_dir_removed(h->cdir, &files, &bytes);
  if (files) {
    double b = (double)bytes;
    const char *unit = b >= 1e9 ? "GB" : b >= 1e6 ? "MB" : "kB";
    double scaled = b / (b >= 1e9 ? 1e9 : b >= 1e6 ? 1e6 : 1e3);
    cairn_env_log(h->env, CAIRN_LOG_INFO, "Removed %zu temporary file%s of unfinished saves (%.1f %s) from %s.",
                  files, files == 1 ? "" : "s", scaled, unit, h->dir);
  }
  return CAIRN_OK;
}

static void ckpt_unlock(ckpt_hook *h) {
  cairn_checkpoint_dir_close(h->cdir);
  h->cdir = NULL;
}

static void ckpt_destroy(void *self) {
  ckpt_hook *h = self;
  if (!h) return;
  ckpt_unlock(h);
  free(h->dir);
  free(h->prefix);
  free(h->prefix_dir);
  free(h->listeners);
  cairn_timer_free(h->timer);
  free(h);
}

/* Explicit saver > scaffold's saver > the single item of "savers". */
static cairn_status ckpt_saver(ckpt_hook *h, cairn_session *s, cairn_saver **out) {
  if (h->saver) {
    *out = h->saver;
    return CAIRN_OK;
  }
  if (h->scaffold && cairn_scaffold_saver(h->scaffold)) {
    *out = cairn_scaffold_saver(h->scaffold);
    return CAIRN_OK;
  }
  void *items[2];
  size_t n = cairn_registry_collection_get(cairn_session_registry(s), CAIRN_COLLECTION_SAVERS, items, 2);
  if (n == 0)
    return cairn__fail(CAIRN_E_STATE, "No items in collection savers. Please add a saver to the collection or "
                                      "provide a saver or scaffold.");
  if (n > 1)
    return cairn__fail(CAIRN_E_STATE, "More than one item in collection savers. Please indicate which one to use "
                                      "by passing it to the constructor.");
  *out = items[0];
  return CAIRN_OK;
}

/* What comes before a save: the directory, its lock, the log line and
   before_save of every listener (in the asynchronous case, on the
   training thread before phase 1 copies the state they set). */
static cairn_status ckpt_prologue(ckpt_hook *h, cairn_session *s, int64_t step, cairn_saver **saver) {
  cairn_status st = ckpt_saver(h, s, saver);
  if (st != CAIRN_OK) return st;
  /* The directory locked must still be the one at the path: removed or
     replaced, the lock guards nothing any more (a second trainer could
     lock what is there now), so the save fails and training stops. */
  if (h->cdir && (st = cairn__dir_guard_check(cairn__checkpoint_dir_guard(h->cdir), ckpt_name)) != CAIRN_OK)
    return st;
  /* TF's hook creates checkpoint_dir (its summary writer and graph writer
     call MakeDirs), so a first run into a new directory works; the Saver
     itself still refuses a missing parent, as TF's Saver.save does. Once
     per session, by its first save: a directory that vanishes later is
     never made again behind the lock's back. */
  if (!h->dirs_made) {
    if ((st = cairn__make_dirs(ckpt_name, h->prefix_dir)) != CAIRN_OK) return st;
    h->dirs_made = 1;
  }
  if ((st = ckpt_lock(h)) != CAIRN_OK) return st;
  if (!h->cdir) /* made once, gone before it could be locked */
    return cairn__fail(CAIRN_E_NOT_FOUND,
                       "%s: checkpoint directory '%s' was removed before its first save could lock it; not "
                       "re-creating it; training stops", ckpt_name, h->dir);
  cairn_env_log(h->env, CAIRN_LOG_INFO, "Saving checkpoints for %" PRId64 " into %s.", step, h->prefix);
  for (size_t i = 0; i < h->n_listeners; i++) {
    const cairn_checkpoint_listener *l = &h->listeners[i];
    if (l->before_save && (st = l->before_save(l->self, s, step)) != CAIRN_OK) return st;
  }
  return CAIRN_OK;
}

/* What comes once the checkpoint `path` of `step` is committed: a CHECKPOINT
   session log and after_save of every listener (all of them, even after
   one asked to stop). *stop = 1 if one did. */
/* TF's "Saving checkpoints for N" comes before the write; this line comes
   after the commit (for an asynchronous save, when the hook sees the
   background write finished), so that after a kill the log never claims a
   checkpoint that is not on disk. */
static void log_committed(ckpt_hook *h, cairn_saver *saver, int64_t step, const char *path) {
  if (cairn_saver_last_save_unchanged(saver))
    cairn_env_log(h->env, CAIRN_LOG_INFO, "%s already holds exactly these values: not rewritten.", path);
  else
    cairn_env_log(h->env, CAIRN_LOG_INFO, "Checkpoint for %" PRId64 " committed: %s", step, path);
}

static cairn_status ckpt_epilogue(ckpt_hook *h, cairn_session *s, cairn_saver *saver, int64_t step, const char *path,
                                  int *stop) {
  cairn_status st;
  log_committed(h, saver, step, path);
  /* TF logs the prefix as checkpoint_path; the file actually written is
     more useful and is what cairn logs. */
  if (h->writer && h->writer->session_log &&
      (st = h->writer->session_log(h->writer->self, CAIRN_SESSION_LOG_CHECKPOINT, path, step)) != CAIRN_OK)
    return st;
  for (size_t i = 0; i < h->n_listeners; i++) {
    const cairn_checkpoint_listener *l = &h->listeners[i];
    int want = 0;
    if (l->after_save && (st = l->after_save(l->self, s, step, &want)) != CAIRN_OK) return st;
    if (want) {
      cairn_env_log(h->env, CAIRN_LOG_INFO,
                    "A CheckpointSaverListener requested that training be stopped. listener: %zu", i);
      *stop = 1;
    }
  }
  return CAIRN_OK;
}

/* The asynchronous save begun last: when it is committed (wait: once it
   is), its epilogue; when it failed, its error (with the failed save's
   message). Nothing to do when none is pending or it is still written. */
static cairn_status ckpt_poll(ckpt_hook *h, cairn_session *s, int wait, int *stop) {
  *stop = 0;
  if (!h->pending) return CAIRN_OK;
  int busy = 0;
  cairn_status st = wait ? cairn_saver_save_wait(h->pending_saver) : cairn_saver_save_status(h->pending_saver, &busy);
  if (busy) return CAIRN_OK;
  h->pending = 0;
  if (st != CAIRN_OK) return st;
  if (!s) { /* no session to tell (closed after a failed recovery) */
    log_committed(h, h->pending_saver, h->pending_step, h->pending_path);
    return CAIRN_OK;
  }
  return ckpt_epilogue(h, s, h->pending_saver, h->pending_step, h->pending_path, stop);
}

/* A save of `step`: synchronous (cairn_saver_save, then the epilogue), or,
   with async and not `sync`, phase 1 now and the epilogue when a later
   poll sees the commit. *stop = 1 if a listener asked to stop. */
static cairn_status ckpt_save(ckpt_hook *h, cairn_session *s, int64_t step, int sync, int *stop) {
  *stop = 0;
  /* The save in flight first: at most one, and its listeners hear of it
     before those of the next. */
  int busy = 0, stop1 = 0;
  cairn_status st;
  if (h->pending && h->async && !sync && h->skip_busy) {
    if ((st = ckpt_poll(h, s, 0, &stop1)) != CAIRN_OK) return st;
    busy = h->pending;
  }
  if (busy) {
    cairn_env_log(h->env, CAIRN_LOG_INFO,
                  "Skipping the checkpoint of step %" PRId64 ": the save of step %" PRId64
                  " (%s) is still being written.",
                  step, h->pending_step, h->pending_path);
    h->skipped = 1;
    h->skipped_step = step;
    *stop = stop1;
    return CAIRN_OK;
  }
  int stop2 = 0;
  if ((st = ckpt_poll(h, s, 1, &stop2)) != CAIRN_OK) return st;
  stop2 |= stop1;
  cairn_saver *saver = NULL;
  if ((st = ckpt_prologue(h, s, step, &saver)) != CAIRN_OK) return st;
  h->skipped = 0;
  if (h->async && !sync) {
    if ((st = cairn_saver_save_begin_in(saver, h->cdir, h->base, step, h->pending_path, sizeof h->pending_path)) !=
        CAIRN_OK)
      return st;
    h->pending = 1;
    h->pending_step = step;
    h->pending_saver = saver;
    *stop = stop2;
    return CAIRN_OK;
  }
  if ((st = cairn_saver_save_in(saver, h->cdir, h->base, step, h->path, sizeof h->path)) != CAIRN_OK) return st;
  st = ckpt_epilogue(h, s, saver, step, h->path, stop);
  *stop |= stop2;
  return st;
}

static cairn_status ckpt_begin(void *self, cairn_registry *r) {
  ckpt_hook *h = self;
  cairn_status st = cairn__hook_need_global_step(r, ckpt_name);
  if (st != CAIRN_OK) return st;
  h->dirs_made = 0; /* a new session: its first save may create the directory */
  /* before the session is created: a second trainer refuses before it restores anything */
  if ((st = ckpt_lock(h)) != CAIRN_OK) return st;
  for (size_t i = 0; i < h->n_listeners; i++)
    if (h->listeners[i].begin && (st = h->listeners[i].begin(h->listeners[i].self)) != CAIRN_OK) return st;
  return CAIRN_OK;
}

/* A checkpoint right after the session is created (restored or
   initialized), before any training; the listeners' stop request of this
   save is ignored. TF also writes graph.pbtxt and the meta graph here;
   cairn has no graph to write. */
static cairn_status ckpt_after_create(void *self, cairn_session *s, cairn_coordinator *coord) {
  (void)coord;
  ckpt_hook *h = self;
  int64_t step;
  cairn_status st = cairn__hook_read_step(s, ckpt_name, &step);
  if (st != CAIRN_OK) return st;
  int stop;
  /* Synchronous even with async: a same-step conflict right after a
     restore is reported here, with its explanation, before training. */
  st = ckpt_save(h, s, step, 1, &stop);
  if (st == CAIRN_E_EXISTS) {
    /* Right after a restore, the model differs from the checkpoint of its
       own step: something changed the restored variables in between. The
       file on disk is the run's progress, so the Saver's generic remedies
       (remove it, replace_same_step) are left out: both destroy it. */
    char what[2048];
    snprintf(what, sizeof what, "%s", cairn__errmsg_copy());
    char *cut = strstr(what, "; refusing to replace it");
    if (cut) *cut = '\0';
    return cairn__fail(st,
                       "%s after session creation: %s. At step %" PRId64 " the session's variables differ from the "
                       "checkpoint of that step it was restored from: something changed them after the restore, "
                       "typically a local_init_op that loads pretrained weights (it runs after every restore; see "
                       "the WARNING logged above, if any). Load pretrained weights with the Scaffold's "
                       "warm_start_path / warm_start options or an init_fn instead: they run only while "
                       "checkpoint_dir holds no checkpoint. The checkpoint on disk is kept as it is: it holds the "
                       "run's trained values",
                       ckpt_name, what, step);
  }
  if (st != CAIRN_OK) return st;
  cairn_timer_update_last_triggered_step(h->timer, step, NULL, NULL);
  return CAIRN_OK;
}

/* An asynchronous save's commit or failure is seen at the next run, in
   before_run and after_run (a mutex and a flag when there is nothing). */
static cairn_status ckpt_poll_run(ckpt_hook *h, cairn_run_context *ctx) {
  int stop = 0;
  cairn_status st = ckpt_poll(h, cairn_run_context_session(ctx), 0, &stop);
  if (stop) cairn_run_context_request_stop(ctx);
  return st;
}

static cairn_status ckpt_before_run(void *self, cairn_run_context *ctx, cairn_run_request *req) {
  cairn_status st = ckpt_poll_run(self, ctx);
  if (st != CAIRN_OK) return st;
  return cairn__hook_fetch_step(self, ctx, req);
}

static cairn_status ckpt_after_run(void *self, cairn_run_context *ctx, const cairn_run_values *v) {
  ckpt_hook *h = self;
  int64_t stale;
  cairn_status st = ckpt_poll_run(h, ctx);
  if (st != CAIRN_OK) return st;
  st = cairn__hook_fetched_step(v, &stale);
  if (st != CAIRN_OK) return st;
  if (!cairn_timer_should_trigger_for_step(h->timer, stale + h->steps_per_run)) return CAIRN_OK;
  cairn_session *s = cairn_run_context_session(ctx);
  int64_t step;
  if ((st = cairn__hook_read_step(s, ckpt_name, &step)) != CAIRN_OK) return st;
  if (!cairn_timer_should_trigger_for_step(h->timer, step)) return CAIRN_OK;
  cairn_timer_update_last_triggered_step(h->timer, step, NULL, NULL);
  int stop;
  if ((st = ckpt_save(h, s, step, 0, &stop)) != CAIRN_OK) return st;
  if (stop) cairn_run_context_request_stop(ctx);
  return CAIRN_OK;
}

static cairn_status ckpt_end_saves(ckpt_hook *h, cairn_session *s) {
  int stop;
  /* Close waits for the save in flight and reports how it ended. */
  cairn_status st = ckpt_poll(h, s, 1, &stop);
  if (st != CAIRN_OK) return st;
  if (!s) return CAIRN_OK; /* no session left (closed after a failed recovery) */
  int64_t step, last;
  if ((st = cairn__hook_read_step(s, ckpt_name, &step)) != CAIRN_OK) return st;
  if (!cairn_timer_last_triggered_step(h->timer, &last) || last != step || (h->skipped && h->skipped_step == step)) {
    /* the last save: nothing is left to overlap it with */
    if ((st = ckpt_save(h, s, step, 1, &stop)) != CAIRN_OK) return st;
  }
  for (size_t i = 0; i < h->n_listeners; i++)
    if (h->listeners[i].end && (st = h->listeners[i].end(h->listeners[i].self, s, step)) != CAIRN_OK) return st;
  return CAIRN_OK;
}

/* The session's last save; the directory is free for the next trainer. */
static cairn_status ckpt_end(void *self, cairn_session *s) {
  ckpt_hook *h = self;
  cairn_status st = ckpt_end_saves(h, s);
  ckpt_unlock(h);
  return st;
}

static void ckpt_on_error(void *self, cairn_status why);
static const cairn_hook_vtable ckpt_vt = {
    .name = ckpt_name,
    .begin = ckpt_begin,
    .after_create_session = ckpt_after_create,
    .before_run = ckpt_before_run,
    .after_run = ckpt_after_run,
    .end = ckpt_end,
    .on_error = ckpt_on_error,
    .destroy = ckpt_destroy,
};

/* The session fails: the save in flight still completes (the lock is
   held until then); its own error, if any, is logged, not lost. */
static void ckpt_on_error(void *self, cairn_status why) {
  (void)why;
  ckpt_hook *h = self;
  if (h->pending) {
    h->pending = 0;
    if (cairn_saver_save_wait(h->pending_saver) != CAIRN_OK)
      cairn_env_log(h->env, CAIRN_LOG_ERROR, "%s", cairn_errmsg());
  }
  ckpt_unlock(h);
}

cairn_status cairn__checkpoint_hook_poll(cairn_hook *hook, cairn_session *s, int wait, int *request_stop) {
  *request_stop = 0;
  if (cairn__hook_vtable(hook) != &ckpt_vt) return CAIRN_OK;
  return ckpt_poll(cairn_hook_self(hook), s, wait, request_stop);
}



CAIRN__OPTIONS_DEFAULT(cairn_checkpoint_saver_hook_options)

/* The caller's listeners into dst[0..n): their array's stride is the
   struct_size of its first element (every element has the same), so an
   array built against an older header (smaller elements) is read right. */
static cairn_status copy_listeners(cairn_checkpoint_listener *dst, const cairn_checkpoint_listener *src, size_t n) {
  const char *at = (const char *)src;
  size_t stride = 0;
  for (size_t i = 0; i < n; i++) {
    size_t size;
    char what[40];
    snprintf(what, sizeof what, "listeners[%zu]", i);
    cairn_status st = cairn__table_copy(&dst[i], sizeof dst[i], at, offsetof(cairn_checkpoint_listener, struct_size),
                                        "hook_new_checkpoint_saver", what, "cairn_checkpoint_listener", &size);
    if (st != CAIRN_OK) return st;
    if (i == 0) stride = size;
    if (size != stride)
      return cairn__fail(CAIRN_E_INVALID,
                         "hook_new_checkpoint_saver: listeners[%zu].struct_size is %zu but listeners[0]'s is %zu: "
                         "every element of the array must have the same size",
                         i, size, stride);
    at += stride;
  }
  return CAIRN_OK;
}

/* The caller's options into *o; the deprecated name's field o->checkpoint_dir,
 * if set, must be the argument (doc/deprecated.md). */
static cairn_status ckpt_options(const char *dir, const cairn_checkpoint_saver_hook_options *opts,
                                 cairn_checkpoint_saver_hook_options *o) {
  static const char fn[] = "hook_new_checkpoint_saver";
  cairn_status st = CAIRN__OPTIONS_COPY(*o, opts, cairn_checkpoint_saver_hook_options, fn);
  if (st != CAIRN_OK) return st;
  if (o->checkpoint_dir && strcmp(o->checkpoint_dir, dir) != 0)
    return cairn__fail(CAIRN_E_INVALID,
                       "%s: checkpoint_dir is '%s' but o->checkpoint_dir is '%s'; that field is read only by the "
                       "deprecated cairn_checkpoint_saver_hook_new: leave it NULL",
                       fn, dir, o->checkpoint_dir);
  if (o->n_listeners && !o->listeners) return cairn__fail(CAIRN_E_NULL, "%s: listeners is NULL", fn);
  return CAIRN_OK;
}

cairn_status cairn_hook_new_checkpoint_saver(const char *checkpoint_dir,
                                             const cairn_checkpoint_saver_hook_options *opts, cairn_hook **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "hook_new_checkpoint_saver: out is NULL");
  *out = NULL;
  if (!checkpoint_dir) return cairn__fail(CAIRN_E_NULL, "hook_new_checkpoint_saver: checkpoint_dir is NULL");
  cairn_checkpoint_saver_hook_options oc;
  const cairn_checkpoint_saver_hook_options *o = &oc;
  cairn_status st = ckpt_options(checkpoint_dir, opts, &oc);
  if (st != CAIRN_OK) return st;
  if (o->saver && o->scaffold) return cairn__fail(CAIRN_E_INVALID, "You cannot provide both saver and scaffold.");
  cairn_timer *timer = NULL;
  if ((st = cairn_timer_new(o->save_secs, o->save_steps, o->env, &timer)) != CAIRN_OK) return st;
  ckpt_hook *h = calloc(1, sizeof *h);
  if (!h) {
    cairn_timer_free(timer);
    return cairn__fail(CAIRN_E_NOMEM, "hook_new_checkpoint_saver: out of memory");
  }
  h->timer = timer;
  h->saver = o->saver;
  h->scaffold = o->scaffold;
  h->env = o->env;
  h->steps_per_run = 1;
  h->async = o->async != 0;
  h->skip_busy = o->async_skip_busy != 0;
  const char *base = o->checkpoint_basename ? o->checkpoint_basename : "model.ckpt";
  size_t len = strlen(checkpoint_dir) + 1 + strlen(base) + 1;
  h->dir = cairn__strdup(checkpoint_dir);
  h->prefix = malloc(len);
  h->base = h->prefix ? h->prefix + strlen(checkpoint_dir) + 1 : NULL;
  if (o->n_listeners) h->listeners = malloc(o->n_listeners * sizeof *h->listeners);
  if (!h->dir || !h->prefix || (o->n_listeners && !h->listeners)) {
    ckpt_destroy(h);
    return cairn__fail(CAIRN_E_NOMEM, "hook_new_checkpoint_saver: out of memory");
  }
  snprintf(h->prefix, len, "%s/%s", checkpoint_dir, base);
  if (!(h->prefix_dir = cairn__path_dir(h->prefix))) {
    ckpt_destroy(h);
    return cairn__fail(CAIRN_E_NOMEM, "hook_new_checkpoint_saver: out of memory");
  }
  h->n_listeners = o->n_listeners;
  if ((st = cairn__summary_writer_copy(o->summary_writer, &h->writer_copy, &h->writer, "hook_new_checkpoint_saver")) !=
          CAIRN_OK ||
      (st = copy_listeners(h->listeners, o->listeners, o->n_listeners)) != CAIRN_OK) {
    ckpt_destroy(h);
    return st;
  }
  return cairn__hook_make(&ckpt_vt, h, ckpt_destroy, out);
}
