#!/usr/bin/env bash
# Sequence models end to end: byte and llm.c token shards (and their refusals),
# a tiny GPT (embedding, position_embedding, residual blocks with causal
# self-attention, LayerNorm and tanh-GELU) trained on 2 ranks with its loss per
# token and bits per token, a bit-exact resume, the export to PyTorch that gives
# mpiddp's test loss, and the refusals of models that do not fit token data.
source "$(dirname "$0")/lib.sh"
require_python_modules h5py numpy torch
SCRIPTS=$MPIDDP_SOURCE_DIR/scripts

# ---- byte shards: a seeded text of words ----
make_word_text "$WORK"
"$MPIDDP" shard --format bytes --input "$WORK/train.txt" --out "$WORK/train" --shards 2 > "$WORK/shard.log" \
  && grep -q "wrote 16000 tokens (vocabulary 256) into 2 shard(s)" "$WORK/shard.log" \
  && pass "byte shards: $(cat "$WORK/shard.log")" || fail "shard --format bytes: $(cat "$WORK/shard.log")"
"$MPIDDP" shard --format bytes --input "$WORK/test.txt" --out "$WORK/test" --shards 1 > /dev/null || fail "test shard"
"$PYTHON" - "$WORK" <<'PY' && pass "tokens: 1-D uint8 with vocab_size 256, the file's bytes in order" || fail "byte shard layout"
import glob, sys, h5py, numpy as np
work = sys.argv[1]
parts = []
for path in sorted(glob.glob(work + "/train/*.h5")):
    with h5py.File(path, "r") as f:
        t = f["tokens"]
        assert t.ndim == 1 and t.dtype == np.uint8 and int(t.attrs["vocab_size"]) == 256, (t.shape, t.dtype)
        parts.append(t[...])
assert np.concatenate(parts).tobytes() == open(work + "/train.txt", "rb").read()
PY

# ---- llm.c shards: header (magic, version, count) + uint16 ids ----
"$PYTHON" - "$WORK" <<'PY'
import sys, numpy as np
work = sys.argv[1]
def write(name, tokens, magic=20240520, version=1, count=None, extra=b""):
    header = np.zeros(256, np.int32)
    header[:3] = magic, version, len(tokens) if count is None else count
    open(f"{work}/{name}", "wb").write(header.tobytes() + np.asarray(tokens, np.uint16).tobytes() + extra)
import os
os.makedirs(f"{work}/llmc")
rng = np.random.default_rng(3)
write("llmc/a_000.bin", rng.integers(0, 300, 500))
write("llmc/a_001.bin", rng.integers(0, 300, 400))
write("bad_magic.bin", [1, 2, 3], magic=1234)
write("bad_version.bin", [1, 2, 3], version=2)
write("bad_size.bin", [1, 2, 3], count=5)
write("bad_id.bin", [1, 299, 3])
PY
"$MPIDDP" shard --format llmc --input "$WORK/llmc/a_*.bin" --vocab 300 --out "$WORK/llmc_shards" --shards 3 \
  > "$WORK/llmc.log" 2>&1 && pass "llm.c shards: $(cat "$WORK/llmc.log")" || fail "shard --format llmc: $(cat "$WORK/llmc.log")"
"$PYTHON" - "$WORK" <<'PY' && pass "llm.c tokens kept in order as uint16 with vocab_size 300" || fail "llm.c shard layout"
import glob, sys, h5py, numpy as np
work = sys.argv[1]
expected = np.concatenate([np.fromfile(p, np.uint16, offset=1024) for p in sorted(glob.glob(work + "/llmc/*.bin"))])
got = []
for path in sorted(glob.glob(work + "/llmc_shards/*.h5")):
    with h5py.File(path, "r") as f:
        assert f["tokens"].dtype == np.uint16 and int(f["tokens"].attrs["vocab_size"]) == 300
        got.append(f["tokens"][...])
