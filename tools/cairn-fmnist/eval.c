/* cairn-fmnist/eval.c — eval: the test accuracy of DIR's newest intact
 * checkpoint, through a SingularMonitoredSession restoring exactly that
 * file (no hooks: nothing is written into DIR). A checkpoint that a
 * trainer's rotation deletes meanwhile, or whose data is bad, gives way to
 * the next newest. */
#define _POSIX_C_SOURCE 200809L

#include "common.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* 1 if nothing is left at path (a file, or a TF prefix's .index). */
static int vanished(const char *path) {
  struct stat sb;
  char idx[4200];
  snprintf(idx, sizeof idx, "%s.index", path);
  return stat(path, &sb) != 0 && errno == ENOENT && stat(idx, &sb) != 0 && errno == ENOENT;
}

int cmd_eval(flags *f) {
  data d;
  model m;
  cairn_monitored_session *ms = NULL;
  cairn_status st;
  char path[4096];
  int ret = 1;
  struct stat sb;

  memset(&d, 0, sizeof d);
  memset(&m, 0, sizeof m);
  if (stat(f->dir, &sb) != 0 || !S_ISDIR(sb.st_mode) || access(f->dir, R_OK | X_OK) != 0) {
    fprintf(stderr, PROG ": cannot read checkpoint directory '%s': %s\n", f->dir,
            errno ? strerror(errno) : "not a directory");
    return 1;
  }
  /* The data first: a trainer next to us rotates checkpoints away, and the
     second it takes to load them was the window in which the checkpoint
     chosen below was deleted before it was restored. */
  if (data_load(&d, f->data_dir)) goto out;
  for (int attempt = 0;; attempt++) {
    char note[4096];
    cairn_ckpt *c = NULL;
    /* Chosen and opened in DIR at once (nothing outside DIR is read); its
       architecture comes from that open handle. */
    if ((st = cairn_latest_checkpoint_open(f->dir, path, sizeof path, note, sizeof note, &c)) != CAIRN_OK) {
      if (attempt) /* the reasons were in the warnings */
        fprintf(stderr, PROG ": no intact checkpoint to evaluate in %s: every one left is corrupt or gone (see the "
                        "warnings above; the files are left in place)\n", f->dir);
      else
        report_error("no checkpoint to evaluate", st, NULL);
      goto out;
    }
    /* Say which checkpoint was skipped, and why, as train and ckpt-inspect do. */
    if (*note) fprintf(stderr, PROG ": note: %s\n", note);
    int bad = hidden_from_ckpt(c, path, f);
    cairn_ckpt_close(c);
    if (bad) goto out;
    if (model_new(&m, d.features, f->hidden, f->n_hidden, 0, f->precision)) goto out;
    /* SingularMonitoredSession restoring exactly this file, no hooks: no
       CheckpointSaverHook, so nothing is written into DIR. */
    cairn_singular_monitored_session_options o = cairn_singular_monitored_session_options_default();
    o.registry = m.reg;
    o.checkpoint_filename_with_path = path;
    if ((st = cairn_singular_monitored_session_new(&o, &ms)) == CAIRN_OK) break;
    char why[1024];
    snprintf(why, sizeof why, "%s", cairn_errmsg());
    /* Rotation deleted the file since it was chosen: the next newest. */
    if (vanished(path) && attempt < 1000) {
      fprintf(stderr, PROG ": warning: %s vanished before it was restored (%s): evaluating the newest one left\n",
              path, why);
      model_free(&m);
      memset(&m, 0, sizeof m);
      continue;
    }
    /* The file's own data is bad (a checksum, a decoding, a cut): evaluate
       the newest intact checkpoint instead, as train resumes from it. A
       model that does not match a sound file is an error. */
    if ((st != CAIRN_E_CORRUPT && st != CAIRN_E_TRUNCATED && st != CAIRN_E_FORMAT) || attempt >= 1000) {
      ret = report_error("restoring", st, NULL);
      goto out;
    }
    fprintf(stderr, PROG ": warning: %s is unusable (%s): evaluating the newest intact checkpoint instead\n", path,
            why);
    if ((st = cairn_checkpoint_mark_corrupt(path, why)) != CAIRN_OK) {
      ret = report_error("restoring", st, NULL);
      goto out;
    }
    model_free(&m);
    memset(&m, 0, sizeof m);
  }
  cairn_mlp_eval_result e;
  if ((st = cairn_mlp_eval_run_monitored(ms, m.eval, &d.xte, d.yte, &e)) != CAIRN_OK) {
    ret = session_finish(ms, "evaluating", st);
    goto out;
  }
  printf("checkpoint %s  step %lld\ntest_loss=%.4f\ntest_accuracy=%.4f\n", path, (long long)e.step, e.loss,
         e.accuracy);
  ret = session_finish(ms, NULL, CAIRN_OK);
out:
  cairn_monitored_session_free(ms);
  model_free(&m);
  data_free(&d);
  return ret;
}
