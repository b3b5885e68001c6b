/* Version, ISA report and the one thread budget shared with OpenBLAS. */
#include "internal.h"

#include <cblas.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef CAIRN_HAVE_OPENMP
#include <omp.h>
#endif

#include "cairn/runtime.h"
#include "kernels/kernels.h"

const char *cairn_version_string(void) { return PACKAGE_VERSION; }

const char *cairn_isa_name(void) { return cairn__kernels()->isa; }

static int budget = 1;
static pthread_once_t budget_once = PTHREAD_ONCE_INIT;

static int env_threads(const char *name) {
  const char *v = getenv(name);
  if (!v || !*v) return 0;
  char *end;
  long n = strtol(v, &end, 10);
  return (*end == '\0' || *end == ',') && n >= 1 && n <= 4096 ? (int)n : 0;
}

/* Pushes n into both pools. cairn's loops use n OpenMP threads, and its
 * GEMMs run single-threaded BLAS on shape-determined blocks inside those
 * loops (gemm.c). Debian's OpenMP flavour of OpenBLAS shares libgomp's pool
 * and stays single-threaded inside a parallel region by itself; a pthreads
 * OpenBLAS would start its own pool there, so it is held to one thread. In a
 * serial cairn build the budget goes to BLAS alone. */
static void apply_budget(int n) {
  budget = n;
  int blas_threads = n;
#ifdef CAIRN_HAVE_OPENMP
  omp_set_num_threads(n);
#ifdef HAVE_OPENBLAS_GET_PARALLEL
  if (openblas_get_parallel() == 1) blas_threads = 1;
#endif
#endif
#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
  openblas_set_num_threads(blas_threads);
#else
  (void)blas_threads;
#endif
}

static void budget_init(void) {
  int n = env_threads("CAIRN_NUM_THREADS");
  if (!n) n = env_threads("OMP_NUM_THREADS");
#ifdef CAIRN_HAVE_OPENMP
  if (!n) n = omp_get_num_procs();
#endif
  apply_budget(n > 0 ? n : 1);
}

int cairn_get_num_threads(void) {
  pthread_once(&budget_once, budget_init);
  return budget;
}

cairn_status cairn_set_num_threads(int n) {
  if (n < 1) return cairn__fail(CAIRN_E_INVALID, "set_num_threads: %d threads; need at least 1", n);
  pthread_once(&budget_once, budget_init);
  apply_budget(n);
  return CAIRN_OK;
}

char *cairn_runtime_info(char *buf, size_t len) {
  if (!buf || len == 0) return buf;
  const char *isa = cairn_isa_name();
  const char *want = getenv("CAIRN_ISA");
  const char *core = "unknown", *par = "unknown";
#ifdef HAVE_OPENBLAS_GET_CORENAME
  core = openblas_get_corename();
#endif
#ifdef HAVE_OPENBLAS_GET_PARALLEL
  switch (openblas_get_parallel()) {
    case 0: par = "serial"; break;
    case 1: par = "pthreads"; break;
    case 2: par = "openmp"; break;
  }
#endif
#ifdef CAIRN_HAVE_OPENMP
  const char *omp = "yes";
#else
  const char *omp = "no";
#endif
  snprintf(buf, len,
           "cairn %s; isa %s (cpu avx2+fma: %s%s%s); openmp %s; threads %d; blas OpenBLAS core %s, "
           "parallel %s",
           cairn_version_string(), isa, cairn__cpu_has_avx2_fma() ? "yes" : "no",
           want ? ", CAIRN_ISA=" : "", want ? want : "", omp, cairn_get_num_threads(), core, par);
  return buf;
}
