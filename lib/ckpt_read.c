/* Checkpoint reader: validates superblock, footer, metadata and index at
 * open (rules R1–R18 of doc/checkpoint-format.md), decodes one tensor
 * straight into the caller's buffer (R19–R22), verifies a whole file
 * (R20–R26). The parsers and checks it shares with the writer and salvage
 * are in ckpt_format.c.
 *
 * Nothing is trusted before its CRC verifies; every size is checked against
 * the caller's limits and the bytes present in the file before anything is
 * allocated; every offset and size is computed with overflow checks. */
#define _GNU_SOURCE 1
#include "ckpt_impl.h"
#include "ckpt_backend.h"
#include "test_seams.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#ifdef CAIRN_HAVE_OPENMP
#include <omp.h>
#endif

#include "cairn/runtime.h"

typedef unsigned long long ull;

/* ---- the reader ------------------------------------------------------------------------ */

struct cairn_ckpt {
  char *path;
  int fd;
  uint64_t size;
  /* What fstat said at open: cairn_ckpt_check_unchanged compares. */
  dev_t dev;
  ino_t ino;
  struct timespec mtime;
  /* Decoding scratch, kept from tensor to tensor until close: two buffers
     of scratch_sz bytes per decoding thread (scratch[2t], scratch[2t+1]),
     allocated on first use. Allocating them per tensor left the C heap
     growing with the tensor count (freed blocks pinned under small ones). */
  unsigned char **scratch;
  int n_scratch;
  size_t scratch_sz;
  /* Staged compact tensors (doc/restore-memory.md): cairn_ckpt_verify_tensor
     decodes the first stage_len[i] bytes of a tensor with zstd chunks into
     stage[i] and cairn_ckpt_read copies them instead of decoding again;
     staged_bytes of them at most stage_max (0 unless cairn_ckpt_set_staging).
     Per index entry, allocated on first use. */
  unsigned char **stage;
  uint64_t *stage_len;
  uint64_t staged_bytes, stage_max;
  ck_super sb;
  ck_footer ft;
  cairn_ckpt_limits lim;
  unsigned char *index;
  /* The tensors sorted by name and the metadata sorted by key: parsed from
     cairn's index, or filled by a backend (v.major, v.minor: backends only;
     cairn_ckpt_version reads sb). */
  ck_view v;
  const ck_backend *be; /* a foreign format (ckpt_backend.h), NULL for cairn's own */
  void *bs;             /* the backend's state */
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

static cairn_status idx_fail(const cairn_ckpt *c, const ck_entry *e, cairn_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static cairn_status idx_fail(const cairn_ckpt *c, const ck_entry *e, cairn_status s, const char *fmt, ...) {
  char what[300], nb[96];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  if (e->name)
    return cairn__fail(s, "'%s' offset %llu: index entry of '%s': %s", c->path, (ull)e->index_at,
                       cairn__ck_short(e->name, e->name_len, nb, sizeof nb), what);
  return cairn__fail(s, "'%s' offset %llu: index entry: %s", c->path, (ull)e->index_at, what);
}

/* R14 on one entry's chunk table at *p (advanced past it). */
static cairn_status parse_chunk_table(const cairn_ckpt *c, ck_entry *e, const unsigned char **pp,
                                      const unsigned char *end) {
  const uint32_t cb = c->sb.chunk_bytes;
  const unsigned char *p = *pp;
  if (e->n_chunks != cairn__ck_nchunks(e->raw_bytes, cb))
    return idx_fail(c, e, CAIRN_E_FORMAT, "%u chunks for %llu bytes in chunks of %u", e->n_chunks, (ull)e->raw_bytes,
                    cb);
  if ((uint64_t)(end - p) / CK_ICHUNK < e->n_chunks) return idx_fail(c, e, CAIRN_E_FORMAT, "chunk table runs past the block");
  e->chunk_table = p;
  uint64_t stored = 0;
  for (uint32_t k = 0; k < e->n_chunks; k++, p += CK_ICHUNK) {
    uint32_t raw = ck_get32(p + 4), st = ck_get32(p + 8);
    if (p[1] || p[2] || p[3] || raw != ck_chunk_raw(e->raw_bytes, cb, k) || !cairn__ck_chunk_sizes_ok(p[0], raw, st))
      return idx_fail(c, e, CAIRN_E_FORMAT, "chunk %u: codec %u, %u raw and %u stored bytes are not valid", k, p[0],
                      raw, st);
    if (p[0] == CK_CODEC_SHUF_ZSTD && !(c->sb.required & CK_FEAT_ZSTD))
      return idx_fail(c, e, CAIRN_E_FORMAT,
                      "chunk %u: codec 3 (zstd) in a file that does not set its required feature bit 0x%x", k,
                      CK_FEAT_ZSTD);
    stored += st;
  }
  if (stored != e->stored_bytes)
    return idx_fail(c, e, CAIRN_E_FORMAT, "stored size %llu is not the sum of its chunks (%llu)",
                    (ull)e->stored_bytes, (ull)stored);
  *pp = p;
  return CAIRN_OK;
}

/* R13, R14 on entry i at *p (advanced past it): its fixed part, shape and
 * name (copied to *names, advanced), dtype, layout, sizes, record number
 * (by_seq), and its chunk table. */
static cairn_status parse_entry(cairn_ckpt *c, uint64_t i, const unsigned char **pp, const unsigned char *end,
                                char **names, uint32_t *by_seq) {
  ck_entry *e = &c->v.ents[i];
  const unsigned char *p = *pp;
  uint64_t count = c->v.n;
  if (end - p < (ptrdiff_t)CK_IENTRY_FIXED) return idx_fail(c, e, CAIRN_E_FORMAT, "entry %llu runs past the block", (ull)i);
  if (!cairn__ck_entry_get(p, e)) return idx_fail(c, e, CAIRN_E_FORMAT, "reserved bytes are not zero");
  if (e->rank > CAIRN_MAX_RANK || e->name_len == 0 || e->name_len > CK_MAX_NAME)
    return idx_fail(c, e, CAIRN_E_FORMAT, "rank %u, name of %u bytes", e->rank, e->name_len);
  uint64_t var = 8u * e->rank + e->name_len;
  if ((uint64_t)(end - p) - CK_IENTRY_FIXED < var)
    return idx_fail(c, e, CAIRN_E_FORMAT, "entry %llu runs past the block", (ull)i);
  p += CK_IENTRY_FIXED;
  for (int d = 0; d < e->rank; d++, p += 8) e->shape[d] = ck_get64(p);
  const unsigned char *name = p;
  p += e->name_len;
  if (!cairn__ck_name_ok(name, e->name_len))
    return idx_fail(c, e, CAIRN_E_FORMAT, "name is not UTF-8 without control characters");
  memcpy(*names, name, e->name_len);
  (*names)[e->name_len] = '\0';
  e->name = *names;
  *names += e->name_len + 1;
  if (i > 0 && cairn__ck_cmp_bytes(e[-1].name, e[-1].name_len, e->name, e->name_len) >= 0)
    return idx_fail(c, e, CAIRN_E_FORMAT, "names are not strictly ascending");
  size_t es = cairn__ck_esize(e->dtype);
  if (!es) return idx_fail(c, e, CAIRN_E_FORMAT, "unknown dtype %u", e->dtype);
  if (e->layout > CK_LAYOUT_RAW) return idx_fail(c, e, CAIRN_E_FORMAT, "unknown layout %u", e->layout);
  uint64_t n = 1;
  int bad = 0;
  for (int d = 0; d < e->rank && !bad; d++)
    bad = e->shape[d] >= CK_MAX_DIM || __builtin_mul_overflow(n, e->shape[d], &n);
  if (bad || __builtin_mul_overflow(n, (uint64_t)es, &n) || n != e->raw_bytes)
    return idx_fail(c, e, CAIRN_E_FORMAT, "raw size %llu is not element count × element size", (ull)e->raw_bytes);
  if (e->raw_bytes > c->lim.max_tensor_bytes)
    return idx_fail(c, e, CAIRN_E_LIMIT, "%llu bytes exceed the limit %llu", (ull)e->raw_bytes,
                    (ull)c->lim.max_tensor_bytes);
  if (e->seq >= count || by_seq[e->seq] != UINT32_MAX)
    return idx_fail(c, e, CAIRN_E_FORMAT, "record number %u is out of range or repeated", e->seq);
  by_seq[e->seq] = (uint32_t)i;
  *pp = p;
  if (e->layout == CK_LAYOUT_RAW) {
    if (e->n_chunks != 0 || e->raw_bytes == 0 || e->stored_bytes != e->raw_bytes)
      return idx_fail(c, e, CAIRN_E_FORMAT, "raw layout with %u chunks, %llu raw and %llu stored bytes", e->n_chunks,
                      (ull)e->raw_bytes, (ull)e->stored_bytes);
    return CAIRN_OK;
  }
  return parse_chunk_table(c, e, pp, end);
}

/* R15: records back to back in seq order from 64 to meta_offset. */
static cairn_status check_records(const cairn_ckpt *c, const uint32_t *by_seq) {
  uint64_t at = CK_SUPER_SIZE, count = c->v.n;
  for (uint64_t q = 0; q < count; q++) {
    const ck_entry *e = &c->v.ents[by_seq[q]];
    uint64_t hend = at + CK_REC_FIXED + 8u * e->rank + e->name_len, rend = 0;
    int bad = e->record_offset != at;
    if (e->layout == CK_LAYOUT_RAW) {
      uint64_t a = c->sb.alignment, d = hend + (a - hend % a) % a;
      bad |= e->data_offset != d || __builtin_add_overflow(d, e->raw_bytes, &rend);
    } else {
      bad |= e->data_offset != hend;
      rend = hend;
      for (uint32_t k = 0; k < e->n_chunks && !bad; k++)
        bad = __builtin_add_overflow(rend, (uint64_t)CK_CHUNK_HDR + ck_get32(e->chunk_table + k * CK_ICHUNK + 8), &rend);
    }
    bad = bad || __builtin_add_overflow(rend, CK_TRAILER, &rend) || rend > c->ft.meta_offset;
    if (bad)
      return idx_fail(c, e, CAIRN_E_FORMAT,
                      "record %u at %llu (data at %llu) does not follow the previous record, which ends at %llu, or "
                      "runs past the data region",
                      e->seq, (ull)e->record_offset, (ull)e->data_offset, (ull)at);
    at = rend;
  }
  if (at != c->ft.meta_offset)
    return cairn__fail(CAIRN_E_FORMAT, "'%s': the records end at %llu but the metadata starts at %llu", c->path,
                       (ull)at, (ull)c->ft.meta_offset);
  return CAIRN_OK;
}

/* Rules R13–R17 over the private copy of the index. */
static cairn_status parse_index(cairn_ckpt *c) {
  const unsigned char *blk = c->index;
  uint64_t size = c->ft.index_size, base = c->ft.meta_offset + c->ft.meta_size;
  if (memcmp(blk, CK_TAG_INDEX, 4) != 0)
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: no index block (tag CRNI) here", c->path, (ull)base);
  if (ck_get32(blk + 4))
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: reserved index bytes are not zero", c->path, (ull)base + 4);
  uint64_t count = ck_get64(blk + 8);
  if (count != c->ft.count)
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: index has %llu entries, footer says %llu tensors", c->path,
                       (ull)base + 8, (ull)count, (ull)c->ft.count);
  if (count > (size - CK_INDEX_FIXED) / CK_IENTRY_FIXED)
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: %llu index entries cannot fit in %llu bytes", c->path,
                       (ull)base + 8, (ull)count, (ull)size);
  c->v.n = (size_t)count;
  c->v.ents = calloc(count ? count : 1, sizeof *c->v.ents);
  c->v.names = malloc((size_t)size + (size_t)count);
  uint32_t *by_seq = malloc((count ? count : 1) * sizeof *by_seq);
  if (!c->v.ents || !c->v.names || !by_seq) {
    free(by_seq);
    return cairn__fail(CAIRN_E_NOMEM, "'%s': out of memory for an index of %llu entries", c->path, (ull)count);
  }
  for (uint64_t i = 0; i < count; i++) by_seq[i] = UINT32_MAX;
  const unsigned char *p = blk + 16, *end = blk + size - 4;
  char *names = c->v.names;
  cairn_status s = CAIRN_OK;
  for (uint64_t i = 0; i < count && !s; i++) {
    c->v.ents[i].index_at = base + (uint64_t)(p - blk);
    s = parse_entry(c, i, &p, end, &names, by_seq);
  }
  if (!s && p != end)
    s = cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: stray bytes after the index entries", c->path,
                    (ull)(base + (uint64_t)(p - blk)));
  if (!s) s = check_records(c, by_seq);
  free(by_seq);
  return s;
}

