#!/usr/bin/env bash
# Weights to PyTorch and back: scripts/to-torch gives a model whose test-set loss
# and accuracy are mpiddp's own; scripts/from-torch + model.init start mpiddp from
# PyTorch's weights, and one SGD step matches PyTorch's; bad model.init files are
# refused with one line (exit 2) on every rank.
source "$(dirname "$0")/lib.sh"
require_python_modules h5py numpy torch
SCRIPTS=$MPIDDP_SOURCE_DIR/scripts

make_blobs_shards "$WORK/train" 600 1 2
make_blobs_shards "$WORK/test" 300 2 1

# ---- export: a trained MLP (tanh, dropout: Linear layers at 0, 3, 6) in PyTorch ----
# A short, slow training so that the accuracy is far from both chance and 1.
write_ini "$WORK/mlp.ini" data.train="$WORK/train" data.test="$WORK/test" model.hidden=16,8 \
  model.activation=tanh model.dropout=0.1 train.batch_size=32 train.epochs=1 optim.name=sgd optim.lr=0.02
run_ranks 2 train "$WORK/mlp.ini" --run.dir "$WORK/mlp" > "$WORK/mlp.log" 2>&1 || fail "training exited $?"
"$PYTHON" "$SCRIPTS/to-torch" "$(latest_checkpoint "$WORK/mlp")" "$WORK/mlp.pt" --module "$WORK/mlp_model.py" \
  > "$WORK/snippet.py" 2> "$WORK/to-torch.err" || fail "to-torch exited $?"
[ "$(wc -l < "$WORK/snippet.py")" -le 5 ] && pass "to-torch prints $(wc -l < "$WORK/snippet.py") lines of Python" \
  || fail "to-torch snippet is longer than five statements"
"$PYTHON" - "$WORK" <<'PY' && pass "PyTorch predictions = mpiddp's evaluation (loss, accuracy), via the snippet and --module" || fail "exported model disagrees"
import glob, json, runpy, sys
import h5py, numpy as np, torch
work = sys.argv[1]
snippet = runpy.run_path(work + "/snippet.py")          # the printed lines, as a user would paste them
model = snippet["model"]
sys.path.insert(0, work)
import mlp_model                                        # the --module file
other = mlp_model.load()
assert not model.training and not other.training
with h5py.File(glob.glob(work + "/test/*.h5")[0], "r") as f:
    x, y = torch.from_numpy(f["features"][...]), torch.from_numpy(f["labels"][...]).long()
with torch.no_grad():
    logits = model(x)
    assert torch.equal(logits, other(x))
    loss = torch.nn.functional.cross_entropy(logits, y).item()
    accuracy = (logits.argmax(1) == y).double().mean().item()
summary = json.load(open(work + "/mlp/summary.json"))
print(f"torch loss {loss:.7f} accuracy {accuracy:.4f}; mpiddp {summary['test_loss']:.7f} {summary['test_accuracy']:.4f}")
assert 0.4 < accuracy < 0.99, "the check needs a model that is neither untrained nor perfect"
assert abs(accuracy - summary["test_accuracy"]) < 1e-9
assert abs(loss - summary["test_loss"]) < 1e-5 * max(1.0, loss)
PY

# ---- import: PyTorch's initial weights, one SGD step on one fixed batch ----
"$PYTHON" - "$WORK" <<'PY' || fail "writing the PyTorch model"
import sys, torch
torch.manual_seed(3)
model = torch.nn.Sequential(torch.nn.Linear(8, 12), torch.nn.ReLU(), torch.nn.Linear(12, 3))
torch.save(model.state_dict(), sys.argv[1] + "/init.pt")
PY
"$PYTHON" "$SCRIPTS/from-torch" "$WORK/init.pt" "$WORK/init.h5" > /dev/null || fail "from-torch exited $?"
# The whole training set (600 rows) is one batch: no shuffle, one step, world 1.
write_ini "$WORK/step.ini" data.train="$WORK/train" data.shuffle=false model.hidden=12 model.init="$WORK/init.h5" \
  train.batch_size=600 train.epochs=1 train.eval=false optim.name=sgd optim.lr=0.5 optim.momentum=0.9 \
  optim.weight_decay=0.01 checkpoint.every_steps=1
