"""Exports an mpiddp checkpoint's weights as a PyTorch state_dict.

usage: scripts/to-torch CKPT.h5 OUT.pt [--module FILE.py] [--force]

OUT.pt holds the weights under the names of a plain torch.nn.Sequential
("0.weight", "0.bias", "3.weight", ...: the checkpoint's /params/layers.<i>.*
without "layers."), and BatchNorm's buffers from /buffers (running_mean,
running_var, num_batches_tracked). The model itself is rebuilt from the input
file stored in the checkpoint (its `config` attribute): model.layers (module i is
mpiddp's layers.<i>, as `mpiddp inspect layers --list` resolves it: the binary
is MPIDDP, else the installation's or the checkout's, else on PATH;
python/mpiddp_tools/torch_layers.py) or the model.hidden
MLP. The script prints the few lines of Python that build it and load OUT.pt,
and with --module writes them as FILE.py (`build()` returns the model,
`load(path)` the model with the weights, in eval mode). Features stored as uint8
in the shards (Fashion-MNIST) are fed to the model scaled by the shard's `scale`
attribute (1/255), as mpiddp does; image layers take them reshaped to (N, C, H, W).

Everything the checkpoint says that ends up in FILE.py (its name, the layer
arguments) is written as Python literals (repr), never as code. OUT.pt and
FILE.py are written to temporary files next to them and renamed into place; an
existing OUT.pt or FILE.py is refused unless --force, and the checkpoint is never
written over.

Needs h5py and torch (Debian: python3-h5py python3-torch; run with /usr/bin/python3
where python3 is another Python).
"""
import configparser
import math
import os
import re
import sys

from . import torch_layers
from .cli import parser_from_doc
from .errors import die, need, one_line, set_program
from .files import refuse_existing, refuse_input, same_file, write_atomically

ACTIVATIONS = {"relu": "torch.nn.ReLU()", "gelu": "torch.nn.GELU()", "tanh": "torch.nn.Tanh()"}


def check_outputs(outputs, checkpoint, force):
    """Never onto the checkpoint (not even with --force), nor both outputs onto one file; an existing output
    needs --force."""
    for _, path in outputs:
        refuse_input(path, checkpoint, "the checkpoint")
    if len(outputs) == 2 and same_file(outputs[0][1], outputs[1][1]):
        die(f"{outputs[1][1]}: --module names the same file as OUT.pt")
    for _, path in outputs:
        refuse_existing(path, force)


def check_in_file(h5py, parent, name, path, prefix="/"):
    """NAME in PARENT must be an object of this file: no soft or external link (which would read another one)."""
    link = parent.get(name, getlink=True)
    if not isinstance(link, h5py.HardLink):
        die(f"{path}: {prefix}{name} is a link ({type(link).__name__}); to-torch reads only what the checkpoint "
            "itself stores")


def check_stored_plainly(item, path, where):
    """As mpiddp writes it: the bytes in this file (no external storage, no virtual dataset), no filters (a damaged
    compressed chunk reads as uninitialised memory), and written (an unwritten one reads as its fill value)."""
    if item.is_virtual or item.external:
        die(f"{path}: {where} is stored in other files; to-torch reads only what the checkpoint itself stores")
    if item.compression or item.shuffle or item.fletcher32 or item.scaleoffset or item.id.get_create_plist().get_nfilters():
        die(f"{path}: {where} is stored through HDF5 filters (compressed); mpiddp writes checkpoints plain")
    if item.size and item.id.get_storage_size() < item.size * item.dtype.itemsize:
        die(f"{path}: {where} declares {' x '.join(map(str, item.shape))} values but stores only "
            f"{item.id.get_storage_size()} bytes (never written, or not a real data set)")


def read_checkpoint(h5py, path):
    """The /params and /buffers arrays (name -> numpy array) and the stored input file."""
    # HDF5's open would block forever on a FIFO, or read a device without end.
    if os.path.exists(path) and not os.path.isfile(path):
        die(f"{path}: not a regular file; to-torch reads an mpiddp checkpoint (HDF5)")
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        die(f"{path}: not a readable HDF5 file ({one_line(e)})")
    try:
        with f:
            for group in ("params", "buffers"):  # before `in` or f[...], which follow a link (a FIFO: for good)
                if f.get(group, getlink=True) is not None:
                    check_in_file(h5py, f, group, path)
            if "params" not in f or not isinstance(f["params"], h5py.Group):
                die(f"{path}: no /params group (not an mpiddp checkpoint)")
            if "config" not in f.attrs:
                die(f"{path}: no config attribute (not an mpiddp checkpoint)")
            if "buffers" in f and not isinstance(f["buffers"], h5py.Group):
                die(f"{path}: /buffers is not a group")
            arrays = []
            for group in ("params", "buffers"):
                named = {}
                for name in (f[group] if group in f else []):
                    check_in_file(h5py, f[group], name, path, f"/{group}/")
                    item = f[group].get(name)
                    if not isinstance(item, h5py.Dataset) or item.dtype.kind not in "fiu":
                        die(f"{path}: /{group}/{name} is not a numeric array")
                    check_stored_plainly(item, path, f"/{group}/{name}")
                    value = item[()]
                    named[name] = value if item.dtype.kind == "f" else value.astype("int64")  # torch lacks uint16...
                arrays.append(named)
            config = f.attrs["config"]
    except (OSError, KeyError, TypeError, ValueError, RuntimeError) as e:
        die(f"{path}: cannot read ({one_line(e)})")
    if isinstance(config, bytes):
        try:
            config = config.decode()
        except UnicodeDecodeError:
            die(f"{path}: the config attribute is not UTF-8 text")
    if not isinstance(config, str):
        die(f"{path}: the config attribute is not text")
    return arrays[0], arrays[1], config


