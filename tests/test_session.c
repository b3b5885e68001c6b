/* cairn/session.h: sessions, runs, ops, Scaffold and SessionManager.
 *
 * Tests ported from TensorFlow's own are named after the TF test they
 * mirror (tensorflow/python/training/session_manager_test.py and the
 * ScaffoldTest of monitored_session_test.py).
 * A "#N" tag is a scenario number: every test mirroring one TF test (or one
 * derived scenario) carries the same tag, so a search for it finds them. ★
 * marks the scenarios that matter most (start reading there); (D) marks a
 * scenario derived from TF's code, with no TF test of its own. The TF
 * behaviour itself is described in doc/session-semantics.md.
 *
 * Ported from session_manager_test.py (SessionManager):
 *   #1 testPrepareSessionSucceeds, #2 ...WithInitFeedDict, #3 ...WithInitFn,
 *   #4 ...WithLocalInitFeedDict (2.x), #5 testPrepareSessionFails,
 *   #6 testRecoverSession, #7 testWaitForSessionReturnsNoneAfterTimeout,
 *   #8 testInitWithNoneLocalInitOpError, #9 testRecoverSessionWithReadyForLocalInitOp,
 *   #10 ...FailsToReadyLocal, #11 testRecoverSessionNoChkptStillRunsLocalInitOp,
 *   #12 testRecoverSessionFailsStillRunsLocalInitOp, #13 testWaitForSessionLocalInit
 *   (as TF, plus a version with real chief and worker threads),
 *   #14 testWaitForSessionWithReadyForLocalInitOpFailsToReadyLocal,
 *   #15 testWaitForSessionInsufficientReadyForLocalInitCheck,
 *   #16 testPrepareSessionWithReadyForLocalInitOp, #17 testPrepareSessionWithPartialInitOp,
 *   #18 testPrepareSessionDidNotInitLocalVariable, #20 testPrepareSessionWithReadyNotReadyForLocal,
 *   #21 testPrepareSessionWithInsufficientReadyForLocalInitCheck,
 *   #22 ObsoleteSessionManagerTest: testPrepareSessionSucceeds, testRecoverSession,
 *       testWaitForSessionReturnsNoneAfterTimeout, and a legacy op's other error.
 * Ported from monitored_session_test.py, ScaffoldTest: #23-#31, all of it
 *   (test_nothing_created_before_finalize, test_defaults_empty_graph,
 *   test_defaults_no_variables, test_caches_values,
 *   test_raise_error_if_more_than_one_cached_item, test_uses_passed_values,
 *   test_graph_is_finalized, #30 test_new_scaffold_from_default_scaffold and
 *   _from_existing_scaffold as two tests, test_copy_from_scaffold_is_scaffold).
 * Derived partial-restore scenarios (D): #132 a restricted Saver restores a
 *   subset and the ready check fails naming the rest; #133 a full Saver on a
 *   checkpoint lacking a variable fails with "not found in checkpoint"; #134
 *   warm start through init_fn, not re-applied after a restart; #135 the
 *   local_init_op trick; #136 the Horovod pattern (rank 0 restores, the
 *   others initialize, then a broadcast), at the SessionManager level.
 *
 * Not ported, and why:
 *   #19 testPrepareSessionDidNotInitLocalVariableList: TF passes a Python
 *       list as init_op; a cairn init_op is one op (a list is a named group,
 *       which #18 already covers).
 *   #15/#21 follow the older TF: the error of local_init_op propagates
 *       (TF's two vintages of these tests differ: later TF lets an
 *       initializer that reads an uninitialized variable fall back to its
 *       initial value, which has no cairn analogue).
 *   #17 without TF's resource variables (w_res, x_res): cairn has one kind
 *       of variable; and w, x get constants, not v's value (see #15).
 *   #22: the legacy ready op returning an int32 on success has no analogue
 *       (a ready op returns a status); the "uninitialized" error path is
 *       ported.
 *   #136 needs hooks (BroadcastGlobalVariablesHook's after_create_session);
 *       here the broadcast is an op run after prepare_session.
 * cairn's additions are tested too: the partial-restore and warm-start
 * options, long messages on the handles, readiness across threads, the
 * checkpoint wait budget, runs with feeds and fetches, ops, collections.
 *
 * Every test works in its own mkdtemp directory, uses a fake clock (sleeps
 * advance it; a few thread tests also yield for a millisecond), never forks.
 */
#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <criterion/criterion.h>
#include "rm_tree.h"
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cairn/ckpt.h"
#include "cairn/interop.h"
#include "cairn/saver.h"
#include "cairn/scaffold.h"
#include "cairn/session.h"
#include "cairn/tensor.h"
#include "cairn/var.h"

/* ==== fixtures ==================================================================== */

static char g_dir[256];

/* The fake environment: sleep advances the clock; log lines are kept. */
static struct {
  pthread_mutex_t mu;
  double now;
  int sleeps;
  double slept;
  long real_ns;                 /* also sleep for real (thread tests) */
  void (*on_sleep)(int nth);    /* called after each sleep */
  char log[65536];
} F = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0, NULL, ""};

static double f_now(void *ctx) {
  (void)ctx;
  pthread_mutex_lock(&F.mu);
  double t = F.now;
  pthread_mutex_unlock(&F.mu);
  return t;
}

static void f_sleep(void *ctx, double secs) {
  (void)ctx;
  pthread_mutex_lock(&F.mu);
  F.now += secs;
  int nth = __atomic_add_fetch(&F.sleeps, 1, __ATOMIC_SEQ_CST); /* the chief thread reads it */
  F.slept += secs;
  long ns = F.real_ns;
  void (*hook)(int) = F.on_sleep;
  pthread_mutex_unlock(&F.mu);
  if (ns) {
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
  }
  if (hook) hook(nth);
}

static void f_log(void *ctx, cairn_log_level level, const char *msg) {
  (void)ctx;
  (void)level;
  pthread_mutex_lock(&F.mu);
  size_t used = strlen(F.log);
  snprintf(F.log + used, sizeof F.log - used, "%s\n", msg);
  pthread_mutex_unlock(&F.mu);
}

static const cairn_env ENV = {.now = f_now, .sleep = f_sleep, .log = f_log, .min_level = CAIRN_LOG_DEBUG};

static int logged(const char *needle) {
  pthread_mutex_lock(&F.mu);
  int found = strstr(F.log, needle) != NULL;
  pthread_mutex_unlock(&F.mu);
  return found;
}

