#!/usr/bin/env bash
# Hostile input, round 3 (issue 22): numbers a file or a setting holds that
# training must not start from, and sizes whose products overflow or pass what
# the node holds. Each is refused up front with exit 2 and one "mpiddp: error:"
# line naming the file or key and the numbers; never std::bad_alloc, a hang or
# exit 0. And NaN passes through the layers as it does in PyTorch.
source "$(dirname "$0")/lib.sh"
require_python_modules h5py numpy torch

# expect_input_error NAME RANKS TEXT ARGS...: expect_error, and the exit code of bad input (2).
make_blobs_shards "$WORK/good" 200 1 2
base=(train --data.train "$WORK/good" --train.epochs 1)

# ---- 1. non-finite numbers in every float array that is read ----
# model.init from PyTorch (scripts/from-torch), then copies with one value changed.
"$PYTHON" - "$WORK" <<'PY' || fail "writing the PyTorch models"
import sys, torch
torch.manual_seed(1)
mlp = torch.nn.Sequential(torch.nn.Linear(8, 12), torch.nn.ReLU(), torch.nn.Linear(12, 3))
torch.save(mlp.state_dict(), sys.argv[1] + "/mlp.pt")
bn = torch.nn.Sequential(torch.nn.Linear(8, 12), torch.nn.BatchNorm1d(12), torch.nn.ReLU(), torch.nn.Linear(12, 3))
torch.save(bn.state_dict(), sys.argv[1] + "/bn.pt")
PY
"$PYTHON" "$MPIDDP_SOURCE_DIR/scripts/from-torch" "$WORK/mlp.pt" "$WORK/mlp.h5" > /dev/null || fail "from-torch mlp"
"$PYTHON" "$MPIDDP_SOURCE_DIR/scripts/from-torch" "$WORK/bn.pt" "$WORK/bn.h5" > /dev/null || fail "from-torch bn"
# edited SRC DST ARRAY INDEX VALUE: DST is SRC with the flat element INDEX of ARRAY set to VALUE.
edited() {
  "$PYTHON" - "$@" <<'PY'
import shutil, sys, h5py, numpy as np
src, dst, name, index, value = sys.argv[1:]
shutil.copyfile(src, dst)
with h5py.File(dst, "r+") as f:
    a = f[name][...]
    a.reshape(-1)[int(index)] = np.float32(value)
    f[name][...] = a
PY
}
mlp_run=(--model.hidden 12)
bn_run=(--model.layers "linear(12) batchnorm1d relu linear")
edited "$WORK/mlp.h5" "$WORK/init-nan.h5" params/layers.0.weight 17 nan
expect_input_error init-nan 2 "model.init $WORK/init-nan.h5: params/layers.0.weight[17] is NaN (a non-finite value); refused" \
  "${base[@]}" "${mlp_run[@]}" --run.dir "$WORK/i1" --model.init "$WORK/init-nan.h5"
[ ! -e "$WORK/i1" ] || fail "init-nan: a refused start created its run.dir"
edited "$WORK/mlp.h5" "$WORK/init-inf.h5" params/layers.2.bias 2 -inf
expect_input_error init-inf 2 "model.init $WORK/init-inf.h5: params/layers.2.bias[2] is -Inf (a non-finite value); refused" \
  "${base[@]}" "${mlp_run[@]}" --run.dir "$WORK/i2" --model.init "$WORK/init-inf.h5"
edited "$WORK/bn.h5" "$WORK/init-mean-inf.h5" buffers/layers.1.running_mean 4 inf
expect_input_error init-running-mean 2 "model.init $WORK/init-mean-inf.h5: buffers/layers.1.running_mean[4] is +Inf (a non-finite value); refused" \
  "${base[@]}" "${bn_run[@]}" --run.dir "$WORK/i3" --model.init "$WORK/init-mean-inf.h5"
edited "$WORK/bn.h5" "$WORK/init-var-negative.h5" buffers/layers.1.running_var 3 -0.5
expect_input_error init-running-var 2 "model.init $WORK/init-var-negative.h5: buffers/layers.1.running_var[3] is -0.5 (a variance is never negative); refused" \
  "${base[@]}" "${bn_run[@]}" --run.dir "$WORK/i4" --model.init "$WORK/init-var-negative.h5"
