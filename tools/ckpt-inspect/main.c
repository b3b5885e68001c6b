/* ckpt-inspect: lists, shows, compares, verifies, salvages, recompresses,
 * exports and imports cairn checkpoints. Built only on the public API
 * (<cairn.h>). This file is the table of subcommands and the command line;
 * each subcommand is the file of its name, what they share is common.c.
 *
 *   ckpt-inspect list CKPT            ckpt-inspect show CKPT NAME
 *   ckpt-inspect diff A B             ckpt-inspect verify CKPT
 *   ckpt-inspect meta CKPT            ckpt-inspect recover IN OUT
 *   ckpt-inspect export CKPT OUT.npz  ckpt-inspect import IN.npz OUT
 *   ckpt-inspect recompress IN OUT
 *
 * CKPT is a checkpoint file, or a directory (its latest valid checkpoint).
 * Exit status: 0 success / same, 1 diff "different" / verify "bad",
 * 2 error (for diff also: corrupt data in either file). Everything read
 * from a file (names, metadata, library messages that quote them) is
 * printed with control characters escaped (a crafted name must not drive
 * the terminal); --json output escapes them the JSON way.
 */
#define _POSIX_C_SOURCE 200809L

#include "common.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

/* One subcommand: its name, how many positional arguments it takes, the
 * options it accepts (OPT_*), its usage line and help text, and the
 * function that runs it (in the file of its name). */
typedef struct command {
  const char *name;
  int nargs;
  unsigned opts;
  const char *usage;
  const char *help;
  subcommand_fn run;
} command;