static void setup(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(g_dir, sizeof g_dir, "%s/cairn-session-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  cr_assert_not_null(mkdtemp(g_dir), "mkdtemp: %s", strerror(errno));
  F.now = 1000;
  F.sleeps = 0;
  F.slept = 0;
  F.real_ns = 0;
  F.on_sleep = NULL;
  F.log[0] = '\0';
}

static void teardown(void) {
  if (g_dir[0]) rm_tree(g_dir);
}

TestSuite(session_manager, .init = setup, .fini = teardown, .timeout = 30);
TestSuite(obsolete_session_manager, .init = setup, .fini = teardown, .timeout = 30);
TestSuite(scaffold, .init = setup, .fini = teardown, .timeout = 30);
TestSuite(partial_restore, .init = setup, .fini = teardown, .timeout = 30);
TestSuite(strict_restore, .init = setup, .fini = teardown, .timeout = 30);
TestSuite(session, .init = setup, .fini = teardown, .timeout = 30);
TestSuite(ops, .init = setup, .fini = teardown, .timeout = 30);

#define OK(expr) cr_assert_eq((expr), CAIRN_OK, "%s: %s", #expr, cairn_errmsg())
#define HAS(hay, needle) cr_assert_not_null(strstr((hay), (needle)), "'%s' lacks '%s'", (hay), (needle))

/* g_dir + "/" + name, in a ring of buffers. */
static const char *P(const char *name) {
  static char ring[8][600];
  static int k;
  char *b = ring[k++ & 7];
  snprintf(b, 600, "%s/%s", g_dir, name);
  return b;
}

static cairn_registry *new_reg(void) {
  cairn_registry *r;
  OK(cairn_registry_new(7, &r));
  return r;
}

/* An f32 variable of shape (3) whose initializer fills it with `init`. */
static cairn_var *mkvar(cairn_registry *r, const char *name, float init, unsigned coll) {
  int64_t shape[1] = {3};
  cairn_var *v;
  OK(cairn_var_new(r, name, CAIRN_DTYPE_F32, 1, shape, cairn_init_constant(init), coll, &v));
  return v;
}

static float val(const cairn_var *v) {
  const float *d = cairn_var_tensor(v)->data;
  cr_assert(d[0] == d[1] && d[1] == d[2], "'%s' is not uniform", cairn_var_name(v));
  return d[0];
}

static void setval(cairn_var *v, float x) {
  float *d = cairn_var_tensor(v)->data;
  for (int i = 0; i < 3; i++) d[i] = x;
  cairn_var_set_initialized(v, 1);
}

static int inited(const cairn_var *v) { return cairn_var_is_initialized(v); }

/* ---- user ops ---- */

struct assign {
  cairn_var *dst, *src; /* dst = scale·src, or dst = value when src is NULL */
  float value, scale;
  const char *feed;     /* dst = the f32 tensor fed under this name */
  int *runs;            /* counts the runs when not NULL */
};

static cairn_status assign_fn(cairn_session *s, void *user) {
  struct assign *a = user;
  if (a->runs) ++*a->runs;
  float x = a->value;
  if (a->feed) {
    const cairn_tensor *t = cairn_session_feed(s, a->feed);
    if (!t) return cairn_session_fail(s, CAIRN_E_INVALID, "You must feed a value for placeholder tensor '%s'", a->feed);
    x = ((const float *)t->data)[0];
  } else if (a->src) {
    if (!cairn_var_is_initialized(a->src))
      return cairn_session_fail(s, CAIRN_E_UNINITIALIZED, "Attempting to use uninitialized value %s",
                                cairn_var_name(a->src));
    x = a->scale * val(a->src);
  }
  setval(a->dst, x);
  return CAIRN_OK;
}

/* An op named name setting dst (copy of the descriptor, freed with the op). */
static cairn_op *op_assign(const char *name, struct assign a) {
  struct assign *u = malloc(sizeof *u);
  cr_assert_not_null(u);
  *u = a;
  cairn_op *op;
  OK(cairn_op_new(name, assign_fn, u, free, &op));
  return op;
}

/* TF's `w = Variable(scale·src)` initializer. */
static cairn_op *op_init_from(const char *name, cairn_var *dst, cairn_var *src, float scale) {
  struct assign a = {dst, src, 0, scale, NULL, NULL};
  return op_assign(name, a);
}

static cairn_op *op_init1(const char *name, cairn_var *v) {
  cairn_op *op;
  OK(cairn_op_new_init_vars(name, &v, 1, &op));
  return op;
}

static cairn_op *op_init_coll(cairn_registry *r, const char *name, unsigned mask) {
  cairn_op *op;
  OK(cairn_op_new_init(name, r, mask, &op));
  return op;
}

static cairn_ready_op *uninit(cairn_registry *r, unsigned mask) {
  cairn_ready_op *op;
  OK(cairn_ready_op_new_uninitialized(mask == CAIRN_COLL_GLOBAL ? "report_uninitialized_variables_1"
                                                                : "report_uninitialized_variables",
                                      r, mask, &op));
  return op;
}

#define ALL (CAIRN_COLL_GLOBAL | CAIRN_COLL_LOCAL)

/* A SessionManager with the fake env. */
static cairn_session_manager *mk_sm(cairn_registry *r, cairn_op *local, cairn_ready_op *ready, cairn_ready_op *rfl,
                                    double recovery_wait) {
  cairn_session_manager_options o = cairn_session_manager_options_default();
  o.local_init_op = local;
  o.ready_op = ready;
  o.ready_for_local_init_op = rfl;
  if (recovery_wait > 0) o.recovery_wait_secs = recovery_wait;
  o.env = &ENV;
  cairn_session_manager *sm;
  OK(cairn_session_manager_new(r, &o, &sm));
  return sm;
}

static cairn_saver *mk_saver(cairn_registry *r) {
  cairn_saver_options so = cairn_saver_options_default();
  so.write.no_fsync = 1;
  cairn_saver *s;
  OK(cairn_saver_new(r, &so, &s));
  return s;
}

static cairn_saver *mk_saver_list(cairn_var *const *vars, size_t n) {
  cairn_saver_options so = cairn_saver_options_default();
  so.write.no_fsync = 1;
  cairn_saver *s;
  OK(cairn_saver_new_list(vars, n, &so, &s));
  return s;
}

/* Saves the GLOBAL variables of r to dir/model.ckpt-step; returns the path. */
static const char *save_ckpt(cairn_saver *sv, const char *dir, int64_t step) {
  static char path[700];
  char prefix[650];
  snprintf(prefix, sizeof prefix, "%s/model.ckpt", dir);
  OK(cairn_saver_save(sv, prefix, step, path, sizeof path));
  return path;
}

static cairn_prepare_options popts(cairn_op *init_op, cairn_saver *saver, const char *dir) {
  cairn_prepare_options o = cairn_prepare_options_default();
  o.init_op = init_op;
  o.saver = saver;
  o.checkpoint_dir = dir;
  return o;
}

/* ==== SessionManager ================================================================ */

/* #1 */
Test(session_manager, testPrepareSessionSucceeds) {
  cairn_registry *r = new_reg();
  cairn_var *v = mkvar(r, "v", 1, CAIRN_COLL_GLOBAL);
  cairn_op *init = op_init_coll(r, "init", CAIRN_COLL_GLOBAL);
  cairn_ready_op *ready = uninit(r, ALL);
  cairn_session_manager *sm = mk_sm(r, NULL, ready, NULL, 0);
  cairn_prepare_options o = popts(init, NULL, NULL);
  cairn_session *s;
  OK(cairn_session_manager_prepare_session(sm, &o, &s));
  cr_assert(inited(v));
  cr_assert_eq(val(v), 1.0f);
  cr_assert_not(cairn_session_is_closed(s));
  cr_assert_eq(cairn_session_registry(s), r);
  cairn_session_free(s);
  cairn_session_manager_free(sm);
  cairn_op_free(init);
  cairn_ready_op_free(ready);
  cairn_registry_free(r);
}

/* #2: the feeds reach init_op. */
Test(session_manager, testPrepareSessionSucceedsWithInitFeedDict) {
  cairn_registry *r = new_reg();
  cairn_var *v = mkvar(r, "v", 0, CAIRN_COLL_GLOBAL);
  struct assign a = {v, NULL, 0, 0, "p", NULL};
  cairn_op *init = op_assign("init", a);
  cairn_ready_op *ready = uninit(r, ALL);
  cairn_session_manager *sm = mk_sm(r, NULL, ready, NULL, 0);
  float pv[1] = {3};
  int64_t one = 1;
  cairn_tensor p;
  OK(cairn_tensor_view(&p, pv, CAIRN_DTYPE_F32, 1, &one));
  cairn_feed feed = {"p", &p};
  cairn_prepare_options o = popts(init, NULL, NULL);
  o.init_feeds = &feed;
  o.n_init_feeds = 1;
  cairn_session *s;
  OK(cairn_session_manager_prepare_session(sm, &o, &s));
  cr_assert(inited(v));
  cr_assert_eq(val(v), 3.0f);
  cairn_session_free(s);
  /* Without the feed, init_op's own error propagates. */
  setval(v, 0);
  cairn_var_set_initialized(v, 0);
  o.n_init_feeds = 0;
  o.init_feeds = NULL;
  cr_assert_eq(cairn_session_manager_prepare_session(sm, &o, &s), CAIRN_E_INVALID);
  cr_assert_null(s);
  HAS(cairn_session_manager_errmsg(sm), "You must feed a value for placeholder tensor 'p'");
  cairn_session_manager_free(sm);
  cairn_op_free(init);
  cairn_ready_op_free(ready);
  cairn_registry_free(r);
}

static cairn_status init_fn_v(cairn_session *s, void *user) {
  cairn_var *v = user;
  (void)s;
  setval(v, 125);
  return CAIRN_OK;
}

/* #3 */
Test(session_manager, testPrepareSessionSucceedsWithInitFn) {
  cairn_registry *r = new_reg();
  cairn_var *v = mkvar(r, "v", 0, CAIRN_COLL_GLOBAL);
  cairn_ready_op *ready = uninit(r, ALL);
  cairn_session_manager *sm = mk_sm(r, NULL, ready, NULL, 0);
  cairn_prepare_options o = popts(NULL, NULL, NULL);
  o.init_fn = init_fn_v;
  o.init_fn_user = v;
  cairn_session *s;
  OK(cairn_session_manager_prepare_session(sm, &o, &s));
  cr_assert_eq(val(v), 125.0f);
  cairn_session_free(s);
  cairn_session_manager_free(sm);
  cairn_ready_op_free(ready);
  cairn_registry_free(r);
}

static cairn_status init_fn_aborts(cairn_session *s, void *user) {
  int *calls = user;
  ++*calls;
  return cairn_session_fail(s, CAIRN_E_ABORTED, "init_fn: parameter server %d restarted", *calls);
}

static cairn_status init_fn_saver_error(cairn_session *s, void *user) {
  (void)s;
  cairn_saver *sv = user;
  return cairn_saver_restore(sv, "/nonexistent/model.ckpt-1", NULL); /* fails through cairn_errmsg() */
}

/* init_fn's errors propagate from prepare_session with their message: a
 * recoverable CAIRN_E_ABORTED is what MonitoredSession retries on (TF's
 * test_retry_initialization_on_aborted_error). */
Test(session_manager, init_fn_errors_propagate_with_their_message) {
  cairn_registry *r = new_reg();
  cairn_var *v = mkvar(r, "v", 1, CAIRN_COLL_GLOBAL);
  cairn_op *init = op_init_coll(r, "init", CAIRN_COLL_GLOBAL);
  cairn_session_manager *sm = mk_sm(r, NULL, NULL, NULL, 0);
  int calls = 0;
  cairn_prepare_options o = popts(init, NULL, NULL);
  o.init_fn = init_fn_aborts;
  o.init_fn_user = &calls;
  cairn_session *s = (void *)1;
  cr_assert_eq(cairn_session_manager_prepare_session(sm, &o, &s), CAIRN_E_ABORTED);
  cr_assert_null(s);
  cr_assert_eq(calls, 1);
  cr_assert(inited(v), "init_op ran before init_fn");
  cr_assert_str_eq(cairn_session_manager_errmsg(sm), "init_fn: parameter server 1 restarted");
  cr_assert_str_eq(cairn_errmsg(), "init_fn: parameter server 1 restarted");
  cairn_saver *sv = mk_saver(r);
  o.init_fn = init_fn_saver_error;
  o.init_fn_user = sv;
  cr_assert_eq(cairn_session_manager_prepare_session(sm, &o, &s), CAIRN_E_NOT_FOUND);
  HAS(cairn_session_manager_errmsg(sm), "/nonexistent/model.ckpt-1");
  cairn_saver_free(sv);
  cairn_session_manager_free(sm);
  cairn_op_free(init);
  cairn_registry_free(r);
}

/* #4 (TF 2.x): the manager's local_init feeds reach local_init_op. */
Test(session_manager, testPrepareSessionSucceedsWithLocalInitFeedDict) {
  cairn_registry *r = new_reg();
  cairn_var *v = mkvar(r, "v", 0, CAIRN_COLL_LOCAL);
  struct assign a = {v, NULL, 0, 0, "p", NULL};
  cairn_op *local = op_assign("local_init", a);
  float pv[1] = {2};
  int64_t one = 1;
  cairn_tensor p;
  OK(cairn_tensor_view(&p, pv, CAIRN_DTYPE_F32, 1, &one));
  cairn_feed feed = {"p", &p};
  cairn_session_manager_options so = cairn_session_manager_options_default();
  so.local_init_op = local;
  so.local_init_feeds = &feed;
  so.n_local_init_feeds = 1;
  so.env = &ENV;
  cairn_session_manager *sm;
  OK(cairn_session_manager_new(r, &so, &sm));
  cairn_prepare_options o = cairn_prepare_options_default();
  cairn_session *s;
  OK(cairn_session_manager_prepare_session(sm, &o, &s));
  cr_assert(inited(v));
  cr_assert_eq(val(v), 2.0f);
  cairn_session_free(s);
  cairn_session_manager_free(sm);
  cairn_op_free(local);
  cairn_registry_free(r);
}

/* #5 ★ */
Test(session_manager, testPrepareSessionFails) {
  char dir[600], dir2[600];
  snprintf(dir, sizeof dir, "%s", P("prepare_session"));
  snprintf(dir2, sizeof dir2, "%s", P("prepare_session2"));
  cr_assert_eq(mkdir(dir, 0700), 0);
  {
    cairn_registry *r = new_reg();
    cairn_var *v = mkvar(r, "v", 1, CAIRN_COLL_GLOBAL);
    cairn_op *init = op_init_coll(r, "init", CAIRN_COLL_GLOBAL);
    cairn_ready_op *ready = uninit(r, ALL);
    cairn_session_manager *sm = mk_sm(r, NULL, ready, NULL, 0);
    cairn_saver *sv = mk_saver(r);
    cairn_prepare_options o = popts(init, sv, dir);
    cairn_session *s;
    OK(cairn_session_manager_prepare_session(sm, &o, &s));
    cr_assert_eq(val(v), 1.0f);
    save_ckpt(sv, dir, 0);
    cairn_session_free(s);
    cairn_saver_free(sv);
    cairn_session_manager_free(sm);
    cairn_op_free(init);
    cairn_ready_op_free(ready);
    cairn_registry_free(r);
  }
  cr_assert_eq(rename(dir, dir2), 0);
  cr_assert_eq(mkdir(dir, 0700), 0);
  cairn_registry *r = new_reg();
  cairn_var *v = mkvar(r, "v", 6, CAIRN_COLL_GLOBAL);
  cairn_ready_op *ready = uninit(r, ALL);
  cairn_session_manager *sm = mk_sm(r, NULL, ready, NULL, 0); /* default recovery_wait_secs 30 */
  cairn_saver *sv = mk_saver(r);
  cairn_prepare_options o = popts(NULL, sv, dir);
  o.wait_for_checkpoint = 1;
  o.max_wait_secs = 2;
  cairn_session *s;
  cr_assert_eq(cairn_session_manager_prepare_session(sm, &o, &s), CAIRN_E_NOT_READY);
  cr_assert_null(s);
  HAS(cairn_errmsg(), "Model is not initialized and no init_op or init_fn or local_init_op was given");
  /* The budget counts sleeps: max_wait 2 s with a 30 s interval is exactly
     one 30 s sleep. */
  cr_assert_eq(F.sleeps, 1);
  cr_assert_float_eq(F.slept, 30.0, 1e-9);
  cr_assert(logged("Waiting for checkpoint to be available."));
  cr_assert_not(inited(v));
  /* Rename the checkpoint directory back: restored, no init_op needed. */
  rm_tree(dir);
  cr_assert_eq(rename(dir2, dir), 0);
  OK(cairn_session_manager_prepare_session(sm, &o, &s));
  cr_assert(inited(v));
  cr_assert_eq(val(v), 1.0f);
  cr_assert_eq(F.sleeps, 1, "no wait when the checkpoint is there");
  cairn_session_free(s);
  cairn_saver_free(sv);
  cairn_session_manager_free(sm);
  cairn_ready_op_free(ready);
  cairn_registry_free(r);
}

/* #6 helper: a new graph with v = 2 recovers v = 1. */
static void recovered_variable(const char *dir, const char *file, cairn_status want) {
  cairn_registry *r = new_reg();
  cairn_var *v = mkvar(r, "v", 2, CAIRN_COLL_GLOBAL);
  cairn_ready_op *ready = uninit(r, ALL);
  cairn_session_manager *sm = mk_sm(r, NULL, ready, NULL, 0);
  cairn_saver *sv = mk_saver(r);
  cairn_prepare_options o = popts(NULL, sv, dir);
  o.checkpoint_filename_with_path = file;
  cairn_session *s;
  int initialized = -1;
  cr_assert_eq(cairn_session_manager_recover_session(sm, &o, &s, &initialized), want, "%s", cairn_errmsg());
  if (want == CAIRN_OK) {
    cr_assert_eq(initialized, 1);
    cr_assert(inited(v));
    cr_assert_eq(val(v), 1.0f);
    cairn_session_free(s);
  } else {
    cr_assert_null(s);
    HAS(cairn_errmsg(), "Can not provide both checkpoint_dir and checkpoint_filename_with_path.");
  }
  cairn_saver_free(sv);
  cairn_session_manager_free(sm);
  cairn_ready_op_free(ready);
  cairn_registry_free(r);
}

/* #6 ★ */
Test(session_manager, testRecoverSession) {
  const char *dir = P("recover_session");
  cr_assert_eq(mkdir(dir, 0700), 0);
  cairn_registry *r = new_reg();
  cairn_var *v = mkvar(r, "v", 1, CAIRN_COLL_GLOBAL);
  cairn_ready_op *ready = uninit(r, ALL);
  cairn_session_manager *sm = mk_sm(r, NULL, ready, NULL, 0);
  cairn_saver *sv = mk_saver(r);
  cairn_prepare_options o = popts(NULL, sv, dir);
  cairn_session *s;
  int initialized = -1;
  OK(cairn_session_manager_recover_session(sm, &o, &s, &initialized));
  cr_assert_eq(initialized, 0);
  cr_assert_not(inited(v));
  cairn_op *vinit = op_init1("v/Assign", v);
  OK(cairn_session_run_op(s, vinit));
  cr_assert_eq(val(v), 1.0f);
  save_ckpt(sv, dir, 0);
  cairn_session_free(s);

  char latest[700];
  OK(cairn_latest_checkpoint(dir, latest, sizeof latest));
  recovered_variable(dir, NULL, CAIRN_OK);
  recovered_variable(NULL, latest, CAIRN_OK);
  recovered_variable(dir, latest, CAIRN_E_INVALID);
  cairn_op_free(vinit);
  cairn_saver_free(sv);
  cairn_session_manager_free(sm);
  cairn_ready_op_free(ready);
  cairn_registry_free(r);
}

/* A ready op that counts its calls around the default one. */
struct counting_ready {
  cairn_ready_op *inner;
  int calls;
};

static cairn_status counting_ready_fn(cairn_session *s, cairn_names *out, void *user) {
  struct counting_ready *c = user;
  c->calls++;
  cairn_status st = cairn_session_run_ready(s, c->inner, out);
  return st;
}

/* #7: recovery_wait 1 s, max_wait 3 s: attempts at t = 0, 1, 2, 3, then
 * DeadlineExceeded (remaining − interval < 0). */
Test(session_manager, testWaitForSessionReturnsNoneAfterTimeout) {
  cairn_registry *r = new_reg();
  cairn_var *v = mkvar(r, "v", 1, CAIRN_COLL_GLOBAL);
  struct counting_ready c = {uninit(r, ALL), 0};
  cairn_ready_op *ready;
  OK(cairn_ready_op_new("counting", counting_ready_fn, &c, NULL, &ready));
  cairn_session_manager *sm = mk_sm(r, NULL, ready, NULL, 1);
  cairn_session *s;
  cr_assert_eq(cairn_session_manager_wait_for_session(sm, 3, &s), CAIRN_E_DEADLINE);
  cr_assert_null(s);
  HAS(cairn_errmsg(), "Session was not ready after waiting 3 secs.");
  HAS(cairn_session_manager_errmsg(sm), "Variables not initialized: v");
  cr_assert_eq(c.calls, 4);
  cr_assert_eq(F.sleeps, 3);
  /* The worker says what it waits for. */
  cr_assert(logged("Waiting for model to be ready.  Ready_for_local_init_op:  None, ready: Variables not "
                   "initialized: v"));
  cr_assert_not(inited(v));
  cairn_session_manager_free(sm);
  cairn_ready_op_free(ready);
  cairn_ready_op_free(c.inner);
  cairn_registry_free(r);
}

/* #8 */
Test(session_manager, testInitWithNoneLocalInitOpError) {
  cairn_registry *r = new_reg();
  mkvar(r, "v", 1, CAIRN_COLL_GLOBAL);
  cairn_ready_op *rfl = uninit(r, CAIRN_COLL_GLOBAL);
  cairn_session_manager_options o = cairn_session_manager_options_default();
  o.ready_for_local_init_op = rfl;
  cairn_session_manager *sm = (void *)1;
  cr_assert_eq(cairn_session_manager_new(r, &o, &sm), CAIRN_E_INVALID);
  cr_assert_null(sm);
  HAS(cairn_errmsg(), "If you pass a ready_for_local_init_op you must also pass a local_init_op , "
                      "ready_for_local_init_op [report_uninitialized_variables_1]");
  cairn_ready_op_free(rfl);
  cairn_registry_free(r);
}

/* A checkpoint of v = 1 in dir (a graph of its own). */
static void checkpoint_v1(const char *dir) {
  cr_assert_eq(mkdir(dir, 0700), 0);
  cairn_registry *r = new_reg();
  cairn_var *v = mkvar(r, "v", 1, CAIRN_COLL_GLOBAL);
  setval(v, 1);
  cairn_saver *sv = mk_saver(r);
  save_ckpt(sv, dir, 0);
  cairn_saver_free(sv);
  cairn_registry_free(r);
}

/* #9 */
Test(session_manager, testRecoverSessionWithReadyForLocalInitOp) {
  const char *dir = P("recover_session_ready_for_local_init");
  checkpoint_v1(dir);
  cairn_registry *r = new_reg();
  cairn_var *v = mkvar(r, "v", 2, CAIRN_COLL_GLOBAL);
  cairn_var *w = mkvar(r, "w", 0, CAIRN_COLL_LOCAL);
  cairn_op *winit = op_init_from("w/Assign", w, v, 1);
  cairn_ready_op *ready = uninit(r, ALL), *rfl = uninit(r, CAIRN_COLL_GLOBAL);
  cairn_session_manager *sm = mk_sm(r, winit, ready, rfl, 0);
  cairn_saver *sv = mk_saver_list(&v, 1);
  cairn_prepare_options o = popts(NULL, sv, dir);
  cairn_session *s;
  int initialized;
  OK(cairn_session_manager_recover_session(sm, &o, &s, &initialized));
  cr_assert_eq(initialized, 1);
  cr_assert(inited(v) && inited(w));
  cr_assert_eq(val(v), 1.0f);
  cr_assert_eq(val(w), 1.0f, "local_init_op ran after the restore");
  cr_assert(logged("Restored model from "));
  cairn_session_free(s);
  cairn_saver_free(sv);
  cairn_session_manager_free(sm);
  cairn_op_free(winit);
  cairn_ready_op_free(ready);
  cairn_ready_op_free(rfl);
  cairn_registry_free(r);
}

/* #10 */
Test(session_manager, testRecoverSessionWithReadyForLocalInitOpFailsToReadyLocal) {
  const char *dir = P("recover_session_ready_for_local_init_fails");
  checkpoint_v1(dir);
  cairn_registry *r = new_reg();
  cairn_var *v = mkvar(r, "v", 2, CAIRN_COLL_GLOBAL);
  cairn_var *w = mkvar(r, "w", 0, CAIRN_COLL_LOCAL);
  cairn_op *winit = op_init_from("w/Assign", w, v, 1);
  cairn_ready_op *ready = uninit(r, ALL), *rfl = uninit(r, ALL); /* includes w itself */
  cairn_session_manager *sm = mk_sm(r, winit, ready, rfl, 0);
  cairn_saver *sv = mk_saver_list(&v, 1);
  cairn_prepare_options o = popts(NULL, sv, dir);
  cairn_session *s;
  int initialized;
  OK(cairn_session_manager_recover_session(sm, &o, &s, &initialized));
  cr_assert_eq(initialized, 0);
  cr_assert(inited(v));
  cr_assert_eq(val(v), 1.0f);
  cr_assert_not(inited(w), "local_init_op was skipped");
  cr_assert(logged("did not make model ready for local init: Variables not initialized: w"));
  cairn_session_free(s);
  cairn_saver_free(sv);
  cairn_session_manager_free(sm);
  cairn_op_free(winit);
  cairn_ready_op_free(ready);
  cairn_ready_op_free(rfl);
  cairn_registry_free(r);
}

/* #11 */
Test(session_manager, testRecoverSessionNoChkptStillRunsLocalInitOp) {
  cairn_registry *r = new_reg();
  cairn_var *w = mkvar(r, "w", 1, CAIRN_COLL_LOCAL);
  int runs = 0;
  struct assign a = {w, NULL, 1, 0, NULL, &runs};
  cairn_op *winit = op_assign("w/Assign", a);
  cairn_ready_op *ready = uninit(r, ALL), *rfl = uninit(r, CAIRN_COLL_GLOBAL);
  cairn_session_manager *sm = mk_sm(r, winit, ready, rfl, 0);
  cairn_prepare_options o = popts(NULL, NULL, NULL);
  cairn_session *s;
  int initialized;
  OK(cairn_session_manager_recover_session(sm, &o, &s, &initialized));
  cr_assert_eq(initialized, 0);
  cr_assert(inited(w));
  cr_assert_eq(val(w), 1.0f);
  cr_assert_eq(runs, 1, "local_init_op ran exactly once");
  cairn_session_free(s);
  cairn_session_manager_free(sm);
  cairn_op_free(winit);
  cairn_ready_op_free(ready);
  cairn_ready_op_free(rfl);
  cairn_registry_free(r);
}

/* #12 */
Test(session_manager, testRecoverSessionFailsStillRunsLocalInitOp) {
  const char *dir = P("empty");
  cr_assert_eq(mkdir(dir, 0700), 0);
  cairn_registry *r = new_reg();
  cairn_var *v = mkvar(r, "v", 1, CAIRN_COLL_GLOBAL);
  cairn_var *w = mkvar(r, "w", 1, CAIRN_COLL_LOCAL);
  cairn_op *winit = op_init1("w/Assign", w);
  cairn_ready_op *ready = uninit(r, ALL);
  cairn_session_manager *sm = mk_sm(r, winit, ready, NULL, 0);
  cairn_saver *sv = mk_saver_list(&v, 1);
  cairn_prepare_options o = popts(NULL, sv, dir);
  o.wait_for_checkpoint = 0;
  cairn_session *s;
  int initialized;
  OK(cairn_session_manager_recover_session(sm, &o, &s, &initialized));
  cr_assert_eq(initialized, 0);
  cr_assert_not(inited(v));
  cr_assert(inited(w));
  cr_assert_eq(val(w), 1.0f);
  cr_assert_eq(F.sleeps, 0);
  cairn_session_free(s);
  cairn_saver_free(sv);
  cairn_session_manager_free(sm);
  cairn_op_free(winit);
  cairn_ready_op_free(ready);
  cairn_registry_free(r);
}

/* #13 ★: v initialized by another session on the shared registry. */
Test(session_manager, testWaitForSessionLocalInit) {
  cairn_registry *r = new_reg();
  cairn_var *v = mkvar(r, "v", 1, CAIRN_COLL_GLOBAL);
  cairn_var *w = mkvar(r, "w", 0, CAIRN_COLL_LOCAL);
  cairn_op *winit = op_init_from("w/Assign", w, v, 1);
  cairn_ready_op *ready = uninit(r, ALL), *rfl = uninit(r, CAIRN_COLL_GLOBAL);
  cairn_session_manager *sm = mk_sm(r, winit, ready, rfl, 0);
  cairn_session *other;
  OK(cairn_session_new(r, 0, &other));
  cairn_op *vinit = op_init1("v/Assign", v);
  OK(cairn_session_run_op(other, vinit));
  cairn_session *s;
  OK(cairn_session_manager_wait_for_session(sm, 3, &s));
  cr_assert_neq(cairn_session_id(s), cairn_session_id(other), "a new session");
  cr_assert(inited(v) && inited(w));
  cr_assert_eq(val(v), 1.0f);
  cr_assert_eq(val(w), 1.0f);
  cr_assert_eq(F.sleeps, 0);
  cairn_session_free(s);
  cairn_session_free(other);
  cairn_session_manager_free(sm);
  cairn_op_free(vinit);
  cairn_op_free(winit);
  cairn_ready_op_free(ready);
  cairn_ready_op_free(rfl);
  cairn_registry_free(r);
}

/* #13 with threads: a chief thread prepares the model while a worker
 * thread waits for it on the same registry. */
/* The chief initializes the model once the worker has waited for it at
 * least once (the worker's fake sleeps), at most after max_polls polls of
 * 1 ms: with a fixed delay alone, a loaded machine could start the worker
 * after the chief had finished, and it would never wait. */
struct chief_arg {
  cairn_registry *r;
  cairn_op *init;
  long max_polls;
  cairn_status st;
};

static void *chief_thread(void *p) {
  struct chief_arg *a = p;
  const struct timespec ms = {0, 1000000};
  for (long i = 0; i < a->max_polls && __atomic_load_n(&F.sleeps, __ATOMIC_SEQ_CST) == 0; i++) nanosleep(&ms, NULL);
  cairn_session_manager_options o = cairn_session_manager_options_default();
  o.env = &ENV;
  cairn_session_manager *sm;
  a->st = cairn_session_manager_new(a->r, &o, &sm);
  if (a->st) return NULL;
  cairn_prepare_options po = cairn_prepare_options_default();
  po.init_op = a->init;
  cairn_session *s;
  a->st = cairn_session_manager_prepare_session(sm, &po, &s);
  if (!a->st) cairn_session_free(s);
  cairn_session_manager_free(sm);
  return NULL;
}

struct worker_arg {
  cairn_session_manager *sm;
  double max_wait;
  cairn_status st;
  char msg[600];
};

static void *worker_thread(void *p) {
  struct worker_arg *a = p;
  cairn_session *s;
  a->st = cairn_session_manager_wait_for_session(a->sm, a->max_wait, &s);
  snprintf(a->msg, sizeof a->msg, "%s", cairn_errmsg());
  if (!a->st) cairn_session_free(s);
  return NULL;
}

Test(session_manager, testWaitForSessionLocalInit_chief_and_worker_threads) {
  F.real_ns = 1000000; /* each fake 1 s wait also yields 1 ms */
  cairn_registry *r = new_reg();
  cairn_var *v = mkvar(r, "v", 1, CAIRN_COLL_GLOBAL);
  cairn_var *w = mkvar(r, "w", 0, CAIRN_COLL_LOCAL);
  cairn_op *winit = op_init_from("w/Assign", w, v, 2);
  cairn_op *init = op_init_coll(r, "init", CAIRN_COLL_GLOBAL);
  cairn_ready_op *ready = uninit(r, ALL), *rfl = uninit(r, CAIRN_COLL_GLOBAL);
  cairn_session_manager *sm = mk_sm(r, winit, ready, rfl, 1);
  struct worker_arg wa = {sm, 5000, CAIRN_E_INVALID, ""};
  struct chief_arg ca = {r, init, 20000, CAIRN_E_INVALID};
  pthread_t tw, tc;
  cr_assert_eq(pthread_create(&tw, NULL, worker_thread, &wa), 0);
  cr_assert_eq(pthread_create(&tc, NULL, chief_thread, &ca), 0);
  pthread_join(tc, NULL);
  pthread_join(tw, NULL);
  cr_assert_eq(ca.st, CAIRN_OK);
  cr_assert_eq(wa.st, CAIRN_OK, "worker: %s", wa.msg);
  cr_assert(inited(v) && inited(w));
  cr_assert_eq(val(w), 2.0f, "the worker's local_init_op ran after the chief initialized v");
  cr_assert_gt(F.sleeps, 0, "the worker had to wait for the chief");
  cr_assert(logged("Ready_for_local_init_op:  Variables not initialized: v, ready: None"));
  cairn_session_manager_free(sm);
  cairn_op_free(init);
  cairn_op_free(winit);
  cairn_ready_op_free(ready);
  cairn_ready_op_free(rfl);
  cairn_registry_free(r);
}

/* A worker waiting for a chief that never comes: bounded, and the error
 * says which variables and who should initialize them (TF's message alone
 * leaves workers polling with "Waiting for model to be ready" and no hint). */
Test(session_manager, wait_for_session_without_chief_is_bounded_and_says_why) {
  F.real_ns = 100000;
  cairn_registry *r = new_reg();
  mkvar(r, "dense/kernel", 1, CAIRN_COLL_GLOBAL);
  mkvar(r, "dense/bias", 1, CAIRN_COLL_GLOBAL);
  cairn_ready_op *ready = uninit(r, ALL);
  cairn_session_manager *sm = mk_sm(r, NULL, ready, NULL, 30);
  struct worker_arg wa = {sm, 1800, CAIRN_OK, ""};
  pthread_t tw;
  cr_assert_eq(pthread_create(&tw, NULL, worker_thread, &wa), 0);
  pthread_join(tw, NULL);
  cr_assert_eq(wa.st, CAIRN_E_DEADLINE);
  HAS(wa.msg, "Session was not ready after waiting 1800 secs.");
  HAS(cairn_session_manager_errmsg(sm), "ready: Variables not initialized: dense/kernel, dense/bias");
  HAS(cairn_session_manager_errmsg(sm), "the chief does");
  cr_assert_eq(F.sleeps, 60);
  cairn_session_manager_free(sm);
  cairn_ready_op_free(ready);
  cairn_registry_free(r);
}

/* #14 */
Test(session_manager, testWaitForSessionWithReadyForLocalInitOpFailsToReadyLocal) {
  cairn_registry *r = new_reg();
  cairn_var *v = mkvar(r, "v", 1, CAIRN_COLL_GLOBAL);
  cairn_var *w = mkvar(r, "w", 0, CAIRN_COLL_LOCAL);
  cairn_op *winit = op_init_from("w/Assign", w, v, 1);
  cairn_ready_op *ready = uninit(r, ALL), *rfl = uninit(r, ALL);
  cairn_session_manager *sm = mk_sm(r, winit, ready, rfl, 1);
  cairn_session *s;
  cr_assert_eq(cairn_session_manager_wait_for_session(sm, 3, &s), CAIRN_E_DEADLINE);
  HAS(cairn_errmsg(), "Session was not ready after waiting 3 secs.");
  cr_assert(logged("Ready_for_local_init_op:  Variables not initialized: v, w, ready: None"));
  cr_assert_not(inited(w));
  cairn_session_manager_free(sm);
  cairn_op_free(winit);
  cairn_ready_op_free(ready);
  cairn_ready_op_free(rfl);
  cairn_registry_free(r);
}

/* #15 (older TF's version of the test): local_init_op's own error propagates. */
Test(session_manager, testWaitForSessionInsufficientReadyForLocalInitCheck) {
  cairn_registry *r = new_reg();
  cairn_var *v = mkvar(r, "v", 1, CAIRN_COLL_GLOBAL);
  cairn_var *w = mkvar(r, "w", 0, CAIRN_COLL_LOCAL);
  cairn_op *winit = op_init_from("w/Assign", w, v, 1);
  cairn_ready_op *ready = uninit(r, ALL);
  cairn_session_manager *sm = mk_sm(r, winit, ready, NULL, 1);
  cairn_session *s;
  cr_assert_eq(cairn_session_manager_wait_for_session(sm, 3, &s), CAIRN_E_UNINITIALIZED);
  cr_assert_null(s);
  HAS(cairn_errmsg(), "Attempting to use uninitialized value v");
  HAS(cairn_session_manager_errmsg(sm), "Attempting to use uninitialized value v");
  cr_assert_eq(F.sleeps, 0, "no retry after an error of local_init_op");
  cairn_session_manager_free(sm);
  cairn_op_free(winit);
  cairn_ready_op_free(ready);
  cairn_registry_free(r);
}

/* #16 ★: init_op, then the gate passes, then local init. */
Test(session_manager, testPrepareSessionWithReadyForLocalInitOp) {
  cairn_registry *r = new_reg();
  cairn_var *v = mkvar(r, "v", 1, CAIRN_COLL_GLOBAL);
  cairn_var *w = mkvar(r, "w", 0, CAIRN_COLL_LOCAL);
  cairn_var *x = mkvar(r, "x", 0, CAIRN_COLL_LOCAL);
  cairn_op *parts[2] = {op_init_from("w/Assign", w, v, 1), op_init_from("x/Assign", x, v, 3)};
  cairn_op *local;
  OK(cairn_op_new_group("group_deps", parts, 2, &local));
  cairn_op *vinit = op_init1("v/Assign", v);
  cairn_ready_op *ready = uninit(r, ALL), *rfl = uninit(r, CAIRN_COLL_GLOBAL);
  cairn_session_manager *sm = mk_sm(r, local, ready, rfl, 0);
  cairn_prepare_options o = popts(vinit, NULL, NULL);
  cairn_session *s;
  OK(cairn_session_manager_prepare_session(sm, &o, &s));
  cr_assert(inited(v) && inited(w) && inited(x));
  cr_assert_eq(val(v), 1.0f);
  cr_assert_eq(val(w), 1.0f);
  cr_assert_eq(val(x), 3.0f);
  cairn_session_free(s);
  cairn_session_manager_free(sm);
  cairn_op_free(parts[0]);
  cairn_op_free(parts[1]);
  cairn_op_free(local);
  cairn_op_free(vinit);
  cairn_ready_op_free(ready);
  cairn_ready_op_free(rfl);
  cairn_registry_free(r);
}

/* #17: only a local_init_op, no ready ops: it counts as an initializer. */
Test(session_manager, testPrepareSessionWithPartialInitOp) {
  cairn_registry *r = new_reg();
  cairn_var *v = mkvar(r, "v", 1, CAIRN_COLL_GLOBAL);
  cairn_var *w = mkvar(r, "w", 1, CAIRN_COLL_LOCAL);
  cairn_var *x = mkvar(r, "x", 3, CAIRN_COLL_LOCAL);
  cairn_op *local = op_init_coll(r, "group_deps", CAIRN_COLL_LOCAL);
  cairn_session_manager *sm = mk_sm(r, local, NULL, NULL, 0);
  cairn_prepare_options o = popts(NULL, NULL, NULL);
  cairn_session *s;
  OK(cairn_session_manager_prepare_session(sm, &o, &s));
  cr_assert_not(inited(v));
  cr_assert(inited(w) && inited(x));
  cr_assert_eq(val(w), 1.0f);
  cr_assert_eq(val(x), 3.0f);
  cairn_session_free(s);
  cairn_session_manager_free(sm);
  cairn_op_free(local);
  cairn_registry_free(r);
}

/* #18 ★ */
Test(session_manager, testPrepareSessionDidNotInitLocalVariable) {
  cairn_registry *r = new_reg();
  cairn_var *v = mkvar(r, "v", 1, CAIRN_COLL_GLOBAL);
  cairn_var *w = mkvar(r, "w", 0, CAIRN_COLL_LOCAL);
  cairn_op *vinit = op_init1("v/Assign", v);
  cairn_ready_op *ready = uninit(r, ALL);
  cairn_session_manager *sm = mk_sm(r, NULL, ready, NULL, 0);
  cairn_prepare_options o = popts(vinit, NULL, NULL);
  cairn_session *s;
  cr_assert_eq(cairn_session_manager_prepare_session(sm, &o, &s), CAIRN_E_NOT_READY);
  cr_assert_null(s);
  HAS(cairn_errmsg(), "Init operations did not make model ready.  Init op: v/Assign, init fn: None, "
                      "local_init_op: None, error: Variables not initialized: w");
  cr_assert(inited(v));
  cr_assert_not(inited(w));
  cairn_session_manager_free(sm);
  cairn_op_free(vinit);
  cairn_ready_op_free(ready);
  cairn_registry_free(r);
}

/* #20 ★: no init_op; local_init_op exists so no "no init_op" error, but
 * the gate blocks. */
Test(session_manager, testPrepareSessionWithReadyNotReadyForLocal) {
  cairn_registry *r = new_reg();
  cairn_var *v = mkvar(r, "v", 1, CAIRN_COLL_GLOBAL);
  cairn_var *w = mkvar(r, "w", 0, CAIRN_COLL_LOCAL);
  cairn_var *x = mkvar(r, "x", 0, CAIRN_COLL_LOCAL);
  cairn_op *parts[2] = {op_init_from("w/Assign", w, v, 1), op_init_from("x/Assign", x, v, 3)};
  cairn_op *local;
  OK(cairn_op_new_group("group_deps", parts, 2, &local));
  cairn_ready_op *ready = uninit(r, ALL), *rfl = uninit(r, CAIRN_COLL_GLOBAL);
  cairn_session_manager *sm = mk_sm(r, local, ready, rfl, 0);
  cairn_prepare_options o = popts(NULL, NULL, NULL);
  cairn_session *s;
  cr_assert_eq(cairn_session_manager_prepare_session(sm, &o, &s), CAIRN_E_NOT_READY);
  HAS(cairn_errmsg(), "Init operations did not make model ready for local_init.  Init op: None, init fn: None, "
                      "error: Variables not initialized: v");
  cr_assert_not(inited(v) || inited(w) || inited(x));
  cairn_session_manager_free(sm);
  cairn_op_free(parts[0]);
  cairn_op_free(parts[1]);
  cairn_op_free(local);
  cairn_ready_op_free(ready);
  cairn_ready_op_free(rfl);
  cairn_registry_free(r);
}

/* #21 (older TF's version of the test) */
Test(session_manager, testPrepareSessionWithInsufficientReadyForLocalInitCheck) {
  cairn_registry *r = new_reg();
  cairn_var *v = mkvar(r, "v", 1, CAIRN_COLL_GLOBAL);
  cairn_var *w = mkvar(r, "w", 0, CAIRN_COLL_LOCAL);
  cairn_op *winit = op_init_from("w/Assign", w, v, 1);
  cairn_ready_op *ready = uninit(r, ALL);
  cairn_session_manager *sm = mk_sm(r, winit, ready, NULL, 0);
  cairn_prepare_options o = popts(NULL, NULL, NULL);
  cairn_session *s;
  cr_assert_eq(cairn_session_manager_prepare_session(sm, &o, &s), CAIRN_E_UNINITIALIZED);
  HAS(cairn_errmsg(), "Attempting to use uninitialized value v");
  cairn_session_manager_free(sm);
  cairn_op_free(winit);
  cairn_ready_op_free(ready);
  cairn_registry_free(r);
}

/* The checkpoint-wait budget counts sleeps: max_wait 65 s, interval 30 s ⇒
 * waits at 0, 30, 60 (< 65) ⇒ 90 s slept (TF's _restore_checkpoint; the
 * worker's wait_for_session instead counts wall time). */
Test(session_manager, wait_for_checkpoint_budget_counts_sleeps) {
  cairn_registry *r = new_reg();
  cairn_var *v = mkvar(r, "v", 4, CAIRN_COLL_GLOBAL);
  cairn_op *init = op_init_coll(r, "init", CAIRN_COLL_GLOBAL);
  cairn_ready_op *ready = uninit(r, ALL);
  cairn_session_manager *sm = mk_sm(r, NULL, ready, NULL, 0);
  cairn_saver *sv = mk_saver(r);
  cairn_prepare_options o = popts(init, sv, g_dir);
  o.wait_for_checkpoint = 1;
  o.max_wait_secs = 65;
  cairn_session *s;
  OK(cairn_session_manager_prepare_session(sm, &o, &s));
  cr_assert_eq(F.sleeps, 3);
  cr_assert_float_eq(F.slept, 90.0, 1e-9);
  cr_assert_eq(val(v), 4.0f, "no checkpoint came: init_op ran");
  cairn_session_free(s);
  cairn_saver_free(sv);
  cairn_session_manager_free(sm);
  cairn_op_free(init);
  cairn_ready_op_free(ready);
  cairn_registry_free(r);
}

/* A checkpoint that appears while the chief waits is restored. */
static void write_checkpoint_on_second_sleep(int nth) {
  if (nth == 2) checkpoint_v1(P("late"));
}

Test(session_manager, wait_for_checkpoint_restores_one_that_appears) {
  F.on_sleep = write_checkpoint_on_second_sleep;
  cairn_registry *r = new_reg();
  cairn_var *v = mkvar(r, "v", 4, CAIRN_COLL_GLOBAL);
  cairn_op *init = op_init_coll(r, "init", CAIRN_COLL_GLOBAL);
  cairn_ready_op *ready = uninit(r, ALL);
  cairn_session_manager *sm = mk_sm(r, NULL, ready, NULL, 5);
  cairn_saver *sv = mk_saver(r);
  cairn_prepare_options o = popts(init, sv, P("late"));
  o.wait_for_checkpoint = 1;
  o.max_wait_secs = 60;
  cairn_session *s;
  OK(cairn_session_manager_prepare_session(sm, &o, &s));
  cr_assert_eq(F.sleeps, 2);
  cr_assert_eq(val(v), 1.0f, "restored, init_op not run");
  cr_assert(logged("Restoring parameters from "));
  cairn_session_free(s);
  cairn_saver_free(sv);
  cairn_session_manager_free(sm);
  cairn_op_free(init);
  cairn_ready_op_free(ready);
  cairn_registry_free(r);
}

/* TF's _restore_checkpoint: restoring from a directory recovers the Saver's
 * rotation list. */
Test(session_manager, restore_recovers_last_checkpoints) {
  cairn_registry *r = new_reg();
  cairn_var *v = mkvar(r, "v", 1, CAIRN_COLL_GLOBAL);
  setval(v, 5);
  cairn_saver *sv = mk_saver(r);
  for (int k = 1; k <= 3; k++) save_ckpt(sv, g_dir, k);
  cairn_saver_free(sv);
  cairn_registry_free(r);

  r = new_reg();
  v = mkvar(r, "v", 1, CAIRN_COLL_GLOBAL);
  cairn_ready_op *ready = uninit(r, ALL);
  cairn_session_manager *sm = mk_sm(r, NULL, ready, NULL, 0);
  sv = mk_saver(r);
  cr_assert_eq(cairn_saver_last_checkpoints_count(sv), 0u);
  cairn_prepare_options o = popts(NULL, sv, g_dir);
  cairn_session *s;
  OK(cairn_session_manager_prepare_session(sm, &o, &s));
  cr_assert_eq(val(v), 5.0f);
  cr_assert_eq(cairn_saver_last_checkpoints_count(sv), 3u);
  HAS(cairn_saver_last_checkpoint_at(sv, 2), "model.ckpt-3");
  cairn_session_free(s);
  cairn_saver_free(sv);
  cairn_session_manager_free(sm);
  cairn_ready_op_free(ready);
  cairn_registry_free(r);
}

/* cairn's way out of a TF trap: the newest checkpoint the state file names
 * is cut short (a disk that lost the tail, a copy interrupted): TF fails;
 * cairn restores the newest one that opens and logs why. A content error
 * (a variable missing from a sound checkpoint) still propagates. */
Test(session_manager, prepare_falls_back_past_a_truncated_newest_checkpoint) {
  cairn_registry *r = new_reg();
  cairn_var *v = mkvar(r, "v", 1, CAIRN_COLL_GLOBAL);
  cairn_saver *sv = mk_saver(r);
  setval(v, 1);
  save_ckpt(sv, g_dir, 1);
  setval(v, 2);
  save_ckpt(sv, g_dir, 2);
  cairn_saver_free(sv);
  cairn_registry_free(r);
  /* cut the newest file in half */
  FILE *f = fopen(P("model.ckpt-2"), "r+");
  cr_assert_not_null(f);
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fclose(f);
  cr_assert_eq(truncate(P("model.ckpt-2"), len / 2), 0);

  r = new_reg();
  v = mkvar(r, "v", 1, CAIRN_COLL_GLOBAL);
  cairn_ready_op *ready = uninit(r, ALL);
  cairn_session_manager *sm = mk_sm(r, NULL, ready, NULL, 0);
  sv = mk_saver(r);
  cairn_prepare_options o = popts(NULL, sv, g_dir);
  cairn_session *s;
  OK(cairn_session_manager_prepare_session(sm, &o, &s));
  cr_assert_eq(val(v), 1.0f, "restored the previous good checkpoint");
  cairn_session_free(s);
  cairn_saver_free(sv);
  cairn_session_manager_free(sm);
  cairn_ready_op_free(ready);
  cairn_registry_free(r);

  /* a sound checkpoint without the variable: no fallback, the error stays */
  r = new_reg();
  mkvar(r, "w", 1, CAIRN_COLL_GLOBAL);
  sm = mk_sm(r, NULL, NULL, NULL, 0);
  sv = mk_saver(r);
  o = popts(NULL, sv, g_dir);
  o.checkpoint_dir = NULL;
  o.checkpoint_filename_with_path = P("model.ckpt-1");
  cr_assert_eq(cairn_session_manager_prepare_session(sm, &o, &s), CAIRN_E_NOT_FOUND);
  HAS(cairn_errmsg(), "'w'");
  cairn_saver_free(sv);
  cairn_session_manager_free(sm);
  cairn_registry_free(r);
}

/* ---- a corrupt newest checkpoint: fall back to the newest intact one ---- */

#define BIG 4096 /* floats: the data region is most of the file */

/* A registry with global_step and "big" (BIG floats), filled for `step`. */
static cairn_registry *big_reg(cairn_var **big) {
  cairn_registry *r = new_reg();
  cairn_var *gs;
  OK(cairn_registry_global_step(r, &gs));
  int64_t shape[1] = {BIG};
  OK(cairn_var_new(r, "big", CAIRN_DTYPE_F32, 1, shape, cairn_init_constant(0), CAIRN_COLL_GLOBAL, big));
  return r;
}

static float big_value(int64_t step, int i) {
  uint32_t x = (uint32_t)step * 2654435761u + (uint32_t)i * 40503u; /* incompressible */
  return (float)(x >> 8) / 65536.0f;
}

static void big_fill(cairn_registry *r, cairn_var *big, int64_t step) {
  cairn_var *gs;
  OK(cairn_registry_global_step(r, &gs));
  *(int64_t *)cairn_var_tensor(gs)->data = step;
  cairn_var_set_initialized(gs, 1);
  float *d = cairn_var_tensor(big)->data;
  for (int i = 0; i < BIG; i++) d[i] = big_value(step, i);
  cairn_var_set_initialized(big, 1);
}

static int big_is(const cairn_var *big, int64_t step) {
  const float *d = cairn_var_tensor(big)->data;
  for (int i = 0; i < BIG; i++)
    if (d[i] != big_value(step, i)) return 0;
  return 1;
}

/* Checkpoints of steps 10, 20, ... (n of them) in g_dir, each with a
 * train.state.pos blob holding its step. */
static void big_save(int n) {
  cairn_var *big;
  cairn_registry *r = big_reg(&big);
  cairn_saver *sv = mk_saver(r);
  for (int k = 1; k <= n; k++) {
    int64_t step = 10 * k;
    big_fill(r, big, step);
    OK(cairn_saver_set_state(sv, "pos", &step, sizeof step));
    save_ckpt(sv, g_dir, step);
  }
  cairn_saver_free(sv);
  cairn_registry_free(r);
}

/* Flips one bit in the middle of the file: inside the tensor data, so the
 * file still opens (superblock, index, metadata and footer are sound) and
 * only the data's checksum fails. */
static void flip_data_bit(const char *path) {
  FILE *f = fopen(path, "r+b");
  cr_assert_not_null(f, "%s: %s", path, strerror(errno));
  fseek(f, 0, SEEK_END);
  long mid = ftell(f) / 2;
  fseek(f, mid, SEEK_SET);
  int c = fgetc(f);
  cr_assert_neq(c, EOF);
  fseek(f, mid, SEEK_SET);
  fputc(c ^ 0x10, f);
  fclose(f);
  cairn_ckpt *ck;
  OK(cairn_ckpt_open(path, NULL, &ck));
  cr_assert_eq(cairn_ckpt_verify(ck), CAIRN_E_CORRUPT, "%s: the flip is in the data", path);
  cairn_ckpt_close(ck);
}

static off_t file_size(const char *path) {
  struct stat sb;
  cr_assert_eq(stat(path, &sb), 0, "%s still exists: %s", path, strerror(errno));
  return sb.st_size;
}

/* A flipped bit in the data of the newest of three checkpoints: the
 * session restores the middle one (variables, global_step and its training
 * state), warns naming the file, leaves the file in place, and every later
 * lookup of this process skips it — until a new save replaces it. */
Test(session_manager, prepare_falls_back_past_a_corrupt_newest_checkpoint) {
  big_save(3);
  flip_data_bit(P("model.ckpt-30"));
  off_t corrupt_size = file_size(P("model.ckpt-30"));

  cairn_var *big;
  cairn_registry *r = big_reg(&big);
  cairn_ready_op *ready = uninit(r, ALL);
  cairn_session_manager *sm = mk_sm(r, NULL, ready, NULL, 0);
  cairn_saver *sv = mk_saver(r);
  cairn_prepare_options o = popts(NULL, sv, g_dir);
  cairn_session *s;
  OK(cairn_session_manager_prepare_session(sm, &o, &s));
  int64_t step;
  OK(cairn_session_global_step(s, &step));
  cr_assert_eq(step, 20, "restored the middle checkpoint (step %lld)", (long long)step);
  cr_assert(big_is(big, 20), "the variables are the step-20 checkpoint's");
  char want[800];
  snprintf(want, sizeof want, "Checkpoint %s is unusable (", P("model.ckpt-30"));
  cr_assert(logged(want), "a warning names the file: %s", F.log);
  cr_assert(logged("checksum"), "and the reason: %s", F.log);
  snprintf(want, sizeof want, "restoring %s instead", P("model.ckpt-20"));
  cr_assert(logged(want), "and the file restored: %s", F.log);
  /* training state from the same file as the variables */
  cr_assert_str_eq(cairn_session_restored_path(s), P("model.ckpt-20"));
  const cairn_saver_meta *meta = cairn_session_restored_meta(s);
  cr_assert_not_null(meta);
  const void *blob;
  size_t len;
  int64_t meta_step, pos;
  OK(cairn_saver_meta_global_step(meta, &meta_step));
  OK(cairn_saver_meta_state(meta, "pos", &blob, &len));
  cr_assert_eq(len, sizeof pos);
  memcpy(&pos, blob, sizeof pos);
  cr_assert_eq(meta_step, 20);
  cr_assert_eq(pos, 20);
  /* left in place, marked, out of the saver's rotation list */
  cr_assert_eq(file_size(P("model.ckpt-30")), corrupt_size, "the corrupt file is not deleted");
  cr_assert(cairn_checkpoint_is_marked_corrupt(P("model.ckpt-30")));
  cr_assert_not(cairn_checkpoint_is_marked_corrupt(P("model.ckpt-20")));
  cr_assert_eq(cairn_saver_last_checkpoints_count(sv), 2u, "rotation keeps 10 and 20 only");
  char latest[800];
  OK(cairn_latest_checkpoint(g_dir, latest, sizeof latest));
  cr_assert_str_eq(latest, P("model.ckpt-20"), "latest_checkpoint skips the corrupt file from now on");
  HAS(cairn_errmsg(), "marked corrupt earlier in this process");
  cairn_session_free(s);

  /* The next session of this process goes straight to step 20. */
  F.log[0] = '\0';
  int initialized;
  OK(cairn_session_manager_recover_session(sm, &o, &s, &initialized));
  cr_assert(initialized);
  OK(cairn_session_global_step(s, &step));
  cr_assert_eq(step, 20);
  cr_assert_not(logged("is unusable"), "no second attempt at the corrupt file: %s", F.log);
  cr_assert(logged("found corrupt earlier in this process"), "%s", F.log);
  cairn_session_free(s);

  /* A new save of step 30 replaces the file: a new, usable file. */
  big_fill(r, big, 30);
  save_ckpt(sv, g_dir, 30);
  cr_assert_not(cairn_checkpoint_is_marked_corrupt(P("model.ckpt-30")));
  OK(cairn_latest_checkpoint(g_dir, latest, sizeof latest));
  cr_assert_str_eq(latest, P("model.ckpt-30"));
  cairn_saver_free(sv);
  cairn_session_manager_free(sm);
  cairn_ready_op_free(ready);
  cairn_registry_free(r);
}

/* Changes the file between a restore's verifying and decoding passes
   (the restore's test hook, lib/internal.h): the first time only. */
extern void (*cairn__restore_between_passes)(const char *path, void *user);
static int g_changed;
static void change_once(const char *path, void *user) {
  (void)user;
  if (g_changed++) return;
  flip_data_bit(path);
}

/* The newest checkpoint is sound when verified and changes before it is
   decoded: its restore fails after writing "big", and the session restores
   the older checkpoint over it (every variable of the save set, all
   initialized again) instead of training on half-restored values. */
Test(session_manager, prepare_falls_back_when_the_newest_changes_during_its_restore) {
  big_save(2);
  cairn_var *big;
  cairn_registry *r = big_reg(&big);
  cairn_ready_op *ready = uninit(r, ALL);
  cairn_session_manager *sm = mk_sm(r, NULL, ready, NULL, 0);
  cairn_saver *sv = mk_saver(r);
  cairn_prepare_options o = popts(NULL, sv, g_dir);
  cairn_session *s;
  g_changed = 0;
  cairn__restore_between_passes = change_once;
  cairn_status st = cairn_session_manager_prepare_session(sm, &o, &s);
  cairn__restore_between_passes = NULL;
  cr_assert_eq(st, CAIRN_OK, "%s", cairn_errmsg());
  cr_assert_eq(g_changed, 2, "two restores: the newest, then the older one");
  int64_t step;
  OK(cairn_session_global_step(s, &step));
  cr_assert_eq(step, 10);
  cr_assert(big_is(big, 10), "the variables are the step-10 checkpoint's");
  cr_assert(cairn_var_is_initialized(big));
  cr_assert(logged("after the whole file had been verified"), "%s", F.log);
  cr_assert(cairn_checkpoint_is_marked_corrupt(P("model.ckpt-20")));
  cairn_session_free(s);
  cairn_saver_free(sv);
  cairn_session_manager_free(sm);
  cairn_ready_op_free(ready);
  cairn_registry_free(r);
}

/* Every checkpoint corrupt: an error naming each file and its reason (not a
 * silent fresh start, which would throw the job's progress away), the
 * variables untouched, the files left in place. */
Test(session_manager, prepare_fails_when_every_checkpoint_is_corrupt) {
  big_save(2);
  flip_data_bit(P("model.ckpt-10"));
  flip_data_bit(P("model.ckpt-20"));
  cairn_var *big;
  cairn_registry *r = big_reg(&big);
  big_fill(r, big, 99);
  cairn_op *init = op_init_coll(r, "init", CAIRN_COLL_GLOBAL);
  cairn_session_manager *sm = mk_sm(r, NULL, NULL, NULL, 0);
  cairn_saver *sv = mk_saver(r);
  cairn_prepare_options o = popts(init, sv, g_dir);
  cairn_session *s = (cairn_session *)1;
  cr_assert_eq(cairn_session_manager_prepare_session(sm, &o, &s), CAIRN_E_CORRUPT, "%s", cairn_errmsg());
  cr_assert_null(s);
  const char *m = cairn_session_manager_errmsg(sm);
  HAS(m, "no intact checkpoint in '");
  HAS(m, P("model.ckpt-20"));
  HAS(m, P("model.ckpt-10"));
  HAS(m, "checksum");
  HAS(m, "the files are left in place");
  cr_assert(big_is(big, 99), "nothing half-written from a corrupt file");
  file_size(P("model.ckpt-10"));
  file_size(P("model.ckpt-20"));
  cairn_saver_free(sv);
  cairn_session_manager_free(sm);
  cairn_op_free(init);
  cairn_registry_free(r);
}

/* Sets a required feature bit no cairn knows (0x40000000) in a
 * checkpoint's superblock and fixes its CRC: the file a newer cairn with a
 * new codec would write. */
static void set_unknown_feature(const char *path) {
  FILE *f = fopen(path, "r+b");
  cr_assert_not_null(f, "%s: %s", path, strerror(errno));
  unsigned char sb[64];
  cr_assert_eq(fread(sb, 1, 64, f), 64);
  sb[19] |= 0x40;
  uint32_t c = cairn_crc32c(0, sb, 60);
  uint32_t m = ((c >> 15) | (c << 17)) + 0xa282ead8u;
  for (int i = 0; i < 4; i++) sb[60 + i] = (unsigned char)(m >> (8 * i));
  fseek(f, 0, SEEK_SET);
  cr_assert_eq(fwrite(sb, 1, 64, f), 64);
  fclose(f);
  cairn_ckpt *ck = NULL;
  cr_assert_eq(cairn_ckpt_open(path, NULL, &ck), CAIRN_E_UNSUPPORTED);
}

/* The newest checkpoint needs a feature this cairn lacks: it is not a
 * damaged file to skip. Restoring the intact older one would silently throw
 * away the newer cairn's progress, so prepare fails naming the file and
 * what to do, with or without a state file, and after skipping a corrupt
 * newer one. */
static void expect_stop_at_newer(const char *newer, int expect_step_untouched) {
  cairn_var *big;
  cairn_registry *r = big_reg(&big);
  big_fill(r, big, 99);
  cairn_op *init = op_init_coll(r, "init", CAIRN_COLL_GLOBAL);
  cairn_session_manager *sm = mk_sm(r, NULL, NULL, NULL, 0);
  cairn_saver *sv = mk_saver(r);
  cairn_prepare_options o = popts(init, sv, g_dir);
  cairn_session *s = (cairn_session *)1;
  cr_assert_eq(cairn_session_manager_prepare_session(sm, &o, &s), CAIRN_E_UNSUPPORTED, "%s",
               cairn_session_manager_errmsg(sm));
  cr_assert_null(s);
  const char *m = cairn_session_manager_errmsg(sm);
  HAS(m, newer);
  HAS(m, "written by a newer cairn");
  HAS(m, "0x40000000");
  HAS(m, "upgrade cairn, or move the file away");
  cr_assert(big_is(big, 99), "the older checkpoint was not restored");
  (void)expect_step_untouched;
  char path[4096];
  cr_assert_eq(cairn_latest_checkpoint(g_dir, path, sizeof path), CAIRN_E_UNSUPPORTED,
               "the lookup stops there too: %s", cairn_errmsg());
  cairn_saver_free(sv);
  cairn_session_manager_free(sm);
  cairn_op_free(init);
  cairn_registry_free(r);
}

Test(session_manager, prepare_stops_at_a_checkpoint_from_a_newer_cairn) {
  big_save(2);
  set_unknown_feature(P("model.ckpt-20"));
  expect_stop_at_newer(P("model.ckpt-20"), 1);
}

Test(session_manager, prepare_stops_at_a_newer_cairns_checkpoint_without_state_file) {
  big_save(2);
  set_unknown_feature(P("model.ckpt-20"));
  cr_assert_eq(unlink(P("checkpoint")), 0);
  expect_stop_at_newer(P("model.ckpt-20"), 1);
}

Test(session_manager, walk_back_past_corrupt_stops_at_a_newer_cairns_checkpoint) {
  big_save(3);
  flip_data_bit(P("model.ckpt-30"));
  set_unknown_feature(P("model.ckpt-20"));
  expect_stop_at_newer(P("model.ckpt-20"), 1);
}

/* An intact newest checkpoint whose variable has another shape than the
 * model's is the user's error: it propagates, nothing falls back, nothing
 * is marked. */
Test(session_manager, a_shape_mismatch_does_not_fall_back) {
  big_save(2);
  cairn_registry *r = new_reg();
  cairn_var *gs;
  OK(cairn_registry_global_step(r, &gs));
  int64_t shape[1] = {BIG / 2};
  cairn_var *big;
  OK(cairn_var_new(r, "big", CAIRN_DTYPE_F32, 1, shape, cairn_init_constant(0), CAIRN_COLL_GLOBAL, &big));
  cairn_session_manager *sm = mk_sm(r, NULL, NULL, NULL, 0);
  cairn_saver *sv = mk_saver(r);
  cairn_prepare_options o = popts(NULL, sv, g_dir);
  cairn_session *s;
  cr_assert_eq(cairn_session_manager_prepare_session(sm, &o, &s), CAIRN_E_SHAPE);
  HAS(cairn_errmsg(), "model.ckpt-20");
  HAS(cairn_errmsg(), "checkpoint has shape (4096), variable has (2048)");
  cr_assert_not(logged("unusable"), "%s", F.log);
  cr_assert_not(cairn_checkpoint_is_marked_corrupt(P("model.ckpt-20")));
  cairn_saver_free(sv);
  cairn_session_manager_free(sm);
  cairn_registry_free(r);
}

/* TF's _restore_checkpoint: a state file with an empty model_checkpoint_path is an error that
 * propagates (TF's "Invalid checkpoint state"); so is a restore error. */
Test(session_manager, invalid_checkpoint_state_propagates) {
  FILE *f = fopen(P("checkpoint"), "w");
  cr_assert_not_null(f);
  fputs("model_checkpoint_path: \"\"\n", f);
  fclose(f);
  cairn_registry *r = new_reg();
  mkvar(r, "v", 1, CAIRN_COLL_GLOBAL);
  cairn_op *init = op_init_coll(r, "init", CAIRN_COLL_GLOBAL);
  cairn_session_manager *sm = mk_sm(r, NULL, NULL, NULL, 0);
  cairn_saver *sv = mk_saver(r);
  cairn_prepare_options o = popts(init, sv, g_dir);
  cairn_session *s;
  cr_assert_eq(cairn_session_manager_prepare_session(sm, &o, &s), CAIRN_E_FORMAT);
  HAS(cairn_errmsg(), "invalid checkpoint state");
  /* A file that does not exist. */
  o = popts(init, sv, NULL);
  o.checkpoint_filename_with_path = P("model.ckpt-404");
  cr_assert_eq(cairn_session_manager_prepare_session(sm, &o, &s), CAIRN_E_NOT_FOUND);
  HAS(cairn_errmsg(), "not a valid checkpoint");
  cairn_saver_free(sv);
  cairn_session_manager_free(sm);
  cairn_op_free(init);
  cairn_registry_free(r);
}

Test(session_manager, options_are_checked) {
  cairn_registry *r = new_reg();
  cairn_session_manager_options o;
  memset(&o, 0, sizeof o); /* zero-filled is not the default */
  cairn_session_manager *sm;
  cr_assert_eq(cairn_session_manager_new(r, &o, &sm), CAIRN_E_INVALID);
  HAS(cairn_errmsg(), "recovery_wait_secs must be");
  o = cairn_session_manager_options_default();
  o.session_flags = 8;
  cr_assert_eq(cairn_session_manager_new(r, &o, &sm), CAIRN_E_INVALID);
  OK(cairn_session_manager_new(r, NULL, &sm));
  cr_assert_eq(cairn_session_manager_wait_for_session(sm, NAN, &(cairn_session *){NULL}), CAIRN_E_INVALID);
  cr_assert_eq(cairn_session_manager_prepare_session(sm, NULL, &(cairn_session *){NULL}), CAIRN_E_NULL);
  cairn_session_manager_free(sm);
  cairn_session_manager_free(NULL);
  cairn_registry_free(r);
}

/* A message of 7 KiB (400 names; more than the 4 KiB cairn_errmsg() once
 * held) is whole on the handle and in cairn_errmsg(). */
Test(session_manager, long_not_ready_message_is_whole_on_the_handle) {
  cairn_registry *r = new_reg();
  char name[32];
  for (int i = 0; i < 400; i++) {
    snprintf(name, sizeof name, "layer_%03d/kernel", i);
    mkvar(r, name, 1, CAIRN_COLL_GLOBAL);
  }
  cairn_op *noop;
  OK(cairn_op_new_noop("no_op", &noop));
  cairn_ready_op *ready = uninit(r, ALL);
  cairn_session_manager *sm = mk_sm(r, NULL, ready, NULL, 0);
  cairn_prepare_options o = popts(noop, NULL, NULL);
  cairn_session *s;
  cr_assert_eq(cairn_session_manager_prepare_session(sm, &o, &s), CAIRN_E_NOT_READY);
  HAS(cairn_session_manager_errmsg(sm), "layer_399/kernel");
  HAS(cairn_errmsg(), "layer_399/kernel");
  HAS(cairn_errmsg(), "Init operations did not make model ready.  Init op: no_op");
  cairn_session_manager_free(sm);
  cairn_op_free(noop);
  cairn_ready_op_free(ready);
  cairn_registry_free(r);
}

/* ==== #22 ObsoleteSessionManagerTest: a legacy ready op ===================== */

/* TF's assert_variables_initialized: fails with FailedPrecondition
 * "...uninitialized..." (here CAIRN_E_UNINITIALIZED) when not ready. */
static cairn_status legacy_ready_fn(cairn_session *s, cairn_names *out, void *user) {
  (void)out;
  cairn_var *v = user;
  if (!cairn_var_is_initialized(v))
    return cairn_session_fail(s, CAIRN_E_UNINITIALIZED, "Attempting to use uninitialized value %s",
                              cairn_var_name(v));
  return CAIRN_OK;
}

static cairn_ready_op *legacy_ready(cairn_var *v) {
  cairn_ready_op *op;
  OK(cairn_ready_op_new("assert_variables_initialized", legacy_ready_fn, v, NULL, &op));
  return op;
}

Test(obsolete_session_manager, testPrepareSessionSucceeds) {
  cairn_registry *r = new_reg();
  cairn_var *v = mkvar(r, "v", 1, CAIRN_COLL_GLOBAL);
  cairn_op *init = op_init_coll(r, "init", CAIRN_COLL_GLOBAL);
  cairn_ready_op *ready = legacy_ready(v);
  cairn_session_manager *sm = mk_sm(r, NULL, ready, NULL, 0);
  cairn_prepare_options o = popts(init, NULL, NULL);
  cairn_session *s;
  OK(cairn_session_manager_prepare_session(sm, &o, &s));
  cr_assert_eq(val(v), 1.0f);
  cairn_session_free(s);
  /* Without init_op the legacy error is the not-ready message. */
  cairn_op *noop;
  OK(cairn_op_new_noop("no_op", &noop));
  cairn_var_set_initialized(v, 0);
  o.init_op = noop;
  cr_assert_eq(cairn_session_manager_prepare_session(sm, &o, &s), CAIRN_E_NOT_READY);
  HAS(cairn_errmsg(), "Init operations did not make model ready.  Init op: no_op, init fn: None, local_init_op: "
                      "None, error: Attempting to use uninitialized value v");
  cairn_op_free(noop);
  cairn_session_manager_free(sm);
  cairn_op_free(init);
  cairn_ready_op_free(ready);
  cairn_registry_free(r);
}

Test(obsolete_session_manager, testRecoverSession) {
  const char *dir = P("recover_obsolete");
  checkpoint_v1(dir);
  cairn_registry *r = new_reg();
  cairn_var *v = mkvar(r, "v", 2, CAIRN_COLL_GLOBAL);
  cairn_ready_op *ready = legacy_ready(v);
  cairn_session_manager *sm = mk_sm(r, NULL, ready, NULL, 0);
  cairn_saver *sv = mk_saver(r);
  cairn_prepare_options o = popts(NULL, sv, dir);
  cairn_session *s;
  int initialized;
  OK(cairn_session_manager_recover_session(sm, &o, &s, &initialized));
  cr_assert_eq(initialized, 1);
  cr_assert_eq(val(v), 1.0f);
  cairn_session_free(s);
  cairn_saver_free(sv);
  cairn_session_manager_free(sm);
  cairn_ready_op_free(ready);
  cairn_registry_free(r);
}

Test(obsolete_session_manager, testWaitForSessionReturnsNoneAfterTimeout) {
  cairn_registry *r = new_reg();
  cairn_var *v = mkvar(r, "v", 1, CAIRN_COLL_GLOBAL);
  cairn_ready_op *ready = legacy_ready(v);
  cairn_session_manager *sm = mk_sm(r, NULL, ready, NULL, 1);
  cairn_session *s;
  cr_assert_eq(cairn_session_manager_wait_for_session(sm, 3, &s), CAIRN_E_DEADLINE);
  cr_assert(logged("ready: Attempting to use uninitialized value v"));
  cairn_session_manager_free(sm);
  cairn_ready_op_free(ready);
  cairn_registry_free(r);
}

/* Any other error of a ready op propagates (TF: only "uninitialized"
 * FailedPreconditions mean "not ready"). */
static cairn_status broken_ready_fn(cairn_session *s, cairn_names *out, void *user) {
  (void)out;
  (void)user;
  return cairn_session_fail(s, CAIRN_E_IO, "ready check lost its connection");
}

Test(obsolete_session_manager, other_ready_op_errors_propagate) {
  cairn_registry *r = new_reg();
  mkvar(r, "v", 1, CAIRN_COLL_GLOBAL);
  cairn_op *init = op_init_coll(r, "init", CAIRN_COLL_GLOBAL);
  cairn_ready_op *ready;
  OK(cairn_ready_op_new("broken", broken_ready_fn, NULL, NULL, &ready));
  cairn_session_manager *sm = mk_sm(r, NULL, ready, NULL, 1);
  cairn_prepare_options o = popts(init, NULL, NULL);
  cairn_session *s;
  cr_assert_eq(cairn_session_manager_prepare_session(sm, &o, &s), CAIRN_E_IO);
  HAS(cairn_errmsg(), "ready check lost its connection");
  cr_assert_eq(cairn_session_manager_wait_for_session(sm, 100, &s), CAIRN_E_IO);
  cr_assert_eq(F.sleeps, 0);
  cairn_session_manager_free(sm);
  cairn_op_free(init);
  cairn_ready_op_free(ready);
  cairn_registry_free(r);
}

/* ==== Scaffold ======================================================================== */

static size_t coll(cairn_registry *r, const char *key) { return cairn_registry_collection_get(r, key, NULL, 0); }

/* #23 */
Test(scaffold, test_nothing_created_before_finalize) {
  cairn_registry *r = new_reg();
  mkvar(r, "my_var", 1, CAIRN_COLL_GLOBAL);
  cairn_scaffold *sc;
  OK(cairn_scaffold_new(r, NULL, &sc));
  cr_assert_null(cairn_scaffold_init_op(sc));
  cr_assert_null(cairn_scaffold_ready_op(sc));
  cr_assert_null(cairn_scaffold_ready_for_local_init_op(sc));
  cr_assert_null(cairn_scaffold_local_init_op(sc));
  cr_assert_null(cairn_scaffold_summary_op(sc));
  cr_assert_null(cairn_scaffold_saver(sc));
  size_t n = 9;
  cr_assert_null(cairn_scaffold_init_feeds(sc, &n));
  cr_assert_eq(n, 0u);
  cr_assert_eq(cairn_scaffold_bound_init_fn(sc, NULL, NULL, NULL), 0);
  cr_assert_eq(coll(r, CAIRN_COLLECTION_INIT_OP) + coll(r, CAIRN_COLLECTION_SAVERS), 0u);
  cr_assert_not(cairn_registry_is_finalized(r));
  cr_assert_not(cairn_scaffold_is_finalized(sc));
  cairn_scaffold_free(sc);
  cairn_scaffold_free(NULL);
  cairn_registry_free(r);
}

static size_t ready_names(cairn_session *s, const cairn_ready_op *op, char *buf, size_t len) {
  cairn_names *l;
  OK(cairn_names_new(&l));
  OK(cairn_session_run_ready(s, op, l));
  size_t n = cairn_names_count(l);
  cairn_names_join(l, ",", buf, len);
  cairn_names_free(l);
  return n;
}

/* #24 ★ */
Test(scaffold, test_defaults_empty_graph) {
  cairn_registry *r = new_reg();
  mkvar(r, "my_var", 1, CAIRN_COLL_GLOBAL);
  mkvar(r, "my_local_var", 1, CAIRN_COLL_LOCAL);
  cairn_scaffold *sc;
  OK(cairn_scaffold_new(r, NULL, &sc));
  OK(cairn_scaffold_finalize(sc));
  cr_assert(cairn_scaffold_is_finalized(sc));
  cr_assert_not_null(cairn_scaffold_init_op(sc));
  cr_assert_not_null(cairn_scaffold_local_init_op(sc));
  cr_assert_not_null(cairn_scaffold_saver(sc));
  cr_assert_eq(cairn_saver_count(cairn_scaffold_saver(sc)), 1u, "the default saver holds the GLOBAL variables");
  cr_assert_null(cairn_scaffold_init_feeds(sc, NULL));
  cr_assert_eq(cairn_scaffold_bound_init_fn(sc, NULL, NULL, NULL), 0);
  cr_assert_null(cairn_scaffold_summary_op(sc), "no summaries: none");
  cr_assert_str_eq(cairn_op_name(cairn_scaffold_init_op(sc)), "init");
  cairn_session *s;
  OK(cairn_session_new(r, 0, &s));
  char buf[200];
  cr_assert_eq(ready_names(s, cairn_scaffold_ready_op(sc), buf, sizeof buf), 2u);
  cr_assert_str_eq(buf, "my_var,my_local_var");
  cr_assert_eq(ready_names(s, cairn_scaffold_ready_for_local_init_op(sc), buf, sizeof buf), 1u);
  cr_assert_str_eq(buf, "my_var");
  OK(cairn_session_run_op(s, cairn_scaffold_init_op(sc)));
  cr_assert_eq(ready_names(s, cairn_scaffold_ready_for_local_init_op(sc), buf, sizeof buf), 0u);
  cr_assert_eq(ready_names(s, cairn_scaffold_ready_op(sc), buf, sizeof buf), 1u);
  cr_assert_str_eq(buf, "my_local_var");
  OK(cairn_session_run_op(s, cairn_scaffold_local_init_op(sc)));
  cr_assert_eq(ready_names(s, cairn_scaffold_ready_op(sc), buf, sizeof buf), 0u);
  /* The defaults were added to the collections. */
  cr_assert_eq(coll(r, CAIRN_COLLECTION_INIT_OP), 1u);
  cr_assert_eq(coll(r, CAIRN_COLLECTION_READY_OP), 1u);
  cr_assert_eq(coll(r, CAIRN_COLLECTION_READY_FOR_LOCAL_INIT_OP), 1u);
  cr_assert_eq(coll(r, CAIRN_COLLECTION_LOCAL_INIT_OP), 1u);
  cr_assert_eq(coll(r, CAIRN_COLLECTION_SAVERS), 1u);
  cr_assert_eq(coll(r, CAIRN_COLLECTION_SUMMARY_OP), 0u, "None is not added");
  OK(cairn_scaffold_finalize(sc)); /* twice: a no-op */
  cairn_session_free(s);
  cairn_scaffold_free(sc);
  cairn_registry_free(r);
}

/* #25 */
Test(scaffold, test_defaults_no_variables) {
  cairn_registry *r = new_reg();
  cairn_scaffold *sc;
  OK(cairn_scaffold_new(r, NULL, &sc));
  OK(cairn_scaffold_finalize(sc));
  cr_assert_not_null(cairn_scaffold_init_op(sc));
  cr_assert_not_null(cairn_scaffold_ready_op(sc));
  cr_assert_not_null(cairn_scaffold_ready_for_local_init_op(sc));
  cr_assert_not_null(cairn_scaffold_local_init_op(sc));
  cr_assert_not_null(cairn_scaffold_saver(sc));
  cairn_session *s;
  OK(cairn_session_new(r, 0, &s));
  char buf[8];
  cr_assert_eq(ready_names(s, cairn_scaffold_ready_op(sc), buf, sizeof buf), 0u);
  cr_assert_eq(ready_names(s, cairn_scaffold_ready_for_local_init_op(sc), buf, sizeof buf), 0u);
  OK(cairn_session_run_op(s, cairn_scaffold_init_op(sc)));
  cairn_session_free(s);
  cairn_scaffold_free(sc);
  cairn_registry_free(r);
}

/* #26 */
Test(scaffold, test_caches_values) {
  cairn_registry *r = new_reg();
  mkvar(r, "my_var", 1, CAIRN_COLL_GLOBAL);
  cairn_scaffold *a, *b;
  OK(cairn_scaffold_new(r, NULL, &a));
  OK(cairn_scaffold_finalize(a));
  OK(cairn_scaffold_new(r, NULL, &b));
  OK(cairn_scaffold_finalize(b));
  cr_assert_eq(cairn_scaffold_init_op(a), cairn_scaffold_init_op(b));
  cr_assert_eq(cairn_scaffold_ready_op(a), cairn_scaffold_ready_op(b));
  cr_assert_eq(cairn_scaffold_ready_for_local_init_op(a), cairn_scaffold_ready_for_local_init_op(b));
  cr_assert_eq(cairn_scaffold_local_init_op(a), cairn_scaffold_local_init_op(b));
  cr_assert_eq(cairn_scaffold_saver(a), cairn_scaffold_saver(b));
  cr_assert_eq(coll(r, CAIRN_COLLECTION_INIT_OP), 1u);
  /* A scaffold freed first leaves the shared ops valid. */
  cairn_scaffold_free(a);
  cairn_session *s;
  OK(cairn_session_new(r, 0, &s));
  OK(cairn_session_run_op(s, cairn_scaffold_init_op(b)));
  cairn_session_free(s);
  cairn_scaffold_free(b);
  cairn_registry_free(r);
}

/* #27 */
Test(scaffold, test_raise_error_if_more_than_one_cached_item) {
  cairn_registry *r = new_reg();
  mkvar(r, "my_var", 1, CAIRN_COLL_GLOBAL);
  OK(cairn_registry_add_saver(r, mk_saver(r)));
  OK(cairn_registry_add_saver(r, mk_saver(r)));
  cairn_scaffold *sc;
  OK(cairn_scaffold_new(r, NULL, &sc));
  cr_assert_eq(cairn_scaffold_finalize(sc), CAIRN_E_STATE);
  HAS(cairn_errmsg(), "More than one item in collection savers. Please indicate which one to use by passing it "
                      "to the constructor.");
  cr_assert_not(cairn_registry_is_finalized(r));
  cairn_scaffold_free(sc);
  /* The same for an op collection. */
  cairn_op *a, *b;
  OK(cairn_op_new_noop("a", &a));
  OK(cairn_op_new_noop("b", &b));
  OK(cairn_registry_add_op(r, CAIRN_COLLECTION_LOCAL_INIT_OP, a));
  OK(cairn_registry_add_op(r, CAIRN_COLLECTION_LOCAL_INIT_OP, b));
  cairn_op_free(a);
  cairn_op_free(b);
  cairn_scaffold_options o;
  memset(&o, 0, sizeof o);
  o.saver = mk_saver(r);
  OK(cairn_scaffold_new(r, &o, &sc));
  cr_assert_eq(cairn_scaffold_finalize(sc), CAIRN_E_STATE);
  HAS(cairn_errmsg(), "More than one item in the collection \"local_init_op\"");
  cairn_scaffold_free(sc);
  cairn_saver_free(o.saver);
  cairn_registry_free(r);
}

static cairn_status user_init_fn(cairn_scaffold *sc, cairn_session *s, void *user) {
  (void)s;
  cairn_scaffold **seen = user;
  *seen = sc;
  return CAIRN_OK;
}

/* #28 */
Test(scaffold, test_uses_passed_values) {
  cairn_registry *r = new_reg();
  mkvar(r, "my_var", 1, CAIRN_COLL_GLOBAL);
  cairn_op *init, *local, *summary;
  cairn_ready_op *ready, *rfl;
  OK(cairn_op_new_noop("my_init", &init));
  OK(cairn_op_new_noop("my_local_init", &local));
  OK(cairn_op_new_noop("my_summary", &summary));
  OK(cairn_ready_op_new_uninitialized_vars("my_ready", NULL, 0, &ready));
  OK(cairn_ready_op_new_uninitialized_vars("my_rfl", NULL, 0, &rfl));
  cairn_saver *sv = mk_saver(r);
  cairn_scaffold *seen = NULL;
  cairn_scaffold_options o;
  memset(&o, 0, sizeof o);
  o.init_op = init;
  o.local_init_op = local;
  o.summary_op = summary;
  o.ready_op = ready;
  o.ready_for_local_init_op = rfl;
  o.saver = sv;
  o.init_fn = user_init_fn;
  o.init_fn_user = &seen;
  o.init_fn_name = "my_init_fn";
  cairn_scaffold *sc;
  OK(cairn_scaffold_new(r, &o, &sc));
  OK(cairn_scaffold_finalize(sc));
  cr_assert_eq(cairn_scaffold_init_op(sc), init);
  cr_assert_eq(cairn_scaffold_local_init_op(sc), local);
  cr_assert_eq(cairn_scaffold_summary_op(sc), summary);
  cr_assert_eq(cairn_scaffold_ready_op(sc), ready);
  cr_assert_eq(cairn_scaffold_ready_for_local_init_op(sc), rfl);
  cr_assert_eq(cairn_scaffold_saver(sc), sv);
  /* Passed values are not added to the collections. */
  cr_assert_eq(coll(r, CAIRN_COLLECTION_INIT_OP) + coll(r, CAIRN_COLLECTION_SAVERS), 0u);
  cairn_session_init_fn fn;
  void *user;
  const char *name;
  cr_assert_eq(cairn_scaffold_bound_init_fn(sc, &fn, &user, &name), 1);
  cr_assert_str_eq(name, "my_init_fn");
  cairn_session *s;
  OK(cairn_session_new(r, 0, &s));
  OK(fn(s, user));
  cr_assert_eq(seen, sc, "init_fn is bound to its scaffold");
  cairn_session_free(s);
  cairn_scaffold_free(sc);
  cairn_op_free(init);
  cairn_op_free(local);
  cairn_op_free(summary);
  cairn_ready_op_free(ready);
  cairn_ready_op_free(rfl);
  cairn_saver_free(sv);
  cairn_registry_free(r);
}

/* #29 */
Test(scaffold, test_graph_is_finalized) {
  cairn_registry *r = new_reg();
  mkvar(r, "my_var", 1, CAIRN_COLL_GLOBAL);
  cairn_scaffold *sc;
  OK(cairn_scaffold_new(r, NULL, &sc));
  OK(cairn_scaffold_finalize(sc));
  cr_assert(cairn_registry_is_finalized(r));
  int64_t shape[1] = {1};
  cairn_var *v;
  cr_assert_eq(cairn_var_new(r, "late", CAIRN_DTYPE_F32, 1, shape, cairn_init_zeros(), CAIRN_COLL_GLOBAL, &v),
               CAIRN_E_STATE);
  HAS(cairn_errmsg(), "Graph is finalized and cannot be modified.");
  cr_assert_eq(cairn_registry_global_step(r, &v), CAIRN_E_STATE);
  cairn_op *op;
  OK(cairn_op_new_noop("late_op", &op));
  cr_assert_eq(cairn_registry_add_op(r, CAIRN_COLLECTION_INIT_OP, op), CAIRN_E_STATE);
  cairn_op_free(op);
  /* A MonitoredSession's close un-finalizes (TF's _unsafe_unfinalize). */
  cairn_registry_unfinalize(r);
  OK(cairn_var_new(r, "late", CAIRN_DTYPE_F32, 1, shape, cairn_init_zeros(), CAIRN_COLL_GLOBAL, &v));
  cairn_scaffold_free(sc);
  cairn_registry_free(r);
}

/* #30: copy_from_scaffold of a finalized (default) scaffold: its defaults
 * are copied, explicit arguments win. */
Test(scaffold, test_new_scaffold_from_default_scaffold) {
  cairn_registry *r = new_reg();
  mkvar(r, "my_var", 1, CAIRN_COLL_GLOBAL);
  cairn_scaffold *base;
  OK(cairn_scaffold_new(r, NULL, &base));
  OK(cairn_scaffold_finalize(base));
  cairn_op *init;
  OK(cairn_op_new_noop("explicit_init", &init));
  cairn_scaffold_options o;
  memset(&o, 0, sizeof o);
  o.init_op = init;
  o.copy_from_scaffold = base;
  cairn_scaffold *sc;
  OK(cairn_scaffold_new(r, &o, &sc));
  cr_assert_eq(cairn_scaffold_init_op(sc), init);
  cr_assert_eq(cairn_scaffold_ready_op(sc), cairn_scaffold_ready_op(base));
  cr_assert_eq(cairn_scaffold_local_init_op(sc), cairn_scaffold_local_init_op(base));
  cr_assert_eq(cairn_scaffold_saver(sc), cairn_scaffold_saver(base));
  OK(cairn_scaffold_finalize(sc));
  cr_assert_eq(cairn_scaffold_init_op(sc), init);
  cairn_scaffold_free(base); /* the copy keeps its own references */
  cr_assert_str_eq(cairn_ready_op_name(cairn_scaffold_ready_op(sc)), "ready");
  cairn_scaffold_free(sc);
  cairn_op_free(init);
  cairn_registry_free(r);
}

/* #30: copy of an unfinalized scaffold with explicit values; init_fn is
 * the original function re-bound to the copy. */
Test(scaffold, test_new_scaffold_from_existing_scaffold) {
  cairn_registry *r = new_reg();
  mkvar(r, "my_var", 1, CAIRN_COLL_GLOBAL);
  cairn_op *init, *local, *local2;
  OK(cairn_op_new_noop("init_a", &init));
  OK(cairn_op_new_noop("local_a", &local));
  OK(cairn_op_new_noop("local_b", &local2));
  cairn_scaffold *seen = NULL;
  cairn_scaffold_options o;
  memset(&o, 0, sizeof o);
  o.init_op = init;
  o.local_init_op = local;
  o.init_fn = user_init_fn;
  o.init_fn_user = &seen;
  cairn_scaffold *base;
  OK(cairn_scaffold_new(r, &o, &base));
  memset(&o, 0, sizeof o);
  o.local_init_op = local2;
  o.copy_from_scaffold = base;
  cairn_scaffold *sc;
  OK(cairn_scaffold_new(r, &o, &sc));
  cr_assert_eq(cairn_scaffold_init_op(sc), init);
  cr_assert_eq(cairn_scaffold_local_init_op(sc), local2);
  cr_assert_null(cairn_scaffold_ready_op(sc), "the source's value: none before it was finalized");
  cairn_session_init_fn fn;
  void *user;
  cr_assert_eq(cairn_scaffold_bound_init_fn(sc, &fn, &user, NULL), 1);
  cairn_session *s;
  OK(cairn_session_new(r, 0, &s));
  OK(fn(s, user));
  cr_assert_eq(seen, sc, "re-bound to the new scaffold");
  cairn_session_free(s);
  cairn_scaffold_free(sc);
  cairn_scaffold_free(base);
  cairn_op_free(init);
  cairn_op_free(local);
  cairn_op_free(local2);
  cairn_registry_free(r);
}

/* #31: C's types make "not a Scaffold" impossible; the check that remains
 * is a scaffold of another registry (another graph). */
Test(scaffold, test_copy_from_scaffold_is_scaffold) {
  cairn_registry *r = new_reg(), *r2 = new_reg();
  cairn_scaffold *other;
  OK(cairn_scaffold_new(r2, NULL, &other));
  cairn_scaffold_options o;
  memset(&o, 0, sizeof o);
  o.copy_from_scaffold = other;
  cairn_scaffold *sc = (void *)1;
  cr_assert_eq(cairn_scaffold_new(r, &o, &sc), CAIRN_E_INVALID);
  cr_assert_null(sc);
  HAS(cairn_errmsg(), "copy_from_scaffold belongs to another registry");
  cairn_scaffold_free(other);
  cairn_registry_free(r);
  cairn_registry_free(r2);
}

/* The chief's flow with a Scaffold (what ChiefSessionCreator does). */
static cairn_status chief_create(cairn_scaffold *sc, const char *dir, const char *file, cairn_session **out,
                                 cairn_session_manager **smp) {
  cairn_status st = cairn_scaffold_finalize(sc);
  if (st) return st;
  cairn_session_manager_options base = cairn_session_manager_options_default();
  base.env = &ENV;
  cairn_session_manager *sm;
  st = cairn_session_manager_new_from_scaffold(sc, &base, &sm);
  if (st) return st;
  cairn_prepare_options o = cairn_prepare_options_from_scaffold(sc, dir, file);
  st = cairn_session_manager_prepare_session(sm, &o, out);
  if (smp)
    *smp = sm;
  else
    cairn_session_manager_free(sm);
  return st;
}

Test(scaffold, chief_flow_initializes_then_restores) {
  cairn_registry *r = new_reg();
  cairn_var *v = mkvar(r, "v", 3, CAIRN_COLL_GLOBAL);
  cairn_var *w = mkvar(r, "w", 4, CAIRN_COLL_LOCAL);
  cairn_scaffold *sc;
  OK(cairn_scaffold_new(r, NULL, &sc));
  cairn_session *s;
  OK(chief_create(sc, g_dir, NULL, &s, NULL));
  cr_assert_eq(val(v), 3.0f);
  cr_assert_eq(val(w), 4.0f);
  setval(v, 8);
  save_ckpt(cairn_scaffold_saver(sc), g_dir, 1);
  cairn_session_free(s);
  /* A "restart" on the same registry with TF's local-target semantics. */
  cairn_session_manager_options base = cairn_session_manager_options_default();
  base.env = &ENV;
  base.session_flags = CAIRN_SESSION_FRESH;
  cairn_session_manager *sm;
  OK(cairn_session_manager_new_from_scaffold(sc, &base, &sm));
  cairn_prepare_options o = cairn_prepare_options_from_scaffold(sc, g_dir, NULL);
  setval(v, 0);
  OK(cairn_session_manager_prepare_session(sm, &o, &s));
  cr_assert_eq(val(v), 8.0f, "restored, not re-initialized");
  cr_assert(inited(w), "local_init_op ran after the restore");
  cairn_session_free(s);
  cairn_session_manager_free(sm);
  cairn_scaffold_free(sc);
  cairn_registry_free(r);
}

/* ==== partial restore ================================================================== */

/* A checkpoint with only {a = 5} at dir/model.ckpt-<step>. */
static const char *checkpoint_a(const char *dir, int64_t step) {
  mkdir(dir, 0700);
  cairn_registry *r = new_reg();
  cairn_var *a = mkvar(r, "a", 0, CAIRN_COLL_GLOBAL);
  setval(a, 5);
  cairn_saver *sv = mk_saver(r);
  const char *path = save_ckpt(sv, dir, step);
  cairn_saver_free(sv);
  cairn_registry_free(r);
  return path;
}

/* #132: restrict the Saver to {a}: restored, init_op skipped, b stays
 * uninitialized: "Init operations did not make model ready for local_init"
 * naming b — and cairn says what to do. */
Test(partial_restore, naive) {
  checkpoint_a(g_dir, 1);
  cairn_registry *r = new_reg();
  cairn_var *a = mkvar(r, "a", 1, CAIRN_COLL_GLOBAL);
  cairn_var *b = mkvar(r, "b", 2, CAIRN_COLL_GLOBAL);
  cairn_saver *sv = mk_saver_list(&a, 1);
  cairn_scaffold_options o;
  memset(&o, 0, sizeof o);
  o.saver = sv;
  cairn_scaffold *sc;
  OK(cairn_scaffold_new(r, &o, &sc));
  cairn_session *s;
  cairn_session_manager *sm;
  cr_assert_eq(chief_create(sc, g_dir, NULL, &s, &sm), CAIRN_E_NOT_READY);
  HAS(cairn_errmsg(), "Init operations did not make model ready for local_init.  Init op: init, init fn: None, "
                      "error: Variables not initialized: b");
  HAS(cairn_session_manager_errmsg(sm), "set the `restore` option");
  cr_assert(inited(a));
  cr_assert_eq(val(a), 5.0f);
  cr_assert_not(inited(b));
  cairn_session_manager_free(sm);
  cairn_scaffold_free(sc);
  cairn_saver_free(sv);
  cairn_registry_free(r);
}

/* #133: the default (full) saver: the restore itself fails on b. */
Test(partial_restore, full_saver) {
  checkpoint_a(g_dir, 1);
  cairn_registry *r = new_reg();
  cairn_var *a = mkvar(r, "a", 1, CAIRN_COLL_GLOBAL);
  cairn_var *b = mkvar(r, "b", 2, CAIRN_COLL_GLOBAL);
  cairn_scaffold *sc;
  OK(cairn_scaffold_new(r, NULL, &sc));
  cairn_session *s;
  cr_assert_eq(chief_create(sc, g_dir, NULL, &s, NULL), CAIRN_E_NOT_FOUND);
  HAS(cairn_errmsg(), "'b' not found in checkpoint");
  cr_assert_not(inited(a), "a failed restore changes nothing");
  cr_assert_not(inited(b));
  cairn_scaffold_free(sc);
  cairn_registry_free(r);
}

/* #134: init_fn restores {a} from a pretrained file when checkpoint_dir is
 * empty; after a save and a restart init_fn is not called again. */
struct warm {
  const char *path;
  cairn_var *a;
  int calls;
};

static cairn_status warm_start_fn(cairn_scaffold *sc, cairn_session *s, void *user) {
  (void)sc;
  (void)s;
  struct warm *w = user;
  w->calls++;
  cairn_saver_options so = cairn_saver_options_default();
  cairn_saver *sv;
  cairn_status st = cairn_saver_new_list(&w->a, 1, &so, &sv);
  if (st) return st;
  st = cairn_saver_restore(sv, w->path, NULL);
  cairn_saver_free(sv);
  return st;
}

static void warm_start_run(int first_class) {
  char pre[600], ckdir[600];
  snprintf(pre, sizeof pre, "%s", P("pretrained"));
  snprintf(ckdir, sizeof ckdir, "%s", P("train"));
  cr_assert_eq(mkdir(ckdir, 0700), 0);
  char pretrained[700];
  snprintf(pretrained, sizeof pretrained, "%s", checkpoint_a(pre, 0));
  struct warm wu = {pretrained, NULL, 0};
  const char *include[1] = {"a"};
  cairn_restore_options ro;
  memset(&ro, 0, sizeof ro);
  ro.include = include;
  ro.n_include = 1;
  for (int round = 0; round < 2; round++) {
    cairn_registry *r = new_reg();
    cairn_var *a = mkvar(r, "a", 1, CAIRN_COLL_GLOBAL);
    cairn_var *b = mkvar(r, "b", 2, CAIRN_COLL_GLOBAL);
    wu.a = a;
    cairn_scaffold_options o;
    memset(&o, 0, sizeof o);
    if (first_class) {
      o.warm_start_path = pretrained;
      o.warm_start = &ro;
    } else {
      o.init_fn = warm_start_fn;
      o.init_fn_user = &wu;
      o.init_fn_name = "warm_start_fn";
    }
    cairn_scaffold *sc;
    OK(cairn_scaffold_new(r, &o, &sc));
    cairn_session *s;
    cairn_session_manager *sm;
    OK(chief_create(sc, ckdir, NULL, &s, &sm));
    if (round == 0) {
      cr_assert_eq(val(a), 5.0f, "a from the pretrained file");
      cr_assert_eq(val(b), 2.0f, "b from its initializer");
      if (first_class) {
        const cairn_restore_report *rep = cairn_session_manager_restore_report(sm);
        cr_assert_not_null(rep);
        cr_assert_eq(cairn_restore_report_count(rep, CAIRN_RESTORE_RESTORED), 1u);
        cr_assert_eq(cairn_restore_report_count(rep, CAIRN_RESTORE_SKIPPED), 1u);
      }
      setval(a, 6); /* training */
      setval(b, 7);
      save_ckpt(cairn_scaffold_saver(sc), ckdir, 10);
    } else {
      cr_assert_eq(val(a), 6.0f, "restored from checkpoint_dir, not warm-started again");
      cr_assert_eq(val(b), 7.0f);
    }
    cr_assert_eq(wu.calls, first_class ? 0 : 1);
    cairn_session_free(s);
    cairn_session_manager_free(sm);
    cairn_scaffold_free(sc);
    cairn_registry_free(r);
  }
}

Test(partial_restore, warm_start_via_init_fn) { warm_start_run(0); }

/* cairn's first-class form of #134. */
Test(partial_restore, warm_start_option) { warm_start_run(1); }

/* #135: Saver([a]), local_init_op = group(default local init, init b),
 * ready_for_local_init_op = uninit([a]): ready; b is re-initialized on every
 * session (re)creation — the recipe's caveat. */
Test(partial_restore, local_init_op_trick) {
  checkpoint_a(g_dir, 1);
  cairn_registry *r = new_reg();
  cairn_var *a = mkvar(r, "a", 1, CAIRN_COLL_GLOBAL);
  cairn_var *b = mkvar(r, "b", 2, CAIRN_COLL_GLOBAL);
  cairn_var *m = mkvar(r, "metric", 0, CAIRN_COLL_LOCAL);
  cairn_saver *sv = mk_saver_list(&a, 1);
  cairn_op *parts[2] = {op_init_coll(r, "local_init", CAIRN_COLL_LOCAL), op_init1("b/Assign", b)};
  cairn_op *local;
  OK(cairn_op_new_group("local_init_and_b", parts, 2, &local));
  cairn_ready_op *rfl;
  OK(cairn_ready_op_new_uninitialized_vars("ready_for_local_init", &a, 1, &rfl));
  cairn_scaffold_options o;
  memset(&o, 0, sizeof o);
  o.saver = sv;
  o.local_init_op = local;
  o.ready_for_local_init_op = rfl;
  cairn_scaffold *sc;
  OK(cairn_scaffold_new(r, &o, &sc));
  cairn_session *s;
  cairn_session_manager *sm;
  OK(chief_create(sc, g_dir, NULL, &s, &sm));
  cr_assert_eq(val(a), 5.0f);
  cr_assert_eq(val(b), 2.0f);
  cr_assert(inited(m));
  setval(b, 9); /* trained */
  cairn_session_free(s);
  /* Session re-creation (a restart or a recovery): b is reset. */
  cairn_prepare_options po = cairn_prepare_options_from_scaffold(sc, g_dir, NULL);
  OK(cairn_session_manager_prepare_session(sm, &po, &s));
  cr_assert_eq(val(b), 2.0f, "re-initialized by local_init_op on every creation");
  cr_assert_eq(val(a), 5.0f);
  cairn_session_free(s);
  cairn_session_manager_free(sm);
  cairn_scaffold_free(sc);
  cairn_op_free(parts[0]);
  cairn_op_free(parts[1]);
  cairn_op_free(local);
  cairn_ready_op_free(rfl);
  cairn_saver_free(sv);
  cairn_registry_free(r);
}

/* cairn's first-class partial restore: lenient restore of what the
 * checkpoint has, the other GLOBAL variables initialized; later restarts
 * restore everything. */
Test(partial_restore, restore_option_lenient) {
  checkpoint_a(g_dir, 1);
  cairn_restore_options ro;
  memset(&ro, 0, sizeof ro);
  ro.lenient = 1;
  for (int round = 0; round < 2; round++) {
    cairn_registry *r = new_reg();
    cairn_var *a = mkvar(r, "a", 1, CAIRN_COLL_GLOBAL);
    cairn_var *b = mkvar(r, "b", 2, CAIRN_COLL_GLOBAL);
    cairn_scaffold_options o;
    memset(&o, 0, sizeof o);
    o.restore = &ro;
    cairn_scaffold *sc;
    OK(cairn_scaffold_new(r, &o, &sc));
    cairn_session *s;
    cairn_session_manager *sm;
    OK(chief_create(sc, g_dir, NULL, &s, &sm));
    const cairn_restore_report *rep = cairn_session_manager_restore_report(sm);
    cr_assert_not_null(rep);
    if (round == 0) {
      cr_assert_eq(val(a), 5.0f);
      cr_assert_eq(val(b), 2.0f, "b initialized by its initializer");
      cr_assert_eq(cairn_restore_report_count(rep, CAIRN_RESTORE_MISSING), 1u);
      cr_assert_str_eq(cairn_restore_report_item(rep, CAIRN_RESTORE_MISSING, 0)->name, "b");
      cr_assert(logged("Restoring 1 variable from "));
      cr_assert(logged("; 1 initialized (partial restore: 1 missing"));
      setval(b, 8);
      save_ckpt(cairn_scaffold_saver(sc), g_dir, 2); /* the save set is still everything */
    } else {
      cr_assert_eq(cairn_restore_report_count(rep, CAIRN_RESTORE_RESTORED), 2u);
      cr_assert_eq(val(b), 8.0f, "restored this time");
    }
    cairn_session_free(s);
    cairn_session_manager_free(sm);
    cairn_scaffold_free(sc);
    cairn_registry_free(r);
  }
}

/* The restore option with an exclude pattern: a variable present in the
 * checkpoint is initialized instead (a new head on a trained body). */
Test(partial_restore, restore_option_exclude_with_filename) {
  cairn_registry *r0 = new_reg();
  setval(mkvar(r0, "body/kernel", 0, CAIRN_COLL_GLOBAL), 3);
  setval(mkvar(r0, "head/kernel", 0, CAIRN_COLL_GLOBAL), 4);
  cairn_saver *sv0 = mk_saver(r0);
  char path[700];
  snprintf(path, sizeof path, "%s", save_ckpt(sv0, g_dir, 5));
  cairn_saver_free(sv0);
  cairn_registry_free(r0);

  cairn_registry *r = new_reg();
  cairn_var *body = mkvar(r, "body/kernel", 1, CAIRN_COLL_GLOBAL);
  cairn_var *head = mkvar(r, "head/kernel", 2, CAIRN_COLL_GLOBAL);
  const char *exclude[1] = {"head/*"};
  cairn_restore_options ro;
  memset(&ro, 0, sizeof ro);
  ro.exclude = exclude;
  ro.n_exclude = 1;
  cairn_scaffold_options o;
  memset(&o, 0, sizeof o);
  o.restore = &ro;
  cairn_scaffold *sc;
  OK(cairn_scaffold_new(r, &o, &sc));
  cairn_session *s;
  OK(chief_create(sc, NULL, path, &s, NULL));
  cr_assert_eq(val(body), 3.0f);
  cr_assert_eq(val(head), 2.0f);
  cairn_session_free(s);
  cairn_scaffold_free(sc);
  cairn_registry_free(r);
}

/* #136 (SessionManager level): two ranks, both chief, in threads; only
 * rank 0 has a checkpoint (global_step 7); after creation the broadcast
 * copies rank 0's GLOBAL variables to rank 1. */
struct rank {
  int id;
  const char *dir;
  cairn_registry *r;
  cairn_var *gs, *w;
  struct rank *root;
  pthread_barrier_t *barrier;
  cairn_status st;
  int64_t step_after_create, step_after_broadcast;
};

static cairn_status broadcast_fn(cairn_session *s, void *user) {
  (void)s;
  struct rank *k = user;
  *(int64_t *)cairn_var_tensor(k->gs)->data = *(int64_t *)cairn_var_tensor(k->root->gs)->data;
  setval(k->w, val(k->root->w));
  return CAIRN_OK;
}

static void *rank_thread(void *p) {
  struct rank *k = p;
  cairn_scaffold *sc = NULL;
  cairn_session *s = NULL;
  k->st = cairn_scaffold_new(k->r, NULL, &sc);
  if (!k->st) k->st = chief_create(sc, k->dir, NULL, &s, NULL);
  if (!k->st) k->st = cairn_session_global_step(s, &k->step_after_create);
  pthread_barrier_wait(k->barrier); /* every rank reaches after_create_session */
  cairn_op *bcast = NULL;
  if (!k->st && k->id != 0) k->st = cairn_op_new("broadcast", broadcast_fn, k, NULL, &bcast);
  if (!k->st && bcast) k->st = cairn_session_run_op(s, bcast);
  pthread_barrier_wait(k->barrier);
  if (!k->st) k->st = cairn_session_global_step(s, &k->step_after_broadcast);
  cairn_op_free(bcast);
  cairn_session_free(s);
  cairn_scaffold_free(sc);
  return NULL;
}

Test(partial_restore, horovod_pattern) {
  {
    cairn_registry *r = new_reg();
    cairn_var *gs;
    OK(cairn_registry_global_step(r, &gs));
    *(int64_t *)cairn_var_tensor(gs)->data = 7;
    cairn_var_set_initialized(gs, 1);
    setval(mkvar(r, "w", 0, CAIRN_COLL_GLOBAL), 42);
    cairn_saver *sv = mk_saver(r);
    save_ckpt(sv, g_dir, 7);
    cairn_saver_free(sv);
    cairn_registry_free(r);
  }
  pthread_barrier_t barrier;
  pthread_barrier_init(&barrier, NULL, 2);
  struct rank ranks[2];
  memset(ranks, 0, sizeof ranks);
  for (int i = 0; i < 2; i++) {
    ranks[i].id = i;
    ranks[i].dir = i == 0 ? g_dir : NULL;
    ranks[i].r = new_reg();
    OK(cairn_registry_global_step(ranks[i].r, &ranks[i].gs));
    ranks[i].w = mkvar(ranks[i].r, "w", 1, CAIRN_COLL_GLOBAL);
    ranks[i].root = &ranks[0];
    ranks[i].barrier = &barrier;
  }
  pthread_t t[2];
  for (int i = 0; i < 2; i++) cr_assert_eq(pthread_create(&t[i], NULL, rank_thread, &ranks[i]), 0);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < 2; i++) cr_assert_eq(ranks[i].st, CAIRN_OK, "rank %d", i);
  cr_assert_eq(ranks[0].step_after_create, 7, "rank 0 restores");
  cr_assert_eq(ranks[1].step_after_create, 0, "rank 1 initializes");
  cr_assert_eq(ranks[0].step_after_broadcast, 7);
  cr_assert_eq(ranks[1].step_after_broadcast, 7);
  cr_assert_eq(val(ranks[1].w), 42.0f);
  pthread_barrier_destroy(&barrier);
  for (int i = 0; i < 2; i++) cairn_registry_free(ranks[i].r);
}

