/* safetensors: reader backend (ckpt_backend.h) and writer (cairn/interop.h).
 *
 * The file: an 8-byte little-endian header length N, N bytes of a UTF-8
 * JSON object (parsed in place below, duplicate keys refused), then the data
 * region. Each key but "__metadata__" names a tensor: {"dtype": "F32",
 * "shape": [..], "data_offsets": [begin, end]}, offsets relative to the
 * data region. "__metadata__" maps strings to strings. The reader requires
 * what the format's reference implementation requires: the tensors' byte
 * ranges, taken in offset order, tile the data region exactly from 0 to its
 * end, and each range holds exactly dtype size × element count bytes.
 * doc/interop-formats.md has the details. */
#define _GNU_SOURCE 1
#include "interop_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef unsigned long long ull;

#define ST_META_KEY "__metadata__"

static const struct {
  const char *name;
  cairn_dtype dt;
} st_dtypes[] = {
    {"F64", CAIRN_DTYPE_F64}, {"F32", CAIRN_DTYPE_F32},  {"F16", CAIRN_DTYPE_F16}, {"BF16", CAIRN_DTYPE_BF16},
    {"I64", CAIRN_DTYPE_I64}, {"I32", CAIRN_DTYPE_I32},  {"I16", CAIRN_DTYPE_I16}, {"I8", CAIRN_DTYPE_I8},
    {"U64", CAIRN_DTYPE_U64}, {"U32", CAIRN_DTYPE_U32},  {"U16", CAIRN_DTYPE_U16}, {"U8", CAIRN_DTYPE_U8},
    {"BOOL", CAIRN_DTYPE_BOOL},
};
#define N_ST_DTYPES (sizeof st_dtypes / sizeof st_dtypes[0])

static const char *st_dtype_name(cairn_dtype dt) {
  for (size_t i = 0; i < N_ST_DTYPES; i++)
    if (st_dtypes[i].dt == dt) return st_dtypes[i].name;
  return NULL;
}

/* ---- reader ---------------------------------------------------------------------- */

typedef struct st_state {
  char *path;
  int fd;
  uint64_t size, data_start;
} st_state;

static void st_close(void *p) {
  st_state *s = p;
  if (!s) return;
  if (s->fd >= 0) close(s->fd);
  free(s->path);
  free(s);
}

static int cmp_begin(const void *a, const void *b) {
  const ck_entry *x = a, *y = b;
  return x->data_offset < y->data_offset ? -1 : x->data_offset > y->data_offset;
}

/* ---- the header's JSON ------------------------------------------------------------ */

/* The header is parsed in place by the small JSON reader below, not by
 * jansson: a jansson tree costs about 1.2 KB per tensor (20 times the
 * header's bytes for a file of zero-size tensors), while this reader keeps
 * only what the view keeps (one ck_entry and the name per tensor) and
 * allocates nothing per JSON value. It accepts exactly the JSON that the
 * header's shape allows: an object of tensor objects and one __metadata__
 * object of strings; strings are checked as jansson checked them (UTF-8,
 * no control characters, no lone surrogates, no \u0000). */
typedef struct jp {
  const unsigned char *p, *b, *end; /* cursor, start and end of the header bytes */
  const char *path;
} jp;

static ull jat(const jp *j) { return 8 + (ull)(j->p - j->b); } /* file offset of the cursor */

static void jws(jp *j) {
  j->p = (const unsigned char *)cairn__text_skip_ws((const char *)j->p, (const char *)j->end);
}

/* Skips blanks, then 1 if the next byte is c (consumed). */
static int jeat(jp *j, int c) {
  const char *q = (const char *)j->p;
  const int r = cairn__text_eat(&q, (const char *)j->end, c);
  j->p = (const unsigned char *)q;
  return r;
}

static cairn_status jerr(const jp *j, const char *what) {
  return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: safetensors header is not a JSON object of tensors: %s", j->path,
                     jat(j), what);
}

static int hex4(jp *j, uint32_t *u) {
  if (j->end - j->p < 4) return 0;
  *u = 0;
  for (int i = 0; i < 4; i++) {
    int c = j->p[i], d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return 0;
    *u = *u << 4 | (uint32_t)d;
  }
  j->p += 4;
  return 1;
}

/* A JSON string at the cursor (after blanks), decoded into dst, which has
 * room for the string's encoded length (decoding never lengthens it, and
 * the two quotes leave room for the NUL added); *len gets its length. */
