/* cairn__dnnl_sgemm: one block of cairn__sgemm on a oneDNN matmul primitive.
 *
 * The primitives are made once per shape and kept for the life of the
 * process, so that after the first step nothing is made again: the key is
 * (trans_a, trans_b, N, lda, ldb, ldc, accumulate) and M and K are runtime
 * dimensions (DNNL_RUNTIME_DIM_VAL), because they carry the batch size
 * (rows of X·W and of dY·Wᵀ, the sum of Xᵀ·dY): a smaller last batch, or
 * the row blocks of another thread count, reuse the primitive.
 *
 * Which implementation. With run-time M and K, oneDNN 2.6 runs every
 * matmul of the MLP on its JIT sgemm ("gemm:jit"), on AVX2 and on AVX-512
 * alike (ONEDNN_VERBOSE=1; on the Emerald Rapids it dispatches to its
 * AVX-512 kernels, isa avx512_core_amx). With M and K fixed it would pick
 * its brgemm matmul ("brg:avx512_core"), which was not faster there for
 * A·B and Aᵀ·B: one call over 256x1024x784 NN 108 vs 108 GFLOP/s,
 * 784x1024x256 TN 96-122 vs 110-143, 1024x1024x784 NN 95-121 vs 102-140
 * (bench/RESULTS.md, "oneDNN on AVX-512"), nor on a Zen 5, and it needs a
 * primitive per batch size and block length. So those keep the run-time
 * dimensions. A·Bᵀ (a layer's dX) is 10-65 % faster on brgemm on a Zen 5
 * and goes to the fixed-dimension primitives of gemm_dnnl_fixed.c.
 *
 * Threads. oneDNN 2.6 (Debian's libdnnl, OpenMP runtime) decides how many
 * threads a product uses from omp_get_max_threads() of the calling thread,
 * and runs single-threaded inside an active OpenMP parallel region. A
 * split changes the bits (measured: a 64x64 product with K = 65536, run
 * with 2 threads outside a parallel region, gives other bits than with 1).
 * So every primitive is made and run with the calling thread's OpenMP
 * thread count held at 1; cairn's own row and column blocks are the only
 * parallelism, as with the BLAS. Where those blocks may follow the thread
 * count is decided per shape (cairn__dnnl_cuts_keep_bits, below).
 *
 * Memory. Primitives are made with a user scratchpad
 * (dnnl_scratchpad_mode_user): each thread that runs blocks owns one
 * buffer, grown to the largest size a primitive asks for and kept until the
 * thread ends. Each thread also keeps the memory objects (A, B, C,
 * scratchpad) of each primitive at the (M, K) it last ran, SLOTS per
 * primitive, and points them at each call's buffers. So a step after the
 * first makes nothing of cairn's. What is left is oneDNN's own: it builds
 * the argument list of each execution on the heap and frees it before it
 * returns (4 small allocations per block), its JIT sgemm asks for no
 * scratchpad and allocates its packing buffer (74 KB to 2 MB for the MLP's
 * shapes, aligned) inside each call and frees it before it returns, and
 * its C API cannot give a memory object other dimensions, so the first
 * step at a new batch size replaces the memory objects of a slot (3 small
 * ones per block). The heap in use is the same from the fourth step on
 * (glibc's per-thread cache first fills with the slack of the aligned
 * buffers; tests/test_model.c). */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_impl.h"

#if defined(CAIRN_HAVE_DNNL) && defined(CAIRN_HAVE_OPENMP)
#include <dnnl.h>
#include <omp.h>

/* The memory objects (A, B, C, scratchpad) of one primitive at one (M, K),
 * kept by a thread and pointed at each call's buffers: making them costs a
 * few allocations per call otherwise. */
typedef struct {
  int M, K;
  unsigned used;
  dnnl_memory_t m[4];
} slot;

/* A thread's slots: SLOTS per primitive. A shape's blocks have at most two
 * lengths, and a program alternates between two batch sizes (training and
 * evaluation, or a last short batch), so four (M, K) pairs are kept before
 * one is made again. With two, alternating batches replaced memory objects
 * at every switch (seen in a BLIS build, whose blocks are fixed). */
