/* A checkpoint directory as one object (cairn/checkpoint_dir.h): opened
 * once (its descriptor, identity and state file, optionally its lock),
 * then asked for the latest usable checkpoint, the next intact one after a
 * damaged one, and the rotation list. The lookup is TF's
 * tf.train.latest_checkpoint, which reads only the state file, plus what
 * cairn adds: the walk back past a missing, cut-short or corrupt newest
 * file, saying which it skipped, and the scan of the directory when the
 * state file is missing or unusable (doc/checkpoints-and-restarts.md,
 * item 11). The path-form lookups (cairn_latest_checkpoint*) are thin
 * wrappers at the end. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include "internal.h"
#include "checkpoint_dir_impl.h"
#include "checkpoint_state_impl.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_backend.h"
#include "cairn/checkpoint_dir.h"
#include "cairn/ckpt.h"
#include "table.h"

struct cairn_checkpoint_dir {
  cairn__dir dd;          /* the descriptor every file of the directory is opened in */
  cairn__dir_guard guard; /* its identity: device, inode, a descriptor that keeps the inode */
  cairn_checkpoint_lock *lock;
  /* the state file as read at open (or refresh) */
  int state_read; /* read once, at the first question about it */
  cairn_checkpoint_state *state;
  cairn_status state_st;
  char *state_msg;
  /* the candidates of the last lookup, newest first */
  char **cand_path, **cand_why;
  size_t n_cand, cap_cand;
  /* the rotation list of the last rotation_count */
  const char **rot;
  size_t n_rot;
};

/* ---- the object ------------------------------------------------------------------- */

CAIRN__OPTIONS_DEFAULT(cairn_checkpoint_dir_options)

static void forget_candidates(cairn_checkpoint_dir *d) {
  for (size_t i = 0; i < d->n_cand; i++) {
    free(d->cand_path[i]);
    free(d->cand_why[i]);
  }
  d->n_cand = 0;
}

/* Records a candidate tried by a lookup (why NULL: the one chosen). Out of
   memory it is just not recorded: the list is an account, not the result. */
static void add_candidate(cairn_checkpoint_dir *d, const char *path, const char *why) {
  if (d->n_cand == d->cap_cand) {
    size_t cap = d->cap_cand;
    if (!cairn__grow((void **)&d->cand_path, &cap, d->n_cand + 1, sizeof *d->cand_path)) return;
    size_t cap2 = d->cap_cand;
    if (!cairn__grow((void **)&d->cand_why, &cap2, d->n_cand + 1, sizeof *d->cand_why)) return;
    d->cap_cand = cap < cap2 ? cap : cap2;
  }
  char *p = cairn__strdup(path), *w = why ? cairn__strdup(why) : NULL;
  if (!p || (why && !w)) {
    free(p);
    free(w);
    return;
  }
  d->cand_path[d->n_cand] = p;
  d->cand_why[d->n_cand++] = w;
}

static cairn_status read_state(cairn_checkpoint_dir *d) {
  d->state_read = 1;
  cairn_checkpoint_state_free(d->state);
  d->state = NULL;
  free(d->state_msg);
  d->state_msg = NULL;
  d->state_st = cairn__checkpoint_state_read_in(&d->dd, d->dd.path, &d->state);
  if (d->state_st == CAIRN_E_NOMEM) return d->state_st;
  if (d->state_st != CAIRN_OK && !(d->state_msg = cairn__strdup(cairn_errmsg())))
    return cairn__fail(CAIRN_E_NOMEM, "checkpoint_dir: out of memory");
  return CAIRN_OK;
}

