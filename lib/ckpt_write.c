/* Checkpoint writer: streams records into "<path>.tmp.XXXXXX", then writes
 * metadata, index and footer and commits with fsync + rename + fsync(dir).
 * Format: doc/checkpoint-format.md.
 *
 * Pipeline of cairn_ckpt_writer_add: the tensor is cut into pieces (chunks,
 * or payload pieces of a raw-layout record); a batch of up to one piece per
 * thread is compressed and checksummed (in parallel with OpenMP once chunks
 * turn out to compress: see writer_add), then the batch is written in order
 * with one writev through the output queue (ckpt_write_queue.c). Large raw pieces are written straight
 * from the tensor's memory (no copy); small pieces and all headers are
 * copied into a staging buffer first and checksummed there, so that many
 * small tensors make few system calls. Either way a CRC is computed over
 * exactly the bytes handed to the kernel, from memory that does not change
 * during the call. */
#define _GNU_SOURCE 1 /* getrandom */
#include "ckpt_write_impl.h"
#include "kernels/kernels.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <lz4.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/random.h>
#endif

#ifdef CAIRN_HAVE_OPENMP
#include <omp.h>
#endif

#include "cairn/runtime.h"

/* ---- randomness for the file id and the temporary name ------------------------- */

static void random_bytes(unsigned char *buf, size_t n) {
  size_t got = 0;
#if defined(__linux__)
  while (got < n) {
    ssize_t k = getrandom(buf + got, n - got, GRND_NONBLOCK);
    if (k <= 0) break;
    got += (size_t)k;
  }
#endif
  if (got == n) return;
  /* Fallback: splitmix64 over time, pid, address and a counter. */
  static _Atomic uint64_t counter;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ((uint64_t)getpid() << 17) ^
               (uint64_t)(uintptr_t)buf ^ (++counter * 0x9e3779b97f4a7c15ull);
  for (; got < n; got++) {
    x += 0x9e3779b97f4a7c15ull;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    buf[got] = (unsigned char)(z ^ (z >> 31));
  }
}

/* ---- validation helpers ------------------------------------------------------- */

static uint64_t hash_name(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  return h;
}

static ck_entry *find_name(const cairn_ckpt_writer *w, const char *name, size_t len, size_t *slot) {
  if (!w->hcap) return NULL;
  size_t i = (size_t)hash_name(name, len) & (w->hcap - 1);
  while (w->hash[i]) {
    ck_entry *e = &w->ents[w->hash[i] - 1];
    if (e->name_len == len && memcmp(e->name, name, len) == 0) return e;
    i = (i + 1) & (w->hcap - 1);
  }
  if (slot) *slot = i;
  return NULL;
}

static cairn_status grow_hash(cairn_ckpt_writer *w) {
  if ((w->n + 1) * 2 <= w->hcap) return CAIRN_OK;
  size_t ncap = w->hcap ? w->hcap * 2 : 64;
  uint32_t *h = calloc(ncap, sizeof *h);
  if (!h) return cairn__fail(CAIRN_E_NOMEM, "ckpt_writer: out of memory for the name table");
  for (size_t k = 0; k < w->n; k++) {
    size_t i = (size_t)hash_name(w->ents[k].name, w->ents[k].name_len) & (ncap - 1);
    while (h[i]) i = (i + 1) & (ncap - 1);
    h[i] = (uint32_t)(k + 1);
  }
  free(w->hash);
  w->hash = h;
  w->hcap = ncap;
  return CAIRN_OK;
}

static cairn_status check_name(const char *fn, const char *name, size_t *len) {
  if (!name) return cairn__fail(CAIRN_E_NULL, "%s: name is NULL", fn);
  size_t n = strnlen(name, CK_MAX_NAME + 1);
  if (n == 0) return cairn__fail(CAIRN_E_INVALID, "%s: empty tensor name", fn);
  char sb[80];
  if (n > CK_MAX_NAME)
    return cairn__fail(CAIRN_E_INVALID, "%s: tensor name '%s' is longer than %u bytes", fn,
                       cairn__ck_short(name, 40, sb, sizeof sb), CK_MAX_NAME);
  if (!cairn__ck_name_ok((const unsigned char *)name, n))
    return cairn__fail(CAIRN_E_INVALID,
                       "%s: tensor name of %zu bytes is not UTF-8 without control characters", fn, n);
  *len = n;
  return CAIRN_OK;
}

/* ---- open ------------------------------------------------------------------------ */

/* Format 1.0 unless the file needs codec 3 (1.1, CK_FEAT_ZSTD): writers
 * write the oldest version that can represent the data. */
static int file_minor(uint32_t required) { return required & CK_FEAT_ZSTD ? 1 : 0; }

static void fill_super(unsigned char *sb, const cairn_ckpt_writer *w, uint32_t required) {
  memset(sb, 0, CK_SUPER_SIZE);
  memcpy(sb, CK_MAGIC, 8);
  ck_put16(sb + 8, CAIRN_CKPT_VERSION_MAJOR);
  ck_put16(sb + 10, (uint16_t)file_minor(required));
  ck_put32(sb + 12, CK_BOM);
  ck_put32(sb + 16, required);
  ck_put32(sb + 24, w->alignment);
  ck_put32(sb + 28, w->chunk_bytes);
  memcpy(sb + 32, w->file_id, 16);
  ck_put32(sb + 60, ck_crc_masked(sb, 60));
}

