/* cairn/saver.h — Saver (TF 1.x tf.train.Saver), the `checkpoint` state
 * file, latest-checkpoint lookup, and partial restore with a report.
 *
 * A Saver is a fixed list of (checkpoint name, variable) pairs — its *save
 * set* — made from the registry's GLOBAL variables (the default), from a
 * list of variables (each under its own name) or from a name map
 * (checkpoint name → variable), as TF's var_list. Saving always writes the
 * whole save set; restoring chooses a *restore set* inside it (everything
 * for cairn_saver_restore, a filtered and renamed subset for
 * cairn_saver_restore_partial). The two are separate on purpose: a partial
 * restore never makes a later save drop variables (in TF the Saver
 * restricted for a partial restore is also the one that saves, so the next
 * checkpoint loses what it left out).
 *
 * Files. cairn_saver_save(s, "dir/model.ckpt", 1000, ...) writes one cairn
 * checkpoint file (include/cairn/ckpt.h) "dir/model.ckpt-1000" atomically,
 * then rewrites "dir/checkpoint", the state file, in TF's text form:
 *
 *   model_checkpoint_path: "model.ckpt-1000"
 *   all_model_checkpoint_paths: "model.ckpt-800"
 *   all_model_checkpoint_paths: "model.ckpt-1000"
 *
 * (protobuf text of CheckpointState, oldest first, the last line being the
 * newest; paths inside the state file's directory are written relative to
 * it, so the directory can be moved; others as given; '"', '\'', '\\' and
 * bytes outside 0x20..0x7e are escaped as protobuf does: \" \' \\ \n \r \t
 * \ooo), and only then deletes checkpoints that rotation evicted. The state
 * file is replaced atomically (temporary file, fsync, rename, fsync of the
 * directory).
 *
 * Metadata written with every checkpoint (ckpt.h typed key-values):
 *   train.global_step   i64     the global_step argument (absent when < 0)
 *   ckpt.producer       string  "cairn <version>"
 *   user.<key>          str / i64 / f64, set with cairn_saver_set_user_*
 *   train.state.<name>  bytes   opaque training state (RNG state, dataset
 *                               position...), set with cairn_saver_set_state
 * Read them back with cairn_saver_meta_read() or from the restore calls.
 *
 * Rotation (TF's max_to_keep / keep_checkpoint_every_n_hours). The saver
 * remembers (path, time) of its recent checkpoints, oldest first. After a
 * save, while the list is longer than max_to_keep the oldest entry is
 * evicted; an evicted checkpoint whose time is later than the "next keep
 * time" (creation time + N hours, advanced by N hours each time one is
 * kept) is kept on disk forever (and leaves the list and the state file);
 * the others are deleted. max_to_keep 0 keeps everything and records
 * nothing (the state file then lists only the newest checkpoint), as TF's
 * None. A saver deletes only checkpoints it knows: those it saved and
 * those given to cairn_saver_recover_last_checkpoints(). A recovered path
 * is deleted only when it is a regular file named "<prefix>-<step>" (the
 * base name of the evicting save's prefix) in that save's directory;
 * any other is left in place with a WARNING on stderr naming it.
 * (Deviation from TF: TF evicts at most one entry per save, so a list
 * recovered longer than max_to_keep never shrinks; cairn trims it.)
 *
 * The state file names files of its own directory only. Whoever can
 * write one text file in a checkpoint directory must not be able to make
 * a trainer read, adopt or delete a file elsewhere, so every reader
 * (cairn_checkpoint_state_read, cairn_latest_checkpoint and all that use
 * them: restore, recovery of the rotation list, the tools) ignores an
 * entry that does not name a file directly in the directory — one with a
 * ".." component, an absolute path elsewhere, a path through a symbolic
 * link that leads out, a link whose target is outside, a TF prefix whose
 * .index is such a link — with a WARNING on stderr naming it, e.g.
 *   cairn WARNING: checkpoint state 'd/checkpoint': ignoring
 *   all_model_checkpoint_paths "/etc/passwd": it is in '/etc', not in the
 *   checkpoint directory '/data/d'; a state file may only name files in
 *   its own directory
 * TF's absolute form of a path inside the directory is accepted. The files
 * themselves (the state file, each checkpoint, a TF prefix's .index and
 * data shards) are opened in the directory, by their base names, without
 * following a link that leads out; a link whose end is a file of the
 * directory is followed; a FIFO, a directory or any other non-regular file
 * is refused at once (never waited on). Hard links are not detected. See
 * doc/checkpoints-and-restarts.md, items 10 and 11.
 *
 * One writer per directory. Two trainers saving into one directory would
 * interleave their checkpoints and rotation silently; a trainer holds the
 * directory's lock (cairn_checkpoint_lock_new_prefix, below) for the life of its
 * session. CheckpointSaverHook takes it (cairn/monitored.h), so the chief
 * of a MonitoredTrainingSession does; readers (evaluation, the tools, a
 * non-chief) take none. A Saver used directly does not lock: a program
 * that saves through one holds the lock itself. The lock is the
 * directory's, not the path's: removed or replaced under a running trainer,
 * the directory is not made again and the hook's next save fails
 * (cairn_checkpoint_lock_verify).
 *
 * A file size limit (ulimit -f, RLIMIT_FSIZE). A write past it raises
 * SIGXFSZ, whose default action kills the process at once (exit status 153
 * from a shell, a temporary file left). With SIGXFSZ ignored
 * (signal(SIGXFSZ, SIG_IGN)) the write fails with EFBIG instead and the
 * save fails cleanly: CAIRN_E_IO, "... at offset N: File too large" naming
 * the file, the previous checkpoints and the state file untouched, no
 * temporary file left — nothing is lost. The library never changes a
 * process-wide signal disposition; a program that may run under such a
 * limit ignores SIGXFSZ itself, as cairn's tools do (see
 * doc/checkpoints-and-restarts.md, "A file size limit").
 *
 * Lifetimes: a saver keeps pointers to its variables; free it before their
 * registry. Not thread-safe: one thread uses a saver at a time (its own
 * background writer aside, see "Asynchronous saving"); the free
 * functions (cairn_latest_checkpoint, the state-file and meta calls) are
 * reentrant.
 */
