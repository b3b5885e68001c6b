/* Private to the state file (checkpoint_state.c) and the lookup of the
 * latest checkpoint (checkpoint_latest.c): a growing string, TF's escaping
 * of a state-file string, the confinement rule of entries, one-time
 * warnings. Never installed. */
#ifndef CAIRN_CHECKPOINT_STATE_IMPL_H
#define CAIRN_CHECKPOINT_STATE_IMPL_H

#include <stddef.h>

#include "cairn/status.h"

#define CAIRN__STATE_NAME "checkpoint"

/* A NUL-terminated string that grows; oom set (and the text frozen) when an
 * allocation failed. Zero-initialise; free(p) when done. */
typedef struct cairn__sbuf {
  char *p;
  size_t n, cap;
  int oom;
} cairn__sbuf;

void cairn__sb_putn(cairn__sbuf *b, const char *s, size_t n);
void cairn__sb_puts(cairn__sbuf *b, const char *s);
/* Appends s quoted and escaped as TF's CEscape writes it. */
void cairn__state_put_escaped(cairn__sbuf *b, const char *s);
/* 1 when `entry` names a file directly in dir (rdir: realpath of dir);
 * else 0 and why in why[0..len). */
int cairn__names_file_in_dir(const char *dir, const char *rdir, const char *entry, char *why, size_t len);
/* cairn_checkpoint_state_read with the state file opened in the directory
 * dd already open (NULL: opened for this read). checkpoint_state.c. */
struct cairn__dir;
struct cairn_checkpoint_state;
cairn_status cairn__checkpoint_state_read_in(const struct cairn__dir *dd, const char *dir,
                                             struct cairn_checkpoint_state **out);
/* Logs msg as a WARNING once per process. */
void cairn__warn_once(const char *msg);

#endif
