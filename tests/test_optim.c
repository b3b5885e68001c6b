/* Tests for cairn/optim.h: every optimizer against its published update rule
 * worked out here in double precision, slot names and collections,
 * global_step, clipping by global norm, thread-count independence, AVX2 vs
 * reference kernels, and bad input. */
#include "config.h"

#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef CAIRN_HAVE_OPENMP
#include <omp.h>
#endif

#include "cairn/optim.h"
#include "cairn/tensor.h"
#include "cairn/var.h"
#include "kernels/kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#define OK(expr) cr_assert_eq((expr), CAIRN_OK, "%s failed: %s", #expr, cairn_errmsg())

static float *vf(const cairn_var *v) { return cairn_tensor_f32(cairn_var_tensor(v)); }
static size_t vsize(const cairn_var *v) { return (size_t)cairn_var_tensor(v)->size; }

static cairn_var *find(cairn_registry *r, const char *name) {
  cairn_var *v = NULL;
  cr_assert_eq(cairn_registry_find(r, name, &v), CAIRN_OK, "'%s' not found: %s", name, cairn_errmsg());
  return v;
}

static int has_var(cairn_registry *r, const char *name) {
  cairn_var *v = NULL;
  return cairn_registry_find(r, name, &v) == CAIRN_OK;
}

/* |got − want| <= rtol·|want| (the values compared here stay away from 0). */
static void assert_rel(double got, double want, double rtol, const char *what, size_t j, int t) {
  cr_assert(fabs(got - want) <= rtol * fabs(want) + 1e-30,
            "%s[%zu] after step %d: got %.9g, want %.9g (rel err %.3g)", what, j, t, got, want,
            fabs(got - want) / fabs(want));
}

/* ---- a small model: (2,2), (3,) and (1000) variables ---- */

#define NV 3
static const char *const mnames[NV] = {"dense/kernel", "dense/bias", "big/w"};
static const int mrank[NV] = {2, 1, 1};
static const int64_t mshape[NV][2] = {{2, 2}, {3, 1}, {1000, 1}};

typedef struct model {
  cairn_registry *r;
  cairn_var *v[NV];
  cairn_tensor *g[NV];
} model;

/* Initial weights: |w| in [0.5, 0.9], mixed signs. */
static double w0(int k, size_t j) {
  double s = ((j * 7 + (size_t)k) % 3 == 0) ? -1.0 : 1.0;
  return s * (0.5 + 0.4 * (0.5 + 0.5 * sin(1.3 * (double)j + k)));
}

/* Gradient of step t: a fixed sign per element (so that accumulators do not
 * cancel and relative tolerances stay meaningful), a different magnitude in
 * [0.2, 0.9] every step. */
static float grad(int k, size_t j, int t) {
  float s = ((j * 5 + (size_t)k) % 2) ? 1.0f : -1.0f;
  return s * (float)(0.2 + 0.7 * (0.5 + 0.5 * sin(0.71 * (double)j + 1.9 * t + k)));
}

static void model_new(model *m) {
  memset(m, 0, sizeof *m);
  OK(cairn_registry_new(7, &m->r));
  for (int k = 0; k < NV; k++) {
    OK(cairn_var_new(m->r, mnames[k], CAIRN_DTYPE_F32, mrank[k], mshape[k], cairn_init_zeros(),
                        CAIRN_COLL_MODEL, &m->v[k]));
    OK(cairn_tensor_new(CAIRN_DTYPE_F32, mrank[k], mshape[k], &m->g[k]));
  }
}

/* Initializes every GLOBAL variable (weights and slots), then sets w0. */
static void model_init(model *m) {
  OK(cairn_registry_initialize_collection(m->r, CAIRN_COLL_GLOBAL));
  for (int k = 0; k < NV; k++)
    for (size_t j = 0; j < vsize(m->v[k]); j++) vf(m->v[k])[j] = (float)w0(k, j);
}

static void model_free(model *m) {
  for (int k = 0; k < NV; k++) cairn_tensor_free(m->g[k]);
  cairn_registry_free(m->r);
}

/* ---- the published rules in double ---- */

typedef struct ref_state {
  double *w[NV], *s0[NV], *s1[NV];
  size_t n[NV];
} ref_state;

static void ref_new(ref_state *s, const model *m, const cairn_optim_config *c) {
  for (int k = 0; k < NV; k++) {
    size_t n = vsize(m->v[k]);
    s->n[k] = n;
    s->w[k] = calloc(n, sizeof(double));
    s->s0[k] = calloc(n, sizeof(double));
    s->s1[k] = calloc(n, sizeof(double));
    cr_assert(s->w[k] && s->s0[k] && s->s1[k]);
    for (size_t j = 0; j < n; j++) {
      s->w[k][j] = (double)(float)w0(k, j);
      if (c->kind == CAIRN_OPTIM_RMSPROP) s->s0[k][j] = 1.0; /* TF 1.x: ms starts at ones */
      if (c->kind == CAIRN_OPTIM_ADAGRAD) s->s0[k][j] = (double)c->initial_accumulator;
    }
  }
}

static void ref_free(ref_state *s) {
  for (int k = 0; k < NV; k++) {
    free(s->w[k]);
    free(s->s0[k]);
    free(s->s1[k]);
  }
}

/* One step of the rule of c->kind in double. p1, p2 are β1^t, β2^t. The
 * hyper-parameters are the f32 values the library sees, widened. */
static void ref_step(ref_state *s, const cairn_optim_config *c, int t, double p1, double p2) {
  const double lr = c->learning_rate, mu = c->momentum, b1 = c->beta1, b2 = c->beta2;
  const double eps = c->epsilon, wd = c->weight_decay, rho = c->decay;
  for (int k = 0; k < NV; k++)
    for (size_t j = 0; j < s->n[k]; j++) {
      double g = grad(k, j, t), *w = &s->w[k][j], *a = &s->s0[k][j], *b = &s->s1[k][j];
      switch (c->kind) {
        case CAIRN_OPTIM_SGD:
          *w -= lr * g;
          break;
        case CAIRN_OPTIM_MOMENTUM:
          *a = mu * *a + g;
          *w -= c->nesterov ? lr * g + lr * mu * *a : lr * *a;
          break;
        case CAIRN_OPTIM_ADAM:
        case CAIRN_OPTIM_ADAMW: {
          *a = b1 * *a + (1 - b1) * g;
          *b = b2 * *b + (1 - b2) * g * g;
          double lr_t = lr * sqrt(1 - p2) / (1 - p1);
          double decay = c->kind == CAIRN_OPTIM_ADAMW ? wd * *w : 0.0;
          *w = *w - decay - lr_t * *a / (sqrt(*b) + eps);
          break;
        }
        case CAIRN_OPTIM_RMSPROP:
          *a = rho * *a + (1 - rho) * g * g;
          *b = mu * *b + lr * g / sqrt(*a + eps);
          *w -= *b;
          break;
        case CAIRN_OPTIM_ADAGRAD:
          *a += g * g;
          *w -= lr * g / sqrt(*a);
          break;
      }
    }
}

static const char *const slot_key[6][2] = {
    {NULL, NULL}, {"momentum", NULL}, {"m", "v"}, {"m", "v"}, {"rms", "momentum"}, {"accumulator", NULL}};

/* Runs `steps` applies of the optimizer described by c on the model and
 * checks weights, slots, beta powers and global_step after each against the
 * double-precision rules. */
