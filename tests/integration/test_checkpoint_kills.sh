#!/usr/bin/env bash
# The checkpoint writer (rank 0) is SIGKILLed 50 times at random moments, most of
# them while a checkpoint is being written. After every kill, every checkpoint
# file on disk is complete and `latest` names one of them; `--resume auto` then
# carries the run to the end, bit-identical to a run that was never interrupted.
source "$(dirname "$0")/lib.sh"
KILLS=${KILLS:-50}

make_blobs_csv "$WORK/train.csv" 2000 1
"$MPIDDP" shard --format csv --input "$WORK/train.csv" --out "$WORK/train" --shards 2 >/dev/null
# 12.7 MB checkpoints (with AdamW state) after every step: the writer is busy most of the time.
args=(train --data.train "$WORK/train" --model.hidden 1024,1024 --optim.name adamw --optim.lr 0.001
      --train.batch_size 16 --train.epochs 10 --train.log_every 1000 --checkpoint.keep 2 --dist.timeout_s 5)

run_ranks 2 "${args[@]}" --run.dir "$WORK/reference" --checkpoint.every_epochs 0 --checkpoint.every_steps 0 \
  --checkpoint.every_minutes 1000 > /dev/null 2>&1 || fail "reference run"

rank0_pid() {
  for p in $(pgrep -f "mpiddp train --data.train $WORK/train" || true); do
    tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=0" && { echo "$p"; return; }
  done
  return 0
}
dir=$WORK/killed/checkpoints
during=0 survived=0 mpirun_hangs=0
for i in $(seq "$KILLS"); do
  "$MPIEXEC" -n 2 "$MPIDDP" "${args[@]}" --run.dir "$WORK/killed" --checkpoint.every_steps 1 --resume auto \
    > "$WORK/kill$i.log" 2>&1 &
  job=$!
  pid=""
  for _ in $(seq 200); do pid=$(rank0_pid); [ -n "$pid" ] && break; sleep 0.02; done
  if [ $((i % 3)) = 0 ]; then
    sleep "0.$((RANDOM % 6 + 2))"                       # anywhere in the run
  else
    for _ in $(seq 2000); do compgen -G "$dir/*.tmp" >/dev/null && break; sleep 0.002; done
    sleep "0.00$((RANDOM % 5))"                         # inside a checkpoint write
  fi
  compgen -G "$dir/*.tmp" >/dev/null && during=$((during + 1))
  [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
  # Every rank must be gone soon after the writer died.
  for _ in $(seq 150); do kill -0 $job 2>/dev/null || break; sleep 0.1; done
  if kill -0 $job 2>/dev/null; then
    if ps -o stat= --ppid $job | grep -qv '^Z'; then
      fail "kill $i: a rank still runs 15 s after rank 0 was killed: $(ps -o pid,stat,comm --ppid $job | tr '\n' ' ')"
    else
      # Known Open MPI 4.1.4 problem: every rank has exited, but mpirun neither reaps
      # the killed one nor exits. Not mpiddp's to fix; counted and reported.
      mpirun_hangs=$((mpirun_hangs + 1))
    fi
    pkill -9 -P $job || true; kill -9 $job || true
  fi
  wait $job 2>/dev/null || true
  ok=1
  for f in "$dir"/ckpt-step-*.h5; do
    [ -e "$f" ] || continue
    h5dump -a /format_version "$f" >/dev/null 2>&1 || { ok=0; fail "kill $i: $f is not a complete checkpoint"; }
  done
  if [ -f "$dir/latest" ] && [ ! -f "$dir/$(cat "$dir/latest")" ]; then ok=0; fail "kill $i: latest names a missing file"; fi
  [ $ok = 1 ] && survived=$((survived + 1))
  echo "kill $i: latest $(cat "$dir/latest" 2>/dev/null || echo none)"
done
pass "$survived of $KILLS kills left only complete checkpoints ($during of them during a checkpoint write)"
echo "note: mpirun itself hung after all ranks had exited in $mpirun_hangs of $KILLS kills (Open MPI 4.1.4)"
[ "$during" -ge $((KILLS / 2)) ] || fail "only $during kills landed inside a checkpoint write"

# The rest of the run without a checkpoint per step (checkpoints do not change the bits).
run_ranks 2 "${args[@]}" --run.dir "$WORK/killed" --checkpoint.every_steps 0 --resume auto > "$WORK/final.log" 2>&1 \
  || fail "final resume"
grep -o "resuming from .*" "$WORK/final.log" | head -1
same_parameters "$(latest_checkpoint "$WORK/reference")" "$(latest_checkpoint "$WORK/killed")" \
  && pass "after $KILLS kills the run finished bit-identical to the uninterrupted one" || fail "result differs"
finish
