/* Tests for cairn/data.h: the IDX reader (plain, gzip, every kind of damage),
 * dtype conversions, and the dataset iterator (coverage of each epoch,
 * shuffling, partial batches, epochs, export/import, argument checks).
 * Fixtures are written by the tests into a fresh temp dir. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, opendir */

#include <criterion/criterion.h>

#include "slurp.h"
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "cairn/data.h"
#include "cairn/status.h"
#include "cairn/tensor.h"

/* ---- temp dir and fixture writers ------------------------------------------ */

static char tmpdir[4096];

static void make_tmpdir(void) {
  const char *base = getenv("TMPDIR");
  snprintf(tmpdir, sizeof tmpdir, "%s/cairn-test-data.XXXXXX", base && *base ? base : "/tmp");
  cr_assert_not_null(mkdtemp(tmpdir), "mkdtemp(%s) failed", tmpdir);
}

static void remove_tmpdir(void) {
  DIR *dir = opendir(tmpdir);
  if (!dir) return;
  struct dirent *e;
  char p[8192];
  while ((e = readdir(dir)) != NULL) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
    if (unlink(p) != 0) rmdir(p); /* the one test directory */
  }
  closedir(dir);
  rmdir(tmpdir);
}

static const char *tpath(const char *name) {
  static char p[8][8192];
  static int k;
  char *r = p[k++ % 8];
  snprintf(r, sizeof p[0], "%s/%s", tmpdir, name);
  return r;
}

static void write_file(const char *path, const void *buf, size_t len) {
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f, "cannot create %s", path);
  cr_assert_eq(fwrite(buf, 1, len, f), len);
  cr_assert_eq(fclose(f), 0);
}

static void write_gz(const char *path, const void *buf, size_t len) {
  gzFile g = gzopen(path, "wb");
  cr_assert_not_null(g, "gzopen(%s) failed", path);
  cr_assert_eq(gzwrite(g, buf, (unsigned)len), (int)len);
  cr_assert_eq(gzclose(g), Z_OK);
}

static void put_be(unsigned char *p, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; i--, v >>= 8) p[i] = (unsigned char)v;
}

/* An IDX image in memory: header + data (already big-endian) + extra. */
static size_t idx_image(unsigned char *buf, int type, int rank, const uint32_t *dims, const void *data,
                        size_t data_len) {
  buf[0] = 0;
  buf[1] = 0;
  buf[2] = (unsigned char)type;
  buf[3] = (unsigned char)rank;
  for (int i = 0; i < rank; i++) put_be(buf + 4 + 4 * i, dims[i], 4);
  size_t h = 4 + 4 * (size_t)rank;
  if (data_len) memcpy(buf + h, data, data_len);
  return h + data_len;
}

/* The u8 (5, 3, 2) image: 16 header bytes + 30 data bytes. */
static size_t u8_image(unsigned char *buf) {
  uint32_t dims[3] = {5, 3, 2};
  unsigned char px[30];
  for (int i = 0; i < 30; i++) px[i] = (unsigned char)(i * 37 + 5);
  return idx_image(buf, 0x08, 3, dims, px, sizeof px);
}

/* Status and message of a failing idx_read: the message names the file and
 * contains `needle`. */
static void expect_idx_fail(const char *path, uint64_t max_bytes, cairn_status want, const char *needle) {
  cairn_tensor *t = (cairn_tensor *)1;
  cairn_status s = cairn_idx_read(path, max_bytes, &t);
  cr_assert_eq(s, want, "%s: status %d (%s), want %d; message: %s", path, s, cairn_status_str(s), want,
               cairn_errmsg());
  cr_assert_null(t, "out must be NULL on error");
  cr_assert_not_null(strstr(cairn_errmsg(), path), "message does not name the file: %s", cairn_errmsg());
  if (needle)
    cr_assert_not_null(strstr(cairn_errmsg(), needle), "message lacks '%s': %s", needle, cairn_errmsg());
}

static cairn_tensor *read_ok(const char *path) {
  cairn_tensor *t = NULL;
  cairn_status s = cairn_idx_read(path, 0, &t);
  cr_assert_eq(s, CAIRN_OK, "idx_read(%s): %s: %s", path, cairn_status_str(s), cairn_errmsg());
  cr_assert_not_null(t);
  return t;
}

static void assert_same_tensor(const cairn_tensor *a, const cairn_tensor *b) {
  cr_assert_eq(a->dtype, b->dtype);
  cr_assert(cairn_tensor_same_shape(a, b));
  cr_assert_eq(a->size, b->size);
  cr_assert_eq(memcmp(a->data, b->data, cairn_tensor_nbytes(a)), 0);
}

TestSuite(idx, .init = make_tmpdir, .fini = remove_tmpdir, .timeout = 60);

/* ---- IDX: values and shapes ------------------------------------------------- */

Test(idx, u8_images_plain_and_gzip) {
  unsigned char buf[64];
  size_t n = u8_image(buf);
  write_file(tpath("u8.idx"), buf, n);
  write_gz(tpath("u8.idx.gz"), buf, n);
  write_gz(tpath("u8-gzip-no-suffix"), buf, n); /* detection is by content */
  cairn_tensor *t = read_ok(tpath("u8.idx"));
  cr_assert_eq(t->dtype, CAIRN_DTYPE_U8);
  cr_assert_eq(t->rank, 3);
  cr_assert_eq(t->shape[0], 5);
  cr_assert_eq(t->shape[1], 3);
  cr_assert_eq(t->shape[2], 2);
  cr_assert_eq(t->size, 30);
  const uint8_t *p = t->data;
  for (int i = 0; i < 30; i++) cr_assert_eq(p[i], (uint8_t)(i * 37 + 5), "pixel %d", i);
  cairn_tensor *g = read_ok(tpath("u8.idx.gz"));
  assert_same_tensor(t, g);
  cairn_tensor *g2 = read_ok(tpath("u8-gzip-no-suffix"));
  assert_same_tensor(t, g2);
  cairn_tensor_free(t);
  cairn_tensor_free(g);
  cairn_tensor_free(g2);
}

Test(idx, i32_big_endian) {
  const int32_t v[4] = {-1, INT32_MIN, 123456789, 0x01020304};
  unsigned char data[16], buf[64];
  for (int i = 0; i < 4; i++) put_be(data + 4 * i, (uint32_t)v[i], 4);
  uint32_t dims[2] = {2, 2};
  size_t n = idx_image(buf, 0x0C, 2, dims, data, sizeof data);
  write_file(tpath("i32.idx"), buf, n);
  write_gz(tpath("i32.idx.gz"), buf, n);
  cairn_tensor *t = read_ok(tpath("i32.idx"));
  cr_assert_eq(t->dtype, CAIRN_DTYPE_I32);
  cr_assert_eq(t->rank, 2);
  cr_assert_eq(t->shape[0], 2);
  cr_assert_eq(t->shape[1], 2);
  for (int i = 0; i < 4; i++) cr_assert_eq(cairn_tensor_i32(t)[i], v[i], "element %d", i);
  cairn_tensor *g = read_ok(tpath("i32.idx.gz"));
  assert_same_tensor(t, g);
  cairn_tensor_free(t);
  cairn_tensor_free(g);
}

