/* Data-parallel training over MPI (cairn/mpi.h): the polite MPI lifecycle
 * of Horovod's mpi_context.cc, fused in-place allreduce of gradients
 * (Horovod's Tensor Fusion, ops/mpi_operations.cc), the broadcast of the
 * chief's global variables (Horovod's BroadcastGlobalVariablesHook; see
 * doc/session-semantics.md, "Chief, workers and MPI ranks"), and
 * deadlines on every collective so that a dead or stalled rank becomes an
 * error instead of a hang, naming the rank(s) that stopped answering. Compiled
 * only when configure found MPI. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, nanosleep */
#include "tensor_impl.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cairn/mpi.h"
#include "kernels/kernels.h"

#define DEFAULT_FUSION_BYTES ((size_t)64 << 20)
#define DEFAULT_TIMEOUT_SECS 60.0
/* After a deadline, how long the other ranks get to answer a heartbeat. */
#define PROBE_GRACE_SECS 2.0
/* Tags of the heartbeat messages, on a communicator of their own. */
#define TAG_PING 1
#define TAG_PONG 2

struct cairn_mpi {
  MPI_Comm comm;       /* our duplicate of the application's communicator */
  MPI_Comm local;      /* node-local ranks (MPI_COMM_TYPE_SHARED) */
  MPI_Comm hb;         /* heartbeats (see probe_peers), apart from any user message */
  MPI_Request ping_rq; /* the receive of the next heartbeat, always posted */
  unsigned char ping_buf;
  int rank, size, local_rank, local_size;
  int thread_level;
  int we_initialized;  /* MPI_Init_thread was ours: finalize at free */
  int broken;          /* a collective failed or timed out */
  char broken_why[CAIRN__ERRMSG_LEN]; /* whole: what failed and MPI's own text */
  size_t fusion_bytes;
  double timeout;      /* < 0: none */
  float *fusion;       /* fusion buffer (fusion_cap floats) */
  size_t fusion_cap;
  cairn_mpi_stats stats;
};

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* An MPI error as a cairn status, with MPI's own text. */
static cairn_status mpi_fail(cairn_mpi *c, int rc, const char *what) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "MPI error %d", rc);
  if (c) {
    c->broken = 1;
    snprintf(c->broken_why, sizeof c->broken_why, "%s failed: %s", what, text);
  }
  return cairn__fail(CAIRN_E_UNAVAILABLE, "mpi: %s failed on rank %d: %s", what, c ? c->rank : -1, text);
}

/* A failed step of cairn_mpi_init: its error, after freeing what was made. */
static cairn_status init_failed(cairn_mpi *c, int rc, const char *what) {
  cairn_status s = mpi_fail(NULL, rc, what);
  cairn_mpi_free(c);
  return s;
}

/* A communicator of ours: its errors return (rather than abort), and its
 * rank and size when asked. */
static void comm_returns_errors(MPI_Comm m, int *rank, int *size) {
  MPI_Comm_set_errhandler(m, MPI_ERRORS_RETURN);
  if (rank) MPI_Comm_rank(m, rank);
  if (size) MPI_Comm_size(m, size);
}

static cairn_status check_usable(const cairn_mpi *c, const char *what) {
  if (!c) return cairn__fail(CAIRN_E_NULL, "mpi: %s: context is NULL", what);
  if (c->broken)
    return cairn__fail(CAIRN_E_UNAVAILABLE, "mpi: %s: not attempted, an earlier collective on rank %d %s", what,
                       c->rank, c->broken_why);
  return CAIRN_OK;
}

/* Polls a nonblocking collective until it completes or the deadline
 * passes. Open MPI's nonblocking collectives advance only inside MPI calls,
 * so a sleep between polls stalls every round of the algorithm: with 50 µs
 * sleeps after the first 2000 polls, a 7.45 MB allreduce between 2 ranks
 * took 10-12 ms per step instead of 1.3. So it polls without sleeping for
 * the first 20 ms, yielding the core (sched_yield) to any other runnable
 * thread between polls (oversubscribed runs), and only then sleeps 50 µs
 * between polls: a rank waiting that long waits for a slow or dead peer. */
/* Answers the heartbeats other ranks sent (probe_peers): a rank that waits
 * in a collective, or comes to one, says it is alive. */
