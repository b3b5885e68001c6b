/* Helpers shared by the foreign-format backends (interop_impl.h). */
#define _GNU_SOURCE 1
#include "interop_impl.h"

#include "cairn/runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

cairn_status cairn__tmpfile_open(ck_tmpfile *f, const char *fn, const char *path) {
  memset(f, 0, sizeof *f);
  f->fd = -1;
  size_t n = strlen(path);
  f->path = strdup(path);
  f->tmp = malloc(n + 16);
  if (!f->path || !f->tmp) {
    free(f->path);
    free(f->tmp);
    return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  }
  snprintf(f->tmp, n + 16, "%s.tmp.XXXXXX", path);
  f->fd = mkostemp(f->tmp, O_CLOEXEC);
  if (f->fd < 0) {
    int e = errno;
    free(f->path);
    free(f->tmp);
    f->path = f->tmp = NULL;
    return cairn__fail(CAIRN_E_IO, "%s: cannot create a temporary file next to '%s': %s", fn, path, strerror(e));
  }
  /* mkstemp makes 0600; a checkpoint gets what the umask allows, like cairn's own. */
  mode_t um = umask(0);
  umask(um);
  (void)fchmod(f->fd, 0666 & ~um);
  return CAIRN_OK;
}

cairn_status cairn__tmpfile_write(ck_tmpfile *f, const char *fn, const void *p, size_t len) {
  const unsigned char *b = p;
  while (len) {
    ssize_t w = write(f->fd, b, len > ((size_t)1 << 30) ? (size_t)1 << 30 : len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int e = w < 0 ? errno : ENOSPC;
      return cairn__fail(e == ENOSPC ? CAIRN_E_NOSPC : CAIRN_E_IO, "%s: writing '%s' at offset %llu: %s", fn, f->tmp,
                         (unsigned long long)f->written, strerror(e));
    }
    b += w;
    len -= (size_t)w;
    f->written += (uint64_t)w;
  }
  return CAIRN_OK;
}

void cairn__tmpfile_abort(ck_tmpfile *f) {
  if (f->fd >= 0) close(f->fd);
  if (f->tmp) unlink(f->tmp);
  free(f->tmp);
  free(f->path);
  memset(f, 0, sizeof *f);
  f->fd = -1;
}

cairn_status cairn__tmpfile_commit(ck_tmpfile *f, const char *fn) {
  cairn_status s = CAIRN_OK;
  if (fsync(f->fd) != 0) {
    int e = errno;
    s = cairn__fail(CAIRN_E_IO, "%s: fsync of '%s': %s", fn, f->tmp, strerror(e));
  }
  if (close(f->fd) != 0 && !s) {
    int e = errno;
    s = cairn__fail(CAIRN_E_IO, "%s: closing '%s': %s", fn, f->tmp, strerror(e));
  }
  f->fd = -1;
  if (!s && rename(f->tmp, f->path) != 0) {
    int e = errno;
    s = cairn__fail(CAIRN_E_IO, "%s: renaming '%s' to '%s': %s", fn, f->tmp, f->path, strerror(e));
  }
  if (s) {
    cairn__tmpfile_abort(f);
    return s;
  }
  char *dir = cairn__path_dir(f->path);
  if (dir && cairn__fsync_dir(dir) != 0)
    s = cairn__fail(CAIRN_E_IO, "%s: '%s' is in place but the fsync of its directory failed: the rename may not be "
                    "durable yet", fn, f->path);
  free(dir);
  free(f->tmp);
  free(f->path);
  f->tmp = f->path = NULL;
  return s;
}

uint64_t cairn__shape_bytes(cairn_dtype dt, int rank, const uint64_t *shape, int *ok) {
  uint64_t n = cairn_dtype_size(dt);
  *ok = n != 0;
  for (int d = 0; d < rank && *ok; d++)
    if (shape[d] >= CK_MAX_DIM || __builtin_mul_overflow(n, shape[d], &n)) *ok = 0;
  return *ok ? n : 0;
}

int cairn__tensor_ok(const cairn_tensor *t) {
  if (t->rank < 0 || t->rank > CAIRN_MAX_RANK || !cairn_dtype_size(t->dtype)) return 0;
  int64_t n = 1;
  for (int d = 0; d < t->rank; d++)
    if (t->shape[d] < 0 || __builtin_mul_overflow(n, t->shape[d], &n)) return 0;
  return n == t->size && (n == 0 || t->data);
}

int cairn__bool_bytes_ok(const unsigned char *p, uint64_t n, uint64_t *bad_at) {
  for (uint64_t i = 0; i < n; i++)
    if (p[i] > 1) {
      *bad_at = i;
      return 0;
    }
  return 1;
}

static int cmp_ent(const void *a, const void *b) {
  const ck_entry *x = a, *y = b;
  return cairn__ck_cmp_bytes(x->name, x->name_len, y->name, y->name_len);
}

size_t cairn__view_sort(ck_entry *e, size_t n) {
  /* qsort's base must be a valid pointer even for n == 0 (C11 7.22.5), and
   * a view of no tensors may have none. */
  if (n) qsort(e, n, sizeof *e, cmp_ent);
  for (size_t i = 1; i < n; i++)
    if (cmp_ent(&e[i - 1], &e[i]) == 0) return i;
  return n;
}

