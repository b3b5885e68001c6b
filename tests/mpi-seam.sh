#!/bin/sh
# tests/mpi-seam.sh — MPI stays behind one seam, run by `make check` (TAP).
# cairn builds with and without MPI, and the tools must compile and behave
# in both; the --without-mpi build (tools/quickstart.sh test) proves that
# they compile, and this cheap check keeps the rule that makes it so:
#   - in tools/ (*.c and *.h, and those of tools/*/), C code (comments stripped) outside the
#     shim tools/cairn-fmnist/dist.c names no MPI: no cairn_mpi_* call (the public
#     query cairn_mpi_available() excepted), no CAIRN_HAVE_MPI or
#     CAIRN_WITH_MPI, no <mpi.h> or <cairn/mpi.h>, no MPI_* name, no g_mpi;
#   - the shim holds exactly one #if region;
#   - no tool includes the build's config.h, and no shell test reads it:
#     they ask the programs (cairn-info prints "mpi: yes|no");
#   - cairn-info's answer (cairn_mpi_available, the library's) matches
#     CAIRN_WITH_MPI of the generated public header cairn/build.h.
# Needs $top_builddir and $top_srcdir.
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
. "$top_srcdir/tests/tap.sh"
export LC_ALL=C

echo "1..5"
not_ok() {
  n=$((n + 1))
  failed=$((failed + 1))
  echo "not ok $n - $1"
  [ -n "${2:-}" ] && printf '%s\n' "$2" | sed -n '1,20s/^/# /p'
  return 0
}

# C source without its comments, each line as FILE:LINE: code (string and
# character literals kept, so a "/*" inside one does not start a comment).
code() {
  awk '
    FNR == 1 { incom = 0 }
    {
      line = $0; out = ""; i = 1; len = length(line); instr = 0
      while (i <= len) {
        c = substr(line, i, 1); c2 = substr(line, i, 2)
        if (incom) { if (c2 == "*/") { incom = 0; i += 2 } else i++; continue }
        if (instr) {
          out = out c
          if (c == "\\") { out = out substr(line, i + 1, 1); i += 2; continue }
          if (c == q) instr = 0
          i++; continue
        }
        if (c2 == "/*") { incom = 1; out = out " "; i += 2; continue }
        if (c2 == "//") break
        if (c == "\"" || c == "'\''") { instr = 1; q = c }
        out = out c; i++
      }
      print FILENAME ":" FNR ": " out
    }' "$@"
}

shim="$top_srcdir/tools/cairn-fmnist/dist.c"
# The tools' C files: tools/*.c and *.h, and those of each program's folder.
sources= others=
for f in "$top_srcdir"/tools/*.c "$top_srcdir"/tools/*.h "$top_srcdir"/tools/*/*.c "$top_srcdir"/tools/*/*.h; do
  [ -f "$f" ] || continue
  sources="$sources $f"
  [ "$f" = "$shim" ] || others="$others $f"
done

# cairn_mpi_available() is the public query every caller may use.
# shellcheck disable=SC2086
hits=$(code $others | sed 's/cairn_mpi_available//g' |
  grep -E 'cairn_mpi_|CAIRN_HAVE_MPI|CAIRN_WITH_MPI|[<"/]mpi\.h|[^A-Za-z0-9_]MPI_[A-Za-z]|g_mpi'; true)
if [ -z "$hits" ]; then
  ok "tools/: no MPI outside the shim tools/cairn-fmnist/dist.c"
else
  not_ok "tools/: no MPI outside the shim tools/cairn-fmnist/dist.c" "$hits"
fi

if [ -f "$shim" ]; then
  ifs=$(code "$shim" | grep -cE '^[^:]*:[0-9]*: *# *if')
  if [ "$ifs" -eq 1 ]; then
    ok "tools/cairn-fmnist/dist.c: one #if region"
  else
    not_ok "tools/cairn-fmnist/dist.c: one #if region (found $ifs #if lines)" "$(code "$shim" | grep -E ': *# *if')"
  fi
else
  not_ok "tools/cairn-fmnist/dist.c: one #if region (no such file)"
fi

# shellcheck disable=SC2086
hits=$(code $sources | grep -E '# *include *[<"]config\.h[">]'; true)
if [ -z "$hits" ]; then
  ok "tools/: no #include of config.h"
else
  not_ok "tools/: no #include of config.h" "$hits"
fi

# Shell tests ask programs, never the build's config.h (comment lines and
# this file, which names it in its patterns, excepted).
hits=
for f in "$top_srcdir"/tests/*.sh; do
  case $f in */mpi-seam.sh) continue ;; esac
  h=$(grep -n 'config\.h' "$f" | grep -v '^[0-9]*: *#')
  [ -n "$h" ] && hits="$hits$(printf '%s\n' "$h" | sed "s|^|$(basename "$f"):|")
"
done
if [ -z "$hits" ]; then
  ok "tests/*.sh: no lookup in config.h"
else
  not_ok "tests/*.sh: no lookup in config.h" "$hits"
fi

info=$("$top_builddir/tools/cairn-info/cairn-info" 2>&1)
mpi=$(printf '%s\n' "$info" | sed -n 's/^mpi: //p')
hdr=$(sed -n 's/^#define CAIRN_WITH_MPI \([01]\)$/\1/p' "$top_builddir/include/cairn/build.h" 2>/dev/null)
case "$mpi:$hdr" in
yes:1 | no:0) ok "cairn-info says 'mpi: $mpi', cairn/build.h CAIRN_WITH_MPI $hdr" ;;
*) not_ok "cairn-info's 'mpi:' line agrees with cairn/build.h (cairn-info: '${mpi:-none}', CAIRN_WITH_MPI: '${hdr:-none}')" "$info" ;;
esac

[ "$n" -eq 5 ] || echo "# planned 5 tests, ran $n"
[ "$failed" -eq 0 ]
