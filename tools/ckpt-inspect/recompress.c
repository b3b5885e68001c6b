/* ckpt-inspect recompress IN OUT: a cairn checkpoint rewritten with another codec. */
#define _POSIX_C_SOURCE 200809L

#include "common.h"

#include <string.h>
#include <sys/stat.h>

static int copy_meta(cairn_ckpt *c, cairn_ckpt_writer *w) {
  for (size_t i = 0; i < cairn_ckpt_meta_count(c); i++) {
    const char *key;
    cairn_meta_type ty;
    cairn_status s = cairn_ckpt_meta_at(c, i, &key, &ty);
    if (s) return s;
    uint64_t u;
    int64_t v;
    double f;
    int b;
    const char *str;
    const void *by;
    size_t len;
    switch (ty) {
      case CAIRN_META_U64: s = cairn_ckpt_meta_u64(c, key, &u); if (!s) s = cairn_ckpt_writer_meta_u64(w, key, u); break;
      case CAIRN_META_I64: s = cairn_ckpt_meta_i64(c, key, &v); if (!s) s = cairn_ckpt_writer_meta_i64(w, key, v); break;
      case CAIRN_META_F64: s = cairn_ckpt_meta_f64(c, key, &f); if (!s) s = cairn_ckpt_writer_meta_f64(w, key, f); break;
      case CAIRN_META_BOOL: s = cairn_ckpt_meta_bool(c, key, &b); if (!s) s = cairn_ckpt_writer_meta_bool(w, key, b); break;
      case CAIRN_META_STR: s = cairn_ckpt_meta_str(c, key, &str); if (!s) s = cairn_ckpt_writer_meta_str(w, key, str); break;
      default:
        s = cairn_ckpt_meta_bytes(c, key, &by, &len);
        if (!s) s = cairn_ckpt_writer_meta_bytes(w, key, by, len);
    }
    if (s) return s;
  }
  return CAIRN_OK;
}

/* Rewrites IN with another codec. IN is verified whole first (a damaged
 * file is reported, never copied); each tensor is read (CRC-checked again)
 * and written through the normal writer, which writes a temporary file in
 * OUT's directory and renames it into place only after fsync. So OUT == IN
 * is safe: until that rename IN is untouched (the open descriptor keeps
 * reading the old file), and after it OUT holds the same tensors. */
int cmd_recompress(const options *o, const char *const *args) {
  const char *in = args[0], *out = args[1];
  char path[4096];
  if (resolve(in, 0, path, sizeof path) != 0) return EXIT_ERROR;
  struct stat si, so;
  int same = stat(path, &si) == 0 && stat(out, &so) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino;
  if (!same && check_output(o, path, out) != 0) return EXIT_ERROR;
  cairn_ckpt *c = NULL;
  cairn_status s = cairn_ckpt_open(path, NULL, &c);
  if (s == CAIRN_OK && strcmp(cairn_ckpt_format(c), "cairn") != 0) {
    cairn_ckpt_close(c);
    errorf("%s: not a cairn checkpoint (use import)", path);
    return EXIT_ERROR;
  }
  if (s == CAIRN_OK) s = cairn_ckpt_verify(c);
  if (s != CAIRN_OK) {
    error_status(path, s);
    cairn_ckpt_close(c);
    return status_is_bad_file(s) ? EXIT_BAD : EXIT_ERROR;
  }
  cairn_ckpt_write_options wo = cairn_ckpt_write_options_default();
  wo.compress = o->compress;
  cairn_ckpt_writer *w = NULL;
  s = cairn_ckpt_writer_open(out, &wo, &w);
  size_t n = cairn_ckpt_count(c);
  uint64_t raw = 0, before = 0, after = 0;
  for (size_t i = 0; i < n && s == CAIRN_OK; i++) {
    cairn_ckpt_entry e;
    cairn_tensor *t = NULL;
    if ((s = cairn_ckpt_entry_at(c, i, &e)) != CAIRN_OK || (s = read_tensor(c, &e, &t)) != CAIRN_OK) {
      error_tensor(path, e.name, s);
      cairn_ckpt_writer_abort(w);
      cairn_ckpt_close(c);
      return EXIT_ERROR;
    }
    raw += e.raw_bytes;
    before += e.stored_bytes;
    s = cairn_ckpt_writer_add(w, e.name, t);
    cairn_tensor_free(t);
  }
  if (s == CAIRN_OK) s = copy_meta(c, w);
  cairn_ckpt_close(c);
  if (s == CAIRN_OK) {
    s = cairn_ckpt_writer_commit(w);
    w = NULL;
  }
  if (s != CAIRN_OK) {
    cairn_ckpt_writer_abort(w);
    error_status(out, s);
    return EXIT_ERROR;
  }
  if (cairn_ckpt_open(out, NULL, &c) == CAIRN_OK) {
    for (size_t i = 0; i < cairn_ckpt_count(c); i++) {
      cairn_ckpt_entry e;
      if (cairn_ckpt_entry_at(c, i, &e) == CAIRN_OK) after += e.stored_bytes;
    }
    cairn_ckpt_close(c);
  }
  char r0[32], r1[32];
  ratio_str(r0, sizeof r0, raw, before);
  ratio_str(r1, sizeof r1, raw, after);
  printf("recompressed %zu tensor%s: %llu -> %llu stored bytes (ratio %s -> %s); wrote ", n, n == 1 ? "" : "s",
         (unsigned long long)before, (unsigned long long)after, r0, r1);
  put_esc(stdout, out);
  fputc('\n', stdout);
  return EXIT_OK_;
}
