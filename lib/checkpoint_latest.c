/* The latest usable checkpoint of a directory: the state file's newest
 * entry that opens and validates, else the newest '<name>-<step>' file of
 * the directory (TF's tf.train.latest_checkpoint reads only the state
 * file; cairn walks back past a missing, cut-short or corrupt newest file
 * and says which it skipped). */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include "internal.h"
#include "checkpoint_state_impl.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_backend.h"
#include "cairn/ckpt.h"
#include "cairn/saver.h"
#include "cairn/session.h" /* cairn_env_log, through cairn__warn_once */

/* ---- latest checkpoint ---------------------------------------------------------- */

/* Appends "; " + text to the note, kept short enough for cairn_errmsg. */
static void note_add(cairn__sbuf *note, const char *text) {
  if (note->n > 0) cairn__sb_puts(note, "; ");
  cairn__sb_puts(note, text);
}

/* 1 if `path` opens as a valid checkpoint; else 0 and why in why[0..len),
 * or -1 when it is a checkpoint this cairn is too old to read (a newer
 * format major or an unknown required feature: CAIRN_E_UNSUPPORTED). That
 * file is not damaged and is probably the newest state of the job: the
 * walk back must stop there instead of resuming something older.
 * With keep, the open checkpoint is handed to the caller in *keep (a
 * caller that wants its metadata need not open it again). */
static int usable(const cairn__dir *d, const char *path, char *why, size_t len, cairn_ckpt **keep) {
  struct stat sb;
  /* A TensorFlow checkpoint is a prefix; its .index file stands for it.
     Both are names of d, opened in it (never a FIFO, never out of d). */
  char tf[4096];
  int fd = cairn__open_read(d, path, &sb, why, len);
  if (fd < 0 && errno == ENOENT && (size_t)snprintf(tf, sizeof tf, "%s.index", path) < sizeof tf) {
    char twhy[1000];
    fd = cairn__open_read(d, tf, &sb, twhy, sizeof twhy);
    if (fd < 0 && errno != ENOENT) snprintf(why, len, "'%.300s': %.700s", tf, twhy);
  }
  if (fd < 0) {
    if (errno == ENOENT) snprintf(why, len, "file does not exist");
    return 0;
  }
  close(fd);
  if (cairn__checkpoint_marked(&sb, why, len)) return 0;
  cairn_ckpt *c = NULL;
  cairn_status s = cairn__ckpt_open_in(d, path, NULL, &c);
  if (s != CAIRN_OK) {
    snprintf(why, len, "%s: %.1000s", cairn_status_str(s), cairn_errmsg());
    return s == CAIRN_E_UNSUPPORTED ? -1 : 0;
  }
  if (keep) *keep = c;
  else cairn_ckpt_close(c);
  return 1;
}

typedef struct cand {
  char *name;
  long long step;
  double mtime;
} cand;

static int cand_cmp(const void *a, const void *b) {
  const cand *x = a, *y = b;
  if (x->step != y->step) return x->step > y->step ? -1 : 1;
  if (x->mtime != y->mtime) return x->mtime > y->mtime ? -1 : 1;
  return strcmp(y->name, x->name);
}

/* "<anything>-<digits>" gives the step, else -1. */
static long long step_of(const char *name) {
  const char *dash = strrchr(name, '-');
  if (!dash || dash == name || !dash[1] || strlen(dash + 1) > 18) return -1;
  long long v = 0;
  for (const char *p = dash + 1; *p; p++) {
    if (*p < '0' || *p > '9') return -1;
    v = v * 10 + (*p - '0');
  }
  return v;
}

/* Highest-step usable "<name>-<step>" file of dir: malloc'd path in *found
 * (NULL if none); 0 on allocation failure. */
