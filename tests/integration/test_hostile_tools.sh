#!/usr/bin/env bash
# Hostile input to the Python tools (scripts/from-torch, to-torch, sweep,
# sweep-summary, trace-merge): a crafted file never runs code; no tool writes onto
# its input, or over an existing output without --force, or leaves a temporary
# file; a sweep directory is never overwritten by another sweep; every refusal is
# one "<tool>: error:" line and exit 2, never a traceback. The inputs are made
# here (h5py, torch), so no training runs. SCRIPTS=DIR runs the checks against
# other copies of the scripts (e.g. an older commit's, to see them fail).
source "$(dirname "$0")/lib.sh"
SCRIPTS=${SCRIPTS:-$MPIDDP_SOURCE_DIR/scripts}
have_torch=1
for module in h5py numpy torch; do
  "$PYTHON" -c "import $module" 2>/dev/null || have_torch=0
done
[ "$have_torch" = 1 ] || echo "note: $PYTHON lacks h5py, numpy or torch: from-torch and to-torch are not checked"

# refused NAME TOOL TEXT COMMAND...: exit 2, nothing on stdout, one line on stderr,
# "TOOL: error: ..." with TEXT in it.
refused() {
  local name=$1 tool=$2 text=$3 rc=0; shift 3
  "$@" > "$WORK/$name.out" 2> "$WORK/$name.err" || rc=$?
  local lines; lines=$(wc -l < "$WORK/$name.err")
  if [ "$rc" != 2 ] || [ "$lines" != 1 ] || [ -s "$WORK/$name.out" ] || ! grep -q "^$tool: error: " "$WORK/$name.err" \
     || ! grep -qF -- "$text" "$WORK/$name.err"; then
    fail "$name: exit $rc, $lines line(s) on stderr, expected one '$tool: error: ...$text...' line:"
    tail -4 "$WORK/$name.err" | sed 's/^/    /' >&2
    return 0
  fi
  pass "$name: $(cat "$WORK/$name.err")"
}
# Every file under DIR with its contents' hash (symlinks as links): equal means untouched.
snapshot() { (cd "$1" && find . -printf '%p %y %l\n' | sort && find . -type f -print0 | sort -z | xargs -0r sha256sum); }
unchanged() {  # NAME DIR SNAPSHOT_FILE
  if snapshot "$2" | cmp -s - "$3"; then pass "$1: nothing in $(basename "$2") changed"
  else fail "$1: $(basename "$2") changed"; diff <(snapshot "$2") "$3" | head -6 >&2 || true; fi
}
no_temp_files() {  # NAME DIR
  local left; left=$(find "$2" -name '*.tmp' | head -3)
  [ -z "$left" ] && pass "$1: no temporary file left" || fail "$1: left $left"
}

if [ "$have_torch" = 1 ]; then
# ==== from-torch ====
FT=$WORK/ft
mkdir -p "$FT"
"$PYTHON" - "$FT" <<'PY' || fail "writing the .pt files"
import os, sys, torch
d = sys.argv[1]
class Payload:  # unpickling it runs a shell command: it must never be unpickled
    def __reduce__(self):
        return (os.system, (f"touch {d}/marker",))
torch.save({"0.weight": torch.ones(2, 3), "0.bias": Payload()}, f"{d}/evil.pt")
torch.save(Payload(), f"{d}/evil-top.pt")
torch.manual_seed(1)
model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2))
torch.save(model.state_dict(), f"{d}/good.pt")
torch.save(model, f"{d}/module.pt")
bf = {k: (v.to(torch.bfloat16) if v.is_floating_point() else v) for k, v in model.state_dict().items()}
torch.save(bf, f"{d}/bf16.pt")
torch.save({"0.weight": torch.ones(2, 3), "layers.0.weight": torch.ones(2, 3)}, f"{d}/collide.pt")
torch.save({"0.weight": torch.ones(2, 3).to_sparse()}, f"{d}/sparse.pt")
torch.save({"0.weight": torch.ones(2, 3), "epoch": 3}, f"{d}/scalar-value.pt")
torch.save({"model": model.state_dict(), "epoch": 3}, f"{d}/nested.pt")
torch.save([torch.ones(2)], f"{d}/list.pt")
torch.save({"0/weight": torch.ones(2, 3)}, f"{d}/slash.pt")
torch.save({0: torch.ones(2, 3)}, f"{d}/int-key.pt")
torch.save({"0.weight": torch.ones(2, 3, dtype=torch.complex64)}, f"{d}/complex.pt")
torch.save({"0.weight": torch.ones(2, 3, dtype=torch.int32)}, f"{d}/int.pt")
torch.save({"0.weight": torch.full((2, 3), 1e300, dtype=torch.float64)}, f"{d}/overflow.pt")
torch.save({"0.weight": torch.ones(2), "1.num_batches_tracked": torch.tensor(2.5)}, f"{d}/float-counter.pt")
torch.save({"0.weight": torch.ones([1] * 33)}, f"{d}/dims33.pt")
# A TorchScript archive whose module's __setstate__ overwrites a file: PyTorch 1.13's weights_only load hands such
# an archive to torch.jit.load, which runs it. (Scripting needs the class's source in a file.)
with open(f"{d}/victim.txt", "w") as victim:
    victim.write("intact!")
