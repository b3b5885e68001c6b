#!/bin/sh
# tests/async-checkpoints.sh — cairn-fmnist train with asynchronous
# checkpoints (the default) against --sync-checkpoints, and a SIGKILL while
# the background writer is writing, run by `make check` (TAP), on
# tests/fmnist.sh's tiny synthetic data set:
#   - --async-checkpoints and --sync-checkpoints runs write checkpoints
#     with the same tensors and metadata (ckpt-inspect diff --atol 0) at
#     every step saved, the final one included;
#   - kill -9 of an asynchronous run while a writer's temporary file
#     "model.ckpt-N.tmp.XXXXXX" exists (a 6 MB checkpoint every step, so
#     phase 2 is nearly always running): the latest checkpoint of the
#     state file verifies (ckpt-inspect verify), the temporary file is
#     removed by the restart, and the resumed run ends bit-identical to an
#     uninterrupted one.
# Needs $top_builddir; writes only into a temporary directory.

: "${top_builddir:=.}"
: "${top_srcdir:=.}"
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/fmnist-data.sh"
PROG="$top_builddir/tools/cairn-fmnist/cairn-fmnist"
TOOL="$top_builddir/tools/ckpt-inspect/ckpt-inspect"

tap_tmpdir async-ckpt-test

echo "1..6"
TAP_OMIT='INFO: Saving'

S="$T/data"
fmnist_data "$S"
MODEL="--data-dir $S --batch-size 8 --seed 7 --log-every 0 --threads 1"

# ---- 1-2. the same checkpoints either way -----------------------------------------------
run "$PROG" train --checkpoint-dir "$T/sync" $MODEL --max-steps 60 --save-checkpoint-steps 25 --sync-checkpoints
rs=$rc
run "$PROG" train --checkpoint-dir "$T/async" $MODEL --max-steps 60 --save-checkpoint-steps 25 --async-checkpoints
check "train --sync-checkpoints and --async-checkpoints both reach step 60" \
  test "$rs" -eq 0 -a "$rc" -eq 0 -a "$(state_step "$T/sync")" = 60 -a "$(state_step "$T/async")" = 60
same=0
for s in 0 25 50 60; do
  "$TOOL" diff --atol 0 "$T/sync/model.ckpt-$s" "$T/async/model.ckpt-$s" >"$T/diff" 2>&1 && same=$((same + 1))
done
check "... with the same checkpoints at steps 0, 25, 50 and 60 (ckpt-inspect diff --atol 0: $same of 4)" \
  test "$same" -eq 4

# ---- 3-6. kill -9 during phase 2 --------------------------------------------------------
K="$T/killed"
BIG="--hidden 1000,500"
"$PROG" train --checkpoint-dir "$K" $MODEL $BIG --max-steps 1000000 --save-checkpoint-steps 1 \
  --async-checkpoints >"$K.out" 2>"$K.err" &
bg=$!
# Past the synchronous save of step 0, then as soon as a writer's temporary
# file is there.
seen=
i=0
while [ "$i" -lt 6000 ] && kill -0 "$bg" 2>/dev/null; do
  s=$(state_step "$K")
  if [ -n "$s" ] && [ "$s" -ge 2 ]; then
    for f in "$K"/model.ckpt-*.tmp.*; do
      [ -e "$f" ] && seen=$f && break
    done
  fi
  [ -n "$seen" ] && break
  nap 0.005
  i=$((i + 1))
done
kill -9 "$bg" 2>/dev/null
{ wait "$bg"; } 2>/dev/null
rc=$?
bg=
cp "$K.out" "$T/out"
cp "$K.err" "$T/err"
left=$(ls "$K" | grep -c '\.tmp\.')
check "kill -9 while the writer's temporary file exists (${seen##*/}; exit $rc, $left temporary file(s) left)" \
  test -n "$seen" -a "$rc" -eq 137
last=$(state_step "$K")
check "the state file's latest checkpoint (step $last) verifies" \
  sh -c "test -n '$last' && '$TOOL' verify '$K/model.ckpt-$last' >/dev/null 2>&1"
END=$((last + 10))
run "$PROG" train --checkpoint-dir "$K" $MODEL --max-steps "$END" --save-checkpoint-steps 3
check "the killed run resumes from step $last to step $END, its temporary files removed" \
  sh -c "test $rc -eq 0 && grep -q '^resumed from $K/model.ckpt-$last at step $last ' '$T/out' &&
    test \"\$(ls '$K' | grep -c '\.tmp\.')\" -eq 0 && test '$(state_step "$K")' = '$END'"
R="$T/reference"
run "$PROG" train --checkpoint-dir "$R" $MODEL $BIG --max-steps "$END" --save-checkpoint-steps 1000000
if [ "$rc" -eq 0 ] && "$TOOL" diff --atol 0 "$R/model.ckpt-$END" "$K/model.ckpt-$END" >"$T/out" 2>"$T/err"; then
  ok "... and ends bit-identical to an uninterrupted run (ckpt-inspect diff --atol 0)"
else
  not_ok "... and ends bit-identical to an uninterrupted run (exit $rc)"
fi
exit 0
