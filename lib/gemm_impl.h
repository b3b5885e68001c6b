/* The two GEMM engines under cairn__sgemm (gemm.c): OpenBLAS (or BLIS) and
 * oneDNN matmul primitives (gemm_dnnl.c, gemm_dnnl_fixed.c, on what
 * gemm_dnnl_base.c shares). Private to the library. */
#ifndef CAIRN_GEMM_IMPL_H
#define CAIRN_GEMM_IMPL_H

#include <pthread.h>

enum { CAIRN__GEMM_OPENBLAS = 0, CAIRN__GEMM_ONEDNN = 1 };

/* 1 when this build has oneDNN and its CPU engine could be created (once;
 * thread-safe). */
int cairn__dnnl_available(void);

/* C = op(A)·op(B) (accumulate 0) or C += op(A)·op(B) (accumulate 1), C is
 * (M, N) row-major with leading dimension ldc, op(A) is (M, K), op(B) is
 * (K, N), on one thread: a oneDNN matmul primitive made once per
 * (trans_a, trans_b, N, lda, ldb, ldc, accumulate), with M and K given at
 * run time (they carry the batch size, so a new batch makes no new
 * primitive); A·Bᵀ goes to cairn__dnnl_sgemm_fixed (a primitive per batch
 * size, made at its first step). Returns 0 on success, -1 when oneDNN could not run it (out of
 * memory; C is then unchanged only if the failure came before the product:
 * the caller redoes the block on the BLAS, which writes all of C). Safe to
 * call from several threads at once. */
int cairn__dnnl_sgemm(int trans_a, int trans_b, int M, int N, int K, const float *A, int lda, const float *B,
                      int ldb, int accumulate, float *C, int ldc);

/* Between a hold and its release (they nest), the oneDNN runs of the
 * calling thread leave the asynchronous signals blocked from the first run
 * to the release instead of blocking and unblocking them around each run
 * (two system calls a run: gemm_dnnl_base.c says why they are blocked).
 * No system call when no run comes in between. A signal that arrives
 * meanwhile is delivered at the release (or to another thread): hold
 * around a few products, never around a caller's code. Per thread; the
 * workers of a parallel region block around each of their runs as
 * before. No-ops without oneDNN. */
void cairn__dnnl_hold_signals(void);
void cairn__dnnl_release_signals(void);

/* Primitives made so far (for tests and cairn_runtime_info). */
int cairn__dnnl_primitive_count(void);

/* 1 when cutting C's M rows (cols 0) or N columns (cols 1) into the
 * blocks every thread count t from 2 to max_nb makes (ceil(M/t) rows or
 * ceil(N/t) columns, rounded up to width) gives the bits of one oneDNN
 * call over all of C, for this shape (C = op(A)·op(B), or += with
 * accumulate); found once per shape by computing made-up values both ways
 * (gemm_dnnl.c says why), then remembered. 1 when max_nb < 2; 0 without
 * oneDNN or when the probe could not run. Thread-safe. */
int cairn__dnnl_cuts_keep_bits(int cols, int trans_a, int trans_b, int M, int N, int K, int lda, int ldb, int ldc,
                               int accumulate, int max_nb, int width);

/* oneDNN's implementation of cairn's matmuls and its ISA, e.g. "gemm:jit,
 * A*B^T brg:avx512_core, isa avx512_core_amx" ("none" without oneDNN);
 * found once, thread-safe. */
const char *cairn__dnnl_impl(void);

/* One engine choice (the fp32 GEMM's, the bf16 GEMM's): made once by
 * `init`, which sets `picked` from the environment and the CPU; a test
 * may force another (gemm.c). */
typedef struct cairn__engine_choice {
  pthread_once_t once;
  void (*init)(void);
  int picked, forced;
} cairn__engine_choice;
#define CAIRN__ENGINE_CHOICE(init_fn) {PTHREAD_ONCE_INIT, init_fn, -1, -1}
int cairn__engine_choice_get(cairn__engine_choice *c);
/* Forces engine e when `valid` (else back to the picked one); returns
 * the one in use before. */
int cairn__engine_choice_force(cairn__engine_choice *c, int e, int valid);

/* The engine cairn__sgemm uses: CAIRN_GEMM_ENGINE=openblas|onednn, else
 * oneDNN where the CPU has AVX-512 (gemm.c says why), else OpenBLAS. */
int cairn__gemm_engine(void);
/* Tests only: forces an engine (CAIRN__GEMM_OPENBLAS or CAIRN__GEMM_ONEDNN;
 * -1 goes back to the environment's choice); returns the previous one.
 * ONEDNN is refused (returns -1, nothing changed) when oneDNN is not
 * available. Not thread-safe against GEMMs running at the same time. */
