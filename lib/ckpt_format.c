/* The checkpoint format's shared part (doc/checkpoint-format.md), used by
 * the writer (ckpt_write.c), the reader (ckpt_native_open.c, ckpt_native.c) and salvage
 * (ckpt_recover.c): the name, key and UTF-8 checks, chunk-size rules, chunk
 * decoding (the byte planes are the shuffle kernels of lib/kernels), exact
 * pread, and the parsers of superblock, footer, record, chunk, trailer and
 * metadata block.
 *
 * Nothing is trusted before its CRC verifies; every size is checked against
 * the caller's limits and the bytes present in the file before anything is
 * allocated; every offset and size is computed with overflow checks. */
#define _GNU_SOURCE 1
#include "ckpt_impl.h"
#include "kernels/kernels.h"

#include <errno.h>
#include <lz4.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

typedef unsigned long long ull;

/* ---- shared helpers ------------------------------------------------------------- */

int cairn__ck_utf8_ok(const unsigned char *s, size_t len, int no_controls) {
  size_t i = 0;
  while (i < len) {
    unsigned c = s[i];
    if (c < 0x80) {
      if (c == 0 || (no_controls && (c < 0x20 || c == 0x7f))) return 0;
      i++;
      continue;
    }
    unsigned need, cp;
    if (c >= 0xc2 && c <= 0xdf) {
      need = 1;
      cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
      need = 2;
      cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      need = 3;
      cp = c & 0x07;
    } else {
      return 0;
    }
    if (len - i <= need) return 0;
    for (unsigned k = 1; k <= need; k++) {
      unsigned cc = s[i + k];
      if ((cc & 0xc0) != 0x80) return 0;
      cp = cp << 6 | (cc & 0x3f);
    }
    if ((need == 2 && cp < 0x800) || (need == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
      return 0;
    if (no_controls && cp >= 0x80 && cp <= 0x9f) return 0;
    i += need + 1;
  }
  return 1;
}

int cairn__ck_name_ok(const unsigned char *s, size_t len) {
  return len >= 1 && len <= CK_MAX_NAME && cairn__ck_utf8_ok(s, len, 1);
}

int cairn__ck_key_ok(const unsigned char *s, size_t len) {
  if (len < 1 || len > CK_MAX_KEY) return 0;
  for (size_t i = 0; i < len; i++) {
    unsigned c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.')) return 0;
  }
  return 1;
}

size_t cairn__ck_esize(unsigned dtype) {
  return dtype >= 1 && dtype <= CK_DTYPE_MAX ? cairn_dtype_size((cairn_dtype)dtype) : 0;
}

uint64_t cairn__ck_nchunks(uint64_t raw, uint32_t chunk_bytes) {
  return raw / chunk_bytes + (raw % chunk_bytes != 0);
}

int cairn__ck_chunk_sizes_ok(unsigned codec, uint32_t raw, uint32_t stored) {
  if (raw == 0) return 0;
  if (codec == CK_CODEC_RAW) return stored == raw;
  if (codec == CK_CODEC_LZ4 || codec == CK_CODEC_SHUF_LZ4)
    return stored >= 1 && stored < raw && (uint64_t)raw <= 255ull * stored + 16;
  if (codec == CK_CODEC_SHUF_ZSTD) return stored < raw && stored >= cairn__ck_zstd_min_stored(raw);
  return 0;
}

const char *cairn__ck_short(const char *name, size_t len, char *buf, size_t cap) {
  size_t n = strnlen(name, len);
  if (n + 1 <= cap && n == strnlen(name, len + 1)) {
    memcpy(buf, name, n);
    buf[n] = '\0';
    return buf;
  }
  size_t keep = cap > 4 ? cap - 4 : 0;
  if (keep > n) keep = n;
  /* do not cut inside a UTF-8 sequence */
  while (keep > 0 && ((unsigned char)name[keep] & 0xc0) == 0x80) keep--;
  memcpy(buf, name, keep);
  memcpy(buf + keep, "...", 4);
  return buf;
}

/* ---- index entries ------------------------------------------------------------- */

/* The fixed part of an index entry (doc/checkpoint-format.md), listed once
 * for put and get: X(member, offset, bits). Bytes 5-7 and 52-55 are
 * reserved (zero); the raw CRC32C at 48 is stored masked. */
#define CK_ENTRY_FIELDS(X)                                                                                 \
  X(name_len, 0, 16) X(dtype, 2, 8) X(rank, 3, 8) X(layout, 4, 8) X(seq, 8, 32) X(n_chunks, 12, 32)       \
  X(record_offset, 16, 64) X(data_offset, 24, 64) X(raw_bytes, 32, 64) X(stored_bytes, 40, 64)

static inline uint8_t ck_get8(const unsigned char *p) { return p[0]; }
static inline void ck_put8(unsigned char *p, uint8_t v) { p[0] = v; }

void cairn__ck_entry_put(unsigned char *p, const ck_entry *e) {
  memset(p, 0, CK_IENTRY_FIXED);
#define PUT_FIELD(member, at, bits) ck_put##bits(p + (at), e->member);
  CK_ENTRY_FIELDS(PUT_FIELD)
#undef PUT_FIELD
  ck_put32(p + 48, ck_mask(e->raw_crc));
}

int cairn__ck_entry_get(const unsigned char *p, ck_entry *e) {
#define GET_FIELD(member, at, bits) e->member = ck_get##bits(p + (at));
  CK_ENTRY_FIELDS(GET_FIELD)
#undef GET_FIELD
  e->raw_crc = ck_unmask(ck_get32(p + 48));
  return !(p[5] || p[6] || p[7] || ck_get32(p + 52));
}

/* ---- chunk decoding -------------------------------------------------------------- */

/* Codecs 2 and 3: the entropy decoder writes the byte planes into scratch,
 * the unshuffle kernel interleaves them into dst (which may be src's
 * buffer: src has been consumed by then); one pass over the planes, no
 * copy. Codec 1 decodes straight into dst. */
int cairn__ck_decode(unsigned codec, size_t es, const unsigned char *src, uint32_t stored, unsigned char *dst,
                     uint32_t raw, unsigned char *scratch) {
  if (codec == CK_CODEC_RAW) {
    if (stored != raw) return -1;
    if (dst != src) memcpy(dst, src, raw);
    return 0;
  }
  if (codec == CK_CODEC_SHUF_ZSTD) {
    if (cairn__ck_zstd_decode(src, stored, scratch, raw) != 0) return -1;
    cairn__kernels()->unshuffle(dst, scratch, raw / es, es);
    return 0;
  }
  if (codec != CK_CODEC_LZ4 && codec != CK_CODEC_SHUF_LZ4) return -1;
  if (raw > (uint32_t)LZ4_MAX_INPUT_SIZE || stored > (uint32_t)LZ4_MAX_INPUT_SIZE) return -1;
  unsigned char *out = codec == CK_CODEC_SHUF_LZ4 ? scratch : dst;
  int n = LZ4_decompress_safe((const char *)src, (char *)out, (int)stored, (int)raw);
  if (n < 0 || (uint32_t)n != raw) return -1;
  if (codec == CK_CODEC_SHUF_LZ4) cairn__kernels()->unshuffle(dst, scratch, raw / es, es);
  return 0;
}

/* ---- I/O ----------------------------------------------------------------------------- */

/* 0 ok, 1 end of file before len bytes, -1 error (*err = errno). */
int cairn__ck_pread_raw(int fd, void *buf, size_t len, uint64_t off, int *err) {
  unsigned char *p = buf;
  while (len) {
    size_t want = len > ((size_t)1 << 30) ? ((size_t)1 << 30) : len;
    ssize_t k = pread(fd, p, want, (off_t)off);
    if (k < 0) {
      if (errno == EINTR) continue;
      *err = errno;
      return -1;
    }
    if (k == 0) return 1;
    p += k;
    off += (uint64_t)k;
    len -= (size_t)k;
  }
  return 0;
}

cairn_status cairn__ck_pread(int fd, void *buf, size_t len, uint64_t off, const char *path, const char *what) {
  int err = 0;
  int r = cairn__ck_pread_raw(fd, buf, len, off, &err);
  if (r == 1)
    return cairn__fail(CAIRN_E_TRUNCATED, "'%s' offset %llu: the file ends inside the %s (%zu bytes wanted)", path,
                       (ull)off, what, len);
  if (r < 0) return cairn__fail(CAIRN_E_IO, "'%s' offset %llu: reading the %s: %s", path, (ull)off, what, strerror(err));
  return CAIRN_OK;
}

/* ---- parsers --------------------------------------------------------------------------- */

/* Shown with every "file is incomplete" error (here and in ckpt_native_open.c). */
const char *const cairn__ck_recover_hint = "the file is incomplete (a save that did not finish?); "
                                           "'ckpt-inspect recover' can salvage the tensors that were written completely";

/* The length of the TF bundle prefix of a data shard's path
 * "<prefix>.data-NNNNN-of-NNNNN", or 0 when path is not named so. */
static size_t shard_prefix_len(const char *path) {
  const char *d = strstr(path, ".data-");
  while (d) {
    const char *p = d + 6;
    size_t a = strspn(p, "0123456789");
    if (a && strncmp(p + a, "-of-", 4) == 0) {
      size_t b = strspn(p + a + 4, "0123456789");
      if (b && p[a + 4 + b] == '\0') return (size_t)(d - path);
    }
    d = strstr(d + 1, ".data-");
  }
  return 0;
}

cairn_status cairn__ck_parse_super(const char *path, const unsigned char *buf, size_t avail, uint64_t max_chunk,
                                   ck_super *sb) {
  size_t m = avail < 8 ? avail : 8;
  size_t pl = memcmp(buf, CK_MAGIC, m) != 0 ? shard_prefix_len(path) : 0;
  if (pl) {
    /* A TensorFlow bundle's data shard named instead of its prefix. */
    char index[4200];
    snprintf(index, sizeof index, "%.*s.index", (int)(pl < 4000 ? pl : 4000), path);
    struct stat ist;
    int has_index = stat(index, &ist) == 0 && S_ISREG(ist.st_mode);
    return cairn__fail(CAIRN_E_FORMAT,
                       "'%s' is the data shard of a TensorFlow bundle, not a checkpoint by itself: %s '%.*s'%s", path,
                       has_index ? "open the bundle by its prefix" : "its index is missing, so the bundle",
                       (int)pl, path,
                       has_index ? "" : " cannot be read (a bundle is PREFIX.index plus its PREFIX.data-* shards: "
                                        "copy the .index file too)");
  }
  if (memcmp(buf, CK_MAGIC, m) != 0)
    return cairn__fail(CAIRN_E_FORMAT, "'%s' is not a cairn checkpoint (bad magic at offset 0)", path);
  if (avail < CK_SUPER_SIZE)
    return cairn__fail(CAIRN_E_TRUNCATED, "'%s' is %zu bytes, shorter than its 64-byte superblock: %s", path, avail,
                       cairn__ck_recover_hint);
  sb->major = ck_get16(buf + 8);
  sb->minor = ck_get16(buf + 10);
  if (sb->major == 0)
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset 8: format major version 0 does not exist", path);
  if (sb->major > CAIRN_CKPT_VERSION_MAJOR)
    return cairn__fail(CAIRN_E_UNSUPPORTED,
                       "'%s' was written by a newer cairn (format version %d.%d, newer than this reader (%d.%d)): upgrade "
                       "cairn, or move the file away", path,
                       sb->major, sb->minor, CAIRN_CKPT_VERSION_MAJOR, CAIRN_CKPT_VERSION_MINOR);
  cairn_status st = cairn__ck_check_crc(path, 0, "superblock", buf, 60);
  if (st != CAIRN_OK) return st;
  uint32_t bom = ck_get32(buf + 12);
  if (bom == 0x04030201u)
    return cairn__fail(CAIRN_E_UNSUPPORTED, "'%s' offset 12: big-endian checkpoints are not supported", path);
  if (bom != CK_BOM)
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset 12: bad byte-order mark 0x%08x", path, bom);
  sb->required = ck_get32(buf + 16);
  sb->optional = ck_get32(buf + 20);
  if (sb->required & ~CK_KNOWN_REQUIRED)
    return cairn__fail(CAIRN_E_UNSUPPORTED,
                       "'%s' was written by a newer cairn (needs format features 0x%x, which this reader "
                       "(%d.%d) does not know): upgrade cairn, or move the file away",
                       path, sb->required & ~CK_KNOWN_REQUIRED, CAIRN_CKPT_VERSION_MAJOR, CAIRN_CKPT_VERSION_MINOR);
  if (!ck_all_zero(buf + 48, 12))
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset 48: reserved superblock bytes are not zero", path);
  sb->alignment = ck_get32(buf + 24);
  sb->chunk_bytes = ck_get32(buf + 28);
  if (sb->alignment == 0 || (sb->alignment & (sb->alignment - 1)) || sb->alignment > CK_MAX_ALIGN)
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset 24: alignment %u is not a power of two in [1, %u]", path,
                       sb->alignment, CK_MAX_ALIGN);
  if (sb->chunk_bytes % 8 || sb->chunk_bytes < CK_MIN_CHUNK || sb->chunk_bytes > CK_MAX_CHUNK)
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset 28: chunk size %u is not a multiple of 8 in [%u, %u]", path,
                       sb->chunk_bytes, CK_MIN_CHUNK, CK_MAX_CHUNK);
  if (sb->chunk_bytes > max_chunk)
    return cairn__fail(CAIRN_E_LIMIT, "'%s' offset 28: chunk size %u exceeds the limit %llu", path, sb->chunk_bytes,
                       (ull)max_chunk);
  memcpy(sb->file_id, buf + 32, 16);
  return CAIRN_OK;
}

