#!/usr/bin/env bash
# Hostile input, round 3 (runs and files): no HDF5 file mpiddp reads can make it
# read another file (external storage, external or soft links, virtual datasets:
# in init files, checkpoints and data shards); a finished run re-run with
# --resume auto stays exactly as it was; one job per run directory (a second job
# is refused, naming the holder; a killed job never blocks its requeue); a
# metrics record that cannot be written ends the job with the reason.
source "$(dirname "$0")/lib.sh"
require_python_modules h5py numpy

make_blobs_shards "$WORK/data" 400 1 2
# 400 samples, 2 ranks, batch 20: 10 steps per epoch.
write_ini "$WORK/run.ini" data.train="$WORK/data" model.hidden=16 train.batch_size=20 train.epochs=2 \
  train.log_every=5 checkpoint.every_steps=5 checkpoint.keep=0
T=(train "$WORK/run.ini")
train2() { run_ranks 2 "${T[@]}" "$@"; }


train2 --run.dir "$WORK/a" > "$WORK/a.log" 2>&1 || fail "reference run: exit $?"
ckpt=$(latest_checkpoint "$WORK/a")
ckpt_named() { printf '%s/checkpoints/ckpt-step-%09d.h5' "$1" "$2"; }

# ---- 1. nothing outside the file: external storage, links, virtual datasets ----
# A "secret" file whose bytes must never become an array (it stands for /etc/passwd).
printf 'root:x:0:0:root:/root:/bin/bash\n%.0s' $(seq 64) > "$WORK/secret"
# hostile_copy SRC DST KIND DATASET: DST is SRC with DATASET replaced by one whose
# data lies outside the file (KIND external, elink, softlink, virtual).
hostile_copy() {
  "$PYTHON" - "$@" "$WORK/secret" <<'PY'
import shutil, sys, h5py, numpy as np
src, dst, kind, name, secret = sys.argv[1:]
other = secret + "." + kind + ".other.h5"  # outside any data directory
shutil.copyfile(src, dst)
with h5py.File(dst, "r+") as f:
    d = f[name]
    shape, dtype = d.shape, d.dtype
    del f[name]
    if kind == "external":
        f.create_dataset(name, shape=shape, dtype=dtype, external=[(secret, 0, int(np.prod(shape)) * dtype.itemsize)])
    elif kind == "elink":
        with h5py.File(other, "w") as o:
            o.create_dataset("x", data=np.zeros(shape, dtype))
        f[name] = h5py.ExternalLink(other, "/x")
    elif kind == "softlink":
        f.create_dataset(name + "_real", data=np.zeros(shape, dtype))
        f[name] = h5py.SoftLink("/" + name + "_real")
    elif kind == "virtual":
        layout = h5py.VirtualLayout(shape=shape, dtype=dtype)
        with h5py.File(other, "w") as o:
            o.create_dataset("x", data=np.zeros(shape, dtype))
        layout[...] = h5py.VirtualSource(other, "x", shape=shape)
        f.create_virtual_dataset(name, layout)
PY
}
for kind in external elink softlink virtual; do
  hostile_copy "$ckpt" "$WORK/init-$kind.h5" "$kind" params/layers.0.weight
  expect_error "init-$kind" 2 "init-$kind.h5: 'params/layers.0.weight' " "${T[@]}" --run.dir "$WORK/i-$kind" \
    --model.init "$WORK/init-$kind.h5"
  [ ! -e "$WORK/i-$kind" ] || fail "init-$kind: a refused start created its run.dir"
done
# --resume PATH of a checkpoint with hostile storage (a copy of the run's own).
for kind in external elink virtual; do
  hostile_copy "$ckpt" "$WORK/resume-$kind.h5" "$kind" params/layers.0.weight
  expect_error "resume-$kind" 2 "resume-$kind.h5: 'params/layers.0.weight' " "${T[@]}" --run.dir "$WORK/r-$kind" \
    --resume "$WORK/resume-$kind.h5"
done
# A data shard whose features lie elsewhere.
for kind in external elink virtual; do
  mkdir -p "$WORK/data-$kind"
  cp "$WORK/data/shard-00001-of-00002.h5" "$WORK/data-$kind/"
  hostile_copy "$WORK/data/shard-00000-of-00002.h5" "$WORK/data-$kind/shard-00000-of-00002.h5" "$kind" features
  expect_error "shard-$kind" 2 "shard-00000-of-00002.h5: 'features' " "${T[@]}" --run.dir "$WORK/s-$kind" \
    --data.train "$WORK/data-$kind"
