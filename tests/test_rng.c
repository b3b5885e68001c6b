/* cairn/rng.h: Philox4x32-10 known answers, streams, export/import, and the
 * distributions built on them. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "cairn/rng.h"

TestSuite(rng, .timeout = 60);

/* Random123 kat_vectors, "philox4x32 10" lines: ctr[4] key[2] -> out[4]. */
static const struct {
  uint32_t ctr[4], key[2], out[4];
} kat[] = {
    {{0x00000000, 0x00000000, 0x00000000, 0x00000000},
     {0x00000000, 0x00000000},
     {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
     {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
     {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};

Test(rng, philox_known_answers) {
  for (size_t t = 0; t < sizeof kat / sizeof kat[0]; t++) {
    uint32_t out[4];
    cairn_philox4x32(kat[t].ctr, kat[t].key, out);
    for (int j = 0; j < 4; j++)
      cr_assert_eq(out[j], kat[t].out[j], "vector %zu word %d: got %08x, expected %08x", t, j, out[j],
                   kat[t].out[j]);
  }
}

Test(rng, philox_is_a_pure_function) {
  /* The input arrays are not modified and the same input gives the same bits. */
  uint32_t ctr[4] = {1, 2, 3, 4}, key[2] = {5, 6}, a[4], b[4];
  cairn_philox4x32(ctr, key, a);
  cairn_philox4x32(ctr, key, b);
  cr_assert_eq(memcmp(a, b, sizeof a), 0);
  cr_assert(ctr[0] == 1 && ctr[3] == 4 && key[0] == 5 && key[1] == 6);
  ctr[0] ^= 1; /* one flipped counter bit changes every output word */
  cairn_philox4x32(ctr, key, b);
  for (int j = 0; j < 4; j++) cr_assert_neq(a[j], b[j]);
}

Test(rng, stream_is_philox_blocks_in_counter_order) {
  cairn_rng r;
  cairn_rng_init(&r, 12345, 0);
  /* Stream 0 uses the seed itself as the key. */
  cr_assert_eq(r.key[0], 12345u);
  cr_assert_eq(r.key[1], 0u);
  for (uint32_t blk = 0; blk < 3; blk++) {
    uint32_t ctr[4] = {blk, 0, 0, 0}, out[4];
    cairn_philox4x32(ctr, r.key, out);
    for (int j = 0; j < 4; j++) cr_assert_eq(cairn_rng_u32(&r), out[j], "block %u word %d", blk, j);
  }
}

Test(rng, streams_and_seeds_differ) {
  cairn_rng a, b, c;
  cairn_rng_init(&a, 7, 0);
  cairn_rng_init(&b, 7, 1);
  cairn_rng_init(&c, 8, 0);
  int same_ab = 0, same_ac = 0;
  for (int i = 0; i < 64; i++) {
    uint32_t x = cairn_rng_u32(&a), y = cairn_rng_u32(&b), z = cairn_rng_u32(&c);
    same_ab += x == y;
    same_ac += x == z;
  }
  cr_assert_lt(same_ab, 2);
  cr_assert_lt(same_ac, 2);
}

Test(rng, export_import_resumes_identically) {
  /* At a block boundary (used 4) and in the middle of a block (used 1..3). */
  for (int skip = 0; skip < 9; skip++) {
    cairn_rng r, s;
    cairn_rng_init(&r, 0xdeadbeefcafef00dull, 3);
    for (int i = 0; i < skip; i++) (void)cairn_rng_u32(&r);
    uint64_t w[CAIRN_RNG_STATE_WORDS];
    cairn_rng_export(&r, w);
    memset(&s, 0xa5, sizeof s);
    cr_assert_eq(cairn_rng_import(&s, w), CAIRN_OK, "skip %d: %s", skip, cairn_errmsg());
    for (int i = 0; i < 40; i++) cr_assert_eq(cairn_rng_u32(&s), cairn_rng_u32(&r), "skip %d, draw %d", skip, i);
    /* The derived distributions continue identically too. */
    cr_assert_eq(cairn_rng_normal(&s), cairn_rng_normal(&r));
    cr_assert_eq(cairn_rng_below(&s, 1000), cairn_rng_below(&r, 1000));
  }
}

Test(rng, export_of_import_round_trips) {
  cairn_rng r;
  cairn_rng_init(&r, 99, 5);
  for (int i = 0; i < 6; i++) (void)cairn_rng_u32(&r);
  uint64_t w[CAIRN_RNG_STATE_WORDS], w2[CAIRN_RNG_STATE_WORDS];
  cairn_rng_export(&r, w);
  cr_assert_eq(w[4], 2u, "6 draws leave 2 words of the second block used");
  cr_assert_eq(w[1], 2u, "next block index");
  cairn_rng s;
  cr_assert_eq(cairn_rng_import(&s, w), CAIRN_OK);
  cairn_rng_export(&s, w2);
  cr_assert_eq(memcmp(w, w2, sizeof w), 0);
}

Test(rng, import_rejects_bad_state) {
  cairn_rng r, before;
  cairn_rng_init(&r, 1, 2);
  (void)cairn_rng_u32(&r);
  before = r;
  uint64_t w[CAIRN_RNG_STATE_WORDS];
  cairn_rng_export(&r, w);
  w[4] = 5;
  cr_assert_eq(cairn_rng_import(&r, w), CAIRN_E_INVALID);
  cr_assert_not_null(strstr(cairn_errmsg(), "used"), "message: %s", cairn_errmsg());
  cr_assert_eq(memcmp(&r, &before, sizeof r), 0, "a rejected import leaves the stream alone");
  w[4] = UINT64_MAX;
  cr_assert_eq(cairn_rng_import(&r, w), CAIRN_E_INVALID);
  w[4] = 0;
  cr_assert_eq(cairn_rng_import(NULL, w), CAIRN_E_NULL);
  cr_assert_eq(cairn_rng_import(&r, NULL), CAIRN_E_NULL);
}

Test(rng, uniform_in_unit_interval) {
  cairn_rng r;
  cairn_rng_init(&r, 2024, 0);
  const int n = 200000;
  double sum = 0, sum2 = 0;
  float mn = 1, mx = 0;
  int bins[10] = {0};
  for (int i = 0; i < n; i++) {
    float u = cairn_rng_uniform(&r);
    cr_assert(u >= 0.0f && u < 1.0f, "draw %d: %.9g outside [0, 1)", i, u);
    /* 24-bit grid: u·2^24 is an integer. */
    cr_assert_eq(u * 16777216.0f, floorf(u * 16777216.0f));
    sum += u;
    sum2 += (double)u * u;
    mn = u < mn ? u : mn;
    mx = u > mx ? u : mx;
    bins[(int)(u * 10)]++;
  }
  double mean = sum / n, var = sum2 / n - mean * mean;
  /* Standard errors: mean 0.00065, variance 0.00019. */
  cr_assert_lt(fabs(mean - 0.5), 0.004, "mean %g", mean);
  cr_assert_lt(fabs(var - 1.0 / 12), 0.002, "variance %g", var);
  cr_assert_lt(mn, 1e-4f);
  cr_assert_gt(mx, 1 - 1e-4f);
  for (int b = 0; b < 10; b++) cr_assert_lt(abs(bins[b] - n / 10), 700, "bin %d has %d", b, bins[b]);
}

Test(rng, normal_moments) {
  cairn_rng r;
  cairn_rng_init(&r, 31337, 9);
  const int n = 200000;
  double sum = 0, sum2 = 0, sum4 = 0;
  int beyond2 = 0;
  for (int i = 0; i < n; i++) {
    double z = cairn_rng_normal(&r);
    cr_assert(isfinite(z));
    sum += z;
    sum2 += z * z;
    sum4 += z * z * z * z;
    beyond2 += fabs(z) > 2;
  }
  double mean = sum / n, sd = sqrt(sum2 / n - mean * mean), kurt = sum4 / n;
  /* Standard errors: mean 0.0022, stddev 0.0016, 4th moment 0.023. */
  cr_assert_lt(fabs(mean), 0.015, "mean %g", mean);
  cr_assert_lt(fabs(sd - 1), 0.012, "stddev %g", sd);
  cr_assert_lt(fabs(kurt - 3), 0.15, "E[z^4] %g", kurt);
  /* P(|z| > 2) = 0.0455, standard error 0.00047. */
  cr_assert_lt(fabs((double)beyond2 / n - 0.0455), 0.003, "tail fraction %g", (double)beyond2 / n);
}

Test(rng, below_range_and_balance) {
  cairn_rng r;
  cairn_rng_init(&r, 5, 5);
  cr_assert_eq(cairn_rng_below(&r, 0), 0u);
  for (int i = 0; i < 100; i++) cr_assert_eq(cairn_rng_below(&r, 1), 0u);
  /* n = 10: 100000 draws, chi-square with 9 degrees of freedom. */
  int cnt[10] = {0};
  const int n = 100000;
  for (int i = 0; i < n; i++) {
    uint64_t x = cairn_rng_below(&r, 10);
    cr_assert_lt(x, 10u);
    cnt[x]++;
  }
  double chi2 = 0;
  for (int b = 0; b < 10; b++) chi2 += (cnt[b] - n / 10.0) * (cnt[b] - n / 10.0) / (n / 10.0);
  cr_assert_lt(chi2, 33.7, "chi-square %g (p < 1e-4 above 33.7)", chi2);
  /* A bound near 2^64 (where a plain modulo would be badly biased) stays in range
   * and reaches the upper half. */
  const uint64_t big = 0xC000000000000000ull;
  int upper = 0;
  for (int i = 0; i < 4000; i++) {
    uint64_t x = cairn_rng_below(&r, big);
    cr_assert_lt(x, big);
    upper += x >= big / 2;
  }
  /* Unbiased: half above big/2 (σ = 32); modulo would give 1/3. */
  cr_assert_lt(abs(upper - 2000), 200, "%d of 4000 in the upper half", upper);
}

Test(rng, hash_name_is_fnv1a) {
  /* FNV-1a 64 reference values. */
  cr_assert_eq(cairn_hash_name(""), 0xcbf29ce484222325ull);
  cr_assert_eq(cairn_hash_name("a"), 0xaf63dc4c8601ec8cull);
  cr_assert_eq(cairn_hash_name("foobar"), 0x85944171f73967e8ull);
  cr_assert_eq(cairn_hash_name(NULL), cairn_hash_name(""));
  cr_assert_neq(cairn_hash_name("dense/kernel"), cairn_hash_name("dense/bias"));
}
