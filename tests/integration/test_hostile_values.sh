#!/usr/bin/env bash
# Hostile input, part B: values that parse but cannot be meant, sizes declared
# far beyond what a file holds or a node can hold, and the messages for them.
# Each is refused up front with exit 2 and one "mpiddp: error:" line (from one
# rank) that names the file or key; never std::bad_alloc, a hang or exit 0.
source "$(dirname "$0")/lib.sh"
require_python_modules h5py numpy

# expect_input_error NAME RANKS TEXT ARGS...: expect_error, and the exit code of bad input (2).
make_blobs_shards "$WORK/good" 200 1 2
base=(train --data.train "$WORK/good" --train.epochs 1 --run.dir "$WORK/run")

# ---- the input file itself ----
expect_input_error ini-is-directory 2 "$WORK: is a directory, not an input file" train "$WORK"
mkfifo "$WORK/fifo.ini"  # would block every rank's open for good
expect_input_error ini-is-fifo 2 "$WORK/fifo.ini: not a regular file (a FIFO)" train "$WORK/fifo.ini"
printf '[data]\ntrain = %s/da\0ta\n' "$WORK" > "$WORK/nul.ini"  # the path would be cut at the NUL
expect_input_error ini-nul 2 "$WORK/nul.ini: line 2 holds a NUL character (\x00)" train "$WORK/nul.ini"
# Control characters in the input file (an escape sequence for the terminal, a CR hiding a section after it;
# a CR at a line's end is a Windows line end; in a comment anything goes), a line of 100 KB, a file of 17 MB.
printf '[run]\ndir = runs/x\033[2J\n' > "$WORK/esc.ini"
expect_input_error ini-escape 2 "$WORK/esc.ini: line 2 holds a control character (\x1b)" train "$WORK/esc.ini"
printf '[run]\ndir = x\r[data]\rtrain = /nowhere\n' > "$WORK/cr.ini"
expect_input_error ini-cr 2 "$WORK/cr.ini: line 2 holds a control character (\x0d)" train "$WORK/cr.ini"
{ printf '[run]\ndir = '; head -c 100000 /dev/zero | tr '\0' a; echo; } > "$WORK/long.ini"
expect_input_error ini-long-line 2 "$WORK/long.ini: line 2 is 100006 bytes long, over the 65536" train "$WORK/long.ini"
truncate -s 17M "$WORK/big.ini"  # every rank reads it whole
expect_input_error ini-too-big 2 "$WORK/big.ini: is 17825792 bytes; an input file of settings holds at most" \
  train "$WORK/big.ini"
printf '[train]  # a comment may hold \033[31m anything\f but a NUL\nepochs = 1\n' > "$WORK/comment.ini"
expect_input_error ini-comment-escape 2 "key 'data.train'" train "$WORK/comment.ini"
# A newline in a command-line value would add lines (a section, keys) to config.ini and to the
# checkpoint's stored input file, which a resume reads back as settings.
expect_input_error newline-in-value 2 "command line: the value of --run.dir holds a control character (\x0a)" \
  train /dev/null --data.train "$WORK/none" --run.dir "$WORK/run"$'\n[optim]\nlr = 5'
expect_input_error newline-in-key-value 2 "command line: argument '--run.dir=x\x0a[optim]' holds a control character" \
  train /dev/null --data.train "$WORK/none" --run.dir=x$'\n[optim]'
touch "$WORK/file"
expect_input_error ini-below-a-file 2 "$WORK/file/x.ini: cannot open input file (Not a directory)" train "$WORK/file/x.ini"
# Unreadable: root reads everything, so read it as nobody (a singleton rank, no mpirun;
# its Open MPI session directory in /tmp, since nobody cannot write to root's $WORK).
mkdir -p "$WORK/pub" && write_ini "$WORK/pub/secret.ini" "data.train=$WORK/good"
chmod 000 "$WORK/pub/secret.ini"; chmod 755 "$WORK" "$WORK/pub"
as_nobody() { timeout "$EXPECT_TIMEOUT" setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=/tmp \
  OMPI_MCA_orte_tmpdir_base=/tmp "$@"; }
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && as_nobody "$MPIDDP" version >/dev/null 2>&1; then
  rc=0; out=$(timeout "$EXPECT_TIMEOUT" setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=/tmp \
                OMPI_MCA_orte_tmpdir_base=/tmp \
                "$MPIDDP" train "$WORK/pub/secret.ini" 2>&1) || rc=$?
  [ "$rc" = 2 ] && [[ $out == *"$WORK/pub/secret.ini: cannot open input file (Permission denied)"* ]] \
    && pass "unreadable input file: $out" || fail "unreadable input file: exit $rc: $out"
