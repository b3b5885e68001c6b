#!/bin/sh
# tests/long-functions.sh — no function of lib/ over 100 lines (TAP).
# A long function is a list of steps; each numbered step becomes a static
# function named after it (CONTRIBUTING.md, "Steps as functions"), so a
# change to one step is read and reviewed alone. A function starts at a
# line at column 0 that names it (its signature, ending with "{" on that
# line or a later one) and ends at the next "}" at column 0; its length
# counts both. The allow-list, now empty, named the functions left, each
# with the reason; it only shrinks (an entry no longer long fails).
# LONG_FUNCTIONS_LIST=1 prints every function over the limit.
: "${top_srcdir:=.}"
. "$top_srcdir/tests/tap.sh"
export LC_ALL=C
tap_tmpdir long-functions
MAX=100

echo "1..2"
awk -v max="$MAX" '
  FNR == 1 { infn = 0; cand = ""; f = FILENAME; sub(/.*\/lib\//, "lib/", f) }
  !infn && /^[A-Za-z_][^;]*\(/ { cand = $0; cl = FNR }
  !infn && cand != "" && ((/\{[ \t]*$/ && !/;[ \t]*\{?$/) || /^\{/) {
    infn = 1; start = cl; nm = cand; sub(/\(.*/, "", nm); n = split(nm, w, /[ \t*]+/); nm = w[n]; next
  }
  !infn && /;[ \t]*$/ { cand = "" }
  infn && /^\}/ { if (FNR - start + 1 > max) printf "%s %s %d\n", f, nm, FNR - start + 1; infn = 0; cand = "" }
' "$top_srcdir"/lib/*.c "$top_srcdir"/lib/kernels/*/*.c "$top_srcdir"/lib/kernels/*.c 2>/dev/null | sort >"$T/long"
awk '{ print $1, $2 }' "$T/long" >"$T/found"

# The allow-list is empty: every function of lib/ is within the limit.
: >"$T/allow"

[ -n "${LONG_FUNCTIONS_LIST:-}" ] && sed 's/^/# /' "$T/long"
grep -v -x -F -f "$T/allow" "$T/found" >"$T/new"
if [ -s "$T/new" ]; then
  not_ok "no lib/ function over $MAX lines outside the allow-list" "$T/new"
else
  ok "no lib/ function over $MAX lines outside the allow-list"
fi
grep -v -x -F -f "$T/found" "$T/allow" >"$T/stale"
if [ -s "$T/stale" ]; then
  not_ok "every allow-list entry is still over $MAX lines (remove the fixed ones)" "$T/stale"
else
  ok "every allow-list entry is still over $MAX lines"
fi
[ "$failed" -eq 0 ]
