/* fuzz_ckpt: libFuzzer harness for the checkpoint reader and salvage.
 *
 * Each input is written to a memory file and taken through everything a
 * user can do with an untrusted checkpoint: cairn_ckpt_open (with small
 * limits, so an input cannot make the reader allocate gigabytes), the
 * index (count, entry_at, find), the metadata (meta_at and every typed
 * getter), cairn_ckpt_read of every tensor into a tensor of the entry's
 * dtype and shape, cairn_ckpt_verify, then cairn_ckpt_recover into a
 * scratch directory and a re-open + verify of what it wrote.
 *
 * Besides ASan/UBSan/LeakSanitizer findings, the harness aborts when the
 * reader breaks its own contract (include/cairn/ckpt.h):
 *   - an entry whose raw_bytes is not element count × dtype size, with an
 *     unknown dtype, a rank outside 0..8 or a negative dimension;
 *   - entries or metadata keys not strictly in order; find() disagreeing
 *     with entry_at(); a typed getter refusing the type meta_at() reported;
 *   - a read that succeeds with bytes whose CRC32C is not the entry's;
 *   - a read with the wrong dtype or an unknown name that succeeds;
 *   - verify succeeding while a read failed;
 *   - recover succeeding but writing a file that does not open and verify,
 *     or whose tensor count is not *recovered; recover of a verified file
 *     not keeping every tensor; a temporary file left behind.
 *
 * Build: CC=clang ./configure --enable-fuzzing && make tests/fuzz/fuzz_ckpt
 * Run:   cp -r $srcdir/tests/fuzz/corpus /tmp/c && tests/fuzz/fuzz_ckpt /tmp/c
 * The scratch directory is under $CAIRN_FUZZ_TMPDIR if set, else /dev/shm
 * when it is writable (fsync there costs nothing), else $TMPDIR or /tmp; it
 * is removed at a normal exit (not after a crash: hence the variable).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cairn/ckpt.h>
#include <cairn/interop.h>
#include <cairn/status.h>
#include <cairn/tensor.h>

#define FUZZ_NAME "fuzz_ckpt"
#include "fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);


static char in_path[4200];  /* the input: /proc/self/fd/N of a memfd, or a file */
static char out_path[4200]; /* what cairn_ckpt_recover writes */
static int in_fd = -1;
static int in_is_file;

static void at_exit(void) {
  if (in_fd >= 0) close(in_fd);
  if (workdir[0]) clean_dir(1);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  make_workdir();
  snprintf(out_path, sizeof out_path, "%s/out.ckpt", workdir);
  in_fd = memfd_create("fuzz_ckpt", 0);
  if (in_fd >= 0) {
    snprintf(in_path, sizeof in_path, "/proc/self/fd/%d", in_fd);
    if (access(in_path, R_OK)) { /* no /proc: use a plain file */
      close(in_fd);
      in_fd = -1;
    }
  }
  if (in_fd < 0) {
    in_is_file = 1;
    snprintf(in_path, sizeof in_path, "%s/in.ckpt", workdir);
  }
  atexit(at_exit);
  return 0;
}

static void put_input(const uint8_t *data, size_t size) {
  int fd = in_fd;
  if (in_is_file) fd = open(in_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || ftruncate(fd, 0)) {
    perror("fuzz_ckpt: input file");
    abort();
  }
  size_t done = 0;
  while (done < size) {
    ssize_t n = pwrite(fd, data + done, size - done, (off_t)done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      perror("fuzz_ckpt: writing the input");
      abort();
    }
    done += (size_t)n;
  }
  if (in_is_file) close(fd);
}

static int same_entry(const cairn_ckpt_entry *a, const cairn_ckpt_entry *b) {
  if (strcmp(a->name, b->name) || a->dtype != b->dtype || a->rank != b->rank || a->raw_bytes != b->raw_bytes ||
      a->stored_bytes != b->stored_bytes || a->raw_crc32c != b->raw_crc32c || a->n_chunks != b->n_chunks)
    return 0;
  for (int d = 0; d < a->rank; d++)
    if (a->shape[d] != b->shape[d]) return 0;
  return 1;
}

