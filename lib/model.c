/* Sequential MLP: forward through dense layers and one activation, a loss,
 * backward, and the optimizer — with workspace reused across steps. */
#include "tensor_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cairn/model.h"
#include "gemm_impl.h"
#include "kernels/kernels.h"
#include "model_impl.h"
#include "optim_impl.h"
#include "var_impl.h"

struct cairn_mlp {
  int n;                                  /* dense layers */
  int64_t sizes[CAIRN_MLP_MAX_LAYERS + 1];
  cairn_act act;
  float alpha;
  cairn_loss_kind loss;
  cairn_var *W[CAIRN_MLP_MAX_LAYERS];     /* (sizes[i], sizes[i+1]) */
  cairn_var *b[CAIRN_MLP_MAX_LAYERS];     /* (sizes[i+1]) */
  cairn_tensor *grad[2 * CAIRN_MLP_MAX_LAYERS]; /* dW0, db0, dW1, db1, ... */
  cairn_optim *opt;
  cairn_var *step;
  cairn_grads_fn grads_fn; /* after backward, before apply (NULL: none) */
  void *grads_user;
  /* Workspace for `cap` rows: Z[i] is layer i's pre-activation (B, sizes[i+1]),
   * A[i] = act(Z[i]) for i < n-1; pp[0], pp[1] are (B, max width) buffers
   * that backward alternates between for dZ and dA. */
  int64_t cap;
  float *Z[CAIRN_MLP_MAX_LAYERS], *A[CAIRN_MLP_MAX_LAYERS], *pp[2];
  int64_t max_width;
  cairn_tensor logits; /* what cairn_mlp_forward hands out */
  /* bf16 mode (doc/bf16.md): Wb[i] is W[i] rounded, (sizes[i], sizes[i+1]),
   * written by the optimizer as it updates W[i] and made again when W[i]'s
   * generation moved from Wb_gen[i] (Wb_ok[i] 0: never made). For `bcap`
   * rows: Xb the input rounded (B, sizes[0]), Ab[i] = A[i] rounded,
   * dzb[i] = dZ_i rounded (B, sizes[i+1]; one per layer, so that the
   * oracle of tests/test_model.c sees every product's inputs). ws: the
   * reference engine's. */
  cairn_precision prec;
  uint16_t *Wb[CAIRN_MLP_MAX_LAYERS];
  uint64_t Wb_gen[CAIRN_MLP_MAX_LAYERS];
  int Wb_ok[CAIRN_MLP_MAX_LAYERS];
  int64_t bcap;
  uint16_t *Xb, *Ab[CAIRN_MLP_MAX_LAYERS], *dzb[CAIRN_MLP_MAX_LAYERS];
  cairn__bf16_ws ws;
};

static void free_workspace(cairn_mlp *m) {
  for (int i = 0; i < m->n; i++) {
    cairn_free(m->Z[i]);
    cairn_free(m->A[i]);
    m->Z[i] = m->A[i] = NULL;
  }
  cairn_free(m->pp[0]);
  cairn_free(m->pp[1]);
  m->pp[0] = m->pp[1] = NULL;
  m->cap = 0;
}

static void free_bf16_workspace(cairn_mlp *m) {
  for (int i = 0; i < m->n; i++) {
    cairn_free(m->Ab[i]);
    cairn_free(m->dzb[i]);
    m->Ab[i] = m->dzb[i] = NULL;
  }
  cairn_free(m->Xb);
  m->Xb = NULL;
  m->bcap = 0;
}

void cairn_mlp_free(cairn_mlp *m) {
  if (!m) return;
  free_workspace(m);
  free_bf16_workspace(m);
  cairn__bf16_ws_free(&m->ws);
  for (int i = 0; i < m->n; i++) cairn_free(m->Wb[i]);
  for (int i = 0; i < 2 * m->n; i++) cairn_tensor_free(m->grad[i]);
  cairn_optim_free(m->opt);
  free(m);
}

