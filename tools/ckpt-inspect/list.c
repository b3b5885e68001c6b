/* ckpt-inspect list CKPT: the tensors, one line each (or --json). */
#define _POSIX_C_SOURCE 200809L

#include "common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int cmd_list(const options *o, const char *const *args) {
  char path[4096];
  cairn_ckpt *c = open_arg(args[0], path, sizeof path); /* CKPT */
  if (!c) return EXIT_ERROR;
  size_t n = cairn_ckpt_count(c);
  cairn_ckpt_entry *es = calloc(n ? n : 1, sizeof *es);
  if (!es) {
    errorf("out of memory");
    cairn_ckpt_close(c);
    return EXIT_ERROR;
  }
  for (size_t i = 0; i < n; i++) {
    cairn_status s = cairn_ckpt_entry_at(c, i, &es[i]);
    if (s != CAIRN_OK) {
      error_status(path, s);
      free(es);
      cairn_ckpt_close(c);
      return EXIT_ERROR;
    }
  }
  int major, minor;
  cairn_ckpt_version(c, &major, &minor);
  uint64_t raw = 0, stored = 0;
  for (size_t i = 0; i < n; i++) {
    raw += es[i].raw_bytes;
    stored += es[i].stored_bytes;
  }
  if (o->json) {
    fputs("{\"file\": ", stdout);
    json_str(stdout, path);
    printf(", \"format_version\": \"%d.%d\", \"tensor_count\": %zu, \"raw_bytes\": %llu, "
           "\"stored_bytes\": %llu, \"tensors\": [",
           major, minor, n, (unsigned long long)raw, (unsigned long long)stored);
    for (size_t i = 0; i < n; i++) {
      const cairn_ckpt_entry *e = &es[i];
      fputs(i ? ",\n  {\"name\": " : "\n  {\"name\": ", stdout);
      json_str(stdout, e->name);
      printf(", \"dtype\": \"%s\", \"shape\": ", dtype_str(e->dtype));
      json_shape(stdout, e->rank, e->shape);
      printf(", \"raw_bytes\": %llu, \"stored_bytes\": %llu, \"ratio\": ", (unsigned long long)e->raw_bytes,
             (unsigned long long)e->stored_bytes);
      json_num(stdout, e->stored_bytes ? (double)e->raw_bytes / (double)e->stored_bytes : NAN);
      char cd[64];
      printf(", \"crc32c\": \"%08x\", \"chunks\": %u, \"layout\": \"%s\", \"codecs\": \"%s\"}",
             (unsigned)e->raw_crc32c, (unsigned)e->n_chunks, e->n_chunks == 0 && e->raw_bytes ? "aligned" : "chunked",
             codec_str(c, e->name, cd, sizeof cd));
    }
    printf("%s]}\n", n ? "\n" : "");
  } else {
    size_t wn = 4, wd = 5, ws = 5;
    char b[256];
    for (size_t i = 0; i < n; i++) {
      size_t w = esc_width(es[i].name);
      if (w > wn) wn = w;
      if (strlen(dtype_str(es[i].dtype)) > wd) wd = strlen(dtype_str(es[i].dtype));
      shape_str(b, sizeof b, es[i].rank, es[i].shape);
      if (strlen(b) > ws) ws = strlen(b);
    }
    printf("# ");
    put_esc(stdout, path);
    char fl[80];
    printf(": %s, %zu tensor%s\n", format_label(c, fl, sizeof fl), n, n == 1 ? "" : "s");
    printf("%-*s  %-*s  %-*s  %12s  %12s  %7s  %-8s  %-7s  %s\n", (int)wn, "NAME", (int)wd, "DTYPE", (int)ws, "SHAPE",
           "RAW", "STORED", "RATIO", "CRC32C", "CHUNKS", "CODEC");
    for (size_t i = 0; i < n; i++) {
      const cairn_ckpt_entry *e = &es[i];
      char shp[256], rt[32], ch[24];
      shape_str(shp, sizeof shp, e->rank, e->shape);
      ratio_str(rt, sizeof rt, e->raw_bytes, e->stored_bytes);
      if (e->n_chunks == 0 && e->raw_bytes)
        snprintf(ch, sizeof ch, "aligned");
      else
        snprintf(ch, sizeof ch, "%u", (unsigned)e->n_chunks);
      char cd[64];
      put_esc_padded(stdout, e->name, wn);
      printf("  %-*s  %-*s  %12llu  %12llu  %7s  %08x  %-7s  %s\n", (int)wd, dtype_str(e->dtype), (int)ws, shp,
             (unsigned long long)e->raw_bytes, (unsigned long long)e->stored_bytes, rt,
             (unsigned)e->raw_crc32c, ch, codec_str(c, e->name, cd, sizeof cd));
    }
    char rt[32];
    ratio_str(rt, sizeof rt, raw, stored);
    printf("# total: %zu tensor%s, %llu raw bytes, %llu stored bytes, ratio %s\n", n, n == 1 ? "" : "s",
           (unsigned long long)raw, (unsigned long long)stored, rt);
  }
  free(es);
  cairn_ckpt_close(c);
  return EXIT_OK_;
}
