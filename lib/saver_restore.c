/* Restore: TF's strict Saver.restore, the partial restore (include /
 * exclude globs, assignment_map-style renaming, strict or lenient) with its
 * report, and the metadata snapshot of a checkpoint.
 *
 * Order, so that a failure changes nothing, in extra memory that does not
 * grow with the model (TF reads every tensor in one bulk op before assigning
 * any, saver.py / restore_v2, so it holds the state twice; cairn verifies
 * first and then decodes in place, doc/restore-memory.md):
 *   1. open the file (superblock, footer, metadata, index);
 *   2. classify every variable of the save set from the index alone:
 *      skipped / missing / mismatched / restorable; the unused checkpoint
 *      names follow;
 *   3. strict and anything missing or mismatched: fail, with the report;
 *   4. verify every restorable tensor (cairn_ckpt_verify_tensor: every
 *      checksum, through a scratch buffer of one chunk per thread) and copy
 *      the metadata; any error: fail, nothing was changed;
 *   5. decode every restorable tensor straight into its variable
 *      (cairn_ckpt_read checks every checksum again; compact tensors the
 *      verify staged are copied, not decoded again) and check that the
 *      file did not change meanwhile (cairn_ckpt_check_unchanged); then
 *      mark them initialized. Step 5 fails only if the file changed or
 *      could not be read after step 4: the error says so and names the
 *      variables already overwritten, which are marked uninitialized so
 *      that nothing trains on half-restored values. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include "internal.h"
#include "saver_impl.h"
#include "var_impl.h"
#include "ckpt_backend.h"
#include "restore_impl.h"
#include "suggest_impl.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cairn/ckpt.h"
#include "cairn/saver.h"
#include "table.h"

/* "(2, 3)" / "()" */
static char *shape_str(int rank, const int64_t *shape, char *buf, size_t len) {
  size_t used = 0;
  used += (size_t)snprintf(buf, len, "(");
  for (int i = 0; i < rank && used < len; i++)
    used += (size_t)snprintf(buf + used, len - used, "%s%lld", i ? ", " : "", (long long)shape[i]);
  if (used < len) snprintf(buf + used, len - used, ")");
  return buf;
}

/* ---- metadata snapshot -------------------------------------------------------- */

typedef cairn__meta_item meta_kv; /* the Saver's own metadata item */

struct cairn_saver_meta {
  meta_kv *kv;
  size_t n;
};

void cairn_saver_meta_free(cairn_saver_meta *m) {
  if (!m) return;
  cairn__saver_meta_free(m->kv, m->n);
  free(m);
}

/* Copies the metadata of an open checkpoint. */
static cairn_status meta_from(const cairn_ckpt *c, const char *path, cairn_saver_meta **out) {
  static const char fn[] = "saver_meta_read";
  size_t n = cairn_ckpt_meta_count(c);
  cairn_saver_meta *m = calloc(1, sizeof *m);
  if (!m) return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  m->kv = calloc(n ? n : 1, sizeof *m->kv);
  if (!m->kv) {
    free(m);
    return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  }
  cairn_status st = CAIRN_OK;
  for (size_t i = 0; i < n && !st; i++) {
    const char *key;
    cairn_meta_type type;
    if ((st = cairn_ckpt_meta_at(c, i, &key, &type))) break;
    meta_kv *kv = &m->kv[m->n];
    kv->type = type;
    kv->key = cairn__strdup(key);
    if (!kv->key) {
      st = CAIRN_E_NOMEM;
      break;
    }
    m->n++;
    const char *sv;
    const void *bv;
    size_t bl = 0;
    switch (type) {
    case CAIRN_META_U64: st = cairn_ckpt_meta_u64(c, key, &kv->u); break;
    case CAIRN_META_I64: st = cairn_ckpt_meta_i64(c, key, &kv->i); break;
    case CAIRN_META_F64: st = cairn_ckpt_meta_f64(c, key, &kv->f); break;
    case CAIRN_META_BOOL: st = cairn_ckpt_meta_bool(c, key, &kv->b); break;
    case CAIRN_META_STR:
      if (!(st = cairn_ckpt_meta_str(c, key, &sv))) {
        kv->bytes = cairn__strdup(sv);
        kv->len = strlen(sv);
        if (!kv->bytes) st = CAIRN_E_NOMEM;
      }
      break;
    case CAIRN_META_BYTES:
      if (!(st = cairn_ckpt_meta_bytes(c, key, &bv, &bl))) {
        kv->bytes = malloc(bl + 1);
        if (!kv->bytes) {
          st = CAIRN_E_NOMEM;
          break;
        }
        if (bl) memcpy(kv->bytes, bv, bl);
        kv->bytes[bl] = '\0';
        kv->len = bl;
      }
      break;
    default: break; /* a type from a newer minor version: kept as a key only */
    }
  }
  if (st) {
    cairn_saver_meta_free(m);
    if (st == CAIRN_E_NOMEM) return cairn__fail(st, "%s: out of memory", fn);
    return cairn__fail_wrap(st, "%s '%s': ", fn, path);
  }
  *out = m;
  return CAIRN_OK;
}

cairn_status cairn_saver_meta_read(const char *path, cairn_saver_meta **out) {
  static const char fn[] = "saver_meta_read";
  if (out) *out = NULL;
  if (!path) return cairn__fail(CAIRN_E_NULL, "%s: path is NULL", fn);
  if (!out) return cairn__fail(CAIRN_E_NULL, "%s: out is NULL", fn);
  cairn_ckpt *c = NULL;
  cairn_status st = cairn_ckpt_open(path, NULL, &c);
  if (st) return st;
  st = meta_from(c, path, out);
  cairn_ckpt_close(c);
  return st;
}

