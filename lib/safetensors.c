/* safetensors: reader backend (ckpt_backend.h) and writer (cairn/interop.h).
 *
 * The file: an 8-byte little-endian header length N, N bytes of a UTF-8
 * JSON object (parsed with jansson, duplicate keys refused), then the data
 * region. Each key but "__metadata__" names a tensor: {"dtype": "F32",
 * "shape": [..], "data_offsets": [begin, end]}, offsets relative to the
 * data region. "__metadata__" maps strings to strings. The reader requires
 * what the format's reference implementation requires: the tensors' byte
 * ranges, taken in offset order, tile the data region exactly from 0 to its
 * end, and each range holds exactly dtype size × element count bytes.
 * doc/interop-formats.md has the details. */
#define _GNU_SOURCE 1
#include "interop_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef unsigned long long ull;

#define ST_META_KEY "__metadata__"

static const struct {
  const char *name;
  cairn_dtype dt;
} st_dtypes[] = {
    {"F64", CAIRN_DTYPE_F64}, {"F32", CAIRN_DTYPE_F32},  {"F16", CAIRN_DTYPE_F16}, {"BF16", CAIRN_DTYPE_BF16},
    {"I64", CAIRN_DTYPE_I64}, {"I32", CAIRN_DTYPE_I32},  {"I16", CAIRN_DTYPE_I16}, {"I8", CAIRN_DTYPE_I8},
    {"U64", CAIRN_DTYPE_U64}, {"U32", CAIRN_DTYPE_U32},  {"U16", CAIRN_DTYPE_U16}, {"U8", CAIRN_DTYPE_U8},
    {"BOOL", CAIRN_DTYPE_BOOL},
};
#define N_ST_DTYPES (sizeof st_dtypes / sizeof st_dtypes[0])

static const char *st_dtype_name(cairn_dtype dt) {
  for (size_t i = 0; i < N_ST_DTYPES; i++)
    if (st_dtypes[i].dt == dt) return st_dtypes[i].name;
  return NULL;
}

/* ---- reader ---------------------------------------------------------------------- */

typedef struct st_state {
  char *path;
  int fd;
  uint64_t size, data_start;
} st_state;

static void st_close(void *p) {
  st_state *s = p;
  if (!s) return;
  if (s->fd >= 0) close(s->fd);
  free(s->path);
  free(s);
}

static int cmp_begin(const void *a, const void *b) {
  const ck_entry *x = a, *y = b;
  return x->data_offset < y->data_offset ? -1 : x->data_offset > y->data_offset;
}

/* A JSON integer that is ≥ 0. */
static int json_u64(const json_t *j, uint64_t *v) {
  if (!json_is_integer(j) || json_integer_value(j) < 0) return 0;
  *v = (uint64_t)json_integer_value(j);
  return 1;
}