assert np.array_equal(np.concatenate(got), expected)
PY
shard_refused() {  # NAME FILE VOCAB EXPECTED
  local rc=0
  "$MPIDDP" shard --format llmc --input "$WORK/$2" --vocab "$3" --out "$WORK/out_$1" > "$WORK/$1.out" 2>&1 || rc=$?
  if [ "$rc" = 2 ] && [ "$(grep -c '^mpiddp: error:' "$WORK/$1.out")" = 1 ] && grep -qF -- "$4" "$WORK/$1.out" \
     && [ ! -e "$WORK/out_$1" ]; then pass "$1 refused: $(cat "$WORK/$1.out")"
  else fail "$1: exit $rc, $(cat "$WORK/$1.out") (or output left behind)"; fi
}
shard_refused llmc_magic bad_magic.bin 300 "magic 1234, expected 20240520"
shard_refused llmc_version bad_version.bin 300 "version 2"
shard_refused llmc_size bad_size.bin 300 "the header says 5 tokens"
shard_refused llmc_vocab bad_id.bin 100 "token id 299 is not below the vocabulary size 100"

# ---- a tiny GPT on 2 ranks ----
GPT="embedding(256,16) position_embedding residual(layernorm causal_self_attention(2)) \
residual(layernorm linear(32) gelu(approximate=tanh) linear(16)) layernorm linear"
write_ini "$WORK/gpt.ini" data.train="$WORK/train" data.test="$WORK/test" data.context=16 model.layers="$GPT" \
  train.batch_size=8 train.epochs=2 train.seed=5 train.log_every=20 optim.name=adamw optim.lr=0.003 \
  checkpoint.every_steps=40
run_ranks 2 train "$WORK/gpt.ini" --run.dir "$WORK/gpt" > "$WORK/gpt.log" 2>&1 || fail "GPT training exited $?"
grep -q "model: .* parameters, input 16" "$WORK/gpt.log" && grep -q "windows of 16 + 1 tokens" "$WORK/gpt.log" \
  && pass "the banner names token windows" || fail "no token banner"
"$PYTHON" - "$WORK/gpt" <<'PY' && pass "summary: loss per token well below ln 256, bits = nats / ln 2, tokens/s" \
  || fail "GPT summary"
import json, math, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
print(f"test_loss {s['test_loss']:.4f} bits {s['test_bits_per_token']:.4f} tokens/s {s['train_tokens_per_s']:.0f}")
assert 0 < s["test_loss"] < 0.6 * math.log(256), s["test_loss"]
assert abs(s["test_bits_per_token"] - s["test_loss"] / math.log(2)) < 1e-9
assert abs(s["train_tokens_per_s"] - 16 * s["train_samples_per_s"]) < 1e-6 * s["train_tokens_per_s"]
evals = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl") if '"eval"' in l]
assert evals and all("test_bits_per_token" in e for e in evals)
PY

# ---- resume: 1 epoch, then on to 2, is the straight run bit for bit ----
run_ranks 2 train "$WORK/gpt.ini" --run.dir "$WORK/half" --train.epochs 1 > "$WORK/half.log" 2>&1 \
  || fail "first half exited $?"
run_ranks 2 train "$WORK/gpt.ini" --run.dir "$WORK/half" --resume auto > "$WORK/rest.log" 2>&1 \
  || fail "resumed half exited $?"
same_parameters "$(latest_checkpoint "$WORK/gpt")" "$(latest_checkpoint "$WORK/half")" \
  && pass "resumed GPT = straight GPT, bit for bit" || fail "resumed GPT differs"

# ---- ZeRO stage 1: the stage-0 run bit for bit (world 2); gradient accumulation: the same
# global batch as 2 micro-batches of 4 trains the same model to float rounding ----
run_ranks 2 train "$WORK/gpt.ini" --run.dir "$WORK/zero" --ddp.zero_stage 1 > "$WORK/zero.log" 2>&1 \
  || fail "ZeRO GPT exited $?"
same_parameters "$(latest_checkpoint "$WORK/gpt")" "$(latest_checkpoint "$WORK/zero")" \
  && pass "GPT at ddp.zero_stage 1 = stage 0, bit for bit" || fail "ZeRO GPT differs"
