/* The `checkpoint` state file (TF's CheckpointState in protobuf text form),
 * written atomically, read defensively, its entries confined to their
 * directory. The latest usable checkpoint is found in checkpoint_latest.c.
 *
 * TF writes the file with text_format.MessageToString (as_utf8 False):
 *   model_checkpoint_path: "<newest>"\n
 *   all_model_checkpoint_paths: "<oldest>"\n ... one per kept checkpoint
 * strings escaped by text_encoding.CEscape: \t \n \r \" \' \\ and every
 * other byte outside 0x20..0x7e as a three-digit octal escape. The reader
 * accepts what TF's text_format.Merge accepts for this message: fields in
 * any order (the last model_checkpoint_path wins), comments, single or
 * double quotes, adjacent literals, list syntax, and the two timestamp
 * fields TF2's CheckpointManager adds (parsed and ignored).
 * (tensorflow/python/training/checkpoint_management.py,
 *  protobuf python/google/protobuf/text_format.py, text_encoding.py) */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include "internal.h"
#include "checkpoint_state_impl.h"

#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cairn/ckpt.h"
#include "cairn/saver.h"
#include "cairn/session.h" /* cairn_env_log: the warnings about entries outside the directory */

#define STATE_MAX_BYTES (16u << 20)

/* ---- small string helpers --------------------------------------------------- */

void cairn__sb_putn(cairn__sbuf *b, const char *s, size_t n) {
  if (b->oom) return;
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
      b->oom = 1;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = '\0';
}

void cairn__sb_puts(cairn__sbuf *b, const char *s) { cairn__sb_putn(b, s, strlen(s)); }

static const char *base_of(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

static cairn_status errno_status(int e) {
  return (e == ENOSPC || e == EDQUOT) ? CAIRN_E_NOSPC : CAIRN_E_IO;
}

/* ---- writing ---------------------------------------------------------------- */

/* protobuf's CEscape(as_utf8=False). */
void cairn__state_put_escaped(cairn__sbuf *b, const char *s) {
  cairn__sb_putn(b, "\"", 1);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    char tmp[5];
    switch (*p) {
    case '\t': cairn__sb_putn(b, "\\t", 2); break;
    case '\n': cairn__sb_putn(b, "\\n", 2); break;
    case '\r': cairn__sb_putn(b, "\\r", 2); break;
    case '"': cairn__sb_putn(b, "\\\"", 2); break;
    case '\'': cairn__sb_putn(b, "\\'", 2); break;
    case '\\': cairn__sb_putn(b, "\\\\", 2); break;
    default:
      if (*p < 0x20 || *p >= 0x7f) {
        snprintf(tmp, sizeof tmp, "\\%03o", (unsigned)*p);
        cairn__sb_putn(b, tmp, 4);
      } else {
        cairn__sb_putn(b, (const char *)p, 1);
      }
    }
  }
  cairn__sb_putn(b, "\"", 1);
}

/* The form a path takes in the state file of directory `dir` (whose
 * realpath is rdir, or NULL if unknown): its base name when it lies in dir,
 * else an absolute path when one can be made, else the path as given. */
static char *state_form(const char *rdir, const char *path) {
  char *d = cairn__path_dir(path);
  if (!d) return NULL;
  char *rd = realpath(d, NULL);
  free(d);
  char *out;
  if (rd && rdir && strcmp(rd, rdir) == 0) {
    out = cairn__strdup(base_of(path));
  } else if (rd && path[0] != '/') {
    out = cairn__path_join(rd, base_of(path));
  } else {
    out = cairn__strdup(path);
  }
  free(rd);
  return out;
}

