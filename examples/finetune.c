#define _POSIX_C_SOURCE 200809L
/* finetune: the four ways to start a training run from a pretrained
 * checkpoint — restore some variables, initialize the rest — each in its
 * shortest correct form. The README's "Fine-tuning" section shows these
 * same lines, and tests/readme-finetune.sh checks that they are here,
 * verbatim, and runs every method (start, restart, a misspelled pattern).
 *
 *   finetune pretrain --dir DIR
 *       writes DIR/model.ckpt-100: dense/kernel, dense/bias, their Adam
 *       slots, a 10-class head/kernel and global_step 100.
 *   finetune warm_start|init_fn|local_init_op|restore --from P --dir DIR
 *            [--steps N] [--typo]
 *       a new model (the dense layer as before, a 5-class head) restores
 *       the dense layer from P (a file or a directory) when DIR holds no checkpoint yet,
 *       initializes the rest, and trains to global step N (default 20)
 *       saving into DIR; run again, it resumes DIR's own checkpoint.
 *       --typo restores "dense/kernal" instead: every method refuses it.
 *
 * The "training" adds 0.001 to every trainable weight per step (a
 * stand-in for an optimizer: what matters here is where values come
 * from). Exit status: 0 success, 1 a cairn error, 2 usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cairn.h>

#define PROG "finetune"

static int fail(const char *what, cairn_status st, const char *detail) {
  if (!detail || !*detail) detail = cairn_errmsg();
  fprintf(stderr, PROG ": %s: %s: %s\n", what, cairn_status_str(st), detail);
  return 1;
}

/* ---- the model ------------------------------------------------------------------------------ */

typedef struct model {
  cairn_registry *reg;
  cairn_var *kernel, *bias, *adam, *head, *gs;
} model;

static cairn_status var(cairn_registry *r, const char *name, int64_t rows, int64_t cols, double init, unsigned coll,
                        cairn_var **out) {
  int64_t shape[2] = {rows, cols};
  return cairn_var_new(r, name, CAIRN_DTYPE_F32, cols ? 2 : 1, shape, cairn_init_constant(init), coll, out);
}

/* dense (4, 3) + bias (3) and their Adam slots, head (3, classes). */
static cairn_status model_new(model *m, int64_t classes, double scale) {
  memset(m, 0, sizeof *m);
  cairn_var *slot;
  cairn_status st = cairn_registry_new(1, &m->reg);
  if (!st) st = var(m->reg, "dense/kernel", 4, 3, 1.0 * scale, CAIRN_COLL_MODEL, &m->kernel);
  if (!st) st = var(m->reg, "dense/bias", 3, 0, 2.0 * scale, CAIRN_COLL_MODEL, &m->bias);
  if (!st) st = var(m->reg, "dense/kernel/Adam", 4, 3, 0.5 * scale, CAIRN_COLL_GLOBAL, &m->adam);
  if (!st) st = var(m->reg, "dense/bias/Adam", 3, 0, 0.5 * scale, CAIRN_COLL_GLOBAL, &slot);
  if (!st) st = var(m->reg, "head/kernel", 3, classes, 3.0 * scale, CAIRN_COLL_MODEL, &m->head);
  if (!st) st = cairn_registry_global_step(m->reg, &m->gs);
  return st;
}

static float first(const cairn_var *v) { return ((const float *)cairn_var_tensor(v)->data)[0]; }
static int64_t step_of(const cairn_var *gs) { return *(const int64_t *)cairn_var_tensor(gs)->data; }

static cairn_status train_step(cairn_session *s, void *user) {
  model *m = user;
  cairn_var *w[3] = {m->kernel, m->bias, m->head};
  for (int i = 0; i < 3; i++) {
    cairn_tensor *t = cairn_var_tensor(w[i]);
    float *d = t->data;
    for (size_t k = 0; k < cairn_tensor_nbytes(t) / sizeof *d; k++) d[k] += 0.001f;
  }
  ++*(int64_t *)cairn_var_tensor(m->gs)->data;
  (void)s;
  return CAIRN_OK;
}

/* ---- pretrain -------------------------------------------------------------------------------- */

