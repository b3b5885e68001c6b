/* Built-in hooks of TF's basic_session_run_hooks.py
 * (doc/session-semantics.md, "Built-in hooks"): StopAtStep,
 * CheckpointSaver (+ listeners), StepCounter, LoggingTensor, NanTensor,
 * SummarySaver, FinalOps, GlobalStepWaiter, FeedFn.
 *
 * The global step. Hooks fetch "global_step" in before_run: the session
 * resolves it to the value read *before* the run's ops (TF's cached read
 * tensor ordered before the increment), so it is stale by the run's own
 * increment. As in TF, a hook that decides something from it predicts
 * stale + 1 and, when the prediction says "act", re-reads the real value
 * (cairn_session_global_step) before acting.
 */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cairn/monitored.h"
#include "monitored_impl.h"

#define GLOBAL_STEP "global_step"

/* TF's begin(): "Global step should be created to use X." (RuntimeError).
   r NULL (custom creator without a registry): checked when the step is
   first read instead. */
static cairn_status need_global_step(cairn_registry *r, const char *hook) {
  if (!r) return CAIRN_OK;
  cairn_var *v = NULL;
  if (cairn_registry_find(r, GLOBAL_STEP, &v) != CAIRN_OK)
    return cairn__fail(CAIRN_E_STATE, "Global step should be created to use %s.", hook);
  const cairn_tensor *t = cairn_var_tensor(v);
  if (t->rank != 0 || (t->dtype != CAIRN_DTYPE_I64 && t->dtype != CAIRN_DTYPE_I32))
    return cairn__fail(CAIRN_E_DTYPE, "%s: the global step must be an integer scalar; 'global_step' is %s of rank %d",
                       hook, cairn_dtype_name(t->dtype), t->rank);
  return CAIRN_OK;
}

/* The real global step now. */
static cairn_status read_step(cairn_session *s, const char *hook, int64_t *step) {
  cairn_status st = cairn_session_global_step(s, step);
  if (st == CAIRN_E_NOT_FOUND) return cairn__fail(CAIRN_E_STATE, "Global step should be created to use %s.", hook);
  return st;
}

/* The stale step this hook fetched. */
static cairn_status fetched_step(const cairn_run_values *v, int64_t *step) {
  return cairn_run_values_i64(v, GLOBAL_STEP, step);
}

static cairn_status make_hook(const cairn_hook_vtable *vt, void *self, void (*destroy)(void *), cairn_hook **out) {
  cairn_status st = cairn_hook_new(vt, self, out);
  if (st != CAIRN_OK) destroy(self);
  return st;
}

/* ==== StopAtStepHook =============================================================== */

typedef struct stop_hook {
  int64_t num_steps;
  int64_t last_step;
  int have_last;
} stop_hook;

static const char stop_name[] = "StopAtStepHook";

static cairn_status stop_begin(void *self, cairn_registry *r) {
  (void)self;
  return need_global_step(r, stop_name);
}

static cairn_status stop_after_create(void *self, cairn_session *s, cairn_coordinator *coord) {
  (void)coord;
  stop_hook *h = self;
  if (h->have_last) return CAIRN_OK; /* computed once: not again on recovery */
  int64_t step;
  cairn_status st = read_step(s, stop_name, &step);
  if (st != CAIRN_OK) return st;
  /* step + num_steps, saturated: a huge num_steps means "never stop". */
  h->last_step = step > 0 && h->num_steps > INT64_MAX - step ? INT64_MAX : step + h->num_steps;
  h->have_last = 1;
  return CAIRN_OK;
}

static cairn_status stop_before_run(void *self, cairn_run_context *ctx, cairn_run_request *req) {
  (void)self;
  (void)ctx;
  return cairn_run_request_fetch(req, GLOBAL_STEP);
}

static cairn_status stop_after_run(void *self, cairn_run_context *ctx, const cairn_run_values *v) {
  stop_hook *h = self;
  int64_t stale;
  cairn_status st = fetched_step(v, &stale);
  if (st != CAIRN_OK) return st;
  if (!h->have_last) { /* driven without after_create_session */
    st = stop_after_create(self, cairn_run_context_session(ctx), NULL);
    if (st != CAIRN_OK) return st;
  }
  if (stale + 1 >= h->last_step) {
    /* The read was ordered before this run's increment: check the real one. */
    int64_t step;
    st = read_step(cairn_run_context_session(ctx), stop_name, &step);
    if (st != CAIRN_OK) return st;
    if (step >= h->last_step) cairn_run_context_request_stop(ctx);
  }
  return CAIRN_OK;
}

static const cairn_hook_vtable stop_vt = {stop_name, stop_begin, stop_after_create, stop_before_run,
                                          stop_after_run, NULL, NULL, free};

cairn_status cairn_stop_at_step_hook_new(int64_t num_steps, int64_t last_step, cairn_hook **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "stop_at_step_hook_new: out is NULL");
  *out = NULL;
  if (num_steps < 0 && last_step < 0) return cairn__fail(CAIRN_E_INVALID, "One of num_steps or last_step must be specified.");
  if (num_steps >= 0 && last_step >= 0)
    return cairn__fail(CAIRN_E_INVALID, "Only one of num_steps or last_step can be specified.");
  stop_hook *h = calloc(1, sizeof *h);
  if (!h) return cairn__fail(CAIRN_E_NOMEM, "stop_at_step_hook_new: out of memory");
  h->num_steps = num_steps;
  h->last_step = last_step;
  h->have_last = last_step >= 0;
  return make_hook(&stop_vt, h, free, out);
}

