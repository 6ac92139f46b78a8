#!/usr/bin/env bash
# On a real 3-node Slurm cluster on this machine (scripts/ci/slurm-up.sh --nodes 3:
# each node a slurmd in a network namespace of its own, with its own hostname and
# address on a private bridge): 4 ranks on 2 nodes under srun and under the job
# template, with the banner's hosts and local ranks and the final parameters
# checked against `mpirun -n 4` on one node; a rank that throws on one node (its
# line, nobody called lost, no exit 76); a node that dies mid-training (every
# process in its namespace SIGKILLed), which must end the job by itself with a
# line naming the lost ranks and host, be marked down, and leave a requeued job
# that resumes from the last checkpoint on the remaining nodes; a sweep whose
# array tasks land on different nodes. Every Slurm call is under a timeout, every
# wait is bounded, and the cluster is torn down however the test ends.
source "$(dirname "$0")/lib.sh"
# munged runs here, and srun's PMIx server picks the credentials: PMIx as it comes.
unset PMIX_MCA_psec
require_root "starts munged, slurmctld and slurmd in network namespaces"
require_commands slurmctld slurmd munged sbatch srun scancel ip unshare
ip netns add "mpiddp-probe-$$" 2>"$WORK/netns.err" && ip netns delete "mpiddp-probe-$$" \
  || skip "cannot create a network namespace here: $(cat "$WORK/netns.err")"
ci=$MPIDDP_SOURCE_DIR/scripts/ci
JOB_LIMIT=${JOB_LIMIT:-180}   # seconds any one job may take to reach a point (a few here)
at_exit '"$ci/slurm-down.sh"'
"$ci/slurm-up.sh" --nodes 3 > "$WORK/up.log" 2>&1 || { cat "$WORK/up.log" >&2; fail "slurm-up --nodes 3"; finish; }
cat "$WORK/up.log"
slurm() { timeout "${SLURM_TIMEOUT:-600}" "$ci/slurm-exec" "$@"; }
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
export MPIDDP MPIDDP_LAUNCH="srun --mpi=pmix --kill-on-bad-exit=1"
template=$MPIDDP_SOURCE_DIR/scripts/mpiddp.sbatch
cd "$WORK"

make_blobs_shards "$WORK/train" 2000 1 2
write_ini "$WORK/base.ini" data.train="$WORK/train" data.test="$WORK/train" model.hidden=32 \
  train.batch_size=16 train.epochs=3 train.seed=5 train.log_every=1 optim.name=adamw optim.lr=0.003

# The banner of a 4-rank job on 2 nodes: ranks 0,1 on one host and 2,3 on another,
# local ranks 0 and 1 of 2 on each. Prints the two hosts.
two_hosts_two_ranks_each() {
  "$PYTHON" - "$1" <<'PY'
import re, sys
rows = re.findall(r"^  rank (\d+): host (\S+), local rank (\d+) of (\d+)$", open(sys.argv[1], errors="replace").read(), re.M)
hosts = {}
for rank, host, local, size in rows:
    hosts.setdefault(host, []).append((int(rank), int(local), int(size)))
ok = len(rows) == 4 and len(hosts) == 2 and all(
    sorted(l for _, l, _ in v) == [0, 1] and all(s == 2 for _, _, s in v) for v in hosts.values())
print(" ".join(sorted(hosts)))
sys.exit(0 if ok else 1)
PY
}

# 1. srun -N 2 --ntasks-per-node 2: 4 ranks, 2 hosts, local ranks 0 and 1 on each;
# Open MPI's TCP transport connects the nodes over the bridge (its log says so).
rc=0; OMPI_MCA_btl_base_verbose=30 slurm srun --mpi=pmix --kill-on-bad-exit=1 -N 2 --ntasks-per-node 2 "$MPIDDP" train \
  "$WORK/base.ini" --run.dir "$WORK/srun4" > "$WORK/srun4.out" 2>&1 || rc=$?
hosts=$(two_hosts_two_ranks_each "$WORK/srun4.out") && [ "$rc" = 0 ] \
  && pass "srun -N 2 --ntasks-per-node 2: hosts $hosts, local ranks 0 and 1 on each" \
  || { fail "srun on 2 nodes (rc $rc): $(grep '^  rank' "$WORK/srun4.out" | tr '\n' ' ')"; tail -5 "$WORK/srun4.out" >&2; }
