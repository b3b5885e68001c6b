#define _POSIX_C_SOURCE 200809L
/* train_resume: training that survives `kill -9`, evaluation from another
 * process, and fine-tuning a new head on a trained body. It answers two
 * questions TF 1.x users ask, with cairn's TensorFlow 1.x-style sessions
 * (include/cairn/session.h, include/cairn/monitored.h):
 *
 *   1. "How do I restore with a monitored session, and how do I test?"
 *        train --dir DIR [--steps N] [--save-steps K] [--seed S] [--sleep-ms MS]
 *          A MonitoredTrainingSession (chief, checkpoint_dir DIR, a
 *          checkpoint every K steps) trains until global step N
 *          (StopAtStepHook). Every K steps it evaluates on the held-out set
 *          through run_step_fn on the raw session: no hook fires and the
 *          global step does not move. Run it again on the same DIR — after
 *          a clean exit or after kill -9 — and it continues from the latest
 *          checkpoint and its global step.
 *        eval --dir DIR
 *          Another process restores DIR's latest checkpoint into a
 *          SingularMonitoredSession without any saving hook and prints the
 *          test loss and accuracy. It writes nothing into DIR.
 *
 *   2. "How do I restore only some variables and initialise the rest?"
 *        finetune --from DIR --dir NEWDIR [--steps N] [--save-steps K] [--seed S]
 *          A new model for a relabelled 5-class task (the 10 classes merged
 *          in pairs): the same hidden layers, a new output layer. The
 *          Scaffold's `restore` option restores the hidden layers from DIR's
 *          latest checkpoint, the SessionManager initializes everything else,
 *          and its restore report says what was restored, missing,
 *          mismatched, unused and skipped. Trains to step N, saving into
 *          NEWDIR (run again, it continues from NEWDIR's own checkpoint).
 *
 * The data is the synthetic problem of examples/train_mlp.c, made smaller:
 * points around 10 fixed random centres in 16 dimensions, generated in
 * memory with fixed seeds, so every process (and every mode) sees exactly
 * the same training and held-out sets. The batch a step trains on is chosen
 * by the global step, so a run that was killed and resumed trains on the
 * same batches, in the same order, as one that never stopped.
 *
 * Exit status: 0 success, 1 a cairn error (printed with its status text and
 * the session's detail), 2 usage.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <cairn.h>

#define PROG "train_resume"

enum {
  DIM = 16,        /* input features */
  HIDDEN = 32,     /* both hidden layers */
  CLASSES = 10,    /* the original task */
  FT_CLASSES = 5,  /* the fine-tuning task: class k becomes k / 2 */
  N_TRAIN = 2048,  /* 64 batches of 32 */
  N_TEST = 512,
  BATCH = 32
};

/* ---- errors ----------------------------------------------------------------------- */

/* Prints "train_resume: WHAT: <status text>: <detail>" and returns 1. The
 * detail is the handle's message when there is one (sessions and managers
 * keep the whole text, up to 16 KiB), else the thread's cairn_errmsg(). */
static int report_error(const char *what, cairn_status st, const char *handle_msg) {
  const char *detail = handle_msg && *handle_msg ? handle_msg : cairn_errmsg();
  fprintf(stderr, PROG ": %s: %s%s%s\n", what, cairn_status_str(st), *detail ? ": " : "", detail);
  return 1;
}

static int usage(void) {
  fprintf(stderr, "usage: " PROG " train --dir DIR [--steps N] [--save-steps K] [--seed S] [--sleep-ms MS]\n"
                  "       " PROG " eval --dir DIR\n"
                  "       " PROG " finetune --from DIR --dir NEWDIR [--steps N] [--save-steps K] [--seed S]\n");
  return 2;
}

/* ---- the data -------------------------------------------------------------------------- */

