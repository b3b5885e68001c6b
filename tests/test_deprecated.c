/* The names of cairn 0.1 that the constructor grammar replaced
 * (doc/deprecated.md) still compile, link and behave as the new ones: a
 * program written for 0.1 builds unchanged for one release. The only file
 * of the tree that calls them; it silences their deprecation warnings on
 * purpose (-Wno-deprecated-declarations in Makefile.am). */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, scandir */
#include "config.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cairn.h>
#if CAIRN_WITH_MPI
#include <cairn/mpi.h> /* built with MPI_CFLAGS (Makefile.am) */
#endif

#define OK(x) cr_assert_eq((x), CAIRN_OK, "%s", cairn_errmsg())

/* cairn_var_create makes the same variable as cairn_var_new, and fails as
 * it does (its messages say var_new). */
Test(deprecated, var_create_is_var_new) {
  cairn_registry *r;
  OK(cairn_registry_new(3, &r));
  int64_t shape[2] = {2, 3};
  cairn_var *a, *b;
  OK(cairn_var_create(r, "old", CAIRN_DTYPE_F32, 2, shape, cairn_init_uniform(-1, 1), CAIRN_COLL_GLOBAL, &a));
  OK(cairn_var_new(r, "new", CAIRN_DTYPE_F32, 2, shape, cairn_init_uniform(-1, 1), CAIRN_COLL_GLOBAL, &b));
  cr_assert_str_eq(cairn_var_name(a), "old");
  const cairn_tensor *ta = cairn_var_tensor(a), *tb = cairn_var_tensor(b);
  cr_assert_eq(ta->rank, 2);
  cr_assert_eq(ta->shape[0], 2);
  cr_assert_eq(ta->shape[1], 3);
  cr_assert_eq(ta->dtype, tb->dtype);
  cr_assert_eq(cairn_var_new(r, "old", CAIRN_DTYPE_F32, 2, shape, cairn_init_zeros(), CAIRN_COLL_GLOBAL, &b),
               CAIRN_E_EXISTS);
  cr_assert_eq(cairn_var_create(r, "new", CAIRN_DTYPE_F32, 1, shape, cairn_init_zeros(), CAIRN_COLL_GLOBAL, &a),
               CAIRN_E_EXISTS);
  cr_assert(strstr(cairn_errmsg(), "var_new: 'new' already exists"), "%s", cairn_errmsg());
  cairn_registry_free(r);
}

typedef struct twin {
  cairn_registry *r;
  cairn_mlp *m;
  cairn_session *s;
} twin;

static void twin_new(twin *t) {
  int64_t sizes[3] = {8, 16, 3};
  cairn_mlp_config cfg = {.n_layers = 2,
                          .sizes = sizes,
                          .hidden_act = CAIRN_ACT_RELU,
                          .loss = CAIRN_LOSS_SPARSE_SOFTMAX_XENT,
                          .optim = cairn_optim_defaults(CAIRN_OPTIM_SGD)};
  OK(cairn_registry_new(5, &t->r));
  OK(cairn_mlp_new(t->r, &cfg, &t->m));
  OK(cairn_registry_initialize_collection(t->r, CAIRN_COLL_GLOBAL));
  OK(cairn_session_new(t->r, 0, &t->s));
}

static void twin_free(twin *t) {
  cairn_session_free(t->s);
  cairn_mlp_free(t->m);
  cairn_registry_free(t->r);
}

static double run_loss(cairn_session *s, cairn_op *op, const cairn_feed *feeds, const char *name) {
  cairn_fetch f = {name, {0}};
  cairn_run_args a = cairn_run_args_one(&op);
  a.feeds = feeds;
  a.n_feeds = 2;
  a.fetches = &f;
  a.n_fetches = 1;
  OK(cairn_session_run(s, &a));
  return f.value.f64;
}

/* The MLP's train and eval ops under their old names give the same bits as
 * under the new ones, on twin models from one seed. */
