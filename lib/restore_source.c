/* Where a restore reads from when it is given a directory (a cairn
 * extension: TF's Saver.restore takes a file). A directory means:
 *   - its newest usable checkpoint, through the latest-checkpoint lookup
 *     (the state file, then a scan; files marked corrupt skipped);
 *   - else a TensorFlow bundle in it: "DIR/variables.index" (the prefix
 *     "DIR/variables") or a SavedModel's "DIR/variables/variables.index";
 *   - else its one ".safetensors" or ".npz" file (two or more: refused,
 *     naming them).
 * The lookup is one function, cairn__checkpoint_in_dir, so that it can be
 * pointed at the checkpoint directory object later. */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"
#include "restore_impl.h"
#include "suggest_impl.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cairn/ckpt.h"
#include "cairn/checkpoint_dir.h"
#include "cairn/saver.h"

cairn_status cairn__checkpoint_in_dir(const char *dir, char *path, size_t len, cairn_ckpt **out) {
  if (out) *out = NULL;
  cairn_ckpt *c = NULL;
  cairn_status st = cairn_latest_checkpoint_open(dir, path, len, NULL, 0, &c);
  if (st) return st;
  if (out) *out = c;
  else cairn_ckpt_close(c);
  return CAIRN_OK;
}

static int is_file(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

cairn_status cairn__restore_source(const char *fn, const char *path, char *out, size_t len, int *was_dir) {
  if (was_dir) *was_dir = 0;
  struct stat sb;
  if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
    if ((size_t)snprintf(out, len, "%s", path) >= len)
      return cairn__fail(CAIRN_E_LIMIT, "%s: path '%.200s...' is too long", fn, path);
    return CAIRN_OK;
  }
  if (was_dir) *was_dir = 1;
  cairn_status st = cairn__checkpoint_in_dir(path, out, len, NULL);
  if (st == CAIRN_OK || st != CAIRN_E_NOT_FOUND) {
    if (st) return cairn__fail_wrap(st, "%s: '%s' is a directory: ", fn, path);
    return CAIRN_OK;
  }
  const char *why = cairn__errmsg_copy(); /* the scan's; nothing below fails through it */
  const char *sep = ends_with(path, "/") ? "" : "/";
  char cand[4200];
  snprintf(cand, sizeof cand, "%s%svariables.index", path, sep);
  if (is_file(cand)) {
    if ((size_t)snprintf(out, len, "%s%svariables", path, sep) >= len)
      return cairn__fail(CAIRN_E_LIMIT, "%s: path of '%.200s...' is too long", fn, path);
    return CAIRN_OK;
  }
  snprintf(cand, sizeof cand, "%s%svariables/variables.index", path, sep);
  if (is_file(cand)) {
    if ((size_t)snprintf(out, len, "%s%svariables/variables", path, sep) >= len)
      return cairn__fail(CAIRN_E_LIMIT, "%s: path of '%.200s...' is too long", fn, path);
    return CAIRN_OK;
  }
  DIR *d = opendir(path);
  if (!d) return cairn__fail(CAIRN_E_IO, "%s: cannot read directory '%s': %s", fn, path, strerror(errno));
  char first[512] = "", second[512] = "";
  size_t n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (!ends_with(e->d_name, ".safetensors") && !ends_with(e->d_name, ".npz")) continue;
    snprintf(cand, sizeof cand, "%s%s%s", path, sep, e->d_name);
    if (!is_file(cand)) continue;
    if (n == 0) snprintf(first, sizeof first, "%s", e->d_name);
    else if (n == 1) snprintf(second, sizeof second, "%s", e->d_name);
    n++;
  }
  closedir(d);
  if (n == 1) {
    if ((size_t)snprintf(out, len, "%s%s%s", path, sep, first) >= len)
      return cairn__fail(CAIRN_E_LIMIT, "%s: path of '%.200s...' is too long", fn, path);
    return CAIRN_OK;
  }
  if (n > 1)
    return cairn__fail(CAIRN_E_INVALID, "%s: '%s' is a directory with no checkpoint state and %zu .safetensors "
                       "or .npz files ('%s', '%s'%s): name the file to restore", fn, path, n, first, second,
                       n > 2 ? ", ..." : "");
  return cairn__fail(CAIRN_E_NOT_FOUND, "%s: '%s' is a directory with nothing to restore: no checkpoint (%.1199s), no "
                     "TensorFlow bundle 'variables.index' and no .safetensors file in it (nor an .npz file)",
                     fn, path, why);
}

/* The entries of one directory as suggestion candidates: "x.index" counts
 * as the TF prefix "x". */
typedef struct dir_names {
  char **v;
  size_t n;
} dir_names;

static const char *dir_name_at(const void *ctx, size_t i) { return ((const dir_names *)ctx)->v[i]; }

void cairn__near_files(const char *path, char *hint, size_t len) {
  if (len) hint[0] = '\0';
  const char *slash = strrchr(path, '/');
  char dir[4096];
  const char *base = path;
  if (slash) {
    snprintf(dir, sizeof dir, "%.*s", (int)(slash - path == 0 ? 1 : slash - path), path);
    base = slash + 1;
  } else {
    snprintf(dir, sizeof dir, ".");
  }
  DIR *d = opendir(dir);
  if (!d) return;
  dir_names dn = {NULL, 0};
  size_t cap = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL && dn.n < 10000) {
    if (e->d_name[0] == '.') continue;
    if (dn.n == cap) {
      size_t nc = cap ? 2 * cap : 64;
      char **nv = realloc(dn.v, nc * sizeof *nv);
      if (!nv) break;
      dn.v = nv;
      cap = nc;
    }
    char *name = cairn__strdup(e->d_name);
    if (!name) break;
    if (ends_with(name, ".index")) name[strlen(name) - 6] = '\0';
    dn.v[dn.n++] = name;
  }
  closedir(d);
  char found[1200];
  if (cairn__suggest(base, dir_name_at, &dn, dn.n, 3, found, sizeof found))
    snprintf(hint, len, "%s", found);
  for (size_t i = 0; i < dn.n; i++) free(dn.v[i]);
  free(dn.v);
}

size_t cairn_checkpoint_dir_suggest(const char *path, char *buf, size_t cap) {
  if (cap) buf[0] = '\0';
  if (!path || !buf || !cap) return 0;
  cairn__near_files(path, buf, cap);
  /* the hint names each candidate in quotes: two quotes per name */
  size_t q = 0;
  for (const char *p = buf; *p; p++) q += *p == '\'';
  return q / 2;
}
