#!/usr/bin/env bash
# Bad model.layers: each stops the job with one line naming model.layers, the
# layer's position and what is wrong, and exit 2, without a hang or a traceback;
# also a run directory resumed with another layer list.
source "$(dirname "$0")/lib.sh"

make_image_shards "$WORK/images" 96 1 1
write_ini "$WORK/cnn.ini" data.train="$WORK/images" model.input_shape=1,8,8 \
  model.layers="conv2d(4,3) batchnorm2d relu flatten linear" train.batch_size=16 train.epochs=1 train.eval=false
# One rank runs without a launcher (as mpiddp allows): a third of mpirun's start-up time.
printf '#!/bin/sh\nshift 2  # -n 1\nexec "$@"\n' > "$WORK/no-launcher"
chmod +x "$WORK/no-launcher"
# bad NAME RANKS "expected text" mpiddp-args...: one error line with the text, exit 2, no run.dir left.
bad() {
  local name=$1 ranks=$2 expected=$3; shift 3
  local MPIEXEC=$MPIEXEC  # expect_error's launcher (bash scoping is dynamic)
  [ "$ranks" != 1 ] || MPIEXEC=$WORK/no-launcher
  expect_error "$name" "$ranks" "$expected" train "$WORK/cnn.ini" --run.dir "$WORK/run-$name" "$@"
  [ "$EXPECT_RC" = 2 ] || fail "$name: exit $EXPECT_RC, not 2"
  ! grep -q "Traceback\|terminate called\|Aborted" "$WORK/$name.out" || fail "$name: a crash, not a clean error"
  [ ! -e "$WORK/run-$name" ] || fail "$name: a refused start created its run.dir"
}
bad unknown 1 "model.layers: layer 2 (layers.1) 'conv3d(4,3)': unknown layer (known: avgpool2d, batchnorm1d," \
  --model.layers "flatten conv3d(4,3) linear"
bad bad-argument 1 "model.layers: layer 1 (layers.0) 'conv2d(4,x)': kernel_size 'x' is not a whole number" \
  --model.layers "conv2d(4,x) flatten linear"
bad missing-argument 1 "model.layers: layer 1 (layers.0) 'conv2d(4)': missing argument 'kernel_size'" \
  --model.layers "conv2d(4) flatten linear"
bad unknown-argument 1 "model.layers: layer 2 (layers.1) 'maxpool2d(2,padding=1)': unknown argument 'padding'" \
  --model.layers "conv2d(4,3) maxpool2d(2,padding=1) flatten linear"
bad syntax 1 "model.layers: layer 2 (layers.1) 'conv2d(8,3 flatten linear': a '(' without its ')'" \
  --model.layers "relu conv2d(8,3 flatten linear"
bad flat-data 2 "model.layers: layer 1 (layers.0) Conv2d: needs images (channels x height x width), but each sample is 64 flat features: the shards carry no sample_shape; set model.input_shape = C,H,W" \
  --model.input_shape ""
bad kernel 1 "model.layers: layer 3 (layers.2) Conv2d: kernel 7 is larger than its input 4x6x6 with padding 0" \
  --model.layers "conv2d(4,3) relu conv2d(4,7) flatten linear"
bad pool 1 "model.layers: layer 2 (layers.1) MaxPool2d: kernel 9 is larger than its input 4x8x8" \
  --model.layers "conv2d(4,3,padding=1) maxpool2d(9) flatten linear"
bad no-classifier 2 "model.layers: the last layer gives 4x6x6 per sample, but the loss needs 3" \
  --model.layers "conv2d(4,3) relu"
bad wrong-width 1 "model.layers: the last layer gives 5 per sample, but the loss needs 3" \
  --model.layers "flatten linear(5)"
bad input-shape 1 "model.input_shape 1,7,7 has 49 elements" --model.input_shape 1,7,7
# The last batch of an epoch with one sample (48 per rank, batches of 47) has no variance in a
# BatchNorm1d: refused before training starts, not mid-epoch by every rank at once. (BatchNorm2d
# has 36 values per channel even then.)
bad one-sample 2 "model.layers: layer 5 (layers.4) BatchNorm1d: a training batch needs at least 2 samples (with 1 value per channel, fewer have no variance), but with 48 samples per rank and train.batch_size 47, the last batch of every epoch has 1; choose another train.batch_size" \
  --train.batch_size 47 --model.layers "conv2d(4,3) relu flatten linear(8) batchnorm1d linear"

# ---- a run directory resumed with another layer list (one rank, without a launcher) ----
"$MPIDDP" train "$WORK/cnn.ini" --run.dir "$WORK/first" > "$WORK/first.log" 2>&1 || fail "first run exited $?"
# Arrays of other shapes, and (worse) a list whose arrays fit: relu -> tanh would resume silently.
for other in "conv2d(8,3) batchnorm2d relu flatten linear" "conv2d(4, 3) batchnorm2d tanh flatten linear"; do
  MPIEXEC=$WORK/no-launcher expect_error resume-other 1 "written with model.layers 'conv2d(4,3) batchnorm2d relu flatten linear', this job has '$other'" \
    train "$WORK/cnn.ini" --run.dir "$WORK/first" --resume auto --model.layers "$other"
  [ "$EXPECT_RC" = 2 ] || fail "resume-other: exit $EXPECT_RC, not 2"
  ! grep -q "warning: skipping" "$WORK/resume-other.out" || fail "resume-other: tried older checkpoints of the same run"
done
# Spaces inside a call change nothing: the same list resumes.
"$MPIDDP" train "$WORK/cnn.ini" --run.dir "$WORK/first" --resume auto --train.epochs 2 \
  --model.layers "conv2d(4, 3)  batchnorm2d relu flatten linear" > "$WORK/resume-same.log" 2>&1 \
  && pass "the same list with other spaces resumes" || fail "the same list with other spaces: $(grep error "$WORK/resume-same.log")"
finish
