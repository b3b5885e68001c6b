/* Checkpoint formats behind cairn_ckpt_open and cairn_ckpt_out (never
 * installed): one table per format, cairn's own among them.
 *
 * cairn_ckpt_open (ckpt_read.c) chooses a backend by the bytes of the path
 * (cairn__ck_reader_of, ckpt_detect.c) and calls its open, which parses
 * and validates the format's index and fills a ck_view: the tensors sorted
 * by name as ck_entry records (name, dtype, rank, shape, raw_bytes,
 * raw_crc; the other fields are the backend's own: for a foreign format
 * data_offset is an offset and seq a shard) and the metadata as ck_meta
 * records sorted by key. The handle serves find, entry_at and the metadata
 * getters from the view; every access to tensor bytes (read, pieces,
 * verify, codecs) goes through the table to the backend's state.
 *
 * Backends: cairn's own (ckpt_native_open.c opens, ckpt_native.c reads and
 * holds the table, ckpt_native_stage.c keeps staging; its write members are cairn's writer, ckpt_write.c),
 * safetensors (safetensors.c), the TF bundle (tfbundle_read.c,
 * tfbundle_write.c) and NumPy .npz (npz_backend.c over npz_read.c and
 * npz_write.c). Detection and the choice of a backend by format:
 * ckpt_detect.c. */
#ifndef CAIRN_CKPT_BACKEND_H
#define CAIRN_CKPT_BACKEND_H

#include "ckpt_impl.h"
#include "cairn/interop.h"

#include <sys/stat.h>

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
  /* The descriptor cairn_ckpt_check_unchanged watches and what fstat said
   * of it at open: the source's descriptor, or (a TF prefix, which names
   * no file) one the backend opened. The reader owns it from then on. */
  int fd;
  struct stat st;
} ck_view;

/* Frees the view's arrays and zeroes it; its descriptor is left open (the
 * reader or the backend closes it); interop_common.c. */
void cairn__ck_view_clear(ck_view *v);

/* What cairn_ckpt_open hands a backend's open. */
typedef struct ck_source {
  const cairn__dir *d;  /* where every file is opened (cairn__open_read(d, ...)); NULL: as named */
  const char *path;     /* the reader's copy: valid until the backend's close */
  int fd;               /* path opened once by the reader, which owns it; -1 if it would not open */
  const char *open_why; /* why fd is -1 */
} ck_source;

typedef struct ck_backend {
  const char *name; /* "cairn", "tf", "safetensors" or "npz": cairn_ckpt_format */
  /* Validates everything but the tensor bytes; limits are filled in. On
   * error the backend has freed what it allocated (*state, the view's
   * arrays, a descriptor it opened) and the view is zeroed. */
  cairn_status (*open)(const ck_source *src, const cairn_ckpt_limits *lim, void **state, ck_view *v);
  /* Reads entry e (one of the view's) into dst (e->raw_bytes bytes),
   * checking what the format lets it check (cairn: chunk and tensor CRCs;
   * TF: the tensor's CRC32C). */
  cairn_status (*read)(void *state, const ck_entry *e, unsigned char *dst);
  /* The same bytes handed to fn in order, in pieces of the backend's choice
   * (cairn: a chunk at a time; the others: the tensor in one piece). */
  cairn_status (*read_pieces)(void *state, const ck_entry *e, cairn_ckpt_piece_fn fn, void *user);
  /* What read checks of e, without keeping the bytes. */
  cairn_status (*verify_tensor)(void *state, const ck_entry *e);
  /* Every rule and checksum of the whole checkpoint, tensor data included. */
  cairn_status (*verify)(void *state, const ck_entry *ents, size_t n);
  /* Bit c set for each codec c e's stored bytes use (cairn_ckpt_codecs). */
  unsigned (*codecs)(void *state, const ck_entry *e);
  /* Optional (NULL: a no-op): lets verify_tensor keep up to max_bytes of
   * what it decoded for the next read of the same tensor
   * (cairn_ckpt_set_staging). cairn's own stages zstd chunks; the foreign
   * formats decode nothing worth keeping. */
  cairn_status (*set_staging)(void *state, uint64_t max_bytes);
  void (*close)(void *state); /* close(NULL) is a no-op (after a failed open) */

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

/* The four formats. */
extern const ck_backend cairn__ck_native;
extern const ck_backend cairn__ck_safetensors;
extern const ck_backend cairn__ck_tfbundle;
extern const ck_backend cairn__ck_npz;

/* The backend of a format named by cairn_ckpt_out's options, or NULL for
 * an unknown one (ckpt_detect.c). */
const ck_backend *cairn__ck_backend_of(cairn_ckpt_format_id format);

/* The foreign backend for path by content, or NULL: cairn's own format (or
 * something no backend claims, which the cairn backend then refuses).
 * safetensors: a regular file whose byte 8 is '{' after an 8-byte length.
 * npz: a file that starts with a ZIP local header ("PK\3\4") or an
 * empty ZIP's end record ("PK\5\6").
 * TF bundle: path is not a file but "<path>.index" is a LevelDB table
 * with TF's footer magic; or path is such a "<prefix>.index" itself.
 * fd: path already open (cairn_ckpt_open, so that a cairn file is opened
 * once), or -1. d: as for the backends' open. */
const ck_backend *cairn__ck_detect(const cairn__dir *d, const char *path, int fd);

/* The backend that opens path: cairn__ck_detect's, else cairn's own. */
const ck_backend *cairn__ck_reader_of(const cairn__dir *d, const char *path, int fd);

/* cairn_ckpt_open of a file found in directory d (NULL: as
 * cairn_ckpt_open): every file it reads is opened with cairn__open_read(d, ...). */
cairn_status cairn__ckpt_open_in(const cairn__dir *d, const char *path, const cairn_ckpt_limits *limits,
                                 cairn_ckpt **out);

#endif