cairn_status cairn__ck_parse_footer(const char *path, const unsigned char *buf, uint64_t size, const ck_super *sb,
                                    ck_footer *ft) {
  uint64_t at = size - CK_FOOTER_SIZE;
  if (memcmp(buf, CK_TAG_FOOTER, 4) != 0)
    return cairn__fail(CAIRN_E_TRUNCATED, "'%s': no footer at offset %llu: %s", path, (ull)at, cairn__ck_recover_hint);
  cairn_status st = cairn__ck_check_crc(path, at, "footer", buf, 60);
  if (st != CAIRN_OK) return st;
  ft->major = ck_get16(buf + 4);
  ft->minor = ck_get16(buf + 6);
  ft->meta_offset = ck_get64(buf + 8);
  ft->meta_size = ck_get64(buf + 16);
  ft->index_size = ck_get64(buf + 24);
  ft->count = ck_get64(buf + 32);
  ft->flags = ck_get32(buf + 40);
  memcpy(ft->file_id, buf + 44, 16);
  if (ft->major != sb->major || ft->minor != sb->minor)
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: footer says version %d.%d, superblock %d.%d", path, (ull)at,
                       ft->major, ft->minor, sb->major, sb->minor);
  if (memcmp(ft->file_id, sb->file_id, 16) != 0)
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: the footer belongs to another file (file id differs)", path,
                       (ull)at);
  if (!(ft->flags & CK_FLAG_COMPLETE))
    return cairn__fail(CAIRN_E_TRUNCATED, "'%s' offset %llu: the footer is not marked complete: %s", path, (ull)at,
                       cairn__ck_recover_hint);
  if (ft->flags != CK_FLAG_COMPLETE)
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: reserved footer flags 0x%x are set", path, (ull)at,
                       ft->flags & ~CK_FLAG_COMPLETE);
  uint64_t end;
  if (ft->meta_offset < CK_SUPER_SIZE || ft->meta_size < CK_META_FIXED || ft->index_size < CK_INDEX_FIXED ||
      __builtin_add_overflow(ft->meta_offset, ft->meta_size, &end) ||
      __builtin_add_overflow(end, ft->index_size, &end) || __builtin_add_overflow(end, CK_FOOTER_SIZE, &end) ||
      end != size)
    return cairn__fail(CAIRN_E_FORMAT,
                       "'%s' offset %llu: footer places metadata at %llu (%llu bytes) and the index (%llu bytes) "
                       "inconsistently with the file size %llu",
                       path, (ull)at, (ull)ft->meta_offset, (ull)ft->meta_size, (ull)ft->index_size, (ull)size);
  return CAIRN_OK;
}

