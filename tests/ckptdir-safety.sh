#!/bin/sh
# tests/ckptdir-safety.sh — the checkpoint directory against its neighbours,
# through tools/cairn-fmnist and tools/ckpt-inspect, run by `make check` (TAP):
#   - a crafted `checkpoint` state file whose entries lead out of the
#     directory ("../x", an absolute path elsewhere, a link to a checkpoint
#     outside) makes train, eval and ckpt-inspect warn and ignore them:
#     the files outside survive a run that rotates its checkpoints, and are
#     neither restored from nor evaluated; with nothing inside named, all
#     three WARN and use the newest checkpoint found by scanning;
#   - two trainers at once on one directory: the second refuses at once,
#     naming the first (pid, host, lock file); a SIGKILLed holder leaves no
#     stale lock;
#   - a restart removes the temporary files of killed saves (the writer's
#     own names only) with one INFO line.
# Tiny synthetic data (gzip IDX, 4x4 "images") and model: seconds.
# Needs $top_builddir; writes only into a temporary directory.

: "${top_builddir:=.}"
: "${top_srcdir:=.}"
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/fmnist-data.sh"
PROG="$top_builddir/tools/cairn-fmnist/cairn-fmnist"
TOOL="$top_builddir/tools/ckpt-inspect/ckpt-inspect"

tap_tmpdir ckptdir-test
T=$(cd "$T" && pwd -P)

echo "1..12"
err_has() { grep -q -F -e "$1" "$T/err"; }

# ---- the synthetic data set (as tests/fmnist.sh) ----------------------------------
S="$T/data"
fmnist_data "$S"
SMALL="--data-dir $S --hidden 16,8 --batch-size 8 --seed 7 --log-every 0 --threads 1"

# ---- 1. a crafted state file -------------------------------------------------------------
# The victims: a "passwd" next to the directory, a file given by absolute
# path, and a real checkpoint (step 99) outside reached through a link
# planted in the directory.
D="$T/run/ckpt"
mkdir -p "$T/run/fakeetc" "$T/abs/victim" "$T/outside"
echo "root:x:0:0::/root:/bin/sh" >"$T/run/fakeetc/passwd"
echo "precious" >"$T/abs/victim/file"
run "$PROG" train --checkpoint-dir "$D" $SMALL --max-steps 4 --save-checkpoint-steps 2
check "train: a first run saves steps 0, 2, 4" test "$rc" -eq 0 -a -f "$D/model.ckpt-4"
cp "$D/model.ckpt-4" "$T/outside/model.ckpt-99"
ln -s ../../outside/model.ckpt-99 "$D/model.ckpt-99"
victims_intact() {
  [ "$(cat "$T/run/fakeetc/passwd")" = "root:x:0:0::/root:/bin/sh" ] && [ "$(cat "$T/abs/victim/file")" = precious ] &&
    [ -f "$T/outside/model.ckpt-99" ] && [ -L "$D/model.ckpt-99" ]
}

# The entries of the report: all of them outside, and the directory's own newest.
cat >"$D/checkpoint" <<EOF
model_checkpoint_path: "../fakeetc/passwd"
all_model_checkpoint_paths: "$T/abs/victim/file"
all_model_checkpoint_paths: "model.ckpt-99"
all_model_checkpoint_paths: "../fakeetc/passwd"
all_model_checkpoint_paths: "model.ckpt-4"
EOF
# max_to_keep is 5: 12 more saves evict every recovered entry many times over.
run "$PROG" train --checkpoint-dir "$D" $SMALL --max-steps 28 --save-checkpoint-steps 2
if [ "$rc" -eq 0 ] && out_has "^resumed from $D/model.ckpt-4 at step 4 " && out_has "^done at step 28: $D/model.ckpt-28 " &&
  victims_intact; then
  ok "train resumes from the directory's own newest checkpoint; files outside survive rotation"
else
  not_ok "train resumes from the directory's own newest checkpoint; files outside survive rotation (exit $rc)"
fi
if err_has "cairn WARNING: checkpoint state '$D/checkpoint': ignoring all_model_checkpoint_paths \"$T/abs/victim/file\": it is in '$T/abs/victim', not in the checkpoint directory '$D'; a state file may only name files in its own directory" &&
  err_has "ignoring all_model_checkpoint_paths \"model.ckpt-99\": it is a symbolic link to '$T/outside/model.ckpt-99', outside the checkpoint directory '$D'" &&
  err_has "ignoring model_checkpoint_path \"../fakeetc/passwd\": it has a '..' component; a state file may only name files in its own directory (using \"model.ckpt-4\", the newest listed one, instead)"; then
  ok "train warns about each ignored entry, naming it and why"
else
  not_ok "train warns about each ignored entry, naming it and why"
fi
check "the directory's own old checkpoints were rotated away" test ! -e "$D/model.ckpt-4" -a -f "$D/model.ckpt-20"

