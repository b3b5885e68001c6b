/* The Scaffold (cairn/session.h): TF's tf.compat.v1.train.Scaffold.
 * TF behaviour (fields, copy_from_scaffold, finalize order and defaults,
 * get_or_default) and its source: doc/session-semantics.md, "Scaffold". */
#include "session_impl.h"

#include <stdlib.h>
#include <string.h>

#include "cairn/saver.h"
#include "cairn/scaffold.h"
#include "cairn/session.h"

struct cairn_scaffold {
  cairn_registry *r;
  cairn_op *init_op; /* every op pointer holds a reference */
  const cairn_feed *init_feeds;
  size_t n_init_feeds;
  cairn_scaffold_init_cb init_fn; /* the user's 3-argument function (TF's _user_init_fn) */
  void *init_fn_user;
  char *init_fn_name;
  cairn_ready_op *ready_op;
  cairn_ready_op *ready_for_local_init_op;
  cairn_op *local_init_op;
  const cairn_feed *local_init_feeds;
  size_t n_local_init_feeds;
  cairn_op *summary_op;
  cairn_saver *saver; /* borrowed (the caller's, or the registry's "savers" item) */
  const cairn_restore_options *restore;
  char *warm_start_path;
  const cairn_restore_options *warm_start;
  int finalized;
};

static char *dup_or_null(const char *s, int *nomem) {
  if (!s) return NULL;
  size_t n = strlen(s);
  char *c = malloc(n + 1);
  if (!c) {
    *nomem = 1;
    return NULL;
  }
  memcpy(c, s, n + 1);
  return c;
}

CAIRN__OPTIONS_DEFAULT(cairn_scaffold_options)

cairn_status cairn_scaffold_new(cairn_registry *r, const cairn_scaffold_options *opts, cairn_scaffold **out) {
  static const char fn[] = "scaffold_new";
  if (!out) return cairn__fail(CAIRN_E_NULL, "%s: out is NULL", fn);
  *out = NULL;
  if (!r) return cairn__fail(CAIRN_E_NULL, "%s: registry is NULL", fn);
  cairn_scaffold_options o;
  if (opts) {
    o = *opts;
  } else {
    memset(&o, 0, sizeof o);
  }
  const cairn_scaffold *src = o.copy_from_scaffold;
  if (src && src->r != r)
    return cairn__fail(CAIRN_E_INVALID, "%s: copy_from_scaffold belongs to another registry", fn);

  cairn_scaffold *sc = calloc(1, sizeof *sc);
  if (!sc) return cairn__fail(CAIRN_E_NOMEM, "%s: cannot allocate the scaffold", fn);
  sc->r = r;
  /* TF coalesces each field: the explicit argument if not None, else the
     source's current value. */
#define PICK(field) (o.field ? o.field : (src ? src->field : NULL))
  sc->init_op = cairn_op_ref(PICK(init_op));
  sc->ready_op = cairn_ready_op_ref(PICK(ready_op));
  sc->ready_for_local_init_op = cairn_ready_op_ref(PICK(ready_for_local_init_op));
  sc->local_init_op = cairn_op_ref(PICK(local_init_op));
  sc->summary_op = cairn_op_ref(PICK(summary_op));
  sc->saver = PICK(saver);
  sc->restore = PICK(restore);
  sc->warm_start = PICK(warm_start);
  /* a list of feeds and its length come from the same side */
#define PICK_N(field, n_field) (o.field ? o.n_field : (src ? src->n_field : 0))
  sc->init_feeds = PICK(init_feeds);
  sc->n_init_feeds = PICK_N(init_feeds, n_init_feeds);
  sc->local_init_feeds = PICK(local_init_feeds);
  sc->n_local_init_feeds = PICK_N(local_init_feeds, n_local_init_feeds);
#undef PICK_N
#undef PICK
  /* init_fn: the source's original function, re-bound to this scaffold
     (the binding is cairn_scaffold_bound_init_fn's trampoline). */
  int nomem = 0;
  if (o.init_fn) {
    sc->init_fn = o.init_fn;
    sc->init_fn_user = o.init_fn_user;
    sc->init_fn_name = dup_or_null(o.init_fn_name, &nomem);
  } else if (src && src->init_fn) {
    sc->init_fn = src->init_fn;
    sc->init_fn_user = src->init_fn_user;
    sc->init_fn_name = dup_or_null(src->init_fn_name, &nomem);
  }
  sc->warm_start_path = dup_or_null(o.warm_start_path ? o.warm_start_path : src ? src->warm_start_path : NULL,
                                    &nomem);
  if (nomem) {
    cairn_scaffold_free(sc);
    return cairn__fail(CAIRN_E_NOMEM, "%s: cannot copy the names", fn);
  }
  if (sc->warm_start && !sc->warm_start_path) {
    cairn_scaffold_free(sc);
    return cairn__fail(CAIRN_E_INVALID, "%s: warm_start options given without warm_start_path", fn);
  }
  *out = sc;
  return CAIRN_OK;
}

