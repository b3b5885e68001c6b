/* The MLP's step as a session op (TF's train_op, and the eval metrics run
 * on a test set): the glue every training program would otherwise write
 * as its own callbacks. */
#include "internal.h"
#include "op_impl.h"

#include <stdlib.h>
#include <string.h>

#include "cairn/mlp_ops.h"
#include "cairn/model.h"
#include "cairn/monitored.h"
#include "cairn/session.h"

CAIRN__OPTIONS_DEFAULT(cairn_mlp_op_options)

typedef struct mlp_op {
  cairn_mlp *m;
  cairn_mlp_op_options o; /* the names point into names[] */
  char *names;
} mlp_op;

static void mlp_op_free(void *user) {
  mlp_op *p = user;
  if (!p) return;
  free(p->names);
  free(p);
}

/* The batch of this run: batch_fn's, or the feeds. */
static cairn_status mlp_op_batch(cairn_session *s, const mlp_op *p, const char *what, const cairn_tensor **x,
                                 const cairn_tensor **y) {
  if (p->o.batch_fn) {
    cairn_status st = p->o.batch_fn(p->o.batch_user, x, y);
    if (st == CAIRN_E_OUT_OF_RANGE) return cairn_session_fail(s, st, "%s: end of the data: %s", what, cairn_errmsg());
    if (st) return cairn_session_fail(s, st, "%s: batch: %s", what, cairn_errmsg());
    if (!*x || !*y) return cairn_session_fail(s, CAIRN_E_NULL, "%s: batch_fn gave no batch", what);
    return CAIRN_OK;
  }
  *x = cairn_session_feed(s, p->o.x_feed);
  *y = cairn_session_feed(s, p->o.labels_feed);
  if (!*x || !*y)
    return cairn_session_fail(s, CAIRN_E_INVALID, "%s: feed \"%s\" and \"%s\"", what, p->o.x_feed, p->o.labels_feed);
  return CAIRN_OK;
}

static cairn_status publish_loss(cairn_session *s, const mlp_op *p, const char *what, double loss) {
  cairn_status st;
  if (p->o.loss_fn && (st = p->o.loss_fn(p->o.loss_user, &loss)) != CAIRN_OK)
    return cairn_session_fail(s, st, "%s: %s", what, cairn_errmsg());
  return cairn_session_output_f64(s, p->o.loss_name, loss);
}

static cairn_status train_fn(cairn_session *s, void *user) {
  mlp_op *p = user;
  const cairn_tensor *x, *y;
  cairn_status st = mlp_op_batch(s, p, p->o.name, &x, &y);
  if (st) return st;
  float loss;
  if ((st = cairn_mlp_train_step(p->m, x, y, &loss)) != CAIRN_OK)
    return cairn_session_fail(s, st, "%s: %s", p->o.name, cairn_errmsg());
  return publish_loss(s, p, p->o.name, loss);
}

static cairn_status eval_fn(cairn_session *s, void *user) {
  mlp_op *p = user;
  const cairn_tensor *x, *y;
  cairn_status st = mlp_op_batch(s, p, p->o.name, &x, &y);
  if (st) return st;
  float loss, acc;
  if ((st = cairn_mlp_evaluate(p->m, x, y, &loss, &acc)) != CAIRN_OK)
    return cairn_session_fail(s, st, "%s: %s", p->o.name, cairn_errmsg());
  if ((st = publish_loss(s, p, p->o.name, loss)) != CAIRN_OK) return st;
  return cairn_session_output_f64(s, p->o.accuracy_name, acc);
}

/* Copies the five names into one block, defaults filled in. */
static cairn_status mlp_op_names(mlp_op *p, const char *def_name, const char *def_loss) {
  const char **slot[5] = {&p->o.name, &p->o.x_feed, &p->o.labels_feed, &p->o.loss_name, &p->o.accuracy_name};
  const char *def[5] = {def_name, "x", "y", def_loss, "accuracy"};
  size_t len = 0;
  for (int i = 0; i < 5; i++) {
    if (!*slot[i]) *slot[i] = def[i];
    len += strlen(*slot[i]) + 1;
  }
  char *q = p->names = malloc(len);
  if (!q) return cairn__fail(CAIRN_E_NOMEM, "mlp_op_new: out of memory");
  for (int i = 0; i < 5; i++) {
    size_t n = strlen(*slot[i]) + 1;
    memcpy(q, *slot[i], n);
    *slot[i] = q;
    q += n;
  }
  return CAIRN_OK;
}