static void serve_pings(cairn_mpi *c) {
  static const unsigned char pong = 1; /* never changes: the sends may be freed in flight */
  for (int k = 0; k < 64 && c->ping_rq != MPI_REQUEST_NULL; k++) {
    int got = 0;
    MPI_Status stt;
    if (MPI_Test(&c->ping_rq, &got, &stt) != MPI_SUCCESS || !got) return;
    MPI_Request r;
    if (MPI_Isend(&pong, 1, MPI_BYTE, stt.MPI_SOURCE, TAG_PONG, c->hb, &r) == MPI_SUCCESS) MPI_Request_free(&r);
    if (MPI_Irecv(&c->ping_buf, 1, MPI_BYTE, MPI_ANY_SOURCE, TAG_PING, c->hb, &c->ping_rq) != MPI_SUCCESS)
      c->ping_rq = MPI_REQUEST_NULL;
  }
}

/* Appends "a, b, c" (the first 16 ranks r with mark[r] == want, then "and
 * N more") to out; returns how many there are. */
static int list_ranks(const unsigned char *mark, int n, int want, char *out, size_t len) {
  int count = 0;
  size_t used = strlen(out);
  for (int r = 0; r < n; r++) {
    if (mark[r] != want) continue;
    if (count < 16 && used + 1 < len) used += (size_t)snprintf(out + used, len - used, "%s%d", count ? ", " : "", r);
    count++;
  }
  if (count > 16 && used + 1 < len) snprintf(out + used, len - used, " and %d more", count - 16);
  return count;
}

/* After a deadline: which ranks are still there? A collective cannot say
 * whose contribution is missing, so every other rank gets a heartbeat
 * (MPI_Isend of one byte on the heartbeat communicator) and grace seconds
 * to answer; ranks waiting in MPI answer at once (wait_req serves
 * heartbeats), a stopped (SIGSTOP), hung or dead rank does not, nor one
 * busy outside MPI for that long. Writes the verdict into out. */
