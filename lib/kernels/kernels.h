/* The kernel table: every elementwise and reduction kernel, in a scalar
 * reference version (lib/kernels/ref, the specification), an AVX2+FMA
 * version (lib/kernels/avx2, the only files built with -mavx2 -mfma) and an
 * AVX-512 version (lib/kernels/avx512, the only files built with the
 * AVX-512 flags). cairn__kernels() returns the table chosen once,
 * thread-safely, from cpuid + XGETBV and CAIRN_ISA (lib/kernels/dispatch.c).
 *
 * Conventions: n is an element count and may be 0; pointers need no
 * particular alignment; outputs may alias inputs where marked "in place
 * ok". Kernels are single-threaded; lib/parallel.c splits the work.
 * Reductions return double and sum in a fixed order for a given n.
 */
#ifndef CAIRN_KERNELS_H
#define CAIRN_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* Every kernel, once: X(return type, name, (parameters)). This one list
 * generates the table's members, the declarations of each ISA's
 * cairn_<name>_<isa> functions and the table each ISA fills
 * (lib/kernels/dispatch.c), so adding a kernel is one line here plus its
 * ref, avx2 and avx512 definitions. */
#define CAIRN__KERNELS(X)                                                                          \
  /* ---- activations (in place ok: y may be x, dx may be dy) ---- */                              \
  X(void, relu_fwd, (const float *x, float *y, size_t n))                                          \
  X(void, relu_bwd, (const float *x, const float *dy, float *dx, size_t n))                        \
  X(void, leaky_relu_fwd, (const float *x, float *y, size_t n, float alpha))                       \
  X(void, leaky_relu_bwd, (const float *x, const float *dy, float *dx, size_t n, float alpha))     \
  X(void, sigmoid_fwd, (const float *x, float *y, size_t n))                                       \
  /* dx = dy·y·(1−y) */                                                                            \
  X(void, sigmoid_bwd, (const float *y, const float *dy, float *dx, size_t n))                     \
  X(void, tanh_fwd, (const float *x, float *y, size_t n))                                          \
  /* dx = dy·(1−y²) */                                                                             \
  X(void, tanh_bwd, (const float *y, const float *dy, float *dx, size_t n))                        \
  X(void, gelu_fwd, (const float *x, float *y, size_t n))                                          \
  X(void, gelu_bwd, (const float *x, const float *dy, float *dx, size_t n))                        \
  X(void, gelu_tanh_fwd, (const float *x, float *y, size_t n))                                     \
  X(void, gelu_tanh_bwd, (const float *x, const float *dy, float *dx, size_t n))                   \
                                                                                                   \
  /* ---- elementwise math (in place ok) ---- */                                                   \
  X(void, exp, (const float *x, float *y, size_t n))                                               \
  X(void, log, (const float *x, float *y, size_t n))                                               \
                                                                                                   \
  /* ---- one row of length n (in place ok) ---- */                                                \
  X(void, softmax_row, (const float *x, float *y, size_t n))                                       \
  X(void, log_softmax_row, (const float *x, float *y, size_t n))                                   \
  /* dx = y ⊙ (dy − Σ dy⊙y) */                                                                     \
  X(void, softmax_bwd_row, (const float *y, const float *dy, float *dx, size_t n))                 \
  /* dx = dy − e^y · Σ dy   (y is the log-softmax output) */                                       \
  X(void, log_softmax_bwd_row, (const float *y, const float *dy, float *dx, size_t n))             \
                                                                                                   \
  /* ---- losses; return the summed loss, write scale·dL/dx to dx if dx != NULL ---- */            \
  /* one row: lse(x) − x[label];  dx = scale·(softmax(x) − onehot(label)) */                       \
  X(double, sparse_xent_row, (const float *x, int32_t label, float *dx, size_t n, float scale))    \
  /* one row: Σ z·(lse(x) − x);  dx = scale·(softmax(x)·Σz − z) */                                 \
  X(double, xent_row, (const float *x, const float *z, float *dx, size_t n, float scale))          \
  /* Σ max(x,0) − x·z + log(1+e^−|x|);  dx = scale·(sigmoid(x) − z) */                             \
  X(double, sigmoid_xent, (const float *x, const float *z, float *dx, size_t n, float scale))      \
  /* Σ (p − t)²;  dp = scale·2·(p − t) */                                                          \
  X(double, mse, (const float *p, const float *t, float *dp, size_t n, float scale))               \
                                                                                                   \
  /* ---- vector helpers ---- */                                                                   \
  X(double, sum, (const float *x, size_t n))                                                       \
  X(double, sumsq, (const float *x, size_t n))                                                     \
  /* y += x */                                                                                     \
  X(void, add, (const float *x, float *y, size_t n))                                               \
  /* x *= a */                                                                                     \
  X(void, scale, (float a, float *x, size_t n))                                                    \
                                                                                                   \
  /* ---- optimizer updates (see include/cairn/optim.h for the rules) ---- */                      \
  X(void, sgd, (float *w, const float *g, size_t n, float lr))                                     \
  X(void, momentum, (float *w, float *a, const float *g, size_t n, float lr, float mu, int nesterov)) \
  /* lr_t already bias-corrected; wd = 0 for Adam, decoupled decay for AdamW */                    \
  X(void, adam, (float *w, float *m, float *v, const float *g, size_t n, float lr_t, float b1,     \
                 float b2, float eps, float wd))                                                   \
  X(void, rmsprop, (float *w, float *ms, float *mom, const float *g, size_t n, float lr, float rho, \
                    float mu, float eps))                                                          \
  X(void, adagrad, (float *w, float *acc, const float *g, size_t n, float lr))                      \
                                                                                                   \
  /* ---- byte planes of checkpoint codecs 2 and 3: n elements of es bytes (no aliasing) ---- */   \
  /* dst[b·n + i] = src[i·es + b]: (n, es) bytes -> (es, n), plane b = byte b of each element */    \
  X(void, shuffle, (unsigned char *restrict dst, const unsigned char *restrict src, size_t n, size_t es)) \
  /* dst[i·es + b] = src[b·n + i] */                                                               \
  X(void, unshuffle, (unsigned char *restrict dst, const unsigned char *restrict src, size_t n, size_t es)) \
                                                                                                   \
  /* ---- bfloat16 (doc/bf16.md): round to nearest even, NaN kept quiet, subnormals rounded ---- */ \
  X(void, f32_to_bf16, (const float *x, uint16_t *y, size_t n))                                    \
  /* exact: the 16 bits shifted up */                                                              \
  X(void, bf16_to_f32, (const uint16_t *x, float *y, size_t n))

