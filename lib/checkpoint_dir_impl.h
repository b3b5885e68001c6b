/* Private interface of the checkpoint directory object (lib/checkpoint_dir.c)
 * and its lock (lib/checkpoint_lock.c), for the Saver, the SessionManager
 * and CheckpointSaverHook. Never installed. */
#ifndef CAIRN_CHECKPOINT_DIR_IMPL_H
#define CAIRN_CHECKPOINT_DIR_IMPL_H

#include "cairn/checkpoint_dir.h"
#include "internal.h"

struct stat;
/* A directory as it was when a writer took it: the path it was reached by,
 * its device and inode, and an O_DIRECTORY descriptor of it, which keeps
 * that inode alive so that its number cannot be handed to a directory
 * created later in its place (lib/checkpoint_lock.c). A trainer checks
 * before each save and before each rename of a commit that the path still
 * leads to that directory: after `rm -rf DIR` (or a new DIR put in its
 * place) its files would go to a directory nobody sees, or to one its
 * lock does not cover. dir NULL: no guard, every check passes. */
typedef struct cairn__dir_guard {
  char *dir;
  int fd; /* -1 when none could be opened: dev and ino alone are compared */
  uint64_t dev, ino;
} cairn__dir_guard;
/* Records the directory at `dir` (which must exist). Errors start with
 * "fn: ": CAIRN_E_NOT_FOUND (missing, or not a directory), CAIRN_E_NOMEM. */
cairn_status cairn__dir_guard_init(cairn__dir_guard *g, const char *fn, const char *dir);
/* dst becomes a copy of src (a descriptor of its own); 0, or -1 when out of
 * memory (dst is then cleared: no guard). */
int cairn__dir_guard_copy(cairn__dir_guard *dst, const cairn__dir_guard *src);
void cairn__dir_guard_clear(cairn__dir_guard *g);
/* NULL when g's path still leads to its directory (or g guards nothing);
 * else what happened to it: "removed", "replaced by another directory",
 * "replaced by something that is not a directory", or "made unreachable
 * (stat fails)". */
const char *cairn__dir_guard_changed(const cairn__dir_guard *g);
/* CAIRN_OK, or CAIRN_E_NOT_FOUND with "<what>: checkpoint directory 'D'
 * was removed while training: the lock taken at start no longer protects
 * it; not re-creating it; training stops (...)" (or "was replaced by
 * another directory", ...). */
cairn_status cairn__dir_guard_check(const cairn__dir_guard *g, const char *what);
/* That error with `how` said of the directory ("being removed"). */
cairn_status cairn__dir_guard_fail(const cairn__dir_guard *g, const char *what, const char *how);
struct cairn_checkpoint_lock;
/* The lock's directory, recorded when the lock was taken. */
const cairn__dir_guard *cairn__checkpoint_lock_guard(const struct cairn_checkpoint_lock *l);

/* 1 if the file stat() described in *sb was marked with
 * cairn_checkpoint_mark_corrupt in this process, and then the reason in
 * why[0..len) (checkpoint_corrupt.c; the lookup skips such files). */
int cairn__checkpoint_marked(const struct stat *sb, char *why, size_t len);

/* cairn_latest_checkpoint_note that, with keep, hands over the chosen
 * checkpoint still open in *keep (close it), so that reading its metadata
 * does not open it a second time (checkpoint_dir.c: a directory object
 * opened for the call). */
cairn_status cairn__latest_checkpoint_open(const char *dir, char *path, size_t len, char *note, size_t note_len,
                                           cairn_ckpt **keep);

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
