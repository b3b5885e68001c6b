/* oneDNN matmul primitives with every dimension fixed, one per shape:
 * - cairn__dnnl_bf16_gemm, one block of a bf16 product (src bf16, weights
 *   bf16, dst f32);
 * - cairn__dnnl_sgemm_fixed, one block of an fp32 product with a
 *   transposed B (C = A·Bᵀ: a dense layer's input gradient dX = dY·Wᵀ),
 *   which gemm_dnnl.c hands over.
 *
 * Built like the run-time-dimension primitives of gemm_dnnl.c, whose
 * engine, per-thread stream and per-thread user scratchpad they share: a
 * primitive per (data type, trans_a, trans_b, M, N, K, lda, ldb, ldc,
 * accumulate), made once with the OpenMP thread count held at 1 and run on
 * the calling thread inside cairn's blocks, so the bits depend on the shape
 * alone; each thread keeps the memory objects of each primitive and points
 * them at each call's buffers, so a step after the first makes nothing.
 *
 * Why fixed dimensions. With run-time M and K, oneDNN 2.6 runs every
 * matmul on its JIT gemm ("gemm:jit"); with fixed ones it picks its brgemm
 * ("brg:avx512_core", "brg:avx512_core_bf16", "brg:avx512_core_amx_bf16").
 * bf16: on an Emerald Rapids, one thread, CPU time, 256x1024x1024 both
 * ~250 GFLOP/s, the weight gradient (Aᵀ·B, 784x1024 over K 256) gemm:jit
 * 152, brgemm 265. fp32 A·Bᵀ: on an AMD EPYC Zen 5 (one thread, CPU time,
 * best of 15; bench/RESULTS.md "fp32 A·Bᵀ on brgemm"), 256x1024x1024 jit
 * 193-203 against brgemm 215-223 GFLOP/s, 128 rows (a block at 2 threads)
 * 182 against 212, K 10 (the output layer's dX) 84 against 139; the other
 * transpose pairs were level or better on gemm:jit (NN with 10 columns:
 * jit 107, brgemm 73), so only A·Bᵀ moves. A new batch size thus makes new
 * primitives (once per shape); the shapes of a program are few.
 * A primitive whose implementation is oneDNN's reference loop ("ref:...")
 * is refused: the caller then takes its other engine for that shape. */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_impl.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

/* avx512_bf16 (cpuid 7.1 EAX bit 5) or amx_bf16 (cpuid 7.0 EDX bit 22),
 * with the OS saving the ZMM state; oneDNN asks Linux for the AMX tile
 * state itself. */
static int cpu_has_bf16(void) {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (__get_cpuid_max(0, NULL) < 7) return 0;
  unsigned lo, hi;
  __cpuid(1, a, b, c, d);
  if (!(c & (1u << 27))) return 0; /* OSXSAVE */
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & 0xE6u) != 0xE6u) return 0; /* SSE, AVX, opmask, ZMM */
  __cpuid_count(7, 0, a, b, c, d);
  const int amx = (d >> 22) & 1;
  const unsigned max_sub = a;
  int avx512bf16 = 0;
  if (max_sub >= 1) {
    __cpuid_count(7, 1, a, b, c, d);
    avx512bf16 = (a >> 5) & 1;
  }
  return amx || avx512bf16;
#else
  return 0;
#endif
}

#if defined(CAIRN_HAVE_DNNL) && defined(CAIRN_HAVE_OPENMP)
#include <omp.h>

int cairn__dnnl_bf16_available(void) {
  static int cached = -1;
  int c = __atomic_load_n(&cached, __ATOMIC_RELAXED);
  if (c < 0) {
    c = cpu_has_bf16() && cairn__dnnl_engine() != NULL;
    __atomic_store_n(&cached, c, __ATOMIC_RELAXED);
  }
  return c;
}

typedef struct {
  dnnl_memory_t m[4]; /* A, B, C, scratchpad */
} slot;

typedef struct {
  dnnl_data_type_t dt; /* of A and B: dnnl_bf16 or dnnl_f32 (C is f32) */
  int ta, tb, M, N, K, lda, ldb, ldc, acc;
  int id;
  int ok;               /* 0: oneDNN refused the key (kept so it is asked once) */
  dnnl_primitive_t prim;
  size_t scratch;
} entry;