cairn_status cairn_checkpoint_state_write(const char *dir, const char *model_path, const char *const *all_paths,
                                          size_t n, int no_fsync) {
  static const char fn[] = "checkpoint_state_write";
  if (!dir) return cairn__fail(CAIRN_E_NULL, "%s: dir is NULL", fn);
  if (!model_path) return cairn__fail(CAIRN_E_NULL, "%s: model_path is NULL", fn);
  if (n > 0 && !all_paths) return cairn__fail(CAIRN_E_NULL, "%s: all_paths is NULL with n = %zu", fn, n);
  for (size_t i = 0; i < n; i++)
    if (!all_paths[i]) return cairn__fail(CAIRN_E_NULL, "%s: all_paths[%zu] is NULL", fn, i);
  if (!model_path[0]) return cairn__fail(CAIRN_E_INVALID, "%s: model_path is empty", fn);
  if (!dir[0]) dir = ".";

  struct stat sd;
  int se = stat(dir, &sd) != 0 ? errno : 0;
  if (se || !S_ISDIR(sd.st_mode))
    return cairn__fail(CAIRN_E_NOT_FOUND, "%s: directory '%s' %s", fn, dir,
                       se ? strerror(se) : "is not a directory");

  char *final = cairn__path_join(dir, CAIRN__STATE_NAME);
  char *tmp = final ? malloc(strlen(final) + 16) : NULL;
  char *rdir = realpath(dir, NULL);
  cairn__sbuf b = {0};
  cairn_status st = CAIRN_OK;
  if (!final || !tmp) {
    st = cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
    goto done;
  }
  /* TF: "Save path '%s' conflicts with path used for checkpoint state." */
  if (strcmp(base_of(model_path), CAIRN__STATE_NAME) == 0) {
    char *mf = state_form(rdir, model_path);
    int same = mf && strcmp(mf, CAIRN__STATE_NAME) == 0;
    free(mf);
    if (same) {
      st = cairn__fail(CAIRN_E_INVALID, "%s: save path '%s' conflicts with the state file '%s'", fn, model_path,
                       final);
      goto done;
    }
  }

  /* Lines, oldest first; model_path appended unless it is already last. */
  cairn__sb_puts(&b, "model_checkpoint_path: ");
  char *f = state_form(rdir, model_path);
  if (!f) b.oom = 1;
  else cairn__state_put_escaped(&b, f);
  free(f);
  cairn__sb_putn(&b, "\n", 1);
  int last_is_model = n > 0 && strcmp(all_paths[n - 1], model_path) == 0;
  for (size_t i = 0; i <= n; i++) {
    const char *p = i < n ? all_paths[i] : (last_is_model ? NULL : model_path);
    if (!p) break;
    cairn__sb_puts(&b, "all_model_checkpoint_paths: ");
    f = state_form(rdir, p);
    if (!f) b.oom = 1;
    else cairn__state_put_escaped(&b, f);
    free(f);
    cairn__sb_putn(&b, "\n", 1);
  }
  if (b.oom) {
    st = cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
    goto done;
  }

  snprintf(tmp, strlen(final) + 16, "%s.tmp.XXXXXX", final);
  int fd = mkstemp(tmp);
  if (fd < 0) {
    int e = errno;
    st = cairn__fail(errno_status(e), "%s: cannot create '%s': %s", fn, tmp, strerror(e));
    goto done;
  }
  (void)fchmod(fd, 0644); /* mkstemp makes 0600; the state file is not secret */
  size_t off = 0;
  int e = 0;
  while (off < b.n) {
    ssize_t w = write(fd, b.p + off, b.n - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      e = errno;
      break;
    }
    off += (size_t)w;
  }
  if (!e && !no_fsync && fsync(fd) != 0) e = errno;
  if (close(fd) != 0 && !e) e = errno;
  if (!e && rename(tmp, final) != 0) e = errno;
  if (e) {
    unlink(tmp);
    st = cairn__fail(errno_status(e), "%s: writing '%s' failed: %s (the previous state file is unchanged)", fn,
                     final, strerror(e));
    goto done;
  }
  if (!no_fsync && cairn__fsync_dir(dir) != 0) {
    e = errno;
    st = cairn__fail(CAIRN_E_IO, "%s: fsync of directory '%s' failed: %s", fn, dir, strerror(e));
  }
done:
  free(b.p);
  free(rdir);
  free(tmp);
  free(final);
  return st;
}

/* ---- reading ------------------------------------------------------------------ */

struct cairn_checkpoint_state {
  char *model;
  char **paths;
  size_t n;
  char **ignored; /* entries naming no file of the directory, as written */
  size_t n_ignored;
};

