/* The restore op: a Saver of a variable list restoring one checkpoint file,
 * wrapped as an op so that a Scaffold can run it as its local_init_op or
 * its init_fn (the warm start every fine-tuning program writes). */
#include "internal.h"
#include "restore_impl.h"

#include <stdlib.h>
#include <string.h>

#include "cairn/saver.h"
#include "cairn/session.h"

typedef struct restore_op {
  cairn_saver *saver;
  char *path;
  char *name;
  const cairn_restore_options *opts;
  cairn_restore_report *report;
  const cairn_restore_report **report_out;
} restore_op;

static void restore_op_free(void *user) {
  restore_op *r = user;
  if (!r) return;
  if (r->report_out) *r->report_out = NULL;
  cairn_restore_report_free(r->report);
  cairn_saver_free(r->saver);
  free(r->path);
  free(r->name);
  free(r);
}

static cairn_status restore_fn(cairn_session *s, void *user) {
  restore_op *r = user;
  cairn_status st;
  size_t n = cairn_saver_count(r->saver), restored = n;
  /* A directory: the checkpoint it means now (its newest), named in the log. */
  char src[4096];
  if ((st = cairn__restore_source(r->name, r->path, src, sizeof src, NULL)))
    return cairn_session_fail(s, st, "%s", cairn_errmsg());
  if (!r->opts) {
    st = cairn_saver_restore(r->saver, src, NULL);
  } else {
    cairn_restore_report_free(r->report);
    r->report = NULL;
    if (r->report_out) *r->report_out = NULL;
    st = cairn_saver_restore_partial(r->saver, src, r->opts, &r->report, NULL);
    if (r->report_out) *r->report_out = r->report;
    restored = cairn_restore_report_count(r->report, CAIRN_RESTORE_RESTORED);
  }
  if (st) return cairn_session_fail(s, st, "%s: %s", r->name, cairn_errmsg());
  /* Nothing else shows that the pretrained weights were loaded. */
  cairn_env_log(r->opts ? r->opts->env : NULL, CAIRN_LOG_INFO,
                "%s: Restored %zu variable%s from %s (%zu of the op's %zu left out by its restore options; the "
                "other variables keep their values)",
                r->name, restored, restored == 1 ? "" : "s", src, n - restored, n);
  return CAIRN_OK;
}

static char *dup_str(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

cairn_status cairn_op_new_restore(const char *name, const char *path, cairn_var *const *vars, size_t n,
                                  const cairn_restore_options *opts, const cairn_restore_report **report,
                                  cairn_op **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "op_new_restore: out is NULL");
  *out = NULL;
  if (report) *report = NULL;
  if (!path) return cairn__fail(CAIRN_E_NULL, "op_new_restore: path is NULL");
  if (!name) name = "restore";
  restore_op *r = calloc(1, sizeof *r);
  if (!r) return cairn__fail(CAIRN_E_NOMEM, "op_new_restore: out of memory");
  r->opts = opts;
  r->report_out = report;
  cairn_status st = CAIRN_OK;
  if (!(r->path = dup_str(path)) || !(r->name = dup_str(name)))
    st = cairn__fail(CAIRN_E_NOMEM, "op_new_restore: out of memory");
  if (!st) st = cairn_saver_new_list(vars, n, NULL, &r->saver);
  /* A pattern that names none of the op's variables is refused now, not
     at the first run: "dense/kernal" fails here, naming "dense/kernel". */
  if (!st) st = cairn__restore_check_names("op_new_restore", r->saver, opts);
  if (!st) st = cairn_op_new(r->name, restore_fn, r, restore_op_free, out);
  if (st) {
    r->report_out = NULL; /* *report stays NULL */
    restore_op_free(r);
  }
  return st;
}

cairn_status cairn_op_init_fn(cairn_scaffold *sc, cairn_session *s, void *op) {
  (void)sc;
  cairn_op *o = op;
  cairn_run_args a = cairn_run_args_one(&o);
  return cairn_session_run(s, &a);
}
