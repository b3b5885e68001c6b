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
# PyTorch). MPI builds add compare-mpi.sh (3 interleaved passes) either way.
# The restore bench (bench_restore) runs at 2 GiB, --full 6 GiB.
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
blas_coretype_export ./tools/cairn-info/cairn-info run-bench
res=bench-results
mkdir -p $res
: >$res/tables.txt
q=--quick
[ -n "$full" ] && q=
fail=0
for t in $threads; do
  for s in kernels dense gemm optim train_step interop; do
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
# Asynchronous checkpoints (bench/bench_async.c): the stall per save and the
# training loop with a checkpoint every 50 steps, at 2 threads (the target's
# setting) whatever --threads says.
echo "run-bench: async checkpoints, 2 threads" >&2
{ ./bench/bench_async --threads 2 $q 2>&1 >$res/async.t2.json || echo "run-bench: bench_async failed" >&2; } |
  tee -a $res/tables.txt >&2
[ -s $res/async.t2.json ] || fail=1
# Saver restore in bounded memory next to a plain read of the same bytes
# (bench/bench_restore.c): 2 GiB of variables, --full 6 GiB; the file is
# removed afterwards.
rs=2G
[ -n "$full" ] && rs=6G
echo "run-bench: restore, --size $rs" >&2
./bench/bench_restore --size $rs >$res/restore.json || fail=1
grep '"summary"' $res/restore.json | tee -a $res/tables.txt >&2
# The comparison scripts: JSON to <name>.json, their tables (stderr) to
# <name>.txt, then to tables.txt and the terminal.
compare() { # name script args...
  name=$1 script=$2
  shift 2
  sh "$here/$script" "$@" >$res/$name.json 2>$res/$name.txt || fail=1
  tee -a $res/tables.txt <$res/$name.txt >&2
}
# MPI builds: 2 ranks x 1 thread against 1 rank x 2 threads (cairn/mpi.h), three
# interleaved passes at global batch 256 and 1024 (--full: also 512 and 2048,
# between which the ratio crosses 0.9 on a 2-core machine).
b="256 1024"
[ -n "$full" ] && b="256 512 1024 2048"
compare mpi compare-mpi.sh -B . -b "$b" -p 3
if [ $torch = yes ]; then
  if [ -n "$full" ]; then
    compare compare-pytorch compare-pytorch.sh -B . -t "$threads"
  else
    compare compare-pytorch compare-pytorch.sh -B . -t "$threads" -p 1 -r 3 -q
  fi
fi
# The end-to-end figure: Fashion-MNIST to 0.89 test accuracy, cairn-fmnist
# next to PyTorch (skipped without the dataset).
e=2
[ -n "$full" ] && e=20
compare compare-fmnist compare-fmnist.sh -B . -e $e
echo "run-bench: results in $(pwd)/$res" >&2
exit $fail
