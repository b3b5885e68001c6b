/* LevelDB table reader and writer (leveldb_table.h), for TensorFlow's
 * bundle index. Written from the table format description (LevelDB's
 * doc/table_format.md): nothing in a block is looked at before its CRC
 * verifies, every varint and length is bounds-checked against the block,
 * and decompressed sizes are checked against the caller's limit first. */
#include "leveldb_table.h"

#include <snappy-c.h>
#include <stdlib.h>
#include <string.h>

typedef unsigned long long ull;

int cairn__ldb_footer_magic(const unsigned char *footer) { return ck_get64(footer + 40) == LDB_MAGIC; }

/* ---- reader ------------------------------------------------------------------------ */

typedef struct handle {
  uint64_t off, size;
} handle;

static size_t get_handle(const unsigned char *p, const unsigned char *end, handle *h) {
  size_t a = cairn__varint_get(p, end, &h->off), b;
  if (!a || !(b = cairn__varint_get(p + a, end, &h->size))) return 0;
  return a + b;
}

typedef struct rd {
  const char *path;
  int fd;
  uint64_t size, max_block, caller_max;
  /* The block being looked at, as stored (with its trailer) and decoded:
   * one block in memory at a time, never the whole file. */
  unsigned char *raw, *dec;
  size_t rawcap, deccap;
  unsigned char *key; /* the previous key (strictly ascending across the table) */
  size_t klen, kcap;
  int have_key;
  ldb_fn fn;
  void *ctx;
} rd;

/* The block at h, read, CRC-checked and decompressed into r's buffers:
 * *out is valid until the next load. */
static cairn_status load_block(rd *r, handle h, const char *what, const unsigned char **out, size_t *len) {
  uint64_t end;
  if (__builtin_add_overflow(h.off, h.size, &end) || __builtin_add_overflow(end, LDB_TRAILER, &end) ||
      end > r->size - LDB_FOOTER)
    return cairn__fail(CAIRN_E_FORMAT, "'%s': %s at offset %llu of %llu bytes runs past the blocks (file of %llu bytes)",
                       r->path, what, (ull)h.off, (ull)h.size, (ull)r->size);
  if (!cairn__grow((void **)&r->raw, &r->rawcap, (size_t)h.size + LDB_TRAILER, 1))
    return cairn__fail(CAIRN_E_NOMEM, "'%s': out of memory for a block of %llu bytes", r->path, (ull)h.size);
  cairn_status st = cairn__ck_pread(r->fd, r->raw, (size_t)h.size + LDB_TRAILER, h.off, r->path, what);
  if (st) return st;
  const unsigned char *b = r->raw;
  unsigned type = b[h.size];
  uint32_t want = ck_unmask(ck_get32(b + h.size + 1));
  uint32_t got = cairn_crc32c(cairn_crc32c(0, b, (size_t)h.size), b + h.size, 1);
  if (want != got)
    return cairn__fail(CAIRN_E_CORRUPT, "'%s' offset %llu: %s: checksum mismatch (stored %08x, computed %08x)", r->path,
                       (ull)h.off, what, want, got);
  if (type == 0) {
    *out = b;
    *len = (size_t)h.size;
    return CAIRN_OK;
  }
  if (type != 1)
    return cairn__fail(CAIRN_E_UNSUPPORTED,
                       "'%s' offset %llu: %s: unknown block compression type %u in the TensorFlow index (LevelDB table): "
                       "only 0 (none) and 1 (Snappy) are defined by the table format",
                       r->path, (ull)h.off, what, type);
  size_t n;
  if (snappy_uncompressed_length((const char *)b, (size_t)h.size, &n) != SNAPPY_OK)
    return cairn__fail(CAIRN_E_CORRUPT, "'%s' offset %llu: %s: Snappy block at offset %llu does not decode (its length "
                       "preamble is malformed)", r->path, (ull)h.off, what, (ull)h.off);
  if (n > r->max_block)
    return cairn__fail(CAIRN_E_LIMIT, "'%s' offset %llu: %s decompresses to %zu bytes, over the limit %llu%s", r->path,
                       (ull)h.off, what, n, (ull)r->max_block,
                       r->max_block < r->caller_max
                           ? " (twice the index file + 16 MiB: a block cannot expand beyond what the file honestly "
                             "holds; TensorFlow writes its index uncompressed)"
                           : "");
  if (!cairn__grow((void **)&r->dec, &r->deccap, n ? n : 1, 1))
    return cairn__fail(CAIRN_E_NOMEM, "'%s': out of memory for a block of %zu bytes", r->path, n);
  size_t dn = n;
  if (snappy_uncompress((const char *)b, (size_t)h.size, (char *)r->dec, &dn) != SNAPPY_OK || dn != n)
    return cairn__fail(CAIRN_E_CORRUPT, "'%s' offset %llu: %s: Snappy block at offset %llu does not decode", r->path,
                       (ull)h.off, what, (ull)h.off);
  *out = r->dec;
  *len = n;
  return CAIRN_OK;
}

