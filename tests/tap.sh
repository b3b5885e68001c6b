# tests/tap.sh — the scaffolding the shell tests share, sourced (not run) by
# each of them as `. "$top_srcdir/tests/tap.sh"`: a temporary directory
# removed at exit, and TAP helpers counting the points in $n (the failures
# in $failed). A test prints its own plan ("1..N") and may redefine any of
# these after sourcing (a test's own definition wins).

# tap_tmpdir NAME: $T = a fresh directory ${TMPDIR:-/tmp}/NAME.XXXXXX,
# removed at exit by cleanup (which also SIGKILLs the background job $bg
# if one was started); a signal exits 1 (so cleanup runs). Without a
# temporary directory the whole test is skipped.
tap_tmpdir() {
  T=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX") || {
    echo "1..0 # SKIP cannot create a temporary directory"
    exit 0
  }
  bg=
  trap cleanup EXIT
  trap 'exit 1' INT TERM HUP
}
cleanup() {
  [ -n "$bg" ] && kill -9 "$bg" 2>/dev/null
  rm -rf "$T"
}

n=0
failed=0
# Under a failure not_ok shows the first $TAP_LINES lines of $T/out and
# $T/err, without the lines matching $TAP_OMIT (a grep pattern) if set.
TAP_LINES=20
TAP_OMIT=
ok() { n=$((n + 1)); echo "ok $n - $1"; }
# not_ok DESCRIPTION [FILE...]: shows the FILEs given, else $T/out and $T/err
not_ok() {
  n=$((n + 1))
  failed=$((failed + 1))
  echo "not ok $n - $1"
  shift
  [ "$#" -eq 0 ] && set -- "$T/out" "$T/err"
  for f in "$@"; do
    [ -s "$f" ] || continue
    if [ -n "$TAP_OMIT" ]; then grep -v -e "$TAP_OMIT" "$f"; else cat "$f"; fi | sed -n "1,${TAP_LINES}s/^/# /p"
  done
  return 0
}
# skip REASON, or skip DESCRIPTION REASON: a skipped point
skip() {
  n=$((n + 1))
  if [ "$#" -ge 2 ]; then echo "ok $n - $1 # SKIP $2"; else echo "ok $n - # SKIP $1"; fi
}
check() { # check DESCRIPTION COMMAND...: ok when the command succeeds
  d=$1
  shift
  if "$@"; then ok "$d"; else not_ok "$d"; fi
}
# run CMD...: stdout in $T/out, stderr in $T/err, status in $rc
run() {
  "$@" >"$T/out" 2>"$T/err"
  rc=$?
}
# expect STATUS DESCRIPTION CMD...: runs CMD and checks its exit status
expect() {
  want=$1
  d=$2
  shift 2
  run "$@"
  if [ "$rc" -eq "$want" ]; then ok "$d"; else not_ok "$d (exit $rc, expected $want)"; fi
}
# out_has / err_has PATTERN: a line of $T/out / $T/err matches (grep -e)
out_has() { grep -q -e "$1" "$T/out"; }
err_has() { grep -q -e "$1" "$T/err"; }
