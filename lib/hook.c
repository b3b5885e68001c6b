/* Hook objects and what a hook sees of one run (cairn/monitored.h,
 * "Hooks"): TF's SessionRunHook, SessionRunContext, SessionRunArgs (here
 * the run request) and SessionRunValues. The monitored session
 * (lib/monitored_session.c) fills requests and values through
 * lib/hook_impl.h, which also declares the global-step helpers at the end
 * of this file that the built-in hooks (lib/hooks_*.c) share. */
#include "internal.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cairn/monitored.h"
#include "hook_impl.h"
#include "table.h"
#include "tensor_impl.h"

/* ==== Hooks ====================================================================== */

cairn_status cairn_hook_new(const cairn_hook_vtable *vt, void *self, cairn_hook **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "hook_new: out is NULL");
  *out = NULL;
  if (!vt) return cairn__fail(CAIRN_E_NULL, "hook_new: vt is NULL");
  /* A larger size comes from a newer header: only the members this
     library knows are read (lib/table.h). */
  char what[96];
  snprintf(what, sizeof what, "hook '%.64s': vt", vt->name ? vt->name : "(unnamed)");
  cairn_hook_vtable table;
  cairn_status st = cairn__table_copy(&table, sizeof table, vt, offsetof(cairn_hook_vtable, struct_size), "hook_new",
                                      what, "cairn_hook_vtable", NULL);
  if (st != CAIRN_OK) return st;
  cairn_hook *h = malloc(sizeof *h);
  if (!h) return cairn__fail(CAIRN_E_NOMEM, "hook_new: out of memory");
  h->table = table;
  h->vt = &h->table;
  h->given = vt;
  h->self = self;
  *out = h;
  return CAIRN_OK;
}

cairn_status cairn__summary_writer_copy(const cairn_summary_writer *w, cairn_summary_writer *copy,
                                        cairn_summary_writer **use, const char *fn) {
  *use = NULL;
  if (!w) return CAIRN_OK;
  cairn_status st = cairn__table_copy(copy, sizeof *copy, w, offsetof(cairn_summary_writer, struct_size), fn,
                                      "summary_writer", "cairn_summary_writer", NULL);
  if (st == CAIRN_OK) *use = copy;
  return st;
}

void cairn_hook_free(cairn_hook *h) {
  if (!h) return;
  if (h->vt->destroy) h->vt->destroy(h->self);
  free(h);
}

void *cairn_hook_self(const cairn_hook *h) { return h ? h->self : NULL; }
const char *cairn_hook_name(const cairn_hook *h) {
  return h && h->vt->name ? h->vt->name : "hook";
}

const cairn_hook_vtable *cairn__hook_vtable(const cairn_hook *h) { return h ? h->given : NULL; }

cairn_status cairn__hook_begin(cairn_hook *h, cairn_registry *r) {
  return h && h->vt->begin ? h->vt->begin(h->self, r) : CAIRN_OK;
}
cairn_status cairn__hook_after_create_session(cairn_hook *h, cairn_session *s, cairn_coordinator *coord) {
  return h && h->vt->after_create_session ? h->vt->after_create_session(h->self, s, coord) : CAIRN_OK;
}
cairn_status cairn__hook_end(cairn_hook *h, cairn_session *s) {
  return h && h->vt->end ? h->vt->end(h->self, s) : CAIRN_OK;
}

/* ==== Run context, request, values ================================================ */

cairn_session *cairn_run_context_session(const cairn_run_context *ctx) { return ctx ? ctx->session : NULL; }
const cairn_run_args *cairn_run_context_args(const cairn_run_context *ctx) { return ctx ? ctx->args : NULL; }
void cairn_run_context_request_stop(cairn_run_context *ctx) {
  if (ctx) ctx->stop_requested = 1;
}
int cairn_run_context_stop_requested(const cairn_run_context *ctx) { return ctx ? ctx->stop_requested : 0; }

void cairn__run_request_reset(cairn_run_request *r) {
  for (size_t i = 0; i < r->n_ops; i++) cairn_op_free((cairn_op *)r->ops[i]);
  r->arena_len = 0;
  r->n_fetch = r->n_feed = r->n_ops = 0;
  r->summaries = 0;
}

