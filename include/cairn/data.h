/* cairn/data.h — IDX files and an in-memory dataset iterator.
 *
 * IDX is the MNIST family's format (LeCun): a big-endian header
 *   0x00 0x00 <type> <rank>   then rank × u32 dimensions, then the data,
 * with type 0x08 u8, 0x09 i8, 0x0B i16, 0x0C i32, 0x0D f32, 0x0E f64.
 * Files may be gzip-compressed (detected from the content, not the name).
 *
 * The dataset iterator serves batches of (features, labels) from tensors in
 * memory, shuffling each epoch with a permutation that is a pure function
 * of (seed, epoch); its position is therefore two integers, which can be
 * exported and imported to resume exactly where a run stopped.
 */
#ifndef CAIRN_DATA_H
#define CAIRN_DATA_H

#include <stdint.h>

#include "cairn/status.h"
#include "cairn/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reads an IDX file (plain or gzip) into a new tensor of the file's dtype
 * (U8, I8, I16, I32, F32 or F64, converted to host byte order) and shape;
 * the caller frees *out, which is NULL on error. max_bytes bounds the data
 * size and so the allocation (0: 4 GiB). Memory follows the data actually
 * present, not the header's claim: a plain file's size is checked against
 * the header before anything is allocated, and gzip data is read into a
 * buffer that starts at 4 MiB and doubles as bytes arrive, up to the size
 * the header gives (at most max_bytes); so a header that claims gigabytes
 * over a few bytes fails as CAIRN_E_TRUNCATED after allocating megabytes,
 * and memory stays under twice the data decompressed. Errors name the file and the
 * offset (for gzip, in the uncompressed stream, except damaged compressed
 * data, which is placed in the compressed file): CAIRN_E_NULL, CAIRN_E_IO
 * (cannot open or read), CAIRN_E_FORMAT (bad magic, unknown type, rank 0
 * or > 8, trailing bytes after the data, invalid gzip data),
 * CAIRN_E_CORRUPT (gzip CRC-32 or length check fails), CAIRN_E_TRUNCATED
 * (fewer bytes than the header promises, or a gzip stream cut short),
 * CAIRN_E_LIMIT (bigger than max_bytes, or the dimensions' product
 * overflows), CAIRN_E_NOMEM. Thread-safe (no shared state). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_idx_read(const char *path, uint64_t max_bytes,
                                                   cairn_tensor **out);

/* Converts a tensor of any dtype (integer, float, f16/bf16, bool as 0/1) to
 * a new f32 tensor of the same shape, each element multiplied by `scale`
 * (1/255 maps u8 pixels to [0, 1]); the product is rounded once. Errors:
 * CAIRN_E_NULL, CAIRN_E_DTYPE (unknown dtype), CAIRN_E_NOMEM. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_tensor_to_f32(const cairn_tensor *src, float scale,
                                                        cairn_tensor **out);
/* Converts an integer tensor of class ids to a new i32 tensor of the same
 * shape; every value must be in [0, num_classes) (num_classes 0: only that
 * it fits in i32). Errors: CAIRN_E_INVALID (a value out of range: the
 * message gives the first bad flat index and its value; num_classes < 0),
 * CAIRN_E_DTYPE (not an integer dtype), CAIRN_E_NULL, CAIRN_E_NOMEM. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_tensor_to_labels(const cairn_tensor *src, int32_t num_classes,
                                                           cairn_tensor **out);

typedef struct cairn_dataset cairn_dataset;

typedef struct cairn_dataset_config {
  int64_t batch_size;   /* > 0 */
  int shuffle;          /* 1: new permutation each epoch */
  uint64_t seed;        /* shuffle seed */
  int drop_remainder;   /* 1: skip the last partial batch of an epoch */
  int64_t num_epochs;   /* 0: repeat forever; else OUT_OF_RANGE after that many */
} cairn_dataset_config;

/* x is (N, ...) f32 features, y is (N) i32 labels or NULL. The dataset
 * keeps pointers to x and y (it does not copy them): they must outlive it.
 * With shuffle it allocates its (N) permutation here, once.
 * Errors: CAIRN_E_NULL, CAIRN_E_SHAPE (x is a scalar, y is not (N)),
 * CAIRN_E_DTYPE, CAIRN_E_INVALID (batch_size <= 0, N == 0, negative
 * num_epochs, drop_remainder with batch_size > N), CAIRN_E_NOMEM.
 * A dataset is not thread-safe; use one per thread. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_dataset_new(const cairn_tensor *x, const cairn_tensor *y,
                                                      const cairn_dataset_config *cfg,
                                                      cairn_dataset **out);
CAIRN_API void cairn_dataset_free(cairn_dataset *d);

/* Copies the next batch into xb (batch_size, ...) f32 and yb (batch_size)
 * i32 (yb may be NULL); their shape[0] is set to the rows delivered, which
 * is smaller for the last batch of an epoch unless drop_remainder. xb's
 * dimensions after the first must be x's; only the capacity of xb and yb
 * matters for shape[0], so the same tensors serve every batch. Allocates
 * nothing. Returns CAIRN_E_OUT_OF_RANGE (TF's OutOfRangeError) once
 * num_epochs are done, and again on every call until reset or import.
 * Errors: CAIRN_E_SHAPE when xb or yb cannot hold a full batch or xb's
 * row shape differs, CAIRN_E_DTYPE, CAIRN_E_NULL, CAIRN_E_INVALID (yb given
 * but the dataset has no labels). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_dataset_next(cairn_dataset *d, cairn_tensor *xb,
                                                       cairn_tensor *yb);
/* Back to the start of epoch 0. */
CAIRN_API void cairn_dataset_reset(cairn_dataset *d);
/* Number of examples N, and batches per epoch. */
CAIRN_API int64_t cairn_dataset_size(const cairn_dataset *d);
CAIRN_API int64_t cairn_dataset_batches_per_epoch(const cairn_dataset *d);

/* Everything needed to resume: the position and what the shuffle depends on. */
typedef struct cairn_dataset_state {
  uint64_t seed;     /* must match the dataset's on import */
  int64_t size;      /* N; must match on import */
  int64_t epoch;     /* epochs completed */
  int64_t position;  /* examples consumed in the current epoch */
} cairn_dataset_state;

CAIRN_API void cairn_dataset_export(const cairn_dataset *d, cairn_dataset_state *st);
/* Errors: CAIRN_E_INVALID when the state belongs to another dataset
 * (seed or size differ; the message gives both values) or the epoch is
 * negative or the position outside [0, N]; CAIRN_E_NULL. The batch size
 * may differ from the exporting dataset's: the position counts examples. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_dataset_import(cairn_dataset *d, const cairn_dataset_state *st);

#ifdef __cplusplus
}
#endif
#endif
