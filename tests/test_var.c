/* cairn/var.h: the registry (names, collections, initialization state,
 * global_step) and the initializers (values, statistics, fans, order and
 * thread independence, validation). */
#include "config.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef CAIRN_HAVE_OPENMP
#include <omp.h>
#endif

#include "cairn/var.h"

TestSuite(var, .timeout = 60);
TestSuite(init, .timeout = 60);

#define ASSERT_MSG_HAS(needle) \
  cr_assert_not_null(strstr(cairn_errmsg(), needle), "message '%s' lacks '%s'", cairn_errmsg(), needle)

static cairn_registry *new_registry(uint64_t seed) {
  cairn_registry *r = NULL;
  cr_assert_eq(cairn_registry_new(seed, &r), CAIRN_OK);
  cr_assert_not_null(r);
  return r;
}

/* Creates an f32 variable or fails the test. */
static cairn_var *mkvar(cairn_registry *r, const char *name, int rank, const int64_t *shape, cairn_init init,
                        unsigned coll) {
  cairn_var *v = NULL;
  cr_assert_eq(cairn_var_new(r, name, CAIRN_DTYPE_F32, rank, shape, init, coll, &v), CAIRN_OK, "%s: %s", name,
               cairn_errmsg());
  cr_assert_not_null(v);
  return v;
}

static cairn_var *mkvec(cairn_registry *r, const char *name, int64_t n, unsigned coll) {
  return mkvar(r, name, 1, &n, cairn_init_zeros(), coll);
}

/* A fresh tensor filled by cairn_init_fill; the test fails on error. */
static cairn_tensor *filled(cairn_dtype dt, int rank, const int64_t *shape, cairn_init init, uint64_t seed,
                            const char *name) {
  cairn_tensor *t = NULL;
  cr_assert_eq(cairn_tensor_new(dt, rank, shape, &t), CAIRN_OK);
  cr_assert_eq(cairn_init_fill(t, init, seed, name), CAIRN_OK, "%s", cairn_errmsg());
  return t;
}

typedef struct stats {
  double mean, sd, min, max;
} stats;

static stats stats_of(const cairn_tensor *t) {
  double s = 0, s2 = 0, mn = INFINITY, mx = -INFINITY;
  for (int64_t i = 0; i < t->size; i++) {
    double x = t->dtype == CAIRN_DTYPE_F32 ? ((const float *)t->data)[i] : ((const double *)t->data)[i];
    s += x;
    s2 += x * x;
    mn = x < mn ? x : mn;
    mx = x > mx ? x : mx;
  }
  double n = (double)t->size, mean = s / n;
  stats st = {mean, sqrt(s2 / n - mean * mean), mn, mx};
  return st;
}

/* ==== registry ================================================================ */

Test(var, create_find_and_accessors) {
  cairn_registry *r = new_registry(42);
  cr_assert_eq(cairn_registry_seed(r), 42u);
  int64_t ks[2] = {784, 256};
  cairn_var *k = mkvar(r, "dense/kernel", 2, ks, cairn_init_glorot_uniform(), CAIRN_COLL_MODEL);
  cr_assert_str_eq(cairn_var_name(k), "dense/kernel");
  cairn_tensor *t = cairn_var_tensor(k);
  cr_assert_eq(t->dtype, CAIRN_DTYPE_F32);
  cr_assert_eq(t->rank, 2);
  cr_assert_eq(t->shape[0], 784);
  cr_assert_eq(t->shape[1], 256);
  cr_assert_eq(cairn_var_collections(k), (unsigned)CAIRN_COLL_MODEL);
  cr_assert_eq(cairn_var_initializer(k).kind, CAIRN_INIT_GLOROT_UNIFORM);
  cr_assert_eq(cairn_var_is_initialized(k), 0);
  const float *p = cairn_tensor_f32(t);
  for (int64_t i = 0; i < t->size; i++) cr_assert_eq(p[i], 0.0f, "new storage is zeroed");

  cairn_var *f = NULL;
  cr_assert_eq(cairn_registry_find(r, "dense/kernel", &f), CAIRN_OK);
  cr_assert_eq(f, k);
  cr_assert_eq(cairn_registry_find(r, "dense/bias", &f), CAIRN_E_NOT_FOUND);
  cr_assert_null(f);
  cr_assert_eq(cairn_registry_find(r, "dense_2/bias", &f), CAIRN_E_NOT_FOUND);
  cr_assert_str_eq(cairn_errmsg(), "registry_find: no variable named 'dense_2/bias'");
  cairn_registry_free(r);
  cairn_registry_free(NULL);
}

Test(var, find_in_empty_registry) {
  cairn_registry *r = new_registry(0);
  cairn_var *f = (cairn_var *)&f;
  cr_assert_eq(cairn_registry_find(r, "x", &f), CAIRN_E_NOT_FOUND);
  cr_assert_null(f);
  cr_assert_eq(cairn_registry_count(r, CAIRN_COLL_ALL), 0u);
  cairn_registry_free(r);
}

Test(var, duplicate_names) {
  cairn_registry *r = new_registry(1);
  int64_t ks[2] = {784, 256};
  cairn_var *k = mkvar(r, "dense/kernel", 2, ks, cairn_init_glorot_uniform(), CAIRN_COLL_MODEL);
  cairn_var *v = (cairn_var *)&v;
  int64_t other = 10;
  cr_assert_eq(cairn_var_new(r, "dense/kernel", CAIRN_DTYPE_F64, 1, &other, cairn_init_zeros(), CAIRN_COLL_LOCAL,
                                &v),
               CAIRN_E_EXISTS);
  cr_assert_null(v);
  cr_assert_str_eq(cairn_errmsg(), "var_new: 'dense/kernel' already exists with shape (784, 256)");
  cr_assert_eq(cairn_registry_count(r, CAIRN_COLL_ALL), 1u);
  cairn_var *f;
  cr_assert_eq(cairn_registry_find(r, "dense/kernel", &f), CAIRN_OK);
  cr_assert_eq(f, k, "the original is untouched");
  cr_assert_eq(cairn_var_tensor(f)->dtype, CAIRN_DTYPE_F32);
  /* Names are case-sensitive and exact. */
  mkvec(r, "Dense/kernel", 1, CAIRN_COLL_GLOBAL);
  mkvec(r, "dense/kernel_1", 1, CAIRN_COLL_GLOBAL);
  cr_assert_eq(cairn_registry_count(r, CAIRN_COLL_ALL), 3u);
  cairn_registry_free(r);
}

Test(var, name_rules) {
  cairn_registry *r = new_registry(1);
  char long_ok[256], long_bad[257];
  memset(long_ok, 'a', 255);
  long_ok[255] = '\0';
  memset(long_bad, 'b', 256);
  long_bad[256] = '\0';
  const char *good[] = {"a", "0", "dense/kernel", "a.b-c_d/E9", "x/y/z", "..", "-", long_ok};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) mkvec(r, good[i], 2, CAIRN_COLL_GLOBAL);

  struct {
    const char *name, *msg;
  } bad[] = {
      {"", "name is empty"},
      {"/a", "'/' at offset 0 starts the name"},
      {"a/", "'/' at offset 1 ends the name"},
      {"a//b", "'/' at offset 1 is followed by '/'"},
      {"/", "starts the name"},
      {"a b", "character ' ' at offset 1 is not allowed"},
      {"w:0", "character ':' at offset 1"},
      {"caf\xc3\xa9", "byte 0xc3 at offset 3"},
      {"tab\there", "byte 0x09 at offset 3"},
      {long_bad, "is 256 bytes, at most 255"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cairn_var *v = (cairn_var *)&v;
    int64_t n = 1;
    cr_assert_eq(cairn_var_new(r, bad[i].name, CAIRN_DTYPE_F32, 1, &n, cairn_init_zeros(), CAIRN_COLL_GLOBAL, &v),
                 CAIRN_E_INVALID, "name #%zu", i);
    cr_assert_null(v);
    ASSERT_MSG_HAS(bad[i].msg);
    cr_assert_not_null(strstr(cairn_errmsg(), "var_new"));
  }
  /* Invalid names are shown without raw control bytes, and long ones cut. */
  cairn_var *v;
  int64_t n = 1;
  cr_assert_eq(cairn_var_new(r, "tab\there", CAIRN_DTYPE_F32, 1, &n, cairn_init_zeros(), CAIRN_COLL_GLOBAL, &v),
               CAIRN_E_INVALID);
  ASSERT_MSG_HAS("'tab?here'");
  cr_assert_eq(cairn_var_new(r, long_bad, CAIRN_DTYPE_F32, 1, &n, cairn_init_zeros(), CAIRN_COLL_GLOBAL, &v),
               CAIRN_E_INVALID);
  cr_assert_lt(strlen(cairn_errmsg()), 200u);
  cr_assert_eq(cairn_registry_count(r, CAIRN_COLL_ALL), sizeof good / sizeof good[0]);
  cairn_registry_free(r);
}

