/* Status messages and the per-thread error detail. */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
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
