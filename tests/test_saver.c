/* cairn/saver.h: Saver save/restore, rotation (max_to_keep,
 * keep_checkpoint_every_n_hours), the `checkpoint` state file,
 * latest_checkpoint and its fallbacks, recover_last_checkpoints, strict and
 * partial restore with the report, metadata, disk full.
 *
 * Tests ported from TensorFlow's own (tensorflow/python/training/saver_test.py,
 * checkpoint_management_test.py) carry a scenario number and the TF test
 * name in a comment ("#117 MaxToKeepTest.testNonSharded"); every test
 * mirroring one TF test has the same number. The TF behaviour is described
 * in doc/session-semantics.md, "Saver".
 * Every test works in its own mkdtemp directory (removed by the suite's
 * .fini) and never forks, except the one that SIGKILLs a lock holder: a
 * lock's release on SIGKILL needs a process to kill. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include "config.h"

#include <criterion/criterion.h>
#include "rm_tree.h"
#include "slurp.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cairn/ckpt.h"
#include "cairn/runtime.h"
#include "cairn/saver.h"
#include "cairn/session.h"
#include "cairn/tensor.h"
#include "cairn/var.h"

/* The restore's test hook (lib/internal.h): runs between its two passes. */
extern void (*cairn__restore_between_passes)(const char *path, void *user);

/* ==== fixtures ================================================================= */

static char g_dir[256];
static char g_moved[300];

static void make_dir(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(g_dir, sizeof g_dir, "%s/cairn-saver-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  cr_assert_not_null(mkdtemp(g_dir), "mkdtemp: %s", strerror(errno));
  g_moved[0] = '\0';
}

static void remove_dir(void) {
  if (g_dir[0]) rm_tree(g_dir);
  if (g_moved[0]) rm_tree(g_moved);
}

TestSuite(saver, .init = make_dir, .fini = remove_dir, .timeout = 30);
TestSuite(saver_state, .init = make_dir, .fini = remove_dir, .timeout = 30);
TestSuite(restore, .init = make_dir, .fini = remove_dir, .timeout = 30);
TestSuite(confine, .init = make_dir, .fini = remove_dir, .timeout = 30);
TestSuite(dir_lock, .init = make_dir, .fini = remove_dir, .timeout = 30);

#define ASSERT_OK(expr) cr_assert_eq((expr), CAIRN_OK, "%s: %s", #expr, cairn_errmsg())
#define ASSERT_MSG_HAS(needle) \
  cr_assert_not_null(strstr(cairn_errmsg(), needle), "message '%s' lacks '%s'", cairn_errmsg(), needle)

/* g_dir + "/" + name in a static ring of buffers (several live at once). */
static const char *P(const char *name) {
  static char ring[8][600];
  static int k;
  char *b = ring[k++ & 7];
  snprintf(b, 600, "%s/%s", g_dir, name);
  return b;
}

static int exists(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0;
}

/* Whole file, NUL-terminated; *n gets the size. The test fails if unreadable. */
static void spit(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f, "create '%s': %s", path, strerror(errno));
  cr_assert_eq(fwrite(text, 1, strlen(text), f), strlen(text));
  fclose(f);
}

/* The state file of g_dir must be exactly `want`. */
static void assert_state(const char *want) {
  char *got = slurp(P("checkpoint"), NULL);
  cr_assert_str_eq(got, want);
  free(got);
}

/* Sorted, comma-separated names of the entries of dir. */
static void listing(const char *dir, char *out, size_t len) {
  char names[64][256];
  size_t n = 0;
  DIR *d = opendir(dir);
  cr_assert_not_null(d);
  struct dirent *de;
  while ((de = readdir(d)) != NULL && n < 64) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    snprintf(names[n++], 256, "%s", de->d_name);
  }
  closedir(d);
  for (size_t i = 0; i < n; i++)
    for (size_t j = i + 1; j < n; j++)
      if (strcmp(names[j], names[i]) < 0) {
        char t[256];
        memcpy(t, names[i], 256);
        memcpy(names[i], names[j], 256);
        memcpy(names[j], t, 256);
      }
  out[0] = '\0';
  for (size_t i = 0; i < n; i++) {
    strncat(out, names[i], len - strlen(out) - 1);
    if (i + 1 < n) strncat(out, ",", len - strlen(out) - 1);
  }
}

static cairn_registry *new_registry(void) {
  cairn_registry *r = NULL;
  ASSERT_OK(cairn_registry_new(7, &r));
  return r;
}

/* An f32 variable; when init, initialized with values base, base+1, ... */
static cairn_var *fvar(cairn_registry *r, const char *name, int rank, const int64_t *shape, unsigned coll,
                       int init, float base) {
  cairn_var *v = NULL;
  cr_assert_eq(cairn_var_new(r, name, CAIRN_DTYPE_F32, rank, shape, cairn_init_zeros(), coll, &v), CAIRN_OK,
               "%s: %s", name, cairn_errmsg());
  if (init) {
    ASSERT_OK(cairn_var_initialize(v));
    cairn_tensor *t = cairn_var_tensor(v);
    float *d = cairn_tensor_f32(t);
    for (int64_t i = 0; i < t->size; i++) d[i] = base + (float)i;
  }
  return v;
}

static cairn_var *vec(cairn_registry *r, const char *name, int64_t n, int init, float base) {
  return fvar(r, name, 1, &n, CAIRN_COLL_MODEL, init, base);
}

static float val(const cairn_var *v, int64_t i) { return cairn_tensor_f32(cairn_var_tensor(v))[i]; }

/* Defaults with fsync off (fast tests) and max_to_keep as given. */
static cairn_saver_options fast(int max_to_keep) {
  cairn_saver_options o = cairn_saver_options_default();
  o.max_to_keep = max_to_keep;
  o.write.no_fsync = 1;
  return o;
}

static cairn_saver *saver_of(cairn_registry *r, const cairn_saver_options *o) {
  cairn_saver *s = NULL;
  ASSERT_OK(cairn_saver_new(r, o, &s));
  return s;
}

static void save(cairn_saver *s, const char *prefix, int64_t step, char *out) {
  char buf[600];
  cr_assert_eq(cairn_saver_save(s, prefix, step, out ? out : buf, out ? 600 : sizeof buf), CAIRN_OK,
               "save %s %lld: %s", prefix, (long long)step, cairn_errmsg());
}

/* A model {v0 = [base..], v1 = [base+100..]} saved at `step`; returns its path. */
static void save_model(const char *prefix, int64_t step, float base, cairn_saver_options *o, char *path) {
  cairn_registry *r = new_registry();
  vec(r, "v0", 3, 1, base);
  vec(r, "v1", 2, 1, base + 100);
  cairn_saver_options d = fast(5);
  cairn_saver *s = saver_of(r, o ? o : &d);
  save(s, prefix, step, path);
  cairn_saver_free(s);
  cairn_registry_free(r);
}

typedef struct fake_clock {
  double t;
} fake_clock;

static double fake_now(void *ctx) { return ((fake_clock *)ctx)->t; }

/* ==== Saver: save and restore ======================================================== */

/* #105 testBasic / testBasicsWithListOfVariables, #107 testInt64 */
Test(saver, round_trip_values_and_initialized_flags) {
  cairn_registry *r = new_registry();
  cairn_var *v0 = vec(r, "v0", 1, 1, 10.0f);
  cairn_var *v1 = vec(r, "v1", 1, 1, 20.0f);
  cairn_var *c = NULL;
  int64_t none = 0;
  ASSERT_OK(cairn_var_new(r, "count", CAIRN_DTYPE_I64, 0, &none, cairn_init_zeros(), CAIRN_COLL_GLOBAL, &c));
  ASSERT_OK(cairn_var_initialize(c));
  cairn_tensor_i64(cairn_var_tensor(c))[0] = 15;
  cairn_saver_options o = fast(5);
  cairn_saver *s = saver_of(r, &o);
  char path[600];
  save(s, P("model.ckpt"), -1, path);
  cr_assert_str_eq(path, P("model.ckpt"), "save returns exactly save_path without a step");
  cairn_saver_free(s);
  cairn_registry_free(r);

  /* a fresh model: uninitialized until restored */
  r = new_registry();
  v0 = vec(r, "v0", 1, 0, 0);
  v1 = vec(r, "v1", 1, 0, 0);
  ASSERT_OK(cairn_var_new(r, "count", CAIRN_DTYPE_I64, 0, &none, cairn_init_zeros(), CAIRN_COLL_GLOBAL, &c));
  cr_assert_not(cairn_var_is_initialized(v0));
  cairn_var *list[3] = {v0, v1, c};
  cairn_saver *s2 = NULL;
  ASSERT_OK(cairn_saver_new_list(list, 3, &o, &s2));
  ASSERT_OK(cairn_saver_restore(s2, path, NULL));
  cr_assert_float_eq(val(v0, 0), 10.0f, 0);
  cr_assert_float_eq(val(v1, 0), 20.0f, 0);
  cr_assert_eq(cairn_tensor_i64(cairn_var_tensor(c))[0], 15);
  cr_assert(cairn_var_is_initialized(v0) && cairn_var_is_initialized(v1) && cairn_var_is_initialized(c));

  /* restoring over initialized 1000 / 2000 overwrites them */
  cairn_tensor_f32(cairn_var_tensor(v0))[0] = 1000;
  cairn_tensor_f32(cairn_var_tensor(v1))[0] = 2000;
  ASSERT_OK(cairn_saver_restore(s2, path, NULL));
  cr_assert_float_eq(val(v0, 0), 10.0f, 0);
  cr_assert_float_eq(val(v1, 0), 20.0f, 0);
  cairn_saver_free(s2);
  cairn_registry_free(r);
}

Test(saver, round_trip_every_dtype_and_rank) {
  static const cairn_dtype dts[] = {CAIRN_DTYPE_F32, CAIRN_DTYPE_F64, CAIRN_DTYPE_F16, CAIRN_DTYPE_BF16,
                                    CAIRN_DTYPE_I8,  CAIRN_DTYPE_I16, CAIRN_DTYPE_I32, CAIRN_DTYPE_I64,
                                    CAIRN_DTYPE_U8,  CAIRN_DTYPE_U16, CAIRN_DTYPE_U32, CAIRN_DTYPE_U64,
                                    CAIRN_DTYPE_BOOL};
  enum { ND = sizeof dts / sizeof dts[0] };
  int64_t shape[8] = {2, 1, 3, 1, 1, 2, 1, 1};
  cairn_registry *r = new_registry(), *r2 = new_registry();
  cairn_var *a[ND], *b[ND];
  for (int i = 0; i < ND; i++) {
    char name[32];
    snprintf(name, sizeof name, "t%d", i);
    int rank = i % 9; /* 0..8, then 0..3 */
    ASSERT_OK(cairn_var_new(r, name, dts[i], rank, shape, cairn_init_zeros(), CAIRN_COLL_GLOBAL, &a[i]));
    ASSERT_OK(cairn_var_new(r2, name, dts[i], rank, shape, cairn_init_zeros(), CAIRN_COLL_GLOBAL, &b[i]));
    ASSERT_OK(cairn_var_initialize(a[i]));
    cairn_tensor *t = cairn_var_tensor(a[i]);
    unsigned char *p = t->data;
    for (size_t k = 0; k < cairn_tensor_nbytes(t); k++) p[k] = dts[i] == CAIRN_DTYPE_BOOL ? (k & 1) : (unsigned char)(k * 37 + i);
  }
  int64_t empty_shape[2] = {0, 3}; /* size 0 */
  cairn_var *e1 = NULL, *e2 = NULL;
  ASSERT_OK(cairn_var_new(r, "empty", CAIRN_DTYPE_F32, 2, empty_shape, cairn_init_zeros(), CAIRN_COLL_GLOBAL, &e1));
  ASSERT_OK(cairn_var_new(r2, "empty", CAIRN_DTYPE_F32, 2, empty_shape, cairn_init_zeros(), CAIRN_COLL_GLOBAL, &e2));
  ASSERT_OK(cairn_var_initialize(e1));
  cairn_saver_options o = fast(5);
  cairn_saver *s = saver_of(r, &o), *s2 = saver_of(r2, &o);
  char path[600];
  save(s, P("all"), 3, path);
  ASSERT_OK(cairn_saver_restore(s2, path, NULL));
  for (int i = 0; i < ND; i++) {
    cairn_tensor *x = cairn_var_tensor(a[i]), *y = cairn_var_tensor(b[i]);
    cr_assert_eq(memcmp(x->data, y->data, cairn_tensor_nbytes(x)), 0, "dtype %s", cairn_dtype_name(dts[i]));
    cr_assert(cairn_var_is_initialized(b[i]));
  }
  cr_assert(cairn_var_is_initialized(e2), "an empty tensor is restored (and marked) too");
  cairn_saver_free(s);
  cairn_saver_free(s2);
  cairn_registry_free(r);
  cairn_registry_free(r2);
}

/* #113 testSaveWithGlobalStep */
Test(saver, path_has_step_suffix_and_buffer_is_checked_first) {
  cairn_registry *r = new_registry();
  vec(r, "v", 2, 1, 1);
  cairn_saver_options o = fast(5);
  cairn_saver *s = saver_of(r, &o);
  char path[600];
  save(s, P("model.ckpt"), 5, path);
  cr_assert_str_eq(path, P("model.ckpt-5"));
  cr_assert(exists(P("model.ckpt-5")));
  save(s, P("model.ckpt"), 1000, path);
  cr_assert_str_eq(path, P("model.ckpt-1000"));

  char small[8];
  cr_assert_eq(cairn_saver_save(s, P("model.ckpt"), 7, small, sizeof small), CAIRN_E_LIMIT);
  ASSERT_MSG_HAS("model.ckpt-7");
  cr_assert_not(exists(P("model.ckpt-7")), "nothing is written when the path buffer is too small");
  cr_assert_eq(cairn_saver_last_checkpoints_count(s), 2);
  /* path may be NULL */
  ASSERT_OK(cairn_saver_save(s, P("model.ckpt"), 8, NULL, 0));
  cr_assert(exists(P("model.ckpt-8")));
  cairn_saver_free(s);
  cairn_registry_free(r);
}

/* #110 testVariables: Saver() with no var_list saves all global variables (and no local one) */
Test(saver, default_var_list_is_global_variables_at_creation) {
  cairn_registry *r = new_registry();
  int64_t n = 2;
  fvar(r, "w", 1, &n, CAIRN_COLL_MODEL, 1, 1);
  fvar(r, "slot", 1, &n, CAIRN_COLL_GLOBAL, 1, 2);
  fvar(r, "metric/count", 1, &n, CAIRN_COLL_LOCAL, 1, 3);
  cairn_var *gs = NULL;
  ASSERT_OK(cairn_registry_global_step(r, &gs));
  ASSERT_OK(cairn_var_initialize(gs));
  cairn_saver_options o = fast(5);
  cairn_saver *s = saver_of(r, &o);
  fvar(r, "late", 1, &n, CAIRN_COLL_MODEL, 1, 4); /* created after the saver */
  cr_assert_eq(cairn_saver_count(s), 3);
  cr_assert_str_eq(cairn_saver_name_at(s, 0), "w");
  cr_assert_str_eq(cairn_saver_name_at(s, 1), "slot");
  cr_assert_str_eq(cairn_saver_name_at(s, 2), "global_step");
  cr_assert_null(cairn_saver_name_at(s, 3));
  char path[600];
  save(s, P("m"), 1, path);

  cairn_ckpt *c = NULL;
  ASSERT_OK(cairn_ckpt_open(path, NULL, &c));
  cr_assert_eq(cairn_ckpt_count(c), 3);
  cairn_ckpt_entry e;
  ASSERT_OK(cairn_ckpt_find(c, "w", &e));
  ASSERT_OK(cairn_ckpt_find(c, "global_step", &e));
  cr_assert_eq(e.dtype, CAIRN_DTYPE_I64);
  cr_assert_eq(cairn_ckpt_find(c, "metric/count", &e), CAIRN_E_NOT_FOUND, "LOCAL variables are not saved");
  cr_assert_eq(cairn_ckpt_find(c, "late", &e), CAIRN_E_NOT_FOUND);
  cairn_ckpt_close(c);
  cairn_saver_free(s);
  cairn_registry_free(r);
}

/* #123 SaveRestoreWithVariableNameMap */
Test(saver, name_map_saves_and_restores_under_checkpoint_names) {
  cairn_registry *r = new_registry();
  cairn_var *v0 = vec(r, "v0", 1, 1, 10), *v1 = vec(r, "v1", 1, 1, 20);
  cairn_saver_entry map[2] = {{"save_prefix/v0", v0}, {"save_prefix/v1", v1}};
  cairn_saver_options o = fast(5);
  cairn_saver *s = NULL;
  ASSERT_OK(cairn_saver_new_map(map, 2, &o, &s));
  char path[600];
  save(s, P("m"), -1, path);
  cairn_saver_free(s);
  cairn_registry_free(r);

  r = new_registry();
  v0 = vec(r, "v0", 1, 0, 0);
  v1 = vec(r, "v1", 1, 0, 0);
  /* restoring with the variable names: not found */
  cairn_saver *plain = saver_of(r, &o);
  cr_assert_eq(cairn_saver_restore(plain, path, NULL), CAIRN_E_NOT_FOUND);
  ASSERT_MSG_HAS("'v0' not found in checkpoint");
  ASSERT_MSG_HAS("'v1' not found in checkpoint");
  cr_assert_not(cairn_var_is_initialized(v0));
  cairn_saver_free(plain);
  /* with the mapped names into variables named v0 or restore_prefix/v0 */
  cairn_var *rv0 = vec(r, "restore_prefix/v0", 1, 0, 0);
  cairn_saver_entry map2[2] = {{"save_prefix/v0", rv0}, {"save_prefix/v1", v1}};
  ASSERT_OK(cairn_saver_new_map(map2, 2, &o, &s));
  ASSERT_OK(cairn_saver_restore(s, path, NULL));
  cr_assert_float_eq(val(rv0, 0), 10, 0);
  cr_assert_float_eq(val(v1, 0), 20, 0);
  cr_assert_not(cairn_var_is_initialized(v0), "variables outside the restore set are untouched");
  cairn_saver_free(s);
  cairn_registry_free(r);
}