static void probe_peers(cairn_mpi *c, double grace, char *out, size_t len) {
  int n = c->size;
  MPI_Request *rr = malloc((size_t)n * sizeof *rr);
  unsigned char *mark = calloc((size_t)n, 1), *buf = malloc((size_t)n);
  if (!rr || !mark || !buf || c->hb == MPI_COMM_NULL) {
    snprintf(out, len, "the rank that stopped answering is unknown (no heartbeat channel)");
    free(rr);
    free(mark);
    free(buf);
    return;
  }
  static const unsigned char ping = 1;
  int pending = 0;
  for (int p = 0; p < n; p++) {
    rr[p] = MPI_REQUEST_NULL;
    if (p == c->rank) {
      mark[p] = 2; /* self */
      continue;
    }
    MPI_Request sr;
    if (MPI_Isend(&ping, 1, MPI_BYTE, p, TAG_PING, c->hb, &sr) == MPI_SUCCESS) MPI_Request_free(&sr);
    if (MPI_Irecv(&buf[p], 1, MPI_BYTE, p, TAG_PONG, c->hb, &rr[p]) == MPI_SUCCESS) pending++;
    else rr[p] = MPI_REQUEST_NULL;
  }
  double t0 = now();
  while (pending > 0 && now() - t0 < grace) {
    serve_pings(c); /* the others probe too, at about the same time */
    for (int p = 0; p < n; p++) {
      int done = 0;
      if (rr[p] == MPI_REQUEST_NULL || MPI_Test(&rr[p], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done) continue;
      mark[p] = 1;
      pending--;
    }
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  for (int p = 0; p < n; p++)
    if (rr[p] != MPI_REQUEST_NULL) {
      MPI_Cancel(&rr[p]); /* a receive's cancel completes locally */
      MPI_Wait(&rr[p], MPI_STATUS_IGNORE);
    }
  out[0] = '\0';
  char silent[256] = "", alive[256] = "";
  int ns = list_ranks(mark, n, 0, silent, sizeof silent), na = list_ranks(mark, n, 1, alive, sizeof alive);
  if (ns > 0)
    snprintf(out, len,
             "%s %s stopped answering (no reply to a heartbeat within %.1f s: stopped, hung, dead, or busy outside "
             "MPI)%s%s%s",
             ns == 1 ? "rank" : "ranks", silent, grace, na ? (na == 1 ? "; rank " : "; ranks ") : "", alive,
             na ? " answered" : "");
  else
    snprintf(out, len,
             "every other rank answers a heartbeat (they wait in MPI too): the ranks may have called different "
             "collectives, or MPI itself is stuck");
  free(rr);
  free(mark);
  free(buf);
}

static cairn_status wait_req(cairn_mpi *c, MPI_Request *rq, const char *what) {
  double t0 = now();
  for (;;) {
    int done = 0;
    int rc = MPI_Test(rq, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return mpi_fail(c, rc, what);
    if (done) return CAIRN_OK;
    double waited = now() - t0; /* a vDSO call: cheap next to MPI_Test */
    if (c->timeout >= 0 && waited > c->timeout) {
      c->broken = 1;
      snprintf(c->broken_why, sizeof c->broken_why, "timed out in %s after %.1f s", what, waited);
      /* The request cannot be cancelled (collectives are not cancellable);
         it is abandoned, and the job must be aborted. */
      char who[700];
      probe_peers(c, c->timeout < PROBE_GRACE_SECS ? c->timeout : PROBE_GRACE_SECS, who, sizeof who);
      return cairn__fail(CAIRN_E_DEADLINE,
                         "mpi: %s: no completion after %.1f s (timeout %.1f s) on rank %d of %d: %s; abort the job "
                         "(cairn_mpi_abort) and restart it from the chief's latest checkpoint",
                         what, waited, c->timeout, c->rank, c->size, who);
    }
    if (waited < 0.02) {
      sched_yield();
      continue;
    }
    serve_pings(c); /* only once waiting for a peer: heartbeats come after seconds */
    struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL);
  }
}

cairn_mpi_options cairn_mpi_options_default(void) {
  cairn_mpi_options o;
  o.comm = MPI_COMM_NULL;
  o.fusion_bytes = 0;
  o.timeout_secs = 0;
  return o;
}

static double env_double(const char *name, double dflt) {
  const char *v = getenv(name);
  if (!v || !*v) return dflt;
  char *end;
  double d = strtod(v, &end);
  return *end == '\0' && isfinite(d) ? d : dflt;
}

cairn_status cairn_mpi_new(int *argc, char ***argv, const cairn_mpi_options *o, cairn_mpi **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "mpi_new: out is NULL");
  *out = NULL;
  cairn_mpi_options d = cairn_mpi_options_default();
  if (!o) o = &d;
  size_t fusion = o->fusion_bytes ? o->fusion_bytes
                                  : (size_t)env_double("CAIRN_MPI_FUSION_BYTES", (double)DEFAULT_FUSION_BYTES);
  if (fusion < sizeof(float))
    return cairn__fail(CAIRN_E_INVALID, "mpi_new: fusion buffer of %zu bytes; need at least %zu", fusion,
                       sizeof(float));
  if ((size_t)INT_MAX * sizeof(float) < fusion) fusion = (size_t)INT_MAX * sizeof(float);
  double timeout = o->timeout_secs != 0 ? o->timeout_secs : env_double("CAIRN_MPI_TIMEOUT", DEFAULT_TIMEOUT_SECS);
  if (!(timeout == timeout)) timeout = DEFAULT_TIMEOUT_SECS;
  /* CAIRN_MPI_TIMEOUT=0 is "off", as the negative option (0 would
     otherwise time out every collective at once). */
  if (timeout == 0) timeout = -1;

  int inited = 0, finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return cairn__fail(CAIRN_E_STATE, "mpi_new: MPI is already finalized");
  MPI_Initialized(&inited);
  cairn_mpi *c = calloc(1, sizeof *c);
  if (!c) return cairn__fail(CAIRN_E_NOMEM, "mpi_new: out of memory");
  c->comm = c->local = c->hb = MPI_COMM_NULL;
  c->ping_rq = MPI_REQUEST_NULL;
  c->fusion_bytes = fusion;
  c->timeout = timeout;
  int rc;
  if (!inited) {
#ifdef OPEN_MPI
    /* Open MPI's default Iallreduce schedule for large messages was 2.5x
       slower than its blocking allreduce here (3.3 vs 1.3 ms for 7.45 MB
       on 2 ranks); its ring schedule matches it. MCA variables are read at
       MPI_Init, so this works only when cairn initialises MPI; an
       application that does it itself can export the same variable. A
       value the user set is kept. */
    setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", 0);
#endif
    /* FUNNELED, not MULTIPLE: every call comes from one thread, and
       MULTIPLE disables some Open MPI transports (Horovod's
       HOROVOD_MPI_THREADS_DISABLE). */
    rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &c->thread_level);
    if (rc != MPI_SUCCESS) {
      free(c);
      return mpi_fail(NULL, rc, "MPI_Init_thread");
    }
    c->we_initialized = 1;
  } else {
    MPI_Query_thread(&c->thread_level);
  }
  MPI_Comm base = o->comm == MPI_COMM_NULL ? MPI_COMM_WORLD : o->comm;
  /* Errors on the application's communicator abort by default; ours return. */
  if ((rc = MPI_Comm_dup(base, &c->comm)) != MPI_SUCCESS) return init_failed(c, rc, "MPI_Comm_dup");
  comm_returns_errors(c->comm, &c->rank, &c->size);
  if ((rc = MPI_Comm_split_type(c->comm, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &c->local)) != MPI_SUCCESS)
    return init_failed(c, rc, "MPI_Comm_split_type");
  comm_returns_errors(c->local, &c->local_rank, &c->local_size);
  if (c->size > 1) {
    if ((rc = MPI_Comm_dup(c->comm, &c->hb)) != MPI_SUCCESS) return init_failed(c, rc, "MPI_Comm_dup (heartbeats)");
    comm_returns_errors(c->hb, NULL, NULL);
    if ((rc = MPI_Irecv(&c->ping_buf, 1, MPI_BYTE, MPI_ANY_SOURCE, TAG_PING, c->hb, &c->ping_rq)) != MPI_SUCCESS)
      return init_failed(c, rc, "MPI_Irecv (heartbeats)");
  }
  *out = c;
  return CAIRN_OK;
}

