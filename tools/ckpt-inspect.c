/* ckpt-inspect: lists, shows, compares, verifies, salvages, exports and
 * imports cairn checkpoints. Built only on the public API (<cairn.h>).
 *
 *   ckpt-inspect list CKPT            ckpt-inspect show CKPT NAME
 *   ckpt-inspect diff A B             ckpt-inspect verify CKPT
 *   ckpt-inspect meta CKPT            ckpt-inspect recover IN OUT
 *   ckpt-inspect export CKPT OUT.npz  ckpt-inspect import IN.npz OUT
 *
 * CKPT is a checkpoint file, or a directory (its latest valid checkpoint).
 * Exit status: 0 success / same, 1 diff "different" / verify "bad",
 * 2 error (for diff also: corrupt data in either file). Everything read
 * from a file (names, metadata, library messages that quote them) is
 * printed with control characters escaped (a crafted name must not drive
 * the terminal); --json output escapes them the JSON way.
 */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cairn.h>

#include "npz.h"
#include "utf8.h"

#define PROG "ckpt-inspect"

enum { EXIT_OK_ = 0, EXIT_DIFFERENT = 1, EXIT_BAD = 1, EXIT_ERROR = 2 };

/* ---- Options ------------------------------------------------------------------ */

enum {
  OPT_JSON = 1 << 0,
  OPT_ALL = 1 << 1,
  OPT_TOL = 1 << 2,
  OPT_FORCE = 1 << 3,
  OPT_COMPRESS = 1 << 4,
  OPT_FORMAT = 1 << 5,
  OPT_DTYPE = 1 << 6
};

typedef struct options {
  int json, all, force;
  double atol, rtol;
  cairn_ckpt_compress compress;
  const char *format;       /* export: npz, tf, safetensors (NULL: from OUT's name) */
  cairn_dtype export_dtype; /* export: floating-point tensors converted to it (0: kept) */
  unsigned given; /* OPT_* seen on the command line */
} options;

/* ---- Escaped output (rule 35) ----------------------------------------------- */

/* Code points a terminal may act on or that reorder text: C0 and C1
 * controls, DEL, line/paragraph separators, bidi embeddings, overrides
 * and isolates, and the directional marks. */
static int cp_is_dangerous(uint32_t cp) {
  return cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F) || cp == 0x200E || cp == 0x200F ||
         (cp >= 0x2028 && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069) || cp == 0xFEFF;
}

/* Writes s with C-style escapes: \n \t \r \\ \xNN (control bytes and bytes
 * that are not UTF-8) and \uNNNN (dangerous code points). */
static void put_esc_n(FILE *f, const char *str, size_t len) {
  const unsigned char *s = (const unsigned char *)str;
  for (size_t i = 0; i < len;) {
    uint32_t cp;
    size_t n = utf8_decode(s + i, len - i, &cp);
    if (n == 0) {
      fprintf(f, "\\x%02x", s[i]);
      i++;
      continue;
    }
    if (cp == '\\')
      fputs("\\\\", f);
    else if (cp == '\n')
      fputs("\\n", f);
    else if (cp == '\t')
      fputs("\\t", f);
    else if (cp == '\r')
      fputs("\\r", f);
    else if (cp < 0x20 || cp == 0x7F)
      fprintf(f, "\\x%02x", (unsigned)cp);
    else if (cp_is_dangerous(cp))
      fprintf(f, "\\u%04x", (unsigned)cp);
    else
      fwrite(s + i, 1, n, f);
    i += n;
  }
}
static void put_esc(FILE *f, const char *s) { put_esc_n(f, s, strlen(s)); }

/* Display width of the escaped form (code points, not bytes: good enough
 * for aligning columns of names). */
static size_t esc_width(const char *str) {
  const unsigned char *s = (const unsigned char *)str;
  size_t len = strlen(str), w = 0;
  for (size_t i = 0; i < len;) {
    uint32_t cp;
    size_t n = utf8_decode(s + i, len - i, &cp);
    if (n == 0) {
      w += 4;
      i++;
      continue;
    }
    if (cp == '\\' || cp == '\n' || cp == '\t' || cp == '\r')
      w += 2;
    else if (cp < 0x20 || cp == 0x7F)
      w += 4;
    else if (cp_is_dangerous(cp))
      w += 6;
    else
      w += 1;
    i += n;
  }
  return w;
}

static void put_esc_padded(FILE *f, const char *s, size_t width) {
  put_esc(f, s);
  for (size_t w = esc_width(s); w < width; w++) fputc(' ', f);
}

static int hexval(const char *s, int digits, unsigned *v) {
  *v = 0;
  for (int k = 0; k < digits; k++) {
    char c = s[k];
    unsigned d;
    if (c >= '0' && c <= '9') d = (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f') d = (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') d = (unsigned)(c - 'A' + 10);
    else return 0;
    *v = *v * 16 + d;
  }
  return 1;
}

/* Reverses put_esc's escapes (for a NAME typed as list printed it). */
static char *unescape(const char *in) {
  size_t n = strlen(in);
  char *out = malloc(n + 1);
  if (!out) return NULL;
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    if (in[i] != '\\' || i + 1 >= n) {
      out[o++] = in[i];
      continue;
    }
    char c = in[++i];
    unsigned v;
    if (c == 'n') out[o++] = '\n';
    else if (c == 't') out[o++] = '\t';
    else if (c == 'r') out[o++] = '\r';
    else if (c == '\\') out[o++] = '\\';
    else if (c == 'x' && i + 2 < n && hexval(in + i + 1, 2, &v)) {
      out[o++] = (char)v;
      i += 2;
    } else if (c == 'u' && i + 4 < n && hexval(in + i + 1, 4, &v)) {
      /* UTF-8 encode v (at most U+FFFF here) */
      if (v < 0x80) out[o++] = (char)v;
      else if (v < 0x800) {
        out[o++] = (char)(0xC0 | (v >> 6));
        out[o++] = (char)(0x80 | (v & 0x3F));
      } else {
        out[o++] = (char)(0xE0 | (v >> 12));
        out[o++] = (char)(0x80 | ((v >> 6) & 0x3F));
        out[o++] = (char)(0x80 | (v & 0x3F));
      }
      i += 4;
    } else {
      out[o++] = '\\';
      out[o++] = c;
    }
  }
  out[o] = '\0';
  return out;
}

/* ---- JSON output ------------------------------------------------------------ */

static void json_str_n(FILE *f, const char *str, size_t len) {
  const unsigned char *s = (const unsigned char *)str;
  fputc('"', f);
  for (size_t i = 0; i < len;) {
    uint32_t cp;
    size_t n = utf8_decode(s + i, len - i, &cp);
    if (n == 0) { /* not UTF-8: JSON text must be, so U+FFFD */
      fputs("\\ufffd", f);
      i++;
      continue;
    }
    if (cp == '"') fputs("\\\"", f);
    else if (cp == '\\') fputs("\\\\", f);
    else if (cp == '\n') fputs("\\n", f);
    else if (cp == '\t') fputs("\\t", f);
    else if (cp == '\r') fputs("\\r", f);
    else if (cp == '\b') fputs("\\b", f);
    else if (cp == '\f') fputs("\\f", f);
    else if (cp_is_dangerous(cp)) fprintf(f, "\\u%04x", (unsigned)cp);
    else fwrite(s + i, 1, n, f);
    i += n;
  }
  fputc('"', f);
}
static void json_str(FILE *f, const char *s) { json_str_n(f, s, strlen(s)); }

/* Shortest "%.*g" that reads back as v; non-finite numbers are not JSON:
 * null. */
static void json_num(FILE *f, double v) {
  if (!isfinite(v)) {
    fputs("null", f);
    return;
  }
  char b[40];
  for (int p = 1; p <= 17; p++) {
    snprintf(b, sizeof b, "%.*g", p, v);
    if (strtod(b, NULL) == v) break;
  }
  fputs(b, f);
}

static void json_shape(FILE *f, int rank, const int64_t *shape) {
  fputc('[', f);
  for (int k = 0; k < rank; k++) fprintf(f, "%s%lld", k ? ", " : "", (long long)shape[k]);
  fputc(']', f);
}

/* ---- Errors ----------------------------------------------------------------- */

static void errorf(const char *fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  fputs(PROG ": ", stderr);
  put_esc(stderr, buf);
  fputc('\n', stderr);
}

/* "ckpt-inspect: WHAT: status text: detail" */
static void error_status(const char *what, cairn_status s) {
  const char *detail = cairn_errmsg();
  fputs(PROG ": ", stderr);
  put_esc(stderr, what);
  fputs(": ", stderr);
  fputs(cairn_status_str(s), stderr);
  if (detail && *detail) {
    fputs(": ", stderr);
    put_esc(stderr, detail);
  }
  fputc('\n', stderr);
}

static const char *status_name(cairn_status s) {
  switch (s) {
#define CASE_(name, value, msg) \
  case name:                    \
    return #name;
    CAIRN_STATUS_LIST(CASE_)
#undef CASE_
  }
  return "CAIRN_E_UNKNOWN";
}

/* ---- dtypes and values ------------------------------------------------------ */

static const char *dtype_str(cairn_dtype dt) {
  static char buf[24];
  if (cairn_dtype_size(dt) == 0) {
    snprintf(buf, sizeof buf, "dtype#%d", (int)dt);
    return buf;
  }
  return cairn_dtype_name(dt);
}

static int dtype_is_float(cairn_dtype dt) {
  return dt == CAIRN_DTYPE_F32 || dt == CAIRN_DTYPE_F64 || dt == CAIRN_DTYPE_F16 || dt == CAIRN_DTYPE_BF16;
}
static int dtype_is_signed(cairn_dtype dt) {
  return dt == CAIRN_DTYPE_I8 || dt == CAIRN_DTYPE_I16 || dt == CAIRN_DTYPE_I32 || dt == CAIRN_DTYPE_I64;
}
static int dtype_is_unsigned(cairn_dtype dt) {
  return dt == CAIRN_DTYPE_U8 || dt == CAIRN_DTYPE_U16 || dt == CAIRN_DTYPE_U32 || dt == CAIRN_DTYPE_U64;
}

/* NumPy's name for the dtype, as array repr prints it. */
static const char *numpy_name(cairn_dtype dt) {
  switch (dt) {
    case CAIRN_DTYPE_F32: return "float32";
    case CAIRN_DTYPE_F64: return "float64";
    case CAIRN_DTYPE_F16: return "float16";
    case CAIRN_DTYPE_BF16: return "bfloat16";
    case CAIRN_DTYPE_I8: return "int8";
    case CAIRN_DTYPE_I16: return "int16";
    case CAIRN_DTYPE_I32: return "int32";
    case CAIRN_DTYPE_I64: return "int64";
    case CAIRN_DTYPE_U8: return "uint8";
    case CAIRN_DTYPE_U16: return "uint16";
    case CAIRN_DTYPE_U32: return "uint32";
    case CAIRN_DTYPE_U64: return "uint64";
    case CAIRN_DTYPE_BOOL: return "bool";
  }
  return "?";
}

static float f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu, bits;
  if (exp == 0) {
    float v = (float)man * 5.9604644775390625e-8f; /* man × 2^-24: zero or subnormal */
    return sign ? -v : v;
  }
  if (exp == 31)
    bits = sign | 0x7F800000u | (man << 13);
  else
    bits = sign | ((exp + 112) << 23) | (man << 13);
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

/* Round to nearest even, as a f16 store would. */
static uint16_t f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  uint32_t ax = x & 0x7FFFFFFFu;
  if (ax >= 0x7F800000u) return (uint16_t)(sign | 0x7C00u | (ax > 0x7F800000u ? 0x200u : 0));
  if (ax >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u); /* rounds to infinity */
  if (ax < 0x38800000u) {                                    /* below 2^-14: subnormal half */
    float v;
    memcpy(&v, &ax, 4);
    return (uint16_t)(sign | (uint16_t)lrintf(v * 16777216.0f));
  }
  ax += 0xC8000FFFu + ((ax >> 13) & 1u); /* rebias the exponent and round */
  return (uint16_t)(sign | (ax >> 13));
}