Test(deprecated, mlp_op_names_are_op_new_mlp) {
  twin old, cur;
  twin_new(&old);
  twin_new(&cur);
  int64_t xs[2] = {12, 8}, ys[1] = {12};
  cairn_tensor *x, *y;
  OK(cairn_tensor_new(CAIRN_DTYPE_F32, 2, xs, &x));
  OK(cairn_tensor_new(CAIRN_DTYPE_I32, 1, ys, &y));
  for (int i = 0; i < 12; i++) {
    cairn_tensor_i32(y)[i] = i % 3;
    for (int j = 0; j < 8; j++) cairn_tensor_f32(x)[i * 8 + j] = (float)((i * 7 + j * 3) % 11) / 11.0f - 0.4f;
  }
  cairn_feed feeds[2] = {{"x", x}, {"y", y}};
  cairn_op *ot, *oe, *nt, *ne;
  OK(cairn_mlp_train_op_new(old.m, NULL, &ot));
  OK(cairn_mlp_eval_op_new(old.m, NULL, &oe));
  OK(cairn_op_new_mlp_train(cur.m, NULL, &nt));
  OK(cairn_op_new_mlp_eval(cur.m, NULL, &ne));
  cr_assert_str_eq(cairn_op_name(ot), cairn_op_name(nt));
  cr_assert_str_eq(cairn_op_name(oe), cairn_op_name(ne));
  for (int k = 0; k < 3; k++) {
    double lo = run_loss(old.s, ot, feeds, "loss"), ln = run_loss(cur.s, nt, feeds, "loss");
    cr_assert(memcmp(&lo, &ln, sizeof lo) == 0, "step %d: loss %.17g vs %.17g", k, lo, ln);
  }
  double eo = run_loss(old.s, oe, feeds, "eval_loss"), en = run_loss(cur.s, ne, feeds, "eval_loss");
  cr_assert(memcmp(&eo, &en, sizeof eo) == 0, "eval loss %.17g vs %.17g", eo, en);
  cairn_op *none;
  cr_assert_eq(cairn_mlp_train_op_new(NULL, NULL, &none), CAIRN_E_NULL);
  cairn_op_free(ot);
  cairn_op_free(oe);
  cairn_op_free(nt);
  cairn_op_free(ne);
  cairn_tensor_free(x);
  cairn_tensor_free(y);
  twin_free(&old);
  twin_free(&cur);
}

/* cairn_monitored_session_exit is close_with: a clean status closes the
 * session (should_stop is then 1, a second close is refused), NULL names
 * the new function. */
Test(deprecated, monitored_session_exit_is_close_with) {
  cairn_registry *r;
  OK(cairn_registry_new(1, &r));
  cairn_var *v;
  OK(cairn_var_new(r, "v", CAIRN_DTYPE_F32, 0, NULL, cairn_init_zeros(), CAIRN_COLL_GLOBAL, &v));
  cairn_singular_monitored_session_options o = cairn_singular_monitored_session_options_default();
  o.registry = r;
  cairn_monitored_session *ms;
  OK(cairn_singular_monitored_session_new(&o, &ms));
  cr_assert_eq(cairn_monitored_session_should_stop(ms), 0);
  OK(cairn_monitored_session_exit(ms, CAIRN_E_OUT_OF_RANGE));
  cr_assert_eq(cairn_monitored_session_should_stop(ms), 1);
  cr_assert_eq(cairn_monitored_session_close(ms), CAIRN_E_STATE);
  cairn_monitored_session_free(ms);
  cr_assert_eq(cairn_monitored_session_exit(NULL, CAIRN_OK), CAIRN_E_NULL);
  cr_assert(strstr(cairn_errmsg(), "monitored_session_close_with: ms is NULL"), "%s", cairn_errmsg());
  cairn_registry_free(r);
}

/* cairn_env's member of 0.1, ctx, is still the object the callbacks get
 * (one member under two names, cairn/env.h). */
static void capture(void *self, cairn_log_level level, const char *msg) {
  snprintf((char *)self, 64, "%d:%s", (int)level, msg);
}
Test(deprecated, env_ctx_is_env_self) {
  char buf[64] = "";
  cairn_env e = {.log = capture, .ctx = buf};
  cr_assert_eq(e.self, (void *)buf);
  cairn_env_log(&e, CAIRN_LOG_WARN, "w%d", 1);
  cr_assert_str_eq(buf, "2:w1");
}

#if CAIRN_WITH_MPI
/* cairn_mpi_init (the options first) is still exported; calling it would
 * start MPI in this test process, which tests/mpi/ does under mpirun. */
