/* Helpers shared by the foreign-format readers and writers (safetensors.c,
 * leveldb_table.c, tfbundle_read.c, tfbundle_write.c, npz_read.c,
 * npz_write.c; interop_common.c).
 * Never installed. */
#ifndef CAIRN_INTEROP_IMPL_H
#define CAIRN_INTEROP_IMPL_H

#include "ckpt_backend.h"
#include "cairn/interop.h"

#include <stdio.h>

/* A file written atomically: "<path>.tmp.XXXXXX" in the destination
 * directory, renamed over path by commit after an fsync (and the
 * directory fsynced). fd < 0: not open. */
typedef struct ck_tmpfile {
  int fd;
  char *tmp, *path;
  uint64_t written;
} ck_tmpfile;

/* fn names the caller in messages. */
cairn_status cairn__tmpfile_open(ck_tmpfile *f, const char *fn, const char *path);
/* Appends len bytes (retrying short writes); ENOSPC gives CAIRN_E_NOSPC. */
cairn_status cairn__tmpfile_write(ck_tmpfile *f, const char *fn, const void *p, size_t len);
/* fsync, rename, fsync the directory; frees f's strings (the file is gone on error). */
cairn_status cairn__tmpfile_commit(ck_tmpfile *f, const char *fn);
/* Closes and removes the temporary file; a closed f is a no-op. */
void cairn__tmpfile_abort(ck_tmpfile *f);

/* Reads exactly len bytes at off into buf; messages name path, offset and `what`. */
#define cairn__xpread cairn__ck_pread

/* Tensor bytes of a shape: 0 on overflow or a negative dimension (*ok = 0). */
uint64_t cairn__shape_bytes(cairn_dtype dt, int rank, const uint64_t *shape, int *ok);

/* 1 if t is a consistent tensor a writer can take: rank 0..8, shape ≥ 0,
 * size = product of the shape, data unless empty. */
int cairn__tensor_ok(const cairn_tensor *t);

/* 1 if every byte of a bool tensor is 0 or 1. */
int cairn__bool_bytes_ok(const unsigned char *p, uint64_t n, uint64_t *bad_at);

/* The header parsers' lexing (safetensors' JSON, npy's Python dict): p
 * past the blanks (space, tab, CR, LF) before end; and, after them, 1 if
 * the next byte is c, consumed (*p moves past the blanks either way). */
const char *cairn__text_skip_ws(const char *p, const char *end);
int cairn__text_eat(const char **p, const char *end, int c);

/* Shared members of the foreign backends' tables (ckpt_backend.h). */
/* v->fd = fd and v->st what fstat says of it; "ckpt_open: cannot stat" path on error. */
cairn_status cairn__ck_view_watch(ck_view *v, int fd, const char *path);
/* The end of a foreign backend's open once its view is filled (st its
 * outcome): on success the view watches fd, its version is 0.0 (these
 * formats carry none) and *out = state; otherwise the view is cleared,
 * close_state(state) runs and the error is returned. */
cairn_status cairn__ck_open_done(cairn_status st, ck_view *v, int fd, const char *path, void *state,
                                 void (*close_state)(void *), void **out);
/* read_pieces over a backend's read: the tensor in one piece, in memory of
 * one tensor; path names the checkpoint in messages. */
cairn_status cairn__ck_pieces_whole(cairn_status (*read)(void *, const ck_entry *, unsigned char *), void *state,
                                    const char *path, const ck_entry *e, cairn_ckpt_piece_fn fn, void *user);
/* codecs of a format without cairn's chunks: raw (bit 0) unless e is empty. */
unsigned cairn__ck_codecs_raw(void *state, const ck_entry *e);

/* Sorts a view's entries by name in the reader's order (memcmp, shorter
 * first); returns the index of the first duplicate name or n if none. */
size_t cairn__view_sort(ck_entry *e, size_t n);
/* Sorts metadata by key (strcmp, what the getters' binary search uses). */
void cairn__view_sort_meta(ck_meta *m, size_t n);

/* The names a writer holds, for its duplicate check: an open-addressing
 * hash set of pointers to the caller's strings (which must outlive it), so
 * that adding n tensors costs O(n), not O(n²) string comparisons. */
typedef struct ck_nameset {
  const char **slot;
  size_t cap, n;
} ck_nameset;
int cairn__nameset_has(const ck_nameset *s, const char *name);
/* 0 when out of memory (s unchanged). name must not be in s yet. */
int cairn__nameset_put(ck_nameset *s, const char *name);
void cairn__nameset_free(ck_nameset *s);

/* Base-128 varints (protobuf, LevelDB): 0 if p[0..end) holds no complete
 * one of at most 10 bytes; else the bytes used. */
size_t cairn__varint_get(const unsigned char *p, const unsigned char *end, uint64_t *v);
size_t cairn__varint_put(unsigned char *p, uint64_t v); /* p has 10 bytes */

/* 1 when name[0..len) is a safe relative ZIP member name (.npz): 1..65535
 * bytes of UTF-8 without control characters, no backslash, not absolute, no
 * drive letter, no empty, "." or ".." component. The reader refuses an
 * archive with another name; the writer a tensor that would give one.
 * (npz_read.c) */
int cairn__npz_name_safe(const char *name, size_t len);

#endif
