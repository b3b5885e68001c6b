#define _POSIX_C_SOURCE 200809L
/* train_mlp: a small end-to-end training run.
 *
 * Without arguments it trains an MLP on a synthetic 10-class problem (points
 * drawn around random centres in 64 dimensions, made in memory), so it runs
 * anywhere with no download. With --data DIR it reads the MNIST-family IDX
 * files train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz],
 * t10k-images-idx3-ubyte[.gz] and t10k-labels-idx1-ubyte[.gz] from DIR
 * (MNIST or Fashion-MNIST) instead.
 *
 *   train_mlp [--data DIR] [--epochs N] [--batch B] [--threads T] [--seed S]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cairn.h>

#define CHECK(call)                                                                                \
  do {                                                                                             \
    cairn_status s_ = (call);                                                                      \
    if (s_ != CAIRN_OK) {                                                                          \
      fprintf(stderr, "train_mlp: %s: %s\n", cairn_status_str(s_), cairn_errmsg());                \
      goto fail;                                                                                   \
    }                                                                                              \
  } while (0)

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* n points in `dim` dimensions around 10 random centres; labels (n) i32. */
static cairn_status make_blobs(int64_t n, int64_t dim, uint64_t seed, cairn_tensor **x, cairn_tensor **y) {
  int64_t xs[2] = {n, dim};
  cairn_status s = cairn_tensor_new(CAIRN_DTYPE_F32, 2, xs, x);
  if (!s) s = cairn_tensor_new(CAIRN_DTYPE_I32, 1, &n, y);
  if (s) return s;
  cairn_rng centres, noise;
  cairn_rng_init(&centres, 12345, 0); /* the same problem for every seed */
  cairn_rng_init(&noise, seed, 1);
  float c[10][64];
  for (int k = 0; k < 10; k++)
    for (int j = 0; j < dim && j < 64; j++) c[k][j] = cairn_rng_normal(&centres);
  float *xp = cairn_tensor_f32(*x);
  int32_t *yp = cairn_tensor_i32(*y);
  for (int64_t i = 0; i < n; i++) {
    int k = (int)cairn_rng_below(&noise, 10);
    yp[i] = k;
    for (int64_t j = 0; j < dim; j++) xp[i * dim + j] = c[k][j % 64] + 2.5f * cairn_rng_normal(&noise);
  }
  return CAIRN_OK;
}

/* DIR/name or DIR/name.gz, whichever exists. */
static cairn_status load_idx(const char *dir, const char *name, cairn_tensor **out) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "rb");
  if (f)
    fclose(f);
  else
    snprintf(path, sizeof path, "%s/%s.gz", dir, name);
  return cairn_idx_read(path, 0, out);
}

static cairn_status load_mnist(const char *dir, const char *images, const char *labels, cairn_tensor **x,
                               cairn_tensor **y) {
  cairn_tensor *raw = NULL, *lab = NULL;
  cairn_status s = load_idx(dir, images, &raw);
  if (!s) s = load_idx(dir, labels, &lab);
  if (!s && raw->rank != 3) s = CAIRN_E_FORMAT;
  if (!s) {
    /* (N, 28, 28) u8 pixels -> (N, 784) f32 in [0, 1] */
    int64_t flat[2] = {raw->shape[0], raw->shape[1] * raw->shape[2]};
    cairn_tensor v;
    s = cairn_tensor_view(&v, raw->data, raw->dtype, 2, flat);
    if (!s) s = cairn_tensor_to_f32(&v, 1.0f / 255.0f, x);
  }
  if (!s) s = cairn_tensor_to_labels(lab, 10, y);
  cairn_tensor_free(raw);
  cairn_tensor_free(lab);
  return s;
}

