/* TensorFlow V2 checkpoint ("tensor bundle") reader backend
 * (ckpt_backend.h), from the published format: "<prefix>.index" is a
 * LevelDB table (leveldb_table.c) whose empty key holds a
 * BundleHeaderProto (num_shards 1, endianness 2, version 3) and whose
 * other keys are tensor names holding a BundleEntryProto (dtype 1, shape
 * 2, shard_id 3, offset 4, size 5, crc32c 6 as a masked CRC32C of the
 * tensor bytes, slices 7); the bytes are in "<prefix>.data-NNNNN-of-NNNNN".
 * The protobufs are decoded by the small varint reader below: known fields
 * must have their wire type, unknown ones are skipped. */
#define _GNU_SOURCE 1
#include "tfbundle_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef CAIRN_HAVE_OPENMP
#include <omp.h>
#endif

#include "cairn/env.h"
#include "cairn/runtime.h"

typedef unsigned long long ull;

/* ---- protobuf wire format ------------------------------------------------------------- */

typedef struct pb {
  const unsigned char *p, *end;
} pb;

/* Next field: 1 got one, 0 at the end, -1 malformed. Length-delimited
 * fields come back in *sub; varints in *v; fixed32/64 in *v too. */
static int pb_next(pb *m, uint32_t *field, int *wt, uint64_t *v, pb *sub) {
  if (m->p >= m->end) return 0;
  uint64_t tag;
  size_t a = cairn__varint_get(m->p, m->end, &tag);
  if (!a || tag >> 3 == 0 || tag >> 3 > UINT32_MAX) return -1;
  m->p += a;
  *field = (uint32_t)(tag >> 3);
  *wt = (int)(tag & 7);
  switch (*wt) {
    case 0:
      if (!(a = cairn__varint_get(m->p, m->end, v))) return -1;
      m->p += a;
      return 1;
    case 1:
      if (m->end - m->p < 8) return -1;
      *v = ck_get64(m->p);
      m->p += 8;
      return 1;
    case 5:
      if (m->end - m->p < 4) return -1;
      *v = ck_get32(m->p);
      m->p += 4;
      return 1;
    case 2:
      if (!(a = cairn__varint_get(m->p, m->end, v)) || *v > (uint64_t)(m->end - m->p - a)) return -1;
      sub->p = m->p + a;
      sub->end = sub->p + *v;
      m->p = sub->end;
      return 1;
    default: /* groups: obsolete, never in these messages */
      return -1;
  }
}

typedef struct tf_raw {
  int dtype;
  int rank;
  uint64_t shape[CAIRN_MAX_RANK];
  uint64_t shard, offset, size;
  uint32_t crc;
  int sliced, too_many_dims, unknown;
} tf_raw;

/* 0 ok, else a static description of the problem. */
static const char *parse_shape(pb m, tf_raw *e) {
  uint32_t f;
  int wt, r;
  uint64_t v;
  pb sub;
  while ((r = pb_next(&m, &f, &wt, &v, &sub)) == 1) {
    if (f == 2) {
      if (wt != 2) return "shape dim has the wrong wire type";
      uint64_t size = 0;
      uint32_t g;
      int wt2, r2;
      uint64_t v2;
      pb s2;
      while ((r2 = pb_next(&sub, &g, &wt2, &v2, &s2)) == 1)
        if (g == 1) {
          if (wt2 != 0) return "dim size has the wrong wire type";
          size = v2;
        }
      if (r2 < 0) return "shape dim is malformed";
      if ((int64_t)size < 0) e->unknown = 1;
      if (e->rank == CAIRN_MAX_RANK) {
        e->too_many_dims = 1;
        continue;
      }
      e->shape[e->rank++] = size;
    } else if (f == 3) {
      if (wt != 0) return "unknown_rank has the wrong wire type";
      if (v) e->unknown = 1;
    }
  }
  return r < 0 ? "shape is malformed" : NULL;
}

