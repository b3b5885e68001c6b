/* The Saver: save set, metadata, atomic save and rotation (TF's
 * tf.train.Saver: saver.py _RecordLastCheckpoint / _MaybeDeleteOldCheckpoints,
 * recover_last_checkpoints). The state file lives in checkpoint_state.c, restore
 * in saver_restore.c; both go through the public API only. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include "internal.h"
#include "checkpoint_dir_impl.h"
#include "saver_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cairn/ckpt.h"
#include "cairn/runtime.h"
#include "cairn/saver.h"
#include "cairn/env.h" /* cairn_env_log: a recovered path rotation will not delete */
#include "saver_impl.h"
#include "table.h"

#define CKPT_NAME_MAX 1024
#define META_KEY_MAX 255

typedef cairn__meta_item meta_item;
typedef cairn__last_ckpt last_ckpt;

static double wall_clock(void *ctx) {
  (void)ctx;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The option's clock, else the env's now, else the wall clock. */
static double now(const cairn_saver *s) {
  if (s->clock) return s->clock(s->clock_ctx);
  if (s->env && s->env->now) return s->env->now(s->env->self);
  return wall_clock(NULL);
}

cairn_saver_options cairn_saver_options_default(void) {
  return (cairn_saver_options){
      .max_to_keep = 5, .keep_checkpoint_every_n_hours = 10000.0, .write = cairn_ckpt_write_options_default()};
}

/* ---- construction ------------------------------------------------------------- */

static cairn_status check_options(const char *fn, const cairn_saver_options *o) {
  if (o->max_to_keep < 0)
    return cairn__fail(CAIRN_E_INVALID, "%s: max_to_keep is %d; use 0 to keep every checkpoint", fn,
                       o->max_to_keep);
  if (!(o->keep_checkpoint_every_n_hours > 0) || isinf(o->keep_checkpoint_every_n_hours))
    return cairn__fail(CAIRN_E_INVALID, "%s: keep_checkpoint_every_n_hours is %g; it must be finite and > 0", fn,
                       o->keep_checkpoint_every_n_hours);
  return CAIRN_OK;
}

static cairn_status check_ckpt_name(const char *fn, const char *name, size_t i) {
  if (!name) return cairn__fail(CAIRN_E_NULL, "%s: name %zu is NULL", fn, i);
  size_t n = strlen(name);
  if (n == 0) return cairn__fail(CAIRN_E_INVALID, "%s: name %zu is empty", fn, i);
  if (n > CKPT_NAME_MAX)
    return cairn__fail(CAIRN_E_INVALID, "%s: name %zu is %zu bytes, at most %d", fn, i, n, CKPT_NAME_MAX);
  for (size_t k = 0; k < n; k++) {
    unsigned char c = (unsigned char)name[k];
    if (c < 0x20 || c == 0x7f)
      return cairn__fail(CAIRN_E_INVALID, "%s: name %zu has control byte 0x%02x at offset %zu", fn, i, c, k);
  }
  return CAIRN_OK;
}

typedef struct sort_item {
  const void *key; /* a name or a variable pointer */
  size_t idx;
} sort_item;

static int by_name(const void *a, const void *b) {
  const sort_item *x = a, *y = b;
  int c = strcmp(x->key, y->key);
  return c ? c : (x->idx < y->idx ? -1 : x->idx > y->idx);
}

static int by_ptr(const void *a, const void *b) {
  const sort_item *x = a, *y = b;
  uintptr_t p = (uintptr_t)x->key, q = (uintptr_t)y->key;
  if (p != q) return p < q ? -1 : 1;
  return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* The common constructor: names[i] (copied) → vars[i]. `list` selects the
 * error wording of TF's list form. */
static cairn_status saver_make(const char *fn, const char *const *names, cairn_var *const *vars, size_t n,
                               int list, const cairn_saver_options *opts, cairn_saver **out) {
  cairn_saver_options o = opts ? *opts : cairn_saver_options_default();
  cairn_status st = check_options(fn, &o);
  if (!st) st = cairn__env_check(o.env, fn);
  if (st) return st;
  if (n == 0 && !o.allow_empty)
    return cairn__fail(CAIRN_E_INVALID, "%s: no variables to save (set allow_empty to allow it)", fn);
  for (size_t i = 0; i < n; i++) {
    if (!vars[i]) return cairn__fail(CAIRN_E_NULL, "%s: variable %zu is NULL", fn, i);
    if ((st = check_ckpt_name(fn, names[i], i))) return st;
  }

  sort_item *si = n ? malloc(n * sizeof *si) : NULL;
  if (n && !si) return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  for (size_t i = 0; i < n; i++) si[i] = (sort_item){names[i], i};
  if (n > 1) qsort(si, n, sizeof *si, by_name);
  for (size_t i = 1; i < n; i++)
    if (strcmp(si[i - 1].key, si[i].key) == 0) {
      const char *dup = si[i].key;
      free(si);
      if (list) return cairn__fail(CAIRN_E_EXISTS, "%s: at least two variables have the same name: '%s'", fn, dup);
      return cairn__fail(CAIRN_E_EXISTS, "%s: checkpoint name '%s' is given twice", fn, dup);
    }
  for (size_t i = 0; i < n; i++) si[i] = (sort_item){vars[i], i};
  if (n > 1) qsort(si, n, sizeof *si, by_ptr);
  for (size_t i = 1; i < n; i++)
    if (si[i - 1].key == si[i].key) {
      size_t a = si[i - 1].idx, b = si[i].idx;
      free(si);
      if (list)
        return cairn__fail(CAIRN_E_EXISTS, "%s: at least two variables have the same name: '%s'", fn, names[a]);
      return cairn__fail(CAIRN_E_INVALID, "%s: the same variable '%s' would be saved and restored with two names: "
                         "'%s' and '%s'", fn, cairn_var_name(vars[a]), names[a], names[b]);
    }
  free(si);

  cairn_saver *s = calloc(1, sizeof *s);
  if (!s) return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  s->names = calloc(n ? n : 1, sizeof *s->names);
  s->vars = malloc((n ? n : 1) * sizeof *s->vars);
  if (!s->names || !s->vars) goto oom;
  for (size_t i = 0; i < n; i++) {
    s->names[i] = cairn__strdup(names[i]);
    if (!s->names[i]) goto oom;
    s->vars[i] = vars[i];
  }
  s->n = n;
  s->max_to_keep = o.max_to_keep;
  s->keep_secs = o.keep_checkpoint_every_n_hours * 3600.0;
  s->wopts = o.write;
  s->clock = o.clock;
  s->clock_ctx = o.clock ? o.clock_ctx : NULL;
  s->env = o.env;
  s->next_keep_time = now(s) + s->keep_secs;
  s->replace_same_step = o.replace_same_step;
  *out = s;
  return CAIRN_OK;
oom:
  s->n = n;
  cairn_saver_free(s);
  return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
}

/* The save set of a constructor (after its own argument checks: out and
 * the source given when n > 0): fill writes the names and variables of
 * at most *n entries into arrays of that size, and sets *n to how many it
 * wrote; then saver_make (by_var_name: the names are the variables'). */
typedef cairn_status (*fill_fn)(const char *fn, const void *src, size_t *n, const char **names, cairn_var **vars);

static cairn_status make_filled(const char *fn, size_t n, int by_var_name, fill_fn fill, const void *src,
                                const char *src_name, const cairn_saver_options *opts, cairn_saver **out) {
  if (out) *out = NULL;
  if (!out) return cairn__fail(CAIRN_E_NULL, "%s: out is NULL", fn);
  if (n > 0 && !src) return cairn__fail(CAIRN_E_NULL, "%s: %s is NULL with n = %zu", fn, src_name, n);
  const char **names = malloc((n ? n : 1) * sizeof *names);
  cairn_var **vars = malloc((n ? n : 1) * sizeof *vars);
  cairn_status st = !names || !vars ? cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn)
                                    : fill(fn, src, &n, names, vars);
  if (!st) st = saver_make(fn, names, vars, n, by_var_name, opts, out);
  free(names);
  free(vars);
  return st;
}

static cairn_status fill_registry(const char *fn, const void *src, size_t *n, const char **names, cairn_var **vars) {
  (void)fn;
  *n = cairn_registry_list(src, CAIRN_COLL_GLOBAL, vars, *n);
  for (size_t i = 0; i < *n; i++) names[i] = cairn_var_name(vars[i]);
  return CAIRN_OK;
}

static cairn_status fill_list(const char *fn, const void *src, size_t *n, const char **names, cairn_var **vars) {
  cairn_var *const *list = src;
  for (size_t i = 0; i < *n; i++) {
    if (!list[i]) return cairn__fail(CAIRN_E_NULL, "%s: vars[%zu] is NULL", fn, i);
    vars[i] = list[i];
    names[i] = cairn_var_name(list[i]);
  }
  return CAIRN_OK;
}

static cairn_status fill_map(const char *fn, const void *src, size_t *n, const char **names, cairn_var **vars) {
  (void)fn;
  const cairn_saver_entry *map = src;
  for (size_t i = 0; i < *n; i++) {
    names[i] = map[i].name;
    vars[i] = map[i].var;
  }
  return CAIRN_OK;
}

cairn_status cairn_saver_new(cairn_registry *r, const cairn_saver_options *opts, cairn_saver **out) {
  if (out) *out = NULL;
  if (!r) return cairn__fail(CAIRN_E_NULL, "saver_new: registry is NULL");
  size_t n = cairn_registry_list(r, CAIRN_COLL_GLOBAL, NULL, 0);
  return make_filled("saver_new", n, 1, fill_registry, r, "registry", opts, out);
}

cairn_status cairn_saver_new_list(cairn_var *const *vars, size_t n, const cairn_saver_options *opts,
                                  cairn_saver **out) {
  return make_filled("saver_new_list", n, 1, fill_list, vars, "vars", opts, out);
}

cairn_status cairn_saver_new_map(const cairn_saver_entry *map, size_t n, const cairn_saver_options *opts,
                                 cairn_saver **out) {
  return make_filled("saver_new_map", n, 0, fill_map, map, "map", opts, out);
}

static void free_last(last_ckpt *l, size_t n) {
  for (size_t i = 0; i < n; i++) free(l[i].path);
  free(l);
}

void cairn_saver_free(cairn_saver *s) {
  if (!s) return;
  cairn__saver_async_free(s); /* the writer may still be reading s */
  if (s->names)
    for (size_t i = 0; i < s->n; i++) free(s->names[i]);
  free(s->names);
  free(s->vars);
  free_last(s->last, s->n_last);
  cairn_ckpt_close(s->restored);
  cairn_ckpt_close(s->compare_with);
  cairn_saver_clear_meta(s);
  free(s);
}

size_t cairn_saver_count(const cairn_saver *s) { return s ? s->n : 0; }
const char *cairn_saver_name_at(const cairn_saver *s, size_t i) { return s && i < s->n ? s->names[i] : NULL; }
cairn_var *cairn_saver_var_at(const cairn_saver *s, size_t i) { return s && i < s->n ? s->vars[i] : NULL; }

/* ---- the save in flight ----------------------------------------------------------
 * The slot (cairn__saver_async, saver_impl.h) is the saver's: here it is
 * waited for, its error taken, its thread stopped and its memory freed;
 * saver_async.c creates it and fills in each job. */

void cairn__saver_meta_free(cairn__meta_item *m, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(m[i].key);
    free(m[i].bytes);
  }
  free(m);
}

