/* cairn/ckpt.h — the cairn checkpoint file: writer, defensive reader, salvage.
 *
 * Format v1 in brief (the full specification is doc/checkpoint-format.md):
 *
 *   [superblock 64 B][data region: tensor records][metadata block][index block][footer 64 B]
 *
 * - Superblock: magic "\x89CRN\r\n\x1a\n", u16 major (1), u16 minor, byte-order
 *   mark 0x01020304, required / optional feature bits (unknown required bits
 *   are refused), alignment, chunk size, a 16-byte file id, reserved zeros,
 *   CRC32C.
 * - Data region: one record per tensor, in the order written: a record
 *   header (name, dtype, shape, layout; CRC32C), then either chunks of about
 *   1 MiB raw bytes — each with a small header (codec: stored raw or LZ4;
 *   raw and stored sizes; CRC32C of the stored bytes) — or, for large raw
 *   tensors, one payload aligned for mapping in place; then a trailer with
 *   the CRC32C of the tensor's raw bytes. Records are self-describing, so a
 *   file cut short can be salvaged record by record.
 * - Metadata block: typed key-values (u64, i64, f64, bool, string, bytes)
 *   sorted by key; CRC32C.
 * - Index block: one entry per tensor sorted by name (binary search, random
 *   access to one tensor) with its chunk table; CRC32C.
 * - Footer: the offsets and sizes of index and metadata, the tensor count,
 *   the file id again, a "complete" flag and CRC32C: a file without a valid
 *   footer is incomplete.
 * All integers are little-endian; data is stored little-endian.
 *
 * Writing is atomic: the writer streams into "<path>.tmp.XXXXXX" in the
 * destination directory; commit fsyncs it, renames it over <path> and fsyncs
 * the directory. An abort or a failed write (ENOSPC, EIO...) removes the
 * temporary file; <path> is never half-written.
 *
 * The reader checks every size against caller-settable limits before
 * allocating, every offset against the file's bounds, and every checksum
 * before it trusts or decompresses a byte (LZ4_decompress_safe only).
 * Errors name the file, the offset and the tensor.
 *
 * Thread safety: a writer or a reader handle is used by one thread at a
 * time; different handles are independent.
 */
#ifndef CAIRN_CKPT_H
#define CAIRN_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "cairn/status.h"
#include "cairn/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CAIRN_CKPT_VERSION_MAJOR 1
/* The newest version this library reads. It writes 1.0 unless a file uses
 * codec 3 (CAIRN_CKPT_COMPRESS_COMPACT): then 1.1 with required feature bit
 * 0x1, which cairn before 1.1 refuses with CAIRN_E_UNSUPPORTED. */
#define CAIRN_CKPT_VERSION_MINOR 1

/* ---- Writing -------------------------------------------------------------- */

typedef enum cairn_ckpt_compress {
  CAIRN_CKPT_COMPRESS_AUTO = 0, /* LZ4 per chunk, kept only when it saves enough */
  CAIRN_CKPT_COMPRESS_NONE,     /* every chunk stored raw */
  CAIRN_CKPT_COMPRESS_SHUFFLE,  /* byte-shuffle, then LZ4, per chunk when it saves enough */
  CAIRN_CKPT_COMPRESS_COMPACT   /* byte planes, then zstd level 1, per chunk when it saves enough:
                                   the smallest files (float weights ~1.15-1.25x); files using it
                                   are format 1.1, which cairn before it cannot read */
} cairn_ckpt_compress;

typedef struct cairn_ckpt_write_options {
  uint32_t chunk_bytes;         /* raw bytes per chunk; 0: 1 MiB */
  uint32_t alignment;           /* payload alignment of raw-layout tensors; 0: 64 */
  uint64_t raw_layout_min_bytes; /* tensors this big that do not compress are written
                                    as one aligned payload; 0: never */
  cairn_ckpt_compress compress;
  int no_fsync;                 /* 1: skip fsync (tests, scratch files); default 0 */
} cairn_ckpt_write_options;

