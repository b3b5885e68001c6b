/* Salvage: copies every complete, valid tensor record of a checkpoint (cut
 * short or damaged) into a new checkpoint written atomically. See
 * "Salvage" in doc/checkpoint-format.md.
 *
 * Pass 1 walks the records from offset 64, checking every header, chunk,
 * decoded size and CRC, and remembers where the good records' bytes are.
 * Pass 2 copies those bytes as stored (no recompression) through the
 * writer, which checks each chunk's CRC again on the bytes it writes. Memory:
 * two chunk buffers plus a small table per recovered record. */
#define _GNU_SOURCE 1
#include "ckpt_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

typedef unsigned long long ull;

typedef struct rchunk {
  uint64_t off; /* of the stored bytes */
  uint32_t raw, stored, crc; /* crc unmasked */
  uint8_t codec;
} rchunk;

typedef struct rrec {
  char *name;
  uint16_t name_len;
  uint8_t dtype, rank, layout;
  int64_t shape[CAIRN_MAX_RANK];
  uint64_t raw_bytes, data_off;
  uint32_t n_chunks, raw_crc;
  rchunk *chunks;
  int dropped; /* a later record has the same name */
} rrec;

typedef struct scan {
  const char *path;
  int fd;
  uint64_t data_end, file_size;
  ck_super sb;
  unsigned char *a, *b; /* chunk_bytes each */
  rrec *recs;
  size_t n, cap;
  size_t lost;
  int64_t last_seq;
  ck_meta *meta;
  size_t nmeta;
  char *meta_arena;
} scan;

/* What a structural failure means for the walk. */
enum { WALK_OK, WALK_BAD, WALK_RESYNC, WALK_END };

/* Reads up to len bytes at off without going past data_end; returns the
 * count read (0 on error). */
static size_t read_upto(scan *s, void *buf, size_t len, uint64_t off) {
  if (off >= s->data_end) return 0;
  if (len > s->data_end - off) len = (size_t)(s->data_end - off);
  return cairn__ck_pread(s->fd, buf, len, off, s->path, "data") ? 0 : len;
}

/* A metadata block at off (whole and valid)? Keeps its entries. */
static int try_meta(scan *s, uint64_t off) {
  /* It follows the data region: bounded by the file, not by data_end. */
  unsigned char hdr[16];
  if (off > s->file_size || s->file_size - off < 16 ||
      cairn__ck_pread(s->fd, hdr, 16, off, s->path, "metadata") || memcmp(hdr, CK_TAG_META, 4) != 0)
    return 0;
  uint64_t size = ck_get64(hdr + 8);
  if (size < CK_META_FIXED || size > CK_DEF_MAX_META || size > s->file_size - off) return 0;
  unsigned char *blk = malloc((size_t)size);
  if (!blk) return 0;
  ck_meta *m = NULL;
  size_t n = 0;
  char *arena = NULL;
  int ok = cairn__ck_pread(s->fd, blk, (size_t)size, off, s->path, "metadata") == CAIRN_OK &&
           cairn__ck_parse_meta(s->path, off, blk, size, &m, &n, &arena) == CAIRN_OK;
  free(blk);
  if (!ok) return 0;
  free(s->meta);
  free(s->meta_arena);
  s->meta = m;
  s->nmeta = n;
  s->meta_arena = arena;
  return 1;
}

/* A valid record header of this file with a seq after the last one at off? */
static int try_rec(scan *s, uint64_t off, unsigned char *buf, ck_rec *r) {
  size_t got = read_upto(s, buf, CK_MAX_REC_HDR, off);
  return got && cairn__ck_parse_rec(s->path, off, buf, got, &s->sb, UINT64_MAX, r) == CAIRN_OK &&
         (int64_t)r->seq > s->last_seq;
}

/* After a structural failure: the next offset > from where a valid record
 * header or metadata block starts. 0: none (end of the walk). *is_meta says
 * which; a metadata block found is parsed and kept. */