/* #108 testSomeErrors / testSameName, #109 testAllowEmpty */
Test(saver, var_list_errors_and_allow_empty) {
  cairn_registry *r = new_registry(), *r2 = new_registry();
  cairn_var *v0 = vec(r, "v0", 1, 1, 1), *v1 = vec(r, "v1", 1, 1, 2), *o1 = vec(r2, "v1", 1, 1, 3);
  cairn_saver *s = NULL;
  cairn_saver_options o = fast(5);
  cairn_var *twice[2] = {v1, v1};
  cr_assert_eq(cairn_saver_new_list(twice, 2, &o, &s), CAIRN_E_EXISTS);
  ASSERT_MSG_HAS("same name: 'v1'");
  cr_assert_null(s);
  cairn_var *same_name[3] = {v0, v1, o1};
  cr_assert_eq(cairn_saver_new_list(same_name, 3, &o, &s), CAIRN_E_EXISTS);
  ASSERT_MSG_HAS("same name: 'v1'");
  cairn_saver_entry two_names[2] = {{"a", v0}, {"b", v0}};
  cr_assert_eq(cairn_saver_new_map(two_names, 2, &o, &s), CAIRN_E_INVALID);
  ASSERT_MSG_HAS("two names");
  ASSERT_MSG_HAS("'v0'");
  cairn_saver_entry dup_key[2] = {{"a", v0}, {"a", v1}};
  cr_assert_eq(cairn_saver_new_map(dup_key, 2, &o, &s), CAIRN_E_EXISTS);
  ASSERT_MSG_HAS("'a'");
  cairn_saver_entry bad_name[1] = {{"bad\nname", v0}};
  cr_assert_eq(cairn_saver_new_map(bad_name, 1, &o, &s), CAIRN_E_INVALID);
  cairn_saver_entry empty_name[1] = {{"", v0}};
  cr_assert_eq(cairn_saver_new_map(empty_name, 1, &o, &s), CAIRN_E_INVALID);
  cairn_var *with_null[2] = {v0, NULL};
  cr_assert_eq(cairn_saver_new_list(with_null, 2, &o, &s), CAIRN_E_NULL);
  cr_assert_eq(cairn_saver_new_list(NULL, 1, &o, &s), CAIRN_E_NULL);
  cr_assert_eq(cairn_saver_new(NULL, &o, &s), CAIRN_E_NULL);
  cr_assert_eq(cairn_saver_new(r, &o, NULL), CAIRN_E_NULL);

  /* no variables */
  cairn_registry *empty = new_registry();
  cr_assert_eq(cairn_saver_new(empty, &o, &s), CAIRN_E_INVALID);
  ASSERT_MSG_HAS("no variables to save");
  cr_assert_eq(cairn_saver_new_list(NULL, 0, &o, &s), CAIRN_E_INVALID);
  o.allow_empty = 1;
  ASSERT_OK(cairn_saver_new(empty, &o, &s));
  char path[600] = "x";
  ASSERT_OK(cairn_saver_save(s, P("m"), 1, path, sizeof path));
  cr_assert_str_eq(path, "", "an empty saver writes nothing and returns no path");
  cr_assert_not(exists(P("m-1")));
  cr_assert_not(exists(P("checkpoint")));
  ASSERT_OK(cairn_saver_restore(s, P("does-not-exist"), NULL));
  cairn_saver_free(s);
  cairn_saver_free(NULL);
  cairn_registry_free(empty);
  cairn_registry_free(r);
  cairn_registry_free(r2);
}

Test(saver, bad_options_are_refused) {
  cairn_registry *r = new_registry();
  vec(r, "v", 1, 1, 1);
  cairn_saver *s = NULL;
  cairn_saver_options o = fast(-1);
  cr_assert_eq(cairn_saver_new(r, &o, &s), CAIRN_E_INVALID);
  ASSERT_MSG_HAS("max_to_keep");
  o = fast(5);
  o.keep_checkpoint_every_n_hours = 0;
  cr_assert_eq(cairn_saver_new(r, &o, &s), CAIRN_E_INVALID);
  ASSERT_MSG_HAS("keep_checkpoint_every_n_hours");
  ASSERT_OK(cairn_saver_new(r, NULL, &s)); /* NULL: TF's defaults */
  cairn_saver_free(s);
  cairn_registry_free(r);
}

/* TF cannot save an uninitialized variable ("Attempting to use uninitialized value") */
Test(saver, save_refuses_uninitialized_variables_and_names_them) {
  cairn_registry *r = new_registry();
  vec(r, "ok", 1, 1, 1);
  vec(r, "dense/kernel", 4, 0, 0);
  vec(r, "dense/bias", 2, 0, 0);
  cairn_saver_options o = fast(5);
  cairn_saver *s = saver_of(r, &o);
  char path[600];
  cr_assert_eq(cairn_saver_save(s, P("m"), 1, path, sizeof path), CAIRN_E_UNINITIALIZED);
  ASSERT_MSG_HAS("'dense/kernel'");
  ASSERT_MSG_HAS("'dense/bias'");
  cr_assert_not(exists(P("m-1")));
  cr_assert_not(exists(P("checkpoint")));
  cairn_saver_free(s);
  cairn_registry_free(r);
}

/* #114 testSaveToNonexistingPath, #124 testNameCollision, bad input */
Test(saver, save_errors_name_the_path) {
  cairn_registry *r = new_registry();
  vec(r, "v", 1, 1, 1);
  cairn_saver_options o = fast(5);
  cairn_saver *s = saver_of(r, &o);
  char path[600];
  cr_assert_eq(cairn_saver_save(NULL, P("m"), 1, path, sizeof path), CAIRN_E_NULL);
  cr_assert_eq(cairn_saver_save(s, NULL, 1, path, sizeof path), CAIRN_E_NULL);
  cr_assert_eq(cairn_saver_save(s, "", 1, path, sizeof path), CAIRN_E_INVALID);
  cr_assert_eq(cairn_saver_save(s, P("m"), 1, path, 0), CAIRN_E_LIMIT);

  cr_assert_eq(cairn_saver_save(s, P("no/such/dir/m"), 1, path, sizeof path), CAIRN_E_NOT_FOUND);
  ASSERT_MSG_HAS("no/such/dir");
  ASSERT_MSG_HAS("doesn't exist");
  spit(P("file"), "x");
  cr_assert_eq(cairn_saver_save(s, P("file/m"), 1, path, sizeof path), CAIRN_E_NOT_FOUND);
  ASSERT_MSG_HAS("not a directory");

  /* the state file's name without a step collides; with a step it does not */
  cr_assert_eq(cairn_saver_save(s, P("checkpoint"), -1, path, sizeof path), CAIRN_E_INVALID);
  ASSERT_MSG_HAS("collides");
  cr_assert_not(exists(P("checkpoint")));
  save(s, P("checkpoint"), 3, path);
  cr_assert_str_eq(path, P("checkpoint-3"));
  cr_assert(exists(P("checkpoint")));

  /* a directory nobody may create files in, even root */
  cairn_status st = cairn_saver_save(s, "/proc/cairn-model", 1, path, sizeof path);
  cr_assert(st == CAIRN_E_IO || st == CAIRN_E_NOSPC, "status %d", st);
  ASSERT_MSG_HAS("/proc/cairn-model");
  cr_assert_eq(cairn_saver_last_checkpoints_count(s), 1, "a failed save records nothing");
  cairn_saver_free(s);
  cairn_registry_free(r);
}

Test(saver, save_with_fsync) {
  cairn_registry *r = new_registry();
  cairn_var *v = vec(r, "v", 4, 1, 5);
  cairn_saver *s = saver_of(r, NULL); /* defaults: fsync on */
  char path[600];
  save(s, P("m"), 1, path);
  assert_state("model_checkpoint_path: \"m-1\"\nall_model_checkpoint_paths: \"m-1\"\n");
  cairn_tensor_f32(cairn_var_tensor(v))[0] = -1;
  ASSERT_OK(cairn_saver_restore(s, path, NULL));
  cr_assert_float_eq(val(v, 0), 5, 0);
  struct stat sb;
  cr_assert_eq(stat(P("checkpoint"), &sb), 0);
  cr_assert_eq(sb.st_mode & 0777, 0644);
  cairn_saver_free(s);
  cairn_registry_free(r);
}

/* ==== rotation ========================================================================= */

/* #117 MaxToKeepTest.testNonSharded */
Test(saver, max_to_keep_rotation) {
  cairn_registry *r = new_registry();
  vec(r, "v", 1, 1, 1);
  cairn_saver_options o = fast(2);
  cairn_saver *s = saver_of(r, &o);
  char s1[600], s2[600], s3[600];
  save(s, P("s1"), -1, s1);
  save(s, P("s2"), -1, s2);
  save(s, P("s3"), -1, s3);
  cr_assert_eq(cairn_saver_last_checkpoints_count(s), 2);
  cr_assert_str_eq(cairn_saver_last_checkpoint_at(s, 0), s2);
  cr_assert_str_eq(cairn_saver_last_checkpoint_at(s, 1), s3);
  cr_assert_null(cairn_saver_last_checkpoint_at(s, 2));
  cr_assert_not(exists(s1), "s1 is deleted");
  cr_assert(exists(s2) && exists(s3));
  assert_state("model_checkpoint_path: \"s3\"\n"
               "all_model_checkpoint_paths: \"s2\"\n"
               "all_model_checkpoint_paths: \"s3\"\n");

  /* re-saving s2 moves it last */
  save(s, P("s2"), -1, s2);
  cr_assert_str_eq(cairn_saver_last_checkpoint_at(s, 0), s3);
  cr_assert_str_eq(cairn_saver_last_checkpoint_at(s, 1), s2);
  cr_assert(exists(s3) && exists(s2));
  assert_state("model_checkpoint_path: \"s2\"\n"
               "all_model_checkpoint_paths: \"s3\"\n"
               "all_model_checkpoint_paths: \"s2\"\n");

  /* saving s1 again evicts s3 */
  save(s, P("s1"), -1, s1);
  cr_assert_str_eq(cairn_saver_last_checkpoint_at(s, 0), s2);
  cr_assert_str_eq(cairn_saver_last_checkpoint_at(s, 1), s1);
  cr_assert_not(exists(s3));
  cr_assert(exists(s1) && exists(s2));
  assert_state("model_checkpoint_path: \"s1\"\n"
               "all_model_checkpoint_paths: \"s2\"\n"
               "all_model_checkpoint_paths: \"s1\"\n");

  /* a second saver without bookkeeping lists only what it saved and never
     deletes checkpoints it does not know */
  cairn_saver *other = saver_of(r, &o);
  char s4[600];
  save(other, P("s4"), -1, s4);
  cr_assert_eq(cairn_saver_last_checkpoints_count(other), 1);
  cr_assert(exists(s1) && exists(s2) && exists(s4));
  assert_state("model_checkpoint_path: \"s4\"\nall_model_checkpoint_paths: \"s4\"\n");
  cairn_saver_free(other);
  cairn_saver_free(s);
  cairn_registry_free(r);
}

Test(saver, default_max_to_keep_is_five_with_steps) {
  cairn_registry *r = new_registry();
  vec(r, "v", 1, 1, 1);
  cairn_saver_options o = cairn_saver_options_default();
  cr_assert_eq(o.max_to_keep, 5);
  cr_assert_float_eq(o.keep_checkpoint_every_n_hours, 10000.0, 0);
  o.write.no_fsync = 1;
  cairn_saver *s = saver_of(r, &o);
  for (int step = 0; step <= 6000; step += 1000) save(s, P("model.ckpt"), step, NULL);
  cr_assert_not(exists(P("model.ckpt-0")));
  cr_assert_not(exists(P("model.ckpt-1000")));
  for (int step = 2000; step <= 6000; step += 1000) {
    char name[64];
    snprintf(name, sizeof name, "model.ckpt-%d", step);
    cr_assert(exists(P(name)), "%s", name);
  }
  assert_state("model_checkpoint_path: \"model.ckpt-6000\"\n"
               "all_model_checkpoint_paths: \"model.ckpt-2000\"\n"
               "all_model_checkpoint_paths: \"model.ckpt-3000\"\n"
               "all_model_checkpoint_paths: \"model.ckpt-4000\"\n"
               "all_model_checkpoint_paths: \"model.ckpt-5000\"\n"
               "all_model_checkpoint_paths: \"model.ckpt-6000\"\n");
  char l[2048];
  listing(g_dir, l, sizeof l);
  cr_assert_str_eq(l, "checkpoint,model.ckpt-2000,model.ckpt-3000,model.ckpt-4000,model.ckpt-5000,model.ckpt-6000",
                   "no temporary file is left");
  cairn_saver_free(s);
  cairn_registry_free(r);
}

/* #119 MaxToKeepTest.testNoMaxToKeep */
Test(saver, max_to_keep_zero_keeps_everything) {
  cairn_registry *r = new_registry();
  vec(r, "v", 1, 1, 1);
  cairn_saver_options o = fast(0);
  cairn_saver *s = saver_of(r, &o);
  for (int step = 1; step <= 7; step++) save(s, P("m"), step, NULL);
  cr_assert_eq(cairn_saver_last_checkpoints_count(s), 0, "nothing is recorded");
  for (int step = 1; step <= 7; step++) {
    char name[32];
    snprintf(name, sizeof name, "m-%d", step);
    cr_assert(exists(P(name)), "%s", name);
  }
  assert_state("model_checkpoint_path: \"m-7\"\nall_model_checkpoint_paths: \"m-7\"\n");
  cairn_saver_free(s);
  cairn_registry_free(r);
}

/* #121 KeepCheckpointEveryNHoursTest.testNonSharded (mock clock): keep
   every 0.7 s, max_to_keep 2, clock 1 s after creation; s1..s4 -> list
   [s3, s4], s1 kept on disk, s2 deleted. */
Test(saver, keep_checkpoint_every_n_hours) {
  cairn_registry *r = new_registry();
  vec(r, "v", 1, 1, 10);
  fake_clock clk = {1000.0};
  cairn_saver_options o = fast(2);
  o.keep_checkpoint_every_n_hours = 0.7 / 3600;
  o.clock = fake_now;
  o.clock_ctx = &clk;
  cairn_saver *s = saver_of(r, &o);
  cr_assert_eq(cairn_saver_last_checkpoints_count(s), 0);
  clk.t += 1.0;
  char s1[600], s2[600], s3[600], s4[600];
  save(s, P("s1"), -1, s1);
  save(s, P("s2"), -1, s2);
  save(s, P("s3"), -1, s3);
  cr_assert_str_eq(cairn_saver_last_checkpoint_at(s, 0), s2);
  cr_assert_str_eq(cairn_saver_last_checkpoint_at(s, 1), s3);
  cr_assert(exists(s1), "s1 is older than the keep threshold: kept");
  save(s, P("s4"), -1, s4);
  cr_assert_eq(cairn_saver_last_checkpoints_count(s), 2);
  cr_assert_str_eq(cairn_saver_last_checkpoint_at(s, 0), s3);
  cr_assert_str_eq(cairn_saver_last_checkpoint_at(s, 1), s4);
  cr_assert(exists(s1));
  cr_assert_not(exists(s2), "s2 is close in time to s1: deleted");
  cr_assert(exists(s3) && exists(s4));
  /* a kept checkpoint leaves the state file (pitfall 8) */
  assert_state("model_checkpoint_path: \"s4\"\n"
               "all_model_checkpoint_paths: \"s3\"\n"
               "all_model_checkpoint_paths: \"s4\"\n");

  /* later saves: the next one is kept only 0.7 s after the last kept */
  clk.t += 0.5;
  save(s, P("s5"), -1, NULL); /* evicts s3 (t = 1001 < 1001.4): deleted */
  cr_assert_not(exists(s3));
  clk.t += 1.0;
  save(s, P("s6"), -1, NULL); /* evicts s4 (t = 1001): deleted */
  cr_assert_not(exists(s4));
  save(s, P("s7"), -1, NULL); /* evicts s5 (t = 1001.5 > 1001.4): kept */
  cr_assert(exists(P("s5")));
  cairn_saver_free(s);
  cairn_registry_free(r);
}

/* #122 RecoverLastCheckpointsTest.test_recover_last_checkpoints */
Test(saver, recover_last_checkpoints) {
  cairn_registry *r = new_registry();
  vec(r, "v", 1, 1, 1);
  cairn_saver_options o = fast(5);
  cairn_saver *a = saver_of(r, &o);
  char s1[600], s2[600], s3[600];
  save(a, P("ckpt"), 1, s1);
  save(a, P("ckpt"), 2, s2);
  save(a, P("ckpt"), 3, s3);
  cairn_saver_free(a);

  cairn_checkpoint_state *st = NULL;
  ASSERT_OK(cairn_checkpoint_state_read(g_dir, &st));
  cr_assert_eq(cairn_checkpoint_state_count(st), 3);
  const char *paths[3];
  for (size_t i = 0; i < 3; i++) paths[i] = cairn_checkpoint_state_path_at(st, i);
  cr_assert_str_eq(paths[0], s1);

  cairn_saver *b = saver_of(r, &o);
  ASSERT_OK(cairn_saver_recover_last_checkpoints(b, paths, 3));
  cr_assert_eq(cairn_saver_last_checkpoints_count(b), 3);
  cr_assert_str_eq(cairn_saver_last_checkpoint_at(b, 0), s1);
  cr_assert_str_eq(cairn_saver_last_checkpoint_at(b, 2), s3);
  cairn_saver_free(b);

  cr_assert_eq(unlink(s1), 0);
  cairn_saver *c = saver_of(r, &o);
  ASSERT_OK(cairn_saver_recover_last_checkpoints(c, paths, 3));
  cr_assert_eq(cairn_saver_last_checkpoints_count(c), 2, "missing ones are dropped");
  cr_assert_str_eq(cairn_saver_last_checkpoint_at(c, 0), s2);
  cr_assert_str_eq(cairn_saver_last_checkpoint_at(c, 1), s3);
  save(c, P("ckpt"), 4, NULL);
  assert_state("model_checkpoint_path: \"ckpt-4\"\n"
               "all_model_checkpoint_paths: \"ckpt-2\"\n"
               "all_model_checkpoint_paths: \"ckpt-3\"\n"
               "all_model_checkpoint_paths: \"ckpt-4\"\n");
  cairn_checkpoint_state_free(st);
  cairn_saver_free(c);

  /* a restarted trainer keeps pruning what it recovered */
  cairn_saver_options two = fast(2);
  cairn_saver *d = saver_of(r, &two);
  const char *three[3] = {s2, s3, P("ckpt-4")};
  ASSERT_OK(cairn_saver_recover_last_checkpoints(d, three, 3));
  save(d, P("ckpt"), 5, NULL);
  cr_assert_not(exists(s2));
  cr_assert_not(exists(s3));
  cr_assert(exists(P("ckpt-4")) && exists(P("ckpt-5")));
  cr_assert_eq(cairn_saver_last_checkpoints_count(d), 2);

  const char *with_null[2] = {s2, NULL};
  cr_assert_eq(cairn_saver_recover_last_checkpoints(d, with_null, 2), CAIRN_E_NULL);
  cr_assert_eq(cairn_saver_last_checkpoints_count(d), 2, "unchanged on error");
  cr_assert_eq(cairn_saver_recover_last_checkpoints(NULL, three, 3), CAIRN_E_NULL);
  ASSERT_OK(cairn_saver_recover_last_checkpoints(d, NULL, 0));
  cr_assert_eq(cairn_saver_last_checkpoints_count(d), 0);
  cairn_saver_free(d);
  cairn_registry_free(r);
}

/* ==== metadata ========================================================================== */

