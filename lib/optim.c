/* Optimizers with TF 1.x update rules and slot names (see
 * include/cairn/optim.h for the rules). The slots are ordinary variables of
 * the registry, so checkpoints and Savers see them; this object only keeps
 * pointers to them. The element-wise updates are the kernels of the chosen
 * table (lib/kernels/{ref,avx2}/optim_*.c), split into thread-count-
 * independent chunks by cairn__par_for. */
#include "tensor_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cairn/optim.h"
#include "kernels/kernels.h"
#include "optim_impl.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h> /* MXCSR: subnormals flushed during updates */
#endif

/* Variable names are 1..255 bytes (var.h). */
#define OPTIM_NAME_MAX 255

#define OPTIM_KIND_COUNT 6

/* The kind's TF name, the default slot-name suffix. */
static const char *const kind_tf_name[OPTIM_KIND_COUNT] = {
    "GradientDescent", "Momentum", "Adam", "AdamW", "RMSProp", "Adagrad"};

/* Slots per kind and their get_slot names: slot[0] is "<var>/<Name>",
 * slot[1] is "<var>/<Name>_1" (TF's naming of a second slot). */
static const int kind_nslots[OPTIM_KIND_COUNT] = {0, 1, 2, 2, 2, 1};
static const char *const kind_slot_name[OPTIM_KIND_COUNT][2] = {
    {NULL, NULL}, {"momentum", NULL}, {"m", "v"}, {"m", "v"}, {"rms", "momentum"},
    {"accumulator", NULL}};

typedef struct optim_entry {
  cairn_var *var;
  cairn_var *slot[2]; /* NULL past kind_nslots */
  uint16_t *bf16;     /* NULL, or var's bf16 copy (cairn__optim_set_bf16_copy) */
} optim_entry;

struct cairn_optim {
  cairn_optim_config cfg;               /* cfg.name points to name below */
  size_t n;
  optim_entry *e;                       /* (n) */
  cairn_var *beta1_power, *beta2_power; /* Adam, AdamW; NULL otherwise */
  char name[OPTIM_NAME_MAX + 1];
};

static int is_adam(cairn_optim_kind k) { return k == CAIRN_OPTIM_ADAM || k == CAIRN_OPTIM_ADAMW; }

cairn_optim_config cairn_optim_defaults(cairn_optim_kind kind) {
  cairn_optim_config c;
  memset(&c, 0, sizeof c);
  c.kind = kind;
  c.learning_rate = (is_adam(kind) || kind == CAIRN_OPTIM_RMSPROP) ? 0.001f : 0.01f;
  c.momentum = kind == CAIRN_OPTIM_MOMENTUM ? 0.9f : 0.0f;
  c.nesterov = 0;
  c.beta1 = 0.9f;
  c.beta2 = 0.999f;
  c.epsilon = kind == CAIRN_OPTIM_RMSPROP ? 1e-10f : 1e-8f;
  c.weight_decay = kind == CAIRN_OPTIM_ADAMW ? 0.01f : 0.0f;
  c.decay = 0.9f;
  c.initial_accumulator = 0.1f;
  c.clip_norm = 0.0f;
  c.name = NULL;
  return c;
}

/* ---- validation helpers ---- */

/* Hyper-parameter checks; written so that NaN fails each of them. */
static cairn_status bad_param(const char *what, float x, const char *rule) {
  return cairn__fail(CAIRN_E_INVALID, "optim_new: %s is %g, must be %s", what, (double)x, rule);
}
static cairn_status need_positive(const char *what, float x) {
  return x > 0.0f && isfinite(x) ? CAIRN_OK : bad_param(what, x, "> 0 and finite");
}
static cairn_status need_nonnegative(const char *what, float x) {
  return x >= 0.0f && isfinite(x) ? CAIRN_OK : bad_param(what, x, ">= 0 and finite");
}
static cairn_status need_unit(const char *what, float x) { /* [0, 1) */
  return x >= 0.0f && x < 1.0f ? CAIRN_OK : bad_param(what, x, "in [0, 1)");
}

