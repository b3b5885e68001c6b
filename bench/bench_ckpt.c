/* bench_ckpt: checkpoint I/O next to the plain system calls it is built on,
 * on the same machine and in the same run, interleaved round by round (the
 * order alternates every round) because the machine is shared. Prints one
 * JSON object on one line (JSON Lines, as every bench output) with medians
 * over the rounds and the per-round figures.
 *
 *   bench_ckpt [--dir D] [--rounds R] [--small] [--no-sparse] [--no-adam] [--threads T]
 *   bench_ckpt --input CKPT [--input CKPT2 ...] [--dir D] [--rounds R]
 *
 * With --input, each given checkpoint's tensors are saved with the default
 * codec (LZ4) and with compact (byte planes + zstd), alternating, and
 * restored as a restore does (verify each tensor, then decode it in place);
 * one JSON line per input: whole-file ratio (raw tensor bytes / file size),
 * median save and verified-restore seconds, wall and CPU (of every thread:
 * run it with OMP_NUM_THREADS=1 on a shared machine), and the fp32/bf16
 * sign+exponent entropy limit (the lossless ceiling of byte-plane coding)
 * beside them.
 *
 * The tensor set is an MLP-like state of 26.8 M float32 (107.3 MB: kernels
 * (784, 4096), (4096, 4096), (4096, 1664), (1664, 10) and their biases),
 * filled with N(0, 1) noise, in one pre-touched 64-byte-aligned slab. Per
 * round:
 *   write_fsync   open(O_CREAT) + write() of the slab + fsync() + close()
 *   cairn_save    cairn_ckpt_writer_open/add/commit, default options
 *                 (compression AUTO, CRC32C everywhere, fsync of file and
 *                 directory, atomic rename)
 *   read_hot      open() + read() of the plain file into a pre-touched buffer
 *   cairn_load    cairn_ckpt_open + cairn_ckpt_read of every tensor into
 *                 pre-allocated, pre-touched tensors (every chunk and tensor
 *                 CRC checked) + close
 *   cairn_load_fresh  the same into tensors made by cairn_tensor_new in the
 *                 timed region (what torch.load pays: fresh memory)
 *   cairn_verify  cairn_ckpt_open + cairn_ckpt_verify + close
 *   sparse_save / sparse_load  the same shapes with 90 % zeros (LZ4 pays)
 *   adam_*        the Adam slots of the same variables (m and v, names
 *                 <var>/Adam and <var>/Adam_1, twice the bytes), filled by
 *                 four Adam moment updates from N(0, 0.01²) gradients:
 *                 plain write+fsync and hot read of the same bytes, cairn
 *                 save and verified load (byte-shuffle + LZ4 finds what
 *                 little there is to compress in m and v)
 * Files are removed before each write (not timed), so every write makes a
 * new file. MB are 10^6 bytes of tensor data. The directory is a fresh
 * one under --dir, else under $TMPDIR, else under the working directory;
 * its file system is reported ("tmpfs" makes fsync free).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include <cairn/ckpt.h>
#include <cairn/rng.h>
#include <cairn/runtime.h>
#include <cairn/status.h>
#include <cairn/tensor.h>

#define MAX_ROUNDS 100
#define N_VARS 8
#define MAX_TENSORS (2 * N_VARS)

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU seconds of the whole process (every thread): the figure that a
 * shared, loaded machine disturbs least. */
