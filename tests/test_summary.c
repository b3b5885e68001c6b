/* cairn/summary.h: TensorBoard event files and the progress hook.
 *
 * The event files are checked against a byte-exact vector (below: a
 * file_version event and a scalar "loss" 0.5 at step 1, wall time
 * 1700000000, computed with a bitwise CRC-32C that reproduces the standard
 * check value crc32c("123456789") = 0xE3069283) and read back by a small
 * TFRecord reader and protobuf decoder written here (independent of the
 * writer's encoder): framing, both masked CRCs, every field, a torn last record
 * tolerated as TensorBoard does. TensorBoard itself is not used (it is not
 * installed where make check runs); the vector is the regression fixture.
 * The progress hook runs on the fake clock of cairn_env.
 */
#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <criterion/criterion.h>
#include "rm_tree.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cairn/ckpt.h"
#include "cairn/monitored.h"
#include "cairn/session.h"
#include "cairn/summary.h"
#include "cairn/var.h"
#include "internal.h"
#include "monitored_impl.h"

#define OK(expr) cr_assert_eq((expr), CAIRN_OK, "%s: %s", #expr, cairn_errmsg())
#define HAS(hay, needle) cr_assert_not_null(strstr((hay), (needle)), "'%s' lacks '%s'", (hay), (needle))

/* ==== fixtures ==================================================================== */

static char g_dir[256];

static struct {
  double now;
  char log[16384];
} F;

static double f_now(void *ctx) {
  (void)ctx;
  return F.now;
}
static void f_sleep(void *ctx, double secs) {
  (void)ctx;
  F.now += secs;
}
static void f_log(void *ctx, cairn_log_level level, const char *msg) {
  (void)ctx;
  (void)level;
  size_t used = strlen(F.log);
  if (used < sizeof F.log - 1) snprintf(F.log + used, sizeof F.log - used, "%s\n", msg);
}
static const cairn_env ENV = {.now = f_now, .sleep = f_sleep, .log = f_log, .min_level = CAIRN_LOG_DEBUG};

/* The events' wall clock: a fixed time unless a test moves it. */
static double g_wall = 1700000000.0;
static double fixed_wall(void *ctx) {
  (void)ctx;
  return g_wall;
}

static void setup(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(g_dir, sizeof g_dir, "%s/cairn-summary-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  cr_assert_not_null(mkdtemp(g_dir), "mkdtemp: %s", strerror(errno));
  F.now = 1000.0;
  F.log[0] = '\0';
  g_wall = 1700000000.0;
}

static void teardown(void) {
  if (g_dir[0]) rm_tree(g_dir);
}

TestSuite(event_writer, .init = setup, .fini = teardown, .timeout = 30);
TestSuite(event_reader, .init = setup, .fini = teardown, .timeout = 30);
TestSuite(event_hooks, .init = setup, .fini = teardown, .timeout = 30);
TestSuite(progress_hook, .init = setup, .fini = teardown, .timeout = 30);

static cairn_event_writer_options opts(void) {
  cairn_event_writer_options o = cairn_event_writer_options_default();
  o.wall_clock = fixed_wall;
  o.env = &ENV;
  return o;
}

static unsigned char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "open %s: %s", path, strerror(errno));
  size_t cap = 1 << 16, n = 0;
  unsigned char *p = malloc(cap);
  cr_assert_not_null(p);
  size_t k;
  while ((k = fread(p + n, 1, cap - n, f)) > 0) {
    n += k;
    if (n == cap) {
      cap *= 2;
      p = realloc(p, cap);
      cr_assert_not_null(p);
    }
  }
  fclose(f);
  *len = n;
  return p;
}

static off_t file_size(const char *path) {
  struct stat sb;
  cr_assert_eq(stat(path, &sb), 0, "stat %s: %s", path, strerror(errno));
  return sb.st_size;
}

static int count_files(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL)
    if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) n++;
  closedir(d);
  return n;
}

/* ==== the reader: TFRecord framing and the Event protobuf =========================== */

static uint32_t unmask(uint32_t m) {
  uint32_t r = m - 0xa282ead8u;
  return (r >> 17) | (r << 15);
}

static uint64_t le(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

typedef struct event {
  double wall_time;
  int64_t step;
  int what;             /* the oneof's field number: 3 file_version, 5 summary, 7 session_log */
  char text[512];       /* file_version, the (first) value's tag, or the checkpoint path */
  int n_values;
  float simple_value;
  int status;
} event;

typedef struct read_result {
  int n;         /* whole, valid records */
  int torn;      /* the file ends inside a record (ignored, as TensorBoard does) */
  int corrupt;   /* a CRC mismatch or a malformed event: reading stopped there */
  size_t consumed;
} read_result;

static int pb_varint(const unsigned char **p, const unsigned char *end, uint64_t *v) {
  *v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*p >= end) return 0;
    unsigned char c = *(*p)++;
    *v |= (uint64_t)(c & 0x7f) << shift;
    if (!(c & 0x80)) return 1;
  }
  return 0;
}

/* Calls fn(field, wire, varint, bytes, len) per field; 0 if malformed. */
typedef int (*pb_field_fn)(void *ctx, unsigned field, unsigned wire, uint64_t v, const unsigned char *b, size_t n);

static int pb_walk(const unsigned char *p, size_t len, pb_field_fn fn, void *ctx) {
  const unsigned char *end = p + len;
  while (p < end) {
    uint64_t key, v = 0;
    if (!pb_varint(&p, end, &key)) return 0;
    unsigned field = (unsigned)(key >> 3), wire = (unsigned)(key & 7);
    const unsigned char *b = NULL;
    size_t n = 0;
    switch (wire) {
      case 0:
        if (!pb_varint(&p, end, &v)) return 0;
        break;
      case 1:
        if (end - p < 8) return 0;
        v = le(p, 8);
        p += 8;
        break;
      case 5:
        if (end - p < 4) return 0;
        v = le(p, 4);
        p += 4;
        break;
      case 2:
        if (!pb_varint(&p, end, &v) || v > (uint64_t)(end - p)) return 0;
        b = p;
        n = (size_t)v;
        p += n;
        break;
      default: return 0;
    }
    if (!fn(ctx, field, wire, v, b, n)) return 0;
  }
  return 1;
}

