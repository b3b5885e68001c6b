#define _POSIX_C_SOURCE 200809L
/* cairn-fmnist: trains an MLP on Fashion-MNIST with a MonitoredTrainingSession
 * style loop, and resumes exactly where a killed run stopped.
 *
 *   cairn-fmnist train --checkpoint-dir DIR [--max-steps N] [--batch-size B] [--seed S]
 *                      [--save-checkpoint-steps K | --save-checkpoint-secs T]
 *                      [--eval-every N] [--log-every N] [--hidden H1,H2,...]
 *                      [--data-dir D] [--threads T] [--distributed]
 *                      [--async-checkpoints | --sync-checkpoints]
 *   cairn-fmnist eval --checkpoint-dir DIR [--data-dir D] [--threads T]
 *   cairn-fmnist warm-start --from CKPT --checkpoint-dir DIR
 *                      --method init_fn|local_init_op|restore-option [train flags]
 *
 * The data are Debian's dataset-fashion-mnist files (gzip IDX) in
 * /usr/share/datasets/fashion-mnist, or --data-dir with the same four names.
 *
 * Exact resumption. A training run killed at any moment (SIGKILL included,
 * during a save too: checkpoints and the state file are replaced atomically)
 * and started again ends with the same variables, bit for bit, as a run that
 * never stopped. What makes that true:
 *   - every checkpoint holds the whole training state: weights, Adam slots,
 *     beta powers, global_step (the default Saver of every GLOBAL variable);
 *   - the batch order is the dataset iterator's, a pure function of (seed,
 *     epoch, position): its position is exported into every checkpoint as the
 *     opaque blob "train.state.dataset" by a CheckpointSaverHook listener
 *     (before_save), and imported again after the session is created (a hook
 *     placed before the CheckpointSaverHook, so the save it makes right after
 *     creation already carries the restored position);
 *   - initializers are pure functions of (seed, variable name) and the
 *     kernels' reductions do not depend on timing or thread count;
 *   - nothing depends on wall time except when a --save-checkpoint-secs
 *     save happens, which changes nothing that is saved.
 * No other random state is used (no dropout, no augmentation); were one
 * added, its cairn_rng_export words would go into another blob the same way.
 *
 * Warm start (three recipes, as TF 1.x users write them): the hidden layers
 * (dense/..., dense_1/..., every layer but the last) come from CKPT, the new
 * output layer, the Adam slots and global_step are initialized.
 *   init_fn        Scaffold init_fn: after init_op, a Saver of the hidden
 *                  layers restores them from CKPT (only when DIR has nothing).
 *   local_init_op  The session manager restores CKPT with a Saver of the
 *                  hidden layers only; ready_for_local_init_op asks for
 *                  those; local_init_op initializes everything else.
 *   restore-option cairn's Scaffold `restore` option: a partial restore of
 *                  CKPT (include = the hidden layers), the rest initialized.
 * Once DIR holds a checkpoint, warm-start continues from it like train.
 *
 * Distributed (train --distributed, under mpirun; MPI builds only): every
 * rank loads the same data and iterates the same dataset (same seed, global
 * batch B), and trains on its rows of each global batch (cairn_mpi_shard;
 * B must be a multiple of the number of ranks); gradients are averaged over
 * the ranks (cairn_mpi_grads_fn), so N ranks follow one rank with batch B
 * up to f32 rounding. Rank 0 alone creates DIR, restores from it, writes
 * checkpoints, the event file and the progress lines; after each session
 * creation it broadcasts its data position and its variables
 * (BroadcastGlobalVariablesHook). The other ranks never touch DIR. Any
 * error ends the whole job (cairn_mpi_abort); restarting it resumes from
 * rank 0's latest checkpoint.
 *
 * SIGTERM or SIGINT (Ctrl-C) during train or warm-start: the step in
 * flight finishes, the final checkpoint is written, and the exit status is
 * 128 + the signal (143, 130); the same command resumes from it. A second
 * signal ends the process at once. --distributed over several ranks keeps
 * the default action (the ranks could stop after different steps): the job
 * ends and resumes from the last checkpoint.
 *
 * Checkpoints are asynchronous by default (--sync-checkpoints turns that
 * off): the training state is copied at the step boundary and a background
 * thread writes it (cairn/saver.h, "Asynchronous saving"); the files and
 * the exact resumption are the same.
 *
 * Exit status: 0 success, 1 an error (data, files, cairn), 2 usage,
 * 128 + N stopped by signal N after saving.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cairn.h>

#include "fmnist_dist.h"

#define PROG "cairn-fmnist"
#define DEFAULT_DATA_DIR "/usr/share/datasets/fashion-mnist"
#define CLASSES 10

static const char *const FILES[4] = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                                     "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"};

/* ---- distribution (--distributed) ---------------------------------------------------------- */

/* This process's place in the job (fmnist_dist.h): rank 0 of 1 without
   --distributed. */
static int g_rank = 0, g_size = 1;

/* ---- errors and usage ------------------------------------------------------------------ */

static int report_error(const char *what, cairn_status st, const char *handle_msg) {
  const char *detail = handle_msg && *handle_msg ? handle_msg : cairn_errmsg();
  fprintf(stderr, PROG ": %s: %s%s%s\n", what, cairn_status_str(st), *detail ? ": " : "", detail);
  return 1;
}

/* The usage text, to stdout for --help (a reader pipes it into a pager or
   a file), to stderr after a usage error. */
static void print_usage(FILE *out) {
  fprintf(out,
          "usage: " PROG " train --checkpoint-dir DIR [--max-steps N] [--batch-size B] [--seed S]\n"
          "                    [--save-checkpoint-steps K | --save-checkpoint-secs T] [--eval-every N]\n"
          "                    [--log-every N] [--hidden H1,H2,...] [--data-dir D] [--threads T]\n"
          "                    [--async-checkpoints | --sync-checkpoints]\n"
          "                    [--compress lz4|shuffle|compact|none]   (checkpoint codec; default lz4)\n"
          "                    [--distributed]   (under mpirun: data-parallel over the ranks)\n"
          "                    [--precision f32|bf16]   (bf16: mixed precision, fp32 masters; default f32)\n"
          "       " PROG " eval --checkpoint-dir DIR [--data-dir D] [--threads T] [--precision f32|bf16]\n"
          "       " PROG " warm-start --from CKPT --checkpoint-dir DIR --method init_fn|local_init_op|restore-option\n"
          "                    [train options]\n"
          "       " PROG " -h | --help\n"
          "Exit status: 0 success, 1 an error (data, files, cairn), 2 usage. See " PROG "(1).\n");
}