static cairn__dnnl_cache cache = CAIRN__DNNL_CACHE_INIT;
static int n_made[2]; /* fp32 and bf16 primitives, under cache's lock */
static char impl_name[64]; /* the first bf16 primitive's */

/* Each thread's memory objects, per entry id (freed when the thread ends). */
typedef struct {
  slot *s;
  int n;
} thread_slots;
static pthread_key_t key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

static void slots_free(void *p) {
  thread_slots *t = p;
  if (!t) return;
  for (int i = 0; i < t->n; i++) cairn__dnnl_memories_free(t->s[i].m);
  free(t->s);
  free(t);
}
static void key_init(void) { (void)pthread_key_create(&key, slots_free); }

/* The primitive for e's key (every dimension fixed: brgemm, on AMX where
 * the CPU has it; oneDNN's reference loop is refused, the caller's other
 * engine being faster). */
static void make(entry *e) {
  dnnl_memory_desc_t a, b, c;
  char impl[64];
  int ok = cairn__dnnl_md(&a, e->M, e->K, e->ta, e->lda, e->dt) == dnnl_success &&
           cairn__dnnl_md(&b, e->K, e->N, e->tb, e->ldb, e->dt) == dnnl_success &&
           cairn__dnnl_md(&c, e->M, e->N, 0, e->ldc, dnnl_f32) == dnnl_success &&
           cairn__dnnl_matmul_make(&a, &b, &c, e->acc, 1, &e->prim, &e->scratch, impl, sizeof impl) == 0;
  if (ok && e->dt == dnnl_bf16 && !impl_name[0]) snprintf(impl_name, sizeof impl_name, "%s", impl);
  e->ok = ok;
  if (ok) n_made[e->dt == dnnl_bf16]++;
}

static int same_key(const void *item, const void *wanted) {
  const entry *e = item, *k = wanted;
  return e->dt == k->dt && e->ta == k->ta && e->tb == k->tb && e->M == k->M && e->N == k->N && e->K == k->K && e->lda == k->lda &&
         e->ldb == k->ldb && e->ldc == k->ldc && e->acc == k->acc;
}

/* A new entry for the key, made or refused (kept either way, so that
 * oneDNN is asked once); NULL only when out of memory. */
static void *make_entry(const void *wanted, int id) {
  entry *e = malloc(sizeof *e);
  if (!e) return NULL;
  *e = *(const entry *)wanted;
  e->id = id;
  make(e);
  return e;
}

/* The entry for the key, made (or refused) on first use; NULL only when
 * out of memory. */
static entry *lookup(dnnl_data_type_t dt, int ta, int tb, int M, int N, int K, int lda, int ldb, int ldc, int acc) {
  entry k = {.dt = dt, .ta = ta, .tb = tb, .M = M, .N = N, .K = K, .lda = lda, .ldb = ldb, .ldc = ldc, .acc = acc};
  return cairn__dnnl_cache_get(&cache, &k, same_key, make_entry);
}

static int slot_make(slot *s, const entry *e) {
  dnnl_memory_desc_t a, b, c;
  int ok = cairn__dnnl_md(&a, e->M, e->K, e->ta, e->lda, e->dt) == dnnl_success &&
           cairn__dnnl_md(&b, e->K, e->N, e->tb, e->ldb, e->dt) == dnnl_success &&
           cairn__dnnl_md(&c, e->M, e->N, 0, e->ldc, dnnl_f32) == dnnl_success &&
           cairn__dnnl_memories(s->m, &a, &b, &c, e->scratch) == 0;
  if (!ok) {
    cairn__dnnl_memories_free(s->m);
    return -1;
  }
  return 0;
}

/* The calling thread's memory objects for e, made at its first use. */
static slot *slot_for(entry *e) {
  pthread_once(&key_once, key_init);
  thread_slots *t = pthread_getspecific(key);
  if (!t) {
    if (!(t = calloc(1, sizeof *t))) return NULL;
    if (pthread_setspecific(key, t) != 0) {
      free(t);
      return NULL;
    }
  }
  if (e->id >= t->n) {
    const int n = e->id + 16;
    slot *grown = realloc(t->s, (size_t)n * sizeof *grown);
    if (!grown) return NULL;
    memset(grown + t->n, 0, (size_t)(n - t->n) * sizeof *grown);
    t->s = grown, t->n = n;
  }
  slot *s = &t->s[e->id];
  if (!s->m[0] && slot_make(s, e) != 0) return NULL;
  return s;
}

