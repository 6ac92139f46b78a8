#!/usr/bin/env bash
# train.trace_steps: per-rank Chrome traces that parse, nest, show every bucket's
# all-reduce, add up to the step; scripts/trace-merge; off = no trace, same bits.
source "$(dirname "$0")/lib.sh"

make_blobs_shards "$WORK/train" 3000 1 2
# 5 layers; 3 buckets (first cap 131 floats, then 262: [W3 b3] [W2 b2] [W1 b1]).
write_ini "$WORK/trace.ini" data.train="$WORK/train" model.hidden=64,64 train.batch_size=32 train.epochs=1 \
  train.max_steps=8 train.eval=false train.seed=3 ddp.first_bucket_mb=0.0005 ddp.bucket_mb=0.001 \
  checkpoint.every_steps=3 checkpoint.every_epochs=0

run_ranks 2 train "$WORK/trace.ini" --train.trace_steps 3 --run.dir "$WORK/on" > "$WORK/on.log" 2>&1 \
  || fail "traced run exited $?"
run_ranks 2 train "$WORK/trace.ini" --run.dir "$WORK/off" > "$WORK/off.log" 2>&1 || fail "untraced run exited $?"
[ ! -e "$WORK/off/trace" ] && pass "tracing off writes no trace directory" || fail "trace/ written with tracing off"
same_parameters "$(latest_checkpoint "$WORK/on")" "$(latest_checkpoint "$WORK/off")" \
  && pass "tracing leaves the parameters bit-identical" || fail "tracing changed the parameters"

"$PYTHON" - "$WORK/on/trace" <<'PY' && pass "per-rank traces: format, nesting, buckets, step sums" || fail "per-rank traces"
import glob, json, os, re, sys
PHASES = set("XBEMiIbenCsft")
files = sorted(glob.glob(os.path.join(sys.argv[1], "job-*-rank-*.json")))
assert len(files) == 2 and re.fullmatch(r"job-\d{8}T\d{6}Z-\d+-rank-0\.json", os.path.basename(files[0])), files
for rank in (0, 1):
    t = json.load(open(files[rank]))
    events, other = t["traceEvents"], t["otherData"]
    assert other["traced_steps"] == 3 and other["warmup_steps"] == 2 and other["buckets"] == 3, other
    assert all(e["ph"] in PHASES and e["pid"] == rank for e in events)
    spans = [e for e in events if e["ph"] == "X"]
    # Fractional microseconds (nanosecond ticks, strictly increasing): nesting is exact.
    assert all(isinstance(e["ts"], (int, float)) and e["dur"] > 0 for e in spans)
    names = [e for e in events if e["ph"] == "M" and e["name"] == "process_name"]
    assert names[0]["args"]["name"] == f"rank {rank}", names
    # Spans nest per track: a span ends inside the one it starts in.
    for tid in {e["tid"] for e in spans}:
        stack = []
        for e in sorted((e for e in spans if e["tid"] == tid), key=lambda e: (e["ts"], -e["dur"])):
            while stack and e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"]:
                stack.pop()
            assert not stack or e["ts"] + e["dur"] <= stack[-1]["ts"] + stack[-1]["dur"], (rank, tid, stack[-1], e)
            stack.append(e)
    main = [e for e in spans if e["tid"] == 0]
    steps = [e for e in main if re.fullmatch(r"step \d+", e["name"])]
    assert [e["name"] for e in steps] == ["step 2", "step 3", "step 4"], [e["name"] for e in steps]
    def count(name):
        return sum(e["name"] == name for e in main)
    for name in ["agree", "data wait", "compute", "loss", "gradient wait", "device wait", "optimizer"]:
        assert count(name) == 3, (name, count(name))
    for layer in range(5):
        assert count(f"forward layer {layer}") == 3 and count(f"backward layer {layer}") == 3, layer
    assert count("checkpoint") >= 1
    # Every bucket: a launch-to-completion span per step on its own track, inside the step.
    for b in range(3):
        mine = [e for e in spans if e["name"] == f"allreduce bucket {b}"]
        assert len(mine) == 3 and all(e["tid"] == 100 + b for e in mine), (b, mine)
        for e, s in zip(mine, steps):
            assert s["ts"] <= e["ts"] and e["ts"] + e["dur"] <= s["ts"] + s["dur"], (e, s)
    # The step's top-level spans, by containment alone (no durations compared with
    # a tolerance): agree, compute, optimizer in that order, one checkpoint at most,
    # disjoint, inside the step; `data wait` sits inside `agree`, never beside it.
    for s in steps:
        end = s["ts"] + s["dur"]
        inner = [e for e in main if e is not s and s["ts"] <= e["ts"] and e["ts"] + e["dur"] <= end]
        def contains(o, e):
            return o is not e and o["ts"] < e["ts"] and e["ts"] + e["dur"] < o["ts"] + o["dur"]
        top = sorted((e for e in inner if not any(contains(o, e) for o in inner)), key=lambda e: e["ts"])
        names = [e["name"] for e in top if e["name"] != "checkpoint"]
        assert names == ["agree", "compute", "optimizer"], (rank, s["name"], [e["name"] for e in top])
        assert all(a["ts"] + a["dur"] < b["ts"] for a, b in zip(top, top[1:])), (rank, s["name"], top)
        assert sum(e["dur"] for e in top) < s["dur"], (rank, s, top)
        wait = [e for e in inner if e["name"] == "data wait"]
        agree = [e for e in top if e["name"] == "agree"]
        assert len(wait) == 1 and contains(agree[0], wait[0]), (rank, s["name"], wait, agree)
