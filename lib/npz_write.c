/* npz_write.c — NumPy .npz archives (a ZIP of .npy arrays) written from
 * tensors: cairn_npz_writer_* of cairn/interop.h (ckpt-inspect export's
 * default format). The reader is npz_read.c.
 *
 * Members are stored uncompressed (ZIP method 0) with .npy format 1.0
 * headers ({'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), },
 * padded with spaces so that the data starts 64 bytes into the member, as
 * NumPy does); ZIP64 records only where a size, an offset or the member
 * count needs them; CRC-32 from zlib; a fixed 1980-01-01 timestamp, so the
 * same tensors give byte-identical archives. Each tensor's bytes are written
 * when it is added (memory: the member list, not the data).
 *
 * Not written with libzip, as the reader is: libzip's zip_close (1.7.3,
 * Debian 12) writes its own temporary file and renames it without an
 * fsync, and reads every member's data only at close, from sources that
 * must all stay valid until then; this writer keeps the atomic commit of
 * the other writers (ck_tmpfile: fsync, rename, fsync of the directory)
 * and one tensor at a time.
 *
 * References: PKWARE APPNOTE.TXT 6.3 (local header 4.3.7, central directory
 * 4.3.12, ZIP64 end record 4.3.14 and locator 4.3.15, ZIP64 extra field
 * 4.5.3) and NumPy's numpy/lib/format.py (the .npy header). */
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "interop_impl.h"

#define SIG_LOCAL 0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_EOCD 0x06054b50u
#define SIG_EOCD64 0x06064b50u
#define SIG_LOC64 0x07064b50u
#define U32_MAX_ 0xFFFFFFFFu
#define DOS_DATE_1980 0x0021 /* 1980-01-01: fixed, so exports are reproducible */
#define BF16_CHUNK 16384     /* bf16 elements widened to float32 per write */

typedef struct npz_wmember {
  char *name; /* "<tensor name>.npy" */
  size_t nlen;
  uint32_t crc;
  uint64_t size, lh_off;
} npz_wmember;

struct cairn_npz_writer {
  ck_tmpfile f; /* f.written: the offset of the next byte */
  npz_wmember *m;
  size_t n, cap;
  ck_nameset names; /* the members' names (m[i].name), for the duplicate check */
  cairn_status failed;
};

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

static int host_is_little(void) {
  const uint16_t one = 1;
  unsigned char b;
  memcpy(&b, &one, 1);
  return b == 1;
}

/* NumPy's dtype string for the host byte order; bf16 is written as float32
 * (NumPy has no bfloat16). */
static const char *npy_descr(cairn_dtype dt) {
  int le = host_is_little();
  switch (dt) {
    case CAIRN_DTYPE_F32: return le ? "<f4" : ">f4";
    case CAIRN_DTYPE_F64: return le ? "<f8" : ">f8";
    case CAIRN_DTYPE_F16: return le ? "<f2" : ">f2";
    case CAIRN_DTYPE_BF16: return le ? "<f4" : ">f4";
    case CAIRN_DTYPE_I8: return "|i1";
    case CAIRN_DTYPE_I16: return le ? "<i2" : ">i2";
    case CAIRN_DTYPE_I32: return le ? "<i4" : ">i4";
    case CAIRN_DTYPE_I64: return le ? "<i8" : ">i8";
    case CAIRN_DTYPE_U8: return "|u1";
    case CAIRN_DTYPE_U16: return le ? "<u2" : ">u2";
    case CAIRN_DTYPE_U32: return le ? "<u4" : ">u4";
    case CAIRN_DTYPE_U64: return le ? "<u8" : ">u8";
    case CAIRN_DTYPE_BOOL: return "|b1";
  }
  return NULL;
}

static int has_high_bit(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] >= 0x80) return 1;
  return 0;
}

cairn_status cairn_npz_writer_open(const char *path, cairn_npz_writer **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "npz_writer_open: out is NULL");
  *out = NULL;
  if (!path) return cairn__fail(CAIRN_E_NULL, "npz_writer_open: path is NULL");
  cairn_npz_writer *w = calloc(1, sizeof *w);
  if (!w) return cairn__fail(CAIRN_E_NOMEM, "npz_writer_open: out of memory");
  cairn_status s = cairn__tmpfile_open(&w->f, "npz_writer_open", path);
  if (s) {
    free(w);
    return s;
  }
  *out = w;
  return CAIRN_OK;
}