static float bf16_to_f32(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}
static uint16_t f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((x >> 16) | 0x40u);
  return (uint16_t)((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

/* Element i as a double (exact for every float dtype and for integers up
 * to 2^53). */
static double get_d(cairn_dtype dt, const void *data, uint64_t i) {
  const unsigned char *p = data;
  switch (dt) {
    case CAIRN_DTYPE_F32: { float v; memcpy(&v, p + 4 * i, 4); return v; }
    case CAIRN_DTYPE_F64: { double v; memcpy(&v, p + 8 * i, 8); return v; }
    case CAIRN_DTYPE_F16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return f16_to_f32(v); }
    case CAIRN_DTYPE_BF16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return bf16_to_f32(v); }
    case CAIRN_DTYPE_I8: return ((const int8_t *)data)[i];
    case CAIRN_DTYPE_I16: { int16_t v; memcpy(&v, p + 2 * i, 2); return v; }
    case CAIRN_DTYPE_I32: { int32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    case CAIRN_DTYPE_I64: { int64_t v; memcpy(&v, p + 8 * i, 8); return (double)v; }
    case CAIRN_DTYPE_U8: return p[i];
    case CAIRN_DTYPE_U16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return v; }
    case CAIRN_DTYPE_U32: { uint32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    case CAIRN_DTYPE_U64: { uint64_t v; memcpy(&v, p + 8 * i, 8); return (double)v; }
    case CAIRN_DTYPE_BOOL: return p[i] != 0;
  }
  return 0;
}
static int64_t get_i(cairn_dtype dt, const void *data, uint64_t i) {
  const unsigned char *p = data;
  switch (dt) {
    case CAIRN_DTYPE_I64: { int64_t v; memcpy(&v, p + 8 * i, 8); return v; }
    default: return (int64_t)get_d(dt, data, i);
  }
}
static uint64_t get_u(cairn_dtype dt, const void *data, uint64_t i) {
  const unsigned char *p = data;
  switch (dt) {
    case CAIRN_DTYPE_U64: { uint64_t v; memcpy(&v, p + 8 * i, 8); return v; }
    default: return (uint64_t)get_d(dt, data, i);
  }
}

/* v rounded to dtype dt and back (to test whether a decimal string
 * identifies the stored value). */
static double narrow(double v, cairn_dtype dt) {
  switch (dt) {
    case CAIRN_DTYPE_F32: return (float)v;
    case CAIRN_DTYPE_F16: return f16_to_f32(f32_to_f16((float)v));
    case CAIRN_DTYPE_BF16: return bf16_to_f32(f32_to_bf16((float)v));
    default: return v;
  }
}

/* The shortest decimal that identifies v in dt: positional for
 * 1e-4 <= |v| < 1e16 (and 0), scientific otherwise. */
static void fmt_shortest(char *b, size_t n, double v, cairn_dtype dt) {
  if (isnan(v)) { snprintf(b, n, "nan"); return; }
  if (isinf(v)) { snprintf(b, n, v < 0 ? "-inf" : "inf"); return; }
  double a = fabs(v);
  if (a == 0 || (a >= 1e-4 && a < 1e16)) {
    for (int d = 0; d <= 24; d++) {
      snprintf(b, n, "%.*f", d, v);
      if (narrow(strtod(b, NULL), dt) == v) return;
    }
  }
  for (int p = 1; p <= 17; p++) {
    snprintf(b, n, "%.*g", p, v);
    if (narrow(strtod(b, NULL), dt) == v) return;
  }
}

/* ---- Opening checkpoints ---------------------------------------------------- */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* A path that does not exist: explain what the user probably meant. */
static void explain_missing(const char *arg) {
  char *copy = strdup(arg);
  if (!copy) {
    errorf("%s: no such file or directory", arg);
    return;
  }
  char *slash = strrchr(copy, '/');
  const char *dir = ".", *base = copy;
  if (slash) {
    *slash = '\0';
    dir = slash == copy ? "/" : copy;
    base = slash + 1;
  }
  size_t blen = strlen(base);
  /* TensorFlow habits: "model.ckpt-100.index" or ".data-00000-of-00001". */
  const char *tf = strstr(arg, ".data-");
  if (!tf && ends_with(arg, ".index")) tf = arg + strlen(arg) - 6;
  if (tf) {
    char alt[4096];
    snprintf(alt, sizeof alt, "%.*s", (int)(tf - arg), arg);
    struct stat st;
    if (stat(alt, &st) == 0) {
      errorf("%s: no such file; cairn keeps a checkpoint in one file (no .index/.data parts): pass %s", arg,
             alt);
      free(copy);
      return;
    }
  }
  char **found = NULL;
  size_t nfound = 0, cap = 0;
  int has_state = 0;
  DIR *d = blen ? opendir(dir) : NULL;
  if (d) {
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
      if (strcmp(de->d_name, "checkpoint") == 0) has_state = 1;
      if (strncmp(de->d_name, base, blen) != 0 || de->d_name[blen] == '\0') continue;
      if (nfound == cap) {
        size_t nc = cap ? cap * 2 : 16;
        char **nf = realloc(found, nc * sizeof *nf);
        if (!nf) break;
        found = nf;
        cap = nc;
      }
      found[nfound] = strdup(de->d_name);
      if (found[nfound]) nfound++;
    }
    closedir(d);
  }
  /* A TensorFlow prefix whose .index is gone: only its data shards are
     left, and no one of them is a checkpoint by itself. */
  size_t shards = 0;
  for (size_t i = 0; i < nfound; i++) shards += strncmp(found[i] + blen, ".data-", 6) == 0;
  if (nfound && shards == nfound) {
    errorf("%s: a TensorFlow bundle whose index '%s.index' is missing (only its %zu data shard%s left): a bundle is "
           "PREFIX.index plus its PREFIX.data-* shards; copy the .index file too",
           arg, arg, shards, shards == 1 ? " is" : "s are");
  } else if (nfound == 0) {
    errorf("%s: no such file or directory", arg);
  } else {
    qsort(found, nfound, sizeof *found, cmp_str);
    fputs(PROG ": ", stderr);
    put_esc(stderr, arg);
    fprintf(stderr, ": no such file, but %zu file%s start%s with that prefix (a checkpoint is one file: "
                    "pass one of them%s):\n",
            nfound, nfound == 1 ? "" : "s", nfound == 1 ? "s" : "",
            has_state ? ", or the directory for its latest checkpoint" : "");
    for (size_t i = 0; i < nfound && i < 20; i++) {
      fputs("  ", stderr);
      if (slash) {
        put_esc(stderr, dir);
        if (strcmp(dir, "/") != 0) fputc('/', stderr);
      }
      put_esc(stderr, found[i]);
      if (strstr(found[i], ".tmp.")) fputs("   (temporary file of an unfinished save)", stderr);
      fputc('\n', stderr);
    }
    if (nfound > 20) fprintf(stderr, "  ... and %zu more\n", nfound - 20);
  }
  for (size_t i = 0; i < nfound; i++) free(found[i]);
  free(found);
  free(copy);
}

/* The checkpoints resolve() chose in a directory, still open: the handle
 * was opened inside the directory (nothing a link leads to outside it is
 * read; cairn_latest_checkpoint_open), and it stays valid when rotation
 * deletes the file meanwhile. open_ckpt takes them over; what is left is
 * closed at exit. Two: diff resolves two arguments. */
static struct {
  char path[4096];
  cairn_ckpt *c;
} g_resolved[2];

static void close_resolved(void) {
  for (size_t i = 0; i < 2; i++) {
    cairn_ckpt_close(g_resolved[i].c);
    g_resolved[i].c = NULL;
  }
}

/* The handle resolve() kept for path, now the caller's; NULL if none. */
static cairn_ckpt *take_resolved(const char *path) {
  for (size_t i = 0; i < 2; i++)
    if (g_resolved[i].c && strcmp(g_resolved[i].path, path) == 0) {
      cairn_ckpt *c = g_resolved[i].c;
      g_resolved[i].c = NULL;
      return c;
    }
  return NULL;
}

/* Resolves a CKPT argument into a file path: a file as is, a directory
 * to its latest valid checkpoint (when allow_dir). Prints the error. */
/* The codecs of a tensor's chunks, e.g. "compact+raw" ("-" for no data). */
static const char *codec_str(const cairn_ckpt *c, const char *name, char *buf, size_t cap) {
  static const char *const names[] = {"raw", "lz4", "shuffle", "compact"};
  unsigned m = 0;
  buf[0] = '\0';
  if (cairn_ckpt_codecs(c, name, &m) != CAIRN_OK) return "?";
  /* the compressed codecs first: the interesting part */
  for (int k = 3; k >= 0; k--)
    if (m & (1u << k)) {
      size_t l = strlen(buf);
      snprintf(buf + l, cap - l, "%s%s", l ? "+" : "", names[k]);
    }
  if (m >> 4) snprintf(buf + strlen(buf), cap - strlen(buf), "%s?", buf[0] ? "+" : "");
  return buf[0] ? buf : "-";
}

static int resolve(const char *arg, int allow_dir, char *out, size_t outlen) {
  struct stat st;
  char tf[4096];
  /* A TensorFlow checkpoint is a prefix: no file by that name, but PREFIX.index. */
  if (stat(arg, &st) != 0 && (size_t)snprintf(tf, sizeof tf, "%s.index", arg) < sizeof tf && stat(tf, &st) == 0 &&
      strlen(arg) < outlen) {
    memcpy(out, arg, strlen(arg) + 1);
    return 0;
  }
  if (stat(arg, &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR)
      explain_missing(arg);
    else
      errorf("%s: %s", arg, strerror(errno));
    return -1;
  }
  if (S_ISDIR(st.st_mode)) {
    if (!allow_dir) {
      errorf("%s: is a directory (this subcommand needs a checkpoint file)", arg);
      return -1;
    }
    char why[4096];
    size_t slot = g_resolved[0].c ? 1 : 0;
    static int registered;
    if (!registered++) atexit(close_resolved);
    cairn_ckpt_close(g_resolved[slot].c);
    g_resolved[slot].c = NULL;
    cairn_status s = cairn_latest_checkpoint_open(arg, out, outlen, why, sizeof why, &g_resolved[slot].c);
    if (s == CAIRN_OK) snprintf(g_resolved[slot].path, sizeof g_resolved[slot].path, "%s", out);
    if (s != CAIRN_OK) {
      char what[4200];
      snprintf(what, sizeof what, "%s: no valid checkpoint in this directory", arg);
      error_status(what, s);
      return -1;
    }
    /* Say why the newest checkpoint was skipped, if it was. */
    if (*why) errorf("note: %s", why);
    return 0;
  }
  if (strlen(arg) >= outlen) {
    errorf("%s: path too long", arg);
    return -1;
  }
  memcpy(out, arg, strlen(arg) + 1);
  return 0;
}

static const char *base_name(const char *p) {
  const char *s = strrchr(p, '/');
  return s ? s + 1 : p;
}

/* 1 if path starts with cairn's own magic. The hints about interrupted
 * saves, recover and newer versions are about cairn's files only: a
 * TensorFlow prefix or a safetensors file that is cut short was not
 * written by an interrupted Saver, and recover cannot read it. */
static int is_cairn_file(const char *path) {
  static const unsigned char magic[8] = {0x89, 'C', 'R', 'N', '\r', '\n', 0x1a, '\n'};
  unsigned char b[8];
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  int ok = fread(b, 1, 8, f) == 8 && memcmp(b, magic, 8) == 0;
  fclose(f);
  return ok;
}

/* Opens path; prints the error with a hint, returns the status. */
static cairn_status open_ckpt(const char *path, cairn_ckpt **c) {
  if ((*c = take_resolved(path)) != NULL) return CAIRN_OK;
  cairn_status s = cairn_ckpt_open(path, NULL, c);
  if (s == CAIRN_OK) return s;
  error_status(path, s);
  if ((s == CAIRN_E_TRUNCATED || s == CAIRN_E_UNSUPPORTED) && !is_cairn_file(path))
    ; /* a foreign file: the library's message says what is wrong with it */
  else if (s == CAIRN_E_TRUNCATED)
    errorf("%s is incomplete (no valid footer: the save that wrote it was interrupted); "
           "'ckpt-inspect recover %s OUT' copies its complete tensors into a new valid file",
           path, path);
  else if (s == CAIRN_E_FORMAT && strcmp(base_name(path), "checkpoint") == 0)
    errorf("%s looks like the Saver's state file, not a checkpoint: pass its directory for the latest "
           "checkpoint",
           path);
  else if (s == CAIRN_E_UNSUPPORTED)
    errorf("%s was written by a newer cairn (this is %s, which reads format %d.x)", path,
           cairn_version_string(), CAIRN_CKPT_VERSION_MAJOR);
  return s;
}

/* "format 1.0" for cairn's own files; the foreign formats by name. */
static const char *format_label(const cairn_ckpt *c, char *b, size_t n) {
  int major, minor;
  const char *f = cairn_ckpt_format(c);
  cairn_ckpt_version(c, &major, &minor);
  if (strcmp(f, "tf") == 0) snprintf(b, n, "TensorFlow checkpoint (bundle version %d)", major);
  else if (strcmp(f, "safetensors") == 0) snprintf(b, n, "safetensors");
  else snprintf(b, n, "format %d.%d", major, minor);
  return b;
}

/* Reads tensor e into a new tensor of its dtype and shape. */
static cairn_status read_tensor(cairn_ckpt *c, const cairn_ckpt_entry *e, cairn_tensor **out) {
  cairn_status s = cairn_tensor_new(e->dtype, e->rank, e->shape, out);
  if (s != CAIRN_OK) return s;
  s = cairn_ckpt_read(c, e->name, *out);
  if (s != CAIRN_OK) {
    cairn_tensor_free(*out);
    *out = NULL;
  }
  return s;
}

static void error_tensor(const char *path, const char *name, cairn_status s) {
  size_t n = strlen(path) + strlen(name) + 16;
  char *what = malloc(n);
  if (!what) {
    error_status(path, s);
    return;
  }
  snprintf(what, n, "%s: tensor '%s'", path, name);
  error_status(what, s);
  free(what);
}

static void shape_str(char *b, size_t n, int rank, const int64_t *shape) {
  size_t o = (size_t)snprintf(b, n, "(");
  for (int k = 0; k < rank && o < n; k++)
    o += (size_t)snprintf(b + o, n - o, k ? ", %lld" : "%lld", (long long)shape[k]);
  if (o < n) snprintf(b + o, n - o, rank == 1 ? ",)" : ")");
}

static uint64_t elem_count(int rank, const int64_t *shape) {
  uint64_t n = 1;
  for (int k = 0; k < rank; k++) n *= (uint64_t)shape[k];
  return n;
}

/* ---- list ----------------------------------------------------------------- */

static void ratio_str(char *b, size_t n, uint64_t raw, uint64_t stored) {
  if (raw == 0 || stored == 0)
    snprintf(b, n, "-");
  else
    snprintf(b, n, "%.2fx", (double)raw / (double)stored);
}