/* What in st differs from the file c opened, as open saw it: 0 nothing,
 * else OTHER_FILE, OTHER_SIZE or OTHER_MTIME, the first that differs. Not ctime:
 * unlinking or renaming the file (a rotation by another process) changes it
 * but not the bytes c's descriptor reads. */
enum { OTHER_FILE = 1, OTHER_SIZE, OTHER_MTIME };
static int differs_from_open(const cairn_ckpt *c, const struct stat *st) {
  if (st->st_dev != c->dev || st->st_ino != c->ino) return OTHER_FILE;
  if ((uint64_t)st->st_size != c->size) return OTHER_SIZE;
  if (st->st_mtim.tv_sec != c->mtime.tv_sec || st->st_mtim.tv_nsec != c->mtime.tv_nsec) return OTHER_MTIME;
  return 0;
}

int cairn__ckpt_is_file(const cairn_ckpt *c, const char *path) {
  struct stat now, there;
  return fstat(c->fd, &now) == 0 && !differs_from_open(c, &now) && stat(path, &there) == 0 &&
         !differs_from_open(c, &there);
}

void cairn_ckpt_close(cairn_ckpt *c) {
  if (!c) return;
  if (c->be) c->be->close(c->bs);
  if (c->fd >= 0) close(c->fd);
  for (int i = 0; i < c->n_scratch; i++) cairn_free(c->scratch[i]);
  free(c->scratch);
  for (size_t i = 0; c->stage && i < c->v.n; i++) cairn_free(c->stage[i]);
  free(c->stage);
  free(c->stage_len);
  free(c->path);
  free(c->index);
  free(c->v.ents);
  free(c->v.names);
  free(c->v.meta);
  free(c->v.meta_arena);
  free(c);
}

