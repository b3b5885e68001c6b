/* The sequential MLP: TF variable names, wiring checked against the nn
 * primitives, learning, determinism across thread counts, no allocation
 * after the first step, and errors. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include "config.h"

#include <criterion/criterion.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#ifdef CAIRN_HAVE_OPENMP
#include <omp.h>
#endif

#include <cairn.h>
#include <errno.h>
#include <unistd.h>

#include "gemm_impl.h"
#include "kernels/kernels.h"
#include "model_impl.h"
#include "rm_tree.h"
#include "var_impl.h"

TestSuite(model, .timeout = 120);

static cairn_tensor *mk(cairn_dtype dt, int rank, int64_t d0, int64_t d1) {
  int64_t shape[2] = {d0, d1};
  cairn_tensor *t = NULL;
  cr_assert_eq(cairn_tensor_new(dt, rank, shape, &t), CAIRN_OK, "%s", cairn_errmsg());
  return t;
}

/* Points around `classes` centres in `dim` dimensions; labels i32. */
static void blobs_k(cairn_tensor *x, cairn_tensor *y, uint64_t seed, int32_t classes) {
  cairn_rng r;
  cairn_rng_init(&r, seed, 0);
  int64_t n = x->shape[0], dim = x->shape[1];
  for (int64_t i = 0; i < n; i++) {
    int32_t k = (int32_t)(i % classes);
    cairn_tensor_i32(y)[i] = k;
    for (int64_t j = 0; j < dim; j++)
      cairn_tensor_f32(x)[i * dim + j] = (j % classes == k ? 2.0f : 0.0f) + 0.5f * cairn_rng_normal(&r);
  }
}

static void blobs(cairn_tensor *x, cairn_tensor *y, uint64_t seed) { blobs_k(x, y, seed, 4); }

static int g_bf16; /* build() makes bf16 models (set_bf16_build) */
static void set_bf16_build(int on) { g_bf16 = on; }

static cairn_mlp *build(cairn_registry *r, const int64_t *sizes, int n, cairn_optim_kind opt, const char *scope) {
  cairn_mlp_config cfg = {.n_layers = n, .sizes = sizes, .hidden_act = CAIRN_ACT_RELU,
                          .loss = CAIRN_LOSS_SPARSE_SOFTMAX_XENT, .optim = cairn_optim_defaults(opt), .scope = scope,
                          .precision = g_bf16 ? CAIRN_PRECISION_BF16 : CAIRN_PRECISION_F32};
  cairn_mlp *m = NULL;
  cr_assert_eq(cairn_mlp_new(r, &cfg, &m), CAIRN_OK, "%s", cairn_errmsg());
  return m;
}

Test(model, variables_named_as_tf_layers) {
  cairn_registry *r;
  cr_assert_eq(cairn_registry_new(1, &r), CAIRN_OK);
  int64_t sizes[4] = {8, 16, 16, 4};
  cairn_mlp *m = build(r, sizes, 3, CAIRN_OPTIM_ADAM, NULL);
  const char *names[] = {"dense/kernel", "dense/bias", "dense_1/kernel", "dense_1/bias", "dense_2/kernel",
                         "dense_2/bias"};
  cairn_var *tv[8];
  cr_assert_eq(cairn_registry_list(r, CAIRN_COLL_TRAINABLE, tv, 8), 6);
  for (int i = 0; i < 6; i++) cr_assert_str_eq(cairn_var_name(tv[i]), names[i]);
  cairn_var *v;
  cr_assert_eq(cairn_registry_find(r, "dense_1/kernel/Adam_1", &v), CAIRN_OK, "%s", cairn_errmsg());
  cr_assert_eq(cairn_registry_find(r, "global_step", &v), CAIRN_OK);
  cr_assert_eq(v, cairn_mlp_global_step(m));
  cr_assert_eq(cairn_mlp_num_params(m), 8 * 16 + 16 + 16 * 16 + 16 + 16 * 4 + 4);
  cr_assert_eq(cairn_var_tensor(cairn_mlp_kernel(m, 2))->shape[0], 16);
  cr_assert_null(cairn_mlp_kernel(m, 3));
  /* a second model in the same registry needs a scope */
  cairn_mlp *m2 = NULL;
  cairn_mlp_config cfg = {.n_layers = 3, .sizes = sizes, .optim = cairn_optim_defaults(CAIRN_OPTIM_SGD)};
  cr_assert_eq(cairn_mlp_new(r, &cfg, &m2), CAIRN_E_EXISTS);
  cr_assert(strstr(cairn_errmsg(), "dense/kernel"), "%s", cairn_errmsg());
  cairn_mlp *m3 = build(r, sizes, 3, CAIRN_OPTIM_SGD, "tower");
  cr_assert_eq(cairn_registry_find(r, "tower/dense_2/bias", &v), CAIRN_OK);
  cairn_mlp_free(m3);
  cairn_mlp_free(m);
  cairn_registry_free(r);
}

/* One SGD step of a 2-layer model equals the same step written out with
 * the nn primitives. */
Test(model, step_matches_primitives) {
  cairn_registry *r;
  cr_assert_eq(cairn_registry_new(7, &r), CAIRN_OK);
  int64_t sizes[3] = {5, 6, 3}, B = 4;
  cairn_mlp_config cfg = {.n_layers = 2, .sizes = sizes, .hidden_act = CAIRN_ACT_TANH,
                          .loss = CAIRN_LOSS_SPARSE_SOFTMAX_XENT, .optim = cairn_optim_defaults(CAIRN_OPTIM_SGD)};
  cfg.optim.learning_rate = 0.5f;
  cairn_mlp *m;
  cr_assert_eq(cairn_mlp_new(r, &cfg, &m), CAIRN_OK, "%s", cairn_errmsg());
  cr_assert_eq(cairn_registry_initialize_collection(r, CAIRN_COLL_GLOBAL), CAIRN_OK);
  cairn_tensor *X = mk(CAIRN_DTYPE_F32, 2, B, 5), *y = mk(CAIRN_DTYPE_I32, 1, B, 0);
  blobs_k(X, y, 3, 3);
  for (int i = 0; i < 2; i++) /* non-zero biases so that they matter */
    cr_assert_eq(cairn_init_fill(cairn_var_tensor(cairn_mlp_bias(m, i)), cairn_init_uniform(-1, 1), 5, "b"), CAIRN_OK);
  cairn_tensor *W0 = mk(CAIRN_DTYPE_F32, 2, 5, 6), *b0 = mk(CAIRN_DTYPE_F32, 1, 6, 0), *W1 = mk(CAIRN_DTYPE_F32, 2, 6, 3),
               *b1 = mk(CAIRN_DTYPE_F32, 1, 3, 0);
  cr_assert_eq(cairn_tensor_copy(W0, cairn_var_tensor(cairn_mlp_kernel(m, 0))), CAIRN_OK);
  cr_assert_eq(cairn_tensor_copy(b0, cairn_var_tensor(cairn_mlp_bias(m, 0))), CAIRN_OK);
  cr_assert_eq(cairn_tensor_copy(W1, cairn_var_tensor(cairn_mlp_kernel(m, 1))), CAIRN_OK);
  cr_assert_eq(cairn_tensor_copy(b1, cairn_var_tensor(cairn_mlp_bias(m, 1))), CAIRN_OK);
  /* by hand */
  cairn_tensor *Z0 = mk(CAIRN_DTYPE_F32, 2, B, 6), *A0 = mk(CAIRN_DTYPE_F32, 2, B, 6), *Z1 = mk(CAIRN_DTYPE_F32, 2, B, 3);
  cairn_tensor *dZ1 = mk(CAIRN_DTYPE_F32, 2, B, 3), *dA0 = mk(CAIRN_DTYPE_F32, 2, B, 6);
  cairn_tensor *gW0 = mk(CAIRN_DTYPE_F32, 2, 5, 6), *gb0 = mk(CAIRN_DTYPE_F32, 1, 6, 0), *gW1 = mk(CAIRN_DTYPE_F32, 2, 6, 3),
               *gb1 = mk(CAIRN_DTYPE_F32, 1, 3, 0);
  float want_loss, loss;
  cr_assert_eq(cairn_dense_forward(X, W0, b0, Z0), CAIRN_OK);
  cr_assert_eq(cairn_act_forward(CAIRN_ACT_TANH, 0, Z0, A0), CAIRN_OK);
  cr_assert_eq(cairn_dense_forward(A0, W1, b1, Z1), CAIRN_OK);
  cr_assert_eq(cairn_loss_sparse_softmax_xent(Z1, y, &want_loss, dZ1), CAIRN_OK);
  cr_assert_eq(cairn_dense_backward(A0, W1, dZ1, dA0, gW1, gb1), CAIRN_OK);
  cr_assert_eq(cairn_act_backward(CAIRN_ACT_TANH, 0, Z0, A0, dA0, dA0), CAIRN_OK);
  cr_assert_eq(cairn_dense_backward(X, W0, dA0, NULL, gW0, gb0), CAIRN_OK);
  cr_assert_eq(cairn_mlp_train_step(m, X, y, &loss), CAIRN_OK, "%s", cairn_errmsg());
  cr_assert_float_eq(loss, want_loss, 1e-6);
  cairn_tensor *before[4] = {W0, b0, W1, b1}, *grads[4] = {gW0, gb0, gW1, gb1};
  cairn_var *after[4] = {cairn_mlp_kernel(m, 0), cairn_mlp_bias(m, 0), cairn_mlp_kernel(m, 1), cairn_mlp_bias(m, 1)};
  for (int k = 0; k < 4; k++)
    for (int64_t i = 0; i < before[k]->size; i++) {
      float want = cairn_tensor_f32(before[k])[i] - 0.5f * cairn_tensor_f32(grads[k])[i];
      float got = cairn_tensor_f32(cairn_var_tensor(after[k]))[i];
      cr_assert(fabsf(got - want) <= 1e-6f * fmaxf(1, fabsf(want)), "%s[%lld] = %g, want %g",
                cairn_var_name(after[k]), (long long)i, (double)got, (double)want);
    }
  cr_assert_eq(cairn_tensor_i64(cairn_var_tensor(cairn_mlp_global_step(m)))[0], 1);
  cairn_tensor *ts[] = {X, y, W0, b0, W1, b1, Z0, A0, Z1, dZ1, dA0, gW0, gb0, gW1, gb1};
  for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) cairn_tensor_free(ts[i]);
  cairn_mlp_free(m);
  cairn_registry_free(r);
}

