/* ckpt-inspect meta CKPT: the metadata key-values with their types. */
#define _POSIX_C_SOURCE 200809L

#include "common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *meta_type_name(cairn_meta_type t) {
  switch (t) {
    case CAIRN_META_U64: return "u64";
    case CAIRN_META_I64: return "i64";
    case CAIRN_META_F64: return "f64";
    case CAIRN_META_BOOL: return "bool";
    case CAIRN_META_STR: return "str";
    case CAIRN_META_BYTES: return "bytes";
  }
  return "?";
}

#define META_HEX_SHOWN 32

int cmd_meta(const options *o, const char *const *args) {
  char path[4096];
  cairn_ckpt *c = open_arg(args[0], path, sizeof path); /* CKPT */
  if (!c) return EXIT_ERROR;
  size_t n = cairn_ckpt_meta_count(c);
  int major, minor;
  cairn_ckpt_version(c, &major, &minor);
  size_t wk = 3;
  for (size_t i = 0; i < n; i++) {
    const char *key;
    cairn_meta_type ty;
    if (cairn_ckpt_meta_at(c, i, &key, &ty) == CAIRN_OK && esc_width(key) > wk) wk = esc_width(key);
  }
  if (o->json) {
    fputs("{\"file\": ", stdout);
    json_str(stdout, path);
    printf(", \"format_version\": \"%d.%d\", \"tensor_count\": %zu, \"meta\": [", major, minor,
           cairn_ckpt_count(c));
  } else {
    printf("# ");
    put_esc(stdout, path);
    char fl[80];
    printf(": %s, %zu tensor%s, %zu metadata key%s\n", format_label(c, fl, sizeof fl), cairn_ckpt_count(c),
           cairn_ckpt_count(c) == 1 ? "" : "s", n, n == 1 ? "" : "s");
  }
  int rc = EXIT_OK_;
  for (size_t i = 0; i < n; i++) {
    const char *key;
    cairn_meta_type ty;
    cairn_status s = cairn_ckpt_meta_at(c, i, &key, &ty);
    if (s != CAIRN_OK) {
      error_status(path, s);
      rc = EXIT_ERROR;
      break;
    }
    uint64_t u = 0;
    int64_t iv = 0;
    double d = 0;
    int bv = 0;
    const char *str = NULL;
    const void *bytes = NULL;
    size_t blen = 0;
    switch (ty) {
      case CAIRN_META_U64: s = cairn_ckpt_meta_u64(c, key, &u); break;
      case CAIRN_META_I64: s = cairn_ckpt_meta_i64(c, key, &iv); break;
      case CAIRN_META_F64: s = cairn_ckpt_meta_f64(c, key, &d); break;
      case CAIRN_META_BOOL: s = cairn_ckpt_meta_bool(c, key, &bv); break;
      case CAIRN_META_STR: s = cairn_ckpt_meta_str(c, key, &str); break;
      case CAIRN_META_BYTES: s = cairn_ckpt_meta_bytes(c, key, &bytes, &blen); break;
      default: s = CAIRN_E_FORMAT; break;
    }
    if (s != CAIRN_OK) {
      size_t wl = strlen(path) + strlen(key) + 32;
      char *what = malloc(wl);
      if (what) snprintf(what, wl, "%s: metadata '%s'", path, key);
      error_status(what ? what : path, s);
      free(what);
      rc = EXIT_ERROR;
      break;
    }
    char num[64];
    if (o->json) {
      fputs(i ? ",\n  {\"key\": " : "\n  {\"key\": ", stdout);
      json_str(stdout, key);
      printf(", \"type\": \"%s\", \"value\": ", meta_type_name(ty));
      switch (ty) {
        case CAIRN_META_U64: printf("%llu", (unsigned long long)u); break;
        case CAIRN_META_I64: printf("%lld", (long long)iv); break;
        case CAIRN_META_F64:
          if (isfinite(d))
            json_num(stdout, d);
          else
            printf("\"%s\"", isnan(d) ? "nan" : d < 0 ? "-inf" : "inf");
          break;
        case CAIRN_META_BOOL: fputs(bv ? "true" : "false", stdout); break;
        case CAIRN_META_STR: json_str(stdout, str); break;
        case CAIRN_META_BYTES:
          fputc('"', stdout);
          for (size_t k = 0; k < blen; k++) printf("%02x", ((const unsigned char *)bytes)[k]);
          printf("\", \"length\": %zu", blen);
          break;
      }
      fputc('}', stdout);
    } else {
      put_esc_padded(stdout, key, wk);
      printf("  %-5s  ", meta_type_name(ty));
      switch (ty) {
        case CAIRN_META_U64: printf("%llu", (unsigned long long)u); break;
        case CAIRN_META_I64: printf("%lld", (long long)iv); break;
        case CAIRN_META_F64:
          fmt_shortest(num, sizeof num, d, CAIRN_DTYPE_F64);
          fputs(num, stdout);
          break;
        case CAIRN_META_BOOL: fputs(bv ? "true" : "false", stdout); break;
        case CAIRN_META_STR:
          fputc('"', stdout);
          put_esc(stdout, str);
          fputc('"', stdout);
          break;
        case CAIRN_META_BYTES: {
          size_t shown = o->all || blen <= META_HEX_SHOWN ? blen : META_HEX_SHOWN;
          printf("[%zu bytes] ", blen);
          for (size_t k = 0; k < shown; k++) printf("%02x", ((const unsigned char *)bytes)[k]);
          if (shown < blen) printf("... (truncated; --all shows every byte)");
          break;
        }
      }
      fputc('\n', stdout);
    }
  }
  if (o->json) printf("%s]}\n", n ? "\n" : "");
  cairn_ckpt_close(c);
  return rc;
}
