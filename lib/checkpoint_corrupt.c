/* The process's list of checkpoint files found corrupt (cairn/saver.h,
 * cairn_checkpoint_mark_corrupt): a restore that meets a checkpoint whose
 * tensor data fails its checksum marks it, and cairn_latest_checkpoint
 * (checkpoint_latest.c) skips it for the rest of the process, so that every later
 * lookup — the next session's restore, a hook's, a tool's — agrees on the
 * checkpoint that was really restored.
 *
 * A file is known by what stat() says of it (device, inode, size, mtime),
 * not by its name: the same file reached through another spelling of the
 * path is still skipped, and a new file saved later under the same name
 * (an atomic rename over the corrupt one) is a different file and usable. */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"
#include "checkpoint_dir_impl.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cairn/saver.h"

typedef struct bad_file {
  dev_t dev;
  ino_t ino;
  off_t size;
  struct timespec mtime;
  char *why;
} bad_file;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static bad_file *g_bad;
static size_t g_n, g_cap;

static int same_file(const bad_file *b, const struct stat *sb) {
  return b->dev == sb->st_dev && b->ino == sb->st_ino && b->size == sb->st_size &&
         b->mtime.tv_sec == sb->st_mtim.tv_sec && b->mtime.tv_nsec == sb->st_mtim.tv_nsec;
}

cairn_status cairn_checkpoint_mark_corrupt(const char *path, const char *why) {
  static const char fn[] = "checkpoint_mark_corrupt";
  if (!path) return cairn__fail(CAIRN_E_NULL, "%s: path is NULL", fn);
  struct stat sb;
  if (stat(path, &sb) != 0) {
    int e = errno;
    return cairn__fail(e == ENOENT || e == ENOTDIR ? CAIRN_E_NOT_FOUND : CAIRN_E_IO, "%s: '%s': %s", fn, path,
                       strerror(e));
  }
  char *w = cairn__strdup(why && why[0] ? why : "marked corrupt");
  if (!w) return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  pthread_mutex_lock(&g_mu);
  for (size_t i = 0; i < g_n; i++)
    if (same_file(&g_bad[i], &sb)) { /* marked already: keep the first reason */
      pthread_mutex_unlock(&g_mu);
      free(w);
      return CAIRN_OK;
    }
  if (g_n == g_cap) {
    size_t cap = g_cap ? 2 * g_cap : 8;
    bad_file *p = realloc(g_bad, cap * sizeof *p);
    if (!p) {
      pthread_mutex_unlock(&g_mu);
      free(w);
      return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
    }
    g_bad = p;
    g_cap = cap;
  }
  bad_file *b = &g_bad[g_n++];
  b->dev = sb.st_dev;
  b->ino = sb.st_ino;
  b->size = sb.st_size;
  b->mtime = sb.st_mtim;
  b->why = w;
  pthread_mutex_unlock(&g_mu);
  return CAIRN_OK;
}

int cairn__checkpoint_marked(const struct stat *sb, char *why, size_t len) {
  int found = 0;
  pthread_mutex_lock(&g_mu);
  for (size_t i = 0; i < g_n && !found; i++)
    if (same_file(&g_bad[i], sb)) {
      found = 1;
      /* Short: the whole reason was in the warning that marked it. */
      if (why && len)
        snprintf(why, len, "marked corrupt earlier in this process: %.150s%s", g_bad[i].why,
                 strlen(g_bad[i].why) > 150 ? "..." : "");
    }
  pthread_mutex_unlock(&g_mu);
  return found;
}

int cairn_checkpoint_is_marked_corrupt(const char *path) {
  struct stat sb;
  if (!path || stat(path, &sb) != 0) return 0;
  return cairn__checkpoint_marked(&sb, NULL, 0);
}
