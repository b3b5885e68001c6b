#!/bin/sh
# compare-kernels: the vector kernels of several builds (e.g. the commit
# before a change and after it) next to PyTorch's same ops, in one run,
# interleaved (the order of the builds and PyTorch rotates every pass):
# bench_kernels --no-ref of each build and bench/torch_kernels.py, same
# array size, same thread counts. Prints a Markdown table of the medians
# over the passes: GB/s of explicit bytes and, in brackets, the fraction of
# the in-place-update bandwidth each measured in its own rounds; then
# last/first build and last build/PyTorch (> 1: faster).
# Needs Debian's /usr/bin/python3 (the summary; PyTorch rows only with
# python3-torch). BENCH_CLOCK=cpu is passed on (use it at 1 thread only).
#
# -k "a,b": only these kernels (bench_kernels' and torch_kernels.py's --only).
# -i avx2|avx512: cairn's tier to compare (default: the one cairn picks on
#    this CPU, as a user's program runs); the table says which, and which
#    kernels PyTorch ran ("CPU capability" in torch.__config__.show()).
#
#   sh bench/compare-kernels.sh -B "before after" [-p passes] [-r repeats] [-t "1 2"] [-n floats] [-k kernels]
#        [-i isa] [-o outdir]
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=. passes=3 repeats=3 threads="1 2" n=16000000 keep= only= isa=
while getopts B:p:r:t:n:k:i:o: opt; do
  case $opt in
  B) build=$OPTARG ;;
  p) passes=$OPTARG ;;
  r) repeats=$OPTARG ;;
  t) threads=$OPTARG ;;
  n) n=$OPTARG ;;
  k) only=$OPTARG ;;
  i) isa=$OPTARG ;;
  o) keep=$OPTARG ;;
  *) echo "usage: sh $0 [-B builds] [-p passes] [-r repeats] [-t threads] [-n floats] [-k kernels] [-i isa] [-o outdir]" >&2; exit 2 ;;
  esac
done
py=/usr/bin/python3
[ -x $py ] || { echo "compare-kernels: needs $py" >&2; exit 2; }
torch=1
$py -c 'import torch' 2>/dev/null || { echo "compare-kernels: no PyTorch in $py: PyTorch columns left empty" >&2; torch=; }
for b in $build; do
  [ -x "$b/bench/bench_kernels" ] || { echo "compare-kernels: $b/bench/bench_kernels not built" >&2; exit 2; }
done
if [ -n "$keep" ]; then out=$keep; mkdir -p "$out"; else
  out=$(mktemp -d "${TMPDIR:-/tmp}/cmp-kernels.XXXXXX") || exit 1
  trap 'rm -rf "$out"' EXIT
fi
k=0
for b in $build; do k=$((k + 1)); echo "$b" >"$out/label.$k"; done
nb=$k
for t in $threads; do
  i=1
  while [ "$i" -le "$passes" ]; do
    echo "compare-kernels: $t thread(s), pass $i/$passes; load: $(uptime | sed 's/.*load/load/')" >&2
    echo "$t $i $(uptime | sed 's/.*load average: //')" >>"$out/load"
    j=0
    # rotate: pass i starts with member (i mod (nb+1)) of (builds..., torch)
    while [ "$j" -le "$nb" ]; do
      m=$(( (i + j) % (nb + 1) ))
      if [ "$m" = "$nb" ]; then
        [ -n "$torch" ] && { $py "$here/torch_kernels.py" --threads "$t" --repeats "$repeats" --n "$n" ${only:+--only "$only"} >"$out/t.$t.$i.json" ||
          { echo "compare-kernels: torch_kernels.py failed" >&2; exit 1; }; }
      else
        kk=$((m + 1))
        b=$(cat "$out/label.$kk")
        "$b/bench/bench_kernels" --threads "$t" --repeats "$repeats" --no-machine --no-ref --n "$n" ${only:+--only "$only"} ${isa:+--isa "$isa"} \
          >"$out/c.$kk.$t.$i.json" 2>/dev/null || { echo "compare-kernels: $b/bench/bench_kernels failed" >&2; exit 1; }
      fi
      j=$((j + 1))
    done
    i=$((i + 1))
  done
done
$py - "$out" "$nb" "$threads" "$passes" "$isa" <<'EOF'
import glob, json, statistics, sys
out, nb, threads, passes, isa = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), int(sys.argv[4]), sys.argv[5]
if not isa:  # the tier cairn picks here: the context record of any run
    for f in glob.glob(f"{out}/c.*.json"):
        ctx = json.loads(open(f).readline()).get("context", {})
        isa = ctx.get("isa", "")
        if isa:
            break
cap = ""
for f in glob.glob(f"{out}/t.*.json"):
    cap = json.loads(open(f).readline()).get("capability", "")
    break
lab = [open(f"{out}/label.{k}").read().strip() for k in range(1, nb + 1)]
def load(pattern):
    d = {}
    for f in glob.glob(pattern):
        for l in open(f):
            j = json.loads(l)
            if "name" not in j:
                continue
            name = j["name"].split("/")[0]
            if j.get("bench") == "torch_kernels":
                d.setdefault(name, []).append((j["gbs"], j["ratio_inplace"]))
            elif j["name"].endswith("/" + isa):
                d.setdefault(name, []).append((j["median"], j["ratio"]))
    return d
med = lambda v, i: statistics.median(x[i] for x in v) if v else float("nan")
print(f"cairn's {isa} tier" + (f"; PyTorch's CPU capability: {cap}" if cap else "") + "\n")
print("| kernel | threads | " + " | ".join(f"{l} GB/s (× in-place)" for l in lab) +
      " | PyTorch GB/s (× in-place) | last/first | last/PyTorch |")
print("|---|---|" + "---|" * (nb + 3))
for t in threads:
    C = [load(f"{out}/c.{k}.{t}.*.json") for k in range(1, nb + 1)]
    T = load(f"{out}/t.{t}.*.json")
    for name in C[-1]:
        cells = [f"{med(c.get(name), 0):.2f} ({med(c.get(name), 1):.2f})" for c in C]
        tv = T.get(name)
        tc = f"{med(tv, 0):.2f} ({med(tv, 1):.2f})" if tv else "—"
        lf = med(C[-1].get(name), 0) / med(C[0].get(name), 0) if C[0].get(name) else float("nan")
        lt = f"{med(C[-1][name], 0) / med(tv, 0):.2f}" if tv else "—"
        print(f"| {name} | {t} | " + " | ".join(cells) + f" | {tc} | {lf:.2f} | {lt} |")
print()
print("load average (1/5/15 min) at the start of each pass (threads, pass):")
print(open(f"{out}/load").read())
EOF
