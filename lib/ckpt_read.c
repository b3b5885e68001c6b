/* The checkpoint reader's handle (cairn/ckpt.h): cairn_ckpt_open picks the
 * format's backend (cairn__ck_reader_of, ckpt_detect.c) and lets it open
 * the path; the handle keeps the backend's view (tensors by name, metadata
 * by key) and serves find, entry_at and the metadata getters from it, and
 * hands every access to tensor bytes to the backend's table
 * (ckpt_backend.h). cairn's own format is one of those backends
 * (ckpt_native_open.c, ckpt_native.c). */
#define _GNU_SOURCE 1
#include "ckpt_impl.h"
#include "ckpt_backend.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

typedef unsigned long long ull;

/* ---- the reader ------------------------------------------------------------------------ */

struct cairn_ckpt {
  char *path;
  int fd; /* the file check_unchanged watches (the view's fd once open) */
  /* The tensors sorted by name and the metadata sorted by key, from the
     backend's open; v.st: what fstat said of fd at open. */
  ck_view v;
  const ck_backend *be;
  void *bs; /* the backend's state */
};

static void fill_limits(const cairn_ckpt_limits *in, cairn_ckpt_limits *out) {
  cairn_ckpt_limits l = {0};
  if (in) l = *in;
  out->max_index_bytes = l.max_index_bytes ? l.max_index_bytes : CK_DEF_MAX_INDEX;
  out->max_meta_bytes = l.max_meta_bytes ? l.max_meta_bytes : CK_DEF_MAX_META;
  out->max_tensors = l.max_tensors ? l.max_tensors : CK_DEF_MAX_TENSORS;
  out->max_chunk_bytes = l.max_chunk_bytes ? l.max_chunk_bytes : CK_DEF_MAX_CHUNK;
  out->max_tensor_bytes = l.max_tensor_bytes ? l.max_tensor_bytes : CK_DEF_MAX_TENSOR;
}

/* What in st differs from the file c opened, as open saw it: 0 nothing,
 * else OTHER_FILE, OTHER_SIZE or OTHER_MTIME, the first that differs. Not ctime:
 * unlinking or renaming the file (a rotation by another process) changes it
 * but not the bytes c's descriptor reads. */
enum { OTHER_FILE = 1, OTHER_SIZE, OTHER_MTIME };
static int differs_from_open(const cairn_ckpt *c, const struct stat *st) {
  const struct stat *o = &c->v.st;
  if (st->st_dev != o->st_dev || st->st_ino != o->st_ino) return OTHER_FILE;
  if (st->st_size != o->st_size) return OTHER_SIZE;
  if (st->st_mtim.tv_sec != o->st_mtim.tv_sec || st->st_mtim.tv_nsec != o->st_mtim.tv_nsec) return OTHER_MTIME;
  return 0;
}

int cairn__ckpt_is_file(const cairn_ckpt *c, const char *path) {
  struct stat now, there;
  return fstat(c->fd, &now) == 0 && !differs_from_open(c, &now) && stat(path, &there) == 0 &&
         !differs_from_open(c, &there);
}

void cairn_ckpt_close(cairn_ckpt *c) {
  if (!c) return;
  c->be->close(c->bs); /* NULL after a failed open: the backend freed it */
  if (c->fd >= 0) close(c->fd);
  free(c->path);
  cairn__ck_view_clear(&c->v);
  free(c);
}

cairn_status cairn_ckpt_open(const char *path, const cairn_ckpt_limits *limits, cairn_ckpt **out) {
  return cairn__ckpt_open_in(NULL, path, limits, out);
}

cairn_status cairn__ckpt_open_in(const cairn__dir *d, const char *path, const cairn_ckpt_limits *limits,
                                 cairn_ckpt **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "ckpt_open: out is NULL");
  *out = NULL;
  if (!path) return cairn__fail(CAIRN_E_NULL, "ckpt_open: path is NULL");
  cairn_ckpt *c = calloc(1, sizeof *c);
  if (!c || !(c->path = strdup(path))) {
    free(c);
    return cairn__fail(CAIRN_E_NOMEM, "ckpt_open: out of memory");
  }
  cairn_ckpt_limits lim;
  fill_limits(limits, &lim);
  char why[700];
  c->fd = cairn__open_read(d, path, NULL, why, sizeof why); /* a TF prefix names no file: -1 */
  c->be = cairn__ck_reader_of(d, path, c->fd);
  ck_source src = {.d = d, .path = c->path, .fd = c->fd, .open_why = why};
  cairn_status s = c->be->open(&src, &lim, &c->bs, &c->v);
  if (s) {
    cairn_ckpt_close(c); /* the backend freed its state and the view's arrays */
    return s;
  }
  c->fd = c->v.fd;
  *out = c;
  return CAIRN_OK;
}