static const char *parse_entry(pb m, tf_raw *e) {
  memset(e, 0, sizeof *e);
  uint32_t f;
  int wt, r;
  uint64_t v;
  pb sub;
  while ((r = pb_next(&m, &f, &wt, &v, &sub)) == 1) {
    static const int want[8] = {-1, 0, 2, 0, 0, 0, 5, 2};
    if (f <= 7 && wt != want[f]) return "a field has the wrong wire type";
    switch (f) {
      case 1: e->dtype = v > 1000 ? 1000 : (int)v; break;
      case 2: {
        e->rank = 0;
        const char *err = parse_shape(sub, e);
        if (err) return err;
        break;
      }
      case 3: e->shard = v; break;
      case 4: e->offset = v; break;
      case 5: e->size = v; break;
      case 6: e->crc = (uint32_t)v; break;
      case 7: e->sliced = 1; break;
      default: break;
    }
  }
  return r < 0 ? "the BundleEntryProto is malformed" : NULL;
}

/* ---- the backend ---------------------------------------------------------------------- */

typedef struct tf_state {
  char *path, *prefix;
  uint32_t nshards;
  int *fds;
  uint64_t *sizes;
} tf_state;

static void tf_close(void *p) {
  tf_state *s = p;
  if (!s) return;
  for (uint32_t i = 0; s->fds && i < s->nshards; i++)
    if (s->fds[i] >= 0) close(s->fds[i]);
  free(s->fds);
  free(s->sizes);
  free(s->path);
  free(s->prefix);
  free(s);
}

/* What the index walk collects. Per tensor only what the view keeps: its
 * ck_entry and its name, in one growing arena (the entry holds the name's
 * offset in record_offset until the arena stops moving), so the memory is
 * that of the view, not of a record per allocation. */
typedef struct collect {
  tf_state *s;
  const char *index;
  const cairn_ckpt_limits *lim;
  int have_header;
  uint64_t nshards;
  ck_entry *ents;
  size_t n, cap;
  char *names;
  size_t nlen, ncap;
  int object_graph; /* _CHECKPOINTABLE_OBJECT_GRAPH was seen (and left out) */
} collect;

/* The header's VersionDef (producer, min_consumer, bad_consumers, packed
 * or not) into *min_consumer and *bad_consumer: 0, -1 when the message is
 * malformed, -2 when a packed bad_consumers list is. */
static int parse_version(pb sub, uint64_t *min_consumer, int *bad_consumer) {
  uint32_t g;
  int w2, r2;
  uint64_t v2;
  pb s2;
  while ((r2 = pb_next(&sub, &g, &w2, &v2, &s2)) == 1) {
    if (g == 2 && w2 == 0) *min_consumer = v2;
    else if (g == 3 && w2 == 0 && v2 == TF_BUNDLE_VERSION) *bad_consumer = 1;
    else if (g == 3 && w2 == 2) {
      uint64_t bc;
      for (const unsigned char *q = s2.p; q < s2.end;) {
        size_t a = cairn__varint_get(q, s2.end, &bc);
        if (!a) return -2;
        if (bc == TF_BUNDLE_VERSION) *bad_consumer = 1;
        q += a;
      }
    }
  }
  return r2 < 0 ? -1 : 0;
}

/* The record of the empty key (it sorts first): the BundleHeaderProto. */
static cairn_status on_header(collect *c, const ldb_kv *kv) {
  ull at = (ull)kv->block_at;
  pb m = {kv->val, kv->val + kv->vlen};
  uint32_t f;
  int wt, r;
  uint64_t v, endian = 0, min_consumer = 0;
  int bad_consumer = 0;
  pb sub;
  c->nshards = 0;
  while ((r = pb_next(&m, &f, &wt, &v, &sub)) == 1) {
    if (f == 1 && wt == 0) c->nshards = v;
    else if (f == 2 && wt == 0) endian = v;
    else if (f == 3 && wt == 2) {
      int vr = parse_version(sub, &min_consumer, &bad_consumer);
      if (vr == -2)
        return cairn__fail(CAIRN_E_FORMAT, "'%s' block at %llu: the bundle header's version is malformed", c->index, at);
      if (vr < 0) r = -1;
    }
  }
  if (r < 0) return cairn__fail(CAIRN_E_FORMAT, "'%s' block at %llu: the bundle header (BundleHeaderProto) is malformed", c->index, at);
  if (endian != 0)
    return cairn__fail(CAIRN_E_UNSUPPORTED, "'%s': the bundle is big-endian; cairn reads little-endian bundles only", c->index);
  if (min_consumer > TF_BUNDLE_VERSION || bad_consumer)
    return cairn__fail(CAIRN_E_UNSUPPORTED, "'%s': the bundle needs a reader of version %llu or newer (this reads version %d)",
                       c->index, (ull)min_consumer, TF_BUNDLE_VERSION);
  if (c->nshards == 0 || c->nshards > TF_MAX_SHARDS)
    return cairn__fail(CAIRN_E_FORMAT, "'%s': the bundle header says %llu shards (1 to %u)", c->index, (ull)c->nshards,
                       TF_MAX_SHARDS);
  c->have_header = 1;
  return CAIRN_OK;
}

