/* cairn/rng.h — counter-based random numbers (Philox4x32-10).
 *
 * Philox (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
 * SC'11) maps a 128-bit counter and a 64-bit key to 128 random bits. Because
 * every value is a pure function of (key, counter), initializers can give
 * element i of a variable the same value whatever the thread count or the
 * order in which variables are created, and a stream's whole state is the
 * small plain struct below: copy it (or export/import it) to save and resume.
 */
#ifndef CAIRN_RNG_H
#define CAIRN_RNG_H

#include <stdint.h>

#include "cairn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One Philox4x32-10 block: out = philox(ctr, key). */
CAIRN_API void cairn_philox4x32(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* A sequential stream: block `counter` of key `key`, `used` of its 4 words
 * consumed. Plain data; all fields are state. */
typedef struct cairn_rng {
  uint32_t key[2];
  uint64_t counter;  /* next block index */
  uint32_t block[4]; /* current block */
  uint32_t used;     /* words of block already returned (4 = none left) */
} cairn_rng;

/* Starts the stream for (seed, stream_id). */
CAIRN_API void cairn_rng_init(cairn_rng *r, uint64_t seed, uint64_t stream_id);
CAIRN_API uint32_t cairn_rng_u32(cairn_rng *r);
/* Uniform float in [0, 1) with 24 random bits. */
CAIRN_API float cairn_rng_uniform(cairn_rng *r);
/* Standard normal (Box–Muller). */
CAIRN_API float cairn_rng_normal(cairn_rng *r);
/* Unbiased integer in [0, n); n > 0 (returns 0 for n == 0). */
CAIRN_API uint64_t cairn_rng_below(cairn_rng *r, uint64_t n);

/* Flat form of the state, for files: 5 words. */
#define CAIRN_RNG_STATE_WORDS 5
CAIRN_API void cairn_rng_export(const cairn_rng *r, uint64_t out[CAIRN_RNG_STATE_WORDS]);
/* Errors: CAIRN_E_INVALID when the words are not a state export produced
 * (e.g. `used` > 4). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_rng_import(cairn_rng *r,
                                                     const uint64_t in[CAIRN_RNG_STATE_WORDS]);

/* 64-bit FNV-1a of a string: how names become Philox keys. */
CAIRN_API uint64_t cairn_hash_name(const char *s);

#ifdef __cplusplus
}
#endif
#endif
