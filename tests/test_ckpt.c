/* Tests of include/cairn/ckpt.h: CRC32C, round trips, the writer's errors
 * and atomicity, the reader's validation (truncation at every byte, every
 * single-bit flip, limits, crafted headers), salvage, golden v1 files.
 * Each test works in its own mkdtemp directory, removed by the suite's fini. */
#define _GNU_SOURCE 1
#include <criterion/criterion.h>

#include "slurp.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cairn/ckpt.h"
#include "cairn/runtime.h"
#include "ckpt_impl.h"

/* ---- fixtures ------------------------------------------------------------------ */

static char g_dir[PATH_MAX];

static void setup(void) {
  const char *base = getenv("TMPDIR");
  if (!base || !*base) base = "/tmp";
  snprintf(g_dir, sizeof g_dir, "%s/cairn-ckpt.XXXXXX", base);
  cr_assert_not_null(mkdtemp(g_dir), "mkdtemp(%s): %s", g_dir, strerror(errno));
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(p);
}

static void teardown(void) {
  if (!g_dir[0]) return;
  char tiny[PATH_MAX + 8];
  snprintf(tiny, sizeof tiny, "%s/tiny", g_dir);
  umount2(tiny, MNT_DETACH); /* writer::enospc_on_a_full_tmpfs; harmless otherwise */
  nftw(g_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* A path in the test's directory (8 rotating buffers). */
static const char *P(const char *name) {
  static char buf[8][PATH_MAX];
  static int k;
  char *b = buf[k++ & 7];
  int n = snprintf(b, PATH_MAX, "%s/%s", g_dir, name);
  cr_assert(n > 0 && n < PATH_MAX, "path too long");
  return b;
}

#define OK(x)                                                                                         \
  do {                                                                                                \
    cairn_status s_ = (x);                                                                            \
    cr_assert_eq(s_, CAIRN_OK, "%s -> %s: %s", #x, cairn_status_str(s_), cairn_errmsg());             \
  } while (0)

#define FAILS(x, want)                                                                                \
  do {                                                                                                \
    cairn_status s_ = (x);                                                                            \
    cr_assert_eq(s_, (want), "%s -> %s (%s), wanted %s", #x, cairn_status_str(s_), cairn_errmsg(),     \
                 cairn_status_str(want));                                                             \
  } while (0)

static uint64_t rng = 0x1234567;
static uint64_t rnd(void) {
  uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static void fill_random(void *p, size_t n) {
  unsigned char *b = p;
  for (size_t i = 0; i < n; i++) b[i] = (unsigned char)rnd();
}

static void spit(const char *path, const void *b, size_t n) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  cr_assert(fd >= 0, "create %s: %s", path, strerror(errno));
  cr_assert_eq(write(fd, b, n), (ssize_t)n);
  close(fd);
}

static cairn_tensor *tnew(cairn_dtype dt, int rank, const int64_t *shape) {
  cairn_tensor *t;
  OK(cairn_tensor_new(dt, rank, shape, &t));
  return t;
}

/* Reads `name` from c into a fresh tensor of the entry's dtype and shape. */
static cairn_tensor *read_new(cairn_ckpt *c, const char *name) {
  cairn_ckpt_entry e;
  OK(cairn_ckpt_find(c, name, &e));
  cairn_tensor *t = tnew(e.dtype, e.rank, e.shape);
  OK(cairn_ckpt_read(c, name, t));
  return t;
}

static int same_tensor(const cairn_tensor *a, const cairn_tensor *b) {
  return a->dtype == b->dtype && cairn_tensor_same_shape(a, b) &&
         memcmp(a->data, b->data, cairn_tensor_nbytes(a)) == 0;
}

static int count_files(const char *dir) {
  DIR *d = opendir(dir);
  cr_assert_not_null(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  closedir(d);
  return n;
}

static int any_tmp_file(const char *dir) {
  DIR *d = opendir(dir);
  cr_assert_not_null(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) n += strstr(e->d_name, ".tmp.") != NULL;
  closedir(d);
  return n;
}

/* ---- CRC32C ------------------------------------------------------------------- */

TestSuite(crc32c, .timeout = 20);

Test(crc32c, vectors) {
  cr_assert_eq(cairn_crc32c(0, "123456789", 9), 0xE3069283u);
  cr_assert_eq(cairn_crc32c(0, "", 0), 0u);
  unsigned char b[32];
  /* RFC 3720 (iSCSI) B.4 */
  memset(b, 0, 32);
  cr_assert_eq(cairn_crc32c(0, b, 32), 0x8A9136AAu);
  memset(b, 0xff, 32);
  cr_assert_eq(cairn_crc32c(0, b, 32), 0x62A8AB43u);
  for (int i = 0; i < 32; i++) b[i] = (unsigned char)i;
  cr_assert_eq(cairn_crc32c(0, b, 32), 0x46DD794Eu);
  for (int i = 0; i < 32; i++) b[i] = (unsigned char)(31 - i);
  cr_assert_eq(cairn_crc32c(0, b, 32), 0x113FDB5Cu);
  cr_assert_eq(cairn__crc32c_sw(0, "123456789", 9), 0xE3069283u);
  cr_assert_eq(cairn__crc32c_hw(0, "123456789", 9), 0xE3069283u);
}

Test(crc32c, hw_and_table_agree) {
  size_t n = 200000;
  unsigned char *b = malloc(n + 64);
  fill_random(b, n + 64);
  cr_log_info("cairn_crc32c uses %s; SSE4.2 %s", cairn__crc32c_impl_name(),
              cairn__crc32c_hw_available() ? "available" : "missing");
  for (int it = 0; it < 400; it++) {
    size_t off = rnd() % 64, len = it < 100 ? (size_t)it : rnd() % n;
    uint32_t seed = it % 3 ? (uint32_t)rnd() : 0;
    uint32_t a = cairn__crc32c_sw(seed, b + off, len), h = cairn__crc32c_hw(seed, b + off, len);
    cr_assert_eq(a, h, "len %zu off %zu: table %08x, sse4.2 %08x", len, off, a, h);
    cr_assert_eq(cairn_crc32c(seed, b + off, len), a);
  }
  free(b);
}

/* Every length around where the long-input method (carry-less multiply
   folding of 64-byte blocks, then 16-byte blocks, then bytes) takes over
   and each of its tails, at every alignment of 16. */
Test(crc32c, folding_lengths_agree_with_the_table) {
  size_t n = 4096 + 64;
  unsigned char *b = malloc(n + 16);
  fill_random(b, n + 16);
  for (size_t len = 960; len <= 1300; len++)
    for (size_t off = 0; off < 16; off += len % 7 == 0 ? 1 : 5) {
      uint32_t seed = (uint32_t)(len * 2654435761u);
      uint32_t a = cairn__crc32c_sw(seed, b + off, len), h = cairn__crc32c_hw(seed, b + off, len);
      cr_assert_eq(a, h, "len %zu off %zu: table %08x, hw %08x", len, off, a, h);
    }
  for (size_t len = 4096 - 20; len <= n; len++) cr_assert_eq(cairn__crc32c_sw(0, b, len), cairn__crc32c_hw(0, b, len));
  free(b);
}

Test(crc32c, incremental_and_combine) {
  size_t n = 100000;
  unsigned char *b = malloc(n);
  fill_random(b, n);
  for (int it = 0; it < 200; it++) {
    size_t len = rnd() % n, cut = len ? rnd() % len : 0;
    uint32_t whole = cairn_crc32c(0, b, len);
    cr_assert_eq(cairn_crc32c(cairn_crc32c(0, b, cut), b + cut, len - cut), whole);
    uint32_t c1 = cairn_crc32c(0, b, cut), c2 = cairn_crc32c(0, b + cut, len - cut);
    cr_assert_eq(cairn__crc32c_combine(c1, c2, len - cut), whole, "len %zu cut %zu", len, cut);
  }
  cr_assert_eq(ck_unmask(ck_mask(0xE3069283u)), 0xE3069283u);
  free(b);
}

Test(crc32c, honours_cairn_isa) {
  const char *want = getenv("CAIRN_ISA");
  if (want && strcmp(want, "ref") == 0)
    cr_assert_str_eq(cairn__crc32c_impl_name(), "table");
  else
    cr_assert_str_eq(cairn__crc32c_impl_name(), cairn__crc32c_hw_available() ? "sse4.2" : "table");
}

/* ---- round trips ------------------------------------------------------------------- */

TestSuite(roundtrip, .init = setup, .fini = teardown, .timeout = 30);

static const cairn_dtype all_dtypes[] = {CAIRN_DTYPE_F32, CAIRN_DTYPE_F64, CAIRN_DTYPE_F16, CAIRN_DTYPE_BF16,
                                         CAIRN_DTYPE_I8,  CAIRN_DTYPE_I16, CAIRN_DTYPE_I32, CAIRN_DTYPE_I64,
                                         CAIRN_DTYPE_U8,  CAIRN_DTYPE_U16, CAIRN_DTYPE_U32, CAIRN_DTYPE_U64,
                                         CAIRN_DTYPE_BOOL};
#define N_DTYPES (sizeof all_dtypes / sizeof all_dtypes[0])

/* mask: applied to every random byte (low entropy data compresses). */
static void all_dtypes_ranks(const cairn_ckpt_write_options *o, unsigned char mask) {
  static const int64_t dims[8] = {3, 2, 1, 2, 2, 1, 3, 2};
  cairn_tensor *src[N_DTYPES][9];
  cairn_ckpt_writer *w;
  OK(cairn_ckpt_writer_open(P("all.crn"), o, &w));
  for (size_t d = 0; d < N_DTYPES; d++)
    for (int r = 0; r <= 8; r++) {
      src[d][r] = tnew(all_dtypes[d], r, dims);
      fill_random(src[d][r]->data, cairn_tensor_nbytes(src[d][r]));
      for (size_t i = 0; i < cairn_tensor_nbytes(src[d][r]); i++) ((uint8_t *)src[d][r]->data)[i] &= mask;
      if (all_dtypes[d] == CAIRN_DTYPE_BOOL)
        for (int64_t i = 0; i < src[d][r]->size; i++) ((uint8_t *)src[d][r]->data)[i] &= 1;
      char name[64];
      snprintf(name, sizeof name, "%s/rank%d", cairn_dtype_name(all_dtypes[d]), r);
      OK(cairn_ckpt_writer_add(w, name, src[d][r]));
    }
  OK(cairn_ckpt_writer_commit(w));
  cairn_ckpt *c;
  OK(cairn_ckpt_open(P("all.crn"), NULL, &c));
  cr_assert_eq(cairn_ckpt_count(c), N_DTYPES * 9);
  OK(cairn_ckpt_verify(c));
  for (size_t d = 0; d < N_DTYPES; d++)
    for (int r = 0; r <= 8; r++) {
      char name[64];
      snprintf(name, sizeof name, "%s/rank%d", cairn_dtype_name(all_dtypes[d]), r);
      cairn_ckpt_entry e;
      OK(cairn_ckpt_find(c, name, &e));
      cr_assert_str_eq(e.name, name);
      cr_assert_eq(e.dtype, all_dtypes[d]);
      cr_assert_eq(e.rank, r);
      for (int k = 0; k < r; k++) cr_assert_eq(e.shape[k], dims[k]);
      cr_assert_eq(e.raw_bytes, cairn_tensor_nbytes(src[d][r]));
      cr_assert_eq(e.raw_crc32c, cairn_crc32c(0, src[d][r]->data, e.raw_bytes));
      cairn_tensor *t = read_new(c, name);
      cr_assert(same_tensor(t, src[d][r]), "%s differs after the round trip", name);
      cairn_tensor_free(t);
      cairn_tensor_free(src[d][r]);
    }
  cairn_ckpt_close(c);
}

Test(roundtrip, every_dtype_rank_0_to_8) { all_dtypes_ranks(&(cairn_ckpt_write_options){.no_fsync = 1}, 0xff); }

Test(roundtrip, every_dtype_small_chunks_lz4) {
  all_dtypes_ranks(&(cairn_ckpt_write_options){.chunk_bytes = 128}, 0x03);
}

Test(roundtrip, every_dtype_small_chunks_shuffle) {
  all_dtypes_ranks(&(cairn_ckpt_write_options){.chunk_bytes = 128, .compress = CAIRN_CKPT_COMPRESS_SHUFFLE}, 0x03);
}

Test(roundtrip, every_dtype_small_chunks_compact) {
  all_dtypes_ranks(&(cairn_ckpt_write_options){.chunk_bytes = 128, .compress = CAIRN_CKPT_COMPRESS_COMPACT}, 0x03);
}

Test(roundtrip, empty_tensors_and_scalars) {
  cairn_ckpt_writer *w;
  OK(cairn_ckpt_writer_open(P("e.crn"), NULL, &w));
  cairn_tensor *e1 = tnew(CAIRN_DTYPE_F32, 1, (int64_t[]){0});
  cairn_tensor *e2 = tnew(CAIRN_DTYPE_I64, 3, (int64_t[]){3, 0, 2});
  cairn_tensor *e8 = tnew(CAIRN_DTYPE_U8, 8, (int64_t[]){1, 2, 3, 4, 0, 1, 1, 1});
  cairn_tensor *s = tnew(CAIRN_DTYPE_F64, 0, NULL);
  *(double *)s->data = -2.5;
  OK(cairn_ckpt_writer_add(w, "e1", e1));
  OK(cairn_ckpt_writer_add(w, "e2", e2));
  OK(cairn_ckpt_writer_add(w, "e8", e8));
  OK(cairn_ckpt_writer_add(w, "s", s));
  OK(cairn_ckpt_writer_commit(w));
  cairn_ckpt *c;
  OK(cairn_ckpt_open(P("e.crn"), NULL, &c));
  OK(cairn_ckpt_verify(c));
  const char *names[] = {"e1", "e2", "e8"};
  for (int i = 0; i < 3; i++) {
    cairn_ckpt_entry e;
    OK(cairn_ckpt_find(c, names[i], &e));
    cr_assert_eq(e.raw_bytes, 0);
    cr_assert_eq(e.stored_bytes, 0);
    cr_assert_eq(e.n_chunks, 0);
    cr_assert_eq(e.raw_crc32c, 0);
  }
  cairn_ckpt_entry e;
  OK(cairn_ckpt_find(c, "e2", &e));
  cr_assert(e.rank == 3 && e.shape[0] == 3 && e.shape[1] == 0 && e.shape[2] == 2);
  OK(cairn_ckpt_read(c, "e2", e2));
  /* an empty destination may have no data at all */
  cairn_tensor v;
  OK(cairn_tensor_view(&v, NULL, CAIRN_DTYPE_F32, 1, (int64_t[]){0}));
  OK(cairn_ckpt_read(c, "e1", &v));
  OK(cairn_ckpt_find(c, "s", &e));
  cr_assert_eq(e.rank, 0);
  cr_assert_eq(e.raw_bytes, 8);
  cairn_tensor *r = read_new(c, "s");
  cr_assert_eq(*(double *)r->data, -2.5);
  cairn_tensor_free(r);
  cairn_ckpt_close(c);
  cairn_tensor_free(e1);
  cairn_tensor_free(e2);
  cairn_tensor_free(e8);
  cairn_tensor_free(s);
}

/* Several chunks of each kind; returns nothing, asserts layout facts. */
Test(roundtrip, large_compressible_and_incompressible) {
  const int64_t n = 300000; /* 1.2 MB of f32: 19 chunks of 64 KiB */
  cairn_tensor *dense = tnew(CAIRN_DTYPE_F32, 1, &n), *sparse = tnew(CAIRN_DTYPE_F32, 1, &n),
               *mixed = tnew(CAIRN_DTYPE_F32, 1, &n);
  float *d = dense->data, *sp = sparse->data, *m = mixed->data;
  for (int64_t i = 0; i < n; i++) {
    d[i] = (float)((double)rnd() / 1.8446744073709552e19 - 0.5);
    sp[i] = rnd() % 10 == 0 ? (float)i : 0.0f;
    m[i] = i < n / 2 ? d[i] : 0.0f;
  }
  cairn_ckpt_write_options o = {.chunk_bytes = 65536, .no_fsync = 1};
  cairn_ckpt_writer *w;
  OK(cairn_ckpt_writer_open(P("l.crn"), &o, &w));
  OK(cairn_ckpt_writer_add(w, "dense", dense));
  OK(cairn_ckpt_writer_add(w, "sparse", sparse));
  OK(cairn_ckpt_writer_add(w, "mixed", mixed));
  OK(cairn_ckpt_writer_commit(w));
  cairn_ckpt *c;
  OK(cairn_ckpt_open(P("l.crn"), NULL, &c));
  OK(cairn_ckpt_verify(c));
  cairn_ckpt_entry e;
  uint32_t nch = (uint32_t)((n * 4 + 65535) / 65536);
  OK(cairn_ckpt_find(c, "dense", &e));
  cr_assert_eq(e.n_chunks, nch);
  cr_assert_eq(e.stored_bytes, e.raw_bytes, "dense floats are stored raw (%llu of %llu)",
               (unsigned long long)e.stored_bytes, (unsigned long long)e.raw_bytes);
  OK(cairn_ckpt_find(c, "sparse", &e));
  cr_assert_lt(e.stored_bytes * 2, e.raw_bytes, "90%% zeros compress (%llu of %llu)",
               (unsigned long long)e.stored_bytes, (unsigned long long)e.raw_bytes);
  OK(cairn_ckpt_find(c, "mixed", &e));
  cr_assert_lt(e.stored_bytes, e.raw_bytes * 6 / 10);
  cr_assert_gt(e.stored_bytes, e.raw_bytes * 4 / 10);
  cairn_tensor *t = read_new(c, "dense");
  cr_assert(same_tensor(t, dense));
  cairn_tensor_free(t);
  t = read_new(c, "sparse");
  cr_assert(same_tensor(t, sparse));
  cairn_tensor_free(t);
  t = read_new(c, "mixed");
  cr_assert(same_tensor(t, mixed));
  cairn_tensor_free(t);
  cairn_ckpt_close(c);
  cairn_tensor_free(dense);
  cairn_tensor_free(sparse);
  cairn_tensor_free(mixed);
}

Test(roundtrip, compress_modes) {
  const int64_t n = 50000;
  cairn_tensor *smooth = tnew(CAIRN_DTYPE_I64, 1, &n);
  for (int64_t i = 0; i < n; i++) ((int64_t *)smooth->data)[i] = (int64_t)(rnd() % 1000);
  uint64_t stored[3];
  for (int mode = 0; mode < 3; mode++) {
    cairn_ckpt_write_options o = {.chunk_bytes = 8192, .compress = (cairn_ckpt_compress)mode, .no_fsync = 1};
    cairn_ckpt_writer *w;
    OK(cairn_ckpt_writer_open(P("m.crn"), &o, &w));
    OK(cairn_ckpt_writer_add(w, "x", smooth));
    OK(cairn_ckpt_writer_commit(w));
    cairn_ckpt *c;
    OK(cairn_ckpt_open(P("m.crn"), NULL, &c));
    OK(cairn_ckpt_verify(c));
    cairn_ckpt_entry e;
    OK(cairn_ckpt_find(c, "x", &e));
    stored[mode] = e.stored_bytes;
    cairn_tensor *t = read_new(c, "x");
    cr_assert(same_tensor(t, smooth), "mode %d", mode);
    cairn_tensor_free(t);
    cairn_ckpt_close(c);
  }
  cr_assert_eq(stored[CAIRN_CKPT_COMPRESS_NONE], (uint64_t)n * 8);
  cr_assert_lt(stored[CAIRN_CKPT_COMPRESS_AUTO], (uint64_t)n * 8);
  cr_assert_lt(stored[CAIRN_CKPT_COMPRESS_SHUFFLE], stored[CAIRN_CKPT_COMPRESS_AUTO],
               "byte-shuffle helps small integers (%llu vs %llu)", (unsigned long long)stored[2],
               (unsigned long long)stored[0]);
  cairn_tensor_free(smooth);
}

/* Payload offset = position of the tensor's bytes in the file. */
static long find_bytes(const unsigned char *hay, size_t n, const void *needle, size_t k) {
  const unsigned char *p = memmem(hay, n, needle, k);
  return p ? (long)(p - hay) : -1;
}

Test(roundtrip, raw_aligned_layout) {
  for (uint32_t align = 64; align <= 4096; align *= 8) {
    cairn_ckpt_write_options o = {.alignment = align, .raw_layout_min_bytes = 10000, .chunk_bytes = 4096,
                                  .no_fsync = 1};
    cairn_tensor *small = tnew(CAIRN_DTYPE_F32, 1, (int64_t[]){7});
    cairn_tensor *big = tnew(CAIRN_DTYPE_F32, 2, (int64_t[]){50, 100});
    cairn_tensor *zeros = tnew(CAIRN_DTYPE_F32, 2, (int64_t[]){50, 100});
    fill_random(small->data, 28);
    fill_random(big->data, 20000);
    cairn_ckpt_writer *w;
    OK(cairn_ckpt_writer_open(P("r.crn"), &o, &w));
    OK(cairn_ckpt_writer_add(w, "small", small));
    OK(cairn_ckpt_writer_add(w, "big", big));
    OK(cairn_ckpt_writer_add(w, "zeros", zeros));
    OK(cairn_ckpt_writer_commit(w));
    cairn_ckpt *c;
    OK(cairn_ckpt_open(P("r.crn"), NULL, &c));
    OK(cairn_ckpt_verify(c));
    cairn_ckpt_entry e;
    OK(cairn_ckpt_find(c, "big", &e));
    cr_assert_eq(e.n_chunks, 0, "big incompressible tensor uses the raw layout");
    cr_assert_eq(e.stored_bytes, 20000);
    OK(cairn_ckpt_find(c, "zeros", &e));
    cr_assert_gt(e.n_chunks, 0, "compressible tensor stays chunked");
    cr_assert_lt(e.stored_bytes, 20000);
    OK(cairn_ckpt_find(c, "small", &e));
    cr_assert_eq(e.n_chunks, 1);
    size_t len;
    unsigned char *file = slurp(P("r.crn"), &len);
    long at = find_bytes(file, len, big->data, 20000);
    cr_assert_gt(at, 0);
    cr_assert_eq(at % align, 0, "payload at %ld is not %u-aligned", at, align);
    free(file);
    cairn_tensor *t = read_new(c, "big");
    cr_assert(same_tensor(t, big));
    cairn_tensor_free(t);
    t = read_new(c, "zeros");
    cr_assert(same_tensor(t, zeros));
    cairn_tensor_free(t);
    cairn_ckpt_close(c);
    cairn_tensor_free(small);
    cairn_tensor_free(big);
    cairn_tensor_free(zeros);
  }
  /* NONE + raw_layout_min: raw layout whatever the data */
  cairn_ckpt_write_options o = {.raw_layout_min_bytes = 100, .compress = CAIRN_CKPT_COMPRESS_NONE, .no_fsync = 1};
  cairn_tensor *zeros = tnew(CAIRN_DTYPE_U8, 1, (int64_t[]){1000});
  cairn_ckpt_writer *w;
  OK(cairn_ckpt_writer_open(P("n.crn"), &o, &w));
  OK(cairn_ckpt_writer_add(w, "z", zeros));
  OK(cairn_ckpt_writer_commit(w));
  cairn_ckpt *c;
  OK(cairn_ckpt_open(P("n.crn"), NULL, &c));
  cairn_ckpt_entry e;
  OK(cairn_ckpt_find(c, "z", &e));
  cr_assert_eq(e.n_chunks, 0);
  OK(cairn_ckpt_verify(c));
  cairn_ckpt_close(c);
  cairn_tensor_free(zeros);
}

Test(roundtrip, metadata_every_type) {
  cairn_ckpt_writer *w;
  OK(cairn_ckpt_writer_open(P("meta.crn"), &(cairn_ckpt_write_options){.no_fsync = 1}, &w));
  OK(cairn_ckpt_writer_meta_u64(w, "u", UINT64_MAX));
  OK(cairn_ckpt_writer_meta_i64(w, "i", INT64_MIN));
  OK(cairn_ckpt_writer_meta_f64(w, "f", -0.0));
  OK(cairn_ckpt_writer_meta_f64(w, "pi", 3.141592653589793));
  OK(cairn_ckpt_writer_meta_bool(w, "b", 7));
  OK(cairn_ckpt_writer_meta_bool(w, "nb", 0));
  OK(cairn_ckpt_writer_meta_str(w, "s", "h\xc3\xa9llo \xe2\x82\xac"));
  OK(cairn_ckpt_writer_meta_str(w, "empty_s", ""));
  OK(cairn_ckpt_writer_meta_bytes(w, "by", "\0\1\2\0\xff", 5));
  OK(cairn_ckpt_writer_meta_bytes(w, "empty_b", NULL, 0));
  OK(cairn_ckpt_writer_meta_u64(w, "train.global_step", 1));
  OK(cairn_ckpt_writer_meta_u64(w, "train.global_step", 2)); /* replaces */
  OK(cairn_ckpt_writer_meta_str(w, "replaced", "x"));
  OK(cairn_ckpt_writer_meta_i64(w, "replaced", -1)); /* replaces, even with another type */
  FAILS(cairn_ckpt_writer_meta_u64(w, "Upper", 1), CAIRN_E_INVALID);
  FAILS(cairn_ckpt_writer_meta_u64(w, "", 1), CAIRN_E_INVALID);
  FAILS(cairn_ckpt_writer_meta_u64(w, "a-b", 1), CAIRN_E_INVALID);
  char longkey[300];
  memset(longkey, 'k', 256);
  longkey[256] = '\0';
  FAILS(cairn_ckpt_writer_meta_u64(w, longkey, 1), CAIRN_E_INVALID);
  longkey[255] = '\0';
  OK(cairn_ckpt_writer_meta_u64(w, longkey, 255));
  FAILS(cairn_ckpt_writer_meta_str(w, "bad_utf8", "\xff"), CAIRN_E_INVALID);
  FAILS(cairn_ckpt_writer_meta_str(w, "null", NULL), CAIRN_E_NULL);
  OK(cairn_ckpt_writer_commit(w));

  cairn_ckpt *c;
  OK(cairn_ckpt_open(P("meta.crn"), NULL, &c));
  cr_assert_eq(cairn_ckpt_meta_count(c), 13);
  const char *prev = "";
  for (size_t i = 0; i < cairn_ckpt_meta_count(c); i++) {
    const char *k;
    cairn_meta_type ty;
    OK(cairn_ckpt_meta_at(c, i, &k, &ty));
    cr_assert_gt(strcmp(k, prev), 0, "keys in order");
    prev = k;
  }
  uint64_t u;
  int64_t i;
  double f;
  int b;
  const char *s;
  const void *by;
  size_t len;
  OK(cairn_ckpt_meta_u64(c, "u", &u));
  cr_assert_eq(u, UINT64_MAX);
  OK(cairn_ckpt_meta_i64(c, "i", &i));
  cr_assert_eq(i, INT64_MIN);
  OK(cairn_ckpt_meta_f64(c, "f", &f));
  cr_assert(f == 0.0 && signbit(f), "-0.0 keeps its sign");
  OK(cairn_ckpt_meta_f64(c, "pi", &f));
  cr_assert_eq(f, 3.141592653589793);
  OK(cairn_ckpt_meta_bool(c, "b", &b));
  cr_assert_eq(b, 1);
  OK(cairn_ckpt_meta_bool(c, "nb", &b));
  cr_assert_eq(b, 0);
  OK(cairn_ckpt_meta_str(c, "s", &s));
  cr_assert_str_eq(s, "h\xc3\xa9llo \xe2\x82\xac");
  OK(cairn_ckpt_meta_str(c, "empty_s", &s));
  cr_assert_str_eq(s, "");
  OK(cairn_ckpt_meta_bytes(c, "by", &by, &len));
  cr_assert(len == 5 && memcmp(by, "\0\1\2\0\xff", 5) == 0);
  OK(cairn_ckpt_meta_bytes(c, "empty_b", &by, &len));
  cr_assert_eq(len, 0);
  OK(cairn_ckpt_meta_u64(c, "train.global_step", &u));
  cr_assert_eq(u, 2);
  OK(cairn_ckpt_meta_i64(c, "replaced", &i));
  cr_assert_eq(i, -1);
  OK(cairn_ckpt_meta_u64(c, longkey, &u));
  cr_assert_eq(u, 255);
  FAILS(cairn_ckpt_meta_i64(c, "u", &i), CAIRN_E_DTYPE);
  cr_assert(strstr(cairn_errmsg(), "u64"), "message names the stored type: %s", cairn_errmsg());
  FAILS(cairn_ckpt_meta_u64(c, "missing", &u), CAIRN_E_NOT_FOUND);
  cr_assert(strstr(cairn_errmsg(), "missing"));
  cairn_ckpt_close(c);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

Test(roundtrip, many_tensors_sorted_index) {
  enum { N = 3000 };
  static char names[N][32];
  char *sorted[N];
  cairn_ckpt_writer *w;
  OK(cairn_ckpt_writer_open(P("many.crn"), &(cairn_ckpt_write_options){.no_fsync = 1}, &w));
  cairn_tensor *t = tnew(CAIRN_DTYPE_I32, 0, NULL);
  /* insertion order is a permutation of the name order */
  for (int i = 0; i < N; i++) {
    int k = (int)((i * 1237L) % N);
    snprintf(names[i], sizeof names[i], "layer%04d/w", k);
    *(int32_t *)t->data = k;
    OK(cairn_ckpt_writer_add(w, names[i], t));
    sorted[i] = names[i];
  }
  OK(cairn_ckpt_writer_commit(w));
  qsort(sorted, N, sizeof *sorted, cmp_str);
  cairn_ckpt *c;
  OK(cairn_ckpt_open(P("many.crn"), NULL, &c));
  cr_assert_eq(cairn_ckpt_count(c), N);
  for (int i = 0; i < N; i++) {
    cairn_ckpt_entry e;
    OK(cairn_ckpt_entry_at(c, (size_t)i, &e));
    cr_assert_str_eq(e.name, sorted[i]);
  }
  for (int i = 0; i < N; i += 7) {
    OK(cairn_ckpt_read(c, names[i], t));
    int k;
    sscanf(names[i], "layer%d", &k);
    cr_assert_eq(*(int32_t *)t->data, k);
  }
  cairn_ckpt_entry e;
  FAILS(cairn_ckpt_find(c, "layer9999/w", &e), CAIRN_E_NOT_FOUND);
  FAILS(cairn_ckpt_find(c, "layer0000", &e), CAIRN_E_NOT_FOUND);
  FAILS(cairn_ckpt_entry_at(c, N, &e), CAIRN_E_OUT_OF_RANGE);
  cairn_tensor_free(t);
  cairn_ckpt_close(c);
}

Test(roundtrip, names_sorted_bytewise) {
  const char *in[] = {"b", "a/b", "ab", "a", "\xc3\xa9t\xc3\xa9", "A", "z z", "a.b"};
  const char *want[] = {"A", "a", "a.b", "a/b", "ab", "b", "z z", "\xc3\xa9t\xc3\xa9"};
  cairn_ckpt_writer *w;
  OK(cairn_ckpt_writer_open(P("n.crn"), &(cairn_ckpt_write_options){.no_fsync = 1}, &w));
  cairn_tensor *t = tnew(CAIRN_DTYPE_U8, 1, (int64_t[]){1});
  for (int i = 0; i < 8; i++) {
    *(uint8_t *)t->data = (uint8_t)i;
    OK(cairn_ckpt_writer_add(w, in[i], t));
  }
  OK(cairn_ckpt_writer_commit(w));
  cairn_ckpt *c;
  OK(cairn_ckpt_open(P("n.crn"), NULL, &c));
  for (int i = 0; i < 8; i++) {
    cairn_ckpt_entry e;
    OK(cairn_ckpt_entry_at(c, (size_t)i, &e));
    cr_assert_str_eq(e.name, want[i]);
  }
  for (int i = 0; i < 8; i++) {
    OK(cairn_ckpt_read(c, in[i], t));
    cr_assert_eq(*(uint8_t *)t->data, i);
  }
  cairn_tensor_free(t);
  cairn_ckpt_close(c);
}

Test(roundtrip, tensor_may_change_after_add) {
  cairn_tensor *t = tnew(CAIRN_DTYPE_F32, 1, (int64_t[]){100000});
  fill_random(t->data, 400000);
  cairn_tensor *copy = tnew(CAIRN_DTYPE_F32, 1, (int64_t[]){100000});
  OK(cairn_tensor_copy(copy, t));
  cairn_ckpt_writer *w;
  OK(cairn_ckpt_writer_open(P("c.crn"), &(cairn_ckpt_write_options){.chunk_bytes = 4096, .no_fsync = 1}, &w));
  OK(cairn_ckpt_writer_add(w, "t", t));
  memset(t->data, 0x55, 400000);
  OK(cairn_ckpt_writer_commit(w));
  cairn_ckpt *c;
  OK(cairn_ckpt_open(P("c.crn"), NULL, &c));
  cairn_tensor *r = read_new(c, "t");
  cr_assert(same_tensor(r, copy));
  cairn_tensor_free(r);
  cairn_tensor_free(t);
  cairn_tensor_free(copy);
  cairn_ckpt_close(c);
}

Test(roundtrip, same_file_for_any_thread_count) {
  cairn_tensor *t = tnew(CAIRN_DTYPE_F32, 1, (int64_t[]){100000});
  float *f = t->data;
  for (int i = 0; i < 100000; i++) f[i] = i % 3 ? 0.0f : (float)(rnd() % 100);
  uint64_t stored[2];
  uint32_t crc[2];
  for (int k = 0; k < 2; k++) {
    OK(cairn_set_num_threads(k + 1));
    cairn_ckpt_writer *w;
    OK(cairn_ckpt_writer_open(P("t.crn"), &(cairn_ckpt_write_options){.chunk_bytes = 4096, .no_fsync = 1}, &w));
    OK(cairn_ckpt_writer_add(w, "t", t));
    OK(cairn_ckpt_writer_commit(w));
    cairn_ckpt *c;
    OK(cairn_ckpt_open(P("t.crn"), NULL, &c));
    cairn_ckpt_entry e;
    OK(cairn_ckpt_find(c, "t", &e));
    stored[k] = e.stored_bytes;
    crc[k] = e.raw_crc32c;
    cairn_tensor *r = read_new(c, "t");
    cr_assert(same_tensor(r, t));
    cairn_tensor_free(r);
    cairn_ckpt_close(c);
  }
  cr_assert_eq(stored[0], stored[1]);
  cr_assert_eq(crc[0], crc[1]);
  cairn_tensor_free(t);
}

Test(roundtrip, empty_checkpoint) {
  cairn_ckpt_writer *w;
  OK(cairn_ckpt_writer_open(P("empty.crn"), NULL, &w));
  OK(cairn_ckpt_writer_commit(w));
  cairn_ckpt *c;
  OK(cairn_ckpt_open(P("empty.crn"), NULL, &c));
  cr_assert_eq(cairn_ckpt_count(c), 0);
  cr_assert_eq(cairn_ckpt_meta_count(c), 0);
  OK(cairn_ckpt_verify(c));
  int major, minor;
  cairn_ckpt_version(c, &major, &minor);
  cr_assert(major == 1 && minor == 0);
  cr_assert_str_eq(cairn_ckpt_path(c), P("empty.crn"));
  cairn_ckpt_close(c);
}

/* ---- reading errors --------------------------------------------------------------- */

TestSuite(read, .init = setup, .fini = teardown, .timeout = 30);

static void write_two(const char *path) {
  cairn_tensor *a = tnew(CAIRN_DTYPE_F32, 2, (int64_t[]){3, 4});
  cairn_tensor *b = tnew(CAIRN_DTYPE_I32, 1, (int64_t[]){1000});
  for (int i = 0; i < 12; i++) ((float *)a->data)[i] = (float)i;
  fill_random(b->data, 4000);
  cairn_ckpt_writer *w;
  OK(cairn_ckpt_writer_open(path, &(cairn_ckpt_write_options){.chunk_bytes = 1024, .no_fsync = 1}, &w));
  OK(cairn_ckpt_writer_add(w, "a", a));
  OK(cairn_ckpt_writer_add(w, "b", b));
  OK(cairn_ckpt_writer_commit(w));
  cairn_tensor_free(a);
  cairn_tensor_free(b);
}

Test(read, dtype_and_shape_mismatch_name_both) {
  write_two(P("x.crn"));
  cairn_ckpt *c;
  OK(cairn_ckpt_open(P("x.crn"), NULL, &c));
  cairn_tensor *d = tnew(CAIRN_DTYPE_F64, 2, (int64_t[]){3, 4});
  FAILS(cairn_ckpt_read(c, "a", d), CAIRN_E_DTYPE);
  cr_assert(strstr(cairn_errmsg(), "f32") && strstr(cairn_errmsg(), "f64") && strstr(cairn_errmsg(), "'a'"),
            "%s", cairn_errmsg());
  cairn_tensor_free(d);
  d = tnew(CAIRN_DTYPE_F32, 2, (int64_t[]){4, 3});
  FAILS(cairn_ckpt_read(c, "a", d), CAIRN_E_SHAPE);
  cr_assert(strstr(cairn_errmsg(), "(3, 4)") && strstr(cairn_errmsg(), "(4, 3)"), "%s", cairn_errmsg());
  cairn_tensor_free(d);
  d = tnew(CAIRN_DTYPE_F32, 1, (int64_t[]){12});
  FAILS(cairn_ckpt_read(c, "a", d), CAIRN_E_SHAPE);
  FAILS(cairn_ckpt_read(c, "nope", d), CAIRN_E_NOT_FOUND);
  cr_assert(strstr(cairn_errmsg(), "nope"));
  FAILS(cairn_ckpt_read(c, NULL, d), CAIRN_E_NULL);
  FAILS(cairn_ckpt_read(c, "a", NULL), CAIRN_E_NULL);
  cairn_tensor_free(d);
  cairn_ckpt_close(c);
}

/* Flipping a byte inside b's data breaks b only: reading a touches none of b. */
Test(read, one_tensor_without_the_others) {
  write_two(P("x.crn"));
  size_t len;
  unsigned char *f = slurp(P("x.crn"), &len);
  cairn_ckpt *c;
  OK(cairn_ckpt_open(P("x.crn"), NULL, &c));
  cairn_tensor *b = read_new(c, "b");
  cairn_ckpt_close(c);
  long at = find_bytes(f, len, (unsigned char *)b->data + 2000, 16);
  cr_assert_gt(at, 0);
  f[at] ^= 0x10;
  spit(P("x.crn"), f, len);
  OK(cairn_ckpt_open(P("x.crn"), NULL, &c));
  cairn_tensor *a = read_new(c, "a");
  cr_assert_eq(((float *)a->data)[11], 11.0f);
  FAILS(cairn_ckpt_read(c, "b", b), CAIRN_E_CORRUPT);
  cr_assert(strstr(cairn_errmsg(), "'b'") && strstr(cairn_errmsg(), "offset"), "%s", cairn_errmsg());
  FAILS(cairn_ckpt_verify(c), CAIRN_E_CORRUPT);
  cairn_ckpt_close(c);
  cairn_tensor_free(a);
  cairn_tensor_free(b);
  free(f);
}

/* Reassembles the pieces cairn_ckpt_read_pieces hands over. */
typedef struct pieces {
  unsigned char *buf;
  uint64_t next;
  int calls;
} pieces;

static cairn_status take_piece(void *user, uint64_t off, const void *data, size_t len) {
  pieces *p = user;
  cr_assert_eq(off, p->next, "pieces come in order");
  cr_assert_leq(len, 1024, "a piece is at most a chunk");
  memcpy(p->buf + off, data, len);
  p->next = off + len;
  p->calls++;
  return CAIRN_OK;
}

static cairn_status stop_piece(void *user, uint64_t off, const void *data, size_t len) {
  (void)user;
  (void)off;
  (void)data;
  (void)len;
  return CAIRN_E_CANCELLED;
}

/* Piece by piece, verify without a destination, and the file-identity check. */
Test(read, pieces_verify_tensor_and_unchanged) {
  write_two(P("x.crn"));
  cairn_ckpt *c;
  OK(cairn_ckpt_open(P("x.crn"), NULL, &c));
  cairn_tensor *b = read_new(c, "b");
  unsigned char got[4000];
  pieces p = {got, 0, 0};
  OK(cairn_ckpt_read_pieces(c, "b", take_piece, &p));
  cr_assert_eq(p.next, 4000);
  cr_assert_eq(p.calls, 4, "4000 bytes in chunks of 1024");
  cr_assert_eq(memcmp(got, b->data, 4000), 0);
  FAILS(cairn_ckpt_read_pieces(c, "b", stop_piece, NULL), CAIRN_E_CANCELLED);
  FAILS(cairn_ckpt_read_pieces(c, "nope", take_piece, &p), CAIRN_E_NOT_FOUND);
  FAILS(cairn_ckpt_read_pieces(c, "b", NULL, NULL), CAIRN_E_NULL);
  OK(cairn_ckpt_verify_tensor(c, "b"));
  FAILS(cairn_ckpt_verify_tensor(c, "nope"), CAIRN_E_NOT_FOUND);
  OK(cairn_ckpt_check_unchanged(c));
  cairn_ckpt_close(c);
  /* b's data damaged: both refuse it */
  size_t len;
  unsigned char *f = slurp(P("x.crn"), &len);
  long at = find_bytes(f, len, (unsigned char *)b->data + 3000, 16);
  cr_assert_gt(at, 0);
  f[at] ^= 0x10;
  spit(P("x.crn"), f, len);
  OK(cairn_ckpt_open(P("x.crn"), NULL, &c));
  FAILS(cairn_ckpt_verify_tensor(c, "b"), CAIRN_E_CORRUPT);
  p.next = 0;
  FAILS(cairn_ckpt_read_pieces(c, "b", take_piece, &p), CAIRN_E_CORRUPT);
  OK(cairn_ckpt_verify_tensor(c, "a"));
  /* the open file cut short: no longer what open saw */
  cr_assert_eq(truncate(P("x.crn"), (off_t)len / 2), 0);
  FAILS(cairn_ckpt_check_unchanged(c), CAIRN_E_CORRUPT);
  cr_assert(strstr(cairn_errmsg(), "changed since it was opened"), "%s", cairn_errmsg());
  cairn_ckpt_close(c);
  cairn_tensor_free(b);
  free(f);
}

/* A tensor of raw chunks big enough to be decoded on two threads: it reads
 * back whole, and with two damaged chunks every verify and read names the
 * lower one, however the threads ran. */
Test(read, raw_chunks_on_two_threads_lowest_error) {
  enum { MIB = 1 << 20, N = 12 * MIB / 4 };
  int was = cairn_get_num_threads();
  OK(cairn_set_num_threads(2));
  cairn_tensor *t = tnew(CAIRN_DTYPE_F32, 1, (int64_t[]){N});
  fill_random(t->data, (size_t)N * 4);
  for (int layout = 0; layout < 2; layout++) { /* chunked (raw chunks), then the raw layout */
    cairn_ckpt_writer *w;
    cairn_ckpt_write_options o = {.no_fsync = 1, .raw_layout_min_bytes = layout ? 1 : UINT64_MAX};
    OK(cairn_ckpt_writer_open(P("big.crn"), &o, &w));
    OK(cairn_ckpt_writer_add(w, "w", t));
    OK(cairn_ckpt_writer_commit(w));
    cairn_ckpt *c;
    OK(cairn_ckpt_open(P("big.crn"), NULL, &c));
    cairn_ckpt_entry e;
    OK(cairn_ckpt_find(c, "w", &e));
    cr_assert_eq(e.n_chunks, layout ? 0u : 12u, "layout %d: %u chunks", layout, e.n_chunks);
    cairn__ckpt_last_threads = 0;
    OK(cairn_ckpt_verify_tensor(c, "w"));
#ifdef CAIRN_HAVE_OPENMP
    cr_assert_eq(cairn__ckpt_last_threads, 2, "layout %d: verified on %d threads", layout, cairn__ckpt_last_threads);
#endif
    cairn_tensor *back = read_new(c, "w");
    cr_assert(same_tensor(back, t), "layout %d: read back", layout);
    cairn_ckpt_close(c);
    size_t len;
    unsigned char *f = slurp(P("big.crn"), &len);
    long at5 = find_bytes(f, len, (unsigned char *)t->data + 5 * MIB + 100, 16);
    long at2 = find_bytes(f, len, (unsigned char *)t->data + 2 * MIB + 100, 16);
    cr_assert(at5 > 0 && at2 > 0);
    f[at5] ^= 0x01;
    f[at2] ^= 0x01;
    spit(P("big.crn"), f, len);
    OK(cairn_ckpt_open(P("big.crn"), NULL, &c));
    char first[600];
    for (int rep = 0; rep < 6; rep++) {
      FAILS(rep % 2 ? cairn_ckpt_read(c, "w", back) : cairn_ckpt_verify_tensor(c, "w"), CAIRN_E_CORRUPT);
      if (!layout)
        cr_assert(strstr(cairn_errmsg(), "chunk 2: checksum mismatch"), "%s", cairn_errmsg());
      if (rep == 0) snprintf(first, sizeof first, "%s", cairn_errmsg());
      else cr_assert_str_eq(cairn_errmsg(), first, "the same error every time");
    }
    cairn_ckpt_close(c);
    cairn_tensor_free(back);
    free(f);
  }
  cairn_tensor_free(t);
  OK(cairn_set_num_threads(was));
}

Test(read, not_a_checkpoint) {
  spit(P("text"), "hello, world, this is not a checkpoint at all; it is just some text.\n", 70);
  cairn_ckpt *c;
  FAILS(cairn_ckpt_open(P("text"), NULL, &c), CAIRN_E_FORMAT);
  cr_assert_null(c);
  spit(P("empty"), "", 0);
  FAILS(cairn_ckpt_open(P("empty"), NULL, &c), CAIRN_E_TRUNCATED);
  FAILS(cairn_ckpt_open(P("missing"), NULL, &c), CAIRN_E_IO);
  cr_assert(strstr(cairn_errmsg(), "missing"));
  FAILS(cairn_ckpt_open(g_dir, NULL, &c), CAIRN_E_IO);
  FAILS(cairn_ckpt_open(NULL, NULL, &c), CAIRN_E_NULL);
}

Test(read, truncated_file_suggests_recover) {
  write_two(P("x.crn"));
  size_t len;
  unsigned char *f = slurp(P("x.crn"), &len);
  spit(P("cut.crn"), f, len - 1);
  cairn_ckpt *c;
  FAILS(cairn_ckpt_open(P("cut.crn"), NULL, &c), CAIRN_E_TRUNCATED);
  cr_assert(strstr(cairn_errmsg(), "ckpt-inspect recover"), "%s", cairn_errmsg());
  cr_assert(strstr(cairn_errmsg(), "cut.crn"), "%s", cairn_errmsg());
  free(f);
}

Test(read, limits_enforced) {
  write_two(P("x.crn"));
  cairn_ckpt *c;
  cairn_ckpt_limits l[] = {{.max_index_bytes = 40}, {.max_meta_bytes = 19}, {.max_tensors = 1},
                           {.max_chunk_bytes = 512}, {.max_tensor_bytes = 3999}};
  for (size_t i = 0; i < sizeof l / sizeof l[0]; i++) {
    FAILS(cairn_ckpt_open(P("x.crn"), &l[i], &c), CAIRN_E_LIMIT);
    cr_assert(strstr(cairn_errmsg(), "limit"), "%s", cairn_errmsg());
  }
  cairn_ckpt_limits fits = {.max_tensors = 2, .max_chunk_bytes = 1024, .max_tensor_bytes = 4000};
  OK(cairn_ckpt_open(P("x.crn"), &fits, &c));
  cairn_ckpt_close(c);
}

/* Patching: the helpers find the blocks through the footer. */
typedef struct img {
  unsigned char *b;
  size_t n;
} img;

static img load(const char *path) {
  img m;
  m.b = slurp(path, &m.n);
  return m;
}
static void fix_super(img *m) { ck_put32(m->b + 60, ck_crc_masked(m->b, 60)); }
static void fix_footer(img *m) { ck_put32(m->b + m->n - 4, ck_crc_masked(m->b + m->n - 64, 60)); }
static size_t index_at(const img *m) {
  const unsigned char *ft = m->b + m->n - 64;
  return (size_t)(ck_get64(ft + 8) + ck_get64(ft + 16));
}
static size_t meta_at(const img *m) { return (size_t)ck_get64(m->b + m->n - 64 + 8); }
static void fix_index(img *m) {
  size_t at = index_at(m), sz = (size_t)ck_get64(m->b + m->n - 64 + 24);
  ck_put32(m->b + at + sz - 4, ck_crc_masked(m->b + at, sz - 4));
}
static void fix_meta(img *m) {
  size_t at = meta_at(m), sz = (size_t)ck_get64(m->b + m->n - 64 + 16);
  ck_put32(m->b + at + sz - 4, ck_crc_masked(m->b + at, sz - 4));
}
static cairn_status open_img(const img *m, const char *name) {
  spit(P(name), m->b, m->n);
  cairn_ckpt *c = NULL;
  cairn_status s = cairn_ckpt_open(P(name), NULL, &c);
  cairn_ckpt_close(c);
  return s;
}

/* Trained-weight-like floats: small normal values (a sum of uniforms), so
 * the sign+exponent byte carries a few bits and the mantissa is noise. */
static cairn_tensor *weights_like(int64_t n) {
  cairn_tensor *t = tnew(CAIRN_DTYPE_F32, 1, &n);
  for (int64_t i = 0; i < n; i++) {
    double u = 0;
    for (int k = 0; k < 4; k++) u += (double)(rnd() >> 11) / 9007199254740992.0;
    ((float *)t->data)[i] = (float)((u - 2.0) * 0.05);
  }
  return t;
}

static uint64_t stored_with(const char *path, const cairn_tensor *x, cairn_ckpt_compress mode, int *minor,
                            uint32_t *required) {
  cairn_ckpt_write_options o = {.compress = mode, .no_fsync = 1};
  cairn_ckpt_writer *w;
  OK(cairn_ckpt_writer_open(path, &o, &w));
  OK(cairn_ckpt_writer_add(w, "x", x));
  OK(cairn_ckpt_writer_commit(w));
  img m = load(path);
  *minor = ck_get16(m.b + 10);
  *required = ck_get32(m.b + 16);
  cr_assert_eq(ck_get16(m.b + m.n - 64 + 6), *minor, "footer and superblock agree on the minor version");
  free(m.b);
  cairn_ckpt *c;
  OK(cairn_ckpt_open(path, NULL, &c));
  OK(cairn_ckpt_verify(c));
  cairn_ckpt_entry e;
  OK(cairn_ckpt_find(c, "x", &e));
  cairn_tensor *t = read_new(c, "x");
  cr_assert(same_tensor(t, x), "mode %d", (int)mode);
  cairn_tensor_free(t);
  cairn_ckpt_close(c);
  return e.stored_bytes;
}

Test(roundtrip, compact_beats_shuffle_on_float_weights) {
  cairn_tensor *x = weights_like(600000); /* 2.4 MB: three chunks, the last one short */
  int minor;
  uint32_t req;
  uint64_t lz4 = stored_with(P("a.crn"), x, CAIRN_CKPT_COMPRESS_AUTO, &minor, &req);
  cr_assert(minor == 0 && req == 0, "the default writes 1.0");
  uint64_t shuf = stored_with(P("s.crn"), x, CAIRN_CKPT_COMPRESS_SHUFFLE, &minor, &req);
  cr_assert(minor == 0 && req == 0, "shuffle writes 1.0");
  uint64_t comp = stored_with(P("c.crn"), x, CAIRN_CKPT_COMPRESS_COMPACT, &minor, &req);
  cr_assert(minor == 1 && req == 0x1, "a file with codec-3 chunks is 1.1 with feature bit 0x1 (%d, 0x%x)", minor, req);
  uint64_t raw = 600000 * 4;
  cr_log_info("stored: lz4 %llu, shuffle %llu, compact %llu of %llu", (unsigned long long)lz4,
              (unsigned long long)shuf, (unsigned long long)comp, (unsigned long long)raw);
  cr_assert_lt(comp, shuf, "compact (%llu) smaller than shuffle + LZ4 (%llu)", (unsigned long long)comp,
               (unsigned long long)shuf);
  cr_assert_lt((double)comp, (double)raw / 1.15, "compact ratio %.3f", (double)raw / (double)comp);
  cairn_tensor_free(x);
}

/* Staging (cairn_ckpt_set_staging): a verify keeps the decoded bytes of a
 * compact tensor and the read copies them. The read gives the tensor's
 * bytes whether all, part (budget of one chunk: the rest decoded again)
 * or none of it is staged; staged bytes are the ones the verify checked,
 * so a change of the file after the verify reaches the read only where
 * nothing was staged; a failed verify stages nothing. */
Test(roundtrip, compact_staging_decodes_once) {
  cairn_tensor *x = weights_like(600000); /* three chunks of 1 MiB, the last one short */
  int minor;
  uint32_t req;
  stored_with(P("c.crn"), x, CAIRN_CKPT_COMPRESS_COMPACT, &minor, &req);
  cr_assert_eq(req, 0x1, "codec-3 chunks");
  const uint64_t budgets[] = {0, 1u << 20, 64u << 20};
  for (int b = 0; b < 3; b++) {
    cairn_ckpt *c;
    OK(cairn_ckpt_open(P("c.crn"), NULL, &c));
    OK(cairn_ckpt_set_staging(c, budgets[b]));
    OK(cairn_ckpt_verify_tensor(c, "x"));
    cairn_tensor *t = read_new(c, "x");
    cr_assert(same_tensor(t, x), "budget %llu", (unsigned long long)budgets[b]);
    cairn_tensor_free(t);
    t = read_new(c, "x"); /* the first read released the staging: decoded from the file */
    cr_assert(same_tensor(t, x), "budget %llu, second read", (unsigned long long)budgets[b]);
    cairn_tensor_free(t);
    cairn_ckpt_close(c);
  }
  cr_assert_eq(cairn_ckpt_set_staging(NULL, 1), CAIRN_E_NULL);
  /* a byte of the last chunk's stored data (just before the trailer, tag
     CRNE) flipped between verify and read */
  img m = load(P("c.crn"));
  size_t trailer = 0;
  for (size_t i = 64; i + 4 <= m.n && !trailer; i++)
    if (!memcmp(m.b + i, "CRNE", 4)) trailer = i;
  cr_assert_gt(trailer, 64);
  const uint64_t flip_budgets[] = {0, 2u << 20, 64u << 20};
  cairn_ckpt *c;
  for (int b = 0; b < 3; b++) {
    spit(P("f.crn"), m.b, m.n);
    OK(cairn_ckpt_open(P("f.crn"), NULL, &c));
    OK(cairn_ckpt_set_staging(c, flip_budgets[b]));
    OK(cairn_ckpt_verify_tensor(c, "x"));
    m.b[trailer - 10] ^= 0x10;
    spit(P("f.crn"), m.b, m.n);
    m.b[trailer - 10] ^= 0x10;
    cairn_tensor *t = tnew(CAIRN_DTYPE_F32, x->rank, x->shape);
    cairn_status st = cairn_ckpt_read(c, "x", t);
    if (b < 2) { /* the last chunk is not staged: read from the file, its CRC fails */
      cr_assert_eq(st, CAIRN_E_CORRUPT, "budget %llu: %s", (unsigned long long)flip_budgets[b], cairn_errmsg());
    } else { /* all staged: the verified bytes */
      OK(st);
      cr_assert(same_tensor(t, x));
    }
    cairn_tensor_free(t);
    cairn_ckpt_close(c);
    /* the flipped file fails its verify, and a read after it decodes (and fails) again */
    OK(cairn_ckpt_open(P("f.crn"), NULL, &c));
    OK(cairn_ckpt_set_staging(c, 64u << 20));
    cr_assert_eq(cairn_ckpt_verify_tensor(c, "x"), CAIRN_E_CORRUPT);
    t = tnew(CAIRN_DTYPE_F32, x->rank, x->shape);
    cr_assert_eq(cairn_ckpt_read(c, "x", t), CAIRN_E_CORRUPT);
    cairn_tensor_free(t);
    cairn_ckpt_close(c);
  }
  free(m.b);
  cairn_tensor_free(x);
}

Test(roundtrip, compact_file_without_zstd_chunks_is_1_0) {
  const int64_t n = 20000;
  cairn_tensor *x = tnew(CAIRN_DTYPE_U8, 1, &n);
  fill_random(x->data, (size_t)n); /* incompressible: every chunk stays raw */
  int minor;
  uint32_t req;
  stored_with(P("c.crn"), x, CAIRN_CKPT_COMPRESS_COMPACT, &minor, &req);
  cr_assert(minor == 0 && req == 0, "no codec-3 chunk: an older cairn can read it (%d, 0x%x)", minor, req);
  cairn_tensor_free(x);
}

Test(read, codec_3_needs_its_feature_bit) {
  cairn_tensor *x = weights_like(5000);
  int minor;
  uint32_t req;
  stored_with(P("c.crn"), x, CAIRN_CKPT_COMPRESS_COMPACT, &minor, &req);
  img t = load(P("c.crn"));
  ck_put32(t.b + 16, 0);
  fix_super(&t);
  FAILS(open_img(&t, "p.crn"), CAIRN_E_FORMAT);
  cr_assert(strstr(cairn_errmsg(), "codec 3") && strstr(cairn_errmsg(), "0x1"), "%s", cairn_errmsg());
  free(t.b);
  cairn_tensor_free(x);
}

/* A hand-made codec-3 frame (RFC 8878) of raw bytes all equal to v: a
 * 4-byte content size, then one RLE block; window_desc < 0 makes it a
 * single-segment frame (window = content), else it is the
 * Window_Descriptor byte (window 2^(10 + desc/8) + 1/8 of that per desc%8). */
static size_t rle_frame(unsigned char *f, uint32_t fcs, uint32_t raw, int window_desc, unsigned char v) {
  size_t n = 0;
  ck_put32(f, 0xFD2FB528u);
  n = 4;
  f[n++] = window_desc < 0 ? 0x80 | 0x20 : 0x80; /* FCS field of 4 bytes (, Single_Segment) */
  if (window_desc >= 0) f[n++] = (unsigned char)window_desc;
  ck_put32(f + n, fcs);
  n += 4;
  uint32_t bh = raw << 3 | 1u << 1 | 1u; /* Block_Size, Block_Type RLE, Last_Block */
  f[n++] = (unsigned char)bh;
  f[n++] = (unsigned char)(bh >> 8);
  f[n++] = (unsigned char)(bh >> 16);
  f[n++] = v;
  return n;
}

/* The frame rules of doc/checkpoint-format.md, "Codecs", on frames made
 * by hand: a window above 2^max(10, ceil(log2 raw)) is refused before
 * decoding (zstd's one-shot decoder ignores ZSTD_d_windowLogMax), as are a
 * content size other than raw and bytes after the frame; the same frames
 * within the rules decode. */
Test(read, codec_3_frame_rules) {
  unsigned char f[32], out[4096];
  size_t n;
  /* 256 raw bytes: W = 10, a window of at most 1 KiB */
  n = rle_frame(f, 256, 256, 0, 0x3c); /* 1 KiB: at the limit */
  cr_assert_eq(cairn__ck_zstd_decode(f, (uint32_t)n, out, 256), 0);
  for (int i = 0; i < 256; i++) cr_assert_eq(out[i], 0x3c);
  n = rle_frame(f, 256, 256, -1, 0x3c); /* single segment: the window is the content */
  cr_assert_eq(cairn__ck_zstd_decode(f, (uint32_t)n, out, 256), 0);
  n = rle_frame(f, 256, 256, 1, 0x3c); /* 1 KiB + 1/8: one step above */
  cr_assert_eq(cairn__ck_zstd_decode(f, (uint32_t)n, out, 256), -1, "a 1152-byte window for 256 raw bytes");
  n = rle_frame(f, 256, 256, 8 << 3, 0x3c); /* 256 KiB */
  cr_assert_eq(cairn__ck_zstd_decode(f, (uint32_t)n, out, 256), -1, "a 256 KiB window for 256 raw bytes");
  /* 4000 raw bytes: W = 12, 4 KiB allowed, 8 KiB not */
  n = rle_frame(f, 4000, 4000, 2 << 3, 0x11);
  cr_assert_eq(cairn__ck_zstd_decode(f, (uint32_t)n, out, 4000), 0);
  n = rle_frame(f, 4000, 4000, 3 << 3, 0x11);
  cr_assert_eq(cairn__ck_zstd_decode(f, (uint32_t)n, out, 4000), -1, "an 8 KiB window for 4000 raw bytes");
  /* content size other than raw; a byte after the frame */
  n = rle_frame(f, 255, 256, 0, 0x3c);
  cr_assert_eq(cairn__ck_zstd_decode(f, (uint32_t)n, out, 256), -1);
  n = rle_frame(f, 256, 256, 0, 0x3c);
  f[n++] = 0;
  cr_assert_eq(cairn__ck_zstd_decode(f, (uint32_t)n, out, 256), -1);
}

Test(read, versions_features_reserved) {
  write_two(P("x.crn"));
  img m = load(P("x.crn"));
  img t = {malloc(m.n), m.n};
#define RESET() memcpy(t.b, m.b, m.n)
  /* newer major: refused before the CRC is looked at */
  RESET();
  ck_put16(t.b + 8, 2);
  FAILS(open_img(&t, "p.crn"), CAIRN_E_UNSUPPORTED);
  cr_assert(strstr(cairn_errmsg(), "2.0") && strstr(cairn_errmsg(), "newer"), "%s", cairn_errmsg());
  fix_super(&t);
  FAILS(open_img(&t, "p.crn"), CAIRN_E_UNSUPPORTED);
  /* major 0 */
  RESET();
  ck_put16(t.b + 8, 0);
  fix_super(&t);
  FAILS(open_img(&t, "p.crn"), CAIRN_E_FORMAT);
  /* newer minor, same in the footer: read normally */
  RESET();
  ck_put16(t.b + 10, 7);
  fix_super(&t);
  ck_put16(t.b + t.n - 64 + 6, 7);
  fix_footer(&t);
  OK(open_img(&t, "p.crn"));
  cairn_ckpt *c;
  OK(cairn_ckpt_open(P("p.crn"), NULL, &c));
  int major, minor;
  cairn_ckpt_version(c, &major, &minor);
  cr_assert(major == 1 && minor == 7);
  OK(cairn_ckpt_verify(c));
  cairn_ckpt_close(c);
  /* minor disagreeing between superblock and footer */
  RESET();
  ck_put16(t.b + 10, 7);
  fix_super(&t);
  FAILS(open_img(&t, "p.crn"), CAIRN_E_FORMAT);
  /* unknown required feature bit */
  RESET();
  ck_put32(t.b + 16, 1u << 5);
  fix_super(&t);
  FAILS(open_img(&t, "p.crn"), CAIRN_E_UNSUPPORTED);
  cr_assert(strstr(cairn_errmsg(), "0x20") && strstr(cairn_errmsg(), "features"), "%s", cairn_errmsg());
  /* unknown optional feature bit: ignored */
  RESET();
  ck_put32(t.b + 20, 1u << 9);
  fix_super(&t);
  OK(open_img(&t, "p.crn"));
  /* reserved superblock bytes */
  RESET();
  t.b[50] = 1;
  fix_super(&t);
  FAILS(open_img(&t, "p.crn"), CAIRN_E_FORMAT);
  cr_assert(strstr(cairn_errmsg(), "reserved"), "%s", cairn_errmsg());
  /* byte-order mark of a big-endian file; a garbage one */
  RESET();
  ck_put32(t.b + 12, 0x04030201u);
  fix_super(&t);
  FAILS(open_img(&t, "p.crn"), CAIRN_E_UNSUPPORTED);
  RESET();
  ck_put32(t.b + 12, 0x01020305u);
  fix_super(&t);
  FAILS(open_img(&t, "p.crn"), CAIRN_E_FORMAT);
  /* alignment and chunk size */
  RESET();
  ck_put32(t.b + 24, 48);
  fix_super(&t);
  FAILS(open_img(&t, "p.crn"), CAIRN_E_FORMAT);
  RESET();
  ck_put32(t.b + 28, 1020);
  fix_super(&t);
  FAILS(open_img(&t, "p.crn"), CAIRN_E_FORMAT);
  /* footer: reserved flag, missing complete flag, another file's id, bad sizes */
  RESET();
  ck_put32(t.b + t.n - 64 + 40, 3);
  fix_footer(&t);
  FAILS(open_img(&t, "p.crn"), CAIRN_E_FORMAT);
  RESET();
  ck_put32(t.b + t.n - 64 + 40, 0);
  fix_footer(&t);
  FAILS(open_img(&t, "p.crn"), CAIRN_E_TRUNCATED);
  RESET();
  t.b[t.n - 64 + 44] ^= 1;
  fix_footer(&t);
  FAILS(open_img(&t, "p.crn"), CAIRN_E_FORMAT);
  RESET();
  ck_put64(t.b + t.n - 64 + 24, ck_get64(t.b + t.n - 64 + 24) + 1);
  fix_footer(&t);
  FAILS(open_img(&t, "p.crn"), CAIRN_E_FORMAT);
  RESET();
  ck_put64(t.b + t.n - 64 + 8, UINT64_MAX - 10);
  fix_footer(&t);
  FAILS(open_img(&t, "p.crn"), CAIRN_E_FORMAT);
  /* index: reserved byte, huge count, unknown dtype, bad chunk codec, shape/size mismatch */
  size_t ix = index_at(&m), e0 = ix + 16;
  RESET();
  t.b[ix + 5] = 1;
  fix_index(&t);
  FAILS(open_img(&t, "p.crn"), CAIRN_E_FORMAT);
  RESET();
  t.b[e0 + 5] = 1;
  fix_index(&t);
  FAILS(open_img(&t, "p.crn"), CAIRN_E_FORMAT);
  RESET();
  ck_put64(t.b + ix + 8, UINT64_MAX);
  fix_index(&t);
  FAILS(open_img(&t, "p.crn"), CAIRN_E_FORMAT);
  RESET();
  t.b[e0 + 2] = 14;
  fix_index(&t);
  FAILS(open_img(&t, "p.crn"), CAIRN_E_FORMAT);
  RESET();
  ck_put64(t.b + e0 + 56, 4); /* a is (3, 4): now (4, 4), raw size no longer matches */
  fix_index(&t);
  FAILS(open_img(&t, "p.crn"), CAIRN_E_FORMAT);
  RESET();
  t.b[e0 + 56 + 16 + 1] = 4; /* chunk codec of a's only chunk (after shape and name "a"): 4 is not defined */
  fix_index(&t);
  FAILS(open_img(&t, "p.crn"), CAIRN_E_FORMAT);
  RESET();
  ck_put64(t.b + e0 + 16, 65); /* record offset */
  fix_index(&t);
  FAILS(open_img(&t, "p.crn"), CAIRN_E_FORMAT);
  /* metadata: wrong block size, a bool of 2 */
  RESET();
  ck_put64(t.b + meta_at(&m) + 8, 21);
  fix_meta(&t);
  FAILS(open_img(&t, "p.crn"), CAIRN_E_FORMAT);
  /* the untouched file still opens */
  RESET();
  OK(open_img(&t, "p.crn"));
#undef RESET
  free(t.b);
  free(m.b);
}

Test(read, metadata_crafted) {
  cairn_ckpt_writer *w;
  OK(cairn_ckpt_writer_open(P("m.crn"), &(cairn_ckpt_write_options){.no_fsync = 1}, &w));
  OK(cairn_ckpt_writer_meta_bool(w, "a", 1));
  OK(cairn_ckpt_writer_meta_bool(w, "b", 0));
  OK(cairn_ckpt_writer_commit(w));
  img m = load(P("m.crn"));
  size_t at = meta_at(&m);
  /* entries: [type 4][len 1]['a'][1] [type 4][len 1]['b'][0] */
  cr_assert_eq(m.b[at + 16], CAIRN_META_BOOL);
  m.b[at + 19] = 2; /* bool 2 */
  fix_meta(&m);
  FAILS(open_img(&m, "p.crn"), CAIRN_E_FORMAT);
  m.b[at + 19] = 1;
  m.b[at + 22] = 'a'; /* duplicate key */
  fix_meta(&m);
  FAILS(open_img(&m, "p.crn"), CAIRN_E_FORMAT);
  m.b[at + 22] = 'B'; /* bad charset */
  fix_meta(&m);
  FAILS(open_img(&m, "p.crn"), CAIRN_E_FORMAT);
  m.b[at + 22] = 'b';
  m.b[at + 16] = 9; /* unknown type */
  fix_meta(&m);
  FAILS(open_img(&m, "p.crn"), CAIRN_E_FORMAT);
  m.b[at + 16] = CAIRN_META_BOOL;
  ck_put32(m.b + at + 4, 100000); /* count */
  fix_meta(&m);
  FAILS(open_img(&m, "p.crn"), CAIRN_E_FORMAT);
  ck_put32(m.b + at + 4, 2);
  fix_meta(&m);
  OK(open_img(&m, "p.crn"));
  free(m.b);
}

/* ---- the damage tests ------------------------------------------------------------------ */

TestSuite(damage, .init = setup, .fini = teardown, .timeout = 60);

/* A small checkpoint with every kind of record: LZ4 chunk, raw chunks,
 * raw-layout payload, scalar, empty tensor, metadata. */
#define N_SMALL 5
static const char *small_names[N_SMALL] = {"sparse", "noise", "blob", "scalar", "empty"};
static cairn_tensor *small_src[N_SMALL];

static void write_small(const char *path, cairn_ckpt_compress mode) {
  rng = 77;
  small_src[0] = tnew(CAIRN_DTYPE_F32, 2, (int64_t[]){8, 10});
  for (int i = 0; i < 80; i++) ((float *)small_src[0]->data)[i] = i % 9 ? 0.0f : (float)i;
  small_src[1] = tnew(CAIRN_DTYPE_I32, 1, (int64_t[]){90});
  fill_random(small_src[1]->data, 360);
  small_src[2] = tnew(CAIRN_DTYPE_U8, 2, (int64_t[]){10, 40});
  fill_random(small_src[2]->data, 400);
  small_src[3] = tnew(CAIRN_DTYPE_F64, 0, NULL);
  *(double *)small_src[3]->data = 6.5;
  small_src[4] = tnew(CAIRN_DTYPE_I16, 2, (int64_t[]){0, 4});
  cairn_ckpt_write_options o = {.chunk_bytes = 256, .alignment = 64, .raw_layout_min_bytes = 400, .compress = mode,
                                .no_fsync = 1};
  cairn_ckpt_writer *w;
  OK(cairn_ckpt_writer_open(path, &o, &w));
  for (int i = 0; i < N_SMALL; i++) OK(cairn_ckpt_writer_add(w, small_names[i], small_src[i]));
  OK(cairn_ckpt_writer_meta_u64(w, "train.global_step", 99));
  OK(cairn_ckpt_writer_meta_str(w, "note", "small"));
  OK(cairn_ckpt_writer_commit(w));
}

static void free_small(void) {
  for (int i = 0; i < N_SMALL; i++) cairn_tensor_free(small_src[i]);
}

/* Record extents by walking the file's structure: [start, end) for each seq. */
typedef struct extent {
  size_t start, end;
} extent;

static int walk_records(const img *m, extent *ex, int max) {
  size_t pos = 64, data_end = meta_at(m);
  uint32_t align = ck_get32(m->b + 24);
  int n = 0;
  while (pos < data_end && n < max) {
    const unsigned char *h = m->b + pos;
    cr_assert(memcmp(h, "CRNT", 4) == 0);
    size_t rank = h[27], nlen = ck_get16(h + 24), size = 52 + 8 * rank + nlen, p = pos + size;
    uint32_t nch = ck_get32(h + 32);
    if (h[28] == 1) {
      p = (p + align - 1) / align * align + ck_get64(h + 40);
    } else {
      for (uint32_t k = 0; k < nch; k++) p += 32 + ck_get32(m->b + p + 20);
    }
    p += 24;
    ex[n].start = pos;
    ex[n].end = p;
    n++;
    pos = p;
  }
  cr_assert_eq(pos, data_end);
  return n;
}

/* Opens a recovered file and checks every tensor it holds against the
 * originals; returns how many it holds. */
static size_t check_recovered(const char *path, int want_meta) {
  cairn_ckpt *c;
  OK(cairn_ckpt_open(path, NULL, &c));
  OK(cairn_ckpt_verify(c));
  size_t n = cairn_ckpt_count(c);
  for (size_t i = 0; i < n; i++) {
    cairn_ckpt_entry e;
    OK(cairn_ckpt_entry_at(c, i, &e));
    int k = -1;
    for (int j = 0; j < N_SMALL; j++)
      if (strcmp(e.name, small_names[j]) == 0) k = j;
    cr_assert_geq(k, 0, "recovered an unknown tensor '%s'", e.name);
    cairn_tensor *t = read_new(c, e.name);
    cr_assert(same_tensor(t, small_src[k]), "recovered '%s' with wrong values", e.name);
    cairn_tensor_free(t);
  }
  if (want_meta >= 0) {
    uint64_t step;
    cr_assert_eq(cairn_ckpt_meta_u64(c, "train.global_step", &step) == CAIRN_OK, want_meta);
    if (want_meta) cr_assert_eq(step, 99);
  }
  cairn_ckpt_close(c);
  return n;
}

Test(damage, truncation_at_every_byte) {
  write_small(P("s.crn"), CAIRN_CKPT_COMPRESS_AUTO);
  img m = load(P("s.crn"));
  extent ex[N_SMALL];
  cr_assert_eq(walk_records(&m, ex, N_SMALL), N_SMALL);
  cr_log_info("small checkpoint: %zu bytes", m.n);
  /* sanity of the fixture: it has an LZ4 chunk, raw chunks and a raw layout */
  cairn_ckpt *c;
  OK(cairn_ckpt_open(P("s.crn"), NULL, &c));
  cairn_ckpt_entry e;
  OK(cairn_ckpt_find(c, "sparse", &e));
  cr_assert_lt(e.stored_bytes, e.raw_bytes);
  OK(cairn_ckpt_find(c, "noise", &e));
  cr_assert_eq(e.n_chunks, 2);
  OK(cairn_ckpt_find(c, "blob", &e));
  cr_assert_eq(e.n_chunks, 0);
  cairn_ckpt_close(c);
  size_t meta_end = meta_at(&m) + (size_t)ck_get64(m.b + m.n - 64 + 16);
  /* Shrinking one file (instead of rewriting it) keeps this test cheap. */
  spit(P("cut.crn"), m.b, m.n);
  for (size_t len = m.n; len-- > 0;) {
    cr_assert_eq(truncate(P("cut.crn"), (off_t)len), 0);
    cairn_status s = cairn_ckpt_open(P("cut.crn"), NULL, &c);
    cr_assert(s == CAIRN_E_TRUNCATED || s == CAIRN_E_FORMAT, "prefix of %zu bytes: open says %s (%s)", len,
              cairn_status_str(s), cairn_errmsg());
    cr_assert_null(c);
    unlink(P("out.crn"));
    size_t rec = 99, lost = 99;
    s = cairn_ckpt_recover(P("cut.crn"), P("out.crn"), &rec, &lost);
    if (len < 64) {
      cr_assert(s == CAIRN_E_TRUNCATED || s == CAIRN_E_FORMAT, "prefix %zu: recover says %s", len,
                cairn_status_str(s));
      cr_assert_eq(access(P("out.crn"), F_OK), -1, "no output on failure");
      continue;
    }
    cr_assert_eq(s, CAIRN_OK, "prefix %zu: recover says %s (%s)", len, cairn_status_str(s), cairn_errmsg());
    size_t complete = 0, partial = 0;
    for (int i = 0; i < N_SMALL; i++) {
      complete += ex[i].end <= len;
      partial += ex[i].start < len && len < ex[i].end && len - ex[i].start >= 4;
    }
    cr_assert_eq(rec, complete, "prefix %zu: recovered %zu, %zu records are complete", len, rec, complete);
    cr_assert_eq(lost, partial, "prefix %zu: lost %zu, expected %zu", len, lost, partial);
    cr_assert_eq(check_recovered(P("out.crn"), len >= meta_end), complete);
  }
  cr_assert_eq(any_tmp_file(g_dir), 0);
  free(m.b);
  free_small();
}

static void every_bit_flip(const char *file, int with_recover) {
  img m = load(file);
  size_t undetected = 0;
  /* One file, each bit flipped in place and restored (cheap on any fs). */
  spit(P("flip.crn"), m.b, m.n);
  int fd = open(P("flip.crn"), O_WRONLY);
  cr_assert(fd >= 0);
  for (size_t bit = 0; bit < m.n * 8; bit++) {
    unsigned char flipped = m.b[bit / 8] ^ (unsigned char)(1u << (bit % 8));
    cr_assert_eq(pwrite(fd, &flipped, 1, (off_t)(bit / 8)), 1);
    if (bit % 8 == 0 && bit) cr_assert_eq(pwrite(fd, &m.b[bit / 8 - 1], 1, (off_t)(bit / 8 - 1)), 1);
    cairn_ckpt *c;
    cairn_status s = cairn_ckpt_open(P("flip.crn"), NULL, &c);
    if (s == CAIRN_OK) {
      /* whatever open accepts, read never returns other values silently */
      for (size_t i = 0; i < cairn_ckpt_count(c); i++) {
        cairn_ckpt_entry e;
        OK(cairn_ckpt_entry_at(c, i, &e));
        cairn_tensor *r = tnew(e.dtype, e.rank, e.shape);
        if (cairn_ckpt_read(c, e.name, r) == CAIRN_OK && small_src[0]) {
          for (int j = 0; j < N_SMALL; j++)
            if (strcmp(e.name, small_names[j]) == 0)
              cr_assert(same_tensor(r, small_src[j]), "bit %zu: '%s' read with other values", bit, e.name);
        }
        cairn_tensor_free(r);
      }
      s = cairn_ckpt_verify(c);
      cairn_ckpt_close(c);
    }
    if (s == CAIRN_OK) {
      undetected++;
      cr_log_error("bit %zu (byte %zu) flipped: not detected", bit, bit / 8);
    }
    if (with_recover && bit % 13 == 0) {
      unlink(P("out.crn"));
      size_t rec, lost;
      if (cairn_ckpt_recover(P("flip.crn"), P("out.crn"), &rec, &lost) == CAIRN_OK) {
        cr_assert_leq(rec + lost, N_SMALL + 1);
        check_recovered(P("out.crn"), -1);
      }
    }
  }
  close(fd);
  cr_assert_eq(undetected, 0, "%zu of %zu single-bit flips went undetected", undetected, m.n * 8);
  free(m.b);
}

Test(damage, every_single_bit_flip_detected) {
  write_small(P("s.crn"), CAIRN_CKPT_COMPRESS_AUTO);
  every_bit_flip(P("s.crn"), 1);
  free_small();
}

Test(damage, every_single_bit_flip_detected_shuffle) {
  write_small(P("s.crn"), CAIRN_CKPT_COMPRESS_SHUFFLE);
  every_bit_flip(P("s.crn"), 0);
  free_small();
}

Test(damage, every_single_bit_flip_detected_compact) {
  write_small(P("s.crn"), CAIRN_CKPT_COMPRESS_COMPACT);
  img m = load(P("s.crn"));
  cr_assert_eq(ck_get32(m.b + 16), 0x1, "the small file has codec-3 chunks");
  free(m.b);
  every_bit_flip(P("s.crn"), 1);
  free_small();
}

/* ---- salvage ------------------------------------------------------------------------------ */

TestSuite(recover, .init = setup, .fini = teardown, .timeout = 30);

Test(recover, complete_file_is_copied) {
  write_small(P("s.crn"), CAIRN_CKPT_COMPRESS_AUTO);
  size_t rec, lost;
  OK(cairn_ckpt_recover(P("s.crn"), P("copy.crn"), &rec, &lost));
  cr_assert_eq(rec, N_SMALL);
  cr_assert_eq(lost, 0);
  cr_assert_eq(check_recovered(P("copy.crn"), 1), N_SMALL);
  /* stored sizes are kept: chunks are copied, not recompressed */
  cairn_ckpt *a, *b;
  OK(cairn_ckpt_open(P("s.crn"), NULL, &a));
  OK(cairn_ckpt_open(P("copy.crn"), NULL, &b));
  for (int i = 0; i < N_SMALL; i++) {
    cairn_ckpt_entry x, y;
    OK(cairn_ckpt_find(a, small_names[i], &x));
    OK(cairn_ckpt_find(b, small_names[i], &y));
    cr_assert_eq(x.stored_bytes, y.stored_bytes);
    cr_assert_eq(x.n_chunks, y.n_chunks);
    cr_assert_eq(x.raw_crc32c, y.raw_crc32c);
  }
  cairn_ckpt_close(a);
  cairn_ckpt_close(b);
  /* in place */
  OK(cairn_ckpt_recover(P("copy.crn"), P("copy.crn"), &rec, &lost));
  cr_assert_eq(rec, N_SMALL);
  cr_assert_eq(count_files(g_dir), 2);
  free_small();
}

/* Salvage copies codec-3 chunks as stored: the copy must keep the feature
 * bit that tells an older reader it cannot read them. */
Test(recover, compact_file_keeps_its_feature_bit) {
  write_small(P("s.crn"), CAIRN_CKPT_COMPRESS_COMPACT);
  size_t rec, lost;
  OK(cairn_ckpt_recover(P("s.crn"), P("copy.crn"), &rec, &lost));
  cr_assert_eq(rec, N_SMALL);
  cr_assert_eq(lost, 0);
  cr_assert_eq(check_recovered(P("copy.crn"), 1), N_SMALL);
  img m = load(P("copy.crn"));
  cr_assert_eq(ck_get32(m.b + 16), 0x1);
  cr_assert_eq(ck_get16(m.b + 10), 1);
  free(m.b);
  free_small();
}

Test(recover, corrupt_chunk_loses_only_that_tensor) {
  write_small(P("s.crn"), CAIRN_CKPT_COMPRESS_AUTO);
  img m = load(P("s.crn"));
  long at = find_bytes(m.b, m.n, (unsigned char *)small_src[1]->data + 100, 16);
  cr_assert_gt(at, 0);
  m.b[at] ^= 1;
  spit(P("bad.crn"), m.b, m.n);
  size_t rec, lost;
  OK(cairn_ckpt_recover(P("bad.crn"), P("out.crn"), &rec, &lost));
  cr_assert_eq(rec, N_SMALL - 1);
  cr_assert_eq(lost, 1);
  cr_assert_eq(check_recovered(P("out.crn"), 1), N_SMALL - 1);
  cairn_ckpt *c;
  OK(cairn_ckpt_open(P("out.crn"), NULL, &c));
  cairn_ckpt_entry e;
  FAILS(cairn_ckpt_find(c, "noise", &e), CAIRN_E_NOT_FOUND);
  cairn_ckpt_close(c);
  free(m.b);
  free_small();
}

Test(recover, broken_header_resyncs_to_next_record) {
  write_small(P("s.crn"), CAIRN_CKPT_COMPRESS_AUTO);
  img m = load(P("s.crn"));
  extent ex[N_SMALL];
  walk_records(&m, ex, N_SMALL);
  /* break the record header of "noise" (seq 1) and the chunk header of
   * "sparse" (seq 0): the walk has to search for the next record twice */
  const unsigned char *h0 = m.b + ex[0].start;
  size_t h0size = 52 + 8u * h0[27] + ck_get16(h0 + 24);
  m.b[ex[1].start + 30] ^= 0xff;
  m.b[ex[0].start + h0size + 20] ^= 0x01;
  spit(P("bad.crn"), m.b, m.n - 100); /* and cut the footer off */
  size_t rec, lost;
  OK(cairn_ckpt_recover(P("bad.crn"), P("out.crn"), &rec, &lost));
  cr_assert_eq(rec, 3);
  cr_assert_eq(lost, 2);
  cr_assert_eq(check_recovered(P("out.crn"), 1), 3);
  free(m.b);
  free_small();
}

/* A complete file whose index is damaged: open refuses it, salvage gets
 * everything back from the records. */
Test(recover, damaged_index_of_complete_file) {
  write_small(P("s.crn"), CAIRN_CKPT_COMPRESS_AUTO);
  img m = load(P("s.crn"));
  m.b[index_at(&m) + 30] ^= 0x40;
  spit(P("bad.crn"), m.b, m.n);
  cairn_ckpt *c;
  FAILS(cairn_ckpt_open(P("bad.crn"), NULL, &c), CAIRN_E_CORRUPT);
  cr_assert(strstr(cairn_errmsg(), "index checksum"), "%s", cairn_errmsg());
  size_t rec, lost;
  OK(cairn_ckpt_recover(P("bad.crn"), P("out.crn"), &rec, &lost));
  cr_assert_eq(rec, N_SMALL);
  cr_assert_eq(lost, 0);
  cr_assert_eq(check_recovered(P("out.crn"), 1), N_SMALL);
  free(m.b);
  free_small();
}

Test(recover, not_a_checkpoint) {
  spit(P("text"), "this is plainly not a checkpoint, but it is longer than sixty-four bytes........\n", 82);
  size_t rec = 5, lost = 5;
  FAILS(cairn_ckpt_recover(P("text"), P("out.crn"), &rec, &lost), CAIRN_E_FORMAT);
  cr_assert(rec == 0 && lost == 0);
  cr_assert_eq(access(P("out.crn"), F_OK), -1);
  FAILS(cairn_ckpt_recover(P("missing"), P("out.crn"), &rec, &lost), CAIRN_E_IO);
  FAILS(cairn_ckpt_recover(NULL, P("out.crn"), &rec, &lost), CAIRN_E_NULL);
}

/* ---- writer errors and atomicity ------------------------------------------------------------- */

TestSuite(writer, .init = setup, .fini = teardown, .timeout = 30);

Test(writer, duplicate_and_bad_names) {
  cairn_ckpt_writer *w;
  OK(cairn_ckpt_writer_open(P("w.crn"), &(cairn_ckpt_write_options){.no_fsync = 1}, &w));
  cairn_tensor *t = tnew(CAIRN_DTYPE_F32, 1, (int64_t[]){2});
  OK(cairn_ckpt_writer_add(w, "x", t));
  FAILS(cairn_ckpt_writer_add(w, "x", t), CAIRN_E_EXISTS);
  cr_assert(strstr(cairn_errmsg(), "'x'"), "%s", cairn_errmsg());
  FAILS(cairn_ckpt_writer_add(w, "", t), CAIRN_E_INVALID);
  FAILS(cairn_ckpt_writer_add(w, "a\nb", t), CAIRN_E_INVALID);
  FAILS(cairn_ckpt_writer_add(w, "tab\t", t), CAIRN_E_INVALID);
  FAILS(cairn_ckpt_writer_add(w, "del\x7f", t), CAIRN_E_INVALID);
  FAILS(cairn_ckpt_writer_add(w, "c1\xc2\x85", t), CAIRN_E_INVALID); /* U+0085 */
  FAILS(cairn_ckpt_writer_add(w, "bad\xff", t), CAIRN_E_INVALID);
  FAILS(cairn_ckpt_writer_add(w, "overlong\xc0\xaf", t), CAIRN_E_INVALID);
  FAILS(cairn_ckpt_writer_add(w, "surrogate\xed\xa0\x80", t), CAIRN_E_INVALID);
  FAILS(cairn_ckpt_writer_add(w, "cut\xe2\x82", t), CAIRN_E_INVALID);
  FAILS(cairn_ckpt_writer_add(w, NULL, t), CAIRN_E_NULL);
  char name[1100];
  memset(name, 'n', 1025);
  name[1025] = '\0';
  FAILS(cairn_ckpt_writer_add(w, name, t), CAIRN_E_INVALID);
  name[1024] = '\0';
  OK(cairn_ckpt_writer_add(w, name, t));
  OK(cairn_ckpt_writer_add(w, "\xe2\x82\xac/\xf0\x9f\x98\x80 ok", t));
  /* bad tensors */
  FAILS(cairn_ckpt_writer_add(w, "null", NULL), CAIRN_E_NULL);
  cairn_tensor bad = *t;
  bad.dtype = (cairn_dtype)99;
  FAILS(cairn_ckpt_writer_add(w, "dtype", &bad), CAIRN_E_INVALID);
  bad = *t;
  bad.rank = 9;
  FAILS(cairn_ckpt_writer_add(w, "rank", &bad), CAIRN_E_INVALID);
  bad = *t;
  bad.shape[0] = -1;
  FAILS(cairn_ckpt_writer_add(w, "neg", &bad), CAIRN_E_INVALID);
  bad = *t;
  bad.data = NULL;
  FAILS(cairn_ckpt_writer_add(w, "nodata", &bad), CAIRN_E_NULL);
  /* none of these broke the writer */
  OK(cairn_ckpt_writer_commit(w));
  cairn_ckpt *c;
  OK(cairn_ckpt_open(P("w.crn"), NULL, &c));
  cr_assert_eq(cairn_ckpt_count(c), 3);
  cairn_ckpt_entry e;
  OK(cairn_ckpt_find(c, name, &e));
  OK(cairn_ckpt_verify(c));
  cairn_ckpt_close(c);
  cairn_tensor_free(t);
}

Test(writer, bad_options_and_arguments) {
  cairn_ckpt_writer *w = (cairn_ckpt_writer *)1;
  FAILS(cairn_ckpt_writer_open(P("w.crn"), &(cairn_ckpt_write_options){.chunk_bytes = 100}, &w), CAIRN_E_INVALID);
  cr_assert_null(w);
  FAILS(cairn_ckpt_writer_open(P("w.crn"), &(cairn_ckpt_write_options){.chunk_bytes = 32}, &w), CAIRN_E_INVALID);
  FAILS(cairn_ckpt_writer_open(P("w.crn"), &(cairn_ckpt_write_options){.chunk_bytes = 128u << 20}, &w),
        CAIRN_E_INVALID);
  FAILS(cairn_ckpt_writer_open(P("w.crn"), &(cairn_ckpt_write_options){.alignment = 3}, &w), CAIRN_E_INVALID);
  FAILS(cairn_ckpt_writer_open(P("w.crn"), &(cairn_ckpt_write_options){.alignment = 2u << 20}, &w), CAIRN_E_INVALID);
  FAILS(cairn_ckpt_writer_open(P("w.crn"), &(cairn_ckpt_write_options){.compress = (cairn_ckpt_compress)7}, &w),
        CAIRN_E_INVALID);
  FAILS(cairn_ckpt_writer_open(NULL, NULL, &w), CAIRN_E_NULL);
  FAILS(cairn_ckpt_writer_open(P("w.crn"), NULL, NULL), CAIRN_E_NULL);
  FAILS(cairn_ckpt_writer_commit(NULL), CAIRN_E_NULL);
  cairn_ckpt_writer_abort(NULL);
  cr_assert_eq(count_files(g_dir), 0, "no file left by refused opens");
}

Test(writer, directory_missing) {
  cairn_ckpt_writer *w;
  FAILS(cairn_ckpt_writer_open(P("no/such/dir/w.crn"), NULL, &w), CAIRN_E_IO);
  cr_assert(strstr(cairn_errmsg(), "no/such/dir/w.crn") && strstr(cairn_errmsg(), "No such file or directory"), "%s",
            cairn_errmsg());
  cr_assert_null(w);
}

Test(writer, temp_file_then_rename) {
  cairn_ckpt_writer *w;
  mode_t old = umask(022);
  OK(cairn_ckpt_writer_open(P("w.crn"), NULL, &w));
  cairn_tensor *t = tnew(CAIRN_DTYPE_F32, 1, (int64_t[]){1000});
  OK(cairn_ckpt_writer_add(w, "t", t));
  /* only "<path>.tmp.XXXXXX" exists until commit */
  DIR *d = opendir(g_dir);
  struct dirent *de;
  int tmp = 0;
  while ((de = readdir(d))) {
    if (de->d_name[0] == '.') continue;
    cr_assert_eq(strncmp(de->d_name, "w.crn.tmp.", 10), 0, "unexpected %s", de->d_name);
    cr_assert_eq(strlen(de->d_name), 16);
    tmp++;
  }
  closedir(d);
  cr_assert_eq(tmp, 1);
  cr_assert_eq(access(P("w.crn"), F_OK), -1);
  OK(cairn_ckpt_writer_commit(w));
  cr_assert_eq(count_files(g_dir), 1);
  struct stat st;
  cr_assert_eq(stat(P("w.crn"), &st), 0);
  cr_assert_eq(st.st_mode & 0777, 0644, "mode %o follows the umask", st.st_mode & 0777);
  umask(old);
  cairn_tensor_free(t);
}

Test(writer, abort_removes_temp_file) {
  cairn_tensor *t = tnew(CAIRN_DTYPE_F32, 1, (int64_t[]){1000});
  write_two(P("w.crn"));
  img before = load(P("w.crn"));
  cairn_ckpt_writer *w;
  OK(cairn_ckpt_writer_open(P("w.crn"), NULL, &w));
  OK(cairn_ckpt_writer_add(w, "t", t));
  cr_assert_eq(count_files(g_dir), 2);
  cairn_ckpt_writer_abort(w);
  cr_assert_eq(count_files(g_dir), 1);
  img after = load(P("w.crn"));
  cr_assert(before.n == after.n && memcmp(before.b, after.b, before.n) == 0, "previous checkpoint untouched");
  free(before.b);
  free(after.b);
  cairn_tensor_free(t);
}

/* A write that fails (file size limit: EFBIG) leaves the previous file. */
Test(writer, failed_write_keeps_previous_file) {
  write_two(P("w.crn"));
  img before = load(P("w.crn"));
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit old, rl;
  cr_assert_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
  rl = old;
  rl.rlim_cur = 300000;
  cr_assert_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
  cairn_tensor *t = tnew(CAIRN_DTYPE_F32, 1, (int64_t[]){250000});
  fill_random(t->data, 1000000);
  cairn_ckpt_writer *w;
  OK(cairn_ckpt_writer_open(P("w.crn"), &(cairn_ckpt_write_options){.chunk_bytes = 65536}, &w));
  OK(cairn_ckpt_writer_meta_u64(w, "k", 1));
  cairn_status s = cairn_ckpt_writer_add(w, "t", t);
  cr_assert_eq(s, CAIRN_E_IO, "add: %s (%s)", cairn_status_str(s), cairn_errmsg());
  cr_assert(strstr(cairn_errmsg(), "File too large") && strstr(cairn_errmsg(), "w.crn"), "%s", cairn_errmsg());
  /* the writer is failed now */
  FAILS(cairn_ckpt_writer_add(w, "u", t), CAIRN_E_STATE);
  FAILS(cairn_ckpt_writer_meta_u64(w, "k", 2), CAIRN_E_STATE);
  FAILS(cairn_ckpt_writer_commit(w), CAIRN_E_IO);
  cr_assert(strstr(cairn_errmsg(), "File too large"), "%s", cairn_errmsg());
  cr_assert_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
  cr_assert_eq(any_tmp_file(g_dir), 0, "temporary file removed");
  img after = load(P("w.crn"));
  cr_assert(before.n == after.n && memcmp(before.b, after.b, before.n) == 0, "previous checkpoint untouched");
  cairn_ckpt *c;
  OK(cairn_ckpt_open(P("w.crn"), NULL, &c));
  OK(cairn_ckpt_verify(c));
  cairn_ckpt_close(c);
  free(before.b);
  free(after.b);
  cairn_tensor_free(t);
}

/* The same limit hit during commit (index and footer). */
Test(writer, failed_commit_keeps_previous_file) {
  write_two(P("w.crn"));
  img before = load(P("w.crn"));
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit old, rl;
  cr_assert_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
  cairn_ckpt_writer *w;
  OK(cairn_ckpt_writer_open(P("w.crn"), &(cairn_ckpt_write_options){.chunk_bytes = 4096}, &w));
  cairn_tensor *t = tnew(CAIRN_DTYPE_U8, 1, (int64_t[]){100000});
  fill_random(t->data, 100000);
  OK(cairn_ckpt_writer_add(w, "t", t));
  rl = old;
  rl.rlim_cur = 101200; /* the data region ends at 100949, the index at 101454 */
  cr_assert_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
  FAILS(cairn_ckpt_writer_commit(w), CAIRN_E_IO);
  cr_assert_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
  cr_assert_eq(any_tmp_file(g_dir), 0);
  img after = load(P("w.crn"));
  cr_assert(before.n == after.n && memcmp(before.b, after.b, before.n) == 0);
  free(before.b);
  free(after.b);
  cairn_tensor_free(t);
}

/* A real ENOSPC: a 256 KiB tmpfs mounted in a private mount namespace of
 * this test's own process (no fork). Skipped without CAP_SYS_ADMIN. */
Test(writer, enospc_on_a_full_tmpfs) {
  if (unshare(CLONE_NEWNS) != 0) cr_skip_test("no private mount namespace here: %s", strerror(errno));
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) cr_skip_test("mount --make-rprivate: %s", strerror(errno));
  cr_assert_eq(mkdir(P("tiny"), 0755), 0);
  if (mount("tmpfs", P("tiny"), "tmpfs", 0, "size=256k") != 0) cr_skip_test("mount tmpfs: %s", strerror(errno));
  write_two(P("tiny/w.crn"));
  img before = load(P("tiny/w.crn"));
  cairn_tensor *t = tnew(CAIRN_DTYPE_F32, 1, (int64_t[]){100000});
  fill_random(t->data, 400000);
  cairn_ckpt_writer *w;
  OK(cairn_ckpt_writer_open(P("tiny/w.crn"), NULL, &w));
  FAILS(cairn_ckpt_writer_add(w, "t", t), CAIRN_E_NOSPC);
  cr_assert(strstr(cairn_errmsg(), "No space left on device") && strstr(cairn_errmsg(), "w.crn"), "%s",
            cairn_errmsg());
  FAILS(cairn_ckpt_writer_commit(w), CAIRN_E_NOSPC);
  cr_assert_eq(count_files(P("tiny")), 1, "only the previous checkpoint is left");
  img after = load(P("tiny/w.crn"));
  cr_assert(before.n == after.n && memcmp(before.b, after.b, before.n) == 0, "previous checkpoint untouched");
  /* the space came back: a small checkpoint fits again */
  cairn_tensor *small = tnew(CAIRN_DTYPE_F32, 1, (int64_t[]){10});
  OK(cairn_ckpt_writer_open(P("tiny/w.crn"), NULL, &w));
  OK(cairn_ckpt_writer_add(w, "small", small));
  OK(cairn_ckpt_writer_commit(w));
  cairn_tensor_free(small);
  cr_assert_eq(umount2(P("tiny"), 0), 0);
  free(before.b);
  free(after.b);
  cairn_tensor_free(t);
}

/* ---- golden files of format v1.0 ------------------------------------------------------------- */

/* ---- piecewise tensors (begin / append / end) ------------------------------------- */

TestSuite(pieces, .init = setup, .fini = teardown, .timeout = 30);

/* Appends t's bytes in pieces of 1, 7, 8, 4093, ... bytes (a cycle of odd
 * sizes that cross every chunk boundary) as tensor `name`. */
static void append_in_pieces(cairn_ckpt_writer *w, const char *name, const cairn_tensor *t) {
  static const size_t sizes[] = {1, 7, 8, 4093, 65536, 3, 70001};
  OK(cairn_ckpt_writer_begin(w, name, t->dtype, t->rank, t->shape));
  size_t n = cairn_tensor_nbytes(t), off = 0;
  for (int k = 0; off < n; k++) {
    size_t len = sizes[k % 7] < n - off ? sizes[k % 7] : n - off;
    OK(cairn_ckpt_writer_append(w, (const unsigned char *)t->data + off, len));
    off += len;
  }
  OK(cairn_ckpt_writer_end(w));
}

Test(pieces, same_file_as_add_for_every_compress_mode) {
  const int64_t shape[2] = {300, 1000}; /* 1.2 MB of f32: 19 chunks of 64 KiB */
  cairn_tensor *t = tnew(CAIRN_DTYPE_F32, 2, shape);
  float *d = t->data;
  for (int64_t i = 0; i < 300000; i++) d[i] = i % 3 ? 0.0f : (float)((double)rnd() / 1.8446744073709552e19);
  const int64_t one = 5, zero = 0;
  cairn_tensor *small = tnew(CAIRN_DTYPE_I64, 1, &one), *empty = tnew(CAIRN_DTYPE_U8, 1, &zero);
  fill_random(small->data, 40);
  for (int mode = CAIRN_CKPT_COMPRESS_AUTO; mode <= CAIRN_CKPT_COMPRESS_COMPACT; mode++) {
    cairn_ckpt_write_options o = {.chunk_bytes = 65536, .no_fsync = 1, .compress = (cairn_ckpt_compress)mode};
    cairn_ckpt_writer *w;
    OK(cairn_ckpt_writer_open(P("pieces.crn"), &o, &w));
    append_in_pieces(w, "big", t);
    append_in_pieces(w, "small", small);
    append_in_pieces(w, "empty", empty);
    OK(cairn_ckpt_writer_add(w, "added", small)); /* the writer goes on as usual */
    OK(cairn_ckpt_writer_commit(w));
    OK(cairn_ckpt_writer_open(P("whole.crn"), &o, &w));
    OK(cairn_ckpt_writer_add(w, "big", t));
    cairn_ckpt *c, *c2;
    OK(cairn_ckpt_writer_commit(w));
    OK(cairn_ckpt_open(P("pieces.crn"), NULL, &c));
    OK(cairn_ckpt_open(P("whole.crn"), NULL, &c2));
    OK(cairn_ckpt_verify(c));
    cr_assert_eq(cairn_ckpt_count(c), 4);
    cairn_ckpt_entry e, e2;
    OK(cairn_ckpt_find(c, "big", &e));
    OK(cairn_ckpt_find(c2, "big", &e2));
    cr_assert_eq(e.n_chunks, 19, "mode %d: %u chunks", mode, e.n_chunks);
    cr_assert_eq(e.raw_crc32c, e2.raw_crc32c);
    cr_assert_eq(e.stored_bytes, e2.stored_bytes, "mode %d: the same chunks as writer_add (%llu, %llu)", mode,
                 (unsigned long long)e.stored_bytes, (unsigned long long)e2.stored_bytes);
    if (mode != CAIRN_CKPT_COMPRESS_NONE) cr_assert_lt(e.stored_bytes, e.raw_bytes, "mode %d compresses", mode);
    cairn_tensor *r = read_new(c, "big");
    cr_assert(same_tensor(r, t));
    cairn_tensor_free(r);
    r = read_new(c, "small");
    cr_assert(same_tensor(r, small));
    cairn_tensor_free(r);
    OK(cairn_ckpt_find(c, "empty", &e));
    cr_assert_eq(e.raw_bytes, 0);
    cairn_ckpt_close(c);
    cairn_ckpt_close(c2);
  }
  cairn_tensor_free(t);
  cairn_tensor_free(small);
  cairn_tensor_free(empty);
}

Test(pieces, wrong_byte_counts_name_the_tensor_and_both_sizes) {
  cairn_ckpt_write_options o = {.no_fsync = 1};
  const int64_t shape[2] = {3, 4}; /* 48 bytes of f32 */
  unsigned char buf[64] = {0};
  cairn_ckpt_writer *w;
  /* Too few bytes at end. */
  OK(cairn_ckpt_writer_open(P("short.crn"), &o, &w));
  OK(cairn_ckpt_writer_begin(w, "dense/kernel", CAIRN_DTYPE_F32, 2, shape));
  OK(cairn_ckpt_writer_append(w, buf, 40));
  FAILS(cairn_ckpt_writer_end(w), CAIRN_E_SHAPE);
  cr_assert(strstr(cairn_errmsg(), "'dense/kernel'") && strstr(cairn_errmsg(), "40 bytes") &&
                strstr(cairn_errmsg(), "need 48"),
            "%s", cairn_errmsg());
  FAILS(cairn_ckpt_writer_commit(w), CAIRN_E_SHAPE); /* the writer failed: nothing is written */
  cr_assert_eq(count_files(g_dir), 0);
  /* Too many bytes in append. */
  OK(cairn_ckpt_writer_open(P("long.crn"), &o, &w));
  OK(cairn_ckpt_writer_begin(w, "dense/kernel", CAIRN_DTYPE_F32, 2, shape));
  OK(cairn_ckpt_writer_append(w, buf, 40));
  FAILS(cairn_ckpt_writer_append(w, buf, 9), CAIRN_E_SHAPE);
  cr_assert(strstr(cairn_errmsg(), "'dense/kernel'") && strstr(cairn_errmsg(), "49 bytes") &&
                strstr(cairn_errmsg(), "48"),
            "%s", cairn_errmsg());
  FAILS(cairn_ckpt_writer_end(w), CAIRN_E_STATE);
  cairn_ckpt_writer_abort(w);
  cr_assert_eq(count_files(g_dir), 0);
}

Test(pieces, state_rules) {
  cairn_ckpt_write_options o = {.no_fsync = 1};
  const int64_t n = 4;
  cairn_tensor *t = tnew(CAIRN_DTYPE_F32, 1, &n);
  cairn_ckpt_writer *w;
  OK(cairn_ckpt_writer_open(P("state.crn"), &o, &w));
  FAILS(cairn_ckpt_writer_append(w, t->data, 4), CAIRN_E_STATE);
  FAILS(cairn_ckpt_writer_end(w), CAIRN_E_STATE);
  FAILS(cairn_ckpt_writer_begin(w, "", CAIRN_DTYPE_F32, 1, &n), CAIRN_E_INVALID); /* usable after this */
  OK(cairn_ckpt_writer_begin(w, "a", CAIRN_DTYPE_F32, 1, &n));
  FAILS(cairn_ckpt_writer_begin(w, "b", CAIRN_DTYPE_F32, 1, &n), CAIRN_E_STATE);
  FAILS(cairn_ckpt_writer_add(w, "b", t), CAIRN_E_STATE);
  OK(cairn_ckpt_writer_append(w, t->data, 16));
  OK(cairn_ckpt_writer_end(w));
  FAILS(cairn_ckpt_writer_begin(w, "a", CAIRN_DTYPE_F32, 1, &n), CAIRN_E_EXISTS);
  OK(cairn_ckpt_writer_begin(w, "c", CAIRN_DTYPE_F32, 1, &n));
  FAILS(cairn_ckpt_writer_commit(w), CAIRN_E_STATE); /* a record in progress */
  cairn_tensor_free(t);
  cr_assert_eq(any_tmp_file(g_dir), 0);
}

TestSuite(golden, .init = setup, .fini = teardown, .timeout = 30);

static const char *data_path(const char *file) {
  static char buf[PATH_MAX];
  const char *top = getenv("top_srcdir");
  if (top) {
    snprintf(buf, sizeof buf, "%s/tests/data/%s", top, file);
    if (access(buf, R_OK) == 0) return buf;
  }
  const char *me = __FILE__, *slash = strrchr(me, '/');
  if (slash)
    snprintf(buf, sizeof buf, "%.*s/data/%s", (int)(slash - me), me, file);
  else
    snprintf(buf, sizeof buf, "data/%s", file);
  return buf;
}

static cairn_ckpt *open_golden_version(const char *file, int want_minor) {
  cairn_ckpt *c;
  const char *p = data_path(file);
  cr_assert_eq(access(p, R_OK), 0, "golden file %s: %s", p, strerror(errno));
  OK(cairn_ckpt_open(p, NULL, &c));
  OK(cairn_ckpt_verify(c));
  int major, minor;
  cairn_ckpt_version(c, &major, &minor);
  cr_assert(major == 1 && minor == want_minor, "%s is %d.%d", file, major, minor);
  return c;
}

static cairn_ckpt *open_golden(const char *file) { return open_golden_version(file, 0); }

#define EXPECT(c, name, dt, rank, shp, type, ...)                                                     \
  do {                                                                                            \
    const type want_[] = {__VA_ARGS__};                                                           \
    cairn_tensor *t_ = tnew(dt, rank, shp);                                                       \
    OK(cairn_ckpt_read(c, name, t_));                                                             \
    cr_assert_eq(cairn_tensor_nbytes(t_), sizeof want_, "%s: size", name);                        \
    cr_assert(memcmp(t_->data, want_, sizeof want_) == 0, "%s: values differ", name);             \
    cairn_tensor_free(t_);                                                                        \
  } while (0)

Test(golden, v1_basic) {
  cairn_ckpt *c = open_golden("v1-basic.crn");
  cr_assert_eq(cairn_ckpt_count(c), 15);
  EXPECT(c, "dense/kernel", CAIRN_DTYPE_F32, 2, ((int64_t[]){2, 3}), float, -1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 1.5f);
  EXPECT(c, "scalar_f64", CAIRN_DTYPE_F64, 0, NULL, double, 3.25);
  EXPECT(c, "half", CAIRN_DTYPE_F16, 1, ((int64_t[]){2}), uint16_t, 0x3c00, 0x7bff);
  EXPECT(c, "brain", CAIRN_DTYPE_BF16, 1, ((int64_t[]){2}), uint16_t, 0x3f80, 0xc000);
  EXPECT(c, "ints/i8", CAIRN_DTYPE_I8, 1, ((int64_t[]){3}), int8_t, -128, 0, 127);
  EXPECT(c, "ints/i16", CAIRN_DTYPE_I16, 1, ((int64_t[]){2}), int16_t, -32768, 32767);
  EXPECT(c, "ints/i32", CAIRN_DTYPE_I32, 1, ((int64_t[]){2}), int32_t, INT32_MIN, 7);
  EXPECT(c, "global_step", CAIRN_DTYPE_I64, 0, NULL, int64_t, 1234567890123LL);
  EXPECT(c, "uints/u8", CAIRN_DTYPE_U8, 1, ((int64_t[]){4}), uint8_t, 0, 1, 254, 255);
  EXPECT(c, "uints/u16", CAIRN_DTYPE_U16, 1, ((int64_t[]){2}), uint16_t, 65535, 1);
  EXPECT(c, "uints/u32", CAIRN_DTYPE_U32, 1, ((int64_t[]){2}), uint32_t, 4294967295u, 2);
  EXPECT(c, "uints/u64", CAIRN_DTYPE_U64, 1, ((int64_t[]){2}), uint64_t, UINT64_MAX, 3);
  EXPECT(c, "mask", CAIRN_DTYPE_BOOL, 1, ((int64_t[]){3}), uint8_t, 1, 0, 1);
  EXPECT(c, "rank8", CAIRN_DTYPE_U8, 8, ((int64_t[]){1, 2, 1, 2, 1, 2, 1, 2}), uint8_t, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9,
         10, 11, 12, 13, 14, 15);
  cairn_ckpt_entry e;
  OK(cairn_ckpt_find(c, "empty", &e));
  cr_assert(e.dtype == CAIRN_DTYPE_F32 && e.rank == 2 && e.shape[0] == 0 && e.shape[1] == 5 && e.raw_bytes == 0);
  OK(cairn_ckpt_entry_at(c, 0, &e));
  cr_assert_str_eq(e.name, "brain");
  uint64_t u;
  int64_t i;
  double f;
  int b;
  const char *s;
  const void *by;
  size_t len;
  cr_assert_eq(cairn_ckpt_meta_count(c), 6);
  OK(cairn_ckpt_meta_u64(c, "train.global_step", &u));
  cr_assert_eq(u, 1234567890123ULL);
  OK(cairn_ckpt_meta_i64(c, "user.offset", &i));
  cr_assert_eq(i, -42);
  OK(cairn_ckpt_meta_f64(c, "user.lr", &f));
  cr_assert_eq(f, 0.001);
  OK(cairn_ckpt_meta_bool(c, "user.flag", &b));
  cr_assert_eq(b, 1);
  OK(cairn_ckpt_meta_str(c, "ckpt.producer", &s));
  cr_assert_str_eq(s, "cairn 0.1.0 make_golden");
  OK(cairn_ckpt_meta_bytes(c, "train.rng", &by, &len));
  cr_assert(len == 4 && memcmp(by, "\x00\x01\x02\xff", 4) == 0);
  cairn_ckpt_close(c);
}

Test(golden, v1_chunked) {
  cairn_ckpt *c = open_golden("v1-chunked.crn");
  float sparse[200];
  for (int i = 0; i < 200; i++) sparse[i] = i < 100 ? 0.0f : (float)(i * 37 % 101) - 50.0f;
  int32_t noise[40];
  uint32_t x = 12345;
  for (int i = 0; i < 40; i++) {
    x = x * 1103515245u + 12345u;
    noise[i] = (int32_t)x;
  }
  cairn_tensor *t = tnew(CAIRN_DTYPE_F32, 2, (int64_t[]){20, 10});
  OK(cairn_ckpt_read(c, "sparse", t));
  cr_assert(memcmp(t->data, sparse, sizeof sparse) == 0);
  cairn_tensor_free(t);
  t = tnew(CAIRN_DTYPE_I32, 1, (int64_t[]){40});
  OK(cairn_ckpt_read(c, "noise", t));
  cr_assert(memcmp(t->data, noise, sizeof noise) == 0);
  cairn_tensor_free(t);
  cairn_ckpt_entry e;
  OK(cairn_ckpt_find(c, "sparse", &e));
  cr_assert_eq(e.n_chunks, 7);
  cr_assert_lt(e.stored_bytes, e.raw_bytes);
  uint64_t u;
  OK(cairn_ckpt_meta_u64(c, "train.global_step", &u));
  cr_assert_eq(u, 7);
  cairn_ckpt_close(c);
}

Test(golden, v1_shuffle) {
  cairn_ckpt *c = open_golden("v1-shuffle.crn");
  int64_t v[100];
  for (int i = 0; i < 100; i++) v[i] = (int64_t)(i * i % 1000) - 500;
  cairn_tensor *t = tnew(CAIRN_DTYPE_I64, 2, (int64_t[]){10, 10});
  OK(cairn_ckpt_read(c, "counts", t));
  cr_assert(memcmp(t->data, v, sizeof v) == 0);
  cairn_ckpt_entry e;
  OK(cairn_ckpt_find(c, "counts", &e));
  cr_assert_lt(e.stored_bytes, e.raw_bytes, "the golden file holds shuffled LZ4 chunks");
  cairn_tensor_free(t);
  cairn_ckpt_close(c);
}

Test(golden, v1_raw) {
  cairn_ckpt *c = open_golden("v1-raw.crn");
  uint8_t blob[300];
  uint32_t x = 99;
  for (int i = 0; i < 300; i++) {
    x = x * 1664525u + 1013904223u;
    blob[i] = (uint8_t)(x >> 24);
  }
  EXPECT(c, "bias", CAIRN_DTYPE_F32, 1, ((int64_t[]){3}), float, 0.25f, -0.25f, 2.0f);
  cairn_tensor *t = tnew(CAIRN_DTYPE_U8, 2, (int64_t[]){15, 20});
  OK(cairn_ckpt_read(c, "blob", t));
  cr_assert(memcmp(t->data, blob, 300) == 0);
  cairn_ckpt_entry e;
  OK(cairn_ckpt_find(c, "blob", &e));
  cr_assert_eq(e.n_chunks, 0, "raw layout");
  size_t len;
  unsigned char *f = slurp(data_path("v1-raw.crn"), &len);
  cr_assert_eq(find_bytes(f, len, blob, 300) % 256, 0);
  free(f);
  cairn_tensor_free(t);
  cairn_ckpt_close(c);
}

/* Format 1.1: codec 3, required feature 0x1 (tests/data/README). */
Test(golden, v1_compact) {
  cairn_ckpt *c = open_golden_version("v1-compact.crn", 1);
  float wt[240];
  uint32_t x = 2024;
  for (int i = 0; i < 240; i++) {
    x = x * 1664525u + 1013904223u;
    wt[i] = (float)((int)(x >> 16) % 2001 - 1000) / 8192.0f;
  }
  int64_t v[100];
  for (int i = 0; i < 100; i++) v[i] = (int64_t)(i * i % 1000) - 500;
  uint8_t b[200];
  for (int i = 0; i < 200; i++) b[i] = (uint8_t)(i % 7 == 0 ? i : 0);
  cairn_tensor *t = tnew(CAIRN_DTYPE_F32, 2, (int64_t[]){24, 10});
  OK(cairn_ckpt_read(c, "dense/kernel", t));
  cr_assert(memcmp(t->data, wt, sizeof wt) == 0);
  cairn_tensor_free(t);
  t = tnew(CAIRN_DTYPE_I64, 2, (int64_t[]){10, 10});
  OK(cairn_ckpt_read(c, "counts", t));
  cr_assert(memcmp(t->data, v, sizeof v) == 0);
  cairn_tensor_free(t);
  t = tnew(CAIRN_DTYPE_U8, 1, (int64_t[]){200});
  OK(cairn_ckpt_read(c, "bytes", t));
  cr_assert(memcmp(t->data, b, sizeof b) == 0);
  cairn_tensor_free(t);
  cairn_ckpt_entry e;
  OK(cairn_ckpt_find(c, "counts", &e));
  cr_assert_lt(e.stored_bytes, e.raw_bytes, "the golden file holds codec-3 chunks");
  OK(cairn_ckpt_find(c, "bytes", &e));
  cr_assert_lt(e.stored_bytes, e.raw_bytes);
  uint64_t u;
  OK(cairn_ckpt_meta_u64(c, "train.global_step", &u));
  cr_assert_eq(u, 11);
  cairn_ckpt_close(c);
  size_t len;
  unsigned char *f = slurp(data_path("v1-compact.crn"), &len);
  cr_assert_eq(ck_get32(f + 16), 0x1, "required feature bit 0x1");
  free(f);
}

/* Golden files under damage: every flip detected, every prefix refused. */
Test(golden, damaged_golden_files_fail_cleanly) {
  const char *files[] = {"v1-chunked.crn", "v1-shuffle.crn", "v1-raw.crn", "v1-compact.crn"};
  for (int k = 0; k < 4; k++) {
    img m;
    m.b = slurp(data_path(files[k]), &m.n);
    spit(P("cut.crn"), m.b, m.n);
    for (size_t len = m.n; len-- > 0;) {
      cr_assert_eq(truncate(P("cut.crn"), (off_t)len), 0);
      cairn_ckpt *c;
      cairn_status s = cairn_ckpt_open(P("cut.crn"), NULL, &c);
      cr_assert(s == CAIRN_E_TRUNCATED || s == CAIRN_E_FORMAT, "%s cut at %zu: %s", files[k], len,
                cairn_status_str(s));
    }
    free(m.b);
  }
  small_src[0] = NULL; /* no value comparison: detection only */
  every_bit_flip(data_path("v1-chunked.crn"), 0);
  every_bit_flip(data_path("v1-compact.crn"), 0);
}

/* The library owns the writer's defaults; they are the zero-filled struct. */
Test(options, ckpt_write_default_is_zero_filled) {
  cairn_ckpt_write_options z, d = cairn_ckpt_write_options_default();
  memset(&z, 0, sizeof z);
  cr_assert(memcmp(&d, &z, sizeof z) == 0);
  cr_assert_eq(d.compress, CAIRN_CKPT_COMPRESS_AUTO);
}