Test(saver, metadata_round_trip) {
  cairn_registry *r = new_registry();
  vec(r, "v", 2, 1, 1);
  cairn_saver_options o = fast(5);
  cairn_saver *s = saver_of(r, &o);
  unsigned char rng[40];
  for (size_t i = 0; i < sizeof rng; i++) rng[i] = (unsigned char)(i * 7); /* includes 0 bytes */
  ASSERT_OK(cairn_saver_set_user_str(s, "run_name", "exp \"42\"\n"));
  ASSERT_OK(cairn_saver_set_user_i64(s, "epoch", -3));
  ASSERT_OK(cairn_saver_set_user_f64(s, "lr", 0.125));
  ASSERT_OK(cairn_saver_set_user_i64(s, "replaced", 1));
  ASSERT_OK(cairn_saver_set_user_str(s, "replaced", "now a string"));
  ASSERT_OK(cairn_saver_set_state(s, "rng", rng, sizeof rng));
  ASSERT_OK(cairn_saver_set_state(s, "data.position", "\x01\x02", 2));
  ASSERT_OK(cairn_saver_set_state(s, "empty", NULL, 0));
  char path[600];
  save(s, P("m"), 1234, path);

  cairn_saver_meta *m = NULL;
  ASSERT_OK(cairn_saver_meta_read(path, &m));
  int64_t step = 0, epoch = 0;
  double lr = 0;
  const char *str = NULL;
  const void *blob = NULL;
  size_t len = 0;
  ASSERT_OK(cairn_saver_meta_global_step(m, &step));
  cr_assert_eq(step, 1234);
  char producer[64];
  snprintf(producer, sizeof producer, "cairn %s", cairn_version_string());
  cr_assert_str_eq(cairn_saver_meta_producer(m), producer);
  ASSERT_OK(cairn_saver_meta_user_str(m, "run_name", &str));
  cr_assert_str_eq(str, "exp \"42\"\n");
  ASSERT_OK(cairn_saver_meta_user_i64(m, "epoch", &epoch));
  cr_assert_eq(epoch, -3);
  ASSERT_OK(cairn_saver_meta_user_f64(m, "lr", &lr));
  cr_assert_float_eq(lr, 0.125, 0);
  ASSERT_OK(cairn_saver_meta_user_str(m, "replaced", &str));
  cr_assert_str_eq(str, "now a string");
  ASSERT_OK(cairn_saver_meta_state(m, "rng", &blob, &len));
  cr_assert_eq(len, sizeof rng);
  cr_assert_eq(memcmp(blob, rng, sizeof rng), 0);
  ASSERT_OK(cairn_saver_meta_state(m, "data.position", &blob, &len));
  cr_assert_eq(len, 2);
  cr_assert_eq(memcmp(blob, "\x01\x02", 2), 0);
  ASSERT_OK(cairn_saver_meta_state(m, "empty", &blob, &len));
  cr_assert_eq(len, 0);
  cr_assert_eq(cairn_saver_meta_user_i64(m, "run_name", &epoch), CAIRN_E_DTYPE);
  cr_assert_eq(cairn_saver_meta_user_str(m, "nope", &str), CAIRN_E_NOT_FOUND);
  ASSERT_MSG_HAS("user.nope");
  cr_assert_eq(cairn_saver_meta_state(m, "nope", &blob, &len), CAIRN_E_NOT_FOUND);
  cairn_saver_meta_free(m);

  /* the same keys straight from the reader: the documented key names */
  cairn_ckpt *c = NULL;
  ASSERT_OK(cairn_ckpt_open(path, NULL, &c));
  ASSERT_OK(cairn_ckpt_meta_i64(c, "train.global_step", &step));
  ASSERT_OK(cairn_ckpt_meta_str(c, "ckpt.producer", &str));
  ASSERT_OK(cairn_ckpt_meta_i64(c, "user.epoch", &epoch));
  ASSERT_OK(cairn_ckpt_meta_bytes(c, "train.state.rng", &blob, &len));
  cairn_ckpt_close(c);

  /* from restore; a save without a step has no train.global_step; cleared meta is gone */
  cairn_saver_clear_meta(s);
  save(s, P("nostep"), -1, path);
  ASSERT_OK(cairn_saver_restore(s, path, &m));
  cr_assert_not_null(m);
  cr_assert_eq(cairn_saver_meta_global_step(m, &step), CAIRN_E_NOT_FOUND);
  cr_assert_eq(cairn_saver_meta_user_i64(m, "epoch", &epoch), CAIRN_E_NOT_FOUND);
  cr_assert_not_null(cairn_saver_meta_producer(m));
  cairn_saver_meta_free(m);
  cairn_saver_meta_free(NULL);

  /* bad keys */
  cr_assert_eq(cairn_saver_set_user_str(s, "Bad-Key", "x"), CAIRN_E_INVALID);
  ASSERT_MSG_HAS("Bad-Key");
  cr_assert_eq(cairn_saver_set_user_str(s, "", "x"), CAIRN_E_INVALID);
  char longkey[300];
  memset(longkey, 'a', sizeof longkey - 1);
  longkey[sizeof longkey - 1] = '\0';
  cr_assert_eq(cairn_saver_set_user_i64(s, longkey, 1), CAIRN_E_INVALID);
  longkey[250] = '\0';
  ASSERT_OK(cairn_saver_set_user_i64(s, longkey, 1)); /* "user." + 250 = 255 bytes */
  longkey[244] = '\0';
  cr_assert_eq(cairn_saver_set_state(s, longkey, "x", 1), CAIRN_E_INVALID); /* "train.state." + 244 */
  cr_assert_eq(cairn_saver_set_user_str(s, "k", NULL), CAIRN_E_NULL);
  cr_assert_eq(cairn_saver_set_state(s, "k", NULL, 3), CAIRN_E_NULL);
  cr_assert_eq(cairn_saver_set_user_f64(NULL, "k", 1), CAIRN_E_NULL);
  cr_assert_eq(cairn_saver_meta_read(P("nostep-missing"), &m), CAIRN_E_IO);
  cr_assert_null(m);
  cairn_saver_free(s);
  cairn_registry_free(r);
}

/* ==== disk full ============================================================================= */

/* Sets the file size limit of this test process (Criterion runs each test
 * in its own process) with SIGXFSZ ignored, so writes fail with EFBIG. */
static void limit_file_size(rlim_t bytes) {
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit rl;
  cr_assert_eq(getrlimit(RLIMIT_FSIZE, &rl), 0);
  rl.rlim_cur = bytes;
  cr_assert_eq(setrlimit(RLIMIT_FSIZE, &rl), 0, "setrlimit: %s", strerror(errno));
}

Test(saver, disk_full_during_save_keeps_the_previous_checkpoint) {
  cairn_registry *r = new_registry();
  vec(r, "small", 4, 1, 1);
  cairn_saver_options o = fast(5);
  cairn_saver *s = saver_of(r, &o);
  char p1[600];
  save(s, P("model"), 1, p1);
  size_t n1, ns;
  char *before = slurp(p1, &n1), *state_before = slurp(P("checkpoint"), &ns);

  /* a big variable of incompressible values, then a limit between the sizes */
  int64_t big = 1 << 18;
  cairn_var *b = NULL;
  ASSERT_OK(cairn_var_new(r, "big", CAIRN_DTYPE_F32, 1, &big, cairn_init_uniform(-1, 1), CAIRN_COLL_GLOBAL, &b));
  ASSERT_OK(cairn_var_initialize(b));
  cairn_saver *s2 = saver_of(r, &o);
  ASSERT_OK(cairn_saver_recover_last_checkpoints(s2, (const char *const[]){p1}, 1));
  limit_file_size(64 * 1024);
  char p2[600];
  cairn_status st = cairn_saver_save(s2, P("model"), 2, p2, sizeof p2);
  cr_assert(st == CAIRN_E_NOSPC || st == CAIRN_E_IO, "status %d (%s): %s", st, cairn_status_str(st), cairn_errmsg());
  ASSERT_MSG_HAS("model-2");
  cr_assert_str_eq(p2, "");
  cr_assert_not(exists(P("model-2")));
  size_t n1b, nsb;
  char *after = slurp(p1, &n1b), *state_after = slurp(P("checkpoint"), &nsb);
  cr_assert(n1 == n1b && memcmp(before, after, n1) == 0, "the previous checkpoint is intact");
  cr_assert(ns == nsb && memcmp(state_before, state_after, ns) == 0, "the state file is intact");
  char l[1024];
  listing(g_dir, l, sizeof l);
  cr_assert_str_eq(l, "checkpoint,model-1", "no temporary file is left");
  cr_assert_eq(cairn_saver_last_checkpoints_count(s2), 1);
  char latest[600];
  ASSERT_OK(cairn_latest_checkpoint(g_dir, latest, sizeof latest));
  cr_assert_str_eq(latest, p1);
  free(before);
  free(after);
  free(state_before);
  free(state_after);
  cairn_saver_free(s);
  cairn_saver_free(s2);
  cairn_registry_free(r);
}

/* The checkpoint fits but the state file does not: the save fails, the new
 * checkpoint is removed again, the old state file stays. */
Test(saver, state_file_write_failure_rolls_back) {
  cairn_registry *r = new_registry();
  vec(r, "v", 2, 1, 1);
  cairn_saver_options o = fast(1000);
  cairn_saver *s = saver_of(r, &o);
  char p1[600];
  save(s, P("m"), 1, p1);
  char *state_before = slurp(P("checkpoint"), NULL);
  /* 100 recovered checkpoints with long names make a state file > 20 KiB */
  const char *paths[101];
  static char names[100][600];
  for (int i = 0; i < 100; i++) {
    char base[260];
    memset(base, 'x', 200);
    snprintf(base + 200, 60, "-old%d", i);
    snprintf(names[i], sizeof names[i], "%s/%s", g_dir, base);
    spit(names[i], "");
    paths[i] = names[i];
  }
  paths[100] = p1;
  ASSERT_OK(cairn_saver_recover_last_checkpoints(s, paths, 101));
  limit_file_size(16 * 1024);
  char p2[600];
  cairn_status st = cairn_saver_save(s, P("m"), 2, p2, sizeof p2);
  cr_assert_eq(st, CAIRN_E_IO, "EFBIG is an I/O error, as in the checkpoint writer: status %d: %s", st, cairn_errmsg());
  ASSERT_MSG_HAS("state file");
  cr_assert_not(exists(P("m-2")), "the new checkpoint is removed");
  char *state_after = slurp(P("checkpoint"), NULL);
  cr_assert_str_eq(state_after, state_before);
  cr_assert_eq(cairn_saver_last_checkpoints_count(s), 101, "the rotation list is unchanged");
  for (int i = 0; i < 100; i++) cr_assert(exists(names[i]), "nothing is deleted");
  DIR *d = opendir(g_dir);
  struct dirent *de;
  while ((de = readdir(d)) != NULL) cr_assert_null(strstr(de->d_name, ".tmp"), "left: %s", de->d_name);
  closedir(d);
  free(state_before);
  free(state_after);
  cairn_saver_free(s);
  cairn_registry_free(r);
}

/* ==== the state file ============================================================================ */

/* protobuf text of CheckpointState, as TF's update_checkpoint_state writes it */
Test(saver_state, text_matches_tf_byte_for_byte) {
  const char *all[2] = {P("model.ckpt-1"), P("model.ckpt-2")};
  ASSERT_OK(cairn_checkpoint_state_write(g_dir, P("model.ckpt-2"), all, 2, 1));
  assert_state("model_checkpoint_path: \"model.ckpt-2\"\n"
               "all_model_checkpoint_paths: \"model.ckpt-1\"\n"
               "all_model_checkpoint_paths: \"model.ckpt-2\"\n");
  /* #126 testAllModelCheckpointPaths: the model path is appended when not last */
  const char *old[2] = {P("model.ckpt-1"), P("model.ckpt-2")};
  ASSERT_OK(cairn_checkpoint_state_write(g_dir, P("model.ckpt-3"), old, 2, 1));
  assert_state("model_checkpoint_path: \"model.ckpt-3\"\n"
               "all_model_checkpoint_paths: \"model.ckpt-1\"\n"
               "all_model_checkpoint_paths: \"model.ckpt-2\"\n"
               "all_model_checkpoint_paths: \"model.ckpt-3\"\n");
  ASSERT_OK(cairn_checkpoint_state_write(g_dir, P("model.ckpt-4"), NULL, 0, 1));
  assert_state("model_checkpoint_path: \"model.ckpt-4\"\nall_model_checkpoint_paths: \"model.ckpt-4\"\n");
}

/* #126 testAbsPath / testRelPath, #127 testUpdateCheckpointState: relative in the file, complete when read */
Test(saver_state, relative_in_file_absolute_outside) {
  const char *all[2] = {"/elsewhere/model-1", P("model-2")};
  ASSERT_OK(cairn_checkpoint_state_write(g_dir, P("model-2"), all, 2, 1));
  assert_state("model_checkpoint_path: \"model-2\"\n"
               "all_model_checkpoint_paths: \"/elsewhere/model-1\"\n"
               "all_model_checkpoint_paths: \"model-2\"\n");
  cairn_checkpoint_state *st = NULL;
  ASSERT_OK(cairn_checkpoint_state_read(g_dir, &st));
  cr_assert_str_eq(cairn_checkpoint_state_model_path(st), P("model-2"));
  /* written as TF writes it, but a reader keeps only the files of the directory */
  cr_assert_eq(cairn_checkpoint_state_count(st), 1);
  cr_assert_str_eq(cairn_checkpoint_state_path_at(st, 0), P("model-2"));
  cr_assert_null(cairn_checkpoint_state_path_at(st, 1));
  cr_assert_eq(cairn_checkpoint_state_ignored_count(st), 1);
  cr_assert_str_eq(cairn_checkpoint_state_ignored_at(st, 0), "/elsewhere/model-1");
  cairn_checkpoint_state_free(st);
  cairn_checkpoint_state_free(NULL);

  /* a relative path outside dir is made absolute, so that reading joins nothing wrong */
  cr_assert_eq(mkdir(P("sub"), 0755), 0);
  char cwd[1024];
  cr_assert_not_null(getcwd(cwd, sizeof cwd));
  cr_assert_eq(chdir(g_dir), 0);
  const char *rel[1] = {"model-0"};
  ASSERT_OK(cairn_checkpoint_state_write("sub", "sub/model-9", rel, 1, 1));
  char *text = slurp("sub/checkpoint", NULL);
  char *real = realpath(".", NULL);
  char want[2048];
  snprintf(want, sizeof want,
           "model_checkpoint_path: \"model-9\"\n"
           "all_model_checkpoint_paths: \"%s/model-0\"\n"
           "all_model_checkpoint_paths: \"model-9\"\n", real);
  cr_assert_str_eq(text, want);
  free(text);
  free(real);
  cr_assert_eq(chdir(cwd), 0);
}

Test(saver_state, quotes_and_backslashes_are_escaped) {
  char dir[600];
  snprintf(dir, sizeof dir, "%s", g_dir);
  const char *name = "we\"ird\\na'me\tx\xc3\xa9";
  char prefix[700];
  snprintf(prefix, sizeof prefix, "%s/%s", dir, name);
  cairn_registry *r = new_registry();
  vec(r, "v", 1, 1, 42);
  cairn_saver_options o = fast(5);
  cairn_saver *s = saver_of(r, &o);
  char path[600];
  save(s, prefix, 3, path);
  assert_state("model_checkpoint_path: \"we\\\"ird\\\\na\\'me\\tx\\303\\251-3\"\n"
               "all_model_checkpoint_paths: \"we\\\"ird\\\\na\\'me\\tx\\303\\251-3\"\n");
  cairn_checkpoint_state *st = NULL;
  ASSERT_OK(cairn_checkpoint_state_read(g_dir, &st));
  cr_assert_str_eq(cairn_checkpoint_state_model_path(st), path);
  cairn_checkpoint_state_free(st);
  char latest[600];
  ASSERT_OK(cairn_latest_checkpoint(g_dir, latest, sizeof latest));
  cr_assert_str_eq(latest, path);
  cr_assert_str_eq(cairn_errmsg(), "", "no fallback, no note");
  cairn_saver_free(s);
  cairn_registry_free(r);
}

/* #128 testCheckPointStateFailsWhenIncomplete, #129 testCheckPointCompletesRelativePaths, parser forms */
Test(saver_state, read_accepts_tf_text_and_rejects_garbage) {
  cairn_checkpoint_state *st = NULL;
  cr_assert_eq(cairn_checkpoint_state_read(g_dir, &st), CAIRN_E_NOT_FOUND);
  cr_assert_null(st);
  spit(P("checkpoint"), "");
  cr_assert_eq(cairn_checkpoint_state_read(g_dir, &st), CAIRN_E_FORMAT);
  ASSERT_MSG_HAS("invalid checkpoint state");

  spit(P("checkpoint"), "model_checkpoint_path: \"./model.ckpt-687529\"\n"
                        "all_model_checkpoint_paths: \"./model.ckpt-687500\"\n"
                        "all_model_checkpoint_paths: \"./model.ckpt-687529\"\n");
  ASSERT_OK(cairn_checkpoint_state_read(g_dir, &st));
  cr_assert_str_eq(cairn_checkpoint_state_model_path(st), P("./model.ckpt-687529"));
  cr_assert_str_eq(cairn_checkpoint_state_path_at(st, 0), P("./model.ckpt-687500"));
  cairn_checkpoint_state_free(st);

  /* what text_format.Merge also takes: comments, any order, single quotes,
     adjacent literals, octal/hex escapes, list syntax, TF2 timestamps */
  spit(P("checkpoint"), "# written by hand\n"
                        "all_model_checkpoint_paths: 'a-1'\n"
                        "all_model_checkpoint_paths: [\"a-2\", \"a\" \"-3\"]\n"
                        "all_model_checkpoint_timestamps: 1.5e9\n"
                        "all_model_checkpoint_timestamps: [1600000000.25, 1600000001]\n"
                        "model_checkpoint_path: \"old\"\n"
                        "model_checkpoint_path: \"\\141-\\x33\"  # last wins\n"
                        "last_preserved_timestamp: 1600000000.0\n");
  ASSERT_OK(cairn_checkpoint_state_read(g_dir, &st));
  cr_assert_str_eq(cairn_checkpoint_state_model_path(st), P("a-3"));
  cr_assert_eq(cairn_checkpoint_state_count(st), 3);
  cr_assert_str_eq(cairn_checkpoint_state_path_at(st, 1), P("a-2"));
  cr_assert_str_eq(cairn_checkpoint_state_path_at(st, 2), P("a-3"));
  cairn_checkpoint_state_free(st);

  static const char *const bad[] = {
      "model_checkpoint_path: \"x\"\nunknown_field: \"y\"\n",
      "model_checkpoint_path \"x\"\n",
      "model_checkpoint_path: \"x\n\"\n",
      "model_checkpoint_path: \"unterminated\n",
      "model_checkpoint_path: \"a\\qb\"\n",
      "model_checkpoint_path: \"nul\\000\"\n",
      "model_checkpoint_path: x\n",
      "all_model_checkpoint_paths: \"only-list\"\n",
      "model_checkpoint_path: \"\"\n",
      "\x89PNG\r\n\x1a\n binary garbage",
      "all_model_checkpoint_paths: [\"a\",]\nmodel_checkpoint_path: \"a\"\n",
      "model_checkpoint_path: \"a\"\nall_model_checkpoint_timestamps: abc\n",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    spit(P("checkpoint"), bad[i]);
    cairn_status s = cairn_checkpoint_state_read(g_dir, &st);
    cr_assert_eq(s, CAIRN_E_FORMAT, "case %zu: status %d", i, s);
    cr_assert_null(st);
    ASSERT_MSG_HAS("checkpoint");
  }
  cr_assert_eq(cairn_checkpoint_state_read(NULL, &st), CAIRN_E_NULL);
  cr_assert_eq(cairn_checkpoint_state_read(g_dir, NULL), CAIRN_E_NULL);
  cr_assert_eq(cairn_checkpoint_state_read(P("no-such-dir"), &st), CAIRN_E_NOT_FOUND);
}

Test(saver_state, write_errors) {
  const char *one[1] = {P("m-1")};
  cr_assert_eq(cairn_checkpoint_state_write(NULL, "m", NULL, 0, 1), CAIRN_E_NULL);
  cr_assert_eq(cairn_checkpoint_state_write(g_dir, NULL, NULL, 0, 1), CAIRN_E_NULL);
  cr_assert_eq(cairn_checkpoint_state_write(g_dir, P("m-1"), NULL, 1, 1), CAIRN_E_NULL);
  cr_assert_eq(cairn_checkpoint_state_write(g_dir, "", one, 1, 1), CAIRN_E_INVALID);
  cr_assert_eq(cairn_checkpoint_state_write(P("missing"), P("missing/m-1"), NULL, 0, 1), CAIRN_E_NOT_FOUND);
  ASSERT_MSG_HAS("missing");
  cr_assert_eq(cairn_checkpoint_state_write(g_dir, P("checkpoint"), NULL, 0, 1), CAIRN_E_INVALID);
  ASSERT_MSG_HAS("conflicts");
  cr_assert_not(exists(P("checkpoint")));
  cr_assert_eq(cairn_checkpoint_state_write("/proc", "/proc/m-1", NULL, 0, 1), CAIRN_E_IO);
  ASSERT_MSG_HAS("/proc/checkpoint");
}

/* ==== latest_checkpoint ============================================================================== */