#ifndef CAIRN_SAVER_H
#define CAIRN_SAVER_H

#include <stddef.h>
#include <stdint.h>

#include "cairn/checkpoint_dir.h"
#include "cairn/ckpt.h"
#include "cairn/env.h"
#include "cairn/status.h"
#include "cairn/tensor.h"
#include "cairn/var.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Options ----------------------------------------------------------------- */

/* Deprecated, kept for one release: the Saver's own clock type. Give the
 * caller's cairn_env (options.env) instead; its `now` is then the Saver's
 * clock. Seconds since an arbitrary epoch (the default clock is the wall
 * clock, which recover_last_checkpoints compares with file mtimes). */
typedef double (*cairn_saver_clock_fn)(void *ctx);

typedef struct cairn_saver_options {
  int max_to_keep;                      /* default 5; 0 keeps all (TF's None); < 0 invalid */
  double keep_checkpoint_every_n_hours; /* default 10000 (TF); must be > 0 */
  int allow_empty;                      /* 1: an empty save set is allowed (save and
                                           restore are then no-ops); else CAIRN_E_INVALID */
  cairn_ckpt_write_options write;       /* passed to the checkpoint writer; write.no_fsync
                                           also skips the fsyncs of the state file */
  cairn_saver_clock_fn clock;           /* deprecated (one release): use env. Wins over env's
                                           clock when set */
  void *clock_ctx;
  int replace_same_step;                /* 1: a save of step S replaces an existing checkpoint
                                           "<prefix>-S" whatever it holds (TF); default 0:
                                           see cairn_saver_save */
  /* The caller's environment (borrowed: it must outlive the saver): the
     Saver's WARNINGs (a recovered path rotation will not delete, an
     asynchronous save's error nobody took) go to its log sink, and its
     `now`, when given, is the Saver's clock (keep_checkpoint_every_n_hours;
     it must then count wall-clock seconds, which recovered entries' file
     mtimes are compared with). NULL: stderr and the wall clock. */
  const cairn_env *env;
} cairn_saver_options;

/* TF's defaults: max_to_keep 5, keep_checkpoint_every_n_hours 10000, empty
 * save set refused, default writer options, wall clock. Passing NULL
 * options to a constructor means the same. A zero-filled struct is NOT the
 * default: max_to_keep 0 keeps every checkpoint and
 * keep_checkpoint_every_n_hours 0 is refused, so start from this function
 * (every other field's zero is its default). */
