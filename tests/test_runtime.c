/* Version, ISA selection and the thread budget. */
#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cairn.h>

#include "internal.h"
#include "gemm_impl.h"
#include "kernels/kernels.h"

TestSuite(runtime, .timeout = 30);

Test(runtime, version_matches_configure) {
  cr_assert_str_eq(cairn_version_string(), PACKAGE_VERSION);
}

/* The header's macros (cairn/build.h), split from AC_INIT's version, agree
 * with each other, with the string and with the library's own answer. */
Test(runtime, version_macros_match_string_and_library) {
  char buf[64];
  snprintf(buf, sizeof buf, "%d.%d.%d", CAIRN_VERSION_MAJOR, CAIRN_VERSION_MINOR,
           CAIRN_VERSION_PATCH);
  cr_assert_str_eq(buf, CAIRN_VERSION_STRING);
  cr_assert_str_eq(cairn_version(), CAIRN_VERSION_STRING);
  cr_assert_str_eq(cairn_version(), cairn_version_string());
  cr_assert_eq(CAIRN_VERSION_NUMBER,
               CAIRN_VERSION_MAJOR * 10000 + CAIRN_VERSION_MINOR * 100 + CAIRN_VERSION_PATCH);
  cr_assert(CAIRN_VERSION_NUMBER >= CAIRN_VERSION_ENCODE(0, 1, 0));
}

/* The numeric knobs (CAIRN_GEMM_BLOCKS, CAIRN_STREAM_MIN_BYTES) take a
 * whole number in range and fall back to their default on anything else. */
Test(runtime, env_long_takes_only_whole_numbers_in_range) {
  const char *name = "CAIRN_TEST_ENV_LONG";
  unsetenv(name);
  cr_assert_eq(cairn__env_long(name, 7, 1, 100), 7);
  const struct { const char *v; long want; } cases[] = {
      {"", 7}, {"42", 42}, {"1", 1}, {"100", 100}, {"0", 7}, {"101", 7}, {"-3", 7}, {"abc", 7},
      {"12abc", 7}, {"4096 ", 7}, {"99999999999999999999999", 7}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cr_assert_eq(setenv(name, cases[i].v, 1), 0);
    cr_assert_eq(cairn__env_long(name, 7, 1, 100), cases[i].want, "'%s'", cases[i].v);
  }
  unsetenv(name);
}

/* The best table this build and CPU have, at most the one CAIRN_ISA names
 * (make check runs this program under each ISA the CPU has); an ISA
 * asked for but missing is reported by cairn__kernels_fallback and in
 * cairn_runtime_info. */
Test(runtime, isa_follows_cpu_and_env) {
  const char *want = getenv("CAIRN_ISA");
  const char *isa = cairn_isa_name();
  const cairn__kernel_table *a2 = cairn__kernels_avx2(), *a5 = cairn__kernels_avx512();
  const cairn__kernel_table *expect = a5 ? a5 : a2 ? a2 : cairn__kernels_ref();
  if (want && strcmp(want, "ref") == 0) expect = cairn__kernels_ref();
  else if (want && strcmp(want, "avx2") == 0) expect = a2 ? a2 : cairn__kernels_ref();
  cr_assert_eq(cairn__kernels(), expect, "isa %s, CAIRN_ISA=%s, expected %s", isa, want ? want : "(unset)",
               expect->isa);
  cr_assert_str_eq(isa, expect->isa);
  const int honoured = !want || !*want || strcmp(want, isa) == 0 ||
                       (strcmp(want, "ref") && strcmp(want, "avx2") && strcmp(want, "avx512"));
  cr_assert_eq(cairn__kernels_fallback() == NULL, honoured, "CAIRN_ISA=%s, isa %s: fallback %s", want ? want : "",
               isa, cairn__kernels_fallback() ? cairn__kernels_fallback() : "(none)");
  char buf[512];
  cairn_runtime_info(buf, sizeof buf);
  if (!honoured) cr_assert(strstr(buf, "not available, next best"), "%s", buf);
  cr_assert(strstr(buf, cairn__cpu_has_avx512() ? "avx512: yes" : "avx512: no"), "%s", buf);
}

Test(runtime, info_reports_blas_and_threads) {
  char buf[512];
  cr_assert_eq(cairn_runtime_info(buf, sizeof buf), buf);
  cr_assert(strstr(buf, "cairn " PACKAGE_VERSION), "%s", buf);
  cr_assert(strstr(buf, cairn_isa_name()), "%s", buf);
  cr_assert(strstr(buf, "blas OpenBLAS core"), "%s", buf);
#ifdef HAVE_OPENBLAS_GET_PARALLEL
  cr_assert(strstr(buf, "parallel serial") || strstr(buf, "parallel pthreads") || strstr(buf, "parallel openmp"),
            "%s", buf);
#endif
  char tiny[8];
  cairn_runtime_info(tiny, sizeof tiny);
  cr_assert_eq(strlen(tiny), 7, "output is truncated to the buffer");
}

/* The GEMM engine follows the CPU (oneDNN where it has AVX-512, in a build
 * with oneDNN) and CAIRN_GEMM_ENGINE, and cairn_runtime_info names it. */
