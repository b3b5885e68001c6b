/* TF's Coordinator (cairn/monitored.h, "Coordinator"), reduced to what a
 * monitored session uses: a stop flag, the first error a side thread
 * reports, and the joins that run when the session closes. */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cairn/monitored.h"
#include "monitored_impl.h"

typedef struct join_entry {
  void (*join)(void *ctx);
  void *ctx;
} join_entry;

struct cairn_coordinator {
  pthread_mutex_t mu;
  atomic_int stop;
  cairn_status err; /* under mu; set once */
  char msg[CAIRN__ERRMSG_LEN]; /* as long as cairn_errmsg(), which re-raises it */
  join_entry *joins;
  size_t n_joins, cap_joins;
};

cairn_status cairn__coordinator_new(cairn_coordinator **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "coordinator_new: out is NULL");
  *out = NULL;
  cairn_coordinator *c = calloc(1, sizeof *c);
  if (!c) return cairn__fail(CAIRN_E_NOMEM, "coordinator_new: out of memory");
  if (pthread_mutex_init(&c->mu, NULL) != 0) {
    free(c);
    return cairn__fail(CAIRN_E_NOMEM, "coordinator_new: pthread_mutex_init failed");
  }
  atomic_init(&c->stop, 0);
  c->err = CAIRN_OK;
  *out = c;
  return CAIRN_OK;
}

void cairn__coordinator_free(cairn_coordinator *c) {
  if (!c) return;
  pthread_mutex_destroy(&c->mu);
  free(c->joins);
  free(c);
}

/* As TF's Coordinator.request_stop(ex): the error is recorded only by the
 * request that sets the stop flag (a later request_stop(ex) after a plain
 * request_stop() records nothing), so "the first one wins". */
void cairn_coordinator_request_stop(cairn_coordinator *c, cairn_status err, const char *fmt, ...) {
  if (!c) return;
  pthread_mutex_lock(&c->mu);
  if (!atomic_load(&c->stop)) {
    if (err != CAIRN_OK && c->err == CAIRN_OK) {
      c->err = err;
      if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(c->msg, sizeof c->msg, fmt, ap);
        va_end(ap);
        if (n >= (int)sizeof c->msg) memcpy(c->msg + sizeof c->msg - 4, "...", 4); /* cut: say so */
      } else {
        snprintf(c->msg, sizeof c->msg, "%s", cairn_status_str(err));
      }
    }
    atomic_store(&c->stop, 1);
  }
  pthread_mutex_unlock(&c->mu);
}

int cairn_coordinator_should_stop(const cairn_coordinator *c) {
  if (!c) return 1;
  return atomic_load(&((cairn_coordinator *)c)->stop) != 0;
}

cairn_status cairn_coordinator_error(const cairn_coordinator *c, const char **msg) {
  if (msg) *msg = NULL;
  if (!c) return CAIRN_OK;
  cairn_coordinator *m = (cairn_coordinator *)c;
  pthread_mutex_lock(&m->mu);
  cairn_status st = m->err;
  if (msg && st != CAIRN_OK) *msg = m->msg; /* never changes once set */
  pthread_mutex_unlock(&m->mu);
  return st;
}

cairn_status cairn_coordinator_register_join(cairn_coordinator *c, void (*join)(void *ctx), void *ctx) {
  if (!c || !join) return cairn__fail(CAIRN_E_NULL, "coordinator_register_join: %s is NULL", c ? "join" : "c");
  pthread_mutex_lock(&c->mu);
  int ok = cairn__grow((void **)&c->joins, &c->cap_joins, c->n_joins + 1, sizeof *c->joins);
  if (ok) c->joins[c->n_joins++] = (join_entry){join, ctx};
  pthread_mutex_unlock(&c->mu);
  return ok ? CAIRN_OK : cairn__fail(CAIRN_E_NOMEM, "coordinator_register_join: out of memory");
}

/* TF's coord.join(stop_grace_period_secs, ignore_live_threads=True). A
 * join callback cannot be abandoned half-way as a Python thread can, so
 * the grace period is not enforced: joins that take longer are reported. */
cairn_status cairn__coordinator_join_env(cairn_coordinator *c, double grace_secs, const cairn_env *env) {
  if (!c) return CAIRN_OK;
  cairn_coordinator_request_stop(c, CAIRN_OK, NULL);
  /* The joins run without the lock (a thread being joined may still call
     request_stop, which then records nothing: the stop is already set);
     each entry is read under it, since a join may register another. */
  double t0 = cairn_env_now(env);
  for (size_t i = 0;; i++) {
    pthread_mutex_lock(&c->mu);
    join_entry e = {NULL, NULL};
    if (i < c->n_joins) e = c->joins[i];
    pthread_mutex_unlock(&c->mu);
    if (!e.join) break;
    e.join(e.ctx);
  }
  double took = cairn_env_now(env) - t0;
  if (grace_secs > 0 && took > grace_secs)
    cairn_env_log(env, CAIRN_LOG_WARN,
                  "Coordinator stopped with threads still running after the grace period of %g s: joining "
                  "them took %g s",
                  grace_secs, took);
  const char *msg;
  cairn_status st = cairn_coordinator_error(c, &msg);
  if (st != CAIRN_OK) return cairn__fail(st, "%s", msg ? msg : cairn_status_str(st));
  return CAIRN_OK;
}

cairn_status cairn__coordinator_join(cairn_coordinator *c) { return cairn__coordinator_join_env(c, 0, NULL); }
