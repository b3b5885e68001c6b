/* Tests of include/cairn/interop.h: safetensors and TensorFlow tensor
 * bundles read through cairn_ckpt_open and written by the interop writers.
 * Golden byte vectors are assembled here from the published format
 * descriptions; round trips cover every dtype and ranks 0 to 8; every
 * single-bit flip of a small file is refused or shows as a difference.
 * Each test works in its own mkdtemp directory, removed by the fini. */
#define _GNU_SOURCE 1
#include <criterion/criterion.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cairn.h"
#include "rm_tree.h"

static char g_dir[PATH_MAX];

static void setup(void) {
  const char *base = getenv("TMPDIR");
  if (!base || !*base) base = "/tmp";
  snprintf(g_dir, sizeof g_dir, "%s/cairn-interop.XXXXXX", base);
  cr_assert_not_null(mkdtemp(g_dir), "mkdtemp(%s): %s", g_dir, strerror(errno));
}

static void teardown(void) {
  if (g_dir[0]) rm_tree(g_dir);
}

static const char *P(const char *name) {
  static char buf[8][PATH_MAX + 64];
  static int k;
  char *b = buf[k++ & 7];
  snprintf(b, PATH_MAX + 64, "%s/%s", g_dir, name);
  return b;
}

static void put_file(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f, "fopen %s", path);
  cr_assert_eq(fwrite(p, 1, n, f), n);
  cr_assert_eq(fclose(f), 0);
}

static unsigned char *get_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "fopen %s", path);
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *p = malloc((size_t)len + 1);
  cr_assert_eq(fread(p, 1, (size_t)len, f), (size_t)len);
  fclose(f);
  *n = (size_t)len;
  return p;
}

static const cairn_dtype all_dtypes[] = {CAIRN_DTYPE_F32, CAIRN_DTYPE_F64, CAIRN_DTYPE_F16, CAIRN_DTYPE_BF16,
                                         CAIRN_DTYPE_I8,  CAIRN_DTYPE_I16, CAIRN_DTYPE_I32, CAIRN_DTYPE_I64,
                                         CAIRN_DTYPE_U8,  CAIRN_DTYPE_U16, CAIRN_DTYPE_U32, CAIRN_DTYPE_U64,
                                         CAIRN_DTYPE_BOOL};
#define N_DT (sizeof all_dtypes / sizeof all_dtypes[0])

/* Tensors of every dtype and rank 0..8 with distinct bytes (bools 0/1). */
typedef struct set {
  size_t n;
  char names[N_DT * 9][64];
  cairn_tensor *t[N_DT * 9];
} set;

static void make_set(set *s) {
  memset(s, 0, sizeof *s);
  unsigned seed = 1;
  for (size_t d = 0; d < N_DT; d++)
    for (int r = 0; r <= 8; r++) {
      int64_t shape[8];
      for (int k = 0; k < r; k++) shape[k] = r > 4 ? 1 + (k % 2) : 2 + k;
      cairn_tensor *t;
      cr_assert_eq(cairn_tensor_new(all_dtypes[d], r, shape, &t), CAIRN_OK);
      unsigned char *p = t->data;
      size_t nb = cairn_tensor_nbytes(t);
      for (size_t i = 0; i < nb; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = all_dtypes[d] == CAIRN_DTYPE_BOOL ? (seed >> 16) & 1 : (unsigned char)(seed >> 16);
      }
      snprintf(s->names[s->n], 64, "%s/rank%d", cairn_dtype_name(all_dtypes[d]), r);
      s->t[s->n++] = t;
    }
}

static void free_set(set *s) {
  for (size_t i = 0; i < s->n; i++) cairn_tensor_free(s->t[i]);
}