void cairn_npz_writer_abort(cairn_npz_writer *w) {
  if (!w) return;
  cairn__tmpfile_abort(&w->f);
  for (size_t i = 0; i < w->n; i++) free(w->m[i].name);
  free(w->m);
  cairn__nameset_free(&w->names);
  free(w);
}

/* The tensor's data as the member holds it, in pieces: as they are, or
 * for bf16 widened to float32 (exact) BF16_CHUNK elements at a time. Adds
 * them to *crc, and writes them to the file when `write`. */
static cairn_status put_data(cairn_npz_writer *w, const char *fn, const cairn_tensor *t, uint32_t *crc, int write) {
  uint64_t nbytes = cairn_tensor_nbytes(t);
  if (t->dtype != CAIRN_DTYPE_BF16) {
    *crc = crc32_big(*crc, t->data, nbytes);
    return write ? cairn__tmpfile_write(&w->f, fn, t->data, (size_t)nbytes) : CAIRN_OK;
  }
  const uint16_t *src = t->data;
  float buf[BF16_CHUNK];
  for (int64_t at = 0; at < t->size;) {
    size_t k = t->size - at > BF16_CHUNK ? BF16_CHUNK : (size_t)(t->size - at);
    for (size_t i = 0; i < k; i++) {
      uint32_t u = (uint32_t)src[at + (int64_t)i] << 16;
      memcpy(&buf[i], &u, 4);
    }
    *crc = crc32_big(*crc, buf, 4 * k);
    if (write) {
      cairn_status s = cairn__tmpfile_write(&w->f, fn, buf, 4 * k);
      if (s) return s;
    }
    at += (int64_t)k;
  }
  return CAIRN_OK;
}

/* The .npy header (magic, version 1.0, length, dict padded with spaces
 * and ended by '\n' so that the data starts at a multiple of 64 bytes);
 * returns its length. hdr holds 1024 bytes: rank <= 8 keeps it far below. */
