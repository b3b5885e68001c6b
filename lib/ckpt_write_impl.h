/* The checkpoint writer's handle, shared by its three files: ckpt_write.c
 * (open, records, the parallel LZ4 + CRC pipeline, commit), ckpt_write_queue.c
 * (errors and the output queue: staging buffer, iovecs, writev, early
 * writeback) and ckpt_write_meta.c (the metadata and index blocks written at
 * commit). Format: doc/checkpoint-format.md. */
#ifndef CAIRN_CKPT_WRITE_IMPL_H
#define CAIRN_CKPT_WRITE_IMPL_H

#include <sys/uio.h>

#include "ckpt_impl.h"


#define STAGE_CAP ((size_t)256 << 10) /* staging buffer */
#define SMALL_PIECE ((size_t)64 << 10) /* pieces up to this size are copied into staging */
#define MAX_IOV 256
#define SYNC_EVERY ((uint64_t)2 << 20)  /* start writeback every 2 MiB (measured: 1-4 MiB best) */
#define MIN_COMPRESS 128               /* chunks smaller than this are stored raw */
#define MAX_SLOTS 64

typedef struct wmeta {
  char *key;
  uint8_t type;
  uint64_t num;
  unsigned char *data;
  size_t len;
} wmeta;

/* One piece of a batch: input, and what encode_piece decided. */
typedef struct piece {
  const unsigned char *src;
  uint32_t raw;
  uint8_t codec;
  uint32_t stored;
  const unsigned char *out; /* stored bytes: src or a slot buffer */
  uint32_t data_crc, raw_crc;
  int crc_done; /* 0: small raw piece, CRC computed on the staged copy */
} piece;

struct cairn_ckpt_writer {
  char *path, *tmp;
  int fd;
  cairn_status failed;
  char fail_msg[CAIRN__ERRMSG_LEN]; /* the whole detail of the first failure */
  uint32_t chunk_bytes, alignment;
  uint64_t raw_min;
  cairn_ckpt_compress compress;
  int no_fsync;
  unsigned char file_id[16];
  uint64_t off;     /* bytes appended (written or queued) */
  uint64_t flushed; /* bytes written to fd */
  uint64_t synced;  /* writeback started up to here */
  /* output queue */
  unsigned char *stage;
  size_t stage_len;
  struct iovec iov[MAX_IOV];
  int niov, n_ext;
  /* records */
  ck_entry *ents;
  size_t n, cap;
  uint32_t *hash; /* open addressing over ents: index + 1, 0 empty */
  size_t hcap;
  wmeta *meta;
  size_t nmeta, meta_cap;
  /* per-slot buffers (one slot per thread) */
  int nslots;
  unsigned char **cbuf, **sbuf;
  void **zctx;           /* COMPACT: one zstd compression context per slot */
  uint32_t sb_required;  /* required feature bits of the superblock written at open */
  int used_zstd;         /* a codec-3 chunk was written: the file needs CK_FEAT_ZSTD */
  piece *pieces;
  /* record being written through cairn__ck_rec_* */
  ck_entry *cur;
  uint32_t cur_chunk;
  uint64_t cur_done;
  uint32_t cur_crc;
  /* record being written through cairn_ckpt_writer_begin/append/end: its
   * bytes are gathered into pbuf (one chunk) and encoded chunk by chunk */
  int cur_stream;
  unsigned char *pbuf;
  uint32_t pbuf_len;
};

/* ---- errors (ckpt_write_queue.c) ---- */
/* ENOSPC and EDQUOT are CAIRN_E_NOSPC, every other errno CAIRN_E_IO. */
cairn_status cairn__ckw_io_status(int err);
/* Marks the writer failed with the calling thread's current message. */
cairn_status cairn__ckw_set_failed(cairn_ckpt_writer *w, cairn_status s);
/* NULL or failed earlier: the error every later call reports. */
cairn_status cairn__ckw_check_usable(cairn_ckpt_writer *w, const char *fn);

/* ---- output queue (ckpt_write_queue.c) ---- */
cairn_status cairn__ckw_flush(cairn_ckpt_writer *w);
/* Room for len (<= STAGE_CAP) bytes in the staging buffer, queued at once;
 * the caller fills them before the next call that may flush. */
cairn_status cairn__ckw_reserve(cairn_ckpt_writer *w, size_t len, unsigned char **out);
cairn_status cairn__ckw_put_copy(cairn_ckpt_writer *w, const void *p, size_t len);
/* Queues caller memory that stays valid until the next flush. */
cairn_status cairn__ckw_put_ext(cairn_ckpt_writer *w, const void *p, size_t len);
cairn_status cairn__ckw_put_zeros(cairn_ckpt_writer *w, size_t len);

/* ---- metadata and index blocks (ckpt_write_meta.c) ---- */
/* Each returns a malloc'ed block (*out, *size bytes) ending in its CRC. */
cairn_status cairn__ckw_build_meta(cairn_ckpt_writer *w, unsigned char **out, uint64_t *size);
cairn_status cairn__ckw_build_index(cairn_ckpt_writer *w, unsigned char **out, uint64_t *size);

#endif
