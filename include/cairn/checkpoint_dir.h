/* cairn/checkpoint_dir.h — a checkpoint directory as one object, and the
 * directory-level calls that read or guard one: the `checkpoint` state
 * file, the latest usable checkpoint, corrupt marks, the one-writer lock.
 *
 * Naming: `ckpt` is one checkpoint file (cairn/ckpt.h); `checkpoint_dir`
 * is a directory of them, with its state file, its lock and its rotation.
 *
 * A cairn_checkpoint_dir is opened once and then answers every question a
 * trainer, an evaluator or a tool asks of the directory, from one
 * descriptor of it:
 *  - its identity (device and inode, and a descriptor that keeps that
 *    inode): cairn_checkpoint_dir_verify says whether the path still leads
 *    to the directory opened (removed or replaced under a running trainer,
 *    its saves must stop);
 *  - the state file, read once (cairn_checkpoint_dir_state;
 *    cairn_checkpoint_dir_refresh reads it again);
 *  - the candidates, newest first, each with the reason it was skipped
 *    (cairn_checkpoint_dir_latest, cairn_checkpoint_dir_candidate_at), and
 *    the next intact one after a checkpoint found damaged
 *    (cairn_checkpoint_dir_next_intact, which marks it corrupt);
 *  - the rotation list a restarted Saver recovers
 *    (cairn_checkpoint_dir_rotation_at: the state file's paths, oldest
 *    first, without the files marked corrupt);
 *  - optionally the one-writer lock and the removal of the temporary files
 *    killed saves left (options.lock; cairn_checkpoint_dir_removed).
 * Every file the directory names is opened in it (openat of its base name,
 * no link that leads out, never a FIFO): doc/checkpoints-and-restarts.md,
 * items 7, 8, 10 and 11.
 *
 * The Saver saves into one (cairn_saver_save_in, cairn/saver.h); the
 * SessionManager restores through one; CheckpointSaverHook holds one, with
 * its lock, for the life of its session.
 *
 * The older calls that take `const char *dir` (cairn_checkpoint_state_read,
 * cairn_latest_checkpoint, _note and _open, cairn_saver_meta_read_latest,
 * cairn_checkpoint_lock_new_prefix) keep working: the lookups are thin
 * wrappers that open a directory object for the one call and close it.
 *
 * Thread safety: one thread uses a cairn_checkpoint_dir at a time; the
 * path-form calls are reentrant. */
#ifndef CAIRN_CHECKPOINT_DIR_H
#define CAIRN_CHECKPOINT_DIR_H

#include <stddef.h>
#include <stdint.h>

#include "cairn/ckpt.h"
#include "cairn/env.h"
#include "cairn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- The directory object ----------------------------------------------------- */

typedef struct cairn_checkpoint_dir cairn_checkpoint_dir;
/* The parsed state file (below). */
typedef struct cairn_checkpoint_state cairn_checkpoint_state;

typedef struct cairn_checkpoint_dir_options {
  /* 1: take the directory's one-writer lock (cairn_checkpoint_lock_new_prefix
     with `prefix`), which also removes the temporary files of unfinished
     saves of that prefix; default 0 (a reader takes none). */
  int lock;
  /* The Saver's file prefix relative to the directory ("model.ckpt", or
     "sub/model.ckpt"), for the lock's cleanup; NULL: "model.ckpt". */
  const char *prefix;
  /* Where the lock's WARNING (a file system without locks) goes; NULL: the
     default sink (stderr). */
  const cairn_env *env;
  /* sizeof the caller's struct (CAIRN_CHECKPOINT_DIR_OPTIONS_SIZE); 0: this
     first layout. */
  size_t struct_size;
} cairn_checkpoint_dir_options;
#define CAIRN_CHECKPOINT_DIR_OPTIONS_SIZE sizeof(cairn_checkpoint_dir_options)

/* Every field 0/NULL: no lock, prefix "model.ckpt", default log sink (a
 * zero-filled struct is the same). */
