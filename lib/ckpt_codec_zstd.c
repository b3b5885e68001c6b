/* Codec 3 of the checkpoint format: byte planes + zstd (doc/checkpoint-format.md,
 * "Codecs"). The byte-plane split is the shuffle of codec 2; this file holds
 * only the zstd part: the frame checks the format requires before a byte is
 * decoded, the window limit, and one decompression context per thread. */
#include "ckpt_impl.h"

#include <pthread.h>
#include <stdlib.h>
#include <zstd.h>

unsigned cairn__ck_zstd_window_log(uint32_t raw) {
  unsigned lg = 0;
  while (lg < 31 && ((uint64_t)1 << lg) < raw) lg++;
  return lg < CK_ZSTD_MIN_WLOG ? CK_ZSTD_MIN_WLOG : lg;
}

uint64_t cairn__ck_zstd_min_stored(uint32_t raw) {
  return 6u + 4u * (((uint64_t)raw + CK_ZSTD_BLOCK - 1) / CK_ZSTD_BLOCK);
}

/* A context per thread, freed when the thread ends: chunks are decoded by
 * whichever OpenMP worker gets them, and a context (about 100 KiB of tables
 * plus the window) costs more to allocate than a small chunk costs to
 * decode. */
static pthread_key_t dctx_key;
static pthread_once_t dctx_once = PTHREAD_ONCE_INIT;
static int dctx_key_ok;

static void dctx_free(void *p) { ZSTD_freeDCtx(p); }
static void dctx_init(void) { dctx_key_ok = pthread_key_create(&dctx_key, dctx_free) == 0; }

static ZSTD_DCtx *thread_dctx(void) {
  pthread_once(&dctx_once, dctx_init);
  if (!dctx_key_ok) return NULL;
  ZSTD_DCtx *d = pthread_getspecific(dctx_key);
  if (!d) {
    if (!(d = ZSTD_createDCtx())) return NULL;
    if (pthread_setspecific(dctx_key, d) != 0) {
      ZSTD_freeDCtx(d);
      return NULL;
    }
  }
  return d;
}

int cairn__ck_zstd_decode(const unsigned char *src, uint32_t stored, unsigned char *dst, uint32_t raw) {
  if (stored < cairn__ck_zstd_min_stored(raw)) return -1;
  /* Exactly one frame, no skippable frame, content size present and equal
   * to raw_size, no dictionary: checked on the header before decoding. */
  if (ck_get32(src) != ZSTD_MAGICNUMBER) return -1;
  unsigned long long cs = ZSTD_getFrameContentSize(src, stored);
  if (cs == ZSTD_CONTENTSIZE_UNKNOWN || cs == ZSTD_CONTENTSIZE_ERROR || cs != raw) return -1;
  if (ZSTD_getDictID_fromFrame(src, stored) != 0) return -1;
  size_t fs = ZSTD_findFrameCompressedSize(src, stored);
  if (ZSTD_isError(fs) || fs != stored) return -1;
  ZSTD_DCtx *d = thread_dctx();
  if (!d) return -2;
  ZSTD_DCtx_reset(d, ZSTD_reset_session_and_parameters);
  if (ZSTD_isError(ZSTD_DCtx_setParameter(d, ZSTD_d_windowLogMax, (int)cairn__ck_zstd_window_log(raw)))) return -2;
  size_t n = ZSTD_decompressDCtx(d, dst, raw, src, stored);
  if (ZSTD_isError(n) || n != raw) return -1;
  return 0;
}

void *cairn__ck_zstd_cctx_new(void) {
  ZSTD_CCtx *c = ZSTD_createCCtx();
  if (!c) return NULL;
  if (ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, CK_ZSTD_LEVEL)) ||
      ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 1)) ||
      ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 0)) ||
      ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_dictIDFlag, 0)) ||
      ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_windowLog, 0))) {
    ZSTD_freeCCtx(c);
    return NULL;
  }
  return c;
}

void cairn__ck_zstd_cctx_free(void *c) { ZSTD_freeCCtx(c); }

size_t cairn__ck_zstd_encode(void *cctx, unsigned char *dst, size_t cap, const unsigned char *src, uint32_t raw) {
  /* ZSTD_compress2 pledges the source size, so zstd shrinks the window to
   * the chunk (never above cairn__ck_zstd_window_log(raw)) and writes the
   * content size into the frame header. Too small a cap: an error, the
   * chunk is stored raw. */
  size_t n = ZSTD_compress2(cctx, dst, cap, src, raw);
  if (ZSTD_isError(n) || n < cairn__ck_zstd_min_stored(raw) || n >= raw) return 0;
  return n;
}