/* Every tensor of s is in c with its dtype, shape and bytes, and nothing else. */
static void expect_set(cairn_ckpt *c, const set *s) {
  cr_assert_eq(cairn_ckpt_count(c), s->n);
  for (size_t i = 0; i < s->n; i++) {
    cairn_ckpt_entry e;
    cr_assert_eq(cairn_ckpt_find(c, s->names[i], &e), CAIRN_OK, "%s: %s", s->names[i], cairn_errmsg());
    cr_assert_eq(e.dtype, s->t[i]->dtype);
    cr_assert_eq(e.rank, s->t[i]->rank);
    cairn_tensor *got;
    cr_assert_eq(cairn_tensor_new(e.dtype, e.rank, e.shape, &got), CAIRN_OK);
    cr_assert_eq(cairn_ckpt_read(c, s->names[i], got), CAIRN_OK, "%s", cairn_errmsg());
    cr_assert_eq(memcmp(got->data, s->t[i]->data, cairn_tensor_nbytes(got)), 0, "%s differs", s->names[i]);
    cairn_tensor_free(got);
  }
  cr_assert_eq(cairn_ckpt_verify(c), CAIRN_OK, "%s", cairn_errmsg());
}

/* 1 if a and b hold the same tensors (names, dtypes, shapes, bytes) and metadata strings. */
static int same_content(cairn_ckpt *a, cairn_ckpt *b) {
  size_t n = cairn_ckpt_count(a);
  if (n != cairn_ckpt_count(b) || cairn_ckpt_meta_count(a) != cairn_ckpt_meta_count(b)) return 0;
  for (size_t i = 0; i < cairn_ckpt_meta_count(a); i++) {
    const char *ka, *kb, *va, *vb;
    cairn_meta_type ta, tb;
    if (cairn_ckpt_meta_at(a, i, &ka, &ta) || cairn_ckpt_meta_at(b, i, &kb, &tb) || strcmp(ka, kb) || ta != tb) return 0;
    if (ta == CAIRN_META_STR && (cairn_ckpt_meta_str(a, ka, &va) || cairn_ckpt_meta_str(b, kb, &vb) || strcmp(va, vb)))
      return 0;
  }
  for (size_t i = 0; i < n; i++) {
    cairn_ckpt_entry x, y;
    if (cairn_ckpt_entry_at(a, i, &x) || cairn_ckpt_entry_at(b, i, &y)) return 0;
    if (strcmp(x.name, y.name) || x.dtype != y.dtype || x.rank != y.rank) return 0;
    for (int d = 0; d < x.rank; d++)
      if (x.shape[d] != y.shape[d]) return 0;
    cairn_tensor *tx, *ty;
    cr_assert_eq(cairn_tensor_new(x.dtype, x.rank, x.shape, &tx), CAIRN_OK);
    cr_assert_eq(cairn_tensor_new(y.dtype, y.rank, y.shape, &ty), CAIRN_OK);
    int rx = cairn_ckpt_read(a, x.name, tx), ry = cairn_ckpt_read(b, y.name, ty);
    int same = rx == CAIRN_OK && ry == CAIRN_OK && memcmp(tx->data, ty->data, cairn_tensor_nbytes(tx)) == 0;
    cairn_tensor_free(tx);
    cairn_tensor_free(ty);
    if (!same) return 0;
  }
  return 1;
}

TestSuite(safetensors, .init = setup, .fini = teardown);

/* ---- safetensors ---------------------------------------------------------------- */

/* Assembled from the format description: u64 LE header length, the JSON
 * header, then the data; offsets relative to the data. */
static size_t golden_st(unsigned char *buf) {
  const char *hdr = "{\"__metadata__\":{\"format\":\"pt\"},"
                    "\"b\":{\"dtype\":\"I16\",\"shape\":[3],\"data_offsets\":[8,14]},"
                    "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}  ";
  size_t hl = strlen(hdr), n = 0;
  for (int i = 0; i < 8; i++) buf[n++] = (unsigned char)(hl >> (8 * i));
  memcpy(buf + n, hdr, hl);
  n += hl;
  static const unsigned char data[14] = {0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0, 1, 0, 0xfe, 0xff, 0x34, 0x12};
  memcpy(buf + n, data, sizeof data);
  return n + sizeof data;
}