Test(deprecated, mpi_init_is_exported) {
  cairn_status (*fn)(const cairn_mpi_options *, int *, char ***, cairn_mpi **) = cairn_mpi_init;
  cr_assert_not_null(fn);
  cr_assert_neq((void *)fn, (void *)cairn_mpi_new);
}
#endif

/* ==== The built-in hooks' names of 0.1 (cairn_<kind>_hook_new) ==================== */

/* A registry with a global step and an op that adds 1 (and outputs "loss"
 * = g_loss), driven by a SingularMonitoredSession with the given hooks. */
typedef struct stepper {
  cairn_registry *r;
  cairn_var *gs;
  cairn_op *train;
  double loss;
  double clock;
} stepper;

static cairn_status bump(cairn_session *s, void *user) {
  stepper *p = user;
  *(int64_t *)cairn_var_tensor(p->gs)->data += 1;
  return cairn_session_output_f64(s, "loss", p->loss);
}

static double fake_now(void *self) {
  stepper *p = self;
  return p->clock += 0.5;
}

static void quiet(void *self, cairn_log_level level, const char *msg) {
  (void)self;
  (void)level;
  (void)msg;
}

/* Runs the op until a hook asks to stop (at most `max` runs): the status
 * of the last run, the global step at the end in *step. */
static cairn_status run_hooks(cairn_hook **hooks, size_t n, double loss, int max, int64_t *step) {
  stepper p = {.loss = loss};
  OK(cairn_registry_new(1, &p.r));
  OK(cairn_registry_global_step(p.r, &p.gs));
  OK(cairn_op_new("train", bump, &p, NULL, &p.train));
  cairn_singular_monitored_session_options o = cairn_singular_monitored_session_options_default();
  o.registry = p.r;
  o.hooks = hooks;
  o.n_hooks = n;
  cairn_monitored_session *ms;
  OK(cairn_singular_monitored_session_new(&o, &ms));
  cairn_run_args a = cairn_run_args_one(&p.train);
  cairn_status st = CAIRN_OK;
  for (int i = 0; st == CAIRN_OK && i < max && !cairn_monitored_session_should_stop(ms); i++)
    st = cairn_monitored_session_run(ms, &a);
  *step = *(int64_t *)cairn_var_tensor(p.gs)->data;
  cairn_status closed = cairn_monitored_session_close_with(ms, st);
  if (st == CAIRN_OK) st = closed;
  cairn_monitored_session_free(ms);
  cairn_op_free(p.train);
  cairn_registry_free(p.r);
  return st;
}

/* cairn_stop_at_step_hook_new(num_steps, last_step): < 0 is None, as
 * cairn_hook_new_stop_at_step(step, {.relative}) stops at the same step;
 * TF's two constructor errors are kept. */
Test(deprecated, stop_at_step_hook_new_is_hook_new_stop_at_step) {
  cairn_hook *a, *b;
  int64_t sa, sb;
  OK(cairn_stop_at_step_hook_new(-1, 4, &a));
  OK(cairn_hook_new_stop_at_step(4, NULL, &b));
  cr_assert_str_eq(cairn_hook_name(a), cairn_hook_name(b));
  OK(run_hooks(&a, 1, 0, 50, &sa));
  OK(run_hooks(&b, 1, 0, 50, &sb));
  cr_assert_eq(sa, 4);
  cr_assert_eq(sb, 4);
  cairn_hook_free(a);
  cairn_hook_free(b);
  OK(cairn_stop_at_step_hook_new(3, -1, &a));
  OK(cairn_hook_new_stop_at_step(3, &(cairn_stop_at_step_hook_options){.relative = 1}, &b));
  OK(run_hooks(&a, 1, 0, 50, &sa));
  OK(run_hooks(&b, 1, 0, 50, &sb));
  cr_assert_eq(sa, 3);
  cr_assert_eq(sb, 3);
  cairn_hook_free(a);
  cairn_hook_free(b);
  OK(cairn_stop_at_step_hook_new(-1, 0, &a)); /* last_step 0: still one run */
  OK(cairn_hook_new_stop_at_step(0, NULL, &b));
  OK(run_hooks(&a, 1, 0, 50, &sa));
  OK(run_hooks(&b, 1, 0, 50, &sb));
  cr_assert_eq(sa, 1);
  cr_assert_eq(sb, 1);
  cairn_hook_free(a);
  cairn_hook_free(b);
  cr_assert_eq(cairn_stop_at_step_hook_new(-1, -1, &a), CAIRN_E_INVALID);
  cr_assert(strstr(cairn_errmsg(), "One of num_steps or last_step must be specified."), "%s", cairn_errmsg());
  cr_assert_eq(cairn_stop_at_step_hook_new(2, 2, &a), CAIRN_E_INVALID);
  cr_assert(strstr(cairn_errmsg(), "Only one of num_steps or last_step can be specified."), "%s", cairn_errmsg());
}