static void walk_meta(const cairn_ckpt *c) {
  size_t nm = cairn_ckpt_meta_count(c);
  const char *prev = NULL;
  for (size_t i = 0; i < nm; i++) {
    const char *key = NULL;
    cairn_meta_type type;
    if (cairn_ckpt_meta_at(c, i, &key, &type)) fail("meta_at failed for i < meta_count", NULL);
    if (!key) fail("meta_at returned a NULL key", NULL);
    if (prev && strcmp(prev, key) >= 0) fail("metadata keys not strictly in order", key);
    prev = key;
    cairn_status st = CAIRN_OK, wrong;
    uint64_t u;
    int64_t s;
    double f;
    int b;
    const char *str;
    const void *bytes;
    size_t len;
    switch (type) {
    case CAIRN_META_U64:
      st = cairn_ckpt_meta_u64(c, key, &u);
      wrong = cairn_ckpt_meta_str(c, key, &str);
      break;
    case CAIRN_META_I64:
      st = cairn_ckpt_meta_i64(c, key, &s);
      wrong = cairn_ckpt_meta_u64(c, key, &u);
      break;
    case CAIRN_META_F64:
      st = cairn_ckpt_meta_f64(c, key, &f);
      wrong = cairn_ckpt_meta_i64(c, key, &s);
      break;
    case CAIRN_META_BOOL:
      st = cairn_ckpt_meta_bool(c, key, &b);
      wrong = cairn_ckpt_meta_f64(c, key, &f);
      break;
    case CAIRN_META_STR:
      st = cairn_ckpt_meta_str(c, key, &str);
      if (!st) {
        if (!str) fail("meta_str returned NULL", key);
        sink = strlen(str);
      }
      wrong = cairn_ckpt_meta_bytes(c, key, &bytes, &len);
      break;
    case CAIRN_META_BYTES:
      st = cairn_ckpt_meta_bytes(c, key, &bytes, &len);
      if (!st && len) {
        if (!bytes) fail("meta_bytes returned NULL with a length", key);
        uint8_t acc = 0;
        for (size_t k = 0; k < len; k++) acc ^= ((const uint8_t *)bytes)[k];
        sink = acc;
      }
      wrong = cairn_ckpt_meta_bool(c, key, &b);
      break;
    default:
      fail("meta_at reported an unknown type", key);
      return;
    }
    if (st) fail("typed getter refused the type meta_at reported", key);
    if (!wrong) fail("typed getter of another type succeeded", key);
    touch_errmsg();
  }
  uint64_t u;
  if (!cairn_ckpt_meta_u64(c, "no such key \x7f", &u)) fail("meta getter found a key that cannot exist", NULL);
  touch_errmsg();
}

/* Reads every tensor; returns the number of reads that failed. */
static size_t read_all(cairn_ckpt *c, size_t count) {
  size_t failed = 0;
  uint64_t total = 0;
  const char *prev = NULL;
  for (size_t i = 0; i < count; i++) {
    cairn_ckpt_entry e, f;
    if (cairn_ckpt_entry_at(c, i, &e)) fail("entry_at failed for i < count", NULL);
    check_entry(&e);
    if (prev && strcmp(prev, e.name) >= 0) fail("entries not strictly in name order", e.name);
    prev = e.name;
    if (cairn_ckpt_find(c, e.name, &f)) fail("find did not find a listed name", e.name);
    if (!same_entry(&e, &f)) fail("find and entry_at disagree", e.name);
    if (e.raw_bytes > MAX_TENSOR_BYTES || total + e.raw_bytes > MAX_TOTAL_BYTES) continue;
    total += e.raw_bytes;
    cairn_tensor *t;
    if (cairn_tensor_new(e.dtype, e.rank, e.shape, &t)) fail("cannot allocate a tensor for an entry", e.name);
    cairn_status st = cairn_ckpt_read(c, e.name, t);
    if (st == CAIRN_OK) {
      if (cairn_crc32c(0, t->data, (size_t)e.raw_bytes) != e.raw_crc32c)
        fail("read succeeded but the bytes do not match the entry's CRC32C", e.name);
    } else {
      if (st > 0) fail("read returned a positive status", e.name);
      touch_errmsg();
      failed++;
    }
    cairn_tensor_free(t);
  }
  if (count > 0) { /* the wrong dtype must be refused */
    cairn_ckpt_entry e;
    if (cairn_ckpt_entry_at(c, 0, &e)) fail("entry_at(0) failed", NULL);
    cairn_tensor *t;
    int64_t one = 1;
    cairn_dtype other = e.dtype == CAIRN_DTYPE_U8 ? CAIRN_DTYPE_I8 : CAIRN_DTYPE_U8;
    if (cairn_tensor_new(other, 0, &one, &t)) fail("cannot allocate a scalar", NULL);
    if (!cairn_ckpt_read(c, e.name, t)) fail("read into a tensor of another dtype succeeded", e.name);
    touch_errmsg();
    cairn_tensor_free(t);
  }
  cairn_tensor *t;
  int64_t one = 1;
  if (cairn_tensor_new(CAIRN_DTYPE_F32, 0, &one, &t)) fail("cannot allocate a scalar", NULL);
  if (!cairn_ckpt_read(c, "no such tensor \x7f", t)) fail("read of an unknown name succeeded", NULL);
  touch_errmsg();
  cairn_tensor_free(t);
  cairn_ckpt_entry e;
  if (!cairn_ckpt_find(c, "no such tensor \x7f", &e)) fail("find of an unknown name succeeded", NULL);
  touch_errmsg();
  return failed;
}