static cairn_status parse_tensor(const st_state *s, const char *name, size_t name_len, json_t *obj, uint64_t data_size,
                                 ck_entry *e) {
  char nb[96];
  const char *nm = cairn__ck_short(name, name_len, nb, sizeof nb);
  const char *p = s->path;
  ull hdr_end = (ull)s->data_start;
  if (!json_is_object(obj))
    return cairn__fail(CAIRN_E_FORMAT, "'%s': safetensors header (offset 8 to %llu): '%s' is not an object", p, hdr_end, nm);
  json_t *jd = json_object_get(obj, "dtype"), *js = json_object_get(obj, "shape"),
         *jo = json_object_get(obj, "data_offsets");
  if (!jd || !js || !jo || json_object_size(obj) != 3)
    return cairn__fail(CAIRN_E_FORMAT,
                       "'%s': safetensors header (offset 8 to %llu): '%s' must have exactly the fields dtype, shape "
                       "and data_offsets",
                       p, hdr_end, nm);
  if (!json_is_string(jd))
    return cairn__fail(CAIRN_E_FORMAT, "'%s': safetensors header: '%s': dtype is not a string", p, nm);
  const char *dts = json_string_value(jd);
  int found = 0;
  for (size_t i = 0; i < N_ST_DTYPES && !found; i++)
    if (strcmp(dts, st_dtypes[i].name) == 0) e->dtype = (uint8_t)st_dtypes[i].dt, found = 1;
  if (!found)
    return cairn__fail(CAIRN_E_UNSUPPORTED, "'%s': safetensors header: '%s' has dtype \"%.32s\", which cairn does not have",
                       p, nm, dts);
  if (!json_is_array(js) || json_array_size(js) > CAIRN_MAX_RANK)
    return cairn__fail(json_is_array(js) ? CAIRN_E_UNSUPPORTED : CAIRN_E_FORMAT,
                       "'%s': safetensors header: '%s': shape is not an array of at most %d dimensions", p, nm,
                       CAIRN_MAX_RANK);
  e->rank = (uint8_t)json_array_size(js);
  for (size_t d = 0; d < e->rank; d++)
    if (!json_u64(json_array_get(js, d), &e->shape[d]))
      return cairn__fail(CAIRN_E_FORMAT, "'%s': safetensors header: '%s': dimension %zu is not an integer ≥ 0", p, nm, d);
  uint64_t b, en;
  if (!json_is_array(jo) || json_array_size(jo) != 2 || !json_u64(json_array_get(jo, 0), &b) ||
      !json_u64(json_array_get(jo, 1), &en) || b > en)
    return cairn__fail(CAIRN_E_FORMAT, "'%s': safetensors header: '%s': data_offsets is not [begin, end] with begin ≤ end",
                       p, nm);
  int ok;
  uint64_t bytes = cairn__shape_bytes((cairn_dtype)e->dtype, e->rank, e->shape, &ok);
  if (!ok || bytes != en - b)
    return cairn__fail(CAIRN_E_FORMAT,
                       "'%s': safetensors header: '%s': data_offsets [%llu, %llu] hold %llu bytes, but %s of that shape "
                       "takes %s%llu",
                       p, nm, (ull)b, (ull)en, (ull)(en - b), dts, ok ? "" : "more than 2^64 or ", (ull)bytes);
  if (en > data_size)
    return cairn__fail(CAIRN_E_TRUNCATED,
                       "'%s': safetensors header: '%s': data_offsets end at %llu (file offset %llu), past the end of "
                       "the file (%llu bytes)",
                       p, nm, (ull)en, (ull)(s->data_start + en), (ull)s->size);
  e->raw_bytes = e->stored_bytes = bytes;
  e->data_offset = s->data_start + b; /* absolute, sorted below */
  return CAIRN_OK;
}

