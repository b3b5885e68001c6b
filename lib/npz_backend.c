/* NumPy .npz as a checkpoint format behind cairn_ckpt_open and
 * cairn_ckpt_out (ckpt_backend.h), beside cairn's own, the TF bundle and
 * safetensors. The archive is read by npz_read.c with every check of
 * cairn_npz_reader_open (end records before any allocation, no overlapping
 * members, safe and unique names, stored or deflate only); each member
 * "<name>.npy" is the tensor <name>, described by its .npy header, which
 * open reads (and checks) for every member without reading the data. A read
 * streams the member again: inflated, byte order and bools fixed, a
 * Fortran-order array transposed (bounded), and the member's CRC-32 and
 * size checked at its end, so a read or a verify fails on damaged data as
 * cairn_npz_reader_import does, naming the file and the member. The archive
 * has no metadata. Messages begin with the call (ckpt_open, ckpt_read,
 * ckpt_verify) and name the file and the member. Writing is
 * cairn_npz_writer_* (npz_write.c). */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#include "ckpt_backend.h"
#include "interop_impl.h"
#include "npz_impl.h"

typedef unsigned long long ull;

static void npz_close(void *p) { cairn_npz_reader_close(p); }

/* ---- open: one entry per member ------------------------------------------------ */

static cairn_status entry_header(void *u, cairn_dtype dt, int rank, const int64_t *shape, uint64_t nbytes) {
  ck_entry *e = u;
  e->dtype = (uint8_t)dt;
  e->rank = (uint8_t)rank;
  for (int k = 0; k < rank; k++) e->shape[k] = (uint64_t)shape[k];
  e->raw_bytes = e->stored_bytes = nbytes;
  return CAIRN_OK;
}

/* The name of member i as a tensor: "<name>.npy" without its suffix, into
 * the arena at *at (advanced past its NUL). */
static cairn_status member_name(const cairn_npz_reader *r, size_t i, char **at, ck_entry *e) {
  const char *m = cairn_npz_reader_name(r, i);
  size_t ml = strlen(m);
  if (ml <= 4 || strcmp(m + ml - 4, ".npy") != 0)
    return cairn__fail(CAIRN_E_UNSUPPORTED,
                       "ckpt_open: '%s': member %zu '%.200s' is not a .npy array (a checkpoint's members are "
                       "\"<tensor name>.npy\"; ckpt-inspect import skips such members)",
                       r->path, i, m);
  if (!cairn__ck_name_ok((const unsigned char *)m, ml - 4))
    return cairn__fail(CAIRN_E_FORMAT,
                       "ckpt_open: '%s': member %zu '%.200s': the tensor name is not 1..1024 bytes of UTF-8 without "
                       "control characters",
                       r->path, i, m);
  memcpy(*at, m, ml - 4);
  (*at)[ml - 4] = '\0';
  e->name = *at;
  e->name_len = (uint16_t)(ml - 4);
  *at += ml - 3;
  return CAIRN_OK;
}

/* The view: every member's name and .npy header, within the limits. */
static cairn_status npz_fill_view(cairn_npz_reader *r, const cairn_ckpt_limits *lim, ck_view *v) {
  size_t n = cairn_npz_reader_count(r), bytes = 1;
  if (n > lim->max_tensors)
    return cairn__fail(CAIRN_E_LIMIT, "ckpt_open: '%s': %zu members, more than the limit of %llu tensors", r->path, n,
                       (ull)lim->max_tensors);
  for (size_t i = 0; i < n; i++) bytes += strlen(cairn_npz_reader_name(r, i)) + 1;
  v->ents = calloc(n ? n : 1, sizeof *v->ents);
  v->names = malloc(bytes);
  v->meta = calloc(1, sizeof *v->meta);
  if (!v->ents || !v->names || !v->meta) return cairn__fail(CAIRN_E_NOMEM, "ckpt_open: '%s': out of memory", r->path);
  char *at = v->names;
  for (size_t i = 0; i < n; i++) {
    ck_entry *e = &v->ents[i];
    cairn_status st = member_name(r, i, &at, e);
    npz_sink k = {.header = entry_header, .u = e, .fn = "ckpt_open"};
    if (!st) st = cairn__npz_member_stream(r, i, &k);
    if (st) return st;
    if (e->raw_bytes > lim->max_tensor_bytes)
      return cairn__fail(CAIRN_E_LIMIT,
                         "ckpt_open: '%s': member '%s.npy' holds %llu bytes, more than the limit of %llu", r->path,
                         e->name, (ull)e->raw_bytes, (ull)lim->max_tensor_bytes);
    e->seq = (uint32_t)i; /* the member to stream */
    v->n = i + 1;
  }
  size_t dup = cairn__view_sort(v->ents, v->n);
  if (dup != v->n)
    return cairn__fail(CAIRN_E_FORMAT, "ckpt_open: '%s': tensor '%s' appears twice", r->path, v->ents[dup].name);
  return CAIRN_OK;
}