with open(f"{d}/writer_module.py", "w") as source:
    source.write(f"""
import torch
from typing import Tuple
class Writer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(2))
    @torch.jit.export
    def __getstate__(self) -> Tuple[torch.Tensor, bool]:
        return (self.w, self.training)
    @torch.jit.export
    def __setstate__(self, state: Tuple[torch.Tensor, bool]) -> None:
        self.w = state[0]
        self.training = state[1]
        t = torch.from_file({d + '/victim.txt'!r}, shared=True, size=7, dtype=torch.uint8)
        t.copy_(torch.tensor([80, 87, 78, 69, 68, 33, 33], dtype=torch.uint8))
        print(t.sum())
    def forward(self, x):
        return x * self.w
""")
sys.path.insert(0, d)
import writer_module
torch.jit.save(torch.jit.script(writer_module.Writer()), f"{d}/jit.pt")
# A storage declared far larger than its record: PyTorch 1.13 reads past the record's end (heap bytes as weights).
import collections, io, pickle, struct, zipfile
from torch._utils import _rebuild_tensor_v2
class Storage:
    pass
class Tensor:
    def __reduce__(self):
        return (_rebuild_tensor_v2, (Storage(), 0, (60, 100), (100, 1), False, collections.OrderedDict()))
class Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        return ("storage", torch.FloatStorage, "0", "cpu", 6000) if isinstance(obj, Storage) else None
pickled = io.BytesIO()
Pickler(pickled, protocol=2).dump({"0.weight": Tensor()})
with zipfile.ZipFile(f"{d}/short-record.pt", "w") as z:
    z.writestr("a/data.pkl", pickled.getvalue())
    z.writestr("a/version", "3\n")
    z.writestr("a/data/0", struct.pack("6f", *range(6)))
# A data.pkl marked deflated whose bytes are no deflate stream (zlib's error, not a traceback).
with zipfile.ZipFile(f"{d}/bad-deflate.pt", "w") as z:
    z.writestr("a/version", "3\n")
    z.writestr("a/data.pkl", b"x" * 100)
raw = bytearray(open(f"{d}/bad-deflate.pt", "rb").read())
for signature, method_at, name_at in ((b"PK\x03\x04", 8, 30), (b"PK\x01\x02", 10, 46)):
    at = raw.find(signature)
    while at >= 0:
        if raw[at + name_at:at + name_at + 10] == b"a/data.pkl":
            raw[at + method_at:at + method_at + 2] = struct.pack("<H", 8)
        at = raw.find(signature, at + 4)
open(f"{d}/bad-deflate.pt", "wb").write(raw)
# A 64 KB archive whose data.pkl inflates to 64 MB of pickle opcodes (the scan's stack would grow with them).
with zipfile.ZipFile(f"{d}/pickle-bomb.pt", "w", compression=zipfile.ZIP_DEFLATED) as z:
    z.writestr("a/data.pkl", b"N" * (64 << 20))
    z.writestr("a/version", "3\n")
PY
from_torch() { "$PYTHON" "$SCRIPTS/from-torch" "$@"; }

refused from-torch-pickle-bomb from-torch "its data.pkl is 67108864 bytes, more than a state_dict's pickle" \
  from_torch "$FT/pickle-bomb.pt" "$FT/pickle-bomb.h5"
refused from-torch-bad-deflate from-torch "cannot read its data.pkl (error: Error -3" \
  from_torch "$FT/bad-deflate.pt" "$FT/bad-deflate.h5"
refused from-torch-missing from-torch "no-such.pt: cannot read (No such file or directory)" \
  from_torch "$FT/no-such.pt" "$FT/no-such.h5"

# 1. A pickle that runs code when unpickled: refused before any of it runs.
refused from-torch-payload from-torch "evil.pt: " from_torch "$FT/evil.pt" "$FT/evil.h5"
refused from-torch-payload-top from-torch "evil-top.pt: " from_torch "$FT/evil-top.pt" "$FT/evil-top.h5"
[ ! -e "$FT/marker" ] && pass "from-torch: the crafted pickles ran no code" || fail "from-torch: a crafted pickle ran code (marker written)"
[ ! -e "$FT/evil.h5" ] && [ ! -e "$FT/evil-top.h5" ] && pass "from-torch: nothing written for them" || fail "from-torch wrote an output for a crafted pickle"
# A whole saved module needs Python's full unpickler, which runs code: always refused.
refused from-torch-module from-torch "save model.state_dict() instead" from_torch "$FT/module.pt" "$FT/module.h5"
rc=0; from_torch --trust-pickle "$FT/module.pt" "$FT/module.h5" > /dev/null 2>&1 || rc=$?
[ "$rc" != 0 ] && [ ! -e "$FT/module.h5" ] && pass "from-torch has no flag that unpickles code" \
  || fail "from-torch --trust-pickle: exit $rc"

# 4. bfloat16 is converted (with a note); what cannot be converted is one line naming the key.
rc=0; from_torch "$FT/bf16.pt" "$FT/bf16.h5" > "$WORK/bf16.out" 2> "$WORK/bf16.err" || rc=$?
if [ "$rc" = 0 ] && grep -q "^from-torch: note: 8 bfloat16 tensor(s) converted to float32" "$WORK/bf16.err" \
   && ! grep -q Traceback "$WORK/bf16.err" && "$PYTHON" - "$FT" <<'PY'
