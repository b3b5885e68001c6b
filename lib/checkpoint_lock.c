/* One writer per checkpoint directory: an exclusive flock(2) on
 * "<dir>/.cairn.lock", held for the life of a training session, and the
 * removal of the temporary files that killed saves left behind, which only
 * the holder may do (no other writer can be in the middle of a save).
 *
 * flock rather than a pid file: the kernel drops the lock when the holder's
 * last descriptor closes, so a SIGKILLed trainer never leaves a stale lock.
 * The file is never removed (removing a lock file races with a process
 * that has just opened it); its text only names the last holder.
 *
 * The lock belongs to the directory, not to its path: the lock records the
 * directory's device and inode and keeps a descriptor of it
 * (cairn__dir_guard), and a trainer checks before each save that the path
 * still leads there. A directory removed under a running trainer and
 * created again by the next save would leave the old lock on the deleted
 * inode and the new directory unguarded: a second trainer would lock it
 * and train next to the first. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include "internal.h"
#include "checkpoint_dir_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cairn/checkpoint_dir.h"
#include "cairn/env.h" /* cairn_env_log */

#define LOCK_NAME ".cairn.lock"
#define STATE_NAME "checkpoint"

struct cairn_checkpoint_lock {
  int fd; /* -1: the file system cannot lock; nothing is held */
  char *path;
  cairn__dir_guard guard; /* the directory locked */
  size_t removed_files;
  uint64_t removed_bytes;
};

/* Who holds the lock, from the text of the lock file open at fd, into
 * buf: "pid 123 on host 'h'", or a phrase when the text says nothing. */
static void holder_of(int fd, char *buf, size_t len) {
  char text[512];
  ssize_t n = pread(fd, text, sizeof text - 1, 0);
  text[n > 0 ? n : 0] = '\0';
  long pid = 0;
  char host[256];
  if (sscanf(text, "pid %ld host %255s", &pid, host) == 2 && pid > 0) {
    for (char *p = host; *p; p++)
      if ((unsigned char)*p < 0x21 || *p == 0x7f) *p = '?';
    snprintf(buf, len, "pid %ld on host '%s'", pid, host);
  } else {
    snprintf(buf, len, "a process that has not written its pid and host yet");
  }
}

/* 1 if name[0..n) ends in ".tmp." and six letters or digits: the
 * temporary-name suffix of the checkpoint writer (lib/ckpt_write.c) and of
 * the state file (lib/checkpoint_state.c, mkstemp). */
static int has_temp_suffix(const char *name, size_t n) {
  if (n < 11 || memcmp(name + n - 11, ".tmp.", 5) != 0) return 0;
  for (size_t i = n - 6; i < n; i++) {
    char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) return 0;
  }
  return 1;
}

/* 1 if `name` is a temporary file of this Saver's own writes: of one of its
 * "<base>-<step>" checkpoints ("<base>-<digits>.tmp.XXXXXX", base the last
 * component of its prefix) or of its state file ("checkpoint.tmp.XXXXXX").
 * Anything else that merely looks like a temporary ("notes-2024.tmp.backup",
 * another prefix's) is someone else's and is left alone. */
static int is_writer_temp(const char *name, const char *base) {
  size_t n = strlen(name), bl = strlen(base);
  if (!has_temp_suffix(name, n)) return 0;
  size_t stem = n - 11;
  if (stem == strlen(STATE_NAME) && memcmp(name, STATE_NAME, stem) == 0) return 1;
  if (stem < bl + 2 || memcmp(name, base, bl) != 0 || name[bl] != '-') return 0;
  for (size_t i = bl + 1; i < stem; i++)
    if (name[i] < '0' || name[i] > '9') return 0;
  return 1;
}

/* Removes the Saver's temporary files (is_writer_temp) from the directory
 * its files go to, `sub` below the locked one ("" for the locked one
 * itself): regular files only, through descriptors, so nothing elsewhere
 * is touched. */
