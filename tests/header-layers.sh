#!/bin/sh
# tests/header-layers.sh — the installed headers are cut by layer (TAP).
# CONTRIBUTING.md ("Headers by layer") gives the order; a header may use
# only its own layer and those below. This check keeps it so:
#   1. every installed header (include/cairn/*.h, cairn/build.h.in) has a
#      layer in the table below, so a new header must be placed;
#   2. no header #includes a header of a higher layer;
#   3. no header forward-declares (or names as `struct cairn_X`) a type
#      whose home is a header of a higher layer. A type's home is the
#      header that defines its struct body, else the one declaring the most
#      cairn_X_* functions (its constructor, accessors, destructor);
#   4. every allow-list entry is still a violation (a fixed one is removed
#      from the list, so the list only shrinks);
#   5. every compatibility include (below) is listed in doc/deprecated.md.
# Comments are stripped first, so prose may name any header.
# Needs $top_srcdir.
: "${top_srcdir:=.}"
. "$top_srcdir/tests/tap.sh"
export LC_ALL=C
tap_tmpdir header-layers
[ -n "${HEADER_LAYERS_KEEP:-}" ] && trap - EXIT

echo "1..5"

# The layer of each installed header; lower layers never reach up.
layer() {
  case $1 in
  status.h | build.h | runtime.h | env.h | names.h) echo 0 ;; # base
  tensor.h | rng.h | var.h) echo 1 ;;                         # tensors and variables
  nn.h | optim.h | data.h | model.h) echo 2 ;;                # numerics
  ckpt.h | interop.h) echo 3 ;;                               # checkpoint files
  checkpoint_dir.h | saver.h) echo 4 ;;                       # checkpoint directory and Saver
  session.h) echo 5 ;;                                        # sessions and ops
  scaffold.h) echo 6 ;;                                       # Scaffold, SessionManager
  monitored.h) echo 7 ;;                                      # monitored sessions and hooks
  summary.h | mpi.h | mlp_ops.h) echo 8 ;;                    # summaries, MPI, the MLP's ops
  *) echo "" ;;
  esac
}

# Violations that exist today and need the restructure of the checkpoint
# layer (issue 25) to go; each says why it is still here. One per line:
# "HEADER include OTHER.h" or "HEADER type cairn_T".
cat >"$T/allow" <<'ALLOW'
ALLOW
# Compatibility includes are not violations: a header that a declaration
# left for a higher layer includes the new header for one release, inside
# `#ifndef CAIRN_NO_COMPAT_INCLUDES` (or `#if !defined(...) && ...`), so
# that programs that include only the old header still build. Test 5 keeps
# each of them listed in doc/deprecated.md, which says when they go.

dir="$top_srcdir/include/cairn"
hdrs=
for f in "$dir"/*.h "$dir"/build.h.in; do
  [ -f "$f" ] && hdrs="$hdrs $f"
done

# Code without comments, as "FILE<TAB>code" (string literals kept).
awk '
  FNR == 1 { incom = 0; name = FILENAME; sub(/.*\//, "", name); sub(/\.in$/, "", name) }
  {
    line = $0; out = ""; i = 1; len = length(line); instr = 0
    while (i <= len) {
      c = substr(line, i, 1); c2 = substr(line, i, 2)
      if (incom) { if (c2 == "*/") { incom = 0; i += 2 } else i++; continue }
      if (instr) {
        out = out c
        if (c == "\\") { out = out substr(line, i + 1, 1); i += 2; continue }
        if (c == "\"") instr = 0
        i++; continue
      }
      if (c2 == "/*") { incom = 1; out = out " "; i += 2; continue }
      if (c2 == "//") break
      if (c == "\"") instr = 1
      out = out c; i++
    }
    print name "\t" out
  }' $hdrs >"$T/code"
# Lines inside a compatibility block go to compat_code, the rest stay.
awk -F '\t' -v compat="$T/compat_code" '
  $2 ~ /^ *# *if(ndef)? .*CAIRN_NO_COMPAT_INCLUDES/ { inblk = 1; depth = 0; next }
  inblk && $2 ~ /^ *# *if/ { depth++ }
  inblk && $2 ~ /^ *# *endif/ { if (depth == 0) { inblk = 0; next } depth-- }
  inblk { print >compat; next }
  { print }' "$T/code" >"$T/code.main"
touch "$T/compat_code"
mv "$T/code.main" "$T/code"

