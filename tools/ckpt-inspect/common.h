/* ckpt-inspect/common.h — what the subcommands of ckpt-inspect share: the
 * parsed options, escaped and JSON output, error messages, dtypes and
 * values, opening a CKPT argument (file, directory or TensorFlow prefix),
 * and the entry point of each subcommand (one file each; main.c holds the
 * table that names them). Built only on the public API (<cairn.h>).
 *
 * Everything read from a file (names, metadata, library messages that
 * quote them) is printed through put_esc (control characters escaped: a
 * crafted name must not drive the terminal) or json_str (escaped the JSON
 * way).
 */
#ifndef CAIRN_TOOLS_CKPT_INSPECT_COMMON_H
#define CAIRN_TOOLS_CKPT_INSPECT_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cairn.h>

#define PROG "ckpt-inspect"

/* Exit statuses: 0 success / same, 1 diff "different" / verify "bad",
 * 2 error (for diff also: corrupt data in either file). */
enum { EXIT_OK_ = 0, EXIT_DIFFERENT = 1, EXIT_BAD = 1, EXIT_ERROR = 2 };

/* ---- Options (parsed in main.c) ------------------------------------------------ */

/* The options a subcommand accepts (command.opts in main.c's table). */
enum {
  OPT_JSON = 1 << 0,
  OPT_ALL = 1 << 1,
  OPT_TOL = 1 << 2,
  OPT_FORCE = 1 << 3,
  OPT_COMPRESS = 1 << 4,
  OPT_FORMAT = 1 << 5,
  OPT_DTYPE = 1 << 6
};

typedef struct options {
  int json, all, force;
  double atol, rtol;
  cairn_ckpt_compress compress;
  const char *format;       /* export: npz, tf, safetensors (NULL: from OUT's name) */
  cairn_dtype export_dtype; /* export: floating-point tensors converted to it (0: kept) */
  unsigned given;           /* OPT_* seen on the command line */
} options;

/* ---- The subcommands: args holds the command's positional arguments --------- */

typedef int (*subcommand_fn)(const options *o, const char *const *args);

int cmd_list(const options *o, const char *const *args);       /* list.c: CKPT */
int cmd_show(const options *o, const char *const *args);       /* show.c: CKPT NAME */
int cmd_diff(const options *o, const char *const *args);       /* diff.c: A B */
int cmd_verify(const options *o, const char *const *args);     /* verify.c: CKPT */
int cmd_meta(const options *o, const char *const *args);       /* meta.c: CKPT */
int cmd_recover(const options *o, const char *const *args);    /* recover.c: IN OUT */
int cmd_recompress(const options *o, const char *const *args); /* recompress.c: IN OUT */
int cmd_export(const options *o, const char *const *args);     /* export.c: CKPT OUT */
int cmd_import(const options *o, const char *const *args);     /* import.c: IN OUT */

/* ---- Escaped output ------------------------------------------------------------- */

/* Writes s with C-style escapes: \n \t \r \\ \xNN (control bytes and
 * bytes that are not UTF-8) and \uNNNN (C1 controls, bidi overrides and
 * the other code points that reorder text). */
void put_esc(FILE *f, const char *s);
/* Display width of put_esc's output (code points, not bytes: good enough
 * for aligning columns of names). */
size_t esc_width(const char *s);
/* put_esc, then spaces up to width. */
void put_esc_padded(FILE *f, const char *s, size_t width);
/* Reverses put_esc's escapes (for a NAME typed as list printed it); a new
 * string to free, NULL on a bad escape or out of memory. */
char *unescape(const char *in);

/* ---- JSON output ------------------------------------------------------------------ */

/* A JSON string, escaped (bytes that are not UTF-8 as U+FFFD). */
void json_str(FILE *f, const char *s);
/* The shortest "%.*g" that reads back as v; NaN and infinities (which JSON
 * lacks) as null. */
void json_num(FILE *f, double v);
/* [d0, d1, ...] */
void json_shape(FILE *f, int rank, const int64_t *shape);

/* ---- Errors --------------------------------------------------------------------- */

