/* cairn's own format, reading (the backend's read members and its table,
 * ckpt_backend.h): decodes one tensor straight into the caller's buffer
 * (R19–R22 of doc/checkpoint-format.md), verifies a whole file (R20–R26),
 * and decodes a compact tensor's verify into staging that its read then
 * copies (cairn_ckpt_set_staging; the budget: ckpt_native_stage.c).
 * Opening and the index are ckpt_native_open.c; the write members are
 * cairn's writer (ckpt_write.c). */
#define _GNU_SOURCE 1
#include "ckpt_native_impl.h"
#include "test_seams.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef CAIRN_HAVE_OPENMP
#include <omp.h>
#endif

#include "cairn/runtime.h"

typedef unsigned long long ull;

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
  const ck_native *c;
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
  const ck_native *c = x->c;
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
static int scratch_for(ck_native *c, int nt, size_t bufsz) {
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

/* Staging of one tensor (cairn_ckpt_set_staging; ckpt_native_stage.c). */
typedef struct stage_io {
  unsigned char *to;         /* verify: decode the first len raw bytes here */
  const unsigned char *from; /* read: copy the first len raw bytes from here */
  uint64_t len;
} stage_io;

/* Decodes (dst) or checks (dst NULL) every chunk of e; R20–R22 (R24 with
 * headers). With fn (and dst NULL), hands each decoded piece to fn in
 * order, on the calling thread; fn's error stops the decode and is
 * returned. With sg, stages (verify) or copies staged bytes (read). */
static cairn_status decode_tensor_fn(ck_native *c, const ck_entry *e, unsigned char *dst, int headers,
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

static cairn_status decode_tensor(ck_native *c, const ck_entry *e, unsigned char *dst, int headers) {
  return decode_tensor_fn(c, e, dst, headers, NULL, NULL, NULL);
}

/* The verify of a tensor: decoded into staging when it has zstd chunks and
 * the budget allows (kept only if every check passed), else into scratch. */
static cairn_status verify_staged(ck_native *c, const ck_entry *e) {
  cairn__ck_unstage(c, e);
  stage_io sg = {0};
  sg.len = cairn__ck_stage_alloc(c, e, &sg.to);
  cairn_status s = decode_tensor_fn(c, e, NULL, 0, NULL, NULL, sg.to ? &sg : NULL);
  if (s || !sg.to) {
    cairn_free(sg.to);
    return s;
  }
  cairn__ck_stage_keep(c, e, sg.to, sg.len);
  return CAIRN_OK;
}

/* The read of a tensor: its staged bytes copied, the rest decoded; the
 * staging is released either way. */
static cairn_status read_staged(ck_native *c, const ck_entry *e, unsigned char *dst) {
  size_t i = (size_t)(e - c->v->ents);
  if (!c->stage || !c->stage[i]) return decode_tensor(c, e, dst, 0);
  stage_io sg = {.from = c->stage[i], .len = c->stage_len[i]};
  cairn_status s = decode_tensor_fn(c, e, dst, 0, NULL, NULL, &sg);
  cairn__ck_unstage(c, e);
  return s;
}

/* R23: the record header agrees with the index entry. */
static cairn_status check_record(const ck_native *c, const ck_entry *e) {
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
static cairn_status check_trailer(const ck_native *c, const ck_entry *e) {
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

/* R20–R26 over every record, in file order (sequential reads). */
static cairn_status native_verify(void *state, const ck_entry *ents, size_t n) {
  ck_native *c = state;
  size_t *order = malloc((n ? n : 1) * sizeof *order);
  if (!order) return cairn__fail(CAIRN_E_NOMEM, "ckpt_verify: out of memory");
  for (size_t i = 0; i < n; i++) order[ents[i].seq] = i;
  cairn_status s = CAIRN_OK;
  for (size_t q = 0; q < n && !s; q++) {
    const ck_entry *e = &ents[order[q]];
    s = check_record(c, e);
    if (!s) s = decode_tensor(c, e, NULL, 1);
    if (!s) s = check_trailer(c, e);
  }
  free(order);
  return s;
}

/* ---- the table ----------------------------------------------------------------------------- */

static cairn_status native_read(void *state, const ck_entry *e, unsigned char *dst) {
  return read_staged(state, e, dst);
}

static cairn_status native_read_pieces(void *state, const ck_entry *e, cairn_ckpt_piece_fn fn, void *user) {
  return decode_tensor_fn(state, e, NULL, 0, fn, user, NULL);
}

static cairn_status native_verify_tensor(void *state, const ck_entry *e) { return verify_staged(state, e); }

static unsigned native_codecs(void *state, const ck_entry *e) {
  (void)state;
  unsigned m = 0;
  if (!e->chunk_table) m = e->raw_bytes ? 1u << CK_CODEC_RAW : 0;
  for (uint32_t k = 0; e->chunk_table && k < e->n_chunks; k++) m |= 1u << (e->chunk_table[k * CK_ICHUNK] & 31);
  return m;
}

/* The write members: cairn's writer (ckpt_write.c). */
static cairn_status native_wopen(const char *path, const cairn_ckpt_write_options *o, void **w) {
  return cairn_ckpt_writer_open(path, o, (cairn_ckpt_writer **)w);
}
static cairn_status native_wmeta(void *w, const char *key, const char *value) {
  return cairn_ckpt_writer_meta_str(w, key, value);
}
CK_WRITE_ADAPTERS(native, cairn_ckpt_writer, cairn_ckpt_writer_add, cairn_ckpt_writer_commit, cairn_ckpt_writer_abort)

const ck_backend cairn__ck_native = {
    .name = "cairn", .open = cairn__ck_native_open, .read = native_read, .read_pieces = native_read_pieces,
    .verify_tensor = native_verify_tensor, .verify = native_verify, .codecs = native_codecs,
    .set_staging = cairn__ck_native_set_staging, .close = cairn__ck_native_close,
    .wopen = native_wopen, .wadd = native_wadd, .wmeta_str = native_wmeta, .wcommit = native_wcommit,
    .wabort = native_wabort};
