#!/usr/bin/env bash
# The checkpoint writer (rank 0) is SIGKILLed 24 times, most of them while a
# checkpoint is being written. Each kill comes only after the restarted run has
# completed a new checkpoint, so the run moves on however slow the disk is. After
# every kill, every checkpoint file on disk is complete and `latest` names one of
# them and has advanced; `--resume auto` then carries the run to the end,
# bit-identical to a run that was never interrupted.
source "$(dirname "$0")/lib.sh"
# 24 by default (50 before, the suite's slowest test): every kill checks the same
# invariants, and 24 still aim 16 kills inside a write and 8 at random moments.
# KILLS=50 or more for a longer soak.
KILLS=${KILLS:-24}
# Seconds a restart may take to complete its first checkpoint (about 1 s here): a
# hang guard, as long as any run's (a cold disk, one core shared with other tests).
PROGRESS_LIMIT=${PROGRESS_LIMIT:-$RUN_TIMEOUT}
# Backstop for every rank's end after rank 0 was killed (under a second here).
END_LIMIT=${END_LIMIT:-120}
# The random pauses before the kills come from bash's RANDOM seeded with KILLS_SEED:
# a failure names its seed, and KILLS_SEED=N replays the same draws.
KILLS_SEED=${KILLS_SEED:-$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')}
RANDOM=$KILLS_SEED
echo "KILLS_SEED=$KILLS_SEED (set it to replay this run's kill points)"

make_blobs_shards "$WORK/train" 2000 1 2
# 12.7 MB checkpoints (with AdamW state) after every step: the writer is busy most of the time.
args=(train --data.train "$WORK/train" --model.hidden 1024,1024 --optim.name adamw --optim.lr 0.001
      --train.batch_size 16 --train.epochs 10 --train.log_every 1000 --checkpoint.keep 2)

run_ranks 2 "${args[@]}" --run.dir "$WORK/reference" --checkpoint.every_epochs 0 --checkpoint.every_steps 0 \
  --checkpoint.every_minutes 1000 > /dev/null 2>&1 || fail "reference run"

dir=$WORK/killed/checkpoints
writing() { compgen -G "$dir/*.tmp" >/dev/null; }
# A sleep without starting a process (read times out on a pipe that stays silent):
# on a busy machine, starting /bin/sleep can take longer than a checkpoint write.
exec {silent_fd}<> <(:)
nap() { read -r -t "$1" -u "$silent_fd" _ || true; }

# Until the restart has completed a checkpoint after step $1 (or ended), polled
# often so that each restart moves the run on by a few steps only.
# (lib.sh's wait_until polls too far apart for this; the same clock, uptime_cs.)
wait_for_progress() {
  local deadline; uptime_cs
  deadline=$((UPTIME_CS + 100 * PROGRESS_LIMIT))
  until [ "$(latest_step "$dir")" -gt "$1" ] || job_ended "$job"; do
    uptime_cs
    [ "$UPTIME_CS" -lt "$deadline" ] || return 1
    nap 0.005
  done
}

# The moment of kill I, once the restart has made progress: inside the next
# checkpoint write (2 in 3), or after a random pause of up to 0.2 s (1 in 3).
# Stale temporaries were removed when the restart began, so a *.tmp is a live write.
pause_before_kill() {
  if [ $(($1 % 3)) = 0 ]; then
    # Drawn here, not inside $(...): a subshell's RANDOM is not the seeded sequence.
    local ms=$((RANDOM % 200 + 1))
    nap "$(printf '0.%03d' "$ms")"
  else
    local deadline; uptime_cs
    deadline=$((UPTIME_CS + 1000))  # 10 s
    until writing || { uptime_cs; [ "$UPTIME_CS" -ge "$deadline" ]; }; do nap 0.001; done
    nap "0.00$((RANDOM % 5))"
  fi
}

# Every checkpoint file complete, and `latest` naming one of them.
checkpoints_sound() {
  local f sound=0
  for f in "$dir"/ckpt-step-*.h5; do
    [ -e "$f" ] || continue
    h5dump -a /format_version "$f" >/dev/null 2>&1 || { sound=1; fail "kill $1: $f is not a complete checkpoint (KILLS_SEED=$KILLS_SEED)"; }
  done
  if [ ! -f "$dir/$(cat "$dir/latest" 2>/dev/null)" ]; then sound=1; fail "kill $1: latest names a missing file (KILLS_SEED=$KILLS_SEED)"; fi
  return $sound
}

first_step=-1 during=0 survived=0 kills=0 stalled=0
for i in $(seq "$KILLS"); do
  before=$(latest_step "$dir")
  OMPI_MCA_orte_tmpdir_base=$(own_session_base) \
    "$MPIEXEC" -n 2 "$MPIDDP" "${args[@]}" --run.dir "$WORK/killed" --checkpoint.every_steps 1 --resume auto \
    > "$WORK/kill$i.log" 2>&1 &
  job=$!
  if ! wait_for_progress "$before"; then
    fail "kill $i: no new checkpoint within $PROGRESS_LIMIT s of the restart (latest still at step $before)"
    tail -5 "$WORK/kill$i.log" >&2; kill_job "$job"; break
  fi
  if job_ended "$job"; then
    end_job "$job" 1
    [ "$JOB_RC" = 0 ] && echo "note: the run reached its end after $kills kills" \
      || { fail "kill $i: the restart ended by itself with exit $JOB_RC"; tail -5 "$WORK/kill$i.log" >&2; }
    break
  fi
  [ "$first_step" -ge 0 ] || first_step=$before
  pid=$(rank_pid "$job" 0)
  pause_before_kill "$i"
  writing && during=$((during + 1))
  if [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; then kills=$((kills + 1)); else fail "kill $i: rank 0 not found"; fi
  # Every rank must be gone soon after the writer died.
  end_job "$job" "$END_LIMIT" || fail "kill $i: a rank still runs $END_LIMIT s after rank 0 was killed (KILLS_SEED=$KILLS_SEED)"
  after=$(latest_step "$dir")
  [ "$after" -gt "$before" ] || { stalled=$((stalled + 1)); fail "kill $i: latest did not advance (step $before before, $after after; KILLS_SEED=$KILLS_SEED)"; }
  checkpoints_sound "$i" && survived=$((survived + 1))
  echo "kill $i: latest at step $after (was $before)"
done
echo "note: mpirun itself hung after all ranks had exited in $MPIRUN_HANGS of $kills kills (Open MPI 4.1.4)"
if [ "$kills" -ge $((KILLS * 9 / 10)) ] && [ "$kills" -gt 0 ]; then
  [ "$survived" = "$kills" ] && pass "$kills kills left only complete checkpoints ($during of them during a checkpoint write)"
  [ "$stalled" = 0 ] && pass "latest advanced at every restart: from step $first_step to step $(latest_step "$dir") over $kills kills"
else fail "only $kills of $KILLS kills were made"; fi
# How many kills caught a write depends on the machine's speed: reported, and one is
# required (16 of the 24 wait for a write to start before they strike).
[ "$during" -ge 1 ] || fail "none of $kills kills landed inside a checkpoint write (KILLS_SEED=$KILLS_SEED)"

# The rest of the run without a checkpoint per step (checkpoints do not change the bits).
# `--resume auto` takes the newest complete file, which is one step past `latest`
# when the last kill fell between a checkpoint's rename and the update of `latest`.
resume_from=none
for f in "$dir"/ckpt-step-*.h5; do [ -e "$f" ] && resume_from=$(basename "$f"); done
run_ranks 2 "${args[@]}" --run.dir "$WORK/killed" --checkpoint.every_steps 0 --resume auto > "$WORK/final.log" 2>&1 \
  || fail "final resume"
log_has "$WORK/final.log" "resuming from .*/$resume_from" && pass "the final run resumed from $resume_from" \
  || { fail "the final run did not resume from $resume_from"; tail -5 "$WORK/final.log" >&2; }
same_parameters "$(latest_checkpoint "$WORK/reference")" "$(latest_checkpoint "$WORK/killed")" \
  && pass "after $kills kills the run finished bit-identical to the uninterrupted one" || fail "result differs"
finish