static void run_against_rule(const cairn_optim_config *c, int steps, double rtol) {
  model m;
  model_new(&m);
  cairn_optim *o = NULL;
  OK(cairn_optim_new(m.r, c, m.v, NV, &o));
  cairn_var *gs = NULL;
  OK(cairn_registry_global_step(m.r, &gs));
  model_init(&m);
  ref_state s;
  ref_new(&s, &m, c);

  /* β^t as TF keeps them: f32 variables multiplied in f32 after each step.
   * The rule is evaluated with these stored powers; they are also checked
   * against the exact β^t below. */
  float p1f = c->beta1, p2f = c->beta2;
  const int adam = c->kind == CAIRN_OPTIM_ADAM || c->kind == CAIRN_OPTIM_ADAMW;
  cairn_var *b1p = NULL, *b2p = NULL;
  if (adam) {
    b1p = find(m.r, "beta1_power");
    b2p = find(m.r, "beta2_power");
    cr_assert_eq(vf(b1p)[0], c->beta1, "beta1_power starts at beta1");
    cr_assert_eq(vf(b2p)[0], c->beta2, "beta2_power starts at beta2");
  }

  for (int t = 1; t <= steps; t++) {
    for (int k = 0; k < NV; k++)
      for (size_t j = 0; j < vsize(m.v[k]); j++) cairn_tensor_f32(m.g[k])[j] = grad(k, j, t);
    ref_step(&s, c, t, p1f, p2f);
    OK(cairn_optim_apply(o, m.g, gs));
    cr_assert_eq(cairn_tensor_i64(cairn_var_tensor(gs))[0], t, "global_step is %lld after %d steps",
                 (long long)cairn_tensor_i64(cairn_var_tensor(gs))[0], t);
    for (int k = 0; k < NV; k++) {
      cairn_var *sl[2] = {NULL, NULL};
      for (int q = 0; q < 2; q++)
        if (slot_key[c->kind][q]) OK(cairn_optim_get_slot(o, m.v[k], slot_key[c->kind][q], &sl[q]));
      for (size_t j = 0; j < s.n[k]; j++) {
        assert_rel(vf(m.v[k])[j], s.w[k][j], rtol, mnames[k], j, t);
        if (sl[0]) assert_rel(vf(sl[0])[j], s.s0[k][j], rtol, cairn_var_name(sl[0]), j, t);
        if (sl[1]) assert_rel(vf(sl[1])[j], s.s1[k][j], rtol, cairn_var_name(sl[1]), j, t);
      }
    }
    if (adam) {
      p1f *= c->beta1;
      p2f *= c->beta2;
      cr_assert_eq(vf(b1p)[0], p1f, "beta1_power after step %d: %.9g, want %.9g", t, vf(b1p)[0], p1f);
      cr_assert_eq(vf(b2p)[0], p2f, "beta2_power after step %d: %.9g, want %.9g", t, vf(b2p)[0], p2f);
      assert_rel(vf(b1p)[0], pow(c->beta1, t + 1), 1e-6, "beta1_power", 0, t);
      assert_rel(vf(b2p)[0], pow(c->beta2, t + 1), 1e-6, "beta2_power", 0, t);
    }
  }
  ref_free(&s);
  cairn_optim_free(o);
  model_free(&m);
}

TestSuite(optim_rules, .timeout = 60);

Test(optim_rules, sgd) {
  cairn_optim_config c = cairn_optim_defaults(CAIRN_OPTIM_SGD);
  c.learning_rate = 0.1f;
  run_against_rule(&c, 4, 1e-6);
}

Test(optim_rules, momentum) {
  cairn_optim_config c = cairn_optim_defaults(CAIRN_OPTIM_MOMENTUM);
  c.learning_rate = 0.05f;
  run_against_rule(&c, 3, 1e-6);
}

Test(optim_rules, momentum_nesterov) {
  cairn_optim_config c = cairn_optim_defaults(CAIRN_OPTIM_MOMENTUM);
  c.learning_rate = 0.03f;
  c.momentum = 0.8f;
  c.nesterov = 1;
  run_against_rule(&c, 3, 1e-6);
}

/* ε = 1e-3 is large enough that putting it under the square root (PyTorch
 * style) or dropping the bias correction would fail by far. */
Test(optim_rules, adam) {
  cairn_optim_config c = cairn_optim_defaults(CAIRN_OPTIM_ADAM);
  c.learning_rate = 0.05f;
  c.epsilon = 1e-3f;
  run_against_rule(&c, 4, 1e-6);
}

Test(optim_rules, adam_defaults) {
  cairn_optim_config c = cairn_optim_defaults(CAIRN_OPTIM_ADAM);
  c.beta1 = 0.8f;
  c.beta2 = 0.99f;
  run_against_rule(&c, 3, 1e-6);
}

Test(optim_rules, adamw) {
  cairn_optim_config c = cairn_optim_defaults(CAIRN_OPTIM_ADAMW);
  c.learning_rate = 0.05f;
  c.epsilon = 1e-3f;
  c.weight_decay = 0.05f;
  run_against_rule(&c, 3, 1e-6);
}

Test(optim_rules, rmsprop) {
  cairn_optim_config c = cairn_optim_defaults(CAIRN_OPTIM_RMSPROP);
  c.learning_rate = 0.02f;
  c.epsilon = 1e-2f; /* visible: √(ms + ε) ≠ √ms + ε */
  run_against_rule(&c, 3, 1e-6);
}

Test(optim_rules, rmsprop_momentum) {
  cairn_optim_config c = cairn_optim_defaults(CAIRN_OPTIM_RMSPROP);
  c.learning_rate = 0.02f;
  c.momentum = 0.9f;
  c.decay = 0.8f;
  run_against_rule(&c, 3, 1e-6);
}

Test(optim_rules, adagrad) {
  cairn_optim_config c = cairn_optim_defaults(CAIRN_OPTIM_ADAGRAD);
  c.learning_rate = 0.1f;
  c.initial_accumulator = 0.25f;
  run_against_rule(&c, 3, 1e-6);
}

Test(optim_rules, defaults) {
  cairn_optim_config a = cairn_optim_defaults(CAIRN_OPTIM_ADAM);
  cr_assert_eq(a.kind, CAIRN_OPTIM_ADAM);
  cr_assert_eq(a.learning_rate, 0.001f);
  cr_assert_eq(a.beta1, 0.9f);
  cr_assert_eq(a.beta2, 0.999f);
  cr_assert_eq(a.epsilon, 1e-8f);
  cr_assert_eq(a.clip_norm, 0.0f);
  cr_assert_null(a.name);
  cairn_optim_config w = cairn_optim_defaults(CAIRN_OPTIM_ADAMW);
  cr_assert_eq(w.weight_decay, 0.01f);
  cairn_optim_config r = cairn_optim_defaults(CAIRN_OPTIM_RMSPROP);
  cr_assert_eq(r.learning_rate, 0.001f);
  cr_assert_eq(r.epsilon, 1e-10f);
  cr_assert_eq(r.decay, 0.9f);
  cr_assert_eq(r.momentum, 0.0f);
  cairn_optim_config m = cairn_optim_defaults(CAIRN_OPTIM_MOMENTUM);
  cr_assert_eq(m.learning_rate, 0.01f);
  cr_assert_eq(m.momentum, 0.9f);
  cr_assert_eq(m.nesterov, 0);
  cairn_optim_config g = cairn_optim_defaults(CAIRN_OPTIM_ADAGRAD);
  cr_assert_eq(g.learning_rate, 0.01f);
  cr_assert_eq(g.initial_accumulator, 0.1f);
  cr_assert_eq(cairn_optim_defaults(CAIRN_OPTIM_SGD).learning_rate, 0.01f);
}

/* ---- slots: names, collections, initializers, get_slot ---- */

TestSuite(optim_slots, .timeout = 60);

static int in_list(cairn_var *const *list, size_t n, const cairn_var *v) {
  for (size_t i = 0; i < n; i++)
    if (list[i] == v) return 1;
  return 0;
}

Test(optim_slots, adam_names_and_collections) {
  model m;
  model_new(&m);
  size_t before = cairn_registry_count(m.r, CAIRN_COLL_GLOBAL);
  cr_assert_eq(before, NV);
  cairn_optim *o = NULL;
  OK(cairn_optim_new(m.r, &(cairn_optim_config){.kind = CAIRN_OPTIM_ADAM, .learning_rate = 0.001f,
                                                 .beta1 = 0.9f, .beta2 = 0.999f, .epsilon = 1e-8f},
                     m.v, NV, &o));
  const char *want[] = {"dense/kernel/Adam", "dense/kernel/Adam_1", "dense/bias/Adam", "dense/bias/Adam_1",
                        "big/w/Adam",        "big/w/Adam_1",        "beta1_power",     "beta2_power"};
  cairn_var *list[32];
  size_t nlist = cairn_registry_list(m.r, CAIRN_COLL_GLOBAL, list, 32);
  cr_assert_eq(nlist, NV + 8, "GLOBAL has %zu variables", nlist);
  cr_assert_eq(cairn_registry_count(m.r, CAIRN_COLL_TRAINABLE), NV, "slots must not be TRAINABLE");
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    cairn_var *v = find(m.r, want[i]);
    cr_assert_eq(cairn_var_collections(v), CAIRN_COLL_GLOBAL, "'%s' collections %u", want[i],
                 cairn_var_collections(v));
    cr_assert_not(cairn_var_is_initialized(v), "'%s' must start uninitialized", want[i]);
    cr_assert(in_list(list, nlist, v), "registry_list misses '%s'", want[i]);
  }
  /* slot shapes follow the variable; powers are f32 scalars */
  cairn_tensor *st = cairn_var_tensor(find(m.r, "dense/kernel/Adam_1"));
  cr_assert(cairn_tensor_same_shape(st, cairn_var_tensor(m.v[0])));
  cr_assert_eq(st->dtype, CAIRN_DTYPE_F32);
  cairn_tensor *pt = cairn_var_tensor(find(m.r, "beta1_power"));
  cr_assert_eq(pt->rank, 0);
  cr_assert_eq(pt->dtype, CAIRN_DTYPE_F32);

  cairn_var *s = NULL;
  OK(cairn_optim_get_slot(o, m.v[0], "m", &s));
  cr_assert_eq(s, find(m.r, "dense/kernel/Adam"));
  OK(cairn_optim_get_slot(o, m.v[1], "v", &s));
  cr_assert_eq(s, find(m.r, "dense/bias/Adam_1"));
  cr_assert_eq(cairn_optim_get_slot(o, m.v[1], "momentum", &s), CAIRN_E_NOT_FOUND);
  cr_assert_null(s);
  cr_assert(strstr(cairn_errmsg(), "momentum"), "errmsg: %s", cairn_errmsg());
  cr_assert_str_eq(cairn_optim_get_config(o)->name, "Adam");

  model_init(&m);
  cr_assert_eq(vf(find(m.r, "beta1_power"))[0], 0.9f);
  cr_assert_eq(vf(find(m.r, "beta2_power"))[0], 0.999f);
  cr_assert_eq(vf(find(m.r, "big/w/Adam_1"))[999], 0.0f);
  cairn_optim_free(o);
  model_free(&m);
}