Test(saver_state, latest_uses_the_state_file) {
  char p1[600], p2[600];
  save_model(P("model.ckpt"), 1, 0, NULL, p1);
  save_model(P("model.ckpt"), 2, 0, NULL, p2);
  char latest[600];
  ASSERT_OK(cairn_latest_checkpoint(g_dir, latest, sizeof latest));
  cr_assert_str_eq(latest, p2);
  cr_assert_str_eq(cairn_errmsg(), "");
  /* the state file decides, not the highest step */
  const char *all[2] = {p2, p1};
  ASSERT_OK(cairn_checkpoint_state_write(g_dir, p1, all, 2, 1));
  ASSERT_OK(cairn_latest_checkpoint(g_dir, latest, sizeof latest));
  cr_assert_str_eq(latest, p1);

  char small[4];
  cr_assert_eq(cairn_latest_checkpoint(g_dir, small, sizeof small), CAIRN_E_LIMIT);
  cr_assert_eq(cairn_latest_checkpoint(g_dir, latest, 0), CAIRN_E_INVALID);
  cr_assert_eq(cairn_latest_checkpoint(NULL, latest, sizeof latest), CAIRN_E_NULL);
  cr_assert_eq(cairn_latest_checkpoint(g_dir, NULL, 10), CAIRN_E_NULL);
  cr_assert_eq(cairn_latest_checkpoint(P("no-such-dir"), latest, sizeof latest), CAIRN_E_NOT_FOUND);
  cr_assert_eq(cairn_latest_checkpoint(p1, latest, sizeof latest), CAIRN_E_NOT_FOUND, "a file is not a directory");
}

Test(saver_state, latest_without_state_file_scans_the_directory) {
  char latest[600];
  cr_assert_eq(cairn_latest_checkpoint(g_dir, latest, sizeof latest), CAIRN_E_NOT_FOUND, "empty directory");
  ASSERT_MSG_HAS("no state file");
  char p3[600], p10[600];
  save_model(P("model.ckpt"), 3, 0, NULL, p3);
  save_model(P("model.ckpt"), 10, 0, NULL, p10);
  spit(P("notes-99"), "not a checkpoint"); /* highest step but invalid: skipped */
  spit(P("model.ckpt-11.tmp.abcdef"), "a writer's temporary file");
  cr_assert_eq(unlink(P("checkpoint")), 0);
  ASSERT_OK(cairn_latest_checkpoint(g_dir, latest, sizeof latest));
  cr_assert_str_eq(latest, p10, "step 10 beats 3 numerically");
  ASSERT_MSG_HAS("no state file");
  ASSERT_MSG_HAS("scanning");
  ASSERT_MSG_HAS("notes-99");
}

Test(saver_state, latest_skips_a_deleted_newest) {
  char p1[600], p2[600], p3[600];
  cairn_saver_options o = fast(5);
  cairn_registry *r = new_registry();
  vec(r, "v", 3, 1, 1);
  cairn_saver *s = saver_of(r, &o);
  save(s, P("model.ckpt"), 1, p1);
  save(s, P("model.ckpt"), 2, p2);
  save(s, P("model.ckpt"), 3, p3);
  cr_assert_eq(unlink(p3), 0);
  char latest[600];
  ASSERT_OK(cairn_latest_checkpoint(g_dir, latest, sizeof latest));
  cr_assert_str_eq(latest, p2);
  ASSERT_MSG_HAS("model.ckpt-3");
  ASSERT_MSG_HAS("does not exist");
  cairn_saver_free(s);
  cairn_registry_free(r);
}

Test(saver_state, latest_skips_a_truncated_newest_and_says_why) {
  char p1[600], p2[600];
  cairn_saver_options o = fast(5);
  cairn_registry *r = new_registry();
  vec(r, "v", 300, 1, 1);
  cairn_saver *s = saver_of(r, &o);
  save(s, P("model.ckpt"), 1, p1);
  save(s, P("model.ckpt"), 2, p2);
  struct stat sb;
  cr_assert_eq(stat(p2, &sb), 0);
  cr_assert_eq(truncate(p2, sb.st_size / 2), 0); /* a killed writer without atomic rename */
  char latest[600];
  ASSERT_OK(cairn_latest_checkpoint(g_dir, latest, sizeof latest));
  cr_assert_str_eq(latest, p1);
  ASSERT_MSG_HAS("skipped");
  ASSERT_MSG_HAS("model.ckpt-2");
  ASSERT_MSG_HAS(cairn_status_str(CAIRN_E_TRUNCATED));
  ASSERT_MSG_HAS("using");
  cairn_saver_free(s);
  cairn_registry_free(r);
}

/* Checkpoints of steps 1 and 2 of one variable, paths in p1 and p2. */
static cairn_saver *two_checkpoints(cairn_registry **r, char *p1, char *p2) {
  cairn_saver_options o = fast(5);
  *r = new_registry();
  vec(*r, "v", 300, 1, 1);
  cairn_saver *s = saver_of(*r, &o);
  save(s, P("model.ckpt"), 1, p1);
  save(s, P("model.ckpt"), 2, p2);
  return s;
}

/* Cuts a file to half its size, as a killed writer without rename would. */
static void truncate_half(const char *path) {
  struct stat sb;
  cr_assert_eq(stat(path, &sb), 0);
  cr_assert_eq(truncate(path, sb.st_size / 2), 0);
}

/* The note has its own out-parameter: the error channel stays empty on
 * success, the note says what was skipped, and is "" when nothing was. */
Test(saver_state, latest_note_comes_in_its_own_buffer) {
  char p1[600], p2[600];
  cairn_registry *r = NULL;
  cairn_saver *s = two_checkpoints(&r, p1, p2);
  char latest[600], note[4096];
  ASSERT_OK(cairn_latest_checkpoint_note(g_dir, latest, sizeof latest, note, sizeof note));
  cr_assert_str_eq(latest, p2);
  cr_assert_str_eq(note, "");
  truncate_half(p2);
  ASSERT_OK(cairn_latest_checkpoint_note(g_dir, latest, sizeof latest, note, sizeof note));
  cr_assert_str_eq(latest, p1);
  cr_assert_str_eq(cairn_errmsg(), "", "the note is not in the error channel: %s", cairn_errmsg());
  cr_assert(strstr(note, "skipped") && strstr(note, "model.ckpt-2") && strstr(note, "using"), "note: %s", note);
  cr_assert(strstr(note, cairn_status_str(CAIRN_E_TRUNCATED)), "note: %s", note);
  /* cut to fit a small buffer; NULL with 0 is allowed */
  char small[16];
  ASSERT_OK(cairn_latest_checkpoint_note(g_dir, latest, sizeof latest, small, sizeof small));
  cr_assert_eq(strlen(small), sizeof small - 1);
  ASSERT_OK(cairn_latest_checkpoint_note(g_dir, latest, sizeof latest, NULL, 0));
  cr_assert_str_eq(latest, p1);
  cr_assert_eq(cairn_latest_checkpoint_note(g_dir, latest, sizeof latest, NULL, 8), CAIRN_E_NULL);
  cairn_saver_free(s);
  cairn_registry_free(r);
}

/* The newest usable checkpoint and its metadata in one call: the metadata
 * is the one of the checkpoint returned, not of the skipped newest. */
Test(saver_state, meta_read_latest_reads_the_checkpoint_it_returns) {
  char p1[600], p2[600];
  cairn_registry *r = NULL;
  cairn_saver *s = two_checkpoints(&r, p1, p2);
  char latest[600], note[4096];
  cairn_saver_meta *m = NULL;
  int64_t step = -1;
  ASSERT_OK(cairn_saver_meta_read_latest(g_dir, latest, sizeof latest, note, sizeof note, &m));
  cr_assert_str_eq(latest, p2);
  cr_assert_str_eq(note, "");
  ASSERT_OK(cairn_saver_meta_global_step(m, &step));
  cr_assert_eq(step, 2);
  cairn_saver_meta_free(m);
  truncate_half(p2);
  ASSERT_OK(cairn_saver_meta_read_latest(g_dir, latest, sizeof latest, note, sizeof note, &m));
  cr_assert_str_eq(latest, p1);
  cr_assert(strstr(note, "model.ckpt-2"), "note: %s", note);
  ASSERT_OK(cairn_saver_meta_global_step(m, &step));
  cr_assert_eq(step, 1);
  cairn_saver_meta_free(m);
  m = (cairn_saver_meta *)1;
  cr_assert_eq(cairn_saver_meta_read_latest(P("nowhere"), latest, sizeof latest, NULL, 0, &m), CAIRN_E_NOT_FOUND);
  cr_assert_null(m);
  cr_assert_eq(cairn_saver_meta_read_latest(g_dir, latest, 4, NULL, 0, &m), CAIRN_E_LIMIT);
  cr_assert_null(m);
  cairn_saver_free(s);
  cairn_registry_free(r);
}

Test(saver_state, latest_skips_a_corrupt_newest) {
  char p1[600], p2[600];
  save_model(P("m"), 1, 0, NULL, p1);
  save_model(P("m"), 2, 0, NULL, p2);
  /* flip a byte of the footer */
  size_t n;
  char *bytes = slurp(p2, &n);
  bytes[n - 10] ^= 0x40;
  FILE *f = fopen(p2, "wb");
  cr_assert_eq(fwrite(bytes, 1, n, f), n);
  fclose(f);
  free(bytes);
  char latest[600];
  ASSERT_OK(cairn_latest_checkpoint(g_dir, latest, sizeof latest));
  cr_assert_str_eq(latest, p1);
  ASSERT_MSG_HAS("m-2");
}

Test(saver_state, latest_with_garbage_state_file_scans) {
  char p5[600];
  save_model(P("m"), 5, 0, NULL, p5);
  save_model(P("m"), 4, 0, NULL, NULL);
  spit(P("checkpoint"), "this is { not protobuf text");
  char latest[600];
  ASSERT_OK(cairn_latest_checkpoint(g_dir, latest, sizeof latest));
  cr_assert_str_eq(latest, p5);
  ASSERT_MSG_HAS("state file unusable");
}

Test(saver_state, latest_when_nothing_listed_is_usable_scans) {
  char p7[600];
  save_model(P("m"), 7, 0, NULL, p7);
  const char *all[1] = {P("gone-8")};
  ASSERT_OK(cairn_checkpoint_state_write(g_dir, P("gone-9"), all, 1, 1));
  char latest[600];
  ASSERT_OK(cairn_latest_checkpoint(g_dir, latest, sizeof latest));
  cr_assert_str_eq(latest, p7);
  ASSERT_MSG_HAS("gone-9");
  ASSERT_MSG_HAS("gone-8");
  cr_assert_eq(unlink(p7), 0);
  cr_assert_eq(cairn_latest_checkpoint(g_dir, latest, sizeof latest), CAIRN_E_NOT_FOUND);
  ASSERT_MSG_HAS("no usable checkpoint");
  cr_assert_str_eq(latest, "");
}

/* #125 testRelativePath: relative save paths; latest_checkpoint("train") finds snapshot-2, restore gives 2 */
Test(saver_state, relative_paths) {
  char cwd[1024];
  cr_assert_not_null(getcwd(cwd, sizeof cwd));
  cr_assert_eq(chdir(g_dir), 0);
  cr_assert_eq(mkdir("train", 0755), 0);
  cairn_registry *r = new_registry();
  cairn_var *v0 = vec(r, "v0", 1, 1, 0);
  cairn_saver_options o = fast(5);
  cairn_saver *s = saver_of(r, &o);
  for (int i = 0; i <= 2; i++) {
    cairn_tensor_f32(cairn_var_tensor(v0))[0] = (float)i;
    save(s, "train/snapshot", i, NULL);
  }
  char *text = slurp("train/checkpoint", NULL);
  cr_assert_str_eq(text, "model_checkpoint_path: \"snapshot-2\"\n"
                         "all_model_checkpoint_paths: \"snapshot-0\"\n"
                         "all_model_checkpoint_paths: \"snapshot-1\"\n"
                         "all_model_checkpoint_paths: \"snapshot-2\"\n");
  free(text);
  char latest[600];
  ASSERT_OK(cairn_latest_checkpoint("train", latest, sizeof latest));
  cr_assert_str_eq(latest, "train/snapshot-2");
  cairn_tensor_f32(cairn_var_tensor(v0))[0] = -1;
  ASSERT_OK(cairn_saver_restore(s, latest, NULL));
  cr_assert_float_eq(val(v0, 0), 2, 0);
  /* a prefix without a directory part lives in "." */
  save(s, "plain", 1, NULL);
  ASSERT_OK(cairn_latest_checkpoint(".", latest, sizeof latest));
  cr_assert_str_eq(latest, "./plain-1");
  cairn_saver_free(s);
  cairn_registry_free(r);
  cr_assert_eq(chdir(cwd), 0);
}

/* #115 testSaveCopyRestoreWithSaveRelativePaths: the directory can be moved */
Test(saver_state, directory_can_be_moved) {
  char p[600];
  save_model(P("model"), 4, 7, NULL, p);
  snprintf(g_moved, sizeof g_moved, "%s-moved", g_dir);
  cr_assert_eq(rename(g_dir, g_moved), 0);
  char latest[600], want[700];
  ASSERT_OK(cairn_latest_checkpoint(g_moved, latest, sizeof latest));
  snprintf(want, sizeof want, "%s/model-4", g_moved);
  cr_assert_str_eq(latest, want);
  cr_assert_str_eq(cairn_errmsg(), "");
  cairn_registry *r = new_registry();
  cairn_var *v0 = vec(r, "v0", 3, 0, 0);
  vec(r, "v1", 2, 0, 0);
  cairn_saver_options o = fast(5);
  cairn_saver *s = saver_of(r, &o);
  ASSERT_OK(cairn_saver_restore(s, latest, NULL));
  cr_assert_float_eq(val(v0, 2), 9, 0);
  cairn_saver_free(s);
  cairn_registry_free(r);
}

/* ==== restore ===================================================================================== */

/* A checkpoint of {a (2, 3), b (4), c (2), d (2) f32, step i64} */
static void save_abcd(char *path) {
  cairn_registry *r = new_registry();
  int64_t s23[2] = {2, 3};
  fvar(r, "a", 2, s23, CAIRN_COLL_MODEL, 1, 1);
  vec(r, "b", 4, 1, 10);
  vec(r, "c", 2, 1, 20);
  vec(r, "d", 2, 1, 30);
  cairn_saver_options o = fast(5);
  cairn_saver *s = saver_of(r, &o);
  save(s, P("abcd"), 1, path);
  cairn_saver_free(s);
  cairn_registry_free(r);
}

/* #106 testInvalidPath, #131 */
Test(restore, invalid_path_and_bad_input) {
  cairn_registry *r = new_registry();
  vec(r, "v", 1, 0, 0);
  cairn_saver_options o = fast(5);
  cairn_saver *s = saver_of(r, &o);
  cr_assert_eq(cairn_saver_restore(s, "invalid path", NULL), CAIRN_E_NOT_FOUND);
  ASSERT_MSG_HAS("not a valid checkpoint");
  ASSERT_MSG_HAS("invalid path");
  cr_assert_eq(cairn_saver_restore(s, NULL, NULL), CAIRN_E_NULL);
  cr_assert_eq(cairn_saver_restore(NULL, P("x"), NULL), CAIRN_E_NULL);
  spit(P("garbage-1"), "not a checkpoint at all, but long enough to have a superblock's worth of bytes "
                       "............................................................................");
  cairn_saver_meta *m = (cairn_saver_meta *)&o; /* must be reset to NULL */
  cairn_status st = cairn_saver_restore(s, P("garbage-1"), &m);
  cr_assert(st == CAIRN_E_FORMAT || st == CAIRN_E_TRUNCATED || st == CAIRN_E_CORRUPT, "status %d", st);
  ASSERT_MSG_HAS("garbage-1");
  cr_assert_null(m);
  cr_assert_eq(cairn_saver_restore(s, g_dir, NULL) != CAIRN_OK, 1, "a directory is not a checkpoint");
  cairn_saver_free(s);
  cairn_registry_free(r);
}

/* #112 testReshape, #133 partial restore with a full saver; all problems at once, nothing changed */
Test(restore, strict_lists_every_problem_and_changes_nothing) {
  char path[600];
  save_abcd(path);
  cairn_registry *r = new_registry();
  int64_t s32[2] = {3, 2};
  cairn_var *a = fvar(r, "a", 2, s32, CAIRN_COLL_MODEL, 1, 500); /* (3, 2) vs (2, 3) */
  cairn_var *b = vec(r, "b", 4, 0, 0);                           /* fine, uninitialized */
  cairn_var *d = NULL;
  int64_t two = 2;
  ASSERT_OK(cairn_var_new(r, "d", CAIRN_DTYPE_F64, 1, &two, cairn_init_zeros(), CAIRN_COLL_GLOBAL, &d));
  cairn_var *x = vec(r, "x", 1, 1, 7); /* missing */
  cairn_var *y = vec(r, "y", 1, 0, 0); /* missing */
  cairn_saver_options o = fast(5);
  cairn_saver *s = saver_of(r, &o);
  cairn_status st = cairn_saver_restore(s, path, NULL);
  cr_assert_eq(st, CAIRN_E_NOT_FOUND);
  ASSERT_MSG_HAS("4 of 5 variables cannot be restored");
  ASSERT_MSG_HAS("'x' not found in checkpoint");
  ASSERT_MSG_HAS("'y' not found in checkpoint");
  ASSERT_MSG_HAS("'a': checkpoint has shape (2, 3), variable has (3, 2)");
  ASSERT_MSG_HAS("'d': checkpoint has f32 (2), variable has f64 (2)");
  ASSERT_MSG_HAS("nothing was changed");
  /* nothing changed: values and flags */
  cr_assert_float_eq(val(a, 0), 500, 0);
  cr_assert_float_eq(val(x, 0), 7, 0);
  cr_assert(cairn_var_is_initialized(a) && cairn_var_is_initialized(x));
  cr_assert_not(cairn_var_is_initialized(b), "b matched but is not restored when anything fails");
  cr_assert_float_eq(val(b, 0), 0, 0);
  cr_assert_not(cairn_var_is_initialized(y));
  cairn_saver_free(s);

  /* only a shape mismatch: CAIRN_E_SHAPE */
  cairn_var *list[2] = {a, b};
  ASSERT_OK(cairn_saver_new_list(list, 2, &o, &s));
  cr_assert_eq(cairn_saver_restore(s, path, NULL), CAIRN_E_SHAPE);
  ASSERT_MSG_HAS("1 of 2 variables");
  cairn_saver_free(s);
  /* only a dtype mismatch: CAIRN_E_DTYPE */
  cairn_var *dl[1] = {d};
  ASSERT_OK(cairn_saver_new_list(dl, 1, &o, &s));
  cr_assert_eq(cairn_saver_restore(s, path, NULL), CAIRN_E_DTYPE);
  cairn_saver_free(s);
  cairn_registry_free(r);
}

Test(restore, strict_message_is_cut_at_a_whole_item) {
  char path[600];
  save_abcd(path);
  cairn_registry *r = new_registry();
  for (int i = 0; i < 300; i++) {
    char name[64];
    snprintf(name, sizeof name, "some/rather/long/scope/missing_%03d", i);
    vec(r, name, 1, 0, 0);
  }
  cairn_saver_options o = fast(5);
  cairn_saver *s = saver_of(r, &o);
  cairn_restore_report *rep = NULL;
  cr_assert_eq(cairn_saver_restore_partial(s, path, NULL, &rep, NULL), CAIRN_E_NOT_FOUND);
  ASSERT_MSG_HAS("300 of 300");
  ASSERT_MSG_HAS("'some/rather/long/scope/missing_000' not found in checkpoint");
  ASSERT_MSG_HAS("more in the report)");
  cr_assert_lt(strlen(cairn_errmsg()), 16384);
  cr_assert_not_null(rep, "the report has every name");
  cr_assert_eq(cairn_restore_report_count(rep, CAIRN_RESTORE_MISSING), 300);
  cr_assert_str_eq(cairn_restore_report_item(rep, CAIRN_RESTORE_MISSING, 299)->name,
                   "some/rather/long/scope/missing_299");
  cr_assert_eq(cairn_restore_report_count(rep, CAIRN_RESTORE_UNUSED), 4);
  cairn_restore_report_free(rep);
  cairn_saver_free(s);
  cairn_registry_free(r);
}