static void copy_text(char *dst, const unsigned char *b, size_t n) {
  if (n > 511) n = 511;
  memcpy(dst, b, n);
  dst[n] = '\0';
}

static int value_field(void *ctx, unsigned field, unsigned wire, uint64_t v, const unsigned char *b, size_t n) {
  event *e = ctx;
  if (field == 1 && wire == 2) {
    if (e->n_values == 1) copy_text(e->text, b, n);
  } else if (field == 2 && wire == 5) {
    uint32_t u = (uint32_t)v;
    if (e->n_values == 1) memcpy(&e->simple_value, &u, 4);
  } else {
    return 0; /* the writer emits nothing else */
  }
  return 1;
}

static int summary_field(void *ctx, unsigned field, unsigned wire, uint64_t v, const unsigned char *b, size_t n) {
  (void)v;
  event *e = ctx;
  if (field != 1 || wire != 2) return 0;
  e->n_values++;
  return pb_walk(b, n, value_field, e);
}

static int log_field(void *ctx, unsigned field, unsigned wire, uint64_t v, const unsigned char *b, size_t n) {
  event *e = ctx;
  if (field == 1 && wire == 0)
    e->status = (int)v;
  else if (field == 2 && wire == 2)
    copy_text(e->text, b, n);
  else
    return 0;
  return 1;
}

static int event_field(void *ctx, unsigned field, unsigned wire, uint64_t v, const unsigned char *b, size_t n) {
  event *e = ctx;
  switch (field) {
    case 1:
      if (wire != 1) return 0;
      memcpy(&e->wall_time, &v, 8);
      return 1;
    case 2:
      if (wire != 0) return 0;
      e->step = (int64_t)v;
      return 1;
    case 3:
      if (wire != 2) return 0;
      e->what = 3;
      copy_text(e->text, b, n);
      return 1;
    case 5:
      if (wire != 2) return 0;
      e->what = 5;
      return pb_walk(b, n, summary_field, e);
    case 7:
      if (wire != 2) return 0;
      e->what = 7;
      return pb_walk(b, n, log_field, e);
    default: return 0;
  }
}

/* Reads records as TensorBoard's loader does: whole records in order; an
 * incomplete record at the end is not an error (a writer may still be
 * appending, or crashed mid-write); a CRC mismatch stops reading. */
static read_result read_events(const unsigned char *p, size_t len, event *out, int max) {
  read_result r = {0, 0, 0, 0};
  size_t off = 0;
  while (off < len) {
    if (len - off < 12) {
      r.torn = 1;
      break;
    }
    uint64_t n = le(p + off, 8);
    if (unmask((uint32_t)le(p + off + 8, 4)) != cairn_crc32c(0, p + off, 8)) {
      r.corrupt = 1;
      break;
    }
    if (n > len - off - 12 || len - off - 12 - n < 4) {
      r.torn = 1;
      break;
    }
    const unsigned char *data = p + off + 12;
    if (unmask((uint32_t)le(data + n, 4)) != cairn_crc32c(0, data, (size_t)n)) {
      r.corrupt = 1;
      break;
    }
    cr_assert_lt(r.n, max);
    event *e = &out[r.n];
    memset(e, 0, sizeof *e);
    if (!pb_walk(data, (size_t)n, event_field, e)) {
      r.corrupt = 1;
      break;
    }
    r.n++;
    off += 12 + (size_t)n + 4;
  }
  r.consumed = off;
  return r;
}

static read_result read_file_events(const char *path, event *out, int max) {
  size_t len;
  unsigned char *p = slurp(path, &len);
  read_result r = read_events(p, len, out, max);
  free(p);
  return r;
}

/* ==== the byte-exact vector =========================================== */

static const unsigned char VECTOR[] = {
    /* record 1: file_version */
    0x18, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xa3, 0x7f, 0x4b, 0x22,                         /* len, crc */
    0x09, 0x00, 0x00, 0x00, 0x40, 0xfc, 0x54, 0xd9, 0x41, 0x1a, 0x0d, 0x62, 0x72, 0x61, 0x69, 0x6e, /* event */
    0x2e, 0x45, 0x76, 0x65, 0x6e, 0x74, 0x3a, 0x32,                                                 /* */
    0xec, 0xed, 0x8f, 0x9d,                                                                         /* crc */
    /* record 2: scalar "loss" 0.5 at step 1 */
    0x1a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x12, 0x9b, 0xd8, 0x2d,                         /* len, crc */
    0x09, 0x00, 0x00, 0x00, 0x40, 0xfc, 0x54, 0xd9, 0x41, 0x10, 0x01, 0x2a, 0x0d, 0x0a, 0x0b, 0x0a, /* event */
    0x04, 0x6c, 0x6f, 0x73, 0x73, 0x15, 0x00, 0x00, 0x00, 0x3f,                                     /* */
    0x8d, 0xb0, 0x2e, 0x39,                                                                         /* crc */
};

Test(event_writer, reproduces_the_ecosystem_notes_vector) {
  cairn_event_writer_options o = opts();
  cairn_event_writer *w;
  OK(cairn_event_writer_new(g_dir, &o, &w));
  OK(cairn_event_writer_add_scalar(w, "loss", 0.5, 1));
  OK(cairn_event_writer_close(w));
  size_t len;
  unsigned char *p = slurp(cairn_event_writer_path(w), &len);
  cr_assert_eq(len, sizeof VECTOR, "file is %zu bytes, the vector %zu", len, sizeof VECTOR);
  for (size_t i = 0; i < len; i++)
    cr_assert_eq(p[i], VECTOR[i], "byte %zu: 0x%02x, the vector has 0x%02x", i, p[i], VECTOR[i]);
  free(p);
  cairn_event_writer_free(w);
}