/* Slot names and initial values of every kind with slots; SGD has none. */
Test(optim_slots, names_of_every_kind) {
  static const struct {
    cairn_optim_kind kind;
    const char *s0, *s1;
    float init0, init1;
  } cases[] = {
      {CAIRN_OPTIM_MOMENTUM, "dense/bias/Momentum", NULL, 0.0f, 0.0f},
      {CAIRN_OPTIM_ADAMW, "dense/bias/AdamW", "dense/bias/AdamW_1", 0.0f, 0.0f},
      {CAIRN_OPTIM_RMSPROP, "dense/bias/RMSProp", "dense/bias/RMSProp_1", 1.0f, 0.0f},
      {CAIRN_OPTIM_ADAGRAD, "dense/bias/Adagrad", NULL, 0.1f, 0.0f},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    model m;
    model_new(&m);
    cairn_optim_config c = cairn_optim_defaults(cases[i].kind);
    cairn_optim *o = NULL;
    OK(cairn_optim_new(m.r, &c, m.v, NV, &o));
    size_t nslots = cases[i].s1 ? 2 : 1;
    size_t extra = cases[i].kind == CAIRN_OPTIM_ADAMW ? 2 : 0;
    cr_assert_eq(cairn_registry_count(m.r, CAIRN_COLL_GLOBAL), NV + NV * nslots + extra, "kind %d",
                 (int)cases[i].kind);
    cr_assert_eq(cairn_registry_count(m.r, CAIRN_COLL_TRAINABLE), NV);
    OK(cairn_registry_initialize_collection(m.r, CAIRN_COLL_GLOBAL));
    cairn_var *s0 = find(m.r, cases[i].s0);
    cr_assert_eq(cairn_var_collections(s0), CAIRN_COLL_GLOBAL);
    for (size_t j = 0; j < 3; j++)
      cr_assert_eq(vf(s0)[j], cases[i].init0, "'%s'[%zu] = %g", cases[i].s0, j, vf(s0)[j]);
    cairn_var *got = NULL;
    OK(cairn_optim_get_slot(o, m.v[1], slot_key[cases[i].kind][0], &got));
    cr_assert_eq(got, s0);
    if (cases[i].s1) {
      cairn_var *s1 = find(m.r, cases[i].s1);
      cr_assert_eq(vf(s1)[2], cases[i].init1);
      OK(cairn_optim_get_slot(o, m.v[1], slot_key[cases[i].kind][1], &got));
      cr_assert_eq(got, s1);
    }
    cairn_optim_free(o);
    model_free(&m);
  }
  model m;
  model_new(&m);
  cairn_optim_config c = cairn_optim_defaults(CAIRN_OPTIM_SGD);
  cairn_optim *o = NULL;
  OK(cairn_optim_new(m.r, &c, m.v, NV, &o));
  cr_assert_eq(cairn_registry_count(m.r, CAIRN_COLL_ALL), NV, "SGD creates no variables");
  cairn_var *got = NULL;
  cr_assert_eq(cairn_optim_get_slot(o, m.v[0], "momentum", &got), CAIRN_E_NOT_FOUND);
  cairn_optim_free(o);
  model_free(&m);
}

Test(optim_slots, custom_name_and_second_optimizer) {
  model m;
  model_new(&m);
  cairn_optim_config c = cairn_optim_defaults(CAIRN_OPTIM_ADAM);
  cairn_optim *o1 = NULL, *o2 = NULL, *o3 = NULL;
  OK(cairn_optim_new(m.r, &c, m.v, 2, &o1));
  size_t count = cairn_registry_count(m.r, CAIRN_COLL_ALL);
  /* Same (default) name again: its slots and powers exist. */
  cr_assert_eq(cairn_optim_new(m.r, &c, m.v, 2, &o2), CAIRN_E_EXISTS);
  cr_assert_null(o2);
  cr_assert(strstr(cairn_errmsg(), "dense/kernel/Adam"), "errmsg: %s", cairn_errmsg());
  /* Only beta1_power clashes (another variable set): still EXISTS. */
  cr_assert_eq(cairn_optim_new(m.r, &c, m.v + 2, 1, &o2), CAIRN_E_EXISTS);
  cr_assert(strstr(cairn_errmsg(), "beta1_power"), "errmsg: %s", cairn_errmsg());
  cr_assert_eq(cairn_registry_count(m.r, CAIRN_COLL_ALL), count, "a failed optim_new created variables");

  c.name = "Adam2";
  OK(cairn_optim_new(m.r, &c, m.v, 2, &o3));
  cr_assert(has_var(m.r, "dense/kernel/Adam2"));
  cr_assert(has_var(m.r, "dense/kernel/Adam2_1"));
  cr_assert(has_var(m.r, "Adam2/beta1_power"));
  cr_assert(has_var(m.r, "Adam2/beta2_power"));
  cr_assert_str_eq(cairn_optim_get_config(o3)->name, "Adam2");
  cr_assert_eq(cairn_registry_count(m.r, CAIRN_COLL_ALL), count + 6);
  cairn_var *s = NULL;
  OK(cairn_optim_get_slot(o3, m.v[0], "m", &s));
  cr_assert_str_eq(cairn_var_name(s), "dense/kernel/Adam2");
  /* big/w is not optimized by o3 */
  cr_assert_eq(cairn_optim_get_slot(o3, m.v[2], "m", &s), CAIRN_E_NOT_FOUND);
  cr_assert(strstr(cairn_errmsg(), "big/w"), "errmsg: %s", cairn_errmsg());
  cairn_optim_free(o1);
  cairn_optim_free(o3);
  model_free(&m);
}

Test(optim_slots, config_and_learning_rate) {
  model m;
  model_new(&m);
  cairn_optim_config c = cairn_optim_defaults(CAIRN_OPTIM_SGD);
  c.learning_rate = 0.5f;
  cairn_optim *o = NULL;
  OK(cairn_optim_new(m.r, &c, m.v, 1, &o));
  const cairn_optim_config *got = cairn_optim_get_config(o);
  cr_assert_eq(got->kind, CAIRN_OPTIM_SGD);
  cr_assert_eq(got->learning_rate, 0.5f);
  cr_assert_str_eq(got->name, "GradientDescent");
  model_init(&m);
  cairn_optim_set_learning_rate(o, 0.25f);
  cr_assert_eq(cairn_optim_get_config(o)->learning_rate, 0.25f);
  cairn_optim_set_learning_rate(o, -1.0f); /* refused */
  cairn_optim_set_learning_rate(o, NAN);   /* refused */
  cr_assert_eq(cairn_optim_get_config(o)->learning_rate, 0.25f);
  /* the new rate is used: w -= 0.25·g */
  float before = vf(m.v[0])[0];
  OK(cairn_tensor_fill(m.g[0], 2.0f));
  OK(cairn_optim_apply(o, m.g, NULL));
  cr_assert_float_eq(vf(m.v[0])[0], before - 0.5f, 1e-6);
  cairn_optim_set_learning_rate(o, 0.0f); /* allowed: a schedule may start at 0 */
  OK(cairn_optim_apply(o, m.g, NULL));
  cr_assert_float_eq(vf(m.v[0])[0], before - 0.5f, 1e-6);
  cr_assert_null(cairn_optim_get_config(NULL));
  cairn_optim_set_learning_rate(NULL, 1.0f); /* no crash */
  cairn_optim_free(NULL);
  cairn_optim_free(o);
  model_free(&m);
}

