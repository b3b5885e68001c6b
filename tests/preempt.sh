#!/bin/sh
# tests/preempt.sh — cairn-fmnist train stopped by SIGTERM (a batch
# scheduler's notice before preemption) and SIGINT (Ctrl-C), run by `make
# check` (TAP), on tests/fmnist.sh's tiny synthetic data set with a model
# wide enough (--hidden 1000,500, a 6 MB checkpoint) that a save takes
# about ten training steps:
#   - a signal during training (no periodic checkpoint) and during a save
#     (a checkpoint every step: most of the time is spent saving): the
#     trainer finishes the step in flight, writes the final checkpoint at
#     the step it reached and exits with 128 + the signal (143, 130),
#     saying "received SIGTERM: stopping after step N" and "stopped by
#     SIGTERM at step N: DIR/model.ckpt-N";
#   - each stopped run, resumed, ends bit-identical (ckpt-inspect diff
#     --atol 0) to a run that was never interrupted;
#   - a second signal, sent during the final save, ends the process at once
#     (no "stopped by" line; the final save never completes).
# Needs $top_builddir; writes only into a temporary directory.

: "${top_builddir:=.}"
: "${top_srcdir:=.}"
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/fmnist-data.sh"
PROG="$top_builddir/tools/cairn-fmnist/cairn-fmnist"
TOOL="$top_builddir/tools/ckpt-inspect/ckpt-inspect"

tap_tmpdir preempt-test

echo "1..9"
TAP_OMIT='INFO: Saving'

# ---- the synthetic data set (as tests/fmnist.sh) --------------------------------------
S="$T/data"
fmnist_data "$S"
MODEL="--data-dir $S --hidden 1000,500 --batch-size 8 --seed 7 --log-every 0 --threads 1"

# A background job of a non-interactive shell starts with SIGINT ignored
# (and cairn leaves an ignored signal ignored): SIGINT runs go through
# env --default-signal=INT, as a terminal's foreground job would be.
if env --default-signal=INT true 2>/dev/null; then
  INTWRAP="env --default-signal=INT"
else
  INTWRAP=
fi

# stop NAME SIG EVERY: trains into $T/NAME (a checkpoint every EVERY steps,
# no step limit that it could reach), sends SIG once it has trained (the
# handlers exist once the session is created, after the save at step 0:
# with EVERY=1, once a checkpoint past step 0 is there; else 0.3 s after
# the one at step 0), and waits. Sets $rc, $stopped (the step it says it
# stopped at) and leaves stdout/stderr in $T/NAME.out/.err.
stop() {
  dir="$T/$1"
  wrap=
  [ "$2" = INT ] && wrap=$INTWRAP
  $wrap "$PROG" train --checkpoint-dir "$dir" $MODEL --max-steps 1000000 --save-checkpoint-steps "$3" \
    >"$dir.out" 2>"$dir.err" &
  bg=$!
  want=0
  [ "$3" -eq 1 ] && want=2
  i=0
  while [ "$i" -lt 3000 ] && kill -0 "$bg" 2>/dev/null; do
    s=$(state_step "$dir")
    # The "model ..." line comes after session creation, once the signal
    # handlers are in place (a signal during the creation ends the process
    # as it would without them): on a loaded machine the step-0 save can be
    # on disk well before that.
    [ -n "$s" ] && [ "$s" -ge "$want" ] && grep -q '^model ' "$dir.out" 2>/dev/null && break
    nap 0.01
    i=$((i + 1))
  done
  [ "$3" -eq 1 ] || nap 0.3
  kill -"$2" "$bg" 2>/dev/null
  { wait "$bg"; } 2>/dev/null
  rc=$?
  bg=
  stopped=$(sed -n "s/^stopped by SIG$2 at step \([0-9]*\): .*/\1/p" "$dir.out")
  cp "$dir.out" "$T/out"
  cp "$dir.err" "$T/err"
}

# stopped_ok NAME SIG STATUS: the exit status, both messages, and the final
# checkpoint at the step reached, intact.
stopped_ok() {
  dir="$T/$1"
  test "$rc" -eq "$3" && test -n "$stopped" &&
    grep -q "^stopped by SIG$2 at step $stopped: $dir/model.ckpt-$stopped (.*); the same command resumes from it\$" \
      "$dir.out" &&
    grep -q "WARNING: received SIG$2: stopping after step $stopped\$" "$dir.err" &&
    test "$(state_step "$dir")" = "$stopped" && "$TOOL" verify "$dir/model.ckpt-$stopped" >/dev/null 2>&1
}

cases=
# ---- 1-2. a signal during training (no checkpoint between step 0 and the end) ----------
stop term-train TERM 1000000
check "SIGTERM during training: exit 143, final checkpoint at the step reached ($stopped)" stopped_ok term-train TERM 143
cases="$cases term-train:$stopped"
if [ -n "$INTWRAP" ]; then
  stop int-train INT 1000000
  check "SIGINT during training: exit 130, final checkpoint at the step reached ($stopped)" stopped_ok int-train INT 130
  cases="$cases int-train:$stopped"