/* Walks the entries of one decoded block: for data blocks (fn set) checks
 * the key order and calls r->fn; for the index block collects handles. */
typedef cairn_status (*entry_fn)(rd *r, void *x, const unsigned char *key, size_t klen, const unsigned char *val,
                                 size_t vlen);

static cairn_status walk_block(rd *r, uint64_t at, const char *what, const unsigned char *b, size_t n, entry_fn fn,
                               void *x) {
  if (n < 4) return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: %s of %zu bytes has no restart count", r->path, (ull)at, what, n);
  uint32_t nr = ck_get32(b + n - 4);
  if (nr == 0 || nr > (n - 4) / 4)
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: %s: %u restart points do not fit in %zu bytes", r->path, (ull)at,
                       what, nr, n);
  size_t roff = n - 4 - 4u * (size_t)nr, ri = 0;
  const unsigned char *rs = b + roff;
  const unsigned char *p = b, *end = b + roff;
  unsigned char *key = NULL;
  size_t klen = 0, kcap = 0;
  cairn_status s = CAIRN_OK;
  while (p < end && !s) {
    uint64_t sh, ns, vl;
    size_t a, c, d;
    size_t eoff = (size_t)(p - b);
    if (!(a = cairn__varint_get(p, end, &sh)) || !(c = cairn__varint_get(p + a, end, &ns)) ||
        !(d = cairn__varint_get(p + a + c, end, &vl)) || sh > klen || ns > (uint64_t)(end - p - a - c - d) ||
        vl > (uint64_t)(end - p - a - c - d) - ns) {
      s = cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: %s: entry at block offset %zu is malformed", r->path, (ull)at,
                      what, eoff);
      break;
    }
    if (ri < nr && ck_get32(rs + 4 * ri) == eoff) {
      if (sh != 0) {
        s = cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: %s: restart point at %zu shares key bytes", r->path, (ull)at,
                        what, eoff);
        break;
      }
      ri++;
    } else if (ri < nr && ck_get32(rs + 4 * ri) < eoff) {
      s = cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: %s: restart point %zu (%u) is not an entry", r->path, (ull)at, what,
                      ri, ck_get32(rs + 4 * ri));
      break;
    } else if (eoff == 0) {
      s = cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: %s: the first entry is not a restart point", r->path, (ull)at, what);
      break;
    }
    p += a + c + d;
    size_t nk = (size_t)(sh + ns);
    if (!cairn__grow((void **)&key, &kcap, nk + 1, 1)) {
      s = cairn__fail(CAIRN_E_NOMEM, "'%s': out of memory", r->path);
      break;
    }
    memcpy(key + sh, p, (size_t)ns);
    klen = nk;
    key[nk] = '\0'; /* names in messages are C strings */
    p += ns;
    s = fn(r, x, key, klen, p, (size_t)vl);
    p += vl;
  }
  /* An empty block has the single restart point 0. */
  if (!s && ri != nr && !(roff == 0 && nr == 1 && ck_get32(rs) == 0))
    s = cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: %s: %u restart points, %zu of them at entries", r->path, (ull)at, what,
                    nr, ri);
  free(key);
  return s;
}

