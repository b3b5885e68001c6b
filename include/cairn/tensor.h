/* cairn/tensor.h — dense row-major tensors of rank 0..8.
 *
 * A cairn_tensor is a plain struct so that callers can read its shape and
 * data directly. Owned storage (cairn_tensor_new) is 64-byte aligned and
 * zero-filled; a view (cairn_tensor_view) wraps memory the caller owns.
 * Shapes are int64 element counts, outermost first: a batch of B rows of
 * `in` features is (B, in). A rank-0 tensor (scalar) has size 1.
 * Tensors are not thread-safe for concurrent writes.
 */
#ifndef CAIRN_TENSOR_H
#define CAIRN_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "cairn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CAIRN_MAX_RANK 8
#define CAIRN_ALIGNMENT 64

/* Element types. The numbers are part of the checkpoint format: never
 * renumber, only append. */
typedef enum cairn_dtype {
  CAIRN_DTYPE_F32 = 1,
  CAIRN_DTYPE_F64 = 2,
  CAIRN_DTYPE_F16 = 3,
  CAIRN_DTYPE_BF16 = 4,
  CAIRN_DTYPE_I8 = 5,
  CAIRN_DTYPE_I16 = 6,
  CAIRN_DTYPE_I32 = 7,
  CAIRN_DTYPE_I64 = 8,
  CAIRN_DTYPE_U8 = 9,
  CAIRN_DTYPE_U16 = 10,
  CAIRN_DTYPE_U32 = 11,
  CAIRN_DTYPE_U64 = 12,
  CAIRN_DTYPE_BOOL = 13
} cairn_dtype;

typedef struct cairn_tensor {
  void *data;                     /* size * dtype_size bytes; 64-aligned if owned */
  cairn_dtype dtype;
  int rank;                       /* 0..CAIRN_MAX_RANK */
  int64_t shape[CAIRN_MAX_RANK];  /* shape[rank..] are 1 */
  int64_t size;                   /* product of shape[0..rank) */
  int64_t capacity;               /* elements data holds (size at creation) */
  int owns_data;                  /* 1: cairn_tensor_free releases data */
} cairn_tensor;

/* Bytes per element (0 for an unknown dtype) and a short name ("f32"). */
CAIRN_API size_t cairn_dtype_size(cairn_dtype dt);
CAIRN_API const char *cairn_dtype_name(cairn_dtype dt);

/* Allocates a zero-filled tensor. Errors: CAIRN_E_INVALID (rank outside
 * 0..8, negative dimension, unknown dtype), CAIRN_E_LIMIT (byte size
 * overflows), CAIRN_E_NOMEM. Dimensions of 0 are allowed (size 0). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_tensor_new(cairn_dtype dt, int rank, const int64_t *shape,
                                                     cairn_tensor **out);
/* Releases t and, if owned, its data. cairn_tensor_free(NULL) does nothing. */
CAIRN_API void cairn_tensor_free(cairn_tensor *t);

/* Fills *t as a non-owning view of `data` (which must hold the whole shape).
 * Nothing is allocated; there is nothing to free. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_tensor_view(cairn_tensor *t, void *data, cairn_dtype dt,
                                                      int rank, const int64_t *shape);

/* Changes shape[0] of t (e.g. the last, smaller batch) without touching
 * data; the new size may not exceed the capacity given at creation
 * (CAIRN_E_SHAPE). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_tensor_set_rows(cairn_tensor *t, int64_t rows);

/* Total bytes of data. */
CAIRN_API size_t cairn_tensor_nbytes(const cairn_tensor *t);
/* 1 if a and b have the same rank and dimensions. */
CAIRN_API int cairn_tensor_same_shape(const cairn_tensor *a, const cairn_tensor *b);
/* Writes "(32, 784)" (or "()" for a scalar) into buf; returns buf. */
CAIRN_API char *cairn_tensor_shape_str(const cairn_tensor *t, char *buf, size_t len);
/* Copies src into dst; same dtype and shape required. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_tensor_copy(cairn_tensor *dst, const cairn_tensor *src);
/* Sets every element of an f32 tensor to v. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_tensor_fill(cairn_tensor *t, float v);

/* Typed data pointers: NULL if t is NULL or of another dtype. */
CAIRN_API float *cairn_tensor_f32(const cairn_tensor *t);
CAIRN_API int32_t *cairn_tensor_i32(const cairn_tensor *t);
CAIRN_API int64_t *cairn_tensor_i64(const cairn_tensor *t);

/* 64-byte-aligned allocation for large buffers; cairn_free(NULL) is a no-op. */
CAIRN_API void *cairn_alloc(size_t bytes);
CAIRN_API void cairn_free(void *p);

#ifdef __cplusplus
}
#endif
#endif
