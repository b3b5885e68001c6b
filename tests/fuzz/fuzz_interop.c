/* fuzz_interop: libFuzzer harness for the TensorFlow bundle and
 * safetensors readers behind cairn_ckpt_open.
 *
 * The first byte of an input picks the format:
 *   'S' — the rest is a safetensors file;
 *   'T' — then a u32 little-endian length L, L bytes of "<prefix>.index"
 *         and the rest as "<prefix>.data-00000-of-00001".
 * Each input goes through open (with small limits), the index (count,
 * entry_at, find), the metadata getters, a read of every tensor and
 * verify. The harness aborts when a reader breaks its contract
 * (include/cairn/ckpt.h, include/cairn/interop.h): an inconsistent entry,
 * entries out of order, find disagreeing with entry_at, a TF read that
 * succeeds with bytes whose CRC32C is not the entry's, a read with the
 * wrong dtype or an unknown name that succeeds, verify succeeding after a
 * read failed; and when a bundle that verified does not survive a round
 * trip through the writers (TF → safetensors → TF, same tensors).
 *
 * Build: CC=clang ./configure --enable-fuzzing && make tests/fuzz/fuzz_interop
 * Run:   cp -r $srcdir/tests/fuzz/corpus-interop /tmp/c && tests/fuzz/fuzz_interop /tmp/c
 * Seeds (tests/fuzz/corpus-interop): small files of both formats written
 * by the writers (ckpt-inspect export) and by a Python script following
 * the format description; each is the format byte + the file; empty.st
 * is the 10-byte file of an empty header object ("{}": no tensors), which
 * once made the reader and the writers qsort a NULL array. Scratch
 * files live under $CAIRN_FUZZ_TMPDIR, else /dev/shm, $TMPDIR or /tmp.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>

#include <cairn/interop.h>

#define FUZZ_NAME "fuzz_interop"
#include "fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);


static char st_path[4200], prefix[4200], index_path[4300], data_path[4300], rt_st[4200], rt_tf[4200];

static void at_exit(void) {
  if (workdir[0]) clean_dir(1);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  make_workdir();
  snprintf(st_path, sizeof st_path, "%s/in.safetensors", workdir);
  snprintf(prefix, sizeof prefix, "%s/in", workdir);
  snprintf(index_path, sizeof index_path, "%s.index", prefix);
  snprintf(data_path, sizeof data_path, "%s.data-00000-of-00001", prefix);
  snprintf(rt_st, sizeof rt_st, "%s/rt.safetensors", workdir);
  snprintf(rt_tf, sizeof rt_tf, "%s/rt", workdir);
  atexit(at_exit);
  return 0;
}

static void put(const char *path, const uint8_t *p, size_t n) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    perror("fuzz_interop: input file");
    abort();
  }
  size_t done = 0;
  while (done < n) {
    ssize_t w = write(fd, p + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      perror("fuzz_interop: writing the input");
      abort();
    }
    done += (size_t)w;
  }
  close(fd);
}

/* Reads every tensor (with the CRC check for TF); returns the failures. */
static size_t read_all(cairn_ckpt *c, int tf) {
  size_t count = cairn_ckpt_count(c), failed = 0;
  uint64_t total = 0;
  const char *prev = NULL;
  for (size_t i = 0; i < count; i++) {
    cairn_ckpt_entry e, f;
    if (cairn_ckpt_entry_at(c, i, &e)) fail("entry_at failed for i < count", NULL);
    check_entry(&e);
    if (prev && strcmp(prev, e.name) >= 0) fail("entries not strictly in name order", e.name);
    prev = e.name;
    if (cairn_ckpt_find(c, e.name, &f) || strcmp(f.name, e.name) || f.raw_bytes != e.raw_bytes)
      fail("find and entry_at disagree", e.name);
    if (e.raw_bytes > MAX_TENSOR_BYTES || total + e.raw_bytes > MAX_TOTAL_BYTES) continue;
    total += e.raw_bytes;
    cairn_tensor *t;
    if (cairn_tensor_new(e.dtype, e.rank, e.shape, &t)) fail("cannot allocate a tensor", e.name);
    cairn_status st = cairn_ckpt_read(c, e.name, t);
    if (st == CAIRN_OK) {
      if (tf && cairn_crc32c(0, t->data, (size_t)e.raw_bytes) != e.raw_crc32c)
        fail("read succeeded but the bytes do not match the entry's CRC32C", e.name);
    } else {
      if (st > 0) fail("read returned a positive status", e.name);
      touch_errmsg();
      failed++;
    }
    cairn_tensor_free(t);
  }
  if (count) {
    cairn_ckpt_entry e;
    if (cairn_ckpt_entry_at(c, 0, &e)) fail("entry_at(0) failed", NULL);
    cairn_tensor *t;
    int64_t one = 1;
    if (cairn_tensor_new(e.dtype == CAIRN_DTYPE_U8 ? CAIRN_DTYPE_I8 : CAIRN_DTYPE_U8, 0, &one, &t)) fail("alloc", NULL);
    if (!cairn_ckpt_read(c, e.name, t)) fail("read into a tensor of another dtype succeeded", e.name);
    cairn_tensor_free(t);
  }
  cairn_ckpt_entry e;
  if (!cairn_ckpt_find(c, "no such tensor \x7f", &e)) fail("find of an unknown name succeeded", NULL);
  touch_errmsg();
  for (size_t i = 0; i < cairn_ckpt_meta_count(c); i++) {
    const char *key, *v;
    cairn_meta_type ty;
    if (cairn_ckpt_meta_at(c, i, &key, &ty) || !key) fail("meta_at failed", NULL);
    if (ty != CAIRN_META_STR || cairn_ckpt_meta_str(c, key, &v) || !v) fail("foreign metadata is not a string", key);
    sink = strlen(v);
  }
  return failed;
}

