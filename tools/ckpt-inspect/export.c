/* ckpt-inspect export CKPT OUT: every tensor of a checkpoint written as a
 * NumPy .npz (the default), a TensorFlow bundle (--format tf) or a
 * safetensors file (--format safetensors, or OUT ending in .safetensors),
 * through the library's one writer entry point, cairn_ckpt_out
 * (cairn/interop.h), whose options name the format. */
#define _POSIX_C_SOURCE 200809L

#include "common.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Converts a floating-point tensor to dt (round to nearest even; from f64
 * through f32 for the 16-bit types); other tensors are returned as they are.
 * *conv is the new tensor to free, or NULL. */
static cairn_status convert_float(cairn_tensor *t, cairn_dtype dt, cairn_tensor **conv) {
  *conv = NULL;
  if (!dt || !dtype_is_float(t->dtype) || t->dtype == dt) return CAIRN_OK;
  cairn_status s = cairn_tensor_new(dt, t->rank, t->shape, conv);
  if (s != CAIRN_OK) return s;
  unsigned char *d = (*conv)->data;
  for (int64_t i = 0; i < t->size; i++) {
    double v = get_d(t->dtype, t->data, (uint64_t)i);
    if (dt == CAIRN_DTYPE_F64) memcpy(d + 8 * i, &v, 8);
    else {
      float f = (float)v;
      uint16_t h = dt == CAIRN_DTYPE_F16 ? f32_to_f16(f) : f32_to_bf16(f);
      if (dt == CAIRN_DTYPE_F32) memcpy(d + 4 * i, &f, 4);
      else memcpy(d + 2 * i, &h, 2);
    }
  }
  return CAIRN_OK;
}

/* safetensors: the metadata as __metadata__ strings (numbers and bools
 * printed); a note names each entry that is left out. */
static void export_meta(cairn_ckpt *c, cairn_ckpt_out *w) {
  for (size_t i = 0; i < cairn_ckpt_meta_count(c); i++) {
    const char *key, *sv;
    cairn_meta_type ty;
    char buf[64];
    uint64_t u;
    int64_t iv;
    double d;
    int b;
    if (cairn_ckpt_meta_at(c, i, &key, &ty) != CAIRN_OK) continue;
    sv = NULL;
    if (ty == CAIRN_META_STR && cairn_ckpt_meta_str(c, key, &sv) == CAIRN_OK) {
    } else if (ty == CAIRN_META_U64 && cairn_ckpt_meta_u64(c, key, &u) == CAIRN_OK) {
      snprintf(buf, sizeof buf, "%llu", (unsigned long long)u), sv = buf;
    } else if (ty == CAIRN_META_I64 && cairn_ckpt_meta_i64(c, key, &iv) == CAIRN_OK) {
      snprintf(buf, sizeof buf, "%lld", (long long)iv), sv = buf;
    } else if (ty == CAIRN_META_F64 && cairn_ckpt_meta_f64(c, key, &d) == CAIRN_OK) {
      snprintf(buf, sizeof buf, "%.17g", d), sv = buf;
    } else if (ty == CAIRN_META_BOOL && cairn_ckpt_meta_bool(c, key, &b) == CAIRN_OK) {
      sv = b ? "true" : "false";
    }
    if (sv && cairn_ckpt_out_meta_str(w, key, sv) != CAIRN_OK) sv = NULL;
    if (!sv) {
      fputs(PROG ": note: metadata '", stderr);
      put_esc(stderr, key);
      fputs("' not exported (safetensors metadata holds strings)\n", stderr);
    }
  }
}

/* The state file lets TensorFlow's latest_checkpoint find the bundle; an
 * existing one (a training directory's) is left alone. */
static void write_tf_state(const char *out) {
  char *dir = strdup(out), *sl = dir ? strrchr(dir, '/') : NULL;
  const char *d = !dir ? "." : sl ? (sl == dir ? "/" : (*sl = '\0', dir)) : ".";
  char state[4200];
  struct stat st;
  snprintf(state, sizeof state, "%s/checkpoint", d);
  if (dir && stat(state, &st) != 0 && cairn_checkpoint_state_write(d, out, NULL, 0, 0) != CAIRN_OK)
    errorf("note: %s: could not write the state file: %s", state, cairn_errmsg());
  free(dir);
}

/* Every tensor of c (converted by --dtype; for npz, bf16 is widened by the
 * writer, with a note) into a new OUT of the given format. Closes c. */