static cairn_status jstr(jp *j, char *dst, size_t *len) {
  jws(j);
  if (j->p >= j->end || *j->p != '"') return jerr(j, "a string was expected");
  j->p++;
  size_t n = 0;
  for (;;) {
    if (j->p >= j->end) return jerr(j, "the string does not end");
    unsigned c = *j->p;
    if (c == '"') break;
    if (c < 0x20) return jerr(j, "a control character in a string (JSON needs it escaped)");
    if (c != '\\') {
      dst[n++] = (char)c;
      j->p++;
      continue;
    }
    if (j->end - j->p < 2) return jerr(j, "the string does not end");
    unsigned e = j->p[1];
    j->p += 2;
    static const char esc_in[] = "\"\\/bfnrt", esc_out[] = "\"\\/\b\f\n\r\t";
    const char *k = e ? strchr(esc_in, (int)e) : NULL;
    if (k) {
      dst[n++] = esc_out[k - esc_in];
      continue;
    }
    uint32_t u, lo;
    if (e != 'u' || !hex4(j, &u)) return jerr(j, "an invalid escape in a string");
    if (u >= 0xdc00 && u < 0xe000) return jerr(j, "a lone UTF-16 surrogate in a \\u escape");
    if (u >= 0xd800 && u < 0xdc00) {
      if (j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u' || (j->p += 2, !hex4(j, &lo)) || lo < 0xdc00 || lo >= 0xe000)
        return jerr(j, "a lone UTF-16 surrogate in a \\u escape");
      u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
    }
    if (u == 0) return jerr(j, "\\u0000 in a string (a NUL cannot be in a name or a value)");
    if (u < 0x80) {
      dst[n++] = (char)u;
    } else if (u < 0x800) {
      dst[n++] = (char)(0xc0 | u >> 6);
      dst[n++] = (char)(0x80 | (u & 0x3f));
    } else if (u < 0x10000) {
      dst[n++] = (char)(0xe0 | u >> 12);
      dst[n++] = (char)(0x80 | (u >> 6 & 0x3f));
      dst[n++] = (char)(0x80 | (u & 0x3f));
    } else {
      dst[n++] = (char)(0xf0 | u >> 18);
      dst[n++] = (char)(0x80 | (u >> 12 & 0x3f));
      dst[n++] = (char)(0x80 | (u >> 6 & 0x3f));
      dst[n++] = (char)(0x80 | (u & 0x3f));
    }
  }
  if (n && !cairn__ck_utf8_ok((const unsigned char *)dst, n, 0)) return jerr(j, "a string is not valid UTF-8");
  j->p++; /* the closing quote */
  dst[n] = '\0';
  *len = n;
  return CAIRN_OK;
}

/* A JSON number at the cursor (after blanks): 1 and *v if it is an
 * integer in [0, 2^63) (jansson's range), 0 if it is another number, -1 if
 * it is no number. */
static int jint(jp *j, uint64_t *v) {
  jws(j);
  const unsigned char *q = j->p, *end = j->end;
  int neg = q < end && *q == '-', other = 0;
  q += neg;
  if (q >= end || *q < '0' || *q > '9') return -1;
  uint64_t r = 0;
  if (*q == '0') {
    q++;
  } else {
    for (; q < end && *q >= '0' && *q <= '9'; q++) {
      unsigned d = *q - '0';
      if (r > (UINT64_C(0x7fffffffffffffff) - d) / 10) other = 1;
      else r = r * 10 + d;
    }
  }
  if (q < end && *q == '.') {
    other = 1;
    if (++q >= end || *q < '0' || *q > '9') return -1;
    while (q < end && *q >= '0' && *q <= '9') q++;
  }
  if (q < end && (*q == 'e' || *q == 'E')) {
    other = 1;
    q++;
    if (q < end && (*q == '+' || *q == '-')) q++;
    if (q >= end || *q < '0' || *q > '9') return -1;
    while (q < end && *q >= '0' && *q <= '9') q++;
  }
  if (q < end && *q >= '0' && *q <= '9') return -1; /* a leading zero */
  j->p = q;
  if (neg || other) return 0;
  *v = r;
  return 1;
}

/* A JSON array of integers ≥ 0 at the cursor, at most max of them (more: *n = max + 1). */
static cairn_status jints(jp *j, uint64_t *v, size_t max, size_t *n, const char *nm, const char *field) {
  *n = 0;
  if (!jeat(j, '['))
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: safetensors header: '%s': %s is not an array", j->path, jat(j), nm,
                       field);
  if (jeat(j, ']')) return CAIRN_OK;
  do {
    uint64_t x;
    int r = jint(j, &x);
    if (r < 0) return jerr(j, "a number was expected");
    if (r == 0)
      return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: safetensors header: '%s': %s element %zu is not an integer ≥ 0",
                         j->path, jat(j), nm, field, *n);
    if (*n < max) v[*n] = x;
    if (*n <= max) ++*n;
  } while (jeat(j, ','));
  if (!jeat(j, ']')) return jerr(j, "',' or ']' was expected in an array");
  return CAIRN_OK;
}

