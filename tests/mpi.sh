#!/bin/sh
# tests/mpi.sh — data-parallel training over MPI (cairn/mpi.h), run by
# `make check` in MPI builds (TAP). Runs tests/mpi/mpi_train under
# `mpirun -np 2 --oversubscribe` (as root too: OMPI_ALLOW_RUN_AS_ROOT*):
#   - the broadcast makes differently initialized ranks agree;
#   - 2 ranks × batch B/2 give the variables of 1 rank × batch B after 20
#     SGD steps within 1e-5 relative (|a-b| <= 1e-5·max(|b|, 1e-2)). Not
#     bitwise: each rank's loss gradient is a mean over its B/2 rows, and
#     (g0 + g1)·0.5 sums the B products in another order than one mean over
#     B rows does, so f32 rounding differs by a few ulps per step;
#   - Horovod's MonitoredTrainingSession recipe: only rank 0 writes files
#     (checkpoints in its directory; rank 1's directory is never created,
#     the working directory stays empty), ranks agree after the broadcast
#     and at the end;
#   - a worker that SIGKILLs itself mid-training ends the job with an error
#     in bounded time (measured; `timeout` is only the safety net);
#   - a TF-style worker (is_chief = 0) with the broadcast hook is refused
#     at once, naming the recipe's rule (every rank is a chief);
#   - a worker that stalls makes rank 0's allreduce time out
#     (CAIRN_MPI_TIMEOUT=2) with a message naming the operation and the
#     wait, and the job ends;
#   - restarting the killed job resumes from the chief's latest checkpoint
#     and ends bit-identical to the uninterrupted run;
#   - `cairn-fmnist train --distributed` on tests/fmnist.sh's synthetic data
#     set (each rank given its own --checkpoint-dir D-RANK through a wrapper,
#     to see who writes): 2 ranks x 4 rows of each global batch of 8 end, after
#     60 steps, with rank 0's checkpoint equal to a 1-rank run's at batch 8
#     (ckpt-inspect diff --rtol 1e-5 --atol 1e-7: |a-b| <= 1e-7 + 1e-5·|b|,
#     the tolerance above in ckpt-inspect's numpy.isclose form); rank 1 writes
#     nothing; a 2-rank job stopped at step 30 (mid-epoch) and started again
#     resumes from rank 0's checkpoint and data position and ends equal too.
: "${top_builddir:=.}"
: "${top_srcdir:=.}"
. "$top_srcdir/tests/tap.sh"
. "$top_srcdir/tests/fmnist-data.sh"
PROG="$top_builddir/tests/mpi/mpi_train"
case $PROG in /*) ;; *) PROG="$(pwd)/$PROG" ;; esac
FMNIST="$top_builddir/tools/cairn-fmnist/cairn-fmnist"
case $FMNIST in /*) ;; *) FMNIST="$(pwd)/$FMNIST" ;; esac
TOOL="$top_builddir/tools/ckpt-inspect/ckpt-inspect"
case $TOOL in /*) ;; *) TOOL="$(pwd)/$TOOL" ;; esac

if ! command -v mpirun >/dev/null 2>&1; then
  echo "1..0 # SKIP mpirun not found (Debian: apt-get install openmpi-bin)"
  exit 0
fi
tap_tmpdir mpi-test
mkdir "$T/cwd"

# Open MPI refuses root without these; CI runs as root on 2 cores. One
# thread per rank: 2 ranks on 2 cores.
OMPI_ALLOW_RUN_AS_ROOT=1
OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
OMP_NUM_THREADS=1
OPENBLAS_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM OMP_NUM_THREADS OPENBLAS_NUM_THREADS
unset CAIRN_MPI_TIMEOUT

echo "1..27"
TAP_LINES=25
TAP_OMIT='INFO'
# mpi NP ARGS...: runs in $T/cwd; stdout $T/out, stderr $T/err, $rc, $secs
mpi() {
  np=$1
  shift
  t0=$(now)
  (cd "$T/cwd" && timeout 300 mpirun -np "$np" --oversubscribe "$PROG" "$@") >"$T/out" 2>"$T/err"
  rc=$?
  secs=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }')
}
final_hash() { sed -n 's/^rank 0: done at step [0-9]* hash \([0-9a-f]*\).*/\1/p' "$T/out"; }

