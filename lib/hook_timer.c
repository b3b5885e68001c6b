/* TF's SecondOrStepTimer (cairn/monitored.h, "Timer"): whether a hook
 * that acts every N steps or every N seconds acts at this step. */
#include "internal.h"

#include <stdlib.h>

#include "cairn/monitored.h"
#include "table.h"

struct cairn_timer {
  double every_secs;
  int64_t every_steps;
  const cairn_env *env;
  int triggered;
  double last_time;
  int64_t last_step;
};

cairn_status cairn_timer_new(double every_secs, int64_t every_steps, const cairn_env *env, cairn_timer **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "timer_new: out is NULL");
  *out = NULL;
  int has_secs = every_secs > 0, has_steps = every_steps > 0;
  if (!has_secs && !has_steps)
    return cairn__fail(CAIRN_E_INVALID, "Either every_secs or every_steps should be provided.");
  if (has_secs && has_steps) return cairn__fail(CAIRN_E_INVALID, "Can not provide both every_secs and every_steps.");
  cairn_status st = cairn__env_check(env, "timer_new");
  if (st != CAIRN_OK) return st;
  cairn_timer *t = calloc(1, sizeof *t);
  if (!t) return cairn__fail(CAIRN_E_NOMEM, "timer_new: out of memory");
  t->every_secs = has_secs ? every_secs : 0;
  t->every_steps = has_steps ? every_steps : 0;
  t->env = env;
  *out = t;
  return CAIRN_OK;
}

void cairn_timer_free(cairn_timer *t) { free(t); }

int cairn_timer_should_trigger_for_step(const cairn_timer *t, int64_t step) {
  if (!t) return 0;
  if (!t->triggered) return 1;
  if (step == t->last_step) return 0;
  if (t->every_secs > 0) return cairn_env_now(t->env) >= t->last_time + t->every_secs;
  /* TF's step >= last + every, as a difference: the sum overflows for a
     huge interval (every_steps = INT64_MAX means "never again"). An older
     step (a restore went back) has not reached the interval. */
  if (step < t->last_step) return 0;
  return (uint64_t)step - (uint64_t)t->last_step >= (uint64_t)t->every_steps;
}

int cairn_timer_update_last_triggered_step(cairn_timer *t, int64_t step, double *elapsed_secs,
                                           int64_t *elapsed_steps) {
  if (!t) return 0;
  double now = cairn_env_now(t->env);
  int had = t->triggered;
  if (had) {
    if (elapsed_secs) *elapsed_secs = now - t->last_time;
    if (elapsed_steps) *elapsed_steps = step - t->last_step;
  }
  t->triggered = 1;
  t->last_time = now;
  t->last_step = step;
  return had;
}

int cairn_timer_last_triggered_step(const cairn_timer *t, int64_t *step) {
  if (!t || !t->triggered) return 0;
  if (step) *step = t->last_step;
  return 1;
}

void cairn_timer_reset(cairn_timer *t) {
  if (t) t->triggered = 0;
}