static cairn_status writer_new(const char *path, uint32_t chunk_bytes, uint32_t alignment, uint64_t raw_min,
                               cairn_ckpt_compress compress, int no_fsync, cairn_ckpt_writer **out) {
  if (ck_host_big_endian())
    return cairn__fail(CAIRN_E_UNSUPPORTED, "ckpt_writer: '%s': big-endian hosts are not supported", path);
  cairn_ckpt_writer *w = calloc(1, sizeof *w);
  if (!w) return cairn__fail(CAIRN_E_NOMEM, "ckpt_writer: out of memory");
  w->fd = -1;
  w->chunk_bytes = chunk_bytes;
  w->alignment = alignment;
  w->raw_min = raw_min;
  w->compress = compress;
  w->no_fsync = no_fsync;
  size_t plen = strlen(path);
  w->path = malloc(plen + 1);
  w->tmp = malloc(plen + 12);
  w->stage = malloc(STAGE_CAP);
  if (!w->path || !w->tmp || !w->stage) {
    cairn_ckpt_writer_abort(w);
    return cairn__fail(CAIRN_E_NOMEM, "ckpt_writer: out of memory");
  }
  memcpy(w->path, path, plen + 1);
  random_bytes(w->file_id, sizeof w->file_id);
  /* Like mkstemp, but mode 0666 & ~umask: a checkpoint should get the same
   * permissions as any other file the user creates. */
  static const char alnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  int err = EEXIST;
  for (int attempt = 0; attempt < 100 && err == EEXIST; attempt++) {
    unsigned char r[6];
    random_bytes(r, sizeof r);
    memcpy(w->tmp, path, plen);
    memcpy(w->tmp + plen, ".tmp.", 5);
    for (int i = 0; i < 6; i++) w->tmp[plen + 5 + i] = alnum[r[i] % 62];
    w->tmp[plen + 11] = '\0';
    w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    err = w->fd < 0 ? errno : 0;
  }
  if (w->fd < 0) {
    cairn_status s = cairn__fail(cairn__ckw_io_status(err), "ckpt_writer: cannot create '%s' (for '%s'): %s", w->tmp, path,
                                 strerror(err));
    free(w->tmp); /* never created: nothing to unlink */
    w->tmp = NULL;
    cairn_ckpt_writer_abort(w);
    return s;
  }
  int nslots = 1;
#ifdef CAIRN_HAVE_OPENMP
  nslots = cairn_get_num_threads();
#endif
  w->nslots = nslots < 1 ? 1 : nslots > MAX_SLOTS ? MAX_SLOTS : nslots;
  w->cbuf = calloc((size_t)w->nslots, sizeof *w->cbuf);
  w->sbuf = calloc((size_t)w->nslots, sizeof *w->sbuf);
  w->pieces = calloc((size_t)w->nslots, sizeof *w->pieces);
  w->zctx = calloc((size_t)w->nslots, sizeof *w->zctx);
  if (!w->cbuf || !w->sbuf || !w->pieces || !w->zctx) {
    cairn_ckpt_writer_abort(w);
    return cairn__fail(CAIRN_E_NOMEM, "ckpt_writer: out of memory");
  }
  /* Superblock. A compact writer declares codec 3 from the start, so even
   * the temporary file of a save that never finishes tells an older reader
   * (and salvage) what it needs; commit rewrites it if no chunk used it. */
  w->sb_required = compress == CAIRN_CKPT_COMPRESS_COMPACT ? CK_FEAT_ZSTD : 0;
  unsigned char sb[CK_SUPER_SIZE];
  fill_super(sb, w, w->sb_required);
  cairn_status s = cairn__ckw_put_copy(w, sb, sizeof sb);
  if (s) {
    cairn_ckpt_writer_abort(w);
    return s;
  }
  *out = w;
  return CAIRN_OK;
}

CAIRN__OPTIONS_DEFAULT(cairn_ckpt_write_options)

cairn_status cairn_ckpt_writer_open(const char *path, const cairn_ckpt_write_options *opts,
                                    cairn_ckpt_writer **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "ckpt_writer_open: out is NULL");
  *out = NULL;
  if (!path) return cairn__fail(CAIRN_E_NULL, "ckpt_writer_open: path is NULL");
  if (!*path) return cairn__fail(CAIRN_E_INVALID, "ckpt_writer_open: path is empty");
  cairn_ckpt_write_options o = {0};
  if (opts) o = *opts;
  uint32_t cb = o.chunk_bytes ? o.chunk_bytes : CK_DEFAULT_CHUNK;
  uint32_t al = o.alignment ? o.alignment : CK_DEFAULT_ALIGN;
  if (cb % 8 || cb < CK_MIN_CHUNK || cb > CK_MAX_CHUNK)
    return cairn__fail(CAIRN_E_INVALID, "ckpt_writer_open: chunk_bytes %u is not a multiple of 8 in [%u, %u]", cb,
                       CK_MIN_CHUNK, CK_MAX_CHUNK);
  if ((al & (al - 1)) || al > CK_MAX_ALIGN)
    return cairn__fail(CAIRN_E_INVALID, "ckpt_writer_open: alignment %u is not a power of two in [1, %u]", al,
                       CK_MAX_ALIGN);
  if ((unsigned)o.compress > CAIRN_CKPT_COMPRESS_COMPACT)
    return cairn__fail(CAIRN_E_INVALID, "ckpt_writer_open: unknown compress mode %d", (int)o.compress);
  return writer_new(path, cb, al, o.raw_layout_min_bytes, o.compress, o.no_fsync != 0, out);
}

