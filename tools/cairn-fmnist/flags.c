/* cairn-fmnist/flags.c — the command line's options, parsed in one place:
 * their defaults, which subcommand takes which (the FL_* sets of main.c's
 * table), their values' ranges, and the rules between them. A new option
 * is a field of `flags` (common.h), a default and a line here. */
#define _POSIX_C_SOURCE 200809L

#include "common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dist.h"

static int parse_int(const char *s, long long lo, long long hi, long long *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) return 1;
  *out = v;
  return 0;
}

int parse_hidden(const char *s, int64_t *h, int *n) {
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

static void flags_default(flags *f) {
  memset(f, 0, sizeof *f);
  f->data_dir = DEFAULT_DATA_DIR;
  f->max_steps = 18760; /* 20 epochs of 60000 at batch 64: test accuracy ~0.89 */
  f->batch = 64;
  f->seed = 1;
  f->save_steps = 1000;
  f->eval_every = 0;
  f->log_every = 500;
  f->n_hidden = 2;
  /* One thread unless asked: OpenMP threads that spin at barriers collapse
     when the machine is busy (measured: ~25 steps/s with 2 threads next to
     other jobs on 2 cores, ~250-850 with one). --threads 0: the library's
     default (every core). */
  f->threads = 1;
  f->async = 1; /* --sync-checkpoints turns it off */
  f->hidden[0] = 256;
  f->hidden[1] = 128;
}

int flags_parse(const char *name, unsigned opts, int argc, char **argv, flags *f) {
  flags_default(f);
  int trains = (opts & FL_TRAIN) != 0, warm = (opts & FL_WARM) != 0;
  int steps_given = 0, secs_given = 0;
  for (int i = 0; i < argc; i++) {
    long long v;
    char why[512];
    const char *a = argv[i];
    if (strcmp(a, "--distributed") == 0) {
      f->distributed = 1;
      continue;
    }
    if (trains && (strcmp(a, "--async-checkpoints") == 0 || strcmp(a, "--sync-checkpoints") == 0)) {
      f->async = a[2] == 'a';
      continue;
    }
    if (i + 1 >= argc) {
      snprintf(why, sizeof why, "%s: missing value or unknown option '%.100s'", name, a);
      return usage(why);
    }
    const char *val = argv[++i];
    if (strcmp(a, "--checkpoint-dir") == 0) f->dir = val;
    else if (strcmp(a, "--data-dir") == 0) f->data_dir = val;
    else if (strcmp(a, "--threads") == 0 && !parse_int(val, 0, 4096, &v)) f->threads = (int)v;
    else if (warm && strcmp(a, "--from") == 0) f->from = val;
    else if (warm && strcmp(a, "--method") == 0) f->method = val;
    else if (trains && strcmp(a, "--max-steps") == 0 && !parse_int(val, 0, INT64_MAX, &v)) f->max_steps = v;
    else if (trains && strcmp(a, "--batch-size") == 0 && !parse_int(val, 1, 1 << 20, &v)) f->batch = v;
    else if (trains && strcmp(a, "--seed") == 0 && !parse_int(val, 0, INT64_MAX, &v)) f->seed = (uint64_t)v;
    else if (trains && strcmp(a, "--save-checkpoint-steps") == 0 && !parse_int(val, 1, INT64_MAX, &v))
      f->save_steps = v, steps_given = 1;
    else if (trains && strcmp(a, "--save-checkpoint-secs") == 0 && !parse_int(val, 1, 1000000000, &v))
      f->save_secs = (double)v, secs_given = 1;
    else if (trains && strcmp(a, "--eval-every") == 0 && !parse_int(val, 0, INT64_MAX, &v)) f->eval_every = v;
    else if (trains && strcmp(a, "--log-every") == 0 && !parse_int(val, 0, INT64_MAX, &v)) f->log_every = v;
    else if (trains && strcmp(a, "--compress") == 0 && !strcmp(val, "lz4")) f->compress = CAIRN_CKPT_COMPRESS_AUTO;
    else if (trains && strcmp(a, "--compress") == 0 && !strcmp(val, "shuffle")) f->compress = CAIRN_CKPT_COMPRESS_SHUFFLE;
    else if (trains && strcmp(a, "--compress") == 0 && !strcmp(val, "compact")) f->compress = CAIRN_CKPT_COMPRESS_COMPACT;
    else if (trains && strcmp(a, "--compress") == 0 && !strcmp(val, "none")) f->compress = CAIRN_CKPT_COMPRESS_NONE;
    else if (strcmp(a, "--precision") == 0 && !strcmp(val, "f32")) f->precision = CAIRN_PRECISION_F32;
    else if (strcmp(a, "--precision") == 0 && !strcmp(val, "bf16")) f->precision = CAIRN_PRECISION_BF16;
    else if ((opts & FL_HIDDEN) && strcmp(a, "--hidden") == 0 && !parse_hidden(val, f->hidden, &f->n_hidden))
      f->hidden_given = 1;
    else {
      snprintf(why, sizeof why, "%s: bad option or value: %.100s %.100s", name, a, val);
      return usage(why);
    }
  }
  if (!f->dir) return usage("--checkpoint-dir is required");
  if (steps_given && secs_given) return usage("give --save-checkpoint-steps or --save-checkpoint-secs, not both");
  if (warm && !f->from) return usage("warm-start needs --from CKPT");
  if (warm && (!f->method || (strcmp(f->method, "init_fn") && strcmp(f->method, "local_init_op") &&
                              strcmp(f->method, "restore-option"))))
    return usage("warm-start needs --method init_fn, local_init_op or restore-option");
  if (f->distributed && !(opts & FL_DISTRIBUTED))
    return usage("--distributed is for train only (eval and warm-start run in one process)");
  if (f->distributed && !fmnist_dist_available()) {
    fprintf(stderr, PROG ": --distributed: %s\n", fmnist_dist_missing());
    return 2;
  }
  return 0;
}