static size_t npy_header(unsigned char *hdr, const char *descr, int rank, const int64_t *shape) {
  static const unsigned char magic[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  char *d = (char *)hdr + 10;
  size_t cap = 1024 - 10 - 64;
  int hl = snprintf(d, cap, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
  for (int k = 0; k < rank; k++) hl += snprintf(d + hl, cap - (size_t)hl, k ? ", %lld" : "%lld", (long long)shape[k]);
  hl += snprintf(d + hl, cap - (size_t)hl, "%s), }", rank == 1 ? "," : "");
  size_t total = 10 + (size_t)hl + 1;
  size_t pad = (64 - total % 64) % 64;
  memset(d + hl, ' ', pad);
  hl += (int)pad;
  d[hl++] = '\n';
  memcpy(hdr, magic, 8);
  wr16(hdr + 8, (uint16_t)hl);
  return 10 + (size_t)hl;
}

cairn_status cairn_npz_writer_add(cairn_npz_writer *w, const char *name, const cairn_tensor *t) {
  const char *fn = "npz_writer_add";
  if (!w || !name || !t) return cairn__fail(CAIRN_E_NULL, "%s: %s is NULL", fn, !w ? "writer" : !name ? "name" : "tensor");
  if (w->failed) return cairn__fail(CAIRN_E_STATE, "%s: the writer failed earlier; abort it", fn);
  size_t base = strlen(name), nlen = base + 4;
  char nb[96];
  const char *nm = cairn__ck_short(name, base, nb, sizeof nb);
  if (!cairn__ck_name_ok((const unsigned char *)name, base))
    return cairn__fail(CAIRN_E_INVALID, "%s: '%s': a tensor name is 1..1024 bytes of UTF-8 without control characters",
                       fn, nm);
  char *mname = malloc(nlen + 1);
  if (!mname) return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  memcpy(mname, name, base);
  memcpy(mname + base, ".npy", 5);
  cairn_status s = CAIRN_OK;
  const char *descr = npy_descr(t->dtype);
  if (!cairn__npz_name_safe(mname, nlen))
    s = cairn__fail(CAIRN_E_INVALID,
                    "%s: '%s' is not a safe ZIP member name in '%s' (an absolute path, a drive letter, a backslash, or "
                    "an empty, '.' or '..' component); rename the tensor",
                    fn, nm, w->f.path);
  else if (!descr || !cairn__tensor_ok(t))
    s = cairn__fail(CAIRN_E_INVALID, "%s: '%s': not a valid tensor", fn, nm);
  else if (cairn__nameset_has(&w->names, mname))
    s = cairn__fail(CAIRN_E_EXISTS, "%s: '%s' was already added to '%s'", fn, nm, w->f.path);
  else if (!cairn__grow((void **)&w->m, &w->cap, w->n + 1, sizeof *w->m))
    s = cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  if (s) {
    free(mname);
    return s;
  }

  unsigned char hdr[1024];
  size_t hl = npy_header(hdr, descr, t->rank, t->shape);
  uint64_t dbytes = (uint64_t)t->size * (t->dtype == CAIRN_DTYPE_BF16 ? 4 : cairn_dtype_size(t->dtype));
  uint64_t usize = hl + dbytes;
  uint32_t crc = crc32_big((uint32_t)crc32(0, Z_NULL, 0), hdr, hl);
  (void)put_data(w, fn, t, &crc, 0);
  int z64 = usize >= U32_MAX_;

  /* Local header; with ZIP64 its extra field holds both sizes. */
  unsigned char L[30 + 20];
  wr32(L, SIG_LOCAL);
  wr16(L + 4, z64 ? 45 : 20);
  wr16(L + 6, has_high_bit(mname, nlen) ? 0x800 : 0); /* bit 11: the name is UTF-8 */
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

  npz_wmember *m = &w->m[w->n];
  *m = (npz_wmember){.name = mname, .nlen = nlen, .crc = crc, .size = usize, .lh_off = w->f.written};
  if (!cairn__nameset_put(&w->names, mname)) {
    free(mname);
    return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  }
  w->n++;
  if ((s = cairn__tmpfile_write(&w->f, fn, L, 30)) || (s = cairn__tmpfile_write(&w->f, fn, mname, nlen)) ||
      (z64 && (s = cairn__tmpfile_write(&w->f, fn, L + 30, 20))) || (s = cairn__tmpfile_write(&w->f, fn, hdr, hl)) ||
      (s = put_data(w, fn, t, &crc, 1)))
    w->failed = s; /* the archive is cut short: only abort or commit (which refuses) are left */
  return s;
}

/* The central directory entry of m; its ZIP64 extra field holds the sizes
 * and the offset that do not fit 32 bits. */
static cairn_status put_central(cairn_npz_writer *w, const char *fn, const npz_wmember *m) {
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
  wr32(C + 38, (uint32_t)0100644 << 16); /* a regular file, rw-r--r-- */
  wr32(C + 42, zo ? U32_MAX_ : (uint32_t)m->lh_off);
  cairn_status s = cairn__tmpfile_write(&w->f, fn, C, 46);
  if (!s) s = cairn__tmpfile_write(&w->f, fn, m->name, m->nlen);
  if (!s && xl) s = cairn__tmpfile_write(&w->f, fn, X, xl);
  return s;
}

/* The end records: ZIP64 end record and locator when the count, the
 * directory's size or its offset need them, then the classic one. */
static cairn_status put_end(cairn_npz_writer *w, const char *fn, uint64_t cd_off, uint64_t cd_size) {
  cairn_status s = CAIRN_OK;
  if (w->n >= 0xFFFF || cd_off >= U32_MAX_ || cd_size >= U32_MAX_) {
    unsigned char Z[56 + 20];
    uint64_t z_off = w->f.written;
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
    if ((s = cairn__tmpfile_write(&w->f, fn, Z, sizeof Z))) return s;
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
  return cairn__tmpfile_write(&w->f, fn, E, 22);
}

cairn_status cairn_npz_writer_commit(cairn_npz_writer *w) {
  const char *fn = "npz_writer_commit";
  if (!w) return cairn__fail(CAIRN_E_NULL, "%s: writer is NULL", fn);
  cairn_status s = w->failed;
  if (s) {
    cairn_npz_writer_abort(w);
    return cairn__fail(s, "%s: an earlier add failed: nothing was written", fn);
  }
  uint64_t cd_off = w->f.written;
  for (size_t i = 0; i < w->n && !s; i++) s = put_central(w, fn, &w->m[i]);
  if (!s) s = put_end(w, fn, cd_off, w->f.written - cd_off);
  if (!s) s = cairn__tmpfile_commit(&w->f, fn);
  cairn_npz_writer_abort(w);
  return s;
}
