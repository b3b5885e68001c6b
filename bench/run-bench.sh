#!/bin/sh
# run-bench: every bench suite at 1 and 2 threads (what `make bench` runs),
# from the build directory. JSON Lines go to bench-results/<suite>.t<T>.json,
# the human tables to the terminal and to bench-results/tables.txt.
#
#   sh bench/run-bench.sh [--full] [--threads "1 2"] [--no-torch]
#
# Default: quick sizes (kernels on 4 M floats, 3 dense shapes, fewer
# repeats, the small checkpoint set, one PyTorch pass). --full: the sizes of
# bench/RESULTS.md (kernel arrays as large as the last-level cache, 6
# shapes, 7 repeats, 107 MB checkpoints, 3 interleaved passes against
# PyTorch). MPI builds add bench_mpi (3 interleaved pairs) either way.
set -u
here=$(cd "$(dirname "$0")" && pwd)
full= threads="1 2" torch=yes
while [ $# -gt 0 ]; do
  case $1 in
  --full) full=1 ;;
  --threads) threads=$2; shift ;;
  --no-torch) torch=no ;;
  *) echo "usage: sh $0 [--full] [--threads \"1 2\"] [--no-torch]" >&2; exit 2 ;;
  esac
  shift
done
[ -x bench/bench_kernels ] || { echo "run-bench: run from the build directory after make" >&2; exit 2; }
. "$here/blas-coretype.sh"
blas_coretype_export ./tools/cairn-info run-bench
res=bench-results
mkdir -p $res
: >$res/tables.txt
q=--quick
[ -n "$full" ] && q=
fail=0
for t in $threads; do
  for s in kernels dense optim train_step; do
    echo "run-bench: $s, $t thread(s)" >&2
    # stderr (the table) to the terminal and to tables.txt
    { ./bench/bench_$s --threads "$t" $q 2>&1 >$res/$s.t$t.json || echo "run-bench: bench_$s failed" >&2; } |
      tee -a $res/tables.txt >&2
    [ -s $res/$s.t$t.json ] || fail=1
  done
  echo "run-bench: checkpoint, $t thread(s)" >&2
  ./bench/bench_ckpt --threads "$t" ${q:+--small} >$res/checkpoint.t$t.json || fail=1
  /usr/bin/python3 - $res/checkpoint.t$t.json "$t" <<'PY' 2>/dev/null | tee -a $res/tables.txt >&2 || true
import json, sys
j = json.load(open(sys.argv[1]))
print("\n-- checkpoint (%s thread(s)), MB/s medians; bench_ckpt JSON in %s" % (sys.argv[2], sys.argv[1]))
def walk(o, p=""):
    if isinstance(o, dict):
        for k, v in o.items(): walk(v, p + ("." if p else "") + k)
    elif isinstance(o, (int, float)) and ("median" in p or "ratio" in p):
        print("%-50s %12.3f" % (p, o))
walk(j)
PY
done
# MPI builds: 2 ranks x 1 thread against 1 rank x 2 threads (issue 7),
# three interleaved pairs, plus the 2 ranks' compute alone (--no-allreduce).
# --bind-to none: Open MPI would otherwise pin a 2-thread rank to one core.
if [ -x bench/bench_mpi ] && command -v mpirun >/dev/null 2>&1; then
  [ "$(id -u)" = 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  echo "run-bench: mpi, 2 ranks x 1 thread vs 1 rank x 2 threads" >&2
  : >$res/mpi.json
  for batch in 256 1024; do
    for pass in 1 2 3; do
      mpirun --bind-to none --oversubscribe -np 2 ./bench/bench_mpi --threads 1 --batch $batch >>$res/mpi.json || fail=1
      mpirun --bind-to none -np 1 ./bench/bench_mpi --threads 2 --batch $batch >>$res/mpi.json || fail=1
      mpirun --bind-to none --oversubscribe -np 2 ./bench/bench_mpi --threads 1 --batch $batch --no-allreduce \
        >>$res/mpi.json || fail=1
    done
  done
  /usr/bin/python3 - $res/mpi.json <<'PY' 2>/dev/null | tee -a $res/tables.txt >&2 || true
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
for batch in sorted({r["global_batch"] for r in rows}):
    rb = [r for r in rows if r["global_batch"] == batch]
    two = [r for r in rb if r["ranks"] == 2 and r["allreduce"]]
    one = [r for r in rb if r["ranks"] == 1]
    alone = [r for r in rb if r["ranks"] == 2 and not r["allreduce"]]
    print("\n-- mpi: MLP 784-1024-1024-10, Adam, global batch %d (medians of %d interleaved passes)" % (batch, len(two)))
    for name, rs in (("2 ranks x 1 thread", two), ("1 rank x 2 threads", one), ("2 ranks, no allreduce", alone)):
        print("%-24s %10.0f examples/s %8.2f ms/step  allreduce %.2f ms (%.0f %%)" % (name,
              st.median(r["examples_per_s"] for r in rs), st.median(r["step_ms"] for r in rs),
              st.median(r["allreduce_ms_per_step"] for r in rs), 100 * st.median(r["allreduce_share"] for r in rs)))
    ratios = [a["examples_per_s"] / b["examples_per_s"] for a, b in zip(two, one)]
    print("2 ranks / 1 rank: median %.3f (passes: %s)" % (st.median(ratios), ", ".join("%.3f" % r for r in ratios)))
PY
fi
if [ $torch = yes ]; then
  if [ -n "$full" ]; then
    sh "$here/compare-pytorch.sh" -B . -t "$threads" >$res/compare-pytorch.json 2>>$res/tables.txt || fail=1
  else
    sh "$here/compare-pytorch.sh" -B . -t "$threads" -p 1 -r 3 -q >$res/compare-pytorch.json 2>>$res/tables.txt || fail=1
  fi
  tail -n 20 $res/tables.txt >&2
fi
# The end-to-end figure: Fashion-MNIST to 0.89 test accuracy, cairn-fmnist
# next to PyTorch (skipped without the dataset).
e=2
[ -n "$full" ] && e=20
sh "$here/compare-fmnist.sh" -B . -e $e >$res/compare-fmnist.json 2>>$res/tables.txt || fail=1
tail -n 8 $res/tables.txt >&2
echo "run-bench: results in $(pwd)/$res" >&2
exit $fail
