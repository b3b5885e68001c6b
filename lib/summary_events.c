/* TensorBoard event files: TFRecord framing over hand-encoded Event
 * protobufs (format summary in cairn/summary.h). Reference writers: tensorflow core/util/events_writer.cc
 * (file name), tensorboard summary/writer/record_writer.py (framing). */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"
#include "checkpoint_dir_impl.h" /* cairn__dir_guard: the log directory's identity */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cairn/ckpt.h"
#include "cairn/summary.h"
#include "table.h"

#define FILE_VERSION "brain.Event:2"

struct cairn_event_writer {
  char *path;           /* NULL: inert (non-chief) writer */
  int fd;               /* -1 once closed */
  int closed;
  unsigned char *buf;   /* framed records not yet written */
  size_t len, cap;
  size_t max_buffer;
  off_t good_size;      /* bytes of whole records in the file */
  double flush_secs;
  double last_flush;    /* env clock */
  double (*wall_clock)(void *ctx);
  void *wall_clock_ctx;
  const cairn_env *env;
  cairn__dir_guard logdir; /* the directory the file was created in */
};

cairn_event_writer_options cairn_event_writer_options_default(void) {
  return (cairn_event_writer_options){.is_chief = 1, .flush_secs = 120.0, .max_buffer_bytes = 65536};
}