/* A model for partial restores: dense/kernel, dense/bias, head/kernel (2, 5) vs (2, 3) in the checkpoint, new/w */
typedef struct model {
  cairn_registry *r;
  cairn_var *kernel, *bias, *head, *fresh;
  cairn_saver *s;
} model;

static void save_pretrained(char *path) {
  cairn_registry *r = new_registry();
  int64_t k[2] = {3, 4}, h[2] = {2, 3};
  fvar(r, "dense/kernel", 2, k, CAIRN_COLL_MODEL, 1, 1);
  vec(r, "dense/bias", 4, 1, 100);
  fvar(r, "head/kernel", 2, h, CAIRN_COLL_MODEL, 1, 200);
  vec(r, "old_head/bias", 3, 1, 300);
  cairn_var *gs = NULL;
  ASSERT_OK(cairn_registry_global_step(r, &gs));
  ASSERT_OK(cairn_var_initialize(gs));
  cairn_tensor_i64(cairn_var_tensor(gs))[0] = 77;
  cairn_saver_options o = fast(5);
  cairn_saver *s = saver_of(r, &o);
  save(s, P("pretrained"), 77, path);
  cairn_saver_free(s);
  cairn_registry_free(r);
}

static model new_model(void) {
  model m;
  m.r = new_registry();
  int64_t k[2] = {3, 4}, h[2] = {2, 5};
  m.kernel = fvar(m.r, "dense/kernel", 2, k, CAIRN_COLL_MODEL, 0, 0);
  m.bias = vec(m.r, "dense/bias", 4, 1, -1); /* initialized: must stay unless restored */
  m.head = fvar(m.r, "head/kernel", 2, h, CAIRN_COLL_MODEL, 1, -5);
  m.fresh = vec(m.r, "new/w", 2, 0, 0);
  cairn_saver_options o = fast(5);
  m.s = saver_of(m.r, &o);
  return m;
}

static void free_model(model *m) {
  cairn_saver_free(m->s);
  cairn_registry_free(m->r);
}

static int report_has(const cairn_restore_report *rep, cairn_restore_kind k, const char *name) {
  for (size_t i = 0; i < cairn_restore_report_count(rep, k); i++) {
    const cairn_restore_item *it = cairn_restore_report_item(rep, k, i);
    const char *n = it->name ? it->name : it->ckpt_name;
    if (strcmp(n, name) == 0) return 1;
  }
  return 0;
}

/* #134 warm start: restore a subset from a pretrained file, the rest keeps its value */
Test(restore, partial_lenient_restores_what_matches_and_reports_the_rest) {
  char path[600];
  save_pretrained(path);
  model m = new_model();
  cairn_restore_options opt = {0};
  opt.lenient = 1;
  cairn_restore_report *rep = NULL;
  cairn_saver_meta *meta = NULL;
  ASSERT_OK(cairn_saver_restore_partial(m.s, path, &opt, &rep, &meta));
  cr_assert_not_null(rep);
  /* restored */
  cr_assert_eq(cairn_restore_report_count(rep, CAIRN_RESTORE_RESTORED), 2);
  cr_assert(report_has(rep, CAIRN_RESTORE_RESTORED, "dense/kernel"));
  cr_assert(report_has(rep, CAIRN_RESTORE_RESTORED, "dense/bias"));
  cr_assert_float_eq(val(m.kernel, 11), 12, 0);
  cr_assert_float_eq(val(m.bias, 0), 100, 0);
  cr_assert(cairn_var_is_initialized(m.kernel));
  /* mismatched with both shapes */
  cr_assert_eq(cairn_restore_report_count(rep, CAIRN_RESTORE_MISMATCHED), 1);
  const cairn_restore_item *it = cairn_restore_report_item(rep, CAIRN_RESTORE_MISMATCHED, 0);
  cr_assert_str_eq(it->name, "head/kernel");
  cr_assert_eq(it->ckpt_rank, 2);
  cr_assert_eq(it->ckpt_shape[1], 3);
  cr_assert_eq(it->var_shape[1], 5);
  cr_assert_eq(it->var, m.head);
  cr_assert_float_eq(val(m.head, 0), -5, 0, "a mismatched variable is untouched");
  /* missing: the new variable, left uninitialized for its initializer */
  cr_assert_eq(cairn_restore_report_count(rep, CAIRN_RESTORE_MISSING), 1);
  cr_assert_str_eq(cairn_restore_report_item(rep, CAIRN_RESTORE_MISSING, 0)->name, "new/w");
  cr_assert_not(cairn_var_is_initialized(m.fresh));
  /* unused: in the checkpoint, asked by nobody (name order) */
  cr_assert_eq(cairn_restore_report_count(rep, CAIRN_RESTORE_UNUSED), 2);
  cr_assert_str_eq(cairn_restore_report_item(rep, CAIRN_RESTORE_UNUSED, 0)->ckpt_name, "global_step");
  cr_assert_str_eq(cairn_restore_report_item(rep, CAIRN_RESTORE_UNUSED, 1)->ckpt_name, "old_head/bias");
  cr_assert_null(cairn_restore_report_item(rep, CAIRN_RESTORE_UNUSED, 1)->name);
  cr_assert_eq(cairn_restore_report_item(rep, CAIRN_RESTORE_UNUSED, 0)->ckpt_dtype, CAIRN_DTYPE_I64);
  cr_assert_eq(cairn_restore_report_count(rep, CAIRN_RESTORE_SKIPPED), 0);
  cr_assert_null(cairn_restore_report_item(rep, CAIRN_RESTORE_RESTORED, 2));
  cr_assert_eq(cairn_restore_report_count(rep, (cairn_restore_kind)99), 0);
  /* the text */
  size_t need = cairn_restore_report_format(rep, NULL, 0);
  char *text = malloc(need + 1);
  cr_assert_eq(cairn_restore_report_format(rep, text, need + 1), need);
  cr_assert_not_null(strstr(text, "restored: dense/kernel (3, 4) f32\n"), "%s", text);
  cr_assert_not_null(strstr(text, "missing: new/w\n"), "%s", text);
  cr_assert_not_null(strstr(text, "mismatched: head/kernel: checkpoint has shape (2, 3), variable has (2, 5)\n"),
                     "%s", text);
  cr_assert_not_null(strstr(text, "unused: global_step () i64\n"), "%s", text);
  char tiny[10];
  cr_assert_eq(cairn_restore_report_format(rep, tiny, sizeof tiny), need);
  cr_assert_eq(strlen(tiny), 9);
  free(text);
  /* metadata of the file restored */
  int64_t step = 0;
  ASSERT_OK(cairn_saver_meta_global_step(meta, &step));
  cr_assert_eq(step, 77);
  cairn_saver_meta_free(meta);
  cairn_restore_report_free(rep);
  cairn_restore_report_free(NULL);
  free_model(&m);
}

Test(restore, partial_strict_fails_with_the_report_and_changes_nothing) {
  char path[600];
  save_pretrained(path);
  model m = new_model();
  cairn_restore_options opt = {0}; /* strict by default */
  cairn_restore_report *rep = NULL;
  cairn_saver_meta *meta = NULL;
  cr_assert_eq(cairn_saver_restore_partial(m.s, path, &opt, &rep, &meta), CAIRN_E_NOT_FOUND);
  ASSERT_MSG_HAS("'new/w' not found in checkpoint");
  ASSERT_MSG_HAS("'head/kernel': checkpoint has shape (2, 3), variable has (2, 5)");
  cr_assert_not_null(rep);
  cr_assert_null(meta);
  cr_assert_eq(cairn_restore_report_count(rep, CAIRN_RESTORE_MISSING), 1);
  cr_assert_eq(cairn_restore_report_count(rep, CAIRN_RESTORE_MISMATCHED), 1);
  cr_assert_not(cairn_var_is_initialized(m.kernel));
  cr_assert_float_eq(val(m.bias, 0), -1, 0);
  cairn_restore_report_free(rep);

  /* excluding the problems makes the strict restore succeed */
  const char *ex[2] = {"head/*", "new/*"};
  opt.exclude = ex;
  opt.n_exclude = 2;
  ASSERT_OK(cairn_saver_restore_partial(m.s, path, &opt, &rep, NULL));
  cr_assert_eq(cairn_restore_report_count(rep, CAIRN_RESTORE_RESTORED), 2);
  cr_assert_eq(cairn_restore_report_count(rep, CAIRN_RESTORE_SKIPPED), 2);
  cr_assert(report_has(rep, CAIRN_RESTORE_SKIPPED, "new/w"));
  cr_assert(report_has(rep, CAIRN_RESTORE_UNUSED, "head/kernel"), "an excluded variable's tensor is unused");
  cr_assert_float_eq(val(m.bias, 0), 100, 0);
  cairn_restore_report_free(rep);
  free_model(&m);
}

Test(restore, include_and_exclude_globs) {
  char path[600];
  save_pretrained(path);
  model m = new_model();
  const char *inc[1] = {"dense/*"};
  const char *exc[1] = {"*/bias"};
  cairn_restore_options opt = {0};
  opt.include = inc;
  opt.n_include = 1;
  opt.exclude = exc;
  opt.n_exclude = 1;
  cairn_restore_report *rep = NULL;
  ASSERT_OK(cairn_saver_restore_partial(m.s, path, &opt, &rep, NULL));
  cr_assert_eq(cairn_restore_report_count(rep, CAIRN_RESTORE_RESTORED), 1);
  cr_assert(report_has(rep, CAIRN_RESTORE_RESTORED, "dense/kernel"));
  cr_assert_eq(cairn_restore_report_count(rep, CAIRN_RESTORE_SKIPPED), 3);
  cr_assert(report_has(rep, CAIRN_RESTORE_SKIPPED, "dense/bias"));
  cr_assert_null(cairn_restore_report_item(rep, CAIRN_RESTORE_SKIPPED, 0)->ckpt_name);
  cr_assert(cairn_var_is_initialized(m.kernel));
  cr_assert_float_eq(val(m.bias, 0), -1, 0, "excluded: untouched");
  cr_assert_not(cairn_var_is_initialized(m.fresh));
  cairn_restore_report_free(rep);

  /* '*' crosses '/' (fnmatch flags 0); an include that matches nothing
     fails a strict restore (a typo would leave its layer out silently) and
     restores nothing in a lenient one */
  const char *all[1] = {"*"};
  const char *none[1] = {"nothing/*"};
  opt.include = none;
  opt.exclude = NULL;
  opt.n_exclude = 0;
  cr_assert_eq(cairn_saver_restore_partial(m.s, path, &opt, &rep, NULL), CAIRN_E_NOT_FOUND);
  ASSERT_MSG_HAS("include pattern 'nothing/*' matches no variable of the save set");
  cr_assert_eq(cairn_restore_report_count(rep, CAIRN_RESTORE_UNMATCHED), 1);
  cr_assert_eq(cairn_restore_report_count(rep, CAIRN_RESTORE_SKIPPED), 4);
  cairn_restore_report_free(rep);
  opt.lenient = 1;
  ASSERT_OK(cairn_saver_restore_partial(m.s, path, &opt, &rep, NULL));
  cr_assert_eq(cairn_restore_report_count(rep, CAIRN_RESTORE_RESTORED), 0);
  cr_assert_eq(cairn_restore_report_count(rep, CAIRN_RESTORE_SKIPPED), 4);
  cairn_restore_report_free(rep);
  opt.lenient = 0;
  opt.include = all;
  opt.lenient = 1;
  ASSERT_OK(cairn_saver_restore_partial(m.s, path, &opt, &rep, NULL));
  cr_assert_eq(cairn_restore_report_count(rep, CAIRN_RESTORE_RESTORED), 2);
  cairn_restore_report_free(rep);
  free_model(&m);
}

/* TF's assignment_map: {'old_scope/': 'new_scope/'} and exact names; ckpt side -> model side */
Test(restore, rename_rules) {
  cairn_registry *r = new_registry();
  vec(r, "old/w", 2, 1, 1);
  vec(r, "old/inner/b", 2, 1, 3);
  vec(r, "x", 1, 1, 5);
  vec(r, "top", 1, 1, 6);
  vec(r, "special/w", 2, 1, 8);
  cairn_saver_options o = fast(5);
  cairn_saver *s = saver_of(r, &o);
  char path[600];
  save(s, P("src"), 1, path);
  cairn_saver_free(s);
  cairn_registry_free(r);

  r = new_registry();
  cairn_var *w = vec(r, "new/w", 2, 0, 0);
  cairn_var *b = vec(r, "new/deep/b", 2, 0, 0);
  cairn_var *y = vec(r, "y", 1, 0, 0);
  cairn_var *top = vec(r, "scope/top", 1, 0, 0);
  cairn_var *sw = vec(r, "new/sw", 2, 0, 0);
  s = saver_of(r, &o);
  cairn_restore_rename rules[5] = {
      {"old/", "new/"},             /* prefix */
      {"old/inner/", "new/deep/"},  /* longer model prefix wins */
      {"x", "y"},                   /* exact */
      {"special/w", "new/sw"},      /* exact beats the prefix rule */
      {"/", "scope/"},              /* root prefix */
  };
  cairn_restore_options opt = {0};
  opt.rename = rules;
  opt.n_rename = 5;
  cairn_restore_report *rep = NULL;
  ASSERT_OK(cairn_saver_restore_partial(s, path, &opt, &rep, NULL));
  cr_assert_eq(cairn_restore_report_count(rep, CAIRN_RESTORE_RESTORED), 5);
  cr_assert_float_eq(val(w, 1), 2, 0);
  cr_assert_float_eq(val(b, 0), 3, 0);
  cr_assert_float_eq(val(y, 0), 5, 0);
  cr_assert_float_eq(val(top, 0), 6, 0);
  cr_assert_float_eq(val(sw, 1), 9, 0);
  const cairn_restore_item *it = cairn_restore_report_item(rep, CAIRN_RESTORE_RESTORED, 1);
  cr_assert_str_eq(it->name, "new/deep/b");
  cr_assert_str_eq(it->ckpt_name, "old/inner/b");
  cr_assert_eq(cairn_restore_report_count(rep, CAIRN_RESTORE_UNUSED), 0);
  char text[1024];
  cairn_restore_report_format(rep, text, sizeof text);
  cr_assert_not_null(strstr(text, "restored: y (1) f32 (checkpoint name 'x')\n"), "%s", text);
  cairn_restore_report_free(rep);

  /* a rename to a missing name is reported with both names */
  cairn_restore_rename wrong[1] = {{"nope/", "new/"}};
  opt.rename = wrong;
  opt.n_rename = 1;
  cr_assert_eq(cairn_saver_restore_partial(s, path, &opt, &rep, NULL), CAIRN_E_NOT_FOUND);
  ASSERT_MSG_HAS("'new/w' (checkpoint name 'nope/w') not found in checkpoint");
  cairn_restore_report_free(rep);

  /* bad rules */
  cairn_restore_rename half[1] = {{"old/", "new"}};
  opt.rename = half;
  cr_assert_eq(cairn_saver_restore_partial(s, path, &opt, &rep, NULL), CAIRN_E_INVALID);
  ASSERT_MSG_HAS("'/'");
  cr_assert_null(rep);
  cairn_restore_rename twice[2] = {{"a", "y"}, {"b", "y"}};
  opt.rename = twice;
  opt.n_rename = 2;
  cr_assert_eq(cairn_saver_restore_partial(s, path, &opt, &rep, NULL), CAIRN_E_INVALID);
  cairn_restore_rename nul[1] = {{NULL, "y"}};
  opt.rename = nul;
  opt.n_rename = 1;
  cr_assert_eq(cairn_saver_restore_partial(s, path, &opt, &rep, NULL), CAIRN_E_NULL);
  const char *nullpat[1] = {NULL};
  cairn_restore_options o2 = {0};
  o2.include = nullpat;
  o2.n_include = 1;
  cr_assert_eq(cairn_saver_restore_partial(s, path, &o2, &rep, NULL), CAIRN_E_NULL);
  cairn_saver_free(s);
  cairn_registry_free(r);
}

/* A tensor whose data is corrupt fails the restore (index and footer are fine), changing nothing */
Test(restore, corrupt_tensor_data_changes_nothing) {
  cairn_registry *r = new_registry();
  vec(r, "a", 2, 1, 1);
  int64_t n = 16384;
  cairn_var *big = NULL;
  ASSERT_OK(cairn_var_new(r, "b", CAIRN_DTYPE_F32, 1, &n, cairn_init_uniform(-1, 1), CAIRN_COLL_GLOBAL, &big));
  ASSERT_OK(cairn_var_initialize(big));
  cairn_saver_options o = fast(5);
  o.write.compress = CAIRN_CKPT_COMPRESS_NONE;
  cairn_saver *s = saver_of(r, &o);
  char path[600];
  save(s, P("m"), 1, path);
  size_t sz;
  char *bytes = slurp(path, &sz);
  bytes[sz / 2] ^= 0x01; /* inside b's 64 KiB of data */
  FILE *f = fopen(path, "wb");
  cr_assert_eq(fwrite(bytes, 1, sz, f), sz);
  fclose(f);
  free(bytes);
  /* the quick open still succeeds: latest_checkpoint accepts it */
  char latest[600];
  ASSERT_OK(cairn_latest_checkpoint(g_dir, latest, sizeof latest));

  cairn_registry *r2 = new_registry();
  cairn_var *a2 = vec(r2, "a", 2, 1, -9);
  cairn_var *b2 = NULL;
  ASSERT_OK(cairn_var_new(r2, "b", CAIRN_DTYPE_F32, 1, &n, cairn_init_zeros(), CAIRN_COLL_GLOBAL, &b2));
  cairn_saver *s2 = saver_of(r2, &o);
  cairn_restore_report *rep = (cairn_restore_report *)&o;
  cairn_status st = cairn_saver_restore_partial(s2, path, NULL, &rep, NULL);
  cr_assert_eq(st, CAIRN_E_CORRUPT, "status %d: %s", st, cairn_errmsg());
  ASSERT_MSG_HAS("'b'");
  ASSERT_MSG_HAS("nothing was changed");
  cr_assert_null(rep);
  cr_assert_float_eq(val(a2, 0), -9, 0, "a was read fine but is not assigned");
  cr_assert_not(cairn_var_is_initialized(b2));
  cairn_saver_free(s);
  cairn_saver_free(s2);
  cairn_registry_free(r);
  cairn_registry_free(r2);
}

/* ---- restore in bounded memory: verify every tensor, then decode in place ---- */

/* kB from a "Name:   123 kB" line of /proc/self/status, -1 if absent. */
static long status_kb(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long v = -1;
  size_t kl = strlen(key);
  while (fgets(line, sizeof line, f))
    if (strncmp(line, key, kl) == 0 && line[kl] == ':') v = strtol(line + kl + 1, NULL, 10);
  fclose(f);
  return v;
}

/* Restoring 256 MiB of variables (16 of 16 MiB) must not need them twice:
   the peak RSS (VmHWM, reset just before) stays within what the process
   held before plus max(64 MiB, the largest tensor). */
