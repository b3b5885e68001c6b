/* Session creators (cairn/monitored.h, "Session creators"): the creator
 * object over a function table, and TF's ChiefSessionCreator and
 * WorkerSessionCreator, which share one implementation. */
#include "internal.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cairn/monitored.h"
#include "monitored_impl.h"
#include "table.h"

struct cairn_session_creator {
  const cairn_session_creator_vtable *vt; /* &table */
  cairn_session_creator_vtable table;     /* the caller's, members past its struct_size NULL */
  void *self;
  cairn_registry *registry;
};

cairn_status cairn_session_creator_new(const cairn_session_creator_vtable *vt, void *self,
                                       cairn_session_creator **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "session_creator_new: out is NULL");
  *out = NULL;
  if (!vt || !vt->create_session)
    return cairn__fail(CAIRN_E_NULL, "session_creator_new: %s is NULL", vt ? "vt->create_session" : "vt");
  cairn_session_creator_vtable table;
  cairn_status st = cairn__table_copy(&table, sizeof table, vt, offsetof(cairn_session_creator_vtable, struct_size),
                                      "session_creator_new", "vt", "cairn_session_creator_vtable", NULL);
  if (st != CAIRN_OK) return st;
  cairn_session_creator *c = calloc(1, sizeof *c);
  if (!c) return cairn__fail(CAIRN_E_NOMEM, "session_creator_new: out of memory");
  c->table = table;
  c->vt = &c->table;
  c->self = self;
  *out = c;
  return CAIRN_OK;
}

cairn_status cairn_session_creator_create(cairn_session_creator *c, cairn_session **out) {
  if (!c || !out) return cairn__fail(CAIRN_E_NULL, "session_creator_create: %s is NULL", c ? "out" : "c");
  *out = NULL;
  cairn_status st = c->vt->create_session(c->self, out);
  if (st == CAIRN_OK && !*out)
    return cairn__fail(CAIRN_E_STATE, "session_creator_create: the creator returned no session");
  return st;
}

void cairn_session_creator_free(cairn_session_creator *c) {
  if (!c) return;
  if (c->vt->destroy) c->vt->destroy(c->self);
  free(c);
}

cairn_registry *cairn__session_creator_registry(const cairn_session_creator *c) { return c ? c->registry : NULL; }

/* The chief and the worker creators share one implementation. */
typedef struct std_creator {
  int worker;
  cairn_scaffold *scaffold;
  int own_scaffold;
  char *checkpoint_dir;
  char *checkpoint_file;
  double max_wait_secs;
  cairn_session_manager_options sm_opts;
  cairn_session_manager *sm; /* built on first use (TF's _get_session_manager) */
} std_creator;

static cairn_status std_create(void *self, cairn_session **out) {
  std_creator *c = self;
  cairn_status st = cairn_scaffold_finalize(c->scaffold);
  if (st != CAIRN_OK) return st;
  if (!c->sm) {
    st = cairn_session_manager_new_from_scaffold(c->scaffold, &c->sm_opts, &c->sm);
    if (st != CAIRN_OK) return st;
  }
  if (c->worker) return cairn_session_manager_wait_for_session(c->sm, c->max_wait_secs, out);
  cairn_prepare_options po = cairn_prepare_options_from_scaffold(c->scaffold, c->checkpoint_dir, c->checkpoint_file);
  return cairn_session_manager_prepare_session(c->sm, &po, out);
}

static void std_destroy(void *self) {
  std_creator *c = self;
  if (!c) return;
  cairn_session_manager_free(c->sm);
  if (c->own_scaffold) cairn_scaffold_free(c->scaffold);
  free(c->checkpoint_dir);
  free(c->checkpoint_file);
  free(c);
}

static const cairn_session_creator_vtable std_creator_vt = {.create_session = std_create, .destroy = std_destroy};

static cairn_status std_creator_new(const char *fn, int worker, cairn_registry *r, cairn_scaffold *sc,
                                    const char *dir, const char *file, double max_wait,
                                    const cairn_session_manager_options *smo, cairn_session_creator **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "%s: out is NULL", fn);
  *out = NULL;
  if (!r && !sc) return cairn__fail(CAIRN_E_NULL, "%s: registry and scaffold are both NULL", fn);
  if (sc && r && cairn_scaffold_registry(sc) != r)
    return cairn__fail(CAIRN_E_INVALID, "%s: the scaffold belongs to another registry", fn);
  std_creator *c = calloc(1, sizeof *c);
  if (!c) return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  c->worker = worker;
  c->max_wait_secs = max_wait;
  c->sm_opts = smo ? *smo : cairn_session_manager_options_default();
  cairn_status st = CAIRN_OK;
  if ((dir && !(c->checkpoint_dir = cairn__strdup(dir))) || (file && !(c->checkpoint_file = cairn__strdup(file)))) {
    st = cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  } else if (sc) {
    c->scaffold = sc;
  } else {
    cairn_scaffold_options so;
    memset(&so, 0, sizeof so);
    st = cairn_scaffold_new(r, &so, &c->scaffold);
    c->own_scaffold = (st == CAIRN_OK);
  }
  cairn_session_creator *cr = NULL;
  if (st == CAIRN_OK) st = cairn_session_creator_new(&std_creator_vt, c, &cr);
  if (st != CAIRN_OK) {
    std_destroy(c);
    return st;
  }
  cr->registry = cairn_scaffold_registry(c->scaffold);
  *out = cr;
  return CAIRN_OK;
}

cairn_chief_session_creator_options cairn_chief_session_creator_options_default(void) {
  return (cairn_chief_session_creator_options){.sm = cairn_session_manager_options_default()};
}

cairn_worker_session_creator_options cairn_worker_session_creator_options_default(void) {
  return (cairn_worker_session_creator_options){.max_wait_secs = 1800.0, .sm = cairn_session_manager_options_default()};
}

cairn_status cairn_chief_session_creator_new(const cairn_chief_session_creator_options *o,
                                             cairn_session_creator **out) {
  if (!o) return cairn__fail(CAIRN_E_NULL, "chief_session_creator_new: options are NULL");
  return std_creator_new("chief_session_creator_new", 0, o->registry, o->scaffold, o->checkpoint_dir,
                         o->checkpoint_filename_with_path, 0, &o->sm, out);
}

cairn_status cairn_worker_session_creator_new(const cairn_worker_session_creator_options *o,
                                              cairn_session_creator **out) {
  if (!o) return cairn__fail(CAIRN_E_NULL, "worker_session_creator_new: options are NULL");
  return std_creator_new("worker_session_creator_new", 1, o->registry, o->scaffold, NULL, NULL, o->max_wait_secs,
                         &o->sm, out);
}
