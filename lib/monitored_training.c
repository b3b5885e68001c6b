/* MonitoredTrainingSession: TF's factory function
 * (doc/session-semantics.md, "MonitoredTrainingSession") — a MonitoredSession
 * with the chief's or the worker's session creator and the standard hooks
 * in TF's order. */
#include "internal.h"
#include "restore_impl.h"

#include <stdlib.h>
#include <string.h>

#include "cairn/monitored.h"
#include "monitored_impl.h"
#include "table.h"

cairn_monitored_training_session_options cairn_monitored_training_session_options_default(void) {
  return (cairn_monitored_training_session_options){
      .is_chief = 1,
      .save_checkpoint_secs = CAIRN_USE_DEFAULT,
      .save_checkpoint_steps = CAIRN_USE_DEFAULT,
      .save_summaries_steps = CAIRN_USE_DEFAULT,
      .save_summaries_secs = CAIRN_USE_DEFAULT,
      .stop_grace_period_secs = 120.0,
      .log_step_count_steps = 100,
      .max_wait_secs = 7200.0,
      .max_recoveries = cairn_monitored_session_options_default().max_recoveries,
      .sm = cairn_session_manager_options_default()};
}

/* ---- a restart resumes the run's own progress -------------------------------------------
 * checkpoint_filename_with_path is cairn's extension of the MTS options
 * (TF's MonitoredTrainingSession has none: its chief restores
 * checkpoint_dir's newest, monitored_session.py). Given with
 * checkpoint_dir, the pretrained file is what a fine-tuning run starts
 * from, and the run saves into checkpoint_dir. Restoring that file again
 * at every start would throw the run's progress away (global_step back to
 * 0, the pretrained layers re-applied, the new ones re-initialized), so
 * each session creation looks at checkpoint_dir first: when it holds a
 * checkpoint, the run resumes it; the file is restored only while it
 * holds none. The chief creators underneath keep TF's rules (both paths
 * at once is an error there). */

typedef struct resume_creator {
  cairn_scaffold *scaffold;         /* borrowed */
  cairn_saver *saver;               /* the CheckpointSaverHook's, if given: it wrote checkpoint_dir */
  cairn_session_manager_options sm_opts;
  cairn_session_manager *sm;        /* built on first use, as the chief creator's */
  cairn_session_creator *given;     /* ChiefSessionCreator(checkpoint_filename_with_path) */
  char *dir, *file;
  const cairn_env *env;
} resume_creator;

static cairn_status resume_create(void *self, cairn_session **out) {
  resume_creator *c = self;
  char path[4096];
  if (cairn__checkpoint_in_dir(c->dir, path, sizeof path, NULL) != CAIRN_OK) {
    cairn_env_log(c->env, CAIRN_LOG_INFO,
                  "checkpoint_dir '%s' holds no checkpoint of this run yet: restoring checkpoint_filename_with_path "
                  "'%s'",
                  c->dir, c->file);
    return cairn_session_creator_create(c->given, out);
  }
  cairn_env_log(c->env, CAIRN_LOG_INFO,
                "checkpoint_dir '%s' holds this run's checkpoint %s: resuming it, not checkpoint_filename_with_path "
                "'%s' (restored only while checkpoint_dir holds no checkpoint)",
                c->dir, path, c->file);
  /* What ChiefSessionCreator(checkpoint_dir) does, except that the
     Scaffold's `restore` options, which say how to read the pretrained
     file, do not apply: the run's own checkpoint holds the whole save set,
     and a partial restore of it would re-initialize what it leaves out
     (global_step, the new layers) at every restart. */
  cairn_status st = cairn_scaffold_finalize(c->scaffold);
  if (!st && !c->sm) st = cairn_session_manager_new_from_scaffold(c->scaffold, &c->sm_opts, &c->sm);
  if (st) return st;
  cairn_prepare_options po = cairn_prepare_options_from_scaffold(c->scaffold, c->dir, NULL);
  po.restore = NULL;
  if (c->saver) po.saver = c->saver;
  return cairn_session_manager_prepare_session(c->sm, &po, out);
}

