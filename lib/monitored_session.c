/* MonitoredSession and SingularMonitoredSession: the wrapper stack of TF's
 * monitored_session.py (doc/session-semantics.md, "MonitoredSession").
 * It is built from a session creator (lib/session_creator.c), a
 * coordinator (lib/coordinator.c) and hook objects (lib/hook.c).
 *
 * TF builds the stack as objects, outermost first:
 *   _RecoverableSession → _CoordinatedSession → _HookedSession → raw session.
 * Here one struct holds the state of all layers and each layer is a
 * function: recoverable_run() → coord_run() → hooked_run() →
 * cairn_session_run(); the same for should_stop and close.
 * SingularMonitoredSession is the same stack without the recoverable
 * layer; cairn__hooked_session_new() (tests) is the hooked layer alone.
 */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cairn/monitored.h"
#include "hook_impl.h"
#include "monitored_impl.h"
#include "table.h"

static int is_preemption(cairn_status st) { return st == CAIRN_E_ABORTED || st == CAIRN_E_UNAVAILABLE; }

typedef struct hook_slot {
  cairn_run_request req;
  cairn_run_values vals;
  size_t *idx;
  size_t cap_idx;
} hook_slot;

struct cairn_monitored_session {
  /* configuration */
  cairn_session_creator *creator;
  int own_creator;
  cairn_hook **hooks;
  size_t n_hooks;
  cairn_hook **owned_hooks;
  size_t n_owned_hooks;
  cairn_scaffold *owned_scaffold;
  cairn_registry *registry;
  int was_finalized; /* the registry's state before the session: restored at close */
  int should_recover;
  int hooked_only; /* cairn__hooked_session_new: the raw session is borrowed */
  double grace_secs;
  int max_recoveries;
  double backoff_secs;
  const cairn_env *env;

  /* the stack: raw == NULL means no session (closed, or the recoverable
     layer lost it and will create one on the next call) */
  int closed;
  cairn_session *raw;
  cairn_coordinator *coord;
  int hook_stop; /* the hooked layer's stop flag */
  int in_run;
  int signals_installed; /* stop_on_signals: this session owns the handlers */
  int stop_signal;       /* the signal that stopped it, 0 if none */

  /* run scratch, reused: steady-state runs allocate nothing */
  hook_slot *slots;
  cairn_feed *feeds;
  size_t cap_feeds;
  cairn_fetch *fetches;
  size_t cap_fetches;
  const cairn_op **ops;
  size_t cap_ops;
  cairn__summary_rec *sums;
  size_t n_sums, cap_sums;
  char *sum_arena;
  size_t sum_len, sum_cap;
  int sum_failed;
  cairn_summary_fn user_sum_fn;
  void *user_sum_ctx;

  char err[CAIRN__ERRMSG_LEN];
};

static cairn_status ms_ret(cairn_monitored_session *ms, cairn_status st) {
  if (st != CAIRN_OK) snprintf(ms->err, sizeof ms->err, "%s", cairn_errmsg());
  return st;
}

/* The summaries ops emit during a run: collected for the hooks that asked,
   and passed on to the caller's own summary_fn. */
static void collect_summary(void *ctx, const char *tag, double value) {
  cairn_monitored_session *ms = ctx;
  if (ms->user_sum_fn) ms->user_sum_fn(ms->user_sum_ctx, tag, value);
  size_t n = strlen(tag) + 1;
  if (!cairn__grow((void **)&ms->sums, &ms->cap_sums, ms->n_sums + 1, sizeof *ms->sums) ||
      !cairn__grow((void **)&ms->sum_arena, &ms->sum_cap, ms->sum_len + n, 1)) {
    ms->sum_failed = 1;
    return;
  }
  memcpy(ms->sum_arena + ms->sum_len, tag, n);
  ms->sums[ms->n_sums++] = (cairn__summary_rec){ms->sum_len, value};
  ms->sum_len += n;
}

/* Appends "name" to a conflict list "a, b" in buf, ending it with "..."
   when it no longer fits. */
static void conflict_add(char *buf, size_t len, const char *name) {
  size_t used = strlen(buf);
  if (used + 1 >= len) return;
  int n = snprintf(buf + used, len - used, "%s%s", used ? ", " : "", name);
  if (n >= 0 && (size_t)n >= len - used) memcpy(buf + len - 4, "...", 4);
}

static const cairn_run_args empty_args;

/* ---- _HookedSession.run ---- */

/* Step 3: before_run of every hook, in order, merging their feeds as it
 * goes (a name two hooks feed is an error); *n_hook_feeds: their count. */