Test(idx, f32_big_endian) {
  const float v[6] = {0.0f, -1.5f, 3.25e10f, 1e-38f, 0.1f, -0.0f};
  unsigned char data[24], buf[64];
  for (int i = 0; i < 6; i++) {
    uint32_t bits;
    memcpy(&bits, &v[i], 4);
    put_be(data + 4 * i, bits, 4);
  }
  uint32_t dims[2] = {3, 2};
  size_t n = idx_image(buf, 0x0D, 2, dims, data, sizeof data);
  write_file(tpath("f32.idx"), buf, n);
  write_gz(tpath("f32.idx.gz"), buf, n);
  cairn_tensor *t = read_ok(tpath("f32.idx"));
  cr_assert_eq(t->dtype, CAIRN_DTYPE_F32);
  cr_assert_eq(t->shape[0], 3);
  cr_assert_eq(t->shape[1], 2);
  cr_assert_eq(memcmp(t->data, v, sizeof v), 0, "f32 bits differ");
  cairn_tensor *g = read_ok(tpath("f32.idx.gz"));
  assert_same_tensor(t, g);
  cairn_tensor_free(t);
  cairn_tensor_free(g);
}

Test(idx, f64_i16_i8) {
  const double d[3] = {3.141592653589793, -2.5e-300, 1e300};
  unsigned char data[24], buf[64];
  for (int i = 0; i < 3; i++) {
    uint64_t bits;
    memcpy(&bits, &d[i], 8);
    put_be(data + 8 * i, bits, 8);
  }
  uint32_t dims[1] = {3};
  write_file(tpath("f64.idx"), buf, idx_image(buf, 0x0E, 1, dims, data, sizeof data));
  cairn_tensor *t = read_ok(tpath("f64.idx"));
  cr_assert_eq(t->dtype, CAIRN_DTYPE_F64);
  cr_assert_eq(t->rank, 1);
  cr_assert_eq(t->shape[0], 3);
  cr_assert_eq(memcmp(t->data, d, sizeof d), 0, "f64 bits differ");
  cairn_tensor_free(t);

  const int16_t h[3] = {-2, 0x1234, INT16_MIN};
  for (int i = 0; i < 3; i++) put_be(data + 2 * i, (uint16_t)h[i], 2);
  write_file(tpath("i16.idx"), buf, idx_image(buf, 0x0B, 1, dims, data, 6));
  t = read_ok(tpath("i16.idx"));
  cr_assert_eq(t->dtype, CAIRN_DTYPE_I16);
  for (int i = 0; i < 3; i++) cr_assert_eq(((int16_t *)t->data)[i], h[i]);
  cairn_tensor_free(t);

  const unsigned char b[3] = {0xFF, 0x7F, 0x80};
  write_file(tpath("i8.idx"), buf, idx_image(buf, 0x09, 1, dims, b, 3));
  t = read_ok(tpath("i8.idx"));
  cr_assert_eq(t->dtype, CAIRN_DTYPE_I8);
  cr_assert_eq(((int8_t *)t->data)[0], -1);
  cr_assert_eq(((int8_t *)t->data)[1], 127);
  cr_assert_eq(((int8_t *)t->data)[2], -128);
  cairn_tensor_free(t);
}

Test(idx, zero_length_dimension_and_max_bytes_boundary) {
  unsigned char buf[64];
  uint32_t dims[2] = {0, 784};
  write_file(tpath("empty.idx"), buf, idx_image(buf, 0x08, 2, dims, NULL, 0));
  cairn_tensor *t = read_ok(tpath("empty.idx"));
  cr_assert_eq(t->size, 0);
  cr_assert_eq(t->shape[0], 0);
  cr_assert_eq(t->shape[1], 784);
  cairn_tensor_free(t);

  /* 30 data bytes: a limit of 30 passes, 29 does not. */
  write_file(tpath("u8.idx"), buf, u8_image(buf));
  cr_assert_eq(cairn_idx_read(tpath("u8.idx"), 30, &t), CAIRN_OK, "%s", cairn_errmsg());
  cairn_tensor_free(t);
  expect_idx_fail(tpath("u8.idx"), 29, CAIRN_E_LIMIT, "limit of 29");
}

/* 17 MiB: more than one 16 MiB read block and many zlib buffers, so the
 * block loop, zlib's direct reads and the end-of-stream check all run. */
Test(idx, large_file_in_blocks) {
  const uint32_t dims[3] = {17, 1024, 1024};
  const size_t n = (size_t)17 << 20;
  unsigned char *img = malloc(12 + 4 + n);
  cr_assert_not_null(img);
  unsigned char *px = img + 16;
  for (size_t i = 0; i < n; i++) px[i] = (unsigned char)(i * 31 + (i >> 12));
  idx_image(img, 0x08, 3, dims, NULL, 0);
  write_file(tpath("big.idx"), img, 16 + n);
  gzFile g = gzopen(tpath("big.idx.gz"), "wb1");
  cr_assert_not_null(g);
  cr_assert_eq(gzwrite(g, img, (unsigned)(16 + n)), (int)(16 + n));
  cr_assert_eq(gzclose(g), Z_OK);
  cairn_tensor *t = read_ok(tpath("big.idx")), *z = read_ok(tpath("big.idx.gz"));
  cr_assert_eq(t->size, (int64_t)n);
  cr_assert_eq(t->shape[0], 17);
  cr_assert_eq(memcmp(t->data, px, n), 0, "plain data differs");
  assert_same_tensor(t, z);
  cairn_tensor_free(t);
  cairn_tensor_free(z);
  /* A bad CRC is noticed only after all the data has been decompressed. */
  size_t len;
  unsigned char *gzb = slurp(tpath("big.idx.gz"), &len);
  gzb[len - 6] ^= 0x80;
  write_file(tpath("big-crc.gz"), gzb, len);
  expect_idx_fail(tpath("big-crc.gz"), 0, CAIRN_E_CORRUPT, "incorrect data check");
  free(gzb);
  free(img);
}

/* ---- IDX: damaged files ---------------------------------------------------- */

Test(idx, bad_magic_type_and_rank) {
  unsigned char buf[64];
  size_t n = u8_image(buf);
  buf[0] = 0x12;
  buf[1] = 0x34;
  write_file(tpath("magic.idx"), buf, n);
  expect_idx_fail(tpath("magic.idx"), 0, CAIRN_E_FORMAT, "offset 0");

  n = u8_image(buf);
  buf[2] = 0x0A; /* between i8 and i16: not a type */
  write_file(tpath("type.idx"), buf, n);
  expect_idx_fail(tpath("type.idx"), 0, CAIRN_E_FORMAT, "0x0a at offset 2");

  n = u8_image(buf);
  buf[3] = 0;
  write_file(tpath("rank0.idx"), buf, n);
  expect_idx_fail(tpath("rank0.idx"), 0, CAIRN_E_FORMAT, "rank 0 at offset 3");

  uint32_t dims9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  unsigned char px = 7;
  n = idx_image(buf, 0x08, 9, dims9, &px, 1);
  write_file(tpath("rank9.idx"), buf, n);
  write_gz(tpath("rank9.idx.gz"), buf, n);
  expect_idx_fail(tpath("rank9.idx"), 0, CAIRN_E_FORMAT, "rank 9");
  expect_idx_fail(tpath("rank9.idx.gz"), 0, CAIRN_E_FORMAT, "rank 9");
}

