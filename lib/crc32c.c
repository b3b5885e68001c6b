/* CRC-32C (Castagnoli): the SSE4.2 crc32 instruction on three interleaved
 * streams when the CPU has it, slicing-by-8 tables otherwise (or with
 * CAIRN_ISA=ref). Check value: crc32c("123456789") = 0xE3069283.
 *
 * The three-stream method is Mark Adler's (crc32c.c, zlib license, 2013-2021):
 * the crc32 instruction has a latency of 3 cycles but a throughput of one per
 * cycle, so three independent streams over consecutive blocks keep it busy;
 * the stream CRCs are then combined by "shifting" a CRC over the length of a
 * block of zeros, a linear map done with four table lookups. Combining of
 * arbitrary CRCs (cairn__crc32c_combine) uses zlib's multmodp/x2nmodp. */
#include "ckpt_impl.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <nmmintrin.h>
#include <wmmintrin.h>
#define CAIRN__CRC_HW 1
#endif

#define POLY 0x82f63b78u /* reflected 0x1EDC6F41 */

/* ---- GF(2) polynomial arithmetic modulo the CRC polynomial (reflected) ---- */

/* a(x)·b(x) mod p(x). */
static uint32_t multmodp(uint32_t a, uint32_t b) {
  uint32_t m = (uint32_t)1 << 31, p = 0;
  for (;;) {
    if (a & m) {
      p ^= b;
      if ((a & (m - 1)) == 0) break;
    }
    m >>= 1;
    b = b & 1 ? (b >> 1) ^ POLY : b >> 1;
  }
  return p;
}

static uint32_t x2n_table[32]; /* x^(2^n) mod p(x) */
static uint32_t sw_table[8][256];

/* x^(n·2^k) mod p(x). */
static uint32_t x2nmodp(uint64_t n, unsigned k) {
  uint32_t p = (uint32_t)1 << 31; /* x^0 */
  while (n) {
    if (n & 1) p = multmodp(x2n_table[k & 31], p);
    n >>= 1;
    k++;
  }
  return p;
}

#ifdef CAIRN__CRC_HW
#define LONG_BLOCK 8192
#define SHORT_BLOCK 256
static uint32_t shift_long[4][256], shift_short[4][256];

/* Table of the linear map crc -> crc·x^(8·len) mod p, byte by byte. */
static void make_shift_table(uint32_t t[4][256], size_t len) {
  uint32_t op = x2nmodp(len, 3);
  for (unsigned k = 0; k < 4; k++)
    for (unsigned b = 0; b < 256; b++) t[k][b] = multmodp(op, (uint32_t)b << (8 * k));
}

static inline uint64_t shift_crc(uint32_t t[4][256], uint64_t crc) {
  return t[0][crc & 0xff] ^ t[1][(crc >> 8) & 0xff] ^ t[2][(crc >> 16) & 0xff] ^ t[3][(crc >> 24) & 0xff];
}

static int have_sse42(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
  return (c & bit_SSE4_2) != 0;
}

static int have_pclmul(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
  return (c & bit_PCLMUL) != 0;
}