static cairn_status run_before_hooks(cairn_monitored_session *ms, cairn_run_context *ctx, size_t *n_hook_feeds) {
  char conflicts[CAIRN__ERRMSG_LEN - 128]; /* + the text around it: fits cairn_errmsg() */
  *n_hook_feeds = 0;
  for (size_t i = 0; i < ms->n_hooks; i++) {
    cairn_hook *h = ms->hooks[i];
    cairn_run_request *req = &ms->slots[i].req;
    if (h->vt->before_run) {
      cairn_status st = h->vt->before_run(h->self, ctx, req);
      if (st != CAIRN_OK) return st;
    }
    conflicts[0] = '\0';
    for (size_t f = 0; f < req->n_feed; f++)
      for (size_t j = 0; j < i; j++) {
        const cairn_run_request *o = &ms->slots[j].req;
        for (size_t g = 0; g < o->n_feed; g++)
          if (!strcmp(cairn__run_request_name(req, req->feed[f].name), cairn__run_request_name(o, o->feed[g].name)))
            conflict_add(conflicts, sizeof conflicts, cairn__run_request_name(req, req->feed[f].name));
      }
    if (conflicts[0])
      return cairn__fail(CAIRN_E_INVALID, "Same tensor is fed by two hooks. Conflict(s): [%s]", conflicts);
    *n_hook_feeds += req->n_feed;
  }
  return CAIRN_OK;
}

/* Step 4: a name fed by the caller and by a hook is an error. */
static cairn_status check_user_feeds(const cairn_monitored_session *ms, const cairn_run_args *args) {
  char conflicts[CAIRN__ERRMSG_LEN - 128];
  conflicts[0] = '\0';
  for (size_t i = 0; i < ms->n_hooks; i++) {
    const cairn_run_request *req = &ms->slots[i].req;
    for (size_t f = 0; f < req->n_feed; f++)
      for (size_t u = 0; u < args->n_feeds; u++)
        if (args->feeds[u].name && !strcmp(args->feeds[u].name, cairn__run_request_name(req, req->feed[f].name)))
          conflict_add(conflicts, sizeof conflicts, args->feeds[u].name);
  }
  if (conflicts[0])
    return cairn__fail(CAIRN_E_INVALID, "Same tensor is fed by a SessionRunHook and user. Conflict(s): [%s]",
                       conflicts);
  return CAIRN_OK;
}

/* Step 5: the merged request in ms->feeds, ms->ops and ms->fetches, into
 * `merged` (the caller's first, then the hooks'); each hook's fetches are
 * found again through its slot's idx. *want_sums: some hook asked for the
 * run's summaries. */
static cairn_status merge_requests(cairn_monitored_session *ms, const cairn_run_args *args, size_t n_hook_feeds,
                                   cairn_run_args *merged, int *want_sums) {
  size_t n_ops = args->n_ops, n_fetch = args->n_fetches, n_feeds = args->n_feeds + n_hook_feeds;
  size_t max_fetch = n_fetch, max_ops = n_ops;
  for (size_t i = 0; i < ms->n_hooks; i++) {
    max_fetch += ms->slots[i].req.n_fetch;
    max_ops += ms->slots[i].req.n_ops;
  }
  if (!cairn__grow((void **)&ms->feeds, &ms->cap_feeds, n_feeds ? n_feeds : 1, sizeof *ms->feeds) ||
      !cairn__grow((void **)&ms->fetches, &ms->cap_fetches, max_fetch ? max_fetch : 1, sizeof *ms->fetches) ||
      !cairn__grow((void **)&ms->ops, &ms->cap_ops, max_ops ? max_ops : 1, sizeof *ms->ops))
    return cairn__fail(CAIRN_E_NOMEM, "run: out of memory");

  size_t k = 0;
  for (size_t u = 0; u < args->n_feeds; u++) ms->feeds[k++] = args->feeds[u];
  for (size_t i = 0; i < ms->n_hooks; i++) {
    const cairn_run_request *req = &ms->slots[i].req;
    for (size_t f = 0; f < req->n_feed; f++)
      ms->feeds[k++] = (cairn_feed){cairn__run_request_name(req, req->feed[f].name), req->feed[f].value};
  }
  /* Ops: the caller's, then each hook's (an op already in the list runs
     once, as TF fetching the same op twice). */
  for (size_t o = 0; o < args->n_ops; o++) ms->ops[o] = args->ops[o];
  *want_sums = 0;
  for (size_t i = 0; i < ms->n_hooks; i++) {
    const cairn_run_request *req = &ms->slots[i].req;
    *want_sums |= req->summaries;
    for (size_t o = 0; o < req->n_ops; o++) {
      size_t q = 0;
      while (q < n_ops && ms->ops[q] != req->ops[o]) q++;
      if (q == n_ops) ms->ops[n_ops++] = req->ops[o];
    }
  }
  /* Fetches: the caller's (under TF's 'caller' key), then each name a hook
     asks for, once. */
  for (size_t f = 0; f < args->n_fetches; f++) {
    ms->fetches[f].name = args->fetches[f].name;
    memset(&ms->fetches[f].value, 0, sizeof ms->fetches[f].value);
  }
  for (size_t i = 0; i < ms->n_hooks; i++) {
    hook_slot *sl = &ms->slots[i];
    if (!cairn__grow((void **)&sl->idx, &sl->cap_idx, sl->req.n_fetch ? sl->req.n_fetch : 1, sizeof *sl->idx))
      return cairn__fail(CAIRN_E_NOMEM, "run: out of memory");
    for (size_t f = 0; f < sl->req.n_fetch; f++) {
      const char *name = cairn__run_request_name(&sl->req, sl->req.fetch[f]);
      size_t q = 0;
      while (q < n_fetch && !(ms->fetches[q].name && !strcmp(ms->fetches[q].name, name))) q++;
      if (q == n_fetch) {
        ms->fetches[n_fetch].name = name;
        memset(&ms->fetches[n_fetch].value, 0, sizeof ms->fetches[n_fetch].value);
        n_fetch++;
      }
      sl->idx[f] = q;
    }
  }
  memset(merged, 0, sizeof *merged);
  merged->ops = ms->ops;
  merged->n_ops = n_ops;
  merged->feeds = ms->feeds;
  merged->n_feeds = n_feeds;
  merged->fetches = ms->fetches;
  merged->n_fetches = n_fetch;
  return CAIRN_OK;
}

