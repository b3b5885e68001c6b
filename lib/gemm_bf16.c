/* cairn__gemm_bf16: C = op(A)·op(B) (+ bias or + C) on bf16 inputs with
 * fp32 products and sums, on one of two engines (doc/bf16.md):
 * - oneDNN's bf16 matmul (gemm_dnnl_fixed.c) where the CPU has avx512_bf16
 *   or amx_bf16: vdpbf16ps or AMX tiles multiply bf16 pairs exactly and
 *   add them in fp32, in oneDNN's order;
 * - the reference, anywhere: A and B widened to fp32 (exact: a bf16 is an
 *   f32 with 16 zero bits) and the fp32 GEMM of the engine in use
 *   (cairn__sgemm_ep: OpenBLAS or oneDNN f32). A product of two bf16 has at
 *   most 16 significant bits, so it is exact in fp32 on every engine; the
 *   sums are not, and each engine adds in its own order, so the engines
 *   agree to the fp32 accumulation error, not bit for bit.
 * Both keep the bits independent of the thread count: oneDNN runs in the
 * fixed, shape-determined blocks of cairn__gemm_plan, one thread each; the
 * reference inherits cairn__sgemm_ep's guarantee. */
#define _POSIX_C_SOURCE 200809L
#include "tensor_impl.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_impl.h"
#include "kernels/kernels.h"

void cairn__bf16_ws_free(cairn__bf16_ws *ws) {
  if (!ws) return;
  cairn_free(ws->buf);
  ws->buf = NULL;
  ws->cap = 0;
}

static void engine_init(void);
static cairn__engine_choice choice = CAIRN__ENGINE_CHOICE(engine_init);
static void engine_init(void) {
  const char *e = getenv("CAIRN_BF16_ENGINE");
  int want = cairn__dnnl_bf16_available() ? CAIRN__BF16_ONEDNN : CAIRN__BF16_REFERENCE;
  if (e && !strcmp(e, "reference")) want = CAIRN__BF16_REFERENCE;
  choice.picked = want;
}

int cairn__bf16_engine(void) { return cairn__engine_choice_get(&choice); }

int cairn__bf16_engine_force(int e) {
  if (e == CAIRN__BF16_ONEDNN && !cairn__dnnl_bf16_available()) return -1;
  return cairn__engine_choice_force(&choice, e, e == CAIRN__BF16_REFERENCE || e == CAIRN__BF16_ONEDNN);
}

const char *cairn__bf16_engine_info(char *buf, size_t len) {
  if (cairn__bf16_engine() == CAIRN__BF16_ONEDNN) {
    /* the implementation oneDNN picks: make one primitive if none ran yet */
    if (!cairn__dnnl_bf16_impl()[0]) (void)cairn__dnnl_bf16_ready(0, 0, 256, 1024, 1024, 1024, 1024, 1024, 0);
    const char *impl = cairn__dnnl_bf16_impl();
    snprintf(buf, len, "onednn (%s)", impl[0] ? impl : "no primitive made");
  } else {
    const char *e = getenv("CAIRN_BF16_ENGINE");
    snprintf(buf, len, "reference (bf16 widened to fp32, then the fp32 gemm; %s)",
             e && !strcmp(e, "reference") ? "CAIRN_BF16_ENGINE=reference"
             : cairn__dnnl_available()    ? "no avx512_bf16 or amx_bf16 on this cpu"
                                          : "no oneDNN in this build");
  }
  return buf;
}

/* ---- the reference: widen, then the fp32 GEMM ---- */

struct convert_ctx {
  const void *x;
  void *y;
  int to_bf16;
};
static void convert_range(void *p, size_t lo, size_t hi) {
  const struct convert_ctx *c = p;
  if (c->to_bf16) cairn__kernels()->f32_to_bf16((const float *)c->x + lo, (uint16_t *)c->y + lo, hi - lo);
  else cairn__kernels()->bf16_to_f32((const uint16_t *)c->x + lo, (float *)c->y + lo, hi - lo);
}

void cairn__bf16_widen(const uint16_t *x, float *y, size_t n) {
  struct convert_ctx c = {x, y, 0};
  cairn__par_for(n, convert_range, &c);
}

void cairn__bf16_round(const float *x, uint16_t *y, size_t n) {
  struct convert_ctx c = {x, y, 1};
  cairn__par_for(n, convert_range, &c);
}

/* elements spanned by op(X) (rows, cols) stored with leading dimension ld */
static size_t span(int rows, int cols, int trans, int ld) {
  const size_t r = (size_t)(trans ? cols : rows);
  const size_t c = (size_t)(trans ? rows : cols);
  return r == 0 ? 0 : (r - 1) * (size_t)ld + c;
}