typedef struct rates {
  int n;
  int64_t steps[8];
} rates;

static cairn_status on_scalar(void *self, const char *tag, double value, int64_t step) {
  (void)tag;
  (void)value;
  rates *r = self;
  if (r->n < 8) r->steps[r->n++] = step;
  return CAIRN_OK;
}

/* cairn_step_counter_hook_new(n, secs, writer, env) writes at the steps
 * cairn_hook_new_step_counter does with the same values as options, and
 * still refuses "neither" (0.1 had no default; the options' zero is TF's
 * every 100 steps). */
Test(deprecated, step_counter_hook_new_is_hook_new_step_counter) {
  stepper clock = {0};
  cairn_env env = {.now = fake_now, .log = quiet, .self = &clock};
  rates ra = {0}, rb = {0};
  cairn_summary_writer wa = {.scalar = on_scalar, .self = &ra}, wb = {.scalar = on_scalar, .self = &rb};
  cairn_hook *a, *b;
  OK(cairn_step_counter_hook_new(3, 0, &wa, &env, &a));
  OK(cairn_hook_new_step_counter(
      &(cairn_step_counter_hook_options){.every_n_steps = 3, .summary_writer = &wb, .env = &env}, &b));
  cr_assert_str_eq(cairn_hook_name(a), cairn_hook_name(b));
  int64_t s;
  OK(run_hooks(&a, 1, 0, 10, &s));
  OK(run_hooks(&b, 1, 0, 10, &s));
  cr_assert_gt(ra.n, 0);
  cr_assert_eq(ra.n, rb.n);
  for (int i = 0; i < ra.n; i++) cr_assert_eq(ra.steps[i], rb.steps[i], "write %d", i);
  cairn_hook_free(a);
  cairn_hook_free(b);
  cr_assert_eq(cairn_step_counter_hook_new(0, 0, NULL, &env, &a), CAIRN_E_INVALID);
  cr_assert(strstr(cairn_errmsg(), "exactly one of every_n_steps and every_n_secs should be provided."), "%s",
            cairn_errmsg());
  cr_assert_eq(cairn_step_counter_hook_new(10, 1.0, NULL, &env, &a), CAIRN_E_INVALID);
}

/* cairn_nan_tensor_hook_new(loss, fail_on_nan_loss): 1 fails the run as
 * the new call's default does, 0 stops as its warn_only does. */
Test(deprecated, nan_tensor_hook_new_is_hook_new_nan_tensor) {
  cairn_hook *a, *b;
  int64_t s;
  OK(cairn_nan_tensor_hook_new("loss", 1, &a));
  OK(cairn_hook_new_nan_tensor("loss", NULL, &b));
  cr_assert_eq(run_hooks(&a, 1, NAN, 5, &s), CAIRN_E_NAN_LOSS);
  cr_assert_eq(run_hooks(&b, 1, NAN, 5, &s), CAIRN_E_NAN_LOSS);
  cairn_hook_free(a);
  cairn_hook_free(b);
  OK(cairn_nan_tensor_hook_new("loss", 0, &a));
  OK(cairn_hook_new_nan_tensor("loss", &(cairn_nan_tensor_hook_options){.warn_only = 1}, &b));
  int64_t sa, sb;
  OK(run_hooks(&a, 1, NAN, 5, &sa));
  OK(run_hooks(&b, 1, NAN, 5, &sb));
  cr_assert_eq(sa, 1, "a stop request after the first run");
  cr_assert_eq(sb, 1);
  cairn_hook_free(a);
  cairn_hook_free(b);
  cr_assert_eq(cairn_nan_tensor_hook_new(NULL, 1, &a), CAIRN_E_NULL);
  cr_assert(strstr(cairn_errmsg(), "hook_new_nan_tensor: loss_name is NULL"), "%s", cairn_errmsg());
}

