/* npz.c — NumPy .npz (ZIP of .npy) reader and writer; see npz.h.
 *
 * References: PKWARE APPNOTE.TXT 6.3 (local header 4.3.7, central directory
 * 4.3.12, ZIP64 end record 4.3.14 and locator 4.3.15, ZIP64 extra field
 * 4.5.3) and NumPy's numpy/lib/format.py (the .npy header).
 */
#define _POSIX_C_SOURCE 200809L

#include "npz.h"
#include "utf8.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <zlib.h>

#define SIG_LOCAL 0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_EOCD 0x06054b50u
#define SIG_EOCD64 0x06064b50u
#define SIG_LOC64 0x07064b50u
#define U32_MAX_ 0xFFFFFFFFu
#define NPY_MAX_HEADER 10000u
#define CD_MAX_BYTES (256u << 20)
#define IO_CHUNK (1u << 20)
/* Deflate cannot expand by more than 1032:1 (RFC 1951 block limits); a
 * member claiming more is malformed. */
#define DEFLATE_MAX_RATIO 1032u
/* A deflated member's buffer starts this big (or at its declared size, if
 * smaller) and doubles as output arrives. */
#define NPZ_GROW_START (1u << 20)

static void seterr(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || errlen == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

int npz_host_is_little(void) {
  const uint16_t one = 1;
  unsigned char b;
  memcpy(&b, &one, 1);
  return b == 1;
}

static uint16_t rd16(const unsigned char *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t rd32(const unsigned char *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static uint64_t rd64(const unsigned char *p) { return (uint64_t)rd32(p) | ((uint64_t)rd32(p + 4) << 32); }
static void wr16(unsigned char *p, uint16_t v) {
  p[0] = (unsigned char)v;
  p[1] = (unsigned char)(v >> 8);
}
static void wr32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void wr64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* zlib's crc32 takes a uInt length. */
static uint32_t crc32_big(uint32_t crc, const void *data, uint64_t len) {
  const unsigned char *p = data;
  while (len > 0) {
    uInt n = len > (1u << 30) ? (1u << 30) : (uInt)len;
    crc = (uint32_t)crc32(crc, p, n);
    p += n;
    len -= n;
  }
  return crc;
}

void npz_array_free(npz_array *a) {
  if (!a) return;
  free(a->block_);
  a->block_ = NULL;
  a->data = NULL;
}

/* ---- Names ------------------------------------------------------------------ */

int npz_name_is_safe(const char *name, size_t len) {
  const unsigned char *s = (const unsigned char *)name;
  if (len == 0 || len > 65535) return 0;
  if (s[0] == '/') return 0;
  if (len >= 2 && s[1] == ':' && ((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z')))
    return 0; /* a Windows drive */
  size_t comp_start = 0;
  for (size_t i = 0; i < len;) {
    uint32_t cp;
    size_t n = utf8_decode(s + i, len - i, &cp);
    if (n == 0) return 0;
    if (cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F) || cp == '\\') return 0;
    if (cp == '/') {
      size_t cl = i - comp_start;
      if (cl == 0 || (cl == 1 && s[comp_start] == '.') ||
          (cl == 2 && s[comp_start] == '.' && s[comp_start + 1] == '.'))
        return 0;
      comp_start = i + 1;
    }
    i += n;
  }
  size_t cl = len - comp_start;
  if (cl == 0 || (cl == 1 && s[comp_start] == '.') ||
      (cl == 2 && s[comp_start] == '.' && s[comp_start + 1] == '.'))
    return 0;
  return 1;
}

/* ---- .npy parsing ----------------------------------------------------------- */

typedef struct npy_header {
  char descr[16];
  int fortran;
  int rank;
  int64_t shape[NPZ_MAX_RANK];
} npy_header;

typedef struct lexer {
  const char *p, *end;
} lexer;

static void lx_ws(lexer *l) {
  while (l->p < l->end && (*l->p == ' ' || *l->p == '\t' || *l->p == '\n' || *l->p == '\r')) l->p++;
}
static int lx_eat(lexer *l, char c) {
  lx_ws(l);
  if (l->p < l->end && *l->p == c) {
    l->p++;
    return 1;
  }
  return 0;
}
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

/* Fills kind/itemsize from descr; *swap is set when the data is in the
 * other byte order than the host's. */
static int parse_descr(const char *descr, npz_kind *kind, int *itemsize, int *swap, const char *what,
                       char *err, size_t errlen) {
  size_t n = strlen(descr);
  int ok = 0;
  if (n == 3) {
    char order = descr[0], k = descr[1], sz = descr[2];
    int size = sz - '0';
    int valid_kind = (k == 'f' && (size == 2 || size == 4 || size == 8)) ||
                     ((k == 'i' || k == 'u') && (size == 1 || size == 2 || size == 4 || size == 8)) ||
                     (k == 'b' && size == 1);
    int valid_order = size == 1 ? (order == '|' || order == '<' || order == '>')
                                : (order == '<' || order == '>');
    if (valid_kind && valid_order) {
      *kind = (npz_kind)k;
      *itemsize = size;
      *swap = size > 1 && ((order == '<') != npz_host_is_little());
      ok = 1;
    }
  }
  if (!ok) {
    seterr(err, errlen,
           "%s: dtype '%s' is not supported (supported: float16/32/64, int8-64, uint8-64 and bool, "
           "in '<', '>' or '|' byte order; bfloat16 has no NumPy dtype)",
           what, descr);
    return -1;
  }
  return 0;
}

static void byteswap(void *data, uint64_t count, int itemsize) {
  unsigned char *p = data;
  for (uint64_t i = 0; i < count; i++, p += itemsize) {
    for (int a = 0, b = itemsize - 1; a < b; a++, b--) {
      unsigned char t = p[a];
      p[a] = p[b];
      p[b] = t;
    }
  }
}

/* Fortran order → C order. src and dst are count × itemsize bytes. */
static void fortran_to_c(unsigned char *dst, const unsigned char *src, int rank, const int64_t *shape,
                         uint64_t count, int itemsize) {
  int64_t idx[NPZ_MAX_RANK] = {0};
  uint64_t fstride[NPZ_MAX_RANK];
  uint64_t s = 1;
  for (int k = 0; k < rank; k++) {
    fstride[k] = s;
    s *= (uint64_t)shape[k];
  }
  uint64_t off = 0; /* element offset in src */
  for (uint64_t i = 0; i < count; i++) {
    memcpy(dst + i * (uint64_t)itemsize, src + off * (uint64_t)itemsize, (size_t)itemsize);
    for (int k = rank - 1; k >= 0; k--) {
      if (++idx[k] < shape[k]) {
        off += fstride[k];
        break;
      }
      off -= fstride[k] * (uint64_t)(shape[k] - 1);
      idx[k] = 0;
    }
  }
}

/* Parses the .npy image in buf (len bytes, malloc'd); on success takes
 * ownership of buf (out->block_). */
static int parse_npy_owned(unsigned char *buf, uint64_t len, const char *what, npz_array *out, char *err,
                           size_t errlen) {
  static const unsigned char magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  memset(out, 0, sizeof *out);
  if (len < 10 || memcmp(buf, magic, 6) != 0) {
    seterr(err, errlen, "%s: not a .npy array (bad magic)", what);
    return -1;
  }
  unsigned major = buf[6], minor = buf[7];
  if (major < 1 || major > 3 || minor != 0) {
    seterr(err, errlen, "%s: .npy format version %u.%u is not supported (1.0, 2.0, 3.0 are)", what,
           major, minor);
    return -1;
  }
  uint64_t hstart, hlen;
  if (major == 1) {
    hstart = 10;
    hlen = rd16(buf + 8);
  } else {
    if (len < 12) {
      seterr(err, errlen, "%s: .npy header is cut short", what);
      return -1;
    }
    hstart = 12;
    hlen = rd32(buf + 8);
  }
  if (hlen > NPY_MAX_HEADER) {
    seterr(err, errlen, "%s: .npy header of %llu bytes exceeds the %u-byte limit", what,
           (unsigned long long)hlen, NPY_MAX_HEADER);
    return -1;
  }
  if (hstart + hlen > len) {
    seterr(err, errlen, "%s: .npy header (%llu bytes) runs past the end of the member (%llu bytes)",
           what, (unsigned long long)hlen, (unsigned long long)len);
    return -1;
  }
  npy_header h;
  memset(&h, 0, sizeof h);
  if (parse_header_dict((const char *)buf + hstart, (size_t)hlen, &h, what, err, errlen) != 0) return -1;
  npz_kind kind;
  int itemsize, swap;
  if (parse_descr(h.descr, &kind, &itemsize, &swap, what, err, errlen) != 0) return -1;
  uint64_t count = 1;
  for (int k = 0; k < h.rank; k++) {
    uint64_t d = (uint64_t)h.shape[k];
    if (d != 0 && count > UINT64_MAX / d) {
      seterr(err, errlen, "%s: .npy shape overflows", what);
      return -1;
    }
    count *= d;
  }
  if (count > UINT64_MAX / (uint64_t)itemsize) {
    seterr(err, errlen, "%s: .npy shape overflows", what);
    return -1;
  }
  uint64_t nbytes = count * (uint64_t)itemsize;
  uint64_t data_off = hstart + hlen;
  if (len - data_off != nbytes) {
    seterr(err, errlen,
           "%s: .npy data is %llu bytes but the header's shape and dtype '%s' need %llu (file not "
           "fully written?)",
           what, (unsigned long long)(len - data_off), h.descr, (unsigned long long)nbytes);
    return -1;
  }
  unsigned char *data = buf + data_off;
  unsigned char *block = buf;
  if (swap) byteswap(data, count, itemsize);
  if (kind == NPZ_KIND_BOOL)
    for (uint64_t i = 0; i < count; i++) data[i] = data[i] != 0;
  if (h.fortran && h.rank > 1 && count > 1) {
    unsigned char *c = malloc((size_t)nbytes);
    if (!c) {
      seterr(err, errlen, "%s: out of memory (%llu bytes)", what, (unsigned long long)nbytes);
      return -1;
    }
    fortran_to_c(c, data, h.rank, h.shape, count, itemsize);
    free(buf);
    block = c;
    data = c;
  }
  snprintf(out->descr, sizeof out->descr, "%s", h.descr);
  out->kind = kind;
  out->itemsize = itemsize;
  out->rank = h.rank;
  memcpy(out->shape, h.shape, sizeof h.shape);
  out->count = count;
  out->data = data;
  out->block_ = block;
  return 0;
}

/* ---- ZIP reading ------------------------------------------------------------ */

typedef struct npz_member {
  char *name;
  size_t name_len;
  uint16_t flags, method;
  uint32_t crc;
  uint64_t csize, usize, lh_off, data_off;
} npz_member;

struct npz_reader {
  int fd;
  char *path;
  uint64_t fsize;
  npz_limits lim;
  npz_member *m;
  size_t n;
};

static int pread_all(int fd, void *buf, uint64_t len, uint64_t off) {
  unsigned char *p = buf;
  while (len > 0) {
    size_t want = len > (1u << 30) ? (1u << 30) : (size_t)len;
    ssize_t r = pread(fd, p, want, (off_t)off);
    if (r < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (r == 0) {
      errno = EIO; /* the file shrank under us */
      return -1;
    }
    p += r;
    off += (uint64_t)r;
    len -= (uint64_t)r;
  }
  return 0;
}

void npz_reader_close(npz_reader *r) {
  if (!r) return;
  if (r->fd >= 0) close(r->fd);
  for (size_t i = 0; i < r->n; i++) free(r->m[i].name);
  free(r->m);
  free(r->path);
  free(r);
}

size_t npz_reader_count(const npz_reader *r) { return r->n; }
const char *npz_reader_name(const npz_reader *r, size_t i) { return i < r->n ? r->m[i].name : NULL; }

static int cmp_off(const void *a, const void *b) {
  const npz_member *x = *(npz_member *const *)a, *y = *(npz_member *const *)b;
  return x->lh_off < y->lh_off ? -1 : x->lh_off > y->lh_off;
}
static int cmp_name(const void *a, const void *b) {
  const npz_member *x = *(npz_member *const *)a, *y = *(npz_member *const *)b;
  return strcmp(x->name, y->name);
}

/* Looks for a ZIP64 extended-information field (id 1) in extra; fills the
 * fields whose 32-bit value was 0xFFFFFFFF, in the APPNOTE order. */
static int zip64_extra(const unsigned char *x, size_t xlen, int need_u, int need_c, int need_off,
                       uint64_t *u, uint64_t *c, uint64_t *off, int *found) {
  *found = 0;
  while (xlen >= 4) {
    uint16_t id = rd16(x), sz = rd16(x + 2);
    if ((size_t)sz + 4 > xlen) return -1;
    if (id == 1) {
      const unsigned char *f = x + 4;
      size_t left = sz;
      *found = 1;
      if (need_u) {
        if (left < 8) return -1;
        *u = rd64(f); f += 8; left -= 8;
      }
      if (need_c) {
        if (left < 8) return -1;
        *c = rd64(f); f += 8; left -= 8;
      }
      if (need_off) {
        if (left < 8) return -1;
        *off = rd64(f);
      }
      return 0;
    }
    x += 4 + sz;
    xlen -= 4 + (size_t)sz;
  }
  return 0;
}

/* pread_all with the reader's message on failure. */
static int read_at(const npz_reader *r, void *buf, uint64_t len, uint64_t off, char *err, size_t errlen) {
  if (pread_all(r->fd, buf, len, off) == 0) return 0;
  seterr(err, errlen, "%s: read error: %s", r->path, strerror(errno));
  return -1;
}

static int reader_nomem(const char *path, char *err, size_t errlen) {
  seterr(err, errlen, "%s: out of memory", path);
  return -1;
}

/* Where the central directory is, as the end record(s) say. */
typedef struct zip_dir {
  uint64_t n_total, cd_size, cd_off;
} zip_dir;

/* Opens r->path: a regular file of at least one end record's 22 bytes. */
static int open_regular(npz_reader *r, char *err, size_t errlen) {
  const char *path = r->path;
  r->fd = open(path, O_RDONLY | O_CLOEXEC);
  if (r->fd < 0) {
    seterr(err, errlen, "%s: %s", path, strerror(errno));
    return -1;
  }
  struct stat st;
  if (fstat(r->fd, &st) != 0) {
    seterr(err, errlen, "%s: %s", path, strerror(errno));
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    seterr(err, errlen, "%s: not a regular file", path);
    return -1;
  }
  r->fsize = (uint64_t)st.st_size;
  if (r->fsize < 22) {
    seterr(err, errlen, "%s: not a ZIP (.npz) file: only %llu bytes", path, (unsigned long long)r->fsize);
    return -1;
  }
  return 0;
}

/* If a ZIP64 locator sits right before the end record at eocd_off, reads
 * the ZIP64 end record it points to into *d, and sets *cd_end to where
 * that record starts (the central directory must end there). */
static int read_zip64_end(const npz_reader *r, uint64_t eocd_off, uint64_t *n_disk, zip_dir *d, uint64_t *cd_end,
                          char *err, size_t errlen) {
  const char *path = r->path;
  if (eocd_off < 20) return 0;
  unsigned char L[20];
  if (read_at(r, L, 20, eocd_off - 20, err, errlen) != 0) return -1;
  if (rd32(L) != SIG_LOC64) return 0;
  uint64_t z_off = rd64(L + 8);
  if (rd32(L + 4) != 0 || rd32(L + 16) > 1) {
    seterr(err, errlen, "%s: multi-disk ZIP64 archives are not supported", path);
    return -1;
  }
  if (z_off > eocd_off - 20 || eocd_off - 20 - z_off < 56) {
    seterr(err, errlen, "%s: ZIP64 end record offset %llu is out of bounds", path, (unsigned long long)z_off);
    return -1;
  }
  unsigned char Z[56];
  if (read_at(r, Z, 56, z_off, err, errlen) != 0) return -1;
  if (rd32(Z) != SIG_EOCD64 || rd64(Z + 4) != eocd_off - 20 - z_off - 12) {
    seterr(err, errlen, "%s: bad ZIP64 end-of-central-directory record at offset %llu", path,
           (unsigned long long)z_off);
    return -1;
  }
  if (rd32(Z + 16) != 0 || rd32(Z + 20) != 0) {
    seterr(err, errlen, "%s: multi-disk ZIP64 archives are not supported", path);
    return -1;
  }
  *n_disk = rd64(Z + 24);
  d->n_total = rd64(Z + 32);
  d->cd_size = rd64(Z + 40);
  d->cd_off = rd64(Z + 48);
  *cd_end = z_off;
  return 0;
}

/* Finds the end-of-central-directory record (the last 22 + comment bytes),
 * follows a ZIP64 one if present, and checks that the directory it
 * describes is one disk, ends where the end record starts and fits the
 * limits. */
static int find_end_record(const npz_reader *r, zip_dir *d, char *err, size_t errlen) {
  const char *path = r->path;
  uint64_t tail_len = r->fsize < 65535 + 22 ? r->fsize : 65535 + 22;
  uint64_t tail_off = r->fsize - tail_len;
  unsigned char *tail = malloc((size_t)tail_len);
  if (!tail) return reader_nomem(path, err, errlen);
  if (read_at(r, tail, tail_len, tail_off, err, errlen) != 0) {
    free(tail);
    return -1;
  }
  int64_t e = -1;
  for (int64_t p = (int64_t)tail_len - 22; p >= 0; p--) {
    if (rd32(tail + p) == SIG_EOCD && (uint64_t)p + 22 + rd16(tail + p + 20) == tail_len) {
      e = p;
      break;
    }
  }
  if (e < 0) {
    free(tail);
    seterr(err, errlen, "%s: not a ZIP (.npz) file: no end-of-central-directory record", path);
    return -1;
  }
  uint64_t eocd_off = tail_off + (uint64_t)e;
  const unsigned char *E = tail + e;
  uint64_t n_disk = rd16(E + 8);
  d->n_total = rd16(E + 10);
  d->cd_size = rd32(E + 12);
  d->cd_off = rd32(E + 16);
  int multi_disk = rd16(E + 4) != 0 || rd16(E + 6) != 0;
  free(tail);
  uint64_t cd_end = eocd_off;
  if (multi_disk) {
    seterr(err, errlen, "%s: multi-disk ZIP archives are not supported", path);
    return -1;
  }
  if (read_zip64_end(r, eocd_off, &n_disk, d, &cd_end, err, errlen) != 0) return -1;
  if (n_disk != d->n_total) {
    seterr(err, errlen, "%s: multi-disk ZIP archives are not supported", path);
    return -1;
  }
  if (d->cd_off > cd_end || d->cd_size != cd_end - d->cd_off) {
    seterr(err, errlen,
           "%s: central directory (offset %llu, %llu bytes) does not end where the end record "
           "starts (%llu)",
           path, (unsigned long long)d->cd_off, (unsigned long long)d->cd_size, (unsigned long long)cd_end);
    return -1;
  }
  if (d->n_total > r->lim.max_members) {
    seterr(err, errlen, "%s: %llu members exceed the limit of %llu", path, (unsigned long long)d->n_total,
           (unsigned long long)r->lim.max_members);
    return -1;
  }
  if (d->n_total > d->cd_size / 46) {
    seterr(err, errlen, "%s: %llu members cannot fit in a %llu-byte central directory", path,
           (unsigned long long)d->n_total, (unsigned long long)d->cd_size);
    return -1;
  }
  if (d->cd_size > CD_MAX_BYTES) {
    seterr(err, errlen, "%s: central directory of %llu bytes exceeds the limit", path,
           (unsigned long long)d->cd_size);
    return -1;
  }
  return 0;
}

/* Parses central directory entry i, which starts at C with `left` bytes of
 * the directory from there, into the next member of r; *len receives the
 * entry's length. The name is checked before anything else of it. */
static int parse_central_entry(npz_reader *r, const zip_dir *d, uint64_t i, const unsigned char *C, uint64_t left,
                               uint64_t *len, char *err, size_t errlen) {
  const char *path = r->path;
  if (left < 46 || rd32(C) != SIG_CENTRAL) {
    seterr(err, errlen, "%s: central directory entry %llu is malformed (offset %llu)", path,
           (unsigned long long)i, (unsigned long long)(d->cd_off + (d->cd_size - left)));
    return -1;
  }
  uint64_t nlen = rd16(C + 28), xlen = rd16(C + 30), clen = rd16(C + 32);
  if (left - 46 < nlen + xlen + clen) {
    seterr(err, errlen, "%s: central directory entry %llu runs past the directory", path, (unsigned long long)i);
    return -1;
  }
  npz_member *m = &r->m[r->n];
  m->name = malloc((size_t)nlen + 1);
  if (!m->name) return reader_nomem(path, err, errlen);
  memcpy(m->name, C + 46, (size_t)nlen);
  m->name[nlen] = '\0';
  m->name_len = (size_t)nlen;
  r->n++;
  m->flags = rd16(C + 8);
  m->method = rd16(C + 10);
  m->crc = rd32(C + 16);
  m->csize = rd32(C + 20);
  m->usize = rd32(C + 24);
  m->lh_off = rd32(C + 42);
  if (memchr(m->name, '\0', (size_t)nlen) || !npz_name_is_safe(m->name, m->name_len)) {
    seterr(err, errlen,
           "%s: member %llu has an unsafe name (absolute path, '..', backslash, control "
           "character or invalid UTF-8)",
           path, (unsigned long long)i);
    return -1;
  }
  if (m->flags & 0x41) {
    seterr(err, errlen, "%s: member '%s' is encrypted", path, m->name);
    return -1;
  }
  if (m->method != 0 && m->method != 8) {
    seterr(err, errlen, "%s: member '%s' uses compression method %u (only stored and deflate are supported)",
           path, m->name, (unsigned)m->method);
    return -1;
  }
  if (rd16(C + 34) != 0 && rd16(C + 34) != 0xFFFF) {
    seterr(err, errlen, "%s: member '%s' starts on another disk", path, m->name);
    return -1;
  }
  int found;
  int nu = m->usize == U32_MAX_, nc = m->csize == U32_MAX_, no = m->lh_off == U32_MAX_;
  if (zip64_extra(C + 46 + nlen, (size_t)xlen, nu, nc, no, &m->usize, &m->csize, &m->lh_off, &found) != 0 ||
      ((nu || nc || no) && !found)) {
    seterr(err, errlen, "%s: member '%s' has a malformed extra field", path, m->name);
    return -1;
  }
  *len = 46 + nlen + xlen + clen;
  return 0;
}

/* Reads the central directory d describes into r->m, every byte of it
 * accounted for by its entries. */
static int read_central_directory(npz_reader *r, const zip_dir *d, char *err, size_t errlen) {
  const char *path = r->path;
  unsigned char *cd = malloc(d->cd_size ? (size_t)d->cd_size : 1);
  r->m = calloc(d->n_total ? (size_t)d->n_total : 1, sizeof *r->m);
  int rc = -1;
  if (!cd || !r->m) {
    reader_nomem(path, err, errlen);
    goto done;
  }
  if (read_at(r, cd, d->cd_size, d->cd_off, err, errlen) != 0) goto done;
  uint64_t p = 0;
  for (uint64_t i = 0; i < d->n_total; i++) {
    uint64_t len;
    if (parse_central_entry(r, d, i, cd + p, d->cd_size - p, &len, err, errlen) != 0) goto done;
    p += len;
  }
  if (p != d->cd_size) {
    seterr(err, errlen, "%s: %llu stray bytes in the central directory", path,
           (unsigned long long)(d->cd_size - p));
    goto done;
  }
  rc = 0;
done:
  free(cd);
  return rc;
}

/* Whether the local header's name, CRC and sizes agree with the directory
 * entry m (lx holds the local name and extra field). Local CRC and sizes
 * are only checked when no data descriptor follows the data. */
static int local_header_agrees(const npz_member *m, const unsigned char *H, const unsigned char *lx, uint64_t nlen,
                               uint64_t xlen) {
  if (memcmp(lx, m->name, (size_t)nlen) != 0) return 0;
  if (rd16(H + 6) & 8) return 1;
  uint64_t lc = rd32(H + 18), lu = rd32(H + 22), dummy = 0;
  int found = 0, ok = 1;
  if (rd32(H + 14) != m->crc) ok = 0;
  if (lu == U32_MAX_ || lc == U32_MAX_) {
    if (zip64_extra(lx + nlen, (size_t)xlen, lu == U32_MAX_, lc == U32_MAX_, 0, &lu, &lc, &dummy, &found) != 0)
      ok = 0;
    if (!found) lu = m->usize, lc = m->csize;
  }
  if (lu != m->usize || lc != m->csize) ok = 0;
  return ok;
}

/* Member m's local header: in bounds before the central directory at
 * cd_off, consistent with the directory; sets m->data_off and checks the
 * data's extent and size claims. */
static int check_local_header(const npz_reader *r, npz_member *m, uint64_t cd_off, char *err, size_t errlen) {
  const char *path = r->path;
  unsigned char H[30];
  if (m->lh_off > cd_off || cd_off - m->lh_off < 30) {
    seterr(err, errlen, "%s: member '%s': local header offset %llu is out of bounds", path, m->name,
           (unsigned long long)m->lh_off);
    return -1;
  }
  if (read_at(r, H, 30, m->lh_off, err, errlen) != 0) return -1;
  uint64_t nlen = rd16(H + 26), xlen = rd16(H + 28);
  if (rd32(H) != SIG_LOCAL || nlen != m->name_len || rd16(H + 8) != m->method) {
    seterr(err, errlen, "%s: member '%s': local header at offset %llu does not match the directory", path,
           m->name, (unsigned long long)m->lh_off);
    return -1;
  }
  if (cd_off - m->lh_off - 30 < nlen + xlen) {
    seterr(err, errlen, "%s: member '%s': local header runs into the central directory", path, m->name);
    return -1;
  }
  unsigned char *lx = malloc((size_t)(nlen + xlen) + 1);
  if (!lx) return reader_nomem(path, err, errlen);
  if (read_at(r, lx, nlen + xlen, m->lh_off + 30, err, errlen) != 0) {
    free(lx);
    return -1;
  }
  int agrees = local_header_agrees(m, H, lx, nlen, xlen);
  free(lx);
  if (!agrees) {
    seterr(err, errlen, "%s: member '%s': local header at offset %llu does not match the directory", path,
           m->name, (unsigned long long)m->lh_off);
    return -1;
  }
  m->data_off = m->lh_off + 30 + nlen + xlen;
  if (m->csize > cd_off - m->data_off) {
    seterr(err, errlen, "%s: member '%s': %llu bytes of data run into the central directory", path, m->name,
           (unsigned long long)m->csize);
    return -1;
  }
  if (m->method == 0 && m->csize != m->usize) {
    seterr(err, errlen, "%s: stored member '%s' has compressed size %llu != size %llu", path, m->name,
           (unsigned long long)m->csize, (unsigned long long)m->usize);
    return -1;
  }
  if (m->method == 8 && (m->csize == 0 || m->usize / DEFLATE_MAX_RATIO > m->csize)) {
    seterr(err, errlen, "%s: member '%s' claims %llu bytes from %llu deflated bytes: impossible", path, m->name,
           (unsigned long long)m->usize, (unsigned long long)m->csize);
    return -1;
  }
  return 0;
}

/* No two members may share bytes (overlapping members are a zip-bomb
 * trick), and no two may have the same name. */
static int check_members_distinct(const npz_reader *r, char *err, size_t errlen) {
  if (r->n < 2) return 0;
  const char *path = r->path;
  npz_member **order = malloc(r->n * sizeof *order);
  if (!order) return reader_nomem(path, err, errlen);
  int rc = -1;
  for (size_t i = 0; i < r->n; i++) order[i] = &r->m[i];
  qsort(order, r->n, sizeof *order, cmp_off);
  for (size_t i = 0; i + 1 < r->n; i++) {
    if (order[i]->data_off + order[i]->csize > order[i + 1]->lh_off) {
      seterr(err, errlen, "%s: members '%s' and '%s' overlap", path, order[i]->name, order[i + 1]->name);
      goto done;
    }
  }
  qsort(order, r->n, sizeof *order, cmp_name);
  for (size_t i = 0; i + 1 < r->n; i++) {
    if (strcmp(order[i]->name, order[i + 1]->name) == 0) {
      seterr(err, errlen, "%s: member name '%s' appears twice", path, order[i]->name);
      goto done;
    }
  }
  rc = 0;
done:
  free(order);
  return rc;
}

int npz_reader_open(const char *path, const npz_limits *limits, npz_reader **out, char *err,
                    size_t errlen) {
  *out = NULL;
  npz_reader *r = calloc(1, sizeof *r);
  if (!r) return reader_nomem(path, err, errlen);
  r->fd = -1;
  r->lim.max_member_bytes = limits && limits->max_member_bytes ? limits->max_member_bytes : (64ull << 30);
  r->lim.max_members = limits && limits->max_members ? limits->max_members : 1000000u;
  r->path = strdup(path);
  if (!r->path) {
    reader_nomem(path, err, errlen);
    goto fail;
  }
  zip_dir d;
  if (open_regular(r, err, errlen) != 0 || find_end_record(r, &d, err, errlen) != 0 ||
      read_central_directory(r, &d, err, errlen) != 0)
    goto fail;
  for (size_t i = 0; i < r->n; i++)
    if (check_local_header(r, &r->m[i], d.cd_off, err, errlen) != 0) goto fail;
  if (check_members_distinct(r, err, errlen) != 0) goto fail;
  *out = r;
  return 0;
fail:
  npz_reader_close(r);
  return -1;
}

/* Inflates member m into a buffer that grows with the output (doubling
 * from NPZ_GROW_START up to the declared size, never beyond it), so memory
 * follows the data actually present, not what the headers claim: a member
 * that declares gigabytes and holds kilobytes fails after kilobytes. On
 * success *out holds exactly m->usize bytes (malloc'd). */
static int inflate_member(npz_reader *r, const npz_member *m, unsigned char **out, char *err, size_t errlen) {
  *out = NULL;
  z_stream zs;
  memset(&zs, 0, sizeof zs);
  if (inflateInit2(&zs, -15) != Z_OK) {
    seterr(err, errlen, "%s: member '%s': zlib inflateInit2 failed", r->path, m->name);
    return -1;
  }
  uint64_t cap = m->usize < NPZ_GROW_START ? m->usize : NPZ_GROW_START;
  unsigned char *in = malloc(IO_CHUNK), *dst = malloc(cap ? (size_t)cap : 1);
  if (!in || !dst) {
    free(in);
    free(dst);
    inflateEnd(&zs);
    seterr(err, errlen, "%s: member '%s': out of memory", r->path, m->name);
    return -1;
  }
  uint64_t in_left = m->csize, in_off = m->data_off, out_done = 0;
  int rc = Z_OK, ret = -1;
  unsigned char spare;
  while (rc != Z_STREAM_END) {
    if (zs.avail_in == 0 && in_left > 0) {
      uint64_t n = in_left < IO_CHUNK ? in_left : IO_CHUNK;
      if (pread_all(r->fd, in, n, in_off) != 0) {
        seterr(err, errlen, "%s: read error: %s", r->path, strerror(errno));
        goto done;
      }
      zs.next_in = in;
      zs.avail_in = (uInt)n;
      in_off += n;
      in_left -= n;
    }
    if (out_done == cap && cap < m->usize) {
      uint64_t ncap = cap > m->usize / 2 ? m->usize : cap * 2;
      unsigned char *g = realloc(dst, (size_t)ncap);
      if (!g) {
        seterr(err, errlen, "%s: member '%s': out of memory growing its buffer to %llu bytes (%llu of the declared %llu inflated so far)",
               r->path, m->name, (unsigned long long)ncap, (unsigned long long)out_done,
               (unsigned long long)m->usize);
        goto done;
      }
      dst = g;
      cap = ncap;
    }
    if (out_done < cap) {
      uint64_t room = cap - out_done;
      zs.next_out = dst + out_done;
      zs.avail_out = room > (1u << 30) ? (1u << 30) : (uInt)room;
    } else {
      /* Declared size reached: any further output is a lie. */
      zs.next_out = &spare;
      zs.avail_out = 1;
    }
    uInt out_before = zs.avail_out, in_before = zs.avail_in;
    rc = inflate(&zs, Z_NO_FLUSH);
    if (out_done >= m->usize && zs.avail_out != out_before) {
      seterr(err, errlen, "%s: member '%s' inflates to more than its declared %llu bytes", r->path,
             m->name, (unsigned long long)m->usize);
      goto done;
    }
    out_done += out_before - zs.avail_out;
    if (rc == Z_STREAM_END) break;
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      seterr(err, errlen, "%s: member '%s': invalid deflate data (%s)", r->path, m->name,
             zs.msg ? zs.msg : "zlib error");
      goto done;
    }
    /* zlib may hold decoded output (the end of a match, bits already
     * taken from the input) when the output window fills: a new window
     * lets it continue even with no input left. Only a call that makes no
     * progress with no input left means the stream really is cut short. */
    if (zs.avail_out == out_before && zs.avail_in == in_before) {
      if (zs.avail_in == 0 && in_left == 0) {
        seterr(err, errlen,
               "%s: member '%s': deflate stream is cut short after %llu of its declared %llu bytes",
               r->path, m->name, (unsigned long long)out_done, (unsigned long long)m->usize);
        goto done;
      }
      if (zs.avail_in != 0 && zs.avail_out != 0) { /* cannot happen with valid zlib; never spin */
        seterr(err, errlen, "%s: member '%s': inflate makes no progress", r->path, m->name);
        goto done;
      }
    }
  }
  if (out_done != m->usize) {
    seterr(err, errlen, "%s: member '%s' inflates to %llu bytes, but its header declares %llu", r->path, m->name,
           (unsigned long long)out_done, (unsigned long long)m->usize);
    goto done;
  }
  if (in_left != 0 || zs.avail_in != 0) {
    seterr(err, errlen, "%s: member '%s' has bytes after the end of its deflate stream", r->path, m->name);
    goto done;
  }
  ret = 0;
done:
  free(in);
  inflateEnd(&zs);
  if (ret == 0)
    *out = dst;
  else
    free(dst);
  return ret;
}

int npz_reader_read(npz_reader *r, size_t i, npz_array *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  if (i >= r->n) {
    seterr(err, errlen, "%s: no member %zu", r->path, i);
    return -1;
  }
  const npz_member *m = &r->m[i];
  if (m->usize > r->lim.max_member_bytes || m->usize > (uint64_t)SIZE_MAX) {
    seterr(err, errlen, "%s: member '%s' of %llu bytes exceeds the limit of %llu bytes", r->path, m->name,
           (unsigned long long)m->usize, (unsigned long long)r->lim.max_member_bytes);
    return -1;
  }
  unsigned char *buf = NULL;
  if (m->method == 0) {
    /* Stored: the open checked that all usize bytes are in the file, so
     * this allocation is what the file really holds. */
    buf = malloc(m->usize ? (size_t)m->usize : 1);
    if (!buf) {
      seterr(err, errlen, "%s: member '%s': out of memory (%llu bytes)", r->path, m->name,
             (unsigned long long)m->usize);
      return -1;
    }
    if (pread_all(r->fd, buf, m->usize, m->data_off) != 0) {
      seterr(err, errlen, "%s: read error: %s", r->path, strerror(errno));
      free(buf);
      return -1;
    }
  } else if (inflate_member(r, m, &buf, err, errlen) != 0) {
    return -1;
  }
  uint32_t crc = crc32_big((uint32_t)crc32(0, Z_NULL, 0), buf, m->usize);
  if (crc != m->crc) {
    seterr(err, errlen, "%s: member '%s': CRC-32 %08x does not match the stored %08x (corrupt)", r->path,
           m->name, crc, m->crc);
    free(buf);
    return -1;
  }
  char what[512];
  snprintf(what, sizeof what, "%s: member '%s'", r->path, m->name);
  if (parse_npy_owned(buf, m->usize, what, out, err, errlen) != 0) {
    if (!out->block_) free(buf);
    return -1;
  }
  return 0;
}

/* ---- ZIP writing ------------------------------------------------------------ */

typedef struct wmember {
  char *name;
  size_t nlen;
  uint32_t crc;
  uint64_t size, lh_off;
} wmember;

struct npz_writer {
  char *path, *tmp;
  FILE *f;
  uint64_t off;
  wmember *m;
  size_t n, cap;
};

#define DOS_DATE_1980 0x0021 /* 1980-01-01: fixed, so exports are reproducible */

static int wbytes(npz_writer *w, const void *p, uint64_t n) {
  const unsigned char *b = p;
  while (n > 0) {
    size_t k = n > (1u << 30) ? (1u << 30) : (size_t)n;
    if (fwrite(b, 1, k, w->f) != k) return -1;
    b += k;
    n -= k;
    w->off += k;
  }
  return 0;
}

int npz_writer_open(const char *path, npz_writer **out, char *err, size_t errlen) {
  *out = NULL;
  npz_writer *w = calloc(1, sizeof *w);
  if (!w) goto nomem;
  w->path = strdup(path);
  size_t tl = strlen(path) + 16;
  w->tmp = malloc(tl);
  if (!w->path || !w->tmp) goto nomem;
  snprintf(w->tmp, tl, "%s.tmp.XXXXXX", path);
  int fd = mkstemp(w->tmp);
  if (fd < 0) {
    seterr(err, errlen, "%s: cannot create a temporary file beside it: %s", path, strerror(errno));
    free(w->tmp);
    w->tmp = NULL;
    goto fail;
  }
  mode_t um = umask(0);
  umask(um);
  (void)fchmod(fd, 0666 & ~um);
  w->f = fdopen(fd, "wb");
  if (!w->f) {
    close(fd);
    goto nomem;
  }
  *out = w;
  return 0;
nomem:
  seterr(err, errlen, "%s: out of memory", path);
fail:
  npz_writer_abort(w);
  return -1;
}

void npz_writer_abort(npz_writer *w) {
  if (!w) return;
  if (w->f) fclose(w->f);
  if (w->tmp) unlink(w->tmp);
  for (size_t i = 0; i < w->n; i++) free(w->m[i].name);
  free(w->m);
  free(w->tmp);
  free(w->path);
  free(w);
}

static int has_high_bit(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] >= 0x80) return 1;
  return 0;
}

int npz_writer_add(npz_writer *w, const char *name, const char *descr, int rank, const int64_t *shape,
                   const void *data, uint64_t nbytes, char *err, size_t errlen) {
  size_t base = strlen(name);
  if (base > 65535 - 4) {
    seterr(err, errlen, "%s: name '%.64s...' is too long for a ZIP member", w->path, name);
    return -1;
  }
  char *mname = malloc(base + 5);
  if (!mname) {
    seterr(err, errlen, "%s: out of memory", w->path);
    return -1;
  }
  memcpy(mname, name, base);
  memcpy(mname + base, ".npy", 5);
  size_t nlen = base + 4;
  if (!npz_name_is_safe(mname, nlen)) {
    seterr(err, errlen,
           "%s: '%s' is not a safe ZIP member name (absolute path, '..', '.', empty component or "
           "backslash)",
           w->path, name);
    free(mname);
    return -1;
  }
  if (rank < 0 || rank > NPZ_MAX_RANK) {
    seterr(err, errlen, "%s: '%s': bad rank %d", w->path, name, rank);
    free(mname);
    return -1;
  }
  /* The .npy header, padded with spaces to a 64-byte data offset. */
  char hdr[1024];
  int hl = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
  for (int k = 0; k < rank; k++)
    hl += snprintf(hdr + hl, sizeof hdr - (size_t)hl, k ? ", %lld" : "%lld", (long long)shape[k]);
  hl += snprintf(hdr + hl, sizeof hdr - (size_t)hl, "%s), }", rank == 1 ? "," : "");
  size_t total = 10 + (size_t)hl + 1;
  size_t pad = (64 - total % 64) % 64;
  memset(hdr + hl, ' ', pad);
  hl += (int)pad;
  hdr[hl++] = '\n';
  unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0, 0};
  wr16(pre + 8, (uint16_t)hl);

  uint64_t usize = 10 + (uint64_t)hl + nbytes;
  uint32_t crc = (uint32_t)crc32(0, Z_NULL, 0);
  crc = crc32_big(crc, pre, 10);
  crc = crc32_big(crc, hdr, (uint64_t)hl);
  crc = crc32_big(crc, data, nbytes);
  int z64 = usize >= U32_MAX_;

  unsigned char L[30 + 20];
  wr32(L, SIG_LOCAL);
  wr16(L + 4, z64 ? 45 : 20);
  wr16(L + 6, has_high_bit(mname, nlen) ? 0x800 : 0);
  wr16(L + 8, 0);
  wr16(L + 10, 0);
  wr16(L + 12, DOS_DATE_1980);
  wr32(L + 14, crc);
  wr32(L + 18, z64 ? U32_MAX_ : (uint32_t)usize);
  wr32(L + 22, z64 ? U32_MAX_ : (uint32_t)usize);
  wr16(L + 26, (uint16_t)nlen);
  wr16(L + 28, z64 ? 20 : 0);
  wr16(L + 30, 1);
  wr16(L + 32, 16);
  wr64(L + 34, usize);
  wr64(L + 42, usize);

  if (w->n == w->cap) {
    size_t nc = w->cap ? 2 * w->cap : 16;
    wmember *nm = realloc(w->m, nc * sizeof *nm);
    if (!nm) {
      free(mname);
      seterr(err, errlen, "%s: out of memory", w->path);
      return -1;
    }
    w->m = nm;
    w->cap = nc;
  }
  uint64_t lh_off = w->off;
  if (wbytes(w, L, 30) != 0 || wbytes(w, mname, nlen) != 0 || (z64 && wbytes(w, L + 30, 20) != 0) ||
      wbytes(w, pre, 10) != 0 || wbytes(w, hdr, (uint64_t)hl) != 0 || wbytes(w, data, nbytes) != 0) {
    seterr(err, errlen, "%s: write error: %s", w->tmp, strerror(errno));
    free(mname);
    return -1;
  }
  w->m[w->n].name = mname;
  w->m[w->n].nlen = nlen;
  w->m[w->n].crc = crc;
  w->m[w->n].size = usize;
  w->m[w->n].lh_off = lh_off;
  w->n++;
  return 0;
}

int npz_writer_close(npz_writer *w, char *err, size_t errlen) {
  uint64_t cd_off = w->off;
  for (size_t i = 0; i < w->n; i++) {
    const wmember *m = &w->m[i];
    int zs = m->size >= U32_MAX_, zo = m->lh_off >= U32_MAX_;
    unsigned char C[46], X[4 + 24];
    size_t xl = 0;
    if (zs || zo) {
      size_t f = 4;
      if (zs) {
        wr64(X + f, m->size);
        wr64(X + f + 8, m->size);
        f += 16;
      }
      if (zo) {
        wr64(X + f, m->lh_off);
        f += 8;
      }
      wr16(X, 1);
      wr16(X + 2, (uint16_t)(f - 4));
      xl = f;
    }
    int v = (zs || zo) ? 45 : 20;
    wr32(C, SIG_CENTRAL);
    wr16(C + 4, (uint16_t)(0x0300 | v)); /* made by: Unix */
    wr16(C + 6, (uint16_t)v);
    wr16(C + 8, has_high_bit(m->name, m->nlen) ? 0x800 : 0);
    wr16(C + 10, 0);
    wr16(C + 12, 0);
    wr16(C + 14, DOS_DATE_1980);
    wr32(C + 16, m->crc);
    wr32(C + 20, zs ? U32_MAX_ : (uint32_t)m->size);
    wr32(C + 24, zs ? U32_MAX_ : (uint32_t)m->size);
    wr16(C + 28, (uint16_t)m->nlen);
    wr16(C + 30, (uint16_t)xl);
    wr16(C + 32, 0);
    wr16(C + 34, 0);
    wr16(C + 36, 0);
    wr32(C + 38, (uint32_t)0100644 << 16);
    wr32(C + 42, zo ? U32_MAX_ : (uint32_t)m->lh_off);
    if (wbytes(w, C, 46) != 0 || wbytes(w, m->name, m->nlen) != 0 || wbytes(w, X, xl) != 0) goto ioerr;
  }
  uint64_t cd_size = w->off - cd_off;
  int z64 = w->n >= 0xFFFF || cd_off >= U32_MAX_ || cd_size >= U32_MAX_;
  if (z64) {
    unsigned char Z[56 + 20];
    uint64_t z_off = w->off;
    wr32(Z, SIG_EOCD64);
    wr64(Z + 4, 44);
    wr16(Z + 12, 0x0300 | 45);
    wr16(Z + 14, 45);
    wr32(Z + 16, 0);
    wr32(Z + 20, 0);
    wr64(Z + 24, w->n);
    wr64(Z + 32, w->n);
    wr64(Z + 40, cd_size);
    wr64(Z + 48, cd_off);
    wr32(Z + 56, SIG_LOC64);
    wr32(Z + 60, 0);
    wr64(Z + 64, z_off);
    wr32(Z + 72, 1);
    if (wbytes(w, Z, sizeof Z) != 0) goto ioerr;
  }
  unsigned char E[22];
  wr32(E, SIG_EOCD);
  wr16(E + 4, 0);
  wr16(E + 6, 0);
  wr16(E + 8, w->n >= 0xFFFF ? 0xFFFF : (uint16_t)w->n);
  wr16(E + 10, w->n >= 0xFFFF ? 0xFFFF : (uint16_t)w->n);
  wr32(E + 12, cd_size >= U32_MAX_ ? U32_MAX_ : (uint32_t)cd_size);
  wr32(E + 16, cd_off >= U32_MAX_ ? U32_MAX_ : (uint32_t)cd_off);
  wr16(E + 20, 0);
  if (wbytes(w, E, 22) != 0) goto ioerr;
  if (fflush(w->f) != 0 || fsync(fileno(w->f)) != 0) goto ioerr;
  FILE *f = w->f;
  w->f = NULL;
  if (fclose(f) != 0) goto ioerr;
  if (rename(w->tmp, w->path) != 0) {
    seterr(err, errlen, "%s: cannot rename %s into place: %s", w->path, w->tmp, strerror(errno));
    npz_writer_abort(w);
    return -1;
  }
  free(w->tmp);
  w->tmp = NULL;
  npz_writer_abort(w);
  return 0;
ioerr:
  seterr(err, errlen, "%s: write error: %s", w->tmp, strerror(errno));
  npz_writer_abort(w);
  return -1;
}
