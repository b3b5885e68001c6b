#!/bin/sh
# tests/bench-jsonl.sh — every file the benchmarks call JSON is JSON Lines
# (one object per line, so both a JSON Lines reader and a per-line
# json.loads read it), run by `make check` (TAP). A real `make bench` takes
# minutes, so this runs the checkpoint writers on the small tensor set for
# one round, and checks the rest statically:
#   - bench_ckpt --small --rounds 1 prints exactly one line, a JSON object;
#   - bench/run-ckpt-bench.sh (bench_ckpt, bench/torch_ckpt.py when PyTorch
#     is installed, and its merge) on the same: every stdout line a JSON
#     object (compare-pytorch.sh appends these lines to its own);
#   - no bench script pretty-prints JSON (json.dumps(..., indent=...)).
# Parsing needs /usr/bin/python3 (run-ckpt-bench.sh's own interpreter);
# without it those points are skipped.
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
. "$top_srcdir/tests/tap.sh"
BENCH="$top_builddir/bench/bench_ckpt"
PY=/usr/bin/python3

tap_tmpdir bench-jsonl

echo "1..3"
TAP_LINES=12
# Every line of FILE a JSON object, and at least one line.
jsonl() {
  [ -s "$1" ] && "$PY" -c '
import json, sys
for i, line in enumerate(open(sys.argv[1]), 1):
    if not isinstance(json.loads(line), dict):
        sys.exit("line %d: not an object" % i)' "$1" 2>"$T/why"
}
have_py=yes
[ -x "$PY" ] || have_py=no

"$BENCH" --small --rounds 1 --threads 1 --dir "$T" >"$T/out" 2>"$T/err"
rc=$?
lines=$(wc -l <"$T/out")
if [ "$rc" -ne 0 ]; then
  not_ok "bench_ckpt --small --rounds 1: one JSON object on one line (exit $rc)"
elif [ "$have_py" = no ]; then
  if [ "$lines" -eq 1 ] && grep -q '^{.*}$' "$T/out"; then
    ok "bench_ckpt --small --rounds 1: one line {...} (no $PY to parse it)"
  else
    not_ok "bench_ckpt --small --rounds 1: one line {...} ($lines lines)"
  fi
elif [ "$lines" -eq 1 ] && jsonl "$T/out"; then
  ok "bench_ckpt --small --rounds 1: one JSON object on one line"
else
  not_ok "bench_ckpt --small --rounds 1: one JSON object on one line ($lines lines; $(cat "$T/why" 2>/dev/null))"
fi

if [ "$have_py" = no ]; then
  ok "run-ckpt-bench.sh -s -p 1 -r 1: JSON Lines # SKIP no $PY"
else
  sh "$top_srcdir/bench/run-ckpt-bench.sh" -b "$BENCH" -p 1 -r 1 -s -d "$T" >"$T/out" 2>"$T/err"
  rc=$?
  if [ "$rc" -eq 0 ] && jsonl "$T/out"; then
    ok "run-ckpt-bench.sh -s -p 1 -r 1: $(wc -l <"$T/out") line(s), each a JSON object"
  else
    not_ok "run-ckpt-bench.sh -s -p 1 -r 1: JSON Lines (exit $rc; $(cat "$T/why" 2>/dev/null))"
  fi
fi

hits=$(grep -n 'json\.dumps([^#]*indent' "$top_srcdir"/bench/*.py "$top_srcdir"/bench/*.sh 2>/dev/null)
if [ -z "$hits" ]; then
  ok "bench/: no pretty-printed (multi-line) JSON writer"
else
  printf '%s\n' "$hits" >"$T/out"
  : >"$T/err"
  not_ok "bench/: no pretty-printed (multi-line) JSON writer"
fi

[ "$n" -eq 3 ] || echo "# planned 3 tests, ran $n"
[ "$failed" -eq 0 ]
