/* bench_restore: Saver save and restore of a large model next to a plain
 * read of the same bytes from the page cache, with the peak memory of each.
 *
 *   bench_restore [--size S] [--rounds R] [--dir D] [--threads T]
 *
 * The model: ceil(S / 64 MiB) f32 variables of (4096, 4096), uniform noise
 * (which does not compress: every chunk is stored raw, as most trained
 * weights are). S takes a K, M or G suffix (binary units); default 256M.
 * Every measurement runs in a fresh child process (fork), so that its peak
 * RSS (VmHWM of /proc/self/status) is its own:
 *   save        cairn_saver_save with the default options (CRC32C, LZ4
 *               tried per chunk, fsync of file and directory, atomic rename)
 *   read_hot    open() + read() of the checkpoint file into a pre-touched
 *               buffer of its size (the page cache holds it after the save)
 *   restore     cairn_saver_restore (strict) into pre-touched variables
 * Per round the save comes first, then read_hot and restore in an order
 * that alternates every round (the machine is shared). Figures:
 *   secs, gbps (10^9 bytes of variables per second), peak_rss_mib (VmHWM),
 *   extra_mib (VmHWM minus the RSS just before the timed call: what the
 *   call itself added), over_vars_mib (VmHWM minus the variables' bytes:
 *   the measure, includes the program's own few MiB).
 * One JSON object per line (JSON Lines): one per measurement and round,
 * then a summary with the medians, restore/read_hot and the targets:
 * restore extra ≤ max(64 MiB, the largest tensor), restore ≥ 0.5× read_hot.
 * The file is removed at the end. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cairn/runtime.h>
#include <cairn/saver.h>
#include <cairn/status.h>
#include <cairn/tensor.h>
#include <cairn/var.h>

#define DIM 4096
#define VAR_BYTES ((uint64_t)DIM * DIM * sizeof(float))
#define MAX_ROUNDS 50

typedef struct result {
  int ok;
  double secs;
  long hwm_kb, before_kb;
  char err[400];
} result;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static long status_kb(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long v = -1;
  size_t kl = strlen(key);
  while (fgets(line, sizeof line, f))
    if (strncmp(line, key, kl) == 0 && line[kl] == ':') v = strtol(line + kl + 1, NULL, 10);
  fclose(f);
  return v;
}

static int g_nvars, g_threads;
static char g_prefix[1100], g_path[1100];

/* The model: n variables var000.. of (4096, 4096), initialized (touched). */
static cairn_registry *model(result *r) {
  cairn_registry *reg = NULL;
  if (cairn_registry_new(7, &reg)) return NULL;
  for (int i = 0; i < g_nvars; i++) {
    char name[32];
    snprintf(name, sizeof name, "layer%03d/kernel", i);
    int64_t shape[2] = {DIM, DIM};
    cairn_var *v;
    if (cairn_var_new(reg, name, CAIRN_DTYPE_F32, 2, shape, cairn_init_uniform(-1, 1), CAIRN_COLL_GLOBAL, &v) ||
        cairn_var_initialize(v)) {
      snprintf(r->err, sizeof r->err, "model: %s", cairn_errmsg());
      cairn_registry_free(reg);
      return NULL;
    }
  }
  return reg;
}

static void child_save(result *r) {
  cairn_registry *reg = model(r);
  if (!reg) return;
  cairn_saver *s = NULL;
  cairn_saver_options o = cairn_saver_options_default();
  o.max_to_keep = 0;
  if (cairn_saver_new(reg, &o, &s)) {
    snprintf(r->err, sizeof r->err, "saver_new: %s", cairn_errmsg());
    return;
  }
  unlink(g_path);
  char out[1200];
  r->before_kb = status_kb("VmRSS");
  double t0 = now();
  cairn_status st = cairn_saver_save(s, g_prefix, -1, out, sizeof out);
  r->secs = now() - t0;
  r->hwm_kb = status_kb("VmHWM");
  if (st) snprintf(r->err, sizeof r->err, "save: %s", cairn_errmsg());
  else r->ok = 1;
  cairn_saver_free(s);
  cairn_registry_free(reg);
}

