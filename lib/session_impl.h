/* Private helpers of the session subsystem (session.c, scaffold.c,
 * session_manager.c and the monitored-session files); never installed. */
#ifndef CAIRN_SESSION_IMPL_H
#define CAIRN_SESSION_IMPL_H

#include "internal.h"

#include <stdarg.h>

#include "cairn/session.h"

/* Size of the whole-message buffers kept on handles (sessions, session
 * managers); cairn_errmsg() keeps the first 4095 bytes. A longer message
 * is cut visibly: it ends with "...". */
#define CAIRN__ERRBUF 16384

/* Formats the message into buf (CAIRN__ERRBUF bytes), copies it into the
 * calling thread's cairn_errmsg(), and returns st. */
cairn_status cairn__errbuf_fail(char *buf, cairn_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
cairn_status cairn__errbuf_vfail(char *buf, cairn_status st, const char *fmt, va_list ap);

/* Copies `detail` (NULL: the calling thread's cairn_errmsg()) into buf
 * and returns st: keeps the message of an error raised deeper down. */
cairn_status cairn__errbuf_keep(char *buf, cairn_status st, const char *detail);

/* Appends printf-style text to a NUL-terminated buffer of cap bytes,
 * cutting with "..." when full. */
void cairn__strbuf_append(char *buf, size_t cap, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* The session's whole-message buffer (for session_manager.c and the
 * monitored files to copy an op's error from). */
const char *cairn__session_errbuf(const cairn_session *s);
/* Changes whenever the session's message is written: compare before and
 * after a callback to know whether its error message is on the session
 * (else it is only in the thread's cairn_errmsg()). */
unsigned cairn__session_errgen(const cairn_session *s);

/* Records on s the checkpoint file its variables were restored from and
 * that file's metadata (owned by s from now on, even on failure; may be
 * NULL). For session_manager.c. Errors: CAIRN_E_NOMEM. */
cairn_status cairn__session_set_restored(cairn_session *s, const char *path, cairn_saver_meta *meta);

#endif