static int cmd_list(const options *o, const char *arg) {
  char path[4096];
  if (resolve(arg, 1, path, sizeof path) != 0) return EXIT_ERROR;
  cairn_ckpt *c;
  if (open_ckpt(path, &c) != CAIRN_OK) return EXIT_ERROR;
  size_t n = cairn_ckpt_count(c);
  cairn_ckpt_entry *es = calloc(n ? n : 1, sizeof *es);
  if (!es) {
    errorf("out of memory");
    cairn_ckpt_close(c);
    return EXIT_ERROR;
  }
  for (size_t i = 0; i < n; i++) {
    cairn_status s = cairn_ckpt_entry_at(c, i, &es[i]);
    if (s != CAIRN_OK) {
      error_status(path, s);
      free(es);
      cairn_ckpt_close(c);
      return EXIT_ERROR;
    }
  }
  int major, minor;
  cairn_ckpt_version(c, &major, &minor);
  uint64_t raw = 0, stored = 0;
  for (size_t i = 0; i < n; i++) {
    raw += es[i].raw_bytes;
    stored += es[i].stored_bytes;
  }
  if (o->json) {
    fputs("{\"file\": ", stdout);
    json_str(stdout, path);
    printf(", \"format_version\": \"%d.%d\", \"tensor_count\": %zu, \"raw_bytes\": %llu, "
           "\"stored_bytes\": %llu, \"tensors\": [",
           major, minor, n, (unsigned long long)raw, (unsigned long long)stored);
    for (size_t i = 0; i < n; i++) {
      const cairn_ckpt_entry *e = &es[i];
      fputs(i ? ",\n  {\"name\": " : "\n  {\"name\": ", stdout);
      json_str(stdout, e->name);
      printf(", \"dtype\": \"%s\", \"shape\": ", dtype_str(e->dtype));
      json_shape(stdout, e->rank, e->shape);
      printf(", \"raw_bytes\": %llu, \"stored_bytes\": %llu, \"ratio\": ", (unsigned long long)e->raw_bytes,
             (unsigned long long)e->stored_bytes);
      json_num(stdout, e->stored_bytes ? (double)e->raw_bytes / (double)e->stored_bytes : NAN);
      char cd[64];
      printf(", \"crc32c\": \"%08x\", \"chunks\": %u, \"layout\": \"%s\", \"codecs\": \"%s\"}",
             (unsigned)e->raw_crc32c, (unsigned)e->n_chunks, e->n_chunks == 0 && e->raw_bytes ? "aligned" : "chunked",
             codec_str(c, e->name, cd, sizeof cd));
    }
    printf("%s]}\n", n ? "\n" : "");
  } else {
    size_t wn = 4, wd = 5, ws = 5;
    char b[256];
    for (size_t i = 0; i < n; i++) {
      size_t w = esc_width(es[i].name);
      if (w > wn) wn = w;
      if (strlen(dtype_str(es[i].dtype)) > wd) wd = strlen(dtype_str(es[i].dtype));
      shape_str(b, sizeof b, es[i].rank, es[i].shape);
      if (strlen(b) > ws) ws = strlen(b);
    }
    printf("# ");
    put_esc(stdout, path);
    char fl[80];
    printf(": %s, %zu tensor%s\n", format_label(c, fl, sizeof fl), n, n == 1 ? "" : "s");
    printf("%-*s  %-*s  %-*s  %12s  %12s  %7s  %-8s  %-7s  %s\n", (int)wn, "NAME", (int)wd, "DTYPE", (int)ws, "SHAPE",
           "RAW", "STORED", "RATIO", "CRC32C", "CHUNKS", "CODEC");
    for (size_t i = 0; i < n; i++) {
      const cairn_ckpt_entry *e = &es[i];
      char shp[256], rt[32], ch[24];
      shape_str(shp, sizeof shp, e->rank, e->shape);
      ratio_str(rt, sizeof rt, e->raw_bytes, e->stored_bytes);
      if (e->n_chunks == 0 && e->raw_bytes)
        snprintf(ch, sizeof ch, "aligned");
      else
        snprintf(ch, sizeof ch, "%u", (unsigned)e->n_chunks);
      char cd[64];
      put_esc_padded(stdout, e->name, wn);
      printf("  %-*s  %-*s  %12llu  %12llu  %7s  %08x  %-7s  %s\n", (int)wd, dtype_str(e->dtype), (int)ws, shp,
             (unsigned long long)e->raw_bytes, (unsigned long long)e->stored_bytes, rt,
             (unsigned)e->raw_crc32c, ch, codec_str(c, e->name, cd, sizeof cd));
    }
    char rt[32];
    ratio_str(rt, sizeof rt, raw, stored);
    printf("# total: %zu tensor%s, %llu raw bytes, %llu stored bytes, ratio %s\n", n, n == 1 ? "" : "s",
           (unsigned long long)raw, (unsigned long long)stored, rt);
  }
  free(es);
  cairn_ckpt_close(c);
  return EXIT_OK_;
}

/* ---- show: numpy-style array printing --------------------------------------- */

#define EDGE_ITEMS 3
#define THRESHOLD 1000
/* NumPy's linewidth is 75, less 1 for the suffix ("," or ")") array_repr passes. */
#define LINE_WIDTH 74
#define MAX_FRAC 8 /* NumPy's default precision */

typedef struct fmt {
  cairn_dtype dt;
  const void *data;
  int rank;
  const int64_t *shape;
  uint64_t stride[CAIRN_MAX_RANK];
  int summarize;
  /* floats */
  int exp_mode, precision, pad_left, pad_right, exp_size;
  int any_finite;
  double max_abs, min_abs; /* over finite non-zero displayed values */
  int have_nonzero;
  /* integers and bool */
  int width;
} fmt;

typedef void (*visit_fn)(fmt *f, uint64_t i);

/* Visits the displayed elements (with summarization, the first and last
 * EDGE_ITEMS of every long axis) in order. */
static void visit(fmt *f, int dim, uint64_t off, visit_fn fn) {
  if (dim == f->rank) {
    fn(f, off);
    return;
  }
  int64_t n = f->shape[dim];
  int summary = f->summarize && n > 2 * EDGE_ITEMS;
  for (int64_t i = 0; i < n; i++) {
    if (summary && i == EDGE_ITEMS) i = n - EDGE_ITEMS;
    visit(f, dim + 1, off + (uint64_t)i * f->stride[dim], fn);
  }
}

static int fixed_digits(double v, cairn_dtype dt) {
  char b[400];
  for (int d = 0; d <= MAX_FRAC; d++) {
    snprintf(b, sizeof b, "%.*f", d, v);
    if (narrow(strtod(b, NULL), dt) == v) return d;
  }
  /* Not identifiable in MAX_FRAC digits: that many, less trailing zeros. */
  snprintf(b, sizeof b, "%.*f", MAX_FRAC, v);
  int d = MAX_FRAC;
  size_t l = strlen(b);
  while (d > 0 && b[l - 1] == '0') {
    l--;
    d--;
  }
  return d;
}

static int exp_digits(double v, cairn_dtype dt) {
  char b[64];
  for (int d = 0; d <= MAX_FRAC; d++) {
    snprintf(b, sizeof b, "%.*e", d, v);
    if (narrow(strtod(b, NULL), dt) == v) return d;
  }
  snprintf(b, sizeof b, "%.*e", MAX_FRAC, v);
  char *e = strchr(b, 'e');
  int d = MAX_FRAC;
  while (d > 0 && e[-1] == '0') {
    e--;
    d--;
  }
  return d;
}

static void scan_range(fmt *f, uint64_t i) {
  double v = get_d(f->dt, f->data, i);
  if (!isfinite(v)) return;
  f->any_finite = 1;
  double a = fabs(v);
  if (a == 0) return;
  if (!f->have_nonzero || a > f->max_abs) f->max_abs = a;
  if (!f->have_nonzero || a < f->min_abs) f->min_abs = a;
  f->have_nonzero = 1;
}

/* Splits a "%.*f"/"%.*e" string into integer-part length. */
static int int_part_len(const char *s) {
  const char *d = strchr(s, '.');
  if (d) return (int)(d - s);
  const char *e = strchr(s, 'e');
  return e ? (int)(e - s) : (int)strlen(s);
}

static void scan_widths(fmt *f, uint64_t i) {
  double v = get_d(f->dt, f->data, i);
  char b[400];
  if (dtype_is_float(f->dt)) {
    if (!isfinite(v)) return;
    if (f->exp_mode) {
      int d = exp_digits(v, f->dt);
      if (d > f->precision) f->precision = d;
    } else {
      int d = fixed_digits(v, f->dt);
      if (d > f->pad_right) f->pad_right = d;
      snprintf(b, sizeof b, "%.*f", d, v);
      int il = int_part_len(b);
      if (il > f->pad_left) f->pad_left = il;
    }
  } else if (f->dt == CAIRN_DTYPE_BOOL) {
    f->width = 5;
  } else {
    if (dtype_is_signed(f->dt))
      snprintf(b, sizeof b, "%lld", (long long)get_i(f->dt, f->data, i));
    else
      snprintf(b, sizeof b, "%llu", (unsigned long long)get_u(f->dt, f->data, i));
    if ((int)strlen(b) > f->width) f->width = (int)strlen(b);
  }
}

/* Exponent mode, once the precision is known: int part and exponent widths. */
static void scan_exp_widths(fmt *f, uint64_t i) {
  double v = get_d(f->dt, f->data, i);
  if (!isfinite(v)) return;
  char b[64];
  snprintf(b, sizeof b, "%.*e", f->precision, v);
  int il = int_part_len(b);
  if (il > f->pad_left) f->pad_left = il;
  const char *e = strchr(b, 'e');
  int es = (int)strlen(e + 2);
  if (es > f->exp_size) f->exp_size = es;
}

static void scan_nonfinite(fmt *f, uint64_t i) {
  double v = get_d(f->dt, f->data, i);
  if (!isfinite(v)) {
    int w = isnan(v) ? 3 : 3 + (v < 0);
    int offset = f->pad_right + 1;
    if (w - offset > f->pad_left) f->pad_left = w - offset;
  }
}

/* Formats element i as NumPy would with the widths found by the scans. */
static void format_elem(const fmt *f, uint64_t i, char *out, size_t n) {
  double v = get_d(f->dt, f->data, i);
  char b[400];
  if (dtype_is_float(f->dt)) {
    if (!isfinite(v)) {
      const char *s = isnan(v) ? "nan" : v < 0 ? "-inf" : "inf";
      int total = f->pad_left + f->pad_right + 1;
      snprintf(out, n, "%*s", total, s);
      return;
    }
    if (f->exp_mode) {
      /* "-1.50e-05": mantissa int part padded left, exponent digits to exp_size */
      snprintf(b, sizeof b, "%.*e", f->precision, v);
      char *e = strchr(b, 'e');
      *e = '\0';
      int il = int_part_len(b);
      snprintf(out, n, "%*s%s%se%c%0*d", f->pad_left - il, "", b, f->precision == 0 ? "." : "", e[1],
               f->exp_size, atoi(e + 2));
    } else {
      int d = fixed_digits(v, f->dt);
      snprintf(b, sizeof b, "%.*f%s", d, v, d == 0 ? "." : "");
      int il = int_part_len(b);
      int frac = d;
      snprintf(out, n, "%*s%s%*s", f->pad_left - il, "", b, f->pad_right - frac, "");
    }
  } else if (f->dt == CAIRN_DTYPE_BOOL) {
    snprintf(out, n, "%*s", f->width, get_d(f->dt, f->data, i) != 0 ? "True" : "False");
  } else if (dtype_is_signed(f->dt)) {
    snprintf(out, n, "%*lld", f->width, (long long)get_i(f->dt, f->data, i));
  } else {
    snprintf(out, n, "%*llu", f->width, (unsigned long long)get_u(f->dt, f->data, i));
  }
}

/* Output of the array printer, tracking the column for the dtype suffix. */
static int g_col;
static void out_str(const char *s) {
  for (; *s; s++) {
    putchar(*s);
    g_col = *s == '\n' ? 0 : g_col + 1;
  }
}
static void out_ch(char c) {
  char b[2] = {c, 0};
  out_str(b);
}
static void put_spaces(int n) {
  for (int i = 0; i < n; i++) out_ch(' ');
}

/* NumPy's _formatArray, streamed: "[" is at column hang-1, the content
 * starts at column hang. */
static void print_rec(const fmt *f, int dim, uint64_t off, int hang, int width) {
  int64_t n = f->shape[dim];
  int summary = f->summarize && n > 2 * EDGE_ITEMS;
  int axes_left = f->rank - dim;
  out_ch('[');
  if (axes_left == 1) {
    int elem_width = width - 1;
    int col = hang;
    char word[512];
    for (int64_t i = 0; i < n; i++) {
      int is_summary = summary && i == EDGE_ITEMS;
      if (is_summary)
        snprintf(word, sizeof word, "...");
      else
        format_elem(f, off + (uint64_t)i * f->stride[dim], word, sizeof word);
      int wl = (int)strlen(word);
      if (i > 0) {
        if (col + wl > elem_width && col > hang + 0) {
          out_ch('\n');
          put_spaces(hang);
          col = hang;
        } else {
          out_ch(' ');
        }
      }
      out_str(word);
      col += wl;
      if (i + 1 < n) {
        out_ch(',');
        col += 2; /* ", " as NumPy counts it */
      }
      if (is_summary) i = n - EDGE_ITEMS - 1;
    }
  } else {
    for (int64_t i = 0; i < n; i++) {
      if (i > 0) {
        out_ch(',');
        for (int k = 0; k < axes_left - 1; k++) out_ch('\n');
        put_spaces(hang);
      }
      if (summary && i == EDGE_ITEMS) {
        out_str("...");
        i = n - EDGE_ITEMS - 1;
        continue;
      }
      print_rec(f, dim + 1, off + (uint64_t)i * f->stride[dim], hang + 1, width - 1);
    }
  }
  out_ch(']');
}

static void print_array(const cairn_ckpt_entry *e, const void *data, int all) {
  fmt f;
  memset(&f, 0, sizeof f);
  f.dt = e->dtype;
  f.data = data;
  f.rank = e->rank;
  f.shape = e->shape;
  uint64_t count = elem_count(e->rank, e->shape);
  f.summarize = !all && count > THRESHOLD;
  uint64_t s = 1;
  for (int k = e->rank - 1; k >= 0; k--) {
    f.stride[k] = s;
    s *= (uint64_t)e->shape[k];
  }
  const char *np = numpy_name(e->dtype);
  int default_dtype = e->dtype == CAIRN_DTYPE_F64 || e->dtype == CAIRN_DTYPE_I64 || e->dtype == CAIRN_DTYPE_BOOL;
  if (count == 0) {
    char shp[256];
    shape_str(shp, sizeof shp, e->rank, e->shape);
    if (e->rank == 1)
      printf("array([], dtype=%s)\n", np);
    else
      printf("array([], shape=%s, dtype=%s)\n", shp, np);
    return;
  }
  if (dtype_is_float(f.dt)) {
    visit(&f, 0, 0, scan_range);
    f.exp_mode = f.have_nonzero && (f.max_abs >= 1e8 || f.min_abs < 1e-4 || f.max_abs / f.min_abs > 1e3);
  }
  visit(&f, 0, 0, scan_widths);
  if (dtype_is_float(f.dt)) {
    if (f.exp_mode && f.any_finite) {
      visit(&f, 0, 0, scan_exp_widths);
      f.pad_right = f.exp_size + 2 + f.precision;
    }
    visit(&f, 0, 0, scan_nonfinite);
  }
  g_col = 0;
  out_str("array(");
  if (e->rank == 0) {
    char word[512];
    format_elem(&f, 0, word, sizeof word);
    /* a scalar has no padding to share */
    const char *w = word;
    while (*w == ' ') w++;
    out_str(w);
  } else {
    print_rec(&f, 0, 0, 7, LINE_WIDTH);
  }
  if (default_dtype) {
    puts(")");
  } else {
    /* NumPy moves the dtype to its own line when it would pass column 75. */
    int wrap = g_col + 1 + 7 + (int)strlen(np) + 1 > LINE_WIDTH + 1;
    printf(",%sdtype=%s)\n", wrap ? "\n      " : " ", np);
  }
}