cairn_status cairn__checkpoint_dir_open_as(const char *fn, const char *path, const cairn_checkpoint_dir_options *o,
                                           cairn_checkpoint_dir **out) {
  if (out) *out = NULL;
  if (!path) return cairn__fail(CAIRN_E_NULL, "%s: dir is NULL", fn);
  if (!out) return cairn__fail(CAIRN_E_NULL, "%s: out is NULL", fn);
  if (o && o->struct_size && o->struct_size < sizeof(cairn_checkpoint_dir_options))
    return cairn__fail(CAIRN_E_INVALID, "%s: options struct_size is %zu, smaller than the first layout", fn,
                       o->struct_size);
  if (o && cairn__env_check(o->env, fn) != CAIRN_OK) return CAIRN_E_INVALID;
  const char *p = path[0] ? path : ".";
  struct stat sd;
  int se = stat(p, &sd) != 0 ? errno : 0;
  if (se || !S_ISDIR(sd.st_mode))
    return cairn__fail(CAIRN_E_NOT_FOUND, "%s: '%s': %s", fn, p, se ? strerror(se) : "not a directory");
  cairn_checkpoint_dir *d = calloc(1, sizeof *d);
  if (!d) return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  d->guard.fd = -1;
  /* Every candidate is opened in the directory itself (cairn__open_read):
     a TF prefix's .index and shards included, a link that leads out is
     refused. */
  if (cairn__dir_open(p, &d->dd) != 0) {
    int e = errno;
    free(d);
    return cairn__fail(e == ENOMEM ? CAIRN_E_NOMEM : CAIRN_E_IO, "%s: cannot open directory '%s': %s", fn, p,
                       strerror(e));
  }
  cairn_status st = cairn__dir_guard_init(&d->guard, fn, p);
  if (!st && o && o->lock) st = cairn__checkpoint_lock_new_env(p, o->prefix, o->env, &d->lock);
  if (st) {
    cairn_checkpoint_dir_close(d);
    return st;
  }
  *out = d;
  return CAIRN_OK;
}

cairn_status cairn_checkpoint_dir_open(const char *path, const cairn_checkpoint_dir_options *opts,
                                       cairn_checkpoint_dir **out) {
  return cairn__checkpoint_dir_open_as("checkpoint_dir_open", path, opts, out);
}

void cairn_checkpoint_dir_close(cairn_checkpoint_dir *d) {
  if (!d) return;
  forget_candidates(d);
  free(d->cand_path);
  free(d->cand_why);
  free(d->rot);
  cairn_checkpoint_state_free(d->state);
  free(d->state_msg);
  cairn_checkpoint_lock_free(d->lock);
  cairn__dir_guard_clear(&d->guard);
  cairn__dir_close(&d->dd);
  free(d);
}

const char *cairn_checkpoint_dir_path(const cairn_checkpoint_dir *d) { return d ? d->dd.path : NULL; }

void cairn_checkpoint_dir_identity(const cairn_checkpoint_dir *d, uint64_t *dev, uint64_t *ino) {
  if (dev) *dev = d ? d->guard.dev : 0;
  if (ino) *ino = d ? d->guard.ino : 0;
}

cairn_status cairn_checkpoint_dir_verify(const cairn_checkpoint_dir *d) {
  if (!d) return cairn__fail(CAIRN_E_NULL, "checkpoint_dir_verify: dir is NULL");
  return cairn__dir_guard_check(&d->guard, "checkpoint_dir_verify");
}

int cairn_checkpoint_dir_lock_held(const cairn_checkpoint_dir *d) { return d && cairn_checkpoint_lock_held(d->lock); }

void cairn_checkpoint_dir_removed(const cairn_checkpoint_dir *d, size_t *files, uint64_t *bytes) {
  cairn_checkpoint_lock_removed(d ? d->lock : NULL, files, bytes);
}

const cairn__dir *cairn__checkpoint_dir_fd(const cairn_checkpoint_dir *d) { return d ? &d->dd : NULL; }

const cairn__dir_guard *cairn__checkpoint_dir_guard(const cairn_checkpoint_dir *d) { return d ? &d->guard : NULL; }

/* The state file, read at the first question about it (a writer that only
   saves never reads it). */
static cairn_status need_state(cairn_checkpoint_dir *d) { return d->state_read ? CAIRN_OK : read_state(d); }

