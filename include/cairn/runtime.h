/* cairn/runtime.h — version, kernel ISA and the thread budget.
 *
 * Kernels are chosen once, on first use, from cpuid + XGETBV: AVX-512
 * (F, DQ, BW, VL) when the CPU and the OS support it, else AVX2+FMA, else
 * the scalar reference. The environment variable CAIRN_ISA=ref|avx2|avx512
 * forces a choice; an ISA the CPU or the build lacks gives the next best
 * below it, with a warning in the log, and cairn_runtime_info says so.
 *
 * Threads: one budget for cairn's OpenMP loops and OpenBLAS. The default is
 * CAIRN_NUM_THREADS, else OMP_NUM_THREADS, else the number of cores.
 * cairn never calls BLAS inside its own parallel regions.
 */
#ifndef CAIRN_RUNTIME_H
#define CAIRN_RUNTIME_H

#include <stddef.h>

#include "cairn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The version of the library actually loaded, "MAJOR.MINOR.PATCH" (e.g.
 * "0.1.0"); compare it with CAIRN_VERSION_STRING (cairn/build.h), the
 * version of the headers the program was compiled against. Static storage;
 * thread-safe. cairn_version_string() is the same call under its first
 * name. */
CAIRN_API const char *cairn_version(void);
CAIRN_API const char *cairn_version_string(void);
/* "avx512", "avx2" or "ref": the kernel path in use (selects it if not yet done). */
CAIRN_API const char *cairn_isa_name(void);
/* "openblas", "onednn" or "blis": the engine cairn's GEMMs (the dense
 * layers' products) run on. oneDNN matmul primitives where the CPU has
 * AVX-512 and the library was built with oneDNN (CAIRN_WITH_DNNL in
 * cairn/build.h), the BLAS elsewhere; the environment variable
 * CAIRN_GEMM_ENGINE=openblas|onednn forces one (onednn falls back to the
 * BLAS in a build without oneDNN). Either engine gives the same bits at
 * any thread count; the two engines give different bits. Chosen once, at
 * the first call or GEMM; thread-safe. */
CAIRN_API const char *cairn_gemm_engine_name(void);

/* 1 if this library was built with MPI (cairn/mpi.h: data-parallel
 * training), 0 if not. It answers for the library actually loaded; the
 * compile-time CAIRN_WITH_MPI (cairn/build.h) answers for the headers a
 * program was compiled against. A program that can run either way asks
 * this before using MPI, as cairn-fmnist does for train --distributed.
 * Thread-safe; needs no initialization. */
CAIRN_API int cairn_mpi_available(void);

/* Sets the thread budget for cairn and OpenBLAS (n >= 1). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_set_num_threads(int n);
CAIRN_API int cairn_get_num_threads(void);

/* One line describing the run-time configuration, e.g.
 * "cairn 0.1.0; isa avx2 (cpu avx2+fma: yes, avx512: no); openmp yes; threads 2;
 *  blas OpenBLAS core Haswell, parallel openmp"
 * Writes at most len bytes (NUL-terminated); returns buf. */
CAIRN_API char *cairn_runtime_info(char *buf, size_t len);

/* OpenBLAS picks its kernels from cpuid when it is loaded, and a version
 * older than the CPU falls back to its Prescott (SSE3) kernels: Debian 12's
 * OpenBLAS 0.3.21 on Intel Emerald Rapids runs sgemm 5x slower than it
 * could. cairn_blas_coretype_advice() returns the OPENBLAS_CORETYPE value
 * to use ("SkylakeX" on AVX-512 CPUs, "Haswell" on AVX2+FMA ones) when
 * OpenBLAS chose a core without AVX2 kernels and OPENBLAS_CORETYPE is
 * unset; NULL when there is nothing to fix. */
CAIRN_API const char *cairn_blas_coretype_advice(void);

/* For a program's main(): when there is advice, sets OPENBLAS_CORETYPE,
 * says so on stderr and re-executes the program (/proc/self/exe) with argv,
 * before anything else has run. Returns 0 when nothing was to be done (or
 * CAIRN_BLAS_REEXEC=0 turns it off), -1 when the exec failed (the program
 * goes on with OpenBLAS's choice). cairn's own tools and benches call it. */
CAIRN_API int cairn_blas_coretype_fix(char **argv);

#ifdef __cplusplus
}
#endif
#endif