PY

"$MPIDDP_SOURCE_DIR/scripts/trace-merge" "$WORK/on" > "$WORK/merge.log" 2>&1 || fail "trace-merge exited $?"
"$PYTHON" - "$WORK/on/trace" <<'PY' && pass "trace-merge: one process per rank on a common clock" || fail "merged trace"
import glob, json, os, sys
merged_files = glob.glob(os.path.join(sys.argv[1], "job-*-merged.json"))
assert len(merged_files) == 1, merged_files
events = json.load(open(merged_files[0]))["traceEvents"]
assert {e["pid"] for e in events} == {0, 1}
names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
assert names == {0: "rank 0", 1: "rank 1"}, names
# Each rank's events are its own file's, shifted by the difference of the clock
# readings taken after the common barrier (arithmetic, not a bound on clocks).
sync = {}
for rank in (0, 1):
    t = json.load(open(glob.glob(os.path.join(sys.argv[1], f"job-*-rank-{rank}.json"))[0]))
    sync[rank] = t["otherData"]["clock_sync_us"]
    own = [(e["name"], e["ts"]) for e in t["traceEvents"] if e["ph"] == "X"]
    merged = [(e["name"], e["ts"]) for e in events if e["pid"] == rank and e["ph"] == "X"]
    shift = sync[0] - sync[rank]
    assert len(own) == len(merged) and all(a[0] == b[0] and abs(a[1] + shift - b[1]) < 1e-3 for a, b in zip(own, merged)), rank
assert sum(e["name"] == "agree" for e in events if e["ph"] == "X") == 6
PY
"$MPIDDP_SOURCE_DIR/scripts/trace-merge" "$WORK/off" > "$WORK/merge-off.log" 2>&1 && fail "trace-merge without traces succeeded" \
  || { grep -q "^trace-merge: error: no trace files" "$WORK/merge-off.log" && pass "trace-merge refuses a run without traces" \
       || fail "trace-merge error: $(cat "$WORK/merge-off.log")"; }