enum { SLOTS = 4 };
typedef struct {
  slot (*slots)[SLOTS];
  int n_slots;
  unsigned clock;
} thread_slots;
static pthread_key_t slots_key;
static pthread_once_t slots_once = PTHREAD_ONCE_INIT;

static void slot_clear(slot *s) {
  cairn__dnnl_memories_free(s->m);
  memset(s, 0, sizeof *s);
}

static void slots_free(void *p) {
  thread_slots *t = p;
  if (!t) return;
  for (int i = 0; i < t->n_slots; i++)
    for (int j = 0; j < SLOTS; j++) slot_clear(&t->slots[i][j]);
  free(t->slots);
  free(t);
}
static void slots_key_init(void) { (void)pthread_key_create(&slots_key, slots_free); }

static thread_slots *this_thread(void) {
  pthread_once(&slots_once, slots_key_init);
  thread_slots *t = pthread_getspecific(slots_key);
  if (!t && (t = calloc(1, sizeof *t)) != NULL && pthread_setspecific(slots_key, t) != 0) {
    free(t);
    t = NULL;
  }
  return t;
}

typedef struct {
  int ta, tb, N, lda, ldb, ldc, acc;
  int id; /* index in cache[], and in each thread's slots */
  dnnl_primitive_t prim;
  size_t scratch;
} entry;

static cairn__dnnl_cache cache = CAIRN__DNNL_CACHE_INIT;

static dnnl_status_t md_init(dnnl_memory_desc_t *md, int64_t rows, int64_t cols, int trans, int ld) {
  return cairn__dnnl_md(md, rows, cols, trans, ld, dnnl_f32);
}

/* The primitive for e's key (M and K given at run time). */
static int make(entry *e) {
  const int64_t RT = DNNL_RUNTIME_DIM_VAL;
  dnnl_memory_desc_t a, b, c;
  if (md_init(&a, RT, RT, e->ta, e->lda) != dnnl_success || md_init(&b, RT, e->N, e->tb, e->ldb) != dnnl_success ||
      md_init(&c, RT, e->N, 0, e->ldc) != dnnl_success)
    return -1;
  return cairn__dnnl_matmul_make(&a, &b, &c, e->acc, 0, &e->prim, &e->scratch, NULL, 0);
}

static int same_key(const void *item, const void *key) {
  const entry *e = item, *k = key;
  return e->ta == k->ta && e->tb == k->tb && e->N == k->N && e->lda == k->lda && e->ldb == k->ldb &&
         e->ldc == k->ldc && e->acc == k->acc;
}

/* A new entry for the key with its primitive; NULL when out of memory or
 * when oneDNN refuses the shape (asked again next time). */
static void *make_entry(const void *key, int id) {
  entry *e = malloc(sizeof *e);
  if (!e) return NULL;
  *e = *(const entry *)key;
  e->id = id;
  if (make(e) == 0) return e;
  free(e);
  return NULL;
}

/* The entry for the key, made on first use; NULL when out of memory or
 * when oneDNN refuses the shape. Entries are never freed. */
static entry *lookup(int ta, int tb, int N, int lda, int ldb, int ldc, int acc) {
  entry k = {.ta = ta, .tb = tb, .N = N, .lda = lda, .ldb = ldb, .ldc = ldc, .acc = acc};
  return cairn__dnnl_cache_get(&cache, &k, same_key, make_entry);
}

/* Memory objects for e at (M, K), with no buffers yet. */
static int slot_make(slot *s, const entry *e, int M, int N, int K, int lda, int ldb, int ldc) {
  slot_clear(s);
  dnnl_memory_desc_t a, b, c;
  int ok = md_init(&a, M, K, e->ta, lda) == dnnl_success && md_init(&b, K, N, e->tb, ldb) == dnnl_success &&
           md_init(&c, M, N, 0, ldc) == dnnl_success && cairn__dnnl_memories(s->m, &a, &b, &c, e->scratch) == 0;
  if (!ok) {
    slot_clear(s);
    return -1;
  }
  s->M = M, s->K = K;
  return 0;
}

/* The thread's slot for e at (M, K): the one that has it, else the least
 * recently used of e's SLOTS, made again. NULL when out of memory. */