/* The writer's defaults: every field 0 (a zero-filled struct is the same,
 * and so is NULL options). */
CAIRN_API cairn_ckpt_write_options cairn_ckpt_write_options_default(void);

typedef struct cairn_ckpt_writer cairn_ckpt_writer;

/* Starts a checkpoint that will become `path` on commit. opts may be NULL
 * (defaults). Errors: CAIRN_E_IO (directory missing, not writable: names
 * the path and errno's text), CAIRN_E_INVALID (bad options). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_ckpt_writer_open(const char *path,
                                                           const cairn_ckpt_write_options *opts,
                                                           cairn_ckpt_writer **out);
/* Appends tensor `t` under `name` (1..1024 bytes of UTF-8, no control
 * characters, unique in the file: CAIRN_E_EXISTS). The bytes are written and
 * checksummed before the call returns, so t may change after it returns (not
 * during it: a tensor modified during the call gets CRCs that readers
 * reject). Errors: CAIRN_E_INVALID / CAIRN_E_NULL / CAIRN_E_LIMIT (bad name
 * or tensor; the writer stays usable), CAIRN_E_IO / CAIRN_E_NOSPC (the
 * writer is then failed: later calls give CAIRN_E_STATE, commit returns the
 * original error, abort is the way out). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_ckpt_writer_add(cairn_ckpt_writer *w, const char *name,
                                                          const cairn_tensor *t);
/* A tensor written piece by piece, for callers that never hold it whole (an
 * import that decompresses a foreign file as it goes): begin declares name,
 * dtype and shape (the rules of cairn_ckpt_writer_add; errors as there, the
 * writer stays usable) and writes the record header; append takes the next
 * len raw bytes (little-endian, C order) in pieces of any size; end checks
 * that exactly dtype size × element count bytes arrived and writes the
 * trailer. Bytes are copied into a one-chunk buffer, and each chunk is
 * encoded (LZ4 per the writer's compress option), checksummed and written
 * as soon as it is full, so memory is one chunk (1 MiB by default) plus the
 * compression buffers, whatever the tensor's size; data may change after
 * append returns. The record is always chunked (never the raw layout).
 * Between begin and end no other tensor can be added and commit returns
 * CAIRN_E_STATE. Errors of append and end: CAIRN_E_STATE (no tensor begun),
 * CAIRN_E_NULL; CAIRN_E_SHAPE when append would go past the declared size
 * or end comes before it (the message names the tensor and both byte
 * counts); CAIRN_E_IO / CAIRN_E_NOSPC. Those last two kinds fail the writer,
 * since a partial record is already in the temporary file: commit then
 * returns the error and abort is the way out. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_ckpt_writer_begin(cairn_ckpt_writer *w, const char *name,
                                                            cairn_dtype dtype, int rank, const int64_t *shape);
CAIRN_API CAIRN_NODISCARD cairn_status cairn_ckpt_writer_append(cairn_ckpt_writer *w, const void *data, size_t len);
CAIRN_API CAIRN_NODISCARD cairn_status cairn_ckpt_writer_end(cairn_ckpt_writer *w);
/* Metadata: keys 1..255 bytes of [a-z0-9_.]; setting a key again replaces it. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_ckpt_writer_meta_u64(cairn_ckpt_writer *w, const char *key, uint64_t v);
CAIRN_API CAIRN_NODISCARD cairn_status cairn_ckpt_writer_meta_i64(cairn_ckpt_writer *w, const char *key, int64_t v);
CAIRN_API CAIRN_NODISCARD cairn_status cairn_ckpt_writer_meta_f64(cairn_ckpt_writer *w, const char *key, double v);
CAIRN_API CAIRN_NODISCARD cairn_status cairn_ckpt_writer_meta_bool(cairn_ckpt_writer *w, const char *key, int v);
CAIRN_API CAIRN_NODISCARD cairn_status cairn_ckpt_writer_meta_str(cairn_ckpt_writer *w, const char *key,
                                                               const char *v);
CAIRN_API CAIRN_NODISCARD cairn_status cairn_ckpt_writer_meta_bytes(cairn_ckpt_writer *w, const char *key,
                                                                 const void *v, size_t len);
/* Writes metadata, index and footer, fsyncs, renames onto the final path,
 * fsyncs the directory, and frees w (whatever the outcome). On failure the
 * temporary file is removed and the final path is untouched — except when
 * only the final fsync of the directory fails: the new file is then in place
 * and CAIRN_E_IO says that its rename may not be durable yet. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_ckpt_writer_commit(cairn_ckpt_writer *w);
/* Removes the temporary file and frees w. abort(NULL) does nothing. */
CAIRN_API void cairn_ckpt_writer_abort(cairn_ckpt_writer *w);

