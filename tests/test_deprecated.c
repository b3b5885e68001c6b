/* The names of cairn 0.1 that the constructor grammar replaced
 * (doc/deprecated.md) still compile, link and behave as the new ones: a
 * program written for 0.1 builds unchanged for one release. The only file
 * of the tree that calls them; it silences their deprecation warnings on
 * purpose (-Wno-deprecated-declarations in Makefile.am). */
#include "config.h"

#include <criterion/criterion.h>
#include <string.h>

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
  cr_assert_eq(cairn_mlp_train_op_new(NULL, NULL, &ot), CAIRN_E_NULL);
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
