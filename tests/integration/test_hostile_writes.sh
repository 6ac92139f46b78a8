#!/usr/bin/env bash
# Hostile input: nothing already written is lost, nothing is silently mixed.
# A fresh start into a used run.dir, a refused start, damaged or edited checkpoint
# attributes, foreign files among the checkpoints, failed and repeated shard
# conversions, checkpoints of another model, ranks with different settings.
# Every refusal is one error line and exit 2, and leaves every file as it was.
source "$(dirname "$0")/lib.sh"
require_python_modules h5py numpy   # to edit checkpoints and shards

make_blobs_shards "$WORK/data" 400 1 2
# 400 samples, 2 ranks, batch 20: 10 steps per epoch.
write_ini "$WORK/run.ini" data.train="$WORK/data" model.hidden=16 train.batch_size=20 train.epochs=2 \
  train.log_every=5 checkpoint.every_steps=2 checkpoint.keep=0
T=(train "$WORK/run.ini")
train2() { run_ranks 2 "${T[@]}" "$@"; }

# set_attr FILE [GROUP/]NAME VALUE [FILE NAME VALUE...]: an int64 attribute (float64
# if VALUE has a dot), any number of them in one Python process.
set_attr() {
  "$PYTHON" - "$@" <<'PY'
import sys, h5py, numpy as np
args = sys.argv[1:]
assert args and len(args) % 3 == 0, args
for path, name, text in zip(args[0::3], args[1::3], args[2::3]):
    group, _, attr = name.rpartition("/")
    with h5py.File(path, "r+") as f:
        (f[group] if group else f).attrs[attr] = np.float64(text) if "." in text else np.int64(int(text))
PY
}

train2 --run.dir "$WORK/a" > "$WORK/a.log" 2>&1 || fail "reference run: exit $?"
ckpt() { printf '%s/ckpt-step-%09d.h5' "$1" "$2"; }

# ---- 1. a fresh start into a run.dir that holds a run ----
snapshot "$WORK/a" > "$WORK/a.snap"
expect_error fresh-into-used-dir 2 "run.dir $WORK/a already holds a run" "${T[@]}" --run.dir "$WORK/a"
grep -q -- "--resume auto, or choose another run.dir" "$WORK/fresh-into-used-dir.out" \
  && pass "the message says what to do" || fail "fresh-into-used-dir: no advice"
unchanged fresh-into-used-dir "$WORK/a" "$WORK/a.snap"
# Only metrics.jsonl (a run that failed before any checkpoint) is a run too.
mkdir -p "$WORK/only-metrics" && echo '{"type":"train"}' > "$WORK/only-metrics/metrics.jsonl"
expect_error fresh-into-metrics 2 "already holds a run (metrics.jsonl)" train "$WORK/run.ini" --run.dir "$WORK/only-metrics"
# --resume auto: a new or empty run.dir starts fresh; a requeue killed before its
# first checkpoint starts again; a finished run without checkpoints is not overwritten.
train2 --run.dir "$WORK/new" --resume auto > "$WORK/new.log" 2>&1 \
  && grep -q "no checkpoint in $WORK/new/checkpoints, starting from the beginning" "$WORK/new.log" \
  && pass "resume auto into a new run.dir starts fresh" || fail "resume auto into a new run.dir"
mkdir -p "$WORK/empty"
train2 --run.dir "$WORK/empty" --resume auto >/dev/null 2>&1 && [ -f "$WORK/empty/summary.json" ] \
  && pass "resume auto into an empty run.dir starts fresh" || fail "resume auto into an empty run.dir"
train2 --run.dir "$WORK/only-metrics" --resume auto >/dev/null 2>&1 && [ -f "$WORK/only-metrics/summary.json" ] \
  && pass "resume auto with metrics but no checkpoint (killed early) starts again" || fail "requeue before a checkpoint"
train2 --run.dir "$WORK/nockpt" --checkpoint.every_steps 0 --checkpoint.every_epochs 0 >/dev/null 2>&1 || fail "nockpt run"
snapshot "$WORK/nockpt" > "$WORK/nockpt.snap"
expect_error auto-over-finished 2 "holds a finished run (summary.json) and no checkpoint" \
  "${T[@]}" --run.dir "$WORK/nockpt" --resume auto