static inline uint64_t load64(const unsigned char *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

/* Three interleaved streams of `block` bytes each (the crc32 instruction's
 * latency is 3 cycles, its throughput 1), joined by shifting with table t,
 * for as long as 3 blocks remain; advances *p and *len. Inlined with a
 * constant block size at both call sites. */
__attribute__((target("sse4.2"))) static inline uint64_t crc3_blocks(uint64_t c0, const unsigned char **pp,
                                                                     size_t *len, size_t block,
                                                                     uint32_t t[4][256]) {
  const unsigned char *p = *pp;
  while (*len >= 3 * block) {
    uint64_t c1 = 0, c2 = 0;
    const unsigned char *end = p + block;
    do {
      c0 = _mm_crc32_u64(c0, load64(p));
      c1 = _mm_crc32_u64(c1, load64(p + block));
      c2 = _mm_crc32_u64(c2, load64(p + 2 * block));
      p += 8;
    } while (p < end);
    c0 = shift_crc(t, c0) ^ c1;
    c0 = shift_crc(t, c0) ^ c2;
    p += 2 * block;
    *len -= 3 * block;
  }
  *pp = p;
  return c0;
}

/* ---- carry-less multiplication (PCLMULQDQ) folding -------------------------
 * Intel's "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ"
 * (2009), for long inputs: four 128-bit accumulators A over consecutive
 * 16-byte blocks, each folded 512 bits forward per step, A·x^512 mod P =
 * A_hi·(x^576 mod P) + A_lo·(x^512 mod P) (A_hi: the first 8 bytes, the
 * higher-degree half in the reflected order); then the four fold into one,
 * and that one's 16 bytes are finished with the crc32 instruction (the CRC
 * of a message depends only on it modulo P once the register starts at 0).
 * The constants are computed at init with x2nmodp; each is x^(n-1) rather
 * than x^n because a carry-less product of two reflected 64-bit values
 * lands one bit short of the reflected 128-bit result. The crc32
 * instruction has a throughput of one per cycle on Intel cores but far less
 * on AMD's; the multiplier keeps up on both. */
static int pclmul_ok;
static uint64_t k_fold512[2], k_fold128[2];
#define PCLMUL_MIN 1024

__attribute__((target("sse4.2,pclmul"))) static uint32_t crc32c_fold(uint32_t reg, const unsigned char *p,
                                                                     size_t len, size_t *used) {
  __m128i a0 = _mm_loadu_si128((const __m128i *)(const void *)p);
  __m128i a1 = _mm_loadu_si128((const __m128i *)(const void *)(p + 16));
  __m128i a2 = _mm_loadu_si128((const __m128i *)(const void *)(p + 32));
  __m128i a3 = _mm_loadu_si128((const __m128i *)(const void *)(p + 48));
  a0 = _mm_xor_si128(a0, _mm_cvtsi32_si128((int)reg)); /* the register, into the first 4 bytes */
  const __m128i k4 = _mm_set_epi64x((long long)k_fold512[1], (long long)k_fold512[0]);
  const __m128i k1 = _mm_set_epi64x((long long)k_fold128[1], (long long)k_fold128[0]);
  size_t i = 64;
#define FOLD(acc, k, next) \
  _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(acc, k, 0x00), _mm_clmulepi64_si128(acc, k, 0x11)), next)
  for (; i + 64 <= len; i += 64) {
    a0 = FOLD(a0, k4, _mm_loadu_si128((const __m128i *)(const void *)(p + i)));
    a1 = FOLD(a1, k4, _mm_loadu_si128((const __m128i *)(const void *)(p + i + 16)));
    a2 = FOLD(a2, k4, _mm_loadu_si128((const __m128i *)(const void *)(p + i + 32)));
    a3 = FOLD(a3, k4, _mm_loadu_si128((const __m128i *)(const void *)(p + i + 48)));
  }
  a1 = FOLD(a0, k1, a1);
  a2 = FOLD(a1, k1, a2);
  a3 = FOLD(a2, k1, a3);
  for (; i + 16 <= len; i += 16) a3 = FOLD(a3, k1, _mm_loadu_si128((const __m128i *)(const void *)(p + i)));
#undef FOLD
  *used = i;
  uint64_t c = _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(a3));
  return (uint32_t)_mm_crc32_u64(c, (uint64_t)_mm_extract_epi64(a3, 1));
}

__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t crc, const void *data, size_t len) {
  const unsigned char *p = data;
  uint64_t c0 = crc ^ 0xffffffffu;
  if (pclmul_ok && len >= PCLMUL_MIN) {
    size_t used;
    c0 = crc32c_fold((uint32_t)c0, p, len, &used);
    p += used;
    len -= used;
  }
  while (len && ((uintptr_t)p & 7)) {
    c0 = _mm_crc32_u8((uint32_t)c0, *p++);
    len--;
  }
  c0 = crc3_blocks(c0, &p, &len, LONG_BLOCK, shift_long);
  c0 = crc3_blocks(c0, &p, &len, SHORT_BLOCK, shift_short);
  while (len >= 8) {
    c0 = _mm_crc32_u64(c0, load64(p));
    p += 8;
    len -= 8;
  }
  while (len) {
    c0 = _mm_crc32_u8((uint32_t)c0, *p++);
    len--;
  }
  return (uint32_t)c0 ^ 0xffffffffu;
}
#endif

