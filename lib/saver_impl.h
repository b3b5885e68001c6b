/* Private interface of the Saver's files (lib/saver.c: construction and
 * save; lib/saver_async.c: the asynchronous save; lib/saver_restore.c:
 * restore): the saver's fields, the two halves of a save — the checks done
 * before anything is written, and the commit (checkpoint file, rotation
 * list, state file, deletions) of a given set of tensors and metadata — and
 * the checkpoint a restore hands on. Never installed. */
#ifndef CAIRN_SAVER_IMPL_H
#define CAIRN_SAVER_IMPL_H

#include "cairn/ckpt.h"
#include "cairn/saver.h"
#include "checkpoint_dir_impl.h" /* cairn__dir_guard, the lookup */
#include "internal.h"
#include "test_seams.h"          /* the restore's seam */

#include <pthread.h>

typedef struct cairn__meta_item {
  char *key; /* full key: "user.<k>" or "train.state.<k>" (any, read from a checkpoint) */
  cairn_meta_type type;
  uint64_t u; /* U64 and BOOL: only read from a checkpoint (saver_restore.c) */
  int b;
  int64_t i;
  double f;
  char *bytes; /* STR: NUL-terminated; BYTES: len bytes (+ a NUL) */
  size_t len;
} cairn__meta_item;

typedef struct cairn__last_ckpt {
  char *path;
  double time;
  int recovered; /* given to recover_last_checkpoints, not written by this saver */
} cairn__last_ckpt;

/* The one save in flight of a saver. The saver owns it (saver.c: waiting
 * for it, taking its error, stopping its thread and freeing it); the
 * asynchronous half (saver_async.c) creates it at the first save_begin,
 * runs its writer thread and fills in each job. saver.c never calls into
 * saver_async.c: the thread is joined with pthread_join, and the job's
 * memory is plain memory. */
typedef struct cairn__saver_async {
  pthread_mutex_t mu;
  pthread_cond_t cv_job;  /* the writer waits for a job (or quit) */
  pthread_cond_t cv_done; /* callers wait for the job to be done */
  pthread_t thread;
  int running; /* the thread exists */
  int quit;
  int busy; /* a job is handed over and not done: the writer owns the job's fields */

  /* the job: staged copies, owned by the writer while busy */
  char *file, *dir;
  int64_t step;
  unsigned char *slab; /* reused from save to save (cairn_alloc) */
  size_t slab_bytes;
  cairn_tensor *views; /* s->n tensors pointing into slab */
  const cairn_tensor **tp;
  cairn__meta_item *meta;
  size_t n_meta;
  cairn__dir_guard guard; /* a copy of the writer's (none: dir NULL) */

  /* the outcome of the last job, until taken */
  cairn_status err;
  char msg[CAIRN__ERRMSG_LEN];
} cairn__saver_async;

struct cairn_saver {
  size_t n;
  char **names;
  cairn_var **vars;

  int max_to_keep;
  double keep_secs;
  cairn_ckpt_write_options wopts;
  cairn_saver_clock_fn clock; /* the deprecated option, else NULL */
  void *clock_ctx;
  const cairn_env *env; /* the caller's (log sink; its now is the clock when clock is NULL) */
  double next_keep_time;

  /* Written by the commit, which runs on the background writer while an
     asynchronous save is in flight: read them only when none is. */
  cairn__last_ckpt *last; /* oldest first */
  size_t n_last;

  cairn__meta_item *meta;
  size_t n_meta;

  int replace_same_step; /* TF's overwrite of "<prefix>-<step>" (option) */
  int last_unchanged;    /* the last save found its file already holding the same contents */

  cairn__saver_async *async; /* lib/saver_async.c; NULL until the first save_begin */

  /* The checkpoint the last restore read, still open (training thread:
     cairn__saver_keep_restored); the save's prepare hands it to the commit
     as compare_with, which only the commit (maybe on the writer thread)
     reads and closes. */
  cairn_ckpt *restored, *compare_with;
};

