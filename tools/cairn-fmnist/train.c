/* cairn-fmnist/train.c — train and warm-start: the MonitoredTrainingSession
 * loop (TF's MonitoredTrainingSession with a CheckpointSaverHook, the
 * DataPositionHook of data_position.c, StopAtStep, progress and TensorBoard
 * output), resuming exactly from DIR's newest checkpoint; warm-start adds
 * one of warm_start.c's recipes for the first session of DIR. */
#define _POSIX_C_SOURCE 200809L

#include "common.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dist.h"
#include "warm_start.h"

static void format_hidden(const int64_t *h, int n, const char *sep, char *buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < n && used < len; i++) used += (size_t)snprintf(buf + used, len - used, "%s%lld", i ? sep : "", (long long)h[i]);
}

/* DIR exists (or is created) and is a readable, writable directory. */
static int prepare_dir(const char *dir) {
  struct stat sb;
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, PROG ": cannot create checkpoint directory '%s': %s\n", dir, strerror(errno));
    return 1;
  }
  if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
    fprintf(stderr, PROG ": checkpoint directory '%s' is not a directory\n", dir);
    return 1;
  }
  if (access(dir, R_OK | W_OK | X_OK) != 0) {
    fprintf(stderr, PROG ": cannot use checkpoint directory '%s': %s\n", dir, strerror(errno));
    return 1;
  }
  return 0;
}

/* Every progress line (cairn_progress_hook) goes to stdout, and its numbers
 * into the TensorBoard event file. */
static void on_progress(void *ctx, const cairn_progress *p, const char *line) {
  cairn_event_writer *w = ctx;
  printf("%s\n", line);
  if (!w) return;
  cairn_status st = CAIRN_OK;
  if (p->have_loss) st = cairn_event_writer_add_scalar(w, "loss", p->loss, p->step);
  if (!st && p->steps_per_sec > 0) st = cairn_event_writer_add_scalar(w, "steps_per_sec", p->steps_per_sec, p->step);
  if (!st && p->examples_per_sec > 0)
    st = cairn_event_writer_add_scalar(w, "examples_per_sec", p->examples_per_sec, p->step);
  if (st) fprintf(stderr, PROG ": warning: event file: %s\n", cairn_errmsg());
}

