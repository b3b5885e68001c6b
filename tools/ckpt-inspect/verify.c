/* ckpt-inspect verify CKPT: every checksum and rule of a file, tensor data included. */
#define _POSIX_C_SOURCE 200809L

#include "common.h"

#include <stdlib.h>
#include <string.h>

static const char *g_verify_label = ""; /* cmd_verify: format_label of the file */

static void verify_report(const options *o, const char *path, cairn_status s, const char *msg, int major,
                          int minor, size_t ntensors, char **bad, size_t nbad) {
  int incomplete = s == CAIRN_E_TRUNCATED;
  if (o->json) {
    fputs("{\"file\": ", stdout);
    json_str(stdout, path);
    printf(", \"ok\": %s, \"incomplete\": %s, \"status\": \"%s\", \"message\": ", s == CAIRN_OK ? "true" : "false",
           incomplete ? "true" : "false", status_name(s));
    json_str(stdout, s == CAIRN_OK ? "" : msg);
    if (major >= 0) printf(", \"format_version\": \"%d.%d\", \"tensor_count\": %zu", major, minor, ntensors);
    fputs(", \"bad_tensors\": [", stdout);
    for (size_t i = 0; i < nbad; i++) {
      if (i) fputs(", ", stdout);
      json_str(stdout, bad[i]);
    }
    fputc(']', stdout);
    if (incomplete && is_cairn_file(path)) {
      fputs(", \"hint\": ", stdout);
      json_str(stdout, "incomplete file (no valid footer): 'ckpt-inspect recover IN OUT' salvages its complete "
                       "tensors");
    }
    fputs("}\n", stdout);
    return;
  }
  put_esc(stdout, path);
  if (s == CAIRN_OK) {
    if (strcmp(g_verify_label, "safetensors") == 0)
      printf(": OK (safetensors, %zu tensor%s; header and every rule verified; the format has no checksums)\n",
             ntensors, ntensors == 1 ? "" : "s");
    else if (*g_verify_label && strncmp(g_verify_label, "format", 6) != 0)
      printf(": OK (%s, %zu tensor%s; every checksum and rule verified)\n", g_verify_label, ntensors,
             ntensors == 1 ? "" : "s");
    else
      printf(": OK (format %d.%d, %zu tensor%s; every checksum and rule verified)\n", major, minor, ntensors,
             ntensors == 1 ? "" : "s");
    return;
  }
  printf(": %s: %s", incomplete ? "INCOMPLETE" : status_is_bad_file(s) ? "BAD" : "ERROR", cairn_status_str(s));
  if (msg && *msg) {
    fputs(": ", stdout);
    put_esc(stdout, msg);
  }
  fputc('\n', stdout);
  if (nbad) {
    printf("  %zu tensor%s cannot be read intact:", nbad, nbad == 1 ? "" : "s");
    for (size_t i = 0; i < nbad && i < 50; i++) {
      fputs(i ? ", " : " ", stdout);
      put_esc(stdout, bad[i]);
    }
    if (nbad > 50) printf(", ... (%zu more)", nbad - 50);
    fputc('\n', stdout);
  }
  if (incomplete && is_cairn_file(path)) {
    fputs("  the file has no valid footer: the save that wrote it was interrupted.\n"
          "  'ckpt-inspect recover ", stdout);
    put_esc(stdout, path);
    fputs(" OUT' copies every complete tensor into a new valid file.\n", stdout);
  }
}

int cmd_verify(const options *o, const char *const *args) {
  const char *arg = args[0];
  char path[4096];
  if (resolve(arg, 1, path, sizeof path) != 0) return EXIT_ERROR;
  cairn_ckpt *c = take_resolved(path);
  cairn_status s = c ? CAIRN_OK : cairn_ckpt_open(path, NULL, &c);
  if (s != CAIRN_OK) {
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", cairn_errmsg());
    verify_report(o, path, s, msg, -1, 0, 0, NULL, 0);
    return status_is_bad_file(s) ? EXIT_BAD : EXIT_ERROR;
  }
  int major, minor;
  cairn_ckpt_version(c, &major, &minor);
  static char label[80];
  g_verify_label = format_label(c, label, sizeof label);
  size_t n = cairn_ckpt_count(c);
  s = cairn_ckpt_verify(c);
  char msg[2048] = "";
  char **bad = NULL;
  size_t nbad = 0;
  if (s != CAIRN_OK) {
    snprintf(msg, sizeof msg, "%s", cairn_errmsg());
    /* verify stops at the first failure: name every tensor that fails. */
    bad = calloc(n ? n : 1, sizeof *bad);
    for (size_t i = 0; bad && i < n; i++) {
      cairn_ckpt_entry e;
      if (cairn_ckpt_entry_at(c, i, &e) != CAIRN_OK) continue;
      cairn_tensor *t = NULL;
      if (read_tensor(c, &e, &t) != CAIRN_OK) bad[nbad++] = strdup(e.name);
      cairn_tensor_free(t);
    }
  }
  verify_report(o, path, s, msg, major, minor, n, bad, nbad);
  for (size_t i = 0; i < nbad; i++) free(bad[i]);
  free(bad);
  cairn_ckpt_close(c);
  if (s == CAIRN_OK) return EXIT_OK_;
  return status_is_bad_file(s) ? EXIT_BAD : EXIT_ERROR;
}