/* Step 7: after_run of every hook with the values it asked for. */
static cairn_status run_after_hooks(cairn_monitored_session *ms, cairn_run_context *ctx) {
  for (size_t i = 0; i < ms->n_hooks; i++) {
    cairn_hook *h = ms->hooks[i];
    hook_slot *sl = &ms->slots[i];
    sl->vals.req = (sl->req.n_fetch || sl->req.summaries) ? &sl->req : NULL;
    sl->vals.merged = ms->fetches;
    sl->vals.idx = sl->idx;
    sl->vals.sums = sl->req.summaries ? ms->sums : NULL;
    sl->vals.n_sums = sl->req.summaries ? ms->n_sums : 0;
    sl->vals.sum_arena = ms->sum_arena;
    if (h->vt->after_run) {
      cairn_status st = h->vt->after_run(h->self, ctx, &sl->vals);
      if (st != CAIRN_OK) return st;
    }
  }
  return CAIRN_OK;
}

static cairn_status hooked_run(cairn_monitored_session *ms, const cairn_run_args *args) {
  if (ms->hook_stop) return cairn__fail(CAIRN_E_STATE, "Run called even after should_stop requested.");
  if (!ms->raw) return cairn__fail(CAIRN_E_STATE, "run: the monitored session has no session");
  if ((args->n_ops && !args->ops) || (args->n_feeds && !args->feeds) || (args->n_fetches && !args->fetches))
    return cairn__fail(CAIRN_E_NULL, "run: a list of ops, feeds or fetches is NULL");
  cairn_run_context ctx = {ms->raw, args, 0};
  for (size_t i = 0; i < ms->n_hooks; i++) cairn__run_request_reset(&ms->slots[i].req);
  size_t n_hook_feeds = 0;
  int want_sums = 0;
  cairn_run_args merged;
  cairn_status st = run_before_hooks(ms, &ctx, &n_hook_feeds);
  if (!st) st = check_user_feeds(ms, args);
  if (!st) st = merge_requests(ms, args, n_hook_feeds, &merged, &want_sums);
  if (st) return st;

  /* 6. one run of everything. */
  ms->n_sums = 0;
  ms->sum_len = 0;
  ms->sum_failed = 0;
  if (want_sums) {
    ms->user_sum_fn = args->summary_fn;
    ms->user_sum_ctx = args->summary_ctx;
    merged.summary_fn = collect_summary;
    merged.summary_ctx = ms;
  } else {
    merged.summary_fn = args->summary_fn;
    merged.summary_ctx = args->summary_ctx;
  }
  st = cairn_session_run(ms->raw, &merged);
  if (st != CAIRN_OK) return st; /* no after_run when the run failed */
  if (ms->sum_failed) return cairn__fail(CAIRN_E_NOMEM, "run: out of memory collecting summaries");
  for (size_t f = 0; f < args->n_fetches; f++) args->fetches[f].value = ms->fetches[f].value;
  if ((st = run_after_hooks(ms, &ctx)) != CAIRN_OK) return st;
  /* 8. */
  if (ctx.stop_requested) ms->hook_stop = 1;
  return CAIRN_OK;
}

/* ---- _CoordinatedSession.run ---- */
static cairn_status coord_run(cairn_monitored_session *ms, const cairn_run_args *args) {
  cairn_status st = hooked_run(ms, args);
  if (st == CAIRN_OK || is_preemption(st) || !ms->coord) return st;
  /* A non-preemption error may have been caused by a preemption reported
     to the coordinator: raise that root cause instead. */
  const char *msg;
  cairn_status ce = cairn_coordinator_error(ms->coord, &msg);
  if (is_preemption(ce)) return cairn__fail(ce, "%s", msg ? msg : cairn_status_str(ce));
  return st;
}