Test(model, learns_blobs_and_counts_steps) {
  cairn_registry *r;
  cr_assert_eq(cairn_registry_new(3, &r), CAIRN_OK);
  int64_t sizes[4] = {16, 32, 32, 4}, N = 512, B = 32;
  cairn_mlp *m = build(r, sizes, 3, CAIRN_OPTIM_ADAM, NULL);
  cr_assert_eq(cairn_registry_initialize_collection(r, CAIRN_COLL_GLOBAL), CAIRN_OK);
  cairn_tensor *X = mk(CAIRN_DTYPE_F32, 2, N, 16), *y = mk(CAIRN_DTYPE_I32, 1, N, 0);
  cairn_tensor *xb = mk(CAIRN_DTYPE_F32, 2, B, 16), *yb = mk(CAIRN_DTYPE_I32, 1, B, 0);
  blobs(X, y, 11);
  cairn_dataset *ds;
  cairn_dataset_config dc = {.batch_size = B, .shuffle = 1, .seed = 5, .num_epochs = 5};
  cr_assert_eq(cairn_dataset_new(X, y, &dc, &ds), CAIRN_OK, "%s", cairn_errmsg());
  float loss0, acc0, loss1, acc1, l;
  cr_assert_eq(cairn_mlp_evaluate(m, X, y, &loss0, &acc0), CAIRN_OK);
  int64_t steps = 0;
  cairn_status s;
  while ((s = cairn_dataset_next(ds, xb, yb)) == CAIRN_OK) {
    cr_assert_eq(cairn_mlp_train_step(m, xb, yb, &l), CAIRN_OK, "%s", cairn_errmsg());
    steps++;
  }
  cr_assert_eq(s, CAIRN_E_OUT_OF_RANGE);
  cr_assert_eq(steps, 5 * N / B);
  cr_assert_eq(cairn_tensor_i64(cairn_var_tensor(cairn_mlp_global_step(m)))[0], steps);
  cr_assert_eq(cairn_mlp_evaluate(m, X, y, &loss1, &acc1), CAIRN_OK);
  cr_assert(loss1 < 0.25f * loss0, "loss %g -> %g", (double)loss0, (double)loss1);
  cr_assert(acc1 > 0.95f, "accuracy %g", (double)acc1);
  cairn_dataset_free(ds);
  cairn_tensor_free(X); cairn_tensor_free(y); cairn_tensor_free(xb); cairn_tensor_free(yb);
  cairn_mlp_free(m);
  cairn_registry_free(r);
}

static void train_weights(int threads, float *out, size_t n_out) {
#ifdef CAIRN_HAVE_OPENMP
  omp_set_num_threads(threads);
#else
  (void)threads;
#endif
  cairn_registry *r;
  cr_assert_eq(cairn_registry_new(2024, &r), CAIRN_OK);
  /* wide enough that every parallel path (elementwise, rows, optimizer) runs */
  int64_t sizes[3] = {300, 512, 10}, B = 128;
  cairn_mlp *m = build(r, sizes, 2, CAIRN_OPTIM_ADAM, NULL);
  cr_assert_eq(cairn_registry_initialize_collection(r, CAIRN_COLL_GLOBAL), CAIRN_OK);
  cairn_tensor *X = mk(CAIRN_DTYPE_F32, 2, B, 300), *y = mk(CAIRN_DTYPE_I32, 1, B, 0);
  blobs(X, y, 1);
  for (int step = 0; step < 5; step++) cr_assert_eq(cairn_mlp_train_step(m, X, y, NULL), CAIRN_OK);
  cairn_tensor *W = cairn_var_tensor(cairn_mlp_kernel(m, 0));
  cr_assert_eq((size_t)W->size, n_out);
  memcpy(out, W->data, n_out * sizeof(float));
  cairn_tensor_free(X); cairn_tensor_free(y);
  cairn_mlp_free(m);
  cairn_registry_free(r);
}

Test(model, same_seed_bitwise_identical_for_1_and_2_threads) {
  size_t n = 300 * 512;
  float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float)), *c = malloc(n * sizeof(float));
  train_weights(1, a, n);
  train_weights(2, b, n);
  train_weights(1, c, n);
  cr_assert(memcmp(a, c, n * sizeof(float)) == 0, "not reproducible with the same thread count");
  cr_assert(memcmp(a, b, n * sizeof(float)) == 0, "1 and 2 threads give different weights");
  free(a); free(b); free(c);
}

/* The allocations cairn's own code makes. This program links the library's
 * objects statically with -Wl,--wrap for each allocation function
 * (Makefile.am), so their calls (and this file's) come here first; the
 * shared libraries below cairn (oneDNN, the BLAS, libgomp, glibc) call
 * malloc directly and are not counted. */
static _Atomic long n_allocs;
void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);
int __real_posix_memalign(void **p, size_t a, size_t n);
void *__real_aligned_alloc(size_t a, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t k, size_t n);
void *__wrap_realloc(void *p, size_t n);
int __wrap_posix_memalign(void **p, size_t a, size_t n);
void *__wrap_aligned_alloc(size_t a, size_t n);
void *__wrap_malloc(size_t n) {
  n_allocs++;
  return __real_malloc(n);
}
void *__wrap_calloc(size_t k, size_t n) {
  n_allocs++;
  return __real_calloc(k, n);
}
void *__wrap_realloc(void *p, size_t n) {
  n_allocs++;
  return __real_realloc(p, n);
}
int __wrap_posix_memalign(void **p, size_t a, size_t n) {
  n_allocs++;
  return __real_posix_memalign(p, a, n);
}
void *__wrap_aligned_alloc(size_t a, size_t n) {
  n_allocs++;
  return __real_aligned_alloc(a, n);
}

/* Runs training steps until the heap in use (mallinfo2's uordblks) is the
 * same after 3 steps in a row, at most 40 steps. */
static void warm_up_until_heap_holds_still(cairn_mlp *m, const cairn_tensor *X, const cairn_tensor *y) {
  size_t last = mallinfo2().uordblks;
  for (int i = 0, still = 0; i < 40 && still < 3; i++) {
    cr_assert_eq(cairn_mlp_train_step(m, X, y, NULL), CAIRN_OK);
    const size_t now = mallinfo2().uordblks;
    still = now == last ? still + 1 : 0;
    last = now;
  }
}

/* After the first steps cairn allocates nothing (counted exactly, above),
 * and the heap in use and the mmapped blocks do not grow, over STEPS steps
 * and over steps at a smaller batch, on whichever GEMM engine runs. The
 * heap check allows SLACK bytes: what glibc's per-thread caches keep of the
 * libraries' own balanced allocations (oneDNN's argument lists and packing
 * buffers) moves the heap in use by up to about 1 KB between two counts,
 * with the thread scheduling (seen: 432 B on an Emerald Rapids, 960 B on a
 * Zen 5 under load, failing the exact check this test had before). A step
 * that keeps memory grows it every step: STEPS steps of 100 bytes exceed
 * the slack. */