static int pretrain(const char *dir) {
  model m;
  cairn_saver *sv = NULL;
  char prefix[4096], path[4096];
  mkdir(dir, 0777); /* the Saver creates no directory, as TF's */
  cairn_status st = model_new(&m, 10, 10.0); /* dense/kernel 10, bias 20, slots 5, head 30 */
  if (!st) st = cairn_registry_initialize_collection(m.reg, CAIRN_COLL_GLOBAL);
  if (!st) {
    *(int64_t *)cairn_var_tensor(m.gs)->data = 100;
    st = cairn_saver_new(m.reg, NULL, &sv);
  }
  snprintf(prefix, sizeof prefix, "%s/model.ckpt", dir);
  if (!st) st = cairn_saver_save(sv, prefix, 100, path, sizeof path);
  cairn_saver_free(sv);
  cairn_registry_free(m.reg);
  if (st) return fail("pretrain", st, NULL);
  printf("pretrained: %s\n", path);
  return 0;
}

/* ---- the four methods --------------------------------------------------------------------------
 * Each fills the Scaffold's options (and, for restore, the MTS's
 * checkpoint_filename_with_path); what they own is freed by main. */

typedef struct setup {
  cairn_restore_options ro;
  cairn_op *op, *local;
  const char *restore_file; /* the MTS's checkpoint_filename_with_path */
} setup;

static const char *const layer_ok[] = {"dense/*"};
static const char *const layer_typo[] = {"dense/kernal", "dense/bias"};

static cairn_status method_warm_start(model *m, setup *u, const char *from, const char *const *layer, size_t nl,
                                      cairn_scaffold_options *so) {
  (void)m;
  /* README: warm_start */
  cairn_restore_options ro = cairn_restore_options_default();
  ro.include = layer;                    /* "dense/" and a star: the layer */
  ro.n_include = nl;
  ro.collections = CAIRN_COLL_TRAINABLE; /* the weights, not their Adam slots */
  u->ro = ro;                            /* the options must outlive the scaffold */
  so->warm_start_path = from;            /* a checkpoint file or a directory */
  so->warm_start = &u->ro;
  /* end */
  return CAIRN_OK;
}

static cairn_status method_init_fn(model *m, setup *u, const char *from, const char *const *layer, size_t nl,
                                   cairn_scaffold_options *so) {
  /* README: init_fn */
  cairn_var *vars[16];
  size_t n;
  cairn_status st = cairn_registry_list_vars_checked(m->reg, CAIRN_COLL_TRAINABLE, layer, nl, NULL, 0, vars, 16,
                                                     &n, NULL);
  if (!st) st = cairn_op_new_restore("warm_start", from, vars, n, NULL, NULL, &u->op);
  so->init_fn = cairn_op_init_fn; /* runs only when DIR holds no checkpoint */
  so->init_fn_user = u->op;
  /* end */
  return st;
}

static cairn_status method_local_init_op(model *m, setup *u, const char *from, const char *const *layer, size_t nl,
                                         cairn_scaffold_options *so, const char *dir) {
  /* README: local_init_op */
  /* TF's recipe: local_init_op runs after every restore, so it may load the
     pretrained weights only into the first session of DIR. */
  char own[4096];
  if (cairn_latest_checkpoint(dir, own, sizeof own) == CAIRN_OK) return CAIRN_OK; /* resume DIR's own */
  cairn_var *vars[16];
  size_t n;
  cairn_status st = cairn_registry_list_vars_checked(m->reg, CAIRN_COLL_TRAINABLE, layer, nl, NULL, 0, vars, 16,
                                                     &n, NULL);
  if (!st) st = cairn_op_new_restore("load_pretrained", from, vars, n, NULL, NULL, &u->local);
  so->local_init_op = u->local; /* after init_op has initialized everything */
  /* end */
  return st;
}

static cairn_status method_restore(model *m, setup *u, const char *from, const char *const *layer, size_t nl,
                                   cairn_scaffold_options *so) {
  (void)m;
  /* README: restore */
  cairn_restore_options ro = cairn_restore_options_default();
  ro.include = layer;                    /* "dense/" and a star: the layer */
  ro.n_include = nl;
  ro.collections = CAIRN_COLL_TRAINABLE;
  u->ro = ro;
  so->restore = &u->ro;    /* restore these from the file, initialize the rest */
  u->restore_file = from;  /* the MTS's checkpoint_filename_with_path: used only
                              while checkpoint_dir holds no checkpoint */
  /* end */
  return CAIRN_OK;
}

/* ---- the run ----------------------------------------------------------------------------------- */