cairn_status cairn__ck_writer_open_raw(const char *path, uint32_t chunk_bytes, uint32_t alignment, int no_fsync,
                                       cairn_ckpt_writer **out) {
  *out = NULL;
  return writer_new(path, chunk_bytes, alignment, 0, CAIRN_CKPT_COMPRESS_NONE, no_fsync, out);
}

/* ---- records -------------------------------------------------------------------- */

static cairn_status alloc_slots(cairn_ckpt_writer *w) {
  size_t cap = w->chunk_bytes;
  int shuffle = w->compress == CAIRN_CKPT_COMPRESS_SHUFFLE || w->compress == CAIRN_CKPT_COMPRESS_COMPACT;
  for (int i = 0; i < w->nslots; i++) {
    if (w->compress == CAIRN_CKPT_COMPRESS_COMPACT && !w->zctx[i] && !(w->zctx[i] = cairn__ck_zstd_cctx_new()))
      return cairn__fail(CAIRN_E_NOMEM, "ckpt_writer: cannot allocate a zstd compression context");
    if (!w->cbuf[i] && !(w->cbuf[i] = cairn_alloc(cap)))
      return cairn__fail(CAIRN_E_NOMEM, "ckpt_writer: cannot allocate %zu bytes of chunk buffers", cap);
    if (shuffle && !w->sbuf[i] && !(w->sbuf[i] = cairn_alloc(cap)))
      return cairn__fail(CAIRN_E_NOMEM, "ckpt_writer: cannot allocate %zu bytes of chunk buffers", cap);
  }
  return CAIRN_OK;
}

/* Validates and registers a new record, writes its header (and the padding
 * of a raw layout). */
static cairn_status begin_record(cairn_ckpt_writer *w, const char *fn, const char *name, cairn_dtype dt, int rank,
                                 const int64_t *shape, int layout, ck_entry **out) {
  size_t nlen = 0;
  cairn_status s = check_name(fn, name, &nlen);
  if (s) return s;
  size_t es = cairn_dtype_size(dt);
  if (!es) return cairn__fail(CAIRN_E_INVALID, "%s: '%s': unknown dtype %d", fn, name, (int)dt);
  if (rank < 0 || rank > CAIRN_MAX_RANK)
    return cairn__fail(CAIRN_E_INVALID, "%s: '%s': rank %d is outside 0..%d", fn, name, rank, CAIRN_MAX_RANK);
  uint64_t count = 1;
  for (int i = 0; i < rank; i++) {
    if (shape[i] < 0)
      return cairn__fail(CAIRN_E_INVALID, "%s: '%s': dimension %d is negative (%lld)", fn, name, i,
                         (long long)shape[i]);
    if ((uint64_t)shape[i] >= CK_MAX_DIM)
      return cairn__fail(CAIRN_E_LIMIT, "%s: '%s': dimension %d (%lld) is 2^62 or more", fn, name, i,
                         (long long)shape[i]);
    if (__builtin_mul_overflow(count, (uint64_t)shape[i], &count))
      return cairn__fail(CAIRN_E_LIMIT, "%s: '%s': element count overflows", fn, name);
  }
  uint64_t raw;
  if (__builtin_mul_overflow(count, (uint64_t)es, &raw) || raw > (uint64_t)SIZE_MAX / 2)
    return cairn__fail(CAIRN_E_LIMIT, "%s: '%s': byte size overflows", fn, name);
  uint64_t nch = layout == CK_LAYOUT_RAW ? 0 : cairn__ck_nchunks(raw, w->chunk_bytes);
  if (nch > UINT32_MAX)
    return cairn__fail(CAIRN_E_LIMIT, "%s: '%s': %llu bytes need more than 2^32 chunks of %u bytes", fn, name,
                       (unsigned long long)raw, w->chunk_bytes);
  if (w->n >= UINT32_MAX) return cairn__fail(CAIRN_E_LIMIT, "%s: more than 2^32-1 tensors", fn);
  size_t slot = 0;
  if ((s = grow_hash(w))) return s;
  if (find_name(w, name, nlen, &slot))
    return cairn__fail(CAIRN_E_EXISTS, "%s: '%s': a tensor of that name is already in '%s'", fn, name, w->path);
  if (w->n == w->cap) {
    size_t ncap = w->cap ? w->cap * 2 : 16;
    ck_entry *ne = realloc(w->ents, ncap * sizeof *ne);
    if (!ne) return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory for the index", fn);
    w->ents = ne;
    w->cap = ncap;
  }
  ck_entry *e = &w->ents[w->n];
  memset(e, 0, sizeof *e);
  e->name = malloc(nlen + 1);
  e->chunks = nch ? malloc(nch * sizeof *e->chunks) : NULL;
  if (!e->name || (nch && !e->chunks)) {
    free(e->name);
    free(e->chunks);
    return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory for the index", fn);
  }
  memcpy(e->name, name, nlen + 1);
  e->name_len = (uint16_t)nlen;
  e->dtype = (uint8_t)dt;
  e->rank = (uint8_t)rank;
  e->layout = (uint8_t)layout;
  e->seq = (uint32_t)w->n;
  e->n_chunks = (uint32_t)nch;
  for (int i = 0; i < rank; i++) e->shape[i] = (uint64_t)shape[i];
  e->raw_bytes = raw;
  e->record_offset = w->off;
  /* Header. */
  size_t hsize = CK_REC_FIXED + 8u * (size_t)rank + nlen;
  unsigned char *h;
  if ((s = cairn__ckw_reserve(w, hsize, &h))) {
    free(e->name);
    free(e->chunks);
    return s;
  }
  memset(h, 0, hsize);
  memcpy(h, CK_TAG_REC, 4);
  ck_put32(h + 4, e->seq);
  memcpy(h + 8, w->file_id, 16);
  ck_put16(h + 24, (uint16_t)nlen);
  h[26] = e->dtype;
  h[27] = e->rank;
  h[28] = e->layout;
  ck_put32(h + 32, e->n_chunks);
  ck_put64(h + 40, raw);
  for (int i = 0; i < rank; i++) ck_put64(h + 48 + 8 * i, e->shape[i]);
  memcpy(h + 48 + 8 * rank, name, nlen);
  ck_put32(h + hsize - 4, ck_crc_masked(h, hsize - 4));
  w->hash[slot] = (uint32_t)(w->n + 1);
  w->n++;
  if (layout == CK_LAYOUT_RAW) {
    uint64_t a = w->alignment, pad = (a - w->off % a) % a;
    if ((s = cairn__ckw_put_zeros(w, (size_t)pad))) return cairn__ckw_set_failed(w, s);
  }
  e->data_offset = w->off;
  *out = e;
  return CAIRN_OK;
}