cairn_status cairn__ck_parse_rec(const char *path, uint64_t off, const unsigned char *buf, size_t avail,
                                 const ck_super *sb, uint64_t max_tensor, ck_rec *r) {
  if (avail < 48)
    return cairn__fail(CAIRN_E_TRUNCATED, "'%s' offset %llu: the file ends inside a record header", path, (ull)off);
  if (memcmp(buf, CK_TAG_REC, 4) != 0)
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: no record header (tag CRNT) here", path, (ull)off);
  r->name_len = ck_get16(buf + 24);
  r->rank = buf[27];
  if (r->rank > CAIRN_MAX_RANK || r->name_len == 0 || r->name_len > CK_MAX_NAME)
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: record header has rank %u and a %u-byte name", path,
                       (ull)off, r->rank, r->name_len);
  r->size = CK_REC_FIXED + 8u * r->rank + r->name_len;
  if (avail < r->size)
    return cairn__fail(CAIRN_E_TRUNCATED, "'%s' offset %llu: the file ends inside a record header", path, (ull)off);
  cairn_status st = cairn__ck_check_crc(path, off, "record header", buf, r->size - 4);
  if (st != CAIRN_OK) return st;
  if (memcmp(buf + 8, sb->file_id, 16) != 0)
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: record header of another file (file id differs)", path,
                       (ull)off);
  r->seq = ck_get32(buf + 4);
  r->dtype = buf[26];
  r->layout = buf[28];
  r->n_chunks = ck_get32(buf + 32);
  r->raw_bytes = ck_get64(buf + 40);
  r->name = buf + 48 + 8 * r->rank;
  if (buf[29] || buf[30] || buf[31] || ck_get32(buf + 36))
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: reserved record header bytes are not zero", path, (ull)off);
  size_t es = cairn__ck_esize(r->dtype);
  if (!es) return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: unknown dtype %u", path, (ull)off, r->dtype);
  if (r->layout > CK_LAYOUT_RAW)
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: unknown layout %u", path, (ull)off, r->layout);
  if (!cairn__ck_name_ok(r->name, r->name_len))
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: tensor name is not UTF-8 without control characters", path,
                       (ull)off);
  uint64_t n = 1;
  for (int i = 0; i < r->rank; i++) {
    r->shape[i] = ck_get64(buf + 48 + 8 * i);
    if (r->shape[i] >= CK_MAX_DIM || __builtin_mul_overflow(n, r->shape[i], &n))
      return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: dimension %d is too large", path, (ull)off, i);
  }
  if (__builtin_mul_overflow(n, (uint64_t)es, &n) || n != r->raw_bytes)
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: raw size %llu is not element count × element size", path,
                       (ull)off, (ull)r->raw_bytes);
  if (r->raw_bytes > max_tensor)
    return cairn__fail(CAIRN_E_LIMIT, "'%s' offset %llu: tensor of %llu bytes exceeds the limit %llu", path, (ull)off,
                       (ull)r->raw_bytes, (ull)max_tensor);
  if (r->layout == CK_LAYOUT_RAW ? (r->n_chunks != 0 || r->raw_bytes == 0)
                                 : r->n_chunks != cairn__ck_nchunks(r->raw_bytes, sb->chunk_bytes))
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: %u chunks do not fit a %s tensor of %llu bytes", path,
                       (ull)off, r->n_chunks, r->layout == CK_LAYOUT_RAW ? "raw-layout" : "chunked", (ull)r->raw_bytes);
  return CAIRN_OK;
}