cairn_status cairn_checkpoint_dir_state(cairn_checkpoint_dir *d, const cairn_checkpoint_state **st) {
  if (st) *st = NULL;
  if (!d) return cairn__fail(CAIRN_E_NULL, "checkpoint_dir_state: dir is NULL");
  cairn_status ns = need_state(d);
  if (ns) return ns;
  if (d->state_st != CAIRN_OK) return cairn__fail(d->state_st, "%s", d->state_msg ? d->state_msg : "");
  if (st) *st = d->state;
  return CAIRN_OK;
}

cairn_status cairn_checkpoint_dir_refresh(cairn_checkpoint_dir *d) {
  if (!d) return cairn__fail(CAIRN_E_NULL, "checkpoint_dir_refresh: dir is NULL");
  forget_candidates(d);
  return read_state(d);
}

size_t cairn_checkpoint_dir_candidate_count(const cairn_checkpoint_dir *d) { return d ? d->n_cand : 0; }

cairn_status cairn_checkpoint_dir_candidate_at(const cairn_checkpoint_dir *d, size_t i, const char **path,
                                               const char **skipped) {
  if (path) *path = NULL;
  if (skipped) *skipped = NULL;
  if (!d) return cairn__fail(CAIRN_E_NULL, "checkpoint_dir_candidate_at: dir is NULL");
  if (i >= d->n_cand)
    return cairn__fail(CAIRN_E_NOT_FOUND, "checkpoint_dir_candidate_at: candidate %zu of %zu", i, d->n_cand);
  if (path) *path = d->cand_path[i];
  if (skipped) *skipped = d->cand_why[i];
  return CAIRN_OK;
}

size_t cairn_checkpoint_dir_rotation_count(cairn_checkpoint_dir *d) {
  if (!d) return 0;
  free(d->rot);
  d->rot = NULL;
  d->n_rot = 0;
  if (need_state(d)) return 0;
  size_t n = cairn_checkpoint_state_count(d->state);
  if (!n || !(d->rot = malloc(n * sizeof *d->rot))) return 0;
  for (size_t i = 0; i < n; i++) {
    const char *p = cairn_checkpoint_state_path_at(d->state, i);
    if (!cairn_checkpoint_is_marked_corrupt(p)) d->rot[d->n_rot++] = p;
  }
  return d->n_rot;
}

const char *cairn_checkpoint_dir_rotation_at(const cairn_checkpoint_dir *d, size_t i) {
  return d && i < d->n_rot ? d->rot[i] : NULL;
}

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

/* Tries one candidate: 1 usable (recorded as chosen), 0 skipped (recorded
 * with why), -1 written by a newer cairn (why in newer). */
static int try_candidate(cairn_checkpoint_dir *cd, const char *path, char *why, size_t len, cairn_ckpt **keep,
                         char *newer, size_t newer_len) {
  int u = usable(&cd->dd, path, why, len, keep);
  if (u < 0) snprintf(newer, newer_len, "%s", why);
  add_candidate(cd, path, u < 0 ? why : u ? NULL : why);
  return u;
}

/* A WARNING about directory dir, once per text: "<what> '<dir>': ",
 * `before`, the file name `name` escaped as the state file writes it
 * (none when NULL), then the NULL-terminated rest. */
static void warn_dir(const char *what, const char *dir, const char *before, const char *name, ...) {
  cairn__sbuf t = {0};
  cairn__sb_puts(&t, what);
  cairn__sb_puts(&t, " '");
  cairn__sb_puts(&t, dir);
  cairn__sb_puts(&t, "': ");
  cairn__sb_puts(&t, before);
  if (name) cairn__state_put_escaped(&t, name);
  va_list ap;
  va_start(ap, name);
  for (const char *s; (s = va_arg(ap, const char *)) != NULL;) cairn__sb_puts(&t, s);
  va_end(ap);
  if (!t.oom) cairn__warn_once(t.p);
  free(t.p);
}

/* Highest-step usable "<name>-<step>" file of dir: malloc'd path in *found
 * (NULL if none); 0 on allocation failure. */