enum { STEPS = 24, SLACK = 2048 };
static void no_allocation_after_first_step(void) {
  cairn_registry *r;
  cr_assert_eq(cairn_registry_new(3, &r), CAIRN_OK);
  int64_t sizes[4] = {64, 128, 128, 10}, B = 64;
  const long at_start = n_allocs;
  cairn_mlp *m = build(r, sizes, 3, CAIRN_OPTIM_ADAM, NULL);
  cr_assert_eq(cairn_registry_initialize_collection(r, CAIRN_COLL_GLOBAL), CAIRN_OK);
  cr_assert_gt(n_allocs, at_start, "the counter sees cairn's allocations (linked with -Wl,--wrap=malloc, ...)");
  cairn_tensor *X = mk(CAIRN_DTYPE_F32, 2, B, 64), *y = mk(CAIRN_DTYPE_I32, 1, B, 0);
  blobs(X, y, 2);
  /* Warm-up until the heap in use holds still for 3 steps in a row (at
   * most 40 steps). A library below cairn may grow a cache in the first
   * steps: on the oneDNN engine with AVX-512, oneDNN's JIT sgemm (what its
   * matmul runs with run-time M and K) allocates its packing buffer with an
   * aligned malloc and frees it inside each call, and glibc keeps the slack
   * it cut off each such block in its per-thread cache of freed chunks,
   * which counts as in use until the cache's bins are full (a few hundred
   * bytes in each of the first 3-4 steps, measured to 40 steps). */
  warm_up_until_heap_holds_still(m, X, y);
  struct mallinfo2 before = mallinfo2();
  long allocs = n_allocs;
  for (int i = 0; i < STEPS; i++) cr_assert_eq(cairn_mlp_train_step(m, X, y, NULL), CAIRN_OK);
  struct mallinfo2 after = mallinfo2();
  cr_assert_eq(n_allocs, allocs, "cairn allocated %ld times in %d steps", n_allocs - allocs, (int)STEPS);
  cr_assert_leq(after.uordblks, before.uordblks + SLACK, "heap in use grew from %zu to %zu bytes in %d steps",
                before.uordblks, after.uordblks, (int)STEPS);
  /* oneDNN runs the fp32 products, or the bf16 ones of a bf16 model (whatever
   * the fp32 engine: CAIRN_GEMM_ENGINE=openblas leaves bf16 on oneDNN) */
  const int on_dnnl = cairn__gemm_engine() == CAIRN__GEMM_ONEDNN ||
                      (g_bf16 && cairn__bf16_engine() == CAIRN__BF16_ONEDNN),
            made = cairn__dnnl_primitive_count();
  /* a smaller batch reuses the workspace too */
  cr_assert_eq(cairn_tensor_set_rows(X, 17), CAIRN_OK);
  cr_assert_eq(cairn_tensor_set_rows(y, 17), CAIRN_OK);
  cr_assert_eq(cairn_mlp_train_step(m, X, y, NULL), CAIRN_OK);
  if (on_dnnl) {
    /* oneDNN makes no primitive for it (M and K are run-time dimensions),
     * but the first step at a new batch size replaces a few memory objects
     * (lib/gemm_dnnl.c: oneDNN 2.6 cannot give one other dimensions), and
     * glibc's per-thread cache of freed chunks keeps the replaced ones
     * counted as in use. From the second step at that size on, and back and
     * forth between the two sizes, nothing changes. */
    cr_assert_eq(cairn__dnnl_primitive_count(), made, "a smaller batch made oneDNN primitives");
    before = mallinfo2();
    allocs = n_allocs;
    cr_assert_eq(cairn_mlp_train_step(m, X, y, NULL), CAIRN_OK);
    cr_assert_eq(cairn_tensor_set_rows(X, 64), CAIRN_OK);
    cr_assert_eq(cairn_tensor_set_rows(y, 64), CAIRN_OK);
    cr_assert_eq(cairn_mlp_train_step(m, X, y, NULL), CAIRN_OK);
    cr_assert_eq(cairn_tensor_set_rows(X, 17), CAIRN_OK);
    cr_assert_eq(cairn_tensor_set_rows(y, 17), CAIRN_OK);
    cr_assert_eq(cairn_mlp_train_step(m, X, y, NULL), CAIRN_OK);
  }
  after = mallinfo2();
  cr_assert_eq(n_allocs, allocs, "cairn allocated %ld times in the steps at batch 17, 64, 17", n_allocs - allocs);
  cr_assert_leq(after.uordblks, before.uordblks + SLACK, "heap in use grew from %zu to %zu bytes", before.uordblks,
                after.uordblks);
  cr_assert_eq(after.hblkhd, before.hblkhd, "mmapped blocks changed");
  cairn_tensor_free(X); cairn_tensor_free(y);
  cairn_mlp_free(m);
  cairn_registry_free(r);
}

Test(model, no_allocation_after_first_step) { no_allocation_after_first_step(); }

/* The same on the oneDNN engine, forced (the default on a CPU with
 * AVX-512): its primitives are made at the first step, and each thread's
 * scratchpad and memory objects are kept. */
Test(model, no_allocation_after_first_step_on_onednn) {
  const int prev = cairn__gemm_engine_force(CAIRN__GEMM_ONEDNN);
  if (prev < 0) cr_skip_test("no oneDNN in this build (--without-dnnl, --disable-openmp or libdnnl-dev missing)");
  const int made = cairn__dnnl_primitive_count();
  no_allocation_after_first_step();
  cr_assert_gt(cairn__dnnl_primitive_count(), made, "the steps ran on oneDNN primitives");
  cairn__gemm_engine_force(prev);
}

Test(model, errors_name_what_is_wrong) {
  cairn_registry *r;
  cr_assert_eq(cairn_registry_new(3, &r), CAIRN_OK);
  int64_t sizes[3] = {4, 8, 3};
  cairn_mlp *m = build(r, sizes, 2, CAIRN_OPTIM_SGD, NULL);
  cairn_tensor *X = mk(CAIRN_DTYPE_F32, 2, 2, 4), *y = mk(CAIRN_DTYPE_I32, 1, 2, 0), *Xbad = mk(CAIRN_DTYPE_F32, 2, 2, 5);
  cr_assert_eq(cairn_mlp_train_step(m, X, y, NULL), CAIRN_E_UNINITIALIZED);
  cr_assert(strstr(cairn_errmsg(), "'dense/kernel'"), "%s", cairn_errmsg());
  cr_assert_eq(cairn_registry_initialize_collection(r, CAIRN_COLL_GLOBAL), CAIRN_OK);
  cr_assert_eq(cairn_mlp_train_step(m, Xbad, y, NULL), CAIRN_E_SHAPE);
  cr_assert(strstr(cairn_errmsg(), "(2, 5)") && strstr(cairn_errmsg(), "(B, 4)"), "%s", cairn_errmsg());
  cairn_tensor_i32(y)[1] = 7;
  cr_assert_eq(cairn_mlp_train_step(m, X, y, NULL), CAIRN_E_INVALID);
  cr_assert(strstr(cairn_errmsg(), "label 7 of row 1"), "%s", cairn_errmsg());
  cr_assert_eq(cairn_tensor_i64(cairn_var_tensor(cairn_mlp_global_step(m)))[0], 0, "failed steps do not count");
  const cairn_tensor *logits;
  cr_assert_eq(cairn_mlp_forward(m, X, &logits), CAIRN_OK);
  cr_assert_eq(logits->shape[0], 2);
  cr_assert_eq(logits->shape[1], 3);
  cr_assert_eq(cairn_mlp_forward(NULL, X, &logits), CAIRN_E_NULL);
  cairn_mlp *bad;
  int64_t zero[3] = {4, 0, 3};
  cairn_mlp_config cfg = {.n_layers = 2, .sizes = zero, .optim = cairn_optim_defaults(CAIRN_OPTIM_SGD), .scope = "z"};
  cr_assert_eq(cairn_mlp_new(r, &cfg, &bad), CAIRN_E_INVALID);
  cr_assert(strstr(cairn_errmsg(), "width 1 is 0"), "%s", cairn_errmsg());
  cfg.sizes = sizes;
  cfg.hidden_act = CAIRN_ACT_SOFTMAX;
  cr_assert_eq(cairn_mlp_new(r, &cfg, &bad), CAIRN_E_INVALID);
  cairn_mlp_free(NULL);
  cairn_tensor_free(X); cairn_tensor_free(y); cairn_tensor_free(Xbad);
  cairn_mlp_free(m);
  cairn_registry_free(r);
}

/* The grads hook runs after backward, before the update: it sees the
 * gradients (n = 2 per layer), what it writes is what gets applied, and an
 * error from it leaves every variable and global_step unchanged. */
typedef struct grads_probe {
  size_t calls, n;
  cairn_status ret;
} grads_probe;

static cairn_status probe_grads(void *user, cairn_tensor *const *grads, size_t n) {
  grads_probe *p = user;
  p->calls++;
  p->n = n;
  if (p->ret) return p->ret;
  for (size_t i = 0; i < n; i++) /* zero gradients: SGD then changes nothing */
    memset(grads[i]->data, 0, cairn_tensor_nbytes(grads[i]));
  return CAIRN_OK;
}

