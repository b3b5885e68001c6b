/* The variable registry (TF's graph collections): names, collections,
 * initialization state, and TF's get_or_create_global_step and
 * report_uninitialized_variables. The values are generated in var_init.c. */
#include "var_impl.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cairn/rng.h"
#include "cairn/var.h"


#define NAME_MAX_LEN 255

struct cairn_var {
  char *name;
  cairn_tensor *tensor; /* owned */
  cairn_init init;
  unsigned collections;
  /* Atomic: sessions on several threads read it (release on set after the
     values are written, acquire on read). */
  atomic_int initialized;
  /* Bumped whenever the values may have been written from outside the
   * optimizer (initialize, restore, broadcast, set_initialized): what a
   * copy derived from the values (a bf16 model's weights) compares with
   * the generation it was made at. */
  atomic_uint_fast64_t generation;
  const cairn_registry *owner;
  uint64_t seed;        /* the owner's, for cairn_var_initialize(v) */
};

/* An item of a graph collection (cairn_registry_collection_add). */
struct coll_item {
  char *key;
  void *item;
  cairn_item_free_fn free_item;
};

struct cairn_registry {
  uint64_t seed;
  pthread_mutex_t lock; /* guards finalized and the collection items */
  int finalized;
  struct coll_item *items;
  size_t n_items, cap_items;
  cairn_var **vars;     /* creation order; each var allocated separately, so pointers stay valid */
  size_t n, cap;
  size_t *slots;        /* open addressing by cairn_hash_name: index + 1, 0 = empty */
  size_t nslots;        /* power of two, at least 2·n */
};

/* ---- names ---------------------------------------------------------------- */

static int name_char_ok(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-' || c == '/';
}

/* Copies at most 64 bytes of an arbitrary (possibly invalid) name into buf
 * for a message, with unprintable bytes as '?'. */
static const char *printable(const char *s, char buf[72]) {
  size_t i = 0;
  for (; s[i] && i < 64; i++) buf[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
  if (s[i]) {
    memcpy(buf + i, "...", 3);
    i += 3;
  }
  buf[i] = '\0';
  return buf;
}

/* Names: 1..255 bytes of [A-Za-z0-9_.-/], not starting or ending with '/',
 * no "//" (every '/' separates two non-empty scopes, as in TF). */
static cairn_status check_name(const char *fn, const char *name) {
  char pb[72];
  if (!name) return cairn__fail(CAIRN_E_NULL, "%s: name is NULL", fn);
  size_t len = strlen(name);
  if (len == 0) return cairn__fail(CAIRN_E_INVALID, "%s: name is empty", fn);
  if (len > NAME_MAX_LEN)
    return cairn__fail(CAIRN_E_INVALID, "%s: name '%s' is %zu bytes, at most %d", fn, printable(name, pb),
                       len, NAME_MAX_LEN);
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)name[i];
    if (!name_char_ok(c)) {
      if (c >= 0x20 && c < 0x7f)
        return cairn__fail(CAIRN_E_INVALID, "%s: name '%s': character '%c' at offset %zu is not allowed "
                           "(use A-Z a-z 0-9 _ . - /)", fn, printable(name, pb), c, i);
      return cairn__fail(CAIRN_E_INVALID, "%s: name '%s': byte 0x%02x at offset %zu is not allowed "
                         "(use A-Z a-z 0-9 _ . - /)", fn, printable(name, pb), c, i);
    }
    if (c == '/' && (i == 0 || i + 1 == len || name[i + 1] == '/'))
      return cairn__fail(CAIRN_E_INVALID, "%s: name '%s': '/' at offset %zu %s", fn, printable(name, pb), i,
                         i == 0 ? "starts the name" : i + 1 == len ? "ends the name" : "is followed by '/'");
  }
  return CAIRN_OK;
}

static cairn_status check_collections(const char *fn, const char *name, unsigned mask) {
  if (mask == 0) return cairn__fail(CAIRN_E_INVALID, "%s: '%s': empty collection mask", fn, name);
  if (mask & ~(unsigned)CAIRN_COLL_ALL)
    return cairn__fail(CAIRN_E_INVALID, "%s: '%s': unknown collection bits 0x%x", fn, name,
                       mask & ~(unsigned)CAIRN_COLL_ALL);
  if ((mask & CAIRN_COLL_GLOBAL) && (mask & CAIRN_COLL_LOCAL))
    return cairn__fail(CAIRN_E_INVALID, "%s: '%s': a variable cannot be both GLOBAL and LOCAL", fn, name);
  return CAIRN_OK;
}

