/* The progress hook (cairn/summary.h): one line every N steps or seconds
 * with the step, the loss, steps/s, examples/s and the ETA.
 *
 * The global step follows the hooks' rule (lib/hook_impl.h): the fetched
 * "global_step" is read before the run's increment, so the hook predicts
 * the next step, fetches the loss only on runs predicted to print, and
 * re-reads the real step before printing. */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cairn/summary.h"
#include "hook_impl.h"
#include "table.h"

static const char progress_name[] = "ProgressHook";

typedef struct progress_hook {
  cairn_timer *timer;
  char *loss_name;
  int64_t batch_size;
  int64_t max_steps;
  FILE *out;
  cairn_progress_fn fn;
  void *fn_ctx;
  const cairn_env *env;
  int have_next;
  int64_t next_step; /* predicted global step after the next run */
  int request;       /* this run was predicted to print */
  char line[256];
} progress_hook;

cairn_progress_hook_options cairn_progress_hook_options_default(void) {
  return (cairn_progress_hook_options){.every_n_steps = 100};
}

/* Appends printf-style at buf + *k, snprintf-style (buf may be NULL when
   len is 0); *k counts the whole text. */
static void append(char *buf, size_t len, size_t *k, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static void append(char *buf, size_t len, size_t *k, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = *k < len ? vsnprintf(buf + *k, len - *k, fmt, ap) : vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n > 0) *k += (size_t)n;
}

size_t cairn_progress_format(const cairn_progress *p, char *buf, size_t len) {
  if (len) buf[0] = '\0';
  if (!p) return 0;
  size_t k = 0;
  if (p->max_steps > 0)
    append(buf, len, &k, "step=%" PRId64 "/%" PRId64, p->step, p->max_steps);
  else
    append(buf, len, &k, "step=%" PRId64, p->step);
  if (p->have_loss) append(buf, len, &k, " loss=%.4g", p->loss);
  append(buf, len, &k, " steps/s=%.2f", p->steps_per_sec);
  if (p->examples_per_sec > 0) append(buf, len, &k, " examples/s=%.0f", p->examples_per_sec);
  if (p->eta_secs >= 0) {
    /* 44s, 12m05s, 3h07m */
    long long t = (long long)(p->eta_secs + 0.5);
    if (t < 60)
      append(buf, len, &k, " eta=%llds", t);
    else if (t < 3600)
      append(buf, len, &k, " eta=%lldm%02llds", t / 60, t % 60);
    else
      append(buf, len, &k, " eta=%lldh%02lldm", t / 3600, (t % 3600) / 60);
  }
  return k;
}

static void progress_destroy(void *self) {
  progress_hook *h = self;
  if (!h) return;
  cairn_timer_free(h->timer);
  free(h->loss_name);
  free(h);
}

static cairn_status progress_begin(void *self, cairn_registry *r) {
  (void)self;
  cairn_var *v = NULL;
  if (r && cairn_registry_find(r, CAIRN__GLOBAL_STEP, &v) != CAIRN_OK)
    return cairn__fail(CAIRN_E_STATE, "Global step should be created to use %s.", progress_name);
  return CAIRN_OK;
}

/* The baseline: rates of the first line count only this session's steps. */
static cairn_status progress_after_create(void *self, cairn_session *s, cairn_coordinator *coord) {
  (void)coord;
  progress_hook *h = self;
  int64_t step;
  cairn_status st = cairn__hook_read_step(s, progress_name, &step);
  if (st != CAIRN_OK) return st;
  cairn_timer_reset(h->timer);
  cairn_timer_update_last_triggered_step(h->timer, step, NULL, NULL);
  h->next_step = step + 1;
  h->have_next = 1;
  return CAIRN_OK;
}

static cairn_status progress_before_run(void *self, cairn_run_context *ctx, cairn_run_request *req) {
  (void)ctx;
  progress_hook *h = self;
  cairn_status st = cairn_run_request_fetch(req, CAIRN__GLOBAL_STEP);
  if (st != CAIRN_OK) return st;
  h->request = h->have_next && cairn_timer_should_trigger_for_step(h->timer, h->next_step);
  if (h->request && h->loss_name) st = cairn_run_request_fetch(req, h->loss_name);
  return st;
}