static int usage(const char *why) {
  if (why) fprintf(stderr, PROG ": %s\n", why);
  print_usage(stderr);
  return 2;
}

static double now_secs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- flags ------------------------------------------------------------------------------ */

typedef struct flags {
  const char *dir, *from, *method, *data_dir;
  int64_t max_steps, batch, save_steps, eval_every, log_every;
  double save_secs;
  uint64_t seed;
  int threads;
  int n_hidden;
  int64_t hidden[CAIRN_MLP_MAX_LAYERS];
  int hidden_given;
  int async; /* --async-checkpoints / --sync-checkpoints */
  cairn_ckpt_compress compress; /* --compress lz4|shuffle|compact|none; default lz4 */
  cairn_precision precision;    /* --precision f32|bf16; recorded as user.fmnist.precision */
} flags;

static int parse_int(const char *s, long long lo, long long hi, long long *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) return 1;
  *out = v;
  return 0;
}

/* "256,128" → {256, 128}; 0 on success. */
static int parse_hidden(const char *s, int64_t *h, int *n) {
  *n = 0;
  while (*s) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || v < 1 || v > 65536 || *n >= CAIRN_MLP_MAX_LAYERS - 1) return 1;
    h[(*n)++] = v;
    if (*end == ',') end++;
    else if (*end) return 1;
    s = end;
  }
  return *n == 0;
}

static void format_hidden(const int64_t *h, int n, const char *sep, char *buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < n && used < len; i++) used += (size_t)snprintf(buf + used, len - used, "%s%lld", i ? sep : "", (long long)h[i]);
}

/* ---- data ----------------------------------------------------------------------------------- */

typedef struct data {
  cairn_tensor *xtr_owner, *xte_owner; /* (N, 28, 28) f32 */
  cairn_tensor xtr, xte;               /* views (N, 784) */
  cairn_tensor *ytr, *yte;             /* (N) i32 */
  int64_t features;
} data;

