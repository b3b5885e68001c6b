/* IDX files (LeCun's MNIST format), plain or gzip, and dtype conversions.
 *
 * IDX layout (big-endian):
 *   offset 0  0x00 0x00          magic
 *   offset 2  type code          0x08 u8, 0x09 i8, 0x0B i16, 0x0C i32, 0x0D f32, 0x0E f64
 *   offset 3  rank               1..8 here
 *   offset 4  rank × u32         dimensions, outermost first
 *   then      Π dims × size      the data, row-major, big-endian elements
 * Reference: http://yann.lecun.com/exdb/mnist/ ("THE IDX FILE FORMAT").
 *
 * zlib's gz* layer reads plain and gzip files alike (it looks for the gzip
 * magic 1f 8b, not at the name). Every offset in a message is an offset in
 * the IDX byte stream, i.e. in the uncompressed data of a gzip file. The
 * reader never trusts the header: the element count is a checked product,
 * the allocation is bounded by max_bytes, a plain file's length is compared
 * with the header before anything is allocated, gzip data is read into a
 * buffer that grows with the bytes actually decompressed (so memory follows
 * the data present, not the header's claim), and the data must end exactly
 * where the header says. (zlib ignores garbage after the last gzip
 * member, so "trailing bytes" means bytes inside the compressed stream.)
 */
#define _POSIX_C_SOURCE 200809L /* open, fstat, O_CLOEXEC */

#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "cairn/data.h"

#define IDX_DEFAULT_MAX_BYTES (UINT64_C(4) << 30) /* 4 GiB */
#define IDX_BLOCK (1u << 24)                      /* bytes per gzread: 16 MiB */
#define IDX_GZ_BUFFER (1u << 17)                  /* zlib's input buffer: 128 KiB */
#define IDX_GROW_START (UINT64_C(4) << 20)        /* first buffer for gzip data: 4 MiB */

/* ---- reading through zlib ------------------------------------------------ */

typedef struct idx_reader {
  const char *path;
  gzFile gz;
  uint64_t off;        /* bytes of the IDX stream consumed so far */
  int early_eof;       /* a gzip stream ended before its trailer (zlib Z_BUF_ERROR) */
  char zmsg[160];      /* zlib's text for early_eof */
} idx_reader;

/* zlib's message without the "<fd:N>: " prefix gzdopen() puts on it. */
static const char *zlib_text(const char *msg) {
  if (msg && strncmp(msg, "<fd:", 4) == 0) {
    const char *p = strstr(msg, ": ");
    if (p) return p + 2;
  }
  return msg && *msg ? msg : "unknown zlib error";
}

/* Turns the zlib error state after a failed gzread into a status. A damaged
 * trailer (CRC-32 or length of the uncompressed data) is CAIRN_E_CORRUPT;
 * any other invalid deflate/gzip data is CAIRN_E_FORMAT. zlib decompresses
 * ahead into its buffer and discards that output on an error, so the place
 * of a gzip error is given as the offset in the compressed file, where
 * inflate stopped. */
static cairn_status zlib_fail(idx_reader *r) {
  int zerr = Z_OK;
  const char *msg = zlib_text(gzerror(r->gz, &zerr));
  z_off_t zpos = gzoffset(r->gz);
  unsigned long long at = (unsigned long long)r->off, zat = zpos >= 0 ? (unsigned long long)zpos : 0;
  switch (zerr) {
    case Z_ERRNO:
      return cairn__fail(CAIRN_E_IO, "idx_read '%s': read error after offset %llu: %s", r->path, at, msg);
    case Z_MEM_ERROR:
      return cairn__fail(CAIRN_E_NOMEM, "idx_read '%s': zlib is out of memory after offset %llu", r->path, at);
    case Z_DATA_ERROR:
      /* zlib's words for a failed CRC-32 or length: "incorrect data check",
       * "incorrect length check", "header crc mismatch". */
      if (strstr(msg, "data check") || strstr(msg, "length check") || strstr(msg, "crc mismatch"))
        return cairn__fail(CAIRN_E_CORRUPT, "idx_read '%s': gzip check fails at compressed offset %llu: %s",
                           r->path, zat, msg);
      return cairn__fail(CAIRN_E_FORMAT, "idx_read '%s': invalid gzip data at compressed offset %llu: %s",
                         r->path, zat, msg);
    default:
      return cairn__fail(CAIRN_E_FORMAT, "idx_read '%s': zlib error %d at compressed offset %llu: %s", r->path,
                         zerr, zat, msg);
  }
}

