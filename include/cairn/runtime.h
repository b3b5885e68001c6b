/* cairn/runtime.h — version, kernel ISA and the thread budget.
 *
 * Kernels are chosen once, on first use, from cpuid + XGETBV: AVX2+FMA when
 * the CPU and the OS support it, the scalar reference otherwise. The
 * environment variable CAIRN_ISA=ref|avx2 forces a choice (avx2 on a CPU
 * without it falls back to ref, and cairn_runtime_info says so).
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

/* "0.1.0" */
CAIRN_API const char *cairn_version_string(void);
/* "avx2" or "ref": the kernel path in use (selects it if not yet done). */
CAIRN_API const char *cairn_isa_name(void);

/* Sets the thread budget for cairn and OpenBLAS (n >= 1). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_set_num_threads(int n);
CAIRN_API int cairn_get_num_threads(void);

/* One line describing the run-time configuration, e.g.
 * "cairn 0.1.0; isa avx2 (cpu: avx2+fma); openmp yes; threads 2;
 *  blas OpenBLAS core Haswell, parallel openmp"
 * Writes at most len bytes (NUL-terminated); returns buf. */
CAIRN_API char *cairn_runtime_info(char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