/* ---- Reading -------------------------------------------------------------- */

/* Bounds checked before anything is allocated; 0 fields take the default. */
typedef struct cairn_ckpt_limits {
  uint64_t max_index_bytes;    /* default 256 MiB */
  uint64_t max_meta_bytes;     /* default 16 MiB */
  uint64_t max_tensors;        /* default 1,000,000 */
  uint64_t max_chunk_bytes;    /* default 64 MiB (raw size of one chunk) */
  uint64_t max_tensor_bytes;   /* default 64 GiB (raw size of one tensor) */
} cairn_ckpt_limits;

typedef enum cairn_meta_type {
  CAIRN_META_U64 = 1,
  CAIRN_META_I64 = 2,
  CAIRN_META_F64 = 3,
  CAIRN_META_BOOL = 4,
  CAIRN_META_STR = 5,
  CAIRN_META_BYTES = 6
} cairn_meta_type;

typedef struct cairn_ckpt cairn_ckpt;

/* What the index says about one tensor. `name` is owned by the reader. */
typedef struct cairn_ckpt_entry {
  const char *name;
  cairn_dtype dtype;
  int rank;
  int64_t shape[CAIRN_MAX_RANK];
  uint64_t raw_bytes;     /* element count × dtype size */
  uint64_t stored_bytes;  /* bytes in the file, chunk headers excluded */
  uint32_t raw_crc32c;    /* CRC32C of the raw little-endian bytes */
  uint32_t n_chunks;      /* 0 for the aligned raw layout */
} cairn_ckpt_entry;

/* Opens and validates superblock, footer, metadata and index (not the
 * tensor data: see read and verify). limits may be NULL. A TensorFlow
 * checkpoint prefix, a safetensors file or a NumPy .npz is recognized by
 * its bytes and read through the same calls (cairn/interop.h, doc/interop-formats.md).
 * Errors:
 * CAIRN_E_IO, CAIRN_E_TRUNCATED (no valid footer: an incomplete file, which
 * cairn_ckpt_recover can salvage), CAIRN_E_CORRUPT (a checksum fails),
 * CAIRN_E_FORMAT (not a cairn checkpoint, or a broken rule), CAIRN_E_UNSUPPORTED
 * (newer major version or unknown required feature), CAIRN_E_LIMIT. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_ckpt_open(const char *path, const cairn_ckpt_limits *limits,
                                                    cairn_ckpt **out);
CAIRN_API void cairn_ckpt_close(cairn_ckpt *c);
CAIRN_API const char *cairn_ckpt_path(const cairn_ckpt *c);
/* The file's format version. */
CAIRN_API void cairn_ckpt_version(const cairn_ckpt *c, int *major, int *minor);

