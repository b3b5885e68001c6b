#!/bin/sh
# tests/examples.sh — examples/train_resume end to end, run by `make check`
# (TAP): train with checkpoints; kill -9 a run mid-way and resume it from
# its last checkpoint (and check that the result is bit-identical to a run
# that was never interrupted); evaluate from another process without
# writing anything; fine-tune a new output layer on the restored hidden
# layers; ckpt-inspect verify / list. Needs $top_builddir and $top_srcdir
# (set by the Makefile); writes only into a fresh temporary directory.

: "${top_builddir:=.}"
: "${top_srcdir:=.}"
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/fmnist-data.sh"
PROG="$top_builddir/examples/train_resume"
TOOL="$top_builddir/tools/ckpt-inspect/ckpt-inspect"

tap_tmpdir examples-test

echo "1..22"
nap() { sleep 0.1 2>/dev/null || sleep 1; }

D="$T/run"
R="$T/reference"
F="$T/finetune"

# ---- 1. a first run: to step 40, a checkpoint every 10 -----------------------------
run "$PROG" train --dir "$D" --steps 40 --save-steps 10
if [ "$rc" -eq 0 ] && out_has "^no checkpoint in .*: initialized a new model at step 0$" &&
  out_has "^step   40  train loss [0-9.]*  eval loss [0-9.]*  eval accuracy [0-9.]*$" &&
  out_has "^done at step 40: $D/model.ckpt-40$" && [ "$(state_step "$D")" = 40 ]; then
  ok "train to step 40 from scratch, checkpoints every 10"
else
  not_ok "train to step 40 from scratch, checkpoints every 10 (exit $rc)"
fi
check "one evaluation line per round of 10 steps" \
  test "$(grep -c '^step ' "$T/out")" -eq 4

# ---- 2. a run to 200, killed with SIGKILL mid-way, then resumed ---------------------
# 20 ms per step: the run takes >= 3 s, and we kill it as soon as the state
# file names a checkpoint past 40 (polled, at most 20 s on a loaded machine).
"$PROG" train --dir "$D" --steps 200 --save-steps 10 --sleep-ms 20 >"$T/killed.out" 2>"$T/killed.err" &
bg=$!
i=0
while [ "$i" -lt 200 ]; do
  s=$(state_step "$D")
  [ -n "$s" ] && [ "$s" -gt 40 ] && break
  nap
  i=$((i + 1))
done
kill -9 "$bg" 2>/dev/null
wait "$bg"
krc=$?
bg=
saved=$(state_step "$D")
cp "$T/killed.out" "$T/out"
cp "$T/killed.err" "$T/err"
if [ "$krc" -eq 137 ] && [ -n "$saved" ] && [ "$saved" -gt 40 ] && [ "$saved" -lt 200 ]; then
  ok "SIGKILL mid-way: the last checkpoint is step $saved"
else
  not_ok "SIGKILL mid-way (exit $krc, expected 137; last checkpoint '$saved', expected 50..190)"
fi
check "the killed run had resumed from step 40" \
  grep -q "^resumed from $D/model.ckpt-40 at step 40$" "$T/killed.out"

run "$PROG" train --dir "$D" --steps 200 --save-steps 10
if [ "$rc" -eq 0 ] && out_has "^resumed from $D/model.ckpt-$saved at step $saved$"; then
  ok "restart continues from the last checkpoint (step $saved), not from 0"
else
  not_ok "restart continues from the last checkpoint (step $saved) (exit $rc)"
fi
first=$(sed -n 's/^step *\([0-9][0-9]*\) .*/\1/p' "$T/out" | head -n 1)
check "the first round after the restart ends at step $((saved + 10))" test "$first" = "$((saved + 10))"
check "reaches step 200" out_has "^done at step 200: $D/model.ckpt-200$"
check "the state file names model.ckpt-200" test "$(state_step "$D")" = 200
final_acc=$(sed -n 's/^step  200 .*eval accuracy \([0-9.]*\)$/\1/p' "$T/out")

# The same 200 steps without interruption: every tensor of the final
# checkpoint is bit-identical (batches follow the global step, and the
# checkpoint holds the whole training state: weights, Adam slots,
# beta powers, global_step).
run "$PROG" train --dir "$R" --steps 200 --save-steps 10
check "an uninterrupted run to 200" test "$rc" -eq 0
run "$TOOL" diff "$R" "$D"
check "killed-and-resumed equals uninterrupted, bit for bit" test "$rc" -eq 0