static uint64_t resync(scan *s, uint64_t from, int *is_meta) {
  enum { WIN = 1 << 16 };
  unsigned char *win = malloc(WIN), hdr[CK_MAX_REC_HDR];
  if (!win) return 0;
  uint64_t at = from + 1, found = 0;
  while (!found && at + 4 <= s->data_end) {
    size_t got = read_upto(s, win, WIN, at);
    if (got < 4) break;
    for (size_t i = 0; i + 4 <= got && !found; i++) {
      if (win[i] != 'C' || win[i + 1] != 'R' || win[i + 2] != 'N') continue;
      ck_rec r;
      if (win[i + 3] == 'T' && try_rec(s, at + i, hdr, &r)) {
        found = at + i;
        *is_meta = 0;
      } else if (win[i + 3] == 'M' && try_meta(s, at + i)) {
        found = at + i;
        *is_meta = 1;
      }
    }
    at += got - 3; /* overlap: a tag may straddle two windows */
  }
  free(win);
  return found;
}

/* Checks the data and trailer of the record whose header r is at off.
 * Returns WALK_OK (record kept in *out), WALK_BAD (complete but invalid:
 * *next is after its trailer), WALK_RESYNC (structure broken at *next) or
 * WALK_END (cut by the end of the data region). */
static int walk_record(scan *s, uint64_t off, const ck_rec *r, rrec *out, uint64_t *next) {
  const uint32_t cb = s->sb.chunk_bytes;
  size_t es = cairn__ck_esize(r->dtype);
  uint64_t p = off + r->size;
  int bad = 0;
  uint32_t crc = 0;
  memset(out, 0, sizeof *out);
  if (r->layout == CK_LAYOUT_CHUNKED) {
    /* Each chunk takes at least 33 bytes: a table for more cannot be whole. */
    if (r->n_chunks > (s->data_end - p) / (CK_CHUNK_HDR + 1)) return WALK_END;
    if (r->n_chunks && !(out->chunks = malloc((size_t)r->n_chunks * sizeof *out->chunks))) return WALK_END;
    for (uint32_t k = 0; k < r->n_chunks; k++) {
      unsigned char h[CK_CHUNK_HDR];
      ck_chunk c;
      if (read_upto(s, h, CK_CHUNK_HDR, p) != CK_CHUNK_HDR) return WALK_END;
      uint32_t raw = ck_chunk_raw(r->raw_bytes, cb, k);
      if (cairn__ck_parse_chunk(s->path, p, h, &c) || c.seq != r->seq || c.chunk_no != k || c.raw != raw ||
          !cairn__ck_chunk_sizes_ok(c.codec, c.raw, c.stored)) {
        *next = p;
        return WALK_RESYNC;
      }
      if (c.stored > s->data_end - p - CK_CHUNK_HDR) return WALK_END;
      if (!bad) {
        if (read_upto(s, s->a, c.stored, p + CK_CHUNK_HDR) != c.stored) return WALK_END;
        /* byte planes: decoded into b, interleaved back into a (consumed) */
        unsigned char *d = ck_codec_planes(c.codec) ? s->a : s->b;
        if (cairn_crc32c(0, s->a, c.stored) != c.data_crc ||
            cairn__ck_decode(c.codec, es, s->a, c.stored, d, raw, s->b) != 0)
          bad = 1;
        else
          crc = cairn__crc32c_combine(crc, cairn_crc32c(0, d, raw), raw);
      }
      out->chunks[k] = (rchunk){.off = p + CK_CHUNK_HDR, .raw = raw, .stored = c.stored, .crc = c.data_crc,
                                .codec = c.codec};
      p += CK_CHUNK_HDR + c.stored;
    }
  } else {
    uint64_t a = s->sb.alignment, d = p + (a - p % a) % a;
    if (d > s->data_end || r->raw_bytes > s->data_end - d) return WALK_END;
    for (uint64_t q = p; q < d && !bad;) {
      size_t k = d - q < cb ? (size_t)(d - q) : cb;
      if (read_upto(s, s->a, k, q) != k) return WALK_END;
      bad = !ck_all_zero(s->a, k);
      q += k;
    }
    out->data_off = d;
    for (uint64_t q = 0; q < r->raw_bytes && !bad; q += cb) {
      uint32_t k = ck_chunk_raw(r->raw_bytes, cb, q / cb);
      if (read_upto(s, s->a, k, d + q) != k) return WALK_END;
      crc = cairn__crc32c_combine(crc, cairn_crc32c(0, s->a, k), k);
    }
    p = d + r->raw_bytes;
  }
  unsigned char t[CK_TRAILER];
  uint32_t tseq, tcrc;
  uint64_t traw;
  if (read_upto(s, t, CK_TRAILER, p) != CK_TRAILER) return WALK_END;
  if (cairn__ck_parse_trailer(s->path, p, t, &tseq, &traw, &tcrc) || tseq != r->seq || traw != r->raw_bytes) {
    *next = p;
    return WALK_RESYNC;
  }
  *next = p + CK_TRAILER;
  if (bad || tcrc != crc) return WALK_BAD;
  if (!(out->name = malloc(r->name_len + 1u))) return WALK_BAD;
  memcpy(out->name, r->name, r->name_len);
  out->name[r->name_len] = '\0';
  out->name_len = r->name_len;
  out->dtype = r->dtype;
  out->rank = r->rank;
  out->layout = r->layout;
  for (int i = 0; i < r->rank; i++) out->shape[i] = (int64_t)r->shape[i];
  out->raw_bytes = r->raw_bytes;
  out->n_chunks = r->n_chunks;
  out->raw_crc = crc;
  return WALK_OK;
}