static int scan_dir(cairn_checkpoint_dir *cd, char **found, cairn__sbuf *note, cairn_ckpt **keep, char *newer,
                    size_t newer_len) {
  const char *dir = cd->dd.path;
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
      warn_dir("latest_checkpoint", dir, "skipping ", de->d_name, ": ", why, NULL);
      continue;
    }
    if (n == cap && !cairn__grow((void **)&c, &cap, n + 1, sizeof *c)) {
      ok = 0;
      break;
    }
    if (!(c[n].name = cairn__path_join(dir, de->d_name))) {
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
    int u = try_candidate(cd, c[i].name, why, sizeof why, keep, newer, newer_len);
    if (u < 0) break;
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

/* What a lookup found and said, between its steps. */
typedef struct walk {
  cairn__sbuf note;
  char *result;
  int fell_back;
  char newer[1200];     /* the open error of a file written by a newer cairn */
  char state_why[700];  /* the state file is missing or unusable: why */
} walk;

/* Step 1: the state file's model path, then its listed paths newest first.
 * CAIRN_E_NOMEM only. */
static cairn_status walk_state(cairn_checkpoint_dir *cd, walk *w, cairn_ckpt **keep) {
  const char *d = cd->dd.path;
  if (need_state(cd)) return CAIRN_E_NOMEM;
  if (cd->state_st != CAIRN_OK) {
    if (cd->state_st == CAIRN_E_NOT_FOUND)
      snprintf(w->state_why, sizeof w->state_why, "no state file '%s/%s'", d, CAIRN__STATE_NAME);
    else
      snprintf(w->state_why, sizeof w->state_why, "state file unusable (%.600s)", cd->state_msg ? cd->state_msg : "");
    note_add(&w->note, w->state_why);
    w->fell_back = 1;
    return CAIRN_OK;
  }
  const cairn_checkpoint_state *st = cd->state;
  size_t n = cairn_checkpoint_state_count(st);
  const char *model = cairn_checkpoint_state_model_path(st);
  for (size_t k = 0; k <= n; k++) {
    const char *p = k == 0 ? model : cairn_checkpoint_state_path_at(st, n - k);
    if (k > 0 && strcmp(p, model) == 0) continue;
    char why[1100];
    int u = try_candidate(cd, p, why, sizeof why, keep, w->newer, sizeof w->newer);
    if (u < 0) return CAIRN_OK;
    if (u) return (w->result = cairn__strdup(p)) ? CAIRN_OK : CAIRN_E_NOMEM;
    w->fell_back = 1;
    char t[5400];
    snprintf(t, sizeof t, "skipped '%s': %s", p, why);
    note_add(&w->note, t);
  }
  note_add(&w->note, "no checkpoint listed in the state file is usable");
  return CAIRN_OK;
}

/* Step 2: the directory scan, when the state file gave nothing; one
 * WARNING when the state file was missing or unusable. */
static cairn_status walk_scan(cairn_checkpoint_dir *cd, walk *w, cairn_ckpt **keep) {
  static const char fn[] = "latest_checkpoint";
  const char *d = cd->dd.path;
  if (!scan_dir(cd, &w->result, &w->note, keep, w->newer, sizeof w->newer))
    return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  if (!w->result && !w->newer[0])
    return cairn__fail(CAIRN_E_NOT_FOUND, "%s '%s': no usable checkpoint: %s; no valid '<name>-<step>' file in the "
                       "directory", fn, d, w->note.p ? w->note.p : "");
  if (w->result) note_add(&w->note, "found by scanning the directory");
  /* One policy for every reader (train, eval, the tools): a missing or
     unusable state file next to checkpoints is said out loud, and the
     newest intact checkpoint found is used (TF's latest_checkpoint
     would return None and a trainer would start again from step 0). */
  if (w->state_why[0] && w->result)
    warn_dir("checkpoint directory", d, "", NULL, w->state_why, "; using '", w->result,
             "', the newest intact checkpoint found by scanning the directory (the Saver rewrites the state file at "
             "its next save)", NULL);
  return CAIRN_OK;
}

/* Step 3: the answer, or why there is none. */
static cairn_status walk_finish(cairn_checkpoint_dir *cd, walk *w, char *path, size_t len, char *note_out,
                                size_t note_len) {
  static const char fn[] = "latest_checkpoint";
  const char *d = cd->dd.path;
  if (w->newer[0])
    /* Not "the newest intact checkpoint is older": resuming an older one
       would silently throw away the newer cairn's progress. */
    return cairn__fail(CAIRN_E_UNSUPPORTED,
                       "%s '%s': stopped at a checkpoint written by a newer cairn, not resuming an older one: %s",
                       fn, d, w->newer);
  size_t rl = strlen(w->result);
  if (rl + 1 > len)
    return cairn__fail(CAIRN_E_LIMIT, "%s: '%s' needs %zu bytes, path holds %zu", fn, w->result, rl + 1, len);
  memcpy(path, w->result, rl + 1);
  if (w->fell_back && !w->note.oom && note_len)
    snprintf(note_out, note_len, "%s '%s': using '%s': %s", fn, d, w->result, w->note.p);
  cairn__clear_error(); /* the candidates' open errors are in the note */
  return CAIRN_OK;
}

/* The start of a lookup, the object's or the path form's: every output
 * cleared, then the arguments checked in one order. */
static cairn_status lookup_begin(const char *fn, const void *dir, char *path, size_t len, char *note_out,
                                 size_t note_len, cairn_ckpt **keep) {
  cairn__clear_error();
  if (keep) *keep = NULL;
  if (note_out && note_len) note_out[0] = '\0';
  if (!dir) return cairn__fail(CAIRN_E_NULL, "%s: dir is NULL", fn);
  if (!path) return cairn__fail(CAIRN_E_NULL, "%s: path is NULL", fn);
  if (len == 0) return cairn__fail(CAIRN_E_INVALID, "%s: len is 0", fn);
  if (!note_out && note_len) return cairn__fail(CAIRN_E_NULL, "%s: note is NULL, note_len %zu", fn, note_len);
  path[0] = '\0';
  return CAIRN_OK;
}

cairn_status cairn_checkpoint_dir_latest(cairn_checkpoint_dir *cd, char *path, size_t len, char *note_out,
                                         size_t note_len, cairn_ckpt **keep) {
  static const char fn[] = "latest_checkpoint";
  cairn_status b = lookup_begin(fn, cd, path, len, note_out, note_len, keep);
  if (b) return b;
  forget_candidates(cd);
  walk w;
  memset(&w, 0, sizeof w);
  cairn_status s = walk_state(cd, &w, keep);
  if (s != CAIRN_OK) s = cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  if (!s && !w.result && !w.newer[0]) s = walk_scan(cd, &w, keep);
  if (!s) s = walk_finish(cd, &w, path, len, note_out, note_len);
  if (s && keep) {
    cairn_ckpt_close(*keep);
    *keep = NULL;
  }
  free(w.result);
  free(w.note.p);
  return s;
}

cairn_status cairn_checkpoint_dir_next_intact(cairn_checkpoint_dir *d, const char *bad, const char *why, char *path,
                                              size_t len) {
  if (!d) return cairn__fail(CAIRN_E_NULL, "checkpoint_dir_next_intact: dir is NULL");
  /* Marking fails only for a file that is gone (which the lookup skips
     anyway) or without memory. */
  cairn_status ms = cairn_checkpoint_mark_corrupt(bad, why);
  if (ms != CAIRN_OK && ms != CAIRN_E_NOT_FOUND) return ms;
  return cairn_checkpoint_dir_latest(d, path, len, NULL, 0, NULL);
}

/* ---- the path forms: one directory object per call ------------------------------------- */

cairn_status cairn__latest_checkpoint_open(const char *dir, char *path, size_t len, char *note_out, size_t note_len,
                                           cairn_ckpt **keep) {
  static const char fn[] = "latest_checkpoint";
  cairn_status s = lookup_begin(fn, dir, path, len, note_out, note_len, keep);
  if (s) return s;
  cairn_checkpoint_dir *cd = NULL;
  s = cairn__checkpoint_dir_open_as(fn, dir, NULL, &cd);
  if (s == CAIRN_OK) s = cairn_checkpoint_dir_latest(cd, path, len, note_out, note_len, keep);
  cairn_checkpoint_dir_close(cd);
  return s;
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