void cairn__saver_async_idle(const cairn_saver *s) {
  cairn__saver_async *a = s ? s->async : NULL;
  if (!a) return;
  pthread_mutex_lock(&a->mu);
  while (a->busy) pthread_cond_wait(&a->cv_done, &a->mu);
  pthread_mutex_unlock(&a->mu);
}

/* Takes the error of the last job (under a->mu). */
static cairn_status take_error(cairn__saver_async *a, const char *fn) {
  cairn_status st = a->err;
  if (!st) return CAIRN_OK;
  a->err = CAIRN_OK;
  return cairn__fail(st, "%s: the asynchronous save failed: %s", fn, a->msg);
}

cairn_status cairn__saver_async_drain(cairn_saver *s, const char *fn) {
  cairn__saver_async *a = s->async;
  if (!a) return CAIRN_OK;
  pthread_mutex_lock(&a->mu);
  while (a->busy) pthread_cond_wait(&a->cv_done, &a->mu);
  cairn_status st = take_error(a, fn);
  pthread_mutex_unlock(&a->mu);
  return st;
}

void cairn__saver_async_free(cairn_saver *s) {
  cairn__saver_async *a = s->async;
  if (!a) return;
  pthread_mutex_lock(&a->mu);
  a->quit = 1;
  pthread_cond_broadcast(&a->cv_job);
  pthread_mutex_unlock(&a->mu);
  if (a->running) pthread_join(a->thread, NULL); /* finishes the save in flight first */
  if (a->err)
    cairn_env_log(s->env, CAIRN_LOG_WARN, "saver_free: the asynchronous save failed and nobody asked for its status: %s",
                  a->msg);
  pthread_cond_destroy(&a->cv_job);
  pthread_cond_destroy(&a->cv_done);
  pthread_mutex_destroy(&a->mu);
  free(a->file);
  free(a->dir);
  cairn__dir_guard_clear(&a->guard);
  cairn_free(a->slab);
  free(a->views);
  free(a->tp);
  cairn__saver_meta_free(a->meta, a->n_meta);
  free(a);
  s->async = NULL;
}


