/* The Saver's asynchronous save (cairn/saver.h, "Asynchronous saving"):
 * phase 1 copies the save set and the metadata into a staging buffer on
 * the caller's thread; phase 2, on one background writer thread per saver,
 * commits that copy with the synchronous save's own code
 * (cairn__saver_commit: checkpoint file, rotation list, state file,
 * deletions). This file fills the saver's one "save in flight" slot
 * (cairn__saver_async, saver_impl.h); the saver (saver.c) waits for it,
 * takes its error and frees it, without calling back into this file. The pattern of PyTorch's distributed checkpoint async_save and
 * Orbax's AsyncCheckpointer: the training thread pays a memcpy, the disk is
 * written while training goes on. */
#define _GNU_SOURCE /* syscall(SYS_gettid) for the writer's nice value */
#include "internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cairn/saver.h"
#include "cairn/tensor.h"  /* cairn_alloc */
#include "checkpoint_dir_impl.h"
#include "saver_impl.h"

/* Staging slab: every tensor at a 64-byte boundary (the writer's CRC and
   LZ4 loops run on aligned data, as on the variables themselves). */
#define STAGE_ALIGN 64

/* The writer runs behind training on the same cores: a higher nice value
   lets the training thread win the CPU whenever both want it, so the save
   takes the idle cycles (OpenBLAS waits, memory stalls) first. Linux
   applies setpriority(PRIO_PROCESS, tid) to one thread; elsewhere this is
   a no-op. Raising one's own nice value needs no privilege. */
static void lower_priority(void) {
#if defined(__linux__) && defined(SYS_gettid)
  (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10);
#endif
}

static void *writer_main(void *arg) {
  cairn_saver *s = arg;
  cairn__saver_async *a = s->async;
  lower_priority();
  pthread_mutex_lock(&a->mu);
  for (;;) {
    while (!a->busy && !a->quit) pthread_cond_wait(&a->cv_job, &a->mu);
    if (!a->busy) break; /* quit with nothing to write */
    pthread_mutex_unlock(&a->mu);
    /* Only the writer touches the job and the saver's rotation fields
       now; the caller's thread waits (cairn__saver_async_idle) before it
       reads them. No MPI call is made here, nor anywhere in the commit:
       the training thread's collectives are never interleaved. */
    cairn_status st =
        cairn__saver_commit(s, "saver_save_begin", a->file, a->dir, a->step, a->tp, a->meta, a->n_meta, &a->guard);
    pthread_mutex_lock(&a->mu);
    a->err = st;
    if (st) snprintf(a->msg, sizeof a->msg, "%s", cairn_errmsg());
    a->busy = 0;
    pthread_cond_broadcast(&a->cv_done);
  }
  pthread_mutex_unlock(&a->mu);
  return NULL;
}

static cairn_status async_get(cairn_saver *s, const char *fn, cairn__saver_async **out) {
  if (s->async) {
    *out = s->async;
    return CAIRN_OK;
  }
  cairn__saver_async *a = calloc(1, sizeof *a);
  if (!a) return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  if (pthread_mutex_init(&a->mu, NULL) != 0) {
    free(a);
    return cairn__fail(CAIRN_E_NOMEM, "%s: cannot create a mutex", fn);
  }
  pthread_cond_init(&a->cv_job, NULL);
  pthread_cond_init(&a->cv_done, NULL);
  a->guard.fd = -1;
  a->views = calloc(s->n ? s->n : 1, sizeof *a->views);
  a->tp = calloc(s->n ? s->n : 1, sizeof *a->tp);
  s->async = a;
  if (!a->views || !a->tp) {
    cairn__saver_async_free(s);
    return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  }
  int e = pthread_create(&a->thread, NULL, writer_main, s);
  if (e != 0) {
    cairn__saver_async_free(s);
    return cairn__fail(CAIRN_E_NOMEM, "%s: cannot start the writer thread: %s", fn, strerror(e));
  }
  a->running = 1;
  *out = a;
  return CAIRN_OK;
}

/* A deep copy of the saver's metadata: the caller may set new state
   blobs while phase 2 writes these. */
static cairn_status copy_meta(const cairn_saver *s, const char *fn, cairn__meta_item **out) {
  *out = NULL;
  if (!s->n_meta) return CAIRN_OK;
  cairn__meta_item *m = calloc(s->n_meta, sizeof *m);
  if (!m) return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  for (size_t i = 0; i < s->n_meta; i++) {
    m[i] = s->meta[i];
    m[i].key = cairn__strdup(s->meta[i].key);
    m[i].bytes = NULL;
    if (s->meta[i].bytes) {
      m[i].bytes = malloc(s->meta[i].len + 1);
      if (m[i].bytes) memcpy(m[i].bytes, s->meta[i].bytes, s->meta[i].len + 1);
    }
    if (!m[i].key || (s->meta[i].bytes && !m[i].bytes)) {
      cairn__saver_meta_free(m, i + 1);
      return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
    }
  }
  *out = m;
  return CAIRN_OK;
}