static void data_free(data *d) {
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

static int data_load(data *d, const char *dir) {
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

/* The train op's batch source: the next global batch of the dataset, and
 * this rank's rows of it (all of them on one process). */
typedef struct batches {
  cairn_dataset *ds;
  cairn_tensor *xb, *yb; /* (B, features) f32, (B) i32 */
  cairn_tensor xs, ys;   /* views of this rank's rows */
} batches;

static cairn_status next_batch(void *user, const cairn_tensor **x, const cairn_tensor **y) {
  batches *b = user;
  *x = &b->xs;
  *y = &b->ys;
  return cairn_dataset_next(b->ds, b->xb, b->yb);
}

typedef struct model {
  cairn_registry *reg;
  cairn_mlp *mlp;
  cairn_op *train, *eval;
  int n_layers;
  batches b;
} model;

/* The published training loss: the mean over the ranks (every rank takes
   part in each step's reduction). */
static cairn_status mean_loss(void *user, double *loss) {
  (void)user;
  return fmnist_dist_mean_loss(loss);
}

/* features → hidden... → 10, ReLU, Adam: tf.layers.dense names (dense/kernel,
 * dense_1/..., the output layer last), Adam slots, beta powers, global_step. */
static int model_new(model *m, int64_t features, const int64_t *hidden, int n_hidden, uint64_t seed,
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
  if (!s) s = cairn_mlp_train_op_new(m->mlp, &to, &m->train);
  if (!s) s = cairn_mlp_eval_op_new(m->mlp, NULL, &m->eval);
  return s ? report_error("model", s, NULL) : 0;
}

static void model_free(model *m) {
  cairn_op_free(m->train);
  cairn_op_free(m->eval);
  cairn_mlp_free(m->mlp);
  cairn_registry_free(m->reg);
}

/* Test-set accuracy on a session (raw: no hook fires, nothing changes). */
/* The architecture recorded in the metadata of checkpoint `path`
 * ("user.fmnist.hidden"); frees meta. */
static int hidden_from_meta(const char *path, cairn_saver_meta *meta, flags *f) {
  const char *h;
  cairn_status st = cairn_saver_meta_user_str(meta, "fmnist.hidden", &h);
  int bad = st || parse_hidden(h, f->hidden, &f->n_hidden);
  cairn_saver_meta_free(meta);
  if (bad) {
    fprintf(stderr, PROG ": %s was not written by " PROG " (no valid user.fmnist.hidden)\n", path);
    return 1;
  }
  return 0;
}

/* The architecture from the kernels' shapes (dense/kernel (784, h1),
 * dense_1/kernel (h1, h2), ..., the last one (hk, 10)): for checkpoints
 * without cairn's metadata, such as TensorFlow's or safetensors files.
 * 1 if it found none. */
static int hidden_from_shapes(const char *path, flags *f) {
  cairn_ckpt *c;
  if (cairn_ckpt_open(path, NULL, &c) != CAIRN_OK) return 1;
  char h[256] = "";
  int n = 0;
  for (int k = 0; k <= CAIRN_MLP_MAX_LAYERS; k++) {
    char name[32];
    cairn_ckpt_entry e;
    snprintf(name, sizeof name, k ? "dense_%d/kernel" : "dense/kernel", k);
    if (cairn_ckpt_find(c, name, &e) != CAIRN_OK || e.rank != 2) break;
    if (k) snprintf(h + strlen(h), sizeof h - strlen(h), "%s%lld", k > 1 ? "," : "", (long long)e.shape[0]);
    n++;
  }
  cairn_ckpt_close(c);
  return n < 2 || parse_hidden(h, f->hidden, &f->n_hidden);
}

static int hidden_from_checkpoint(const char *path, flags *f) {
  cairn_saver_meta *meta;
  cairn_status st = cairn_saver_meta_read(path, &meta);
  if (st) return report_error("reading the checkpoint's metadata", st, NULL);
  const char *h;
  if (cairn_saver_meta_user_str(meta, "fmnist.hidden", &h) != CAIRN_OK && hidden_from_shapes(path, f) == 0) {
    cairn_saver_meta_free(meta);
    return 0;
  }
  return hidden_from_meta(path, meta, f);
}

/* ---- the dataset position in checkpoints -------------------------------------------------- */

typedef struct data_state {
  cairn_dataset *ds;
  cairn_saver *saver; /* the saver the CheckpointSaverHook uses */
  const char *dir;
} data_state;

/* Serialized as 4 little-endian-agnostic u64 words (host order: the blob is
 * read back only by this program on this machine's architecture). */
static cairn_status ds_before_save(void *self, cairn_session *s, int64_t step) {
  (void)s;
  (void)step;
  data_state *d = self;
  cairn_dataset_state st;
  cairn_dataset_export(d->ds, &st);
  uint64_t w[4] = {st.seed, (uint64_t)st.size, (uint64_t)st.epoch, (uint64_t)st.position};
  return cairn_saver_set_state(d->saver, "dataset", w, sizeof w);
}

/* After every session creation, before the CheckpointSaverHook saves: the
 * dataset position of the checkpoint the session was restored from (read
 * with its variables: after a fall back past a corrupt newest checkpoint,
 * the older one's), when its global step is the session's; else the start
 * of epoch 0. */
static cairn_status import_position(data_state *d, const char *path, const cairn_saver_meta *meta, int64_t step);
static cairn_status ds_after_create(void *self, cairn_session *s, cairn_coordinator *coord) {
  (void)coord;
  data_state *d = self;
  int64_t step;
  cairn_status st = cairn_session_global_step(s, &step);
  if (st) return st;
  cairn_dataset_reset(d->ds);
  const cairn_saver_meta *meta = cairn_session_restored_meta(s);
  if (d->dir && meta) st = import_position(d, cairn_session_restored_path(s), meta, step);
  if (g_size == 1) return st;
  /* --distributed: rank 0's position (the other ranks have no DIR), with
     whether rank 0 got it, so that every rank takes part in the broadcast. */
  cairn_dataset_state pos;
  cairn_dataset_export(d->ds, &pos);
  uint64_t w[5] = {st == CAIRN_OK, pos.seed, (uint64_t)pos.size, (uint64_t)pos.epoch, (uint64_t)pos.position};
  cairn_status bs = fmnist_dist_broadcast(w, sizeof w);
  if (g_rank == 0 || st) return st ? st : bs;
  if (bs) return cairn_session_fail(s, bs, "DataPositionHook: %s", cairn_errmsg());
  if (!w[0])
    return cairn_session_fail(s, CAIRN_E_UNAVAILABLE, "DataPositionHook: rank 0 could not restore its data position");
  cairn_dataset_state ds = {w[1], (int64_t)w[2], (int64_t)w[3], (int64_t)w[4]};
  return cairn_dataset_import(d->ds, &ds);
}

/* The data position saved in checkpoint `path` (its metadata `meta`), if
 * its step is `step`. */
static cairn_status import_position(data_state *d, const char *path, const cairn_saver_meta *meta, int64_t step) {
  cairn_status st = CAIRN_OK;
  int64_t ck_step;
  const void *blob;
  size_t len;
  if (cairn_saver_meta_global_step(meta, &ck_step) == CAIRN_OK && ck_step == step &&
      cairn_saver_meta_state(meta, "dataset", &blob, &len) == CAIRN_OK && len == 4 * sizeof(uint64_t)) {
    uint64_t w[4];
    memcpy(w, blob, sizeof w);
    cairn_dataset_state ds = {w[0], (int64_t)w[1], (int64_t)w[2], (int64_t)w[3]};
    st = cairn_dataset_import(d->ds, &ds);
    if (st) fprintf(stderr, PROG ": %s: cannot resume its data position (was it trained with another --seed?): %s\n", path, cairn_errmsg());
  } else if (step != 0) {
    fprintf(stderr, PROG ": %s holds no data position for step %lld\n", path, (long long)step);
    st = CAIRN_E_FORMAT;
  }
  return st;
}

static const cairn_hook_vtable DATA_HOOK = {.name = "DataPositionHook", .after_create_session = ds_after_create};

/* ---- directories ------------------------------------------------------------------------------ */

/* DIR exists (or is created) and is a readable, writable directory. */
static int prepare_dir(const char *dir) {
  struct stat sb;
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, PROG ": cannot create checkpoint directory '%s': %s\n", dir, strerror(errno));
    return 1;
  }
  if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
    fprintf(stderr, PROG ": checkpoint directory '%s' is not a directory\n", dir);
    return 1;
  }
  if (access(dir, R_OK | W_OK | X_OK) != 0) {
    fprintf(stderr, PROG ": cannot use checkpoint directory '%s': %s\n", dir, strerror(errno));
    return 1;
  }
  return 0;
}

/* ---- training --------------------------------------------------------------------------------- */

/* What differs between train and the warm-start methods. */
typedef struct recipe {
  cairn_scaffold_options so;
  const char *restore_file; /* ChiefSessionCreator's checkpoint_filename_with_path */
  cairn_saver *full_saver;  /* for the CheckpointSaverHook when the scaffold's is partial */
} recipe;

/* Every progress line (cairn_progress_hook) goes to stdout, and its numbers
 * into the TensorBoard event file. */
static void on_progress(void *ctx, const cairn_progress *p, const char *line) {
  cairn_event_writer *w = ctx;
  printf("%s\n", line);
  if (!w) return;
  cairn_status st = CAIRN_OK;
  if (p->have_loss) st = cairn_event_writer_add_scalar(w, "loss", p->loss, p->step);
  if (!st && p->steps_per_sec > 0) st = cairn_event_writer_add_scalar(w, "steps_per_sec", p->steps_per_sec, p->step);
  if (!st && p->examples_per_sec > 0)
    st = cairn_event_writer_add_scalar(w, "examples_per_sec", p->examples_per_sec, p->step);
  if (st) fprintf(stderr, PROG ": warning: event file: %s\n", cairn_errmsg());
}

