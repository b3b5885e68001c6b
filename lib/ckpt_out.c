/* One writer for every checkpoint format (cairn/interop.h, cairn_ckpt_out):
 * the options name the format, and the calls go through that format's
 * backend table (ckpt_backend.h), the same table the reader uses. The
 * per-format writers (cairn_ckpt_writer_*, cairn_tfbundle_writer_*,
 * cairn_safetensors_writer_*) stay as they are: this is a front on them. */
#include "ckpt_backend.h"

#include <stdlib.h>
#include <string.h>

#include "cairn/interop.h"

struct cairn_ckpt_out {
  const ck_backend *be;
  void *w;
  char *path; /* for messages */
};

CAIRN__OPTIONS_DEFAULT(cairn_ckpt_out_options)

cairn_status cairn_ckpt_out_open(const char *path, const cairn_ckpt_out_options *opts, cairn_ckpt_out **out) {
  static const char fn[] = "ckpt_out_open";
  if (out) *out = NULL;
  if (!path) return cairn__fail(CAIRN_E_NULL, "%s: path is NULL", fn);
  if (!out) return cairn__fail(CAIRN_E_NULL, "%s: out is NULL", fn);
  cairn_ckpt_out_options o = opts ? *opts : cairn_ckpt_out_options_default();
  if (opts && o.struct_size && o.struct_size < sizeof o)
    return cairn__fail(CAIRN_E_INVALID, "%s: options struct_size is %zu, smaller than the first layout (%zu)", fn,
                       o.struct_size, sizeof o);
  const ck_backend *be = cairn__ck_backend_of(o.format);
  if (!be)
    return cairn__fail(CAIRN_E_INVALID,
                       "%s: format %d is not one of CAIRN_CKPT_FORMAT_CAIRN (0), _TF (1), _SAFETENSORS (2), _NPZ (3)", fn,
                       (int)o.format);
  cairn_ckpt_out *c = calloc(1, sizeof *c);
  if (!c || !(c->path = cairn__strdup(path))) {
    free(c);
    return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  }
  c->be = be;
  cairn_status st = be->wopen(path, &o.cairn, &c->w);
  if (st) {
    free(c->path);
    free(c);
    return st;
  }
  *out = c;
  return CAIRN_OK;
}

const char *cairn_ckpt_out_format(const cairn_ckpt_out *w) { return w ? w->be->name : NULL; }

cairn_status cairn_ckpt_out_add(cairn_ckpt_out *w, const char *name, const cairn_tensor *t) {
  if (!w) return cairn__fail(CAIRN_E_NULL, "ckpt_out_add: writer is NULL");
  return w->be->wadd(w->w, name, t);
}

cairn_status cairn_ckpt_out_meta_str(cairn_ckpt_out *w, const char *key, const char *value) {
  if (!w) return cairn__fail(CAIRN_E_NULL, "ckpt_out_meta_str: writer is NULL");
  if (!w->be->wmeta_str)
    return cairn__fail(CAIRN_E_UNSUPPORTED,
                       "ckpt_out_meta_str '%s': a %s checkpoint has no metadata; key '%s' cannot be stored (write "
                       "cairn's format or safetensors to keep it)",
                       w->path, w->be->name, key ? key : "(null)");
  return w->be->wmeta_str(w->w, key, value);
}

cairn_status cairn_ckpt_out_commit(cairn_ckpt_out *w) {
  if (!w) return cairn__fail(CAIRN_E_NULL, "ckpt_out_commit: writer is NULL");
  cairn_status st = w->be->wcommit(w->w);
  free(w->path);
  free(w);
  return st;
}

void cairn_ckpt_out_abort(cairn_ckpt_out *w) {
  if (!w) return;
  w->be->wabort(w->w);
  free(w->path);
  free(w);
}
