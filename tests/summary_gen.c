/* tests/summary_gen: writes a known event file for tests/summary-protobuf.sh
 * (which decodes it with the real protobuf library) and prints its path. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>

#include "cairn.h"

static double wall(void *ctx) {
  (void)ctx;
  return 1700000000.25;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: summary_gen LOGDIR\n");
    return 2;
  }
  cairn_event_writer_options o = cairn_event_writer_options_default();
  o.wall_clock = wall;
  cairn_event_writer *w;
  cairn_status st = cairn_event_writer_new(argv[1], &o, &w);
  if (st == CAIRN_OK) st = cairn_event_writer_add_session_log(w, CAIRN_SESSION_LOG_START, NULL, 301);
  for (int i = 0; i < 5 && st == CAIRN_OK; i++) st = cairn_event_writer_add_scalar(w, "loss", 1.0 / (i + 1), 301 + i);
  if (st == CAIRN_OK) st = cairn_event_writer_add_scalar(w, "train/accuracy", 0.8125, 305);
  if (st == CAIRN_OK) st = cairn_event_writer_add_scalar(w, "neg", -7.25, -9);
  if (st == CAIRN_OK) st = cairn_event_writer_add_session_log(w, CAIRN_SESSION_LOG_CHECKPOINT, "/d/model.ckpt-305", 305);
  if (st == CAIRN_OK) st = cairn_event_writer_close(w);
  if (st != CAIRN_OK) {
    fprintf(stderr, "summary_gen: %s\n", cairn_errmsg());
    return 1;
  }
  puts(cairn_event_writer_path(w));
  cairn_event_writer_free(w);
  return 0;
}
