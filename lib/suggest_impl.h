/* "Did you mean ...?" for names and patterns that matched nothing: the
 * candidates closest to a misspelled variable name, glob or checkpoint key
 * (lib/name_suggest.c). Never installed. */
#ifndef CAIRN_SUGGEST_IMPL_H
#define CAIRN_SUGGEST_IMPL_H

#include <stddef.h>

/* Candidate i of a list, or NULL to skip it. */
typedef const char *(*cairn__name_at_fn)(const void *ctx, size_t i);

/* Writes to buf (cap bytes, always NUL-terminated) " (did you mean 'a'?)"
 * or " (did you mean 'a' or 'b'?)" naming at most `max` of the n
 * candidates closest to `pattern`, or "" when none is close. Close means:
 * within a small edit distance (a quarter of the length, at least 1,
 * at most 4) of the pattern — for a glob, of its literal part before the
 * first '*', '?' or '[' compared with the same length of the candidate —;
 * or the candidate is the pattern followed by '/' and more (a TF2 key
 * "x/.ATTRIBUTES/VARIABLE_VALUE" for "x"); or both end with the same last
 * '/' component ("dense/kernel" for "dense_9/kernel"). Returns the
 * number named. */
size_t cairn__suggest(const char *pattern, cairn__name_at_fn at, const void *ctx, size_t n, size_t max, char *buf,
                      size_t cap);

/* Levenshtein distance of a[0..la) and b[0..lb), or limit + 1 when it
 * exceeds limit. */
size_t cairn__edit_distance(const char *a, size_t la, const char *b, size_t lb, size_t limit);

#endif
