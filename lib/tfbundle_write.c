/* TensorFlow tensor bundle writer (cairn/interop.h): one data shard
 * "<prefix>.data-00000-of-00001" streamed as tensors are added, then the
 * index "<prefix>.index": a LevelDB table without compression holding the
 * BundleHeaderProto (num_shards 1, little-endian, version 1 / min consumer
 * 0) under the empty key and one BundleEntryProto per tensor, keys in
 * bytewise order, as TensorFlow's BundleWriter lays them out. Proto3
 * fields at their default value are left out, as protobuf does. */
#define _GNU_SOURCE 1
#include "tfbundle_impl.h"

#include <stdlib.h>
#include <string.h>

typedef struct tf_item {
  char *name;
  int tf_dtype, rank;
  uint64_t shape[CAIRN_MAX_RANK];
  uint64_t offset, size;
  uint32_t masked_crc;
} tf_item;

struct cairn_tfbundle_writer {
  char *prefix;
  ck_tmpfile data;
  tf_item *items;
  size_t n, cap;
  cairn_status failed;
  int snappy; /* tests: Snappy-compressed index blocks */
  ck_nameset names; /* the items' names */
};

cairn_status cairn_tfbundle_writer_open(const char *prefix, cairn_tfbundle_writer **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "tfbundle_writer_open: out is NULL");
  *out = NULL;
  if (!prefix) return cairn__fail(CAIRN_E_NULL, "tfbundle_writer_open: prefix is NULL");
  cairn_tfbundle_writer *w = calloc(1, sizeof *w);
  char *shard = cairn__tf_shard_name(prefix, 0, 1);
  if (!w || !shard || !(w->prefix = strdup(prefix))) {
    free(shard);
    free(w);
    return cairn__fail(CAIRN_E_NOMEM, "tfbundle_writer_open: out of memory");
  }
  cairn_status s = cairn__tmpfile_open(&w->data, "tfbundle_writer_open", shard);
  free(shard);
  if (s) {
    free(w->prefix);
    free(w);
    return s;
  }
  *out = w;
  return CAIRN_OK;
}

void cairn_tfbundle_writer_abort(cairn_tfbundle_writer *w) {
  if (!w) return;
  cairn__tmpfile_abort(&w->data);
  for (size_t i = 0; i < w->n; i++) free(w->items[i].name);
  free(w->items);
  cairn__nameset_free(&w->names);
  free(w->prefix);
  free(w);
}

/* For tests: the index's blocks Snappy-compressed (where it saves space). */
void cairn__tfbundle_writer_snappy(cairn_tfbundle_writer *w, int on);
void cairn__tfbundle_writer_snappy(cairn_tfbundle_writer *w, int on) { w->snappy = on; }

cairn_status cairn_tfbundle_writer_add(cairn_tfbundle_writer *w, const char *name, const cairn_tensor *t) {
  const char *fn = "tfbundle_writer_add";
  if (!w || !name || !t) return cairn__fail(CAIRN_E_NULL, "%s: %s is NULL", fn, !w ? "writer" : !name ? "name" : "tensor");
  if (w->failed) return cairn__fail(CAIRN_E_STATE, "%s: the writer failed earlier; abort it", fn);
  size_t len = strlen(name);
  char nb[96];
  const char *nm = cairn__ck_short(name, len, nb, sizeof nb);
  if (!cairn__ck_name_ok((const unsigned char *)name, len))
    return cairn__fail(CAIRN_E_INVALID, "%s: '%s': a tensor name is 1..1024 bytes of UTF-8 without control characters", fn, nm);
  int tdt = cairn__tf_dtype_from_cairn(t->dtype);
  if (!tdt || !cairn__tensor_ok(t))
    return cairn__fail(CAIRN_E_INVALID, "%s: '%s': not a valid tensor", fn, nm);
  if (cairn__nameset_has(&w->names, name))
    return cairn__fail(CAIRN_E_EXISTS, "%s: '%s' was already added to '%s'", fn, nm, w->prefix);
  if (!cairn__grow((void **)&w->items, &w->cap, w->n + 1, sizeof *w->items)) return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  tf_item *it = &w->items[w->n];
  memset(it, 0, sizeof *it);
  if (!(it->name = strdup(name))) return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  it->tf_dtype = tdt;
  it->rank = t->rank;
  for (int d = 0; d < t->rank; d++) it->shape[d] = (uint64_t)t->shape[d];
  it->offset = w->data.written;
  it->size = cairn_tensor_nbytes(t);
  it->masked_crc = ck_mask(cairn_crc32c(0, t->data, (size_t)it->size));
  if (!cairn__nameset_put(&w->names, it->name)) {
    free(it->name);
    return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  }
  cairn_status s = cairn__tmpfile_write(&w->data, fn, t->data, (size_t)it->size);
  if (s) {
    w->failed = s; /* the writer is dead: the name stays in the set, and is freed with it */
    w->n++;
    return s;
  }
  w->n++;
  return CAIRN_OK;
}