# (SGD: AdamW divides by sqrt(v), which turns the rounding noise of a gradient that is 0 in exact
# arithmetic, such as the key part of c_attn's bias under the softmax, into steps of size lr.)
run_ranks 2 train "$WORK/gpt.ini" --run.dir "$WORK/accum" --train.batch_size 4 --train.accumulate 2 \
  --train.max_steps 10 --train.eval false --optim.name sgd --optim.lr 0.1 > "$WORK/accum.log" 2>&1 \
  || fail "accumulating GPT exited $?"
run_ranks 2 train "$WORK/gpt.ini" --run.dir "$WORK/whole" --train.max_steps 10 --train.eval false \
  --optim.name sgd --optim.lr 0.1 > "$WORK/whole.log" 2>&1 || fail "10-step GPT exited $?"
"$PYTHON" - "$(latest_checkpoint "$WORK/whole")" "$(latest_checkpoint "$WORK/accum")" <<'PY' \
  && pass "GPT: batch 8 = 2 micro-batches of 4 (float rounding)" || fail "GPT with train.accumulate differs"
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r")["params"], h5py.File(sys.argv[2], "r")["params"]
assert sorted(a) == sorted(b)
worst = max(float(np.max(np.abs(a[n][...] - b[n][...])) / (np.max(np.abs(a[n][...])) + 1e-12)) for n in a)
print(f"worst relative difference {worst:.2e}")
assert worst < 1e-4, worst
PY
# Elastic resume: the 10-step run of 2 ranks continues on 3 (to the end of its epochs).
run_ranks 3 train "$WORK/gpt.ini" --run.dir "$WORK/whole" --resume auto --train.eval false \
  --optim.name sgd --optim.lr 0.1 > "$WORK/elastic.log" 2>&1 \
  && grep -q "resume: world size 2 -> 3" "$WORK/elastic.log" && pass "GPT: elastic resume from 2 ranks to 3" \
  || fail "GPT elastic resume: $(grep -m1 'error' "$WORK/elastic.log")"

# ---- the GPU path's host side (emulated device): the CPU's run, bit for bit ----
run_ranks 2 train "$WORK/gpt.ini" --run.dir "$WORK/emu" --debug.emulate_device true --train.share_device true \
  > "$WORK/emu.log" 2>&1 || fail "emulated GPT exited $?"
same_parameters "$(latest_checkpoint "$WORK/gpt")" "$(latest_checkpoint "$WORK/emu")" \
  && pass "GPT on the emulated GPU = GPT on the CPU, bit for bit" || fail "emulated GPT differs"

# ---- attention dropout (nanoGPT's attn_dropout and resid_dropout): masks keyed by seed, rank, micro-batch
# and layer, so a resume and the emulated GPU repeat them bit for bit ----
DROP="embedding(256,16) position_embedding residual(layernorm causal_self_attention(2,dropout=0.2)) layernorm linear"
run_ranks 2 train "$WORK/gpt.ini" --model.layers "$DROP" --run.dir "$WORK/drop" --train.max_steps 12 \
  --train.eval false > "$WORK/drop.log" 2>&1 || fail "GPT with attention dropout exited $?"
grep -q "CausalSelfAttention(n_embd=16, n_head=2, dropout=0.2)" "$WORK/drop.log" \
  && pass "the banner shows the attention's dropout" || fail "no dropout in the banner"
run_ranks 2 train "$WORK/gpt.ini" --model.layers "$DROP" --run.dir "$WORK/drop_half" --train.max_steps 6 \
  --train.eval false > "$WORK/drop_half.log" 2>&1 \
  && run_ranks 2 train "$WORK/gpt.ini" --model.layers "$DROP" --run.dir "$WORK/drop_half" --train.max_steps 12 \
  --train.eval false --resume auto > "$WORK/drop_rest.log" 2>&1 || fail "dropout GPT halves exited $?"
