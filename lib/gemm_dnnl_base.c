/* What cairn's two kinds of oneDNN matmul primitives share (gemm_dnnl.c:
 * run-time M and K; gemm_dnnl_fixed.c: every dimension fixed): the CPU
 * engine, each thread's stream and user scratchpad, memory descriptors of
 * cairn's row-major matrices, making a primitive at one thread, the memory
 * objects of a run, the cache of primitives per key, and running one with
 * the asynchronous signals held back. */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_impl.h"

#if defined(CAIRN_HAVE_DNNL) && defined(CAIRN_HAVE_OPENMP)
#include <dnnl.h>
#include <omp.h>

static dnnl_engine_t engine;
static int engine_ok;
static pthread_once_t engine_once = PTHREAD_ONCE_INIT;

/* What a thread needs to run primitives: its stream and its user
 * scratchpad, grown to the largest size a primitive asks for and kept until
 * the thread ends. */
typedef struct {
  dnnl_stream_t stream;
  void *scratch;
  size_t cap;
} thread_ctx;
static pthread_key_t ctx_key;

static void ctx_free(void *p) {
  thread_ctx *t = p;
  if (!t) return;
  if (t->stream) dnnl_stream_destroy(t->stream);
  free(t->scratch);
  free(t);
}

static void engine_init(void) {
  if (pthread_key_create(&ctx_key, ctx_free) != 0) return;
  engine_ok = dnnl_engine_create(&engine, dnnl_cpu, 0) == dnnl_success;
}

int cairn__dnnl_available(void) {
  pthread_once(&engine_once, engine_init);
  return engine_ok;
}

dnnl_engine_t cairn__dnnl_engine(void) { return cairn__dnnl_available() ? engine : NULL; }

int cairn__dnnl_thread(size_t scratch, dnnl_stream_t *stream, void **scratch_buf) {
  if (!cairn__dnnl_available()) return -1;
  thread_ctx *t = pthread_getspecific(ctx_key);
  if (!t) {
    if (!(t = calloc(1, sizeof *t))) return -1;
    if (dnnl_stream_create(&t->stream, engine, dnnl_stream_default_flags) != dnnl_success ||
        pthread_setspecific(ctx_key, t) != 0) {
      ctx_free(t);
      return -1;
    }
  }
  if (scratch > t->cap) {
    void *p = NULL;
    if (posix_memalign(&p, 64, scratch) != 0) return -1;
    free(t->scratch);
    t->scratch = p;
    t->cap = scratch;
  }
  *stream = t->stream;
  *scratch_buf = t->scratch;
  return 0;
}

/* dims (rows, cols) of type dt, a row-major matrix or the transpose of one
 * with leading dimension ld */
dnnl_status_t cairn__dnnl_md(dnnl_memory_desc_t *md, int64_t rows, int64_t cols, int trans, int ld,
                             dnnl_data_type_t dt) {
  dnnl_dims_t dims = {rows, cols};
  dnnl_dims_t strides = {trans ? 1 : ld, trans ? ld : 1};
  return dnnl_memory_desc_init_by_strides(md, 2, dims, dt, strides);
}
/* C = A·B (C += A·B with acc: the sum post-op with scale 1, the BLAS's
 * beta = 1) as a matmul primitive with a user scratchpad, made with the
 * OpenMP thread count at 1 (its work split is fixed then). impl (when not
 * NULL, impl_len bytes) gets oneDNN's implementation name. With prim NULL
 * only the primitive descriptor is made (to name the implementation).
 * refuse_ref: oneDNN's reference loop counts as a failure. 0 or -1. */