int cairn__gemm_engine_force(int engine);
/* How cairn__sgemm cuts C (M, N) = op(A)·op(B) (+ C with accumulate 1;
 * accumulate -1: a product oneDNN does not run, alpha not 1 or beta not 0
 * or 1) on engine: n_blocks blocks of block_len columns (split_n 1) or
 * rows (0), the last one shorter; each block is one single-threaded call
 * of the engine. The
 * rows follow the thread count (one block per thread, one call at 1
 * thread) where the cuts keep the bits of one call: on the BLAS at
 * multiples of cairn__gemm_row_cut's width, on oneDNN where
 * cairn__dnnl_cuts_keep_bits says so for the shape; on oneDNN a forward
 * X·W with no more rows than columns has its columns follow the threads
 * instead, where they keep the bits (gemm.c says why). Otherwise the
 * blocks depend on the shape (and CAIRN_GEMM_BLOCKS) alone. */
void cairn__gemm_plan(int engine, int trans_a, int trans_b, int M, int N, int K, int lda, int ldb, int ldc,
                      int accumulate, int *split_n, int *n_blocks, int *block_len);
/* Block i of such a plan: [lo, hi) of the cut dimension (N with split_n,
 * else M), C's rows [r0, r1) and columns [c0, c1); 0 when it is empty.
 * With a bias, those rows of C start as the bias, copied by the thread
 * about to run the block's GEMM: they are still in its cache when the GEMM
 * accumulates onto them (a separate pass cost ~4 % of the forward). */
typedef struct cairn__gemm_block {
  int lo, hi, r0, r1, c0, c1;
} cairn__gemm_block;
int cairn__gemm_block_at(int i, int split_n, int block_len, int M, int N, float *C, int ldc, const float *bias,
                         cairn__gemm_block *b);

/* ---- bf16 products (gemm_bf16.c, gemm_dnnl_fixed.c; doc/bf16.md) ----
 * The inputs are bf16 (uint16_t bits, rounded by the f32_to_bf16 kernel),
 * the products and their sums fp32, C fp32. */
#include <stddef.h>
#include <stdint.h>

enum { CAIRN__BF16_REFERENCE = 0, CAIRN__BF16_ONEDNN = 1 };

/* What the reference engine widens the inputs into; owned by the caller
 * (the model), grown on first use and kept. Zero-filled is empty. */
typedef struct cairn__bf16_ws {
  float *buf;
  size_t cap; /* floats */
} cairn__bf16_ws;
void cairn__bf16_ws_free(cairn__bf16_ws *ws);

/* C = op(A)·op(B) + bias (or + C when accumulate), as cairn__sgemm_ep with
 * alpha 1 and beta 0 or 1, on bf16 A and B: cut into the blocks
 * cairn__gemm_plan gives, each block on one thread, so the bits do not
 * depend on the thread count. ep as cairn__sgemm_ep's. Returns 0, or -1
 * when memory ran out (ws could not grow, or a oneDNN block failed); C is
 * then partly written. */
struct cairn__gemm_epilogue;
int cairn__gemm_bf16(int trans_a, int trans_b, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B,
                     int ldb, int accumulate, float *C, int ldc, const float *bias,
                     const struct cairn__gemm_epilogue *ep, cairn__bf16_ws *ws);
/* The engine cairn__gemm_bf16 uses: CAIRN_BF16_ENGINE=reference|onednn,
 * else oneDNN where the CPU has avx512_bf16 or amx_bf16 and oneDNN is in
 * the build, else the reference. */
int cairn__bf16_engine(void);
/* Tests only: as cairn__gemm_engine_force, for the bf16 engine. */
int cairn__bf16_engine_force(int engine);
/* "onednn (<oneDNN's implementation>)" or "reference (...)", for cairn-info. */
const char *cairn__bf16_engine_info(char *buf, size_t len);
/* y = x widened to fp32 (exact) / x rounded to bf16 (to nearest even), n
 * values, in chunks on the threads (gemm_bf16.c). */
void cairn__bf16_widen(const uint16_t *x, float *y, size_t n);
void cairn__bf16_round(const float *x, uint16_t *y, size_t n);

/* gemm_dnnl_fixed.c: 1 when this build has oneDNN and the CPU has
 * avx512_bf16 or amx_bf16. */
int cairn__dnnl_bf16_available(void);
/* One block of cairn__gemm_bf16 on a oneDNN matmul primitive (src bf16,
 * weights bf16, dst f32), made once per (trans_a, trans_b, M, N, K, lda,
 * ldb, ldc, accumulate) in a one-thread context; run on the calling thread
 * with its user scratchpad. 0 on success, -1
 * when oneDNN cannot run it (the shape refused, only a reference
 * implementation, out of memory). cairn__dnnl_bf16_ready says, before any
 * block runs, whether the primitive for a key exists (making it). */
int cairn__dnnl_bf16_ready(int trans_a, int trans_b, int M, int N, int K, int lda, int ldb, int ldc, int accumulate);
int cairn__dnnl_bf16_gemm(int trans_a, int trans_b, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B,
                          int ldb, int accumulate, float *C, int ldc);
