#!/bin/sh
# cairn quick start for a fresh Debian 12 machine, run from a checkout.
#
#   sh tools/quickstart.sh demo   install what is missing, build, train cairn-fmnist on
#                                 Fashion-MNIST, interrupt it (SIGKILL), resume,
#                                 evaluate, list the checkpoint with ckpt-inspect
#   sh tools/quickstart.sh test   install what is missing, build, run every test:
#                                 make check (each Criterion test under each
#                                 ISA the CPU has: avx512, avx2, ref), a build with
#                                 --disable-openmp and its make check, a build
#                                 with --without-mpi (what the demo builds on a
#                                 machine without Open MPI), its make check and
#                                 the demo's steps on it in short, builds with
#                                 --with-blas=blis and --without-dnnl and the
#                                 numerics tests on them, make install
#                                 into a temporary prefix + a program built with
#                                 pkg-config, make distcheck, and a short
#                                 libFuzzer run of the checkpoint reader
#                                 (clang, ASan+UBSan; CAIRN_FUZZ_SECONDS, 60).
# The test mode ends with one line "N passed, N failed" and exits non-zero
# if anything failed. Packages are installed with apt-get (as root, or via
# sudo when not root).
#
# A build directory is reused only if it was configured with the same flags
# and the same answers to "is Open MPI installed?" and "is oneDNN
# installed?" (the stamp file
# .quickstart-config in it); otherwise it is cleaned and configured again,
# so the demo (which installs no MPI) and the test mode (which does) can be
# run one after the other in either order.
set -u
mode=${1:-demo}
case $mode in demo | test) ;; *) echo "usage: sh tools/quickstart.sh demo|test" >&2; exit 2 ;; esac
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
jobs=$(nproc 2>/dev/null || echo 2)

pkgs="gcc make autoconf automake libtool pkg-config libopenblas-openmp-dev liblz4-dev libzstd-dev zlib1g-dev libjansson-dev libsnappy-dev libzip-dev libcriterion-dev dataset-fashion-mnist"
# oneDNN: the GEMM engine on AVX-512 CPUs (configure uses it when found).
pkgs="$pkgs libdnnl-dev"
# The test mode also fuzzes the checkpoint reader with clang's libFuzzer, and
# reads ckpt-inspect's .npz exports back with numpy and the TensorBoard event
# files with the protobuf library.
[ "$mode" = test ] && pkgs="$pkgs clang libclang-rt-14-dev python3-numpy python3-protobuf man-db"
# ... and runs tests/mpi.sh (data-parallel training, mpirun -np 2).
[ "$mode" = test ] && pkgs="$pkgs libopenmpi-dev openmpi-bin"
# ... and builds the GEMM alternatives (--with-blas=blis; --without-dnnl).
[ "$mode" = test ] && pkgs="$pkgs libblis-openmp-dev"
missing=
for p in $pkgs; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  sudo=
  [ "$(id -u)" = 0 ] || sudo=sudo
  echo "quickstart: installing$missing"
  $sudo apt-get update -qq || exit 1
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing || exit 1
fi

[ -x configure ] && [ configure -nt configure.ac ] || autoreconf -fi || exit 1

# What a build directory is configured for: its configure flags and
# whether configure could find MPI (it builds with MPI when mpicc is there,
# unless told --without-mpi) and oneDNN (dnnl.h, unless --without-dnnl).
# CC too, which the fuzzing build sets.
want_config() { # configure flags...
  mpi=no
  case " $* " in
  *" --without-mpi "*) mpi=off ;;
  *) command -v mpicc >/dev/null 2>&1 && mpi=yes ;;
  esac
  dnnl=no
  case " $* " in
  *" --without-dnnl "*) dnnl=off ;;
  *) echo '#include <dnnl.h>' | ${CC:-cc} -E - >/dev/null 2>&1 && dnnl=yes ;;
  esac
  printf 'flags: %s\nmpicc: %s\ndnnl: %s\nCC: %s\n' "$*" "$mpi" "$dnnl" "${CC:-}"
}
# Configures the current directory unless its stamp says it already is
# configured as wanted; a directory configured otherwise is cleaned first.
configure_as() { # configure flags...
  want=$(want_config "$@")
  [ -f Makefile ] && [ "$(cat .quickstart-config 2>/dev/null)" = "$want" ] && return 0
  if [ -f Makefile ]; then
    one_line() { printf '%s\n' "$1" | paste -sd';' - | sed 's/;/; /g'; }
    echo "quickstart: $(pwd) was configured for another setup ($(one_line "$(cat .quickstart-config 2>/dev/null || echo 'no record')")); cleaning it and configuring again ($(one_line "$want"))"
    make distclean >/dev/null 2>&1
  fi
  rm -f .quickstart-config
  "$top/configure" -q "$@" || return 1
  printf '%s\n' "$want" >.quickstart-config
}