CAIRN_API cairn_checkpoint_dir_options cairn_checkpoint_dir_options_default(void);

/* Opens the directory `path` ("" means "."); its state file is read once,
 * by the first call that needs it (a missing or unusable state file is
 * not an error of open: see cairn_checkpoint_dir_state). opts may be NULL (defaults). Creates
 * nothing. Errors: CAIRN_E_NULL, CAIRN_E_NOT_FOUND (no such directory, or
 * not a directory), CAIRN_E_IO (it cannot be opened), CAIRN_E_INVALID (a
 * prefix that is absolute or has a ".." component; a struct_size smaller
 * than the first layout), CAIRN_E_BUSY (opts->lock and another trainer, or
 * another lock of this process, holds the lock: the message of
 * cairn_checkpoint_lock_new_prefix), CAIRN_E_NOMEM. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_checkpoint_dir_open(const char *path,
                                                                const cairn_checkpoint_dir_options *opts,
                                                                cairn_checkpoint_dir **out);
/* Releases the lock (if held) and the descriptors. NULL does nothing. */
CAIRN_API void cairn_checkpoint_dir_close(cairn_checkpoint_dir *d);

/* The path as given to open ("." for ""). Owned by d. */
CAIRN_API const char *cairn_checkpoint_dir_path(const cairn_checkpoint_dir *d);
/* The directory's device and inode, recorded at open. */
CAIRN_API void cairn_checkpoint_dir_identity(const cairn_checkpoint_dir *d, uint64_t *dev, uint64_t *ino);
/* CAIRN_OK when the path still leads to the directory opened; else
 * CAIRN_E_NOT_FOUND: "checkpoint_dir_verify: checkpoint directory 'd' was
 * removed while training: ..." ("was replaced by another directory", "was
 * replaced by something that is not a directory"). Errors: CAIRN_E_NULL,
 * CAIRN_E_NOT_FOUND. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_checkpoint_dir_verify(const cairn_checkpoint_dir *d);
/* 1 when d holds the directory's lock (opts.lock on a file system that
 * can lock); else 0. */
CAIRN_API int cairn_checkpoint_dir_lock_held(const cairn_checkpoint_dir *d);
/* What taking the lock removed: temporary files and their bytes (0 without
 * a lock). */
CAIRN_API void cairn_checkpoint_dir_removed(const cairn_checkpoint_dir *d, size_t *files, uint64_t *bytes);

/* The state file, read once at the first call that needs it (this one,
 * the lookups, the rotation list) or again by refresh: CAIRN_OK and
 * *st (owned by d, may be NULL when out is NULL), or the error of
 * cairn_checkpoint_state_read (CAIRN_E_NOT_FOUND: no state file;
 * CAIRN_E_FORMAT, CAIRN_E_IO, CAIRN_E_LIMIT: unusable), with its message
 * set again in cairn_errmsg(). *st is NULL after an error. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_checkpoint_dir_state(cairn_checkpoint_dir *d,
                                                                 const cairn_checkpoint_state **st);
/* Reads the state file again and forgets the candidates. Errors:
 * CAIRN_E_NULL, CAIRN_E_NOMEM (the state file's own errors are kept for
 * cairn_checkpoint_dir_state). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_checkpoint_dir_refresh(cairn_checkpoint_dir *d);

/* The newest usable checkpoint of d, copied to path[0..len): exactly
 * cairn_latest_checkpoint_open's rules, messages and note (below), from
 * the state file as d read it. out (may be NULL) receives it open. The
 * candidates tried are kept (cairn_checkpoint_dir_candidate_at). Errors:
 * those of cairn_latest_checkpoint_open but CAIRN_E_NOT_FOUND for a
 * missing directory (d is open). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_checkpoint_dir_latest(cairn_checkpoint_dir *d, char *path, size_t len,
                                                                  char *note, size_t note_len,
                                                                  cairn_ckpt **out);
/* The candidates the last cairn_checkpoint_dir_latest (or _next_intact)
 * tried, newest first: *path, and *skipped the reason it was passed over
 * (NULL for the one chosen). CAIRN_E_NOT_FOUND when i is out of range;
 * the strings are owned by d until its next lookup. */
