#!/bin/sh
# tests/fallback.sh — a corrupt newest checkpoint does not stop the job, run
# by `make check` (TAP) with tools/cairn-fmnist on the tiny synthetic data
# set of tests/fmnist.sh (gzip IDX, 4x4 "images", 320 training and 64 test
# examples) and --hidden 64,32 (so that the middle of a checkpoint file is
# inside a tensor's data), in seconds:
#   - one bit flipped in the middle (the tensor data) of the newest of a
#     directory's checkpoints: the file still opens, only its checksum
#     fails; eval evaluates the checkpoint before it, says so, exits 0 and
#     writes nothing; train warns naming the file, resumes from the previous
#     checkpoint (its variables and its data position), exits 0, and ends
#     bit-identical (ckpt-inspect diff --atol 0) to a run never interrupted;
#   - --log-every 0 across that resume prints no progress line (the
#     interval INT64_MAX was added to the restored step: a signed overflow
#     that printed a line at every step);
#   - every checkpoint corrupt: train and eval fail with a message naming
#     the files, and leave them in place.
# Needs $top_builddir; writes only into a temporary directory.

: "${top_builddir:=.}"
: "${top_srcdir:=.}"
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/fmnist-data.sh"
PROG="$top_builddir/tools/cairn-fmnist/cairn-fmnist"
TOOL="$top_builddir/tools/ckpt-inspect/ckpt-inspect"

tap_tmpdir fallback-test

echo "1..12"

# ---- the synthetic data set (as tests/fmnist.sh) -------------------------------------
S="$T/data"
fmnist_data "$S"
SMALL="--data-dir $S --hidden 64,32 --batch-size 8 --seed 7 --log-every 0 --threads 1 --save-checkpoint-steps 10"
STEPS=60

# flip FILE: one bit of the byte in the middle of FILE (inside the tensor
# data of a checkpoint this size: superblock, index, metadata and footer
# stay sound, so the file still opens and only a data checksum fails).
flip() {
  size=$(wc -c <"$1")
  off=$((size / 2))
  b=$(od -An -tu1 -j "$off" -N1 "$1" | tr -d ' ')
  printf "$(printf '\\%03o' $((b ^ 16)))" | dd of="$1" bs=1 seek="$off" conv=notrunc 2>/dev/null
}

# ---- the uninterrupted reference run, and a run of half as many steps ------------------
R="$T/reference"
D="$T/resumed"
run "$PROG" train --checkpoint-dir "$R" $SMALL --max-steps $STEPS
rc1=$rc
run "$PROG" train --checkpoint-dir "$D" $SMALL --max-steps 30
if [ "$rc1" -eq 0 ] && [ "$rc" -eq 0 ] && [ -f "$R/model.ckpt-$STEPS" ] && [ -f "$D/model.ckpt-20" ] &&
  [ -f "$D/model.ckpt-30" ]; then
  ok "a reference run of $STEPS steps, and a run of 30 with a checkpoint every 10"
else
  not_ok "a reference run of $STEPS steps, and a run of 30 with a checkpoint every 10 (exit $rc1, $rc)"
fi

flip "$D/model.ckpt-30"
run "$TOOL" verify "$D/model.ckpt-30"
v30=$rc
grep -q "chunk 0: checksum mismatch" "$T/out" "$T/err"
chunk=$?
run "$TOOL" verify "$D/model.ckpt-20"
if [ "$v30" -eq 1 ] && [ "$chunk" -eq 0 ] && [ "$rc" -eq 0 ]; then
  ok "the flipped bit makes the newest checkpoint fail verification; the one before is intact"
else
  not_ok "the flipped bit makes the newest checkpoint fail verification (verify exit $v30, $rc)"
fi

# ---- eval falls back -----------------------------------------------------------------------
fingerprint "$D" >"$T/before"
run "$PROG" eval --checkpoint-dir "$D" --data-dir "$S"
fingerprint "$D" >"$T/after"
if [ "$rc" -eq 0 ] && out_has "^checkpoint $D/model.ckpt-20  step 20$" && out_has "^test_accuracy=0\.[0-9]*$"; then
  ok "eval evaluates the checkpoint before the corrupt one, exit 0"
