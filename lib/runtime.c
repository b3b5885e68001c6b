/* Version, ISA report and the one thread budget shared with OpenBLAS. */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <cblas.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#ifdef CAIRN_HAVE_OPENMP
#include <omp.h>
#endif

#include "cairn/runtime.h"
#include "gemm_impl.h"
#include "kernels/kernels.h"

const char *cairn_version(void) { return PACKAGE_VERSION; }

const char *cairn_version_string(void) { return PACKAGE_VERSION; }

const char *cairn_isa_name(void) { return cairn__kernels()->isa; }

static int budget = 1;
static pthread_once_t budget_once = PTHREAD_ONCE_INIT;

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
  int n = cairn__env_threads("CAIRN_NUM_THREADS");
  if (!n) n = cairn__env_threads("OMP_NUM_THREADS");
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

/* OpenBLAS cores without AVX2 kernels. Debian's OpenBLAS 0.3.21 does not
 * know CPUs newer than itself (Intel Emerald Rapids, family 6 model 207,
 * for one) and falls back to Prescott: SSE3 kernels, measured at a fifth of
 * SkylakeX's speed on such a CPU (sgemm 32 vs 150-160 GFLOP/s per core). */
static const char *const weak_cores[] = {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom",
                                         "Katmai", "Coppermine", "Northwood", "Banias", "Opteron",
                                         "Opteron(SSE3)", "Barcelona", "Bobcat", "Sandybridge", "Bulldozer",
                                         "Piledriver", "Steamroller", "Unknown"};

const char *cairn_blas_coretype_advice(void) {
  const char *set = getenv("OPENBLAS_CORETYPE");
  if (set && *set) return NULL; /* the user chose */
#ifdef HAVE_OPENBLAS_GET_CORENAME
  const char *core = openblas_get_corename();
  int weak = 0;
  for (size_t i = 0; i < sizeof weak_cores / sizeof weak_cores[0]; i++)
    if (core && strcasecmp(core, weak_cores[i]) == 0) weak = 1;
  if (!weak) return NULL;
  if (cairn__cpu_has_avx512()) return "SkylakeX";
  if (cairn__cpu_has_avx2_fma()) return "Haswell";
#endif
  return NULL;
}

int cairn_blas_coretype_fix(char **argv) {
  const char *advice = cairn_blas_coretype_advice();
  if (!advice || !argv || !argv[0]) return 0;
  const char *off = getenv("CAIRN_BLAS_REEXEC");
  if (off && strcmp(off, "0") == 0) return 0;
#ifdef HAVE_OPENBLAS_GET_CORENAME
  fprintf(stderr, "%s: OpenBLAS chose its %s kernels for this CPU; re-running with OPENBLAS_CORETYPE=%s\n",
          argv[0], openblas_get_corename(), advice);
#endif
  /* OpenBLAS reads OPENBLAS_CORETYPE once, when it is loaded: only a new
   * image of the program can use it. The variable stays set, so the new
   * image does not come back here. */
  if (setenv("OPENBLAS_CORETYPE", advice, 1) != 0) return -1;
  execv("/proc/self/exe", argv);
  unsetenv("OPENBLAS_CORETYPE"); /* exec failed: go on with the chosen core */
  return -1;
}

int cairn_mpi_available(void) {
#ifdef CAIRN_HAVE_MPI
  return 1;
#else
  return 0;
#endif
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
  /* CAIRN_ISA naming an ISA this CPU or build lacks: the next best ran */
  const char *fb = cairn__kernels_fallback();
  snprintf(buf, len,
           "cairn %s; isa %s (cpu avx2+fma: %s, avx512: %s%s%s%s); openmp %s; threads %d; blas OpenBLAS core %s, "
           "parallel %s",
           cairn_version_string(), isa, cairn__cpu_has_avx2_fma() ? "yes" : "no",
           cairn__cpu_has_avx512() ? "yes" : "no", want && *want ? ", CAIRN_ISA=" : "", want && *want ? want : "",
           fb ? " not available, next best" : "", omp, cairn_get_num_threads(), core, par);
  size_t used = strlen(buf);
  /* the engine cairn's GEMM blocks run on, and why (gemm.c) */
  const char *asked = getenv("CAIRN_GEMM_ENGINE");
  const int on_dnnl = cairn__gemm_engine() == CAIRN__GEMM_ONEDNN;
  char why[96];
  if (asked && *asked)
    snprintf(why, sizeof why, "CAIRN_GEMM_ENGINE=%.40s%s", asked,
             !strcmp(asked, "onednn") && !on_dnnl ? ", no oneDNN in this build" : "");
  else
    snprintf(why, sizeof why, "cpu avx512: %s%s", cairn__cpu_has_avx512() ? "yes" : "no",
             cairn__dnnl_available() ? "" : ", no oneDNN in this build");
  if (used + 1 < len)
    snprintf(buf + used, len - used, "; gemm engine %s (%s)", cairn_gemm_engine_name(), why);
  used = strlen(buf);
  if (on_dnnl && used + 1 < len) snprintf(buf + used, len - used, "; onednn %s", cairn__dnnl_impl());
  used = strlen(buf);
  /* how GEMM rows are cut over the threads: this decides which bits a
   * result has (gemm.c) */
  const int cut = on_dnnl ? 0 : cairn__gemm_row_cut(); /* oneDNN: probed per shape */
  if (used + 1 < len) {
    if (on_dnnl)
      snprintf(buf + used, len - used, "; gemm rows (X*W: columns) follow the threads where oneDNN keeps its bits "
                                       "(probed per shape), fixed blocks elsewhere");
    else if (cut)
      snprintf(buf + used, len - used, "; gemm rows cut on multiples of %d (the bits of one call)", cut);
    else
      snprintf(buf + used, len - used, "; gemm in fixed blocks");
  }
  used = strlen(buf);
  /* the engine of bf16 models' products (gemm_bf16.c) */
  char bf[160];
  if (used + 1 < len) snprintf(buf + used, len - used, "; bf16 %s", cairn__bf16_engine_info(bf, sizeof bf));
  used = strlen(buf);
  const char *advice = cairn_blas_coretype_advice();
  if (advice && used + 1 < len)
    snprintf(buf + used, len - used, " (slow for this CPU: set OPENBLAS_CORETYPE=%s)", advice);
  return buf;
}