static cairn_status mlp_op_new(cairn_mlp *m, const cairn_mlp_op_options *o, cairn_op_fn fn, const char *def_name,
                               const char *def_loss, cairn_op **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "mlp_%s_op_new: out is NULL", def_name);
  *out = NULL;
  if (!m) return cairn__fail(CAIRN_E_NULL, "mlp_%s_op_new: model is NULL", def_name);
  mlp_op *p = calloc(1, sizeof *p);
  if (!p) return cairn__fail(CAIRN_E_NOMEM, "mlp_%s_op_new: out of memory", def_name);
  p->m = m;
  p->o = o ? *o : cairn_mlp_op_options_default();
  cairn_status st = mlp_op_names(p, def_name, def_loss);
  if (!st) st = cairn_op_new(p->o.name, fn, p, mlp_op_free, out);
  if (st) mlp_op_free(p); /* cairn_op_new frees user only once it owns it */
  return st;
}

cairn_status cairn_op_new_mlp_train(cairn_mlp *m, const cairn_mlp_op_options *o, cairn_op **out) {
  return mlp_op_new(m, o, train_fn, "train", "loss", out);
}

cairn_status cairn_op_new_mlp_eval(cairn_mlp *m, const cairn_mlp_op_options *o, cairn_op **out) {
  return mlp_op_new(m, o, eval_fn, "eval", "eval_loss", out);
}

/* Deprecated names (cairn/mlp_ops.h). */
cairn_status cairn_mlp_train_op_new(cairn_mlp *m, const cairn_mlp_op_options *o, cairn_op **out) {
  return cairn_op_new_mlp_train(m, o, out);
}
cairn_status cairn_mlp_eval_op_new(cairn_mlp *m, const cairn_mlp_op_options *o, cairn_op **out) {
  return cairn_op_new_mlp_eval(m, o, out);
}

/* ---- running the eval op ---- */

cairn_status cairn_mlp_eval_run(cairn_session *s, cairn_op *eval_op, const cairn_tensor *x,
                                const cairn_tensor *labels, cairn_mlp_eval_result *out) {
  static const char fn[] = "mlp_eval_run";
  if (!s || !eval_op || !out)
    return cairn__fail(CAIRN_E_NULL, "%s: %s is NULL", fn, !s ? "session" : !eval_op ? "eval_op" : "out");
  if (eval_op->b.kind != CAIRN__OP_USER || eval_op->fn != eval_fn)
    return cairn__fail(CAIRN_E_INVALID, "%s: op '%s' was not made by cairn_op_new_mlp_eval", fn, eval_op->b.name);
  const mlp_op *p = eval_op->b.user;
  cairn_feed feeds[2] = {{p->o.x_feed, x}, {p->o.labels_feed, labels}};
  cairn_fetch f[2] = {{p->o.loss_name, {0}}, {p->o.accuracy_name, {0}}};
  cairn_run_args a = cairn_run_args_one(&eval_op);
  if (!p->o.batch_fn) {
    if (!x || !labels) return cairn__fail(CAIRN_E_NULL, "%s: %s is NULL", fn, !x ? "x" : "labels");
    a.feeds = feeds;
    a.n_feeds = 2;
  }
  a.fetches = f;
  a.n_fetches = 2;
  cairn_status st = cairn_session_run(s, &a);
  if (!st) st = cairn_session_global_step(s, &out->step);
  if (st) return st;
  out->loss = f[0].value.f64;
  out->accuracy = f[1].value.f64;
  return CAIRN_OK;
}

typedef struct eval_call {
  cairn_op *op;
  const cairn_tensor *x, *labels;
  cairn_mlp_eval_result *out;
} eval_call;

static cairn_status eval_step_fn(cairn_step_context *ctx, void *user) {
  const eval_call *c = user;
  return cairn_mlp_eval_run(cairn_step_context_session(ctx), c->op, c->x, c->labels, c->out);
}

cairn_status cairn_mlp_eval_run_monitored(cairn_monitored_session *ms, cairn_op *eval_op, const cairn_tensor *x,
                                          const cairn_tensor *labels, cairn_mlp_eval_result *out) {
  eval_call c = {eval_op, x, labels, out};
  return cairn_monitored_session_run_step_fn(ms, eval_step_fn, &c);
}