same_parameters "$(latest_checkpoint "$WORK/drop")" "$(latest_checkpoint "$WORK/drop_half")" \
  && pass "attention dropout: 6 + 6 resumed steps = 12 straight, bit for bit" || fail "dropout GPT resume differs"
run_ranks 2 train "$WORK/gpt.ini" --model.layers "$DROP" --run.dir "$WORK/drop_emu" --train.max_steps 12 \
  --train.eval false --debug.emulate_device true --train.share_device true > "$WORK/drop_emu.log" 2>&1 \
  || fail "emulated dropout GPT exited $?"
same_parameters "$(latest_checkpoint "$WORK/drop")" "$(latest_checkpoint "$WORK/drop_emu")" \
  && pass "attention dropout on the emulated GPU = the CPU, bit for bit" || fail "emulated dropout GPT differs"
run_ranks 2 train "$WORK/gpt.ini" --model.layers "${DROP//0.2/0}" --run.dir "$WORK/nodrop" --train.max_steps 12 \
  --train.eval false > "$WORK/nodrop.log" 2>&1 || fail "GPT without dropout exited $?"
same_parameters "$(latest_checkpoint "$WORK/drop")" "$(latest_checkpoint "$WORK/nodrop")" 2>/dev/null \
  && fail "dropout 0.2 trained the same weights as dropout 0" || pass "dropout 0.2 trains other weights than 0"
"$PYTHON" "$SCRIPTS/to-torch" "$(latest_checkpoint "$WORK/drop")" "$WORK/drop.pt" --module "$WORK/drop_model.py" \
  > /dev/null 2> "$WORK/drop-to.err" && "$PYTHON" - "$WORK" <<'PY' \
  && pass "to-torch: nanoGPT's module with attn_dropout and resid_dropout, strict load" || fail "dropout export"
import sys
sys.path.insert(0, sys.argv[1])
import drop_model
model = drop_model.load()
attention = model[2].body[1]
assert attention.attn_dropout.p == 0.2 and attention.resid_dropout.p == 0.2, attention
PY

# ---- to PyTorch: mpiddp's test loss over every test window, in order ----
"$PYTHON" "$SCRIPTS/to-torch" "$(latest_checkpoint "$WORK/gpt")" "$WORK/gpt.pt" --module "$WORK/gpt_model.py" \
  > "$WORK/snippet.py" 2> "$WORK/to-torch.err" || fail "to-torch exited $?: $(cat "$WORK/to-torch.err")"
"$PYTHON" - "$WORK" <<'PY' && pass "PyTorch (strict load_state_dict) gives mpiddp's test loss to 1e-5" || fail "exported GPT disagrees"
import glob, json, sys
import h5py, numpy as np, torch
work = sys.argv[1]
sys.path.insert(0, work)
import gpt_model
model = gpt_model.load()
with h5py.File(glob.glob(work + "/test/*.h5")[0], "r") as f:
    tokens = torch.from_numpy(f["tokens"][...].astype(np.int64))
t = 16
n = (len(tokens) - 1) // t
x = torch.stack([tokens[i * t:i * t + t] for i in range(n)])
y = torch.stack([tokens[i * t + 1:i * t + t + 1] for i in range(n)])
with torch.no_grad():
    loss = torch.nn.functional.cross_entropy(model(x).reshape(-1, 256), y.reshape(-1)).item()
ours = json.load(open(work + "/gpt/summary.json"))["test_loss"]
print(f"torch {loss:.7f} mpiddp {ours:.7f}")
assert abs(loss - ours) < 1e-5 * max(1.0, loss)
PY

# ---- a tied output layer (GPT-2's lm_head = wte): to PyTorch (strict) and back, stored once ----
TIED="embedding(256,16) position_embedding residual(layernorm causal_self_attention(2)) layernorm linear(tie=0)"
run_ranks 2 train "$WORK/gpt.ini" --run.dir "$WORK/tied" --model.layers "$TIED" --train.max_steps 5 \
  --train.eval false > "$WORK/tied.log" 2>&1 || fail "tied GPT exited $?"
