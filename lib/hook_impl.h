/* Private interface of hook objects (lib/hook.c): what the monitored
 * session (lib/monitored_session.c) reads and fills of them, and the
 * helpers the built-in hooks (lib/hooks_*.c) share; never installed. */
#ifndef CAIRN_HOOK_IMPL_H
#define CAIRN_HOOK_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cairn/monitored.h"
#include "table.h"

/* The caller's options o (NULL: all zero, the defaults) copied into dst at
 * their struct_size, so a struct from an older header is read only as far
 * as it goes (lib/table.h). Errors: CAIRN_E_INVALID naming fn. */
#define CAIRN__OPTIONS_COPY(dst, o, type, fn)                                                                   \
  ((o) ? cairn__table_copy(&(dst), sizeof(dst), (o), offsetof(type, struct_size), fn, "options", #type, NULL) \
       : (memset(&(dst), 0, sizeof(dst)), CAIRN_OK))

/* The caller's summary writer w (may be NULL) copied into *copy, its
 * members past its struct_size NULL (lib/table.h); *use is copy, or NULL
 * for no writer. Errors: CAIRN_E_INVALID naming fn (a size below the first
 * layout). */
cairn_status cairn__summary_writer_copy(const cairn_summary_writer *w, cairn_summary_writer *copy,
                                        cairn_summary_writer **use, const char *fn);

struct cairn_hook {
  const cairn_hook_vtable *vt; /* &table */
  cairn_hook_vtable table;     /* the caller's, members past its struct_size NULL */
  const cairn_hook_vtable *given; /* the caller's pointer: compared (which kind of hook), never read */
  void *self;
};

struct cairn_run_context {
  cairn_session *session;
  const cairn_run_args *args;
  int stop_requested;
};

typedef struct cairn__run_feed {
  size_t name; /* offset in arena */
  const cairn_tensor *value;
} cairn__run_feed;

/* A hook's request. Names live in one arena (offsets, since it may move),
 * reused from run to run: steady-state runs allocate nothing. */
struct cairn_run_request {
  char *arena;
  size_t arena_len, arena_cap;
  size_t *fetch;
  size_t n_fetch, cap_fetch;
  cairn__run_feed *feed;
  size_t n_feed, cap_feed;
  const cairn_op **ops;
  size_t n_ops, cap_ops;
  int summaries;
};

typedef struct cairn__summary_rec {
  size_t tag; /* offset in the session's summary arena */
  double value;
} cairn__summary_rec;

/* What after_run sees: views into the monitored session's merged run. */
struct cairn_run_values {
  const cairn_run_request *req;
  const cairn_fetch *merged;      /* the merged fetches of the run */
  const size_t *idx;              /* idx[i]: merged index of req->fetch[i] */
  const cairn__summary_rec *sums; /* NULL unless req->summaries */
  size_t n_sums;
  const char *sum_arena;
};

/* Empties r for the next run (drops its op references, keeps its memory). */
void cairn__run_request_reset(cairn_run_request *r);
/* Frees what r holds; r itself lives in the monitored session. */
void cairn__run_request_free(cairn_run_request *r);
/* The name at arena offset off. */
static inline const char *cairn__run_request_name(const cairn_run_request *r, size_t off) { return r->arena + off; }

/* The table pointer given to cairn_hook_new for h (built-in hooks recognise
 * themselves by it); compare it only, the hook calls through its own copy. */
const cairn_hook_vtable *cairn__hook_vtable(const cairn_hook *h);

/* Direct calls of one hook's callbacks (NULL members: CAIRN_OK). */
cairn_status cairn__hook_begin(cairn_hook *h, cairn_registry *r);
cairn_status cairn__hook_after_create_session(cairn_hook *h, cairn_session *s, cairn_coordinator *coord);
cairn_status cairn__hook_end(cairn_hook *h, cairn_session *s);

/* CheckpointSaverHook's asynchronous save (lib/hooks_checkpoint.c): when
 * h is one and its save in flight is committed (wait: once it is), its
 * CHECKPOINT log and after_save listeners run on s (*request_stop = 1 if
 * one asked to stop); a failed one returns its error. CAIRN_OK at once for
 * any other hook. The monitored session's should_stop calls it. */
cairn_status cairn__checkpoint_hook_poll(cairn_hook *h, cairn_session *s, int wait, int *request_stop);

/* ---- Helpers of the built-in hooks ------------------------------------------
 * The global step. Hooks fetch "global_step" in before_run: the session
 * resolves it to the value read *before* the run's ops (TF's cached read
 * tensor ordered before the increment), so it is stale by the run's own
 * increment. As in TF, a hook that decides something from it predicts
 * stale + 1 and, when the prediction says "act", re-reads the real value
 * (cairn_session_global_step) before acting. */
#define CAIRN__GLOBAL_STEP "global_step"

/* StopAtStepHook with 0.1's rule (num_steps, last_step < 0: not given),
 * which cairn_hook_new_stop_at_step maps its options onto and the
 * deprecated cairn_stop_at_step_hook_new keeps (lib/hooks_deprecated.c). */
cairn_status cairn__hook_new_stop_at_step(int64_t num_steps, int64_t last_step, cairn_hook **out);

/* TF's begin(): "Global step should be created to use <hook>."
 * (CAIRN_E_STATE), or CAIRN_E_DTYPE when it is not an integer scalar. r
 * NULL (custom creator without a registry): checked when the step is first
 * read instead. */
cairn_status cairn__hook_need_global_step(cairn_registry *r, const char *hook);
/* The real global step now; the same message when there is none. */
cairn_status cairn__hook_read_step(cairn_session *s, const char *hook, int64_t *step);
/* A before_run that only fetches the (stale) global step. */
cairn_status cairn__hook_fetch_step(void *self, cairn_run_context *ctx, cairn_run_request *req);
/* The stale step this hook fetched. */
cairn_status cairn__hook_fetched_step(const cairn_run_values *v, int64_t *step);
/* cairn_hook_new(vt, self), calling destroy(self) when that fails. */
cairn_status cairn__hook_make(const cairn_hook_vtable *vt, void *self, void (*destroy)(void *), cairn_hook **out);

#endif