/* Chief and workers: a worker's local_init_op that initializes a GLOBAL variable
 * silently overwrites the chief's trained value (the classic trap). */
Test(partial_restore, worker_local_init_of_global_overwrites_chief) {
  cairn_registry *r = new_reg();
  cairn_var *a = mkvar(r, "a", 1, CAIRN_COLL_GLOBAL);
  cairn_var *b = mkvar(r, "b", 2, CAIRN_COLL_GLOBAL);
  setval(a, 5); /* the chief restored / trained both */
  setval(b, 9);
  cairn_op *local = op_init1("b/Assign", b);
  cairn_ready_op *ready = uninit(r, ALL);
  cairn_ready_op *rfl;
  OK(cairn_ready_op_new_uninitialized_vars("ready_for_local_init", &a, 1, &rfl));
  cairn_session_manager *worker = mk_sm(r, local, ready, rfl, 1);
  cairn_session *s;
  OK(cairn_session_manager_wait_for_session(worker, 10, &s));
  cr_assert_eq(val(b), 2.0f, "the worker reset the shared b");
  cairn_session_free(s);
  cairn_session_manager_free(worker);
  cairn_op_free(local);
  cairn_ready_op_free(ready);
  cairn_ready_op_free(rfl);
  cairn_registry_free(r);
}

