/* Private helpers shared by the lib sources; never installed. */
#ifndef CAIRN_INTERNAL_H
#define CAIRN_INTERNAL_H

#include "config.h"

#include <stddef.h>
#include <stdint.h>

#include "cairn/status.h"
#include "cairn/tensor.h"
#include "cairn/var.h"

/* Bytes of the per-thread error detail (cairn_errmsg), NUL included: room
 * for a restore that lists every variable it cannot restore. */
#define CAIRN__ERRMSG_LEN 4096

/* Sets the calling thread's error detail (printf-style) and returns s. */
cairn_status cairn__fail(cairn_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void cairn__clear_error(void);

/* The variable named `name`, or NULL — without touching cairn_errmsg()
 * (cairn_registry_find reports a missing name as an error). var.c */
cairn_var *cairn__registry_lookup(const cairn_registry *r, const char *name);
/* The i-th variable in creation order, or NULL past the end. var.c */
cairn_var *cairn__registry_var_at(const cairn_registry *r, size_t i);
/* 1 when name matches some include glob (or n_include is 0) and no exclude
 * glob (fnmatch(3), flags 0). var_list.c */
int cairn__globs_select(const char *name, const char *const *include, size_t n_include, const char *const *exclude,
                        size_t n_exclude);

/* Argument checks that produce the standard messages. `fn` and `what` name
 * the call and the argument: "dense_forward: X is NULL". */
cairn_status cairn__check_f32(const char *fn, const char *what, const cairn_tensor *t);
cairn_status cairn__check_rank(const char *fn, const char *what, const cairn_tensor *t, int rank);

/* Checks that `init` suits dtype `dt` and its parameters are valid,
 * without generating anything (init.c; var.c checks at creation so that
 * initializing later cannot fail). Messages start with "fn: 'name': ". */
cairn_status cairn__init_check(const char *fn, const char *name, cairn_dtype dt, cairn_init init);

/* C = alpha·op(A)·op(B) + beta·C, row-major, through cblas_sgemm in
 * shape-determined blocks: same bits for any thread count (gemm.c). With
 * bias (N floats) non-NULL, beta must be 0 and every row of C starts as
 * bias instead: C = alpha·op(A)·op(B) + bias. */
void cairn__sgemm(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc, const float *bias);

/* The integer value of environment variable `name` when it is set to a
 * whole decimal number in [lo, hi]; dflt otherwise (unset, empty, garbage
 * or out of range: a typo never turns a knob to an extreme). runtime.c. */
long cairn__env_long(const char *name, long dflt, long lo, long hi);

/* String and path helpers (path.c); the char * results are malloc'd, NULL
 * when out of memory. */
/* Resizes a cairn_alloc block to `bytes` keeping its first
 * min(old_bytes, bytes) bytes, still 64-byte aligned; NULL on failure (p
 * stays valid). Large (mapped) blocks grow without a copy on Linux. */
void *cairn__realloc(void *p, size_t old_bytes, size_t bytes);
char *cairn__strdup(const char *s);                     /* NULL for NULL */
char *cairn__path_dir(const char *path);                /* "." if none, "/" for "/x" */
char *cairn__path_join(const char *dir, const char *name); /* no doubled '/' */
/* mkdir -p: creates dir and every missing parent (mode 0777 less the
 * umask); an existing directory is fine. Errors (CAIRN_E_IO, CAIRN_E_NOSPC,
 * CAIRN_E_NOMEM) start with "fn: " and name the component that could not
 * be created and errno's text. */
cairn_status cairn__make_dirs(const char *fn, const char *dir);
/* fsync of a directory after a rename; 0, or -1 with errno. File systems
 * that cannot sync a directory count as success. */
int cairn__fsync_dir(const char *dir);

/* 1 if the file stat() described in *sb was marked with
 * cairn_checkpoint_mark_corrupt in this process, and then the reason in
 * why[0..len) (saver_corrupt.c; cairn_latest_checkpoint skips such files). */
struct stat;
int cairn__checkpoint_marked(const struct stat *sb, char *why, size_t len);

/* cairn_dense_backward with a choice: accumulate 0 overwrites dW and db
 * instead of adding to them (the model's step, which saves a zeroing pass). */
cairn_status cairn__dense_backward(const cairn_tensor *X, const cairn_tensor *W, const cairn_tensor *dY,
                                   cairn_tensor *dX, cairn_tensor *dW, cairn_tensor *db, int accumulate);

/* ---- Parallel loops -----------------------------------------------------
 * [0, n) is cut into chunks whose size depends on n only (never on the
 * thread count), so per-chunk partial sums added in chunk order give the
 * same bits for any number of threads. Work below CAIRN__PAR_MIN elements
 * stays on the calling thread. Never call BLAS from `fn`. */
#define CAIRN__PAR_MIN 32768
#define CAIRN__PAR_MAX_CHUNKS 256

typedef void (*cairn__range_fn)(void *ctx, size_t lo, size_t hi);
typedef double (*cairn__range_sum_fn)(void *ctx, size_t lo, size_t hi);

void cairn__par_for(size_t n, cairn__range_fn fn, void *ctx);
/* Σ over chunks of fn(chunk), added in chunk order. */
double cairn__par_sum(size_t n, cairn__range_sum_fn fn, void *ctx);
/* Like cairn__par_for over `rows` rows of `cols` elements: chunks are whole
 * rows (for row-wise ops such as softmax). */
void cairn__par_rows(size_t rows, size_t cols, cairn__range_fn fn, void *ctx);
double cairn__par_rows_sum(size_t rows, size_t cols, cairn__range_sum_fn fn, void *ctx);

#endif