static void child_read(result *r) {
  struct stat sb;
  if (stat(g_path, &sb) != 0) {
    snprintf(r->err, sizeof r->err, "stat %.300s: %s", g_path, strerror(errno));
    return;
  }
  size_t n = (size_t)sb.st_size;
  unsigned char *buf = cairn_alloc(n);
  if (!buf) {
    snprintf(r->err, sizeof r->err, "out of memory");
    return;
  }
  memset(buf, 1, n);
  r->before_kb = status_kb("VmRSS");
  double t0 = now();
  int fd = open(g_path, O_RDONLY);
  size_t got = 0;
  while (fd >= 0 && got < n) {
    ssize_t k = read(fd, buf + got, n - got > (1u << 30) ? (1u << 30) : n - got);
    if (k <= 0) break;
    got += (size_t)k;
  }
  if (fd >= 0) close(fd);
  r->secs = now() - t0;
  r->hwm_kb = status_kb("VmHWM");
  if (got != n) snprintf(r->err, sizeof r->err, "read %.300s: %zu of %zu bytes", g_path, got, n);
  else r->ok = 1;
  cairn_free(buf);
}

static void child_restore(result *r) {
  cairn_registry *reg = model(r);
  if (!reg) return;
  cairn_saver *s = NULL;
  if (cairn_saver_new(reg, NULL, &s)) {
    snprintf(r->err, sizeof r->err, "saver_new: %s", cairn_errmsg());
    return;
  }
  r->before_kb = status_kb("VmRSS");
  double t0 = now();
  cairn_status st = cairn_saver_restore(s, g_path, NULL);
  r->secs = now() - t0;
  r->hwm_kb = status_kb("VmHWM");
  if (st) snprintf(r->err, sizeof r->err, "restore: %s", cairn_errmsg());
  else r->ok = 1;
  cairn_saver_free(s);
  cairn_registry_free(reg);
}

static result run_child(void (*fn)(result *)) {
  result r;
  memset(&r, 0, sizeof r);
  int p[2];
  if (pipe(p) != 0) {
    snprintf(r.err, sizeof r.err, "pipe: %s", strerror(errno));
    return r;
  }
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    result c;
    memset(&c, 0, sizeof c);
    if (g_threads > 0 && cairn_set_num_threads(g_threads)) snprintf(c.err, sizeof c.err, "threads: %s", cairn_errmsg());
    else fn(&c);
    ssize_t w = write(p[1], &c, sizeof c);
    _exit(w == (ssize_t)sizeof c ? 0 : 1);
  }
  close(p[1]);
  if (pid < 0 || read(p[0], &r, sizeof r) != (ssize_t)sizeof r) {
    memset(&r, 0, sizeof r);
    snprintf(r.err, sizeof r.err, "child failed");
  }
  close(p[0]);
  if (pid > 0) waitpid(pid, NULL, 0);
  return r;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static uint64_t parse_size(const char *s) {
  char *end;
  double v = strtod(s, &end);
  uint64_t m = 1;
  if (*end == 'K' || *end == 'k') m = 1024;
  else if (*end == 'M' || *end == 'm') m = 1024 * 1024;
  else if (*end == 'G' || *end == 'g') m = 1024ull * 1024 * 1024;
  return v > 0 ? (uint64_t)(v * (double)m) : 0;
}