static cairn_status st_open(const cairn__dir *d, const char *path, const cairn_ckpt_limits *lim, void **state,
                            ck_view *v) {
  *state = NULL;
  st_state *s = calloc(1, sizeof *s);
  if (!s || !(s->path = strdup(path))) {
    free(s);
    return cairn__fail(CAIRN_E_NOMEM, "ckpt_open: out of memory");
  }
  s->fd = -1;
  cairn_status st = CAIRN_OK;
  json_t *root = NULL;
  char *hdr = NULL;
  char why[700];
  if ((s->fd = cairn__open_read(d, path, NULL, why, sizeof why)) < 0) {
    st = cairn__fail(CAIRN_E_IO, "ckpt_open: cannot open '%s': %s", path, why);
    goto out;
  }
  struct stat sb;
  if (fstat(s->fd, &sb) != 0) {
    int e = errno;
    st = cairn__fail(CAIRN_E_IO, "ckpt_open: cannot stat '%s': %s", path, strerror(e));
    goto out;
  }
  s->size = (uint64_t)sb.st_size;
  unsigned char lb[8];
  if ((st = cairn__ck_pread(s->fd, lb, 8, 0, path, "safetensors header length"))) goto out;
  uint64_t n = ck_get64(lb);
  if (n > lim->max_index_bytes) {
    st = cairn__fail(CAIRN_E_LIMIT, "'%s' offset 0: safetensors header of %llu bytes exceeds the limit %llu", path, (ull)n,
                     (ull)lim->max_index_bytes);
    goto out;
  }
  if (n > s->size - 8) {
    st = cairn__fail(CAIRN_E_TRUNCATED, "'%s' offset 0: safetensors header of %llu bytes, but the file has %llu after the "
                     "length", path, (ull)n, (ull)(s->size - 8));
    goto out;
  }
  if (n < 2) {
    st = cairn__fail(CAIRN_E_FORMAT, "'%s' offset 0: safetensors header of %llu bytes cannot hold a JSON object", path, (ull)n);
    goto out;
  }
  s->data_start = 8 + n;
  if (!(hdr = malloc((size_t)n))) {
    st = cairn__fail(CAIRN_E_NOMEM, "'%s': out of memory for a safetensors header of %llu bytes", path, (ull)n);
    goto out;
  }
  if ((st = cairn__ck_pread(s->fd, hdr, (size_t)n, 8, path, "safetensors header"))) goto out;
  json_error_t je;
  root = json_loadb(hdr, (size_t)n, JSON_REJECT_DUPLICATES, &je);
  if (!root || !json_is_object(root)) {
    st = cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: safetensors header is not a JSON object: %s", path,
                     root ? 8ull : (ull)(8 + (je.position > 0 ? (uint64_t)je.position : 0)),
                     root ? "another JSON value" : je.text);
    goto out;
  }
  json_t *meta = json_object_get(root, ST_META_KEY);
  size_t nt = json_object_size(root) - (meta ? 1 : 0);
  if (nt > lim->max_tensors) {
    st = cairn__fail(CAIRN_E_LIMIT, "'%s': %zu tensors exceed the limit %llu", path, nt, (ull)lim->max_tensors);
    goto out;
  }
  if (meta && !json_is_object(meta)) {
    st = cairn__fail(CAIRN_E_FORMAT, "'%s': safetensors header: __metadata__ is not an object", path);
    goto out;
  }
  /* The header's strings fit in its own bytes: one arena of n bytes holds
   * every name (NUL included: each JSON string has two quotes). */
  size_t nm = meta ? json_object_size(meta) : 0;
  v->ents = calloc(nt ? nt : 1, sizeof *v->ents);
  v->names = malloc((size_t)n + 1);
  v->meta = calloc(nm ? nm : 1, sizeof *v->meta);
  v->meta_arena = malloc((size_t)n + 1);
  if (!v->ents || !v->names || !v->meta || !v->meta_arena) {
    st = cairn__fail(CAIRN_E_NOMEM, "'%s': out of memory for %zu tensors", path, nt);
    goto out;
  }
  uint64_t data_size = s->size - s->data_start;
  char *arena = v->names;
  const char *key;
  json_t *val;
  size_t i = 0;
  json_object_foreach(root, key, val) {
    if (val == meta) continue;
    size_t kl = strlen(key);
    char nb[96];
    if (!cairn__ck_name_ok((const unsigned char *)key, kl)) {
      st = cairn__fail(CAIRN_E_FORMAT, "'%s': safetensors header: tensor name '%s' is not 1..1024 bytes of UTF-8 "
                       "without control characters", path, cairn__ck_short(key, kl, nb, sizeof nb));
      goto out;
    }
    ck_entry *e = &v->ents[i];
    memcpy(arena, key, kl + 1);
    e->name = arena;
    e->name_len = (uint16_t)kl;
    e->seq = (uint32_t)i;
    arena += kl + 1;
    if ((st = parse_tensor(s, key, kl, val, data_size, e))) goto out;
    i++;
  }
  v->n = nt;
  /* Offset order: the ranges must tile the data region. */
  qsort(v->ents, nt, sizeof *v->ents, cmp_begin);
  uint64_t at = s->data_start;
  for (i = 0; i < nt; i++) {
    const ck_entry *e = &v->ents[i];
    if (e->data_offset != at) {
      char nb[96];
      st = cairn__fail(CAIRN_E_FORMAT,
                       "'%s': safetensors header: '%s' starts at data offset %llu, but the previous tensor ends at %llu "
                       "(tensors must be contiguous, without overlaps or holes)",
                       path, cairn__ck_short(e->name, e->name_len, nb, sizeof nb), (ull)(e->data_offset - s->data_start),
                       (ull)(at - s->data_start));
      goto out;
    }
    at += e->raw_bytes;
  }
  if (at != s->size) {
    st = cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: %llu bytes after the last tensor's data", path, (ull)at,
                     (ull)(s->size - at));
    goto out;
  }
  size_t dup = cairn__view_sort(v->ents, nt);
  if (dup != nt) { /* JSON_REJECT_DUPLICATES makes this unreachable; kept for the index's invariant */
    st = cairn__fail(CAIRN_E_FORMAT, "'%s': tensor '%s' appears twice", path, v->ents[dup].name);
    goto out;
  }
  char *ma = v->meta_arena;
  i = 0;
  if (meta) {
    json_object_foreach(meta, key, val) {
      if (!json_is_string(val)) {
        st = cairn__fail(CAIRN_E_FORMAT, "'%s': safetensors header: __metadata__ value of '%.64s' is not a string", path,
                         key);
        goto out;
      }
      size_t kl = strlen(key), vl = json_string_length(val);
      if (memchr(json_string_value(val), 0, vl)) {
        st = cairn__fail(CAIRN_E_FORMAT, "'%s': safetensors header: __metadata__ value of '%.64s' holds a NUL", path, key);
        goto out;
      }
      ck_meta *m = &v->meta[i++];
      memcpy(ma, key, kl + 1);
      m->key = ma;
      ma += kl + 1;
      memcpy(ma, json_string_value(val), vl + 1);
      m->ptr = ma;
      m->len = vl;
      m->type = CAIRN_META_STR;
      ma += vl + 1;
    }
  }
  v->nmeta = i;
  cairn__view_sort_meta(v->meta, v->nmeta);
  v->major = 0;
  v->minor = 0;