# A resumed job (here at world 1) writes its own files beside the first job's;
# trace-merge merges one job, the newest (by the global step each job started at,
# which its files record: the two tags may name the same second) unless --job names another.
run_ranks 1 train "$WORK/trace.ini" --train.trace_steps 2 --train.max_steps 16 --run.dir "$WORK/on" --resume auto \
  > "$WORK/on2.log" 2>&1 || fail "traced resumed run exited $?"
jobs=$(ls "$WORK/on/trace" | sed -n 's/^\(job-.*\)-rank-[0-9]*\.json$/\1/p' | sort -u)
# The resumed job is the one with one rank's file.
first="" second=""
for job in $jobs; do
  if [ -e "$WORK/on/trace/$job-rank-1.json" ]; then first=$job; else second=$job; fi
done
"$PYTHON" - "$WORK/on/trace/$first-rank-0.json" "$WORK/on/trace/$second-rank-0.json" <<'PY' \
  && pass "each job's files record the global step it started at (0, and the resume's 8)" || fail "job_first_step"
import json, sys
steps = [json.load(open(path))["otherData"]["job_first_step"] for path in sys.argv[1:]]
assert steps == [0, 8], steps
PY
[ "$(wc -l <<< "$jobs")" = 2 ] && [ "$(ls "$WORK/on/trace" | grep -c "^$first-rank-")" = 2 ] \
  && [ "$(ls "$WORK/on/trace" | grep -c "^$second-rank-")" = 1 ] \
  && pass "the resumed job's trace is its own ($second: 1 rank) beside the first job's ($first: 2 ranks)" \
  || fail "trace files after a resume: $(ls "$WORK/on/trace" | tr '\n' ' ')"
"$MPIDDP_SOURCE_DIR/scripts/trace-merge" "$WORK/on" > "$WORK/merge2.log" 2>&1 \
  && grep -q "^$WORK/on/trace/$second-merged.json: 1 rank(s)" "$WORK/merge2.log" \
  && grep -q "trace-merge: note: 2 jobs traced this run; merging the newest, $second" "$WORK/merge2.log" \
  && pass "trace-merge merges the newest job alone, and says so" || fail "trace-merge newest: $(cat "$WORK/merge2.log")"
"$MPIDDP_SOURCE_DIR/scripts/trace-merge" "$WORK/on" --job "$first" > "$WORK/merge3.log" 2>&1 \
  && grep -q "^$WORK/on/trace/$first-merged.json: 2 rank(s)" "$WORK/merge3.log" \
  && pass "trace-merge --job merges the first job" || fail "trace-merge --job: $(cat "$WORK/merge3.log")"
# Newest by the recorded step, not the clock in the tag: the resumed job's file
# renamed to a tag from 1970 is still the one merged.
mv "$WORK/on/trace/$second-rank-0.json" "$WORK/on/trace/job-19700101T000000Z-1-rank-0.json"
"$MPIDDP_SOURCE_DIR/scripts/trace-merge" "$WORK/on" > "$WORK/merge4.log" 2>&1 \
  && grep -q "merging the newest, job-19700101T000000Z-1 " "$WORK/merge4.log" \
  && pass "trace-merge takes the job that started at the latest step, whatever its tag's time" \
  || fail "trace-merge newest by step: $(cat "$WORK/merge4.log")"

# ---- layers inside residual blocks get spans of their own; scripts/trace-shares ----
make_image_shards "$WORK/images" 256 2 2
run_ranks 2 train /dev/null --data.train "$WORK/images" --model.input_shape 1,8,8 --train.batch_size 16 \
  --model.layers "conv2d(4,3,padding=1) residual(conv2d(4,3,padding=1) batchnorm2d relu residual(relu)) flatten linear" \
  --train.max_steps 6 --train.eval false --train.trace_steps 3 --checkpoint.every_epochs 0 --run.dir "$WORK/res" \
  > "$WORK/res.log" 2>&1 || fail "traced residual run exited $?"