run_ranks 1 train "$WORK/step.ini" --run.dir "$WORK/step" > "$WORK/step.log" 2>&1 || fail "training from model.init exited $?"
grep -q "^initial weights: $WORK/init.h5" "$WORK/step.log" && pass "the log names the initial weights" || fail "no 'initial weights' line"
"$PYTHON" - "$WORK" "$(latest_checkpoint "$WORK/step")" <<'PY' && pass "one step from PyTorch's weights = PyTorch's step (float rounding)" || fail "one step differs from PyTorch's"
import glob, sys
import h5py, numpy as np, torch
work, ckpt = sys.argv[1], sys.argv[2]
model = torch.nn.Sequential(torch.nn.Linear(8, 12), torch.nn.ReLU(), torch.nn.Linear(12, 3))
model.load_state_dict(torch.load(work + "/init.pt"))
x, y = [], []
for path in sorted(glob.glob(work + "/train/*.h5")):
    with h5py.File(path, "r") as f:
        x.append(f["features"][...]); y.append(f["labels"][...])
x, y = torch.from_numpy(np.concatenate(x)), torch.from_numpy(np.concatenate(y)).long()
opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9, weight_decay=0.01)
opt.zero_grad()
torch.nn.functional.cross_entropy(model(x), y).backward()
opt.step()
with h5py.File(ckpt, "r") as f:
    assert f.attrs["global_step"] == 1
    ours = {name: f["params"][name][...] for name in f["params"]}
theirs = {"layers." + k: v.numpy() for k, v in model.state_dict().items()}
assert sorted(ours) == sorted(theirs), (sorted(ours), sorted(theirs))
start = torch.load(work + "/init.pt")
for name, value in theirs.items():
    moved = np.abs(value - start[name[len("layers."):]].numpy()).max()
    diff = np.abs(ours[name] - value).max()
    print(f"{name}: moved {moved:.3g}, differs from PyTorch by {diff:.3g}")
    assert moved > 1e-3 and diff <= 1e-6, name
PY

# An mpiddp checkpoint serves as model.init too (its /params; the optimizer starts fresh), on 2 ranks.
run_ranks 2 train "$WORK/step.ini" --run.dir "$WORK/from-ckpt" --model.init "$(latest_checkpoint "$WORK/step")" \
  --train.batch_size 300 > "$WORK/from-ckpt.log" 2>&1 && grep -q "^initial weights: .*ckpt-step-000000001.h5" "$WORK/from-ckpt.log" \
  && pass "a checkpoint as model.init" || fail "a checkpoint as model.init: $(grep error "$WORK/from-ckpt.log")"

# ---- import with BatchNorm: a state_dict with running statistics and num_batches_tracked
# loads into the matching model.layers model; one training step (batch statistics,
# running statistics updated) matches PyTorch's ----
"$PYTHON" - "$WORK" <<'PY' || fail "writing the PyTorch BatchNorm model"
import sys, torch
torch.manual_seed(4)
model = torch.nn.Sequential(torch.nn.Linear(8, 12), torch.nn.BatchNorm1d(12, momentum=0.3), torch.nn.ReLU(),
                            torch.nn.Linear(12, 3))
with torch.no_grad():  # not PyTorch's initial values, so that loading them is visible
    model[1].weight.uniform_(0.5, 1.5); model[1].bias.uniform_(-0.5, 0.5)
    model[1].running_mean.uniform_(-1, 1); model[1].running_var.uniform_(0.5, 2)
    model[1].num_batches_tracked.fill_(7)
torch.save(model.state_dict(), sys.argv[1] + "/bn-init.pt")
PY
"$PYTHON" "$SCRIPTS/from-torch" "$WORK/bn-init.pt" "$WORK/bn-init.h5" > "$WORK/bn-from-torch.log" \
  && grep -q "6 parameter(s), 3 buffer(s)" "$WORK/bn-from-torch.log" && pass "from-torch: $(cat "$WORK/bn-from-torch.log")" \
  || fail "from-torch with BatchNorm: $(cat "$WORK/bn-from-torch.log")"
run_ranks 1 train "$WORK/step.ini" --run.dir "$WORK/bn-step" --model.init "$WORK/bn-init.h5" \
  --model.layers "linear(12) batchnorm1d(momentum=0.3) relu linear" > "$WORK/bn-step.log" 2>&1 \
  || fail "training from a BatchNorm state_dict exited $?: $(grep error "$WORK/bn-step.log")"
"$PYTHON" - "$WORK" "$(latest_checkpoint "$WORK/bn-step")" <<'PY' && pass "one step from PyTorch's BatchNorm model = PyTorch's step (params, running statistics, num_batches_tracked)" || fail "the BatchNorm step differs from PyTorch's"
import glob, sys
import h5py, numpy as np, torch
work, ckpt = sys.argv[1], sys.argv[2]
model = torch.nn.Sequential(torch.nn.Linear(8, 12), torch.nn.BatchNorm1d(12, momentum=0.3), torch.nn.ReLU(),
                            torch.nn.Linear(12, 3))
model.load_state_dict(torch.load(work + "/bn-init.pt"), strict=True)
x, y = [], []
for path in sorted(glob.glob(work + "/train/*.h5")):
    with h5py.File(path, "r") as f:
        x.append(f["features"][...]); y.append(f["labels"][...])