CAIRN_API cairn_saver_options cairn_saver_options_default(void);

/* ---- Construction -------------------------------------------------------- */

typedef struct cairn_saver cairn_saver;

/* One pair of a name map: the variable is saved and restored as `name`. */
typedef struct cairn_saver_entry {
  const char *name; /* 1..1024 bytes, no control characters */
  cairn_var *var;
} cairn_saver_entry;

/* A saver for every GLOBAL variable of r at this moment (LOCAL variables
 * are never saved), each under its own name, in creation order. Variables
 * created later are not included (TF builds its default var_list when the
 * Saver is built). opts may be NULL (defaults).
 * Errors: CAIRN_E_NULL, CAIRN_E_INVALID (bad options; no GLOBAL variable
 * and not allow_empty: "no variables to save"), CAIRN_E_NOMEM. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_saver_new(cairn_registry *r, const cairn_saver_options *opts,
                                                    cairn_saver **out);
/* TF's list form: vars[0..n) each under its variable name, in this order.
 * Errors: CAIRN_E_NULL (a NULL entry), CAIRN_E_EXISTS ("at least two
 * variables have the same name: 'v1'": the same variable twice, or two
 * registries' variables of one name), CAIRN_E_INVALID, CAIRN_E_NOMEM. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_saver_new_list(cairn_var *const *vars, size_t n,
                                                         const cairn_saver_options *opts, cairn_saver **out);
/* TF's dict form: map[i].var saved and restored as map[i].name (the names
 * are copied). Errors: CAIRN_E_EXISTS (a name twice), CAIRN_E_INVALID (bad
 * name; the same variable under two names, as TF's "The same saveable will
 * be restored with two names"), CAIRN_E_NULL, CAIRN_E_NOMEM. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_saver_new_map(const cairn_saver_entry *map, size_t n,
                                                        const cairn_saver_options *opts, cairn_saver **out);
/* Frees s (not its variables). cairn_saver_free(NULL) does nothing. */
CAIRN_API void cairn_saver_free(cairn_saver *s);

/* The save set: count, and the name and variable of entry i (NULL when i
 * is out of range). Names are owned by s. */
CAIRN_API size_t cairn_saver_count(const cairn_saver *s);
CAIRN_API const char *cairn_saver_name_at(const cairn_saver *s, size_t i);
CAIRN_API cairn_var *cairn_saver_var_at(const cairn_saver *s, size_t i);

/* ---- Metadata carried by later saves ------------------------------------- */

/* User key-values, written as "user.<key>" into every later checkpoint of
 * s; setting a key again replaces it (any type). key: [a-z0-9_.], at most
 * 250 bytes. The value is copied. Errors: CAIRN_E_NULL, CAIRN_E_INVALID
 * (bad key), CAIRN_E_NOMEM. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_saver_set_user_str(cairn_saver *s, const char *key,
                                                             const char *value);
CAIRN_API CAIRN_NODISCARD cairn_status cairn_saver_set_user_i64(cairn_saver *s, const char *key, int64_t value);
CAIRN_API CAIRN_NODISCARD cairn_status cairn_saver_set_user_f64(cairn_saver *s, const char *key, double value);
/* Opaque training state, written as bytes under "train.state.<name>" into
 * every later checkpoint of s (name: [a-z0-9_.], at most 243 bytes); the
 * bytes are copied (len 0 is an empty blob; data may then be NULL). Call
 * again before each save to refresh it. Errors as above. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_saver_set_state(cairn_saver *s, const char *name, const void *data,
                                                          size_t len);
/* Forgets every user key and state blob set on s. */
CAIRN_API void cairn_saver_clear_meta(cairn_saver *s);

/* ---- Saving ------------------------------------------------------------------- */

