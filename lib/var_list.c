/* Variable lists by name pattern: "every variable except these", the list
 * a partial Saver or a restore op is built from. */
#define _POSIX_C_SOURCE 200809L
#include "var_impl.h"

#include <fnmatch.h>

#include "cairn/var.h"

static int matches_any(const char *name, const char *const *globs, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (globs[i] && fnmatch(globs[i], name, 0) == 0) return 1;
  return 0;
}

int cairn__globs_select(const char *name, const char *const *include, size_t n_include, const char *const *exclude,
                        size_t n_exclude) {
  if (n_include && (!include || !matches_any(name, include, n_include))) return 0;
  return !(n_exclude && exclude && matches_any(name, exclude, n_exclude));
}

size_t cairn_registry_list_vars(const cairn_registry *r, unsigned mask, const char *const *include, size_t n_include,
                                const char *const *exclude, size_t n_exclude, cairn_var **out, size_t cap) {
  size_t k = 0;
  cairn_var *v;
  for (size_t i = 0; (v = cairn__registry_var_at(r, i)) != NULL; i++) {
    if (!(cairn_var_collections(v) & mask) ||
        !cairn__globs_select(cairn_var_name(v), include, n_include, exclude, n_exclude))
      continue;
    if (out && k < cap) out[k] = v;
    k++;
  }
  return k;
}