/* One tensor's object {"dtype", "shape", "data_offsets"} into e; scratch
 * has room for the object's strings. */
static cairn_status parse_tensor(jp *j, const st_state *s, const char *name, size_t name_len, char *scratch,
                                 uint64_t data_size, ck_entry *e) {
  char nb[96];
  const char *nm = cairn__ck_short(name, name_len, nb, sizeof nb);
  const char *p = s->path;
  if (!jeat(j, '{')) {
    if (j->p == j->end) return jerr(j, "the header ends after a key");
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: safetensors header: '%s' is not an object", p, jat(j), nm);
  }
  int have[3] = {0, 0, 0};
  uint64_t off[3], b = 0, en = 0;
  char dts[32] = "";
  cairn_status st;
  if (!jeat(j, '}')) {
    do {
      size_t kl;
      if ((st = jstr(j, scratch, &kl))) return st;
      if (!jeat(j, ':')) return jerr(j, "':' was expected after a key");
      int f = strcmp(scratch, "dtype") == 0 ? 0 : strcmp(scratch, "shape") == 0 ? 1 : strcmp(scratch, "data_offsets") == 0 ? 2 : -1;
      if (f < 0 || have[f]) {
        if (f >= 0)
          return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: safetensors header: '%s': duplicate key '%s'", p, jat(j), nm,
                             scratch);
        break; /* reported below */
      }
      have[f] = 1;
      if (f == 0) {
        jws(j);
        if (j->p >= j->end || *j->p != '"')
          return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: safetensors header: '%s': dtype is not a string", p, jat(j), nm);
        size_t dl;
        if ((st = jstr(j, scratch, &dl))) return st;
        snprintf(dts, sizeof dts, "%s", scratch);
        int found = 0;
        for (size_t i = 0; i < N_ST_DTYPES && !found; i++)
          if (strcmp(scratch, st_dtypes[i].name) == 0) e->dtype = (uint8_t)st_dtypes[i].dt, found = 1;
        if (!found)
          return cairn__fail(CAIRN_E_UNSUPPORTED,
                             "'%s': safetensors header: '%s' has dtype \"%.32s\", which cairn does not have", p, nm, scratch);
      } else if (f == 1) {
        size_t r;
        if ((st = jints(j, e->shape, CAIRN_MAX_RANK, &r, nm, "shape"))) return st;
        if (r > CAIRN_MAX_RANK)
          return cairn__fail(CAIRN_E_UNSUPPORTED, "'%s': safetensors header: '%s': shape has more than %d dimensions", p, nm,
                             CAIRN_MAX_RANK);
        e->rank = (uint8_t)r;
      } else {
        size_t r;
        if ((st = jints(j, off, 2, &r, nm, "data_offsets"))) return st;
        if (r != 2 || off[0] > off[1])
          return cairn__fail(CAIRN_E_FORMAT,
                             "'%s': safetensors header: '%s': data_offsets is not [begin, end] with begin ≤ end", p, nm);
        b = off[0], en = off[1];
      }
    } while (jeat(j, ','));
  }
  if (!have[0] || !have[1] || !have[2] || !jeat(j, '}'))
    return cairn__fail(CAIRN_E_FORMAT,
                       "'%s' offset %llu: safetensors header: '%s' must have exactly the fields dtype, shape and "
                       "data_offsets",
                       p, jat(j), nm);
  int ok;
  uint64_t bytes = cairn__shape_bytes((cairn_dtype)e->dtype, e->rank, e->shape, &ok);
  if (!ok || bytes != en - b)
    return cairn__fail(CAIRN_E_FORMAT,
                       "'%s': safetensors header: '%s': data_offsets [%llu, %llu] hold %llu bytes, but %s of that shape "
                       "takes %s%llu",
                       p, nm, (ull)b, (ull)en, (ull)(en - b), dts, ok ? "" : "more than 2^64 or ", (ull)bytes);
  if (en > data_size)
    return cairn__fail(CAIRN_E_TRUNCATED,
                       "'%s': safetensors header: '%s': data_offsets end at %llu (file offset %llu), past the end of "
                       "the file (%llu bytes): the file is cut short or its header is wrong (a safetensors file, "
                       "not a cairn checkpoint: ckpt-inspect recover does not apply)",
                       p, nm, (ull)en, (ull)(s->data_start + en), (ull)s->size);
  e->raw_bytes = e->stored_bytes = bytes;
  e->data_offset = s->data_start + b; /* absolute, sorted below */
  return CAIRN_OK;
}