/* Writes the save set to "<prefix>-<global_step>" (prefix itself when
 * global_step < 0) as one checkpoint file, atomically, with the metadata
 * above; records it for rotation, rewrites "<dirname>/checkpoint", then
 * deletes evicted checkpoints (deletion errors are ignored, as TF logs and
 * ignores them). The path written is copied to path[0..len) when path is
 * not NULL (checked before anything is written). With an empty save set
 * (allow_empty) nothing is written and path is "".
 *
 * A committed checkpoint is never replaced by other contents (cairn's
 * deviation from TF, which overwrites): when global_step >= 0 and
 * "<prefix>-<global_step>" already exists as a checkpoint that opens,
 *  - holding exactly the save set's values (every tensor bit for bit) and
 *    the metadata this save would write (ckpt.producer aside), it is kept
 *    as it is, not rewritten; the rotation list and the state file are
 *    updated as for a write, and cairn_saver_last_save_unchanged() says 1;
 *  - holding anything else, nothing is written and the call fails with
 *    CAIRN_E_EXISTS: "saver_save 'd/model.ckpt-100': a checkpoint of step
 *    100 is already there with other contents (2 of 5 variables differ:
 *    'h1/kernel', 'h1/bias'); refusing to replace it, ...".
 * A file of that name that does not open as a checkpoint, fails
 * cairn_ckpt_verify or was marked corrupt (cairn_checkpoint_mark_corrupt)
 * is replaced as before; so is the file of a save without a step
 * (global_step < 0). replace_same_step = 1 in the options
 * restores TF's overwrite.
 *
 * Every variable must be initialized (as TF, which cannot read an
 * uninitialized value). On any error the previous checkpoints and the
 * state file are untouched and no temporary file is left; if the state
 * file could not be written, the new checkpoint is removed again unless it
 * replaced a file of the same name.
 * Errors: CAIRN_E_NULL, CAIRN_E_INVALID (empty prefix; the file name would
 * be "checkpoint", the state file's), CAIRN_E_LIMIT (path buffer too
 * small), CAIRN_E_UNINITIALIZED (lists the variables), CAIRN_E_NOT_FOUND
 * (the parent directory does not exist: the Saver creates no directory,
 * as TF's; CheckpointSaverHook does), CAIRN_E_EXISTS (a checkpoint of
 * that step with other contents, above), CAIRN_E_NOSPC / CAIRN_E_IO as
 * the checkpoint writer or the state file reports them (disk full, file
 * size limit, I/O error: the message names the file and errno's text;
 * ENOSPC and EDQUOT give CAIRN_E_NOSPC, EFBIG and EIO CAIRN_E_IO, for the
 * checkpoint and the state file alike), CAIRN_E_NOMEM. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_saver_save(cairn_saver *s, const char *prefix, int64_t global_step,
                                                     char *path, size_t len);

/* cairn_saver_save into the checkpoint directory d (cairn/checkpoint_dir.h):
 * the prefix is "<cairn_checkpoint_dir_path(d)>/<basename>" (basename NULL:
 * "model.ckpt"; "sub/model.ckpt" for files in a subdirectory), and the
 * directory's identity is checked before the save and again in its
 * commit, before each step that names files by path (the checkpoint's
 * rename, the state file, the deletions of rotation): a directory removed
 * or replaced since d was opened fails the save with CAIRN_E_NOT_FOUND
 * ("saver_save 'd/model.ckpt-5': checkpoint directory 'd' was removed
 * while training: ..."), and nothing is written into, or deleted from,
 * what is at its path now. The state file d has read is not updated
 * (cairn_checkpoint_dir_refresh reads it again). CheckpointSaverHook saves
 * this way into the directory it holds locked.
 * Errors: those of cairn_saver_save, and CAIRN_E_NULL (d), CAIRN_E_INVALID
 * (basename empty, absolute or with a ".." component). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_saver_save_in(cairn_saver *s, cairn_checkpoint_dir *d,
                                                        const char *basename, int64_t global_step, char *path,
                                                        size_t len);

/* ---- Asynchronous saving ------------------------------------------------------
 * A save in two phases, so that training does not stop for the write.
 * Phase 1, in cairn_saver_save_begin on the caller's thread (call it at a
 * step boundary): every variable of the save set and the metadata to be
 * written (user keys, state blobs: the data iterator's position, RNG
 * state...) are copied into a staging buffer. Phase 2, on the saver's
 * background writer thread (started by the first call): the checkpoint
 * file, the rotation list, the state file and the deletions, exactly as
 * cairn_saver_save commits them (atomic file, same-step rules, fsyncs).
 * Once begin returns, the caller may change the variables and the
 * metadata: the checkpoint holds the values of phase 1.
 *
 * Memory: the staging buffer holds one copy of the save set's bytes
 * (64-byte aligned per tensor); it is allocated by the first begin and
 * reused by every later one, and freed with the saver.
 *
 * At most one save is in flight: begin, cairn_saver_save and
 * cairn_saver_save_wait first wait for the one being written (a caller
 * that prefers to skip a save asks cairn_saver_save_status first, as
 * CheckpointSaverHook's skip option does). The error of a background save
 * is never lost: it is returned, once, by whichever comes first of the
 * next begin, cairn_saver_save, cairn_saver_save_wait or
 * cairn_saver_save_status, with the failed save's message, e.g.
 *   saver_save_begin: the asynchronous save failed: save 'd/model.ckpt-200':
 *   writing 'h1/kernel': ckpt_writer: writing 'd/model.ckpt-200.tmp.Ab3xYz'
 *   (for 'd/model.ckpt-200') at offset 1048640: No space left on device
 * (the failed save left no temporary file and changed neither the previous
 * checkpoints nor the state file, as a synchronous save that fails). A
 * call that returns such an error has not started a new save. Freeing the
 * saver waits for the save in flight; an error nobody took is then logged
 * as a WARNING on stderr.
 *
 * While a save is in flight the rotation list belongs to it:
 * cairn_saver_last_checkpoints_count/at, cairn_saver_last_save_unchanged
 * and cairn_saver_recover_last_checkpoints wait for it first. The writer
 * thread runs at a lower priority (nice +10 on Linux) so that training
 * wins the cores when both want them, and makes no MPI call: on an MPI
 * job (MPI_THREAD_FUNNELED) the chief's collectives stay on its training
 * thread. One thread calls begin/wait/status on a saver (the saver's rule).
 *
 * Errors of begin: those of cairn_saver_save found before writing
 * (CAIRN_E_NULL, CAIRN_E_INVALID, CAIRN_E_LIMIT, CAIRN_E_UNINITIALIZED,
 * CAIRN_E_NOT_FOUND), a previous background save's error (above),
 * CAIRN_E_NOMEM (the staging buffer: "saver_save_begin 'd/m': cannot
 * allocate the staging buffer of N bytes"). The rest (CAIRN_E_EXISTS,
 * CAIRN_E_NOSPC, CAIRN_E_IO) come from phase 2, later, as above. path
 * receives the file that will be written. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_saver_save_begin(cairn_saver *s, const char *prefix,
                                                           int64_t global_step, char *path, size_t len);
/* cairn_saver_save_begin into the checkpoint directory d, as
 * cairn_saver_save_in; phase 2 checks the directory's identity again
 * before its renames and deletions. Errors: those of
 * cairn_saver_save_begin and of cairn_saver_save_in. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_saver_save_begin_in(cairn_saver *s, cairn_checkpoint_dir *d,
                                                              const char *basename, int64_t global_step,
                                                              char *path, size_t len);
/* Waits until no save of s is in flight; returns the background save's
 * error if it failed and nothing reported it yet, else CAIRN_OK. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_saver_save_wait(cairn_saver *s);
/* Does not wait. *in_flight (may be NULL) is 1 while a save is being
 * written; when none is, returns the error of the last background save if
 * nothing reported it yet (then forgotten), else CAIRN_OK. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_saver_save_status(cairn_saver *s, int *in_flight);

/* 1 when the last cairn_saver_save on s succeeded without writing because
 * its file already held exactly the same contents (see above); else 0. */
