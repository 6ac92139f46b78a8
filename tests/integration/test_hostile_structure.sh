#!/usr/bin/env bash
# Hostile input, round 3 (structure): HDF5 files whose objects are not what their
# names promise. An attribute that should hold one value holding several (read
# into one value's room, it once overwrote the stack: a crash, or worse), a float
# where an integer belongs (once truncated), a NUL inside a text (once cut it
# short without a word), a parameter that is a group, a dataset never written
# (once read as its fill value: zeros in place of weights), a FIFO or a directory
# where a file belongs (HDF5's open once waited forever), a byte model whose
# embedding has fewer rows than bytes (once read past its table). Each is one
# "mpiddp: error:" line naming the file and the object, exit 2, on every path
# that reads such a file: data shards, checkpoints (inspect, resume), model.init,
# generate.
source "$(dirname "$0")/lib.sh"
require_python_modules h5py numpy

make_blobs_shards "$WORK/data" 400 1 2
write_ini "$WORK/run.ini" data.train="$WORK/data" model.hidden=16 train.batch_size=20 train.epochs=1 \
  checkpoint.every_steps=5
T=(train "$WORK/run.ini")
run_ranks 2 "${T[@]}" --run.dir "$WORK/a" > "$WORK/a.log" 2>&1 || fail "reference run: exit $?"
ckpt=$(latest_checkpoint "$WORK/a")