static void remove_temps(cairn_checkpoint_lock *l, const char *sub, const char *base) {
  int dfd = l->guard.fd < 0 ? -1
            : sub[0]        ? openat(l->guard.fd, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                            : dup(l->guard.fd);
  if (dfd < 0) return;
  int dfd2 = dup(dfd);
  DIR *d = dfd2 >= 0 ? fdopendir(dfd2) : NULL;
  if (!d) {
    if (dfd2 >= 0) close(dfd2);
    close(dfd);
    return;
  }
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (!is_writer_temp(de->d_name, base)) continue;
    struct stat sb;
    if (fstatat(dfd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(sb.st_mode)) continue;
    if (unlinkat(dfd, de->d_name, 0) != 0) continue;
    l->removed_files++;
    l->removed_bytes += (uint64_t)sb.st_size;
  }
  closedir(d);
  close(dfd);
}

/* Opens the lock file `path` (relative to dfd, or AT_FDCWD) without
 * following a link (a link planted there must not make us truncate a file
 * elsewhere). *writable: opened for writing. -1 with errno on failure. */
static int open_lock_file(int dfd, const char *path, int create, int *writable) {
  *writable = 1;
  int fd = openat(dfd, path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT : 0), 0644);
  if (fd < 0 && errno == EACCES) { /* another user's lock file: flock works on a read-only descriptor */
    *writable = 0;
    fd = openat(dfd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  }
  if (fd < 0) return -1;
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    close(fd);
    errno = EINVAL;
    return -1;
  }
  return fd;
}

static int cannot_lock(int e) { return e == ENOLCK || e == EOPNOTSUPP || e == ENOSYS || e == EINVAL; }

static cairn_status busy(const char *fn, const char *dir, const char *path, int fd) {
  char who[400];
  holder_of(fd, who, sizeof who);
  return cairn__fail(CAIRN_E_BUSY,
                     "%s: checkpoint directory '%s' is in use by another trainer: %s holds the lock '%s' (one "
                     "writer per directory: wait for it to finish, or use another directory)",
                     fn, dir, who, path);
}

/* The directory below the locked one that the prefix's files go to ("" for
 * the locked one) and the prefix's last component, into sub[0..len) and
 * *base; CAIRN_E_INVALID for a prefix that would lead out of the directory
 * (absolute, a ".." component) or names no file. */
static cairn_status split_prefix(const char *fn, const char *prefix, char *sub, size_t len, const char **base) {
  size_t n = strlen(prefix);
  const char *slash = strrchr(prefix, '/');
  if (!n || prefix[0] == '/' || prefix[n - 1] == '/')
    return cairn__fail(CAIRN_E_INVALID,
                       "%s: prefix '%s' must be the Saver's file prefix relative to the checkpoint directory "
                       "(e.g. \"model.ckpt\"): %s", fn, prefix, !n ? "it is empty" : prefix[0] == '/' ? "it is absolute"
                                                                                    : "it ends with '/'");
  for (const char *c = prefix; *c; c = strchr(c, '/') ? strchr(c, '/') + 1 : c + strlen(c))
    if (c[0] == '.' && c[1] == '.' && (c[2] == '/' || c[2] == '\0'))
      return cairn__fail(CAIRN_E_INVALID,
                         "%s: prefix '%s' has a '..' component: the temporary files it names would be outside the "
                         "checkpoint directory", fn, prefix);
  size_t sl = slash ? (size_t)(slash - prefix) : 0;
  if (sl + 1 > len) return cairn__fail(CAIRN_E_LIMIT, "%s: prefix '%s' is too long", fn, prefix);
  memcpy(sub, prefix, sl);
  sub[sl] = '\0';
  *base = slash ? slash + 1 : prefix;
  return CAIRN_OK;
}