CAIRN_API int cairn_saver_last_save_unchanged(const cairn_saver *s);

/* The rotation list (TF's last_checkpoints): paths oldest first, as they
 * were saved or recovered. at() returns NULL when i is out of range; the
 * strings are owned by s and valid until its next save/recover/free. */
CAIRN_API size_t cairn_saver_last_checkpoints_count(const cairn_saver *s);
CAIRN_API const char *cairn_saver_last_checkpoint_at(const cairn_saver *s, size_t i);

/* TF's recover_last_checkpoints: replaces the rotation list with the paths
 * of paths[0..n) that exist (missing ones are skipped silently), each with
 * its file's mtime, so that a restarted trainer keeps deleting old
 * checkpoints. Typical use: the state file's all_model_checkpoint_paths
 * (cairn_checkpoint_state_read). Rotation deletes a recovered path only
 * when it is one of the saver's own files (see Rotation at the top).
 * Errors: CAIRN_E_NULL, CAIRN_E_NOMEM (the list is then unchanged). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_saver_recover_last_checkpoints(cairn_saver *s,
                                                                         const char *const *paths, size_t n);

/* ---- Checkpoint metadata -------------------------------------------------- */

/* A copy of a checkpoint's metadata, independent of the file. */
typedef struct cairn_saver_meta cairn_saver_meta;

