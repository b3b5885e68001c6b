#!/bin/sh
# tests/ckptdir-lock.sh — the one-writer lock belongs to the checkpoint
# directory, not to its path, and taking it deletes only the trainer's own
# leftovers; through tools/cairn-fmnist, run by `make check` (TAP):
#   - `rm -rf DIR` under a running trainer (asynchronous saves, the
#     default, and --sync-checkpoints): its next save fails naming what
#     happened, training stops (exit 1), and DIR is not created again;
#   - DIR removed and replaced by a new empty directory: the same, and
#     nothing is written into the new one;
#   - a second trainer started on the path afterwards finds the first one
#     gone (it is not racing a live trainer) and starts afresh;
#   - the restart's cleanup removes the Saver's own temporary files
#     ("model.ckpt-<step>.tmp.XXXXXX", "checkpoint.tmp.XXXXXX") and nothing
#     that only looks like one: other programs' files, a directory, a link.
# Tiny synthetic data (tests/fmnist-data.sh) and model: seconds. Every wait
# is bounded; the foreground runs are under `timeout`.
# Needs $top_builddir; writes only into a temporary directory.

: "${top_builddir:=.}"
: "${top_srcdir:=.}"
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/fmnist-data.sh"
PROG="$top_builddir/tools/cairn-fmnist/cairn-fmnist"

command -v timeout >/dev/null 2>&1 || {
  echo "1..0 # SKIP timeout(1) is missing"
  exit 0
}
tap_tmpdir ckptdir-lock-test
T=$(cd "$T" && pwd -P)

echo "1..9"
TAP_OMIT='INFO: Saving'
S="$T/data"
fmnist_data "$S"
SMALL="--data-dir $S --hidden 16,8 --batch-size 8 --seed 7 --log-every 0 --threads 1"

# lose NAME HOW [FLAGS]: trains into $T/NAME (a checkpoint every 2000 steps,
# a fraction of a second; no step limit it could reach), and once a
# checkpoint past step 0 is in place does HOW to the directory ("rm": rm -rf; "replace": rm -rf, then
# mkdir), then waits (at most 30 s) for the trainer to stop. Sets $rc
# (-1 if it did not stop: then it is killed) and leaves its output in
# $T/out and $T/err.
lose() {
  dir="$T/$1"
  "$PROG" train --checkpoint-dir "$dir" $SMALL --max-steps 100000000 --save-checkpoint-steps 2000 $3 \
    >"$T/$1.out" 2>"$T/$1.err" &
  bg=$!
  i=0
  while [ "$i" -lt 3000 ] && kill -0 "$bg" 2>/dev/null; do
    s=$(state_step "$dir")
    [ -n "$s" ] && [ "$s" -ge 2000 ] && break
    nap 0.01
    i=$((i + 1))
  done
  # rm -rf can lose the race with a save creating a file meanwhile
  # ("Directory not empty"): again until the directory is gone.
  i=0
  while [ "$i" -lt 100 ] && [ -e "$dir" ]; do
    rm -rf "$dir" 2>/dev/null
    i=$((i + 1))
  done
  [ "$2" = replace ] && mkdir "$dir"
  i=0
  while [ "$i" -lt 3000 ] && kill -0 "$bg" 2>/dev/null; do
    nap 0.01
    i=$((i + 1))
  done
  if kill -0 "$bg" 2>/dev/null; then
    kill -9 "$bg" 2>/dev/null
    { wait "$bg"; } 2>/dev/null
    rc=-1
  else
    { wait "$bg"; } 2>/dev/null
    rc=$?
  fi
  bg=
  cp "$T/$1.out" "$T/out"
  cp "$T/$1.err" "$T/err"
}
# stopped_with_the_error DIR: exit 1 and the message naming DIR
stopped_with_the_error() {
  [ "$rc" -eq 1 ] &&
    grep -q -e "checkpoint directory '$1' was \(removed\|being removed (its files vanish)\|replaced by another directory\) while training: the lock taken at start no longer protects it; not re-creating it; training stops" "$T/err"
}

