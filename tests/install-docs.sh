#!/bin/sh
# tests/install-docs.sh — what the installed headers point to is installed
# (TAP): no public header names a file of lib/ (never installed); every
# doc/*.md a header names is in dist_doc_DATA; and `make install` of the
# documentation puts every doc/*.md (and README.md) under $(docdir).
# Needs $top_builddir and $top_srcdir.

: "${top_builddir:=.}"
: "${top_srcdir:=.}"
. "$top_srcdir/tests/tap.sh"

tap_tmpdir install-docs
echo "1..3"

headers="$top_srcdir/include/cairn.h $top_srcdir/include/cairn/*.h"
# shellcheck disable=SC2086
grep -n 'lib/[A-Za-z_0-9]*\.[ch]' $headers >"$T/out" 2>/dev/null
check "no installed header points into lib/" test ! -s "$T/out"

# shellcheck disable=SC2086
grep -oh 'doc/[A-Za-z_0-9-]*\.md' $headers | sort -u >"$T/docs"
: >"$T/missing"
# The dist_doc_DATA lines of Makefile.am, continuations joined.
sed -n '/^dist_doc_DATA/,/[^\\]$/p' "$top_srcdir/Makefile.am" | tr '\\\n\t' '   ' >"$T/docdata"
while read -r d; do
  grep -qF "$d" "$T/docdata" || echo "$d" >>"$T/missing"
done <"$T/docs"
if [ -s "$T/docs" ] && [ ! -s "$T/missing" ]; then
  ok "every doc/*.md a header names is installed (dist_doc_DATA)"
else
  not_ok "every doc/*.md a header names is installed (dist_doc_DATA)" "$T/missing"
fi

make -C "$top_builddir" install-dist_docDATA DESTDIR="$T/inst" >"$T/out" 2>"$T/err"
rc=$?
: >"$T/missing"
# Every doc/*.md of the source tree, not only those a header names: a new
# document left out of dist_doc_DATA is caught here.
(cd "$top_srcdir" && ls doc/*.md) | cat - "$T/docs" | sort -u >"$T/all-docs"
while read -r d; do
  [ -n "$(find "$T/inst" -path '*/doc/*' -name "$(basename "$d")" -type f)" ] || echo "$d" >>"$T/missing"
done <"$T/all-docs"
if [ "$rc" -eq 0 ] && [ ! -s "$T/missing" ] && [ -n "$(find "$T/inst" -path '*/doc/*' -name README.md)" ]; then
  ok "make install puts every doc/*.md and README.md under \$(docdir)"
else
  not_ok "make install puts every doc/*.md and README.md under \$(docdir) (exit $rc)" "$T/missing" "$T/err"
fi
[ "$failed" -eq 0 ]