/* Tests only: on 1, the AVX-512 f32_to_bf16 uses vcvtne2ps2bf16 where the
 * CPU has AVX512_BF16 (its default), on 0 the integer arithmetic alone,
 * -1 back to the default; returns whether it used the instruction before
 * (lib/kernels/avx512/bf16_avx512.c). 0 and no effect without the AVX-512
 * kernels. */
int cairn__bf16_native_force(int on);

#define CAIRN__KERNEL_MEMBER(ret, name, params) ret(*name) params;

typedef struct cairn__kernel_table {
  const char *isa; /* "ref", "avx2" or "avx512" */
  CAIRN__KERNELS(CAIRN__KERNEL_MEMBER)
} cairn__kernel_table;

/* Per thread: nonzero while a kernel's caller writes an output larger than
 * the last-level cache (see cairn__stream_min_bytes); the AVX2 and AVX-512
 * map loops then use streaming stores for outputs that are not also inputs. The ref
 * kernels ignore it. Set it around a call and clear it after. */
extern _Thread_local int cairn__kernels_stream;
/* Output size from which streaming stores pay: the last-level cache
 * (sysconf), 32 MiB when unknown; CAIRN_STREAM_MIN_BYTES overrides it. */
size_t cairn__stream_min_bytes(void);

/* The shuffle and unshuffle of the elements i0 <= i < n only (the planes
 * still n bytes long): the tails the vector kernels leave (shuffle_ref.c). */
void cairn__shuffle_tail(unsigned char *restrict dst, const unsigned char *restrict src, size_t n, size_t es,
                         size_t i0);
void cairn__unshuffle_tail(unsigned char *restrict dst, const unsigned char *restrict src, size_t n, size_t es,
                           size_t i0);

/* The chosen table (never NULL). */
const cairn__kernel_table *cairn__kernels(void);
/* The reference table and, if compiled in and supported by this CPU, the
 * AVX2 and AVX-512 ones (NULL otherwise): for tests and benches that
 * compare them. */
const cairn__kernel_table *cairn__kernels_ref(void);
const cairn__kernel_table *cairn__kernels_avx2(void);
const cairn__kernel_table *cairn__kernels_avx512(void);
/* What CAIRN_ISA asked for when the chosen table is not that ISA (the CPU
 * or the build lacks it: the next best was taken), NULL otherwise; for
 * cairn_runtime_info. Selects the table if not yet done. */
const char *cairn__kernels_fallback(void);
/* 1 if this CPU and OS can run the AVX2+FMA kernels. */
int cairn__cpu_has_avx2_fma(void);
/* AVX-512 F+DQ+BW+VL with the OS saving ZMM state (OpenBLAS's SkylakeX kernels) */
int cairn__cpu_has_avx512(void);

/* Each ISA's kernels, defined under lib/kernels/<isa>/: cairn_<name>_ref,
 * cairn_<name>_avx2 and cairn_<name>_avx512. */
#define CAIRN__KERNEL_DECL_REF(ret, name, params) ret cairn_##name##_ref params;
#define CAIRN__KERNEL_DECL_AVX2(ret, name, params) ret cairn_##name##_avx2 params;
#define CAIRN__KERNEL_DECL_AVX512(ret, name, params) ret cairn_##name##_avx512 params;
CAIRN__KERNELS(CAIRN__KERNEL_DECL_REF)
CAIRN__KERNELS(CAIRN__KERNEL_DECL_AVX2)
CAIRN__KERNELS(CAIRN__KERNEL_DECL_AVX512)

#endif
