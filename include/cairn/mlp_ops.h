/* cairn/mlp_ops.h — the MLP's training step and evaluation as session
 * ops (TF's train_op and eval metrics), and the evaluation run in a plain
 * or a monitored session. The top layer: it uses the model (cairn/model.h),
 * ops and sessions (cairn/session.h) and monitored sessions
 * (cairn/monitored.h). */
#ifndef CAIRN_MLP_OPS_H
#define CAIRN_MLP_OPS_H

#include <stdint.h>

#include "cairn/model.h"
#include "cairn/monitored.h"
#include "cairn/session.h"
#include "cairn/status.h"
#include "cairn/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the step as an op (TF's train_op and eval metrics) ----
 * cairn_op_new_mlp_train and cairn_op_new_mlp_eval make the op a session
 * runs for one step, so that a training loop is
 *   cairn_run_args a = cairn_run_args_one(&train_op);
 *   while (!cairn_monitored_session_should_stop(ms)) st = cairn_monitored_session_run(ms, &a);
 * The train op runs cairn_mlp_train_step on one batch and publishes the
 * batch loss (f64) under loss_name; the eval op runs cairn_mlp_evaluate and
 * publishes the loss and the accuracy. The batch comes from batch_fn when
 * it is set, else from the run's feeds x_feed and labels_feed. */

/* Fills *x (B, in) and *labels (as the loss kind says) with the next batch;
 * both borrowed until the next call. CAIRN_E_OUT_OF_RANGE (the data are
 * exhausted, as cairn_dataset_next) ends the training loop like TF's
 * OutOfRangeError. */
typedef cairn_status (*cairn_batch_fn)(void *user, const cairn_tensor **x, const cairn_tensor **labels);
/* Changes the published loss in place before it is published (e.g. the mean
 * over the ranks of a data-parallel job); a non-OK return fails the run. */
typedef cairn_status (*cairn_loss_fn)(void *user, double *loss);

/* Zero means default for every member. */
typedef struct cairn_mlp_op_options {
  const char *name;          /* the op's name; NULL: "train" / "eval" */
  const char *x_feed;        /* NULL: "x" */
  const char *labels_feed;   /* NULL: "y" */
  cairn_batch_fn batch_fn;   /* NULL: the batch is fed */
  void *batch_user;          /* borrowed */
  const char *loss_name;     /* NULL: "loss" (train op), "eval_loss" (eval op) */
  const char *accuracy_name; /* eval op; NULL: "accuracy" */
  cairn_loss_fn loss_fn;     /* NULL: the batch loss as it is */
  void *loss_user;           /* borrowed */
} cairn_mlp_op_options;

CAIRN_API cairn_mlp_op_options cairn_mlp_op_options_default(void);
/* o NULL: the defaults. m is borrowed (it must outlive the op); the names
 * are copied. A run of the op fails with CAIRN_E_INVALID
 * "train: feed \"x\" and \"y\"" when a feed is missing, and with the
 * status and message of the step ("train: <message>") otherwise.
 * Errors: CAIRN_E_NULL, CAIRN_E_NOMEM. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_op_new_mlp_train(cairn_mlp *m, const cairn_mlp_op_options *o,
                                                           cairn_op **out);
CAIRN_API CAIRN_NODISCARD cairn_status cairn_op_new_mlp_eval(cairn_mlp *m, const cairn_mlp_op_options *o,
                                                          cairn_op **out);
/* Deprecated (doc/deprecated.md): the names of cairn 0.1 for
 * cairn_op_new_mlp_train and cairn_op_new_mlp_eval, which they call.
 * Removed in the next release. */
CAIRN_API CAIRN_NODISCARD CAIRN_DEPRECATED("use cairn_op_new_mlp_train") cairn_status
cairn_mlp_train_op_new(cairn_mlp *m, const cairn_mlp_op_options *o, cairn_op **out);
CAIRN_API CAIRN_NODISCARD CAIRN_DEPRECATED("use cairn_op_new_mlp_eval") cairn_status
cairn_mlp_eval_op_new(cairn_mlp *m, const cairn_mlp_op_options *o, cairn_op **out);

/* One evaluation: the eval op's loss and accuracy, and the global step of
 * the session they were computed at. */
typedef struct cairn_mlp_eval_result {
  int64_t step;
  double loss, accuracy;
} cairn_mlp_eval_result;

/* Runs eval_op (made by cairn_op_new_mlp_eval) once on s — x and labels fed
 * under the op's feed names unless it has a batch_fn (then both may be
 * NULL) — and reads back its loss, its accuracy and the global step.
 * TF: sess.run([loss, accuracy], feed_dict=...) on a test set.
 * Errors: CAIRN_E_NULL, CAIRN_E_INVALID (not an op of cairn_op_new_mlp_eval),
 * those of the run. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_mlp_eval_run(cairn_session *s, cairn_op *eval_op,
                                                       const cairn_tensor *x, const cairn_tensor *labels,
                                                       cairn_mlp_eval_result *out);

/* The same inside a monitored session, between training steps: through
 * cairn_monitored_session_run_step_fn on its raw session, so no hook fires
 * and the run is not a training step (TF: ms.run_step_fn(lambda ctx:
 * ctx.session.run(eval_metrics))); errors as run_step_fn's. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_mlp_eval_run_monitored(cairn_monitored_session *ms,
                                                                 cairn_op *eval_op, const cairn_tensor *x,
                                                                 const cairn_tensor *labels,
                                                                 cairn_mlp_eval_result *out);

#ifdef __cplusplus
}
#endif
#endif