# 1-3: broadcast and equivalence with one rank
mpi 2 equiv 20 64
check "equiv: runs (2 ranks)" test "$rc" -eq 0
check "broadcast: ranks initialized differently agree after it" out_has "ranks differ before, agree after"
check "2 ranks x B/2 = 1 rank x B after 20 steps (1e-5 relative)" \
  sh -c "test $rc -eq 0 && grep -q 'tolerance 1e-5' '$T/out'"
grep '^2-rank' "$T/out" | sed 's/^/# /'

hash_fused=$(sed -n 's/^after 20 steps: ranks agree, hash \([0-9a-f]*\).*/\1/p' "$T/out")

# 4-5: small fusion buffer (1000 bytes): many buckets, tensors split across
# them; with 2 ranks each sum is a0 + a1 either way, so bitwise the same.
CAIRN_MPI_FUSION_BYTES=1000 mpi 2 equiv 20 64
check "equiv with a 1000-byte fusion buffer" test "$rc" -eq 0
check "... bit-identical to one bucket per step" \
  test -n "$hash_fused" -a "$(sed -n 's/^after 20 steps: ranks agree, hash \([0-9a-f]*\).*/\1/p' "$T/out")" = "$hash_fused"
grep '^after' "$T/out" | sed 's/^/# /'

# 6: shard and learning-rate helpers
mpi 1 helpers
check "cairn_mpi_shard covers every item once; cairn_mpi_scaled_lr warms up to lr x size" \
  sh -c "test $rc -eq 0 && grep -q 'helpers: 0 failures' '$T/out'"

# 7-8: in-place and fused allreduces together, more than are kept in flight, exact
mpi 2 allreduce
check "allreduce_mean: 40 tensors in place and fused, every element exact on both ranks" \
  sh -c "test $rc -eq 0 && test \$(grep -c ': 0 wrong' '$T/out') -eq 2"
CAIRN_MPI_FUSION_BYTES=64 mpi 2 allreduce
check "... with a 64-byte fusion buffer (many buckets between in-place ones)" \
  sh -c "test $rc -eq 0 && test \$(grep -c ': 0 wrong' '$T/out') -eq 2"
grep 'allreduces' "$T/out" | sed 's/^/# /'

# 9: one rank is a valid job too
mpi 1 equiv 5 16
check "equiv with 1 rank (allreduce of one)" test "$rc" -eq 0

# 10-13: uninterrupted run, only rank 0 writes
mpi 2 train "$T/a-%d" 12
check "train 12 steps on 2 ranks" test "$rc" -eq 0
check "ranks agree after the broadcast and at the end" \
  sh -c "test \$(grep -c 'ranks agree' '$T/out') -eq 4"
check "rank 0 wrote its checkpoints (latest: step 12)" test "$(state_step "$T/a-0")" = 12
check "rank 1 wrote nothing (no directory, empty working directory)" \
  sh -c "test ! -e '$T/a-1' && test -z \"\$(ls -A '$T/cwd')\""
hash_a=$(final_hash)
grep '^allreduce' "$T/out" | sed 's/^/# /'

# 14-16: a killed worker ends the job in bounded time
mpi 2 train "$T/b-%d" 12 --kill-at 6
echo "# killed worker: job ended with status $rc after $secs s"
check "a killed worker makes the job fail" test "$rc" -ne 0 -a "$rc" -ne 124
check "... within 30 s (took $secs s)" lt "$secs" 30
# Rank 1 dies before step 6; rank 0 may be killed before or after it
# saves step 6 (its save follows the step 5 allreduce both took part in).
ck=$(state_step "$T/b-0")
check "rank 0 checkpointed up to the kill (step $ck)" test "$ck" = 5 -o "$ck" = 6

# 17-19: restart resumes from the chief's latest checkpoint, exactly
mpi 2 train "$T/b-%d" 12
check "restart runs to the end" test "$rc" -eq 0
check "both ranks start at the chief's latest checkpoint (step $ck)" \
  sh -c "test \$(grep -c 'start at step $ck, ranks agree' '$T/out') -eq 2"
check "resumed run ends bit-identical to the uninterrupted one" test -n "$hash_a" -a "$(final_hash)" = "$hash_a"

# 20-21: a stalled worker: rank 0 times out, names the operation, aborts
CAIRN_MPI_TIMEOUT=2
export CAIRN_MPI_TIMEOUT
mpi 2 train "$T/c-%d" 12 --stall-at 4
unset CAIRN_MPI_TIMEOUT
echo "# stalled worker: job ended with status $rc after $secs s"
check "a stalled worker: rank 0 fails with a deadline naming the allreduce" \
  err_has "deadline exceeded: .*allreduce of gradients.*no completion after 2"