static int cmp_meta(const void *a, const void *b) { return strcmp(((const ck_meta *)a)->key, ((const ck_meta *)b)->key); }

void cairn__view_sort_meta(ck_meta *m, size_t n) {
  if (n) qsort(m, n, sizeof *m, cmp_meta);
}

static uint64_t name_hash(const char *s) {
  uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
  return h;
}

int cairn__nameset_has(const ck_nameset *s, const char *name) {
  if (!s->cap) return 0;
  for (size_t i = (size_t)name_hash(name) & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
    if (!s->slot[i]) return 0;
    if (strcmp(s->slot[i], name) == 0) return 1;
  }
}

int cairn__nameset_put(ck_nameset *s, const char *name) {
  if (2 * (s->n + 1) > s->cap) { /* at most half full: probes stay short */
    size_t cap = s->cap ? 2 * s->cap : 64;
    const char **slot = calloc(cap, sizeof *slot);
    if (!slot) return 0;
    for (size_t k = 0; k < s->cap; k++)
      if (s->slot[k]) {
        size_t i = (size_t)name_hash(s->slot[k]) & (cap - 1);
        while (slot[i]) i = (i + 1) & (cap - 1);
        slot[i] = s->slot[k];
      }
    free(s->slot);
    s->slot = slot;
    s->cap = cap;
  }
  size_t i = (size_t)name_hash(name) & (s->cap - 1);
  while (s->slot[i]) i = (i + 1) & (s->cap - 1);
  s->slot[i] = name;
  s->n++;
  return 1;
}

void cairn__nameset_free(ck_nameset *s) {
  free(s->slot);
  memset(s, 0, sizeof *s);
}

size_t cairn__varint_get(const unsigned char *p, const unsigned char *end, uint64_t *v) {
  uint64_t r = 0;
  for (size_t i = 0; i < 10 && p + i < end; i++) {
    uint64_t b = p[i] & 0x7f;
    if (i == 9 && b > 1) return 0; /* more than 64 bits */
    r |= b << (7 * i);
    if (!(p[i] & 0x80)) {
      /* Only the shortest form: a padded varint would let a flipped bit
       * re-encode the same number without any checksum noticing (the
       * table's footer has none). */
      if (i > 0 && p[i] == 0) return 0;
      *v = r;
      return i + 1;
    }
  }
  return 0;
}

size_t cairn__varint_put(unsigned char *p, uint64_t v) {
  size_t i = 0;
  while (v >= 0x80) {
    p[i++] = (unsigned char)(v | 0x80);
    v >>= 7;
  }
  p[i++] = (unsigned char)v;
  return i;
}

/* ---- shared members of the foreign backends ---------------------------------------------- */

const char *cairn__text_skip_ws(const char *p, const char *end) {
  while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
  return p;
}

int cairn__text_eat(const char **p, const char *end, int c) {
  *p = cairn__text_skip_ws(*p, end);
  if (*p < end && **p == c) {
    ++*p;
    return 1;
  }
  return 0;
}

void cairn__ck_view_clear(ck_view *v) {
  free(v->ents);
  free(v->names);
  free(v->meta);
  free(v->meta_arena);
  memset(v, 0, sizeof *v);
}

cairn_status cairn__ck_view_watch(ck_view *v, int fd, const char *path) {
  if (fstat(fd, &v->st) != 0) {
    int e = errno;
    return cairn__fail(CAIRN_E_IO, "ckpt_open: cannot stat '%s': %s", path, strerror(e));
  }
  v->fd = fd;
  return CAIRN_OK;
}

cairn_status cairn__ck_open_done(cairn_status st, ck_view *v, int fd, const char *path, void *state,
                                 void (*close_state)(void *), void **out) {
  if (!st) st = cairn__ck_view_watch(v, fd, path);
  if (st) {
    cairn__ck_view_clear(v);
    close_state(state);
    return st;
  }
  v->major = 0;
  v->minor = 0;
  *out = state;
  return CAIRN_OK;
}

cairn_status cairn__ck_pieces_whole(cairn_status (*read)(void *, const ck_entry *, unsigned char *), void *state,
                                    const char *path, const ck_entry *e, cairn_ckpt_piece_fn fn, void *user) {
  if (!e->raw_bytes) return CAIRN_OK;
  unsigned char *buf = e->raw_bytes <= SIZE_MAX ? cairn_alloc((size_t)e->raw_bytes) : NULL;
  if (!buf)
    return cairn__fail(CAIRN_E_NOMEM, "'%s': '%s': out of memory for %llu bytes", path, e->name,
                       (unsigned long long)e->raw_bytes);
  cairn_status s = read(state, e, buf);
  if (!s) s = fn(user, 0, buf, (size_t)e->raw_bytes);
  cairn_free(buf);
  return s;
}

unsigned cairn__ck_codecs_raw(void *state, const ck_entry *e) {
  (void)state;
  return e->raw_bytes ? 1u << CK_CODEC_RAW : 0;
}