static cairn_status npz_open(const ck_source *src, const cairn_ckpt_limits *lim, void **state, ck_view *v) {
  *state = NULL;
  if (src->fd < 0) return cairn__fail(CAIRN_E_IO, "ckpt_open: '%s': %s", src->path, src->open_why);
  cairn_npz_reader *r = NULL;
  cairn_status st = cairn__npz_reader_open_fd(src->fd, "ckpt_open", src->path, &r, NULL);
  if (!st) st = npz_fill_view(r, lim, v);
  return cairn__ck_open_done(st, v, src->fd, src->path, r, npz_close, state);
}

/* ---- reading: the member streamed again ----------------------------------------- */

typedef struct into_mem {
  const ck_entry *e;
  unsigned char *dst; /* NULL: verify only */
  uint64_t at;
} into_mem;

/* The header the read finds is the one open found (the file is watched,
 * but a read must never write past dst). */
static cairn_status mem_header(void *u, cairn_dtype dt, int rank, const int64_t *shape, uint64_t nbytes) {
  (void)shape;
  into_mem *m = u;
  if ((int)dt != m->e->dtype || rank != m->e->rank || nbytes != m->e->raw_bytes)
    return cairn__fail(CAIRN_E_CORRUPT, "ckpt_read: tensor '%s': the member's .npy header changed since the open",
                       m->e->name);
  return CAIRN_OK;
}

static cairn_status mem_data(void *u, const unsigned char *p, size_t n) {
  into_mem *m = u;
  if (n > m->e->raw_bytes - m->at)
    return cairn__fail(CAIRN_E_CORRUPT, "ckpt_read: tensor '%s': more data than its %llu bytes", m->e->name,
                       (ull)m->e->raw_bytes);
  if (m->dst) memcpy(m->dst + m->at, p, n);
  m->at += n;
  return CAIRN_OK;
}

static cairn_status npz_stream(cairn_npz_reader *r, const ck_entry *e, unsigned char *dst) {
  into_mem m = {.e = e, .dst = dst};
  npz_sink k = {.header = mem_header, .data = mem_data, .u = &m, .fn = dst ? "ckpt_read" : "ckpt_verify"};
  return cairn__npz_member_stream(r, e->seq, &k);
}

static cairn_status npz_read(void *p, const ck_entry *e, unsigned char *dst) { return npz_stream(p, e, dst); }

static cairn_status npz_read_pieces(void *p, const ck_entry *e, cairn_ckpt_piece_fn fn, void *user) {
  /* Whole, so that fn sees the bytes only after the member's CRC-32 passed. */
  return cairn__ck_pieces_whole(npz_read, p, ((cairn_npz_reader *)p)->path, e, fn, user);
}

static cairn_status npz_verify_tensor(void *p, const ck_entry *e) { return npz_stream(p, e, NULL); }

static cairn_status npz_verify(void *p, const ck_entry *ents, size_t n) {
  cairn_status st = CAIRN_OK;
  for (size_t i = 0; i < n && !st; i++) st = npz_stream(p, &ents[i], NULL);
  return st;
}

/* ---- writing: cairn_npz_writer_* ------------------------------------------------ */

static cairn_status npz_wopen(const char *path, const cairn_ckpt_write_options *o, void **w) {
  (void)o;
  return cairn_npz_writer_open(path, (cairn_npz_writer **)w);
}
CK_WRITE_ADAPTERS(npz, cairn_npz_writer, cairn_npz_writer_add, cairn_npz_writer_commit, cairn_npz_writer_abort)

const ck_backend cairn__ck_npz = {
    .name = "npz", .open = npz_open, .read = npz_read, .read_pieces = npz_read_pieces,
    .verify_tensor = npz_verify_tensor, .verify = npz_verify, .codecs = cairn__ck_codecs_raw, .close = npz_close,
    .wopen = npz_wopen, .wadd = npz_wadd, .wcommit = npz_wcommit, .wabort = npz_wabort};
