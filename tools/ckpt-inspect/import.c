/* ckpt-inspect import IN OUT: a TensorFlow bundle, safetensors file or NumPy
 * .npz written as a cairn checkpoint. */
#define _POSIX_C_SOURCE 200809L

#include "common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* import of a TensorFlow checkpoint or a safetensors file (c is open). */
static int import_foreign(const options *o, cairn_ckpt *c, const char *in, const char *out) {
  cairn_ckpt_write_options wo;
  memset(&wo, 0, sizeof wo);
  wo.compress = o->compress;
  cairn_ckpt_writer *w = NULL;
  cairn_status s = cairn_ckpt_writer_open(out, &wo, &w);
  size_t n = cairn_ckpt_count(c), nmeta = 0;
  for (size_t i = 0; i < n && s == CAIRN_OK; i++) {
    cairn_ckpt_entry e;
    cairn_tensor *t = NULL;
    if ((s = cairn_ckpt_entry_at(c, i, &e)) != CAIRN_OK || (s = read_tensor(c, &e, &t)) != CAIRN_OK) {
      error_tensor(in, i < n ? e.name : "?", s);
      cairn_ckpt_writer_abort(w);
      cairn_ckpt_close(c);
      return EXIT_ERROR;
    }
    s = cairn_ckpt_writer_add(w, e.name, t);
    cairn_tensor_free(t);
  }
  for (size_t i = 0; i < cairn_ckpt_meta_count(c) && s == CAIRN_OK; i++) {
    const char *key, *v;
    cairn_meta_type ty;
    if (cairn_ckpt_meta_at(c, i, &key, &ty) != CAIRN_OK || ty != CAIRN_META_STR || cairn_ckpt_meta_str(c, key, &v))
      continue;
    if (cairn_ckpt_writer_meta_str(w, key, v) == CAIRN_OK) {
      nmeta++;
    } else {
      fputs(PROG ": note: metadata '", stderr);
      put_esc(stderr, key);
      fputs("' skipped (cairn keys are 1..255 bytes of [a-z0-9_.])\n", stderr);
    }
  }
  if (s == CAIRN_OK) {
    s = cairn_ckpt_writer_commit(w);
    w = NULL;
  }
  const char *form = cairn_ckpt_format(c);
  cairn_ckpt_close(c);
  if (s != CAIRN_OK) {
    cairn_ckpt_writer_abort(w);
    error_status(out, s);
    return EXIT_ERROR;
  }
  printf("imported %zu tensor%s", n, n == 1 ? "" : "s");
  if (nmeta) printf(" and %zu metadata entr%s", nmeta, nmeta == 1 ? "y" : "ies");
  printf(" from a %s into ", strcmp(form, "tf") == 0 ? "TensorFlow checkpoint" : "safetensors file");
  put_esc(stdout, out);
  fputc('\n', stdout);
  return EXIT_OK_;
}

int cmd_import(const options *o, const char *const *args) {
  const char *in = args[0], *out = args[1];
  struct stat st;
  cairn_ckpt *fc = NULL;
  /* An .npz opens as a checkpoint too, but is imported below, streamed. */
  if (cairn_ckpt_open(in, NULL, &fc) == CAIRN_OK && strcmp(cairn_ckpt_format(fc), "npz") == 0) {
    cairn_ckpt_close(fc);
    fc = NULL;
  }
  if (fc) {
    if (strcmp(cairn_ckpt_format(fc), "cairn") == 0) {
      cairn_ckpt_close(fc);
      errorf("%s: is already a cairn checkpoint", in);
      return EXIT_ERROR;
    }
    if (check_output(o, in, out) != 0) {
      cairn_ckpt_close(fc);
      return EXIT_ERROR;
    }
    return import_foreign(o, fc, in, out);
  }
  if (stat(in, &st) != 0) {
    errorf("%s: %s", in, strerror(errno));
    return EXIT_ERROR;
  }
  if (check_output(o, in, out) != 0) return EXIT_ERROR;
  /* An .npz: libcairn streams each member into the checkpoint, so memory
   * does not follow the members' sizes (doc/interop-formats.md). */
  cairn_npz_reader *r = NULL;
  cairn_status s = cairn_npz_reader_open(in, &r);
  if (s != CAIRN_OK) {
    errorf("%s", cairn_errmsg());
    return EXIT_ERROR;
  }
  cairn_ckpt_write_options wo = cairn_ckpt_write_options_default();
  wo.compress = o->compress;
  cairn_ckpt_writer *w = NULL;
  s = cairn_ckpt_writer_open(out, &wo, &w);
  if (s != CAIRN_OK) {
    error_status(out, s);
    cairn_npz_reader_close(r);
    return EXIT_ERROR;
  }
  size_t n = cairn_npz_reader_count(r), imported = 0, skipped = 0;
  for (size_t i = 0; i < n; i++) {
    const char *mname = cairn_npz_reader_name(r, i);
    size_t ml = strlen(mname);
    if (ml <= 4 || strcmp(mname + ml - 4, ".npy") != 0) {
      fputs(PROG ": warning: ", stderr);
      put_esc(stderr, in);
      fputs(": skipping member '", stderr);
      put_esc(stderr, mname);
      fputs("' (not a .npy array)\n", stderr);
      skipped++;
      continue;
    }
    char *name = strndup(mname, ml - 4);
    if (!name) {
      errorf("%s: member '%s': out of memory", in, mname);
      goto fail;
    }
    s = cairn_npz_reader_import(r, i, w, name);
    free(name);
    if (s != CAIRN_OK) {
      errorf("%s", cairn_errmsg());
      goto fail;
    }
    imported++;
  }
  s = cairn_ckpt_writer_commit(w);
  w = NULL;
  cairn_npz_reader_close(r);
  if (s != CAIRN_OK) {
    error_status(out, s);
    return EXIT_ERROR;
  }
  printf("imported %zu tensor%s into ", imported, imported == 1 ? "" : "s");
  put_esc(stdout, out);
  if (skipped) printf(" (%zu non-.npy member%s skipped)", skipped, skipped == 1 ? "" : "s");
  fputc('\n', stdout);
  return EXIT_OK_;
fail:
  cairn_ckpt_writer_abort(w);
  cairn_npz_reader_close(r);
  return EXIT_ERROR;
}
