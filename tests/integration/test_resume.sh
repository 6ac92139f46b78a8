#!/usr/bin/env bash
# Bit-exact resume (mid-epoch, with dropout and AdamW), another data set or seed
# refused, and every kind of bad checkpoint refused with one clear line. (Another
# world size or batch is an elastic resume: test_elastic_resume.)
source "$(dirname "$0")/lib.sh"
require_python_modules h5py   # to write a checkpoint of a future format version

make_blobs_shards "$WORK/train" 1200 1 2
write_ini "$WORK/run.ini" data.train="$WORK/train" data.test="$WORK/train" model.hidden=32,16 model.dropout=0.2 \
  train.batch_size=16 train.epochs=3 train.seed=11 train.log_every=1 \
  optim.name=adamw optim.lr=0.003 optim.schedule=cosine optim.warmup_steps=5 checkpoint.every_epochs=1
train_losses() { grep '"type":"train"' "$1/metrics.jsonl" | sed 's/"samples_per_s":[^,}]*//'; }

run_ranks 2 train "$WORK/run.ini" --run.dir "$WORK/straight" > "$WORK/straight.log" 2>&1 || fail "straight run"

# Stop in the middle of epoch 2 (steps per epoch: 600 / 16 = 38): SIGUSR1 on rank 1
# at step 50, agreed stop, checkpoint, exit 75; then resume.
rc=0; run_ranks 2 train "$WORK/run.ini" --run.dir "$WORK/split" --debug.fail_rank 1 --debug.fail_step 50 \
  --debug.fail_mode signal > "$WORK/split1.log" 2>&1 || rc=$?
[ "$rc" = 75 ] && pass "signal: exit code 75" || fail "signal: exit code $rc"
[ "$(latest_step "$WORK/split/checkpoints")" = 51 ] && pass "stopped after step 51 (mid-epoch 2)" \
  || fail "latest after the stop: step $(latest_step "$WORK/split/checkpoints")"
[ "$(json_field "$WORK/split/summary.json" status)" = preempted ] && pass "summary status preempted" || fail "status"
run_ranks 2 train "$WORK/run.ini" --run.dir "$WORK/split" --resume auto > "$WORK/split2.log" 2>&1 || fail "resume"
grep -q "resuming from .*ckpt-step-000000051.h5: epoch 2, step 13 of it, global step 51" "$WORK/split2.log" \
  && pass "resumed mid-epoch" || { fail "resume message"; grep resum "$WORK/split2.log"; }
same_parameters "$(latest_checkpoint "$WORK/straight")" "$(latest_checkpoint "$WORK/split")" \
  && pass "final parameters and optimizer state byte-identical" || fail "resumed run differs"
if diff <(train_losses "$WORK/straight") <(train_losses "$WORK/split") >/dev/null; then
  pass "per-step losses identical ($(train_losses "$WORK/straight" | wc -l) records)"
else fail "per-step losses differ"; diff <(train_losses "$WORK/straight") <(train_losses "$WORK/split") | head -5 || true; fi
[ "$(grep -c '"type":"eval"' "$WORK/split/metrics.jsonl")" = 3 ] && pass "one eval record per epoch" || fail "eval records"

# Keep-last-K: 3 epochs + stop -> no more than 3 ckpt files.
[ "$(count_checkpoints "$WORK/split/checkpoints")" -le 3 ] && pass "checkpoint.keep = 3 prunes" || fail "pruning"
run_ranks 2 train "$WORK/run.ini" --run.dir "$WORK/keepers" --checkpoint.keep 1 --checkpoint.keep_every_epochs 2 \
  >/dev/null 2>&1 || fail "keepers run"
[ "$(count_checkpoints "$WORK/keepers/checkpoints")" = 1 ] && [ -f "$WORK/keepers/checkpoints/keep-epoch-0002.h5" ] \
  && pass "keep 1 plus the epoch-2 keeper" || fail "keepers: $(ls "$WORK/keepers/checkpoints")"
run_ranks 2 train "$WORK/run.ini" --run.dir "$WORK/steps" --checkpoint.every_epochs 0 --checkpoint.every_steps 20 \
  --checkpoint.keep 0 --train.epochs 1 >/dev/null 2>&1 || fail "every_steps run"
[ "$(count_checkpoints "$WORK/steps/checkpoints")" = 2 ] && pass "every_steps 20: steps 20 and 38 (final)" \
  || fail "every_steps: $(ls "$WORK/steps/checkpoints")"

# Wall-clock checkpoints: rank 0's clock decides, every rank follows (0.1 s here).
# The saves are counted from the log (keep 2 holds the disk to two files, however slow the machine and so
# however many saves the run makes).
run_ranks 2 train "$WORK/run.ini" --run.dir "$WORK/timed" --checkpoint.every_epochs 0 --checkpoint.every_minutes 0.0017 \
  --checkpoint.keep 2 --model.hidden 512,512 --train.log_every 100 --train.epochs 20 > "$WORK/timed.log" 2>&1 || fail "timed run"