run "$PROG" train --dir "$D" --steps 200 --save-steps 10
if [ "$rc" -eq 0 ] && out_has "^already at step 200 (--steps 200): nothing to train$"; then
  ok "a run at its last step trains nothing"
else
  not_ok "a run at its last step trains nothing (exit $rc)"
fi

# ---- 3. evaluation in a separate process writes nothing ------------------------------
fingerprint "$D" >"$T/before"
run "$PROG" eval --dir "$D"
fingerprint "$D" >"$T/after"
if [ "$rc" -eq 0 ] &&
  out_has "^evaluated $D/model.ckpt-200 at step 200: test loss [0-9.]*  test accuracy [0-9.]*$"; then
  ok "eval prints the step and the accuracy"
else
  not_ok "eval prints the step and the accuracy (exit $rc)"
fi
check "eval's accuracy is the trainer's at step 200 ($final_acc)" \
  out_has "test accuracy $final_acc$"
if cmp -s "$T/before" "$T/after"; then
  ok "eval leaves the checkpoint directory unchanged"
else
  not_ok "eval leaves the checkpoint directory unchanged"
  diff "$T/before" "$T/after" | sed 's/^/# /'
fi

# ---- 4. fine-tuning: restore the hidden layers, a new 5-class output layer -----------
run "$PROG" finetune --from "$D" --dir "$F" --steps 30 --save-steps 10
if [ "$rc" -eq 0 ] && out_has "^partial restore from $D/model.ckpt-200:$" &&
  out_has "^  restored (4): dense/kernel, dense/bias, dense_1/kernel, dense_1/bias$"; then
  ok "finetune restores the hidden layers"
else
  not_ok "finetune restores the hidden layers (exit $rc)"
fi
mismatched="dense_2/kernel (checkpoint (32, 10), model (32, 5)), dense_2/bias (checkpoint (10), model (5))"
check "the old output layer is reported mismatched" out_has "^  mismatched (2): $mismatched$"
if out_has "^step   30  train loss [0-9.]*  eval loss [0-9.]*  eval accuracy [0-9.]*  saved $F/model.ckpt-30$" &&
  [ "$(state_step "$F")" = 30 ]; then
  ok "finetune trains to step 30 and saves into its own directory"
else
  not_ok "finetune trains to step 30 and saves into its own directory"
fi
run "$PROG" finetune --from "$D" --dir "$F" --steps 40 --save-steps 10
if [ "$rc" -eq 0 ] && out_has "^resumed fine-tuning from $F/model.ckpt-30$" && ! out_has "partial restore" &&
  out_has "saved $F/model.ckpt-40$"; then
  ok "a second finetune continues from its own checkpoint"
else
  not_ok "a second finetune continues from its own checkpoint (exit $rc)"
fi

# ---- 5. ckpt-inspect -------------------------------------------------------------------
run "$TOOL" verify "$D"
check "ckpt-inspect verify passes" test "$rc" -eq 0
run "$TOOL" list "$D"
if [ "$rc" -eq 0 ] && out_has "^global_step  *i64  *() " && out_has "^dense/kernel/Adam  " &&
  out_has "^dense_2/bias/Adam_1  " && out_has "^beta1_power  "; then
  ok "ckpt-inspect list shows global_step and the Adam slots"
else
  not_ok "ckpt-inspect list shows global_step and the Adam slots (exit $rc)"
fi

# ---- errors -------------------------------------------------------------------------------
run "$PROG" eval --dir "$T/empty"
if [ "$rc" -eq 1 ] && grep -q "^train_resume: no checkpoint to evaluate: not found: " "$T/err" &&
  [ ! -e "$T/empty" ]; then
  ok "eval without a checkpoint: exit 1, a message, nothing created"
else
  not_ok "eval without a checkpoint: exit 1, a message, nothing created (exit $rc)"
fi
run "$PROG" train --dir "$D" --steps x
check "a bad argument is a usage error (exit 2)" test "$rc" -eq 2

[ "$n" -eq 22 ] || echo "# planned 22 tests, ran $n"
[ "$failed" -eq 0 ]