static int run_training(const flags *f, const data *d, model *m, recipe *rc) {
  cairn_scaffold *sc = NULL;
  cairn_dataset *ds = NULL;
  cairn_event_writer *events = NULL;
  cairn_summary_writer sw;
  cairn_hook *hooks[4] = {NULL, NULL, NULL, NULL}; /* data position, stop, broadcast, progress */
  size_t n_hooks = 0;
  int chief = g_rank == 0;
  cairn_monitored_session *ms = NULL;
  cairn_status st;
  int ret = 1;
  char hbuf[256];
  data_state dst = {NULL, NULL, chief ? f->dir : NULL};
  batches *b = &m->b; /* the train op's */

  cairn_dataset_config dc = {f->batch, 1, f->seed, 1, 0};
  if ((st = cairn_dataset_new(&d->xtr, d->ytr, &dc, &ds)) != CAIRN_OK) return report_error("dataset", st, NULL);
  dst.ds = ds;
  if ((st = cairn_scaffold_new(m->reg, &rc->so, &sc)) != CAIRN_OK || (st = cairn_scaffold_finalize(sc)) != CAIRN_OK) {
    ret = report_error("scaffold", st, NULL);
    goto out;
  }
  dst.saver = rc->full_saver ? rc->full_saver : cairn_scaffold_saver(sc);
  char arch[256];
  format_hidden(f->hidden, f->n_hidden, ",", hbuf, sizeof hbuf);
  format_hidden(f->hidden, f->n_hidden, "-", arch, sizeof arch);
  /* the precision the run trained in (checkpoints hold fp32 either way:
     one trained in bf16 resumes or warm-starts in f32 and back) */
  if ((st = cairn_saver_set_user_str(dst.saver, "fmnist.precision",
                                     f->precision == CAIRN_PRECISION_BF16 ? "bf16" : "f32")) != CAIRN_OK ||
      (st = cairn_saver_set_user_str(dst.saver, "fmnist.hidden", hbuf)) != CAIRN_OK) {
    ret = report_error("saver", st, NULL);
    goto out;
  }

  /* TF's MonitoredTrainingSession(is_chief=True, checkpoint_dir=DIR,
     chief_only_hooks=[DataPosition, StopAtStep], hooks=[broadcast,
     progress], saving_listeners=[the data position into every checkpoint]).
     Its hooks run in the order the position needs: the data position first
     (after_create_session imports it before the CheckpointSaverHook's save
     at creation), then StopAtStep, the CheckpointSaverHook, and the user's
     hooks. --distributed: every rank prepares its own session, rank 0
     alone has DIR (the CheckpointSaverHook and the progress output); the
     BroadcastGlobalVariablesHook runs on every rank, after the data
     position (whose hook broadcasts rank 0's) and after rank 0's save at
     creation. */
  cairn_checkpoint_listener lis;
  memset(&lis, 0, sizeof lis);
  lis.before_save = ds_before_save;
  lis.self = &dst;
  /* TensorBoard: an event file in DIR with the progress numbers, the test
     accuracy and a CHECKPOINT session log per save (rank 0 only). */
  if (chief && (st = cairn_event_writer_new(f->dir, NULL, &events)) != CAIRN_OK) {
    ret = report_error("event file", st, NULL);
    goto out;
  }
  sw = cairn_event_writer_summary_writer(events);
  cairn_progress_hook_options po = cairn_progress_hook_options_default();
  po.every_n_steps = f->log_every > 0 ? f->log_every : INT64_MAX;
  po.loss_name = "loss";
  po.batch_size = f->batch;
  po.max_steps = f->max_steps;
  po.fn = on_progress;
  po.fn_ctx = events;
  if ((st = cairn_hook_new(&DATA_HOOK, &dst, &hooks[0])) != CAIRN_OK ||
      (st = cairn_stop_at_step_hook_new(-1, f->max_steps, &hooks[1])) != CAIRN_OK ||
      (st = fmnist_dist_broadcast_hook_new(&hooks[2])) != CAIRN_OK ||
      (chief && (st = cairn_progress_hook_new(&po, &hooks[3])) != CAIRN_OK)) {
    ret = report_error("hooks", st, NULL);
    goto out;
  }
  cairn_hook *user_hooks[2];
  for (int i = 2; i < 4; i++)
    if (hooks[i]) user_hooks[n_hooks++] = hooks[i];
  cairn_monitored_training_session_options mo = cairn_monitored_training_session_options_default();
  mo.registry = m->reg;
  mo.scaffold = sc;
  mo.checkpoint_dir = chief ? f->dir : NULL;
  mo.checkpoint_filename_with_path = rc->restore_file;
  mo.checkpoint_saver = rc->full_saver;
  mo.chief_only_hooks = hooks;
  mo.n_chief_only_hooks = 2;
  mo.hooks = user_hooks;
  mo.n_hooks = n_hooks;
  mo.save_checkpoint_secs = f->save_secs;
  mo.save_checkpoint_steps = f->save_secs > 0 ? 0 : f->save_steps;
  mo.save_summaries_steps = 0; /* the progress hook writes the numbers */
  mo.log_step_count_steps = 0;
  mo.summary_writer = &sw;
  mo.async_checkpoints = f->async;
  mo.checkpoint_listeners = &lis;
  mo.n_checkpoint_listeners = 1;
  mo.stop_on_signals = g_size == 1; /* a preempted job saves first */
  double t0 = now_secs();
  if ((st = cairn_monitored_training_session_new(&mo, &ms)) != CAIRN_OK) {
    ret = report_error("creating the monitored session", st, NULL);
    goto out;
  }
  int64_t step, start;
  if ((st = cairn_session_global_step(cairn_monitored_session_raw_session(ms), &step)) != CAIRN_OK) {
    ret = report_error("reading the global step", st, cairn_monitored_session_errmsg(ms));
    goto out;
  }
  start = step;
  /* TensorBoard drops the events a crashed run wrote past the restored step. */
  if (events && step > 0 && (st = cairn_event_writer_add_session_log(events, CAIRN_SESSION_LOG_START, NULL, step + 1)) != CAIRN_OK)
    fprintf(stderr, PROG ": warning: event file: %s\n", cairn_errmsg());
  cairn_dataset_state pos;
  cairn_dataset_export(ds, &pos);
  /* The file really restored: not DIR's newest when that one was corrupt
     (the library has then warned and fallen back to an older one). */
  const char *resumed = cairn_session_restored_path(cairn_monitored_session_raw_session(ms));
  if (!chief)
    ;
  else if (resumed && !rc->restore_file)
    printf("resumed from %s at step %lld (epoch %lld, example %lld)\n", resumed, (long long)step, (long long)pos.epoch,
           (long long)pos.position);
  else if (rc->restore_file)
    printf("warm start from %s: initialized the output layer, step %lld\n", rc->restore_file, (long long)step);
  else
    printf("no checkpoint in %s: initialized a new model at step %lld\n", f->dir, (long long)step);
  if (chief)
    printf("model %lld-%s-%d, %lld parameters, batch %lld, %lld training and %lld test examples\n",
           (long long)d->features, arch, CLASSES, (long long)cairn_mlp_num_params(m->mlp), (long long)f->batch,
           (long long)d->xtr.shape[0], (long long)d->xte.shape[0]);
  if (chief && g_size > 1)
    printf("distributed over %d ranks: %lld examples of each batch per rank\n", g_size, (long long)(f->batch / g_size));

  /* The train op's batches: this rank's rows of each global batch (all of
     them on one process). */
  int64_t bshape[2] = {f->batch, d->features}, yshape[1] = {f->batch};
  if ((st = cairn_tensor_new(CAIRN_DTYPE_F32, 2, bshape, &b->xb)) != CAIRN_OK ||
      (st = cairn_tensor_new(CAIRN_DTYPE_I32, 1, yshape, &b->yb)) != CAIRN_OK) {
    ret = report_error("batch", st, NULL);
    goto out;
  }
  b->ds = ds;
  int64_t row0, row1;
  fmnist_dist_shard(f->batch, &row0, &row1);
  int64_t xsshape[2] = {row1 - row0, d->features}, ysshape[1] = {row1 - row0};
  if ((st = cairn_tensor_view(&b->xs, cairn_tensor_f32(b->xb) + row0 * d->features, CAIRN_DTYPE_F32, 2, xsshape)) !=
          CAIRN_OK ||
      (st = cairn_tensor_view(&b->ys, cairn_tensor_i32(b->yb) + row0, CAIRN_DTYPE_I32, 1, ysshape)) != CAIRN_OK) {
    ret = report_error("batch", st, NULL);
    goto out;
  }
  if (chief && step >= f->max_steps)
    printf("already at step %lld (--max-steps %lld): nothing to train\n", (long long)step, (long long)f->max_steps);
  cairn_run_args a = cairn_run_args_one(&m->train); /* the op takes its own batch */
  while (step < f->max_steps && !cairn_monitored_session_should_stop(ms)) {
    if ((st = cairn_monitored_session_run(ms, &a)) != CAIRN_OK) break;
    if ((st = cairn_session_global_step(cairn_monitored_session_raw_session(ms), &step)) != CAIRN_OK) break;
    int last = step >= f->max_steps;
    if (chief && f->eval_every > 0 && (step % f->eval_every == 0 || last)) {
      cairn_mlp_eval_result e;
      if ((st = cairn_mlp_eval_run_monitored(ms, m->eval, &d->xte, d->yte, &e)) != CAIRN_OK) break;
      /* A background save that failed is reported before a line that
         reads as if all went well (at the last step: after waiting for
         the save in flight). */
      if ((st = last ? cairn_saver_save_wait(dst.saver) : cairn_saver_save_status(dst.saver, NULL)) != CAIRN_OK) break;
      printf("step %lld  test_loss=%.4f  test_accuracy=%.4f  (%.1f s)\n", (long long)e.step, e.loss, e.accuracy,
             now_secs() - t0);
      if ((st = cairn_event_writer_add_scalar(events, "test_accuracy", e.accuracy, e.step)) != CAIRN_OK ||
          (st = cairn_event_writer_add_scalar(events, "test_loss", e.loss, e.step)) != CAIRN_OK)
        break;
    }
  }
  /* The end of every run that trained: the test accuracy reached, and how
     long this run took (unless --eval-every has just printed it). */
  if (chief && st == CAIRN_OK && step > start && !(f->eval_every > 0) && !cairn_monitored_session_stop_signal(ms)) {
    cairn_mlp_eval_result e;
    if ((st = cairn_mlp_eval_run_monitored(ms, m->eval, &d->xte, d->yte, &e)) == CAIRN_OK &&
        (st = cairn_saver_save_wait(dst.saver)) == CAIRN_OK) {
      printf("step %lld  test_loss=%.4f  test_accuracy=%.4f  (%.1f s)\n", (long long)e.step, e.loss, e.accuracy,
             now_secs() - t0);
      if ((st = cairn_event_writer_add_scalar(events, "test_accuracy", e.accuracy, e.step)) == CAIRN_OK)
        st = cairn_event_writer_add_scalar(events, "test_loss", e.loss, e.step);
    }
  }
  if (st != CAIRN_OK) {
    ret = report_error("training", st, cairn_monitored_session_errmsg(ms));
    cairn_status st2 = cairn_monitored_session_exit(ms, st);
    if (st2 != st) report_error("closing", st2, cairn_monitored_session_errmsg(ms));
    goto out;
  }
  /* Clean exit: end() of every hook; the CheckpointSaverHook writes the
     final step unless it has just saved it. */
  if ((st = cairn_monitored_session_exit(ms, CAIRN_OK)) != CAIRN_OK) {
    ret = report_error("closing", st, cairn_monitored_session_errmsg(ms));
    goto out;
  }
  char last[4096];
  double secs = now_secs() - t0;
  int sig = cairn_monitored_session_stop_signal(ms);
  if (sig && cairn_latest_checkpoint(f->dir, last, sizeof last) == CAIRN_OK)
    printf("stopped by %s at step %lld: %s (%lld steps in %.1f s); the same command resumes from it\n",
           sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : "a signal", (long long)step, last,
           (long long)(step - start), secs);
  else if (chief && cairn_latest_checkpoint(f->dir, last, sizeof last) == CAIRN_OK)
    printf("done at step %lld: %s (%lld steps in %.1f s)\n", (long long)step, last, (long long)(step - start), secs);
  fmnist_dist_print_stats(secs);
  ret = sig ? 128 + sig : 0;
out:
  cairn_monitored_session_free(ms);
  for (int i = 0; i < 4; i++) cairn_hook_free(hooks[i]);
  cairn_event_writer_free(events); /* after the hooks that use it */
  cairn_scaffold_free(sc);
  cairn_tensor_free(b->xb);
  cairn_tensor_free(b->yb);
  memset(b, 0, sizeof *b);
  cairn_dataset_free(ds);
  return ret;
}