typedef struct idx_ent {
  handle h;
  unsigned char *key;
  size_t klen;
} idx_ent;

typedef struct idx_list {
  idx_ent *v;
  size_t n, cap;
} idx_list;

static cairn_status on_index(rd *r, void *x, const unsigned char *key, size_t klen, const unsigned char *val,
                             size_t vlen) {
  idx_list *l = x;
  handle h;
  if (get_handle(val, val + vlen, &h) != vlen)
    return cairn__fail(CAIRN_E_FORMAT, "'%s': index block: the value of entry %zu is not a block handle", r->path, l->n);
  if (!cairn__grow((void **)&l->v, &l->cap, l->n + 1, sizeof *l->v) || !(l->v[l->n].key = malloc(klen ? klen : 1)))
    return cairn__fail(CAIRN_E_NOMEM, "'%s': out of memory", r->path);
  memcpy(l->v[l->n].key, key, klen);
  l->v[l->n].klen = klen;
  l->v[l->n++].h = h;
  return CAIRN_OK;
}

static cairn_status on_meta(rd *r, void *x, const unsigned char *key, size_t klen, const unsigned char *val, size_t vlen) {
  (void)r, (void)x, (void)key, (void)klen, (void)val, (void)vlen;
  return CAIRN_OK; /* TensorFlow writes no meta blocks; others' entries are ignored */
}

static cairn_status on_data(rd *r, void *x, const unsigned char *key, size_t klen, const unsigned char *val, size_t vlen) {
  const idx_ent *ie = x;
  uint64_t at = ie->h.off;
  if (r->have_key && cairn__ck_cmp_bytes(r->key, r->klen, key, klen) >= 0)
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: keys are not strictly ascending", r->path, (ull)at);
  if (cairn__ck_cmp_bytes(key, klen, ie->key, ie->klen) > 0)
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: a key is above its index entry", r->path, (ull)at);
  if (!cairn__grow((void **)&r->key, &r->kcap, klen + 1, 1)) return cairn__fail(CAIRN_E_NOMEM, "'%s': out of memory", r->path);
  memcpy(r->key, key, klen);
  r->klen = klen;
  r->have_key = 1;
  ldb_kv kv = {.key = key, .klen = klen, .val = val, .vlen = vlen, .block_at = at};
  return r->fn(r->ctx, &kv);
}

cairn_status cairn__ldb_read(const char *path, int fd, uint64_t size, uint64_t max_block, ldb_fn fn, void *ctx) {
  if (size < LDB_FOOTER)
    return cairn__fail(CAIRN_E_TRUNCATED, "'%s' is %llu bytes, too short for a table footer", path, (ull)size);
  unsigned char ft[LDB_FOOTER];
  cairn_status s0 = cairn__ck_pread(fd, ft, LDB_FOOTER, size - LDB_FOOTER, path, "table footer");
  if (s0) return s0;
  if (!cairn__ldb_footer_magic(ft))
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: no LevelDB table magic in the footer", path, (ull)(size - 8));
  handle mh, ih;
  size_t a = get_handle(ft, ft + 40, &mh), b = a ? get_handle(ft + a, ft + 40, &ih) : 0;
  if (!a || !b)
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: the footer's block handles are malformed", path,
                       (ull)(size - LDB_FOOTER));
  if (!ck_all_zero(ft + a + b, 40 - a - b))
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: the footer's padding is not zero", path,
                       (ull)(size - LDB_FOOTER + a + b));
  /* A decoded block is bounded by what the file can honestly hold, not
   * only by the caller's limit: Snappy expands up to 21 times, and the
   * reader's memory must stay proportional to the file
   * (doc/interop-formats.md). */
  uint64_t honest = 2 * size + ((uint64_t)16 << 20);
  rd r = {.path = path, .fd = fd, .size = size, .max_block = max_block < honest ? max_block : honest,
          .caller_max = max_block, .fn = fn, .ctx = ctx};
  idx_list il = {0};
  const unsigned char *blk;
  size_t len;
  cairn_status s = load_block(&r, mh, "metaindex block", &blk, &len);
  if (!s) s = walk_block(&r, mh.off, "metaindex block", blk, len, on_meta, NULL);
  if (!s) s = load_block(&r, ih, "index block", &blk, &len);
  if (!s) s = walk_block(&r, ih.off, "index block", blk, len, on_index, &il);
  /* The blocks tile the file: data blocks from 0, then metaindex, index, footer. */
  uint64_t at = 0;
  for (size_t i = 0; i < il.n && !s; i++) {
    if (il.v[i].h.off != at) {
      s = cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: data block %zu starts at %llu, not right after the previous one",
                      path, (ull)at, i, (ull)il.v[i].h.off);
      break;
    }
    if ((s = load_block(&r, il.v[i].h, "data block", &blk, &len))) break;
    s = walk_block(&r, il.v[i].h.off, "data block", blk, len, on_data, &il.v[i]);
    at = il.v[i].h.off + il.v[i].h.size + LDB_TRAILER;
  }
  if (!s && (mh.off != at || ih.off != mh.off + mh.size + LDB_TRAILER || ih.off + ih.size + LDB_TRAILER != size - LDB_FOOTER))
    s = cairn__fail(CAIRN_E_FORMAT,
                    "'%s': the blocks do not tile the file (data ends at %llu, metaindex at %llu+%llu, index at "
                    "%llu+%llu, footer at %llu)",
                    path, (ull)at, (ull)mh.off, (ull)mh.size, (ull)ih.off, (ull)ih.size, (ull)(size - LDB_FOOTER));
  for (size_t i = 0; i < il.n; i++) free(il.v[i].key);
  free(il.v);
  free(r.key);
  free(r.raw);
  free(r.dec);
  return s;
}