/* The __metadata__ object of strings: keys and values into the view's meta arena at *ma. */
static cairn_status parse_meta(jp *j, ck_view *v, size_t *mcap, char **ma) {
  if (!jeat(j, '{'))
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: safetensors header: __metadata__ is not an object", j->path, jat(j));
  if (jeat(j, '}')) return CAIRN_OK;
  cairn_status st;
  do {
    size_t kl, vl;
    char *key = *ma;
    if ((st = jstr(j, key, &kl))) return st;
    if (!jeat(j, ':')) return jerr(j, "':' was expected after a key");
    jws(j);
    if (j->p >= j->end || *j->p != '"')
      return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: safetensors header: __metadata__ value of '%.64s' is not a string",
                         j->path, jat(j), key);
    char *val = key + kl + 1;
    if ((st = jstr(j, val, &vl))) return st;
    if (!cairn__grow((void **)&v->meta, mcap, v->nmeta + 1, sizeof *v->meta))
      return cairn__fail(CAIRN_E_NOMEM, "'%s': out of memory for the safetensors metadata", j->path);
    ck_meta *m = &v->meta[v->nmeta++];
    memset(m, 0, sizeof *m);
    m->key = key;
    m->ptr = val;
    m->len = vl;
    m->type = CAIRN_META_STR;
    *ma = val + vl + 1;
  } while (jeat(j, ','));
  if (!jeat(j, '}')) return jerr(j, "',' or '}' was expected in __metadata__");
  return CAIRN_OK;
}

/* Step 1 of st_open: the file, its header length and the header's bytes
 * into *hdr (n bytes), with the view's two arenas of n bytes for the
 * decoded names and metadata: every decoded string with its NUL is
 * shorter than its encoded form with two quotes. The arenas' untouched
 * pages cost nothing. */
static cairn_status st_read_header(const cairn__dir *d, st_state *s, const cairn_ckpt_limits *lim, ck_view *v,
                                   unsigned char **hdr, uint64_t *n_out) {
  const char *path = s->path;
  char why[700];
  if ((s->fd = cairn__open_read(d, path, NULL, why, sizeof why)) < 0)
    return cairn__fail(CAIRN_E_IO, "ckpt_open: cannot open '%s': %s", path, why);
  struct stat sb;
  if (fstat(s->fd, &sb) != 0) {
    int e = errno;
    return cairn__fail(CAIRN_E_IO, "ckpt_open: cannot stat '%s': %s", path, strerror(e));
  }
  s->size = (uint64_t)sb.st_size;
  unsigned char lb[8];
  cairn_status st = cairn__ck_pread(s->fd, lb, 8, 0, path, "safetensors header length");
  if (st) return st;
  uint64_t n = ck_get64(lb);
  if (n > lim->max_index_bytes)
    return cairn__fail(CAIRN_E_LIMIT, "'%s' offset 0: safetensors header of %llu bytes exceeds the limit %llu", path,
                       (ull)n, (ull)lim->max_index_bytes);
  if (n > s->size - 8)
    return cairn__fail(CAIRN_E_TRUNCATED, "'%s' offset 0: safetensors header of %llu bytes, but the file has %llu after "
                       "the length (a safetensors file, not a cairn checkpoint: ckpt-inspect recover does not apply)",
                       path, (ull)n, (ull)(s->size - 8));
  if (n < 2)
    return cairn__fail(CAIRN_E_FORMAT, "'%s' offset 0: safetensors header of %llu bytes cannot hold a JSON object",
                       path, (ull)n);
  s->data_start = 8 + n;
  /* read whole: it is at most max_index_bytes and really present (n ≤ the file's size) */
  *hdr = malloc((size_t)n);
  v->names = malloc((size_t)n + 1);
  v->meta_arena = malloc((size_t)n + 1);
  if (!*hdr || !v->names || !v->meta_arena)
    return cairn__fail(CAIRN_E_NOMEM, "'%s': out of memory for a safetensors header of %llu bytes", path, (ull)n);
  *n_out = n;
  return cairn__ck_pread(s->fd, *hdr, (size_t)n, 8, path, "safetensors header");
}

