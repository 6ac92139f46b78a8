#!/usr/bin/env bash
# shard + train end to end on generated data that a correct trainer must fit;
# outputs, determinism, 1 rank without mpirun, regression.
source "$(dirname "$0")/lib.sh"

require_python_modules h5py numpy   # to read shards and write chunked ones

make_blobs_shards "$WORK/train" 3000 1 3
make_blobs_shards "$WORK/test" 600 2 1
write_ini "$WORK/blobs.ini" data.train="$WORK/train" data.test="$WORK/test" model.hidden=32 \
  train.batch_size=32 train.epochs=4 train.seed=7 optim.name=sgd optim.lr=0.1 optim.momentum=0.9

# Shards: readable by standard tools, with the documented layout.
h5dump -H "$WORK/train/shard-00000-of-00003.h5" > "$WORK/h5dump.txt" && grep -q 'DATASET "features"' "$WORK/h5dump.txt" \
  && pass "h5dump reads a shard" || fail "h5dump"
"$PYTHON" - "$WORK/train" <<'PY' && pass "shard layout (h5py)" || fail "shard layout"
import glob, sys, h5py
files = sorted(glob.glob(sys.argv[1] + "/*.h5"))
assert len(files) == 3
rows = 0
for f in files:
    with h5py.File(f, "r") as h:
        assert h["features"].dtype == "float32" and h["features"].shape[1] == 8
        assert h["labels"].dtype == "int32" and h["labels"].attrs["num_classes"] == 3
        rows += h["features"].shape[0]
assert rows == 3000, rows
PY

for ranks in 2 3; do
  run_ranks $ranks train "$WORK/blobs.ini" --run.dir "$WORK/run$ranks" > "$WORK/log$ranks" 2>&1 || fail "train on $ranks ranks exited $?"
  acc=$(json_field "$WORK/run$ranks/summary.json" test_accuracy) || acc=missing
  if at_least "$acc" 0.9; then pass "$ranks ranks: test accuracy $acc"
  else fail "$ranks ranks: test accuracy $acc < 0.9"; fi
  [ "$(json_field "$WORK/run$ranks/summary.json" world_size)" = "$ranks" ] || fail "summary world_size"
  [ "$(json_field "$WORK/run$ranks/summary.json" global_batch)" = "$((32 * ranks))" ] || fail "summary global_batch"
done
for key in test_accuracy test_loss epochs world_size global_batch train_samples_per_s wall_s; do
  json_field "$WORK/run2/summary.json" $key >/dev/null || fail "summary.json lacks $key"
done
grep -q '"type":"eval"' "$WORK/run2/metrics.jsonl" && grep -q '"type":"train"' "$WORK/run2/metrics.jsonl" \
  && pass "metrics.jsonl has train and eval records" || fail "metrics.jsonl"
grep -q "^lr = 0.1$" "$WORK/run2/config.ini" && pass "config.ini is the resolved input" || fail "config.ini"
grep -q "rank 1: host .*, local rank 1 of 2" "$WORK/log2" && pass "banner shows the rank mapping" || fail "banner"
[ "$(latest_step "$WORK/run2/checkpoints")" = 188 ] && pass "latest -> step 188 (4 epochs x 47)" \
  || fail "latest pointer: step $(latest_step "$WORK/run2/checkpoints")"

# Determinism: the same input file, seed and world size give identical bits.
run_ranks 2 train "$WORK/blobs.ini" --run.dir "$WORK/again" >/dev/null 2>&1 || fail "second run"
same_parameters "$(latest_checkpoint "$WORK/run2")" "$(latest_checkpoint "$WORK/again")" \
  && pass "two runs give bit-identical parameters" || fail "runs differ"

# Shards that cannot be memory-mapped (chunked + gzip, as other tools write them)
# go through HDF5 hyperslab reads, which must deliver the very same samples.
"$PYTHON" - "$WORK/train" "$WORK/chunked" <<'PY' || fail "writing chunked copies of the shards"
import glob, os, sys, h5py
os.makedirs(sys.argv[2])
for path in sorted(glob.glob(sys.argv[1] + "/*.h5")):
    with h5py.File(path, "r") as src, h5py.File(os.path.join(sys.argv[2], os.path.basename(path)), "w") as dst:
        for name in ("features", "labels"):
            d = dst.create_dataset(name, data=src[name][...], chunks=True, compression="gzip")
            for k, v in src[name].attrs.items(): d.attrs[k] = v
PY
run_ranks 2 train "$WORK/blobs.ini" --data.train "$WORK/chunked" --run.dir "$WORK/chunkrun" > "$WORK/chunklog" 2>&1 \
  || fail "training on chunked shards"
grep -q "train data: .*HDF5 hyperslab reads" "$WORK/chunklog" && grep -q "test data: .*memory-mapped reads" "$WORK/chunklog" \
  && pass "chunked shards use hyperslab reads, contiguous ones the mapping" || fail "reader choice"
same_parameters "$(latest_checkpoint "$WORK/run2")" "$(latest_checkpoint "$WORK/chunkrun")" \
  && pass "mapped and hyperslab readers train bit-identically" || fail "readers disagree"

# One rank, no launcher.
timeout "$RUN_TIMEOUT" "$MPIDDP" train "$WORK/blobs.ini" --run.dir "$WORK/single" --train.epochs 2 >/dev/null 2>&1 \
  && pass "1 rank without mpirun" || fail "1 rank without mpirun"

# Regression: y = 2 f0 - f1 + 0.5, MSE must fall well below the target variance.
awk 'BEGIN { srand(3); for (i = 0; i < 2000; i++) { a = rand() * 2 - 1; b = rand() * 2 - 1;
  printf "%.5f,%.5f,%.5f\n", a, b, 2 * a - b + 0.5 } }' > "$WORK/reg.csv"
"$MPIDDP" shard --format csv --task regression --input "$WORK/reg.csv" --out "$WORK/reg" --shards 2 >/dev/null
run_ranks 2 train --data.train "$WORK/reg" --data.test "$WORK/reg" --data.task regression --model.hidden 16 \
  --optim.name adamw --optim.lr 0.01 --train.epochs 10 --train.batch_size 32 --run.dir "$WORK/regrun" >/dev/null 2>&1 \
  || fail "regression run"
loss=$(json_field "$WORK/regrun/summary.json" test_loss) || loss=missing
below "$loss" 0.01 && pass "regression MSE $loss" || fail "regression MSE $loss"
finish