static void resume_destroy(void *self) {
  resume_creator *c = self;
  if (!c) return;
  cairn_session_manager_free(c->sm);
  cairn_session_creator_free(c->given);
  free(c->dir);
  free(c->file);
  free(c);
}

static const cairn_session_creator_vtable resume_vt = {.create_session = resume_create, .destroy = resume_destroy};

static cairn_status resume_creator_new(const cairn_chief_session_creator_options *co, const char *dir,
                                       const char *file, cairn_saver *saver, const cairn_env *env,
                                       cairn_session_creator **out) {
  resume_creator *c = calloc(1, sizeof *c);
  if (!c || !(c->dir = cairn__strdup(dir)) || !(c->file = cairn__strdup(file))) {
    resume_destroy(c);
    return cairn__fail(CAIRN_E_NOMEM, "monitored_training_session_new: out of memory");
  }
  c->scaffold = co->scaffold;
  c->saver = saver;
  c->sm_opts = co->sm;
  c->env = env;
  cairn_chief_session_creator_options b = *co;
  b.checkpoint_dir = NULL;
  b.checkpoint_filename_with_path = file;
  cairn_status st = cairn_chief_session_creator_new(&b, &c->given);
  if (!st) st = cairn_session_creator_new(&resume_vt, c, out);
  if (st) resume_destroy(c);
  return st;
}

static int is_default_d(double v) { return v == (double)CAIRN_USE_DEFAULT; }
static int is_default_i(int64_t v) { return v == CAIRN_USE_DEFAULT; }

/* USE_DEFAULT resolution, exactly as TF: both unset → the default of the
 * kind (dflt_steps, dflt_secs); one unset → None (0). */
static void resolve_default(int64_t *steps, double *secs, int64_t dflt_steps, double dflt_secs) {
  if (is_default_i(*steps) && is_default_d(*secs)) {
    *steps = dflt_steps;
    *secs = dflt_secs;
  } else if (is_default_d(*secs)) {
    *secs = 0;
  } else if (is_default_i(*steps)) {
    *steps = 0;
  }
}

/* The arguments: every given count has its array; the registry is the
 * options' or the Scaffold's. */
static cairn_status check_arguments(const cairn_monitored_training_session_options *o, cairn_registry **reg) {
  if (!o) return cairn__fail(CAIRN_E_NULL, "monitored_training_session_new: options are NULL");
  cairn_registry *r = o->registry ? o->registry : o->scaffold ? cairn_scaffold_registry(o->scaffold) : NULL;
  if (!r) return cairn__fail(CAIRN_E_NULL, "monitored_training_session_new: registry is NULL");
  if ((o->n_hooks && !o->hooks) || (o->n_chief_only_hooks && !o->chief_only_hooks))
    return cairn__fail(CAIRN_E_NULL, "monitored_training_session_new: %s is NULL",
                       o->n_hooks && !o->hooks ? "hooks" : "chief_only_hooks");
  if (o->n_checkpoint_listeners && !o->checkpoint_listeners)
    return cairn__fail(CAIRN_E_NULL, "monitored_training_session_new: checkpoint_listeners is NULL");
  if (cairn__env_check(o->env, "monitored_training_session_new") != CAIRN_OK) return CAIRN_E_INVALID;
  *reg = r;
  return CAIRN_OK;
}