static int scan_dir(const cairn__dir *dd, const char *dir, char **found, cairn__sbuf *note, cairn_ckpt **keep,
                    char *newer, size_t newer_len) {
  *found = NULL;
  DIR *d = opendir(dir);
  if (!d) {
    char t[512];
    snprintf(t, sizeof t, "cannot list '%s': %s", dir, strerror(errno));
    note_add(note, t);
    return 1;
  }
  cand *c = NULL;
  size_t n = 0, cap = 0;
  int ok = 1;
  char *rdir = realpath(dir, NULL);
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    long long step = step_of(de->d_name);
    if (step < 0 || strstr(de->d_name, ".tmp.")) continue;
    char why[800];
    if (!cairn__names_file_in_dir(dir, rdir, de->d_name, why, sizeof why)) { /* a link leading out */
      cairn__sbuf t = {0};
      cairn__sb_puts(&t, "latest_checkpoint '");
      cairn__sb_puts(&t, dir);
      cairn__sb_puts(&t, "': skipping ");
      cairn__state_put_escaped(&t, de->d_name);
      cairn__sb_puts(&t, ": ");
      cairn__sb_puts(&t, why);
      if (!t.oom) cairn__warn_once(t.p);
      free(t.p);
      continue;
    }
    if (n == cap) {
      size_t ncap = cap ? 2 * cap : 16;
      cand *nc = realloc(c, ncap * sizeof *nc);
      if (!nc) {
        ok = 0;
        break;
      }
      c = nc;
      cap = ncap;
    }
    c[n].name = cairn__path_join(dir, de->d_name);
    if (!c[n].name) {
      ok = 0;
      break;
    }
    struct stat sb;
    c[n].mtime = stat(c[n].name, &sb) == 0 ? (double)sb.st_mtim.tv_sec + 1e-9 * (double)sb.st_mtim.tv_nsec : 0;
    c[n].step = step;
    n++;
  }
  closedir(d);
  free(rdir);
  if (ok && n > 1) qsort(c, n, sizeof *c, cand_cmp);
  int skipped = 0;
  for (size_t i = 0; ok && i < n && !*found; i++) {
    char why[1100];
    int u = usable(dd, c[i].name, why, sizeof why, keep);
    if (u < 0) {
      snprintf(newer, newer_len, "%s", why);
      break;
    }
    if (u) {
      *found = c[i].name;
      c[i].name = NULL;
    } else if (skipped++ < 3) {
      char t[5400];
      snprintf(t, sizeof t, "skipped '%s': %s", c[i].name, why);
      note_add(note, t);
    }
  }
  for (size_t i = 0; i < n; i++) free(c[i].name);
  free(c);
  return ok;
}