# The issue's file exactly: nothing inside is named.
printf 'model_checkpoint_path: "../fakeetc/passwd"\nall_model_checkpoint_paths: "%s/abs/victim/file"\n' "$T" >"$D/checkpoint"
run "$PROG" eval --checkpoint-dir "$D" --data-dir "$S" --threads 1
if [ "$rc" -eq 0 ] && out_has "^checkpoint $D/model.ckpt-28  step 28$" && victims_intact; then
  ok "eval with only escaping entries: evaluates the directory's newest, not the linked step 99"
else
  not_ok "eval with only escaping entries: evaluates the directory's newest, not the linked step 99 (exit $rc)"
fi
run "$TOOL" meta "$D"
if [ "$rc" -eq 0 ] && out_has "train.global_step.* 28$" && victims_intact; then
  ok "ckpt-inspect on the directory opens its own newest checkpoint"
else
  not_ok "ckpt-inspect on the directory opens its own newest checkpoint (exit $rc)"
fi
# One policy for train, eval and ckpt-inspect: a WARNING and the newest
# checkpoint found by scanning the directory (it used to refuse).
run "$PROG" train --checkpoint-dir "$D" $SMALL --max-steps 32 --save-checkpoint-steps 2
if [ "$rc" -eq 0 ] && err_has "none of its 2 paths names a file in the directory" &&
  err_has "using '$D/model.ckpt-28', the newest intact checkpoint found by scanning the directory" &&
  out_has "^resumed from $D/model.ckpt-28 at step 28 " && victims_intact; then
  ok "train on a state file that names no file of the directory: a WARNING, resumes from the scan's newest; files outside survive"
else
  not_ok "train on a state file that names no file of the directory: a WARNING, resumes from the scan's newest; files outside survive (exit $rc)"
fi

# ---- 2. two trainers at once ----------------------------------------------------------------
L="$T/locked"
"$PROG" train --checkpoint-dir "$L" $SMALL --max-steps 100000000 --save-checkpoint-steps 1000000 \
  >"$T/bg.out" 2>"$T/bg.err" &
bg=$!
i=0
# until it holds the lock and has saved at creation (then it writes no new name for a long while)
while [ "$i" -lt 1000 ] && ! { grep -q "^pid $bg host " "$L/.cairn.lock" 2>/dev/null && [ -f "$L/checkpoint" ]; } &&
  kill -0 "$bg" 2>/dev/null; do
  sleep 0.01 2>/dev/null || sleep 1
  i=$((i + 1))
done
host=$(sed -n 's/^pid [0-9]* host \(.*\)$/\1/p' "$L/.cairn.lock" 2>/dev/null)
check "a running trainer holds the directory's lock, its pid and host in $L/.cairn.lock" test -n "$host"
ls -A "$L" >"$T/before"
t0=$(date +%s)
run "$PROG" train --checkpoint-dir "$L" $SMALL --max-steps 10
t1=$(date +%s)
ls -A "$L" >"$T/after"
if [ "$rc" -eq 1 ] && [ $((t1 - t0)) -le 5 ] &&
  err_has "cairn-fmnist: checkpoint directory: in use by another process: checkpoint_lock_check: checkpoint directory '$L' is in use by another trainer: pid $bg on host '$host' holds the lock '$L/.cairn.lock' (one writer per directory: wait for it to finish, or use another directory)"; then
  ok "a second trainer on the directory refuses at once, naming the holder"
else
  not_ok "a second trainer on the directory refuses at once, naming the holder (exit $rc, $((t1 - t0)) s)"
fi
check "the refused trainer wrote nothing into the directory" cmp -s "$T/before" "$T/after"
run "$PROG" eval --checkpoint-dir "$L" --data-dir "$S" --threads 1
check "eval needs no lock: it runs while the trainer does" test "$rc" -eq 0

# ---- 3. the holder is killed; the restart cleans up --------------------------------------------
kill -9 "$bg" 2>/dev/null
{ wait "$bg"; } 2>/dev/null
bg=
head -c 3000 /dev/zero >"$L/model.ckpt-40.tmp.Ab3dE9"
head -c 2000 /dev/zero >"$L/checkpoint.tmp.q1W2e3"
echo keep >"$L/notes.tmp.abcdef"
run "$PROG" train --checkpoint-dir "$L" $SMALL --max-steps 2
if [ "$rc" -eq 0 ] && [ ! -e "$L/model.ckpt-40.tmp.Ab3dE9" ] && [ ! -e "$L/checkpoint.tmp.q1W2e3" ] &&
  [ -f "$L/notes.tmp.abcdef" ] && [ "$(grep -c 'temporary file' "$T/err")" -eq 1 ] &&
  err_has "cairn INFO: Removed 2 temporary files of unfinished saves (5.0 kB) from $L."; then
  ok "after a SIGKILL the directory is free; the restart removes the leftover temporary files (one INFO line)"
else
  not_ok "after a SIGKILL the directory is free; the restart removes the leftover temporary files (exit $rc)"
fi

[ "$n" -eq 12 ] || {
  echo "not ok - $n tests ran, 12 planned"
  exit 1
}
exit $((failed > 0))
