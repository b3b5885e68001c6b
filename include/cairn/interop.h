/* cairn/interop.h — TensorFlow checkpoints, safetensors files, NumPy .npz
 * archives.
 *
 * Reading needs nothing from this header: cairn_ckpt_open (cairn/ckpt.h)
 * recognizes the three formats by their bytes, so every reader of checkpoints —
 * find / read / verify / entry_at / meta, the Saver's restore and partial
 * restore, warm start, ckpt-inspect — accepts them as they are:
 *
 * - a TensorFlow V2 checkpoint ("tensor bundle") by its prefix, e.g.
 *   "model.ckpt-100" for "model.ckpt-100.index" + "model.ckpt-100.data-
 *   00000-of-00001" (the ".index" path itself is accepted too). Every CRC32C
 *   the bundle stores is checked: index blocks on open, a tensor's data on
 *   read. String, resource, variant and complex tensors, and sliced
 *   (partitioned) variables, are refused with CAIRN_E_UNSUPPORTED naming the
 *   tensor; TensorFlow 2's "_CHECKPOINTABLE_OBJECT_GRAPH" string is left out.
 * - a safetensors file. The format has no checksum: a tensor's raw_crc32c is
 *   0 and a damaged data byte goes unnoticed (bool bytes other than 0 and 1
 *   are refused); the header is validated fully (offsets contiguous, in the
 *   data region, matching dtype × shape). Its "__metadata__" strings are
 *   CAIRN_META_STR metadata.
 * - a NumPy .npz archive (numpy.savez or savez_compressed; a file that
 *   starts with a ZIP local header, "PK\3\4", or is an empty ZIP). Each
 *   member "<name>.npy" is the tensor <name> (another member is refused with
 *   CAIRN_E_UNSUPPORTED naming it). Open checks the ZIP structure as
 *   cairn_npz_reader_open does (below) and reads every member's .npy header;
 *   a read or verify streams the member, checking its CRC-32 and size
 *   (CAIRN_E_CORRUPT / CAIRN_E_FORMAT naming the file and the member); a
 *   Fortran-order array is transposed, up to 32 MiB (else CAIRN_E_LIMIT).
 *   raw_crc32c is 0 (the ZIP's CRC-32 covers the member, header included);
 *   no metadata.
 * cairn_ckpt_format tells which format a handle reads; cairn_ckpt_version
 * gives 1.0 for a TF bundle (its bundle version) and 0.0 for safetensors
 * and npz.
 *
 * This header adds the writers (and the NumPy .npz writer and reader
 * below). Both write atomically (temporary file,
 * fsync, rename, fsync of the directory), like cairn's own writer, and
 * take every dtype cairn has. Names: 1..1024 bytes of UTF-8 without
 * control characters, unique (CAIRN_E_EXISTS). The full description of
 * both formats as cairn reads and writes them is doc/interop-formats.md.
 *
 * Thread safety: a writer is used by one thread at a time.
 */
#ifndef CAIRN_INTEROP_H
#define CAIRN_INTEROP_H

#include "cairn/ckpt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* "cairn", "tf" (TensorFlow tensor bundle), "safetensors" or "npz"; NULL
 * for NULL. */
CAIRN_API const char *cairn_ckpt_format(const cairn_ckpt *c);

/* ---- safetensors --------------------------------------------------------- */

typedef struct cairn_safetensors_writer cairn_safetensors_writer;

/* Starts a safetensors file that becomes `path` on commit. Errors:
 * CAIRN_E_NULL, CAIRN_E_NOMEM. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_safetensors_writer_open(const char *path, cairn_safetensors_writer **out);
/* Adds tensor t under name. The header comes before the data, so the bytes
 * are written at commit: t must stay alive and unchanged until then (the
 * writer keeps a pointer, not a copy). Errors: CAIRN_E_INVALID (name, or
 * "__metadata__"), CAIRN_E_EXISTS, CAIRN_E_NULL. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_safetensors_writer_add(cairn_safetensors_writer *w, const char *name,
                                                                 const cairn_tensor *t);
/* A "__metadata__" string entry; setting a key again replaces it. Keys and
 * values: UTF-8 without NUL (CAIRN_E_INVALID). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_safetensors_writer_meta(cairn_safetensors_writer *w, const char *key,
                                                                  const char *value);
/* Writes header (tensors in name order, data in the same order, header
 * padded with spaces to a multiple of 8 bytes) and data; frees w whatever
 * the outcome. Errors: CAIRN_E_IO, CAIRN_E_NOSPC (nothing left behind). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_safetensors_writer_commit(cairn_safetensors_writer *w);
/* Frees w, writes nothing. abort(NULL) does nothing. */
CAIRN_API void cairn_safetensors_writer_abort(cairn_safetensors_writer *w);

/* ---- TensorFlow tensor bundle --------------------------------------------- */

typedef struct cairn_tfbundle_writer cairn_tfbundle_writer;