Test(event_reader, reads_the_vector) {
  event ev[4];
  read_result r = read_events(VECTOR, sizeof VECTOR, ev, 4);
  cr_assert_eq(r.n, 2);
  cr_assert_not(r.torn || r.corrupt);
  cr_assert_eq(ev[0].what, 3);
  cr_assert_str_eq(ev[0].text, "brain.Event:2");
  cr_assert_eq(ev[0].step, 0);
  cr_assert_eq(ev[0].wall_time, 1700000000.0);
  cr_assert_eq(ev[1].what, 5);
  cr_assert_str_eq(ev[1].text, "loss");
  cr_assert_eq(ev[1].simple_value, 0.5f);
  cr_assert_eq(ev[1].step, 1);
}

/* ==== the writer ========================================================================= */

Test(event_writer, file_name) {
  cairn_event_writer_options o = opts();
  cairn_event_writer *w, *w2, *w3;
  OK(cairn_event_writer_new(g_dir, &o, &w));
  OK(cairn_event_writer_new(g_dir, &o, &w2));
  o.filename_suffix = ".v2";
  OK(cairn_event_writer_new(g_dir, &o, &w3));
  char host[256];
  cr_assert_eq(gethostname(host, sizeof host), 0);
  host[255] = '\0';
  char want[1024];
  snprintf(want, sizeof want, "%s/events.out.tfevents.1700000000.%s.%ld", g_dir, host, (long)getpid());
  cr_assert_str_eq(cairn_event_writer_path(w), want);
  snprintf(want, sizeof want, "%s/events.out.tfevents.1700000000.%s.%ld.1", g_dir, host, (long)getpid());
  cr_assert_str_eq(cairn_event_writer_path(w2), want, "a second writer in the same second gets its own file");
  snprintf(want, sizeof want, "%s/events.out.tfevents.1700000000.%s.%ld.v2", g_dir, host, (long)getpid());
  cr_assert_str_eq(cairn_event_writer_path(w3), want, "a suffix makes another name");
  /* Ten digits also for small times (TF's %010lld). */
  g_wall = 12345.0;
  cairn_event_writer *w4;
  o.filename_suffix = NULL;
  OK(cairn_event_writer_new(g_dir, &o, &w4));
  HAS(cairn_event_writer_path(w4), "/events.out.tfevents.0000012345.");
  cairn_event_writer_free(w);
  cairn_event_writer_free(w2);
  cairn_event_writer_free(w3);
  cairn_event_writer_free(w4);
}

Test(event_writer, creates_missing_directories) {
  char dir[512];
  snprintf(dir, sizeof dir, "%s/a/b/c/", g_dir);
  cairn_event_writer_options o = opts();
  cairn_event_writer *w;
  OK(cairn_event_writer_new(dir, &o, &w));
  HAS(cairn_event_writer_path(w), "/a/b/c/events.out.tfevents.");
  cr_assert_null(strstr(cairn_event_writer_path(w), "//"));
  /* The file_version record is on disk at once. */
  cr_assert_eq(file_size(cairn_event_writer_path(w)), 24 + 16);
  cairn_event_writer_free(w);
}

/* Issue 24, item 2: the log directory (by default the checkpoint
 * directory) is made once, when the writer is created. Removed (rm -rf)
 * or replaced while training, the next write of the events fails naming
 * it and it is not made again (before, the events went on into the
 * removed directory's file, lost without a word). */
Test(event_writer, a_removed_or_replaced_log_directory_is_an_error_not_made_again) {
  for (int replace = 0; replace < 2; replace++) {
    char dir[400], want[900];
    snprintf(dir, sizeof dir, "%s/logs%d/run", g_dir, replace);
    cairn_event_writer_options o = opts();
    cairn_event_writer *w;
    OK(cairn_event_writer_new(dir, &o, &w));
    OK(cairn_event_writer_add_scalar(w, "loss", 1.0, 1));
    OK(cairn_event_writer_flush(w));
    rm_tree(dir);
    if (replace) cr_assert_eq(mkdir(dir, 0777), 0);
    OK(cairn_event_writer_add_scalar(w, "loss", 0.5, 2)); /* buffered */
    cr_assert_eq(cairn_event_writer_flush(w), CAIRN_E_NOT_FOUND, "%s", cairn_errmsg());
    snprintf(want, sizeof want, "event file '%s/events.out.tfevents.", dir);
    HAS(cairn_errmsg(), want);
    snprintf(want, sizeof want, "its log directory '%s' was removed while training: not re-creating it", dir);
    HAS(cairn_errmsg(), want);
    OK(cairn_event_writer_add_scalar(w, "loss", 0.25, 3));
    cr_assert_eq(cairn_event_writer_close(w), CAIRN_E_NOT_FOUND, "close flushes nothing into it either");
    cairn_event_writer_free(w);
    struct stat sb;
    if (replace) cr_assert_eq(count_files(dir), 0, "something was written into the new directory");
    else cr_assert_neq(stat(dir, &sb), 0, "'%s' was made again", dir);
  }
}

