/* Private helpers of the partial restore (saver_restore.c) for the restore
 * op and the SessionManager. Never installed. */
#ifndef CAIRN_RESTORE_IMPL_H
#define CAIRN_RESTORE_IMPL_H

#include "cairn/saver.h"

/* The checks of a strict partial restore that need no checkpoint: every
 * include pattern and the model side of every rename rule of o must match
 * a variable of s's save set (after o's collection filter). CAIRN_OK when
 * they all do or o is lenient or NULL; else CAIRN_E_NOT_FOUND, the
 * message starting with fn and naming each pattern and the closest names;
 * CAIRN_E_INVALID / CAIRN_E_NULL for options a restore would refuse.
 * saver_restore.c */
cairn_status cairn__restore_check_names(const char *fn, const cairn_saver *s, const cairn_restore_options *o);

#endif
