#!/bin/sh
# tests/ckptdir-confine.sh — what a checkpoint directory's readers open, through
# tools/cairn-fmnist (train, eval) and tools/ckpt-inspect, run by `make check` (TAP):
#   - a state file naming a TensorFlow prefix (no file itself) whose .index
#     or one data shard is a link out of the directory, or whose shard is a
#     FIFO or a directory: nothing outside is read, nothing hangs; the
#     directory's own newest intact checkpoint is used instead (a link that
#     stays inside the directory is kept);
#   - a FIFO named `checkpoint`: a clean warning and the directory scan;
#   - a missing, garbage or all-outside state file next to checkpoints:
#     train, eval and ckpt-inspect all WARN and use the newest checkpoint
#     found by scanning (train does not start again from step 0);
#   - eval when the state file's newest file is gone: the next newest;
#   - a background save that fails: the error comes first, no success line.
# Every program runs under `timeout`, so a regression cannot hang CI.
# Tiny synthetic data (gzip IDX, 4x4 "images") and model: seconds.
# Needs $top_builddir; writes only into a temporary directory.

: "${top_builddir:=.}"
: "${top_srcdir:=.}"
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/fmnist-data.sh"
PROG="$top_builddir/tools/cairn-fmnist/cairn-fmnist"
TOOL="$top_builddir/tools/ckpt-inspect/ckpt-inspect"
command -v timeout >/dev/null 2>&1 || {
  echo "1..0 # SKIP no timeout(1)"
  exit 0
}

tap_tmpdir ckptdir-confine
T=$(cd "$T" && pwd -P)

echo "1..29"
err_has() { grep -q -F -e "$1" "$T/err"; }
out_has_f() { grep -q -F -e "$1" "$T/out"; }

S="$T/data"
fmnist_data "$S"
SMALL="--data-dir $S --hidden 16,8 --batch-size 8 --seed 7 --log-every 0 --threads 1"
TO="timeout 60"

# ---- the fixture: the Saver's steps 0, 2, 4, and a TF bundle of step 2 ----------------------
run $TO "$PROG" train --checkpoint-dir "$T/base" $SMALL --max-steps 4 --save-checkpoint-steps 2
mkdir -p "$T/tf"
run $TO "$TOOL" export --format tf "$T/base/model.ckpt-2" "$T/tf/model.ckpt-99"
SHARD=model.ckpt-99.data-00000-of-00001
check "fixture: checkpoints of steps 0, 2, 4 and a TF bundle" test -f "$T/base/model.ckpt-4" -a -f "$T/tf/$SHARD"

# mk NAME: $D = a copy of the fixture whose state file names the TF prefix
# model.ckpt-99 (newest), $O = a directory next to it (outside)
mk() {
  D="$T/$1"
  O="$T/$1-outside"
  cp -R "$T/base" "$D" && mkdir -p "$O" && cp "$T/tf/model.ckpt-99.index" "$T/tf/$SHARD" "$D/" &&
    printf 'model_checkpoint_path: "model.ckpt-99"\nall_model_checkpoint_paths: "model.ckpt-2"\nall_model_checkpoint_paths: "model.ckpt-4"\nall_model_checkpoint_paths: "model.ckpt-99"\n' >"$D/checkpoint"
}
# link_out FILE: moves $D/FILE to $O and leaves a link to it
link_out() { mv "$D/$1" "$O/$1" && ln -s "$O/$1" "$D/$1"; }

