/* cairn's own format, staging compact tensors between a verify and a read
 * (cairn_ckpt_set_staging): the budget and the buffers. A tensor with zstd
 * chunks (codec 3) is decoded once by the verify into staging and copied
 * by the read, instead of decoded twice (zstd decodes at a fraction of a
 * page-cache copy's speed). A tensor past the budget is staged in part
 * (whole chunks up to it), the rest decoded twice, so the extra memory
 * stays bounded whatever the model's size (doc/restore-memory.md). The
 * decoding into and out of staging is ckpt_native.c's. */
#include "ckpt_native_impl.h"

#include <stdint.h>
#include <stdlib.h>

#include "cairn/runtime.h"

cairn_status cairn__ck_native_set_staging(void *state, uint64_t max_bytes) {
  ck_native *c = state;
  c->stage_max = max_bytes;
  return CAIRN_OK;
}

static int has_zstd(const ck_entry *e) {
  for (uint32_t k = 0; e->chunk_table && k < e->n_chunks; k++)
    if (e->chunk_table[k * CK_ICHUNK] == CK_CODEC_SHUF_ZSTD) return 1;
  return 0;
}

void cairn__ck_unstage(ck_native *c, const ck_entry *e) {
  size_t i = (size_t)(e - c->v->ents);
  if (!c->stage || !c->stage[i]) return;
  cairn_free(c->stage[i]);
  c->stage[i] = NULL;
  c->staged_bytes -= c->stage_len[i];
  c->stage_len[i] = 0;
}

void cairn__ck_unstage_all(ck_native *c) {
  for (size_t i = 0; c->stage && i < c->v->n; i++) cairn_free(c->stage[i]);
  free(c->stage);
  free(c->stage_len);
  c->stage = NULL;
  c->stage_len = NULL;
  c->staged_bytes = 0;
}

/* 0 also when out of memory: then e is just decoded twice. */
uint64_t cairn__ck_stage_alloc(ck_native *c, const ck_entry *e, unsigned char **buf) {
  *buf = NULL;
  if (!has_zstd(e)) return 0;
  if (c->staged_bytes >= c->stage_max) return 0;
  uint64_t left = c->stage_max - c->staged_bytes, cb = c->sb.chunk_bytes;
  uint64_t len = e->raw_bytes <= left ? e->raw_bytes : left / cb * cb;
  if (len == 0 || len > SIZE_MAX) return 0;
  if (!c->stage) {
    c->stage = calloc(c->v->n, sizeof *c->stage);
    c->stage_len = calloc(c->v->n, sizeof *c->stage_len);
    if (!c->stage || !c->stage_len) {
      free(c->stage), free(c->stage_len);
      c->stage = NULL, c->stage_len = NULL;
      return 0;
    }
  }
  if (!(*buf = cairn_alloc((size_t)len))) return 0;
  return len;
}

void cairn__ck_stage_keep(ck_native *c, const ck_entry *e, unsigned char *buf, uint64_t len) {
  size_t i = (size_t)(e - c->v->ents);
  c->stage[i] = buf;
  c->stage_len[i] = len;
  c->staged_bytes += len;
}