/* ---- the coordinated session creator (TF's _CoordinatedSessionCreator) ---- */
static cairn_status create_stack(cairn_monitored_session *ms) {
  cairn_session *raw = NULL;
  cairn_status st = cairn_session_creator_create(ms->creator, &raw);
  if (st != CAIRN_OK) return st;
  cairn_coordinator *coord = NULL;
  st = cairn__coordinator_new(&coord);
  if (st != CAIRN_OK) {
    cairn_session_free(raw);
    return st;
  }
  ms->raw = raw;
  ms->coord = coord;
  ms->hook_stop = 0; /* a new _HookedSession */
  for (size_t i = 0; i < ms->n_hooks; i++) {
    cairn_hook *h = ms->hooks[i];
    if (!h->vt->after_create_session) continue;
    st = h->vt->after_create_session(h->self, raw, coord);
    if (st != CAIRN_OK) {
      char *held = cairn__errmsg_hold();
      (void)cairn__coordinator_join(ms->coord);
      cairn__coordinator_free(ms->coord);
      cairn_session_free(ms->raw);
      ms->raw = NULL;
      ms->coord = NULL;
      return cairn__fail_held(st, held);
    }
  }
  return CAIRN_OK;
}

/* ---- _CoordinatedSession.close: request stop, join (re-raising what the
   coordinator recorded), then close the hooked and raw sessions, whose
   errors are suppressed. */
static cairn_status close_stack(cairn_monitored_session *ms) {
  cairn_status st = CAIRN_OK;
  if (ms->coord) {
    st = cairn__coordinator_join_env(ms->coord, ms->grace_secs, ms->env);
    cairn__coordinator_free(ms->coord);
    ms->coord = NULL;
  }
  if (ms->raw && !ms->hooked_only) cairn_session_free(ms->raw);
  ms->raw = NULL;
  return st;
}

/* Counts one session re-creation against max_recoveries; on exceeding it
   returns the error that caused it, saying so. */
static cairn_status may_recover(cairn_monitored_session *ms, int *recoveries, cairn_status cause,
                                const char *why) {
  if (ms->max_recoveries >= 0 && *recoveries >= ms->max_recoveries)
    return cairn__fail(cause,
                       "gave up after %d session re-creation(s) in one call (max_recoveries %d; TF retries "
                       "forever): %s",
                       *recoveries, ms->max_recoveries, why);
  (*recoveries)++;
  if (ms->backoff_secs > 0) cairn_env_sleep(ms->env, ms->backoff_secs);
  return CAIRN_OK;
}

/* One recovery from a preemption error (the current message): logs it
   with `what` happens now, closes the inner session when there is one
   (errors of the close other than preemption propagate: TF's
   _WrappedSession.close swallows only those) and decides whether to go
   on. */
static cairn_status recover(cairn_monitored_session *ms, int *recoveries, cairn_status cause, int close,
                            const char *what) {
  char *held = cairn__errmsg_hold();
  const char *why = held ? held : "(out of memory for the message)";
  cairn_env_log(ms->env, CAIRN_LOG_INFO, "%s Error: %s", what, why);
  cairn_status st = close ? close_stack(ms) : CAIRN_OK;
  if (st == CAIRN_OK || is_preemption(st)) st = may_recover(ms, recoveries, cause, why);
  free(held);
  return st;
}

/* _RecoverableSession._create_session: retried while creation fails with a
   preemption error (test_retry_initialization_on_aborted_error). */
static cairn_status recoverable_create(cairn_monitored_session *ms, int *recoveries) {
  for (;;) {
    cairn_status st = create_stack(ms);
    if (st == CAIRN_OK || !ms->should_recover || !is_preemption(st)) return st;
    st = recover(ms, recoveries, st, 0,
                 "An error was raised while a session was being created. This may be due to a preemption "
                 "of a connected worker or parameter server. A new session will be created.");
    if (st != CAIRN_OK) return st;
  }
}

/* Closes the inner session after a preemption error and decides whether to
   go on. */
static cairn_status recover_after(cairn_monitored_session *ms, int *recoveries, cairn_status cause) {
  return recover(ms, recoveries, cause, 1,
                 "An error was raised. This may be due to a preemption in a connected worker or parameter "
                 "server. The current session will be closed and a new session will be created.");
}

static cairn_status recoverable_run(cairn_monitored_session *ms, const cairn_run_args *args) {
  int recoveries = 0;
  for (;;) {
    cairn_status st;
    if (!ms->raw) {
      st = recoverable_create(ms, &recoveries);
      if (st != CAIRN_OK) return st;
    }
    st = coord_run(ms, args);
    if (!is_preemption(st)) return st;
    st = recover_after(ms, &recoveries, st);
    if (st != CAIRN_OK) return st;
  }
}

