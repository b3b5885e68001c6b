/* Private interface of the checkpoint directory object (lib/checkpoint_dir.c)
 * and its lock (lib/checkpoint_lock.c), for the Saver, the SessionManager
 * and CheckpointSaverHook. Never installed. */
#ifndef CAIRN_CHECKPOINT_DIR_IMPL_H
#define CAIRN_CHECKPOINT_DIR_IMPL_H

#include "cairn/checkpoint_dir.h"
#include "internal.h" /* cairn__dir_guard */

/* cairn_checkpoint_dir_open whose messages start with `fn` (the
 * path-form wrappers keep their own names: "latest_checkpoint: 'd': No
 * such file or directory"). */
cairn_status cairn__checkpoint_dir_open_as(const char *fn, const char *path, const cairn_checkpoint_dir_options *o,
                                           cairn_checkpoint_dir **out);
/* The directory's identity, recorded at open: what a save into it checks
 * before each step that names files by path. */
const cairn__dir_guard *cairn__checkpoint_dir_guard(const cairn_checkpoint_dir *d);
/* The directory's descriptor, for opening the files it names
 * (cairn__open_read, cairn__ckpt_open_in). */
const cairn__dir *cairn__checkpoint_dir_fd(const cairn_checkpoint_dir *d);
/* cairn_checkpoint_lock_new_prefix whose WARNING (a file system without
 * locks) goes to env (NULL: the default sink). */
cairn_status cairn__checkpoint_lock_new_env(const char *dir, const char *prefix, const cairn_env *env,
                                            cairn_checkpoint_lock **out);

#endif