/* One record of the header object whose key was just decoded at *arena
 * (kl bytes): a tensor, appended to the view (its name stays in the
 * arena), or __metadata__. */
static cairn_status st_parse_record(jp *j, const st_state *s, const cairn_ckpt_limits *lim, ck_view *v, char **arena,
                                    size_t kl, char **ma, size_t *ecap, size_t *mcap, int *have_meta) {
  const char *path = s->path;
  char nb[96];
  if (strcmp(*arena, ST_META_KEY) == 0) {
    if (*have_meta)
      return cairn__fail(CAIRN_E_FORMAT, "'%s' offset %llu: safetensors header: duplicate key __metadata__", path,
                         jat(j));
    *have_meta = 1;
    return parse_meta(j, v, mcap, ma);
  }
  if (!cairn__ck_name_ok((const unsigned char *)*arena, kl))
    return cairn__fail(CAIRN_E_FORMAT, "'%s': safetensors header: tensor name '%s' is not 1..1024 bytes of UTF-8 "
                       "without control characters", path, cairn__ck_short(*arena, kl, nb, sizeof nb));
  size_t nt = v->n;
  if (nt >= lim->max_tensors)
    return cairn__fail(CAIRN_E_LIMIT, "'%s' offset %llu: more than %llu tensors (the limit)", path, jat(j),
                       (ull)lim->max_tensors);
  if (!cairn__grow((void **)&v->ents, ecap, nt + 1, sizeof *v->ents))
    return cairn__fail(CAIRN_E_NOMEM, "'%s': out of memory for %zu tensors", path, nt + 1);
  ck_entry *e = &v->ents[nt];
  memset(e, 0, sizeof *e);
  e->name = *arena;
  e->name_len = (uint16_t)kl;
  e->seq = (uint32_t)nt;
  *arena += kl + 1;
  v->n = nt + 1;
  /* The object's own strings are decoded after the name (scratch). */
  return parse_tensor(j, s, e->name, kl, *arena, s->size - s->data_start, e);
}

/* Step 2: the header's JSON object, record by record, and nothing after
 * it but blanks. */
static cairn_status st_parse_header(const st_state *s, const cairn_ckpt_limits *lim, const unsigned char *hdr,
                                    uint64_t n, ck_view *v) {
  const char *path = s->path;
  jp j = {hdr, hdr, hdr + n, path};
  char *arena = v->names, *ma = v->meta_arena;
  size_t ecap = 0, mcap = 0;
  int have_meta = 0;
  cairn_status st;
  if (!jeat(&j, '{')) return cairn__fail(CAIRN_E_FORMAT, "'%s' offset 8: safetensors header is not a JSON object", path);
  if (!jeat(&j, '}')) {
    do {
      size_t kl;
      /* The key goes to the arena's end; it stays there if it names a tensor. */
      if ((st = jstr(&j, arena, &kl))) return st;
      if (!jeat(&j, ':')) return jerr(&j, "':' was expected after a key");
      if ((st = st_parse_record(&j, s, lim, v, &arena, kl, &ma, &ecap, &mcap, &have_meta))) return st;
    } while (jeat(&j, ','));
    if (!jeat(&j, '}')) return jerr(&j, "',' or '}' was expected");
  }
  jws(&j);
  if (j.p != j.end) return jerr(&j, "bytes after the object (only blanks may pad the header)");
  if (!v->ents && !(v->ents = calloc(1, sizeof *v->ents))) return cairn__fail(CAIRN_E_NOMEM, "ckpt_open: out of memory");
  if (!v->meta && !(v->meta = calloc(1, sizeof *v->meta))) return cairn__fail(CAIRN_E_NOMEM, "ckpt_open: out of memory");
  return CAIRN_OK;
}

/* Step 3: the tensors' ranges tile the data region exactly, and no name
 * (tensor or metadata key) appears twice; the view sorted by name. */