Test(restore, peak_memory_stays_within_the_variables_plus_a_bound, .timeout = 120) {
  enum { NV = 16 };
  int64_t shape[2] = {1024, 4096}; /* 16 MiB of f32 */
  char names[NV][16];
  cairn_saver_options o = fast(5);
  o.write.compress = CAIRN_CKPT_COMPRESS_NONE;
  char path[600];
  {
    cairn_registry *r = new_registry();
    for (int i = 0; i < NV; i++) {
      snprintf(names[i], sizeof names[i], "layer%02d", i);
      fvar(r, names[i], 2, shape, CAIRN_COLL_MODEL, 1, (float)i);
    }
    cairn_saver *s = saver_of(r, &o);
    save(s, P("big"), 1, path);
    cairn_saver_free(s);
    cairn_registry_free(r);
  }
  cairn_registry *r = new_registry();
  cairn_var *v[NV];
  for (int i = 0; i < NV; i++) v[i] = fvar(r, names[i], 2, shape, CAIRN_COLL_MODEL, 1, -1.0f); /* touched */
  cairn_saver *s = saver_of(r, &o);
  FILE *f = fopen("/proc/self/clear_refs", "w");
  if (!f || fputs("5", f) < 0 || fclose(f) != 0) cr_skip_test("cannot reset VmHWM (/proc/self/clear_refs)");
  long before = status_kb("VmRSS");
  cr_assert_gt(before, 0, "VmRSS");
  ASSERT_OK(cairn_saver_restore(s, path, NULL));
  long peak = status_kb("VmHWM");
  long extra_kb = peak - before, allowed_kb = 64L << 10;
  cr_assert_leq(extra_kb, allowed_kb,
                "restoring 256 MiB of variables took %ld KiB above the %ld KiB held before (allowed: %ld KiB)",
                extra_kb, before, allowed_kb);
  for (int i = 0; i < NV; i++) {
    cr_assert(cairn_var_is_initialized(v[i]));
    cr_assert_float_eq(val(v[i], 0), (float)i, 0);
    cr_assert_float_eq(val(v[i], 1024 * 4096 - 1), (float)i + (float)(1024 * 4096 - 1), 1);
  }
  cairn_saver_free(s);
  cairn_registry_free(r);
}

/* Four variables a..d saved with values 1.., 2.., ...; a fresh registry of
   the same variables, every element -7 and initialized, and its saver. */
static cairn_saver *four_saved(char *path, cairn_registry **r2, cairn_var *v2[4], int64_t dlen) {
  cairn_registry *r = new_registry();
  const char *nm[4] = {"a", "b", "c", "d"};
  for (int i = 0; i < 4; i++) vec(r, nm[i], i == 3 ? dlen : 4096, 1, (float)(i + 1));
  cairn_saver_options o = fast(5);
  o.write.compress = CAIRN_CKPT_COMPRESS_NONE;
  cairn_saver *s = saver_of(r, &o);
  save(s, P("four"), 1, path);
  cairn_saver_free(s);
  cairn_registry_free(r);
  *r2 = new_registry();
  for (int i = 0; i < 4; i++) v2[i] = vec(*r2, nm[i], 4096, 1, 0);
  for (int i = 0; i < 4; i++)
    for (int64_t k = 0; k < 4096; k++) cairn_tensor_f32(cairn_var_tensor(v2[i]))[k] = -7;
  cairn_saver_options o2 = fast(5);
  return saver_of(*r2, &o2);
}

static void assert_all_unchanged(cairn_var *v[4]) {
  for (int i = 0; i < 4; i++) {
    cr_assert(cairn_var_is_initialized(v[i]), "variable %d keeps its initialized flag", i);
    for (int64_t k = 0; k < 4096; k++)
      cr_assert_float_eq(val(v[i], k), -7, 0, "variable %d element %lld was changed", i, (long long)k);
  }
}

/* The last tensor (in name and file order) has another shape: nothing changes. */
Test(restore, strict_last_tensor_wrong_shape_changes_nothing) {
  char path[600];
  cairn_registry *r2;
  cairn_var *v2[4];
  cairn_saver *s2 = four_saved(path, &r2, v2, 4095);
  cr_assert_eq(cairn_saver_restore(s2, path, NULL), CAIRN_E_SHAPE, "%s", cairn_errmsg());
  ASSERT_MSG_HAS("nothing was changed");
  assert_all_unchanged(v2);
  cairn_saver_free(s2);
  cairn_registry_free(r2);
}

/* The last tensor's data fails its checksum: found by the verifying pass
   before a, b, c (sound, read first) are written. */
Test(restore, strict_last_tensor_bad_crc_changes_nothing) {
  char path[600];
  cairn_registry *r2;
  cairn_var *v2[4];
  cairn_saver *s2 = four_saved(path, &r2, v2, 4096);
  size_t sz;
  char *bytes = slurp(path, &sz);
  /* d = 4, 5, 6, ...: its element 100 is in the file's last record */
  float want = 4.0f + 100.0f;
  size_t at = 0;
  for (size_t k = 0; k + 4 <= sz; k++)
    if (memcmp(bytes + k, &want, 4) == 0) at = k;
  cr_assert_gt(at, 0, "d's element 100 not found in the file");
  bytes[at] ^= 0x01;
  FILE *f = fopen(path, "wb");
  cr_assert_eq(fwrite(bytes, 1, sz, f), sz);
  fclose(f);
  free(bytes);
  cairn_status st = cairn_saver_restore(s2, path, NULL);
  cr_assert_eq(st, CAIRN_E_CORRUPT, "status %d: %s", st, cairn_errmsg());
  ASSERT_MSG_HAS("'d'");
  ASSERT_MSG_HAS("nothing was changed");
  assert_all_unchanged(v2);
  cairn_saver_free(s2);
  cairn_registry_free(r2);
}

/* What the test hook does to the file between the two passes. */
typedef enum { TAMPER_FLIP_LAST, TAMPER_TRUNCATE, TAMPER_TOUCH } tamper_kind;
static tamper_kind g_tamper;
static int g_tampered;

static void tamper(const char *path, void *user) {
  (void)user;
  g_tampered++;
  int fd = open(path, O_RDWR);
  cr_assert_geq(fd, 0, "open '%s': %s", path, strerror(errno));
  struct stat sb;
  cr_assert_eq(fstat(fd, &sb), 0);
  if (g_tamper == TAMPER_FLIP_LAST) {
    /* d's element 100 (4 + 100), in the file's last record */
    float want = 104.0f, got;
    off_t at = -1;
    for (off_t k = 0; k + 4 <= sb.st_size; k += 4)
      if (pread(fd, &got, 4, k) == 4 && memcmp(&got, &want, 4) == 0) at = k;
    cr_assert_geq(at, 0);
    unsigned char b;
    cr_assert_eq(pread(fd, &b, 1, at), 1);
    b ^= 0x01;
    cr_assert_eq(pwrite(fd, &b, 1, at), 1);
  } else if (g_tamper == TAMPER_TRUNCATE) {
    cr_assert_eq(ftruncate(fd, sb.st_size / 2), 0);
  } else {
    /* the same bytes written again, a later modification time */
    unsigned char b;
    cr_assert_eq(pread(fd, &b, 1, 100), 1);
    cr_assert_eq(pwrite(fd, &b, 1, 100), 1);
    struct timespec t[2] = {{0, UTIME_OMIT}, {sb.st_mtim.tv_sec + 5, 0}};
    cr_assert_eq(futimens(fd, t), 0);
  }
  close(fd);
}

static void restore_tampered(tamper_kind k, cairn_status want, const char *needle, size_t n_written) {
  char path[600];
  cairn_registry *r2;
  cairn_var *v2[4];
  cairn_saver *s2 = four_saved(path, &r2, v2, 4096);
  g_tamper = k;
  g_tampered = 0;
  cairn__restore_between_passes = tamper;
  cairn_status st = cairn_saver_restore(s2, path, NULL);
  cairn__restore_between_passes = NULL;
  cr_assert_eq(g_tampered, 1, "the hook ran between the passes");
  cr_assert_eq(st, want, "status %d (want %d): %s", st, want, cairn_errmsg());
  ASSERT_MSG_HAS(needle);
  ASSERT_MSG_HAS("changed or failed while it was being restored");
  char counted[64];
  snprintf(counted, sizeof counted, "%zu of 4 variable", n_written);
  ASSERT_MSG_HAS(counted);
  ASSERT_MSG_HAS("'a'");
  /* what was written is marked uninitialized; the rest is untouched */
  for (size_t i = 0; i < 4; i++) {
    cr_assert_eq(cairn_var_is_initialized(v2[i]), i >= n_written, "variable %zu: initialized flag", i);
    if (i >= n_written) cr_assert_float_eq(val(v2[i], 0), -7, 0, "variable %zu untouched", i);
  }
  cairn_saver_free(s2);
  cairn_registry_free(r2);
}

/* Modified between the passes: the second pass's checksums find it. */
Test(restore, file_modified_between_passes_is_reported) {
  restore_tampered(TAMPER_FLIP_LAST, CAIRN_E_CORRUPT, "reading 'd' after the whole file had been verified", 4);
}

/* Truncated between the passes: the first tensor past the cut fails. */
Test(restore, file_truncated_between_passes_is_reported) {
  /* cut in c's record: a and b were written whole, c in part */
  restore_tampered(TAMPER_TRUNCATE, CAIRN_E_TRUNCATED, "reading 'c' after the whole file had been verified", 3);
}

/* Written to between the passes without changing a tensor byte: the
   modification time says so, and the restore fails all the same. */
Test(restore, file_touched_between_passes_is_reported) {
  restore_tampered(TAMPER_TOUCH, CAIRN_E_CORRUPT, "it was written to", 4);
}

/* #132 partial restore, naive: restricting the saver leaves the others uninitialized
   (TF's readiness check then names them) */
Test(restore, restricted_saver_leaves_the_rest_uninitialized) {
  cairn_registry *r = new_registry();
  vec(r, "a", 2, 1, 4);
  cairn_saver_options o = fast(5);
  cairn_saver *s = saver_of(r, &o);
  char path[600];
  save(s, P("m"), 1, path);
  cairn_saver_free(s);
  cairn_registry_free(r);

  r = new_registry();
  cairn_var *a = vec(r, "a", 2, 0, 0);
  vec(r, "b", 3, 0, 0);
  cairn_var *only_a[1] = {a};
  ASSERT_OK(cairn_saver_new_list(only_a, 1, &o, &s));
  ASSERT_OK(cairn_saver_restore(s, path, NULL));
  char names[128];
  cr_assert_eq(cairn_registry_uninitialized_str(r, NULL, 0, names, sizeof names), 1);
  cr_assert_str_eq(names, "b");
  cairn_saver_free(s);
  /* #133 the full saver fails instead: "b not found in checkpoint" */
  s = saver_of(r, &o);
  cr_assert_eq(cairn_saver_restore(s, path, NULL), CAIRN_E_NOT_FOUND);
  ASSERT_MSG_HAS("'b' not found in checkpoint");
  /* a later save of the full saver still writes everything (save set != restore set) */
  cairn_var *b = NULL;
  ASSERT_OK(cairn_registry_find(r, "b", &b));
  ASSERT_OK(cairn_var_initialize(b));
  char p2[600];
  save(s, P("m"), 2, p2);
  cairn_ckpt *c = NULL;
  ASSERT_OK(cairn_ckpt_open(p2, NULL, &c));
  cr_assert_eq(cairn_ckpt_count(c), 2);
  cairn_ckpt_close(c);
  cairn_saver_free(s);
  cairn_registry_free(r);
}

/* Accessors and free functions take NULL and out-of-range arguments without crashing */
Test(saver, null_and_out_of_range_inputs) {
  cr_assert_eq(cairn_saver_count(NULL), 0);
  cr_assert_null(cairn_saver_name_at(NULL, 0));
  cr_assert_null(cairn_saver_var_at(NULL, 0));
  cr_assert_eq(cairn_saver_last_checkpoints_count(NULL), 0);
  cr_assert_null(cairn_saver_last_checkpoint_at(NULL, 0));
  cairn_saver_clear_meta(NULL);
  cr_assert_eq(cairn_restore_report_count(NULL, CAIRN_RESTORE_RESTORED), 0);
  cr_assert_null(cairn_restore_report_item(NULL, CAIRN_RESTORE_RESTORED, 0));
  char buf[8] = "x";
  cr_assert_eq(cairn_restore_report_format(NULL, buf, sizeof buf), 0);
  cr_assert_str_eq(buf, "");
  cr_assert_null(cairn_saver_meta_producer(NULL));
  int64_t i64;
  double f64;
  const char *str;
  const void *data;
  size_t len;
  cr_assert_eq(cairn_saver_meta_global_step(NULL, &i64), CAIRN_E_NULL);
  cr_assert_eq(cairn_saver_meta_user_i64(NULL, "k", &i64), CAIRN_E_NULL);
  cr_assert_eq(cairn_saver_meta_user_f64(NULL, "k", &f64), CAIRN_E_NULL);
  cr_assert_eq(cairn_saver_meta_user_str(NULL, "k", &str), CAIRN_E_NULL);
  cr_assert_eq(cairn_saver_meta_state(NULL, "k", &data, &len), CAIRN_E_NULL);
  cr_assert_eq(cairn_saver_meta_read(NULL, NULL), CAIRN_E_NULL);
  cr_assert_null(cairn_checkpoint_state_model_path(NULL));
  cr_assert_eq(cairn_checkpoint_state_count(NULL), 0);
  cr_assert_null(cairn_checkpoint_state_path_at(NULL, 0));
  cairn_restore_options opt = {0};
  cr_assert_eq(cairn_saver_restore_partial(NULL, P("x"), &opt, NULL, NULL), CAIRN_E_NULL);

  cairn_registry *r = new_registry();
  vec(r, "v", 1, 1, 1);
  cairn_saver_options o = fast(5);
  cairn_saver *s = saver_of(r, &o);
  char path[600];
  save(s, P("m"), 1, path);
  cairn_saver_meta *m = NULL;
  ASSERT_OK(cairn_saver_meta_read(path, &m));
  cr_assert_eq(cairn_saver_meta_user_str(m, NULL, &str), CAIRN_E_NULL);
  cr_assert_eq(cairn_saver_meta_user_str(m, "k", NULL), CAIRN_E_NULL);
  cr_assert_eq(cairn_saver_meta_state(m, "k", NULL, &len), CAIRN_E_NULL);
  cr_assert_eq(cairn_saver_meta_global_step(m, NULL), CAIRN_E_NULL);
  cairn_saver_meta_free(m);
  cr_assert_null(cairn_saver_var_at(s, 1));
  cr_assert_not_null(cairn_saver_var_at(s, 0));
  cairn_saver_free(s);
  cairn_registry_free(r);
}

/* ==== the state file names files of its own directory ========================================== */

/* Checkpoint directory g_dir/ckpt; the "victims" live in g_dir/victims,
 * outside it: a text file, a file named like a checkpoint, and real
 * checkpoints with other values reachable through a symbolic link to the
 * victims directory (ckpt/link) and through a link planted as an entry
 * (ckpt/model.ckpt-8, the highest step, so a scan would pick it). */
typedef struct victims {
  char passwd[600], file[600], via_link[600], linked[600];
} victims;

static void plant_victims(victims *v) {
  cr_assert_eq(mkdir(P("ckpt"), 0755), 0);
  cr_assert_eq(mkdir(P("victims"), 0755), 0);
  snprintf(v->passwd, sizeof v->passwd, "%s", P("victims/passwd"));
  snprintf(v->file, sizeof v->file, "%s", P("victims/file"));
  spit(v->passwd, "root:x:0:0::/root:/bin/sh\n");
  spit(v->file, "precious\n");
  cairn_saver_options keep = fast(0);
  save_model(P("victims/model.ckpt"), 3, 99, &keep, v->via_link);
  save_model(P("victims/model.ckpt"), 8, 88, &keep, v->linked);
  cr_assert_eq(symlink("../victims", P("ckpt/link")), 0);
  cr_assert_eq(symlink("../victims/model.ckpt-8", P("ckpt/model.ckpt-8")), 0);
}

static void assert_victims(const victims *v) {
  cr_assert(exists(v->passwd), "%s was deleted", v->passwd);
  cr_assert(exists(v->file), "%s was deleted", v->file);
  cr_assert(exists(v->via_link), "%s was deleted", v->via_link);
  cr_assert(exists(v->linked), "%s was deleted", v->linked);
  struct stat sb;
  cr_assert_eq(lstat(P("ckpt/model.ckpt-8"), &sb), 0, "the planted link is left alone");
  char *t = slurp(v->passwd, NULL);
  cr_assert_str_eq(t, "root:x:0:0::/root:/bin/sh\n");
  free(t);
}

/* Saving into ckpt with max_to_keep 1 after a crafted state file: every
 * escaping entry is ignored (relative, absolute, through a linked
 * directory, a link entry), nothing outside is listed, restored or
 * deleted, and the saver still rotates its own files. */
Test(confine, escaping_entries_are_ignored_and_never_deleted) {
  victims v;
  plant_victims(&v);
  cairn_registry *r = new_registry();
  cairn_var *v0 = vec(r, "v0", 3, 1, 1);
  vec(r, "v1", 2, 1, 101);
  cairn_saver_options one = fast(1);
  cairn_saver *a = saver_of(r, &one);
  char own[600];
  save(a, P("ckpt/model.ckpt"), 1, own);
  cairn_saver_free(a);

  char *real = realpath(g_dir, NULL);
  char text[8192];
  snprintf(text, sizeof text,
           "model_checkpoint_path: \"../victims/passwd\"\n"
           "all_model_checkpoint_paths: \"%s/victims/file\"\n"
           "all_model_checkpoint_paths: \"link/model.ckpt-3\"\n"
           "all_model_checkpoint_paths: \"%s/ckpt/link/model.ckpt-3\"\n"
           "all_model_checkpoint_paths: \"model.ckpt-8\"\n"
           "all_model_checkpoint_paths: \"model.ckpt-1\"\n"
           "all_model_checkpoint_paths: \"../victims/passwd\"\n",
           real, real);
  free(real);
  spit(P("ckpt/checkpoint"), text);

  cairn_checkpoint_state *st = NULL;
  ASSERT_OK(cairn_checkpoint_state_read(P("ckpt"), &st));
  cr_assert_eq(cairn_checkpoint_state_count(st), 1, "only model.ckpt-1 is kept");
  cr_assert_str_eq(cairn_checkpoint_state_path_at(st, 0), own);
  cr_assert_str_eq(cairn_checkpoint_state_model_path(st), own, "the newest kept entry replaces the model path");
  cr_assert_eq(cairn_checkpoint_state_ignored_count(st), 6);
  cr_assert_str_eq(cairn_checkpoint_state_ignored_at(st, 1), "link/model.ckpt-3");
  cr_assert_str_eq(cairn_checkpoint_state_ignored_at(st, 2 + 1), "model.ckpt-8");
  cr_assert_str_eq(cairn_checkpoint_state_ignored_at(st, 5), "../victims/passwd");
  cr_assert_null(cairn_checkpoint_state_ignored_at(st, 6));

  char latest[600];
  ASSERT_OK(cairn_latest_checkpoint(P("ckpt"), latest, sizeof latest));
  cr_assert_str_eq(latest, own);

  /* a restarted trainer: recovers what the state file lists, and also (a
     careless program) every entry as written; rotation must delete only
     its own files */
  const char *rec[1] = {cairn_checkpoint_state_path_at(st, 0)};
  cairn_saver *b = saver_of(r, &one);
  ASSERT_OK(cairn_saver_recover_last_checkpoints(b, rec, 1));
  cr_assert_eq(cairn_saver_last_checkpoints_count(b), 1);
  ASSERT_OK(cairn_saver_restore(b, latest, NULL));
  cr_assert_float_eq(val(v0, 0), 1, 0, "restored from the directory's own checkpoint");
  save(b, P("ckpt/model.ckpt"), 2, NULL);
  cr_assert_not(exists(own), "the saver's own evicted checkpoint is deleted");
  const char *raw[6] = {v.file, P("ckpt/link/model.ckpt-3"), P("ckpt/model.ckpt-8"), P("ckpt/../victims/passwd"),
                        v.via_link, P("ckpt/model.ckpt-2")};
  ASSERT_OK(cairn_saver_recover_last_checkpoints(b, raw, 6));
  save(b, P("ckpt/model.ckpt"), 3, NULL);
  save(b, P("ckpt/model.ckpt"), 4, NULL);
  assert_victims(&v);
  cr_assert_not(exists(P("ckpt/model.ckpt-2")));
  cr_assert_not(exists(P("ckpt/model.ckpt-3")));
  cr_assert(exists(P("ckpt/model.ckpt-4")));
  cairn_checkpoint_state_free(st);
  cairn_saver_free(b);

  /* every entry escapes: the state file is invalid; latest_checkpoint scans
     the directory and skips the planted link (step 8) */
  spit(P("ckpt/checkpoint"), "model_checkpoint_path: \"../victims/passwd\"\n"
                             "all_model_checkpoint_paths: \"link/model.ckpt-8\"\n");
  cr_assert_eq(cairn_checkpoint_state_read(P("ckpt"), &st), CAIRN_E_FORMAT);
  ASSERT_MSG_HAS("none of its 2 paths names a file in the directory");
  ASSERT_OK(cairn_latest_checkpoint(P("ckpt"), latest, sizeof latest));
  cr_assert_str_eq(latest, P("ckpt/model.ckpt-4"));
  assert_victims(&v);
  cairn_registry_free(r);
}

