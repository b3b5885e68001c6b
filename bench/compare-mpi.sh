#!/bin/sh
# compare-mpi: data-parallel throughput on one machine (cairn/mpi.h). For each
# global batch, P interleaved passes of
#   mpirun -np 2 bench_mpi --threads 1          (2 ranks x 1 thread)
#   mpirun -np 1 bench_mpi --threads 2          (1 rank x 2 threads)
#   mpirun -np 2 bench_mpi --threads 1 --no-allreduce   (the ranks' compute alone)
# and a table of medians: examples/s, step, the allreduce proper and its
# share, the wait for the slower rank, and the per-pass ratio 2 ranks / 1 rank.
# --bind-to none: Open MPI would otherwise pin a 2-thread rank to one core.
#
#   sh bench/compare-mpi.sh [-B builddir] [-b "256 1024"] [-p passes] [-o adam|sgd] [-- bench_mpi args]
# JSON Lines on stdout, the table on stderr. Skipped (exit 0) without
# bench_mpi (a build without MPI) or mpirun.
set -u
build=. batches="256 1024" passes=3 optim=adam
while getopts B:b:p:o: o; do
  case $o in
  B) build=$OPTARG ;;
  b) batches=$OPTARG ;;
  p) passes=$OPTARG ;;
  o) optim=$OPTARG ;;
  *) echo "usage: sh $0 [-B builddir] [-b batches] [-p passes] [-o adam|sgd] [-- bench_mpi args]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
bench=$build/bench/bench_mpi
if ! [ -x "$bench" ] || ! command -v mpirun >/dev/null 2>&1; then
  echo "compare-mpi: skipped: no $bench (configure found no MPI) or no mpirun" >&2
  exit 0
fi
here=$(cd "$(dirname "$0")" && pwd)
. "$here/blas-coretype.sh"
blas_coretype_export "$build/tools/cairn-info/cairn-info" compare-mpi
[ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(mktemp "${TMPDIR:-/tmp}/cmp-mpi.XXXXXX") || exit 1
trap 'rm -f "$out"' EXIT
extra="$*" # bench_mpi arguments (plain words)
run() { # np threads [args]
  np=$1 t=$2
  shift 2
  mpirun --bind-to none --oversubscribe -np $np "$bench" --threads $t --batch $batch --optim $optim $extra "$@" \
    >>"$out" || fail=1
}
fail=0
for batch in $batches; do
  echo "compare-mpi: global batch $batch, $passes passes" >&2
  for pass in $(seq "$passes"); do
    run 2 1
    run 1 2
    run 2 1 --no-allreduce
  done
done
# JSON Lines only: mpirun may add lines of its own.
grep '^{' "$out"
/usr/bin/python3 - "$out" <<'PY' >&2 || true
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
for batch in sorted({r["global_batch"] for r in rows}):
    rb = [r for r in rows if r["global_batch"] == batch]
    two = [r for r in rb if r["ranks"] == 2 and r["allreduce"]]
    one = [r for r in rb if r["ranks"] == 1]
    alone = [r for r in rb if r["ranks"] == 2 and not r["allreduce"]]
    print("\n-- mpi: MLP 784-1024-1024-10, %s, global batch %d (medians of %d interleaved passes)"
          % (rb[0]["optim"], batch, len(two)))
    for name, rs in (("2 ranks x 1 thread", two), ("1 rank x 2 threads", one), ("2 ranks, no allreduce", alone)):
        print("%-24s %10.0f examples/s %8.2f ms/step  allreduce %.2f ms (%.0f %%)  waiting for the other rank %.2f ms"
              % (name, st.median(r["examples_per_s"] for r in rs), st.median(r["step_ms"] for r in rs),
                 st.median(r["allreduce_ms_per_step"] for r in rs), 100 * st.median(r["allreduce_share"] for r in rs),
                 st.median(r["peer_wait_ms_per_step"] for r in rs)))
    ratios = [a["examples_per_s"] / b["examples_per_s"] for a, b in zip(two, one)]
    alone_r = [a["examples_per_s"] / b["examples_per_s"] for a, b in zip(alone, one)]
    print("2 ranks / 1 rank: median %.3f (passes: %s); compute alone: median %.3f"
          % (st.median(ratios), ", ".join("%.3f" % r for r in ratios), st.median(alone_r)))
PY
exit $fail