static cairn_status check_config(const cairn_optim_config *c) {
  cairn_status s;
  if ((unsigned)c->kind >= OPTIM_KIND_COUNT)
    return cairn__fail(CAIRN_E_INVALID, "optim_new: unknown optimizer kind %d", (int)c->kind);
  if ((s = need_positive("learning_rate", c->learning_rate))) return s;
  switch (c->kind) {
    case CAIRN_OPTIM_SGD:
      break;
    case CAIRN_OPTIM_MOMENTUM:
      if ((s = need_nonnegative("momentum", c->momentum))) return s;
      break;
    case CAIRN_OPTIM_ADAM:
    case CAIRN_OPTIM_ADAMW:
      if ((s = need_unit("beta1", c->beta1))) return s;
      if ((s = need_unit("beta2", c->beta2))) return s;
      /* TF accepts ε = 0; then a zero second moment gives 0/0. */
      if ((s = need_positive("epsilon", c->epsilon))) return s;
      if (c->kind == CAIRN_OPTIM_ADAMW && (s = need_unit("weight_decay", c->weight_decay))) return s;
      break;
    case CAIRN_OPTIM_RMSPROP:
      if ((s = need_unit("decay", c->decay))) return s;
      if ((s = need_nonnegative("momentum", c->momentum))) return s;
      if ((s = need_positive("epsilon", c->epsilon))) return s;
      break;
    case CAIRN_OPTIM_ADAGRAD:
      if ((s = need_positive("initial_accumulator", c->initial_accumulator))) return s;
      break;
  }
  return need_nonnegative("clip_norm", c->clip_norm);
}

/* The optimizer name becomes part of variable names: the rules of var.h
 * ([A-Za-z0-9_.-/], no leading, trailing or double '/'). */
static cairn_status check_name(const char *name) {
  size_t len = strlen(name);
  if (len == 0) return cairn__fail(CAIRN_E_INVALID, "optim_new: name is empty");
  if (len > OPTIM_NAME_MAX)
    return cairn__fail(CAIRN_E_INVALID, "optim_new: name is %zu bytes, at most %d allowed", len,
                       OPTIM_NAME_MAX);
  for (size_t i = 0; i < len; i++) {
    char ch = name[i];
    int ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
             ch == '_' || ch == '.' || ch == '-' || ch == '/';
    if (!ok) return cairn__fail(CAIRN_E_INVALID, "optim_new: name '%s' has a bad character at %zu", name, i);
  }
  if (name[0] == '/' || name[len - 1] == '/' || strstr(name, "//"))
    return cairn__fail(CAIRN_E_INVALID, "optim_new: name '%s' starts or ends with '/' or has '//'", name);
  return CAIRN_OK;
}

/* Writes "<var>/<name>" (j == 0) or "<var>/<name>_1" (j == 1) to buf, which
 * holds OPTIM_NAME_MAX + 1 bytes. */
static cairn_status slot_var_name(char *buf, const char *var, const char *name, int j) {
  size_t need = strlen(var) + 1 + strlen(name) + (j ? 2 : 0);
  if (need > OPTIM_NAME_MAX)
    return cairn__fail(CAIRN_E_INVALID,
                       "optim_new: slot name for '%s' with optimizer name '%s' would be %zu bytes, at most %d allowed",
                       var, name, need, OPTIM_NAME_MAX);
  strcpy(buf, var);
  strcat(buf, "/");
  strcat(buf, name);
  if (j) strcat(buf, "_1");
  return CAIRN_OK;
}

/* Non-slot variable name: "beta1_power" without a name, "<name>/beta1_power"
 * with one. */
static cairn_status power_var_name(char *buf, const char *name, int explicit_name, int which) {
  const char *base = which == 1 ? "beta1_power" : "beta2_power";
  if (!explicit_name) {
    strcpy(buf, base);
    return CAIRN_OK;
  }
  size_t need = strlen(name) + 1 + strlen(base);
  if (need > OPTIM_NAME_MAX)
    return cairn__fail(CAIRN_E_INVALID, "optim_new: '%s/%s' would be %zu bytes, at most %d allowed",
                       name, base, need, OPTIM_NAME_MAX);
  strcpy(buf, name);
  strcat(buf, "/");
  strcat(buf, base);
  return CAIRN_OK;
}

