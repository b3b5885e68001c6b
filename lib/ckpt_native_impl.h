/* cairn's own format as a reader backend (ckpt_backend.h): the state its
 * open builds (ckpt_native_open.c) and its read members use (ckpt_native.c).
 * Never installed. */
#ifndef CAIRN_CKPT_NATIVE_IMPL_H
#define CAIRN_CKPT_NATIVE_IMPL_H

#include "ckpt_backend.h"

/* One open cairn file. path and fd are the reader's (ck_source): they
 * outlive the state, and close leaves them alone. */
typedef struct ck_native {
  const char *path;
  int fd;
  uint64_t size;
  ck_super sb;
  ck_footer ft;
  cairn_ckpt_limits lim;
  /* The private copy of the index: the entries' chunk tables point into it. */
  unsigned char *index;
  /* The reader's view, which open fills (and parses the index into). */
  ck_view *v;
  /* Decoding scratch, kept from tensor to tensor until close: two buffers
     of scratch_sz bytes per decoding thread (scratch[2t], scratch[2t+1]),
     allocated on first use. Allocating them per tensor left the C heap
     growing with the tensor count (freed blocks pinned under small ones). */
  unsigned char **scratch;
  int n_scratch;
  size_t scratch_sz;
} ck_native;

/* The backend's open and close (ckpt_native_open.c): rules R1–R18 of
 * doc/checkpoint-format.md on superblock, footer, metadata and index. */
cairn_status cairn__ck_native_open(const ck_source *src, const cairn_ckpt_limits *lim, void **state, ck_view *v);
void cairn__ck_native_close(void *state);

#endif