static int reference(int ta, int tb, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B, int ldb,
                     int acc, float *C, int ldc, const float *bias, const cairn__gemm_epilogue *ep,
                     cairn__bf16_ws *ws) {
  const size_t na = span(M, K, ta, lda), nb = span(K, N, tb, ldb);
  if (na + nb > ws->cap) {
    float *p = cairn_alloc((na + nb) * sizeof(float));
    if (!p) return -1;
    cairn_free(ws->buf);
    ws->buf = p;
    ws->cap = na + nb;
  }
  cairn__bf16_widen(A, ws->buf, na);
  cairn__bf16_widen(B, ws->buf + na, nb);
  cairn__sgemm_ep(ta, tb, M, N, K, 1.0f, ws->buf, lda, ws->buf + na, ldb, acc ? 1.0f : 0.0f, C, ldc, bias, ep);
  return 0;
}

/* One product on oneDNN as cairn__gemm_plan cut it: block i is one call. */
struct bf16_run {
  int ta, tb, M, N, K, lda, ldb, ldc, acc, split_n, len;
  const uint16_t *A, *B;
  const float *bias;
  float *C;
  const cairn__gemm_epilogue *ep;
  int failed; /* set by any block that could not run */
};
static void bf16_block(void *p, size_t i, size_t end) {
  struct bf16_run *r = p;
  (void)end;
  cairn__gemm_block b;
  if (!cairn__gemm_block_at((int)i, r->split_n, r->len, r->M, r->N, r->C, r->ldc, r->bias, &b)) return;
  const int lo = b.lo, hi = b.hi;
  int rc;
  if (r->split_n) {
    const uint16_t *Bb = r->tb ? r->B + (size_t)lo * r->ldb : r->B + lo;
    rc = cairn__dnnl_bf16_gemm(r->ta, r->tb, r->M, hi - lo, r->K, r->A, r->lda, Bb, r->ldb, r->acc, r->C + lo, r->ldc);
  } else {
    const uint16_t *Ab = r->ta ? r->A + lo : r->A + (size_t)lo * r->lda;
    rc = cairn__dnnl_bf16_gemm(r->ta, r->tb, hi - lo, r->N, r->K, Ab, r->lda, r->B, r->ldb, r->acc,
                               r->C + (size_t)lo * r->ldc, r->ldc);
  }
  if (rc) __atomic_store_n(&r->failed, 1, __ATOMIC_RELAXED);
  else if (r->ep) r->ep->fn(r->ep->ctx, b.r0, b.r1, b.c0, b.c1);
}

int cairn__gemm_bf16(int ta, int tb, int M, int N, int K, const uint16_t *A, int lda, const uint16_t *B, int ldb,
                     int acc, float *C, int ldc, const float *bias, const cairn__gemm_epilogue *ep,
                     cairn__bf16_ws *ws) {
  if (M <= 0 || N <= 0) return 0;
  if (bias) acc = 1; /* rows start as the bias and the product is added */
  if (K <= 0 || cairn__bf16_engine() != CAIRN__BF16_ONEDNN)
    return reference(ta, tb, M, N, K, A, lda, B, ldb, acc, C, ldc, bias, ep, ws);
  int split_n, nb, len;
  /* accumulate -1: no probe, fixed blocks (the probe is of the fp32
   * sgemm's bits; the bf16 primitives keep theirs per block shape) */
  cairn__gemm_plan(CAIRN__GEMM_ONEDNN, ta, tb, M, N, K, lda, ldb, ldc, -1, &split_n, &nb, &len);
  /* oneDNN where it has the primitives of every block (a block's key is
   * its own shape: at most two per product; decided by the shape alone,
   * once), else the reference */
  const int d0 = split_n ? N : M, l0 = len < d0 ? len : d0, l1 = d0 - (nb - 1) * len;
  for (int j = 0; j < 2; j++) {
    const int l = j ? l1 : l0;
    if (l <= 0 || (j && l == l0)) continue;
    if (!cairn__dnnl_bf16_ready(ta, tb, split_n ? M : l, split_n ? l : N, K, lda, ldb, ldc, acc))
      return reference(ta, tb, M, N, K, A, lda, B, ldb, acc, C, ldc, bias, ep, ws);
  }
  struct bf16_run r = {ta, tb, M, N, K, lda, ldb, ldc, acc, split_n, len, A, B, bias, C, ep, 0};
  cairn__par_each((size_t)nb, 1, bf16_block, &r);
  return r.failed ? -1 : 0;
}