Test(event_writer, several_events_read_back) {
  cairn_event_writer_options o = opts();
  cairn_event_writer *w;
  OK(cairn_event_writer_new(g_dir, &o, &w));
  OK(cairn_event_writer_add_session_log(w, CAIRN_SESSION_LOG_START, NULL, 300));
  for (int i = 0; i < 50; i++) {
    g_wall = 1700000000.0 + 0.25 * i;
    OK(cairn_event_writer_add_scalar(w, "loss", 1.0 / (i + 1), 300 + i));
    OK(cairn_event_writer_add_scalar(w, "accuracy", 0.5 + i / 100.0, 300 + i));
  }
  OK(cairn_event_writer_add_scalar(w, "global_step/sec", 123.456, 349));
  OK(cairn_event_writer_add_scalar(w, "neg", -2.5e-7, -3));
  OK(cairn_event_writer_add_scalar(w, "big", 1e30, INT64_MAX));
  OK(cairn_event_writer_add_session_log(w, CAIRN_SESSION_LOG_CHECKPOINT, "/ckpt/model.ckpt-349", 349));
  OK(cairn_event_writer_add_session_log(w, CAIRN_SESSION_LOG_STOP, NULL, 0));
  OK(cairn_event_writer_close(w));

  static event ev[200];
  read_result r = read_file_events(cairn_event_writer_path(w), ev, 200);
  cr_assert_not(r.torn || r.corrupt);
  cr_assert_eq(r.n, 1 + 1 + 100 + 3 + 2);
  cr_assert_eq(ev[0].what, 3);
  cr_assert_str_eq(ev[0].text, "brain.Event:2");
  cr_assert_eq(ev[1].what, 7);
  cr_assert_eq(ev[1].status, 1, "START");
  cr_assert_eq(ev[1].step, 300);
  cr_assert_str_eq(ev[1].text, "");
  for (int i = 0; i < 50; i++) {
    const event *l = &ev[2 + 2 * i], *a = &ev[3 + 2 * i];
    cr_assert_eq(l->what, 5);
    cr_assert_eq(l->n_values, 1);
    cr_assert_str_eq(l->text, "loss");
    cr_assert_eq(l->simple_value, (float)(1.0 / (i + 1)));
    cr_assert_eq(l->step, 300 + i);
    cr_assert_eq(l->wall_time, 1700000000.0 + 0.25 * i);
    cr_assert_str_eq(a->text, "accuracy");
    cr_assert_eq(a->simple_value, (float)(0.5 + i / 100.0));
    cr_assert_eq(a->step, 300 + i);
  }
  cr_assert_str_eq(ev[102].text, "global_step/sec");
  cr_assert_eq(ev[102].simple_value, 123.456f);
  cr_assert_eq(ev[103].step, -3, "negative steps are 10-byte varints");
  cr_assert_eq(ev[103].simple_value, -2.5e-7f);
  cr_assert_eq(ev[104].step, INT64_MAX);
  cr_assert_eq(ev[104].simple_value, 1e30f);
  cr_assert_eq(ev[105].what, 7);
  cr_assert_eq(ev[105].status, 3, "CHECKPOINT");
  cr_assert_str_eq(ev[105].text, "/ckpt/model.ckpt-349");
  cr_assert_eq(ev[105].step, 349);
  cr_assert_eq(ev[106].status, 2, "STOP");
  cr_assert_eq(ev[106].step, 0);
  cairn_event_writer_free(w);
}

Test(event_writer, nan_and_inf_values) {
  cairn_event_writer_options o = opts();
  cairn_event_writer *w;
  OK(cairn_event_writer_new(g_dir, &o, &w));
  OK(cairn_event_writer_add_scalar(w, "nan", NAN, 1));
  OK(cairn_event_writer_add_scalar(w, "inf", -INFINITY, 2));
  OK(cairn_event_writer_close(w));
  event ev[4];
  read_result r = read_file_events(cairn_event_writer_path(w), ev, 4);
  cr_assert_eq(r.n, 3);
  cr_assert(isnan(ev[1].simple_value));
  cr_assert(isinf(ev[2].simple_value) && ev[2].simple_value < 0);
  cairn_event_writer_free(w);
}

/* A process killed mid-write leaves a torn last record: every cut inside
 * the last record yields the whole records before it, no error. */
Test(event_reader, torn_last_record_is_ignored) {
  cairn_event_writer_options o = opts();
  cairn_event_writer *w;
  OK(cairn_event_writer_new(g_dir, &o, &w));
  for (int i = 1; i <= 5; i++) OK(cairn_event_writer_add_scalar(w, "loss", 0.5 * i, i));
  OK(cairn_event_writer_close(w));
  size_t len;
  unsigned char *p = slurp(cairn_event_writer_path(w), &len);
  event ev[8];
  read_result whole = read_events(p, len, ev, 8);
  cr_assert_eq(whole.n, 6);
  size_t last = 40 + 4 * 42; /* offset of the last record: file_version 40 B, scalars 42 B */
  cr_assert_eq(len, last + 42);
  for (size_t cut = last + 1; cut < len; cut++) {
    read_result r = read_events(p, cut, ev, 8);
    cr_assert_eq(r.n, 5, "cut at %zu", cut);
    cr_assert(r.torn, "cut at %zu", cut);
    cr_assert_not(r.corrupt, "cut at %zu", cut);
    cr_assert_eq(r.consumed, last);
    cr_assert_eq(ev[4].step, 4);
  }
  /* A flipped bit is not a torn record: the CRC catches it, in the data... */
  p[last + 20] ^= 0x10;
  read_result r = read_events(p, len, ev, 8);
  cr_assert(r.corrupt);
  cr_assert_eq(r.n, 5);
  p[last + 20] ^= 0x10;
  /* ...and in the length. */
  p[last + 1] ^= 0x01;
  r = read_events(p, len, ev, 8);
  cr_assert(r.corrupt);
  cr_assert_eq(r.n, 5);
  free(p);
  cairn_event_writer_free(w);
}