static void free_rec(rrec *r) {
  free(r->name);
  free(r->chunks);
  memset(r, 0, sizeof *r);
}

static cairn_status keep(scan *s, rrec *r) {
  if (s->n == s->cap) {
    size_t ncap = s->cap ? s->cap * 2 : 16;
    rrec *nr = realloc(s->recs, ncap * sizeof *nr);
    if (!nr) {
      free_rec(r);
      return cairn__fail(CAIRN_E_NOMEM, "ckpt_recover: out of memory");
    }
    s->recs = nr;
    s->cap = ncap;
  }
  s->recs[s->n++] = *r;
  return CAIRN_OK;
}

/* Pass 1. Lost records are counted once each: a record whose header was
 * read and whose data or trailer failed; the records skipped over when the
 * walk resumes at a later seq (the gap in the numbering); a record cut
 * inside its header; and, at the end, a damaged record start not followed
 * by any valid record. */
static cairn_status walk(scan *s) {
  unsigned char hdr[CK_MAX_REC_HDR];
  uint64_t pos = CK_SUPER_SIZE;
  int unseen = 0; /* damage seen where a record should start, seq unknown */
  while (pos < s->data_end) {
    unsigned char tag[4];
    if (s->data_end - pos < 4 || read_upto(s, tag, 4, pos) != 4) break; /* not even a whole tag */
    if (memcmp(tag, CK_TAG_META, 4) == 0) {
      (void)try_meta(s, pos);
      break; /* the data region ends at the metadata block */
    }
    ck_rec r;
    cairn_status st = CAIRN_E_FORMAT;
    if (memcmp(tag, CK_TAG_REC, 4) == 0) {
      size_t got = read_upto(s, hdr, CK_MAX_REC_HDR, pos);
      st = got ? cairn__ck_parse_rec(s->path, pos, hdr, got, &s->sb, UINT64_MAX, &r) : CAIRN_E_TRUNCATED;
      if (st == CAIRN_E_TRUNCATED) {
        s->lost++; /* a record cut inside its header */
        unseen = 0;
        break;
      }
    }
    if (st || (int64_t)r.seq <= s->last_seq) {
      /* Not a valid next record where one should start: damage. */
      unseen = 1;
      int is_meta = 0;
      uint64_t nx = resync(s, pos, &is_meta);
      if (!nx || is_meta) break;
      pos = nx;
      continue;
    }
    s->lost += (size_t)((int64_t)r.seq - s->last_seq - 1);
    unseen = 0;
    s->last_seq = r.seq;
    uint64_t next = 0;
    rrec out = {0};
    int w = walk_record(s, pos, &r, &out, &next);
    if (w == WALK_OK) {
      cairn_status ks = keep(s, &out);
      if (ks) return ks;
      pos = next;
      continue;
    }
    free_rec(&out);
    s->lost++;
    if (w == WALK_END) break;
    if (w == WALK_BAD) {
      pos = next;
      continue;
    }
    int is_meta = 0;
    uint64_t nx = resync(s, next, &is_meta);
    if (!nx || is_meta) break;
    pos = nx;
  }
  s->lost += (size_t)unseen;
  return CAIRN_OK;
}