int main(int argc, char **argv) {
  uint64_t size = 256ull << 20;
  int rounds = 3;
  const char *dir = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--size") && i + 1 < argc) size = parse_size(argv[++i]);
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--dir") && i + 1 < argc) dir = argv[++i];
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) g_threads = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: %s [--size S[K|M|G]] [--rounds R] [--dir D] [--threads T]\n", argv[0]);
      return 2;
    }
  }
  if (size == 0 || rounds < 1 || rounds > MAX_ROUNDS) {
    fprintf(stderr, "bench_restore: bad --size or --rounds (1..%d)\n", MAX_ROUNDS);
    return 2;
  }
  g_nvars = (int)((size + VAR_BYTES - 1) / VAR_BYTES);
  uint64_t vbytes = (uint64_t)g_nvars * VAR_BYTES;
  if (!dir) dir = getenv("TMPDIR");
  if (!dir || !*dir) dir = ".";
  char tmpl[1024];
  snprintf(tmpl, sizeof tmpl, "%.990s/bench-restore.XXXXXX", dir);
  if (!mkdtemp(tmpl)) {
    fprintf(stderr, "bench_restore: mkdtemp %s: %s\n", tmpl, strerror(errno));
    return 1;
  }
  snprintf(g_prefix, sizeof g_prefix, "%s/model.ckpt", tmpl);
  snprintf(g_path, sizeof g_path, "%s", g_prefix); /* step -1: no "-<step>" suffix */
  static const char *const names[3] = {"save", "read_hot", "restore"};
  void (*fns[3])(result *) = {child_save, child_read, child_restore};
  double secs[3][MAX_ROUNDS], extra[3][MAX_ROUNDS], over[3][MAX_ROUNDS], ratio[MAX_ROUNDS];
  int fail = 0;
  for (int r = 0; r < rounds && !fail; r++) {
    int order[3] = {0, r % 2 ? 2 : 1, r % 2 ? 1 : 2};
    for (int k = 0; k < 3 && !fail; k++) {
      int m = order[k];
      result res = run_child(fns[m]);
      if (!res.ok) {
        fprintf(stderr, "bench_restore: %s: %s\n", names[m], res.err);
        fail = 1;
        break;
      }
      secs[m][r] = res.secs;
      extra[m][r] = (double)(res.hwm_kb - res.before_kb) / 1024.0;
      over[m][r] = (double)res.hwm_kb / 1024.0 - (double)vbytes / 1048576.0;
      printf("{\"suite\": \"restore\", \"name\": \"%s\", \"round\": %d, \"size_bytes\": %llu, \"n_vars\": %d, "
             "\"threads\": %d, \"secs\": %.4f, \"gbps\": %.3f, \"peak_rss_mib\": %.1f, \"extra_mib\": %.1f, "
             "\"over_vars_mib\": %.1f}\n",
             names[m], r, (unsigned long long)vbytes, g_nvars, cairn_get_num_threads(), res.secs,
             (double)vbytes / res.secs / 1e9, (double)res.hwm_kb / 1024.0, extra[m][r], over[m][r]);
    }
    if (!fail) ratio[r] = secs[1][r] / secs[2][r];
  }
  unlink(g_path);
  char state[4200];
  snprintf(state, sizeof state, "%.4000s/checkpoint", tmpl); /* the Saver's state file */
  unlink(state);
  rmdir(tmpl);
  if (fail) return 1;
  double med[3], medx[3], medo[3];
  for (int m = 0; m < 3; m++) {
    med[m] = median(secs[m], rounds);
    medx[m] = median(extra[m], rounds);
    medo[m] = median(over[m], rounds);
  }
  double rr = median(ratio, rounds), bound = VAR_BYTES > (64u << 20) ? (double)VAR_BYTES / 1048576.0 : 64.0;
  printf("{\"suite\": \"restore\", \"name\": \"summary\", \"size_bytes\": %llu, \"n_vars\": %d, \"rounds\": %d, "
         "\"save_secs\": %.4f, \"save_gbps\": %.3f, \"save_extra_mib\": %.1f, "
         "\"read_hot_secs\": %.4f, \"read_hot_gbps\": %.3f, "
         "\"restore_secs\": %.4f, \"restore_gbps\": %.3f, \"restore_extra_mib\": %.1f, \"restore_over_vars_mib\": %.1f, "
         "\"restore_vs_read_hot\": %.3f, \"extra_bound_mib\": %.1f, \"extra_met\": %s, \"ratio_met\": %s}\n",
         (unsigned long long)vbytes, g_nvars, rounds, med[0], (double)vbytes / med[0] / 1e9, medx[0], med[1],
         (double)vbytes / med[1] / 1e9, med[2], (double)vbytes / med[2] / 1e9, medx[2], medo[2], rr, bound,
         medx[2] <= bound ? "true" : "false", rr >= 0.5 ? "true" : "false");
  return 0;
}
