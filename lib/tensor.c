/* Tensors: allocation, views, shape helpers and argument checks. */
#define _DEFAULT_SOURCE /* mmap, madvise(MADV_HUGEPAGE), posix_memalign */
#define _GNU_SOURCE     /* mremap (Linux), for cairn__realloc */
#include "tensor_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

size_t cairn_dtype_size(cairn_dtype dt) {
  switch (dt) {
    case CAIRN_DTYPE_F64: case CAIRN_DTYPE_I64: case CAIRN_DTYPE_U64: return 8;
    case CAIRN_DTYPE_F32: case CAIRN_DTYPE_I32: case CAIRN_DTYPE_U32: return 4;
    case CAIRN_DTYPE_F16: case CAIRN_DTYPE_BF16: case CAIRN_DTYPE_I16: case CAIRN_DTYPE_U16: return 2;
    case CAIRN_DTYPE_I8: case CAIRN_DTYPE_U8: case CAIRN_DTYPE_BOOL: return 1;
  }
  return 0;
}

const char *cairn_dtype_name(cairn_dtype dt) {
  static const char *const names[] = {"?",   "f32", "f64", "f16", "bf16", "i8",  "i16",
                                      "i32", "i64", "u8",  "u16", "u32",  "u64", "bool"};
  return (unsigned)dt < sizeof names / sizeof names[0] ? names[dt] : "?";
}

/* Every block carries a 64-byte header just before the returned pointer,
 * saying how it was obtained. Blocks of CAIRN__BIG_ALLOC bytes or more come
 * from mmap: the kernel hands them out zero-filled (no memset pass), and
 * they start on a 2 MiB boundary with MADV_HUGEPAGE, so first touch costs
 * ~1/6 of the page faults (a fresh 100 MB tensor: 38 ms → 6 ms measured
 * here). Smaller blocks come from posix_memalign. */
#define CAIRN__BIG_ALLOC ((size_t)4 << 20)
#define CAIRN__HUGE ((size_t)2 << 20)

typedef struct block_header {
  void *base;     /* what to free or unmap */
  size_t map_len; /* 0: from posix_memalign */
  unsigned char pad[CAIRN_ALIGNMENT - sizeof(void *) - sizeof(size_t)];
} block_header;

static void *alloc_block(size_t bytes, int *zeroed) {
  size_t rounded = (bytes + CAIRN_ALIGNMENT - 1) & ~(size_t)(CAIRN_ALIGNMENT - 1);
  if (rounded < bytes || rounded > SIZE_MAX - 2 * CAIRN__HUGE) return NULL;
  *zeroed = 0;
  if (rounded >= CAIRN__BIG_ALLOC) {
    size_t len = rounded + 2 * CAIRN__HUGE;
    unsigned char *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base != MAP_FAILED) {
      uintptr_t a = ((uintptr_t)base + sizeof(block_header) + CAIRN__HUGE - 1) & ~(uintptr_t)(CAIRN__HUGE - 1);
      unsigned char *p = (unsigned char *)a;
      /* Keep one page before p, for the header: a whole 2 MiB-aligned
       * region before p would get a huge page of its own at the header's
       * first touch, 2 MiB of RSS per tensor for 64 bytes. */
      size_t pg = (size_t)sysconf(_SC_PAGESIZE), cut = (size_t)(p - base) > pg ? (size_t)(p - base) - pg : 0;
      if (cut && munmap(base, cut) == 0) {
        base += cut;
        len -= cut;
      }
#ifdef MADV_HUGEPAGE
      /* A hint (failure is harmless), on the whole mapping: one on part of
       * it would split it, and cairn__realloc's mremap moves only one. */
      (void)madvise(base, len, MADV_HUGEPAGE);
#endif
      block_header *h = (block_header *)(void *)(p - sizeof(block_header));
      h->base = base;
      h->map_len = len;
      *zeroed = 1;
      return p;
    }
  }
  void *base;
  if (posix_memalign(&base, CAIRN_ALIGNMENT, rounded + sizeof(block_header))) return NULL;
  block_header *h = base;
  h->base = base;
  h->map_len = 0;
  return (unsigned char *)base + sizeof(block_header);
}