/* ---- global_step ---- */

TestSuite(optim_step, .timeout = 60);

Test(optim_step, increments_once_per_apply_not_on_failure) {
  model m;
  model_new(&m);
  cairn_optim_config c = cairn_optim_defaults(CAIRN_OPTIM_MOMENTUM);
  cairn_optim *o = NULL;
  OK(cairn_optim_new(m.r, &c, m.v, NV, &o));
  cairn_var *gs = NULL;
  OK(cairn_registry_global_step(m.r, &gs));
  model_init(&m);
  int64_t *step = cairn_tensor_i64(cairn_var_tensor(gs));
  cr_assert_eq(*step, 0);
  for (int i = 1; i <= 5; i++) {
    OK(cairn_optim_apply(o, m.g, gs));
    cr_assert_eq(*step, i);
  }
  OK(cairn_optim_apply(o, m.g, NULL)); /* no step given: untouched */
  cr_assert_eq(*step, 5);
  cairn_tensor *bad = NULL;
  int64_t shape = 4;
  OK(cairn_tensor_new(CAIRN_DTYPE_F32, 1, &shape, &bad));
  cairn_tensor *grads[NV] = {m.g[0], bad, m.g[2]};
  cr_assert_eq(cairn_optim_apply(o, grads, gs), CAIRN_E_SHAPE);
  cr_assert_eq(*step, 5, "a failed apply incremented global_step");
  /* a step of the wrong dtype is refused before anything changes */
  cairn_var *fstep = NULL;
  OK(cairn_var_new(m.r, "fstep", CAIRN_DTYPE_F32, 0, NULL, cairn_init_zeros(), CAIRN_COLL_LOCAL, &fstep));
  OK(cairn_var_initialize(fstep));
  float w00 = vf(m.v[0])[0];
  cr_assert_eq(cairn_optim_apply(o, m.g, fstep), CAIRN_E_DTYPE);
  cr_assert_eq(vf(m.v[0])[0], w00);
  cairn_tensor_free(bad);
  cairn_optim_free(o);
  model_free(&m);
}

#if defined(__x86_64__) || defined(__i386__)
/* Updates flush subnormals to zero, as TF's executor does: with zero
 * gradients, a first moment decaying from just above FLT_MIN never becomes
 * subnormal (it ends at 0, or, in TF's form m += (g - m)(1 - beta1), stays
 * put once the decrement itself flushes), whatever the ISA; a subnormal
 * gradient reads as 0; the caller's MXCSR is left as it was. */
Test(optim_step, subnormals_flushed_as_tf_does) {
  model m;
  model_new(&m);
  cairn_optim_config c = cairn_optim_defaults(CAIRN_OPTIM_ADAM);
  cairn_optim *o = NULL;
  OK(cairn_optim_new(m.r, &c, m.v, NV, &o));
  model_init(&m);
  cairn_var *mslot = find(m.r, "big/w/Adam"), *vslot = find(m.r, "big/w/Adam_1");
  for (size_t j = 0; j < vsize(mslot); j++) vf(mslot)[j] = 1.1f * FLT_MIN; /* beta1 · m < FLT_MIN */
  for (int k = 0; k < NV; k++) memset(cairn_tensor_f32(m.g[k]), 0, (size_t)m.g[k]->size * sizeof(float));
  cairn_tensor_f32(m.g[2])[0] = FLT_MIN / 4; /* subnormal: without DAZ, m[0] would rise by 0.025 FLT_MIN */
  const unsigned before = _mm_getcsr();
  for (int step = 0; step < 10; step++) {
    OK(cairn_optim_apply(o, m.g, NULL));
    cr_assert_eq(_mm_getcsr(), before, "MXCSR changed: %#x -> %#x", before, _mm_getcsr());
    for (size_t j = 0; j < vsize(mslot); j++) {
      cr_assert_neq(fpclassify(vf(mslot)[j]), FP_SUBNORMAL, "step %d: m[%zu] = %a is subnormal", step, j,
                    (double)vf(mslot)[j]);
      cr_assert_neq(fpclassify(vf(vslot)[j]), FP_SUBNORMAL, "step %d: v[%zu] = %a", step, j, (double)vf(vslot)[j]);
      cr_assert_leq(vf(mslot)[j], 1.1f * FLT_MIN, "step %d: m[%zu] = %a grew", step, j, (double)vf(mslot)[j]);
    }
  }
  cairn_optim_free(o);
  model_free(&m);
}
#endif

Test(optim_step, uninitialized_global_step) {
  model m;
  model_new(&m);
  cairn_optim_config c = cairn_optim_defaults(CAIRN_OPTIM_SGD);
  cairn_optim *o = NULL;
  OK(cairn_optim_new(m.r, &c, m.v, NV, &o));
  OK(cairn_registry_initialize(m.r, m.v, NV));
  cairn_var *gs = NULL;
  OK(cairn_registry_global_step(m.r, &gs));
  OK(cairn_tensor_fill(m.g[1], 1.0f));
  float b0 = vf(m.v[1])[0];
  cr_assert_eq(cairn_optim_apply(o, m.g, gs), CAIRN_E_UNINITIALIZED);
  cr_assert(strstr(cairn_errmsg(), "global_step"), "errmsg: %s", cairn_errmsg());
  cr_assert_eq(vf(m.v[1])[0], b0, "the weights changed on a failed apply");
  cairn_optim_free(o);
  model_free(&m);
}

/* ---- clipping ---- */

TestSuite(optim_clip, .timeout = 60);

Test(optim_clip, by_hand) {
  float a[2] = {3.0f, 4.0f}, b[1] = {12.0f};
  int64_t s2 = 2, s1 = 1;
  cairn_tensor ta, tb;
  OK(cairn_tensor_view(&ta, a, CAIRN_DTYPE_F32, 1, &s2));
  OK(cairn_tensor_view(&tb, b, CAIRN_DTYPE_F32, 1, &s1));
  cairn_tensor *g[2] = {&ta, &tb};
  float norm = 0;
  /* N = √(9 + 16 + 144) = 13; scale 6.5 / 13 = 0.5 */
  OK(cairn_clip_by_global_norm(g, 2, 6.5f, &norm));
  cr_assert_eq(norm, 13.0f);
  cr_assert_float_eq(a[0], 1.5f, 1e-7);
  cr_assert_float_eq(a[1], 2.0f, 1e-7);
  cr_assert_float_eq(b[0], 6.0f, 1e-7);
  /* now N = 6.5: clipping at 6.5 or above leaves every bit unchanged */
  OK(cairn_clip_by_global_norm(g, 2, 6.5f, &norm));
  cr_assert_float_eq(norm, 6.5f, 1e-6);
  cr_assert_eq(a[0], 1.5f);
  cr_assert_eq(b[0], 6.0f);
  OK(cairn_clip_by_global_norm(g, 2, 100.0f, NULL));
  cr_assert_eq(a[1], 2.0f);
  /* an odd scale, against the formula */
  a[0] = 0.3f; a[1] = -1.7f; b[0] = 2.9f;
  double n = sqrt(0.3f * (double)0.3f + 1.7f * (double)1.7f + 2.9f * (double)2.9f);
  OK(cairn_clip_by_global_norm(g, 2, 1.0f, &norm));
  cr_assert_float_eq(norm, (float)n, 1e-6);
  cr_assert_float_eq(a[1], -1.7 / n, 1e-6);
  cr_assert_float_eq(b[0], 2.9 / n, 1e-6);
  /* errors */
  cr_assert_eq(cairn_clip_by_global_norm(g, 2, 0.0f, NULL), CAIRN_E_INVALID);
  cr_assert_eq(cairn_clip_by_global_norm(g, 2, -1.0f, NULL), CAIRN_E_INVALID);
  cr_assert_eq(cairn_clip_by_global_norm(NULL, 2, 1.0f, NULL), CAIRN_E_NULL);
  cairn_tensor *gn[2] = {&ta, NULL};
  cr_assert_eq(cairn_clip_by_global_norm(gn, 2, 1.0f, NULL), CAIRN_E_NULL);
  OK(cairn_clip_by_global_norm(NULL, 0, 1.0f, &norm));
  cr_assert_eq(norm, 0.0f);
}