timed=$(grep -c '^checkpoint ' "$WORK/timed.log" || true)
kept=$(count_checkpoints "$WORK/timed/checkpoints")
[ "$kept" = 2 ] && pass "keep 2: 2 of $timed checkpoints kept" || fail "keep 2: $kept of $timed checkpoints kept"
# How many 0.1 s intervals the run spans depends on the machine, and the clock
# starts again after each save, however long the disk took: at least 3 files (the
# final one included) once it trained for 0.75 s besides the saves' own time (each
# save's line gives it), at least 2 in any case.
train_s=$(json_field "$WORK/timed/summary.json" train_s)
need=$("$PYTHON" - "$train_s" "$WORK/timed.log" <<'PY'
import re, sys
saving = sum(float(s) for s in re.findall(r"^checkpoint .*, ([0-9.]+) s\)$", open(sys.argv[2]).read(), re.M))
print(max(2, min(3, int((float(sys.argv[1]) - saving) / 0.25))))
PY
)
[ "$timed" -ge "$need" ] && pass "every_minutes: $timed checkpoints in a ${train_s} s run (at least $need)" \
  || fail "every_minutes: $timed checkpoints in a ${train_s} s run (at least $need)"

# Progress records that straddle the stop (log_every 7, stop after step 51) match too.
run_ranks 2 train "$WORK/run.ini" --run.dir "$WORK/straight7" --train.log_every 7 --train.epochs 2 >/dev/null 2>&1 \
  || fail "straight log_every 7"
rc=0; run_ranks 2 train "$WORK/run.ini" --run.dir "$WORK/split7" --train.log_every 7 --train.epochs 2 \
  --debug.fail_rank 0 --debug.fail_step 50 --debug.fail_mode signal >/dev/null 2>&1 || rc=$?
run_ranks 2 train "$WORK/run.ini" --run.dir "$WORK/split7" --train.log_every 7 --train.epochs 2 --resume auto \
  >/dev/null 2>&1 || fail "resume log_every 7"
[ "$rc" = 75 ] && diff <(train_losses "$WORK/straight7") <(train_losses "$WORK/split7") >/dev/null \
  && pass "progress records across a mid-window stop identical (log_every 7)" || fail "log_every 7 records differ"

# What fixes every epoch's order must not change: seed, data.
expect_error seed-change 2 "written with train.seed 11, this job has 12" \
  train "$WORK/run.ini" --run.dir "$WORK/split" --resume auto --train.seed 12
make_blobs_shards "$WORK/more" 1300 1 2
expect_error data-change 2 "written with training set size 1200, this job has 1300" \
  train "$WORK/run.ini" --run.dir "$WORK/split" --resume auto --data.train "$WORK/more"
# Format 3 checkpoints (sample-order settings only in the stored input file) still resume, bit-exactly.
mkdir -p "$WORK/format3/checkpoints"
cp "$WORK/straight/checkpoints/ckpt-step-000000038.h5" "$WORK/format3/checkpoints/"
/usr/bin/python3 - "$WORK/format3/checkpoints/ckpt-step-000000038.h5" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    for key in ("batch_size", "accumulate", "shuffle", "drop_last"):
        del f.attrs[key]
    f.attrs["format_version"] = 3
PY
run_ranks 2 train "$WORK/run.ini" --run.dir "$WORK/format3" --resume auto > "$WORK/format3.log" 2>&1 \
  || fail "resume from format 3: exit $?"
same_parameters "$(latest_checkpoint "$WORK/straight")" "$(latest_checkpoint "$WORK/format3")" \
  && pass "a format 3 checkpoint resumes bit-exactly" || fail "format 3 resume differs"

# Nothing to resume from: start fresh.
run_ranks 2 train "$WORK/run.ini" --run.dir "$WORK/fresh" --resume auto --train.epochs 1 > "$WORK/fresh.log" 2>&1 \
  && grep -q "no checkpoint in $WORK/fresh/checkpoints, starting from the beginning" "$WORK/fresh.log" \
  && pass "resume auto without checkpoints starts fresh" || fail "fresh start"

# Bad checkpoints.
good=$(latest_checkpoint "$WORK/straight")
cp "$good" "$WORK/truncated.h5" && truncate -s 2000 "$WORK/truncated.h5"
expect_error truncated-checkpoint 2 "$WORK/truncated.h5: not a readable HDF5 checkpoint" \
  train "$WORK/run.ini" --run.dir "$WORK/x" --resume "$WORK/truncated.h5"
garbage_bytes 100000 101 > "$WORK/garbage.h5"
expect_error corrupt-checkpoint 2 "$WORK/garbage.h5: not a readable HDF5 checkpoint" \
  train "$WORK/run.ini" --run.dir "$WORK/x" --resume "$WORK/garbage.h5"
expect_error other-model 2 "written for model.hidden = '32,16', this job has '64,16' (a checkpoint of another model)" \
  train "$WORK/run.ini" --run.dir "$WORK/x" --resume "$good" --model.hidden 64,16