cairn_status cairn_mlp_new(cairn_registry *r, const cairn_mlp_config *cfg, cairn_mlp **out) {
  const char *fn = "mlp_new";
  if (!out) return cairn__fail(CAIRN_E_NULL, "%s: out is NULL", fn);
  *out = NULL;
  if (!r || !cfg) return cairn__fail(CAIRN_E_NULL, "%s: %s is NULL", fn, r ? "cfg" : "registry");
  if (cfg->n_layers < 1 || cfg->n_layers > CAIRN_MLP_MAX_LAYERS)
    return cairn__fail(CAIRN_E_INVALID, "%s: %d layers; need 1..%d", fn, cfg->n_layers, CAIRN_MLP_MAX_LAYERS);
  if (!cfg->sizes) return cairn__fail(CAIRN_E_NULL, "%s: sizes is NULL", fn);
  for (int i = 0; i <= cfg->n_layers; i++)
    if (cfg->sizes[i] < 1 || cfg->sizes[i] > (1 << 24))
      return cairn__fail(CAIRN_E_INVALID, "%s: width %d is %lld; need 1..%d", fn, i, (long long)cfg->sizes[i], 1 << 24);
  if ((unsigned)cfg->hidden_act > CAIRN_ACT_GELU_TANH)
    return cairn__fail(CAIRN_E_INVALID, "%s: hidden activation must be elementwise, got %s", fn,
                       cairn_act_name(cfg->hidden_act));
  if ((unsigned)cfg->loss > CAIRN_LOSS_MSE) return cairn__fail(CAIRN_E_INVALID, "%s: unknown loss %d", fn, (int)cfg->loss);
  if ((unsigned)cfg->precision > CAIRN_PRECISION_BF16)
    return cairn__fail(CAIRN_E_INVALID, "%s: precision is %d; use CAIRN_PRECISION_F32 (0) or CAIRN_PRECISION_BF16", fn,
                       (int)cfg->precision);

  cairn_mlp *m = calloc(1, sizeof *m);
  if (!m) return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  m->n = cfg->n_layers;
  m->act = cfg->hidden_act;
  m->alpha = cfg->act_alpha;
  m->loss = cfg->loss;
  memcpy(m->sizes, cfg->sizes, (size_t)(m->n + 1) * sizeof m->sizes[0]);
  for (int i = 0; i <= m->n; i++)
    if (m->sizes[i] > m->max_width) m->max_width = m->sizes[i];

  cairn_status s = CAIRN_OK;
  cairn_var *vars[2 * CAIRN_MLP_MAX_LAYERS];
  for (int i = 0; i < m->n && !s; i++) {
    /* tf.layers.dense names successive layers dense, dense_1, dense_2, ... */
    char layer[200], name[256];
    if (i == 0)
      snprintf(layer, sizeof layer, "%s%sdense", cfg->scope ? cfg->scope : "", cfg->scope ? "/" : "");
    else
      snprintf(layer, sizeof layer, "%s%sdense_%d", cfg->scope ? cfg->scope : "", cfg->scope ? "/" : "", i);
    int64_t wshape[2] = {m->sizes[i], m->sizes[i + 1]};
    snprintf(name, sizeof name, "%s/kernel", layer);
    s = cairn_var_new(r, name, CAIRN_DTYPE_F32, 2, wshape, cairn_init_glorot_uniform(), CAIRN_COLL_MODEL, &m->W[i]);
    if (s) break;
    snprintf(name, sizeof name, "%s/bias", layer);
    s = cairn_var_new(r, name, CAIRN_DTYPE_F32, 1, &wshape[1], cairn_init_zeros(), CAIRN_COLL_MODEL, &m->b[i]);
    if (s) break;
    vars[2 * i] = m->W[i];
    vars[2 * i + 1] = m->b[i];
    if ((s = cairn_tensor_new(CAIRN_DTYPE_F32, 2, wshape, &m->grad[2 * i])) ||
        (s = cairn_tensor_new(CAIRN_DTYPE_F32, 1, &wshape[1], &m->grad[2 * i + 1])))
      break;
  }
  if (!s) s = cairn_optim_new(r, &cfg->optim, vars, (size_t)(2 * m->n), &m->opt);
  if (!s) s = cairn_registry_global_step(r, &m->step);
  if (!s) s = cairn_mlp_set_precision(m, cfg->precision);
  if (s) {
    cairn_mlp_free(m);
    return s; /* the failing call set the message */
  }
  *out = m;
  return CAIRN_OK;
}