/* c->fd: the path opened by cairn_ckpt_open, or -1 and why not. */
static cairn_status open_impl(cairn_ckpt *c, const char *open_why) {
  cairn_status s;
  if (ck_host_big_endian())
    return cairn__fail(CAIRN_E_UNSUPPORTED, "ckpt_open: '%s': big-endian hosts are not supported", c->path);
  if (c->fd < 0) return cairn__fail(CAIRN_E_IO, "ckpt_open: cannot open '%s': %s", c->path, open_why);
  struct stat st;
  if (fstat(c->fd, &st) != 0) {
    int e = errno;
    return cairn__fail(CAIRN_E_IO, "ckpt_open: cannot stat '%s': %s", c->path, strerror(e));
  }
  if (!S_ISREG(st.st_mode)) return cairn__fail(CAIRN_E_IO, "ckpt_open: '%s' is not a regular file", c->path);
  c->size = (uint64_t)st.st_size;
  c->dev = st.st_dev;
  c->ino = st.st_ino;
  c->mtime = st.st_mtim;
  unsigned char buf[CK_SUPER_SIZE];
  size_t avail = c->size < CK_SUPER_SIZE ? (size_t)c->size : CK_SUPER_SIZE;
  if ((s = cairn__ck_pread(c->fd, buf, avail, 0, c->path, "superblock"))) return s;
  if ((s = cairn__ck_parse_super(c->path, buf, avail, c->lim.max_chunk_bytes, &c->sb))) return s;
  if (c->size < CK_SUPER_SIZE + CK_FOOTER_SIZE)
    return cairn__fail(CAIRN_E_TRUNCATED, "'%s' is %llu bytes, too short for a footer: %s", c->path, (ull)c->size,
                       cairn__ck_recover_hint);
  if ((s = cairn__ck_pread(c->fd, buf, CK_FOOTER_SIZE, c->size - CK_FOOTER_SIZE, c->path, "footer"))) return s;
  if ((s = cairn__ck_parse_footer(c->path, buf, c->size, &c->sb, &c->ft))) return s;
  /* R11: limits before allocating. */
  if (c->ft.meta_size > c->lim.max_meta_bytes)
    return cairn__fail(CAIRN_E_LIMIT, "'%s': metadata of %llu bytes exceeds the limit %llu", c->path,
                       (ull)c->ft.meta_size, (ull)c->lim.max_meta_bytes);
  if (c->ft.index_size > c->lim.max_index_bytes)
    return cairn__fail(CAIRN_E_LIMIT, "'%s': index of %llu bytes exceeds the limit %llu", c->path,
                       (ull)c->ft.index_size, (ull)c->lim.max_index_bytes);
  if (c->ft.count > c->lim.max_tensors)
    return cairn__fail(CAIRN_E_LIMIT, "'%s': %llu tensors exceed the limit %llu", c->path, (ull)c->ft.count,
                       (ull)c->lim.max_tensors);
  if (c->ft.meta_size > SIZE_MAX / 4 || c->ft.index_size > SIZE_MAX / 4)
    return cairn__fail(CAIRN_E_LIMIT, "'%s': metadata or index too large for this host", c->path);
  /* R12: private copies, CRC before parsing. */
  unsigned char *meta = malloc((size_t)c->ft.meta_size);
  if (!meta) return cairn__fail(CAIRN_E_NOMEM, "'%s': out of memory for %llu bytes of metadata", c->path, (ull)c->ft.meta_size);
  s = cairn__ck_pread(c->fd, meta, (size_t)c->ft.meta_size, c->ft.meta_offset, c->path, "metadata block");
  if (!s)
    s = cairn__ck_parse_meta(c->path, c->ft.meta_offset, meta, c->ft.meta_size, &c->v.meta, &c->v.nmeta,
                             &c->v.meta_arena);
  free(meta);
  if (s) return s;
  uint64_t ioff = c->ft.meta_offset + c->ft.meta_size;
  if (!(c->index = malloc((size_t)c->ft.index_size)))
    return cairn__fail(CAIRN_E_NOMEM, "'%s': out of memory for %llu bytes of index", c->path, (ull)c->ft.index_size);
  if ((s = cairn__ck_pread(c->fd, c->index, (size_t)c->ft.index_size, ioff, c->path, "index block"))) return s;
  uint32_t want = ck_get32(c->index + c->ft.index_size - 4), got = ck_crc_masked(c->index, (size_t)c->ft.index_size - 4);
  if (want != got)
    return cairn__fail(CAIRN_E_CORRUPT, "'%s' offset %llu: index checksum mismatch (stored %08x, computed %08x)",
                       c->path, (ull)ioff, want, got);
  return parse_index(c);
}