static cairn_status barrier_named(cairn_mpi *c, const char *what);

/* Deprecated name and argument order (cairn/mpi.h). */
cairn_status cairn_mpi_init(const cairn_mpi_options *o, int *argc, char ***argv, cairn_mpi **out) {
  return cairn_mpi_new(argc, argv, o, out);
}

void cairn_mpi_free(cairn_mpi *c) {
  if (!c) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) {
    /* MPI_Finalize waits for every rank, forever: a rank stopped (SIGSTOP)
       or hung after the last collective would keep this one in it. A
       barrier under the deadline first; if it fails, no MPI_Finalize (the
       process exits without it, and mpirun ends the job). */
    if (c->we_initialized && !c->broken && c->size > 1 && barrier_named(c, "barrier before MPI_Finalize") != CAIRN_OK)
      cairn_env_log(NULL, CAIRN_LOG_ERROR, "%s; MPI_Finalize skipped, it would wait for that rank forever",
                    cairn_errmsg());
    if (c->ping_rq != MPI_REQUEST_NULL) {
      MPI_Cancel(&c->ping_rq);
      MPI_Wait(&c->ping_rq, MPI_STATUS_IGNORE);
    }
    if (c->hb != MPI_COMM_NULL) MPI_Comm_free(&c->hb);
    if (c->local != MPI_COMM_NULL) MPI_Comm_free(&c->local);
    if (c->comm != MPI_COMM_NULL) MPI_Comm_free(&c->comm);
    if (c->we_initialized && !c->broken) MPI_Finalize();
  }
  cairn_free(c->fusion);
  free(c);
}

void cairn_mpi_abort(cairn_mpi *c, int code) {
  fflush(stdout);
  fflush(stderr);
  MPI_Abort(c && c->comm != MPI_COMM_NULL ? c->comm : MPI_COMM_WORLD, code);
  abort(); /* MPI_Abort does not return; in case an implementation does */
}

int cairn_mpi_rank(const cairn_mpi *c) { return c ? c->rank : 0; }
int cairn_mpi_size(const cairn_mpi *c) { return c ? c->size : 1; }
int cairn_mpi_local_rank(const cairn_mpi *c) { return c ? c->local_rank : 0; }
int cairn_mpi_local_size(const cairn_mpi *c) { return c ? c->local_size : 1; }
int cairn_mpi_is_chief(const cairn_mpi *c) { return !c || c->rank == 0; }
MPI_Comm cairn_mpi_comm(const cairn_mpi *c) { return c ? c->comm : MPI_COMM_NULL; }
int cairn_mpi_thread_level(const cairn_mpi *c) { return c ? c->thread_level : MPI_THREAD_SINGLE; }
const char *cairn_mpi_checkpoint_dir(const cairn_mpi *c, const char *dir) { return cairn_mpi_is_chief(c) ? dir : NULL; }

