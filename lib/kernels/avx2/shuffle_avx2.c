/* AVX2 byte planes (the byte-shuffle of checkpoint codecs 2 and 3); the
 * specification is lib/kernels/ref/shuffle_ref.c. The elements are
 * (n, es) bytes, the planes (es, n). Each loop step transposes a block of
 * 32 elements in registers, so every plane gets one 32-byte store (load)
 * per step: for es = 4, four loads of 8 elements each, a byte shuffle
 * inside each 128-bit lane (4×4 bytes: the plane-b bytes of 4 elements
 * become one dword), a dword permute (the plane's two dwords of the 8
 * elements become one qword) and a 4×4 transpose of qwords (unpack +
 * permute2x128). es = 8 splits each element's low and high dwords first
 * and runs the es = 4 transpose on each half (planes 0-3 and 4-7); es = 2
 * is a byte shuffle, a qword permute and one lane swap. The last n mod 32
 * elements, and element sizes other than 2, 4 and 8, go to the reference.
 * Every operation moves bytes: the result is exactly the reference's. */
#include "config.h"

#include <immintrin.h>
#include <string.h>

#include "kernels/kernels.h"

#define LD(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
#define ST(p, v) _mm256_storeu_si256((__m256i *)(void *)(p), (v))

/* In each 128-bit lane, 4 elements of 4 bytes -> 4 dwords, one per plane. */
static inline __m256i bytes_4x4(__m256i v) {
  const __m256i m = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, /* lane 0 */
                                     0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15 /* lane 1 */);
  return _mm256_shuffle_epi8(v, m); /* a 4×4 transpose: its own inverse */
}

/* 32 elements of 4 bytes (v[0..3], 8 elements each) -> 4 planes of 32
 * bytes (p[0..3]). */
static inline void split4(const __m256i v[4], __m256i p[4]) {
  const __m256i q = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  __m256i w[4];
  for (int j = 0; j < 4; j++) /* qword b of w[j]: plane b of v[j]'s 8 elements */
    w[j] = _mm256_permutevar8x32_epi32(bytes_4x4(v[j]), q);
  __m256i t0 = _mm256_unpacklo_epi64(w[0], w[1]); /* planes 0, 2 of w0, w1 */
  __m256i t1 = _mm256_unpackhi_epi64(w[0], w[1]); /* planes 1, 3 of w0, w1 */
  __m256i t2 = _mm256_unpacklo_epi64(w[2], w[3]);
  __m256i t3 = _mm256_unpackhi_epi64(w[2], w[3]);
  p[0] = _mm256_permute2x128_si256(t0, t2, 0x20);
  p[1] = _mm256_permute2x128_si256(t1, t3, 0x20);
  p[2] = _mm256_permute2x128_si256(t0, t2, 0x31);
  p[3] = _mm256_permute2x128_si256(t1, t3, 0x31);
}

/* The inverse of split4. */
static inline void join4(const __m256i p[4], __m256i v[4]) {
  const __m256i q = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7); /* inverse of split4's */
  __m256i t0 = _mm256_permute2x128_si256(p[0], p[2], 0x20);
  __m256i t1 = _mm256_permute2x128_si256(p[1], p[3], 0x20);
  __m256i t2 = _mm256_permute2x128_si256(p[0], p[2], 0x31);
  __m256i t3 = _mm256_permute2x128_si256(p[1], p[3], 0x31);
  __m256i w[4] = {_mm256_unpacklo_epi64(t0, t1), _mm256_unpackhi_epi64(t0, t1), _mm256_unpacklo_epi64(t2, t3),
                  _mm256_unpackhi_epi64(t2, t3)};
  for (int j = 0; j < 4; j++) v[j] = bytes_4x4(_mm256_permutevar8x32_epi32(w[j], q));
}

/* In each 128-bit lane, 8 elements of 2 bytes -> qword 0: their low bytes,
 * qword 1: their high bytes; then qwords (0, 2, 1, 3): the lane-0 and
 * lane-1 halves of each plane side by side. */
static inline __m256i split2(__m256i v) {
  const __m256i m = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, /* lane 0 */
                                     0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15 /* lane 1 */);
  return _mm256_permute4x64_epi64(_mm256_shuffle_epi8(v, m), 0xD8);
}

static void shuffle2(unsigned char *restrict dst, const unsigned char *restrict src, size_t n, size_t n32) {
  for (size_t i = 0; i < n32; i += 32) {
    __m256i a = split2(LD(src + 2 * i)), b = split2(LD(src + 2 * i + 32));
    ST(dst + i, _mm256_permute2x128_si256(a, b, 0x20));
    ST(dst + n + i, _mm256_permute2x128_si256(a, b, 0x31));
  }
}

static void unshuffle2(unsigned char *restrict dst, const unsigned char *restrict src, size_t n, size_t n32) {
  for (size_t i = 0; i < n32; i += 32) {
    __m256i p0 = LD(src + i), p1 = LD(src + n + i);
    __m256i lo = _mm256_unpacklo_epi8(p0, p1); /* elements 0-7 | 16-23 */
    __m256i hi = _mm256_unpackhi_epi8(p0, p1); /* elements 8-15 | 24-31 */
    ST(dst + 2 * i, _mm256_permute2x128_si256(lo, hi, 0x20));
    ST(dst + 2 * i + 32, _mm256_permute2x128_si256(lo, hi, 0x31));
  }
}

