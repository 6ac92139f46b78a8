"""mpiddp's model.layers as torch.nn modules (used by scripts/to-torch, scripts/bench_torch_ddp.py and the tests).

This module does not read the layer-list grammar: mpiddp does. `mpiddp inspect
layers --list LIST --json` (the layer table in src/nn/layer_table.cpp, resolved
exactly as the model builder resolves it) names every layer's torch.nn module and
its arguments, positional ones named and defaults filled in, and says which
constructor argument the input size is (`input_argument`) and at which dimension
of the layer's weight it is found (`input_weight_dim`). The input sizes come from
the parameters' shapes (/params/layers.<i>.weight), so no shape inference is
needed here; the module at index i of the torch.nn.Sequential is mpiddp's
layers.<i>. The binary is found by binary.find() (MPIDDP, the installation, the
checkout's build/, PATH).

Only names checked to be identifiers (the module torch.nn.<Name>, the argument
names), ints and finite floats (repr) go into the constructor texts.
"""
import json
import keyword
import math
import re

from . import binary
from .binary import MpiddpError  # noqa: F401 (callers catch it from here)

MODULE = re.compile(r"torch\.nn\.[A-Za-z_][A-Za-z0-9_]*")
LARGEST_CLASSES = 1 << 30  # mpiddp's --classes range is [1, 2^30]


class LayerListError(ValueError):
    pass


def identifier(text):
    return isinstance(text, str) and text.isidentifier() and text.isascii() and not keyword.iskeyword(text)


def _no_constant(text):
    raise ValueError(f"{text} in the JSON")


def resolve(layers, classes=None):
    """mpiddp's resolution of a layer list: one dict per layer, in order, with index, name, torch_module,
    arguments ({name: int or float}), input_argument (None for a layer without one) and input_weight_dim.
    CLASSES is what a final linear without a width gets (mpiddp's default when None). A list mpiddp refuses
    raises LayerListError with mpiddp's line (it names the layer); no binary, or one that cannot answer,
    MpiddpError."""
    args = ["inspect", "layers", "--list=" + layers, "--json"]
    if classes is not None:
        args.append(f"--classes={int(classes)}")
    try:
        rc, out, error = binary.run(args)
    except ValueError as e:
        raise LayerListError(f"model.layers cannot be passed to mpiddp: {e}") from None
    if rc != 0:
        text = error[len("mpiddp: error: "):] if error.startswith("mpiddp: error: ") else error
        if text.startswith("model.layers: "):
            raise LayerListError(text[len("model.layers: "):])
        raise MpiddpError(f"{binary.find()} inspect layers --list: exit {rc}: {text or 'no message'}")
    try:
        resolved = json.loads(out, parse_constant=_no_constant)
        problem = None if isinstance(resolved, list) else "not a list"
        for position, entry in enumerate(resolved if problem is None else []):
            if not isinstance(entry, dict) or entry.get("index") != position or not isinstance(entry.get("name"), str) \
                    or not isinstance(entry.get("arguments"), dict):
                problem = f"entry {position} is not a layer"
                break
    except ValueError as e:
        problem = f"not JSON ({e})"
    if problem:
        raise MpiddpError(f"{binary.find()} inspect layers --list --json: unexpected output: {problem}")
    return resolved


def where(entry):
    i = entry["index"]
    return f"layer {i + 1} (layers.{i}) '{entry['name']}'"


def literal(entry, key, value):
    """An argument's value as Python text: ints, and finite floats as their repr() (inf and nan are not literals)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise LayerListError(f"{where(entry)}: {key} is {type(value).__name__} {value!r}, not a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise LayerListError(f"{where(entry)}: {key} is not a finite number")
    return repr(value)


def constructor(entry, input_size=None):
    """The torch.nn constructor text of one resolved layer, its input size (if it has an input_argument)
    given; every argument by keyword."""
    module = entry.get("torch_module")
    if not isinstance(module, str) or not MODULE.fullmatch(module):
        raise LayerListError(f"{where(entry)}: torch module {module!r} is not torch.nn.<Name>")
    items = []
    input_argument = entry.get("input_argument")
    if input_argument is not None:
        if not identifier(input_argument):
            raise LayerListError(f"{where(entry)}: input argument {input_argument!r} is not a name")
        if isinstance(input_size, bool) or not isinstance(input_size, int) or input_size < 1:
            raise LayerListError(f"{where(entry)}: no input size for {input_argument}")
        items.append(f"{input_argument}={input_size}")
    for key, value in entry["arguments"].items():
        if not identifier(key):
            raise LayerListError(f"{where(entry)}: argument {key!r} is not a name")
        items.append(f"{key}={literal(entry, key, value)}")
    return f"{module}({', '.join(items)})"


def final_classes(params):
    """What a final bare linear resolves to: the output size (dimension 0) of the last layer's weight."""
    weights = [(int(m.group(1)), value) for name, value in params.items()
               for m in [re.fullmatch(r"layers\.(\d+)\.weight", name)] if m]
    if not weights:
        return None
    shape = getattr(max(weights, key=lambda item: item[0])[1], "shape", ())
    return int(shape[0]) if len(shape) >= 1 and 1 <= int(shape[0]) <= LARGEST_CLASSES else None


def input_size(entry, params):
    """The input size of a layer with an input_argument: its weight's size at input_weight_dim."""
    i, dim = entry["index"], entry.get("input_weight_dim")
    weight = params.get(f"layers.{i}.weight")
    if weight is None:
        raise LayerListError(f"{where(entry)}: no parameter layers.{i}.weight")
    shape = tuple(getattr(weight, "shape", ()))
    if isinstance(dim, bool) or not isinstance(dim, int) or not 0 <= dim < len(shape):
        raise LayerListError(f"{where(entry)}: layers.{i}.weight is {'x'.join(map(str, shape)) or 'a scalar'}, "
                             f"with no dimension {dim} for {entry.get('input_argument')}")
    return int(shape[dim])


def module_code(layers, params, sync_batchnorm=False):
    """The torch.nn constructor texts, one per layer; params: name -> array (its .shape is used).
    SyncBatchNorm (model.sync_batchnorm) computes what BatchNorm does on one process: the module is the same."""
    codes = []
    for entry in resolve(layers, final_classes(params)):
        size = input_size(entry, params) if entry.get("input_argument") is not None else None
        codes.append(constructor(entry, size))
    return codes


def build(torch, layers, params):
    """The torch.nn.Sequential of a layer list (float32, fresh weights)."""
    return eval("torch.nn.Sequential(" + ", ".join(module_code(layers, params)) + ")", {"torch": torch})


def module(torch, entry, input_size=None):
    """One resolved layer as a torch.nn module (for a caller that finds the input sizes itself)."""
    return eval(constructor(entry, input_size), {"torch": torch})


def state_dict(torch, params, buffers):
    """mpiddp's /params and /buffers (name -> array) under torch.nn.Sequential names."""
    state = {}
    for group in (params, buffers):
        for name, value in group.items():
            key = name[len("layers."):] if name.startswith("layers.") else name
            tensor = torch.tensor(value)  # arrays and numpy scalars (num_batches_tracked) alike
            state[key] = tensor.long() if key.endswith("num_batches_tracked") else tensor.float()
    return state
