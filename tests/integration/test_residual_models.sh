#!/usr/bin/env bash
# Residual networks end to end: a small ResNet (identity and projection
# shortcuts, BatchNorm in both branches) trained on 2 ranks; SyncBatchNorm inside
# residual blocks makes world 1 x 8 and world 2 x 4 train the same model;
# a bit-exact resume; the export to PyTorch that gives mpiddp's test loss. On
# oneDNN's direct convolutions (PyTorch's arithmetic), so accuracies compare exactly.
source "$(dirname "$0")/lib.sh"
require_python_modules h5py numpy torch
SCRIPTS=$MPIDDP_SOURCE_DIR/scripts

make_image_shards "$WORK/train" 256 1 2
make_image_shards "$WORK/test" 96 2 1
RESNET="conv2d(4,3,padding=1) batchnorm2d relu residual(conv2d(4,3,padding=1) batchnorm2d relu \
conv2d(4,3,padding=1) batchnorm2d) relu residual(conv2d(8,3,stride=2,padding=1) batchnorm2d relu \
conv2d(8,3,padding=1) batchnorm2d ; conv2d(8,1,stride=2) batchnorm2d) relu avgpool2d(4) flatten linear"
write_ini "$WORK/resnet.ini" data.train="$WORK/train" data.test="$WORK/test" model.input_shape=1,8,8 \
  model.layers="$RESNET" train.batch_size=8 train.epochs=2 train.seed=3 optim.name=adamw optim.lr=0.01 \
  train.cpu_kernels=onednn \
  checkpoint.every_steps=8
train() {  # train RANKS NAME ARGS...
  local n=$1 name=$2; shift 2
  run_ranks "$n" train "$WORK/resnet.ini" --run.dir "$WORK/$name" "$@" > "$WORK/$name.log" 2>&1 \
    || { fail "$name: exit code $?"; tail -3 "$WORK/$name.log" >&2; }
}

train 2 plain
grep -q "layers.3   Residual(identity shortcut)" "$WORK/plain.log" && grep -q "  shortcut.1 .*BatchNorm2d" "$WORK/plain.log" \
  && pass "the banner lists each block and its layers" || fail "banner lacks the residual blocks"
acc=$(json_field "$WORK/plain/summary.json" test_accuracy)
at_least "$acc" 0.6 && pass "the ResNet learns (test accuracy $acc)" || fail "ResNet test accuracy $acc"

# Resume from the epoch-1 checkpoints: the straight run bit for bit.
train 2 half --train.epochs 1
train 2 half --resume auto
same_parameters "$(latest_checkpoint "$WORK/plain")" "$(latest_checkpoint "$WORK/half")" \
  && pass "resumed ResNet = straight ResNet, bit for bit" || fail "resumed ResNet differs"

# SyncBatchNorm in both branches: world 1 x 8 = world 2 x 4 (float rounding). SGD: a convolution's bias
# before BatchNorm has a gradient of 0 in exact arithmetic, and AdamW would turn its rounding noise into steps.
train 1 sync1 --model.sync_batchnorm true --train.epochs 1 --train.eval false --optim.name sgd --optim.lr 0.05
train 2 sync2 --model.sync_batchnorm true --train.epochs 1 --train.eval false --train.batch_size 4 \
  --optim.name sgd --optim.lr 0.05
grep -q "SyncBatchNorm" "$WORK/sync2.log" || fail "no SyncBatchNorm in the banner"
"$PYTHON" - "$(latest_checkpoint "$WORK/sync1")" "$(latest_checkpoint "$WORK/sync2")" <<'PY' \
  && pass "SyncBatchNorm in residual blocks: world 1 x 8 = world 2 x 4" || fail "SyncBatchNorm residual runs differ"
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
names = [n for n in a["params"]] + ["../buffers/" + n for n in a["buffers"] if "running" in n]
assert any(".shortcut." in n for n in names) and any(".body." in n for n in names)
worst = 0.0
for group in ("params", "buffers"):
    for n in a[group]:
        x, y = a[group][n][...].astype(np.float64), b[group][n][...].astype(np.float64)
        worst = max(worst, float(np.max(np.abs(x - y)) / (np.max(np.abs(x)) + 1e-12)))
print(f"worst relative difference {worst:.2e}")
assert worst < 1e-3, worst
PY

# To PyTorch: the module loads strictly and gives mpiddp's test loss and accuracy.
"$PYTHON" "$SCRIPTS/to-torch" "$(latest_checkpoint "$WORK/plain")" "$WORK/resnet.pt" --module "$WORK/resnet_model.py" \
  > /dev/null 2> "$WORK/to-torch.err" || fail "to-torch exited $?: $(cat "$WORK/to-torch.err")"
"$PYTHON" - "$WORK" <<'PY' && pass "PyTorch gives mpiddp's ResNet test loss (1e-5) and accuracy" || fail "exported ResNet disagrees"
import glob, json, sys
import h5py, torch
work = sys.argv[1]
sys.path.insert(0, work)
import resnet_model
model = resnet_model.load()
with h5py.File(glob.glob(work + "/test/*.h5")[0], "r") as f:
    x, y = torch.from_numpy(f["features"][...]).reshape(-1, 1, 8, 8), torch.from_numpy(f["labels"][...]).long()
with torch.no_grad():
    logits = model(x)
loss = torch.nn.functional.cross_entropy(logits, y).item()
accuracy = (logits.argmax(1) == y).double().mean().item()
s = json.load(open(work + "/plain/summary.json"))
print(f"torch {loss:.7f} {accuracy:.4f}; mpiddp {s['test_loss']:.7f} {s['test_accuracy']:.4f}")
assert abs(loss - s["test_loss"]) < 1e-5 * max(1.0, loss) and abs(accuracy - s["test_accuracy"]) < 1e-9
PY
# 16 and 32 channels: the activations between the convolutions stay in oneDNN's
# blocked layout (train.blocked_layout), with the same bits as NCHW, in
# training, evaluation and SyncBatchNorm; a run resumed across the setting too.
WIDE=${RESNET//conv2d(4,/conv2d(16,}
WIDE=${WIDE//conv2d(8,/conv2d(32,}
wide() {  # wide NAME EPOCHS ARGS...
  local name=$1 epochs=$2; shift 2
  train 2 "$name" --model.layers "$WIDE" --model.sync_batchnorm true --train.epochs "$epochs" "$@"
}
wide blocked 2
grep -q "blocked layout (nChw16c) kept for" "$WORK/blocked.log" \
  && pass "the banner names the layer outputs kept blocked" || fail "no blocked layout in the banner"
wide nchw 2 --train.blocked_layout false
grep -q "blocked layout" "$WORK/nchw.log" && fail "train.blocked_layout = false still blocks"
same_parameters "$(latest_checkpoint "$WORK/blocked")" "$(latest_checkpoint "$WORK/nchw")" \
  && [ "$(json_field "$WORK/blocked/summary.json" test_loss)" = "$(json_field "$WORK/nchw/summary.json" test_loss)" ] \
  && pass "blocked layout = NCHW, bit for bit (parameters, running statistics, test loss)" \
  || fail "the blocked layout changed the results"
wide switched 1 --train.blocked_layout false
wide switched 2 --resume auto
same_parameters "$(latest_checkpoint "$WORK/blocked")" "$(latest_checkpoint "$WORK/switched")" \
  && pass "a NCHW run resumed with the blocked layout = the straight run" || fail "resume across the layout differs"
finish
