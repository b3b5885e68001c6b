#!/bin/sh
# compare-fmnist: the end-to-end figure. `cairn-fmnist train` next to the same
# model in PyTorch (bench/torch_fmnist.py), on Debian's dataset-fashion-mnist:
# 784-256-128-10 ReLU MLP, Adam 1e-3, batch 64, 20 epochs, 1 thread, test
# accuracy after every epoch. Reports for each: the first epoch at >= 0.89
# test accuracy and the training seconds to get there, the median epoch
# time, examples/s, the best and the mean of the last 5 epochs' accuracy.
# cairn's seconds include its checkpoints (every 1000 steps) and its test
# evaluations; PyTorch's include neither. PyTorch runs twice: as it comes, and
# with torch.set_flush_denormal(True) (what cairn's optimizers do).
#
#   sh bench/compare-fmnist.sh [-B builddir] [-e epochs]
# JSON Lines on stdout, the table on stderr. Skipped (exit 0) without the
# dataset; the PyTorch rows are skipped without Debian's python3-torch.
set -u
build=. epochs=20
while getopts B:e: o; do
  case $o in
  B) build=$OPTARG ;;
  e) epochs=$OPTARG ;;
  *) echo "usage: sh $0 [-B builddir] [-e epochs]" >&2; exit 2 ;;
  esac
done
here=$(cd "$(dirname "$0")" && pwd)
. "$here/fmnist-demo.sh"
fmnist_demo_need compare-fmnist "$build"
out=$(mktemp -d "${TMPDIR:-/tmp}/cmp-fmnist.XXXXXX") || exit 1
trap 'rm -rf "$out"' EXIT
steps=$((epochs * 938)) # 60000 / 64 rounded up
echo "compare-fmnist: cairn-fmnist, $epochs epochs" >&2
"$fm" train --checkpoint-dir "$out/ckpt" --threads 1 --batch-size 64 --max-steps $steps --eval-every 938 \
  >"$out/cairn.txt" 2>"$out/cairn.err" || { cat "$out/cairn.err" >&2; exit 1; }
py=/usr/bin/python3
torch=no
if [ -x $py ] && $py -c 'import torch' 2>/dev/null; then
  torch=yes
  echo "compare-fmnist: PyTorch, $epochs epochs, as it comes" >&2
  $py "$here/torch_fmnist.py" --epochs "$epochs" --threads 1 >"$out/torch.json" || exit 1
  echo "compare-fmnist: PyTorch, $epochs epochs, flushing denormals" >&2
  $py "$here/torch_fmnist.py" --epochs "$epochs" --threads 1 --flush-denormal >"$out/torch_ftz.json" || exit 1
else
  echo "compare-fmnist: PyTorch rows skipped: no PyTorch in $py (Debian: apt-get install python3-torch)" >&2
fi
${py:-python3} - "$out" "$torch" <<'PY'
import json, re, statistics as st, sys
out, torch = sys.argv[1], sys.argv[2] == "yes"
runs = {}
rows = []
for line in open(out + "/cairn.txt"):
    m = re.match(r"step (\d+)\s+test_loss=\S+\s+test_accuracy=([0-9.]+)\s+\(([0-9.]+) s\)", line)
    if m:
        rows.append({"epoch": len(rows) + 1, "train_s": float(m.group(3)), "test_accuracy": float(m.group(2))})
runs["cairn"] = rows
if torch:
    runs["pytorch"] = [json.loads(l) for l in open(out + "/torch.json")]
    runs["pytorch_flush_denormal"] = [json.loads(l) for l in open(out + "/torch_ftz.json")]
print("\n-- Fashion-MNIST 784-256-128-10, Adam 1e-3, batch 64, 1 thread (test accuracy after each epoch)",
      file=sys.stderr)
print("%-24s %8s %10s %10s %11s %8s %10s" % ("run", "epoch>=.89", "s to .89", "s/epoch", "examples/s", "best",
      "last-5 mean"), file=sys.stderr)
for name, rs in runs.items():
    first = next((r for r in rs if r["test_accuracy"] >= 0.89), None)
    ep = [b["train_s"] - a["train_s"] for a, b in zip([{"train_s": 0.0}] + rs, rs)]
    rec = {"suite": "compare-fmnist", "name": name, "epochs": len(rs),
           "first_epoch_ge_089": first["epoch"] if first else None,
           "seconds_to_089": first["train_s"] if first else None,
           "epoch_s_median": round(st.median(ep), 3), "examples_per_s": round(60000 / st.median(ep)),
           "best_accuracy": max(r["test_accuracy"] for r in rs),
           "last5_mean_accuracy": round(st.mean(r["test_accuracy"] for r in rs[-5:]), 4),
           "total_train_s": rs[-1]["train_s"]}
    print(json.dumps(rec))
    print("%-24s %8s %10s %10.3f %11d %8.4f %10.4f" % (name, rec["first_epoch_ge_089"] or "-",
          "%.1f" % rec["seconds_to_089"] if first else "-", rec["epoch_s_median"], rec["examples_per_s"],
          rec["best_accuracy"], rec["last5_mean_accuracy"]), file=sys.stderr)
if torch:
    c = st.median([b["train_s"] - a["train_s"] for a, b in zip([{"train_s": 0.0}] + runs["cairn"], runs["cairn"])])
    for peer in ("pytorch", "pytorch_flush_denormal"):
        rs = runs[peer]
        p = st.median([b["train_s"] - a["train_s"] for a, b in zip([{"train_s": 0.0}] + rs, rs)])
        print("epoch time %s / cairn: %.2f" % (peer, p / c), file=sys.stderr)
PY
