#!/bin/sh
# compare-pytorch: cairn next to PyTorch on this machine, in one run,
# interleaved (the order swaps every pass):
#   - the MLP 784-1024-1024-10 step (Adam, SGD) and inference forward, batch
#     256: bench_train_step vs bench/torch_mlp_step.py, at 1 and 2 threads;
#     ratio = PyTorch ms / cairn ms (> 1: cairn is faster), and each one's
#     ratio to the GEMM-only floor cairn measured in the same pass (its 8
#     GEMMs as cairn cuts them), to the best-of-alternatives floor (GEMM
#     by GEMM, the fastest library and layout bench_train_step timed) and to
#     the FMA-peak floor (the step's FLOPs / the FMA peak measured in the same
#     pass): torch/peak is the most any fp32 program could be faster than
#     PyTorch on this machine;
#   - the same in bf16 mixed precision (rows adam_bf16, infer_bf16): cairn's
#     CAIRN_PRECISION_BF16 model vs PyTorch under torch.autocast("cpu",
#     dtype=torch.bfloat16); there the peak column is the bf16 dot-product
#     peak (vdpbf16ps loop), the floor columns are empty, and bf16/fp32 is
#     cairn's bf16 time over its fp32 time of the same pass;
#   - checkpoint save/load of the same tensors: bench/run-ckpt-bench.sh
#     (bench_ckpt vs bench/torch_ckpt.py).
# Needs Debian's /usr/bin/python3 with python3-torch; without it, says so
# and exits 0.
#
#   sh bench/compare-pytorch.sh [-B builddir] [-p passes] [-r rounds] [-t "1 2"] [-q] [-n]
# -q: quick (fewer steps, small checkpoint set); -n: no checkpoint part.
# -B "dir1 dir2 ...": several builds (e.g. configured --with-dnnl,
# --with-blas=blis) side by side in the same passes, one table row each; the
# checkpoint part uses the first.
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
first=${build%% *}
. "$here/blas-coretype.sh"
blas_coretype_export "$first/tools/cairn-info/cairn-info" compare-pytorch
for b in $build; do
  [ -x "$b/bench/bench_train_step" ] || { echo "compare-pytorch: $b/bench/bench_train_step not built" >&2; exit 2; }
done
steps=10
[ -n "$quick" ] && steps=5
out=$(mktemp -d "${TMPDIR:-/tmp}/cmp-torch.XXXXXX") || exit 1
trap 'rm -rf "$out"' EXIT
# label of build k: the GEMM engine cairn-info names ("gemm engine ..."), else OpenBLAS
k=0
for b in $build; do
  k=$((k + 1))
  lab=$("$b/tools/cairn-info/cairn-info" 2>/dev/null | sed -n '1s/.*; gemm engine \([^;]*\).*/\1/p')
  echo "${lab:-OpenBLAS} ($b)" >"$out/label.$k"
done
for t in $threads; do
  i=1
  while [ "$i" -le "$passes" ]; do
    echo "compare-pytorch: $t thread(s), pass $i/$passes" >&2
    run_c() {
      k=0
      for b in $build; do
        k=$((k + 1))
        "$b/bench/bench_train_step" --threads "$t" --repeats "$rounds" --steps $steps --no-machine \
          >"$out/c.$k.$t.$i.json" 2>/dev/null || { echo "compare-pytorch: $b/bench/bench_train_step failed" >&2; exit 1; }
      done
    }
    run_t() {
      for m in adam sgd infer; do
        $py "$here/torch_mlp_step.py" --threads "$t" --rounds "$rounds" --steps $steps --mode $m >"$out/t.$t.$i.$m.json" ||
          { echo "compare-pytorch: torch_mlp_step.py failed" >&2; exit 1; }
      done
      for m in adam infer; do
        $py "$here/torch_mlp_step.py" --threads "$t" --rounds "$rounds" --steps $steps --mode $m --autocast bf16 \
          >"$out/t.$t.$i.${m}_bf16.json" || { echo "compare-pytorch: torch_mlp_step.py failed" >&2; exit 1; }
      done
    }
    if [ $((i % 2)) = 1 ]; then run_c; run_t; else run_t; run_c; fi
    i=$((i + 1))
  done
done
$py - "$out" "$threads" <<'PY'
import glob, json, os, statistics as st, sys
d, threads = sys.argv[1], sys.argv[2].split()
builds = sorted(int(f.split(".")[-1]) for f in glob.glob(d + "/label.*"))
labels = {k: open("%s/label.%d" % (d, k)).read().strip() for k in builds}
print("\n-- MLP 784-1024-1024-10, batch 256: cairn vs PyTorch (medians over passes; ratio = torch / cairn)", file=sys.stderr)
print("   floor: cairn's 8 GEMMs as it cuts them; best: GEMM by GEMM the fastest alternative timed;", file=sys.stderr)
print("   peak: the FLOPs at the FMA peak measured in the same pass (torch/peak: the most any program could gain)",
      file=sys.stderr)
