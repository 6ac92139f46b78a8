#!/usr/bin/env bash
# Failures never hang: a rank that throws, exits, hangs or is SIGKILLed ends the
# whole job within a bounded time; NaN stops (or is skipped); signals from
# outside stop cleanly; a shard truncated under the job gives one clear line.
# (A full disk: test_full_disk.sh.) Signals and truncation wait for a progress
# line first, so they land mid-training however slow the machine is.
source "$(dirname "$0")/lib.sh"
PROGRESS_LIMIT=${PROGRESS_LIMIT:-$RUN_TIMEOUT}   # seconds to the first progress line (about 1 s here; a backstop)
# Backstop for a job's end after a rank died (about 1 s here); only a real hang reaches it.
END_LIMIT=${END_LIMIT:-120}

make_blobs_shards "$WORK/train" 4000 1 2
base=(train --data.train "$WORK/train" --train.batch_size 16)

elapsed_since() { echo $(( $(date +%s%N) / 1000000 - $1 )); }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# Each failing run has a run.dir of its own: a fresh start refuses one that holds a run.
expect_error throw 2 "rank 1: debug.fail_mode = throw at step 5" "${base[@]}" --train.epochs 2 --run.dir "$WORK/r-throw" \
  --debug.fail_rank 1 --debug.fail_step 5 --debug.fail_mode throw
t0=$(now_ms); rc=0
OMPI_MCA_orte_tmpdir_base=$(own_session_base) \
  timeout "$RUN_TIMEOUT" "$MPIEXEC" -n 2 "$MPIDDP" "${base[@]}" --train.epochs 2 --run.dir "$WORK/r-exit" --debug.fail_rank 1 --debug.fail_step 5 \
  --debug.fail_mode exit > "$WORK/exit.log" 2>&1 || rc=$?
[ "$rc" != 0 ] && [ "$rc" != 124 ] && pass "exit: job ended with $rc in $(elapsed_since "$t0") ms" || fail "exit: rc $rc"
t0=$(now_ms)
expect_error hang 2 "at step 7 did not complete within dist.timeout_s = 15 s" "${base[@]}" --train.epochs 2 --run.dir "$WORK/r-hang" \
  --debug.fail_rank 1 --debug.fail_step 7 --debug.fail_mode hang --dist.timeout_s 15
# The job ended by itself (expect_error checked the watchdog's line); the time is
# reported, not bounded: a busy machine may take longer to get there.
echo "note: hang detected after $(elapsed_since "$t0") ms (timeout 15 s)"
# Hung but alive: the peer probe (a wait of 5 s asks every rank whether its process
# still answers) must not call it lost, so the timeout's line is the one printed.
expect_error hang-probed 2 "at step 7 did not complete within dist.timeout_s = 20 s (another rank died" "${base[@]}" \
  --train.epochs 2 --run.dir "$WORK/r-hang-probed" --debug.fail_rank 1 --debug.fail_step 7 --debug.fail_mode hang \
  --dist.timeout_s 20
[ "$EXPECT_RC" = 1 ] && ! grep -q "lost rank" "$WORK/hang-probed.out" && pass "a hung live rank is not called lost (exit 1)" \
  || fail "hung live rank: exit $EXPECT_RC, $(grep 'mpiddp: error' "$WORK/hang-probed.out")"
expect_error nan 2 "rank 0: global step 10: non-finite loss or gradient (NaN/Inf); set train.nonfinite = skip" "${base[@]}" --train.epochs 2 \
  --run.dir "$WORK/r-nan" --debug.fail_rank 1 --debug.fail_step 9 --debug.fail_mode nan
run_ranks 2 "${base[@]}" --train.epochs 2 --run.dir "$WORK/skip" --debug.fail_rank 1 --debug.fail_step 9 --debug.fail_mode nan \
  --train.nonfinite skip > "$WORK/skip.log" 2>&1 && [ "$(json_field "$WORK/skip/summary.json" skipped_steps)" = 1 ] \
  && pass "nonfinite = skip drops one step and finishes" || fail "nonfinite skip"

# SIGKILL of one rank mid-training: measured time from the kill to the job's end.
OMPI_MCA_orte_tmpdir_base=$(own_session_base) \
  "$MPIEXEC" -n 2 "$MPIDDP" "${base[@]}" --train.epochs 1000 --run.dir "$WORK/kill" > "$WORK/kill.log" 2>&1 &
job=$!
if wait_for_line "$job" "$WORK/kill.log" "samples/s" "$PROGRESS_LIMIT" && victim=$(rank_pid "$job" 1) && [ -n "$victim" ]; then
  t0=$(now_ms); kill -9 "$victim"
  if end_job "$job" "$END_LIMIT"; then
    [ "$JOB_RC" = 137 ] && [ "$MPIRUN_HANGS" -gt 0 ] && echo "note: every rank ended, but mpirun itself hung (Open MPI 4.1.4)"
    [ "$JOB_RC" != 0 ] && pass "SIGKILL of rank 1: job exited $JOB_RC after $(elapsed_since "$t0") ms" || fail "SIGKILL: rc 0"
  else fail "a rank still runs $END_LIMIT s after SIGKILL of rank 1"; fi