else
  echo "note: unreadable input file not tried (needs root, setpriv, and $MPIDDP runnable by user nobody)"
fi

# ---- values that parse but cannot be meant: named with the source they came from ----
write_ini "$WORK/lr-inf.ini" "data.train=$WORK/good" "optim.lr=inf"
expect_input_error lr-inf-in-file 2 "$WORK/lr-inf.ini: key 'optim.lr': must be a finite number, got inf" train "$WORK/lr-inf.ini"
write_ini "$WORK/ok.ini" "data.train=$WORK/good" "train.epochs=1" "run.dir=$WORK/run"
expect_input_error lr-nan-on-command-line 2 "command line: key 'optim.lr': must be a finite number, got nan" \
  train "$WORK/ok.ini" --optim.lr nan
expect_input_error lr-negative 2 "key 'optim.lr': must be in (0, 1000], got -0.1" "${base[@]}" --optim.lr -0.1
write_ini "$WORK/gamma.ini" "data.train=$WORK/good" "optim.schedule=step" "optim.gamma=-0.5"
expect_input_error gamma-negative 2 "$WORK/gamma.ini: key 'optim.gamma': must be in (0, 1], got -0.5" train "$WORK/gamma.ini"
# The file's value is fine, the override is not: the command line is blamed, not the file.
expect_input_error gamma-override 2 "command line: key 'optim.gamma': must be in (0, 1], got 2" \
  train "$WORK/gamma.ini" --optim.gamma 2
write_ini "$WORK/minlr.ini" "data.train=$WORK/good" "optim.schedule=cosine" "optim.lr=0.1" "optim.min_lr=0.5"
expect_input_error min-lr-above-lr 2 "$WORK/minlr.ini: key 'optim.min_lr': the final learning rate 0.5 is above optim.lr = 0.1" \
  train "$WORK/minlr.ini"
expect_input_error momentum-one 2 "key 'optim.momentum': must be in [0, 1), got 1" "${base[@]}" --optim.momentum 1
expect_input_error timeout-inf 2 "key 'dist.timeout_s': must be a finite number, got inf" "${base[@]}" --dist.timeout_s inf
expect_input_error bucket-huge 2 "key 'ddp.bucket_mb': must be in (0, 65536], got 1e+300" "${base[@]}" --ddp.bucket_mb 1e300
expect_input_error one-class 2 "key 'model.classes': 1 class cannot be told apart" "${base[@]}" --model.classes 1

