/* npz_read.c — NumPy .npz archives (a ZIP of .npy arrays) streamed into a
 * cairn checkpoint: cairn_npz_reader_* of cairn/interop.h. The ZIP layer is
 * libzip (zip_fdopen, zip_fopen_index + zip_fread, which inflates and checks
 * each member's CRC-32 and size); this file checks what libzip would trust
 * before it opens the file (the end-of-central-directory counts, which size
 * its allocations), refuses what cairn does not read (encryption, methods
 * other than stored and deflate, unsafe names), parses the .npy header with
 * a strict parser of the dict literal NumPy writes, and hands the data to
 * the checkpoint writer in pieces (cairn_ckpt_writer_begin/append/end), so
 * memory follows a fixed buffer, not the size a header claims. Limits and
 * rules: doc/interop-formats.md ("NumPy .npz").
 *
 * References: PKWARE APPNOTE.TXT 6.3 (end records 4.3.14-4.3.16) and
 * NumPy's numpy/lib/format.py (the .npy header). */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zip.h>
#include <zlib.h>

#include "cairn/interop.h"
#include "ckpt_backend.h"
#include "ckpt_write_impl.h"
#include "internal.h"
#include "interop_impl.h"
#include "npz_impl.h"

#define NPZ_MAX_RANK 32           /* NumPy's limit is 64; more is refused as cairn's 8 is */
#define NPY_MAX_HEADER 10000u     /* NumPy writes far less; its own reader's limit is 10,000 */
#define NPZ_MAX_MEMBERS 1000000u  /* the checkpoint reader's default tensor count */
#define NPZ_MAX_MEMBER_BYTES (64ull << 30) /* the checkpoint reader's default tensor limit */
#define NPZ_CD_MAX_BYTES (256u << 20)      /* the checkpoint reader's default index limit */
#define NPZ_IO_CHUNK (1u << 20)            /* one zip_fread: a multiple of every item size */
/* A Fortran-order array of rank >= 2 must be transposed to C order, which
 * needs the whole array: it is read into a buffer only up to this size. */
#define NPZ_FORTRAN_MAX_BYTES (32u << 20)
/* Deflate cannot expand by more than 1032:1 (RFC 1951 block limits). */
#define DEFLATE_MAX_RATIO 1032u

#define SIG_EOCD 0x06054b50u
#define SIG_EOCD64 0x06064b50u
#define SIG_LOC64 0x07064b50u

