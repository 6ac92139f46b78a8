#!/usr/bin/env bash
# data.augment on small IDX images: runs repeat bit-exactly (with batches read on
# a loader thread or inline, data.loader), a resume mid-epoch
# is bit-identical to the uninterrupted run, augmentation changes what is
# trained, and bad values or non-image data are refused with one line (exit 2).
source "$(dirname "$0")/lib.sh"

# 480 random 12x12 images in 4 classes, as an IDX pair (sample_shape [12, 12]).
"$PYTHON" - "$WORK" <<'PY' || fail "writing IDX files"
import gzip, random, struct, sys
w, n, side = sys.argv[1], 480, 12
r = random.Random(5)
def idx(path, magic, dims, payload):
    with gzip.open(path, "wb") as f:
        f.write(struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in dims) + payload)
idx(f"{w}/images.gz", 0x803, (n, side, side), r.randbytes(n * side * side))
idx(f"{w}/labels.gz", 0x801, (n,), bytes(r.randrange(4) for _ in range(n)))
PY
"$MPIDDP" shard --format idx --images "$WORK/images.gz" --labels "$WORK/labels.gz" --out "$WORK/img" --shards 2 \
  >/dev/null || fail "shard the images"
make_blobs_shards "$WORK/blobs" 200 1 1

# 2 ranks x batch 16: 15 steps per epoch, 45 in all.
write_ini "$WORK/run.ini" data.train="$WORK/img" data.test="$WORK/img" data.augment="hflip crop(2) erase" \
  model.hidden=16 train.batch_size=16 train.epochs=3 train.seed=4 train.log_every=5 optim.lr=0.05 \
  checkpoint.every_epochs=1
# A checkpoint's arrays and counters, without what differs between runs by design.
contents() { "$MPIDDP" inspect checkpoint "$1" | grep -v -e '^format_version' -e '^run_id'; }

"$MPIDDP" train --help > "$WORK/help.txt" && grep -q "data.augment" "$WORK/help.txt" \
  && pass "train --help lists data.augment" || fail "--help"

# The runs are independent, and mostly MPI start-up: they run side by side.
run_ranks 2 train "$WORK/run.ini" --run.dir "$WORK/a" --data.loader thread > "$WORK/a.log" 2>&1 & job_a=$!
run_ranks 2 train "$WORK/run.ini" --run.dir "$WORK/b" --data.loader inline > "$WORK/b.log" 2>&1 & job_b=$!
run_ranks 2 train "$WORK/run.ini" --run.dir "$WORK/plain" --data.augment "" > "$WORK/plain.log" 2>&1 & job_plain=$!
run_ranks 2 train "$WORK/run.ini" --run.dir "$WORK/erased" --data.augment "erase(1)" > "$WORK/erased.log" 2>&1 &
job_erased=$!
# Stopped in epoch 2 (after global step 21 of 45) by SIGUSR1 on rank 1, resumed below.
run_ranks 2 train "$WORK/run.ini" --run.dir "$WORK/split" --debug.fail_rank 1 --debug.fail_step 20 \
  --debug.fail_mode signal > "$WORK/split1.log" 2>&1 & job_split=$!
# World 1 x batch 32 and world 2 x batch 16 (no shuffle) see the same samples per step: the same model, to 1e-5.
run_ranks 1 train "$WORK/run.ini" --run.dir "$WORK/w1" --train.batch_size 32 --data.shuffle false --train.epochs 2 \
  > "$WORK/w1.log" 2>&1 & job_w1=$!
run_ranks 2 train "$WORK/run.ini" --run.dir "$WORK/w2" --data.shuffle false --train.epochs 2 > "$WORK/w2.log" 2>&1 & job_w2=$!
# Refused: one line naming data.augment, exit 2 (each check's lines go to its .result file).
bad_values=("crop(0)" "crop(x)" "crop" "vflip" "crop(12)" "erase(2)")
for bad in "${bad_values[@]}"; do
  ( expect_error "bad-$bad" 1 "key 'data.augment'" train "$WORK/run.ini" --run.dir "$WORK/x" --data.augment "$bad"
    [ "$EXPECT_RC" = 2 ] || fail "bad-$bad: exit $EXPECT_RC, not 2" ) > "$WORK/bad-$bad.result" 2>&1 &
