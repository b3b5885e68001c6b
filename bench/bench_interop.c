/* bench_interop: reading a TensorFlow bundle and a safetensors file into
 * existing tensors, next to a plain read of the same bytes.
 *
 *   bench_interop [--threads T] [--repeats R] [--quick] [--no-machine]
 *
 * The model: 107 MB of f32 in four tensors (a 784-... MLP is far smaller;
 * this is the size the readers are held to). Both files are written once
 * into $TMPDIR and read once before timing (hot page cache). Each round
 * times, in turn: pread of the file's tensor bytes into one buffer (the
 * plain read), cairn_ckpt_open + cairn_ckpt_read of every tensor +
 * close for the safetensors file, the same for the bundle (which checks
 * every tensor's CRC32C). Ratios: plain-read time / format time, per round
 * (1.0: as fast as the plain read). */
#define _GNU_SOURCE 1
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_common.h"
#include "cairn.h"

#define NT 4

static cairn_tensor *tens[NT];
static const char *names[NT] = {"dense/kernel", "dense/kernel/Adam", "dense/kernel/Adam_1", "dense_1/kernel"};

static void die(const char *what) {
  fprintf(stderr, "bench_interop: %s: %s\n", what, cairn_errmsg());
  exit(1);
}

static double read_all(const char *path) {
  double t0 = bench_now();
  cairn_ckpt *c;
  if (cairn_ckpt_open(path, NULL, &c)) die(path);
  for (int i = 0; i < NT; i++)
    if (cairn_ckpt_read(c, names[i], tens[i])) die("read");
  cairn_ckpt_close(c);
  return bench_now() - t0;
}

static double plain(const char *file, off_t off, void *buf, size_t n) {
  double t0 = bench_now();
  int fd = open(file, O_RDONLY);
  size_t done = 0;
  while (fd >= 0 && done < n) {
    ssize_t r = pread(fd, (char *)buf + done, n - done, off + (off_t)done);
    if (r <= 0) break;
    done += (size_t)r;
  }
  if (fd >= 0) close(fd);
  if (done != n) die(file);
  return bench_now() - t0;
}

int main(int argc, char **argv) {
  bench_opts o;
  if (bench_begin("interop", &argc, argv, &o)) return 2;
  if (o.quick && o.repeats > 3) o.repeats = 3;
  const char *base = getenv("TMPDIR");
  char dir[4096], st[4200], tf[4200], shard[4300];
  snprintf(dir, sizeof dir, "%s/cairn-bench-interop.XXXXXX", base && *base ? base : "/tmp");
  if (!mkdtemp(dir)) die("mkdtemp");
  snprintf(st, sizeof st, "%s/m.safetensors", dir);
  snprintf(tf, sizeof tf, "%s/m", dir);
  snprintf(shard, sizeof shard, "%s/m.data-00000-of-00001", dir);
  /* 107,000,000 bytes: four (1000, 6687) + (1000, 6688)-ish f32 tensors. */
  const int64_t rows = 1000, total_floats = 107000000 / 4;
  size_t bytes = 0;
  for (int i = 0; i < NT; i++) {
    int64_t sh[2] = {rows, (total_floats / NT) / rows};
    if (cairn_tensor_new(CAIRN_DTYPE_F32, 2, sh, &tens[i])) die("tensor");
    float *p = cairn_tensor_f32(tens[i]);
    for (int64_t k = 0; k < tens[i]->size; k++) p[k] = (float)(k % 1000) * 0.001f + (float)i;
    bytes += cairn_tensor_nbytes(tens[i]);
  }
  cairn_safetensors_writer *sw;
  cairn_tfbundle_writer *tw;
  if (cairn_safetensors_writer_open(st, &sw)) die("safetensors open");
  if (cairn_tfbundle_writer_open(tf, &tw)) die("tf open");
  for (int i = 0; i < NT; i++)
    if (cairn_safetensors_writer_add(sw, names[i], tens[i]) || cairn_tfbundle_writer_add(tw, names[i], tens[i]))
      die("add");
  if (cairn_safetensors_writer_commit(sw) || cairn_tfbundle_writer_commit(tw)) die("commit");
  /* The safetensors data region starts after the 8-byte length and the header. */
  unsigned char lb[8];
  int fd = open(st, O_RDONLY);
  if (fd < 0 || pread(fd, lb, 8, 0) != 8) die(st);
  close(fd);
  uint64_t hl = 0;
  for (int i = 0; i < 8; i++) hl |= (uint64_t)lb[i] << (8 * i);
  void *buf = bench_alloc(bytes);
  double pst[BENCH_MAX_REPEATS], pt[BENCH_MAX_REPEATS], tst[BENCH_MAX_REPEATS], ttf[BENCH_MAX_REPEATS],
      rst[BENCH_MAX_REPEATS], rtf[BENCH_MAX_REPEATS];
  for (int r = -1; r < o.repeats; r++) { /* round -1 warms the page cache */
    double a = plain(st, (off_t)(8 + hl), buf, bytes), b = read_all(st);
    double c = plain(shard, 0, buf, bytes), d = read_all(tf);
    if (r < 0) continue;
    pst[r] = (double)bytes / a / 1e6, tst[r] = (double)bytes / b / 1e6, rst[r] = a / b;
    pt[r] = (double)bytes / c / 1e6, ttf[r] = (double)bytes / d / 1e6, rtf[r] = c / d;
  }
  bench_section("interop: 107 MB of f32 into existing tensors, hot cache");
  char p[128];
  snprintf(p, sizeof p, "\"bytes\": %zu, \"tensors\": %d", bytes, NT);
  bench_emit("plain_read_safetensors_bytes", p, bench_stats_of(pst, o.repeats), "MB/s", 0, NULL);
  bench_emit("safetensors_read", p, bench_stats_of(tst, o.repeats), "MB/s", bench_stats_of(rst, o.repeats).median,
             "plain_read_safetensors_bytes");
  bench_emit("plain_read_tf_shard", p, bench_stats_of(pt, o.repeats), "MB/s", 0, NULL);
  bench_emit("tfbundle_read_crc", p, bench_stats_of(ttf, o.repeats), "MB/s", bench_stats_of(rtf, o.repeats).median,
             "plain_read_tf_shard");
  unlink(st);
  unlink(shard);
  char idx[4300];
  snprintf(idx, sizeof idx, "%s.index", tf);
  unlink(idx);
  rmdir(dir);
  for (int i = 0; i < NT; i++) cairn_tensor_free(tens[i]);
  return 0;
}