expect_error other-optimizer 2 "optimizer state is adamw but optim.name is sgd" \
  train "$WORK/run.ini" --run.dir "$WORK/x" --resume "$good" --optim.name sgd
cp "$good" "$WORK/future.h5"
"$PYTHON" -c "import h5py,sys; h5py.File(sys.argv[1],'r+').attrs['format_version'] = 99" "$WORK/future.h5"
expect_error format-version 2 "$WORK/future.h5: checkpoint format version 99 is not supported" \
  train "$WORK/run.ini" --run.dir "$WORK/x" --resume "$WORK/future.h5"
expect_error missing-checkpoint 2 "$WORK/none.h5: cannot read checkpoint" \
  train "$WORK/run.ini" --run.dir "$WORK/x" --resume "$WORK/none.h5"

# resume auto skips a damaged newest checkpoint and takes the one before.
mkdir -p "$WORK/damaged" && cp -r "$WORK/straight/checkpoints" "$WORK/damaged/"
newest=$(latest_checkpoint "$WORK/damaged")
truncate -s 1000 "$newest"
run_ranks 2 train "$WORK/run.ini" --run.dir "$WORK/damaged" --resume auto > "$WORK/damaged.log" 2>&1 \
  && grep -q "warning: skipping $newest" "$WORK/damaged.log" && grep -q "resuming from" "$WORK/damaged.log" \
  && pass "damaged newest checkpoint skipped" || fail "damaged fallback"
same_parameters "$good" "$(latest_checkpoint "$WORK/damaged")" && pass "and the result is still bit-exact" \
  || fail "fallback result differs"
# ---- the CPU kernels a run trained with are kept by a resume (train.cpu_kernels) ----
# A convolution net, 6 steps with OpenBLAS (im2col) chosen explicitly; resumed at
# step 3 with auto, which would pick oneDNN where the build links it: the
# checkpoint names openblas, so the resume takes it and ends bit-identical.
make_image_shards "$WORK/images" 192 3 2
kernels_run=(train /dev/null --data.train "$WORK/images" --model.input_shape 1,8,8 --train.batch_size 16
  --model.layers "conv2d(4,3,padding=1) batchnorm2d relu maxpool2d(2) flatten linear" --train.max_steps 6
  --train.eval false --checkpoint.every_epochs 0 --checkpoint.every_steps 3 --checkpoint.keep 5)
run_ranks 2 "${kernels_run[@]}" --train.cpu_kernels openblas --run.dir "$WORK/k-straight" > "$WORK/k1.log" 2>&1 \
  || fail "openblas run exited $?"
"$PYTHON" -c "import h5py, sys; v = h5py.File(sys.argv[1], 'r').attrs['cpu_kernels']
sys.exit((v.decode() if isinstance(v, bytes) else v) != 'openblas')" "$(latest_checkpoint "$WORK/k-straight")" \
  && pass "the checkpoint names the kernels it was trained with (openblas)" || fail "no cpu_kernels attribute"
mkdir -p "$WORK/k-split/checkpoints"
cp "$WORK/k-straight/checkpoints/ckpt-step-000000003.h5" "$WORK/k-split/checkpoints/"
run_ranks 2 "${kernels_run[@]}" --run.dir "$WORK/k-split" --resume "$WORK/k-split/checkpoints/ckpt-step-000000003.h5" \
  > "$WORK/k2.log" 2>&1 || fail "auto resume exited $?"
grep -q "CPU kernels: OpenBLAS" "$WORK/k2.log" && ! grep -q "note: this run trained" "$WORK/k2.log" \
  && pass "a resume with auto runs the run's own kernels, without a note" || fail "auto resume: $(grep -i kernels "$WORK/k2.log")"
same_parameters "$(latest_checkpoint "$WORK/k-straight")" "$(latest_checkpoint "$WORK/k-split")" \
  && pass "and ends bit-identical to the uninterrupted run" || fail "auto resume differs"
if grep -q libdnnl <<< "$(ldd "$MPIDDP")"; then
  rm -rf "$WORK/k-other" && mkdir -p "$WORK/k-other/checkpoints"
  cp "$WORK/k-straight/checkpoints/ckpt-step-000000003.h5" "$WORK/k-other/checkpoints/"
  run_ranks 2 "${kernels_run[@]}" --run.dir "$WORK/k-other" --train.cpu_kernels onednn \
    --resume "$WORK/k-other/checkpoints/ckpt-step-000000003.h5" > "$WORK/k3.log" 2>&1 || fail "onednn resume exited $?"
  grep -q "^note: this run trained with CPU kernels openblas and continues with onednn (train.cpu_kernels): .*differ in rounding" \
    "$WORK/k3.log" && pass "an explicit other choice is taken, with a note" || fail "no note: $(grep -i kernels "$WORK/k3.log")"
