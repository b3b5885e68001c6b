/* make_corpus: writes the seed corpus of tests/fuzz/fuzz_ckpt into DIR.
 *
 *   tests/fuzz/make_corpus DIR      (or: make fuzz-corpus, into the source tree)
 *
 * Tiny valid checkpoints written through the public writer — every dtype,
 * ranks 0 to 8, an empty tensor, LZ4-compressed and raw chunks, the
 * byte-shuffle filter, a raw-aligned tensor, every metadata type, a file
 * with no tensors — plus truncated and bit-flipped copies of some of them,
 * so the fuzzer starts next to every branch of the reader. The files are a
 * few KiB at most; they are committed, and regenerated only when the format
 * changes. Their bytes are not reproducible (each file has a random id).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cairn/ckpt.h>
#include <cairn/rng.h>
#include <cairn/status.h>
#include <cairn/tensor.h>

static const char *outdir;

#define DIE(what)                                                                                  \
  do {                                                                                             \
    fprintf(stderr, "make_corpus: %s: %s\n", what, cairn_errmsg());                                \
    exit(1);                                                                                       \
  } while (0)

static void path_of(char *buf, size_t len, const char *name) { snprintf(buf, len, "%s/%s", outdir, name); }

/* A tensor of dtype dt and shape filled by the rng: random bytes, or
 * mostly zeros when zero_pct > 0. */
static cairn_tensor *make(cairn_dtype dt, int rank, const int64_t *shape, uint64_t seed, int zero_pct) {
  cairn_tensor *t;
  if (cairn_tensor_new(dt, rank, shape, &t)) DIE("tensor");
  cairn_rng r;
  cairn_rng_init(&r, seed, 1);
  size_t es = cairn_dtype_size(dt), n = (size_t)t->size;
  unsigned char *p = t->data;
  for (size_t i = 0; i < n; i++) {
    if (zero_pct && (int)cairn_rng_below(&r, 100) < zero_pct) continue;
    if (dt == CAIRN_DTYPE_F32) {
      float f = cairn_rng_normal(&r);
      memcpy(p + i * es, &f, es);
    } else if (dt == CAIRN_DTYPE_F64) {
      double d = (double)cairn_rng_normal(&r);
      memcpy(p + i * es, &d, es);
    } else if (dt == CAIRN_DTYPE_BOOL) {
      p[i] = (unsigned char)(cairn_rng_u32(&r) & 1);
    } else {
      for (size_t b = 0; b < es; b++) p[i * es + b] = (unsigned char)cairn_rng_u32(&r);
    }
  }
  return t;
}

/* Opens a writer; when the options are refused (e.g. a chunk size below
 * the writer's minimum), retries with larger chunks, then the defaults. */
static cairn_ckpt_writer *open_writer(const char *name, cairn_ckpt_write_options o) {
  char p[4096];
  path_of(p, sizeof p, name);
  o.no_fsync = 1;
  cairn_ckpt_writer *w;
  while (cairn_ckpt_writer_open(p, &o, &w)) {
    if (o.chunk_bytes == 0 || o.chunk_bytes >= (1u << 20)) DIE(name);
    fprintf(stderr, "make_corpus: %s: chunk_bytes %u refused (%s), trying %u\n", name, o.chunk_bytes,
            cairn_errmsg(), o.chunk_bytes * 4);
    o.chunk_bytes *= 4;
  }
  return w;
}

static void add(cairn_ckpt_writer *w, const char *name, cairn_tensor *t) {
  if (cairn_ckpt_writer_add(w, name, t)) DIE(name);
  cairn_tensor_free(t);
}

static void commit(cairn_ckpt_writer *w, const char *name) {
  if (cairn_ckpt_writer_commit(w)) DIE(name);
  printf("%s\n", name);
}

static unsigned char *slurp(const char *name, size_t *len) {
  char p[4096];
  path_of(p, sizeof p, name);
  FILE *f = fopen(p, "rb");
  if (!f) { perror(p); exit(1); }
  unsigned char *buf = malloc(1 << 20);
  if (!buf) exit(1);
  *len = fread(buf, 1, 1 << 20, f);
  fclose(f);
  return buf;
}