static cairn_status end_record(cairn_ckpt_writer *w, ck_entry *e) {
  unsigned char *t;
  cairn_status s = cairn__ckw_reserve(w, CK_TRAILER, &t);
  if (s) return cairn__ckw_set_failed(w, s);
  memcpy(t, CK_TAG_TRAILER, 4);
  ck_put32(t + 4, e->seq);
  ck_put64(t + 8, e->raw_bytes);
  ck_put32(t + 16, ck_mask(e->raw_crc));
  ck_put32(t + 20, ck_crc_masked(t, 20));
  return CAIRN_OK;
}

/* Keeps LZ4 output only when it saves at least 1/64: the largest stored
 * size accepted. */
static inline int lz4_cap(uint32_t raw) { return (int)(raw - (raw / 64 ? raw / 64 : 1)); }

/* Parallel part: decides the codec and computes the CRCs of one piece. */
static void encode_piece(const cairn_ckpt_writer *w, int slot, piece *p, size_t es, int try_compress) {
  p->codec = CK_CODEC_RAW;
  p->stored = p->raw;
  p->out = p->src;
  if (try_compress && p->raw >= MIN_COMPRESS) {
    const unsigned char *in = p->src;
    uint8_t codec = CK_CODEC_LZ4;
    if (w->compress == CAIRN_CKPT_COMPRESS_COMPACT) {
      /* Byte planes for every dtype (for 1-byte ones the planes are the
       * bytes): zstd's entropy stage is what finds the few bits of the
       * sign+exponent plane that LZ4's matches cannot. */
      if (es > 1) {
        cairn__kernels()->shuffle(w->sbuf[slot], p->src, p->raw / es, es);
        in = w->sbuf[slot];
      }
      size_t n = cairn__ck_zstd_encode(w->zctx[slot], w->cbuf[slot], (size_t)lz4_cap(p->raw), in, p->raw, es);
      if (n > 0) {
        p->codec = CK_CODEC_SHUF_ZSTD;
        p->stored = (uint32_t)n;
        p->out = w->cbuf[slot];
      }
      goto crcs;
    }
    if (w->compress == CAIRN_CKPT_COMPRESS_SHUFFLE && es > 1) {
      cairn__kernels()->shuffle(w->sbuf[slot], p->src, p->raw / es, es);
      in = w->sbuf[slot];
      codec = CK_CODEC_SHUF_LZ4;
    }
    int n = LZ4_compress_default((const char *)in, (char *)w->cbuf[slot], (int)p->raw, lz4_cap(p->raw));
    if (n > 0) {
      p->codec = codec;
      p->stored = (uint32_t)n;
      p->out = w->cbuf[slot];
    }
  }
crcs:
  if (p->codec != CK_CODEC_RAW) {
    p->data_crc = cairn_crc32c(0, p->out, p->stored);
    p->raw_crc = cairn_crc32c(0, p->src, p->raw);
    p->crc_done = 1;
  } else if (p->raw > SMALL_PIECE) {
    p->data_crc = p->raw_crc = cairn_crc32c(0, p->src, p->raw);
    p->crc_done = 1;
  } else {
    p->crc_done = 0;
  }
}

static void fill_chunk_hdr(unsigned char *h, const ck_entry *e, uint32_t chunk_no, const piece *p) {
  memcpy(h, CK_TAG_CHUNK, 4);
  ck_put32(h + 4, e->seq);
  ck_put32(h + 8, chunk_no);
  h[12] = p->codec;
  h[13] = h[14] = h[15] = 0;
  ck_put32(h + 16, p->raw);
  ck_put32(h + 20, p->stored);
  ck_put32(h + 24, ck_mask(p->data_crc));
  ck_put32(h + 28, ck_crc_masked(h, 28));
}

/* Serial part: writes one encoded piece (with a chunk header if chunked).
 * A reserved staging region is always filled before the next call that may
 * flush. */
