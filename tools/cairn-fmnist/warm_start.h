/* cairn-fmnist/warm_start.h — what train.c and warm_start.c share: the
 * parts of a training run the warm-start recipes change, and the recipes.
 */
#ifndef CAIRN_TOOLS_FMNIST_WARM_START_H
#define CAIRN_TOOLS_FMNIST_WARM_START_H

#include "common.h"

/* What differs between train and the warm-start methods. */
typedef struct recipe {
  cairn_scaffold_options so;
  const char *restore_file; /* ChiefSessionCreator's checkpoint_filename_with_path */
  cairn_saver *full_saver;  /* for the CheckpointSaverHook when the scaffold's is partial */
} recipe;

/* What a recipe made (freed by warm_free; a zero-filled warm is empty). */
typedef struct warm {
  cairn_var *vars[2 * CAIRN_MLP_MAX_LAYERS]; /* the hidden layers' kernels and biases */
  const char *include[2 * CAIRN_MLP_MAX_LAYERS];
  size_t n;
  cairn_saver *partial, *full;
  cairn_op *parts[2], *local, *warm_op;
  cairn_ready_op *rfl;
  cairn_restore_options ro;
} warm;

/* --from as a checkpoint file (a directory: its newest) into src, and its
 * architecture into f. 0, or the exit status (the error printed). */
int warm_source(flags *f, char *src, size_t len);
/* Sets up rc for the recipe f->method that restores the hidden layers of
 * m from src (printing which); what it makes is in *w. 0 or 1 (printed). */
int warm_recipe(const flags *f, model *m, const char *src, warm *w, recipe *rc);
void warm_free(warm *w);

#endif