/* ==== sessions and runs ================================================================== */

struct step_ud {
  cairn_var *gs;
  int produce_loss;
};

/* A training step: global_step += 1; publishes loss = 2·x[0]. */
static cairn_status step_fn(cairn_session *s, void *user) {
  struct step_ud *u = user;
  const cairn_tensor *x = cairn_session_feed(s, "x");
  if (!x) return cairn_session_fail(s, CAIRN_E_INVALID, "step: feed 'x' missing");
  (*(int64_t *)cairn_var_tensor(u->gs)->data)++;
  if (u->produce_loss && cairn_session_wants(s, "loss")) {
    cairn_status st = cairn_session_output_f64(s, "loss", 2.0 * ((const float *)x->data)[0]);
    if (st) return st;
  }
  cairn_status st = cairn_session_output_i64(s, "nobody_asked", 1);
  if (st) return st;
  cairn_session_summary_scalar(s, "loss_summary", 0.5);
  return CAIRN_OK;
}

static void summary_sink(void *ctx, const char *tag, double value) {
  double *got = ctx;
  if (!strcmp(tag, "loss_summary")) *got = value;
}

Test(session, run_feeds_fetches_and_global_step_read_before_the_step) {
  cairn_registry *r = new_reg();
  cairn_var *gs;
  OK(cairn_registry_global_step(r, &gs));
  cairn_var *v = mkvar(r, "v", 3, CAIRN_COLL_GLOBAL);
  OK(cairn_registry_initialize_collection(r, CAIRN_COLL_GLOBAL));
  *(int64_t *)cairn_var_tensor(gs)->data = 41;
  struct step_ud u = {gs, 1};
  cairn_op *step;
  OK(cairn_op_new("train", step_fn, &u, NULL, &step));
  float xv[1] = {1.5f};
  int64_t one = 1;
  cairn_tensor x;
  OK(cairn_tensor_view(&x, xv, CAIRN_DTYPE_F32, 1, &one));
  cairn_feed feeds[1] = {{"x", &x}};
  cairn_fetch fetches[3] = {{"loss", {0}}, {"global_step", {0}}, {"v", {0}}};
  double summary = 0;
  cairn_run_args a = {(const cairn_op *const[]){step}, 1, feeds, 1, fetches, 3, summary_sink, &summary};
  cairn_session *s;
  OK(cairn_session_new(r, 0, &s));
  OK(cairn_session_run(s, &a));
  cr_assert_eq(fetches[0].value.kind, CAIRN_VALUE_F64);
  cr_assert_float_eq(fetches[0].value.f64, 3.0, 1e-12);
  cr_assert_eq(fetches[1].value.kind, CAIRN_VALUE_I64);
  cr_assert_eq(fetches[1].value.i64, 41, "the value before the step's increment (TF's read tensor)");
  cr_assert_eq(fetches[2].value.kind, CAIRN_VALUE_TENSOR);
  cr_assert_eq(fetches[2].value.tensor, cairn_var_tensor(v));
  cr_assert_float_eq(summary, 0.5, 0);
  int64_t now;
  OK(cairn_session_global_step(s, &now));
  cr_assert_eq(now, 42);
  /* A fetch nobody produces. */
  u.produce_loss = 0;
  cr_assert_eq(cairn_session_run(s, &a), CAIRN_E_NOT_FOUND);
  HAS(cairn_session_errmsg(s), "fetch 'loss' was not produced by the ops run ('train') and names no variable");
  /* A missing feed: the op's own message, on the session and the thread. */
  a.n_feeds = 0;
  cr_assert_eq(cairn_session_run(s, &a), CAIRN_E_INVALID);
  HAS(cairn_session_errmsg(s), "step: feed 'x' missing");
  HAS(cairn_errmsg(), "step: feed 'x' missing");
  /* Outside a run, outputs are refused and feeds are absent. */
  cr_assert_eq(cairn_session_output_f64(s, "loss", 1), CAIRN_E_STATE);
  cr_assert_null(cairn_session_feed(s, "x"));
  cr_assert_eq(cairn_session_wants(s, "loss"), 0);
  cairn_session_free(s);
  cairn_op_free(step);
  cairn_registry_free(r);
}

