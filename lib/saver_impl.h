/* Internals shared by the Saver's files (saver.c: construction and save;
 * saver_restore.c: restore). */
#ifndef CAIRN_SAVER_IMPL_H
#define CAIRN_SAVER_IMPL_H

#include "cairn/ckpt.h"
#include "cairn/saver.h"

/* Hands the checkpoint a restore just read (open) to the saver, which keeps
 * it until its next save or its free: a resume saves the step it restored
 * right after session creation (CheckpointSaverHook), and that save's
 * same-step comparison then reads the file already open instead of opening
 * the newest checkpoint a second time. Closes the one kept before. */
void cairn__saver_keep_restored(cairn_saver *s, cairn_ckpt *c);

/* 1 if c's open file is the file at path now (same device, inode, size and
 * modification time): ckpt_read.c. */
int cairn__ckpt_is_file(const cairn_ckpt *c, const char *path);

#endif
