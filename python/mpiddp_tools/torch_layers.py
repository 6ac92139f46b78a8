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

A `residual` entry carries its branches (`body`, `shortcut`: resolved lists of
their own, whose entries have `path`s like layers.3.body.0) and becomes
Residual(torch.nn.Sequential(...), shortcut or None), a module defined by
RESIDUAL_SOURCE (namespace() gives it to eval; to-torch writes it into the
modules it generates), so the state_dict names are mpiddp's:
<i>.body.<j>.weight, <i>.shortcut.<j>.weight.

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
OWN_MODULE = re.compile(r"mpiddp_tools\.(Residual|PositionEmbedding|CausalSelfAttention)")  # MODULES_SOURCE's
LARGEST_CLASSES = 1 << 30  # mpiddp's --classes range is [1, 2^30]
WORD = re.compile(r"[a-z][a-z0-9_]{0,31}")  # a "word" argument's value (approximate='tanh')

MODULES_SOURCE = """
class Residual(torch.nn.Module):
    \"\"\"y = body(x) + x, or body(x) + shortcut(x): mpiddp's residual(BODY) and residual(BODY ; SHORTCUT).\"\"\"

    def __init__(self, body, shortcut=None):
        super().__init__()
        self.body = body
        self.shortcut = shortcut

    def forward(self, x):
        return self.body(x) + (x if self.shortcut is None else self.shortcut(x))


class PositionEmbedding(torch.nn.Module):
    \"\"\"x + a learned [T, D] table (nanoGPT's wpe, added to the token embeddings).\"\"\"

    def __init__(self, positions, width):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(positions, width).normal_())

    def forward(self, x):
        return x + self.weight


class CausalSelfAttention(torch.nn.Module):
    \"\"\"nanoGPT's CausalSelfAttention: c_attn to q, k, v, causal softmax per head, attn_dropout, c_proj,
    resid_dropout.\"\"\"

    def __init__(self, n_embd, num_heads, dropout=0.0):
        super().__init__()
        self.n_head = num_heads
        self.c_attn = torch.nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = torch.nn.Linear(n_embd, n_embd)
        self.attn_dropout = torch.nn.Dropout(dropout)
        self.resid_dropout = torch.nn.Dropout(dropout)

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) * (1.0 / (k.size(-1) ** 0.5))
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
        y = self.attn_dropout(torch.softmax(scores, dim=-1)) @ v
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c)))


def tie_weights(model, ties):
    \"\"\"model[i].weight is model[k].weight for each (i, k): GPT-2's lm_head.weight = wte.weight.\"\"\"
    for i, k in ties:
        model[i].weight = model[k].weight
    return model
"""
CUSTOM = re.compile(r"\b(Residual|PositionEmbedding|CausalSelfAttention|tie_weights)\(")
RESIDUAL_SOURCE = MODULES_SOURCE  # the name older callers use


_NAMESPACES = {}


def namespace(torch):
    """The names generated module code uses: torch and the modules of MODULES_SOURCE (made once per torch
    module, so that every model built here has the same classes)."""
    if id(torch) not in _NAMESPACES:
        names = {"torch": torch}
        exec(MODULES_SOURCE, names)  # our own constant text
        _NAMESPACES[id(torch)] = names
    return _NAMESPACES[id(torch)]


def needs_modules(code):
    """Whether generated code uses a module of MODULES_SOURCE (a module file must then define them)."""
    return CUSTOM.search(code) is not None


class LayerListError(ValueError):
    pass


def identifier(text):
    return isinstance(text, str) and text.isidentifier() and text.isascii() and not keyword.iskeyword(text)


def _no_constant(text):
    raise ValueError(f"{text} in the JSON")


_resolved = {}  # (binary, its arguments) -> the JSON text of a list it resolved