cairn_status cairn__ck_parse_chunk(const char *path, uint64_t off, const unsigned char *buf, ck_chunk *c) {
  if (memcmp(buf, CK_TAG_CHUNK, 4) != 0)
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: no chunk header (tag CRNC) here", path, (ull)off);
  cairn_status st = cairn__ck_check_crc(path, off, "chunk header", buf, 28);
  if (st != CAIRN_OK) return st;
  c->seq = ck_get32(buf + 4);
  c->chunk_no = ck_get32(buf + 8);
  c->codec = buf[12];
  c->raw = ck_get32(buf + 16);
  c->stored = ck_get32(buf + 20);
  c->data_crc = ck_unmask(ck_get32(buf + 24));
  if (buf[13] || buf[14] || buf[15])
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: reserved chunk header bytes are not zero", path, (ull)off);
  if (c->codec > CK_CODEC_MAX)
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: unknown codec %u", path, (ull)off, c->codec);
  return CAIRN_OK;
}

cairn_status cairn__ck_parse_trailer(const char *path, uint64_t off, const unsigned char *buf, uint32_t *seq,
                                     uint64_t *raw_bytes, uint32_t *raw_crc) {
  if (memcmp(buf, CK_TAG_TRAILER, 4) != 0)
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: no record trailer (tag CRNE) here", path, (ull)off);
  cairn_status st = cairn__ck_check_crc(path, off, "trailer", buf, 20);
  if (st != CAIRN_OK) return st;
  *seq = ck_get32(buf + 4);
  *raw_bytes = ck_get64(buf + 8);
  *raw_crc = ck_unmask(ck_get32(buf + 16));
  return CAIRN_OK;
}

