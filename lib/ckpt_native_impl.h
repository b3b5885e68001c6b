/* cairn's own format as a reader backend (ckpt_backend.h): the state its
 * open builds (ckpt_native_open.c) and its read members use (ckpt_native.c,
 * with staging's bookkeeping in ckpt_native_stage.c).
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
  /* Staged compact tensors (doc/restore-memory.md): the verify of a tensor
     with zstd chunks decodes its first stage_len[i] bytes into stage[i]
     and the read copies them instead of decoding again; staged_bytes of
     them at most stage_max (0 unless cairn_ckpt_set_staging). Per view
     entry (i = e - v->ents), allocated on first use; ckpt_native_stage.c. */
  unsigned char **stage;
  uint64_t *stage_len;
  uint64_t staged_bytes, stage_max;
} ck_native;

/* The backend's open and close (ckpt_native_open.c): rules R1–R18 of
 * doc/checkpoint-format.md on superblock, footer, metadata and index. */
cairn_status cairn__ck_native_open(const ck_source *src, const cairn_ckpt_limits *lim, void **state, ck_view *v);
void cairn__ck_native_close(void *state);

/* Staging bookkeeping (ckpt_native_stage.c); the decoding that fills and
 * empties it is ckpt_native.c's. */
cairn_status cairn__ck_native_set_staging(void *state, uint64_t max_bytes);
/* Bytes of e to stage (whole chunks within the budget; 0: none, also when
 * e has no zstd chunk or memory is short) and a buffer for them in *buf. */
uint64_t cairn__ck_stage_alloc(ck_native *c, const ck_entry *e, unsigned char **buf);
/* Keeps buf (len bytes, from cairn__ck_stage_alloc) as e's staging. */
void cairn__ck_stage_keep(ck_native *c, const ck_entry *e, unsigned char *buf, uint64_t len);
/* Releases e's staging, if any. */
void cairn__ck_unstage(ck_native *c, const ck_entry *e);
/* Releases every staging (close). */
void cairn__ck_unstage_all(ck_native *c);

#endif