static slot *slot_for(thread_slots *t, entry *e, int M, int N, int K, int lda, int ldb, int ldc) {
  if (e->id >= t->n_slots) {
    const int n = e->id + 8;
    slot(*grown)[SLOTS] = realloc(t->slots, (size_t)n * sizeof *grown);
    if (!grown) return NULL;
    memset(grown + t->n_slots, 0, (size_t)(n - t->n_slots) * sizeof *grown);
    t->slots = grown, t->n_slots = n;
  }
  slot *all = t->slots[e->id], *s = NULL;
  for (int i = 0; i < SLOTS && !s; i++)
    if (all[i].m[0] && all[i].M == M && all[i].K == K) s = &all[i];
  if (!s) {
    /* Every slot is made at the first use, so that later a new (M, K)
     * always replaces one, at the same allocation sizes, and the heap in
     * use stays what it was after the first step. */
    const int first = !all[0].m[0];
    s = &all[0];
    for (int i = 1; i < SLOTS; i++)
      if (all[i].used < s->used) s = &all[i];
    for (int i = 0; i < SLOTS; i++)
      if ((first || &all[i] == s) && slot_make(&all[i], e, M, N, K, lda, ldb, ldc) != 0) {
        for (int j = 0; j < SLOTS; j++) slot_clear(&all[j]);
        return NULL;
      }
  }
  s->used = ++t->clock;
  return s;
}

/* Rows (or columns) that follow the thread count. oneDNN's bits change
 * where C's rows are cut for some shapes and not for others: its JIT sgemm
 * chooses between a packing and a no-packing driver, and between kernels,
 * from M, N, K and the leading dimensions (on AVX-512, e.g., NN
 * 256x1024x784 keeps its bits when cut at 128 rows but not below, NT
 * 256x784x1024 at any multiple of 16, TN 784x1024x256 anywhere; measured
 * on an Emerald Rapids). Columns likewise: on a Zen 5, gemm:jit's NN and
 * TN products of the MLP keep their bits cut at any multiple of 16
 * columns, brgemm's A·Bᵀ 256x1024x1024 at none. No API says which, so
 * cairn asks the library: once per shape (transposes, M, N, K, leading
 * dimensions, accumulate, rows or columns) it computes a product
 * of made-up values in one call and in the blocks that every thread count
 * from 2 to max_nb would cut (ceil(M/t) rows, or ceil(N/t) columns,
 * rounded up to `width`, as cairn__gemm_plan cuts them) and compares the
 * bits. Where all agree, cairn__gemm_plan lets the cut follow the thread
 * count (one call at 1 thread: one packing of the shared operand instead
 * of two); elsewhere it keeps the fixed blocks. The answer depends on the
 * shape and the library alone, so two runs agree. The first use of a
 * shape pays the probe: max_nb products of its size, and its buffers
 * (shapes whose copies would pass 256 MB keep the fixed blocks). */
typedef struct {
  int cols, ta, tb, M, N, K, lda, ldb, ldc, acc, max_nb, width, ok;
} probe_rec;
static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;
static probe_rec *probes;
static int n_probes, cap_probes;

static float made_up(size_t i) {
  uint32_t u = (uint32_t)i * 2654435761u;
  u ^= u >> 15;
  return (float)(u % 2003u) / 997.0f - 1.0f;
}

/* The block [lo, hi) of r's cut dimension (rows, or columns with cols) as
 * one call. */
static int probe_block(const probe_rec *r, const float *A, const float *B, float *C, int lo, int hi) {
  const int ta = r->ta, tb = r->tb;
  if (r->cols) {
    const float *Bb = tb ? B + (size_t)lo * r->ldb : B + lo;
    return cairn__dnnl_sgemm(ta, tb, r->M, hi - lo, r->K, A, r->lda, Bb, r->ldb, r->acc, C + lo, r->ldc);
  }
  const float *Ab = ta ? A + lo : A + (size_t)lo * r->lda;
  return cairn__dnnl_sgemm(ta, tb, hi - lo, r->N, r->K, Ab, r->lda, B, r->ldb, r->acc, C + (size_t)lo * r->ldc,
                           r->ldc);
}

