/* cairn-fmnist/common.c — what the subcommands share (common.h): errors,
 * the Fashion-MNIST data, the model, the architecture a checkpoint holds. */
#define _POSIX_C_SOURCE 200809L

#include "common.h"

#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dist.h"

static const char *const FILES[4] = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                                     "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"};

/* ---- errors ------------------------------------------------------------------ */

int report_error(const char *what, cairn_status st, const char *handle_msg) {
  const char *detail = handle_msg && *handle_msg ? handle_msg : cairn_errmsg();
  fprintf(stderr, PROG ": %s: %s%s%s\n", what, cairn_status_str(st), *detail ? ": " : "", detail);
  return 1;
}

int session_finish(cairn_monitored_session *ms, const char *what, cairn_status st) {
  if (st == CAIRN_OK) {
    if ((st = cairn_monitored_session_close_with(ms, CAIRN_OK)) == CAIRN_OK) return 0;
    return report_error("closing", st, cairn_monitored_session_errmsg(ms));
  }
  report_error(what, st, cairn_monitored_session_errmsg(ms));
  cairn_status st2 = cairn_monitored_session_close_with(ms, st);
  if (st2 != st) report_error("closing", st2, cairn_monitored_session_errmsg(ms));
  return 1;
}

double now_secs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- data ----------------------------------------------------------------------------------- */

void data_free(data *d) {
  cairn_tensor_free(d->xtr_owner);
  cairn_tensor_free(d->xte_owner);
  cairn_tensor_free(d->ytr);
  cairn_tensor_free(d->yte);
}

static int load_labels(const char *path, int64_t n, cairn_tensor **out);

/* Images and their labels. Every shape is checked on the file's own dtype
 * (u8 for Fashion-MNIST) before the images are widened to f32, which
 * quadruples them: a file that does not fit costs only what it holds. */
static int load_images(const char *path, const char *label_path, cairn_tensor **owner, cairn_tensor *view,
                       cairn_tensor **labels, int64_t *features) {
  cairn_tensor *raw;
  cairn_status st = cairn_idx_read(path, 0, &raw);
  if (st) return report_error("reading images", st, NULL);
  int rank = raw->rank;
  int64_t n = raw->shape[0], f = 1;
  for (int i = 1; i < rank; i++) f *= raw->shape[i];
  if (rank < 2) {
    fprintf(stderr, PROG ": %s: expected images (N, rows, cols), got rank %d\n", path, rank);
    cairn_tensor_free(raw);
    return 1;
  }
  if (*features && f != *features) {
    fprintf(stderr, PROG ": %s: images of %lld pixels, the training images have %lld\n", path, (long long)f,
            (long long)*features);
    cairn_tensor_free(raw);
    return 1;
  }
  if (load_labels(label_path, n, labels)) {
    cairn_tensor_free(raw);
    return 1;
  }
  st = cairn_tensor_to_f32(raw, 1.0f / 255.0f, owner);
  cairn_tensor_free(raw);
  if (st) return report_error("converting images", st, NULL);
  *features = f;
  int64_t s2[2] = {n, f};
  if ((st = cairn_tensor_view(view, cairn_tensor_f32(*owner), CAIRN_DTYPE_F32, 2, s2)) != CAIRN_OK)
    return report_error("images", st, NULL);
  return 0;
}

static int load_labels(const char *path, int64_t n, cairn_tensor **out) {
  cairn_tensor *raw;
  cairn_status st = cairn_idx_read(path, 0, &raw);
  if (st) return report_error("reading labels", st, NULL);
  if (raw->rank != 1 || raw->shape[0] != n) { /* before widening to i32 */
    fprintf(stderr, PROG ": %s: expected %lld labels (one per image)\n", path, (long long)n);
    cairn_tensor_free(raw);
    return 1;
  }
  st = cairn_tensor_to_labels(raw, CLASSES, out);
  cairn_tensor_free(raw);
  if (st) return report_error("converting labels", st, NULL);
  return 0;
}

int data_load(data *d, const char *dir) {
  memset(d, 0, sizeof *d);
  char path[4][4096];
  for (int i = 0; i < 4; i++) {
    if ((size_t)snprintf(path[i], sizeof path[i], "%s/%s", dir, FILES[i]) >= sizeof path[i]) {
      fprintf(stderr, PROG ": --data-dir is too long\n");
      return 1;
    }
    if (access(path[i], R_OK) != 0) {
      fprintf(stderr,
              PROG ": the Fashion-MNIST data set is missing: cannot read %s: %s\n" PROG
                   ": install it with 'apt-get install dataset-fashion-mnist' (files in " DEFAULT_DATA_DIR
                   "), or pass --data-dir DIR holding %s, %s, %s and %s\n",
              path[i], strerror(errno), FILES[0], FILES[1], FILES[2], FILES[3]);
      return 1;
    }
  }
  if (load_images(path[0], path[1], &d->xtr_owner, &d->xtr, &d->ytr, &d->features) ||
      load_images(path[2], path[3], &d->xte_owner, &d->xte, &d->yte, &d->features))
    return 1;
  return 0;
}

