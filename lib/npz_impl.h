/* The .npz reader's parts shared by its public calls (npz_read.c,
 * npz_open.c) and its checkpoint backend (npz_backend.c); never installed.
 * npz_read.c holds the ZIP checks and the member stream and calls nothing
 * of the other two, so that the backend (which ckpt_detect.c names) and
 * cairn_npz_reader_open (which asks ckpt_detect.c what a non-ZIP file is)
 * form no circle. */
#ifndef CAIRN_NPZ_IMPL_H
#define CAIRN_NPZ_IMPL_H

#include <stdint.h>
#include <zip.h>

#include "cairn/interop.h"

typedef struct npz_member {
  char *name;
  zip_uint64_t usize, csize;
  uint32_t crc;
} npz_member;

struct cairn_npz_reader {
  char *path;
  zip_t *za;
  npz_member *m;
  size_t n;
};

/* Opens the archive on fd (a descriptor of path, which stays the
 * caller's: libzip gets a duplicate) with every check of
 * cairn_npz_reader_open; messages begin "<fn>: <path>: ". *not_zip is set
 * when the ZIP end records were not found or refused (the caller may then
 * say what the file is instead). */
cairn_status cairn__npz_reader_open_fd(int fd, const char *fn, const char *path, cairn_npz_reader **out,
                                      int *not_zip);

/* Where a member's array goes as it is streamed. */
typedef struct npz_sink {
  /* After the .npy header's checks, before any data: dtype, rank (at
     most CAIRN_MAX_RANK), shape and the data's size in bytes. */
  cairn_status (*header)(void *u, cairn_dtype dt, int rank, const int64_t *shape, uint64_t nbytes);
  /* The data in C order, the host's byte order and bools as 0/1, in
     pieces of at most 1 MiB; then the member's CRC-32 and size are
     checked. NULL: stop after header, nothing more is read. */
  cairn_status (*data)(void *u, const unsigned char *p, size_t n);
  void *u;
  const char *fn; /* the call the messages begin with; NULL: "npz_reader_import" */
} npz_sink;

/* Streams member i (a .npy array) through k, with the checks and messages
 * of cairn_npz_reader_import ("<k->fn>: <path>: member 'w.npy': ...", with
 * the values at fault). */
cairn_status cairn__npz_member_stream(cairn_npz_reader *r, size_t i, const npz_sink *k);

#endif
