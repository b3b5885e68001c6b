#!/bin/sh
# tests/bf16.sh — cairn-fmnist --precision bf16 (doc/bf16.md), run by `make
# check` (TAP), on tests/fmnist.sh's tiny synthetic data set:
#   - a bf16 run killed with SIGKILL after a checkpoint and run again with the
#     same command ends bit-identical (ckpt-inspect diff --atol 0) to one
#     never interrupted: the checkpoints hold the fp32 masters and slots, and
#     the resumed model makes its bf16 kernels from them;
#   - the checkpoint records user.fmnist.precision "bf16";
#   - bf16 and f32 runs differ (the option reaches the model);
#   - eval of the bf16 checkpoint in f32 and in bf16, and warm starts from
#     the bf16 run into an f32 model and from that one back into bf16.
# Needs $top_builddir; writes only into a temporary directory.

: "${top_builddir:=.}"
: "${top_srcdir:=.}"
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/fmnist-data.sh"
PROG="$top_builddir/tools/cairn-fmnist/cairn-fmnist"
TOOL="$top_builddir/tools/ckpt-inspect/ckpt-inspect"

tap_tmpdir bf16-test
echo "1..8"
TAP_OMIT='INFO: Saving'

S="$T/data"
fmnist_data "$S"
WARM="--data-dir $S --batch-size 8 --seed 7 --log-every 0 --threads 1 --sync-checkpoints"
MODEL="--data-dir $S --hidden 64,32 --batch-size 8 --seed 7 --log-every 0 --threads 1 --sync-checkpoints"
STEPS=200

# 1. the uninterrupted bf16 run and the one killed after step 40, resumed
expect 0 "bf16 run of $STEPS steps" "$PROG" train --checkpoint-dir "$T/full" $MODEL --max-steps $STEPS \
  --save-checkpoint-steps 20 --precision bf16
"$PROG" train --checkpoint-dir "$T/kill" $MODEL --max-steps $STEPS --save-checkpoint-steps 20 --precision bf16 \
  >"$T/kill.out" 2>"$T/kill.err" &
bg=$!
i=0
while [ "$i" -lt 3000 ] && kill -0 "$bg" 2>/dev/null; do
  s=$(state_step "$T/kill")
  [ -n "$s" ] && [ "$s" -ge 40 ] && break
  nap 0.01
  i=$((i + 1))
done
kill -9 "$bg" 2>/dev/null
{ wait "$bg"; } 2>/dev/null
bg=
killed_at=$(state_step "$T/kill")
run "$PROG" train --checkpoint-dir "$T/kill" $MODEL --max-steps $STEPS --save-checkpoint-steps 20 --precision bf16
if [ "$rc" -eq 0 ] && "$TOOL" diff --atol 0 "$T/full" "$T/kill" >"$T/out" 2>"$T/err"; then
  ok "SIGKILL at checkpoint step ${killed_at:-?}, resumed: bit-identical to the uninterrupted bf16 run"
else
  not_ok "SIGKILL at checkpoint step ${killed_at:-?}, resumed: bit-identical to the uninterrupted bf16 run (exit $rc)"
fi

# 2. the metadata
run "$TOOL" meta "$T/full"
check "the checkpoint records user.fmnist.precision \"bf16\"" out_has 'user.fmnist.precision.*"bf16"'

# 3. f32 is another run
run "$PROG" train --checkpoint-dir "$T/f32" $MODEL --max-steps $STEPS --save-checkpoint-steps 20 --precision f32
if [ "$rc" -eq 0 ] && ! "$TOOL" diff --atol 0 "$T/full" "$T/f32" >"$T/out" 2>"$T/err"; then
  ok "an f32 run gives other weights than the bf16 run"
else
  not_ok "an f32 run gives other weights than the bf16 run (exit $rc)"
fi

# 4. evaluation in either precision
expect 0 "eval of the bf16 checkpoint in f32" "$PROG" eval --checkpoint-dir "$T/full" --data-dir "$S" --threads 1
expect 0 "eval of the bf16 checkpoint in bf16" "$PROG" eval --checkpoint-dir "$T/full" --data-dir "$S" --threads 1 \
  --precision bf16

# 5. warm starts across precisions
expect 0 "warm start from the bf16 run into an f32 model" "$PROG" warm-start --from "$T/full" \
  --checkpoint-dir "$T/w32" --method restore-option $WARM --max-steps 20 --precision f32
expect 0 "and from that f32 run back into a bf16 model" "$PROG" warm-start --from "$T/w32" \
  --checkpoint-dir "$T/w16" --method restore-option $WARM --max-steps 20 --precision bf16

[ "$failed" -eq 0 ]