static cairn_status emit_piece(cairn_ckpt_writer *w, ck_entry *e, uint32_t chunk_no, piece *p) {
  cairn_status s;
  int chunked = e->layout == CK_LAYOUT_CHUNKED;
  size_t hdr = chunked ? CK_CHUNK_HDR : 0;
  unsigned char *h;
  if (p->stored <= SMALL_PIECE) {
    if ((s = cairn__ckw_reserve(w, hdr + p->stored, &h))) return s;
    memcpy(h + hdr, p->out, p->stored);
    if (!p->crc_done) p->data_crc = p->raw_crc = cairn_crc32c(0, h + hdr, p->stored);
    if (chunked) fill_chunk_hdr(h, e, chunk_no, p);
  } else {
    if (chunked) {
      if ((s = cairn__ckw_reserve(w, hdr, &h))) return s;
      fill_chunk_hdr(h, e, chunk_no, p);
    }
    if ((s = cairn__ckw_put_ext(w, p->out, p->stored))) return s;
  }
  if (p->codec == CK_CODEC_SHUF_ZSTD) w->used_zstd = 1;
  if (chunked) {
    ck_chunk_ent *c = &e->chunks[chunk_no];
    c->codec = p->codec;
    c->raw = p->raw;
    c->stored = p->stored;
    c->crc = p->data_crc;
  }
  e->stored_bytes += p->stored;
  e->raw_crc = cairn__crc32c_combine(e->raw_crc, p->raw_crc, p->raw);
  return CAIRN_OK;
}

/* want_par: the caller expects expensive compression (see writer_add). */
static void encode_batch(cairn_ckpt_writer *w, int nb, size_t es, int try_compress, int want_par) {
  uint64_t bytes = 0;
  for (int i = 0; i < nb; i++) bytes += w->pieces[i].raw;
  int par = want_par && nb > 1 && bytes >= CK_PAR_MIN_BYTES;
  (void)par; /* serial builds ignore the pragma */
#pragma omp parallel for schedule(static, 1) num_threads(nb) if (par)
  for (int i = 0; i < nb; i++) encode_piece(w, i, &w->pieces[i], es, try_compress);
}

/* Would LZ4 save at least 1/64 on this part of the tensor? (raw-layout probe) */
static int compresses(cairn_ckpt_writer *w, const unsigned char *src, uint32_t raw, size_t es) {
  piece p = {.src = src, .raw = raw};
  encode_piece(w, 0, &p, es, 1);
  return p.codec != CK_CODEC_RAW;
}

cairn_status cairn_ckpt_writer_add(cairn_ckpt_writer *w, const char *name, const cairn_tensor *t) {
  cairn_status s = cairn__ckw_check_usable(w, "ckpt_writer_add");
  if (s) return s;
  if (w->cur) return cairn__fail(CAIRN_E_STATE, "ckpt_writer_add: a record is in progress");
  if (!t) return cairn__fail(CAIRN_E_NULL, "ckpt_writer_add: tensor is NULL");
  size_t es = cairn_dtype_size(t->dtype);
  int try_compress = w->compress != CAIRN_CKPT_COMPRESS_NONE;
  uint64_t raw = 0;
  if (es && t->rank >= 0 && t->rank <= CAIRN_MAX_RANK) {
    raw = es;
    for (int i = 0; i < t->rank; i++)
      if (t->shape[i] < 0 || __builtin_mul_overflow(raw, (uint64_t)t->shape[i], &raw)) raw = 0;
  }
  if (raw && !t->data) return cairn__fail(CAIRN_E_NULL, "ckpt_writer_add: '%s': tensor data is NULL", name ? name : "");
  if (try_compress && raw >= MIN_COMPRESS && (s = alloc_slots(w)))
    return s;
  /* Layout: raw for big tensors that do not compress (probe first, middle
   * and last chunk). */
  int layout = CK_LAYOUT_CHUNKED;
  if (w->raw_min && raw >= w->raw_min && raw > 0) {
    layout = CK_LAYOUT_RAW;
    if (try_compress) {
      uint64_t nch = cairn__ck_nchunks(raw, w->chunk_bytes);
      uint64_t probe[3] = {0, nch / 2, nch - 1};
      for (int k = 0; k < 3 && layout == CK_LAYOUT_RAW; k++)
        if (compresses(w, (const unsigned char *)t->data + probe[k] * w->chunk_bytes,
                       ck_chunk_raw(raw, w->chunk_bytes, probe[k]), es))
          layout = CK_LAYOUT_CHUNKED;
    }
  }
  ck_entry *e;
  if ((s = begin_record(w, "ckpt_writer_add", name, t->dtype, t->rank, t->shape, layout, &e))) return s;
  /* Pieces: chunks, or chunk-sized parts of a raw payload. */
  const unsigned char *data = t->data;
  uint64_t npieces = cairn__ck_nchunks(raw, w->chunk_bytes);
  int comp = try_compress && layout == CK_LAYOUT_CHUNKED;
  /* Threads only where compression does real work. Chunks that do not
   * compress (dense floats: LZ4 gives up at ~20 GB/s, CRC runs at ~10-28
   * GB/s) are cheaper on this thread: OpenMP workers left spinning while
   * this thread is in write() would take the CPU that the kernel needs to
   * push the pages to disk. Whether a batch runs in parallel never changes
   * the bytes written. */
  int expensive = w->compress == CAIRN_CKPT_COMPRESS_SHUFFLE || w->compress == CAIRN_CKPT_COMPRESS_COMPACT;
  int want_par = comp && expensive;
  for (uint64_t k0 = 0; k0 < npieces; k0 += (uint64_t)w->nslots) {
    int nb = (int)(npieces - k0 < (uint64_t)w->nslots ? npieces - k0 : (uint64_t)w->nslots);
    for (int i = 0; i < nb; i++) {
      w->pieces[i].src = data + (k0 + (uint64_t)i) * w->chunk_bytes;
      w->pieces[i].raw = ck_chunk_raw(raw, w->chunk_bytes, k0 + (uint64_t)i);
    }
    encode_batch(w, nb, es, comp, want_par);
    int any_compressed = 0;
    for (int i = 0; i < nb; i++) any_compressed |= w->pieces[i].codec != CK_CODEC_RAW;
    want_par = comp && (expensive || any_compressed);
    for (int i = 0; i < nb; i++)
      if ((s = emit_piece(w, e, (uint32_t)(k0 + (uint64_t)i), &w->pieces[i]))) return cairn__ckw_set_failed(w, s);
    /* Slot buffers and the tensor are reused or may change after this. */
    if (w->n_ext && (s = cairn__ckw_flush(w))) return s;
  }
  if ((s = end_record(w, e))) return s;
  if (w->n_ext && (s = cairn__ckw_flush(w))) return s;
  return CAIRN_OK;
}