else fail "SIGKILL: no rank 1 to kill in a running job"; kill_job "$job"; fi

# A rank's error while the launcher is slow to end the job (mpirun frozen, as a
# loaded launcher of a large job may be for seconds): rank 2 prints its line, tells
# the others (debug.fail_mode = erred_exit) and its process ends without MPI_Abort.
# Ranks 0 and 1, still waiting in a collective, must name its error, not a lost
# node: no "lost rank" line and no exit 76, which a job script would requeue as a
# node loss. The ranks are frozen while mpirun is, so the error comes after;
# should rank 2 have reached it before (a busy machine), the case runs again with
# its step further away.
erred_case() {  # FAIL_STEP ATTEMPT: returns 3 when rank 2 failed before mpirun was frozen
  local dir=$WORK/erred$2 job ranks alive=0 r
  # 84 000 steps; few lines while mpirun is frozen (its pipes must not fill): no checkpoints, a line an epoch.
  OMPI_MCA_orte_tmpdir_base=$(own_session_base) \
    "$MPIEXEC" -n 3 "$MPIDDP" "${base[@]}" --train.epochs 1000 --train.log_every 100000 --checkpoint.every_epochs 0 \
    --run.dir "$dir" \
    --debug.fail_rank 2 --debug.fail_step "$1" --debug.fail_mode erred_exit > "$dir.log" 2>&1 &
  job=$!
  wait_for_line "$job" "$dir.log" "^model:" "$PROGRESS_LIMIT" || { kill_job "$job"; return 1; }
  ranks=$(pgrep -P "$job" || true)
  [ -z "$ranks" ] || kill -STOP $ranks 2>/dev/null || true
  live() { local state; state=$(ps -o stat= -p "$1" 2>/dev/null) && [[ $state != Z* ]]; }  # a zombie has ended
  for r in $ranks; do live "$r" && alive=$((alive + 1)); done
  if [ "$alive" != 3 ]; then kill -CONT $ranks 2>/dev/null; kill_job "$job"; return 3; fi
  local failing; failing=$(rank_pid "$job" 2)
  kill -STOP "$job"
  kill -CONT $ranks
  any_alive() { for r in $ranks; do live "$r" && return 0; done; return 1; }
  # Rank 2 first trains to its step (thousands of steps on a slow machine: bounded
  # like any run), then END_LIMIT bounds only the others' ending after its error.
  wait_until "$RUN_TIMEOUT" eval "! live '$failing'" || fail "erred_exit: rank 2 still runs after $RUN_TIMEOUT s"
  wait_until "$END_LIMIT" eval '! any_alive' || fail "erred_exit: a rank still runs $END_LIMIT s after rank 2's error"
  kill -CONT "$job"
  end_job "$job" "$END_LIMIT" || true
  # (waiting in the collective, or its send to rank 2 failed: "... failed: ...")
  local erred="ended after an error of their own (their line above): .*; ending the job"
  if grep -q "rank 2: debug.fail_mode = erred_exit at step $1" "$dir.log" \
    && [ "$(grep -c "^mpiddp: error: rank [01]: rank(s) \([0-9,]*\)2 on host .* $erred" "$dir.log")" = 2 ] \
    && ! grep -q "lost rank" "$dir.log" && [ "$JOB_RC" != 0 ] && [ "$JOB_RC" != 76 ]; then
    pass "erred_exit with mpirun frozen: ranks 0 and 1 named rank 2's own error, nobody called lost, exit $JOB_RC"
  else fail "erred_exit with mpirun frozen: exit $JOB_RC"; grep "^mpiddp" "$dir.log" >&2; fi
}
step=2000
for attempt in 1 2 3; do
  rc=0; erred_case "$step" "$attempt" || rc=$?
  [ "$rc" = 3 ] || break
  echo "note: rank 2 reached step $step before mpirun was frozen; again with step $((step * 4))"
  step=$((step * 4))
done
[ "$rc" != 3 ] || fail "erred_exit: rank 2 always reached its error before mpirun was frozen"
[ "$rc" != 1 ] || fail "erred_exit: no banner within $PROGRESS_LIMIT s"