cairn_status cairn__saver_save_begin_guarded(cairn_saver *s, const char *prefix, int64_t global_step, char *path,
                                             size_t len, const cairn__dir_guard *guard) {
  static const char fn[] = "saver_save_begin";
  char *file, *dir;
  int empty;
  /* waits for the save in flight; its error is this call's */
  cairn_status st = cairn__saver_prepare(s, fn, prefix, global_step, path, len, guard, &file, &dir, &empty);
  if (st || empty) return st;
  cairn__saver_async *a = NULL;
  cairn__meta_item *meta = NULL;
  if ((st = async_get(s, fn, &a)) || (st = copy_meta(s, fn, &meta))) {
    free(file);
    free(dir);
    return st;
  }
  /* Phase 2 checks the directory again, from a copy: the writer's lock
     may be gone by then (a session freed without closing). No save is in
     flight here (prepare waited), so the writer does not read a->guard. */
  if (cairn__dir_guard_copy(&a->guard, guard) != 0) {
    cairn__saver_meta_free(meta, s->n_meta);
    free(file);
    free(dir);
    return cairn__fail(CAIRN_E_NOMEM, "%s: out of memory", fn);
  }
  /* The staging slab, sized once for the save set (variables keep their
     shapes) and reused: one copy of the saved state is the memory cost. */
  size_t need = 0;
  for (size_t i = 0; i < s->n; i++)
    need += (cairn_tensor_nbytes(cairn_var_tensor(s->vars[i])) + STAGE_ALIGN - 1) / STAGE_ALIGN * STAGE_ALIGN;
  if (need > a->slab_bytes || !a->slab) {
    /* cairn_alloc: 64-byte aligned, and large blocks get transparent huge
       pages where the system allows them, as the variables' own slabs:
       the copy then runs at memcpy speed, not at page-walk speed. */
    void *p = cairn_alloc(need ? need : STAGE_ALIGN);
    if (!p) {
      cairn__saver_meta_free(meta, s->n_meta);
      free(file);
      free(dir);
      return cairn__fail(CAIRN_E_NOMEM, "%s '%s': cannot allocate the staging buffer of %zu bytes", fn, prefix,
                         need);
    }
    cairn_free(a->slab);
    a->slab = p;
    a->slab_bytes = need;
  }
  /* Phase 1: the snapshot, at this step boundary. */
  size_t off = 0;
  for (size_t i = 0; i < s->n; i++) {
    const cairn_tensor *t = cairn_var_tensor(s->vars[i]);
    size_t bytes = cairn_tensor_nbytes(t);
    cairn_tensor *v = &a->views[i];
    *v = *t;
    v->data = a->slab + off;
    v->owns_data = 0;
    if (bytes) memcpy(v->data, t->data, bytes);
    a->tp[i] = v;
    off += (bytes + STAGE_ALIGN - 1) / STAGE_ALIGN * STAGE_ALIGN;
  }
  /* Phase 2: hand the job over. */
  pthread_mutex_lock(&a->mu);
  free(a->file);
  free(a->dir);
  cairn__saver_meta_free(a->meta, a->n_meta);
  a->file = file;
  a->dir = dir;
  a->step = global_step;
  a->meta = meta;
  a->n_meta = s->n_meta;
  a->busy = 1;
  pthread_cond_signal(&a->cv_job);
  pthread_mutex_unlock(&a->mu);
  if (path) memcpy(path, file, strlen(file) + 1);
  return CAIRN_OK;
}

cairn_status cairn_saver_save_begin(cairn_saver *s, const char *prefix, int64_t global_step, char *path,
                                    size_t len) {
  return cairn__saver_save_begin_guarded(s, prefix, global_step, path, len, NULL);
}

cairn_status cairn_saver_save_begin_in(cairn_saver *s, cairn_checkpoint_dir *d, const char *basename,
                                       int64_t global_step, char *path, size_t len) {
  static const char fn[] = "saver_save_begin";
  char *prefix = NULL;
  cairn_status st = cairn__saver_prefix_in(fn, d, basename, &prefix);
  if (st) return st;
  st = cairn__saver_save_begin_guarded(s, prefix, global_step, path, len, cairn__checkpoint_dir_guard(d));
  free(prefix);
  return st;
}