cairn_status cairn__latest_checkpoint_open(const char *dir, char *path, size_t len, char *note_out, size_t note_len,
                                           cairn_ckpt **keep) {
  static const char fn[] = "latest_checkpoint";
  cairn__clear_error();
  if (keep) *keep = NULL;
  if (note_out && note_len) note_out[0] = '\0';
  if (!dir) return cairn__fail(CAIRN_E_NULL, "%s: dir is NULL", fn);
  if (!path) return cairn__fail(CAIRN_E_NULL, "%s: path is NULL", fn);
  if (len == 0) return cairn__fail(CAIRN_E_INVALID, "%s: len is 0", fn);
  if (!note_out && note_len) return cairn__fail(CAIRN_E_NULL, "%s: note is NULL, note_len %zu", fn, note_len);
  path[0] = '\0';
  const char *d = dir[0] ? dir : ".";
  struct stat sd;
  int se = stat(d, &sd) != 0 ? errno : 0;
  if (se || !S_ISDIR(sd.st_mode))
    return cairn__fail(CAIRN_E_NOT_FOUND, "%s: '%s': %s", fn, d, se ? strerror(se) : "not a directory");
  /* Every candidate is opened in the directory itself (cairn__open_read):
     a TF prefix's .index and shards included, a link that leads out is
     refused. */
  cairn__dir dd;
  if (cairn__dir_open(d, &dd) != 0) {
    int e = errno;
    return cairn__fail(e == ENOMEM ? CAIRN_E_NOMEM : CAIRN_E_IO, "%s: cannot open directory '%s': %s", fn, d,
                       strerror(e));
  }

  cairn__sbuf note = {0};
  char *result = NULL;
  int fell_back = 0;
  char newer[1200] = ""; /* the open error of a file written by a newer cairn */
  char state_why[700] = ""; /* the state file is missing or unusable: why */
  cairn_checkpoint_state *st = NULL;
  cairn_status s = cairn_checkpoint_state_read(d, &st);
  if (s == CAIRN_OK) {
    /* model path, then the listed ones newest first */
    size_t n = cairn_checkpoint_state_count(st);
    const char *model = cairn_checkpoint_state_model_path(st);
    for (size_t k = 0; k <= n && !result; k++) {
      const char *p = k == 0 ? model : cairn_checkpoint_state_path_at(st, n - k);
      if (k > 0 && strcmp(p, model) == 0) continue;
      char why[1100];
      int u = usable(&dd, p, why, sizeof why, keep);
      if (u < 0) {
        snprintf(newer, sizeof newer, "%s", why);
        break;
      }
      if (u) {
        result = cairn__strdup(p);
        if (!result) s = CAIRN_E_NOMEM;
        break;
      }
      fell_back = 1;
      char t[5400];
      snprintf(t, sizeof t, "skipped '%s': %s", p, why);
      note_add(&note, t);
    }
    if (!result && s == CAIRN_OK) note_add(&note, "no checkpoint listed in the state file is usable");
  } else if (s != CAIRN_E_NOMEM) {
    if (s == CAIRN_E_NOT_FOUND) snprintf(state_why, sizeof state_why, "no state file '%s/%s'", d, CAIRN__STATE_NAME);
    else snprintf(state_why, sizeof state_why, "state file unusable (%.600s)", cairn_errmsg());
    note_add(&note, state_why);
    fell_back = 1;
  }
  cairn_checkpoint_state_free(st);
  if (s == CAIRN_E_NOMEM) {
    if (keep) {
      cairn_ckpt_close(*keep);
      *keep = NULL;
    }
    free(result);
    free(note.p);
    cairn__dir_close(&dd);
    return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  }

  if (!result && !newer[0]) {
    int ok = scan_dir(&dd, d, &result, &note, keep, newer, sizeof newer);
    if (!ok) {
      free(note.p);
      cairn__dir_close(&dd);
      return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
    }
    if (!result && !newer[0]) {
      s = cairn__fail(CAIRN_E_NOT_FOUND, "%s '%s': no usable checkpoint: %s; no valid '<name>-<step>' file in the "
                      "directory", fn, d, note.p ? note.p : "");
      free(note.p);
      cairn__dir_close(&dd);
      return s;
    }
    if (result) note_add(&note, "found by scanning the directory");
    /* One policy for every reader (train, eval, the tools): a missing or
       unusable state file next to checkpoints is said out loud, and the
       newest intact checkpoint found is used (TF's latest_checkpoint
       would return None and a trainer would start again from step 0). */
    if (state_why[0] && result) {
      cairn__sbuf w = {0};
      cairn__sb_puts(&w, "checkpoint directory '");
      cairn__sb_puts(&w, d);
      cairn__sb_puts(&w, "': ");
      cairn__sb_puts(&w, state_why);
      cairn__sb_puts(&w, "; using '");
      cairn__sb_puts(&w, result);
      cairn__sb_puts(&w, "', the newest intact checkpoint found by scanning the directory (the Saver rewrites the "
                         "state file at its next save)");
      if (!w.oom) cairn__warn_once(w.p);
      free(w.p);
    }
  }
  cairn__dir_close(&dd);
  if (newer[0]) {
    /* Not "the newest intact checkpoint is older": resuming an older one
       would silently throw away the newer cairn's progress. */
    free(result);
    free(note.p);
    return cairn__fail(CAIRN_E_UNSUPPORTED,
                       "%s '%s': stopped at a checkpoint written by a newer cairn, not resuming an older one: %s",
                       fn, d, newer);
  }
  size_t rl = strlen(result);
  if (rl + 1 > len) {
    s = cairn__fail(CAIRN_E_LIMIT, "%s: '%s' needs %zu bytes, path holds %zu", fn, result, rl + 1, len);
    if (keep) {
      cairn_ckpt_close(*keep);
      *keep = NULL;
    }
    free(result);
    free(note.p);
    return s;
  }
  memcpy(path, result, rl + 1);
  if (fell_back && !note.oom && note_len)
    snprintf(note_out, note_len, "%s '%s': using '%s': %s", fn, d, result, note.p);
  free(result);
  free(note.p);
  cairn__clear_error(); /* the candidates' open errors are in the note */
  return CAIRN_OK;
}

cairn_status cairn_latest_checkpoint_open(const char *dir, char *path, size_t len, char *note, size_t note_len,
                                          cairn_ckpt **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "latest_checkpoint_open: out is NULL");
  return cairn__latest_checkpoint_open(dir, path, len, note, note_len, out);
}

cairn_status cairn_latest_checkpoint_note(const char *dir, char *path, size_t len, char *note, size_t note_len) {
  return cairn__latest_checkpoint_open(dir, path, len, note, note_len, NULL);
}

cairn_status cairn_latest_checkpoint(const char *dir, char *path, size_t len) {
  /* The older form: the note goes into cairn_errmsg() on success, as long
     as that channel holds. */
  char note[CAIRN__ERRMSG_LEN];
  cairn_status s = cairn_latest_checkpoint_note(dir, path, len, note, sizeof note);
  if (s == CAIRN_OK && note[0]) (void)cairn__fail(CAIRN_OK, "%s", note);
  return s;
}