/* Compares length-delimited byte strings in memcmp order, shorter first. */
cairn_status cairn__ck_check_crc(const char *path, uint64_t off, const char *what, const unsigned char *buf,
                                 size_t crc_at) {
  uint32_t want = ck_get32(buf + crc_at), got = ck_crc_masked(buf, crc_at);
  if (want == got) return CAIRN_OK;
  return cairn__fail(CAIRN_E_CORRUPT, "'%s' offset %llu: %s checksum mismatch (stored %08x, computed %08x)", path,
                     (ull)off, what, want, got);
}

int cairn__ck_cmp_bytes(const void *a, size_t na, const void *b, size_t nb) {
  int c = memcmp(a, b, na < nb ? na : nb);
  return c ? c : (na > nb) - (na < nb);
}

/* One metadata entry's value of type e->type at *p (advanced past it),
 * copied into the arena at *a (advanced) when it is a string or bytes. */
static cairn_status parse_meta_value(const char *path, uint64_t at, ck_meta *e, const unsigned char **pp,
                                     const unsigned char *end, char **a) {
  const unsigned char *p = *pp;
  if (e->type == CAIRN_META_BOOL) {
    if (end - p < 1 || p[0] > 1)
      return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: metadata '%s': bad bool", path, (ull)at, e->key);
    e->num = p[0];
    *pp = p + 1;
    return CAIRN_OK;
  }
  if (e->type == CAIRN_META_STR || e->type == CAIRN_META_BYTES) {
    if (end - p < 4 || (uint64_t)(end - p - 4) < ck_get32(p))
      return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: metadata '%s': value runs past the block", path, (ull)at,
                         e->key);
    size_t len = ck_get32(p);
    p += 4;
    if (e->type == CAIRN_META_STR && !cairn__ck_utf8_ok(p, len, 0))
      return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: metadata '%s': string is not UTF-8 without NUL", path,
                         (ull)at, e->key);
    memcpy(*a, p, len);
    (*a)[len] = '\0';
    e->ptr = *a;
    e->len = len;
    *a += len + 1;
    *pp = p + len;
    return CAIRN_OK;
  }
  if (end - p < 8)
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: metadata '%s': value runs past the block", path, (ull)at,
                       e->key);
  e->num = ck_get64(p);
  *pp = p + 8;
  return CAIRN_OK;
}

