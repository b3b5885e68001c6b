#!/bin/sh
# tests/bench-restore.sh — bench/bench_restore (the restore-in-bounded-memory
# bench of `make bench`) on a small model, one round, run by `make check`
# (TAP): it prints JSON Lines (one object per save, plain read and restore,
# then a summary), the restore's extra memory is within its bound
# (max(64 MiB, the largest tensor): a memory figure, not a timing, so it
# holds on a busy machine), and it removes its checkpoint.
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
. "$top_srcdir/tests/tap.sh"
BENCH="$top_builddir/bench/bench_restore"
PY=/usr/bin/python3

tap_tmpdir bench-restore

echo "1..3"
"$BENCH" --size 128M --rounds 1 --dir "$T" >"$T/out" 2>"$T/err"
rc=$?
if [ $rc -eq 0 ] && [ "$(wc -l <"$T/out")" -eq 4 ]; then
  ok "bench_restore --size 128M --rounds 1: four lines"
else
  not_ok "bench_restore --size 128M --rounds 1: four lines (exit $rc)"
fi
if [ ! -x "$PY" ]; then
  ok "# SKIP no $PY to parse the JSON"
elif "$PY" -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
s = lines[-1]
assert all(isinstance(l, dict) for l in lines), "not objects"
assert [l["name"] for l in lines[:3]] == ["save", "read_hot", "restore"] or \
       [l["name"] for l in lines[:3]] == ["save", "restore", "read_hot"], "names"
assert s["name"] == "summary" and s["extra_met"] is True, "restore extra %.1f MiB > %.1f" % (
    s["restore_extra_mib"], s["extra_bound_mib"])' "$T/out" 2>"$T/why"; then
  ok "JSON Lines, and the restore's extra memory is within the bound"
else
  not_ok "JSON Lines, and the restore's extra memory is within the bound ($(cat "$T/why"))"
fi
left=$(find "$T" -mindepth 1 -not -name out -not -name err -not -name why | head -3)
if [ -z "$left" ]; then
  ok "the checkpoint and its directory are removed"
else
  not_ok "the checkpoint and its directory are removed (left: $left)"
fi
[ "$n" -eq 3 ] || echo "# planned 3 tests, ran $n"
[ "$failed" -eq 0 ]
