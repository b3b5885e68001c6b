#!/bin/sh
# tests/call-cycles.sh — no file-level call cycle in lib/ (TAP).
# Each object of the library (lib/*.c, lib/kernels/**.c) defines some
# global symbols and uses others (nm: T/D/B/R... defined, U undefined).
# File A depends on file B when A uses a symbol B defines. Two files that
# reach each other through such dependencies form a cycle: neither can be
# read, tested or changed without the other. The check lists every
# strongly connected set of two or more files, so a new cycle fails with
# its files named. Needs $top_builddir (the objects) and nm.
# CALL_CYCLES_LIST=1 prints the sets found (also on success).
: "${top_srcdir:=.}"
: "${top_builddir:=.}"
. "$top_srcdir/tests/tap.sh"
export LC_ALL=C
tap_tmpdir call-cycles

command -v nm >/dev/null 2>&1 || { echo "1..0 # SKIP nm not found"; exit 0; }
# The convenience archives hold exactly the objects the library is linked
# from (a stale object of a removed file is not in them).
archives=
for a in "$top_builddir"/.libs/libcairn_core.a "$top_builddir"/.libs/libcairn_avx2.a "$top_builddir"/.libs/libcairn_mpi.a; do
  [ -f "$a" ] && archives="$archives $a"
done
[ -n "$archives" ] || { echo "1..0 # SKIP no libcairn_core.a under $top_builddir/.libs (build first)"; exit 0; }

echo "1..2"
# "FILE KIND SYMBOL": KIND D (defined) or U (used); FILE is the source's
# name (libtool's member libcairn_core_la-foo.o -> foo).
# shellcheck disable=SC2086
nm -g -A $archives 2>/dev/null | awk '
  {
    f = $1; sub(/:[^:]*$/, "", f); sub(/.*:/, "", f); sub(/^libcairn_[a-z0-9]*_la-/, "", f); sub(/\.o$/, "", f)
    if (NF == 3 && $2 == "U") print f, "U", $3
    else if (NF == 3 && $2 ~ /^[A-TV-Z]$/) print f, "D", $3
  }' >"$T/syms"
nobj=$(awk '{ print $1 }' "$T/syms" | sort -u | wc -l)

awk '
  $2 == "D" { def[$3] = $1; files[$1] = 1; next }
  $2 == "U" { use[++nu] = $1 SUBSEP $3; files[$1] = 1 }
  END {
    n = 0
    for (f in files) { id[f] = ++n; name[n] = f }
    for (k = 1; k <= nu; k++) {
      split(use[k], p, SUBSEP)
      if (!(p[2] in def)) continue
      a = id[p[1]]; b = id[def[p[2]]]
      if (a != b) r[a, b] = 1
    }
    # transitive closure (Warshall): a few hundred files at most
    for (k = 1; k <= n; k++)
      for (i = 1; i <= n; i++)
        if ((i, k) in r)
          for (j = 1; j <= n; j++)
            if ((k, j) in r) r[i, j] = 1
    for (i = 1; i <= n; i++) {
      if (done[i]) continue
      set = ""; cnt = 0
      for (j = 1; j <= n; j++)
        if (j == i || ((i, j) in r && (j, i) in r)) { set = set " " name[j]; done[j] = 1; cnt++ }
      if (cnt > 1) print set
    }
  }' "$T/syms" | while read -r set; do
  # shellcheck disable=SC2086
  echo "cycle: $(printf '%s\n' $set | sort | tr '\n' ' ' | sed 's/ $//')"
done | sort >"$T/found"

# Cycles that remain in files this check's author could not change, each
# with the reason; the list only shrinks (an entry no longer found fails).
cat >"$T/allow" <<'ALLOW'
ALLOW
grep -v -x -F -f "$T/allow" "$T/found" >"$T/cycles"
grep -v -x -F -f "$T/found" "$T/allow" >"$T/stale"

if [ -n "${CALL_CYCLES_LIST:-}" ]; then sed 's/^/# /' "$T/found"; fi
if [ -s "$T/cycles" ]; then
  not_ok "no file-level call cycle in lib/ ($(wc -l <"$T/cycles") found)" "$T/cycles"
else
  ok "no file-level call cycle in lib/ ($nobj objects)"
fi
if [ -s "$T/stale" ]; then
  not_ok "every allow-list entry is still a cycle (remove the fixed ones)" "$T/stale"
else
  ok "every allow-list entry is still a cycle"
fi
[ "$failed" -eq 0 ]