# 1. Every header has a layer.
: >"$T/nolayer"
for f in $hdrs; do
  h=${f##*/}; h=${h%.in}
  [ -n "$(layer "$h")" ] || echo "$h" >>"$T/nolayer"
done
if [ -s "$T/nolayer" ]; then
  not_ok "every installed header has a layer in tests/header-layers.sh (add the new ones to layer())" "$T/nolayer"
else
  ok "every installed header has a layer"
fi

# Includes: "H include X.h".
sed -n 's|^\([^	]*\)	 *# *include *"cairn/\([a-z0-9_]*\.h\)".*|\1 include \2|p' "$T/code" | sort -u >"$T/includes"
# Types named: "H type cairn_T" for a forward declaration or a `struct cairn_T` use.
sed -n 's/^\([^	]*\)	.*struct \(cairn_[a-z0-9_]*\).*/\1 \2/p' "$T/code" | sort -u >"$T/uses"
# Homes: a struct body, else the header with the most cairn_T_* functions.
sed -n 's/^\([^	]*\)	.*struct \(cairn_[a-z0-9_]*\) *{.*/\2 \1/p' "$T/code" | sort -u >"$T/bodies"
awk '{ print $2 }' "$T/uses" | sort -u >"$T/types"
: >"$T/homes"
while read -r t; do
  home=$(awk -v t="$t" '$1 == t { print $2; exit }' "$T/bodies")
  if [ -z "$home" ]; then
    home=$(grep -E "	.*[^a-z0-9_]${t}_[a-z0-9_]+ *\(" "$T/code" | cut -f1 | sort | uniq -c |
      sort -k1,1nr -k2 | awk 'NR == 1 { print $2 }')
  fi
  [ -n "$home" ] && echo "$t $home" >>"$T/homes"
done <"$T/types"

# All violations, as allow-list lines.
: >"$T/viol"
while read -r h _ x; do
  lh=$(layer "$h"); lx=$(layer "$x")
  [ -n "$lh" ] && [ -n "$lx" ] && [ "$lx" -gt "$lh" ] && echo "$h include $x" >>"$T/viol"
done <"$T/includes"
while read -r h t; do
  home=$(awk -v t="$t" '$1 == t { print $2 }' "$T/homes")
  [ -n "$home" ] || continue
  lh=$(layer "$h"); lx=$(layer "$home")
  [ -n "$lh" ] && [ -n "$lx" ] && [ "$lx" -gt "$lh" ] && echo "$h type $t" >>"$T/viol"
done <"$T/uses"
sort -u "$T/viol" -o "$T/viol"
sort -u "$T/allow" -o "$T/allow"

comm -23 "$T/viol" "$T/allow" >"$T/new"
grep ' include ' "$T/new" >"$T/new_inc"
grep ' type ' "$T/new" >"$T/new_type"
if [ -s "$T/new_inc" ]; then
  not_ok "no installed header includes a header of a higher layer" "$T/new_inc"
else
  ok "no installed header includes a header of a higher layer (allow-listed: $(grep -c ' include ' "$T/allow"))"
fi
if [ -s "$T/new_type" ]; then
  not_ok "no installed header declares a type of a higher layer (move it to the header of its layer, or list it in the allow-list with why)" "$T/new_type"
else
  ok "no installed header declares a type of a higher layer (allow-listed: $(grep -c ' type ' "$T/allow"))"
fi

comm -13 "$T/viol" "$T/allow" >"$T/stale"
if [ -s "$T/stale" ]; then
  not_ok "every allow-list entry is still a violation (remove the fixed ones)" "$T/stale"
else
  ok "every allow-list entry is still a violation"
fi

# 5. The compatibility includes, each in doc/deprecated.md as
# "| `cairn/H` | `cairn/X` |".
sed -n 's|^\([^	]*\)	 *# *include *"cairn/\([a-z0-9_]*\.h\)".*|\1 \2|p' "$T/compat_code" | sort -u >"$T/compat"
: >"$T/undoc"
while read -r h x; do
  grep -qF "| \`cairn/$h\` | \`cairn/$x\` |" "$top_srcdir/doc/deprecated.md" || echo "$h includes $x" >>"$T/undoc"
done <"$T/compat"
if [ -s "$T/undoc" ]; then
  not_ok "every compatibility include is listed in doc/deprecated.md" "$T/undoc"
else
  ok "every compatibility include is listed in doc/deprecated.md ($(wc -l <"$T/compat") of them)"
fi

[ "$n" -eq 5 ] || echo "# planned 5 tests, ran $n"
[ "$failed" -eq 0 ]