/* Makes the workspace hold B rows; allocates only when B exceeds it. */
static cairn_status ensure_workspace(cairn_mlp *m, int64_t B) {
  if (B <= m->cap) return CAIRN_OK;
  free_workspace(m);
  for (int i = 0; i < m->n; i++) {
    size_t bytes = (size_t)B * (size_t)m->sizes[i + 1] * sizeof(float);
    m->Z[i] = cairn_alloc(bytes);
    m->A[i] = i < m->n - 1 ? cairn_alloc(bytes) : NULL;
    if (!m->Z[i] || (i < m->n - 1 && !m->A[i])) goto nomem;
  }
  for (int j = 0; j < 2; j++)
    if (!(m->pp[j] = cairn_alloc((size_t)B * (size_t)m->max_width * sizeof(float)))) goto nomem;
  m->cap = B;
  return CAIRN_OK;
nomem:
  free_workspace(m);
  return cairn__fail(CAIRN_E_NOMEM, "mlp: cannot allocate workspace for a batch of %lld", (long long)B);
}

/* A (rows, cols) f32 view; cannot fail for the shapes used here. */
static cairn_tensor view2(float *p, int64_t rows, int64_t cols) {
  cairn_tensor t;
  int64_t shape[2] = {rows, cols};
  cairn_status s = cairn_tensor_view(&t, p, CAIRN_DTYPE_F32, 2, shape);
  (void)s;
  return t;
}

static cairn_status check_ready(const cairn_mlp *m, const char *fn, const cairn_tensor *X) {
  cairn_status s;
  if ((s = cairn__check_f32(fn, "X", X)) || (s = cairn__check_rank(fn, "X", X, 2))) return s;
  if (X->shape[1] != m->sizes[0]) {
    char b[96];
    return cairn__fail(CAIRN_E_SHAPE, "%s: X is %s, the model takes (B, %lld)", fn, cairn_tensor_shape_str(X, b, sizeof b),
                       (long long)m->sizes[0]);
  }
  if (X->shape[0] == 0) return cairn__fail(CAIRN_E_INVALID, "%s: empty batch", fn);
  for (int i = 0; i < m->n; i++) {
    const cairn_var *v = !cairn_var_is_initialized(m->W[i]) ? m->W[i] : !cairn_var_is_initialized(m->b[i]) ? m->b[i] : NULL;
    if (v)
      return cairn__fail(CAIRN_E_UNINITIALIZED, "%s: variable '%s' is not initialized (run the initializers or restore)",
                         fn, cairn_var_name(v));
  }
  return CAIRN_OK;
}

static cairn_status forward_bf16(cairn_mlp *m, const cairn_tensor *X, int keep);

/* Z[i] = in·W + b, A[i] = act(Z[i]); the logits are Z[n-1]. keep: Z and
 * A are needed by a backward pass (without it, a fusable activation runs
 * in place on Z, and bf16 skips A). */
static cairn_status forward(cairn_mlp *m, const cairn_tensor *X, int keep) {
  if (m->prec == CAIRN_PRECISION_BF16) return forward_bf16(m, X, keep);
  int64_t B = X->shape[0];
  cairn_status s = ensure_workspace(m, B);
  cairn_tensor in = *X;
  for (int i = 0; !s && i < m->n; i++) {
    cairn_tensor z = view2(m->Z[i], B, m->sizes[i + 1]);
    if (i == m->n - 1) {
      s = cairn_dense_forward(&in, cairn_var_tensor(m->W[i]), cairn_var_tensor(m->b[i]), &z);
      break;
    }
    /* the activation runs on each GEMM block while it is in cache; when no
     * backward pass needs Z (inference), in place on Z: the block is then
     * written once, not read from Z and written to a second buffer */
    const int in_place = !keep && cairn__act_fusable(m->act);
    cairn_tensor a = view2(in_place ? m->Z[i] : m->A[i], B, m->sizes[i + 1]);
    s = cairn__dense_forward_act(&in, cairn_var_tensor(m->W[i]), cairn_var_tensor(m->b[i]), m->act, m->alpha, &z, &a);
    if (!s && !cairn__act_fusable(m->act)) s = cairn_act_forward(m->act, m->alpha, &z, &a);
    in = a;
  }
  return s;
}

