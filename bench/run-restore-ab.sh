#!/bin/sh
# bench/run-restore-ab.sh: verified restore, default codec vs compact, of two
# builds (before, after) interleaved in one run, at 1 and 2 threads.
#
#   sh bench/run-restore-ab.sh BEFORE_BUILD AFTER_BUILD REPEATS CKPT...
#
# Each repeat runs `bench/bench_ckpt --input CKPT... --rounds 5` of both
# builds (the order alternates) at OMP_NUM_THREADS=1 and 2; one JSON line
# each, tagged with build and threads, on stdout. Medians: bench/ab-medians.py.
set -eu
before=$1 after=$2 reps=$3
shift 3
inputs=""
for f in "$@"; do inputs="$inputs --input $f"; done
dir=${TMPDIR:-/tmp}
r=0
while [ "$r" -lt "$reps" ]; do
  for t in 1 2; do
    if [ $((r % 2)) -eq 0 ]; then order="before after"; else order="after before"; fi
    for b in $order; do
      if [ "$b" = before ]; then bd=$before; else bd=$after; fi
      # shellcheck disable=SC2086
      OMP_NUM_THREADS=$t "$bd/bench/bench_ckpt" $inputs --dir "$dir" --rounds 5 |
        sed "s/^{/{\"build\": \"$b\", \"threads\": $t, \"repeat\": $r, /"
    done
  done
  r=$((r + 1))
done
