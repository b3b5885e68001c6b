#!/bin/sh
# tests/manpages.sh — the installed programs' man pages and --help, run by
# `make check` (TAP). Needs $top_builddir and $top_srcdir (set by the
# Makefile); writes only into a fresh temporary directory.
#
# For every program the build installs (tools/ckpt-inspect, tools/cairn-fmnist,
# tools/cairn-info):
#   - --help exits 0 and prints its usage on standard output, ending with a
#     newline (a usage text that ends without one leaves the shell prompt on
#     its last line; one printed on stderr alone cannot be paged or grepped);
#   - tools/NAME.1 exists and the Makefile installs it (dist_man_MANS);
#   - `man -l` renders it at MANWIDTH=80 with exit status 0, and
#     `man --warnings=w -l` (every groff warning) prints no warning;
#   - every option --help prints (--long ones and -h) appears in the
#     rendered page.
# The man checks need man (Debian: man-db); without it they are skipped.

: "${top_builddir:=.}"
: "${top_srcdir:=.}"
. "$top_srcdir/tests/tap.sh"
PROGRAMS="ckpt-inspect cairn-fmnist cairn-info"

tap_tmpdir manpages-test

TAP_LINES=15

# The options a --help text names: every --long-option, and -h when it is
# offered as an option ("-h", "-h/--help", "-h | --help").
help_options() {
  {
    grep -o -e '--[a-z][a-z0-9-]*' "$1"
    grep -q -E '(^|[^A-Za-z0-9-])-h([^A-Za-z0-9-]|$)' "$1" && echo "-h"
  } | sort -u
}

# The rendered page as one line of words, twice: a word broken at the end of
# a line ("check-" / "point") joined with its hyphen and without it, so that
# both hyphenation and a break after a real hyphen are undone.
flatten() {
  awk '{ sub(/^[ \t]+/, ""); sub(/[ \t]+$/, "") }
       { if (keep ~ /[A-Za-z0-9]-$/) { a = a $0; d = substr(d, 1, length(d) - 1) $0 }
         else { a = a " " $0; d = d " " $0 }
         keep = $0 }
       END { print a; print d }' "$1"
}

have_man=1
command -v man >/dev/null 2>&1 || have_man=0

for p in $PROGRAMS; do
  prog="$top_builddir/tools/$p/$p"
  page="$top_srcdir/tools/$p.1"

  # ---- --help ----
  "$prog" --help >"$T/$p.help" 2>"$T/$p.help.err"
  rc=$?
  if [ "$rc" -eq 0 ] && [ -s "$T/$p.help" ]; then
    ok "$p --help exits 0 and prints its usage on standard output"
  else
    not_ok "$p --help exits 0 and prints its usage on standard output (exit $rc, $(wc -c <"$T/$p.help") bytes)" "$T/$p.help.err"
  fi
  if [ -s "$T/$p.help" ] && [ "$(tail -c 1 "$T/$p.help" | od -An -c | tr -d ' ')" = '\n' ]; then
    ok "$p --help ends with a newline"
  else
    not_ok "$p --help ends with a newline" "$T/$p.help"
  fi

  # ---- the page exists and is installed ----
  if [ -f "$page" ]; then
    ok "$p has a man page (tools/$p.1)"
  else
    not_ok "$p has a man page (tools/$p.1 is missing)"
    continue
  fi
  if sed -n '/^dist_man_MANS *=/,/[^\\]$/p' "$top_builddir/Makefile" | grep -q "tools/$p\.1"; then
    ok "tools/$p.1 is installed (dist_man_MANS)"
  else
    not_ok "tools/$p.1 is installed (not in dist_man_MANS of $top_builddir/Makefile)"
  fi

  if [ "$have_man" -eq 0 ]; then
    skip "man -l renders tools/$p.1" "man is not installed (Debian: apt-get install man-db)"
    skip "tools/$p.1 has no groff warning" "man is not installed"
    skip "tools/$p.1 describes every option of $p --help" "man is not installed"
    continue
  fi

  # ---- rendering ----
  MANWIDTH=80 LC_ALL=C MANPAGER=cat PAGER=cat man -l "$page" >"$T/$p.txt" 2>"$T/$p.err"
  rc=$?
  if [ "$rc" -eq 0 ] && [ -s "$T/$p.txt" ]; then
    ok "man -l renders tools/$p.1 (MANWIDTH=80)"
  else
    not_ok "man -l renders tools/$p.1 (exit $rc)" "$T/$p.err"
  fi
  MANWIDTH=80 LC_ALL=C MANPAGER=cat PAGER=cat man --warnings=w -l "$page" >/dev/null 2>"$T/$p.warn"
  if grep -qi warning "$T/$p.warn"; then
    not_ok "tools/$p.1 has no groff warning" "$T/$p.warn"
  else
    ok "tools/$p.1 has no groff warning"
  fi

  # ---- every option of --help is in the page ----
  flatten "$T/$p.txt" >"$T/$p.flat"
  missing=
  for o in $(help_options "$T/$p.help"); do
    grep -q -E -e "(^|[^A-Za-z0-9-])$o([^A-Za-z0-9-]|\$)" "$T/$p.flat" || missing="$missing $o"
  done
  if [ -z "$missing" ] && [ -n "$(help_options "$T/$p.help")" ]; then
    ok "tools/$p.1 describes every option of $p --help"
  else
    echo "#$missing" >"$T/$p.missing"
    not_ok "tools/$p.1 describes every option of $p --help (missing:${missing:- none found in --help})" "$T/$p.missing"
  fi
done

echo "1..$n"