static int probe(const probe_rec *r) {
  const int M = r->M, N = r->N, d = r->cols ? N : M;
  const size_t na = (size_t)(r->ta ? r->K : M) * r->lda, nb = (size_t)(r->tb ? N : r->K) * r->ldb,
               nc = (size_t)M * r->ldc;
  /* a product whose copies would take more than 256 MB keeps the fixed
   * blocks rather than double its memory once (a rule of the shape too) */
  if ((na + nb + 3 * nc) * sizeof(float) > ((size_t)256 << 20)) return 0;
  float *A = malloc(na * sizeof *A), *B = malloc(nb * sizeof *B), *C0 = malloc(nc * sizeof *C0),
        *C1 = malloc(nc * sizeof *C1), *C2 = malloc(nc * sizeof *C2);
  int ok = A && B && C0 && C1 && C2;
  if (ok) {
    for (size_t i = 0; i < na; i++) A[i] = made_up(i);
    for (size_t i = 0; i < nb; i++) B[i] = made_up(i + na);
    for (size_t i = 0; i < nc; i++) C0[i] = made_up(i + 7 * nc); /* what C += A·B adds to */
    memcpy(C1, C0, nc * sizeof *C1);
    ok = probe_block(r, A, B, C1, 0, d) == 0;
  }
  for (int t = 2; ok && t <= r->max_nb; t++) {
    const int len = ((d + t - 1) / t + r->width - 1) / r->width * r->width;
    memcpy(C2, C0, nc * sizeof *C2);
    for (int lo = 0; ok && lo < d; lo += len) ok = probe_block(r, A, B, C2, lo, lo + len < d ? lo + len : d) == 0;
    for (int i = 0; ok && i < M; i++)
      ok = !memcmp(C1 + (size_t)i * r->ldc, C2 + (size_t)i * r->ldc, (size_t)N * sizeof *C1);
  }
  free(A), free(B), free(C0), free(C1), free(C2);
  return ok;
}

static int same_probe(const probe_rec *p, const probe_rec *k) {
  return p->cols == k->cols && p->ta == k->ta && p->tb == k->tb && p->M == k->M && p->N == k->N && p->K == k->K &&
         p->lda == k->lda && p->ldb == k->ldb && p->ldc == k->ldc && p->acc == k->acc && p->max_nb == k->max_nb &&
         p->width == k->width;
}

int cairn__dnnl_cuts_keep_bits(int cols, int trans_a, int trans_b, int M, int N, int K, int lda, int ldb, int ldc,
                               int accumulate, int max_nb, int width) {
  if (max_nb < 2 || M <= 0 || N <= 0 || !cairn__dnnl_available()) return max_nb < 2;
  const probe_rec key = {.cols = !!cols, .ta = !!trans_a, .tb = !!trans_b, .M = M, .N = N, .K = K, .lda = lda,
                         .ldb = ldb, .ldc = ldc, .acc = !!accumulate, .max_nb = max_nb, .width = width};
  pthread_mutex_lock(&probe_lock);
  for (int i = 0; i < n_probes; i++)
    if (same_probe(&probes[i], &key)) {
      const int ok = probes[i].ok;
      pthread_mutex_unlock(&probe_lock);
      return ok;
    }
  probe_rec r = key;
  r.ok = probe(&r);
  /* remember it; out of memory, the answer is found again next time (the
   * same answer: it depends on the shape alone) */
  if (n_probes == cap_probes) {
    const int cap = cap_probes ? 2 * cap_probes : 32;
    probe_rec *grown = realloc(probes, (size_t)cap * sizeof *grown);
    if (grown) probes = grown, cap_probes = cap;
  }
  if (n_probes < cap_probes) probes[n_probes++] = r;
  pthread_mutex_unlock(&probe_lock);
  return r.ok;
}

/* What oneDNN runs cairn's products with, for cairn-info and the benches'
 * context: the implementation it picks for a matmul made as cairn makes
 * them (run-time M and K, one thread, user scratchpad; the forward product
 * of a 1024-wide layer), the one of the fixed-dimension A·Bᵀ, and the ISA
 * it dispatches to. Measured on an Intel Emerald Rapids and an AMD Zen 5:
 * "gemm:jit" (its JIT sgemm, AVX-512 kernels) for the run-time dimensions,
 * "brg:avx512_core" for the fixed ones. */