Test(event_writer, buffers_until_the_flush_timer) {
  cairn_event_writer_options o = opts();
  o.flush_secs = 10;
  cairn_event_writer *w;
  OK(cairn_event_writer_new(g_dir, &o, &w));
  const char *path = cairn_event_writer_path(w);
  cr_assert_eq(file_size(path), 40, "file_version only");
  OK(cairn_event_writer_add_scalar(w, "loss", 1, 1));
  F.now += 9.5;
  OK(cairn_event_writer_add_scalar(w, "loss", 2, 2));
  cr_assert_eq(file_size(path), 40, "buffered before flush_secs");
  F.now += 0.5;
  OK(cairn_event_writer_add_scalar(w, "loss", 3, 3));
  cr_assert_eq(file_size(path), 40 + 3 * 42, "written when the timer is due");
  OK(cairn_event_writer_add_scalar(w, "loss", 4, 4));
  cr_assert_eq(file_size(path), 40 + 3 * 42);
  OK(cairn_event_writer_flush(w));
  cr_assert_eq(file_size(path), 40 + 4 * 42, "explicit flush");
  OK(cairn_event_writer_add_scalar(w, "loss", 5, 5));
  OK(cairn_event_writer_close(w));
  cr_assert_eq(file_size(path), 40 + 5 * 42, "close flushes");
  cairn_event_writer_free(w);
}

Test(event_writer, writes_when_the_buffer_is_full) {
  cairn_event_writer_options o = opts();
  o.flush_secs = 0;
  o.max_buffer_bytes = 100;
  cairn_event_writer *w;
  OK(cairn_event_writer_new(g_dir, &o, &w));
  const char *path = cairn_event_writer_path(w);
  OK(cairn_event_writer_add_scalar(w, "loss", 1, 1));
  OK(cairn_event_writer_add_scalar(w, "loss", 2, 2));
  cr_assert_eq(file_size(path), 40, "84 bytes buffered");
  F.now += 1e6;
  OK(cairn_event_writer_add_scalar(w, "loss", 3, 3));
  cr_assert_eq(file_size(path), 40 + 3 * 42, "126 > 100 bytes: written (no timer)");
  cairn_event_writer_free(w); /* free closes and flushes */
  cr_assert_eq(count_files(g_dir), 1);
}

Test(event_writer, free_flushes_and_null_is_fine) {
  cairn_event_writer_free(NULL);
  cairn_event_writer_options o = opts();
  cairn_event_writer *w;
  OK(cairn_event_writer_new(g_dir, &o, &w));
  OK(cairn_event_writer_add_scalar(w, "x", 1, 1));
  char path[1024];
  snprintf(path, sizeof path, "%s", cairn_event_writer_path(w));
  cairn_event_writer_free(w);
  cr_assert_eq(file_size(path), 40 + 39);
}

Test(event_writer, state_and_argument_errors) {
  cairn_event_writer *w = (cairn_event_writer *)1;
  cr_assert_eq(cairn_event_writer_new(NULL, NULL, &w), CAIRN_E_NULL);
  cr_assert_null(w);
  cr_assert_eq(cairn_event_writer_new("", NULL, &w), CAIRN_E_INVALID);
  cr_assert_eq(cairn_event_writer_new(g_dir, NULL, NULL), CAIRN_E_NULL);
  cr_assert_eq(cairn_event_writer_add_scalar(NULL, "x", 1, 1), CAIRN_E_NULL);
  cr_assert_eq(cairn_event_writer_close(NULL), CAIRN_E_NULL);
  cairn_event_writer_options o = opts();
  OK(cairn_event_writer_new(g_dir, &o, &w));
  cr_assert_eq(cairn_event_writer_add_scalar(w, NULL, 1, 1), CAIRN_E_NULL);
  cr_assert_eq(cairn_event_writer_add_scalar(w, "", 1, 1), CAIRN_E_INVALID);
  cr_assert_eq(cairn_event_writer_add_session_log(w, (cairn_session_log_status)9, NULL, 1), CAIRN_E_INVALID);
  OK(cairn_event_writer_close(w));
  OK(cairn_event_writer_close(w));
  cr_assert_eq(cairn_event_writer_add_scalar(w, "x", 1, 1), CAIRN_E_STATE);
  HAS(cairn_errmsg(), cairn_event_writer_path(w));
  cr_assert_eq(cairn_event_writer_flush(w), CAIRN_E_STATE);
  cairn_event_writer_free(w);
}

Test(event_writer, unwritable_directory) {
  /* A path through a regular file fails for root too. */
  char file[512], dir[600];
  snprintf(file, sizeof file, "%s/plainfile", g_dir);
  FILE *f = fopen(file, "w");
  cr_assert_not_null(f);
  fclose(f);
  snprintf(dir, sizeof dir, "%s/logs", file);
  cairn_event_writer *w = (cairn_event_writer *)1;
  cr_assert_eq(cairn_event_writer_new(dir, NULL, &w), CAIRN_E_IO);
  cr_assert_null(w);
  HAS(cairn_errmsg(), dir);
  HAS(cairn_errmsg(), "Not a directory");
  /* The log directory itself is a file. */
  cr_assert_eq(cairn_event_writer_new(file, NULL, &w), CAIRN_E_IO);
  HAS(cairn_errmsg(), file);
  /* Permissions (not enforced for root). */
  if (geteuid() != 0) {
    snprintf(dir, sizeof dir, "%s/ro", g_dir);
    cr_assert_eq(mkdir(dir, 0500), 0);
    cr_assert_eq(cairn_event_writer_new(dir, NULL, &w), CAIRN_E_IO);
    HAS(cairn_errmsg(), "events.out.tfevents.");
    HAS(cairn_errmsg(), "cannot create");
    HAS(cairn_errmsg(), "Permission denied");
  }
}

/* /dev/full: every write fails with ENOSPC. The writer is pointed at it by
 * swapping its descriptor through the file it created. */
