#!/usr/bin/env bash
# On a real one-node Slurm (scripts/ci/slurm-up.sh): the job-script template with
# srun and with mpirun inside the allocation, a sweep as a job array with its
# summary table, a failing job, and a pre-empted job that requeues itself and
# resumes to a result byte-identical to an uninterrupted run. Every Slurm call is
# under a timeout.
source "$(dirname "$0")/lib.sh"
ci=$MPIDDP_SOURCE_DIR/scripts/ci
t0=$(date +%s.%N)
"$ci/slurm-up.sh" || { fail "slurm-up"; finish; }
echo "slurm up in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }') s"
trap '"$ci/slurm-down.sh"; [ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"' EXIT
slurm() { timeout "${SLURM_TIMEOUT:-120}" "$ci/slurm-exec" "$@"; }
export MPIDDP MPIDDP_LAUNCH="srun --mpi=pmix --kill-on-bad-exit=1"
template=$MPIDDP_SOURCE_DIR/scripts/mpiddp.sbatch
cd "$WORK"

make_blobs_csv "$WORK/train.csv" 2000 1
"$MPIDDP" shard --format csv --input "$WORK/train.csv" --out "$WORK/train" --shards 2 >/dev/null
cat > "$WORK/base.ini" <<INI
[data]
train = $WORK/train
test = $WORK/train
[model]
hidden = 32
[train]
batch_size = 16
epochs = 3
seed = 5
log_every = 1
[optim]
name = adamw
lr = 0.003
INI

# 1. The template, 2 tasks under srun: exit code, summary, local ranks; time to the first step.
submitted=$(date +%s.%N)
slurm sbatch --parsable --ntasks=2 --output="$WORK/job1.out" "$template" "$WORK/base.ini" --run.dir "$WORK/run1" > "$WORK/id1"
for _ in $(seq 600); do grep -q "^epoch 1/3 step 1/" "$WORK/job1.out" 2>/dev/null && break; sleep 0.05; done
first_step=$(awk -v a="$submitted" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
for _ in $(seq 600); do [ -f "$WORK/run1/summary.json" ] && break; sleep 0.1; done
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
"$MPIDDP_SOURCE_DIR/scripts/sweep" "$WORK/base.ini" "$WORK/batch.txt" --out "$WORK/sweep" --dry-run > "$WORK/dry.txt"
[ "$(tail -1 "$WORK/dry.txt")" = "4 run(s)" ] && pass "sweep --dry-run expands 4 runs" || fail "dry run: $(cat "$WORK/dry.txt")"
t_sweep=$(date +%s.%N)
rc=0; slurm "$MPIDDP_SOURCE_DIR/scripts/sweep" "$WORK/base.ini" "$WORK/batch.txt" --out "$WORK/sweep" --max-parallel 2 \
  -- --wait --ntasks=2 > "$WORK/sweep.log" 2>&1 || rc=$?
sweep_s=$(awk -v a="$t_sweep" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
[ "$rc" != 0 ] && pass "the array's exit code reports the failed run ($rc)" || fail "array exit code $rc"
"$MPIDDP_SOURCE_DIR/scripts/sweep-summary" "$WORK/sweep" > "$WORK/table.md" 2>/dev/null
cat "$WORK/table.md"
[ "$(grep -c '| completed |' "$WORK/table.md")" = 3 ] && pass "summary: 3 completed runs ranked" || fail "completed runs"
grep -q "| - | broken | failed (exit 2) |" "$WORK/table.md" && pass "summary: the broken run is failed (exit 2)" || fail "failed run"
runs_s=$(cat "$WORK"/sweep/*/summary.json | /usr/bin/python3 -c "import json,sys; print(sum(json.loads(l)['wall_s'] for l in sys.stdin))")
echo "sweep of 4 runs (2 at a time) took $sweep_s s; training itself $runs_s s"
"$MPIDDP_SOURCE_DIR/scripts/sweep-summary" "$WORK/sweep" --format csv > "$WORK/table.csv" 2>/dev/null
grep -q "^rank,name,status" "$WORK/table.csv" && [ "$(wc -l < "$WORK/table.csv")" = 5 ] && pass "csv output" || fail "csv output"

# A failing job on its own: non-zero exit code from sbatch --wait.
rc=0; slurm sbatch --wait --ntasks=2 --output="$WORK/bad.out" "$template" "$WORK/base.ini" --run.dir "$WORK/bad" \
  --data.train /nonexistent >/dev/null || rc=$?
[ "$rc" = 2 ] && grep -q "^mpiddp: error: rank 0: /nonexistent: no such shard" "$WORK/bad.out" \
  && pass "bad input: job exit code 2 with the error line in its log" || fail "bad job rc $rc"

# 5. Pre-emption: USR1 mid-training -> checkpoint, exit 75, scontrol requeue, resume, same bits.
long=(--train.epochs 30 --model.hidden 1024,1024 --train.log_every 10)  # several seconds of training
slurm sbatch --parsable --ntasks=2 --output="$WORK/pre.out" "$template" "$WORK/base.ini" "${long[@]}" --run.dir "$WORK/pre" > "$WORK/preid"
id=$(cat "$WORK/preid")
for _ in $(seq 600); do grep -q "^epoch 2/30 step " "$WORK/pre.out" 2>/dev/null && break; sleep 0.05; done
slurm scancel --signal=USR1 "$id" || fail "scancel --signal=USR1"
# The requeued job starts on its own once the old credential expired (slurm-up.sh: 10 s).
for _ in $(seq 1200); do [ "$(json_field "$WORK/pre/summary.json" status 2>/dev/null)" = completed ] && break; sleep 0.1; done
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
