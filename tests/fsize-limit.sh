#!/bin/sh
# tests/fsize-limit.sh — a file size limit (ulimit -f, RLIMIT_FSIZE) below
# the size of a checkpoint, run by `make check` (TAP). The tools ignore
# SIGXFSZ, whose default action would kill them (exit status 153, no
# message, a temporary file left), so a write past the limit fails with
# EFBIG and the command fails cleanly:
#   - cairn-fmnist train (asynchronous and synchronous saves) resumed under
#     the limit: exit status 1, an error naming the file and "File too
#     large", the previous checkpoint and the state file intact, no
#     temporary file left;
#   - ckpt-inspect import, recover and export (npz) under the limit: the
#     same, and no output file.
# Tiny synthetic data (tests/fmnist-data.sh), a model whose checkpoint is
# about 450 kB; the limit is 100 blocks (50 kB in dash's 512-byte blocks,
# 100 kB in bash's 1024-byte ones). Every run is under `timeout`.
# Needs $top_builddir; writes only into a temporary directory.

: "${top_builddir:=.}"
: "${top_srcdir:=.}"
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/fmnist-data.sh"
PROG="$top_builddir/tools/cairn-fmnist/cairn-fmnist"
TOOL="$top_builddir/tools/ckpt-inspect/ckpt-inspect"

command -v timeout >/dev/null 2>&1 || {
  echo "1..0 # SKIP timeout(1) is missing"
  exit 0
}
(ulimit -f 100) 2>/dev/null || {
  echo "1..0 # SKIP this shell cannot set a file size limit (ulimit -f)"
  exit 0
}
tap_tmpdir fsize-limit-test
T=$(cd "$T" && pwd -P)

echo "1..8"
TAP_OMIT='INFO: Saving'
S="$T/data"
fmnist_data "$S"
MODEL="--data-dir $S --hidden 256,128 --batch-size 8 --seed 7 --log-every 0 --threads 1"
LIMIT=100

# limited CMD...: runs CMD under the file size limit, as `run` does
limited() {
  (
    ulimit -f "$LIMIT" || exit 99
    exec "$@"
  ) >"$T/out" 2>"$T/err"
  rc=$?
}
no_temp() { [ -z "$(find "$1" -name '*.tmp.*' 2>/dev/null)" ]; }

# ---- 1-3. train, resumed under the limit --------------------------------------------------------
# train NAME [FLAGS]: a first run without a limit saves steps 0, 2, 4; the
# same command resumed under the limit re-saves nothing at step 4 (the
# file already holds those values) and fails at the save of step 6.
train() {
  D="$T/$1"
  run timeout 120 "$PROG" train --checkpoint-dir "$D" $MODEL --max-steps 4 --save-checkpoint-steps 2 $2
  [ "$rc" -eq 0 ] || return 1
  cksum "$D/model.ckpt-4" "$D/checkpoint" >"$T/$1.before"
  limited timeout 120 "$PROG" train --checkpoint-dir "$D" $MODEL --max-steps 8 --save-checkpoint-steps 2 $2
  cksum "$D/model.ckpt-4" "$D/checkpoint" >"$T/$1.after" 2>/dev/null
  [ "$rc" -eq 1 ] && err_has "'$D/model\.ckpt-6\.tmp\.[A-Za-z0-9]\{6\}' (for '$D/model\.ckpt-6') at offset [0-9]*: File too large" &&
    cmp -s "$T/$1.before" "$T/$1.after" && [ "$(state_step "$D")" = 4 ] && [ ! -e "$D/model.ckpt-6" ] && no_temp "$D"
}
check "train (asynchronous saves) over the file size limit: exit 1 (not 153), 'File too large' naming the file, step 4 intact, no temporary file" train async
check "train --sync-checkpoints over the file size limit: the same" train sync --sync-checkpoints
run timeout 60 "$TOOL" verify "$T/async/model.ckpt-4"
check "the previous checkpoint verifies" test "$rc" -eq 0

# ---- 4-8. ckpt-inspect writes ---------------------------------------------------------------------
C="$T/async/model.ckpt-4"
run timeout 60 "$TOOL" export "$C" "$T/m.npz"
check "export without a limit (the input of import)" test "$rc" -eq 0 -a -f "$T/m.npz"
mkdir "$T/o"
# too_large WHAT OUT: exit 2 (not 153), "File too large" naming OUT's temporary, no OUT, no temporary
too_large() {
  [ "$rc" -eq 2 ] && err_has "$2\.tmp\.[A-Za-z0-9]\{6\}.*File too large" && [ ! -e "$2" ] && no_temp "$T/o"
}
limited timeout 60 "$TOOL" import "$T/m.npz" "$T/o/imported.ckpt"
check "ckpt-inspect import over the limit: exit 2, 'File too large' naming the file, nothing left" \
  too_large import "$T/o/imported.ckpt"
limited timeout 60 "$TOOL" recover "$C" "$T/o/recovered.ckpt"
check "ckpt-inspect recover over the limit: the same" too_large recover "$T/o/recovered.ckpt"
limited timeout 60 "$TOOL" export "$C" "$T/o/exported.npz"
check "ckpt-inspect export over the limit: the same" too_large export "$T/o/exported.npz"
limited timeout 60 "$TOOL" export --format safetensors "$C" "$T/o/exported.safetensors"
check "ckpt-inspect export --format safetensors over the limit: the same" \
  too_large export "$T/o/exported.safetensors"

[ "$n" -eq 8 ] || {
  echo "not ok - $n tests ran, 8 planned"
  exit 1
}
exit $((failed > 0))