unchanged auto-over-finished "$WORK/nockpt" "$WORK/nockpt.snap"

# ---- 2. a refused start touches nothing ----
mkdir -p "$WORK/blocked" && cp "$WORK/a/metrics.jsonl" "$WORK/a/config.ini" "$WORK/blocked/"
echo "not a directory" > "$WORK/blocked/checkpoints"
snapshot "$WORK/blocked" > "$WORK/blocked.snap"
expect_error checkpoints-is-a-file 2 "run.dir $WORK/blocked: checkpoints exists and is not a directory" \
  "${T[@]}" --run.dir "$WORK/blocked" --resume auto
grep -q "starting from the beginning" "$WORK/checkpoints-is-a-file.out" && fail "it claimed to start" \
  || pass "no 'starting from the beginning' before the refusal"
unchanged checkpoints-is-a-file "$WORK/blocked" "$WORK/blocked.snap"
mkdir -p "$WORK/latestdir/checkpoints/latest"
expect_error latest-is-a-directory 2 "checkpoints/latest exists and is not a regular file" \
  "${T[@]}" --run.dir "$WORK/latestdir" --resume auto
mkdir -p "$WORK/metricsdir/metrics.jsonl"
expect_error metrics-is-a-directory 2 "metrics.jsonl exists and is not a regular file" \
  "${T[@]}" --run.dir "$WORK/metricsdir" --resume auto
echo file > "$WORK/runfile"
expect_error run-dir-is-a-file 2 "run.dir $WORK/runfile: exists and is not a directory" "${T[@]}" --run.dir "$WORK/runfile"