const char *cairn_ckpt_path(const cairn_ckpt *c) { return c ? c->path : NULL; }

const char *cairn_ckpt_format(const cairn_ckpt *c) { return c ? c->be->name : NULL; }

void cairn_ckpt_version(const cairn_ckpt *c, int *major, int *minor) {
  if (major) *major = c ? c->v.major : 0;
  if (minor) *minor = c ? c->v.minor : 0;
}

size_t cairn_ckpt_count(const cairn_ckpt *c) { return c ? c->v.n : 0; }

static void to_entry(const ck_entry *r, cairn_ckpt_entry *e) {
  memset(e, 0, sizeof *e);
  e->name = r->name;
  e->dtype = (cairn_dtype)r->dtype;
  e->rank = r->rank;
  for (int d = 0; d < CAIRN_MAX_RANK; d++) e->shape[d] = d < r->rank ? (int64_t)r->shape[d] : 1;
  e->raw_bytes = r->raw_bytes;
  e->stored_bytes = r->stored_bytes;
  e->raw_crc32c = r->raw_crc;
  e->n_chunks = r->n_chunks;
}

cairn_status cairn_ckpt_entry_at(const cairn_ckpt *c, size_t i, cairn_ckpt_entry *e) {
  if (!c || !e) return cairn__fail(CAIRN_E_NULL, "ckpt_entry_at: %s is NULL", c ? "entry" : "checkpoint");
  if (i >= c->v.n)
    return cairn__fail(CAIRN_E_OUT_OF_RANGE, "ckpt_entry_at: index %zu, but '%s' has %zu tensors", i, c->path, c->v.n);
  to_entry(&c->v.ents[i], e);
  return CAIRN_OK;
}