out:
  json_decref(root);
  free(hdr);
  if (st) {
    free(v->ents);
    free(v->names);
    free(v->meta);
    free(v->meta_arena);
    memset(v, 0, sizeof *v);
    st_close(s);
    return st;
  }
  *state = s;
  return CAIRN_OK;
}

static cairn_status st_check_bool(const st_state *s, const ck_entry *e, const unsigned char *p) {
  uint64_t bad;
  if (e->dtype == CAIRN_DTYPE_BOOL && !cairn__bool_bytes_ok(p, e->raw_bytes, &bad))
    return cairn__fail(CAIRN_E_CORRUPT, "'%s' offset %llu: bool tensor '%s' holds byte %u, neither 0 nor 1", s->path,
                       (ull)(e->data_offset + bad), e->name, p[bad]);
  return CAIRN_OK;
}

static cairn_status st_read(void *p, const ck_entry *e, unsigned char *dst) {
  st_state *s = p;
  if (!e->raw_bytes) return CAIRN_OK;
  /* Straight into the caller's tensor: no copy beyond the kernel's. */
  cairn_status st = cairn__ck_pread(s->fd, dst, (size_t)e->raw_bytes, e->data_offset, s->path, e->name);
  return st ? st : st_check_bool(s, e, dst);
}

static cairn_status st_verify(void *p, const ck_entry *ents, size_t n) {
  st_state *s = p;
  /* The header was checked at open; the data has no checksum, but every
   * byte must be readable and bools must be 0 or 1. */
  enum { BUF = 1 << 20 };
  unsigned char *buf = malloc(BUF);
  if (!buf) return cairn__fail(CAIRN_E_NOMEM, "ckpt_verify: out of memory");
  cairn_status st = CAIRN_OK;
  for (size_t i = 0; i < n && !st; i++) {
    const ck_entry *e = &ents[i];
    for (uint64_t at = 0; at < e->raw_bytes && !st; at += BUF) {
      size_t len = e->raw_bytes - at < BUF ? (size_t)(e->raw_bytes - at) : BUF;
      st = cairn__ck_pread(s->fd, buf, len, e->data_offset + at, s->path, e->name);
      if (!st && e->dtype == CAIRN_DTYPE_BOOL) {
        ck_entry part = *e;
        part.data_offset += at;
        part.raw_bytes = len;
        st = st_check_bool(s, &part, buf);
      }
    }
  }
  free(buf);
  return st;
}

const ck_backend cairn__ck_safetensors = {"safetensors", st_open, st_read, st_verify, st_close};

/* ---- writer ------------------------------------------------------------------------ */

typedef struct st_item {
  char *name;
  const cairn_tensor *t;
} st_item;

struct cairn_safetensors_writer {
  char *path;
  st_item *items;
  size_t n, cap;
  json_t *meta;
};

cairn_status cairn_safetensors_writer_open(const char *path, cairn_safetensors_writer **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "safetensors_writer_open: out is NULL");
  *out = NULL;
  if (!path) return cairn__fail(CAIRN_E_NULL, "safetensors_writer_open: path is NULL");
  cairn_safetensors_writer *w = calloc(1, sizeof *w);
  if (!w || !(w->path = strdup(path)) || !(w->meta = json_object())) {
    if (w) free(w->path);
    free(w);
    return cairn__fail(CAIRN_E_NOMEM, "safetensors_writer_open: out of memory");
  }
  *out = w;
  return CAIRN_OK;
}

void cairn_safetensors_writer_abort(cairn_safetensors_writer *w) {
  if (!w) return;
  for (size_t i = 0; i < w->n; i++) free(w->items[i].name);
  free(w->items);
  json_decref(w->meta);
  free(w->path);
  free(w);
}