typedef struct problem {
  cairn_tensor *xtr, *ytr; /* (N_TRAIN, DIM) f32, (N_TRAIN) i32 */
  cairn_tensor *xte, *yte; /* (N_TEST, DIM) f32, (N_TEST) i32 */
} problem;

/* train_mlp.c's make_blobs: n points in DIM dimensions around 10 random
 * centres (the same centres for every seed), labels (n) i32. The noise is
 * smaller than there, so that a few hundred steps learn it. */
static cairn_status make_blobs(int64_t n, uint64_t seed, cairn_tensor **x, cairn_tensor **y) {
  int64_t xs[2] = {n, DIM};
  cairn_status s = cairn_tensor_new(CAIRN_DTYPE_F32, 2, xs, x);
  if (!s) s = cairn_tensor_new(CAIRN_DTYPE_I32, 1, &n, y);
  if (s) return s;
  cairn_rng centres, noise;
  cairn_rng_init(&centres, 12345, 0);
  cairn_rng_init(&noise, seed, 1);
  float c[CLASSES][DIM];
  for (int k = 0; k < CLASSES; k++)
    for (int j = 0; j < DIM; j++) c[k][j] = cairn_rng_normal(&centres);
  float *xp = cairn_tensor_f32(*x);
  int32_t *yp = cairn_tensor_i32(*y);
  for (int64_t i = 0; i < n; i++) {
    int k = (int)cairn_rng_below(&noise, CLASSES);
    yp[i] = k;
    for (int j = 0; j < DIM; j++) xp[i * DIM + j] = c[k][j] + 1.5f * cairn_rng_normal(&noise);
  }
  return CAIRN_OK;
}

/* The fixed data set; with `merge_pairs` the labels of the fine-tuning
 * task (10 → 5 classes: 0,1 → 0; 2,3 → 1; ...). */
static cairn_status problem_new(problem *p, int merge_pairs) {
  memset(p, 0, sizeof *p);
  cairn_status s = make_blobs(N_TRAIN, 1, &p->xtr, &p->ytr);
  if (!s) s = make_blobs(N_TEST, 2, &p->xte, &p->yte);
  if (s || !merge_pairs) return s;
  for (int64_t i = 0; i < N_TRAIN; i++) cairn_tensor_i32(p->ytr)[i] /= 2;
  for (int64_t i = 0; i < N_TEST; i++) cairn_tensor_i32(p->yte)[i] /= 2;
  return CAIRN_OK;
}

/* The training batch of global step `step`: rows [b·BATCH, (b+1)·BATCH)
 * with b = step mod (N_TRAIN / BATCH), as views (nothing is copied). */
static cairn_status batch_for_step(const problem *p, int64_t step, cairn_tensor *x, cairn_tensor *y) {
  int64_t b = step % (N_TRAIN / BATCH);
  int64_t xs[2] = {BATCH, DIM}, ys[1] = {BATCH};
  cairn_status s = cairn_tensor_view(x, cairn_tensor_f32(p->xtr) + b * BATCH * DIM, CAIRN_DTYPE_F32, 2, xs);
  if (!s) s = cairn_tensor_view(y, cairn_tensor_i32(p->ytr) + b * BATCH, CAIRN_DTYPE_I32, 1, ys);
  return s;
}

/* ---- the model and its ops -------------------------------------------------------------- */

/* An MLP DIM → HIDDEN → HIDDEN → classes with Adam. Its variables are named
 * as tf.layers.dense names them: dense/{kernel,bias} and dense_1/... are the
 * hidden layers, dense_2/... the output layer; then the Adam slots
 * ("dense/kernel/Adam", ".../Adam_1"), beta1_power, beta2_power and
 * global_step. Nothing is initialized here: the session manager restores
 * or initializes. */
typedef struct model {
  cairn_registry *reg;
  cairn_mlp *mlp;
  cairn_op *train; /* TF's train_op: a step on the global step's batch; outputs "loss" */
  cairn_op *eval;  /* feeds "x", "y"; outputs "eval_loss", "accuracy" */
  const problem *p;
  cairn_tensor x, y; /* the train op's batch */
} model;