/* A foreign checkpoint's identity for cairn_ckpt_check_unchanged: c->fd
 * stays open on its file (a TF bundle: "<prefix>.index"), and what fstat
 * says now is compared later. The backend reads through its own
 * descriptors. */
static cairn_status backend_identity(const cairn__dir *d, cairn_ckpt *c) {
  if (c->fd < 0) {
    size_t n = strlen(c->path);
    char *index = malloc(n + 7);
    if (!index) return cairn__fail(CAIRN_E_NOMEM, "ckpt_open: out of memory");
    memcpy(index, c->path, n);
    memcpy(index + n, ".index", 7);
    char why[700];
    c->fd = cairn__open_read(d, index, NULL, why, sizeof why);
    cairn_status s = c->fd < 0 ? cairn__fail(CAIRN_E_IO, "ckpt_open: cannot open '%s': %s", index, why) : CAIRN_OK;
    free(index);
    if (s) return s;
  }
  struct stat st;
  if (fstat(c->fd, &st) != 0) {
    int e = errno;
    return cairn__fail(CAIRN_E_IO, "ckpt_open: cannot stat '%s': %s", c->path, strerror(e));
  }
  c->size = (uint64_t)st.st_size;
  c->dev = st.st_dev;
  c->ino = st.st_ino;
  c->mtime = st.st_mtim;
  return CAIRN_OK;
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
  c->fd = -1;
  fill_limits(limits, &c->lim);
  cairn_status s;
  char why[700];
  c->fd = cairn__open_read(d, path, NULL, why, sizeof why); /* a TF prefix names no file: -1 */
  if ((c->be = cairn__ck_detect(d, path, c->fd))) {
    s = c->be->open(d, path, &c->lim, &c->bs, &c->v);
    if (s) {
      c->be = NULL; /* the backend freed its state and the view's arrays */
      memset(&c->v, 0, sizeof c->v);
    } else {
      c->sb.major = c->v.major, c->sb.minor = c->v.minor;
      s = backend_identity(d, c); /* on failure, the close below frees the view and the backend's state */
    }
  } else {
    s = open_impl(c, why);
  }
  if (s) {
    cairn_ckpt_close(c);
    return s;
  }
  *out = c;
  return CAIRN_OK;
}

const char *cairn_ckpt_path(const cairn_ckpt *c) { return c ? c->path : NULL; }

const char *cairn_ckpt_format(const cairn_ckpt *c) { return !c ? NULL : c->be ? c->be->name : "cairn"; }

void cairn_ckpt_version(const cairn_ckpt *c, int *major, int *minor) {
  if (major) *major = c ? c->sb.major : 0;
  if (minor) *minor = c ? c->sb.minor : 0;
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
  unsigned m = 0;
  if (!r->chunk_table) m = r->raw_bytes ? 1u << CK_CODEC_RAW : 0;
  for (uint32_t k = 0; r->chunk_table && k < r->n_chunks; k++) m |= 1u << (r->chunk_table[k * CK_ICHUNK] & 31);
  *mask = m;
  return CAIRN_OK;
}

/* ---- decoding ---------------------------------------------------------------------------- */

/* Raw bytes from which a tensor of raw chunks is decoded on several threads. */
#define CK_PAR_RAW_MIN_BYTES ((uint64_t)8 << 20)
/* ... on at most this many: copies out of the page cache saturate the memory
   bus with a few cores, and each thread holds a chunk buffer. */
#define CK_PAR_RAW_MAX_THREADS 4

/* Threads the last decode_tensor_fn used (the tests check it). */
_Atomic int cairn__ckpt_last_threads;

/* First error of a parallel decode: the lowest chunk wins (deterministic). */
typedef struct perr {
  cairn_status s;
  uint64_t k;
  char msg[480];
} perr;