static const command commands[] = {
    {.name = "list", .nargs = 1, .opts = OPT_JSON, .run = cmd_list,
     .usage = "list [--json] CKPT",
     .help =
     "Lists the tensors: name, dtype, shape, raw and stored bytes, compression ratio (raw/stored),\n"
     "CRC32C of the raw bytes and the number of chunks (\"aligned\" for the mappable raw layout).\n"},
    {.name = "show", .nargs = 2, .opts = OPT_ALL, .run = cmd_show,
     .usage = "show [--all] CKPT NAME",
     .help =
     "Prints one tensor: dtype, shape, min, max, mean, std (of the finite values), NaN and Inf\n"
     "counts, and the values as numpy prints them (long tensors elided; --all prints every value).\n"
     "f16 and bf16 are shown converted to float. NAME may be typed escaped, as list prints it.\n"},
    {.name = "diff", .nargs = 2, .opts = OPT_JSON | OPT_TOL, .run = cmd_diff,
     .usage = "diff [--json] [--atol X] [--rtol X] A B",
     .help =
     "Compares two checkpoints tensor by tensor: added, removed, dtype or shape changed, values\n"
     "changed (count, max abs and max relative difference). Values a (from A) and b (from B) are\n"
     "equal when |a - b| <= atol + rtol*|b| (default 0: exact; NaN equals NaN). Every tensor of\n"
     "both files is decoded and its checksum verified: corrupt data is reported, naming the file\n"
     "and tensor, never as \"same\". Exit status 0: same, 1: different, 2: error or corrupt data.\n"},
    {.name = "verify", .nargs = 1, .opts = OPT_JSON, .run = cmd_verify,
     .usage = "verify [--json] CKPT",
     .help =
     "Checks every checksum and rule of the file, tensor data included. Exit status 0: valid,\n"
     "1: the file is bad (corrupt, malformed, incomplete, or its contents exceed the reader's\n"
     "limits; every unreadable tensor is named; an incomplete file can be salvaged with\n"
     "recover), 2: it could not be checked (I/O error, newer format version, out of memory).\n"},
    {.name = "meta", .nargs = 1, .opts = OPT_JSON | OPT_ALL, .run = cmd_meta,
     .usage = "meta [--json] [--all] CKPT",
     .help =
     "Prints the metadata key-values with their types. Byte strings are shown in hex, the first\n"
     "32 bytes unless --all (--json always gives all of them).\n"},
    {.name = "recover", .nargs = 2, .opts = OPT_FORCE, .run = cmd_recover,
     .usage = "recover [--force] IN OUT",
     .help =
     "Salvages a truncated (incomplete) or damaged checkpoint: every tensor written completely\n"
     "with valid checksums, and the metadata if it survived, are copied into the new valid file\n"
     "OUT. Prints how many tensors were recovered and lost. OUT is not replaced without --force.\n"},
    {.name = "export", .nargs = 2, .opts = OPT_FORCE | OPT_FORMAT | OPT_DTYPE, .run = cmd_export,
     .usage = "export [--force] [--format npz|tf|safetensors] [--dtype bf16|f16|f32] CKPT OUT",
     .help =
     "Writes every tensor into a NumPy .npz (members NAME.npy, stored uncompressed, ZIP64 when\n"
     "needed) that numpy.load reads. bf16 tensors are widened to float32 ('<f4') because NumPy has\n"
     "no bfloat16; a note names each one. Metadata is not exported.\n"
     "--format tf writes a TensorFlow checkpoint OUT.index + OUT.data-00000-of-00001 (and the\n"
     "directory's 'checkpoint' state file if it has none); --format safetensors (the default for\n"
     "an OUT ending in .safetensors) a safetensors file with the metadata as __metadata__\n"
     "strings. --dtype converts every floating-point tensor (for model-only exports: optimizer\n"
     "slots lose precision too); integer tensors keep their dtype.\n"},
    {.name = "recompress", .nargs = 2, .opts = OPT_FORCE | OPT_COMPRESS, .run = cmd_recompress,
     .usage = "recompress [--force] [--compress lz4|compact|shuffle|none] IN OUT",
     .help =
     "Rewrites the cairn checkpoint IN with another codec: IN is verified first (a damaged file\n"
     "is refused), then every tensor and the metadata are written to OUT through the normal\n"
     "atomic writer (temporary file, fsync, rename). OUT may be IN itself: it is replaced only\n"
     "by the complete new file. Another existing OUT is not replaced without --force.\n"
     "compact (byte planes + zstd) gives the smallest files, readable by cairn with format 1.1.\n"},
    {.name = "import", .nargs = 2, .opts = OPT_FORCE | OPT_COMPRESS, .run = cmd_import,
     .usage = "import [--force] [--compress lz4|compact|shuffle|none] IN OUT",
     .help =
     "IN may be a TensorFlow checkpoint prefix or a safetensors file: every tensor (and the\n"
     "safetensors metadata whose keys cairn allows) is copied into the cairn checkpoint OUT.\n"
     "Otherwise IN is a NumPy .npz. Reads a NumPy .npz (stored or deflated members, e.g. from numpy.savez or savez_compressed)\n"
     "and writes a cairn checkpoint with one tensor per .npy member, named after the member\n"
     "without '.npy'. Supported dtypes: float16/32/64, int8-64, uint8-64, bool, up to 8\n"
     "dimensions; big-endian and Fortran-order arrays are converted. Every size, offset, name\n"
     "and header is validated; other members are skipped with a warning.\n"},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
  fprintf(f, "usage: " PROG " SUBCOMMAND [OPTIONS] ARGS...\n\n"
             "Inspects and converts cairn checkpoint files. CKPT is a checkpoint file or a directory\n"
             "(meaning its latest valid checkpoint).\n\nsubcommands:\n");
  for (size_t i = 0; i < N_COMMANDS; i++) fprintf(f, "  " PROG " %s\n", commands[i].usage);
  fprintf(f, "  " PROG " help SUBCOMMAND\n\n"
             "options: --json (list, diff, verify, meta), --all (show, meta), --atol X, --rtol X (diff),\n"
             "         --force (recover, export, import), --compress MODE (import, recompress), -h/--help, --version\n\n"
             "exit status: 0 success (diff: same), 1 diff: different / verify: bad file,\n"
             "             2 error (diff: also a corrupt tensor in either file).\n"
             "Names and metadata from files are printed with control characters escaped.\n"
             "See ckpt-inspect(1).\n");
}

static void command_help(const command *c) {
  printf("usage: " PROG " %s\n\n%s", c->usage, c->help);
}

static const command *find_command(const char *name) {
  for (size_t i = 0; i < N_COMMANDS; i++)
    if (strcmp(commands[i].name, name) == 0) return &commands[i];
  return NULL;
}