/* ---- tensors piece by piece (callers that stream, e.g. an npz import) ----------------- */

/* The piecewise record is always chunked: its bytes are not all in memory,
 * so the raw layout's probe of three chunks cannot run before the header is
 * written. Each full chunk is encoded (LZ4 when it pays, as in writer_add)
 * and written before the next one is gathered, so memory is one chunk
 * buffer plus the slot buffers, whatever the tensor's size. */
cairn_status cairn_ckpt_writer_begin(cairn_ckpt_writer *w, const char *name, cairn_dtype dtype, int rank,
                                     const int64_t *shape) {
  cairn_status s = cairn__ckw_check_usable(w, "ckpt_writer_begin");
  if (s) return s;
  if (w->cur) return cairn__fail(CAIRN_E_STATE, "ckpt_writer_begin: a record is in progress ('%s')", w->cur->name);
  if (rank > 0 && !shape) return cairn__fail(CAIRN_E_NULL, "ckpt_writer_begin: '%s': shape is NULL", name ? name : "");
  int try_compress = w->compress != CAIRN_CKPT_COMPRESS_NONE;
  if (try_compress && (s = alloc_slots(w))) return s;
  if (!w->pbuf && !(w->pbuf = cairn_alloc(w->chunk_bytes)))
    return cairn__fail(CAIRN_E_NOMEM, "ckpt_writer_begin: cannot allocate a chunk buffer of %u bytes", w->chunk_bytes);
  ck_entry *e;
  if ((s = begin_record(w, "ckpt_writer_begin", name, dtype, rank, shape, CK_LAYOUT_CHUNKED, &e))) return s;
  w->cur = e;
  w->cur_stream = 1;
  w->cur_chunk = 0;
  w->cur_done = 0;
  w->pbuf_len = 0;
  return CAIRN_OK;
}

/* Encodes and writes the gathered chunk (pbuf_len bytes). */
static cairn_status stream_emit(cairn_ckpt_writer *w) {
  ck_entry *e = w->cur;
  piece *p = &w->pieces[0];
  memset(p, 0, sizeof *p);
  p->src = w->pbuf;
  p->raw = w->pbuf_len;
  encode_piece(w, 0, p, cairn_dtype_size((cairn_dtype)e->dtype), w->compress != CAIRN_CKPT_COMPRESS_NONE);
  cairn_status s = emit_piece(w, e, w->cur_chunk, p);
  /* pbuf and the slot buffer are reused for the next chunk. */
  if (!s && w->n_ext) s = cairn__ckw_flush(w);
  if (s) return cairn__ckw_set_failed(w, s);
  w->cur_chunk++;
  w->pbuf_len = 0;
  return CAIRN_OK;
}

cairn_status cairn_ckpt_writer_append(cairn_ckpt_writer *w, const void *data, size_t len) {
  cairn_status s = cairn__ckw_check_usable(w, "ckpt_writer_append");
  if (s) return s;
  if (!w->cur || !w->cur_stream)
    return cairn__fail(CAIRN_E_STATE, "ckpt_writer_append: no tensor begun with cairn_ckpt_writer_begin");
  ck_entry *e = w->cur;
  if (len == 0) return CAIRN_OK;
  if (!data) return cairn__fail(CAIRN_E_NULL, "ckpt_writer_append: '%s': data is NULL", e->name);
  if (len > e->raw_bytes - w->cur_done)
    return cairn__ckw_set_failed(
        w, cairn__fail(CAIRN_E_SHAPE,
                       "ckpt_writer_append: tensor '%s': %llu bytes appended, more than the %llu its dtype and shape "
                       "need (the tensor is not written; abort the writer)",
                       e->name, (unsigned long long)(w->cur_done + len), (unsigned long long)e->raw_bytes));
  const unsigned char *p = data;
  while (len > 0) {
    uint32_t want = ck_chunk_raw(e->raw_bytes, w->chunk_bytes, w->cur_chunk) - w->pbuf_len;
    size_t n = len < want ? len : want;
    memcpy(w->pbuf + w->pbuf_len, p, n);
    w->pbuf_len += (uint32_t)n;
    w->cur_done += n;
    p += n;
    len -= n;
    if (w->pbuf_len == ck_chunk_raw(e->raw_bytes, w->chunk_bytes, w->cur_chunk) && (s = stream_emit(w))) return s;
  }
  return CAIRN_OK;
}