static int finetune(const char *method, const char *from, const char *dir, int64_t steps, int typo) {
  model m;
  setup u;
  memset(&u, 0, sizeof u);
  cairn_scaffold *sc = NULL;
  cairn_op *train = NULL;
  cairn_hook *stop = NULL;
  cairn_monitored_session *ms = NULL;
  const char *const *layer = typo ? layer_typo : layer_ok;
  size_t nl = typo ? 2 : 1;
  int ret = 1;
  cairn_status st = model_new(&m, 5, 1.0);
  cairn_scaffold_options so = cairn_scaffold_options_default();
  if (st) return fail("model", st, NULL);
  if (strcmp(method, "warm_start") == 0) st = method_warm_start(&m, &u, from, layer, nl, &so);
  else if (strcmp(method, "init_fn") == 0) st = method_init_fn(&m, &u, from, layer, nl, &so);
  else if (strcmp(method, "local_init_op") == 0) st = method_local_init_op(&m, &u, from, layer, nl, &so, dir);
  else st = method_restore(&m, &u, from, layer, nl, &so);
  if (st) {
    ret = fail(method, st, NULL);
    goto out;
  }
  if ((st = cairn_scaffold_new(m.reg, &so, &sc)) || (st = cairn_op_new("train", train_step, &m, NULL, &train)) ||
      (st = cairn_hook_new_stop_at_step(steps, NULL, &stop))) {
    ret = fail("setup", st, NULL);
    goto out;
  }
  cairn_monitored_training_session_options o = cairn_monitored_training_session_options_default();
  o.registry = m.reg;
  o.scaffold = sc;
  o.checkpoint_dir = dir;
  o.checkpoint_filename_with_path = u.restore_file;
  o.save_checkpoint_steps = 10;
  o.log_step_count_steps = 0;
  o.hooks = &stop;
  o.n_hooks = 1;
  if ((st = cairn_monitored_training_session_new(&o, &ms))) {
    ret = fail("session", st, NULL);
    goto out;
  }
  printf("%s: start at step %lld: dense/kernel %g dense/bias %g dense/kernel/Adam %g head/kernel %g\n", method,
         (long long)step_of(m.gs), first(m.kernel), first(m.bias),
         first(m.adam), first(m.head));
  cairn_run_args a = cairn_run_args_one(&train);
  while (!st && !cairn_monitored_session_should_stop(ms)) st = cairn_monitored_session_run(ms, &a);
  st = cairn_monitored_session_close_with(ms, st);
  if (st) {
    ret = fail("training", st, cairn_monitored_session_errmsg(ms));
    goto out;
  }
  printf("%s: done at step %lld\n", method, (long long)step_of(m.gs));
  ret = 0;
out:
  cairn_monitored_session_free(ms);
  cairn_hook_free(stop);
  cairn_op_free(train);
  cairn_scaffold_free(sc);
  cairn_op_free(u.op);
  cairn_op_free(u.local);
  cairn_registry_free(m.reg);
  return ret;
}

int main(int argc, char **argv) {
  const char *from = NULL, *dir = NULL;
  int64_t steps = 20;
  int typo = 0;
  if (argc < 2) return 2;
  for (int i = 2; i < argc; i++) {
    if (strcmp(argv[i], "--typo") == 0) typo = 1;
    else if (i + 1 < argc && strcmp(argv[i], "--from") == 0) from = argv[++i];
    else if (i + 1 < argc && strcmp(argv[i], "--dir") == 0) dir = argv[++i];
    else if (i + 1 < argc && strcmp(argv[i], "--steps") == 0) steps = atoll(argv[++i]);
    else return fprintf(stderr, PROG ": unknown argument '%s'\n", argv[i]), 2;
  }
  if (!dir) return fprintf(stderr, PROG ": --dir is required\n"), 2;
  if (strcmp(argv[1], "pretrain") == 0) return pretrain(dir);
  const char *methods[] = {"warm_start", "init_fn", "local_init_op", "restore"};
  for (int i = 0; i < 4; i++)
    if (strcmp(argv[1], methods[i]) == 0) {
      if (!from) return fprintf(stderr, PROG ": --from is required\n"), 2;
      return finetune(argv[1], from, dir, steps, typo);
    }
  fprintf(stderr, PROG ": unknown mode '%s'\n", argv[1]);
  return 2;
}
