/* Function tables that can grow (lib/table.h). */
#include "internal.h"

#include <string.h>

#include "table.h"

cairn_status cairn__table_copy(void *dst, size_t dst_size, const void *src, size_t size_at, const char *fn,
                               const char *what, const char *type, size_t *size) {
  const size_t first = size_at + sizeof(size_t);
  size_t given;
  memcpy(&given, (const char *)src + size_at, sizeof given);
  size_t n = given ? given : first;
  if (n < first)
    return cairn__fail(CAIRN_E_INVALID,
                       "%s: %s->struct_size is %zu, less than the %zu bytes of the first %s layout; set it "
                       "to 0 or to sizeof(%s)",
                       fn, what, given, first, type, type);
  memset(dst, 0, dst_size);
  memcpy(dst, src, n < dst_size ? n : dst_size);
  if (size) *size = n;
  return CAIRN_OK;
}