static uint16_t rd16(const unsigned char *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t rd32(const unsigned char *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static uint64_t rd64(const unsigned char *p) { return (uint64_t)rd32(p) | ((uint64_t)rd32(p + 4) << 32); }

static int pread_all(int fd, void *buf, size_t len, uint64_t off) {
  unsigned char *p = buf;
  while (len > 0) {
    ssize_t r = pread(fd, p, len, (off_t)off);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      if (r == 0) errno = EIO; /* the file shrank under us */
      return -1;
    }
    p += r;
    off += (uint64_t)r;
    len -= (size_t)r;
  }
  return 0;
}

/* ---- names ------------------------------------------------------------------ */

/* interop_impl.h; the writer (npz_write.c) holds its members to the same rule. */
int cairn__npz_name_safe(const char *name, size_t len) {
  const unsigned char *s = (const unsigned char *)name;
  if (len == 0 || len > 65535 || !cairn__ck_utf8_ok(s, len, 1)) return 0;
  if (s[0] == '/' || memchr(s, '\\', len)) return 0;
  if (len >= 2 && s[1] == ':' && ((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z'))) return 0;
  size_t start = 0;
  for (size_t i = 0; i <= len; i++) {
    if (i < len && s[i] != '/') continue;
    size_t cl = i - start;
    if (cl == 0 || (cl == 1 && s[start] == '.') || (cl == 2 && s[start] == '.' && s[start + 1] == '.')) return 0;
    start = i + 1;
  }
  return 1;
}

/* ---- the end records, before libzip sees them ------------------------------------ */

typedef struct extent {
  uint64_t start, end;
} extent;

static int cmp_extent(const void *a, const void *b) {
  const extent *x = a, *y = b;
  return x->start < y->start ? -1 : x->start > y->start;
}

/* Members may not share bytes: overlapping members are the zip-bomb trick
 * of many members inflating one compressed stream (libzip does not look).
 * The central directory (n entries at cd_off) gives each member's local
 * header offset, name length and compressed size (ZIP64 extra field where
 * they are 0xFFFFFFFF); sorted by offset, each must end (header, name,
 * data) before the next starts. The same walk refuses names with a NUL
 * inside. Memory: the directory (at most NPZ_CD_MAX_BYTES, part of the
 * file) and 16 bytes per member. */
static cairn_status check_no_overlap(int fd, const char *fn, const char *path, uint64_t n, uint64_t cd_off,
                                     uint64_t cd_size) {
  if (n == 0) return CAIRN_OK;
  unsigned char *cd = malloc((size_t)cd_size);
  extent *x = malloc((size_t)n * sizeof *x);
  cairn_status s = CAIRN_OK;
  if (!cd || !x) {
    s = cairn__fail(CAIRN_E_NOMEM, "%s: %s: out of memory for a %llu-byte central directory", fn, path,
                    (unsigned long long)cd_size);
    goto done;
  }
  if (pread_all(fd, cd, (size_t)cd_size, cd_off) != 0) {
    s = cairn__fail(CAIRN_E_IO, "%s: %s: read error: %s", fn, path, strerror(errno));
    goto done;
  }
  uint64_t p = 0;
  for (uint64_t i = 0; i < n; i++) {
    const unsigned char *C = cd + p;
    if (cd_size - p < 46 || rd32(C) != 0x02014b50u || cd_size - p - 46 < (uint64_t)rd16(C + 28) + rd16(C + 30) + rd16(C + 32)) {
      s = cairn__fail(CAIRN_E_FORMAT, "%s: %s: central directory entry %llu is malformed (offset %llu)", fn, path,
                      (unsigned long long)i, (unsigned long long)(cd_off + p));
      goto done;
    }
    uint64_t nlen = rd16(C + 28), xlen = rd16(C + 30), clen = rd16(C + 32);
    /* libzip hands names out as C strings: one with a NUL inside would
     * reach cairn cut short. */
    if (memchr(C + 46, 0, (size_t)nlen)) {
      s = cairn__fail(CAIRN_E_FORMAT, "%s: %s: member %llu has an unsafe name (a NUL byte inside)", fn, path,
                      (unsigned long long)i);
      goto done;
    }
    uint64_t csize = rd32(C + 20), usize = rd32(C + 24), off = rd32(C + 42);
    /* ZIP64 extra field (id 1): the 64-bit values of the fields that are
     * 0xFFFFFFFF, in the order size, compressed size, offset. */
    const unsigned char *e = C + 46 + nlen, *xend = e + xlen;
    while (xend - e >= 4) {
      uint16_t id = rd16(e), sz = rd16(e + 2);
      if (sz > xend - e - 4) break;
      if (id == 1) {
        const unsigned char *f = e + 4, *fend = f + sz;
        if (usize == 0xFFFFFFFFu && fend - f >= 8) f += 8;
        if (csize == 0xFFFFFFFFu && fend - f >= 8) csize = rd64(f), f += 8;
        if (off == 0xFFFFFFFFu && fend - f >= 8) off = rd64(f);
        break;
      }
      e += 4 + sz;
    }
    x[i].start = off;
    x[i].end = off + 30 + nlen + csize; /* no overflow: each term < 2^62 or checked below */
    if (off > cd_off || csize > cd_off || x[i].end > cd_off) {
      s = cairn__fail(CAIRN_E_FORMAT,
                      "%s: %s: member %llu (local header at %llu, %llu compressed bytes) runs into the "
                      "central directory at %llu",
                      fn, path, (unsigned long long)i, (unsigned long long)off, (unsigned long long)csize,
                      (unsigned long long)cd_off);
      goto done;
    }
    p += 46 + nlen + xlen + clen;
  }
  qsort(x, (size_t)n, sizeof *x, cmp_extent);
  for (uint64_t i = 0; i + 1 < n; i++)
    if (x[i].end > x[i + 1].start) {
      s = cairn__fail(CAIRN_E_FORMAT,
                      "%s: %s: members overlap (the one at offset %llu runs to %llu, past the next at "
                      "%llu): refused, as a ZIP bomb would be",
                      fn, path, (unsigned long long)x[i].start, (unsigned long long)x[i].end,
                      (unsigned long long)x[i + 1].start);
      goto done;
    }
done:
  free(cd);
  free(x);
  return s;
}

/* libzip sizes its directory from the end record's entry count (the ZIP64
 * one holds 64 bits), so the counts and the directory's extent are checked
 * here first, by the rules cairn's own reader applies: one disk, the end
 * record (plus its comment) ends the file, the central directory ends where
 * the end record (or the ZIP64 one) starts, at most NPZ_MAX_MEMBERS entries
 * of at least 46 bytes each, at most NPZ_CD_MAX_BYTES of directory. */
static cairn_status check_end_records(int fd, const char *fn, const char *path, uint64_t fsize) {
  if (fsize < 22)
    return cairn__fail(CAIRN_E_FORMAT, "%s: %s: not a ZIP (.npz) file: only %llu bytes", fn, path,
                       (unsigned long long)fsize);
  size_t tail_len = fsize < 65535 + 22 ? (size_t)fsize : 65535 + 22;
  uint64_t tail_off = fsize - tail_len;
  unsigned char *tail = malloc(tail_len);
  if (!tail) return cairn__fail(CAIRN_E_NOMEM, "%s: %s: out of memory", fn, path);
  if (pread_all(fd, tail, tail_len, tail_off) != 0) {
    int e = errno;
    free(tail);
    return cairn__fail(CAIRN_E_IO, "%s: %s: read error: %s", fn, path, strerror(e));
  }
  long e = -1;
  for (long p = (long)tail_len - 22; p >= 0; p--)
    if (rd32(tail + p) == SIG_EOCD && (size_t)p + 22 + rd16(tail + p + 20) == tail_len) {
      e = p;
      break;
    }
  if (e < 0) {
    free(tail);
    return cairn__fail(CAIRN_E_FORMAT, "%s: %s: not a ZIP (.npz) file: no end-of-central-directory record",
                       fn, path);
  }
  const unsigned char *E = tail + e;
  uint64_t eocd_off = tail_off + (uint64_t)e, cd_end = eocd_off;
  uint64_t n_disk = rd16(E + 8), n_total = rd16(E + 10), cd_size = rd32(E + 12), cd_off = rd32(E + 16);
  int multi = rd16(E + 4) != 0 || rd16(E + 6) != 0;
  free(tail);
  if (multi) return cairn__fail(CAIRN_E_UNSUPPORTED, "%s: %s: multi-disk ZIP archives are not supported", fn, path);
  unsigned char L[20], Z[56];
  if (eocd_off >= 20) {
    if (pread_all(fd, L, 20, eocd_off - 20) != 0)
      return cairn__fail(CAIRN_E_IO, "%s: %s: read error: %s", fn, path, strerror(errno));
    if (rd32(L) == SIG_LOC64) {
      uint64_t z_off = rd64(L + 8);
      if (rd32(L + 4) != 0 || rd32(L + 16) > 1)
        return cairn__fail(CAIRN_E_UNSUPPORTED, "%s: %s: multi-disk ZIP64 archives are not supported", fn, path);
      if (z_off > eocd_off - 20 || eocd_off - 20 - z_off < 56)
        return cairn__fail(CAIRN_E_FORMAT, "%s: %s: ZIP64 end record offset %llu is out of bounds", fn, path,
                           (unsigned long long)z_off);
      if (pread_all(fd, Z, 56, z_off) != 0)
        return cairn__fail(CAIRN_E_IO, "%s: %s: read error: %s", fn, path, strerror(errno));
      if (rd32(Z) != SIG_EOCD64 || rd64(Z + 4) != eocd_off - 20 - z_off - 12)
        return cairn__fail(CAIRN_E_FORMAT, "%s: %s: bad ZIP64 end-of-central-directory record at offset %llu",
                           fn, path, (unsigned long long)z_off);
      if (rd32(Z + 16) != 0 || rd32(Z + 20) != 0)
        return cairn__fail(CAIRN_E_UNSUPPORTED, "%s: %s: multi-disk ZIP64 archives are not supported", fn, path);
      n_disk = rd64(Z + 24);
      n_total = rd64(Z + 32);
      cd_size = rd64(Z + 40);
      cd_off = rd64(Z + 48);
      cd_end = z_off;
    }
  }
  if (n_disk != n_total)
    return cairn__fail(CAIRN_E_UNSUPPORTED, "%s: %s: multi-disk ZIP archives are not supported", fn, path);
  if (n_total > NPZ_MAX_MEMBERS)
    return cairn__fail(CAIRN_E_LIMIT, "%s: %s: the end record claims %llu members, over the limit of %u",
                       fn, path, (unsigned long long)n_total, NPZ_MAX_MEMBERS);
  if (cd_size > NPZ_CD_MAX_BYTES)
    return cairn__fail(CAIRN_E_LIMIT,
                       "%s: %s: the end record claims a central directory of %llu bytes, over the limit "
                       "of %u",
                       fn, path, (unsigned long long)cd_size, NPZ_CD_MAX_BYTES);
  if (cd_off > cd_end || cd_size != cd_end - cd_off)
    return cairn__fail(CAIRN_E_FORMAT,
                       "%s: %s: central directory (offset %llu, %llu bytes) does not end where the end "
                       "record starts (%llu): a truncated or damaged ZIP",
                       fn, path, (unsigned long long)cd_off, (unsigned long long)cd_size, (unsigned long long)cd_end);
  if (n_total > cd_size / 46)
    return cairn__fail(CAIRN_E_FORMAT, "%s: %s: %llu members cannot fit in a %llu-byte central directory",
                       fn, path, (unsigned long long)n_total, (unsigned long long)cd_size);
  return check_no_overlap(fd, fn, path, n_total, cd_off, cd_size);
}

/* ---- open ------------------------------------------------------------------------- */

void cairn_npz_reader_close(cairn_npz_reader *r) {
  if (!r) return;
  if (r->za) zip_discard(r->za);
  for (size_t i = 0; i < r->n; i++) free(r->m[i].name);
  free(r->m);
  free(r->path);
  free(r);
}

size_t cairn_npz_reader_count(const cairn_npz_reader *r) { return r ? r->n : 0; }
const char *cairn_npz_reader_name(const cairn_npz_reader *r, size_t i) {
  return r && i < r->n ? r->m[i].name : NULL;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The first name that appears twice among the n names of za, or NULL. */
static char *find_duplicate(zip_t *za, zip_int64_t n) {
  const char **v = malloc((size_t)(n ? n : 1) * sizeof *v);
  char *dup = NULL;
  if (!v) return NULL;
  zip_int64_t k = 0;
  for (zip_int64_t i = 0; i < n; i++) {
    const char *s = zip_get_name(za, (zip_uint64_t)i, ZIP_FL_ENC_RAW);
    if (s) v[k++] = s;
  }
  qsort(v, (size_t)k, sizeof *v, cmp_str);
  for (zip_int64_t i = 0; i + 1 < k && !dup; i++)
    if (strcmp(v[i], v[i + 1]) == 0) dup = strdup(v[i]);
  free(v);
  return dup;
}

static cairn_status zip_open_error(const char *fn, const char *path, int zerr, int fd_dup) {
  zip_error_t ze;
  zip_error_init_with_code(&ze, zerr);
  const char *what = zip_error_strerror(&ze);
  cairn_status s;
  if (zerr == ZIP_ER_EXISTS && fd_dup >= 0) {
    /* libzip (ZIP_CHECKCONS) refuses a name seen twice without saying which:
     * a second, lenient open finds it. */
    int e2 = 0;
    zip_t *za = zip_fdopen(fd_dup, ZIP_RDONLY, &e2);
    char *dup = za ? find_duplicate(za, zip_get_num_entries(za, 0)) : NULL;
    if (za) zip_discard(za);
    else close(fd_dup);
    fd_dup = -1;
    s = cairn__fail(CAIRN_E_FORMAT, "%s: %s: member name '%s' appears twice", fn, path, dup ? dup : "?");
    free(dup);
  } else if (zerr == ZIP_ER_NOZIP) {
    s = cairn__fail(CAIRN_E_FORMAT, "%s: %s: not a ZIP (.npz) file (%s)", fn, path, what);
  } else if (zerr == ZIP_ER_MEMORY) {
    s = cairn__fail(CAIRN_E_NOMEM, "%s: %s: %s", fn, path, what);
  } else if (zerr == ZIP_ER_READ || zerr == ZIP_ER_SEEK || zerr == ZIP_ER_OPEN) {
    s = cairn__fail(CAIRN_E_IO, "%s: %s: %s", fn, path, what);
  } else {
    s = cairn__fail(CAIRN_E_FORMAT,
                    "%s: %s: a damaged ZIP (%s: the central directory and the members' local headers "
                    "disagree, or the file is cut short)",
                    fn, path, what);
  }
  if (fd_dup >= 0) close(fd_dup);
  zip_error_fini(&ze);
  return s;
}

/* Directory entry i of the archive: its name (safe), sizes and CRC into
 * r->m[r->n] (r->n advanced once the name is kept), and the checks of its
 * encryption, method and sizes. */
static cairn_status read_member_entry(cairn_npz_reader *r, const char *fn, const char *path, zip_int64_t i) {
  zip_stat_t zs;
  const char *name = zip_get_name(r->za, (zip_uint64_t)i, ZIP_FL_ENC_RAW);
  if (!name || zip_stat_index(r->za, (zip_uint64_t)i, ZIP_FL_ENC_RAW, &zs) != 0)
    return cairn__fail(CAIRN_E_FORMAT, "%s: %s: member %lld: %s", fn, path, (long long)i, zip_strerror(r->za));
  npz_member *m = &r->m[r->n];
  if (!(m->name = strdup(name))) return cairn__fail(CAIRN_E_NOMEM, "%s: %s: out of memory", fn, path);
  r->n++;
  m->usize = zs.size;
  m->csize = zs.comp_size;
  m->crc = zs.crc;
  if (!cairn__npz_name_safe(name, strlen(name)))
    return cairn__fail(CAIRN_E_FORMAT,
                       "%s: %s: member %lld has an unsafe name (absolute path, '..', backslash, control "
                       "character or invalid UTF-8)",
                       fn, path, (long long)i);
  if ((zs.valid & ZIP_STAT_ENCRYPTION_METHOD) && zs.encryption_method != ZIP_EM_NONE)
    return cairn__fail(CAIRN_E_UNSUPPORTED, "%s: %s: member '%s' is encrypted", fn, path, name);
  if (zs.comp_method != ZIP_CM_STORE && zs.comp_method != ZIP_CM_DEFLATE)
    return cairn__fail(CAIRN_E_UNSUPPORTED,
                       "%s: %s: member '%s' uses compression method %u (only stored and deflate are "
                       "supported, as numpy.savez and savez_compressed write)",
                       fn, path, name, (unsigned)zs.comp_method);
  if (zs.comp_method == ZIP_CM_STORE ? zs.comp_size != zs.size
                                     : (zs.comp_size == 0 || zs.size / DEFLATE_MAX_RATIO > zs.comp_size))
    return cairn__fail(CAIRN_E_FORMAT, "%s: %s: member '%s' claims %llu bytes from %llu %s bytes: impossible",
                       fn, path, name, (unsigned long long)zs.size, (unsigned long long)zs.comp_size,
                       zs.comp_method == ZIP_CM_STORE ? "stored" : "deflated");
  return CAIRN_OK;
}

cairn_status cairn__npz_reader_open_fd(int fd, const char *fn, const char *path, cairn_npz_reader **out,
                                      int *not_zip) {
  *out = NULL;
  if (not_zip) *not_zip = 0;
  struct stat st;
  if (fstat(fd, &st) != 0) return cairn__fail(CAIRN_E_IO, "%s: %s: %s", fn, path, strerror(errno));
  if (!S_ISREG(st.st_mode)) return cairn__fail(CAIRN_E_FORMAT, "%s: %s: not a regular file", fn, path);
  cairn_status s = check_end_records(fd, fn, path, (uint64_t)st.st_size);
  if (s) {
    if (not_zip) *not_zip = 1;
    return s;
  }
  cairn_npz_reader *r = calloc(1, sizeof *r);
  if (!r || !(r->path = strdup(path))) {
    free(r);
    return cairn__fail(CAIRN_E_NOMEM, "%s: %s: out of memory", fn, path);
  }
  /* ZIP_CHECKCONS: the end record must end the file, the directory must
   * end where the end record starts, and every local header must agree
   * with its directory entry (name, method, CRC, sizes). libzip owns the
   * descriptor it is given: a duplicate of the caller's. */
  int zfd = dup(fd), fd_dup = dup(fd), zerr = 0;
  r->za = zfd >= 0 ? zip_fdopen(zfd, ZIP_RDONLY | ZIP_CHECKCONS, &zerr) : NULL;
  if (!r->za) {
    if (zfd >= 0) close(zfd);
    else zerr = ZIP_ER_OPEN;
    cairn_npz_reader_close(r);
    return zip_open_error(fn, path, zerr, fd_dup);
  }
  if (fd_dup >= 0) close(fd_dup);
  zip_int64_t n = zip_get_num_entries(r->za, 0);
  if (n < 0 || (uint64_t)n > NPZ_MAX_MEMBERS) {
    cairn_npz_reader_close(r);
    return cairn__fail(CAIRN_E_LIMIT, "%s: %s: %lld members", fn, path, (long long)n);
  }
  r->m = calloc((size_t)(n ? n : 1), sizeof *r->m);
  if (!r->m) {
    cairn_npz_reader_close(r);
    return cairn__fail(CAIRN_E_NOMEM, "%s: %s: out of memory", fn, path);
  }
  for (zip_int64_t i = 0; i < n; i++)
    if ((s = read_member_entry(r, fn, path, i)) != CAIRN_OK) {
      cairn_npz_reader_close(r);
      return s;
    }
  *out = r;
  return CAIRN_OK;
}

/* ---- .npy header ------------------------------------------------------------------- */

typedef struct npy_header {
  char descr[16];
  int fortran;
  int rank;
  int64_t shape[NPZ_MAX_RANK];
} npy_header;

#define seterr(err, errlen, ...) snprintf(err, errlen, __VA_ARGS__)
typedef struct lexer {
  const char *p, *end;
} lexer;

static void lx_ws(lexer *l) { l->p = cairn__text_skip_ws(l->p, l->end); }
static int lx_eat(lexer *l, char c) { return cairn__text_eat(&l->p, l->end, c); }
/* A Python string literal without escapes, into out (at most cap-1 bytes). */
static int lx_string(lexer *l, char *out, size_t cap) {
  lx_ws(l);
  if (l->p >= l->end || (*l->p != '\'' && *l->p != '"')) return 0;
  char q = *l->p++;
  size_t n = 0;
  while (l->p < l->end && *l->p != q) {
    unsigned char c = (unsigned char)*l->p;
    if (c < 0x20 || c >= 0x7F || c == '\\' || n + 1 >= cap) return 0;
    out[n++] = (char)c;
    l->p++;
  }
  if (l->p >= l->end) return 0;
  l->p++;
  out[n] = '\0';
  return 1;
}
static int lx_word(lexer *l, const char *w) {
  lx_ws(l);
  size_t n = strlen(w);
  if ((size_t)(l->end - l->p) < n || memcmp(l->p, w, n) != 0) return 0;
  const char *after = l->p + n;
  if (after < l->end && ((*after >= 'a' && *after <= 'z') || (*after >= 'A' && *after <= 'Z') ||
                         (*after >= '0' && *after <= '9') || *after == '_'))
    return 0;
  l->p = after;
  return 1;
}
/* A non-negative decimal integer (optionally with Python 2's L suffix). */
static int lx_int(lexer *l, int64_t *v) {
  lx_ws(l);
  if (l->p >= l->end || *l->p < '0' || *l->p > '9') return 0;
  if (*l->p == '0' && l->p + 1 < l->end && l->p[1] >= '0' && l->p[1] <= '9') return 0;
  uint64_t x = 0;
  while (l->p < l->end && *l->p >= '0' && *l->p <= '9') {
    unsigned d = (unsigned)(*l->p - '0');
    if (x > ((uint64_t)INT64_MAX - d) / 10) return 0;
    x = x * 10 + d;
    l->p++;
  }
  if (l->p < l->end && *l->p == 'L') l->p++;
  *v = (int64_t)x;
  return 1;
}

static int parse_header_dict(const char *text, size_t len, npy_header *h, const char *what, char *err,
                             size_t errlen) {
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)text[i];
    if ((c < 0x20 && c != '\n' && c != '\t' && c != '\r') || c >= 0x7F) {
      seterr(err, errlen, "%s: .npy header has a non-printable byte 0x%02x at offset %zu", what, c, i);
      return -1;
    }
  }
  lexer l = {text, text + len};
  int have_descr = 0, have_fortran = 0, have_shape = 0;
  if (!lx_eat(&l, '{')) goto bad;
  for (;;) {
    if (lx_eat(&l, '}')) break;
    char key[32];
    if (!lx_string(&l, key, sizeof key)) goto bad;
    if (!lx_eat(&l, ':')) goto bad;
    if (strcmp(key, "descr") == 0) {
      if (have_descr++) goto dup;
      if (!lx_string(&l, h->descr, sizeof h->descr)) {
        seterr(err, errlen,
               "%s: .npy 'descr' is not a simple dtype string (structured and object arrays are not "
               "supported)",
               what);
        return -1;
      }
    } else if (strcmp(key, "fortran_order") == 0) {
      if (have_fortran++) goto dup;
      if (lx_word(&l, "True"))
        h->fortran = 1;
      else if (lx_word(&l, "False"))
        h->fortran = 0;
      else
        goto bad;
    } else if (strcmp(key, "shape") == 0) {
      if (have_shape++) goto dup;
      if (!lx_eat(&l, '(')) goto bad;
      h->rank = 0;
      int trailing_comma = 0;
      for (;;) {
        if (lx_eat(&l, ')')) break;
        int64_t v;
        if (!lx_int(&l, &v)) goto bad;
        if (h->rank >= NPZ_MAX_RANK) {
          seterr(err, errlen, "%s: .npy shape has more than %d dimensions", what, NPZ_MAX_RANK);
          return -1;
        }
        h->shape[h->rank++] = v;
        trailing_comma = lx_eat(&l, ',');
        if (!trailing_comma) {
          if (!lx_eat(&l, ')')) goto bad;
          break;
        }
      }
      /* "(3)" is the integer 3 in Python, not a tuple. */
      if (h->rank == 1 && !trailing_comma) goto bad;
    } else {
      seterr(err, errlen, "%s: .npy header has an unexpected key '%s'", what, key);
      return -1;
    }
    if (lx_eat(&l, ',')) continue;
    if (lx_eat(&l, '}')) break;
    goto bad;
  }
  lx_ws(&l);
  if (l.p != l.end) goto bad;
  if (!have_descr || !have_fortran || !have_shape) {
    seterr(err, errlen, "%s: .npy header lacks '%s'", what,
           !have_descr ? "descr" : !have_fortran ? "fortran_order" : "shape");
    return -1;
  }
  return 0;
dup:
  seterr(err, errlen, "%s: .npy header repeats a key", what);
  return -1;
bad:
  seterr(err, errlen, "%s: .npy header is not the dict literal NumPy writes (at offset %zu)", what,
         (size_t)(l.p - text));
  return -1;
}


/* descr ("<f4", "|b1", ...) to a cairn dtype; *swap when the data is
 * big-endian (the checkpoint holds little-endian bytes). */
static int descr_dtype(const char *descr, cairn_dtype *dt, int *swap) {
  if (strlen(descr) != 3) return -1;
  char order = descr[0], k = descr[1];
  int size = descr[2] - '0';
  if (size == 1 ? (order != '|' && order != '<' && order != '>') : (order != '<' && order != '>')) return -1;
  *swap = size > 1 && order == '>';
  if (k == 'f' && size == 2) *dt = CAIRN_DTYPE_F16;
  else if (k == 'f' && size == 4) *dt = CAIRN_DTYPE_F32;
  else if (k == 'f' && size == 8) *dt = CAIRN_DTYPE_F64;
  else if (k == 'i' && size == 1) *dt = CAIRN_DTYPE_I8;
  else if (k == 'i' && size == 2) *dt = CAIRN_DTYPE_I16;
  else if (k == 'i' && size == 4) *dt = CAIRN_DTYPE_I32;
  else if (k == 'i' && size == 8) *dt = CAIRN_DTYPE_I64;
  else if (k == 'u' && size == 1) *dt = CAIRN_DTYPE_U8;
  else if (k == 'u' && size == 2) *dt = CAIRN_DTYPE_U16;
  else if (k == 'u' && size == 4) *dt = CAIRN_DTYPE_U32;
  else if (k == 'u' && size == 8) *dt = CAIRN_DTYPE_U64;
  else if (k == 'b' && size == 1) *dt = CAIRN_DTYPE_BOOL;
  else return -1;
  return 0;
}

/* Host order and 0/1 bools, in place, on whole items. */
static void fix_items(unsigned char *p, size_t n, size_t es, int swap, int is_bool) {
  if (swap)
    for (size_t i = 0; i + es <= n; i += es)
      for (size_t a = 0, b = es - 1; a < b; a++, b--) {
        unsigned char t = p[i + a];
        p[i + a] = p[i + b];
        p[i + b] = t;
      }
  if (is_bool)
    for (size_t i = 0; i < n; i++) p[i] = p[i] != 0;
}

/* ---- one member, streamed --------------------------------------------------------- */

typedef struct mstream {
  const char *fn; /* the call, in messages */
  const char *path;
  const npz_member *m;
  zip_file_t *zf;
  uint64_t got;  /* bytes inflated so far */
  uint32_t crc;  /* CRC-32 of them */
  cairn_status st; /* the code of ms_read's last failure */
} mstream;

/* Reads up to len bytes of the member into buf: returns how many (fewer
 * only at its end), or -1 with the message set. Never more than one byte
 * past the declared size is asked for, so a member that inflates beyond
 * its claim is stopped there, not read to its end. */
static int64_t ms_read(mstream *ms, void *buf, size_t len) {
  const npz_member *m = ms->m;
  uint64_t room = m->usize - ms->got + 1;
  if (len > room) len = (size_t)room;
  zip_int64_t n = len ? zip_fread(ms->zf, buf, len) : 0;
  if (n > 0) {
    ms->crc = (uint32_t)crc32(ms->crc, buf, (uInt)n);
    ms->got += (uint64_t)n;
    if (ms->got > m->usize) {
      ms->st = cairn__fail(CAIRN_E_FORMAT, "%s: %s: member '%s' inflates to more than its declared %llu bytes",
                  ms->fn, ms->path, m->name, (unsigned long long)m->usize);
      return -1;
    }
    return n;
  }
  if (n == 0) {
    /* libzip checks the CRC when the member ends, not the size a stored
     * header declares (it compares with what it inflated itself). */
    if (ms->got != m->usize) {
      ms->st = cairn__fail(CAIRN_E_FORMAT,
                           "%s: %s: member '%s' inflates to %llu bytes, but its header declares %llu",
                           ms->fn, ms->path, m->name, (unsigned long long)ms->got, (unsigned long long)m->usize);
      return -1;
    }
    return 0;
  }
  /* The messages say which check failed, with both values (the reader
   * computes the CRC-32 as well). */
  int ze = zip_error_code_zip(zip_file_get_error(ms->zf));
  if (ze == ZIP_ER_INCONS && ms->got != m->usize)
    ms->st = cairn__fail(CAIRN_E_FORMAT, "%s: %s: member '%s' inflates to %llu bytes, but its header declares %llu",
                ms->fn, ms->path, m->name, (unsigned long long)ms->got, (unsigned long long)m->usize);
  else if (ze == ZIP_ER_CRC)
    ms->st = cairn__fail(CAIRN_E_CORRUPT, "%s: %s: member '%s': CRC-32 %08x does not match the stored %08x (corrupt)",
                ms->fn, ms->path, m->name, ms->crc, m->crc);
  else if (ze == ZIP_ER_READ || ze == ZIP_ER_SEEK)
    ms->st = cairn__fail(CAIRN_E_IO, "%s: %s: member '%s': %s", ms->fn, ms->path, m->name,
                zip_file_strerror(ms->zf));
  else
    ms->st = cairn__fail(CAIRN_E_FORMAT,
                "%s: %s: member '%s': %s after %llu of its declared %llu bytes (invalid or cut-short "
                "deflate data)",
                ms->fn, ms->path, m->name, zip_file_strerror(ms->zf), (unsigned long long)ms->got,
                (unsigned long long)m->usize);
  return -1;
}

/* Reads exactly len bytes, or fails: *short_read is set when the member
 * ended first (no message then). */
static int ms_read_full(mstream *ms, void *buf, size_t len, int *short_read) {
  unsigned char *p = buf;
  *short_read = 0;
  while (len > 0) {
    int64_t n = ms_read(ms, p, len);
    if (n < 0) return -1;
    if (n == 0) {
      *short_read = 1;
      return -1;
    }
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

/* Reads the member to its end, so that libzip checks its CRC and size:
 * 0 when it is intact (as the container says), else -1 with the message.
 * Run before a .npy-level error is reported, so that a damaged archive is
 * reported as damaged, not as a strange array. */
static int ms_drain(mstream *ms, unsigned char *buf, size_t cap) {
  for (;;) {
    int64_t n = ms_read(ms, buf, cap);
    if (n < 0) return -1;
    if (n == 0) return 0;
  }
}

/* Fortran order → C order for count items of es bytes in src, handed to
 * sink through buf (cap bytes, a multiple of es). */
static cairn_status append_transposed(const npz_sink *sink, const unsigned char *src, int rank, const int64_t *shape,
                                      uint64_t count, size_t es, unsigned char *buf, size_t cap) {
  int64_t idx[NPZ_MAX_RANK] = {0};
  uint64_t fstride[NPZ_MAX_RANK], s = 1, off = 0;
  for (int k = 0; k < rank; k++) {
    fstride[k] = s;
    s *= (uint64_t)shape[k];
  }
  size_t fill = 0;
  for (uint64_t i = 0; i < count; i++) {
    memcpy(buf + fill, src + off * es, es);
    fill += es;
    if (fill + es > cap || i + 1 == count) {
      cairn_status st = sink->data(sink->u, buf, fill);
      if (st) return st;
      fill = 0;
    }
    for (int k = rank - 1; k >= 0; k--) {
      if (++idx[k] < shape[k]) {
        off += fstride[k];
        break;
      }
      off -= fstride[k] * (uint64_t)(shape[k] - 1);
      idx[k] = 0;
    }
  }
  return CAIRN_OK;
}

/* A member's .npy header, as read and checked. */
typedef struct npy_info {
  npy_header h;
  cairn_dtype dt;
  int swap;
  size_t es;
  uint64_t count, nbytes, data_off;
} npy_info;

/* The record at the start of a member: magic, version, header length and
 * the header dict, into *ni. 0; 1 with the message in err and its code in
 * *code (the member is then drained); -1 when the stream failed (ms->st). */
static int read_npy_header(mstream *ms, unsigned char *buf, const char *what, npy_info *ni, char *err, size_t errlen,
                           cairn_status *code) {
  static const unsigned char magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  const npz_member *m = ms->m;
  unsigned char pre[12];
  int shortr = 0;
  uint64_t hstart = 10, hlen = 0;
  if (ms_read_full(ms, pre, 10, &shortr) != 0) {
    if (!shortr) return -1;
    seterr(err, errlen, "%s: not a .npy array (%llu bytes, shorter than a .npy header)", what,
           (unsigned long long)ms->got);
    return 1;
  }
  if (memcmp(pre, magic, 6) != 0) {
    seterr(err, errlen, "%s: not a .npy array (bad magic)", what);
    return 1;
  }
  if (pre[6] < 1 || pre[6] > 3 || pre[7] != 0) {
    seterr(err, errlen, "%s: .npy format version %u.%u is not supported (1.0, 2.0, 3.0 are)", what, pre[6], pre[7]);
    *code = CAIRN_E_UNSUPPORTED;
    return 1;
  }
  if (pre[6] == 1) {
    hlen = rd16(pre + 8);
  } else {
    if (ms_read_full(ms, pre + 10, 2, &shortr) != 0) {
      if (!shortr) return -1;
      seterr(err, errlen, "%s: .npy header is cut short", what);
      return 1;
    }
    hstart = 12;
    hlen = rd32(pre + 8);
  }
  if (hlen > NPY_MAX_HEADER) {
    seterr(err, errlen, "%s: .npy header of %llu bytes exceeds the %u-byte limit", what, (unsigned long long)hlen,
           NPY_MAX_HEADER);
    return 1;
  }
  if (ms_read_full(ms, buf, (size_t)hlen, &shortr) != 0) {
    if (!shortr) return -1;
    seterr(err, errlen, "%s: .npy header (%llu bytes) runs past the end of the member (%llu bytes)", what,
           (unsigned long long)hlen, (unsigned long long)m->usize);
    return 1;
  }
  if (parse_header_dict((const char *)buf, (size_t)hlen, &ni->h, what, err, errlen) != 0) return 1;
  if (descr_dtype(ni->h.descr, &ni->dt, &ni->swap) != 0) {
    seterr(err, errlen,
           "%s: dtype '%s' is not supported (supported: float16/32/64, int8-64, uint8-64 and bool, in '<', '>' or "
           "'|' byte order; bfloat16 has no NumPy dtype)",
           what, ni->h.descr);
    *code = CAIRN_E_UNSUPPORTED;
    return 1;
  }
  if (ni->h.rank > CAIRN_MAX_RANK) {
    seterr(err, errlen, "%s has rank %d; cairn tensors have at most %d dimensions", what, ni->h.rank, CAIRN_MAX_RANK);
    *code = CAIRN_E_UNSUPPORTED;
    return 1;
  }
  ni->es = cairn_dtype_size(ni->dt);
  ni->count = 1;
  for (int k = 0; k < ni->h.rank; k++) {
    if (ni->h.shape[k] != 0 && ni->count > UINT64_MAX / (uint64_t)ni->h.shape[k]) {
      seterr(err, errlen, "%s: .npy shape overflows", what);
      return 1;
    }
    ni->count *= (uint64_t)ni->h.shape[k];
  }
  if (ni->count > UINT64_MAX / ni->es) {
    seterr(err, errlen, "%s: .npy shape overflows", what);
    return 1;
  }
  ni->nbytes = ni->count * ni->es;
  ni->data_off = hstart + hlen;
  return 0;
}

/* The record after the header: the array's data, streamed to k (byte
 * order and bool values fixed; a Fortran-order array, read whole and
 * bounded, transposed to C order), after k's header. */
static cairn_status write_npy_data(mstream *ms, const npz_sink *k, unsigned char *buf, const char *what,
                                   const npy_info *ni) {
  const npz_member *m = ms->m;
  int shortr = 0;
  int fortran = ni->h.fortran && ni->h.rank > 1 && ni->count > 1;
  if (fortran && ni->nbytes > NPZ_FORTRAN_MAX_BYTES)
    return cairn__fail(CAIRN_E_LIMIT,
                       "%s is a Fortran-order array of rank %d and %llu bytes; cairn transposes such arrays to C order "
                       "in memory only up to %u bytes (save it with numpy.ascontiguousarray, or split it)",
                       what, ni->h.rank, (unsigned long long)ni->nbytes, NPZ_FORTRAN_MAX_BYTES);
  cairn_status s;
  unsigned char *whole = NULL;
  if (fortran) {
    /* Read whole (bounded above), then written in C order. */
    whole = malloc(ni->nbytes ? (size_t)ni->nbytes : 1);
    if (!whole)
      return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory (%llu bytes)", what, (unsigned long long)ni->nbytes);
    if (ms_read_full(ms, whole, (size_t)ni->nbytes, &shortr) != 0) {
      free(whole);
      if (shortr) return cairn__fail(CAIRN_E_FORMAT, "%s: ends early", what); /* not reached: sizes checked */
      return ms->st;
    }
    fix_items(whole, (size_t)ni->nbytes, ni->es, ni->swap, ni->dt == CAIRN_DTYPE_BOOL);
  }
  if ((s = k->header(k->u, ni->dt, ni->h.rank, ni->h.shape, ni->nbytes))) {
    free(whole);
    return s;
  }
  if (fortran) {
    s = append_transposed(k, whole, ni->h.rank, ni->h.shape, ni->count, ni->es, buf, NPZ_IO_CHUNK);
    free(whole);
    return s;
  }
  uint64_t left = ni->nbytes;
  while (left > 0) {
    size_t len = left < NPZ_IO_CHUNK ? (size_t)left : NPZ_IO_CHUNK;
    if (ms_read_full(ms, buf, len, &shortr) != 0) {
      if (shortr)
        return cairn__fail(CAIRN_E_FORMAT,
                           "%s: %s: member '%s' inflates to %llu bytes, but its header declares %llu",
                           ms->fn, ms->path, m->name, (unsigned long long)ms->got, (unsigned long long)m->usize);
      return ms->st;
    }
    fix_items(buf, len, ni->es, ni->swap, ni->dt == CAIRN_DTYPE_BOOL);
    if ((s = k->data(k->u, buf, len))) return s;
    left -= len;
  }
  return CAIRN_OK;
}

/* The member, open in ms, record by record: its .npy header, then (with
 * k->data) its data and its end (libzip's CRC and size checks). buf holds
 * NPZ_IO_CHUNK bytes. */
static cairn_status stream_member(mstream *ms, const npz_sink *k, unsigned char *buf) {
  const npz_member *m = ms->m;
  char what[1024];
  snprintf(what, sizeof what, "%s: %s: member '%s'", ms->fn, ms->path, m->name);
  char err[2048] = "";
  cairn_status code = CAIRN_E_FORMAT;
  npy_info ni;
  memset(&ni, 0, sizeof ni);
  ni.dt = CAIRN_DTYPE_F32;
  int r = read_npy_header(ms, buf, what, &ni, err, sizeof err, &code);
  if (r < 0) return ms->st;
  if (r > 0) {
    if (ms_drain(ms, buf, NPZ_IO_CHUNK) != 0) return ms->st;
    return cairn__fail(code, "%s", err);
  }
  if (m->usize - ni.data_off != ni.nbytes) {
    /* The container's size is checked first (ms_drain): then the
     * difference is the array's own. */
    if (ms_drain(ms, buf, NPZ_IO_CHUNK) != 0) return ms->st;
    return cairn__fail(CAIRN_E_FORMAT,
                       "%s: .npy data is %llu bytes but the header's shape and dtype '%s' need %llu (file not fully "
                       "written?)",
                       what, (unsigned long long)(m->usize - ni.data_off), ni.h.descr, (unsigned long long)ni.nbytes);
  }
  if (ni.nbytes > NPZ_MAX_MEMBER_BYTES)
    return cairn__fail(CAIRN_E_LIMIT, "%s: %llu bytes of data exceed the limit of %llu bytes per member", what,
                       (unsigned long long)ni.nbytes, (unsigned long long)NPZ_MAX_MEMBER_BYTES);
  if (!k->data) return k->header(k->u, ni.dt, ni.h.rank, ni.h.shape, ni.nbytes);
  cairn_status s = write_npy_data(ms, k, buf, what, &ni);
  if (s) return s;
  /* The end of the member: libzip's CRC and size checks. */
  int64_t n = ms_read(ms, buf, 1);
  return n != 0 ? ms->st : CAIRN_OK; /* n > 0 cannot pass ms_read: sizes were checked */
}

cairn_status cairn__npz_member_stream(cairn_npz_reader *r, size_t i, const npz_sink *k) {
  const npz_member *m = &r->m[i];
  const char *fn = k->fn ? k->fn : "npz_reader_import";
  zip_file_t *zf = zip_fopen_index(r->za, i, 0);
  if (!zf) return cairn__fail(CAIRN_E_FORMAT, "%s: %s: member '%s': %s", fn, r->path, m->name, zip_strerror(r->za));
  unsigned char *buf = malloc(NPZ_IO_CHUNK > NPY_MAX_HEADER ? NPZ_IO_CHUNK : NPY_MAX_HEADER);
  if (!buf) {
    zip_fclose(zf);
    return cairn__fail(CAIRN_E_NOMEM, "%s: %s: out of memory", fn, r->path);
  }
  mstream ms = {.fn = fn, .path = r->path, .m = m, .zf = zf, .got = 0, .crc = (uint32_t)crc32(0, Z_NULL, 0), .st = CAIRN_E_FORMAT};
  cairn_status s = stream_member(&ms, k, buf);
  free(buf);
  zip_fclose(zf);
  return s;
}

/* cairn_npz_reader_import's sink: the checkpoint writer's streamed tensor. */
typedef struct import_sink {
  cairn_ckpt_writer *w;
  const char *name;
  int begun; /* the tensor is begun in w */
} import_sink;

static cairn_status import_header(void *u, cairn_dtype dt, int rank, const int64_t *shape, uint64_t nbytes) {
  (void)nbytes;
  import_sink *k = u;
  cairn_status s = cairn_ckpt_writer_begin(k->w, k->name, dt, rank, shape);
  k->begun = s == CAIRN_OK;
  return s;
}

static cairn_status import_data(void *u, const unsigned char *p, size_t n) {
  return cairn_ckpt_writer_append(((import_sink *)u)->w, p, n);
}

cairn_status cairn_npz_reader_import(cairn_npz_reader *r, size_t i, cairn_ckpt_writer *w, const char *name) {
  if (!r || !w || !name) return cairn__fail(CAIRN_E_NULL, "npz_reader_import: reader, writer or name is NULL");
  if (i >= r->n)
    return cairn__fail(CAIRN_E_INVALID, "npz_reader_import: %s: no member %zu (the archive has %zu)", r->path, i, r->n);
  import_sink is = {.w = w, .name = name};
  npz_sink k = {.header = import_header, .data = import_data, .u = &is};
  cairn_status s = cairn__npz_member_stream(r, i, &k);
  if (!s) s = cairn_ckpt_writer_end(w);
  if (s && is.begun && w->cur) cairn__ckw_set_failed(w, s); /* a partial record is in the file */
  return s;
}