# the three readers of $D must use model.ckpt-4, the directory's own newest
# intact checkpoint, not model.ckpt-99 ($1: what is wrong with it)
expect_own() {
  run $TO "$TOOL" verify "$D"
  if [ "$rc" -eq 0 ] && out_has_f "$D/model.ckpt-4: OK" && ! out_has_f "model.ckpt-99:" && err_has "model.ckpt-99" &&
    err_has "$2"; then
    ok "ckpt-inspect verify DIR, $1: verifies model.ckpt-4 and says why not model.ckpt-99"
  else
    not_ok "ckpt-inspect verify DIR, $1: verifies model.ckpt-4 and says why not model.ckpt-99 (exit $rc)"
  fi
  run $TO "$PROG" eval --checkpoint-dir "$D" --data-dir "$S" --threads 1
  if [ "$rc" -eq 0 ] && out_has "^checkpoint $D/model.ckpt-4  step 4$"; then
    ok "eval, $1: evaluates model.ckpt-4"
  else
    not_ok "eval, $1: evaluates model.ckpt-4 (exit $rc)"
  fi
  run $TO "$PROG" train --checkpoint-dir "$D" $SMALL --max-steps 6 --save-checkpoint-steps 100
  if [ "$rc" -eq 0 ] && out_has "^resumed from $D/model.ckpt-4 at step 4 "; then
    ok "train, $1: resumes from model.ckpt-4"
  else
    not_ok "train, $1: resumes from model.ckpt-4 (exit $rc)"
  fi
}

# ---- 1. a TF prefix whose derived names are not files of the directory ----------------------
mk index-out && link_out model.ckpt-99.index
expect_own "the TF index linked out" "symbolic link to '$O/model.ckpt-99.index', outside the checkpoint directory '$D'"
mk shard-out && link_out "$SHARD"
expect_own "one TF data shard linked out" "it is a symbolic link to '$O/$SHARD', outside the checkpoint directory '$D'"
mk shard-fifo && rm "$D/$SHARD" && mkfifo "$D/$SHARD"
expect_own "a TF data shard that is a FIFO" "it is a FIFO, not a regular file"
mk shard-dir && rm "$D/$SHARD" && mkdir "$D/$SHARD"
expect_own "a TF data shard that is a directory" "it is a directory, not a regular file"

# a link that stays inside the directory: kept (today's policy)
mk shard-in && mv "$D/$SHARD" "$D/real-99.data" && ln -s real-99.data "$D/$SHARD"
run $TO "$TOOL" verify "$D"
check "ckpt-inspect verify DIR, a TF shard linked inside the directory: verifies model.ckpt-99" \
  test "$rc" -eq 0 -a -n "$(grep -F "$D/model.ckpt-99: OK" "$T/out")"
run $TO "$PROG" eval --checkpoint-dir "$D" --data-dir "$S" --threads 1
check "eval, a TF shard linked inside the directory: evaluates model.ckpt-99 (step 2)" \
  test "$rc" -eq 0 -a -n "$(grep "^checkpoint $D/model.ckpt-99  step 2$" "$T/out")"

# ---- 2. a FIFO named `checkpoint` -------------------------------------------------------------
D="$T/state-fifo"
cp -R "$T/base" "$D" && rm "$D/checkpoint" && mkfifo "$D/checkpoint"
run $TO "$TOOL" verify "$D"
check "ckpt-inspect verify DIR, a FIFO named checkpoint: no hang, a warning, verifies model.ckpt-4" \
  test "$rc" -eq 0 -a -n "$(grep -F "$D/model.ckpt-4: OK" "$T/out")" -a -n "$(grep -F "it is a FIFO, not a regular file" "$T/err")"
run $TO "$PROG" eval --checkpoint-dir "$D" --data-dir "$S" --threads 1
check "eval, a FIFO named checkpoint: evaluates model.ckpt-4" \
  test "$rc" -eq 0 -a -n "$(grep "^checkpoint $D/model.ckpt-4  step 4$" "$T/out")"