# The unedited files start training.
run_ranks 2 "${base[@]}" "${bn_run[@]}" --train.max_steps 1 --run.dir "$WORK/i5" --model.init "$WORK/bn.h5" > "$WORK/i5.log" 2>&1 \
  && pass "the unedited model.init trains" || fail "the unedited model.init: $(tail -2 "$WORK/i5.log")"

# Checkpoints: parameters, BatchNorm buffers, SGD momentum, AdamW moments.
run_ranks 2 "${base[@]}" "${bn_run[@]}" --optim.name adamw --train.max_steps 2 --checkpoint.every_steps 1 \
  --run.dir "$WORK/adamw" > "$WORK/adamw.log" 2>&1 || fail "adamw run: $(tail -2 "$WORK/adamw.log")"
run_ranks 2 "${base[@]}" "${mlp_run[@]}" --optim.name sgd --optim.momentum 0.9 --train.max_steps 2 \
  --checkpoint.every_steps 1 --run.dir "$WORK/sgd" > "$WORK/sgd.log" 2>&1 || fail "sgd run: $(tail -2 "$WORK/sgd.log")"
adamw=$(latest_checkpoint "$WORK/adamw") sgd=$(latest_checkpoint "$WORK/sgd")
resume_refused() {  # NAME CHECKPOINT ARRAY INDEX VALUE TEXT RUN-ARGS...
  local name=$1 ckpt=$2 array=$3 index=$4 value=$5 text=$6; shift 6
  edited "$ckpt" "$WORK/$name.h5" "$array" "$index" "$value"
  expect_input_error "$name" 2 "$WORK/$name.h5: $array[$index] is $text; refused" \
    "${base[@]}" "$@" --train.max_steps 3 --run.dir "$WORK/run-$name" --resume "$WORK/$name.h5"
}
resume_refused ckpt-param-nan "$adamw" params/layers.3.weight 5 nan "NaN (a non-finite value)" "${bn_run[@]}" --optim.name adamw
resume_refused ckpt-running-var "$adamw" buffers/layers.1.running_var 0 -2 "-2 (a variance is never negative)" "${bn_run[@]}" --optim.name adamw
resume_refused ckpt-exp-avg "$adamw" optimizer/exp_avg/layers.0.bias 7 inf "+Inf (a non-finite value)" "${bn_run[@]}" --optim.name adamw
resume_refused ckpt-exp-avg-sq "$adamw" optimizer/exp_avg_sq/layers.0.weight 9 -1e-3 "-0.00100000005 (a variance is never negative)" "${bn_run[@]}" --optim.name adamw
resume_refused ckpt-momentum "$sgd" optimizer/momentum/layers.2.weight 1 nan "NaN (a non-finite value)" "${mlp_run[@]}" --optim.name sgd --optim.momentum 0.9
# A checkpoint is also a model.init file.
edited "$adamw" "$WORK/init-from-ckpt.h5" params/layers.1.bias 11 nan
expect_input_error init-from-checkpoint 2 "model.init $WORK/init-from-ckpt.h5: params/layers.1.bias[11] is NaN" \
  "${base[@]}" "${bn_run[@]}" --run.dir "$WORK/i6" --model.init "$WORK/init-from-ckpt.h5"

# ddp.zero_stage = 1: each rank's shard of AdamW's state is read by rank 0 (its
# own in read_checkpoint, the others' while scattering them). The flat order is
# layers.0 (8x12 + 12), layers.2 (12x3 + 3): 147 floats, rank 1's half from 74 on.
zero=(--model.hidden 12 --optim.name adamw --ddp.zero_stage 1)
run_ranks 2 "${base[@]}" "${zero[@]}" --train.max_steps 2 --checkpoint.every_steps 1 --run.dir "$WORK/zero" \
  > "$WORK/zero.log" 2>&1 || fail "zero run: $(tail -2 "$WORK/zero.log")"
zero_ckpt=$(latest_checkpoint "$WORK/zero")
resume_refused zero-rank0-shard "$zero_ckpt" optimizer/exp_avg/layers.0.weight 3 nan "NaN (a non-finite value)" "${zero[@]}"
resume_refused zero-rank1-shard "$zero_ckpt" optimizer/exp_avg_sq/layers.2.bias 1 -4 "-4 (a variance is never negative)" "${zero[@]}"
run_ranks 2 "${base[@]}" "${zero[@]}" --train.max_steps 3 --run.dir "$WORK/zero" --resume auto > "$WORK/zero2.log" 2>&1 \
  && pass "the unedited stage-1 checkpoint resumes" || fail "stage-1 resume: $(tail -2 "$WORK/zero2.log")"