grep -q "btl:tcp: now connected to 10\.217\.0\." "$WORK/srun4.out" && pass "ranks on different nodes talk over TCP on the bridge" \
  || fail "no TCP connection between the nodes in Open MPI's log"

# 2. The template with sbatch -N 2: the same, from the job's log.
rc=0; slurm sbatch --wait -N 2 --ntasks-per-node 2 --output="$WORK/sbatch4.out" "$template" "$WORK/base.ini" \
  --run.dir "$WORK/sbatch4" >/dev/null || rc=$?
hosts=$(two_hosts_two_ranks_each "$WORK/sbatch4.out") && [ "$rc" = 0 ] \
  && [ "$(json_field "$WORK/sbatch4/summary.json" world_size)" = 4 ] \
  && pass "sbatch -N 2 with the template: hosts $hosts, local ranks 0 and 1 on each, exit 0" \
  || { fail "sbatch on 2 nodes (rc $rc)"; tail -5 "$WORK/sbatch4.out" >&2; }

# 3. The same training under `mpirun -n 4` on one node. Open MPI picks the same
# all-reduce algorithm for 4 ranks whatever the transport (TCP between nodes,
# shared memory within one), so the sums are added in the same order: bit for bit.
run_ranks 4 train "$WORK/base.ini" --run.dir "$WORK/mpirun4" > "$WORK/mpirun4.out" 2>&1 || fail "mpirun -n 4: exit $?"
same_parameters "$(latest_checkpoint "$WORK/mpirun4")" "$(latest_checkpoint "$WORK/srun4")" \
  && pass "srun on 2 nodes: final parameters and optimizer state bit-identical to mpirun -n 4 on one node" \
  || fail "srun on 2 nodes differs from mpirun -n 4"
same_parameters "$(latest_checkpoint "$WORK/mpirun4")" "$(latest_checkpoint "$WORK/sbatch4")" \
  && pass "sbatch on 2 nodes: bit-identical to mpirun -n 4 on one node" || fail "sbatch on 2 nodes differs from mpirun -n 4"

# 3b. An ordinary error on one node (rank 2 throws: its line, then MPI_Abort). The
# survivors' sends to it fail, but the launcher is ending the job: nobody is called
# lost, and the job does not exit 76 (which the template would requeue as a node loss).
rc=0; slurm srun --mpi=pmix --kill-on-bad-exit=1 -N 2 --ntasks-per-node 2 "$MPIDDP" train "$WORK/base.ini" \
  --run.dir "$WORK/throw" --debug.fail_rank 2 --debug.fail_step 5 --debug.fail_mode throw > "$WORK/throw.out" 2>&1 \
  || rc=$?
if grep -q "rank 2: debug.fail_mode = throw at step 5" "$WORK/throw.out" && [ "$rc" != 0 ] && [ "$rc" != 76 ] \
  && ! grep -q "lost rank" "$WORK/throw.out"; then
  pass "a rank that throws on the other node: its line, exit $rc, nobody called lost"
else fail "a rank that throws on the other node (exit $rc)"; grep -a "error" "$WORK/throw.out" >&2; fi

# 4. A sweep of 3 runs, each one node's worth (2 tasks on a node of 2 CPUs), all
# at once: the array tasks run on different nodes (each task's log names its host).
cat > "$WORK/batch.txt" <<'TXT'
grid lr optim.lr=0.01|0.003|0.001
TXT
rc=0; slurm "$MPIDDP_SOURCE_DIR/scripts/sweep" "$WORK/base.ini" "$WORK/batch.txt" --out "$WORK/sweep" \
  -- --wait -N 1 --ntasks=2 > "$WORK/sweep.log" 2>&1 || rc=$?