/* ---- the name index --------------------------------------------------------- */

/* Slot holding `name`, or the empty slot where it would go. */
static size_t *lookup(const cairn_registry *r, const char *name) {
  size_t m = r->nslots - 1, i = (size_t)cairn_hash_name(name) & m;
  for (;;) {
    size_t *s = &r->slots[i];
    if (*s == 0 || strcmp(r->vars[*s - 1]->name, name) == 0) return s;
    i = (i + 1) & m;
  }
}

/* Makes room for one more variable in both the array and the index. */
static int reserve_one(cairn_registry *r) {
  if (r->n == r->cap) {
    size_t cap = r->cap ? 2 * r->cap : 16;
    cairn_var **v = realloc(r->vars, cap * sizeof *v);
    if (!v) return 0;
    r->vars = v;
    r->cap = cap;
  }
  if (2 * (r->n + 1) > r->nslots) {
    size_t nslots = r->nslots ? 2 * r->nslots : 32;
    size_t *slots = calloc(nslots, sizeof *slots);
    if (!slots) return 0;
    free(r->slots);
    r->slots = slots;
    r->nslots = nslots;
    for (size_t i = 0; i < r->n; i++) *lookup(r, r->vars[i]->name) = i + 1;
  }
  return 1;
}

/* ---- registry --------------------------------------------------------------- */

cairn_status cairn_registry_new(uint64_t seed, cairn_registry **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "registry_new: out is NULL");
  cairn_registry *r = calloc(1, sizeof *r);
  *out = r;
  if (!r) return cairn__fail(CAIRN_E_NOMEM, "registry_new: cannot allocate the registry");
  r->seed = seed;
  if (pthread_mutex_init(&r->lock, NULL) != 0) {
    free(r);
    *out = NULL;
    return cairn__fail(CAIRN_E_NOMEM, "registry_new: cannot create the registry's lock");
  }
  return CAIRN_OK;
}

static void var_free(cairn_var *v) {
  if (!v) return;
  cairn_tensor_free(v->tensor);
  free(v->name);
  free(v);
}

void cairn_registry_free(cairn_registry *r) {
  if (!r) return;
  /* Collection items first (newest first): ops and savers refer to the
     variables but never touch them when freed. */
  for (size_t i = r->n_items; i-- > 0;) {
    if (r->items[i].free_item) r->items[i].free_item(r->items[i].item);
    free(r->items[i].key);
  }
  free(r->items);
  pthread_mutex_destroy(&r->lock);
  for (size_t i = 0; i < r->n; i++) var_free(r->vars[i]);
  free(r->vars);
  free(r->slots);
  free(r);
}

uint64_t cairn_registry_seed(const cairn_registry *r) { return r ? r->seed : 0; }

/* ---- finalization and collections ------------------------------------------- */

static const char finalized_msg[] = "Graph is finalized and cannot be modified.";

static void set_finalized(cairn_registry *r, int f) {
  if (!r) return;
  pthread_mutex_lock(&r->lock);
  r->finalized = f;
  pthread_mutex_unlock(&r->lock);
}

void cairn_registry_finalize(cairn_registry *r) { set_finalized(r, 1); }
void cairn_registry_unfinalize(cairn_registry *r) { set_finalized(r, 0); }

int cairn_registry_is_finalized(const cairn_registry *r) {
  if (!r) return 0;
  cairn_registry *m = (cairn_registry *)r; /* the lock is not part of the value */
  pthread_mutex_lock(&m->lock);
  int f = m->finalized;
  pthread_mutex_unlock(&m->lock);
  return f;
}