grep -q "weight=layers.0.weight" "$WORK/tied.log" && pass "the banner names the tied weight" || fail "no tie in the banner"
"$PYTHON" "$SCRIPTS/to-torch" "$(latest_checkpoint "$WORK/tied")" "$WORK/tied.pt" > /dev/null 2> "$WORK/tied-to.err" \
  && "$PYTHON" "$SCRIPTS/from-torch" "$WORK/tied.pt" "$WORK/tied_back.h5" > /dev/null 2> "$WORK/tied-from.err" \
  || fail "tied round trip: $(cat "$WORK/tied-to.err" "$WORK/tied-from.err")"
"$PYTHON" - "$(latest_checkpoint "$WORK/tied")" "$WORK/tied_back.h5" "$WORK/tied.pt" <<'PY' \
  && pass "tied weight: two names in PyTorch's state_dict, one array in mpiddp's files, the same values" \
  || fail "tied weight round trip"
import sys, h5py, numpy as np, torch
ours, back = h5py.File(sys.argv[1], "r")["params"], h5py.File(sys.argv[2], "r")["params"]
state = torch.load(sys.argv[3])
assert "4.weight" in state and torch.equal(state["4.weight"], state["0.weight"])
assert "layers.4.weight" not in ours and sorted(ours) == sorted(back), (sorted(ours), sorted(back))
assert all(np.array_equal(ours[n][...], back[n][...]) for n in ours)
PY
# model.init takes it back: the first forward of a fresh run starts from those weights.
run_ranks 2 train "$WORK/gpt.ini" --run.dir "$WORK/tied_init" --model.layers "$TIED" --model.init "$WORK/tied_back.h5" \
  --train.max_steps 1 --train.eval false > "$WORK/tied_init.log" 2>&1 \
  && grep -q "^initial weights: $WORK/tied_back.h5" "$WORK/tied_init.log" && pass "model.init loads the tied model" \
  || fail "model.init of the tied model: $(grep -m1 error "$WORK/tied_init.log")"

# ---- scripts/plot draws a sequence model's bits per token and tokens/s ----
"$PYTHON" "$SCRIPTS/plot" "$WORK/gpt" --out "$WORK/gpt.png" --describe > "$WORK/plot.out" 2>&1 \
  && grep -q "^test bits/token: gpt: 2 points" "$WORK/plot.out" && grep -q "^tokens/s: gpt:" "$WORK/plot.out" \
  && [ -s "$WORK/gpt.png" ] && pass "plot: test bits/token and tokens/s panels" || fail "plot: $(cat "$WORK/plot.out")"

# ---- generate: a continuation of a prompt, greedy (deterministic) or sampled with a seed ----
CKPT=$(latest_checkpoint "$WORK/gpt")
"$MPIDDP" generate "$CKPT" --prompt "the word " --tokens 40 > "$WORK/gen1.txt" 2> "$WORK/gen.err" \
  && "$MPIDDP" generate "$CKPT" --prompt "the word " --tokens 40 > "$WORK/gen2.txt" \
  && cmp -s "$WORK/gen1.txt" "$WORK/gen2.txt" && [ "$(head -c 9 "$WORK/gen1.txt")" = "the word " ] \
  && [ "$(wc -c < "$WORK/gen1.txt")" = 50 ] \
  && pass "generate (greedy): the same 40 bytes twice: $(head -c 49 "$WORK/gen1.txt")" \
  || fail "generate greedy: $(cat "$WORK/gen1.txt" "$WORK/gen.err")"
"$MPIDDP" generate "$CKPT" --prompt "w" --tokens 60 --temperature 0.8 --seed 3 > "$WORK/gen3.txt" \
  && "$MPIDDP" generate "$CKPT" --prompt "w" --tokens 60 --temperature 0.8 --seed 3 > "$WORK/gen4.txt" \
  && cmp -s "$WORK/gen3.txt" "$WORK/gen4.txt" && pass "generate (sampled, seed 3) repeats" || fail "generate sampled"
