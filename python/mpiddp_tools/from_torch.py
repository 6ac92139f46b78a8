"""Writes PyTorch weights as an HDF5 file that `model.init` reads.

usage: scripts/from-torch IN.pt OUT.h5 [--force]

IN.pt is a state_dict (torch.save(model.state_dict(), ...)). OUT.h5 gets the
layout of an mpiddp checkpoint's weights: /params/<name> (float32, PyTorch's
shapes: Linear weight out x in) and /buffers/<name> for BatchNorm's buffers
(running_mean and running_var float32, num_batches_tracked an int64 scalar), for
a model.layers model with the same layers. Names of a plain torch.nn.Sequential
("0.weight") become mpiddp's ("layers.0.weight"); names that already start with
"layers." are kept. Whether the weights fit the model is checked by the trainer
(names both ways, shapes) when it reads model.init.

IN.pt is loaded with torch.load(weights_only=True): tensors and plain containers
only, so a crafted file cannot run code while it is read. A whole saved module
(torch.save(model, ...)) needs Python's full unpickler, which runs whatever the
file says: it is refused; save model.state_dict() instead. Before that, the
archive itself is checked for what PyTorch 1.13's loader gets wrong: a TorchScript
archive (torch.jit.save) is refused, since weights_only hands it to torch.jit.load,
which runs the module's code; and every tensor storage must fit in its record
(a storage declared larger than its record is read past its end). bfloat16, float16 and float64 tensors are converted to float32 (a note
says so); sparse, quantized, complex and integer parameters are refused.

OUT.h5 is written to a temporary file next to it and renamed into place; an
existing OUT.h5 is refused unless --force, and IN.pt is never written over.

Needs h5py and torch (Debian: python3-h5py python3-torch; run with /usr/bin/python3
where python3 is another Python).
"""
import inspect
import io
import os
import pickle
import sys
import zipfile

from .cli import parser_from_doc
from .errors import die, need, note, one_line, set_program
from .files import refuse_existing, refuse_input, write_atomically

# What a state_dict holds besides parameters (BatchNorm's running statistics).
BUFFER_SUFFIXES = ("running_mean", "running_var", "num_batches_tracked")


# The largest data.pkl read (the pickle that names a state_dict's tensors; their values are separate records).
MAX_PICKLE_BYTES = 4 << 20

# Bytes per element of the storage classes a state_dict's pickle names.
STORAGE_BYTES = {"DoubleStorage": 8, "FloatStorage": 4, "HalfStorage": 2, "BFloat16Storage": 2, "LongStorage": 8,
                 "IntStorage": 4, "ShortStorage": 2, "CharStorage": 1, "ByteStorage": 1, "BoolStorage": 1,
                 "ComplexDoubleStorage": 16, "ComplexFloatStorage": 8, "QInt8Storage": 1, "QUInt8Storage": 1,
                 "QInt32Storage": 4, "QUInt4x2Storage": 1, "QUInt2x4Storage": 1, "UntypedStorage": 1}


class _Inert:
    """What every name in a pickle stands for while it is scanned: it accepts any call, item or state and does
    nothing, so no code the file names ever runs."""

    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        return _Inert()

    def __setstate__(self, state):
        pass

    def __setitem__(self, key, value):
        pass

    def append(self, value):
        pass

    def extend(self, values):
        pass


class _StorageScan(pickle.Unpickler):
    """Reads a state_dict's pickle only for the storages it declares: (storage class name, record key, elements)."""

    def __init__(self, data):
        super().__init__(io.BytesIO(data))
        self.storages = []

    def find_class(self, module, name):
        return name if module.split(".")[0] == "torch" and name.endswith("Storage") else _Inert

    def persistent_load(self, pid):
        if isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage":
            self.storages.append((pid[1], pid[2], pid[4]))
        return _Inert()


