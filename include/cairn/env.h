/* cairn/env.h — the environment a caller can replace: clock, sleep, log.
 *
 * A base header (it needs only the status codes): every layer that waits
 * or logs takes a const cairn_env *, so that tests of timed behaviour
 * (recovery_wait_secs, max_wait_secs, every_n_secs) run on a fake clock in
 * microseconds and a program can route cairn's log lines into its own.
 * NULL members (or a NULL env) mean CLOCK_MONOTONIC, nanosleep and stderr.
 * cairn/session.h includes this header, where it was declared first.
 */
#ifndef CAIRN_ENV_H
#define CAIRN_ENV_H

#include "cairn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cairn_log_level {
  CAIRN_LOG_DEBUG = 0,
  CAIRN_LOG_INFO = 1,
  CAIRN_LOG_WARN = 2,
  CAIRN_LOG_ERROR = 3
} cairn_log_level;

/* now: seconds on a monotonic clock; sleep: wait secs (>= 0); log: one
 * message, no trailing newline. Any member may be NULL (the default); the
 * env itself must outlive every object it is given to. A fake clock for
 * tests makes sleep advance now. Must be thread-safe if given to objects
 * used from several threads. */
typedef struct cairn_env {
  double (*now)(void *ctx);
  void (*sleep)(void *ctx, double secs);
  void (*log)(void *ctx, cairn_log_level level, const char *msg);
  void *ctx;
  cairn_log_level min_level; /* the default log sink drops messages below it
                                (0 = DEBUG: zero-filled env logs everything;
                                NULL env means INFO) */
} cairn_env;

/* The env's clock, sleep and log, with the defaults for NULL members (env
 * may be NULL). cairn_env_log formats printf-style. */
CAIRN_API double cairn_env_now(const cairn_env *env);
CAIRN_API void cairn_env_sleep(const cairn_env *env, double secs);
CAIRN_API void cairn_env_log(const cairn_env *env, cairn_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#ifdef __cplusplus
}
#endif
#endif