check "... and the job ends within 30 s (took $secs s)" sh -c "test $rc -ne 0 -a $rc -ne 124 && awk 'BEGIN{exit !($secs < 30)}'"

# 22-23: a TF-style worker (is_chief = 0 on rank 1) with the broadcast hook: its
# MonitoredTrainingSession is refused at once, saying every rank is a chief,
# and the job ends; before, rank 1 waited in wait_for_session while rank 0
# waited in the broadcast, which reported "rank 1 stopped answering" after 60 s.
mpi 2 train "$T/w-%d" 4 --worker-role
echo "# worker role: job ended with status $rc after $secs s"
check "a worker (is_chief = 0) with the broadcast hook is refused: every rank is a chief" \
  err_has "is_chief = 0 with BroadcastGlobalVariablesHook: in the data-parallel recipe every rank is a chief"
check "... at once: the job ends within 30 s (took $secs s)" sh -c "test $rc -ne 0 -a $rc -ne 124 && awk 'BEGIN{exit !($secs < 30)}'"

# 24-27: cairn-fmnist train --distributed, on tests/fmnist.sh's synthetic
# data set: gzip IDX, 4x4 images, 320 training and 64 test examples.
S="$T/data"
fmnist_data "$S"
SMALL="--data-dir $S --hidden 16,8 --batch-size 8 --seed 7 --log-every 20 --threads 1 --save-checkpoint-steps 20"
# Every rank runs this wrapper, which gives it its own directory DIR-RANK.
cat >"$T/fmnist-rank" <<EOF
#!/bin/sh
d=\$1
shift
exec "$FMNIST" train --distributed --checkpoint-dir "\$d-\${OMPI_COMM_WORLD_RANK:-\${PMI_RANK:-0}}" "\$@"
EOF
chmod +x "$T/fmnist-rank"
PROG="$T/fmnist-rank"
same_as_ref() { "$TOOL" diff --rtol 1e-5 --atol 1e-7 "$T/f-ref/model.ckpt-60" "$1" >"$T/diff" 2>&1; }
(cd "$T/cwd" && "$FMNIST" train --checkpoint-dir "$T/f-ref" $SMALL --max-steps 60) >"$T/out" 2>"$T/err"
[ "$(state_step "$T/f-ref")" = 60 ] || echo "# the 1-rank cairn-fmnist reference run failed"
mpi 2 "$T/f" $SMALL --max-steps 60
check "cairn-fmnist train --distributed: 2 ranks x 4 rows of each batch of 8, 60 steps (took $secs s)" \
  sh -c "test $rc -eq 0 && test '$(state_step "$T/f-0")' = 60 && grep -q '^distributed over 2 ranks' '$T/out' &&
    grep -q '^allreduce of gradients: [0-9.]* ms per step, [0-9]* % of the [0-9.]* s, [0-9.]* MB per step' '$T/out'"
check "... only rank 0 wrote files (rank 1's directory never created, working directory empty)" \
  sh -c "test ! -e '$T/f-1' && test -z \"\$(ls -A '$T/cwd')\" && ls '$T/f-0' | grep -q '^events\\.out\\.tfevents\\.'"
check "... rank 0's step-60 checkpoint equals the 1-rank run's at batch 8 (1e-5 relative)" same_as_ref "$T/f-0/model.ckpt-60"
sed -n '$s/^/# with the tolerance: /p' "$T/diff"
"$TOOL" diff --atol 0 "$T/f-ref/model.ckpt-60" "$T/f-0/model.ckpt-60" 2>&1 | sed -n '$s/^/# bitwise: /p'
mpi 2 "$T/g" $SMALL --max-steps 30
r1=$rc
mpi 2 "$T/g" $SMALL --max-steps 60
resumed_ok() {
  test "$r1" -eq 0 -a "$rc" -eq 0 && test ! -e "$T/g-1" &&
    out_has "^resumed from $T/g-0/model.ckpt-30 at step 30 (epoch 0, example 240)\$" &&
    same_as_ref "$T/g-0/model.ckpt-60"
}
check "... stopped at step 30 and restarted: resumes from rank 0's checkpoint and data position, ends equal" resumed_ok
exit 0