int cairn__dnnl_matmul_make(const dnnl_memory_desc_t *a, const dnnl_memory_desc_t *b, const dnnl_memory_desc_t *c,
                            int acc, int refuse_ref, dnnl_primitive_t *prim, size_t *scratch, char *impl,
                            size_t impl_len) {
  dnnl_matmul_desc_t d;
  dnnl_primitive_attr_t attr = NULL;
  dnnl_post_ops_t po = NULL;
  dnnl_primitive_desc_t pd = NULL;
  const char *name = NULL;
  int ok = engine_ok && dnnl_matmul_desc_init(&d, a, b, NULL, c) == dnnl_success &&
           dnnl_primitive_attr_create(&attr) == dnnl_success &&
           dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success;
  if (ok && acc)
    ok = dnnl_post_ops_create(&po) == dnnl_success && dnnl_post_ops_append_sum(po, 1.0f) == dnnl_success &&
         dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success;
  if (ok) {
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    ok = dnnl_primitive_desc_create(&pd, &d, attr, engine, NULL) == dnnl_success;
    if (ok && dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name) != dnnl_success) name = NULL;
    if (ok && refuse_ref && name && strncmp(name, "ref", 3) == 0) ok = 0;
    if (ok && impl && impl_len) snprintf(impl, impl_len, "%s", name ? name : "unknown");
    if (ok && prim) {
      const dnnl_memory_desc_t *s = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
      if (scratch) *scratch = s ? dnnl_memory_desc_get_size(s) : 0;
      ok = dnnl_primitive_create(prim, pd) == dnnl_success;
    }
    omp_set_num_threads(threads);
  }
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (po) dnnl_post_ops_destroy(po);
  if (attr) dnnl_primitive_attr_destroy(attr);
  return ok ? 0 : -1;
}

/* The memory objects of one run, m[0..3] = A, B, C and (when scratch > 0)
 * a u8 scratchpad of scratch bytes, with no buffers yet (each run points
 * them at its own). 0, or -1 with whatever was made destroyed (NULL). */
int cairn__dnnl_memories(dnnl_memory_t m[4], const dnnl_memory_desc_t *a, const dnnl_memory_desc_t *b,
                         const dnnl_memory_desc_t *c, size_t scratch) {
  dnnl_memory_desc_t d;
  const dnnl_dims_t sdim = {(int64_t)scratch};
  int ok = dnnl_memory_create(&m[0], a, engine, DNNL_MEMORY_NONE) == dnnl_success &&
           dnnl_memory_create(&m[1], b, engine, DNNL_MEMORY_NONE) == dnnl_success &&
           dnnl_memory_create(&m[2], c, engine, DNNL_MEMORY_NONE) == dnnl_success;
  if (ok && scratch)
    ok = dnnl_memory_desc_init_by_tag(&d, 1, sdim, dnnl_u8, dnnl_a) == dnnl_success &&
         dnnl_memory_create(&m[3], &d, engine, DNNL_MEMORY_NONE) == dnnl_success;
  if (!ok) cairn__dnnl_memories_free(m);
  return ok ? 0 : -1;
}

void cairn__dnnl_memories_free(dnnl_memory_t m[4]) {
  for (int i = 0; i < 4; i++)
    if (m[i]) dnnl_memory_destroy(m[i]), m[i] = NULL;
}

void *cairn__dnnl_cache_get(cairn__dnnl_cache *c, const void *key, int (*same)(const void *item, const void *key),
                            void *(*make_item)(const void *key, int id)) {
  void *found = NULL;
  pthread_mutex_lock(&c->lock);
  for (int i = 0; i < c->n && !found; i++)
    if (same(c->items[i], key)) found = c->items[i];
  if (!found) {
    if (c->n == c->cap) {
      int cap = c->cap ? 2 * c->cap : 16;
      void **grown = realloc(c->items, (size_t)cap * sizeof *grown);
      if (grown) c->items = grown, c->cap = cap;
    }
    if (c->n < c->cap && (found = make_item(key, c->n)) != NULL) c->items[c->n++] = found;
  }
  pthread_mutex_unlock(&c->lock);
  return found;
}

int cairn__dnnl_cache_count(cairn__dnnl_cache *c) {
  pthread_mutex_lock(&c->lock);
  int n = c->n;
  pthread_mutex_unlock(&c->lock);
  return n;
}