void cairn_scaffold_free(cairn_scaffold *sc) {
  if (!sc) return;
  cairn_op_free(sc->init_op);
  cairn_ready_op_free(sc->ready_op);
  cairn_ready_op_free(sc->ready_for_local_init_op);
  cairn_op_free(sc->local_init_op);
  cairn_op_free(sc->summary_op);
  free(sc->init_fn_name);
  free(sc->warm_start_path);
  free(sc);
}

/* ---- finalize --------------------------------------------------------------------- */

/* TF's get_or_default for one collection: exactly one item → it; several →
 * "More than one item"; none → *made = 1 and the caller builds the default.
 * (TF's Scaffold variant passes the format arguments separately so its
 * message is never formatted; cairn formats it.) */
static cairn_status collection_single(cairn_registry *r, const char *key, const char *field, void **item,
                                      int *none) {
  void *items[1];
  size_t n = cairn_registry_collection_get(r, key, items, 1);
  *none = n == 0;
  *item = n == 1 ? items[0] : NULL;
  if (n > 1)
    return cairn__fail(CAIRN_E_STATE,
                       "More than one item in the collection \"%s\". Please indicate which one to use by "
                       "passing it to the scaffold options as: .%s = item to use (%zu items found)",
                       key, field, n);
  return CAIRN_OK;
}

/* The scaffold's default for one op field (TF's Scaffold.get_or_default):
 * the field as given; else the single item of the collection `key`; else a
 * new op made by make_fn(name, r, mask) and added to that collection (the
 * registry holds its own reference). One body for both op kinds. */
#define DEFINE_DEFAULT_OP(fname, T, ref_fn, make_fn, add_fn, free_fn)                                        \
  static cairn_status fname(cairn_registry *r, const char *key, const char *name, unsigned mask, T **field) { \
    if (*field) return CAIRN_OK;                                                                               \
    void *item;                                                                                                \
    int none;                                                                                                  \
    cairn_status s = collection_single(r, key, key, &item, &none);                                            \
    if (s) return s;                                                                                           \
    if (!none) {                                                                                               \
      *field = ref_fn(item);                                                                                   \
      return CAIRN_OK;                                                                                         \
    }                                                                                                          \
    T *op;                                                                                                     \
    if ((s = make_fn(name, r, mask, &op))) return s;                                                           \
    if ((s = add_fn(r, key, op))) {                                                                            \
      free_fn(op);                                                                                             \
      return s;                                                                                                \
    }                                                                                                          \
    *field = op;                                                                                               \
    return CAIRN_OK;                                                                                           \
  }

DEFINE_DEFAULT_OP(default_op, cairn_op, cairn_op_ref, cairn_op_new_init, cairn_registry_add_op, cairn_op_free)
DEFINE_DEFAULT_OP(default_ready, cairn_ready_op, cairn_ready_op_ref, cairn_ready_op_new_uninitialized,
                  cairn_registry_add_ready_op, cairn_ready_op_free)