static cairn_status st_check_layout(const st_state *s, ck_view *v) {
  const char *path = s->path;
  size_t nt = v->n;
  char nb[96];
  /* Offset order: the ranges must tile the data region. */
  if (nt) qsort(v->ents, nt, sizeof *v->ents, cmp_begin);
  uint64_t at = s->data_start;
  for (size_t i = 0; i < nt; i++) {
    const ck_entry *e = &v->ents[i];
    if (e->data_offset != at)
      return cairn__fail(CAIRN_E_FORMAT,
                         "'%s': safetensors header: '%s' starts at data offset %llu, but the previous tensor ends at "
                         "%llu (tensors must be contiguous, without overlaps or holes)",
                         path, cairn__ck_short(e->name, e->name_len, nb, sizeof nb),
                         (ull)(e->data_offset - s->data_start), (ull)(at - s->data_start));
    at += e->raw_bytes;
  }
  if (at != s->size)
    return cairn__fail(CAIRN_E_FORMAT,
                       "'%s' offset %llu: %llu trailing bytes after the last tensor's data (a safetensors file, not a "
                       "cairn checkpoint: no save was interrupted and ckpt-inspect recover does not apply; the file was "
                       "appended to or its header is wrong)",
                       path, (ull)at, (ull)(s->size - at));
  size_t dup = cairn__view_sort(v->ents, nt);
  if (dup != nt)
    return cairn__fail(CAIRN_E_FORMAT, "'%s': safetensors header: duplicate key: tensor '%s' appears twice", path,
                       cairn__ck_short(v->ents[dup].name, v->ents[dup].name_len, nb, sizeof nb));
  cairn__view_sort_meta(v->meta, v->nmeta);
  for (size_t i = 1; i < v->nmeta; i++)
    if (strcmp(v->meta[i - 1].key, v->meta[i].key) == 0)
      return cairn__fail(CAIRN_E_FORMAT, "'%s': safetensors header: duplicate key '%.64s' in __metadata__", path,
                         v->meta[i].key);
  return CAIRN_OK;
}

/* The path is opened twice: the reader's descriptor (src->fd) is the one
 * cairn_ckpt_check_unchanged watches, s->fd the one reads go through. */
static cairn_status st_open(const ck_source *src, const cairn_ckpt_limits *lim, void **state, ck_view *v) {
  const cairn__dir *d = src->d;
  const char *path = src->path;
  *state = NULL;
  st_state *s = calloc(1, sizeof *s);
  if (!s || !(s->path = strdup(path))) {
    free(s);
    return cairn__fail(CAIRN_E_NOMEM, "ckpt_open: out of memory");
  }
  s->fd = -1;
  unsigned char *hdr = NULL;
  uint64_t n = 0;
  cairn_status st = st_read_header(d, s, lim, v, &hdr, &n);
  if (!st) st = st_parse_header(s, lim, hdr, n, v);
  free(hdr);
  if (!st) st = st_check_layout(s, v);
  return cairn__ck_open_done(st, v, src->fd, path, s, st_close, state);
}

/* p holds e's bytes from element first on (e->raw_bytes of them, at e->data_offset). */
static cairn_status st_check_bool(const st_state *s, const ck_entry *e, const unsigned char *p, uint64_t first) {
  uint64_t bad;
  if (e->dtype == CAIRN_DTYPE_BOOL && !cairn__bool_bytes_ok(p, e->raw_bytes, &bad))
    return cairn__fail(CAIRN_E_CORRUPT, "'%s' offset %llu: bool tensor '%s' has byte %u at element %llu: only 0 and 1 are "
                       "valid", s->path, (ull)(e->data_offset + bad), e->name, p[bad],
                       (ull)(first + bad));
  return CAIRN_OK;
}

static cairn_status st_read(void *p, const ck_entry *e, unsigned char *dst) {
  st_state *s = p;
  if (!e->raw_bytes) return CAIRN_OK;
  /* Straight into the caller's tensor: no copy beyond the kernel's. */
  cairn_status st = cairn__ck_pread(s->fd, dst, (size_t)e->raw_bytes, e->data_offset, s->path, e->name);
  return st ? st : st_check_bool(s, e, dst, 0);
}

