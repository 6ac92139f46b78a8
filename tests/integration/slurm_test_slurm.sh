#!/usr/bin/env bash
# On a real one-node Slurm (scripts/ci/slurm-up.sh): the job-script template with
# srun and with mpirun inside the allocation, a sweep as a job array with its
# summary table, a failing job, and a pre-empted job that requeues itself and
# resumes to a result byte-identical to an uninterrupted run. Every Slurm call is
# under a timeout, and every wait for a job is bounded generously and fails with
# a clear line. Skipped where Slurm, root or network namespaces are missing.
source "$(dirname "$0")/lib.sh"
# munged runs here, and srun's PMIx server picks the credentials: PMIx as it comes.
unset PMIX_MCA_psec
require_root "starts munged, slurmctld and slurmd"
require_commands slurmctld slurmd munged sbatch srun scancel ip
ip netns add "mpiddp-probe-$$" 2>"$WORK/netns.err" && ip netns delete "mpiddp-probe-$$" \
  || skip "cannot create a network namespace here: $(cat "$WORK/netns.err")"
ci=$MPIDDP_SOURCE_DIR/scripts/ci
JOB_LIMIT=${JOB_LIMIT:-180}   # seconds any one job may take to reach a point (a few here)
t0=$(date +%s.%N)
at_exit '"$ci/slurm-down.sh"'
"$ci/slurm-up.sh" || { fail "slurm-up"; finish; }
echo "slurm up in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }') s"
slurm() { timeout "${SLURM_TIMEOUT:-600}" "$ci/slurm-exec" "$@"; }
# wait_for_job_line FILE PATTERN: a batch job's output file gets a line with PATTERN.
wait_for_job_line() {
  wait_until "$JOB_LIMIT" log_has "$1" "$2" && return 0
  fail "no '$2' in $(basename "$1") within $JOB_LIMIT s"; tail -5 "$1" >&2 2>/dev/null || true; return 1
}
export MPIDDP MPIDDP_LAUNCH="srun --mpi=pmix --kill-on-bad-exit=1"
template=$MPIDDP_SOURCE_DIR/scripts/mpiddp.sbatch
cd "$WORK"

make_blobs_shards "$WORK/train" 2000 1 2
write_ini "$WORK/base.ini" data.train="$WORK/train" data.test="$WORK/train" model.hidden=32 \
  train.batch_size=16 train.epochs=3 train.seed=5 train.log_every=1 optim.name=adamw optim.lr=0.003

# 1. The template, 2 tasks under srun: exit code, summary, local ranks; time to the first step.
submitted=$(date +%s.%N)
slurm sbatch --parsable --ntasks=2 --output="$WORK/job1.out" "$template" "$WORK/base.ini" --run.dir "$WORK/run1" \
  > "$WORK/id1" || fail "sbatch of the template"