static cairn_status check_free_name(const cairn_registry *r, const char *vname) {
  cairn_var *found = NULL;
  if (cairn_registry_find(r, vname, &found) == CAIRN_OK)
    return cairn__fail(CAIRN_E_EXISTS,
                       "optim_new: variable '%s' already exists (another optimizer with this name? give it another name)",
                       vname);
  return CAIRN_OK;
}

/* Slot initializer: RMSProp's ms starts at ones (TF 1.x), Adagrad's
 * accumulator at initial_accumulator, everything else at zero. */
static cairn_init slot_init(const cairn_optim_config *c, int j) {
  if (c->kind == CAIRN_OPTIM_RMSPROP && j == 0) return cairn_init_ones();
  if (c->kind == CAIRN_OPTIM_ADAGRAD) return cairn_init_constant((double)c->initial_accumulator);
  return cairn_init_zeros();
}

cairn_status cairn_optim_new(cairn_registry *r, const cairn_optim_config *cfg, cairn_var *const *vars,
                             size_t n, cairn_optim **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "optim_new: out is NULL");
  *out = NULL;
  if (!r) return cairn__fail(CAIRN_E_NULL, "optim_new: registry is NULL");
  if (!cfg) return cairn__fail(CAIRN_E_NULL, "optim_new: config is NULL");
  if (n > 0 && !vars) return cairn__fail(CAIRN_E_NULL, "optim_new: vars is NULL");
  if (n == 0) return cairn__fail(CAIRN_E_INVALID, "optim_new: no variables to optimize");
  cairn_status s = check_config(cfg);
  if (s) return s;
  const int explicit_name = cfg->name != NULL;
  const char *name = explicit_name ? cfg->name : kind_tf_name[cfg->kind];
  if ((s = check_name(name))) return s;

  /* Every check first, so that a failure creates nothing. */
  for (size_t i = 0; i < n; i++) {
    if (!vars[i]) return cairn__fail(CAIRN_E_NULL, "optim_new: vars[%zu] is NULL", i);
    const char *vn = cairn_var_name(vars[i]);
    const cairn_tensor *t = cairn_var_tensor(vars[i]);
    if (t->dtype != CAIRN_DTYPE_F32)
      return cairn__fail(CAIRN_E_DTYPE, "optim_new: variable '%s' is %s, expected f32", vn,
                         cairn_dtype_name(t->dtype));
    cairn_var *found = NULL;
    if (cairn_registry_find(r, vn, &found) != CAIRN_OK || found != vars[i])
      return cairn__fail(CAIRN_E_INVALID, "optim_new: variable '%s' is not in this registry", vn);
    for (size_t j = 0; j < i; j++)
      if (vars[j] == vars[i])
        return cairn__fail(CAIRN_E_INVALID, "optim_new: variable '%s' is listed twice (vars[%zu] and vars[%zu])",
                           vn, j, i);
  }
  const int nslots = kind_nslots[cfg->kind];
  char buf[OPTIM_NAME_MAX + 1];
  for (size_t i = 0; i < n; i++)
    for (int j = 0; j < nslots; j++) {
      if ((s = slot_var_name(buf, cairn_var_name(vars[i]), name, j))) return s;
      if ((s = check_free_name(r, buf))) return s;
    }
  if (is_adam(cfg->kind))
    for (int p = 1; p <= 2; p++) {
      if ((s = power_var_name(buf, name, explicit_name, p))) return s;
      if ((s = check_free_name(r, buf))) return s;
    }

  cairn_optim *o = calloc(1, sizeof *o);
  optim_entry *e = calloc(n, sizeof *e);
  if (!o || !e) {
    free(o);
    free(e);
    return cairn__fail(CAIRN_E_NOMEM, "optim_new: cannot allocate the optimizer for %zu variables", n);
  }
  o->cfg = *cfg;
  strcpy(o->name, name);
  o->cfg.name = o->name;
  o->n = n;
  o->e = e;

  /* Only an allocation failure inside cairn_var_new can fail from here
   * on; var.h has no way to delete a variable, so slots created before it
   * stay in the registry (unused). */
  for (size_t i = 0; i < n; i++) {
    const cairn_tensor *t = cairn_var_tensor(vars[i]);
    e[i].var = vars[i];
    for (int j = 0; j < nslots; j++) {
      (void)slot_var_name(buf, cairn_var_name(vars[i]), name, j);
      s = cairn_var_new(r, buf, CAIRN_DTYPE_F32, t->rank, t->shape, slot_init(cfg, j),
                           CAIRN_COLL_GLOBAL, &e[i].slot[j]);
      if (s) goto fail;
    }
  }
  if (is_adam(cfg->kind)) {
    (void)power_var_name(buf, name, explicit_name, 1);
    s = cairn_var_new(r, buf, CAIRN_DTYPE_F32, 0, NULL, cairn_init_constant((double)cfg->beta1),
                         CAIRN_COLL_GLOBAL, &o->beta1_power);
    if (s) goto fail;
    (void)power_var_name(buf, name, explicit_name, 2);
    s = cairn_var_new(r, buf, CAIRN_DTYPE_F32, 0, NULL, cairn_init_constant((double)cfg->beta2),
                         CAIRN_COLL_GLOBAL, &o->beta2_power);
    if (s) goto fail;
  }
  *out = o;
  return CAIRN_OK;