/* A verified bundle through both writers and back: the same entries. */
static void round_trip(cairn_ckpt *c) {
  size_t n = cairn_ckpt_count(c);
  cairn_tensor **ts = calloc(n + 1, sizeof *ts);
  cairn_safetensors_writer *sw;
  if (!ts || cairn_safetensors_writer_open(rt_st, &sw)) fail("safetensors writer open", cairn_errmsg());
  uint64_t total = 0;
  for (size_t i = 0; i < n; i++) {
    cairn_ckpt_entry e;
    if (cairn_ckpt_entry_at(c, i, &e)) fail("entry_at", NULL);
    total += e.raw_bytes;
    if (total > MAX_TOTAL_BYTES) {
      cairn_safetensors_writer_abort(sw);
      for (size_t k = 0; k < i; k++) cairn_tensor_free(ts[k]);
      free(ts);
      return;
    }
    if (cairn_tensor_new(e.dtype, e.rank, e.shape, &ts[i]) || cairn_ckpt_read(c, e.name, ts[i]))
      fail("a verified checkpoint's tensor does not read", e.name);
    if (cairn_safetensors_writer_add(sw, e.name, ts[i])) fail("safetensors writer refused a tensor", cairn_errmsg());
  }
  if (cairn_safetensors_writer_commit(sw)) fail("safetensors commit", cairn_errmsg());
  cairn_ckpt *s;
  if (cairn_ckpt_open(rt_st, &limits, &s) || cairn_ckpt_count(s) != n || cairn_ckpt_verify(s))
    fail("the safetensors copy does not open with the same tensors", cairn_errmsg());
  cairn_tfbundle_writer *tw;
  if (cairn_tfbundle_writer_open(rt_tf, &tw)) fail("tf writer open", cairn_errmsg());
  for (size_t i = 0; i < n; i++) {
    cairn_ckpt_entry e;
    if (cairn_ckpt_entry_at(s, i, &e)) fail("entry_at", NULL);
    cairn_tensor *t;
    if (cairn_tensor_new(e.dtype, e.rank, e.shape, &t) || cairn_ckpt_read(s, e.name, t)) fail("read back", e.name);
    if (memcmp(t->data, ts[i]->data, (size_t)e.raw_bytes)) fail("safetensors copy differs", e.name);
    if (cairn_tfbundle_writer_add(tw, e.name, t)) fail("tf writer refused a tensor", cairn_errmsg());
    cairn_tensor_free(t);
  }
  if (cairn_tfbundle_writer_commit(tw)) fail("tf commit", cairn_errmsg());
  cairn_ckpt_close(s);
  cairn_ckpt *b;
  if (cairn_ckpt_open(rt_tf, &limits, &b) || cairn_ckpt_count(b) != n || cairn_ckpt_verify(b))
    fail("the TF copy does not open and verify", cairn_errmsg());
  cairn_ckpt_close(b);
  for (size_t i = 0; i < n; i++) cairn_tensor_free(ts[i]);
  free(ts);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || (data[0] != 'S' && data[0] != 'T')) return 0;
  int tf = data[0] == 'T';
  const char *open_path = st_path;
  if (tf) {
    if (size < 5) return 0;
    uint32_t l = (uint32_t)data[1] | (uint32_t)data[2] << 8 | (uint32_t)data[3] << 16 | (uint32_t)data[4] << 24;
    if (l > size - 5) l = (uint32_t)(size - 5);
    put(index_path, data + 5, l);
    put(data_path, data + 5 + l, size - 5 - l);
    open_path = prefix;
  } else {
    put(st_path, data + 1, size - 1);
  }
  cairn_ckpt *c = NULL;
  cairn_status st = cairn_ckpt_open(open_path, &limits, &c);
  if (st == CAIRN_OK) {
    const char *f = cairn_ckpt_format(c);
    /* A mutated input may turn into another format; only what it opened as is checked. */
    int is_tf = strcmp(f, "tf") == 0;
    if (cairn_ckpt_count(c) > limits.max_tensors) fail("more tensors than max_tensors", NULL);
    size_t failed = read_all(c, is_tf);
    st = cairn_ckpt_verify(c);
    if (st == CAIRN_OK) {
      if (failed) fail("verify succeeded although a read failed", NULL);
      if (strcmp(f, "cairn") != 0) round_trip(c);
    } else {
      if (st > 0) fail("verify returned a positive status", NULL);
      touch_errmsg();
    }
    cairn_ckpt_close(c);
  } else {
    if (st > 0) fail("open returned a positive status", NULL);
    touch_errmsg();
  }
  clean_dir(0);
  return 0;
}
