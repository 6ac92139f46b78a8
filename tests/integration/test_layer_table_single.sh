#!/usr/bin/env bash
# One layer table (issue 21): mpiddp's layer registry is the only definition of the
# model.layers grammar. The Python tools take every layer list resolved from the
# binary (`mpiddp inspect layers --list L --json`), and this test fails if they do
# not.
#
# (a) No Python file under python/ or scripts/ (*.py, and extension-less scripts with
#     a python shebang) parses the grammar on its own. A file fails when it has any of:
#     1. the names of the old private parser's functions, split_calls or parse_call;
#     2. two or more distinct "grammar words" as string literals of their own (the
#        whole literal, not part of a longer string or an f-string): the names of the
#        layers in `inspect layers --json` that take arguments or an input size, and
#        their argument names that contain an underscore (kernel_size, out_features,
#        in_channels, ...). Mapping layers to argument lists or to torch modules needs
#        at least two of them; one alone may be a setting's key (to_torch reads
#        model.dropout), and a layer list written as a setting's value
#        ("conv2d(16,3) relu ...", gpu_check.py) is one longer literal, so data, not
#        a parser. Argument-less layers (relu, ...) and the layers whose names are
#        model.activation's values (relu, gelu, tanh) do not count: model.activation
#        names them for the MLP;
#     3. a string literal that, as a regular expression, matches a layer call
#        (NAME(1,2,x=3) or NAME(1) for any NAME of the table) but neither of two
#        strings that are no call ("not a layer call!", "a-b.c/d").
#     The words come from the binary's table, so a new layer is covered at once.
# (b) For every layer of the table (iterated, so a new layer is covered at once):
#     python/mpiddp_tools/torch_layers.build() makes the torch module the JSON names,
#     with the JSON's arguments as its attributes and the input size at its
#     input_argument, repr() equal to the module built here from the JSON, and the
#     parameters of that module load into it (strict). Lists: each layer with its
#     required arguments only (mpiddp fills the defaults; a bare final linear gets
#     --classes), each with all its arguments positional (distinct values, which must
#     come back under the table's names in order), and all layers in one list by
#     keyword (indices > 0). A layer whose argument type has no test value, or whose
#     list mpiddp refuses, fails by name ("cannot cover"), never a silent skip.
source "$(dirname "$0")/lib.sh"

"$MPIDDP" inspect layers --json > "$WORK/table.json" 2> "$WORK/table.err" \
  || { fail "mpiddp inspect layers --json exited non-zero: $(cat "$WORK/table.err")"; finish; }

# ---- (a) no private parser ----
"$PYTHON" - "$WORK/table.json" "$MPIDDP_SOURCE_DIR" > "$WORK/grep.log" 2>&1 <<'PY' || true
import ast, json, os, re, sys, warnings
table, root = json.load(open(sys.argv[1])), sys.argv[2]
if not table:
    print("FAIL: the layer table is empty")
    sys.exit(1)
# Layer names that are also model.activation's values (relu, gelu, tanh) name the MLP's activation there.
activations = {"relu", "gelu", "tanh"}
words = {l["name"] for l in table if (l["arguments"] or l["input_argument"]) and l["name"] not in activations}
words |= {a["name"] for l in table for a in l["arguments"] if "_" in a["name"]}
words |= {l["input_argument"] for l in table if l["input_argument"] and "_" in l["input_argument"]}
calls = [f"{l['name']}(1,2,x=3)" for l in table] + [f"{l['name']}(1)" for l in table]
not_calls = ["not a layer call!", "a-b.c/d"]