/* Reads the metadata of the checkpoint file at `path` (a quick open, no
 * tensor data). Errors: those of cairn_ckpt_open (CAIRN_E_IO,
 * CAIRN_E_TRUNCATED, CAIRN_E_CORRUPT, CAIRN_E_FORMAT, ...), CAIRN_E_NULL,
 * CAIRN_E_NOMEM. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_saver_meta_read(const char *path, cairn_saver_meta **out);
/* cairn_latest_checkpoint_note(dir, path, len, note, note_len) and then
 * cairn_saver_meta_read(path), with the newest checkpoint opened once (the
 * open that finds it usable also reads its metadata): what a program that
 * resumes reads before it builds its model. Errors: those of the two
 * calls. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_saver_meta_read_latest(const char *dir, char *path, size_t len,
                                                                    char *note, size_t note_len,
                                                                    cairn_saver_meta **out);
CAIRN_API void cairn_saver_meta_free(cairn_saver_meta *m);
/* train.global_step; CAIRN_E_NOT_FOUND when the checkpoint was saved without
 * a step. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_saver_meta_global_step(const cairn_saver_meta *m, int64_t *step);
/* ckpt.producer ("cairn 0.1.0"), or NULL when absent. Owned by m. */
CAIRN_API const char *cairn_saver_meta_producer(const cairn_saver_meta *m);
/* user.<key> and train.state.<name>: CAIRN_E_NOT_FOUND (no such key),
 * CAIRN_E_DTYPE (stored with another type). Strings and bytes are owned by
 * m. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_saver_meta_user_str(const cairn_saver_meta *m, const char *key,
                                                              const char **value);
CAIRN_API CAIRN_NODISCARD cairn_status cairn_saver_meta_user_i64(const cairn_saver_meta *m, const char *key,
                                                              int64_t *value);
CAIRN_API CAIRN_NODISCARD cairn_status cairn_saver_meta_user_f64(const cairn_saver_meta *m, const char *key,
                                                              double *value);
CAIRN_API CAIRN_NODISCARD cairn_status cairn_saver_meta_state(const cairn_saver_meta *m, const char *name,
                                                           const void **data, size_t *len);

/* ---- Restoring ---------------------------------------------------------------- */

/* TF's Saver.restore, strict: every variable of the save set must be in
 * the checkpoint file `path` under its name with the same dtype and shape.
 * path may also be a directory (a cairn extension): its newest usable
 * checkpoint (cairn_latest_checkpoint), else the TensorFlow bundle
 * "path/variables" (or a SavedModel's "path/variables/variables"), else its
 * one .safetensors or .npz file; a directory with none of these is
 * CAIRN_E_NOT_FOUND "... is a directory with nothing to restore: ...".
 * All problems are found before anything is written: the index is
 * compared first, then every tensor is read and checked without a
 * destination (every CRC; extra memory: a few chunk buffers, not a copy of
 * the state), and only then decoded straight into the variables, checked
 * again. So on any error no variable changes, value or flag — except when
 * the file changes or fails after it was checked (written to or cut while
 * open, an I/O error): the error then says so and names the variables
 * already written, which are marked uninitialized (doc/restore-memory.md).
 * On success every
 * variable of the save set has the checkpoint's values and is marked
 * initialized; other variables of the registry are untouched.
 * meta (may be NULL) receives the metadata of the file that was restored
 * (free with cairn_saver_meta_free; NULL on error).
 * Errors: CAIRN_E_NULL, CAIRN_E_NOT_FOUND (no file at path; or variables
 * missing from the checkpoint), CAIRN_E_SHAPE / CAIRN_E_DTYPE (mismatches
 * and no missing variable), the errors of cairn_ckpt_open/read
 * (CAIRN_E_TRUNCATED, CAIRN_E_CORRUPT, ...), CAIRN_E_NOMEM. The message
 * lists every missing and mismatched variable with both shapes, e.g.
 *   restore 'd/m-3': 2 of 4 variables cannot be restored (nothing was
 *   changed): 'v2' not found in checkpoint; 'dense/kernel': checkpoint has
 *   shape (784, 256), variable has (784, 512)
 * cut with "..." if it exceeds cairn_errmsg's buffer (16384 bytes); the
 * report of cairn_saver_restore_partial always has every name. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_saver_restore(cairn_saver *s, const char *path,
                                                        cairn_saver_meta **meta);

/* A rename rule in the manner of TF's assignment_map: `ckpt` is the name
 * in the checkpoint file, `model` the saver's name for the variable (its
 * variable name, or its key in a name map). Either both end with '/' — a
 * prefix rule: model "new/x" is read from checkpoint "old/x" ("/" alone
 * means the root: "" as prefix) — or neither does — an exact rule. Exact
 * rules win over prefix rules, longer model prefixes over shorter ones;
 * names no rule matches are looked up unchanged. */
