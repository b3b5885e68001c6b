/* Sessions and runs (cairn/session.h): the session handle over a
 * registry, cairn_session_run with named feeds and fetches, and what an op
 * sees of the run it is in. The ops themselves are built in op.c.
 * TF behaviour and its sources: doc/session-semantics.md ("Terms",
 * "Scaffold", "SessionManager"). */
#include "session_impl.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_impl.h"
#include "cairn/session.h"
#include "cairn/var.h"

/* ==== sessions =========================================================================== */

/* One run in progress (they nest: an op may run ops on its session). */
struct run_frame {
  const cairn_run_args *args;
  struct run_frame *prev;
};

struct cairn_session {
  cairn_registry *r;
  uint64_t id;
  int closed;
  unsigned fail_gen; /* bumped whenever errmsg is written: tells whose message it is */
  struct run_frame *run;
  char *restored_path;             /* the checkpoint the SessionManager restored, or NULL */
  cairn_saver_meta *restored_meta; /* its metadata, read in the same pass as the variables */
  char errmsg[CAIRN__ERRMSG_LEN];
};

static atomic_uint_fast64_t next_session_id = 1;

const char *cairn__session_errbuf(const cairn_session *s) { return s ? s->errmsg : ""; }

unsigned cairn__session_errgen(const cairn_session *s) { return s ? s->fail_gen : 0; }

cairn_status cairn_session_new(cairn_registry *r, unsigned flags, cairn_session **out) {
  static const char fn[] = "session_new";
  if (!out) return cairn__fail(CAIRN_E_NULL, "%s: out is NULL", fn);
  *out = NULL;
  if (!r) return cairn__fail(CAIRN_E_NULL, "%s: registry is NULL", fn);
  if (flags & ~CAIRN_SESSION_FRESH) return cairn__fail(CAIRN_E_INVALID, "%s: unknown flags 0x%x", fn, flags);
  cairn_session *s = calloc(1, sizeof *s);
  if (!s) return cairn__fail(CAIRN_E_NOMEM, "%s: cannot allocate the session", fn);
  if (flags & CAIRN_SESSION_FRESH) {
    /* TF's in-process target: a new tf.Session starts with no variable
       initialized. */
    size_t n = cairn_registry_count(r, CAIRN_COLL_ALL);
    cairn_var **vars = n ? malloc(n * sizeof *vars) : NULL;
    if (n && !vars) {
      free(s);
      return cairn__fail(CAIRN_E_NOMEM, "%s: cannot list the variables", fn);
    }
    cairn_registry_list(r, CAIRN_COLL_ALL, vars, n);
    for (size_t i = 0; i < n; i++) cairn_var_set_initialized(vars[i], 0);
    free(vars);
  }
  s->r = r;
  s->id = atomic_fetch_add(&next_session_id, 1);
  *out = s;
  return CAIRN_OK;
}

void cairn_session_close(cairn_session *s) {
  if (s) s->closed = 1;
}

int cairn_session_is_closed(const cairn_session *s) { return s ? s->closed : 1; }

void cairn_session_free(cairn_session *s) {
  if (!s) return;
  free(s->restored_path);
  cairn_saver_meta_free(s->restored_meta);
  free(s);
}

cairn_status cairn__session_set_restored(cairn_session *s, const char *path, cairn_saver_meta *meta) {
  char *p = cairn__strdup(path);
  if (!p) {
    cairn_saver_meta_free(meta);
    return cairn__fail(CAIRN_E_NOMEM, "session: out of memory recording the restored checkpoint '%s'", path);
  }
  free(s->restored_path);
  cairn_saver_meta_free(s->restored_meta);
  s->restored_path = p;
  s->restored_meta = meta;
  return CAIRN_OK;
}

const char *cairn_session_restored_path(const cairn_session *s) { return s ? s->restored_path : NULL; }

const cairn_saver_meta *cairn_session_restored_meta(const cairn_session *s) { return s ? s->restored_meta : NULL; }

cairn_registry *cairn_session_registry(const cairn_session *s) { return s ? s->r : NULL; }

uint64_t cairn_session_id(const cairn_session *s) { return s ? s->id : 0; }

const char *cairn_session_errmsg(const cairn_session *s) { return s ? s->errmsg : ""; }

cairn_status cairn_session_fail(cairn_session *s, cairn_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (s) {
    s->fail_gen++;
    cairn__errbuf_vfail(s->errmsg, st, fmt, ap);
  } else {
    char buf[CAIRN__ERRMSG_LEN];
    cairn__errbuf_vfail(buf, st, fmt, ap);
  }
  va_end(ap);
  return st;
}

/* An error that a callee reported through cairn__fail: keep its detail on
 * the session too. */