/* A tensor's record: its BundleEntryProto, checked and kept as an entry of
 * the view (the name copied into the arena). */
static cairn_status on_tensor(collect *c, const ldb_kv *kv) {
  ull at = (ull)kv->block_at;
  pb m = {kv->val, kv->val + kv->vlen};
  char nb[96];
  const char *nm = cairn__ck_short((const char *)kv->key, kv->klen, nb, sizeof nb);
  if (!c->have_header)
    return cairn__fail(CAIRN_E_FORMAT, "'%s': no bundle header (the empty key) before '%s'", c->index, nm);
  if (!cairn__ck_name_ok(kv->key, kv->klen))
    return cairn__fail(CAIRN_E_UNSUPPORTED,
                       "'%s' block at %llu: key '%s' is not a tensor name cairn can hold (1..1024 bytes of UTF-8 without "
                       "control characters; TensorFlow's keys of variable slices are binary)",
                       c->index, at, nm);
  if (c->n >= c->lim->max_tensors)
    return cairn__fail(CAIRN_E_LIMIT, "'%s': more than %llu tensors (the limit)", c->index, (ull)c->lim->max_tensors);
  if (!cairn__grow((void **)&c->ents, &c->cap, c->n + 1, sizeof *c->ents))
    return cairn__fail(CAIRN_E_NOMEM, "'%s': out of memory", c->index);
  tf_raw raw, *r = &raw; /* one at a time: only the entry is kept */
  const char *err = parse_entry(m, r);
  if (err) return cairn__fail(CAIRN_E_FORMAT, "'%s' block at %llu: entry of '%s': %s", c->index, at, err, nm);
  if (r->sliced)
    return cairn__fail(CAIRN_E_UNSUPPORTED,
                       "'%s': '%s' is a partitioned (sliced) variable; cairn reads whole tensors only (save it "
                       "unpartitioned in TensorFlow)",
                       c->index, nm);
  /* TensorFlow 2's object-based checkpoints all carry this serialized
   * object graph as a string scalar: metadata about Python objects, not a
   * variable. Left out, so that their variables can be read. */
  if (r->dtype == TF_DT_STRING && kv->klen == 28 && memcmp(kv->key, "_CHECKPOINTABLE_OBJECT_GRAPH", 28) == 0) {
    c->object_graph = 1;
    return CAIRN_OK;
  }
  if (r->dtype == TF_DT_STRING)
    return cairn__fail(CAIRN_E_UNSUPPORTED, "'%s': '%s' is a string tensor (DT_STRING); cairn has no string tensors",
                       c->index, nm);
  cairn_dtype dt = cairn__tf_dtype_to_cairn(r->dtype);
  if (!dt)
    return cairn__fail(CAIRN_E_UNSUPPORTED, "'%s': '%s' has TensorFlow dtype %d, which cairn does not have", c->index, nm,
                       r->dtype);
  if (r->too_many_dims)
    return cairn__fail(CAIRN_E_UNSUPPORTED, "'%s': '%s' has more than %d dimensions", c->index, nm, CAIRN_MAX_RANK);
  if (r->unknown) return cairn__fail(CAIRN_E_FORMAT, "'%s': '%s' has an unknown dimension or rank", c->index, nm);
  ck_entry *e = &c->ents[c->n];
  memset(e, 0, sizeof *e);
  e->name = (char *)kv->key; /* replaced by the arena copy below */
  e->name_len = (uint16_t)kv->klen;
  e->dtype = (uint8_t)dt;
  e->rank = (uint8_t)r->rank;
  memcpy(e->shape, r->shape, sizeof e->shape);
  int ok;
  uint64_t bytes = cairn__shape_bytes(dt, r->rank, r->shape, &ok);
  if (!ok || bytes != r->size)
    return cairn__fail(CAIRN_E_FORMAT, "'%s': '%s': %llu bytes stored, but %s of that shape takes %s%llu", c->index, nm,
                       (ull)r->size, cairn_dtype_name(dt), ok ? "" : "more than 2^64 or ", (ull)bytes);
  if (bytes > c->lim->max_tensor_bytes)
    return cairn__fail(CAIRN_E_LIMIT, "'%s': '%s': %llu bytes exceed the limit %llu", c->index, nm, (ull)bytes,
                       (ull)c->lim->max_tensor_bytes);
  e->raw_bytes = e->stored_bytes = bytes;
  e->raw_crc = ck_unmask(r->crc);
  e->data_offset = r->offset;
  if (r->shard >= c->nshards)
    return cairn__fail(CAIRN_E_FORMAT, "'%s': '%s' is in shard %llu of %llu", c->index, nm, (ull)r->shard, (ull)c->nshards);
  e->seq = (uint32_t)r->shard;
  /* Keep the name: the callback's key buffer is reused. */
  if (!cairn__grow((void **)&c->names, &c->ncap, c->nlen + kv->klen + 1, 1))
    return cairn__fail(CAIRN_E_NOMEM, "'%s': out of memory", c->index);
  memcpy(c->names + c->nlen, kv->key, kv->klen);
  c->names[c->nlen + kv->klen] = '\0';
  e->name = NULL;
  e->record_offset = c->nlen;
  c->nlen += kv->klen + 1;
  c->n++;
  return CAIRN_OK;
}