fi
# train.cpu_kernels = tune: each Linear and Conv2d timed on both libraries, the
# choices listed, kept per layer in the checkpoint and taken again (not re-timed)
# by a resume, which ends bit-identical. Which library wins is the machine's
# business; the test checks the mechanism, whatever was chosen.
if grep -q libdnnl <<< "$(ldd "$MPIDDP")"; then
  tune_run=(train /dev/null --data.train "$WORK/images" --model.input_shape 1,8,8 --train.batch_size 16
    --model.layers "conv2d(4,3,padding=1) batchnorm2d relu residual(conv2d(4,3,padding=1) batchnorm2d relu) flatten linear(6) relu linear"
    --train.max_steps 6 --train.eval false --checkpoint.every_epochs 0 --checkpoint.every_steps 3 --checkpoint.keep 5
    --train.cpu_kernels tune)
  run_ranks 2 "${tune_run[@]}" --run.dir "$WORK/t-straight" > "$WORK/t1.log" 2>&1 || fail "tune run exited $?"
  for layer in "layers.0 *Conv2d" "layers.3.body.0 *Conv2d" "layers.5 *Linear" "layers.7 *Linear"; do
    grep -Eq "^  $layer +(onednn|openblas|own|winograd|winograd_all) +\([0-9.]+ / [0-9.]+( / own [0-9.]+)?( / winograd [0-9.]+)?( / winograd_all [0-9.]+)?\)$" \
      "$WORK/t1.log" \
      || fail "tune banner lacks $layer: $(sed -n '/timed per layer/,/^[^ ]/p' "$WORK/t1.log")"
  done
  [ "$(grep -Ec '^  layers\.[0-9a-z.]+ +[A-Za-z0-9]+ +(onednn|openblas|own|winograd|winograd_all) +\(' "$WORK/t1.log")" = 4 ] && pass "tune times each Linear and Conv2d, nested ones too, and lists them" \
    || fail "tune banner: $(grep '^  layers' "$WORK/t1.log")"
  "$PYTHON" - "$(latest_checkpoint "$WORK/t-straight")" "$WORK/t1.log" <<'PY' \
    && pass "the checkpoint keeps the choice of each timed layer, as the banner printed it" || fail "tuned cpu_kernels attribute"
import h5py, re, sys
v = h5py.File(sys.argv[1], "r").attrs["cpu_kernels"]
v = v.decode() if isinstance(v, bytes) else v
printed = dict(re.findall(r"^  (layers\.[\w.]+) +\w+ +(onednn|openblas|own|winograd|winograd_all) ", open(sys.argv[2]).read(), re.M))
parts = v.split(";")
assert parts[0] == "onednn" and dict(p.split("=") for p in parts[1:]) == printed, (v, printed)
PY
  mkdir -p "$WORK/t-split/checkpoints"
  cp "$WORK/t-straight/checkpoints/ckpt-step-000000003.h5" "$WORK/t-split/checkpoints/"
  run_ranks 2 "${tune_run[@]}" --run.dir "$WORK/t-split" --resume "$WORK/t-split/checkpoints/ckpt-step-000000003.h5" \
    > "$WORK/t2.log" 2>&1 || fail "tuned resume exited $?"
  ! grep -q "timed per layer" "$WORK/t2.log" && ! grep -q "^note: this run trained" "$WORK/t2.log" \
    && same_parameters "$(latest_checkpoint "$WORK/t-straight")" "$(latest_checkpoint "$WORK/t-split")" \
    && pass "a resume takes the tuned choices without timing again and ends bit-identical" \
    || fail "tuned resume: $(grep -i kernels "$WORK/t2.log")"
  cp "$WORK/t-straight/checkpoints/ckpt-step-000000003.h5" "$WORK/t-bn.h5"
  "$PYTHON" -c "import h5py, numpy, sys; f = h5py.File(sys.argv[1], 'r+'); f.attrs['cpu_kernels'] = numpy.bytes_('onednn;layers.1=openblas')" "$WORK/t-bn.h5"
  expect_error kernels-not-products 2 "$WORK/t-bn.h5: CPU kernel choice for layers.1, a BatchNorm2d without matrix products" \
    "${tune_run[@]}" --run.dir "$WORK/t-bn" --resume "$WORK/t-bn.h5"
  "$PYTHON" -c "import h5py, numpy, sys; f = h5py.File(sys.argv[1], 'r+'); f.attrs['cpu_kernels'] = numpy.bytes_('onednn;layers.9=openblas')" "$WORK/t-bn.h5"
  expect_error kernels-no-layer 2 "$WORK/t-bn.h5: CPU kernel choice for layers.9, a layer this model does not have" \
    "${tune_run[@]}" --run.dir "$WORK/t-bn" --resume "$WORK/t-bn.h5"