typedef struct cairn_restore_rename {
  const char *ckpt;
  const char *model;
} cairn_restore_rename;

typedef struct cairn_restore_options {
  /* fnmatch(3) globs (flags 0: '*' also matches '/') over the model-side
     names. A variable of the save set is in the restore set when it
     matches some include pattern (or n_include is 0) and no exclude
     pattern. */
  const char *const *include;
  size_t n_include;
  const char *const *exclude;
  size_t n_exclude;
  const cairn_restore_rename *rename;
  size_t n_rename;
  /* 0 (strict, the default): fail, changing nothing, when any variable of
     the restore set is missing or mismatched, or when a pattern counts for
     nothing: an include pattern that matches no variable of the save set
     (after the collection filter), a rename rule whose model side matches
     no variable of the save set or whose checkpoint side matches no key of
     the checkpoint (CAIRN_E_NOT_FOUND; the message names each such pattern
     and the closest names: "include pattern 'dense/kernal' matches no
     variable of the save set (did you mean 'dense/kernel'?)"). 1
     (lenient): restore those that match, report the rest (the patterns as
     WARNINGs), return CAIRN_OK. An exclude pattern that matches nothing is
     a WARNING in both modes (generic excludes shared between models stay
     legal). */
  int lenient;
  /* Only variables in one of these collections (cairn/var.h) are in the
     restore set: CAIRN_COLL_TRAINABLE restores a layer's weights and not
     the optimizer slots a glob such as "dense/?*" also matches; the others
     are SKIPPED. 0 (the default): no filter. */
  unsigned collections;
  /* 1: the checkpoint uses TF2's object-based keys: the variable saved as
     "x" (after renaming) is read from the key
     "x/.ATTRIBUTES/VARIABLE_VALUE". With a prefix rename rule
     {"layer_with_weights-0/", "dense/"}, the variables "dense/kernel" and
     "dense/bias" are read from "layer_with_weights-0/kernel/.ATTRIBUTES/
     VARIABLE_VALUE" and ".../bias/...". Optimizer slots
     ("<var>/.OPTIMIZER_SLOT/<optimizer>/<slot>/.ATTRIBUTES/VARIABLE_VALUE")
     are matched only by exact rules (doc/interop-formats.md, "TF2
     object-based keys"). 0 (the default): keys are the names. */
  int tf2_names;
  /* Where the WARNINGs above go; NULL: the default log sink (stderr). */
  const cairn_env *env;
} cairn_restore_options;

/* Every field 0/NULL: the whole save set, strict, no renames, no
 * collection filter (a zero-filled struct is the same). */
CAIRN_API cairn_restore_options cairn_restore_options_default(void);

/* What a partial restore did. The lists: */
typedef enum cairn_restore_kind {
  CAIRN_RESTORE_RESTORED = 0, /* restored (or, on failure, would have been) */
  CAIRN_RESTORE_MISSING,      /* in the restore set, not in the checkpoint */
  CAIRN_RESTORE_UNUSED,       /* in the checkpoint, matched by no variable of the restore set */
  CAIRN_RESTORE_MISMATCHED,   /* in both, with another dtype or shape */
  CAIRN_RESTORE_SKIPPED,      /* in the save set, left out by include/exclude/collections */
  CAIRN_RESTORE_UNMATCHED     /* a pattern that matched nothing: name is the include or
                                 exclude pattern or the rename's model side, ckpt_name the
                                 rename's checkpoint side (else NULL), note says which and
                                 the closest names */
} cairn_restore_kind;

