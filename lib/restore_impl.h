/* Private helpers of the partial restore (saver_restore.c) for the restore
 * op and the SessionManager. Never installed. */
#ifndef CAIRN_RESTORE_IMPL_H
#define CAIRN_RESTORE_IMPL_H

#include "cairn/saver.h"

/* The checks of a strict partial restore that need no checkpoint: every
 * include pattern and the model side of every rename rule of o must match
 * a variable of s's save set (after o's collection filter). CAIRN_OK when
 * they all do or o is lenient or NULL; else CAIRN_E_NOT_FOUND, the
 * message starting with fn and naming each pattern and the closest names;
 * CAIRN_E_INVALID / CAIRN_E_NULL for options a restore would refuse.
 * saver_restore.c */
cairn_status cairn__restore_check_names(const char *fn, const cairn_saver *s, const cairn_restore_options *o);

/* The newest usable checkpoint of the directory `dir`, for the restore
 * calls that accept a directory where a checkpoint path goes and for the
 * MonitoredTrainingSession's choice between checkpoint_dir and a
 * pretrained file: CAIRN_OK with its path in path[0..len) and, with out
 * not NULL, the checkpoint open in *out; the errors of
 * cairn_latest_checkpoint_open. One function so that it can be pointed at
 * the checkpoint directory object later. restore_source.c */
struct cairn_ckpt;
cairn_status cairn__checkpoint_in_dir(const char *dir, char *path, size_t len, struct cairn_ckpt **out);

/* The file (or TF bundle prefix) a restore of `path` reads: path itself
 * when it is not a directory; for a directory, its newest usable
 * checkpoint (cairn__checkpoint_in_dir), else "DIR/variables" when
 * "DIR/variables.index" exists (or "DIR/variables/variables" for a
 * SavedModel), else its only .safetensors file. *was_dir (may be NULL) says
 * whether path was a directory. Errors (messages start with fn):
 * CAIRN_E_NOT_FOUND (a directory with none of these), CAIRN_E_INVALID
 * (several .safetensors files), CAIRN_E_LIMIT (out too small), the
 * lookup's other errors, CAIRN_E_IO. restore_source.c */
cairn_status cairn__restore_source(const char *fn, const char *path, char *out, size_t len, int *was_dir);

/* " (did you mean 'model.ckpt-100'?)" naming the entries of path's
 * directory closest to its last component (a TF bundle by its prefix), or
 * "" in hint[0..len). restore_source.c */
void cairn__near_files(const char *path, char *hint, size_t len);

#endif