"$MPIDDP_SOURCE_DIR/scripts/trace-shares" "$WORK/res" --json > "$WORK/shares.json" 2> "$WORK/shares.err" \
  || fail "trace-shares: $(cat "$WORK/shares.err")"
"$MPIDDP_SOURCE_DIR/scripts/trace-shares" "$WORK/res" > "$WORK/shares.txt" 2>&1 || fail "trace-shares (text) exited $?"
"$PYTHON" - "$WORK/res/trace" "$WORK/shares.json" "$WORK/shares.txt" <<'PY' \
  && pass "inner layers: their own spans with their kinds, none for a ReLU done inside BatchNorm; trace-shares: kinds and the rest add up to 100%, the mean traced step" \
  || fail "residual trace or trace-shares"
import glob, json, re, sys
# layers.1.body.2 (ReLU) runs inside the BatchNorm before it: no span of its own.
kinds = {"layers.0": "Conv2d", "layers.1": "Residual", "layers.1.body.0": "Conv2d", "layers.1.body.1": "BatchNorm2d",
         "layers.1.body.3": "Residual", "layers.1.body.3.body.0": "ReLU", "layers.2": "Flatten", "layers.3": "Linear"}
for path in sorted(glob.glob(sys.argv[1] + "/job-*-rank-*.json")):
    spans = [e for e in json.load(open(path))["traceEvents"] if e["ph"] == "X" and e["tid"] == 0]
    seen = {}
    for e in spans:
        m = re.fullmatch(r"(forward|backward) (layer (\d+)|(layers\.[\w.]+))", e["name"])
        if m:
            name = "layers." + m[3] if m[3] else m[4]
            assert e["args"]["kind"] == kinds[name], (path, e)
            seen[(m[1], name)] = seen.get((m[1], name), 0) + 1
    # 3 traced steps: a forward and a backward span of every layer, nested ones too, in each.
    assert seen == {(d, n): 3 for d in ("forward", "backward") for n in kinds}, (path, seen)
    # An inner span lies inside its block's span.
    outer = [e for e in spans if e["name"] == "forward layer 1"]
    inner = [e for e in spans if e["name"] == "forward layers.1.body.3.body.0"]
    assert all(any(o["ts"] <= i["ts"] and i["ts"] + i["dur"] <= o["ts"] + o["dur"] for o in outer) for i in inner)
result = json.load(open(sys.argv[2]))
shares = result["shares"]
assert result["ranks"] == 2 and result["steps"] == 3, result
# step_ms: the slowest rank's mean traced step (bench.sh's steady-state share of the peak).
means = []
for path in sorted(glob.glob(sys.argv[1] + "/job-*-rank-*.json")):
    steps = [e["dur"] for e in json.load(open(path))["traceEvents"]
             if e["ph"] == "X" and e["tid"] == 0 and re.fullmatch(r"step \d+", e["name"])]
    means.append(sum(steps) / len(steps) / 1e3)
assert len(means) == 2 and abs(result["step_ms"] - max(means)) <= 1e-6 * max(means), (result, means)
assert abs(sum(shares.values()) - 1) < 1e-9 and all(v >= 0 for v in shares.values()), shares
for kind in ("Conv2d", "BatchNorm2d", "ReLU", "Residual", "Linear", "optimizer", "loss", "other"):
    assert shares.get(kind, 0) > 0, (kind, shares)
assert list(shares.values()) == sorted(shares.values(), reverse=True), shares
text = open(sys.argv[3]).read()
assert re.fullmatch(r"([\w -]+ \d+\.\d%, )+[\w -]+ \d+\.\d% \(2 ranks, 3 steps\)\n", text) and "Conv2d " in text, text
PY
"$MPIDDP_SOURCE_DIR/scripts/trace-shares" "$WORK/off" > "$WORK/shares-off.log" 2>&1 \
  && fail "trace-shares without traces succeeded" \
  || { grep -q "^trace-shares: error: no trace files" "$WORK/shares-off.log" && pass "trace-shares refuses a run without traces" \
       || fail "trace-shares error: $(cat "$WORK/shares-off.log")"; }