/* The start of every save: waits for the save in flight and returns the
 * error of a failed background save (cairn__saver_async_drain), then the
 * checks before anything is written (arguments, file name, path buffer,
 * initialized variables, the guarded directory when guard is not NULL,
 * parent directory). On CAIRN_OK,
 * *file ("<prefix>-<step>") and *dir (its directory) are malloc'ed, and
 * *empty is 1 when the save set is empty (nothing to write: path ""). */
cairn_status cairn__saver_prepare(cairn_saver *s, const char *fn, const char *prefix, int64_t global_step,
                                  char *path, size_t len, const cairn__dir_guard *guard, char **file, char **dir,
                                  int *empty);

/* Writes tensors[0..s->n) under s->names with meta[0..n_meta) as the
 * checkpoint `file` of step global_step, then the rotation list, the state
 * file in dir and the deletions, exactly as cairn_saver_save; sets
 * s->last_unchanged. With a guard (may be NULL), the guarded directory is
 * checked first and again before each step that names files by path (the
 * checkpoint's rename, the state file's, the deletions): a directory
 * removed or replaced meanwhile fails the save (cairn__dir_guard_check)
 * and nothing is written into, or deleted from, what is now at its path.
 * Touches no variable and no s->meta, so it may run on another thread than
 * the one that owns the variables. */
cairn_status cairn__saver_commit(cairn_saver *s, const char *fn, const char *file, const char *dir,
                                 int64_t global_step, const cairn_tensor *const *tensors,
                                 const cairn__meta_item *meta, size_t n_meta, const cairn__dir_guard *guard);

/* cairn_saver_save_begin with guard (a checkpoint directory's identity,
 * cairn__checkpoint_dir_guard; may be NULL) checked before the save and,
 * in phase 2's commit, before its renames and deletions; the job keeps a
 * copy of guard (saver_async.c). */
cairn_status cairn__saver_save_begin_guarded(cairn_saver *s, const char *prefix, int64_t global_step, char *path,
                                             size_t len, const cairn__dir_guard *guard);
/* "<dir>/<basename>" for a save into d, malloc'd into *prefix; the
 * basename checks of cairn_saver_save_in (saver.c). */
cairn_status cairn__saver_prefix_in(const char *fn, const cairn_checkpoint_dir *d, const char *basename,
                                    char **prefix);

/* Hands the checkpoint a restore just read (open) to the saver, which keeps
 * it for its next save: a resume saves the step it restored right after
 * session creation (CheckpointSaverHook), and that save's same-step
 * comparison then reads the file already open instead of opening the
 * newest checkpoint a second time. Closes the one kept before. Training
 * thread only. */
void cairn__saver_keep_restored(cairn_saver *s, cairn_ckpt *c);

/* cairn_saver_restore (opts NULL) or cairn_saver_restore_partial of a
 * checkpoint found in directory d: its files are opened with
 * cairn__open_read(d, ...) (saver_restore.c). */
cairn_status cairn__saver_restore_in(cairn_saver *s, const cairn__dir *d, const char *path,
                                     const cairn_restore_options *opts, cairn_restore_report **report,
                                     cairn_saver_meta **meta);

/* 1 if c's open file is the file at path now, and neither changed since c
 * opened it (device, inode, size and modification time): ckpt_read.c. */
int cairn__ckpt_is_file(const cairn_ckpt *c, const char *path);

/* The save in flight (saver.c). Waits for it (if any) and returns the
 * unreported error of a background save (then forgotten), else CAIRN_OK.
 * `fn` names the caller in the message. */
cairn_status cairn__saver_async_drain(cairn_saver *s, const char *fn);
/* Waits for the save in flight without taking its result. */
void cairn__saver_async_idle(const cairn_saver *s);
/* Stops the writer thread and frees the slot and its staging buffers; an
 * error nobody took is logged as a WARNING rather than dropped silently. */
void cairn__saver_async_free(cairn_saver *s);
/* Frees the metadata copies of a job. */
void cairn__saver_meta_free(cairn__meta_item *m, size_t n);

#endif