/* ==== CheckpointSaverHook ============================================================ */

typedef struct ckpt_hook {
  char *dir;
  char *prefix;     /* dir/basename */
  char *prefix_dir; /* the directory the files go to: dir, or deeper with a basename "sub/name" */
  cairn_saver *saver;
  cairn_scaffold *scaffold;
  cairn_checkpoint_listener *listeners;
  size_t n_listeners;
  cairn_summary_writer *writer;
  const cairn_env *env;
  cairn_timer *timer;
  int64_t steps_per_run;
  cairn_checkpoint_lock *lock; /* the directory's, from begin() (or the first save) to end() */
  char path[4096];
} ckpt_hook;

static const char ckpt_name[] = "CheckpointSaverHook";

/* One writer per directory: this hook writes into h->dir, so it holds the
 * directory's lock while its session lives, and clears the temporary files
 * a killed save left there. A directory that does not exist yet is locked
 * as soon as it does (around the first save, which may create it). */
static cairn_status ckpt_lock(ckpt_hook *h) {
  if (h->lock) return CAIRN_OK;
  struct stat sb;
  if (stat(h->dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) return CAIRN_OK;
  cairn_status st = cairn_checkpoint_lock_new(h->dir, &h->lock);
  if (st != CAIRN_OK) return st;
  size_t files;
  uint64_t bytes;
  cairn_checkpoint_lock_removed(h->lock, &files, &bytes);
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
  cairn_checkpoint_lock_free(h->lock);
  h->lock = NULL;
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

/* before_save of every listener; save; a CHECKPOINT session log;
   after_save of every listener (all of them, even after one asked to
   stop). *stop = 1 if one did. */
static cairn_status ckpt_save(ckpt_hook *h, cairn_session *s, int64_t step, int *stop) {
  *stop = 0;
  cairn_saver *saver = NULL;
  cairn_status st = ckpt_saver(h, s, &saver);
  if (st != CAIRN_OK) return st;
  /* TF's hook creates checkpoint_dir (its summary writer and graph writer
     call MakeDirs), so a first run into a new directory works; the Saver
     itself still refuses a missing parent, as TF's Saver.save does. Done at
     every save, a stat when the directory is there. */
  if ((st = cairn__make_dirs(ckpt_name, h->prefix_dir)) != CAIRN_OK) return st;
  if ((st = ckpt_lock(h)) != CAIRN_OK) return st;
  cairn_env_log(h->env, CAIRN_LOG_INFO, "Saving checkpoints for %" PRId64 " into %s.", step, h->prefix);
  for (size_t i = 0; i < h->n_listeners; i++) {
    const cairn_checkpoint_listener *l = &h->listeners[i];
    if (l->before_save && (st = l->before_save(l->self, s, step)) != CAIRN_OK) return st;
  }
  st = cairn_saver_save(saver, h->prefix, step, h->path, sizeof h->path);
  if (st != CAIRN_OK) return st;
  if ((st = ckpt_lock(h)) != CAIRN_OK) return st;
  if (cairn_saver_last_save_unchanged(saver))
    cairn_env_log(h->env, CAIRN_LOG_INFO, "%s already holds exactly these values: not rewritten.", h->path);
  /* TF logs the prefix as checkpoint_path; the file actually written is
     more useful and is what cairn logs. */
  if (h->writer && h->writer->session_log &&
      (st = h->writer->session_log(h->writer->self, CAIRN_SESSION_LOG_CHECKPOINT, h->path, step)) != CAIRN_OK)
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

static cairn_status ckpt_begin(void *self, cairn_registry *r) {
  ckpt_hook *h = self;
  cairn_status st = need_global_step(r, ckpt_name);
  if (st != CAIRN_OK) return st;
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
  cairn_status st = read_step(s, ckpt_name, &step);
  if (st != CAIRN_OK) return st;
  int stop;
  st = ckpt_save(h, s, step, &stop);
  if (st == CAIRN_E_EXISTS) {
    /* Right after a restore, the model differs from the checkpoint of its
       own step: something changed the restored variables in between. */
    char why[CAIRN__ERRMSG_LEN];
    snprintf(why, sizeof why, "%s", cairn_errmsg());
    return cairn__fail(st,
                       "%s after session creation: %s [cairn: at step %" PRId64 " the session's variables differ "
                       "from the checkpoint of that step: something changed them after the restore, typically a "
                       "local_init_op that loads pretrained weights (see the WARNING logged above, if any)]",
                       ckpt_name, why, step);
  }
  if (st != CAIRN_OK) return st;
  cairn_timer_update_last_triggered_step(h->timer, step, NULL, NULL);
  return CAIRN_OK;
}

static cairn_status ckpt_before_run(void *self, cairn_run_context *ctx, cairn_run_request *req) {
  (void)self;
  (void)ctx;
  return cairn_run_request_fetch(req, GLOBAL_STEP);
}

static cairn_status ckpt_after_run(void *self, cairn_run_context *ctx, const cairn_run_values *v) {
  ckpt_hook *h = self;
  int64_t stale;
  cairn_status st = fetched_step(v, &stale);
  if (st != CAIRN_OK) return st;
  if (!cairn_timer_should_trigger_for_step(h->timer, stale + h->steps_per_run)) return CAIRN_OK;
  cairn_session *s = cairn_run_context_session(ctx);
  int64_t step;
  if ((st = read_step(s, ckpt_name, &step)) != CAIRN_OK) return st;
  if (!cairn_timer_should_trigger_for_step(h->timer, step)) return CAIRN_OK;
  cairn_timer_update_last_triggered_step(h->timer, step, NULL, NULL);
  int stop;
  if ((st = ckpt_save(h, s, step, &stop)) != CAIRN_OK) return st;
  if (stop) cairn_run_context_request_stop(ctx);
  return CAIRN_OK;
}

static cairn_status ckpt_end_saves(ckpt_hook *h, cairn_session *s) {
  if (!s) return CAIRN_OK; /* no session left (closed after a failed recovery) */
  int64_t step, last;
  cairn_status st = read_step(s, ckpt_name, &step);
  if (st != CAIRN_OK) return st;
  if (!cairn_timer_last_triggered_step(h->timer, &last) || last != step) {
    int stop;
    if ((st = ckpt_save(h, s, step, &stop)) != CAIRN_OK) return st;
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

static void ckpt_on_error(void *self, cairn_status why) {
  (void)why;
  ckpt_unlock(self);
}

static const cairn_hook_vtable ckpt_vt = {ckpt_name, ckpt_begin, ckpt_after_create, ckpt_before_run,
                                          ckpt_after_run, ckpt_end, ckpt_on_error, ckpt_destroy};

cairn_checkpoint_saver_hook_options cairn_checkpoint_saver_hook_options_default(void) {
  cairn_checkpoint_saver_hook_options o;
  memset(&o, 0, sizeof o);
  return o;
}

cairn_status cairn_checkpoint_saver_hook_new(const cairn_checkpoint_saver_hook_options *o, cairn_hook **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "checkpoint_saver_hook_new: out is NULL");
  *out = NULL;
  if (!o || !o->checkpoint_dir)
    return cairn__fail(CAIRN_E_NULL, "checkpoint_saver_hook_new: %s is NULL", o ? "checkpoint_dir" : "options");
  if (o->n_listeners && !o->listeners) return cairn__fail(CAIRN_E_NULL, "checkpoint_saver_hook_new: listeners is NULL");
  if (o->saver && o->scaffold) return cairn__fail(CAIRN_E_INVALID, "You cannot provide both saver and scaffold.");
  cairn_timer *timer = NULL;
  cairn_status st = cairn_timer_new(o->save_secs, o->save_steps, o->env, &timer);
  if (st != CAIRN_OK) return st;
  ckpt_hook *h = calloc(1, sizeof *h);
  if (!h) {
    cairn_timer_free(timer);
    return cairn__fail(CAIRN_E_NOMEM, "checkpoint_saver_hook_new: out of memory");
  }
  h->timer = timer;
  h->saver = o->saver;
  h->scaffold = o->scaffold;
  h->writer = o->summary_writer;
  h->env = o->env;
  h->steps_per_run = 1;
  const char *base = o->checkpoint_basename ? o->checkpoint_basename : "model.ckpt";
  size_t len = strlen(o->checkpoint_dir) + 1 + strlen(base) + 1;
  h->dir = cairn__strdup(o->checkpoint_dir);
  h->prefix = malloc(len);
  if (o->n_listeners) h->listeners = malloc(o->n_listeners * sizeof *h->listeners);
  if (!h->dir || !h->prefix || (o->n_listeners && !h->listeners)) {
    ckpt_destroy(h);
    return cairn__fail(CAIRN_E_NOMEM, "checkpoint_saver_hook_new: out of memory");
  }
  snprintf(h->prefix, len, "%s/%s", o->checkpoint_dir, base);
  if (!(h->prefix_dir = cairn__path_dir(h->prefix))) {
    ckpt_destroy(h);
    return cairn__fail(CAIRN_E_NOMEM, "checkpoint_saver_hook_new: out of memory");
  }
  if (o->n_listeners) memcpy(h->listeners, o->listeners, o->n_listeners * sizeof *h->listeners);
  h->n_listeners = o->n_listeners;
  return make_hook(&ckpt_vt, h, ckpt_destroy, out);
}

/* ==== StepCounterHook ================================================================== */

typedef struct counter_hook {
  cairn_timer *timer;
  cairn_summary_writer *writer;
  const cairn_env *env;
  int64_t steps_per_run;
  int have_last;
  int64_t last_global_step;
  int warnings;
} counter_hook;

static const char counter_name[] = "StepCounterHook";
#define COUNTER_TAG "global_step/sec"

static void counter_destroy(void *self) {
  counter_hook *h = self;
  if (!h) return;
  cairn_timer_free(h->timer);
  free(h);
}

static cairn_status counter_begin(void *self, cairn_registry *r) {
  (void)self;
  return need_global_step(r, counter_name);
}

static cairn_status counter_after_create(void *self, cairn_session *s, cairn_coordinator *coord) {
  (void)s;
  (void)coord;
  counter_hook *h = self;
  h->have_last = 0;
  return CAIRN_OK;
}

static cairn_status counter_before_run(void *self, cairn_run_context *ctx, cairn_run_request *req) {
  (void)self;
  (void)ctx;
  return cairn_run_request_fetch(req, GLOBAL_STEP);
}

static cairn_status counter_after_run(void *self, cairn_run_context *ctx, const cairn_run_values *v) {
  counter_hook *h = self;
  int64_t stale;
  cairn_status st = fetched_step(v, &stale);
  if (st != CAIRN_OK) return st;
  if (cairn_timer_should_trigger_for_step(h->timer, stale + h->steps_per_run)) {
    int64_t step;
    if ((st = read_step(cairn_run_context_session(ctx), counter_name, &step)) != CAIRN_OK) return st;
    if (cairn_timer_should_trigger_for_step(h->timer, step)) {
      double secs = 0;
      int64_t steps = 0;
      /* The first trigger only records the baseline. */
      if (cairn_timer_update_last_triggered_step(h->timer, step, &secs, &steps)) {
        if (secs > 0) {
          double rate = (double)steps / secs;
          if (h->writer && h->writer->scalar &&
              (st = h->writer->scalar(h->writer->self, COUNTER_TAG, rate, step)) != CAIRN_OK)
            return st;
          cairn_env_log(h->env, CAIRN_LOG_INFO, "%s: %g", COUNTER_TAG, rate);
        } else {
          cairn_env_log(h->env, CAIRN_LOG_WARN, "%s: no time elapsed over %" PRId64 " steps; nothing recorded",
                        COUNTER_TAG, steps);
        }
      }
    }
  }
  if (h->have_last && stale == h->last_global_step && h->warnings < 5) {
    h->warnings++;
    cairn_env_log(h->env, CAIRN_LOG_WARN,
                  "It seems that global step has not been increased. Current value (could be stable): %" PRId64
                  " vs previous value: %" PRId64
                  ". You could increase the global step in your train op (cairn_mlp_train_step does).",
                  stale, h->last_global_step);
  }
  h->last_global_step = stale;
  h->have_last = 1;
  return CAIRN_OK;
}

static const cairn_hook_vtable counter_vt = {counter_name, counter_begin, counter_after_create, counter_before_run,
                                             counter_after_run, NULL, NULL, counter_destroy};

cairn_status cairn_step_counter_hook_new(int64_t every_n_steps, double every_n_secs, cairn_summary_writer *writer,
                                         const cairn_env *env, cairn_hook **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "step_counter_hook_new: out is NULL");
  *out = NULL;
  if ((every_n_steps > 0) == (every_n_secs > 0))
    return cairn__fail(CAIRN_E_INVALID, "exactly one of every_n_steps and every_n_secs should be provided.");
  counter_hook *h = calloc(1, sizeof *h);
  if (!h) return cairn__fail(CAIRN_E_NOMEM, "step_counter_hook_new: out of memory");
  cairn_status st = cairn_timer_new(every_n_secs, every_n_steps, env, &h->timer);
  if (st != CAIRN_OK) {
    free(h);
    return st;
  }
  h->writer = writer;
  h->env = env;
  h->steps_per_run = 1;
  return make_hook(&counter_vt, h, counter_destroy, out);
}

/* ==== LoggingTensorHook ================================================================== */

typedef struct logging_hook {
  char **names;
  size_t n_names;
  cairn_timer *timer; /* NULL: never triggers (at_end only) */
  int at_end;
  cairn_logging_formatter formatter;
  void *formatter_ctx;
  const cairn_env *env;
  int64_t iter;
  int should_trigger;
  cairn_value *values;
  cairn_fetch *fetches;
  char line[4096];
} logging_hook;

static const char logging_name[] = "LoggingTensorHook";

static void logging_destroy(void *self) {
  logging_hook *h = self;
  if (!h) return;
  for (size_t i = 0; i < h->n_names; i++) free(h->names[i]);
  free(h->names);
  free(h->values);
  free(h->fetches);
  cairn_timer_free(h->timer);
  free(h);
}

/* A value as text: scalars with %g (integers exactly), tensors as
   "[a, b, c, ...]" (at most 10 elements). */
static size_t format_value(const cairn_value *v, char *buf, size_t len) {
  switch (v->kind) {
    case CAIRN_VALUE_F64: return (size_t)snprintf(buf, len, "%g", v->f64);
    case CAIRN_VALUE_I64: return (size_t)snprintf(buf, len, "%" PRId64, v->i64);
    case CAIRN_VALUE_TENSOR: {
      const cairn_tensor *t = v->tensor;
      size_t k = 0;
      if (!t) return (size_t)snprintf(buf, len, "None");
      int scalar = t->rank == 0;
      if (!scalar) k += (size_t)snprintf(buf, len, "[");
      for (int64_t i = 0; i < t->size && i < 10; i++) {
        double d;
        if (!cairn__tensor_get_f64(t, i, &d)) return k + (size_t)snprintf(buf + (k < len ? k : len), k < len ? len - k : 0, "<%s>", cairn_dtype_name(t->dtype));
        k += (size_t)snprintf(buf + (k < len ? k : len), k < len ? len - k : 0, "%s%g", i ? ", " : "", d);
      }
      if (!scalar)
        k += (size_t)snprintf(buf + (k < len ? k : len), k < len ? len - k : 0, "%s]", t->size > 10 ? ", ..." : "");
      return k;
    }
    default: return (size_t)snprintf(buf, len, "None");
  }
}

static void logging_log(logging_hook *h, int with_elapsed) {
  double secs = 0;
  int had = 0;
  if (h->timer) had = cairn_timer_update_last_triggered_step(h->timer, h->iter, &secs, NULL);
  if (h->formatter) {
    h->formatter(h->formatter_ctx, (const char *const *)h->names, h->values, h->n_names, h->line, sizeof h->line);
    cairn_env_log(h->env, CAIRN_LOG_INFO, "%s", h->line);
    return;
  }
  size_t k = 0, len = sizeof h->line;
  h->line[0] = '\0';
  for (size_t i = 0; i < h->n_names && k < len; i++) {
    k += (size_t)snprintf(h->line + k, len - k, "%s%s = ", i ? ", " : "", h->names[i]);
    if (k < len) k += format_value(&h->values[i], h->line + k, len - k);
  }
  if (had && with_elapsed)
    cairn_env_log(h->env, CAIRN_LOG_INFO, "%s (%.3f sec)", h->line, secs);
  else
    cairn_env_log(h->env, CAIRN_LOG_INFO, "%s", h->line);
}

static cairn_status logging_begin(void *self, cairn_registry *r) {
  (void)r;
  logging_hook *h = self;
  cairn_timer_reset(h->timer);
  h->iter = 0;
  return CAIRN_OK;
}

static cairn_status logging_before_run(void *self, cairn_run_context *ctx, cairn_run_request *req) {
  (void)ctx;
  logging_hook *h = self;
  h->should_trigger = h->timer && cairn_timer_should_trigger_for_step(h->timer, h->iter);
  if (!h->should_trigger) return CAIRN_OK;
  for (size_t i = 0; i < h->n_names; i++) {
    cairn_status st = cairn_run_request_fetch(req, h->names[i]);
    if (st != CAIRN_OK) return st;
  }
  return CAIRN_OK;
}

static cairn_status logging_after_run(void *self, cairn_run_context *ctx, const cairn_run_values *v) {
  (void)ctx;
  logging_hook *h = self;
  if (h->should_trigger) {
    for (size_t i = 0; i < h->n_names; i++) {
      cairn_status st = cairn_run_values_get(v, h->names[i], &h->values[i]);
      if (st != CAIRN_OK) return st;
    }
    logging_log(h, 1);
  }
  h->iter++;
  return CAIRN_OK;
}

static cairn_status logging_end(void *self, cairn_session *s) {
  logging_hook *h = self;
  if (!h->at_end || !s) return CAIRN_OK;
  for (size_t i = 0; i < h->n_names; i++) h->fetches[i].name = h->names[i];
  cairn_run_args a;
  memset(&a, 0, sizeof a);
  a.fetches = h->fetches;
  a.n_fetches = h->n_names;
  cairn_status st = cairn_session_run(s, &a);
  if (st != CAIRN_OK) return st;
  for (size_t i = 0; i < h->n_names; i++) h->values[i] = h->fetches[i].value;
  logging_log(h, 1);
  return CAIRN_OK;
}

static const cairn_hook_vtable logging_vt = {logging_name, logging_begin, NULL, logging_before_run,
                                             logging_after_run, logging_end, NULL, logging_destroy};

cairn_logging_tensor_hook_options cairn_logging_tensor_hook_options_default(void) {
  cairn_logging_tensor_hook_options o;
  memset(&o, 0, sizeof o);
  return o;
}

cairn_status cairn_logging_tensor_hook_new(const cairn_logging_tensor_hook_options *o, cairn_hook **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "logging_tensor_hook_new: out is NULL");
  *out = NULL;
  if (!o) return cairn__fail(CAIRN_E_NULL, "logging_tensor_hook_new: options are NULL");
  if (o->n_names && !o->names) return cairn__fail(CAIRN_E_NULL, "logging_tensor_hook_new: names is NULL");
  int has_iter = o->every_n_iter != 0, has_secs = o->every_n_secs > 0;
  int only_at_end = o->at_end && !has_iter && !has_secs;
  if (!only_at_end && has_iter == has_secs)
    return cairn__fail(CAIRN_E_INVALID,
                       "either at_end and/or exactly one of every_n_iter and every_n_secs must be provided.");
  if (has_iter && o->every_n_iter <= 0)
    return cairn__fail(CAIRN_E_INVALID, "invalid every_n_iter=%" PRId64 ".", o->every_n_iter);
  logging_hook *h = calloc(1, sizeof *h);
  if (!h) return cairn__fail(CAIRN_E_NOMEM, "logging_tensor_hook_new: out of memory");
  cairn_status st = CAIRN_OK;
  if (!only_at_end) st = cairn_timer_new(o->every_n_secs, has_iter ? o->every_n_iter : 0, o->env, &h->timer);
  if (st != CAIRN_OK) {
    free(h);
    return st;
  }
  h->at_end = o->at_end;
  h->formatter = o->formatter;
  h->formatter_ctx = o->formatter_ctx;
  h->env = o->env;
  size_t n = o->n_names ? o->n_names : 1;
  h->names = calloc(n, sizeof *h->names);
  h->values = calloc(n, sizeof *h->values);
  h->fetches = calloc(n, sizeof *h->fetches);
  if (!h->names || !h->values || !h->fetches) {
    logging_destroy(h);
    return cairn__fail(CAIRN_E_NOMEM, "logging_tensor_hook_new: out of memory");
  }
  for (size_t i = 0; i < o->n_names; i++) {
    if (!o->names[i]) {
      logging_destroy(h);
      return cairn__fail(CAIRN_E_NULL, "logging_tensor_hook_new: names[%zu] is NULL", i);
    }
    if (!(h->names[i] = cairn__strdup(o->names[i]))) {
      logging_destroy(h);
      return cairn__fail(CAIRN_E_NOMEM, "logging_tensor_hook_new: out of memory");
    }
    h->n_names = i + 1;
  }
  return make_hook(&logging_vt, h, logging_destroy, out);
}

/* ==== NanTensorHook ======================================================================== */

typedef struct nan_hook {
  char *loss;
  int fail;
} nan_hook;

static const char nan_name[] = "NanTensorHook";

static void nan_destroy(void *self) {
  nan_hook *h = self;
  if (!h) return;
  free(h->loss);
  free(h);
}

static cairn_status nan_before_run(void *self, cairn_run_context *ctx, cairn_run_request *req) {
  (void)ctx;
  return cairn_run_request_fetch(req, ((nan_hook *)self)->loss);
}

static cairn_status nan_after_run(void *self, cairn_run_context *ctx, const cairn_run_values *v) {
  nan_hook *h = self;
  double loss;
  cairn_status st = cairn_run_values_f64(v, h->loss, &loss);
  if (st != CAIRN_OK) return st;
  if (!isnan(loss)) return CAIRN_OK; /* Inf is not checked (TF) */
  if (h->fail) {
    cairn_env_log(NULL, CAIRN_LOG_ERROR, "Model diverged with loss = NaN.");
    return cairn__fail(CAIRN_E_NAN_LOSS, "NaN loss during training.");
  }
  cairn_env_log(NULL, CAIRN_LOG_WARN, "Model diverged with loss = NaN.");
  cairn_run_context_request_stop(ctx);
  return CAIRN_OK;
}

static const cairn_hook_vtable nan_vt = {nan_name, NULL, NULL, nan_before_run, nan_after_run, NULL, NULL, nan_destroy};

cairn_status cairn_nan_tensor_hook_new(const char *loss_name, int fail_on_nan_loss, cairn_hook **out) {
  if (!out || !loss_name) return cairn__fail(CAIRN_E_NULL, "nan_tensor_hook_new: %s is NULL", out ? "loss_name" : "out");
  *out = NULL;
  nan_hook *h = calloc(1, sizeof *h);
  if (!h || !(h->loss = cairn__strdup(loss_name))) {
    free(h);
    return cairn__fail(CAIRN_E_NOMEM, "nan_tensor_hook_new: out of memory");
  }
  h->fail = fail_on_nan_loss != 0;
  return make_hook(&nan_vt, h, nan_destroy, out);
}

/* ==== SummarySaverHook ==================================================================== */

typedef struct summary_hook {
  cairn_timer *timer;
  cairn_summary_writer *writer;
  cairn_scaffold *scaffold;
  cairn_op *summary_op; /* referenced */
  int have_next;
  int64_t next_step;
  int request;
} summary_hook;

static const char summary_name[] = "SummarySaverHook";

static void summary_destroy(void *self) {
  summary_hook *h = self;
  if (!h) return;
  cairn_timer_free(h->timer);
  cairn_op_free(h->summary_op);
  free(h);
}

static cairn_op *summary_op_of(const summary_hook *h) {
  return h->summary_op ? h->summary_op : h->scaffold ? cairn_scaffold_summary_op(h->scaffold) : NULL;
}

static cairn_status summary_begin(void *self, cairn_registry *r) {
  summary_hook *h = self;
  h->have_next = 0;
  return need_global_step(r, summary_name);
}

static cairn_status summary_before_run(void *self, cairn_run_context *ctx, cairn_run_request *req) {
  (void)ctx;
  summary_hook *h = self;
  /* No writer: TF's after_run returns at once; cairn also skips running
     the summary op for nothing. */
  if (!h->writer) return CAIRN_OK;
  h->request = !h->have_next || cairn_timer_should_trigger_for_step(h->timer, h->next_step);
  cairn_status st = cairn_run_request_fetch(req, GLOBAL_STEP);
  if (st != CAIRN_OK) return st;
  cairn_op *op = summary_op_of(h);
  if (h->request && op) {
    if ((st = cairn_run_request_op(req, op)) != CAIRN_OK) return st;
    if ((st = cairn_run_request_summaries(req)) != CAIRN_OK) return st;
  }
  return CAIRN_OK;
}

static cairn_status summary_after_run(void *self, cairn_run_context *ctx, const cairn_run_values *v) {
  summary_hook *h = self;
  if (!h->writer) return CAIRN_OK;
  int64_t step;
  cairn_status st = fetched_step(v, &step);
  if (st != CAIRN_OK) return st;
  step += 1;
  if (!h->have_next || h->request)
    if ((st = read_step(cairn_run_context_session(ctx), summary_name, &step)) != CAIRN_OK) return st;
  if (!h->have_next && h->writer->session_log &&
      (st = h->writer->session_log(h->writer->self, CAIRN_SESSION_LOG_START, NULL, step)) != CAIRN_OK)
    return st;
  if (h->request) {
    cairn_timer_update_last_triggered_step(h->timer, step, NULL, NULL);
    size_t n = cairn_run_values_summary_count(v);
    for (size_t i = 0; i < n && h->writer->scalar; i++) {
      const char *tag;
      double value;
      if ((st = cairn_run_values_summary_at(v, i, &tag, &value)) != CAIRN_OK) return st;
      if ((st = h->writer->scalar(h->writer->self, tag, value, step)) != CAIRN_OK) return st;
    }
  }
  h->next_step = step + 1;
  h->have_next = 1;
  return CAIRN_OK;
}

static cairn_status summary_end(void *self, cairn_session *s) {
  (void)s;
  summary_hook *h = self;
  if (h->writer && h->writer->flush) return h->writer->flush(h->writer->self);
  return CAIRN_OK;
}

static const cairn_hook_vtable summary_vt = {summary_name, summary_begin, NULL, summary_before_run,
                                             summary_after_run, summary_end, NULL, summary_destroy};

cairn_summary_saver_hook_options cairn_summary_saver_hook_options_default(void) {
  cairn_summary_saver_hook_options o;
  memset(&o, 0, sizeof o);
  return o;
}

cairn_status cairn_summary_saver_hook_new(const cairn_summary_saver_hook_options *o, cairn_hook **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "summary_saver_hook_new: out is NULL");
  *out = NULL;
  if (!o) return cairn__fail(CAIRN_E_NULL, "summary_saver_hook_new: options are NULL");
  if ((o->scaffold == NULL) == (o->summary_op == NULL))
    return cairn__fail(CAIRN_E_INVALID, "Exactly one of scaffold or summary_op must be provided.");
  summary_hook *h = calloc(1, sizeof *h);
  if (!h) return cairn__fail(CAIRN_E_NOMEM, "summary_saver_hook_new: out of memory");
  cairn_status st = cairn_timer_new(o->save_secs, o->save_steps, o->env, &h->timer);
  if (st != CAIRN_OK) {
    free(h);
    return st;
  }
  h->writer = o->writer;
  h->scaffold = o->scaffold;
  h->summary_op = o->summary_op ? cairn_op_ref(o->summary_op) : NULL;
  return make_hook(&summary_vt, h, summary_destroy, out);
}

/* ==== FinalOpsHook ======================================================================= */

typedef struct final_hook {
  cairn_op *op;
  char **names;
  size_t n_names;
  cairn_feed *feeds;
  size_t n_feeds;
  cairn_fetch *fetches;
  int have_values;
} final_hook;

static const char final_name[] = "FinalOpsHook";

static void final_destroy(void *self) {
  final_hook *h = self;
  if (!h) return;
  cairn_op_free(h->op);
  for (size_t i = 0; i < h->n_names; i++) free(h->names[i]);
  for (size_t i = 0; i < h->n_feeds; i++) free((char *)h->feeds[i].name);
  free(h->names);
  free(h->feeds);
  free(h->fetches);
  free(h);
}

static cairn_status final_end(void *self, cairn_session *s) {
  final_hook *h = self;
  if (!s) return CAIRN_OK;
  const cairn_op *ops[1] = {h->op};
  cairn_run_args a;
  memset(&a, 0, sizeof a);
  a.ops = ops;
  a.n_ops = h->op ? 1 : 0;
  a.feeds = h->feeds;
  a.n_feeds = h->n_feeds;
  for (size_t i = 0; i < h->n_names; i++) h->fetches[i].name = h->names[i];
  a.fetches = h->fetches;
  a.n_fetches = h->n_names;
  cairn_status st = cairn_session_run(s, &a);
  if (st == CAIRN_E_OUT_OF_RANGE) {
    char why[CAIRN__ERRMSG_LEN];
    snprintf(why, sizeof why, "%s", cairn_errmsg());
    cairn_env_log(NULL, CAIRN_LOG_WARN,
                  "An OutOfRangeError or StopIteration exception is raised by the code in FinalOpsHook. This "
                  "typically means the Ops running by the FinalOpsHook have a dependency back to some input "
                  "source, which should not happen. For example, a metric's value op should only read "
                  "variables, not another batch from the input. Please fix that.");
    return cairn__fail(st, "%s", why);
  }
  if (st != CAIRN_OK) return st;
  h->have_values = 1;
  return CAIRN_OK;
}

static const cairn_hook_vtable final_vt = {final_name, NULL, NULL, NULL, NULL, final_end, NULL, final_destroy};

cairn_status cairn_final_ops_hook_new(cairn_op *final_op, const char *const *names, size_t n_names,
                                      const cairn_feed *feeds, size_t n_feeds, cairn_hook **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "final_ops_hook_new: out is NULL");
  *out = NULL;
  if ((n_names && !names) || (n_feeds && !feeds))
    return cairn__fail(CAIRN_E_NULL, "final_ops_hook_new: %s is NULL", n_names && !names ? "names" : "feeds");
  final_hook *h = calloc(1, sizeof *h);
  if (!h) return cairn__fail(CAIRN_E_NOMEM, "final_ops_hook_new: out of memory");
  h->names = calloc(n_names ? n_names : 1, sizeof *h->names);
  h->fetches = calloc(n_names ? n_names : 1, sizeof *h->fetches);
  h->feeds = calloc(n_feeds ? n_feeds : 1, sizeof *h->feeds);
  int ok = h->names && h->fetches && h->feeds;
  for (size_t i = 0; ok && i < n_names; i++) {
    if (!names[i]) {
      final_destroy(h);
      return cairn__fail(CAIRN_E_NULL, "final_ops_hook_new: names[%zu] is NULL", i);
    }
    ok = (h->names[i] = cairn__strdup(names[i])) != NULL;
    h->n_names = i + ok;
  }
  for (size_t i = 0; ok && i < n_feeds; i++) {
    if (!feeds[i].name || !feeds[i].value) {
      final_destroy(h);
      return cairn__fail(CAIRN_E_NULL, "final_ops_hook_new: feeds[%zu] has a NULL member", i);
    }
    h->feeds[i].value = feeds[i].value;
    ok = (h->feeds[i].name = cairn__strdup(feeds[i].name)) != NULL;
    h->n_feeds = i + ok;
  }
  if (!ok) {
    final_destroy(h);
    return cairn__fail(CAIRN_E_NOMEM, "final_ops_hook_new: out of memory");
  }
  h->op = final_op ? cairn_op_ref(final_op) : NULL;
  return make_hook(&final_vt, h, final_destroy, out);
}