void *cairn_alloc(size_t bytes) {
  int zeroed;
  return alloc_block(bytes, &zeroed);
}

void cairn_free(void *p) {
  if (!p) return;
  block_header *h = (block_header *)(void *)((unsigned char *)p - sizeof(block_header));
  if (h->map_len)
    munmap(h->base, h->map_len);
  else
    free(h->base);
}

void *cairn__realloc(void *p, size_t old_bytes, size_t bytes) {
  if (!p) return cairn_alloc(bytes);
  block_header *h = (block_header *)(void *)((unsigned char *)p - sizeof(block_header));
#ifdef MREMAP_MAYMOVE
  /* A mapped block is remapped: the kernel moves page tables, so growing
   * copies nothing and never holds the old and the new block at once. Its
   * offset from the mapping's start is a multiple of the page size, so p
   * stays 64-byte aligned wherever the mapping lands. */
  if (h->map_len) {
    size_t off = (size_t)((unsigned char *)p - (unsigned char *)h->base);
    size_t rounded = (bytes + CAIRN_ALIGNMENT - 1) & ~(size_t)(CAIRN_ALIGNMENT - 1);
    if (rounded < bytes || rounded > SIZE_MAX - off) return NULL;
    if (off + rounded <= h->map_len) return p;
    unsigned char *nb = mremap(h->base, h->map_len, off + rounded, MREMAP_MAYMOVE);
    if (nb != MAP_FAILED) { /* else: copy, below */
      block_header *nh = (block_header *)(void *)(nb + off - sizeof(block_header));
      nh->base = nb;
      nh->map_len = off + rounded;
      return nb + off;
    }
  }
#endif
  void *q = cairn_alloc(bytes);
  if (!q) return NULL;
  memcpy(q, p, old_bytes < bytes ? old_bytes : bytes);
  cairn_free(p);
  return q;
}

/* Validates rank/shape/dtype and computes the element count. */
static cairn_status shape_size(const char *fn, cairn_dtype dt, int rank, const int64_t *shape,
                               int64_t *size) {
  if (cairn_dtype_size(dt) == 0) return cairn__fail(CAIRN_E_INVALID, "%s: unknown dtype %d", fn, (int)dt);
  if (rank < 0 || rank > CAIRN_MAX_RANK)
    return cairn__fail(CAIRN_E_INVALID, "%s: rank %d is outside 0..%d", fn, rank, CAIRN_MAX_RANK);
  if (rank > 0 && !shape) return cairn__fail(CAIRN_E_NULL, "%s: shape is NULL for rank %d", fn, rank);
  int64_t n = 1;
  const int64_t limit = INT64_MAX / 8;
  for (int i = 0; i < rank; i++) {
    if (shape[i] < 0)
      return cairn__fail(CAIRN_E_INVALID, "%s: dimension %d is negative (%lld)", fn, i,
                         (long long)shape[i]);
    if (shape[i] > 0 && n > limit / shape[i])
      return cairn__fail(CAIRN_E_LIMIT, "%s: element count overflows at dimension %d", fn, i);
    n *= shape[i];
  }
  *size = n;
  return CAIRN_OK;
}

static void set_shape(cairn_tensor *t, cairn_dtype dt, int rank, const int64_t *shape, int64_t size) {
  t->dtype = dt;
  t->rank = rank;
  for (int i = 0; i < CAIRN_MAX_RANK; i++) t->shape[i] = i < rank ? shape[i] : 1;
  t->size = size;
  t->capacity = size;
}

