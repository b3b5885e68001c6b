/* Philox4x32-10 (Salmon, Moraes, Dror, Shaw, SC'11), the generator of
 * TensorFlow, JAX and cuRAND, and the streams built on it. */
#include "internal.h"

#include <math.h>

#include "cairn/rng.h"

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

void cairn_philox4x32(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; round++) {
    uint64_t p0 = (uint64_t)PHILOX_M0 * c0, p1 = (uint64_t)PHILOX_M1 * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    c1 = (uint32_t)p1;
    c3 = (uint32_t)p0;
    c0 = n0;
    c2 = n2;
    k0 += PHILOX_W0;
    k1 += PHILOX_W1;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

void cairn_rng_init(cairn_rng *r, uint64_t seed, uint64_t stream_id) {
  /* The stream id is mixed into the key so that streams never share blocks. */
  uint64_t k = seed ^ (stream_id * 0x9E3779B97F4A7C15ull);
  r->key[0] = (uint32_t)k;
  r->key[1] = (uint32_t)(k >> 32);
  r->counter = 0;
  r->used = 4;
}

uint32_t cairn_rng_u32(cairn_rng *r) {
  if (r->used >= 4) {
    uint32_t ctr[4] = {(uint32_t)r->counter, (uint32_t)(r->counter >> 32), 0, 0};
    cairn_philox4x32(ctr, r->key, r->block);
    r->counter++;
    r->used = 0;
  }
  return r->block[r->used++];
}

float cairn_rng_uniform(cairn_rng *r) { return (float)(cairn_rng_u32(r) >> 8) * 0x1p-24f; }

float cairn_rng_normal(cairn_rng *r) {
  /* Box–Muller on (0, 1] × [0, 1): log never sees 0. */
  double u1 = ((double)(cairn_rng_u32(r) >> 8) + 1.0) * 0x1p-24;
  double u2 = (double)(cairn_rng_u32(r) >> 8) * 0x1p-24;
  return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

uint64_t cairn_rng_below(cairn_rng *r, uint64_t n) {
  if (n == 0) return 0;
  /* Rejection from the top of the 64-bit range removes modulo bias. */
  uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  for (;;) {
    uint64_t x = ((uint64_t)cairn_rng_u32(r) << 32) | cairn_rng_u32(r);
    if (x < limit) return x % n;
  }
}

void cairn_rng_export(const cairn_rng *r, uint64_t out[CAIRN_RNG_STATE_WORDS]) {
  out[0] = ((uint64_t)r->key[1] << 32) | r->key[0];
  out[1] = r->counter;
  out[2] = ((uint64_t)r->block[1] << 32) | r->block[0];
  out[3] = ((uint64_t)r->block[3] << 32) | r->block[2];
  out[4] = r->used;
}

cairn_status cairn_rng_import(cairn_rng *r, const uint64_t in[CAIRN_RNG_STATE_WORDS]) {
  if (!r || !in) return cairn__fail(CAIRN_E_NULL, "rng_import: %s is NULL", r ? "in" : "rng");
  if (in[4] > 4) return cairn__fail(CAIRN_E_INVALID, "rng_import: word 4 (used) is %llu, at most 4",
                                    (unsigned long long)in[4]);
  r->key[0] = (uint32_t)in[0];
  r->key[1] = (uint32_t)(in[0] >> 32);
  r->counter = in[1];
  r->block[0] = (uint32_t)in[2];
  r->block[1] = (uint32_t)(in[2] >> 32);
  r->block[2] = (uint32_t)in[3];
  r->block[3] = (uint32_t)(in[3] >> 32);
  r->used = (uint32_t)in[4];
  return CAIRN_OK;
}

uint64_t cairn_hash_name(const char *s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (; s && *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
  return h;
}
