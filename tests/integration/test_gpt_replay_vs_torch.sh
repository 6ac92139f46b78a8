#!/usr/bin/env bash
# A GPT with residual blocks and a tied output layer, trained 30 steps by mpiddp on
# 2 ranks, against PyTorch replaying the same steps: the same initial weights
# (the module scripts/to-torch writes), the windows each rank's sample log names for
# each step, F.cross_entropy over every target token of the global batch (with
# label_smoothing 0.1, as train.label_smoothing gives it), and torch.optim.AdamW. The parameters must agree to 1e-4 (relative L2 over all of them).
source "$(dirname "$0")/lib.sh"
require_python_modules h5py numpy torch
SCRIPTS=$MPIDDP_SOURCE_DIR/scripts

make_word_text "$WORK"
"$MPIDDP" shard --format bytes --input "$WORK/train.txt" --out "$WORK/train" --shards 2 > /dev/null \
  || fail "shard --format bytes exited $?"

GPT="embedding(256,24) position_embedding residual(layernorm causal_self_attention(3)) \
residual(layernorm linear(48) gelu(approximate=tanh) linear(24)) \
residual(layernorm causal_self_attention(3)) layernorm linear(tie=0)"
# eps 1e-6, not 1e-8: the key part of c_attn's bias has a gradient of exactly 0 (softmax
# ignores a score added to every key), so both programs see only rounding noise there,
# different noise, which Adam with a tiny eps turns into full steps of size lr in
# random directions; with 1e-6 that noise moves the bias by less than 1e-4 x lr.
write_ini "$WORK/gpt.ini" data.train="$WORK/train" data.context=16 model.layers="$GPT" \
  train.batch_size=4 train.epochs=1 train.seed=11 train.eval=false train.label_smoothing=0.1 optim.name=adamw optim.lr=0.003 \
  optim.weight_decay=0.1 optim.beta2=0.95 optim.eps=1e-6

# The initial weights: mpiddp's own initialisation after one step (any weights will do,
# as long as both programs start from them).
run_ranks 2 train "$WORK/gpt.ini" --run.dir "$WORK/init" --train.max_steps 1 > "$WORK/init.log" 2>&1 \
  || fail "initial run exited $?"
INIT=$(latest_checkpoint "$WORK/init")
"$PYTHON" "$SCRIPTS/to-torch" "$INIT" "$WORK/init.pt" --module "$WORK/gpt_model.py" > /dev/null \
  2> "$WORK/to-torch.err" || fail "to-torch exited $?: $(cat "$WORK/to-torch.err")"

run_ranks 2 train "$WORK/gpt.ini" --run.dir "$WORK/run" --model.init "$INIT" --train.max_steps 30 \
  --debug.sample_log "$WORK/samples-%r" > "$WORK/run.log" 2>&1 || fail "30-step run exited $?"

"$PYTHON" - "$WORK" "$(latest_checkpoint "$WORK/run")" "$INIT" <<'PY' \
  && pass "30 AdamW steps of a tied GPT on 2 ranks = PyTorch's replay of them (relative L2 < 1e-4)" \
  || fail "mpiddp's 30 steps differ from PyTorch's replay"
import collections, glob, sys
import h5py, numpy as np, torch
work, ckpt = sys.argv[1], sys.argv[2]
sys.path.insert(0, work)
import gpt_model
torch.manual_seed(0)
model = gpt_model.load()
model.train()

# Windows of T + 1 tokens at stride T, numbered shard after shard (sorted names).
t, shards = 16, []
for path in sorted(glob.glob(work + "/train/*.h5")):
    with h5py.File(path, "r") as f:
        shards.append(torch.from_numpy(f["tokens"][...].astype(np.int64)))
windows = [s[k * t:k * t + t + 1] for s in shards for k in range((len(s) - 1) // t)]

steps = collections.defaultdict(list)  # global step -> window indices of both ranks
for path in sorted(glob.glob(work + "/samples-*")):
    for line in open(path):
        epoch, step, rank, index, padding = map(int, line.split())
        assert padding == 0
        steps[step].append(index)
assert len(steps) == 30 and all(len(v) == 8 for v in steps.values()), {k: len(v) for k, v in steps.items()}

opt = torch.optim.AdamW(model.parameters(), lr=0.003, betas=(0.9, 0.95), eps=1e-6, weight_decay=0.1)
for step in sorted(steps):
    batch = torch.stack([windows[i] for i in steps[step]])
    logits = model(batch[:, :-1])
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1),
                                           label_smoothing=0.1)
    opt.zero_grad()
    loss.backward()
    opt.step()

with h5py.File(ckpt, "r") as f:
    assert f.attrs["global_step"] == 30
    ours = {name: f["params"][name][...] for name in f["params"]}
theirs = {"layers." + k: v.detach().numpy() for k, v in model.state_dict().items()}
tied = [n for n in theirs if n not in ours]
assert tied == ["layers.6.weight"] and np.array_equal(theirs["layers.6.weight"], theirs["layers.0.weight"]), tied
names = sorted(ours)
assert names == sorted(n for n in theirs if n not in tied), (names, sorted(theirs))
with h5py.File(sys.argv[3], "r") as f:
    start = {name: f["params"][name][...] for name in names}
flat = lambda arrays: np.concatenate([arrays[n].ravel() for n in names]).astype(np.float64)
a, b, s = flat(ours), flat(theirs), flat(start)
relative = np.linalg.norm(a - b) / np.linalg.norm(b)
moved = np.linalg.norm(b - s) / np.linalg.norm(b)
worst = max(names, key=lambda n: np.linalg.norm(ours[n] - theirs[n]) / (np.linalg.norm(theirs[n]) + 1e-30))
print(f"relative L2 over {a.size} parameters: {relative:.2e}; worst tensor {worst}: "
      f"{np.linalg.norm(ours[worst] - theirs[worst]) / np.linalg.norm(theirs[worst]):.2e}; "
      f"the 30 steps moved the parameters by {moved:.2e}; last loss {loss.item():.4f}")
assert moved > 1e-2, "the steps must move the weights far beyond the tolerance"
assert relative < 1e-4, relative
PY
finish