# Out-of-tree builds, so the checkout stays clean.
build() { # dir, configure flags...
  dir=$1; shift
  mkdir -p "$dir" && cd "$dir" || exit 1
  configure_as "$@" || exit 1
  make -j"$jobs" >make.out 2>&1 || { tail -40 make.out; exit 1; }
  cd "$top" || exit 1
}

# The step of DIR's newest checkpoint (empty when there is none).
newest_step() { # dir
  sed -n 's/^model_checkpoint_path: "model\.ckpt-\([0-9]*\)"$/\1/p' "$1/checkpoint" 2>/dev/null
}
# SIGKILLs the background job PID at DIR's first checkpoint past step 0, or
# after TENTHS tenths of a second, and waits for it.
kill_at_first_checkpoint() { # pid dir tenths
  i=0
  while [ $i -lt "$3" ] && kill -0 "$1" 2>/dev/null; do
    s=$(newest_step "$2")
    [ -n "$s" ] && [ "$s" -gt 0 ] && break
    sleep 0.1; i=$((i + 1))
  done
  kill -KILL "$1" 2>/dev/null
  wait "$1" 2>/dev/null
}

build _build
if [ "$mode" = demo ]; then
  fm=_build/tools/cairn-fmnist/cairn-fmnist dir=_build/fmnist-demo
  rm -rf "$dir"
  # Killed at its first checkpoint past step 0 (a fixed delay let a fast
  # CPU finish all 18760 steps first: 8 s on an AMD Zen 5), or after 10 s.
  echo "== cairn-fmnist train, interrupted with SIGKILL at its first checkpoint past step 0 (at most 10 s)"
  "$fm" train --checkpoint-dir "$dir" &
  kill_at_first_checkpoint $! "$dir" 100
  echo "== the same command again: resumes from the last checkpoint"
  "$fm" train --checkpoint-dir "$dir" || exit 1
  echo "== cairn-fmnist eval"
  "$fm" eval --checkpoint-dir "$dir" || exit 1
  echo "== ckpt-inspect list $dir"
  exec _build/tools/ckpt-inspect/ckpt-inspect list "$dir"
fi

passed=0 failed=0
ok() { passed=$((passed + 1)); echo "PASS: $1"; }
bad() { failed=$((failed + 1)); echo "FAIL: $1"; }

# Counts automake test results (one per TAP test point) from .trs files.
count_trs() { # dir
  p=$(cat $(find "$1" -name '*.trs' 2>/dev/null) /dev/null | grep -c '^:test-result: \(PASS\|XFAIL\|SKIP\)')
  f=$(cat $(find "$1" -name '*.trs' 2>/dev/null) /dev/null | grep -c '^:test-result: \(FAIL\|XPASS\|ERROR\)')
  passed=$((passed + p)); failed=$((failed + f))
  echo "$1: $p passed, $f failed"
}