static double real_wall_clock(void *ctx) {
  (void)ctx;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- protobuf encoding (proto3 wire format) ------------------------------------- */

/* A growable byte string; ok is 0 after an allocation failure. */
typedef struct bytes {
  unsigned char *p;
  size_t len, cap;
  int ok;
} bytes;

static void b_put(bytes *b, const void *data, size_t n) {
  if (!b->ok) return;
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + n) cap *= 2;
    unsigned char *p = realloc(b->p, cap);
    if (!p) {
      b->ok = 0;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
  if (n) memcpy(b->p + b->len, data, n);
  b->len += n;
}

static void b_varint(bytes *b, uint64_t v) {
  unsigned char tmp[10];
  size_t n = 0;
  do {
    unsigned char c = v & 0x7f;
    v >>= 7;
    tmp[n++] = (unsigned char)(c | (v ? 0x80 : 0));
  } while (v);
  b_put(b, tmp, n);
}

static void b_key(bytes *b, unsigned field, unsigned wire) { b_varint(b, ((uint64_t)field << 3) | wire); }

static void b_le(bytes *b, uint64_t v, size_t n) {
  unsigned char tmp[8];
  for (size_t i = 0; i < n; i++) tmp[i] = (unsigned char)(v >> (8 * i));
  b_put(b, tmp, n);
}

static void b_double(bytes *b, unsigned field, double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  b_key(b, field, 1);
  b_le(b, u, 8);
}

static void b_float(bytes *b, unsigned field, float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  b_key(b, field, 5);
  b_le(b, u, 4);
}

static void b_lendelim(bytes *b, unsigned field, const void *data, size_t n) {
  b_key(b, field, 2);
  b_varint(b, n);
  b_put(b, data, n);
}

/* Event header: wall_time (always written, as TF does) and step (omitted
   when 0: proto3 default). int64 negative steps are 10-byte varints. */
static void event_head(bytes *b, double wall_time, int64_t step) {
  b_double(b, 1, wall_time);
  if (step != 0) {
    b_key(b, 2, 0);
    b_varint(b, (uint64_t)step);
  }
}

/* ---- TFRecord framing --------------------------------------------------------------- */

static uint32_t masked_crc(const void *data, size_t n) {
  uint32_t crc = cairn_crc32c(0, data, n);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

static cairn_status fail_file(const cairn_event_writer *w, cairn_status s, const char *what, int err) {
  return cairn__fail(s, "event file '%s': %s: %s", w->path, what, strerror(err));
}

/* Writes the buffer; on failure truncates the file to its whole records.
 * Into the directory the file was created in only: once that directory
 * is removed (or replaced), writing on through the open descriptor would
 * lose every event silently, and making the directory again would put
 * it behind the back of the checkpoint directory's lock (the log
 * directory is the checkpoint directory by default). */
static cairn_status write_buffer(cairn_event_writer *w) {
  const char *how = cairn__dir_guard_changed(&w->logdir);
  if (how) {
    size_t dropped = w->len;
    w->len = 0;
    return cairn__fail(CAIRN_E_NOT_FOUND,
                       "event file '%s': its log directory '%s' was %s while training: not re-creating it; the "
                       "%zu bytes of events not yet written are dropped",
                       w->path, w->logdir.dir, how, dropped);
  }
  size_t off = 0;
  while (off < w->len) {
    ssize_t n = write(w->fd, w->buf + off, w->len - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = n < 0 ? errno : EIO;
      if (ftruncate(w->fd, w->good_size) != 0) { /* best effort: the error below is the news */
      }
      w->len = 0;
      return fail_file(w, e == ENOSPC || e == EDQUOT ? CAIRN_E_NOSPC : CAIRN_E_IO,
                       "write (buffered records dropped)", e);
    }
    off += (size_t)n;
  }
  w->good_size += (off_t)w->len;
  w->len = 0;
  return CAIRN_OK;
}

static cairn_status do_flush(cairn_event_writer *w) {
  w->last_flush = cairn_env_now(w->env);
  if (!w->len) return CAIRN_OK;
  return write_buffer(w);
}

/* Frames the event bytes as one record into the buffer, then writes the
   buffer if it is full or the timer is due. */
static cairn_status add_record(cairn_event_writer *w, const char *fn, bytes *ev) {
  if (!ev->ok) {
    free(ev->p);
    return cairn__fail(CAIRN_E_NOMEM, "event_writer_%s: out of memory", fn);
  }
  size_t need = w->len + ev->len + 16;
  if (need > w->cap) {
    size_t cap = w->cap ? w->cap : 4096;
    while (cap < need) cap *= 2;
    unsigned char *p = realloc(w->buf, cap);
    if (!p) {
      free(ev->p);
      return cairn__fail(CAIRN_E_NOMEM, "event_writer_%s: out of memory", fn);
    }
    w->buf = p;
    w->cap = cap;
  }
  unsigned char *r = w->buf + w->len;
  uint64_t n = ev->len;
  for (int i = 0; i < 8; i++) r[i] = (unsigned char)(n >> (8 * i));
  uint32_t c = masked_crc(r, 8);
  for (int i = 0; i < 4; i++) r[8 + i] = (unsigned char)(c >> (8 * i));
  memcpy(r + 12, ev->p, ev->len);
  c = masked_crc(ev->p, ev->len);
  for (int i = 0; i < 4; i++) r[12 + ev->len + (size_t)i] = (unsigned char)(c >> (8 * i));
  w->len += ev->len + 16;
  free(ev->p);
  if (w->len > w->max_buffer) return write_buffer(w);
  if (w->flush_secs > 0 && cairn_env_now(w->env) - w->last_flush >= w->flush_secs) return do_flush(w);
  return CAIRN_OK;
}

static cairn_status check_open(const cairn_event_writer *w, const char *fn) {
  if (!w) return cairn__fail(CAIRN_E_NULL, "event_writer_%s: writer is NULL", fn);
  if (w->closed) return cairn__fail(CAIRN_E_STATE, "event file '%s': %s after close", w->path ? w->path : "(inert)", fn);
  return CAIRN_OK;
}

/* ---- creation ----------------------------------------------------------------------- */

/* mkdir -p; 0 or -1 with errno. */
static int make_dirs(char *path) {
  struct stat st;
  if (stat(path, &st) == 0) {
    if (S_ISDIR(st.st_mode)) return 0;
    errno = ENOTDIR;
    return -1;
  }
  for (char *p = path + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    int rc = mkdir(path, 0777);
    int e = errno;
    *p = '/';
    if (rc != 0 && e != EEXIST) {
      errno = e;
      return -1;
    }
  }
  if (mkdir(path, 0777) != 0 && errno != EEXIST) return -1;
  if (stat(path, &st) != 0) return -1;
  if (!S_ISDIR(st.st_mode)) {
    errno = ENOTDIR;
    return -1;
  }
  return 0;
}

static cairn_status create_file(cairn_event_writer *w, const char *logdir, const char *suffix, double wall) {
  char host[256];
  if (gethostname(host, sizeof host) != 0 || !host[0]) snprintf(host, sizeof host, "localhost");
  host[sizeof host - 1] = '\0';
  for (char *c = host; *c; c++)
    if (*c == '/') *c = '_';
  long long secs = (long long)wall;
  size_t dl = strlen(logdir);
  size_t len = dl + strlen(host) + strlen(suffix) + 96;
  char *path = malloc(len);
  if (!path) return cairn__fail(CAIRN_E_NOMEM, "event_writer_new: out of memory");
  const char *sep = dl && logdir[dl - 1] == '/' ? "" : "/";
  for (unsigned n = 0;; n++) {
    char count[16] = "";
    if (n) snprintf(count, sizeof count, ".%u", n);
    snprintf(path, len, "%s%sevents.out.tfevents.%010lld.%s.%ld%s%s", logdir, sep, secs, host, (long)getpid(),
             count, suffix);
    w->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0666);
    if (w->fd >= 0) break;
    if (errno != EEXIST || n >= 1000) {
      int e = errno;
      cairn_status s = cairn__fail(e == ENOSPC || e == EDQUOT ? CAIRN_E_NOSPC : CAIRN_E_IO,
                                   "event file '%s': cannot create: %s", path, strerror(e));
      free(path);
      return s;
    }
  }
  w->path = path;
  return CAIRN_OK;
}

cairn_status cairn_event_writer_new(const char *logdir, const cairn_event_writer_options *o,
                                    cairn_event_writer **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "event_writer_new: out is NULL");
  *out = NULL;
  if (!logdir) return cairn__fail(CAIRN_E_NULL, "event_writer_new: logdir is NULL");
  if (!logdir[0]) return cairn__fail(CAIRN_E_INVALID, "event_writer_new: logdir is empty");
  cairn_event_writer_options d = cairn_event_writer_options_default();
  if (!o) o = &d;
  if (cairn__env_check(o->env, "event_writer_new") != CAIRN_OK) return CAIRN_E_INVALID;
  cairn_event_writer *w = calloc(1, sizeof *w);
  if (!w) return cairn__fail(CAIRN_E_NOMEM, "event_writer_new: out of memory");
  w->fd = -1;
  w->flush_secs = o->flush_secs;
  w->max_buffer = o->max_buffer_bytes;
  w->wall_clock = o->wall_clock ? o->wall_clock : real_wall_clock;
  w->wall_clock_ctx = o->wall_clock_ctx;
  w->env = o->env;
  w->logdir.fd = -1;
  w->last_flush = cairn_env_now(w->env);
  if (!o->is_chief) {
    *out = w;
    return CAIRN_OK;
  }
  char *dir = cairn__strdup(logdir);
  if (!dir) {
    free(w);
    return cairn__fail(CAIRN_E_NOMEM, "event_writer_new: out of memory");
  }
  if (make_dirs(dir) != 0) {
    int e = errno;
    free(dir);
    free(w);
    return cairn__fail(CAIRN_E_IO, "event writer: cannot create log directory '%s': %s", logdir, strerror(e));
  }
  free(dir);
  /* mkdir -p once, here; from now on the directory is this one. */
  cairn_status st = cairn__dir_guard_init(&w->logdir, "event_writer_new", logdir);
  if (st != CAIRN_OK) {
    free(w);
    return st;
  }
  double wall = w->wall_clock(w->wall_clock_ctx);
  st = create_file(w, logdir, o->filename_suffix ? o->filename_suffix : "", wall);
  if (st != CAIRN_OK) {
    cairn__dir_guard_clear(&w->logdir);
    free(w);
    return st;
  }
  /* The first record says which format follows (TF writes it at once). */
  bytes ev = {NULL, 0, 0, 1};
  event_head(&ev, wall, 0);
  b_lendelim(&ev, 3, FILE_VERSION, strlen(FILE_VERSION));
  if ((st = add_record(w, "new", &ev)) == CAIRN_OK) st = do_flush(w);
  if (st != CAIRN_OK) {
    close(w->fd);
    unlink(w->path);
    free(w->path);
    free(w->buf);
    cairn__dir_guard_clear(&w->logdir);
    free(w);
    return st;
  }
  *out = w;
  return CAIRN_OK;
}