done
( expect_error not-images 1 "$WORK/blobs: key 'data.augment'" train "$WORK/run.ini" --run.dir "$WORK/x" \
    --data.train "$WORK/blobs" --data.test "" --data.augment hflip
  [ "$EXPECT_RC" = 2 ] || fail "not-images: exit $EXPECT_RC, not 2" ) > "$WORK/bad-not-images.result" 2>&1 &

rc=0; wait "$job_a" || rc=$?; [ "$rc" = 0 ] || fail "augmented run: exit $rc"
rc=0; wait "$job_b" || rc=$?; [ "$rc" = 0 ] || fail "repeated run: exit $rc"
rc=0; wait "$job_plain" || rc=$?; [ "$rc" = 0 ] || fail "plain run: exit $rc"
rc=0; wait "$job_erased" || rc=$?; [ "$rc" = 0 ] || fail "erase(1) run: exit $rc"
rc=0; wait "$job_split" || rc=$?; [ "$rc" = 75 ] && pass "stopped by the signal (exit 75)" || fail "stop: exit $rc"
rc=0; wait "$job_w1" || rc=$?; [ "$rc" = 0 ] || fail "world 1 run: exit $rc"
rc=0; wait "$job_w2" || rc=$?; [ "$rc" = 0 ] || fail "world 2 run: exit $rc"
run_ranks 2 train "$WORK/run.ini" --run.dir "$WORK/split" --resume auto > "$WORK/split2.log" 2>&1 || fail "resume: exit $?"
wait  # the refusals
for result in "$WORK"/bad-*.result; do
  cat "$result"
  FAILURES=$((FAILURES + $(grep -c "^FAIL:" "$result" || true)))
done

grep -q "batches read on a loader thread (data.loader = thread)" "$WORK/a.log" \
  && grep -q "batches read inline, in the training thread (data.loader = inline)" "$WORK/b.log" \
  && pass "the banners say where the batches were read" || fail "banner: $(grep -h "batches read" "$WORK"/[ab].log)"
grep -q "augment = hflip crop(2) erase(0.5)" "$WORK/a/config.ini" && pass "config.ini records data.augment" \
  || fail "config.ini: $(grep augment "$WORK/a/config.ini" || true)"
if diff <(contents "$(latest_checkpoint "$WORK/a")") <(contents "$(latest_checkpoint "$WORK/b")") > "$WORK/ab.diff"; then
  pass "two augmented runs, loader thread and inline: identical checkpoints ($(contents "$(latest_checkpoint "$WORK/a")" | grep -c ' \[') arrays)"
else fail "two augmented runs differ"; head -5 "$WORK/ab.diff" >&2; fi
if diff <(contents "$(latest_checkpoint "$WORK/a")") <(contents "$(latest_checkpoint "$WORK/plain")") >/dev/null; then
  fail "augmentation changed nothing"
else pass "augmentation changes the trained weights"; fi
if diff <(contents "$(latest_checkpoint "$WORK/erased")") <(contents "$(latest_checkpoint "$WORK/plain")") >/dev/null; then
  fail "erase(1) changed nothing"
else pass "erase(1) alone changes the trained weights"; fi
grep -q "resuming from .*global step 21" "$WORK/split2.log" && pass "resumed mid-epoch 2" \
  || { fail "resume message"; grep -i resum "$WORK/split2.log" >&2 || true; }
if diff <(contents "$(latest_checkpoint "$WORK/a")") <(contents "$(latest_checkpoint "$WORK/split")") > "$WORK/split.diff"; then
  pass "resumed run identical to the uninterrupted one"
else fail "resumed run differs"; head -5 "$WORK/split.diff" >&2; fi
if "$PYTHON" -c "import h5py, numpy" 2>/dev/null; then
  "$PYTHON" - "$(latest_checkpoint "$WORK/w1")" "$(latest_checkpoint "$WORK/w2")" <<'PY' \
    && pass "world 1 x 32 and world 2 x 16 train the same model" || fail "world size changes the augmented model"
import sys, h5py, numpy as np
a, b = (h5py.File(p, "r")["params"] for p in sys.argv[1:])
worst = max(float(np.abs(a[k][...] - b[k][...]).max()) for k in a)
print(f"largest parameter difference {worst:.3g}")
sys.exit(0 if worst < 1e-5 else 1)
PY
else echo "note: no h5py/numpy in $PYTHON: world sizes not compared"; fi
finish