# SIGTERM / SIGUSR1 from outside, to one rank: agreed stop, checkpoint, exit 75, resume finishes.
# The ranks are frozen while the signal is sent, so it lands mid-training however fast
# the machine (300 epochs, 37 500 steps, so the job is still running when the first
# progress line is seen). The resume runs 250 steps past the stop, not the rest: each
# step waits on two collectives, and on a busy machine 37 000 of them took minutes.
for sig in TERM USR1; do
  dir=$WORK/sig$sig
  OMPI_MCA_orte_tmpdir_base=$(own_session_base) \
    "$MPIEXEC" -n 2 "$MPIDDP" "${base[@]}" --train.epochs 300 --run.dir "$dir" > "$dir.log" 2>&1 &
  job=$!
  if ! wait_for_line "$job" "$dir.log" "samples/s" "$PROGRESS_LIMIT" || ! victim=$(rank_pid "$job" 1) || [ -z "$victim" ]; then
    fail "SIG$sig: no rank 1 to signal in a running job"; kill_job "$job"; continue
  fi
  ranks=$(pgrep -P "$job" || true)
  if [ -z "$ranks" ]; then fail "SIG$sig: the job ended before the signal"; kill_job "$job"; continue; fi
  kill -STOP $ranks 2>/dev/null || fail "SIG$sig: a rank ended before it was frozen"
  kill -$sig "$victim" 2>/dev/null || fail "SIG$sig: rank 1 gone before its signal"
  kill -CONT $ranks 2>/dev/null || true
  end_job "$job" "$RUN_TIMEOUT" || true
  if [ "$JOB_RC" = 75 ] && grep -q "stop requested by a signal" "$dir.log" && [ -f "$dir/checkpoints/latest" ]; then
    pass "SIG$sig to rank 1: checkpoint at $(cat "$dir/checkpoints/latest"), exit 75"
  else
    # The whole log (a rank's own last words come before the launcher's), and what the run left behind.
    fail "SIG$sig: rc $JOB_RC"; grep -v "^epoch " "$dir.log" | tail -25; ls -l "$dir" "$dir/checkpoints" 2>&1 | tail -12
  fi
  stopped=$(sed -n 's/^ckpt-step-0*\([0-9][0-9]*\)\.h5$/\1/p' "$dir/checkpoints/latest" 2>/dev/null || true)
  run_ranks 2 "${base[@]}" --train.epochs 300 --train.max_steps $((${stopped:-0} + 250)) --run.dir "$dir" \
    --resume auto > "$dir.resume.log" 2>&1 && [ "$(json_field "$dir/summary.json" status)" = completed ] \
    && [ "$(json_field "$dir/summary.json" steps)" = $((${stopped:-0} + 250)) ] \
    && pass "SIG$sig: resumed from step $stopped to its end (step $((stopped + 250)))" || fail "SIG$sig resume"
done

# A shard truncated under a running job: one clear line, no crash (SIGBUS) and no hang.
cp -r "$WORK/train" "$WORK/shrink"
OMPI_MCA_orte_tmpdir_base=$(own_session_base) \
  "$MPIEXEC" -n 2 "$MPIDDP" train --data.train "$WORK/shrink" --train.epochs 1000 --run.dir "$WORK/t" > "$WORK/shrink.log" 2>&1 &
job=$!
if wait_for_line "$job" "$WORK/shrink.log" "samples/s" "$PROGRESS_LIMIT"; then
  truncate -s 10000 "$WORK/shrink/shard-00001-of-00002.h5"
  end_job "$job" "$RUN_TIMEOUT" || true
  if [ "$JOB_RC" = 2 ] && [ "$(grep -c '^mpiddp: error' "$WORK/shrink.log")" = 1 ] && \
     grep -q "shard-00001-of-00002.h5: shard was truncated or replaced while training" "$WORK/shrink.log"; then
    pass "truncated shard: $(grep '^mpiddp: error' "$WORK/shrink.log")"
  else fail "truncated shard: rc $JOB_RC"; tail -5 "$WORK/shrink.log"; fi
else kill_job "$job"; fi
# A shard deleted under a running job: the open file still serves the job to its end.
# The ranks are stopped while it is deleted, so it surely happens mid-run.
cp -r "$WORK/train" "$WORK/gone"
OMPI_MCA_orte_tmpdir_base=$(own_session_base) \
  "$MPIEXEC" -n 2 "$MPIDDP" train --data.train "$WORK/gone" --train.epochs 200 --train.log_every 10 --run.dir "$WORK/g" \
  > "$WORK/gone.log" 2>&1 &
job=$!
if wait_for_line "$job" "$WORK/gone.log" "samples/s" "$PROGRESS_LIMIT"; then
  ranks=$(pgrep -P "$job" || true)
  [ -n "$ranks" ] && kill -STOP $ranks 2>/dev/null || fail "deleted shard: the job ended before the shard was deleted"
  rm "$WORK/gone/shard-00000-of-00002.h5"
  [ -z "$ranks" ] || kill -CONT $ranks 2>/dev/null || true
  end_job "$job" "$RUN_TIMEOUT" || true
  [ "$JOB_RC" = 0 ] && pass "deleted shard: the job keeps reading its open file and finishes" || fail "deleted shard: rc $JOB_RC"
else kill_job "$job"; fi
finish