/* ---- slicing-by-8 ---------------------------------------------------------- */

uint32_t cairn__crc32c_sw(uint32_t crc, const void *data, size_t len) {
  cairn__crc32c_init();
  const unsigned char *p = data;
  uint32_t c = crc ^ 0xffffffffu;
  while (len && ((uintptr_t)p & 7)) {
    c = sw_table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
    len--;
  }
  while (len >= 8) {
    uint32_t lo = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
    lo ^= c;
    c = sw_table[7][lo & 0xff] ^ sw_table[6][(lo >> 8) & 0xff] ^ sw_table[5][(lo >> 16) & 0xff] ^
        sw_table[4][lo >> 24] ^ sw_table[3][hi & 0xff] ^ sw_table[2][(hi >> 8) & 0xff] ^
        sw_table[1][(hi >> 16) & 0xff] ^ sw_table[0][hi >> 24];
    p += 8;
    len -= 8;
  }
  while (len) {
    c = sw_table[0][(c ^ *p++) & 0xff] ^ (c >> 8);
    len--;
  }
  return c ^ 0xffffffffu;
}

/* ---- selection ------------------------------------------------------------ */

typedef uint32_t (*crc_fn)(uint32_t, const void *, size_t);
static crc_fn chosen = cairn__crc32c_sw;
static int hw_ok;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void init(void) {
  for (unsigned n = 0; n < 256; n++) {
    uint32_t c = n;
    for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
    sw_table[0][n] = c;
  }
  for (unsigned n = 0; n < 256; n++)
    for (int k = 1; k < 8; k++) sw_table[k][n] = sw_table[0][sw_table[k - 1][n] & 0xff] ^ (sw_table[k - 1][n] >> 8);
  uint32_t p = (uint32_t)1 << 30; /* x^1 */
  x2n_table[0] = p;
  for (int n = 1; n < 32; n++) x2n_table[n] = p = multmodp(p, p);
#ifdef CAIRN__CRC_HW
  make_shift_table(shift_long, LONG_BLOCK);
  make_shift_table(shift_short, SHORT_BLOCK);
  hw_ok = have_sse42();
  pclmul_ok = hw_ok && have_pclmul() && !getenv("CAIRN_CRC32C_NO_PCLMUL");
  /* r64(x^(n-1) mod P): the reflected 32-bit value in the high half */
  k_fold512[0] = (uint64_t)x2nmodp(512 + 64 - 1, 0) << 32;
  k_fold512[1] = (uint64_t)x2nmodp(512 - 1, 0) << 32;
  k_fold128[0] = (uint64_t)x2nmodp(128 + 64 - 1, 0) << 32;
  k_fold128[1] = (uint64_t)x2nmodp(128 - 1, 0) << 32;
  const char *want = getenv("CAIRN_ISA");
  if (hw_ok && !(want && strcmp(want, "ref") == 0)) chosen = crc32c_hw;
#endif
}

void cairn__crc32c_init(void) { pthread_once(&init_once, init); }

uint32_t cairn_crc32c(uint32_t crc, const void *data, size_t len) {
  cairn__crc32c_init();
  return chosen(crc, data, len);
}

int cairn__crc32c_hw_available(void) {
  cairn__crc32c_init();
  return hw_ok;
}

const char *cairn__crc32c_impl_name(void) {
  cairn__crc32c_init();
  return chosen == cairn__crc32c_sw ? "table" : "sse4.2";
}

uint32_t cairn__crc32c_hw(uint32_t crc, const void *data, size_t len) {
  cairn__crc32c_init();
#ifdef CAIRN__CRC_HW
  if (hw_ok) return crc32c_hw(crc, data, len);
#endif
  return cairn__crc32c_sw(crc, data, len);
}

uint32_t cairn__crc32c_combine(uint32_t crc1, uint32_t crc2, uint64_t len2) {
  cairn__crc32c_init();
  if (len2 == 0) return crc1;
  return multmodp(x2nmodp(len2, 3), crc1) ^ crc2;
}
