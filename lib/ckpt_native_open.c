/* cairn's own format, opening (the backend's open and close,
 * ckpt_native_impl.h): validates superblock, footer, metadata and index
 * (rules R1–R18 of doc/checkpoint-format.md) and fills the reader's view.
 * The parsers and checks it shares with the writer and salvage are in
 * ckpt_format.c; reading and verifying tensors is ckpt_native.c.
 *
 * Nothing is trusted before its CRC verifies; every size is checked against
 * the caller's limits and the bytes present in the file before anything is
 * allocated; every offset and size is computed with overflow checks. */
#define _GNU_SOURCE 1
#include "ckpt_native_impl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "cairn/runtime.h"

typedef unsigned long long ull;

static cairn_status idx_fail(const ck_native *c, const ck_entry *e, cairn_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static cairn_status idx_fail(const ck_native *c, const ck_entry *e, cairn_status s, const char *fmt, ...) {
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
static cairn_status parse_chunk_table(const ck_native *c, ck_entry *e, const unsigned char **pp,
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
static cairn_status parse_entry(ck_native *c, uint64_t i, const unsigned char **pp, const unsigned char *end,
                                char **names, uint32_t *by_seq) {
  ck_entry *e = &c->v->ents[i];
  const unsigned char *p = *pp;
  uint64_t count = c->v->n;
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
static cairn_status check_records(const ck_native *c, const uint32_t *by_seq) {
  uint64_t at = CK_SUPER_SIZE, count = c->v->n;
  for (uint64_t q = 0; q < count; q++) {
    const ck_entry *e = &c->v->ents[by_seq[q]];
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
static cairn_status parse_index(ck_native *c) {
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
  c->v->n = (size_t)count;
  c->v->ents = calloc(count ? count : 1, sizeof *c->v->ents);
  c->v->names = malloc((size_t)size + (size_t)count);
  uint32_t *by_seq = malloc((count ? count : 1) * sizeof *by_seq);
  if (!c->v->ents || !c->v->names || !by_seq) {
    free(by_seq);
    return cairn__fail(CAIRN_E_NOMEM, "'%s': out of memory for an index of %llu entries", c->path, (ull)count);
  }
  for (uint64_t i = 0; i < count; i++) by_seq[i] = UINT32_MAX;
  const unsigned char *p = blk + 16, *end = blk + size - 4;
  char *names = c->v->names;
  cairn_status s = CAIRN_OK;
  for (uint64_t i = 0; i < count && !s; i++) {
    c->v->ents[i].index_at = base + (uint64_t)(p - blk);
    s = parse_entry(c, i, &p, end, &names, by_seq);
  }
  if (!s && p != end)
    s = cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: stray bytes after the index entries", c->path,
                    (ull)(base + (uint64_t)(p - blk)));
  if (!s) s = check_records(c, by_seq);
  free(by_seq);
  return s;
}

/* R1–R12 and the index (R13–R18): c->fd is the path opened by
 * cairn_ckpt_open, or -1 and open_why says why not. */
static cairn_status open_file(ck_native *c, const char *open_why) {
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
  c->v->st = st;
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
    s = cairn__ck_parse_meta(c->path, c->ft.meta_offset, meta, c->ft.meta_size, &c->v->meta, &c->v->nmeta,
                             &c->v->meta_arena);
  free(meta);
  if (s) return s;
  uint64_t ioff = c->ft.meta_offset + c->ft.meta_size;
  if (!(c->index = malloc((size_t)c->ft.index_size)))
    return cairn__fail(CAIRN_E_NOMEM, "'%s': out of memory for %llu bytes of index", c->path, (ull)c->ft.index_size);
  if ((s = cairn__ck_pread(c->fd, c->index, (size_t)c->ft.index_size, ioff, c->path, "index block"))) return s;
  if ((s = cairn__ck_check_crc(c->path, ioff, "index", c->index, (size_t)c->ft.index_size - 4))) return s;
  return parse_index(c);
}

void cairn__ck_native_close(void *state) {
  ck_native *c = state;
  if (!c) return;
  for (int i = 0; i < c->n_scratch; i++) cairn_free(c->scratch[i]);
  free(c->scratch);
  cairn__ck_unstage_all(c);
  free(c->index);
  free(c);
}

cairn_status cairn__ck_native_open(const ck_source *src, const cairn_ckpt_limits *lim, void **state, ck_view *v) {
  *state = NULL;
  ck_native *c = calloc(1, sizeof *c);
  if (!c) return cairn__fail(CAIRN_E_NOMEM, "ckpt_open: out of memory");
  c->path = src->path;
  c->fd = src->fd;
  c->lim = *lim;
  c->v = v;
  cairn_status s = open_file(c, src->open_why);
  if (s) {
    cairn__ck_view_clear(v);
    cairn__ck_native_close(c);
    return s;
  }
  v->major = c->sb.major;
  v->minor = c->sb.minor;
  v->fd = c->fd;
  *state = c;
  return CAIRN_OK;
}