static cairn_status session_keep(cairn_session *s, cairn_status st) {
  s->fail_gen++;
  return cairn__errbuf_keep(s->errmsg, st, NULL);
}

static cairn_status check_open(cairn_session *s, const char *fn) {
  if (!s) return cairn__fail(CAIRN_E_NULL, "%s: session is NULL", fn);
  if (s->closed) return cairn_session_fail(s, CAIRN_E_STATE, "Attempted to use a closed Session.");
  return CAIRN_OK;
}

/* Runs one op, with the session's message describing any failure. */
static cairn_status op_invoke(cairn_session *s, const cairn_op *op) {
  switch ((cairn__op_kind)op->b.kind) {
  case CAIRN__OP_USER: {
    unsigned gen = s->fail_gen;
    cairn_status st = op->fn(s, op->b.user);
    /* An op that failed through cairn__fail (or another cairn call) has
       its message in the thread's buffer only: copy it. */
    if (st && gen == s->fail_gen) session_keep(s, st);
    return st;
  }
  case CAIRN__OP_INIT_VARS:
    for (size_t i = 0; i < op->b.n_vars; i++) {
      cairn_status st = cairn_var_initialize(op->b.vars[i]);
      if (st) return session_keep(s, st);
    }
    return CAIRN_OK;
  case CAIRN__OP_GROUP:
    for (size_t i = 0; i < op->n_ops; i++) {
      cairn_status st = op_invoke(s, op->ops[i]);
      if (st) return st;
    }
    return CAIRN_OK;
  case CAIRN__OP_NOOP:
    return CAIRN_OK;
  }
  return cairn_session_fail(s, CAIRN_E_INVALID, "run: op '%s' has an unknown kind", op->b.name);
}

/* The value a variable holds now, as a fetch sees it. */
static cairn_status var_value(cairn_session *s, const cairn_var *v, cairn_value *out) {
  if (!cairn_var_is_initialized(v))
    return cairn_session_fail(s, CAIRN_E_UNINITIALIZED, "Attempting to use uninitialized value %s",
                              cairn_var_name(v));
  const cairn_tensor *t = cairn_var_tensor(v);
  memset(out, 0, sizeof *out);
  if (t->size != 1 || t->rank != 0) {
    out->kind = CAIRN_VALUE_TENSOR;
    out->tensor = t;
    return CAIRN_OK;
  }
  switch (t->dtype) {
  case CAIRN_DTYPE_F32: out->kind = CAIRN_VALUE_F64; out->f64 = *(const float *)t->data; break;
  case CAIRN_DTYPE_F64: out->kind = CAIRN_VALUE_F64; out->f64 = *(const double *)t->data; break;
  case CAIRN_DTYPE_I8: out->kind = CAIRN_VALUE_I64; out->i64 = *(const int8_t *)t->data; break;
  case CAIRN_DTYPE_I16: out->kind = CAIRN_VALUE_I64; out->i64 = *(const int16_t *)t->data; break;
  case CAIRN_DTYPE_I32: out->kind = CAIRN_VALUE_I64; out->i64 = *(const int32_t *)t->data; break;
  case CAIRN_DTYPE_I64: out->kind = CAIRN_VALUE_I64; out->i64 = *(const int64_t *)t->data; break;
  case CAIRN_DTYPE_U8:
  case CAIRN_DTYPE_BOOL: out->kind = CAIRN_VALUE_I64; out->i64 = *(const uint8_t *)t->data; break;
  case CAIRN_DTYPE_U16: out->kind = CAIRN_VALUE_I64; out->i64 = *(const uint16_t *)t->data; break;
  case CAIRN_DTYPE_U32: out->kind = CAIRN_VALUE_I64; out->i64 = *(const uint32_t *)t->data; break;
  case CAIRN_DTYPE_U64: out->kind = CAIRN_VALUE_I64; out->i64 = (int64_t) * (const uint64_t *)t->data; break;
  default: /* f16, bf16: hand the tensor over */
    out->kind = CAIRN_VALUE_TENSOR;
    out->tensor = t;
    break;
  }
  return CAIRN_OK;
}

/* TF's global-step read tensor: the value, or the initial value when not
 * yet initialized ("plus 0"). */
static int64_t global_step_snapshot(const cairn_var *gs) {
  if (cairn_var_is_initialized(gs)) return *(const int64_t *)cairn_var_tensor(gs)->data;
  cairn_init in = cairn_var_initializer(gs);
  if (in.kind == CAIRN_INIT_ONES) return 1;
  if (in.kind == CAIRN_INIT_CONSTANT) return (int64_t)in.a;
  return 0;
}