Test(idx, header_truncated) {
  unsigned char buf[64];
  u8_image(buf);
  write_file(tpath("empty-file"), buf, 0);
  expect_idx_fail(tpath("empty-file"), 0, CAIRN_E_TRUNCATED, "offset 0");
  write_file(tpath("two-bytes"), buf, 2);
  expect_idx_fail(tpath("two-bytes"), 0, CAIRN_E_TRUNCATED, "offset 2");
  /* rank 3 needs 12 bytes of dimensions; the file stops after 5 of them. */
  write_file(tpath("dims.idx"), buf, 9);
  expect_idx_fail(tpath("dims.idx"), 0, CAIRN_E_TRUNCATED, "offset 9");
  write_gz(tpath("dims.idx.gz"), buf, 9);
  expect_idx_fail(tpath("dims.idx.gz"), 0, CAIRN_E_TRUNCATED, "offset 9");
}

Test(idx, data_truncated_gives_offset_and_expected_bytes) {
  unsigned char buf[64];
  size_t n = u8_image(buf);
  /* 16 header bytes, then 29 of the 30 data bytes: data ends at 45. */
  write_file(tpath("short.idx"), buf, n - 1);
  expect_idx_fail(tpath("short.idx"), 0, CAIRN_E_TRUNCATED, "ends at offset 45");
  cr_assert_not_null(strstr(cairn_errmsg(), "expected 30 bytes"), "%s", cairn_errmsg());
  /* The same through gzip (the length is found by decompressing). */
  write_gz(tpath("short.idx.gz"), buf, n - 1);
  expect_idx_fail(tpath("short.idx.gz"), 0, CAIRN_E_TRUNCATED, "ends at offset 45");
  cr_assert_not_null(strstr(cairn_errmsg(), "expected 30 bytes"), "%s", cairn_errmsg());
  /* Header only. */
  write_file(tpath("nodata.idx"), buf, 16);
  expect_idx_fail(tpath("nodata.idx"), 0, CAIRN_E_TRUNCATED, "ends at offset 16");
}

Test(idx, trailing_bytes) {
  unsigned char buf[64];
  size_t n = u8_image(buf);
  buf[n] = 0xAB;
  write_file(tpath("long.idx"), buf, n + 1);
  expect_idx_fail(tpath("long.idx"), 0, CAIRN_E_FORMAT, "offset 46");
  write_gz(tpath("long.idx.gz"), buf, n + 1);
  expect_idx_fail(tpath("long.idx.gz"), 0, CAIRN_E_FORMAT, "offset 46");
}

Test(idx, dims_overflow_or_exceed_limit) {
  unsigned char buf[64];
  uint32_t huge[8] = {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu,
                      0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu};
  write_file(tpath("overflow.idx"), buf, idx_image(buf, 0x0E, 8, huge, NULL, 0));
  expect_idx_fail(tpath("overflow.idx"), 0, CAIRN_E_LIMIT, "overflows");
  /* 2^48 bytes: fits in 64 bits, far above the 4 GiB default. */
  uint32_t big[3] = {65536, 65536, 65536};
  write_file(tpath("big.idx"), buf, idx_image(buf, 0x08, 3, big, NULL, 0));
  write_gz(tpath("big.idx.gz"), buf, 16);
  expect_idx_fail(tpath("big.idx"), 0, CAIRN_E_LIMIT, "limit of 4294967296");
  expect_idx_fail(tpath("big.idx.gz"), 0, CAIRN_E_LIMIT, "limit");
  /* Within the default limit but over a caller's: 1000 f32 = 4000 bytes. */
  uint32_t k[1] = {1000};
  write_file(tpath("k.idx"), buf, idx_image(buf, 0x0D, 1, k, NULL, 0));
  expect_idx_fail(tpath("k.idx"), 3999, CAIRN_E_LIMIT, "4000 bytes");
  /* ... and with the limit raised it is what it is: a header without data. */
  expect_idx_fail(tpath("k.idx"), 4000, CAIRN_E_TRUNCATED, "expected 4000 bytes");
}

/* 4 KiB of u8 data that deflate compresses to a real Huffman-coded stream. */
static size_t gz_fixture(const char *name, unsigned char **image) {
  static unsigned char buf[16 + 4096];
  uint32_t dims[2] = {64, 64};
  unsigned char px[4096];
  uint32_t h = 12345;
  for (int i = 0; i < 4096; i++) {
    h = h * 1103515245u + 12345u;
    px[i] = (unsigned char)((h >> 16) % 17 + (i % 64));
  }
  size_t n = idx_image(buf, 0x08, 2, dims, px, sizeof px);
  write_file(tpath("plain.idx"), buf, n);
  write_gz(tpath(name), buf, n);
  size_t len;
  *image = slurp(tpath(name), &len);
  cr_assert_gt(len, 40);
  return len;
}

Test(idx, gzip_flipped_byte_in_stream) {
  unsigned char *z;
  size_t len = gz_fixture("good.gz", &z);
  cairn_tensor *a = read_ok(tpath("good.gz")), *b = read_ok(tpath("plain.idx"));
  assert_same_tensor(a, b);
  cairn_tensor_free(a);
  cairn_tensor_free(b);
  z[len / 2] ^= 0x40;
  write_file(tpath("flip.gz"), z, len);
  cairn_tensor *t = (cairn_tensor *)1;
  cairn_status s = cairn_idx_read(tpath("flip.gz"), 0, &t);
  cr_assert(s == CAIRN_E_FORMAT || s == CAIRN_E_CORRUPT, "status %d: %s", s, cairn_errmsg());
  cr_assert_null(t);
  cr_assert_not_null(strstr(cairn_errmsg(), tpath("flip.gz")), "%s", cairn_errmsg());
  cr_assert_not_null(strstr(cairn_errmsg(), "offset"), "%s", cairn_errmsg());
  free(z);
}