fail:
  cairn_optim_free(o);
  return s;
}

int cairn__optim_set_bf16_copy(cairn_optim *o, const cairn_var *var, uint16_t *dst) {
  for (size_t i = 0; o && i < o->n; i++)
    if (o->e[i].var == var) {
      o->e[i].bf16 = dst;
      return 0;
    }
  return -1;
}

void cairn_optim_free(cairn_optim *o) {
  if (!o) return;
  free(o->e);
  free(o);
}

void cairn_optim_set_learning_rate(cairn_optim *o, float lr) {
  if (!o) return;
  /* 0 is allowed here (e.g. the start of a warm-up schedule); a negative or
   * non-finite rate is refused and leaves the rate unchanged. */
  if (!(lr >= 0.0f) || !isfinite(lr)) {
    (void)cairn__fail(CAIRN_E_INVALID, "optim_set_learning_rate: %g refused, must be >= 0 and finite",
                      (double)lr);
    return;
  }
  o->cfg.learning_rate = lr;
}

const cairn_optim_config *cairn_optim_get_config(const cairn_optim *o) { return o ? &o->cfg : NULL; }

cairn_status cairn_optim_get_slot(const cairn_optim *o, const cairn_var *var, const char *slot_name,
                                  cairn_var **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "optim_get_slot: out is NULL");
  *out = NULL;
  if (!o) return cairn__fail(CAIRN_E_NULL, "optim_get_slot: optimizer is NULL");
  if (!var) return cairn__fail(CAIRN_E_NULL, "optim_get_slot: var is NULL");
  if (!slot_name) return cairn__fail(CAIRN_E_NULL, "optim_get_slot: slot_name is NULL");
  const optim_entry *e = NULL;
  for (size_t i = 0; i < o->n && !e; i++)
    if (o->e[i].var == var) e = &o->e[i];
  if (!e)
    return cairn__fail(CAIRN_E_NOT_FOUND, "optim_get_slot: variable '%s' is not optimized by '%s'",
                       cairn_var_name(var), o->name);
  for (int j = 0; j < kind_nslots[o->cfg.kind]; j++)
    if (strcmp(kind_slot_name[o->cfg.kind][j], slot_name) == 0) {
      *out = e->slot[j];
      return CAIRN_OK;
    }
  return cairn__fail(CAIRN_E_NOT_FOUND, "optim_get_slot: optimizer '%s' has no slot '%s' (variable '%s')",
                     o->name, slot_name, cairn_var_name(var));
}

/* ---- clipping by global norm ---- */

typedef struct vec_ctx {
  const cairn__kernel_table *k;
  float *x;
  float a;
} vec_ctx;

