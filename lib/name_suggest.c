/* "Did you mean ...?": the candidates closest to a name or glob that
 * matched nothing (a misspelled include pattern, rename rule or checkpoint
 * key), so that a strict restore's message points at the fix. */
#include "suggest_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t cairn__edit_distance(const char *a, size_t la, const char *b, size_t lb, size_t limit) {
  size_t diff = la > lb ? la - lb : lb - la;
  if (diff > limit) return limit + 1;
  /* Optimal string alignment (Levenshtein plus the swap of two neighbours,
     the commonest typo: "haed" for "head"), three rows of the
     (la + 1, lb + 1) table. */
  size_t *rows = malloc(3 * (lb + 1) * sizeof *rows);
  if (!rows) return limit + 1;
  size_t *pp = rows, *prev = rows + lb + 1, *cur = rows + 2 * (lb + 1);
  for (size_t j = 0; j <= lb; j++) prev[j] = j;
  size_t out = 0;
  for (size_t i = 1; i <= la; i++) {
    cur[0] = i;
    size_t row_min = cur[0];
    for (size_t j = 1; j <= lb; j++) {
      size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
      size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
      size_t m = sub < del ? sub : del;
      if (ins < m) m = ins;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && pp[j - 2] + 1 < m) m = pp[j - 2] + 1;
      cur[j] = m;
      if (m < row_min) row_min = m;
    }
    if (row_min > limit + 1) { /* later rows can only lose one to a swap */
      out = limit + 1;
      break;
    }
    size_t *t = pp;
    pp = prev;
    prev = cur;
    cur = t;
  }
  if (!out) out = prev[lb] > limit ? limit + 1 : prev[lb];
  free(rows);
  return out;
}

static const char *last_component(const char *s) {
  const char *p = strrchr(s, '/');
  return p ? p + 1 : s;
}

/* The score of candidate c for pattern p (lower is closer), or (size_t)-1
 * when it is not close. */
static size_t score(const char *p, size_t lit, int glob, const char *c) {
  size_t lc = strlen(c);
  size_t limit = lit / 4;
  if (limit < 1) limit = 1;
  if (limit > 4) limit = 4;
  size_t d = limit + 1;
  if (!glob) {
    d = cairn__edit_distance(p, lit, c, lc, limit);
  } else {
    /* the literal part against the candidate's beginning, one shorter to
       one longer ("dnse/" and "dense/") */
    for (size_t k = lit > 0 ? lit - 1 : 0; k <= lit + 1 && k <= lc; k++) {
      size_t dk = cairn__edit_distance(p, lit, c, k, limit);
      if (dk < d) d = dk;
    }
  }
  if (d <= limit) return d;
  /* "x" and the TF2 key "x/.ATTRIBUTES/VARIABLE_VALUE" */
  if (!glob && lc > lit && strncmp(c, p, lit) == 0 && c[lit] == '/') return limit + 1;
  /* the same last component under another scope */
  if (!glob && strchr(p, '/') && strcmp(last_component(p), last_component(c)) == 0) return limit + 2;
  return (size_t)-1;
}

size_t cairn__suggest(const char *pattern, cairn__name_at_fn at, const void *ctx, size_t n, size_t max, char *buf,
                      size_t cap) {
  enum { MAXN = 4 };
  if (cap) buf[0] = '\0';
  if (!pattern || !cap || max == 0) return 0;
  if (max > MAXN) max = MAXN;
  size_t lit = strcspn(pattern, "*?[");
  int glob = pattern[lit] != '\0';
  if (glob && lit == 0) return 0; /* "*x": nothing literal to compare */
  const char *best[MAXN];
  size_t best_s[MAXN], k = 0;
  for (size_t i = 0; i < n; i++) {
    const char *c = at(ctx, i);
    if (!c || strcmp(c, pattern) == 0) continue;
    size_t s = score(pattern, lit, glob, c);
    if (s == (size_t)-1) continue;
    int dup = 0;
    for (size_t j = 0; j < k && !dup; j++) dup = strcmp(best[j], c) == 0;
    if (dup) continue;
    /* insert in order of score, first seen first among equals */
    size_t pos = k;
    while (pos > 0 && best_s[pos - 1] > s) pos--;
    if (pos >= max) continue;
    if (k < max) k++;
    for (size_t j = k - 1; j > pos; j--) {
      best[j] = best[j - 1];
      best_s[j] = best_s[j - 1];
    }
    best[pos] = c;
    best_s[pos] = s;
  }
  if (!k) return 0;
  size_t used = (size_t)snprintf(buf, cap, " (did you mean ");
  for (size_t j = 0; j < k && used < cap; j++)
    used += (size_t)snprintf(buf + used, cap - used, "%s'%.200s'", j == 0 ? "" : j + 1 == k ? " or " : ", ",
                             best[j]);
  if (used < cap) snprintf(buf + used, cap - used, "?)");
  return k;
}