/* TF: a non-finite global norm turns every gradient into NaN. */
Test(optim_clip, infinite_norm_gives_nan) {
  float a[2] = {INFINITY, 1.0f}, b[1] = {2.0f};
  int64_t s2 = 2, s1 = 1;
  cairn_tensor ta, tb;
  OK(cairn_tensor_view(&ta, a, CAIRN_DTYPE_F32, 1, &s2));
  OK(cairn_tensor_view(&tb, b, CAIRN_DTYPE_F32, 1, &s1));
  cairn_tensor *g[2] = {&ta, &tb};
  float norm = 0;
  OK(cairn_clip_by_global_norm(g, 2, 1.0f, &norm));
  cr_assert(isinf(norm));
  cr_assert(isnan(a[0]) && isnan(a[1]) && isnan(b[0]));
}

/* clip_norm in the config: SGD then moves by lr·g·clip/N. */
Test(optim_clip, inside_apply) {
  model m;
  model_new(&m);
  cairn_optim_config c = cairn_optim_defaults(CAIRN_OPTIM_SGD);
  c.learning_rate = 0.1f;
  c.clip_norm = 1.0f;
  cairn_optim *o = NULL;
  OK(cairn_optim_new(m.r, &c, m.v, NV, &o));
  model_init(&m);
  double ss = 0;
  for (int k = 0; k < NV; k++)
    for (size_t j = 0; j < vsize(m.v[k]); j++) {
      float g = grad(k, j, 1);
      cairn_tensor_f32(m.g[k])[j] = g;
      ss += (double)g * g;
    }
  double n = sqrt(ss);
  cr_assert_gt(n, 1.0, "the test needs a norm above clip_norm");
  OK(cairn_optim_apply(o, m.g, NULL));
  for (int k = 0; k < NV; k++)
    for (size_t j = 0; j < vsize(m.v[k]); j++) {
      double want = (float)w0(k, j) - 0.1 * grad(k, j, 1) / n;
      assert_rel(vf(m.v[k])[j], want, 1e-6, mnames[k], j, 1);
      assert_rel(cairn_tensor_f32(m.g[k])[j], grad(k, j, 1) / n, 1e-6, "clipped gradient", j, 1);
    }
  cairn_optim_free(o);
  model_free(&m);
}

/* ---- thread-count independence ---- */

#define BIG (1u << 20)

static void set_threads(int n) {
#ifdef CAIRN_HAVE_OPENMP
  omp_set_num_threads(n);
#else
  (void)n;
#endif
}

static float big_val(size_t i, int salt) {
  uint32_t x = (uint32_t)(i * 2654435761u) ^ (uint32_t)(salt * 40503u);
  x ^= x >> 13;
  x *= 0x5bd1e995u;
  x ^= x >> 15;
  return (float)((x & 0xffffff) / 16777216.0 - 0.5);
}

TestSuite(optim_threads, .timeout = 60);

Test(optim_threads, clip_norm_bits_do_not_depend_on_threads) {
  int64_t shape[1] = {BIG}, shape2[1] = {BIG / 3 + 5};
  cairn_tensor *a[2], *b[2];
  float norm[2];
  for (int run = 0; run < 2; run++) {
    OK(cairn_tensor_new(CAIRN_DTYPE_F32, 1, shape, &a[run]));
    OK(cairn_tensor_new(CAIRN_DTYPE_F32, 1, shape2, &b[run]));
    for (size_t i = 0; i < (size_t)shape[0]; i++) cairn_tensor_f32(a[run])[i] = big_val(i, 1);
    for (size_t i = 0; i < (size_t)shape2[0]; i++) cairn_tensor_f32(b[run])[i] = big_val(i, 2);
    set_threads(run + 1);
    cairn_tensor *g[2] = {a[run], b[run]};
    OK(cairn_clip_by_global_norm(g, 2, 1.0f, &norm[run]));
  }
  set_threads(2);
  cr_assert_gt(norm[0], 1.0f);
  cr_assert_eq(memcmp(&norm[0], &norm[1], sizeof(float)), 0, "norm %.9g vs %.9g", norm[0], norm[1]);
  cr_assert_eq(memcmp(a[0]->data, a[1]->data, cairn_tensor_nbytes(a[0])), 0);
  cr_assert_eq(memcmp(b[0]->data, b[1]->data, cairn_tensor_nbytes(b[0])), 0);
  for (int run = 0; run < 2; run++) {
    cairn_tensor_free(a[run]);
    cairn_tensor_free(b[run]);
  }
}

/* Two Adam steps (with clipping) over a 2^20-element variable give the same
 * bits with 1 and 2 threads. */
Test(optim_threads, adam_bits_do_not_depend_on_threads) {
  float *out[2][3];
  int64_t shape[1] = {BIG};
  for (int run = 0; run < 2; run++) {
    set_threads(run + 1);
    cairn_registry *r = NULL;
    OK(cairn_registry_new(1, &r));
    cairn_var *w = NULL;
    OK(cairn_var_new(r, "w", CAIRN_DTYPE_F32, 1, shape, cairn_init_zeros(), CAIRN_COLL_MODEL, &w));
    cairn_optim_config c = cairn_optim_defaults(CAIRN_OPTIM_ADAM);
    c.clip_norm = 10.0f;
    cairn_optim *o = NULL;
    OK(cairn_optim_new(r, &c, &w, 1, &o));
    OK(cairn_registry_initialize_collection(r, CAIRN_COLL_GLOBAL));
    for (size_t i = 0; i < BIG; i++) vf(w)[i] = big_val(i, 3);
    cairn_tensor *g = NULL;
    OK(cairn_tensor_new(CAIRN_DTYPE_F32, 1, shape, &g));
    for (int t = 0; t < 2; t++) {
      for (size_t i = 0; i < BIG; i++) cairn_tensor_f32(g)[i] = big_val(i, 10 + t);
      OK(cairn_optim_apply(o, &g, NULL));
    }
    cairn_var *m = NULL, *v = NULL;
    OK(cairn_optim_get_slot(o, w, "m", &m));
    OK(cairn_optim_get_slot(o, w, "v", &v));
    cairn_var *src[3] = {w, m, v};
    for (int q = 0; q < 3; q++) {
      out[run][q] = malloc(BIG * sizeof(float));
      cr_assert_not_null(out[run][q]);
      memcpy(out[run][q], vf(src[q]), BIG * sizeof(float));
    }
    cairn_tensor_free(g);
    cairn_optim_free(o);
    cairn_registry_free(r);
  }
  set_threads(2);
  cr_assert_neq(out[0][0][123], big_val(123, 3), "the weights did not move");
  for (int q = 0; q < 3; q++) {
    cr_assert_eq(memcmp(out[0][q], out[1][q], BIG * sizeof(float)), 0, "array %d differs", q);
    free(out[0][q]);
    free(out[1][q]);
  }
}

/* ---- AVX2 vs reference kernels ---- */

TestSuite(optim_kernels, .timeout = 60);

static const size_t klens[] = {0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 1000};
#define GUARD 16
#define SENTINEL (-12345.0f)

/* |a − b| within k ulps of max(|a|, |b|, 1): the operands are O(1), so a
 * result that cancels towards 0 is held to the rounding of the operands.
 * The only differences are FMA contractions (one rounding instead of two);
 * over three steps they stay below 3 such ulps, the bound used is 4. */
static int ulp_close(float a, float b, float k) {
  if (a == b) return 1;
  if (isnan(a) || isnan(b)) return 0;
  float m = fmaxf(fmaxf(fabsf(a), fabsf(b)), 1.0f);
  return fabsf(a - b) <= k * FLT_EPSILON * m;
}

/* One buffer per array, one float past a 64-byte boundary (unaligned for
 * both vector widths) with a sentinel before and GUARD sentinels after n. */
typedef struct kbuf {
  float *base, *p;
} kbuf;

static float *kbuf_alloc(size_t n) {
  float *p = aligned_alloc(64, ((n + GUARD + 1) * sizeof(float) + 63) / 64 * 64);
  cr_assert_not_null(p);
  return p;
}

static void kbuf_new(kbuf *b, size_t n, int salt, float lo, float hi) {
  b->base = kbuf_alloc(n);
  b->p = b->base + 1;
  for (size_t i = 0; i < n; i++) b->p[i] = lo + (hi - lo) * (big_val(i, salt) + 0.5f);
  for (size_t i = 0; i < GUARD; i++) b->p[n + i] = SENTINEL;
  b->base[0] = SENTINEL;
}

static void kbuf_copy(kbuf *dst, const kbuf *src, size_t n) {
  dst->base = kbuf_alloc(n);
  memcpy(dst->base, src->base, (n + GUARD + 1) * sizeof(float));
  dst->p = dst->base + 1;
}