# ---- shards that declare more than they hold, and NaN/Inf in the data ----
"$PYTHON" - "$WORK" <<'PY' || fail "writing hostile shards (h5py)"
import os, sys, h5py, numpy as np
w = sys.argv[1]
def shard(path, x=None, y=None, classes=3, xshape=None, yshape=None, gz=False, write_rows=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    opts = dict(chunks=True, compression="gzip") if gz else {}
    with h5py.File(path, "w") as f:
        if x is None:  # declared only: nothing (or only write_rows rows) written
            d = f.create_dataset("features", xshape, dtype="f4", **opts)
            if write_rows: d[:write_rows] = 1
        else:
            f.create_dataset("features", data=x, **opts)
        l = f.create_dataset("labels", yshape, dtype=y) if isinstance(y, str) else f.create_dataset("labels", data=y, **opts)
        if classes is not None: l.attrs["num_classes"] = classes
rng = np.random.default_rng(0)
x, y = rng.random((64, 8), dtype=np.float32), rng.integers(0, 3, 64).astype(np.int32)
shard(f"{w}/wide/a.h5", y="i4", xshape=(4, 2_000_000_000), yshape=(4,))
shard(f"{w}/tall/a.h5", y="i4", xshape=(2_000_000_000, 8), yshape=(2_000_000_000,), gz=True)
shard(f"{w}/partial/a.h5", y=np.zeros(100_000, np.int32), xshape=(100_000, 8), gz=True, write_rows=5000)
bad = x.copy(); bad[37, 5] = np.nan
shard(f"{w}/nan/a.h5", bad, y)                 # contiguous: read through the memory map
shard(f"{w}/nan-gz/a.h5", bad, y, gz=True)     # compressed: read through HDF5
t = rng.random((64, 2), dtype=np.float32); t[50, 1] = np.inf
shard(f"{w}/inf-target/a.h5", x, t, classes=None)
shard(f"{w}/classes0/a.h5", x, y, classes=0)
shard(f"{w}/classes1/a.h5", x, y, classes=1)
shard(f"{w}/noclasses/a.h5", x, y, classes=None)
shard(f"{w}/classes5/a.h5", x, y, classes=5)
# Compressed chunks written raw (write_direct_chunk): one that inflates short (its rows would read as
# whatever HDF5's buffer held), one that inflates to 512 KB for a 1 KB chunk, one stored larger than deflate
# could make a 1 KB chunk (64 MB inflated), one cut short; a filter
# whose output mpiddp cannot bound (lzf); and the usual shuffle + gzip + fletcher32, which trains.
import zlib
def raw_chunks(path, second_chunk, **filters):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with h5py.File(path, "w") as f:
        d = f.create_dataset("features", (64, 8), dtype="f4", chunks=(32, 8), **filters)
        d[:32] = x[:32]
        d.id.write_direct_chunk((32, 0), second_chunk, filter_mask=0)
        f.create_dataset("labels", data=y).attrs["num_classes"] = 3
raw_chunks(f"{w}/gz-short/a.h5", zlib.compress(x[32:40].tobytes()), compression="gzip")
raw_chunks(f"{w}/gz-bomb/a.h5", zlib.compress(bytes(1 << 19), 9), compression="gzip")  # 0.5 KB stored
raw_chunks(f"{w}/gz-oversized/a.h5", zlib.compress(bytes(64 << 20), 9), compression="gzip")  # 64 KB stored
raw_chunks(f"{w}/gz-cut/a.h5", zlib.compress(x[32:].tobytes())[:200], compression="gzip")
shard(f"{w}/lzf/a.h5", x, y)
with h5py.File(f"{w}/lzf/a.h5", "a") as f:
    del f["features"]; f.create_dataset("features", data=x, chunks=(32, 8), compression="lzf")
# A chunk index whose 1000 entries claim more bytes than the file holds (as when they all point at one
# small stream, each then inflated): sizes patched in the index's keys (size, filter mask, offsets).
import struct
os.makedirs(f"{w}/gz-shared", exist_ok=True)
with h5py.File(f"{w}/gz-shared/a.h5", "w") as f:
    f.create_dataset("features", data=np.zeros((8000, 8), "f4"), chunks=(8, 8), compression="gzip")
    f.create_dataset("labels", data=np.zeros(8000, np.int32)).attrs["num_classes"] = 3
with h5py.File(f"{w}/gz-shared/a.h5", "r") as f:
    d = f["features"]
    infos = [d.id.get_chunk_info(i) for i in range(d.id.get_num_chunks())]
raw = bytearray(open(f"{w}/gz-shared/a.h5", "rb").read())
for info in infos:  # 269 = zlib's compressBound(256): no more than a writer could store for a chunk
    key = struct.pack("<II", info.size, info.filter_mask) + b"".join(struct.pack("<Q", o) for o in info.chunk_offset)
    at = raw.find(key + struct.pack("<Q", 0))
    if at > 0: raw[at:at + 4] = struct.pack("<I", 269)
open(f"{w}/gz-shared/a.h5", "wb").write(raw)
# Chunks of 96 MB for 64 rows: every read would inflate all of it.
os.makedirs(f"{w}/gz-huge-chunks", exist_ok=True)
with h5py.File(f"{w}/gz-huge-chunks/a.h5", "w") as f:
    f.create_dataset("features", data=x, maxshape=(None, 8), chunks=(3_000_000, 8), compression="gzip")
    f.create_dataset("labels", data=y).attrs["num_classes"] = 3
# A valid file: gzip, with the partial edge chunk stored unfiltered (H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS,
# set through the C library h5py runs on); 40 rows in chunks of 16.
import ctypes
from h5py import h5p, h5d, h5s, h5t
os.makedirs(f"{w}/gz-partial-raw", exist_ok=True)
try:  # Debian's h5py runs on the system's libhdf5; a wheel's own copy would not take this dcpl
    hdf5 = ctypes.CDLL("libhdf5_serial.so.103")
    with h5py.File(f"{w}/gz-partial-raw/a.h5", "w", libver="latest") as f:
        dcpl = h5p.create(h5p.DATASET_CREATE); dcpl.set_chunk((16, 8)); dcpl.set_deflate(6)
        assert hdf5.H5Pset_chunk_opts(ctypes.c_int64(dcpl.id), ctypes.c_uint(2)) >= 0
        d = h5d.create(f.id, b"features", h5t.py_create(np.dtype("f4")), h5s.create_simple((40, 8)), dcpl=dcpl)
        d.write(h5s.ALL, h5s.ALL, np.ascontiguousarray(x[:40]))
        f.create_dataset("labels", data=y[:40]).attrs["num_classes"] = 3
except (OSError, AssertionError):
    if os.path.exists(f"{w}/gz-partial-raw/a.h5"): os.remove(f"{w}/gz-partial-raw/a.h5")
os.makedirs(f"{w}/gz-all", exist_ok=True)
with h5py.File(f"{w}/gz-all/a.h5", "w") as f:
    f.create_dataset("features", data=x, chunks=(16, 8), shuffle=True, compression="gzip", fletcher32=True)
    f.create_dataset("labels", data=y, chunks=(16,), compression="gzip").attrs["num_classes"] = 3
PY
expect_input_error shard-2e9-features 2 "$WORK/wide/a.h5: dataset 'features' declares 4 x 2000000000 values (32000000000 bytes) but stores only 0 bytes" \
  train --data.train "$WORK/wide" --run.dir "$WORK/run-87"
expect_input_error shard-2e9-rows 2 "$WORK/tall/a.h5: dataset 'features' declares 2000000000 x 8 values in" \
  train --data.train "$WORK/tall" --run.dir "$WORK/run-89"
expect_input_error shard-written-in-part 2 "$WORK/partial/a.h5: dataset 'features' declares 100000 x 8 values in" \
  train --data.train "$WORK/partial" --run.dir "$WORK/run-91"
expect_input_error gzip-chunk-short 2 "$WORK/gz-short/a.h5: dataset 'features': the chunk at (32, 0) holds 256 bytes where a chunk has 1024" \
  train --data.train "$WORK/gz-short" --run.dir "$WORK/run-gz-short"
expect_input_error gzip-chunk-bomb 2 "$WORK/gz-bomb/a.h5: dataset 'features': the chunk at (32, 0) inflates past its 1024 bytes" \
  train --data.train "$WORK/gz-bomb" --run.dir "$WORK/run-gz-bomb"
expect_input_error gzip-chunk-oversized 2 "$WORK/gz-oversized/a.h5: dataset 'features': the chunk at (32, 0) claims" \
  train --data.train "$WORK/gz-oversized" --run.dir "$WORK/run-gz-oversized"
expect_input_error gzip-chunk-cut 2 "$WORK/gz-cut/a.h5: dataset 'features': the chunk at (32, 0) is not a whole deflate stream" \
  train --data.train "$WORK/gz-cut" --run.dir "$WORK/run-gz-cut"
expect_input_error lzf-filter 2 "$WORK/lzf/a.h5: dataset 'features' is stored through HDF5 filter 32000 (lzf)" \
  train --data.train "$WORK/lzf" --run.dir "$WORK/run-lzf"
expect_input_error gzip-chunks-share-bytes 2 "$WORK/gz-shared/a.h5: dataset 'features': its chunks claim more stored bytes than the file's" \
  train --data.train "$WORK/gz-shared" --run.dir "$WORK/run-gz-shared"
expect_input_error gzip-huge-chunks 2 "$WORK/gz-huge-chunks/a.h5: dataset 'features' is stored in compressed chunks of 3000000 x 8 values (96000000 bytes), above 64 MiB" \
  train --data.train "$WORK/gz-huge-chunks" --run.dir "$WORK/run-gz-huge"
if [ -f "$WORK/gz-partial-raw/a.h5" ]; then
  run_ranks 1 train --data.train "$WORK/gz-partial-raw" --train.batch_size 8 --train.epochs 1 --run.dir "$WORK/run-gz-partial" \
    > "$WORK/gz-partial.log" 2>&1 && pass "gzip chunks with the partial edge chunk stored unfiltered train" \
    || { fail "gzip chunks with an unfiltered partial edge chunk"; tail -3 "$WORK/gz-partial.log" >&2; }
else echo "note: h5py does not run on libhdf5_serial.so.103: the unfiltered partial chunk case is not run"; fi
OMPI_MCA_orte_tmpdir_base=$(own_session_base) \
  "$MPIEXEC" -n 2 "$MPIDDP" train --data.train "$WORK/gz-all" --train.batch_size 8 --train.epochs 1 --run.dir "$WORK/run-gz-all" \
  > "$WORK/gz-all.log" 2>&1 && pass "shuffle + gzip + fletcher32 chunks train" \
  || { fail "shuffle + gzip + fletcher32 chunks"; tail -3 "$WORK/gz-all.log" >&2; }
expect_input_error run-dir-long-name 2 "a name in it is longer than 255 bytes" \
  train /dev/null --data.train "$WORK/gz-all" --run.dir "$WORK/$(head -c 300 /dev/zero | tr '\0' a)"
# model.layers read from a multi-line file: its newlines are blanks, and config.ini keeps it on one line.
run_ranks 1 train /dev/null --data.train "$WORK/gz-all" --train.batch_size 8 --train.max_steps 2 --run.dir "$WORK/run-ml" \
  --model.layers $'flatten\n  linear(16) relu\n  linear' > "$WORK/ml.log" 2>&1 \
  && grep -qx "layers = flatten   linear(16) relu   linear" "$WORK/run-ml/config.ini" \
  && pass "a multi-line model.layers on the command line: one line in config.ini" \
  || { fail "multi-line model.layers"; tail -2 "$WORK/ml.log" >&2; }
printf '[train]\r\nbatch_size = 8\r\nepochs = 1\r\n' > "$WORK/crlf.ini"  # Windows line ends are text
run_ranks 1 train "$WORK/crlf.ini" --data.train "$WORK/gz-all" --run.dir "$WORK/run-crlf" > "$WORK/crlf.log" 2>&1 \
  && pass "an input file with CRLF line ends trains" || { fail "CRLF input file"; tail -2 "$WORK/crlf.log" >&2; }
expect_input_error nan-feature 2 "$WORK/nan/a.h5: row 37: feature 5 is NaN" \
  train --data.train "$WORK/nan" --run.dir "$WORK/run-93" --train.batch_size 8
expect_input_error nan-feature-hdf5-path 2 "$WORK/nan-gz/a.h5: row 37: feature 5 is NaN" \
  train --data.train "$WORK/nan-gz" --run.dir "$WORK/run-95" --train.batch_size 8
expect_input_error inf-target 2 "$WORK/inf-target/a.h5: row 50: regression target 1 is +Inf" \
  train --data.train "$WORK/inf-target" --data.task regression --run.dir "$WORK/run-97" --train.batch_size 8
expect_input_error num-classes-0 2 "$WORK/classes0/a.h5: dataset 'labels': attribute num_classes is 0 (a classifier needs at least 2" \
  train --data.train "$WORK/classes0" --run.dir "$WORK/run-99"
expect_input_error num-classes-1 2 "$WORK/classes1/a.h5: dataset 'labels': attribute num_classes is 1 (a classifier needs at least 2" \
  train --data.train "$WORK/classes1" --run.dir "$WORK/run-101"
expect_input_error no-num-classes 2 "$WORK/noclasses: the shards carry no num_classes attribute; set model.classes" \
  train --data.train "$WORK/noclasses" --run.dir "$WORK/run-103"
expect_input_error test-classes-differ 2 "$WORK/classes5: num_classes 5, but $WORK/nan has 3" \
  train --data.train "$WORK/nan" --data.test "$WORK/classes5" --run.dir "$WORK/run-105"

# ---- sizes the node cannot hold: refused before allocating ----
expect_input_error hidden-too-wide 2 "model.hidden = '2000000000'" "${base[@]}" --model.hidden 2000000000
grep -q "more than its .* of memory" "$WORK/hidden-too-wide.out" || fail "hidden-too-wide: no memory comparison"
expect_input_error batch-too-large 2 "train.batch_size = 2000000000" "${base[@]}" --train.batch_size 2000000000
expect_input_error sampler-too-large 1 "--size 100000000000: the sampler would need" inspect sampler --size 100000000000
rc=0; out=$(timeout "$EXPECT_TIMEOUT" "$MPIDDP" inspect sampler --size 10 --world 2000000000 --rank 1999999999 2>&1) || rc=$?
[ "$rc" = 0 ] && [[ $out =~ ^[0-9]$ ]] && pass "inspect sampler --world 2000000000: '$out'" \
  || fail "inspect sampler --world 2000000000: exit $rc: $(echo "$out" | head -c 300)"
# IDX headers declaring 100000 images of 100000 x 100000, gzip and plain.
"$PYTHON" - "$WORK" <<'PY' || fail "writing hostile IDX files"
import gzip, struct, sys
w = sys.argv[1]
header = struct.pack(">IIII", 0x803, 100000, 100000, 100000)
with gzip.open(f"{w}/big-images.gz", "wb") as f: f.write(header + bytes(1000))
open(f"{w}/big-images", "wb").write(header + bytes(1000))
with gzip.open(f"{w}/labels.gz", "wb") as f: f.write(struct.pack(">II", 0x801, 100000) + bytes(100000))
with gzip.open(f"{w}/few-images.gz", "wb") as f: f.write(struct.pack(">IIII", 0x803, 100000, 2, 2) + bytes(400000))
open(f"{w}/few-labels", "wb").write(struct.pack(">II", 0x801, 100000) + bytes(10))
PY
expect_input_error idx-huge-gz 1 "$WORK/big-images.gz: declares 100000 images of 100000 x 100000 (909 TiB), more than the file can hold" \
  shard --format idx --images "$WORK/big-images.gz" --labels "$WORK/labels.gz" --out "$WORK/idx"
expect_input_error idx-huge-plain 1 "$WORK/big-images: declares 100000 images of 100000 x 100000" \
  shard --format idx --images "$WORK/big-images" --labels "$WORK/labels.gz" --out "$WORK/idx"
expect_input_error idx-labels-short 1 "$WORK/few-labels: declares 100000 labels" \
  shard --format idx --images "$WORK/few-images.gz" --labels "$WORK/few-labels" --out "$WORK/idx"
[ ! -e "$WORK/idx" ] || [ -z "$(ls -A "$WORK/idx")" ] && pass "refused IDX conversions wrote nothing" || fail "files left in $WORK/idx"

# A checkpoint whose header declares 4e12 bytes: inspect refuses it before reading.
"$PYTHON" -c "import h5py, sys; f = h5py.File(sys.argv[1], 'w'); f.attrs['format_version'] = 4; f.create_dataset('model/w', (100000, 100000, 100), 'f4')" \
  "$WORK/hostile-ckpt.h5" || fail "writing a hostile checkpoint"
expect_input_error inspect-hostile-checkpoint 1 "$WORK/hostile-ckpt.h5: dataset 'model/w' declares 100000 x 100000 x 100 values" \
  inspect checkpoint "$WORK/hostile-ckpt.h5"
# Benchmarks' sizes are arguments too.
expect_input_error bench-batch-negative 1 "--batch must be at least 1, got -1" bench gemm --batch -1
expect_input_error bench-batch-huge 1 "bench gemm: 784 features with model.hidden = '256,128' and train.batch_size = 2000000000 need about" \
  bench gemm --batch 2000000000
expect_input_error bench-seconds-nan 1 "--seconds must be in (0, 3600], got nan" bench gemm --seconds nan
expect_input_error bench-conv-kernel 1 "bench conv: sizes must be positive" bench conv --kernel 40 --size 14
expect_input_error bench-conv-huge 1 "bench conv: these sizes need about" bench conv --batch 65536 --channels 4096 --size 4096
expect_input_error bench-mlp-steps 2 "--steps must be at least 1" bench mlp --steps 0
expect_input_error bench-mlp-huge 2 "bench mlp: 784 features" bench mlp --batch 2000000000

# A negative seed once became 2^64 - 1 without a word (Boost's unsigned conversion).
expect_input_error seed-negative 2 "key 'train.seed': '-1' is not a whole number from 0 to 18446744073709551615" \
  "${base[@]}" --train.seed -1
expect_input_error seed-too-large 2 "key 'train.seed': '18446744073709551616' is not a whole number" \
  "${base[@]}" --train.seed 18446744073709551616
expect_input_error generate-seed-negative 1 "--seed '-1' is not a whole number" generate "$WORK/none.h5" --prompt x --seed -1

# ---- messages ----
# One prefix everywhere.
expect_input_error shard-prefix 1 "--format must be idx, csv, bytes or llmc" shard --format parquet --out "$WORK/x"
expect_input_error inspect-prefix 1 "unknown inspect target" inspect nothing
! grep -h "mpiddp shard: error\|mpiddp inspect: error" "$WORK"/*.out >/dev/null && pass "no old error prefixes" || fail "an old error prefix"
# Raw bytes of a bad file never reach the terminal.
{ printf '\033[2J\033]0;title\007\302\233 '; "$PYTHON" -c 'import sys; sys.stdout.buffer.write(bytes(range(128, 256)) * 20)'
  printf ' = 1\n'; } > "$WORK/binary.ini"
expect_input_error binary-input-file 2 "$WORK/binary.ini" train "$WORK/binary.ini"
line=$(grep -a "^mpiddp: error:" "$WORK/binary-input-file.out" || true)
# This file holds no valid UTF-8 text (its one UTF-8 sequence is the C1 control CSI): no byte above 0x7f may pass.
! LC_ALL=C grep -aq $'[[:cntrl:]]\|[\x80-\xff]' <<<"$line" && pass "binary input: only printable ASCII in the error line" \
  || fail "binary input: raw bytes in the error line"
[ "${#line}" -le 1200 ] && pass "binary input: error line of ${#line} characters" || fail "binary input: error line of ${#line} characters"
# Permission problems are named as such (root ignores modes: an immutable directory stands in).
if mkdir -p "$WORK/locked/checkpoints" && chattr +i "$WORK/locked/checkpoints" 2>/dev/null; then
  at_exit "chattr -i '$WORK/locked/checkpoints' '$WORK/lockedrun' 2>/dev/null || true"
  expect_input_error checkpoint-permission 2 "run.dir $WORK/locked: cannot write checkpoints/ (Operation not permitted)" \
    train --data.train "$WORK/good" --run.dir "$WORK/locked" --train.epochs 1 --train.max_steps 2 --checkpoint.every_steps 2
  mkdir -p "$WORK/lockedrun" && chattr +i "$WORK/lockedrun"
  expect_input_error run-dir-permission 2 "run.dir $WORK/lockedrun: cannot write (Operation not permitted)" \
    train --data.train "$WORK/good" --run.dir "$WORK/lockedrun" --train.epochs 1
  expect_error shard-permission 1 "$WORK/lockedrun/shard-00000-of-00001.h5.tmp: cannot create shard (Operation not permitted)" \
    shard --format csv --input "$WORK/good.csv" --out "$WORK/lockedrun" --shards 1
else
  echo "note: permission messages not tried (chattr +i is not supported on $WORK's file system)"
fi
finish