def resolve(layers, classes=None):
    """mpiddp's resolution of a layer list: one dict per layer, in order, with index, name, torch_module,
    arguments ({name: int or float}), input_argument (None for a layer without one) and input_weight_dim.
    CLASSES is what a final linear without a width gets (mpiddp's default when None). A list mpiddp refuses
    raises LayerListError with mpiddp's line (it names the layer); no binary, or one that cannot answer,
    MpiddpError."""
    args = ["inspect", "layers", "--list=" + layers, "--json"]
    if classes is not None:
        args.append(f"--classes={int(classes)}")
    # One model is resolved several times (its modules, its ties) and each answer is
    # a process start: the binary's answers are kept, the parsed lists are not shared.
    key = (binary.find(), *args)
    if key in _resolved:
        return json.loads(_resolved[key], parse_constant=_no_constant)
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
    _resolved[key] = out
    return resolved


def where(entry):
    i = entry["index"]
    return f"layer {i + 1} (layers.{i}) '{entry['name']}'"


def literal(entry, key, value):
    """An argument's value as Python text: ints, finite floats as their repr() (inf and nan are not literals),
    booleans, and words (lower-case names) as string literals."""
    if isinstance(value, bool):
        return repr(value)
    if isinstance(value, str):
        if not WORD.fullmatch(value):
            raise LayerListError(f"{where(entry)}: {key} is {value!r}, not a word")
        return repr(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise LayerListError(f"{where(entry)}: {key} is {type(value).__name__} {value!r}, not a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise LayerListError(f"{where(entry)}: {key} is not a finite number")
    return repr(value)


def constructor(entry, input_size=None, sizes=None):
    """The constructor text of one resolved layer (torch.nn.<Name>, or <Name> for a module of MODULES_SOURCE),
    its input size (if it has an input_argument) and SIZES (weight_sizes: argument -> int) given; every argument
    by keyword, except those torch does not take (not_torch: tie)."""
    module = entry.get("torch_module")
    if not isinstance(module, str) or not (MODULE.fullmatch(module) or OWN_MODULE.fullmatch(module)):
        raise LayerListError(f"{where(entry)}: torch module {module!r} is not torch.nn.<Name> or mpiddp_tools.<Name>")
    items = []
    input_argument = entry.get("input_argument")
    if input_argument is not None:
        if not identifier(input_argument):
            raise LayerListError(f"{where(entry)}: input argument {input_argument!r} is not a name")
        if isinstance(input_size, bool) or not isinstance(input_size, int) or input_size < 1:
            raise LayerListError(f"{where(entry)}: no input size for {input_argument}")
        items.append(f"{input_argument}={input_size}")
    for key, value in (sizes or {}).items():
        if not identifier(key) or isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise LayerListError(f"{where(entry)}: size {key}={value!r} is not a name and a positive int")
        items.append(f"{key}={value}")
    skip = entry.get("not_torch") or []
    for key, value in entry["arguments"].items():
        if key in skip:
            continue  # mpiddp's own: a tie is made after the modules are built (tie_weights)
        if not identifier(key):
            raise LayerListError(f"{where(entry)}: argument {key!r} is not a name")
        items.append(f"{key}={literal(entry, key, value)}")
    name = module if MODULE.fullmatch(module) else module.split(".")[1]
    return f"{name}({', '.join(items)})"


def final_classes(params):
    """What a final bare linear resolves to: the output size (dimension 0) of the last layer's weight; when the
    last weight is a LayerNorm's (1-D: the final linear is tied to the embedding, linear(tie=K), and has none),
    the rows of the first layer's 2-D weight (the embedding's vocabulary)."""
    weights = [(int(m.group(1)), value) for name, value in params.items()
               for m in [re.fullmatch(r"layers\.(\d+)\.weight", name)] if m]
    if not weights:
        return None
    shape = getattr(max(weights, key=lambda item: item[0])[1], "shape", ())
    if len(shape) == 1 and len(getattr(params.get("layers.0.weight"), "shape", ())) == 2:
        shape = params["layers.0.weight"].shape
    return int(shape[0]) if len(shape) >= 1 and 1 <= int(shape[0]) <= LARGEST_CLASSES else None


def path(entry):
    """The prefix of a layer's parameters: layers.<i>, or layers.<i>.body.<j> inside a residual."""
    text = entry.get("path", f"layers.{entry['index']}")
    if not isinstance(text, str) or not re.fullmatch(r"layers\.\d+(\.(body|shortcut)\.\d+)*", text):
        raise LayerListError(f"{where(entry)}: path {text!r} is not a parameter prefix")
    return text


def input_size(entry, params):
    """The input size of a layer with an input_argument: its weight's size at input_weight_dim."""
    dim, prefix = entry.get("input_weight_dim"), path(entry)
    weight = params.get(f"{prefix}.weight")
    if weight is None:
        raise LayerListError(f"{where(entry)}: no parameter {prefix}.weight")
    shape = tuple(getattr(weight, "shape", ()))
    if isinstance(dim, bool) or not isinstance(dim, int) or not 0 <= dim < len(shape):
        raise LayerListError(f"{where(entry)}: {prefix}.weight is {'x'.join(map(str, shape)) or 'a scalar'}, "
                             f"with no dimension {dim} for {entry.get('input_argument')}")
    return int(shape[dim])


def branch(entry, key):
    value = entry.get(key)
    if not isinstance(value, list) or any(not isinstance(e, dict) or not isinstance(e.get("name"), str)
                                          or not isinstance(e.get("arguments"), dict) for e in value):
        raise LayerListError(f"{where(entry)}: its {key} is not a layer list")
    return value


def sized(entry, params, parameter, dim, what):
    """Dimension DIM of the layer's parameter PARAMETER (a suffix: "weight", "c_attn.weight"), for WHAT."""
    if not isinstance(parameter, str) or not re.fullmatch(r"[a-z_]+(\.[a-z_]+)*", parameter):
        raise LayerListError(f"{where(entry)}: parameter {parameter!r} is not a parameter name")
    name = f"{path(entry)}.{parameter}"
    if name not in params:
        raise LayerListError(f"{where(entry)}: no parameter {name}")
    shape = tuple(getattr(params.get(name), "shape", ()))
    if isinstance(dim, bool) or not isinstance(dim, int) or not 0 <= dim < len(shape):
        raise LayerListError(f"{where(entry)}: {name} is {'x'.join(map(str, shape)) or 'missing'}, with no "
                             f"dimension {dim} for {what}")
    return int(shape[dim])


def weight_sizes(entry):
    """The constructor arguments read from parameter shapes: [{argument, parameter, weight_dim, sample_dim}]."""
    found = entry.get("weight_sizes") or []
    for w in found:
        if not isinstance(w, dict) or not identifier(w.get("argument")):
            raise LayerListError(f"{where(entry)}: weight_sizes entry {w!r} does not name an argument")
    return found


def shared_layer(entry):
    """k of a layer whose weight is layer k's (linear(tie=k): shared_weight "layers.k.weight"), else None."""
    shared = entry.get("shared_weight")
    if shared is None:
        return None
    m = re.fullmatch(r"layers\.(\d+)\.weight", shared) if isinstance(shared, str) else None
    if not m:
        raise LayerListError(f"{where(entry)}: shared_weight {shared!r} is not layers.<k>.weight")
    return int(m.group(1))


def container_code(entry, params, code_of):
    """A residual block (an entry with branches): its module, body Sequential and shortcut (None: identity)."""
    module = entry.get("torch_module")
    if not isinstance(module, str) or not OWN_MODULE.fullmatch(module):
        raise LayerListError(f"{where(entry)}: container module {module!r} is not mpiddp_tools.<Name>")
    body = "torch.nn.Sequential(" + ", ".join(code_of(e, params) for e in branch(entry, "body")) + ")"
    shortcut = branch(entry, "shortcut")
    tail = ", torch.nn.Sequential(" + ", ".join(code_of(e, params) for e in shortcut) + ")" if shortcut else ""
    return f"{module.split('.')[1]}({body}{tail})"


def entry_code(entry, params):
    """One resolved layer's constructor text, its sizes from its parameters' shapes as the JSON says: the input
    size at input_weight_dim of its weight (or of the weight it shares), the weight_sizes; a container's holds
    its branches' Sequentials."""
    if "body" in entry:
        return container_code(entry, params, entry_code)
    sizes = {w["argument"]: sized(entry, params, w.get("parameter"), w.get("weight_dim"), w["argument"])
             for w in weight_sizes(entry)}
    size = None
    if entry.get("input_argument") is not None:
        k = shared_layer(entry)
        owner = entry if k is None else {"index": k, "name": f"the layer it shares (layers.{k})", "path": f"layers.{k}"}
        size = sized(owner, params, "weight", entry.get("input_weight_dim"), entry.get("input_argument"))
    return constructor(entry, size, sizes)


def module_code(layers, params, sync_batchnorm=False):
    """The torch.nn constructor texts, one per layer; params: name -> array (its .shape is used).
    SyncBatchNorm (model.sync_batchnorm) computes what BatchNorm does on one process: the module is the same."""
    return [entry_code(entry, params) for entry in resolve(layers, final_classes(params))]


def ties(layers, params):
    """[(i, k)]: the top-level layer i whose weight is layer k's (linear(tie=k))."""
    found = []
    for entry in resolve(layers, final_classes(params)):
        k = shared_layer(entry)
        if k is not None and 0 <= k < entry["index"]:
            found.append((entry["index"], k))
    return found


def sequential_code(layers, params, separator=", "):
    """The model's constructor text: a torch.nn.Sequential, wrapped in tie_weights when a layer shares a weight."""
    first = separator[1:] if separator.startswith(",\n") else ""  # one module per line: the first too
    code = "torch.nn.Sequential(" + first + separator.join(module_code(layers, params)) + ")"
    tied = ties(layers, params)
    return f"tie_weights({code}, {tied!r})" if tied else code


def build(torch, layers, params):
    """The torch.nn.Sequential of a layer list (float32, fresh weights)."""
    return eval(sequential_code(layers, params), namespace(torch))


def module(torch, entry, input_size=None, sizes=None):
    """One resolved layer as a torch.nn module (for a caller that finds the input sizes itself)."""
    return eval(constructor(entry, input_size, sizes), namespace(torch))


def probed_modules(torch, resolved, sample_shape):
    """torch modules of a resolved list, each size found by running a probe batch through the modules before it
    (residual branches included), at the sample dimensions the JSON names: for callers without mpiddp's
    parameters."""
    tokens = bool(resolved) and resolved[0].get("takes_tokens") is True
    modules, probe = [], torch.zeros((2,) + tuple(sample_shape), dtype=torch.long if tokens else torch.float32)
    for entry in resolved:
        if "body" in entry:
            own = namespace(torch)[entry["torch_module"].split(".")[1]]
            body = torch.nn.Sequential(*probed_modules(torch, branch(entry, "body"), probe.shape[1:]))
            shortcut = branch(entry, "shortcut")
            shortcut = torch.nn.Sequential(*probed_modules(torch, shortcut, probe.shape[1:])) if shortcut else None
            modules.append(own(body, shortcut))
        else:
            sample = probe.shape[1:]
            sizes = {w["argument"]: int(sample[w["sample_dim"]]) for w in weight_sizes(entry)}
            size = int(sample[entry.get("input_sample_dim", 0)]) if entry.get("input_argument") else None
            modules.append(module(torch, entry, size, sizes))
        probe = modules[-1](probe)
    return modules


def state_dict(torch, params, buffers, tied=()):
    """mpiddp's /params and /buffers (name -> array) under torch.nn.Sequential names. A tied linear's weight
    (tied: ties()) is stored once, under its embedding; PyTorch's state_dict names it under both."""
    state = {}
    for i, k in tied:
        if f"layers.{k}.weight" in params:
            state[f"{i}.weight"] = torch.tensor(params[f"layers.{k}.weight"]).float()
    for group in (params, buffers):
        for name, value in group.items():
            key = name[len("layers."):] if name.startswith("layers.") else name
            tensor = torch.tensor(value)  # arrays and numpy scalars (num_batches_tracked) alike
            state[key] = tensor.long() if key.endswith("num_batches_tracked") else tensor.float()
    return state
