/* cairn/saver.h, "Asynchronous saving": cairn_saver_save_begin / _wait /
 * _status, and CheckpointSaverHook's async and async_skip_busy options
 * (cairn/monitored.h).
 *
 * Phase 2 is held where a test needs a save in flight by the saver's clock
 * (cairn_saver_options.clock), which the commit calls on the writer thread
 * after the checkpoint file is in place and before the state file: while
 * g_hold is set, the clock waits. Real file-system errors are used, not
 * mocks: a full private tmpfs (ENOSPC; skipped where no mount namespace
 * can be made) and RLIMIT_FSIZE (EFBIG, CAIRN_E_IO).
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cairn.h"
#include "ckpt_impl.h"
#include "monitored_impl.h"
#include "rm_tree.h"
#include "slurp.h"
#include "saver_impl.h"

#define OK(expr) cr_assert_eq((expr), CAIRN_OK, "%s: %s", #expr, cairn_errmsg())
#define HAS(hay, needle) cr_assert_not_null(strstr((hay), (needle)), "'%s' lacks '%s'", (hay), (needle))

static char g_dir[256];
static atomic_int g_hold;     /* 1: the clock waits (phase 2 held) */
static atomic_int g_in_clock; /* the writer reached the held clock */

static double held_clock(void *ctx) {
  (void)ctx;
  if (atomic_load(&g_hold)) {
    atomic_store(&g_in_clock, 1);
    while (atomic_load(&g_hold)) usleep(500);
  }
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void wait_in_clock(void) {
  for (int i = 0; i < 20000 && !atomic_load(&g_in_clock); i++) usleep(500);
  cr_assert(atomic_load(&g_in_clock), "phase 2 never reached the clock");
}

static void setup(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(g_dir, sizeof g_dir, "%s/cairn-saver-async-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  cr_assert_not_null(mkdtemp(g_dir));
  atomic_store(&g_hold, 0);
  atomic_store(&g_in_clock, 0);
}

static void teardown(void) { rm_tree(g_dir); }

TestSuite(saver_async, .init = setup, .fini = teardown, .timeout = 60);
TestSuite(async_hook, .init = setup, .fini = teardown, .timeout = 60);

/* ---- fixtures ------------------------------------------------------------------- */

#define NV 3
typedef struct model {
  cairn_registry *r;
  cairn_var *v[NV];
  cairn_var *gs;
} model;

/* Three f32 variables (a 256x300 kernel, a bias, a vector) of noise and
   global_step: about 300 kB. */
static void model_new(model *m, uint64_t seed) {
  memset(m, 0, sizeof *m);
  OK(cairn_registry_new(seed, &m->r));
  static const int64_t shapes[NV][2] = {{256, 300}, {300, 1}, {1000, 1}};
  static const char *names[NV] = {"dense/kernel", "dense/bias", "out/w"};
  for (int i = 0; i < NV; i++) {
    OK(cairn_var_new(m->r, names[i], CAIRN_DTYPE_F32, shapes[i][1] == 1 ? 1 : 2, shapes[i], cairn_init_zeros(),
                        CAIRN_COLL_GLOBAL, &m->v[i]));
    OK(cairn_var_initialize(m->v[i]));
    cairn_tensor *t = cairn_var_tensor(m->v[i]);
    cairn_rng g;
    cairn_rng_init(&g, seed, (uint64_t)i);
    for (int64_t k = 0; k < t->size; k++) ((float *)t->data)[k] = cairn_rng_uniform(&g) - 0.5f;
  }
  OK(cairn_registry_global_step(m->r, &m->gs));
  OK(cairn_var_initialize(m->gs));
}

static void model_free(model *m) { cairn_registry_free(m->r); }

static cairn_saver *saver_of(model *m, int held) {
  cairn_saver_options o = cairn_saver_options_default();
  o.write.no_fsync = 1;
  if (held) o.clock = held_clock;
  cairn_saver *s;
  OK(cairn_saver_new(m->r, &o, &s));
  return s;
}

/* Number of "<name>.tmp.*" files in dir. */
static int tmp_files(const char *dir) {
  DIR *d = opendir(dir);
  cr_assert_not_null(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strstr(e->d_name, ".tmp.")) n++;
  closedir(d);
  return n;
}

/* ---- files ------------------------------------------------------------------------- */

/* b with a's file id put in its place and every checksum that covers the
   id recomputed (doc/checkpoint-format.md: superblock bytes 32..47, CRC at
   60; each record header's bytes 8..23, CRC after the name; the footer's
   bytes 44..59, CRC at 60). Returns how many record headers it changed. */
static int adopt_file_id(const unsigned char *a, unsigned char *b, size_t n) {
  unsigned char ida[16], idb[16];
  memcpy(ida, a + 32, 16);
  memcpy(idb, b + 32, 16);
  memcpy(b + 32, ida, 16);
  ck_put32(b + 60, ck_crc_masked(b, 60));
  int records = 0;
  for (size_t p = 64; p + 52 <= n - 64; p++) {
    if (memcmp(b + p, "CRNT", 4) != 0 || memcmp(b + p + 8, idb, 16) != 0) continue;
    memcpy(b + p + 8, ida, 16);
    unsigned rank = b[p + 27], name_len = (unsigned)b[p + 24] | (unsigned)b[p + 25] << 8;
    size_t crc_at = p + 48 + 8 * rank + name_len;
    ck_put32(b + crc_at, ck_crc_masked(b + p, crc_at - p));
    records++;
  }
  unsigned char *f = b + n - 64;
  cr_assert_eq(memcmp(f + 44, idb, 16), 0, "footer file id");
  memcpy(f + 44, ida, 16);
  ck_put32(f + 60, ck_crc_masked(f, 60));
  return records;
}

Test(saver_async, async_and_sync_files_are_byte_identical_but_the_file_id) {
  model m;
  model_new(&m, 3);
  /* one saver per mode: a saver's rotation list spans its directories */
  cairn_saver *s = saver_of(&m, 0), *as = saver_of(&m, 0);
  OK(cairn_saver_set_state(s, "dataset", "\x01\x02\x03", 3));
  OK(cairn_saver_set_user_i64(s, "epoch", 7));
  OK(cairn_saver_set_state(as, "dataset", "\x01\x02\x03", 3));
  OK(cairn_saver_set_user_i64(as, "epoch", 7));
  char sd[300], ad[300], p[512];
  snprintf(sd, sizeof sd, "%s/sync", g_dir);
  snprintf(ad, sizeof ad, "%s/async", g_dir);
  cr_assert_eq(mkdir(sd, 0777), 0);
  cr_assert_eq(mkdir(ad, 0777), 0);
  snprintf(p, sizeof p, "%s/model.ckpt", sd);
  OK(cairn_saver_save(s, p, 42, NULL, 0));
  snprintf(p, sizeof p, "%s/model.ckpt", ad);
  char path[512];
  OK(cairn_saver_save_begin(as, p, 42, path, sizeof path));
  snprintf(p, sizeof p, "%s/model.ckpt-42", ad);
  cr_assert_str_eq(path, p);
  OK(cairn_saver_save_wait(as));
  size_t na, nb;
  snprintf(p, sizeof p, "%s/model.ckpt-42", sd);
  unsigned char *a = slurp(p, &na);
  snprintf(p, sizeof p, "%s/model.ckpt-42", ad);
  unsigned char *b = slurp(p, &nb);
  cr_assert_eq(na, nb, "sizes %zu and %zu", na, nb);
  cr_assert_neq(memcmp(a + 32, b + 32, 16), 0, "two files got one file id");
  cr_assert_eq(adopt_file_id(a, b, nb), NV + 1);
  for (size_t i = 0; i < na; i++) cr_assert_eq(a[i], b[i], "byte %zu differs beyond the file id", i);
  /* the state files name the same checkpoint, each in its own directory */
  size_t ns, nt;
  snprintf(p, sizeof p, "%s/checkpoint", sd);
  unsigned char *st1 = slurp(p, &ns);
  snprintf(p, sizeof p, "%s/checkpoint", ad);
  unsigned char *st2 = slurp(p, &nt);
  cr_assert(ns == nt && memcmp(st1, st2, ns) == 0, "state files:\n%.*s\n%.*s", (int)ns, st1, (int)nt, st2);
  free(st1);
  free(st2);
  free(a);
  free(b);
  cairn_saver_free(s);
  cairn_saver_free(as);
  model_free(&m);
}

Test(saver_async, mutating_every_variable_after_phase_1_does_not_change_what_is_written) {
  model m;
  model_new(&m, 5);
  cairn_saver *s = saver_of(&m, 1);
  float *before[NV];
  for (int i = 0; i < NV; i++) {
    const cairn_tensor *t = cairn_var_tensor(m.v[i]);
    before[i] = malloc(cairn_tensor_nbytes(t));
    memcpy(before[i], t->data, cairn_tensor_nbytes(t));
  }
  *(int64_t *)cairn_var_tensor(m.gs)->data = 10;
  OK(cairn_saver_set_state(s, "rng", "old", 3));
  char p[512];
  snprintf(p, sizeof p, "%s/model.ckpt", g_dir);
  atomic_store(&g_hold, 1);
  OK(cairn_saver_save_begin(s, p, 10, NULL, 0));
  /* training goes on while phase 2 writes */
  for (int i = 0; i < NV; i++) {
    cairn_tensor *t = cairn_var_tensor(m.v[i]);
    for (int64_t k = 0; k < t->size; k++) ((float *)t->data)[k] += 1.0f;
  }
  *(int64_t *)cairn_var_tensor(m.gs)->data = 11;
  OK(cairn_saver_set_state(s, "rng", "new!", 4));
  atomic_store(&g_hold, 0);
  OK(cairn_saver_save_wait(s));

  model r;
  model_new(&r, 99); /* other values everywhere */
  cairn_saver *rs = saver_of(&r, 0);
  snprintf(p, sizeof p, "%s/model.ckpt-10", g_dir);
  cairn_saver_meta *meta;
  OK(cairn_saver_restore(rs, p, &meta));
  for (int i = 0; i < NV; i++) {
    const cairn_tensor *t = cairn_var_tensor(r.v[i]);
    cr_assert_eq(memcmp(t->data, before[i], cairn_tensor_nbytes(t)), 0, "variable %d holds the mutated values", i);
    free(before[i]);
  }
  cr_assert_eq(*(int64_t *)cairn_var_tensor(r.gs)->data, 10);
  const void *d;
  size_t len;
  OK(cairn_saver_meta_state(meta, "rng", &d, &len));
  cr_assert(len == 3 && memcmp(d, "old", 3) == 0, "the state blob of phase 1 was not the one written");
  cairn_saver_meta_free(meta);
  cairn_saver_free(rs);
  model_free(&r);
  cairn_saver_free(s);
  model_free(&m);
}

Test(saver_async, status_says_in_flight_and_free_waits_for_the_save) {
  model m;
  model_new(&m, 1);
  cairn_saver *s = saver_of(&m, 1);
  char p[512];
  snprintf(p, sizeof p, "%s/model.ckpt", g_dir);
  atomic_store(&g_hold, 1);
  OK(cairn_saver_save_begin(s, p, 1, NULL, 0));
  wait_in_clock();
  int busy = 0;
  OK(cairn_saver_save_status(s, &busy));
  cr_assert_eq(busy, 1);
  char path[600];
  /* held before the state file: it does not exist yet */
  snprintf(path, sizeof path, "%s/checkpoint", g_dir);
  struct stat sb;
  cr_assert_neq(stat(path, &sb), 0);
  atomic_store(&g_hold, 0);
  cairn_saver_free(s); /* waits: the commit completes */
  OK(cairn_latest_checkpoint(g_dir, path, sizeof path));
  snprintf(p, sizeof p, "%s/model.ckpt-1", g_dir);
  cr_assert_str_eq(path, p);
  cairn_ckpt *c;
  OK(cairn_ckpt_open(path, NULL, &c));
  OK(cairn_ckpt_verify(c));
  cairn_ckpt_close(c);
  model_free(&m);
}

Test(saver_async, begin_waits_for_the_save_in_flight_and_rotation_stays_exact) {
  model m;
  model_new(&m, 2);
  cairn_saver_options o = cairn_saver_options_default();
  o.write.no_fsync = 1;
  o.max_to_keep = 2;
  cairn_saver *s;
  OK(cairn_saver_new(m.r, &o, &s));
  char p[512];
  snprintf(p, sizeof p, "%s/model.ckpt", g_dir);
  for (int64_t step = 1; step <= 5; step++) OK(cairn_saver_save_begin(s, p, step, NULL, 0));
  cr_assert_eq(cairn_saver_last_checkpoints_count(s), 2); /* waits for step 5 */
  HAS(cairn_saver_last_checkpoint_at(s, 1), "model.ckpt-5");
  HAS(cairn_saver_last_checkpoint_at(s, 0), "model.ckpt-4");
  char path[600];
  snprintf(path, sizeof path, "%s/model.ckpt-3", g_dir);
  struct stat sb;
  cr_assert_neq(stat(path, &sb), 0, "rotation kept model.ckpt-3");
  cairn_saver_free(s);
  model_free(&m);
}

/* A save that fails in phase 2: the error comes back once, from the next
   call, with the failed save's message; no temporary file; the previous
   checkpoint is intact and still the latest. */
static void expect_background_failure(cairn_saver *s, const char *dir, const char *prefix, cairn_status want,
                                      const char *text) {
  OK(cairn_saver_save_begin(s, prefix, 2, NULL, 0)); /* phase 1 succeeds */
  int busy = 1;
  cairn_status st = CAIRN_OK;
  for (int i = 0; i < 20000 && busy; i++) {
    st = cairn_saver_save_status(s, &busy);
    if (busy) usleep(500);
  }
  cr_assert_eq(busy, 0);
  cr_assert_eq(st, want, "status %d (%s)", st, cairn_errmsg());
  HAS(cairn_errmsg(), "saver_save_status: the asynchronous save failed: ");
  HAS(cairn_errmsg(), "model.ckpt-2");
  HAS(cairn_errmsg(), text);
  OK(cairn_saver_save_status(s, &busy)); /* reported once */
  cr_assert_eq(tmp_files(dir), 0, "a temporary file was left");
  char path[600], want_path[600];
  OK(cairn_latest_checkpoint(dir, path, sizeof path));
  snprintf(want_path, sizeof want_path, "%s-1", prefix);
  cr_assert_str_eq(path, want_path);
  cairn_ckpt *c;
  OK(cairn_ckpt_open(path, NULL, &c));
  OK(cairn_ckpt_verify(c));
  cairn_ckpt_close(c);
}

Test(saver_async, io_error_in_phase_2_surfaces_on_the_next_call) {
  model m;
  model_new(&m, 4);
  cairn_saver *s = saver_of(&m, 0);
  char p[512];
  snprintf(p, sizeof p, "%s/model.ckpt", g_dir);
  OK(cairn_saver_save(s, p, 1, NULL, 0));
  /* a file size limit below the checkpoint's size: write() fails with EFBIG */
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit rl = {64 * 1024, 64 * 1024};
  cr_assert_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
  expect_background_failure(s, g_dir, p, CAIRN_E_IO, "File too large");
  /* and from begin, the same way, when status was not asked */
  OK(cairn_saver_save_begin(s, p, 3, NULL, 0));
  cr_assert_eq(cairn_saver_save_begin(s, p, 4, NULL, 0), CAIRN_E_IO);
  HAS(cairn_errmsg(), "saver_save_begin: the asynchronous save failed: ");
  HAS(cairn_errmsg(), "model.ckpt-3");
  cairn_saver_free(s);
  model_free(&m);
}

Test(saver_async, enospc_on_a_full_private_tmpfs_surfaces_on_the_next_call) {
  if (unshare(CLONE_NEWNS) != 0) cr_skip_test("no private mount namespace (unshare: %s)", strerror(errno));
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
    cr_skip_test("cannot make the mounts private: %s", strerror(errno));
  char mnt[300];
  snprintf(mnt, sizeof mnt, "%s/small", g_dir);
  cr_assert_eq(mkdir(mnt, 0777), 0);
  if (mount("tmpfs", mnt, "tmpfs", 0, "size=2m") != 0) cr_skip_test("cannot mount a tmpfs: %s", strerror(errno));
  model m;
  model_new(&m, 6);
  cairn_saver *s = saver_of(&m, 0);
  char p[512];
  snprintf(p, sizeof p, "%s/model.ckpt", mnt);
  OK(cairn_saver_save(s, p, 1, NULL, 0));
  /* fill what is left */
  char fill[600];
  snprintf(fill, sizeof fill, "%s/filler", mnt);
  int fd = open(fill, O_WRONLY | O_CREAT, 0644);
  cr_assert_geq(fd, 0);
  static char block[4096];
  while (write(fd, block, sizeof block) > 0) {
  }
  close(fd);
  expect_background_failure(s, mnt, p, CAIRN_E_NOSPC, "No space left on device");
  cairn_saver_free(s);
  model_free(&m);
  umount(mnt);
}

/* ---- the hook ---------------------------------------------------------------------- */

static char g_log[65536];
static void f_log(void *ctx, cairn_log_level level, const char *msg) {
  (void)ctx;
  (void)level;
  size_t used = strlen(g_log);
  if (used < sizeof g_log - 1) snprintf(g_log + used, sizeof g_log - used, "%s\n", msg);
}
static const cairn_env ENV = {.log = f_log, .min_level = CAIRN_LOG_DEBUG};

typedef struct counts {
  int before_save, after_save;
  int64_t last_after;
} counts;
static cairn_status l_before(void *self, cairn_session *s, int64_t step) {
  (void)s;
  (void)step;
  ((counts *)self)->before_save++;
  return CAIRN_OK;
}
static cairn_status l_after(void *self, cairn_session *s, int64_t step, int *stop) {
  (void)s;
  (void)stop;
  ((counts *)self)->after_save++;
  ((counts *)self)->last_after = step;
  return CAIRN_OK;
}

static cairn_status increment_fn(cairn_session *s, void *user) {
  (void)s;
  model *m = user;
  *(int64_t *)cairn_var_tensor(m->gs)->data += 1;
  return CAIRN_OK;
}

typedef struct rig {
  model m;
  cairn_saver *saver;
  cairn_op *train;
  cairn_hook *hook;
  cairn_session *raw;
  cairn_monitored_session *ms;
  counts c;
  cairn_checkpoint_listener l;
} rig;

/* A hooked session (the hook alone, driven by hand as in test_hooks.c)
   saving every step asynchronously through a held-clock saver. */
static void rig_new(rig *g, int skip) {
  memset(g, 0, sizeof *g);
  g_log[0] = '\0';
  model_new(&g->m, 8);
  g->saver = saver_of(&g->m, 1);
  OK(cairn_op_new("train_op", increment_fn, &g->m, NULL, &g->train));
  g->l = (cairn_checkpoint_listener){.before_save = l_before, .after_save = l_after, .self = &g->c};
  cairn_checkpoint_saver_hook_options o = cairn_checkpoint_saver_hook_options_default();
  o.save_steps = 1;
  o.saver = g->saver;
  o.env = &ENV;
  o.listeners = &g->l;
  o.n_listeners = 1;
  o.async = 1;
  o.async_skip_busy = skip;
  OK(cairn_hook_new_checkpoint_saver(g_dir, &o, &g->hook));
  OK(cairn__hook_begin(g->hook, g->m.r));
  OK(cairn_session_new(g->m.r, 0, &g->raw));
  OK(cairn__hook_after_create_session(g->hook, g->raw, NULL)); /* synchronous: step 0 */
  OK(cairn__hooked_session_new(g->raw, &g->hook, 1, &g->ms));
}

static cairn_status rig_run(rig *g) {
  cairn_run_args a;
  memset(&a, 0, sizeof a);
  const cairn_op *op = g->train;
  a.ops = &op;
  a.n_ops = 1;
  return cairn_monitored_session_run(g->ms, &a);
}

static void rig_free(rig *g) {
  cairn_monitored_session_free(g->ms);
  cairn_hook_free(g->hook);
  cairn_session_free(g->raw);
  cairn_op_free(g->train);
  cairn_saver_free(g->saver);
  model_free(&g->m);
}

Test(async_hook, before_save_in_phase_1_after_save_once_committed_and_end_waits) {
  rig g;
  rig_new(&g, 0);
  cr_assert_eq(g.c.before_save, 1);
  cr_assert_eq(g.c.after_save, 1); /* the synchronous save after creation */
  atomic_store(&g_hold, 1);
  OK(rig_run(&g)); /* step 1: phase 1, phase 2 held */
  wait_in_clock();
  cr_assert_eq(g.c.before_save, 2);
  cr_assert_eq(g.c.after_save, 1, "after_save ran before the commit");
  atomic_store(&g_hold, 0);
  OK(cairn_saver_save_wait(g.saver));
  cr_assert_eq(g.c.after_save, 1);
  /* the next run sees the commit */
  atomic_store(&g_in_clock, 0);
  atomic_store(&g_hold, 1);
  OK(rig_run(&g)); /* step 2 */
  cr_assert_eq(g.c.after_save, 2);
  cr_assert_eq(g.c.last_after, 1);
  wait_in_clock();
  atomic_store(&g_hold, 0);
  OK(cairn__hook_end(g.hook, g.raw)); /* waits for step 2; step 2 was the last saved */
  cr_assert_eq(g.c.after_save, 3);
  cr_assert_eq(g.c.last_after, 2);
  char path[600], want[600];
  OK(cairn_latest_checkpoint(g_dir, path, sizeof path));
  snprintf(want, sizeof want, "%s/model.ckpt-2", g_dir);
  cr_assert_str_eq(path, want);
  rig_free(&g);
}

Test(async_hook, skip_policy_skips_a_save_due_while_one_is_written_and_logs_it) {
  rig g;
  rig_new(&g, 1);
  atomic_store(&g_hold, 1);
  OK(rig_run(&g)); /* step 1: begun, held */
  wait_in_clock();
  OK(rig_run(&g)); /* step 2: due, skipped */
  HAS(g_log, "Skipping the checkpoint of step 2: the save of step 1 (");
  HAS(g_log, "model.ckpt-1) is still being written.");
  cr_assert_eq(g.c.before_save, 2, "a skipped save called before_save");
  atomic_store(&g_hold, 0);
  OK(cairn__hook_end(g.hook, g.raw)); /* step 1 commits; end saves step 2 */
  char path[600];
  snprintf(path, sizeof path, "%s/model.ckpt-2", g_dir);
  struct stat sb;
  cr_assert_eq(stat(path, &sb), 0);
  cr_assert_eq(g.c.after_save, 3);
  rig_free(&g);
}

Test(async_hook, wait_policy_waits_for_the_save_in_flight) {
  rig g;
  rig_new(&g, 0);
  OK(rig_run(&g));
  OK(rig_run(&g));
  OK(rig_run(&g));
  cr_assert_eq(g.c.before_save, 4);
  cr_assert(strstr(g_log, "Skipping") == NULL);
  OK(cairn__hook_end(g.hook, g.raw));
  cr_assert_eq(g.c.after_save, 4);
  rig_free(&g);
}

Test(async_hook, a_failed_background_save_fails_the_next_run_and_should_stop) {
  rig g;
  rig_new(&g, 0);
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit rl = {64 * 1024, 64 * 1024};
  cr_assert_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
  OK(rig_run(&g)); /* step 1's save fails behind it */
  OK(cairn_saver_save_wait(g.saver) == CAIRN_E_IO ? CAIRN_OK : CAIRN_E_STATE);
  /* the error was taken by that wait: the next one comes from the session */
  OK(rig_run(&g)); /* step 2's save fails too */
  cairn__saver_async_idle(g.saver);
  cr_assert_eq(cairn_monitored_session_should_stop(g.ms), 1);
  HAS(cairn_monitored_session_errmsg(g.ms), "the asynchronous save failed");
  HAS(cairn_monitored_session_errmsg(g.ms), "model.ckpt-2");
  HAS(cairn_monitored_session_errmsg(g.ms), "File too large");
  OK(rig_run(&g)); /* should_stop took it; step 3's save fails: the next run reports it */
  cairn__saver_async_idle(g.saver);
  cr_assert_eq(rig_run(&g), CAIRN_E_IO);
  HAS(cairn_monitored_session_errmsg(g.ms), "model.ckpt-3");
  struct rlimit un = {RLIM_INFINITY, RLIM_INFINITY};
  setrlimit(RLIMIT_FSIZE, &un);
  cr_assert_eq(tmp_files(g_dir), 0);
  rig_free(&g);
}

/* Issue 24, item 2, in phase 2: the directory is removed, or moved away
 * and replaced by an empty one, while the background writer is between the
 * checkpoint's rename and the state file (the held clock). The save fails
 * with the directory named; nothing is written into the new directory and
 * a removed one is not made again. */
static void lose_dir_in_phase_2(int replace) {
  rig g;
  rig_new(&g, 0);
  atomic_store(&g_in_clock, 0);
  atomic_store(&g_hold, 1);
  OK(rig_run(&g)); /* step 1: phase 1 done, phase 2 held */
  wait_in_clock();
  char old[300];
  snprintf(old, sizeof old, "%s.old", g_dir);
  if (replace) {
    cr_assert_eq(rename(g_dir, old), 0);
    cr_assert_eq(mkdir(g_dir, 0755), 0);
  } else {
    rm_tree(g_dir);
  }
  atomic_store(&g_hold, 0);
  cairn_status st = cairn_saver_save_wait(g.saver);
  cr_assert_eq(st, CAIRN_E_NOT_FOUND, "status %d (%s)", st, cairn_errmsg());
  char want[900];
  snprintf(want, sizeof want,
           "saver_save_wait: the asynchronous save failed: saver_save_begin '%s/model.ckpt-1': checkpoint directory "
           "'%s' was %s while training: the lock taken at start no longer protects it; not re-creating it; training "
           "stops",
           g_dir, g_dir, replace ? "replaced by another directory" : "removed");
  HAS(cairn_errmsg(), want);
  /* the hook's next save refuses too, before writing */
  cr_assert_eq(rig_run(&g), CAIRN_E_NOT_FOUND);
  HAS(cairn_monitored_session_errmsg(g.ms), "CheckpointSaverHook: checkpoint directory '");
  rig_free(&g);
  struct stat sb;
  if (replace) {
    DIR *d = opendir(g_dir);
    cr_assert_not_null(d);
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
      cr_assert(!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."), "'%s' was written into the new directory",
                de->d_name);
    closedir(d);
    char ck[400];
    snprintf(ck, sizeof ck, "%s/model.ckpt-1", old);
    cr_assert_eq(stat(ck, &sb), 0, "the checkpoint went where the directory went");
    rm_tree(old);
  } else {
    cr_assert_neq(stat(g_dir, &sb), 0, "'%s' was made again", g_dir);
  }
}

Test(async_hook, a_directory_removed_during_phase_2_fails_the_save) { lose_dir_in_phase_2(0); }

Test(async_hook, a_directory_replaced_during_phase_2_gets_nothing_written) { lose_dir_in_phase_2(1); }