Test(session, fetching_an_uninitialized_variable_and_a_closed_session) {
  cairn_registry *r = new_reg();
  cairn_var *v = mkvar(r, "v", 3, CAIRN_COLL_GLOBAL);
  cairn_session *s;
  OK(cairn_session_new(r, 0, &s));
  cairn_fetch f[2] = {{"v", {0}}, {"v", {0}}};
  cairn_run_args a;
  memset(&a, 0, sizeof a);
  a.fetches = f;
  a.n_fetches = 1;
  cr_assert_eq(cairn_session_run(s, &a), CAIRN_E_UNINITIALIZED);
  HAS(cairn_session_errmsg(s), "Attempting to use uninitialized value v");
  int64_t step;
  cr_assert_eq(cairn_session_global_step(s, &step), CAIRN_E_NOT_FOUND);
  a.n_fetches = 2;
  cr_assert_eq(cairn_session_run(s, &a), CAIRN_E_INVALID, "two fetches of one name");
  setval(v, 1);
  a.n_fetches = 1;
  OK(cairn_session_run(s, &a));
  cr_assert_eq(f[0].value.kind, CAIRN_VALUE_TENSOR);
  cairn_session_close(s);
  cairn_session_close(s);
  cr_assert(cairn_session_is_closed(s));
  cr_assert_eq(cairn_session_run(s, &a), CAIRN_E_STATE);
  HAS(cairn_session_errmsg(s), "Attempted to use a closed Session.");
  cr_assert_eq(cairn_session_registry(s), r, "the registry keeps its values");
  cr_assert(inited(v));
  cairn_session_free(s);
  cairn_session_free(NULL);
  cairn_registry_free(r);
}

