/* Built-in hooks of TF's basic_session_run_hooks.py
 * (doc/session-semantics.md, "Built-in hooks"): StopAtStep, StepCounter,
 * LoggingTensor, NanTensor, FinalOps, GlobalStepWaiter, FeedFn. The
 * others are in files of their own: lib/hooks_checkpoint.c
 * (CheckpointSaver), lib/hooks_summary.c (SummarySaver),
 * lib/hooks_progress.c (ProgressHook). Every hook reads the global step by
 * the rule written above the helpers in lib/hook_impl.h.
 */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cairn/monitored.h"
#include "hook_impl.h"
#include "tensor_impl.h"

/* ==== StopAtStepHook =============================================================== */

typedef struct stop_hook {
  int64_t num_steps;
  int64_t last_step;
  int have_last;
} stop_hook;

static const char stop_name[] = "StopAtStepHook";

static cairn_status stop_begin(void *self, cairn_registry *r) {
  (void)self;
  return cairn__hook_need_global_step(r, stop_name);
}

static cairn_status stop_after_create(void *self, cairn_session *s, cairn_coordinator *coord) {
  (void)coord;
  stop_hook *h = self;
  if (h->have_last) return CAIRN_OK; /* computed once: not again on recovery */
  int64_t step;
  cairn_status st = cairn__hook_read_step(s, stop_name, &step);
  if (st != CAIRN_OK) return st;
  /* step + num_steps, saturated: a huge num_steps means "never stop". */
  h->last_step = step > 0 && h->num_steps > INT64_MAX - step ? INT64_MAX : step + h->num_steps;
  h->have_last = 1;
  return CAIRN_OK;
}

static cairn_status stop_after_run(void *self, cairn_run_context *ctx, const cairn_run_values *v) {
  stop_hook *h = self;
  int64_t stale;
  cairn_status st = cairn__hook_fetched_step(v, &stale);
  if (st != CAIRN_OK) return st;
  if (!h->have_last) { /* driven without after_create_session */
    st = stop_after_create(self, cairn_run_context_session(ctx), NULL);
    if (st != CAIRN_OK) return st;
  }
  if (stale + 1 >= h->last_step) {
    /* The read was ordered before this run's increment: check the real one. */
    int64_t step;
    st = cairn__hook_read_step(cairn_run_context_session(ctx), stop_name, &step);
    if (st != CAIRN_OK) return st;
    if (step >= h->last_step) cairn_run_context_request_stop(ctx);
  }
  return CAIRN_OK;
}

static const cairn_hook_vtable stop_vt = {
    .name = stop_name,
    .begin = stop_begin,
    .after_create_session = stop_after_create,
    .before_run = cairn__hook_fetch_step,
    .after_run = stop_after_run,
    .destroy = free,
};

/* num_steps, last_step < 0: not given (TF's None; 0.1's rule, which the
 * deprecated name keeps). */
cairn_status cairn__hook_new_stop_at_step(int64_t num_steps, int64_t last_step, cairn_hook **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "hook_new_stop_at_step: out is NULL");
  *out = NULL;
  if (num_steps < 0 && last_step < 0) return cairn__fail(CAIRN_E_INVALID, "One of num_steps or last_step must be specified.");
  if (num_steps >= 0 && last_step >= 0)
    return cairn__fail(CAIRN_E_INVALID, "Only one of num_steps or last_step can be specified.");
  stop_hook *h = calloc(1, sizeof *h);
  if (!h) return cairn__fail(CAIRN_E_NOMEM, "hook_new_stop_at_step: out of memory");
  h->num_steps = num_steps;
  h->last_step = last_step;
  h->have_last = last_step >= 0;
  return cairn__hook_make(&stop_vt, h, free, out);
}

CAIRN__OPTIONS_DEFAULT(cairn_stop_at_step_hook_options)

cairn_status cairn_hook_new_stop_at_step(int64_t step, const cairn_stop_at_step_hook_options *o, cairn_hook **out) {
  static const char fn[] = "hook_new_stop_at_step";
  if (!out) return cairn__fail(CAIRN_E_NULL, "%s: out is NULL", fn);
  *out = NULL;
  cairn_stop_at_step_hook_options c;
  cairn_status st = CAIRN__OPTIONS_COPY(c, o, cairn_stop_at_step_hook_options, fn);
  if (st != CAIRN_OK) return st;
  if (step < 0) return cairn__fail(CAIRN_E_INVALID, "%s: step is %" PRId64 ", must be >= 0", fn, step);
  return c.relative ? cairn__hook_new_stop_at_step(step, -1, out) : cairn__hook_new_stop_at_step(-1, step, out);
}