const char *cairn_event_writer_path(const cairn_event_writer *w) { return w ? w->path : NULL; }

cairn_status cairn_event_writer_add_scalar(cairn_event_writer *w, const char *tag, double value, int64_t step) {
  cairn_status st = check_open(w, "add_scalar");
  if (st != CAIRN_OK) return st;
  if (!tag) return cairn__fail(CAIRN_E_NULL, "event_writer_add_scalar: tag is NULL");
  if (!tag[0]) return cairn__fail(CAIRN_E_INVALID, "event_writer_add_scalar: tag is empty");
  if (!w->path) return CAIRN_OK;
  /* Summary.Value{tag = 1, simple_value = 2 (float)} inside Summary.value = 1. */
  bytes val = {NULL, 0, 0, 1}, sum = {NULL, 0, 0, 1}, ev = {NULL, 0, 0, 1};
  b_lendelim(&val, 1, tag, strlen(tag));
  b_float(&val, 2, (float)value);
  b_lendelim(&sum, 1, val.p, val.len);
  event_head(&ev, w->wall_clock(w->wall_clock_ctx), step);
  b_lendelim(&ev, 5, sum.p, sum.len);
  if (!val.ok || !sum.ok) ev.ok = 0;
  free(val.p);
  free(sum.p);
  return add_record(w, "add_scalar", &ev);
}