Test(session, fresh_session_starts_uninitialized) {
  cairn_registry *r = new_reg();
  cairn_var *v = mkvar(r, "v", 3, CAIRN_COLL_GLOBAL);
  cairn_var *w = mkvar(r, "w", 3, CAIRN_COLL_LOCAL);
  OK(cairn_registry_initialize_collection(r, CAIRN_COLL_ALL));
  cairn_session *s1, *s2, *s3;
  OK(cairn_session_new(r, 0, &s1));
  cr_assert(inited(v) && inited(w), "a shared registry: the new session sees the values");
  OK(cairn_session_new(r, CAIRN_SESSION_FRESH, &s2));
  cr_assert_not(inited(v) || inited(w), "TF's local target: a new session starts empty");
  cr_assert_eq(val(v), 3.0f, "the values are untouched");
  cr_assert_gt(cairn_session_id(s2), cairn_session_id(s1));
  cr_assert_eq(cairn_session_new(r, 4, &s3), CAIRN_E_INVALID);
  cairn_session_free(s1);
  cairn_session_free(s2);
  cairn_registry_free(r);
}

/* An op that runs another op on its own session (nested runs). */
static cairn_status outer_fn(cairn_session *s, void *user) {
  cairn_op *inner = user;
  cairn_fetch f = {"inner_out", {0}};
  cairn_run_args a;
  memset(&a, 0, sizeof a);
  a.ops = (const cairn_op *const *)&inner;
  a.n_ops = 1;
  a.fetches = &f;
  a.n_fetches = 1;
  cairn_status st = cairn_session_run(s, &a);
  if (st) return st;
  return cairn_session_output_f64(s, "outer_out", f.value.f64 + 1);
}

static cairn_status inner_fn(cairn_session *s, void *user) {
  (void)user;
  if (cairn_session_feed(s, "x")) return cairn_session_fail(s, CAIRN_E_STATE, "inner run sees outer feeds");
  return cairn_session_output_f64(s, "inner_out", 10);
}

Test(session, runs_nest) {
  cairn_registry *r = new_reg();
  cairn_op *inner, *outer;
  OK(cairn_op_new("inner", inner_fn, NULL, NULL, &inner));
  OK(cairn_op_new("outer", outer_fn, inner, NULL, &outer));
  float xv[1] = {0};
  int64_t one = 1;
  cairn_tensor x;
  OK(cairn_tensor_view(&x, xv, CAIRN_DTYPE_F32, 1, &one));
  cairn_feed feed = {"x", &x};
  cairn_fetch f = {"outer_out", {0}};
  cairn_run_args a = {(const cairn_op *const[]){outer}, 1, &feed, 1, &f, 1, NULL, NULL};
  cairn_session *s;
  OK(cairn_session_new(r, 0, &s));
  OK(cairn_session_run(s, &a));
  cr_assert_float_eq(f.value.f64, 11.0, 0);
  cairn_session_free(s);
  cairn_op_free(outer);
  cairn_op_free(inner);
  cairn_registry_free(r);
}

/* ==== ops, names, collections, env ====================================================== */

struct trace {
  char log[64];
};

static cairn_status trace_fn(cairn_session *s, void *user) {
  (void)s;
  struct trace *t = user;
  strcat(t->log, "a");
  return CAIRN_OK;
}

static cairn_status trace_b_fn(cairn_session *s, void *user) {
  (void)s;
  struct trace *t = user;
  strcat(t->log, "b");
  return CAIRN_OK;
}

static cairn_status fail_fn(cairn_session *s, void *user) {
  (void)s;
  struct trace *t = user;
  strcat(t->log, "!");
  return cairn_session_fail(s, CAIRN_E_ABORTED, "worker preempted");
}

static int freed;
static void count_free(void *p) {
  (void)p;
  freed++;
}

Test(ops, group_runs_in_order_stops_at_first_error_and_holds_references) {
  struct trace t = {""};
  cairn_op *a, *b, *f, *g;
  freed = 0;
  OK(cairn_op_new("a", trace_fn, &t, count_free, &a));
  OK(cairn_op_new("b", trace_b_fn, &t, NULL, &b));
  OK(cairn_op_new("fail", fail_fn, &t, NULL, &f));
  OK(cairn_op_new_group("g", (cairn_op *[]){a, NULL, b, f, a}, 5, &g));
  cairn_op_free(a); /* the group keeps its references */
  cr_assert_eq(freed, 0);
  cairn_registry *r = new_reg();
  cairn_session *s;
  OK(cairn_session_new(r, 0, &s));
  cr_assert_eq(cairn_session_run_op(s, g), CAIRN_E_ABORTED);
  cr_assert_str_eq(t.log, "ab!");
  HAS(cairn_session_errmsg(s), "worker preempted");
  cr_assert_str_eq(cairn_op_name(g), "g");
  cairn_op_free(g);
  cr_assert_eq(freed, 1, "user data freed with the last reference");
  cairn_op_free(b);
  cairn_op_free(f);
  cairn_op_free(NULL);
  cairn_session_free(s);
  cairn_registry_free(r);
}

Test(ops, constructors_check_arguments) {
  cairn_op *op = (void *)1;
  cr_assert_eq(cairn_op_new("x", NULL, NULL, NULL, &op), CAIRN_E_NULL);
  cr_assert_null(op);
  cr_assert_eq(cairn_op_new("", trace_fn, NULL, NULL, &op), CAIRN_E_INVALID);
  cr_assert_eq(cairn_op_new_noop(NULL, &op), CAIRN_E_NULL);
  cr_assert_eq(cairn_op_new_init_vars("x", NULL, 2, &op), CAIRN_E_NULL);
  cairn_var *vars[2] = {NULL, NULL};
  cr_assert_eq(cairn_op_new_init_vars("x", vars, 2, &op), CAIRN_E_NULL);
  cairn_ready_op *rop = (void *)1;
  cr_assert_eq(cairn_ready_op_new_uninitialized("x", NULL, CAIRN_COLL_GLOBAL, &rop), CAIRN_E_NULL);
  cr_assert_null(rop);
  /* The init ops snapshot the collection when built, as TF. */
  cairn_registry *r = new_reg();
  cairn_var *v = mkvar(r, "v", 1, CAIRN_COLL_GLOBAL);
  OK(cairn_op_new_init("init", r, CAIRN_COLL_GLOBAL, &op));
  cairn_var *late = mkvar(r, "late", 1, CAIRN_COLL_GLOBAL);
  cairn_session *s;
  OK(cairn_session_new(r, 0, &s));
  OK(cairn_session_run_op(s, op));
  cr_assert(inited(v));
  cr_assert_not(inited(late));
  cairn_session_free(s);
  cairn_op_free(op);
  cairn_registry_free(r);
}

Test(ops, names_join_and_cut) {
  cairn_names *l;
  OK(cairn_names_new(&l));
  OK(cairn_names_add(l, "alpha"));
  OK(cairn_names_add(l, "beta"));
  char buf[64];
  cr_assert_eq(cairn_names_join(l, ", ", buf, sizeof buf), 11u);
  cr_assert_str_eq(buf, "alpha, beta");
  cr_assert_eq(cairn_names_join(l, ", ", buf, 6), 11u);
  cr_assert_str_eq(buf, "alpha");
  cr_assert_eq(cairn_names_join(l, NULL, NULL, 0), 11u);
  cr_assert_str_eq(cairn_names_at(l, 1), "beta");
  cr_assert_null(cairn_names_at(l, 2));
  cairn_names_clear(l);
  cr_assert_eq(cairn_names_count(l), 0u);
  cr_assert_eq(cairn_names_add(l, NULL), CAIRN_E_NULL);
  cairn_names_free(l);
}

Test(ops, registry_collections_keep_order_and_own_items) {
  cairn_registry *r = new_reg();
  freed = 0;
  int x = 1, y = 2;
  OK(cairn_registry_collection_add(r, "k", &x, count_free));
  OK(cairn_registry_collection_add(r, "other", &y, count_free));
  OK(cairn_registry_collection_add(r, "k", &y, count_free));
  void *items[4];
  cr_assert_eq(cairn_registry_collection_get(r, "k", items, 4), 2u);
  cr_assert_eq(items[0], &x);
  cr_assert_eq(items[1], &y);
  cr_assert_eq(cairn_registry_collection_get(r, "none", items, 4), 0u);
  cr_assert_eq(cairn_registry_collection_add(r, "", &x, NULL), CAIRN_E_INVALID);
  cairn_registry_finalize(r);
  cr_assert_eq(cairn_registry_collection_add(r, "k", &x, count_free), CAIRN_E_STATE);
  cairn_registry_free(r);
  cr_assert_eq(freed, 3);
}

static void capture_log(void *ctx, cairn_log_level level, const char *msg) {
  char *buf = ctx;
  snprintf(buf + strlen(buf), 256 - strlen(buf), "%d:%s;", (int)level, msg);
}

Test(ops, env_defaults_and_injection) {
  double t0 = cairn_env_now(NULL);
  cairn_env_sleep(NULL, 0.002);
  double t1 = cairn_env_now(NULL);
  cr_assert_geq(t1 - t0, 0.0015, "the default sleep sleeps (%g s)", t1 - t0);
  char buf[256] = "";
  cairn_env e;
  memset(&e, 0, sizeof e);
  e.log = capture_log;
  e.self = buf;
  cairn_env_log(&e, CAIRN_LOG_DEBUG, "x=%d", 3);
  cairn_env_log(&e, CAIRN_LOG_WARN, "careful");
  cr_assert_str_eq(buf, "0:x=3;2:careful;");
  cr_assert_eq(cairn_env_now(&ENV), F.now);
  cairn_env_sleep(&ENV, 2.5);
  cr_assert_float_eq(F.now, 1002.5, 1e-9);
}