static cairn_status barrier_named(cairn_mpi *c, const char *what) {
  cairn_status s = check_usable(c, what);
  if (s) return s;
  MPI_Request rq;
  int rc = MPI_Ibarrier(c->comm, &rq);
  if (rc != MPI_SUCCESS) return mpi_fail(c, rc, what);
  return wait_req(c, &rq, what);
}

cairn_status cairn_mpi_barrier(cairn_mpi *c) { return barrier_named(c, "barrier"); }

cairn_status cairn_mpi_allreduce_sum_f64(cairn_mpi *c, double *v, size_t n) {
  cairn_status s = check_usable(c, "allreduce_sum_f64");
  if (s) return s;
  if (!v && n) return cairn__fail(CAIRN_E_NULL, "mpi: allreduce_sum_f64: v is NULL");
  if (n > INT_MAX) return cairn__fail(CAIRN_E_LIMIT, "mpi: allreduce_sum_f64: %zu values; at most %d", n, INT_MAX);
  if (n == 0) return CAIRN_OK;
  MPI_Request rq;
  int rc = MPI_Iallreduce(MPI_IN_PLACE, v, (int)n, MPI_DOUBLE, MPI_SUM, c->comm, &rq);
  if (rc != MPI_SUCCESS) return mpi_fail(c, rc, "allreduce_sum_f64");
  return wait_req(c, &rq, "allreduce_sum_f64");
}

/* Makes the fusion buffer hold `want` floats (capped by fusion_bytes). */
static cairn_status fusion_reserve(cairn_mpi *c, size_t want) {
  size_t cap = c->fusion_bytes / sizeof(float);
  if (want > cap) want = cap;
  if (want <= c->fusion_cap) return CAIRN_OK;
  float *p = cairn_alloc(want * sizeof(float));
  if (!p) return cairn__fail(CAIRN_E_NOMEM, "mpi: cannot allocate a %zu-byte fusion buffer", want * sizeof(float));
  cairn_free(c->fusion);
  c->fusion = p;
  c->fusion_cap = want;
  return CAIRN_OK;
}

/* Tensors of at least this many bytes are summed where they are, by an
 * MPI_Iallreduce of their own: copying them into the fusion buffer and
 * back cost more than the allreduce saves by fusing (measured: 2.8 ms for
 * the 7.45 MB of the bench MLP's gradients through the buffer, 1.6 ms in
 * place). Fusion is for the many small tensors (biases). */
#define DIRECT_MIN_BYTES ((size_t)256 << 10)
static int is_direct(const cairn_tensor *t) { return (size_t)t->size * sizeof(float) >= DIRECT_MIN_BYTES; }
/* The most allreduces in flight before the first is waited for. */
#define MAX_INFLIGHT 16

/* The allreduces of one cairn_mpi_allreduce_mean call, in flight together
 * (Open MPI progresses all of them at every poll), and what to do with
 * each when it completes: scale in place (a direct tensor) or copy the
 * fusion buffer's pieces back scaled. */
typedef struct piece {
  float *dst;
  size_t off, len; /* in the fusion buffer */
} piece;

typedef struct inflight {
  MPI_Request rq;
  float *direct;     /* a tensor reduced in place, or NULL for the bucket */
  size_t len;        /* floats */
  char what[128];
} inflight;

typedef struct reduce_state {
  cairn_mpi *c;
  float scale; /* 1/size: averaging is the sum scaled (Horovod's postscale) */
  inflight fl[MAX_INFLIGHT];
  size_t nfl;
  piece pieces[64]; /* of the one bucket in flight */
  size_t np;
} reduce_state;

/* Starts the allreduce of buf[0..count) in place; `what` (printf-style)
 * names it in errors. */
static cairn_status start(reduce_state *st, float *buf, size_t count, float *direct, const char *what, ...)
    __attribute__((format(printf, 5, 6)));
static cairn_status start(reduce_state *st, float *buf, size_t count, float *direct, const char *what, ...) {
  inflight *f = &st->fl[st->nfl];
  va_list ap;
  va_start(ap, what);
  vsnprintf(f->what, sizeof f->what, what, ap);
  va_end(ap);
  f->direct = direct;
  f->len = count;
  int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, st->c->comm, &f->rq);
  if (rc != MPI_SUCCESS) return mpi_fail(st->c, rc, f->what);
  st->nfl++;
  st->c->stats.allreduce_buckets++;
  st->c->stats.allreduce_bytes += count * sizeof(float);
  return CAIRN_OK;
}

