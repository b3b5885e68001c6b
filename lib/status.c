/* Status messages, the per-thread error detail, and the whole-message
 * buffers that handles (sessions, session managers) keep. */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *cairn_status_str(cairn_status s) {
  switch (s) {
#define CAIRN_STATUS_CASE_(name, value, msg) \
  case name:                                 \
    return msg;
    CAIRN_STATUS_LIST(CAIRN_STATUS_CASE_)
#undef CAIRN_STATUS_CASE_
  }
  return "unknown status";
}

static _Thread_local char errmsg[CAIRN__ERRMSG_LEN];

const char *cairn_errmsg(void) { return errmsg; }

cairn_status cairn__fail(cairn_status s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(errmsg, sizeof errmsg, fmt, ap);
  if (n >= (int)sizeof errmsg) memcpy(errmsg + sizeof errmsg - 4, "...", 4);
  va_end(ap);
  return s;
}

void cairn__clear_error(void) { errmsg[0] = '\0'; }

/* Two copies of their own (not errmsg itself, which both overwrite), so
 * that a cairn__errmsg_copy() result stays valid across a
 * cairn__fail_wrap(). */
static _Thread_local char copied[CAIRN__ERRMSG_LEN];
static _Thread_local char wrapped[CAIRN__ERRMSG_LEN];

const char *cairn__errmsg_copy(void) {
  memcpy(copied, errmsg, strlen(errmsg) + 1);
  return copied;
}

char *cairn__errmsg_hold(void) {
  size_t n = strlen(errmsg) + 1;
  char *held = malloc(n);
  if (held) memcpy(held, errmsg, n);
  return held;
}

cairn_status cairn__fail_held(cairn_status st, char *held) {
  if (!held) return st;
  memcpy(errmsg, held, strlen(held) + 1); /* a copy of errmsg: it fits */
  free(held);
  return st;
}

cairn_status cairn__fail_wrap(cairn_status s, const char *fmt, ...) {
  size_t k = strlen(errmsg);
  memcpy(wrapped, errmsg, k + 1);
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(errmsg, sizeof errmsg, fmt, ap);
  va_end(ap);
  if (n < 0) n = 0;
  if ((size_t)n + k >= sizeof errmsg) { /* cut as cairn__fail cuts: the last 3 bytes say so */
    if ((size_t)n < sizeof errmsg - 1) memcpy(errmsg + n, wrapped, sizeof errmsg - 1 - (size_t)n);
    memcpy(errmsg + sizeof errmsg - 4, "...", 4);
  } else {
    memcpy(errmsg + n, wrapped, k + 1);
  }
  return s;
}

/* ==== whole-message buffers on handles =================================================== */

cairn_status cairn__errbuf_vfail(char *buf, cairn_status st, const char *fmt, va_list ap) {
  int n = vsnprintf(buf, CAIRN__ERRMSG_LEN, fmt, ap);
  if (n >= CAIRN__ERRMSG_LEN) memcpy(buf + CAIRN__ERRMSG_LEN - 4, "...", 4); /* cut: say so */
  return cairn__fail(st, "%s", buf);
}

cairn_status cairn__errbuf_fail(char *buf, cairn_status st, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  cairn__errbuf_vfail(buf, st, fmt, ap);
  va_end(ap);
  return st;
}

cairn_status cairn__errbuf_keep(char *buf, cairn_status st, const char *detail) {
  if (!detail) detail = cairn_errmsg();
  if (detail != buf) {
    size_t n = strlen(detail);
    if (n >= CAIRN__ERRMSG_LEN) n = CAIRN__ERRMSG_LEN - 1;
    memmove(buf, detail, n);
    buf[n] = '\0';
  }
  return st;
}

void cairn__strbuf_append(char *buf, size_t cap, const char *fmt, ...) {
  size_t used = strlen(buf);
  if (used + 1 >= cap) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf + used, cap - used, fmt, ap);
  va_end(ap);
  if (n >= 0 && (size_t)n >= cap - used && cap >= 4) memcpy(buf + cap - 4, "...", 4);
}