/* ---- warm start recipes ------------------------------------------------------------------------ */

typedef struct warm {
  const char *path;
  cairn_var *vars[2 * CAIRN_MLP_MAX_LAYERS];
  size_t n;
} warm;

static int cmd_train_or_warm(flags *f, int warm_start) {
  data d;
  model m;
  recipe rc;
  warm w;
  int ret = 1;
  char own[4096], src[4096];
  cairn_saver *partial = NULL, *full = NULL;
  cairn_op *parts[2] = {NULL, NULL}, *local = NULL, *warm_op = NULL;
  cairn_ready_op *rfl = NULL;
  const char *include[2 * CAIRN_MLP_MAX_LAYERS];
  cairn_restore_options ro;
  cairn_status st;

  memset(&rc, 0, sizeof rc);
  memset(&d, 0, sizeof d);
  memset(&m, 0, sizeof m);
  /* --distributed: only rank 0 touches DIR. */
  if (g_rank == 0 && prepare_dir(f->dir)) return 1;
  /* One trainer per DIR: refuse before loading data or writing anything;
     the CheckpointSaverHook holds the lock for the session itself. */
  if (g_rank == 0 && (st = cairn_checkpoint_lock_check(f->dir)) != CAIRN_OK)
    return report_error("checkpoint directory", st, NULL);
  /* The newest checkpoint and its metadata in one open of it. */
  cairn_saver_meta *own_meta = NULL;
  int resuming = g_rank == 0 && cairn_saver_meta_read_latest(f->dir, own, sizeof own, NULL, 0, &own_meta) == CAIRN_OK;
  if (resuming) {
    if (hidden_from_meta(own, own_meta, f)) return 1;
  } else if (warm_start) {
    /* The source may be a checkpoint file or a directory (its newest). */
    struct stat sb;
    if (stat(f->from, &sb) == 0 && S_ISDIR(sb.st_mode)) {
      if ((st = cairn_latest_checkpoint(f->from, src, sizeof src)) != CAIRN_OK)
        return report_error("no checkpoint to warm-start from", st, NULL);
    } else if ((size_t)snprintf(src, sizeof src, "%s", f->from) >= sizeof src) {
      return usage("--from is too long");
    }
    if (hidden_from_checkpoint(src, f)) return 1;
  }
  if (g_size > 1) {
    /* The architecture is rank 0's (its checkpoint's when it resumes). */
    int64_t h[CAIRN_MLP_MAX_LAYERS + 1];
    h[0] = f->n_hidden;
    memcpy(h + 1, f->hidden, sizeof f->hidden);
    if ((st = fmnist_dist_broadcast(h, sizeof h)) != CAIRN_OK)
      return report_error("broadcasting the architecture", st, NULL);
    if (h[0] < 1 || h[0] > CAIRN_MLP_MAX_LAYERS - 1)
      return report_error("broadcasting the architecture", CAIRN_E_FORMAT, "bad layer count");
    f->n_hidden = (int)h[0];
    memcpy(f->hidden, h + 1, sizeof f->hidden);
  }
  if (data_load(&d, f->data_dir)) goto out;
  if (model_new(&m, d.features, f->hidden, f->n_hidden, f->seed, f->precision)) goto out;
  fmnist_dist_average_grads(m.mlp);

  if (warm_start && !resuming) {
    rc.restore_file = NULL;
    w.path = src;
    w.n = 0;
    for (int i = 0; i < m.n_layers - 1; i++) {
      w.vars[w.n++] = cairn_mlp_kernel(m.mlp, i);
      w.vars[w.n++] = cairn_mlp_bias(m.mlp, i);
    }
    for (size_t i = 0; i < w.n; i++) include[i] = cairn_var_name(w.vars[i]);
    if (strcmp(f->method, "init_fn") == 0) {
      /* TF's Scaffold(init_fn=lambda scaffold, sess:
         saver_of_hidden_layers.restore(sess, CKPT)): a restore op. */
      if ((st = cairn_op_new_restore("warm_start_hidden_layers", src, w.vars, w.n, NULL, NULL, &warm_op)) != CAIRN_OK) {
        ret = report_error("init_fn recipe", st, NULL);
        goto out;
      }
      rc.so.init_fn = cairn_op_init_fn;
      rc.so.init_fn_user = warm_op;
      rc.so.init_fn_name = "warm_start_hidden_layers";
    } else if (strcmp(f->method, "local_init_op") == 0) {
      /* TF's recipe: Saver(hidden layers) restores CKPT; the model counts as
         ready for local init once those are set; local_init_op initializes
         the LOCAL variables and every GLOBAL variable the Saver does not
         hold. (Its caveat: local_init_op runs on every session creation,
         so this form is only used for the first session of DIR.) */
      cairn_saver_options so = cairn_saver_options_default();
      so.write.compress = f->compress;
      /* Every GLOBAL variable but the hidden layers (their names hold no
         glob characters: each excludes itself alone). */
      cairn_var *rest[256];
      size_t n_rest = cairn_registry_list_vars(m.reg, CAIRN_COLL_GLOBAL, NULL, 0, include, w.n, rest, 256);
      if (n_rest > 256) n_rest = 256;
      if ((st = cairn_saver_new_list(w.vars, w.n, &so, &partial)) != CAIRN_OK ||
          (st = cairn_saver_new(m.reg, &so, &full)) != CAIRN_OK ||
          (st = cairn_op_new_init("local_init", m.reg, CAIRN_COLL_LOCAL, &parts[0])) != CAIRN_OK ||
          (st = cairn_op_new_init_vars("init_new_variables", rest, n_rest, &parts[1])) != CAIRN_OK ||
          (st = cairn_op_new_group("local_init_and_new_variables", parts, 2, &local)) != CAIRN_OK ||
          (st = cairn_ready_op_new_uninitialized_vars("ready_for_local_init", w.vars, w.n, &rfl)) != CAIRN_OK) {
        ret = report_error("local_init_op recipe", st, NULL);
        goto out;
      }
      rc.so.saver = partial;
      rc.so.local_init_op = local;
      rc.so.ready_for_local_init_op = rfl;
      rc.full_saver = full;
      rc.restore_file = src;
    } else {
      /* cairn's restore option: strict restore of the hidden layers only;
         every other GLOBAL variable is initialized. */
      memset(&ro, 0, sizeof ro);
      ro.include = include;
      ro.n_include = w.n;
      rc.so.restore = &ro;
      rc.restore_file = src;
    }
    printf("warm start (%s): restoring", f->method);
    for (size_t i = 0; i < w.n; i++) printf(" %s", include[i]);
    printf(" from %s\n", src);
  } else if (warm_start) {
    printf("%s already holds %s: continuing from it\n", f->dir, own);
  }
  if (f->compress != CAIRN_CKPT_COMPRESS_AUTO && !rc.so.saver) {
    /* The Scaffold's own saver (TF's: allow_empty, max_to_keep 5) with the
       codec asked for. */
    cairn_saver_options so = cairn_saver_options_default();
    so.allow_empty = 1;
    so.write.compress = f->compress;
    if ((st = cairn_saver_new(m.reg, &so, &full)) != CAIRN_OK) {
      ret = report_error("saver", st, NULL);
      goto out;
    }
    rc.so.saver = full;
  }
  ret = run_training(f, &d, &m, &rc);
out:
  cairn_op_free(warm_op);
  cairn_op_free(local);
  cairn_op_free(parts[0]);
  cairn_op_free(parts[1]);
  cairn_ready_op_free(rfl);
  cairn_saver_free(partial);
  cairn_saver_free(full);
  model_free(&m);
  data_free(&d);
  return ret;
}