def python_files():
    for top in ("python", "scripts"):
        for directory, dirs, names in os.walk(os.path.join(root, top)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(names):
                path = os.path.join(directory, name)
                if name.endswith(".py"):
                    yield path
                elif "." not in name and os.path.isfile(path):
                    with open(path, "rb") as f:
                        first = f.readline()
                    if first.startswith(b"#!") and b"python" in first:
                        yield path

def call_pattern(text):
    if len(text) > 500:
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            pattern = re.compile(text)
        except (re.error, ValueError, OverflowError, RecursionError):
            return False
    return any(pattern.fullmatch(c) for c in calls) and not any(pattern.fullmatch(c) for c in not_calls)

problems, count = [], 0
for path in python_files():
    count += 1
    rel = os.path.relpath(path, root)
    text = open(path, encoding="utf-8", errors="replace").read()
    try:
        tree = ast.parse(text, rel)
    except SyntaxError as e:
        problems.append(f"{rel}: does not parse: {e}")
        continue
    for m in re.finditer(r"\b(split_calls|parse_call)\b", text):
        problems.append(f"{rel}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(1)} (a private layer-list parser)")
    parts = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    literals = [n for n in ast.walk(tree)
                if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in parts]
    named = sorted({n.value for n in literals if n.value in words})
    if len(named) >= 2:
        problems.append(f"{rel}: names {len(named)} layers or layer arguments as literals of their own "
                        f"({', '.join(named)}): a private copy of the layer table")
    for n in literals:
        if call_pattern(n.value):
            problems.append(f"{rel}:{n.lineno}: the regular expression {n.value!r} matches layer calls")
for p in problems:
    print("FAIL: " + p)
if count < 5:
    print(f"FAIL: only {count} Python files found under {root}/python and {root}/scripts")
print(f"{count} Python files checked against {len(words)} grammar words of the layer table")
PY
cat "$WORK/grep.log"
if grep -q "^FAIL:" "$WORK/grep.log"; then
  fail "a Python file parses model.layers on its own (see above): take the resolved list from mpiddp_tools.torch_layers"
elif grep -q "Python files checked" "$WORK/grep.log"; then
  pass "no Python file under python/ or scripts/ parses the layer grammar itself"
else fail "the grep check did not run to its end"; fi

# ---- (b) torch_layers builds what the table says ----
if ! "$PYTHON" -c "import numpy, torch" 2>/dev/null; then
  [ "$FAILURES" = 0 ] || finish
  skip "the agreement check needs numpy and torch in $PYTHON (the grep check passed)"
fi
"$PYTHON" - "$WORK/table.json" "$MPIDDP_SOURCE_DIR" > "$WORK/agree.log" 2>&1 <<'PY' || true
import json, math, os, subprocess, sys
import numpy as np
import torch
table, root = json.load(open(sys.argv[1])), sys.argv[2]
sys.path.insert(0, os.path.join(root, "python"))
from mpiddp_tools import torch_layers  # noqa: E402
IN, CLASSES = 5, 6  # every layer's input size here; what a bare final linear gets

def value(argument, position):
    """Distinct, valid for every layer today: ints 4, 3, 2, 1; floats 0.25, 0.125, ...; bools False (the
    non-default); a word its last choice. Two arguments have one valid test value: linear's tie (-1: none; an
    embedding to tie to is test_sequence_layers' business) and attention's dropout (only 0 is implemented)."""
    if argument["name"] == "tie":
        return -1
    if argument["name"] == "dropout" and argument["type"] == "float" and argument.get("default") == "0":
        return 0.0
    if argument["type"] == "word":
        return (argument.get("choices") or [None])[-1]
    return {"int": max(4 - position, 1), "float": 0.25 / 2 ** position, "bool": False}.get(argument["type"])

# The modules mpiddp_tools defines (no torch.nn counterpart), built here from their own constructors.
OWN = "mpiddp_tools."
HEADS_WIDTH = 8  # causal_self_attention's width here: its heads (4, the first int) divide it

def resolve(text):
    done = subprocess.run([os.environ["MPIDDP"], "inspect", "layers", "--list=" + text, "--classes", str(CLASSES),
                           "--json"], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise ValueError(" ".join(done.stderr.split()))
    return json.loads(done.stdout)

def reference(entry):
    """The module the JSON describes, built here by keyword."""
    prefix = "torch.nn."
    if entry["torch_module"].startswith(OWN):
        own = torch_layers.namespace(torch)[entry["torch_module"][len(OWN):]]
        if entry["name"] == "residual":
            return own(torch.nn.Sequential(*[reference(e) for e in entry["body"]]),
                       torch.nn.Sequential(*[reference(e) for e in entry["shortcut"]]) if entry["shortcut"] else None)
        if entry["name"] == "causal_self_attention":
            return own(HEADS_WIDTH, **entry["arguments"])
        return own(IN, IN)  # position_embedding: a [T, D] table
    assert entry["torch_module"].startswith(prefix), entry["torch_module"]
    kwargs = {k: v for k, v in entry["arguments"].items() if k != "tie"}  # tie: mpiddp's wiring, not torch's
    if entry["input_argument"]:
        kwargs[entry["input_argument"]] = IN
    return getattr(torch.nn, entry["torch_module"][len(prefix):])(**kwargs)

def same(attribute, expected):
    values = attribute if isinstance(attribute, tuple) else (attribute,)  # Conv2d stores 3 as (3, 3)
    return len(values) > 0 and all(v == expected for v in values)

def check(label, text, written=None):
    """Problems of torch_layers.build(TEXT) against mpiddp's resolution; WRITTEN: the values written
    positionally, per layer index."""
    try:
        resolved = resolve(text)
    except ValueError as e:
        return [f"cannot cover: mpiddp refuses {text!r}: {e}"]
    problems, params = [], {}
    try:
        refs = [reference(entry) for entry in resolved]
    except Exception as e:
        return [f"{text!r}: the JSON's module and arguments do not build in torch: {type(e).__name__}: {e}"]
    for entry, ref in zip(resolved, refs):
        i, name = entry["index"], entry["name"]
        if written and i in written and list(entry["arguments"].values()) != written[i]:
            problems.append(f"{name}: written positionally as {written[i]}, resolved as {entry['arguments']}")
        for key, tensor in ref.named_parameters():
            params[f"layers.{i}.{key}"] = tensor.detach().numpy()
        if entry["input_argument"]:
            weight = params.get(f"layers.{i}.weight")
            dim = entry["input_weight_dim"]
            if weight is None or not 0 <= dim < weight.ndim or weight.shape[dim] != IN:
                problems.append(f"{name}: {entry['torch_module']}'s weight has no {entry['input_argument']} "
                                f"at input_weight_dim {dim}")
    if problems:
        return problems
    try:
        model = torch_layers.build(torch, text, params)
        model.load_state_dict(torch.nn.Sequential(*refs).state_dict(), strict=True)
    except Exception as e:
        return [f"torch_layers.build({text!r}): {type(e).__name__}: {' '.join(str(e).split())}"]
    if len(model) != len(resolved):
        return [f"{text!r}: {len(model)} modules for {len(resolved)} layers"]
    for entry, ref, built in zip(resolved, refs, model):
        name = entry["name"]
        if type(built) is not type(ref):
            problems.append(f"{name}: {type(built).__name__}, not {entry['torch_module']}")
            continue
        for key, expected in entry["arguments"].items():
            if key == "tie" or entry["torch_module"].startswith(OWN):
                continue  # their sizes and repr are compared below
            if key == "bias" and isinstance(expected, bool):
                if (built.bias is not None) != expected:
                    problems.append(f"{name}: bias is {built.bias is not None}, the JSON says {expected}")
                continue
            if not hasattr(built, key) or not same(getattr(built, key), expected):
                problems.append(f"{name}: {key} is {getattr(built, key, 'missing')}, the JSON says {expected}")
        if name == "causal_self_attention" and built.n_head != entry["arguments"]["num_heads"]:
            problems.append(f"{name}: n_head {built.n_head}, the JSON says {entry['arguments']['num_heads']}")
        size = getattr(built, entry["input_argument"], None) if entry["input_argument"] else None
        if isinstance(size, tuple) and len(size) == 1:
            size = size[0]  # LayerNorm keeps normalized_shape as a tuple
        if entry["input_argument"] and size != IN:
            problems.append(f"{name}: {entry['input_argument']} is {getattr(built, entry['input_argument'], None)}, "
                            f"its weight says {IN}")
        if repr(built) != repr(ref):
            problems.append(f"{name}: {built!r}, the JSON's is {ref!r}")
    return problems

failed = 0
def report(label, problems):
    global failed
    if problems:
        failed += 1
        print(f"FAIL: {label}: " + "; ".join(problems))
    else:
        print(f"ok: {label}")

everything = []
for layer in table:
    name, arguments = layer["name"], layer["arguments"]
    values = [value(a, position) for position, a in enumerate(arguments)]
    untyped = [f"{a['name']} ({a['type']})" for a, v in zip(arguments, values) if v is None]
    if untyped:
        report(name, [f"cannot cover: no test value for argument {', '.join(untyped)}; extend value() in this test"])
        continue
    required = ",".join(f"{a['name']}={v}" for a, v in zip(arguments, values) if a["required"])
    text = f"{name}({required})" if required else name
    if name == "residual":  # a container: its inside is a layer list (one with an argument, one without)
        text = "residual(linear(4) ; relu)"
    report(f"{name}: {text} (defaults filled by mpiddp)", check(name, text))
    if arguments:
        text = f"{name}({','.join(str(v).lower() if isinstance(v, bool) else str(v) if isinstance(v, str) else repr(v) for v in values)})"
        report(f"{name}: {text} (every argument positional)", check(name, text, {0: values}))
    written = lambda v: str(v).lower() if isinstance(v, bool) else str(v) if isinstance(v, str) else repr(v)
    everything.append(f"{name}(" + ",".join(f"{a['name']}={written(v)}" for a, v in zip(arguments, values)) + ")"
                      if arguments else text)
text = " ".join(everything)
report(f"all {len(table)} layers in one list: {text}", check("all", text))

# A list mpiddp refuses: torch_layers says mpiddp's one line, naming the layer.
first = table[0]["name"]
try:
    torch_layers.module_code(f"{first}(", {})
    report("a refused list", ["torch_layers took an unclosed '('"])
except torch_layers.LayerListError as e:
    message = str(e)
    report(f"a refused list: {message}", [] if "layers.0" in message and "\n" not in message
           else [f"the message does not name layers.0 on one line: {message!r}"])

# What the JSON must never smuggle into the eval'd text (module names, keywords, values).
entry = {"index": 0, "name": first, "input_argument": None, "input_weight_dim": -1}
crafted = [("a module outside torch.nn", {"torch_module": "os.system", "arguments": {}}),
           ("a module name with code", {"torch_module": "torch.nn.ReLU();import os;os", "arguments": {}}),
           ("a keyword with code", {"torch_module": "torch.nn.Dropout", "arguments": {"p=0,x=__import__('os')": 1}}),
           ("a text value", {"torch_module": "torch.nn.Dropout", "arguments": {"p": "__import__('os')"}}),
           ("a nan value", {"torch_module": "torch.nn.Dropout", "arguments": {"p": math.nan}}),
           ("a word with code", {"torch_module": "torch.nn.GELU", "arguments": {"approximate": "tanh')+__import__('os"}}),
           ("a list value", {"torch_module": "torch.nn.Dropout", "arguments": {"inplace": [True]}})]
for what, fields in crafted:
    try:
        code = torch_layers.constructor({**entry, **fields})
        report(f"torch_layers refuses {what}", [f"it wrote {code!r}"])
    except torch_layers.LayerListError as e:
        report(f"torch_layers refuses {what}: {e}", [])
    except Exception as e:
        report(f"torch_layers refuses {what}", [f"{type(e).__name__}: {e}"])
print(f"{len(table)} layers of the table compared")
sys.exit(1 if failed else 0)
PY
cat "$WORK/agree.log"
FAILURES=$((FAILURES + $(grep -c "^FAIL:" "$WORK/agree.log" || true)))
grep -q "layers of the table compared" "$WORK/agree.log" || fail "the agreement check did not run to its end"
finish
