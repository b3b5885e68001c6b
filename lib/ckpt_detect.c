/* Which backend reads a checkpoint path (detection by content, the
 * dispatch of cairn_ckpt_open: cairn__ck_reader_of) and which one writes a
 * format (cairn_ckpt_out): ckpt_backend.h. Its own file so that the
 * backends' shared helpers (interop_common.c) do not depend on the
 * backends: backend files use the helpers, and only this file knows the
 * backends by name. */
#define _GNU_SOURCE 1
#include "interop_impl.h"
#include "ckpt_backend.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- format detection ------------------------------------------------------------ */

/* 1 if fd is a regular file ending in the LevelDB table magic. */
static int is_table_fd(int fd) {
  struct stat sb;
  unsigned char ft[8];
  return fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size >= 48 &&
         cairn__ck_pread_raw(fd, ft, 8, (uint64_t)sb.st_size - 8, &(int){0}) == 0 &&
         ck_get64(ft) == 0xdb4775248b80fb57ull;
}

static int is_table(const cairn__dir *d, const char *file) {
  int fd = cairn__open_read(d, file, NULL, NULL, 0); /* a FIFO is refused, never waited on */
  if (fd < 0) return 0;
  int ok = is_table_fd(fd);
  close(fd);
  return ok;
}

const ck_backend *cairn__ck_detect(const cairn__dir *d, const char *path, int fd) {
  size_t n = strlen(path);
  int own = fd < 0 ? cairn__open_read(d, path, NULL, NULL, 0) : -1;
  if (fd < 0 && (fd = own) < 0) {
    /* A TensorFlow prefix names no file itself. */
    char *index = malloc(n + 7);
    if (!index) return NULL;
    memcpy(index, path, n);
    memcpy(index + n, ".index", 7);
    int tf = is_table(d, index);
    free(index);
    return tf ? &cairn__ck_tfbundle : NULL; /* else the cairn backend reports the error */
  }
  if (n > 6 && strcmp(path + n - 6, ".index") == 0 && is_table_fd(fd)) {
    if (own >= 0) close(own);
    return &cairn__ck_tfbundle;
  }
  {
    unsigned char b[9];
    int r = cairn__ck_pread_raw(fd, b, sizeof b, 0, &(int){0});
    if (own >= 0) close(own);
    /* An 8-byte header length, then the JSON object's '{'. cairn's own
     * files start with "\x89CRN" and have a version number there. */
    if (r == 0 && b[8] == '{') return &cairn__ck_safetensors;
    /* A ZIP (.npz) starts with its first member's local header, or is
     * only an end record when it has none (numpy.savez of nothing). An
     * empty ZIP is 22 bytes: the 9-byte read above fails only when the
     * file is shorter than that. */
    if (r == 0 && b[0] == 'P' && b[1] == 'K' && ((b[2] == 3 && b[3] == 4) || (b[2] == 5 && b[3] == 6)))
      return &cairn__ck_npz;
    return NULL;
  }
}

const ck_backend *cairn__ck_reader_of(const cairn__dir *d, const char *path, int fd) {
  const ck_backend *b = cairn__ck_detect(d, path, fd);
  return b ? b : &cairn__ck_native;
}

/* ---- the writer's choice ----------------------------------------------------------------- */

const ck_backend *cairn__ck_backend_of(cairn_ckpt_format_id format) {
  switch (format) {
  case CAIRN_CKPT_FORMAT_CAIRN: return &cairn__ck_native;
  case CAIRN_CKPT_FORMAT_TF: return &cairn__ck_tfbundle;
  case CAIRN_CKPT_FORMAT_SAFETENSORS: return &cairn__ck_safetensors;
  case CAIRN_CKPT_FORMAT_NPZ: return &cairn__ck_npz;
  }
  return NULL;
}