/* Reads up to len bytes in blocks; *got is how many arrived. A short read
 * with CAIRN_OK means the stream ended (r->early_eof says whether a gzip
 * stream was cut off); errors are zlib's, already reported. */
static cairn_status idx_read_bytes(idx_reader *r, void *buf, uint64_t len, uint64_t *got) {
  unsigned char *p = buf;
  *got = 0;
  while (*got < len) {
    uint64_t want = len - *got;
    unsigned n = want < IDX_BLOCK ? (unsigned)want : IDX_BLOCK;
    int k = gzread(r->gz, p + *got, n);
    if (k < 0) return zlib_fail(r);
    *got += (uint64_t)k;
    r->off += (uint64_t)k;
    if ((unsigned)k < n) {
      /* zlib returns short only at the end or on an error; it reports a
       * gzip stream that stops before its trailer as Z_BUF_ERROR. */
      int zerr = Z_OK;
      const char *msg = gzerror(r->gz, &zerr);
      if (zerr == Z_BUF_ERROR) {
        r->early_eof = 1;
        snprintf(r->zmsg, sizeof r->zmsg, "%s", zlib_text(msg));
      } else if (zerr != Z_OK) {
        return zlib_fail(r);
      }
      break;
    }
  }
  return CAIRN_OK;
}

static cairn_status truncated(const idx_reader *r, const char *what, uint64_t start, uint64_t need) {
  return cairn__fail(CAIRN_E_TRUNCATED,
                     "idx_read '%s': file ends at offset %llu inside the %s: expected %llu bytes from "
                     "offset %llu, %llu missing%s%s%s",
                     r->path, (unsigned long long)r->off, what, (unsigned long long)need,
                     (unsigned long long)start, (unsigned long long)(start + need - r->off),
                     r->early_eof ? " (gzip stream cut off: " : "", r->early_eof ? r->zmsg : "",
                     r->early_eof ? ")" : "");
}

/* ---- the header ----------------------------------------------------------- */

static int idx_dtype(unsigned code, cairn_dtype *dt) {
  switch (code) {
    case 0x08: *dt = CAIRN_DTYPE_U8; return 1;
    case 0x09: *dt = CAIRN_DTYPE_I8; return 1;
    case 0x0B: *dt = CAIRN_DTYPE_I16; return 1;
    case 0x0C: *dt = CAIRN_DTYPE_I32; return 1;
    case 0x0D: *dt = CAIRN_DTYPE_F32; return 1;
    case 0x0E: *dt = CAIRN_DTYPE_F64; return 1;
    default: return 0;
  }
}

static uint32_t load_be32(const unsigned char *b) {
  return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | (uint32_t)b[3];
}

/* "(60000, 28, 28)" */
static void dims_str(const uint32_t *dims, int rank, char *buf, size_t len) {
  size_t used = (size_t)snprintf(buf, len, "(");
  for (int i = 0; i < rank && used < len; i++)
    used += (size_t)snprintf(buf + used, len - used, i ? ", %lu" : "%lu", (unsigned long)dims[i]);
  if (used < len) snprintf(buf + used, len - used, ")");
}

/* In-place big-endian → host conversion of count elements of esize bytes.
 * Assembling the value from bytes is correct on any host; compilers turn
 * these loops into byte swaps (or nothing, on a big-endian host). */
static void be_to_host(unsigned char *p, size_t count, size_t esize) {
  switch (esize) {
    case 2:
      for (size_t i = 0; i < count; i++, p += 2) {
        uint16_t v = (uint16_t)((unsigned)p[0] << 8 | p[1]);
        memcpy(p, &v, 2);
      }
      break;
    case 4:
      for (size_t i = 0; i < count; i++, p += 4) {
        uint32_t v = load_be32(p);
        memcpy(p, &v, 4);
      }
      break;
    case 8:
      for (size_t i = 0; i < count; i++, p += 8) {
        uint64_t v = (uint64_t)load_be32(p) << 32 | load_be32(p + 4);
        memcpy(p, &v, 8);
      }
      break;
    default:
      break;
  }
}