static double sumsq_range(void *p, size_t lo, size_t hi) {
  const vec_ctx *c = p;
  return c->k->sumsq(c->x + lo, hi - lo);
}

static void scale_range(void *p, size_t lo, size_t hi) {
  const vec_ctx *c = p;
  c->k->scale(c->a, c->x + lo, hi - lo);
}

/* grads are validated f32 tensors. N = √(Σ_i Σ_j g_ij²), summed per tensor
 * in fixed chunks (cairn__par_sum) and over tensors in order, so N has the
 * same bits for any thread count. Under the norm nothing is touched; over
 * it every g is multiplied by clip_norm / N; a non-finite N makes every
 * gradient NaN, as TF's clip_by_global_norm does. */
static void clip_impl(cairn_tensor *const *grads, size_t n, float clip_norm, float *global_norm) {
  const cairn__kernel_table *k = cairn__kernels();
  double ss = 0.0;
  for (size_t i = 0; i < n; i++) {
    vec_ctx c = {k, grads[i]->data, 0.0f};
    ss += cairn__par_sum((size_t)grads[i]->size, sumsq_range, &c);
  }
  double norm = sqrt(ss);
  if (global_norm) *global_norm = (float)norm;
  if (norm <= (double)clip_norm) return;
  float a = isfinite(norm) ? (float)((double)clip_norm / norm) : NAN;
  for (size_t i = 0; i < n; i++) {
    vec_ctx c = {k, grads[i]->data, a};
    cairn__par_for((size_t)grads[i]->size, scale_range, &c);
  }
}

cairn_status cairn_clip_by_global_norm(cairn_tensor *const *grads, size_t n, float clip_norm,
                                       float *global_norm) {
  if (n > 0 && !grads) return cairn__fail(CAIRN_E_NULL, "clip_by_global_norm: grads is NULL");
  if (!(clip_norm > 0.0f) || !isfinite(clip_norm))
    return cairn__fail(CAIRN_E_INVALID, "clip_by_global_norm: clip_norm is %g, must be > 0 and finite",
                       (double)clip_norm);
  for (size_t i = 0; i < n; i++) {
    char what[32];
    snprintf(what, sizeof what, "grads[%zu]", i);
    cairn_status s = cairn__check_f32("clip_by_global_norm", what, grads[i]);
    if (s) return s;
  }
  clip_impl(grads, n, clip_norm, global_norm);
  return CAIRN_OK;
}

/* ---- apply ---- */

typedef struct update_ctx {
  const cairn__kernel_table *k;
  const cairn_optim_config *c;
  float *w, *s0, *s1;
  const float *g;
  uint16_t *bf16; /* NULL, or where the updated chunk goes rounded to bf16 */
  float lr_t;     /* Adam: bias-corrected rate */
} update_ctx;

/* Updates run with subnormal numbers flushed to zero, results (FTZ) and
 * inputs (DAZ), as TF runs every op on the CPU (port::ScopedFlushDenormal in
 * its executor). On Intel CPUs every operation that makes or reads a
 * subnormal takes a microcode assist of ~100 cycles, and training makes
 * them: Adam's m decays into the subnormal range for every unit whose
 * gradient stays 0 (dead ReLU units; ~12 % of m after two Fashion-MNIST
 * epochs). Measured on Emerald Rapids, the Fashion-MNIST demo spent half of
 * its time in the Adam kernel: 3000 steps in 5.0 s, 2.4 s with flushing.
 * MXCSR is per thread: set and restored around each chunk, by the thread
 * that runs it; the ref and AVX2 kernels both obey it. */
#if defined(__x86_64__) || defined(__i386__)
#define FLUSH_BEGIN                                                                                \
  const unsigned mxcsr_saved_ = _mm_getcsr();                                                      \
  _mm_setcsr(mxcsr_saved_ | 0x8040u) /* FTZ (bit 15) | DAZ (bit 6) */
#define FLUSH_END _mm_setcsr(mxcsr_saved_)
#else
#define FLUSH_BEGIN (void)0
#define FLUSH_END (void)0
#endif