static int perr_set(perr *pe, uint64_t k, cairn_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static int perr_set(perr *pe, uint64_t k, cairn_status s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
#pragma omp critical(cairn_ckpt_perr)
  {
    if (!pe->s || k < pe->k) {
      pe->s = s;
      pe->k = k;
      vsnprintf(pe->msg, sizeof pe->msg, fmt, ap);
    }
  }
  va_end(ap);
  return 1;
}

typedef struct dec_ctx {
  const cairn_ckpt *c;
  const ck_entry *e;
  unsigned char *dst; /* NULL: verify, decode into scratch */
  int headers;        /* verify: check chunk headers too */
  /* Verify: decode the raw bytes below stage_len into stage (kept for the
     read). Read: copy the raw bytes below stage_len from staged, which a
     verify decoded and checked. */
  unsigned char *stage;
  const unsigned char *staged;
  uint64_t stage_len;
  const uint64_t *offs;
  uint32_t *crcs;
  const char *nm;
  size_t bufsz;
  const unsigned char *out; /* the decoded piece just checked (one thread only) */
  perr pe;
} dec_ctx;

static int read_fail(dec_ctx *x, uint64_t k, uint64_t off, int r, int err) {
  if (r == 1)
    return perr_set(&x->pe, k, CAIRN_E_TRUNCATED, "'%s' offset %llu: '%s': the file ends early (did it change since open?)",
             x->c->path, (ull)off, x->nm);
  return perr_set(&x->pe, k, CAIRN_E_IO, "'%s' offset %llu: '%s': read error: %s", x->c->path, (ull)off, x->nm,
             strerror(err));
}

static unsigned char *lazy_buf(dec_ctx *x, uint64_t k, unsigned char **p) {
  if (!*p && !(*p = cairn_alloc(x->bufsz)))
    perr_set(&x->pe, k, CAIRN_E_NOMEM, "'%s': '%s': out of memory for a chunk buffer of %zu bytes", x->c->path, x->nm,
             x->bufsz);
  return *p;
}

/* Piece k of a staged tensor: its raw bytes, decoded and checked by the
 * verify, copied to the destination and checked again there (the CRCs
 * combine into the tensor's, compared with the trailer's as for a decode). */
static int copy_staged(dec_ctx *x, uint64_t k, uint64_t raw_off, uint32_t raw) {
  unsigned char *d = x->dst + raw_off;
  const unsigned char *s = x->staged + raw_off;
  /* In pieces that stay in the L2 cache between the copy and the CRC: one
     trip through memory for the destination instead of two. */
  enum { PIECE = 64 << 10 };
  uint32_t crc = 0;
  for (uint32_t at = 0; at < raw; at += PIECE) {
    uint32_t len = raw - at < PIECE ? raw - at : PIECE;
    memcpy(d + at, s + at, len);
    crc = cairn_crc32c(crc, d + at, len);
  }
  x->crcs[k] = crc;
  x->out = d;
  return 0;
}

/* One chunk (or raw payload piece) k; 0 if it checks out. *pa, *pb:
 * per-thread buffers of bufsz bytes, allocated on first use. */
static int decode_one(dec_ctx *x, uint64_t k, unsigned char **pa, unsigned char **pb) {
  const cairn_ckpt *c = x->c;
  const ck_entry *e = x->e;
  const uint32_t cb = c->sb.chunk_bytes;
  uint64_t raw_off = k * cb;
  uint32_t raw = ck_chunk_raw(e->raw_bytes, cb, k);
  int err = 0, r;
  if (x->staged && raw_off < x->stage_len) return copy_staged(x, k, raw_off, raw);
  unsigned char *dst = x->dst ? x->dst : x->stage && raw_off < x->stage_len ? x->stage : NULL;
  if (e->layout == CK_LAYOUT_RAW) {
    uint64_t off = e->data_offset + raw_off;
    unsigned char *d = dst ? dst + raw_off : lazy_buf(x, k, pa);
    if (!d) return 1;
    if ((r = cairn__ck_pread_raw(c->fd, d, raw, off, &err))) return read_fail(x, k, off, r, err);
    x->crcs[k] = cairn_crc32c(0, d, raw);
    x->out = d;
    return 0;
  }
  const unsigned char *ce = e->chunk_table + k * CK_ICHUNK;
  unsigned codec = ce[0];
  uint32_t stored = ck_get32(ce + 8), want = ck_unmask(ck_get32(ce + 12));
  uint64_t off = x->offs[k];
  const unsigned char *src;
  unsigned char *a = NULL;
  if (x->headers || codec != CK_CODEC_RAW || !dst) {
    if (!(a = lazy_buf(x, k, pa))) return 1;
  }
  if (x->headers) {
    if ((r = cairn__ck_pread_raw(c->fd, a, CK_CHUNK_HDR + (size_t)stored, off, &err))) return read_fail(x, k, off, r, err);
    uint32_t hw = ck_get32(a + 28), hg = ck_crc_masked(a, 28);
    if (memcmp(a, CK_TAG_CHUNK, 4) != 0 || hw != hg)
      return perr_set(&x->pe, k, memcmp(a, CK_TAG_CHUNK, 4) ? CAIRN_E_FORMAT : CAIRN_E_CORRUPT,
                      "'%s' offset %llu: '%s': chunk %llu: bad chunk header (tag or checksum)", c->path, (ull)off,
                      x->nm, (ull)k);
    if (ck_get32(a + 4) != e->seq || ck_get32(a + 8) != k || a[12] != codec || a[13] || a[14] || a[15] ||
        ck_get32(a + 16) != raw || ck_get32(a + 20) != stored || ck_get32(a + 24) != ck_get32(ce + 12))
      return perr_set(&x->pe, k, CAIRN_E_CORRUPT,
                      "'%s' offset %llu: '%s': chunk %llu: chunk header disagrees with the index", c->path, (ull)off,
                      x->nm, (ull)k);
    src = a + CK_CHUNK_HDR;
  } else if (codec == CK_CODEC_RAW && dst) {
    /* Straight into the destination, checked in place. */
    src = dst + raw_off;
    if ((r = cairn__ck_pread_raw(c->fd, (unsigned char *)src, stored, off + CK_CHUNK_HDR, &err)))
      return read_fail(x, k, off + CK_CHUNK_HDR, r, err);
  } else {
    src = a;
    if ((r = cairn__ck_pread_raw(c->fd, a, stored, off + CK_CHUNK_HDR, &err)))
      return read_fail(x, k, off + CK_CHUNK_HDR, r, err);
  }
  uint32_t got = cairn_crc32c(0, src, stored);
  if (got != want)
    return perr_set(&x->pe, k, CAIRN_E_CORRUPT,
                    "'%s' offset %llu: '%s': chunk %llu: checksum mismatch (stored %08x, computed %08x)", c->path,
                    (ull)off, x->nm, (ull)k, want, got);
  if (codec == CK_CODEC_RAW) {
    if (dst && src != dst + raw_off) memcpy(dst + raw_off, src, raw);
    x->crcs[k] = got;
    x->out = src;
    return 0;
  }
  /* Byte planes are decoded into *pb and interleaved into the destination,
   * or, when verifying, back into *pa (its stored bytes are consumed by
   * then): two buffers per thread, one pass over the planes. */
  unsigned char *d, *planes = NULL;
  if (ck_codec_planes(codec) && !(planes = lazy_buf(x, k, pb))) return 1;
  if (dst) d = dst + raw_off;
  else if (planes) d = a;
  else if (!(d = lazy_buf(x, k, pb))) return 1;
  if (cairn__ck_decode(codec, cairn__ck_esize(e->dtype), src, stored, d, raw, planes))
    return perr_set(&x->pe, k, CAIRN_E_CORRUPT,
                    "'%s' offset %llu: '%s': chunk %llu: %s data does not decode to exactly %u bytes", c->path,
                    (ull)off, x->nm, (ull)k, codec == CK_CODEC_SHUF_ZSTD ? "zstd" : "LZ4", raw);
  x->crcs[k] = cairn_crc32c(0, d, raw);
  x->out = d;
  return 0;
}

/* How many threads decode e's npieces pieces. Threads for LZ4 work, and
 * for raw pieces once a tensor has enough of them: a raw piece is a copy
 * out of the page cache plus a CRC, bound by one core's copy and CRC
 * speed, so a restore (two such passes) ran at a third of a plain read on
 * one thread; on two threads both halves run at once (bench/RESULTS.md,
 * "Restore on two threads"). Small tensors stay on one thread: waking the
 * team costs more than they take. */
static int decode_threads(const ck_entry *e, uint64_t npieces) {
  int nt = 1;
#ifdef CAIRN_HAVE_OPENMP
  nt = cairn_get_num_threads();
#endif
  if ((uint64_t)nt > npieces) nt = (int)npieces;
  uint64_t lz4_bytes = 0;
  for (uint32_t k = 0; k < e->n_chunks; k++)
    if (e->chunk_table[k * CK_ICHUNK] != CK_CODEC_RAW) lz4_bytes += ck_get32(e->chunk_table + k * CK_ICHUNK + 4);
  if (lz4_bytes < CK_PAR_MIN_BYTES) {
    if (e->raw_bytes < CK_PAR_RAW_MIN_BYTES) nt = 1;
    else if (nt > CK_PAR_RAW_MAX_THREADS) nt = CK_PAR_RAW_MAX_THREADS;
  }
  return nt;
}

/* Two scratch buffers of at least bufsz bytes per thread for nt threads
 * (allocated lazily, kept until close); 0 when out of memory. */
static int scratch_for(cairn_ckpt *c, int nt, size_t bufsz) {
  if (c->n_scratch >= 2 * nt && c->scratch_sz >= bufsz) return 1;
  unsigned char **sc = calloc(2 * (size_t)nt, sizeof *sc);
  if (!sc) return 0;
  for (int i = 0; i < c->n_scratch; i++) cairn_free(c->scratch[i]);
  free(c->scratch);
  c->scratch = sc;
  c->n_scratch = 2 * nt;
  c->scratch_sz = bufsz > c->scratch_sz ? bufsz : c->scratch_sz;
  return 1;
}

/* Staging of one tensor (cairn_ckpt_set_staging, below). */
typedef struct stage_io {
  unsigned char *to;         /* verify: decode the first len raw bytes here */
  const unsigned char *from; /* read: copy the first len raw bytes from here */
  uint64_t len;
} stage_io;

/* Decodes (dst) or checks (dst NULL) every chunk of e; R20–R22 (R24 with
 * headers). With fn (and dst NULL), hands each decoded piece to fn in
 * order, on the calling thread; fn's error stops the decode and is
 * returned. With sg, stages (verify) or copies staged bytes (read). */
static cairn_status decode_tensor_fn(cairn_ckpt *c, const ck_entry *e, unsigned char *dst, int headers,
                                     cairn_ckpt_piece_fn fn, void *user, const stage_io *sg) {
  char nb[96];
  uint64_t npieces = cairn__ck_nchunks(e->raw_bytes, c->sb.chunk_bytes);
  if (npieces == 0) {
    if (e->raw_crc != 0)
      return cairn__fail(CAIRN_E_CORRUPT, "'%s': '%s': an empty tensor has CRC %08x, expected 00000000", c->path,
                         cairn__ck_short(e->name, e->name_len, nb, sizeof nb), e->raw_crc);
    return CAIRN_OK;
  }
  dec_ctx x = {.c = c, .e = e, .dst = dst, .headers = headers, .nm = cairn__ck_short(e->name, e->name_len, nb, sizeof nb)};
  if (sg) x.stage = sg->to, x.staged = sg->from, x.stage_len = sg->len;
  uint64_t *offs = NULL;
  x.crcs = malloc(npieces * sizeof *x.crcs);
  if (e->layout == CK_LAYOUT_CHUNKED && x.crcs) {
    offs = malloc(npieces * sizeof *offs);
    if (offs) {
      uint64_t at = e->data_offset;
      for (uint64_t k = 0; k < npieces; k++) {
        offs[k] = at;
        at += CK_CHUNK_HDR + ck_get32(e->chunk_table + k * CK_ICHUNK + 8);
      }
    }
  }
  x.offs = offs;
  if (!x.crcs || (e->layout == CK_LAYOUT_CHUNKED && !offs)) {
    free(x.crcs);
    free(offs);
    return cairn__fail(CAIRN_E_NOMEM, "'%s': '%s': out of memory for the chunk table", c->path, x.nm);
  }
  /* Per-thread buffers (verify, compressed chunks) hold at most one chunk. */
  uint64_t most = e->raw_bytes < c->sb.chunk_bytes ? e->raw_bytes : c->sb.chunk_bytes;
  x.bufsz = (size_t)most + CK_CHUNK_HDR;
  int nt = fn ? 1 : decode_threads(e, npieces);
  cairn__ckpt_last_threads = nt;
  if (!scratch_for(c, nt, x.bufsz)) {
    free(x.crcs);
    free(offs);
    return cairn__fail(CAIRN_E_NOMEM, "'%s': '%s': out of memory for the chunk buffers", c->path, x.nm);
  }
  x.bufsz = c->scratch_sz;
  /* The lowest failed piece so far: pieces above it are skipped, pieces
     below it still run, so the error reported is always the lowest bad
     piece's, however the threads were scheduled. */
  _Atomic uint64_t first_bad = UINT64_MAX;
  unsigned char **sc = c->scratch;
  uint64_t par_pieces = fn ? 0 : npieces;
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    int t = 0;
#ifdef CAIRN_HAVE_OPENMP
    t = omp_get_thread_num();
#endif
#pragma omp for schedule(dynamic, 1)
    for (uint64_t k = 0; k < par_pieces; k++)
      if (k < first_bad && decode_one(&x, k, &sc[2 * t], &sc[2 * t + 1])) {
        uint64_t b = first_bad;
        while (k < b && !atomic_compare_exchange_weak(&first_bad, &b, k)) {
        }
      }
  }
  cairn_status s = CAIRN_OK;
  if (fn) /* one thread (above): the pieces in order, each checked before fn sees it */
    for (uint64_t k = 0; k < npieces && !s && !x.pe.s; k++) {
      if (decode_one(&x, k, &sc[0], &sc[1])) break;
      s = fn(user, k * c->sb.chunk_bytes, x.out, ck_chunk_raw(e->raw_bytes, c->sb.chunk_bytes, k));
    }
  if (!s && x.pe.s) {
    s = cairn__fail(x.pe.s, "%s", x.pe.msg);
  } else if (!s) {
    uint32_t crc = 0;
    for (uint64_t k = 0; k < npieces; k++)
      crc = cairn__crc32c_combine(crc, x.crcs[k], ck_chunk_raw(e->raw_bytes, c->sb.chunk_bytes, k));
    if (crc != e->raw_crc)
      s = cairn__fail(CAIRN_E_CORRUPT, "'%s' offset %llu: '%s': tensor checksum mismatch (stored %08x, computed %08x)",
                      c->path, (ull)e->record_offset, x.nm, e->raw_crc, crc);
  }
  free(x.crcs);
  free(offs);
  return s;
}

