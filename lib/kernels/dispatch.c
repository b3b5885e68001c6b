/* Kernel selection: the best table this build and CPU have — AVX-512 when
 * cpuid says F+DQ+BW+VL and XGETBV says the OS saves the ZMM and mask
 * state, else AVX2 when cpuid says AVX2+FMA and the OS saves YMM state,
 * else the reference; chosen once (pthread_once). CAIRN_ISA=ref|avx2|avx512
 * forces a choice; an ISA this build or CPU lacks gives the next best
 * below it, with a warning in the log and in cairn_runtime_info. */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cairn/env.h"
#include "internal.h"
#include "kernels/kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

/* One designated initializer per entry of CAIRN__KERNELS. */
#define KERNEL_REF(ret, name, params) .name = cairn_##name##_ref,
#define KERNEL_AVX2(ret, name, params) .name = cairn_##name##_avx2,
#define KERNEL_AVX512(ret, name, params) .name = cairn_##name##_avx512,

static const cairn__kernel_table table_ref = {.isa = "ref", CAIRN__KERNELS(KERNEL_REF)};
#ifdef CAIRN_HAVE_AVX2
static const cairn__kernel_table table_avx2 = {.isa = "avx2", CAIRN__KERNELS(KERNEL_AVX2)};
#endif
#ifdef CAIRN_HAVE_AVX512
static const cairn__kernel_table table_avx512 = {.isa = "avx512", CAIRN__KERNELS(KERNEL_AVX512)};
#endif

const cairn__kernel_table *cairn__kernels_ref(void) { return &table_ref; }

#ifndef CAIRN_HAVE_AVX512
int cairn__bf16_native_force(int on) { /* no AVX-512 kernels: nothing to force */
  (void)on;
  return 0;
}
#endif

const cairn__kernel_table *cairn__kernels_avx2(void) {
#ifdef CAIRN_HAVE_AVX2
  return cairn__cpu_has_avx2_fma() ? &table_avx2 : NULL;
#else
  return NULL;
#endif
}

const cairn__kernel_table *cairn__kernels_avx512(void) {
#ifdef CAIRN_HAVE_AVX512
  return cairn__cpu_has_avx512() ? &table_avx512 : NULL;
#else
  return NULL;
#endif
}

int cairn__cpu_has_avx2_fma(void) {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
  const unsigned fma = 1u << 12, osxsave = 1u << 27, avx = 1u << 28;
  if ((c & (fma | osxsave | avx)) != (fma | osxsave | avx)) return 0;
  /* XCR0 bits 1 (SSE) and 2 (AVX/YMM) must be enabled by the OS. */
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & 6u) != 6u) return 0;
  if (__get_cpuid_max(0, NULL) < 7) return 0;
  __cpuid_count(7, 0, a, b, c, d);
  return (b & (1u << 5)) != 0; /* AVX2 */
#else
  return 0;
#endif
}

int cairn__cpu_has_avx512(void) {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (!cairn__cpu_has_avx2_fma()) return 0;
  /* XCR0 bits 5-7: opmask and both halves of the ZMM state */
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & 0xE0u) != 0xE0u) return 0;
  __cpuid_count(7, 0, a, b, c, d);
  const unsigned f = 1u << 16, dq = 1u << 17, bw = 1u << 30, vl = 1u << 31;
  return (b & (f | dq | bw | vl)) == (f | dq | bw | vl);
#else
  return 0;
#endif
}

static const cairn__kernel_table *chosen = &table_ref;
static pthread_once_t chosen_once = PTHREAD_ONCE_INIT;

static const char *fallback; /* CAIRN_ISA's value when it could not be followed */

/* The best table at or below `cap` (0 ref, 1 avx2, 2 avx512). */
static const cairn__kernel_table *best_up_to(int cap) {
  const cairn__kernel_table *t;
  if (cap >= 2 && (t = cairn__kernels_avx512())) return t;
  if (cap >= 1 && (t = cairn__kernels_avx2())) return t;
  return &table_ref;
}

static void choose(void) {
  const char *want = getenv("CAIRN_ISA");
  int cap = 2;
  if (want && *want) {
    if (!strcmp(want, "ref")) cap = 0;
    else if (!strcmp(want, "avx2")) cap = 1;
    else if (!strcmp(want, "avx512")) cap = 2;
    else {
      cairn_env_log(NULL, CAIRN_LOG_WARN, "CAIRN_ISA=%.40s is not one of ref, avx2, avx512: ignored", want);
      want = NULL;
    }
  }
  chosen = best_up_to(cap);
  if (want && *want && strcmp(want, chosen->isa) != 0) {
    fallback = want;
    cairn_env_log(NULL, CAIRN_LOG_WARN,
                  "CAIRN_ISA=%s: this %s has no %s kernels; using %s, the best it has", want,
                  (cap == 2 && !cairn__cpu_has_avx512()) || (cap == 1 && !cairn__cpu_has_avx2_fma()) ? "CPU"
                                                                                                    : "build",
                  want, chosen->isa);
  }
}

const cairn__kernel_table *cairn__kernels(void) {
  pthread_once(&chosen_once, choose);
  return chosen;
}

const char *cairn__kernels_fallback(void) {
  pthread_once(&chosen_once, choose);
  return fallback;
}