cairn_status cairn_saver_save_wait(cairn_saver *s) {
  if (!s) return cairn__fail(CAIRN_E_NULL, "saver_save_wait: saver is NULL");
  return cairn__saver_async_drain(s, "saver_save_wait");
}

cairn_status cairn_saver_save_status(cairn_saver *s, int *in_flight) {
  if (in_flight) *in_flight = 0;
  if (!s) return cairn__fail(CAIRN_E_NULL, "saver_save_status: saver is NULL");
  cairn__saver_async *a = s->async;
  if (!a) return CAIRN_OK;
  pthread_mutex_lock(&a->mu);
  int busy = a->busy;
  cairn_status st = busy ? CAIRN_OK : take_error(a, "saver_save_status");
  pthread_mutex_unlock(&a->mu);
  if (in_flight) *in_flight = busy;
  return st;
}

/* The rotation list and the unchanged flag belong to the save in flight
   until it is done. */
int cairn_saver_last_save_unchanged(const cairn_saver *s) {
  if (!s) return 0;
  cairn__saver_async_idle(s);
  return s->last_unchanged;
}

size_t cairn_saver_last_checkpoints_count(const cairn_saver *s) {
  if (!s) return 0;
  cairn__saver_async_idle(s);
  return s->n_last;
}
const char *cairn_saver_last_checkpoint_at(const cairn_saver *s, size_t i) {
  if (!s) return NULL;
  cairn__saver_async_idle(s);
  return i < s->n_last ? s->last[i].path : NULL;
}

/* ---- metadata --------------------------------------------------------------------- */

void cairn_saver_clear_meta(cairn_saver *s) {
  if (!s) return;
  cairn__saver_meta_free(s->meta, s->n_meta);
  s->meta = NULL;
  s->n_meta = 0;
}

/* Validates key, builds prefix+key, and returns the slot for it (existing
 * one cleared, or a new one appended); NULL with *st set on error. */
static meta_item *meta_slot(cairn_saver *s, const char *fn, const char *prefix, const char *key,
                            cairn_status *st) {
  if (!s) {
    *st = cairn__fail(CAIRN_E_NULL, "%s: saver is NULL", fn);
    return NULL;
  }
  if (!key) {
    *st = cairn__fail(CAIRN_E_NULL, "%s: key is NULL", fn);
    return NULL;
  }
  size_t pl = strlen(prefix), kl = strlen(key);
  if (kl == 0 || pl + kl > META_KEY_MAX) {
    *st = cairn__fail(CAIRN_E_INVALID, "%s: key '%.64s' is %zu bytes; it must have 1 to %zu", fn, key, kl,
                      (size_t)META_KEY_MAX - pl);
    return NULL;
  }
  for (size_t i = 0; i < kl; i++) {
    char c = key[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.')) {
      *st = cairn__fail(CAIRN_E_INVALID, "%s: key '%.64s': byte 0x%02x at offset %zu is not allowed (use a-z 0-9 _ .)",
                        fn, key, (unsigned char)c, i);
      return NULL;
    }
  }
  char *full = malloc(pl + kl + 1);
  if (!full) {
    *st = cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
    return NULL;
  }
  memcpy(full, prefix, pl);
  memcpy(full + pl, key, kl + 1);
  for (size_t i = 0; i < s->n_meta; i++)
    if (strcmp(s->meta[i].key, full) == 0) {
      free(full);
      free(s->meta[i].bytes);
      s->meta[i].bytes = NULL;
      s->meta[i].len = 0;
      return &s->meta[i];
    }
  meta_item *m = realloc(s->meta, (s->n_meta + 1) * sizeof *m);
  if (!m) {
    free(full);
    *st = cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
    return NULL;
  }
  s->meta = m;
  meta_item *it = &s->meta[s->n_meta++];
  memset(it, 0, sizeof *it);
  it->key = full;
  return it;
}

static cairn_status set_bytes(cairn_saver *s, const char *fn, const char *prefix, const char *key,
                              cairn_meta_type type, const void *data, size_t len) {
  cairn_status st = CAIRN_OK;
  if (s && len > 0 && !data) return cairn__fail(CAIRN_E_NULL, "%s: data is NULL with len = %zu", fn, len);
  char *copy = malloc(len + 1);
  if (!copy) return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  if (len) memcpy(copy, data, len);
  copy[len] = '\0';
  meta_item *it = meta_slot(s, fn, prefix, key, &st);
  if (!it) {
    free(copy);
    return st;
  }
  it->type = type;
  it->bytes = copy;
  it->len = len;
  return CAIRN_OK;
}

