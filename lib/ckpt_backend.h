/* Foreign checkpoint formats behind cairn_ckpt_open (never installed).
 *
 * cairn_ckpt_open looks at the bytes of the path (cairn__ck_detect) and,
 * for a format that is not cairn's own, hands the path to that format's
 * backend. The backend parses and validates its index at open and fills a
 * ck_view: the tensors sorted by name as ck_entry records (name, dtype,
 * rank, shape, raw_bytes, raw_crc; data_offset and seq are the backend's
 * own: offset and shard) and the metadata as ck_meta records sorted by
 * key. The reader takes the view's arrays over and serves find, entry_at
 * and the metadata getters from them exactly as for its own files; only
 * reading a tensor's bytes and verifying go back to the backend.
 *
 * Backends: lib/safetensors.c, lib/tfbundle_read.c (tfbundle_write.c and
 * safetensors.c hold the writers, public in cairn/interop.h), and cairn's
 * own format (lib/ckpt_out.c: its table's write members). Detection and
 * the choice of a backend by format: lib/ckpt_detect.c. */
#ifndef CAIRN_CKPT_BACKEND_H
#define CAIRN_CKPT_BACKEND_H

#include "ckpt_impl.h"
#include "cairn/interop.h"

/* What a backend's open fills; every array is malloc'd and becomes the
 * reader's (freed by cairn_ckpt_close). names and meta_arena hold the
 * NUL-terminated strings the entries and metadata point into. */
typedef struct ck_view {
  ck_entry *ents;
  size_t n;
  char *names;
  ck_meta *meta;
  size_t nmeta;
  char *meta_arena;
  int major, minor; /* what cairn_ckpt_version reports */
} ck_view;

typedef struct ck_backend {
  const char *name; /* "cairn", "tf" or "safetensors": cairn_ckpt_format */
  /* Validates everything but the tensor bytes; limits are filled in. On
   * error the backend has freed what it allocated, *state included. Every
   * file is opened with cairn__open_read(d, ...): d is the checkpoint
   * directory the path was found in, or NULL (the caller named it). */
  cairn_status (*open)(const cairn__dir *d, const char *path, const cairn_ckpt_limits *lim, void **state,
                       ck_view *v);
  /* Reads entry e (one of the view's) into dst (e->raw_bytes bytes),
   * checking what the format lets it check (TF: the tensor's CRC32C). */
  cairn_status (*read)(void *state, const ck_entry *e, unsigned char *dst);
  /* Every rule and checksum of the whole checkpoint, tensor data included. */
  cairn_status (*verify)(void *state, const ck_entry *ents, size_t n);
  void (*close)(void *state); /* NULL is a no-op */

  /* Writing (cairn_ckpt_out, cairn/interop.h): a writer that becomes
   * `path` on commit (for a TF bundle, path is the prefix); o: cairn's
   * writer options (the other formats have none). */
  cairn_status (*wopen)(const char *path, const cairn_ckpt_write_options *o, void **w);
  cairn_status (*wadd)(void *w, const char *name, const cairn_tensor *t);
  /* A string metadata entry; NULL: the format has no metadata. */
  cairn_status (*wmeta_str)(void *w, const char *key, const char *value);
  cairn_status (*wcommit)(void *w); /* frees w whatever the outcome */
  void (*wabort)(void *w);
} ck_backend;

/* The write members add, commit and abort of a format whose writer type
 * is T, as static functions PFX_wadd, PFX_wcommit, PFX_wabort over its
 * writer's ADD(T *, name, t), COMMIT(T *) and ABORT(T *): one definition
 * for the three formats' adapters. */
#define CK_WRITE_ADAPTERS(PFX, T, ADD, COMMIT, ABORT)                                         \
  static cairn_status PFX##_wadd(void *w, const char *name, const cairn_tensor *t) {          \
    return ADD((T *)w, name, t);                                                              \
  }                                                                                           \
  static cairn_status PFX##_wcommit(void *w) { return COMMIT((T *)w); }                      \
  static void PFX##_wabort(void *w) { ABORT((T *)w); }

/* The three formats. cairn's own reader does not go through its table's
 * read members yet (ckpt_read.c parses cairn files inline; they are NULL):
 * only its write members are used. */
extern const ck_backend cairn__ck_native;
extern const ck_backend cairn__ck_safetensors;
extern const ck_backend cairn__ck_tfbundle;

/* The backend of a format named by cairn_ckpt_out's options, or NULL for
 * an unknown one (ckpt_detect.c). */
const ck_backend *cairn__ck_backend_of(cairn_ckpt_format_id format);

/* The backend for path by content, or NULL: cairn's own format (or
 * something no backend claims, which the cairn reader then refuses).
 * safetensors: a regular file whose byte 8 is '{' after an 8-byte length.
 * TF bundle: path is not a file but "<path>.index" is a LevelDB table
 * with TF's footer magic; or path is such a "<prefix>.index" itself.
 * fd: path already open (cairn_ckpt_open, so that a cairn file is opened
 * once), or -1. d: as for the backends' open. */
const ck_backend *cairn__ck_detect(const cairn__dir *d, const char *path, int fd);

/* cairn_ckpt_open of a file found in directory d (NULL: as
 * cairn_ckpt_open): every file it reads is opened with cairn__open_read(d, ...). */
cairn_status cairn__ckpt_open_in(const cairn__dir *d, const char *path, const cairn_ckpt_limits *limits,
                                 cairn_ckpt **out);

#endif
