/* ckpt-inspect's UTF-8 decoder (its escaped and JSON output). The tools
 * use only the public API, and decoding text is not the library's
 * business, so they keep their own; the library's check
 * of names and strings is cairn__ck_utf8_ok (lib/ckpt_format.c). */
#ifndef CAIRN_TOOLS_CKPT_INSPECT_UTF8_H
#define CAIRN_TOOLS_CKPT_INSPECT_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Decodes one UTF-8 code point of s[0..len) (len ≥ 1) into *cp; returns its
 * length, or 0 if invalid (overlong, surrogate, above U+10FFFF, truncated). */
static inline size_t utf8_decode(const unsigned char *s, size_t len, uint32_t *cp) {
  unsigned c = s[0];
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  size_t n;
  uint32_t v, min;
  if ((c & 0xE0) == 0xC0) {
    n = 2; v = c & 0x1F; min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3; v = c & 0x0F; min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4; v = c & 0x07; min = 0x10000;
  } else {
    return 0;
  }
  if (n > len) return 0;
  for (size_t i = 1; i < n; i++) {
    if ((s[i] & 0xC0) != 0x80) return 0;
    v = (v << 6) | (s[i] & 0x3F);
  }
  if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
  *cp = v;
  return n;
}

#endif