# ---- 3. a missing, garbage or all-outside state file next to checkpoints ----------------------
for kind in missing garbage outside; do
  D="$T/state-$kind"
  cp -R "$T/base" "$D"
  case $kind in
  missing)
    rm "$D/checkpoint"
    why="no state file '$D/checkpoint'"
    ;;
  garbage)
    echo 'this is { not a state file' >"$D/checkpoint"
    why="state file unusable"
    ;;
  outside)
    printf 'model_checkpoint_path: "/etc/passwd"\nall_model_checkpoint_paths: "../x-5"\n' >"$D/checkpoint"
    why="state file unusable"
    ;;
  esac
  warn="cairn WARNING: checkpoint directory '$D': $why"
  used="using '$D/model.ckpt-4', the newest intact checkpoint found by scanning the directory"
  run $TO "$TOOL" verify "$D"
  check "ckpt-inspect verify DIR, $kind state file: a WARNING, then the newest by scanning" \
    test "$rc" -eq 0 -a -n "$(grep -F "$D/model.ckpt-4: OK" "$T/out")" -a -n "$(grep -F "$warn" "$T/err" | grep -F "$used")"
  run $TO "$PROG" eval --checkpoint-dir "$D" --data-dir "$S" --threads 1
  check "eval, $kind state file: a WARNING, then the newest by scanning" \
    test "$rc" -eq 0 -a -n "$(grep "^checkpoint $D/model.ckpt-4  step 4$" "$T/out")" -a -n "$(grep -F "$warn" "$T/err" | grep -F "$used")"
  run $TO "$PROG" train --checkpoint-dir "$D" $SMALL --max-steps 6 --save-checkpoint-steps 100
  check "train, $kind state file: a WARNING, then resumes from the newest by scanning (not from step 0)" \
    test "$rc" -eq 0 -a -n "$(grep "^resumed from $D/model.ckpt-4 at step 4 " "$T/out")" -a -n "$(grep -F "$warn" "$T/err" | grep -F "$used")"
done

# ---- 4. eval: the state file's newest file is gone ----------------------------------------------
D="$T/vanished"
cp -R "$T/base" "$D"
printf 'model_checkpoint_path: "model.ckpt-6"\nall_model_checkpoint_paths: "model.ckpt-4"\nall_model_checkpoint_paths: "model.ckpt-6"\n' >"$D/checkpoint"
run $TO "$PROG" eval --checkpoint-dir "$D" --data-dir "$S" --threads 1
check "eval, the newest named file is gone: evaluates the next newest and says which was skipped" \
  test "$rc" -eq 0 -a -n "$(grep "^checkpoint $D/model.ckpt-4  step 4$" "$T/out")" -a -n "$(grep -F "skipped '$D/model.ckpt-6': file does not exist" "$T/err")"

# The race with rotation, made deterministic: the training images are a
# FIFO, so eval blocks while it loads its data until this test opens the
# FIFO for writing; the newest checkpoint is deleted at that moment, then
# the data flow. Choosing the checkpoint before loading the data (as eval
# did) then restores a file that is gone.
D="$T/race"
R="$T/race-data"
cp -R "$T/base" "$D" && mkdir -p "$R" && cp "$S"/* "$R/" && rm "$R/train-images-idx3-ubyte.gz" &&
  mkfifo "$R/train-images-idx3-ubyte.gz"
$TO "$PROG" eval --checkpoint-dir "$D" --data-dir "$R" --threads 1 >"$T/out" 2>"$T/err" &
bg=$!
timeout 30 sh -c 'exec 3>"$1" && rm -f "$2" && cat "$3" >&3' sh "$R/train-images-idx3-ubyte.gz" "$D/model.ckpt-4" \
  "$S/train-images-idx3-ubyte.gz"
wait "$bg"
rc=$?
bg=
check "eval, the chosen newest file deleted while the data load: evaluates the next newest (step 2)" \
  test "$rc" -eq 0 -a -n "$(grep "^checkpoint $D/model.ckpt-2  step 2$" "$T/out")"

# ---- 5. a background save that fails: the error first, no success line -------------------------
# A directory where the final checkpoint's file should go: the save of
# step 4 writes its temporary file, then cannot rename it into place.
D="$T/failing-save"
mkdir -p "$D/model.ckpt-4"
run $TO "$PROG" train --checkpoint-dir "$D" $SMALL --max-steps 4 --save-checkpoint-steps 2 --eval-every 4 --async-checkpoints
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && ! out_has "^step 4  test_loss=" && err_has "model.ckpt-4"; then
  ok "train: a failed background save is reported, and no 'step 4 test_loss=' line precedes it"
else
  not_ok "train: a failed background save is reported, and no 'step 4 test_loss=' line precedes it (exit $rc)"
fi

[ "$failed" -eq 0 ]