void cairn__run_request_free(cairn_run_request *r) {
  cairn__run_request_reset(r);
  free(r->arena);
  free(r->fetch);
  free(r->feed);
  free(r->ops);
}

static int req_intern(cairn_run_request *r, const char *name, size_t *off) {
  size_t n = strlen(name) + 1;
  if (!cairn__grow((void **)&r->arena, &r->arena_cap, r->arena_len + n, 1)) return 0;
  memcpy(r->arena + r->arena_len, name, n);
  *off = r->arena_len;
  r->arena_len += n;
  return 1;
}

cairn_status cairn_run_request_fetch(cairn_run_request *req, const char *name) {
  if (!req || !name) return cairn__fail(CAIRN_E_NULL, "run_request_fetch: %s is NULL", req ? "name" : "req");
  if (!*name) return cairn__fail(CAIRN_E_INVALID, "run_request_fetch: empty name");
  for (size_t i = 0; i < req->n_fetch; i++)
    if (!strcmp(cairn__run_request_name(req, req->fetch[i]), name)) return CAIRN_OK;
  size_t off;
  if (!cairn__grow((void **)&req->fetch, &req->cap_fetch, req->n_fetch + 1, sizeof *req->fetch) ||
      !req_intern(req, name, &off))
    return cairn__fail(CAIRN_E_NOMEM, "run_request_fetch: out of memory");
  req->fetch[req->n_fetch++] = off;
  return CAIRN_OK;
}

cairn_status cairn_run_request_feed(cairn_run_request *req, const char *name, const cairn_tensor *value) {
  if (!req || !name || !value)
    return cairn__fail(CAIRN_E_NULL, "run_request_feed: %s is NULL", !req ? "req" : !name ? "name" : "value");
  if (!*name) return cairn__fail(CAIRN_E_INVALID, "run_request_feed: empty name");
  for (size_t i = 0; i < req->n_feed; i++)
    if (!strcmp(cairn__run_request_name(req, req->feed[i].name), name)) { /* a dict key set twice */
      req->feed[i].value = value;
      return CAIRN_OK;
    }
  size_t off;
  if (!cairn__grow((void **)&req->feed, &req->cap_feed, req->n_feed + 1, sizeof *req->feed) ||
      !req_intern(req, name, &off))
    return cairn__fail(CAIRN_E_NOMEM, "run_request_feed: out of memory");
  req->feed[req->n_feed++] = (cairn__run_feed){off, value};
  return CAIRN_OK;
}

cairn_status cairn_run_request_op(cairn_run_request *req, const cairn_op *op) {
  if (!req || !op) return cairn__fail(CAIRN_E_NULL, "run_request_op: %s is NULL", req ? "op" : "req");
  if (!cairn__grow((void **)&req->ops, &req->cap_ops, req->n_ops + 1, sizeof *req->ops))
    return cairn__fail(CAIRN_E_NOMEM, "run_request_op: out of memory");
  req->ops[req->n_ops++] = cairn_op_ref((cairn_op *)op);
  return CAIRN_OK;
}

cairn_status cairn_run_request_summaries(cairn_run_request *req) {
  if (!req) return cairn__fail(CAIRN_E_NULL, "run_request_summaries: req is NULL");
  req->summaries = 1;
  return CAIRN_OK;
}

cairn_status cairn_run_values_get(const cairn_run_values *v, const char *name, cairn_value *out) {
  if (!v || !name || !out) return cairn__fail(CAIRN_E_NULL, "run_values_get: an argument is NULL");
  if (v->req)
    for (size_t i = 0; i < v->req->n_fetch; i++)
      if (!strcmp(cairn__run_request_name(v->req, v->req->fetch[i]), name)) {
        *out = v->merged[v->idx[i]].value;
        return CAIRN_OK;
      }
  return cairn__fail(CAIRN_E_NOT_FOUND, "run_values: '%s' was not requested by this hook in before_run", name);
}