check() { # dir label [VAR=value... for make check: on its command line, so TESTS= too]
  (d=$1 && shift 2 && cd "$d" && make -j"$jobs" check "$@" >check.out 2>&1)
  rc=$?
  count_trs "$1"
  if [ $rc -ne 0 ]; then
    grep -h '^FAIL\|^ERROR' "$1"/tests/*.log 2>/dev/null | head -40
    [ -n "$(find "$1" -name '*.trs')" ] || { tail -30 "$1/check.out"; bad "$2: make check did not run"; }
  fi
}

echo "== make check (each kernel ISA this CPU has: CAIRN_ISA=avx512, avx2, ref)"
check _build "make check"

echo "== --disable-openmp build"
if (build _build-serial --disable-openmp); then
  ok "build with --disable-openmp"
  check _build-serial "make check --disable-openmp"
else
  bad "build with --disable-openmp"
fi

echo "== --without-mpi build (what the demo builds where Open MPI is not installed)"
# Its make check runs every test once more without MPI (fmnist.sh's
# "built without MPI" error included), the Criterion programs under the
# default kernels only (CAIRN_TEST_ISAS=default: the kernels are the same
# as the first build's, whose make check ran them under each ISA); then the
# demo's steps in short, on
# the Fashion-MNIST files with a small model: train until a checkpoint
# past step 0 exists, SIGKILL, the same command resumes and ends at step
# 300, eval, ckpt-inspect list.
if (build _build-nompi --without-mpi); then
  ok "build with --without-mpi"
  check _build-nompi "make check --without-mpi" CAIRN_TEST_ISAS=default
  fm=_build-nompi/tools/cairn-fmnist/cairn-fmnist d=_build-nompi/fmnist-short
  rm -rf "$d"
  short="train --checkpoint-dir $d --max-steps 300 --hidden 32 --save-checkpoint-steps 50 --log-every 100 --threads 1"
  $fm $short >_build-nompi/short.out 2>&1 &
  kill_at_first_checkpoint $! "$d" 600
  s=$(newest_step "$d")
  if [ -n "$s" ] && [ "$s" -gt 0 ]; then
    ok "--without-mpi: cairn-fmnist train, SIGKILLed with a checkpoint at step $s"
  else
    tail -5 _build-nompi/short.out; bad "--without-mpi: cairn-fmnist train writes a checkpoint before SIGKILL"
  fi
  if $fm $short >_build-nompi/short.out 2>&1 && grep -q '^resumed from .* at step [1-9]' _build-nompi/short.out &&
     grep -q '^done at step 300:' _build-nompi/short.out; then
    ok "--without-mpi: the same command resumes and ends at step 300"
  else
    tail -5 _build-nompi/short.out; bad "--without-mpi: the same command resumes and ends at step 300"
  fi
  if $fm eval --checkpoint-dir "$d" --threads 1 >_build-nompi/short.out 2>&1 && grep -q 'test_accuracy=0\.' _build-nompi/short.out; then
    ok "--without-mpi: cairn-fmnist eval: $(grep -o 'test_accuracy=[0-9.]*' _build-nompi/short.out)"
  else
    tail -5 _build-nompi/short.out; bad "--without-mpi: cairn-fmnist eval prints test_accuracy="
  fi
  if _build-nompi/tools/ckpt-inspect/ckpt-inspect list "$d" >_build-nompi/short.out 2>&1 && grep -q 'dense/kernel' _build-nompi/short.out; then
    ok "--without-mpi: ckpt-inspect list"
  else
    tail -5 _build-nompi/short.out; bad "--without-mpi: ckpt-inspect list names dense/kernel"
  fi
else
  bad "build with --without-mpi"
fi

# The GEMM alternatives users may configure: built, and the tests of what
# they change (dense layers, the model's step, optimizers) run on them.
# The default build has oneDNN when libdnnl-dev is installed (as here); the
# --without-dnnl build is what a machine without it gets.
for alt in "blis --with-blas=blis" "nodnnl --without-dnnl"; do
  name=${alt%% *} flag=${alt#* }
  echo "== $flag build"
  if (build "_build-$name" "$flag"); then
    ok "build with $flag"
    check "_build-$name" "make check $flag" CAIRN_TEST_ISAS=default TESTS="tests/test_nn tests/test_model tests/test_optim"
  else
    bad "build with $flag"
  fi
done

echo "== make install + pkg-config"
prefix=$(mktemp -d "${TMPDIR:-/tmp}/cairn-prefix.XXXXXX")
if (cd _build && make install prefix="$prefix" >install.out 2>&1); then
  cat >"$prefix/prog.c" <<'PROG'
#include <cairn.h>
#include <stdio.h>
int main(void) {
  cairn_registry *r; cairn_var *v; char info[512];
  if (cairn_registry_new(1, &r) || cairn_registry_global_step(r, &v)) { puts(cairn_errmsg()); return 1; }
  printf("%s\n%s\n", cairn_runtime_info(info, sizeof info), cairn_var_name(v));
  /* The installed cairn/build.h and the library agree on MPI. */
  printf("mpi %d %d\n", CAIRN_WITH_MPI, cairn_mpi_available());
  cairn_registry_free(r);
  return 0;
}
PROG
  # cairn.pc names the configured prefix; --define-variable relocates it.
  pc="pkg-config --define-variable=prefix=$prefix"
  export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
  if cc -std=c11 "$prefix/prog.c" -o "$prefix/prog" $($pc --cflags --libs cairn) &&
     LD_LIBRARY_PATH="$prefix/lib" "$prefix/prog" >"$prefix/prog.out" && grep -q global_step "$prefix/prog.out" &&
     grep -qx 'mpi 0 0\|mpi 1 1' "$prefix/prog.out"; then
    ok "pkg-config program links and runs against the installed library"
  else
    bad "pkg-config program links and runs against the installed library"
  fi
  # libcairn.a plus what `pkg-config --static` lists (Libs.private,
  # Requires.private): proves those lists are complete. The system
  # libraries stay shared (Debian ships no static Open MPI).
  if cc -std=c11 "$prefix/prog.c" -o "$prefix/prog-static" $($pc --cflags cairn) "$prefix/lib/libcairn.a" \
       $($pc --static --libs cairn | sed 's/ -lcairn / /; s/^-lcairn //') &&
     "$prefix/prog-static" | grep -q global_step; then
    ok "static libcairn.a links with pkg-config --static"
  else
    bad "static libcairn.a links with pkg-config --static"
  fi
