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
 * decode. Its window limit is set when it changes (every full chunk has
 * the same one), not per chunk. */
typedef struct tdctx {
  ZSTD_DCtx *d;
  unsigned wlog; /* the ZSTD_d_windowLogMax set, 0 none yet */
} tdctx;

static pthread_key_t dctx_key;
static pthread_once_t dctx_once = PTHREAD_ONCE_INIT;
static int dctx_key_ok;

static void dctx_free(void *p) {
  tdctx *t = p;
  ZSTD_freeDCtx(t->d);
  free(t);
}
static void dctx_init(void) { dctx_key_ok = pthread_key_create(&dctx_key, dctx_free) == 0; }

static ZSTD_DCtx *thread_dctx(unsigned wlog) {
  pthread_once(&dctx_once, dctx_init);
  if (!dctx_key_ok) return NULL;
  tdctx *t = pthread_getspecific(dctx_key);
  if (!t) {
    if (!(t = calloc(1, sizeof *t))) return NULL;
    if (!(t->d = ZSTD_createDCtx()) || pthread_setspecific(dctx_key, t) != 0) {
      ZSTD_freeDCtx(t->d);
      free(t);
      return NULL;
    }
  }
  if (t->wlog != wlog) {
    t->wlog = 0;
    if (ZSTD_isError(ZSTD_DCtx_setParameter(t->d, ZSTD_d_windowLogMax, (int)wlog))) return NULL;
    t->wlog = wlog;
  }
  return t->d;
}

/* Window_Size of a frame header (RFC 8878, 3.1.1.1.2): the content size for
 * a single-segment frame, else from its Window_Descriptor byte. */
static uint64_t frame_window(const unsigned char *src, unsigned long long content) {
  if (src[4] & 0x20) return content;
  unsigned e = src[5] >> 3, m = src[5] & 7;
  uint64_t base = (uint64_t)1 << (10 + e);
  return base + base / 8 * m;
}

int cairn__ck_zstd_decode(const unsigned char *src, uint32_t stored, unsigned char *dst, uint32_t raw) {
  if (stored < cairn__ck_zstd_min_stored(raw)) return -1;
  /* Exactly one frame, no skippable frame, content size present and equal
   * to raw_size, no dictionary, a window of at most 2^W bytes: checked on
   * the header before decoding. zstd's one-shot decoder allocates no
   * window and ignores ZSTD_d_windowLogMax (only its streaming decoder
   * honours it), so the window is checked here; the parameter stays set
   * for any path that would honour it. */
  if (ck_get32(src) != ZSTD_MAGICNUMBER) return -1;
  unsigned long long cs = ZSTD_getFrameContentSize(src, stored);
  if (cs == ZSTD_CONTENTSIZE_UNKNOWN || cs == ZSTD_CONTENTSIZE_ERROR || cs != raw) return -1;
  if (ZSTD_getDictID_fromFrame(src, stored) != 0) return -1;
  unsigned wlog = cairn__ck_zstd_window_log(raw);
  if (frame_window(src, cs) > ((uint64_t)1 << wlog)) return -1;
  size_t fs = ZSTD_findFrameCompressedSize(src, stored);
  if (ZSTD_isError(fs) || fs != stored) return -1;
  ZSTD_DCtx *d = thread_dctx(wlog);
  if (!d) return -2;
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

size_t cairn__ck_zstd_encode(void *cctx, unsigned char *dst, size_t cap, const unsigned char *src, uint32_t raw,
                             size_t es) {
  /* The pledged source size makes zstd shrink the window to the chunk
   * (never above cairn__ck_zstd_window_log(raw)) and write the content size
   * into the frame header. Too small a cap: an error, the chunk is stored
   * raw. zstd cuts a frame into blocks of 128 KiB, each with its own
   * literal statistics: when the planes (raw / es bytes each) are not a
   * multiple of that, a block would straddle two planes and code both with
   * one table, so each plane but the last is flushed, which ends a block at
   * its end (the small checkpoint of bench/RESULTS.md: ratio 1.161 ->
   * 1.196, decoding 1.3x as fast). Aligned planes go in one call: the
   * streaming path copies its input once more (a fifth slower). */
  size_t plane = raw / es, n;
  if (es == 1 || plane % CK_ZSTD_BLOCK == 0) {
    n = ZSTD_compress2(cctx, dst, cap, src, raw);
  } else {
    ZSTD_CCtx_reset(cctx, ZSTD_reset_session_only);
    if (ZSTD_isError(ZSTD_CCtx_setPledgedSrcSize(cctx, raw))) return 0;
    ZSTD_outBuffer out = {dst, cap, 0};
    int ok = 1;
    for (size_t b = 0; b < es && ok; b++) {
      ZSTD_inBuffer in = {src + b * plane, plane, 0};
      ZSTD_EndDirective end = b + 1 < es ? ZSTD_e_flush : ZSTD_e_end;
      size_t left; /* 0 once the plane is consumed and its block(s) written */
      do left = ZSTD_compressStream2(cctx, &out, &in, end);
      while (left != 0 && !ZSTD_isError(left) && out.pos < out.size);
      ok = left == 0;
    }
    if (!ok) return 0; /* out of room (or an error): the chunk stays raw */
    n = out.pos;
  }
  if (ZSTD_isError(n) || n < cairn__ck_zstd_min_stored(raw) || n >= raw) return 0;
  return n;
}