/* Metadata entry i at *p (advanced past it): type, key (ascending after
 * *prev, copied into the arena at *a), value. */
static cairn_status parse_meta_entry(const char *path, uint64_t at, uint64_t i, ck_meta *e, const unsigned char **pp,
                                     const unsigned char *end, char **a, const unsigned char **prev,
                                     size_t *prev_len) {
  const unsigned char *p = *pp;
  if (end - p < 2)
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: metadata entry %llu runs past the block", path, (ull)at,
                       (ull)i);
  unsigned type = p[0], klen = p[1];
  if (type < CAIRN_META_U64 || type > CAIRN_META_BYTES)
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: metadata entry %llu has unknown type %u", path, (ull)at,
                       (ull)i, type);
  if ((size_t)(end - p - 2) < klen || !cairn__ck_key_ok(p + 2, klen))
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: metadata entry %llu has a bad key", path, (ull)at, (ull)i);
  const unsigned char *key = p + 2;
  if (*prev && cairn__ck_cmp_bytes(*prev, *prev_len, key, klen) >= 0)
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: metadata keys are not strictly ascending at entry %llu",
                       path, (ull)at, (ull)i);
  *prev = key;
  *prev_len = klen;
  *pp = p + 2 + klen;
  memcpy(*a, key, klen);
  (*a)[klen] = '\0';
  e->key = *a;
  *a += klen + 1;
  e->type = (cairn_meta_type)type;
  return parse_meta_value(path, at, e, pp, end, a);
}