Test(idx, gzip_invalid_block_type_and_method) {
  unsigned char *z;
  size_t len = gz_fixture("good.gz", &z);
  /* Byte 10 starts the first deflate block: BFINAL in bit 0, BTYPE in
   * bits 1-2; BTYPE 3 is reserved. */
  z[10] |= 0x06;
  write_file(tpath("btype.gz"), z, len);
  expect_idx_fail(tpath("btype.gz"), 0, CAIRN_E_FORMAT, "invalid block type");
  cr_assert_not_null(strstr(cairn_errmsg(), "compressed offset"), "%s", cairn_errmsg());
  free(z);
  len = gz_fixture("good.gz", &z);
  z[2] = 7; /* compression method: only 8 (deflate) exists */
  write_file(tpath("method.gz"), z, len);
  expect_idx_fail(tpath("method.gz"), 0, CAIRN_E_FORMAT, "unknown compression method");
  free(z);
}

Test(idx, gzip_trailer_crc_length_and_cut) {
  unsigned char *z;
  size_t len = gz_fixture("good.gz", &z);
  /* The trailer is CRC-32 then ISIZE, 4 bytes each, little-endian. */
  z[len - 8] ^= 0x01;
  write_file(tpath("crc.gz"), z, len);
  expect_idx_fail(tpath("crc.gz"), 0, CAIRN_E_CORRUPT, "incorrect data check");
  z[len - 8] ^= 0x01;
  z[len - 1] ^= 0x01;
  write_file(tpath("isize.gz"), z, len);
  expect_idx_fail(tpath("isize.gz"), 0, CAIRN_E_CORRUPT, "incorrect length check");
  z[len - 1] ^= 0x01;
  /* All data present but the trailer cut off. */
  write_file(tpath("cut-trailer.gz"), z, len - 4);
  expect_idx_fail(tpath("cut-trailer.gz"), 0, CAIRN_E_TRUNCATED, "trailer");
  /* Cut in the middle of the deflate stream. */
  write_file(tpath("cut-middle.gz"), z, len / 2);
  expect_idx_fail(tpath("cut-middle.gz"), 0, CAIRN_E_TRUNCATED, "expected 4096 bytes");
  free(z);
}

Test(idx, missing_file_directory_and_null_args) {
  expect_idx_fail(tpath("no-such-file.idx"), 0, CAIRN_E_IO, "cannot open");
  cr_assert_eq(mkdir(tpath("subdir"), 0700), 0);
  expect_idx_fail(tpath("subdir"), 0, CAIRN_E_IO, "directory");
  cairn_tensor *t;
  cr_assert_eq(cairn_idx_read(NULL, 0, &t), CAIRN_E_NULL);
  cr_assert_eq(cairn_idx_read(tpath("x"), 0, NULL), CAIRN_E_NULL);
}

/* ---- conversions --------------------------------------------------------------- */

TestSuite(convert, .timeout = 60);

Test(convert, to_f32_scales_every_dtype) {
  uint8_t px[4] = {0, 1, 128, 255};
  int64_t shape2[2] = {2, 2};
  cairn_tensor src, *t;
  cr_assert_eq(cairn_tensor_view(&src, px, CAIRN_DTYPE_U8, 2, shape2), CAIRN_OK);
  cr_assert_eq(cairn_tensor_to_f32(&src, 1.0f / 255.0f, &t), CAIRN_OK, "%s", cairn_errmsg());
  cr_assert_eq(t->dtype, CAIRN_DTYPE_F32);
  cr_assert(cairn_tensor_same_shape(t, &src));
  const float *f = cairn_tensor_f32(t);
  cr_assert_eq(f[0], 0.0f);
  cr_assert_float_eq(f[1], 1.0f / 255.0f, 1e-9f);
  cr_assert_float_eq(f[2], 128.0f / 255.0f, 1e-7f);
  cr_assert_eq(f[3], 1.0f, "255 * (1/255) must give exactly 1, got %.9g", f[3]);
  cairn_tensor_free(t);

  int32_t iv[3] = {-4, 7, 16777217}; /* 2^24 + 1: rounded once */
  int64_t shape1[1] = {3};
  cr_assert_eq(cairn_tensor_view(&src, iv, CAIRN_DTYPE_I32, 1, shape1), CAIRN_OK);
  cr_assert_eq(cairn_tensor_to_f32(&src, 0.5f, &t), CAIRN_OK);
  cr_assert_eq(cairn_tensor_f32(t)[0], -2.0f);
  cr_assert_eq(cairn_tensor_f32(t)[1], 3.5f);
  cr_assert_eq(cairn_tensor_f32(t)[2], 8388608.5f);
  cairn_tensor_free(t);

  double dv[3] = {1.5, -1e10, 0.1};
  cr_assert_eq(cairn_tensor_view(&src, dv, CAIRN_DTYPE_F64, 1, shape1), CAIRN_OK);
  cr_assert_eq(cairn_tensor_to_f32(&src, 2.0f, &t), CAIRN_OK);
  cr_assert_eq(cairn_tensor_f32(t)[0], 3.0f);
  cr_assert_eq(cairn_tensor_f32(t)[1], -2e10f);
  cr_assert_eq(cairn_tensor_f32(t)[2], 0.2f);
  cairn_tensor_free(t);

  int16_t sv[3] = {-32768, 0, 100};
  cr_assert_eq(cairn_tensor_view(&src, sv, CAIRN_DTYPE_I16, 1, shape1), CAIRN_OK);
  cr_assert_eq(cairn_tensor_to_f32(&src, 1.0f, &t), CAIRN_OK);
  cr_assert_eq(cairn_tensor_f32(t)[0], -32768.0f);
  cr_assert_eq(cairn_tensor_f32(t)[2], 100.0f);
  cairn_tensor_free(t);

  uint16_t hv[3] = {0x3C00, 0xC000, 0x0001}; /* f16: 1, -2, 2^-24 */
  cr_assert_eq(cairn_tensor_view(&src, hv, CAIRN_DTYPE_F16, 1, shape1), CAIRN_OK);
  cr_assert_eq(cairn_tensor_to_f32(&src, 1.0f, &t), CAIRN_OK);
  cr_assert_eq(cairn_tensor_f32(t)[0], 1.0f);
  cr_assert_eq(cairn_tensor_f32(t)[1], -2.0f);
  cr_assert_eq(cairn_tensor_f32(t)[2], 0x1p-24f);
  cairn_tensor_free(t);

  cr_assert_eq(cairn_tensor_to_f32(NULL, 1.0f, &t), CAIRN_E_NULL);
  cr_assert_eq(cairn_tensor_to_f32(&src, 1.0f, NULL), CAIRN_E_NULL);
}

