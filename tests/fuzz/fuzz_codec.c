/* fuzz_codec: libFuzzer harness for the chunk decoders (codecs 1-3: LZ4,
 * byte planes + LZ4, byte planes + zstd) on stored bytes that no checksum
 * guards: fuzz_ckpt's inputs reach a decoder only when a mutation keeps
 * the chunk's CRC32C, so this one feeds cairn__ck_decode directly.
 *
 * Input: byte 0 picks the codec (1 + byte % 3), byte 1 the element size
 * (1, 2, 4 or 8, by its low two bits), bytes 2-3 the raw size minus 1
 * (little-endian, 1..65536; rounded down to a multiple of the element size),
 * the rest is the stored bytes. Besides ASan/UBSan findings (the output and
 * the scratch are exactly raw bytes, the input exactly the stored ones),
 * the harness aborts when a codec-3 chunk decodes although its frame breaks
 * a rule of doc/checkpoint-format.md (content size, one frame, no
 * dictionary, the window) as libzstd reads them, or decodes to bytes other
 * than zstd's own output interleaved by the reference unshuffle.
 *
 * Build: CC=clang ./configure --enable-fuzzing && make tests/fuzz/fuzz_codec
 * Run:   cp -r $srcdir/tests/fuzz/corpus-codec /tmp/c && tests/fuzz/fuzz_codec /tmp/c
 */
#include "config.h"

#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_getFrameHeader, only to cross-check */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "ckpt_impl.h"
#include "kernels/kernels.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void contract(const char *what) {
  fprintf(stderr, "fuzz_codec: contract broken: %s\n", what);
  abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 4) return 0;
  static const size_t sizes[4] = {1, 2, 4, 8};
  unsigned codec = 1 + data[0] % 3;
  size_t es = sizes[data[1] & 3];
  uint32_t raw = (uint32_t)(data[2] | data[3] << 8) + 1;
  raw -= raw % (uint32_t)es;
  if (raw == 0) return 0;
  uint32_t stored = (uint32_t)(size - 4);
  unsigned char *src = malloc(stored ? stored : 1), *dst = malloc(raw), *scratch = malloc(raw);
  if (!src || !dst || !scratch) abort();
  memcpy(src, data + 4, stored);
  int r = cairn__ck_decode(codec, es, src, stored, dst, raw, scratch);
  if (r == 0 && codec == CK_CODEC_SHUF_ZSTD) {
    ZSTD_frameHeader h;
    if (ZSTD_getFrameHeader(&h, src, stored) != 0 || h.frameType != ZSTD_frame) contract("decoded: not one frame");
    if (h.frameContentSize != raw) contract("decoded: content size is not raw");
    if (h.dictID != 0) contract("decoded: a dictionary");
    if (h.windowSize > (1ull << cairn__ck_zstd_window_log(raw))) contract("decoded: a window above 2^W");
    if (ZSTD_findFrameCompressedSize(src, stored) != stored) contract("decoded: bytes after the frame");
    unsigned char *z = malloc(raw), *u = malloc(raw);
    if (!z || !u) abort();
    if (ZSTD_decompress(z, raw, src, stored) != raw) contract("decoded, but zstd does not decode it to raw bytes");
    cairn__kernels_ref()->unshuffle(u, z, raw / es, es);
    if (memcmp(u, dst, raw) != 0) contract("decoded bytes differ from zstd + the reference unshuffle");
    free(z);
    free(u);
  }
  free(src);
  free(dst);
  free(scratch);
  return 0;
}