cairn_status cairn_final_ops_hook_value(const cairn_hook *hook, const char *name, cairn_value *out) {
  if (!hook || !name || !out) return cairn__fail(CAIRN_E_NULL, "final_ops_hook_value: an argument is NULL");
  if (cairn__hook_vtable(hook) != &final_vt)
    return cairn__fail(CAIRN_E_INVALID, "final_ops_hook_value: '%s' is not a FinalOpsHook", cairn_hook_name(hook));
  const final_hook *h = cairn_hook_self(hook);
  if (!h->have_values)
    return cairn__fail(CAIRN_E_NOT_FOUND, "final_ops_hook_value: no values yet (end() has not run)");
  for (size_t i = 0; i < h->n_names; i++)
    if (!strcmp(h->names[i], name)) {
      *out = h->fetches[i].value;
      return CAIRN_OK;
    }
  return cairn__fail(CAIRN_E_NOT_FOUND, "final_ops_hook_value: '%s' is not among the final fetches", name);
}

/* ==== GlobalStepWaiterHook ================================================================ */

typedef struct waiter_hook {
  int64_t wait_until;
  const cairn_env *env;
  int started;
} waiter_hook;

static const char waiter_name[] = "_GlobalStepWaiterHook";

static cairn_status waiter_begin(void *self, cairn_registry *r) {
  waiter_hook *h = self;
  h->started = 0;
  return need_global_step(r, waiter_name);
}