/* "ckpt-inspect: MESSAGE" on stderr, escaped. */
void errorf(const char *fmt, ...);
/* "ckpt-inspect: WHAT: status text: detail" (the detail: cairn_errmsg()). */
void error_status(const char *what, cairn_status s);
/* error_status for "PATH: tensor 'NAME'". */
void error_tensor(const char *path, const char *name, cairn_status s);
/* Whether a status means "the file is bad" (its contents are corrupt,
 * malformed, incomplete or beyond the reader's limits) rather than "could
 * not be checked" (I/O, memory, a newer format). */
int status_is_bad_file(cairn_status s);
/* The enum name of s, "CAIRN_E_CORRUPT" (verify --json). */
const char *status_name(cairn_status s);

/* ---- dtypes and values ------------------------------------------------------------ */

/* cairn's dtype name, or "dtype#N" for a value cairn does not know. */
const char *dtype_str(cairn_dtype dt);
int dtype_is_float(cairn_dtype dt);
int dtype_is_signed(cairn_dtype dt);
int dtype_is_unsigned(cairn_dtype dt);
/* NumPy's name for the dtype, as array repr prints it. */
const char *numpy_name(cairn_dtype dt);
/* Round to nearest even, as a f16 / bf16 store would. */
uint16_t f32_to_f16(float f);
uint16_t f32_to_bf16(float f);
/* Element i of data as a double (exact for every dtype but 64-bit integers
 * beyond 2^53), int64 and uint64. */
double get_d(cairn_dtype dt, const void *data, uint64_t i);
int64_t get_i(cairn_dtype dt, const void *data, uint64_t i);
uint64_t get_u(cairn_dtype dt, const void *data, uint64_t i);
/* v rounded to the precision of dt (so the shortest repr of the result
 * identifies the stored value). */
double narrow(double v, cairn_dtype dt);
/* The shortest text that reads back to v in dt: positional for
 * 1e-4 <= |v| < 1e16 (and 0), scientific otherwise. */
void fmt_shortest(char *b, size_t n, double v, cairn_dtype dt);
/* "(2, 3)", "(5,)", "()" */
void shape_str(char *b, size_t n, int rank, const int64_t *shape);
/* The product of the shape. */
uint64_t elem_count(int rank, const int64_t *shape);
int ends_with(const char *s, const char *suffix);
/* "2.50x", raw/stored ("-" when either is 0). */
void ratio_str(char *b, size_t n, uint64_t raw, uint64_t stored);

/* ---- Opening checkpoints ---------------------------------------------------------- */

/* Resolves a CKPT argument into a file path: a file as is, a TensorFlow
 * prefix as is, a directory to its latest valid checkpoint (when
 * allow_dir; that handle is kept open for open_ckpt). Prints the error;
 * 0 or -1. */
int resolve(const char *arg, int allow_dir, char *out, size_t outlen);
/* The handle resolve() kept for path, now the caller's; NULL if none. */
cairn_ckpt *take_resolved(const char *path);
/* Opens path (or takes resolve()'s handle); prints the error with a hint,
 * returns the status. */
cairn_status open_ckpt(const char *path, cairn_ckpt **c);
/* resolve(arg, allow_dir) into path, then open_ckpt: the checkpoint a
 * CKPT argument names, or NULL (the error printed). */
cairn_ckpt *open_arg(const char *arg, char *path, size_t len);
/* 1 if path starts with cairn's own magic (the hints about interrupted
 * saves and recover are about cairn's files only). */
int is_cairn_file(const char *path);
/* "format 1.0" for cairn's own files; the foreign formats by name. */
const char *format_label(const cairn_ckpt *c, char *b, size_t n);
/* The codecs of a tensor's chunks, e.g. "compact+raw" ("-" for no data). */
const char *codec_str(const cairn_ckpt *c, const char *name, char *buf, size_t cap);
/* Reads tensor e into a new tensor of its dtype and shape. */
cairn_status read_tensor(cairn_ckpt *c, const cairn_ckpt_entry *e, cairn_tensor **out);
/* Refuses an output path that is the input, or exists without --force, or
 * is a directory; prints the error. 0 or -1. */
int check_output(const options *o, const char *in, const char *out);

#endif
