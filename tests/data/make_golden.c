/* Writes the golden checkpoint files of format v1.0 (tests/data/v1-*.crn).
 *
 * Kept for reference only: it is not built, and the golden files must NEVER
 * be regenerated — they are what version 1.0 wrote, and every later reader
 * must keep reading them (doc/checkpoint-format.md, "Versioning"). The
 * expected values are spelled out independently in tests/test_ckpt.c.
 *
 * Built once, by hand, against a build tree:
 *   gcc -std=c11 -I/work/main/include make_golden.c /tmp/b-ckpt/.libs/libcairn_core.a \
 *       -fopenmp -llz4 -lopenblas -lz -lm -o make_golden && ./make_golden OUTDIR
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cairn/ckpt.h"

#define CHECK(x)                                                                                    \
  do {                                                                                              \
    cairn_status s_ = (x);                                                                          \
    if (s_) {                                                                                       \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, cairn_status_str(s_), cairn_errmsg()); \
      exit(1);                                                                                      \
    }                                                                                               \
  } while (0)

static void add(cairn_ckpt_writer *w, const char *name, cairn_dtype dt, int rank, const int64_t *shape,
                const void *data) {
  cairn_tensor t;
  CHECK(cairn_tensor_view(&t, (void *)data, dt, rank, shape));
  CHECK(cairn_ckpt_writer_add(w, name, &t));
}

static char *join(const char *dir, const char *file) {
  static char buf[4096];
  snprintf(buf, sizeof buf, "%s/%s", dir, file);
  return buf;
}

/* v1-basic.crn: one tensor of every dtype, a scalar, an empty tensor, rank 8,
 * every metadata type; default options (1 MiB chunks, LZ4 when it pays). */
static void basic(const char *dir) {
  cairn_ckpt_writer *w;
  CHECK(cairn_ckpt_writer_open(join(dir, "v1-basic.crn"), NULL, &w));
  const float f32[6] = {-1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f};
  add(w, "dense/kernel", CAIRN_DTYPE_F32, 2, (int64_t[]){2, 3}, f32);
  const double f64 = 3.25;
  add(w, "scalar_f64", CAIRN_DTYPE_F64, 0, NULL, &f64);
  const uint16_t f16[2] = {0x3c00, 0x7bff}; /* 1.0, 65504 */
  add(w, "half", CAIRN_DTYPE_F16, 1, (int64_t[]){2}, f16);
  const uint16_t bf16[2] = {0x3f80, 0xc000}; /* 1.0, -2.0 */
  add(w, "brain", CAIRN_DTYPE_BF16, 1, (int64_t[]){2}, bf16);
  const int8_t i8[3] = {-128, 0, 127};
  add(w, "ints/i8", CAIRN_DTYPE_I8, 1, (int64_t[]){3}, i8);
  const int16_t i16[2] = {-32768, 32767};
  add(w, "ints/i16", CAIRN_DTYPE_I16, 1, (int64_t[]){2}, i16);
  const int32_t i32[2] = {INT32_MIN, 7};
  add(w, "ints/i32", CAIRN_DTYPE_I32, 1, (int64_t[]){2}, i32);
  const int64_t i64 = 1234567890123LL;
  add(w, "global_step", CAIRN_DTYPE_I64, 0, NULL, &i64);
  const uint8_t u8[4] = {0, 1, 254, 255};
  add(w, "uints/u8", CAIRN_DTYPE_U8, 1, (int64_t[]){4}, u8);
  const uint16_t u16[2] = {65535, 1};
  add(w, "uints/u16", CAIRN_DTYPE_U16, 1, (int64_t[]){2}, u16);
  const uint32_t u32[2] = {4294967295u, 2};
  add(w, "uints/u32", CAIRN_DTYPE_U32, 1, (int64_t[]){2}, u32);
  const uint64_t u64[2] = {UINT64_MAX, 3};
  add(w, "uints/u64", CAIRN_DTYPE_U64, 1, (int64_t[]){2}, u64);
  const uint8_t b[3] = {1, 0, 1};
  add(w, "mask", CAIRN_DTYPE_BOOL, 1, (int64_t[]){3}, b);
  add(w, "empty", CAIRN_DTYPE_F32, 2, (int64_t[]){0, 5}, NULL);
  uint8_t r8[16];
  for (int i = 0; i < 16; i++) r8[i] = (uint8_t)i;
  add(w, "rank8", CAIRN_DTYPE_U8, 8, (int64_t[]){1, 2, 1, 2, 1, 2, 1, 2}, r8);
  CHECK(cairn_ckpt_writer_meta_u64(w, "train.global_step", 1234567890123ULL));
  CHECK(cairn_ckpt_writer_meta_i64(w, "user.offset", -42));
  CHECK(cairn_ckpt_writer_meta_f64(w, "user.lr", 0.001));
  CHECK(cairn_ckpt_writer_meta_bool(w, "user.flag", 1));
  CHECK(cairn_ckpt_writer_meta_str(w, "ckpt.producer", "cairn 0.1.0 make_golden"));
  CHECK(cairn_ckpt_writer_meta_bytes(w, "train.rng", "\x00\x01\x02\xff", 4));
  CHECK(cairn_ckpt_writer_commit(w));
}