for k in builds:
    print("   build %d: %s" % (k, labels[k]), file=sys.stderr)
print("%-5s %-7s %-10s %9s %9s %9s %9s %9s %11s %11s %11s %11s %11s %11s %10s" % ("build", "threads", "what", "cairn ms",
      "torch ms", "floor ms", "best ms", "peak ms", "torch/cairn", "cairn/floor", "cairn/best", "torch/best",
      "cairn/peak", "torch/peak", "bf16/fp32"), file=sys.stderr)
names = {"adam": ("train_step_adam", "gemm_floor_step", "gemm_best_floor_step", "fma_peak_floor_step", None),
         "sgd": ("train_step_sgd", "gemm_floor_step", "gemm_best_floor_step", "fma_peak_floor_step", None),
         "infer": ("inference_forward", "gemm_floor_forward", "gemm_best_floor_forward", "fma_peak_floor_forward", None),
         "adam_bf16": ("train_step_adam_bf16", "-", "-", "bf16_peak_floor_step", "train_step_adam"),
         "infer_bf16": ("inference_forward_bf16", "-", "-", "bf16_peak_floor_forward", "inference_forward")}
for k in builds:
    for t in threads:
        for m, (cn, fn, bn, pn, f32n) in names.items():
            cs, fs, bs, ps, ts, r_tc, r_cf, r_cb, r_tb, r_cp, r_tp, r_bf = [], [], [], [], [], [], [], [], [], [], [], []
            for f in sorted(glob.glob("%s/c.%d.%s.*.json" % (d, k, t))):
                i = f.split(".")[-2]
                rows = [json.loads(l) for l in open(f) if l.strip()]
                get = lambda n: next((r["median"] for r in rows if r.get("name") == n), float("nan"))
                c, fl, bf, pk = get(cn), get(fn), get(bn), get(pn)
                tm = json.load(open("%s/t.%s.%s.%s.json" % (d, t, i, m)))["step_ms_median"]
                cs.append(c); fs.append(fl); bs.append(bf); ps.append(pk); ts.append(tm)
                r_tc.append(tm / c); r_cf.append(c / fl); r_cb.append(c / bf); r_tb.append(tm / bf)
                r_cp.append(c / pk); r_tp.append(tm / pk)
                r_bf.append(c / get(f32n) if f32n else float("nan"))
            rec = {"suite": "compare-pytorch", "name": "mlp_" + m, "build": labels[k], "threads": int(t), "unit": "ms",
                   "passes": len(cs), "cairn_ms_median": round(st.median(cs), 3), "torch_ms_median": round(st.median(ts), 3),
                   "floor_ms_median": round(st.median(fs), 3), "best_floor_ms_median": round(st.median(bs), 3),
                   "torch_over_cairn": round(st.median(r_tc), 3), "cairn_over_floor": round(st.median(r_cf), 3),
                   "cairn_over_best_floor": round(st.median(r_cb), 3), "torch_over_best_floor": round(st.median(r_tb), 3),
                   "fma_peak_floor_ms_median": round(st.median(ps), 3), "cairn_over_peak_floor": round(st.median(r_cp), 3),
                   "torch_over_peak_floor": round(st.median(r_tp), 3), "cairn_bf16_over_fp32": round(st.median(r_bf), 3),
                   "torch_over_cairn_min": round(min(r_tc), 3), "torch_over_cairn_max": round(max(r_tc), 3)}
            rec = {a: (None if isinstance(v, float) and v != v else v) for a, v in rec.items()}
            print(json.dumps(rec))
            rec = {a: (float("nan") if v is None else v) for a, v in rec.items()}
            print("%-5d %-7s %-10s %9.2f %9.2f %9.2f %9.2f %9.2f %11.3f %11.3f %11.3f %11.3f %11.3f %11.3f %10.3f" % (k, t, m,
                  rec["cairn_ms_median"], rec["torch_ms_median"], rec["floor_ms_median"], rec["best_floor_ms_median"],
                  rec["fma_peak_floor_ms_median"], rec["torch_over_cairn"], rec["cairn_over_floor"],
                  rec["cairn_over_best_floor"], rec["torch_over_best_floor"], rec["cairn_over_peak_floor"],
                  rec["torch_over_peak_floor"], rec["cairn_bf16_over_fp32"]), file=sys.stderr)
PY
if [ -z "$nockpt" ]; then
  echo "compare-pytorch: checkpoint save/load (bench/run-ckpt-bench.sh)" >&2
  sh "$here/run-ckpt-bench.sh" -b "$first/bench/bench_ckpt" -p "$passes" -r 3 ${quick:+-s}
fi