cairn_status cairn_monitored_session_run(cairn_monitored_session *ms, const cairn_run_args *args) {
  if (!ms) return cairn__fail(CAIRN_E_NULL, "monitored_session_run: ms is NULL");
  if (!args) args = &empty_args;
  if (ms->closed) return ms_ret(ms, cairn__fail(CAIRN_E_STATE, "Run called on a closed MonitoredSession."));
  if (ms->in_run)
    return ms_ret(ms, cairn__fail(CAIRN_E_STATE,
                                  "monitored_session_run: called from inside a run of the same session (a "
                                  "hook or an op); use the raw session there"));
  ms->in_run = 1;
  cairn_status st;
  if (ms->should_recover)
    st = recoverable_run(ms, args);
  else if (ms->hooked_only)
    st = hooked_run(ms, args);
  else
    st = coord_run(ms, args);
  ms->in_run = 0;
  return ms_ret(ms, st);
}

/* ---- run_step_fn ---- */

struct cairn_step_context {
  cairn_monitored_session *ms;
  int stop_requested;
};

cairn_session *cairn_step_context_session(const cairn_step_context *ctx) { return ctx ? ctx->ms->raw : NULL; }

cairn_status cairn_step_context_run_with_hooks(cairn_step_context *ctx, const cairn_run_args *args) {
  if (!ctx) return cairn__fail(CAIRN_E_NULL, "step_context_run_with_hooks: ctx is NULL");
  if (ctx->stop_requested) return cairn__fail(CAIRN_E_STOP, "step_fn has requested the iterations to stop.");
  cairn_monitored_session *ms = ctx->ms;
  if (!args) args = &empty_args;
  if (ms->in_run)
    return cairn__fail(CAIRN_E_STATE, "step_context_run_with_hooks: called from inside a run of the same session");
  ms->in_run = 1;
  /* The coordinated session's run: no retry here, preemption errors escape
     to run_step_fn, which re-runs the whole step function. */
  cairn_status st = ms->hooked_only ? hooked_run(ms, args) : coord_run(ms, args);
  ms->in_run = 0;
  return st;
}

cairn_status cairn_step_context_request_stop(cairn_step_context *ctx) {
  if (!ctx) return cairn__fail(CAIRN_E_NULL, "step_context_request_stop: ctx is NULL");
  ctx->stop_requested = 1;
  return cairn__fail(CAIRN_E_STOP, "step_fn has requested the iterations to stop.");
}

cairn_status cairn_monitored_session_run_step_fn(cairn_monitored_session *ms, cairn_step_fn fn, void *user) {
  if (!ms || !fn) return cairn__fail(CAIRN_E_NULL, "monitored_session_run_step_fn: %s is NULL", ms ? "fn" : "ms");
  if (ms->closed) return ms_ret(ms, cairn__fail(CAIRN_E_STATE, "run_step_fn called on a closed MonitoredSession."));
  int recoveries = 0;
  for (;;) {
    cairn_status st;
    if (!ms->raw) {
      if (!ms->should_recover)
        return ms_ret(ms, cairn__fail(CAIRN_E_STATE, "run_step_fn: the monitored session has no session"));
      st = recoverable_create(ms, &recoveries);
      if (st != CAIRN_OK) return ms_ret(ms, st);
    }
    cairn_step_context ctx = {ms, 0};
    st = fn(&ctx, user);
    if (!ms->should_recover || !is_preemption(st)) return ms_ret(ms, st);
    st = recover_after(ms, &recoveries, st);
    if (st != CAIRN_OK) return ms_ret(ms, st);
  }
}

/* stop_on_signals: takes note of a SIGTERM or SIGINT caught since the
   session was created, once, with a log line naming the last step done. */
static int signal_stop(cairn_monitored_session *ms) {
  if (ms->stop_signal || !ms->signals_installed) return ms->stop_signal != 0;
  int sig = cairn__stop_signals_caught();
  if (!sig) return 0;
  ms->stop_signal = sig;
  int64_t step;
  if (ms->raw && cairn_session_global_step(ms->raw, &step) == CAIRN_OK)
    cairn_env_log(ms->env, CAIRN_LOG_WARN, "received %s: stopping after step %lld", cairn__signal_name(sig),
                  (long long)step);
  else
    cairn_env_log(ms->env, CAIRN_LOG_WARN, "received %s: stopping after the step in flight", cairn__signal_name(sig));
  return 1;
}

/* CheckpointSaverHook's asynchronous save: its commit (listeners) or its
   failure, seen here as well as in the next run. A failure is recorded in
   the coordinator, so that should_stop raises it below and close's join
   again. Returns 1 when it failed (hooked layer alone: no coordinator). */
static int poll_saves(cairn_monitored_session *ms, int wait) {
  for (size_t i = 0; i < ms->n_hooks; i++) {
    int stop = 0;
    cairn_status st = cairn__checkpoint_hook_poll(ms->hooks[i], ms->raw, wait, &stop);
    if (stop) ms->hook_stop = 1;
    if (st == CAIRN_OK) continue;
    if (ms->coord) cairn_coordinator_request_stop(ms->coord, st, "%s", cairn_errmsg());
    ms_ret(ms, st);
    return 1;
  }
  return 0;
}

