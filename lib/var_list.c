/* Variable lists by name pattern: "every variable except these", the list
 * a partial Saver or a restore op is built from. A pattern that matches
 * nothing is almost always a typo ("dense/kernal"), and a list built from
 * it silently leaves a layer out of a restore: the checked form fails for
 * an include pattern that matched nothing and warns for an exclude one,
 * naming the closest variables. */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"
#include "suggest_impl.h"
#include "var_impl.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cairn/env.h"
#include "cairn/names.h"
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

/* The variables of r in mask, as suggestion candidates. */
typedef struct in_mask {
  const cairn_registry *r;
  unsigned mask;
} in_mask;

static const char *mask_name_at(const void *ctx, size_t i) {
  const in_mask *m = ctx;
  cairn_var *v = cairn__registry_var_at(m->r, i);
  return v && (cairn_var_collections(v) & m->mask) ? cairn_var_name(v) : NULL;
}

static size_t n_vars(const cairn_registry *r) {
  size_t n = 0;
  while (cairn__registry_var_at(r, n)) n++;
  return n;
}

/* 1 when glob matches some variable of r in mask. */
static int matches_some(const cairn_registry *r, unsigned mask, const char *glob) {
  cairn_var *v;
  for (size_t i = 0; (v = cairn__registry_var_at(r, i)) != NULL; i++)
    if ((cairn_var_collections(v) & mask) && fnmatch(glob, cairn_var_name(v), 0) == 0) return 1;
  return 0;
}

static size_t list(const cairn_registry *r, unsigned mask, const char *const *include, size_t n_include,
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

/* Logs a WARNING for each pattern of globs[0..n) that matches no variable
 * of mask; with `names`, also appends them there. Returns how many. */
static size_t warn_unmatched(const char *fn, const cairn_registry *r, unsigned mask, const char *kind,
                             const char *const *globs, size_t n, const char *what, cairn_names *names, int *oom) {
  size_t bad = 0;
  in_mask m = {r, mask};
  for (size_t i = 0; i < n; i++) {
    if (!globs || !globs[i] || matches_some(r, mask, globs[i])) continue;
    bad++;
    if (names && cairn_names_add(names, globs[i])) *oom = 1;
    if (!what) continue;
    char hint[600];
    cairn__suggest(globs[i], mask_name_at, &m, n_vars(r), 3, hint, sizeof hint);
    cairn_env_log(NULL, CAIRN_LOG_WARN, "%s: %s pattern '%s' matches no variable%s; %s", fn, kind, globs[i], hint,
                  what);
  }
  return bad;
}

size_t cairn_registry_list_vars(const cairn_registry *r, unsigned mask, const char *const *include, size_t n_include,
                                const char *const *exclude, size_t n_exclude, cairn_var **out, size_t cap) {
  if (!r) return 0;
  int oom = 0;
  warn_unmatched("registry_list_vars", r, mask, "include", include, n_include,
                 "it adds nothing to the list (cairn_registry_list_vars_checked fails for it)", NULL, &oom);
  warn_unmatched("registry_list_vars", r, mask, "exclude", exclude, n_exclude, "it leaves nothing out", NULL, &oom);
  return list(r, mask, include, n_include, exclude, n_exclude, out, cap);
}

cairn_status cairn_registry_list_vars_checked(const cairn_registry *r, unsigned mask, const char *const *include,
                                              size_t n_include, const char *const *exclude, size_t n_exclude,
                                              cairn_var **out, size_t cap, size_t *count, cairn_names *unmatched) {
  static const char fn[] = "registry_list_vars_checked";
  if (count) *count = 0;
  if (!r || !count) return cairn__fail(CAIRN_E_NULL, "%s: %s is NULL", fn, !r ? "registry" : "count");
  if ((n_include && !include) || (n_exclude && !exclude))
    return cairn__fail(CAIRN_E_NULL, "%s: %s is NULL with n_%s > 0", fn, !include ? "include" : "exclude",
                       !include ? "include" : "exclude");
  for (size_t i = 0; i < n_include; i++)
    if (!include[i]) return cairn__fail(CAIRN_E_NULL, "%s: include[%zu] is NULL", fn, i);
  for (size_t i = 0; i < n_exclude; i++)
    if (!exclude[i]) return cairn__fail(CAIRN_E_NULL, "%s: exclude[%zu] is NULL", fn, i);
  if (unmatched) cairn_names_clear(unmatched);
  *count = list(r, mask, include, n_include, exclude, n_exclude, out, cap);
  int oom = 0;
  /* An unmatched exclude pattern is legal (a generic one that names
     optimizer slots may be shared between models): a WARNING, and it is
     listed. */
  size_t bad_in = warn_unmatched(fn, r, mask, "include", include, n_include, NULL, unmatched, &oom);
  warn_unmatched(fn, r, mask, "exclude", exclude, n_exclude, "it leaves nothing out", unmatched, &oom);
  if (oom) return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  if (!bad_in) return CAIRN_OK;
  char msg[CAIRN__ERRMSG_LEN - 200];
  int used = snprintf(msg, sizeof msg, "%s: %zu of %zu include pattern%s match%s no variable in the collections "
                      "0x%x, so the list would silently leave them out (%zu variables listed): ",
                      fn, bad_in, n_include, n_include == 1 ? "" : "s", bad_in == 1 ? "es" : "", mask, *count);
  in_mask m = {r, mask};
  size_t shown = 0;
  for (size_t i = 0; i < n_include && used > 0 && (size_t)used < sizeof msg - 100; i++) {
    if (matches_some(r, mask, include[i])) continue;
    char hint[600];
    cairn__suggest(include[i], mask_name_at, &m, n_vars(r), 3, hint, sizeof hint);
    used += snprintf(msg + used, sizeof msg - (size_t)used, "%s'%s'%s", shown++ ? "; " : "", include[i], hint);
  }
  return cairn__fail(CAIRN_E_NOT_FOUND, "%s", msg);
}
