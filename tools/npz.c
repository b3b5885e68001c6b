/* npz.c — the NumPy .npz (ZIP of .npy) writer of ckpt-inspect export; see
 * npz.h. (Reading is libcairn's: cairn_npz_reader_* in cairn/interop.h.)
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