cairn_status cairn_tensor_new(cairn_dtype dt, int rank, const int64_t *shape, cairn_tensor **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "tensor_new: out is NULL");
  *out = NULL;
  int64_t size;
  cairn_status s = shape_size("tensor_new", dt, rank, shape, &size);
  if (s) return s;
  size_t bytes = (size_t)size * cairn_dtype_size(dt);
  cairn_tensor *t = calloc(1, sizeof *t);
  int zeroed = 0;
  void *data = t ? alloc_block(bytes, &zeroed) : NULL;
  if (!data) {
    free(t);
    return cairn__fail(CAIRN_E_NOMEM, "tensor_new: cannot allocate %zu bytes", bytes);
  }
  if (!zeroed) memset(data, 0, bytes);
  set_shape(t, dt, rank, shape, size);
  t->data = data;
  t->owns_data = 1;
  *out = t;
  return CAIRN_OK;
}

void cairn_tensor_free(cairn_tensor *t) {
  if (!t) return;
  if (t->owns_data) cairn_free(t->data);
  free(t);
}

cairn_status cairn_tensor_view(cairn_tensor *t, void *data, cairn_dtype dt, int rank,
                               const int64_t *shape) {
  if (!t) return cairn__fail(CAIRN_E_NULL, "tensor_view: tensor is NULL");
  int64_t size;
  cairn_status s = shape_size("tensor_view", dt, rank, shape, &size);
  if (s) return s;
  if (!data && size > 0) return cairn__fail(CAIRN_E_NULL, "tensor_view: data is NULL");
  memset(t, 0, sizeof *t);
  set_shape(t, dt, rank, shape, size);
  t->data = data;
  return CAIRN_OK;
}

cairn_status cairn_tensor_set_rows(cairn_tensor *t, int64_t rows) {
  if (!t) return cairn__fail(CAIRN_E_NULL, "tensor_set_rows: tensor is NULL");
  if (t->rank < 1) return cairn__fail(CAIRN_E_SHAPE, "tensor_set_rows: tensor is a scalar");
  if (rows < 0) return cairn__fail(CAIRN_E_INVALID, "tensor_set_rows: rows %lld < 0", (long long)rows);
  int64_t per_row = 1;
  for (int i = 1; i < t->rank; i++) per_row *= t->shape[i];
  if (per_row > 0 && rows > t->capacity / per_row)
    return cairn__fail(CAIRN_E_SHAPE, "tensor_set_rows: %lld rows of %lld elements exceed the %lld allocated",
                       (long long)rows, (long long)per_row, (long long)t->capacity);
  t->shape[0] = rows;
  t->size = rows * per_row;
  return CAIRN_OK;
}

size_t cairn_tensor_nbytes(const cairn_tensor *t) {
  return t ? (size_t)t->size * cairn_dtype_size(t->dtype) : 0;
}

int cairn_tensor_same_shape(const cairn_tensor *a, const cairn_tensor *b) {
  if (!a || !b || a->rank != b->rank) return 0;
  for (int i = 0; i < a->rank; i++)
    if (a->shape[i] != b->shape[i]) return 0;
  return 1;
}

char *cairn_tensor_shape_str(const cairn_tensor *t, char *buf, size_t len) {
  if (!buf || len == 0) return buf;
  if (!t) {
    snprintf(buf, len, "(null)");
    return buf;
  }
  size_t used = (size_t)snprintf(buf, len, "(");
  for (int i = 0; i < t->rank && used < len; i++)
    used += (size_t)snprintf(buf + used, len - used, i ? ", %lld" : "%lld", (long long)t->shape[i]);
  if (used < len) snprintf(buf + used, len - used, ")");
  return buf;
}