cairn_status cairn_registry_collection_add(cairn_registry *r, const char *key, void *item,
                                           cairn_item_free_fn free_item) {
  static const char fn[] = "registry_collection_add";
  if (!r) return cairn__fail(CAIRN_E_NULL, "%s: registry is NULL", fn);
  if (!key) return cairn__fail(CAIRN_E_NULL, "%s: key is NULL", fn);
  if (!item) return cairn__fail(CAIRN_E_NULL, "%s: '%s': item is NULL", fn, key);
  size_t len = strlen(key);
  if (len == 0 || len > NAME_MAX_LEN)
    return cairn__fail(CAIRN_E_INVALID, "%s: key is %zu bytes, expected 1..%d", fn, len, NAME_MAX_LEN);
  char *k = malloc(len + 1);
  if (!k) return cairn__fail(CAIRN_E_NOMEM, "%s: '%s': cannot copy the key", fn, key);
  memcpy(k, key, len + 1);
  cairn_status s = CAIRN_OK;
  pthread_mutex_lock(&r->lock);
  if (r->finalized) {
    s = cairn__fail(CAIRN_E_STATE, "%s: '%s': %s", fn, key, finalized_msg);
  } else if (r->n_items == r->cap_items) {
    size_t cap = r->cap_items ? 2 * r->cap_items : 8;
    struct coll_item *it = realloc(r->items, cap * sizeof *it);
    if (!it) {
      s = cairn__fail(CAIRN_E_NOMEM, "%s: '%s': cannot grow the collections", fn, key);
    } else {
      r->items = it;
      r->cap_items = cap;
    }
  }
  if (s == CAIRN_OK) {
    r->items[r->n_items].key = k;
    r->items[r->n_items].item = item;
    r->items[r->n_items].free_item = free_item;
    r->n_items++;
  }
  pthread_mutex_unlock(&r->lock);
  if (s) free(k);
  return s;
}

size_t cairn_registry_collection_get(const cairn_registry *r, const char *key, void **out, size_t cap) {
  if (!r || !key) return 0;
  cairn_registry *m = (cairn_registry *)r;
  size_t k = 0;
  pthread_mutex_lock(&m->lock);
  for (size_t i = 0; i < m->n_items; i++) {
    if (strcmp(m->items[i].key, key) != 0) continue;
    if (out && k < cap) out[k] = m->items[i].item;
    k++;
  }
  pthread_mutex_unlock(&m->lock);
  return k;
}

cairn_status cairn_var_new(cairn_registry *r, const char *name, cairn_dtype dt, int rank,
                              const int64_t *shape, cairn_init init, unsigned collections, cairn_var **out) {
  static const char fn[] = "var_new";
  if (out) *out = NULL;
  if (!r) return cairn__fail(CAIRN_E_NULL, "%s: registry is NULL", fn);
  if (!out) return cairn__fail(CAIRN_E_NULL, "%s: out is NULL", fn);
  cairn_status s = check_name(fn, name);
  if (s) return s;
  if (cairn_registry_is_finalized(r)) return cairn__fail(CAIRN_E_STATE, "%s: '%s': %s", fn, name, finalized_msg);
  s = check_collections(fn, name, collections);
  if (s) return s;
  if (r->n > 0) {
    const size_t *slot = lookup(r, name);
    if (*slot) {
      char b[160];
      return cairn__fail(CAIRN_E_EXISTS, "%s: '%s' already exists with shape %s", fn, name,
                         cairn_tensor_shape_str(r->vars[*slot - 1]->tensor, b, sizeof b));
    }
  }
  if (cairn_dtype_size(dt) == 0) return cairn__fail(CAIRN_E_INVALID, "%s: '%s': unknown dtype %d", fn, name, (int)dt);
  if (rank < 0 || rank > CAIRN_MAX_RANK)
    return cairn__fail(CAIRN_E_INVALID, "%s: '%s': rank %d is outside 0..%d", fn, name, rank, CAIRN_MAX_RANK);
  if (rank > 0 && !shape) return cairn__fail(CAIRN_E_NULL, "%s: '%s': shape is NULL for rank %d", fn, name, rank);
  for (int i = 0; i < rank; i++)
    if (shape[i] < 0)
      return cairn__fail(CAIRN_E_INVALID, "%s: '%s': dimension %d is negative (%lld)", fn, name, i,
                         (long long)shape[i]);
  s = cairn__init_check(fn, name, dt, init);
  if (s) return s;

  if (!reserve_one(r)) return cairn__fail(CAIRN_E_NOMEM, "%s: '%s': cannot grow the registry", fn, name);
  cairn_var *v = calloc(1, sizeof *v);
  size_t len = strlen(name);
  if (v) v->name = malloc(len + 1);
  if (!v || !v->name) {
    var_free(v);
    return cairn__fail(CAIRN_E_NOMEM, "%s: '%s': cannot allocate the variable", fn, name);
  }
  memcpy(v->name, name, len + 1);
  s = cairn_tensor_new(dt, rank, shape, &v->tensor);
  if (s) {
    /* Keep tensor_new's detail (overflow, allocation size), under our name. */
    const char *detail = cairn__errmsg_copy();
    var_free(v);
    return cairn__fail(s, "%s: '%s': %s", fn, name, detail);
  }
  v->init = init;
  v->collections = collections;
  v->owner = r;
  v->seed = r->seed;
  r->vars[r->n] = v;
  *lookup(r, v->name) = r->n + 1;
  r->n++;
  *out = v;
  return CAIRN_OK;
}