CAIRN_API size_t cairn_checkpoint_dir_candidate_count(const cairn_checkpoint_dir *d);
CAIRN_API CAIRN_NODISCARD cairn_status cairn_checkpoint_dir_candidate_at(const cairn_checkpoint_dir *d, size_t i,
                                                                        const char **path, const char **skipped);
/* The walk back past a damaged checkpoint: marks `bad` corrupt for this
 * process (cairn_checkpoint_mark_corrupt with why) and returns the newest
 * usable checkpoint now, as cairn_checkpoint_dir_latest (which skips the
 * marked files). Errors: those of cairn_checkpoint_mark_corrupt other than
 * CAIRN_E_NOT_FOUND (a file already gone is skipped anyway), then those of
 * cairn_checkpoint_dir_latest (CAIRN_E_NOT_FOUND: no intact checkpoint
 * left; CAIRN_E_UNSUPPORTED: the next one was written by a newer cairn). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_checkpoint_dir_next_intact(cairn_checkpoint_dir *d, const char *bad,
                                                                       const char *why, char *path, size_t len);
/* The rotation list a restarted Saver recovers
 * (cairn_saver_recover_last_checkpoints): the state file's
 * all_model_checkpoint_paths, oldest first, without the files marked
 * corrupt (so rotation never deletes them); 0 entries without a usable
 * state file. count() makes the list (the marks as they are now); at()
 * is NULL out of range; owned by d until its next count() or refresh. */
CAIRN_API size_t cairn_checkpoint_dir_rotation_count(cairn_checkpoint_dir *d);
CAIRN_API const char *cairn_checkpoint_dir_rotation_at(const cairn_checkpoint_dir *d, size_t i);

/* ---- The state file and the latest checkpoint ------------------------------- */

/* TF's get_checkpoint_state: the parsed "<dir>/checkpoint" (the path
 * form; cairn_checkpoint_dir_state answers from an open directory, which
 * reads it once). Paths that are
 * relative in the file are joined onto dir ("dir/model.ckpt-3"); absolute
 * ones are returned as written. Only entries that name a file directly in
 * dir are kept (see "The state file names files of its own directory" at
 * the top); the others are ignored with a WARNING and listed by
 * cairn_checkpoint_state_ignored_at. An ignored model_checkpoint_path
 * gives way to the newest all_model_checkpoint_paths entry kept. */
/* Errors: CAIRN_E_NULL, CAIRN_E_NOT_FOUND (no state file), CAIRN_E_FORMAT
 * (unparsable, or model_checkpoint_path missing or empty: "invalid
 * checkpoint state loaded from 'dir'"; names the line; or no entry names
 * a file in dir: "... none of its 2 paths names a file in the
 * directory"), CAIRN_E_IO (e.g. "cannot open 'd/checkpoint': it is a FIFO,
 * not a regular file", or a symbolic link out of dir), CAIRN_E_LIMIT (a
 * state file over 16 MiB), CAIRN_E_NOMEM. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_checkpoint_state_read(const char *dir,
                                                                cairn_checkpoint_state **out);
CAIRN_API void cairn_checkpoint_state_free(cairn_checkpoint_state *st);
/* model_checkpoint_path (the newest). Owned by st. */
CAIRN_API const char *cairn_checkpoint_state_model_path(const cairn_checkpoint_state *st);
/* all_model_checkpoint_paths, oldest first; at() is NULL out of range. */
CAIRN_API size_t cairn_checkpoint_state_count(const cairn_checkpoint_state *st);
CAIRN_API const char *cairn_checkpoint_state_path_at(const cairn_checkpoint_state *st, size_t i);
/* The entries ignored because they name no file of the directory, as
 * written in the file (all_model_checkpoint_paths first, then
 * model_checkpoint_path); at() is NULL out of range. Owned by st. */