/* Tensors in name order: i in [0, count). */
CAIRN_API size_t cairn_ckpt_count(const cairn_ckpt *c);
CAIRN_API CAIRN_NODISCARD cairn_status cairn_ckpt_entry_at(const cairn_ckpt *c, size_t i, cairn_ckpt_entry *e);
/* Binary search by exact name; CAIRN_E_NOT_FOUND names it. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_ckpt_find(const cairn_ckpt *c, const char *name, cairn_ckpt_entry *e);

/* Codecs of tensor `name`'s chunks: *mask gets bit k set when some chunk
 * uses codec k (CAIRN_CKPT_CODEC_*; doc/checkpoint-format.md, "Codecs").
 * 0 for an empty tensor, CAIRN_CKPT_CODEC_RAW's bit for the raw layout and
 * for files of other formats. Errors: CAIRN_E_NULL, CAIRN_E_NOT_FOUND. */
#define CAIRN_CKPT_CODEC_RAW 0          /* stored as is */
#define CAIRN_CKPT_CODEC_LZ4 1          /* LZ4 block */
#define CAIRN_CKPT_CODEC_SHUFFLE_LZ4 2  /* byte planes + LZ4 */
#define CAIRN_CKPT_CODEC_SHUFFLE_ZSTD 3 /* byte planes + zstd (compact, format 1.1) */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_ckpt_codecs(const cairn_ckpt *c, const char *name, unsigned *mask);

/* Decodes tensor `name` straight into dst, which must have exactly the
 * stored dtype and shape (CAIRN_E_DTYPE / CAIRN_E_SHAPE name both), reading
 * only that tensor's bytes; every chunk CRC is checked before decompression
 * and the tensor CRC after. Raw chunks are read straight into dst;
 * compressed ones go through a scratch buffer of at most one chunk per
 * decoding thread (chunks are decoded in parallel with OpenMP). On error the
 * contents of dst are unspecified. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_ckpt_read(cairn_ckpt *c, const char *name, cairn_tensor *dst);

/* Checks tensor `name` exactly as cairn_ckpt_read would (every chunk CRC,
 * the decoding, the tensor CRC) without a destination: the data goes
 * through a scratch buffer of at most one chunk (1 MiB by default, never
 * more than the tensor) per decoding thread, whatever the tensor's size,
 * plus the budget given to cairn_ckpt_set_staging (none by default).
 * The first pass of a restore that must change nothing on failure
 * (doc/restore-memory.md). Errors: those of cairn_ckpt_read. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_ckpt_verify_tensor(cairn_ckpt *c, const char *name);

/* Lets cairn_ckpt_verify_tensor keep up to max_bytes (in all, per open
 * checkpoint; 0, the default: none) of the data it decoded from zstd
 * chunks (codec 3, "compact"), and the next cairn_ckpt_read of that tensor
 * copy those bytes instead of reading and decoding them again: a verify
 * then read decodes a compact tensor once. The copy is checked against the
 * tensor CRC as a decode is; the read releases the tensor's staging, close
 * releases the rest. A tensor past the budget is staged in part (whole
 * chunks), the rest decoded twice. Staged bytes are those of the file when
 * it was verified: a caller that must notice later changes of the file
 * checks cairn_ckpt_check_unchanged (as a restore does). A foreign
 * checkpoint (safetensors, TF bundle, .npz) has nothing to keep, so there the
 * budget goes unused. Errors: CAIRN_E_NULL. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_ckpt_set_staging(cairn_ckpt *c, uint64_t max_bytes);

/* Reads tensor `name` piece by piece, for callers that need not hold it
 * whole (a diff, an export): fn gets each decoded piece in order — raw
 * bytes [offset, offset + len), len ≤ the file's chunk size (1 MiB by
 * default), a multiple of 8 except for the last piece — on the calling
 * thread; data is valid during the call only. Each chunk's CRC is checked
 * before fn sees it, the tensor CRC after the last piece: only a return of
 * CAIRN_OK says that every piece handed over was intact. Memory: two chunk
 * buffers, whatever the tensor's size. A non-zero return of fn stops the
 * read and is returned. Errors: those of cairn_ckpt_read, CAIRN_E_NULL. */