nodes=$(sed -n 's/^job .* on \(node[0-9]\): .*/\1/p' "$WORK"/sweep/*.out 2>/dev/null | sort -u | tr '\n' ' ')
done_runs=0
for summary in "$WORK"/sweep/*/summary.json; do [ "$(json_field "$summary" status)" = completed ] && done_runs=$((done_runs + 1)); done
[ "$rc" = 0 ] && [ "$done_runs" = 3 ] \
  && pass "sweep of 3 runs completed" || { fail "sweep (rc $rc)"; cat "$WORK/sweep.log" >&2; }
[ "$(wc -w <<< "$nodes")" -ge 2 ] && pass "the sweep's array tasks ran on different nodes: $nodes" \
  || fail "the sweep's array tasks ran on: '$nodes'"

# 5. A node dies mid-training. node_death_case NAME NODES_AFTER: a job on 2 nodes
# (2 ranks each) loses its second node (not the one running the batch script);
# a survivor must name that node's ranks and host, the job must end by itself (the
# time is measured and reported, not bounded: only a hang reaches the backstop), and Slurm must mark the node down. Then the run resumes from the last
# checkpoint on NODES_AFTER nodes and completes. NODES_AFTER 2: the template's
# requeue, on the two nodes left (the same world size), must end bit-identical to
# an uninterrupted run. Fewer nodes (a different world size, for elastic resume):
# Slurm 22.05 keeps a requeued job's first shape (NumNodes=2, NumTasks=4), so the
# requeued job is cancelled and the same command submitted again with
# -N NODES_AFTER, as a user would; `--resume auto` finds the checkpoint. The node
# is revived at the end.
# Backstop for the lost-ranks line and the job's end after a node died (5 and
# about 15 s here); a busy machine may take longer, only a hang reaches it.
DEATH_LIMIT=${DEATH_LIMIT:-180}
# job_diagnosis ID LOG: what Slurm says of a job that did not get where it should
# (its state and reason, slurmctld's lines about it) and the end of its log.
job_diagnosis() {
  local state=${MPIDDP_SLURM_STATE:-/tmp/mpiddp-slurm}
  { echo "--- scontrol show job $1"; slurm scontrol show job "$1"
    echo "--- sinfo, with reasons; every job"; slurm sinfo -N -l; slurm sinfo -R; slurm squeue -a -l -t all
    echo "--- slurmctld.log, lines naming JobId=$1 and nodes"
    grep -a -e "JobId=$1[^0-9]" -e "JobId=$1\$" -e "node[0-9]" "$state/slurmctld.log" | tail -60
    echo "--- the job's log"; tail -25 "$2"; } >&2 2>&1
}
long=(--train.epochs 15 --model.hidden 256,256 --train.log_every 10)
node_death_case() {
  local name=$1 after=$2 out=$WORK/$1.out run=$WORK/$1 id nodes victim killed
  submit() {  # NODES
    slurm sbatch --parsable -N "$1" --ntasks-per-node 2 --output="$out" "$template" "$WORK/base.ini" "${long[@]}" \
      "${case_args[@]}" --run.dir "$run"
  }
  id=$(submit 2) || { fail "$name: sbatch"; return; }
  # Mid-training: once a checkpoint exists and the next epoch runs. The ranks are
  # frozen from then until the node is dead, so the job cannot end in between.
  if ! wait_until "$JOB_LIMIT" log_has "$out" "^epoch 4/"; then
    fail "$name: no 'epoch 4/' within $JOB_LIMIT s"; tail -5 "$out" >&2; slurm scancel "$id"; return
  fi
  local ranks; ranks=$(ranks_of_run "$run")
  [ "$(wc -w <<< "$ranks")" = 4 ] || fail "$name: found ranks '$(echo $ranks)' of the running job, not 4"
  [ -z "$ranks" ] || kill -STOP $ranks 2>/dev/null || fail "$name: a rank ended before it was frozen"
  nodes=$(slurm scontrol show hostnames "$(slurm squeue -h -j "$id" -o %N)" | tr '\n' ' ')
  victim=$(awk '{ print $2 }' <<< "$nodes")
  if [ -z "$victim" ]; then
    fail "$name: job $id is not on 2 nodes: '$nodes'"; kill -CONT $ranks 2>/dev/null || true; slurm scancel "$id"; return
  fi
  "$ci/slurm-node.sh" kill "$victim" || fail "$name: slurm-node.sh kill $victim"
  killed=$(date +%s.%N)
  [ -z "$ranks" ] || kill -CONT $ranks 2>/dev/null || true  # the survivors (the victim's are gone)
  # A survivor names the lost ranks (all of the victim's, no others), and the job
  # ends: it leaves RUNNING (requeued by the template, or by Slurm).
  lost_line() { grep -a -m1 "^mpiddp: error: rank [0-9]*: lost rank(s) 2,3 on host $victim (their" "$out"; }
  if wait_until "$DEATH_LIMIT" lost_line >/dev/null; then
    DEATH_TO_LINE=$(elapsed "$killed"); pass "$name: after $DEATH_TO_LINE s: $(lost_line)"
  else fail "$name: no line naming ranks 2,3 on $victim within $DEATH_LIMIT s"; grep -a "error" "$out" >&2; fi
  first_run_ended() { [ "$(slurm squeue -h -j "$id" -o %T)" != RUNNING ] || grep -q "(restart 1)" "$out"; }
  DEATH_TO_END=never
  wait_until "$DEATH_LIMIT" first_run_ended && DEATH_TO_END=$(elapsed "$killed")
  [ "$DEATH_TO_END" != never ] && pass "$name: node $victim killed, the job ended $DEATH_TO_END s later" \
    || fail "$name: the job still ran $DEATH_LIMIT s after $victim died"
  down() { [[ $(slurm sinfo -h -n "$victim" -o %t) == down* ]]; }
  wait_until "$DEATH_LIMIT" down && pass "$name: Slurm marked $victim down" || fail "$name: $victim is not down"
  if [ "$after" -lt 2 ]; then
    slurm scancel "$id"
    gone() { [ -z "$(slurm squeue -h -j "$id" 2>/dev/null)" ]; }
    wait_until "$DEATH_LIMIT" gone || fail "$name: job $id still queued $DEATH_LIMIT s after scancel"
    id=$(submit "$after") || fail "$name: sbatch -N $after"
  fi
  completed() { [ "$(json_field "$run/summary.json" status)" = completed ]; }
  wait_until $((2 * JOB_LIMIT)) completed \
    || { fail "$name: the resumed job did not complete within $((2 * JOB_LIMIT)) s"; job_diagnosis "$id" "$out"; }
  [ "$after" -lt 2 ] || grep -q "(restart 1)" "$out" || fail "$name: the job was not requeued"
  grep -q "^resuming from .*ckpt-step-" "$out" && pass "$name: $(grep -m1 -o '^resuming from .*' "$out" | sed 's|/.*/||')" \
    || fail "$name: no resume"
  if [ "$after" -lt 2 ]; then  # elastic resume: the same run on fewer ranks
    grep -q "^resume: world size 4 -> $((2 * after)) .*; epoch [0-9]* continues with" "$out" \
      && pass "$name: $(grep -m1 '^resume: world size' "$out" | cut -c1-100)" || fail "$name: no elastic resume line"
  fi
  # The hosts in the banner of the last run (the log's last "job ..." line on).
  local after_hosts
  after_hosts=$(awk '/^job [0-9]+ \(restart/ { n = NR } { line[NR] = $0 } END { for (i = n; i <= NR; i++) print line[i] }' "$out" \
    | sed -n 's/^  rank [0-9]*: host \(node[0-9]\),.*/\1/p' | sort -u | tr '\n' ' ')
  [ "$(wc -w <<< "$after_hosts")" = "$after" ] && [[ " $after_hosts" != *" $victim "* ]] \
    && pass "$name: the resumed run ran on $after_hosts" || fail "$name: the resumed run's hosts: '$after_hosts'"
  if [ "$after" = 2 ]; then
    run_ranks 4 train "$WORK/base.ini" "${long[@]}" --run.dir "$run-straight" > "$run-straight.out" 2>&1 \
      || fail "$name: uninterrupted mpirun -n 4: exit $?"
    same_parameters "$(latest_checkpoint "$run-straight")" "$(latest_checkpoint "$run")" \
      && pass "$name: resumed result bit-identical to an uninterrupted mpirun -n 4" || fail "$name: result differs"
  fi
  "$ci/slurm-node.sh" revive "$victim" >/dev/null || fail "$name: slurm-node.sh revive $victim"
  idle() { [[ $(slurm sinfo -h -n "$victim" -o %t) == idle ]]; }
  wait_until "$DEATH_LIMIT" idle && pass "$name: $victim revived and idle again" || fail "$name: $victim not idle after revive"
}
case_args=()
node_death_case node-death 2
# Checkpoints every 5 steps: the one the smaller job resumes from lies inside an
# epoch, which it continues on its 2 ranks.
case_args=(--checkpoint.every_steps 5)
node_death_case fewer-nodes 1
finish
