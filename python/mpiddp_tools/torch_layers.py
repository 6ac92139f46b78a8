"""mpiddp's model.layers as torch.nn modules (used by scripts/to-torch and the tests).

The grammar and the argument names are mpiddp's (src/nn/layer_list.cpp and the
registry in src/nn/model_builder.cpp): calls separated by whitespace outside
parentheses, `name` or `name(positional..., key=value...)`, PyTorch's constructor
arguments minus the input size. The input sizes come from the parameters'
shapes (/params/layers.<i>.weight), so no shape inference is needed here; the
module at index i of the torch.nn.Sequential is mpiddp's layers.<i>.
"""
import math
import re

# PyTorch's argument names in positional order, as mpiddp's registry lists them.
ARGUMENTS = {
    "linear": ["out_features"],
    "conv2d": ["out_channels", "kernel_size", "stride", "padding"],
    "maxpool2d": ["kernel_size", "stride"],
    "avgpool2d": ["kernel_size", "stride"],
    "batchnorm1d": ["eps", "momentum"],
    "batchnorm2d": ["eps", "momentum"],
    "relu": [], "gelu": [], "tanh": [],
    "dropout": ["p"],
    "flatten": [],
}


class LayerListError(ValueError):
    pass


def split_calls(text):
    """The calls of a layer list, as written."""
    calls, current, depth = [], "", 0
    for ch in text:
        if depth == 0 and ch.isspace():
            if current:
                calls.append(current)
            current = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        current += ch
    if current:
        calls.append(current)
    return calls


def parse_call(text, index):
    """(name, {argument: value text}) of one call, with positional arguments named."""
    m = re.fullmatch(r"([a-z][a-z0-9_]*)(?:\((.*)\))?", text)
    if not m or m.group(1) not in ARGUMENTS:
        raise LayerListError(f"layer {index + 1} (layers.{index}) '{text}': not a layer this script knows")
    name, inside = m.group(1), (m.group(2) or "").strip()
    names, values = ARGUMENTS[name], {}
    items = [item.strip() for item in inside.split(",")] if inside else []
    for position, item in enumerate(items):
        if "=" in item:
            key, value = (part.strip() for part in item.split("=", 1))
            values[key] = value
        else:
            values[names[position]] = item
    return name, values


def real(a, key, default, text, index):
    """A float argument, finite: its repr() is then a Python literal (inf and nan are not)."""
    try:
        value = float(a.get(key, default))
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise LayerListError(f"layer {index + 1} (layers.{index}) '{text}': {key} is not a finite number")
    return value


def module_code(layers, params, sync_batchnorm=False):
    """The torch.nn constructor texts, one per layer; params: name -> array (its .shape is used).
    Only fixed module names, ints and finite floats (repr) go into the text."""
    codes = []
    for i, text in enumerate(split_calls(layers)):
        name, a = parse_call(text, i)
        if name in ("maxpool2d", "avgpool2d") and "kernel_size" not in a:
            raise LayerListError(f"layer {i + 1} (layers.{i}) '{text}': no kernel_size")
        weight = params.get(f"layers.{i}.weight")
        if name in ("linear", "conv2d", "batchnorm1d", "batchnorm2d") and weight is None:
            raise LayerListError(f"layer {i + 1} (layers.{i}) '{text}': no parameter layers.{i}.weight")
        if name == "linear":
            codes.append(f"torch.nn.Linear({weight.shape[1]}, {weight.shape[0]})")
        elif name == "conv2d":
            out, inp, k = weight.shape[0], weight.shape[1], weight.shape[2]
            codes.append(f"torch.nn.Conv2d({inp}, {out}, kernel_size={k}, stride={int(a.get('stride', 1))}, "
                         f"padding={int(a.get('padding', 0))})")
        elif name in ("maxpool2d", "avgpool2d"):
            k = int(a["kernel_size"])
            kind = "MaxPool2d" if name == "maxpool2d" else "AvgPool2d"
            codes.append(f"torch.nn.{kind}(kernel_size={k}, stride={int(a.get('stride', k))})")
        elif name in ("batchnorm1d", "batchnorm2d"):
            # SyncBatchNorm (model.sync_batchnorm) computes what BatchNorm does on one process.
            kind = "BatchNorm1d" if name == "batchnorm1d" else "BatchNorm2d"
            codes.append(f"torch.nn.{kind}({weight.shape[0]}, eps={real(a, 'eps', 1e-5, text, i)!r}, "
                         f"momentum={real(a, 'momentum', 0.1, text, i)!r})")
        elif name == "dropout":
            codes.append(f"torch.nn.Dropout({real(a, 'p', 0.5, text, i)!r})")
        else:
            codes.append({"relu": "torch.nn.ReLU()", "gelu": "torch.nn.GELU()", "tanh": "torch.nn.Tanh()",
                          "flatten": "torch.nn.Flatten()"}[name])
    return codes


def build(torch, layers, params):
    """The torch.nn.Sequential of a layer list (float32, fresh weights)."""
    return eval("torch.nn.Sequential(" + ", ".join(module_code(layers, params)) + ")", {"torch": torch})


def state_dict(torch, params, buffers):
    """mpiddp's /params and /buffers (name -> array) under torch.nn.Sequential names."""
    state = {}
    for group in (params, buffers):
        for name, value in group.items():
            key = name[len("layers."):] if name.startswith("layers.") else name
            tensor = torch.tensor(value)  # arrays and numpy scalars (num_batches_tracked) alike
            state[key] = tensor.long() if key.endswith("num_batches_tracked") else tensor.float()
    return state