static cairn_status on_kv(void *ctx, const ldb_kv *kv) {
  collect *c = ctx;
  return kv->klen == 0 ? on_header(c, kv) : on_tensor(c, kv);
}

/* Step 1 of tf_open: "<prefix>.index", read block by block (never in
 * memory whole) into c; the entries then point into the name arena. */
static cairn_status tf_read_index(const cairn__dir *d, const char *index, const cairn_ckpt_limits *lim, collect *c) {
  /* The index and the shards are names derived from the prefix: a
     checkpoint found in a directory must not reach out of it through
     them (a link), nor hang on a FIFO. */
  char why[700];
  struct stat sb;
  int fd = cairn__open_read(d, index, &sb, why, sizeof why);
  if (fd < 0) return cairn__fail(CAIRN_E_IO, "ckpt_open: cannot open '%s': %s", index, why);
  cairn_status st = CAIRN_OK;
  if ((uint64_t)sb.st_size > lim->max_index_bytes)
    st = cairn__fail(CAIRN_E_LIMIT, "'%s': index of %llu bytes exceeds the limit %llu", index, (ull)sb.st_size,
                     (ull)lim->max_index_bytes);
  if (!st) st = cairn__ldb_read(index, fd, (uint64_t)sb.st_size, lim->max_index_bytes, on_kv, c);
  close(fd);
  if (st) return st;
  if (!c->have_header)
    return cairn__fail(CAIRN_E_FORMAT, "'%s': no bundle header (the empty key): not a TensorFlow checkpoint index",
                       index);
  /* The arena no longer moves: point the entries into it. */
  for (size_t i = 0; i < c->n; i++) {
    c->ents[i].name = c->names + c->ents[i].record_offset;
    c->ents[i].record_offset = 0;
  }
  return CAIRN_OK;
}

/* Step 2: opens the shards that hold tensors (in the directory, as the
 * index) and checks that each tensor's range is inside its shard. */
