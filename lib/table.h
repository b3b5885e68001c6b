/* Copying a caller's function table whose trailing struct_size says how
 * much of it the caller's header knew (CONTRIBUTING, "Function tables");
 * never installed. */
#ifndef CAIRN_TABLE_H
#define CAIRN_TABLE_H

#include <stddef.h>

#include "cairn/env.h"
#include "cairn/status.h"

/* Copies the caller's table src into dst (the library's layout, dst_size
 * bytes). size_at is the offset of the table's size_t struct_size; the
 * first layout ends right after it, and 0 there means that layout. A
 * larger size (a newer header) is read only as far as the library knows;
 * members past a smaller size are NULL in dst. *size (may be NULL) gets
 * the caller's size, the stride of an array of such tables. Errors:
 * CAIRN_E_INVALID "<fn>: <what>->struct_size is 3, less than the 40 bytes
 * of the first <type> layout; set it to 0 or to sizeof(<type>)". */
cairn_status cairn__table_copy(void *dst, size_t dst_size, const void *src, size_t size_at, const char *fn,
                               const char *what, const char *type, size_t *size);

/* cairn_env_check with fn in the message: "<fn>: env->struct_size is ...". */
cairn_status cairn__env_check(const cairn_env *env, const char *fn);

#endif