Test(event_writer, write_error_names_the_file_and_truncates) {
  cairn_event_writer_options o = opts();
  o.flush_secs = 0;
  cairn_event_writer *w;
  OK(cairn_event_writer_new(g_dir, &o, &w));
  const char *path = cairn_event_writer_path(w);
  OK(cairn_event_writer_add_scalar(w, "loss", 1, 1));
  OK(cairn_event_writer_flush(w));
  int full = open("/dev/full", O_WRONLY);
  if (full < 0) {
    cairn_event_writer_free(w);
    cr_skip_test("no /dev/full");
  }
  /* The writer's descriptor is the lowest one it opened after ours: find
     it by the file's inode. */
  struct stat want, sb;
  cr_assert_eq(stat(path, &want), 0);
  int fd = -1;
  for (int i = 3; i < 1024; i++)
    if (i != full && fstat(i, &sb) == 0 && sb.st_ino == want.st_ino && sb.st_dev == want.st_dev) fd = i;
  cr_assert_geq(fd, 0);
  int saved = dup(fd);
  cr_assert_eq(dup2(full, fd), fd);
  OK(cairn_event_writer_add_scalar(w, "loss", 2, 2));
  cr_assert_eq(cairn_event_writer_flush(w), CAIRN_E_NOSPC);
  HAS(cairn_errmsg(), path);
  HAS(cairn_errmsg(), "No space left on device");
  /* Usable again once the device has room; the dropped record is gone. */
  cr_assert_eq(dup2(saved, fd), fd);
  close(saved);
  close(full);
  OK(cairn_event_writer_add_scalar(w, "loss", 3, 3));
  OK(cairn_event_writer_close(w));
  event ev[4];
  read_result r = read_file_events(path, ev, 4);
  cr_assert_not(r.torn || r.corrupt);
  cr_assert_eq(r.n, 3);
  cr_assert_eq(ev[1].step, 1);
  cr_assert_eq(ev[2].step, 3);
  cairn_event_writer_free(w);
}

Test(event_writer, non_chief_writes_nothing) {
  cairn_event_writer_options o = opts();
  o.is_chief = 0;
  char dir[512];
  snprintf(dir, sizeof dir, "%s/worker", g_dir);
  cairn_event_writer *w;
  OK(cairn_event_writer_new(dir, &o, &w));
  cr_assert_null(cairn_event_writer_path(w));
  OK(cairn_event_writer_add_scalar(w, "loss", 1, 1));
  OK(cairn_event_writer_add_session_log(w, CAIRN_SESSION_LOG_START, NULL, 1));
  OK(cairn_event_writer_flush(w));
  cairn_summary_writer t = cairn_event_writer_summary_writer(w);
  OK(t.scalar(t.self, "x", 1, 2));
  OK(cairn_event_writer_close(w));
  cairn_event_writer_free(w);
  cr_assert_eq(count_files(g_dir), 0, "not even the directory");
}

/* ==== through MonitoredTrainingSession's hooks ============================================ */

typedef struct model {
  cairn_registry *r;
  cairn_var *gs;
  cairn_op *train_op;  /* global_step += 1; publishes "loss" = 1/step */
  cairn_op *summary_op; /* emits "loss" */
  double dt;           /* fake seconds per step */
} model;

static cairn_status train_fn(cairn_session *s, void *user) {
  model *m = user;
  int64_t *gs = cairn_var_tensor(m->gs)->data;
  *gs += 1;
  F.now += m->dt;
  return cairn_session_output_f64(s, "loss", 1.0 / (double)*gs);
}

static cairn_status summary_fn(cairn_session *s, void *user) {
  model *m = user;
  cairn_session_summary_scalar(s, "loss", 1.0 / (double)*(int64_t *)cairn_var_tensor(m->gs)->data);
  return CAIRN_OK;
}

static void model_new(model *m, double dt) {
  memset(m, 0, sizeof *m);
  m->dt = dt;
  OK(cairn_registry_new(1, &m->r));
  OK(cairn_registry_global_step(m->r, &m->gs));
  OK(cairn_op_new("train_op", train_fn, m, NULL, &m->train_op));
  OK(cairn_op_new("summary", summary_fn, m, NULL, &m->summary_op));
}

static void model_free(model *m) {
  cairn_op_free(m->train_op);
  cairn_op_free(m->summary_op);
  cairn_registry_free(m->r);
}

static void train(cairn_monitored_session *ms, model *m, int steps) {
  for (int i = 0; i < steps; i++) {
    cairn_run_args a;
    memset(&a, 0, sizeof a);
    const cairn_op *op = m->train_op;
    a.ops = &op;
    a.n_ops = 1;
    OK(cairn_monitored_session_run(ms, &a));
  }
}

/* One training run of `steps` steps through MonitoredTrainingSession with
 * the event writer as summary_writer (restoring g_dir's checkpoint). */
static void mts_run(model *m, cairn_event_writer *w, int steps) {
  cairn_summary_writer table = cairn_event_writer_summary_writer(w);
  cairn_scaffold_options so;
  memset(&so, 0, sizeof so);
  so.summary_op = m->summary_op;
  cairn_scaffold *sc;
  OK(cairn_scaffold_new(m->r, &so, &sc));
  cairn_monitored_training_session_options o = cairn_monitored_training_session_options_default();
  o.registry = m->r;
  o.scaffold = sc;
  o.checkpoint_dir = g_dir;
  o.save_summaries_steps = 5;
  o.log_step_count_steps = 10;
  o.save_checkpoint_steps = 10;
  o.save_checkpoint_secs = 0;
  o.summary_writer = &table;
  o.env = &ENV;
  o.sm.env = &ENV;
  cairn_monitored_session *ms;
  OK(cairn_monitored_training_session_new(&o, &ms));
  train(ms, m, steps);
  OK(cairn_monitored_session_close(ms));
  cairn_monitored_session_free(ms);
  cairn_scaffold_free(sc);
}

