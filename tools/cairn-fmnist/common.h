/* cairn-fmnist/common.h — what the subcommands of cairn-fmnist share: the
 * parsed options (flags.c parses them, in one place), errors, the data,
 * the model, the architecture a checkpoint holds, and the entry point of
 * each subcommand (main.c holds the table that names them). Built only on
 * the public API (<cairn.h>); MPI only through dist.h.
 */
#ifndef CAIRN_TOOLS_FMNIST_COMMON_H
#define CAIRN_TOOLS_FMNIST_COMMON_H

#include <stdint.h>
#include <stdio.h>

#include <cairn.h>

#define PROG "cairn-fmnist"
#define DEFAULT_DATA_DIR "/usr/share/datasets/fashion-mnist"
#define CLASSES 10

/* ---- options (flags.c) ---------------------------------------------------------------------- */

/* Which options a subcommand takes (command.opts in main.c's table). */
enum {
  FL_TRAIN = 1 << 0,       /* the training options: --max-steps, --batch-size, --seed, ... */
  FL_WARM = 1 << 1,        /* --from, --method */
  FL_HIDDEN = 1 << 2,      /* --hidden */
  FL_DISTRIBUTED = 1 << 3, /* --distributed */
};

typedef struct flags {
  const char *dir, *from, *method, *data_dir;
  int64_t max_steps, batch, save_steps, eval_every, log_every;
  double save_secs;
  uint64_t seed;
  int threads;
  int n_hidden;
  int64_t hidden[CAIRN_MLP_MAX_LAYERS];
  int hidden_given;
  int async;                    /* --async-checkpoints / --sync-checkpoints */
  cairn_ckpt_compress compress; /* --compress lz4|shuffle|compact|none; default lz4 */
  cairn_precision precision;    /* --precision f32|bf16; recorded as user.fmnist.precision */
  int distributed;              /* --distributed */
  int *argc;                    /* main's, for MPI_Init (--distributed) */
  char ***argv;
} flags;

/* Parses the options of subcommand `name` (argv[0] is the first option),
 * which takes the FL_* set `opts`, into *f (defaults first) and checks
 * them together. 0, or the exit status of a usage error (printed). */
int flags_parse(const char *name, unsigned opts, int argc, char **argv, flags *f);
/* "256,128" → {256, 128}; 0 on success. */
int parse_hidden(const char *s, int64_t *h, int *n);

/* ---- the subcommands (table in main.c) ---------------------------------------------------- */

int cmd_train(flags *f);      /* train.c */
int cmd_warm_start(flags *f); /* train.c, with the recipes of warm_start.c */
int cmd_eval(flags *f);       /* eval.c */

/* ---- errors and usage (common.c, main.c) --------------------------------------------------- */

/* "cairn-fmnist: WHAT: status text: detail" (the detail: handle_msg when
 * given, else cairn_errmsg()); returns 1. */
int report_error(const char *what, cairn_status st, const char *handle_msg);
/* The end of a monitored session's work. With st != CAIRN_OK (what failed
 * in it): reports it, ends the session with that error (the hooks'
 * on_error, no end()) and reports the exit's own error when it differs;
 * returns 1. With CAIRN_OK: the clean exit, end() of every hook (the
 * CheckpointSaverHook writes the final step unless it has just saved
 * it); returns 0, or 1 with its error reported. */
int session_finish(cairn_monitored_session *ms, const char *what, cairn_status st);
/* The usage text (main.c, from the table of subcommands). */
void print_usage(FILE *out);
/* why (if any) and the usage on stderr; returns 2. */
int usage(const char *why);
/* Seconds on the monotonic clock. */
double now_secs(void);

/* ---- data (common.c) ------------------------------------------------------------------------- */

typedef struct data {
  cairn_tensor *xtr_owner, *xte_owner; /* (N, 28, 28) f32 */
  cairn_tensor xtr, xte;               /* views (N, 784) */
  cairn_tensor *ytr, *yte;             /* (N) i32 */
  int64_t features;
} data;

/* The four Fashion-MNIST files of dir; a missing one is named with how to
 * install the data set. 0 or 1 (printed). */
int data_load(data *d, const char *dir);
void data_free(data *d);

/* ---- the model (common.c) -------------------------------------------------------------------- */

/* The train op's batch source: the next global batch of the dataset, and
 * this rank's rows of it (all of them on one process). */
typedef struct batches {
  cairn_dataset *ds;
  cairn_tensor *xb, *yb; /* (B, features) f32, (B) i32 */
  cairn_tensor xs, ys;   /* views of this rank's rows */
} batches;

typedef struct model {
  cairn_registry *reg;
  cairn_mlp *mlp;
  cairn_op *train, *eval;
  int n_layers;
  batches b;
} model;

/* features → hidden... → 10, ReLU, Adam: tf.layers.dense names (dense/kernel,
 * dense_1/..., the output layer last), Adam slots, beta powers, global_step.
 * 0 or 1 (printed). */
int model_new(model *m, int64_t features, const int64_t *hidden, int n_hidden, uint64_t seed,
              cairn_precision precision);
void model_free(model *m);

/* ---- the architecture a checkpoint holds (common.c) ------------------------------------------ */

/* The hidden layer sizes of an open checkpoint into f: its metadata
 * "user.fmnist.hidden" (written by this program), else the kernels' shapes
 * (dense/kernel (784, h1), dense_1/kernel (h1, h2), ..., the last (hk, 10):
 * for checkpoints without cairn's metadata, such as TensorFlow's or
 * safetensors files). 0, or 1 with the error printed. */
int hidden_from_ckpt(cairn_ckpt *c, const char *path, flags *f);
/* The same from a Saver's metadata (user.fmnist.hidden only); frees meta. */
int hidden_from_meta(const char *path, cairn_saver_meta *meta, flags *f);
/* The same for the checkpoint file at path (opened and closed here). */
int hidden_from_path(const char *path, flags *f);

/* ---- the data position in checkpoints (data_position.c) ------------------------------------- */

typedef struct data_state {
  cairn_dataset *ds;
  cairn_saver *saver; /* the saver the CheckpointSaverHook uses */
  const char *dir;    /* NULL on the ranks other than 0 */
} data_state;

/* The checkpoint listener's before_save: the dataset position into the
 * checkpoint (the blob "train.state.dataset"). self is a data_state. */
cairn_status ds_before_save(void *self, cairn_session *s, int64_t step);
/* DataPositionHook: after every session creation, the position of the
 * checkpoint the session was restored from (rank 0's, broadcast, with
 * --distributed). Its self is a data_state. */
extern const cairn_hook_vtable DATA_HOOK;

#endif