/* Reads the data of a stream whose length is unknown (gzip) into a
 * cairn_alloc block that grows with the bytes that really arrive: it
 * starts at IDX_GROW_START (or `bytes`, if smaller) and doubles up to
 * `bytes`, never beyond. A header that claims gigabytes over a few bytes
 * of data so costs a few megabytes, and fails as truncated; memory is at
 * most twice the data present, and at most the header's size, itself
 * bounded by max_bytes. *data is the block (NULL on failure, always with
 * an error), *got the bytes read. */
static cairn_status idx_read_growing(idx_reader *r, uint64_t bytes, cairn_dtype dt, const char *dstr,
                                     unsigned char **data, uint64_t *got) {
  *data = NULL;
  *got = 0;
  uint64_t cap = bytes < IDX_GROW_START ? bytes : IDX_GROW_START;
  unsigned char *p = cairn_alloc((size_t)cap);
  if (!p)
    return cairn__fail(CAIRN_E_NOMEM, "idx_read '%s': cannot allocate %llu bytes for %s %s", r->path,
                       (unsigned long long)cap, cairn_dtype_name(dt), dstr);
  for (;;) {
    uint64_t n;
    cairn_status s = idx_read_bytes(r, p + *got, cap - *got, &n);
    if (s) {
      cairn_free(p);
      return s;
    }
    *got += n;
    if (*got < cap || cap == bytes) break; /* the stream ended, or all data is in */
    uint64_t ncap = cap > bytes / 2 ? bytes : cap * 2;
    unsigned char *q = cairn__realloc(p, (size_t)cap, (size_t)ncap);
    if (!q) {
      cairn_free(p);
      return cairn__fail(CAIRN_E_NOMEM,
                         "idx_read '%s': cannot grow the buffer to %llu bytes (%llu bytes of the %llu that "
                         "%s %s need read so far)",
                         r->path, (unsigned long long)ncap, (unsigned long long)*got,
                         (unsigned long long)bytes, cairn_dtype_name(dt), dstr);
    }
    p = q;
    cap = ncap;
  }
  *data = p;
  return CAIRN_OK;
}

/* The header an IDX file starts with, as read and checked. */
typedef struct idx_header {
  cairn_dtype dt;
  int rank;
  int64_t shape[CAIRN_MAX_RANK];
  char dstr[8 * 12 + 8]; /* the dimensions, for messages */
  size_t esize;
  uint64_t hdr, count, bytes; /* header bytes, elements, data bytes */
} idx_header;

/* The header record: magic, type code, rank and dimensions, and the data
 * size they give against the caller's limit. */
static cairn_status idx_read_header(idx_reader *r, uint64_t max_bytes, idx_header *h) {
  unsigned char head[4 + 4 * CAIRN_MAX_RANK];
  uint64_t got;
  cairn_status s = idx_read_bytes(r, head, 4, &got);
  if (s) return s;
  if (got < 4) return truncated(r, "header", 0, 4);
  if (head[0] != 0 || head[1] != 0)
    return cairn__fail(CAIRN_E_FORMAT,
                       "idx_read '%s': bad magic 0x%02x 0x%02x at offset 0 (an IDX file starts with 0x00 0x00)",
                       r->path, head[0], head[1]);
  if (!idx_dtype(head[2], &h->dt))
    return cairn__fail(CAIRN_E_FORMAT,
                       "idx_read '%s': unknown type code 0x%02x at offset 2 (known: 0x08 u8, 0x09 i8, "
                       "0x0B i16, 0x0C i32, 0x0D f32, 0x0E f64)",
                       r->path, head[2]);
  int rank = h->rank = head[3];
  if (rank < 1 || rank > CAIRN_MAX_RANK)
    return cairn__fail(CAIRN_E_FORMAT, "idx_read '%s': rank %d at offset 3 is outside 1..%d", r->path, rank,
                       CAIRN_MAX_RANK);
  const uint64_t hdr = h->hdr = 4 + 4 * (uint64_t)rank;
  s = idx_read_bytes(r, head + 4, hdr - 4, &got);
  if (s) return s;
  if (got < hdr - 4) return truncated(r, "header's dimensions", 4, hdr - 4);
  uint32_t dims[CAIRN_MAX_RANK];
  const size_t esize = h->esize = cairn_dtype_size(h->dt);
  uint64_t count = 1;
  for (int i = 0; i < rank; i++) dims[i] = load_be32(head + 4 + 4 * i);
  dims_str(dims, rank, h->dstr, sizeof h->dstr);
  for (int i = 0; i < rank; i++) {
    if (dims[i] > 0 && count > (UINT64_MAX / esize) / dims[i])
      return cairn__fail(CAIRN_E_LIMIT,
                         "idx_read '%s': dimensions %s at offsets 4..%llu: the byte count overflows 64 bits "
                         "at dimension %d",
                         r->path, h->dstr, (unsigned long long)hdr, i);
    count *= dims[i];
    h->shape[i] = (int64_t)dims[i];
  }
  h->count = count;
  h->bytes = count * esize;
  /* The caller's limit, and what a tensor can hold on this machine. */
  uint64_t limit = max_bytes ? max_bytes : IDX_DEFAULT_MAX_BYTES;
  if (limit > SIZE_MAX) limit = SIZE_MAX;
  if (limit / esize > (uint64_t)INT64_MAX / 8) limit = (uint64_t)INT64_MAX / 8 * esize;
  if (h->bytes > limit)
    return cairn__fail(CAIRN_E_LIMIT,
                       "idx_read '%s': dimensions %s at offsets 4..%llu of %s need %llu bytes, more than the "
                       "limit of %llu",
                       r->path, h->dstr, (unsigned long long)hdr, cairn_dtype_name(h->dt), (unsigned long long)h->bytes,
                       (unsigned long long)limit);
  return CAIRN_OK;
}