Test(runtime, gemm_engine_follows_cpu_and_env) {
  const char *want = getenv("CAIRN_GEMM_ENGINE"), *eng = cairn_gemm_engine_name();
  const int dnnl = cairn__dnnl_available();
#ifdef CAIRN_BLAS_BLIS
  const char *blas = "blis";
#else
  const char *blas = "openblas";
#endif
  if (want && !strcmp(want, "onednn"))
    cr_assert_str_eq(eng, dnnl ? "onednn" : blas, "CAIRN_GEMM_ENGINE=onednn, oneDNN %s", dnnl ? "built in" : "absent");
  else if (want && !strcmp(want, "openblas"))
    cr_assert_str_eq(eng, blas);
  else
    cr_assert_str_eq(eng, dnnl && cairn__cpu_has_avx512() ? "onednn" : blas, "avx512 %d, oneDNN %d",
                     cairn__cpu_has_avx512(), dnnl);
#if !defined(CAIRN_HAVE_DNNL) || !defined(CAIRN_HAVE_OPENMP)
  cr_assert_eq(dnnl, 0, "no oneDNN in this build");
#endif
  char buf[1024], expect[64];
  snprintf(expect, sizeof expect, "; gemm engine %s (", eng);
  cairn_runtime_info(buf, sizeof buf);
  cr_assert(strstr(buf, expect), "%s", buf);
  cr_assert_eq(CAIRN_WITH_DNNL, dnnl, "cairn/build.h and the library agree on oneDNN");
}

Test(runtime, thread_budget) {
  cr_assert_geq(cairn_get_num_threads(), 1);
  cr_assert_eq(cairn_set_num_threads(0), CAIRN_E_INVALID);
  cr_assert(strstr(cairn_errmsg(), "0 threads"), "%s", cairn_errmsg());
  cr_assert_eq(cairn_set_num_threads(2), CAIRN_OK);
  cr_assert_eq(cairn_get_num_threads(), 2);
  char buf[512];
  cairn_runtime_info(buf, sizeof buf);
  cr_assert(strstr(buf, "threads 2"), "%s", buf);
}

#ifdef CAIRN_HAVE_OPENMP
#include <omp.h>
/* fn of the loops below: the deepest OpenMP nesting level an item ran at
 * (1 inside a region, even one of one thread) and the items' count */
struct level_ctx {
  int level, items;
};
static void record_level(void *p, size_t lo, size_t hi) {
  struct level_ctx *c = p;
#pragma omp critical
  {
    if (omp_get_level() > c->level) c->level = omp_get_level();
    c->items += (int)(hi - lo);
  }
}
#endif

/* At one thread the parallel loops run on the calling thread without
 * entering a region (libgomp ends each one, a team of one included, with a
 * system call: lib/internal.h); at two they still use the threads, and
 * every item runs once either way. */
Test(runtime, one_thread_loops_enter_no_parallel_region) {
#ifdef CAIRN_HAVE_OPENMP
  for (int t = 1; t <= 2; t++) {
    cr_assert_eq(cairn_set_num_threads(t), CAIRN_OK);
    struct level_ctx each = {0, 0}, chunks = {0, 0}, small = {0, 0};
    cairn__par_each(5, 1, record_level, &each);
    cairn__par_for(4 * CAIRN__PAR_MIN, record_level, &chunks);
    cairn__par_each(5, 0, record_level, &small); /* threads 0: never a region */
    cr_assert_eq(each.items, 5);
    cr_assert_eq(chunks.items, 4 * CAIRN__PAR_MIN);
    cr_assert_eq(small.items, 5);
    cr_assert_eq(small.level, 0, "par_each(threads 0) entered a region");
    cr_assert_eq(each.level, t - 1, "par_each at %d threads ran at nesting level %d", t, each.level);
    cr_assert_eq(chunks.level, t - 1, "par_for at %d threads ran at nesting level %d", t, chunks.level);
    cr_assert_eq(cairn__par_alone(), t == 1);
  }
#else
  cr_skip_test("serial build (--disable-openmp): no parallel regions");
#endif
}

/* The advice names a core only when OpenBLAS fell back to kernels without
 * AVX2 on a CPU that has them, and never overrides the user's choice. */
Test(runtime, blas_coretype_advice) {
  const char *before = getenv("OPENBLAS_CORETYPE");
  char *saved = before ? strdup(before) : NULL;
  const char *advice = cairn_blas_coretype_advice();
  if (advice) {
    cr_assert(!strcmp(advice, "SkylakeX") || !strcmp(advice, "Haswell"), "%s", advice);
    cr_assert(cairn__cpu_has_avx2_fma());
    cr_assert_eq(!strcmp(advice, "SkylakeX"), cairn__cpu_has_avx512());
    char buf[512];
    cairn_runtime_info(buf, sizeof buf);
    cr_assert(strstr(buf, advice), "runtime info carries the advice: %s", buf);
  }
  cr_assert_eq(setenv("OPENBLAS_CORETYPE", "Haswell", 1), 0);
  cr_assert_null(cairn_blas_coretype_advice(), "a core the user chose is left alone");
  char *argv[] = {"test_runtime", NULL};
  cr_assert_eq(cairn_blas_coretype_fix(argv), 0, "nothing to fix: no exec");
  if (saved) setenv("OPENBLAS_CORETYPE", saved, 1);
  else unsetenv("OPENBLAS_CORETYPE");
  free(saved);
}
