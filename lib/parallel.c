/* Chunked parallel loops with thread-count-independent results. */
#include "internal.h"

#ifdef CAIRN_HAVE_OPENMP
#include <omp.h>
#endif

/* Chunk length for n items: at least CAIRN__PAR_MIN / 4, at most
 * CAIRN__PAR_MAX_CHUNKS chunks, a multiple of 64 — a function of n only. */
static size_t chunk_len(size_t n) {
  size_t c = CAIRN__PAR_MIN / 4;
  size_t need = (n + CAIRN__PAR_MAX_CHUNKS - 1) / CAIRN__PAR_MAX_CHUNKS;
  if (need > c) c = (need + 63) & ~(size_t)63;
  return c;
}

int cairn__par_alone(void) {
#ifdef CAIRN_HAVE_OPENMP
  return omp_in_parallel() || omp_get_max_threads() < 2;
#else
  return 1;
#endif
}

void cairn__par_each(size_t n, int threads, cairn__range_fn fn, void *ctx) {
  if (n <= 1 || !threads || cairn__par_alone()) {
    for (size_t i = 0; i < n; i++) fn(ctx, i, i + 1);
    return;
  }
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i++) fn(ctx, i, i + 1);
}

/* fn over chunks of c of n items, on the threads. */
static void chunked_for(size_t n, size_t c, cairn__range_fn fn, void *ctx) {
  size_t k = (n + c - 1) / c;
  if (cairn__par_alone()) {
    for (size_t i = 0; i < k; i++) fn(ctx, i * c, i * c + c < n ? i * c + c : n);
    return;
  }
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < k; i++) {
    size_t lo = i * c, hi = lo + c < n ? lo + c : n;
    fn(ctx, lo, hi);
  }
}

void cairn__par_for(size_t n, cairn__range_fn fn, void *ctx) {
  if (n == 0) return;
  if (n < CAIRN__PAR_MIN) fn(ctx, 0, n);
  else chunked_for(n, chunk_len(n), fn, ctx);
}

/* The sum of fn over chunks of c of n items, part by part in chunk order:
 * the same chunks and the same order of additions whether or not threads
 * are used (`threads`), so the bits do not change with the thread count
 * or across the CAIRN__PAR_MIN threshold. */
static double chunked_sum(size_t n, size_t c, int threads, cairn__range_sum_fn fn, void *ctx) {
  size_t k = (n + c - 1) / c;
  double part[CAIRN__PAR_MAX_CHUNKS];
  if (!threads || cairn__par_alone()) {
    for (size_t i = 0; i < k; i++) part[i] = fn(ctx, i * c, i * c + c < n ? i * c + c : n);
  } else {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < k; i++) {
      size_t lo = i * c, hi = lo + c < n ? lo + c : n;
      part[i] = fn(ctx, lo, hi);
    }
  }
  double s = 0.0;
  for (size_t i = 0; i < k; i++) s += part[i];
  return s;
}

double cairn__par_sum(size_t n, cairn__range_sum_fn fn, void *ctx) {
  if (n == 0) return 0.0;
  return chunked_sum(n, chunk_len(n), n >= CAIRN__PAR_MIN, fn, ctx);
}

/* Rows per chunk: enough rows for ~chunk_len elements, at most
 * CAIRN__PAR_MAX_CHUNKS chunks. */
static size_t rows_per_chunk(size_t rows, size_t cols) {
  size_t per = cols ? (CAIRN__PAR_MIN / 4 + cols - 1) / cols : rows;
  size_t need = (rows + CAIRN__PAR_MAX_CHUNKS - 1) / CAIRN__PAR_MAX_CHUNKS;
  if (per < need) per = need;
  return per ? per : 1;
}

void cairn__par_rows(size_t rows, size_t cols, cairn__range_fn fn, void *ctx) {
  if (rows == 0) return;
  if (rows * cols < CAIRN__PAR_MIN || rows == 1) fn(ctx, 0, rows);
  else chunked_for(rows, rows_per_chunk(rows, cols), fn, ctx);
}

double cairn__par_rows_sum(size_t rows, size_t cols, cairn__range_sum_fn fn, void *ctx) {
  if (rows == 0) return 0.0;
  return chunked_sum(rows, rows_per_chunk(rows, cols), rows * cols >= CAIRN__PAR_MIN, fn, ctx);
}