done
grep -l "root:x:0:0" "$WORK"/i-*/checkpoints/* "$WORK"/r-*/checkpoints/* 2>/dev/null \
  && fail "the secret's bytes were written into a checkpoint" || pass "no checkpoint holds the secret's bytes"

# ---- 2. a finished run re-run with --resume auto (a requeue, a sweep task) ----
snapshot "$WORK/a" > "$WORK/a.snap"
rc=0; train2 --run.dir "$WORK/a" --resume auto > "$WORK/again.log" 2>&1 || rc=$?
[ "$rc" = 0 ] && grep -q "^run.dir $WORK/a: the run is complete (epoch 2 of train.epochs = 2 done, global step 20)" \
  "$WORK/again.log" && pass "a finished run: $(grep 'the run is complete' "$WORK/again.log")" \
  || { fail "finished run re-run: exit $rc"; tail -3 "$WORK/again.log" >&2; }
unchanged finished-rerun "$WORK/a" "$WORK/a.snap"
[ "$(json_field "$WORK/a/summary.json" epochs)" = 2 ] && pass "summary.json still reports 2 epochs" \
  || fail "summary.json: $(cat "$WORK/a/summary.json")"
# Stopped by train.max_steps: complete too, until max_steps is raised.
train2 --run.dir "$WORK/m" --train.max_steps 7 > /dev/null 2>&1 || fail "max_steps run"
snapshot "$WORK/m" > "$WORK/m.snap"
train2 --run.dir "$WORK/m" --train.max_steps 7 --resume auto > "$WORK/m2.log" 2>&1 \
  && grep -q "the run is complete (train.max_steps = 7 reached, global step 7)" "$WORK/m2.log" \
  && pass "max_steps run re-run: complete" || fail "max_steps re-run: $(tail -2 "$WORK/m2.log")"
unchanged max-steps-rerun "$WORK/m" "$WORK/m.snap"
train2 --run.dir "$WORK/m" --train.max_steps 12 --resume auto > "$WORK/m3.log" 2>&1 \
  && [ "$(json_field "$WORK/m/summary.json" steps)" = 12 ] && pass "raising train.max_steps continues it to step 12" \
  || fail "max_steps raised: $(tail -2 "$WORK/m3.log")"
# More epochs continue a finished run.
cp -r "$WORK/a" "$WORK/a3"
train2 --run.dir "$WORK/a3" --train.epochs 3 --resume auto > "$WORK/a3.log" 2>&1 \
  && [ "$(json_field "$WORK/a3/summary.json" steps)" = 30 ] && pass "raising train.epochs continues a finished run" \
  || fail "epochs raised: $(tail -2 "$WORK/a3.log")"

# ---- 2b. a resume is the same model, and its attributes are whole and sane ----
cp -r "$WORK/a" "$WORK/shape"
expect_error other-input-shape 2 "written for input shape 8 (model.input_shape), this job has 2,4" "${T[@]}" \
  --run.dir "$WORK/shape" --resume auto --train.epochs 3 --model.input_shape 2,4
train2 --run.dir "$WORK/shape" --resume auto --train.epochs 3 --model.input_shape 8 > "$WORK/shape.log" 2>&1 \
  && pass "the same input shape written out (model.input_shape 8) resumes" || fail "input shape 8: $(tail -2 "$WORK/shape.log")"
mid=$(ckpt_named "$WORK/a" 5)  # inside epoch 1 (10 steps per epoch)
# edited NAME ATTR=VALUE|-ATTR ...: a copy of the mid-epoch checkpoint with attributes set (-: deleted).
edited() {
  local name=$1; shift
  cp "$mid" "$WORK/$name.h5"
  "$PYTHON" - "$WORK/$name.h5" "$@" <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r+") as f:
    for edit in sys.argv[2:]:
        if edit.startswith("-"):
            del f.attrs[edit[1:]]
        else:
            key, value = edit.split("=")
            f.attrs[key] = np.int64(int(value))
PY
}
edited no-samples-done -epoch_samples_done elastic_resumes=1
expect_error no-samples-done 2 "attribute 'epoch_samples_done' is missing while the other elastic-resume attributes" \
  "${T[@]}" --run.dir "$WORK/e1" --resume "$WORK/no-samples-done.h5"
edited short-epoch elastic_resumes=1 epoch_length=190 epoch_samples_done=100
expect_error short-epoch 2 "attribute 'epoch_length' is 190, which no world size orders from 400 samples" \
  "${T[@]}" --run.dir "$WORK/e2" --resume "$WORK/short-epoch.h5"
edited many-resumes elastic_resumes=9223372036854775807
expect_error many-resumes 2 "attribute 'elastic_resumes' is 9223372036854775807, more than 1000000000" \
  "${T[@]}" --run.dir "$WORK/e3" --resume "$WORK/many-resumes.h5"
# The logged training loss of a resumed run has the bits of the uninterrupted
# run's: batch 7 (sums that round), records every 13 steps, checkpoints every 9,
# so the window of step 26 spans the checkpoint of step 18 that the second job
# resumes from. (Without the fold at checkpoints, step 22's record differed in
# its last digit here.)
loss_args=(--train.batch_size 7 --train.epochs 3 --train.log_every 13 --checkpoint.every_steps 9)
train2 "${loss_args[@]}" --run.dir "$WORK/stop" --train.max_steps 20 > /dev/null 2>&1 || fail "stopped run"
train2 "${loss_args[@]}" --run.dir "$WORK/resumed" --resume "$(ckpt_named "$WORK/stop" 18)" > /dev/null 2>&1 \
  || fail "resumed run"
train2 "${loss_args[@]}" --run.dir "$WORK/whole" > /dev/null 2>&1 || fail "uninterrupted run"
losses() { "$PYTHON" -c 'import json,sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["type"] == "train" and r["global_step"] > 18: print(r["global_step"], repr(r["loss"]))' "$1/metrics.jsonl"; }
[ "$(losses "$WORK/whole" | wc -l)" -ge 5 ] && diff <(losses "$WORK/whole") <(losses "$WORK/resumed") >&2 \
  && pass "the resumed run logged the uninterrupted run's losses, bit for bit" \
  || fail "the logged losses of a resumed run differ"

# ---- 3. one job per run directory ----
long=(--train.epochs 100000 --train.log_every 1)
OMPI_MCA_orte_tmpdir_base=$(own_session_base) \
  "$MPIEXEC" -n 2 "$MPIDDP" "${T[@]}" "${long[@]}" --run.dir "$WORK/busy" > "$WORK/busy.log" 2>&1 &
job=$!
if wait_for_line "$job" "$WORK/busy.log" "samples/s" "$RUN_TIMEOUT" && holder=$(rank_pid "$job" 0) && [ -n "$holder" ]; then
  snapshot "$WORK/busy" | grep -v -e metrics.jsonl -e checkpoints > "$WORK/busy.snap" || true
  expect_error second-resume 2 "run.dir $WORK/busy is in use by another job (host $(hostname), pid $holder" \
    "${T[@]}" "${long[@]}" --run.dir "$WORK/busy" --resume auto
  expect_error second-fresh 2 "run.dir $WORK/busy already holds a run" "${T[@]}" --run.dir "$WORK/busy"
  ls "$WORK/busy/checkpoints" | grep -q "not-this-run" && fail "checkpoints renamed .not-this-run" \
    || pass "the running job's checkpoints were left alone"
  kill -9 "$holder"; end_job "$job" "$RUN_TIMEOUT" || true
  # The killed job's lock went with its process: the requeue runs.
  # A few steps past the newest checkpoint file (the kill may have come after a
  # rename and before `latest` was updated).
  newest=$(ls "$WORK/busy/checkpoints" | sed -n 's/^ckpt-step-0*\([0-9][0-9]*\)\.h5$/\1/p' | sort -n | tail -1)
  stop_at=$(( ${newest:-0} + 3 ))
  rc=0; train2 "${long[@]}" --run.dir "$WORK/busy" --resume auto --train.max_steps "$stop_at" > "$WORK/requeue.log" 2>&1 \
    || rc=$?
  [ "$rc" = 0 ] && pass "after SIGKILL of the holder, --resume auto runs (the lock was released)" \
    || { fail "requeue after SIGKILL: exit $rc"; tail -3 "$WORK/requeue.log" >&2; }
else fail "no running job to lock run.dir"; kill_job "$job"; fi
# Two fresh starts racing for one new run.dir: one trains, the other is refused,
# and nothing of the winner's is renamed. Each mpirun has a session base of its
# own: with a shared one, the winner ending while the loser's mpirun started made
# orte_init fail (exit 1), the one failure this check ever had.
for i in 1 2; do
  OMPI_MCA_orte_tmpdir_base=$(own_session_base) \
    timeout "$RUN_TIMEOUT" "$MPIEXEC" -n 2 "$MPIDDP" "${T[@]}" --run.dir "$WORK/race" > "$WORK/race$i.log" 2>&1 &
  racer[$i]=$!
done
rcs=""
for i in 1 2; do rc=0; wait "${racer[$i]}" || rc=$?; rcs+="$rc "; done
if [ "$rcs" = "0 2 " ] || [ "$rcs" = "2 0 " ]; then
  loser=$([ "${rcs%% *}" = 2 ] && echo 1 || echo 2)
  grep -q -e "is in use by another job" -e "already holds a run" "$WORK/race$loser.log" \
    && pass "racing fresh starts: one ran, one was refused: $(grep '^mpiddp: error' "$WORK/race$loser.log")" \
    || fail "racing fresh starts: $(grep '^mpiddp: error' "$WORK/race$loser.log")"
else
  fail "racing fresh starts exited $rcs"
  for i in 1 2; do echo "--- racer $i:"; grep -v -e "^epoch " -e "^  " "$WORK/race$i.log" | tail -8; done >&2
fi
ls "$WORK/race/checkpoints" | grep -q "not-this-run" && fail "race: checkpoints renamed .not-this-run" \
  || [ "$(json_field "$WORK/race/summary.json" steps)" = 20 ] && pass "race: the winner's run is complete and its own" \
  || fail "race: summary $(cat "$WORK/race/summary.json" 2>/dev/null)"
# A .lock replaced by a FIFO while another job holds the directory (Python's flock
# holds it here, one process, so that killing it releases the lock): the refusal reads the
# holder's name without blocking on the FIFO.
mkdir -p "$WORK/fifolock" && mkfifo "$WORK/fifolock/.lock"
"$PYTHON" -c 'import fcntl, os, sys, time
fcntl.flock(os.open(sys.argv[1], os.O_RDONLY), fcntl.LOCK_EX); time.sleep(3600)' "$WORK/fifolock" > /dev/null 2>&1 &
fifo_holder=$!
at_exit 'kill "$fifo_holder" 2>/dev/null'
until ! flock -n "$WORK/fifolock" true; do kill -0 "$fifo_holder" || break; sleep 0.1; done
expect_error fifo-lock 2 "run.dir $WORK/fifolock is in use by another job (a job that has not recorded its name yet)" \
  "${T[@]}" --run.dir "$WORK/fifolock" --resume auto
kill "$fifo_holder" 2>/dev/null; wait "$fifo_holder" 2>/dev/null || true

# ---- 4. a metrics record that cannot be written (a full disk) ----
if [ "$(id -u)" = 0 ] && mkdir -p "$WORK/fs" && mount -t tmpfs -o size=4m tmpfs "$WORK/fs" 2>/dev/null; then
  at_exit 'umount "$WORK/fs"'
  OMPI_MCA_orte_tmpdir_base=$(own_session_base) \
    "$MPIEXEC" -n 2 "$MPIDDP" "${T[@]}" "${long[@]}" --checkpoint.every_steps 0 --checkpoint.every_epochs 0 \
    --run.dir "$WORK/fs/run" > "$WORK/full.log" 2>&1 &
  job=$!
  if wait_for_line "$job" "$WORK/full.log" "samples/s" "$RUN_TIMEOUT"; then
    dd if=/dev/zero of="$WORK/fs/filler" bs=1k count=8192 status=none 2>/dev/null || true
    end_job "$job" 300 || true
    # (Not anchored at the line's start: mpirun may forward a rank's stderr in the
    # middle of another rank's unfinished stdout line.)
    if [ "$JOB_RC" != 0 ] && [ "$JOB_RC" != 124 ] && [ "$(grep -c 'mpiddp: error' "$WORK/full.log")" = 1 ] \
       && grep -q "mpiddp: error: rank 0: $WORK/fs/run/metrics.jsonl: cannot append a record (No space left" \
          "$WORK/full.log"; then
      pass "full disk under metrics.jsonl: $(grep -o 'mpiddp: error.*' "$WORK/full.log")"
    else fail "full disk under metrics.jsonl: exit $JOB_RC"; grep -a "error" "$WORK/full.log" | tail -3 >&2; fi
  else kill_job "$job"; fi
else echo "note: no tmpfs here (needs root): the full-disk metrics case was not run"; fi
finish