static void emit(progress_hook *h, const cairn_progress *p) {
  cairn_progress_format(p, h->line, sizeof h->line);
  if (h->fn) {
    h->fn(h->fn_ctx, p, h->line);
    return;
  }
  FILE *f = h->out ? h->out : stderr;
  fprintf(f, "%s\n", h->line);
  fflush(f);
}

static cairn_status progress_after_run(void *self, cairn_run_context *ctx, const cairn_run_values *v) {
  progress_hook *h = self;
  int64_t stale;
  cairn_status st = cairn__hook_fetched_step(v, &stale);
  if (st != CAIRN_OK) return st;
  int64_t step = stale + 1;
  if (!h->have_next) { /* driven without after_create_session: baseline now */
    if ((st = cairn__hook_read_step(cairn_run_context_session(ctx), progress_name, &step)) != CAIRN_OK) return st;
    cairn_timer_update_last_triggered_step(h->timer, step, NULL, NULL);
  } else if (h->request) {
    if ((st = cairn__hook_read_step(cairn_run_context_session(ctx), progress_name, &step)) != CAIRN_OK) return st;
    if (cairn_timer_should_trigger_for_step(h->timer, step)) {
      cairn_progress p;
      memset(&p, 0, sizeof p);
      int64_t steps = 0;
      cairn_timer_update_last_triggered_step(h->timer, step, &p.elapsed_secs, &steps);
      p.step = step;
      p.max_steps = h->max_steps;
      if (h->loss_name) {
        if ((st = cairn_run_values_f64(v, h->loss_name, &p.loss)) != CAIRN_OK) return st;
        p.have_loss = 1;
      }
      p.steps_per_sec = p.elapsed_secs > 0 ? (double)steps / p.elapsed_secs : 0;
      p.examples_per_sec = h->batch_size > 0 ? p.steps_per_sec * (double)h->batch_size : 0;
      p.eta_secs = -1;
      if (h->max_steps > 0) {
        if (step >= h->max_steps)
          p.eta_secs = 0;
        else if (p.steps_per_sec > 0)
          p.eta_secs = (double)(h->max_steps - step) / p.steps_per_sec;
      }
      emit(h, &p);
    }
  }
  h->next_step = step + 1;
  h->have_next = 1;
  return CAIRN_OK;
}

static const cairn_hook_vtable progress_vt = {
    .name = progress_name,
    .begin = progress_begin,
    .after_create_session = progress_after_create,
    .before_run = progress_before_run,
    .after_run = progress_after_run,
    .destroy = progress_destroy,
};

cairn_status cairn_hook_new_progress(const cairn_progress_hook_options *o, cairn_hook **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "hook_new_progress: out is NULL");
  *out = NULL;
  if (!o) return cairn__fail(CAIRN_E_NULL, "hook_new_progress: options are NULL");
  if (cairn__env_check(o->env, "hook_new_progress") != CAIRN_OK) return CAIRN_E_INVALID;
  if (o->every_n_steps < 0 || o->every_n_secs < 0 || (o->every_n_steps > 0) == (o->every_n_secs > 0))
    return cairn__fail(CAIRN_E_INVALID,
                       "hook_new_progress: exactly one of every_n_steps and every_n_secs must be > 0 "
                       "(got %" PRId64 " and %g)",
                       o->every_n_steps, o->every_n_secs);
  progress_hook *h = calloc(1, sizeof *h);
  if (!h) return cairn__fail(CAIRN_E_NOMEM, "hook_new_progress: out of memory");
  if (o->loss_name && !(h->loss_name = cairn__strdup(o->loss_name))) {
    free(h);
    return cairn__fail(CAIRN_E_NOMEM, "hook_new_progress: out of memory");
  }
  cairn_status st = cairn_timer_new(o->every_n_secs, o->every_n_steps, o->env, &h->timer);
  if (st != CAIRN_OK) {
    progress_destroy(h);
    return st;
  }
  h->batch_size = o->batch_size;
  h->max_steps = o->max_steps;
  h->out = o->out;
  h->fn = o->fn;
  h->fn_ctx = o->fn_ctx;
  h->env = o->env;
  return cairn__hook_make(&progress_vt, h, progress_destroy, out);
}