static cairn_status st_verify(void *p, const ck_entry *ents, size_t n) {
  st_state *s = p;
  /* The header was checked at open; the data has no checksum, but every
   * byte must be readable and bools must be 0 or 1. */
  enum { BUF = 1 << 20 };
  unsigned char *buf = malloc(BUF);
  if (!buf) return cairn__fail(CAIRN_E_NOMEM, "ckpt_verify: out of memory");
  cairn_status st = CAIRN_OK;
  for (size_t i = 0; i < n && !st; i++) {
    const ck_entry *e = &ents[i];
    for (uint64_t at = 0; at < e->raw_bytes && !st; at += BUF) {
      size_t len = e->raw_bytes - at < BUF ? (size_t)(e->raw_bytes - at) : BUF;
      st = cairn__ck_pread(s->fd, buf, len, e->data_offset + at, s->path, e->name);
      if (!st && e->dtype == CAIRN_DTYPE_BOOL) {
        ck_entry part = *e;
        part.data_offset += at;
        part.raw_bytes = len;
        st = st_check_bool(s, &part, buf, at);
      }
    }
  }
  free(buf);
  return st;
}

static cairn_status st_read_pieces(void *p, const ck_entry *e, cairn_ckpt_piece_fn fn, void *user) {
  return cairn__ck_pieces_whole(st_read, p, ((st_state *)p)->path, e, fn, user);
}

static cairn_status st_verify_tensor(void *p, const ck_entry *e) { return st_verify(p, e, 1); }

/* The writer's side of the table (cairn_ckpt_out). */
static cairn_status st_wopen(const char *path, const cairn_ckpt_write_options *o, void **w) {
  (void)o;
  return cairn_safetensors_writer_open(path, (cairn_safetensors_writer **)w);
}
static cairn_status st_wmeta(void *w, const char *key, const char *value) {
  return cairn_safetensors_writer_meta(w, key, value);
}
CK_WRITE_ADAPTERS(st, cairn_safetensors_writer, cairn_safetensors_writer_add, cairn_safetensors_writer_commit,
                  cairn_safetensors_writer_abort)

const ck_backend cairn__ck_safetensors = {
    .name = "safetensors", .open = st_open, .read = st_read, .read_pieces = st_read_pieces,
    .verify_tensor = st_verify_tensor, .verify = st_verify, .codecs = cairn__ck_codecs_raw, .close = st_close,
    .wopen = st_wopen, .wadd = st_wadd, .wmeta_str = st_wmeta, .wcommit = st_wcommit, .wabort = st_wabort};

/* ---- writer ------------------------------------------------------------------------ */

typedef struct st_item {
  char *name;
  const cairn_tensor *t;
} st_item;

struct cairn_safetensors_writer {
  char *path;
  st_item *items;
  size_t n, cap;
  json_t *meta;
  ck_nameset names; /* the items' names */
};

cairn_status cairn_safetensors_writer_open(const char *path, cairn_safetensors_writer **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "safetensors_writer_open: out is NULL");
  *out = NULL;
  if (!path) return cairn__fail(CAIRN_E_NULL, "safetensors_writer_open: path is NULL");
  cairn_safetensors_writer *w = calloc(1, sizeof *w);
  if (!w || !(w->path = strdup(path)) || !(w->meta = json_object())) {
    if (w) free(w->path);
    free(w);
    return cairn__fail(CAIRN_E_NOMEM, "safetensors_writer_open: out of memory");
  }
  *out = w;
  return CAIRN_OK;
}

void cairn_safetensors_writer_abort(cairn_safetensors_writer *w) {
  if (!w) return;
  for (size_t i = 0; i < w->n; i++) free(w->items[i].name);
  free(w->items);
  cairn__nameset_free(&w->names);
  json_decref(w->meta);
  free(w->path);
  free(w);
}

cairn_status cairn_safetensors_writer_add(cairn_safetensors_writer *w, const char *name, const cairn_tensor *t) {
  const char *fn = "safetensors_writer_add";
  if (!w || !name || !t) return cairn__fail(CAIRN_E_NULL, "%s: %s is NULL", fn, !w ? "writer" : !name ? "name" : "tensor");
  size_t len = strlen(name);
  char nb[96];
  if (!cairn__ck_name_ok((const unsigned char *)name, len) || strcmp(name, ST_META_KEY) == 0)
    return cairn__fail(CAIRN_E_INVALID, "%s: '%s': %s", fn, cairn__ck_short(name, len, nb, sizeof nb),
                       len ? "a tensor name is 1..1024 bytes of UTF-8 without control characters, not __metadata__"
                           : "empty name");
  if (!st_dtype_name(t->dtype) || !cairn__tensor_ok(t))
    return cairn__fail(CAIRN_E_INVALID, "%s: '%s': not a valid tensor", fn, cairn__ck_short(name, len, nb, sizeof nb));
  if (cairn__nameset_has(&w->names, name))
    return cairn__fail(CAIRN_E_EXISTS, "%s: '%s' was already added to '%s'", fn, cairn__ck_short(name, len, nb, sizeof nb),
                       w->path);
  if (!cairn__grow((void **)&w->items, &w->cap, w->n + 1, sizeof *w->items) || !(w->items[w->n].name = strdup(name)))
    return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  if (!cairn__nameset_put(&w->names, w->items[w->n].name)) {
    free(w->items[w->n].name);
    return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  }
  w->items[w->n++].t = t;
  return CAIRN_OK;
}