/* Fixed-dimension primitives made so far (bf16: the bf16 ones, else the
 * fp32 ones), and the implementation oneDNN chose for the first bf16 one
 * ("brg:avx512_core_amx"; "" before any). */
int cairn__dnnl_fixed_primitive_count(int bf16);
const char *cairn__dnnl_bf16_impl(void);
/* One block of cairn__dnnl_sgemm with a transposed B and A not transposed
 * (C = A·Bᵀ), on an fp32 primitive with every dimension fixed, made once
 * per (M, N, K, lda, ldb, ldc, accumulate) like the bf16 ones (oneDNN
 * picks its brgemm for it, faster there than its JIT gemm:
 * gemm_dnnl_fixed.c). 0, or -1 when oneDNN cannot run it (refused, only a
 * reference implementation, out of memory): the caller then runs it on the
 * run-time-dimension primitive. */
int cairn__dnnl_sgemm_fixed(int trans_a, int trans_b, int M, int N, int K, const float *A, int lda, const float *B,
                            int ldb, int accumulate, float *C, int ldc);

#if defined(CAIRN_HAVE_DNNL) && defined(CAIRN_HAVE_OPENMP)
#include <dnnl.h>
/* gemm_dnnl_base.c, for gemm_dnnl.c and gemm_dnnl_fixed.c: the engine (NULL
 * when unavailable), and the calling thread's stream and scratchpad grown
 * to `scratch` bytes (-1 when out of memory). */
dnnl_engine_t cairn__dnnl_engine(void);
int cairn__dnnl_thread(size_t scratch, dnnl_stream_t *stream, void **scratch_buf);
/* Runs prim on the calling thread alone, asynchronous signals held back
 * meanwhile (gemm_dnnl.c says why); 0, or -1 when oneDNN failed. */
int cairn__dnnl_execute(dnnl_primitive_t prim, dnnl_stream_t stream, int nargs, const dnnl_exec_arg_t *args);
/* The calling thread's stream made and scratchpad grown to `scratch`
 * bytes (0, or -1 when out of memory), before a run's memory objects are
 * made: in the other order the first step at a new batch size left about
 * 1 KB more in use in glibc's per-thread caches, which
 * model::bf16_no_allocation_after_first_step catches (seen on a Zen 5). */
int cairn__dnnl_grow(size_t scratch);
/* One run of prim with its memory objects m (A, B, C, scratchpad or NULL,
 * cairn__dnnl_memories) pointed at A, B, C and the calling thread's
 * scratchpad grown to `scratch` bytes: cairn__dnnl_execute on the thread's
 * stream. 0, or -1 (out of memory, or oneDNN failed). */
int cairn__dnnl_run(dnnl_primitive_t prim, dnnl_memory_t m[4], size_t scratch, const void *A, const void *B,
                    void *C);
/* A (rows, cols) matrix of type dt, row-major or the transpose of one with
 * leading dimension ld. */
dnnl_status_t cairn__dnnl_md(dnnl_memory_desc_t *md, int64_t rows, int64_t cols, int trans, int ld,
                             dnnl_data_type_t dt);
/* C = A·B (C += A·B with acc) as a matmul primitive made at one thread with
 * a user scratchpad; gemm_dnnl.c says the rest. 0, or -1. */
/* The primitives of gemm_dnnl.c or gemm_dnnl_fixed.c, one item per key, made
 * on first use and kept for the process (a process uses a handful of
 * shapes, three per dense layer). cairn__dnnl_cache_get returns the item
 * `same` says is key's, or else make(key, id) appended with the next id
 * (its index here, and in each thread's slots); make returns NULL to keep
 * nothing (out of memory, or a shape not worth asking again). All under
 * the cache's lock; NULL when there is no item. */
typedef struct cairn__dnnl_cache {
  pthread_mutex_t lock;
  void **items;
  int n, cap;
} cairn__dnnl_cache;
#define CAIRN__DNNL_CACHE_INIT {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0}
void *cairn__dnnl_cache_get(cairn__dnnl_cache *c, const void *key, int (*same)(const void *item, const void *key),
                            void *(*make)(const void *key, int id));
int cairn__dnnl_cache_count(cairn__dnnl_cache *c);
/* A run's memory objects (A, B, C, scratchpad) without buffers; 0 or -1
 * (with whatever was made destroyed); and their destruction (each NULL
 * after). */
void cairn__dnnl_memories_free(dnnl_memory_t m[4]);
int cairn__dnnl_memories(dnnl_memory_t m[4], const dnnl_memory_desc_t *a, const dnnl_memory_desc_t *b,
                         const dnnl_memory_desc_t *c, size_t scratch);
int cairn__dnnl_matmul_make(const dnnl_memory_desc_t *a, const dnnl_memory_desc_t *b, const dnnl_memory_desc_t *c,
                            int acc, int refuse_ref, dnnl_primitive_t *prim, size_t *scratch, char *impl,
                            size_t impl_len);
#endif

#endif
