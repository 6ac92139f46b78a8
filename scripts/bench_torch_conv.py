#!/usr/bin/python3
"""oneDNN's convolution as PyTorch calls it (CPU, fp32, 1 thread by default), on
one layer's shapes, each product timed alone: the counterpart of `mpiddp bench conv`.

usage: bench_torch_conv.py --batch 64 --channels 32 --size 14 --out 64 --kernel 3 --padding 1 [--stride 1]
prints one line like mpiddp's, naming the library PyTorch used.
"""
import argparse
import time

import torch


def per_call(work, seconds):
    for _ in range(3):
        work()
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        work()
        calls += 1
    return (time.perf_counter() - start) / calls


def main():
    p = argparse.ArgumentParser()
    for name, default in [("batch", 64), ("channels", 32), ("size", 14), ("out", 64), ("kernel", 3), ("stride", 1),
                          ("padding", 1), ("threads", 1)]:
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--seconds", type=float, default=1.0)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    x = torch.randn(a.batch, a.channels, a.size, a.size)
    w = torch.randn(a.out, a.channels, a.kernel, a.kernel)
    b = torch.randn(a.out)
    y = torch.nn.functional.conv2d(x, w, b, a.stride, a.padding)
    dy = torch.randn_like(y)
    stride, padding = [a.stride] * 2, [a.padding] * 2

    def backward(mask):
        return torch.ops.aten.convolution_backward(dy, x, w, [a.out], stride, padding, [1, 1], False, [0, 0], 1, mask)

    with torch.no_grad():
        forward = per_call(lambda: torch.nn.functional.conv2d(x, w, b, a.stride, a.padding), a.seconds)
        weight_grad = per_call(lambda: backward([False, True, True]), a.seconds)
        input_grad = per_call(lambda: backward([True, False, False]), a.seconds)
    flops = 2.0 * y.numel() * a.channels * a.kernel * a.kernel
    library = "onednn" if torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled else "native"
    print(f"conv torch-{torch.__version__}-{library} batch {a.batch} in {a.channels}x{a.size}x{a.size} out {a.out} "
          f"kernel {a.kernel} stride {a.stride} padding {a.padding} threads {a.threads}: "
          f"forward {forward * 1e3:.3f} ms ({flops / forward / 1e9:.1f} GFLOP/s) "
          f"weight-grad {weight_grad * 1e3:.3f} ms ({flops / weight_grad / 1e9:.1f} GFLOP/s) "
          f"input-grad {input_grad * 1e3:.3f} ms ({flops / input_grad / 1e9:.1f} GFLOP/s)")


if __name__ == "__main__":
    main()
