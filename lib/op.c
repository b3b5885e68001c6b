/* Ops and ready ops (cairn/session.h): construction, references and the
 * registry collections that hold them. Both kinds share one base
 * (op_impl.h) and the code below that builds and frees it; cairn_session_run
 * and cairn_session_run_ready (session.c) run them. TF behaviour:
 * doc/session-semantics.md ("Terms", "Scaffold"). */
#include "op_impl.h"

#include <stdlib.h>
#include <string.h>

#include "cairn/saver.h"

/* ==== the shared base ================================================================== */

/* Allocates `size` zeroed bytes starting with a base of `kind` named name,
 * holding one reference. */
static cairn_status base_alloc(const char *fn, const char *name, size_t size, int kind, void **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "%s: out is NULL", fn);
  *out = NULL;
  if (!name) return cairn__fail(CAIRN_E_NULL, "%s: name is NULL", fn);
  if (!*name) return cairn__fail(CAIRN_E_INVALID, "%s: name is empty", fn);
  cairn__op_base *b = calloc(1, size);
  if (b) b->name = cairn__strdup(name);
  if (!b || !b->name) {
    free(b);
    return cairn__fail(CAIRN_E_NOMEM, "%s: '%s': cannot allocate the op", fn, name);
  }
  atomic_init(&b->refs, 1);
  b->kind = kind;
  *out = b;
  return CAIRN_OK;
}

/* The callback form: an op of `kind` calling the user's function, which
 * the caller stores after (fn_given: whether it is non-NULL). */
static cairn_status base_new_user(const char *fn, const char *name, int fn_given, void *user,
                                  cairn_user_free_fn free_user, size_t size, int kind, void **out) {
  if (!fn_given) {
    if (out) *out = NULL;
    return cairn__fail(CAIRN_E_NULL, "%s: fn is NULL", fn);
  }
  cairn_status s = base_alloc(fn, name, size, kind, out);
  if (s) return s;
  cairn__op_base *b = *out;
  b->user = user;
  b->free_user = free_user;
  return CAIRN_OK;
}

/* A copy of vars[0..n), every one non-NULL. */
static cairn_status copy_vars(const char *fn, const char *name, cairn_var *const *vars, size_t n,
                              cairn_var ***dst) {
  *dst = NULL;
  if (n == 0) return CAIRN_OK;
  if (!vars) return cairn__fail(CAIRN_E_NULL, "%s: '%s': vars is NULL", fn, name);
  for (size_t i = 0; i < n; i++)
    if (!vars[i]) return cairn__fail(CAIRN_E_NULL, "%s: '%s': vars[%zu] is NULL", fn, name, i);
  *dst = malloc(n * sizeof **dst);
  if (!*dst) return cairn__fail(CAIRN_E_NOMEM, "%s: '%s': cannot copy %zu variables", fn, name, n);
  memcpy(*dst, vars, n * sizeof **dst);
  return CAIRN_OK;
}

/* The variables of r in mask now, in creation order (malloc'd; *n count). */
static cairn_status list_mask(const char *fn, const char *name, cairn_registry *r, unsigned mask,
                              cairn_var ***vars, size_t *n) {
  *vars = NULL;
  *n = cairn_registry_count(r, mask);
  if (*n == 0) return CAIRN_OK;
  *vars = malloc(*n * sizeof **vars);
  if (!*vars) return cairn__fail(CAIRN_E_NOMEM, "%s: '%s': cannot list %zu variables", fn, name, *n);
  cairn_registry_list(r, mask, *vars, *n);
  return CAIRN_OK;
}

typedef void (*op_free_fn)(void *op);

/* An op of `kind` over a list of variables: vars[0..n) given, or (vars
 * NULL, r non-NULL) the variables of r in mask. free_op frees a half-built
 * op on failure. */
static cairn_status base_new_vars(const char *fn, const char *name, cairn_var *const *vars, size_t n,
                                  cairn_registry *r, unsigned mask, size_t size, int kind, op_free_fn free_op,
                                  void **out) {
  cairn_status s = base_alloc(fn, name, size, kind, out);
  if (s) return s;
  cairn__op_base *b = *out;
  if (r) {
    s = list_mask(fn, name, r, mask, &b->vars, &b->n_vars);
  } else {
    s = copy_vars(fn, name, vars, n, &b->vars);
    if (!s) b->n_vars = n;
  }
  if (s) {
    free_op(b);
    *out = NULL;
  }
  return s;
}

/* The registry form's own check, before anything is allocated. */
static cairn_status need_registry(const char *fn, const cairn_registry *r) {
  return r ? CAIRN_OK : cairn__fail(CAIRN_E_NULL, "%s: registry is NULL", fn);
}

static void base_ref(cairn__op_base *b) {
  if (b) atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
}

/* Drops a reference; 1 when it was the last one, and then the user's data,
 * the variable list and the name are freed (the caller frees the rest). */
static int base_release(cairn__op_base *b) {
  if (!b || atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) != 1) return 0;
  if (b->free_user) b->free_user(b->user);
  free(b->vars);
  free(b->name);
  return 1;
}

/* ==== ops ============================================================================== */

static void op_free_any(void *op) { cairn_op_free(op); }

cairn_status cairn_op_new(const char *name, cairn_op_fn fn, void *user, cairn_user_free_fn free_user,
                          cairn_op **out) {
  void *p = NULL;
  cairn_status s = base_new_user("op_new", name, fn != NULL, user, free_user, sizeof **out, CAIRN__OP_USER,
                                 out ? &p : NULL);
  if (out) *out = p;
  if (!s) (*out)->fn = fn;
  return s;
}

