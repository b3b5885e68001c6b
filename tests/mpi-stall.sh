#!/bin/sh
# tests/mpi-stall.sh — a stalled MPI rank (SIGSTOP) ends the job in bounded
# time with an error naming that rank, run by `make check` in MPI builds
# (TAP), with a 2 s deadline per collective (CAIRN_MPI_TIMEOUT=2):
#   - cairn-fmnist train --distributed on 2 ranks (tests/fmnist.sh's
#     synthetic data set), rank 1 stopped mid-training: rank 0's collective
#     times out, a heartbeat gets no answer, the error says "rank 1 stopped
#     answering", rank 0 aborts the job; the same with rank 0 stopped (rank
#     1 names rank 0);
#   - a rank stopped after its last collective (tests/mpi/mpi_train train
#     --stop-at-exit): the other one does not wait for it in MPI_Finalize
#     forever, it says which rank and the job ends;
#   - CAIRN_MPI_TIMEOUT=0 turns the deadline off (it used to time out every
#     collective at once).
# `timeout` is only the safety net: a hang shows as exit 124.
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/fmnist-data.sh"
FMNIST="$top_builddir/tools/cairn-fmnist/cairn-fmnist"
case $FMNIST in /*) ;; *) FMNIST="$(pwd)/$FMNIST" ;; esac
TRAIN="$top_builddir/tests/mpi/mpi_train"
case $TRAIN in /*) ;; *) TRAIN="$(pwd)/$TRAIN" ;; esac

if ! command -v mpirun >/dev/null 2>&1; then
  echo "1..0 # SKIP mpirun not found (Debian: apt-get install openmpi-bin)"
  exit 0
fi
tap_tmpdir mpi-stall-test
# kill_rank FILE: SIGKILL the rank whose pid FILE holds, if that pid is
# still a cairn-fmnist (not a recycled pid): a rank left stopped by a
# failed case must not outlive the test.
kill_rank() {
  [ -f "$1" ] || return 0
  p=$(cat "$1")
  grep -q cairn-fmnist "/proc/$p/cmdline" 2>/dev/null && kill -9 "$p" 2>/dev/null
  return 0
}
cleanup() {
  for f in "$T"/pid-*; do kill_rank "$f"; done
  rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# Open MPI refuses root without these; one thread per rank.
OMPI_ALLOW_RUN_AS_ROOT=1
OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
OMP_NUM_THREADS=1
OPENBLAS_NUM_THREADS=1
CAIRN_MPI_TIMEOUT=2
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM OMP_NUM_THREADS OPENBLAS_NUM_THREADS CAIRN_MPI_TIMEOUT

echo "1..7"
TAP_OMIT='INFO'

# The synthetic data set of tests/fmnist.sh.
S="$T/data"
fmnist_data "$S"

# Every rank runs this wrapper: its pid (exec keeps it) in $T/pid-RANK, its
# own directory DIR-RANK (rank 0's is the only one written).
cat >"$T/rank" <<EOF
#!/bin/sh
r=\${OMPI_COMM_WORLD_RANK:-\${PMI_RANK:-0}}
echo \$\$ >"$T/pid-\$r"
exec "$FMNIST" train --distributed --checkpoint-dir "$T/ck-\$r" --data-dir "$S" --hidden 16,8 --batch-size 8 \\
  --log-every 0 --threads 1 --max-steps 100000000 --save-checkpoint-steps 100000000
EOF
chmod +x "$T/rank"

# stalled VICTIM: 2 ranks train; once rank 0 has saved its step-0
# checkpoint and trained half a second, VICTIM gets SIGSTOP. Sets $rc, $secs.
stalled() {
  rm -rf "$T"/ck-* "$T"/pid-*
  timeout 120 mpirun -np 2 --oversubscribe "$T/rank" >"$T/out" 2>"$T/err" &
  job=$!
  i=0
  while [ "$i" -lt 2000 ] && ! [ -f "$T/ck-0/checkpoint" -a -f "$T/pid-$1" ] && kill -0 "$job" 2>/dev/null; do
    nap 0.01
    i=$((i + 1))
  done
  nap 0.5
  kill -STOP "$(cat "$T/pid-$1")"
  t0=$(now)
  wait "$job"
  rc=$?
  secs=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
  kill_rank "$T/pid-$1"
}

# 1-2: rank 1 stopped
stalled 1
echo "# rank 1 stopped: the job ended with status $rc, $secs s after the SIGSTOP"
check "rank 1 stopped (SIGSTOP) mid-training: rank 0 says 'rank 1 stopped answering'" \
  err_has "deadline exceeded: .*no completion after 2\.[0-9] s (timeout 2\.0 s) on rank 0 of 2: rank 1 stopped answering (no reply to a heartbeat within 2\.0 s"
check "... and the job ends within 30 s (took $secs s, status $rc)" \
  sh -c "test $rc -ne 0 -a $rc -ne 124 && awk 'BEGIN{exit !($secs < 30)}'"

# 3-4: rank 0 (the chief) stopped
stalled 0
echo "# rank 0 stopped: the job ended with status $rc, $secs s after the SIGSTOP"
check "rank 0 stopped mid-training: rank 1 says 'rank 0 stopped answering'" \
  err_has "on rank 1 of 2: rank 0 stopped answering"
check "... and the job ends within 30 s (took $secs s, status $rc)" \
  sh -c "test $rc -ne 0 -a $rc -ne 124 && awk 'BEGIN{exit !($secs < 30)}'"

# 5-6: rank 1 stopped after its last collective: rank 0 is in
# cairn_mpi_free, whose MPI_Finalize would wait for it forever.
rm -f "$T"/pid-*
t0=$(now)
(cd "$T" && timeout 120 mpirun -np 2 --oversubscribe "$TRAIN" train "$T/x-%d" 6 --stop-at-exit) >"$T/out" 2>"$T/err"
rc=$?
secs=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
echo "# rank 1 stopped before MPI_Finalize: the job ended with status $rc after $secs s"
check "a rank stopped after the last collective: the other names it and skips MPI_Finalize" \
  err_has "barrier before MPI_Finalize: no completion after .* on rank 0 of 2: rank 1 stopped answering.*MPI_Finalize skipped"
check "... and the job ends within 30 s (took $secs s, status $rc)" \
  sh -c "test $rc -ne 124 && grep -q 'rank 1: SIGSTOP before cairn_mpi_free' '$T/out' && awk 'BEGIN{exit !($secs < 30)}'"

# 7: CAIRN_MPI_TIMEOUT=0: no deadline, the collectives just complete
(cd "$T" && CAIRN_MPI_TIMEOUT=0 timeout 120 mpirun -np 2 --oversubscribe "$TRAIN" equiv 5 16) >"$T/out" 2>"$T/err"
rc=$?
check "CAIRN_MPI_TIMEOUT=0 turns the deadline off (2 ranks train 5 steps)" test "$rc" -eq 0
exit 0