cairn_status cairn__ck_parse_meta(const char *path, uint64_t off, const unsigned char *blk, uint64_t size,
                                  ck_meta **out, size_t *nout, char **arena_out) {
  *out = NULL;
  *nout = 0;
  *arena_out = NULL;
  if (size < CK_META_FIXED)
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: metadata block of %llu bytes is too small", path, (ull)off,
                       (ull)size);
  cairn_status st = cairn__ck_check_crc(path, off, "metadata", blk, (size_t)size - 4);
  if (st != CAIRN_OK) return st;
  if (memcmp(blk, CK_TAG_META, 4) != 0)
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: no metadata block (tag CRNM) here", path, (ull)off);
  uint64_t count = ck_get32(blk + 4);
  if (ck_get64(blk + 8) != size)
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: metadata block size %llu, expected %llu", path, (ull)off,
                       (ull)ck_get64(blk + 8), (ull)size);
  if (count > (size - CK_META_FIXED) / 4)
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: %llu metadata entries cannot fit in %llu bytes", path,
                       (ull)off, (ull)count, (ull)size);
  ck_meta *m = calloc(count ? count : 1, sizeof *m);
  char *arena = malloc((size_t)size + 2 * (size_t)count);
  if (!m || !arena) {
    free(m);
    free(arena);
    return cairn__fail(CAIRN_E_NOMEM, "'%s': out of memory for %llu metadata entries", path, (ull)count);
  }
  const unsigned char *p = blk + 16, *end = blk + size - 4;
  char *a = arena;
  const unsigned char *prev = NULL;
  size_t prev_len = 0;
  cairn_status s = CAIRN_OK;
  for (uint64_t i = 0; i < count && !s; i++)
    s = parse_meta_entry(path, off + (uint64_t)(p - blk), i, &m[i], &p, end, &a, &prev, &prev_len);
  if (!s && p != end)
    s = cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: %lld stray bytes after the metadata entries", path,
                    (ull)(off + (uint64_t)(p - blk)), (long long)(end - p));
  if (s) {
    free(m);
    free(arena);
    return s;
  }
  *out = m;
  *nout = (size_t)count;
  *arena_out = arena;
  return CAIRN_OK;
}