Test(event_hooks, monitored_training_session_writes_a_readable_file) {
  char logdir[512];
  snprintf(logdir, sizeof logdir, "%s/logs", g_dir);
  model m;
  model_new(&m, 0.5);
  cairn_event_writer_options o = opts();
  cairn_event_writer *w;
  OK(cairn_event_writer_new(logdir, &o, &w));
  mts_run(&m, w, 20);
  /* end() of the SummarySaverHook flushed: the file is whole before close. */
  static event ev[64];
  read_result r = read_file_events(cairn_event_writer_path(w), ev, 64);
  cr_assert_not(r.torn || r.corrupt);
  char seq[2048] = "";
  for (int i = 0; i < r.n; i++) {
    size_t u = strlen(seq);
    if (ev[i].what == 3) snprintf(seq + u, sizeof seq - u, "V;");
    if (ev[i].what == 5) snprintf(seq + u, sizeof seq - u, "%lld:%s=%g;", (long long)ev[i].step, ev[i].text, ev[i].simple_value);
    if (ev[i].what == 7)
      snprintf(seq + u, sizeof seq - u, "%lld:log%d%s;", (long long)ev[i].step, ev[i].status, ev[i].text[0] ? "+path" : "");
  }
  /* START at the first step; summaries every 5 steps; global_step/sec every
     10 steps after the first trigger (2 steps/s on the fake clock);
     CHECKPOINT logs from the CheckpointSaverHook. */
  cr_assert_str_eq(seq,
                   "V;0:log3+path;1:log1;1:loss=1;6:loss=0.166667;10:log3+path;11:global_step/sec=2;"
                   "11:loss=0.0909091;16:loss=0.0625;20:log3+path;",
                   "%s", seq);
  OK(cairn_event_writer_close(w));
  cairn_event_writer_free(w);

  /* A restart: a new writer (new file), START at the restored step + 1. */
  g_wall += 100;
  model m2;
  model_new(&m2, 0.5);
  OK(cairn_event_writer_new(logdir, &o, &w));
  mts_run(&m2, w, 3);
  r = read_file_events(cairn_event_writer_path(w), ev, 64);
  cr_assert_geq(r.n, 3);
  int start = -1;
  for (int i = 0; i < r.n; i++)
    if (ev[i].what == 7 && ev[i].status == 1) start = i;
  cr_assert_geq(start, 0, "a START session log");
  cr_assert_eq(ev[start].step, 21, "restored step 20, first step run 21");
  cr_assert_eq(count_files(logdir), 2);
  cairn_event_writer_free(w);
  model_free(&m);
  model_free(&m2);
}

/* ==== progress hook ========================================================================= */

static struct {
  int n;
  char lines[32][256];
  cairn_progress p[32];
} P;

static void capture(void *ctx, const cairn_progress *p, const char *line) {
  (void)ctx;
  cr_assert_lt(P.n, 32);
  snprintf(P.lines[P.n], sizeof P.lines[0], "%s", line);
  P.p[P.n] = *p;
  P.n++;
}

static cairn_monitored_session *progress_session(model *m, cairn_hook *h) {
  cairn_monitored_training_session_options o = cairn_monitored_training_session_options_default();
  o.registry = m->r;
  o.hooks = &h;
  o.n_hooks = 1;
  o.checkpoint_dir = g_dir;
  o.save_checkpoint_steps = 20;
  o.save_checkpoint_secs = 0;
  o.log_step_count_steps = 0;
  o.env = &ENV;
  o.sm.env = &ENV;
  cairn_monitored_session *ms;
  OK(cairn_monitored_training_session_new(&o, &ms));
  return ms;
}

Test(progress_hook, lines_every_n_steps_with_eta) {
  memset(&P, 0, sizeof P);
  model m;
  model_new(&m, 0.125); /* 8 steps/s */
  cairn_progress_hook_options po = cairn_progress_hook_options_default();
  po.every_n_steps = 5;
  po.loss_name = "loss";
  po.batch_size = 32;
  po.max_steps = 20;
  po.fn = capture;
  po.env = &ENV;
  cairn_hook *h;
  OK(cairn_hook_new_progress(&po, &h));
  cairn_monitored_session *ms = progress_session(&m, h);
  train(ms, &m, 20);
  OK(cairn_monitored_session_close(ms));
  cairn_monitored_session_free(ms);
  cr_assert_eq(P.n, 4);
  cr_assert_str_eq(P.lines[0], "step=5/20 loss=0.2 steps/s=8.00 examples/s=256 eta=2s");
  cr_assert_str_eq(P.lines[1], "step=10/20 loss=0.1 steps/s=8.00 examples/s=256 eta=1s");
  cr_assert_str_eq(P.lines[2], "step=15/20 loss=0.06667 steps/s=8.00 examples/s=256 eta=1s");
  cr_assert_str_eq(P.lines[3], "step=20/20 loss=0.05 steps/s=8.00 examples/s=256 eta=0s");
  cr_assert_eq(P.p[0].step, 5);
  cr_assert_eq(P.p[0].elapsed_secs, 0.625);
  cr_assert_eq(P.p[0].eta_secs, 15.0 / 8.0);
  cr_assert_eq(P.p[0].loss, 0.2);

  /* Resumed from the step-20 checkpoint with max 1000 steps: the first line
     counts from the restored step. */
  memset(&P, 0, sizeof P);
  cairn_hook_free(h);
  model m2;
  model_new(&m2, 0.5);
  po.max_steps = 1000;
  po.every_n_steps = 10;
  OK(cairn_hook_new_progress(&po, &h));
  ms = progress_session(&m2, h);
  train(ms, &m2, 10);
  OK(cairn_monitored_session_close(ms));
  cairn_monitored_session_free(ms);
  cr_assert_eq(P.n, 1);
  cr_assert_str_eq(P.lines[0], "step=30/1000 loss=0.03333 steps/s=2.00 examples/s=64 eta=8m05s");
  cairn_hook_free(h);
  model_free(&m);
  model_free(&m2);
}

/* every_n_steps = INT64_MAX is "no periodic lines" (what cairn-fmnist's
 * --log-every 0 passes): across a resumed run (global step 20 restored)
 * the interval must not be added to the step (a signed overflow, which
 * made every step print a line): only the final line at max_steps comes. */