Test(model, grads_hook_between_backward_and_apply) {
  cairn_registry *r;
  cr_assert_eq(cairn_registry_new(3, &r), CAIRN_OK);
  int64_t sizes[3] = {8, 16, 4};
  cairn_mlp *m = build(r, sizes, 2, CAIRN_OPTIM_SGD, NULL);
  cr_assert_eq(cairn_registry_initialize_collection(r, CAIRN_COLL_GLOBAL), CAIRN_OK);
  cairn_tensor *x = mk(CAIRN_DTYPE_F32, 2, 32, 8), *y = mk(CAIRN_DTYPE_I32, 1, 32, 0);
  blobs(x, y, 5);
  cairn_tensor *w = cairn_var_tensor(cairn_mlp_kernel(m, 0));
  size_t bytes = cairn_tensor_nbytes(w);
  float *before = malloc(bytes);
  memcpy(before, w->data, bytes);
  grads_probe p = {0, 0, CAIRN_OK};
  cairn_mlp_set_grads_hook(m, probe_grads, &p);
  cr_assert_eq(cairn_mlp_train_step(m, x, y, NULL), CAIRN_OK, "%s", cairn_errmsg());
  cr_assert_eq(p.calls, 1);
  cr_assert_eq(p.n, 4);
  cr_assert_eq(memcmp(before, w->data, bytes), 0, "zeroed gradients must leave the kernel unchanged");
  int64_t *step = cairn_tensor_i64(cairn_var_tensor(cairn_mlp_global_step(m)));
  cr_assert_eq(*step, 1);
  p.ret = CAIRN_E_UNAVAILABLE;
  cr_assert_eq(cairn_mlp_train_step(m, x, y, NULL), CAIRN_E_UNAVAILABLE);
  cr_assert_eq(*step, 1, "a failing hook must not advance global_step");
  cr_assert_eq(memcmp(before, w->data, bytes), 0);
  cairn_mlp_set_grads_hook(m, NULL, &p);
  cr_assert_eq(cairn_mlp_train_step(m, x, y, NULL), CAIRN_OK);
  cr_assert_eq(p.calls, 2);
  cr_assert_neq(memcmp(before, w->data, bytes), 0, "without the hook the step trains");
  cr_assert_eq(*step, 2);
  free(before);
  cairn_tensor_free(x);
  cairn_tensor_free(y);
  cairn_mlp_free(m);
  cairn_registry_free(r);
}

/* ---- the step as an op ---- */

/* The callback every program wrote by hand before the library had one. */
static cairn_status hand_train(cairn_session *s, void *user) {
  cairn_mlp *m = user;
  const cairn_tensor *x = cairn_session_feed(s, "x"), *y = cairn_session_feed(s, "y");
  if (!x || !y) return cairn_session_fail(s, CAIRN_E_INVALID, "train: feed \"x\" and \"y\"");
  float loss;
  cairn_status st = cairn_mlp_train_step(m, x, y, &loss);
  if (st) return cairn_session_fail(s, st, "train: %s", cairn_errmsg());
  return cairn_session_output_f64(s, "loss", loss);
}

typedef struct one_batch {
  const cairn_tensor *x, *y;
  int calls, limit;
} one_batch;

static cairn_status give_batch(void *user, const cairn_tensor **x, const cairn_tensor **y) {
  one_batch *b = user;
  if (b->limit && b->calls >= b->limit) return CAIRN_E_OUT_OF_RANGE;
  b->calls++;
  *x = b->x;
  *y = b->y;
  return CAIRN_OK;
}

static cairn_status halve(void *user, double *loss) {
  (*(int *)user)++;
  *loss /= 2;
  return CAIRN_OK;
}

typedef struct op_model {
  cairn_registry *r;
  cairn_mlp *m;
  cairn_session *s;
} op_model;

static void op_model_new(op_model *om) {
  int64_t sizes[4] = {16, 32, 32, 4};
  cr_assert_eq(cairn_registry_new(11, &om->r), CAIRN_OK);
  om->m = build(om->r, sizes, 3, CAIRN_OPTIM_ADAM, NULL);
  cr_assert_eq(cairn_registry_initialize_collection(om->r, CAIRN_COLL_GLOBAL), CAIRN_OK);
  cr_assert_eq(cairn_session_new(om->r, 0, &om->s), CAIRN_OK, "%s", cairn_errmsg());
}

static void op_model_free(op_model *om) {
  cairn_session_free(om->s);
  cairn_mlp_free(om->m);
  cairn_registry_free(om->r);
}

static double run_fetch(cairn_session *s, cairn_op *op, const cairn_feed *feeds, size_t n_feeds, const char *name) {
  cairn_fetch f = {name, {0}};
  cairn_run_args a = cairn_run_args_one(&op);
  a.feeds = feeds;
  a.n_feeds = n_feeds;
  a.fetches = &f;
  a.n_fetches = 1;
  cr_assert_eq(cairn_session_run(s, &a), CAIRN_OK, "%s", cairn_errmsg());
  return f.value.f64;
}

/* Steps through cairn_op_new_mlp_train (fed, or from a batch_fn) give the
 * same bits as the hand-written callback. */
Test(model, train_op_matches_the_hand_written_callback) {
  op_model hand, fed, pulled;
  op_model_new(&hand);
  op_model_new(&fed);
  op_model_new(&pulled);
  cairn_tensor *X = mk(CAIRN_DTYPE_F32, 2, 32, 16), *y = mk(CAIRN_DTYPE_I32, 1, 32, 0);
  blobs(X, y, 5);
  cairn_feed feeds[2] = {{"x", X}, {"y", y}};
  cairn_op *h, *t, *p;
  cr_assert_eq(cairn_op_new("train", hand_train, hand.m, NULL, &h), CAIRN_OK);
  cr_assert_eq(cairn_op_new_mlp_train(fed.m, NULL, &t), CAIRN_OK, "%s", cairn_errmsg());
  cr_assert_str_eq(cairn_op_name(t), "train");
  one_batch src = {X, y, 0, 0};
  cairn_mlp_op_options o = cairn_mlp_op_options_default();
  o.batch_fn = give_batch;
  o.batch_user = &src;
  o.name = "step";
  cr_assert_eq(cairn_op_new_mlp_train(pulled.m, &o, &p), CAIRN_OK, "%s", cairn_errmsg());
  cr_assert_str_eq(cairn_op_name(p), "step");
  for (int i = 0; i < 3; i++) {
    double lh = run_fetch(hand.s, h, feeds, 2, "loss");
    double lf = run_fetch(fed.s, t, feeds, 2, "loss");
    double lp = run_fetch(pulled.s, p, NULL, 0, "loss");
    cr_assert(memcmp(&lh, &lf, sizeof lh) == 0 && memcmp(&lh, &lp, sizeof lh) == 0, "loss %g %g %g", lh, lf, lp);
  }
  cr_assert_eq(src.calls, 3);
  cairn_var *vh[32], *vf[32], *vp[32];
  size_t n = cairn_registry_list(hand.r, CAIRN_COLL_GLOBAL, vh, 32);
  cr_assert_eq(cairn_registry_list(fed.r, CAIRN_COLL_GLOBAL, vf, 32), n);
  cr_assert_eq(cairn_registry_list(pulled.r, CAIRN_COLL_GLOBAL, vp, 32), n);
  for (size_t i = 0; i < n; i++) {
    const cairn_tensor *a = cairn_var_tensor(vh[i]), *b = cairn_var_tensor(vf[i]), *c = cairn_var_tensor(vp[i]);
    size_t bytes = (size_t)a->size * cairn_dtype_size(a->dtype);
    cr_assert(memcmp(a->data, b->data, bytes) == 0, "%s differs (fed)", cairn_var_name(vh[i]));
    cr_assert(memcmp(a->data, c->data, bytes) == 0, "%s differs (batch_fn)", cairn_var_name(vh[i]));
  }
  cr_assert_eq(cairn_tensor_i64(cairn_var_tensor(cairn_mlp_global_step(fed.m)))[0], 3);

  /* A missing feed names both; the end of the data is OUT_OF_RANGE. */
  cairn_run_args a = cairn_run_args_one(&t);
  cr_assert_eq(a.n_ops, 1);
  cr_assert_eq(cairn_session_run(fed.s, &a), CAIRN_E_INVALID);
  cr_assert(strstr(cairn_errmsg(), "train: feed \"x\" and \"y\""), "%s", cairn_errmsg());
  src.limit = 3;
  a = cairn_run_args_one(&p);
  cr_assert_eq(cairn_session_run(pulled.s, &a), CAIRN_E_OUT_OF_RANGE);
  cr_assert(strstr(cairn_errmsg(), "step: end of the data"), "%s", cairn_errmsg());
  cr_assert_eq(cairn_tensor_i64(cairn_var_tensor(cairn_mlp_global_step(pulled.m)))[0], 3, "no step taken");
  cairn_op_free(h);
  cairn_op_free(t);
  cairn_op_free(p);
  cairn_tensor_free(X);
  cairn_tensor_free(y);
  op_model_free(&hand);
  op_model_free(&fed);
  op_model_free(&pulled);
}

/* The eval op publishes what cairn_mlp_evaluate computes, under the names
 * asked for, through loss_fn; it changes nothing. */