# ---- 3. checkpoint attributes are input ----
good=$(ckpt "$WORK/a/checkpoints" 14)   # epoch 1, step 4 of it
# NAME ATTRIBUTE VALUE: a copy of the good checkpoint with that attribute, refused
# with a line that names it. Every copy is made first, by one set_attr call.
bad_attributes=(
  negative-global-step global_step -5
  absurd-global-step global_step 4611686018427387904
  other-global-step global_step 12
  negative-step-in-epoch step_in_epoch -1
  absurd-step-in-epoch step_in_epoch 4611686018427387904
  negative-epoch epoch -1
  absurd-epoch epoch 4611686018427387904
  negative-micro-batches micro_batches -3
  other-micro-batches micro_batches 15
  negative-world-size world_size -2
  zero-dataset-size dataset_size 0
  zero-batch-size batch_size 0
  negative-accumulate accumulate -1
  flag-not-0-or-1 shuffle 7
  too-many-skipped skipped_steps 15
  negative-skipped skipped_steps -1
  optimizer-steps optimizer/step 4611686018427387904
  negative-window-loss log_window_loss -1.0
  window-samples log_window_samples 0.5
)
edits=()
for ((i = 0; i < ${#bad_attributes[@]}; i += 3)); do
  cp "$good" "$WORK/${bad_attributes[i]}.h5"
  edits+=("$WORK/${bad_attributes[i]}.h5" "${bad_attributes[i + 1]}" "${bad_attributes[i + 2]}")
done
set_attr "${edits[@]}"
for ((i = 0; i < ${#bad_attributes[@]}; i += 3)); do
  name=${bad_attributes[i]} attribute=${bad_attributes[i + 1]}
  expect_error "$name" 2 "$WORK/$name.h5: attribute '$attribute' is" "${T[@]}" --run.dir "$WORK/x" --resume "$WORK/$name.h5"
done
[ -e "$WORK/x" ] && fail "a refused resume created run.dir" || pass "no refused resume created its run.dir"
# A checkpoint under another step's name would be saved over or pruned as that step.
cp "$good" "$WORK/renamed" && mkdir -p "$WORK/renamed.d" && mv "$WORK/renamed" "$(ckpt "$WORK/renamed.d" 20)"
expect_error renamed-checkpoint 2 "attribute 'global_step' is 14, but the file is named for step 000000020" \
  "${T[@]}" --run.dir "$WORK/x" --resume "$(ckpt "$WORK/renamed.d" 20)"
# A sound checkpoint that this job's settings end before: stop, do not fall back.
expect_error epochs-lowered 2 "written at epoch 2, beyond train.epochs 1 of this job; raise train.epochs" \
  "${T[@]}" --run.dir "$WORK/a" --resume auto --train.epochs 1
# The issue's case: the newest checkpoint of a run says global step -5. Given by
# path it is refused; with auto it is skipped for the previous one; never is a
# good checkpoint of the run overwritten.
cp -r "$WORK/a" "$WORK/neg"
set_attr "$(ckpt "$WORK/neg/checkpoints" 20)" global_step -5
snapshot "$WORK/neg" > "$WORK/neg.snap"
expect_error negative-in-run-dir 2 "ckpt-step-000000020.h5: attribute 'global_step' is -5" \
  "${T[@]}" --run.dir "$WORK/neg" --resume "$(ckpt "$WORK/neg/checkpoints" 20)"
unchanged negative-in-run-dir "$WORK/neg" "$WORK/neg.snap"
sums_before=$(cd "$WORK/neg/checkpoints" && sha256sum ckpt-step-0000000{02,04,06,08,10,12,14,16,18}.h5)
train2 --run.dir "$WORK/neg" --resume auto > "$WORK/neg.log" 2>&1 || fail "resume auto past a bad newest: exit $?"
grep -q "warning: skipping .*ckpt-step-000000020.h5: attribute 'global_step' is -5" "$WORK/neg.log" \
  && grep -q "resuming from .*ckpt-step-000000018.h5" "$WORK/neg.log" \
  && pass "resume auto skips the bad newest checkpoint for the one before" || fail "auto with a bad newest"
[ "$(cd "$WORK/neg/checkpoints" && sha256sum ckpt-step-0000000{02,04,06,08,10,12,14,16,18}.h5)" = "$sums_before" ] \
  && pass "every good checkpoint of the run is untouched" || fail "a good checkpoint was rewritten"
same_parameters "$(ckpt "$WORK/a/checkpoints" 20)" "$(ckpt "$WORK/neg/checkpoints" 20)" \
  && pass "the run ends bit-identical to the uninterrupted one" || fail "result differs"

# ---- 4. retention deletes only this run's complete checkpoints ----
train2 --run.dir "$WORK/b" --train.seed 5 >/dev/null 2>&1 || fail "run b"
# --resume PATH into a run.dir of another run would cut its metrics back to PATH's step.
snapshot "$WORK/b" > "$WORK/b.snap"
expect_error resume-into-other-run 2 "run.dir $WORK/b holds another run than $good" \
  "${T[@]}" --run.dir "$WORK/b" --resume "$good" --train.seed 0
unchanged resume-into-other-run "$WORK/b" "$WORK/b.snap"
cp -r "$WORK/a" "$WORK/back" && cp "$good" "$WORK/step14.h5"
train2 --run.dir "$WORK/back" --resume "$WORK/step14.h5" > "$WORK/back.log" 2>&1 \
  && grep -q "resuming from $WORK/step14.h5" "$WORK/back.log" \
  && pass "--resume PATH with a copy of the run's own checkpoint goes back in that run" || fail "going back: exit $?"
train2 --run.dir "$WORK/keep" --checkpoint.keep 2 >/dev/null 2>&1 || fail "keep run"
foreign=$WORK/keep/checkpoints
echo "not HDF5" > "$(ckpt "$foreign" 3)"                       # older than the run's checkpoints
cp "$(ckpt "$WORK/b/checkpoints" 4)" "$(ckpt "$foreign" 4)"     # another run's, complete and valid
echo "not HDF5 either" > "$(ckpt "$foreign" 24)"               # where the resumed run will write
echo "someone's notes" > "$foreign/notes.tmp"
sums=$(cd "$foreign" && sha256sum ckpt-step-000000003.h5 ckpt-step-000000004.h5 ckpt-step-000000024.h5 notes.tmp)
train2 --run.dir "$WORK/keep" --checkpoint.keep 2 --train.epochs 4 --resume auto > "$WORK/keep.log" 2>&1 \
  || fail "resumed run among foreign files: exit $?"
grep -q "resuming from .*ckpt-step-000000020.h5" "$WORK/keep.log" && pass "resumed from the run's newest" \
  || fail "resume among foreign files"
[ "$(cd "$foreign" && sha256sum ckpt-step-000000003.h5 ckpt-step-000000004.h5 ckpt-step-000000024.h5.not-this-run notes.tmp)" \
  = "$(sed 's/ckpt-step-000000024.h5/&.not-this-run/' <<< "$sums")" ] \
  && pass "foreign files kept byte for byte (the one in the way moved aside)" || { fail "a foreign file was lost"; ls "$foreign" >&2; }
grep -q "warning: .*ckpt-step-000000024.h5 is not a checkpoint of this run; moved to" "$WORK/keep.log" \
  && pass "moving it aside is reported" || fail "no warning for the moved file"
own=$(cd "$foreign" && ls ckpt-step-*.h5 | grep -v -e 000000003 -e 000000004 | tr '\n' ' ')
[ "$own" = "ckpt-step-000000038.h5 ckpt-step-000000040.h5 " ] && pass "keep 2 kept the run's newest two: $own" \
  || fail "kept: $own"
[ -f "$foreign/$(cat "$foreign/latest")" ] && pass "latest names an existing file" || fail "latest dangles"

# Another run's checkpoint, sound and newer, among this run's: resume auto keeps to
# the run that `latest` names instead of continuing the other one here.
train2 --run.dir "$WORK/mine" --train.epochs 1 >/dev/null 2>&1 || fail "run mine"
cp "$(ckpt "$WORK/a/checkpoints" 20)" "$WORK/mine/checkpoints/"
train2 --run.dir "$WORK/mine" --resume auto > "$WORK/mine.log" 2>&1 || fail "resume mine: exit $?"
grep -q "warning: skipping .*ckpt-step-000000020.h5: not a checkpoint of the run that .*latest names" "$WORK/mine.log" \
  && grep -q "resuming from .*mine/checkpoints/ckpt-step-000000010.h5" "$WORK/mine.log" \
  && pass "resume auto passes over another run's newer checkpoint" || { fail "resume auto took another run's"; grep -i resum "$WORK/mine.log" >&2; }
[ -f "$WORK/mine/checkpoints/ckpt-step-000000020.h5.not-this-run" ] && pass "which is then kept aside, not overwritten" \
  || fail "the other run's checkpoint is gone"

# ---- 5 and 6. shard conversions ----
make_blobs_csv "$WORK/blobs.csv" 5000 3
sed '4500s/,[0-9]*$/,0.5/' "$WORK/blobs.csv" > "$WORK/badlabel.csv"
shard_fails() {  # NAME EXPECTED OUT_DIR shard-args...
  local name=$1 expected=$2 out=$3 rc=0; shift 3
  "$MPIDDP" shard --out "$out" "$@" > "$WORK/$name.out" 2>&1 || rc=$?
  [ "$rc" = 2 ] && grep -qF -- "$expected" "$WORK/$name.out" && pass "$name: $(cat "$WORK/$name.out")" \
    || { fail "$name: exit $rc"; cat "$WORK/$name.out" >&2; }
}
shard_fails bad-label-late "badlabel.csv:4500: class label 0.5" "$WORK/s1" --format csv --input "$WORK/badlabel.csv" --shards 2
[ ! -e "$WORK/s1" ] && pass "a failed conversion leaves no directory" || fail "left: $(ls -A "$WORK/s1")"
mkdir -p "$WORK/s2"
shard_fails bad-label-existing-dir "class label 0.5" "$WORK/s2" --format csv --input "$WORK/badlabel.csv" --shards 3
[ -d "$WORK/s2" ] && [ -z "$(ls -A "$WORK/s2")" ] && pass "and nothing in a directory it did not create" \
  || fail "left in s2: $(ls -A "$WORK/s2")"
"$PYTHON" - "$WORK" <<'PY' || fail "writing IDX files"
import gzip, random, struct, sys
w = sys.argv[1]
def idx(path, magic, dims, payload):
    with gzip.open(path, "wb") as f:
        f.write(struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in dims) + payload)
# Random pixels: they do not compress, so the size check at the header passes and the end of data is found late.
idx(f"{w}/img.gz", 0x803, (10000, 4, 4), random.Random(1).randbytes(5000 * 16))  # says 10000 images, holds 5000
idx(f"{w}/lbl.gz", 0x801, (10000,), bytes(10000))
idx(f"{w}/huge-img.gz", 0x803, (2000000000, 28, 28), bytes(784 * 100))
idx(f"{w}/huge-lbl.gz", 0x801, (2000000000,), bytes(100))
PY
shard_fails truncated-idx "img.gz: file is truncated" "$WORK/s3" --format idx --images "$WORK/img.gz" --labels "$WORK/lbl.gz"
[ ! -e "$WORK/s3" ] && pass "a truncated IDX file leaves nothing" || fail "left: $(ls -A "$WORK/s3")"
rc=0; "$MPIDDP" shard --format idx --images "$WORK/huge-img.gz" --labels "$WORK/huge-lbl.gz" --out "$WORK/s4" \
  > "$WORK/huge.out" 2>&1 || rc=$?
[ "$rc" != 0 ] && [ ! -e "$WORK/s4" ] && pass "huge IDX sizes: exit $rc, nothing left" \
  || fail "huge IDX: exit $rc, left $(ls -A "$WORK/s4" 2>/dev/null)"
# A second conversion into the same directory is refused before any input is read.
snapshot "$WORK/data" > "$WORK/data.snap"
shard_fails reshard-into-used "$WORK/data: output directory is not empty" "$WORK/data" \
  --format csv --input "$WORK/data.csv" --shards 1
unchanged reshard-into-used "$WORK/data" "$WORK/data.snap"
# Shards of different conversions in one directory (as an older mpiddp left them): refused.
mkdir -p "$WORK/mixed" && cp "$WORK/data"/*.h5 "$WORK/mixed/"
"$MPIDDP" shard --format csv --input "$WORK/data.csv" --out "$WORK/four" --shards 4 >/dev/null
cp "$WORK/four"/*.h5 "$WORK/mixed/"
expect_error mixed-conversions 2 "$WORK/mixed: " "${T[@]}" --run.dir "$WORK/y" --data.train "$WORK/mixed"
grep -q "shards of different conversions are mixed" "$WORK/mixed-conversions.out" && pass "says they are mixed" \
  || fail "mixed: message"
mkdir -p "$WORK/missing" && cp "$WORK/four"/shard-0000[013]-of-00004.h5 "$WORK/missing/"
expect_error missing-shard 2 "$WORK/missing: holds 3 shard file(s) but they say shard_count 4 (shard 2 missing)" \
  "${T[@]}" --run.dir "$WORK/y" --data.train "$WORK/missing"
mkdir -p "$WORK/twice" && cp "$WORK/data"/*.h5 "$WORK/twice/" && cp "$WORK/data/shard-00001-of-00002.h5" "$WORK/twice/copy.h5"
expect_error duplicate-shard 2 "are both shard 1 of 2" "${T[@]}" --run.dir "$WORK/y" --data.train "$WORK/twice"
mkdir -p "$WORK/shape" && cp "$WORK/data"/*.h5 "$WORK/shape/"
"$PYTHON" -c "import h5py,sys,numpy; h5py.File(sys.argv[1],'r+')['features'].attrs['sample_shape'] = numpy.array([2,4])" \
  "$WORK/shape/shard-00001-of-00002.h5"
expect_error sample-shape 2 "has sample_shape [2x4] but" "${T[@]}" --run.dir "$WORK/y" --data.train "$WORK/shape"
# A sample_shape that does not multiply out to the feature count (8) is refused, naming the shard.
mkdir -p "$WORK/shape9" && cp "$WORK/data"/*.h5 "$WORK/shape9/"
"$PYTHON" -c "import h5py,sys,numpy
for p in sys.argv[1:]: h5py.File(p,'r+')['features'].attrs['sample_shape'] = numpy.array([3,3])" "$WORK/shape9"/*.h5
expect_error sample-shape-product 2 "shard-00000-of-00002.h5: dataset 'features': attribute sample_shape [3x3] does not hold its 8 features" \
  "${T[@]}" --run.dir "$WORK/y" --data.train "$WORK/shape9"
cp "$WORK/data/shard-00000-of-00002.h5" "$WORK/rows.h5" && set_attr "$WORK/rows.h5" total_rows 402
expect_error rows-disagree 2 "rows.h5: shard 0 of 2 of 402 rows should hold rows 0 to 200, but holds 200" \
  "${T[@]}" --run.dir "$WORK/y" --data.train "$WORK/rows.h5"
run_ranks 2 train "$WORK/run.ini" --run.dir "$WORK/one" --data.train "$WORK/four/shard-00002-of-00004.h5" \
  --train.batch_size 10 > /dev/null 2>&1 && pass "one shard of a set, named as a file, still trains" || fail "single shard"

# ---- 7. arrays must match both ways ----
extra_array() {  # NAME DATASET EXPECTED
  cp "$good" "$WORK/$1.h5"
  "$PYTHON" -c "import h5py,sys,numpy; h5py.File(sys.argv[1],'r+')[sys.argv[2]] = numpy.zeros(3, numpy.float32)" \
    "$WORK/$1.h5" "$2"
  expect_error "$1" 2 "$WORK/$1.h5: '$3' is not" "${T[@]}" --run.dir "$WORK/x" --resume "$WORK/$1.h5"
}
extra_array extra-parameter params/layers.4.weight params/layers.4.weight
extra_array extra-optimizer-state optimizer/exp_avg/layers.0.weight optimizer/exp_avg
extra_array extra-object buffers/running_mean buffers
train2 --run.dir "$WORK/deep" --model.hidden 16,16 --train.epochs 1 >/dev/null 2>&1 || fail "deeper model"
expect_error deeper-model 2 "written for model.hidden = '16,16', this job has '16' (a checkpoint of another model)" \
  "${T[@]}" --run.dir "$WORK/x" --resume "$(ckpt "$WORK/deep/checkpoints" 10)"
cp "$good" "$WORK/fewer.h5" && "$PYTHON" -c "import h5py,sys; del h5py.File(sys.argv[1],'r+')['params/layers.2.bias']" "$WORK/fewer.h5"
expect_error missing-parameter 2 "$WORK/fewer.h5: no dataset 'params/layers.2.bias'" \
  "${T[@]}" --run.dir "$WORK/x" --resume "$WORK/fewer.h5"

# ---- 8. every rank runs the same settings (MPMD launches) ----
expect_error mpmd-lr 1 "rank 1: settings differ between ranks: optim.lr is '0.01' on rank 0 but '0.2' on rank 1" \
  train "$WORK/run.ini" --run.dir "$WORK/mpmd" : -n 1 "$MPIDDP" train "$WORK/run.ini" --run.dir "$WORK/mpmd" --optim.lr 0.2
expect_error mpmd-resume 1 "command-line.resume is '' on rank 0 but 'auto' on rank 1" \
  train "$WORK/run.ini" --run.dir "$WORK/mpmd" : -n 1 "$MPIDDP" train "$WORK/run.ini" --run.dir "$WORK/mpmd" --resume auto
sed 's/^hidden = 16$/hidden = 32/' "$WORK/run.ini" > "$WORK/other.ini"
expect_error mpmd-input-file 1 "model.hidden is '16' on rank 0 but '32' on rank 1" \
  train "$WORK/run.ini" --run.dir "$WORK/mpmd" : -n 1 "$MPIDDP" train "$WORK/other.ini" --run.dir "$WORK/mpmd"
[ -e "$WORK/mpmd" ] && fail "ranks with different settings wrote $WORK/mpmd" || pass "nothing written before the comparison"
# ---- 9. links planted in a run.dir are never written through ----
# A symlink at a temporary's name (config.ini.tmp, metrics.jsonl.tmp,
# summary.json.tmp, .lock.tmp) is replaced, its target
# untouched; a checkpoints/ that links to another run's is refused; a `latest`
# naming a file outside checkpoints/ is ignored, never followed.
mkdir -p "$WORK/links"
for name in config.ini.tmp metrics.jsonl.tmp summary.json.tmp .lock.tmp; do
  echo PRECIOUS > "$WORK/victim-$name"; ln -s "$WORK/victim-$name" "$WORK/links/$name"
done
train2 --run.dir "$WORK/links" > "$WORK/links.out" 2>&1 || fail "links: training exit $?"
kept=0
for name in config.ini.tmp metrics.jsonl.tmp summary.json.tmp .lock.tmp; do
  [ "$(cat "$WORK/victim-$name")" = PRECIOUS ] && kept=$((kept + 1)) || fail "links: $name's target was written"
done
[ "$kept" = 4 ] && [ ! -L "$WORK/links/summary.json" ] && [ "$(json_field "$WORK/links/summary.json" status)" = completed ] \
  && pass "symlinks at the temporaries' names: replaced, their 4 targets intact, the run completed"
# A directory at a temporary's name (or at .lock) would end the job at that write, summary.json's after
# all the training: refused at start, before anything is written.
for name in summary.json.tmp checkpoints/latest.tmp .lock; do
  tag=${name//[\/.]/-}
  mkdir -p "$WORK/dir$tag/$name" && touch "$WORK/dir$tag/config.ini"
  expect_input_error "directory-at$tag" 2 "run.dir $WORK/dir$tag: $name is a directory, where mpiddp writes a file" \
    "${T[@]}" --run.dir "$WORK/dir$tag" --resume auto
done
# A future checkpoint's names, as directories (one not empty, which removing stale temporaries cannot take).
for name in ckpt-step-000000999.h5.tmp ckpt-step-000000999.h5; do
  mkdir -p "$WORK/future-$name/checkpoints/$name/inside" && touch "$WORK/future-$name/config.ini"
  expect_input_error "directory-at-$name" 2 \
    "run.dir $WORK/future-$name: checkpoints/$name is a directory, where mpiddp writes a checkpoint" \
    "${T[@]}" --run.dir "$WORK/future-$name" --resume auto
done
mkdir -p "$WORK/linked"; ln -s "$WORK/links/checkpoints" "$WORK/linked/checkpoints"
before=$(ls "$WORK/links/checkpoints" | tr '\n' ' ')
expect_input_error linked-checkpoints 2 "run.dir $WORK/linked: checkpoints is a symbolic link" "${T[@]}" --run.dir "$WORK/linked"
[ "$(ls "$WORK/links/checkpoints" | tr '\n' ' ')" = "$before" ] && pass "the linked run's checkpoints untouched" \
  || fail "linked checkpoints: the other run's files changed"
train2 --run.dir "$WORK/elsewhere" --train.seed 7 > /dev/null 2>&1 || fail "links: the other run, exit $?"
cp -r "$WORK/links" "$WORK/outside"
echo "../../elsewhere/checkpoints/$(basename "$(ckpt "$WORK/elsewhere/checkpoints" 20)")" > "$WORK/outside/checkpoints/latest"
train2 --run.dir "$WORK/outside" --resume auto --train.epochs 3 > "$WORK/outside.out" 2>&1 || fail "outside latest: exit $?"
grep -q "latest names '../../elsewhere/.*', not a complete checkpoint there; ignoring it" "$WORK/outside.out" \
  && grep -q "^resuming from $WORK/outside/checkpoints/ckpt-step-000000020.h5" "$WORK/outside.out" \
  && ! ls "$WORK/outside/checkpoints" | grep -q not-this-run \
  && pass "a latest naming a file outside checkpoints/ is ignored: the run resumed from its own step 20" \
  || { fail "outside latest"; grep -a "warning\|resum\|error" "$WORK/outside.out" >&2; }
# A metrics.jsonl that is a link (a resume would copy the target's lines) is refused;
# a link named like a checkpoint is no checkpoint of the run.
cp -r "$WORK/links" "$WORK/linkmetrics"; rm "$WORK/linkmetrics/metrics.jsonl"
ln -s "$WORK/victim-metrics.jsonl.tmp" "$WORK/linkmetrics/metrics.jsonl"
expect_input_error metrics-link 2 "metrics.jsonl exists and is not a regular file (a symbolic link)" \
  "${T[@]}" --run.dir "$WORK/linkmetrics" --resume auto --train.epochs 3
cp -r "$WORK/links" "$WORK/linkckpt"
ln -s "$(ckpt "$WORK/elsewhere/checkpoints" 20)" "$(ckpt "$WORK/linkckpt/checkpoints" 99)"
train2 --run.dir "$WORK/linkckpt" --resume auto --train.epochs 3 > "$WORK/linkckpt.out" 2>&1 || fail "linkckpt: exit $?"
grep -q "^resuming from $WORK/linkckpt/checkpoints/ckpt-step-000000020.h5" "$WORK/linkckpt.out" \
  && pass "a symlink named ckpt-step-000000099.h5 is passed over: resumed from the run's own step 20" \
  || { fail "linkckpt"; grep -a "resum\|error\|warning" "$WORK/linkckpt.out" >&2; }
finish