CAIRN_API size_t cairn_checkpoint_state_ignored_count(const cairn_checkpoint_state *st);
CAIRN_API const char *cairn_checkpoint_state_ignored_at(const cairn_checkpoint_state *st, size_t i);

/* TF's update_checkpoint_state: atomically writes "<dir>/checkpoint" with
 * model_path and all_paths[0..n) (model_path is appended when it is not
 * already the last of them). Paths in dir are written relative to it.
 * no_fsync 1 skips the fsyncs. Errors: CAIRN_E_NULL, CAIRN_E_INVALID
 * (empty model_path), CAIRN_E_NOT_FOUND (no such directory), CAIRN_E_NOSPC,
 * CAIRN_E_IO; on error the previous state file is intact and no temporary
 * file is left. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_checkpoint_state_write(const char *dir, const char *model_path,
                                                                 const char *const *all_paths, size_t n,
                                                                 int no_fsync);

/* The newest usable checkpoint of `dir`, copied to path[0..len).
 * A thin wrapper: it opens a cairn_checkpoint_dir for the call and asks
 * cairn_checkpoint_dir_latest (as do the _note and _open forms below); a
 * program that asks more than once opens the directory itself.
 *
 * Reads the state file; tries model_checkpoint_path, then the other listed
 * paths newest first, and returns the first that opens as a valid
 * checkpoint (cairn_ckpt_open: superblock, footer, metadata and index are
 * checked; tensor data is not — use cairn_ckpt_verify for that) and was not
 * marked with cairn_checkpoint_mark_corrupt in this process. When the
 * state file is missing or unusable (unparsable, a FIFO, no entry naming
 * a file of dir), or none of its checkpoints is usable, scans dir for files
 * named "<anything>-<step>" and returns the valid one with the highest step
 * (ties: the newest mtime); when the state file was missing or unusable,
 * once per process, a WARNING says so and names the file used (TF returns
 * None there; doc/checkpoints-and-restarts.md, item 11). Neither way leaves
 * dir: state file entries are confined as above, a scanned name that is a
 * symbolic link to a file elsewhere is skipped with a WARNING, and every
 * file is opened in dir (a checkpoint whose TF .index or data shard leads
 * out, or is a FIFO or a directory, is skipped, the note says why).
 *
 * cairn_errmsg() is cleared on entry. On CAIRN_OK the note (see
 * cairn_latest_checkpoint_note) is left in cairn_errmsg(): "" when the
 * state file's model_checkpoint_path was returned. New code should call
 * cairn_latest_checkpoint_note, which keeps the error channel for errors.
 * Errors: CAIRN_E_NULL, CAIRN_E_INVALID (len 0), CAIRN_E_NOT_FOUND (no
 * such directory, or no usable checkpoint: the message says what was
 * tried), CAIRN_E_LIMIT (the path does not fit in len bytes), CAIRN_E_NOMEM. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_latest_checkpoint(const char *dir, char *path, size_t len);

/* cairn_latest_checkpoint with its note in its own buffer: on CAIRN_OK,
 * note[0..note_len) holds "" when the state file's model_checkpoint_path
 * was returned, and otherwise why it was not, e.g. "latest_checkpoint 'd':
 * using 'd/model.ckpt-2': skipped 'd/model.ckpt-3': file is truncated
 * (incomplete): ..." (or "...: no state file 'd/checkpoint'; found by
 * scanning the directory"), cut to fit. note may be NULL when note_len is
 * 0; it is "" after an error, and cairn_errmsg() stays "" on success.
 * Errors: those of cairn_latest_checkpoint, and CAIRN_E_NULL (note NULL
 * with note_len > 0). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_latest_checkpoint_note(const char *dir, char *path, size_t len,
                                                                    char *note, size_t note_len);

/* cairn_latest_checkpoint_note that also hands over the checkpoint it
 * chose, open, in *out (close it with cairn_ckpt_close). Use it to read a
 * checkpoint of a directory: the handle was opened inside dir (see "The
 * state file names files of its own directory" at the top: every file of
 * it, a TensorFlow prefix's .index and data shards included, was looked up
 * in dir without following a link that leads out, and a FIFO or a
 * directory in their place is refused), and it stays valid if rotation
 * deletes the file meanwhile, which a second open by path would not.
 * *out is NULL after an error. Errors: those of cairn_latest_checkpoint_note,
 * and CAIRN_E_NULL (out NULL). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_latest_checkpoint_open(const char *dir, char *path, size_t len,
                                                                    char *note, size_t note_len, cairn_ckpt **out);

/* Marks the checkpoint file at `path` corrupt for the rest of this process:
 * cairn_latest_checkpoint skips it from now on ("skipped 'd/model.ckpt-3':
 * marked corrupt earlier in this process: <why>"), so every later lookup —
 * the next restore, a hook's, a tool's — picks the checkpoint before it.
 * The file itself is left as it is (nothing is renamed or deleted), and the
 * mark is not stored anywhere: a new process looks at the file afresh.
 *
 * The SessionManager calls it when restoring the newest checkpoint of a
 * directory fails on the file's own data (CAIRN_E_CORRUPT, CAIRN_E_TRUNCATED,
 * CAIRN_E_FORMAT), then restores the newest intact one (see
 * cairn_session_manager_prepare_session); a program that restores files
 * itself calls it the same way. The file is known by its device, inode,
 * size and modification time, not by its name: a checkpoint saved later
 * under the same name (the Saver replaces files atomically) is a new file
 * and is not skipped. `why` (may be NULL) is kept for that message (its
 * first 150 bytes); the first reason given for a file is kept. Thread-safe.
 * Errors: CAIRN_E_NULL, CAIRN_E_NOT_FOUND (no such file: nothing to mark;
 * cairn_latest_checkpoint skips missing files anyway), CAIRN_E_IO,
 * CAIRN_E_NOMEM. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_checkpoint_mark_corrupt(const char *path, const char *why);
/* 1 if the file at `path` was marked by cairn_checkpoint_mark_corrupt in
 * this process, else 0 (also for NULL or a file that does not exist). */