def check_archive(path):
    """Refuses a TorchScript archive and a storage larger than its record (see the module's text); the
    legacy (non-zip) format keeps each storage's size beside its bytes."""
    try:
        if not zipfile.is_zipfile(path):
            return
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as e:
        die(f"{path}: cannot read ({one_line(e)})")
    with archive:
        names = archive.namelist()
        if any(n.endswith("/constants.pkl") or "/code/" in n for n in names):
            die(f"{path}: a TorchScript archive (torch.jit.save), refused: loading one runs its code; from-torch "
                f"reads a state_dict saved with torch.save(model.state_dict(), ...)")
        pickles = [n for n in names if n.count("/") == 1 and n.endswith("/data.pkl")]
        if len(pickles) != 1:
            return  # not torch.save's layout: torch.load says so in its own words
        prefix = pickles[0][: -len("data.pkl")]
        # Inflated with a bound: a few MB of zip can hold GBs of pickle opcodes, each a stack entry to the scan.
        # A state_dict's pickle names its tensors, not their values: tens of KB for GPT-2.
        if archive.getinfo(pickles[0]).file_size > MAX_PICKLE_BYTES:
            die(f"{path}: its data.pkl is {archive.getinfo(pickles[0]).file_size} bytes, more than a state_dict's "
                f"pickle ever needs ({MAX_PICKLE_BYTES}); damaged or crafted file")
        try:
            with archive.open(pickles[0]) as stream:
                data = stream.read(MAX_PICKLE_BYTES + 1)
        except Exception as e:  # noqa: BLE001 (zlib.error, an unknown compression method, a bad CRC...)
            die(f"{path}: cannot read its data.pkl ({type(e).__name__}: {one_line(e)})")
        if len(data) > MAX_PICKLE_BYTES:
            die(f"{path}: its data.pkl inflates past {MAX_PICKLE_BYTES} bytes; damaged or crafted file")
        scan = _StorageScan(data)
        try:
            scan.load()
        except Exception as e:  # noqa: BLE001 (whatever the scan cannot follow, the loader is not given)
            die(f"{path}: its data.pkl cannot be read as a state_dict ({type(e).__name__}: {one_line(e)})")
        sizes = {info.filename: info.file_size for info in archive.infolist()}
        for kind, key, elements in scan.storages:
            record = f"{prefix}data/{key}"
            if kind not in STORAGE_BYTES or not isinstance(elements, int) or elements < 0:
                die(f"{path}: storage '{key}' is declared as {elements!r} elements of {kind!r}; not a state_dict")
            if record not in sizes:
                die(f"{path}: storage '{key}' has no record {record}")
            if sizes[record] < elements * STORAGE_BYTES[kind]:
                die(f"{path}: storage '{key}' declares {elements} elements ({elements * STORAGE_BYTES[kind]} "
                    f"bytes) but its record holds {sizes[record]} bytes (damaged or crafted file)")


def check_file(path):
    """What can be refused without PyTorch (whose import takes seconds): no file, a FIFO, a TorchScript archive."""
    if not os.path.lexists(path):
        die(f"{path}: cannot read (No such file or directory)")
    if os.path.exists(path) and not os.path.isfile(path):  # a FIFO would block the reads below for good
        die(f"{path}: not a regular file; from-torch reads a state_dict saved with torch.save")
    check_archive(path)


def load(torch, path):
    """The object in a .pt file: tensors and plain containers only (the file is untrusted; check_file first)."""
    if "weights_only" not in inspect.signature(torch.load).parameters:
        die(f"needs PyTorch 1.13 or newer (torch.load(weights_only=True)); this is {torch.__version__}")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except OSError as e:
        die(f"{path}: cannot read ({e.strerror or one_line(e)})")
    except pickle.UnpicklingError as e:
        text = one_line(e)
        reason = text.split("WeightsUnpickler error:", 1)[1].strip() if "WeightsUnpickler error:" in text else text
        if "qtensor" in reason:
            die(f"{path}: holds quantized tensors ({reason}); save them dequantized (tensor.dequantize())")
        if "class" in reason.lower() or "global" in reason.lower():
            die(f"{path}: refused: it unpickles Python objects ({reason}), which can run code; from-torch reads "
                f"tensors only: save model.state_dict() instead")
        die(f"{path}: not a PyTorch file ({reason})")
    except Exception as e:  # torch raises many kinds for a file that is not its own
        text = f"{type(e).__name__}: {' '.join(str(e).split())}" if str(e).strip() else type(e).__name__
        die(f"{path}: not a PyTorch file ({text})")


def kind_of(value):
    """'an int', 'a list': the type of a value, for a message."""
    name = type(value).__name__
    return ("an " if name[:1].lower() in "aeiou" else "a ") + name


def split_state(torch, obj, path):
    """(params, buffers): name -> tensor, from a state_dict."""
    if not isinstance(obj, dict):
        die(f"{path}: holds {kind_of(obj)}, not a state_dict (names -> tensors)")
    for key, value in obj.items():
        if not isinstance(key, str):
            die(f"{path}: key {key!r} is {kind_of(key)}, not a name")
        if not isinstance(value, torch.Tensor):
            hint = " (a training checkpoint? save the model's state_dict alone)" if isinstance(value, dict) else ""
            die(f"{path}: '{key}' is {kind_of(value)}, not a tensor{hint}")
    # A tied weight (GPT-2's lm_head.weight = wte.weight, mpiddp's linear(tie=K)) is one tensor under two
    # names; mpiddp stores it once, under the first (the embedding's).
    seen, obj = set(), dict(obj)
    for key in list(obj):
        tensor = obj[key]
        if tensor.layout != torch.strided or not tensor.numel():
            continue  # sparse and other layouts are refused below, with their own line
        storage = (tensor.data_ptr(), tuple(tensor.shape), tuple(tensor.stride()))
        if storage in seen:
            del obj[key]
        seen.add(storage)
    params = {k: v for k, v in obj.items() if not k.endswith(BUFFER_SUFFIXES)}
    buffers = {k: v for k, v in obj.items() if k.endswith(BUFFER_SUFFIXES)}
    return params, buffers