/* Starts a bundle "<prefix>.index" + "<prefix>.data-00000-of-00001" (one
 * shard). Errors: CAIRN_E_IO (directory missing or not writable),
 * CAIRN_E_NULL, CAIRN_E_NOMEM. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_tfbundle_writer_open(const char *prefix, cairn_tfbundle_writer **out);
/* Appends t's bytes to the data shard before returning (t may change
 * afterwards) and records name, dtype, shape, offset and the masked CRC32C.
 * Errors: CAIRN_E_INVALID, CAIRN_E_EXISTS, CAIRN_E_NULL; CAIRN_E_IO /
 * CAIRN_E_NOSPC fail the writer (commit returns the error). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_tfbundle_writer_add(cairn_tfbundle_writer *w, const char *name,
                                                              const cairn_tensor *t);
/* Writes the index (the header entry under the empty key, then the
 * entries in key order, as a LevelDB table without compression), commits
 * the data shard, then the index; frees w whatever the outcome. A reader
 * sees the new bundle once its .index is in place. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_tfbundle_writer_commit(cairn_tfbundle_writer *w);
CAIRN_API void cairn_tfbundle_writer_abort(cairn_tfbundle_writer *w);

/* ---- One writer for every format ------------------------------------------ */

/* The formats cairn writes (and reads: cairn_ckpt_format names them
 * "cairn", "tf", "safetensors" and "npz"). */
typedef enum cairn_ckpt_format_id {
  CAIRN_CKPT_FORMAT_CAIRN = 0,       /* cairn's own (cairn/ckpt.h) */
  CAIRN_CKPT_FORMAT_TF = 1,          /* TensorFlow tensor bundle: the path is its prefix */
  CAIRN_CKPT_FORMAT_SAFETENSORS = 2, /* safetensors: no checksums, string metadata only */
  CAIRN_CKPT_FORMAT_NPZ = 3          /* NumPy .npz (cairn_npz_writer_*): CRC-32 per member, no metadata */
} cairn_ckpt_format_id;

typedef struct cairn_ckpt_out_options {
  cairn_ckpt_format_id format;   /* default CAIRN_CKPT_FORMAT_CAIRN */
  cairn_ckpt_write_options cairn; /* cairn's writer options (chunks, compression,
                                     no_fsync); the other formats have none */
  size_t struct_size;            /* sizeof the caller's struct (CAIRN_CKPT_OUT_OPTIONS_SIZE);
                                    0: this first layout */
} cairn_ckpt_out_options;
#define CAIRN_CKPT_OUT_OPTIONS_SIZE sizeof(cairn_ckpt_out_options)

/* Every field 0: cairn's format with its writer's defaults (a zero-filled
 * struct is the same, and so is NULL options). */
CAIRN_API cairn_ckpt_out_options cairn_ckpt_out_options_default(void);

/* A checkpoint being written in the format its options name, through that
 * format's writer (cairn_ckpt_writer_*, cairn_tfbundle_writer_*,
 * cairn_safetensors_writer_*, which stay for what only one format has:
 * cairn's typed metadata and streamed tensors). Atomic as each of them:
 * nothing is at `path` until commit. */
typedef struct cairn_ckpt_out cairn_ckpt_out;

/* Errors: CAIRN_E_NULL, CAIRN_E_INVALID (an unknown format; bad cairn
 * options; struct_size smaller than the first layout), and those of the
 * format's writer_open (CAIRN_E_IO, CAIRN_E_NOMEM). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_ckpt_out_open(const char *path, const cairn_ckpt_out_options *opts,
                                                           cairn_ckpt_out **out);
/* "cairn", "tf", "safetensors" or "npz" (as cairn_ckpt_format); NULL for NULL. */
CAIRN_API const char *cairn_ckpt_out_format(const cairn_ckpt_out *w);
/* Adds tensor t under name, with the rules and errors of the format's
 * writer_add (safetensors keeps a pointer to t until commit; the others
 * copy it before returning). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_ckpt_out_add(cairn_ckpt_out *w, const char *name,
                                                          const cairn_tensor *t);
/* A string metadata entry (cairn: a CAIRN_META_STR key; safetensors: a
 * "__metadata__" entry). CAIRN_E_UNSUPPORTED for a TF bundle or an .npz,
 * which have no metadata. Other errors: those of the format's writer. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_ckpt_out_meta_str(cairn_ckpt_out *w, const char *key,
                                                               const char *value);
/* Commits (the format's writer_commit) and frees w whatever the outcome. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_ckpt_out_commit(cairn_ckpt_out *w);
/* Frees w, writes nothing. abort(NULL) does nothing. */
CAIRN_API void cairn_ckpt_out_abort(cairn_ckpt_out *w);
/* ---- NumPy .npz (export) --------------------------------------------------- */