static cairn_status tf_open_shards(const cairn__dir *d, tf_state *s, const char *index, const collect *c) {
  char why[700];
  s->nshards = (uint32_t)c->nshards;
  s->fds = malloc(s->nshards * sizeof *s->fds);
  s->sizes = calloc(s->nshards, sizeof *s->sizes);
  if (!s->fds || !s->sizes) return cairn__fail(CAIRN_E_NOMEM, "'%s': out of memory", index);
  for (uint32_t i = 0; i < s->nshards; i++) s->fds[i] = -1;
  for (size_t i = 0; i < c->n; i++) {
    const ck_entry *e = &c->ents[i];
    uint32_t sh = e->seq;
    if (s->fds[sh] < 0) {
      char *name = cairn__tf_shard_name(s->prefix, sh, s->nshards);
      struct stat ds;
      cairn_status st = CAIRN_OK;
      if (!name)
        st = cairn__fail(CAIRN_E_NOMEM, "ckpt_open: out of memory");
      else if ((s->fds[sh] = cairn__open_read(d, name, &ds, why, sizeof why)) < 0)
        st = cairn__fail(CAIRN_E_IO, "ckpt_open: cannot open data shard '%s' (tensor '%s'): %s", name, e->name, why);
      else
        s->sizes[sh] = (uint64_t)ds.st_size;
      free(name);
      if (st) return st;
    }
    uint64_t end;
    if (__builtin_add_overflow(e->data_offset, e->raw_bytes, &end) || end > s->sizes[sh]) {
      char *name = cairn__tf_shard_name(s->prefix, sh, s->nshards);
      cairn_status st = cairn__fail(
          CAIRN_E_TRUNCATED,
          "'%s': tensor '%s' at offset %llu of %llu bytes runs past the end of the shard (%llu bytes): the "
          "shard is cut short or the index is wrong (a TensorFlow checkpoint, not a cairn file: no cairn "
          "save was interrupted and ckpt-inspect recover does not apply; copy or export it again)",
          name ? name : index, e->name, (ull)e->data_offset, (ull)e->raw_bytes, (ull)s->sizes[sh]);
      free(name);
      return st;
    }
  }
  return CAIRN_OK;
}

/* Step 3: the view takes the entries and the names over (no metadata). */
static cairn_status tf_fill_view(collect *c, const char *index, ck_view *v) {
  if (c->n == 0 && c->object_graph)
    /* Otherwise it would just list "0 tensors", without a word of why. */
    cairn_env_log(NULL, CAIRN_LOG_WARN,
                  "'%s': this TensorFlow bundle holds no numeric tensor, only _CHECKPOINTABLE_OBJECT_GRAPH (the "
                  "object graph of a TensorFlow 2 checkpoint, a string that cairn leaves out): the object it saved "
                  "had no variables (a Keras model saved before it was built?), so there is nothing to read or restore",
                  index);
  v->names = c->names ? c->names : malloc(1);
  c->names = NULL;
  v->ents = c->ents ? c->ents : calloc(1, sizeof *v->ents);
  v->n = c->n;
  c->ents = NULL;
  c->n = 0;
  v->meta = calloc(1, sizeof *v->meta);
  if (!v->names || !v->ents || !v->meta) {
    free(v->ents);
    free(v->meta);
    v->ents = NULL;
    v->meta = NULL;
    return cairn__fail(CAIRN_E_NOMEM, "'%s': out of memory", index);
  }
  v->meta_arena = NULL;
  v->nmeta = 0;
  v->major = TF_BUNDLE_VERSION;
  v->minor = 0;
  return CAIRN_OK;
}

/* The file cairn_ckpt_check_unchanged watches: the path when it names one
 * (the ".index" itself), else "<prefix>.index", opened here. */
static cairn_status tf_watch(const ck_source *src, const char *index, ck_view *v) {
  int fd = src->fd;
  if (fd < 0) {
    char why[700];
    if ((fd = cairn__open_read(src->d, index, NULL, why, sizeof why)) < 0)
      return cairn__fail(CAIRN_E_IO, "ckpt_open: cannot open '%s': %s", index, why);
  }
  cairn_status st = cairn__ck_view_watch(v, fd, src->path);
  if (st && fd != src->fd) close(fd);
  return st;
}

