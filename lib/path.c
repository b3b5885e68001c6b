/* Small string, array and path helpers shared by the checkpoint, saver and session
 * code. */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *cairn__strdup(const char *s) {
  if (!s) return NULL;
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

int cairn__grow(void **p, size_t *cap, size_t need, size_t size) {
  if (need <= *cap) return 1;
  size_t n = *cap ? *cap * 2 : 8;
  while (n < need) n *= 2;
  void *q = realloc(*p, n * size);
  if (!q) return 0;
  *p = q;
  *cap = n;
  return 1;
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

cairn_status cairn__make_dirs(const char *fn, const char *dir) {
  struct stat sb;
  if (stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode)) return CAIRN_OK; /* the common case: one stat */
  char *p = cairn__strdup(dir);
  if (!p) return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  size_t n = strlen(p);
  while (n > 1 && p[n - 1] == '/') p[--n] = '\0';
  /* Every prefix ending before a '/' (and the whole path), shortest first:
     mkdir -p. Mode 0777, less the umask, as mkdir(1) and TF's MakeDirs. */
  cairn_status st = CAIRN_OK;
  for (size_t i = 1; i <= n && !st; i++) {
    if (i < n && p[i] != '/') continue;
    char saved = p[i];
    p[i] = '\0';
    if (mkdir(p, 0777) != 0) {
      int e = errno;
      /* An existing component may fail with EEXIST, or with EACCES / EROFS
         where we could not create it anyway: what counts is what is there
         (a directory made meanwhile by another process is fine too). */
      if (stat(p, &sb) == 0) e = S_ISDIR(sb.st_mode) ? 0 : ENOTDIR;
      if (e)
        st = cairn__fail(e == ENOSPC || e == EDQUOT ? CAIRN_E_NOSPC : CAIRN_E_IO,
                         "%s: cannot create directory '%s'%s%s%s: %s", fn, p, i < n ? " (for '" : "",
                         i < n ? dir : "", i < n ? "')" : "",
                         e == ENOTDIR ? "it exists and is not a directory" : strerror(e));
    }
    p[i] = saved;
  }
  free(p);
  return st;
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