cairn_status cairn_saver_meta_read_latest(const char *dir, char *path, size_t len, char *note, size_t note_len,
                                          cairn_saver_meta **out) {
  static const char fn[] = "saver_meta_read_latest";
  if (out) *out = NULL;
  if (!out) return cairn__fail(CAIRN_E_NULL, "%s: out is NULL", fn);
  cairn_ckpt *c = NULL;
  cairn_status st = cairn__latest_checkpoint_open(dir, path, len, note, note_len, &c);
  if (st) return st;
  st = meta_from(c, path, out);
  cairn_ckpt_close(c);
  return st;
}

static cairn_status meta_find(const cairn_saver_meta *m, const char *fn, const char *prefix, const char *key,
                              cairn_meta_type type, const meta_kv **out) {
  if (!m) return cairn__fail(CAIRN_E_NULL, "%s: meta is NULL", fn);
  if (!key) return cairn__fail(CAIRN_E_NULL, "%s: key is NULL", fn);
  size_t pl = strlen(prefix);
  for (size_t i = 0; i < m->n; i++) {
    const char *k = m->kv[i].key;
    if (strncmp(k, prefix, pl) != 0 || strcmp(k + pl, key) != 0) continue;
    if (m->kv[i].type != type)
      return cairn__fail(CAIRN_E_DTYPE, "%s: '%s%s' has metadata type %d, not %d", fn, prefix, key,
                         (int)m->kv[i].type, (int)type);
    *out = &m->kv[i];
    return CAIRN_OK;
  }
  return cairn__fail(CAIRN_E_NOT_FOUND, "%s: no metadata key '%s%s'", fn, prefix, key);
}

/* A number: the I64 value of prefix+key into *i, or (i NULL) the F64 one
 * into *f; `what` names the out-parameter. */
static cairn_status meta_number(const cairn_saver_meta *m, const char *fn, const char *what, const char *prefix,
                                const char *key, int64_t *i, double *f) {
  const meta_kv *kv;
  if (!i && !f) return cairn__fail(CAIRN_E_NULL, "%s: %s is NULL", fn, what);
  cairn_status st = meta_find(m, fn, prefix, key, i ? CAIRN_META_I64 : CAIRN_META_F64, &kv);
  if (st) return st;
  if (i) *i = kv->i;
  else *f = kv->f;
  return CAIRN_OK;
}

cairn_status cairn_saver_meta_global_step(const cairn_saver_meta *m, int64_t *step) {
  return meta_number(m, "saver_meta_global_step", "step", "", "train.global_step", step, NULL);
}

const char *cairn_saver_meta_producer(const cairn_saver_meta *m) {
  if (!m) return NULL;
  for (size_t i = 0; i < m->n; i++)
    if (m->kv[i].type == CAIRN_META_STR && strcmp(m->kv[i].key, "ckpt.producer") == 0) return m->kv[i].bytes;
  return NULL;
}

cairn_status cairn_saver_meta_user_str(const cairn_saver_meta *m, const char *key, const char **value) {
  const meta_kv *kv;
  if (!value) return cairn__fail(CAIRN_E_NULL, "saver_meta_user_str: value is NULL");
  cairn_status st = meta_find(m, "saver_meta_user_str", "user.", key, CAIRN_META_STR, &kv);
  if (!st) *value = kv->bytes;
  return st;
}

cairn_status cairn_saver_meta_user_i64(const cairn_saver_meta *m, const char *key, int64_t *value) {
  return meta_number(m, "saver_meta_user_i64", "value", "user.", key, value, NULL);
}

cairn_status cairn_saver_meta_user_f64(const cairn_saver_meta *m, const char *key, double *value) {
  return meta_number(m, "saver_meta_user_f64", "value", "user.", key, NULL, value);
}

cairn_status cairn_saver_meta_state(const cairn_saver_meta *m, const char *name, const void **data, size_t *len) {
  const meta_kv *kv;
  if (!data || !len) return cairn__fail(CAIRN_E_NULL, "saver_meta_state: data or len is NULL");
  cairn_status st = meta_find(m, "saver_meta_state", "train.state.", name, CAIRN_META_BYTES, &kv);
  if (!st) {
    *data = kv->bytes;
    *len = kv->len;
  }
  return st;
}

/* ---- the report -------------------------------------------------------------- */

#define N_KINDS 6

typedef struct item_list {
  cairn_restore_item *it;
  size_t n, cap;
} item_list;

struct cairn_restore_report {
  item_list l[N_KINDS];
  char **owned;
  size_t n_owned;
};

void cairn_restore_report_free(cairn_restore_report *r) {
  if (!r) return;
  for (int k = 0; k < N_KINDS; k++) free(r->l[k].it);
  for (size_t i = 0; i < r->n_owned; i++) free(r->owned[i]);
  free(r->owned);
  free(r);
}

size_t cairn_restore_report_count(const cairn_restore_report *r, cairn_restore_kind k) {
  if (!r || (int)k < 0 || (int)k >= N_KINDS) return 0;
  return r->l[k].n;
}

const cairn_restore_item *cairn_restore_report_item(const cairn_restore_report *r, cairn_restore_kind k,
                                                    size_t i) {
  if (!r || (int)k < 0 || (int)k >= N_KINDS || i >= r->l[k].n) return NULL;
  return &r->l[k].it[i];
}

static cairn_restore_item *report_add(cairn_restore_report *r, cairn_restore_kind k) {
  item_list *l = &r->l[k];
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 16;
    cairn_restore_item *p = realloc(l->it, cap * sizeof *p);
    if (!p) return NULL;
    l->it = p;
    l->cap = cap;
  }
  cairn_restore_item *it = &l->it[l->n++];
  memset(it, 0, sizeof *it);
  return it;
}

/* Keeps a malloc'd string alive as long as the report; NULL on failure
 * (s is then freed). */
static const char *report_own(cairn_restore_report *r, char *s) {
  if (!s) return NULL;
  char **o = realloc(r->owned, (r->n_owned + 1) * sizeof *o);
  if (!o) {
    free(s);
    return NULL;
  }
  r->owned = o;
  r->owned[r->n_owned++] = s;
  return s;
}