/* Everything after opening: the header record, then the data record and
 * the end. */
static cairn_status idx_parse(idx_reader *r, const struct stat *st, uint64_t max_bytes, cairn_tensor **out) {
  idx_header h;
  cairn_status s = idx_read_header(r, max_bytes, &h);
  if (s) return s;
  const cairn_dtype dt = h.dt;
  const int rank = h.rank;
  const int64_t *shape = h.shape;
  const char *dstr = h.dstr;
  const size_t esize = h.esize;
  const uint64_t hdr = h.hdr, count = h.count, bytes = h.bytes;
  uint64_t got;

  /* A plain file's length is known: reject a wrong one before allocating
   * (a 20-byte file can claim gigabytes). gzip data can only be counted by
   * decompressing it: there the buffer grows with the data (below). */
  int sized = 0;
  if (gzdirect(r->gz) && st && S_ISREG(st->st_mode) && st->st_size >= 0) {
    sized = 1;
    uint64_t fsize = (uint64_t)st->st_size;
    if (fsize < hdr + bytes) {
      r->off = fsize;
      return truncated(r, "data", hdr, bytes);
    }
    if (fsize > hdr + bytes)
      return cairn__fail(CAIRN_E_FORMAT,
                         "idx_read '%s': %llu trailing byte%s at offset %llu after the data of %s %s",
                         r->path, (unsigned long long)(fsize - hdr - bytes), fsize - hdr - bytes > 1 ? "s" : "",
                         (unsigned long long)(hdr + bytes),
                         cairn_dtype_name(dt), dstr);
  }

  cairn_tensor *t;
  if (sized) {
    s = cairn_tensor_new(dt, rank, shape, &t);
    if (s) return cairn__fail(s, "idx_read '%s': cannot allocate %llu bytes for %s %s", r->path,
                              (unsigned long long)bytes, cairn_dtype_name(dt), dstr);
    s = idx_read_bytes(r, t->data, bytes, &got);
  } else {
    unsigned char *data;
    if ((s = idx_read_growing(r, bytes, dt, dstr, &data, &got))) return s;
    /* An owned tensor around the grown block (cairn_tensor_free releases
     * both, as for cairn_tensor_new's); the shape was checked above. */
    if (!(t = calloc(1, sizeof *t)) || cairn_tensor_view(t, data, dt, rank, shape) != CAIRN_OK) {
      free(t);
      cairn_free(data);
      return cairn__fail(CAIRN_E_NOMEM, "idx_read '%s': out of memory", r->path);
    }
    t->owns_data = 1;
  }
  if (!s && got < bytes) s = truncated(r, "data", hdr, bytes);
  if (!s) {
    /* One more byte: there must be none. For gzip this read also makes
     * zlib check the trailer (CRC-32 and length) of the last member. */
    unsigned char extra;
    uint64_t more;
    s = idx_read_bytes(r, &extra, 1, &more);
    if (!s && more)
      s = cairn__fail(CAIRN_E_FORMAT, "idx_read '%s': trailing bytes at offset %llu after the data of %s %s",
                      r->path, (unsigned long long)(hdr + bytes), cairn_dtype_name(dt), dstr);
    if (!s && r->early_eof)
      s = cairn__fail(CAIRN_E_TRUNCATED,
                      "idx_read '%s': gzip stream ends at offset %llu before its trailer (CRC-32 and length): %s",
                      r->path, (unsigned long long)r->off, r->zmsg);
  }
  if (s) {
    cairn_tensor_free(t);
    return s;
  }
  be_to_host(t->data, (size_t)count, esize);
  *out = t;
  return CAIRN_OK;
}