/* ---- writer ------------------------------------------------------------------------ */

#define LDB_BLOCK_TARGET 4096u
#define LDB_RESTART_EVERY 16u

void cairn__ldb_writer_init(ldb_writer *w, int snappy) {
  memset(w, 0, sizeof *w);
  w->snappy = snappy;
}

void cairn__ldb_writer_free(ldb_writer *w) {
  free(w->out);
  free(w->blk);
  free(w->restarts);
  free(w->last);
  free(w->index);
  free(w->irestarts);
  memset(w, 0, sizeof *w);
}

static int put_bytes(unsigned char **p, size_t *len, size_t *cap, const void *b, size_t n) {
  if (!cairn__grow((void **)p, cap, *len + n + 1, 1)) return -1;
  if (n) memcpy(*p + *len, b, n);
  *len += n;
  return 0;
}

static int put_varint(unsigned char **p, size_t *len, size_t *cap, uint64_t v) {
  unsigned char b[10];
  return put_bytes(p, len, cap, b, cairn__varint_put(b, v));
}

/* entry: shared, unshared, value length, key suffix, value. */
static int put_entry(unsigned char **p, size_t *len, size_t *cap, size_t shared, const unsigned char *key, size_t klen,
                     const void *val, size_t vlen) {
  return put_varint(p, len, cap, shared) || put_varint(p, len, cap, klen - shared) || put_varint(p, len, cap, vlen) ||
         put_bytes(p, len, cap, key + shared, klen - shared) || put_bytes(p, len, cap, val, vlen);
}