cairn_status cairn_op_new_init_vars(const char *name, cairn_var *const *vars, size_t n, cairn_op **out) {
  void *p = NULL;
  cairn_status s = base_new_vars("op_new_init_vars", name, vars, n, NULL, 0, sizeof **out, CAIRN__OP_INIT_VARS,
                                 op_free_any, out ? &p : NULL);
  if (out) *out = p;
  return s;
}

cairn_status cairn_op_new_init(const char *name, cairn_registry *r, unsigned mask, cairn_op **out) {
  static const char fn[] = "op_new_init";
  void *p = NULL;
  cairn_status s = need_registry(fn, r);
  if (!s) s = base_new_vars(fn, name, NULL, 0, r, mask, sizeof **out, CAIRN__OP_INIT_VARS, op_free_any,
                            out ? &p : NULL);
  if (out) *out = p;
  return s;
}

cairn_status cairn_op_new_group(const char *name, cairn_op *const *ops, size_t n, cairn_op **out) {
  static const char fn[] = "op_new_group";
  void *p = NULL;
  cairn_status s = base_alloc(fn, name, sizeof **out, CAIRN__OP_GROUP, out ? &p : NULL);
  if (out) *out = p;
  if (s) return s;
  if (n == 0) return CAIRN_OK;
  if (!ops) {
    cairn_op_free(*out);
    *out = NULL;
    return cairn__fail(CAIRN_E_NULL, "%s: '%s': ops is NULL", fn, name);
  }
  cairn_op *g = *out;
  g->ops = malloc(n * sizeof *g->ops);
  if (!g->ops) {
    cairn_op_free(g);
    *out = NULL;
    return cairn__fail(CAIRN_E_NOMEM, "%s: '%s': cannot allocate %zu ops", fn, name, n);
  }
  for (size_t i = 0; i < n; i++)
    if (ops[i]) g->ops[g->n_ops++] = cairn_op_ref(ops[i]);
  return CAIRN_OK;
}

cairn_status cairn_op_new_noop(const char *name, cairn_op **out) {
  void *p = NULL;
  cairn_status s = base_alloc("op_new_noop", name, sizeof **out, CAIRN__OP_NOOP, out ? &p : NULL);
  if (out) *out = p;
  return s;
}

cairn_op *cairn_op_ref(cairn_op *op) {
  base_ref(op ? &op->b : NULL);
  return op;
}

void cairn_op_free(cairn_op *op) {
  if (!op || !base_release(&op->b)) return;
  for (size_t i = 0; i < op->n_ops; i++) cairn_op_free(op->ops[i]);
  free(op->ops);
  free(op);
}

const char *cairn_op_name(const cairn_op *op) { return op ? op->b.name : NULL; }

/* ==== ready ops ======================================================================== */

static void ready_free_any(void *op) { cairn_ready_op_free(op); }

cairn_status cairn_ready_op_new(const char *name, cairn_ready_fn fn, void *user, cairn_user_free_fn free_user,
                                cairn_ready_op **out) {
  void *p = NULL;
  cairn_status s = base_new_user("ready_op_new", name, fn != NULL, user, free_user, sizeof **out,
                                 CAIRN__READY_USER, out ? &p : NULL);
  if (out) *out = p;
  if (!s) (*out)->fn = fn;
  return s;
}

cairn_status cairn_ready_op_new_uninitialized_vars(const char *name, cairn_var *const *vars, size_t n,
                                                   cairn_ready_op **out) {
  void *p = NULL;
  cairn_status s = base_new_vars("ready_op_new_uninitialized_vars", name, vars, n, NULL, 0, sizeof **out,
                                 CAIRN__READY_UNINIT_VARS, ready_free_any, out ? &p : NULL);
  if (out) *out = p;
  return s;
}

cairn_status cairn_ready_op_new_uninitialized(const char *name, cairn_registry *r, unsigned mask,
                                              cairn_ready_op **out) {
  static const char fn[] = "ready_op_new_uninitialized";
  void *p = NULL;
  cairn_status s = need_registry(fn, r);
  if (!s) s = base_new_vars(fn, name, NULL, 0, r, mask, sizeof **out, CAIRN__READY_UNINIT_VARS, ready_free_any,
                            out ? &p : NULL);
  if (out) *out = p;
  return s;
}

cairn_ready_op *cairn_ready_op_ref(cairn_ready_op *op) {
  base_ref(op ? &op->b : NULL);
  return op;
}

void cairn_ready_op_free(cairn_ready_op *op) {
  if (op && base_release(&op->b)) free(op);
}

const char *cairn_ready_op_name(const cairn_ready_op *op) { return op ? op->b.name : NULL; }

/* ==== registry collections of ops and savers ============================================ */

static void free_saver_item(void *p) { cairn_saver_free(p); }

cairn_status cairn_registry_add_op(cairn_registry *r, const char *key, cairn_op *op) {
  if (!op) return cairn__fail(CAIRN_E_NULL, "registry_add_op: op is NULL");
  cairn_status s = cairn_registry_collection_add(r, key, cairn_op_ref(op), op_free_any);
  if (s) cairn_op_free(op);
  return s;
}

cairn_status cairn_registry_add_ready_op(cairn_registry *r, const char *key, cairn_ready_op *op) {
  if (!op) return cairn__fail(CAIRN_E_NULL, "registry_add_ready_op: op is NULL");
  cairn_status s = cairn_registry_collection_add(r, key, cairn_ready_op_ref(op), ready_free_any);
  if (s) cairn_ready_op_free(op);
  return s;
}

cairn_status cairn_registry_add_saver(cairn_registry *r, cairn_saver *saver) {
  if (!saver) return cairn__fail(CAIRN_E_NULL, "registry_add_saver: saver is NULL");
  return cairn_registry_collection_add(r, CAIRN_COLLECTION_SAVERS, saver, free_saver_item);
}