Test(convert, to_labels_range_check) {
  uint8_t lv[5] = {3, 0, 9, 1, 2};
  int64_t shape[1] = {5};
  cairn_tensor src, *t = NULL;
  cr_assert_eq(cairn_tensor_view(&src, lv, CAIRN_DTYPE_U8, 1, shape), CAIRN_OK);
  cr_assert_eq(cairn_tensor_to_labels(&src, 10, &t), CAIRN_OK, "%s", cairn_errmsg());
  cr_assert_eq(t->dtype, CAIRN_DTYPE_I32);
  cr_assert_eq(t->rank, 1);
  cr_assert_eq(t->shape[0], 5);
  for (int i = 0; i < 5; i++) cr_assert_eq(cairn_tensor_i32(t)[i], lv[i]);
  cairn_tensor_free(t);

  /* 9 is out of [0, 9): element 2 is the first bad one. */
  t = (cairn_tensor *)1;
  cr_assert_eq(cairn_tensor_to_labels(&src, 9, &t), CAIRN_E_INVALID);
  cr_assert_null(t);
  cr_assert_not_null(strstr(cairn_errmsg(), "element 2 is 9"), "%s", cairn_errmsg());

  int8_t neg[3] = {1, -1, 0};
  int64_t s3[1] = {3};
  cr_assert_eq(cairn_tensor_view(&src, neg, CAIRN_DTYPE_I8, 1, s3), CAIRN_OK);
  cr_assert_eq(cairn_tensor_to_labels(&src, 10, &t), CAIRN_E_INVALID);
  cr_assert_not_null(strstr(cairn_errmsg(), "element 1 is -1"), "%s", cairn_errmsg());
  cr_assert_eq(cairn_tensor_to_labels(&src, 0, &t), CAIRN_OK, "num_classes 0 checks nothing but i32");
  cr_assert_eq(cairn_tensor_i32(t)[1], -1);
  cairn_tensor_free(t);

  int64_t wide[3] = {0, 1, INT64_C(1) << 40};
  cr_assert_eq(cairn_tensor_view(&src, wide, CAIRN_DTYPE_I64, 1, s3), CAIRN_OK);
  cr_assert_eq(cairn_tensor_to_labels(&src, 0, &t), CAIRN_E_INVALID);
  cr_assert_not_null(strstr(cairn_errmsg(), "element 2 is 1099511627776"), "%s", cairn_errmsg());

  uint64_t uwide[3] = {0, UINT64_MAX, 1};
  cr_assert_eq(cairn_tensor_view(&src, uwide, CAIRN_DTYPE_U64, 1, s3), CAIRN_OK);
  cr_assert_eq(cairn_tensor_to_labels(&src, 5, &t), CAIRN_E_INVALID);
  cr_assert_not_null(strstr(cairn_errmsg(), "element 1 is 18446744073709551615"), "%s", cairn_errmsg());

  float fv[3] = {0, 1, 2};
  cr_assert_eq(cairn_tensor_view(&src, fv, CAIRN_DTYPE_F32, 1, s3), CAIRN_OK);
  cr_assert_eq(cairn_tensor_to_labels(&src, 10, &t), CAIRN_E_DTYPE);
  cr_assert_eq(cairn_tensor_to_labels(&src, -1, &t), CAIRN_E_INVALID);
  cr_assert_eq(cairn_tensor_to_labels(NULL, 10, &t), CAIRN_E_NULL);
}

Test(idx, mnist_style_images_and_labels_to_training_tensors) {
  /* The MNIST path: u8 images → f32 in [0, 1], u8 labels → i32. */
  unsigned char buf[64];
  write_gz(tpath("images.idx.gz"), buf, u8_image(buf));
  uint32_t dims[1] = {5};
  const unsigned char lab[5] = {7, 2, 1, 0, 9};
  write_gz(tpath("labels.idx.gz"), buf, idx_image(buf, 0x08, 1, dims, lab, 5));
  cairn_tensor *rawx = read_ok(tpath("images.idx.gz")), *rawy = read_ok(tpath("labels.idx.gz"));
  cairn_tensor *x = NULL, *y = NULL;
  cr_assert_eq(cairn_tensor_to_f32(rawx, 1.0f / 255.0f, &x), CAIRN_OK);
  cr_assert_eq(cairn_tensor_to_labels(rawy, 10, &y), CAIRN_OK);
  cr_assert_eq(x->rank, 3);
  cr_assert_eq(x->shape[0], 5);
  for (int i = 0; i < 30; i++)
    cr_assert_float_eq(cairn_tensor_f32(x)[i], (float)(uint8_t)(i * 37 + 5) / 255.0f, 1e-6f, "pixel %d", i);
  for (int i = 0; i < 5; i++) cr_assert_eq(cairn_tensor_i32(y)[i], lab[i]);
  cairn_tensor_free(y);
  cr_assert_eq(cairn_tensor_to_labels(rawy, 9, &y), CAIRN_E_INVALID, "label 9 with 9 classes");
  cr_assert_null(y);
  cr_assert_not_null(strstr(cairn_errmsg(), "element 4 is 9"), "%s", cairn_errmsg());
  cairn_tensor_free(rawx);
  cairn_tensor_free(rawy);
  cairn_tensor_free(x);
}

/* ---- dataset ---------------------------------------------------------------------- */

TestSuite(dataset, .timeout = 60);

#define N 10
#define F 3

/* x[i] = (10i, 10i + 1, 10i + 2), y[i] = i: every row says which example it is. */
typedef struct fixture {
  float xd[N * F];
  int32_t yd[N];
  cairn_tensor x, y;
  float xbd[N * F];
  int32_t ybd[N];
  cairn_tensor xb, yb;
} fixture;

static void fixture_init(fixture *f, int64_t batch) {
  for (int i = 0; i < N; i++) {
    for (int k = 0; k < F; k++) f->xd[i * F + k] = (float)(10 * i + k);
    f->yd[i] = i;
  }
  int64_t xs[2] = {N, F}, ys[1] = {N}, xbs[2] = {batch, F}, ybs[1] = {batch};
  cr_assert_eq(cairn_tensor_view(&f->x, f->xd, CAIRN_DTYPE_F32, 2, xs), CAIRN_OK);
  cr_assert_eq(cairn_tensor_view(&f->y, f->yd, CAIRN_DTYPE_I32, 1, ys), CAIRN_OK);
  cr_assert_eq(cairn_tensor_view(&f->xb, f->xbd, CAIRN_DTYPE_F32, 2, xbs), CAIRN_OK);
  cr_assert_eq(cairn_tensor_view(&f->yb, f->ybd, CAIRN_DTYPE_I32, 1, ybs), CAIRN_OK);
}

static cairn_dataset *make_ds(fixture *f, int64_t batch, int shuffle, uint64_t seed, int drop, int64_t epochs) {
  cairn_dataset_config cfg = {.batch_size = batch, .shuffle = shuffle, .seed = seed,
                              .drop_remainder = drop, .num_epochs = epochs};
  cairn_dataset *d = NULL;
  cairn_status s = cairn_dataset_new(&f->x, &f->y, &cfg, &d);
  cr_assert_eq(s, CAIRN_OK, "dataset_new: %s", cairn_errmsg());
  cr_assert_not_null(d);
  return d;
}

/* Next batch; checks that x rows and labels agree. Returns rows, or -1 at
 * OUT_OF_RANGE. Labels are appended to seq (if given). */