static void kbuf_check(const kbuf *ref, const kbuf *got, size_t n, const char *what, float ulps) {
  cr_assert_eq(got->base[0], SENTINEL, "%s: write before the array (n=%zu)", what, n);
  for (size_t i = 0; i < GUARD; i++)
    cr_assert_eq(got->p[n + i], SENTINEL, "%s: write past n=%zu at +%zu", what, n, i);
  for (size_t i = 0; i < n; i++)
    cr_assert(ulp_close(got->p[i], ref->p[i], ulps), "%s[%zu] (n=%zu): vector %.9g, ref %.9g", what, i, n,
              got->p[i], ref->p[i]);
}

enum { K_SGD, K_MOM, K_NEST, K_ADAM, K_ADAMW, K_RMS, K_ADAGRAD, K_COUNT };
static const char *const kname[K_COUNT] = {"sgd", "momentum", "nesterov", "adam", "adamw", "rmsprop", "adagrad"};

/* Runs kernel `which` of table t on w, s0, s1 with g. */
static void run_kernel(const cairn__kernel_table *t, int which, float *w, float *s0, float *s1,
                       const float *g, size_t n) {
  switch (which) {
    case K_SGD: t->sgd(w, g, n, 0.1f); break;
    case K_MOM: t->momentum(w, s0, g, n, 0.05f, 0.9f, 0); break;
    case K_NEST: t->momentum(w, s0, g, n, 0.05f, 0.9f, 1); break;
    case K_ADAM: t->adam(w, s0, s1, g, n, 0.0123f, 0.9f, 0.999f, 1e-7f, 0.0f); break;
    case K_ADAMW: t->adam(w, s0, s1, g, n, 0.0123f, 0.9f, 0.999f, 1e-7f, 0.01f); break;
    case K_RMS: t->rmsprop(w, s0, s1, g, n, 0.01f, 0.9f, 0.5f, 1e-10f); break;
    case K_ADAGRAD: t->adagrad(w, s0, g, n, 0.1f); break;
  }
}

/* Slot ranges valid for each kernel (v, ms, acc must be >= 0). */
static void slot_ranges(int which, float r[4]) {
  float lo0 = -0.5f, hi0 = 0.5f, lo1 = -0.1f, hi1 = 0.1f;
  if (which == K_ADAGRAD) lo0 = 0.05f, hi0 = 1.0f;
  if (which == K_RMS) lo0 = 0.0f, hi0 = 1.0f;
  if (which == K_ADAM || which == K_ADAMW) lo1 = 0.0f, hi1 = 0.05f;
  r[0] = lo0, r[1] = hi0, r[2] = lo1, r[3] = hi1;
}

/* Table avx (AVX2 or AVX-512) against the reference: three steps at every
 * length of klens, guards untouched, g unchanged. */
static void vector_matches_ref(const cairn__kernel_table *avx) {
  const cairn__kernel_table *ref = cairn__kernels_ref();
  cr_assert_not_null(ref);
  for (int which = 0; which < K_COUNT; which++)
    for (size_t li = 0; li < sizeof klens / sizeof klens[0]; li++) {
      size_t n = klens[li];
      float rg[4];
      slot_ranges(which, rg);
      kbuf w, s0, s1, g, w2, s02, s12;
      kbuf_new(&w, n, 1, -1.0f, 1.0f);
      kbuf_new(&s0, n, 2, rg[0], rg[1]);
      kbuf_new(&s1, n, 3, rg[2], rg[3]);
      kbuf_new(&g, n, 4 + which, -1.0f, 1.0f);
      if (n > 3) g.p[3] = 0.0f; /* a zero gradient too */
      kbuf_copy(&w2, &w, n);
      kbuf_copy(&s02, &s0, n);
      kbuf_copy(&s12, &s1, n);
      /* three steps so that state carried between steps is compared too */
      for (int step = 0; step < 3; step++) {
        run_kernel(ref, which, w.p, s0.p, s1.p, g.p, n);
        run_kernel(avx, which, w2.p, s02.p, s12.p, g.p, n);
      }
      kbuf_check(&w, &w2, n, kname[which], 4.0f);
      kbuf_check(&s0, &s02, n, kname[which], 4.0f);
      kbuf_check(&s1, &s12, n, kname[which], 4.0f);
      for (size_t i = 0; i < GUARD; i++) cr_assert_eq(g.p[n + i], SENTINEL);
      kbuf *all[] = {&w, &s0, &s1, &g, &w2, &s02, &s12};
      for (size_t q = 0; q < sizeof all / sizeof all[0]; q++) free(all[q]->base);
    }
}

Test(optim_kernels, avx2_matches_ref) {
  const cairn__kernel_table *avx = cairn__kernels_avx2();
  if (!avx) cr_skip_test("AVX2+FMA kernels not built or not supported by this CPU");
  cr_assert_str_eq(avx->isa, "avx2");
  vector_matches_ref(avx);
}

Test(optim_kernels, avx512_matches_ref) {
  const cairn__kernel_table *avx = cairn__kernels_avx512();
  if (!avx) cr_skip_test("AVX-512 kernels not built (--disable-avx512) or not supported by this CPU");
  cr_assert_str_eq(avx->isa, "avx512");
  vector_matches_ref(avx);
}

/* The two vector tiers do the same float operations in the same order (the
 * same FMA contractions, exact square roots and divisions): the same bits
 * after three steps, at every length of klens. */
Test(optim_kernels, avx512_same_bits_as_avx2) {
  const cairn__kernel_table *a2 = cairn__kernels_avx2(), *a5 = cairn__kernels_avx512();
  if (!a2 || !a5) cr_skip_test("needs both the AVX2 and the AVX-512 kernels (build and CPU)");
  for (int which = 0; which < K_COUNT; which++)
    for (size_t li = 0; li < sizeof klens / sizeof klens[0]; li++) {
      const size_t n = klens[li];
      float rg[4];
      slot_ranges(which, rg);
      kbuf w, s0, s1, g, w2, s02, s12;
      kbuf_new(&w, n, 11, -1.0f, 1.0f);
      kbuf_new(&s0, n, 12, rg[0], rg[1]);
      kbuf_new(&s1, n, 13, rg[2], rg[3]);
      kbuf_new(&g, n, 14 + which, -1.0f, 1.0f);
      kbuf_copy(&w2, &w, n);
      kbuf_copy(&s02, &s0, n);
      kbuf_copy(&s12, &s1, n);
      for (int step = 0; step < 3; step++) {
        run_kernel(a2, which, w.p, s0.p, s1.p, g.p, n);
        run_kernel(a5, which, w2.p, s02.p, s12.p, g.p, n);
      }
      cr_assert_eq(memcmp(w.base, w2.base, (n + GUARD + 1) * sizeof(float)), 0, "%s n=%zu: w", kname[which], n);
      cr_assert_eq(memcmp(s0.base, s02.base, (n + GUARD + 1) * sizeof(float)), 0, "%s n=%zu: slot 0", kname[which], n);
      cr_assert_eq(memcmp(s1.base, s12.base, (n + GUARD + 1) * sizeof(float)), 0, "%s n=%zu: slot 1", kname[which], n);
      kbuf *all[] = {&w, &s0, &s1, &g, &w2, &s02, &s12};
      for (size_t q = 0; q < sizeof all / sizeof all[0]; q++) free(all[q]->base);
    }
}

/* An element's result does not depend on where it sits: the whole array in
 * one call equals element-by-element calls (main loop vs masked tail), for
 * both tables. */