# ---- 1-4. rm -rf DIR while it trains ------------------------------------------------------
lose rm-async rm
check "rm -rf DIR under a trainer (asynchronous saves): it stops with the error (exit $rc)" \
  stopped_with_the_error "$T/rm-async"
check "... and DIR is not created again" test ! -e "$T/rm-async"
lose rm-sync rm --sync-checkpoints
check "rm -rf DIR under a trainer (--sync-checkpoints): it stops with the error (exit $rc)" \
  stopped_with_the_error "$T/rm-sync"
check "... and DIR is not created again" test ! -e "$T/rm-sync"

# ---- 5-6. DIR replaced by a new empty directory -------------------------------------------------
lose replaced replace
check "DIR replaced by an empty directory: the trainer stops with the error (exit $rc)" \
  stopped_with_the_error "$T/replaced"
check "... and writes nothing into the new one" test -d "$T/replaced" -a -z "$(ls -A "$T/replaced")"

# ---- 7. the next trainer on the path -------------------------------------------------------------
# The first one has stopped (lose waited for it): the second gets a fresh
# directory and its lock, and races nobody.
run timeout 60 "$PROG" train --checkpoint-dir "$T/rm-async" $SMALL --max-steps 4 --save-checkpoint-steps 2
if [ "$rc" -eq 0 ] && out_has "^no checkpoint in $T/rm-async: initialized a new model at step 0\$" &&
  out_has "^done at step 4: $T/rm-async/model.ckpt-4 " && grep -q "^pid [0-9]* host " "$T/rm-async/.cairn.lock"; then
  ok "a trainer started on the path afterwards starts afresh, alone, and takes the lock"
else
  not_ok "a trainer started on the path afterwards starts afresh, alone, and takes the lock (exit $rc)"
fi

# ---- 8-9. the restart's cleanup: the Saver's own temporaries only -----------------------------------
D="$T/rm-async"
for f in notes-2024.tmp.backup results-7.tmp.final1 report-3.tmp.v2abcd; do echo "user data" >"$D/$f"; done
mkdir "$D/model.ckpt-5.tmp.abcdef"
echo target >"$T/target"
ln -s ../target "$D/model.ckpt-6.tmp.linkis"
head -c 3000 /dev/zero >"$D/model.ckpt-5.tmp.a1B2c3"
head -c 2000 /dev/zero >"$D/checkpoint.tmp.XyZ123"
run timeout 60 "$PROG" train --checkpoint-dir "$D" $SMALL --max-steps 6 --save-checkpoint-steps 2
if [ "$rc" -eq 0 ] && [ ! -e "$D/model.ckpt-5.tmp.a1B2c3" ] && [ ! -e "$D/checkpoint.tmp.XyZ123" ] &&
  err_has "cairn INFO: Removed 2 temporary files of unfinished saves (5.0 kB) from $D."; then
  ok "taking the lock removes the Saver's leftovers model.ckpt-5.tmp.a1B2c3 and checkpoint.tmp.XyZ123"
else
  not_ok "taking the lock removes the Saver's leftovers model.ckpt-5.tmp.a1B2c3 and checkpoint.tmp.XyZ123 (exit $rc)"
fi
if [ "$(cat "$D/notes-2024.tmp.backup" "$D/results-7.tmp.final1" "$D/report-3.tmp.v2abcd" 2>/dev/null)" = \
  "$(printf 'user data\nuser data\nuser data')" ] && [ -d "$D/model.ckpt-5.tmp.abcdef" ] &&
  [ -L "$D/model.ckpt-6.tmp.linkis" ] && [ -f "$T/target" ]; then
  ok "... and keeps files that only look like temporaries: other programs', a directory, a link"
else
  not_ok "... and keeps files that only look like temporaries: other programs', a directory, a link"
fi

[ "$n" -eq 9 ] || {
  echo "not ok - $n tests ran, 9 planned"
  exit 1
}
exit $((failed > 0))