cairn_status cairn_ckpt_writer_end(cairn_ckpt_writer *w) {
  cairn_status s = cairn__ckw_check_usable(w, "ckpt_writer_end");
  if (s) return s;
  if (!w->cur || !w->cur_stream)
    return cairn__fail(CAIRN_E_STATE, "ckpt_writer_end: no tensor begun with cairn_ckpt_writer_begin");
  ck_entry *e = w->cur;
  if (w->cur_done != e->raw_bytes)
    return cairn__ckw_set_failed(
        w, cairn__fail(CAIRN_E_SHAPE,
                       "ckpt_writer_end: tensor '%s': %llu bytes appended, but its dtype and shape need %llu (the "
                       "tensor is not written; abort the writer)",
                       e->name, (unsigned long long)w->cur_done, (unsigned long long)e->raw_bytes));
  w->cur = NULL;
  w->cur_stream = 0;
  if ((s = end_record(w, e))) return s;
  if (w->n_ext && (s = cairn__ckw_flush(w))) return s;
  return CAIRN_OK;
}

/* ---- records piece by piece (salvage) --------------------------------------------- */

cairn_status cairn__ck_rec_begin(cairn_ckpt_writer *w, const char *name, cairn_dtype dt, int rank,
                                 const int64_t *shape, int layout) {
  cairn_status s = cairn__ckw_check_usable(w, "ckpt_writer");
  if (s) return s;
  if (w->cur) return cairn__fail(CAIRN_E_STATE, "ckpt_writer: a record is in progress");
  if ((s = begin_record(w, "ckpt_writer", name, dt, rank, shape, layout, &w->cur))) return s;
  w->cur_chunk = 0;
  w->cur_done = 0;
  return CAIRN_OK;
}

static cairn_status rec_piece(cairn_ckpt_writer *w, unsigned codec, uint32_t raw, const void *data, uint32_t stored,
                              uint32_t data_crc, int check_crc) {
  ck_entry *e = w->cur;
  piece p = {.src = data, .raw = raw, .codec = (uint8_t)codec, .stored = stored, .out = data,
             .data_crc = data_crc, .raw_crc = data_crc, .crc_done = 1};
  /* The CRC of the bytes we write, computed on them. */
  uint32_t got = cairn_crc32c(0, data, stored);
  if (check_crc && got != data_crc)
    return cairn__fail(CAIRN_E_CORRUPT, "ckpt_writer: '%s': chunk %u changed while being copied (CRC %08x, expected %08x)",
                       e->name, w->cur_chunk, got, data_crc);
  p.data_crc = got;
  if (codec == CK_CODEC_RAW) p.raw_crc = got;
  cairn_status s = emit_piece(w, e, w->cur_chunk, &p);
  if (!s && w->n_ext) s = cairn__ckw_flush(w);
  if (s) return cairn__ckw_set_failed(w, s);
  w->cur_chunk++;
  w->cur_done += raw;
  return CAIRN_OK;
}

cairn_status cairn__ck_rec_chunk(cairn_ckpt_writer *w, unsigned codec, uint32_t raw, const void *stored,
                                 uint32_t stored_size, uint32_t data_crc) {
  cairn_status s = cairn__ckw_check_usable(w, "ckpt_writer");
  if (s) return s;
  ck_entry *e = w->cur;
  if (!e || e->layout != CK_LAYOUT_CHUNKED || w->cur_chunk >= e->n_chunks ||
      raw != ck_chunk_raw(e->raw_bytes, w->chunk_bytes, w->cur_chunk) ||
      !cairn__ck_chunk_sizes_ok(codec, raw, stored_size))
    return cairn__fail(CAIRN_E_STATE, "ckpt_writer: chunk does not fit the record in progress");
  /* raw_crc of a compressed chunk is unknown here: the caller passes the
   * tensor's CRC to rec_end, which is what the trailer needs; the combined
   * value kept in the entry is replaced there. */
  return rec_piece(w, codec, raw, stored, stored_size, data_crc, 1);
}

cairn_status cairn__ck_rec_payload(cairn_ckpt_writer *w, const void *data, size_t len) {
  cairn_status s = cairn__ckw_check_usable(w, "ckpt_writer");
  if (s) return s;
  ck_entry *e = w->cur;
  if (!e || e->layout != CK_LAYOUT_RAW || len > UINT32_MAX || len > e->raw_bytes - w->cur_done)
    return cairn__fail(CAIRN_E_STATE, "ckpt_writer: payload does not fit the record in progress");
  if (len == 0) return CAIRN_OK;
  return rec_piece(w, CK_CODEC_RAW, (uint32_t)len, data, (uint32_t)len, 0, 0);
}

cairn_status cairn__ck_rec_end(cairn_ckpt_writer *w, uint32_t raw_crc) {
  cairn_status s = cairn__ckw_check_usable(w, "ckpt_writer");
  if (s) return s;
  ck_entry *e = w->cur;
  if (!e || (e->layout == CK_LAYOUT_CHUNKED ? w->cur_chunk != e->n_chunks : w->cur_done != e->raw_bytes))
    return cairn__fail(CAIRN_E_STATE, "ckpt_writer: record ended before all its data");
  /* For raw chunks and payloads the CRC combined from the bytes written must
   * match the caller's; compressed chunks are covered by their own CRCs. */
  int all_raw = 1;
  for (uint32_t k = 0; k < e->n_chunks; k++) all_raw &= e->chunks[k].codec == CK_CODEC_RAW;
  if (all_raw && e->raw_crc != raw_crc)
    return cairn__ckw_set_failed(w, cairn__fail(CAIRN_E_CORRUPT, "ckpt_writer: '%s': tensor CRC %08x, expected %08x",
                                     e->name, e->raw_crc, raw_crc));
  e->raw_crc = raw_crc;
  w->cur = NULL;
  return end_record(w, e);
}

/* ---- commit ---------------------------------------------------------------------- */