/* forward() with the oneDNN runs' signal masking done once for the pass
 * (cairn__dnnl_hold_signals: two system calls a pass instead of two a
 * product) */
static cairn_status forward_held(cairn_mlp *m, const cairn_tensor *X, int keep) {
  cairn__dnnl_hold_signals();
  cairn_status s = forward(m, X, keep);
  cairn__dnnl_release_signals();
  return s;
}

/* ---- bf16 mode ---- */

cairn_status cairn_mlp_set_precision(cairn_mlp *m, cairn_precision p) {
  if (!m) return cairn__fail(CAIRN_E_NULL, "mlp_set_precision: model is NULL");
  if ((unsigned)p > CAIRN_PRECISION_BF16)
    return cairn__fail(CAIRN_E_INVALID, "mlp_set_precision: precision is %d; use CAIRN_PRECISION_F32 (0) or "
                       "CAIRN_PRECISION_BF16", (int)p);
  if (p == CAIRN_PRECISION_BF16)
    for (int i = 0; i < m->n; i++) {
      if (m->Wb[i]) continue;
      m->Wb[i] = cairn_alloc((size_t)m->sizes[i] * (size_t)m->sizes[i + 1] * sizeof(uint16_t));
      if (!m->Wb[i])
        return cairn__fail(CAIRN_E_NOMEM, "mlp_set_precision: cannot allocate the bf16 copy of '%s' (%lld x %lld)",
                           cairn_var_name(m->W[i]), (long long)m->sizes[i], (long long)m->sizes[i + 1]);
      m->Wb_ok[i] = 0;
    }
  /* the optimizer writes the copies only while they are used; a copy left
   * behind in fp32 mode is made again when bf16 comes back */
  for (int i = 0; i < m->n; i++) {
    (void)cairn__optim_set_bf16_copy(m->opt, m->W[i], p == CAIRN_PRECISION_BF16 ? m->Wb[i] : NULL);
    if (p != CAIRN_PRECISION_BF16) m->Wb_ok[i] = 0;
  }
  m->prec = p;
  return CAIRN_OK;
}

cairn_precision cairn_mlp_precision(const cairn_mlp *m) { return m ? m->prec : CAIRN_PRECISION_F32; }

int cairn__mlp_bf16_view(const cairn_mlp *m, int i, cairn__mlp_bf16_bufs *out) {
  if (!m || m->prec != CAIRN_PRECISION_BF16 || i < 0 || i >= m->n || !m->bcap) return -1;
  out->in = i == 0 ? m->Xb : m->Ab[i - 1];
  out->w = m->Wb[i];
  out->dz = m->dzb[i];
  out->z = m->Z[i];
  out->a = i < m->n - 1 ? m->A[i] : NULL;
  out->ab = i < m->n - 1 ? m->Ab[i] : NULL;
  return 0;
}

static cairn_status ensure_bf16_workspace(cairn_mlp *m, int64_t B) {
  if (B <= m->bcap) return CAIRN_OK;
  free_bf16_workspace(m);
  m->Xb = cairn_alloc((size_t)B * (size_t)m->sizes[0] * sizeof(uint16_t));
  int ok = m->Xb != NULL;
  for (int i = 0; ok && i < m->n; i++) {
    const size_t bytes = (size_t)B * (size_t)m->sizes[i + 1] * sizeof(uint16_t);
    ok = (m->dzb[i] = cairn_alloc(bytes)) != NULL && (i == m->n - 1 || (m->Ab[i] = cairn_alloc(bytes)) != NULL);
  }
  if (!ok) {
    free_bf16_workspace(m);
    return cairn__fail(CAIRN_E_NOMEM, "mlp: cannot allocate the bf16 workspace for a batch of %lld", (long long)B);
  }
  m->bcap = B;
  return CAIRN_OK;
}