# ---- 2. NaN through the layers, against PyTorch ----
# The unit tests' hidden case writes what mpiddp computes for inputs with NaN and
# Inf (relu, gelu, tanh, both max-pooling paths, average pooling, BatchNorm in training).
UNIT_TESTS=${UNIT_TESTS:-$(dirname "$MPIDDP")/tests/unit_tests}
if [ -x "$UNIT_TESTS" ]; then
  MPIDDP_NAN_CASES=$WORK/nan.jsonl "$UNIT_TESTS" "[nan_cases]" > "$WORK/nan.log" 2>&1 || fail "nan cases: $(tail -3 "$WORK/nan.log")"
  "$PYTHON" - "$WORK/nan.jsonl" <<'PY' && pass "NaN and Inf through the layers: PyTorch's outputs and gradients" || fail "NaN cases differ from PyTorch"
import json, sys, torch
F = torch.nn.functional
for line in open(sys.argv[1]):
    case = json.loads(line)
    name = case["name"]
    x = torch.tensor(case["x"], dtype=torch.float32).reshape(case["shape"]).requires_grad_(True)
    running_var = []
    if name in ("relu", "gelu", "tanh"):
        y = {"relu": torch.relu, "gelu": F.gelu, "tanh": torch.tanh}[name](x)
    elif name == "batchnorm2d":
        bn = torch.nn.BatchNorm2d(x.shape[1])
        y = bn(x)
        running_var = bn.running_var.tolist()
    else:  # maxpool2d(k,s) / avgpool2d(k,s)
        k, s = (int(v) for v in name[name.index("(") + 1:-1].split(","))
        y = (F.max_pool2d if name.startswith("max") else F.avg_pool2d)(x, k, s)
    y.backward(torch.arange(1, y.numel() + 1, dtype=torch.float32).reshape(y.shape))
    for what, ours, theirs in (("y", case["y"], y.detach().flatten()), ("dx", case["dx"], x.grad.flatten()),
                               ("running_var", case["running_var"], torch.tensor(running_var))):
        ours = torch.tensor(ours, dtype=torch.float32)
        same = ours.shape == theirs.shape and torch.equal(ours.isnan(), theirs.isnan()) and \
            torch.allclose(ours, theirs, rtol=1e-5, atol=1e-6, equal_nan=True)
        print(f"{name} {what}: {'same' if same else 'DIFFERENT'}: mpiddp {ours.tolist()} torch {theirs.tolist()}")
        assert same
PY
else
  echo "note: NaN cases against PyTorch not compared ($UNIT_TESTS not built)"
fi

# ---- 3. sizes: products checked for overflow, counted before anything is allocated ----
expect_input_error input-shape-wraps 2 "key 'model.input_shape': 3498256 x 1954213 x 26983373 elements per sample overflow 64 bits" \
  "${base[@]}" --run.dir "$WORK/s1" --model.input_shape 3498256,1954213,26983373
expect_input_error conv-padding-past-int 2 "model.layers: layer 1 (layers.0) Conv2d: its input 2x2x2 padded by 1073741824: the height is 2147483650, more than 2147483647" \
  "${base[@]}" --run.dir "$WORK/s2" --model.input_shape 2,2,2 --model.layers "conv2d(8,1073741824,padding=1073741824) flatten linear"
expect_input_error conv-positions-past-int 2 "Conv2d: its output positions 200000 x 200000 is 40000000000, more than 2147483647" \
  "${base[@]}" --run.dir "$WORK/s3" --model.input_shape 2,2,2 --model.layers "conv2d(8,3,padding=100000) flatten linear"
expect_input_error linear-width-past-int 2 "layer 3 (layers.2) Linear: its input width is 4294967296, more than 2147483647" \
  "${base[@]}" --run.dir "$WORK/s4" --model.input_shape 2,2,2 --model.layers "conv2d(1073741824,1) flatten linear"