/* ---- should_stop ---- */
int cairn_monitored_session_should_stop(cairn_monitored_session *ms) {
  if (!ms || ms->closed) return 1;
  if (signal_stop(ms)) {
    (void)poll_saves(ms, 1); /* a preempted job keeps the save it was writing */
    return 1;
  }
  if (poll_saves(ms, 0) && ms->hooked_only) return 1;
  if (ms->hooked_only) return ms->hook_stop;
  if (!ms->raw) return 1; /* _RecoverableSession without a session */
  const char *msg;
  cairn_status ce = cairn_coordinator_error(ms->coord, &msg);
  if (ce != CAIRN_OK) {
    /* _CoordinatedSession._check_stop re-raises it. */
    cairn__fail(ce, "%s", msg ? msg : cairn_status_str(ce));
    ms_ret(ms, ce);
    if (!ms->should_recover || !is_preemption(ce)) return 1; /* TF: True (Singular: raises) */
    int recoveries = 0;
    cairn_status st = recover_after(ms, &recoveries, ce);
    if (st == CAIRN_OK) st = recoverable_create(ms, &recoveries);
    if (st != CAIRN_OK) {
      ms_ret(ms, st);
      return 1;
    }
    return 0; /* just re-created: the computation should not stop */
  }
  return cairn_coordinator_should_stop(ms->coord) || ms->hook_stop;
}

/* ---- close ---- */
static cairn_status close_internal(cairn_monitored_session *ms, int clean, cairn_status why) {
  if (ms->closed) return cairn__fail(CAIRN_E_STATE, "Session is already closed.");
  cairn_status st = CAIRN_OK;
  char *held = NULL; /* the failed end()'s message */
  (void)signal_stop(ms); /* reported even when the caller never asked should_stop */
  if (ms->hooked_only) {
    /* _HookedSession.close: no end(). */
  } else if (clean) {
    for (size_t i = 0; i < ms->n_hooks; i++) {
      cairn_hook *h = ms->hooks[i];
      if (!h->vt->end) continue;
      st = h->vt->end(h->self, ms->raw);
      if (st != CAIRN_OK) {
        held = cairn__errmsg_hold();
        break;
      }
    }
  } else {
    for (size_t i = 0; i < ms->n_hooks; i++)
      if (ms->hooks[i]->vt->on_error) ms->hooks[i]->vt->on_error(ms->hooks[i]->self, why);
  }
  (void)signal_stop(ms); /* one that came during end(): its save is done */
  if (ms->signals_installed) cairn__stop_signals_restore(ms);
  ms->signals_installed = 0;
  cairn_status cst = close_stack(ms);
  if (cst != CAIRN_OK && ms->should_recover && is_preemption(cst)) {
    cairn_env_log(ms->env, CAIRN_LOG_ERROR, "An error occurred while closing the session: %s", cairn_errmsg());
    cst = CAIRN_OK; /* _RecoverableSession's close swallows these */
  }
  ms->closed = 1;
  if (ms->registry && !ms->was_finalized) cairn_registry_unfinalize(ms->registry);
  if (cst != CAIRN_OK) { /* the join's error wins, as Python's finally */
    free(held);
    return cst;
  }
  return cairn__fail_held(st, held);
}

cairn_status cairn_monitored_session_close(cairn_monitored_session *ms) {
  if (!ms) return cairn__fail(CAIRN_E_NULL, "monitored_session_close: ms is NULL");
  return ms_ret(ms, close_internal(ms, 1, CAIRN_OK));
}

cairn_status cairn_monitored_session_close_with(cairn_monitored_session *ms, cairn_status body_status) {
  if (!ms) return cairn__fail(CAIRN_E_NULL, "monitored_session_close_with: ms is NULL");
  /* OutOfRange (end of data) and StopIteration (request_stop in a step
     function) end the with-block cleanly: end() runs, nothing propagates. */
  if (body_status == CAIRN_OK || body_status == CAIRN_E_OUT_OF_RANGE || body_status == CAIRN_E_STOP)
    return ms_ret(ms, close_internal(ms, 1, CAIRN_OK));
  char *held = cairn__errmsg_hold();
  if (!ms->closed) (void)close_internal(ms, 0, body_status);
  return ms_ret(ms, cairn__fail_held(body_status, held));
}

/* Deprecated name (cairn/monitored.h). */
cairn_status cairn_monitored_session_exit(cairn_monitored_session *ms, cairn_status body_status) {
  return cairn_monitored_session_close_with(ms, body_status);
}

cairn_session *cairn_monitored_session_raw_session(const cairn_monitored_session *ms) {
  return ms && !ms->closed ? ms->raw : NULL;
}

const char *cairn_monitored_session_errmsg(const cairn_monitored_session *ms) { return ms ? ms->err : ""; }

