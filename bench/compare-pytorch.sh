#!/bin/sh
# compare-pytorch: cairn next to PyTorch on this machine, in one run,
# interleaved (the order swaps every pass):
#   - the MLP 784-1024-1024-10 step (Adam, SGD) and inference forward, batch
#     256: bench_train_step vs bench/torch_mlp_step.py, at 1 and 2 threads;
#     ratio = PyTorch ms / cairn ms (> 1: cairn is faster), and each one's
#     ratio to the GEMM-only floor cairn measured in the same pass;
#   - checkpoint save/load of the same tensors: bench/run-ckpt-bench.sh
#     (bench_ckpt vs bench/torch_ckpt.py).
# Needs Debian's /usr/bin/python3 with python3-torch; without it, says so
# and exits 0.
#
#   sh bench/compare-pytorch.sh [-B builddir] [-p passes] [-r rounds] [-t "1 2"] [-q] [-n]
# -q: quick (fewer steps, small checkpoint set); -n: no checkpoint part.
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=. passes=3 rounds=5 threads="1 2" quick= nockpt=
while getopts B:p:r:t:qn opt; do
  case $opt in
  B) build=$OPTARG ;;
  p) passes=$OPTARG ;;
  r) rounds=$OPTARG ;;
  t) threads=$OPTARG ;;
  q) quick=1 ;;
  n) nockpt=1 ;;
  *) echo "usage: sh $0 [-B builddir] [-p passes] [-r rounds] [-t threads] [-q] [-n]" >&2; exit 2 ;;
  esac
done
py=/usr/bin/python3
if ! [ -x $py ] || ! $py -c 'import torch' 2>/dev/null; then
  echo "compare-pytorch: skipped: no PyTorch in $py (Debian: apt-get install python3-torch)" >&2
  exit 0
fi
step=$build/bench/bench_train_step
. "$here/blas-coretype.sh"
blas_coretype_export "$build/tools/cairn-info" compare-pytorch
[ -x "$step" ] || { echo "compare-pytorch: $step not built" >&2; exit 2; }
steps=10
[ -n "$quick" ] && steps=5
out=$(mktemp -d "${TMPDIR:-/tmp}/cmp-torch.XXXXXX") || exit 1
trap 'rm -rf "$out"' EXIT
for t in $threads; do
  i=1
  while [ "$i" -le "$passes" ]; do
    echo "compare-pytorch: $t thread(s), pass $i/$passes" >&2
    run_c() { "$step" --threads "$t" --repeats "$rounds" --steps $steps --no-machine >"$out/c.$t.$i.json" 2>/dev/null ||
      { echo "compare-pytorch: bench_train_step failed" >&2; exit 1; }; }
    run_t() {
      for m in adam sgd infer; do
        $py "$here/torch_mlp_step.py" --threads "$t" --rounds "$rounds" --steps $steps --mode $m >"$out/t.$t.$i.$m.json" ||
          { echo "compare-pytorch: torch_mlp_step.py failed" >&2; exit 1; }
      done
    }
    if [ $((i % 2)) = 1 ]; then run_c; run_t; else run_t; run_c; fi
    i=$((i + 1))
  done
done
$py - "$out" "$threads" <<'PY'
import glob, json, statistics as st, sys
d, threads = sys.argv[1], sys.argv[2].split()
print("\n-- MLP 784-1024-1024-10, batch 256: cairn vs PyTorch (medians over passes; ratio = torch / cairn)", file=sys.stderr)
print("%-8s %-10s %10s %10s %10s %12s %12s %12s" % ("threads", "what", "cairn ms", "torch ms", "floor ms",
      "torch/cairn", "cairn/floor", "torch/floor"), file=sys.stderr)
names = {"adam": ("train_step_adam", "gemm_floor_step"), "sgd": ("train_step_sgd", "gemm_floor_step"),
         "infer": ("inference_forward", "gemm_floor_forward")}
for t in threads:
    for m, (cn, fn) in names.items():
        cs, fs, ts, r_tc, r_cf, r_tf = [], [], [], [], [], []
        for f in sorted(glob.glob("%s/c.%s.*.json" % (d, t))):
            i = f.split(".")[-2]
            rows = [json.loads(l) for l in open(f) if l.strip()]
            c = next(r["median"] for r in rows if r.get("name") == cn)
            fl = next(r["median"] for r in rows if r.get("name") == fn)
            tj = json.load(open("%s/t.%s.%s.%s.json" % (d, t, i, m)))
            tm = tj["step_ms_median"]
            cs.append(c); fs.append(fl); ts.append(tm)
            r_tc.append(tm / c); r_cf.append(c / fl); r_tf.append(tm / fl)
        rec = {"suite": "compare-pytorch", "name": "mlp_" + m, "threads": int(t), "unit": "ms", "passes": len(cs),
               "cairn_ms_median": round(st.median(cs), 3), "torch_ms_median": round(st.median(ts), 3),
               "floor_ms_median": round(st.median(fs), 3), "torch_over_cairn": round(st.median(r_tc), 3),
               "cairn_over_floor": round(st.median(r_cf), 3), "torch_over_floor": round(st.median(r_tf), 3),
               "torch_over_cairn_min": round(min(r_tc), 3), "torch_over_cairn_max": round(max(r_tc), 3)}
        print(json.dumps(rec))
        print("%-8s %-10s %10.2f %10.2f %10.2f %12.3f %12.3f %12.3f" % (t, m, rec["cairn_ms_median"], rec["torch_ms_median"],
              rec["floor_ms_median"], rec["torch_over_cairn"], rec["cairn_over_floor"], rec["torch_over_floor"]), file=sys.stderr)
PY
if [ -z "$nockpt" ]; then
  echo "compare-pytorch: checkpoint save/load (bench/run-ckpt-bench.sh)" >&2
  sh "$here/run-ckpt-bench.sh" -b "$build/bench/bench_ckpt" -p "$passes" -r 3 ${quick:+-s}
fi