int main(int argc, char **argv) {
  /* An OpenBLAS older than the CPU runs its slow SSE3 kernels: re-run this
   * program with OPENBLAS_CORETYPE set (runtime.h). */
  cairn_blas_coretype_fix(argv);
  const char *data = NULL;
  int epochs = 5, threads = 0;
  int64_t batch = 64;
  uint64_t seed = 42;
  for (int i = 1; i < argc; i++) {
    if (i + 1 < argc && strcmp(argv[i], "--data") == 0) data = argv[++i];
    else if (i + 1 < argc && strcmp(argv[i], "--epochs") == 0) epochs = atoi(argv[++i]);
    else if (i + 1 < argc && strcmp(argv[i], "--batch") == 0) batch = atoll(argv[++i]);
    else if (i + 1 < argc && strcmp(argv[i], "--threads") == 0) threads = atoi(argv[++i]);
    else if (i + 1 < argc && strcmp(argv[i], "--seed") == 0) seed = strtoull(argv[++i], NULL, 10);
    else {
      fprintf(stderr, "usage: train_mlp [--data DIR] [--epochs N] [--batch B] [--threads T] [--seed S]\n");
      return 2;
    }
  }
  if (epochs < 1 || batch < 1) {
    fprintf(stderr, "train_mlp: --epochs and --batch must be at least 1\n");
    return 2;
  }
  cairn_tensor *xtr = NULL, *ytr = NULL, *xte = NULL, *yte = NULL, *xb = NULL, *yb = NULL;
  cairn_registry *reg = NULL;
  cairn_mlp *mlp = NULL;
  cairn_dataset *ds = NULL;
  int rc = 1;
  char info[512];

  if (threads > 0) CHECK(cairn_set_num_threads(threads));
  printf("%s\n", cairn_runtime_info(info, sizeof info));
  if (data) {
    CHECK(load_mnist(data, "train-images-idx3-ubyte", "train-labels-idx1-ubyte", &xtr, &ytr));
    CHECK(load_mnist(data, "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", &xte, &yte));
  } else {
    CHECK(make_blobs(32768, 64, seed, &xtr, &ytr));
    CHECK(make_blobs(4096, 64, seed + 1, &xte, &yte));
  }
  const int64_t in = xtr->shape[1];
  int64_t sizes[4] = {in, 256, 128, 10};
  cairn_mlp_config cfg = {.n_layers = 3, .sizes = sizes, .hidden_act = CAIRN_ACT_RELU,
                          .loss = CAIRN_LOSS_SPARSE_SOFTMAX_XENT, .optim = cairn_optim_defaults(CAIRN_OPTIM_ADAM)};
  CHECK(cairn_registry_new(seed, &reg));
  CHECK(cairn_mlp_new(reg, &cfg, &mlp));
  CHECK(cairn_registry_initialize_collection(reg, CAIRN_COLL_GLOBAL));
  printf("model %lld-256-128-10, %lld parameters, Adam lr %g, batch %lld, %lld training examples\n",
         (long long)in, (long long)cairn_mlp_num_params(mlp), (double)cfg.optim.learning_rate, (long long)batch,
         (long long)xtr->shape[0]);

  cairn_dataset_config dc = {.batch_size = batch, .shuffle = 1, .seed = seed, .num_epochs = epochs};
  CHECK(cairn_dataset_new(xtr, ytr, &dc, &ds));
  int64_t xbs[2] = {batch, in};
  CHECK(cairn_tensor_new(CAIRN_DTYPE_F32, 2, xbs, &xb));
  CHECK(cairn_tensor_new(CAIRN_DTYPE_I32, 1, &batch, &yb));

  double t0 = now(), sum = 0;
  int64_t steps = 0, per_epoch = cairn_dataset_batches_per_epoch(ds);
  for (;;) {
    cairn_status s = cairn_dataset_next(ds, xb, yb);
    if (s == CAIRN_E_OUT_OF_RANGE) break;
    CHECK(s);
    float loss;
    CHECK(cairn_mlp_train_step(mlp, xb, yb, &loss));
    sum += loss;
    if (++steps % per_epoch == 0) {
      float tl, acc;
      CHECK(cairn_mlp_evaluate(mlp, xte, yte, &tl, &acc));
      printf("epoch %lld  step %lld  train loss %.4f  test loss %.4f  test accuracy %.4f  (%.2f s)\n",
             (long long)(steps / per_epoch), (long long)cairn_tensor_i64(cairn_var_tensor(cairn_mlp_global_step(mlp)))[0],
             sum / (double)per_epoch, (double)tl, (double)acc, now() - t0);
      sum = 0;
    }
  }
  float tl, acc;
  CHECK(cairn_mlp_evaluate(mlp, xte, yte, &tl, &acc));
  printf("done: %lld steps in %.2f s, final test accuracy %.4f\n", (long long)steps, now() - t0, (double)acc);
  rc = 0;
fail:
  cairn_dataset_free(ds);
  cairn_mlp_free(mlp);
  cairn_registry_free(reg);
  cairn_tensor_free(xtr);
  cairn_tensor_free(ytr);
  cairn_tensor_free(xte);
  cairn_tensor_free(yte);
  cairn_tensor_free(xb);
  cairn_tensor_free(yb);
  return rc;
}
