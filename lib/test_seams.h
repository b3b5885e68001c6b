/* The seams only tests use: hooks a test sets to act in the middle of a
 * call, and counters a test reads. NULL / unused in every program; the
 * library's code reads them at one place each. Never installed. */
#ifndef CAIRN_TEST_SEAMS_H
#define CAIRN_TEST_SEAMS_H

/* Called by a restore between its verifying pass and its decoding pass,
 * so a test can change the file there (saver_restore.c). NULL otherwise. */
extern void (*cairn__restore_between_passes)(const char *path, void *user);
extern void *cairn__restore_between_passes_user;
/* The number of threads the last tensor decode or verify used
 * (ckpt_native.c). */
extern _Atomic int cairn__ckpt_last_threads;

#endif