int cairn_monitored_session_stop_signal(const cairn_monitored_session *ms) { return ms ? ms->stop_signal : 0; }

cairn_coordinator *cairn__monitored_session_coordinator(const cairn_monitored_session *ms) {
  return ms && !ms->closed ? ms->coord : NULL;
}

void cairn_monitored_session_free(cairn_monitored_session *ms) {
  if (!ms) return;
  if (!ms->closed) (void)close_internal(ms, 0, CAIRN_E_CANCELLED);
  if (ms->slots)
    for (size_t i = 0; i < ms->n_hooks; i++) {
      cairn__run_request_free(&ms->slots[i].req);
      free(ms->slots[i].idx);
    }
  free(ms->slots);
  free(ms->feeds);
  free(ms->fetches);
  free(ms->ops);
  free(ms->sums);
  free(ms->sum_arena);
  free(ms->hooks);
  for (size_t i = 0; i < ms->n_owned_hooks; i++) cairn_hook_free(ms->owned_hooks[i]);
  free(ms->owned_hooks);
  if (ms->own_creator) cairn_session_creator_free(ms->creator);
  cairn_scaffold_free(ms->owned_scaffold);
  free(ms);
}

/* Allocates ms with its hook list and scratch; takes what cfg gives it. */
static cairn_status ms_alloc(const cairn__monitored_config *cfg, cairn_monitored_session **out) {
  cairn_monitored_session *ms = calloc(1, sizeof *ms);
  if (ms) {
    ms->creator = cfg->creator;
    ms->own_creator = cfg->own_creator;
    ms->owned_hooks = cfg->owned_hooks;
    ms->n_owned_hooks = cfg->n_owned_hooks;
    ms->owned_scaffold = cfg->owned_scaffold;
    ms->closed = 1; /* until a session exists: free() must not call hooks */
  }
  int ok = ms != NULL;
  if (ok && cfg->n_hooks) {
    ms->hooks = malloc(cfg->n_hooks * sizeof *ms->hooks);
    ms->slots = calloc(cfg->n_hooks, sizeof *ms->slots);
    ok = ms->hooks && ms->slots;
    if (ok) {
      ms->n_hooks = cfg->n_hooks;
      memcpy(ms->hooks, cfg->hooks, cfg->n_hooks * sizeof *ms->hooks);
    }
  }
  if (!ok) {
    if (ms) {
      cairn_monitored_session_free(ms);
    } else {
      for (size_t i = 0; i < cfg->n_owned_hooks; i++) cairn_hook_free(cfg->owned_hooks[i]);
      free(cfg->owned_hooks);
      if (cfg->own_creator) cairn_session_creator_free(cfg->creator);
      cairn_scaffold_free(cfg->owned_scaffold);
    }
    return cairn__fail(CAIRN_E_NOMEM, "monitored_session_new: out of memory");
  }
  *out = ms;
  return CAIRN_OK;
}

static cairn_status free_and_fail(cairn_monitored_session *ms, cairn_status st) {
  char *held = cairn__errmsg_hold();
  cairn_monitored_session_free(ms);
  return cairn__fail_held(st, held);
}

cairn_status cairn__monitored_session_new(const cairn__monitored_config *cfg, cairn_monitored_session **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "monitored_session_new: out is NULL");
  *out = NULL;
  if (cairn__env_check(cfg->env, "monitored_session_new") != CAIRN_OK) return CAIRN_E_INVALID;
  for (size_t i = 0; i < cfg->n_hooks; i++)
    if (!cfg->hooks[i]) {
      cairn__monitored_config c = *cfg;
      c.n_hooks = 0;
      cairn_monitored_session *tmp = NULL;
      if (ms_alloc(&c, &tmp) == CAIRN_OK) cairn_monitored_session_free(tmp);
      return cairn__fail(CAIRN_E_NULL, "monitored_session_new: hooks[%zu] is NULL", i);
    }
  cairn_monitored_session *ms = NULL;
  cairn_status st = ms_alloc(cfg, &ms);
  if (st != CAIRN_OK) return st;
  ms->should_recover = cfg->should_recover;
  ms->grace_secs = cfg->stop_grace_period_secs;
  ms->max_recoveries = cfg->max_recoveries;
  ms->backoff_secs = cfg->recovery_backoff_secs;
  ms->env = cfg->env;
  ms->registry = cfg->registry ? cfg->registry : cairn__session_creator_registry(cfg->creator);
  /* 1. remember whether the graph was finalized. */
  ms->was_finalized = ms->registry ? cairn_registry_is_finalized(ms->registry) : 1;
  /* 2. begin() of every hook, in order, registry still open. */
  for (size_t i = 0; i < ms->n_hooks; i++) {
    cairn_hook *h = ms->hooks[i];
    if (h->vt->begin && (st = h->vt->begin(h->self, ms->registry)) != CAIRN_OK) return free_and_fail(ms, st);
  }
  /* 3-4. create the session (through the recoverable layer if any). */
  int recoveries = 0;
  st = ms->should_recover ? recoverable_create(ms, &recoveries) : create_stack(ms);
  if (st != CAIRN_OK) {
    /* Hooks got begin() and will never get end() (TF). The registry goes
       back to its state before, so that the caller may fix and retry. */
    if (ms->registry && !ms->was_finalized) cairn_registry_unfinalize(ms->registry);
    return free_and_fail(ms, st);
  }
  ms->closed = 0;
  /* 5. SIGTERM/SIGINT handlers, once there is a session to stop: a signal
     during the creation ends the process as it would without them (nothing
     has been trained yet), and a worker waiting for its chief stays
     killable. */
  if (cfg->stop_on_signals) {
    if ((st = cairn__stop_signals_install(ms)) != CAIRN_OK) return free_and_fail(ms, st);
    ms->signals_installed = 1;
  }
  *out = ms;
  return CAIRN_OK;
}