cairn_status cairn_idx_read(const char *path, uint64_t max_bytes, cairn_tensor **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "idx_read: out is NULL");
  *out = NULL;
  if (!path) return cairn__fail(CAIRN_E_NULL, "idx_read: path is NULL");

  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return cairn__fail(CAIRN_E_IO, "idx_read '%s': cannot open: %s", path, strerror(errno));
  struct stat st;
  int have_st = fstat(fd, &st) == 0;
  if (have_st && S_ISDIR(st.st_mode)) {
    close(fd);
    return cairn__fail(CAIRN_E_IO, "idx_read '%s': is a directory", path);
  }
  gzFile gz = gzdopen(fd, "rb");
  if (!gz) {
    close(fd);
    return cairn__fail(CAIRN_E_NOMEM, "idx_read '%s': cannot set up zlib", path);
  }
  gzbuffer(gz, IDX_GZ_BUFFER);

  idx_reader r = {.path = path, .gz = gz};
  cairn_status s = idx_parse(&r, have_st ? &st : NULL, max_bytes, out);
  gzclose_r(gz); /* closes fd; the data has been checked already */
  return s;
}

/* ---- conversions ------------------------------------------------------------ */

/* IEEE binary16 → float (exact). */
static float f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu, bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | man << 13; /* inf, nan */
  } else if (exp != 0) {
    bits = sign | (exp + 112) << 23 | man << 13;
  } else if (man == 0) {
    bits = sign;
  } else { /* subnormal: normalise */
    exp = 113;
    while (!(man & 0x400u)) {
      man <<= 1;
      exp--;
    }
    bits = sign | exp << 23 | (man & 0x3FFu) << 13;
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

static float bf16_to_f32(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

cairn_status cairn_tensor_to_f32(const cairn_tensor *src, float scale, cairn_tensor **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "tensor_to_f32: out is NULL");
  *out = NULL;
  if (!src) return cairn__fail(CAIRN_E_NULL, "tensor_to_f32: src is NULL");
  if (cairn_dtype_size(src->dtype) == 0)
    return cairn__fail(CAIRN_E_DTYPE, "tensor_to_f32: src has unknown dtype %d", (int)src->dtype);
  if (!src->data && src->size > 0) return cairn__fail(CAIRN_E_NULL, "tensor_to_f32: src has no data");
  cairn_tensor *t;
  cairn_status s = cairn_tensor_new(CAIRN_DTYPE_F32, src->rank, src->shape, &t);
  if (s) return s;
  float *o = t->data;
  const int64_t n = src->size;
  /* Products are formed in double and rounded once, so large integers
   * (beyond 2^24) are not rounded twice. */
  const double k = scale;
#define CONVERT_(ctype, expr)                          \
  do {                                                 \
    const ctype *p = src->data;                        \
    for (int64_t i = 0; i < n; i++) o[i] = (expr);     \
  } while (0)
  switch (src->dtype) {
    case CAIRN_DTYPE_F32: CONVERT_(float, (float)((double)p[i] * k)); break;
    case CAIRN_DTYPE_F64: CONVERT_(double, (float)(p[i] * k)); break;
    case CAIRN_DTYPE_F16: CONVERT_(uint16_t, (float)((double)f16_to_f32(p[i]) * k)); break;
    case CAIRN_DTYPE_BF16: CONVERT_(uint16_t, (float)((double)bf16_to_f32(p[i]) * k)); break;
    case CAIRN_DTYPE_I8: CONVERT_(int8_t, (float)(p[i] * k)); break;
    case CAIRN_DTYPE_I16: CONVERT_(int16_t, (float)(p[i] * k)); break;
    case CAIRN_DTYPE_I32: CONVERT_(int32_t, (float)(p[i] * k)); break;
    case CAIRN_DTYPE_I64: CONVERT_(int64_t, (float)((double)p[i] * k)); break;
    case CAIRN_DTYPE_U8: CONVERT_(uint8_t, (float)(p[i] * k)); break;
    case CAIRN_DTYPE_U16: CONVERT_(uint16_t, (float)(p[i] * k)); break;
    case CAIRN_DTYPE_U32: CONVERT_(uint32_t, (float)(p[i] * k)); break;
    case CAIRN_DTYPE_U64: CONVERT_(uint64_t, (float)((double)p[i] * k)); break;
    case CAIRN_DTYPE_BOOL: CONVERT_(uint8_t, (float)((p[i] != 0) * k)); break;
  }
#undef CONVERT_
  *out = t;
  return CAIRN_OK;
}

cairn_status cairn_tensor_to_labels(const cairn_tensor *src, int32_t num_classes, cairn_tensor **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "tensor_to_labels: out is NULL");
  *out = NULL;
  if (!src) return cairn__fail(CAIRN_E_NULL, "tensor_to_labels: src is NULL");
  if (num_classes < 0)
    return cairn__fail(CAIRN_E_INVALID, "tensor_to_labels: num_classes is %ld, must be >= 0", (long)num_classes);
  switch (src->dtype) {
    case CAIRN_DTYPE_I8: case CAIRN_DTYPE_I16: case CAIRN_DTYPE_I32: case CAIRN_DTYPE_I64:
    case CAIRN_DTYPE_U8: case CAIRN_DTYPE_U16: case CAIRN_DTYPE_U32: case CAIRN_DTYPE_U64:
      break;
    default:
      return cairn__fail(CAIRN_E_DTYPE, "tensor_to_labels: src is %s, expected an integer dtype",
                         cairn_dtype_name(src->dtype));
  }
  if (!src->data && src->size > 0) return cairn__fail(CAIRN_E_NULL, "tensor_to_labels: src has no data");
  cairn_tensor *t;
  cairn_status s = cairn_tensor_new(CAIRN_DTYPE_I32, src->rank, src->shape, &t);
  if (s) return s;
  int32_t *o = t->data;
  /* Values are compared as int64; a u64 above INT64_MAX saturates (it is
   * out of range either way) and is printed as it is. */
  const int64_t lo = num_classes ? 0 : INT32_MIN, hi = num_classes ? num_classes - 1 : INT32_MAX;
  for (int64_t i = 0; i < src->size; i++) {
    int64_t v;
    switch (src->dtype) {
      case CAIRN_DTYPE_I8: v = ((const int8_t *)src->data)[i]; break;
      case CAIRN_DTYPE_I16: v = ((const int16_t *)src->data)[i]; break;
      case CAIRN_DTYPE_I32: v = ((const int32_t *)src->data)[i]; break;
      case CAIRN_DTYPE_I64: v = ((const int64_t *)src->data)[i]; break;
      case CAIRN_DTYPE_U8: v = ((const uint8_t *)src->data)[i]; break;
      case CAIRN_DTYPE_U16: v = ((const uint16_t *)src->data)[i]; break;
      case CAIRN_DTYPE_U32: v = ((const uint32_t *)src->data)[i]; break;
      default: {
        uint64_t u = ((const uint64_t *)src->data)[i];
        v = u > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)u;
        break;
      }
    }
    if (v < lo || v > hi) {
      char val[24];
      if (src->dtype == CAIRN_DTYPE_U64)
        snprintf(val, sizeof val, "%llu", (unsigned long long)((const uint64_t *)src->data)[i]);
      else
        snprintf(val, sizeof val, "%lld", (long long)v);
      cairn_tensor_free(t);
      if (num_classes)
        return cairn__fail(CAIRN_E_INVALID, "tensor_to_labels: element %lld is %s, outside [0, %ld)",
                           (long long)i, val, (long)num_classes);
      return cairn__fail(CAIRN_E_INVALID, "tensor_to_labels: element %lld is %s, which does not fit in i32",
                         (long long)i, val);
    }
    o[i] = (int32_t)v;
  }
  *out = t;
  return CAIRN_OK;
}
