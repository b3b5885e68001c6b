/* Small string and path helpers shared by the checkpoint, saver and session
 * code. */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *cairn__strdup(const char *s) {
  if (!s) return NULL;
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

char *cairn__path_dir(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash) return cairn__strdup(".");
  if (slash == path) return cairn__strdup("/");
  size_t n = (size_t)(slash - path);
  char *d = malloc(n + 1);
  if (!d) return NULL;
  memcpy(d, path, n);
  d[n] = '\0';
  return d;
}

char *cairn__path_join(const char *dir, const char *name) {
  size_t dl = strlen(dir), nl = strlen(name);
  int slash = dl > 0 && dir[dl - 1] != '/';
  char *p = malloc(dl + (size_t)slash + nl + 1);
  if (!p) return NULL;
  memcpy(p, dir, dl);
  if (slash) p[dl] = '/';
  memcpy(p + dl + (size_t)slash, name, nl + 1);
  return p;
}

int cairn__fsync_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -1;
  int rc = fsync(fd);
  /* Some file systems refuse fsync on a directory (EINVAL, ENOTSUP) or are
   * read-only: the rename has happened; there is nothing more to make
   * durable through this descriptor. */
  if (rc != 0 && (errno == EINVAL || errno == ENOTSUP || errno == EROFS)) rc = 0;
  int e = errno;
  close(fd);
  errno = e;
  return rc;
}