/* A worker: waits for the chief's model; only the user's hooks. */
static cairn_status worker_creator(const cairn_monitored_training_session_options *o, cairn_registry *r,
                                   cairn_scaffold *sc, const cairn_session_manager_options *sm,
                                   cairn__monitored_config *cfg) {
  /* Under MPI a TF-style worker cannot work: the global variables are
     not shared (no parameter server), so it would wait in
     wait_for_session for a chief that never initializes its copy, while
     rank 0 waits in the broadcast until the collective's deadline and
     then blames a rank that "stopped answering". Refuse before anything
     starts. */
  for (size_t i = 0; i < o->n_hooks; i++) {
    const char *name = cairn_hook_name(o->hooks[i]);
    if (name && strcmp(name, "BroadcastGlobalVariablesHook") == 0)
      return cairn__fail(CAIRN_E_INVALID,
                         "monitored_training_session_new: is_chief = 0 with BroadcastGlobalVariablesHook: in the "
                         "data-parallel recipe every rank is a chief (is_chief = 1 on every rank; checkpoint_dir "
                         "only on rank 0, cairn_mpi_checkpoint_dir; the hook then copies rank 0's variables to the "
                         "others). A non-chief would wait for a model no chief initializes for it, while rank 0 "
                         "waits in the broadcast (doc/session-semantics.md, \"Chief, workers and MPI ranks\")");
  }
  cairn_worker_session_creator_options wo = cairn_worker_session_creator_options_default();
  wo.registry = r;
  wo.scaffold = sc;
  wo.max_wait_secs = o->max_wait_secs;
  wo.sm = *sm;
  cairn_status st = cairn_worker_session_creator_new(&wo, &cfg->creator);
  if (st != CAIRN_OK) return st;
  cfg->own_creator = 1;
  cfg->hooks = o->hooks;
  cfg->n_hooks = o->n_hooks;
  return CAIRN_OK;
}

/* The chief: restores or initializes (resuming checkpoint_dir before
 * checkpoint_filename_with_path, above). */
static cairn_status chief_creator(const cairn_monitored_training_session_options *o, cairn_registry *r,
                                  cairn_scaffold *sc, const cairn_session_manager_options *sm,
                                  cairn__monitored_config *cfg) {
  cairn_chief_session_creator_options co = cairn_chief_session_creator_options_default();
  co.registry = r;
  co.scaffold = sc;
  co.checkpoint_dir = o->checkpoint_filename_with_path ? NULL : o->checkpoint_dir;
  co.checkpoint_filename_with_path = o->checkpoint_filename_with_path;
  co.sm = *sm;
  cairn_status st;
  if (o->checkpoint_filename_with_path && o->checkpoint_dir)
    st = resume_creator_new(&co, o->checkpoint_dir, o->checkpoint_filename_with_path, o->checkpoint_saver, sm->env,
                            &cfg->creator);
  else
    st = cairn_chief_session_creator_new(&co, &cfg->creator);
  if (st == CAIRN_OK) cfg->own_creator = 1;
  return st;
}

/* Step 2 of the chief's hooks: step counter and summaries, when there is
 * somewhere to write. */
static cairn_status summary_hooks(const cairn_monitored_training_session_options *o, cairn_scaffold *sc,
                                  cairn__monitored_config *cfg, cairn_hook **all, size_t *n) {
  const char *summary_dir = o->summary_dir ? o->summary_dir : o->checkpoint_dir;
  if (!summary_dir) return CAIRN_OK;
  int64_t sum_steps = o->save_summaries_steps;
  double sum_secs = o->save_summaries_secs;
  resolve_default(&sum_steps, &sum_secs, 100, 0);
  cairn_status st;
  cairn_hook *h = NULL;
  if (o->log_step_count_steps > 0) {
    cairn_step_counter_hook_options co = cairn_step_counter_hook_options_default();
    co.every_n_steps = o->log_step_count_steps;
    co.summary_writer = o->summary_writer;
    co.env = o->env;
    if ((st = cairn_hook_new_step_counter(&co, &h)) != CAIRN_OK) return st;
    all[(*n)++] = cfg->owned_hooks[cfg->n_owned_hooks++] = h;
  }
  if (sum_steps > 0 || sum_secs > 0) {
    cairn_summary_saver_hook_options so;
    memset(&so, 0, sizeof so);
    so.save_steps = sum_steps;
    so.save_secs = sum_secs;
    so.writer = o->summary_writer;
    so.scaffold = sc;
    so.env = o->env;
    if ((st = cairn_hook_new_summary_saver(&so, &h)) != CAIRN_OK) return st;
    all[(*n)++] = cfg->owned_hooks[cfg->n_owned_hooks++] = h;
  }
  return CAIRN_OK;
}

/* Step 3 of the chief's hooks: checkpoints (the scaffold's saver). Both
 * secs and steps set: the hook's timer refuses, as TF's does. */
