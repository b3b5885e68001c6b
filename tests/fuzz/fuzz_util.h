/* fuzz_util.h: what the libFuzzer harnesses (fuzz_ckpt.c, fuzz_interop.c)
 * share: the reader limits, the scratch directory, the contract failure,
 * the checks of an index entry and of the error message. Each harness defines FUZZ_NAME
 * before including it. */
#ifndef CAIRN_FUZZ_UTIL_H
#define CAIRN_FUZZ_UTIL_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cairn/ckpt.h>
#include <cairn/status.h>
#include <cairn/tensor.h>

/* Bounds on what one input may make a harness allocate. */
#define MAX_TENSOR_BYTES (8u << 20)
#define MAX_TOTAL_BYTES (32u << 20)

static const cairn_ckpt_limits limits = {
    .max_index_bytes = 1u << 20,
    .max_meta_bytes = 1u << 20,
    .max_tensors = 4096,
    .max_chunk_bytes = 1u << 20,
    .max_tensor_bytes = MAX_TENSOR_BYTES,
};

static char workdir[4096];
static volatile size_t sink; /* keeps the reads of returned strings and bytes */

static void fail(const char *what, const char *detail) {
  fprintf(stderr, FUZZ_NAME ": contract violated: %s (%s)\n", what, detail ? detail : "");
  abort();
}

/* Removes everything in workdir (it holds only our files), then workdir. */
static void clean_dir(int remove_dir) {
  DIR *d = opendir(workdir);
  if (d) {
    struct dirent *de;
    char p[8400];
    while ((de = readdir(d))) {
      if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
      snprintf(p, sizeof p, "%s/%s", workdir, de->d_name);
      unlink(p);
    }
    closedir(d);
  }
  if (remove_dir) rmdir(workdir);
}

static int make_workdir_in(const char *base) {
  struct stat sb;
  if (!base || !*base || stat(base, &sb) || !S_ISDIR(sb.st_mode) || access(base, W_OK)) return -1;
  snprintf(workdir, sizeof workdir, "%s/cairn-" FUZZ_NAME ".XXXXXX", base);
  if (!mkdtemp(workdir)) {
    workdir[0] = 0;
    return -1;
  }
  return 0;
}

/* The scratch directory: under $CAIRN_FUZZ_TMPDIR, else /dev/shm, $TMPDIR or /tmp. */
static void make_workdir(void) {
  if (make_workdir_in(getenv("CAIRN_FUZZ_TMPDIR")) && make_workdir_in("/dev/shm") &&
      make_workdir_in(getenv("TMPDIR")) && make_workdir_in("/tmp")) {
    perror(FUZZ_NAME ": cannot create a scratch directory");
    abort();
  }
}

/* Touches the detail message of the last failure (it may quote names and
 * bytes from the file). */
static void touch_errmsg(void) {
  const char *m = cairn_errmsg();
  if (!m) fail("cairn_errmsg returned NULL", NULL);
  sink = strlen(m);
}

/* Checks an entry's self-consistency; returns its element count. */
static uint64_t check_entry(const cairn_ckpt_entry *e) {
  if (!e->name) fail("entry without a name", NULL);
  size_t es = cairn_dtype_size(e->dtype);
  if (es == 0) fail("entry with an unknown dtype", e->name);
  if (e->rank < 0 || e->rank > CAIRN_MAX_RANK) fail("entry rank outside 0..8", e->name);
  uint64_t n = 1;
  int overflow = 0;
  for (int d = 0; d < e->rank; d++) {
    if (e->shape[d] < 0) fail("entry with a negative dimension", e->name);
    uint64_t dim = (uint64_t)e->shape[d];
    if (dim && n > UINT64_MAX / dim) overflow = 1;
    n *= dim;
  }
  if (overflow || (n && (uint64_t)es > UINT64_MAX / n) || n * es != e->raw_bytes)
    fail("entry raw_bytes is not element count x dtype size", e->name);
  return n;
}

#endif
