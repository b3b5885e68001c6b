/* Name lists (cairn/session.h): what a ready op reports as not ready. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#include "cairn/session.h"

struct cairn_names {
  char **v;
  size_t n, cap;
};

cairn_status cairn_names_new(cairn_names **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "names_new: out is NULL");
  *out = calloc(1, sizeof **out);
  return *out ? CAIRN_OK : cairn__fail(CAIRN_E_NOMEM, "names_new: cannot allocate the list");
}

void cairn_names_clear(cairn_names *l) {
  if (!l) return;
  for (size_t i = 0; i < l->n; i++) free(l->v[i]);
  l->n = 0;
}

void cairn_names_free(cairn_names *l) {
  if (!l) return;
  cairn_names_clear(l);
  free(l->v);
  free(l);
}

cairn_status cairn_names_add(cairn_names *l, const char *name) {
  if (!l) return cairn__fail(CAIRN_E_NULL, "names_add: list is NULL");
  if (!name) return cairn__fail(CAIRN_E_NULL, "names_add: name is NULL");
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 8;
    char **v = realloc(l->v, cap * sizeof *v);
    if (!v) return cairn__fail(CAIRN_E_NOMEM, "names_add: cannot grow the list");
    l->v = v;
    l->cap = cap;
  }
  size_t len = strlen(name);
  char *c = malloc(len + 1);
  if (!c) return cairn__fail(CAIRN_E_NOMEM, "names_add: cannot copy '%s'", name);
  memcpy(c, name, len + 1);
  l->v[l->n++] = c;
  return CAIRN_OK;
}

size_t cairn_names_count(const cairn_names *l) { return l ? l->n : 0; }

const char *cairn_names_at(const cairn_names *l, size_t i) { return l && i < l->n ? l->v[i] : NULL; }

size_t cairn_names_join(const cairn_names *l, const char *sep, char *buf, size_t len) {
  if (!sep) sep = ", ";
  size_t total = 0, seplen = strlen(sep);
  if (buf && len) buf[0] = '\0';
  for (size_t i = 0; l && i < l->n; i++) {
    const char *parts[2] = {i ? sep : "", l->v[i]};
    size_t plen[2] = {i ? seplen : 0, strlen(l->v[i])};
    for (int k = 0; k < 2; k++) {
      if (buf && total + 1 < len) {
        size_t room = len - 1 - total;
        size_t c = plen[k] < room ? plen[k] : room;
        memcpy(buf + total, parts[k], c);
        buf[total + c] = '\0';
      }
      total += plen[k];
    }
  }
  return total;
}
