/* Private helpers of the session subsystem (session.c, op.c, scaffold.c,
 * session_manager.c and the monitored-session files); never installed.
 * The message buffers they keep are CAIRN__ERRMSG_LEN bytes (internal.h). */
#ifndef CAIRN_SESSION_IMPL_H
#define CAIRN_SESSION_IMPL_H

#include "var_impl.h"

#include "cairn/session.h"

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