Test(safetensors, golden_bytes_read) {
  unsigned char buf[512];
  size_t n = golden_st(buf);
  put_file(P("g.safetensors"), buf, n);
  cairn_ckpt *c;
  cr_assert_eq(cairn_ckpt_open(P("g.safetensors"), NULL, &c), CAIRN_OK, "%s", cairn_errmsg());
  cr_assert_str_eq(cairn_ckpt_format(c), "safetensors");
  cr_assert_eq(cairn_ckpt_count(c), 2);
  cairn_ckpt_entry e;
  cr_assert_eq(cairn_ckpt_entry_at(c, 0, &e), CAIRN_OK);
  cr_assert_str_eq(e.name, "a");
  cr_assert_eq(e.dtype, CAIRN_DTYPE_F32);
  float f[2];
  cairn_tensor tf = {.dtype = CAIRN_DTYPE_F32, .rank = 1, .shape = {2}, .data = f};
  cr_assert_eq(cairn_ckpt_read(c, "a", &tf), CAIRN_OK, "%s", cairn_errmsg());
  cr_assert(f[0] == 1.0f && f[1] == -2.0f);
  int16_t h[3];
  cairn_tensor th = {.dtype = CAIRN_DTYPE_I16, .rank = 1, .shape = {3}, .data = h};
  cr_assert_eq(cairn_ckpt_read(c, "b", &th), CAIRN_OK, "%s", cairn_errmsg());
  cr_assert(h[0] == 1 && h[1] == -2 && h[2] == 0x1234);
  const char *v;
  cr_assert_eq(cairn_ckpt_meta_str(c, "format", &v), CAIRN_OK);
  cr_assert_str_eq(v, "pt");
  cr_assert_eq(cairn_ckpt_verify(c), CAIRN_OK);
  cairn_ckpt_close(c);
}

Test(safetensors, round_trip_every_dtype_and_rank) {
  set s;
  make_set(&s);
  cairn_safetensors_writer *w;
  cr_assert_eq(cairn_safetensors_writer_open(P("r.safetensors"), &w), CAIRN_OK);
  for (size_t i = 0; i < s.n; i++) cr_assert_eq(cairn_safetensors_writer_add(w, s.names[i], s.t[i]), CAIRN_OK, "%s", cairn_errmsg());
  cr_assert_eq(cairn_safetensors_writer_meta(w, "format", "cairn"), CAIRN_OK);
  cr_assert_eq(cairn_safetensors_writer_commit(w), CAIRN_OK, "%s", cairn_errmsg());
  size_t n;
  unsigned char *raw = get_file(P("r.safetensors"), &n);
  uint64_t hl = 0;
  for (int i = 0; i < 8; i++) hl |= (uint64_t)raw[i] << (8 * i);
  cr_assert_eq((8 + hl) % 8, 0, "header padded to 8 bytes");
  cr_assert_eq(raw[8], '{');
  free(raw);
  cairn_ckpt *c;
  cr_assert_eq(cairn_ckpt_open(P("r.safetensors"), NULL, &c), CAIRN_OK, "%s", cairn_errmsg());
  expect_set(c, &s);
  const char *v;
  cr_assert_eq(cairn_ckpt_meta_str(c, "format", &v), CAIRN_OK);
  cr_assert_str_eq(v, "cairn");
  cairn_ckpt_close(c);
  free_set(&s);
}