/* Waits for every allreduce in flight, in order, and finishes each. */
static cairn_status drain(reduce_state *st) {
  cairn_status s = CAIRN_OK;
  const cairn__kernel_table *k = cairn__kernels();
  for (size_t i = 0; i < st->nfl && !s; i++) {
    inflight *f = &st->fl[i];
    if ((s = wait_req(st->c, &f->rq, f->what))) break;
    if (f->direct) {
      k->scale(st->scale, f->direct, f->len);
    } else {
      for (size_t j = 0; j < st->np; j++) {
        const float *b = st->c->fusion + st->pieces[j].off;
        float *d = st->pieces[j].dst;
        for (size_t e = 0; e < st->pieces[j].len; e++) d[e] = b[e] * st->scale;
      }
      st->np = 0;
    }
  }
  st->nfl = 0;
  return s;
}

cairn_status cairn_mpi_allreduce_mean(cairn_mpi *c, cairn_tensor *const *t, size_t n) {
  cairn_status s = check_usable(c, "allreduce_mean");
  if (s) return s;
  if (!t && n) return cairn__fail(CAIRN_E_NULL, "mpi: allreduce_mean: tensor list is NULL");
  size_t fused = 0, total = 0, last_small = 0; /* the last tensor to fuse */
  for (size_t i = 0; i < n; i++) {
    char what[48];
    snprintf(what, sizeof what, "tensor %zu", i);
    if ((s = cairn__check_f32("mpi_allreduce_mean", what, t[i]))) return s;
    total += (size_t)t[i]->size;
    if (!is_direct(t[i]) && t[i]->size > 0) {
      fused += (size_t)t[i]->size;
      last_small = i;
    }
  }
  if (total == 0) return CAIRN_OK;
  double t0 = now();
  if (fused && (s = fusion_reserve(c, fused))) return s;
  reduce_state st = {.c = c, .scale = 1.0f / (float)c->size};
  size_t used = 0, bucket = 0;
  for (size_t i = 0; i < n && !s; i++) {
    float *src = cairn_tensor_f32(t[i]);
    size_t left = (size_t)t[i]->size;
    if (is_direct(t[i])) {
      /* in place, in pieces of at most INT_MAX floats (MPI's count) */
      for (size_t off = 0; off < left && !s; off += INT_MAX) {
        size_t len = left - off < (size_t)INT_MAX ? left - off : (size_t)INT_MAX;
        if (st.nfl == MAX_INFLIGHT && (s = drain(&st))) break;
        s = start(&st, src + off, len, src + off, "allreduce of gradients (tensor %zu of %zu, %zu floats, in place)",
                  i, n, len);
      }
      continue;
    }
    while (left > 0 && !s) {
      size_t take = c->fusion_cap - used < left ? c->fusion_cap - used : left;
      memcpy(c->fusion + used, src, take * sizeof(float));
      st.pieces[st.np++] = (piece){src, used, take};
      used += take;
      src += take;
      left -= take;
      int last_fused = i == last_small && left == 0;
      if (used == c->fusion_cap || st.np == sizeof st.pieces / sizeof st.pieces[0] || last_fused) {
        if (st.nfl == MAX_INFLIGHT && (s = drain(&st))) break;
        if ((s = start(&st, c->fusion, used, NULL, "allreduce of gradients (bucket %zu, %zu floats, %zu tensors in all)",
                       bucket++, used, n)))
          break;
        used = 0;
        /* the next bucket reuses the buffer: wait for this one first */
        if (!last_fused) s = drain(&st);
      }
    }
  }
  if (!s) s = drain(&st);
  c->stats.allreduce_calls++;
  c->stats.allreduce_secs += now() - t0;
  return s;
}

cairn_status cairn_mpi_grads_fn(void *user, cairn_tensor *const *grads, size_t n) {
  return cairn_mpi_allreduce_mean(user, grads, n);
}

cairn_mpi_stats cairn_mpi_get_stats(const cairn_mpi *c) {
  cairn_mpi_stats z;
  memset(&z, 0, sizeof z);
  return c ? c->stats : z;
}

void cairn_mpi_reset_stats(cairn_mpi *c) {
  if (c) memset(&c->stats, 0, sizeof c->stats);
}

/* FNV-1a, for the variable-set agreement check. */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