cairn_status cairn_safetensors_writer_add(cairn_safetensors_writer *w, const char *name, const cairn_tensor *t) {
  const char *fn = "safetensors_writer_add";
  if (!w || !name || !t) return cairn__fail(CAIRN_E_NULL, "%s: %s is NULL", fn, !w ? "writer" : !name ? "name" : "tensor");
  size_t len = strlen(name);
  char nb[96];
  if (!cairn__ck_name_ok((const unsigned char *)name, len) || strcmp(name, ST_META_KEY) == 0)
    return cairn__fail(CAIRN_E_INVALID, "%s: '%s': %s", fn, cairn__ck_short(name, len, nb, sizeof nb),
                       len ? "a tensor name is 1..1024 bytes of UTF-8 without control characters, not __metadata__"
                           : "empty name");
  if (!st_dtype_name(t->dtype) || !cairn__tensor_ok(t))
    return cairn__fail(CAIRN_E_INVALID, "%s: '%s': not a valid tensor", fn, cairn__ck_short(name, len, nb, sizeof nb));
  for (size_t i = 0; i < w->n; i++)
    if (strcmp(w->items[i].name, name) == 0)
      return cairn__fail(CAIRN_E_EXISTS, "%s: '%s' was already added to '%s'", fn, cairn__ck_short(name, len, nb, sizeof nb),
                         w->path);
  if (!cairn__grow((void **)&w->items, &w->cap, w->n + 1, sizeof *w->items) || !(w->items[w->n].name = strdup(name)))
    return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  w->items[w->n++].t = t;
  return CAIRN_OK;
}

cairn_status cairn_safetensors_writer_meta(cairn_safetensors_writer *w, const char *key, const char *value) {
  if (!w || !key || !value) return cairn__fail(CAIRN_E_NULL, "safetensors_writer_meta: an argument is NULL");
  json_t *s = json_string(value);
  if (!s || !*key)
    return cairn__fail(CAIRN_E_INVALID, "safetensors_writer_meta: '%.64s': key or value is not UTF-8 (or the key is empty)",
                       key);
  if (json_object_set_new(w->meta, key, s) != 0)
    return cairn__fail(CAIRN_E_INVALID, "safetensors_writer_meta: key '%.64s' is not UTF-8", key);
  return CAIRN_OK;
}

static int cmp_item(const void *a, const void *b) {
  const st_item *x = a, *y = b;
  return cairn__ck_cmp_bytes(x->name, strlen(x->name), y->name, strlen(y->name));
}

cairn_status cairn_safetensors_writer_commit(cairn_safetensors_writer *w) {
  const char *fn = "safetensors_writer_commit";
  if (!w) return cairn__fail(CAIRN_E_NULL, "%s: writer is NULL", fn);
  qsort(w->items, w->n, sizeof *w->items, cmp_item);
  cairn_status st = CAIRN_OK;
  json_t *root = json_object();
  char *hdr = NULL;
  ck_tmpfile f = {.fd = -1};
  if (!root) goto nomem;
  if (json_object_size(w->meta) && json_object_set(root, ST_META_KEY, w->meta) != 0) goto nomem;
  uint64_t at = 0;
  for (size_t i = 0; i < w->n; i++) {
    const cairn_tensor *t = w->items[i].t;
    json_t *o = json_object(), *shape = json_array(), *offs = json_array();
    int bad = !o || !shape || !offs;
    for (int d = 0; d < t->rank && !bad; d++) bad = json_array_append_new(shape, json_integer(t->shape[d])) != 0;
    uint64_t nb = cairn_tensor_nbytes(t);
    bad = bad || json_array_append_new(offs, json_integer((json_int_t)at)) != 0 ||
          json_array_append_new(offs, json_integer((json_int_t)(at + nb))) != 0;
    at += nb;
    bad = bad || json_object_set_new(o, "dtype", json_string(st_dtype_name(t->dtype))) != 0 ||
          json_object_set_new(o, "shape", shape) != 0 || (shape = NULL, json_object_set_new(o, "data_offsets", offs) != 0) ||
          (offs = NULL, json_object_set_new(root, w->items[i].name, o) != 0);
    if (bad) {
      json_decref(shape);
      json_decref(offs);
      goto nomem;
    }
  }
  if (!(hdr = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII))) goto nomem;
  size_t hl = strlen(hdr), pad = (8 - hl % 8) % 8;
  unsigned char lb[8];
  ck_put64(lb, hl + pad);
  if ((st = cairn__tmpfile_open(&f, fn, w->path))) goto out;
  static const char spaces[8] = "        ";
  if (!(st = cairn__tmpfile_write(&f, fn, lb, 8)) && !(st = cairn__tmpfile_write(&f, fn, hdr, hl)))
    st = cairn__tmpfile_write(&f, fn, spaces, pad);
  for (size_t i = 0; i < w->n && !st; i++)
    st = cairn__tmpfile_write(&f, fn, w->items[i].t->data, cairn_tensor_nbytes(w->items[i].t));
  if (!st) st = cairn__tmpfile_commit(&f, fn);
  goto out;
nomem:
  st = cairn__fail(CAIRN_E_NOMEM, "%s: out of memory building the header of '%s'", fn, w->path);
out:
  cairn__tmpfile_abort(&f);
  free(hdr);
  json_decref(root);
  cairn_safetensors_writer_abort(w);
  return st;
}