static int cmp_rec_ptr(const void *x, const void *y) {
  const rrec *a = *(const rrec *const *)x, *b = *(const rrec *const *)y;
  size_t n = a->name_len < b->name_len ? a->name_len : b->name_len;
  int c = memcmp(a->name, b->name, n);
  if (c) return c;
  if (a->name_len != b->name_len) return a->name_len < b->name_len ? -1 : 1;
  return a < b ? -1 : a > b; /* file order among equal names */
}

/* Same name twice (a damaged file only): the later record wins. */
static cairn_status dedupe(scan *s) {
  if (s->n < 2) return CAIRN_OK;
  rrec **ix = malloc(s->n * sizeof *ix);
  if (!ix) return cairn__fail(CAIRN_E_NOMEM, "ckpt_recover: out of memory");
  for (size_t i = 0; i < s->n; i++) ix[i] = &s->recs[i];
  qsort(ix, s->n, sizeof *ix, cmp_rec_ptr);
  for (size_t i = 0; i + 1 < s->n; i++) {
    if (ix[i]->name_len == ix[i + 1]->name_len && memcmp(ix[i]->name, ix[i + 1]->name, ix[i]->name_len) == 0) {
      ix[i]->dropped = 1;
      s->lost++;
    }
  }
  free(ix);
  return CAIRN_OK;
}

/* Pass 2: one record through the writer. */
static cairn_status copy_rec(scan *s, cairn_ckpt_writer *w, const rrec *r) {
  cairn_status st = cairn__ck_rec_begin(w, r->name, (cairn_dtype)r->dtype, r->rank, r->shape, r->layout);
  if (st) return st;
  if (r->layout == CK_LAYOUT_CHUNKED) {
    for (uint32_t k = 0; k < r->n_chunks && !st; k++) {
      const rchunk *c = &r->chunks[k];
      st = cairn__ck_pread(s->fd, s->a, c->stored, c->off, s->path, "chunk");
      if (!st) st = cairn__ck_rec_chunk(w, c->codec, c->raw, s->a, c->stored, c->crc);
    }
  } else {
    const uint32_t cb = s->sb.chunk_bytes;
    for (uint64_t q = 0; q < r->raw_bytes && !st; q += cb) {
      uint32_t k = ck_chunk_raw(r->raw_bytes, cb, q / cb);
      st = cairn__ck_pread(s->fd, s->a, k, r->data_off + q, s->path, "payload");
      if (!st) st = cairn__ck_rec_payload(w, s->a, k);
    }
  }
  if (!st) st = cairn__ck_rec_end(w, r->raw_crc);
  return st;
}

static cairn_status copy_meta(cairn_ckpt_writer *w, const ck_meta *m) {
  uint64_t v = m->num;
  switch (m->type) {
    case CAIRN_META_U64: return cairn_ckpt_writer_meta_u64(w, m->key, v);
    case CAIRN_META_I64: return cairn_ckpt_writer_meta_i64(w, m->key, (int64_t)v);
    case CAIRN_META_F64: {
      double d;
      memcpy(&d, &v, 8);
      return cairn_ckpt_writer_meta_f64(w, m->key, d);
    }
    case CAIRN_META_BOOL: return cairn_ckpt_writer_meta_bool(w, m->key, (int)v);
    case CAIRN_META_STR: return cairn_ckpt_writer_meta_str(w, m->key, m->ptr);
    case CAIRN_META_BYTES: return cairn_ckpt_writer_meta_bytes(w, m->key, m->ptr, m->len);
  }
  return cairn__fail(CAIRN_E_FORMAT, "ckpt_recover: metadata '%s' has unknown type %d", m->key, (int)m->type);
}

