/* The base every lib source builds on, and nothing above it: errors and
 * their buffers, environment knobs, allocation, strings and paths (and the
 * opening of a file inside a directory), the parallel loops. Never
 * installed. The layers above have their own private headers:
 * tensor_impl.h (tensor checks, GEMM), var_impl.h (variables and the
 * registry), then ckpt_impl.h, checkpoint_dir_impl.h (a directory's
 * identity, the lookup), saver_impl.h, session_impl.h, monitored_impl.h;
 * the test seams are in test_seams.h. (The two GEMM declarations below
 * still wait for gemm_impl.h.) */
#ifndef CAIRN_INTERNAL_H
#define CAIRN_INTERNAL_H

#include "config.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "cairn/status.h"

/* Bytes of every error-message buffer, NUL included: the per-thread detail
 * (cairn_errmsg) and the whole-message buffers on handles (sessions,
 * session managers, coordinators) alike, so that a message arrives whole
 * through every layer. Room for a restore or a ready check that lists
 * hundreds of variables. A longer message is cut visibly: it ends with
 * "...". */
#define CAIRN__ERRMSG_LEN 16384

/* type_default(): every field 0 (the defaults), padding too, for an
 * options struct whose zero is its default (CONTRIBUTING, "Option
 * structs"); the file needs <string.h>. A struct with other defaults
 * returns a compound literal naming them. */
#define CAIRN__OPTIONS_DEFAULT(type) \
  type type##_default(void) {         \
    type o;                           \
    memset(&o, 0, sizeof o);          \
    return o;                         \
  }