else
  tail -20 _build/install.out
  bad "make install"
fi
rm -rf "$prefix"

echo "== make distcheck"
if (cd _build && make -j"$jobs" distcheck >distcheck.out 2>&1); then
  ok "make distcheck"
else
  tail -40 _build/distcheck.out
  bad "make distcheck"
fi

echo "== libFuzzer: checkpoint reader under ASan+UBSan"
# A separate clang build (static, serial so runs are deterministic) of
# tests/fuzz/fuzz_ckpt, fuzz_interop and fuzz_codec, each run for a bounded time on a copy
# of its seed corpus.
fuzz_secs=${CAIRN_FUZZ_SECONDS:-60}
mkdir -p _build-fuzz
# fuzz_run NAME CORPUS SECONDS: tests/fuzz/NAME on a copy of CORPUS, in $fuzz_dir
fuzz_run() {
  rm -rf "$fuzz_dir/corpus" && mkdir "$fuzz_dir/corpus" && cp "$2"/* "$fuzz_dir/corpus/" 2>/dev/null
  if CAIRN_FUZZ_TMPDIR=$fuzz_dir _build-fuzz/tests/fuzz/$1 -max_total_time="$3" -rss_limit_mb=2048 -timeout=20 \
       -print_final_stats=1 -artifact_prefix="$fuzz_dir/" "$fuzz_dir/corpus" >_build-fuzz/$1.out 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' _build-fuzz/$1.out)
    ok "$1: $3 s, ${runs:-?} inputs, nothing found"
  else
    grep -v '^#[0-9]\|^0x\|^Base64\|^\\' _build-fuzz/$1.out | tail -60
    for f in "$fuzz_dir"/crash-* "$fuzz_dir"/leak-* "$fuzz_dir"/timeout-* "$fuzz_dir"/oom-*; do
      [ -f "$f" ] || continue
      echo "input $(basename "$f") ($(wc -c <"$f") bytes), hex:"
      od -An -tx1 -v "$f"
      rm -f "$f"
    done
    bad "$1 found a failing input"
  fi
}
if (cd _build-fuzz && export CC=clang && configure_as --enable-fuzzing --disable-openmp --disable-shared &&
    make -j"$jobs" tests/fuzz/fuzz_ckpt tests/fuzz/fuzz_interop tests/fuzz/fuzz_codec >make.out 2>&1); then
  fuzz_dir=$(mktemp -d "${TMPDIR:-/tmp}/cairn-fuzz.XXXXXX")
  fuzz_run fuzz_ckpt tests/fuzz/corpus "$fuzz_secs"
  # The TensorFlow bundle and safetensors readers: a third of the time more.
  fuzz_run fuzz_interop tests/fuzz/corpus-interop $((fuzz_secs / 3 + 1))
  # The chunk decoders (codecs 1-3: LZ4, byte planes, zstd) on bytes no CRC
  # guards, which fuzz_ckpt's mutations rarely get past: a third more.
  fuzz_run fuzz_codec tests/fuzz/corpus-codec $((fuzz_secs / 3 + 1))
  rm -rf "$fuzz_dir"
else
  tail -40 _build-fuzz/make.out 2>/dev/null
  bad "build of tests/fuzz/fuzz_ckpt (CC=clang --enable-fuzzing)"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