void cairn_checkpoint_state_free(cairn_checkpoint_state *st) {
  if (!st) return;
  free(st->model);
  for (size_t i = 0; i < st->n; i++) free(st->paths[i]);
  free(st->paths);
  for (size_t i = 0; i < st->n_ignored; i++) free(st->ignored[i]);
  free(st->ignored);
  free(st);
}

size_t cairn_checkpoint_state_ignored_count(const cairn_checkpoint_state *st) { return st ? st->n_ignored : 0; }
const char *cairn_checkpoint_state_ignored_at(const cairn_checkpoint_state *st, size_t i) {
  return st && i < st->n_ignored ? st->ignored[i] : NULL;
}

const char *cairn_checkpoint_state_model_path(const cairn_checkpoint_state *st) { return st ? st->model : NULL; }
size_t cairn_checkpoint_state_count(const cairn_checkpoint_state *st) { return st ? st->n : 0; }
const char *cairn_checkpoint_state_path_at(const cairn_checkpoint_state *st, size_t i) {
  return st && i < st->n ? st->paths[i] : NULL;
}

typedef struct parser {
  const char *p, *end;
  int line;
  const char *err; /* static text of the first error */
} parser;

static void skip_space(parser *ps) {
  while (ps->p < ps->end) {
    char c = *ps->p;
    if (c == '\n') {
      ps->line++;
      ps->p++;
    } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
      ps->p++;
    } else if (c == '#') {
      while (ps->p < ps->end && *ps->p != '\n') ps->p++;
    } else {
      break;
    }
  }
}

static int is_ident(char c, int first) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (!first && c >= '0' && c <= '9');
}

static int octal(char c) { return c >= '0' && c <= '7'; }
static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* One quoted literal appended to b (unescaped); 0 on error. */
static int parse_literal(parser *ps, cairn__sbuf *b) {
  char q = *ps->p++;
  while (ps->p < ps->end && *ps->p != q) {
    char c = *ps->p++;
    if (c == '\n') {
      ps->err = "newline inside a string";
      return 0;
    }
    if (c != '\\') {
      cairn__sb_putn(b, &c, 1);
      continue;
    }
    if (ps->p >= ps->end) break;
    c = *ps->p++;
    unsigned v;
    switch (c) {
    case 'n': v = '\n'; break;
    case 'r': v = '\r'; break;
    case 't': v = '\t'; break;
    case 'a': v = '\a'; break;
    case 'b': v = '\b'; break;
    case 'f': v = '\f'; break;
    case 'v': v = '\v'; break;
    case '"': case '\'': case '\\': case '?': v = (unsigned char)c; break;
    case 'x': case 'X': {
      int h = ps->p < ps->end ? hexval(*ps->p) : -1;
      if (h < 0) {
        ps->err = "bad \\x escape";
        return 0;
      }
      v = (unsigned)h;
      ps->p++;
      if (ps->p < ps->end && (h = hexval(*ps->p)) >= 0) {
        v = v * 16 + (unsigned)h;
        ps->p++;
      }
      break;
    }
    default:
      if (!octal(c)) {
        ps->err = "unknown escape";
        return 0;
      }
      v = (unsigned)(c - '0');
      for (int k = 0; k < 2 && ps->p < ps->end && octal(*ps->p); k++) v = v * 8 + (unsigned)(*ps->p++ - '0');
      if (v > 0xff) {
        ps->err = "octal escape out of range";
        return 0;
      }
    }
    if (v == 0) {
      ps->err = "NUL byte in a path";
      return 0;
    }
    char ch = (char)v;
    cairn__sb_putn(b, &ch, 1);
  }
  if (ps->p >= ps->end) {
    ps->err = "unterminated string";
    return 0;
  }
  ps->p++; /* closing quote */
  return 1;
}