/* v1-chunked.crn: 128-byte chunks: a sparse f32 tensor (LZ4 chunks and raw
 * chunks) and a pseudo-random i32 tensor (raw chunks). */
static void chunked(const char *dir) {
  cairn_ckpt_write_options o = {.chunk_bytes = 128};
  cairn_ckpt_writer *w;
  CHECK(cairn_ckpt_writer_open(join(dir, "v1-chunked.crn"), &o, &w));
  float sparse[200];
  for (int i = 0; i < 200; i++) sparse[i] = i < 100 ? 0.0f : (float)(i * 37 % 101) - 50.0f;
  add(w, "sparse", CAIRN_DTYPE_F32, 2, (int64_t[]){20, 10}, sparse);
  int32_t noise[40];
  uint32_t x = 12345;
  for (int i = 0; i < 40; i++) {
    x = x * 1103515245u + 12345u;
    noise[i] = (int32_t)x;
  }
  add(w, "noise", CAIRN_DTYPE_I32, 1, (int64_t[]){40}, noise);
  CHECK(cairn_ckpt_writer_meta_u64(w, "train.global_step", 7));
  CHECK(cairn_ckpt_writer_commit(w));
}

/* v1-shuffle.crn: byte-shuffle + LZ4 (codec 2) on small i64 values, 256-byte chunks. */
static void shuffle(const char *dir) {
  cairn_ckpt_write_options o = {.chunk_bytes = 256, .compress = CAIRN_CKPT_COMPRESS_SHUFFLE};
  cairn_ckpt_writer *w;
  CHECK(cairn_ckpt_writer_open(join(dir, "v1-shuffle.crn"), &o, &w));
  int64_t v[100];
  for (int i = 0; i < 100; i++) v[i] = (int64_t)(i * i % 1000) - 500;
  add(w, "counts", CAIRN_DTYPE_I64, 2, (int64_t[]){10, 10}, v);
  CHECK(cairn_ckpt_writer_commit(w));
}

/* v1-raw.crn: a raw-layout u8 tensor aligned to 256 bytes, after a small one. */
static void raw(const char *dir) {
  cairn_ckpt_write_options o = {.alignment = 256, .raw_layout_min_bytes = 100};
  cairn_ckpt_writer *w;
  CHECK(cairn_ckpt_writer_open(join(dir, "v1-raw.crn"), &o, &w));
  const float bias[3] = {0.25f, -0.25f, 2.0f};
  add(w, "bias", CAIRN_DTYPE_F32, 1, (int64_t[]){3}, bias);
  uint8_t blob[300];
  uint32_t x = 99;
  for (int i = 0; i < 300; i++) {
    x = x * 1664525u + 1013904223u;
    blob[i] = (uint8_t)(x >> 24);
  }
  add(w, "blob", CAIRN_DTYPE_U8, 2, (int64_t[]){15, 20}, blob);
  CHECK(cairn_ckpt_writer_commit(w));
}

/* v1-compact.crn (format 1.1, required feature 0x1): byte planes + zstd
 * (codec 3, CAIRN_CKPT_COMPRESS_COMPACT) on weight-like f32 values, small
 * i64 values and u8 bytes, 256-byte chunks. Added with codec 3; built against
 * that tree with -lzstd as well. */
static void compact(const char *dir) {
  cairn_ckpt_write_options o = {.chunk_bytes = 256, .compress = CAIRN_CKPT_COMPRESS_COMPACT};
  cairn_ckpt_writer *w;
  CHECK(cairn_ckpt_writer_open(join(dir, "v1-compact.crn"), &o, &w));
  float wt[240];
  uint32_t x = 2024;
  for (int i = 0; i < 240; i++) {
    x = x * 1664525u + 1013904223u;
    wt[i] = (float)((int)(x >> 16) % 2001 - 1000) / 8192.0f;
  }
  add(w, "dense/kernel", CAIRN_DTYPE_F32, 2, (int64_t[]){24, 10}, wt);
  int64_t v[100];
  for (int i = 0; i < 100; i++) v[i] = (int64_t)(i * i % 1000) - 500;
  add(w, "counts", CAIRN_DTYPE_I64, 2, (int64_t[]){10, 10}, v);
  uint8_t b[200];
  for (int i = 0; i < 200; i++) b[i] = (uint8_t)(i % 7 == 0 ? i : 0);
  add(w, "bytes", CAIRN_DTYPE_U8, 1, (int64_t[]){200}, b);
  CHECK(cairn_ckpt_writer_meta_u64(w, "train.global_step", 11));
  CHECK(cairn_ckpt_writer_commit(w));
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : ".";
  basic(dir);
  chunked(dir);
  shuffle(dir);
  raw(dir);
  compact(dir);
  return 0;
}
