#!/bin/sh
# Checkpoint I/O, cairn vs PyTorch, on the same machine in the same run:
# runs bench_ckpt and bench/torch_ckpt.py alternately (PASSES passes of
# ROUNDS rounds each, the order swapped every pass), then prints one JSON
# object, on one line (JSON Lines), with the medians over all rounds of both
# and the ratios cairn sets targets for (bench/RESULTS.md, "Targets"):
#   cairn save+fsync / plain write+fsync   (per-round ratio, target >= 0.9)
#   cairn verified load / torch.load       (ratio of medians, target >= 1.5)
#
#   sh bench/run-ckpt-bench.sh [-b path/to/bench_ckpt] [-p PASSES] [-r ROUNDS] [-d DIR] [-s]
#
# -b defaults to ./bench/bench_ckpt (run from the build directory); -s uses
# the small tensor set (a smoke run). Needs /usr/bin/python3 with
# python3-torch (Debian); without torch only the cairn side is reported.
set -u
here=$(cd "$(dirname "$0")" && pwd)
bench=./bench/bench_ckpt passes=5 rounds=3 dir= small=
while getopts b:p:r:d:s opt; do
  case $opt in
  b) bench=$OPTARG ;;
  p) passes=$OPTARG ;;
  r) rounds=$OPTARG ;;
  d) dir=$OPTARG ;;
  s) small=--small ;;
  *) echo "usage: sh $0 [-b bench_ckpt] [-p passes] [-r rounds] [-d dir] [-s]" >&2; exit 2 ;;
  esac
done
[ -x "$bench" ] || { echo "run-ckpt-bench: $bench not found (build it: make bench/bench_ckpt, or pass -b)" >&2; exit 2; }
py=/usr/bin/python3
torch=yes
$py -c 'import torch' 2>/dev/null || { torch=no; echo "run-ckpt-bench: no torch in $py; cairn only" >&2; }

out=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-bench.XXXXXX") || exit 1
trap 'rm -rf "$out"' EXIT
set -- --rounds "$rounds" ${dir:+--dir "$dir"} $small
run_cairn() { "$bench" "$@" >"$out/cairn.$i.json" || { echo "run-ckpt-bench: bench_ckpt failed" >&2; exit 1; }; }
run_torch() {
  [ $torch = yes ] || return 0
  $py "$here/torch_ckpt.py" "$@" >"$out/torch.$i.json" || { echo "run-ckpt-bench: torch_ckpt.py failed" >&2; exit 1; }
}
i=1
while [ "$i" -le "$passes" ]; do
  echo "run-ckpt-bench: pass $i/$passes" >&2
  if [ $((i % 2)) = 1 ]; then run_cairn "$@"; run_torch "$@"; else run_torch "$@"; run_cairn "$@"; fi
  i=$((i + 1))
done

$py - "$out" <<'PY'
import glob, json, os, statistics, sys
d = sys.argv[1]
def load(kind):
    return [json.load(open(p)) for p in sorted(glob.glob(os.path.join(d, kind + ".*.json")))]
def merge(runs):
    if not runs:
        return None
    series = {}
    for r in runs:
        for k, v in r["per_round_mbps"].items():
            series.setdefault(k, []).extend(v)
    agg = {k: v for k, v in runs[0].items() if k not in ("per_round_mbps", "dir", "rounds") and not k.endswith("_median")}
    agg["passes"] = len(runs)
    agg["rounds_total"] = len(next(iter(series.values())))
    for k, v in series.items():
        agg[k + "_mbps_median"] = round(statistics.median(v))
        agg[k + "_mbps_min_max"] = [min(v), max(v)]
    return agg, series
c, cs = merge(load("cairn"))
t = merge(load("torch"))
ts = None
if t:
    t, ts = t
ratios = {}
save_ratio = [s / w for s, w in zip(cs["cairn_save_fsync"], cs["write_fsync"])]
ratios["cairn_save_over_write_fsync"] = round(statistics.median(save_ratio), 3)
ratios["cairn_load_verified_over_read_hot"] = round(
    statistics.median([l / r for l, r in zip(cs["cairn_load_verified"], cs["read_hot"])]), 3)
targets = {"cairn_save_over_write_fsync >= 0.9": ratios["cairn_save_over_write_fsync"] >= 0.9}
if t:
    m = lambda s, k: statistics.median(s[k])
    ratios["cairn_save_over_torch_save_fsync"] = round(m(cs, "cairn_save_fsync") / m(ts, "torch_save_fsync"), 3)
    ratios["cairn_load_verified_over_torch_load"] = round(m(cs, "cairn_load_verified") / m(ts, "torch_load"), 3)
    ratios["cairn_load_verified_over_torch_load_reuse"] = round(
        m(cs, "cairn_load_verified") / m(ts, "torch_load_reuse"), 3)
    ratios["cairn_load_fresh_over_torch_load"] = round(m(cs, "cairn_load_fresh") / m(ts, "torch_load"), 3)
    targets["cairn_load_verified_over_torch_load >= 1.5"] = ratios["cairn_load_verified_over_torch_load"] >= 1.5
# One line: compare-pytorch.sh appends it to its own JSON Lines.
print(json.dumps({"bench": "ckpt_io_vs_torch", "cairn": c, "torch": t, "ratios": ratios,
                  "targets_met": targets}))
# The table, on stderr: medians in MB/s, then the ratios.
rows = [(k, v) for k, v in sorted(cs.items())] + ([(k, v) for k, v in sorted(ts.items())] if ts else [])
print("\n-- checkpoint I/O, %.1f MB f32 (medians of %d rounds, MB/s)" % (c["mb"], c["rounds_total"]), file=sys.stderr)
for k, v in rows:
    print("%-28s %10.0f" % (k, statistics.median(v)), file=sys.stderr)
for k, v in ratios.items():
    print("%-44s %8.3f" % (k, v), file=sys.stderr)
PY