/* A string value: one or more adjacent literals; malloc'd, NULL on error. */
static char *parse_string(parser *ps) {
  cairn__sbuf b = {0};
  cairn__sb_putn(&b, "", 0);
  if (ps->p >= ps->end || (*ps->p != '"' && *ps->p != '\'')) {
    ps->err = "expected a quoted string";
    free(b.p);
    return NULL;
  }
  while (ps->p < ps->end && (*ps->p == '"' || *ps->p == '\'')) {
    if (!parse_literal(ps, &b)) {
      free(b.p);
      return NULL;
    }
    skip_space(ps);
  }
  if (b.oom) {
    ps->err = "out of memory";
    free(b.p);
    return NULL;
  }
  return b.p;
}

/* A number (the timestamp fields): checked and ignored. */
static int parse_number(parser *ps) {
  const char *s = ps->p;
  while (ps->p < ps->end && (strchr("0123456789+-.eE", *ps->p) || is_ident(*ps->p, 0))) ps->p++;
  if (ps->p == s) {
    ps->err = "expected a number";
    return 0;
  }
  char tmp[64];
  size_t n = (size_t)(ps->p - s);
  if (n >= sizeof tmp) {
    ps->err = "number too long";
    return 0;
  }
  memcpy(tmp, s, n);
  tmp[n] = '\0';
  if (n > 0 && (tmp[n - 1] == 'f' || tmp[n - 1] == 'F')) tmp[n - 1] = '\0';
  char *e;
  (void)strtod(tmp, &e);
  if (*e && strcmp(tmp, "inf") && strcmp(tmp, "-inf") && strcmp(tmp, "nan")) {
    ps->err = "bad number";
    return 0;
  }
  skip_space(ps);
  return 1;
}

static int push_path(cairn_checkpoint_state *st, char *p) {
  char **np = realloc(st->paths, (st->n + 1) * sizeof *np);
  if (!np) return 0;
  st->paths = np;
  st->paths[st->n++] = p;
  return 1;
}

/* Parses text into st (paths as written); 0 with ps->err on failure. */
static int parse_state(parser *ps, cairn_checkpoint_state *st) {
  for (;;) {
    skip_space(ps);
    if (ps->p >= ps->end) return 1;
    const char *id = ps->p;
    if (!is_ident(*ps->p, 1)) {
      ps->err = "expected a field name";
      return 0;
    }
    while (ps->p < ps->end && is_ident(*ps->p, 0)) ps->p++;
    size_t idn = (size_t)(ps->p - id);
    int kind; /* 1 model, 2 all paths, 3 number fields */
    if (idn == 21 && memcmp(id, "model_checkpoint_path", 21) == 0) kind = 1;
    else if (idn == 26 && memcmp(id, "all_model_checkpoint_paths", 26) == 0) kind = 2;
    else if ((idn == 31 && memcmp(id, "all_model_checkpoint_timestamps", 31) == 0) ||
             (idn == 24 && memcmp(id, "last_preserved_timestamp", 24) == 0))
      kind = 3;
    else {
      ps->err = "unknown field";
      return 0;
    }
    skip_space(ps);
    if (ps->p >= ps->end || *ps->p != ':') {
      ps->err = "expected ':'";
      return 0;
    }
    ps->p++;
    skip_space(ps);
    int list = kind != 1 && ps->p < ps->end && *ps->p == '[';
    if (list) {
      ps->p++;
      skip_space(ps);
    }
    for (int first = 1;; first = 0) {
      if (list && ps->p < ps->end && *ps->p == ']') {
        if (!first) {
          ps->err = "expected a value after ','";
          return 0;
        }
        break;
      }
      if (kind == 3) {
        if (!parse_number(ps)) return 0;
      } else {
        char *s = parse_string(ps);
        if (!s) return 0;
        if (kind == 1) {
          free(st->model);
          st->model = s;
        } else if (!push_path(st, s)) {
          free(s);
          ps->err = "out of memory";
          return 0;
        }
      }
      if (!list) break;
      if (ps->p < ps->end && *ps->p == ',') {
        ps->p++;
        skip_space(ps);
        continue;
      }
      break;
    }
    if (list) {
      if (ps->p >= ps->end || *ps->p != ']') {
        ps->err = "expected ']'";
        return 0;
      }
      ps->p++;
    }
    skip_space(ps);
    if (ps->p < ps->end && (*ps->p == ',' || *ps->p == ';')) ps->p++;
  }
}