Test(optim_kernels, result_independent_of_position) {
  const cairn__kernel_table *tabs[3] = {cairn__kernels_ref(), cairn__kernels_avx2(), cairn__kernels_avx512()};
  const size_t n = 37; /* two 16-lane vectors and a tail of 5; four 8-lane vectors and a tail of 5 */
  int tested = 0;
  for (int ti = 0; ti < 3; ti++) {
    if (!tabs[ti]) continue;
    tested++;
    for (int which = 0; which < K_COUNT; which++) {
      float rg[4];
      slot_ranges(which, rg);
      kbuf w, s0, s1, g, w2, s02, s12;
      kbuf_new(&w, n, 5, -1.0f, 1.0f);
      kbuf_new(&s0, n, 6, rg[0], rg[1]);
      kbuf_new(&s1, n, 7, rg[2], rg[3]);
      kbuf_new(&g, n, 8, -1.0f, 1.0f);
      kbuf_copy(&w2, &w, n);
      kbuf_copy(&s02, &s0, n);
      kbuf_copy(&s12, &s1, n);
      run_kernel(tabs[ti], which, w.p, s0.p, s1.p, g.p, n);
      for (size_t i = 0; i < n; i++) run_kernel(tabs[ti], which, w2.p + i, s02.p + i, s12.p + i, g.p + i, 1);
      cr_assert_eq(memcmp(w.base, w2.base, (n + GUARD + 1) * sizeof(float)), 0, "%s %s: w", tabs[ti]->isa,
                   kname[which]);
      cr_assert_eq(memcmp(s0.base, s02.base, (n + GUARD + 1) * sizeof(float)), 0, "%s %s: slot 0",
                   tabs[ti]->isa, kname[which]);
      cr_assert_eq(memcmp(s1.base, s12.base, (n + GUARD + 1) * sizeof(float)), 0, "%s %s: slot 1",
                   tabs[ti]->isa, kname[which]);
      kbuf *all[] = {&w, &s0, &s1, &g, &w2, &s02, &s12};
      for (size_t q = 0; q < sizeof all / sizeof all[0]; q++) free(all[q]->base);
    }
  }
  cr_assert_geq(tested, 1);
}

/* ---- bad input ---- */

TestSuite(optim_errors, .timeout = 60);

Test(optim_errors, null_arguments) {
  model m;
  model_new(&m);
  cairn_optim_config c = cairn_optim_defaults(CAIRN_OPTIM_ADAM);
  cairn_optim *o = (cairn_optim *)&c; /* must be reset to NULL on failure */
  cr_assert_eq(cairn_optim_new(NULL, &c, m.v, NV, &o), CAIRN_E_NULL);
  cr_assert_null(o);
  cr_assert_eq(cairn_optim_new(m.r, NULL, m.v, NV, &o), CAIRN_E_NULL);
  cr_assert_eq(cairn_optim_new(m.r, &c, NULL, NV, &o), CAIRN_E_NULL);
  cr_assert_eq(cairn_optim_new(m.r, &c, m.v, NV, NULL), CAIRN_E_NULL);
  cairn_var *withnull[2] = {m.v[0], NULL};
  cr_assert_eq(cairn_optim_new(m.r, &c, withnull, 2, &o), CAIRN_E_NULL);
  cr_assert_eq(cairn_optim_new(m.r, &c, m.v, 0, &o), CAIRN_E_INVALID);
  cr_assert_eq(cairn_registry_count(m.r, CAIRN_COLL_ALL), NV, "failed calls created variables");

  OK(cairn_optim_new(m.r, &c, m.v, NV, &o));
  model_init(&m);
  cr_assert_eq(cairn_optim_apply(NULL, m.g, NULL), CAIRN_E_NULL);
  cr_assert_eq(cairn_optim_apply(o, NULL, NULL), CAIRN_E_NULL);
  cairn_tensor *grads[NV] = {m.g[0], NULL, m.g[2]};
  cr_assert_eq(cairn_optim_apply(o, grads, NULL), CAIRN_E_NULL);
  cr_assert(strstr(cairn_errmsg(), "dense/bias"), "errmsg: %s", cairn_errmsg());
  cairn_var *s = NULL;
  cr_assert_eq(cairn_optim_get_slot(NULL, m.v[0], "m", &s), CAIRN_E_NULL);
  cr_assert_eq(cairn_optim_get_slot(o, NULL, "m", &s), CAIRN_E_NULL);
  cr_assert_eq(cairn_optim_get_slot(o, m.v[0], NULL, &s), CAIRN_E_NULL);
  cr_assert_eq(cairn_optim_get_slot(o, m.v[0], "m", NULL), CAIRN_E_NULL);
  cairn_optim_free(o);
  model_free(&m);
}

Test(optim_errors, bad_variables) {
  model m;
  model_new(&m);
  cairn_optim_config c = cairn_optim_defaults(CAIRN_OPTIM_MOMENTUM);
  cairn_optim *o = NULL;
  cairn_var *ids = NULL;
  int64_t n4 = 4;
  OK(cairn_var_new(m.r, "embed/ids", CAIRN_DTYPE_I32, 1, &n4, cairn_init_zeros(), CAIRN_COLL_MODEL, &ids));
  cairn_var *vs[2] = {m.v[0], ids};
  cr_assert_eq(cairn_optim_new(m.r, &c, vs, 2, &o), CAIRN_E_DTYPE);
  cr_assert(strstr(cairn_errmsg(), "embed/ids"), "errmsg: %s", cairn_errmsg());
  cairn_var *twice[2] = {m.v[1], m.v[1]};
  cr_assert_eq(cairn_optim_new(m.r, &c, twice, 2, &o), CAIRN_E_INVALID);
  cr_assert(strstr(cairn_errmsg(), "dense/bias"), "errmsg: %s", cairn_errmsg());
  /* a variable of another registry */
  cairn_registry *r2 = NULL;
  cairn_var *other = NULL;
  OK(cairn_registry_new(1, &r2));
  OK(cairn_var_new(r2, "other", CAIRN_DTYPE_F32, 1, &n4, cairn_init_zeros(), CAIRN_COLL_MODEL, &other));
  cr_assert_eq(cairn_optim_new(m.r, &c, &other, 1, &o), CAIRN_E_INVALID);
  cr_assert(strstr(cairn_errmsg(), "other"), "errmsg: %s", cairn_errmsg());
  /* a bad optimizer name */
  c.name = "bad name";
  cr_assert_eq(cairn_optim_new(m.r, &c, m.v, 1, &o), CAIRN_E_INVALID);
  c.name = "";
  cr_assert_eq(cairn_optim_new(m.r, &c, m.v, 1, &o), CAIRN_E_INVALID);
  cr_assert_null(o);
  cr_assert_eq(cairn_registry_count(m.r, CAIRN_COLL_ALL), NV + 1, "failed calls created variables");
  cairn_registry_free(r2);
  model_free(&m);
}