static cairn_status value_to_f64(const char *name, const cairn_value *val, double *out) {
  switch (val->kind) {
    case CAIRN_VALUE_F64: *out = val->f64; return CAIRN_OK;
    case CAIRN_VALUE_I64: *out = (double)val->i64; return CAIRN_OK;
    case CAIRN_VALUE_TENSOR:
      if (val->tensor && val->tensor->size == 1 && cairn__tensor_get_f64(val->tensor, 0, out)) return CAIRN_OK;
      return cairn__fail(CAIRN_E_DTYPE, "run_values: '%s' is not a 1-element numeric tensor", name);
    default: return cairn__fail(CAIRN_E_DTYPE, "run_values: '%s' has no value", name);
  }
}

cairn_status cairn_run_values_f64(const cairn_run_values *v, const char *name, double *out) {
  cairn_value val;
  cairn_status st = cairn_run_values_get(v, name, &val);
  if (st != CAIRN_OK) return st;
  return value_to_f64(name, &val, out);
}

cairn_status cairn_run_values_i64(const cairn_run_values *v, const char *name, int64_t *out) {
  cairn_value val;
  cairn_status st = cairn_run_values_get(v, name, &val);
  if (st != CAIRN_OK) return st;
  if (val.kind == CAIRN_VALUE_I64) {
    *out = val.i64;
    return CAIRN_OK;
  }
  if (val.kind == CAIRN_VALUE_TENSOR && val.tensor && val.tensor->size == 1 &&
      val.tensor->dtype == CAIRN_DTYPE_I64) {
    *out = ((const int64_t *)val.tensor->data)[0];
    return CAIRN_OK;
  }
  double d;
  st = value_to_f64(name, &val, &d);
  if (st != CAIRN_OK) return st;
  *out = (int64_t)d;
  return CAIRN_OK;
}

size_t cairn_run_values_summary_count(const cairn_run_values *v) { return v && v->sums ? v->n_sums : 0; }

cairn_status cairn_run_values_summary_at(const cairn_run_values *v, size_t i, const char **tag, double *value) {
  if (!v || !tag || !value) return cairn__fail(CAIRN_E_NULL, "run_values_summary_at: an argument is NULL");
  if (!v->sums || i >= v->n_sums)
    return cairn__fail(CAIRN_E_NOT_FOUND, "run_values_summary_at: no summary %zu (have %zu)", i,
                       cairn_run_values_summary_count(v));
  *tag = v->sum_arena + v->sums[i].tag;
  *value = v->sums[i].value;
  return CAIRN_OK;
}

/* ==== Helpers of the built-in hooks ================================================ */

/* The global-step rule these follow is written in lib/hook_impl.h. */
cairn_status cairn__hook_need_global_step(cairn_registry *r, const char *hook) {
  if (!r) return CAIRN_OK;
  cairn_var *v = NULL;
  if (cairn_registry_find(r, CAIRN__GLOBAL_STEP, &v) != CAIRN_OK)
    return cairn__fail(CAIRN_E_STATE, "Global step should be created to use %s.", hook);
  const cairn_tensor *t = cairn_var_tensor(v);
  if (t->rank != 0 || (t->dtype != CAIRN_DTYPE_I64 && t->dtype != CAIRN_DTYPE_I32))
    return cairn__fail(CAIRN_E_DTYPE, "%s: the global step must be an integer scalar; 'global_step' is %s of rank %d",
                       hook, cairn_dtype_name(t->dtype), t->rank);
  return CAIRN_OK;
}

cairn_status cairn__hook_read_step(cairn_session *s, const char *hook, int64_t *step) {
  cairn_status st = cairn_session_global_step(s, step);
  if (st == CAIRN_E_NOT_FOUND) return cairn__fail(CAIRN_E_STATE, "Global step should be created to use %s.", hook);
  return st;
}

cairn_status cairn__hook_fetch_step(void *self, cairn_run_context *ctx, cairn_run_request *req) {
  (void)self;
  (void)ctx;
  return cairn_run_request_fetch(req, CAIRN__GLOBAL_STEP);
}

cairn_status cairn__hook_fetched_step(const cairn_run_values *v, int64_t *step) {
  return cairn_run_values_i64(v, CAIRN__GLOBAL_STEP, step);
}

cairn_status cairn__hook_make(const cairn_hook_vtable *vt, void *self, void (*destroy)(void *), cairn_hook **out) {
  cairn_status st = cairn_hook_new(vt, self, out);
  if (st != CAIRN_OK) destroy(self);
  return st;
}