static int run_training(const flags *f, const data *d, model *m, recipe *rc) {
  cairn_scaffold *sc = NULL;
  cairn_dataset *ds = NULL;
  cairn_event_writer *events = NULL;
  cairn_summary_writer sw;
  cairn_hook *hooks[4] = {NULL, NULL, NULL, NULL}; /* data position, stop, broadcast, progress */
  size_t n_hooks = 0;
  int rank = fmnist_dist_rank(), size = fmnist_dist_size(), chief = rank == 0;
  cairn_monitored_session *ms = NULL;
  cairn_status st;
  int ret = 1;
  char hbuf[256];
  data_state dst = {NULL, NULL, chief ? f->dir : NULL};
  batches *b = &m->b; /* the train op's */

  cairn_dataset_config dc = {f->batch, 1, f->seed, 1, 0};
  if ((st = cairn_dataset_new(&d->xtr, d->ytr, &dc, &ds)) != CAIRN_OK) return report_error("dataset", st, NULL);
  dst.ds = ds;
  if ((st = cairn_scaffold_new(m->reg, &rc->so, &sc)) != CAIRN_OK || (st = cairn_scaffold_finalize(sc)) != CAIRN_OK) {
    ret = report_error("scaffold", st, NULL);
    goto out;
  }
  dst.saver = rc->full_saver ? rc->full_saver : cairn_scaffold_saver(sc);
  char arch[256];
  format_hidden(f->hidden, f->n_hidden, ",", hbuf, sizeof hbuf);
  format_hidden(f->hidden, f->n_hidden, "-", arch, sizeof arch);
  /* the precision the run trained in (checkpoints hold fp32 either way:
     one trained in bf16 resumes or warm-starts in f32 and back) */
  if ((st = cairn_saver_set_user_str(dst.saver, "fmnist.precision",
                                     f->precision == CAIRN_PRECISION_BF16 ? "bf16" : "f32")) != CAIRN_OK ||
      (st = cairn_saver_set_user_str(dst.saver, "fmnist.hidden", hbuf)) != CAIRN_OK) {
    ret = report_error("saver", st, NULL);
    goto out;
  }

  /* TF's MonitoredTrainingSession(is_chief=True, checkpoint_dir=DIR,
     chief_only_hooks=[DataPosition, StopAtStep], hooks=[broadcast,
     progress], saving_listeners=[the data position into every checkpoint]).
     Its hooks run in the order the position needs: the data position first
     (after_create_session imports it before the CheckpointSaverHook's save
     at creation), then StopAtStep, the CheckpointSaverHook, and the user's
     hooks. --distributed: every rank prepares its own session, rank 0
     alone has DIR (the CheckpointSaverHook and the progress output); the
     BroadcastGlobalVariablesHook runs on every rank, after the data
     position (whose hook broadcasts rank 0's) and after rank 0's save at
     creation. */
  cairn_checkpoint_listener lis;
  memset(&lis, 0, sizeof lis);
  lis.before_save = ds_before_save;
  lis.self = &dst;
  /* TensorBoard: an event file in DIR with the progress numbers, the test
     accuracy and a CHECKPOINT session log per save (rank 0 only). */
  if (chief && (st = cairn_event_writer_new(f->dir, NULL, &events)) != CAIRN_OK) {
    ret = report_error("event file", st, NULL);
    goto out;
  }
  sw = cairn_event_writer_summary_writer(events);
  cairn_progress_hook_options po = cairn_progress_hook_options_default();
  po.every_n_steps = f->log_every > 0 ? f->log_every : INT64_MAX;
  po.loss_name = "loss";
  po.batch_size = f->batch;
  po.max_steps = f->max_steps;
  po.fn = on_progress;
  po.fn_ctx = events;
  if ((st = cairn_hook_new(&DATA_HOOK, &dst, &hooks[0])) != CAIRN_OK ||
      (st = cairn_hook_new_stop_at_step(f->max_steps, NULL, &hooks[1])) != CAIRN_OK ||
      (st = fmnist_dist_broadcast_hook_new(&hooks[2])) != CAIRN_OK ||
      (chief && (st = cairn_hook_new_progress(&po, &hooks[3])) != CAIRN_OK)) {
    ret = report_error("hooks", st, NULL);
    goto out;
  }
  cairn_hook *user_hooks[2];
  for (int i = 2; i < 4; i++)
    if (hooks[i]) user_hooks[n_hooks++] = hooks[i];
  cairn_monitored_training_session_options mo = cairn_monitored_training_session_options_default();
  mo.registry = m->reg;
  mo.scaffold = sc;
  mo.checkpoint_dir = chief ? f->dir : NULL;
  mo.checkpoint_filename_with_path = rc->restore_file;
  mo.checkpoint_saver = rc->full_saver;
  mo.chief_only_hooks = hooks;
  mo.n_chief_only_hooks = 2;
  mo.hooks = user_hooks;
  mo.n_hooks = n_hooks;
  mo.save_checkpoint_secs = f->save_secs;
  mo.save_checkpoint_steps = f->save_secs > 0 ? 0 : f->save_steps;
  mo.save_summaries_steps = 0; /* the progress hook writes the numbers */
  mo.log_step_count_steps = 0;
  mo.summary_writer = &sw;
  mo.async_checkpoints = f->async;
  mo.checkpoint_listeners = &lis;
  mo.n_checkpoint_listeners = 1;
  mo.stop_on_signals = size == 1; /* a preempted job saves first */
  double t0 = now_secs();
  if ((st = cairn_monitored_training_session_new(&mo, &ms)) != CAIRN_OK) {
    ret = report_error("creating the monitored session", st, NULL);
    goto out;
  }
  int64_t step, start;
  if ((st = cairn_session_global_step(cairn_monitored_session_raw_session(ms), &step)) != CAIRN_OK) {
    ret = report_error("reading the global step", st, cairn_monitored_session_errmsg(ms));
    goto out;
  }
  start = step;
  /* TensorBoard drops the events a crashed run wrote past the restored step. */
  if (events && step > 0 && (st = cairn_event_writer_add_session_log(events, CAIRN_SESSION_LOG_START, NULL, step + 1)) != CAIRN_OK)
    fprintf(stderr, PROG ": warning: event file: %s\n", cairn_errmsg());
  cairn_dataset_state pos;
  cairn_dataset_export(ds, &pos);
  /* The file really restored: not DIR's newest when that one was corrupt
     (the library has then warned and fallen back to an older one). */
  const char *resumed = cairn_session_restored_path(cairn_monitored_session_raw_session(ms));
  if (!chief)
    ;
  else if (resumed && !rc->restore_file)
    printf("resumed from %s at step %lld (epoch %lld, example %lld)\n", resumed, (long long)step, (long long)pos.epoch,
           (long long)pos.position);
  else if (rc->restore_file)
    printf("warm start from %s: initialized the output layer, step %lld\n", rc->restore_file, (long long)step);
  else
    printf("no checkpoint in %s: initialized a new model at step %lld\n", f->dir, (long long)step);
  if (chief)
    printf("model %lld-%s-%d, %lld parameters, batch %lld, %lld training and %lld test examples\n",
           (long long)d->features, arch, CLASSES, (long long)cairn_mlp_num_params(m->mlp), (long long)f->batch,
           (long long)d->xtr.shape[0], (long long)d->xte.shape[0]);
  if (chief && size > 1)
    printf("distributed over %d ranks: %lld examples of each batch per rank\n", size, (long long)(f->batch / size));

  /* The train op's batches: this rank's rows of each global batch (all of
     them on one process). */
  int64_t bshape[2] = {f->batch, d->features}, yshape[1] = {f->batch};
  if ((st = cairn_tensor_new(CAIRN_DTYPE_F32, 2, bshape, &b->xb)) != CAIRN_OK ||
      (st = cairn_tensor_new(CAIRN_DTYPE_I32, 1, yshape, &b->yb)) != CAIRN_OK) {
    ret = report_error("batch", st, NULL);
    goto out;
  }
  b->ds = ds;
  int64_t row0, row1;
  fmnist_dist_shard(f->batch, &row0, &row1);
  int64_t xsshape[2] = {row1 - row0, d->features}, ysshape[1] = {row1 - row0};
  if ((st = cairn_tensor_view(&b->xs, cairn_tensor_f32(b->xb) + row0 * d->features, CAIRN_DTYPE_F32, 2, xsshape)) !=
          CAIRN_OK ||
      (st = cairn_tensor_view(&b->ys, cairn_tensor_i32(b->yb) + row0, CAIRN_DTYPE_I32, 1, ysshape)) != CAIRN_OK) {
    ret = report_error("batch", st, NULL);
    goto out;
  }
  if (chief && step >= f->max_steps)
    printf("already at step %lld (--max-steps %lld): nothing to train\n", (long long)step, (long long)f->max_steps);
  cairn_run_args a = cairn_run_args_one(&m->train); /* the op takes its own batch */
  while (step < f->max_steps && !cairn_monitored_session_should_stop(ms)) {
    if ((st = cairn_monitored_session_run(ms, &a)) != CAIRN_OK) break;
    if ((st = cairn_session_global_step(cairn_monitored_session_raw_session(ms), &step)) != CAIRN_OK) break;
    int last = step >= f->max_steps;
    if (chief && f->eval_every > 0 && (step % f->eval_every == 0 || last)) {
      cairn_mlp_eval_result e;
      if ((st = cairn_mlp_eval_run_monitored(ms, m->eval, &d->xte, d->yte, &e)) != CAIRN_OK) break;
      /* A background save that failed is reported before a line that
         reads as if all went well (at the last step: after waiting for
         the save in flight). */
      if ((st = last ? cairn_saver_save_wait(dst.saver) : cairn_saver_save_status(dst.saver, NULL)) != CAIRN_OK) break;
      printf("step %lld  test_loss=%.4f  test_accuracy=%.4f  (%.1f s)\n", (long long)e.step, e.loss, e.accuracy,
             now_secs() - t0);
      if ((st = cairn_event_writer_add_scalar(events, "test_accuracy", e.accuracy, e.step)) != CAIRN_OK ||
          (st = cairn_event_writer_add_scalar(events, "test_loss", e.loss, e.step)) != CAIRN_OK)
        break;
    }
  }
  /* The end of every run that trained: the test accuracy reached, and how
     long this run took (unless --eval-every has just printed it). */
  if (chief && st == CAIRN_OK && step > start && !(f->eval_every > 0) && !cairn_monitored_session_stop_signal(ms)) {
    cairn_mlp_eval_result e;
    if ((st = cairn_mlp_eval_run_monitored(ms, m->eval, &d->xte, d->yte, &e)) == CAIRN_OK &&
        (st = cairn_saver_save_wait(dst.saver)) == CAIRN_OK) {
      printf("step %lld  test_loss=%.4f  test_accuracy=%.4f  (%.1f s)\n", (long long)e.step, e.loss, e.accuracy,
             now_secs() - t0);
      if ((st = cairn_event_writer_add_scalar(events, "test_accuracy", e.accuracy, e.step)) == CAIRN_OK)
        st = cairn_event_writer_add_scalar(events, "test_loss", e.loss, e.step);
    }
  }
  if ((ret = session_finish(ms, "training", st)) != 0) goto out;
  char last[4096];
  double secs = now_secs() - t0;
  int sig = cairn_monitored_session_stop_signal(ms);
  if (sig && cairn_latest_checkpoint(f->dir, last, sizeof last) == CAIRN_OK)
    printf("stopped by %s at step %lld: %s (%lld steps in %.1f s); the same command resumes from it\n",
           sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : "a signal", (long long)step, last,
           (long long)(step - start), secs);
  else if (chief && cairn_latest_checkpoint(f->dir, last, sizeof last) == CAIRN_OK)
    printf("done at step %lld: %s (%lld steps in %.1f s)\n", (long long)step, last, (long long)(step - start), secs);
  fmnist_dist_print_stats(secs);
  ret = sig ? 128 + sig : 0;
out:
  cairn_monitored_session_free(ms);
  for (int i = 0; i < 4; i++) cairn_hook_free(hooks[i]);
  cairn_event_writer_free(events); /* after the hooks that use it */
  cairn_scaffold_free(sc);
  cairn_tensor_free(b->xb);
  cairn_tensor_free(b->yb);
  memset(b, 0, sizeof *b);
  cairn_dataset_free(ds);
  return ret;
}

