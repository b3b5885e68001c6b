/* One writer per checkpoint directory: an exclusive flock(2) on
 * "<dir>/.cairn.lock", held for the life of a training session, and the
 * removal of the temporary files that killed saves left behind, which only
 * the holder may do (no other writer can be in the middle of a save).
 *
 * flock rather than a pid file: the kernel drops the lock when the holder's
 * last descriptor closes, so a SIGKILLed trainer never leaves a stale lock.
 * The file is never removed (removing a lock file races with a process
 * that has just opened it); its text only names the last holder. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cairn/saver.h"
#include "cairn/session.h" /* cairn_env_log */

#define LOCK_NAME ".cairn.lock"
#define STATE_NAME "checkpoint"

struct cairn_checkpoint_lock {
  int fd; /* -1: the file system cannot lock; nothing is held */
  char *path;
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

/* 1 if `name` is a temporary file of the checkpoint writer for one of the
 * Saver's "<prefix>-<step>" files ("<name>-<digits>.tmp.XXXXXX") or of the
 * state file ("checkpoint.tmp.XXXXXX"); both end in six letters or digits
 * (lib/ckpt_write.c, lib/checkpoint_state.c). */
static int is_writer_temp(const char *name) {
  size_t n = strlen(name);
  if (n < 12 || memcmp(name + n - 11, ".tmp.", 5) != 0) return 0;
  for (size_t i = n - 6; i < n; i++) {
    char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) return 0;
  }
  size_t stem = n - 11;
  if (stem == strlen(STATE_NAME) && memcmp(name, STATE_NAME, stem) == 0) return 1;
  size_t d = stem;
  while (d > 0 && name[d - 1] >= '0' && name[d - 1] <= '9') d--;
  return d < stem && d >= 2 && name[d - 1] == '-';
}

/* Removes the writer's temporary files from dir (regular files only,
 * through a descriptor of dir so nothing elsewhere is touched). */
static void remove_temps(cairn_checkpoint_lock *l, const char *dir) {
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
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
    if (!is_writer_temp(de->d_name)) continue;
    struct stat sb;
    if (fstatat(dfd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(sb.st_mode)) continue;
    if (unlinkat(dfd, de->d_name, 0) != 0) continue;
    l->removed_files++;
    l->removed_bytes += (uint64_t)sb.st_size;
  }
  closedir(d);
  close(dfd);
}

/* Opens dir's lock file without following a link (a link planted there
 * must not make us truncate a file elsewhere). *writable: opened for
 * writing. -1 with errno on failure. */
static int open_lock_file(const char *path, int create, int *writable) {
  *writable = 1;
  int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT : 0), 0644);
  if (fd < 0 && errno == EACCES) { /* another user's lock file: flock works on a read-only descriptor */
    *writable = 0;
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
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

cairn_status cairn_checkpoint_lock_new(const char *dir, cairn_checkpoint_lock **out) {
  static const char fn[] = "checkpoint_lock_new";
  if (out) *out = NULL;
  if (!dir) return cairn__fail(CAIRN_E_NULL, "%s: dir is NULL", fn);
  if (!out) return cairn__fail(CAIRN_E_NULL, "%s: out is NULL", fn);
  if (!dir[0]) dir = ".";
  struct stat sd;
  int se = stat(dir, &sd) != 0 ? errno : 0;
  if (se || !S_ISDIR(sd.st_mode))
    return cairn__fail(CAIRN_E_NOT_FOUND, "%s: checkpoint directory '%s'%s %s", fn, dir, se ? ":" : "",
                       se ? strerror(se) : "is not a directory");
  cairn_checkpoint_lock *l = calloc(1, sizeof *l);
  if (l) l->path = cairn__path_join(dir, LOCK_NAME);
  if (!l || !l->path) {
    free(l);
    return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  }
  int writable;
  l->fd = open_lock_file(l->path, 1, &writable);
  if (l->fd < 0) {
    int e = errno;
    cairn_status st = cairn__fail(CAIRN_E_IO, "%s: cannot open the lock file '%s': %s", fn, l->path,
                                  e == ELOOP ? "it is a symbolic link" : e == EINVAL ? "not a regular file"
                                                                                      : strerror(e));
    cairn_checkpoint_lock_free(l);
    return st;
  }
  int rc;
  while ((rc = flock(l->fd, LOCK_EX | LOCK_NB)) != 0 && errno == EINTR) {
  }
  if (rc != 0) {
    int e = errno;
    cairn_status st;
    if (e == EWOULDBLOCK) {
      st = busy(fn, dir, l->path, l->fd);
    } else if (cannot_lock(e)) {
      /* Training on a file system without locks still works, unguarded. */
      cairn_env_log(NULL, CAIRN_LOG_WARN,
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
  remove_temps(l, dir);
  *out = l;
  return CAIRN_OK;
}

cairn_status cairn_checkpoint_lock_check(const char *dir) {
  static const char fn[] = "checkpoint_lock_check";
  if (!dir) return cairn__fail(CAIRN_E_NULL, "%s: dir is NULL", fn);
  if (!dir[0]) dir = ".";
  char *path = cairn__path_join(dir, LOCK_NAME);
  if (!path) return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  int writable;
  int fd = open_lock_file(path, 0, &writable);
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
  free(l->path);
  free(l);
}

const char *cairn_checkpoint_lock_path(const cairn_checkpoint_lock *l) { return l ? l->path : NULL; }

int cairn_checkpoint_lock_held(const cairn_checkpoint_lock *l) { return l && l->fd >= 0; }

void cairn_checkpoint_lock_removed(const cairn_checkpoint_lock *l, size_t *files, uint64_t *bytes) {
  if (files) *files = l ? l->removed_files : 0;
  if (bytes) *bytes = l ? l->removed_bytes : 0;
}