/* Sets the calling thread's error detail (printf-style) and returns s. */
cairn_status cairn__fail(cairn_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void cairn__clear_error(void);

/* Wrapping a callee's failure: sets the calling thread's message to the
 * formatted prefix followed by the current message (the callee's detail),
 * and returns s. The same text as formatting "<prefix>%s" with a copy of
 * cairn_errmsg(), without a message-sized buffer at every caller; the
 * result is cut visibly ("...") at CAIRN__ERRMSG_LEN. Never pass
 * cairn_errmsg() or cairn__errmsg_copy() among the arguments (status.c). */
cairn_status cairn__fail_wrap(cairn_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* A copy of the calling thread's current message, for a wrapping message
 * with text after the detail, or one that is logged first. Valid until the
 * next cairn__errmsg_copy() on this thread, so use it before calling
 * anything that may wrap another failure. */
const char *cairn__errmsg_copy(void);
/* Keeping a failure's message across cleanup that may overwrite it (a
 * close, a free, a join):
 *   char *held = cairn__errmsg_hold();  ...cleanup...
 *   return cairn__fail_held(st, held);
 * The copy is on the heap, not a message-sized buffer on the stack; it
 * nests (each hold is its own). cairn__fail_held sets the message back,
 * frees the copy and returns st; a hold that ran out of memory is NULL and
 * then leaves the message the cleanup left. free() drops a hold unused. */
char *cairn__errmsg_hold(void);
cairn_status cairn__fail_held(cairn_status st, char *held);

/* Formats the message into buf (CAIRN__ERRMSG_LEN bytes), copies it into
 * the calling thread's cairn_errmsg(), and returns st (status.c). */
cairn_status cairn__errbuf_fail(char *buf, cairn_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
cairn_status cairn__errbuf_vfail(char *buf, cairn_status st, const char *fmt, va_list ap);

/* Copies `detail` (NULL: the calling thread's cairn_errmsg()) into buf
 * and returns st: keeps the message of an error raised deeper down. */
cairn_status cairn__errbuf_keep(char *buf, cairn_status st, const char *detail);

/* Appends printf-style text to a NUL-terminated buffer of cap bytes,
 * cutting with "..." when full. */
void cairn__strbuf_append(char *buf, size_t cap, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* The integer value of environment variable `name` when it is set to a
 * whole decimal number in [lo, hi]; dflt otherwise (unset, empty, garbage
 * or out of range: a typo never turns a knob to an extreme). env.c. */
long cairn__env_long(const char *name, long dflt, long lo, long hi);

/* Rows of C cairn__sgemm may cut anywhere on a multiple of this and keep
 * the bits of one BLAS call (found once by comparing bits, gemm.c); 0: the
 * rows get fixed, shape-determined blocks. */
int cairn__gemm_row_cut(void);
/* 1 when cairn__sgemm runs this shape on oneDNN (the oneDNN engine,
 * gemm_impl.h): fixed blocks, whatever cairn__gemm_row_cut says. */
int cairn__gemm_on_dnnl(int trans_a, int trans_b, int N, int K);

/* A thread count from environment variable `name` (OMP_NUM_THREADS's
 * form: the first number of a comma-separated list), 1 to 4096; 0 when
 * unset or anything else. env.c. */
int cairn__env_threads(const char *name);

/* String and path helpers (path.c); the char * results are malloc'd, NULL
 * when out of memory. */
/* Resizes a cairn_alloc block to `bytes` keeping its first
 * min(old_bytes, bytes) bytes, still 64-byte aligned; NULL on failure (p
 * stays valid). Large (mapped) blocks grow without a copy on Linux. */
void *cairn__realloc(void *p, size_t old_bytes, size_t bytes);
char *cairn__strdup(const char *s);                     /* NULL for NULL */
/* Grows the malloc'd array *p (elements of `size` bytes, *cap of them) to
 * hold at least `need`, doubling; 0 when out of memory (*p stays valid). */
int cairn__grow(void **p, size_t *cap, size_t need, size_t size);
char *cairn__path_dir(const char *path);                /* "." if none, "/" for "/x" */
char *cairn__path_join(const char *dir, const char *name); /* no doubled '/' */
/* mkdir -p: creates dir and every missing parent (mode 0777 less the
 * umask); an existing directory is fine. Errors (CAIRN_E_IO, CAIRN_E_NOSPC,
 * CAIRN_E_NOMEM) start with "fn: " and name the component that could not
 * be created and errno's text. */
cairn_status cairn__make_dirs(const char *fn, const char *dir);
/* fsync of a directory after a rename; 0, or -1 with errno. File systems
 * that cannot sync a directory count as success. */
int cairn__fsync_dir(const char *dir);

struct stat;
/* A checkpoint directory held open, so that the files it names (its
 * state file, the checkpoints the state file or a scan of it name, and the
 * files derived from those: a TF prefix's .index and data shards) are
 * looked up in it by cairn__open_read, not through whatever their path
 * string leads to (path.c). */
typedef struct cairn__dir {
  int fd;      /* O_DIRECTORY descriptor of the directory */
  char *real;  /* its realpath */
  char *path;  /* as given, for messages */
} cairn__dir;
/* 0, or -1 with errno (ENOMEM included); d is then closed. */
int cairn__dir_open(const char *dir, cairn__dir *d);
void cairn__dir_close(cairn__dir *d); /* idempotent */
/* Opens `path` read-only and never blocks on a FIFO (O_NONBLOCK until
 * fstat has said it is a regular file, then cleared). Anything but a
 * regular file is refused. With d (may be NULL: path as it is), only the
 * base name of path is used, looked up in d without following a symbolic
 * link; a link is followed only when what it finally reaches is a file
 * directly in d, so nothing outside d is opened whatever the link says.
 * Hard links are not detected (a hard link is a file of d like any other).
 * The descriptor (and *sb, may be NULL), or -1 with errno (ENOENT and
 * ENOTDIR: no such file; ELOOP: a link that leads out; EISDIR, EINVAL:
 * not a regular file) and what was wrong in why[0..len) (may be NULL with
 * len 0), e.g. "it is a FIFO, not a regular file" or "it is a symbolic
 * link to '/x/y', outside the checkpoint directory '/d'". */
int cairn__open_read(const cairn__dir *d, const char *path, struct stat *sb, char *why, size_t len);

/* ---- Parallel loops -----------------------------------------------------
 * [0, n) is cut into chunks whose size depends on n only (never on the
 * thread count), so per-chunk partial sums added in chunk order give the
 * same bits for any number of threads. Work below CAIRN__PAR_MIN elements
 * stays on the calling thread. Never call BLAS from `fn`. */
#define CAIRN__PAR_MIN 32768
#define CAIRN__PAR_MAX_CHUNKS 256

typedef void (*cairn__range_fn)(void *ctx, size_t lo, size_t hi);
typedef double (*cairn__range_sum_fn)(void *ctx, size_t lo, size_t hi);

void cairn__par_for(size_t n, cairn__range_fn fn, void *ctx);
/* fn(ctx, i, i + 1) for each i in [0, n): item i on the thread OpenMP's
 * static schedule gives it when `threads` (nonzero) and a parallel region
 * would have more than one thread; else every item in order on the calling
 * thread, without entering a region (cairn__par_alone). For loops over
 * fixed blocks (a GEMM's, a column sum's) whose bits do not depend on the
 * thread that runs them. */
void cairn__par_each(size_t n, int threads, cairn__range_fn fn, void *ctx);
/* 1 when a parallel region entered here would have one thread: OpenMP off,
 * one thread asked for (cairn_set_num_threads(1), OMP_NUM_THREADS=1), or
 * already inside a region. The loops of this file then run on the calling
 * thread without entering one: libgomp ends every region, a team of one
 * included, with a futex wake, a system call (2.5-5 us each on the Zen 5
 * guest of bench/RESULTS.md, about 15 per step of the Fashion-MNIST demo's
 * model). */
int cairn__par_alone(void);
/* Σ over chunks of fn(chunk), added in chunk order. */
double cairn__par_sum(size_t n, cairn__range_sum_fn fn, void *ctx);
/* Like cairn__par_for over `rows` rows of `cols` elements: chunks are whole
 * rows (for row-wise ops such as softmax). */
void cairn__par_rows(size_t rows, size_t cols, cairn__range_fn fn, void *ctx);
double cairn__par_rows_sum(size_t rows, size_t cols, cairn__range_sum_fn fn, void *ctx);

#endif
