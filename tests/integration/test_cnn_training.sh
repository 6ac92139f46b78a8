#!/usr/bin/env bash
# A small CNN (conv2d, batchnorm2d, maxpool2d, dropout) on 8x8 images, 2 ranks:
# an interrupted and resumed run equals the uninterrupted one bit for bit
# (parameters, optimizer state, BatchNorm's /buffers, per-step losses); the
# checkpoint, loaded into torch.nn by scripts/to-torch (load_state_dict, strict),
# gives mpiddp's own test loss and accuracy. Trained with label smoothing, whose
# evaluation reports the plain cross-entropy. On oneDNN's direct convolutions, the
# arithmetic PyTorch runs, so the accuracies can be compared exactly (Winograd's
# kernels, auto's on AVX-512, are checked layer by layer in test_layers_vs_torch).
source "$(dirname "$0")/lib.sh"
require_python_modules h5py numpy torch

make_image_shards "$WORK/train" 640 1 2
make_image_shards "$WORK/test" 300 2 1
LAYERS="conv2d(4,3,padding=1) batchnorm2d relu maxpool2d(2) conv2d(8,3) batchnorm2d relu flatten dropout(0.2) linear(16) relu linear"
# 320 samples per rank / 16 = 20 steps per epoch.
write_ini "$WORK/cnn.ini" data.train="$WORK/train" data.test="$WORK/test" model.layers="$LAYERS" \
  model.input_shape=1,8,8 train.batch_size=16 train.epochs=2 train.seed=5 train.log_every=1 \
  train.label_smoothing=0.1 train.cpu_kernels=onednn optim.name=sgd optim.lr=0.05 optim.momentum=0.9 checkpoint.every_epochs=1
train_losses() { grep '"type":"train"' "$1/metrics.jsonl" | sed 's/"samples_per_s":[^,}]*//'; }

run_ranks 2 train "$WORK/cnn.ini" --run.dir "$WORK/straight" > "$WORK/straight.log" 2>&1 \
  || { fail "straight run exited $?"; tail -5 "$WORK/straight.log" >&2; finish; }
grep -q "MaxPool2d(kernel_size=2, stride=2)" "$WORK/straight.log" && pass "the banner lists the layers" \
  || fail "no MaxPool2d line in the banner"

# ---- resume: stop mid-epoch 2 (SIGUSR1 on rank 1 at step 27), resume ----
rc=0; run_ranks 2 train "$WORK/cnn.ini" --run.dir "$WORK/split" --debug.fail_rank 1 --debug.fail_step 27 \
  --debug.fail_mode signal > "$WORK/split1.log" 2>&1 || rc=$?
[ "$rc" = 75 ] && pass "stopped with exit 75" || fail "stop: exit code $rc"
run_ranks 2 train "$WORK/cnn.ini" --run.dir "$WORK/split" --resume auto > "$WORK/split2.log" 2>&1 || fail "resume exited $?"
grep -q "resuming from .*: epoch 2, step 8 of it, global step 28" "$WORK/split2.log" && pass "resumed mid-epoch 2" \
  || fail "resume message: $(grep -i resum "$WORK/split2.log" || true)"
final=$(latest_checkpoint "$WORK/straight")
"$PYTHON" - "$final" <<'PY' && pass "the checkpoint holds BatchNorm's /buffers" || fail "no /buffers in $final"
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    names = sorted(f["buffers"])
    assert names == ["layers.1.num_batches_tracked", "layers.1.running_mean", "layers.1.running_var",
                     "layers.5.num_batches_tracked", "layers.5.running_mean", "layers.5.running_var"], names
    assert int(f["buffers/layers.1.num_batches_tracked"][()]) == 40, f["buffers/layers.1.num_batches_tracked"][()]
    assert abs(f["buffers/layers.1.running_var"][...] - 1).max() > 1e-3, "running statistics never moved"
PY
same_parameters "$final" "$(latest_checkpoint "$WORK/split")" \
  && pass "resumed = uninterrupted, bit for bit (params, optimizer, buffers)" || fail "the resumed run differs"
if diff <(train_losses "$WORK/straight") <(train_losses "$WORK/split") > /dev/null; then
  pass "per-step losses identical ($(train_losses "$WORK/straight" | wc -l) records)"
else fail "per-step losses differ"; fi

# ---- the checkpoint in PyTorch ----
"$PYTHON" "$MPIDDP_SOURCE_DIR/scripts/to-torch" "$final" "$WORK/cnn.pt" --module "$WORK/cnn_model.py" \
  > "$WORK/snippet.py" 2> "$WORK/to-torch.err" || fail "to-torch exited $?: $(cat "$WORK/to-torch.err")"
"$PYTHON" - "$WORK" <<'PY' && pass "torch.nn with the checkpoint's params and buffers = mpiddp's evaluation" \
  || fail "the CNN in PyTorch disagrees with mpiddp"
import glob, json, runpy, sys
import h5py, numpy as np, torch
work = sys.argv[1]
model = runpy.run_path(work + "/snippet.py")["model"]
sys.path.insert(0, work)
import cnn_model
other = cnn_model.load()
assert not model.training
# strict loading of params and buffers straight from the checkpoint, too
state = {}
with h5py.File(glob.glob(work + "/straight/checkpoints/ckpt-step-000000040.h5")[0], "r") as f:
    for group in ("params", "buffers"):
        for name in f[group]:
            value = torch.from_numpy(np.array(f[group][name][()]))
            state[name[len("layers."):]] = value
cnn_model.build().load_state_dict(state, strict=True)
with h5py.File(glob.glob(work + "/test/*.h5")[0], "r") as f:
    x = torch.from_numpy(f["features"][...]).reshape(-1, 1, 8, 8)
    y = torch.from_numpy(f["labels"][...]).long()
with torch.no_grad():
    logits = model(x)
    assert torch.equal(logits, other(x))
    loss = torch.nn.functional.cross_entropy(logits, y).item()
    accuracy = (logits.argmax(1) == y).double().mean().item()
summary = json.load(open(work + "/straight/summary.json"))
print(f"torch loss {loss:.7f} accuracy {accuracy:.4f}; mpiddp {summary['test_loss']:.7f} {summary['test_accuracy']:.4f}")
assert 0.5 < accuracy < 0.99 and loss > 0.05, "the check needs a model that learned something but not everything"
assert abs(accuracy - summary["test_accuracy"]) < 1e-9
assert abs(loss - summary["test_loss"]) < 1e-5 * max(1.0, loss)
PY
finish