typedef struct stats {
  uint64_t count, nan, pinf, ninf, finite, n_true;
  double min, max, mean, std;
  int64_t imin, imax;
  uint64_t umin, umax;
} stats;

static void compute_stats(cairn_dtype dt, const void *data, uint64_t count, stats *st) {
  memset(st, 0, sizeof *st);
  st->count = count;
  double sum = 0;
  for (uint64_t i = 0; i < count; i++) {
    if (dtype_is_signed(dt)) {
      int64_t v = get_i(dt, data, i);
      if (i == 0 || v < st->imin) st->imin = v;
      if (i == 0 || v > st->imax) st->imax = v;
    } else if (dtype_is_unsigned(dt)) {
      uint64_t v = get_u(dt, data, i);
      if (i == 0 || v < st->umin) st->umin = v;
      if (i == 0 || v > st->umax) st->umax = v;
    }
    double v = get_d(dt, data, i);
    if (isnan(v)) {
      st->nan++;
      continue;
    }
    if (isinf(v)) {
      if (v > 0) st->pinf++;
      else st->ninf++;
      continue;
    }
    if (dt == CAIRN_DTYPE_BOOL && v != 0) st->n_true++;
    if (st->finite == 0 || v < st->min) st->min = v;
    if (st->finite == 0 || v > st->max) st->max = v;
    st->finite++;
    sum += v;
  }
  if (st->finite) {
    st->mean = sum / (double)st->finite;
    double ss = 0;
    for (uint64_t i = 0; i < count; i++) {
      double v = get_d(dt, data, i);
      if (isfinite(v)) ss += (v - st->mean) * (v - st->mean);
    }
    st->std = sqrt(ss / (double)st->finite);
  }
}

static int find_entry(cairn_ckpt *c, const char *path, const char *name, cairn_ckpt_entry *e) {
  cairn_status s = cairn_ckpt_find(c, name, e);
  if (s == CAIRN_E_NOT_FOUND) {
    /* The name may have been typed as list printed it (escaped). */
    char *u = unescape(name);
    if (u && strcmp(u, name) != 0) {
      s = cairn_ckpt_find(c, u, e);
      if (s == CAIRN_OK) {
        free(u);
        return 0;
      }
    }
    free(u);
    error_tensor(path, name, CAIRN_E_NOT_FOUND);
    errorf("'ckpt-inspect list %s' lists the tensors", path);
    return -1;
  }
  if (s != CAIRN_OK) {
    error_tensor(path, name, s);
    return -1;
  }
  return 0;
}

static int cmd_show(const options *o, const char *arg, const char *name) {
  char path[4096];
  if (resolve(arg, 1, path, sizeof path) != 0) return EXIT_ERROR;
  cairn_ckpt *c;
  if (open_ckpt(path, &c) != CAIRN_OK) return EXIT_ERROR;
  cairn_ckpt_entry e;
  if (find_entry(c, path, name, &e) != 0) {
    cairn_ckpt_close(c);
    return EXIT_ERROR;
  }
  cairn_tensor *t = NULL;
  cairn_status s = read_tensor(c, &e, &t);
  if (s != CAIRN_OK) {
    error_tensor(path, e.name, s);
    cairn_ckpt_close(c);
    return EXIT_ERROR;
  }
  uint64_t count = elem_count(e.rank, e.shape);
  char shp[256];
  shape_str(shp, sizeof shp, e.rank, e.shape);
  put_esc(stdout, e.name);
  printf(": %s %s, %llu element%s, %llu bytes, crc32c %08x\n", dtype_str(e.dtype), shp,
         (unsigned long long)count, count == 1 ? "" : "s", (unsigned long long)e.raw_bytes,
         (unsigned)e.raw_crc32c);
  stats st;
  compute_stats(e.dtype, t->data, count, &st);
  char a[64], b[64], m[64], d[64];
  if (count == 0) {
    printf("empty\n");
  } else if (dtype_is_float(e.dtype)) {
    if (st.finite) {
      fmt_shortest(a, sizeof a, st.min, e.dtype);
      fmt_shortest(b, sizeof b, st.max, e.dtype);
      snprintf(m, sizeof m, "%.7g", st.mean);
      snprintf(d, sizeof d, "%.7g", st.std);
      printf("min %s  max %s  mean %s  std %s%s", a, b, m, d, st.finite < count ? " (finite values)" : "");
    } else {
      printf("no finite values");
    }
    printf("  nan %llu  +inf %llu  -inf %llu\n", (unsigned long long)st.nan, (unsigned long long)st.pinf,
           (unsigned long long)st.ninf);
  } else if (e.dtype == CAIRN_DTYPE_BOOL) {
    printf("true %llu  false %llu  mean %.7g\n", (unsigned long long)st.n_true,
           (unsigned long long)(count - st.n_true), st.mean);
  } else {
    if (dtype_is_signed(e.dtype))
      printf("min %lld  max %lld", (long long)st.imin, (long long)st.imax);
    else
      printf("min %llu  max %llu", (unsigned long long)st.umin, (unsigned long long)st.umax);
    printf("  mean %.7g  std %.7g\n", st.mean, st.std);
  }
  print_array(&e, t->data, o->all);
  cairn_tensor_free(t);
  cairn_ckpt_close(c);
  return EXIT_OK_;
}

/* ---- diff ------------------------------------------------------------------ */

typedef enum { D_ADDED, D_REMOVED, D_DTYPE, D_SHAPE, D_VALUES, D_CLOSE } dkind;

typedef struct dresult {
  dkind kind;
  const char *name;
  const cairn_ckpt_entry *a, *b;
  uint64_t n_diff, n, n_nan; /* n_nan: pairs where only one side is NaN */
  double max_abs, max_rel;
} dresult;

static int cmp_entry(const void *x, const void *y) {
  return strcmp(((const cairn_ckpt_entry *)x)->name, ((const cairn_ckpt_entry *)y)->name);
}

static cairn_ckpt_entry *load_entries(cairn_ckpt *c, const char *path, size_t *n) {
  *n = cairn_ckpt_count(c);
  cairn_ckpt_entry *es = calloc(*n ? *n : 1, sizeof *es);
  if (!es) {
    errorf("out of memory");
    return NULL;
  }
  for (size_t i = 0; i < *n; i++) {
    cairn_status s = cairn_ckpt_entry_at(c, i, &es[i]);
    if (s != CAIRN_OK) {
      error_status(path, s);
      free(es);
      return NULL;
    }
  }
  qsort(es, *n, sizeof *es, cmp_entry);
  return es;
}

/* Element-wise comparison: a value counts as different when
 * |a - b| > atol + rtol·|b| (numpy.isclose); NaN equals NaN, infinities
 * equal themselves. max_rel is |a - b| / |b| (inf where b == 0 != a). */
/* Folds one differing pair (|a - b| = dd, reference |b| = ref) into r. */
static void note_diff(dresult *r, double dd, double ref, double atol, double rtol) {
  if (dd > r->max_abs) r->max_abs = dd;
  double rel = ref == 0 ? INFINITY : dd / ref;
  if (rel > r->max_rel) r->max_rel = rel;
  if (isinf(dd) || dd > atol + rtol * ref) r->n_diff++;
}

static void compare_values(cairn_dtype dt, const void *pa, const void *pb, uint64_t n, double atol, double rtol,
                           dresult *r) {
  r->n = n;
  for (uint64_t i = 0; i < n; i++) {
    if (dt == CAIRN_DTYPE_I64) { /* exact: doubles lose bits beyond 2^53 */
      int64_t u = get_i(dt, pa, i), v = get_i(dt, pb, i);
      if (u == v) continue;
      uint64_t d = u > v ? (uint64_t)u - (uint64_t)v : (uint64_t)v - (uint64_t)u;
      note_diff(r, (double)d, fabs((double)v), atol, rtol);
      continue;
    }
    if (dt == CAIRN_DTYPE_U64) {
      uint64_t u = get_u(dt, pa, i), v = get_u(dt, pb, i);
      if (u == v) continue;
      note_diff(r, (double)(u > v ? u - v : v - u), (double)v, atol, rtol);
      continue;
    }
    double x = get_d(dt, pa, i), y = get_d(dt, pb, i);
    if (isnan(x) || isnan(y)) {
      if (!(isnan(x) && isnan(y))) { /* NaN equals only NaN; no finite difference */
        r->n_diff++;
        r->n_nan++;
      }
      continue;
    }
    if (x == y) continue;
    double dd = (isinf(x) || isinf(y)) ? INFINITY : fabs(x - y);
    note_diff(r, dd, fabs(y), atol, rtol);
  }
}

static void fmt_num(char *b, size_t n, double v) {
  if (isinf(v))
    snprintf(b, n, "inf");
  else
    snprintf(b, n, "%.6g", v);
}

static void json_entry_brief(const cairn_ckpt_entry *e) {
  fputs("{\"name\": ", stdout);
  json_str(stdout, e->name);
  printf(", \"dtype\": \"%s\", \"shape\": ", dtype_str(e->dtype));
  json_shape(stdout, e->rank, e->shape);
  fputc('}', stdout);
}

/* Whether a status means "the file is bad" (its contents are corrupt,
 * malformed, incomplete or beyond the reader's limits) rather than "could
 * not be checked" (I/O, memory, a newer format). */
static int status_is_bad_file(cairn_status s) {
  return s == CAIRN_E_TRUNCATED || s == CAIRN_E_CORRUPT || s == CAIRN_E_FORMAT || s == CAIRN_E_LIMIT;
}

/* diff reads every tensor of both files, so that "same" is a statement
 * about intact data: reads e into *t (NULL when its data is bad: the error
 * is printed, naming the file and tensor, and counted in *nbad). Returns
 * -1 when it could not be read for another reason (printed). */
static int diff_read(cairn_ckpt *c, const char *path, const cairn_ckpt_entry *e, cairn_tensor **t, size_t *nbad) {
  *t = NULL;
  cairn_status s = read_tensor(c, e, t);
  if (s == CAIRN_OK) return 0;
  error_tensor(path, e->name, s);
  if (!status_is_bad_file(s)) return -1;
  (*nbad)++;
  return 0;
}

/* For a tensor that is not compared (only in one file, or of another
 * dtype or shape): its data is checked all the same, through the reader's
 * chunk buffers (no copy of the tensor). As diff_read otherwise. */
static int diff_check(cairn_ckpt *c, const char *path, const cairn_ckpt_entry *e, size_t *nbad) {
  cairn_status s = cairn_ckpt_verify_tensor(c, e->name);
  if (s == CAIRN_OK) return 0;
  error_tensor(path, e->name, s);
  if (!status_is_bad_file(s)) return -1;
  (*nbad)++;
  return 0;
}

/* The second side of a compared pair, piece by piece against the first
 * held whole: diff holds one tensor and a chunk, never two tensors. */
typedef struct diff_stream {
  const options *o;
  const cairn_ckpt_entry *e;
  const unsigned char *a; /* the first side's raw bytes */
  int bytes_differ;
  dresult *r;
} diff_stream;

static cairn_status diff_piece(void *user, uint64_t off, const void *data, size_t len) {
  diff_stream *d = user;
  if (memcmp(d->a + off, data, len) == 0) return CAIRN_OK;
  d->bytes_differ = 1;
  size_t es = cairn_dtype_size(d->e->dtype);
  compare_values(d->e->dtype, d->a + off, data, len / es, d->o->atol, d->o->rtol, d->r);
  return CAIRN_OK;
}