/* Makes again the bf16 kernels whose fp32 master was written from outside
 * the optimizer since their copy was made (or that were never made). */
static void refresh_bf16_weights(cairn_mlp *m) {
  for (int i = 0; i < m->n; i++) {
    const uint64_t g = cairn__var_generation(m->W[i]);
    if (m->Wb_ok[i] && m->Wb_gen[i] == g) continue;
    cairn__bf16_round(cairn_var_tensor(m->W[i])->data, m->Wb[i], (size_t)m->sizes[i] * (size_t)m->sizes[i + 1]);
    m->Wb_gen[i] = g;
    m->Wb_ok[i] = 1;
  }
}

/* The epilogue of a hidden layer's bf16 GEMM, per finished block of Z:
 * a = act(z) (fp32; in place on z for inference, where A is not kept),
 * then ab = a rounded: the next product's input, made while in cache. */
struct bf16_ep {
  const cairn__kernel_table *k;
  cairn_act act;
  float alpha;
  float *z, *a; /* (B, out) */
  uint16_t *ab; /* (B, out) */
  int out;
};
static void bf16_ep_block(void *p, int r0, int r1, int c0, int c1) {
  const struct bf16_ep *e = p;
  const size_t w = (size_t)(c1 - c0);
  const int whole = c0 == 0 && c1 == e->out;
  for (int r = r0; r < r1; r += whole ? r1 - r0 : 1) {
    const size_t off = (size_t)r * (size_t)e->out + (size_t)c0, len = whole ? (size_t)(r1 - r0) * w : w;
    if (e->act == CAIRN_ACT_IDENTITY) {
      if (e->a != e->z) memcpy(e->a + off, e->z + off, len * sizeof(float));
    } else {
      cairn__act_fwd_span(e->k, e->act, e->alpha, e->z + off, e->a + off, len);
    }
    e->k->f32_to_bf16(e->a + off, e->ab + off, len);
  }
}

static cairn_status bf16_failed(const char *what, int layer) {
  return cairn__fail(CAIRN_E_NOMEM, "mlp: the bf16 product %s of layer %d could not run (out of memory)", what, layer);
}

/* forward() in bf16: Z[i] = in_b·W_b + b, A[i] = act(Z[i]) (kept only when
 * `keep`, for the backward), Ab[i] = A[i] rounded. */
static cairn_status forward_bf16(cairn_mlp *m, const cairn_tensor *X, int keep) {
  const int64_t B = X->shape[0];
  cairn_status s = ensure_workspace(m, B);
  if (!s) s = ensure_bf16_workspace(m, B);
  if (s) return s;
  refresh_bf16_weights(m);
  cairn__bf16_round(X->data, m->Xb, (size_t)B * (size_t)m->sizes[0]);
  const uint16_t *in = m->Xb;
  for (int i = 0; i < m->n; i++) {
    const int K = (int)m->sizes[i], N = (int)m->sizes[i + 1];
    const float *bias = cairn_var_tensor(m->b[i])->data;
    struct bf16_ep e = {cairn__kernels(), m->act, m->alpha, m->Z[i], keep ? m->A[i] : m->Z[i], m->Ab[i], N};
    cairn__gemm_epilogue ep = {bf16_ep_block, &e};
    const int last = i == m->n - 1;
    if (cairn__gemm_bf16(0, 0, (int)B, N, K, in, K, m->Wb[i], N, 0, m->Z[i], N, bias, last ? NULL : &ep, &m->ws))
      return bf16_failed("X·W", i);
    in = m->Ab[i];
  }
  return CAIRN_OK;
}

/* dW_i = in_bᵀ·dZ_b, db_i = Σ_B dZ (fp32; unless db_done), and dA_{i-1} =
 * dZ_b·W_bᵀ when i > 0 (into da, (B, sizes[i])). */