static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(const double *v, int n) {
  double s[MAX_ROUNDS];
  memcpy(s, v, (size_t)n * sizeof *v);
  qsort(s, (size_t)n, sizeof *s, cmp);
  return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

#define DIE(msg)                                                                                   \
  do {                                                                                             \
    fprintf(stderr, "bench_ckpt: %s: %s\n", msg, cairn_errmsg());                                  \
    exit(1);                                                                                       \
  } while (0)
#define DIE_ERRNO(msg)                                                                             \
  do {                                                                                             \
    fprintf(stderr, "bench_ckpt: %s: %s\n", msg, strerror(errno));                                 \
    exit(1);                                                                                       \
  } while (0)

typedef struct tset {
  int n;
  char name[MAX_TENSORS][48];
  int rank[MAX_TENSORS];
  int64_t shape[MAX_TENSORS][2];
  size_t off[MAX_TENSORS], bytes[MAX_TENSORS];
  size_t total;
} tset;

/* The MLP-like set of variables, or (slots) their Adam slots: m for every
 * variable, then v. --small divides the large dimensions by 16. */
static void tset_init(tset *s, int small, int slots) {
  static const char *names[N_VARS] = {"dense0/kernel", "dense0/bias", "dense1/kernel", "dense1/bias",
                                      "dense2/kernel", "dense2/bias", "dense3/kernel", "dense3/bias"};
  int64_t d = small ? 16 : 1;
  const int64_t dims[4][2] = {{784, 4096 / d}, {4096 / d, 4096}, {4096, 1664 / d}, {1664 / d, 10}};
  s->total = 0;
  s->n = slots ? 2 * N_VARS : N_VARS;
  for (int i = 0; i < s->n; i++) {
    const int v = i % N_VARS;
    snprintf(s->name[i], sizeof s->name[i], "%s%s", names[v], !slots ? "" : i < N_VARS ? "/Adam" : "/Adam_1");
    const int64_t *kd = dims[v / 2];
    if (v % 2 == 0) {
      s->rank[i] = 2;
      s->shape[i][0] = kd[0];
      s->shape[i][1] = kd[1];
    } else {
      s->rank[i] = 1;
      s->shape[i][0] = kd[1];
      s->shape[i][1] = 1;
    }
    s->bytes[i] = (size_t)(s->shape[i][0] * s->shape[i][1]) * sizeof(float);
    s->off[i] = s->total;
    s->total += s->bytes[i];
  }
}

static void views(const tset *s, unsigned char *slab, cairn_tensor *t) {
  for (int i = 0; i < s->n; i++)
    if (cairn_tensor_view(&t[i], slab + s->off[i], CAIRN_DTYPE_F32, s->rank[i], s->shape[i])) DIE("view");
}

static void fill(float *p, size_t n, uint64_t seed, int zero_pct) {
  cairn_rng r;
  cairn_rng_init(&r, seed, 11);
  for (size_t i = 0; i < n; i++)
    p[i] = zero_pct && (int)cairn_rng_below(&r, 100) < zero_pct ? 0.0f : cairn_rng_normal(&r);
}

/* Adam's m (p[0, n)) and v (p[n, 2n)) after four updates with gradients
 * drawn from N(0, 0.01²), beta1 0.9, beta2 0.999. */
static void fill_adam(float *p, size_t n, uint64_t seed) {
  cairn_rng r;
  cairn_rng_init(&r, seed, 12);
  for (size_t i = 0; i < n; i++) {
    float m = 0.0f, v = 0.0f;
    for (int k = 0; k < 4; k++) {
      float g = 0.01f * cairn_rng_normal(&r);
      m = 0.9f * m + 0.1f * g;
      v = 0.999f * v + 0.001f * g * g;
    }
    p[i] = m;
    p[n + i] = v;
  }
}

/* ---- the timed operations --------------------------------------------------- */

static void plain_write(const char *path, const unsigned char *buf, size_t n) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) DIE_ERRNO(path);
  for (size_t done = 0; done < n;) {
    ssize_t k = write(fd, buf + done, n - done);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) DIE_ERRNO("write");
    done += (size_t)k;
  }
  if (fsync(fd) || close(fd)) DIE_ERRNO("fsync/close");
}

static void plain_read(const char *path, unsigned char *buf, size_t n) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) DIE_ERRNO(path);
  for (size_t done = 0; done < n;) {
    ssize_t k = read(fd, buf + done, n - done);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) DIE_ERRNO("read");
    done += (size_t)k;
  }
  close(fd);
}

static void cairn_save(const char *path, const tset *s, const cairn_tensor *t) {
  cairn_ckpt_writer *w;
  if (cairn_ckpt_writer_open(path, NULL, &w)) DIE("writer_open");
  for (int i = 0; i < s->n; i++)
    if (cairn_ckpt_writer_add(w, s->name[i], &t[i])) {
      cairn_ckpt_writer_abort(w);
      DIE("writer_add");
    }
  if (cairn_ckpt_writer_commit(w)) DIE("commit");
}

static void cairn_load(const char *path, const tset *s, cairn_tensor *t) {
  cairn_ckpt *c;
  if (cairn_ckpt_open(path, NULL, &c)) DIE("ckpt_open");
  for (int i = 0; i < s->n; i++)
    if (cairn_ckpt_read(c, s->name[i], &t[i])) DIE("ckpt_read");
  cairn_ckpt_close(c);
}

