/* Where a restore reads from when it is given a directory: the newest
 * usable checkpoint of it, through the latest-checkpoint lookup (with its
 * fallbacks: the state file, then a scan; corrupt files skipped). */
#include "internal.h"
#include "restore_impl.h"

#include "cairn/ckpt.h"
#include "cairn/saver.h"

cairn_status cairn__checkpoint_in_dir(const char *dir, char *path, size_t len, cairn_ckpt **out) {
  if (out) *out = NULL;
  cairn_ckpt *c = NULL;
  cairn_status st = cairn_latest_checkpoint_open(dir, path, len, NULL, 0, &c);
  if (st) return st;
  if (out) *out = c;
  else cairn_ckpt_close(c);
  return CAIRN_OK;
}