cairn_status cairn_saver_set_user_str(cairn_saver *s, const char *key, const char *value) {
  if (!value) return cairn__fail(CAIRN_E_NULL, "saver_set_user_str: value is NULL");
  return set_bytes(s, "saver_set_user_str", "user.", key, CAIRN_META_STR, value, strlen(value));
}

cairn_status cairn_saver_set_state(cairn_saver *s, const char *name, const void *data, size_t len) {
  return set_bytes(s, "saver_set_state", "train.state.", name, CAIRN_META_BYTES, data, len);
}

/* user.<key> = a number: I64 i, or F64 f. */
static cairn_status set_number(cairn_saver *s, const char *fn, const char *key, cairn_meta_type type, int64_t i,
                               double f) {
  cairn_status st = CAIRN_OK;
  meta_item *it = meta_slot(s, fn, "user.", key, &st);
  if (!it) return st;
  it->type = type;
  it->i = i;
  it->f = f;
  return CAIRN_OK;
}

cairn_status cairn_saver_set_user_i64(cairn_saver *s, const char *key, int64_t value) {
  return set_number(s, "saver_set_user_i64", key, CAIRN_META_I64, value, 0.0);
}

cairn_status cairn_saver_set_user_f64(cairn_saver *s, const char *key, double value) {
  return set_number(s, "saver_set_user_f64", key, CAIRN_META_F64, 0, value);
}

/* ---- saving ------------------------------------------------------------------------ */

/* Deletes the recovered checkpoint `path` that rotation evicted after a
 * save to `file`, only if it is one of this saver's files: a regular file
 * named "<prefix base>-<step>" in the directory of `file`. Recovered paths
 * come from a state file, which anyone who can write one text file in the
 * directory controls; nothing else is deleted, and the unlink goes through
 * a descriptor of that directory so a swapped link cannot lead elsewhere. */
static void delete_recovered(const cairn_saver *s, const char *path, const char *file, const char *dir) {
  const char *fb = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
  const char *pb = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  const char *dash = strrchr(fb, '-');
  size_t plen = dash ? (size_t)(dash - fb) : 0; /* the prefix's base name */
  int named = dash && strncmp(pb, fb, plen) == 0 && pb[plen] == '-' && pb[plen + 1];
  for (const char *q = pb + plen + 1; named && *q; q++) named = *q >= '0' && *q <= '9';
  char *pd = cairn__path_dir(path);
  char *rp = pd ? realpath(pd, NULL) : NULL, *rd = realpath(dir, NULL);
  int here = rp && rd && strcmp(rp, rd) == 0;
  free(pd);
  free(rp);
  free(rd);
  const char *why = NULL;
  int dfd = -1;
  struct stat sb;
  if (!named || !here) {
    why = "not a checkpoint of this saver's '<prefix>-<step>' naming in the directory of the save";
  } else if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
    why = "cannot open its directory";
  } else if (fstatat(dfd, pb, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
    why = errno == ENOENT ? NULL : "cannot stat it"; /* already gone: nothing to do */
  } else if (!S_ISREG(sb.st_mode)) {
    why = "not a regular file";
  } else if (unlinkat(dfd, pb, 0) != 0 && errno != ENOENT) {
    /* TF logs and ignores deletion errors; so do we */
  }
  if (dfd >= 0) close(dfd);
  if (why)
    cairn_env_log(s->env, CAIRN_LOG_WARN, "saver_save '%s': not deleting '%s' (evicted by max_to_keep): %s", file, path,
                  why);
}

/* "save '<path>': " + the current detail, keeping the status. */
static cairn_status wrap(cairn_status st, const char *path, const char *what) {
  if (!what[0] && strstr(cairn_errmsg(), path)) return cairn__fail_wrap(st, "save: "); /* already names the file */
  return cairn__fail_wrap(st, "save '%s': %s", path, what);
}

/* How many differing variables the same-step refusal names before "and K
 * more". */
#define SAME_STEP_NAMES 8

/* 1 when the metadata item with key `key` of checkpoint c equals what a
 * save of s at `step` writes under that key; 0 otherwise. */
static int meta_same(const meta_item *meta, size_t n_meta, const cairn_ckpt *c, const char *key,
                     cairn_meta_type type, int64_t step) {
  if (strcmp(key, "train.global_step") == 0) {
    int64_t v;
    return type == CAIRN_META_I64 && cairn_ckpt_meta_i64(c, key, &v) == CAIRN_OK && v == step;
  }
  for (size_t i = 0; i < n_meta; i++) {
    const meta_item *m = &meta[i];
    if (strcmp(m->key, key) != 0) continue;
    if (m->type != type) return 0;
    switch (type) {
    case CAIRN_META_I64: {
      int64_t v;
      return cairn_ckpt_meta_i64(c, key, &v) == CAIRN_OK && v == m->i;
    }
    case CAIRN_META_F64: {
      double v;
      return cairn_ckpt_meta_f64(c, key, &v) == CAIRN_OK && memcmp(&v, &m->f, sizeof v) == 0;
    }
    case CAIRN_META_STR: {
      const char *v;
      return cairn_ckpt_meta_str(c, key, &v) == CAIRN_OK && strcmp(v, m->bytes) == 0;
    }
    default: {
      const void *v;
      size_t len;
      return cairn_ckpt_meta_bytes(c, key, &v, &len) == CAIRN_OK && len == m->len &&
             (len == 0 || memcmp(v, m->bytes, len) == 0);
    }
    }
  }
  return 0;
}

/* The save of step `step` would go to `file`, where a file already is.
 * TF's Saver replaces it. When that file is a committed checkpoint holding
 * other values, replacing it loses a checkpoint that was reported saved —
 * the restart trap: restore model.ckpt-100, let local_init_op load
 * pretrained weights over it, and the save right after session creation
 * overwrote the fine-tuned model.ckpt-100 in place. So: identical contents
 * (every tensor bit for bit, the same metadata; ckpt.producer aside) →
 * *unchanged = 1 and nothing is rewritten; other contents → CAIRN_E_EXISTS,
 * nothing is written. A file that does not open as a checkpoint, fails
 * cairn_ckpt_verify or was marked corrupt (cairn_checkpoint_mark_corrupt)
 * is not a good checkpoint: it is replaced as before (*unchanged = 0,
 * CAIRN_OK). */