static cairn_status checkpoint_hook(const cairn_monitored_training_session_options *o, cairn_scaffold *sc,
                                    cairn__monitored_config *cfg, cairn_hook **all, size_t *n) {
  int64_t ck_steps = o->save_checkpoint_steps;
  double ck_secs = o->save_checkpoint_secs;
  resolve_default(&ck_steps, &ck_secs, 0, 600);
  if (!o->checkpoint_dir || !(ck_secs > 0 || ck_steps > 0)) return CAIRN_OK;
  cairn_checkpoint_saver_hook_options ko;
  memset(&ko, 0, sizeof ko);
  ko.save_secs = ck_secs;
  ko.save_steps = ck_steps;
  ko.saver = o->checkpoint_saver;
  ko.scaffold = o->checkpoint_saver ? NULL : sc;
  ko.summary_writer = o->summary_writer;
  ko.env = o->env;
  ko.listeners = o->checkpoint_listeners;
  ko.n_listeners = o->n_checkpoint_listeners;
  ko.async = o->async_checkpoints;
  ko.async_skip_busy = o->async_checkpoints_skip_busy;
  cairn_hook *h = NULL;
  cairn_status st = cairn_hook_new_checkpoint_saver(o->checkpoint_dir, &ko, &h);
  if (st != CAIRN_OK) return st;
  all[(*n)++] = cfg->owned_hooks[cfg->n_owned_hooks++] = h;
  return CAIRN_OK;
}

/* The chief's hooks in TF's order: 1. chief-only, 2. step counter and
 * summaries, 3. checkpoints, 4. the user's. `all` is the caller's to free. */
static cairn_status chief_hooks(const cairn_monitored_training_session_options *o, cairn_scaffold *sc,
                                cairn__monitored_config *cfg, cairn_hook ***all) {
  size_t cap = o->n_chief_only_hooks + 3 + o->n_hooks, n = 0;
  *all = calloc(cap, sizeof **all);
  cfg->owned_hooks = calloc(3, sizeof *cfg->owned_hooks);
  if (!*all || !cfg->owned_hooks) return cairn__fail(CAIRN_E_NOMEM, "monitored_training_session_new: out of memory");
  for (size_t i = 0; i < o->n_chief_only_hooks; i++) (*all)[n++] = o->chief_only_hooks[i];
  cairn_status st = summary_hooks(o, sc, cfg, *all, &n);
  if (!st) st = checkpoint_hook(o, sc, cfg, *all, &n);
  if (st) return st;
  for (size_t i = 0; i < o->n_hooks; i++) (*all)[n++] = o->hooks[i];
  cfg->hooks = *all;
  cfg->n_hooks = n;
  return CAIRN_OK;
}

cairn_status cairn_monitored_training_session_new(const cairn_monitored_training_session_options *o,
                                                  cairn_monitored_session **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "monitored_training_session_new: out is NULL");
  *out = NULL;
  cairn_registry *r = NULL;
  cairn_status st = check_arguments(o, &r);
  if (st) return st;

  cairn__monitored_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.registry = r;
  CAIRN__MONITORED_CFG_RECOVERING(cfg, o);
  cairn_scaffold *sc = o->scaffold;
  if (!sc) {
    cairn_scaffold_options so;
    memset(&so, 0, sizeof so);
    if ((st = cairn_scaffold_new(r, &so, &sc)) != CAIRN_OK) return st;
    cfg.owned_scaffold = sc;
  }
  cairn_session_manager_options sm = o->sm;
  if (!sm.env) sm.env = o->env;

  cairn_hook **all = NULL;
  if (!o->is_chief) st = worker_creator(o, r, sc, &sm, &cfg);
  else if (!(st = chief_creator(o, r, sc, &sm, &cfg))) st = chief_hooks(o, sc, &cfg, &all);
  if (st == CAIRN_OK) {
    st = cairn__monitored_session_new(&cfg, out); /* takes the owned things in all cases */
    free(all);
    return st;
  }
  free(all);
  for (size_t i = 0; i < cfg.n_owned_hooks; i++) cairn_hook_free(cfg.owned_hooks[i]);
  free(cfg.owned_hooks);
  if (cfg.own_creator) cairn_session_creator_free(cfg.creator);
  cairn_scaffold_free(cfg.owned_scaffold);
  return st;
}