static void spill(const char *name, const unsigned char *b, size_t len) {
  char p[4096];
  path_of(p, sizeof p, name);
  FILE *f = fopen(p, "wb");
  if (!f || fwrite(b, 1, len, f) != len || fclose(f)) { perror(p); exit(1); }
  printf("%s (%zu bytes)\n", name, len);
}

/* Truncated copies (a quarter, a half, the footer cut, one byte short) and
 * single-bit flips (superblock, middle, footer) of `name`. */
static void variants(const char *name) {
  size_t len;
  unsigned char *b = slurp(name, &len);
  char v[512];
  const size_t cuts[4] = {len / 4, len / 2, len > 64 ? len - 64 : 0, len - 1};
  const char *cut_names[4] = {"quarter", "half", "nofooter", "short1"};
  for (int i = 0; i < 4; i++) {
    snprintf(v, sizeof v, "%s.trunc-%s", name, cut_names[i]);
    spill(v, b, cuts[i]);
  }
  const size_t flips[3] = {12, len / 2, len - 20};
  const char *flip_names[3] = {"super", "middle", "footer"};
  for (int i = 0; i < 3; i++) {
    if (flips[i] >= len) continue;
    b[flips[i]] ^= 0x10;
    snprintf(v, sizeof v, "%s.flip-%s", name, flip_names[i]);
    spill(v, b, len);
    b[flips[i]] ^= 0x10;
  }
  free(b);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: make_corpus DIR\n");
    return 2;
  }
  outdir = argv[1];
  cairn_ckpt_write_options o;

  /* f32 weights with metadata, default options (AUTO: random floats stay raw). */
  memset(&o, 0, sizeof o);
  cairn_ckpt_writer *w = open_writer("mlp.ckpt", o);
  add(w, "dense/kernel", make(CAIRN_DTYPE_F32, 2, (int64_t[]){8, 16}, 1, 0));
  add(w, "dense/bias", make(CAIRN_DTYPE_F32, 1, (int64_t[]){16}, 2, 0));
  add(w, "global_step", make(CAIRN_DTYPE_I64, 0, (int64_t[]){1}, 3, 0));
  if (cairn_ckpt_writer_meta_u64(w, "global_step", 1234) || cairn_ckpt_writer_meta_str(w, "cairn.version", "0.1.0"))
    DIE("meta");
  commit(w, "mlp.ckpt");

  /* Every dtype, ranks 0 to 8, several small chunks per tensor. */
  memset(&o, 0, sizeof o);
  o.chunk_bytes = 64;
  w = open_writer("dtypes.ckpt", o);
  static const cairn_dtype dts[13] = {CAIRN_DTYPE_F32, CAIRN_DTYPE_F64, CAIRN_DTYPE_F16, CAIRN_DTYPE_BF16,
                                      CAIRN_DTYPE_I8,  CAIRN_DTYPE_I16, CAIRN_DTYPE_I32, CAIRN_DTYPE_I64,
                                      CAIRN_DTYPE_U8,  CAIRN_DTYPE_U16, CAIRN_DTYPE_U32, CAIRN_DTYPE_U64,
                                      CAIRN_DTYPE_BOOL};
  for (int i = 0; i < 13; i++) {
    int rank = i % 9;
    int64_t shape[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    if (rank > 0) shape[0] = 5 + i; /* e.g. (5), (6, 1), ... (12, 1, ..., 1) */
    char name[64];
    snprintf(name, sizeof name, "t/%s/rank%d", cairn_dtype_name(dts[i]), rank);
    add(w, name, make(dts[i], rank, shape, 10 + (uint64_t)i, 0));
  }
  commit(w, "dtypes.ckpt");

  /* LZ4: a 90%-zeros tensor (compressed chunks) next to a random one (raw chunks). */
  memset(&o, 0, sizeof o);
  o.chunk_bytes = 256;
  w = open_writer("lz4.ckpt", o);
  add(w, "sparse", make(CAIRN_DTYPE_F32, 2, (int64_t[]){16, 32}, 20, 90));
  add(w, "zeros", make(CAIRN_DTYPE_F32, 1, (int64_t[]){200}, 21, 100));
  add(w, "dense", make(CAIRN_DTYPE_F32, 1, (int64_t[]){100}, 22, 0));
  commit(w, "lz4.ckpt");

  /* The byte-shuffle filter. */
  memset(&o, 0, sizeof o);
  o.chunk_bytes = 256;
  o.compress = CAIRN_CKPT_COMPRESS_SHUFFLE;
  w = open_writer("shuffle.ckpt", o);
  add(w, "m", make(CAIRN_DTYPE_F32, 2, (int64_t[]){8, 32}, 30, 50));
  add(w, "v", make(CAIRN_DTYPE_F64, 1, (int64_t[]){40}, 31, 80));
  commit(w, "shuffle.ckpt");

  /* Codec 3 (byte planes + zstd, format 1.1): weights-like and sparse
   * floats, an f64 and a u8 tensor, so every zstd frame kind (raw,
   * RLE and compressed blocks) reaches the decoder. */
  memset(&o, 0, sizeof o);
  o.chunk_bytes = 256;
  o.compress = CAIRN_CKPT_COMPRESS_COMPACT;
  w = open_writer("compact.ckpt", o);
  add(w, "w", make(CAIRN_DTYPE_F32, 2, (int64_t[]){8, 32}, 60, 0));
  add(w, "m", make(CAIRN_DTYPE_F32, 2, (int64_t[]){8, 32}, 61, 50));
  add(w, "v", make(CAIRN_DTYPE_F64, 1, (int64_t[]){40}, 62, 80));
  add(w, "z", make(CAIRN_DTYPE_U8, 1, (int64_t[]){300}, 63, 100));
  commit(w, "compact.ckpt");

  /* Raw aligned layout for a tensor that does not compress; a small one in chunks. */
  memset(&o, 0, sizeof o);
  o.raw_layout_min_bytes = 256;
  o.alignment = 64;
  o.compress = CAIRN_CKPT_COMPRESS_NONE;
  w = open_writer("aligned.ckpt", o);
  add(w, "big", make(CAIRN_DTYPE_F32, 2, (int64_t[]){16, 16}, 40, 0));
  add(w, "small", make(CAIRN_DTYPE_U8, 1, (int64_t[]){7}, 41, 0));
  commit(w, "aligned.ckpt");

  /* Empty tensors and a scalar. */
  memset(&o, 0, sizeof o);
  w = open_writer("empty.ckpt", o);
  add(w, "empty", make(CAIRN_DTYPE_F32, 2, (int64_t[]){0, 4}, 50, 0));
  add(w, "empty1", make(CAIRN_DTYPE_I32, 1, (int64_t[]){0}, 51, 0));
  add(w, "scalar", make(CAIRN_DTYPE_F64, 0, (int64_t[]){1}, 52, 0));
  commit(w, "empty.ckpt");

  /* Every metadata type, no tensors. */
  memset(&o, 0, sizeof o);
  w = open_writer("meta.ckpt", o);
  static const unsigned char blob[24] = {0, 1, 2, 3, 0xff, 0xfe, 0x80, 0x7f, 9, 8, 7, 6, 5, 4, 3, 2, 1};
  if (cairn_ckpt_writer_meta_u64(w, "global_step", UINT64_C(1) << 40) ||
      cairn_ckpt_writer_meta_i64(w, "epoch", -3) || cairn_ckpt_writer_meta_f64(w, "lr", 1e-3) ||
      cairn_ckpt_writer_meta_bool(w, "done", 1) ||
      cairn_ckpt_writer_meta_str(w, "note", "caf\xc3\xa9 / \xe2\x88\x87 loss") ||
      cairn_ckpt_writer_meta_str(w, "empty", "") ||
      cairn_ckpt_writer_meta_bytes(w, "train.rng_state", blob, sizeof blob) ||
      cairn_ckpt_writer_meta_bytes(w, "train.none", blob, 0))
    DIE("meta");
  commit(w, "meta.ckpt");

  /* Nothing at all. */
  memset(&o, 0, sizeof o);
  w = open_writer("none.ckpt", o);
  commit(w, "none.ckpt");

  variants("mlp.ckpt");
  variants("lz4.ckpt");
  variants("aligned.ckpt");
  variants("compact.ckpt");
  return 0;
}