static cairn_status decode_tensor(cairn_ckpt *c, const ck_entry *e, unsigned char *dst, int headers) {
  return decode_tensor_fn(c, e, dst, headers, NULL, NULL, NULL);
}

/* ---- staging compact tensors between a verify and a read -------------------------------- */

/* Staging (cairn_ckpt_set_staging): a tensor with zstd chunks (codec 3)
 * is decoded once by the verify into staging and copied by the read,
 * instead of decoded twice (zstd decodes at a fraction of a page-cache
 * copy's speed). A tensor past the budget is staged in part (whole chunks
 * up to it), the rest decoded twice, so the extra memory stays bounded
 * whatever the model's size (doc/restore-memory.md). */
cairn_status cairn_ckpt_set_staging(cairn_ckpt *c, uint64_t max_bytes) {
  if (!c) return cairn__fail(CAIRN_E_NULL, "ckpt_set_staging: checkpoint is NULL");
  c->stage_max = max_bytes;
  return CAIRN_OK;
}

static int has_zstd(const ck_entry *e) {
  for (uint32_t k = 0; e->chunk_table && k < e->n_chunks; k++)
    if (e->chunk_table[k * CK_ICHUNK] == CK_CODEC_SHUF_ZSTD) return 1;
  return 0;
}

static void unstage(cairn_ckpt *c, size_t i) {
  if (!c->stage || !c->stage[i]) return;
  cairn_free(c->stage[i]);
  c->stage[i] = NULL;
  c->staged_bytes -= c->stage_len[i];
  c->stage_len[i] = 0;
}

