/* cairn/summary.h — TensorBoard event files (no protobuf dependency) and a
 * progress hook for long runs.
 *
 * The format below is what TensorFlow's writer (core/util/events_writer.cc)
 * and TensorBoard's (tensorboard/summary/writer/record_writer.py, the protos
 * tensorboard/compat/proto/event.proto and summary.proto) produce.
 *
 * ---- Event file format (what TensorBoard reads) ----------------------------
 * A file named "events.out.tfevents.<10-digit unix seconds>.<hostname>.<pid>"
 * (".<n>" appended, n = 1, 2..., when that name exists; then the optional
 * suffix) in the log directory: TensorBoard loads any file whose name
 * contains "tfevents". The file is a sequence of TFRecord records, all
 * integers little-endian:
 *
 *   u64 length | u32 masked_crc32c(the 8 length bytes) | data[length] |
 *   u32 masked_crc32c(data)
 *   masked_crc = ((crc >> 15) | (crc << 17)) + 0xa282ead8  (32-bit arithmetic)
 *
 * CRC-32C as cairn_crc32c (cairn/ckpt.h). Each data block is one
 * tensorflow.Event protobuf, hand-encoded (proto3, zero fields omitted):
 *   wall_time double = 1 (fixed64), step int64 = 2 (varint), and one of
 *   file_version string = 3  — the first record: "brain.Event:2"
 *   summary Summary = 5      — Summary.value (1) = {tag string = 1,
 *                              simple_value float = 2 (fixed32)}
 *   session_log SessionLog = 7 — {status enum = 1, checkpoint_path string = 2}
 *
 * ---- Restarts ----------------------------------------------------------------
 * Because the file version is "brain.Event:2", TensorBoard treats a
 * SessionLog START at step S as a restart: it discards the events it loaded
 * earlier (from any file of the run) whose step is greater than S — the
 * orphans of a crashed run that are about to be recomputed. A trainer that
 * restores step S from a checkpoint writes one START at the first step it
 * runs (cairn_hook_new_summary_saver does: S = restored step + 1; events of
 * the crashed run at that very step survive next to the new ones). Never
 * write START at a step lower than what the restored run has already
 * written and wants kept.
 *
 * ---- Buffering and durability ------------------------------------------------
 * Records go into a memory buffer. The buffer is written to the file
 * (write(2); no fsync) when it exceeds max_buffer_bytes, when a record is
 * added flush_secs or more after the last write (timer read from env, so
 * an idle writer writes nothing until its next record or flush), on
 * cairn_event_writer_flush() and on close. A process killed at any moment
 * leaves a file whose records are all whole except perhaps the last one
 * (torn during a write); TensorBoard, like the test's reader, reads the
 * whole records and ignores a torn tail. A failed write truncates the file
 * back to its last whole record (best effort), drops the buffered records
 * and returns the error; the writer stays usable.
 *
 * ---- Chief only ------------------------------------------------------------------
 * One writer per directory and process, and one process per run writes
 * summaries: the chief (rank 0 under MPI). Create the writer only there,
 * or create it everywhere with is_chief = 0 on the other ranks: such a
 * writer creates no file and accepts and drops every record (CAIRN_OK).
 * MonitoredTrainingSession with is_chief = 0 adds no SummarySaverHook and
 * no StepCounterHook, so workers never write through summary_writer.
 *
 * ---- Errors and threads --------------------------------------------------------
 * Functions return cairn_status; the detail, naming the file, is in
 * cairn_errmsg(): "event file '/logs/events.out.tfevents...': write:
 * No space left on device". I/O errors are CAIRN_E_IO or CAIRN_E_NOSPC.
 * A writer is used by one thread at a time (hooks of one monitored session
 * share it on the session's thread; lock around it to add scalars from
 * another thread).
 */
#ifndef CAIRN_SUMMARY_H
#define CAIRN_SUMMARY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cairn/monitored.h"
#include "cairn/session.h"
#include "cairn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== Event file writer ========================================================= */

typedef struct cairn_event_writer cairn_event_writer;

typedef struct cairn_event_writer_options {
  int is_chief;              /* default 1; 0: an inert writer (see "Chief only") */
  double flush_secs;         /* default 120 (TF's FileWriter); <= 0: only when the buffer is full,
                                on flush and on close */
  size_t max_buffer_bytes;   /* default 65536; 0: every record is written at once */
  const char *filename_suffix; /* appended to the file name; NULL: none */
  /* Seconds since the Unix epoch for the events' wall_time and the file
     name; NULL: clock_gettime(CLOCK_REALTIME). Tests inject a fixed time. */
  double (*wall_clock)(void *ctx);
  void *wall_clock_ctx;
  const cairn_env *env;      /* monotonic clock of the flush timer; borrowed */
} cairn_event_writer_options;

/* The values in the field comments above. A zero-filled struct is NOT the
 * default: is_chief 0 is an inert writer, flush_secs 0 flushes only when
 * the buffer is full and max_buffer_bytes 0 writes every record at once. */
CAIRN_API cairn_event_writer_options cairn_event_writer_options_default(void);

/* Creates logdir (and its parents, mode 0777 & ~umask) if needed, then a
 * new event file in it (never an existing one: O_EXCL), and writes the
 * file_version record ("brain.Event:2") to it at once. o may be NULL
 * (defaults). Errors: CAIRN_E_NULL, CAIRN_E_INVALID (empty logdir),
 * CAIRN_E_IO (cannot create the directory or the file; the message names
 * it and says why), CAIRN_E_NOSPC, CAIRN_E_NOMEM. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_event_writer_new(const char *logdir, const cairn_event_writer_options *o,
                                                           cairn_event_writer **out);

/* The file's path (owned by w), or NULL for an inert (non-chief) writer. */
CAIRN_API const char *cairn_event_writer_path(const cairn_event_writer *w);