Test(var, many_variables_keep_their_pointers) {
  /* Enough to grow the array and the name index several times. */
  enum { N = 3000 };
  cairn_registry *r = new_registry(9);
  static cairn_var *made[N];
  char name[64];
  for (int i = 0; i < N; i++) {
    snprintf(name, sizeof name, "layer_%d/w", i);
    made[i] = mkvec(r, name, 1 + i % 5, i % 3 == 0 ? CAIRN_COLL_LOCAL : CAIRN_COLL_MODEL);
  }
  cr_assert_eq(cairn_registry_count(r, CAIRN_COLL_ALL), (size_t)N);
  cr_assert_eq(cairn_registry_count(r, CAIRN_COLL_LOCAL), (size_t)N / 3);
  for (int i = 0; i < N; i++) {
    snprintf(name, sizeof name, "layer_%d/w", i);
    cairn_var *f;
    cr_assert_eq(cairn_registry_find(r, name, &f), CAIRN_OK, "%s", name);
    cr_assert_eq(f, made[i]);
    cr_assert_str_eq(cairn_var_name(made[i]), name);
    cr_assert_eq(cairn_var_tensor(made[i])->size, 1 + i % 5);
  }
  static cairn_var *all[N];
  cr_assert_eq(cairn_registry_list(r, CAIRN_COLL_ALL, all, N), (size_t)N);
  for (int i = 0; i < N; i++) cr_assert_eq(all[i], made[i], "creation order at %d", i);
  cairn_registry_free(r);
}