# trace-shares --device: the GPU track's spans take their host spans' kinds; the stream's idle time in a step is
# "other". A GPU run's trace cannot be made here, so this one is written by hand: on the device the step lasts
# 200 us, the Linear 100, the loss 20, nothing 80.
mkdir -p "$WORK/gpu/trace"
"$PYTHON" - "$WORK/gpu/trace/job-20260101T000000Z-1-rank-0.json" <<'PY'
import json, sys
def span(name, tid, ts, dur, kind=None):
    e = {"name": name, "ph": "X", "pid": 0, "tid": tid, "ts": ts, "dur": dur}
    if kind:
        e["args"] = {"kind": kind}
    return e
events = [span("step 4", 0, 0.0, 100.0), span("forward layer 0", 0, 10.0, 10.0, "Linear"), span("loss", 0, 20.0, 10.0),
          span("step 4", 1, 5.0, 200.0), span("forward layer 0", 1, 55.0, 100.0), span("loss", 1, 155.0, 20.0)]
json.dump({"traceEvents": events, "otherData": {"clock_sync_us": 0}}, open(sys.argv[1], "w"))
PY
"$MPIDDP_SOURCE_DIR/scripts/trace-shares" "$WORK/gpu" --device --json > "$WORK/gpu-shares.json" 2>&1 \
  && "$PYTHON" -c 'import json, sys
r = json.load(open(sys.argv[1]))
want = {"Linear": 0.5, "other": 0.4, "loss": 0.1}
assert r["shares"].keys() == want.keys() and all(abs(r["shares"][k] - v) < 1e-9 for k, v in want.items()), r
assert abs(r["step_ms"] - 0.2) < 1e-9 and r["steps"] == 1, r' "$WORK/gpu-shares.json" \
  && pass "trace-shares --device: the GPU track's time by its host spans' kinds, the stream's idle time as other" \
  || fail "trace-shares --device: $(cat "$WORK/gpu-shares.json")"
"$MPIDDP_SOURCE_DIR/scripts/trace-shares" "$WORK/on" --device > "$WORK/on-device.log" 2>&1 \
  && fail "trace-shares --device on a CPU run's trace succeeded" \
  || { grep -q "no traced step on the device track" "$WORK/on-device.log" \
         && pass "trace-shares --device refuses a CPU run's trace (no device track)" \
         || fail "trace-shares --device on a CPU trace: $(cat "$WORK/on-device.log")"; }

# train.trace_after moves the window: steps 5 and 6 of 8 (counted from 0), nothing else.
run_ranks 2 train "$WORK/trace.ini" --train.trace_steps 2 --train.trace_after 5 --run.dir "$WORK/after" \
  > "$WORK/after.log" 2>&1 || fail "run with train.trace_after exited $?"
"$PYTHON" - "$WORK/after/trace" <<'PY' && pass "train.trace_after 5: the trace holds steps 5 and 6 and says 5 warm-up steps" \
  || fail "train.trace_after"
import glob, json, os, sys
for path in sorted(glob.glob(os.path.join(sys.argv[1], "job-*-rank-*.json"))):
    t = json.load(open(path))
    assert t["otherData"]["warmup_steps"] == 5 and t["otherData"]["traced_steps"] == 2, t["otherData"]
    steps = sorted(e["name"] for e in t["traceEvents"] if e["ph"] == "X" and e["name"].startswith("step"))
    assert steps == ["step 5", "step 6"], steps
PY

expect_error negative_trace_steps 1 "train.trace_steps" train "$WORK/trace.ini" --train.trace_steps -1 --run.dir "$WORK/bad"
expect_error negative_trace_after 1 "train.trace_after" train "$WORK/trace.ini" --train.trace_after -1 --run.dir "$WORK/bad"
finish