cairn_status cairn_scaffold_finalize(cairn_scaffold *sc) {
  if (!sc) return cairn__fail(CAIRN_E_NULL, "scaffold_finalize: scaffold is NULL");
  if (sc->finalized) return CAIRN_OK;
  cairn_registry *r = sc->r;
  /* TF's finalize order: init_op, ready_op, ready_for_local_init_op,
     local_init_op, summary_op, saver, then the graph. */
  cairn_status s = default_op(r, CAIRN_COLLECTION_INIT_OP, "init", CAIRN_COLL_GLOBAL, &sc->init_op);
  if (!s)
    s = default_ready(r, CAIRN_COLLECTION_READY_OP, "ready", CAIRN_COLL_GLOBAL | CAIRN_COLL_LOCAL, &sc->ready_op);
  if (!s)
    s = default_ready(r, CAIRN_COLLECTION_READY_FOR_LOCAL_INIT_OP, "ready_for_local_init", CAIRN_COLL_GLOBAL,
                      &sc->ready_for_local_init_op);
  if (!s) s = default_op(r, CAIRN_COLLECTION_LOCAL_INIT_OP, "local_init", CAIRN_COLL_LOCAL, &sc->local_init_op);
  if (!s && !sc->summary_op) {
    /* "merge all summaries": cairn has no summary registry, so the default
       is the collection's item or none (None is not added). */
    void *item;
    int none;
    s = collection_single(r, CAIRN_COLLECTION_SUMMARY_OP, CAIRN_COLLECTION_SUMMARY_OP, &item, &none);
    if (!s && !none) sc->summary_op = cairn_op_ref(item);
  }
  if (!s && !sc->saver) {
    void *items[1];
    size_t n = cairn_registry_collection_get(r, CAIRN_COLLECTION_SAVERS, items, 1);
    if (n > 1) {
      s = cairn__fail(CAIRN_E_STATE, "More than one item in collection savers. Please indicate which one to use "
                                     "by passing it to the constructor.");
    } else if (n == 1) {
      sc->saver = items[0];
    } else {
      /* TF: Saver(sharded=True, allow_empty=True), max_to_keep 5. */
      cairn_saver_options so = cairn_saver_options_default();
      so.allow_empty = 1;
      cairn_saver *sv;
      s = cairn_saver_new(r, &so, &sv);
      if (!s) {
        s = cairn_registry_add_saver(r, sv);
        if (s)
          cairn_saver_free(sv);
        else
          sc->saver = sv;
      }
    }
  }
  if (s) return s;
  cairn_registry_finalize(r);
  sc->finalized = 1;
  return CAIRN_OK;
}

int cairn_scaffold_is_finalized(const cairn_scaffold *sc) { return sc ? sc->finalized : 0; }

/* ---- getters ---- */

cairn_registry *cairn_scaffold_registry(const cairn_scaffold *sc) { return sc ? sc->r : NULL; }
cairn_op *cairn_scaffold_init_op(const cairn_scaffold *sc) { return sc ? sc->init_op : NULL; }
cairn_ready_op *cairn_scaffold_ready_op(const cairn_scaffold *sc) { return sc ? sc->ready_op : NULL; }
cairn_ready_op *cairn_scaffold_ready_for_local_init_op(const cairn_scaffold *sc) {
  return sc ? sc->ready_for_local_init_op : NULL;
}
cairn_op *cairn_scaffold_local_init_op(const cairn_scaffold *sc) { return sc ? sc->local_init_op : NULL; }
cairn_op *cairn_scaffold_summary_op(const cairn_scaffold *sc) { return sc ? sc->summary_op : NULL; }
cairn_saver *cairn_scaffold_saver(const cairn_scaffold *sc) { return sc ? sc->saver : NULL; }
const cairn_restore_options *cairn_scaffold_restore(const cairn_scaffold *sc) { return sc ? sc->restore : NULL; }
const char *cairn_scaffold_warm_start_path(const cairn_scaffold *sc) { return sc ? sc->warm_start_path : NULL; }
const cairn_restore_options *cairn_scaffold_warm_start(const cairn_scaffold *sc) {
  return sc ? sc->warm_start : NULL;
}

const cairn_feed *cairn_scaffold_init_feeds(const cairn_scaffold *sc, size_t *n) {
  if (n) *n = sc ? sc->n_init_feeds : 0;
  return sc ? sc->init_feeds : NULL;
}

const cairn_feed *cairn_scaffold_local_init_feeds(const cairn_scaffold *sc, size_t *n) {
  if (n) *n = sc ? sc->n_local_init_feeds : 0;
  return sc ? sc->local_init_feeds : NULL;
}

/* TF's `self._init_fn = lambda sess: init_fn(self, sess)`. */
static cairn_status bound_init_fn(cairn_session *s, void *user) {
  cairn_scaffold *sc = user;
  return sc->init_fn(sc, s, sc->init_fn_user);
}

int cairn_scaffold_bound_init_fn(const cairn_scaffold *sc, cairn_session_init_fn *fn, void **user,
                                 const char **name) {
  int has = sc && sc->init_fn;
  if (fn) *fn = has ? bound_init_fn : NULL;
  if (user) *user = has ? (void *)sc : NULL;
  if (name) *name = has ? (sc->init_fn_name ? sc->init_fn_name : "<init_fn>") : NULL;
  return has;
}