/* Loads into new tensors (allocated in the timed region); returns them. */
static void cairn_load_fresh(const char *path, const tset *s, cairn_tensor **t) {
  cairn_ckpt *c;
  if (cairn_ckpt_open(path, NULL, &c)) DIE("ckpt_open");
  for (int i = 0; i < s->n; i++)
    if (cairn_tensor_new(CAIRN_DTYPE_F32, s->rank[i], s->shape[i], &t[i]) || cairn_ckpt_read(c, s->name[i], t[i]))
      DIE("ckpt_read (fresh)");
  cairn_ckpt_close(c);
}

/* A tensor set written both ways: as one plain file of its slab and as a
 * checkpoint. */
typedef struct io_set {
  const char *plain, *ckpt;
  const tset *s;
  const unsigned char *src; /* slab written */
  unsigned char *rbuf;      /* slab read back plainly */
  size_t n;                 /* slab bytes */
  const cairn_tensor *t_src;
  cairn_tensor *t_dst;
} io_set;

/* One round of the interleaved pairs, plain write+fsync vs cairn save, then
 * plain read vs cairn load; even rounds plain first, odd rounds cairn first.
 * Files are removed before each write (not timed). */
static void io_round(const io_set *x, int r, double *w, double *save, double *rd, double *load) {
  for (int half = 0; half < 2; half++) {
    int cairn_turn = (half == 0) == (r % 2 == 1);
    unlink(cairn_turn ? x->ckpt : x->plain);
    double t0 = now();
    if (cairn_turn) cairn_save(x->ckpt, x->s, x->t_src);
    else plain_write(x->plain, x->src, x->n);
    *(cairn_turn ? save : w) = now() - t0;
  }
  for (int half = 0; half < 2; half++) {
    int cairn_turn = (half == 0) == (r % 2 == 1);
    double t0 = now();
    if (cairn_turn) cairn_load(x->ckpt, x->s, x->t_dst);
    else plain_read(x->plain, x->rbuf, x->n);
    *(cairn_turn ? load : rd) = now() - t0;
  }
}

/* Saves and loads a set once (warm-up) and checks what came back. */
static int save_load_check(const char *path, const tset *s, const cairn_tensor *t_src, cairn_tensor *t_dst,
                           const unsigned char *src, const unsigned char *dst, size_t n, const char *what) {
  cairn_save(path, s, t_src);
  cairn_load(path, s, t_dst);
  if (memcmp(src, dst, n) == 0) return 0;
  fprintf(stderr, "bench_ckpt: %s read back differ from what was written\n", what);
  return 1;
}

static void cairn_verify_file(const char *path) {
  cairn_ckpt *c;
  if (cairn_ckpt_open(path, NULL, &c) || cairn_ckpt_verify(c)) DIE("verify");
  cairn_ckpt_close(c);
}

static const char *fs_name(const char *dir, char *buf, size_t len) {
  struct statfs sf;
  if (statfs(dir, &sf)) return "unknown";
  switch ((unsigned long)sf.f_type) {
  case 0xEF53UL: return "ext2/3/4";
  case 0x01021994UL: return "tmpfs";
  case 0x58465342UL: return "xfs";
  case 0x9123683EUL: return "btrfs";
  case 0x794C7630UL: return "overlayfs";
  default: snprintf(buf, len, "0x%lx", (unsigned long)sf.f_type); return buf;
  }
}

/* The 1-minute load average: the machine is shared; a busy one shows here. */
static double loadavg(void) {
  double l = -1;
  FILE *f = fopen("/proc/loadavg", "r");
  if (f) {
    if (fscanf(f, "%lf", &l) != 1) l = -1;
    fclose(f);
  }
  return l;
}

static off_t file_size(const char *path) {
  struct stat sb;
  return stat(path, &sb) ? -1 : sb.st_size;
}

enum { W, S, R, L, LF, V, SS, SL, AW, AS, AR, AL, N_OPS };
static const char *op_names[N_OPS] = {
    "write_fsync",  "cairn_save_fsync",      "read_hot",         "cairn_load_verified",
    "cairn_load_fresh", "cairn_verify",      "sparse_cairn_save", "sparse_cairn_load",
    "adam_write_fsync", "adam_cairn_save_fsync", "adam_read_hot",  "adam_cairn_load_verified"};