else
  ok "SIGINT during training # SKIP env --default-signal is missing (coreutils < 8.31)"
fi

# ---- 3-4. a signal during a save (a checkpoint every step) -------------------------------
stop term-save TERM 1
check "SIGTERM with a checkpoint every step (in a save): exit 143, checkpoint at the step reached ($stopped)" \
  stopped_ok term-save TERM 143
cases="$cases term-save:$stopped"
if [ -n "$INTWRAP" ]; then
  stop int-save INT 1
  check "SIGINT with a checkpoint every step (in a save): exit 130, checkpoint at the step reached ($stopped)" \
    stopped_ok int-save INT 130
  cases="$cases int-save:$stopped"
else
  ok "SIGINT with a checkpoint every step # SKIP env --default-signal is missing (coreutils < 8.31)"
fi

# ---- 5-7. resumed to the end: bit-identical to an uninterrupted run ----------------------
# The end: past every step a signal stopped at, whatever the machine's speed.
END=0
for c in $cases; do
  s=${c#*:}
  [ -n "$s" ] && [ "$s" -gt "$END" ] && END=$s
done
END=$((END + 10))
R="$T/reference"
run "$PROG" train --checkpoint-dir "$R" $MODEL --max-steps "$END" --save-checkpoint-steps 1000000
check "an uninterrupted reference run of $END steps" test "$rc" -eq 0 -a "$(state_step "$R")" = "$END"
resumed=0 same=0 total=0
for c in $cases; do
  name=${c%%:*}
  s=${c#*:}
  total=$((total + 1))
  run "$PROG" train --checkpoint-dir "$T/$name" $MODEL --max-steps "$END" --save-checkpoint-steps 1000000
  if [ "$rc" -eq 0 ] && grep -q "^resumed from $T/$name/model.ckpt-$s at step $s " "$T/out" &&
    [ "$(state_step "$T/$name")" = "$END" ]; then
    resumed=$((resumed + 1))
  else
    echo "# $name: the resume from step $s failed (exit $rc)"
    sed -n '1,10s/^/#   /p' "$T/err"
  fi
  if "$TOOL" diff --atol 0 "$R/model.ckpt-$END" "$T/$name/model.ckpt-$END" >"$T/diff" 2>&1; then
    same=$((same + 1))
  else
    echo "# $name: differs from the reference"
    sed -n '1,10s/^/#   /p' "$T/diff"
  fi
done
echo "# stopped at:$cases; resumed to step $END"
check "every stopped run resumes from its final checkpoint to step $END ($resumed of $total)" \
  test "$resumed" -eq "$total" -a "$total" -ge 2
check "... and ends bit-identical to the uninterrupted run (ckpt-inspect diff --atol 0; $same of $total)" \
  test "$same" -eq "$total" -a "$total" -ge 2
[ -n "$INTWRAP" ] && [ "$total" -eq 4 ] || echo "# (SIGINT cases skipped)"

# ---- 8-9. a second signal ends the process at once -----------------------------------
# The first SIGTERM during training; the second as soon as it has said
# "received SIGTERM", while it writes the final checkpoint (46 MB with
# --hidden 2000,2000: far longer than the shell takes to react).
tw="$T/twice"
"$PROG" train --checkpoint-dir "$tw" --data-dir "$S" --hidden 2000,2000 --batch-size 8 --seed 7 --log-every 0 \
  --threads 1 --max-steps 1000000 --save-checkpoint-steps 1000000 >"$tw.out" 2>"$tw.err" &
bg=$!
i=0
while [ "$i" -lt 3000 ] && [ -z "$(state_step "$tw")" ] && kill -0 "$bg" 2>/dev/null; do
  nap 0.01
  i=$((i + 1))
done
nap 0.2
kill -TERM "$bg" 2>/dev/null
i=0
while [ "$i" -lt 3000 ] && ! grep -q 'received SIGTERM' "$tw.err" && kill -0 "$bg" 2>/dev/null; do
  nap 0.005
  i=$((i + 1))
done
kill -TERM "$bg" 2>/dev/null
{ wait "$bg"; } 2>/dev/null
rc=$?
bg=
cp "$tw.out" "$T/out"
cp "$tw.err" "$T/err"
check "a second SIGTERM during the final save: the process ends at once (exit 143)" \
  sh -c "test $rc -eq 143 && grep -q 'received SIGTERM: stopping after step' '$tw.err' && ! grep -q '^stopped by' '$tw.out'"
first=$(sed -n 's/.*received SIGTERM: stopping after step \([0-9]*\)$/\1/p' "$tw.err")
check "... without finishing that save (latest checkpoint: step $(state_step "$tw"), stopped after step $first)" \
  test -n "$first" -a "$(state_step "$tw")" != "$first"
exit 0