import sys, h5py, numpy as np, torch
d = sys.argv[1]
state = torch.load(f"{d}/bf16.pt")
with h5py.File(f"{d}/bf16.h5", "r") as f:
    for key, value in state.items():
        group = "buffers" if key.endswith(("running_mean", "running_var", "num_batches_tracked")) else "params"
        ours = f[group]["layers." + key]
        expected = value.long().numpy() if key.endswith("num_batches_tracked") else value.float().numpy()
        assert ours.dtype == expected.dtype and np.array_equal(ours[()], expected), key
PY
then pass "from-torch: bfloat16 converted to float32, exactly: $(cat "$WORK/bf16.err")"
else fail "from-torch bfloat16 (exit $rc): $(tail -2 "$WORK/bf16.err")"; fi
refused from-torch-collision from-torch "'0.weight' and 'layers.0.weight' both become layers.0.weight" \
  from_torch "$FT/collide.pt" "$FT/collide.h5"
refused from-torch-sparse from-torch "'0.weight' is a sparse tensor" from_torch "$FT/sparse.pt" "$FT/sparse.h5"
refused from-torch-non-tensor from-torch "'epoch' is an int, not a tensor" from_torch "$FT/scalar-value.pt" "$FT/scalar-value.h5"
refused from-torch-nested from-torch "'model' is a" from_torch "$FT/nested.pt" "$FT/nested.h5"
refused from-torch-list from-torch "holds a list, not a state_dict" from_torch "$FT/list.pt" "$FT/list.h5"
refused from-torch-slash from-torch "'0/weight'" from_torch "$FT/slash.pt" "$FT/slash.h5"
refused from-torch-int-key from-torch "key 0 is an int, not a name" from_torch "$FT/int-key.pt" "$FT/int-key.h5"
refused from-torch-complex from-torch "'0.weight' is complex64" from_torch "$FT/complex.pt" "$FT/complex.h5"
refused from-torch-int from-torch "'0.weight' is int32" from_torch "$FT/int.pt" "$FT/int.h5"
refused from-torch-overflow from-torch "'0.weight': float64 values beyond float32's range" from_torch "$FT/overflow.pt" "$FT/overflow.h5"
refused from-torch-float-counter from-torch "'1.num_batches_tracked' is float32" \
  from_torch "$FT/float-counter.pt" "$FT/float-counter.h5"
refused from-torch-dims from-torch "'0.weight' has 33 dimensions" from_torch "$FT/dims33.pt" "$FT/dims33.h5"
refused from-torch-torchscript from-torch "a TorchScript archive (torch.jit.save), refused" \
  from_torch "$FT/jit.pt" "$FT/jit.h5"
[ "$(cat "$FT/victim.txt")" = "intact!" ] && pass "from-torch: the TorchScript archive ran no code" \
  || fail "from-torch: a TorchScript archive ran code (victim.txt now '$(cat "$FT/victim.txt")')"
mkfifo "$FT/fifo.pt"
refused from-torch-fifo from-torch "fifo.pt: not a regular file" timeout 60 "$PYTHON" "$SCRIPTS/from-torch" "$FT/fifo.pt" "$FT/fifo.h5"
refused from-torch-short-record from-torch "storage '0' declares 6000 elements (24000 bytes) but its record holds 24" \
  from_torch "$FT/short-record.pt" "$FT/short-record.h5"
printf 'not torch\n' > "$FT/text.pt"
: > "$FT/empty.pt"
refused from-torch-text from-torch "not a PyTorch file" from_torch "$FT/text.pt" "$FT/text.h5"
refused from-torch-empty from-torch "not a PyTorch file" from_torch "$FT/empty.pt" "$FT/empty.h5"
refused from-torch-absent from-torch "cannot read" from_torch "$FT/absent.pt" "$FT/absent.h5"
left=$(cd "$FT" && ls -A | { grep -v -e '\.pt$' -e '^module\.h5$' -e '^bf16\.h5$' -e '^victim\.txt$' -e '^writer_module\.py$' \
  -e '^__pycache__$' || true; } | tr '\n' ' ')
[ -z "$left" ] && pass "from-torch: no output and no temporary file for any refused input" || fail "from-torch left: $left"

# 3. No writing onto the input (not even with --force, nor through a link); an existing
# output only with --force; the output is replaced whole.
ln -s good.pt "$FT/symlink.h5"
ln "$FT/good.pt" "$FT/hardlink.h5"
echo "keep me" > "$FT/existing.h5"
snapshot "$FT" > "$WORK/ft.snap"
refused from-torch-onto-input from-torch "never writes onto its input" from_torch "$FT/good.pt" "$FT/good.pt" --force
refused from-torch-onto-symlink from-torch "never writes onto its input" from_torch "$FT/good.pt" "$FT/symlink.h5" --force
refused from-torch-onto-hardlink from-torch "never writes onto its input" from_torch "$FT/good.pt" "$FT/hardlink.h5" --force
refused from-torch-existing from-torch "existing.h5: already exists (pass --force to replace it)" \
  from_torch "$FT/good.pt" "$FT/existing.h5"