/* cairn_env as a function table that can grow: a zero-filled env is valid
 * and logs everything, one giving its sizeof and one from a "newer header"
 * (a larger size) are valid too; a size below the first layout is refused
 * by cairn_env_check and by every constructor that is given it, naming
 * the size and the fix. */
Test(ops, env_size_zero_means_the_first_layout) {
  cairn_env zero;
  memset(&zero, 0, sizeof zero);
  OK(cairn_env_check(&zero));
  OK(cairn_env_check(NULL));
  struct {
    cairn_env e;
    void *newer_member;
  } newer;
  memset(&newer, 0, sizeof newer);
  char buf[256] = "";
  newer.e.log = capture_log;
  newer.e.self = buf;
  newer.e.struct_size = sizeof newer;
  OK(cairn_env_check(&newer.e));
  cairn_env_log(&newer.e, CAIRN_LOG_DEBUG, "n=%d", 1);
  cr_assert_str_eq(buf, "0:n=1;");
  cairn_env sized = {.now = f_now, .sleep = f_sleep, .struct_size = CAIRN_ENV_SIZE};
  OK(cairn_env_check(&sized));
  cairn_registry *r = new_reg();
  cairn_session_manager_options o = cairn_session_manager_options_default();
  cairn_session_manager *sm;
  o.env = &zero;
  OK(cairn_session_manager_new(r, &o, &sm));
  cairn_session_manager_free(sm);
  o.env = &sized;
  OK(cairn_session_manager_new(r, &o, &sm));
  cairn_session_manager_free(sm);

  cairn_env bad = {.now = f_now, .struct_size = 4};
  cr_assert_eq(cairn_env_check(&bad), CAIRN_E_INVALID);
  cr_assert(strstr(cairn_errmsg(), "env_check: env->struct_size is 4") && strstr(cairn_errmsg(), "sizeof(cairn_env)"),
            "%s", cairn_errmsg());
  o.env = &bad;
  sm = (cairn_session_manager *)&bad;
  cr_assert_eq(cairn_session_manager_new(r, &o, &sm), CAIRN_E_INVALID);
  cr_assert_null(sm);
  cr_assert(strstr(cairn_errmsg(), "session_manager_new: env->struct_size is 4"), "%s", cairn_errmsg());
  cairn_registry_free(r);
}

/* ==== A new user's traps ================================================================ */

/* No checkpoint in checkpoint_dir: prepare_session logs one INFO line and
 * initializes; recover_session says so too; with require_checkpoint both
 * fail, naming the directory and whether it exists. */
Test(session_manager, no_checkpoint_is_logged_or_refused) {
  cairn_registry *r = new_reg();
  cairn_var *v = mkvar(r, "v", 3, CAIRN_COLL_GLOBAL);
  cairn_op *init = op_init_coll(r, "init", CAIRN_COLL_GLOBAL);
  cairn_saver *sv = mk_saver(r);
  cairn_session_manager *sm = mk_sm(r, NULL, NULL, NULL, 0);
  cairn_prepare_options po = popts(init, sv, P("none"));
  cairn_session *s;
  OK(cairn_session_manager_prepare_session(sm, &po, &s));
  cr_assert_eq(val(v), 3.0f);
  char want[700];
  snprintf(want, sizeof want, "no checkpoint in '%s': initializing (the directory does not exist)", P("none"));
  cr_assert(logged(want), "log: %s", F.log);
  cairn_session_free(s);
  int initialized = 1;
  po = popts(NULL, sv, g_dir);
  OK(cairn_session_manager_recover_session(sm, &po, &s, &initialized));
  cr_assert_eq(initialized, 0);
  snprintf(want, sizeof want,
           "no checkpoint in '%s': the session is returned uninitialized (the directory has no state file "
           "'checkpoint')",
           g_dir);
  cr_assert(logged(want), "log: %s", F.log);
  cairn_session_free(s);
  cairn_session_manager_free(sm);

  /* require_checkpoint */
  cairn_session_manager_options o = cairn_session_manager_options_default();
  o.env = &ENV;
  o.require_checkpoint = 1;
  OK(cairn_session_manager_new(r, &o, &sm));
  po = popts(init, sv, P("none"));
  po.wait_for_checkpoint = 1;
  po.max_wait_secs = 60;
  cr_assert_eq(cairn_session_manager_prepare_session(sm, &po, &s), CAIRN_E_NOT_FOUND);
  cr_assert_null(s);
  snprintf(want, sizeof want,
           "prepare_session: require_checkpoint is set and there is no checkpoint in '%s' (the directory does not "
           "exist, after waiting up to max_wait_secs 60 s); refusing to start from freshly initialized variables",
           P("none"));
  cr_assert_str_eq(cairn_errmsg(), want);
  cr_assert_str_eq(cairn_session_manager_errmsg(sm), want);
  cr_assert_eq(F.sleeps, 2, "waited first (recovery_wait_secs 30, budget 60)");
  po = popts(NULL, sv, g_dir);
  cr_assert_eq(cairn_session_manager_recover_session(sm, &po, &s, &initialized), CAIRN_E_NOT_FOUND);
  HAS(cairn_errmsg(), "recover_session: require_checkpoint is set and there is no checkpoint in '");
  HAS(cairn_errmsg(), "(the directory has no state file 'checkpoint')");
  /* With a checkpoint it restores as usual. */
  setval(v, 8);
  save_ckpt(sv, g_dir, 4);
  setval(v, 0);
  po = popts(init, sv, g_dir);
  OK(cairn_session_manager_prepare_session(sm, &po, &s));
  cr_assert_eq(val(v), 8.0f);
  cairn_session_free(s);
  cairn_session_manager_free(sm);
  cairn_op_free(init);
  cairn_saver_free(sv);
  cairn_registry_free(r);
}

/* local_init_op writing over variables just restored: a WARNING names
 * them (only those the restore wrote: with the `restore` option, the
 * report's restored list) and the remedy; without a restore, or when
 * local_init_op leaves them alone, nothing is said. */
Test(partial_restore, local_init_op_overwriting_restored_variables_warns) {
  cairn_registry *r = new_reg();
  cairn_var *a = mkvar(r, "a", 1, CAIRN_COLL_GLOBAL);
  cairn_var *b = mkvar(r, "b", 2, CAIRN_COLL_GLOBAL);
  cairn_var *vars[12];
  for (int i = 0; i < 10; i++) {
    char name[16];
    snprintf(name, sizeof name, "w%d", i);
    vars[i] = mkvar(r, name, (float)i, CAIRN_COLL_GLOBAL);
  }
  /* local_init_op: a = 1 and every w_i = i ("load the pretrained weights") */
  cairn_op *parts[11];
  parts[0] = op_init1("a/Assign", a);
  for (int i = 0; i < 10; i++) parts[i + 1] = op_init1("w/Assign", vars[i]);
  cairn_op *local;
  OK(cairn_op_new_group("load_pretrained", parts, 11, &local));
  cairn_scaffold_options so;
  memset(&so, 0, sizeof so);
  so.local_init_op = local;
  cairn_scaffold *sc;
  OK(cairn_scaffold_new(r, &so, &sc));
  cairn_session *s;
  cairn_session_manager *sm;
  OK(chief_create(sc, g_dir, NULL, &s, &sm));
  cr_assert_not(logged("local_init_op"), "nothing restored, nothing to say: %s", F.log);
  setval(a, 50);
  for (int i = 0; i < 10; i++) setval(vars[i], 100.0f + (float)i);
  save_ckpt(cairn_scaffold_saver(sc), g_dir, 7);
  cairn_session_free(s);
  cairn_prepare_options po = cairn_prepare_options_from_scaffold(sc, g_dir, NULL);
  OK(cairn_session_manager_prepare_session(sm, &po, &s));
  cr_assert_eq(val(a), 1.0f, "TF's semantics are kept: local_init_op runs after the restore");
  char want[900];
  snprintf(want, sizeof want,
           "local_init_op 'load_pretrained' changed 11 of the 12 variables just restored from '%s': 'a', 'w0', "
           "'w1', 'w2', 'w3', 'w4', 'w5', 'w6' and 3 more. local_init_op runs after every restore",
           P("model.ckpt-7"));
  cr_assert(logged(want), "log: %s", F.log);
  cr_assert_not(logged("'b'"));
  cr_assert_eq(val(b), 2.0f);
  cairn_session_free(s);

  /* recover_session watches too. */
  F.log[0] = '\0';
  int initialized;
  OK(cairn_session_manager_recover_session(sm, &po, &s, &initialized));
  cr_assert_eq(initialized, 1);
  cr_assert(logged("local_init_op 'load_pretrained' changed 11 of the 12 variables"), "log: %s", F.log);
  cairn_session_free(s);
  cairn_session_manager_free(sm);
  cairn_scaffold_free(sc);

  /* The `restore` option restoring only b: local_init_op's variables were
     not restored, b is untouched: no warning. */
  F.log[0] = '\0';
  const char *only_b[1] = {"b"};
  cairn_restore_options ro;
  memset(&ro, 0, sizeof ro);
  ro.include = only_b;
  ro.n_include = 1;
  so.restore = &ro;
  OK(cairn_scaffold_new(r, &so, &sc));
  OK(chief_create(sc, g_dir, NULL, &s, NULL));
  cr_assert(logged("Restoring 1 variable from "), "log: %s", F.log);
  cr_assert_not(logged("local_init_op 'load_pretrained' changed"), "log: %s", F.log);
  cairn_session_free(s);
  cairn_scaffold_free(sc);
  for (int i = 0; i < 11; i++) cairn_op_free(parts[i]);
  cairn_op_free(local);
  cairn_registry_free(r);
}

/* The SessionManager's and prepare's defaults come from the library; the
 * Scaffold's are the zero-filled struct. */
Test(options, session_manager_prepare_scaffold_defaults) {
  cairn_session_manager_options m = cairn_session_manager_options_default();
  cr_assert_float_eq(m.recovery_wait_secs, 30.0, 0);
  cr_assert(!m.local_init_op && !m.local_init_feeds && !m.n_local_init_feeds && !m.ready_op &&
            !m.ready_for_local_init_op && !m.session_flags && !m.env && !m.require_checkpoint);
  cairn_prepare_options p = cairn_prepare_options_default();
  cr_assert_float_eq(p.max_wait_secs, 7200.0, 0);
  cr_assert(!p.init_op && !p.init_feeds && !p.n_init_feeds && !p.init_fn && !p.init_fn_user && !p.init_fn_name &&
            !p.saver && !p.checkpoint_dir && !p.checkpoint_filename_with_path && !p.wait_for_checkpoint &&
            !p.restore && !p.warm_start_path && !p.warm_start);
  cairn_scaffold_options z, d = cairn_scaffold_options_default();
  memset(&z, 0, sizeof z);
  cr_assert(memcmp(&d, &z, sizeof z) == 0);
}

/* ---- the directory's own files only, whatever the state file says ---- */

/* What prepare_session restores from g_dir (the step; -1 when it fails,
 * with the message in err). */
static int64_t restored_step(char *err, size_t len) {
  cairn_var *big;
  cairn_registry *r = big_reg(&big);
  cairn_ready_op *ready = uninit(r, ALL);
  cairn_session_manager *sm = mk_sm(r, NULL, ready, NULL, 0);
  cairn_saver *sv = mk_saver(r);
  cairn_prepare_options o = popts(NULL, sv, g_dir);
  cairn_session *s = NULL;
  int64_t step = -1;
  err[0] = '\0';
  if (cairn_session_manager_prepare_session(sm, &o, &s) == CAIRN_OK) {
    OK(cairn_session_global_step(s, &step));
    if (!big_is(big, step)) step = -2; /* variables from another file than global_step */
  } else {
    snprintf(err, len, "%s", cairn_session_manager_errmsg(sm));
  }
  cairn_session_free(s);
  cairn_saver_free(sv);
  cairn_session_manager_free(sm);
  cairn_ready_op_free(ready);
  cairn_registry_free(r);
  return step;
}

/* A TF bundle "model.ckpt-99" in g_dir (global_step and big of step 99),
 * named newest by the state file, next to the Saver's 10, 20, 30. */
static void tf99(void) {
  big_save(3);
  cairn_var *big, *gs;
  cairn_registry *r = big_reg(&big);
  big_fill(r, big, 99);
  OK(cairn_registry_global_step(r, &gs));
  cairn_tfbundle_writer *w;
  OK(cairn_tfbundle_writer_open(P("model.ckpt-99"), &w));
  OK(cairn_tfbundle_writer_add(w, "big", cairn_var_tensor(big)));
  OK(cairn_tfbundle_writer_add(w, "global_step", cairn_var_tensor(gs)));
  OK(cairn_tfbundle_writer_commit(w));
  cairn_registry_free(r);
  char p10[800], p20[800], p30[800];
  snprintf(p10, sizeof p10, "%s", P("model.ckpt-10"));
  snprintf(p20, sizeof p20, "%s", P("model.ckpt-20"));
  snprintf(p30, sizeof p30, "%s", P("model.ckpt-30"));
  const char *all[] = {p10, p20, p30};
  OK(cairn_checkpoint_state_write(g_dir, P("model.ckpt-99"), all, 3, 1));
  cr_assert_eq(mkdir(P("outside"), 0755), 0, "%s", strerror(errno));
}

#define SHARD "model.ckpt-99.data-00000-of-00001"

/* Moves g_dir/name to g_dir/outside/name and leaves a link to it. */
static void link_out(const char *name) {
  char from[800], to[800], target[200];
  snprintf(from, sizeof from, "%s", P(name));
  snprintf(target, sizeof target, "outside/%s", name);
  snprintf(to, sizeof to, "%s", P(target));
  cr_assert_eq(rename(from, to), 0, "%s", strerror(errno));
  cr_assert_eq(symlink(target, from), 0, "%s", strerror(errno));
}

/* The state file's newest entry is a TF prefix whose name is no file: its
 * .index and shards are the names derived from it, and each is opened in
 * the directory. One leading out (a link), a FIFO or a directory makes it
 * unusable: the newest intact checkpoint of the directory is restored,
 * nothing outside is read, and nothing hangs (the suite's timeout). */
static void expect_skipped_99(const char *what) {
  char err[2048], latest[800];
  int64_t step = restored_step(err, sizeof err);
  cr_assert_eq(step, 30, "%s: restored step %lld, not the intact step 30 (%s)", what, (long long)step, err);
  OK(cairn_latest_checkpoint(g_dir, latest, sizeof latest));
  cr_assert_str_eq(latest, P("model.ckpt-30"), "%s: latest_checkpoint", what);
  cairn_ckpt *c = NULL;
  char note[4096];
  OK(cairn_latest_checkpoint_open(g_dir, latest, sizeof latest, note, sizeof note, &c));
  cr_assert_str_eq(cairn_ckpt_path(c), P("model.ckpt-30"));
  cairn_ckpt_close(c);
}

Test(session_manager, tf_prefix_index_linked_out_is_not_read) {
  tf99();
  link_out("model.ckpt-99.index");
  expect_skipped_99("index linked out");
  /* the state file's reader already ignores the entry, saying why */
  cairn_checkpoint_state *st;
  OK(cairn_checkpoint_state_read(g_dir, &st));
  cr_assert_eq(cairn_checkpoint_state_ignored_count(st), 2u, "as a listed path and as model_checkpoint_path");
  cr_assert_str_eq(cairn_checkpoint_state_ignored_at(st, 0), "model.ckpt-99");
  cr_assert_str_eq(cairn_checkpoint_state_model_path(st), P("model.ckpt-30"));
  cairn_checkpoint_state_free(st);
}

Test(session_manager, tf_prefix_shard_linked_out_is_not_read) {
  tf99();
  link_out(SHARD);
  expect_skipped_99("data shard linked out");
  char note[4096], latest[800];
  OK(cairn_latest_checkpoint_note(g_dir, latest, sizeof latest, note, sizeof note));
  HAS(note, "skipped '");
  HAS(note, "model.ckpt-99': I/O error: ckpt_open: cannot open data shard");
  HAS(note, "it is a symbolic link to '");
}

Test(session_manager, tf_prefix_shard_fifo_is_refused_at_once) {
  tf99();
  cr_assert_eq(unlink(P(SHARD)), 0);
  cr_assert_eq(mkfifo(P(SHARD), 0644), 0, "%s", strerror(errno));
  expect_skipped_99("data shard a FIFO");
  char note[4096], latest[800];
  OK(cairn_latest_checkpoint_note(g_dir, latest, sizeof latest, note, sizeof note));
  HAS(note, "it is a FIFO, not a regular file");
}

Test(session_manager, tf_prefix_shard_directory_is_refused) {
  tf99();
  cr_assert_eq(unlink(P(SHARD)), 0);
  cr_assert_eq(mkdir(P(SHARD), 0755), 0, "%s", strerror(errno));
  expect_skipped_99("data shard a directory");
}

/* Today's policy for links that stay inside: kept. */
Test(session_manager, tf_prefix_shard_linked_inside_is_kept) {
  tf99();
  cr_assert_eq(rename(P(SHARD), P("real-99.data")), 0);
  cr_assert_eq(symlink("real-99.data", P(SHARD)), 0);
  char err[2048];
  int64_t step = restored_step(err, sizeof err);
  cr_assert_eq(step, 99, "restored step %lld (%s)", (long long)step, err);
}

/* A FIFO named `checkpoint`: refused at once (a blocking open would wait
 * for a writer forever), then the directory scan. */
Test(session_manager, state_file_fifo_is_refused_at_once) {
  big_save(3);
  cr_assert_eq(unlink(P("checkpoint")), 0);
  cr_assert_eq(mkfifo(P("checkpoint"), 0644), 0, "%s", strerror(errno));
  cairn_checkpoint_state *st = NULL;
  cr_assert_eq(cairn_checkpoint_state_read(g_dir, &st), CAIRN_E_IO);
  HAS(cairn_errmsg(), "it is a FIFO, not a regular file");
  char err[2048];
  int64_t step = restored_step(err, sizeof err);
  cr_assert_eq(step, 30, "restored step %lld (%s)", (long long)step, err);
}

/* One policy for an unusable state file next to checkpoints: the newest
 * intact checkpoint found by scanning (TF would start from step 0, or fail). */
Test(session_manager, missing_state_file_restores_by_scan) {
  big_save(3);
  cr_assert_eq(unlink(P("checkpoint")), 0);
  char err[2048];
  int64_t step = restored_step(err, sizeof err);
  cr_assert_eq(step, 30, "restored step %lld (%s)", (long long)step, err);
}

Test(session_manager, garbage_state_file_restores_by_scan) {
  big_save(3);
  FILE *f = fopen(P("checkpoint"), "w");
  cr_assert_not_null(f);
  fputs("this is { not a state file\n", f);
  fclose(f);
  char err[2048];
  int64_t step = restored_step(err, sizeof err);
  cr_assert_eq(step, 30, "restored step %lld (%s)", (long long)step, err);
}

Test(session_manager, all_outside_state_file_restores_by_scan) {
  big_save(3);
  FILE *f = fopen(P("checkpoint"), "w");
  cr_assert_not_null(f);
  fputs("model_checkpoint_path: \"/etc/passwd\"\nall_model_checkpoint_paths: \"../x-5\"\n", f);
  fclose(f);
  char err[2048];
  int64_t step = restored_step(err, sizeof err);
  cr_assert_eq(step, 30, "restored step %lld (%s)", (long long)step, err);
}

/* Nothing to scan either: a garbage state file still fails (it says there
 * were checkpoints), and says that the scan found none. */
Test(session_manager, garbage_state_file_without_checkpoints_fails) {
  FILE *f = fopen(P("checkpoint"), "w");
  cr_assert_not_null(f);
  fputs("garbage\n", f);
  fclose(f);
  char err[2048];
  int64_t step = restored_step(err, sizeof err);
  cr_assert_eq(step, -1, "step %lld", (long long)step);
  HAS(err, "no checkpoint found by scanning the directory");
}

/* ---- strict means every pattern counts ----------------------------------------------------
 * A fine-tuning program restores the dense layer from a pretrained
 * checkpoint and initializes the head. "dense/kernal" (a typo) used to leave dense/kernel
 * at its random initializer with every call succeeding. */

/* pretrained/model.ckpt-0: dense/kernel 5, dense/bias 6, dense/kernel/Adam
 * 7, head/kernel 8. */
static const char *pretrained_dense(void) {
  static char path[700];
  char dir[600];
  snprintf(dir, sizeof dir, "%s", P("pretrained"));
  mkdir(dir, 0700);
  cairn_registry *r = new_reg();
  setval(mkvar(r, "dense/kernel", 0, CAIRN_COLL_MODEL), 5);
  setval(mkvar(r, "dense/bias", 0, CAIRN_COLL_MODEL), 6);
  setval(mkvar(r, "dense/kernel/Adam", 0, CAIRN_COLL_GLOBAL), 7);
  setval(mkvar(r, "head/kernel", 0, CAIRN_COLL_MODEL), 8);
  cairn_saver *sv = mk_saver(r);
  snprintf(path, sizeof path, "%s", save_ckpt(sv, dir, 0));
  cairn_saver_free(sv);
  cairn_registry_free(r);
  return path;
}

typedef struct dense_model {
  cairn_registry *r;
  cairn_var *kernel, *bias, *adam, *head;
} dense_model;

static dense_model new_dense(void) {
  dense_model m;
  m.r = new_reg();
  m.kernel = mkvar(m.r, "dense/kernel", 1, CAIRN_COLL_MODEL);
  m.bias = mkvar(m.r, "dense/bias", 2, CAIRN_COLL_MODEL);
  m.adam = mkvar(m.r, "dense/kernel/Adam", 3, CAIRN_COLL_GLOBAL);
  m.head = mkvar(m.r, "head/kernel", 4, CAIRN_COLL_MODEL);
  return m;
}

static const char *const TYPO[] = {"dense/kernal", "dense/bias"};

#define ASSERT_TYPO_NAMED(msg)                                                        \
  do {                                                                                \
    HAS((msg), "'dense/kernal'");                                                      \
    HAS((msg), "did you mean 'dense/kernel'?");                                        \
  } while (0)