/* TF's absolute form of a path inside the directory still works, through
 * a linked name of the directory too; so does a link to a file inside. */
/* cairn_latest_checkpoint_open: the checkpoint it chose, open; a state
 * file entry that is a link inside the directory is followed; a checkpoint
 * file that is a FIFO is skipped at once, not waited on. */
Test(confine, latest_checkpoint_open_hands_over_what_it_chose) {
  char p1[600], p2[600], path[600], note[2048];
  save_model(P("model.ckpt"), 1, 10, NULL, p1);
  save_model(P("model.ckpt"), 2, 20, NULL, p2);
  cairn_ckpt *c = NULL;
  ASSERT_OK(cairn_latest_checkpoint_open(g_dir, path, sizeof path, note, sizeof note, &c));
  cr_assert_str_eq(path, p2);
  cr_assert_str_eq(cairn_ckpt_path(c), p2);
  cr_assert_str_eq(note, "");
  /* rotation deleting the file meanwhile does not take the handle away */
  cr_assert_eq(unlink(p2), 0);
  ASSERT_OK(cairn_ckpt_verify(c));
  cairn_ckpt_close(c);
  cr_assert_eq(cairn_latest_checkpoint_open(g_dir, path, sizeof path, NULL, 0, NULL), CAIRN_E_NULL);

  /* the newest replaced by a FIFO: model.ckpt-1, and the note says why */
  cr_assert_eq(mkfifo(p2, 0644), 0, "%s", strerror(errno));
  ASSERT_OK(cairn_latest_checkpoint_open(g_dir, path, sizeof path, note, sizeof note, &c));
  cr_assert_str_eq(cairn_ckpt_path(c), p1);
  cr_assert_not_null(strstr(note, "it is a FIFO, not a regular file"), "%s", note);
  cairn_ckpt_close(c);
  cairn_ckpt *direct = NULL;
  cr_assert_eq(cairn_ckpt_open(p2, NULL, &direct), CAIRN_E_IO, "a FIFO given by path is refused too, at once");
  ASSERT_MSG_HAS("it is a FIFO, not a regular file");
  cr_assert_null(direct);
}

Test(confine, absolute_paths_inside_are_kept) {
  cr_assert_eq(mkdir(P("ckpt"), 0755), 0);
  cr_assert_eq(symlink("ckpt", P("alias")), 0);
  char p1[600], p2[600];
  save_model(P("ckpt/model.ckpt"), 1, 10, NULL, p1);
  save_model(P("ckpt/model.ckpt"), 2, 20, NULL, p2);
  cr_assert_eq(symlink("model.ckpt-2", P("ckpt/best-2")), 0);
  char *real = realpath(P("ckpt"), NULL);
  char text[4096];
  snprintf(text, sizeof text,
           "model_checkpoint_path: \"%s/best-2\"\n"
           "all_model_checkpoint_paths: \"%s/model.ckpt-1\"\n"
           "all_model_checkpoint_paths: \"%s/model.ckpt-2\"\n"
           "all_model_checkpoint_paths: \"%s/best-2\"\n",
           P("alias"), real, P("alias"), P("alias"));
  spit(P("ckpt/checkpoint"), text);
  cairn_checkpoint_state *st = NULL;
  ASSERT_OK(cairn_checkpoint_state_read(P("ckpt"), &st));
  cr_assert_eq(cairn_checkpoint_state_ignored_count(st), 0);
  cr_assert_eq(cairn_checkpoint_state_count(st), 3);
  char want[700];
  snprintf(want, sizeof want, "%s/model.ckpt-1", real);
  cr_assert_str_eq(cairn_checkpoint_state_path_at(st, 0), want, "absolute paths are returned as written");
  cr_assert_str_eq(cairn_checkpoint_state_model_path(st), P("alias/best-2"));
  char latest[600];
  ASSERT_OK(cairn_latest_checkpoint(P("ckpt"), latest, sizeof latest));
  cr_assert_str_eq(latest, P("alias/best-2"));
  cr_assert_str_eq(cairn_errmsg(), "");

  /* rotation deletes a recovered absolute path of its own naming */
  cairn_registry *r = new_registry();
  vec(r, "v0", 3, 1, 30);
  vec(r, "v1", 2, 1, 130);
  cairn_saver_options one = fast(1);
  cairn_saver *s = saver_of(r, &one);
  const char *rec[1] = {want};
  ASSERT_OK(cairn_saver_recover_last_checkpoints(s, rec, 1));
  save(s, P("ckpt/model.ckpt"), 3, NULL);
  cr_assert_not(exists(p1), "a recovered absolute path inside is the saver's to delete");
  cr_assert(exists(p2));
  cairn_saver_free(s);
  cairn_registry_free(r);
  cairn_checkpoint_state_free(st);
  free(real);
}

/* ==== one writer per directory ==================================================================== */

Test(dir_lock, a_second_holder_is_refused_with_the_first_named) {
  cairn_checkpoint_lock *a = NULL, *b = NULL;
  ASSERT_OK(cairn_checkpoint_lock_new(g_dir, &a));
  cr_assert(cairn_checkpoint_lock_held(a));
  cr_assert_str_eq(cairn_checkpoint_lock_path(a), P(".cairn.lock"));
  char *text = slurp(P(".cairn.lock"), NULL);
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  char want[400];
  snprintf(want, sizeof want, "pid %ld host %s\n", (long)getpid(), host);
  cr_assert_str_eq(text, want);
  free(text);

  cr_assert_eq(cairn_checkpoint_lock_new(g_dir, &b), CAIRN_E_BUSY);
  cr_assert_null(b);
  snprintf(want, sizeof want, "pid %ld on host '%s' holds the lock '%s'", (long)getpid(), host, P(".cairn.lock"));
  ASSERT_MSG_HAS(want);
  ASSERT_MSG_HAS("is in use by another trainer");
  cr_assert_eq(cairn_checkpoint_lock_check(g_dir), CAIRN_E_BUSY);
  ASSERT_MSG_HAS(want);

  cairn_checkpoint_lock_free(a);
  ASSERT_OK(cairn_checkpoint_lock_check(g_dir));
  ASSERT_OK(cairn_checkpoint_lock_new(g_dir, &b));
  cairn_checkpoint_lock_free(b);
  cairn_checkpoint_lock_free(NULL);

  cr_assert_eq(cairn_checkpoint_lock_new(P("nope"), &b), CAIRN_E_NOT_FOUND);
  cr_assert_eq(cairn_checkpoint_lock_new(NULL, &b), CAIRN_E_NULL);
  cr_assert_eq(cairn_checkpoint_lock_new(g_dir, NULL), CAIRN_E_NULL);
  ASSERT_OK(cairn_checkpoint_lock_check(P("nope")));
  /* a link planted as the lock file is never followed (nor truncated) */
  cr_assert_eq(mkdir(P("d"), 0755), 0);
  spit(P("victim"), "keep");
  cr_assert_eq(symlink("../victim", P("d/.cairn.lock")), 0);
  cr_assert_eq(cairn_checkpoint_lock_new(P("d"), &b), CAIRN_E_IO);
  ASSERT_MSG_HAS("symbolic link");
  text = slurp(P("victim"), NULL);
  cr_assert_str_eq(text, "keep");
  free(text);
}

/* The kernel drops a SIGKILLed holder's lock: no stale lock blocks a restart. */
Test(dir_lock, released_when_the_holder_is_killed) {
  int ready[2];
  cr_assert_eq(pipe(ready), 0);
  pid_t child = fork();
  cr_assert_neq(child, -1);
  if (child == 0) {
    alarm(20); /* never outlives a failed test */
    cairn_checkpoint_lock *l = NULL;
    char c = cairn_checkpoint_lock_new(g_dir, &l) == CAIRN_OK ? 'y' : 'n';
    if (write(ready[1], &c, 1) != 1) _exit(2);
    for (;;) pause();
  }
  char c = 0;
  ssize_t got = read(ready[0], &c, 1);
  cairn_checkpoint_lock *l = NULL;
  cairn_status busy = cairn_checkpoint_lock_new(g_dir, &l);
  char msg[4096], want[64];
  snprintf(msg, sizeof msg, "%s", cairn_errmsg());
  snprintf(want, sizeof want, "pid %ld on host", (long)child);
  cr_assert_eq(kill(child, SIGKILL), 0); /* before any assertion can end the test */
  int status;
  cr_assert_eq(waitpid(child, &status, 0), child);
  cr_assert(got == 1 && c == 'y', "the child took the lock");
  cr_assert_eq(busy, CAIRN_E_BUSY, "status %d", busy);
  cr_assert_not_null(strstr(msg, want), "message '%s' lacks '%s'", msg, want);
  cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  ASSERT_OK(cairn_checkpoint_lock_new(g_dir, &l));
  cairn_checkpoint_lock_free(l);
  close(ready[0]);
  close(ready[1]);
}

/* Taking the lock removes the writer's own temporary files, regular files
 * only, in that directory only. */
Test(dir_lock, removes_leftover_temporary_files_of_the_writer) {
  cr_assert_eq(mkdir(P("sub"), 0755), 0);
  spit(P("model.ckpt-1200.tmp.a1B2c3"), "0123456789");
  spit(P("model.ckpt-1300.tmp.ZZZZZZ"), "01234");
  spit(P("checkpoint.tmp.x9Y8z7"), "model_checkpoint_path: \"x\"\n");
  static const char *const keep[] = {
      "model.ckpt-1200",        /* a checkpoint */
      "notes.tmp.a1B2c3",       /* no step: not the Saver's naming */
      "model.ckpt-1.tmp.abc",   /* not six characters */
      "model.ckpt-1.tmp.abc-ef", "model.ckpt-x.tmp.abcdef", "checkpoint", "sub/model.ckpt-5.tmp.abcdef",
  };
  for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) spit(P(keep[i]), "k");
  cr_assert_eq(mkdir(P("model.ckpt-7.tmp.dirdir"), 0755), 0); /* a directory */
  spit(P("outside"), "o");
  cr_assert_eq(symlink("outside", P("model.ckpt-9.tmp.linkis")), 0);

  cairn_checkpoint_lock *l = NULL;
  ASSERT_OK(cairn_checkpoint_lock_new(g_dir, &l));
  size_t files = 0;
  uint64_t bytes = 0;
  cairn_checkpoint_lock_removed(l, &files, &bytes);
  cr_assert_eq(files, 3);
  cr_assert_eq(bytes, 10 + 5 + strlen("model_checkpoint_path: \"x\"\n"));
  cr_assert_not(exists(P("model.ckpt-1200.tmp.a1B2c3")));
  cr_assert_not(exists(P("model.ckpt-1300.tmp.ZZZZZZ")));
  cr_assert_not(exists(P("checkpoint.tmp.x9Y8z7")));
  for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) cr_assert(exists(P(keep[i])), "%s was removed", keep[i]);
  cr_assert(exists(P("model.ckpt-7.tmp.dirdir")));
  struct stat sb;
  cr_assert_eq(lstat(P("model.ckpt-9.tmp.linkis"), &sb), 0, "a link is not a regular file");
  cr_assert(exists(P("outside")));
  cairn_checkpoint_lock_free(l);

  /* a refused locker removes nothing */
  spit(P("model.ckpt-5.tmp.qwerty"), "busy writer's");
  ASSERT_OK(cairn_checkpoint_lock_new(g_dir, &l));
  cairn_checkpoint_lock *other = NULL;
  spit(P("model.ckpt-6.tmp.qwerty"), "in flight");
  cr_assert_eq(cairn_checkpoint_lock_new(g_dir, &other), CAIRN_E_BUSY);
  cr_assert(exists(P("model.ckpt-6.tmp.qwerty")));
  cairn_checkpoint_lock_removed(l, &files, NULL);
  cr_assert_eq(files, 1);
  cairn_checkpoint_lock_free(l);
}

/* Issue 24, item 3: the cleanup deletes only this Saver's own temporaries.
 * Files that merely look like temporaries ("<x>-<digits>.tmp.<6 alnum>" of
 * another name), a directory and a link of the Saver's naming all survive;
 * the real leftovers of the prefix and of the state file go. The
 * deprecated cairn_checkpoint_lock_new is the default prefix "model.ckpt". */
Test(dir_lock, removes_only_the_savers_own_temporary_files) {
  static const char *const keep[] = {
      "notes-2024.tmp.backup", "results-7.tmp.final1", "report-3.tmp.v2abcd", /* other programs' files */
      "model.ckpt2-5.tmp.a1B2c3", "xmodel.ckpt-5.tmp.a1B2c3",                 /* other prefixes */
      "model.ckpt-.tmp.a1B2c3", "model.ckpt-5x.tmp.a1B2c3", "checkpoint2.tmp.XyZ123",
  };
  for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) spit(P(keep[i]), "user data");
  cr_assert_eq(mkdir(P("model.ckpt-5.tmp.abcdef"), 0755), 0);
  spit(P("target"), "t");
  cr_assert_eq(symlink("target", P("model.ckpt-6.tmp.linkis")), 0);
  spit(P("model.ckpt-5.tmp.a1B2c3"), "0123456789");
  spit(P("checkpoint.tmp.XyZ123"), "12345");

  cairn_checkpoint_lock *l = NULL;
  ASSERT_OK(cairn_checkpoint_lock_new(g_dir, &l));
  size_t files = 0;
  uint64_t bytes = 0;
  cairn_checkpoint_lock_removed(l, &files, &bytes);
  for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) cr_assert(exists(P(keep[i])), "%s was removed", keep[i]);
  struct stat sb;
  cr_assert(stat(P("model.ckpt-5.tmp.abcdef"), &sb) == 0 && S_ISDIR(sb.st_mode), "the directory was removed");
  cr_assert_eq(lstat(P("model.ckpt-6.tmp.linkis"), &sb), 0, "the link was removed");
  cr_assert(exists(P("target")));
  cr_assert_not(exists(P("model.ckpt-5.tmp.a1B2c3")), "the Saver's leftover is still there");
  cr_assert_not(exists(P("checkpoint.tmp.XyZ123")), "the state file's leftover is still there");
  cr_assert_eq(files, 2);
  cr_assert_eq(bytes, 15);
  cairn_checkpoint_lock_free(l);
}

/* Another prefix, in a subdirectory: its own files there, nothing else. */
Test(dir_lock, a_prefix_cleans_its_own_directory_only) {
  cairn_checkpoint_lock *l = NULL;
  size_t files = 0;
  uint64_t bytes = 0;
  cr_assert_eq(mkdir(P("sub"), 0755), 0);
  spit(P("sub/my.ckpt-12.tmp.Q1w2E3"), "abc");
  spit(P("sub/model.ckpt-12.tmp.Q1w2E3"), "another prefix's");
  spit(P("sub/checkpoint.tmp.Q1w2E3"), "ab");
  spit(P("my.ckpt-13.tmp.Q1w2E3"), "not the directory of the files");
  ASSERT_OK(cairn_checkpoint_lock_new_prefix(g_dir, "sub/my.ckpt", &l));
  cairn_checkpoint_lock_removed(l, &files, &bytes);
  cr_assert_eq(files, 2);
  cr_assert_eq(bytes, 5);
  cr_assert_not(exists(P("sub/my.ckpt-12.tmp.Q1w2E3")));
  cr_assert_not(exists(P("sub/checkpoint.tmp.Q1w2E3")));
  cr_assert(exists(P("sub/model.ckpt-12.tmp.Q1w2E3")));
  cr_assert(exists(P("my.ckpt-13.tmp.Q1w2E3")));
  cr_assert_str_eq(cairn_checkpoint_lock_path(l), P(".cairn.lock"), "the lock is the directory's");
  cairn_checkpoint_lock_free(l);

  /* A prefix that would lead the cleanup out of the directory is refused. */
  static const char *const bad[] = {"../model.ckpt", "sub/../../x", "/abs/model.ckpt", "sub/", ""};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    l = NULL;
    cr_assert_eq(cairn_checkpoint_lock_new_prefix(g_dir, bad[i], &l), CAIRN_E_INVALID, "prefix '%s'", bad[i]);
    cr_assert_null(l);
  }
  ASSERT_MSG_HAS("prefix '' must be the Saver's file prefix relative to the checkpoint directory");
  cr_assert_eq(cairn_checkpoint_lock_new_prefix(g_dir, "../model.ckpt", &l), CAIRN_E_INVALID);
  ASSERT_MSG_HAS("has a '..' component");
  ASSERT_OK(cairn_checkpoint_lock_check(g_dir)); /* a refused prefix took no lock */
}

/* Issue 24, item 2: the lock is the directory's, not the path's. Removed,
 * or replaced by another directory, it is reported as such. */
Test(dir_lock, verify_names_a_removed_or_replaced_directory) {
  char dir[400], moved[400];
  snprintf(dir, sizeof dir, "%s/run", g_dir);
  snprintf(moved, sizeof moved, "%s/run.old", g_dir);
  cr_assert_eq(mkdir(dir, 0755), 0);
  cairn_checkpoint_lock *l = NULL;
  ASSERT_OK(cairn_checkpoint_lock_new_prefix(dir, "model.ckpt", &l));
  ASSERT_OK(cairn_checkpoint_lock_verify(l));
  cr_assert_eq(cairn_checkpoint_lock_verify(NULL), CAIRN_E_NULL);

  /* moved away, another directory made in its place */
  cr_assert_eq(rename(dir, moved), 0);
  cr_assert_eq(mkdir(dir, 0755), 0);
  cr_assert_eq(cairn_checkpoint_lock_verify(l), CAIRN_E_NOT_FOUND);
  char want[900];
  snprintf(want, sizeof want,
           "checkpoint_lock_verify: checkpoint directory '%s' was replaced by another directory while training: the "
           "lock taken at start no longer protects it; not re-creating it; training stops",
           dir);
  ASSERT_MSG_HAS(want);
  /* the new directory is not locked by l: a second trainer may take it */
  cairn_checkpoint_lock *l2 = NULL;
  ASSERT_OK(cairn_checkpoint_lock_new_prefix(dir, NULL, &l2));
  cairn_checkpoint_lock_free(l2);
  /* moved back: the same directory again */
  rm_tree(dir);
  cr_assert_eq(rename(moved, dir), 0);
  ASSERT_OK(cairn_checkpoint_lock_verify(l));

  /* removed (rm -rf), then created again by someone else: still removed */
  rm_tree(dir);
  cr_assert_eq(cairn_checkpoint_lock_verify(l), CAIRN_E_NOT_FOUND);
  snprintf(want, sizeof want, "checkpoint directory '%s' was removed while training", dir);
  ASSERT_MSG_HAS(want);
  cr_assert_not(exists(dir), "verify created something");
  cr_assert_eq(mkdir(dir, 0755), 0);
  cr_assert_eq(cairn_checkpoint_lock_verify(l), CAIRN_E_NOT_FOUND);
  ASSERT_MSG_HAS(want);
  /* replaced by a file */
  rm_tree(dir);
  spit(dir, "x");
  cr_assert_eq(cairn_checkpoint_lock_verify(l), CAIRN_E_NOT_FOUND);
  cairn_checkpoint_lock_free(l);
}