cairn_run_args cairn_run_args_one(cairn_op *const *op) {
  cairn_run_args a;
  memset(&a, 0, sizeof a);
  /* C does not convert cairn_op ** to const cairn_op *const * implicitly:
     the parameter is cairn_op *const * so that callers pass &op uncast. */
  a.ops = (const cairn_op *const *)op;
  a.n_ops = op ? 1 : 0;
  return a;
}

cairn_status cairn_session_run(cairn_session *s, const cairn_run_args *args) {
  static const char fn[] = "session_run";
  cairn_status st = check_open(s, fn);
  if (st) return st;
  if (!args) return cairn_session_fail(s, CAIRN_E_NULL, "%s: args is NULL", fn);
  if ((args->n_ops && !args->ops) || (args->n_feeds && !args->feeds) || (args->n_fetches && !args->fetches))
    return cairn_session_fail(s, CAIRN_E_NULL, "%s: a list of ops, feeds or fetches is NULL", fn);
  for (size_t i = 0; i < args->n_feeds; i++) {
    if (!args->feeds[i].name || !args->feeds[i].value)
      return cairn_session_fail(s, CAIRN_E_NULL, "%s: feed %zu has a NULL name or value", fn, i);
    for (size_t j = 0; j < i; j++)
      if (!strcmp(args->feeds[i].name, args->feeds[j].name))
        return cairn_session_fail(s, CAIRN_E_INVALID, "%s: '%s' is fed twice", fn, args->feeds[i].name);
  }
  int want_gs = -1;
  for (size_t i = 0; i < args->n_fetches; i++) {
    if (!args->fetches[i].name) return cairn_session_fail(s, CAIRN_E_NULL, "%s: fetch %zu has a NULL name", fn, i);
    for (size_t j = 0; j < i; j++)
      if (!strcmp(args->fetches[i].name, args->fetches[j].name))
        return cairn_session_fail(s, CAIRN_E_INVALID, "%s: '%s' is fetched twice", fn, args->fetches[i].name);
    memset(&args->fetches[i].value, 0, sizeof args->fetches[i].value);
    if (!strcmp(args->fetches[i].name, "global_step")) want_gs = (int)i;
  }
  for (size_t i = 0; i < args->n_ops; i++)
    if (!args->ops[i]) return cairn_session_fail(s, CAIRN_E_NULL, "%s: ops[%zu] is NULL", fn, i);

  int have_gs = 0;
  int64_t gs_before = 0;
  if (want_gs >= 0) {
    const cairn_var *gs = cairn__registry_lookup(s->r, "global_step");
    if (gs && cairn_var_tensor(gs)->dtype == CAIRN_DTYPE_I64 && cairn_var_tensor(gs)->rank == 0) {
      have_gs = 1;
      gs_before = global_step_snapshot(gs);
    }
  }

  struct run_frame frame = {args, s->run};
  s->run = &frame;
  for (size_t i = 0; i < args->n_ops && st == CAIRN_OK; i++) st = op_invoke(s, args->ops[i]);
  s->run = frame.prev;
  if (st) return st;

  for (size_t i = 0; i < args->n_fetches; i++) {
    cairn_fetch *f = &args->fetches[i];
    if (f->value.kind != CAIRN_VALUE_NONE) continue;
    if (have_gs && (int)i == want_gs) {
      f->value.kind = CAIRN_VALUE_I64;
      f->value.i64 = gs_before;
      continue;
    }
    const cairn_var *v = cairn__registry_lookup(s->r, f->name);
    if (!v) {
      char ops[256] = "";
      for (size_t k = 0; k < args->n_ops; k++)
        cairn__strbuf_append(ops, sizeof ops, "%s'%s'", k ? ", " : "", args->ops[k]->b.name);
      return cairn_session_fail(s, CAIRN_E_NOT_FOUND,
                                "%s: fetch '%s' was not produced by the ops run (%s) and names no variable", fn,
                                f->name, args->n_ops ? ops : "none");
    }
    st = var_value(s, v, &f->value);
    if (st) return st;
  }
  return CAIRN_OK;
}

cairn_status cairn_session_run_op_feeds(cairn_session *s, const cairn_op *op, const cairn_feed *feeds,
                                        size_t n_feeds) {
  if (!op) return s ? cairn_session_fail(s, CAIRN_E_NULL, "session_run_op: op is NULL")
                    : cairn__fail(CAIRN_E_NULL, "session_run_op: session is NULL");
  cairn_run_args a;
  memset(&a, 0, sizeof a);
  a.ops = &op;
  a.n_ops = 1;
  a.feeds = feeds;
  a.n_feeds = n_feeds;
  return cairn_session_run(s, &a);
}

cairn_status cairn_session_run_op(cairn_session *s, const cairn_op *op) {
  return cairn_session_run_op_feeds(s, op, NULL, 0);
}