Test(safetensors, writer_refuses_bad_names) {
  cairn_safetensors_writer *w;
  cairn_tensor *t;
  int64_t sh[1] = {2};
  cr_assert_eq(cairn_tensor_new(CAIRN_DTYPE_F32, 1, sh, &t), CAIRN_OK);
  cr_assert_eq(cairn_safetensors_writer_open(P("w.safetensors"), &w), CAIRN_OK);
  cr_assert_eq(cairn_safetensors_writer_add(w, "__metadata__", t), CAIRN_E_INVALID);
  cr_assert_eq(cairn_safetensors_writer_add(w, "", t), CAIRN_E_INVALID);
  cr_assert_eq(cairn_safetensors_writer_add(w, "x\n", t), CAIRN_E_INVALID);
  cr_assert_eq(cairn_safetensors_writer_add(w, "x", t), CAIRN_OK);
  cr_assert_eq(cairn_safetensors_writer_add(w, "x", t), CAIRN_E_EXISTS);
  cairn_safetensors_writer_abort(w);
  cr_assert_neq(access(P("w.safetensors"), F_OK), 0, "abort writes nothing");
  cairn_tensor_free(t);
}

/* A file with this header and data bytes; returns the open status and its message in msg. */
static cairn_status open_st(const char *hdr, size_t data_bytes, char *msg, size_t cap) {
  size_t hl = strlen(hdr);
  unsigned char *buf = calloc(1, 8 + hl + data_bytes);
  for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(hl >> (8 * i));
  memcpy(buf + 8, hdr, hl);
  put_file(P("bad.safetensors"), buf, 8 + hl + data_bytes);
  free(buf);
  cairn_ckpt *c = NULL;
  cairn_status s = cairn_ckpt_open(P("bad.safetensors"), NULL, &c);
  snprintf(msg, cap, "%s", cairn_errmsg());
  cairn_ckpt_close(c);
  return s;
}