static cairn_status waiter_before_run(void *self, cairn_run_context *ctx, cairn_run_request *req) {
  (void)req;
  waiter_hook *h = self;
  if (h->started) return CAIRN_OK;
  if (h->wait_until <= 0) {
    h->started = 1;
    return CAIRN_OK;
  }
  cairn_env_log(h->env, CAIRN_LOG_INFO, "Waiting for global step %" PRId64 " before starting training.", h->wait_until);
  int64_t last_logged = 0;
  for (;;) {
    int64_t step;
    cairn_status st = read_step(cairn_run_context_session(ctx), waiter_name, &step);
    if (st != CAIRN_OK) return st;
    if (step >= h->wait_until) {
      h->started = 1;
      return CAIRN_OK;
    }
    if (step - last_logged > 1000) {
      cairn_env_log(h->env, CAIRN_LOG_INFO,
                    "Waiting for global step %" PRId64 " before starting training. Current step is %" PRId64 ".",
                    h->wait_until, step);
      last_logged = step;
    }
    cairn_env_sleep(h->env, 0.5);
  }
}

static const cairn_hook_vtable waiter_vt = {waiter_name, waiter_begin, NULL, waiter_before_run, NULL, NULL, NULL, free};

cairn_status cairn_global_step_waiter_hook_new(int64_t wait_until_step, const cairn_env *env, cairn_hook **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "global_step_waiter_hook_new: out is NULL");
  *out = NULL;
  waiter_hook *h = calloc(1, sizeof *h);
  if (!h) return cairn__fail(CAIRN_E_NOMEM, "global_step_waiter_hook_new: out of memory");
  h->wait_until = wait_until_step;
  h->env = env;
  return make_hook(&waiter_vt, h, free, out);
}

/* ==== FeedFnHook ========================================================================= */

typedef struct feed_hook {
  cairn_feed_fn fn;
  void *user;
} feed_hook;

static cairn_status feed_before_run(void *self, cairn_run_context *ctx, cairn_run_request *req) {
  (void)ctx;
  feed_hook *h = self;
  return h->fn(h->user, req);
}

static const cairn_hook_vtable feed_vt = {"FeedFnHook", NULL, NULL, feed_before_run, NULL, NULL, NULL, free};

cairn_status cairn_feed_fn_hook_new(cairn_feed_fn fn, void *user, cairn_hook **out) {
  if (!out || !fn) return cairn__fail(CAIRN_E_NULL, "feed_fn_hook_new: %s is NULL", out ? "fn" : "out");
  *out = NULL;
  feed_hook *h = calloc(1, sizeof *h);
  if (!h) return cairn__fail(CAIRN_E_NOMEM, "feed_fn_hook_new: out of memory");
  h->fn = fn;
  h->user = user;
  return make_hook(&feed_vt, h, free, out);
}