/* A scalar: Summary.Value{tag, simple_value = (float)value} at step, with
 * the wall clock's time. tag: non-empty, copied. Errors: CAIRN_E_NULL,
 * CAIRN_E_INVALID (empty tag), CAIRN_E_STATE (closed), those of a flush
 * it triggers. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_event_writer_add_scalar(cairn_event_writer *w, const char *tag,
                                                                  double value, int64_t step);

/* A SessionLog event at step: CAIRN_SESSION_LOG_START (restart: see
 * "Restarts" above), _STOP, or _CHECKPOINT with checkpoint_path (may be
 * NULL for the others). Errors: as add_scalar; CAIRN_E_INVALID for an
 * unknown status. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_event_writer_add_session_log(cairn_event_writer *w,
                                                                       cairn_session_log_status status,
                                                                       const char *checkpoint_path, int64_t step);

/* Writes the buffered records to the file. Errors: CAIRN_E_IO,
 * CAIRN_E_NOSPC (see "Buffering and durability"), CAIRN_E_STATE (closed). */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_event_writer_flush(cairn_event_writer *w);

/* Flushes and closes the file; later adds and flushes fail with
 * CAIRN_E_STATE; a second close returns CAIRN_OK. Returns the flush's or
 * close(2)'s error. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_event_writer_close(cairn_event_writer *w);

/* Closes (if open; an error is logged on the env, not returned) and frees
 * w. NULL does nothing. */
CAIRN_API void cairn_event_writer_free(cairn_event_writer *w);

/* The cairn_summary_writer function table over w (scalar, session_log,
 * flush), for cairn_monitored_training_session_options.summary_writer,
 * the SummarySaverHook, StepCounterHook and CheckpointSaverHook. w is
 * borrowed: it must outlive the sessions and hooks using the table (free
 * it after them). */
CAIRN_API cairn_summary_writer cairn_event_writer_summary_writer(cairn_event_writer *w);

/* ==== Progress hook ================================================================== */

/* What one progress line reports. */
typedef struct cairn_progress {
  int64_t step;             /* the global step after the run */
  int64_t max_steps;        /* as given; <= 0: unknown */
  int have_loss;            /* loss_name was given */
  double loss;
  double elapsed_secs;      /* since the previous line (or the session's creation) */
  double steps_per_sec;     /* over elapsed_secs; 0 when no time elapsed */
  double examples_per_sec;  /* steps_per_sec * batch_size; 0 without a batch size */
  double eta_secs;          /* (max_steps - step) / steps_per_sec; < 0: unknown */
} cairn_progress;

/* Receives every progress line (no trailing newline) and its numbers. */
typedef void (*cairn_progress_fn)(void *ctx, const cairn_progress *p, const char *line);

typedef struct cairn_progress_hook_options {
  int64_t every_n_steps;   /* exactly one of every_n_steps, every_n_secs > 0; default 100 steps */
  double every_n_secs;
  const char *loss_name;   /* a fetched name (an op's published output, e.g. "loss"); NULL: none */
  int64_t batch_size;      /* > 0: examples/s is shown */
  int64_t max_steps;       /* > 0: the last global step; "step/max" and the ETA are shown */
  FILE *out;               /* where lines go when fn is NULL; NULL: stderr */
  cairn_progress_fn fn;    /* receives the lines instead of out */
  void *fn_ctx;
  const cairn_env *env;    /* clock (monotonic); borrowed */
} cairn_progress_hook_options;

/* every_n_steps 100, every other field 0/NULL. A zero-filled struct is NOT
 * the default: with both every_n_steps and every_n_secs 0 it is refused. */
CAIRN_API cairn_progress_hook_options cairn_progress_hook_options_default(void);

/* A hook printing, every N global steps counted from the step the session
 * was (re)created at (or every N seconds of env's clock), one line:
 *
 *   step=1200/5000 loss=0.4213 steps/s=85.3 examples/s=10918 eta=44s
 *
 * step=S without max_steps; loss, examples/s and eta only when known;
 * eta as 44s, 12m05s or 3h07m. Rates are measured over the interval since
 * the previous line (the first line: since the session was created, so
 * after a restore they count only this run's steps). The loss is fetched
 * only on the runs that print. It needs a global step (begin():
 * CAIRN_E_STATE "Global step should be created to use ProgressHook.").
 * Errors: CAIRN_E_NULL, CAIRN_E_INVALID (not exactly one frequency, or a
 * negative one), CAIRN_E_NOMEM. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_hook_new_progress(const cairn_progress_hook_options *o,
                                                            cairn_hook **out);
/* Deprecated (doc/deprecated.md): 0.1's name of cairn_hook_new_progress,
 * same arguments; removed in the next release. */
CAIRN_API CAIRN_NODISCARD CAIRN_DEPRECATED("use cairn_hook_new_progress") cairn_status
cairn_progress_hook_new(const cairn_progress_hook_options *o, cairn_hook **out);

/* Formats p as the hook does into buf (snprintf-style: returns the length
 * of the whole line; buf may be NULL when len is 0). */
CAIRN_API size_t cairn_progress_format(const cairn_progress *p, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