static cairn_status same_step_check(const cairn_saver *s, const char *fn, const char *file, int64_t step,
                                    const cairn_tensor *const *tensors, const meta_item *meta, size_t n_meta,
                                    int *unchanged) {
  *unchanged = 0;
  if (cairn_checkpoint_is_marked_corrupt(file)) return CAIRN_OK; /* found damaged by a restore */
  cairn_ckpt *c = NULL;
  if (s->compare_with && cairn__ckpt_is_file(s->compare_with, file)) c = s->compare_with; /* a resume's restore */
  else if (cairn_ckpt_open(file, NULL, &c) != CAIRN_OK) return CAIRN_OK;
  char names[1024] = "";
  size_t differ = 0, n_ckpt = cairn_ckpt_count(c);
  int broken = 0;
  cairn_status st = CAIRN_OK;
  for (size_t i = 0; i < s->n && !broken && !st; i++) {
    const cairn_tensor *t = tensors[i];
    size_t bytes = cairn_tensor_nbytes(t);
    cairn_ckpt_entry e;
    int same = cairn_ckpt_find(c, s->names[i], &e) == CAIRN_OK && e.dtype == t->dtype && e.rank == t->rank &&
               e.raw_bytes == bytes;
    for (int d = 0; same && d < t->rank; d++) same = e.shape[d] == t->shape[d];
    /* The index's CRC of the stored bytes settles most differences without
       reading; equal CRCs are confirmed bit for bit. */
    if (same) same = e.raw_crc32c == cairn_crc32c(0, t->data, bytes);
    if (same && bytes) {
      cairn_tensor *old = NULL;
      if ((st = cairn_tensor_new(t->dtype, t->rank, t->shape, &old)) != CAIRN_OK) break;
      if (cairn_ckpt_read(c, s->names[i], old) != CAIRN_OK) broken = 1;
      else same = memcmp(old->data, t->data, bytes) == 0;
      cairn_tensor_free(old);
    }
    if (!same && !broken && differ++ < SAME_STEP_NAMES) {
      size_t used = strlen(names);
      snprintf(names + used, sizeof names - used, "%s'%.200s'", differ > 1 ? ", " : "", s->names[i]);
    }
  }
  /* Checkpoint names the save set does not have, and the metadata. */
  size_t extra = n_ckpt > s->n ? n_ckpt - s->n : 0;
  size_t meta_diff = 0, n_keys = 0;
  const char *first_key = NULL;
  for (size_t i = 0; i < cairn_ckpt_meta_count(c) && !st; i++) {
    const char *key;
    cairn_meta_type type;
    if (cairn_ckpt_meta_at(c, i, &key, &type) != CAIRN_OK || strncmp(key, "ckpt.", 5) == 0) continue;
    n_keys++;
    if (!meta_same(meta, n_meta, c, key, type, step) && meta_diff++ == 0) first_key = key;
  }
  /* A key the save would add that the file lacks (train.global_step is
     always written at a step, so it is counted above). */
  for (size_t k = 0; k < n_meta && !meta_diff && n_keys != n_meta + 1; k++) {
    int found = 0;
    for (size_t i = 0; i < cairn_ckpt_meta_count(c) && !found; i++) {
      const char *key;
      cairn_meta_type type;
      found = cairn_ckpt_meta_at(c, i, &key, &type) == CAIRN_OK && strcmp(key, meta[k].key) == 0;
    }
    if (!found) {
      meta_diff = 1;
      first_key = meta[k].key;
    }
  }
  if (n_keys != n_meta + 1 && meta_diff == 0) meta_diff = 1;
  /* Before refusing, make sure the old file is sound: a damaged one (a bad
     checksum anywhere) holds nothing worth keeping. */
  if (!st && !broken && (differ || extra || meta_diff) && cairn_ckpt_verify(c) != CAIRN_OK) broken = 1;
  if (!st && !broken) {
    if (!differ && !extra && !meta_diff) {
      *unchanged = 1;
    } else {
      char what[1400], more[48] = "";
      if (differ > SAME_STEP_NAMES) snprintf(more, sizeof more, " and %zu more", differ - SAME_STEP_NAMES);
      if (differ)
        snprintf(what, sizeof what, "%zu of %zu variables differ: %s%s", differ, s->n, names, more);
      else if (extra)
        snprintf(what, sizeof what, "it has %zu tensor%s the save set does not", extra, extra == 1 ? "" : "s");
      else if (first_key)
        snprintf(what, sizeof what, "metadata '%.300s' differs", first_key);
      else
        snprintf(what, sizeof what, "its metadata lacks keys this save writes");
      st = cairn__fail(CAIRN_E_EXISTS,
                       "%s '%s': a checkpoint of step %lld is already there with other contents (%s); refusing "
                       "to replace it, so that no checkpoint reported saved is lost. Save under a new step or "
                       "prefix, remove the file, or set cairn_saver_options.replace_same_step = 1 (TF's "
                       "overwrite)",
                       fn, file, (long long)step, what);
    }
  }
  if (c != s->compare_with) cairn_ckpt_close(c);
  return st;
}

void cairn__saver_keep_restored(cairn_saver *s, cairn_ckpt *c) {
  cairn_ckpt_close(s->restored);
  s->restored = c;
}

/* Lists the uninitialized variables of the save set into msg. */
static size_t uninitialized(const cairn_saver *s, char *msg, size_t len) {
  size_t count = 0, used = 0;
  msg[0] = '\0';
  for (size_t i = 0; i < s->n; i++) {
    if (cairn_var_is_initialized(s->vars[i])) continue;
    count++;
    const char *name = cairn_var_name(s->vars[i]);
    size_t need = strlen(name) + 4;
    if (used + need + 8 < len) {
      used += (size_t)snprintf(msg + used, len - used, "%s'%s'", used ? ", " : "", name);
    } else if (used + 5 < len && !strstr(msg, "...")) {
      used += (size_t)snprintf(msg + used, len - used, ", ...");
    }
  }
  return count;
}