Test(model, eval_op_publishes_loss_and_accuracy) {
  op_model om;
  op_model_new(&om);
  cairn_tensor *X = mk(CAIRN_DTYPE_F32, 2, 64, 16), *y = mk(CAIRN_DTYPE_I32, 1, 64, 0);
  blobs(X, y, 9);
  float want_loss, want_acc;
  cr_assert_eq(cairn_mlp_evaluate(om.m, X, y, &want_loss, &want_acc), CAIRN_OK);
  int calls = 0;
  cairn_mlp_op_options o = cairn_mlp_op_options_default();
  o.x_feed = "images";
  o.labels_feed = "labels";
  o.loss_name = "test_loss";
  o.accuracy_name = "test_accuracy";
  o.loss_fn = halve;
  o.loss_user = &calls;
  cairn_op *e;
  cr_assert_eq(cairn_op_new_mlp_eval(om.m, &o, &e), CAIRN_OK, "%s", cairn_errmsg());
  cr_assert_str_eq(cairn_op_name(e), "eval");
  cairn_feed feeds[2] = {{"images", X}, {"labels", y}};
  cairn_fetch f[2] = {{"test_loss", {0}}, {"test_accuracy", {0}}};
  cairn_run_args a = cairn_run_args_one(&e);
  a.feeds = feeds;
  a.n_feeds = 2;
  a.fetches = f;
  a.n_fetches = 2;
  cr_assert_eq(cairn_session_run(om.s, &a), CAIRN_OK, "%s", cairn_errmsg());
  cr_assert_eq(calls, 1);
  cr_assert_eq(f[0].value.f64, (double)want_loss / 2);
  cr_assert_eq(f[1].value.f64, (double)want_acc);
  cr_assert_eq(cairn_tensor_i64(cairn_var_tensor(cairn_mlp_global_step(om.m)))[0], 0);
  a.n_feeds = 1;
  cr_assert_eq(cairn_session_run(om.s, &a), CAIRN_E_INVALID);
  cr_assert(strstr(cairn_errmsg(), "eval: feed \"images\" and \"labels\""), "%s", cairn_errmsg());
  cairn_op *bad = (cairn_op *)1;
  cr_assert_eq(cairn_op_new_mlp_eval(NULL, NULL, &bad), CAIRN_E_NULL);
  cr_assert_null(bad);
  cairn_op_free(e);
  cairn_tensor_free(X);
  cairn_tensor_free(y);
  op_model_free(&om);
}

static cairn_status count_before_run(void *self, cairn_run_context *ctx, cairn_run_request *req) {
  (void)ctx;
  (void)req;
  ++*(int *)self;
  return CAIRN_OK;
}

/* cairn_mlp_eval_run: the eval op's loss and accuracy (the same numbers as
   cairn_mlp_evaluate) and the global step, under the op's own names; inside
   a monitored session no hook sees the run. */
Test(model, eval_run_reads_back_loss_accuracy_and_step) {
  op_model om;
  op_model_new(&om);
  cairn_tensor *X = mk(CAIRN_DTYPE_F32, 2, 64, 16), *y = mk(CAIRN_DTYPE_I32, 1, 64, 0);
  blobs(X, y, 9);
  float want_loss, want_acc;
  cr_assert_eq(cairn_mlp_evaluate(om.m, X, y, &want_loss, &want_acc), CAIRN_OK);
  cairn_mlp_op_options o = cairn_mlp_op_options_default();
  o.x_feed = "images";
  o.loss_name = "test_loss";
  cairn_op *e, *t;
  cr_assert_eq(cairn_op_new_mlp_eval(om.m, &o, &e), CAIRN_OK, "%s", cairn_errmsg());
  cr_assert_eq(cairn_op_new_mlp_train(om.m, NULL, &t), CAIRN_OK, "%s", cairn_errmsg());
  cairn_tensor_i64(cairn_var_tensor(cairn_mlp_global_step(om.m)))[0] = 41;
  cairn_mlp_eval_result r = {0, 0, 0};
  cr_assert_eq(cairn_mlp_eval_run(om.s, e, X, y, &r), CAIRN_OK, "%s", cairn_errmsg());
  cr_assert_eq(r.loss, (double)want_loss);
  cr_assert_eq(r.accuracy, (double)want_acc);
  cr_assert_eq(r.step, 41);
  cr_assert_eq(cairn_mlp_eval_run(om.s, t, X, y, &r), CAIRN_E_INVALID);
  cr_assert(strstr(cairn_errmsg(), "mlp_eval_run: op 'train' was not made by cairn_op_new_mlp_eval"), "%s",
            cairn_errmsg());
  cr_assert_eq(cairn_mlp_eval_run(om.s, e, NULL, y, &r), CAIRN_E_NULL);

  int before_runs = 0;
  cairn_hook_vtable vt = {.name = "count", .before_run = count_before_run};
  cairn_hook *h;
  cr_assert_eq(cairn_hook_new(&vt, &before_runs, &h), CAIRN_OK);
  cairn_singular_monitored_session_options so = cairn_singular_monitored_session_options_default();
  so.registry = om.r;
  so.hooks = &h;
  so.n_hooks = 1;
  so.sm.session_flags = CAIRN_SESSION_FRESH;
  cairn_monitored_session *ms;
  cr_assert_eq(cairn_singular_monitored_session_new(&so, &ms), CAIRN_OK, "%s", cairn_errmsg());
  cairn_mlp_eval_result rm = {0, 0, 0};
  cr_assert_eq(cairn_mlp_eval_run_monitored(ms, e, X, y, &rm), CAIRN_OK, "%s", cairn_errmsg());
  cr_assert_eq(before_runs, 0, "no hook sees an evaluation between steps");
  cr_assert_eq(rm.loss, (double)want_loss);
  cr_assert_eq(rm.accuracy, (double)want_acc);
  cr_assert_eq(cairn_monitored_session_close(ms), CAIRN_OK, "%s", cairn_errmsg());
  cairn_monitored_session_free(ms);
  cairn_hook_free(h);
  cairn_op_free(e);
  cairn_op_free(t);
  cairn_tensor_free(X);
  cairn_tensor_free(y);
  op_model_free(&om);
}

/* The model's forward applies the hidden activation to each GEMM block
 * while it is in cache; it must give what the public layers give one after
 * the other (bitwise for ReLU, whose kernel is exact; within rounding of
 * the kernels' tails for the others). */
Test(model, fused_activation_matches_dense_then_act) {
  const cairn_act acts[] = {CAIRN_ACT_RELU, CAIRN_ACT_LEAKY_RELU, CAIRN_ACT_SIGMOID, CAIRN_ACT_TANH, CAIRN_ACT_GELU,
                            CAIRN_ACT_GELU_TANH};
  /* B 300: row blocks; B 40: column blocks of the 700-wide layer */
  const int64_t batches[] = {300, 40};
  for (size_t ai = 0; ai < sizeof acts / sizeof acts[0]; ai++)
    for (size_t bi = 0; bi < 2; bi++) {
      cairn_registry *r;
      cr_assert_eq(cairn_registry_new(7, &r), CAIRN_OK);
      int64_t sizes[3] = {200, 700, 10}, B = batches[bi];
      cairn_mlp_config cfg = {.n_layers = 2, .sizes = sizes, .hidden_act = acts[ai], .act_alpha = 0.1f,
                              .loss = CAIRN_LOSS_SPARSE_SOFTMAX_XENT, .optim = cairn_optim_defaults(CAIRN_OPTIM_SGD)};
      cairn_mlp *m = NULL;
      cr_assert_eq(cairn_mlp_new(r, &cfg, &m), CAIRN_OK, "%s", cairn_errmsg());
      cr_assert_eq(cairn_registry_initialize_collection(r, CAIRN_COLL_GLOBAL), CAIRN_OK);
      cairn_tensor *X = mk(CAIRN_DTYPE_F32, 2, B, 200), *y = mk(CAIRN_DTYPE_I32, 1, B, 0);
      blobs(X, y, 3);
      const cairn_tensor *logits;
      cr_assert_eq(cairn_mlp_forward(m, X, &logits), CAIRN_OK, "%s", cairn_errmsg());
      cairn_tensor *Z = mk(CAIRN_DTYPE_F32, 2, B, 700), *A = mk(CAIRN_DTYPE_F32, 2, B, 700),
                   *L = mk(CAIRN_DTYPE_F32, 2, B, 10);
      cr_assert_eq(cairn_dense_forward(X, cairn_var_tensor(cairn_mlp_kernel(m, 0)), cairn_var_tensor(cairn_mlp_bias(m, 0)), Z),
                   CAIRN_OK);
      cr_assert_eq(cairn_act_forward(acts[ai], 0.1f, Z, A), CAIRN_OK);
      cr_assert_eq(cairn_dense_forward(A, cairn_var_tensor(cairn_mlp_kernel(m, 1)), cairn_var_tensor(cairn_mlp_bias(m, 1)), L),
                   CAIRN_OK);
      const float *got = logits->data, *want = L->data;
      if (acts[ai] == CAIRN_ACT_RELU)
        cr_assert(memcmp(got, want, (size_t)(B * 10) * sizeof(float)) == 0, "relu, B %lld: other bits", (long long)B);
      for (int64_t i = 0; i < B * 10; i++)
        cr_assert(fabsf(got[i] - want[i]) <= 1e-5f * (1 + fabsf(want[i])), "%s, B %lld: logit %lld is %.9g, want %.9g",
                  cairn_act_name(acts[ai]), (long long)B, (long long)i, (double)got[i], (double)want[i]);
      cairn_tensor_free(X); cairn_tensor_free(y); cairn_tensor_free(Z); cairn_tensor_free(A); cairn_tensor_free(L);
      cairn_mlp_free(m);
      cairn_registry_free(r);
    }
}


