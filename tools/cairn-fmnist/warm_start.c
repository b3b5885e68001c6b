/* cairn-fmnist/warm_start.c — the three warm-start recipes, as TF 1.x users
 * write them: the hidden layers (dense/..., dense_1/..., every layer but
 * the last) come from CKPT; the new output layer, the Adam slots and
 * global_step are initialized. Used for the first session of DIR only.
 *   init_fn        Scaffold init_fn: after init_op, a Saver of the hidden
 *                  layers restores them from CKPT.
 *   local_init_op  The session manager restores CKPT with a Saver of the
 *                  hidden layers only; ready_for_local_init_op asks for
 *                  those; local_init_op initializes everything else.
 *   restore-option cairn's Scaffold `restore` option: a partial restore of
 *                  CKPT (include = the hidden layers), the rest initialized.
 */
#define _POSIX_C_SOURCE 200809L

#include "warm_start.h"

#include <string.h>
#include <sys/stat.h>

int warm_source(flags *f, char *src, size_t len) {
  /* The source may be a checkpoint file or a directory (its newest). */
  struct stat sb;
  cairn_status st;
  if (stat(f->from, &sb) == 0 && S_ISDIR(sb.st_mode)) {
    if ((st = cairn_latest_checkpoint(f->from, src, len)) != CAIRN_OK)
      return report_error("no checkpoint to warm-start from", st, NULL);
  } else if ((size_t)snprintf(src, len, "%s", f->from) >= len) {
    return usage("--from is too long");
  }
  return hidden_from_path(src, f);
}

/* TF's Scaffold(init_fn=lambda scaffold, sess:
   saver_of_hidden_layers.restore(sess, CKPT)): a restore op. */
static cairn_status recipe_init_fn(const char *src, warm *w, recipe *rc) {
  cairn_status st = cairn_op_new_restore("warm_start_hidden_layers", src, w->vars, w->n, NULL, NULL, &w->warm_op);
  if (st) return st;
  rc->so.init_fn = cairn_op_init_fn;
  rc->so.init_fn_user = w->warm_op;
  rc->so.init_fn_name = "warm_start_hidden_layers";
  return CAIRN_OK;
}

/* TF's recipe: Saver(hidden layers) restores CKPT; the model counts as
   ready for local init once those are set; local_init_op initializes the
   LOCAL variables and every GLOBAL variable the Saver does not hold. (Its
   caveat: local_init_op runs on every session creation, so this form is
   only used for the first session of DIR.) */
static cairn_status recipe_local_init_op(const flags *f, model *m, const char *src, warm *w, recipe *rc) {
  cairn_saver_options so = cairn_saver_options_default();
  so.write.compress = f->compress;
  /* Every GLOBAL variable but the hidden layers (their names hold no glob
     characters: each excludes itself alone). */
  cairn_var *rest[256];
  size_t n_rest = 0;
  /* Checked, as every pattern list of a restore: the names come from the
     model itself, so one that matches nothing is a bug, reported. */
  cairn_status st =
      cairn_registry_list_vars_checked(m->reg, CAIRN_COLL_GLOBAL, NULL, 0, w->include, w->n, rest, 256, &n_rest, NULL);
  if (st != CAIRN_OK) return st;
  if (n_rest > 256) n_rest = 256;
  if ((st = cairn_saver_new_list(w->vars, w->n, &so, &w->partial)) != CAIRN_OK ||
      (st = cairn_saver_new(m->reg, &so, &w->full)) != CAIRN_OK ||
      (st = cairn_op_new_init("local_init", m->reg, CAIRN_COLL_LOCAL, &w->parts[0])) != CAIRN_OK ||
      (st = cairn_op_new_init_vars("init_new_variables", rest, n_rest, &w->parts[1])) != CAIRN_OK ||
      (st = cairn_op_new_group("local_init_and_new_variables", w->parts, 2, &w->local)) != CAIRN_OK ||
      (st = cairn_ready_op_new_uninitialized_vars("ready_for_local_init", w->vars, w->n, &w->rfl)) != CAIRN_OK)
    return st;
  rc->so.saver = w->partial;
  rc->so.local_init_op = w->local;
  rc->so.ready_for_local_init_op = w->rfl;
  rc->full_saver = w->full;
  rc->restore_file = src;
  return CAIRN_OK;
}

/* cairn's restore option: strict restore of the hidden layers only; every
   other GLOBAL variable is initialized. */
static void recipe_restore_option(const char *src, warm *w, recipe *rc) {
  memset(&w->ro, 0, sizeof w->ro);
  w->ro.include = w->include;
  w->ro.n_include = w->n;
  rc->so.restore = &w->ro;
  rc->restore_file = src;
}

int warm_recipe(const flags *f, model *m, const char *src, warm *w, recipe *rc) {
  rc->restore_file = NULL;
  w->n = 0;
  for (int i = 0; i < m->n_layers - 1; i++) {
    w->vars[w->n++] = cairn_mlp_kernel(m->mlp, i);
    w->vars[w->n++] = cairn_mlp_bias(m->mlp, i);
  }
  for (size_t i = 0; i < w->n; i++) w->include[i] = cairn_var_name(w->vars[i]);
  cairn_status st;
  if (strcmp(f->method, "init_fn") == 0) {
    if ((st = recipe_init_fn(src, w, rc)) != CAIRN_OK) return report_error("init_fn recipe", st, NULL);
  } else if (strcmp(f->method, "local_init_op") == 0) {
    if ((st = recipe_local_init_op(f, m, src, w, rc)) != CAIRN_OK) return report_error("local_init_op recipe", st, NULL);
  } else {
    recipe_restore_option(src, w, rc);
  }
  printf("warm start (%s): restoring", f->method);
  for (size_t i = 0; i < w->n; i++) printf(" %s", w->include[i]);
  printf(" from %s\n", src);
  return 0;
}

void warm_free(warm *w) {
  cairn_op_free(w->warm_op);
  cairn_op_free(w->local);
  cairn_op_free(w->parts[0]);
  cairn_op_free(w->parts[1]);
  cairn_ready_op_free(w->rfl);
  cairn_saver_free(w->partial);
  cairn_saver_free(w->full);
  memset(w, 0, sizeof *w);
}