/* Joins a relative path onto dir (TF: os.path.join(dir, path)). */
static char *complete_path(const char *dir, char *p) {
  if (p[0] == '/') return p;
  char *j = cairn__path_join(dir, p);
  free(p);
  return j;
}

/* ---- confinement ------------------------------------------------------------------ */

/* Anyone who can write the state file must not be able to make a trainer
 * read, adopt or delete a file elsewhere: an entry is used only when it
 * names a file directly in the checkpoint directory (realpath rdir). TF
 * writes such entries as base names; its absolute form of them is accepted
 * too. 1 when `entry` does; else 0 and why in why[0..len). */
int cairn__names_file_in_dir(const char *dir, const char *rdir, const char *entry, char *why, size_t len) {
  for (const char *p = entry;;) {
    const char *q = strchr(p, '/');
    size_t n = q ? (size_t)(q - p) : strlen(p);
    if (n == 2 && p[0] == '.' && p[1] == '.') {
      snprintf(why, len, "it has a '..' component");
      return 0;
    }
    if (!q) break;
    p = q + 1;
  }
  const char *b = base_of(entry);
  if (!b[0] || strcmp(b, ".") == 0) {
    snprintf(why, len, "it names a directory, not a file");
    return 0;
  }
  if (!rdir) {
    snprintf(why, len, "the checkpoint directory '%.300s' cannot be resolved", dir);
    return 0;
  }
  char *full = entry[0] == '/' ? cairn__strdup(entry) : cairn__path_join(dir, entry);
  char *parent = full ? cairn__path_dir(full) : NULL;
  char *rp = parent ? realpath(parent, NULL) : NULL;
  int ok = 0;
  if (!full || !parent) {
    snprintf(why, len, "out of memory");
  } else if (!rp) {
    snprintf(why, len, "its directory '%.300s' cannot be resolved: %s", parent, strerror(errno));
  } else if (strcmp(rp, rdir) != 0) {
    snprintf(why, len, "it is in '%.300s', not in the checkpoint directory '%.300s'", rp, rdir);
  } else {
    struct stat sb;
    ok = 1;
    /* A TF prefix is no file: what stands for it is "<prefix>.index" (its
       data shards are checked when they are opened, cairn__open_read). */
    char *index = NULL;
    const char *what = "it";
    if (lstat(full, &sb) != 0 && (index = malloc(strlen(full) + 7)) != NULL) {
      sprintf(index, "%s.index", full);
      if (lstat(index, &sb) == 0) {
        free(full);
        full = index;
        index = NULL;
        what = "its index";
      }
    }
    free(index);
    if (lstat(full, &sb) == 0 && S_ISLNK(sb.st_mode)) {
      /* a link is only a name: what it reaches must be in the directory too */
      char *target = realpath(full, NULL);
      char *td = target ? cairn__path_dir(target) : NULL;
      if (!target) {
        snprintf(why, len, "%s is a symbolic link that does not resolve (%s)", what, strerror(errno));
        ok = 0;
      } else if (!td || strcmp(td, rdir) != 0) {
        snprintf(why, len, "%s is a symbolic link to '%.300s', outside the checkpoint directory '%.300s'", what,
                 target, rdir);
        ok = 0;
      }
      free(td);
      free(target);
    }
  }
  free(rp);
  free(parent);
  free(full);
  return ok;
}

/* Logs msg as a WARNING once per process: the state file is read several
 * times per run (latest checkpoint, restore, tools), and one bad entry
 * should not fill the log. A racy miss only repeats a warning. */
void cairn__warn_once(const char *msg) {
  static _Atomic uint64_t seen[64];
  static atomic_uint next;
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (const unsigned char *p = (const unsigned char *)msg; *p; p++) h = (h ^ *p) * 1099511628211ull;
  h |= 1; /* 0 marks a free slot */
  for (size_t i = 0; i < 64; i++)
    if (atomic_load(&seen[i]) == h) return;
  atomic_store(&seen[atomic_fetch_add(&next, 1u) % 64u], h);
  /* names from a link target or a directory are not escaped: keep the log to one line */
  char line[2048];
  snprintf(line, sizeof line, "%s", msg);
  for (char *p = line; *p; p++)
    if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
  cairn_env_log(NULL, CAIRN_LOG_WARN, "%s", line);
}

