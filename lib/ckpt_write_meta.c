/* The checkpoint writer's metadata (key/value pairs set by
 * cairn_ckpt_writer_meta_*) and the metadata and index blocks that commit
 * writes after the records. Format: doc/checkpoint-format.md. */
#define _POSIX_C_SOURCE 200809L /* strnlen */
#include "ckpt_write_impl.h"

#include <stdlib.h>
#include <string.h>

/* ---- metadata ----------------------------------------------------------------------- */

static cairn_status meta_set(cairn_ckpt_writer *w, const char *fn, const char *key, uint8_t type, uint64_t num,
                             const void *data, size_t len) {
  cairn_status s = cairn__ckw_check_usable(w, fn);
  if (s) return s;
  if (!key) return cairn__fail(CAIRN_E_NULL, "%s: key is NULL", fn);
  size_t klen = strnlen(key, CK_MAX_KEY + 1);
  if (!cairn__ck_key_ok((const unsigned char *)key, klen)) {
    char sb[80];
    return cairn__fail(CAIRN_E_INVALID, "%s: key '%s' is not 1..255 bytes of [a-z0-9_.]", fn,
                       cairn__ck_short(key, klen > 60 ? 60 : klen, sb, sizeof sb));
  }
  if (len > UINT32_MAX) return cairn__fail(CAIRN_E_LIMIT, "%s: '%s': value of %zu bytes is too long", fn, key, len);
  unsigned char *copy = NULL;
  if (type == CAIRN_META_STR || type == CAIRN_META_BYTES) {
    copy = malloc(len ? len : 1);
    if (!copy) return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
    if (len) memcpy(copy, data, len);
  }
  wmeta *m = NULL;
  for (size_t i = 0; i < w->nmeta; i++)
    if (strcmp(w->meta[i].key, key) == 0) m = &w->meta[i];
  if (!m) {
    if (w->nmeta == w->meta_cap) {
      size_t ncap = w->meta_cap ? w->meta_cap * 2 : 8;
      wmeta *nm = realloc(w->meta, ncap * sizeof *nm);
      if (!nm) {
        free(copy);
        return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
      }
      w->meta = nm;
      w->meta_cap = ncap;
    }
    m = &w->meta[w->nmeta];
    memset(m, 0, sizeof *m);
    if (!(m->key = malloc(klen + 1))) {
      free(copy);
      return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
    }
    memcpy(m->key, key, klen + 1);
    w->nmeta++;
  }
  free(m->data);
  m->type = type;
  m->num = num;
  m->data = copy;
  m->len = len;
  return CAIRN_OK;
}

cairn_status cairn_ckpt_writer_meta_u64(cairn_ckpt_writer *w, const char *key, uint64_t v) {
  return meta_set(w, "ckpt_writer_meta_u64", key, CAIRN_META_U64, v, NULL, 0);
}
cairn_status cairn_ckpt_writer_meta_i64(cairn_ckpt_writer *w, const char *key, int64_t v) {
  return meta_set(w, "ckpt_writer_meta_i64", key, CAIRN_META_I64, (uint64_t)v, NULL, 0);
}
cairn_status cairn_ckpt_writer_meta_f64(cairn_ckpt_writer *w, const char *key, double v) {
  uint64_t bits;
  memcpy(&bits, &v, 8);
  return meta_set(w, "ckpt_writer_meta_f64", key, CAIRN_META_F64, bits, NULL, 0);
}
cairn_status cairn_ckpt_writer_meta_bool(cairn_ckpt_writer *w, const char *key, int v) {
  return meta_set(w, "ckpt_writer_meta_bool", key, CAIRN_META_BOOL, v != 0, NULL, 0);
}
cairn_status cairn_ckpt_writer_meta_str(cairn_ckpt_writer *w, const char *key, const char *v) {
  if (!v) return cairn__fail(CAIRN_E_NULL, "ckpt_writer_meta_str: value is NULL");
  size_t len = strlen(v);
  if (!cairn__ck_utf8_ok((const unsigned char *)v, len, 0))
    return cairn__fail(CAIRN_E_INVALID, "ckpt_writer_meta_str: '%s': value is not valid UTF-8", key ? key : "");
  return meta_set(w, "ckpt_writer_meta_str", key, CAIRN_META_STR, 0, v, len);
}
cairn_status cairn_ckpt_writer_meta_bytes(cairn_ckpt_writer *w, const char *key, const void *v, size_t len) {
  if (!v && len) return cairn__fail(CAIRN_E_NULL, "ckpt_writer_meta_bytes: value is NULL");
  return meta_set(w, "ckpt_writer_meta_bytes", key, CAIRN_META_BYTES, 0, v, len);
}