static int64_t next_batch(cairn_dataset *d, fixture *f, int32_t *seq, int64_t *nseq) {
  cairn_status s = cairn_dataset_next(d, &f->xb, &f->yb);
  if (s == CAIRN_E_OUT_OF_RANGE) return -1;
  cr_assert_eq(s, CAIRN_OK, "dataset_next: %s", cairn_errmsg());
  int64_t rows = f->xb.shape[0];
  cr_assert_eq(f->yb.shape[0], rows);
  cr_assert_eq(f->xb.size, rows * F);
  for (int64_t i = 0; i < rows; i++) {
    int32_t lab = f->ybd[i];
    cr_assert(lab >= 0 && lab < N);
    for (int k = 0; k < F; k++)
      cr_assert_eq(f->xbd[i * F + k], (float)(10 * lab + k), "row %lld does not match label %d", (long long)i, lab);
    if (seq) seq[(*nseq)++] = lab;
  }
  return rows;
}

/* One epoch's labels in order, checking each example appears once. */
static void one_epoch(cairn_dataset *d, fixture *f, int32_t order[N]) {
  int64_t n = 0;
  int64_t bpe = cairn_dataset_batches_per_epoch(d);
  for (int64_t b = 0; b < bpe; b++) cr_assert_gt(next_batch(d, f, order, &n), 0);
  cr_assert_eq(n, N);
  int seen[N] = {0};
  for (int i = 0; i < N; i++) seen[order[i]]++;
  for (int i = 0; i < N; i++) cr_assert_eq(seen[i], 1, "example %d seen %d times", i, seen[i]);
}

Test(dataset, epochs_in_order_with_partial_batch) {
  fixture f;
  fixture_init(&f, 4);
  cairn_dataset *d = make_ds(&f, 4, 0, 1, 0, 0);
  cr_assert_eq(cairn_dataset_size(d), N);
  cr_assert_eq(cairn_dataset_batches_per_epoch(d), 3);
  for (int e = 0; e < 3; e++) {
    int32_t seq[N];
    int64_t n = 0;
    cr_assert_eq(next_batch(d, &f, seq, &n), 4);
    cr_assert_eq(next_batch(d, &f, seq, &n), 4);
    cr_assert_eq(next_batch(d, &f, seq, &n), 2, "last batch of epoch %d is partial", e);
    cr_assert_eq(f.xb.shape[0], 2);
    cr_assert_eq(f.yb.shape[0], 2);
    for (int i = 0; i < N; i++) cr_assert_eq(seq[i], i, "unshuffled order");
  }
  cairn_dataset_free(d);
}

Test(dataset, shuffle_covers_each_epoch_and_depends_on_seed_and_epoch) {
  fixture f;
  fixture_init(&f, 4);
  cairn_dataset *a = make_ds(&f, 4, 1, 42, 0, 0), *b = make_ds(&f, 4, 1, 42, 0, 0),
                *c = make_ds(&f, 4, 1, 43, 0, 0);
  int32_t ea[3][N], eb[3][N], ec[N];
  for (int e = 0; e < 3; e++) one_epoch(a, &f, ea[e]);
  for (int e = 0; e < 3; e++) one_epoch(b, &f, eb[e]);
  one_epoch(c, &f, ec);
  cr_assert_eq(memcmp(ea, eb, sizeof ea), 0, "same seed, same sequence");
  cr_assert_neq(memcmp(ea[0], ea[1], sizeof ea[0]), 0, "epochs 0 and 1 have the same order");
  cr_assert_neq(memcmp(ea[1], ea[2], sizeof ea[0]), 0, "epochs 1 and 2 have the same order");
  cr_assert_neq(memcmp(ea[0], ec, sizeof ec), 0, "seeds 42 and 43 give the same order");
  int identity = 1;
  for (int i = 0; i < N; i++) identity &= ea[0][i] == i;
  cr_assert(!identity, "shuffled epoch is the identity");
  /* reset replays epoch 0 */
  cairn_dataset_reset(a);
  int32_t again[N];
  one_epoch(a, &f, again);
  cr_assert_eq(memcmp(again, ea[0], sizeof again), 0);
  cairn_dataset_free(a);
  cairn_dataset_free(b);
  cairn_dataset_free(c);
}

Test(dataset, drop_remainder) {
  fixture f;
  fixture_init(&f, 4);
  for (int shuffle = 0; shuffle < 2; shuffle++) {
    cairn_dataset *d = make_ds(&f, 4, shuffle, 7, 1, 0);
    cr_assert_eq(cairn_dataset_batches_per_epoch(d), 2);
    int dropped_differs = 0, first_missing = -1;
    for (int e = 0; e < 4; e++) {
      int seen[N] = {0};
      for (int b = 0; b < 2; b++) {
        int32_t seq[4];
        int64_t n = 0;
        cr_assert_eq(next_batch(d, &f, seq, &n), 4, "every batch is full");
        for (int i = 0; i < 4; i++) seen[seq[i]]++;
      }
      int missing = 0;
      for (int i = 0; i < N; i++) {
        cr_assert_leq(seen[i], 1);
        if (!seen[i]) missing = missing * 16 + i;
      }
      if (!shuffle) cr_assert_eq(missing, 8 * 16 + 9, "examples 8 and 9 are dropped");
      if (e == 0) first_missing = missing;
      else if (missing != first_missing) dropped_differs = 1;
      cairn_dataset_state st;
      cairn_dataset_export(d, &st);
      cr_assert_eq(st.epoch, e + 1);
      cr_assert_eq(st.position, 0);
    }
    if (shuffle) cr_assert(dropped_differs, "shuffle drops different examples in different epochs");
    cairn_dataset_free(d);
  }
}

Test(dataset, num_epochs_then_out_of_range_until_reset) {
  fixture f;
  fixture_init(&f, 4);
  cairn_dataset *d = make_ds(&f, 4, 1, 5, 0, 2);
  int32_t first[2 * N];
  int64_t n = 0;
  for (int b = 0; b < 6; b++) cr_assert_gt(next_batch(d, &f, first, &n), 0, "batch %d", b);
  cr_assert_eq(n, 2 * N);
  for (int k = 0; k < 3; k++) {
    cr_assert_eq(cairn_dataset_next(d, &f.xb, &f.yb), CAIRN_E_OUT_OF_RANGE, "call %d after the end", k);
    cr_assert_not_null(strstr(cairn_errmsg(), "2 epochs"), "%s", cairn_errmsg());
  }
  cairn_dataset_state st;
  cairn_dataset_export(d, &st);
  cr_assert_eq(st.epoch, 2);
  cairn_dataset_reset(d);
  int32_t again[2 * N];
  int64_t m = 0;
  for (int b = 0; b < 6; b++) cr_assert_gt(next_batch(d, &f, again, &m), 0);
  cr_assert_eq(memcmp(first, again, sizeof first), 0, "reset replays the same sequence");
  cr_assert_eq(next_batch(d, &f, NULL, NULL), -1);
  cairn_dataset_free(d);
}