/* Deprecated name (cairn/var.h). */
cairn_status cairn_var_create(cairn_registry *r, const char *name, cairn_dtype dt, int rank, const int64_t *shape,
                              cairn_init init, unsigned collections, cairn_var **out) {
  return cairn_var_new(r, name, dt, rank, shape, init, collections, out);
}

cairn_status cairn_registry_find(const cairn_registry *r, const char *name, cairn_var **out) {
  if (out) *out = NULL;
  if (!r) return cairn__fail(CAIRN_E_NULL, "registry_find: registry is NULL");
  if (!name) return cairn__fail(CAIRN_E_NULL, "registry_find: name is NULL");
  if (!out) return cairn__fail(CAIRN_E_NULL, "registry_find: out is NULL");
  const size_t *slot = r->n ? lookup(r, name) : NULL;
  if (!slot || !*slot) {
    char pb[72];
    return cairn__fail(CAIRN_E_NOT_FOUND, "registry_find: no variable named '%s'", printable(name, pb));
  }
  *out = r->vars[*slot - 1];
  return CAIRN_OK;
}

cairn_var *cairn__registry_lookup(const cairn_registry *r, const char *name) {
  if (!r || !name || r->n == 0) return NULL;
  const size_t *slot = lookup(r, name);
  return *slot ? r->vars[*slot - 1] : NULL;
}

cairn_status cairn_registry_global_step(cairn_registry *r, cairn_var **out) {
  static const char fn[] = "registry_global_step";
  if (out) *out = NULL;
  if (!r) return cairn__fail(CAIRN_E_NULL, "%s: registry is NULL", fn);
  if (!out) return cairn__fail(CAIRN_E_NULL, "%s: out is NULL", fn);
  const size_t *slot = r->n ? lookup(r, "global_step") : NULL;
  if (slot && *slot) {
    cairn_var *v = r->vars[*slot - 1];
    if (v->tensor->dtype != CAIRN_DTYPE_I64)
      return cairn__fail(CAIRN_E_DTYPE, "%s: 'global_step' exists as %s, expected i64", fn,
                         cairn_dtype_name(v->tensor->dtype));
    if (v->tensor->rank != 0) {
      char b[160];
      return cairn__fail(CAIRN_E_SHAPE, "%s: 'global_step' exists with shape %s, expected a scalar ()", fn,
                         cairn_tensor_shape_str(v->tensor, b, sizeof b));
    }
    *out = v;
    return CAIRN_OK;
  }
  return cairn_var_new(r, "global_step", CAIRN_DTYPE_I64, 0, NULL, cairn_init_zeros(), CAIRN_COLL_GLOBAL,
                          out);
}

cairn_var *cairn__registry_var_at(const cairn_registry *r, size_t i) { return r && i < r->n ? r->vars[i] : NULL; }

size_t cairn_registry_count(const cairn_registry *r, unsigned mask) {
  return cairn_registry_list(r, mask, NULL, 0);
}

size_t cairn_registry_list(const cairn_registry *r, unsigned mask, cairn_var **out, size_t cap) {
  if (!r) return 0;
  size_t k = 0;
  for (size_t i = 0; i < r->n; i++) {
    if (!(r->vars[i]->collections & mask)) continue;
    if (out && k < cap) out[k] = r->vars[i];
    k++;
  }
  return k;
}

/* Walks the variables report_uninitialized looks at: vars[0..n) if vars is
 * given, else every GLOBAL or LOCAL variable of r. Returns the next
 * uninitialized one at or after *pos, or NULL. */
static cairn_var *next_uninitialized(const cairn_registry *r, cairn_var *const *vars, size_t n, size_t *pos) {
  if (vars) {
    for (; *pos < n; ++*pos)
      if (vars[*pos] && !cairn_var_is_initialized(vars[*pos])) return vars[(*pos)++];
  } else if (r) {
    for (; *pos < r->n; ++*pos) {
      cairn_var *v = r->vars[*pos];
      if ((v->collections & (CAIRN_COLL_GLOBAL | CAIRN_COLL_LOCAL)) && !cairn_var_is_initialized(v)) {
        ++*pos;
        return v;
      }
    }
  }
  return NULL;
}

