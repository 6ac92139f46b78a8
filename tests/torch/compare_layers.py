"""Recomputes every case that layer_cases wrote with torch.nn and compares.

usage: compare_layers.py CASES.h5 SCRIPTS_DIR

SCRIPTS_DIR is the checkout's scripts/; the tools' package is next to it
(python/mpiddp_tools). For each case: the torch.nn.Sequential of its layer list
(python/mpiddp_tools/torch_layers.py, which asks the mpiddp binary how the list
resolves: $MPIDDP, else the checkout's build/mpiddp) gets mpiddp's parameters, buffers and
num_batches_tracked (load_state_dict, strict), runs forward in the case's mode
and backward with the case's dy; the output, the input gradient, every parameter
gradient and, after the step, the running statistics and num_batches_tracked
must equal mpiddp's to float rounding: max |mpiddp - torch| <= 2e-5 x max
|torch| per array (counters exactly). A bias right before a BatchNorm in
training has a gradient of exactly 0 in theory, and both sides' rounding noise:
parameter gradients are measured against at least a tenth of the case's largest
gradient. Prints one line per case ("ok: ..." or "FAIL: ..."), exit 1 if any
failed.
"""
import os
import sys

import h5py
import numpy as np
import torch

sys.path.insert(0, os.path.join(sys.argv[2], os.pardir, "python"))
from mpiddp_tools import torch_layers  # noqa: E402

TOLERANCE = 2e-5


def text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def arrays(group):
    return {name: group[name][...] for name in group} if group is not None else {}


def relative_error(ours, theirs, floor=1e-30):
    theirs = np.asarray(theirs, dtype=np.float64)
    scale = max(np.abs(theirs).max(initial=0.0), floor)
    return np.abs(np.asarray(ours, dtype=np.float64) - theirs).max(initial=0.0) / scale


def compare(name, case):
    params, grads = arrays(case["params"]), arrays(case["grads"])
    buffers = {**arrays(case.get("buffers_before")), **arrays(case.get("counters_before"))}
    model = torch_layers.build(torch, text(case.attrs["layers"]), params)
    tied = torch_layers.ties(text(case.attrs["layers"]), params)
    model.load_state_dict(torch_layers.state_dict(torch, params, buffers, tied), strict=True)
    model.train(text(case.attrs["mode"]) == "train")
    tokens = "tokens" in case  # a sequence model's token ids: no input gradient
    x = torch.from_numpy(case["tokens"][...]) if tokens else torch.from_numpy(case["x"][...]).requires_grad_()
    y = model(x)
    y.backward(torch.from_numpy(case["dy"][...]))
    errors = {"y": relative_error(case["y"][...], y.detach().numpy())}
    if not tokens:
        errors["dx"] = relative_error(case["dx"][...], x.grad.numpy())
    named = {"layers." + key: value.grad.numpy() for key, value in model.named_parameters()}
    largest = max((np.abs(value).max(initial=0.0) for value in named.values()), default=0.0)
    for key, value in grads.items():
        errors["grad " + key] = relative_error(value, named[key], 0.1 * largest)
    state = model.state_dict()
    for key, value in arrays(case.get("buffers_after")).items():
        errors[key] = relative_error(value, state[key[len("layers."):]].numpy())
    problems = [f"{what} differs by {error:.2e} (relative)" for what, error in errors.items() if not error <= TOLERANCE]
    for key, value in arrays(case.get("counters_after")).items():
        if int(value) != int(state[key[len("layers."):]]):
            problems.append(f"{key} is {int(value)}, torch's {int(state[key[len('layers.'):]])}")
    worst = max(errors.values())
    if problems:
        print(f"FAIL: {name} ({text(case.attrs['layers'])}): " + "; ".join(problems))
        return False
    print(f"ok: {name}: {len(errors)} arrays, worst relative difference {worst:.1e}")
    return True


def main():
    torch.set_num_threads(1)
    failed = 0
    with h5py.File(sys.argv[1], "r") as f:
        if not len(f):
            print("FAIL: no cases in " + sys.argv[1])
            return 1
        for name in f:
            try:
                failed += not compare(name, f[name])
            except Exception as e:  # one case's surprise must not hide the others
                print(f"FAIL: {name}: {type(e).__name__}: {e}")
                failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
