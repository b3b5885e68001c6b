/* The environment: cairn_env's clock, sleep and log (cairn/session.h) with
 * their defaults (CLOCK_MONOTONIC, nanosleep, stderr), and the parsers of
 * the environment variables that tune the library (CAIRN_NUM_THREADS,
 * CAIRN_GEMM_BLOCKS, CAIRN_STREAM_MIN_BYTES, ...). Calls nothing else of
 * cairn's, so that every layer may use it. */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cairn/session.h"
#include "table.h"

/* ==== environment variables ============================================================ */

long cairn__env_long(const char *name, long dflt, long lo, long hi) {
  const char *v = getenv(name);
  if (!v || !*v) return dflt;
  char *end;
  errno = 0;
  long n = strtol(v, &end, 10);
  return *end == '\0' && errno == 0 && n >= lo && n <= hi ? n : dflt;
}

int cairn__env_threads(const char *name) {
  const char *v = getenv(name);
  if (!v || !*v) return 0;
  char *end;
  long n = strtol(v, &end, 10);
  return (*end == '\0' || *end == ',') && n >= 1 && n <= 4096 ? (int)n : 0;
}

/* ==== cairn_env: clock, sleep, log ====================================================== */

static double default_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void default_sleep(double secs) {
  if (!(secs > 0)) return;
  struct timespec ts;
  ts.tv_sec = (time_t)secs;
  ts.tv_nsec = (long)((secs - (double)ts.tv_sec) * 1e9);
  if (ts.tv_nsec >= 1000000000L) ts.tv_nsec = 999999999L;
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

cairn_status cairn__env_check(const cairn_env *env, const char *fn) {
  if (!env) return CAIRN_OK;
  cairn_env copy; /* members past the caller's size would be NULL here */
  return cairn__table_copy(&copy, sizeof copy, env, offsetof(cairn_env, struct_size), fn, "env", "cairn_env", NULL);
}

cairn_status cairn_env_check(const cairn_env *env) { return cairn__env_check(env, "env_check"); }

double cairn_env_now(const cairn_env *env) {
  if (env && env->now) return env->now(env->self);
  return default_now();
}

void cairn_env_sleep(const cairn_env *env, double secs) {
  if (env && env->sleep) {
    env->sleep(env->self, secs);
    return;
  }
  default_sleep(secs);
}

void cairn_env_log(const cairn_env *env, cairn_log_level level, const char *fmt, ...) {
  cairn_log_level min = env ? env->min_level : CAIRN_LOG_INFO;
  if (!(env && env->log) && level < min) return;
  char msg[CAIRN__ERRMSG_LEN];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (env && env->log) {
    env->log(env->self, level, msg);
    return;
  }
  static const char *const names[] = {"DEBUG", "INFO", "WARNING", "ERROR"};
  int li = (int)level;
  if (li < 0) li = 0;
  if (li > 3) li = 3;
  fprintf(stderr, "cairn %s: %s\n", names[li], msg);
}