static cairn_status backward_bf16_layer(cairn_mlp *m, int i, int64_t B, const float *dz, float *da, int db_done) {
  const int in = (int)m->sizes[i], out = (int)m->sizes[i + 1];
  cairn__bf16_round(dz, m->dzb[i], (size_t)B * (size_t)out);
  const uint16_t *x = i == 0 ? m->Xb : m->Ab[i - 1];
  if (da && cairn__gemm_bf16(0, 1, (int)B, in, out, m->dzb[i], out, m->Wb[i], out, 0, da, in, NULL, NULL, &m->ws))
    return bf16_failed("dZ·Wᵀ", i);
  if (cairn__gemm_bf16(1, 0, in, out, (int)B, x, in, m->dzb[i], out, 0, m->grad[2 * i]->data, out, NULL, NULL, &m->ws))
    return bf16_failed("Xᵀ·dZ", i);
  if (db_done) return CAIRN_OK;
  memset(m->grad[2 * i + 1]->data, 0, (size_t)out * sizeof(float));
  cairn__dense_bias_grad(dz, m->grad[2 * i + 1]->data, (size_t)B, (size_t)out);
  return CAIRN_OK;
}

static cairn_status loss_of(const cairn_mlp *m, const cairn_tensor *logits, const cairn_tensor *labels, float *loss,
                            cairn_tensor *dlogits) {
  switch (m->loss) {
    case CAIRN_LOSS_SPARSE_SOFTMAX_XENT: return cairn_loss_sparse_softmax_xent(logits, labels, loss, dlogits);
    case CAIRN_LOSS_SOFTMAX_XENT: return cairn_loss_softmax_xent(logits, labels, loss, dlogits);
    case CAIRN_LOSS_SIGMOID_XENT: return cairn_loss_sigmoid_xent(logits, labels, loss, dlogits);
    case CAIRN_LOSS_MSE: return cairn_loss_mse(logits, labels, loss, dlogits);
  }
  return cairn__fail(CAIRN_E_INVALID, "mlp: unknown loss %d", (int)m->loss);
}

cairn_status cairn_mlp_forward(cairn_mlp *m, const cairn_tensor *X, const cairn_tensor **logits) {
  if (!m || !logits) return cairn__fail(CAIRN_E_NULL, "mlp_forward: %s is NULL", m ? "logits" : "model");
  cairn_status s = check_ready(m, "mlp_forward", X);
  if (!s) s = forward_held(m, X, 0);
  if (s) return s;
  /* The returned view lives in the model so the pointer stays valid. */
  m->logits = view2(m->Z[m->n - 1], X->shape[0], m->sizes[m->n]);
  *logits = &m->logits;
  return CAIRN_OK;
}

/* After forward(m, X, 1): the loss into *lp and backward through every
 * layer into m->grad. */
static cairn_status backward(cairn_mlp *m, const cairn_tensor *X, const cairn_tensor *labels, float *lp) {
  cairn_status s;
  const int64_t B = X->shape[0];
  const int n = m->n;
  /* dZ of the last layer = dLoss/dlogits, in pp[0]. */
  int cur = 0;
  cairn_tensor logits = view2(m->Z[n - 1], B, m->sizes[n]);
  cairn_tensor dz = view2(m->pp[cur], B, m->sizes[n]);
  float l;
  if ((s = loss_of(m, &logits, labels, &l, &dz))) return s;
  /* db_i already summed (by the activation's backward sweep below) */
  int db_done = 0;
  const int fuse_db = cairn__act_bwd_colsum_fusable(m->act);
  for (int i = n - 1; i >= 0; i--) {
    cairn_tensor in = i == 0 ? *X : view2(m->A[i - 1], B, m->sizes[i]);
    cairn_tensor da = view2(m->pp[cur ^ 1], B, m->sizes[i]);
    /* dA_{i-1} = dZ_i·W_iᵀ (not needed below the first layer),
     * dW_i = A_{i-1}ᵀ·dZ_i, db_i = Σ_B dZ_i (overwritten, no zeroing pass). */
    if (m->prec == CAIRN_PRECISION_BF16)
      s = backward_bf16_layer(m, i, B, dz.data, i > 0 ? da.data : NULL, db_done);
    else
      s = cairn__dense_backward(&in, cairn_var_tensor(m->W[i]), &dz, i > 0 ? &da : NULL, m->grad[2 * i],
                                db_done ? NULL : m->grad[2 * i + 1], 0);
    if (s) return s;
    if (i == 0) break;
    /* dZ_{i-1} = dA_{i-1} ⊙ act'(Z_{i-1}), in place; with an arithmetic
     * derivative, db_{i-1} = Σ_B dZ_{i-1} in the same sweep (a separate
     * pass read dZ again: 0.5-0.8 % of the step on a Zen 5) */
    cairn_tensor z = view2(m->Z[i - 1], B, m->sizes[i]);
    if (fuse_db)
      cairn__act_backward_colsum(m->act, m->alpha, z.data, in.data, da.data, da.data, m->grad[2 * i - 1]->data,
                                 (size_t)B, (size_t)m->sizes[i]);
    else if ((s = cairn_act_backward(m->act, m->alpha, &z, &in, &da, &da)))
      return s;
    db_done = fuse_db;
    dz = da;
    cur ^= 1;
  }
  *lp = l;
  return CAIRN_OK;
}