/* cairn_final_ops_hook_new(op, names, n, feeds, n_feeds) fetches at end()
 * what cairn_hook_new_final_ops does with the feeds as options. */
Test(deprecated, final_ops_hook_new_is_hook_new_final_ops) {
  const char *names[1] = {"loss"};
  cairn_hook *a, *b;
  int64_t s;
  stepper p = {.loss = 2.5};
  cairn_op *op;
  OK(cairn_registry_new(1, &p.r));
  OK(cairn_registry_global_step(p.r, &p.gs));
  OK(cairn_var_initialize(p.gs));
  OK(cairn_op_new("final", bump, &p, NULL, &op));
  OK(cairn_final_ops_hook_new(op, names, 1, NULL, 0, &a));
  OK(cairn_hook_new_final_ops(op, names, 1, NULL, &b));
  cairn_hook *both[2] = {a, b};
  OK(run_hooks(both, 2, 0, 2, &s));
  cairn_value va, vb;
  OK(cairn_final_ops_hook_value(a, "loss", &va));
  OK(cairn_final_ops_hook_value(b, "loss", &vb));
  cr_assert_eq(va.f64, 2.5);
  cr_assert_eq(vb.f64, 2.5);
  cairn_hook_free(a);
  cairn_hook_free(b);
  cairn_feed bad = {NULL, NULL};
  cr_assert_eq(cairn_final_ops_hook_new(NULL, names, 1, &bad, 1, &a), CAIRN_E_NULL);
  cr_assert(strstr(cairn_errmsg(), "hook_new_final_ops: feeds[0] has a NULL member"), "%s", cairn_errmsg());
  cairn_op_free(op);
  cairn_registry_free(p.r);
}

/* cairn_global_step_waiter_hook_new(step, env): a step already reached
 * does not wait, as cairn_hook_new_global_step_waiter's. */
Test(deprecated, global_step_waiter_hook_new_is_hook_new_global_step_waiter) {
  stepper clock = {0};
  cairn_env env = {.now = fake_now, .log = quiet, .self = &clock};
  cairn_hook *a, *b;
  int64_t sa, sb;
  OK(cairn_global_step_waiter_hook_new(0, &env, &a));
  OK(cairn_hook_new_global_step_waiter(0, &(cairn_global_step_waiter_hook_options){.env = &env}, &b));
  cr_assert_str_eq(cairn_hook_name(a), cairn_hook_name(b));
  OK(run_hooks(&a, 1, 0, 3, &sa));
  OK(run_hooks(&b, 1, 0, 3, &sb));
  cr_assert_eq(sa, 3);
  cr_assert_eq(sb, 3);
  cairn_hook_free(a);
  cairn_hook_free(b);
  cr_assert_eq(cairn_global_step_waiter_hook_new(0, &env, NULL), CAIRN_E_NULL);
  cr_assert(strstr(cairn_errmsg(), "hook_new_global_step_waiter: out is NULL"), "%s", cairn_errmsg());
}

static cairn_status count_feed(void *user, cairn_run_request *req) {
  (void)req;
  ++*(int *)user;
  return CAIRN_OK;
}

/* The names that kept their arguments call the new ones: the same hook
 * kind, the same errors (messages naming the new call). */
