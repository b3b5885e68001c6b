#!/bin/sh
# fmnist-seeds: the Fashion-MNIST demo's time to 0.89 over many seeds, per
# precision, paired by seed. The demo as bench/compare-fmnist.sh runs it
# (784-256-128-10 ReLU MLP, Adam 1e-3, batch 64, 1 thread, a test evaluation
# every epoch = 938 steps) for every seed of -s in every precision of -p.
# A seed fixes the initial weights (initializers are functions of the seed
# and the variable's name) and the batch order (the dataset's iterator), in
# either precision, so the runs of one seed differ only by the precision.
#
# The steps to the first evaluation >= the threshold do not depend on the
# machine's load (a run is deterministic per seed and thread count), so they
# are counted over many seeds; the step time is measured apart, on the demo,
# in CPU time, with the precisions interleaved (bench/fmnist_seeds.py says
# how), and time to the threshold = steps x step time. Prints one JSON Lines
# record per run (every evaluation: step, test accuracy, test loss), then a
# summary record per precision (quartiles of the steps, the final accuracy,
# the step time) and one of the ratios (bf16 over f32, paired per seed:
# quartiles, the ratio of the medians, the mean accuracy and loss difference
# over every evaluation; the step time ratio; their product; the model's step
# alone from bench_mlp_step); the table on stderr.
#
#   sh bench/fmnist-seeds.sh [-B builddir] [-s "1 2 3 ..."] [-p "f32 bf16"]
#        [-e epochs] [-E eval_every] [-t threshold] [-j jobs] [-r repeats] [-k dir]
# -E: evaluate every E steps (default 938; the first crossing is also
#     reported at the epoch's granularity when 938 is a multiple of E);
# -j: runs at once (the step counts do not depend on it); -r: rounds of the
#     step-time measurement (0: none; run it on a quiet machine); -k: keep
#     the runs' logs in dir, and reuse the complete ones found there (a run
#     of the same seed, precision and length: delete them after a rebuild).
# Skipped (exit 0) without the dataset.
set -u
build=. seeds="1 2 3 4 5 6 7 8 9 10 11 12 13 14 15" precs="f32 bf16" epochs=20 every=938 thr=0.89 jobs=1
repeats=5 keep=
while getopts B:s:p:e:E:t:j:r:k: o; do
  case $o in
  B) build=$OPTARG ;;
  s) seeds=$OPTARG ;;
  p) precs=$OPTARG ;;
  e) epochs=$OPTARG ;;
  E) every=$OPTARG ;;
  t) thr=$OPTARG ;;
  j) jobs=$OPTARG ;;
  r) repeats=$OPTARG ;;
  k) keep=$OPTARG ;;
  *) echo "usage: sh $0 [-B builddir] [-s seeds] [-p precisions] [-e epochs] [-E eval_every] [-t threshold]" \
       "[-j jobs] [-r repeats] [-k dir]" >&2; exit 2 ;;
  esac
done
here=$(cd "$(dirname "$0")" && pwd)
. "$here/fmnist-demo.sh"
fmnist_demo_need fmnist-seeds "$build"
bm=$build/bench/bench_mlp_step
if [ -n "$keep" ]; then
  out=$keep && mkdir -p "$out" || exit 1
else
  out=$(mktemp -d "${TMPDIR:-/tmp}/fmnist-seeds.XXXXXX") || exit 1
  trap 'rm -rf "$out"' EXIT
fi
steps=$((epochs * 938)) # 60000 / 64 rounded up
echo "fmnist-seeds: seeds {$seeds}, precisions {$precs}, $epochs epochs, $jobs at once" >&2
for s in $seeds; do for p in $precs; do echo "$p $s"; done; done |
  xargs -P "$jobs" -L 1 sh -c '
    d="$0/run-$5-$6"
    [ -n "$4" ] && grep -q "^done at step $2" "$d/out.txt" 2>/dev/null && exit 0
    rm -rf "$d"; mkdir -p "$d"
    "$1" train --checkpoint-dir "$d/ckpt" --threads 1 --batch-size 64 --max-steps "$2" --eval-every "$3" \
      --seed "$6" --precision "$5" --save-checkpoint-steps "$2" >"$d/out.txt" 2>"$d/err.txt" ||
      { echo "fmnist-seeds: $5 seed $6 failed:" >&2; cat "$d/err.txt" >&2; exit 255; }
    rm -rf "$d/ckpt"' "$out" "$fm" "$steps" "$every" "$keep" || exit 1
[ -x "$bm" ] || bm=
/usr/bin/python3 "$here/fmnist_seeds.py" "$out" "$thr" "$every" "$seeds" "$precs" "$fm" "$repeats" $bm