cairn_status cairn_event_writer_add_session_log(cairn_event_writer *w, cairn_session_log_status status,
                                                const char *checkpoint_path, int64_t step) {
  cairn_status st = check_open(w, "add_session_log");
  if (st != CAIRN_OK) return st;
  if (status != CAIRN_SESSION_LOG_START && status != CAIRN_SESSION_LOG_STOP &&
      status != CAIRN_SESSION_LOG_CHECKPOINT)
    return cairn__fail(CAIRN_E_INVALID, "event_writer_add_session_log: unknown status %d", (int)status);
  if (!w->path) return CAIRN_OK;
  bytes log = {NULL, 0, 0, 1}, ev = {NULL, 0, 0, 1};
  b_key(&log, 1, 0);
  b_varint(&log, (uint64_t)status);
  if (checkpoint_path && checkpoint_path[0]) b_lendelim(&log, 2, checkpoint_path, strlen(checkpoint_path));
  event_head(&ev, w->wall_clock(w->wall_clock_ctx), step);
  b_lendelim(&ev, 7, log.p, log.len);
  if (!log.ok) ev.ok = 0;
  free(log.p);
  return add_record(w, "add_session_log", &ev);
}

cairn_status cairn_event_writer_flush(cairn_event_writer *w) {
  cairn_status st = check_open(w, "flush");
  if (st != CAIRN_OK) return st;
  if (!w->path) return CAIRN_OK;
  return do_flush(w);
}

cairn_status cairn_event_writer_close(cairn_event_writer *w) {
  if (!w) return cairn__fail(CAIRN_E_NULL, "event_writer_close: writer is NULL");
  if (w->closed) return CAIRN_OK;
  w->closed = 1;
  if (!w->path) return CAIRN_OK;
  cairn_status st = do_flush(w);
  if (close(w->fd) != 0 && st == CAIRN_OK) st = fail_file(w, CAIRN_E_IO, "close", errno);
  w->fd = -1;
  return st;
}

void cairn_event_writer_free(cairn_event_writer *w) {
  if (!w) return;
  if (!w->closed && cairn_event_writer_close(w) != CAIRN_OK)
    cairn_env_log(w->env, CAIRN_LOG_ERROR, "%s", cairn_errmsg());
  free(w->path);
  free(w->buf);
  cairn__dir_guard_clear(&w->logdir);
  free(w);
}

/* ---- cairn_summary_writer table ----------------------------------------------------- */

static cairn_status table_scalar(void *self, const char *tag, double value, int64_t step) {
  return cairn_event_writer_add_scalar(self, tag, value, step);
}

static cairn_status table_session_log(void *self, cairn_session_log_status status, const char *checkpoint_path,
                                      int64_t step) {
  return cairn_event_writer_add_session_log(self, status, checkpoint_path, step);
}

static cairn_status table_flush(void *self) { return cairn_event_writer_flush(self); }

cairn_summary_writer cairn_event_writer_summary_writer(cairn_event_writer *w) {
  cairn_summary_writer t = {.scalar = table_scalar,
                           .session_log = table_session_log,
                           .flush = table_flush,
                           .self = w,
                           .struct_size = CAIRN_SUMMARY_WRITER_SIZE};
  return t;
}