typedef struct fmt {
  char *buf;
  size_t len, total;
} fmt;

static void fmt_put(fmt *f, const char *text) {
  size_t n = strlen(text);
  if (f->len > 0 && f->total < f->len - 1) {
    size_t room = f->len - 1 - f->total;
    size_t k = n < room ? n : room;
    memcpy(f->buf + f->total, text, k);
    f->buf[f->total + k] = '\0';
  }
  f->total += n;
}

/* "checkpoint has shape (a), variable has (b)" or with dtypes. */
static void mismatch_text(const cairn_restore_item *it, char *out, size_t len) {
  char a[200], b[200];
  shape_str(it->ckpt_rank, it->ckpt_shape, a, sizeof a);
  shape_str(it->var_rank, it->var_shape, b, sizeof b);
  if (it->ckpt_dtype == it->var_dtype)
    snprintf(out, len, "checkpoint has shape %s, variable has %s", a, b);
  else
    snprintf(out, len, "checkpoint has %s %s, variable has %s %s", cairn_dtype_name(it->ckpt_dtype), a,
             cairn_dtype_name(it->var_dtype), b);
}

size_t cairn_restore_report_format(const cairn_restore_report *r, char *buf, size_t len) {
  fmt f = {buf, buf ? len : 0, 0};
  if (f.len) buf[0] = '\0';
  if (!r) return 0;
  static const char *const label[N_KINDS] = {"restored", "missing", "unused", "mismatched", "skipped", "unmatched"};
  for (int k = 0; k < N_KINDS; k++) {
    for (size_t i = 0; i < r->l[k].n; i++) {
      const cairn_restore_item *it = &r->l[k].it[i];
      char sh[200], line[600];
      fmt_put(&f, label[k]);
      fmt_put(&f, ": ");
      if (k == CAIRN_RESTORE_UNMATCHED) {
        fmt_put(&f, it->note ? it->note : it->name);
        fmt_put(&f, "\n");
        continue;
      }
      fmt_put(&f, it->name ? it->name : it->ckpt_name);
      switch ((cairn_restore_kind)k) {
      case CAIRN_RESTORE_RESTORED:
      case CAIRN_RESTORE_UNUSED:
        snprintf(line, sizeof line, " %s %s", shape_str(it->ckpt_rank, it->ckpt_shape, sh, sizeof sh),
                 cairn_dtype_name(it->ckpt_dtype));
        fmt_put(&f, line);
        break;
      case CAIRN_RESTORE_MISMATCHED:
        fmt_put(&f, ": ");
        mismatch_text(it, line, sizeof line);
        fmt_put(&f, line);
        break;
      default: break;
      }
      if (it->name && it->ckpt_name && strcmp(it->name, it->ckpt_name) != 0) {
        fmt_put(&f, " (checkpoint name '");
        fmt_put(&f, it->ckpt_name);
        fmt_put(&f, "')");
      }
      fmt_put(&f, "\n");
    }
  }
  return f.total;
}

/* ---- rename rules ------------------------------------------------------------ */

static int ends_slash(const char *s) {
  size_t n = strlen(s);
  return n > 0 && s[n - 1] == '/';
}

/* A prefix side: "/" means the root (""). */
static const char *pfx(const char *s) { return strcmp(s, "/") == 0 ? "" : s; }

CAIRN__OPTIONS_DEFAULT(cairn_restore_options)

static cairn_status check_options(const char *fn, const cairn_restore_options *o) {
  if (cairn__env_check(o->env, fn) != CAIRN_OK) return CAIRN_E_INVALID;
  if (o->n_include && !o->include) return cairn__fail(CAIRN_E_NULL, "%s: include is NULL with n_include > 0", fn);
  if (o->n_exclude && !o->exclude) return cairn__fail(CAIRN_E_NULL, "%s: exclude is NULL with n_exclude > 0", fn);
  if (o->n_rename && !o->rename) return cairn__fail(CAIRN_E_NULL, "%s: rename is NULL with n_rename > 0", fn);
  if (o->collections & ~(unsigned)CAIRN_COLL_ALL)
    return cairn__fail(CAIRN_E_INVALID, "%s: collections 0x%x has unknown bits (CAIRN_COLL_GLOBAL, _LOCAL, "
                       "_TRAINABLE, or 0 for no filter)", fn, o->collections);
  if (o->tf2_names != 0 && o->tf2_names != 1)
    return cairn__fail(CAIRN_E_INVALID, "%s: tf2_names is %d, must be 0 or 1", fn, o->tf2_names);
  for (size_t i = 0; i < o->n_include; i++)
    if (!o->include[i]) return cairn__fail(CAIRN_E_NULL, "%s: include[%zu] is NULL", fn, i);
  for (size_t i = 0; i < o->n_exclude; i++)
    if (!o->exclude[i]) return cairn__fail(CAIRN_E_NULL, "%s: exclude[%zu] is NULL", fn, i);
  for (size_t i = 0; i < o->n_rename; i++) {
    const cairn_restore_rename *r = &o->rename[i];
    if (!r->ckpt || !r->model) return cairn__fail(CAIRN_E_NULL, "%s: rename[%zu] has a NULL side", fn, i);
    if (!r->ckpt[0] || !r->model[0])
      return cairn__fail(CAIRN_E_INVALID, "%s: rename[%zu] ('%s' -> '%s') has an empty side", fn, i, r->ckpt,
                         r->model);
    if (ends_slash(r->ckpt) != ends_slash(r->model))
      return cairn__fail(CAIRN_E_INVALID, "%s: rename[%zu] ('%s' -> '%s'): both sides must end with '/' (a scope "
                         "rule) or neither (an exact name)", fn, i, r->ckpt, r->model);
    for (size_t j = 0; j < i; j++)
      if (strcmp(o->rename[j].model, r->model) == 0)
        return cairn__fail(CAIRN_E_INVALID, "%s: rename[%zu] and rename[%zu] both map to model name '%s'", fn, j,
                           i, r->model);
  }
  return CAIRN_OK;
}

