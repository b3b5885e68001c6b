/* The checkpoint writer's errors and output queue: small pieces and headers
 * are copied into a staging buffer, large pieces queued from the caller's
 * memory, and the queue goes out in one writev; writeback of every 2 MiB is
 * started at once so that commit's fsync finds little left to do. */
#define _GNU_SOURCE 1 /* sync_file_range */
#include "ckpt_write_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* ---- errors ------------------------------------------------------------------ */

cairn_status cairn__ckw_io_status(int err) {
  return (err == ENOSPC || err == EDQUOT) ? CAIRN_E_NOSPC : CAIRN_E_IO;
}

cairn_status cairn__ckw_set_failed(cairn_ckpt_writer *w, cairn_status s) {
  if (!w->failed) {
    w->failed = s;
    snprintf(w->fail_msg, sizeof w->fail_msg, "%s", cairn_errmsg());
  }
  return s;
}

cairn_status cairn__ckw_check_usable(cairn_ckpt_writer *w, const char *fn) {
  if (!w) return cairn__fail(CAIRN_E_NULL, "%s: writer is NULL", fn);
  if (w->failed)
    return cairn__fail(CAIRN_E_STATE, "%s: '%s': the writer failed earlier (%s); only abort is valid", fn, w->path,
                       w->fail_msg);
  return CAIRN_OK;
}

/* ---- output queue ------------------------------------------------------------ */

static cairn_status write_iov(cairn_ckpt_writer *w) {
  struct iovec *v = w->iov;
  int n = w->niov;
  while (n > 0) {
    ssize_t k = writev(w->fd, v, n > IOV_MAX ? IOV_MAX : n);
    if (k < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      return cairn__ckw_set_failed(w, cairn__fail(cairn__ckw_io_status(e), "ckpt_writer: writing '%s' (for '%s') at offset %llu: %s",
                                       w->tmp, w->path, (unsigned long long)w->flushed, strerror(e)));
    }
    if (k == 0)
      return cairn__ckw_set_failed(w, cairn__fail(CAIRN_E_IO, "ckpt_writer: writing '%s' at offset %llu: write returned 0",
                                       w->tmp, (unsigned long long)w->flushed));
    w->flushed += (uint64_t)k;
    size_t left = (size_t)k;
    while (n > 0 && left >= v->iov_len) {
      left -= v->iov_len;
      v++;
      n--;
    }
    if (n > 0 && left) {
      v->iov_base = (char *)v->iov_base + left;
      v->iov_len -= left;
    }
  }
  return CAIRN_OK;
}

cairn_status cairn__ckw_flush(cairn_ckpt_writer *w) {
  if (w->failed) return w->failed;
  cairn_status s = w->niov ? write_iov(w) : CAIRN_OK;
  w->niov = 0;
  w->n_ext = 0;
  w->stage_len = 0;
  if (s) return s;
#if defined(__linux__) && defined(SYNC_FILE_RANGE_WRITE)
  /* Start writeback early so that commit's fsync has little left to do;
   * errors surface in fsync. */
  if (!w->no_fsync && w->flushed - w->synced >= SYNC_EVERY) {
    (void)sync_file_range(w->fd, (off_t)w->synced, (off_t)(w->flushed - w->synced), SYNC_FILE_RANGE_WRITE);
    w->synced = w->flushed;
  }
#endif
  return CAIRN_OK;
}

static void queue(cairn_ckpt_writer *w, const void *p, size_t len, int ext) {
  if (w->niov && (const char *)w->iov[w->niov - 1].iov_base + w->iov[w->niov - 1].iov_len == (const char *)p &&
      !ext) {
    w->iov[w->niov - 1].iov_len += len;
  } else {
    w->iov[w->niov].iov_base = (void *)p;
    w->iov[w->niov].iov_len = len;
    w->niov++;
  }
  w->n_ext += ext;
  w->off += len;
}

cairn_status cairn__ckw_reserve(cairn_ckpt_writer *w, size_t len, unsigned char **out) {
  if (w->stage_len + len > STAGE_CAP || w->niov + 2 > MAX_IOV) {
    cairn_status s = cairn__ckw_flush(w);
    if (s) return s;
  }
  *out = w->stage + w->stage_len;
  w->stage_len += len;
  queue(w, *out, len, 0);
  return CAIRN_OK;
}

cairn_status cairn__ckw_put_copy(cairn_ckpt_writer *w, const void *p, size_t len) {
  unsigned char *d;
  cairn_status s = cairn__ckw_reserve(w, len, &d);
  if (!s && len) memcpy(d, p, len);
  return s;
}

cairn_status cairn__ckw_put_ext(cairn_ckpt_writer *w, const void *p, size_t len) {
  if (len == 0) return CAIRN_OK;
  if (w->niov + 2 > MAX_IOV) {
    cairn_status s = cairn__ckw_flush(w);
    if (s) return s;
  }
  queue(w, p, len, 1);
  return CAIRN_OK;
}

cairn_status cairn__ckw_put_zeros(cairn_ckpt_writer *w, size_t len) {
  while (len) {
    size_t k = len < STAGE_CAP ? len : STAGE_CAP;
    unsigned char *d;
    cairn_status s = cairn__ckw_reserve(w, k, &d);
    if (s) return s;
    memset(d, 0, k);
    len -= k;
  }
  return CAIRN_OK;
}