/* The train op's batch source: the batch of the current global step. */
static cairn_status next_batch(void *user, const cairn_tensor **x, const cairn_tensor **y) {
  model *m = user;
  *x = &m->x;
  *y = &m->y;
  return batch_for_step(m->p, cairn_tensor_i64(cairn_var_tensor(cairn_mlp_global_step(m->mlp)))[0], &m->x, &m->y);
}

static cairn_status model_new(model *m, int classes, uint64_t seed, const problem *p) {
  memset(m, 0, sizeof *m);
  m->p = p;
  cairn_mlp_op_options to = cairn_mlp_op_options_default();
  to.batch_fn = next_batch;
  to.batch_user = m;
  int64_t sizes[4] = {DIM, HIDDEN, HIDDEN, classes};
  cairn_mlp_config cfg = {.n_layers = 3, .sizes = sizes, .hidden_act = CAIRN_ACT_RELU,
                          .loss = CAIRN_LOSS_SPARSE_SOFTMAX_XENT, .optim = cairn_optim_defaults(CAIRN_OPTIM_ADAM)};
  cfg.optim.learning_rate = 0.01f;
  cairn_status s = cairn_registry_new(seed, &m->reg);
  if (!s) s = cairn_mlp_new(m->reg, &cfg, &m->mlp);
  if (!s) s = cairn_op_new_mlp_train(m->mlp, &to, &m->train);
  if (!s) s = cairn_op_new_mlp_eval(m->mlp, NULL, &m->eval);
  return s;
}

static void free_all(problem *p, model *m) {
  cairn_op_free(m->train);
  cairn_op_free(m->eval);
  cairn_mlp_free(m->mlp);
  cairn_registry_free(m->reg);
  cairn_tensor_free(p->xtr);
  cairn_tensor_free(p->ytr);
  cairn_tensor_free(p->xte);
  cairn_tensor_free(p->yte);
}

/* What every command starts with: the data set (merge_pairs: the
 * fine-tuning labels) and a model for `classes` over it. 0, or 1 with the
 * error reported and nothing left to free. */
static int data_and_model(problem *p, model *m, int merge_pairs, int classes, uint64_t seed) {
  const char *what = "data";
  memset(m, 0, sizeof *m);
  cairn_status st = problem_new(p, merge_pairs);
  if (st == CAIRN_OK) {
    what = "model";
    st = model_new(m, classes, seed, p);
  }
  if (st == CAIRN_OK) return 0;
  int rc = report_error(what, st, NULL);
  free_all(p, m);
  return rc;
}

/* Loss and accuracy on the held-out set, on session s (a raw session: no
 * hook sees this run, and the eval op does not touch the global step). */
/* ---- small helpers ------------------------------------------------------------------------ */

/* mkdir DIR unless it exists (TF's gfile.MakeDirs for one level). */
static int make_dir(const char *dir) {
  if (mkdir(dir, 0777) == 0 || errno == EEXIST) return 0;
  fprintf(stderr, PROG ": cannot create directory '%s': %s\n", dir, strerror(errno));
  return 1;
}

/* 1 and the path of dir's newest usable checkpoint, or 0 when there is
 * none (no directory, no checkpoint). The session manager restores the
 * same file: the state file's newest entry, or the newest valid one when
 * that cannot be read (cairn_latest_checkpoint does the same lookup). */
static int latest_checkpoint(const char *dir, char *path, size_t len) {
  return cairn_latest_checkpoint(dir, path, len) == CAIRN_OK;
}

/* The with-block's exit for a body whose `what` failed with `st`: reports
 * it; hooks' end() is skipped — so no final checkpoint of a failed step —
 * and the session is closed. cairn_monitored_session_close_with returns `st`
 * itself unless closing failed too. Returns 1. */