static cairn_status tf_open(const ck_source *src, const cairn_ckpt_limits *lim, void **state, ck_view *v) {
  const cairn__dir *d = src->d;
  const char *path = src->path;
  *state = NULL;
  tf_state *s = calloc(1, sizeof *s);
  size_t pl = strlen(path);
  if (!s || !(s->path = strdup(path))) {
    free(s);
    return cairn__fail(CAIRN_E_NOMEM, "ckpt_open: out of memory");
  }
  struct stat sb;
  int is_index = pl > 6 && strcmp(path + pl - 6, ".index") == 0 && stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
  s->prefix = is_index ? strndup(path, pl - 6) : strdup(path);
  char *index = s->prefix ? malloc(strlen(s->prefix) + 8) : NULL;
  cairn_status st = CAIRN_OK;
  collect c = {.s = s, .lim = lim};
  if (!index) {
    st = cairn__fail(CAIRN_E_NOMEM, "ckpt_open: out of memory");
  } else {
    sprintf(index, "%s.index", s->prefix);
    c.index = index;
    st = tf_read_index(d, index, lim, &c);
    if (!st) st = tf_open_shards(d, s, index, &c);
    if (!st) st = tf_fill_view(&c, index, v);
    if (!st) st = tf_watch(src, index, v);
  }
  free(c.ents);
  free(c.names);
  free(index);
  if (st) {
    cairn__ck_view_clear(v);
    tf_close(s);
    return st;
  }
  *state = s;
  return CAIRN_OK;
}

static cairn_status crc_fail(const tf_state *s, const ck_entry *e, uint32_t got) {
  char *name = cairn__tf_shard_name(s->prefix, e->seq, s->nshards);
  cairn_status st = cairn__fail(CAIRN_E_CORRUPT, "'%s' offset %llu: '%s': tensor checksum mismatch (stored %08x, computed %08x)",
                                name ? name : s->prefix, (ull)e->data_offset, e->name, e->raw_crc, got);
  free(name);
  return st;
}

/* One piece of e: read into d, its CRC into *crc; 0, or the pread error
 * (1: end of file, 2: errno in *err). For a bool tensor *bad gets the
 * first byte that is neither 0 nor 1 as (index in the piece) << 8 | byte,
 * else -1: TensorFlow's CRC covers the bytes as written, and a writer can
 * write a 7 with a valid CRC. */
static int read_piece(const tf_state *s, const ck_entry *e, uint64_t at, size_t len, unsigned char *d, uint32_t *crc,
                      int *err, int *bad) {
  int r = cairn__ck_pread_raw(s->fds[e->seq], d, len, e->data_offset + at, err);
  uint64_t i;
  *bad = -1;
  if (!r) *crc = cairn_crc32c(0, d, len);
  if (!r && e->dtype == CAIRN_DTYPE_BOOL && !cairn__bool_bytes_ok(d, len, &i)) *bad = (int)(i << 8 | d[i]);
  return r;
}

/* Reads e into dst (NULL: only checks it, through a scratch piece per
 * thread) in pieces that stay in the cache between the read and the CRC:
 * one pass over memory, not two. The pieces of a tensor of PAR_MIN bytes or
 * more are spread over the threads (each piece's CRC, then combined in
 * order); every piece is read, and what is reported on error is the
 * first bad one, whatever the thread count. */
