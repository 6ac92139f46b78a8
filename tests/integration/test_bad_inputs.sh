#!/usr/bin/env bash
# Every bad input ends the whole 2-rank job with one error line naming the
# file/key/rank and a non-zero exit, never a hang.
source "$(dirname "$0")/lib.sh"
require_python_modules h5py numpy   # to write malformed shards

make_blobs_shards "$WORK/good" 400 1 2
base=(train --data.train "$WORK/good" --train.epochs 1 --run.dir "$WORK/run")

# Input-file keys and values.
printf '[data]\ntrain = %s\n[train]\nbogus_key = 1\n' "$WORK/good" > "$WORK/unknown.ini"
expect_error unknown-key 2 "$WORK/unknown.ini: unrecognised option 'train.bogus_key'" train "$WORK/unknown.ini"
printf '[data]\ntrain = %s\n[optim]\nlr = fast\n' "$WORK/good" > "$WORK/malformed.ini"
expect_error malformed-value 2 "optim.lr" train "$WORK/malformed.ini"
expect_error batch-size-zero 2 "key 'train.batch_size': must be at least 1, got 0" "${base[@]}" --train.batch_size 0
expect_error unknown-override 2 "train.nope" "${base[@]}" --train.nope 3
expect_error missing-input-file 2 "/no/such.ini: cannot open input file" train /no/such.ini

# Shards.
expect_error missing-shards 2 "$WORK/absent: no such shard file" train --data.train "$WORK/absent" --run.dir "$WORK/run"
mkdir -p "$WORK/emptydir"
expect_error no-shards-in-dir 2 "$WORK/emptydir: directory holds no *.h5 shards" train --data.train "$WORK/emptydir"
mkdir -p "$WORK/garbage" && garbage_bytes 5000 23 > "$WORK/garbage/shard-0.h5"
expect_error unreadable-shard 2 "$WORK/garbage/shard-0.h5: not a readable HDF5 file" train --data.train "$WORK/garbage"
expect_error wrong-dataset-name 2 "no dataset 'pixels' (set data.features)" "${base[@]}" --data.features pixels

"$PYTHON" - "$WORK" <<'PY' || fail "writing malformed shards (h5py)"
import sys, h5py, numpy as np
w = sys.argv[1]
import os
def shard(path, x, y, classes=3):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with h5py.File(path, "w") as f:
        d = f.create_dataset("features", data=x)
        if x.dtype == np.uint8: d.attrs["scale"] = 1 / 255
        l = f.create_dataset("labels", data=y)
        l.attrs["num_classes"] = classes
rng = np.random.default_rng(0)
shard(f"{w}/shapes/a.h5", rng.random((10, 8), dtype=np.float32), np.zeros(10, np.int32))
shard(f"{w}/shapes/b.h5", rng.random((10, 9), dtype=np.float32), np.zeros(10, np.int32))
shard(f"{w}/dtypes/a.h5", rng.random((10, 8), dtype=np.float32), np.zeros(10, np.int32))
shard(f"{w}/dtypes/b.h5", (rng.random((10, 8)) * 255).astype(np.uint8), np.zeros(10, np.int32))
shard(f"{w}/empty/a.h5", np.zeros((0, 8), np.float32), np.zeros(0, np.int32))
# Label 7 in a 3-class set, in the last rows only: one rank meets it mid-epoch.
y = rng.integers(0, 3, 64).astype(np.int32); y[60] = 7
shard(f"{w}/badlabel/a.h5", rng.random((64, 8), dtype=np.float32), y)
shard(f"{w}/labeltype/a.h5", rng.random((10, 8), dtype=np.float32), np.zeros(10, np.float64))
PY
expect_error shapes-disagree 2 "$WORK/shapes/b.h5: dataset 'features' has 9 features per sample but $WORK/shapes/a.h5 has 8" \
  train --data.train "$WORK/shapes"
expect_error dtypes-disagree 2 "$WORK/dtypes/b.h5: dataset 'features' has type uint8" train --data.train "$WORK/dtypes"
expect_error empty-dataset 2 "data set is empty (0 samples" train --data.train "$WORK/empty"
expect_error label-type 2 "$WORK/labeltype/a.h5: dataset 'labels' has type float64, expected int32" train --data.train "$WORK/labeltype"
expect_error label-out-of-range 2 "$WORK/badlabel/a.h5: row 60: label 7 outside [0, 3)" \
  train --data.train "$WORK/badlabel" --data.shuffle false --train.batch_size 4 --run.dir "$WORK/run"
expect_error label-out-of-range-3ranks 3 "label 7 outside [0, 3)" \
  train --data.train "$WORK/badlabel" --train.batch_size 4 --run.dir "$WORK/run3"
# Regression sets whose target widths differ.
printf '1,2,3,4\n2,3,4,5\n3,4,5,6\n' > "$WORK/reg2.csv"; printf '1,2,3\n2,3,4\n' > "$WORK/reg1.csv"
"$MPIDDP" shard --format csv --task regression --targets 2 --input "$WORK/reg2.csv" --out "$WORK/reg2" --shards 1 >/dev/null
"$MPIDDP" shard --format csv --task regression --targets 1 --input "$WORK/reg1.csv" --out "$WORK/reg1" --shards 1 >/dev/null
expect_error target-width 2 "$WORK/reg1: 1 regression targets per sample, but $WORK/reg2 has 2" \
  train --data.train "$WORK/reg2" --data.test "$WORK/reg1" --data.task regression --run.dir "$WORK/run"
# A test set with another feature width than the training set.
expect_error test-width 2 "$WORK/shapes/b.h5" train --data.train "$WORK/good" --data.test "$WORK/shapes/b.h5"

# Output directory that cannot be created (a file stands in the way).
touch "$WORK/blocker"
expect_error run-dir 2 "run.dir $WORK/blocker/run: cannot create" train --data.train "$WORK/good" --run.dir "$WORK/blocker/run"

# Shard command errors (no MPI).
printf 'a,b\n1,2\n3,x\n' > "$WORK/bad.csv"
out=$("$MPIDDP" shard --format csv --input "$WORK/bad.csv" --out "$WORK/x" 2>&1) && fail "bad csv accepted" \
  || { echo "$out" | grep -q "$WORK/bad.csv:3: not a row of numbers" && pass "bad csv: $out" || fail "bad csv message: $out"; }
out=$("$MPIDDP" shard --format idx --images /nonexistent.gz --labels /nonexistent.gz --out "$WORK/x" 2>&1) && fail "missing idx" \
  || { echo "$out" | grep -q "/nonexistent.gz: cannot open" && pass "missing idx: $out" || fail "idx message: $out"; }
finish