static int cmd_diff(const options *o, const char *arg_a, const char *arg_b) {
  char pa[4096], pb[4096];
  if (resolve(arg_a, 1, pa, sizeof pa) != 0 || resolve(arg_b, 1, pb, sizeof pb) != 0) return EXIT_ERROR;
  cairn_ckpt *ca = NULL, *cb = NULL;
  cairn_ckpt_entry *ea = NULL, *eb = NULL;
  dresult *res = NULL;
  int rc = EXIT_ERROR;
  size_t na = 0, nb = 0, nres = 0, nsame = 0, nbad[2] = {0, 0};
  if (open_ckpt(pa, &ca) != CAIRN_OK || open_ckpt(pb, &cb) != CAIRN_OK) goto out;
  if (!(ea = load_entries(ca, pa, &na)) || !(eb = load_entries(cb, pb, &nb))) goto out;
  res = calloc(na + nb + 1, sizeof *res);
  if (!res) {
    errorf("out of memory");
    goto out;
  }
  size_t i = 0, j = 0;
  while (i < na || j < nb) {
    int c = i >= na ? 1 : j >= nb ? -1 : strcmp(ea[i].name, eb[j].name);
    dresult *r = &res[nres];
    memset(r, 0, sizeof *r);
    if (c < 0) {
      r->kind = D_REMOVED;
      r->name = ea[i].name;
      r->a = &ea[i++];
      nres++;
      if (diff_check(ca, pa, r->a, nbad) < 0) goto out;
      continue;
    }
    if (c > 0) {
      r->kind = D_ADDED;
      r->name = eb[j].name;
      r->b = &eb[j++];
      nres++;
      if (diff_check(cb, pb, r->b, nbad + 1) < 0) goto out;
      continue;
    }
    const cairn_ckpt_entry *x = &ea[i++], *y = &eb[j++];
    r->name = x->name;
    r->a = x;
    r->b = y;
    int same_shape = x->rank == y->rank;
    for (int k = 0; same_shape && k < x->rank; k++) same_shape = x->shape[k] == y->shape[k];
    if (x->dtype != y->dtype || !same_shape) {
      r->kind = x->dtype != y->dtype ? D_DTYPE : D_SHAPE;
      nres++;
      if (diff_check(ca, pa, x, nbad) < 0 || diff_check(cb, pb, y, nbad + 1) < 0) goto out;
      continue;
    }
    /* Both decoded, CRC checked, even when the index CRCs agree: equal
     * index entries say nothing about the bytes stored (a copy with a
     * flipped data bit has the same index). */
    cairn_tensor *ta = NULL;
    if (diff_read(ca, pa, x, &ta, nbad) < 0) goto out;
    if (!ta) { /* a is bad: b is checked all the same */
      if (diff_check(cb, pb, y, nbad + 1) < 0) goto out;
      continue;
    }
    diff_stream ds = {o, x, ta->data, 0, r};
    cairn_status sb = cairn_ckpt_read_pieces(cb, y->name, diff_piece, &ds);
    cairn_tensor_free(ta);
    if (sb != CAIRN_OK) {
      error_tensor(pb, y->name, sb);
      if (!status_is_bad_file(sb)) goto out;
      nbad[1]++;
      memset(r, 0, sizeof *r);
      continue;
    }
    if (!ds.bytes_differ) {
      memset(r, 0, sizeof *r);
      nsame++; /* the same bytes: no need to compare values */
    } else {
      r->name = x->name;
      r->a = x;
      r->b = y;
      r->n = elem_count(x->rank, x->shape);
      /* bytes differ but values may be equal within tolerance (or -0 vs
       * 0, NaN payloads): "close" */
      r->kind = r->n_diff ? D_VALUES : D_CLOSE;
      if (!r->n_diff) nsame++;
      nres++;
    }
  }
  /* Corrupt data is neither "same" nor "different": say so and stop. */
  if (nbad[0] || nbad[1]) {
    for (int f = 0; f < 2; f++) {
      if (!nbad[f]) continue;
      errorf("%s: %zu of %zu tensor%s cannot be read intact (corrupt data): the checkpoints are not "
             "compared; 'ckpt-inspect verify %s' checks the whole file",
             f ? pb : pa, nbad[f], f ? nb : na, (f ? nb : na) == 1 ? "" : "s", f ? pb : pa);
    }
    goto out;
  }
  size_t ndiff = 0, cnt[6] = {0};
  for (size_t k = 0; k < nres; k++) {
    cnt[res[k].kind]++;
    if (res[k].kind != D_CLOSE) ndiff++;
  }
  if (o->json) {
    fputs("{\"a\": ", stdout);
    json_str(stdout, pa);
    fputs(", \"b\": ", stdout);
    json_str(stdout, pb);
    printf(", \"same\": %s, \"atol\": ", ndiff ? "false" : "true");
    json_num(stdout, o->atol);
    fputs(", \"rtol\": ", stdout);
    json_num(stdout, o->rtol);
    printf(", \"n_same\": %zu, \"n_different\": %zu", nsame, ndiff);
    static const char *lists[] = {"added", "removed", "changed", "close"};
    for (int l = 0; l < 4; l++) {
      printf(", \"%s\": [", lists[l]);
      int first = 1;
      for (size_t k = 0; k < nres; k++) {
        const dresult *r = &res[k];
        int in = l == 0 ? r->kind == D_ADDED
               : l == 1 ? r->kind == D_REMOVED
               : l == 2 ? (r->kind == D_DTYPE || r->kind == D_SHAPE || r->kind == D_VALUES)
                        : r->kind == D_CLOSE;
        if (!in) continue;
        fputs(first ? "\n  " : ",\n  ", stdout);
        first = 0;
        if (l == 0) {
          json_entry_brief(r->b);
          continue;
        }
        if (l == 1) {
          json_entry_brief(r->a);
          continue;
        }
        fputs("{\"name\": ", stdout);
        json_str(stdout, r->name);
        printf(", \"change\": \"%s\", \"dtype_a\": \"%s\", \"dtype_b\": \"%s\", \"shape_a\": ",
               r->kind == D_DTYPE ? "dtype" : r->kind == D_SHAPE ? "shape" : "values", dtype_str(r->a->dtype),
               dtype_str(r->b->dtype));
        json_shape(stdout, r->a->rank, r->a->shape);
        fputs(", \"shape_b\": ", stdout);
        json_shape(stdout, r->b->rank, r->b->shape);
        if (r->kind == D_VALUES || r->kind == D_CLOSE) {
          printf(", \"n_elements\": %llu, \"n_different\": %llu, \"n_nan_mismatch\": %llu, \"max_abs_diff\": ",
                 (unsigned long long)r->n, (unsigned long long)r->n_diff, (unsigned long long)r->n_nan);
          json_num(stdout, r->max_abs);
          fputs(", \"max_rel_diff\": ", stdout);
          json_num(stdout, r->max_rel);
        }
        fputc('}', stdout);
      }
      fputs(first ? "]" : "\n]", stdout);
    }
    fputs("}\n", stdout);
  } else {
    char s1[256], s2[256], n1[32], n2[32];
    fputs("--- ", stdout);
    put_esc(stdout, pa);
    fputs("\n+++ ", stdout);
    put_esc(stdout, pb);
    fputc('\n', stdout);
    for (size_t k = 0; k < nres; k++) {
      const dresult *r = &res[k];
      switch (r->kind) {
        case D_ADDED:
        case D_REMOVED: {
          const cairn_ckpt_entry *e = r->kind == D_ADDED ? r->b : r->a;
          shape_str(s1, sizeof s1, e->rank, e->shape);
          fputs(r->kind == D_ADDED ? "added:   " : "removed: ", stdout);
          put_esc(stdout, r->name);
          printf("  %s %s\n", dtype_str(e->dtype), s1);
          break;
        }
        case D_DTYPE:
          shape_str(s1, sizeof s1, r->a->rank, r->a->shape);
          shape_str(s2, sizeof s2, r->b->rank, r->b->shape);
          fputs("dtype:   ", stdout);
          put_esc(stdout, r->name);
          printf("  %s %s -> %s %s\n", dtype_str(r->a->dtype), s1, dtype_str(r->b->dtype), s2);
          break;
        case D_SHAPE:
          shape_str(s1, sizeof s1, r->a->rank, r->a->shape);
          shape_str(s2, sizeof s2, r->b->rank, r->b->shape);
          fputs("shape:   ", stdout);
          put_esc(stdout, r->name);
          printf("  %s %s -> %s\n", dtype_str(r->a->dtype), s1, s2);
          break;
        case D_VALUES:
        case D_CLOSE:
          fmt_num(n1, sizeof n1, r->max_abs);
          fmt_num(n2, sizeof n2, r->max_rel);
          fputs(r->kind == D_VALUES ? "values:  " : "close:   ", stdout);
          put_esc(stdout, r->name);
          if (r->kind == D_VALUES) {
            printf("  %llu of %llu elements differ", (unsigned long long)r->n_diff, (unsigned long long)r->n);
            if (r->n_nan) printf(" (%llu NaN on one side only)", (unsigned long long)r->n_nan);
            printf(", max abs diff %s, max rel diff %s\n", n1, n2);
          }
          else
            printf("  equal within tolerance (max abs diff %s, max rel diff %s)\n", n1, n2);
          break;
      }
    }
    printf("# %zu same, %zu different (%zu added, %zu removed, %zu dtype, %zu shape, %zu values)\n", nsame,
           ndiff, cnt[D_ADDED], cnt[D_REMOVED], cnt[D_DTYPE], cnt[D_SHAPE], cnt[D_VALUES]);
  }
  rc = ndiff ? EXIT_DIFFERENT : EXIT_OK_;
out:
  free(res);
  free(ea);
  free(eb);
  cairn_ckpt_close(ca);
  cairn_ckpt_close(cb);
  return rc;
}

/* ---- verify ------------------------------------------------------------------ */

static const char *g_verify_label = ""; /* cmd_verify: format_label of the file */

static void verify_report(const options *o, const char *path, cairn_status s, const char *msg, int major,
                          int minor, size_t ntensors, char **bad, size_t nbad) {
  int incomplete = s == CAIRN_E_TRUNCATED;
  if (o->json) {
    fputs("{\"file\": ", stdout);
    json_str(stdout, path);
    printf(", \"ok\": %s, \"incomplete\": %s, \"status\": \"%s\", \"message\": ", s == CAIRN_OK ? "true" : "false",
           incomplete ? "true" : "false", status_name(s));
    json_str(stdout, s == CAIRN_OK ? "" : msg);
    if (major >= 0) printf(", \"format_version\": \"%d.%d\", \"tensor_count\": %zu", major, minor, ntensors);
    fputs(", \"bad_tensors\": [", stdout);
    for (size_t i = 0; i < nbad; i++) {
      if (i) fputs(", ", stdout);
      json_str(stdout, bad[i]);
    }
    fputc(']', stdout);
    if (incomplete && is_cairn_file(path)) {
      fputs(", \"hint\": ", stdout);
      json_str(stdout, "incomplete file (no valid footer): 'ckpt-inspect recover IN OUT' salvages its complete "
                       "tensors");
    }
    fputs("}\n", stdout);
    return;
  }
  put_esc(stdout, path);
  if (s == CAIRN_OK) {
    if (strcmp(g_verify_label, "safetensors") == 0)
      printf(": OK (safetensors, %zu tensor%s; header and every rule verified; the format has no checksums)\n",
             ntensors, ntensors == 1 ? "" : "s");
    else if (*g_verify_label && strncmp(g_verify_label, "format", 6) != 0)
      printf(": OK (%s, %zu tensor%s; every checksum and rule verified)\n", g_verify_label, ntensors,
             ntensors == 1 ? "" : "s");
    else
      printf(": OK (format %d.%d, %zu tensor%s; every checksum and rule verified)\n", major, minor, ntensors,
             ntensors == 1 ? "" : "s");
    return;
  }
  printf(": %s: %s", incomplete ? "INCOMPLETE" : status_is_bad_file(s) ? "BAD" : "ERROR", cairn_status_str(s));
  if (msg && *msg) {
    fputs(": ", stdout);
    put_esc(stdout, msg);
  }
  fputc('\n', stdout);
  if (nbad) {
    printf("  %zu tensor%s cannot be read intact:", nbad, nbad == 1 ? "" : "s");
    for (size_t i = 0; i < nbad && i < 50; i++) {
      fputs(i ? ", " : " ", stdout);
      put_esc(stdout, bad[i]);
    }
    if (nbad > 50) printf(", ... (%zu more)", nbad - 50);
    fputc('\n', stdout);
  }
  if (incomplete && is_cairn_file(path)) {
    fputs("  the file has no valid footer: the save that wrote it was interrupted.\n"
          "  'ckpt-inspect recover ", stdout);
    put_esc(stdout, path);
    fputs(" OUT' copies every complete tensor into a new valid file.\n", stdout);
  }
}

static int cmd_verify(const options *o, const char *arg) {
  char path[4096];
  if (resolve(arg, 1, path, sizeof path) != 0) return EXIT_ERROR;
  cairn_ckpt *c = take_resolved(path);
  cairn_status s = c ? CAIRN_OK : cairn_ckpt_open(path, NULL, &c);
  if (s != CAIRN_OK) {
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", cairn_errmsg());
    verify_report(o, path, s, msg, -1, 0, 0, NULL, 0);
    return status_is_bad_file(s) ? EXIT_BAD : EXIT_ERROR;
  }
  int major, minor;
  cairn_ckpt_version(c, &major, &minor);
  static char label[80];
  g_verify_label = format_label(c, label, sizeof label);
  size_t n = cairn_ckpt_count(c);
  s = cairn_ckpt_verify(c);
  char msg[2048] = "";
  char **bad = NULL;
  size_t nbad = 0;
  if (s != CAIRN_OK) {
    snprintf(msg, sizeof msg, "%s", cairn_errmsg());
    /* verify stops at the first failure: name every tensor that fails. */
    bad = calloc(n ? n : 1, sizeof *bad);
    for (size_t i = 0; bad && i < n; i++) {
      cairn_ckpt_entry e;
      if (cairn_ckpt_entry_at(c, i, &e) != CAIRN_OK) continue;
      cairn_tensor *t = NULL;
      if (read_tensor(c, &e, &t) != CAIRN_OK) bad[nbad++] = strdup(e.name);
      cairn_tensor_free(t);
    }
  }
  verify_report(o, path, s, msg, major, minor, n, bad, nbad);
  for (size_t i = 0; i < nbad; i++) free(bad[i]);
  free(bad);
  cairn_ckpt_close(c);
  if (s == CAIRN_OK) return EXIT_OK_;
  return status_is_bad_file(s) ? EXIT_BAD : EXIT_ERROR;
}

/* ---- meta ------------------------------------------------------------------ */

static const char *meta_type_name(cairn_meta_type t) {
  switch (t) {
    case CAIRN_META_U64: return "u64";
    case CAIRN_META_I64: return "i64";
    case CAIRN_META_F64: return "f64";
    case CAIRN_META_BOOL: return "bool";
    case CAIRN_META_STR: return "str";
    case CAIRN_META_BYTES: return "bytes";
  }
  return "?";
}

#define META_HEX_SHOWN 32