/* ---- bf16 mode (doc/bf16.md) ---- */

static cairn_mlp *build_p(cairn_registry *r, const int64_t *sizes, int n, cairn_act act, cairn_optim_kind opt,
                          cairn_precision p) {
  cairn_mlp_config cfg = {.n_layers = n, .sizes = sizes, .hidden_act = act, .act_alpha = 0.2f,
                          .loss = CAIRN_LOSS_SPARSE_SOFTMAX_XENT, .optim = cairn_optim_defaults(opt), .precision = p};
  cairn_mlp *m = NULL;
  cr_assert_eq(cairn_mlp_new(r, &cfg, &m), CAIRN_OK, "%s", cairn_errmsg());
  return m;
}

static double w16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* Runs the test body on each bf16 engine this machine has. */
static int n_bf16_engines(int *engines) {
  int n = 0;
  engines[n++] = CAIRN__BF16_REFERENCE;
  if (cairn__dnnl_bf16_available()) engines[n++] = CAIRN__BF16_ONEDNN;
  return n;
}

typedef struct {
  float *g[8];
  size_t n;
} grads_copy;

/* Keeps the gradients and ends the step before the update, so that the
 * buffers the oracle reads are those the gradients came from. */
static cairn_status keep_grads(void *user, cairn_tensor *const *g, size_t n) {
  grads_copy *c = user;
  for (size_t i = 0; i < n && i < 8; i++) {
    c->g[i] = realloc(c->g[i], (size_t)g[i]->size * sizeof(float));
    memcpy(c->g[i], g[i]->data, (size_t)g[i]->size * sizeof(float));
  }
  c->n = n;
  return CAIRN_E_CANCELLED;
}

/* |x - oracle| <= (K + 2)·2^-24·Σ|terms| + slack: the error of summing K
 * exact products in fp32, in any order (each product of two bf16 is exact
 * in fp32), with 2 for the bias and the final rounding. */
static void near(double x, double oracle, double abs_sum, int K, double slack, const char *what, int layer, size_t i) {
  const double bound = (K + 2) * ldexp(1.0, -24) * abs_sum + slack;
  cr_assert(fabs(x - oracle) <= bound, "%s of layer %d at %zu: %.9g, oracle %.9g, bound %.3g", what, layer, i, x, oracle,
            bound);
}

/* The step's products in bf16 mode against a float64 oracle computed on the
 * same bf16-rounded inputs (the model's own rounded X, W, A and dZ), so the
 * bounds measure fp32 accumulation alone: Z = in·W + b, dW = inᵀ·dZ,
 * db = Σ dZ, and dA = dZ·Wᵀ through the activation's backward; that each
 * rounded copy is the RNE rounding of its fp32 value (A = act(Z) rounded,
 * dZ of the last layer = the loss gradient rounded, W the master rounded);
 * for every elementwise activation, on each engine. */
Test(model, bf16_step_against_f64_oracle) {
  const cairn__kernel_table *k = cairn__kernels();
  static const cairn_act acts[] = {CAIRN_ACT_IDENTITY, CAIRN_ACT_RELU, CAIRN_ACT_LEAKY_RELU, CAIRN_ACT_SIGMOID,
                                   CAIRN_ACT_TANH,     CAIRN_ACT_GELU, CAIRN_ACT_GELU_TANH};
  int engines[2];
  const int ne = n_bf16_engines(engines);
  for (int en = 0; en < ne; en++)
    for (size_t ai = 0; ai < sizeof acts / sizeof acts[0]; ai++) {
      const int prev = cairn__bf16_engine_force(engines[en]);
      cairn_registry *r;
      cr_assert_eq(cairn_registry_new(11, &r), CAIRN_OK);
      /* big enough for blocks (>= 2 MFLOP products), odd widths */
      int64_t sizes[4] = {200, 300, 260, 7}, B = 70;
      cairn_mlp *m = build_p(r, sizes, 3, acts[ai], CAIRN_OPTIM_SGD, CAIRN_PRECISION_BF16);
      cr_assert_eq(cairn_registry_initialize_collection(r, CAIRN_COLL_GLOBAL), CAIRN_OK);
      for (int i = 0; i < 3; i++) { /* nonzero biases, so that they are checked too */
        cairn_tensor *b = cairn_var_tensor(cairn_mlp_bias(m, i));
        for (int64_t j = 0; j < b->size; j++) cairn_tensor_f32(b)[j] = 0.01f * (float)(j % 13) - 0.05f;
      }
      cairn_tensor *X = mk(CAIRN_DTYPE_F32, 2, B, sizes[0]), *y = mk(CAIRN_DTYPE_I32, 1, B, 0);
      blobs_k(X, y, 5, 7);
      grads_copy gc = {{0}, 0};
      cairn_mlp_set_grads_hook(m, keep_grads, &gc);
      cr_assert_eq(cairn_mlp_train_step(m, X, y, NULL), CAIRN_E_CANCELLED);
      for (int i = 0; i < 3; i++) {
        cairn__mlp_bf16_bufs L;
        cr_assert_eq(cairn__mlp_bf16_view(m, i, &L), 0);
        const int in = (int)sizes[i], out = (int)sizes[i + 1];
        const float *W = cairn_tensor_f32(cairn_var_tensor(cairn_mlp_kernel(m, i)));
        const float *bias = cairn_tensor_f32(cairn_var_tensor(cairn_mlp_bias(m, i)));
        uint16_t h;
        for (size_t j = 0; j < (size_t)in * out; j++) {
          k->f32_to_bf16(&W[j], &h, 1);
          cr_assert_eq(L.w[j], h, "W of layer %d at %zu is not the master rounded", i, j);
        }
        if (i == 0)
          for (size_t j = 0; j < (size_t)(B * in); j++) {
            k->f32_to_bf16(&cairn_tensor_f32(X)[j], &h, 1);
            cr_assert_eq(L.in[j], h, "X at %zu is not rounded", j);
          }
        /* Z = in·W + b */
        for (int64_t b = 0; b < B; b++)
          for (int o = 0; o < out; o++) {
            double acc = bias[o], abs = fabs(bias[o]);
            for (int c = 0; c < in; c++) {
              double t = w16(L.in[b * in + c]) * w16(L.w[(size_t)c * out + o]);
              acc += t, abs += fabs(t);
            }
            near(L.z[b * out + o], acc, abs, in, 0.0, "Z", i, (size_t)(b * out + o));
          }
        /* A = act(Z) and its rounding, bit for bit with the kernels */
        if (i < 2) {
          float *a = malloc((size_t)(B * out) * sizeof(float));
          uint16_t *ab = malloc((size_t)(B * out) * sizeof(uint16_t));
          cairn_tensor zt, at;
          int64_t sh[2] = {B, out};
          cr_assert_eq(cairn_tensor_view(&zt, (void *)L.z, CAIRN_DTYPE_F32, 2, sh), CAIRN_OK);
          cr_assert_eq(cairn_tensor_view(&at, a, CAIRN_DTYPE_F32, 2, sh), CAIRN_OK);
          cr_assert_eq(cairn_act_forward(acts[ai], 0.2f, &zt, &at), CAIRN_OK);
          cr_assert(memcmp(a, L.a, (size_t)(B * out) * sizeof(float)) == 0, "A of layer %d is not act(Z)", i);
          k->f32_to_bf16(a, ab, (size_t)(B * out));
          cr_assert(memcmp(ab, L.ab, (size_t)(B * out) * 2) == 0, "A of layer %d is not rounded to nearest even", i);
          free(a), free(ab);
        }
        /* dW = inᵀ·dZ, db = Σ dZ (db sums the fp32 dZ: within half a bf16
         * ulp of each term of the rounded one) */
        for (int c = 0; c < in; c++)
          for (int o = 0; o < out; o++) {
            double acc = 0, abs = 0;
            for (int64_t b = 0; b < B; b++) {
              double t = w16(L.in[b * in + c]) * w16(L.dz[b * out + o]);
              acc += t, abs += fabs(t);
            }
            near(gc.g[2 * i][(size_t)c * out + o], acc, abs, (int)B, 0.0, "dW", i, (size_t)c * out + o);
          }
        for (int o = 0; o < out; o++) {
          double acc = 0, abs = 0;
          for (int64_t b = 0; b < B; b++) acc += w16(L.dz[b * out + o]), abs += fabs(w16(L.dz[b * out + o]));
          near(gc.g[2 * i + 1][o], acc, abs, (int)B, ldexp(abs, -8), "db", i, (size_t)o);
        }
        if (i == 0) continue;
        /* dZ_{i-1} = act'(Z_{i-1}) ⊙ (dZ_i·W_iᵀ), then rounded: within the
         * accumulation bound times |act'| plus half a bf16 ulp */
        cairn__mlp_bf16_bufs P;
        cr_assert_eq(cairn__mlp_bf16_view(m, i - 1, &P), 0);
        for (int64_t b = 0; b < B; b++)
          for (int c = 0; c < in; c++) {
            double acc = 0, abs = 0;
            for (int o = 0; o < out; o++) {
              double t = w16(L.dz[b * out + o]) * w16(L.w[(size_t)c * out + o]);
              acc += t, abs += fabs(t);
            }
            /* act' at this element: the kernels' backward of a unit dY */
            float one = 1.0f, d = 0.0f;
            const float zz = P.z[b * in + c], aa = P.a[b * in + c];
            switch (acts[ai]) {
              case CAIRN_ACT_IDENTITY: d = 1.0f; break;
              case CAIRN_ACT_RELU: k->relu_bwd(&zz, &one, &d, 1); break;
              case CAIRN_ACT_LEAKY_RELU: k->leaky_relu_bwd(&zz, &one, &d, 1, 0.2f); break;
              case CAIRN_ACT_SIGMOID: k->sigmoid_bwd(&aa, &one, &d, 1); break;
              case CAIRN_ACT_TANH: k->tanh_bwd(&aa, &one, &d, 1); break;
              case CAIRN_ACT_GELU: k->gelu_bwd(&zz, &one, &d, 1); break;
              case CAIRN_ACT_GELU_TANH: k->gelu_tanh_bwd(&zz, &one, &d, 1); break;
              default: break;
            }
            const double want = d * acc, got = w16(P.dz[b * in + c]);
            const double bound = fabs(d) * ((out + 2) * ldexp(1.0, -24) * abs) * 1.01 + ldexp(fabs(want), -8) +
                                 4 * ldexp(fabs(want), -24) + 1e-30;
            cr_assert(fabs(got - want) <= bound, "dZ of layer %d at (%lld, %d): %.9g, oracle %.9g, bound %.3g", i - 1,
                      (long long)b, c, got, want, bound);
          }
      }
      /* the last layer's dZ is the loss gradient of the logits, rounded */
      cairn__mlp_bf16_bufs L;
      cr_assert_eq(cairn__mlp_bf16_view(m, 2, &L), 0);
      cairn_tensor *lg = mk(CAIRN_DTYPE_F32, 2, B, 7), *dl = mk(CAIRN_DTYPE_F32, 2, B, 7);
      memcpy(lg->data, L.z, (size_t)(B * 7) * sizeof(float));
      float loss;
      cr_assert_eq(cairn_loss_sparse_softmax_xent(lg, y, &loss, dl), CAIRN_OK);
      uint16_t *dlb = malloc((size_t)(B * 7) * 2);
      k->f32_to_bf16(dl->data, dlb, (size_t)(B * 7));
      cr_assert(memcmp(dlb, L.dz, (size_t)(B * 7) * 2) == 0, "dZ of the last layer is not the loss gradient rounded");
      free(dlb);
      cairn_tensor_free(lg), cairn_tensor_free(dl);
      for (size_t i = 0; i < gc.n; i++) free(gc.g[i]);
      cairn_tensor_free(X), cairn_tensor_free(y);
      cairn_mlp_free(m);
      cairn_registry_free(r);
      cairn__bf16_engine_force(prev);
    }
}