wait_for_job_line "$WORK/job1.out" "^epoch 1/3 step 1/" || true
first_step=$(awk -v a="$submitted" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
wait_until "$JOB_LIMIT" test -f "$WORK/run1/summary.json" || fail "no summary.json from the template job in $JOB_LIMIT s"
grep -q "rank 1: host .*, local rank 1 of 2" "$WORK/job1.out" && pass "srun: local ranks from MPI (rank 1 = local rank 1 of 2)" \
  || fail "srun local ranks"
[ "$(json_field "$WORK/run1/summary.json" status)" = completed ] && [ "$(json_field "$WORK/run1/summary.json" world_size)" = 2 ] \
  && pass "sbatch template: 2-task training completed; sbatch to first step $first_step s" || fail "template job"
rc=0; slurm sbatch --wait --ntasks=2 --output="$WORK/job1b.out" "$template" "$WORK/base.ini" --run.dir "$WORK/run1b" \
  --train.epochs 1 >/dev/null || rc=$?
[ "$rc" = 0 ] && pass "sbatch --wait returns the job's exit code 0" || fail "sbatch --wait rc $rc"

# 2. mpirun inside the allocation (every rank sees SLURM_PROCID=0): local ranks still right.
rc=0; MPIDDP_LAUNCH="mpirun --allow-run-as-root -n 2" slurm sbatch --wait --ntasks=2 --output="$WORK/job2.out" \
  "$template" "$WORK/base.ini" --run.dir "$WORK/run2" --train.epochs 1 >/dev/null || rc=$?
[ "$rc" = 0 ] && grep -q "rank 1: host .*, local rank 1 of 2" "$WORK/job2.out" \
  && pass "mpirun inside an allocation: local ranks from MPI" || fail "mpirun in allocation rc $rc"

# 3 + 4. A sweep: 3 good runs (a grid of 2 and a single) and one whose training fails.
cat > "$WORK/batch.txt" <<'TXT'
# name   overrides
grid lr optim.lr=0.01|0.003
wide     model.hidden=64 optim.lr=0.003
broken   data.train=/nonexistent/shards     # fails: no such shards
TXT
"$MPIDDP_SOURCE_DIR/scripts/sweep" "$WORK/base.ini" "$WORK/batch.txt" --out "$WORK/sweep" --dry-run > "$WORK/dry.txt" \
  || fail "sweep --dry-run: exit $?"
[ "$(tail -1 "$WORK/dry.txt")" = "4 run(s)" ] && pass "sweep --dry-run expands 4 runs" || fail "dry run: $(cat "$WORK/dry.txt")"
t_sweep=$(date +%s.%N)
rc=0; slurm "$MPIDDP_SOURCE_DIR/scripts/sweep" "$WORK/base.ini" "$WORK/batch.txt" --out "$WORK/sweep" --max-parallel 2 \
  -- --wait --ntasks=2 > "$WORK/sweep.log" 2>&1 || rc=$?
sweep_s=$(awk -v a="$t_sweep" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
[ "$rc" != 0 ] && pass "the array's exit code reports the failed run ($rc)" || fail "array exit code $rc"
"$MPIDDP_SOURCE_DIR/scripts/sweep-summary" "$WORK/sweep" > "$WORK/table.md" 2>/dev/null || fail "sweep-summary: exit $?"
cat "$WORK/table.md"
[ "$(grep -c '| completed |' "$WORK/table.md")" = 3 ] && pass "summary: 3 completed runs ranked" || fail "completed runs"
grep -q "| - | broken | failed (exit 2) |" "$WORK/table.md" && pass "summary: the broken run is failed (exit 2)" || fail "failed run"
runs_s=$(cat "$WORK"/sweep/*/summary.json | "$PYTHON" -c "import json,sys; print(sum(json.loads(l)['wall_s'] for l in sys.stdin))") \
  || runs_s=unknown
echo "sweep of 4 runs (2 at a time) took $sweep_s s; training itself $runs_s s"
"$MPIDDP_SOURCE_DIR/scripts/sweep-summary" "$WORK/sweep" --format csv > "$WORK/table.csv" 2>/dev/null || true
grep -q "^rank,name,status" "$WORK/table.csv" && [ "$(wc -l < "$WORK/table.csv")" = 5 ] && pass "csv output" || fail "csv output"

# A failing job on its own: non-zero exit code from sbatch --wait.
rc=0; slurm sbatch --wait --ntasks=2 --output="$WORK/bad.out" "$template" "$WORK/base.ini" --run.dir "$WORK/bad" \
  --data.train /nonexistent >/dev/null || rc=$?
[ "$rc" = 2 ] && grep -q "^mpiddp: error: rank 0: /nonexistent: no such shard" "$WORK/bad.out" \
  && pass "bad input: job exit code 2 with the error line in its log" || fail "bad job rc $rc"

# 5. Pre-emption: USR1 mid-training -> checkpoint, exit 75, scontrol requeue, resume, same bits.
# The signal must land mid-training (a USR1 before the handler is in place would kill
# the job, one after its end finds nothing): once epoch 2 has begun, the ranks are
# frozen, Slurm signals them, and they go on only once it waits at both of them, so
# however slow scancel's way through slurmctld and slurmstepd, the job cannot end first.
long=(--train.epochs 30 --model.hidden 512,512 --train.log_every 10)
slurm sbatch --parsable --ntasks=2 --output="$WORK/pre.out" "$template" "$WORK/base.ini" "${long[@]}" --run.dir "$WORK/pre" \
  > "$WORK/preid" || fail "sbatch of the job to pre-empt"
id=$(cat "$WORK/preid" 2>/dev/null) || id=none
usr1_waits_at_all() { local p; for p in $ranks; do signal_pending "$p" 10 || return 1; done; }
if wait_for_job_line "$WORK/pre.out" "^epoch 2/30 step "; then
  ranks=$(ranks_of_run "$WORK/pre")
  [ "$(wc -w <<< "$ranks")" = 2 ] || fail "pre-emption: found ranks '$(echo $ranks)' of the running job, not 2"
  [ -z "$ranks" ] || kill -STOP $ranks 2>/dev/null || fail "pre-emption: a rank ended before it was frozen"
  slurm scancel --signal=USR1 "$id" || fail "scancel --signal=USR1"
  wait_until "$JOB_LIMIT" usr1_waits_at_all || fail "pre-emption: USR1 did not reach both frozen ranks within $JOB_LIMIT s"
  [ -z "$ranks" ] || kill -CONT $ranks 2>/dev/null || true
  # The requeued job starts on its own once the old credential expired (slurm-up.sh: 10 s).
  completed() { [ "$(json_field "$WORK/pre/summary.json" status)" = completed ]; }
  wait_until $((2 * JOB_LIMIT)) completed || fail "the pre-empted job did not complete within $((2 * JOB_LIMIT)) s"
else slurm scancel "$id" || true; fi
grep -q "pre-empted after a checkpoint, requeueing job $id" "$WORK/pre.out" && pass "USR1: checkpoint, exit 75, requeued" \
  || fail "no requeue"
grep -o "resuming from .*" "$WORK/pre.out" || true
grep -q "(restart 1)" "$WORK/pre.out" && grep -q "resuming from" "$WORK/pre.out" && pass "the requeued job resumed" \
  || fail "no resume"
slurm sbatch --wait --ntasks=2 --output="$WORK/straight.out" "$template" "$WORK/base.ini" "${long[@]}" \
  --run.dir "$WORK/straight" >/dev/null || fail "uninterrupted job"
same_parameters "$(latest_checkpoint "$WORK/straight")" "$(latest_checkpoint "$WORK/pre")" \
  && pass "pre-empted + requeued job: parameters byte-identical to the uninterrupted one" || fail "requeued result differs"
finish