static int cmd_meta(const options *o, const char *arg) {
  char path[4096];
  if (resolve(arg, 1, path, sizeof path) != 0) return EXIT_ERROR;
  cairn_ckpt *c;
  if (open_ckpt(path, &c) != CAIRN_OK) return EXIT_ERROR;
  size_t n = cairn_ckpt_meta_count(c);
  int major, minor;
  cairn_ckpt_version(c, &major, &minor);
  size_t wk = 3;
  for (size_t i = 0; i < n; i++) {
    const char *key;
    cairn_meta_type ty;
    if (cairn_ckpt_meta_at(c, i, &key, &ty) == CAIRN_OK && esc_width(key) > wk) wk = esc_width(key);
  }
  if (o->json) {
    fputs("{\"file\": ", stdout);
    json_str(stdout, path);
    printf(", \"format_version\": \"%d.%d\", \"tensor_count\": %zu, \"meta\": [", major, minor,
           cairn_ckpt_count(c));
  } else {
    printf("# ");
    put_esc(stdout, path);
    char fl[80];
    printf(": %s, %zu tensor%s, %zu metadata key%s\n", format_label(c, fl, sizeof fl), cairn_ckpt_count(c),
           cairn_ckpt_count(c) == 1 ? "" : "s", n, n == 1 ? "" : "s");
  }
  int rc = EXIT_OK_;
  for (size_t i = 0; i < n; i++) {
    const char *key;
    cairn_meta_type ty;
    cairn_status s = cairn_ckpt_meta_at(c, i, &key, &ty);
    if (s != CAIRN_OK) {
      error_status(path, s);
      rc = EXIT_ERROR;
      break;
    }
    uint64_t u = 0;
    int64_t iv = 0;
    double d = 0;
    int bv = 0;
    const char *str = NULL;
    const void *bytes = NULL;
    size_t blen = 0;
    switch (ty) {
      case CAIRN_META_U64: s = cairn_ckpt_meta_u64(c, key, &u); break;
      case CAIRN_META_I64: s = cairn_ckpt_meta_i64(c, key, &iv); break;
      case CAIRN_META_F64: s = cairn_ckpt_meta_f64(c, key, &d); break;
      case CAIRN_META_BOOL: s = cairn_ckpt_meta_bool(c, key, &bv); break;
      case CAIRN_META_STR: s = cairn_ckpt_meta_str(c, key, &str); break;
      case CAIRN_META_BYTES: s = cairn_ckpt_meta_bytes(c, key, &bytes, &blen); break;
      default: s = CAIRN_E_FORMAT; break;
    }
    if (s != CAIRN_OK) {
      size_t wl = strlen(path) + strlen(key) + 32;
      char *what = malloc(wl);
      if (what) snprintf(what, wl, "%s: metadata '%s'", path, key);
      error_status(what ? what : path, s);
      free(what);
      rc = EXIT_ERROR;
      break;
    }
    char num[64];
    if (o->json) {
      fputs(i ? ",\n  {\"key\": " : "\n  {\"key\": ", stdout);
      json_str(stdout, key);
      printf(", \"type\": \"%s\", \"value\": ", meta_type_name(ty));
      switch (ty) {
        case CAIRN_META_U64: printf("%llu", (unsigned long long)u); break;
        case CAIRN_META_I64: printf("%lld", (long long)iv); break;
        case CAIRN_META_F64:
          if (isfinite(d))
            json_num(stdout, d);
          else
            printf("\"%s\"", isnan(d) ? "nan" : d < 0 ? "-inf" : "inf");
          break;
        case CAIRN_META_BOOL: fputs(bv ? "true" : "false", stdout); break;
        case CAIRN_META_STR: json_str(stdout, str); break;
        case CAIRN_META_BYTES:
          fputc('"', stdout);
          for (size_t k = 0; k < blen; k++) printf("%02x", ((const unsigned char *)bytes)[k]);
          printf("\", \"length\": %zu", blen);
          break;
      }
      fputc('}', stdout);
    } else {
      put_esc_padded(stdout, key, wk);
      printf("  %-5s  ", meta_type_name(ty));
      switch (ty) {
        case CAIRN_META_U64: printf("%llu", (unsigned long long)u); break;
        case CAIRN_META_I64: printf("%lld", (long long)iv); break;
        case CAIRN_META_F64:
          fmt_shortest(num, sizeof num, d, CAIRN_DTYPE_F64);
          fputs(num, stdout);
          break;
        case CAIRN_META_BOOL: fputs(bv ? "true" : "false", stdout); break;
        case CAIRN_META_STR:
          fputc('"', stdout);
          put_esc(stdout, str);
          fputc('"', stdout);
          break;
        case CAIRN_META_BYTES: {
          size_t shown = o->all || blen <= META_HEX_SHOWN ? blen : META_HEX_SHOWN;
          printf("[%zu bytes] ", blen);
          for (size_t k = 0; k < shown; k++) printf("%02x", ((const unsigned char *)bytes)[k]);
          if (shown < blen) printf("... (truncated; --all shows every byte)");
          break;
        }
      }
      fputc('\n', stdout);
    }
  }
  if (o->json) printf("%s]}\n", n ? "\n" : "");
  cairn_ckpt_close(c);
  return rc;
}

/* ---- recover ------------------------------------------------------------------ */

static int check_output(const options *o, const char *in, const char *out) {
  struct stat si, so;
  if (stat(out, &so) == 0) {
    if (stat(in, &si) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino) {
      errorf("%s: the output is the input file; write to another path", out);
      return -1;
    }
    if (!o->force) {
      errorf("%s: exists; pass --force to replace it", out);
      return -1;
    }
    if (S_ISDIR(so.st_mode)) {
      errorf("%s: is a directory", out);
      return -1;
    }
  }
  return 0;
}

static int cmd_recover(const options *o, const char *in, const char *out) {
  char path[4096];
  if (resolve(in, 0, path, sizeof path) != 0) return EXIT_ERROR;
  if (check_output(o, path, out) != 0) return EXIT_ERROR;
  size_t recovered = 0, lost = 0;
  cairn_status s = cairn_ckpt_recover(path, out, &recovered, &lost);
  if (s != CAIRN_OK) {
    error_status(path, s);
    return EXIT_ERROR;
  }
  printf("recovered %zu tensor%s, lost %zu (cut short or corrupt); wrote ", recovered, recovered == 1 ? "" : "s",
         lost);
  put_esc(stdout, out);
  fputc('\n', stdout);
  return EXIT_OK_;
}

/* ---- recompress ----------------------------------------------------------------- */

static int copy_meta(cairn_ckpt *c, cairn_ckpt_writer *w) {
  for (size_t i = 0; i < cairn_ckpt_meta_count(c); i++) {
    const char *key;
    cairn_meta_type ty;
    cairn_status s = cairn_ckpt_meta_at(c, i, &key, &ty);
    if (s) return s;
    uint64_t u;
    int64_t v;
    double f;
    int b;
    const char *str;
    const void *by;
    size_t len;
    switch (ty) {
      case CAIRN_META_U64: s = cairn_ckpt_meta_u64(c, key, &u); if (!s) s = cairn_ckpt_writer_meta_u64(w, key, u); break;
      case CAIRN_META_I64: s = cairn_ckpt_meta_i64(c, key, &v); if (!s) s = cairn_ckpt_writer_meta_i64(w, key, v); break;
      case CAIRN_META_F64: s = cairn_ckpt_meta_f64(c, key, &f); if (!s) s = cairn_ckpt_writer_meta_f64(w, key, f); break;
      case CAIRN_META_BOOL: s = cairn_ckpt_meta_bool(c, key, &b); if (!s) s = cairn_ckpt_writer_meta_bool(w, key, b); break;
      case CAIRN_META_STR: s = cairn_ckpt_meta_str(c, key, &str); if (!s) s = cairn_ckpt_writer_meta_str(w, key, str); break;
      default:
        s = cairn_ckpt_meta_bytes(c, key, &by, &len);
        if (!s) s = cairn_ckpt_writer_meta_bytes(w, key, by, len);
    }
    if (s) return s;
  }
  return CAIRN_OK;
}

/* Rewrites IN with another codec. IN is verified whole first (a damaged
 * file is reported, never copied); each tensor is read (CRC-checked again)
 * and written through the normal writer, which writes a temporary file in
 * OUT's directory and renames it into place only after fsync. So OUT == IN
 * is safe: until that rename IN is untouched (the open descriptor keeps
 * reading the old file), and after it OUT holds the same tensors. */
static int cmd_recompress(const options *o, const char *in, const char *out) {
  char path[4096];
  if (resolve(in, 0, path, sizeof path) != 0) return EXIT_ERROR;
  struct stat si, so;
  int same = stat(path, &si) == 0 && stat(out, &so) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino;
  if (!same && check_output(o, path, out) != 0) return EXIT_ERROR;
  cairn_ckpt *c = NULL;
  cairn_status s = cairn_ckpt_open(path, NULL, &c);
  if (s == CAIRN_OK && strcmp(cairn_ckpt_format(c), "cairn") != 0) {
    cairn_ckpt_close(c);
    errorf("%s: not a cairn checkpoint (use import)", path);
    return EXIT_ERROR;
  }
  if (s == CAIRN_OK) s = cairn_ckpt_verify(c);
  if (s != CAIRN_OK) {
    error_status(path, s);
    cairn_ckpt_close(c);
    return status_is_bad_file(s) ? EXIT_BAD : EXIT_ERROR;
  }
  cairn_ckpt_write_options wo = cairn_ckpt_write_options_default();
  wo.compress = o->compress;
  cairn_ckpt_writer *w = NULL;
  s = cairn_ckpt_writer_open(out, &wo, &w);
  size_t n = cairn_ckpt_count(c);
  uint64_t raw = 0, before = 0, after = 0;
  for (size_t i = 0; i < n && s == CAIRN_OK; i++) {
    cairn_ckpt_entry e;
    cairn_tensor *t = NULL;
    if ((s = cairn_ckpt_entry_at(c, i, &e)) != CAIRN_OK || (s = read_tensor(c, &e, &t)) != CAIRN_OK) {
      error_tensor(path, e.name, s);
      cairn_ckpt_writer_abort(w);
      cairn_ckpt_close(c);
      return EXIT_ERROR;
    }
    raw += e.raw_bytes;
    before += e.stored_bytes;
    s = cairn_ckpt_writer_add(w, e.name, t);
    cairn_tensor_free(t);
  }
  if (s == CAIRN_OK) s = copy_meta(c, w);
  cairn_ckpt_close(c);
  if (s == CAIRN_OK) {
    s = cairn_ckpt_writer_commit(w);
    w = NULL;
  }
  if (s != CAIRN_OK) {
    cairn_ckpt_writer_abort(w);
    error_status(out, s);
    return EXIT_ERROR;
  }
  if (cairn_ckpt_open(out, NULL, &c) == CAIRN_OK) {
    for (size_t i = 0; i < cairn_ckpt_count(c); i++) {
      cairn_ckpt_entry e;
      if (cairn_ckpt_entry_at(c, i, &e) == CAIRN_OK) after += e.stored_bytes;
    }
    cairn_ckpt_close(c);
  }
  char r0[32], r1[32];
  ratio_str(r0, sizeof r0, raw, before);
  ratio_str(r1, sizeof r1, raw, after);
  printf("recompressed %zu tensor%s: %llu -> %llu stored bytes (ratio %s -> %s); wrote ", n, n == 1 ? "" : "s",
         (unsigned long long)before, (unsigned long long)after, r0, r1);
  put_esc(stdout, out);
  fputc('\n', stdout);
  return EXIT_OK_;
}

/* ---- export / import ------------------------------------------------------------ */

static const char *npy_descr(cairn_dtype dt) {
  int le = npz_host_is_little();
  switch (dt) {
    case CAIRN_DTYPE_F32: return le ? "<f4" : ">f4";
    case CAIRN_DTYPE_F64: return le ? "<f8" : ">f8";
    case CAIRN_DTYPE_F16: return le ? "<f2" : ">f2";
    case CAIRN_DTYPE_BF16: return le ? "<f4" : ">f4"; /* converted */
    case CAIRN_DTYPE_I8: return "|i1";
    case CAIRN_DTYPE_I16: return le ? "<i2" : ">i2";
    case CAIRN_DTYPE_I32: return le ? "<i4" : ">i4";
    case CAIRN_DTYPE_I64: return le ? "<i8" : ">i8";
    case CAIRN_DTYPE_U8: return "|u1";
    case CAIRN_DTYPE_U16: return le ? "<u2" : ">u2";
    case CAIRN_DTYPE_U32: return le ? "<u4" : ">u4";
    case CAIRN_DTYPE_U64: return le ? "<u8" : ">u8";
    case CAIRN_DTYPE_BOOL: return "|b1";
  }
  return NULL;
}

/* Converts a floating-point tensor to dt (round to nearest even; from f64
 * through f32 for the 16-bit types); other tensors are returned as they are.
 * *conv is the new tensor to free, or NULL. */
static cairn_status convert_float(cairn_tensor *t, cairn_dtype dt, cairn_tensor **conv) {
  *conv = NULL;
  if (!dt || !dtype_is_float(t->dtype) || t->dtype == dt) return CAIRN_OK;
  cairn_status s = cairn_tensor_new(dt, t->rank, t->shape, conv);
  if (s != CAIRN_OK) return s;
  unsigned char *d = (*conv)->data;
  for (int64_t i = 0; i < t->size; i++) {
    double v = get_d(t->dtype, t->data, (uint64_t)i);
    if (dt == CAIRN_DTYPE_F64) memcpy(d + 8 * i, &v, 8);
    else {
      float f = (float)v;
      uint16_t h = dt == CAIRN_DTYPE_F16 ? f32_to_f16(f) : f32_to_bf16(f);
      if (dt == CAIRN_DTYPE_F32) memcpy(d + 4 * i, &f, 4);
      else memcpy(d + 2 * i, &h, 2);
    }
  }
  return CAIRN_OK;
}

/* export --format tf|safetensors: every tensor (converted by --dtype),
 * and for safetensors the metadata as __metadata__ strings. */