size_t cairn_registry_report_uninitialized(const cairn_registry *r, cairn_var *const *vars, size_t n,
                                           cairn_var **out) {
  size_t pos = 0, k = 0;
  for (cairn_var *v; (v = next_uninitialized(r, vars, n, &pos)) != NULL; k++)
    if (out && k < n) out[k] = v;
  return k;
}

size_t cairn_registry_uninitialized_str(const cairn_registry *r, cairn_var *const *vars, size_t n, char *buf,
                                        size_t len) {
  size_t total = cairn_registry_report_uninitialized(r, vars, n, NULL);
  if (!buf || len == 0) return total;
  buf[0] = '\0';
  size_t pos = 0, used = 0, k = 0;
  for (cairn_var *v; (v = next_uninitialized(r, vars, n, &pos)) != NULL; k++) {
    const char *sep = k > 0 ? ", " : "";
    size_t need = strlen(sep) + strlen(v->name);
    /* While more names follow, keep room for ", ..." after this one. */
    size_t reserve = k + 1 < total ? 5 : 0;
    if (used + need + reserve + 1 > len) {
      const char *tail = k > 0 ? ", ..." : "...";
      size_t tl = strlen(tail);
      if (used + tl + 1 > len) tl = len - 1 - used;
      memcpy(buf + used, tail, tl);
      buf[used + tl] = '\0';
      break;
    }
    used += (size_t)snprintf(buf + used, len - used, "%s%s", sep, v->name);
  }
  return total;
}

cairn_status cairn_registry_initialize(cairn_registry *r, cairn_var *const *vars, size_t n) {
  if (!r) return cairn__fail(CAIRN_E_NULL, "registry_initialize: registry is NULL");
  if (!vars && n > 0) return cairn__fail(CAIRN_E_NULL, "registry_initialize: vars is NULL");
  for (size_t i = 0; i < n; i++) {
    if (!vars[i]) return cairn__fail(CAIRN_E_NULL, "registry_initialize: vars[%zu] is NULL", i);
    if (vars[i]->owner != r)
      return cairn__fail(CAIRN_E_INVALID, "registry_initialize: '%s' belongs to another registry", vars[i]->name);
    cairn_status s = cairn_var_initialize(vars[i]);
    if (s) return s;
  }
  return CAIRN_OK;
}

cairn_status cairn_registry_initialize_collection(cairn_registry *r, unsigned mask) {
  if (!r) return cairn__fail(CAIRN_E_NULL, "registry_initialize_collection: registry is NULL");
  for (size_t i = 0; i < r->n; i++) {
    if (!(r->vars[i]->collections & mask)) continue;
    cairn_status s = cairn_var_initialize(r->vars[i]);
    if (s) return s;
  }
  return CAIRN_OK;
}

/* ---- variables -------------------------------------------------------------- */

const char *cairn_var_name(const cairn_var *v) { return v ? v->name : NULL; }
cairn_tensor *cairn_var_tensor(const cairn_var *v) { return v ? v->tensor : NULL; }
unsigned cairn_var_collections(const cairn_var *v) { return v ? v->collections : 0; }
cairn_init cairn_var_initializer(const cairn_var *v) { return v ? v->init : cairn_init_zeros(); }
int cairn_var_is_initialized(const cairn_var *v) {
  return v ? atomic_load_explicit(&((cairn_var *)v)->initialized, memory_order_acquire) : 0;
}

void cairn_var_set_initialized(cairn_var *v, int initialized) {
  if (!v) return;
  atomic_fetch_add_explicit(&v->generation, 1, memory_order_relaxed);
  atomic_store_explicit(&v->initialized, initialized != 0, memory_order_release);
}

uint64_t cairn__var_generation(const cairn_var *v) {
  return v ? atomic_load_explicit(&((cairn_var *)v)->generation, memory_order_acquire) : 0;
}

cairn_status cairn_var_initialize(cairn_var *v) {
  if (!v) return cairn__fail(CAIRN_E_NULL, "var_initialize: variable is NULL");
  cairn_status s = cairn_init_fill(v->tensor, v->init, v->seed, v->name);
  if (s) return s;
  atomic_fetch_add_explicit(&v->generation, 1, memory_order_relaxed);
  atomic_store_explicit(&v->initialized, 1, memory_order_release);
  return CAIRN_OK;
}