/* The restart trap's last step: the save right after a restore at step S
 * must never replace the committed "<prefix>-S" with other contents. The
 * same contents are kept (not rewritten); other contents are refused and
 * the file keeps what was saved first. */
Test(saver, same_step_never_replaces_a_committed_checkpoint_silently) {
  cairn_registry *r = new_registry();
  cairn_var *a = vec(r, "hidden/kernel", 4, 1, 10);
  cairn_var *b = vec(r, "head/kernel", 4, 1, 20);
  cairn_saver_options o = fast(5);
  cairn_saver *s = saver_of(r, &o);
  char path[600];
  save(s, P("model.ckpt"), 100, path);
  cr_assert_str_eq(path, P("model.ckpt-100"));
  cr_assert_eq(cairn_saver_last_save_unchanged(s), 0);
  struct stat before, after;
  cr_assert_eq(stat(path, &before), 0);

  /* The same values again: nothing rewritten, the state file as after a save. */
  unlink(P("checkpoint"));
  save(s, P("model.ckpt"), 100, path);
  cr_assert_eq(cairn_saver_last_save_unchanged(s), 1);
  cr_assert_eq(stat(path, &after), 0);
  cr_assert_eq(after.st_ino, before.st_ino, "the file was not replaced");
  assert_state("model_checkpoint_path: \"model.ckpt-100\"\nall_model_checkpoint_paths: \"model.ckpt-100\"\n");
  cr_assert_eq(cairn_saver_last_checkpoints_count(s), 1);

  /* Other values at the same step (local_init_op loaded pretrained weights
     over the restored ones): refused, the file keeps the first values. */
  cairn_tensor_f32(cairn_var_tensor(a))[2] = -1;
  cr_assert_eq(cairn_saver_save(s, P("model.ckpt"), 100, path, sizeof path), CAIRN_E_EXISTS);
  char want[900];
  snprintf(want, sizeof want,
           "saver_save '%s': a checkpoint of step 100 is already there with other contents (1 of 2 variables "
           "differ: 'hidden/kernel'); refusing to replace it",
           P("model.ckpt-100"));
  ASSERT_MSG_HAS(want);
  ASSERT_MSG_HAS("replace_same_step = 1");
  cr_assert_eq(cairn_saver_last_save_unchanged(s), 0);
  cr_assert_eq(stat(P("model.ckpt-100"), &after), 0);
  cr_assert_eq(after.st_ino, before.st_ino);
  cairn_registry *r2 = new_registry();
  cairn_var *a2 = vec(r2, "hidden/kernel", 4, 0, 0);
  cairn_var *b2 = vec(r2, "head/kernel", 4, 0, 0);
  cairn_saver *s2 = saver_of(r2, &o);
  ASSERT_OK(cairn_saver_restore(s2, P("model.ckpt-100"), NULL));
  cr_assert_eq(val(a2, 2), 12.0f, "the first values are on disk");
  cr_assert_eq(val(b2, 0), 20.0f);

  /* Same tensors, other metadata: refused too (nothing saved is lost). */
  cairn_tensor_f32(cairn_var_tensor(a))[2] = 12;
  ASSERT_OK(cairn_saver_set_user_f64(s, "accuracy", 0.9));
  cr_assert_eq(cairn_saver_save(s, P("model.ckpt"), 100, path, sizeof path), CAIRN_E_EXISTS);
  ASSERT_MSG_HAS("metadata 'user.accuracy' differs");
  cairn_saver_clear_meta(s);
  save(s, P("model.ckpt"), 100, path);
  cr_assert_eq(cairn_saver_last_save_unchanged(s), 1);

  /* A new step, a save without a step, and TF's overwrite on request. */
  cairn_tensor_f32(cairn_var_tensor(b))[0] = 5;
  save(s, P("model.ckpt"), 101, path);
  save(s, P("plain"), -1, path);
  cairn_tensor_f32(cairn_var_tensor(b))[0] = 6;
  save(s, P("plain"), -1, path);
  cairn_saver_options tf = fast(5);
  tf.replace_same_step = 1;
  cairn_saver *s3 = saver_of(r, &tf);
  save(s3, P("model.ckpt"), 100, path);
  cr_assert_eq(cairn_saver_last_save_unchanged(s3), 0);
  ASSERT_OK(cairn_saver_restore(s2, P("model.ckpt-100"), NULL));
  cr_assert_eq(val(b2, 0), 6.0f, "replace_same_step overwrote it");

  /* A file of that name that is no checkpoint is replaced as before. */
  spit(P("model.ckpt-102"), "half a file");
  save(s, P("model.ckpt"), 102, path);
  ASSERT_OK(cairn_saver_restore(s2, P("model.ckpt-102"), NULL));
  cr_assert_eq(val(b2, 0), 6.0f);
  /* So is one a restore found damaged (marked corrupt). */
  cairn_tensor_f32(cairn_var_tensor(b))[0] = 7;
  ASSERT_OK(cairn_checkpoint_mark_corrupt(P("model.ckpt-102"), "test: damaged"));
  save(s, P("model.ckpt"), 102, path);
  ASSERT_OK(cairn_saver_restore(s2, P("model.ckpt-102"), NULL));
  cr_assert_eq(val(b2, 0), 7.0f);
  cairn_saver_free(s);
  cairn_saver_free(s2);
  cairn_saver_free(s3);
  cairn_registry_free(r2);
  cairn_registry_free(r);
}

/* Opens of `path` since the watch was set (inotify IN_OPEN events). */
static int opens_since(int ino) {
  char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
  int n = 0;
  ssize_t k;
  while ((k = read(ino, buf, sizeof buf)) > 0)
    for (char *p = buf; p < buf + k; p += sizeof(struct inotify_event) + ((struct inotify_event *)p)->len)
      n += (((struct inotify_event *)p)->mask & IN_OPEN) != 0;
  return n;
}

/* A resume restores <prefix>-S, then saves step S at once (CheckpointSaverHook
   after session creation): that save compares against the checkpoint the
   restore already has open instead of opening it again, with the same
   verdicts (unchanged: kept; changed: refused). */
Test(saver, same_step_save_after_restore_reads_the_restored_file_without_reopening) {
  cairn_registry *r = new_registry();
  cairn_var *a = vec(r, "hidden/kernel", 4, 1, 10);
  vec(r, "head/kernel", 4, 1, 20);
  cairn_saver_options o = fast(5);
  cairn_saver *s = saver_of(r, &o);
  char path[600];
  save(s, P("model.ckpt"), 100, path);
  cairn_saver_free(s);
  char file[600];
  snprintf(file, sizeof file, "%s", path);

  int ino = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  cr_assert_geq(ino, 0);
  /* Closes are watched too: inotify merges identical events in a row, so
     open, open would count as one; open, close, open counts two. */
  cr_assert_geq(inotify_add_watch(ino, file, IN_OPEN | IN_CLOSE_NOWRITE), 0);
  /* Without a restore the comparison has to open the file: the probe sees it. */
  s = saver_of(r, &o);
  save(s, P("model.ckpt"), 100, path);
  cr_assert_eq(cairn_saver_last_save_unchanged(s), 1);
  cr_assert_geq(opens_since(ino), 1, "a save without a restore opens the file to compare");

  /* Restore, then save the same step: one open in all (the restore's). */
  ASSERT_OK(cairn_saver_restore(s, file, NULL));
  cr_assert_eq(opens_since(ino), 1, "the restore opens the file once");
  save(s, P("model.ckpt"), 100, path);
  cr_assert_eq(cairn_saver_last_save_unchanged(s), 1);
  cr_assert_eq(opens_since(ino), 0, "the same-step save reused the restored checkpoint");

  /* Changed after the restore: refused, still without a second open. */
  ASSERT_OK(cairn_saver_restore(s, file, NULL));
  (void)opens_since(ino);
  cairn_tensor_f32(cairn_var_tensor(a))[1] = -3;
  cr_assert_eq(cairn_saver_save(s, P("model.ckpt"), 100, path, sizeof path), CAIRN_E_EXISTS);
  ASSERT_MSG_HAS("1 of 2 variables differ: 'hidden/kernel'");
  cr_assert_eq(opens_since(ino), 0);

  /* The file replaced after the restore: compared with what is there now. */
  cairn_tensor_f32(cairn_var_tensor(a))[1] = 11;
  ASSERT_OK(cairn_saver_restore(s, file, NULL));
  cairn_saver_options tf = fast(5);
  tf.replace_same_step = 1;
  cairn_saver *s2 = saver_of(r, &tf);
  cairn_tensor_f32(cairn_var_tensor(a))[1] = 42;
  save(s2, P("model.ckpt"), 100, path); /* another file at that name now */
  cairn_tensor_f32(cairn_var_tensor(a))[1] = 11;
  cr_assert_eq(cairn_saver_save(s, P("model.ckpt"), 100, path, sizeof path), CAIRN_E_EXISTS,
               "the restored handle is not used for a file that was replaced");
  cairn_tensor_f32(cairn_var_tensor(a))[1] = 42;
  save(s, P("model.ckpt"), 100, path);
  cr_assert_eq(cairn_saver_last_save_unchanged(s), 1);
  close(ino);
  cairn_saver_free(s);
  cairn_saver_free(s2);
  cairn_registry_free(r);
}

/* The Saver itself creates no directory (TF); its message says who does. */
Test(saver, missing_parent_directory_names_who_creates_it) {
  cairn_registry *r = new_registry();
  vec(r, "v", 1, 1, 1);
  cairn_saver_options o = fast(5);
  cairn_saver *s = saver_of(r, &o);
  cr_assert_eq(cairn_saver_save(s, P("new/m"), 1, NULL, 0), CAIRN_E_NOT_FOUND);
  ASSERT_MSG_HAS("doesn't exist, can't save");
  ASSERT_MSG_HAS("CheckpointSaverHook and MonitoredTrainingSession create their checkpoint_dir");
  cairn_saver_free(s);
  cairn_registry_free(r);
}

/* A checkpoint of the same step that opens but fails verification (a
 * flipped bit in its tensor data) holds nothing worth keeping: replaced. */
Test(saver, same_step_replaces_a_damaged_checkpoint) {
  cairn_registry *r = new_registry();
  cairn_var *a = vec(r, "big", 4096, 1, 0);
  cairn_saver_options o = fast(5);
  o.write.compress = CAIRN_CKPT_COMPRESS_NONE;
  cairn_saver *s = saver_of(r, &o);
  char path[600];
  save(s, P("model.ckpt"), 3, path);
  size_t n;
  char *bytes = slurp(path, &n);
  free(bytes);
  FILE *f = fopen(path, "r+b");
  cr_assert_not_null(f);
  fseek(f, (long)(n / 2), SEEK_SET);
  int ch = fgetc(f);
  fseek(f, (long)(n / 2), SEEK_SET);
  fputc(ch ^ 0x10, f);
  fclose(f);
  cairn_ckpt *c;
  ASSERT_OK(cairn_ckpt_open(path, NULL, &c));
  cr_assert_neq(cairn_ckpt_verify(c), CAIRN_OK, "the flip hit tensor data");
  cairn_ckpt_close(c);
  cairn_tensor_f32(cairn_var_tensor(a))[0] = 99;
  save(s, P("model.ckpt"), 3, path);
  ASSERT_OK(cairn_ckpt_open(path, NULL, &c));
  ASSERT_OK(cairn_ckpt_verify(c));
  cairn_ckpt_close(c);
  cairn_saver_free(s);
  cairn_registry_free(r);
}

/* The Saver's defaults come from the library (TF's values); the writer's
 * part of them is the writer's own default. */
Test(options, saver_and_restore_defaults) {
  cairn_saver_options o = cairn_saver_options_default();
  cr_assert_eq(o.max_to_keep, 5);
  cr_assert_float_eq(o.keep_checkpoint_every_n_hours, 10000.0, 0);
  cr_assert_eq(o.allow_empty, 0);
  cr_assert_eq(o.replace_same_step, 0);
  cr_assert_null(o.clock);
  cr_assert_null(o.clock_ctx);
  cairn_ckpt_write_options w = cairn_ckpt_write_options_default();
  cr_assert(memcmp(&o.write, &w, sizeof w) == 0);
  cairn_restore_options z, d = cairn_restore_options_default();
  memset(&z, 0, sizeof z);
  cr_assert(memcmp(&d, &z, sizeof z) == 0, "restore options: zero-filled is the default");
}

/* The restore op: a var list restored from one file, run as an op (a
 * Scaffold's local_init_op) or through cairn_op_init_fn (its init_fn). */
Test(restore, restore_op_restores_a_var_list) {
  char path[600];
  save_pretrained(path);
  model m = new_model();
  cairn_var *vars[4];
  const char *layer[] = {"dense/*"};
  size_t n = cairn_registry_list_vars(m.r, CAIRN_COLL_GLOBAL, layer, 1, NULL, 0, vars, 4);
  cr_assert_eq(n, 2);
  cairn_op *op = NULL;
  const cairn_restore_report *rep = (const cairn_restore_report *)1;
  ASSERT_OK(cairn_op_new_restore(NULL, path, vars, n, NULL, &rep, &op));
  cr_assert_null(rep);
  cr_assert_str_eq(cairn_op_name(op), "restore");
  cairn_session *s = NULL;
  ASSERT_OK(cairn_session_new(m.r, 0, &s));
  ASSERT_OK(cairn_op_init_fn(NULL, s, op));
  cr_assert_eq(val(m.kernel, 0), 1.0f);
  cr_assert_eq(val(m.kernel, 11), 12.0f);
  cr_assert_eq(val(m.bias, 3), 103.0f);
  cr_assert(cairn_var_is_initialized(m.kernel));
  cr_assert_eq(val(m.head, 0), -5.0f, "not in the list: untouched");
  cr_assert_not(cairn_var_is_initialized(m.fresh));
  cr_assert_null(rep, "a strict restore has no report");
  cairn_op_free(op);

  /* Lenient, with a report: the head has another shape. */
  const char *kernels[] = {"*/kernel"};
  cairn_restore_options ro;
  memset(&ro, 0, sizeof ro);
  ro.lenient = 1;
  n = cairn_registry_list_vars(m.r, CAIRN_COLL_GLOBAL, kernels, 1, NULL, 0, vars, 4);
  cr_assert_eq(n, 2);
  ASSERT_OK(cairn_op_new_restore("warm_start", path, vars, n, &ro, &rep, &op));
  cairn_run_args a = cairn_run_args_one(&op);
  ASSERT_OK(cairn_session_run(s, &a));
  cr_assert_not_null(rep);
  cr_assert(report_has(rep, CAIRN_RESTORE_RESTORED, "dense/kernel"));
  cr_assert(report_has(rep, CAIRN_RESTORE_MISMATCHED, "head/kernel"));
  cr_assert_eq(val(m.head, 0), -5.0f);
  cairn_op_free(op);
  cr_assert_null(rep, "freeing the op clears the report pointer");

  /* A missing file: the restore's status, the op's name first. */
  ASSERT_OK(cairn_op_new_restore("warm_start", P("nothing-here"), vars, 1, NULL, NULL, &op));
  a = cairn_run_args_one(&op);
  cr_assert_eq(cairn_session_run(s, &a), CAIRN_E_NOT_FOUND);
  ASSERT_MSG_HAS("warm_start: ");
  ASSERT_MSG_HAS("nothing-here");
  cairn_op_free(op);
  cairn_op *none = (cairn_op *)1;
  cr_assert_eq(cairn_op_new_restore(NULL, NULL, vars, 1, NULL, NULL, &none), CAIRN_E_NULL);
  cr_assert_null(none);
  ASSERT_MSG_HAS("op_new_restore: path is NULL");
  cairn_session_free(s);
  free_model(&m);
}

/* ---- the caller's env (cairn_saver_options.env) ------------------------------------ */

typedef struct env_rec {
  double t;
  char log[4096];
} env_rec;

static double env_rec_now(void *ctx) { return ((env_rec *)ctx)->t; }

static void env_rec_log(void *ctx, cairn_log_level level, const char *msg) {
  env_rec *e = ctx;
  size_t used = strlen(e->log);
  snprintf(e->log + used, sizeof e->log - used, "%d %s\n", (int)level, msg);
}

static cairn_saver *env_saver(cairn_registry **r, const cairn_env *env, int max_to_keep, double hours) {
  ASSERT_OK(cairn_registry_new(3, r));
  int64_t shape[1] = {4};
  cairn_var *v;
  ASSERT_OK(cairn_var_new(*r, "w", CAIRN_DTYPE_F32, 1, shape, cairn_init_zeros(), CAIRN_COLL_GLOBAL, &v));
  ASSERT_OK(cairn_var_initialize(v));
  cairn_saver_options o = cairn_saver_options_default();
  o.write.no_fsync = 1;
  o.max_to_keep = max_to_keep;
  o.keep_checkpoint_every_n_hours = hours;
  o.env = env;
  cairn_saver *s;
  ASSERT_OK(cairn_saver_new(*r, &o, &s));
  return s;
}

/* keep_checkpoint_every_n_hours runs on the env's clock: a checkpoint
   saved after the first keep time is kept when rotation evicts it. */
Test(saver, env_clock_drives_keep_checkpoint_every_n_hours) {
  env_rec rec = {0};
  cairn_env env = {.now = env_rec_now, .log = env_rec_log, .self = &rec};
  cairn_registry *r;
  cairn_saver *s = env_saver(&r, &env, 1, 1.0); /* next keep time: 0 + 3600 s */
  char prefix[300], p1[320], p2[320];
  snprintf(prefix, sizeof prefix, "%s/model.ckpt", g_dir);
  rec.t = 4000;
  ASSERT_OK(cairn_saver_save(s, prefix, 1, p1, sizeof p1));
  rec.t = 4001;
  ASSERT_OK(cairn_saver_save(s, prefix, 2, p2, sizeof p2));
  cr_assert_eq(access(p1, F_OK), 0, "'%s' was deleted: the saver did not use the env's clock", p1);
  cr_assert_eq(cairn_saver_last_checkpoints_count(s), 1);
  rec.t = 4002; /* the next eviction is before the next keep time (7600 s): deleted */
  ASSERT_OK(cairn_saver_save(s, prefix, 3, NULL, 0));
  cr_assert_neq(access(p2, F_OK), 0);
  cairn_saver_free(s);
  cairn_registry_free(r);
}

/* The Saver's WARNINGs go to the env's log sink. */
Test(saver, env_log_gets_the_rotation_warning) {
  env_rec rec = {0};
  cairn_env env = {.log = env_rec_log, .self = &rec};
  cairn_registry *r;
  cairn_saver *s = env_saver(&r, &env, 1, 10000.0);
  char prefix[300], other[320];
  snprintf(prefix, sizeof prefix, "%s/model.ckpt", g_dir);
  snprintf(other, sizeof other, "%s/notes.txt", g_dir);
  FILE *f = fopen(other, "w");
  cr_assert_not_null(f);
  fclose(f);
  const char *paths[1] = {other};
  ASSERT_OK(cairn_saver_recover_last_checkpoints(s, paths, 1));
  ASSERT_OK(cairn_saver_save(s, prefix, 1, NULL, 0));
  cr_assert_eq(access(other, F_OK), 0);
  cr_assert_not_null(strstr(rec.log, "not deleting"), "log: '%s'", rec.log);
  cr_assert_not_null(strstr(rec.log, "notes.txt"), "log: '%s'", rec.log);
  cairn_saver_free(s);
  cairn_registry_free(r);
}