/* The guarded directory is still the one locked (cairn__dir_guard_check),
 * the message naming the save: "saver_save 'd/model.ckpt-5': checkpoint
 * directory 'd' was removed while training: ...". */
static cairn_status guard_check(const cairn__dir_guard *g, const char *fn, const char *file) {
  if (!cairn__dir_guard_changed(g)) return CAIRN_OK;
  char what[CAIRN__ERRMSG_LEN / 2];
  snprintf(what, sizeof what, "%s '%s'", fn, file);
  return cairn__dir_guard_check(g, what);
}

cairn_status cairn__saver_prepare(cairn_saver *s, const char *fn, const char *prefix, int64_t global_step,
                                  char *path, size_t len, const cairn__dir_guard *guard, char **file_out,
                                  char **dir_out, int *empty) {
  *file_out = *dir_out = NULL;
  *empty = 0;
  if (path && len) path[0] = '\0';
  if (!s) return cairn__fail(CAIRN_E_NULL, "%s: saver is NULL", fn);
  /* At most one save in flight: wait for it. A failed background save is
     reported by the next save, whatever its kind, which then does not start. */
  cairn_status st = cairn__saver_async_drain(s, fn);
  if (st) return st;
  /* Only the first save after a restore can be of the restored step: its
     commit compares with the restored checkpoint, still open. */
  cairn_ckpt_close(s->compare_with);
  s->compare_with = s->restored;
  s->restored = NULL;
  s->last_unchanged = 0;
  if (!prefix) return cairn__fail(CAIRN_E_NULL, "%s: prefix is NULL", fn);
  if (!prefix[0]) return cairn__fail(CAIRN_E_INVALID, "%s: prefix is empty", fn);
  if (path && len == 0) return cairn__fail(CAIRN_E_LIMIT, "%s: path buffer has 0 bytes", fn);

  size_t pl = strlen(prefix);
  char *file = malloc(pl + 24);
  if (!file) return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  if (global_step >= 0) snprintf(file, pl + 24, "%s-%lld", prefix, (long long)global_step);
  else memcpy(file, prefix, pl + 1);

  char *dir = NULL;
  const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
  if (strcmp(base, "checkpoint") == 0) {
    st = cairn__fail(CAIRN_E_INVALID, "%s: '%s' collides with the state file 'checkpoint' of its directory; give a "
                     "global_step or another prefix", fn, file);
    goto fail;
  }
  if (!base[0]) {
    st = cairn__fail(CAIRN_E_INVALID, "%s: prefix '%s' names a directory, not a file", fn, prefix);
    goto fail;
  }
  if (path && strlen(file) + 1 > len) {
    st = cairn__fail(CAIRN_E_LIMIT, "%s: '%s' needs %zu bytes, path holds %zu", fn, file, strlen(file) + 1, len);
    goto fail;
  }
  if (s->n == 0) { /* allow_empty: TF returns None, writes nothing */
    *empty = 1;
    free(file);
    return CAIRN_OK;
  }

  char names[CAIRN__ERRMSG_LEN - 256]; /* + the file name and the words around the list */
  size_t nu = uninitialized(s, names, sizeof names);
  if (nu) {
    st = cairn__fail(CAIRN_E_UNINITIALIZED, "%s '%s': %zu variable%s not initialized: %s", fn, file, nu,
                     nu == 1 ? " is" : "s are", names);
    goto fail;
  }
  dir = cairn__path_dir(file);
  if (!dir) {
    st = cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
    goto fail;
  }
  /* Before the parent's check: a removed directory is named as such, not
     as a missing parent the caller should create. */
  if ((st = guard_check(guard, fn, file)) != CAIRN_OK) goto fail;
  struct stat sb;
  int se = stat(dir, &sb) != 0 ? errno : 0;
  if (se || !S_ISDIR(sb.st_mode)) {
    st = cairn__fail(CAIRN_E_NOT_FOUND,
                     "%s: parent directory '%s' of '%s' %s, can't save (the Saver does not create directories, "
                     "as TF's; CheckpointSaverHook and MonitoredTrainingSession create their checkpoint_dir)",
                     fn, dir, file, se == ENOENT ? "doesn't exist" : se ? strerror(se) : "is not a directory");
    goto fail;
  }
  *file_out = file;
  *dir_out = dir;
  return CAIRN_OK;
fail:
  free(dir);
  free(file);
  return st;
}

/* Step 1 of a commit: the checkpoint file, written under a temporary name
 * and renamed into place once whole (the rename names the directory by
 * its path: the guard is checked right before). */
static cairn_status commit_write_file(cairn_saver *s, const char *fn, const char *file, int64_t global_step,
                                      const cairn_tensor *const *tensors, const meta_item *meta, size_t n_meta,
                                      const cairn__dir_guard *guard) {
  cairn_ckpt_writer *w = NULL;
  cairn_status st = cairn_ckpt_writer_open(file, &s->wopts, &w);
  if (st) return wrap(st, file, "");
  for (size_t i = 0; i < s->n; i++)
    if ((st = cairn_ckpt_writer_add(w, s->names[i], tensors[i]))) {
      char what[1100];
      snprintf(what, sizeof what, "writing '%s': ", s->names[i]);
      st = wrap(st, file, what);
      cairn_ckpt_writer_abort(w);
      return st;
    }
  char producer[64];
  snprintf(producer, sizeof producer, "cairn %s", cairn_version_string());
  if (global_step >= 0) st = cairn_ckpt_writer_meta_i64(w, "train.global_step", global_step);
  if (!st) st = cairn_ckpt_writer_meta_str(w, "ckpt.producer", producer);
  for (size_t i = 0; i < n_meta && !st; i++) {
    const meta_item *m = &meta[i];
    switch (m->type) {
    case CAIRN_META_I64: st = cairn_ckpt_writer_meta_i64(w, m->key, m->i); break;
    case CAIRN_META_F64: st = cairn_ckpt_writer_meta_f64(w, m->key, m->f); break;
    case CAIRN_META_STR: st = cairn_ckpt_writer_meta_str(w, m->key, m->bytes); break;
    default: st = cairn_ckpt_writer_meta_bytes(w, m->key, m->bytes, m->len); break;
    }
  }
  if (st) {
    st = wrap(st, file, "metadata: ");
    cairn_ckpt_writer_abort(w);
    return st;
  }
  if ((st = guard_check(guard, fn, file)) != CAIRN_OK) {
    cairn_ckpt_writer_abort(w);
    return st;
  }
  st = cairn_ckpt_writer_commit(w); /* frees w whatever the outcome */
  return st ? wrap(st, file, "") : CAIRN_OK;
}