static int export_foreign(const options *o, cairn_ckpt *c, const char *path, const char *out, int tf) {
  size_t n = cairn_ckpt_count(c), nconv = 0;
  cairn_tensor **keep = calloc(n + 1, sizeof *keep); /* safetensors writes the data at commit */
  cairn_safetensors_writer *sw = NULL;
  cairn_tfbundle_writer *tw = NULL;
  cairn_status s = !keep ? CAIRN_E_NOMEM
                         : tf ? cairn_tfbundle_writer_open(out, &tw) : cairn_safetensors_writer_open(out, &sw);
  /* Every return below closes c: export owns the source from here on. */
  if (s != CAIRN_OK) {
    error_status(out, s);
    free(keep);
    cairn_ckpt_close(c);
    return EXIT_ERROR;
  }
  for (size_t i = 0; i < n; i++) {
    cairn_ckpt_entry e;
    cairn_tensor *t = NULL, *cv = NULL;
    if ((s = cairn_ckpt_entry_at(c, i, &e)) != CAIRN_OK) {
      error_status(path, s);
      goto fail;
    }
    if ((s = read_tensor(c, &e, &t)) != CAIRN_OK) {
      error_tensor(path, e.name, s);
      goto fail;
    }
    if ((s = convert_float(t, o->export_dtype, &cv)) != CAIRN_OK) {
      error_tensor(path, e.name, s);
      cairn_tensor_free(t);
      goto fail;
    }
    if (cv) {
      cairn_tensor_free(t);
      t = cv;
      nconv++;
    }
    s = tf ? cairn_tfbundle_writer_add(tw, e.name, t) : cairn_safetensors_writer_add(sw, e.name, t);
    if (s != CAIRN_OK) {
      error_tensor(out, e.name, s);
      cairn_tensor_free(t);
      goto fail;
    }
    if (tf) cairn_tensor_free(t);
    else keep[i] = t;
  }
  for (size_t i = 0; !tf && i < cairn_ckpt_meta_count(c); i++) {
    const char *key, *sv;
    cairn_meta_type ty;
    char buf[64];
    uint64_t u;
    int64_t iv;
    double d;
    int b;
    if (cairn_ckpt_meta_at(c, i, &key, &ty) != CAIRN_OK) continue;
    sv = NULL;
    if (ty == CAIRN_META_STR && cairn_ckpt_meta_str(c, key, &sv) == CAIRN_OK) {
    } else if (ty == CAIRN_META_U64 && cairn_ckpt_meta_u64(c, key, &u) == CAIRN_OK) {
      snprintf(buf, sizeof buf, "%llu", (unsigned long long)u), sv = buf;
    } else if (ty == CAIRN_META_I64 && cairn_ckpt_meta_i64(c, key, &iv) == CAIRN_OK) {
      snprintf(buf, sizeof buf, "%lld", (long long)iv), sv = buf;
    } else if (ty == CAIRN_META_F64 && cairn_ckpt_meta_f64(c, key, &d) == CAIRN_OK) {
      snprintf(buf, sizeof buf, "%.17g", d), sv = buf;
    } else if (ty == CAIRN_META_BOOL && cairn_ckpt_meta_bool(c, key, &b) == CAIRN_OK) {
      sv = b ? "true" : "false";
    }
    if (sv && cairn_safetensors_writer_meta(sw, key, sv) != CAIRN_OK) sv = NULL;
    if (!sv) {
      fputs(PROG ": note: metadata '", stderr);
      put_esc(stderr, key);
      fputs("' not exported (safetensors metadata holds strings)\n", stderr);
    }
  }
  s = tf ? cairn_tfbundle_writer_commit(tw) : cairn_safetensors_writer_commit(sw);
  tw = NULL, sw = NULL;
  for (size_t i = 0; i < n; i++) cairn_tensor_free(keep[i]);
  free(keep);
  if (s != CAIRN_OK) {
    error_status(out, s);
    cairn_ckpt_close(c);
    return EXIT_ERROR;
  }
  if (tf) {
    /* The state file lets TensorFlow's latest_checkpoint find it; an
     * existing one (a training directory's) is left alone. */
    char *dir = strdup(out), *sl = dir ? strrchr(dir, '/') : NULL;
    const char *d = !dir ? "." : sl ? (sl == dir ? "/" : (*sl = '\0', dir)) : ".";
    char state[4200];
    struct stat st;
    snprintf(state, sizeof state, "%s/checkpoint", d);
    if (dir && stat(state, &st) != 0 && cairn_checkpoint_state_write(d, out, NULL, 0, 0) != CAIRN_OK)
      errorf("note: %s: could not write the state file: %s", state, cairn_errmsg());
    free(dir);
  }
  printf("exported %zu tensor%s to ", n, n == 1 ? "" : "s");
  put_esc(stdout, out);
  printf(" (%s", tf ? "TensorFlow checkpoint" : "safetensors");
  if (nconv) printf(", %zu converted to %s", nconv, dtype_str(o->export_dtype));
  printf(")\n");
  cairn_ckpt_close(c);
  return EXIT_OK_;
fail:
  if (tf) cairn_tfbundle_writer_abort(tw);
  else cairn_safetensors_writer_abort(sw);
  for (size_t i = 0; i < n; i++) cairn_tensor_free(keep[i]);
  free(keep);
  cairn_ckpt_close(c);
  return EXIT_ERROR;
}

static int cmd_export(const options *o, const char *arg, const char *out) {
  char path[4096], err[4096];
  if (resolve(arg, 1, path, sizeof path) != 0) return EXIT_ERROR;
  const char *form = o->format ? o->format : ends_with(out, ".safetensors") ? "safetensors" : "npz";
  if (strcmp(form, "tf") == 0) {
    char idx[4200];
    snprintf(idx, sizeof idx, "%s.index", out);
    if (check_output(o, path, idx) != 0) return EXIT_ERROR;
  } else if (check_output(o, path, out) != 0) {
    return EXIT_ERROR;
  }
  if (strcmp(form, "npz") != 0) {
    cairn_ckpt *fc;
    if (open_ckpt(path, &fc) != CAIRN_OK) return EXIT_ERROR;
    return export_foreign(o, fc, path, out, strcmp(form, "tf") == 0);
  }
  if (o->export_dtype) {
    errorf("export: --dtype applies to --format tf and safetensors");
    return EXIT_ERROR;
  }
  cairn_ckpt *c;
  if (open_ckpt(path, &c) != CAIRN_OK) return EXIT_ERROR;
  size_t n = cairn_ckpt_count(c), nbf16 = 0;
  npz_writer *w = NULL;
  if (npz_writer_open(out, &w, err, sizeof err) != 0) {
    errorf("%s", err);
    cairn_ckpt_close(c);
    return EXIT_ERROR;
  }
  for (size_t i = 0; i < n; i++) {
    cairn_ckpt_entry e;
    cairn_status s = cairn_ckpt_entry_at(c, i, &e);
    if (s != CAIRN_OK) {
      error_status(path, s);
      goto fail;
    }
    const char *descr = npy_descr(e.dtype);
    if (!descr) {
      errorf("%s: tensor '%s' has dtype %s, which has no NumPy equivalent", path, e.name, dtype_str(e.dtype));
      goto fail;
    }
    cairn_tensor *t = NULL;
    s = read_tensor(c, &e, &t);
    if (s != CAIRN_OK) {
      error_tensor(path, e.name, s);
      goto fail;
    }
    uint64_t count = elem_count(e.rank, e.shape);
    const void *data = t->data;
    float *conv = NULL;
    if (e.dtype == CAIRN_DTYPE_BF16) {
      /* NumPy has no bfloat16: widen to float32 (exact). */
      conv = malloc(count ? count * sizeof *conv : 1);
      if (!conv) {
        errorf("%s: tensor '%s': out of memory", path, e.name);
        cairn_tensor_free(t);
        goto fail;
      }
      for (uint64_t k = 0; k < count; k++) conv[k] = (float)get_d(e.dtype, t->data, k);
      data = conv;
      nbf16++;
      fputs(PROG ": note: bf16 tensor '", stderr);
      put_esc(stderr, e.name);
      fputs("' exported as float32 ('<f4'): NumPy has no bfloat16\n", stderr);
    }
    uint64_t nbytes = count * (e.dtype == CAIRN_DTYPE_BF16 ? 4 : cairn_dtype_size(e.dtype));
    int r = npz_writer_add(w, e.name, descr, e.rank, e.shape, data, nbytes, err, sizeof err);
    free(conv);
    cairn_tensor_free(t);
    if (r != 0) {
      errorf("%s", err);
      goto fail;
    }
  }
  if (npz_writer_close(w, err, sizeof err) != 0) {
    w = NULL;
    errorf("%s", err);
    goto fail;
  }
  w = NULL;
  printf("exported %zu tensor%s to ", n, n == 1 ? "" : "s");
  put_esc(stdout, out);
  if (nbf16) printf(" (%zu bf16 tensor%s widened to float32)", nbf16, nbf16 == 1 ? "" : "s");
  fputc('\n', stdout);
  cairn_ckpt_close(c);
  return EXIT_OK_;
fail:
  npz_writer_abort(w);
  cairn_ckpt_close(c);
  return EXIT_ERROR;
}

/* import of a TensorFlow checkpoint or a safetensors file (c is open). */
static int import_foreign(const options *o, cairn_ckpt *c, const char *in, const char *out) {
  cairn_ckpt_write_options wo;
  memset(&wo, 0, sizeof wo);
  wo.compress = o->compress;
  cairn_ckpt_writer *w = NULL;
  cairn_status s = cairn_ckpt_writer_open(out, &wo, &w);
  size_t n = cairn_ckpt_count(c), nmeta = 0;
  for (size_t i = 0; i < n && s == CAIRN_OK; i++) {
    cairn_ckpt_entry e;
    cairn_tensor *t = NULL;
    if ((s = cairn_ckpt_entry_at(c, i, &e)) != CAIRN_OK || (s = read_tensor(c, &e, &t)) != CAIRN_OK) {
      error_tensor(in, i < n ? e.name : "?", s);
      cairn_ckpt_writer_abort(w);
      cairn_ckpt_close(c);
      return EXIT_ERROR;
    }
    s = cairn_ckpt_writer_add(w, e.name, t);
    cairn_tensor_free(t);
  }
  for (size_t i = 0; i < cairn_ckpt_meta_count(c) && s == CAIRN_OK; i++) {
    const char *key, *v;
    cairn_meta_type ty;
    if (cairn_ckpt_meta_at(c, i, &key, &ty) != CAIRN_OK || ty != CAIRN_META_STR || cairn_ckpt_meta_str(c, key, &v))
      continue;
    if (cairn_ckpt_writer_meta_str(w, key, v) == CAIRN_OK) {
      nmeta++;
    } else {
      fputs(PROG ": note: metadata '", stderr);
      put_esc(stderr, key);
      fputs("' skipped (cairn keys are 1..255 bytes of [a-z0-9_.])\n", stderr);
    }
  }
  if (s == CAIRN_OK) {
    s = cairn_ckpt_writer_commit(w);
    w = NULL;
  }
  const char *form = cairn_ckpt_format(c);
  cairn_ckpt_close(c);
  if (s != CAIRN_OK) {
    cairn_ckpt_writer_abort(w);
    error_status(out, s);
    return EXIT_ERROR;
  }
  printf("imported %zu tensor%s", n, n == 1 ? "" : "s");
  if (nmeta) printf(" and %zu metadata entr%s", nmeta, nmeta == 1 ? "y" : "ies");
  printf(" from a %s into ", strcmp(form, "tf") == 0 ? "TensorFlow checkpoint" : "safetensors file");
  put_esc(stdout, out);
  fputc('\n', stdout);
  return EXIT_OK_;
}

static int cmd_import(const options *o, const char *in, const char *out) {
  struct stat st;
  cairn_ckpt *fc = NULL;
  if (cairn_ckpt_open(in, NULL, &fc) == CAIRN_OK) {
    if (strcmp(cairn_ckpt_format(fc), "cairn") == 0) {
      cairn_ckpt_close(fc);
      errorf("%s: is already a cairn checkpoint", in);
      return EXIT_ERROR;
    }
    if (check_output(o, in, out) != 0) {
      cairn_ckpt_close(fc);
      return EXIT_ERROR;
    }
    return import_foreign(o, fc, in, out);
  }
  if (stat(in, &st) != 0) {
    errorf("%s: %s", in, strerror(errno));
    return EXIT_ERROR;
  }
  if (check_output(o, in, out) != 0) return EXIT_ERROR;
  /* An .npz: libcairn streams each member into the checkpoint, so memory
   * does not follow the members' sizes (doc/interop-formats.md). */
  cairn_npz_reader *r = NULL;
  cairn_status s = cairn_npz_reader_open(in, &r);
  if (s != CAIRN_OK) {
    errorf("%s", cairn_errmsg());
    return EXIT_ERROR;
  }
  cairn_ckpt_write_options wo = cairn_ckpt_write_options_default();
  wo.compress = o->compress;
  cairn_ckpt_writer *w = NULL;
  s = cairn_ckpt_writer_open(out, &wo, &w);
  if (s != CAIRN_OK) {
    error_status(out, s);
    cairn_npz_reader_close(r);
    return EXIT_ERROR;
  }
  size_t n = cairn_npz_reader_count(r), imported = 0, skipped = 0;
  for (size_t i = 0; i < n; i++) {
    const char *mname = cairn_npz_reader_name(r, i);
    size_t ml = strlen(mname);
    if (ml <= 4 || strcmp(mname + ml - 4, ".npy") != 0) {
      fputs(PROG ": warning: ", stderr);
      put_esc(stderr, in);
      fputs(": skipping member '", stderr);
      put_esc(stderr, mname);
      fputs("' (not a .npy array)\n", stderr);
      skipped++;
      continue;
    }
    char *name = strndup(mname, ml - 4);
    if (!name) {
      errorf("%s: member '%s': out of memory", in, mname);
      goto fail;
    }
    s = cairn_npz_reader_import(r, i, w, name);
    free(name);
    if (s != CAIRN_OK) {
      errorf("%s", cairn_errmsg());
      goto fail;
    }
    imported++;
  }
  s = cairn_ckpt_writer_commit(w);
  w = NULL;
  cairn_npz_reader_close(r);
  if (s != CAIRN_OK) {
    error_status(out, s);
    return EXIT_ERROR;
  }
  printf("imported %zu tensor%s into ", imported, imported == 1 ? "" : "s");
  put_esc(stdout, out);
  if (skipped) printf(" (%zu non-.npy member%s skipped)", skipped, skipped == 1 ? "" : "s");
  fputc('\n', stdout);
  return EXIT_OK_;
fail:
  cairn_ckpt_writer_abort(w);
  cairn_npz_reader_close(r);
  return EXIT_ERROR;
}

/* ---- Command line --------------------------------------------------------------- */

typedef struct command {
  const char *name;
  int nargs;
  unsigned opts;
  const char *usage;
  const char *help;
} command;