static int exit_on_error(cairn_monitored_session *ms, const char *what, cairn_status st) {
  report_error(what, st, cairn_monitored_session_errmsg(ms));
  cairn_status st2 = cairn_monitored_session_close_with(ms, st);
  if (st2 != st) report_error("closing", st2, cairn_monitored_session_errmsg(ms));
  return 1;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* ---- train ------------------------------------------------------------------------------------ */

typedef struct train_flags {
  const char *dir, *from;
  int64_t steps, save_steps;
  uint64_t seed;
  long sleep_ms;
} train_flags;

static int cmd_train(const train_flags *f) {
  problem p;
  model m;
  cairn_hook *stop = NULL;
  cairn_monitored_session *ms = NULL;
  cairn_status st;
  int rc = 1;
  char resumed[4096];

  if (make_dir(f->dir)) return 1;
  if (data_and_model(&p, &m, 0, CLASSES, f->seed)) return 1;
  /* Only for the message below: what the session manager will restore. */
  int have_ckpt = latest_checkpoint(f->dir, resumed, sizeof resumed);

  /* Stop when the global step reaches --steps, wherever it starts from. */
  if ((st = cairn_hook_new_stop_at_step(f->steps, NULL, &stop)) != CAIRN_OK) {
    rc = report_error("StopAtStepHook", st, NULL);
    goto out;
  }
  cairn_hook *hooks[1] = {stop};

  /* TF's MonitoredTrainingSession(is_chief=True, checkpoint_dir=DIR,
   * save_checkpoint_steps=K, hooks=[StopAtStepHook(last_step=N)]). Its
   * ChiefSessionCreator finalizes a default Scaffold (init_op, ready ops,
   * a Saver of every GLOBAL variable: weights, Adam slots, global_step)
   * and asks a SessionManager to restore DIR's latest checkpoint, or to
   * run init_op when there is none. Its CheckpointSaverHook saves right
   * after the session is created, every K steps, and at the end.
   * Summaries and the step counter are off: there is no summary writer
   * here, and the step counter would log global_step/sec to stderr. */
  cairn_monitored_training_session_options o = cairn_monitored_training_session_options_default();
  o.registry = m.reg;
  o.is_chief = 1;
  o.checkpoint_dir = f->dir;
  o.save_checkpoint_steps = f->save_steps;
  o.save_summaries_steps = 0;
  o.log_step_count_steps = 0;
  o.hooks = hooks;
  o.n_hooks = 1;
  if ((st = cairn_monitored_training_session_new(&o, &ms)) != CAIRN_OK) {
    rc = report_error("creating the monitored training session", st, NULL);
    goto out;
  }

  int64_t step;
  if ((st = cairn_session_global_step(cairn_monitored_session_raw_session(ms), &step)) != CAIRN_OK) {
    rc = report_error("reading the global step", st, cairn_monitored_session_errmsg(ms));
    goto out;
  }
  if (have_ckpt)
    printf("resumed from %s at step %lld\n", resumed, (long long)step);
  else
    printf("no checkpoint in %s: initialized a new model at step %lld\n", f->dir, (long long)step);
  if (step >= f->steps) {
    /* StopAtStepHook only looks after a step: do not train past N. */
    printf("already at step %lld (--steps %lld): nothing to train\n", (long long)step, (long long)f->steps);
    st = cairn_monitored_session_close_with(ms, CAIRN_OK);
    rc = st ? report_error("closing", st, cairn_monitored_session_errmsg(ms)) : 0;
    goto out;
  }

  double loss_sum = 0;
  int64_t round_steps = 0;
  cairn_fetch loss = {"loss", {0}};
  cairn_run_args a = cairn_run_args_one(&m.train); /* the op takes its own batch */
  a.fetches = &loss;
  a.n_fetches = 1;
  while (!cairn_monitored_session_should_stop(ms)) {
    /* The raw session changes when the monitored session recovers from an
       error: ask for it every time. */
    if ((st = cairn_session_global_step(cairn_monitored_session_raw_session(ms), &step)) != CAIRN_OK) break;
    /* One step through the hooks: StopAtStep and CheckpointSaver see it. */
    if ((st = cairn_monitored_session_run(ms, &a)) != CAIRN_OK) break;
    loss_sum += loss.value.f64;
    round_steps++;
    if (f->sleep_ms > 0) sleep_ms(f->sleep_ms);

    /* End of a round (every K steps, and the last one): evaluate. */
    if ((step + 1) % f->save_steps == 0 || cairn_monitored_session_should_stop(ms)) {
      /* Between steps: through run_step_fn, so no hook fires and the
         evaluation is not a training step. */
      cairn_mlp_eval_result e;
      if ((st = cairn_mlp_eval_run_monitored(ms, m.eval, p.xte, p.yte, &e)) != CAIRN_OK) break;
      printf("step %4lld  train loss %.4f  eval loss %.4f  eval accuracy %.4f\n", (long long)e.step,
             loss_sum / (double)round_steps, e.loss, e.accuracy);
      loss_sum = 0;
      round_steps = 0;
    }
  }
  if (st != CAIRN_OK) {
    rc = exit_on_error(ms, "training", st);
    goto out;
  }
  if ((st = cairn_session_global_step(cairn_monitored_session_raw_session(ms), &step)) != CAIRN_OK) {
    rc = exit_on_error(ms, "reading the global step", st);
    goto out;
  }
  /* A clean exit: end() of every hook — the CheckpointSaverHook writes the
     final step unless it has just saved it. */
  if ((st = cairn_monitored_session_close_with(ms, CAIRN_OK)) != CAIRN_OK) {
    rc = report_error("closing", st, cairn_monitored_session_errmsg(ms));
    goto out;
  }
  char last[4096];
  if (latest_checkpoint(f->dir, last, sizeof last)) printf("done at step %lld: %s\n", (long long)step, last);
  rc = 0;
out:
  cairn_monitored_session_free(ms); /* already closed by the exit above (or NULL) */
  cairn_hook_free(stop);
  free_all(&p, &m);
  return rc;
}

/* ---- eval ----------------------------------------------------------------------------------- */

static int cmd_eval(const train_flags *f) {
  problem p;
  model m;
  cairn_monitored_session *ms = NULL;
  cairn_status st;
  int rc = 1;
  char path[4096];

  /* Without a checkpoint the session manager would initialize a fresh
     model and we would evaluate random weights: refuse instead. */
  if ((st = cairn_latest_checkpoint(f->dir, path, sizeof path)) != CAIRN_OK)
    return report_error("no checkpoint to evaluate", st, NULL);
  if (data_and_model(&p, &m, 0, CLASSES, f->seed)) return 1;
  /* TF's SingularMonitoredSession(checkpoint_filename_with_path=...): a
   * ChiefSessionCreator that restores exactly this file (checkpoint_dir =
   * DIR would restore the same one), no recovery, and only the hooks we
   * give — none, so no CheckpointSaverHook: nothing is written to DIR. */
  cairn_singular_monitored_session_options o = cairn_singular_monitored_session_options_default();
  o.registry = m.reg;
  o.checkpoint_filename_with_path = path;
  if ((st = cairn_singular_monitored_session_new(&o, &ms)) != CAIRN_OK) {
    rc = report_error("restoring", st, NULL);
    goto out;
  }
  cairn_mlp_eval_result e;
  if ((st = cairn_mlp_eval_run_monitored(ms, m.eval, p.xte, p.yte, &e)) != CAIRN_OK) {
    rc = exit_on_error(ms, "evaluating", st);
    goto out;
  }
  printf("evaluated %s at step %lld: test loss %.4f  test accuracy %.4f\n", path, (long long)e.step, e.loss,
         e.accuracy);
  if ((st = cairn_monitored_session_close_with(ms, CAIRN_OK)) != CAIRN_OK) {
    rc = report_error("closing", st, cairn_monitored_session_errmsg(ms));
    goto out;
  }
  rc = 0;
out:
  cairn_monitored_session_free(ms);
  free_all(&p, &m);
  return rc;
}

/* ---- finetune ------------------------------------------------------------------------------- */

/* One line per list of the restore report: "  restored (4): a, b, ...";
 * mismatched items with both shapes. */
static void print_report(const cairn_restore_report *r) {
  static const struct {
    cairn_restore_kind kind;
    const char *label;
  } lists[] = {{CAIRN_RESTORE_RESTORED, "restored"},
               {CAIRN_RESTORE_MISSING, "missing"},
               {CAIRN_RESTORE_MISMATCHED, "mismatched"},
               {CAIRN_RESTORE_UNUSED, "unused"},
               {CAIRN_RESTORE_SKIPPED, "skipped"}};
  for (size_t l = 0; l < sizeof lists / sizeof lists[0]; l++) {
    size_t n = cairn_restore_report_count(r, lists[l].kind);
    printf("  %s (%zu):", lists[l].label, n);
    for (size_t i = 0; i < n; i++) {
      const cairn_restore_item *it = cairn_restore_report_item(r, lists[l].kind, i);
      /* UNUSED items exist only in the checkpoint: they have no model name. */
      printf("%s %s", i ? "," : "", it->name ? it->name : it->ckpt_name);
      if (lists[l].kind == CAIRN_RESTORE_MISMATCHED) {
        printf(" (checkpoint (");
        for (int d = 0; d < it->ckpt_rank; d++) printf("%s%lld", d ? ", " : "", (long long)it->ckpt_shape[d]);
        printf("), model (");
        for (int d = 0; d < it->var_rank; d++) printf("%s%lld", d ? ", " : "", (long long)it->var_shape[d]);
        printf("))");
      }
    }
    printf("\n");
  }
}

/* 1 if the report lists v as restored. */
static int was_restored(const cairn_restore_report *r, const cairn_var *v) {
  for (size_t i = 0; i < cairn_restore_report_count(r, CAIRN_RESTORE_RESTORED); i++)
    if (cairn_restore_report_item(r, CAIRN_RESTORE_RESTORED, i)->var == v) return 1;
  return 0;
}

static int cmd_finetune(const train_flags *f) {
  problem p;
  model m;
  cairn_scaffold *sc = NULL;
  cairn_session_manager *sm = NULL;
  cairn_session *s = NULL;
  cairn_checkpoint_lock *lock = NULL;
  cairn_op *warm = NULL;
  cairn_status st;
  int rc = 1;
  char src[4096], own[4096], prefix[4096], saved[4096];

  if ((size_t)snprintf(prefix, sizeof prefix, "%s/model.ckpt", f->dir) >= sizeof prefix) {
    fprintf(stderr, PROG ": --dir is too long\n");
    return 2;
  }
  if (make_dir(f->dir)) return 1;
  /* A restart of an interrupted fine-tuning continues from NEWDIR's own
     (complete) checkpoint; only the first run restores partially. */
  int resuming = latest_checkpoint(f->dir, own, sizeof own);
  if (!resuming && (st = cairn_latest_checkpoint(f->from, src, sizeof src)) != CAIRN_OK)
    return report_error("no checkpoint to fine-tune from", st, NULL);
  if (data_and_model(&p, &m, 1, FT_CLASSES, f->seed)) return 1;
  /* The loop below saves with the Saver itself, not through a
   * CheckpointSaverHook (which would lock for us): one writer per
   * directory, so it holds NEWDIR's lock; a second fine-tuning refuses. */
  if ((st = cairn_checkpoint_lock_new(f->dir, &lock)) != CAIRN_OK) {
    rc = report_error("checkpoint directory", st, NULL);
    goto out;
  }

  /* What to restore: the weights of every layer (the globs match
   * "dense/kernel", "dense_1/bias", ... but not the Adam slots
   * "dense/kernel/Adam": fnmatch's '*' matches '/' too, the suffix does not
   * match). Not the optimizer state and not global_step: they start afresh
   * for the new task. Lenient: the output layer dense_2 is in both models
   * with another shape — (32, 10) vs (32, 5) — so it is reported as
   * mismatched and keeps its initial values instead of failing the restore.
   * Lenient also means a hidden layer of the wrong shape would keep its
   * initial values silently, so we check the report below. */
  static const char *const include[] = {"dense*/kernel", "dense*/bias"};
  cairn_restore_options ro;
  memset(&ro, 0, sizeof ro);
  ro.lenient = 1;
  cairn_var *weights[8];
  size_t n_weights = cairn_registry_list_vars(m.reg, CAIRN_COLL_GLOBAL, include, 2, NULL, 0, weights, 8);
  const cairn_restore_report *rep = NULL;

  /* TF's Scaffold(init_fn=lambda scaffold, sess: saver.restore(sess, src)):
   * the restore op runs after init_op, only when NEWDIR has no checkpoint
   * of its own to restore. The Scaffold's saver is still the default one,
   * so every save writes the whole new model. */
  cairn_scaffold_options so;
  memset(&so, 0, sizeof so);
  if (!resuming && (st = cairn_op_new_restore("warm_start", src, weights, n_weights, &ro, &rep, &warm)) != CAIRN_OK) {
    rc = report_error("restore op", st, NULL);
    goto out;
  }
  so.init_fn = cairn_op_init_fn;
  so.init_fn_user = warm;
  so.init_fn_name = "warm_start";
  if (!warm) so.init_fn = NULL;
  if ((st = cairn_scaffold_new(m.reg, &so, &sc)) != CAIRN_OK || (st = cairn_scaffold_finalize(sc)) != CAIRN_OK) {
    rc = report_error("scaffold", st, NULL);
    goto out;
  }
  /* What ChiefSessionCreator does, by hand, to run the training loop on the
   * raw session below: a SessionManager with the Scaffold's ops, then
   * prepare_session restoring NEWDIR or initializing. */
  if ((st = cairn_session_manager_new_from_scaffold(sc, NULL, &sm)) != CAIRN_OK) {
    rc = report_error("session manager", st, NULL);
    goto out;
  }
  cairn_prepare_options po = cairn_prepare_options_from_scaffold(sc, f->dir, NULL);
  if ((st = cairn_session_manager_prepare_session(sm, &po, &s)) != CAIRN_OK) {
    rc = report_error("prepare_session", st, cairn_session_manager_errmsg(sm));
    goto out;
  }

  if (resuming) {
    printf("resumed fine-tuning from %s\n", own);
  } else {
    printf("partial restore from %s:\n", src);
    print_report(rep);
    /* Lenient restores report instead of failing: make sure what must
       come from the checkpoint did. */
    for (int i = 0; i < 2; i++) {
      cairn_var *need[2] = {cairn_mlp_kernel(m.mlp, i), cairn_mlp_bias(m.mlp, i)};
      for (int j = 0; j < 2; j++)
        if (!was_restored(rep, need[j])) {
          fprintf(stderr, PROG ": hidden layer variable '%s' was not restored from %s\n", cairn_var_name(need[j]),
                  src);
          goto out;
        }
    }
  }

  cairn_mlp_eval_result e;
  if ((st = cairn_mlp_eval_run(s, m.eval, p.xte, p.yte, &e)) != CAIRN_OK) {
    rc = report_error("evaluating", st, cairn_session_errmsg(s));
    goto out;
  }
  int64_t step = e.step;
  printf("step %4lld  eval loss %.4f  eval accuracy %.4f  (start of this run)\n", (long long)step, e.loss,
         e.accuracy);
  if (step >= f->steps)
    printf("already at step %lld (--steps %lld): nothing to train\n", (long long)step, (long long)f->steps);

  /* A plain training loop on the session (no hooks here), saving every K
   * steps and at the end with the Scaffold's saver. */
  cairn_saver *saver = cairn_scaffold_saver(sc);
  double loss_sum = 0;
  int64_t round_steps = 0;
  cairn_fetch lf = {"loss", {0}};
  cairn_run_args a = cairn_run_args_one(&m.train);
  a.fetches = &lf;
  a.n_fetches = 1;
  while (step < f->steps) {
    if ((st = cairn_session_run(s, &a)) != CAIRN_OK) break;
    loss_sum += lf.value.f64;
    round_steps++;
    if ((st = cairn_session_global_step(s, &step)) != CAIRN_OK) break;
    if (step % f->save_steps == 0 || step >= f->steps) {
      if ((st = cairn_mlp_eval_run(s, m.eval, p.xte, p.yte, &e)) != CAIRN_OK) break;
      if ((st = cairn_saver_save(saver, prefix, step, saved, sizeof saved)) != CAIRN_OK) break;
      printf("step %4lld  train loss %.4f  eval loss %.4f  eval accuracy %.4f  saved %s\n", (long long)step,
             loss_sum / (double)round_steps, e.loss, e.accuracy, saved);
      loss_sum = 0;
      round_steps = 0;
    }
  }
  if (st != CAIRN_OK) {
    rc = report_error("fine-tuning", st, cairn_session_errmsg(s));
    goto out;
  }
  rc = 0;
out:
  cairn_session_free(s);
  cairn_session_manager_free(sm);
  cairn_scaffold_free(sc);
  cairn_op_free(warm);
  free_all(&p, &m);
  cairn_checkpoint_lock_free(lock);
  return rc;
}

/* ---- main ------------------------------------------------------------------------------------- */

/* Parses a decimal integer in [lo, hi]; 0 on success. */
static int parse_int(const char *s, long long lo, long long hi, long long *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) return 1;
  *out = v;
  return 0;
}