def model_section(config_text, path):
    # "#" comments as mpiddp has them; ";" is not one (it separates a residual's branches).
    parser = configparser.ConfigParser(interpolation=None, inline_comment_prefixes=("#",))
    try:
        parser.read_string(config_text)
    except configparser.Error as e:
        die(f"{path}: the stored input file does not parse ({one_line(e)})")
    return parser["model"] if parser.has_section("model") else {}


def data_context(config_text, path):
    """data.context of the stored input file: above 0 for a sequence model, whose inputs are token ids."""
    parser = configparser.ConfigParser(interpolation=None, inline_comment_prefixes=("#",))
    try:
        parser.read_string(config_text)
        return int(parser["data"].get("context", "0")) if parser.has_section("data") else 0
    except (configparser.Error, ValueError) as e:
        die(f"{path}: data.context of the stored input file is not a number ({one_line(e)})")


def model_settings(model, path):
    """model.hidden, model.activation, model.dropout from the resolved input file."""
    hidden = model.get("hidden", "256,128").strip().strip('"')
    try:
        widths = [int(w) for w in hidden.split(",") if w.strip()]
    except ValueError:
        die(f"{path}: model.hidden '{hidden}' is not a list of widths")
    activation = model.get("activation", "relu").strip().strip('"')
    if activation not in ACTIVATIONS:
        die(f"{path}: model.activation '{activation}' has no PyTorch counterpart here")
    text = model.get("dropout", "0").strip().strip('"')
    try:
        dropout = float(text)
    except ValueError:
        dropout = math.nan
    if not 0 <= dropout < 1:
        die(f"{path}: model.dropout '{text}' is not a probability in [0, 1)")
    return widths, activation, dropout


def sequential_code(widths, activation, dropout, in_features, out_features):
    """torch.nn.Sequential(...) as mpiddp's build_mlp lays it out, and the index of each Linear."""
    layers, linear_at, width = [], [], in_features
    for w in widths:
        linear_at.append(len(layers))
        layers.append(f"torch.nn.Linear({width}, {w})")
        layers.append(ACTIVATIONS[activation])
        if dropout > 0:
            layers.append(f"torch.nn.Dropout({dropout!r})")
        width = w
    linear_at.append(len(layers))
    layers.append(f"torch.nn.Linear({width}, {out_features})")
    return "torch.nn.Sequential(\n    " + ",\n    ".join(layers) + ")", linear_at


def torch_state(params, linear_at, sizes, path):
    """The checkpoint's arrays under torch.nn.Sequential names; names and shapes checked both ways (before any
    model is built, so that a stored input file cannot make it allocate what the arrays do not hold)."""
    expected = [f"layers.{i}.{kind}" for i in linear_at for kind in ("weight", "bias")]
    if sorted(params) != sorted(expected):
        missing = sorted(set(expected) - set(params))
        extra = sorted(set(params) - set(expected))
        die(f"{path}: /params does not match the model in its stored input file "
            f"(missing {missing or 'none'}, unexpected {extra or 'none'})")
    def dims(shape):
        return "x".join(map(str, shape)) if shape else "a scalar"
    for i, (inputs, outputs) in zip(linear_at, zip(sizes, sizes[1:])):
        for kind, shape in (("weight", (outputs, inputs)), ("bias", (outputs,))):
            if tuple(params[f"layers.{i}.{kind}"].shape) != shape:
                die(f"{path}: /params/layers.{i}.{kind} is {dims(params[f'layers.{i}.{kind}'].shape)}"
                    f" but the model in its stored input file has {dims(shape)}")
    return [(name[len("layers."):], params[name]) for name in expected]