static const ck_entry *lookup(const cairn_ckpt *c, const char *name) {
  size_t len = strlen(name), lo = 0, hi = c->v.n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int r = cairn__ck_cmp_bytes(c->v.ents[mid].name, c->v.ents[mid].name_len, name, len);
    if (r == 0) return &c->v.ents[mid];
    if (r < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

static cairn_status not_found(const cairn_ckpt *c, const char *fn, const char *name) {
  char nb[96];
  return cairn__fail(CAIRN_E_NOT_FOUND, "%s: no tensor '%s' in '%s'", fn, cairn__ck_short(name, strlen(name), nb, sizeof nb),
                     c->path);
}

cairn_status cairn_ckpt_find(const cairn_ckpt *c, const char *name, cairn_ckpt_entry *e) {
  if (!c || !name || !e)
    return cairn__fail(CAIRN_E_NULL, "ckpt_find: %s is NULL", !c ? "checkpoint" : !name ? "name" : "entry");
  const ck_entry *r = lookup(c, name);
  if (!r) return not_found(c, "ckpt_find", name);
  to_entry(r, e);
  return CAIRN_OK;
}

cairn_status cairn_ckpt_codecs(const cairn_ckpt *c, const char *name, unsigned *mask) {
  if (!c || !name || !mask)
    return cairn__fail(CAIRN_E_NULL, "ckpt_codecs: %s is NULL", !c ? "checkpoint" : !name ? "name" : "mask");
  const ck_entry *r = lookup(c, name);
  if (!r) return not_found(c, "ckpt_codecs", name);
  *mask = c->be->codecs(c->bs, r);
  return CAIRN_OK;
}

/* ---- tensor bytes: the backend's ----------------------------------------------------------- */

cairn_status cairn_ckpt_read(cairn_ckpt *c, const char *name, cairn_tensor *dst) {
  if (!c || !name || !dst)
    return cairn__fail(CAIRN_E_NULL, "ckpt_read: %s is NULL", !c ? "checkpoint" : !name ? "name" : "destination");
  const ck_entry *e = lookup(c, name);
  if (!e) return not_found(c, "ckpt_read", name);
  char nb[96], a[200], b[200];
  const char *nm = cairn__ck_short(e->name, e->name_len, nb, sizeof nb);
  if ((unsigned)dst->dtype != e->dtype)
    return cairn__fail(CAIRN_E_DTYPE, "ckpt_read: '%s' in '%s' is %s, the destination is %s", nm, c->path,
                       cairn_dtype_name((cairn_dtype)e->dtype), cairn_dtype_name(dst->dtype));
  int same = dst->rank == e->rank;
  for (int d = 0; same && d < e->rank; d++) same = dst->shape[d] >= 0 && (uint64_t)dst->shape[d] == e->shape[d];
  if (!same) {
    size_t u = (size_t)snprintf(a, sizeof a, "(");
    for (int d = 0; d < e->rank && u < sizeof a; d++)
      u += (size_t)snprintf(a + u, sizeof a - u, d ? ", %llu" : "%llu", (ull)e->shape[d]);
    if (u < sizeof a) snprintf(a + u, sizeof a - u, ")");
    return cairn__fail(CAIRN_E_SHAPE, "ckpt_read: '%s' in '%s' has shape %s, the destination has %s", nm, c->path, a,
                       cairn_tensor_shape_str(dst, b, sizeof b));
  }
  if (e->raw_bytes && !dst->data) return cairn__fail(CAIRN_E_NULL, "ckpt_read: '%s': destination data is NULL", nm);
  return c->be->read(c->bs, e, dst->data);
}


cairn_status cairn_ckpt_verify_tensor(cairn_ckpt *c, const char *name) {
  if (!c || !name) return cairn__fail(CAIRN_E_NULL, "ckpt_verify_tensor: %s is NULL", !c ? "checkpoint" : "name");
  const ck_entry *e = lookup(c, name);
  if (!e) return not_found(c, "ckpt_verify_tensor", name);
  return c->be->verify_tensor(c->bs, e);
}

/* Staging is the backend's (ckpt_native_stage.c for cairn's own); a
 * backend without it decodes nothing worth keeping, so the budget is
 * simply unused. */
cairn_status cairn_ckpt_set_staging(cairn_ckpt *c, uint64_t max_bytes) {
  if (!c) return cairn__fail(CAIRN_E_NULL, "ckpt_set_staging: checkpoint is NULL");
  return c->be->set_staging ? c->be->set_staging(c->bs, max_bytes) : CAIRN_OK;
}

cairn_status cairn_ckpt_read_pieces(cairn_ckpt *c, const char *name, cairn_ckpt_piece_fn fn, void *user) {
  if (!c || !name || !fn)
    return cairn__fail(CAIRN_E_NULL, "ckpt_read_pieces: %s is NULL", !c ? "checkpoint" : !name ? "name" : "fn");
  const ck_entry *e = lookup(c, name);
  if (!e) return not_found(c, "ckpt_read_pieces", name);
  return c->be->read_pieces(c->bs, e, fn, user);
}

cairn_status cairn_ckpt_verify(cairn_ckpt *c) {
  if (!c) return cairn__fail(CAIRN_E_NULL, "ckpt_verify: checkpoint is NULL");
  return c->be->verify(c->bs, c->v.ents, c->v.n);
}

cairn_status cairn_ckpt_check_unchanged(const cairn_ckpt *c) {
  if (!c) return cairn__fail(CAIRN_E_NULL, "ckpt_check_unchanged: checkpoint is NULL");
  struct stat st;
  if (fstat(c->fd, &st) != 0) {
    int e = errno;
    return cairn__fail(CAIRN_E_IO, "'%s': cannot stat the open file: %s", c->path, strerror(e));
  }
  switch (differs_from_open(c, &st)) {
    case OTHER_FILE: return cairn__fail(CAIRN_E_CORRUPT, "'%s': the open file is no longer the same file", c->path);
    case OTHER_SIZE:
      return cairn__fail(CAIRN_E_CORRUPT, "'%s' changed since it was opened: %llu bytes then, %llu now", c->path,
                         (ull)c->v.st.st_size, (ull)st.st_size);
    case OTHER_MTIME:
      return cairn__fail(CAIRN_E_CORRUPT, "'%s' changed since it was opened: it was written to (modification time "
                         "%lld.%09ld then, %lld.%09ld now)", c->path, (long long)c->v.st.st_mtim.tv_sec,
                         (long)c->v.st.st_mtim.tv_nsec, (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec);
  }
  return CAIRN_OK;
}

/* ---- metadata ------------------------------------------------------------------------------ */

size_t cairn_ckpt_meta_count(const cairn_ckpt *c) { return c ? c->v.nmeta : 0; }

cairn_status cairn_ckpt_meta_at(const cairn_ckpt *c, size_t i, const char **key, cairn_meta_type *type) {
  if (!c) return cairn__fail(CAIRN_E_NULL, "ckpt_meta_at: checkpoint is NULL");
  if (i >= c->v.nmeta)
    return cairn__fail(CAIRN_E_OUT_OF_RANGE, "ckpt_meta_at: index %zu, but '%s' has %zu metadata entries", i, c->path,
                       c->v.nmeta);
  if (key) *key = c->v.meta[i].key;
  if (type) *type = c->v.meta[i].type;
  return CAIRN_OK;
}

static const char *type_name(cairn_meta_type t) {
  static const char *const n[] = {"?", "u64", "i64", "f64", "bool", "string", "bytes"};
  return (unsigned)t < 7 ? n[t] : "?";
}

static cairn_status meta_get(const cairn_ckpt *c, const char *fn, const char *key, cairn_meta_type type,
                             const ck_meta **out) {
  if (!c || !key) return cairn__fail(CAIRN_E_NULL, "%s: %s is NULL", fn, c ? "key" : "checkpoint");
  size_t lo = 0, hi = c->v.nmeta;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int r = strcmp(c->v.meta[mid].key, key);
    if (r == 0) {
      if (c->v.meta[mid].type != type)
        return cairn__fail(CAIRN_E_DTYPE, "%s: metadata '%s' in '%s' is a %s, not a %s", fn, key, c->path,
                           type_name(c->v.meta[mid].type), type_name(type));
      *out = &c->v.meta[mid];
      return CAIRN_OK;
    }
    if (r < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  char kb[96];
  return cairn__fail(CAIRN_E_NOT_FOUND, "%s: no metadata '%s' in '%s'", fn, cairn__ck_short(key, strlen(key), kb, sizeof kb),
                     c->path);
}

#define META_GETTER(fname, T, ty, expr)                                            \
  cairn_status fname(const cairn_ckpt *c, const char *key, T *v) {                 \
    const ck_meta *m;                                                              \
    cairn_status s = meta_get(c, &(#fname)[6], key, ty, &m);                      \
    if (s) return s;                                                               \
    if (!v) return cairn__fail(CAIRN_E_NULL, "%s: value is NULL", &(#fname)[6]);  \
    expr;                                                                          \
    return CAIRN_OK;                                                               \
  }

META_GETTER(cairn_ckpt_meta_u64, uint64_t, CAIRN_META_U64, *v = m->num)
META_GETTER(cairn_ckpt_meta_i64, int64_t, CAIRN_META_I64, *v = (int64_t)m->num)
META_GETTER(cairn_ckpt_meta_f64, double, CAIRN_META_F64, memcpy(v, &m->num, 8))
META_GETTER(cairn_ckpt_meta_bool, int, CAIRN_META_BOOL, *v = (int)m->num)
META_GETTER(cairn_ckpt_meta_str, const char *, CAIRN_META_STR, *v = m->ptr)

cairn_status cairn_ckpt_meta_bytes(const cairn_ckpt *c, const char *key, const void **v, size_t *len) {
  const ck_meta *m;
  cairn_status s = meta_get(c, "ckpt_meta_bytes", key, CAIRN_META_BYTES, &m);
  if (s) return s;
  if (!v || !len) return cairn__fail(CAIRN_E_NULL, "ckpt_meta_bytes: value or len is NULL");
  *v = m->ptr;
  *len = m->len;
  return CAIRN_OK;
}
