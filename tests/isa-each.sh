#!/bin/sh
# Runs one Criterion test program under each kernel table this build and
# CPU have — CAIRN_ISA=avx512, avx2 and ref — and prints one merged TAP
# stream, each result tagged with its ISA. An ISA the build or CPU lacks is
# not run (a "#" line says so; cairn-info decides, as the library would).
# A run that crashes or exits non-zero without reporting a failure adds a
# failing test point of its own.
# CAIRN_TEST_ISAS overrides the list: "default" runs the program once with
# CAIRN_ISA unset (tools/quickstart.sh does so for its --without-mpi build,
# whose kernels are the default build's), e.g. CAIRN_TEST_ISAS="avx2 ref".
prog=$1
shift
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cairn-tap.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT

info=${top_builddir:-$(dirname "$prog")/..}/tools/cairn-info/cairn-info
# Without cairn-info every vector ISA would look missing and be skipped in
# silence: that is an error, not a skip.
[ -x "$info" ] || { echo "Bail out! $info not found: cannot tell which ISAs this build and CPU have"; exit 1; }
want=${CAIRN_TEST_ISAS:-avx512 avx2 ref}
isas=
notes=
for isa in $want; do
  case $isa in
    default|ref) isas="$isas $isa" ;;
    *)
      # cairn-info reports the table CAIRN_ISA=$isa gets: the next best when
      # this build or CPU lacks it
      if CAIRN_ISA=$isa "$info" 2>/dev/null | grep -q "isa $isa "; then
        isas="$isas $isa"
      else
        notes="$notes $isa"
      fi ;;
  esac
done

for isa in $isas; do
  if [ "$isa" = default ]; then
    env -u CAIRN_ISA "$prog" --tap="$tmp/$isa.tap" -j1 "$@" >"$tmp/$isa.out" 2>&1
  else
    CAIRN_ISA=$isa "$prog" --tap="$tmp/$isa.tap" -j1 "$@" >"$tmp/$isa.out" 2>&1
  fi
  echo $? >"$tmp/$isa.rc"
done

awk -v dir="$tmp" -v prog="$prog" -v isas="$isas" -v notes="$notes" '
  function emit(line) { out[++nout] = line }
  function run(isa,   file, rc, line, cnt, nfail, bad) {
    file = dir "/" isa ".tap"; cnt = 0; nfail = 0
    while ((getline line < file) > 0) {
      if (line ~ /^(ok|not ok)( [0-9]+)?( |$)/) {
        ntest++; cnt++
        bad = (line ~ /^not ok/)
        if (bad) nfail++
        sub(/^(ok|not ok)( [0-9]+)?/, "", line)
        emit((bad ? "not ok " : "ok ") ntest " [" isa "]" line)
      } else if (line ~ /^  /) {
        emit("#" line)
      }
    }
    close(file)
    getline rc < (dir "/" isa ".rc"); close(dir "/" isa ".rc")
    if ((rc != 0 && nfail == 0) || cnt == 0) {
      ntest++
      emit("not ok " ntest " [" isa "] " prog " exited with status " rc " (see below)")
      while ((getline line < (dir "/" isa ".out")) > 0) emit("# " line)
    }
  }
  BEGIN {
    ntest = 0; nout = 0
    niso = split(isas, iso, " ")
    for (k = 1; k <= niso; k++) run(iso[k])
    print "1.." ntest
    nn = split(notes, nts, " ")
    for (k = 1; k <= nn; k++) print "# CAIRN_ISA=" nts[k] " not run: this build or CPU has no " nts[k] " kernels"
    for (i = 1; i <= nout; i++) print out[i]
  }'
