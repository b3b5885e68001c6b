/* Private interface of the monitored session (lib/monitored_session.c),
 * its coordinator (lib/coordinator.c), session creators
 * (lib/session_creator.c) and signal handlers (lib/stop_signals.c), used by
 * lib/monitored_training.c and the tests (which link libcairn_core
 * statically); never installed. The hook objects' own private interface is
 * lib/hook_impl.h, included here for the tests that drive hooks directly. */
#ifndef CAIRN_MONITORED_IMPL_H
#define CAIRN_MONITORED_IMPL_H

#include "cairn/monitored.h"
#include "hook_impl.h"

/* The registry a creator works on (the chief/worker creators know it;
 * NULL for a custom creator). */
cairn_registry *cairn__session_creator_registry(const cairn_session_creator *c);

/* Everything a monitored session is built from. Ownership: when own_creator
 * is set the session frees the creator; owned_hooks[0..n_owned) are freed
 * with the session (they must also appear in hooks); owned_scaffold too. */
typedef struct cairn__monitored_config {
  cairn_registry *registry; /* may be NULL: taken from the creator */
  cairn_session_creator *creator;
  int own_creator;
  cairn_hook *const *hooks;
  size_t n_hooks;
  cairn_hook **owned_hooks; /* array malloc'ed by the caller; the session takes it */
  size_t n_owned_hooks;
  cairn_scaffold *owned_scaffold;
  int should_recover;
  double stop_grace_period_secs;
  int max_recoveries;
  double recovery_backoff_secs;
  const cairn_env *env;
  int stop_on_signals; /* the options' stop_on_signals (lib/stop_signals.c) */
} cairn__monitored_config;

/* A recovering session (MonitoredSession, MonitoredTrainingSession): the
 * fields both public option structs carry under the same names. */
#define CAIRN__MONITORED_CFG_RECOVERING(cfg, o)                \
  do {                                                         \
    (cfg).should_recover = 1;                                  \
    (cfg).stop_grace_period_secs = (o)->stop_grace_period_secs; \
    (cfg).max_recoveries = (o)->max_recoveries;                \
    (cfg).recovery_backoff_secs = (o)->recovery_backoff_secs;  \
    (cfg).env = (o)->env;                                      \
    (cfg).stop_on_signals = (o)->stop_on_signals;              \
  } while (0)

/* Builds a monitored session from cfg. On error everything cfg says the
 * session owns is freed all the same. */
cairn_status cairn__monitored_session_new(const cairn__monitored_config *cfg, cairn_monitored_session **out);

/* TF's _HookedSession(sess, hooks) on its own, for tests of hooks: runs go
 * through before_run/after_run of hooks on the borrowed session `raw`; no
 * begin(), after_create_session() or end() is called (call them with the
 * cairn__hook_* helpers of lib/hook_impl.h), no coordinator, no recovery.
 * Close does not close raw. */
cairn_status cairn__hooked_session_new(cairn_session *raw, cairn_hook *const *hooks, size_t n_hooks,
                                       cairn_monitored_session **out);

/* The coordinator of the current session (NULL when closed). */
cairn_coordinator *cairn__monitored_session_coordinator(const cairn_monitored_session *ms);

/* Standalone coordinators (tests of hooks that take one). */
cairn_status cairn__coordinator_new(cairn_coordinator **out);
/* request_stop, then the registered joins, in order; returns the recorded
 * error (TF's coord.join re-raising it). */
cairn_status cairn__coordinator_join(cairn_coordinator *c);
/* The same as TF's coord.join(stop_grace_period_secs): a warning on env's
 * log when the joins took longer than grace_secs (> 0). */
cairn_status cairn__coordinator_join_env(cairn_coordinator *c, double grace_secs, const cairn_env *env);
void cairn__coordinator_free(cairn_coordinator *c);

/* SIGTERM and SIGINT handlers for one monitored session at a time
 * (lib/stop_signals.c). install: CAIRN_E_STATE when another owner holds
 * them; a signal the process ignores is left ignored. restore: puts the
 * previous dispositions back (nothing unless owner installed them).
 * caught: the first signal caught since install, 0 if none. */
cairn_status cairn__stop_signals_install(const void *owner);
void cairn__stop_signals_restore(const void *owner);
int cairn__stop_signals_caught(void);
/* "SIGTERM", "SIGINT" ("a signal" otherwise). */
const char *cairn__signal_name(int sig);

#endif