/* TF2's object-based checkpoints store a variable's value under its object
 * path followed by this: ".ATTRIBUTES" and "VARIABLE_VALUE" are constants
 * of TF's trackable checkpoint code (tensorflow/python/training/
 * checkpointable/util.py in the TF 1.x releases that introduced it,
 * tensorflow/python/trackable/ in current TF). */
#define TF2_SUFFIX "/.ATTRIBUTES/VARIABLE_VALUE"

static char *with_suffix(char *s, int tf2) {
  if (!s || !tf2) return s;
  size_t n = strlen(s);
  char *t = realloc(s, n + sizeof TF2_SUFFIX);
  if (!t) {
    free(s);
    return NULL;
  }
  memcpy(t + n, TF2_SUFFIX, sizeof TF2_SUFFIX);
  return t;
}

static char *ckpt_name_base(const cairn_restore_options *o, const char *name);

/* The checkpoint name of model name `name`: malloc'd, or NULL (no memory). */
static char *ckpt_name_of(const cairn_restore_options *o, const char *name) {
  return with_suffix(ckpt_name_base(o, name), o->tf2_names);
}

static char *ckpt_name_base(const cairn_restore_options *o, const char *name) {
  for (size_t i = 0; i < o->n_rename; i++)
    if (!ends_slash(o->rename[i].model) && strcmp(o->rename[i].model, name) == 0) return cairn__strdup(o->rename[i].ckpt);
  const cairn_restore_rename *best = NULL;
  size_t best_len = 0;
  for (size_t i = 0; i < o->n_rename; i++) {
    const cairn_restore_rename *r = &o->rename[i];
    if (!ends_slash(r->model)) continue;
    const char *mp = pfx(r->model);
    size_t ml = strlen(mp);
    if (strncmp(name, mp, ml) == 0 && (!best || ml > best_len)) {
      best = r;
      best_len = ml;
    }
  }
  if (!best) return cairn__strdup(name);
  const char *cp = pfx(best->ckpt);
  size_t cl = strlen(cp), rl = strlen(name + best_len);
  char *s = malloc(cl + rl + 1);
  if (!s) return NULL;
  memcpy(s, cp, cl);
  memcpy(s + cl, name + best_len, rl + 1);
  return s;
}

static int in_mask(const cairn_restore_options *o, const cairn_var *v) {
  return !o->collections || (cairn_var_collections(v) & o->collections);
}