static int op_skipped(int k, int sparse, int adam) {
  return (!sparse && (k == SS || k == SL)) || (!adam && (k == AW || k == AS || k == AR || k == AL));
}

/* s as a JSON string (quotes, backslashes and control bytes escaped). */
static void json_str(const char *s) {
  putchar('"');
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') printf("\\%c", c);
    else if (c < 0x20) printf("\\u%04x", c);
    else putchar(c);
  }
  putchar('"');
}

static void print_series(const char *name, const double *v, int n, const char *fmt) {
  printf("\"%s\": [", name);
  for (int r = 0; r < n; r++) {
    printf(r ? ", " : "");
    printf(fmt, v[r]);
  }
  printf("]");
}

/* ---- --input: codecs compared on real checkpoints ------------------------------ */

/* Lossless ceiling of byte-plane coding for fp32 and bf16: the
 * sign+exponent field (9 bits) coded at its empirical entropy, the mantissa
 * bits (23, 7) as they are (noise in trained weights). Other dtypes count
 * as incompressible. Returns raw bytes / the ideal size. */
static double sign_exp_limit(cairn_tensor **t, size_t n) {
  double raw = 0, ideal = 0;
  static uint64_t h[512];
  for (size_t i = 0; i < n; i++) {
    size_t nb = cairn_tensor_nbytes(t[i]);
    raw += (double)nb;
    int f32 = t[i]->dtype == CAIRN_DTYPE_F32, bf16 = t[i]->dtype == CAIRN_DTYPE_BF16;
    if (!(f32 || bf16) || nb == 0) {
      ideal += (double)nb;
      continue;
    }
    size_t ne = nb / (f32 ? 4 : 2);
    memset(h, 0, sizeof h);
    if (f32)
      for (size_t k = 0; k < ne; k++) h[((const uint32_t *)t[i]->data)[k] >> 23]++;
    else
      for (size_t k = 0; k < ne; k++) h[((const uint16_t *)t[i]->data)[k] >> 7]++;
    double bits = 0;
    for (int k = 0; k < 512; k++)
      if (h[k]) {
        double p = (double)h[k] / (double)ne;
        bits -= (double)h[k] * __builtin_log2(p);
      }
    ideal += (bits + (f32 ? 23.0 : 7.0) * (double)ne) / 8.0;
  }
  return ideal > 0 ? raw / ideal : 1.0;
}

static void save_all(const char *path, cairn_ckpt_compress mode, char **names, cairn_tensor **t, size_t n) {
  cairn_ckpt_write_options o = cairn_ckpt_write_options_default();
  o.compress = mode;
  cairn_ckpt_writer *w;
  if (cairn_ckpt_writer_open(path, &o, &w)) DIE("writer_open");
  for (size_t i = 0; i < n; i++)
    if (cairn_ckpt_writer_add(w, names[i], t[i])) DIE("writer_add");
  if (cairn_ckpt_writer_commit(w)) DIE("commit");
}

/* What a restore does: verify every tensor, then decode it in place, with
 * the staging of cairn_saver_restore (64 MiB of compact tensors decoded
 * once; BENCH_STAGING=0 turns it off). */
static void restore_all(const char *path, char **names, cairn_tensor **t, size_t n) {
  cairn_ckpt *c;
  if (cairn_ckpt_open(path, NULL, &c)) DIE("ckpt_open");
  const char *sg = getenv("BENCH_STAGING");
  if (cairn_ckpt_set_staging(c, sg ? strtoull(sg, NULL, 10) : (uint64_t)64 << 20)) DIE("set_staging");
  for (size_t i = 0; i < n; i++)
    if (cairn_ckpt_verify_tensor(c, names[i]) || cairn_ckpt_read(c, names[i], t[i])) DIE("restore");
  cairn_ckpt_close(c);
}

