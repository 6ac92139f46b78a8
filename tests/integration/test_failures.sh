#!/usr/bin/env bash
# Failures never hang: a rank that throws, exits, hangs or is SIGKILLed ends the
# whole job within a bounded time; NaN stops (or is skipped); signals from
# outside stop cleanly; a full disk or a shard truncated under the job give one
# clear line and lose nothing already written.
source "$(dirname "$0")/lib.sh"

make_blobs_csv "$WORK/train.csv" 4000 1
"$MPIDDP" shard --format csv --input "$WORK/train.csv" --out "$WORK/train" --shards 2 >/dev/null
base=(train --data.train "$WORK/train" --train.batch_size 16)

elapsed_since() { echo $(( $(date +%s%N) / 1000000 - $1 )); }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

expect_error throw 2 "rank 1: debug.fail_mode = throw at step 5" "${base[@]}" --train.epochs 2 --run.dir "$WORK/r" \
  --debug.fail_rank 1 --debug.fail_step 5 --debug.fail_mode throw
t0=$(now_ms); rc=0
timeout 60 "$MPIEXEC" -n 2 "$MPIDDP" "${base[@]}" --train.epochs 2 --run.dir "$WORK/r" --debug.fail_rank 1 --debug.fail_step 5 \
  --debug.fail_mode exit > "$WORK/exit.log" 2>&1 || rc=$?
[ "$rc" != 0 ] && [ "$rc" != 124 ] && pass "exit: job ended with $rc in $(elapsed_since "$t0") ms" || fail "exit: rc $rc"
t0=$(now_ms)
expect_error hang 2 "at step 7 did not complete within dist.timeout_s = 3 s" "${base[@]}" --train.epochs 2 --run.dir "$WORK/r" \
  --debug.fail_rank 1 --debug.fail_step 7 --debug.fail_mode hang --dist.timeout_s 3
ms=$(elapsed_since "$t0"); [ "$ms" -lt 15000 ] && pass "hang detected in $ms ms (timeout 3 s)" || fail "hang took $ms ms"
expect_error nan 2 "rank 0: step 9: non-finite loss or gradient (NaN/Inf); set train.nonfinite = skip" "${base[@]}" --train.epochs 2 \
  --run.dir "$WORK/r" --debug.fail_rank 1 --debug.fail_step 9 --debug.fail_mode nan
run_ranks 2 "${base[@]}" --train.epochs 2 --run.dir "$WORK/skip" --debug.fail_rank 1 --debug.fail_step 9 --debug.fail_mode nan \
  --train.nonfinite skip > "$WORK/skip.log" 2>&1 && [ "$(json_field "$WORK/skip/summary.json" skipped_steps)" = 1 ] \
  && pass "nonfinite = skip drops one step and finishes" || fail "nonfinite skip"

# SIGKILL of one rank mid-training: measured time from the kill to the job's end.
"$MPIEXEC" -n 2 "$MPIDDP" "${base[@]}" --train.epochs 1000 --run.dir "$WORK/kill" > "$WORK/kill.log" 2>&1 &
job=$!
rank_pid() {  # PID of the mpiddp process with this world rank
  for p in $(pgrep -f "mpiddp train --data.train $WORK/train" || true); do
    if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1"; then echo "$p"; return; fi
  done
  return 0
}
for _ in $(seq 100); do grep -q "samples/s" "$WORK/kill.log" 2>/dev/null && break; sleep 0.1; done
victim=$(rank_pid 1)
t0=$(now_ms); kill -9 "$victim"
rc=0; for _ in $(seq 300); do kill -0 $job 2>/dev/null || break; sleep 0.1; done
if kill -0 $job 2>/dev/null; then
  if ps -o stat= --ppid $job | grep -qv '^Z'; then
    fail "a rank still runs 30 s after SIGKILL of rank 1"
  else  # Open MPI 4.1.4 sometimes leaves mpirun hanging after every rank ended
    echo "note: every rank ended, but mpirun itself hung (Open MPI 4.1.4)"; rc=137
  fi
  pkill -9 -P $job || true; kill -9 $job || true
fi
wait_rc=0; wait $job || wait_rc=$?
[ "$rc" = 0 ] && rc=$wait_rc; ms=$(elapsed_since "$t0")
[ "$rc" != 0 ] && pass "SIGKILL of rank 1: job exited $rc after $ms ms" || fail "SIGKILL: rc $rc"

