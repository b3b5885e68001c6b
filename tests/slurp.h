/* slurp: a whole file in a malloc'd buffer for a test to inspect, with one
 * byte more holding a NUL (text files read as strings). *n gets the length
 * when n is not NULL. A missing or unreadable file fails the test. Include
 * after criterion.h. */
#ifndef CAIRN_TESTS_SLURP_H
#define CAIRN_TESTS_SLURP_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "open '%s': %s", path, strerror(errno));
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  cr_assert(len >= 0, "'%s': cannot tell its size", path);
  unsigned char *b = malloc((size_t)len + 1);
  cr_assert_not_null(b);
  cr_assert_eq(fread(b, 1, (size_t)len, f), (size_t)len, "'%s': short read", path);
  fclose(f);
  b[len] = '\0';
  if (n) *n = (size_t)len;
  return b;
}

#endif