static int compare_inputs(int argc, char **argv) {
  const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : ".";
  int rounds = 5;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--dir") && i + 1 < argc) dir = argv[++i];
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
  }
  if (rounds < 1 || rounds > MAX_ROUNDS) rounds = 5;
  static const cairn_ckpt_compress modes[2] = {CAIRN_CKPT_COMPRESS_AUTO, CAIRN_CKPT_COMPRESS_COMPACT};
  static const char *mode_names[2] = {"default", "compact"};
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--input") != 0 || i + 1 >= argc) continue;
    const char *in = argv[++i];
    cairn_ckpt *c;
    if (cairn_ckpt_open(in, NULL, &c)) DIE("ckpt_open input");
    size_t n = cairn_ckpt_count(c);
    char **names = calloc(n ? n : 1, sizeof *names);
    cairn_tensor **t = calloc(n ? n : 1, sizeof *t);
    double raw = 0;
    for (size_t k = 0; k < n; k++) {
      cairn_ckpt_entry e;
      if (cairn_ckpt_entry_at(c, k, &e) || !(names[k] = strdup(e.name))) DIE("entry");
      if (cairn_tensor_new(e.dtype, e.rank, e.shape, &t[k]) || cairn_ckpt_read(c, names[k], t[k])) DIE("read input");
      raw += (double)e.raw_bytes;
    }
    cairn_ckpt_close(c);
    double save[2][MAX_ROUNDS], rest[2][MAX_ROUNDS], save_cpu[2][MAX_ROUNDS], rest_cpu[2][MAX_ROUNDS];
    off_t size[2] = {0, 0};
    char path[2][4096];
    for (int m = 0; m < 2; m++) snprintf(path[m], sizeof path[m], "%s/bench-%s-%d.crn", dir, mode_names[m], (int)getpid());
    for (int r = 0; r < rounds; r++)
      for (int j = 0; j < 2; j++) {
        int m = (r + j) % 2; /* alternate the order: the machine is shared */
        unlink(path[m]);
        double t0 = now(), c0 = cpu_now();
        save_all(path[m], modes[m], names, t, n);
        double t1 = now(), c1 = cpu_now();
        restore_all(path[m], names, t, n);
        double t2 = now(), c2 = cpu_now();
        save[m][r] = t1 - t0;
        rest[m][r] = t2 - t1;
        save_cpu[m][r] = c1 - c0;
        rest_cpu[m][r] = c2 - c1;
        size[m] = file_size(path[m]);
      }
    double lim = sign_exp_limit(t, n);
    printf("{\"bench\": \"ckpt_codecs\", \"input\": ");
    json_str(in);
    printf(", \"tensors\": %zu, \"raw_bytes\": %.0f, \"rounds\": %d, \"sign_exp_entropy_limit\": %.4f", n, raw,
           rounds, lim);
    for (int m = 0; m < 2; m++)
      printf(", \"%s\": {\"file_bytes\": %lld, \"ratio\": %.4f, \"save_s\": %.4f, \"verified_restore_s\": %.4f, "
             "\"save_cpu_s\": %.4f, \"verified_restore_cpu_s\": %.4f}",
             mode_names[m], (long long)size[m], raw / (double)size[m], median(save[m], rounds),
             median(rest[m], rounds), median(save_cpu[m], rounds), median(rest_cpu[m], rounds));
    printf(", \"compact_vs_default_restore_speed\": %.3f, \"compact_vs_default_restore_speed_cpu\": %.3f}\n",
           median(rest[0], rounds) / median(rest[1], rounds), median(rest_cpu[0], rounds) / median(rest_cpu[1], rounds));
    for (int m = 0; m < 2; m++) unlink(path[m]);
    for (size_t k = 0; k < n; k++) {
      free(names[k]);
      cairn_tensor_free(t[k]);
    }
    free(names);
    free(t);
  }
  return 0;
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--input")) return compare_inputs(argc, argv);
  const char *dir_opt = NULL;
  int rounds = 7, small = 0, sparse = 1, adam = 1, threads = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--dir") && i + 1 < argc) dir_opt = argv[++i];
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--small")) small = 1;
    else if (!strcmp(argv[i], "--no-sparse")) sparse = 0;
    else if (!strcmp(argv[i], "--no-adam")) adam = 0;
    else rounds = -1;
  }
  if (rounds < 1 || rounds > MAX_ROUNDS) {
    fprintf(stderr,
            "usage: bench_ckpt [--dir D] [--rounds R<=%d] [--small] [--no-sparse] [--no-adam] [--threads T]\n",
            MAX_ROUNDS);
    return 2;
  }
  if (threads > 0 && cairn_set_num_threads(threads)) DIE("threads");

  const char *base = dir_opt ? dir_opt : getenv("TMPDIR");
  if (!base || !*base) base = ".";
  char dir[4096], p_plain[4200], p_ckpt[4200], p_sparse[4200], p_aplain[4200], p_adam[4200], fsbuf[32];
  snprintf(dir, sizeof dir, "%s/bench_ckpt.XXXXXX", base);
  if (!mkdtemp(dir)) DIE_ERRNO(dir);
  snprintf(p_plain, sizeof p_plain, "%s/plain.bin", dir);
  snprintf(p_ckpt, sizeof p_ckpt, "%s/dense.ckpt", dir);
  snprintf(p_sparse, sizeof p_sparse, "%s/sparse.ckpt", dir);
  snprintf(p_aplain, sizeof p_aplain, "%s/adam.bin", dir);
  snprintf(p_adam, sizeof p_adam, "%s/adam.ckpt", dir);

  tset s, sa;
  tset_init(&s, small, 0);
  tset_init(&sa, small, 1);
  const size_t n = s.total, na = sa.total;
  /* Sources, destinations and the read buffer: allocated and written once
   * (pre-touched) before any timing. */
  unsigned char *src = cairn_alloc(n), *dst = cairn_alloc(n), *rbuf = cairn_alloc(n);
  unsigned char *sp_src = sparse ? cairn_alloc(n) : NULL, *sp_dst = sparse ? cairn_alloc(n) : NULL;
  unsigned char *a_src = adam ? cairn_alloc(na) : NULL, *a_dst = adam ? cairn_alloc(na) : NULL,
                *a_rbuf = adam ? cairn_alloc(na) : NULL;
  if (!src || !dst || !rbuf || (sparse && (!sp_src || !sp_dst)) || (adam && (!a_src || !a_dst || !a_rbuf)))
    DIE("alloc");
  fill((float *)src, n / sizeof(float), 1, 0);
  memset(dst, 0x5a, n);
  memset(rbuf, 0x5a, n);
  if (sparse) {
    fill((float *)sp_src, n / sizeof(float), 2, 90);
    memset(sp_dst, 0x5a, n);
  }
  if (adam) {
    fill_adam((float *)a_src, na / 2 / sizeof(float), 3);
    memset(a_dst, 0x5a, na);
    memset(a_rbuf, 0x5a, na);
  }
  cairn_tensor t_src[MAX_TENSORS], t_dst[MAX_TENSORS], t_sp_src[MAX_TENSORS], t_sp_dst[MAX_TENSORS],
      t_a_src[MAX_TENSORS], t_a_dst[MAX_TENSORS];
  views(&s, src, t_src);
  views(&s, dst, t_dst);
  if (sparse) {
    views(&s, sp_src, t_sp_src);
    views(&s, sp_dst, t_sp_dst);
  }
  if (adam) {
    views(&sa, a_src, t_a_src);
    views(&sa, a_dst, t_a_dst);
  }

  /* Warm-up, and a check that what is timed is right. */
  plain_write(p_plain, src, n);
  plain_read(p_plain, rbuf, n);
  if (memcmp(src, rbuf, n)) {
    fprintf(stderr, "bench_ckpt: the plain file read back differs from what was written\n");
    return 1;
  }
  if (save_load_check(p_ckpt, &s, t_src, t_dst, src, dst, n, "dense tensors") ||
      (sparse && save_load_check(p_sparse, &s, t_sp_src, t_sp_dst, sp_src, sp_dst, n, "sparse tensors")) ||
      (adam && save_load_check(p_adam, &sa, t_a_src, t_a_dst, a_src, a_dst, na, "Adam slots")))
    return 1;
  const io_set dense_io = {p_plain, p_ckpt, &s, src, rbuf, n, t_src, t_dst},
               adam_io = {p_aplain, p_adam, &sa, a_src, a_rbuf, na, t_a_src, t_a_dst};
  const off_t ckpt_bytes = file_size(p_ckpt), sparse_bytes = sparse ? file_size(p_sparse) : 0,
              adam_bytes = adam ? file_size(p_adam) : 0;

  const double load_before = loadavg();
  static double t[N_OPS][MAX_ROUNDS];
  for (int r = 0; r < rounds; r++) {
    io_round(&dense_io, r, &t[W][r], &t[S][r], &t[R][r], &t[L][r]);
    cairn_tensor *fresh[MAX_TENSORS];
    double t0 = now();
    cairn_load_fresh(p_ckpt, &s, fresh);
    t[LF][r] = now() - t0;
    for (int i = 0; i < s.n; i++) cairn_tensor_free(fresh[i]);
    t0 = now();
    cairn_verify_file(p_ckpt);
    t[V][r] = now() - t0;
    if (sparse) {
      unlink(p_sparse);
      t0 = now();
      cairn_save(p_sparse, &s, t_sp_src);
      t[SS][r] = now() - t0;
      t0 = now();
      cairn_load(p_sparse, &s, t_sp_dst);
      t[SL][r] = now() - t0;
    }
    if (adam) io_round(&adam_io, r, &t[AW][r], &t[AS][r], &t[AR][r], &t[AL][r]);
  }

  const double mb = (double)n / 1e6, mba = (double)na / 1e6;
  double mbps[N_OPS][MAX_ROUNDS], save_ratio[MAX_ROUNDS], load_ratio[MAX_ROUNDS];
  for (int r = 0; r < rounds; r++) {
    for (int k = 0; k < N_OPS; k++) mbps[k][r] = t[k][r] > 0 ? (k >= AW ? mba : mb) / t[k][r] : 0;
    save_ratio[r] = t[W][r] / t[S][r]; /* (MB/s save) / (MB/s write+fsync) */
    load_ratio[r] = t[R][r] / t[L][r];
  }
  char info[512];
  printf("{\"bench\": \"ckpt_io\", \"context\": ");
  json_str(cairn_runtime_info(info, sizeof info));
  printf(", \"threads\": %d, \"loadavg_1min_before_after\": [%.2f, %.2f], ", cairn_get_num_threads(),
         load_before, loadavg());
  printf("\"dir\": ");
  json_str(dir);
  printf(", \"fs\": ");
  json_str(fs_name(dir, fsbuf, sizeof fsbuf));
  printf(", \"tensors\": %d, \"dtype\": \"f32\", \"mb\": %.2f, ", s.n, mb);
  printf("\"ckpt_file_bytes\": %lld, \"dense_ratio\": %.3f, ", (long long)ckpt_bytes,
         ckpt_bytes > 0 ? (double)n / (double)ckpt_bytes : 0.0);
  printf("\"rounds\": %d, \"unit\": \"MB/s (1e6 bytes of tensor data per second)\", ", rounds);
  for (int k = 0; k < N_OPS; k++) {
    if (op_skipped(k, sparse, adam)) continue;
    printf("\"%s_mbps_median\": %.0f, ", op_names[k], median(mbps[k], rounds));
  }
  if (sparse)
    printf("\"sparse_zero_fraction\": 0.9, \"sparse_file_bytes\": %lld, \"sparse_ratio\": %.2f, ",
           (long long)sparse_bytes, sparse_bytes > 0 ? (double)n / (double)sparse_bytes : 0.0);
  if (adam) {
    double as[MAX_ROUNDS], al[MAX_ROUNDS];
    for (int r = 0; r < rounds; r++) {
      as[r] = t[AW][r] / t[AS][r];
      al[r] = t[AR][r] / t[AL][r];
    }
    printf("\"adam_tensors\": %d, \"adam_mb\": %.2f, \"adam_file_bytes\": %lld, \"adam_ratio\": %.3f, ",
           sa.n, mba, (long long)adam_bytes, adam_bytes > 0 ? (double)na / (double)adam_bytes : 0.0);
    printf("\"adam_save_over_write_fsync_median\": %.3f, \"adam_load_over_read_hot_median\": %.3f, ",
           median(as, rounds), median(al, rounds));
  }
  printf("\"save_over_write_fsync_median\": %.3f, ", median(save_ratio, rounds));
  printf("\"load_over_read_hot_median\": %.3f, ", median(load_ratio, rounds));
  printf("\"per_round_mbps\": {");
  int first = 1;
  for (int k = 0; k < N_OPS; k++) {
    if (op_skipped(k, sparse, adam)) continue;
    printf(first ? "" : ", ");
    first = 0;
    print_series(op_names[k], mbps[k], rounds, "%.0f");
  }
  printf("}}\n");

  unlink(p_plain);
  unlink(p_ckpt);
  if (sparse) unlink(p_sparse);
  if (adam) {
    unlink(p_aplain);
    unlink(p_adam);
  }
  rmdir(dir);
  cairn_free(src);
  cairn_free(dst);
  cairn_free(rbuf);
  cairn_free(sp_src);
  cairn_free(sp_dst);
  cairn_free(a_src);
  cairn_free(a_dst);
  cairn_free(a_rbuf);
  return 0;
}
