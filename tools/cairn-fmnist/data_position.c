/* cairn-fmnist/data_position.c — the dataset's position in every
 * checkpoint, so that a resumed run sees the batches an uninterrupted one
 * would: exported by a checkpoint listener (before_save) as the blob
 * "train.state.dataset", imported again by the DataPositionHook after each
 * session creation (placed before the CheckpointSaverHook, so the save it
 * makes right after creation already carries the restored position). */
#define _POSIX_C_SOURCE 200809L

#include "common.h"

#include <string.h>

#include "dist.h"

/* Serialized as 4 little-endian-agnostic u64 words (host order: the blob is
 * read back only by this program on this machine's architecture). */
cairn_status ds_before_save(void *self, cairn_session *s, int64_t step) {
  (void)s;
  (void)step;
  data_state *d = self;
  cairn_dataset_state st;
  cairn_dataset_export(d->ds, &st);
  uint64_t w[4] = {st.seed, (uint64_t)st.size, (uint64_t)st.epoch, (uint64_t)st.position};
  return cairn_saver_set_state(d->saver, "dataset", w, sizeof w);
}

/* After every session creation, before the CheckpointSaverHook saves: the
 * dataset position of the checkpoint the session was restored from (read
 * with its variables: after a fall back past a corrupt newest checkpoint,
 * the older one's), when its global step is the session's; else the start
 * of epoch 0. */
static cairn_status import_position(data_state *d, const char *path, const cairn_saver_meta *meta, int64_t step);
static cairn_status ds_after_create(void *self, cairn_session *s, cairn_coordinator *coord) {
  (void)coord;
  data_state *d = self;
  int64_t step;
  cairn_status st = cairn_session_global_step(s, &step);
  if (st) return st;
  cairn_dataset_reset(d->ds);
  const cairn_saver_meta *meta = cairn_session_restored_meta(s);
  if (d->dir && meta) st = import_position(d, cairn_session_restored_path(s), meta, step);
  if (fmnist_dist_size() == 1) return st;
  /* --distributed: rank 0's position (the other ranks have no DIR), with
     whether rank 0 got it, so that every rank takes part in the broadcast. */
  cairn_dataset_state pos;
  cairn_dataset_export(d->ds, &pos);
  uint64_t w[5] = {st == CAIRN_OK, pos.seed, (uint64_t)pos.size, (uint64_t)pos.epoch, (uint64_t)pos.position};
  cairn_status bs = fmnist_dist_broadcast(w, sizeof w);
  if (fmnist_dist_rank() == 0 || st) return st ? st : bs;
  if (bs) return cairn_session_fail(s, bs, "DataPositionHook: %s", cairn_errmsg());
  if (!w[0])
    return cairn_session_fail(s, CAIRN_E_UNAVAILABLE, "DataPositionHook: rank 0 could not restore its data position");
  cairn_dataset_state ds = {w[1], (int64_t)w[2], (int64_t)w[3], (int64_t)w[4]};
  return cairn_dataset_import(d->ds, &ds);
}

/* The data position saved in checkpoint `path` (its metadata `meta`), if
 * its step is `step`. */
static cairn_status import_position(data_state *d, const char *path, const cairn_saver_meta *meta, int64_t step) {
  cairn_status st = CAIRN_OK;
  int64_t ck_step;
  const void *blob;
  size_t len;
  if (cairn_saver_meta_global_step(meta, &ck_step) == CAIRN_OK && ck_step == step &&
      cairn_saver_meta_state(meta, "dataset", &blob, &len) == CAIRN_OK && len == 4 * sizeof(uint64_t)) {
    uint64_t w[4];
    memcpy(w, blob, sizeof w);
    cairn_dataset_state ds = {w[0], (int64_t)w[1], (int64_t)w[2], (int64_t)w[3]};
    st = cairn_dataset_import(d->ds, &ds);
    if (st) fprintf(stderr, PROG ": %s: cannot resume its data position (was it trained with another --seed?): %s\n", path, cairn_errmsg());
  } else if (step != 0) {
    fprintf(stderr, PROG ": %s holds no data position for step %lld\n", path, (long long)step);
    st = CAIRN_E_FORMAT;
  }
  return st;
}

const cairn_hook_vtable DATA_HOOK = {.name = "DataPositionHook", .after_create_session = ds_after_create};