/* The bytes of e to stage (whole chunks within the budget, 0: none) and
 * a buffer for them in *buf; 0 also when out of memory (then e is just
 * decoded twice). */
static uint64_t stage_alloc(cairn_ckpt *c, const ck_entry *e, unsigned char **buf) {
  *buf = NULL;
  if (!has_zstd(e)) return 0;
  if (c->staged_bytes >= c->stage_max) return 0;
  uint64_t left = c->stage_max - c->staged_bytes, cb = c->sb.chunk_bytes;
  uint64_t len = e->raw_bytes <= left ? e->raw_bytes : left / cb * cb;
  if (len == 0 || len > SIZE_MAX) return 0;
  if (!c->stage) {
    c->stage = calloc(c->v.n, sizeof *c->stage);
    c->stage_len = calloc(c->v.n, sizeof *c->stage_len);
    if (!c->stage || !c->stage_len) {
      free(c->stage), free(c->stage_len);
      c->stage = NULL, c->stage_len = NULL;
      return 0;
    }
  }
  if (!(*buf = cairn_alloc((size_t)len))) return 0;
  return len;
}

/* The verify of a cairn tensor: decoded into staging when it has zstd
 * chunks (kept only if every check passed), else into scratch. */
static cairn_status verify_staged(cairn_ckpt *c, const ck_entry *e) {
  size_t i = (size_t)(e - c->v.ents);
  unstage(c, i);
  stage_io sg = {0};
  sg.len = stage_alloc(c, e, &sg.to);
  cairn_status s = decode_tensor_fn(c, e, NULL, 0, NULL, NULL, sg.to ? &sg : NULL);
  if (s || !sg.to) {
    cairn_free(sg.to);
    return s;
  }
  c->stage[i] = sg.to;
  c->stage_len[i] = sg.len;
  c->staged_bytes += sg.len;
  return CAIRN_OK;
}

/* The read of a cairn tensor: its staged bytes copied, the rest decoded;
 * the staging is released either way. */
static cairn_status read_staged(cairn_ckpt *c, const ck_entry *e, unsigned char *dst) {
  size_t i = (size_t)(e - c->v.ents);
  if (!c->stage || !c->stage[i]) return decode_tensor(c, e, dst, 0);
  stage_io sg = {.from = c->stage[i], .len = c->stage_len[i]};
  cairn_status s = decode_tensor_fn(c, e, dst, 0, NULL, NULL, &sg);
  unstage(c, i);
  return s;
}

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
  if (c->be) return c->be->read(c->bs, e, dst->data);
  return read_staged(c, e, dst->data);
}

/* A foreign format's tensor in one piece: memory of one tensor. */
static cairn_status backend_read_pieces(cairn_ckpt *c, const ck_entry *e, cairn_ckpt_piece_fn fn, void *user) {
  if (!e->raw_bytes) return CAIRN_OK;
  unsigned char *buf = e->raw_bytes <= SIZE_MAX ? cairn_alloc((size_t)e->raw_bytes) : NULL;
  if (!buf)
    return cairn__fail(CAIRN_E_NOMEM, "'%s': '%s': out of memory for %llu bytes", c->path, e->name,
                       (ull)e->raw_bytes);
  cairn_status s = c->be->read(c->bs, e, buf);
  if (!s) s = fn(user, 0, buf, (size_t)e->raw_bytes);
  cairn_free(buf);
  return s;
}