static int export_to(const options *o, cairn_ckpt *c, const char *path, const char *out,
                     cairn_ckpt_format_id format) {
  size_t n = cairn_ckpt_count(c), nconv = 0, nbf16 = 0;
  cairn_tensor **keep = calloc(n + 1, sizeof *keep); /* safetensors writes the data at commit */
  cairn_ckpt_out_options wo = cairn_ckpt_out_options_default();
  wo.format = format;
  cairn_ckpt_out *w = NULL;
  cairn_status s = !keep ? CAIRN_E_NOMEM : cairn_ckpt_out_open(out, &wo, &w);
  if (s != CAIRN_OK) {
    error_status(out, s);
    goto fail;
  }
  for (size_t i = 0; i < n; i++) {
    cairn_ckpt_entry e;
    cairn_tensor *t = NULL, *cv = NULL;
    if ((s = cairn_ckpt_entry_at(c, i, &e)) != CAIRN_OK) {
      error_status(path, s);
      goto fail;
    }
    if ((s = read_tensor(c, &e, &t)) != CAIRN_OK) {
      error_tensor(path, e.name, s);
      goto fail;
    }
    if ((s = convert_float(t, o->export_dtype, &cv)) != CAIRN_OK) {
      error_tensor(path, e.name, s);
      cairn_tensor_free(t);
      goto fail;
    }
    if (cv) {
      cairn_tensor_free(t);
      t = cv;
      nconv++;
    }
    if (format == CAIRN_CKPT_FORMAT_NPZ && t->dtype == CAIRN_DTYPE_BF16) {
      nbf16++;
      fputs(PROG ": note: bf16 tensor '", stderr);
      put_esc(stderr, e.name);
      fputs("' exported as float32 ('<f4'): NumPy has no bfloat16\n", stderr);
    }
    if ((s = cairn_ckpt_out_add(w, e.name, t)) != CAIRN_OK) {
      error_tensor(out, e.name, s);
      cairn_tensor_free(t);
      goto fail;
    }
    if (format == CAIRN_CKPT_FORMAT_SAFETENSORS) keep[i] = t;
    else cairn_tensor_free(t);
  }
  if (format == CAIRN_CKPT_FORMAT_SAFETENSORS) export_meta(c, w);
  s = cairn_ckpt_out_commit(w); /* frees w whatever the outcome */
  w = NULL;
  if (s != CAIRN_OK) {
    error_status(out, s);
    goto fail;
  }
  if (format == CAIRN_CKPT_FORMAT_TF) write_tf_state(out);
  printf("exported %zu tensor%s to ", n, n == 1 ? "" : "s");
  put_esc(stdout, out);
  if (format == CAIRN_CKPT_FORMAT_NPZ) {
    if (nbf16) printf(" (%zu bf16 tensor%s widened to float32)", nbf16, nbf16 == 1 ? "" : "s");
  } else {
    printf(" (%s", format == CAIRN_CKPT_FORMAT_TF ? "TensorFlow checkpoint" : "safetensors");
    if (nconv) printf(", %zu converted to %s", nconv, dtype_str(o->export_dtype));
    printf(")");
  }
  fputc('\n', stdout);
  for (size_t i = 0; i < n; i++) cairn_tensor_free(keep[i]);
  free(keep);
  cairn_ckpt_close(c);
  return EXIT_OK_;
fail:
  cairn_ckpt_out_abort(w);
  for (size_t i = 0; keep && i < n; i++) cairn_tensor_free(keep[i]);
  free(keep);
  cairn_ckpt_close(c);
  return EXIT_ERROR;
}

int cmd_export(const options *o, const char *const *args) {
  const char *arg = args[0], *out = args[1];
  char path[4096];
  if (resolve(arg, 1, path, sizeof path) != 0) return EXIT_ERROR;
  const char *form = o->format ? o->format : ends_with(out, ".safetensors") ? "safetensors" : "npz";
  cairn_ckpt_format_id format = strcmp(form, "tf") == 0    ? CAIRN_CKPT_FORMAT_TF
                                : strcmp(form, "npz") == 0 ? CAIRN_CKPT_FORMAT_NPZ
                                                           : CAIRN_CKPT_FORMAT_SAFETENSORS;
  if (format == CAIRN_CKPT_FORMAT_TF) {
    char idx[4200];
    snprintf(idx, sizeof idx, "%s.index", out);
    if (check_output(o, path, idx) != 0) return EXIT_ERROR;
  } else if (check_output(o, path, out) != 0) {
    return EXIT_ERROR;
  }
  if (format == CAIRN_CKPT_FORMAT_NPZ && o->export_dtype) {
    errorf("export: --dtype applies to --format tf and safetensors");
    return EXIT_ERROR;
  }
  cairn_ckpt *c;
  if (open_ckpt(path, &c) != CAIRN_OK) return EXIT_ERROR;
  return export_to(o, c, path, out, format);
}