cairn_status cairn_session_run_ready(cairn_session *s, const cairn_ready_op *op, cairn_names *not_ready) {
  static const char fn[] = "session_run_ready";
  cairn_status st = check_open(s, fn);
  if (st) return st;
  if (!op || !not_ready) return cairn_session_fail(s, CAIRN_E_NULL, "%s: op or list is NULL", fn);
  cairn_names_clear(not_ready);
  if (op->b.kind == CAIRN__READY_UNINIT_VARS) {
    for (size_t i = 0; i < op->b.n_vars; i++)
      if (!cairn_var_is_initialized(op->b.vars[i])) {
        st = cairn_names_add(not_ready, cairn_var_name(op->b.vars[i]));
        if (st) return session_keep(s, st);
      }
    return CAIRN_OK;
  }
  unsigned gen = s->fail_gen;
  st = op->fn(s, not_ready, op->b.user);
  if (st && gen == s->fail_gen) session_keep(s, st);
  return st;
}

cairn_status cairn_session_global_step(cairn_session *s, int64_t *step) {
  static const char fn[] = "session_global_step";
  cairn_status st = check_open(s, fn);
  if (st) return st;
  if (!step) return cairn_session_fail(s, CAIRN_E_NULL, "%s: step is NULL", fn);
  const cairn_var *gs = cairn__registry_lookup(s->r, "global_step");
  if (!gs) return cairn_session_fail(s, CAIRN_E_NOT_FOUND, "%s: the registry has no 'global_step' variable", fn);
  const cairn_tensor *t = cairn_var_tensor(gs);
  if (t->dtype != CAIRN_DTYPE_I64 || t->rank != 0)
    return cairn_session_fail(s, CAIRN_E_DTYPE, "%s: 'global_step' is not an int64 scalar", fn);
  if (!cairn_var_is_initialized(gs))
    return cairn_session_fail(s, CAIRN_E_UNINITIALIZED, "Attempting to use uninitialized value global_step");
  *step = *(const int64_t *)t->data;
  return CAIRN_OK;
}

/* ---- inside an op ---- */

const cairn_tensor *cairn_session_feed(const cairn_session *s, const char *name) {
  if (!s || !s->run || !name) return NULL;
  const cairn_run_args *a = s->run->args;
  for (size_t i = 0; i < a->n_feeds; i++)
    if (!strcmp(a->feeds[i].name, name)) return a->feeds[i].value;
  return NULL;
}

static cairn_fetch *find_fetch(const cairn_session *s, const char *name) {
  if (!s || !s->run || !name) return NULL;
  const cairn_run_args *a = s->run->args;
  for (size_t i = 0; i < a->n_fetches; i++)
    if (!strcmp(a->fetches[i].name, name)) return &a->fetches[i];
  return NULL;
}

int cairn_session_wants(const cairn_session *s, const char *name) { return find_fetch(s, name) != NULL; }

/* Publishes v under name if the run fetches it (else drops it: TF's ops
 * compute outputs nobody asked for too). */
static cairn_status output_set(cairn_session *s, const char *name, const char *fn, cairn_value v) {
  if (!s) return cairn__fail(CAIRN_E_NULL, "%s: session is NULL", fn);
  if (!name) return cairn_session_fail(s, CAIRN_E_NULL, "%s: name is NULL", fn);
  if (!s->run) return cairn_session_fail(s, CAIRN_E_STATE, "%s: '%s': no run in progress", fn, name);
  cairn_fetch *f = find_fetch(s, name);
  if (f) f->value = v;
  return CAIRN_OK;
}

cairn_status cairn_session_output_f64(cairn_session *s, const char *name, double v) {
  return output_set(s, name, "session_output_f64", (cairn_value){.kind = CAIRN_VALUE_F64, .f64 = v});
}

cairn_status cairn_session_output_i64(cairn_session *s, const char *name, int64_t v) {
  return output_set(s, name, "session_output_i64", (cairn_value){.kind = CAIRN_VALUE_I64, .i64 = v});
}

cairn_status cairn_session_output_tensor(cairn_session *s, const char *name, const cairn_tensor *t) {
  static const char fn[] = "session_output_tensor";
  if (s && name && s->run && !t) return cairn_session_fail(s, CAIRN_E_NULL, "%s: '%s': tensor is NULL", fn, name);
  return output_set(s, name, fn, (cairn_value){.kind = CAIRN_VALUE_TENSOR, .tensor = t});
}

void cairn_session_summary_scalar(cairn_session *s, const char *tag, double value) {
  if (!s || !s->run || !tag) return;
  const cairn_run_args *a = s->run->args;
  if (a->summary_fn) a->summary_fn(a->summary_ctx, tag, value);
}