refused from-torch-no-dir from-torch "cannot write" from_torch "$FT/good.pt" "$FT/no-such-dir/out.h5"
unchanged "from-torch refusals" "$FT" "$WORK/ft.snap"
from_torch "$FT/good.pt" "$FT/existing.h5" --force > /dev/null 2>&1 && "$PYTHON" -c "import h5py, sys; h5py.File(sys.argv[1], 'r')['params']" \
  "$FT/existing.h5" && pass "from-torch --force replaces an existing output" || fail "from-torch --force"
no_temp_files "from-torch" "$FT"

# ==== to-torch ====
TT=$WORK/tt
mkdir -p "$TT"
cat > "$WORK/checkpoint.py" <<'PY'
"""checkpoint.py FILE CONFIG [EDIT]: an MLP checkpoint as to-torch reads it (8 -> 16 -> 3)."""
import sys, h5py, numpy as np
path, config = sys.argv[1], sys.argv[2]
edit = sys.argv[3] if len(sys.argv) > 3 else ""
rng = np.random.default_rng(0)
with h5py.File(path, "w") as f:
    f.attrs["config"] = np.bytes_(b"\xff\xfe") if edit == "binary-config" else config
    p = f.create_group("params")
    if edit == "group-param":
        p.create_group("layers.0.weight")
    else:
        p["layers.0.weight"] = rng.standard_normal((16, 8)).astype("float32")
    p["layers.0.bias"] = np.zeros(16, "float32")
    p["layers.2.weight"] = rng.standard_normal((3, 16)).astype("float32")
    p["layers.2.bias"] = np.zeros(3, "float32")
    if edit == "batchnorm":  # layers.1: batchnorm1d(16)
        p["layers.1.weight"], p["layers.1.bias"] = np.ones(16, "float32"), np.zeros(16, "float32")
        b = f.create_group("buffers")
        b["layers.1.running_mean"], b["layers.1.running_var"] = np.zeros(16, "float32"), np.ones(16, "float32")
        b["layers.1.num_batches_tracked"] = np.int64(3)
    if edit.startswith("outside-"):  # layers.0.weight read from elsewhere, as the binary refuses it
        kind, w = edit[len("outside-"):], path + ".other.h5"
        with h5py.File(w, "w") as o:
            o["w"] = rng.standard_normal((16, 8)).astype("float32")
        del p["layers.0.weight"]
        if kind == "external":
            raw = path + ".secret"
            open(raw, "wb").write(b"SECRET" * 200)
            p.create_dataset("layers.0.weight", shape=(16, 8), dtype="<f4", external=[(raw, 0, 512)])
        elif kind == "elink":
            p["layers.0.weight"] = h5py.ExternalLink(w, "w")
        elif kind == "soft":
            f["elsewhere"] = rng.standard_normal((16, 8)).astype("float32")
            p["layers.0.weight"] = h5py.SoftLink("/elsewhere")
        elif kind == "virtual":
            layout = h5py.VirtualLayout(shape=(16, 8), dtype="f4")
            layout[:] = h5py.VirtualSource(w, "w", shape=(16, 8))
            p.create_virtual_dataset("layers.0.weight", layout)
        elif kind == "unwritten":
            p.create_dataset("layers.0.weight", shape=(16, 8), dtype="f4", chunks=(16, 8), fillvalue=3.0)
        elif kind == "compressed":
            p.create_dataset("layers.0.weight", data=np.ones((16, 8), "f4"), compression="gzip")
    if edit == "params-fifo":  # /params itself an external link into a FIFO: opening it would block for good
        del f["params"]
        f["params"] = h5py.ExternalLink(path + ".fifo", "/params")
PY
checkpoint() { "$PYTHON" "$WORK/checkpoint.py" "$@"; }
to_torch() { "$PYTHON" "$SCRIPTS/to-torch" "$@"; }
checkpoint "$TT/ckpt.h5" $'[model]\nhidden = 16\n'

# 2. The checkpoint's file name goes into the generated module as data: names that
# close a docstring and run code do neither.
names=('a"""; import os; os.system("touch hostile-marker"); """b.h5'
       $'c\'\'\'\\\n"""\nimport os; os.system(\'touch hostile-marker\')\n#.h5')