/* The rotation list a commit builds: s->last without `file`, then `file`
 * (nl[n_nl - 1], its own copy); entries [0, first) are evicted; all[0..n_all)
 * the paths the state file lists. */
typedef struct rotation {
  last_ckpt *nl;
  size_t n_nl, first;
  const char **all;
  size_t n_all;
} rotation;

/* Step 2: the rotation list (TF's _RecordLastCheckpoint): drop an old
 * entry of the same path, append, evict beyond max_to_keep. */
static cairn_status commit_rotation(cairn_saver *s, const char *fn, const char *file, int existed, rotation *r) {
  double t = now(s);
  r->nl = malloc((s->n_last + 1) * sizeof *r->nl);
  r->all = malloc((s->n_last + 1) * sizeof *r->all);
  char *fcopy = cairn__strdup(file);
  if (!r->nl || !r->all || !fcopy) {
    free(fcopy);
    if (!existed) unlink(file);
    return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory after writing '%s'", fn, file);
  }
  for (size_t i = 0; i < s->n_last; i++)
    if (strcmp(s->last[i].path, file) != 0) r->nl[r->n_nl++] = s->last[i]; /* shares the strings for now */
  r->nl[r->n_nl++] = (last_ckpt){fcopy, t, 0};
  if (s->max_to_keep > 0)
    while (r->n_nl - r->first > (size_t)s->max_to_keep) r->first++;
  /* max_to_keep 0: TF records nothing and the state file lists only the newest */
  if (s->max_to_keep > 0)
    for (size_t i = r->first; i < r->n_nl; i++) r->all[r->n_all++] = r->nl[i].path;
  return CAIRN_OK;
}

/* Step 3: the state file. Changed since the rename, what is at the path
 * now is not ours: neither write a state file into it nor remove "the new
 * checkpoint" from it. */
static cairn_status commit_state_file(cairn_saver *s, const char *fn, const char *file, const char *dir, int existed,
                                      const rotation *r, const cairn__dir_guard *guard) {
  cairn_status st = guard_check(guard, fn, file);
  if (st != CAIRN_OK) return st;
  st = cairn_checkpoint_state_write(dir, file, r->all, r->n_all, s->wopts.no_fsync);
  if (!st) return CAIRN_OK;
  const char *inner = cairn__errmsg_copy();
  if (!existed) unlink(file);
  return cairn__fail(st, "save '%s': the checkpoint was written but the state file could not be (%s); %s", file,
                     inner, existed ? "the new file replaced the old one of that name" : "removed the new checkpoint");
}

/* Step 4: the list becomes the saver's, and what was evicted is deleted
 * (TF's _MaybeDeleteOldCheckpoints); not in a directory that replaced
 * ours: its files of those names are someone else's (the guard's error is
 * returned, the list committed all the same). */
static cairn_status commit_list(cairn_saver *s, const char *fn, const char *file, const char *dir, rotation *r,
                                const cairn__dir_guard *guard) {
  cairn_status lost = guard_check(guard, fn, file);
  for (size_t i = 0; i < s->n_last; i++)
    if (strcmp(s->last[i].path, file) == 0) free(s->last[i].path);
  free(s->last);
  s->last = NULL;
  s->n_last = 0;
  if (s->max_to_keep <= 0) { /* nothing is recorded */
    for (size_t i = 0; i < r->n_nl; i++) free(r->nl[i].path);
    return lost;
  }
  for (size_t k = 0; k < r->first; k++) {
    last_ckpt *e = &r->nl[k];
    if (e->time > s->next_keep_time) {
      s->next_keep_time += s->keep_secs; /* kept forever: leaves the list, stays on disk */
    } else if (lost) {
      /* not ours to delete any more */
    } else if (e->recovered) {
      delete_recovered(s, e->path, file, dir);
    } else if (unlink(e->path) != 0 && errno != ENOENT) {
      /* TF logs and ignores deletion errors; so do we */
    }
    free(e->path);
  }
  memmove(r->nl, r->nl + r->first, (r->n_nl - r->first) * sizeof *r->nl);
  s->last = r->nl;
  s->n_last = r->n_nl - r->first;
  r->nl = NULL;
  return lost;
}

/* A step that failed because the directory went away under it (the
 * rename, the state file: "No such file or directory") is reported as
 * what happened, with its own error after it. */
static cairn_status commit_explain(const cairn_saver *s, const char *fn, const char *file,
                                   const cairn__dir_guard *guard, cairn_status st) {
  const char *how = st && st != CAIRN_E_NOT_FOUND ? cairn__dir_guard_changed(guard) : NULL;
  /* rm -rf still at work: the directory is still there, but a file of
     this save vanished ("No such file or directory" from the rename or the
     state file). It is gone in a moment: look again for a little while
     (a failed save only), then say so if the newest checkpoint committed
     before has vanished too. */
  if (st && st != CAIRN_E_NOT_FOUND && !how && guard && guard->dir && strstr(cairn_errmsg(), strerror(ENOENT))) {
    for (int i = 0; i < 50 && !how; i++) {
      struct timespec ts = {0, 10 * 1000 * 1000};
      nanosleep(&ts, NULL);
      how = cairn__dir_guard_changed(guard);
    }
    struct stat gone;
    if (!how && s->n_last > 0 && stat(s->last[s->n_last - 1].path, &gone) != 0 && errno == ENOENT)
      how = "being removed (its files vanish)";
  }
  if (!how) return st;
  char *inner = cairn__errmsg_hold();
  char at[CAIRN__ERRMSG_LEN / 2];
  snprintf(at, sizeof at, "%s '%s'", fn, file);
  cairn_status gs = cairn__dir_guard_fail(guard, at, how);
  gs = cairn__fail(gs, "%s; the save failed with: %.8191s", cairn__errmsg_copy(), inner ? inner : "out of memory");
  free(inner);
  return gs;
}