Test(deprecated, renamed_hook_constructors_are_hook_new_kind) {
  cairn_hook *a, *b;
  int64_t s;
  int ca = 0, cb = 0;
  OK(cairn_feed_fn_hook_new(count_feed, &ca, &a));
  OK(cairn_hook_new_feed_fn(count_feed, &cb, &b));
  cr_assert_str_eq(cairn_hook_name(a), cairn_hook_name(b));
  OK(run_hooks(&a, 1, 0, 3, &s));
  OK(run_hooks(&b, 1, 0, 3, &s));
  cr_assert_eq(ca, 3);
  cr_assert_eq(cb, 3);
  cairn_hook_free(a);
  cairn_hook_free(b);
  cr_assert_eq(cairn_feed_fn_hook_new(NULL, NULL, &a), CAIRN_E_NULL);
  cr_assert(strstr(cairn_errmsg(), "hook_new_feed_fn: fn is NULL"), "%s", cairn_errmsg());
  cr_assert_eq(cairn_summary_saver_hook_new(NULL, &a), CAIRN_E_NULL);
  cr_assert(strstr(cairn_errmsg(), "hook_new_summary_saver: options are NULL"), "%s", cairn_errmsg());
  cr_assert_eq(cairn_progress_hook_new(NULL, &a), CAIRN_E_NULL);
  cr_assert(strstr(cairn_errmsg(), "hook_new_progress: options are NULL"), "%s", cairn_errmsg());
#if CAIRN_WITH_MPI
  cr_assert_eq(cairn_mpi_broadcast_hook_new(NULL, 0, &a), CAIRN_E_NULL);
  cr_assert(strstr(cairn_errmsg(), "hook_new_mpi_broadcast: context is NULL"), "%s", cairn_errmsg());
#endif
}

/* The names of the files in dir, sorted, one per line, into buf. */
static void list_dir(const char *dir, char *buf, size_t len) {
  struct dirent **e;
  int n = scandir(dir, &e, NULL, alphasort);
  cr_assert_geq(n, 0, "scandir '%s'", dir);
  buf[0] = '\0';
  for (int i = 0; i < n; i++) {
    size_t used = strlen(buf);
    if (e[i]->d_name[0] != '.') snprintf(buf + used, len - used, "%s\n", e[i]->d_name);
    free(e[i]);
  }
  free(e);
}

static void rm_dir(const char *dir) {
  struct dirent **e;
  int n = scandir(dir, &e, NULL, alphasort);
  char path[600];
  for (int i = 0; i < n; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, e[i]->d_name);
    if (strcmp(e[i]->d_name, ".") && strcmp(e[i]->d_name, "..")) remove(path);
    free(e[i]);
  }
  if (n >= 0) free(e);
  rmdir(dir);
}

/* cairn_checkpoint_saver_hook_new(o) with o->checkpoint_dir saves the files
 * cairn_hook_new_checkpoint_saver(dir, o) saves; it reads o as 0.1 laid it
 * out (a struct_size the new name refuses is not read), and keeps 0.1's
 * errors: NULL options, NULL checkpoint_dir. */
Test(deprecated, checkpoint_saver_hook_new_is_hook_new_checkpoint_saver) {
  char base[] = "/tmp/cairn_deprecated_XXXXXX", da[64], db[64], la[512], lb[512];
  cr_assert_not_null(mkdtemp(base));
  snprintf(da, sizeof da, "%s/a", base);
  snprintf(db, sizeof db, "%s/b", base);
  cairn_env env = {.log = quiet};
  cairn_checkpoint_saver_hook_options o = cairn_checkpoint_saver_hook_options_default();
  o.save_steps = 2;
  o.env = &env;
  o.checkpoint_dir = da;
  o.struct_size = 3; /* not part of 0.1's struct: the old name never reads it */
  cairn_hook *a, *b;
  OK(cairn_checkpoint_saver_hook_new(&o, &a));
  cr_assert_eq(cairn_hook_new_checkpoint_saver(db, &o, &b), CAIRN_E_INVALID);
  o.checkpoint_dir = NULL;
  o.struct_size = 0;
  OK(cairn_hook_new_checkpoint_saver(db, &o, &b));
  cr_assert_str_eq(cairn_hook_name(a), cairn_hook_name(b));
  int64_t sa, sb;
  OK(run_hooks(&a, 1, 0, 5, &sa));
  OK(run_hooks(&b, 1, 0, 5, &sb));
  cr_assert_eq(sa, 5);
  cr_assert_eq(sb, 5);
  list_dir(da, la, sizeof la);
  list_dir(db, lb, sizeof lb);
  cr_assert(strstr(la, "model.ckpt-4"), "%s", la);
  cr_assert(strstr(la, "model.ckpt-5"), "saved at end: %s", la);
  cr_assert_str_eq(la, lb);
  cairn_hook_free(a);
  cairn_hook_free(b);
  rm_dir(da);
  rm_dir(db);
  rmdir(base);
  cr_assert_eq(cairn_checkpoint_saver_hook_new(NULL, &a), CAIRN_E_NULL);
  cr_assert(strstr(cairn_errmsg(), "hook_new_checkpoint_saver: options is NULL"), "%s", cairn_errmsg());
  cr_assert_eq(cairn_checkpoint_saver_hook_new(&o, &a), CAIRN_E_NULL);
  cr_assert(strstr(cairn_errmsg(), "hook_new_checkpoint_saver: checkpoint_dir is NULL"), "%s", cairn_errmsg());
  o.checkpoint_dir = da;
  cr_assert_eq(cairn_checkpoint_saver_hook_new(&o, NULL), CAIRN_E_NULL);
  cr_assert(strstr(cairn_errmsg(), "hook_new_checkpoint_saver: out is NULL"), "%s", cairn_errmsg());
}