typedef cairn_status (*cairn_ckpt_piece_fn)(void *user, uint64_t offset, const void *data, size_t len);
CAIRN_API CAIRN_NODISCARD cairn_status cairn_ckpt_read_pieces(cairn_ckpt *c, const char *name, cairn_ckpt_piece_fn fn,
                                                           void *user);

/* CAIRN_OK if the open file is still as cairn_ckpt_open found it: the same
 * device and inode (fstat of its descriptor), size and modification time.
 * CAIRN_E_CORRUPT names what changed (the file was written to or cut while
 * open; renaming or unlinking it is not a change: reads go on through the
 * descriptor). CAIRN_E_IO if fstat fails. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_ckpt_check_unchanged(const cairn_ckpt *c);

/* Checks every checksum and rule of the whole file, tensor data included.
 * Returns the first failure (message names the offset and tensor). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_ckpt_verify(cairn_ckpt *c);

/* Metadata in key order. Values stay valid until close. */
CAIRN_API size_t cairn_ckpt_meta_count(const cairn_ckpt *c);
CAIRN_API CAIRN_NODISCARD cairn_status cairn_ckpt_meta_at(const cairn_ckpt *c, size_t i, const char **key,
                                                       cairn_meta_type *type);
/* Typed getters: CAIRN_E_NOT_FOUND (no such key), CAIRN_E_DTYPE (other type). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_ckpt_meta_u64(const cairn_ckpt *c, const char *key, uint64_t *v);
CAIRN_API CAIRN_NODISCARD cairn_status cairn_ckpt_meta_i64(const cairn_ckpt *c, const char *key, int64_t *v);
CAIRN_API CAIRN_NODISCARD cairn_status cairn_ckpt_meta_f64(const cairn_ckpt *c, const char *key, double *v);
CAIRN_API CAIRN_NODISCARD cairn_status cairn_ckpt_meta_bool(const cairn_ckpt *c, const char *key, int *v);
CAIRN_API CAIRN_NODISCARD cairn_status cairn_ckpt_meta_str(const cairn_ckpt *c, const char *key, const char **v);
CAIRN_API CAIRN_NODISCARD cairn_status cairn_ckpt_meta_bytes(const cairn_ckpt *c, const char *key, const void **v,
                                                          size_t *len);

/* ---- Salvage ------------------------------------------------------------- */

/* Copies every tensor of `in` whose record was completely written (record
 * header, all chunks and trailer present with valid checksums), and the
 * metadata if it survived, into a new valid checkpoint `out` (written
 * atomically; `out` may be `in`). Chunks are copied as stored, with the
 * input's chunk size and alignment. *recovered and *lost (either may be NULL)
 * count tensors kept and tensors found cut or corrupt. Works on complete
 * files too (a copy). Errors: CAIRN_E_FORMAT when `in` does not even start
 * like a checkpoint, CAIRN_E_TRUNCATED when it is shorter than its 64-byte
 * superblock, CAIRN_E_CORRUPT / CAIRN_E_UNSUPPORTED for a damaged or newer
 * superblock; the writer's errors for `out`. Nothing is written on error. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_ckpt_recover(const char *in, const char *out, size_t *recovered,
                                                       size_t *lost);

/* ---- CRC32C ----------------------------------------------------------------- */

/* CRC-32C (Castagnoli) of len bytes continuing from crc (0 to start), with
 * the SSE4.2 instruction when the CPU has it (three interleaved streams) and
 * slicing-by-8 tables otherwise or when CAIRN_ISA=ref.
 * cairn_crc32c(0, "123456789", 9) == 0xE3069283. */
CAIRN_API uint32_t cairn_crc32c(uint32_t crc, const void *data, size_t len);

#ifdef __cplusplus
}
#endif
#endif