/* The loss l and the gradients of the batch into m->grad; its products
 * with the signals held once (forward_held). */
static cairn_status forward_backward(cairn_mlp *m, const cairn_tensor *X, const cairn_tensor *labels, float *lp) {
  cairn__dnnl_hold_signals();
  cairn_status s = forward(m, X, 1);
  if (!s) s = backward(m, X, labels, lp);
  cairn__dnnl_release_signals();
  return s;
}

cairn_status cairn_mlp_train_step(cairn_mlp *m, const cairn_tensor *X, const cairn_tensor *labels, float *loss) {
  if (!m) return cairn__fail(CAIRN_E_NULL, "mlp_train_step: model is NULL");
  cairn_status s = check_ready(m, "mlp_train_step", X);
  float l;
  if (!s) s = forward_backward(m, X, labels, &l);
  if (s) return s;
  if (m->grads_fn && (s = m->grads_fn(m->grads_user, m->grad, (size_t)(2 * m->n)))) return s;
  if ((s = cairn_optim_apply(m->opt, m->grad, m->step))) return s;
  if (loss) *loss = l;
  return CAIRN_OK;
}

cairn_status cairn_mlp_evaluate(cairn_mlp *m, const cairn_tensor *X, const cairn_tensor *labels, float *loss,
                                float *accuracy) {
  if (!m) return cairn__fail(CAIRN_E_NULL, "mlp_evaluate: model is NULL");
  cairn_status s = check_ready(m, "mlp_evaluate", X);
  if (!s) s = forward_held(m, X, 0);
  if (s) return s;
  cairn_tensor logits = view2(m->Z[m->n - 1], X->shape[0], m->sizes[m->n]);
  float l = 0.0f, acc = 0.0f;
  if ((s = loss_of(m, &logits, labels, &l, NULL))) return s;
  if (m->loss == CAIRN_LOSS_SPARSE_SOFTMAX_XENT && (s = cairn_metric_accuracy(&logits, labels, &acc))) return s;
  if (loss) *loss = l;
  if (accuracy) *accuracy = acc;
  return CAIRN_OK;
}

void cairn_mlp_set_grads_hook(cairn_mlp *m, cairn_grads_fn fn, void *user) {
  if (!m) return;
  m->grads_fn = fn;
  m->grads_user = fn ? user : NULL;
}

cairn_optim *cairn_mlp_optimizer(const cairn_mlp *m) { return m ? m->opt : NULL; }
cairn_var *cairn_mlp_global_step(const cairn_mlp *m) { return m ? m->step : NULL; }
cairn_var *cairn_mlp_kernel(const cairn_mlp *m, int i) { return m && i >= 0 && i < m->n ? m->W[i] : NULL; }
cairn_var *cairn_mlp_bias(const cairn_mlp *m, int i) { return m && i >= 0 && i < m->n ? m->b[i] : NULL; }

int64_t cairn_mlp_num_params(const cairn_mlp *m) {
  int64_t p = 0;
  for (int i = 0; m && i < m->n; i++) p += m->sizes[i] * m->sizes[i + 1] + m->sizes[i + 1];
  return p;
}