rc=0; "$MPIDDP" generate "$CKPT" --prompt "w" --tokens 0 > "$WORK/gen5.txt" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q "^mpiddp: error: --tokens must be in" "$WORK/gen5.txt" && pass "generate --tokens 0 refused" \
  || fail "generate --tokens 0: exit $rc $(cat "$WORK/gen5.txt")"

# A stored model whose embedding sits inside a residual gives {256} per window, not {T, 256}:
# generate read past its scores (valgrind: invalid read).
cp "$CKPT" "$WORK/wrapped.h5"
"$PYTHON" - "$WORK/wrapped.h5" <<'PY' || fail "editing wrapped.h5"
import sys, re, h5py, numpy as np
with h5py.File(sys.argv[1], "r+") as f:
    text = bytes(f.attrs["config"]).decode()
    text = re.sub(r"(?m)^layers = .*$", "layers = residual(embedding(256,4) ; embedding(256,4)) flatten linear", text)
    f.attrs["config"] = np.bytes_(text.encode())
PY
rc=0; "$MPIDDP" generate "$WORK/wrapped.h5" --prompt "hello" --tokens 2 > "$WORK/wrapped.out" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q "^mpiddp: error: .*wrapped.h5: its first layer is Residual, not the embedding" "$WORK/wrapped.out" \
  && pass "generate refuses a model whose embedding is not its first layer" || fail "generate wrapped: exit $rc $(cat "$WORK/wrapped.out")"

# ---- refusals: one line, naming what does not fit ----
make_image_shards "$WORK/images" 40 1 1
expect_error embedding_on_rows 2 "reads token ids, but $WORK/images is read as rows of features: set data.context" \
  train "$WORK/gpt.ini" --data.train "$WORK/images" --data.context 0 --train.eval false --run.dir "$WORK/r1"
expect_error context_on_rows 2 "no dataset 'tokens'" \
  train "$WORK/gpt.ini" --data.train "$WORK/images" --train.eval false --run.dir "$WORK/r2"
expect_error no_embedding 2 "which only embedding(V, D) takes as the first layer" \
  train "$WORK/gpt.ini" --model.layers "linear(8) linear" --run.dir "$WORK/r3"
expect_error mlp_on_tokens 2 "set model.layers, starting with embedding(V, D)" \
  train "$WORK/gpt.ini" --model.layers "" --run.dir "$WORK/r4"
expect_error heads 2 "3 heads do not divide the width 16" \
  train "$WORK/gpt.ini" --model.layers "embedding(256,16) causal_self_attention(3) linear" --run.dir "$WORK/r5"
expect_error branches 2 "its body gives 16x8 but its input (the identity shortcut) is 16x16" \
  train "$WORK/gpt.ini" --model.layers "embedding(256,16) residual(linear(8)) linear" --run.dir "$WORK/r6"
expect_error small_table 2 "num_embeddings 100 is below the vocabulary size 256" \
  train "$WORK/gpt.ini" --model.layers "embedding(100,16) linear" --run.dir "$WORK/r7"
expect_error late_embedding 2 "layer 2 (layers.1) Embedding: reads token ids, so it must be the first layer" \
  train "$WORK/gpt.ini" --model.layers "embedding(256,16) embedding(256,16) linear" --run.dir "$WORK/r8"
# One score row per sample, not per position: the loss would pair a batch's rows with
# its first targets (train), and generate would read past the scores (it did).
expect_error flat_head 2 "the last layer gives 256 per sample, but a model of token ids must give 16x256" \
  train "$WORK/gpt.ini" --model.layers "embedding(256,8) flatten linear" --run.dir "$WORK/r11"
expect_error long_context 2 "fewer than one window of data.context + 1 = 9001" \
  train "$WORK/gpt.ini" --data.context 9000 --run.dir "$WORK/r9"
expect_error augment_tokens 2 "data.augment: transforms images, but data.context = 16 reads token shards" \
  train "$WORK/gpt.ini" --data.augment hflip --run.dir "$WORK/r10"
finish