x, y = torch.from_numpy(np.concatenate(x)), torch.from_numpy(np.concatenate(y)).long()
opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9, weight_decay=0.01)
opt.zero_grad()
torch.nn.functional.cross_entropy(model(x), y).backward()
opt.step()
theirs = {"layers." + k: v.numpy() for k, v in model.state_dict().items()}
with h5py.File(ckpt, "r") as f:
    ours = {**{n: f["params"][n][...] for n in f["params"]}, **{n: f["buffers"][n][()] for n in f["buffers"]}}
assert sorted(ours) == sorted(theirs), (sorted(ours), sorted(theirs))
assert int(ours["layers.1.num_batches_tracked"]) == 8, ours["layers.1.num_batches_tracked"]
for name, value in theirs.items():
    diff = np.abs(ours[name] - value).max()
    print(f"{name}: differs from PyTorch by {diff:.3g}")
    assert diff <= 2e-6 * max(1.0, np.abs(value).max()), name
PY

# ---- bad model.init files: one line, exit 2, no hang (2 ranks) ----
"$PYTHON" - "$WORK" <<'PY' || fail "writing the bad files"
import sys, h5py, torch
work = sys.argv[1]
h5py.File(work + "/no-params.h5", "w").create_group("weights")
def save(model, name, drop=(), add=()):
    state = model.state_dict()
    for key in drop: del state[key]
    for key in add: state[key] = torch.zeros(2)
    torch.save(state, f"{work}/{name}.pt")
save(torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3)), "wide")
save(torch.nn.Sequential(torch.nn.Linear(8, 12), torch.nn.ReLU(), torch.nn.Linear(12, 3)), "extra", add=["9.weight"])
save(torch.nn.Sequential(torch.nn.Linear(8, 12), torch.nn.ReLU(), torch.nn.Linear(12, 3)), "missing", drop=["2.bias"])
save(torch.nn.Sequential(torch.nn.Linear(8, 12), torch.nn.BatchNorm1d(12), torch.nn.Linear(12, 3)), "norm")
PY
for name in wide extra missing norm; do
  "$PYTHON" "$SCRIPTS/from-torch" "$WORK/$name.pt" "$WORK/$name.h5" > /dev/null || fail "from-torch $name exited $?"
done
echo "not HDF5" > "$WORK/text.h5"
bad_init() {  # name, expected text, file
  expect_error "init-$1" 2 "$2" train "$WORK/step.ini" --run.dir "$WORK/bad-$1" --model.init "$3"
  [ "$EXPECT_RC" = 2 ] || fail "init-$1: exit $EXPECT_RC, not 2"
  [ ! -e "$WORK/bad-$1" ] || fail "init-$1: a refused start created its run.dir"
}
bad_init absent "model.init $WORK/absent.h5: cannot read" "$WORK/absent.h5"
bad_init text "not a readable HDF5 file" "$WORK/text.h5"
bad_init no-params "no /params group" "$WORK/no-params.h5"
bad_init wide "'params/layers.0.weight' is 32x8 but the model's is 12x8" "$WORK/wide.h5"
bad_init extra "'params/layers.9.weight' is not a parameter of this model" "$WORK/extra.h5"
bad_init missing "no dataset 'params/layers.2.bias'" "$WORK/missing.h5"
# A BatchNorm state_dict into the MLP, which has no layer 1 (it loads into a matching model.layers, above).
bad_init norm "'params/layers.1." "$WORK/norm.h5"

# The scripts refuse what they cannot convert, in one line.
"$PYTHON" "$SCRIPTS/to-torch" "$WORK/init.h5" "$WORK/x.pt" > /dev/null 2> "$WORK/to-torch-bad.err" && fail "to-torch took a file without config" \
  || { [ "$(wc -l < "$WORK/to-torch-bad.err")" = 1 ] && grep -q "^to-torch: error: .*no config attribute" "$WORK/to-torch-bad.err" \
       && pass "to-torch refuses a file that is no checkpoint" || fail "to-torch error: $(cat "$WORK/to-torch-bad.err")"; }
"$PYTHON" "$SCRIPTS/from-torch" "$WORK/text.h5" "$WORK/x.h5" > /dev/null 2> "$WORK/from-torch-bad.err" && fail "from-torch took a text file" \
  || { [ "$(wc -l < "$WORK/from-torch-bad.err")" = 1 ] && grep -q "^from-torch: error: .*not a PyTorch file" "$WORK/from-torch-bad.err" \
       && pass "from-torch refuses a file that is not PyTorch's" || fail "from-torch error: $(cat "$WORK/from-torch-bad.err")"; }
finish
