/* ckpt-inspect recover IN OUT: the complete tensors of a cut-short or
 * damaged file, into a new valid one. */
#define _POSIX_C_SOURCE 200809L

#include "common.h"

int cmd_recover(const options *o, const char *const *args) {
  const char *in = args[0], *out = args[1];
  char path[4096];
  if (resolve(in, 0, path, sizeof path) != 0) return EXIT_ERROR;
  if (check_output(o, path, out) != 0) return EXIT_ERROR;
  size_t recovered = 0, lost = 0;
  cairn_status s = cairn_ckpt_recover(path, out, &recovered, &lost);
  if (s != CAIRN_OK) {
    error_status(path, s);
    return EXIT_ERROR;
  }
  printf("recovered %zu tensor%s, lost %zu (cut short or corrupt); wrote ", recovered, recovered == 1 ? "" : "s",
         lost);
  put_esc(stdout, out);
  fputc('\n', stdout);
  return EXIT_OK_;
}