fi
# kernels_of CKPT: prints its cpu_kernels attribute (non-zero if it has none).
kernels_of() {
  "$PYTHON" -c "import h5py, sys; v = h5py.File(sys.argv[1], 'r').attrs['cpu_kernels']
print(v.decode() if isinstance(v, bytes) else v)" "$1"
}
# kernels_kept TAG LAYERS RUN...: the run RUN... in $WORK/TAG-straight (6 steps, a
# checkpoint every 3) names its layers' kernels LAYERS after the process's library
# in its checkpoint, and a resume with auto from step 3 takes them (no note on
# rounding) and ends bit-identical.
kernels_kept() {
  local tag=$1 layers=$2; shift 2
  local kernels
  kernels=$(kernels_of "$(latest_checkpoint "$WORK/$tag-straight")") && [ "${kernels#*;}" = "$layers" ] \
    && [ "$kernels" != "$layers" ] && pass "$tag: the checkpoint names them ($layers)" \
    || fail "$tag: cpu_kernels attribute '$kernels', not $layers"
  mkdir -p "$WORK/$tag-split/checkpoints"
  cp "$WORK/$tag-straight/checkpoints/ckpt-step-000000003.h5" "$WORK/$tag-split/checkpoints/"
  run_ranks 2 "$@" --run.dir "$WORK/$tag-split" --resume "$WORK/$tag-split/checkpoints/ckpt-step-000000003.h5" \
    > "$WORK/$tag-resume.log" 2>&1 || fail "$tag: resume exited $?"
  ! grep -q "note: this run trained" "$WORK/$tag-resume.log" \
    && same_parameters "$(latest_checkpoint "$WORK/$tag-straight")" "$(latest_checkpoint "$WORK/$tag-split")" \
    && pass "$tag: a resume with auto takes them and ends bit-identical" \
    || fail "$tag: resume: $(grep -i kernels "$WORK/$tag-resume.log")"
}
# mpiddp's own kernels (x86-64 with AVX2 and FMA): auto gives them to the
# 1-channel convolution where a rank runs one thread; the checkpoint names them
# per layer, the banner lists them, and a resume with auto takes them and ends
# bit-identical.
if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
  kernels_run+=(--train.threads 1)
  run_ranks 2 "${kernels_run[@]}" --run.dir "$WORK/o-straight" > "$WORK/o1.log" 2>&1 || fail "auto run exited $?"
  grep -q "^CPU kernels of mpiddp's own (AVX[-0-9A-Z+]*): layers.0$" "$WORK/o1.log" \
    && pass "auto runs the 1-channel convolution on mpiddp's own kernels, as the banner says" \
    || fail "own kernels banner: $(grep -i kernels "$WORK/o1.log")"
  kernels_kept o "layers.0=own" "${kernels_run[@]}"
  cp "$WORK/o-straight/checkpoints/ckpt-step-000000003.h5" "$WORK/o-linear.h5"
  "$PYTHON" -c "import h5py, numpy, sys; f = h5py.File(sys.argv[1], 'r+'); a = f.attrs['cpu_kernels']; a = a.decode() if isinstance(a, bytes) else a; f.attrs['cpu_kernels'] = numpy.bytes_(a.split(';')[0] + ';layers.5=own')" "$WORK/o-linear.h5"
  expect_error kernels-own-linear 2 "$WORK/o-linear.h5: CPU kernel choice own for layers.5, a Linear for which mpiddp has no kernels of its own" \
    "${kernels_run[@]}" --run.dir "$WORK/o-linear" --resume "$WORK/o-linear.h5"
fi
# The kernel-choice runs below: 6 steps of 16 samples, one thread, checkpoints at steps 3 and 6.
six_steps=(--train.batch_size 16 --train.max_steps 6 --train.threads 1 --train.eval false --checkpoint.every_epochs 0
  --checkpoint.every_steps 3 --checkpoint.keep 5)