cairn_status cairn__saver_commit(cairn_saver *s, const char *fn, const char *file, const char *dir,
                                 int64_t global_step, const cairn_tensor *const *tensors, const meta_item *meta,
                                 size_t n_meta, const cairn__dir_guard *guard) {
  s->last_unchanged = 0;
  /* An asynchronous save's phase 2 starts a while after its checks. */
  cairn_status st = guard_check(guard, fn, file);
  int existed = 0, unchanged = 0;
  if (!st) {
    struct stat sb;
    existed = stat(file, &sb) == 0;
    if (existed && global_step >= 0 && !s->replace_same_step)
      st = same_step_check(s, fn, file, global_step, tensors, meta, n_meta, &unchanged);
  }
  cairn_ckpt_close(s->compare_with); /* the restored checkpoint has served its one comparison */
  s->compare_with = NULL;
  /* unchanged: the file already holds exactly this; keep it */
  if (!st && !unchanged) st = commit_write_file(s, fn, file, global_step, tensors, meta, n_meta, guard);
  rotation r = {0};
  if (!st) st = commit_rotation(s, fn, file, existed, &r);
  if (!st && (st = commit_state_file(s, fn, file, dir, existed, &r, guard)) != CAIRN_OK)
    free(r.nl[r.n_nl - 1].path); /* the new entry; the others are still s->last's */
  if (!st) {
    st = commit_list(s, fn, file, dir, &r, guard);
    s->last_unchanged = unchanged;
  }
  free(r.nl);
  free(r.all);
  return commit_explain(s, fn, file, guard, st);
}

/* A synchronous save; guard (may be NULL) as for cairn__saver_commit. */
static cairn_status save_guarded(cairn_saver *s, const char *prefix, int64_t global_step, char *path, size_t len,
                                 const cairn__dir_guard *guard) {
  static const char fn[] = "saver_save";
  char *file, *dir;
  int empty;
  cairn_status st = cairn__saver_prepare(s, fn, prefix, global_step, path, len, guard, &file, &dir, &empty);
  if (st || empty) return st;
  const cairn_tensor **t = malloc(s->n * sizeof *t);
  if (!t) {
    st = cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  } else {
    for (size_t i = 0; i < s->n; i++) t[i] = cairn_var_tensor(s->vars[i]);
    st = cairn__saver_commit(s, fn, file, dir, global_step, t, s->meta, s->n_meta, guard);
    if (!st && path) memcpy(path, file, strlen(file) + 1);
  }
  free(t);
  free(dir);
  free(file);
  return st;
}

cairn_status cairn_saver_save(cairn_saver *s, const char *prefix, int64_t global_step, char *path, size_t len) {
  return save_guarded(s, prefix, global_step, path, len, NULL);
}

cairn_status cairn__saver_prefix_in(const char *fn, const cairn_checkpoint_dir *d, const char *basename,
                                    char **prefix) {
  *prefix = NULL;
  if (!d) return cairn__fail(CAIRN_E_NULL, "%s: checkpoint directory is NULL", fn);
  const char *b = basename ? basename : "model.ckpt";
  size_t n = strlen(b);
  int dotdot = 0;
  for (const char *c = b; *c; c = strchr(c, '/') ? strchr(c, '/') + 1 : c + strlen(c))
    dotdot |= c[0] == '.' && c[1] == '.' && (c[2] == '/' || c[2] == '\0');
  if (!n || b[0] == '/' || dotdot)
    return cairn__fail(CAIRN_E_INVALID,
                       "%s: basename '%s' must name files inside the checkpoint directory (e.g. \"model.ckpt\"): %s",
                       fn, b, !n ? "it is empty" : b[0] == '/' ? "it is absolute" : "it has a '..' component");
  const char *dp = cairn_checkpoint_dir_path(d);
  size_t len = strlen(dp) + 1 + n + 1;
  if (!(*prefix = malloc(len))) return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  snprintf(*prefix, len, "%s/%s", dp, b);
  return CAIRN_OK;
}

cairn_status cairn_saver_save_in(cairn_saver *s, cairn_checkpoint_dir *d, const char *basename, int64_t global_step,
                                 char *path, size_t len) {
  char *prefix = NULL;
  cairn_status st = cairn__saver_prefix_in("saver_save", d, basename, &prefix);
  if (st) return st;
  st = save_guarded(s, prefix, global_step, path, len, cairn__checkpoint_dir_guard(d));
  free(prefix);
  return st;
}

cairn_status cairn_saver_recover_last_checkpoints(cairn_saver *s, const char *const *paths, size_t n) {
  static const char fn[] = "saver_recover_last_checkpoints";
  if (!s) return cairn__fail(CAIRN_E_NULL, "%s: saver is NULL", fn);
  cairn__saver_async_idle(s); /* the save in flight commits to the list it replaces */
  if (n > 0 && !paths) return cairn__fail(CAIRN_E_NULL, "%s: paths is NULL with n = %zu", fn, n);
  for (size_t i = 0; i < n; i++)
    if (!paths[i]) return cairn__fail(CAIRN_E_NULL, "%s: paths[%zu] is NULL", fn, i);
  last_ckpt *nl = malloc((n ? n : 1) * sizeof *nl);
  if (!nl) return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    struct stat sb;
    if (stat(paths[i], &sb) != 0) continue; /* deleted meanwhile: fine, as TF */
    int dup = 0;
    for (size_t j = 0; j < k; j++) dup |= strcmp(nl[j].path, paths[i]) == 0;
    if (dup) continue;
    nl[k].path = cairn__strdup(paths[i]);
    if (!nl[k].path) {
      free_last(nl, k);
      return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
    }
    nl[k].time = (double)sb.st_mtim.tv_sec + 1e-9 * (double)sb.st_mtim.tv_nsec;
    nl[k].recovered = 1;
    k++;
  }
  free_last(s->last, s->n_last);
  s->last = nl;
  s->n_last = k;
  return CAIRN_OK;
}
