#!/bin/sh
# Runs one Criterion test program under each kernel path — the default
# (best for this CPU) and CAIRN_ISA=ref — and prints one merged TAP stream,
# each result tagged with its ISA. A run that crashes or exits non-zero
# without reporting a failure adds a failing test point of its own.
# CAIRN_TEST_ISAS=default runs the first pass only (tools/quickstart.sh does
# so for its --without-mpi build, whose kernels are the default build's).
prog=$1
shift
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cairn-tap.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT

isas=${CAIRN_TEST_ISAS:-default ref}
for isa in $isas; do
  if [ "$isa" = ref ]; then
    CAIRN_ISA=ref "$prog" --tap="$tmp/$isa.tap" -j1 "$@" >"$tmp/$isa.out" 2>&1
  else
    env -u CAIRN_ISA "$prog" --tap="$tmp/$isa.tap" -j1 "$@" >"$tmp/$isa.out" 2>&1
  fi
  echo $? >"$tmp/$isa.rc"
done

awk -v dir="$tmp" -v prog="$prog" -v isas="$isas" '
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
    for (i = 1; i <= nout; i++) print out[i]
  }'
