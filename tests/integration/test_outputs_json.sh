#!/usr/bin/env bash
# metrics.jsonl and summary.json (written with nlohmann-json): every line is one
# JSON object on one line, fields in the documented order, "type":"..." written
# without spaces (what scripts grep for); and `mpiddp shard` progress lines.
source "$(dirname "$0")/lib.sh"

# ---- shard progress: none on a small input, one per block with --progress-every 0 ----
make_blobs_csv "$WORK/small.csv" 100 1
"$MPIDDP" shard --format csv --input "$WORK/small.csv" --out "$WORK/small" --shards 1 > "$WORK/small.out"
[ "$(wc -l < "$WORK/small.out")" = 1 ] && grep -q "^wrote 100 rows" "$WORK/small.out" \
  && pass "small conversion: only the closing line" || { fail "small conversion printed more"; cat "$WORK/small.out" >&2; }

make_blobs_csv "$WORK/big.csv" 20000 2
"$MPIDDP" shard --format csv --input "$WORK/big.csv" --out "$WORK/big" --shards 2 --progress-every 0 > "$WORK/big.out"
# 2 shards of 10000 rows = blocks of 4096, 4096, 1808 each: 6 blocks, a line after each but the last.
grep "^shard: " "$WORK/big.out" > "$WORK/progress.txt" || true
[ "$(wc -l < "$WORK/progress.txt")" = 5 ] && pass "a progress line per block but the last" \
  || { fail "progress lines: $(wc -l < "$WORK/progress.txt")"; cat "$WORK/big.out" >&2; }
awk 'BEGIN { ok = 1 } {
       if ($0 !~ /^shard: [0-9]+\/20000 rows \([0-9]+%\), [0-9]+ rows\/s, ETA [0-9]+:[0-9][0-9]$/) ok = 0
       split($2, r, "/"); if (r[1] + 0 <= last) ok = 0; last = r[1] + 0 }
     END { exit !(ok && last == 18192) }' "$WORK/progress.txt" \
  && pass "progress lines: rows rising to 18192/20000, rows/s, ETA" || fail "progress line format"
expect_error bad-progress-every 1 "--progress-every" shard --format csv --input "$WORK/small.csv" \
  --out "$WORK/x" --progress-every -1
[ "$EXPECT_RC" = 2 ] || fail "bad --progress-every: exit $EXPECT_RC, not 2"

# ---- the JSON files of a short run ----
make_blobs_shards "$WORK/test" 200 3 1
write_ini "$WORK/run.ini" data.train="$WORK/big" data.test="$WORK/test" model.hidden=16 \
  train.batch_size=500 train.epochs=2 train.log_every=5 optim.name=sgd optim.lr=0.1
run_ranks 1 train "$WORK/run.ini" --run.dir "$WORK/run" > "$WORK/train.log" 2>&1 || fail "train exited $?"
"$PYTHON" - "$WORK/run" <<'PY' && pass "metrics.jsonl and summary.json: one object per line, fields in order" || fail "JSON outputs"
import json, sys
d = sys.argv[1]
train = ["type", "epoch", "step", "global_step", "loss", "lr", "samples_per_s"]
evals = ["type", "epoch", "global_step", "test_loss", "test_accuracy", "samples"]
kinds = []
for line in open(d + "/metrics.jsonl"):
    assert line.endswith("}\n") and ": " not in line and ", " not in line, line
    record = json.loads(line)
    assert list(record) == (train if record["type"] == "train" else evals), line
    assert line.startswith('{"type":"%s",' % record["type"]), line
    kinds.append(record["type"])
assert kinds.count("eval") == 2 and kinds.count("train") >= 2, kinds
text = open(d + "/summary.json").read()
assert text.endswith("}\n") and text.count("\n") == 1, text
summary = json.loads(text)
assert list(summary)[:3] == ["status", "test_accuracy", "test_loss"] and summary["status"] == "completed", summary
assert isinstance(summary["steps"], int) and summary["steps"] == 80 and summary["world_size"] == 1, summary
PY
# Training FLOPs per sample from the geometry, 8 -> 16 -> 3: the first product runs forward and weight
# gradient (its input gradient is never needed), the second also its input gradient.
"$PYTHON" - "$WORK/run/summary.json" <<'PY' && pass "summary: training FLOPs per sample and GFLOP/s per rank" \
  || fail "FLOP fields"
import json, sys
s = json.load(open(sys.argv[1]))
want = 2 * (2 * 8 * 16) + 3 * (2 * 16 * 3)
assert s["train_flops_per_sample"] == want, (s["train_flops_per_sample"], want)
rate = want * s["train_samples_per_s"] / s["world_size"] / 1e9
assert abs(s["train_gflops_per_s_per_rank"] - rate) <= 1e-9 * rate, (s["train_gflops_per_s_per_rank"], rate)
PY
grep -q "samples/s (data wait .*), [0-9.]* GFLOP/s per rank" "$WORK/train.log" && pass "the closing line gives GFLOP/s per rank" \
  || fail "closing line: $(grep '^done' "$WORK/train.log")"
finish