/* Warns that entry `what` of state file `file` is ignored, and why. */
static void warn_ignored(const char *file, const char *what, const char *entry, const char *why,
                         const char *instead) {
  cairn__sbuf b = {0};
  cairn__sb_puts(&b, "checkpoint state '");
  cairn__sb_puts(&b, file);
  cairn__sb_puts(&b, "': ignoring ");
  cairn__sb_puts(&b, what);
  cairn__sb_puts(&b, " ");
  cairn__state_put_escaped(&b, entry);
  cairn__sb_puts(&b, ": ");
  cairn__sb_puts(&b, why);
  cairn__sb_puts(&b, "; a state file may only name files in its own directory");
  if (instead) {
    cairn__sb_puts(&b, " (using ");
    cairn__state_put_escaped(&b, instead);
    cairn__sb_puts(&b, ", the newest listed one, instead)");
  }
  if (!b.oom) cairn__warn_once(b.p);
  free(b.p);
}

/* Moves the entries of st that name no file of dir to st->ignored, with a
 * warning each; an ignored model path gives way to the newest listed entry
 * that remains. 0 on allocation failure; *no_model = 1 when none remains. */
static int confine(cairn_checkpoint_state *st, const char *dir, const char *file, int *no_model) {
  *no_model = 0;
  char *rdir = realpath(dir, NULL);
  size_t k = 0;
  int ok = 1;
  char why[800];
  st->ignored = malloc((st->n + 1) * sizeof *st->ignored);
  if (!st->ignored) {
    free(rdir);
    return 0;
  }
  for (size_t i = 0; i < st->n; i++) {
    if (cairn__names_file_in_dir(dir, rdir, st->paths[i], why, sizeof why)) {
      st->paths[k++] = st->paths[i];
      continue;
    }
    warn_ignored(file, "all_model_checkpoint_paths", st->paths[i], why, NULL);
    st->ignored[st->n_ignored++] = st->paths[i];
  }
  st->n = k;
  if (!cairn__names_file_in_dir(dir, rdir, st->model, why, sizeof why)) {
    const char *instead = st->n ? st->paths[st->n - 1] : NULL;
    warn_ignored(file, "model_checkpoint_path", st->model, why, instead);
    st->ignored[st->n_ignored++] = st->model;
    st->model = instead ? cairn__strdup(instead) : NULL;
    if (instead && !st->model) ok = 0;
    if (!instead) *no_model = 1;
  }
  free(rdir);
  return ok;
}

/* The text of "<dir>/checkpoint" into *text (malloc'd, n bytes and a NUL
 * spare), opened in the directory dd (NULL: opened here). */
static cairn_status read_text(const char *fn, const cairn__dir *dd, const char *dir, const char *file, char **text,
                              size_t *n_out) {
  *text = NULL;
  /* Named by the directory, so opened in it: a FIFO is refused at once
     (a blocking open would wait for a writer forever), and so is a link
     that leads out of the directory. */
  cairn__dir own;
  char why[800];
  struct stat sb;
  int fd = -1;
  if (!dd && cairn__dir_open(dir, &own) != 0) {
    snprintf(why, sizeof why, "%s", strerror(errno));
  } else {
    fd = cairn__open_read(dd ? dd : &own, file, &sb, why, sizeof why);
    if (!dd) cairn__dir_close(&own);
  }
  if (fd < 0) {
    int e = errno;
    return cairn__fail(e == ENOENT || e == ENOTDIR ? CAIRN_E_NOT_FOUND : CAIRN_E_IO, "%s: cannot open '%s': %s", fn,
                       file, why);
  }
  if ((uint64_t)sb.st_size > STATE_MAX_BYTES) {
    close(fd);
    return cairn__fail(CAIRN_E_LIMIT, "%s: '%s' is %lld bytes, more than the %u allowed for a state file", fn, file,
                       (long long)sb.st_size, STATE_MAX_BYTES);
  }
  size_t cap = (size_t)sb.st_size + 1, n = 0;
  char *t = malloc(cap);
  if (!t) {
    close(fd);
    return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  }
  cairn_status s = CAIRN_OK;
  for (;;) {
    ssize_t r = read(fd, t + n, cap - n);
    if (r < 0) {
      if (errno == EINTR) continue;
      s = cairn__fail(CAIRN_E_IO, "%s: reading '%s': %s", fn, file, strerror(errno));
      break;
    }
    if (r == 0) break;
    n += (size_t)r;
    if (n == cap) { /* the file grew while we read it: refuse rather than chase it */
      s = cairn__fail(CAIRN_E_FORMAT, "%s: '%s' changed while it was read", fn, file);
      break;
    }
  }
  close(fd);
  if (s) {
    free(t);
    return s;
  }
  *text = t;
  *n_out = n;
  return CAIRN_OK;
}