cairn_status cairn__checkpoint_lock_new_env(const char *dir, const char *prefix, const cairn_env *env,
                                            cairn_checkpoint_lock **out) {
  static const char fn[] = "checkpoint_lock_new";
  if (out) *out = NULL;
  if (!dir) return cairn__fail(CAIRN_E_NULL, "%s: dir is NULL", fn);
  if (!out) return cairn__fail(CAIRN_E_NULL, "%s: out is NULL", fn);
  if (!dir[0]) dir = ".";
  if (!prefix) prefix = "model.ckpt";
  char sub[4096];
  const char *base = prefix;
  cairn_status st = split_prefix(fn, prefix, sub, sizeof sub, &base);
  if (st != CAIRN_OK) return st;
  cairn_checkpoint_lock *l = calloc(1, sizeof *l);
  if (!l) return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  l->fd = -1;
  l->guard.fd = -1;
  /* The directory first: the lock file is opened through its descriptor,
     so what is locked is the directory recorded. */
  if ((st = cairn__dir_guard_init(&l->guard, fn, dir)) != CAIRN_OK) {
    cairn_checkpoint_lock_free(l);
    return st;
  }
  if (!(l->path = cairn__path_join(dir, LOCK_NAME))) {
    cairn_checkpoint_lock_free(l);
    return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  }
  int writable;
  l->fd = l->guard.fd >= 0 ? open_lock_file(l->guard.fd, LOCK_NAME, 1, &writable)
                           : open_lock_file(AT_FDCWD, l->path, 1, &writable);
  if (l->fd < 0) {
    int e = errno;
    st = cairn__fail(CAIRN_E_IO, "%s: cannot open the lock file '%s': %s", fn, l->path,
                     e == ELOOP ? "it is a symbolic link" : e == EINVAL ? "not a regular file" : strerror(e));
    cairn_checkpoint_lock_free(l);
    return st;
  }
  int rc;
  while ((rc = flock(l->fd, LOCK_EX | LOCK_NB)) != 0 && errno == EINTR) {
  }
  if (rc != 0) {
    int e = errno;
    if (e == EWOULDBLOCK) {
      st = busy(fn, dir, l->path, l->fd);
    } else if (cannot_lock(e)) {
      /* Training on a file system without locks still works, unguarded
         (the directory's identity is still checked before each save). */
      cairn_env_log(env, CAIRN_LOG_WARN,
                    "checkpoint directory '%s': cannot lock '%s' (%s); continuing without the one-writer check and "
                    "without removing temporary files", dir, l->path, strerror(e));
      close(l->fd);
      l->fd = -1;
      *out = l;
      return CAIRN_OK;
    } else {
      st = cairn__fail(CAIRN_E_IO, "%s: cannot lock '%s': %s", fn, l->path, strerror(e));
    }
    cairn_checkpoint_lock_free(l);
    return st;
  }
  if (writable) {
    char host[256] = "";
    if (gethostname(host, sizeof host - 1) != 0 || !host[0]) snprintf(host, sizeof host, "unknown");
    host[sizeof host - 1] = '\0';
    char text[400];
    int n = snprintf(text, sizeof text, "pid %ld host %s\n", (long)getpid(), host);
    /* best effort: the text only helps the message of a refused trainer */
    if (ftruncate(l->fd, 0) == 0 && pwrite(l->fd, text, (size_t)n, 0) != n) {
    }
  }
  remove_temps(l, sub, base);
  *out = l;
  return CAIRN_OK;
}

cairn_status cairn_checkpoint_lock_new_prefix(const char *dir, const char *prefix, cairn_checkpoint_lock **out) {
  return cairn__checkpoint_lock_new_env(dir, prefix, NULL, out);
}

/* Deprecated (kept one release): the default prefix's temporaries only. */
cairn_status cairn_checkpoint_lock_new(const char *dir, cairn_checkpoint_lock **out) {
  return cairn_checkpoint_lock_new_prefix(dir, NULL, out);
}

cairn_status cairn_checkpoint_lock_verify(const cairn_checkpoint_lock *l) {
  if (!l) return cairn__fail(CAIRN_E_NULL, "checkpoint_lock_verify: lock is NULL");
  return cairn__dir_guard_check(&l->guard, "checkpoint_lock_verify");
}

cairn_status cairn_checkpoint_lock_check(const char *dir) {
  static const char fn[] = "checkpoint_lock_check";
  if (!dir) return cairn__fail(CAIRN_E_NULL, "%s: dir is NULL", fn);
  if (!dir[0]) dir = ".";
  char *path = cairn__path_join(dir, LOCK_NAME);
  if (!path) return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  int writable;
  int fd = open_lock_file(AT_FDCWD, path, 0, &writable);
  cairn_status st = CAIRN_OK;
  if (fd >= 0) {
    int rc;
    while ((rc = flock(fd, LOCK_EX | LOCK_NB)) != 0 && errno == EINTR) {
    }
    if (rc != 0 && errno == EWOULDBLOCK) st = busy(fn, dir, path, fd);
    close(fd); /* drops the lock if this call took it */
  }
  free(path);
  return st;
}