# oneDNN's Winograd convolutions (CPUs with AVX-512): auto gives them to a 3x3
# convolution with 4 input channels (the 8x8 images read as 4x4x4); the banner lists
# them, the checkpoint names them per layer, a resume with auto takes them and ends
# bit-identical, and onednn's run (the direct convolutions) differs in bits. Where a
# rank's CPU lacks them, auto runs the direct convolutions and winograd is refused.
# names_no_winograd CKPT: its cpu_kernels attribute names no Winograd layer.
names_no_winograd() { local kernels; kernels=$(kernels_of "$1") && [[ $kernels != *winograd* ]]; }
if grep -q libdnnl <<< "$(ldd "$MPIDDP")" && grep -qw avx512bw /proc/cpuinfo && grep -qw avx512vl /proc/cpuinfo \
  && grep -qw avx512dq /proc/cpuinfo; then
  wino_run=(train /dev/null --data.train "$WORK/images" --model.input_shape 4,4,4
    --model.layers "conv2d(8,3,padding=1) batchnorm2d relu flatten linear" "${six_steps[@]}")
  run_ranks 2 "${wino_run[@]}" --run.dir "$WORK/w-straight" > "$WORK/w1.log" 2>&1 || fail "auto run exited $?"
  grep -q "^oneDNN's Winograd convolutions (forward and input gradient): layers.0$" "$WORK/w1.log" \
    && pass "auto runs the 4-channel 3x3 convolution on oneDNN's Winograd kernels, as the banner says" \
    || fail "winograd banner: $(grep -i -e kernels -e winograd "$WORK/w1.log")"
  kernels_kept w "layers.0=winograd" "${wino_run[@]}"
  # train.cpu_kernels = winograd chooses alike, to the bit.
  run_ranks 2 "${wino_run[@]}" --train.cpu_kernels winograd --run.dir "$WORK/w-asked" > "$WORK/w2.log" 2>&1 \
    || fail "winograd run exited $?"
  same_parameters "$(latest_checkpoint "$WORK/w-straight")" "$(latest_checkpoint "$WORK/w-asked")" \
    && pass "train.cpu_kernels = winograd gives auto's bits here" || fail "winograd and auto differ"
  # The same run with onednn's direct convolutions differs in rounding only.
  run_ranks 2 "${wino_run[@]}" --train.cpu_kernels onednn --run.dir "$WORK/w-direct" > "$WORK/w3.log" 2>&1 \
    || fail "direct run exited $?"
  direct=$(latest_checkpoint "$WORK/w-direct")
  ! grep -qi "winograd convolutions" "$WORK/w3.log" && [ -f "$direct" ] \
    && ! same_parameters "$(latest_checkpoint "$WORK/w-straight")" "$direct" \
    && pass "onednn keeps the direct convolutions, other bits (the choice is real)" \
    || fail "onednn: Winograd in its banner, or the same bits as Winograd's"
  # Winograd's weight gradient: auto gives it (winograd_all) to a convolution of 48
  # channels in and out on 4x4 planes, and winograd (direct weight gradient) to the
  # 4-channel one; the banner lists each, the checkpoint names each, a resume takes
  # them bit-exact. train.cpu_kernels = winograd keeps every weight gradient direct
  # (other bits), and its checkpoints, like those written before winograd_all
  # existed, resume under auto with their direct weight gradients, bit-exact.
  wide_run=(train /dev/null --data.train "$WORK/images" --model.input_shape 4,4,4
    --model.layers "conv2d(48,3,padding=1) relu conv2d(48,3,padding=1) batchnorm2d relu flatten linear" "${six_steps[@]}")
  run_ranks 2 "${wide_run[@]}" --run.dir "$WORK/wa-straight" > "$WORK/wa1.log" 2>&1 || fail "auto run exited $?"
  grep -q "^oneDNN's Winograd convolutions (forward and input gradient): layers.0$" "$WORK/wa1.log" \
    && grep -q "^oneDNN's Winograd convolutions (forward, input and weight gradients): layers.2$" "$WORK/wa1.log" \
    && pass "auto runs the 48-channel convolution on 4x4 planes on Winograd's weight gradient too, as the banner says" \
    || fail "winograd_all banner: $(grep -i -e kernels -e winograd "$WORK/wa1.log")"
  kernels_kept wa "layers.0=winograd;layers.2=winograd_all" "${wide_run[@]}"
  run_ranks 2 "${wide_run[@]}" --train.cpu_kernels winograd --run.dir "$WORK/wd-straight" > "$WORK/wd1.log" 2>&1 \
    || fail "winograd run exited $?"
  ! grep -q "weight gradients)" "$WORK/wd1.log" \
    && ! same_parameters "$(latest_checkpoint "$WORK/wa-straight")" "$(latest_checkpoint "$WORK/wd-straight")" \
    && pass "train.cpu_kernels = winograd keeps the weight gradients direct (other bits than auto's)" \
    || fail "winograd: Winograd's weight gradient in its banner, or auto's bits"
  kernels_kept wd "layers.0=winograd;layers.2=winograd" "${wide_run[@]}"
  # auto where rank 1's CPU lacks AVX-512 (oneDNN held to AVX2 there): the direct
  # convolutions on both ranks, no refusal.
  OMPI_MCA_orte_tmpdir_base=$(own_session_base) \
    timeout "$RUN_TIMEOUT" "$MPIEXEC" -n 1 "$MPIDDP" "${wino_run[@]}" --run.dir "$WORK/w-auto-mixed" \
    : -n 1 env ONEDNN_MAX_CPU_ISA=AVX2 "$MPIDDP" "${wino_run[@]}" --run.dir "$WORK/w-auto-mixed" \
    > "$WORK/w-auto-mixed.log" 2>&1 && ! grep -qi "winograd convolutions" "$WORK/w-auto-mixed.log" \
    && names_no_winograd "$(latest_checkpoint "$WORK/w-auto-mixed")" \
    && pass "auto in a job where rank 1's CPU lacks AVX-512 runs the direct convolutions everywhere" \
    || fail "auto, mixed ISA: $(grep -i -e error -e winograd "$WORK/w-auto-mixed.log")"
  # A resume of the Winograd run on such a job (a requeue onto other nodes): every
  # rank goes on direct, and rank 0 says that the rounding differs.
  mkdir -p "$WORK/w-requeued/checkpoints"
  cp "$WORK/w-straight/checkpoints/ckpt-step-000000003.h5" "$WORK/w-requeued/checkpoints/"
  resume_from=(--run.dir "$WORK/w-requeued" --resume auto)
  OMPI_MCA_orte_tmpdir_base=$(own_session_base) \
    timeout "$RUN_TIMEOUT" "$MPIEXEC" -n 1 "$MPIDDP" "${wino_run[@]}" "${resume_from[@]}" \
    : -n 1 env ONEDNN_MAX_CPU_ISA=AVX2 "$MPIDDP" "${wino_run[@]}" "${resume_from[@]}" \
    > "$WORK/w-requeued.log" 2>&1 && ! grep -qi "winograd convolutions (forward" "$WORK/w-requeued.log" \
    && grep -q "^note: this run trained with CPU kernels onednn;layers.0=winograd and continues with onednn (.*a rank's CPU cannot run" "$WORK/w-requeued.log" \
    && names_no_winograd "$(latest_checkpoint "$WORK/w-requeued")" \
    && pass "a Winograd run resumed where rank 1's CPU lacks AVX-512 goes on direct on every rank, with the note" \
    || fail "mixed-ISA resume of a Winograd run: $(grep -i -e error -e note -e winograd "$WORK/w-requeued.log")"
  # Which shapes oneDNN has Winograd for depends on the CPU: a checkpoint naming it
  # for a layer it has none for here (the Linear stands in for a shape another
  # CPU's oneDNN took) resumes on this CPU's kernels, with the note, not a refusal.
  mkdir -p "$WORK/w-shape/checkpoints"
  cp "$WORK/w-straight/checkpoints/ckpt-step-000000003.h5" "$WORK/w-shape/checkpoints/"
  "$PYTHON" -c "import h5py, numpy, sys; f = h5py.File(sys.argv[1], 'r+'); f.attrs['cpu_kernels'] = numpy.bytes_('onednn;layers.0=winograd;layers.4=winograd')" \
    "$WORK/w-shape/checkpoints/ckpt-step-000000003.h5"
  run_ranks 2 "${wino_run[@]}" --run.dir "$WORK/w-shape" --resume auto > "$WORK/w-shape.log" 2>&1 \
    && grep -q "^note: this run trained with CPU kernels onednn;layers.0=winograd;layers.4=winograd and continues with onednn;layers.0=winograd (.*for a layer they name)" "$WORK/w-shape.log" \
    && [ "$(kernels_of "$(latest_checkpoint "$WORK/w-shape")")" = "onednn;layers.0=winograd" ] \
    && pass "a checkpoint naming Winograd for a layer this CPU has none for resumes on this CPU's kernels, with the note" \
    || fail "Winograd for a layer without it here: $(grep -i -e error -e note "$WORK/w-shape.log")"
  # A CPU without AVX-512 (oneDNN held to AVX2) is refused the setting with one
  # line, and so is a job where only another rank's CPU lacks it (rank 1 held to AVX2).
  ONEDNN_MAX_CPU_ISA=AVX2 expect_input_error winograd-avx2 2 \
    "train.cpu_kernels = winograd: oneDNN has Winograd convolutions only for CPUs with AVX-512; use auto" \
    "${wino_run[@]}" --train.cpu_kernels winograd --run.dir "$WORK/w-avx2"
  ONEDNN_MAX_CPU_ISA=AVX2 expect_input_error winograd-all-avx2 2 \
    "train.cpu_kernels = winograd_all: oneDNN has Winograd convolutions only for CPUs with AVX-512; use auto" \
    "${wino_run[@]}" --train.cpu_kernels winograd_all --run.dir "$WORK/w-all-avx2"
  rc=0
  OMPI_MCA_orte_tmpdir_base=$(own_session_base) \
    timeout "$RUN_TIMEOUT" "$MPIEXEC" -n 1 "$MPIDDP" "${wino_run[@]}" --train.cpu_kernels winograd --run.dir "$WORK/w-mixed" \
    : -n 1 env ONEDNN_MAX_CPU_ISA=AVX2 "$MPIDDP" "${wino_run[@]}" --train.cpu_kernels winograd --run.dir "$WORK/w-mixed" \
    > "$WORK/w-mixed.log" 2>&1 || rc=$?
  [ "$rc" = 2 ] && [ "$(grep -c "mpiddp: error:" "$WORK/w-mixed.log")" = 1 ] \
    && grep -q "^mpiddp: error: rank 0: train.cpu_kernels = winograd: another rank's CPU lacks oneDNN's Winograd convolutions (AVX-512); use auto$" "$WORK/w-mixed.log" \
    && pass "a job where rank 1's CPU lacks AVX-512 is refused winograd in one line (exit 2)" \
    || fail "mixed-ISA winograd job: exit $rc, $(grep error "$WORK/w-mixed.log")"
  [ ! -e "$WORK/w-mixed" ] || fail "the refused mixed-ISA job made its run.dir"