static void update_range(void *p, size_t lo, size_t hi) {
  const update_ctx *u = p;
  const cairn_optim_config *c = u->c;
  size_t len = hi - lo;
  float *w = u->w + lo;
  const float *g = u->g + lo;
  FLUSH_BEGIN;
  switch (c->kind) {
    case CAIRN_OPTIM_SGD:
      u->k->sgd(w, g, len, c->learning_rate);
      break;
    case CAIRN_OPTIM_MOMENTUM:
      u->k->momentum(w, u->s0 + lo, g, len, c->learning_rate, c->momentum, c->nesterov != 0);
      break;
    case CAIRN_OPTIM_ADAM:
      u->k->adam(w, u->s0 + lo, u->s1 + lo, g, len, u->lr_t, c->beta1, c->beta2, c->epsilon, 0.0f);
      break;
    case CAIRN_OPTIM_ADAMW:
      u->k->adam(w, u->s0 + lo, u->s1 + lo, g, len, u->lr_t, c->beta1, c->beta2, c->epsilon,
                 c->weight_decay);
      break;
    case CAIRN_OPTIM_RMSPROP:
      u->k->rmsprop(w, u->s0 + lo, u->s1 + lo, g, len, c->learning_rate, c->decay, c->momentum,
                    c->epsilon);
      break;
    case CAIRN_OPTIM_ADAGRAD:
      u->k->adagrad(w, u->s0 + lo, g, len, c->learning_rate);
      break;
  }
  FLUSH_END;
  /* the bf16 copy of the chunk just written, while it is in cache (a
   * separate sweep would read every weight again) */
  if (u->bf16) u->k->f32_to_bf16(w, u->bf16 + lo, len);
}

/* A scalar f32 non-slot variable (beta power) ready to use. */
static cairn_status check_power(const cairn_var *v) {
  const cairn_tensor *t = cairn_var_tensor(v);
  if (t->dtype != CAIRN_DTYPE_F32 || t->size != 1) {
    char b[96];
    return cairn__fail(CAIRN_E_SHAPE, "optim_apply: '%s' is %s %s, expected an f32 scalar", cairn_var_name(v),
                       cairn_dtype_name(t->dtype), cairn_tensor_shape_str(t, b, sizeof b));
  }
  if (!cairn_var_is_initialized(v))
    return cairn__fail(CAIRN_E_UNINITIALIZED, "optim_apply: '%s' is not initialized", cairn_var_name(v));
  return CAIRN_OK;
}

static cairn_status check_entry(const cairn_optim *o, size_t i, const cairn_tensor *g) {
  const optim_entry *e = &o->e[i];
  const char *vn = cairn_var_name(e->var);
  const cairn_tensor *w = cairn_var_tensor(e->var);
  char b1[96], b2[96];
  if (!g) return cairn__fail(CAIRN_E_NULL, "optim_apply: gradient %zu for '%s' is NULL", i, vn);
  if (g->dtype != CAIRN_DTYPE_F32)
    return cairn__fail(CAIRN_E_DTYPE, "optim_apply: gradient %zu for '%s' is %s, expected f32", i, vn,
                       cairn_dtype_name(g->dtype));
  if (!g->data && g->size > 0)
    return cairn__fail(CAIRN_E_NULL, "optim_apply: gradient %zu for '%s' has no data", i, vn);
  if (w->dtype != CAIRN_DTYPE_F32)
    return cairn__fail(CAIRN_E_DTYPE, "optim_apply: variable '%s' is %s, expected f32", vn,
                       cairn_dtype_name(w->dtype));
  if (!cairn_tensor_same_shape(g, w))
    return cairn__fail(CAIRN_E_SHAPE, "optim_apply: gradient %zu for '%s' is %s, variable is %s", i, vn,
                       cairn_tensor_shape_str(g, b1, sizeof b1), cairn_tensor_shape_str(w, b2, sizeof b2));
  if (!cairn_var_is_initialized(e->var))
    return cairn__fail(CAIRN_E_UNINITIALIZED, "optim_apply: variable '%s' is not initialized", vn);
  for (int j = 0; j < kind_nslots[o->cfg.kind]; j++) {
    const cairn_var *sv = e->slot[j];
    const cairn_tensor *st = cairn_var_tensor(sv);
    if (st->dtype != CAIRN_DTYPE_F32 || !cairn_tensor_same_shape(st, w))
      return cairn__fail(CAIRN_E_SHAPE, "optim_apply: slot '%s' is %s %s, variable '%s' is f32 %s",
                         cairn_var_name(sv), cairn_dtype_name(st->dtype),
                         cairn_tensor_shape_str(st, b1, sizeof b1), vn,
                         cairn_tensor_shape_str(w, b2, sizeof b2));
    if (!cairn_var_is_initialized(sv))
      return cairn__fail(CAIRN_E_UNINITIALIZED, "optim_apply: slot '%s' of '%s' is not initialized",
                         cairn_var_name(sv), vn);
  }
  return CAIRN_OK;
}

