#define _POSIX_C_SOURCE 200809L
/* cairn-fmnist: trains an MLP on Fashion-MNIST with a MonitoredTrainingSession
 * style loop, and resumes exactly where a killed run stopped.
 *
 *   cairn-fmnist train --checkpoint-dir DIR [--max-steps N] [--batch-size B] [--seed S]
 *                      [--save-checkpoint-steps K | --save-checkpoint-secs T]
 *                      [--eval-every N] [--log-every N] [--hidden H1,H2,...]
 *                      [--data-dir D] [--threads T] [--distributed]
 *                      [--async-checkpoints | --sync-checkpoints]
 *   cairn-fmnist eval --checkpoint-dir DIR [--data-dir D] [--threads T] [--precision f32|bf16]
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
 *
 * This file is the table of subcommands; train.c (with warm_start.c and
 * data_position.c), eval.c, flags.c (every option), common.c (errors,
 * data, model) and dist.c (MPI) hold the rest.
 */
#include "common.h"

#include <signal.h>
#include <string.h>

/* One subcommand: its name, the options it takes (FL_* of common.h, parsed
 * by flags.c), its usage (the continuation lines indented under it), and
 * the function that runs it. */
typedef struct command {
  const char *name;
  unsigned opts;
  const char *usage;
  int (*run)(flags *f);
} command;

static const command commands[] = {
    {.name = "train", .opts = FL_TRAIN | FL_HIDDEN | FL_DISTRIBUTED, .run = cmd_train,
     .usage = "train --checkpoint-dir DIR [--max-steps N] [--batch-size B] [--seed S]\n"
              "                    [--save-checkpoint-steps K | --save-checkpoint-secs T] [--eval-every N]\n"
              "                    [--log-every N] [--hidden H1,H2,...] [--data-dir D] [--threads T]\n"
              "                    [--async-checkpoints | --sync-checkpoints]\n"
              "                    [--compress lz4|shuffle|compact|none]   (checkpoint codec; default lz4)\n"
              "                    [--distributed]   (under mpirun: data-parallel over the ranks)\n"
              "                    [--precision f32|bf16]   (bf16: mixed precision, fp32 masters; default f32)\n"},
    {.name = "eval", .opts = 0, .run = cmd_eval,
     .usage = "eval --checkpoint-dir DIR [--data-dir D] [--threads T] [--precision f32|bf16]\n"},
    {.name = "warm-start", .opts = FL_TRAIN | FL_WARM, .run = cmd_warm_start,
     .usage = "warm-start --from CKPT --checkpoint-dir DIR --method init_fn|local_init_op|restore-option\n"
              "                    [train options]\n"},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

/* The usage text, to stdout for --help (a reader pipes it into a pager or
   a file), to stderr after a usage error. */
void print_usage(FILE *out) {
  for (size_t i = 0; i < N_COMMANDS; i++) fprintf(out, "%s" PROG " %s", i ? "       " : "usage: ", commands[i].usage);
  fprintf(out, "       " PROG " -h | --help\n"
               "Exit status: 0 success, 1 an error (data, files, cairn), 2 usage. See " PROG "(1).\n");
}

int usage(const char *why) {
  if (why) fprintf(stderr, PROG ": %s\n", why);
  print_usage(stderr);
  return 2;
}

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
  const char *name = argv[1];
  if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
    print_usage(stdout);
    return 0;
  }
  const command *cmd = NULL;
  for (size_t i = 0; i < N_COMMANDS; i++)
    if (strcmp(commands[i].name, name) == 0) cmd = &commands[i];
  if (!cmd) {
    char why[256];
    snprintf(why, sizeof why, "unknown command '%.100s'", name);
    return usage(why);
  }
  flags f;
  int rc = flags_parse(cmd->name, cmd->opts, argc - 2, argv + 2, &f);
  if (rc) return rc;
  f.argc = &argc;
  f.argv = &argv;
  if (f.threads > 0) {
    cairn_status st = cairn_set_num_threads(f.threads);
    if (st) return report_error("--threads", st, NULL);
  }
  return cmd->run(&f);
}