/* ---- protobuf encoding ----------------------------------------------------------------- */

typedef struct buf {
  unsigned char *p;
  size_t len, cap;
  int oom;
} buf;

static void b_put(buf *b, const void *d, size_t n) {
  if (b->oom || !cairn__grow((void **)&b->p, &b->cap, b->len + n + 1, 1)) {
    b->oom = 1;
    return;
  }
  if (n) memcpy(b->p + b->len, d, n); /* an empty sub-message has no buffer: memcpy's NULL is undefined */
  b->len += n;
}

static void b_varint(buf *b, uint64_t v) {
  unsigned char t[10];
  b_put(b, t, cairn__varint_put(t, v));
}

static void b_field_varint(buf *b, uint32_t f, uint64_t v) {
  if (!v) return; /* proto3 default */
  b_varint(b, (uint64_t)f << 3);
  b_varint(b, v);
}

static void b_field_bytes(buf *b, uint32_t f, const buf *sub) {
  b_varint(b, (uint64_t)f << 3 | 2);
  b_varint(b, sub->len);
  b_put(b, sub->p, sub->len);
  if (sub->oom) b->oom = 1;
}

static int cmp_item(const void *a, const void *b) {
  const tf_item *x = a, *y = b;
  return cairn__ck_cmp_bytes(x->name, strlen(x->name), y->name, strlen(y->name));
}

cairn_status cairn_tfbundle_writer_commit(cairn_tfbundle_writer *w) {
  const char *fn = "tfbundle_writer_commit";
  if (!w) return cairn__fail(CAIRN_E_NULL, "%s: writer is NULL", fn);
  cairn_status s = w->failed;
  if (s) {
    cairn_tfbundle_writer_abort(w);
    return cairn__fail(s, "%s: an earlier add failed: nothing was written", fn);
  }
  if (w->n) qsort(w->items, w->n, sizeof *w->items, cmp_item); /* items is NULL with no tensors */
  ldb_writer lw;
  cairn__ldb_writer_init(&lw, w->snappy);
  buf hdr = {0}, ver = {0};
  b_field_varint(&hdr, 1, 1); /* num_shards */
  b_field_varint(&ver, 1, TF_BUNDLE_VERSION); /* producer; min_consumer 0 */
  b_field_bytes(&hdr, 3, &ver);
  int bad = hdr.oom || cairn__ldb_writer_add(&lw, "", 0, hdr.p, hdr.len);
  free(hdr.p);
  free(ver.p);
  for (size_t i = 0; i < w->n && !bad; i++) {
    const tf_item *it = &w->items[i];
    buf e = {0}, shape = {0};
    b_field_varint(&e, 1, (uint64_t)it->tf_dtype);
    for (int d = 0; d < it->rank; d++) {
      buf dim = {0};
      b_field_varint(&dim, 1, it->shape[d]);
      b_field_bytes(&shape, 2, &dim);
      free(dim.p);
    }
    b_field_bytes(&e, 2, &shape); /* always present, as TensorFlow writes it */
    /* shard_id 0 is the default */
    b_field_varint(&e, 4, it->offset);
    b_field_varint(&e, 5, it->size);
    if (it->masked_crc) {
      unsigned char c[5] = {6 << 3 | 5};
      ck_put32(c + 1, it->masked_crc);
      b_put(&e, c, 5);
    }
    bad = e.oom || cairn__ldb_writer_add(&lw, it->name, strlen(it->name), e.p, e.len);
    free(e.p);
    free(shape.p);
  }
  if (bad || cairn__ldb_writer_finish(&lw)) {
    cairn__ldb_writer_free(&lw);
    cairn_tfbundle_writer_abort(w);
    return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory building the index of '%s'", fn, w->prefix);
  }
  /* Data first: a reader finds the bundle by its index. */
  s = cairn__tmpfile_commit(&w->data, fn);
  char *index = malloc(strlen(w->prefix) + 8);
  ck_tmpfile f = {.fd = -1};
  if (!s && !index) s = cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  if (!s) {
    sprintf(index, "%s.index", w->prefix);
    if (!(s = cairn__tmpfile_open(&f, fn, index)) && !(s = cairn__tmpfile_write(&f, fn, lw.out, lw.len)))
      s = cairn__tmpfile_commit(&f, fn);
    cairn__tmpfile_abort(&f);
  }
  free(index);
  cairn__ldb_writer_free(&lw);
  cairn_tfbundle_writer_abort(w);
  return s;
}