/* Broadcasts buf[0..bytes) from root, in pieces of at most INT_MAX bytes. */
static cairn_status bcast_bytes(cairn_mpi *c, void *buf, size_t bytes, int root, const char *what) {
  unsigned char *p = buf;
  while (bytes > 0) {
    int chunk = bytes > (size_t)INT_MAX ? INT_MAX : (int)bytes;
    MPI_Request rq;
    int rc = MPI_Ibcast(p, chunk, MPI_BYTE, root, c->comm, &rq);
    if (rc != MPI_SUCCESS) return mpi_fail(c, rc, what);
    cairn_status s = wait_req(c, &rq, what);
    if (s) return s;
    p += chunk;
    bytes -= (size_t)chunk;
  }
  return CAIRN_OK;
}

cairn_status cairn_mpi_broadcast(cairn_mpi *c, void *buf, size_t bytes, int root) {
  cairn_status s = check_usable(c, "broadcast");
  if (s) return s;
  if (!buf && bytes) return cairn__fail(CAIRN_E_NULL, "mpi: broadcast: buffer is NULL");
  if (root < 0 || root >= c->size)
    return cairn__fail(CAIRN_E_INVALID, "mpi: broadcast: root %d; need 0..%d", root, c->size - 1);
  return bcast_bytes(c, buf, bytes, root, "broadcast");
}

cairn_status cairn_mpi_broadcast_variables(cairn_mpi *c, cairn_registry *r, int root) {
  cairn_status s = check_usable(c, "broadcast_variables");
  if (s) return s;
  if (!r) return cairn__fail(CAIRN_E_NULL, "mpi: broadcast_variables: registry is NULL");
  if (root < 0 || root >= c->size)
    return cairn__fail(CAIRN_E_INVALID, "mpi: broadcast_variables: root %d; need 0..%d", root, c->size - 1);
  size_t n = cairn_registry_list(r, CAIRN_COLL_GLOBAL, NULL, 0);
  cairn_var **vars = malloc((n ? n : 1) * sizeof *vars);
  unsigned char *flags = malloc(n ? n : 1);
  if (!vars || !flags) {
    free(vars);
    free(flags);
    return cairn__fail(CAIRN_E_NOMEM, "mpi: broadcast_variables: out of memory");
  }
  cairn_registry_list(r, CAIRN_COLL_GLOBAL, vars, n);
  uint64_t h = 14695981039346656037ull, bytes = 0;
  for (size_t i = 0; i < n; i++) {
    const cairn_tensor *t = cairn_var_tensor(vars[i]);
    const char *name = cairn_var_name(vars[i]);
    h = fnv(h, name, strlen(name) + 1);
    h = fnv(h, &t->dtype, sizeof t->dtype);
    h = fnv(h, t->shape, (size_t)t->rank * sizeof t->shape[0]);
    bytes += cairn_tensor_nbytes(t);
    flags[i] = (unsigned char)(cairn_var_is_initialized(vars[i]) != 0);
  }
  /* Agree first, in one allreduce, so that every rank takes the same branch:
     max and -min of (count, bytes, hash halves). */
  int64_t agree[8] = {(int64_t)n, (int64_t)bytes, (int64_t)(h >> 32), (int64_t)(h & 0xffffffffu)};
  for (int k = 0; k < 4; k++) agree[4 + k] = -agree[k];
  MPI_Request rq;
  int rc = MPI_Iallreduce(MPI_IN_PLACE, agree, 8, MPI_INT64_T, MPI_MAX, c->comm, &rq);
  if (rc != MPI_SUCCESS) s = mpi_fail(c, rc, "broadcast_variables (agreement)");
  else s = wait_req(c, &rq, "broadcast_variables (agreement on the variable set)");
  if (!s)
    for (int k = 0; k < 4; k++)
      if (agree[k] != -agree[4 + k]) {
        s = cairn__fail(CAIRN_E_INVALID,
                        "mpi: broadcast_variables: the ranks hold different GLOBAL variables (rank %d has %zu "
                        "variables, %llu bytes; counts range %lld..%lld over the ranks): build the same model "
                        "on every rank",
                        c->rank, n, (unsigned long long)bytes, (long long)-agree[4], (long long)agree[0]);
        break;
      }
  if (!s) s = bcast_bytes(c, flags, n, root, "broadcast_variables (initialized flags)");
  /* The values, packed into the fusion buffer (as bytes: global_step is
     i64, the rest f32) and broadcast one bucket at a time. */
  if (!s) s = fusion_reserve(c, (size_t)((bytes + sizeof(float) - 1) / sizeof(float)));
  if (!s) {
    unsigned char *buf = (unsigned char *)c->fusion;
    size_t cap = c->fusion_cap * sizeof(float), used = 0, first = 0, first_off = 0;
    size_t i = 0, off = 0; /* packing position: variable i, byte off */
    while (!s && i < n) {
      /* pack */
      first = i;
      first_off = off;
      used = 0;
      while (i < n && used < cap) {
        const cairn_tensor *t = cairn_var_tensor(vars[i]);
        size_t nb = cairn_tensor_nbytes(t), take = nb - off < cap - used ? nb - off : cap - used;
        memcpy(buf + used, (unsigned char *)t->data + off, take);
        used += take;
        off += take;
        if (off == nb) {
          i++;
          off = 0;
        }
      }
      if (used == 0) break;
      if ((s = bcast_bytes(c, buf, used, root, "broadcast_variables (values)"))) break;
      if (c->rank == root) continue;
      /* unpack the same range */
      size_t j = first, o = first_off, pos = 0;
      while (pos < used) {
        const cairn_tensor *t = cairn_var_tensor(vars[j]);
        size_t nb = cairn_tensor_nbytes(t), take = nb - o < used - pos ? nb - o : used - pos;
        memcpy((unsigned char *)t->data + o, buf + pos, take);
        pos += take;
        o += take;
        if (o == nb) {
          j++;
          o = 0;
        }
      }
    }
  }
  if (!s && c->rank != root)
    for (size_t k = 0; k < n; k++) cairn_var_set_initialized(vars[k], flags[k]);
  free(vars);
  free(flags);
  return s;
}

