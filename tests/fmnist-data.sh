# tests/fmnist-data.sh — tests/fmnist.sh's tiny synthetic Fashion-MNIST-like
# data set and the checkpoint and process helpers of the tests that train
# with tools/cairn-fmnist; sourced (not run) after tests/tap.sh as
# `. "$top_srcdir/tests/fmnist-data.sh"`.

# idx FILE N ROWS COLS|-: gzip IDX u8 images (N, ROWS, COLS) or labels (N).
# Example i has label i mod 10 and pixels that depend on the label and i.
# Uses $T/fmt as scratch.
idx() {
  awk -v n="$2" -v r="$3" -v c="$4" 'function b(x) { printf "\\%03o", x % 256 }
    BEGIN {
      if (c == "-") { b(0); b(0); b(8); b(1) } else { b(0); b(0); b(8); b(3) }
      b(int(n / 16777216)); b(int(n / 65536)); b(int(n / 256)); b(n)
      if (c != "-") { b(0); b(0); b(0); b(r); b(0); b(0); b(0); b(c) }
      for (i = 0; i < n; i++) {
        k = i % 10
        if (c == "-") { b(k); continue }
        for (j = 0; j < r * c; j++) b((j == k || j == k + 6) ? 200 + (i * 7) % 50 : (i * 13 + j * 29) % 60)
      }
    }' >"$T/fmt" && printf "$(cat "$T/fmt")" | gzip -c >"$1"
}
# fmnist_data DIR: the data set in DIR (created): 4x4 "images", 320
# training and 64 test examples.
fmnist_data() {
  mkdir -p "$1" &&
    idx "$1/train-images-idx3-ubyte.gz" 320 4 4 && idx "$1/train-labels-idx1-ubyte.gz" 320 - - &&
    idx "$1/t10k-images-idx3-ubyte.gz" 64 4 4 && idx "$1/t10k-labels-idx1-ubyte.gz" 64 - -
}

# state_step DIR: the step of DIR's newest checkpoint according to its state
# file ("" if none)
state_step() {
  sed -n 's/^model_checkpoint_path: "model\.ckpt-\([0-9][0-9]*\)"$/\1/p' "$1/checkpoint" 2>/dev/null
}
# fingerprint DIR: names, inodes, sizes, times (to the nanosecond), contents
# of DIR itself but not of its parent
fingerprint() { (cd "$1" && ls -lid --full-time . && ls -liA --full-time && cksum ./*); }
# now: the time in seconds (fractional); nap SECS: sleep (1 s without
# fractional sleep); lt A B: A < B as numbers
now() { date +%s.%N; }
nap() { sleep "$1" 2>/dev/null || sleep 1; }
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }
# wait_exec PID: waits (up to 10 s) until PID runs the program itself, not
# the shell or env in front of it. In a build tree the program is libtool's
# wrapper, a bash script that execs .libs/PROG; bash catches a SIGINT that
# arrives while the script runs and then execs anyway, so that signal is
# lost and the program trains on. Where /proc is missing it returns at once.
wait_exec() {
  [ -e "/proc/$1/exe" ] || return 0
  _we=0
  while [ $_we -lt 1000 ] && kill -0 "$1" 2>/dev/null; do
    case $(readlink "/proc/$1/exe" 2>/dev/null) in
    */bash | */dash | */sh | */env | "") ;;
    *) return 0 ;;
    esac
    nap 0.01
    _we=$((_we + 1))
  done
}
# wait_exit PID SECS: waits for PID to end, up to SECS seconds; 1 (and a
# SIGKILL) if it did not
wait_exit() {
  _we=0
  while kill -0 "$1" 2>/dev/null; do
    if [ $_we -ge $(($2 * 10)) ]; then
      kill -KILL "$1" 2>/dev/null
      return 1
    fi
    nap 0.1
    _we=$((_we + 1))
  done
}
