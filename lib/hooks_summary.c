/* TF's SummarySaverHook (cairn/monitored.h; doc/session-semantics.md,
 * "Built-in hooks"): runs the summary op every N steps or seconds and
 * writes the scalars it emits, at the real global step, through a
 * cairn_summary_writer. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#include "cairn/monitored.h"
#include "hook_impl.h"

typedef struct summary_hook {
  cairn_timer *timer;
  cairn_summary_writer *writer; /* &writer_copy or NULL */
  cairn_summary_writer writer_copy;
  cairn_scaffold *scaffold;
  cairn_op *summary_op; /* referenced */
  int have_next;
  int64_t next_step;
  int request;
} summary_hook;

static const char summary_name[] = "SummarySaverHook";

static void summary_destroy(void *self) {
  summary_hook *h = self;
  if (!h) return;
  cairn_timer_free(h->timer);
  cairn_op_free(h->summary_op);
  free(h);
}

static cairn_op *summary_op_of(const summary_hook *h) {
  return h->summary_op ? h->summary_op : h->scaffold ? cairn_scaffold_summary_op(h->scaffold) : NULL;
}

static cairn_status summary_begin(void *self, cairn_registry *r) {
  summary_hook *h = self;
  h->have_next = 0;
  return cairn__hook_need_global_step(r, summary_name);
}

static cairn_status summary_before_run(void *self, cairn_run_context *ctx, cairn_run_request *req) {
  (void)ctx;
  summary_hook *h = self;
  /* No writer: TF's after_run returns at once; cairn also skips running
     the summary op for nothing. */
  if (!h->writer) return CAIRN_OK;
  h->request = !h->have_next || cairn_timer_should_trigger_for_step(h->timer, h->next_step);
  cairn_status st = cairn_run_request_fetch(req, CAIRN__GLOBAL_STEP);
  if (st != CAIRN_OK) return st;
  cairn_op *op = summary_op_of(h);
  if (h->request && op) {
    if ((st = cairn_run_request_op(req, op)) != CAIRN_OK) return st;
    if ((st = cairn_run_request_summaries(req)) != CAIRN_OK) return st;
  }
  return CAIRN_OK;
}

static cairn_status summary_after_run(void *self, cairn_run_context *ctx, const cairn_run_values *v) {
  summary_hook *h = self;
  if (!h->writer) return CAIRN_OK;
  int64_t step;
  cairn_status st = cairn__hook_fetched_step(v, &step);
  if (st != CAIRN_OK) return st;
  step += 1;
  if (!h->have_next || h->request)
    if ((st = cairn__hook_read_step(cairn_run_context_session(ctx), summary_name, &step)) != CAIRN_OK) return st;
  if (!h->have_next && h->writer->session_log &&
      (st = h->writer->session_log(h->writer->self, CAIRN_SESSION_LOG_START, NULL, step)) != CAIRN_OK)
    return st;
  if (h->request) {
    cairn_timer_update_last_triggered_step(h->timer, step, NULL, NULL);
    size_t n = cairn_run_values_summary_count(v);
    for (size_t i = 0; i < n && h->writer->scalar; i++) {
      const char *tag;
      double value;
      if ((st = cairn_run_values_summary_at(v, i, &tag, &value)) != CAIRN_OK) return st;
      if ((st = h->writer->scalar(h->writer->self, tag, value, step)) != CAIRN_OK) return st;
    }
  }
  h->next_step = step + 1;
  h->have_next = 1;
  return CAIRN_OK;
}

static cairn_status summary_end(void *self, cairn_session *s) {
  (void)s;
  summary_hook *h = self;
  if (h->writer && h->writer->flush) return h->writer->flush(h->writer->self);
  return CAIRN_OK;
}

static const cairn_hook_vtable summary_vt = {
    .name = summary_name,
    .begin = summary_begin,
    .before_run = summary_before_run,
    .after_run = summary_after_run,
    .end = summary_end,
    .destroy = summary_destroy,
};

CAIRN__OPTIONS_DEFAULT(cairn_summary_saver_hook_options)

cairn_status cairn_hook_new_summary_saver(const cairn_summary_saver_hook_options *o, cairn_hook **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "hook_new_summary_saver: out is NULL");
  *out = NULL;
  if (!o) return cairn__fail(CAIRN_E_NULL, "hook_new_summary_saver: options are NULL");
  if ((o->scaffold == NULL) == (o->summary_op == NULL))
    return cairn__fail(CAIRN_E_INVALID, "Exactly one of scaffold or summary_op must be provided.");
  summary_hook *h = calloc(1, sizeof *h);
  if (!h) return cairn__fail(CAIRN_E_NOMEM, "hook_new_summary_saver: out of memory");
  cairn_status st = cairn__summary_writer_copy(o->writer, &h->writer_copy, &h->writer, "hook_new_summary_saver");
  if (st == CAIRN_OK) st = cairn_timer_new(o->save_secs, o->save_steps, o->env, &h->timer);
  if (st != CAIRN_OK) {
    free(h);
    return st;
  }
  h->scaffold = o->scaffold;
  h->summary_op = o->summary_op ? cairn_op_ref(o->summary_op) : NULL;
  return cairn__hook_make(&summary_vt, h, summary_destroy, out);
}
