/* The streaming-store knob the vector tiers read (kernels.h): in a file of
 * its own, so that the tiers depend on it and dispatch.c depends on the
 * tiers, with no dependency back (tests/call-cycles.sh). */
#include "config.h"

#include <limits.h>
#include <unistd.h>

#include "internal.h"
#include "kernels/kernels.h"

_Thread_local int cairn__kernels_stream;

size_t cairn__stream_min_bytes(void) {
  static size_t cached;
  size_t m = __atomic_load_n(&cached, __ATOMIC_RELAXED);
  if (m) return m;
  long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  m = (size_t)cairn__env_long("CAIRN_STREAM_MIN_BYTES", l3 > 0 ? l3 : 32L << 20, 1, LONG_MAX);
  __atomic_store_n(&cached, m, __ATOMIC_RELAXED);
  return m;
}