/* An .npz archive numpy.load reads: one member "<name>.npy" per tensor,
 * stored uncompressed (ZIP64 where a size, an offset or the count needs
 * it), with a .npy 1.0 header in the host's byte order, and a fixed
 * timestamp, so the same tensors in the same order give the same bytes.
 * Written atomically like the other writers (a temporary file beside
 * `path`, fsync, rename, fsync of the directory). NumPy has no bfloat16:
 * a bf16 tensor is written widened to float32 ('<f4', exact), so it reads
 * back (through cairn_npz_reader_import) as f32. Thread safety: a writer is
 * used by one thread at a time. */
typedef struct cairn_npz_writer cairn_npz_writer;

/* Starts an archive that becomes `path` on commit (the temporary file is
 * made here). Errors: CAIRN_E_NULL, CAIRN_E_IO (the directory is missing
 * or not writable: the message names it), CAIRN_E_NOMEM. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_npz_writer_open(const char *path, cairn_npz_writer **out);
/* Appends member "<name>.npy" holding t (written before returning: t may
 * change afterwards). Errors: CAIRN_E_NULL; CAIRN_E_INVALID (a name that
 * is not 1..1024 bytes of UTF-8 without control characters, or is no safe
 * ZIP member name: absolute, a drive letter, a backslash, an empty, "." or
 * ".." component; an inconsistent tensor), CAIRN_E_EXISTS (the name was
 * added before), CAIRN_E_NOMEM: the writer stays usable; CAIRN_E_IO /
 * CAIRN_E_NOSPC (the message names the temporary file) fail it: every
 * later add returns CAIRN_E_STATE and commit the error. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_npz_writer_add(cairn_npz_writer *w, const char *name,
                                                         const cairn_tensor *t);
/* Writes the central directory and the end records, then commits the
 * file into place; frees w whatever the outcome. Errors: CAIRN_E_IO,
 * CAIRN_E_NOSPC, or an earlier add's (nothing is left behind). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_npz_writer_commit(cairn_npz_writer *w);
/* Removes the temporary file and frees w; abort(NULL) does nothing. */
CAIRN_API void cairn_npz_writer_abort(cairn_npz_writer *w);

/* ---- NumPy .npz (import) --------------------------------------------------- */

/* An .npz archive (numpy.savez / savez_compressed: a ZIP of .npy arrays)
 * whose members are copied one by one into a checkpoint writer, streamed:
 * memory is about two buffers of 1 MiB (and the writer's chunk), whatever
 * the sizes the archive declares; only a Fortran-order array of rank >= 2,
 * which must be transposed, is held whole, up to 32 MiB (larger ones are
 * refused with CAIRN_E_LIMIT). doc/interop-formats.md ("NumPy .npz") has
 * the rules and limits. Thread safety: one thread at a time per reader. */
typedef struct cairn_npz_reader cairn_npz_reader;

/* Opens `path` and checks its ZIP structure (the end records before
 * anything is allocated from them, then every directory entry against its
 * local header; member names safe, methods stored or deflate, no
 * encryption, no name twice), not the members' data. Errors:
 * CAIRN_E_NULL, CAIRN_E_NOT_FOUND, CAIRN_E_IO, CAIRN_E_FORMAT (not a ZIP,
 * damaged, unsafe or repeated name), CAIRN_E_UNSUPPORTED (method,
 * encryption, several disks), CAIRN_E_LIMIT (more than 1,000,000 members or
 * a central directory over 256 MiB), CAIRN_E_NOMEM. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_npz_reader_open(const char *path, cairn_npz_reader **out);
CAIRN_API void cairn_npz_reader_close(cairn_npz_reader *r);
/* Members in the central directory's order; names as stored ("dense/w.npy"),
 * owned by the reader. */
CAIRN_API size_t cairn_npz_reader_count(const cairn_npz_reader *r);
CAIRN_API const char *cairn_npz_reader_name(const cairn_npz_reader *r, size_t i);
/* Streams member i (a .npy array) into w as tensor `name`: the .npy header
 * is parsed (versions 1.0-3.0, the dict literal NumPy writes, at most 10,000
 * bytes), the data converted to little-endian C order (bools to 0/1) and
 * appended through cairn_ckpt_writer_begin/append/end; CRC-32 and sizes
 * are checked as the member ends. A failure before the tensor was begun
 * leaves w usable; one after it fails w (abort it). Errors: CAIRN_E_FORMAT
 * (not .npy, bad header, sizes that disagree: the message names the member
 * and both sizes), CAIRN_E_CORRUPT (CRC-32 mismatch, naming the member),
 * CAIRN_E_UNSUPPORTED (dtype, rank over 8), CAIRN_E_LIMIT, CAIRN_E_IO, and
 * the writer's errors. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_npz_reader_import(cairn_npz_reader *r, size_t i, cairn_ckpt_writer *w,
                                                            const char *name);

#ifdef __cplusplus
}
#endif
#endif