# SIGTERM / SIGUSR1 from outside, to one rank: agreed stop, checkpoint, exit 75, resume finishes.
for sig in TERM USR1; do
  dir=$WORK/sig$sig
  "$MPIEXEC" -n 2 "$MPIDDP" "${base[@]}" --train.epochs 30 --model.hidden 1024,1024 --run.dir "$dir" > "$dir.log" 2>&1 &
  job=$!
  for _ in $(seq 100); do grep -q "samples/s" "$dir.log" 2>/dev/null && break; sleep 0.1; done
  kill -$sig "$(rank_pid 1)"
  rc=0; wait $job || rc=$?
  if [ "$rc" = 75 ] && grep -q "stop requested by a signal" "$dir.log" && [ -f "$dir/checkpoints/latest" ]; then
    pass "SIG$sig to rank 1: checkpoint at $(cat "$dir/checkpoints/latest"), exit 75"
  else fail "SIG$sig: rc $rc"; tail -3 "$dir.log"; fi
  run_ranks 2 "${base[@]}" --train.epochs 30 --model.hidden 1024,1024 --run.dir "$dir" --resume auto > "$dir.resume.log" 2>&1 \
    && [ "$(json_field "$dir/summary.json" status)" = completed ] && pass "SIG$sig: resumed to the end" \
    || fail "SIG$sig resume"
done

# Full disk while checkpointing (a small tmpfs, then filled up): the error names
# the file, the previous checkpoint and the `latest` pointer survive, no temporary
# file is left, and the run goes on once there is space again.
mkdir -p "$WORK/fs"
if mount -t tmpfs -o size=8m tmpfs "$WORK/fs"; then
  trap 'umount "$WORK/fs" 2>/dev/null; rm -rf "$WORK"' EXIT
  big=(--model.hidden 512,512 --run.dir "$WORK/fs/run")  # checkpoints of about 3.2 MB
  run_ranks 2 "${base[@]}" --train.epochs 1 "${big[@]}" >/dev/null 2>&1 || fail "first epoch on the tmpfs"
  before=$(cat "$WORK/fs/run/checkpoints/latest")
  free_kb=$(df -k --output=avail "$WORK/fs" | tail -1)
  dd if=/dev/zero of="$WORK/fs/filler" bs=1k count=$((free_kb - 1000)) status=none || true
  rc=0
  run_ranks 2 "${base[@]}" --train.epochs 2 "${big[@]}" --resume auto > "$WORK/full.log" 2>&1 || rc=$?
  if [ "$rc" != 0 ] && [ "$(grep -c '^mpiddp: error' "$WORK/full.log")" = 1 ] && \
     grep -q "^mpiddp: error: rank 0: .*ckpt-step-.*\.h5.*(disk full?)" "$WORK/full.log"; then
    pass "full disk: $(grep '^mpiddp: error' "$WORK/full.log")"
  else fail "full disk: rc $rc"; tail -3 "$WORK/full.log"; fi
  [ "$(cat "$WORK/fs/run/checkpoints/latest")" = "$before" ] && \
    /usr/bin/python3 -c "import h5py,sys; h5py.File(sys.argv[1],'r')['params']" "$WORK/fs/run/checkpoints/$before" \
    && pass "previous checkpoint $before intact, latest unchanged" || fail "previous checkpoint damaged"
  ls "$WORK/fs/run/checkpoints"/*.tmp >/dev/null 2>&1 && fail "temporary file left behind" || pass "no temporary file left"
  rm "$WORK/fs/filler"
  run_ranks 2 "${base[@]}" --train.epochs 2 "${big[@]}" --resume auto >/dev/null 2>&1 \
    && pass "with space again, the run resumes and finishes" || fail "resume after full disk"
else
  fail "cannot mount a tmpfs (needs root) for the full-disk check"
fi

# A shard truncated under a running job: one clear line, no crash (SIGBUS) and no hang.
cp -r "$WORK/train" "$WORK/shrink"
"$MPIEXEC" -n 2 "$MPIDDP" train --data.train "$WORK/shrink" --train.epochs 1000 --run.dir "$WORK/t" > "$WORK/shrink.log" 2>&1 &
job=$!
for _ in $(seq 100); do grep -q "samples/s" "$WORK/shrink.log" 2>/dev/null && break; sleep 0.1; done
truncate -s 10000 "$WORK/shrink/shard-00001-of-00002.h5"
rc=0; wait $job || rc=$?
if [ "$rc" = 2 ] && [ "$(grep -c '^mpiddp: error' "$WORK/shrink.log")" = 1 ] && \
   grep -q "shard-00001-of-00002.h5: shard was truncated or replaced while training" "$WORK/shrink.log"; then
  pass "truncated shard: $(grep '^mpiddp: error' "$WORK/shrink.log")"
else fail "truncated shard: rc $rc"; tail -5 "$WORK/shrink.log"; fi
# A shard deleted under a running job: the open file still serves the job to its end.
cp -r "$WORK/train" "$WORK/gone"
"$MPIEXEC" -n 2 "$MPIDDP" train --data.train "$WORK/gone" --train.epochs 200 --run.dir "$WORK/g" > "$WORK/gone.log" 2>&1 &
job=$!
for _ in $(seq 100); do grep -q "samples/s" "$WORK/gone.log" 2>/dev/null && break; sleep 0.1; done
rm "$WORK/gone/shard-00000-of-00002.h5"
rc=0; wait $job || rc=$?
[ "$rc" = 0 ] && pass "deleted shard: the job keeps reading its open file and finishes" || fail "deleted shard: rc $rc"
finish