CAIRN_API int cairn_checkpoint_is_marked_corrupt(const char *path);

/* ---- One writer per directory ------------------------------------------------ */

/* The exclusive lock of a checkpoint directory: flock(2) on the file
 * "<dir>/.cairn.lock", which holds the holder's "pid <pid> host <name>".
 * The kernel releases it when the holder exits, SIGKILL included, so a
 * stale lock never blocks a restart. The file itself stays (harmless). */
typedef struct cairn_checkpoint_lock cairn_checkpoint_lock;

/* Takes the lock of dir at once (never waits), for a Saver whose files are
 * (cairn_checkpoint_dir_open with options.lock takes it through this call
 * and holds it with the directory, as CheckpointSaverHook does)
 * "<dir>/<prefix>-<step>": prefix is the Saver's prefix relative to dir,
 * the checkpoint_basename of CheckpointSaverHook ("model.ckpt", or
 * "sub/model.ckpt" for files in dir/sub); NULL means "model.ckpt". The
 * lock records the directory itself (device, inode, and a descriptor that
 * keeps it), not only its path: see cairn_checkpoint_lock_verify.
 *
 * On success, and only then, the temporary files that killed saves of
 * this Saver left behind are removed from the directory its files go to:
 * regular files named "<base>-<digits>.tmp.XXXXXX" (the checkpoint
 * writer's, base the last component of prefix: "model.ckpt-1200.tmp.a1B2c3")
 * and "checkpoint.tmp.XXXXXX" (the state file's), XXXXXX six letters or
 * digits — nothing else: not another prefix's ("notes-2024.tmp.backup",
 * "report-3.tmp.v2abcd"), not a directory, not a symbolic link (count and
 * bytes: cairn_checkpoint_lock_removed; CheckpointSaverHook logs them).
 * On a file system that cannot lock (flock fails with ENOLCK, EOPNOTSUPP,
 * ...) it succeeds holding nothing, with a WARNING on stderr, and removes
 * nothing; cairn_checkpoint_lock_held() is then 0.
 * Errors: CAIRN_E_BUSY when another process, or another lock object of
 * this one, holds it:
 *   checkpoint_lock_new: checkpoint directory 'd' is in use by another
 *   trainer: pid 4242 on host 'node7' holds the lock 'd/.cairn.lock' (one
 *   writer per directory: wait for it to finish, or use another directory)
 * CAIRN_E_NOT_FOUND (no such directory), CAIRN_E_INVALID (prefix empty,
 * absolute, ending with '/' or with a ".." component), CAIRN_E_IO (the
 * lock file cannot be opened — e.g. it is a symbolic link, which is never
 * followed — or locked), CAIRN_E_NULL, CAIRN_E_NOMEM. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_checkpoint_lock_new_prefix(const char *dir, const char *prefix,
                                                                        cairn_checkpoint_lock **out);
/* Deprecated, kept for one release: cairn_checkpoint_lock_new_prefix(dir,
 * NULL, out), which removes only the temporary files of the default prefix
 * "model.ckpt" (before, any "<x>-<digits>.tmp.XXXXXX" was removed, files
 * of other programs included). Call cairn_checkpoint_lock_new_prefix with
 * the Saver's prefix. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_checkpoint_lock_new(const char *dir, cairn_checkpoint_lock **out);
/* CAIRN_OK when the path the lock was taken at still leads to the
 * directory locked. A directory removed (rm -rf) or replaced (another
 * directory moved or created in its place) under a running trainer is no
 * longer guarded by l: a second trainer could lock the new one and train
 * next to this one. CheckpointSaverHook calls this before each save, and
 * the Saver before each rename of that save's commit; a save then fails,
 * creating nothing, with CAIRN_E_NOT_FOUND:
 *   checkpoint_lock_verify: checkpoint directory 'd' was removed while
 *   training: the lock taken at start no longer protects it; not
 *   re-creating it; training stops (...)
 * ("was replaced by another directory", "was replaced by something that
 * is not a directory"). Errors: CAIRN_E_NULL, CAIRN_E_NOT_FOUND. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_checkpoint_lock_verify(const cairn_checkpoint_lock *l);
/* Releases the lock. NULL does nothing. */
CAIRN_API void cairn_checkpoint_lock_free(cairn_checkpoint_lock *l);
/* "<dir>/.cairn.lock", owned by l. */
CAIRN_API const char *cairn_checkpoint_lock_path(const cairn_checkpoint_lock *l);
/* 1 when l really holds the lock (0 on a file system without locks). */
CAIRN_API int cairn_checkpoint_lock_held(const cairn_checkpoint_lock *l);
/* What taking the lock removed: temporary files and their bytes. */
CAIRN_API void cairn_checkpoint_lock_removed(const cairn_checkpoint_lock *l, size_t *files, uint64_t *bytes);
/* A check, not a reservation: CAIRN_OK when nobody holds the lock of dir
 * right now (or dir has no lock file), CAIRN_E_BUSY with the message above
 * when someone does. Creates nothing. For a program that wants to refuse
 * before it writes anything else into dir; the session's lock is what
 * guards the directory. Errors: CAIRN_E_NULL, CAIRN_E_NOMEM. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_checkpoint_lock_check(const char *dir);

/* ---- a misspelled checkpoint path ----
 * For a path that names nothing: writes to buf (cap bytes, always
 * NUL-terminated when cap > 0) " (did you mean 'a' or 'b'?)" naming up to
 * three entries of the path's directory closest to its last component
 * (a small edit distance, the same last '/' part, or a longer name that
 * starts with it; a TensorFlow bundle "x.index" counts as its prefix "x"),
 * or "" when none is close or the directory cannot be read. Returns the
 * number of names it wrote. The restores name them in their "not found"
 * messages; ckpt-inspect does too. Thread-safe. */
CAIRN_API size_t cairn_checkpoint_dir_suggest(const char *path, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