static cairn_status recover(scan *s, const char *out, size_t *recovered) {
  cairn_status st;
  s->fd = open(s->path, O_RDONLY | O_CLOEXEC);
  if (s->fd < 0) {
    int e = errno;
    return cairn__fail(CAIRN_E_IO, "ckpt_recover: cannot open '%s': %s", s->path, strerror(e));
  }
  struct stat sbuf;
  if (fstat(s->fd, &sbuf) != 0 || !S_ISREG(sbuf.st_mode))
    return cairn__fail(CAIRN_E_IO, "ckpt_recover: '%s' is not a readable regular file", s->path);
  uint64_t size = (uint64_t)sbuf.st_size;
  unsigned char buf[CK_SUPER_SIZE];
  size_t avail = size < CK_SUPER_SIZE ? (size_t)size : CK_SUPER_SIZE;
  if ((st = cairn__ck_pread(s->fd, buf, avail, 0, s->path, "superblock"))) return st;
  if ((st = cairn__ck_parse_super(s->path, buf, avail, CK_MAX_CHUNK, &s->sb))) {
    char m[400];
    snprintf(m, sizeof m, "%s", cairn_errmsg());
    return cairn__fail(st, "ckpt_recover: nothing to recover: %s", m);
  }
  /* A valid footer bounds the data region; otherwise it runs to the end. */
  s->data_end = s->file_size = size;
  int footer_ok = 0;
  if (size >= CK_SUPER_SIZE + CK_FOOTER_SIZE) {
    ck_footer ft;
    if (cairn__ck_pread(s->fd, buf, CK_FOOTER_SIZE, size - CK_FOOTER_SIZE, s->path, "footer") == CAIRN_OK &&
        cairn__ck_parse_footer(s->path, buf, size, &s->sb, &ft) == CAIRN_OK) {
      s->data_end = ft.meta_offset;
      footer_ok = 1;
    }
  }
  s->a = cairn_alloc(s->sb.chunk_bytes);
  s->b = cairn_alloc(s->sb.chunk_bytes);
  if (!s->a || !s->b) return cairn__fail(CAIRN_E_NOMEM, "ckpt_recover: out of memory for chunk buffers");
  s->last_seq = -1;
  if ((st = walk(s)) || (st = dedupe(s))) return st;
  if (footer_ok && !s->meta) (void)try_meta(s, s->data_end);
  cairn_ckpt_writer *w;
  if ((st = cairn__ck_writer_open_raw(out, s->sb.chunk_bytes, s->sb.alignment, 0, &w))) return st;
  size_t n = 0;
  for (size_t i = 0; i < s->n && !st; i++) {
    if (s->recs[i].dropped) continue;
    st = copy_rec(s, w, &s->recs[i]);
    n++;
  }
  for (size_t i = 0; i < s->nmeta && !st; i++) st = copy_meta(w, &s->meta[i]);
  if (st) {
    cairn_ckpt_writer_abort(w);
    return st;
  }
  if ((st = cairn_ckpt_writer_commit(w))) return st;
  *recovered = n;
  return CAIRN_OK;
}

cairn_status cairn_ckpt_recover(const char *in, const char *out, size_t *recovered, size_t *lost) {
  if (recovered) *recovered = 0;
  if (lost) *lost = 0;
  if (!in || !out) return cairn__fail(CAIRN_E_NULL, "ckpt_recover: %s path is NULL", in ? "output" : "input");
  if (ck_host_big_endian())
    return cairn__fail(CAIRN_E_UNSUPPORTED, "ckpt_recover: big-endian hosts are not supported");
  scan s = {.path = in, .fd = -1};
  size_t n = 0;
  cairn_status st = recover(&s, out, &n);
  if (s.fd >= 0) close(s.fd);
  for (size_t i = 0; i < s.n; i++) free_rec(&s.recs[i]);
  free(s.recs);
  free(s.meta);
  free(s.meta_arena);
  cairn_free(s.a);
  cairn_free(s.b);
  if (st) return st;
  if (recovered) *recovered = n;
  if (lost) *lost = s.lost;
  return CAIRN_OK;
}