typedef struct cairn_restore_item {
  const char *name;      /* model-side name; NULL for UNUSED */
  const char *ckpt_name; /* checkpoint-side name (after renaming); NULL for SKIPPED */
  cairn_var *var;        /* NULL for UNUSED */
  cairn_dtype var_dtype; /* variable side; 0 / rank 0 for UNUSED */
  int var_rank;
  int64_t var_shape[CAIRN_MAX_RANK];
  cairn_dtype ckpt_dtype; /* checkpoint side; 0 / rank 0 for MISSING and SKIPPED */
  int ckpt_rank;
  int64_t ckpt_shape[CAIRN_MAX_RANK];
  const char *note; /* UNMATCHED: "include pattern 'x' matches no variable of the save set
                       (did you mean 'y'?)"; NULL for the other kinds */
} cairn_restore_item;

typedef struct cairn_restore_report cairn_restore_report;

/* Restores the variables of the restore set chosen by opts (NULL: all,
 * strict, no renaming — then the same as cairn_saver_restore) from the
 * checkpoint file `path`. Restored variables get the checkpoint's values
 * and are marked initialized; every other variable is untouched (value and
 * flag), so the caller can initialize exactly those that were not
 * restored. Tensor data is checked before any is written, as in
 * cairn_saver_restore: a read error (a corrupt tensor) fails the whole
 * call, changing nothing, in both modes.
 *
 * report (may be NULL) receives the report whenever the checkpoint could
 * be opened and compared — on success and also on a strict failure for
 * missing or mismatched variables — else NULL. The report lists are in
 * save-set order (UNUSED: checkpoint name order). meta as in
 * cairn_saver_restore.
 * Patterns: in a strict restore every include pattern and rename rule must
 * match (see `lenient` above): one that matches nothing fails the call with
 * CAIRN_E_NOT_FOUND, changing nothing, and is listed in the report as
 * UNMATCHED. The call logs nothing at INFO (its callers do: the
 * SessionManager, the restore op); WARNINGs go to opts->env.
 * Errors: those of cairn_saver_restore, CAIRN_E_NOT_FOUND (a pattern that
 * matches nothing, above), and CAIRN_E_INVALID (bad rename rules: one side
 * ends with '/' and the other not; two rules for the same model name or
 * prefix; a NULL pattern; unknown bits in collections; tf2_names not 0 or
 * 1). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_saver_restore_partial(cairn_saver *s, const char *path,
                                                                const cairn_restore_options *opts,
                                                                cairn_restore_report **report,
                                                                cairn_saver_meta **meta);

CAIRN_API void cairn_restore_report_free(cairn_restore_report *r);

/* Number of items in list k (0 for an unknown k or r NULL). */
CAIRN_API size_t cairn_restore_report_count(const cairn_restore_report *r, cairn_restore_kind k);
/* Item i of list k, owned by r; NULL when out of range. */
CAIRN_API const cairn_restore_item *cairn_restore_report_item(const cairn_restore_report *r,
                                                              cairn_restore_kind k, size_t i);
/* The whole report as text, one line per item, e.g.
 *   restored: dense/kernel (784, 256) f32
 *   missing: head/bias (checkpoint name 'old/bias')
 *   mismatched: out/kernel: checkpoint has shape (10, 5) f32, variable has (10, 7) f32
 *   unused: old_head/kernel (10, 5) f32
 *   skipped: global_step
 * snprintf-style: writes at most len bytes (NUL included; buf may be NULL
 * when len is 0) and returns the length of the whole text. */
CAIRN_API size_t cairn_restore_report_format(const cairn_restore_report *r, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

/* Compatibility, for one release: the restore op (cairn_op_new_restore,
 * cairn_op_init_fn) moved to cairn/scaffold.h, the header of its layer
 * (it takes ops, sessions and Scaffolds). Define CAIRN_NO_COMPAT_INCLUDES
 * to check that a program includes what it uses. (Included from
 * cairn/session.h, which includes cairn/scaffold.h at its own end.) */
#if !defined(CAIRN_NO_COMPAT_INCLUDES) && !defined(CAIRN_SESSION_H)
#include "cairn/scaffold.h"
#endif
#endif