static cairn_status fsync_dir(const char *path) {
  char *dir = cairn__path_dir(path);
  if (!dir) return cairn__fail(CAIRN_E_NOMEM, "ckpt_writer_commit: out of memory");
  cairn_status s = CAIRN_OK;
  if (cairn__fsync_dir(dir) != 0)
    s = cairn__fail(CAIRN_E_IO, "ckpt_writer_commit: '%s' was renamed into place, but syncing directory '%s' failed: %s",
                    path, dir, strerror(errno));
  free(dir);
  return s;
}

static void writer_free(cairn_ckpt_writer *w) {
  if (w->fd >= 0) close(w->fd);
  for (size_t i = 0; i < w->n; i++) {
    free(w->ents[i].name);
    free(w->ents[i].chunks);
  }
  for (size_t i = 0; i < w->nmeta; i++) {
    free(w->meta[i].key);
    free(w->meta[i].data);
  }
  for (int i = 0; w->cbuf && i < w->nslots; i++) cairn_free(w->cbuf[i]);
  for (int i = 0; w->sbuf && i < w->nslots; i++) cairn_free(w->sbuf[i]);
  for (int i = 0; w->zctx && i < w->nslots; i++) cairn__ck_zstd_cctx_free(w->zctx[i]);
  free(w->zctx);
  free(w->cbuf);
  free(w->sbuf);
  free(w->pieces);
  cairn_free(w->pbuf);
  free(w->ents);
  free(w->hash);
  free(w->meta);
  free(w->stage);
  free(w->path);
  free(w->tmp);
  free(w);
}

void cairn_ckpt_writer_abort(cairn_ckpt_writer *w) {
  if (!w) return;
  if (w->fd >= 0) {
    close(w->fd);
    w->fd = -1;
  }
  if (w->tmp) unlink(w->tmp);
  writer_free(w);
}

static cairn_status commit(cairn_ckpt_writer *w) {
  if (w->failed)
    return cairn__fail(w->failed, "ckpt_writer_commit: '%s' not written: %s", w->path, w->fail_msg);
  if (w->cur) return cairn__fail(CAIRN_E_STATE, "ckpt_writer_commit: a record is in progress");
  unsigned char *meta = NULL, *index = NULL;
  uint64_t meta_size = 0, index_size = 0;
  cairn_status s = cairn__ckw_build_meta(w, &meta, &meta_size);
  if (!s) s = cairn__ckw_build_index(w, &index, &index_size);
  uint64_t meta_offset = w->off;
  unsigned char ft[CK_FOOTER_SIZE] = {0};
  memcpy(ft, CK_TAG_FOOTER, 4);
  ck_put16(ft + 4, CAIRN_CKPT_VERSION_MAJOR);
  uint32_t required = w->used_zstd ? CK_FEAT_ZSTD : 0;
  ck_put16(ft + 6, (uint16_t)file_minor(required));
  ck_put64(ft + 8, meta_offset);
  ck_put64(ft + 16, meta_size);
  ck_put64(ft + 24, index_size);
  ck_put64(ft + 32, w->n);
  ck_put32(ft + 40, CK_FLAG_COMPLETE);
  memcpy(ft + 44, w->file_id, 16);
  ck_put32(ft + 60, ck_crc_masked(ft, 60));
  if (!s) s = cairn__ckw_put_ext(w, meta, (size_t)meta_size);
  if (!s) s = cairn__ckw_put_ext(w, index, (size_t)index_size);
  if (!s) s = cairn__ckw_put_copy(w, ft, sizeof ft);
  if (!s) s = cairn__ckw_flush(w);
  free(meta);
  free(index);
  if (s) return s;
  if (required != w->sb_required) {
    /* A compact writer whose chunks all stayed raw writes a 1.0 file after
     * all; salvage that copied codec-3 chunks needs the bit. The footer
     * already says the same version. */
    unsigned char sb[CK_SUPER_SIZE];
    fill_super(sb, w, required);
    int err = 0;
    if (pwrite(w->fd, sb, sizeof sb, 0) != (ssize_t)sizeof sb) {
      err = errno ? errno : EIO;
      return cairn__fail(cairn__ckw_io_status(err), "ckpt_writer_commit: rewriting the superblock of '%s' (for '%s') failed: %s",
                         w->tmp, w->path, strerror(err));
    }
  }
  if (!w->no_fsync && fsync(w->fd) != 0) {
    int e = errno;
    return cairn__fail(cairn__ckw_io_status(e), "ckpt_writer_commit: fsync of '%s' (for '%s') failed: %s", w->tmp, w->path,
                       strerror(e));
  }
  int fd = w->fd;
  w->fd = -1;
  if (close(fd) != 0) {
    int e = errno;
    return cairn__fail(cairn__ckw_io_status(e), "ckpt_writer_commit: closing '%s' (for '%s') failed: %s", w->tmp, w->path,
                       strerror(e));
  }
  if (rename(w->tmp, w->path) != 0) {
    int e = errno;
    return cairn__fail(cairn__ckw_io_status(e), "ckpt_writer_commit: cannot rename '%s' to '%s': %s", w->tmp, w->path,
                       strerror(e));
  }
  free(w->tmp);
  w->tmp = NULL; /* nothing to unlink any more */
  if (!w->no_fsync) return fsync_dir(w->path);
  return CAIRN_OK;
}

cairn_status cairn_ckpt_writer_commit(cairn_ckpt_writer *w) {
  if (!w) return cairn__fail(CAIRN_E_NULL, "ckpt_writer_commit: writer is NULL");
  cairn_status s = commit(w);
  cairn_ckpt_writer_abort(w); /* removes the temporary file if it is still there */
  return s;
}