cairn_status cairn__hooked_session_new(cairn_session *raw, cairn_hook *const *hooks, size_t n_hooks,
                                       cairn_monitored_session **out) {
  if (!out || !raw) return cairn__fail(CAIRN_E_NULL, "hooked_session_new: %s is NULL", out ? "raw" : "out");
  cairn__monitored_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.hooks = hooks;
  cfg.n_hooks = n_hooks;
  cairn_monitored_session *ms = NULL;
  cairn_status st = ms_alloc(&cfg, &ms);
  if (st != CAIRN_OK) return st;
  ms->hooked_only = 1;
  ms->raw = raw;
  ms->was_finalized = 1;
  ms->closed = 0;
  *out = ms;
  return CAIRN_OK;
}

cairn_monitored_session_options cairn_monitored_session_options_default(void) {
  return (cairn_monitored_session_options){.stop_grace_period_secs = 120.0, .max_recoveries = 10};
}

cairn_status cairn_monitored_session_new(const cairn_monitored_session_options *o, cairn_monitored_session **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "monitored_session_new: out is NULL");
  *out = NULL;
  if (!o) return cairn__fail(CAIRN_E_NULL, "monitored_session_new: options are NULL");
  if (o->n_hooks && !o->hooks) return cairn__fail(CAIRN_E_NULL, "monitored_session_new: hooks is NULL");
  cairn__monitored_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.registry = o->registry;
  cfg.creator = o->session_creator;
  if (!cfg.creator) {
    /* TF's default: ChiefSessionCreator() with a default Scaffold. */
    if (!o->registry)
      return cairn__fail(CAIRN_E_NULL,
                         "monitored_session_new: no session_creator and no registry for the default one");
    cairn_chief_session_creator_options co = cairn_chief_session_creator_options_default();
    co.registry = o->registry;
    co.sm.env = o->env;
    cairn_status st = cairn_chief_session_creator_new(&co, &cfg.creator);
    if (st != CAIRN_OK) return st;
    cfg.own_creator = 1;
  }
  cfg.hooks = o->hooks;
  cfg.n_hooks = o->n_hooks;
  CAIRN__MONITORED_CFG_RECOVERING(cfg, o);
  return cairn__monitored_session_new(&cfg, out);
}

cairn_singular_monitored_session_options cairn_singular_monitored_session_options_default(void) {
  return (cairn_singular_monitored_session_options){.stop_grace_period_secs = 120.0,
                                                    .sm = cairn_session_manager_options_default()};
}

cairn_status cairn_singular_monitored_session_new(const cairn_singular_monitored_session_options *o,
                                                  cairn_monitored_session **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "singular_monitored_session_new: out is NULL");
  *out = NULL;
  if (!o) return cairn__fail(CAIRN_E_NULL, "singular_monitored_session_new: options are NULL");
  if (o->n_hooks && !o->hooks) return cairn__fail(CAIRN_E_NULL, "singular_monitored_session_new: hooks is NULL");
  cairn_chief_session_creator_options co = cairn_chief_session_creator_options_default();
  co.registry = o->registry;
  co.scaffold = o->scaffold;
  co.checkpoint_dir = o->checkpoint_dir;
  co.checkpoint_filename_with_path = o->checkpoint_filename_with_path;
  co.sm = o->sm;
  if (!co.sm.env) co.sm.env = o->env;
  cairn__monitored_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cairn_status st = cairn_chief_session_creator_new(&co, &cfg.creator);
  if (st != CAIRN_OK) return st;
  cfg.own_creator = 1;
  cfg.registry = o->registry;
  cfg.hooks = o->hooks;
  cfg.n_hooks = o->n_hooks;
  cfg.should_recover = 0;
  cfg.stop_grace_period_secs = o->stop_grace_period_secs;
  cfg.max_recoveries = 0;
  cfg.env = o->env;
  return cairn__monitored_session_new(&cfg, out);
}