/* ---- eval -------------------------------------------------------------------------------------- */

/* The architecture of an open checkpoint: its user.fmnist.hidden, else
 * the kernels' shapes (as hidden_from_checkpoint). */
static int hidden_from_open(cairn_ckpt *c, const char *path, flags *f) {
  const char *h;
  if (cairn_ckpt_meta_str(c, "user.fmnist.hidden", &h) == CAIRN_OK) {
    if (parse_hidden(h, f->hidden, &f->n_hidden) == 0) return 0;
    fprintf(stderr, PROG ": %s was not written by " PROG " (no valid user.fmnist.hidden)\n", path);
    return 1;
  }
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
  if (n >= 2 && parse_hidden(hs, f->hidden, &f->n_hidden) == 0) return 0;
  fprintf(stderr, PROG ": %s was not written by " PROG " (no valid user.fmnist.hidden)\n", path);
  return 1;
}

/* 1 if nothing is left at path (a file, or a TF prefix's .index). */
static int vanished(const char *path) {
  struct stat sb;
  char idx[4200];
  snprintf(idx, sizeof idx, "%s.index", path);
  return stat(path, &sb) != 0 && errno == ENOENT && stat(idx, &sb) != 0 && errno == ENOENT;
}

static int cmd_eval(flags *f) {
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
    int bad = hidden_from_open(c, path, f);
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
    ret = report_error("evaluating", st, cairn_monitored_session_errmsg(ms));
    cairn_status st2 = cairn_monitored_session_exit(ms, st);
    if (st2 != st) report_error("closing", st2, cairn_monitored_session_errmsg(ms));
    goto out;
  }
  printf("checkpoint %s  step %lld\ntest_loss=%.4f\ntest_accuracy=%.4f\n", path, (long long)e.step, e.loss,
         e.accuracy);
  if ((st = cairn_monitored_session_exit(ms, CAIRN_OK)) != CAIRN_OK) {
    ret = report_error("closing", st, cairn_monitored_session_errmsg(ms));
    goto out;
  }
  ret = 0;