fi
# mpiddp's own Winograd convolutions (any CPU; 3x3, stride 1, channels in eights):
# train.cpu_kernels = own_winograd gives them to the 8-channel convolution, the
# banner lists it, the checkpoint names it and a resume with auto takes it, bit
# for bit, with other bits than the direct convolution's.
eights_run=(train /dev/null --data.train "$WORK/images" --model.input_shape 1,8,8
  --model.layers "conv2d(8,3,padding=1) relu conv2d(8,3,padding=2) batchnorm2d relu flatten linear" "${six_steps[@]}")
# own_winograd_kept TAG SETTING TILE CHOICES: the 8-channel model under
# train.cpu_kernels = SETTING names layers.2 in the banner line of TILE, and
# kernels_kept checks the checkpoint's CHOICES and a bit-exact resume with auto.
own_winograd_kept() {
  local tag=$1 setting=$2 tile=$3 choices=$4
  run_ranks 2 "${eights_run[@]}" --train.cpu_kernels "$setting" --run.dir "$WORK/$tag-straight" > "$WORK/$tag.log" 2>&1 \
    || fail "$setting run exited $?"
  grep -q "^mpiddp's own Winograd convolutions $tile: layers.2$" "$WORK/$tag.log" \
    && pass "$setting runs the 8-channel convolution on mpiddp's own Winograd $tile, as the banner says" \
    || fail "$setting banner: $(grep -i -e kernels -e winograd "$WORK/$tag.log")"
  kernels_kept "$tag" "$choices" "${eights_run[@]}"
}
# (the 1-channel convolution on the thin-convolution kernels where the CPU has AVX2, as under auto)
eights="layers.2=own_winograd"
if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then eights="layers.0=own;$eights"; fi
own_winograd_kept ow own_winograd "F(2x2, 3x3)" "$eights"
run_ranks 2 "${eights_run[@]}" --train.cpu_kernels onednn --run.dir "$WORK/ow-direct" > "$WORK/ow3.log" 2>&1 \
  || fail "onednn run exited $?"