static int selected(const cairn_restore_options *o, const char *name, const cairn_var *v) {
  return in_mask(o, v) && cairn__globs_select(name, o->include, o->n_include, o->exclude, o->n_exclude);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* ---- patterns that count for nothing ------------------------------------------------- */

/* A pattern that matches nothing is almost always a typo: an include
 * "dense/kernal" would leave dense/kernel out of the restore set and the
 * layer random, with the restore succeeding. TF's Saver({'dense/kernal':
 * v}) fails the same way a missing key does; cairn's strict restore fails
 * for it too (CAIRN_E_NOT_FOUND), naming the closest names. */

typedef struct save_names {
  const cairn_saver *s;
  const cairn_restore_options *o;
} save_names;

static const char *save_name_at(const void *ctx, size_t i) {
  const save_names *sn = ctx;
  cairn_var *v = cairn_saver_var_at(sn->s, i);
  return v && in_mask(sn->o, v) ? cairn_saver_name_at(sn->s, i) : NULL;
}

static const char *ckpt_key_at(const void *ctx, size_t i) {
  cairn_ckpt_entry e;
  return cairn_ckpt_entry_at(ctx, i, &e) ? NULL : e.name;
}

/* 1 when some save-set name (in the collection filter) matches glob, or
 * starts with prefix when prefix is not NULL, or equals exact. */
static int save_set_has(const cairn_saver *s, const cairn_restore_options *o, const char *glob, const char *prefix,
                        const char *exact) {
  size_t n = cairn_saver_count(s);
  for (size_t i = 0; i < n; i++) {
    const char *name = cairn_saver_name_at(s, i);
    if (!in_mask(o, cairn_saver_var_at(s, i))) continue;
    if (glob && fnmatch(glob, name, 0) == 0) return 1;
    if (prefix && strncmp(name, prefix, strlen(prefix)) == 0) return 1;
    if (exact && strcmp(name, exact) == 0) return 1;
  }
  return 0;
}

/* 1 when some key of c starts with prefix. */
static int ckpt_has_prefix(const cairn_ckpt *c, const char *prefix) {
  size_t n = cairn_ckpt_count(c), pl = strlen(prefix);
  for (size_t j = 0; j < n; j++) {
    cairn_ckpt_entry e;
    if (!cairn_ckpt_entry_at(c, j, &e) && strncmp(e.name, prefix, pl) == 0) return 1;
  }
  return 0;
}

/* Adds an UNMATCHED item with its note; *fatal counts those a strict
 * restore fails for. NULL on no memory. */
static cairn_restore_item *unmatched(cairn_restore_report *r, const char *name, const char *ckpt, const char *note) {
  cairn_restore_item *it = report_add(r, CAIRN_RESTORE_UNMATCHED);
  if (!it) return NULL;
  it->name = name;
  it->ckpt_name = ckpt;
  if (!(it->note = report_own(r, cairn__strdup(note)))) return NULL;
  return it;
}

/* An include or exclude glob (`kind`) that matches no variable of the save
 * set: an UNMATCHED item, its note (with the names it may have meant) in
 * note. 1 then, 0 when it matches, -1 on no memory. */
static int glob_unmatched(const char *kind, const char *glob, const save_names *sn, cairn_restore_report *r,
                          char *note, size_t note_len) {
  const cairn_saver *s = sn->s;
  const cairn_restore_options *o = sn->o;
  if (save_set_has(s, o, glob, NULL, NULL)) return 0;
  char hint[700];
  cairn__suggest(glob, save_name_at, sn, cairn_saver_count(s), 3, hint, sizeof hint);
  snprintf(note, note_len, "%s pattern '%.500s' matches no variable of the save set%s%s", kind, glob,
           o->collections ? " (of those the `collections` filter keeps)" : "", hint);
  return unmatched(r, glob, NULL, note) ? 1 : -1;
}

/* Checks every include, exclude and rename pattern against the save set
 * and the checkpoint's keys; adds an UNMATCHED item for each that matched
 * nothing, logs the exclude ones (and, lenient, all) as WARNINGs, and sets
 * *fatal to the number a strict restore fails for. CAIRN_E_NOMEM or OK. */
static cairn_status check_patterns(const char *fn, const char *path, const cairn_saver *s,
                                   const cairn_restore_options *o, const cairn_ckpt *c, cairn_restore_report *r,
                                   size_t *fatal) {
  *fatal = 0;
  save_names sn = {s, o};
  size_t ns = cairn_saver_count(s), nk = c ? cairn_ckpt_count(c) : 0;
  const char *filter = o->collections ? " (of those the `collections` filter keeps)" : "";
  char hint[700], note[2800];
  for (size_t i = 0; i < o->n_include; i++) {
    int u = glob_unmatched("include", o->include[i], &sn, r, note, sizeof note);
    if (u < 0) return CAIRN_E_NOMEM;
    if (u) ++*fatal;
  }
  for (size_t i = 0; i < o->n_exclude; i++) {
    int u = glob_unmatched("exclude", o->exclude[i], &sn, r, note, sizeof note);
    if (u < 0) return CAIRN_E_NOMEM;
    if (u && c) cairn_env_log(o->env, CAIRN_LOG_WARN, "%s '%s': %s; it leaves nothing out", fn, path, note);
  }
  for (size_t i = 0; i < o->n_rename; i++) {
    const cairn_restore_rename *rr = &o->rename[i];
    int prefix = ends_slash(rr->model);
    char glob[1100];
    /* the model side */
    int model_ok = prefix ? save_set_has(s, o, NULL, pfx(rr->model), NULL) : save_set_has(s, o, NULL, NULL, rr->model);
    if (!model_ok) {
      snprintf(glob, sizeof glob, "%.1000s%s", pfx(rr->model), prefix ? "*" : "");
      cairn__suggest(glob, save_name_at, &sn, ns, 3, hint, sizeof hint);
      snprintf(note, sizeof note, "rename '%.400s' -> '%.400s': no variable of the save set%s %s '%.400s'%s", rr->ckpt,
               rr->model, filter, prefix ? "starts with" : "is named", rr->model, hint);
      if (!unmatched(r, rr->model, rr->ckpt, note)) return CAIRN_E_NOMEM;
      ++*fatal;
      continue;
    }
    /* the checkpoint side */
    if (!c) continue;
    char key[1100];
    snprintf(key, sizeof key, "%.1000s%s", pfx(rr->ckpt), !prefix && o->tf2_names ? TF2_SUFFIX : "");
    cairn_ckpt_entry e;
    int ckpt_ok = prefix ? ckpt_has_prefix(c, key) : cairn_ckpt_find(c, key, &e) == CAIRN_OK;
    if (!ckpt_ok) {
      snprintf(glob, sizeof glob, "%.1000s%s", key, prefix ? "*" : "");
      cairn__suggest(glob, ckpt_key_at, c, nk, 3, hint, sizeof hint);
      snprintf(note, sizeof note, "rename '%.400s' -> '%.400s': no key of the checkpoint %s '%.400s'%s", rr->ckpt,
               rr->model, prefix ? "starts with" : "is", key, hint);
      if (!unmatched(r, rr->model, rr->ckpt, note)) return CAIRN_E_NOMEM;
      ++*fatal;
    }
  }
  if (o->lenient && c) {
    const item_list *u = &r->l[CAIRN_RESTORE_UNMATCHED];
    for (size_t i = 0; i < u->n; i++)
      if (strncmp(u->it[i].note, "exclude ", 8) != 0)
        cairn_env_log(o->env, CAIRN_LOG_WARN, "%s '%s': %s (lenient: restoring the rest)", fn, path, u->it[i].note);
  }
  return CAIRN_OK;
}

/* ---- restore ---------------------------------------------------------------------- */

/* The failure message of a strict restore: every missing and mismatched
 * variable, cut at a whole item to fit cairn_errmsg (CAIRN__ERRMSG_LEN). */
static cairn_status strict_failure(const char *path, const cairn_restore_report *r, size_t n_set,
                                   const cairn_ckpt *c, size_t n_fatal) {
  const item_list *miss = &r->l[CAIRN_RESTORE_MISSING], *mis = &r->l[CAIRN_RESTORE_MISMATCHED];
  const item_list *um = &r->l[CAIRN_RESTORE_UNMATCHED];
  size_t bad = miss->n + mis->n;
  cairn_status code = CAIRN_E_NOT_FOUND;
  if (!miss->n && !n_fatal) {
    code = CAIRN_E_DTYPE;
    for (size_t i = 0; i < mis->n; i++)
      if (mis->it[i].ckpt_dtype == mis->it[i].var_dtype) code = CAIRN_E_SHAPE;
  }
  enum { BUDGET = CAIRN__ERRMSG_LEN - 200 };
  char msg[BUDGET + 64];
  int used = 0;
  if (n_fatal) {
    used = snprintf(msg, sizeof msg, "restore '%.150s': %zu pattern%s of the restore options match%s nothing, so "
                    "what they name would not be restored (nothing was changed; lenient = 1 makes this a WARNING): ",
                    path, n_fatal, n_fatal == 1 ? "" : "s", n_fatal == 1 ? "es" : "");
    size_t shown = 0;
    for (size_t k = 0; k < um->n; k++) {
      const char *note = um->it[k].note;
      if (strncmp(note, "exclude ", 8) == 0) continue;
      if ((size_t)used + strlen(note) + 2 > BUDGET / 2) {
        used += snprintf(msg + used, sizeof msg - (size_t)used, "; ... (%zu more in the report)", n_fatal - shown);
        break;
      }
      used += snprintf(msg + used, sizeof msg - (size_t)used, "%s%s", shown ? "; " : "", note);
      shown++;
    }
    if (!bad) return cairn__fail(code, "%s", msg);
    used += snprintf(msg + used, sizeof msg - (size_t)used, ". Also ");
  } else {
    used = snprintf(msg, sizeof msg, "restore '%.150s': ", path);
  }
  used += snprintf(msg + used, sizeof msg - (size_t)used, "%zu of %zu variable%s cannot be restored (nothing was "
                   "changed): ", bad, n_set, n_set == 1 ? "" : "s");
  size_t shown = 0;
  size_t nk = cairn_ckpt_count(c);
  for (size_t k = 0; k < bad; k++) {
    char item[1400];
    const cairn_restore_item *it = k < miss->n ? &miss->it[k] : &mis->it[k - miss->n];
    if (k < miss->n) {
      char hint[700] = "";
      if (shown < 20) cairn__suggest(it->ckpt_name, ckpt_key_at, c, nk, 3, hint, sizeof hint);
      const char *tf2 = strstr(hint, TF2_SUFFIX) && !strstr(it->ckpt_name, TF2_SUFFIX)
                            ? " (TF2 object-based keys: set tf2_names = 1)" : "";
      if (strcmp(it->name, it->ckpt_name) == 0)
        snprintf(item, sizeof item, "'%s' not found in checkpoint%s%s", it->name, hint, tf2);
      else
        snprintf(item, sizeof item, "'%s' (checkpoint name '%s') not found in checkpoint%s%s", it->name,
                 it->ckpt_name, hint, tf2);
    } else {
      char mt[600];
      mismatch_text(it, mt, sizeof mt);
      if (strcmp(it->name, it->ckpt_name) == 0) snprintf(item, sizeof item, "'%s': %s", it->name, mt);
      else snprintf(item, sizeof item, "'%s' (checkpoint name '%s'): %s", it->name, it->ckpt_name, mt);
    }
    size_t il = strlen(item) + (shown ? 2 : 0);
    if ((size_t)used + il > BUDGET) break;
    used += snprintf(msg + used, sizeof msg - (size_t)used, "%s%s", shown ? "; " : "", item);
    shown++;
  }
  if (shown < bad)
    snprintf(msg + used, sizeof msg - (size_t)used, "%s... (%zu more in the report)", shown ? "; " : "", bad - shown);
  return cairn__fail(code, "%s", msg);
}

cairn_status cairn__restore_check_names(const char *fn, const cairn_saver *s, const cairn_restore_options *o) {
  if (!o || o->lenient || !s) return CAIRN_OK;
  cairn_status st = check_options(fn, o);
  if (st) return st;
  cairn_restore_report *r = calloc(1, sizeof *r);
  size_t n_fatal = 0;
  if (!r || check_patterns(fn, "", s, o, NULL, r, &n_fatal)) {
    cairn_restore_report_free(r);
    return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  }
  if (n_fatal) {
    enum { BUDGET = CAIRN__ERRMSG_LEN - 200 };
    char msg[BUDGET];
    int used = snprintf(msg, sizeof msg, "%s: %zu pattern%s of the restore options match%s no variable of the "
                        "list, so what %s would not be restored (lenient = 1 makes this a WARNING): ", fn,
                        n_fatal, n_fatal == 1 ? "" : "s", n_fatal == 1 ? "es" : "", n_fatal == 1 ? "it names" :
                        "they name");
    const item_list *u = &r->l[CAIRN_RESTORE_UNMATCHED];
    size_t shown = 0;
    for (size_t i = 0; i < u->n && used > 0 && (size_t)used < sizeof msg - 100; i++) {
      if (strncmp(u->it[i].note, "exclude ", 8) == 0) continue;
      used += snprintf(msg + used, sizeof msg - (size_t)used, "%s%s", shown++ ? "; " : "", u->it[i].note);
    }
    st = cairn__fail(CAIRN_E_NOT_FOUND, "%s", msg);
  }
  cairn_restore_report_free(r);
  return st;
}

/* Decoded bytes of compact tensors the verify keeps for the decode pass
 * (cairn_ckpt_set_staging): the state of a model of up to 64 MiB is
 * decoded once instead of twice; larger ones are decoded twice past it,
 * so the extra memory stays bounded (doc/restore-memory.md). */
#define RESTORE_STAGING ((uint64_t)64 << 20)

void (*cairn__restore_between_passes)(const char *path, void *user);
void *cairn__restore_between_passes_user;

/* The failure of step 5 (the file changed or could not be read after it was
 * verified): variables ok[0..done] may hold checkpoint bytes (all of them
 * when the failure is the final unchanged check, done == n), so they are
 * marked uninitialized and named; the others are unchanged. */
static void second_pass_failure(const char *fn, const char *path, cairn_status st, const item_list *ok, size_t done) {
  const char *inner = cairn__errmsg_copy(); /* only the message is built from here on */
  size_t n_written = done < ok->n ? done + 1 : ok->n;
  for (size_t i = 0; i < n_written; i++) cairn_var_set_initialized(ok->it[i].var, 0);
  enum { BUDGET = CAIRN__ERRMSG_LEN - 100 };
  char msg[BUDGET + 64];
  int used = 0;
  if (done < ok->n)
    used = snprintf(msg, sizeof msg, "%s '%.150s': reading '%.200s' after the whole file had been verified: %.599s", fn,
                    path, ok->it[done].ckpt_name, inner);
  else
    used = snprintf(msg, sizeof msg, "%s '%.150s': after every tensor was read: %.599s", fn, path, inner);
  if (used < 0 || (size_t)used >= sizeof msg) used = (int)strlen(msg);
  used += snprintf(msg + used, sizeof msg - (size_t)used,
                   ". The file changed or failed while it was being restored: %zu of %zu variable%s %s overwritten "
                   "and %s now uninitialized (the others are unchanged): ",
                   n_written, ok->n, ok->n == 1 ? "" : "s", n_written == 1 ? "was" : "were",
                   n_written == 1 ? "is" : "are");
  size_t shown = 0;
  for (size_t i = 0; i < n_written && (size_t)used < sizeof msg; i++) {
    const char *name = ok->it[i].name;
    size_t need = strlen(name) + 4;
    if ((size_t)used + need > BUDGET) break;
    used += snprintf(msg + used, sizeof msg - (size_t)used, "%s'%s'", shown ? ", " : "", name);
    shown++;
  }
  if (shown < n_written && (size_t)used < sizeof msg)
    snprintf(msg + used, sizeof msg - (size_t)used, "%s... (%zu more)", shown ? ", " : "", n_written - shown);
  cairn__fail(st, "%s", msg);
}

/* Step 1, open: the file (superblock, footer, metadata, index). */
static cairn_status open_file(const char *fn, const cairn__dir *dir, const char *path, cairn_ckpt **c) {
  struct stat sb;
  if (stat(path, &sb) != 0 && (errno == ENOENT || errno == ENOTDIR) && !cairn__ck_detect(dir, path, -1)) { /* a TF prefix is no file */
    char near[1400];
    cairn__near_files(path, near, sizeof near);
    return cairn__fail(CAIRN_E_NOT_FOUND, "%s: '%s' is not a valid checkpoint: no such file%s", fn, path, near);
  }
  cairn_status st = cairn__ckpt_open_in(dir, path, NULL, c);
  if (st && strstr(cairn_errmsg(), path)) return cairn__fail_wrap(st, "%s: ", fn); /* already names the file */
  if (st) return cairn__fail_wrap(st, "%s '%s': ", fn, path);
  return CAIRN_OK;
}

static void item_set_var(cairn_restore_item *it, const char *name, cairn_var *v) {
  const cairn_tensor *t = cairn_var_tensor(v);
  it->name = name;
  it->var = v;
  it->var_dtype = t->dtype;
  it->var_rank = t->rank;
  memcpy(it->var_shape, t->shape, sizeof it->var_shape);
}

static void item_set_ckpt(cairn_restore_item *it, const cairn_ckpt_entry *e) {
  it->ckpt_dtype = e->dtype;
  it->ckpt_rank = e->rank;
  for (int d = 0; d < CAIRN_MAX_RANK; d++) it->ckpt_shape[d] = d < e->rank ? e->shape[d] : 1;
}

/* Step 2, classify: every variable of the save set from the index alone
 * (skipped / missing / mismatched / restorable); then the unused checkpoint
 * names, those no variable of the restore set asked for. */
static cairn_status classify(const char *fn, const char *path, const cairn_saver *s, const cairn_restore_options *o,
                             const cairn_ckpt *c, cairn_restore_report *r) {
  size_t n = cairn_saver_count(s), n_used = 0;
  const char **used = malloc(n * sizeof *used);
  cairn_status st = CAIRN_E_NOMEM;
  if (!used) goto oom;
  for (size_t i = 0; i < n; i++) {
    const char *name = cairn_saver_name_at(s, i);
    cairn_var *v = cairn_saver_var_at(s, i);
    const cairn_tensor *t = cairn_var_tensor(v);
    cairn_restore_item *it;
    if (!selected(o, name, v)) {
      if (!(it = report_add(r, CAIRN_RESTORE_SKIPPED))) goto oom;
      item_set_var(it, name, v);
      continue;
    }
    const char *cname = report_own(r, ckpt_name_of(o, name));
    if (!cname) goto oom;
    cairn_ckpt_entry e;
    cairn_status fs = cairn_ckpt_find(c, cname, &e);
    if (fs != CAIRN_OK && fs != CAIRN_E_NOT_FOUND) {
      st = cairn__fail_wrap(fs, "%s '%s': looking up '%s': ", fn, path, cname);
      goto out;
    }
    int match = fs == CAIRN_OK && e.dtype == t->dtype && e.rank == t->rank;
    for (int d = 0; match && d < t->rank; d++) match = e.shape[d] == t->shape[d];
    cairn_restore_kind k = fs != CAIRN_OK ? CAIRN_RESTORE_MISSING : match ? CAIRN_RESTORE_RESTORED
                                                                          : CAIRN_RESTORE_MISMATCHED;
    if (!(it = report_add(r, k))) goto oom;
    item_set_var(it, name, v);
    it->ckpt_name = cname;
    if (fs == CAIRN_OK) {
      item_set_ckpt(it, &e);
      used[n_used++] = cname;
    }
  }
  if (n_used > 1) qsort(used, n_used, sizeof *used, cmp_str);
  size_t nc = cairn_ckpt_count(c);
  for (size_t j = 0; j < nc; j++) {
    cairn_ckpt_entry e;
    cairn_status es = cairn_ckpt_entry_at(c, j, &e);
    if (es) {
      st = cairn__fail_wrap(es, "%s '%s': index entry %zu: ", fn, path, j);
      goto out;
    }
    const char *key = e.name;
    if (n_used && bsearch(&key, used, n_used, sizeof *used, cmp_str)) continue;
    cairn_restore_item *it = report_add(r, CAIRN_RESTORE_UNUSED);
    if (!it || !(it->ckpt_name = report_own(r, cairn__strdup(e.name)))) goto oom;
    item_set_ckpt(it, &e);
  }
  st = CAIRN_OK;
  goto out;
oom:
  st = cairn__fail(CAIRN_E_NOMEM, "%s '%s': out of memory (nothing was changed)", fn, path);
out:
  free(used);
  return st;
}

/* Step 4, verify: every checksum of every restorable tensor before any
 * variable is written; compact (zstd) tensors are decoded once, kept up to
 * RESTORE_STAGING bytes for step 5. */
static cairn_status verify(const char *fn, const char *path, cairn_ckpt *c, const item_list *ok) {
  cairn_status sst = cairn_ckpt_set_staging(c, RESTORE_STAGING);
  if (sst) return sst;
  for (size_t i = 0; i < ok->n; i++) {
    cairn_status st = cairn_ckpt_verify_tensor(c, ok->it[i].ckpt_name);
    if (st)
      return cairn__fail(st, "%s '%s': reading '%s': %s (nothing was changed)", fn, path, ok->it[i].ckpt_name,
                         cairn__errmsg_copy());
  }
  return CAIRN_OK;
}

/* Step 5, decode in place (checksums again), then the file must be
 * unchanged; the variables are marked initialized only then. */
static cairn_status decode(const char *fn, const char *path, cairn_ckpt *c, const item_list *ok) {
  cairn_status st = CAIRN_OK;
  size_t done = 0;
  for (; done < ok->n; done++) {
    cairn_tensor *t = cairn_var_tensor(ok->it[done].var);
    if ((st = cairn_ckpt_read(c, ok->it[done].ckpt_name, t))) break;
  }
  if (!st && (st = cairn_ckpt_check_unchanged(c)) == CAIRN_OK) {
    for (size_t i = 0; i < ok->n; i++) cairn_var_set_initialized(ok->it[i].var, 1);
    return CAIRN_OK;
  }
  second_pass_failure(fn, path, st, ok, done);
  return st;
}

static void hand_report(cairn_restore_report *r, cairn_restore_report **report) {
  if (report) *report = r;
  else cairn_restore_report_free(r);
}

static cairn_status restore_impl(const char *fn, cairn_saver *s, const cairn__dir *dir, const char *path,
                                 const cairn_restore_options *opts, cairn_restore_report **report,
                                 cairn_saver_meta **meta) {
  if (report) *report = NULL;
  if (meta) *meta = NULL;
  if (!s) return cairn__fail(CAIRN_E_NULL, "%s: saver is NULL", fn);
  if (!path) return cairn__fail(CAIRN_E_NULL, "%s: can't load save_path when it is NULL", fn);
  cairn_restore_options o;
  memset(&o, 0, sizeof o);
  if (opts) o = *opts;
  cairn_status st = check_options(fn, &o);
  if (st) return st;
  /* A directory: its newest checkpoint, or the TF bundle or the one
     safetensors or .npz file in it (restore_source.c). */
  char src[4096];
  if (!dir) {
    if ((st = cairn__restore_source(fn, path, src, sizeof src, NULL))) return st;
    path = src;
  }

  size_t n = cairn_saver_count(s);
  cairn_restore_report *r = calloc(1, sizeof *r);
  if (!r) return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  if (n == 0) { /* allow_empty saver: TF's restore is a no-op */
    hand_report(r, report);
    return CAIRN_OK;
  }

  /* 1. open */
  cairn_ckpt *c = NULL;
  if ((st = open_file(fn, dir, path, &c))) {
    cairn_restore_report_free(r);
    return st;
  }

  /* 2. classify; 2b. patterns that matched nothing */
  size_t n_fatal = 0;
  if ((st = classify(fn, path, s, &o, c, r))) goto fail;
  if (check_patterns(fn, path, s, &o, c, r, &n_fatal)) {
    st = cairn__fail(CAIRN_E_NOMEM, "%s '%s': out of memory (nothing was changed)", fn, path);
    goto fail;
  }

  /* 3. strict */
  if (!o.lenient && (n_fatal || r->l[CAIRN_RESTORE_MISSING].n || r->l[CAIRN_RESTORE_MISMATCHED].n)) {
    st = strict_failure(path, r, n - r->l[CAIRN_RESTORE_SKIPPED].n, c, n_fatal);
    cairn_ckpt_close(c);
    hand_report(r, report);
    return st;
  }

  /* 4. verify, and the metadata */
  item_list *ok = &r->l[CAIRN_RESTORE_RESTORED];
  if ((st = verify(fn, path, c, ok))) goto fail;
  if (meta && (st = meta_from(c, path, meta))) goto fail;
  if (cairn__restore_between_passes) cairn__restore_between_passes(path, cairn__restore_between_passes_user);

  /* 5. decode */
  if ((st = decode(fn, path, c, ok))) goto fail;
  cairn__saver_keep_restored(s, c);
  hand_report(r, report);
  return CAIRN_OK;

fail:
  cairn_ckpt_close(c);
  cairn_restore_report_free(r);
  if (meta) {
    cairn_saver_meta_free(*meta);
    *meta = NULL;
  }
  return st;
}

cairn_status cairn_saver_restore(cairn_saver *s, const char *path, cairn_saver_meta **meta) {
  return restore_impl("restore", s, NULL, path, NULL, NULL, meta);
}

cairn_status cairn_saver_restore_partial(cairn_saver *s, const char *path, const cairn_restore_options *opts,
                                         cairn_restore_report **report, cairn_saver_meta **meta) {
  return restore_impl("restore_partial", s, NULL, path, opts, report, meta);
}

cairn_status cairn__saver_restore_in(cairn_saver *s, const cairn__dir *d, const char *path,
                                     const cairn_restore_options *opts, cairn_restore_report **report,
                                     cairn_saver_meta **meta) {
  return restore_impl(opts ? "restore_partial" : "restore", s, d, path, opts, report, meta);
}