else
  not_ok "eval evaluates the checkpoint before the corrupt one (exit $rc)"
fi
if err_has "^cairn-fmnist: warning: $D/model.ckpt-30 is unusable (.*checksum.*): evaluating the newest intact checkpoint instead$"; then
  ok "eval says which file it skipped and why"
else
  not_ok "eval says which file it skipped and why"
fi
if cmp -s "$T/before" "$T/after"; then
  ok "eval leaves the directory unchanged, the corrupt file in place"
else
  not_ok "eval leaves the directory unchanged, the corrupt file in place"
  diff "$T/before" "$T/after" | sed 's/^/# /'
fi

# ---- train falls back and resumes exactly ------------------------------------------------------
run "$PROG" train --checkpoint-dir "$D" $SMALL --max-steps $STEPS
if [ "$rc" -eq 0 ] && out_has "^resumed from $D/model.ckpt-20 at step 20 (epoch 0, example 160)$" &&
  out_has "^done at step $STEPS: $D/model.ckpt-$STEPS "; then
  ok "train resumes from the checkpoint before the corrupt one, at its step and data position, exit 0"
else
  not_ok "train resumes from the checkpoint before the corrupt one (exit $rc)"
fi
if err_has "^cairn WARNING: Checkpoint $D/model.ckpt-30 is unusable (.*checksum.*); restoring $D/model.ckpt-20 instead, the newest intact checkpoint"; then
  ok "train warns, naming the corrupt file, the reason and the file restored"
else
  not_ok "train warns, naming the corrupt file, the reason and the file restored"
fi
run "$TOOL" diff --atol 0 "$R/model.ckpt-$STEPS" "$D/model.ckpt-$STEPS"
check "the resumed run ends bit-identical to the uninterrupted one (ckpt-inspect diff --atol 0)" test "$rc" -eq 0
run "$TOOL" verify "$D/model.ckpt-30"
check "the step-30 checkpoint saved again by the resumed run replaced the corrupt file" test "$rc" -eq 0

# ---- --log-every 0 across a resume ----------------------------------------------------------------
# (the reference run's directory: this does not depend on the fall back)
run "$PROG" train --checkpoint-dir "$R" $SMALL --max-steps $((STEPS + 20))
lines=$(grep -c '^step=' "$T/out")
if [ "$rc" -eq 0 ] && out_has "^resumed from $R/model.ckpt-$STEPS at step $STEPS " && [ "$lines" -le 1 ]; then
  ok "--log-every 0 across a resume: no periodic progress line ($lines)"
else
  not_ok "--log-every 0 across a resume: no periodic progress line ($lines lines, exit $rc)"
fi

# ---- every checkpoint corrupt -------------------------------------------------------------------------
B="$T/bad"
mkdir "$B" && cp "$D"/model.ckpt-* "$D"/checkpoint "$B"/
for f in "$B"/model.ckpt-*; do flip "$f"; done
run "$PROG" eval --checkpoint-dir "$B" --data-dir "$S"
if [ "$rc" -eq 1 ] && err_has "^cairn-fmnist: no intact checkpoint to evaluate in $B: every one left is corrupt" &&
  err_has "^cairn-fmnist: warning: $B/model.ckpt-60 is unusable" && err_has "^cairn-fmnist: warning: $B/model.ckpt-50 is unusable"; then
  ok "eval with every checkpoint corrupt fails and says so"
else
  not_ok "eval with every checkpoint corrupt fails and says so (exit $rc)"
fi
run "$PROG" train --checkpoint-dir "$B" $SMALL --max-steps $((STEPS + 30))
if [ "$rc" -eq 1 ] && err_has "no intact checkpoint in '$B' to restore: '$B/model.ckpt-60'.*; '$B/model.ckpt-50'" &&
  [ -f "$B/model.ckpt-50" ] && [ -f "$B/model.ckpt-60" ]; then
  ok "train with every checkpoint corrupt fails naming each file, and leaves them in place"
else
  not_ok "train with every checkpoint corrupt fails naming each file, and leaves them in place (exit $rc)"
fi

[ "$failed" -eq 0 ]