Test(var, collection_masks) {
  cairn_registry *r = new_registry(1);
  int64_t n = 3;
  struct {
    unsigned mask;
    const char *msg;
  } bad[] = {
      {0, "'v': empty collection mask"},
      {CAIRN_COLL_GLOBAL | CAIRN_COLL_LOCAL, "both GLOBAL and LOCAL"},
      {CAIRN_COLL_ALL, "both GLOBAL and LOCAL"},
      {CAIRN_COLL_GLOBAL | 0x8, "unknown collection bits 0x8"},
      {0x100, "unknown collection bits 0x100"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cairn_var *v;
    cr_assert_eq(cairn_var_new(r, "v", CAIRN_DTYPE_F32, 1, &n, cairn_init_zeros(), bad[i].mask, &v),
                 CAIRN_E_INVALID, "mask 0x%x", bad[i].mask);
    ASSERT_MSG_HAS(bad[i].msg);
  }
  cr_assert_eq(cairn_registry_count(r, CAIRN_COLL_ALL), 0u);
  /* Every valid combination. */
  mkvec(r, "g", 1, CAIRN_COLL_GLOBAL);
  mkvec(r, "l", 1, CAIRN_COLL_LOCAL);
  mkvec(r, "t", 1, CAIRN_COLL_TRAINABLE);
  mkvec(r, "gt", 1, CAIRN_COLL_GLOBAL | CAIRN_COLL_TRAINABLE);
  mkvec(r, "lt", 1, CAIRN_COLL_LOCAL | CAIRN_COLL_TRAINABLE);
  cr_assert_eq(cairn_registry_count(r, CAIRN_COLL_ALL), 5u);
  cairn_registry_free(r);
}

Test(var, count_and_list_by_collection_in_creation_order) {
  cairn_registry *r = new_registry(3);
  cairn_var *k1 = mkvec(r, "dense/kernel", 4, CAIRN_COLL_MODEL);
  cairn_var *acc = mkvec(r, "metrics/total", 1, CAIRN_COLL_LOCAL);
  cairn_var *b1 = mkvec(r, "dense/bias", 4, CAIRN_COLL_MODEL);
  cairn_var *m = mkvec(r, "dense/kernel/Adam", 4, CAIRN_COLL_GLOBAL);
  cairn_var *cnt = mkvec(r, "metrics/count", 1, CAIRN_COLL_LOCAL);

  cr_assert_eq(cairn_registry_count(r, CAIRN_COLL_GLOBAL), 3u);
  cr_assert_eq(cairn_registry_count(r, CAIRN_COLL_TRAINABLE), 2u);
  cr_assert_eq(cairn_registry_count(r, CAIRN_COLL_LOCAL), 2u);
  cr_assert_eq(cairn_registry_count(r, CAIRN_COLL_MODEL), 3u, "any of the bits");
  cr_assert_eq(cairn_registry_count(r, CAIRN_COLL_ALL), 5u);
  cr_assert_eq(cairn_registry_count(r, 0), 0u);
  cr_assert_eq(cairn_registry_count(NULL, CAIRN_COLL_ALL), 0u);

  cairn_var *out[8] = {0};
  cr_assert_eq(cairn_registry_list(r, CAIRN_COLL_GLOBAL, out, 8), 3u);
  cr_assert(out[0] == k1 && out[1] == b1 && out[2] == m && out[3] == NULL);
  cr_assert_eq(cairn_registry_list(r, CAIRN_COLL_TRAINABLE, out, 8), 2u);
  cr_assert(out[0] == k1 && out[1] == b1);
  cr_assert_eq(cairn_registry_list(r, CAIRN_COLL_LOCAL, out, 8), 2u);
  cr_assert(out[0] == acc && out[1] == cnt);
  cr_assert_eq(cairn_registry_list(r, CAIRN_COLL_ALL, out, 8), 5u);
  cr_assert(out[0] == k1 && out[1] == acc && out[2] == b1 && out[3] == m && out[4] == cnt);
  /* Sizing call, and a short array gets the first cap in order. */
  cr_assert_eq(cairn_registry_list(r, CAIRN_COLL_ALL, NULL, 0), 5u);
  cairn_var *two[3] = {0, 0, (cairn_var *)out};
  cr_assert_eq(cairn_registry_list(r, CAIRN_COLL_ALL, two, 2), 5u);
  cr_assert(two[0] == k1 && two[1] == acc);
  cr_assert_eq(two[2], (cairn_var *)out, "nothing written beyond cap");
  cairn_registry_free(r);
}

Test(var, report_uninitialized_tf_semantics) {
  cairn_registry *r = new_registry(5);
  cairn_var *a = mkvec(r, "a", 2, CAIRN_COLL_MODEL);
  cairn_var *b = mkvec(r, "b", 2, CAIRN_COLL_LOCAL);
  cairn_var *t = mkvec(r, "t", 2, CAIRN_COLL_TRAINABLE); /* neither GLOBAL nor LOCAL */
  cairn_var *c = mkvec(r, "c", 2, CAIRN_COLL_GLOBAL);
  cairn_var *out[8];

  /* vars == NULL: every GLOBAL and LOCAL variable, in creation order. */
  cr_assert_eq(cairn_registry_report_uninitialized(r, NULL, 8, out), 3u);
  cr_assert(out[0] == a && out[1] == b && out[2] == c);
  cr_assert_eq(cairn_registry_report_uninitialized(r, NULL, 0, NULL), 3u, "count only");
  cairn_var *one[2] = {0, (cairn_var *)r};
  cr_assert_eq(cairn_registry_report_uninitialized(r, NULL, 1, one), 3u, "capacity 1, total 3");
  cr_assert_eq(one[0], a);
  cr_assert_eq(one[1], (cairn_var *)r, "nothing written beyond n");

  cr_assert_eq(cairn_var_initialize(b), CAIRN_OK);
  cr_assert_eq(cairn_registry_report_uninitialized(r, NULL, 8, out), 2u);
  cr_assert(out[0] == a && out[1] == c);

  /* A given list: only its uninitialized members, in the given order. */
  cairn_var *list[5] = {c, t, b, NULL, a};
  cr_assert_eq(cairn_registry_report_uninitialized(r, list, 5, out), 3u);
  cr_assert(out[0] == c && out[1] == t && out[2] == a);
  cr_assert_eq(cairn_registry_report_uninitialized(r, list, 0, out), 0u);

  cr_assert_eq(cairn_registry_initialize_collection(r, CAIRN_COLL_ALL), CAIRN_OK);
  cr_assert_eq(cairn_registry_report_uninitialized(r, NULL, 8, out), 0u);
  cr_assert_eq(cairn_registry_report_uninitialized(r, list, 5, out), 0u);
  cairn_registry_free(r);
}

Test(var, uninitialized_str) {
  cairn_registry *r = new_registry(5);
  mkvec(r, "dense/kernel", 2, CAIRN_COLL_MODEL);
  cairn_var *bias = mkvec(r, "dense/bias", 2, CAIRN_COLL_MODEL);
  mkvec(r, "global_step_x", 1, CAIRN_COLL_GLOBAL);
  char buf[128];
  cr_assert_eq(cairn_registry_uninitialized_str(r, NULL, 0, buf, sizeof buf), 3u);
  cr_assert_str_eq(buf, "dense/kernel, dense/bias, global_step_x");
  /* Exactly fitting: 39 characters + NUL. */
  cr_assert_eq(cairn_registry_uninitialized_str(r, NULL, 0, buf, 40), 3u);
  cr_assert_str_eq(buf, "dense/kernel, dense/bias, global_step_x");
  /* One byte short: cut after a whole name. */
  cr_assert_eq(cairn_registry_uninitialized_str(r, NULL, 0, buf, 39), 3u);
  cr_assert_str_eq(buf, "dense/kernel, dense/bias, ...");
  cr_assert_eq(cairn_registry_uninitialized_str(r, NULL, 0, buf, 20), 3u);
  cr_assert_str_eq(buf, "dense/kernel, ...");
  cr_assert_eq(cairn_registry_uninitialized_str(r, NULL, 0, buf, 8), 3u);
  cr_assert_str_eq(buf, "...");
  cr_assert_eq(cairn_registry_uninitialized_str(r, NULL, 0, buf, 3), 3u);
  cr_assert_str_eq(buf, "..");
  cr_assert_eq(cairn_registry_uninitialized_str(r, NULL, 0, buf, 1), 3u);
  cr_assert_str_eq(buf, "");
  cr_assert_eq(cairn_registry_uninitialized_str(r, NULL, 0, NULL, 0), 3u, "count only");

  cr_assert_eq(cairn_var_initialize(bias), CAIRN_OK);
  cr_assert_eq(cairn_registry_uninitialized_str(r, NULL, 0, buf, sizeof buf), 2u);
  cr_assert_str_eq(buf, "dense/kernel, global_step_x");
  cairn_var *list[1] = {bias};
  cr_assert_eq(cairn_registry_uninitialized_str(r, list, 1, buf, sizeof buf), 0u);
  cr_assert_str_eq(buf, "");
  cairn_registry_free(r);
}

Test(var, initialize_and_set_initialized) {
  cairn_registry *r = new_registry(11);
  int64_t n = 4;
  cairn_var *w = mkvar(r, "w", 1, &n, cairn_init_constant(0.5), CAIRN_COLL_MODEL);
  cairn_var *m = mkvar(r, "m", 1, &n, cairn_init_ones(), CAIRN_COLL_LOCAL);
  cr_assert_eq(cairn_registry_initialize_collection(r, CAIRN_COLL_LOCAL), CAIRN_OK);
  cr_assert_eq(cairn_var_is_initialized(m), 1);
  cr_assert_eq(cairn_var_is_initialized(w), 0);
  cr_assert_eq(cairn_tensor_f32(cairn_var_tensor(m))[3], 1.0f);
  cr_assert_eq(cairn_tensor_f32(cairn_var_tensor(w))[3], 0.0f, "not run yet");

  cairn_var *list[1] = {w};
  cr_assert_eq(cairn_registry_initialize(r, list, 1), CAIRN_OK);
  cr_assert_eq(cairn_var_is_initialized(w), 1);
  for (int i = 0; i < 4; i++) cr_assert_eq(cairn_tensor_f32(cairn_var_tensor(w))[i], 0.5f);

  /* set_initialized touches only the flag (a restore wrote the values). */
  cairn_tensor_f32(cairn_var_tensor(w))[0] = 9.0f;
  cairn_var_set_initialized(w, 0);
  cr_assert_eq(cairn_var_is_initialized(w), 0);
  cr_assert_eq(cairn_tensor_f32(cairn_var_tensor(w))[0], 9.0f);
  cairn_var_set_initialized(w, 7);
  cr_assert_eq(cairn_var_is_initialized(w), 1, "any non-zero is 1");
  /* Re-initializing resets the values, like running the initializer op again. */
  cr_assert_eq(cairn_var_initialize(w), CAIRN_OK);
  cr_assert_eq(cairn_tensor_f32(cairn_var_tensor(w))[0], 0.5f);
  cr_assert_eq(cairn_registry_initialize(r, NULL, 0), CAIRN_OK, "an empty list");
  cairn_registry_free(r);
}

Test(var, initialize_rejects_foreign_and_null) {
  cairn_registry *r = new_registry(1), *other = new_registry(1);
  cairn_var *mine = mkvec(r, "x", 2, CAIRN_COLL_GLOBAL);
  cairn_var *theirs = mkvec(other, "y", 2, CAIRN_COLL_GLOBAL);
  cairn_var *list[2] = {mine, theirs};
  cr_assert_eq(cairn_registry_initialize(r, list, 2), CAIRN_E_INVALID);
  ASSERT_MSG_HAS("'y' belongs to another registry");
  cr_assert_eq(cairn_var_is_initialized(theirs), 0);
  cairn_var *withnull[2] = {mine, NULL};
  cr_assert_eq(cairn_registry_initialize(r, withnull, 2), CAIRN_E_NULL);
  ASSERT_MSG_HAS("vars[1] is NULL");
  cr_assert_eq(cairn_registry_initialize(r, NULL, 2), CAIRN_E_NULL);
  cr_assert_eq(cairn_registry_initialize(NULL, list, 1), CAIRN_E_NULL);
  cr_assert_eq(cairn_registry_initialize_collection(NULL, CAIRN_COLL_ALL), CAIRN_E_NULL);
  cr_assert_eq(cairn_var_initialize(NULL), CAIRN_E_NULL);
  cairn_registry_free(r);
  cairn_registry_free(other);
}

Test(var, global_step_get_or_create) {
  cairn_registry *r = new_registry(2);
  mkvec(r, "w", 3, CAIRN_COLL_MODEL);
  cairn_var *gs = NULL, *again = NULL;
  cr_assert_eq(cairn_registry_global_step(r, &gs), CAIRN_OK, "%s", cairn_errmsg());
  cr_assert_str_eq(cairn_var_name(gs), "global_step");
  cairn_tensor *t = cairn_var_tensor(gs);
  cr_assert_eq(t->dtype, CAIRN_DTYPE_I64);
  cr_assert_eq(t->rank, 0);
  cr_assert_eq(t->size, 1);
  cr_assert_eq(cairn_var_collections(gs), (unsigned)CAIRN_COLL_GLOBAL, "GLOBAL, not trainable");
  cr_assert_eq(cairn_var_initializer(gs).kind, CAIRN_INIT_ZEROS);
  cr_assert_eq(cairn_var_is_initialized(gs), 0);
  cr_assert_eq(cairn_registry_global_step(r, &again), CAIRN_OK);
  cr_assert_eq(again, gs, "get, not create, the second time");
  cr_assert_eq(cairn_registry_count(r, CAIRN_COLL_ALL), 2u);
  cr_assert_eq(cairn_registry_count(r, CAIRN_COLL_TRAINABLE), 1u);
  cairn_tensor_i64(t)[0] = 77;
  cr_assert_eq(cairn_var_initialize(gs), CAIRN_OK);
  cr_assert_eq(cairn_tensor_i64(t)[0], 0);
  cr_assert_eq(cairn_registry_global_step(NULL, &gs), CAIRN_E_NULL);
  cr_assert_eq(cairn_registry_global_step(r, NULL), CAIRN_E_NULL);
  cairn_registry_free(r);
}

Test(var, global_step_wrong_type) {
  cairn_registry *r = new_registry(2);
  cairn_var *gs = (cairn_var *)&gs;
  cr_assert_eq(cairn_var_new(r, "global_step", CAIRN_DTYPE_I32, 0, NULL, cairn_init_zeros(), CAIRN_COLL_GLOBAL,
                                &gs),
               CAIRN_OK);
  cr_assert_eq(cairn_registry_global_step(r, &gs), CAIRN_E_DTYPE);
  cr_assert_null(gs);
  ASSERT_MSG_HAS("'global_step' exists as i32, expected i64");
  cairn_registry_free(r);

  r = new_registry(2);
  int64_t two = 2;
  cr_assert_eq(cairn_var_new(r, "global_step", CAIRN_DTYPE_I64, 1, &two, cairn_init_zeros(), CAIRN_COLL_GLOBAL,
                                &gs),
               CAIRN_OK);
  cr_assert_eq(cairn_registry_global_step(r, &gs), CAIRN_E_SHAPE);
  ASSERT_MSG_HAS("'global_step' exists with shape (2)");
  cairn_registry_free(r);
}

Test(var, bad_input_returns_a_status) {
  cairn_registry *r = new_registry(3);
  int64_t shape[2] = {4, 4}, neg[2] = {4, -1};
  cairn_var *v = (cairn_var *)&v;
  cr_assert_eq(cairn_registry_new(1, NULL), CAIRN_E_NULL);
  cr_assert_eq(cairn_var_new(NULL, "a", CAIRN_DTYPE_F32, 2, shape, cairn_init_zeros(), CAIRN_COLL_MODEL, &v),
               CAIRN_E_NULL);
  cr_assert_null(v);
  ASSERT_MSG_HAS("registry is NULL");
  cr_assert_eq(cairn_var_new(r, NULL, CAIRN_DTYPE_F32, 2, shape, cairn_init_zeros(), CAIRN_COLL_MODEL, &v),
               CAIRN_E_NULL);
  ASSERT_MSG_HAS("name is NULL");
  cr_assert_eq(cairn_var_new(r, "a", CAIRN_DTYPE_F32, 2, shape, cairn_init_zeros(), CAIRN_COLL_MODEL, NULL),
               CAIRN_E_NULL);
  ASSERT_MSG_HAS("out is NULL");
  cr_assert_eq(cairn_var_new(r, "a", CAIRN_DTYPE_F32, 2, neg, cairn_init_zeros(), CAIRN_COLL_MODEL, &v),
               CAIRN_E_INVALID);
  ASSERT_MSG_HAS("'a': dimension 1 is negative (-1)");
  cr_assert_eq(cairn_var_new(r, "a", CAIRN_DTYPE_F32, 2, NULL, cairn_init_zeros(), CAIRN_COLL_MODEL, &v),
               CAIRN_E_NULL);
  cr_assert_eq(cairn_var_new(r, "a", CAIRN_DTYPE_F32, 9, shape, cairn_init_zeros(), CAIRN_COLL_MODEL, &v),
               CAIRN_E_INVALID);
  ASSERT_MSG_HAS("rank 9");
  cr_assert_eq(cairn_var_new(r, "a", (cairn_dtype)77, 2, shape, cairn_init_zeros(), CAIRN_COLL_MODEL, &v),
               CAIRN_E_INVALID);
  ASSERT_MSG_HAS("unknown dtype 77");
  int64_t huge[2] = {(int64_t)1 << 40, (int64_t)1 << 40};
  cr_assert_eq(cairn_var_new(r, "a", CAIRN_DTYPE_F32, 2, huge, cairn_init_zeros(), CAIRN_COLL_MODEL, &v),
               CAIRN_E_LIMIT);
  ASSERT_MSG_HAS("var_new: 'a': tensor_new: element count overflows");
  /* Initializers are checked at creation. */
  cr_assert_eq(cairn_var_new(r, "step", CAIRN_DTYPE_I64, 0, NULL, cairn_init_normal(0, 1), CAIRN_COLL_GLOBAL, &v),
               CAIRN_E_DTYPE);
  ASSERT_MSG_HAS("'step': normal initializer needs f32 or f64, not i64");
  cr_assert_eq(cairn_var_new(r, "a", CAIRN_DTYPE_F32, 2, shape, cairn_init_uniform(1, 0), CAIRN_COLL_MODEL, &v),
               CAIRN_E_INVALID);
  ASSERT_MSG_HAS("var_new: 'a': uniform needs lo <= hi, got [1, 0)");
  cr_assert_eq(cairn_var_new(r, "a", CAIRN_DTYPE_F32, 2, shape, cairn_init_truncated_normal(0, -0.1),
                                CAIRN_COLL_MODEL, &v),
               CAIRN_E_INVALID);
  ASSERT_MSG_HAS("stddev -0.1 < 0");
  cr_assert_eq(cairn_registry_count(r, CAIRN_COLL_ALL), 0u, "no failed call left a variable behind");

  cr_assert_eq(cairn_registry_find(NULL, "a", &v), CAIRN_E_NULL);
  cr_assert_eq(cairn_registry_find(r, NULL, &v), CAIRN_E_NULL);
  cr_assert_eq(cairn_registry_find(r, "a", NULL), CAIRN_E_NULL);
  cr_assert_eq(cairn_registry_list(NULL, CAIRN_COLL_ALL, NULL, 0), 0u);
  cr_assert_eq(cairn_registry_report_uninitialized(NULL, NULL, 0, NULL), 0u);
  cr_assert_null(cairn_var_name(NULL));
  cr_assert_null(cairn_var_tensor(NULL));
  cr_assert_eq(cairn_var_collections(NULL), 0u);
  cr_assert_eq(cairn_var_is_initialized(NULL), 0);
  cairn_var_set_initialized(NULL, 1);
  cr_assert_eq(cairn_registry_seed(NULL), 0u);
  cairn_registry_free(r);
}

/* ==== initializers ============================================================ */

Test(init, constants_exact_for_every_dtype) {
  int64_t n = 37;
  cairn_tensor *t;

  t = filled(CAIRN_DTYPE_F32, 1, &n, cairn_init_constant(0.1), 0, "c");
  for (int i = 0; i < n; i++) cr_assert_eq(((float *)t->data)[i], 0.1f);
  cr_assert_eq(cairn_init_fill(t, cairn_init_zeros(), 0, "c"), CAIRN_OK);
  for (int i = 0; i < n; i++) cr_assert_eq(((float *)t->data)[i], 0.0f);
  cr_assert_eq(cairn_init_fill(t, cairn_init_ones(), 0, "c"), CAIRN_OK);
  for (int i = 0; i < n; i++) cr_assert_eq(((float *)t->data)[i], 1.0f);
  cairn_tensor_free(t);

  t = filled(CAIRN_DTYPE_F64, 1, &n, cairn_init_constant(-0.1), 0, "c");
  for (int i = 0; i < n; i++) cr_assert_eq(((double *)t->data)[i], -0.1);
  cairn_tensor_free(t);

  t = filled(CAIRN_DTYPE_I32, 1, &n, cairn_init_constant(-123456), 0, "c");
  for (int i = 0; i < n; i++) cr_assert_eq(((int32_t *)t->data)[i], -123456);
  cairn_tensor_free(t);

  t = filled(CAIRN_DTYPE_I64, 0, NULL, cairn_init_constant(-0x1p62), 0, "c");
  cr_assert_eq(*(int64_t *)t->data, -((int64_t)1 << 62));
  cr_assert_eq(cairn_init_fill(t, cairn_init_ones(), 0, "c"), CAIRN_OK);
  cr_assert_eq(*(int64_t *)t->data, 1);
  cairn_tensor_free(t);

  t = filled(CAIRN_DTYPE_I8, 1, &n, cairn_init_constant(-128), 0, "c");
  for (int i = 0; i < n; i++) cr_assert_eq(((int8_t *)t->data)[i], -128);
  cairn_tensor_free(t);

  t = filled(CAIRN_DTYPE_I16, 1, &n, cairn_init_constant(-2), 0, "c");
  for (int i = 0; i < n; i++) cr_assert_eq(((int16_t *)t->data)[i], -2);
  cairn_tensor_free(t);

  t = filled(CAIRN_DTYPE_U8, 1, &n, cairn_init_constant(255), 0, "c");
  for (int i = 0; i < n; i++) cr_assert_eq(((uint8_t *)t->data)[i], 255);
  cairn_tensor_free(t);

  t = filled(CAIRN_DTYPE_U32, 1, &n, cairn_init_constant(4294967295.0), 0, "c");
  for (int i = 0; i < n; i++) cr_assert_eq(((uint32_t *)t->data)[i], 4294967295u);
  cairn_tensor_free(t);

  t = filled(CAIRN_DTYPE_U64, 1, &n, cairn_init_constant(0x1p63), 0, "c");
  for (int i = 0; i < n; i++) cr_assert_eq(((uint64_t *)t->data)[i], (uint64_t)1 << 63);
  cairn_tensor_free(t);

  t = filled(CAIRN_DTYPE_BOOL, 1, &n, cairn_init_ones(), 0, "c");
  for (int i = 0; i < n; i++) cr_assert_eq(((uint8_t *)t->data)[i], 1);
  cr_assert_eq(cairn_init_fill(t, cairn_init_zeros(), 0, "c"), CAIRN_OK);
  for (int i = 0; i < n; i++) cr_assert_eq(((uint8_t *)t->data)[i], 0);
  cr_assert_eq(cairn_init_fill(t, cairn_init_constant(1), 0, "c"), CAIRN_OK);
  cr_assert_eq(((uint8_t *)t->data)[n - 1], 1);
  cairn_tensor_free(t);
}

Test(init, half_precision_constants_round_to_nearest_even) {
  struct {
    cairn_dtype dt;
    double v;
    uint16_t bits;
  } cases[] = {
      {CAIRN_DTYPE_F16, 1.0, 0x3c00},       {CAIRN_DTYPE_F16, 0.1, 0x2e66},
      {CAIRN_DTYPE_F16, -2.5, 0xc100},      {CAIRN_DTYPE_F16, 65504, 0x7bff},
      {CAIRN_DTYPE_F16, 65519, 0x7bff},     {CAIRN_DTYPE_F16, 1e-7, 0x0002},
      {CAIRN_DTYPE_F16, 0x1p-25, 0x0000},   {CAIRN_DTYPE_F16, 0x3p-25, 0x0002},
      {CAIRN_DTYPE_F16, 0x1p-14, 0x0400},   {CAIRN_DTYPE_F16, 0x1.ffep-15, 0x0400},
      {CAIRN_DTYPE_F16, -0.0, 0x8000},      {CAIRN_DTYPE_BF16, 1.0, 0x3f80},
      {CAIRN_DTYPE_BF16, 0.1, 0x3dcd},      {CAIRN_DTYPE_BF16, -2.0, 0xc000},
      {CAIRN_DTYPE_BF16, 3.0e38, 0x7f62},
  };
  int64_t n = 3;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cairn_tensor *t = filled(cases[i].dt, 1, &n, cairn_init_constant(cases[i].v), 0, "h");
    for (int j = 0; j < n; j++)
      cr_assert_eq(((uint16_t *)t->data)[j], cases[i].bits, "case %zu (%a): got 0x%04x, expected 0x%04x", i,
                   cases[i].v, ((uint16_t *)t->data)[j], cases[i].bits);
    cairn_tensor_free(t);
  }
  cairn_tensor *t = filled(CAIRN_DTYPE_F16, 1, &n, cairn_init_ones(), 0, "h");
  cr_assert_eq(((uint16_t *)t->data)[2], 0x3c00);
  cr_assert_eq(cairn_init_fill(t, cairn_init_constant(65520), 0, "h"), CAIRN_E_INVALID, "rounds to inf");
  ASSERT_MSG_HAS("does not fit f16");
  cr_assert_eq(cairn_init_fill(t, cairn_init_uniform(0, 1), 0, "h"), CAIRN_E_DTYPE);
  cairn_tensor_free(t);
}