void cairn_checkpoint_lock_free(cairn_checkpoint_lock *l) {
  if (!l) return;
  if (l->fd >= 0) close(l->fd);
  cairn__dir_guard_clear(&l->guard);
  free(l->path);
  free(l);
}

const char *cairn_checkpoint_lock_path(const cairn_checkpoint_lock *l) { return l ? l->path : NULL; }

int cairn_checkpoint_lock_held(const cairn_checkpoint_lock *l) { return l && l->fd >= 0; }

void cairn_checkpoint_lock_removed(const cairn_checkpoint_lock *l, size_t *files, uint64_t *bytes) {
  if (files) *files = l ? l->removed_files : 0;
  if (bytes) *bytes = l ? l->removed_bytes : 0;
}

const cairn__dir_guard *cairn__checkpoint_lock_guard(const cairn_checkpoint_lock *l) { return l ? &l->guard : NULL; }

/* ---- the directory's identity ---------------------------------------------------- */

cairn_status cairn__dir_guard_init(cairn__dir_guard *g, const char *fn, const char *dir) {
  memset(g, 0, sizeof *g);
  g->fd = -1;
  /* O_DIRECTORY | O_RDONLY: needs only search and read permission, as
     opendir; a directory that cannot be opened is still recorded by stat. */
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  struct stat sb;
  int e = fd >= 0 ? (fstat(fd, &sb) != 0 ? errno : 0) : (stat(dir, &sb) != 0 ? errno : 0);
  if (!e && !S_ISDIR(sb.st_mode)) e = ENOTDIR;
  if (e) {
    if (fd >= 0) close(fd);
    return cairn__fail(CAIRN_E_NOT_FOUND, "%s: checkpoint directory '%s': %s", fn, dir,
                       e == ENOTDIR ? "is not a directory" : strerror(e));
  }
  if (!(g->dir = cairn__strdup(dir))) {
    if (fd >= 0) close(fd);
    return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  }
  g->fd = fd;
  g->dev = (uint64_t)sb.st_dev;
  g->ino = (uint64_t)sb.st_ino;
  return CAIRN_OK;
}

int cairn__dir_guard_copy(cairn__dir_guard *dst, const cairn__dir_guard *src) {
  cairn__dir_guard_clear(dst);
  if (!src || !src->dir) return 0;
  if (!(dst->dir = cairn__strdup(src->dir))) return -1;
  dst->fd = src->fd >= 0 ? fcntl(src->fd, F_DUPFD_CLOEXEC, 0) : -1; /* none: dev and ino still compare */
  dst->dev = src->dev;
  dst->ino = src->ino;
  return 0;
}

void cairn__dir_guard_clear(cairn__dir_guard *g) {
  if (!g) return;
  if (g->fd >= 0) close(g->fd);
  free(g->dir);
  memset(g, 0, sizeof *g);
  g->fd = -1;
}

const char *cairn__dir_guard_changed(const cairn__dir_guard *g) {
  if (!g || !g->dir) return NULL;
  struct stat now, held;
  /* The held directory has no name any more once it is removed, even
     when a new one of that name exists already. */
  if (g->fd >= 0 && fstat(g->fd, &held) == 0 && held.st_nlink == 0) return "removed";
  if (stat(g->dir, &now) != 0) return errno == ENOENT || errno == ENOTDIR ? "removed" : "made unreachable (stat fails)";
  if (!S_ISDIR(now.st_mode)) return "replaced by something that is not a directory";
  if ((uint64_t)now.st_dev != g->dev || (uint64_t)now.st_ino != g->ino) return "replaced by another directory";
  return NULL;
}

cairn_status cairn__dir_guard_check(const cairn__dir_guard *g, const char *what) {
  const char *how = cairn__dir_guard_changed(g);
  if (!how) return CAIRN_OK;
  return cairn__dir_guard_fail(g, what, how);
}

cairn_status cairn__dir_guard_fail(const cairn__dir_guard *g, const char *what, const char *how) {
  return cairn__fail(CAIRN_E_NOT_FOUND,
                     "%s: checkpoint directory '%s' was %s while training: the lock taken at start no longer "
                     "protects it; not re-creating it; training stops (a trainer started again creates or finds the "
                     "directory and takes a new lock)",
                     what, g->dir, how);
}