static cairn_status read_tensor(const tf_state *s, const ck_entry *e, unsigned char *dst) {
  enum { PIECE = 256 << 10 };
  if (!e->raw_bytes) return e->raw_crc == 0 ? CAIRN_OK : crc_fail(s, e, 0);
  uint64_t np = (e->raw_bytes + PIECE - 1) / PIECE;
  int nt = 1;
#ifdef CAIRN_HAVE_OPENMP
  const uint64_t PAR_MIN = (uint64_t)8 << 20;
  if (e->raw_bytes >= PAR_MIN) nt = cairn_get_num_threads();
#endif
  if ((uint64_t)nt > np) nt = (int)np;
  uint32_t *crcs = malloc(np * sizeof *crcs);
  int *errs = calloc(np, 3 * sizeof *errs); /* [3k]: pread result, [3k+1]: errno, [3k+2]: bad bool byte */
  unsigned char *scratch = !dst ? malloc((size_t)nt * PIECE) : NULL;
  if (!crcs || !errs || (!dst && !scratch)) {
    free(crcs);
    free(errs);
    free(scratch);
    return cairn__fail(CAIRN_E_NOMEM, "'%s': '%s': out of memory", s->prefix, e->name);
  }
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
  for (uint64_t k = 0; k < np; k++) {
    int t = 0;
#ifdef CAIRN_HAVE_OPENMP
    t = omp_get_thread_num();
#endif
    uint64_t at = k * PIECE;
    size_t len = e->raw_bytes - at < PIECE ? (size_t)(e->raw_bytes - at) : PIECE;
    unsigned char *d = dst ? dst + at : scratch + (size_t)t * PIECE;
    errs[3 * k] = read_piece(s, e, at, len, d, &crcs[k], &errs[3 * k + 1], &errs[3 * k + 2]);
  }
  cairn_status st = CAIRN_OK;
  uint32_t crc = 0;
  for (uint64_t k = 0; k < np && !st; k++) {
    uint64_t at = k * PIECE;
    size_t len = e->raw_bytes - at < PIECE ? (size_t)(e->raw_bytes - at) : PIECE;
    int r = errs[3 * k];
    if (r) {
      char *name = cairn__tf_shard_name(s->prefix, e->seq, s->nshards);
      st = cairn__fail(r == 1 ? CAIRN_E_TRUNCATED : CAIRN_E_IO, "'%s' offset %llu: '%s': %s", name ? name : s->prefix,
                       (ull)(e->data_offset + at), e->name,
                       r == 1 ? "the shard ends early (did it change since open?)" : strerror(errs[3 * k + 1]));
      free(name);
    } else {
      crc = k ? cairn__crc32c_combine(crc, crcs[k], len) : crcs[k];
    }
  }
  /* A checksum mismatch comes first: then the bytes are not the ones
   * written, and a bad bool byte is only its symptom. */
  if (!st && crc != e->raw_crc) st = crc_fail(s, e, crc);
  for (uint64_t k = 0; k < np && !st; k++)
    if (errs[3 * k + 2] >= 0) {
      uint64_t el = k * PIECE + (uint64_t)(errs[3 * k + 2] >> 8);
      char *name = cairn__tf_shard_name(s->prefix, e->seq, s->nshards);
      st = cairn__fail(CAIRN_E_CORRUPT, "'%s' offset %llu: bool tensor '%s' has byte %d at element %llu: only 0 and 1 "
                       "are valid", name ? name : s->prefix, (ull)(e->data_offset + el), e->name, errs[3 * k + 2] & 0xff,
                       (ull)el);
      free(name);
    }
  free(crcs);
  free(errs);
  free(scratch);
  return st;
}

static cairn_status tf_read(void *p, const ck_entry *e, unsigned char *dst) { return read_tensor(p, e, dst); }

static cairn_status tf_verify(void *p, const ck_entry *ents, size_t n) {
  cairn_status st = CAIRN_OK;
  for (size_t i = 0; i < n && !st; i++) st = read_tensor(p, &ents[i], NULL);
  return st;
}

static cairn_status tf_verify_tensor(void *p, const ck_entry *e) { return read_tensor(p, e, NULL); }

static cairn_status tf_read_pieces(void *p, const ck_entry *e, cairn_ckpt_piece_fn fn, void *user) {
  return cairn__ck_pieces_whole(tf_read, p, ((tf_state *)p)->path, e, fn, user);
}

/* The writer's side of the table (cairn_ckpt_out; tfbundle_write.c). A
 * bundle has no metadata: wmeta_str is NULL. */
static cairn_status tf_wopen(const char *path, const cairn_ckpt_write_options *o, void **w) {
  (void)o;
  return cairn_tfbundle_writer_open(path, (cairn_tfbundle_writer **)w);
}
CK_WRITE_ADAPTERS(tf, cairn_tfbundle_writer, cairn_tfbundle_writer_add, cairn_tfbundle_writer_commit,
                  cairn_tfbundle_writer_abort)

const ck_backend cairn__ck_tfbundle = {
    .name = "tf", .open = tf_open, .read = tf_read, .read_pieces = tf_read_pieces, .verify_tensor = tf_verify_tensor,
    .verify = tf_verify, .codecs = cairn__ck_codecs_raw, .close = tf_close,
    .wopen = tf_wopen, .wadd = tf_wadd, .wcommit = tf_wcommit, .wabort = tf_wabort};