cairn_status cairn_optim_apply(cairn_optim *o, cairn_tensor *const *grads, cairn_var *global_step) {
  if (!o) return cairn__fail(CAIRN_E_NULL, "optim_apply: optimizer is NULL");
  if (!grads) return cairn__fail(CAIRN_E_NULL, "optim_apply: grads is NULL");

  /* Validate everything before touching anything: a failing call changes
   * no variable, slot, gradient or step. */
  cairn_status s;
  for (size_t i = 0; i < o->n; i++)
    if ((s = check_entry(o, i, grads[i]))) return s;
  if (is_adam(o->cfg.kind)) {
    if ((s = check_power(o->beta1_power))) return s;
    if ((s = check_power(o->beta2_power))) return s;
  }
  if (global_step) {
    const cairn_tensor *t = cairn_var_tensor(global_step);
    if (t->dtype != CAIRN_DTYPE_I64 || t->size != 1) {
      char b[96];
      return cairn__fail(CAIRN_E_DTYPE, "optim_apply: global step '%s' is %s %s, expected an i64 scalar",
                         cairn_var_name(global_step), cairn_dtype_name(t->dtype),
                         cairn_tensor_shape_str(t, b, sizeof b));
    }
    if (!cairn_var_is_initialized(global_step))
      return cairn__fail(CAIRN_E_UNINITIALIZED, "optim_apply: global step '%s' is not initialized",
                         cairn_var_name(global_step));
  }

  if (o->cfg.clip_norm > 0.0f) clip_impl(grads, o->n, o->cfg.clip_norm, NULL);

  update_ctx u;
  memset(&u, 0, sizeof u);
  u.k = cairn__kernels();
  u.c = &o->cfg;
  float *b1p = NULL, *b2p = NULL;
  if (is_adam(o->cfg.kind)) {
    /* lr_t = lr·√(1 − β2^t) / (1 − β1^t), from the stored f32 powers, in
     * double (TF computes it in f32; the two differ by an ulp at most). */
    b1p = cairn_var_tensor(o->beta1_power)->data;
    b2p = cairn_var_tensor(o->beta2_power)->data;
    u.lr_t = (float)((double)o->cfg.learning_rate * sqrt(1.0 - (double)*b2p) / (1.0 - (double)*b1p));
  }
  for (size_t i = 0; i < o->n; i++) {
    const optim_entry *e = &o->e[i];
    const cairn_tensor *w = cairn_var_tensor(e->var);
    u.w = w->data;
    u.g = grads[i]->data;
    u.s0 = e->slot[0] ? cairn_var_tensor(e->slot[0])->data : NULL;
    u.s1 = e->slot[1] ? cairn_var_tensor(e->slot[1])->data : NULL;
    u.bf16 = e->bf16;
    cairn__par_for((size_t)w->size, update_range, &u);
  }
  if (b1p) {
    /* TF's _finish: beta powers advance after every variable is updated. */
    *b1p *= o->cfg.beta1;
    *b2p *= o->cfg.beta2;
  }
  if (global_step) *(int64_t *)cairn_var_tensor(global_step)->data += 1;
  return CAIRN_OK;
}