/* ---- BroadcastGlobalVariablesHook ---------------------------------------- */

typedef struct bcast_hook {
  cairn_mpi *c;
  int root;
} bcast_hook;

static cairn_status bcast_after_create(void *self, cairn_session *s, cairn_coordinator *coord) {
  (void)coord;
  bcast_hook *h = self;
  cairn_status st = cairn_mpi_broadcast_variables(h->c, cairn_session_registry(s), h->root);
  if (st) return cairn_session_fail(s, st, "BroadcastGlobalVariablesHook: %s", cairn_errmsg());
  return CAIRN_OK;
}

static void bcast_destroy(void *self) { free(self); }

static const cairn_hook_vtable bcast_vt = {
    .name = "BroadcastGlobalVariablesHook",
    .after_create_session = bcast_after_create,
    .destroy = bcast_destroy,
};

cairn_status cairn_hook_new_mpi_broadcast(cairn_mpi *c, int root, cairn_hook **out) {
  if (!out) return cairn__fail(CAIRN_E_NULL, "hook_new_mpi_broadcast: out is NULL");
  *out = NULL;
  if (!c) return cairn__fail(CAIRN_E_NULL, "hook_new_mpi_broadcast: context is NULL");
  if (root < 0 || root >= c->size)
    return cairn__fail(CAIRN_E_INVALID, "hook_new_mpi_broadcast: root %d; need 0..%d", root, c->size - 1);
  bcast_hook *h = malloc(sizeof *h);
  if (!h) return cairn__fail(CAIRN_E_NOMEM, "hook_new_mpi_broadcast: out of memory");
  h->c = c;
  h->root = root;
  cairn_status s = cairn_hook_new(&bcast_vt, h, out);
  if (s) free(h);
  return s;
}

/* Deprecated name (cairn/mpi.h). */
cairn_status cairn_mpi_broadcast_hook_new(cairn_mpi *c, int root, cairn_hook **out) {
  return cairn_hook_new_mpi_broadcast(c, root, out);
}

/* ---- helpers --------------------------------------------------------------- */

float cairn_mpi_scaled_lr(float base_lr, int size, int64_t step, int64_t warmup_steps) {
  if (size < 1) size = 1;
  if (warmup_steps <= 0 || step >= warmup_steps) return base_lr * (float)size;
  if (step < 0) step = 0;
  double f = (double)step / (double)warmup_steps;
  return (float)((double)base_lr * (1.0 + (double)(size - 1) * f));
}

void cairn_mpi_shard(int rank, int size, int64_t n, int64_t *begin, int64_t *end) {
  if (size < 1) size = 1;
  if (rank < 0) rank = 0;
  if (rank >= size) rank = size - 1;
  if (n < 0) n = 0;
  int64_t q = n / size, r = n % size;
  int64_t b = (int64_t)rank * q + (rank < r ? rank : r);
  if (begin) *begin = b;
  if (end) *end = b + q + (rank < r ? 1 : 0);
}