i=0
for name in "${names[@]}"; do
  i=$((i + 1))
  cp "$TT/ckpt.h5" "$TT/$name"
  rc=0; (cd "$TT" && to_torch "$name" "name$i.pt" --module "name$i.py") > "$WORK/name$i.out" 2>&1 || rc=$?
  [ "$rc" = 0 ] || { fail "to-torch of hostile name $i: exit $rc: $(tail -1 "$WORK/name$i.out")"; continue; }
  if (cd "$TT" && "$PYTHON" - "name$i.py" "$name" <<'PY'
import importlib.util, os, sys, torch
spec = importlib.util.spec_from_file_location("generated", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
assert not os.path.exists("hostile-marker"), "the generated module ran code from the file name"
assert sys.argv[2] in module.__doc__, module.__doc__
model = module.load()
assert model(torch.zeros(2, 8)).shape == (2, 3)
PY
  ) > "$WORK/import$i.out" 2>&1 && [ ! -e "$TT/hostile-marker" ]; then
    pass "to-torch --module: hostile file name $i is data in the module (imports, loads, no code ran)"
  else fail "to-torch --module: hostile file name $i: $(tail -1 "$WORK/import$i.out")"; fi
  rm -f "$TT/hostile-marker"
done

# 3. Never onto the checkpoint (to-torch CKPT CKPT once turned it into a zip file);
# an existing output only with --force; both outputs or neither.
ln -s ckpt.h5 "$TT/symlink.pt"
ln "$TT/ckpt.h5" "$TT/hardlink.pt"
echo "keep me" > "$TT/existing.pt"
echo "# keep me" > "$TT/existing.py"
snapshot "$TT" > "$WORK/tt.snap"
# Only what the checkpoint itself stores, plainly (the binary's rules): never another
# file's bytes through external storage, links or a virtual dataset, never fill values.
mkdir -p "$WORK/tto"
for kind in external:"is stored in other files" elink:"is a link (ExternalLink)" soft:"is a link (SoftLink)" \
    virtual:"is stored in other files" unwritten:"declares 16 x 8 values but stores only 0 bytes" \
    compressed:"is stored through HDF5 filters"; do
  checkpoint "$WORK/tto/outside-${kind%%:*}.h5" $'[model]\nhidden = 16\n' "outside-${kind%%:*}"
  refused "to-torch-${kind%%:*}" to-torch "/params/layers.0.weight ${kind#*:}" \
    to_torch "$WORK/tto/outside-${kind%%:*}.h5" "$WORK/tto/outside-${kind%%:*}.pt"
done
mkfifo "$WORK/tto/params-fifo.h5.fifo"
checkpoint "$WORK/tto/params-fifo.h5" $'[model]\nhidden = 16\n' params-fifo
refused to-torch-params-fifo to-torch "/params is a link (ExternalLink)" \
  timeout 60 "$PYTHON" "$SCRIPTS/to-torch" "$WORK/tto/params-fifo.h5" "$WORK/tto/params-fifo.pt"
refused to-torch-onto-input to-torch "never writes onto its input" to_torch "$TT/ckpt.h5" "$TT/ckpt.h5"
mkfifo "$WORK/fifo-ckpt.h5"
refused to-torch-fifo to-torch "fifo-ckpt.h5: not a regular file" timeout 60 "$PYTHON" "$SCRIPTS/to-torch" \
  "$WORK/fifo-ckpt.h5" "$WORK/fifo-out.pt"
refused to-torch-onto-input-force to-torch "never writes onto its input" to_torch "$TT/ckpt.h5" "$TT/ckpt.h5" --force
refused to-torch-onto-symlink to-torch "never writes onto its input" to_torch "$TT/ckpt.h5" "$TT/symlink.pt" --force
refused to-torch-onto-hardlink to-torch "never writes onto its input" to_torch "$TT/ckpt.h5" "$TT/hardlink.pt" --force
refused to-torch-module-onto-input to-torch "never writes onto its input" \
  to_torch "$TT/ckpt.h5" "$TT/new.pt" --module "$TT/ckpt.h5" --force
refused to-torch-existing to-torch "existing.pt: already exists (pass --force" to_torch "$TT/ckpt.h5" "$TT/existing.pt"
refused to-torch-existing-module to-torch "existing.py: already exists (pass --force" \
  to_torch "$TT/ckpt.h5" "$TT/new.pt" --module "$TT/existing.py"
refused to-torch-module-no-dir to-torch "cannot write" to_torch "$TT/ckpt.h5" "$TT/new.pt" --module "$TT/no-such-dir/m.py"
unchanged "to-torch refusals" "$TT" "$WORK/tt.snap"
to_torch "$TT/ckpt.h5" "$TT/existing.pt" --module "$TT/existing.py" --force > /dev/null 2>&1 \
  && "$PYTHON" -c "import sys, torch; assert len(torch.load(sys.argv[1])) == 4" "$TT/existing.pt" \
  && grep -q "^def build" "$TT/existing.py" && pass "to-torch --force replaces existing outputs" || fail "to-torch --force"

# Stored input files that once gave tracebacks (or a generated module that cannot be imported).
bad_checkpoint() {  # NAME EXPECTED CONFIG [EDIT]
  checkpoint "$TT/$1.h5" "$3" "${4:-}"
  refused "to-torch-$1" to-torch "$2" to_torch "$TT/$1.h5" "$TT/$1.pt" --module "$TT/$1.py"
  [ ! -e "$TT/$1.pt" ] && [ ! -e "$TT/$1.py" ] || fail "to-torch-$1: an output was written"
}
bad_checkpoint hidden "model.hidden 'abc' is not a list of widths" $'[model]\nhidden = abc\n'
bad_checkpoint huge-hidden "has 1000000000x8" $'[model]\nhidden = 1000000000\n'
bad_checkpoint dropout "model.dropout 'x' is not a probability" $'[model]\nhidden = 16\ndropout = x\n'
bad_checkpoint eps "'batchnorm1d(eps=inf)': eps 'inf' is not a number" $'[model]\nlayers = linear(16) batchnorm1d(eps=inf) linear(3)\n' batchnorm
bad_checkpoint dropout-layer "'dropout(2)': p '2' is not a number in [0, 1)" $'[model]\nlayers = linear(16) dropout(2) linear(3)\n'
bad_checkpoint group-param "/params/layers.0.weight is not a numeric array" $'[model]\nhidden = 16\n' group-param
# model.layers goes to `mpiddp inspect layers` as one argument (--list=...): a list that looks like an option is
# still a list, refused by mpiddp's grammar.
bad_checkpoint option-list "'--classes=1': '--classes=1' is not a layer name" $'[model]\nlayers = --classes=1\n'
bad_checkpoint no-weight "layer 2 (layers.1) 'batchnorm1d': no parameter layers.1.weight" \
  $'[model]\nlayers = linear(16) batchnorm1d linear(3)\n'
checkpoint "$TT/layers.h5" $'[model]\nlayers = linear(16) relu linear(3)\n'
refused to-torch-no-binary to-torch "MPIDDP='$TT/no-mpiddp' is not an executable file" \
  env MPIDDP="$TT/no-mpiddp" "$PYTHON" "$SCRIPTS/to-torch" "$TT/layers.h5" "$TT/layers.pt"
bad_checkpoint binary-config "not UTF-8" $'[model]\nhidden = 16\n' binary-config
[ ! -e "$TT/new.pt" ] && pass "to-torch: no OUT.pt where --module could not be written" || fail "to-torch wrote new.pt alone"
no_temp_files "to-torch" "$TT"
fi  # have_torch

# ==== sweep ====
SW=$WORK/sw
mkdir -p "$SW" "$WORK/bin"
# sbatch that only records its arguments (one call per line).
cat > "$WORK/bin/sbatch" <<'SH'
#!/bin/sh
echo "$*" >> "$SBATCH_CALLS"
SH
chmod +x "$WORK/bin/sbatch"
export SBATCH_CALLS=$WORK/sbatch.calls
: > "$SBATCH_CALLS"
sweep() { PATH=$WORK/bin:$PATH "$PYTHON" "$SCRIPTS/sweep" "$@"; }
calls() { wc -l < "$SBATCH_CALLS"; }
printf '[model]\nhidden = 16\n' > "$SW/base.ini"
printf 'a optim.lr=0.1\nb optim.lr=0.2\n' > "$SW/batch.txt"
printf 'a optim.lr=0.1\nb optim.lr=0.3\n' > "$SW/other.txt"

# 7. --out with a tab or newline cannot be a column of runs.tsv: refused, nothing created.
refused sweep-out-tab sweep "has a tab" sweep "$SW/base.ini" "$SW/batch.txt" --out "$SW/tab"$'\t'"x"
refused sweep-out-newline sweep "has a newline" sweep "$SW/base.ini" "$SW/batch.txt" --out "$SW/new"$'\n'"line"
refused sweep-out-comma sweep "has a comma" sweep "$SW/base.ini" "$SW/batch.txt" --out "$SW/a,b"
[ "$(calls)" = 0 ] && [ -z "$(find "$SW" -mindepth 1 -type d)" ] && pass "sweep: nothing created or submitted for them" \
  || fail "sweep submitted ($(calls)) or created $(find "$SW" -mindepth 1 -type d | head -1)"

# 8. A sweep, then another into the same --out: refused; the same sweep again: nothing
# changes, and --resubmit submits its array again.
sweep "$SW/base.ini" "$SW/batch.txt" --out "$SW/s" > "$WORK/first.out" 2>&1 || fail "first sweep: exit $?: $(cat "$WORK/first.out")"
[ "$(calls)" = 1 ] && grep -q -- "--array=0-1 .* $SW/s/base.ini\$" "$SBATCH_CALLS" && [ -f "$SW/s/runs.tsv" ] \
  && cmp -s "$SW/base.ini" "$SW/s/base.ini" && pass "first sweep: runs.tsv and base.ini written, array submitted with base.ini" \
  || fail "first sweep: $(cat "$SBATCH_CALLS")"
snapshot "$SW/s" > "$WORK/sweep.snap"
refused sweep-other-batch sweep "already holds another sweep" sweep "$SW/base.ini" "$SW/other.txt" --out "$SW/s"
unchanged "sweep: another batch file into a used --out" "$SW/s" "$WORK/sweep.snap"
printf '[model]\nhidden = 32\n' > "$SW/base2.ini"
refused sweep-other-base sweep "another base file" sweep "$SW/base2.ini" "$SW/batch.txt" --out "$SW/s"
refused sweep-other-base-resubmit sweep "another base file" sweep "$SW/base2.ini" "$SW/batch.txt" --out "$SW/s" --resubmit
[ "$(calls)" = 1 ] && pass "sweep: the refused sweeps submitted nothing" || fail "sweep: a refused sweep was submitted"
unchanged "sweep: another base file into a used --out" "$SW/s" "$WORK/sweep.snap"
rc=0; sweep "$SW/base.ini" "$SW/batch.txt" --out "$SW/s" > "$WORK/again.out" 2>&1 || rc=$?
[ "$rc" = 0 ] && [ "$(calls)" = 1 ] && grep -q "already holds this sweep" "$WORK/again.out" \
  && pass "the same sweep again: exit 0, nothing submitted: $(cat "$WORK/again.out")" || fail "the same sweep again (exit $rc): $(cat "$WORK/again.out")"
rc=0; sweep "$SW/base.ini" "$SW/batch.txt" --out "$SW/s" --resubmit > "$WORK/resubmit.out" 2>&1 || rc=$?
[ "$rc" = 0 ] && [ "$(calls)" = 2 ] && pass "--resubmit: the same array submitted again" || fail "--resubmit (exit $rc): $(cat "$WORK/resubmit.out")"
unchanged "sweep: the same sweep again, and --resubmit" "$SW/s" "$WORK/sweep.snap"
# A % in --out is a literal % in sbatch's --output pattern (%%), not a replacement symbol.
sweep "$SW/base.ini" "$SW/batch.txt" --out "$SW/p%j" > "$WORK/percent.out" 2>&1 || fail "sweep into p%j: $(cat "$WORK/percent.out")"
tail -1 "$SBATCH_CALLS" | grep -qF -- "--output=$SW/p%%j/%x-%A_%a.out --export=ALL,MPIDDP_SWEEP=$SW/p%j/runs.tsv" \
  && pass "sweep: a % in --out is escaped for sbatch's --output" || fail "sweep --out p%j: $(tail -1 "$SBATCH_CALLS")"
no_temp_files "sweep" "$SW"

# ==== sweep-summary ====
SS=$WORK/ss
summary() { "$PYTHON" "$SCRIPTS/sweep-summary" "$@"; }
i=0
for run in 'a|{"status":"completed","test_accuracy":0.8,"test_loss":0.5}' \
           'b|{"status":"completed","test_accuracy":0.9,"test_loss":null}' \
           'c|{"status":"completed","test_accuracy":0.7,"test_loss":0.4}'; do
  name=${run%%|*}
  mkdir -p "$SS/$name"
  echo 0 > "$SS/$name/exit_code"
  echo "${run#*|}" > "$SS/$name/summary.json"
  printf '%d\t%s\t%s\toptim.lr=0.%d\n' "$i" "$name" "$SS/$name" "$i" >> "$SS/runs.tsv"
  i=$((i + 1))
done
# 5. A null metric: shown as -, unranked, after the ranked runs, with a note.
rc=0; summary "$SS" --metric test_loss --ascending > "$WORK/ss.md" 2> "$WORK/ss.err" || rc=$?
if [ "$rc" = 0 ] && ! grep -q Traceback "$WORK/ss.err" && grep -q "^| 1 | c | completed | 0.7 | 0.4 |" "$WORK/ss.md" \
   && grep -q "^| 2 | a | completed |" "$WORK/ss.md" && grep -q "^| - | b | completed | 0.9 | - |" "$WORK/ss.md" \
   && grep -q "^sweep-summary: note: 1 completed run(s) have no test_loss" "$WORK/ss.err"; then
  pass "sweep-summary: a null test_loss is '-', unranked, listed last: $(grep note "$WORK/ss.err")"
else fail "sweep-summary with a null test_loss (exit $rc):"; cat "$WORK/ss.md" "$WORK/ss.err" >&2; fi
rc=0; summary "$SS" --metric test_loss --format csv > "$WORK/ss.csv" 2> "$WORK/ss-csv.err" || rc=$?
[ "$rc" = 0 ] && grep -q "^-,b,completed,0.9,-," "$WORK/ss.csv" && pass "sweep-summary --format csv with a null metric" \
  || { fail "sweep-summary csv (exit $rc)"; cat "$WORK/ss.csv" "$WORK/ss-csv.err" >&2; }
# A summary.json that is JSON but no object, or a directory: that run has no summary.
echo '[1, 2]' > "$SS/a/summary.json"
rm "$SS/c/summary.json"; mkdir "$SS/c/summary.json"
rc=0; summary "$SS" > "$WORK/ss2.md" 2> "$WORK/ss2.err" || rc=$?
[ "$rc" = 0 ] && grep -q "| - | a | failed (no summary) |" "$WORK/ss2.md" && grep -q "| - | c | failed (no summary) |" "$WORK/ss2.md" \
  && pass "sweep-summary: a summary.json that is a list or a directory is no summary" || { fail "sweep-summary damaged summaries (exit $rc)"; cat "$WORK/ss2.err" >&2; }
# Nested 100 000 deep: no summary, no traceback.
"$PYTHON" -c "print('[' * 100000)" > "$SS/a/summary.json"
rc=0; summary "$SS" > "$WORK/ss3.md" 2> "$WORK/ss3.err" || rc=$?
[ "$rc" = 0 ] && grep -q "| - | a | failed (no summary) |" "$WORK/ss3.md" \
  && pass "sweep-summary: a summary.json nested 100 000 deep is no summary" || { fail "sweep-summary deep (exit $rc)"; tail -3 "$WORK/ss3.err" >&2; }
# A FIFO would block the tools for good.
rm -rf "$SS/c/summary.json"; mkfifo "$SS/c/summary.json"
refused sweep-summary-fifo sweep-summary "c/summary.json: not a regular file (a FIFO)" timeout 60 "$PYTHON" "$SCRIPTS/sweep-summary" "$SS"
rm "$SS/c/summary.json"
mkfifo "$WORK/fifo-batch.txt"
printf '[train]\nepochs = 1\n' > "$WORK/fifo-base.ini"
refused sweep-fifo-batch sweep "fifo-batch.txt: not a regular file (a FIFO)" timeout 60 "$PYTHON" "$SCRIPTS/sweep" \
  "$WORK/fifo-base.ini" "$WORK/fifo-batch.txt" --out "$WORK/fifo-sweep" --dry-run
mkdir -p "$WORK/plot-fifo" "$WORK/plot-bad" && mkfifo "$WORK/plot-fifo/metrics.jsonl"
refused plot-fifo plot "metrics.jsonl: not a regular file (a FIFO)" timeout 60 "$PYTHON" "$SCRIPTS/plot" "$WORK/plot-fifo"
{ printf '\xff\xfe\n'; "$PYTHON" -c "print('[' * 100000)"; echo '{"type":"train","global_step":1,"loss":1.0}'; } \
  > "$WORK/plot-bad/metrics.jsonl"
if "$PYTHON" -c "import matplotlib" 2>/dev/null; then
  rc=0; "$PYTHON" "$SCRIPTS/plot" "$WORK/plot-bad" --out "$WORK/plot-bad.png" > "$WORK/plot-bad.out" 2>&1 || rc=$?
  [ "$rc" = 0 ] && [ -s "$WORK/plot-bad.png" ] && pass "plot: undecodable bytes and a line nested 100 000 deep are skipped" \
    || { fail "plot on damaged metrics.jsonl (exit $rc)"; tail -3 "$WORK/plot-bad.out" >&2; }
else echo "note: $PYTHON lacks matplotlib: plot on a damaged metrics.jsonl is not checked"; fi
printf 'x\tbroken\n' >> "$SS/runs.tsv"
refused sweep-summary-bad-line sweep-summary "runs.tsv:4: not index<TAB>name" summary "$SS"

# ==== trace-merge ====
# 6. Malformed traces: one line naming the file and what is wrong.
TM=$WORK/tm
trace_case() {  # NAME RANK0-JSON: rank 1 is a good trace
  mkdir -p "$TM/$1/trace"
  printf '%s\n' "$2" > "$TM/$1/trace/rank-0.json"
  printf '%s\n' '{"traceEvents":[{"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":"rank 1"}},{"name":"step 1","ph":"X","pid":1,"tid":0,"ts":10.5,"dur":2}],"otherData":{"clock_sync_us":7}}' \
    > "$TM/$1/trace/rank-1.json"
}
merge() { "$PYTHON" "$SCRIPTS/trace-merge" "$@"; }
trace_case event-string '{"traceEvents":["x"],"otherData":{"clock_sync_us":1}}'
trace_case ts-string '{"traceEvents":[{"name":"a","ph":"X","ts":"5","dur":1}],"otherData":{"clock_sync_us":1}}'
trace_case no-ts '{"traceEvents":[{"name":"a","ph":"X","dur":1}],"otherData":{"clock_sync_us":1}}'
trace_case no-ph '{"traceEvents":[{"name":"a","ts":5}],"otherData":{"clock_sync_us":1}}'
trace_case nan-ts '{"traceEvents":[{"name":"a","ph":"X","ts":NaN,"dur":1}],"otherData":{"clock_sync_us":1}}'
trace_case other-list '{"traceEvents":[],"otherData":[1]}'
trace_case top-list '[{"name":"a","ph":"X","ts":5}]'
trace_case not-json '{"traceEvents": [oops'
refused trace-merge-event-string trace-merge "rank-0.json: traceEvents[0] is not an object" merge "$TM/event-string"
refused trace-merge-ts-string trace-merge "rank-0.json: traceEvents[0] (a) has no number \"ts\"" merge "$TM/ts-string"
refused trace-merge-no-ts trace-merge "rank-0.json: traceEvents[0] (a) has no number \"ts\"" merge "$TM/no-ts"
refused trace-merge-no-ph trace-merge "rank-0.json: traceEvents[0] has no string \"ph\"" merge "$TM/no-ph"
refused trace-merge-nan trace-merge "rank-0.json: not JSON (NaN is not JSON)" merge "$TM/nan-ts"
refused trace-merge-other-list trace-merge "rank-0.json: no integer clock_sync_us" merge "$TM/other-list"
refused trace-merge-top-list trace-merge "rank-0.json: not a trace written by mpiddp" merge "$TM/top-list"
refused trace-merge-not-json trace-merge "rank-0.json: not JSON" merge "$TM/not-json"
trace_case good '{"traceEvents":[{"name":"step 1","ph":"X","pid":0,"tid":0,"ts":3,"dur":1}],"otherData":{"clock_sync_us":5}}'
cp "$TM/good/trace/rank-1.json" "$TM/good/trace/rank-01.json"
refused trace-merge-two-files-one-rank trace-merge "are both rank 1" merge "$TM/good"
rm "$TM/good/trace/rank-01.json"
snapshot "$TM/good" > "$WORK/tm.snap"
refused trace-merge-onto-input trace-merge "it is the input" merge "$TM/good" --out "$TM/good/trace/rank-1.json"
unchanged "trace-merge onto a rank file" "$TM/good" "$WORK/tm.snap"
merge "$TM/good" > /dev/null 2>&1 && "$PYTHON" -c "import json, sys; assert len(json.load(open(sys.argv[1]))['traceEvents']) == 5" \
  "$TM/good/trace/merged.json" && pass "trace-merge of good traces" || fail "trace-merge of good traces"
no_temp_files "trace-merge" "$TM"
finish