typedef struct lines {
  char text[1024];
} lines;

static double frozen_now(void *self) {
  (void)self;
  return 100.0;
}

static void keep_line(void *self, cairn_log_level level, const char *msg) {
  (void)level;
  lines *l = self;
  size_t used = strlen(l->text);
  snprintf(l->text + used, sizeof l->text - used, "%s\n", msg);
}

/* cairn_logging_tensor_hook_new(o) with o->names logs the lines
 * cairn_hook_new_logging_tensor(names, n, o) logs; it reads o as 0.1 laid
 * it out, keeps 0.1's errors, and still takes n_names 0 with names NULL,
 * which the new name refuses. */
Test(deprecated, logging_tensor_hook_new_is_hook_new_logging_tensor) {
  lines la = {{0}}, lb = {{0}};
  cairn_env ea = {.now = frozen_now, .log = keep_line, .self = &la},
            eb = {.now = frozen_now, .log = keep_line, .self = &lb};
  const char *names[2] = {"loss", "global_step"};
  cairn_logging_tensor_hook_options o = cairn_logging_tensor_hook_options_default();
  o.every_n_iter = 2;
  o.env = &ea;
  o.names = names;
  o.n_names = 2;
  o.struct_size = 5; /* not part of 0.1's struct: the old name never reads it */
  cairn_hook *a, *b;
  OK(cairn_logging_tensor_hook_new(&o, &a));
  o.names = NULL;
  o.n_names = 0;
  o.struct_size = 0;
  o.env = &eb;
  OK(cairn_hook_new_logging_tensor(names, 2, &o, &b));
  cr_assert_str_eq(cairn_hook_name(a), cairn_hook_name(b));
  int64_t s;
  OK(run_hooks(&a, 1, 0.25, 5, &s));
  OK(run_hooks(&b, 1, 0.25, 5, &s));
  cr_assert(strstr(la.text, "loss = 0.25, global_step = 0\nloss = 0.25, global_step = 2 (0.000 sec)\n"), "%s",
            la.text);
  cr_assert_str_eq(la.text, lb.text);
  cairn_hook_free(a);
  cairn_hook_free(b);
  o.at_end = 1;
  o.every_n_iter = 0;
  OK(cairn_logging_tensor_hook_new(&o, &a)); /* 0.1: no names, NULL */
  cairn_hook_free(a);
  cr_assert_eq(cairn_hook_new_logging_tensor(NULL, 0, &o, &b), CAIRN_E_NULL);
  cr_assert_eq(cairn_logging_tensor_hook_new(NULL, &a), CAIRN_E_NULL);
  cr_assert(strstr(cairn_errmsg(), "hook_new_logging_tensor: options are NULL"), "%s", cairn_errmsg());
  o.n_names = 1;
  cr_assert_eq(cairn_logging_tensor_hook_new(&o, &a), CAIRN_E_NULL);
  cr_assert(strstr(cairn_errmsg(), "hook_new_logging_tensor: names is NULL"), "%s", cairn_errmsg());
  o.n_names = 0;
  o.at_end = 0;
  cr_assert_eq(cairn_logging_tensor_hook_new(&o, &a), CAIRN_E_INVALID);
  cr_assert(strstr(cairn_errmsg(), "either at_end and/or exactly one of every_n_iter and every_n_secs"), "%s",
            cairn_errmsg());
}