out:
  cairn_monitored_session_free(ms);
  model_free(&m);
  data_free(&d);
  return ret;
}

/* ---- main -------------------------------------------------------------------------------------- */

int main(int argc, char **argv) {
  /* A file size limit (ulimit -f, RLIMIT_FSIZE) makes a write past it raise
     SIGXFSZ, whose default action kills the process: exit status 153 from a
     shell, no message, a temporary file left. Ignored, the write fails with
     EFBIG and the save fails cleanly instead, naming the file ("File too
     large"), with the previous checkpoint intact. The library leaves the
     process-wide disposition alone; a program may choose it, so the tools
     do. */
  signal(SIGXFSZ, SIG_IGN);
  cairn_blas_coretype_fix(argv); /* OpenBLAS's slow fallback core: re-run with a fitting one */
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 2) return usage(NULL);
  const char *mode = argv[1];
  int is_train = strcmp(mode, "train") == 0, is_eval = strcmp(mode, "eval") == 0,
      is_warm = strcmp(mode, "warm-start") == 0;
  if (strcmp(mode, "--help") == 0 || strcmp(mode, "-h") == 0) {
    print_usage(stdout);
    return 0;
  }
  if (!is_train && !is_eval && !is_warm) {
    char why[256];
    snprintf(why, sizeof why, "unknown command '%.100s'", mode);
    return usage(why);
  }
  flags f;
  memset(&f, 0, sizeof f);
  f.data_dir = DEFAULT_DATA_DIR;
  f.max_steps = 18760; /* 20 epochs of 60000 at batch 64: test accuracy ~0.89 */
  f.batch = 64;
  f.seed = 1;
  f.save_steps = 1000;
  f.eval_every = 0;
  f.log_every = 500;
  f.n_hidden = 2;
  /* One thread unless asked: OpenMP threads that spin at barriers collapse
     when the machine is busy (measured: ~25 steps/s with 2 threads next to
     other jobs on 2 cores, ~250-850 with one). --threads 0: the library's
     default (every core). */
  f.threads = 1;
  f.async = 1; /* --sync-checkpoints turns it off */
  f.hidden[0] = 256;
  f.hidden[1] = 128;
  int steps_given = 0, secs_given = 0, distributed = 0;
  for (int i = 2; i < argc; i++) {
    long long v;
    char why[512];
    const char *a = argv[i];
    if (strcmp(a, "--distributed") == 0) {
      distributed = 1;
      continue;
    }
    if ((is_train || is_warm) && (strcmp(a, "--async-checkpoints") == 0 || strcmp(a, "--sync-checkpoints") == 0)) {
      f.async = a[2] == 'a';
      continue;
    }
    if (i + 1 >= argc) {
      snprintf(why, sizeof why, "%s: missing value or unknown option '%.100s'", mode, a);
      return usage(why);
    }
    const char *val = argv[++i];
    int trains = is_train || is_warm;
    if (strcmp(a, "--checkpoint-dir") == 0) f.dir = val;
    else if (strcmp(a, "--data-dir") == 0) f.data_dir = val;
    else if (strcmp(a, "--threads") == 0 && !parse_int(val, 0, 4096, &v)) f.threads = (int)v;
    else if (is_warm && strcmp(a, "--from") == 0) f.from = val;
    else if (is_warm && strcmp(a, "--method") == 0) f.method = val;
    else if (trains && strcmp(a, "--max-steps") == 0 && !parse_int(val, 0, INT64_MAX, &v)) f.max_steps = v;
    else if (trains && strcmp(a, "--batch-size") == 0 && !parse_int(val, 1, 1 << 20, &v)) f.batch = v;
    else if (trains && strcmp(a, "--seed") == 0 && !parse_int(val, 0, INT64_MAX, &v)) f.seed = (uint64_t)v;
    else if (trains && strcmp(a, "--save-checkpoint-steps") == 0 && !parse_int(val, 1, INT64_MAX, &v))
      f.save_steps = v, steps_given = 1;
    else if (trains && strcmp(a, "--save-checkpoint-secs") == 0 && !parse_int(val, 1, 1000000000, &v))
      f.save_secs = (double)v, secs_given = 1;
    else if (trains && strcmp(a, "--eval-every") == 0 && !parse_int(val, 0, INT64_MAX, &v)) f.eval_every = v;
    else if (trains && strcmp(a, "--log-every") == 0 && !parse_int(val, 0, INT64_MAX, &v)) f.log_every = v;
    else if (trains && strcmp(a, "--compress") == 0 && !strcmp(val, "lz4")) f.compress = CAIRN_CKPT_COMPRESS_AUTO;
    else if (trains && strcmp(a, "--compress") == 0 && !strcmp(val, "shuffle")) f.compress = CAIRN_CKPT_COMPRESS_SHUFFLE;
    else if (trains && strcmp(a, "--compress") == 0 && !strcmp(val, "compact")) f.compress = CAIRN_CKPT_COMPRESS_COMPACT;
    else if (trains && strcmp(a, "--compress") == 0 && !strcmp(val, "none")) f.compress = CAIRN_CKPT_COMPRESS_NONE;
    else if (strcmp(a, "--precision") == 0 && !strcmp(val, "f32")) f.precision = CAIRN_PRECISION_F32;
    else if (strcmp(a, "--precision") == 0 && !strcmp(val, "bf16")) f.precision = CAIRN_PRECISION_BF16;
    else if (is_train && strcmp(a, "--hidden") == 0 && !parse_hidden(val, f.hidden, &f.n_hidden)) f.hidden_given = 1;
    else {
      snprintf(why, sizeof why, "%s: bad option or value: %.100s %.100s", mode, a, val);
      return usage(why);
    }
  }
  if (!f.dir) return usage("--checkpoint-dir is required");
  if (steps_given && secs_given) return usage("give --save-checkpoint-steps or --save-checkpoint-secs, not both");
  if (is_warm && !f.from) return usage("warm-start needs --from CKPT");
  if (is_warm && (!f.method || (strcmp(f.method, "init_fn") && strcmp(f.method, "local_init_op") &&
                                strcmp(f.method, "restore-option"))))
    return usage("warm-start needs --method init_fn, local_init_op or restore-option");
  if (distributed && !is_train)
    return usage("--distributed is for train only (eval and warm-start run in one process)");
  if (distributed && !fmnist_dist_available()) {
    fprintf(stderr, PROG ": --distributed: %s\n", fmnist_dist_missing());
    return 2;
  }
  if (f.threads > 0) {
    cairn_status st = cairn_set_num_threads(f.threads);
    if (st) return report_error("--threads", st, NULL);
  }
  if (is_eval) return cmd_eval(&f);
  if (distributed) {
    cairn_status st = fmnist_dist_init(&argc, &argv);
    if (st) return report_error("--distributed: MPI", st, NULL);
    g_rank = fmnist_dist_rank();
    g_size = fmnist_dist_size();
    if (f.batch % g_size != 0) {
      if (g_rank == 0)
        fprintf(stderr, PROG ": --distributed: --batch-size %lld is not a multiple of the %d ranks\n",
                (long long)f.batch, g_size);
      fmnist_dist_free();
      return 2;
    }
    int ret = cmd_train_or_warm(&f, 0);
    if (ret != 0 && g_size > 1) {
      /* The other ranks may be inside a collective: end the whole job. */
      fprintf(stderr, PROG ": rank %d of %d failed: ending the job\n", g_rank, g_size);
      fmnist_dist_abort(ret);
    }
    fmnist_dist_free();
    return ret;
  }
  return cmd_train_or_warm(&f, is_warm);
}
