/* Small string, array and path helpers shared by the checkpoint, saver and session
 * code. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
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

/* ---- files named by a checkpoint directory ------------------------------------------ */

int cairn__dir_open(const char *dir, cairn__dir *d) {
  d->fd = -1;
  d->real = NULL;
  d->path = cairn__strdup(dir && dir[0] ? dir : ".");
  if (!d->path) {
    errno = ENOMEM;
    return -1;
  }
  d->fd = open(d->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d->fd < 0 || !(d->real = realpath(d->path, NULL))) {
    int e = errno;
    cairn__dir_close(d);
    errno = e;
    return -1;
  }
  return 0;
}

void cairn__dir_close(cairn__dir *d) {
  if (!d) return;
  if (d->fd >= 0) close(d->fd);
  free(d->real);
  free(d->path);
  d->fd = -1;
  d->real = d->path = NULL;
}

static const char *kind_of(mode_t m) {
  return S_ISFIFO(m) ? "a FIFO" : S_ISDIR(m) ? "a directory" : S_ISSOCK(m) ? "a socket"
       : S_ISCHR(m) || S_ISBLK(m) ? "a device" : "not a regular file";
}

int cairn__open_read(const cairn__dir *d, const char *path, struct stat *sbp, char *why, size_t len) {
  /* O_NONBLOCK: opening a FIFO for reading would wait for a writer
     forever; with it, open returns and fstat tells what it is. */
  const int fl = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
  char dummy[1];
  if (!why || !len) why = dummy, len = sizeof dummy;
  int fd;
  if (!d) {
    fd = open(path, fl);
    if (fd < 0) {
      int e = errno;
      snprintf(why, len, "%s", strerror(e));
      errno = e;
      return -1;
    }
  } else {
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!base[0] || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
      snprintf(why, len, "it names a directory, not a file");
      errno = EISDIR;
      return -1;
    }
    /* Looked up in d itself: a path string could lead elsewhere by the
       time it is opened (a component replaced by a link). */
    fd = openat(d->fd, base, fl | O_NOFOLLOW);
    if (fd < 0 && errno == ELOOP) {
      /* A symbolic link: today's policy keeps a link whose end is a file
         of the directory (a name for another checkpoint of it). What it
         ends in is then opened, again in d and without following. */
      char *full = cairn__path_join(d->real, base);
      char *target = full ? realpath(full, NULL) : NULL;
      int e = errno;
      char *td = target ? cairn__path_dir(target) : NULL;
      if (!full || (target && !td)) {
        snprintf(why, len, "out of memory");
        e = ENOMEM;
      } else if (!target) {
        snprintf(why, len, "it is a symbolic link that does not resolve (%s)", strerror(e));
        if (e != ENOENT) e = ELOOP;
      } else if (strcmp(td, d->real) != 0) {
        snprintf(why, len, "it is a symbolic link to '%.300s', outside the checkpoint directory '%.300s'", target,
                 d->real);
        e = ELOOP;
      } else {
        const char *tb = strrchr(target, '/') + 1;
        fd = openat(d->fd, tb, fl | O_NOFOLLOW);
        e = errno;
        if (fd < 0) snprintf(why, len, "%s", e == ELOOP ? "its link changed while it was opened" : strerror(e));
      }
      free(td);
      free(target);
      free(full);
      if (fd < 0) {
        errno = e;
        return -1;
      }
    } else if (fd < 0) {
      int e = errno;
      snprintf(why, len, "%s", strerror(e));
      errno = e;
      return -1;
    }
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    int e = errno;
    snprintf(why, len, "cannot stat: %s", strerror(e));
    close(fd);
    errno = e;
    return -1;
  }
  if (!S_ISREG(sb.st_mode)) {
    snprintf(why, len, "it is %s, not a regular file", kind_of(sb.st_mode));
    close(fd);
    errno = S_ISDIR(sb.st_mode) ? EISDIR : EINVAL;
    return -1;
  }
  int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) (void)fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  if (sbp) *sbp = sb;
  return fd;
}