# The memory budget counts model.layers as it counts model.hidden: the same MLP both ways.
expect_input_error budget-hidden 2 "model.hidden = '1073741824' and train.batch_size = 64 need about 1.23 TiB per rank (model 240 GiB for 12884901891 parameters" \
  "${base[@]}" --run.dir "$WORK/s5" --model.hidden 1073741824
expect_input_error budget-layers-mlp 2 "model.layers = 'linear(1073741824) relu linear' and train.batch_size = 64 need about 1.23 TiB per rank (model 240 GiB for 12884901891 parameters" \
  "${base[@]}" --run.dir "$WORK/s6" --model.layers "linear(1073741824) relu linear"
grep -q "more than its .* of memory" "$WORK/budget-layers-mlp.out" || fail "budget-layers-mlp: no memory comparison"
expect_input_error budget-conv-channels 2 "model.layers = 'conv2d(1073741824,1) flatten linear' and train.batch_size = 64 need about 1.73 TiB per rank (model 240 GiB for 12884901891 parameters" \
  "${base[@]}" --run.dir "$WORK/s7" --model.input_shape 8,1,1 --model.layers "conv2d(1073741824,1) flatten linear"
expect_input_error budget-conv-padding 2 "model.layers = 'conv2d(8,3,padding=10000) maxpool2d(100) flatten linear' and train.batch_size = 64 need about 2.31 TiB per rank (model 18.3 MiB for 960155 parameters, batches 2.31 TiB" \
  "${base[@]}" --run.dir "$WORK/s8" --model.input_shape 2,2,2 --model.layers "conv2d(8,3,padding=10000) maxpool2d(100) flatten linear"
expect_input_error budget-trace-steps 2 "trace window 1.13 TiB for train.trace_steps = 1000000000" \
  "${base[@]}" --run.dir "$WORK/s9" --train.trace_steps 1000000000
# 100,000 layers, from an input file (too long for a command line), 1,000 to a continuation line.
{ printf '[data]\ntrain = %s\n[model]\nlayers = relu\n' "$WORK/good"; thousand=$(printf 'relu %.0s' $(seq 1000))
  for _ in $(seq 99); do printf '  %s\n' "$thousand"; done; printf '  %slinear\n' "$(printf 'relu %.0s' $(seq 998))"
} > "$WORK/long.ini"
expect_input_error list-100000-layers 2 "model.layers: 100000 layers; at most 10000" train "$WORK/long.ini" --run.dir "$WORK/s10"
# The cap counts layers at every depth: 300 residual blocks of 40 layers each (12,300 layers) once passed it.
{ printf '[data]\ntrain = %s\n[model]\nlayers =\n' "$WORK/good"; block="residual($(printf 'relu %.0s' $(seq 40)))"
  for _ in $(seq 300); do printf '  %s\n' "$block"; done; printf '  linear\n'; } > "$WORK/nested.ini"
expect_input_error list-nested-12300-layers 2 \
  "layer 244 (layers.243) 'residual(relu relu" train "$WORK/nested.ini" --run.dir "$WORK/s12"
grep -q "body layer 37 (body.36) 'relu': more than 10000 layers in all (those inside residual blocks count too)" \
  "$WORK/list-nested-12300-layers.out" && pass "the layer cap counts nested layers (the 10,001st is named)" \
  || fail "nested layer cap: $(grep -o "': body.*" "$WORK/list-nested-12300-layers.out" | cut -c1-200)"
# 2,800 residual blocks (8,402 layers, under the cap) make settings of 71 KiB, over what a
# checkpoint's attribute holds: refused at the start, not at the first checkpoint.
expect_input_error settings-71k 2 "the resolved settings take 71" "${base[@]}" --run.dir "$WORK/s13" \
  --model.layers "linear(8) $(for _ in $(seq 2800); do printf 'residual(linear(8) relu) '; done)linear"
expect_input_error hidden-10001-layers 2 "model.hidden: 5000 hidden widths make 10001 layers; at most 10000" \
  "${base[@]}" --run.dir "$WORK/s11" --model.hidden "$(printf '4,%.0s' $(seq 4999))4"

# ---- 4. model.activation with model.layers is refused as model.dropout is ----
expect_input_error activation-with-layers 2 "key 'model.activation': 'tanh' applies to the model.hidden MLP only; with model.layers, write the activation" \
  "${base[@]}" --run.dir "$WORK/d1" --model.layers "linear(16) relu linear" --model.activation tanh

finish