cairn_status cairn_ckpt_verify_tensor(cairn_ckpt *c, const char *name) {
  if (!c || !name) return cairn__fail(CAIRN_E_NULL, "ckpt_verify_tensor: %s is NULL", !c ? "checkpoint" : "name");
  const ck_entry *e = lookup(c, name);
  if (!e) return not_found(c, "ckpt_verify_tensor", name);
  if (c->be) return c->be->verify(c->bs, e, 1);
  return verify_staged(c, e);
}

cairn_status cairn_ckpt_read_pieces(cairn_ckpt *c, const char *name, cairn_ckpt_piece_fn fn, void *user) {
  if (!c || !name || !fn)
    return cairn__fail(CAIRN_E_NULL, "ckpt_read_pieces: %s is NULL", !c ? "checkpoint" : !name ? "name" : "fn");
  const ck_entry *e = lookup(c, name);
  if (!e) return not_found(c, "ckpt_read_pieces", name);
  if (c->be) return backend_read_pieces(c, e, fn, user);
  return decode_tensor_fn(c, e, NULL, 0, fn, user, NULL);
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
                         (ull)c->size, (ull)st.st_size);
    case OTHER_MTIME:
      return cairn__fail(CAIRN_E_CORRUPT, "'%s' changed since it was opened: it was written to (modification time "
                         "%lld.%09ld then, %lld.%09ld now)", c->path, (long long)c->mtime.tv_sec,
                         (long)c->mtime.tv_nsec, (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec);
  }
  return CAIRN_OK;
}

/* R23: the record header agrees with the index entry. */
static cairn_status check_record(const cairn_ckpt *c, const ck_entry *e) {
  unsigned char buf[CK_MAX_REC_HDR];
  size_t hsize = CK_REC_FIXED + 8u * e->rank + e->name_len;
  char nb[96];
  const char *nm = cairn__ck_short(e->name, e->name_len, nb, sizeof nb);
  cairn_status s = cairn__ck_pread(c->fd, buf, hsize, e->record_offset, c->path, "record header");
  ck_rec r;
  if (!s) s = cairn__ck_parse_rec(c->path, e->record_offset, buf, hsize, &c->sb, UINT64_MAX, &r);
  if (s) {
    char m[400];
    snprintf(m, sizeof m, "%s", cairn_errmsg());
    return cairn__fail(s, "%s (tensor '%s')", m, nm);
  }
  int same = r.seq == e->seq && r.name_len == e->name_len && memcmp(r.name, e->name, e->name_len) == 0 &&
             r.dtype == e->dtype && r.rank == e->rank && r.layout == e->layout && r.n_chunks == e->n_chunks &&
             r.raw_bytes == e->raw_bytes;
  for (int d = 0; same && d < e->rank; d++) same = r.shape[d] == e->shape[d];
  if (!same)
    return cairn__fail(CAIRN_E_CORRUPT, "'%s' offset %llu: the record header of '%s' disagrees with the index", c->path,
                       (ull)e->record_offset, nm);
  if (e->layout == CK_LAYOUT_RAW) { /* R25 */
    uint64_t pad = e->data_offset - (e->record_offset + hsize);
    if (pad) {
      unsigned char *z = malloc((size_t)pad);
      if (!z) return cairn__fail(CAIRN_E_NOMEM, "ckpt_verify: out of memory");
      s = cairn__ck_pread(c->fd, z, (size_t)pad, e->record_offset + hsize, c->path, "padding");
      int zero = !s && ck_all_zero(z, (size_t)pad);
      free(z);
      if (s) return s;
      if (!zero)
        return cairn__fail(CAIRN_E_CORRUPT, "'%s' offset %llu: padding before the payload of '%s' is not zero", c->path,
                           (ull)(e->record_offset + hsize), nm);
    }
  }
  return CAIRN_OK;
}

/* R26: the trailer agrees with the index entry. */
static cairn_status check_trailer(const cairn_ckpt *c, const ck_entry *e) {
  uint64_t off = e->data_offset + e->stored_bytes + (uint64_t)CK_CHUNK_HDR * e->n_chunks;
  unsigned char buf[CK_TRAILER];
  char nb[96];
  const char *nm = cairn__ck_short(e->name, e->name_len, nb, sizeof nb);
  uint32_t seq, crc;
  uint64_t raw;
  cairn_status s = cairn__ck_pread(c->fd, buf, CK_TRAILER, off, c->path, "record trailer");
  if (!s) s = cairn__ck_parse_trailer(c->path, off, buf, &seq, &raw, &crc);
  if (s) {
    char m[400];
    snprintf(m, sizeof m, "%s", cairn_errmsg());
    return cairn__fail(s, "%s (tensor '%s')", m, nm);
  }
  if (seq != e->seq || raw != e->raw_bytes || crc != e->raw_crc)
    return cairn__fail(CAIRN_E_CORRUPT, "'%s' offset %llu: the trailer of '%s' disagrees with the index", c->path,
                       (ull)off, nm);
  return CAIRN_OK;
}

cairn_status cairn_ckpt_verify(cairn_ckpt *c) {
  if (!c) return cairn__fail(CAIRN_E_NULL, "ckpt_verify: checkpoint is NULL");
  if (c->be) return c->be->verify(c->bs, c->v.ents, c->v.n);
  /* File order: sequential reads. */
  size_t *order = malloc((c->v.n ? c->v.n : 1) * sizeof *order);
  if (!order) return cairn__fail(CAIRN_E_NOMEM, "ckpt_verify: out of memory");
  for (size_t i = 0; i < c->v.n; i++) order[c->v.ents[i].seq] = i;
  cairn_status s = CAIRN_OK;
  for (size_t q = 0; q < c->v.n && !s; q++) {
    const ck_entry *e = &c->v.ents[order[q]];
    s = check_record(c, e);
    if (!s) s = decode_tensor(c, e, NULL, 1);
    if (!s) s = check_trailer(c, e);
  }
  free(order);
  return s;
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