Test(init, constant_validation) {
  int64_t n = 2;
  struct {
    cairn_dtype dt;
    double v;
    const char *msg;
  } bad[] = {
      {CAIRN_DTYPE_I32, 2.5, "constant 2.5 is not an integer"},
      {CAIRN_DTYPE_U8, 256, "outside the range of u8"},
      {CAIRN_DTYPE_I8, -129, "outside the range of i8"},
      {CAIRN_DTYPE_U32, -1, "outside the range of u32"},
      {CAIRN_DTYPE_I64, 0x1p63, "outside the range of i64"},
      {CAIRN_DTYPE_U64, 0x1p64, "outside the range of u64"},
      {CAIRN_DTYPE_F32, 1e39, "does not fit f32"},
      {CAIRN_DTYPE_F32, NAN, "is not finite"},
      {CAIRN_DTYPE_F64, INFINITY, "is not finite"},
      {CAIRN_DTYPE_I32, -INFINITY, "is not finite"},
      {CAIRN_DTYPE_BOOL, 2, "expected 0 or 1"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cairn_tensor *t;
    cr_assert_eq(cairn_tensor_new(bad[i].dt, 1, &n, &t), CAIRN_OK);
    cr_assert_eq(cairn_init_fill(t, cairn_init_constant(bad[i].v), 0, "k"), CAIRN_E_INVALID, "case %zu", i);
    ASSERT_MSG_HAS(bad[i].msg);
    ASSERT_MSG_HAS("init_fill: 'k'");
    cairn_tensor_free(t);
  }
}

Test(init, random_parameter_validation) {
  int64_t n = 8;
  cairn_tensor *f, *i64;
  cr_assert_eq(cairn_tensor_new(CAIRN_DTYPE_F32, 1, &n, &f), CAIRN_OK);
  cr_assert_eq(cairn_tensor_new(CAIRN_DTYPE_I64, 1, &n, &i64), CAIRN_OK);
  struct {
    cairn_init init;
    cairn_status s;
    const char *msg;
  } bad[] = {
      {{CAIRN_INIT_UNIFORM, 1, 0}, CAIRN_E_INVALID, "lo <= hi"},
      {{CAIRN_INIT_UNIFORM, NAN, 1}, CAIRN_E_INVALID, "not finite"},
      {{CAIRN_INIT_UNIFORM, 0, INFINITY}, CAIRN_E_INVALID, "not finite"},
      {{CAIRN_INIT_UNIFORM, -1e39, 0}, CAIRN_E_INVALID, "exceed the f32 range"},
      {{CAIRN_INIT_NORMAL, 0, -1}, CAIRN_E_INVALID, "stddev -1 < 0"},
      {{CAIRN_INIT_NORMAL, NAN, 1}, CAIRN_E_INVALID, "not finite"},
      {{CAIRN_INIT_NORMAL, 0, 1e38}, CAIRN_E_INVALID, "exceeds the f32 range"},
      {{CAIRN_INIT_TRUNCATED_NORMAL, 0, -1e-9}, CAIRN_E_INVALID, "< 0"},
      {{CAIRN_INIT_TRUNCATED_NORMAL, 0, INFINITY}, CAIRN_E_INVALID, "not finite"},
      {{(cairn_init_kind)99, 0, 0}, CAIRN_E_INVALID, "unknown initializer kind 99"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cr_assert_eq(cairn_init_fill(f, bad[i].init, 1, "p"), bad[i].s, "case %zu", i);
    ASSERT_MSG_HAS(bad[i].msg);
  }
  cairn_init_kind random[] = {CAIRN_INIT_UNIFORM, CAIRN_INIT_NORMAL, CAIRN_INIT_TRUNCATED_NORMAL,
                              CAIRN_INIT_GLOROT_UNIFORM, CAIRN_INIT_HE_NORMAL};
  for (size_t i = 0; i < 5; i++) {
    cairn_init in = {random[i], 0, 1};
    cr_assert_eq(cairn_init_fill(i64, in, 1, "step"), CAIRN_E_DTYPE, "kind %d on i64", (int)random[i]);
    ASSERT_MSG_HAS("needs f32 or f64, not i64");
  }
  cr_assert_eq(cairn_init_fill(NULL, cairn_init_zeros(), 1, "x"), CAIRN_E_NULL);
  /* A bad call leaves the tensor as it was. */
  for (int i = 0; i < n; i++) cr_assert_eq(cairn_tensor_f32(f)[i], 0.0f);
  /* stddev 0 and lo == hi are degenerate but valid. */
  cr_assert_eq(cairn_init_fill(f, cairn_init_normal(3, 0), 1, "p"), CAIRN_OK);
  for (int i = 0; i < n; i++) cr_assert_eq(cairn_tensor_f32(f)[i], 3.0f);
  cr_assert_eq(cairn_init_fill(f, cairn_init_uniform(-2, -2), 1, "p"), CAIRN_OK);
  for (int i = 0; i < n; i++) cr_assert_eq(cairn_tensor_f32(f)[i], -2.0f);
  cairn_tensor_free(f);
  cairn_tensor_free(i64);
}

Test(init, uniform_range_and_moments) {
  int64_t n = 1 << 18;
  for (int d = 0; d < 2; d++) {
    cairn_dtype dt = d ? CAIRN_DTYPE_F64 : CAIRN_DTYPE_F32;
    cairn_tensor *t = filled(dt, 1, &n, cairn_init_uniform(-3, 5), 7, "u");
    stats st = stats_of(t);
    cr_assert_geq(st.min, -3.0);
    cr_assert_lt(st.max, 5.0);
    cr_assert_lt(st.min, -3 + 1e-3);
    cr_assert_gt(st.max, 5 - 1e-3);
    /* U(-3, 5): mean 1, stddev 8/√12 = 2.3094; standard error of the mean 0.0045. */
    cr_assert_lt(fabs(st.mean - 1.0), 0.03, "%s mean %g", cairn_dtype_name(dt), st.mean);
    cr_assert_lt(fabs(st.sd - 8 / sqrt(12.0)), 0.02, "%s stddev %g", cairn_dtype_name(dt), st.sd);
    cairn_tensor_free(t);
  }
  /* f32 draws lie on the 24-bit grid of [0, 1). */
  cairn_tensor *t = filled(CAIRN_DTYPE_F32, 1, &n, cairn_init_uniform(0, 1), 7, "grid");
  for (int64_t i = 0; i < n; i++) {
    float x = ((float *)t->data)[i];
    cr_assert_eq(x * 16777216.0f, floorf(x * 16777216.0f));
  }
  cairn_tensor_free(t);
}

Test(init, uniform_never_reaches_hi_after_rounding) {
  /* In [1, 2) an f32 holds 2^23 values but the 24-bit draw can round up to 2. */
  int64_t n = 1 << 16;
  cairn_tensor *t = filled(CAIRN_DTYPE_F32, 1, &n, cairn_init_uniform(1, 2), 3, "edge");
  for (int64_t i = 0; i < n; i++) {
    float x = ((float *)t->data)[i];
    cr_assert(x >= 1.0f && x < 2.0f, "element %lld is %.9g", (long long)i, x);
  }
  cairn_tensor_free(t);
  /* Near 1e8 f32 values are 8 apart: [1e8, 1e8 + 8) holds only 1e8, and
   * about half the draws would round to hi without the correction. */
  t = filled(CAIRN_DTYPE_F32, 1, &n, cairn_init_uniform(1e8, 1e8 + 8), 3, "coarse");
  for (int64_t i = 0; i < n; i++) cr_assert_eq(((float *)t->data)[i], 1e8f, "element %lld", (long long)i);
  cairn_tensor_free(t);
  /* The same for f64 near 2^53, where doubles are 2 apart. */
  t = filled(CAIRN_DTYPE_F64, 1, &n, cairn_init_uniform(0x1p53, 0x1p53 + 2), 3, "coarse");
  for (int64_t i = 0; i < n; i++) cr_assert_eq(((double *)t->data)[i], 0x1p53, "element %lld", (long long)i);
  cairn_tensor_free(t);
}

Test(init, normal_moments) {
  int64_t n = 1 << 18;
  for (int d = 0; d < 2; d++) {
    cairn_dtype dt = d ? CAIRN_DTYPE_F64 : CAIRN_DTYPE_F32;
    cairn_tensor *t = filled(dt, 1, &n, cairn_init_normal(2.0, 0.5), 11, "n");
    stats st = stats_of(t);
    /* Standard errors: mean 0.001, stddev 0.0007. */
    cr_assert_lt(fabs(st.mean - 2.0), 0.006, "%s mean %g", cairn_dtype_name(dt), st.mean);
    cr_assert_lt(fabs(st.sd - 0.5), 0.005, "%s stddev %g", cairn_dtype_name(dt), st.sd);
    /* An untruncated normal goes well beyond 2 stddevs (P = 4.6%). */
    cr_assert_lt(st.min, 2.0 - 2 * 0.5 * 1.5);
    cr_assert_gt(st.max, 2.0 + 2 * 0.5 * 1.5);
    int beyond = 0;
    for (int64_t i = 0; i < n; i++) {
      double x = d ? ((double *)t->data)[i] : ((float *)t->data)[i];
      beyond += fabs(x - 2.0) > 1.0;
    }
    cr_assert_lt(fabs((double)beyond / (double)n - 0.0455), 0.003, "tail %g", (double)beyond / (double)n);
    cairn_tensor_free(t);
  }
}

Test(init, truncated_normal_bounds_and_moments) {
  int64_t n = 1 << 18;
  for (int d = 0; d < 2; d++) {
    cairn_dtype dt = d ? CAIRN_DTYPE_F64 : CAIRN_DTYPE_F32;
    cairn_tensor *t = filled(dt, 1, &n, cairn_init_truncated_normal(-1.0, 0.25), 13, "tn");
    stats st = stats_of(t);
    /* Within mean ± 2·stddev, up to f32 rounding. */
    cr_assert_geq(st.min, -1.5 - 1e-6, "%s min %.9g", cairn_dtype_name(dt), st.min);
    cr_assert_leq(st.max, -0.5 + 1e-6, "%s max %.9g", cairn_dtype_name(dt), st.max);
    cr_assert_lt(st.min, -1.49);
    cr_assert_gt(st.max, -0.51);
    /* A standard normal truncated to ±2 has stddev 0.8796. */
    cr_assert_lt(fabs(st.mean + 1.0), 0.004, "mean %g", st.mean);
    cr_assert_lt(fabs(st.sd - 0.25 * 0.87962566103423978), 0.003, "stddev %g", st.sd);
    cairn_tensor_free(t);
  }
}

Test(init, glorot_uniform_limit_from_fans) {
  int64_t ks[2] = {784, 256};
  cairn_tensor *t = filled(CAIRN_DTYPE_F32, 2, ks, cairn_init_glorot_uniform(), 42, "dense/kernel");
  double limit = sqrt(6.0 / (784 + 256)); /* 0.07596 */
  stats st = stats_of(t);
  /* In [fl(-l), fl(l)): the bounds themselves are rounded to f32. */
  cr_assert_geq(st.min, (float)-limit);
  cr_assert_lt(st.max, (float)limit);
  cr_assert_lt(st.min, -limit * 0.999);
  cr_assert_gt(st.max, limit * 0.999);
  cr_assert_lt(fabs(st.mean), limit * 0.01, "mean %g", st.mean);
  cr_assert_lt(fabs(st.sd - limit / sqrt(3.0)), limit * 0.01, "stddev %g", st.sd);
  cairn_tensor_free(t);

  /* Conv kernel (3, 3, 64, 128): r = 9, fan_in 576, fan_out 1152. */
  int64_t cs[4] = {3, 3, 64, 128};
  t = filled(CAIRN_DTYPE_F64, 4, cs, cairn_init_glorot_uniform(), 42, "conv/kernel");
  limit = sqrt(6.0 / (576 + 1152));
  st = stats_of(t);
  cr_assert_geq(st.min, -limit);
  cr_assert_lt(st.max, limit);
  cr_assert_gt(st.max, limit * 0.999);
  cr_assert_lt(st.min, -limit * 0.999);
  cairn_tensor_free(t);

  /* A vector (n) has fan_in = fan_out = n. */
  int64_t vs = 1000;
  t = filled(CAIRN_DTYPE_F64, 1, &vs, cairn_init_glorot_uniform(), 42, "v");
  limit = sqrt(6.0 / 2000);
  st = stats_of(t);
  cr_assert_geq(st.min, -limit);
  cr_assert_lt(st.max, limit);
  cr_assert_gt(st.max, limit * 0.98);
  cairn_tensor_free(t);

  /* A scalar: fans 1, so l = √3 (TF's max(1, fan) guard). */
  double mx = 0;
  for (uint64_t seed = 0; seed < 400; seed++) {
    t = filled(CAIRN_DTYPE_F64, 0, NULL, cairn_init_glorot_uniform(), seed, "s");
    double x = fabs(*(double *)t->data);
    cr_assert_lt(x, sqrt(3.0));
    mx = x > mx ? x : mx;
    cairn_tensor_free(t);
  }
  cr_assert_gt(mx, 1.6);
}

Test(init, he_normal_stddev) {
  int64_t ks[2] = {784, 256};
  cairn_tensor *t = filled(CAIRN_DTYPE_F32, 2, ks, cairn_init_he_normal(), 42, "dense/kernel");
  /* Truncated normal with σ = √(2/784)/0.8796: the samples' stddev is √(2/784). */
  double target = sqrt(2.0 / 784), sigma = target / 0.87962566103423978;
  stats st = stats_of(t);
  cr_assert_lt(fabs(st.sd - target), target * 0.01, "stddev %g, expected %g", st.sd, target);
  cr_assert_lt(fabs(st.mean), target * 0.01);
  cr_assert_geq(st.min, -2 * sigma * (1 + 1e-6));
  cr_assert_leq(st.max, 2 * sigma * (1 + 1e-6));
  cr_assert_gt(st.max, 2 * sigma * 0.99);
  cairn_tensor_free(t);

  /* Rank 4: fan_in = 3·3·64 = 576. */
  int64_t cs[4] = {3, 3, 64, 128};
  t = filled(CAIRN_DTYPE_F64, 4, cs, cairn_init_he_normal(), 5, "conv/kernel");
  target = sqrt(2.0 / 576);
  st = stats_of(t);
  cr_assert_lt(fabs(st.sd - target), target * 0.01, "stddev %g, expected %g", st.sd, target);
  cr_assert_leq(st.max, 2 * target / 0.87962566103423978 * (1 + 1e-12));
  cairn_tensor_free(t);
}

Test(init, zero_size_tensor_is_fine) {
  int64_t s[2] = {0, 256};
  cairn_tensor *t = filled(CAIRN_DTYPE_F32, 2, s, cairn_init_glorot_uniform(), 1, "empty");
  cr_assert_eq(t->size, 0);
  cr_assert_eq(cairn_init_fill(t, cairn_init_uniform(1, 0), 1, "empty"), CAIRN_E_INVALID,
               "parameters are checked even when there is nothing to fill");
  cairn_tensor_free(t);
}

/* The random kinds, with parameters (uniform, normal, truncated first). */
static const cairn_init random_inits[] = {
    {CAIRN_INIT_UNIFORM, -1, 3},     {CAIRN_INIT_NORMAL, 0.5, 2},     {CAIRN_INIT_TRUNCATED_NORMAL, 0, 1},
    {CAIRN_INIT_GLOROT_UNIFORM, 0, 0}, {CAIRN_INIT_HE_NORMAL, 0, 0},
};
#define N_RANDOM (sizeof random_inits / sizeof random_inits[0])

static int same_bits(const cairn_tensor *a, const cairn_tensor *b) {
  return a->dtype == b->dtype && a->size == b->size && memcmp(a->data, b->data, cairn_tensor_nbytes(a)) == 0;
}

Test(init, values_depend_on_seed_name_shape_and_kind_only) {
  int64_t s[2] = {64, 32};
  for (size_t k = 0; k < N_RANDOM; k++) {
    for (int d = 0; d < 2; d++) {
      cairn_dtype dt = d ? CAIRN_DTYPE_F64 : CAIRN_DTYPE_F32;
      cairn_tensor *a = filled(dt, 2, s, random_inits[k], 1234, "layer/w");
      cairn_tensor *b = filled(dt, 2, s, random_inits[k], 1234, "layer/w");
      cairn_tensor *other_seed = filled(dt, 2, s, random_inits[k], 1235, "layer/w");
      cairn_tensor *other_name = filled(dt, 2, s, random_inits[k], 1234, "layer/v");
      cr_assert(same_bits(a, b), "kind %zu %s: same inputs, same bits", k, cairn_dtype_name(dt));
      int eq_seed = 0, eq_name = 0;
      for (int64_t i = 0; i < a->size; i++) {
        size_t es = cairn_dtype_size(dt);
        eq_seed += memcmp((char *)a->data + i * es, (char *)other_seed->data + i * es, es) == 0;
        eq_name += memcmp((char *)a->data + i * es, (char *)other_name->data + i * es, es) == 0;
      }
      cr_assert_lt(eq_seed, 4, "kind %zu: %d equal elements across seeds", k, eq_seed);
      cr_assert_lt(eq_name, 4, "kind %zu: %d equal elements across names", k, eq_name);
      cairn_tensor_free(a);
      cairn_tensor_free(b);
      cairn_tensor_free(other_seed);
      cairn_tensor_free(other_name);
    }
  }
  /* Element i does not depend on the rest of the shape: a (10) vector is a
   * prefix of a (20) one for the kinds without fans. */
  int64_t n10 = 10, n20 = 20;
  cairn_tensor *a = filled(CAIRN_DTYPE_F32, 1, &n10, cairn_init_normal(0, 1), 8, "p");
  cairn_tensor *b = filled(CAIRN_DTYPE_F32, 1, &n20, cairn_init_normal(0, 1), 8, "p");
  cr_assert_eq(memcmp(a->data, b->data, 10 * sizeof(float)), 0);
  cairn_tensor_free(a);
  cairn_tensor_free(b);
}

Test(init, registry_values_match_init_fill) {
  cairn_registry *r = new_registry(777);
  int64_t s[2] = {50, 20};
  cairn_var *v = mkvar(r, "enc/w", 2, s, cairn_init_truncated_normal(0, 0.1), CAIRN_COLL_MODEL);
  cr_assert_eq(cairn_var_initialize(v), CAIRN_OK);
  cairn_tensor *t = filled(CAIRN_DTYPE_F32, 2, s, cairn_init_truncated_normal(0, 0.1), 777, "enc/w");
  cr_assert(same_bits(t, cairn_var_tensor(v)));
  cairn_tensor_free(t);
  cairn_registry_free(r);
}

Test(init, order_independence) {
  /* Two registries, same seed, variables created in different orders (and
   * with unrelated ones in between): bitwise identical values. */
  int64_t ks[2] = {300, 100}, bs = 100, cs[4] = {3, 3, 8, 16};
  cairn_registry *r1 = new_registry(2024), *r2 = new_registry(2024);
  cairn_var *k1 = mkvar(r1, "l1/kernel", 2, ks, cairn_init_glorot_uniform(), CAIRN_COLL_MODEL);
  cairn_var *b1 = mkvar(r1, "l1/bias", 1, &bs, cairn_init_normal(0, 1), CAIRN_COLL_MODEL);
  cairn_var *c1 = mkvar(r1, "conv/kernel", 4, cs, cairn_init_he_normal(), CAIRN_COLL_MODEL);
  cairn_var *u1 = mkvar(r1, "emb", 2, ks, cairn_init_uniform(-0.05, 0.05), CAIRN_COLL_MODEL);

  mkvar(r2, "unrelated", 2, ks, cairn_init_normal(0, 1), CAIRN_COLL_LOCAL);
  cairn_var *u2 = mkvar(r2, "emb", 2, ks, cairn_init_uniform(-0.05, 0.05), CAIRN_COLL_MODEL);
  cairn_var *c2 = mkvar(r2, "conv/kernel", 4, cs, cairn_init_he_normal(), CAIRN_COLL_MODEL);
  cairn_var *b2 = mkvar(r2, "l1/bias", 1, &bs, cairn_init_normal(0, 1), CAIRN_COLL_MODEL);
  cairn_var *k2 = mkvar(r2, "l1/kernel", 2, ks, cairn_init_glorot_uniform(), CAIRN_COLL_MODEL);

  cr_assert_eq(cairn_registry_initialize_collection(r1, CAIRN_COLL_ALL), CAIRN_OK);
  /* r2 initializes in yet another order, one at a time. */
  cairn_var *order2[] = {k2, u2, b2, c2};
  cr_assert_eq(cairn_registry_initialize(r2, order2, 4), CAIRN_OK);
  cr_assert(same_bits(cairn_var_tensor(k1), cairn_var_tensor(k2)));
  cr_assert(same_bits(cairn_var_tensor(b1), cairn_var_tensor(b2)));
  cr_assert(same_bits(cairn_var_tensor(c1), cairn_var_tensor(c2)));
  cr_assert(same_bits(cairn_var_tensor(u1), cairn_var_tensor(u2)));
  /* ...and not trivially: the values are random. */
  cr_assert_neq(cairn_tensor_f32(cairn_var_tensor(k1))[0], cairn_tensor_f32(cairn_var_tensor(k1))[1]);
  cairn_registry_free(r1);
  cairn_registry_free(r2);
}

Test(init, chunking_independence) {
  /* Element i does not depend on how [0, n) is cut into parallel chunks:
   * above 2^21 elements the chunk length grows with n, so vectors of 2^20 + 3
   * and 5·2^19 elements are cut differently, yet the longer one starts with
   * the shorter one; and a 4-element (serial) fill matches both. Glorot and
   * He are left out: their parameters depend on the shape. */
  int64_t n = ((int64_t)1 << 20) + 3, longer = (int64_t)5 << 19, small = 4;
  for (size_t k = 0; k < 3; k++) {
    for (int d = 0; d < 2; d++) {
      cairn_dtype dt = d ? CAIRN_DTYPE_F64 : CAIRN_DTYPE_F32;
      size_t es = cairn_dtype_size(dt);
      cairn_tensor *a = filled(dt, 1, &n, random_inits[k], 99, "big/w");
      cairn_tensor *l = filled(dt, 1, &longer, random_inits[k], 99, "big/w");
      cairn_tensor *s = filled(dt, 1, &small, random_inits[k], 99, "big/w");
      cr_assert_eq(memcmp(l->data, a->data, (size_t)n * es), 0, "kind %zu %s", k, cairn_dtype_name(dt));
      cr_assert_eq(memcmp(s->data, a->data, 4 * es), 0);
      cairn_tensor_free(a);
      cairn_tensor_free(l);
      cairn_tensor_free(s);
    }
  }
}

Test(init, thread_independence) {
#ifdef CAIRN_HAVE_OPENMP
  /* 2^20 + 3 elements: above the parallel threshold, with a ragged last chunk. */
  int64_t n = ((int64_t)1 << 20) + 3;
  int saved = omp_get_max_threads();
  for (size_t k = 0; k < N_RANDOM; k++) {
    for (int d = 0; d < 2; d++) {
      cairn_dtype dt = d ? CAIRN_DTYPE_F64 : CAIRN_DTYPE_F32;
      omp_set_num_threads(1);
      cairn_tensor *one = filled(dt, 1, &n, random_inits[k], 99, "big/w");
      omp_set_num_threads(2);
      cr_assert_eq(omp_get_max_threads(), 2);
      cairn_tensor *two = filled(dt, 1, &n, random_inits[k], 99, "big/w");
      omp_set_num_threads(saved);
      cr_assert(same_bits(one, two), "kind %zu %s differs between 1 and 2 threads", k, cairn_dtype_name(dt));
      cairn_tensor_free(one);
      cairn_tensor_free(two);
    }
  }
  /* Constants go through the parallel loop too. */
  omp_set_num_threads(2);
  cairn_tensor *c = filled(CAIRN_DTYPE_I16, 1, &n, cairn_init_constant(-7), 0, "c");
  omp_set_num_threads(saved);
  for (int64_t i = 0; i < n; i++) cr_assert_eq(((int16_t *)c->data)[i], -7);
  cairn_tensor_free(c);
#else
  cr_skip_test("built without OpenMP");
#endif
}

/* cairn_registry_list_vars: the collections, then the include and exclude
 * globs ('*' matches '/' too), in creation order, counted past cap. */
Test(var, list_vars_by_glob) {
  cairn_registry *r = new_registry(1);
  mkvec(r, "dense/kernel", 2, CAIRN_COLL_MODEL);
  mkvec(r, "dense/bias", 2, CAIRN_COLL_MODEL);
  mkvec(r, "dense/kernel/Adam", 2, CAIRN_COLL_GLOBAL);
  mkvec(r, "dense_1/kernel", 2, CAIRN_COLL_MODEL);
  mkvec(r, "dense_1/bias", 2, CAIRN_COLL_MODEL);
  mkvec(r, "metrics/count", 1, CAIRN_COLL_LOCAL);
  cairn_var *v[8];
  const char *kernels[] = {"dense*/kernel"};
  cr_assert_eq(cairn_registry_list_vars(r, CAIRN_COLL_GLOBAL, kernels, 1, NULL, 0, v, 8), 2);
  cr_assert_str_eq(cairn_var_name(v[0]), "dense/kernel");
  cr_assert_str_eq(cairn_var_name(v[1]), "dense_1/kernel");
  /* every global variable except the last layer's */
  const char *last[] = {"dense_1/*", NULL};
  cr_assert_eq(cairn_registry_list_vars(r, CAIRN_COLL_GLOBAL, NULL, 0, last, 2, v, 8), 3);
  cr_assert_str_eq(cairn_var_name(v[2]), "dense/kernel/Adam", "'*' matches '/'");
  const char *layer0[] = {"dense/*", "nothing"};
  const char *slots[] = {"*/Adam"};
  cr_assert_eq(cairn_registry_list_vars(r, CAIRN_COLL_TRAINABLE, layer0, 2, slots, 1, v, 8), 2);
  cr_assert_eq(cairn_registry_list_vars(r, CAIRN_COLL_ALL, NULL, 0, NULL, 0, v, 1), 6, "the total past cap");
  cr_assert_str_eq(cairn_var_name(v[0]), "dense/kernel");
  cr_assert_eq(cairn_registry_list_vars(r, CAIRN_COLL_LOCAL, NULL, 0, NULL, 0, NULL, 0), 1);
  cr_assert_eq(cairn_registry_list_vars(NULL, CAIRN_COLL_ALL, NULL, 0, NULL, 0, v, 8), 0);
  cairn_registry_free(r);
}

/* The unchecked list keeps its signature and its count, and says when a
 * pattern matches nothing (before, "dense/kernal" silently listed 1 of the
 * 2 variables meant): a WARNING on stderr naming the pattern and the
 * closest variable, for an exclude pattern too. */
Test(var, list_vars_warns_for_a_pattern_that_matches_nothing) {
  cairn_registry *r = new_registry(1);
  mkvec(r, "dense/kernel", 2, CAIRN_COLL_MODEL);
  mkvec(r, "dense/bias", 2, CAIRN_COLL_MODEL);
  const char *typo[] = {"dense/kernal", "dense/bias"};
  const char *ex[] = {"*/Momentum"};
  cairn_var *v[8];
  FILE *f = tmpfile();
  cr_assert_not_null(f);
  fflush(stderr);
  int saved = dup(2);
  cr_assert_geq(saved, 0);
  dup2(fileno(f), 2);
  size_t n = cairn_registry_list_vars(r, CAIRN_COLL_GLOBAL, typo, 2, ex, 1, v, 8);
  size_t n_ok = cairn_registry_list_vars(r, CAIRN_COLL_GLOBAL, typo + 1, 1, NULL, 0, v, 8);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  char err[2048];
  rewind(f);
  size_t len = fread(err, 1, sizeof err - 1, f);
  err[len] = '\0';
  fclose(f);
  cr_assert_eq(n, 1, "the count is what matched, as before");
  cr_assert_eq(n_ok, 1);
  cr_assert(strstr(err, "include pattern 'dense/kernal' matches no variable (did you mean 'dense/kernel'?)"), "%s",
            err);
  cr_assert(strstr(err, "exclude pattern '*/Momentum' matches no variable"), "%s", err);
  cr_assert_null(strstr(err, "'dense/bias' matches"), "a pattern that matches says nothing: %s", err);
  cairn_registry_free(r);
}

/* The checked form: an include pattern that matches nothing fails, naming
 * the closest variable; an exclude one is listed (and logged), not fatal. */
Test(var, list_vars_checked_reports_unmatched_patterns) {
  cairn_registry *r = new_registry(1);
  mkvec(r, "dense/kernel", 2, CAIRN_COLL_MODEL);
  mkvec(r, "dense/bias", 2, CAIRN_COLL_MODEL);
  mkvec(r, "dense/kernel/Adam", 2, CAIRN_COLL_GLOBAL);
  cairn_var *v[8];
  size_t n = 0;
  cairn_names *um;
  cr_assert_eq(cairn_names_new(&um), CAIRN_OK);
  const char *ok[] = {"dense/*"};
  const char *slots[] = {"*/Adam", "*/Momentum"};
  cr_assert_eq(cairn_registry_list_vars_checked(r, CAIRN_COLL_GLOBAL, ok, 1, slots, 2, v, 8, &n, um), CAIRN_OK,
               "%s", cairn_errmsg());
  cr_assert_eq(n, 2);
  cr_assert_eq(cairn_names_count(um), 1);
  cr_assert_str_eq(cairn_names_at(um, 0), "*/Momentum");
  const char *typo[] = {"dense/kernal", "dense/bias"};
  cr_assert_eq(cairn_registry_list_vars_checked(r, CAIRN_COLL_GLOBAL, typo, 2, NULL, 0, v, 8, &n, um),
               CAIRN_E_NOT_FOUND);
  cr_assert_eq(n, 1, "the list is filled anyway");
  cr_assert_eq(cairn_names_count(um), 1, "cleared first");
  cr_assert_str_eq(cairn_names_at(um, 0), "dense/kernal");
  cr_assert(strstr(cairn_errmsg(), "'dense/kernal' (did you mean 'dense/kernel'?)"), "%s", cairn_errmsg());
  /* the trainable mask: a slot pattern matches nothing there */
  const char *slot[] = {"dense/kernel/Adam"};
  cr_assert_eq(cairn_registry_list_vars_checked(r, CAIRN_COLL_TRAINABLE, slot, 1, NULL, 0, v, 8, &n, NULL),
               CAIRN_E_NOT_FOUND);
  cr_assert_eq(cairn_registry_list_vars_checked(r, CAIRN_COLL_GLOBAL, NULL, 0, NULL, 0, v, 8, NULL, NULL),
               CAIRN_E_NULL);
  cairn_names_free(um);
  cairn_registry_free(r);
}