static void train_weights_bf16(int threads, int engine, float *out, size_t n_out) {
#ifdef CAIRN_HAVE_OPENMP
  omp_set_num_threads(threads);
#else
  (void)threads;
#endif
  const int prev = cairn__bf16_engine_force(engine);
  cairn_registry *r;
  cr_assert_eq(cairn_registry_new(2024, &r), CAIRN_OK);
  int64_t sizes[3] = {300, 512, 10}, B = 128;
  cairn_mlp *m = build_p(r, sizes, 2, CAIRN_ACT_RELU, CAIRN_OPTIM_ADAM, CAIRN_PRECISION_BF16);
  cr_assert_eq(cairn_registry_initialize_collection(r, CAIRN_COLL_GLOBAL), CAIRN_OK);
  cairn_tensor *X = mk(CAIRN_DTYPE_F32, 2, B, 300), *y = mk(CAIRN_DTYPE_I32, 1, B, 0);
  blobs(X, y, 1);
  for (int step = 0; step < 5; step++) cr_assert_eq(cairn_mlp_train_step(m, X, y, NULL), CAIRN_OK, "%s", cairn_errmsg());
  cairn_tensor *W = cairn_var_tensor(cairn_mlp_kernel(m, 0));
  cr_assert_eq((size_t)W->size, n_out);
  memcpy(out, W->data, n_out * sizeof(float));
  cairn_tensor_free(X); cairn_tensor_free(y);
  cairn_mlp_free(m);
  cairn_registry_free(r);
  cairn__bf16_engine_force(prev);
}

/* bf16 steps give the same bits at 1 and 2 threads, on each engine; and
 * they are bf16 steps (other bits than fp32's). */
Test(model, bf16_bitwise_identical_for_1_and_2_threads) {
  size_t n = 300 * 512;
  float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float)), *f = malloc(n * sizeof(float));
  train_weights(1, f, n);
  int engines[2];
  const int ne = n_bf16_engines(engines);
  for (int e = 0; e < ne; e++) {
    train_weights_bf16(1, engines[e], a, n);
    train_weights_bf16(2, engines[e], b, n);
    cr_assert(memcmp(a, b, n * sizeof(float)) == 0, "engine %d: 1 and 2 threads give different weights", engines[e]);
    cr_assert(memcmp(a, f, n * sizeof(float)) != 0, "engine %d: the bf16 steps gave the fp32 weights", engines[e]);
  }
#ifdef CAIRN_HAVE_OPENMP
  omp_set_num_threads(2);
#endif
  free(a); free(b); free(f);
}

/* Train N steps in one go, and k steps, save, restore into a fresh model
 * (new registry), N - k steps: the same bits, for every variable (kernels,
 * biases, Adam slots, beta powers, global_step). The fresh model's bf16
 * kernels must come from the restored masters. */