/* Only out.ckpt (and in.ckpt without memfd) may be in workdir. */
static void check_no_leftovers(void) {
  DIR *d = opendir(workdir);
  if (!d) return;
  struct dirent *de;
  while ((de = readdir(d))) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") || !strcmp(de->d_name, "out.ckpt") ||
        (in_is_file && !strcmp(de->d_name, "in.ckpt")))
      continue;
    closedir(d);
    clean_dir(0);
    fail("a temporary file was left behind", de->d_name);
  }
  closedir(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  put_input(data, size);

  int verified = 0;
  size_t count = 0;
  cairn_ckpt *c = NULL;
  cairn_status st = cairn_ckpt_open(in_path, &limits, &c);
  if (st == CAIRN_OK) {
    if (!c) fail("open succeeded without a handle", NULL);
    int major, minor;
    cairn_ckpt_version(c, &major, &minor);
    /* A mutated input can look like a safetensors file (byte 8 '{'):
       tests/fuzz/fuzz_interop checks that reader; here only cairn's own. */
    if (strcmp(cairn_ckpt_format(c), "cairn") != 0) {
      cairn_ckpt_close(c);
      return 0;
    }
    if (major != CAIRN_CKPT_VERSION_MAJOR) fail("opened a file of another major version", NULL);
    if (!cairn_ckpt_path(c)) fail("cairn_ckpt_path returned NULL", NULL);
    count = cairn_ckpt_count(c);
    if (count > limits.max_tensors) fail("more tensors than max_tensors", NULL);
    cairn_ckpt_entry e;
    if (!cairn_ckpt_entry_at(c, count, &e)) fail("entry_at(count) succeeded", NULL);
    walk_meta(c);
    size_t read_failed = read_all(c, count);
    st = cairn_ckpt_verify(c);
    if (st == CAIRN_OK) {
      verified = 1;
      if (read_failed) fail("verify succeeded although a read failed", NULL);
    } else {
      touch_errmsg();
    }
    cairn_ckpt_close(c);
  } else {
    if (st > 0) fail("open returned a positive status", NULL);
    touch_errmsg();
  }

  size_t recovered = 0, lost = 0;
  st = cairn_ckpt_recover(in_path, out_path, &recovered, &lost);
  check_no_leftovers();
  if (st == CAIRN_OK) {
    if (verified && (recovered != count || lost != 0)) fail("recover of a verified file lost tensors", NULL);
    cairn_status st2 = cairn_ckpt_open(out_path, &limits, &c);
    if (st2 == CAIRN_OK) {
      if (cairn_ckpt_count(c) != recovered) fail("recovered file's count differs from *recovered", NULL);
      if (cairn_ckpt_verify(c)) fail("recovered file does not verify", cairn_errmsg());
      cairn_ckpt_close(c);
    } else if (st2 != CAIRN_E_LIMIT) { /* the salvaged tensors may exceed our small limits */
      fail("recovered file does not open", cairn_errmsg());
    }
  } else {
    if (st > 0) fail("recover returned a positive status", NULL);
    touch_errmsg();
  }
  unlink(out_path);
  return 0;
}