Test(optim_errors, bad_hyper_parameters) {
  model m;
  model_new(&m);
  static const struct {
    cairn_optim_kind kind;
    const char *field;
  } cases[] = {
      {CAIRN_OPTIM_SGD, "learning_rate"},      {CAIRN_OPTIM_ADAM, "learning_rate"},
      {CAIRN_OPTIM_ADAM, "beta1"},             {CAIRN_OPTIM_ADAM, "beta2"},
      {CAIRN_OPTIM_ADAMW, "epsilon"},          {CAIRN_OPTIM_ADAMW, "weight_decay"},
      {CAIRN_OPTIM_MOMENTUM, "momentum"},      {CAIRN_OPTIM_RMSPROP, "decay"},
      {CAIRN_OPTIM_RMSPROP, "momentum"},       {CAIRN_OPTIM_RMSPROP, "epsilon"},
      {CAIRN_OPTIM_ADAGRAD, "initial_accumulator"}, {CAIRN_OPTIM_SGD, "clip_norm"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    for (int variant = 0; variant < 2; variant++) {
      cairn_optim_config c = cairn_optim_defaults(cases[i].kind);
      const char *f = cases[i].field;
      float bad = variant ? NAN : -0.5f;
      if (strcmp(f, "learning_rate") == 0) c.learning_rate = variant ? NAN : 0.0f;
      if (strcmp(f, "beta1") == 0) c.beta1 = variant ? NAN : 1.0f;
      if (strcmp(f, "beta2") == 0) c.beta2 = bad;
      if (strcmp(f, "epsilon") == 0) c.epsilon = variant ? INFINITY : 0.0f;
      if (strcmp(f, "weight_decay") == 0) c.weight_decay = bad;
      if (strcmp(f, "momentum") == 0) c.momentum = bad;
      if (strcmp(f, "decay") == 0) c.decay = variant ? 1.0f : -0.1f;
      if (strcmp(f, "initial_accumulator") == 0) c.initial_accumulator = variant ? NAN : 0.0f;
      if (strcmp(f, "clip_norm") == 0) c.clip_norm = bad;
      cairn_optim *o = NULL;
      cr_assert_eq(cairn_optim_new(m.r, &c, m.v, NV, &o), CAIRN_E_INVALID, "%s variant %d accepted", f,
                   variant);
      cr_assert_null(o);
      cr_assert(strstr(cairn_errmsg(), f), "errmsg for bad %s: %s", f, cairn_errmsg());
    }
  cairn_optim_config c = cairn_optim_defaults(CAIRN_OPTIM_SGD);
  c.kind = (cairn_optim_kind)99;
  cairn_optim *o = NULL;
  cr_assert_eq(cairn_optim_new(m.r, &c, m.v, NV, &o), CAIRN_E_INVALID);
  /* fields another kind would use are not checked */
  c = cairn_optim_defaults(CAIRN_OPTIM_SGD);
  c.beta1 = 7.0f;
  OK(cairn_optim_new(m.r, &c, m.v, NV, &o));
  cairn_optim_free(o);
  cr_assert_eq(cairn_registry_count(m.r, CAIRN_COLL_ALL), NV);
  model_free(&m);
}

Test(optim_errors, gradient_shape_names_the_variable) {
  cairn_registry *r = NULL;
  OK(cairn_registry_new(3, &r));
  int64_t s20 = 20, s10 = 10, k[2] = {3, 20};
  cairn_var *v[2];
  OK(cairn_var_new(r, "dense/kernel", CAIRN_DTYPE_F32, 2, k, cairn_init_zeros(), CAIRN_COLL_MODEL, &v[0]));
  OK(cairn_var_new(r, "dense/bias", CAIRN_DTYPE_F32, 1, &s20, cairn_init_zeros(), CAIRN_COLL_MODEL, &v[1]));
  cairn_optim_config c = cairn_optim_defaults(CAIRN_OPTIM_SGD);
  cairn_optim *o = NULL;
  OK(cairn_optim_new(r, &c, v, 2, &o));
  OK(cairn_registry_initialize_collection(r, CAIRN_COLL_GLOBAL));
  cairn_tensor *g0 = NULL, *g1 = NULL, *gd = NULL;
  OK(cairn_tensor_new(CAIRN_DTYPE_F32, 2, k, &g0));
  OK(cairn_tensor_new(CAIRN_DTYPE_F32, 1, &s10, &g1));
  OK(cairn_tensor_new(CAIRN_DTYPE_F64, 1, &s20, &gd));
  cairn_tensor *grads[2] = {g0, g1};
  cr_assert_eq(cairn_optim_apply(o, grads, NULL), CAIRN_E_SHAPE);
  cr_assert_str_eq(cairn_errmsg(), "optim_apply: gradient 1 for 'dense/bias' is (10), variable is (20)");
  /* same element count, other rank */
  int64_t k2[1] = {60};
  cairn_tensor *gflat = NULL;
  OK(cairn_tensor_new(CAIRN_DTYPE_F32, 1, k2, &gflat));
  grads[0] = gflat;
  cr_assert_eq(cairn_optim_apply(o, grads, NULL), CAIRN_E_SHAPE);
  cr_assert(strstr(cairn_errmsg(), "'dense/kernel' is (60), variable is (3, 20)"), "errmsg: %s", cairn_errmsg());
  grads[0] = g0;
  grads[1] = gd;
  cr_assert_eq(cairn_optim_apply(o, grads, NULL), CAIRN_E_DTYPE);
  cr_assert(strstr(cairn_errmsg(), "dense/bias"), "errmsg: %s", cairn_errmsg());
  cairn_tensor_free(g0);
  cairn_tensor_free(g1);
  cairn_tensor_free(gd);
  cairn_tensor_free(gflat);
  cairn_optim_free(o);
  cairn_registry_free(r);
}

Test(optim_errors, uninitialized_variable_slot_or_power) {
  model m;
  model_new(&m);
  cairn_optim_config c = cairn_optim_defaults(CAIRN_OPTIM_ADAM);
  cairn_optim *o = NULL;
  OK(cairn_optim_new(m.r, &c, m.v, NV, &o));
  /* nothing initialized: the first variable is named */
  cr_assert_eq(cairn_optim_apply(o, m.g, NULL), CAIRN_E_UNINITIALIZED);
  cr_assert(strstr(cairn_errmsg(), "'dense/kernel'"), "errmsg: %s", cairn_errmsg());
  /* variables initialized, slots not */
  OK(cairn_registry_initialize(m.r, m.v, NV));
  cr_assert_eq(cairn_optim_apply(o, m.g, NULL), CAIRN_E_UNINITIALIZED);
  cr_assert(strstr(cairn_errmsg(), "dense/kernel/Adam"), "errmsg: %s", cairn_errmsg());
  /* slots too, beta powers not */
  for (int k = 0; k < NV; k++) {
    cairn_var *s[2];
    OK(cairn_optim_get_slot(o, m.v[k], "m", &s[0]));
    OK(cairn_optim_get_slot(o, m.v[k], "v", &s[1]));
    OK(cairn_registry_initialize(m.r, s, 2));
  }
  cr_assert_eq(cairn_optim_apply(o, m.g, NULL), CAIRN_E_UNINITIALIZED);
  cr_assert(strstr(cairn_errmsg(), "beta1_power"), "errmsg: %s", cairn_errmsg());
  cairn_var *p[2] = {find(m.r, "beta1_power"), find(m.r, "beta2_power")};
  OK(cairn_registry_initialize(m.r, p, 2));
  OK(cairn_optim_apply(o, m.g, NULL));
  cairn_optim_free(o);
  model_free(&m);
}

/* A failing apply (the last gradient is wrong) changes no weight, slot,
 * beta power, gradient (clipping is on) or step. */
Test(optim_errors, failed_apply_changes_nothing) {
  model m;
  model_new(&m);
  cairn_optim_config c = cairn_optim_defaults(CAIRN_OPTIM_ADAMW);
  c.clip_norm = 0.01f;
  cairn_optim *o = NULL;
  OK(cairn_optim_new(m.r, &c, m.v, NV, &o));
  cairn_var *gs = NULL;
  OK(cairn_registry_global_step(m.r, &gs));
  model_init(&m);
  for (int k = 0; k < NV; k++)
    for (size_t j = 0; j < vsize(m.v[k]); j++) cairn_tensor_f32(m.g[k])[j] = grad(k, j, 1);
  OK(cairn_optim_apply(o, m.g, gs)); /* non-trivial state first */

  cairn_var *all[64];
  size_t nall = cairn_registry_list(m.r, CAIRN_COLL_ALL, all, 64);
  cr_assert_eq(nall, NV + 2 * NV + 2 + 1);
  size_t bytes = 0;
  for (size_t i = 0; i < nall; i++) bytes += cairn_tensor_nbytes(cairn_var_tensor(all[i]));
  for (int k = 0; k < NV; k++) bytes += cairn_tensor_nbytes(m.g[k]);
  unsigned char *snap = malloc(bytes), *now = malloc(bytes);
  cr_assert(snap && now);

  int64_t s5 = 5;
  cairn_tensor *bad = NULL;
  OK(cairn_tensor_new(CAIRN_DTYPE_F32, 1, &s5, &bad));
  for (size_t i = 0; i < 1000; i++) cairn_tensor_f32(m.g[2])[i] = 5.0f; /* would be clipped */
  for (int which = 0; which < 2; which++) {
    size_t off = 0;
    for (size_t i = 0; i < nall; i++) {
      cairn_tensor *t = cairn_var_tensor(all[i]);
      memcpy(snap + off, t->data, cairn_tensor_nbytes(t));
      off += cairn_tensor_nbytes(t);
    }
    for (int k = 0; k < NV; k++) {
      memcpy(snap + off, m.g[k]->data, cairn_tensor_nbytes(m.g[k]));
      off += cairn_tensor_nbytes(m.g[k]);
    }
    cairn_tensor *grads[NV] = {m.g[0], m.g[1], m.g[2]};
    if (which == 0) {
      grads[2] = bad;
      cr_assert_eq(cairn_optim_apply(o, grads, gs), CAIRN_E_SHAPE);
    } else {
      cairn_var_set_initialized(find(m.r, "beta2_power"), 0);
      cr_assert_eq(cairn_optim_apply(o, grads, gs), CAIRN_E_UNINITIALIZED);
      cr_assert(strstr(cairn_errmsg(), "beta2_power"), "errmsg: %s", cairn_errmsg());
    }
    off = 0;
    for (size_t i = 0; i < nall; i++) {
      cairn_tensor *t = cairn_var_tensor(all[i]);
      memcpy(now + off, t->data, cairn_tensor_nbytes(t));
      off += cairn_tensor_nbytes(t);
    }
    for (int k = 0; k < NV; k++) {
      memcpy(now + off, m.g[k]->data, cairn_tensor_nbytes(m.g[k]));
      off += cairn_tensor_nbytes(m.g[k]);
    }
    cr_assert_eq(off, bytes);
    cr_assert_eq(memcmp(snap, now, bytes), 0, "failed apply %d changed state", which);
  }
  cr_assert_eq(cairn_tensor_i64(cairn_var_tensor(gs))[0], 1);
  free(snap);
  free(now);
  cairn_tensor_free(bad);
  cairn_optim_free(o);
  model_free(&m);
}