Test(dataset, export_import_resumes_identically) {
  fixture f;
  fixture_init(&f, 4);
  /* Reference: 9 batches = 3 epochs. */
  cairn_dataset *ref = make_ds(&f, 4, 1, 99, 0, 3);
  int32_t all[3 * N];
  int64_t nall = 0, starts[10];
  for (int b = 0; b < 9; b++) {
    starts[b] = nall;
    cr_assert_gt(next_batch(ref, &f, all, &nall), 0);
  }
  starts[9] = nall;
  cr_assert_eq(nall, 3 * N);
  cairn_dataset_free(ref);
  /* Stop after k batches (k = 3 and 6 are epoch boundaries), resume in a
   * fresh dataset: the rest must be identical. */
  for (int k = 0; k <= 9; k++) {
    cairn_dataset *d = make_ds(&f, 4, 1, 99, 0, 3);
    for (int b = 0; b < k; b++) cr_assert_gt(next_batch(d, &f, NULL, NULL), 0);
    cairn_dataset_state st;
    cairn_dataset_export(d, &st);
    cr_assert_eq(st.seed, 99);
    cr_assert_eq(st.size, N);
    cr_assert_eq(st.epoch, k / 3);
    cr_assert_eq(st.position, starts[k] - (k / 3) * N);
    cairn_dataset_free(d);

    cairn_dataset *e = make_ds(&f, 4, 1, 99, 0, 3);
    cr_assert_eq(cairn_dataset_import(e, &st), CAIRN_OK, "%s", cairn_errmsg());
    int32_t rest[3 * N];
    int64_t nrest = 0;
    while (next_batch(e, &f, rest, &nrest) > 0) {}
    cr_assert_eq(nrest, 3 * N - starts[k], "k = %d", k);
    cr_assert_eq(memcmp(rest, all + starts[k], (size_t)nrest * sizeof *rest), 0, "k = %d: sequence differs", k);
    cairn_dataset_free(e);
  }
}

Test(dataset, import_with_other_batch_size_and_end_position) {
  fixture f;
  fixture_init(&f, 5);
  /* The position counts examples: resume a batch-1 run with batch 5. */
  cairn_dataset *ref = make_ds(&f, 1, 1, 3, 0, 2);
  int32_t all[2 * N];
  int64_t nall = 0;
  while (next_batch(ref, &f, all, &nall) > 0) {}
  cr_assert_eq(nall, 2 * N);
  cairn_dataset_state st = {.seed = 3, .size = N, .epoch = 0, .position = 8};
  cairn_dataset *d = make_ds(&f, 5, 1, 3, 0, 2);
  cr_assert_eq(cairn_dataset_import(d, &st), CAIRN_OK);
  int32_t rest[2 * N];
  int64_t nrest = 0;
  cr_assert_eq(next_batch(d, &f, rest, &nrest), 2, "rest of epoch 0");
  cr_assert_eq(next_batch(d, &f, rest, &nrest), 5);
  cr_assert_eq(next_batch(d, &f, rest, &nrest), 5);
  cr_assert_eq(next_batch(d, &f, rest, &nrest), -1);
  cr_assert_eq(memcmp(rest, all + 8, 12 * sizeof *rest), 0);
  /* position == N means "epoch over": the next batch opens the next epoch. */
  st.position = N;
  cr_assert_eq(cairn_dataset_import(d, &st), CAIRN_OK);
  nrest = 0;
  cr_assert_eq(next_batch(d, &f, rest, &nrest), 5);
  cr_assert_eq(memcmp(rest, all + N, 5 * sizeof *rest), 0);
  st.epoch = 1;
  cr_assert_eq(cairn_dataset_import(d, &st), CAIRN_OK);
  cr_assert_eq(next_batch(d, &f, NULL, NULL), -1, "epoch 1 at its end is the end of 2 epochs");
  cairn_dataset_free(ref);
  cairn_dataset_free(d);
}

Test(dataset, import_rejects_foreign_states) {
  fixture f;
  fixture_init(&f, 4);
  cairn_dataset *d = make_ds(&f, 4, 1, 11, 0, 0);
  cr_assert_eq(next_batch(d, &f, NULL, NULL), 4);
  cairn_dataset_state good;
  cairn_dataset_export(d, &good);
  cairn_dataset_state st = good;
  st.seed = 12;
  cr_assert_eq(cairn_dataset_import(d, &st), CAIRN_E_INVALID);
  cr_assert_not_null(strstr(cairn_errmsg(), "seed 12"), "%s", cairn_errmsg());
  cr_assert_not_null(strstr(cairn_errmsg(), "seed 11"), "%s", cairn_errmsg());
  st = good;
  st.size = 11;
  cr_assert_eq(cairn_dataset_import(d, &st), CAIRN_E_INVALID);
  cr_assert_not_null(strstr(cairn_errmsg(), "size 11"), "%s", cairn_errmsg());
  cr_assert_not_null(strstr(cairn_errmsg(), "size 10"), "%s", cairn_errmsg());
  st = good;
  st.position = N + 1;
  cr_assert_eq(cairn_dataset_import(d, &st), CAIRN_E_INVALID);
  cr_assert_not_null(strstr(cairn_errmsg(), "position 11"), "%s", cairn_errmsg());
  st.position = -1;
  cr_assert_eq(cairn_dataset_import(d, &st), CAIRN_E_INVALID);
  st = good;
  st.epoch = -1;
  cr_assert_eq(cairn_dataset_import(d, &st), CAIRN_E_INVALID);
  cr_assert_eq(cairn_dataset_import(d, NULL), CAIRN_E_NULL);
  cr_assert_eq(cairn_dataset_import(NULL, &good), CAIRN_E_NULL);
  /* A rejected import leaves the position alone. */
  cairn_dataset_state now;
  cairn_dataset_export(d, &now);
  cr_assert_eq(memcmp(&now, &good, sizeof now), 0);
  cairn_dataset_free(d);
}

