/* SIGTERM and SIGINT as a stop request for a monitored session that asked
 * for it (stop_on_signals): batch schedulers send SIGTERM some time before
 * they preempt a job, and Ctrl-C sends SIGINT; with the handlers below the
 * step in flight finishes, hooks' end() saves a final checkpoint, and only
 * a second signal ends the process at once.
 *
 * The handler does only async-signal-safe things: it stores the signal
 * number in a volatile sig_atomic_t and resets both signals to their
 * default action with sigaction(). The monitored session reads the flag
 * between steps (cairn__stop_signals_caught). The dispositions are process
 * wide, so one monitored session at a time owns them; the previous ones are
 * put back when it closes. */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>

#include "monitored_impl.h"

static const int SIGS[2] = {SIGTERM, SIGINT};

static volatile sig_atomic_t g_caught; /* the first signal caught, 0 none */
static struct sigaction g_dfl;         /* SIG_DFL, filled before any handler runs */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static const void *g_owner;             /* under g_mu */
static struct sigaction g_old[2];       /* what was there before (under g_mu) */
static int g_ours[2];                   /* 1: we replaced SIGS[i] */

static void on_stop_signal(int sig) {
  if (g_caught == 0) {
    g_caught = sig;
    /* The next SIGTERM or SIGINT takes the default action: ends the
       process at once, even in the middle of the final save. */
    for (int i = 0; i < 2; i++)
      if (g_ours[i]) sigaction(SIGS[i], &g_dfl, NULL);
    return;
  }
  /* A second signal that arrived (another thread) before the reset above. */
  sigaction(sig, &g_dfl, NULL);
  raise(sig);
}

cairn_status cairn__stop_signals_install(const void *owner) {
  pthread_mutex_lock(&g_mu);
  if (g_owner) {
    pthread_mutex_unlock(&g_mu);
    return cairn__fail(CAIRN_E_STATE,
                       "stop_on_signals: another monitored session already stops on SIGTERM and SIGINT (signal "
                       "dispositions are per process); close it first");
  }
  memset(&g_dfl, 0, sizeof g_dfl);
  g_dfl.sa_handler = SIG_DFL;
  sigemptyset(&g_dfl.sa_mask);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 2; i++) sigaddset(&sa.sa_mask, SIGS[i]);
  /* SA_RESTART: reads and writes of a save in progress are restarted, not
     failed with EINTR. */
  sa.sa_flags = SA_RESTART;
  g_caught = 0;
  for (int i = 0; i < 2; i++) {
    g_ours[i] = 0;
    if (sigaction(SIGS[i], NULL, &g_old[i]) != 0) continue;
    /* A signal the process ignores stays ignored (nohup, a background job
       of a non-interactive shell ignores SIGINT): the handler would make it
       stop the training where it used to do nothing. */
    if (!(g_old[i].sa_flags & SA_SIGINFO) && g_old[i].sa_handler == SIG_IGN) continue;
    if (sigaction(SIGS[i], &sa, NULL) == 0) g_ours[i] = 1;
  }
  g_owner = owner;
  pthread_mutex_unlock(&g_mu);
  return CAIRN_OK;
}

void cairn__stop_signals_restore(const void *owner) {
  pthread_mutex_lock(&g_mu);
  if (owner && g_owner == owner) {
    for (int i = 0; i < 2; i++)
      if (g_ours[i]) sigaction(SIGS[i], &g_old[i], NULL);
    g_ours[0] = g_ours[1] = 0;
    g_owner = NULL;
  }
  pthread_mutex_unlock(&g_mu);
}

int cairn__stop_signals_caught(void) { return (int)g_caught; }

const char *cairn__signal_name(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    default: return "a signal";
  }
}
