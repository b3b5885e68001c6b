/* cairn-info: prints the version and the run-time configuration (kernel
 * ISA, OpenBLAS core and threading flavour, thread budget), then one line
 * "mpi: yes|no": whether the library has MPI (cairn_mpi_available), which
 * scripts ask instead of reading the build's config.h. */
#include <stdio.h>
#include <string.h>

#include <cairn.h>

int main(int argc, char **argv) {
  if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    printf("usage: cairn-info [--version | --blas-coretype]\n"
           "Prints cairn's run-time configuration: kernel ISA (CAIRN_ISA=ref|avx2|avx512 forces one),\n"
           "OpenBLAS core and threading, and the thread budget (CAIRN_NUM_THREADS, OMP_NUM_THREADS);\n"
           "then \"mpi: yes\" or \"mpi: no\": whether this cairn has MPI (cairn-fmnist train --distributed).\n"
           "--blas-coretype prints the OPENBLAS_CORETYPE this CPU needs when OpenBLAS fell back to\n"
           "kernels without AVX2 (nothing when its choice is fine or OPENBLAS_CORETYPE is set).\n");
    return 0;
  }
  if (argc > 1 && strcmp(argv[1], "--blas-coretype") == 0) {
    const char *advice = cairn_blas_coretype_advice();
    if (advice) printf("%s\n", advice);
    return 0;
  }
  if (argc > 1 && strcmp(argv[1], "--version") == 0) {
    printf("%s\n", cairn_version_string());
    return 0;
  }
  if (argc > 1) {
    fprintf(stderr, "cairn-info: unknown option '%s' (try --help)\n", argv[1]);
    return 2;
  }
  char buf[512];
  printf("%s\n", cairn_runtime_info(buf, sizeof buf));
  printf("mpi: %s\n", cairn_mpi_available() ? "yes" : "no");
  return 0;
}
