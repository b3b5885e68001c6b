#!/bin/sh
# tests/options-defaults.sh — one convention for option defaults, run by
# `make check` (TAP). Needs $top_builddir and $top_srcdir (set by the
# Makefile); writes only into a fresh temporary directory.
#
# For every options struct of the public headers (a `typedef struct
# cairn_X_options`), the library itself defines cairn_X_options_default():
# the defaults then live in libcairn, not in callers' binaries, and change
# without a rebuild of the callers. So:
#   - the built library exports cairn_X_options_default for each one
#     (cairn_mpi_options only in builds with MPI);
#   - no public header defines a _default() body (a `static inline`
#     default is compiled into every caller).

: "${top_builddir:=.}"
: "${top_srcdir:=.}"
. "$top_srcdir/tests/tap.sh"

tap_tmpdir options-defaults-test

if ! command -v nm >/dev/null 2>&1; then
  echo "1..0 # SKIP nm (binutils) is not installed"
  exit 0
fi
# The shared library shows what is exported (CAIRN_API, default
# visibility); a --disable-shared build has only the archive.
if [ -f "$top_builddir/.libs/libcairn.so" ]; then
  nm -D --defined-only "$top_builddir/.libs/libcairn.so" >"$T/syms" 2>"$T/nm.err"
elif [ -f "$top_builddir/.libs/libcairn.a" ]; then
  nm --defined-only "$top_builddir/.libs/libcairn.a" >"$T/syms" 2>"$T/nm.err"
else
  echo "1..0 # SKIP no built libcairn in $top_builddir/.libs"
  exit 0
fi
awk '$2 ~ /^[TW]$/ {print $3}' "$T/syms" | sort -u >"$T/exported"

sed -n 's/^typedef struct \(cairn_[a-z0-9_]*_options\) {.*/\1/p' "$top_srcdir"/include/cairn/*.h | sort -u >"$T/structs"

TAP_LINES=15

count=$(wc -l <"$T/structs")
if [ "$count" -ge 10 ]; then
  ok "the public headers declare $count options structs"
else
  not_ok "only $count options structs found in include/cairn/*.h (the pattern no longer matches?)" "$T/structs"
fi

has_mpi=0
grep -qx cairn_mpi_new "$T/exported" && has_mpi=1
while read -r st; do
  fn="${st}_default"
  if [ "$st" = cairn_mpi_options ] && [ "$has_mpi" = 0 ]; then
    skip "libcairn exports $fn()" "built without MPI"
  elif grep -qx "$fn" "$T/exported"; then
    ok "libcairn exports $fn()"
  else
    echo "libcairn does not export $fn (declare it CAIRN_API in the header, define it in lib/)" >"$T/why"
    not_ok "libcairn exports $fn()" "$T/why"
  fi
done <"$T/structs"

# A definition in a header: `..._default(void) {`, the brace on the same
# line or opening the next one.
awk 'prev != "" && /^[ \t]*\{/ { print prev }
     { prev = "" }
     /_default\(void\)[ \t]*\{/ { print FILENAME ":" FNR ": " $0; next }
     /_default\(void\)[ \t]*$/ { prev = FILENAME ":" FNR ": " $0 }' \
  "$top_srcdir"/include/cairn/*.h >"$T/bodies"
if [ -s "$T/bodies" ]; then
  not_ok "no public header defines an options default inline" "$T/bodies"
else
  ok "no public header defines an options default inline"
fi

echo "1..$n"
