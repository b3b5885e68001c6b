/* Writes tests/data/inspect-meta.ckpt, the fixture of tests/ckpt-inspect.sh
 * that `ckpt-inspect import` cannot make: a bf16 tensor and metadata of
 * every type (a string with control characters among them). Not built by
 * make; run once with the library's own writer and commit the output:
 *   cc -std=c11 -Iinclude tests/data/inspect-meta-gen.c -o /tmp/gen \
 *      -L<builddir>/.libs -lcairn && LD_LIBRARY_PATH=<builddir>/.libs \
 *      /tmp/gen tests/data/inspect-meta.ckpt
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cairn.h>

static uint16_t bf16(float f) { /* round to nearest even */
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((x >> 16) | 0x40u);
  return (uint16_t)((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

#define CHECK(call)                                                                    \
  do {                                                                                 \
    cairn_status s_ = (call);                                                          \
    if (s_ != CAIRN_OK) {                                                              \
      fprintf(stderr, "%s: %s: %s\n", #call, cairn_status_str(s_), cairn_errmsg()); \
      return 1;                                                                        \
    }                                                                                  \
  } while (0)

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s OUT\n", argv[0]);
    return 2;
  }
  const float v[6] = {1.0f, -2.5f, 3.14159f, 1e-3f, INFINITY, NAN};
  uint16_t h[6];
  for (int i = 0; i < 6; i++) h[i] = bf16(v[i]);
  int64_t shape[2] = {2, 3};
  cairn_tensor t;
  CHECK(cairn_tensor_view(&t, h, CAIRN_DTYPE_BF16, 2, shape));
  cairn_ckpt_write_options o;
  memset(&o, 0, sizeof o);
  o.compress = CAIRN_CKPT_COMPRESS_NONE;
  o.no_fsync = 1;
  cairn_ckpt_writer *w;
  CHECK(cairn_ckpt_writer_open(argv[1], &o, &w));
  CHECK(cairn_ckpt_writer_add(w, "w_bf16", &t));
  unsigned char rng[40];
  for (int i = 0; i < 40; i++) rng[i] = (unsigned char)i;
  CHECK(cairn_ckpt_writer_meta_u64(w, "global_step", 1000));
  CHECK(cairn_ckpt_writer_meta_i64(w, "offset", -42));
  CHECK(cairn_ckpt_writer_meta_f64(w, "lr", 0.001));
  CHECK(cairn_ckpt_writer_meta_bool(w, "done", 1));
  CHECK(cairn_ckpt_writer_meta_str(w, "note", "evil\033[31mred\nline\xe2\x80\xae"));
  CHECK(cairn_ckpt_writer_meta_bytes(w, "rng", rng, sizeof rng));
  CHECK(cairn_ckpt_writer_commit(w));
  return 0;
}