/* train, or warm-start (the recipe only when DIR holds no checkpoint yet:
 * otherwise it continues from DIR like train). */
static int train_or_warm(flags *f, int warm_start) {
  data d;
  model m;
  recipe rc;
  warm w;
  int ret = 1, rank0 = fmnist_dist_rank() == 0;
  char own[4096], src[4096];
  cairn_saver *saver = NULL; /* the Scaffold's, with the codec of --compress */
  cairn_status st;

  memset(&rc, 0, sizeof rc);
  memset(&d, 0, sizeof d);
  memset(&m, 0, sizeof m);
  memset(&w, 0, sizeof w);
  /* --distributed: only rank 0 touches DIR. */
  if (rank0 && prepare_dir(f->dir)) return 1;
  /* One trainer per DIR: refuse before loading data or writing anything;
     the CheckpointSaverHook holds the lock for the session itself. */
  if (rank0 && (st = cairn_checkpoint_lock_check(f->dir)) != CAIRN_OK)
    return report_error("checkpoint directory", st, NULL);
  /* The newest checkpoint and its metadata in one open of it. */
  cairn_saver_meta *own_meta = NULL;
  int resuming = rank0 && cairn_saver_meta_read_latest(f->dir, own, sizeof own, NULL, 0, &own_meta) == CAIRN_OK;
  if (resuming) {
    if (hidden_from_meta(own, own_meta, f)) return 1;
  } else if (warm_start) {
    int r = warm_source(f, src, sizeof src);
    if (r) return r;
  }
  if (fmnist_dist_size() > 1) {
    /* The architecture is rank 0's (its checkpoint's when it resumes). */
    int64_t h[CAIRN_MLP_MAX_LAYERS + 1];
    h[0] = f->n_hidden;
    memcpy(h + 1, f->hidden, sizeof f->hidden);
    if ((st = fmnist_dist_broadcast(h, sizeof h)) != CAIRN_OK)
      return report_error("broadcasting the architecture", st, NULL);
    if (h[0] < 1 || h[0] > CAIRN_MLP_MAX_LAYERS - 1)
      return report_error("broadcasting the architecture", CAIRN_E_FORMAT, "bad layer count");
    f->n_hidden = (int)h[0];
    memcpy(f->hidden, h + 1, sizeof f->hidden);
  }
  if (data_load(&d, f->data_dir)) goto out;
  if (model_new(&m, d.features, f->hidden, f->n_hidden, f->seed, f->precision)) goto out;
  fmnist_dist_average_grads(m.mlp);

  if (warm_start && !resuming) {
    if (warm_recipe(f, &m, src, &w, &rc)) goto out;
  } else if (warm_start) {
    printf("%s already holds %s: continuing from it\n", f->dir, own);
  }
  if (f->compress != CAIRN_CKPT_COMPRESS_AUTO && !rc.so.saver) {
    /* The Scaffold's own saver (TF's: allow_empty, max_to_keep 5) with the
       codec asked for. */
    cairn_saver_options so = cairn_saver_options_default();
    so.allow_empty = 1;
    so.write.compress = f->compress;
    if ((st = cairn_saver_new(m.reg, &so, &saver)) != CAIRN_OK) {
      ret = report_error("saver", st, NULL);
      goto out;
    }
    rc.so.saver = saver;
  }
  ret = run_training(f, &d, &m, &rc);
out:
  warm_free(&w);
  cairn_saver_free(saver);
  model_free(&m);
  data_free(&d);
  return ret;
}

int cmd_warm_start(flags *f) { return train_or_warm(f, 1); }

int cmd_train(flags *f) {
  if (!f->distributed) return train_or_warm(f, 0);
  cairn_status st = fmnist_dist_init(f->argc, f->argv);
  if (st) return report_error("--distributed: MPI", st, NULL);
  int rank = fmnist_dist_rank(), size = fmnist_dist_size();
  if (f->batch % size != 0) {
    if (rank == 0)
      fprintf(stderr, PROG ": --distributed: --batch-size %lld is not a multiple of the %d ranks\n", (long long)f->batch,
              size);
    fmnist_dist_free();
    return 2;
  }
  int ret = train_or_warm(f, 0);
  if (ret != 0 && size > 1) {
    /* The other ranks may be inside a collective: end the whole job. */
    fprintf(stderr, PROG ": rank %d of %d failed: ending the job\n", rank, size);
    fmnist_dist_abort(ret);
  }
  fmnist_dist_free();
  return ret;
}