cairn_status cairn_tensor_copy(cairn_tensor *dst, const cairn_tensor *src) {
  if (!dst || !src) return cairn__fail(CAIRN_E_NULL, "tensor_copy: %s is NULL", dst ? "src" : "dst");
  if (dst->dtype != src->dtype)
    return cairn__fail(CAIRN_E_DTYPE, "tensor_copy: dst is %s, src is %s", cairn_dtype_name(dst->dtype),
                       cairn_dtype_name(src->dtype));
  if (!cairn_tensor_same_shape(dst, src)) {
    char a[96], b[96];
    return cairn__fail(CAIRN_E_SHAPE, "tensor_copy: dst is %s, src is %s",
                       cairn_tensor_shape_str(dst, a, sizeof a), cairn_tensor_shape_str(src, b, sizeof b));
  }
  if (dst->data != src->data) memmove(dst->data, src->data, cairn_tensor_nbytes(src));
  return CAIRN_OK;
}

cairn_status cairn_tensor_fill(cairn_tensor *t, float v) {
  cairn_status s = cairn__check_f32("tensor_fill", "t", t);
  if (s) return s;
  float *p = t->data;
  for (int64_t i = 0; i < t->size; i++) p[i] = v;
  return CAIRN_OK;
}

float *cairn_tensor_f32(const cairn_tensor *t) { return t && t->dtype == CAIRN_DTYPE_F32 ? t->data : NULL; }
int32_t *cairn_tensor_i32(const cairn_tensor *t) { return t && t->dtype == CAIRN_DTYPE_I32 ? t->data : NULL; }
int64_t *cairn_tensor_i64(const cairn_tensor *t) { return t && t->dtype == CAIRN_DTYPE_I64 ? t->data : NULL; }

int cairn__tensor_get_f64(const cairn_tensor *t, int64_t i, double *out) {
  if (!t || !t->data || i < 0 || i >= t->size) return 0;
  const void *d = t->data;
  switch (t->dtype) {
    case CAIRN_DTYPE_F32: *out = ((const float *)d)[i]; return 1;
    case CAIRN_DTYPE_F64: *out = ((const double *)d)[i]; return 1;
    case CAIRN_DTYPE_BF16: {
      uint32_t bits = (uint32_t)((const uint16_t *)d)[i] << 16;
      float f;
      memcpy(&f, &bits, sizeof f);
      *out = f;
      return 1;
    }
    case CAIRN_DTYPE_I8: *out = ((const int8_t *)d)[i]; return 1;
    case CAIRN_DTYPE_I16: *out = ((const int16_t *)d)[i]; return 1;
    case CAIRN_DTYPE_I32: *out = ((const int32_t *)d)[i]; return 1;
    case CAIRN_DTYPE_I64: *out = (double)((const int64_t *)d)[i]; return 1;
    case CAIRN_DTYPE_U8: *out = ((const uint8_t *)d)[i]; return 1;
    case CAIRN_DTYPE_BOOL: *out = ((const uint8_t *)d)[i] != 0; return 1;
    case CAIRN_DTYPE_U16: *out = ((const uint16_t *)d)[i]; return 1;
    case CAIRN_DTYPE_U32: *out = ((const uint32_t *)d)[i]; return 1;
    case CAIRN_DTYPE_U64: *out = (double)((const uint64_t *)d)[i]; return 1;
    default: return 0;
  }
}

cairn_status cairn__check_f32(const char *fn, const char *what, const cairn_tensor *t) {
  if (!t) return cairn__fail(CAIRN_E_NULL, "%s: %s is NULL", fn, what);
  if (t->dtype != CAIRN_DTYPE_F32)
    return cairn__fail(CAIRN_E_DTYPE, "%s: %s is %s, expected f32", fn, what, cairn_dtype_name(t->dtype));
  if (!t->data && t->size > 0) return cairn__fail(CAIRN_E_NULL, "%s: %s has no data", fn, what);
  return CAIRN_OK;
}

cairn_status cairn__check_rank(const char *fn, const char *what, const cairn_tensor *t, int rank) {
  if (t->rank != rank) {
    char b[96];
    return cairn__fail(CAIRN_E_SHAPE, "%s: %s is %s, expected rank %d", fn, what,
                       cairn_tensor_shape_str(t, b, sizeof b), rank);
  }
  return CAIRN_OK;
}