static int parse_double(const char *opt, const char *s, double *v) {
  char *end;
  errno = 0;
  double d = strtod(s, &end);
  if (!*s || *end || errno || !isfinite(d) || d < 0) {
    errorf("%s: '%s' is not a non-negative number", opt, s);
    return -1;
  }
  *v = d;
  return 0;
}

/* Options may precede the subcommand ("ckpt-inspect --json list x"): moves
 * the first word that is neither an option nor an option's value to
 * argv[1], keeping the order of the rest. */
static void hoist_subcommand(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--") == 0) return;
    if (a[0] == '-' && a[1] != '\0') {
      if (!strchr(a, '=') &&
          (strcmp(a, "--atol") == 0 || strcmp(a, "--rtol") == 0 || strcmp(a, "--compress") == 0))
        i++; /* its value */
      continue;
    }
    if (i == 1) return;
    char *sub = argv[i];
    memmove(argv + 2, argv + 1, (size_t)(i - 1) * sizeof *argv);
    argv[1] = sub;
    return;
  }
}

int main(int argc, char **argv) {
  /* A file size limit (ulimit -f, RLIMIT_FSIZE) makes a write past it raise
     SIGXFSZ, whose default action kills the process: exit status 153 from a
     shell, no message, a temporary file left. Ignored, the write fails with
     EFBIG and the command fails cleanly instead, naming the file ("File too
     large"), with no output file or temporary left. The library leaves the
     process-wide disposition alone; a program may choose it, so the tools
     do. */
  signal(SIGXFSZ, SIG_IGN);
  if (argc < 2) {
    usage(stderr);
    return EXIT_ERROR;
  }
  if (strcmp(argv[1], "-h") != 0 && strcmp(argv[1], "--help") != 0 && strcmp(argv[1], "--version") != 0)
    hoist_subcommand(argc, argv);
  const char *sub = argv[1];
  if (strcmp(sub, "-h") == 0 || strcmp(sub, "--help") == 0) {
    usage(stdout);
    return EXIT_OK_;
  }
  if (strcmp(sub, "--version") == 0) {
    printf(PROG " (cairn) %s, checkpoint format %d.%d\n", cairn_version_string(), CAIRN_CKPT_VERSION_MAJOR,
           CAIRN_CKPT_VERSION_MINOR);
    return EXIT_OK_;
  }
  if (strcmp(sub, "help") == 0) {
    if (argc == 2) {
      usage(stdout);
      return EXIT_OK_;
    }
    const command *c = find_command(argv[2]);
    if (!c) {
      errorf("no subcommand '%s' (try --help)", argv[2]);
      return EXIT_ERROR;
    }
    command_help(c);
    return EXIT_OK_;
  }
  const command *cmd = find_command(sub);
  if (!cmd && sub[0] == '-') { /* only options: --help or --version anywhere still work */
    for (int i = 1; i < argc; i++) {
      if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
        usage(stdout);
        return EXIT_OK_;
      }
    }
  }
  if (!cmd) {
    errorf("%s '%s' (try --help)", sub[0] == '-' ? "unknown option" : "unknown subcommand", sub);
    return EXIT_ERROR;
  }
  options o;
  memset(&o, 0, sizeof o);
  o.compress = CAIRN_CKPT_COMPRESS_AUTO;
  const char *pos[4];
  int npos = 0, end_of_opts = 0;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    if (end_of_opts || a[0] != '-' || a[1] == '\0') {
      if (npos >= cmd->nargs) {
        errorf("%s: too many arguments (usage: " PROG " %s)", cmd->name, cmd->usage);
        return EXIT_ERROR;
      }
      pos[npos++] = a;
      continue;
    }
    if (strcmp(a, "--") == 0) {
      end_of_opts = 1;
      continue;
    }
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      command_help(cmd);
      return EXIT_OK_;
    }
    /* --opt=value or --opt value */
    const char *eq = strchr(a, '=');
    size_t kl = eq ? (size_t)(eq - a) : strlen(a);
    const char *val = eq ? eq + 1 : NULL;
    unsigned flag = 0;
    int needs_val = 0;
    if (kl == 6 && strncmp(a, "--json", kl) == 0) flag = OPT_JSON;
    else if (kl == 5 && strncmp(a, "--all", kl) == 0) flag = OPT_ALL;
    else if (kl == 7 && strncmp(a, "--force", kl) == 0) flag = OPT_FORCE;
    else if (kl == 6 && (strncmp(a, "--atol", kl) == 0 || strncmp(a, "--rtol", kl) == 0)) flag = OPT_TOL, needs_val = 1;
    else if (kl == 10 && strncmp(a, "--compress", kl) == 0) flag = OPT_COMPRESS, needs_val = 1;
    else if (kl == 8 && strncmp(a, "--format", kl) == 0) flag = OPT_FORMAT, needs_val = 1;
    else if (kl == 7 && strncmp(a, "--dtype", kl) == 0) flag = OPT_DTYPE, needs_val = 1;
    if (!flag) {
      errorf("%s: unknown option '%s' (usage: " PROG " %s)", cmd->name, a, cmd->usage);
      return EXIT_ERROR;
    }
    if (!(cmd->opts & flag)) {
      errorf("%s: option '%.*s' does not apply (usage: " PROG " %s)", cmd->name, (int)kl, a, cmd->usage);
      return EXIT_ERROR;
    }
    if (needs_val && !val) {
      if (i + 1 >= argc) {
        errorf("%.*s needs a value", (int)kl, a);
        return EXIT_ERROR;
      }
      val = argv[++i];
    } else if (!needs_val && val) {
      errorf("%.*s takes no value", (int)kl, a);
      return EXIT_ERROR;
    }
    o.given |= flag;
    if (flag == OPT_JSON) o.json = 1;
    else if (flag == OPT_ALL) o.all = 1;
    else if (flag == OPT_FORCE) o.force = 1;
    else if (flag == OPT_TOL) {
      if (parse_double(a[2] == 'a' ? "--atol" : "--rtol", val, a[2] == 'a' ? &o.atol : &o.rtol) != 0)
        return EXIT_ERROR;
    } else if (flag == OPT_COMPRESS) {
      if (strcmp(val, "auto") == 0 || strcmp(val, "lz4") == 0) o.compress = CAIRN_CKPT_COMPRESS_AUTO;
      else if (strcmp(val, "compact") == 0) o.compress = CAIRN_CKPT_COMPRESS_COMPACT;
      else if (strcmp(val, "none") == 0) o.compress = CAIRN_CKPT_COMPRESS_NONE;
      else if (strcmp(val, "shuffle") == 0) o.compress = CAIRN_CKPT_COMPRESS_SHUFFLE;
      else {
        errorf("--compress: '%s' is not lz4 (auto), compact, shuffle or none", val);
        return EXIT_ERROR;
      }
    } else if (flag == OPT_FORMAT) {
      if (strcmp(val, "npz") != 0 && strcmp(val, "tf") != 0 && strcmp(val, "safetensors") != 0) {
        errorf("--format: '%s' is not npz, tf or safetensors", val);
        return EXIT_ERROR;
      }
      o.format = val;
    } else if (flag == OPT_DTYPE) {
      if (strcmp(val, "bf16") == 0) o.export_dtype = CAIRN_DTYPE_BF16;
      else if (strcmp(val, "f16") == 0) o.export_dtype = CAIRN_DTYPE_F16;
      else if (strcmp(val, "f32") == 0) o.export_dtype = CAIRN_DTYPE_F32;
      else {
        errorf("--dtype: '%s' is not bf16, f16 or f32", val);
        return EXIT_ERROR;
      }
    }
  }
  if (npos != cmd->nargs) {
    errorf("%s: %s (usage: " PROG " %s)", cmd->name, npos < cmd->nargs ? "missing argument" : "too many arguments",
           cmd->usage);
    return EXIT_ERROR;
  }
  int rc = cmd->run(&o, pos);
  if (fflush(stdout) != 0 || ferror(stdout)) {
    errorf("error writing to standard output: %s", strerror(errno));
    return EXIT_ERROR;
  }
  return rc;
}