def mpiddp_name(name):
    return name if name.startswith("layers.") else "layers." + name


def check_names(path, params, buffers):
    """HDF5 names that can be written, and no two keys that become one."""
    seen = {}
    for group, tensors in (("params", params), ("buffers", buffers)):
        for key in tensors:
            if "/" in key or "\0" in key:
                die(f"{path}: '{key}': a name with '/' or a NUL character cannot be an HDF5 dataset name")
            name = mpiddp_name(key)
            if name in seen:
                die(f"{path}: '{seen[name]}' and '{key}' both become {name}")
            seen[name] = key


FLOATS = ("float16", "bfloat16", "float32", "float64")


def as_array(torch, np, path, key, tensor, counter, converted):
    """A tensor's values as a float32 (or, for a counter, int64) numpy array; refuses what is not weights."""
    if tensor.layout != torch.strided:
        die(f"{path}: '{key}' is a sparse tensor ({tensor.layout}); save it dense (tensor.to_dense())")
    if tensor.is_quantized:
        die(f"{path}: '{key}' is a quantized tensor ({tensor.dtype}); save it dequantized (tensor.dequantize())")
    if tensor.is_meta:
        die(f"{path}: '{key}' is a meta tensor: it holds no values")
    if tensor.dim() > 32:
        die(f"{path}: '{key}' has {tensor.dim()} dimensions; an HDF5 dataset holds at most 32")
    dtype = str(tensor.dtype).replace("torch.", "")
    tensor = tensor.detach().cpu()
    if counter:
        if tensor.is_floating_point() or tensor.is_complex() or tensor.dtype == torch.bool:
            die(f"{path}: '{key}' is {dtype}; a BatchNorm counter is an integer")
        return tensor.numpy().astype("int64")
    if dtype not in FLOATS:
        die(f"{path}: '{key}' is {dtype}, not a floating-point tensor")
    if dtype != "float32":
        converted.setdefault(dtype, []).append(key)
    values = tensor.float().numpy() if dtype == "bfloat16" else tensor.numpy()
    with np.errstate(over="ignore", invalid="ignore"):
        result = values.astype("float32")
    if dtype == "float64" and np.any(np.isinf(result) & np.isfinite(values)):
        die(f"{path}: '{key}': float64 values beyond float32's range")
    return result


def main(argv=None):
    set_program("from-torch")
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="backslashreplace")  # file names that are not UTF-8
    parser = parser_from_doc(__doc__)
    parser.add_argument("input", help="a PyTorch state_dict (.pt)")
    parser.add_argument("out", help="the HDF5 file to write (for model.init)")
    parser.add_argument("--force", action="store_true", help="replace OUT.h5 if it exists (never the input)")
    args = parser.parse_args(argv)
    refuse_input(args.out, args.input)
    refuse_existing(args.out, args.force)
    check_file(args.input)
    h5py, torch = need("h5py"), need("torch")
    np = need("numpy")
    params, buffers = split_state(torch, load(torch, args.input), args.input)
    if not params:
        die(f"{args.input}: no parameters")
    check_names(args.input, params, buffers)
    converted = {}
    arrays = {group: {mpiddp_name(key): as_array(torch, np, args.input, key, tensor,
                                                 key.endswith("num_batches_tracked"), converted)
                      for key, tensor in tensors.items()}
              for group, tensors in (("params", params), ("buffers", buffers))}
    for dtype, keys in sorted(converted.items()):
        verb = "rounded" if dtype == "float64" else "converted"
        note(f"{len(keys)} {dtype} tensor(s) {verb} to float32 (e.g. '{keys[0]}')")

    def write(temp):
        with h5py.File(temp, "w") as f:
            f.attrs["written_by"] = "mpiddp scripts/from-torch"
            for group, named in arrays.items():
                g = f.create_group(group)
                for name, values in named.items():
                    g.create_dataset(name, data=values)

    write_atomically([(args.out, write)])
    print(f"wrote {args.out}: {len(params)} parameter(s), {len(buffers)} buffer(s)")