Test(model, bf16_resume_is_bit_identical) {
  char dir[] = "/tmp/cairn-bf16-XXXXXX";
  cr_assert_not_null(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
  int64_t sizes[4] = {64, 96, 80, 10}, B = 48;
  const int N = 6, K = 2;
  cairn_tensor *X = mk(CAIRN_DTYPE_F32, 2, B, 64), *y = mk(CAIRN_DTYPE_I32, 1, B, 0);
  cairn_registry *r1, *r2, *r3;
  cr_assert_eq(cairn_registry_new(9, &r1), CAIRN_OK);
  cr_assert_eq(cairn_registry_new(9, &r2), CAIRN_OK);
  cr_assert_eq(cairn_registry_new(77, &r3), CAIRN_OK); /* other initial values */
  cairn_mlp *a = build_p(r1, sizes, 3, CAIRN_ACT_RELU, CAIRN_OPTIM_ADAM, CAIRN_PRECISION_BF16);
  cairn_mlp *b = build_p(r2, sizes, 3, CAIRN_ACT_RELU, CAIRN_OPTIM_ADAM, CAIRN_PRECISION_BF16);
  cairn_mlp *c = build_p(r3, sizes, 3, CAIRN_ACT_RELU, CAIRN_OPTIM_ADAM, CAIRN_PRECISION_BF16);
  cr_assert_eq(cairn_registry_initialize_collection(r1, CAIRN_COLL_GLOBAL), CAIRN_OK);
  cr_assert_eq(cairn_registry_initialize_collection(r2, CAIRN_COLL_GLOBAL), CAIRN_OK);
  cr_assert_eq(cairn_registry_initialize_collection(r3, CAIRN_COLL_GLOBAL), CAIRN_OK);
  for (int s = 0; s < N; s++) {
    blobs(X, y, 100 + (uint64_t)s);
    cr_assert_eq(cairn_mlp_train_step(a, X, y, NULL), CAIRN_OK);
  }
  for (int s = 0; s < K; s++) {
    blobs(X, y, 100 + (uint64_t)s);
    cr_assert_eq(cairn_mlp_train_step(b, X, y, NULL), CAIRN_OK);
  }
  /* c has taken steps on its own values: its bf16 copies are made and
   * fresh for them, then the restore writes other masters */
  cr_assert_eq(cairn_mlp_train_step(c, X, y, NULL), CAIRN_OK);
  cairn_saver *sv, *sc;
  char path[512], prefix[300];
  snprintf(prefix, sizeof prefix, "%s/model.ckpt", dir);
  cr_assert_eq(cairn_saver_new(r2, NULL, &sv), CAIRN_OK, "%s", cairn_errmsg());
  cr_assert_eq(cairn_saver_save(sv, prefix, K, path, sizeof path), CAIRN_OK, "%s", cairn_errmsg());
  cr_assert_eq(cairn_saver_new(r3, NULL, &sc), CAIRN_OK, "%s", cairn_errmsg());
  cr_assert_eq(cairn_saver_restore(sc, path, NULL), CAIRN_OK, "%s", cairn_errmsg());
  for (int s = K; s < N; s++) {
    blobs(X, y, 100 + (uint64_t)s);
    cr_assert_eq(cairn_mlp_train_step(c, X, y, NULL), CAIRN_OK);
  }
  for (size_t i = 0;; i++) {
    cairn_var *va = cairn__registry_var_at(r1, i), *vc = cairn__registry_var_at(r3, i);
    if (!va) break;
    cr_assert_not_null(vc);
    cr_assert_str_eq(cairn_var_name(va), cairn_var_name(vc));
    cr_assert(memcmp(cairn_var_tensor(va)->data, cairn_var_tensor(vc)->data, cairn_tensor_nbytes(cairn_var_tensor(va))) == 0,
              "'%s' differs after the resume", cairn_var_name(va));
  }
  cairn_saver_free(sv), cairn_saver_free(sc);
  cairn_mlp_free(a), cairn_mlp_free(b), cairn_mlp_free(c);
  cairn_registry_free(r1), cairn_registry_free(r2), cairn_registry_free(r3);
  cairn_tensor_free(X), cairn_tensor_free(y);
  rm_tree(dir);
}

/* Values written into the kernels outside the optimizer (here by hand,
 * then cairn_var_set_initialized, as a restore does) are what the next
 * bf16 forward multiplies with: a model given another model's values
 * gives its logits bit for bit. A stale bf16 copy would give the old
 * model's. */
Test(model, bf16_copy_rebuilt_after_values_change) {
  int64_t sizes[3] = {32, 48, 5}, B = 16;
  cairn_registry *r1, *r2;
  cr_assert_eq(cairn_registry_new(1, &r1), CAIRN_OK);
  cr_assert_eq(cairn_registry_new(2, &r2), CAIRN_OK);
  cairn_mlp *a = build_p(r1, sizes, 2, CAIRN_ACT_TANH, CAIRN_OPTIM_ADAM, CAIRN_PRECISION_BF16);
  cairn_mlp *b = build_p(r2, sizes, 2, CAIRN_ACT_TANH, CAIRN_OPTIM_ADAM, CAIRN_PRECISION_BF16);
  cr_assert_eq(cairn_registry_initialize_collection(r1, CAIRN_COLL_GLOBAL), CAIRN_OK);
  cr_assert_eq(cairn_registry_initialize_collection(r2, CAIRN_COLL_GLOBAL), CAIRN_OK);
  cairn_tensor *X = mk(CAIRN_DTYPE_F32, 2, B, 32), *y = mk(CAIRN_DTYPE_I32, 1, B, 0);
  blobs(X, y, 3);
  cr_assert_eq(cairn_mlp_train_step(a, X, y, NULL), CAIRN_OK);
  cr_assert_eq(cairn_mlp_train_step(b, X, y, NULL), CAIRN_OK); /* b's copies are made, for b's values */
  for (int i = 0; i < 2; i++) {
    cairn_var *src[2] = {cairn_mlp_kernel(a, i), cairn_mlp_bias(a, i)}, *dst[2] = {cairn_mlp_kernel(b, i), cairn_mlp_bias(b, i)};
    for (int j = 0; j < 2; j++) {
      memcpy(cairn_var_tensor(dst[j])->data, cairn_var_tensor(src[j])->data, cairn_tensor_nbytes(cairn_var_tensor(src[j])));
      cairn_var_set_initialized(dst[j], 1);
    }
  }
  const cairn_tensor *la, *lb;
  cr_assert_eq(cairn_mlp_forward(a, X, &la), CAIRN_OK);
  cr_assert_eq(cairn_mlp_forward(b, X, &lb), CAIRN_OK);
  cr_assert(memcmp(la->data, lb->data, cairn_tensor_nbytes(la)) == 0, "b multiplied with a stale bf16 copy of its kernels");
  /* and an fp32 model evaluated in fp32 after bf16 training, and back */
  cr_assert_eq(cairn_mlp_set_precision(b, CAIRN_PRECISION_F32), CAIRN_OK);
  cr_assert_eq(cairn_mlp_train_step(b, X, y, NULL), CAIRN_OK);
  cr_assert_eq(cairn_mlp_set_precision(b, CAIRN_PRECISION_BF16), CAIRN_OK);
  cr_assert_eq(cairn_mlp_train_step(b, X, y, NULL), CAIRN_OK);
  cairn__mlp_bf16_bufs L;
  cr_assert_eq(cairn__mlp_bf16_view(b, 0, &L), 0);
  /* the copy after the fused update is the master rounded */
  const cairn_tensor *W = cairn_var_tensor(cairn_mlp_kernel(b, 0));
  uint16_t *wb = malloc((size_t)W->size * 2);
  cairn__kernels()->f32_to_bf16(W->data, wb, (size_t)W->size);
  cr_assert(memcmp(wb, L.w, (size_t)W->size * 2) == 0, "the optimizer's bf16 copy is not the updated master rounded");
  free(wb);
  cairn_mlp_free(a), cairn_mlp_free(b);
  cairn_registry_free(r1), cairn_registry_free(r2);
  cairn_tensor_free(X), cairn_tensor_free(y);
}

/* No allocation after the first step in bf16 mode, on each engine. */
Test(model, bf16_no_allocation_after_first_step) {
  int engines[2];
  const int ne = n_bf16_engines(engines);
  for (int e = 0; e < ne; e++) {
    const int prev = cairn__bf16_engine_force(engines[e]);
    set_bf16_build(1);
    no_allocation_after_first_step();
    set_bf16_build(0);
    cairn__bf16_engine_force(prev);
  }
}

static int term_blocked(void) {
  sigset_t cur;
  pthread_sigmask(SIG_BLOCK, NULL, &cur);
  return sigismember(&cur, SIGTERM);
}
static cairn_status grads_see_mask(void *user, cairn_tensor *const *g, size_t n) {
  (void)g, (void)n;
  *(int *)user = term_blocked();
  return CAIRN_OK;
}

/* A step holds the signals once around its products (forward and backward:
 * cairn__dnnl_hold_signals) and gives the caller's mask back before the
 * grads hook, after the step, after a step that failed in the loss, and
 * after an evaluation, on the oneDNN engines in both precisions. */
Test(model, signals_held_only_around_the_products) {
  const int prev = cairn__gemm_engine_force(CAIRN__GEMM_ONEDNN);
  if (prev < 0) cr_skip_test("no oneDNN in this build (--without-dnnl, --disable-openmp or libdnnl-dev missing)");
  for (int bf = 0; bf < 2; bf++) {
    cairn_registry *r;
    cr_assert_eq(cairn_registry_new(5, &r), CAIRN_OK);
    int64_t sizes[4] = {40, 64, 32, 4};
    set_bf16_build(bf);
    cairn_mlp *m = build(r, sizes, 3, CAIRN_OPTIM_ADAM, NULL);
    set_bf16_build(0);
    cr_assert_eq(cairn_registry_initialize_collection(r, CAIRN_COLL_GLOBAL), CAIRN_OK);
    cairn_tensor *X = mk(CAIRN_DTYPE_F32, 2, 48, 40), *y = mk(CAIRN_DTYPE_I32, 1, 48, 0);
    blobs(X, y, 9);
    int in_hook = -1;
    cairn_mlp_set_grads_hook(m, grads_see_mask, &in_hook);
    cr_assert(!term_blocked());
    cr_assert_eq(cairn_mlp_train_step(m, X, y, NULL), CAIRN_OK, "%s", cairn_errmsg());
    cr_assert_eq(in_hook, 0, "%s: the grads hook ran with SIGTERM blocked", bf ? "bf16" : "f32");
    cr_assert(!term_blocked(), "%s: a step left SIGTERM blocked", bf ? "bf16" : "f32");
    cairn_tensor_i32(y)[3] = 9; /* the loss fails after the forward's products */
    cr_assert_eq(cairn_mlp_train_step(m, X, y, NULL), CAIRN_E_INVALID);
    cr_assert(!term_blocked(), "%s: a failed step left SIGTERM blocked", bf ? "bf16" : "f32");
    cairn_tensor_i32(y)[3] = 3;
    float loss, acc;
    cr_assert_eq(cairn_mlp_evaluate(m, X, y, &loss, &acc), CAIRN_OK);
    cr_assert(!term_blocked(), "%s: an evaluation left SIGTERM blocked", bf ? "bf16" : "f32");
    cairn_tensor_free(X), cairn_tensor_free(y);
    cairn_mlp_free(m);
    cairn_registry_free(r);
  }
  cairn__gemm_engine_force(prev);
}