/* 1. the Scaffold's warm_start */
Test(strict_restore, typo_fails_in_warm_start) {
  const char *pre = pretrained_dense();
  dense_model m = new_dense();
  cairn_restore_options ro = cairn_restore_options_default();
  ro.include = TYPO;
  ro.n_include = 2;
  cairn_scaffold_options o = cairn_scaffold_options_default();
  o.warm_start_path = pre;
  o.warm_start = &ro;
  cairn_scaffold *sc;
  OK(cairn_scaffold_new(m.r, &o, &sc));
  cairn_session *s = NULL;
  cairn_session_manager *sm;
  cr_assert_eq(chief_create(sc, P("train"), NULL, &s, &sm), CAIRN_E_NOT_FOUND);
  ASSERT_TYPO_NAMED(cairn_errmsg());
  ASSERT_TYPO_NAMED(cairn_session_manager_errmsg(sm));
  HAS(cairn_errmsg(), "nothing was changed");
  cr_assert_null(s);
  cr_assert_eq(val(m.bias), 2.0f, "dense/bias not restored either: the restore changed nothing");
  cairn_session_manager_free(sm);
  cairn_scaffold_free(sc);
  cairn_registry_free(m.r);
}

/* 2. cairn_op_new_restore + init_fn: the patterns are refused when the op
 * is made (the op's variables are known), and the checked list refuses a
 * typo in the var_list. */
Test(strict_restore, typo_fails_in_restore_op_init_fn) {
  const char *pre = pretrained_dense();
  dense_model m = new_dense();
  cairn_var *all[4] = {m.kernel, m.bias, m.adam, m.head};
  cairn_restore_options ro = cairn_restore_options_default();
  ro.include = TYPO;
  ro.n_include = 2;
  cairn_op *op = (cairn_op *)1;
  cr_assert_eq(cairn_op_new_restore("warm_start", pre, all, 4, &ro, NULL, &op), CAIRN_E_NOT_FOUND);
  cr_assert_null(op);
  HAS(cairn_errmsg(), "op_new_restore: ");
  ASSERT_TYPO_NAMED(cairn_errmsg());

  cairn_var *vars[4];
  size_t n = 99;
  cr_assert_eq(cairn_registry_list_vars_checked(m.r, CAIRN_COLL_GLOBAL, TYPO, 2, NULL, 0, vars, 4, &n, NULL),
               CAIRN_E_NOT_FOUND);
  cr_assert_eq(n, 1u, "the list is still filled: dense/bias");
  ASSERT_TYPO_NAMED(cairn_errmsg());

  /* The correct program: the op restores, and says so at INFO. */
  const char *ok[] = {"dense/kernel", "dense/bias"};
  OK(cairn_registry_list_vars_checked(m.r, CAIRN_COLL_GLOBAL, ok, 2, NULL, 0, vars, 4, &n, NULL));
  cr_assert_eq(n, 2u);
  cairn_restore_options lo = cairn_restore_options_default();
  lo.env = &ENV;
  OK(cairn_op_new_restore("warm_start", pre, vars, n, &lo, NULL, &op));
  cairn_scaffold_options so = cairn_scaffold_options_default();
  so.init_fn = cairn_op_init_fn;
  so.init_fn_user = op;
  cairn_scaffold *sc;
  OK(cairn_scaffold_new(m.r, &so, &sc));
  cairn_session *s;
  OK(chief_create(sc, P("train"), NULL, &s, NULL));
  cr_assert_eq(val(m.kernel), 5.0f);
  cr_assert_eq(val(m.bias), 6.0f);
  cr_assert_eq(val(m.head), 4.0f);
  cr_assert(logged("warm_start: Restored 2 variables from "), "%s", F.log);
  cairn_session_free(s);
  cairn_scaffold_free(sc);
  cairn_op_free(op);
  cairn_registry_free(m.r);
}

/* 3. the TF-style local_init_op recipe: a restore op of the pretrained
 * layers as local_init_op. */
Test(strict_restore, typo_fails_in_local_init_op_recipe) {
  const char *pre = pretrained_dense();
  dense_model m = new_dense();
  cairn_var *vars[4];
  size_t n;
  cairn_names *unmatched;
  OK(cairn_names_new(&unmatched));
  cr_assert_eq(cairn_registry_list_vars_checked(m.r, CAIRN_COLL_GLOBAL, TYPO, 2, NULL, 0, vars, 4, &n, unmatched),
               CAIRN_E_NOT_FOUND);
  cr_assert_eq(cairn_names_count(unmatched), 1u);
  cr_assert_str_eq(cairn_names_at(unmatched, 0), "dense/kernal");
  ASSERT_TYPO_NAMED(cairn_errmsg());
  cairn_names_free(unmatched);
  /* The same typo in the op's own options. */
  cairn_var *all[2] = {m.kernel, m.bias};
  cairn_restore_options ro = cairn_restore_options_default();
  ro.include = TYPO;
  ro.n_include = 2;
  cairn_op *op = NULL;
  cr_assert_eq(cairn_op_new_restore("local_init", pre, all, 2, &ro, NULL, &op), CAIRN_E_NOT_FOUND);
  ASSERT_TYPO_NAMED(cairn_errmsg());
  cairn_registry_free(m.r);
}

/* 4. the Scaffold's restore option (checkpoint_filename_with_path = the
 * pretrained file). */
Test(strict_restore, typo_fails_in_restore_option) {
  const char *pre = pretrained_dense();
  dense_model m = new_dense();
  cairn_restore_options ro = cairn_restore_options_default();
  ro.include = TYPO;
  ro.n_include = 2;
  cairn_scaffold_options o = cairn_scaffold_options_default();
  o.restore = &ro;
  cairn_scaffold *sc;
  OK(cairn_scaffold_new(m.r, &o, &sc));
  cairn_session *s = NULL;
  cr_assert_eq(chief_create(sc, NULL, pre, &s, NULL), CAIRN_E_NOT_FOUND);
  ASSERT_TYPO_NAMED(cairn_errmsg());
  cr_assert_not(inited(m.kernel));
  cr_assert_not(inited(m.bias), "nothing was changed");
  cairn_scaffold_free(sc);
  cairn_registry_free(m.r);
}

/* An exclude that matches nothing is legal, and a WARNING names it; in
 * lenient mode an include that matches nothing is one too. */
Test(strict_restore, unmatched_exclude_is_a_warning) {
  const char *pre = pretrained_dense();
  dense_model m = new_dense();
  const char *ex[] = {"haed/*"};
  cairn_restore_options ro = cairn_restore_options_default();
  ro.exclude = ex;
  ro.n_exclude = 1;
  ro.lenient = 1;
  cairn_scaffold_options o = cairn_scaffold_options_default();
  o.restore = &ro;
  cairn_scaffold *sc;
  OK(cairn_scaffold_new(m.r, &o, &sc));
  cairn_session *s;
  cairn_session_manager *sm;
  OK(chief_create(sc, NULL, pre, &s, &sm));
  cr_assert(logged("exclude pattern 'haed/*' matches no variable of the save set (did you mean 'head/kernel'?)"),
            "%s", F.log);
  cr_assert(logged("it leaves nothing out"));
  const cairn_restore_report *rep = cairn_session_manager_restore_report(sm);
  cr_assert_eq(cairn_restore_report_count(rep, CAIRN_RESTORE_UNMATCHED), 1u);
  cr_assert_str_eq(cairn_restore_report_item(rep, CAIRN_RESTORE_UNMATCHED, 0)->name, "haed/*");
  char text[2000];
  cairn_restore_report_format(rep, text, sizeof text);
  HAS(text, "unmatched: exclude pattern 'haed/*'");
  cr_assert_eq(val(m.head), 8.0f, "the typo excluded nothing");
  cairn_session_free(s);
  cairn_session_manager_free(sm);
  cairn_scaffold_free(sc);
  cairn_registry_free(m.r);
}

Test(strict_restore, lenient_makes_unmatched_patterns_warnings) {
  const char *pre = pretrained_dense();
  dense_model m = new_dense();
  cairn_restore_options ro = cairn_restore_options_default();
  ro.include = TYPO;
  ro.n_include = 2;
  ro.lenient = 1;
  ro.env = &ENV;
  cairn_saver *sv = mk_saver(m.r);
  cairn_restore_report *rep;
  OK(cairn_saver_restore_partial(sv, pre, &ro, &rep, NULL));
  cr_assert(logged("include pattern 'dense/kernal' matches no variable of the save set (did you mean "
                   "'dense/kernel'?) (lenient: restoring the rest)"), "%s", F.log);
  cr_assert_eq(val(m.bias), 6.0f);
  cr_assert_not(inited(m.kernel));
  cairn_restore_report_free(rep);
  cairn_saver_free(sv);
  cairn_registry_free(m.r);
}

/* A rename rule counts too: its model side must name a variable, its
 * checkpoint side a key. */
Test(strict_restore, rename_rules_must_match) {
  const char *pre = pretrained_dense();
  dense_model m = new_dense();
  cairn_saver *sv = mk_saver(m.r);
  cairn_restore_rename rn[] = {{"dense/kernl", "dense/kernel"}};
  cairn_restore_options ro = cairn_restore_options_default();
  ro.rename = rn;
  ro.n_rename = 1;
  ro.lenient = 0;
  cr_assert_eq(cairn_saver_restore_partial(sv, pre, &ro, NULL, NULL), CAIRN_E_NOT_FOUND);
  HAS(cairn_errmsg(), "rename 'dense/kernl' -> 'dense/kernel': no key of the checkpoint is 'dense/kernl' (did you "
                      "mean 'dense/kernel'?)");
  cairn_restore_rename rn2[] = {{"dense/", "dnse/"}};
  ro.rename = rn2;
  cr_assert_eq(cairn_saver_restore_partial(sv, pre, &ro, NULL, NULL), CAIRN_E_NOT_FOUND);
  HAS(cairn_errmsg(), "rename 'dense/' -> 'dnse/': no variable of the save set starts with 'dnse/'");
  HAS(cairn_errmsg(), "did you mean 'dense/");
  cr_assert_not(inited(m.kernel));
  cairn_saver_free(sv);
  cairn_registry_free(m.r);
}

/* TF's scope idiom "dense/ *" with the trainable filter: the layer's
 * weights, not its Adam slot. */
Test(strict_restore, trainable_mask_leaves_out_optimizer_slots) {
  const char *pre = pretrained_dense();
  dense_model m = new_dense();
  const char *layer[] = {"dense/*"};
  cairn_restore_options ro = cairn_restore_options_default();
  ro.include = layer;
  ro.n_include = 1;
  ro.collections = CAIRN_COLL_TRAINABLE;
  cairn_scaffold_options o = cairn_scaffold_options_default();
  o.warm_start_path = pre;
  o.warm_start = &ro;
  cairn_scaffold *sc;
  OK(cairn_scaffold_new(m.r, &o, &sc));
  cairn_session *s;
  cairn_session_manager *sm;
  OK(chief_create(sc, P("train"), NULL, &s, &sm));
  cr_assert_eq(val(m.kernel), 5.0f);
  cr_assert_eq(val(m.bias), 6.0f);
  cr_assert_eq(val(m.adam), 3.0f, "the Adam slot keeps its initializer");
  cr_assert_eq(val(m.head), 4.0f);
  const cairn_restore_report *rep = cairn_session_manager_restore_report(sm);
  cr_assert_eq(cairn_restore_report_count(rep, CAIRN_RESTORE_RESTORED), 2u);
  cr_assert(logged("Warm start: restoring 2 variables from "), "%s", F.log);
  cairn_session_free(s);
  cairn_session_manager_free(sm);
  cairn_scaffold_free(sc);
  /* Unknown bits are refused. */
  cairn_saver *sv = mk_saver(m.r);
  ro.collections = 0x40;
  cr_assert_eq(cairn_saver_restore_partial(sv, pre, &ro, NULL, NULL), CAIRN_E_INVALID);
  HAS(cairn_errmsg(), "collections 0x40 has unknown bits");
  cairn_saver_free(sv);
  cairn_registry_free(m.r);
}

/* A bundle in TF2's object-based key layout (what tf.train.Checkpoint
 * writes for a Keras model: layer_with_weights-N/<attr>/.ATTRIBUTES/
 * VARIABLE_VALUE, slots under .OPTIMIZER_SLOT), written with the
 * library's bundle writer. */
static const char *tf2_bundle(void) {
  static char prefix[700];
  snprintf(prefix, sizeof prefix, "%s", P("tf2-ckpt-1"));
  cairn_tfbundle_writer *w;
  OK(cairn_tfbundle_writer_open(prefix, &w));
  int64_t shape[1] = {3};
  cairn_tensor *t;
  OK(cairn_tensor_new(CAIRN_DTYPE_F32, 1, shape, &t));
  static const struct {
    const char *key;
    float v;
  } keys[] = {
      {"layer_with_weights-0/bias/.ATTRIBUTES/VARIABLE_VALUE", 16},
      {"layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE", 15},
      {"layer_with_weights-0/kernel/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE", 17},
      {"layer_with_weights-1/kernel/.ATTRIBUTES/VARIABLE_VALUE", 18},
      {"optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE", 19},
  };
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
    float *d = t->data;
    for (int j = 0; j < 3; j++) d[j] = keys[i].v;
    OK(cairn_tfbundle_writer_add(w, keys[i].key, t));
  }
  cairn_tensor_free(t);
  OK(cairn_tfbundle_writer_commit(w));
  return prefix;
}

Test(strict_restore, tf2_bundle_restores_with_one_rule) {
  const char *pre = tf2_bundle();
  dense_model m = new_dense();
  cairn_var *layer[2] = {m.kernel, m.bias};
  cairn_saver *sv = mk_saver_list(layer, 2);
  /* Without the flag: the near-miss key is named. */
  cr_assert_eq(cairn_saver_restore(sv, pre, NULL), CAIRN_E_NOT_FOUND);
  cairn_restore_rename rn[] = {{"layer_with_weights-0/", "dense/"}};
  cairn_restore_options ro = cairn_restore_options_default();
  ro.rename = rn;
  ro.n_rename = 1;
  cr_assert_eq(cairn_saver_restore_partial(sv, pre, &ro, NULL, NULL), CAIRN_E_NOT_FOUND);
  HAS(cairn_errmsg(), "'dense/kernel' (checkpoint name 'layer_with_weights-0/kernel') not found in checkpoint (did "
                      "you mean 'layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE'");
  HAS(cairn_errmsg(), "set tf2_names = 1");
  /* One rule and the flag. */
  ro.tf2_names = 1;
  cairn_restore_report *rep;
  OK(cairn_saver_restore_partial(sv, pre, &ro, &rep, NULL));
  cr_assert_eq(val(m.kernel), 15.0f);
  cr_assert_eq(val(m.bias), 16.0f);
  cr_assert_eq(cairn_restore_report_count(rep, CAIRN_RESTORE_RESTORED), 2u);
  cairn_restore_report_free(rep);
  cairn_saver_free(sv);
  /* A slot by an exact rule. */
  cairn_saver *sa = mk_saver_list(&m.adam, 1);
  cairn_restore_rename slot[] = {{"layer_with_weights-0/kernel/.OPTIMIZER_SLOT/optimizer/m", "dense/kernel/Adam"}};
  ro.rename = slot;
  OK(cairn_saver_restore_partial(sa, pre, &ro, NULL, NULL));
  cr_assert_eq(val(m.adam), 17.0f);
  cairn_saver_free(sa);
  cairn_registry_free(m.r);
}

/* A directory where a checkpoint path goes: its newest checkpoint; a
 * directory holding a TF bundle "variables.index" or one .safetensors
 * file: that. */
static void write_layer(int tf, const char *path, float kernel) {
  int64_t shape[1] = {3};
  cairn_tensor *t;
  OK(cairn_tensor_new(CAIRN_DTYPE_F32, 1, shape, &t));
  float *d = t->data;
  if (tf) {
    cairn_tfbundle_writer *w;
    OK(cairn_tfbundle_writer_open(path, &w));
    for (int j = 0; j < 3; j++) d[j] = kernel;
    OK(cairn_tfbundle_writer_add(w, "dense/kernel", t));
    OK(cairn_tfbundle_writer_commit(w));
  } else {
    cairn_safetensors_writer *w;
    OK(cairn_safetensors_writer_open(path, &w));
    for (int j = 0; j < 3; j++) d[j] = kernel;
    OK(cairn_safetensors_writer_add(w, "dense/kernel", t));
    OK(cairn_safetensors_writer_commit(w));
  }
  cairn_tensor_free(t);
}

Test(strict_restore, directories_are_accepted_where_a_checkpoint_is) {
  pretrained_dense(); /* P("pretrained")/model.ckpt-0 */
  dense_model m = new_dense();
  cairn_saver *sv = mk_saver_list(&m.kernel, 1);
  /* cairn_saver_restore / _partial */
  OK(cairn_saver_restore(sv, P("pretrained"), NULL));
  cr_assert_eq(val(m.kernel), 5.0f);
  /* a SavedModel-style directory: DIR/variables.index + data */
  mkdir(P("saved_model"), 0700);
  char prefix[700];
  snprintf(prefix, sizeof prefix, "%s/variables", P("saved_model"));
  write_layer(1, prefix, 21);
  OK(cairn_saver_restore_partial(sv, P("saved_model"), NULL, NULL, NULL));
  cr_assert_eq(val(m.kernel), 21.0f);
  /* one .safetensors file */
  mkdir(P("st"), 0700);
  snprintf(prefix, sizeof prefix, "%s/model.safetensors", P("st"));
  write_layer(0, prefix, 22);
  OK(cairn_saver_restore(sv, P("st"), NULL));
  cr_assert_eq(val(m.kernel), 22.0f);
  /* nothing there */
  mkdir(P("empty"), 0700);
  cr_assert_eq(cairn_saver_restore(sv, P("empty"), NULL), CAIRN_E_NOT_FOUND);
  HAS(cairn_errmsg(), "is a directory with nothing to restore");
  HAS(cairn_errmsg(), "no TensorFlow bundle 'variables.index' and no .safetensors file in it");
  /* the restore op (the log names the file the directory meant) */
  cairn_op *op;
  cairn_restore_options ro = cairn_restore_options_default();
  ro.env = &ENV;
  OK(cairn_op_new_restore("warm_start", P("pretrained"), &m.kernel, 1, &ro, NULL, &op));
  cairn_session *s;
  OK(cairn_session_new(m.r, 0, &s));
  OK(cairn_op_init_fn(NULL, s, op));
  cr_assert_eq(val(m.kernel), 5.0f);
  char want[800];
  snprintf(want, sizeof want, "warm_start: Restored 1 variable from %s/model.ckpt-0", P("pretrained"));
  cr_assert(logged(want), "%s", F.log);
  cairn_session_free(s);
  cairn_op_free(op);
  cairn_saver_free(sv);
  cairn_registry_free(m.r);
  /* the Scaffold's warm_start_path */
  m = new_dense();
  cairn_scaffold_options so = cairn_scaffold_options_default();
  so.warm_start_path = P("st");
  const char *k[] = {"dense/kernel"};
  ro.include = k;
  ro.n_include = 1;
  so.warm_start = &ro;
  cairn_scaffold *sc;
  OK(cairn_scaffold_new(m.r, &so, &sc));
  OK(chief_create(sc, P("train"), NULL, &s, NULL));
  cr_assert_eq(val(m.kernel), 22.0f);
  snprintf(want, sizeof want, "'%s' is a directory: restoring %s/model.safetensors from it", P("st"), P("st"));
  cr_assert(logged(want), "%s", F.log);
  cairn_session_free(s);
  cairn_scaffold_free(sc);
  cairn_registry_free(m.r);
}

/* A directory given to a restore means its newest usable checkpoint, with
 * the lookup's fallback: a newest file cut in half (a copy that stopped
 * early) is skipped and the one before it is restored; the restore op's
 * log names the file it read. */
Test(strict_restore, a_directory_falls_back_past_a_truncated_newest_checkpoint) {
  big_save(2); /* g_dir/model.ckpt-10, model.ckpt-20 */
  struct stat sb;
  cr_assert_eq(stat(P("model.ckpt-20"), &sb), 0);
  cr_assert_eq(truncate(P("model.ckpt-20"), sb.st_size / 2), 0);
  cairn_var *big;
  cairn_registry *r = big_reg(&big);
  cairn_saver *sv = mk_saver(r);
  OK(cairn_saver_restore(sv, g_dir, NULL));
  cr_assert(big_is(big, 10), "the step-10 checkpoint was restored");
  cairn_saver_free(sv);
  /* The restore op too, and its log names the file the directory meant. */
  cairn_restore_options ro = cairn_restore_options_default();
  ro.env = &ENV;
  cairn_op *op;
  OK(cairn_op_new_restore("warm_start", g_dir, &big, 1, &ro, NULL, &op));
  cairn_session *s;
  OK(cairn_session_new(r, 0, &s));
  big_fill(r, big, 99);
  OK(cairn_op_init_fn(NULL, s, op));
  cr_assert(big_is(big, 10));
  char want[800];
  snprintf(want, sizeof want, "warm_start: Restored 1 variable from %s", P("model.ckpt-10"));
  cr_assert(logged(want), "%s", F.log);
  cairn_session_free(s);
  cairn_op_free(op);
  cairn_registry_free(r);
}

/* A checkpoint_dir that is a regular file is reported as one, not as a
 * directory that does not exist. */
Test(session_manager, checkpoint_dir_that_is_a_file_is_named_as_such) {
  cairn_registry *r = new_reg();
  cairn_var *v = mkvar(r, "v", 3, CAIRN_COLL_GLOBAL);
  cairn_op *init = op_init_coll(r, "init", CAIRN_COLL_GLOBAL);
  cairn_saver *sv = mk_saver(r);
  FILE *f = fopen(P("model.ckpt-5"), "w");
  cr_assert_not_null(f);
  fputs("not a directory", f);
  fclose(f);
  cairn_session_manager_options o = cairn_session_manager_options_default();
  o.env = &ENV;
  o.require_checkpoint = 1;
  cairn_session_manager *sm;
  OK(cairn_session_manager_new(r, &o, &sm));
  cairn_prepare_options po = popts(init, sv, P("model.ckpt-5"));
  cairn_session *s = NULL;
  cr_assert_eq(cairn_session_manager_prepare_session(sm, &po, &s), CAIRN_E_NOT_FOUND);
  HAS(cairn_errmsg(), "it is a regular file, not a directory");
  HAS(cairn_errmsg(), "checkpoint_filename_with_path");
  cr_assert_null(strstr(cairn_errmsg(), "does not exist"), "%s", cairn_errmsg());
  cr_assert_not(inited(v));
  cairn_session_manager_free(sm);
  cairn_op_free(init);
  cairn_saver_free(sv);
  cairn_registry_free(r);
}