/* ---- the model ---------------------------------------------------------------------------- */

static cairn_status next_batch(void *user, const cairn_tensor **x, const cairn_tensor **y) {
  batches *b = user;
  *x = &b->xs;
  *y = &b->ys;
  return cairn_dataset_next(b->ds, b->xb, b->yb);
}

/* The published training loss: the mean over the ranks (every rank takes
   part in each step's reduction). */
static cairn_status mean_loss(void *user, double *loss) {
  (void)user;
  return fmnist_dist_mean_loss(loss);
}

int model_new(model *m, int64_t features, const int64_t *hidden, int n_hidden, uint64_t seed,
              cairn_precision precision) {
  memset(m, 0, sizeof *m);
  int64_t sizes[CAIRN_MLP_MAX_LAYERS + 1];
  sizes[0] = features;
  for (int i = 0; i < n_hidden; i++) sizes[i + 1] = hidden[i];
  sizes[n_hidden + 1] = CLASSES;
  m->n_layers = n_hidden + 1;
  cairn_mlp_config cfg = {.n_layers = m->n_layers, .sizes = sizes, .hidden_act = CAIRN_ACT_RELU,
                          .loss = CAIRN_LOSS_SPARSE_SOFTMAX_XENT, .optim = cairn_optim_defaults(CAIRN_OPTIM_ADAM)};
  cfg.optim.learning_rate = 1e-3f;
  cfg.precision = precision;
  cairn_status s = cairn_registry_new(seed, &m->reg);
  if (!s) s = cairn_mlp_new(m->reg, &cfg, &m->mlp);
  cairn_mlp_op_options to = cairn_mlp_op_options_default();
  to.batch_fn = next_batch;
  to.batch_user = &m->b;
  to.loss_fn = mean_loss;
  if (!s) s = cairn_op_new_mlp_train(m->mlp, &to, &m->train);
  if (!s) s = cairn_op_new_mlp_eval(m->mlp, NULL, &m->eval);
  return s ? report_error("model", s, NULL) : 0;
}

void model_free(model *m) {
  cairn_op_free(m->train);
  cairn_op_free(m->eval);
  cairn_mlp_free(m->mlp);
  cairn_registry_free(m->reg);
}

/* ---- the architecture a checkpoint holds --------------------------------------------------- */

/* h (user.fmnist.hidden, NULL if absent) parsed into f; 1 with the error
 * printed when there is none or it is not a list of sizes. */
static int hidden_from_str(const char *h, const char *path, flags *f) {
  if (h && parse_hidden(h, f->hidden, &f->n_hidden) == 0) return 0;
  fprintf(stderr, PROG ": %s was not written by " PROG " (no valid user.fmnist.hidden)\n", path);
  return 1;
}

int hidden_from_ckpt(cairn_ckpt *c, const char *path, flags *f) {
  const char *h;
  if (cairn_ckpt_meta_str(c, "user.fmnist.hidden", &h) == CAIRN_OK) return hidden_from_str(h, path, f);
  char hs[256] = "";
  int n = 0;
  for (int k = 0; k <= CAIRN_MLP_MAX_LAYERS; k++) {
    char name[32];
    cairn_ckpt_entry e;
    snprintf(name, sizeof name, k ? "dense_%d/kernel" : "dense/kernel", k);
    if (cairn_ckpt_find(c, name, &e) != CAIRN_OK || e.rank != 2) break;
    if (k) snprintf(hs + strlen(hs), sizeof hs - strlen(hs), "%s%lld", k > 1 ? "," : "", (long long)e.shape[0]);
    n++;
  }
  return hidden_from_str(n >= 2 ? hs : NULL, path, f);
}

int hidden_from_meta(const char *path, cairn_saver_meta *meta, flags *f) {
  const char *h = NULL;
  if (cairn_saver_meta_user_str(meta, "fmnist.hidden", &h) != CAIRN_OK) h = NULL;
  int bad = hidden_from_str(h, path, f);
  cairn_saver_meta_free(meta);
  return bad;
}

int hidden_from_path(const char *path, flags *f) {
  cairn_ckpt *c;
  cairn_status st = cairn_ckpt_open(path, NULL, &c);
  if (st) return report_error("reading the checkpoint's metadata", st, NULL);
  int bad = hidden_from_ckpt(c, path, f);
  cairn_ckpt_close(c);
  return bad;
}