/* ---- index (the sort orders the commit writes) ---------------------------------------------------------------------- */

static int cmp_meta(const void *a, const void *b) {
  return strcmp(((const wmeta *)a)->key, ((const wmeta *)b)->key);
}

static int cmp_ent(const void *a, const void *b) {
  const ck_entry *x = *(ck_entry *const *)a, *y = *(ck_entry *const *)b;
  return cairn__ck_cmp_bytes(x->name, x->name_len, y->name, y->name_len);
}

cairn_status cairn__ckw_build_meta(cairn_ckpt_writer *w, unsigned char **out, uint64_t *size) {
  if (w->nmeta > 1) qsort(w->meta, w->nmeta, sizeof *w->meta, cmp_meta);
  uint64_t n = CK_META_FIXED;
  for (size_t i = 0; i < w->nmeta; i++) {
    const wmeta *m = &w->meta[i];
    n += 2 + strlen(m->key);
    n += m->type == CAIRN_META_BOOL ? 1 : (m->type == CAIRN_META_STR || m->type == CAIRN_META_BYTES) ? 4 + m->len : 8;
  }
  if (w->nmeta > UINT32_MAX || n > SIZE_MAX / 2)
    return cairn__fail(CAIRN_E_LIMIT, "ckpt_writer_commit: '%s': metadata too large", w->path);
  unsigned char *b = malloc((size_t)n), *p = b;
  if (!b) return cairn__fail(CAIRN_E_NOMEM, "ckpt_writer_commit: out of memory for %llu bytes of metadata",
                             (unsigned long long)n);
  memcpy(p, CK_TAG_META, 4);
  ck_put32(p + 4, (uint32_t)w->nmeta);
  ck_put64(p + 8, n);
  p += 16;
  for (size_t i = 0; i < w->nmeta; i++) {
    const wmeta *m = &w->meta[i];
    size_t kl = strlen(m->key);
    *p++ = m->type;
    *p++ = (unsigned char)kl;
    memcpy(p, m->key, kl);
    p += kl;
    if (m->type == CAIRN_META_BOOL) {
      *p++ = (unsigned char)m->num;
    } else if (m->type == CAIRN_META_STR || m->type == CAIRN_META_BYTES) {
      ck_put32(p, (uint32_t)m->len);
      if (m->len) memcpy(p + 4, m->data, m->len);
      p += 4 + m->len;
    } else {
      ck_put64(p, m->num);
      p += 8;
    }
  }
  ck_put32(p, ck_crc_masked(b, (size_t)n - 4));
  *out = b;
  *size = n;
  return CAIRN_OK;
}

cairn_status cairn__ckw_build_index(cairn_ckpt_writer *w, unsigned char **out, uint64_t *size) {
  ck_entry **order = malloc((w->n ? w->n : 1) * sizeof *order);
  if (!order) return cairn__fail(CAIRN_E_NOMEM, "ckpt_writer_commit: out of memory for the index");
  uint64_t n = CK_INDEX_FIXED;
  for (size_t i = 0; i < w->n; i++) {
    order[i] = &w->ents[i];
    n += CK_IENTRY_FIXED + 8u * w->ents[i].rank + w->ents[i].name_len + (uint64_t)CK_ICHUNK * w->ents[i].n_chunks;
  }
  if (w->n > 1) qsort(order, w->n, sizeof *order, cmp_ent);
  unsigned char *b = n <= SIZE_MAX / 2 ? malloc((size_t)n) : NULL, *p = b;
  if (!b) {
    free(order);
    return cairn__fail(CAIRN_E_NOMEM, "ckpt_writer_commit: out of memory for %llu bytes of index",
                       (unsigned long long)n);
  }
  memcpy(p, CK_TAG_INDEX, 4);
  ck_put32(p + 4, 0);
  ck_put64(p + 8, w->n);
  p += 16;
  for (size_t i = 0; i < w->n; i++) {
    const ck_entry *e = order[i];
    cairn__ck_entry_put(p, e);
    p += CK_IENTRY_FIXED;
    for (int d = 0; d < e->rank; d++, p += 8) ck_put64(p, e->shape[d]);
    memcpy(p, e->name, e->name_len);
    p += e->name_len;
    for (uint32_t k = 0; k < e->n_chunks; k++, p += CK_ICHUNK) {
      p[0] = e->chunks[k].codec;
      p[1] = p[2] = p[3] = 0;
      ck_put32(p + 4, e->chunks[k].raw);
      ck_put32(p + 8, e->chunks[k].stored);
      ck_put32(p + 12, ck_mask(e->chunks[k].crc));
    }
  }
  ck_put32(p, ck_crc_masked(b, (size_t)n - 4));
  free(order);
  *out = b;
  *size = n;
  return CAIRN_OK;
}