int main(int argc, char **argv) {
  /* Line-buffered even into a file or a pipe: a killed run has printed
     every line up to the kill. */
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 2) return usage();
  const char *mode = argv[1];
  train_flags f = {NULL, NULL, 200, 10, 1, 0};
  int is_train = strcmp(mode, "train") == 0, is_eval = strcmp(mode, "eval") == 0,
      is_ft = strcmp(mode, "finetune") == 0;
  if (!is_train && !is_eval && !is_ft) return usage();
  if (is_ft) f.steps = 50;
  for (int i = 2; i < argc; i++) {
    long long v;
    const char *a = argv[i];
    if (i + 1 >= argc) return usage();
    const char *val = argv[++i];
    if (strcmp(a, "--dir") == 0) f.dir = val;
    else if (is_ft && strcmp(a, "--from") == 0) f.from = val;
    else if (!is_eval && strcmp(a, "--steps") == 0 && !parse_int(val, 1, INT64_MAX, &v)) f.steps = v;
    else if (!is_eval && strcmp(a, "--save-steps") == 0 && !parse_int(val, 1, INT64_MAX, &v)) f.save_steps = v;
    else if (!is_eval && strcmp(a, "--seed") == 0 && !parse_int(val, 0, INT64_MAX, &v)) f.seed = (uint64_t)v;
    else if (is_train && strcmp(a, "--sleep-ms") == 0 && !parse_int(val, 0, 60000, &v)) f.sleep_ms = (long)v;
    else return usage();
  }
  if (!f.dir || (is_ft && !f.from)) return usage();
  if (is_train) return cmd_train(&f);
  if (is_eval) return cmd_eval(&f);
  return cmd_finetune(&f);
}