int cairn__dnnl_bf16_ready(int trans_a, int trans_b, int M, int N, int K, int lda, int ldb, int ldc, int accumulate) {
  if (!cairn__dnnl_bf16_available()) return 0;
  entry *e = lookup(dnnl_bf16, !!trans_a, !!trans_b, M, N, K, lda, ldb, ldc, !!accumulate);
  return e && e->ok;
}

/* One run of e's primitive on A, B, C on the calling thread. 0 or -1. */
static int run(entry *e, const void *A, const void *B, float *C) {
  if (cairn__dnnl_grow(e->scratch) != 0) return -1;
  slot *sl = slot_for(e);
  return sl ? cairn__dnnl_run(e->prim, sl->m, e->scratch, A, B, C) : -1;
}

/* One block on the primitive of its key (A and B of type dt), made on
 * first use; 0, or -1 when oneDNN cannot run it. */
static int fixed_gemm(dnnl_data_type_t dt, int ta, int tb, int M, int N, int K, const void *A, int lda,
                      const void *B, int ldb, int acc, float *C, int ldc) {
  if (M <= 0 || N <= 0) return 0;
  if (dt == dnnl_bf16 ? !cairn__dnnl_bf16_available() : !cairn__dnnl_engine()) return -1;
  entry *e = lookup(dt, !!ta, !!tb, M, N, K, lda, ldb, ldc, !!acc);
  return e && e->ok ? run(e, A, B, C) : -1;
}

int cairn__dnnl_bf16_gemm(int trans_a, int trans_b, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B,
                          int ldb, int accumulate, float *C, int ldc) {
  return fixed_gemm(dnnl_bf16, trans_a, trans_b, M, N, K, A, lda, B, ldb, accumulate, C, ldc);
}

int cairn__dnnl_sgemm_fixed(int trans_a, int trans_b, int M, int N, int K, const float *A, int lda, const float *B,
                            int ldb, int accumulate, float *C, int ldc) {
  return fixed_gemm(dnnl_f32, trans_a, trans_b, M, N, K, A, lda, B, ldb, accumulate, C, ldc);
}

int cairn__dnnl_fixed_primitive_count(int bf16) {
  pthread_mutex_lock(&cache.lock);
  int n = n_made[!!bf16];
  pthread_mutex_unlock(&cache.lock);
  return n;
}

const char *cairn__dnnl_bf16_impl(void) {
  pthread_mutex_lock(&cache.lock);
  const char *s = impl_name;
  pthread_mutex_unlock(&cache.lock);
  return s;
}

#else /* no oneDNN in this build (or no OpenMP to keep it single-threaded) */

int cairn__dnnl_bf16_available(void) {
  (void)cpu_has_bf16;
  return 0;
}
int cairn__dnnl_bf16_ready(int trans_a, int trans_b, int M, int N, int K, int lda, int ldb, int ldc, int accumulate) {
  (void)trans_a, (void)trans_b, (void)M, (void)N, (void)K, (void)lda, (void)ldb, (void)ldc, (void)accumulate;
  return 0;
}
int cairn__dnnl_bf16_gemm(int trans_a, int trans_b, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B,
                          int ldb, int accumulate, float *C, int ldc) {
  (void)trans_a, (void)trans_b, (void)M, (void)N, (void)K, (void)A, (void)lda, (void)B, (void)ldb, (void)accumulate,
      (void)C, (void)ldc;
  return -1;
}
int cairn__dnnl_sgemm_fixed(int trans_a, int trans_b, int M, int N, int K, const float *A, int lda, const float *B,
                            int ldb, int accumulate, float *C, int ldc) {
  (void)trans_a, (void)trans_b, (void)M, (void)N, (void)K, (void)A, (void)lda, (void)B, (void)ldb, (void)accumulate,
      (void)C, (void)ldc;
  return -1;
}
int cairn__dnnl_fixed_primitive_count(int bf16) {
  (void)bf16;
  return 0;
}
const char *cairn__dnnl_bf16_impl(void) { return ""; }
#endif