/* Appends block contents + restarts as a block with trailer to out; *h gets its handle. */
static int emit_block(ldb_writer *w, unsigned char **bp, size_t *blen, size_t *bcap, const uint32_t *rs, size_t nr,
                      handle *h) {
  unsigned char u[4];
  unsigned char *b = *bp;
  for (size_t i = 0; i < nr; i++) {
    ck_put32(u, rs[i]);
    if (put_bytes(&b, blen, bcap, u, 4)) {
      *bp = b;
      return -1;
    }
    *bp = b;
  }
  ck_put32(u, (uint32_t)nr);
  if (put_bytes(&b, blen, bcap, u, 4)) return -1;
  *bp = b;
  const unsigned char *store = b;
  size_t slen = *blen;
  unsigned char type = 0, *comp = NULL;
  if (w->snappy) {
    size_t cl = snappy_max_compressed_length(*blen);
    comp = malloc(cl);
    if (!comp) return -1;
    /* LevelDB keeps the compressed form only when it saves at least 1/8. */
    if (snappy_compress((const char *)b, *blen, (char *)comp, &cl) == SNAPPY_OK && cl < *blen - *blen / 8) {
      store = comp;
      slen = cl;
      type = 1;
    }
  }
  h->off = w->len;
  h->size = slen;
  unsigned char tr[5];
  tr[0] = type;
  ck_put32(tr + 1, ck_mask(cairn_crc32c(cairn_crc32c(0, store, slen), &type, 1)));
  int r = put_bytes(&w->out, &w->len, &w->cap, store, slen) || put_bytes(&w->out, &w->len, &w->cap, tr, 5);
  free(comp);
  return r ? -1 : 0;
}

static int flush_data(ldb_writer *w) {
  if (!w->blen) return 0;
  handle h;
  if (emit_block(w, &w->blk, &w->blen, &w->bcap, w->restarts, w->nrestarts, &h)) return -1;
  w->blen = 0;
  w->nrestarts = 0;
  w->since_restart = 0;
  unsigned char hv[20];
  size_t hl = cairn__varint_put(hv, h.off);
  hl += cairn__varint_put(hv + hl, h.size);
  /* Index key: the block's last key (≥ its keys, < the next block's). */
  if (!cairn__grow((void **)&w->irestarts, &w->ircap, w->nirestarts + 1, sizeof *w->irestarts)) return -1;
  w->irestarts[w->nirestarts++] = (uint32_t)w->ilen;
  return put_entry(&w->index, &w->ilen, &w->icap, 0, w->last, w->lastlen, hv, hl);
}

int cairn__ldb_writer_add(ldb_writer *w, const void *key, size_t klen, const void *val, size_t vlen) {
  if (w->failed) return -1;
  size_t shared = 0;
  if (w->since_restart % LDB_RESTART_EVERY == 0) {
    if (!cairn__grow((void **)&w->restarts, &w->rcap, w->nrestarts + 1, sizeof *w->restarts)) goto fail;
    w->restarts[w->nrestarts++] = (uint32_t)w->blen;
  } else {
    while (shared < klen && shared < w->lastlen && w->last[shared] == ((const unsigned char *)key)[shared]) shared++;
  }
  if (put_entry(&w->blk, &w->blen, &w->bcap, shared, key, klen, val, vlen)) goto fail;
  w->since_restart++;
  if (!cairn__grow((void **)&w->last, &w->lastcap, klen + 1, 1)) goto fail;
  memcpy(w->last, key, klen);
  w->lastlen = klen;
  if (w->blen >= LDB_BLOCK_TARGET && flush_data(w)) goto fail;
  return 0;
fail:
  w->failed = 1;
  return -1;
}

int cairn__ldb_writer_finish(ldb_writer *w) {
  if (w->failed || flush_data(w)) return -1;
  handle mh, ih;
  unsigned char *mb = NULL;
  size_t ml = 0, mc = 0;
  uint32_t zero = 0;
  int r = emit_block(w, &mb, &ml, &mc, &zero, 1, &mh);
  free(mb);
  if (r) return -1;
  if (!w->nirestarts) { /* no data block: an empty index block */
    if (!cairn__grow((void **)&w->irestarts, &w->ircap, 1, sizeof *w->irestarts)) return -1;
    w->irestarts[w->nirestarts++] = 0;
  }
  if (emit_block(w, &w->index, &w->ilen, &w->icap, w->irestarts, w->nirestarts, &ih)) return -1;
  unsigned char ft[LDB_FOOTER] = {0};
  size_t a = cairn__varint_put(ft, mh.off);
  a += cairn__varint_put(ft + a, mh.size);
  a += cairn__varint_put(ft + a, ih.off);
  cairn__varint_put(ft + a, ih.size);
  ck_put64(ft + 40, LDB_MAGIC);
  return put_bytes(&w->out, &w->len, &w->cap, ft, LDB_FOOTER);
}
