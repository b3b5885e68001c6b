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

#include <stddef.h>

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
 * used from several threads. A function table like the others
 * (CONTRIBUTING, "Function tables"): a zero-filled cairn_env is valid, and
 * members added later go after struct_size. */
typedef struct cairn_env {
  double (*now)(void *self);
  void (*sleep)(void *self, double secs);
  void (*log)(void *self, cairn_log_level level, const char *msg);
  /* The object the callbacks get. `ctx` is its name of cairn 0.1, kept as
     the same member through an anonymous union (C11, C++; one of the two
     names is enough, and `self` is the one to use: doc/deprecated.md). */
  union {
    void *self;
    void *ctx;
  };
  cairn_log_level min_level; /* the default log sink drops messages below it
                                (0 = DEBUG: zero-filled env logs everything;
                                NULL env means INFO) */
  /* The table's size: 0 means this layout, the first one; otherwise the
     caller's sizeof(cairn_env), or CAIRN_ENV_SIZE. Members past a caller's
     size are taken as NULL. */
  size_t struct_size;
} cairn_env;

#define CAIRN_ENV_SIZE sizeof(cairn_env)

/* CAIRN_OK for env NULL or a valid table; CAIRN_E_INVALID when
 * env->struct_size is neither 0 nor at least the size of the first layout
 * ("env: struct_size is 3, less than the ... bytes of the first cairn_env
 * layout; set it to 0 or to sizeof(cairn_env)"). Every constructor that
 * takes an env (the monitored sessions, the hooks, timers, the
 * SessionManager, the Saver, the event writer, the checkpoint directory)
 * checks it this way and fails with this error. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_env_check(const cairn_env *env);

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