Test(safetensors, bad_headers_refused_with_names) {
  char m[1024];
  cr_assert_eq(open_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                       "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, m, sizeof m),
               CAIRN_E_FORMAT);
  cr_assert(strstr(m, "contiguous") && strstr(m, "bad.safetensors"), "%s", m);
  cr_assert_eq(open_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, m, sizeof m), CAIRN_E_FORMAT);
  cr_assert(strstr(m, "'a'") && strstr(m, "hold 8 bytes"), "%s", m);
  cr_assert_eq(open_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, m, sizeof m),
               CAIRN_E_TRUNCATED);
  cr_assert(strstr(m, "past the end"), "%s", m);
  cr_assert_eq(open_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 9, m, sizeof m), CAIRN_E_FORMAT);
  cr_assert(strstr(m, "after the last tensor"), "%s", m);
  cr_assert_eq(open_st("{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2, m, sizeof m),
               CAIRN_E_UNSUPPORTED);
  cr_assert(strstr(m, "F8_E4M3"), "%s", m);
  cr_assert_eq(open_st("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                       "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}", 2, m, sizeof m),
               CAIRN_E_FORMAT);
  cr_assert(strstr(m, "duplicate"), "%s", m);
  cr_assert_eq(open_st("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1],\"x\":1}}", 1, m, sizeof m),
               CAIRN_E_FORMAT);
  cr_assert_eq(open_st("{\"a\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,1]}}", 1, m, sizeof m), CAIRN_E_FORMAT);
  cr_assert_eq(open_st("{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", 1, m, sizeof m),
               CAIRN_E_UNSUPPORTED);
  cr_assert_eq(open_st("{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,1]}}", 1, m,
                       sizeof m),
               CAIRN_E_FORMAT);
  cr_assert(strstr(m, "more than 2^64"), "%s", m);
  cr_assert_eq(open_st("{\"a\\u0001\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, m, sizeof m),
               CAIRN_E_FORMAT);
  cr_assert_eq(open_st("{\"__metadata__\":{\"k\":1}}", 0, m, sizeof m), CAIRN_E_FORMAT);
  cr_assert_eq(open_st("{\"a\":", 0, m, sizeof m), CAIRN_E_FORMAT);
  cr_assert(strstr(m, "not a JSON object"), "%s", m);
  cr_assert_eq(open_st("{\"a\":{\"dtype\":\"BOOL\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, m, sizeof m), CAIRN_OK);
}

Test(safetensors, header_length_checked_before_allocating) {
  unsigned char buf[16] = {0};
  uint64_t huge = (uint64_t)1 << 40;
  for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(huge >> (8 * i));
  buf[8] = '{';
  put_file(P("big.safetensors"), buf, sizeof buf);
  cairn_ckpt *c;
  cr_assert_eq(cairn_ckpt_open(P("big.safetensors"), NULL, &c), CAIRN_E_LIMIT);
  cr_assert(strstr(cairn_errmsg(), "exceeds the limit"), "%s", cairn_errmsg());
  cairn_ckpt_limits lim = {.max_index_bytes = (uint64_t)1 << 41};
  cr_assert_eq(cairn_ckpt_open(P("big.safetensors"), &lim, &c), CAIRN_E_TRUNCATED);
}

Test(safetensors, bool_bytes_checked) {
  char m[512];
  cr_assert_eq(open_st("{\"a\":{\"dtype\":\"BOOL\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, m, sizeof m), CAIRN_OK);
  size_t n;
  unsigned char *b = get_file(P("bad.safetensors"), &n);
  b[n - 1] = 2;
  put_file(P("bad.safetensors"), b, n);
  free(b);
  cairn_ckpt *c;
  cr_assert_eq(cairn_ckpt_open(P("bad.safetensors"), NULL, &c), CAIRN_OK);
  cr_assert_eq(cairn_ckpt_verify(c), CAIRN_E_CORRUPT);
  cr_assert(strstr(cairn_errmsg(), "neither 0 nor 1"), "%s", cairn_errmsg());
  cairn_ckpt_close(c);
}

/* Every flip either fails open/verify or changes what the file says. */
static void flip_every_bit(const char *orig, const char *flipped) {
  size_t n;
  unsigned char *b = get_file(orig, &n);
  cairn_ckpt *ref;
  cr_assert_eq(cairn_ckpt_open(orig, NULL, &ref), CAIRN_OK, "%s", cairn_errmsg());
  size_t refused = 0, differ = 0;
  for (size_t i = 0; i < n; i++)
    for (int bit = 0; bit < 8; bit++) {
      b[i] ^= (unsigned char)(1u << bit);
      put_file(flipped, b, n);
      b[i] ^= (unsigned char)(1u << bit);
      cairn_ckpt *c = NULL;
      if (cairn_ckpt_open(flipped, NULL, &c) != CAIRN_OK || cairn_ckpt_verify(c) != CAIRN_OK) {
        refused++;
      } else {
        cr_assert(!same_content(ref, c), "flip of bit %d at offset %zu went unnoticed", bit, i);
        differ++;
      }
      cairn_ckpt_close(c);
    }
  cr_assert_gt(refused, 0);
  cairn_ckpt_close(ref);
  free(b);
}

Test(safetensors, every_bit_flip_refused_or_different) {
  unsigned char buf[512];
  size_t n = golden_st(buf);
  put_file(P("f.safetensors"), buf, n);
  flip_every_bit(P("f.safetensors"), P("flipped.safetensors"));
}

Test(safetensors, cairn_files_still_cairn) {
  cairn_ckpt_writer *w;
  cairn_tensor *t;
  int64_t sh[1] = {3};
  cr_assert_eq(cairn_tensor_new(CAIRN_DTYPE_F32, 1, sh, &t), CAIRN_OK);
  cr_assert_eq(cairn_ckpt_writer_open(P("own.ckpt"), NULL, &w), CAIRN_OK);
  cr_assert_eq(cairn_ckpt_writer_add(w, "x", t), CAIRN_OK);
  cr_assert_eq(cairn_ckpt_writer_commit(w), CAIRN_OK);
  cairn_ckpt *c;
  cr_assert_eq(cairn_ckpt_open(P("own.ckpt"), NULL, &c), CAIRN_OK);
  cr_assert_str_eq(cairn_ckpt_format(c), "cairn");
  cairn_ckpt_close(c);
  cairn_tensor_free(t);
}