cairn_status cairn_safetensors_writer_meta(cairn_safetensors_writer *w, const char *key, const char *value) {
  if (!w || !key || !value) return cairn__fail(CAIRN_E_NULL, "safetensors_writer_meta: an argument is NULL");
  json_t *s = json_string(value);
  if (!s || !*key)
    return cairn__fail(CAIRN_E_INVALID, "safetensors_writer_meta: '%.64s': key or value is not UTF-8 (or the key is empty)",
                       key);
  if (json_object_set_new(w->meta, key, s) != 0)
    return cairn__fail(CAIRN_E_INVALID, "safetensors_writer_meta: key '%.64s' is not UTF-8", key);
  return CAIRN_OK;
}

static int cmp_item(const void *a, const void *b) {
  const st_item *x = a, *y = b;
  return cairn__ck_cmp_bytes(x->name, strlen(x->name), y->name, strlen(y->name));
}

cairn_status cairn_safetensors_writer_commit(cairn_safetensors_writer *w) {
  const char *fn = "safetensors_writer_commit";
  if (!w) return cairn__fail(CAIRN_E_NULL, "%s: writer is NULL", fn);
  if (w->n) qsort(w->items, w->n, sizeof *w->items, cmp_item); /* items is NULL with no tensors */
  cairn_status st = CAIRN_OK;
  json_t *root = json_object();
  char *hdr = NULL;
  ck_tmpfile f = {.fd = -1};
  if (!root) goto nomem;
  if (json_object_size(w->meta) && json_object_set(root, ST_META_KEY, w->meta) != 0) goto nomem;
  uint64_t at = 0;
  for (size_t i = 0; i < w->n; i++) {
    const cairn_tensor *t = w->items[i].t;
    json_t *o = json_object(), *shape = json_array(), *offs = json_array();
    int bad = !o || !shape || !offs;
    for (int d = 0; d < t->rank && !bad; d++) bad = json_array_append_new(shape, json_integer(t->shape[d])) != 0;
    uint64_t nb = cairn_tensor_nbytes(t);
    bad = bad || json_array_append_new(offs, json_integer((json_int_t)at)) != 0 ||
          json_array_append_new(offs, json_integer((json_int_t)(at + nb))) != 0;
    at += nb;
    bad = bad || json_object_set_new(o, "dtype", json_string(st_dtype_name(t->dtype))) != 0 ||
          json_object_set_new(o, "shape", shape) != 0 || (shape = NULL, json_object_set_new(o, "data_offsets", offs) != 0) ||
          (offs = NULL, json_object_set_new(root, w->items[i].name, o) != 0);
    if (bad) {
      json_decref(shape);
      json_decref(offs);
      goto nomem;
    }
  }
  if (!(hdr = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII))) goto nomem;
  size_t hl = strlen(hdr), pad = (8 - hl % 8) % 8;
  unsigned char lb[8];
  ck_put64(lb, hl + pad);
  if ((st = cairn__tmpfile_open(&f, fn, w->path))) goto out;
  static const char spaces[8] = "        ";
  if (!(st = cairn__tmpfile_write(&f, fn, lb, 8)) && !(st = cairn__tmpfile_write(&f, fn, hdr, hl)))
    st = cairn__tmpfile_write(&f, fn, spaces, pad);
  for (size_t i = 0; i < w->n && !st; i++)
    st = cairn__tmpfile_write(&f, fn, w->items[i].t->data, cairn_tensor_nbytes(w->items[i].t));
  if (!st) st = cairn__tmpfile_commit(&f, fn);
  goto out;
nomem:
  st = cairn__fail(CAIRN_E_NOMEM, "%s: out of memory building the header of '%s'", fn, w->path);
out:
  cairn__tmpfile_abort(&f);
  free(hdr);
  json_decref(root);
  cairn_safetensors_writer_abort(w);
  return st;
}