/* ==== StepCounterHook ================================================================== */

typedef struct counter_hook {
  cairn_timer *timer;
  cairn_summary_writer *writer; /* &writer_copy or NULL */
  cairn_summary_writer writer_copy;
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
  return cairn__hook_need_global_step(r, counter_name);
}

static cairn_status counter_after_create(void *self, cairn_session *s, cairn_coordinator *coord) {
  (void)s;
  (void)coord;
  counter_hook *h = self;
  h->have_last = 0;
  return CAIRN_OK;
}

static cairn_status counter_after_run(void *self, cairn_run_context *ctx, const cairn_run_values *v) {
  counter_hook *h = self;
  int64_t stale;
  cairn_status st = cairn__hook_fetched_step(v, &stale);
  if (st != CAIRN_OK) return st;
  if (cairn_timer_should_trigger_for_step(h->timer, stale + h->steps_per_run)) {
    int64_t step;
    if ((st = cairn__hook_read_step(cairn_run_context_session(ctx), counter_name, &step)) != CAIRN_OK) return st;
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

static const cairn_hook_vtable counter_vt = {
    .name = counter_name,
    .begin = counter_begin,
    .after_create_session = counter_after_create,
    .before_run = cairn__hook_fetch_step,
    .after_run = counter_after_run,
    .destroy = counter_destroy,
};

CAIRN__OPTIONS_DEFAULT(cairn_step_counter_hook_options)

cairn_status cairn_hook_new_step_counter(const cairn_step_counter_hook_options *o, cairn_hook **out) {
  static const char fn[] = "hook_new_step_counter";
  if (!out) return cairn__fail(CAIRN_E_NULL, "%s: out is NULL", fn);
  *out = NULL;
  cairn_step_counter_hook_options c;
  cairn_status st = CAIRN__OPTIONS_COPY(c, o, cairn_step_counter_hook_options, fn);
  if (st != CAIRN_OK) return st;
  if (c.every_n_steps < 0 || c.every_n_secs < 0 || isnan(c.every_n_secs))
    return cairn__fail(CAIRN_E_INVALID, "%s: %s is negative; must be > 0, or 0 for the default", fn,
                       c.every_n_steps < 0 ? "every_n_steps" : "every_n_secs");
  if (c.every_n_steps > 0 && c.every_n_secs > 0)
    return cairn__fail(CAIRN_E_INVALID, "exactly one of every_n_steps and every_n_secs should be provided.");
  if (!c.every_n_steps && !c.every_n_secs) c.every_n_steps = 100; /* TF's default */
  counter_hook *h = calloc(1, sizeof *h);
  if (!h) return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  st = cairn__summary_writer_copy(c.summary_writer, &h->writer_copy, &h->writer, fn);
  if (st == CAIRN_OK) st = cairn_timer_new(c.every_n_secs, c.every_n_steps, c.env, &h->timer);
  if (st != CAIRN_OK) {
    free(h);
    return st;
  }
  h->env = c.env;
  h->steps_per_run = 1;
  return cairn__hook_make(&counter_vt, h, counter_destroy, out);
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

static const cairn_hook_vtable logging_vt = {
    .name = logging_name,
    .begin = logging_begin,
    .before_run = logging_before_run,
    .after_run = logging_after_run,
    .end = logging_end,
    .destroy = logging_destroy,
};

CAIRN__OPTIONS_DEFAULT(cairn_logging_tensor_hook_options)

/* The caller's options into *o; the deprecated name's fields o->names and
 * o->n_names, if set, must be the arguments (doc/deprecated.md). */
static cairn_status logging_options(const char *const *names, size_t n_names,
                                    const cairn_logging_tensor_hook_options *opts,
                                    cairn_logging_tensor_hook_options *o) {
  static const char fn[] = "hook_new_logging_tensor";
  static const char fix[] = "o->names and o->n_names are read only by the deprecated cairn_logging_tensor_hook_new: "
                            "leave them NULL and 0";
  cairn_status st = CAIRN__OPTIONS_COPY(*o, opts, cairn_logging_tensor_hook_options, fn);
  if (st != CAIRN_OK || (st = cairn__env_check(o->env, fn)) != CAIRN_OK) return st;
  if (!o->names && !o->n_names) return CAIRN_OK;
  if (!o->names)
    return cairn__fail(CAIRN_E_INVALID, "%s: o->n_names is %zu but o->names is NULL; %s", fn, o->n_names, fix);
  if (o->n_names != n_names)
    return cairn__fail(CAIRN_E_INVALID, "%s: n_names is %zu but o->n_names is %zu; %s", fn, n_names, o->n_names, fix);
  for (size_t i = 0; i < n_names; i++) { /* names[i] are not NULL */
    if (!o->names[i])
      return cairn__fail(CAIRN_E_INVALID, "%s: names[%zu] is '%s' but o->names[%zu] is NULL; %s", fn, i, names[i], i,
                         fix);
    if (strcmp(names[i], o->names[i]) != 0)
      return cairn__fail(CAIRN_E_INVALID, "%s: names[%zu] is '%s' but o->names[%zu] is '%s'; %s", fn, i, names[i], i,
                         o->names[i], fix);
  }
  return CAIRN_OK;
}

cairn_status cairn_hook_new_logging_tensor(const char *const *names, size_t n_names,
                                           const cairn_logging_tensor_hook_options *opts, cairn_hook **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "hook_new_logging_tensor: out is NULL");
  *out = NULL;
  if (!names)
    return cairn__fail(CAIRN_E_NULL, "hook_new_logging_tensor: names is NULL (n_names %zu; TF's tensors are "
                                     "required: give an array, which may be empty with n_names 0)", n_names);
  for (size_t i = 0; i < n_names; i++)
    if (!names[i]) return cairn__fail(CAIRN_E_NULL, "hook_new_logging_tensor: names[%zu] is NULL", i);
  cairn_logging_tensor_hook_options oc;
  const cairn_logging_tensor_hook_options *o = &oc;
  cairn_status st = logging_options(names, n_names, opts, &oc);
  if (st != CAIRN_OK) return st;
  int has_iter = o->every_n_iter != 0, has_secs = o->every_n_secs > 0;
  int only_at_end = o->at_end && !has_iter && !has_secs;
  if (!only_at_end && has_iter == has_secs)
    return cairn__fail(CAIRN_E_INVALID,
                       "either at_end and/or exactly one of every_n_iter and every_n_secs must be provided.");
  if (has_iter && o->every_n_iter <= 0)
    return cairn__fail(CAIRN_E_INVALID, "invalid every_n_iter=%" PRId64 ".", o->every_n_iter);
  logging_hook *h = calloc(1, sizeof *h);
  if (!h) return cairn__fail(CAIRN_E_NOMEM, "hook_new_logging_tensor: out of memory");
  if (!only_at_end) st = cairn_timer_new(o->every_n_secs, has_iter ? o->every_n_iter : 0, o->env, &h->timer);
  if (st != CAIRN_OK) {
    free(h);
    return st;
  }
  h->at_end = o->at_end;
  h->formatter = o->formatter;
  h->formatter_ctx = o->formatter_ctx;
  h->env = o->env;
  size_t n = n_names ? n_names : 1;
  h->names = calloc(n, sizeof *h->names);
  h->values = calloc(n, sizeof *h->values);
  h->fetches = calloc(n, sizeof *h->fetches);
  if (!h->names || !h->values || !h->fetches) {
    logging_destroy(h);
    return cairn__fail(CAIRN_E_NOMEM, "hook_new_logging_tensor: out of memory");
  }
  for (size_t i = 0; i < n_names; i++) {
    if (!(h->names[i] = cairn__strdup(names[i]))) {
      logging_destroy(h);
      return cairn__fail(CAIRN_E_NOMEM, "hook_new_logging_tensor: out of memory");
    }
    h->n_names = i + 1;
  }
  return cairn__hook_make(&logging_vt, h, logging_destroy, out);
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

static const cairn_hook_vtable nan_vt = {.name = nan_name, .before_run = nan_before_run, .after_run = nan_after_run, .destroy = nan_destroy};

CAIRN__OPTIONS_DEFAULT(cairn_nan_tensor_hook_options)

cairn_status cairn_hook_new_nan_tensor(const char *loss_name, const cairn_nan_tensor_hook_options *o,
                                       cairn_hook **out) {
  static const char fn[] = "hook_new_nan_tensor";
  if (!out || !loss_name) return cairn__fail(CAIRN_E_NULL, "%s: %s is NULL", fn, out ? "loss_name" : "out");
  *out = NULL;
  cairn_nan_tensor_hook_options c;
  cairn_status st = CAIRN__OPTIONS_COPY(c, o, cairn_nan_tensor_hook_options, fn);
  if (st != CAIRN_OK) return st;
  nan_hook *h = calloc(1, sizeof *h);
  if (!h || !(h->loss = cairn__strdup(loss_name))) {
    free(h);
    return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  }
  h->fail = !c.warn_only;
  return cairn__hook_make(&nan_vt, h, nan_destroy, out);
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
    const char *why = cairn__errmsg_copy(); /* the log line must not replace it */
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

static const cairn_hook_vtable final_vt = {.name = final_name, .end = final_end, .destroy = final_destroy};

CAIRN__OPTIONS_DEFAULT(cairn_final_ops_hook_options)

cairn_status cairn_hook_new_final_ops(cairn_op *final_op, const char *const *names, size_t n_names,
                                      const cairn_final_ops_hook_options *o, cairn_hook **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "hook_new_final_ops: out is NULL");
  *out = NULL;
  cairn_final_ops_hook_options c;
  cairn_status st = CAIRN__OPTIONS_COPY(c, o, cairn_final_ops_hook_options, "hook_new_final_ops");
  if (st != CAIRN_OK) return st;
  const cairn_feed *feeds = c.feeds;
  size_t n_feeds = c.n_feeds;
  if ((n_names && !names) || (n_feeds && !feeds))
    return cairn__fail(CAIRN_E_NULL, "hook_new_final_ops: %s is NULL", n_names && !names ? "names" : "feeds");
  final_hook *h = calloc(1, sizeof *h);
  if (!h) return cairn__fail(CAIRN_E_NOMEM, "hook_new_final_ops: out of memory");
  h->names = calloc(n_names ? n_names : 1, sizeof *h->names);
  h->fetches = calloc(n_names ? n_names : 1, sizeof *h->fetches);
  h->feeds = calloc(n_feeds ? n_feeds : 1, sizeof *h->feeds);
  int ok = h->names && h->fetches && h->feeds;
  for (size_t i = 0; ok && i < n_names; i++) {
    if (!names[i]) {
      final_destroy(h);
      return cairn__fail(CAIRN_E_NULL, "hook_new_final_ops: names[%zu] is NULL", i);
    }
    ok = (h->names[i] = cairn__strdup(names[i])) != NULL;
    h->n_names = i + ok;
  }
  for (size_t i = 0; ok && i < n_feeds; i++) {
    if (!feeds[i].name || !feeds[i].value) {
      final_destroy(h);
      return cairn__fail(CAIRN_E_NULL, "hook_new_final_ops: feeds[%zu] has a NULL member", i);
    }
    h->feeds[i].value = feeds[i].value;
    ok = (h->feeds[i].name = cairn__strdup(feeds[i].name)) != NULL;
    h->n_feeds = i + ok;
  }
  if (!ok) {
    final_destroy(h);
    return cairn__fail(CAIRN_E_NOMEM, "hook_new_final_ops: out of memory");
  }
  h->op = final_op ? cairn_op_ref(final_op) : NULL;
  return cairn__hook_make(&final_vt, h, final_destroy, out);
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
  return cairn__hook_need_global_step(r, waiter_name);
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
    cairn_status st = cairn__hook_read_step(cairn_run_context_session(ctx), waiter_name, &step);
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

static const cairn_hook_vtable waiter_vt = {.name = waiter_name, .begin = waiter_begin, .before_run = waiter_before_run, .destroy = free};

CAIRN__OPTIONS_DEFAULT(cairn_global_step_waiter_hook_options)

cairn_status cairn_hook_new_global_step_waiter(int64_t wait_until_step, const cairn_global_step_waiter_hook_options *o,
                                               cairn_hook **out) {
  static const char fn[] = "hook_new_global_step_waiter";
  if (!out) return cairn__fail(CAIRN_E_NULL, "%s: out is NULL", fn);
  *out = NULL;
  cairn_global_step_waiter_hook_options c;
  cairn_status st = CAIRN__OPTIONS_COPY(c, o, cairn_global_step_waiter_hook_options, fn);
  if (st == CAIRN_OK && c.env) st = cairn__env_check(c.env, fn);
  if (st != CAIRN_OK) return st;
  waiter_hook *h = calloc(1, sizeof *h);
  if (!h) return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  h->wait_until = wait_until_step;
  h->env = c.env;
  return cairn__hook_make(&waiter_vt, h, free, out);
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

static const cairn_hook_vtable feed_vt = {.name = "FeedFnHook", .before_run = feed_before_run, .destroy = free};

cairn_status cairn_hook_new_feed_fn(cairn_feed_fn fn, void *user, cairn_hook **out) {
  if (!out || !fn) return cairn__fail(CAIRN_E_NULL, "hook_new_feed_fn: %s is NULL", out ? "fn" : "out");
  *out = NULL;
  feed_hook *h = calloc(1, sizeof *h);
  if (!h) return cairn__fail(CAIRN_E_NOMEM, "hook_new_feed_fn: out of memory");
  h->fn = fn;
  h->user = user;
  return cairn__hook_make(&feed_vt, h, free, out);
}