! grep -q "own Winograd" "$WORK/ow3.log" \
  && ! same_parameters "$(latest_checkpoint "$WORK/ow-straight")" "$(latest_checkpoint "$WORK/ow-direct")" \
  && pass "onednn keeps the direct convolution, other bits than own_winograd's (the choice is real)" \
  || fail "onednn against own_winograd: $(grep -i -e kernels -e winograd "$WORK/ow3.log")"
# own_winograd4 (F(4x4, 3x3)) the same way, with other bits than F(2x2)'s; and
# auto gives it to that layer where a rank's oneDNN has no Winograd kernels
# (held to AVX2 here, as on a CPU without AVX-512) and the rank runs one thread.
own_winograd_kept ow4 own_winograd4 "F(4x4, 3x3)" "${eights}4"
! same_parameters "$(latest_checkpoint "$WORK/ow-straight")" "$(latest_checkpoint "$WORK/ow4-straight")" \
  && pass "own_winograd4 gives other bits than own_winograd (another algorithm)" \
  || fail "own_winograd4 ended bit-identical to own_winograd"
ONEDNN_MAX_CPU_ISA=AVX2 run_ranks 2 "${eights_run[@]}" --run.dir "$WORK/ow4-auto" > "$WORK/ow4-auto.log" 2>&1 \
  || fail "auto run with oneDNN held to AVX2 exited $?"
grep -q "^mpiddp's own Winograd convolutions F(4x4, 3x3): layers.2$" "$WORK/ow4-auto.log" \
  && [ "$(kernels_of "$(latest_checkpoint "$WORK/ow4-auto")")" = "$(kernels_of "$(latest_checkpoint "$WORK/ow4-straight")")" ] \
  && pass "without oneDNN's Winograd kernels auto gives the 8-channel convolution mpiddp's own F(4x4, 3x3)" \
  || fail "auto held to AVX2: $(grep -i -e kernels -e winograd "$WORK/ow4-auto.log")"
cp "$WORK/k-straight/checkpoints/ckpt-step-000000003.h5" "$WORK/k-edited.h5"
edits=0
for edited in blis own "onednn;layers.0" "onednn;layers.0=mkl" "onednn;layers.0=onednn;layers.0=openblas" "onednn;Layers.0=onednn"; do
  edits=$((edits + 1))
  "$PYTHON" -c "import h5py, numpy, sys; f = h5py.File(sys.argv[1], 'r+'); f.attrs['cpu_kernels'] = numpy.bytes_(sys.argv[2])" \
    "$WORK/k-edited.h5" "$edited"
  expect_error "kernels-edited-$edits" 2 "$WORK/k-edited.h5: attribute 'cpu_kernels' is '$edited', must be onednn or openblas" \
    "${kernels_run[@]}" --run.dir "$WORK/k-edited" --resume "$WORK/k-edited.h5"
done
finish