/* One primitive run on the calling thread, with the asynchronous signals
 * blocked while it runs (a signal that arrives meanwhile is delivered when
 * the run ends, or to another thread). Measured on an Emerald Rapids guest
 * (kernel 6.18, oneDNN 2.6.3): SIGTERM or SIGINT landing inside oneDNN's
 * JIT sgemm corrupted the heap in about one run of ten of
 * tests/preempt.sh's trainer (glibc's "corrupted size vs. prev_size", or a
 * segfault in malloc later), and never with OpenBLAS or with the signals
 * blocked here. Two sigprocmask calls cost well under a microsecond per
 * block on bare metal, against 50 us or more of product, but 2.4-2.6 us on
 * the Zen 5 guest of bench/RESULTS.md (a system call traps to the
 * hypervisor there), where the Fashion-MNIST demo's model makes 10-12
 * runs per step of 0.4-0.6 ms: a caller that runs many small products in a
 * row holds the signals once around them (cairn__dnnl_hold_signals). One thread: outside an active
 * parallel region (a team of one, or a caller's own thread) oneDNN would
 * split the product over omp_get_max_threads() threads. */
static void block_signals(sigset_t *old) {
  sigset_t block;
  sigfillset(&block);
  /* the synchronous ones cannot be held back, and must not be */
  sigdelset(&block, SIGSEGV), sigdelset(&block, SIGBUS), sigdelset(&block, SIGFPE), sigdelset(&block, SIGILL),
      sigdelset(&block, SIGTRAP);
  pthread_sigmask(SIG_BLOCK, &block, old);
}

/* cairn__dnnl_hold_signals on this thread: its depth, and whether a run
 * inside has blocked the signals (the mask to restore in held_old). */
static _Thread_local int hold_depth, held;
static _Thread_local sigset_t held_old;

void cairn__dnnl_hold_signals(void) { hold_depth++; }

void cairn__dnnl_release_signals(void) {
  if (hold_depth > 0 && --hold_depth == 0 && held) {
    held = 0;
    pthread_sigmask(SIG_SETMASK, &held_old, NULL);
  }
}

int cairn__dnnl_execute(dnnl_primitive_t prim, dnnl_stream_t stream, int nargs, const dnnl_exec_arg_t *args) {
  sigset_t old;
  if (!hold_depth) block_signals(&old);
  else if (!held) block_signals(&held_old), held = 1; /* until the release */
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (threads > 1) omp_set_num_threads(1);
  int ok = dnnl_primitive_execute(prim, stream, nargs, args) == dnnl_success && dnnl_stream_wait(stream) == dnnl_success;
  if (threads > 1) omp_set_num_threads(threads);
  if (!hold_depth) pthread_sigmask(SIG_SETMASK, &old, NULL);
  return ok ? 0 : -1;
}

int cairn__dnnl_grow(size_t scratch) {
  dnnl_stream_t stream;
  void *buf;
  return cairn__dnnl_thread(scratch, &stream, &buf);
}

int cairn__dnnl_run(dnnl_primitive_t prim, dnnl_memory_t m[4], size_t scratch, const void *A, const void *B,
                    void *C) {
  dnnl_stream_t stream;
  void *buf;
  if (cairn__dnnl_thread(scratch, &stream, &buf) != 0) return -1;
  int ok = dnnl_memory_set_data_handle(m[0], (void *)A) == dnnl_success &&
           dnnl_memory_set_data_handle(m[1], (void *)B) == dnnl_success &&
           dnnl_memory_set_data_handle(m[2], C) == dnnl_success &&
           (!m[3] || dnnl_memory_set_data_handle(m[3], buf) == dnnl_success);
  if (ok) {
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, m[0]}, {DNNL_ARG_WEIGHTS, m[1]}, {DNNL_ARG_DST, m[2]},
                               {DNNL_ARG_SCRATCHPAD, m[3]}};
    ok = cairn__dnnl_execute(prim, stream, m[3] ? 4 : 3, args) == 0;
  }
  return ok ? 0 : -1;
}

#else /* no oneDNN in this build (or no OpenMP to keep it single-threaded) */

int cairn__dnnl_available(void) { return 0; }
void cairn__dnnl_hold_signals(void) {}
void cairn__dnnl_release_signals(void) {}
#endif