Test(dataset, new_rejects_bad_shapes_dtypes_and_config) {
  fixture f;
  fixture_init(&f, 4);
  cairn_dataset_config cfg = {.batch_size = 4};
  cairn_dataset *d = (cairn_dataset *)1;
  int64_t s9[1] = {9}, s0[2] = {0, F}, s2[2] = {N, 1};
  cairn_tensor y9, yf, x0, xi, y2;
  cr_assert_eq(cairn_tensor_view(&y9, f.yd, CAIRN_DTYPE_I32, 1, s9), CAIRN_OK);
  cr_assert_eq(cairn_dataset_new(&f.x, &y9, &cfg, &d), CAIRN_E_SHAPE);
  cr_assert_null(d);
  cr_assert_not_null(strstr(cairn_errmsg(), "(9)"), "%s", cairn_errmsg());
  cr_assert_eq(cairn_tensor_view(&y2, f.yd, CAIRN_DTYPE_I32, 2, s2), CAIRN_OK);
  cr_assert_eq(cairn_dataset_new(&f.x, &y2, &cfg, &d), CAIRN_E_SHAPE, "y must be (N)");
  cr_assert_eq(cairn_tensor_view(&yf, f.xd, CAIRN_DTYPE_F32, 1, (int64_t[]){N}), CAIRN_OK);
  cr_assert_eq(cairn_dataset_new(&f.x, &yf, &cfg, &d), CAIRN_E_DTYPE);
  cr_assert_eq(cairn_tensor_view(&xi, f.yd, CAIRN_DTYPE_I32, 1, (int64_t[]){N}), CAIRN_OK);
  cr_assert_eq(cairn_dataset_new(&xi, &f.y, &cfg, &d), CAIRN_E_DTYPE);
  cr_assert_eq(cairn_tensor_view(&x0, f.xd, CAIRN_DTYPE_F32, 2, s0), CAIRN_OK);
  cr_assert_eq(cairn_dataset_new(&x0, NULL, &cfg, &d), CAIRN_E_INVALID, "N == 0");
  cfg.batch_size = 0;
  cr_assert_eq(cairn_dataset_new(&f.x, &f.y, &cfg, &d), CAIRN_E_INVALID);
  cfg.batch_size = 4;
  cfg.num_epochs = -1;
  cr_assert_eq(cairn_dataset_new(&f.x, &f.y, &cfg, &d), CAIRN_E_INVALID);
  cfg.num_epochs = 0;
  cfg.batch_size = N + 1;
  cfg.drop_remainder = 1;
  cr_assert_eq(cairn_dataset_new(&f.x, &f.y, &cfg, &d), CAIRN_E_INVALID, "drop_remainder would yield nothing");
  cfg.drop_remainder = 0;
  cr_assert_eq(cairn_dataset_new(&f.x, &f.y, &cfg, &d), CAIRN_OK, "one partial batch is fine");
  cr_assert_eq(cairn_dataset_batches_per_epoch(d), 1);
  cairn_dataset_free(d);
  cr_assert_eq(cairn_dataset_new(NULL, &f.y, &cfg, &d), CAIRN_E_NULL);
  cr_assert_eq(cairn_dataset_new(&f.x, &f.y, NULL, &d), CAIRN_E_NULL);
  cr_assert_eq(cairn_dataset_new(&f.x, &f.y, &cfg, NULL), CAIRN_E_NULL);
}

Test(dataset, next_rejects_small_or_wrong_batch_tensors) {
  fixture f;
  fixture_init(&f, 4);
  cairn_dataset *d = make_ds(&f, 4, 0, 0, 0, 0);
  cairn_tensor small, wrong_row, xi, yshort, yf;
  cr_assert_eq(cairn_tensor_view(&small, f.xbd, CAIRN_DTYPE_F32, 2, (int64_t[]){3, F}), CAIRN_OK);
  cr_assert_eq(cairn_dataset_next(d, &small, &f.yb), CAIRN_E_SHAPE);
  cr_assert_not_null(strstr(cairn_errmsg(), "room for 3 rows"), "%s", cairn_errmsg());
  cr_assert_eq(cairn_tensor_view(&wrong_row, f.xbd, CAIRN_DTYPE_F32, 2, (int64_t[]){6, 2}), CAIRN_OK);
  cr_assert_eq(cairn_dataset_next(d, &wrong_row, &f.yb), CAIRN_E_SHAPE);
  cr_assert_eq(cairn_tensor_view(&xi, f.xbd, CAIRN_DTYPE_I32, 2, (int64_t[]){4, F}), CAIRN_OK);
  cr_assert_eq(cairn_dataset_next(d, &xi, &f.yb), CAIRN_E_DTYPE);
  cr_assert_eq(cairn_tensor_view(&yshort, f.ybd, CAIRN_DTYPE_I32, 1, (int64_t[]){3}), CAIRN_OK);
  cr_assert_eq(cairn_dataset_next(d, &f.xb, &yshort), CAIRN_E_SHAPE);
  cr_assert_eq(cairn_tensor_view(&yf, f.xbd, CAIRN_DTYPE_F32, 1, (int64_t[]){4}), CAIRN_OK);
  cr_assert_eq(cairn_dataset_next(d, &f.xb, &yf), CAIRN_E_DTYPE);
  cr_assert_eq(cairn_dataset_next(d, NULL, &f.yb), CAIRN_E_NULL);
  cr_assert_eq(cairn_dataset_next(NULL, &f.xb, &f.yb), CAIRN_E_NULL);
  /* None of the failures consumed anything. */
  cairn_dataset_state st;
  cairn_dataset_export(d, &st);
  cr_assert_eq(st.epoch, 0);
  cr_assert_eq(st.position, 0);
  /* yb is optional */
  cr_assert_eq(cairn_dataset_next(d, &f.xb, NULL), CAIRN_OK);
  cr_assert_eq(f.xbd[F], 10.0f);
  cairn_dataset_free(d);
}

Test(dataset, unlabelled_rank3_features_and_null_handles) {
  float xd[N * 4];
  for (int i = 0; i < N * 4; i++) xd[i] = (float)i;
  cairn_tensor x, xb;
  float xbd[3 * 4];
  cr_assert_eq(cairn_tensor_view(&x, xd, CAIRN_DTYPE_F32, 3, (int64_t[]){N, 2, 2}), CAIRN_OK);
  cr_assert_eq(cairn_tensor_view(&xb, xbd, CAIRN_DTYPE_F32, 3, (int64_t[]){3, 2, 2}), CAIRN_OK);
  cairn_dataset_config cfg = {.batch_size = 3, .shuffle = 1, .seed = 8, .num_epochs = 1};
  cairn_dataset *d;
  cr_assert_eq(cairn_dataset_new(&x, NULL, &cfg, &d), CAIRN_OK);
  int32_t yb_d[3];
  cairn_tensor yb;
  cr_assert_eq(cairn_tensor_view(&yb, yb_d, CAIRN_DTYPE_I32, 1, (int64_t[]){3}), CAIRN_OK);
  cr_assert_eq(cairn_dataset_next(d, &xb, &yb), CAIRN_E_INVALID, "yb without labels");
  int seen[N] = {0};
  int64_t total = 0;
  cairn_status s;
  while ((s = cairn_dataset_next(d, &xb, NULL)) == CAIRN_OK) {
    cr_assert_eq(xb.rank, 3);
    cr_assert_eq(xb.shape[1], 2);
    for (int64_t r = 0; r < xb.shape[0]; r++) {
      int ex = (int)xbd[r * 4] / 4;
      for (int k = 0; k < 4; k++) cr_assert_eq(xbd[r * 4 + k], (float)(ex * 4 + k));
      seen[ex]++;
    }
    total += xb.shape[0];
  }
  cr_assert_eq(s, CAIRN_E_OUT_OF_RANGE);
  cr_assert_eq(total, N);
  for (int i = 0; i < N; i++) cr_assert_eq(seen[i], 1);
  cairn_dataset_free(d);
  cairn_dataset_free(NULL);
  cairn_dataset_reset(NULL);
  cairn_dataset_export(NULL, NULL);
  cr_assert_eq(cairn_dataset_size(NULL), 0);
  cr_assert_eq(cairn_dataset_batches_per_epoch(NULL), 0);
}