Test(progress_hook, huge_interval_across_a_resume_prints_no_periodic_line) {
  memset(&P, 0, sizeof P);
  model m;
  model_new(&m, 0.125);
  cairn_progress_hook_options po = cairn_progress_hook_options_default();
  po.every_n_steps = INT64_MAX;
  po.loss_name = "loss";
  po.max_steps = 1000;
  po.fn = capture;
  po.env = &ENV;
  cairn_hook *h;
  OK(cairn_hook_new_progress(&po, &h));
  cairn_monitored_session *ms = progress_session(&m, h);
  train(ms, &m, 20);
  OK(cairn_monitored_session_close(ms));
  cairn_monitored_session_free(ms);
  cairn_hook_free(h);
  cr_assert_eq(P.n, 0, "a fresh run: no line in 20 steps (got %d, first '%s')", P.n, P.lines[0]);

  /* Resumed from the step-20 checkpoint. */
  model m2;
  model_new(&m2, 0.5);
  OK(cairn_hook_new_progress(&po, &h));
  ms = progress_session(&m2, h);
  int64_t step;
  OK(cairn_session_global_step(cairn_monitored_session_raw_session(ms), &step));
  cr_assert_eq(step, 20, "resumed at step 20");
  train(ms, &m2, 10);
  OK(cairn_monitored_session_close(ms));
  cairn_monitored_session_free(ms);
  cr_assert_eq(P.n, 0, "resumed: no line in 10 steps (got %d, first '%s')", P.n, P.lines[0]);
  cairn_hook_free(h);
  model_free(&m);
  model_free(&m2);
}

Test(progress_hook, every_n_secs_to_a_file_without_max_steps) {
  model m;
  model_new(&m, 0.25);
  char path[512];
  snprintf(path, sizeof path, "%s/progress.txt", g_dir);
  FILE *f = fopen(path, "w+");
  cr_assert_not_null(f);
  cairn_progress_hook_options po = cairn_progress_hook_options_default();
  po.every_n_steps = 0;
  po.every_n_secs = 1.0;
  po.out = f;
  po.env = &ENV;
  cairn_hook *h;
  OK(cairn_hook_new_progress(&po, &h));
  cairn_monitored_session *ms = progress_session(&m, h);
  train(ms, &m, 10);
  OK(cairn_monitored_session_close(ms));
  cairn_monitored_session_free(ms);
  fclose(f);
  size_t len;
  char *text = (char *)slurp(path, &len);
  text = realloc(text, len + 1);
  text[len] = '\0';
  /* The time check happens before the run (the prediction), so a line
     comes at the first step that starts a second or more after the last. */
  cr_assert_str_eq(text, "step=5 steps/s=4.00\nstep=10 steps/s=4.00\n", "%s", text);
  free(text);
  cairn_hook_free(h);
  model_free(&m);
}

Test(progress_hook, options_and_format) {
  cairn_hook *h = (cairn_hook *)1;
  cr_assert_eq(cairn_hook_new_progress(NULL, &h), CAIRN_E_NULL);
  cairn_progress_hook_options po = cairn_progress_hook_options_default();
  cr_assert_eq(po.every_n_steps, 100);
  cr_assert_eq(cairn_hook_new_progress(&po, NULL), CAIRN_E_NULL);
  po.every_n_secs = 5;
  cr_assert_eq(cairn_hook_new_progress(&po, &h), CAIRN_E_INVALID);
  cr_assert_null(h);
  HAS(cairn_errmsg(), "exactly one of every_n_steps and every_n_secs");
  po.every_n_steps = 0;
  po.every_n_secs = 0;
  cr_assert_eq(cairn_hook_new_progress(&po, &h), CAIRN_E_INVALID);
  po.every_n_steps = -5;
  cr_assert_eq(cairn_hook_new_progress(&po, &h), CAIRN_E_INVALID);

  cairn_progress p;
  memset(&p, 0, sizeof p);
  p.step = 7;
  p.eta_secs = -1;
  char buf[128];
  cr_assert_eq(cairn_progress_format(&p, buf, sizeof buf), strlen("step=7 steps/s=0.00"));
  cr_assert_str_eq(buf, "step=7 steps/s=0.00");
  p.max_steps = 100000;
  p.have_loss = 1;
  p.loss = 2.302585;
  p.steps_per_sec = 12.3456;
  p.examples_per_sec = 1580.2;
  p.eta_secs = 59.4;
  cairn_progress_format(&p, buf, sizeof buf);
  cr_assert_str_eq(buf, "step=7/100000 loss=2.303 steps/s=12.35 examples/s=1580 eta=59s");
  p.eta_secs = 59.6;
  cairn_progress_format(&p, buf, sizeof buf);
  HAS(buf, "eta=1m00s");
  p.eta_secs = 3599.4;
  cairn_progress_format(&p, buf, sizeof buf);
  HAS(buf, "eta=59m59s");
  p.eta_secs = 3 * 3600 + 7 * 60 + 59;
  cairn_progress_format(&p, buf, sizeof buf);
  HAS(buf, "eta=3h07m");
  p.eta_secs = 250 * 3600;
  cairn_progress_format(&p, buf, sizeof buf);
  HAS(buf, "eta=250h00m");
  /* snprintf-style: the full length with a short buffer, cut and terminated. */
  size_t full = cairn_progress_format(&p, NULL, 0);
  char small[10];
  cr_assert_eq(cairn_progress_format(&p, small, sizeof small), full);
  cr_assert_eq(strlen(small), 9u);
  cr_assert_eq(strncmp(small, "step=7/10", 9), 0);
}

Test(progress_hook, needs_a_global_step) {
  cairn_registry *r;
  OK(cairn_registry_new(1, &r));
  cairn_progress_hook_options po = cairn_progress_hook_options_default();
  cairn_hook *h;
  OK(cairn_hook_new_progress(&po, &h));
  cr_assert_eq(cairn__hook_begin(h, r), CAIRN_E_STATE);
  HAS(cairn_errmsg(), "Global step should be created to use ProgressHook.");
  cairn_hook_free(h);
  cairn_registry_free(r);
}