static void shuffle4(unsigned char *restrict dst, const unsigned char *restrict src, size_t n, size_t n32) {
  for (size_t i = 0; i < n32; i += 32) {
    __m256i v[4], p[4];
    for (int j = 0; j < 4; j++) v[j] = LD(src + 4 * i + 32 * j);
    split4(v, p);
    for (int b = 0; b < 4; b++) ST(dst + b * n + i, p[b]);
  }
}

static void unshuffle4(unsigned char *restrict dst, const unsigned char *restrict src, size_t n, size_t n32) {
  for (size_t i = 0; i < n32; i += 32) {
    __m256i v[4], p[4];
    for (int b = 0; b < 4; b++) p[b] = LD(src + b * n + i);
    join4(p, v);
    for (int j = 0; j < 4; j++) ST(dst + 4 * i + 32 * j, v[j]);
  }
}

/* 8-byte elements: x holds elements 4j..4j+3 as dwords (lo, hi) pairs; the
 * permute puts the 4 low dwords in lane 0 and the 4 high ones in lane 1. */
static void shuffle8(unsigned char *restrict dst, const unsigned char *restrict src, size_t n, size_t n32) {
  const __m256i q = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  for (size_t i = 0; i < n32; i += 32) {
    __m256i lo[4], hi[4], p[4];
    for (int j = 0; j < 4; j++) {
      __m256i x = _mm256_permutevar8x32_epi32(LD(src + 8 * i + 64 * j), q);
      __m256i y = _mm256_permutevar8x32_epi32(LD(src + 8 * i + 64 * j + 32), q);
      lo[j] = _mm256_permute2x128_si256(x, y, 0x20); /* low dwords of 8 elements */
      hi[j] = _mm256_permute2x128_si256(x, y, 0x31);
    }
    split4(lo, p);
    for (int b = 0; b < 4; b++) ST(dst + b * n + i, p[b]);
    split4(hi, p);
    for (int b = 0; b < 4; b++) ST(dst + (4 + b) * n + i, p[b]);
  }
}

static void unshuffle8(unsigned char *restrict dst, const unsigned char *restrict src, size_t n, size_t n32) {
  const __m256i q = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7); /* inverse of shuffle8's */
  for (size_t i = 0; i < n32; i += 32) {
    __m256i lo[4], hi[4], p[4];
    for (int b = 0; b < 4; b++) p[b] = LD(src + b * n + i);
    join4(p, lo);
    for (int b = 0; b < 4; b++) p[b] = LD(src + (4 + b) * n + i);
    join4(p, hi);
    for (int j = 0; j < 4; j++) {
      __m256i x = _mm256_permute2x128_si256(lo[j], hi[j], 0x20);
      __m256i y = _mm256_permute2x128_si256(lo[j], hi[j], 0x31);
      ST(dst + 8 * i + 64 * j, _mm256_permutevar8x32_epi32(x, q));
      ST(dst + 8 * i + 64 * j + 32, _mm256_permutevar8x32_epi32(y, q));
    }
  }
}

/* The first n32 elements of each plane (whole blocks of 32), in vectors. */
typedef void planes_fn(unsigned char *restrict dst, const unsigned char *restrict src, size_t n, size_t n32);
typedef void bytes_fn(unsigned char *restrict dst, const unsigned char *restrict src, size_t n, size_t es);
typedef void tail_fn(unsigned char *restrict dst, const unsigned char *restrict src, size_t n, size_t es,
                     size_t i0);

/* The vector kernel for es = 2, 4 or 8 and the reference's loop for the
 * last n mod 32 elements; the reference for any other es. */
static void by_es(planes_fn *k2, planes_fn *k4, planes_fn *k8, bytes_fn *ref, tail_fn *tail,
                  unsigned char *restrict dst, const unsigned char *restrict src, size_t n, size_t es) {
  planes_fn *k = es == 2 ? k2 : es == 4 ? k4 : es == 8 ? k8 : NULL;
  if (!k) {
    ref(dst, src, n, es);
    return;
  }
  const size_t n32 = n & ~(size_t)31;
  k(dst, src, n, n32);
  tail(dst, src, n, es, n32);
}

/* dst[b·n + i] = src[i·es + b] for i < n, b < es */
void cairn_shuffle_avx2(unsigned char *restrict dst, const unsigned char *restrict src, size_t n, size_t es) {
  by_es(shuffle2, shuffle4, shuffle8, cairn_shuffle_ref, cairn__shuffle_tail, dst, src, n, es);
}

/* dst[i·es + b] = src[b·n + i] for i < n, b < es */
void cairn_unshuffle_avx2(unsigned char *restrict dst, const unsigned char *restrict src, size_t n, size_t es) {
  by_es(unshuffle2, unshuffle4, unshuffle8, cairn_unshuffle_ref, cairn__unshuffle_tail, dst, src, n, es);
}
