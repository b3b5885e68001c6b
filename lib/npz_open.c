/* cairn_npz_reader_open (cairn/interop.h): the archive's checks are
 * npz_read.c's; this file adds what the reader says of a file that is not
 * a ZIP at all, which needs the checkpoint formats' detection
 * (ckpt_detect.c, which in turn names the npz backend: npz_read.c itself
 * stays below both). */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cairn/interop.h"
#include "ckpt_backend.h"
#include "internal.h"
#include "npz_impl.h"

/* A file that is not a ZIP may be a checkpoint of another format given to
 * the .npz reader (ckpt-inspect import tries it last): name the format
 * found, and for a foreign checkpoint that does not open (a safetensors
 * file cut short), its own reader's error, so that a truncated file is
 * reported as truncated, not as "not a ZIP". `zip_st` is the ZIP check's
 * error, returned as it was otherwise. */
static cairn_status other_format(int fd, const char *path, cairn_status zip_st) {
  unsigned char head[4];
  if (cairn__ck_pread_raw(fd, head, sizeof head, 0, &(int){0}) == 0 && head[0] == 0x89 && head[1] == 'C' && head[2] == 'R' &&
      head[3] == 'N') {
    char zip_msg[600];
    snprintf(zip_msg, sizeof zip_msg, "%s", cairn_errmsg());
    return cairn__fail(zip_st, "npz_reader_open: %s: a cairn checkpoint, not a ZIP (.npz) file (%s)", path, zip_msg);
  }
  const ck_backend *b = cairn__ck_detect(NULL, path, -1);
  if (!b || b == &cairn__ck_npz) return zip_st; /* a ZIP whose end records are damaged */
  cairn_ckpt *c = NULL;
  cairn_status st = cairn_ckpt_open(path, NULL, &c);
  const char *what = strcmp(b->name, "tf") == 0 ? "a TensorFlow checkpoint" : "a safetensors file";
  if (st)
    return cairn__fail_wrap(st, "npz_reader_open: %s: %s, not a ZIP (.npz) file, and it %s: ", path, what,
                            st == CAIRN_E_TRUNCATED ? "is truncated (cut short)" : "does not open");
  cairn_ckpt_close(c);
  return cairn__fail(CAIRN_E_FORMAT, "npz_reader_open: %s: %s, not a ZIP (.npz) file: open it with cairn_ckpt_open "
                     "(ckpt-inspect import reads it as such)", path, what);
}


cairn_status cairn_npz_reader_open(const char *path, cairn_npz_reader **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "npz_reader_open: out is NULL");
  *out = NULL;
  if (!path) return cairn__fail(CAIRN_E_NULL, "npz_reader_open: path is NULL");
  /* O_NONBLOCK: a FIFO must not block the open; it is refused as not a
   * regular file. */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int e = errno;
    return cairn__fail(e == ENOENT ? CAIRN_E_NOT_FOUND : CAIRN_E_IO, "npz_reader_open: %s: %s", path, strerror(e));
  }
  int not_zip = 0;
  cairn_status s = cairn__npz_reader_open_fd(fd, "npz_reader_open", path, out, &not_zip);
  if (s && not_zip) s = other_format(fd, path, s);
  close(fd);
  return s;
}
