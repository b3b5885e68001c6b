/* cairn's own format as a backend of the table (ckpt_backend.h), beside
 * the TF bundle's and safetensors'. Its write members are cairn's writer
 * (ckpt_write.c). Its read members are NULL for now: cairn_ckpt_open
 * still parses cairn files itself (ckpt_read.c) and goes through the table
 * only for the foreign formats. */
#include "ckpt_backend.h"

#include "cairn/ckpt.h"

static cairn_status native_wopen(const char *path, const cairn_ckpt_write_options *o, void **w) {
  return cairn_ckpt_writer_open(path, o, (cairn_ckpt_writer **)w);
}
static cairn_status native_wmeta(void *w, const char *key, const char *value) {
  return cairn_ckpt_writer_meta_str(w, key, value);
}
CK_WRITE_ADAPTERS(native, cairn_ckpt_writer, cairn_ckpt_writer_add, cairn_ckpt_writer_commit, cairn_ckpt_writer_abort)

const ck_backend cairn__ck_native = {
    .name = "cairn",
    .wopen = native_wopen, .wadd = native_wadd, .wmeta_str = native_wmeta, .wcommit = native_wcommit,
    .wabort = native_wabort};