def main(argv=None):
    set_program("to-torch")
    parser = parser_from_doc(__doc__)
    parser.add_argument("checkpoint", help="an mpiddp checkpoint (run.dir/checkpoints/ckpt-step-N.h5)")
    parser.add_argument("out", help="the PyTorch state_dict to write (.pt)")
    parser.add_argument("--module", metavar="FILE.py", help="also write a Python module that builds the model")
    parser.add_argument("--force", action="store_true", help="replace OUT.pt and FILE.py if they exist "
                        "(never the checkpoint)")
    args = parser.parse_args(argv)
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="backslashreplace")  # file names that are not UTF-8
    check_outputs([("OUT.pt", args.out)] + ([("--module", args.module)] if args.module else []),
                  args.checkpoint, args.force)
    h5py = need("h5py")
    params, buffers, config = read_checkpoint(h5py, args.checkpoint)
    model_config = model_section(config, args.checkpoint)
    torch = need("torch")  # after the checkpoint's checks: its import takes seconds
    layers = model_config.get("layers", "").strip().strip('"')
    if layers:
        try:
            code = torch_layers.sequential_code(layers, params, separator=",\n    ")
            tied = torch_layers.ties(layers, params)
        except torch_layers.MpiddpError as e:
            die(f"{args.checkpoint}: model.layers: {one_line(e)}")
        except torch_layers.LayerListError as e:  # mpiddp refuses the list, or a layer lacks its weight
            die(f"{args.checkpoint}: model.layers '{layers}': {one_line(e)}")
        except (KeyError, IndexError, ValueError) as e:
            die(f"{args.checkpoint}: model.layers '{layers}' does not fit its /params ({one_line(e)})")
        state = list(torch_layers.state_dict(torch, params, buffers, tied).items())
        image = params.get("layers.0.weight") is not None and params["layers.0.weight"].ndim == 4
        shape = "float32 (N, C, H, W): the features reshaped to model.input_shape" if image else "float32 (N, features)"
        if data_context(config, args.checkpoint) > 0:
            shape = "int64 (N, T): token ids (logits: (N, T, vocabulary))"
        return export(torch, args, code, state, shape)
    if buffers:
        die(f"{args.checkpoint}: /buffers in an MLP checkpoint (not written by mpiddp?)")
    first = params.get("layers.0.weight")
    linear = sorted((int(m.group(1)), n) for n in params for m in [re.fullmatch(r"layers\.(\d+)\.weight", n)] if m)
    if first is None or first.ndim != 2 or not linear:
        die(f"{args.checkpoint}: no 2-D /params/layers.0.weight")
    if params[linear[-1][1]].ndim != 2:
        die(f"{args.checkpoint}: /params/{linear[-1][1]} is not 2-D")
    last = params[linear[-1][1]]
    widths, activation, dropout = model_settings(model_config, args.checkpoint)
    code, linear_at = sequential_code(widths, activation, dropout, first.shape[1], last.shape[0])
    sizes = [first.shape[1], *widths, last.shape[0]]
    state = [(name, torch.from_numpy(value)) for name, value in torch_state(params, linear_at, sizes, args.checkpoint)]
    export(torch, args, code, state, f"float32 (N, {first.shape[1]})")


def export(torch, args, code, state, input_text):
    """Loads the arrays into the model (strict: names and shapes both ways), saves it, prints how to load it.

    CODE is built by this script from fixed module names, ints and finite floats (repr); every other text that
    goes into generated Python (paths, the checkpoint's name) is written as a repr() literal."""
    try:
        model = eval(code, torch_layers.namespace(torch))  # our own generated text: checks shapes against the arrays
        model.load_state_dict(dict(state), strict=True)
    except (RuntimeError, ValueError, TypeError) as e:
        die(f"{args.checkpoint}: the arrays do not fit the model in its stored input file ({one_line(e)})")

    out = os.path.abspath(args.out)
    files = [(args.out, lambda temp: torch.save(model.state_dict(), temp))]
    if args.module:
        docstring = f"The model of {os.path.basename(args.checkpoint)} (written by mpiddp scripts/to-torch)."
        text = (f"{docstring!r}\n"
                f"import torch\n{torch_layers.MODULES_SOURCE if torch_layers.needs_modules(code) else ''}\n\ndef build():\n    return {code.replace(chr(10), chr(10) + '    ')}\n\n\n"
                f"def load(path={out!r}):\n    model = build()\n"
                f"    model.load_state_dict(torch.load(path, weights_only=True))\n    return model.eval()\n")

        def write_module(temp):
            with open(temp, "w", encoding="utf-8") as f:
                f.write(text)
        files.append((args.module, write_module))
    write_atomically(files)

    flat = code.replace("(\n    ", "(").replace(",\n    ", ", ")
    lines = ["import torch", f"model = {flat}",
             f"model.load_state_dict(torch.load({out!r}, weights_only=True))",
             "model.eval()  # dropout off, as in mpiddp's evaluation",
             f"# logits = model(x): x {input_text}"]
    print("\n".join(lines))
    print(f"wrote {args.out} ({len(state)} arrays)" + (f" and {args.module}" if args.module else ""), file=sys.stderr)

