/* Salvage of incomplete checkpoints (being written). */
#include "ckpt_impl.h"

cairn_status cairn_ckpt_recover(const char *in, const char *out, size_t *recovered, size_t *lost) {
  (void)in;
  (void)out;
  if (recovered) *recovered = 0;
  if (lost) *lost = 0;
  return cairn__fail(CAIRN_E_UNSUPPORTED, "ckpt_recover: not implemented yet");
}
