/* ckpt-inspect/common.c — what the subcommands share (common.h): escaped
 * and JSON output, errors, dtypes and values, opening a CKPT argument. */
#define _POSIX_C_SOURCE 200809L

#include "common.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "utf8.h"

/* ---- Escaped output ----------------------------------------------- */

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
void put_esc(FILE *f, const char *s) { put_esc_n(f, s, strlen(s)); }

/* Display width of the escaped form (code points, not bytes: good enough
 * for aligning columns of names). */
size_t esc_width(const char *str) {
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

void put_esc_padded(FILE *f, const char *s, size_t width) {
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
char *unescape(const char *in) {
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
void json_str(FILE *f, const char *s) { json_str_n(f, s, strlen(s)); }

/* Shortest "%.*g" that reads back as v; non-finite ones are not JSON: null. */
void json_num(FILE *f, double v) {
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

void json_shape(FILE *f, int rank, const int64_t *shape) {
  fputc('[', f);
  for (int k = 0; k < rank; k++) fprintf(f, "%s%lld", k ? ", " : "", (long long)shape[k]);
  fputc(']', f);
}

/* ---- Errors ----------------------------------------------------------------- */

void errorf(const char *fmt, ...) {
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
void error_status(const char *what, cairn_status s) {
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

const char *status_name(cairn_status s) {
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

const char *dtype_str(cairn_dtype dt) {
  static char buf[24];
  if (cairn_dtype_size(dt) == 0) {
    snprintf(buf, sizeof buf, "dtype#%d", (int)dt);
    return buf;
  }
  return cairn_dtype_name(dt);
}

int dtype_is_float(cairn_dtype dt) {
  return dt == CAIRN_DTYPE_F32 || dt == CAIRN_DTYPE_F64 || dt == CAIRN_DTYPE_F16 || dt == CAIRN_DTYPE_BF16;
}
int dtype_is_signed(cairn_dtype dt) {
  return dt == CAIRN_DTYPE_I8 || dt == CAIRN_DTYPE_I16 || dt == CAIRN_DTYPE_I32 || dt == CAIRN_DTYPE_I64;
}
int dtype_is_unsigned(cairn_dtype dt) {
  return dt == CAIRN_DTYPE_U8 || dt == CAIRN_DTYPE_U16 || dt == CAIRN_DTYPE_U32 || dt == CAIRN_DTYPE_U64;
}

/* NumPy's name for the dtype, as array repr prints it. */
const char *numpy_name(cairn_dtype dt) {
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

/* A float from its IEEE bits, and back. */
static float float_of(uint32_t bits) {
  float f;
  memcpy(&f, &bits, 4);
  return f;
}
static uint32_t bits_of(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  return x;
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
  return float_of(bits);
}

/* Round to nearest even, as a f16 store would. */
uint16_t f32_to_f16(float f) {
  uint32_t x = bits_of(f);
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

static float bf16_to_f32(uint16_t h) { return float_of((uint32_t)h << 16); }
uint16_t f32_to_bf16(float f) {
  uint32_t x = bits_of(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((x >> 16) | 0x40u);
  return (uint16_t)((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

/* Element i as a double (exact for every float dtype and for integers up
 * to 2^53). */
double get_d(cairn_dtype dt, const void *data, uint64_t i) {
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
int64_t get_i(cairn_dtype dt, const void *data, uint64_t i) {
  const unsigned char *p = data;
  switch (dt) {
    case CAIRN_DTYPE_I64: { int64_t v; memcpy(&v, p + 8 * i, 8); return v; }
    default: return (int64_t)get_d(dt, data, i);
  }
}
uint64_t get_u(cairn_dtype dt, const void *data, uint64_t i) {
  const unsigned char *p = data;
  switch (dt) {
    case CAIRN_DTYPE_U64: { uint64_t v; memcpy(&v, p + 8 * i, 8); return v; }
    default: return (uint64_t)get_d(dt, data, i);
  }
}

/* v rounded to dtype dt and back (to test whether a decimal string
 * identifies the stored value). */
double narrow(double v, cairn_dtype dt) {
  switch (dt) {
    case CAIRN_DTYPE_F32: return (float)v;
    case CAIRN_DTYPE_F16: return f16_to_f32(f32_to_f16((float)v));
    case CAIRN_DTYPE_BF16: return bf16_to_f32(f32_to_bf16((float)v));
    default: return v;
  }
}

/* The shortest decimal that identifies v in dt: positional for
 * 1e-4 <= |v| < 1e16 (and 0), scientific otherwise. */
void fmt_shortest(char *b, size_t n, double v, cairn_dtype dt) {
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

int ends_with(const char *s, const char *suffix) {
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
    char near[1300];
    cairn_checkpoint_dir_suggest(arg, near, sizeof near);
    errorf("%s: no such file or directory%s", arg, near);
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
cairn_ckpt *take_resolved(const char *path) {
  for (size_t i = 0; i < 2; i++)
    if (g_resolved[i].c && strcmp(g_resolved[i].path, path) == 0) {
      cairn_ckpt *c = g_resolved[i].c;
      g_resolved[i].c = NULL;
      return c;
    }
  return NULL;
}

/* The codecs of a tensor's chunks, e.g. "compact+raw" ("-" for no data). */
const char *codec_str(const cairn_ckpt *c, const char *name, char *buf, size_t cap) {
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

/* Resolves a CKPT argument into a file path: a file as is, a directory
 * to its latest valid checkpoint (when allow_dir). Prints the error. */
int resolve(const char *arg, int allow_dir, char *out, size_t outlen) {
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
int is_cairn_file(const char *path) {
  static const unsigned char magic[8] = {0x89, 'C', 'R', 'N', '\r', '\n', 0x1a, '\n'};
  unsigned char b[8];
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  int ok = fread(b, 1, 8, f) == 8 && memcmp(b, magic, 8) == 0;
  fclose(f);
  return ok;
}

/* Opens path; prints the error with a hint, returns the status. */
cairn_status open_ckpt(const char *path, cairn_ckpt **c) {
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

cairn_ckpt *open_arg(const char *arg, char *path, size_t len) {
  cairn_ckpt *c;
  if (resolve(arg, 1, path, len) != 0 || open_ckpt(path, &c) != CAIRN_OK) return NULL;
  return c;
}

/* "format 1.0" for cairn's own files; the foreign formats by name. */
const char *format_label(const cairn_ckpt *c, char *b, size_t n) {
  int major, minor;
  const char *f = cairn_ckpt_format(c);
  cairn_ckpt_version(c, &major, &minor);
  if (strcmp(f, "tf") == 0) snprintf(b, n, "TensorFlow checkpoint (bundle version %d)", major);
  else if (strcmp(f, "safetensors") == 0) snprintf(b, n, "safetensors");
  else if (strcmp(f, "npz") == 0) snprintf(b, n, "NumPy .npz");
  else snprintf(b, n, "format %d.%d", major, minor);
  return b;
}

/* Reads tensor e into a new tensor of its dtype and shape. */
cairn_status read_tensor(cairn_ckpt *c, const cairn_ckpt_entry *e, cairn_tensor **out) {
  cairn_status s = cairn_tensor_new(e->dtype, e->rank, e->shape, out);
  if (s != CAIRN_OK) return s;
  s = cairn_ckpt_read(c, e->name, *out);
  if (s != CAIRN_OK) {
    cairn_tensor_free(*out);
    *out = NULL;
  }
  return s;
}

void error_tensor(const char *path, const char *name, cairn_status s) {
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

void shape_str(char *b, size_t n, int rank, const int64_t *shape) {
  size_t o = (size_t)snprintf(b, n, "(");
  for (int k = 0; k < rank && o < n; k++)
    o += (size_t)snprintf(b + o, n - o, k ? ", %lld" : "%lld", (long long)shape[k]);
  if (o < n) snprintf(b + o, n - o, rank == 1 ? ",)" : ")");
}

uint64_t elem_count(int rank, const int64_t *shape) {
  uint64_t n = 1;
  for (int k = 0; k < rank; k++) n *= (uint64_t)shape[k];
  return n;
}

int check_output(const options *o, const char *in, const char *out) {
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

/* Whether a status means "the file is bad" (its contents are corrupt,
 * malformed, incomplete or beyond the reader's limits) rather than "could
 * not be checked" (I/O, memory, a newer format). */
int status_is_bad_file(cairn_status s) {
  return s == CAIRN_E_TRUNCATED || s == CAIRN_E_CORRUPT || s == CAIRN_E_FORMAT || s == CAIRN_E_LIMIT;
}

void ratio_str(char *b, size_t n, uint64_t raw, uint64_t stored) {
  if (raw == 0 || stored == 0)
    snprintf(b, n, "-");
  else
    snprintf(b, n, "%.2fx", (double)raw / (double)stored);
}