# changed NAME SOURCE PYTHON: a copy of SOURCE (a file or a folder) as $WORK/NAME, then PYTHON run with f = the
# copy opened for writing (for a folder: its first shard), np = numpy.
changed() {
  local name=$1 source=$2 code=$3 target=$WORK/$1
  rm -rf "$target"; cp -r "$source" "$target"
  [ -d "$target" ] && target=$(ls "$target"/*.h5 | head -1)
  "$PYTHON" - "$target" "$code" <<'PY' || fail "$name: editing the copy"
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r+") as f:
    exec(sys.argv[2])
PY
}

# ---- a sample of no features (it built Linear(0 -> ...) and failed at the first step) ----
changed zero-features.h5 "$WORK/data/shard-00000-of-00002.h5" "n = f['features'].shape[0]; del f['features']; f['features'] = np.zeros((n, 0), 'f4')"
expect_input_error shard-zero-features 2 "dataset 'features' holds 0 features per sample (200 x 0)" \
  "${T[@]}" --data.train "$WORK/zero-features.h5" --run.dir "$WORK/r0"

# ---- attributes: one value, of its kind, text without NULs ----
changed two-classes "$WORK/data" "del f['labels'].attrs['num_classes']; f['labels'].attrs['num_classes'] = np.array([2, 2])"
expect_input_error shard-two-classes 2 "attribute 'num_classes' holds 2 values, not one" \
  "${T[@]}" --data.train "$WORK/two-classes" --run.dir "$WORK/r1"
changed float-classes "$WORK/data" "del f['labels'].attrs['num_classes']; f['labels'].attrs['num_classes'] = 2.5"
expect_input_error shard-float-classes 2 "attribute 'num_classes' is not an integer" \
  "${T[@]}" --data.train "$WORK/float-classes" --run.dir "$WORK/r2"
changed many-steps.h5 "$ckpt" "v = f.attrs['global_step']; del f.attrs['global_step']; f.attrs['global_step'] = np.full(4096, v)"
expect_input_error inspect-many-steps 1 "many-steps.h5: attribute 'global_step' holds 4096 values, not one" \
  inspect checkpoint "$WORK/many-steps.h5"
expect_input_error resume-many-steps 2 "attribute 'global_step' holds 4096 values, not one" \
  "${T[@]}" --run.dir "$WORK/r3" --resume "$WORK/many-steps.h5"
changed many-configs.h5 "$ckpt" "del f.attrs['config']; f.attrs['config'] = np.full(7000, b'onednn', dtype='S8')"
expect_input_error generate-many-configs 1 "many-configs.h5: attribute 'config' holds 7000 values, not one" \
  generate "$WORK/many-configs.h5" --prompt x
changed nul-run-id.h5 "$ckpt" "del f.attrs['run_id']; f.attrs['run_id'] = np.bytes_(b'abc\\x00;more')"
expect_input_error nul-inside-text 1 "attribute 'run_id' holds a NUL character inside its text" \
  inspect checkpoint "$WORK/nul-run-id.h5"
changed int-config.h5 "$ckpt" "del f.attrs['config']; f.attrs['config'] = 7"
expect_input_error number-for-text 1 "attribute 'config' is not text" generate "$WORK/int-config.h5" --prompt x

# ---- datasets: of the kind named, and written ----
changed group-bias.h5 "$ckpt" "del f['params/layers.0.bias']; f['params'].create_group('layers.0.bias')"
expect_input_error init-group-param 2 "'params/layers.0.bias' is not a dataset" \
  "${T[@]}" --run.dir "$WORK/r4" --model.init "$WORK/group-bias.h5"
changed int-bias.h5 "$ckpt" "s = f['params/layers.0.bias'].shape; del f['params/layers.0.bias']; f['params'].create_dataset('layers.0.bias', data=np.zeros(s, 'i4'))"
expect_input_error init-int-param 2 "'params/layers.0.bias' does not hold floating-point values" \
  "${T[@]}" --run.dir "$WORK/r5" --model.init "$WORK/int-bias.h5"
for layout in chunked contiguous; do
  chunks=$([ $layout = chunked ] && echo True || echo None)
  changed unwritten-$layout.h5 "$ckpt" "s = f['params/layers.0.weight'].shape; del f['params/layers.0.weight']; f['params'].create_dataset('layers.0.weight', shape=s, dtype='f4', chunks=$chunks, fillvalue=0.5)"
  expect_input_error init-unwritten-$layout 2 "'params/layers.0.weight' declares 16 x 8 values" \
    "${T[@]}" --run.dir "$WORK/r6-$layout" --model.init "$WORK/unwritten-$layout.h5"
  expect_input_error resume-unwritten-$layout 2 "'params/layers.0.weight' declares 16 x 8 values" \
    "${T[@]}" --run.dir "$WORK/r7-$layout" --resume "$WORK/unwritten-$layout.h5"
done

# A compressed chunk that inflates short (4 of 512 bytes): HDF5 leaves the rest of
# its buffer as it was (heap memory). Checkpoints are written plain: filters refused.
changed short-chunk.h5 "$ckpt" "import zlib; s = f['params/layers.0.weight'].shape; del f['params/layers.0.weight']; d = f['params'].create_dataset('layers.0.weight', shape=s, dtype='f4', chunks=s, compression='gzip'); d.id.write_direct_chunk((0, 0), zlib.compress(bytes(4)), filter_mask=0)"
expect_input_error init-short-chunk 2 "'params/layers.0.weight' is stored through 1 HDF5 filter(s) (compressed)" \
  "${T[@]}" --run.dir "$WORK/r9" --model.init "$WORK/short-chunk.h5"
expect_input_error resume-short-chunk 2 "'params/layers.0.weight' is stored through 1 HDF5 filter(s)" \
  "${T[@]}" --run.dir "$WORK/r10" --resume "$WORK/short-chunk.h5"
expect_input_error inspect-short-chunk 1 "dataset 'params/layers.0.weight' is stored through 1 HDF5 filter(s)" \
  inspect checkpoint "$WORK/short-chunk.h5"

# Text from the file reaches the terminal escaped: no terminal escapes, no forged lines.
changed escapes.h5 "$ckpt" "f.attrs['run_id'] = np.bytes_(b'\x1b]0;TITLE\x07\x1b[31mred\nglobal_step = 999999'); f['params']['\x1b[2Jevil\nname'] = np.zeros(2, 'f4')"
"$MPIDDP" inspect checkpoint "$WORK/escapes.h5" > "$WORK/escapes.out" 2>&1 || fail "inspect of escapes.h5: exit $?"
if ! grep -q $'\x1b' "$WORK/escapes.out" && ! grep -q "^global_step = 999999" "$WORK/escapes.out" \
  && ! grep -q "^name " "$WORK/escapes.out" && grep -qF 'run_id = \x1b]0;TITLE' "$WORK/escapes.out"; then
  pass "inspect checkpoint prints the file's text escaped: $(grep '^run_id' "$WORK/escapes.out")"
else fail "inspect checkpoint printed raw text"; cat -v "$WORK/escapes.out" >&2; fi

# 4000 nested groups: HDF5's walk of them took minutes; mpiddp's files nest 2 deep.
changed deep.h5 "$ckpt" "g = f.create_group('x')
for _ in range(4000): g = g.create_group('g')"
expect_input_error inspect-deep 1 "deep.h5: groups nested more than 64 deep; refused" inspect checkpoint "$WORK/deep.h5"
expect_input_error init-deep 2 "groups nested more than 64 deep; refused" \
  "${T[@]}" --run.dir "$WORK/r11" --model.init "$WORK/deep.h5"

changed long-names.h5 "$ckpt" "f.create_group('n' * 5000)"  # long paths cost the walk as depth does
expect_input_error inspect-long-names 1 "long-names.h5: an object's path is over 4096 bytes; refused" \
  inspect checkpoint "$WORK/long-names.h5"

# ---- files: regular ones only (a FIFO would block HDF5's open for good) ----
mkfifo "$WORK/fifo.h5"
expect_input_error init-fifo 2 "model.init $WORK/fifo.h5: not a regular file (a FIFO)" \
  "${T[@]}" --run.dir "$WORK/r8" --model.init "$WORK/fifo.h5"
expect_input_error inspect-fifo 1 "$WORK/fifo.h5: not a regular file (a FIFO)" inspect checkpoint "$WORK/fifo.h5"
expect_input_error generate-fifo 1 "$WORK/fifo.h5: not a regular file (a FIFO)" generate "$WORK/fifo.h5" --prompt x
mkdir -p "$WORK/fifo-shards" && cp "$WORK/data"/*.h5 "$WORK/fifo-shards/" && rm "$WORK/fifo-shards"/*00001*.h5 \
  && mkfifo "$WORK/fifo-shards/shard-00001-of-00002.h5"
expect_input_error shard-fifo 2 "shard-00001-of-00002.h5: not a regular file (a FIFO)" \
  "${T[@]}" --data.train "$WORK/fifo-shards" --run.dir "$WORK/r9"
# Under --resume auto a FIFO posing as the newest checkpoint is passed over for the one before it.
cp -r "$WORK/a" "$WORK/b"
newest=$(latest_checkpoint "$WORK/b") && rm "$newest" && mkfifo "$newest"
run_ranks 2 "${T[@]}" --run.dir "$WORK/b" --resume auto --train.epochs 2 > "$WORK/b.log" 2>&1 \
  && grep -q "not a regular file (a FIFO)" "$WORK/b.log" \
  && pass "--resume auto passes over a FIFO checkpoint: $(grep -m1 'not a regular file' "$WORK/b.log" | cut -c1-150)" \
  || fail "--resume auto with a FIFO checkpoint: $(tail -3 "$WORK/b.log")"

# ---- generate: every byte must have a row in the embedding ----
"$PYTHON" - "$WORK/one-row.h5" <<'PY' || fail "writing one-row.h5"
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    f.attrs["config"] = np.bytes_(b"[data]\ntrain = x\ncontext = 16\n[model]\nlayers = embedding(1,64) linear(1) linear\n")
    p = f.create_group("params")
    p["layers.0.weight"] = np.zeros((1, 64), "f4")
    p["layers.1.weight"] = np.ones((1, 64), "f4")
    p["layers.1.bias"] = np.zeros(1, "f4")
    p["layers.2.weight"] = np.zeros((256, 1), "f4")
    p["layers.2.bias"] = np.zeros(256, "f4")
PY
expect_input_error generate-one-row 1 "one-row.h5: its embedding has 1 rows (num_embeddings), fewer than the 256 byte values" \
  generate "$WORK/one-row.h5" --prompt A --tokens 5
finish
