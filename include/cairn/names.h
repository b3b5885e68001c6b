/* cairn/names.h — a list of names (what a ready op reports not ready).
 *
 * A base header (it needs only the status codes). cairn/session.h includes
 * it, where it was declared first.
 */
#ifndef CAIRN_NAMES_H
#define CAIRN_NAMES_H

#include <stddef.h>

#include "cairn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cairn_names cairn_names;

CAIRN_API CAIRN_NODISCARD cairn_status cairn_names_new(cairn_names **out);
CAIRN_API void cairn_names_free(cairn_names *l);
/* Appends a copy of name. Errors: CAIRN_E_NULL, CAIRN_E_NOMEM. */
CAIRN_API CAIRN_NODISCARD cairn_status cairn_names_add(cairn_names *l, const char *name);
CAIRN_API void cairn_names_clear(cairn_names *l);
CAIRN_API size_t cairn_names_count(const cairn_names *l);
/* Name i (owned by l, valid until the next add/clear/free); NULL out of range. */
CAIRN_API const char *cairn_names_at(const cairn_names *l, size_t i);
/* "a, b, c" (joined with sep) into buf, snprintf-style: returns the length
 * of the whole text; buf may be NULL when len is 0. */
CAIRN_API size_t cairn_names_join(const cairn_names *l, const char *sep, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