static char impl_name[160];
static pthread_once_t impl_once = PTHREAD_ONCE_INIT;
static const char *isa_name(dnnl_cpu_isa_t isa) {
  switch (isa) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}
static void impl_init(void) {
  const int64_t RT = DNNL_RUNTIME_DIM_VAL;
  dnnl_memory_desc_t a, b, c;
  char impl[64] = "unknown", nt[64] = "unknown";
  if (md_init(&a, RT, RT, 0, 1024) != dnnl_success || md_init(&b, RT, 1024, 0, 1024) != dnnl_success ||
      md_init(&c, RT, 1024, 0, 1024) != dnnl_success ||
      cairn__dnnl_matmul_make(&a, &b, &c, 0, 0, NULL, NULL, impl, sizeof impl) != 0)
    snprintf(impl, sizeof impl, "unknown");
  /* and the fixed-dimension A·Bᵀ of gemm_dnnl_fixed.c, a 1024-wide layer's dX at batch 256 */
  if (md_init(&a, 256, 1024, 0, 1024) != dnnl_success || md_init(&b, 1024, 1024, 1, 1024) != dnnl_success ||
      md_init(&c, 256, 1024, 0, 1024) != dnnl_success ||
      cairn__dnnl_matmul_make(&a, &b, &c, 0, 1, NULL, NULL, nt, sizeof nt) != 0)
    snprintf(nt, sizeof nt, "not available (run-time dimensions)");
  snprintf(impl_name, sizeof impl_name, "%.40s, A*B^T %.40s, isa %s", impl, nt, isa_name(dnnl_get_effective_cpu_isa()));
}

const char *cairn__dnnl_impl(void) {
  if (!cairn__dnnl_available()) return "none";
  pthread_once(&impl_once, impl_init);
  return impl_name;
}

int cairn__dnnl_primitive_count(void) { return cairn__dnnl_cache_count(&cache); }

int cairn__dnnl_sgemm(int trans_a, int trans_b, int M, int N, int K, const float *A, int lda, const float *B,
                      int ldb, int accumulate, float *C, int ldc) {
  if (M <= 0 || N <= 0) return 0;
  if (!cairn__dnnl_available()) return -1;
  /* A·Bᵀ (a layer's dX = dY·Wᵀ): every dimension fixed, on brgemm
   * (gemm_dnnl_fixed.c says why); a shape it refuses runs below. The
   * choice depends on the shape alone, so the bits do too. */
  if (trans_b && !trans_a &&
      cairn__dnnl_sgemm_fixed(trans_a, trans_b, M, N, K, A, lda, B, ldb, accumulate, C, ldc) == 0)
    return 0;
  entry *e = lookup(!!trans_a, !!trans_b, N, lda, ldb, ldc, !!accumulate);
  if (!e) return -1;
  thread_slots *t = this_thread();
  slot *sl = t && cairn__dnnl_grow(e->scratch) == 0 ? slot_for(t, e, M, N, K, lda, ldb, ldc) : NULL;
  return sl ? cairn__dnnl_run(e->prim, sl->m, e->scratch, A, B, C) : -1;
}

#else /* no oneDNN in this build (or no OpenMP to keep it single-threaded) */

int cairn__dnnl_primitive_count(void) { return 0; }

const char *cairn__dnnl_impl(void) { return "none"; }

int cairn__dnnl_cuts_keep_bits(int cols, int trans_a, int trans_b, int M, int N, int K, int lda, int ldb, int ldc,
                               int accumulate, int max_nb, int width) {
  (void)cols, (void)trans_a, (void)trans_b, (void)M, (void)N, (void)K, (void)lda, (void)ldb, (void)ldc,
      (void)accumulate, (void)width;
  return max_nb < 2;
}

int cairn__dnnl_sgemm(int trans_a, int trans_b, int M, int N, int K, const float *A, int lda, const float *B,
                      int ldb, int accumulate, float *C, int ldc) {
  (void)trans_a, (void)trans_b, (void)M, (void)N, (void)K, (void)A, (void)lda, (void)B, (void)ldb,
      (void)accumulate, (void)C, (void)ldc;
  return -1;
}
#endif