static const command commands[] = {
    {"list", 1, OPT_JSON, "list [--json] CKPT",
     "Lists the tensors: name, dtype, shape, raw and stored bytes, compression ratio (raw/stored),\n"
     "CRC32C of the raw bytes and the number of chunks (\"aligned\" for the mappable raw layout).\n"},
    {"show", 2, OPT_ALL, "show [--all] CKPT NAME",
     "Prints one tensor: dtype, shape, min, max, mean, std (of the finite values), NaN and Inf\n"
     "counts, and the values as numpy prints them (long tensors elided; --all prints every value).\n"
     "f16 and bf16 are shown converted to float. NAME may be typed escaped, as list prints it.\n"},
    {"diff", 2, OPT_JSON | OPT_TOL, "diff [--json] [--atol X] [--rtol X] A B",
     "Compares two checkpoints tensor by tensor: added, removed, dtype or shape changed, values\n"
     "changed (count, max abs and max relative difference). Values a (from A) and b (from B) are\n"
     "equal when |a - b| <= atol + rtol*|b| (default 0: exact; NaN equals NaN). Every tensor of\n"
     "both files is decoded and its checksum verified: corrupt data is reported, naming the file\n"
     "and tensor, never as \"same\". Exit status 0: same, 1: different, 2: error or corrupt data.\n"},
    {"verify", 1, OPT_JSON, "verify [--json] CKPT",
     "Checks every checksum and rule of the file, tensor data included. Exit status 0: valid,\n"
     "1: the file is bad (corrupt, malformed, incomplete, or its contents exceed the reader's\n"
     "limits; every unreadable tensor is named; an incomplete file can be salvaged with\n"
     "recover), 2: it could not be checked (I/O error, newer format version, out of memory).\n"},
    {"meta", 1, OPT_JSON | OPT_ALL, "meta [--json] [--all] CKPT",
     "Prints the metadata key-values with their types. Byte strings are shown in hex, the first\n"
     "32 bytes unless --all (--json always gives all of them).\n"},
    {"recover", 2, OPT_FORCE, "recover [--force] IN OUT",
     "Salvages a truncated (incomplete) or damaged checkpoint: every tensor written completely\n"
     "with valid checksums, and the metadata if it survived, are copied into the new valid file\n"
     "OUT. Prints how many tensors were recovered and lost. OUT is not replaced without --force.\n"},
    {"export", 2, OPT_FORCE | OPT_FORMAT | OPT_DTYPE,
     "export [--force] [--format npz|tf|safetensors] [--dtype bf16|f16|f32] CKPT OUT",
     "Writes every tensor into a NumPy .npz (members NAME.npy, stored uncompressed, ZIP64 when\n"
     "needed) that numpy.load reads. bf16 tensors are widened to float32 ('<f4') because NumPy has\n"
     "no bfloat16; a note names each one. Metadata is not exported.\n"
     "--format tf writes a TensorFlow checkpoint OUT.index + OUT.data-00000-of-00001 (and the\n"
     "directory's 'checkpoint' state file if it has none); --format safetensors (the default for\n"
     "an OUT ending in .safetensors) a safetensors file with the metadata as __metadata__\n"
     "strings. --dtype converts every floating-point tensor (for model-only exports: optimizer\n"
     "slots lose precision too); integer tensors keep their dtype.\n"},
    {"recompress", 2, OPT_FORCE | OPT_COMPRESS, "recompress [--force] [--compress lz4|compact|shuffle|none] IN OUT",
     "Rewrites the cairn checkpoint IN with another codec: IN is verified first (a damaged file\n"
     "is refused), then every tensor and the metadata are written to OUT through the normal\n"
     "atomic writer (temporary file, fsync, rename). OUT may be IN itself: it is replaced only\n"
     "by the complete new file. Another existing OUT is not replaced without --force.\n"
     "compact (byte planes + zstd) gives the smallest files, readable by cairn with format 1.1.\n"},
    {"import", 2, OPT_FORCE | OPT_COMPRESS, "import [--force] [--compress lz4|compact|shuffle|none] IN OUT",
     "IN may be a TensorFlow checkpoint prefix or a safetensors file: every tensor (and the\n"
     "safetensors metadata whose keys cairn allows) is copied into the cairn checkpoint OUT.\n"
     "Otherwise IN is a NumPy .npz. Reads a NumPy .npz (stored or deflated members, e.g. from numpy.savez or savez_compressed)\n"
     "and writes a cairn checkpoint with one tensor per .npy member, named after the member\n"
     "without '.npy'. Supported dtypes: float16/32/64, int8-64, uint8-64, bool, up to 8\n"
     "dimensions; big-endian and Fortran-order arrays are converted. Every size, offset, name\n"
     "and header is validated; other members are skipped with a warning.\n"},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
  fprintf(f, "usage: " PROG " SUBCOMMAND [OPTIONS] ARGS...\n\n"
             "Inspects and converts cairn checkpoint files. CKPT is a checkpoint file or a directory\n"
             "(meaning its latest valid checkpoint).\n\nsubcommands:\n");
  for (size_t i = 0; i < N_COMMANDS; i++) fprintf(f, "  " PROG " %s\n", commands[i].usage);
  fprintf(f, "  " PROG " help SUBCOMMAND\n\n"
             "options: --json (list, diff, verify, meta), --all (show, meta), --atol X, --rtol X (diff),\n"
             "         --force (recover, export, import), --compress MODE (import, recompress), -h/--help, --version\n\n"
             "exit status: 0 success (diff: same), 1 diff: different / verify: bad file,\n"
             "             2 error (diff: also a corrupt tensor in either file).\n"
             "Names and metadata from files are printed with control characters escaped.\n"
             "See ckpt-inspect(1).\n");
}

static void command_help(const command *c) {
  printf("usage: " PROG " %s\n\n%s", c->usage, c->help);
}

static const command *find_command(const char *name) {
  for (size_t i = 0; i < N_COMMANDS; i++)
    if (strcmp(commands[i].name, name) == 0) return &commands[i];
  return NULL;
}

static int parse_double(const char *opt, const char *s, double *v) {
  char *end;
  errno = 0;
  double d = strtod(s, &end);
  if (!*s || *end || errno || !isfinite(d) || d < 0) {
    errorf("%s: '%s' is not a non-negative number", opt, s);
    return -1;
  }
  *v = d;
  return 0;
}

/* Options may precede the subcommand ("ckpt-inspect --json list x"): moves
 * the first word that is neither an option nor an option's value to
 * argv[1], keeping the order of the rest. */
static void hoist_subcommand(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--") == 0) return;
    if (a[0] == '-' && a[1] != '\0') {
      if (!strchr(a, '=') &&
          (strcmp(a, "--atol") == 0 || strcmp(a, "--rtol") == 0 || strcmp(a, "--compress") == 0))
        i++; /* its value */
      continue;
    }
    if (i == 1) return;
    char *sub = argv[i];
    memmove(argv + 2, argv + 1, (size_t)(i - 1) * sizeof *argv);
    argv[1] = sub;
    return;
  }
}

int main(int argc, char **argv) {
  /* A file size limit (ulimit -f, RLIMIT_FSIZE) makes a write past it raise
     SIGXFSZ, whose default action kills the process: exit status 153 from a
     shell, no message, a temporary file left. Ignored, the write fails with
     EFBIG and the command fails cleanly instead, naming the file ("File too
     large"), with no output file or temporary left. The library leaves the
     process-wide disposition alone; a program may choose it, so the tools
     do. */
  signal(SIGXFSZ, SIG_IGN);
  if (argc < 2) {
    usage(stderr);
    return EXIT_ERROR;
  }
  if (strcmp(argv[1], "-h") != 0 && strcmp(argv[1], "--help") != 0 && strcmp(argv[1], "--version") != 0)
    hoist_subcommand(argc, argv);
  const char *sub = argv[1];
  if (strcmp(sub, "-h") == 0 || strcmp(sub, "--help") == 0) {
    usage(stdout);
    return EXIT_OK_;
  }
  if (strcmp(sub, "--version") == 0) {
    printf(PROG " (cairn) %s, checkpoint format %d.%d\n", cairn_version_string(), CAIRN_CKPT_VERSION_MAJOR,
           CAIRN_CKPT_VERSION_MINOR);
    return EXIT_OK_;
  }
  if (strcmp(sub, "help") == 0) {
    if (argc == 2) {
      usage(stdout);
      return EXIT_OK_;
    }
    const command *c = find_command(argv[2]);
    if (!c) {
      errorf("no subcommand '%s' (try --help)", argv[2]);
      return EXIT_ERROR;
    }
    command_help(c);
    return EXIT_OK_;
  }
  const command *cmd = find_command(sub);
  if (!cmd && sub[0] == '-') { /* only options: --help or --version anywhere still work */
    for (int i = 1; i < argc; i++) {
      if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
        usage(stdout);
        return EXIT_OK_;
      }
    }
  }
  if (!cmd) {
    errorf("%s '%s' (try --help)", sub[0] == '-' ? "unknown option" : "unknown subcommand", sub);
    return EXIT_ERROR;
  }
  options o;
  memset(&o, 0, sizeof o);
  o.compress = CAIRN_CKPT_COMPRESS_AUTO;
  const char *pos[4];
  int npos = 0, end_of_opts = 0;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    if (end_of_opts || a[0] != '-' || a[1] == '\0') {
      if (npos >= cmd->nargs) {
        errorf("%s: too many arguments (usage: " PROG " %s)", cmd->name, cmd->usage);
        return EXIT_ERROR;
      }
      pos[npos++] = a;
      continue;
    }
    if (strcmp(a, "--") == 0) {
      end_of_opts = 1;
      continue;
    }
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      command_help(cmd);
      return EXIT_OK_;
    }
    /* --opt=value or --opt value */
    const char *eq = strchr(a, '=');
    size_t kl = eq ? (size_t)(eq - a) : strlen(a);
    const char *val = eq ? eq + 1 : NULL;
    unsigned flag = 0;
    int needs_val = 0;
    if (kl == 6 && strncmp(a, "--json", kl) == 0) flag = OPT_JSON;
    else if (kl == 5 && strncmp(a, "--all", kl) == 0) flag = OPT_ALL;
    else if (kl == 7 && strncmp(a, "--force", kl) == 0) flag = OPT_FORCE;
    else if (kl == 6 && (strncmp(a, "--atol", kl) == 0 || strncmp(a, "--rtol", kl) == 0)) flag = OPT_TOL, needs_val = 1;
    else if (kl == 10 && strncmp(a, "--compress", kl) == 0) flag = OPT_COMPRESS, needs_val = 1;
    else if (kl == 8 && strncmp(a, "--format", kl) == 0) flag = OPT_FORMAT, needs_val = 1;
    else if (kl == 7 && strncmp(a, "--dtype", kl) == 0) flag = OPT_DTYPE, needs_val = 1;
    if (!flag) {
      errorf("%s: unknown option '%s' (usage: " PROG " %s)", cmd->name, a, cmd->usage);
      return EXIT_ERROR;
    }
    if (!(cmd->opts & flag)) {
      errorf("%s: option '%.*s' does not apply (usage: " PROG " %s)", cmd->name, (int)kl, a, cmd->usage);
      return EXIT_ERROR;
    }
    if (needs_val && !val) {
      if (i + 1 >= argc) {
        errorf("%.*s needs a value", (int)kl, a);
        return EXIT_ERROR;
      }
      val = argv[++i];
    } else if (!needs_val && val) {
      errorf("%.*s takes no value", (int)kl, a);
      return EXIT_ERROR;
    }
    o.given |= flag;
    if (flag == OPT_JSON) o.json = 1;
    else if (flag == OPT_ALL) o.all = 1;
    else if (flag == OPT_FORCE) o.force = 1;
    else if (flag == OPT_TOL) {
      if (parse_double(a[2] == 'a' ? "--atol" : "--rtol", val, a[2] == 'a' ? &o.atol : &o.rtol) != 0)
        return EXIT_ERROR;
    } else if (flag == OPT_COMPRESS) {
      if (strcmp(val, "auto") == 0 || strcmp(val, "lz4") == 0) o.compress = CAIRN_CKPT_COMPRESS_AUTO;
      else if (strcmp(val, "compact") == 0) o.compress = CAIRN_CKPT_COMPRESS_COMPACT;
      else if (strcmp(val, "none") == 0) o.compress = CAIRN_CKPT_COMPRESS_NONE;
      else if (strcmp(val, "shuffle") == 0) o.compress = CAIRN_CKPT_COMPRESS_SHUFFLE;
      else {
        errorf("--compress: '%s' is not lz4 (auto), compact, shuffle or none", val);
        return EXIT_ERROR;
      }
    } else if (flag == OPT_FORMAT) {
      if (strcmp(val, "npz") != 0 && strcmp(val, "tf") != 0 && strcmp(val, "safetensors") != 0) {
        errorf("--format: '%s' is not npz, tf or safetensors", val);
        return EXIT_ERROR;
      }
      o.format = val;
    } else if (flag == OPT_DTYPE) {
      if (strcmp(val, "bf16") == 0) o.export_dtype = CAIRN_DTYPE_BF16;
      else if (strcmp(val, "f16") == 0) o.export_dtype = CAIRN_DTYPE_F16;
      else if (strcmp(val, "f32") == 0) o.export_dtype = CAIRN_DTYPE_F32;
      else {
        errorf("--dtype: '%s' is not bf16, f16 or f32", val);
        return EXIT_ERROR;
      }
    }
  }
  if (npos != cmd->nargs) {
    errorf("%s: %s (usage: " PROG " %s)", cmd->name, npos < cmd->nargs ? "missing argument" : "too many arguments",
           cmd->usage);
    return EXIT_ERROR;
  }
  int rc;
  if (strcmp(cmd->name, "list") == 0) rc = cmd_list(&o, pos[0]);
  else if (strcmp(cmd->name, "show") == 0) rc = cmd_show(&o, pos[0], pos[1]);
  else if (strcmp(cmd->name, "diff") == 0) rc = cmd_diff(&o, pos[0], pos[1]);
  else if (strcmp(cmd->name, "verify") == 0) rc = cmd_verify(&o, pos[0]);
  else if (strcmp(cmd->name, "meta") == 0) rc = cmd_meta(&o, pos[0]);
  else if (strcmp(cmd->name, "recover") == 0) rc = cmd_recover(&o, pos[0], pos[1]);
  else if (strcmp(cmd->name, "export") == 0) rc = cmd_export(&o, pos[0], pos[1]);
  else if (strcmp(cmd->name, "recompress") == 0) rc = cmd_recompress(&o, pos[0], pos[1]);
  else rc = cmd_import(&o, pos[0], pos[1]);
  if (fflush(stdout) != 0 || ferror(stdout)) {
    errorf("error writing to standard output: %s", strerror(errno));
    return EXIT_ERROR;
  }
  return rc;
}
