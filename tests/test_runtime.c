/* Version, ISA selection and the thread budget. */
#include "config.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include <cairn.h>

#include "kernels/kernels.h"

TestSuite(runtime, .timeout = 30);

Test(runtime, version_matches_configure) {
  cr_assert_str_eq(cairn_version_string(), PACKAGE_VERSION);
}

Test(runtime, isa_follows_cpu_and_env) {
  const char *want = getenv("CAIRN_ISA");
  const char *isa = cairn_isa_name();
  if (want && strcmp(want, "ref") == 0)
    cr_assert_str_eq(isa, "ref");
  else if (cairn__kernels_avx2())
    cr_assert_str_eq(isa, "avx2", "this CPU has AVX2+FMA, so the default must use it");
  else
    cr_assert_str_eq(isa, "ref");
  cr_assert_eq(cairn__kernels(), strcmp(isa, "ref") ? cairn__kernels_avx2() : cairn__kernels_ref());
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