/* Parses text[0..n) into st and applies the directory's rules (a model
 * path, no empty path, the confinement of entries, paths joined onto
 * dir). */
static cairn_status parse_text(const char *fn, const char *dir, const char *file, const char *text, size_t n,
                               cairn_checkpoint_state *st) {
  if (memchr(text, '\0', n))
    return cairn__fail(CAIRN_E_FORMAT, "%s: '%s' is not a text file (contains NUL bytes)", fn, file);
  parser ps = {text, text + n, 1, NULL};
  if (!parse_state(&ps, st))
    return cairn__fail(strcmp(ps.err, "out of memory") == 0 ? CAIRN_E_NOMEM : CAIRN_E_FORMAT,
                       "%s: '%s' line %d: %s", fn, file, ps.line, ps.err);
  if (!st->model || !st->model[0])
    return cairn__fail(CAIRN_E_FORMAT, "%s: invalid checkpoint state loaded from '%s': no model_checkpoint_path",
                       fn, dir);
  for (size_t i = 0; i < st->n; i++)
    if (!st->paths[i][0])
      return cairn__fail(CAIRN_E_FORMAT, "%s: invalid checkpoint state loaded from '%s': empty path", fn, dir);
  int no_model = 0;
  if (!confine(st, dir, file, &no_model)) return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  if (no_model)
    return cairn__fail(CAIRN_E_FORMAT, "%s: invalid checkpoint state loaded from '%s': none of its %zu paths names a "
                       "file in the directory", fn, dir, st->n_ignored);
  st->model = complete_path(dir, st->model);
  int oom = !st->model;
  for (size_t i = 0; i < st->n; i++) {
    st->paths[i] = complete_path(dir, st->paths[i]);
    oom |= !st->paths[i];
  }
  if (oom) return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  return CAIRN_OK;
}

cairn_status cairn__checkpoint_state_read_in(const cairn__dir *dd, const char *dir, cairn_checkpoint_state **out) {
  static const char fn[] = "checkpoint_state_read";
  if (out) *out = NULL;
  if (!dir) return cairn__fail(CAIRN_E_NULL, "%s: dir is NULL", fn);
  if (!out) return cairn__fail(CAIRN_E_NULL, "%s: out is NULL", fn);
  if (!dir[0]) dir = ".";
  char *file = cairn__path_join(dir, CAIRN__STATE_NAME);
  if (!file) return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  char *text = NULL;
  size_t n = 0;
  cairn_checkpoint_state *st = NULL;
  cairn_status s = read_text(fn, dd, dir, file, &text, &n);
  if (s == CAIRN_OK && !(st = calloc(1, sizeof *st))) s = cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  if (s == CAIRN_OK) s = parse_text(fn, dir, file, text, n, st);
  if (s == CAIRN_OK) {
    *out = st;
    st = NULL;
  }
  cairn_checkpoint_state_free(st); /* NULL holes complete_path may leave are fine */
  free(text);
  free(file);
  return s;
}

/* The path form: the directory is opened for this one read. */
cairn_status cairn_checkpoint_state_read(const char *dir, cairn_checkpoint_state **out) {
  return cairn__checkpoint_state_read_in(NULL, dir, out);
}
