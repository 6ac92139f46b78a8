#!/usr/bin/python3
"""PyTorch DDP (gloo) baseline for scripts/bench.sh: the same model, optimizer and
per-rank batch as mpiddp, on the same Fashion-MNIST samples held in memory
(PyTorch gets no I/O cost; mpiddp reads its HDF5 shards while training).

usage: bench_torch_ddp.py --world W --batch B --epochs E [--hidden 256,128 | --layers LIST] [--max-steps N]
                          [--context T --classes V]  (token shards: a sequence model, samples = windows)
  --layers takes mpiddp's model.layers syntax (conv2d(32,3,padding=1) batchnorm2d relu ...) and
  builds the same torch.nn.Sequential, as `mpiddp inspect layers --list` resolves it (python/mpiddp_tools/
  torch_layers.py; the binary is $MPIDDP, else the checkout's build/mpiddp, else mpiddp on PATH); samples are
  then images of 1 x 28 x 28.
prints one line: "torch world W batch B samples/s X"
Needs Debian's python3-torch and python3-h5py (run with /usr/bin/python3).
"""
import argparse
import glob
import os
import sys
import time

import h5py
import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "python"))
from mpiddp_tools import torch_layers as layer_table  # noqa: E402


def load_windows(directory, context):
    """Token shards as mpiddp reads them with data.context: windows of context + 1 tokens of one shard at stride
    context; inputs the first context tokens, targets the last."""
    xs, ys = [], []
    for path in sorted(glob.glob(os.path.join(directory, "*.h5"))):
        with h5py.File(path, "r") as f:
            tokens = f["tokens"][...].astype(np.int64)
        n = (len(tokens) - 1) // context
        windows = np.stack([tokens[i * context:i * context + context + 1] for i in range(n)])
        xs.append(windows[:, :-1])
        ys.append(windows[:, 1:])
    return torch.from_numpy(np.concatenate(xs)), torch.from_numpy(np.concatenate(ys))


def load(directory):
    xs, ys = [], []
    for path in sorted(glob.glob(os.path.join(directory, "*.h5"))):
        with h5py.File(path, "r") as f:
            x = f["features"][...]
            scale = f["features"].attrs.get("scale", 1.0)
            xs.append(x.astype(np.float32) * np.float32(scale))
            ys.append(f["labels"][...].astype(np.int64))
    return torch.from_numpy(np.concatenate(xs)), torch.from_numpy(np.concatenate(ys))


def torch_layers(resolved, sample_shape):
    """torch modules of a layer list as mpiddp resolved it (torch_layers.resolve); each input size from a dry run."""
    return layer_table.probed_modules(torch, resolved, sample_shape)


def worker(rank, args, x, y, result):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(args.port)
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", rank=rank, world_size=args.world)
    torch.manual_seed(args.seed)
    if args.layers:
        x = x if args.context else x.reshape(-1, 1, 28, 28)
        layers = torch_layers(args.resolved, x.shape[1:])
    else:
        widths = [x.shape[1]] + [int(w) for w in args.hidden.split(",")]
        layers = []
        for a, b in zip(widths, widths[1:]):
            layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
        layers.append(torch.nn.Linear(widths[-1], 10))
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(*layers))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4)
    cross_entropy = torch.nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)

    def loss_fn(logits, targets):  # a sequence model: the mean over every target token
        return cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    dataset = torch.utils.data.TensorDataset(x, y)
    sampler = torch.utils.data.distributed.DistributedSampler(dataset, args.world, rank, seed=args.seed)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch, sampler=sampler)
    samples = steps = 0
    dist.barrier()
    start = time.perf_counter()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            if args.max_steps and steps == args.max_steps:
                break
            opt.zero_grad(set_to_none=True)
            loss_fn(model(xb), yb).backward()
            opt.step()
            samples += xb.shape[0]
            steps += 1
    dist.barrier()
    elapsed = time.perf_counter() - start
    if rank == 0:
        result.put(samples * args.world / elapsed)
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default="data/fmnist/train")
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--hidden", default="256,128")
    parser.add_argument("--layers", default="", help="mpiddp model.layers syntax (images 1x28x28)")
    parser.add_argument("--max-steps", type=int, default=0, help="stop after this many steps, 0 = none")
    parser.add_argument("--context", type=int, default=0, help="token shards: windows of this many tokens + 1")
    parser.add_argument("--classes", type=int, default=10, help="what a last linear without a width gets")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--label-smoothing", type=float, default=0.0, help="the loss's, as train.label_smoothing")
    parser.add_argument("--port", type=int, default=29533)
    args = parser.parse_args()
    try:
        args.resolved = layer_table.resolve(args.layers, args.classes) if args.layers else None
    except (layer_table.LayerListError, layer_table.MpiddpError) as e:
        sys.exit(f"bench_torch_ddp.py: error: --layers: {e}")
    x, y = load_windows(args.data, args.context) if args.context else load(args.data)
    result = mp.get_context("spawn").SimpleQueue()
    mp.spawn(worker, args=(args, x, y, result), nprocs=args.world, join=True)
    print(f"torch world {args.world} batch {args.batch} samples/s {result.get():.0f}")


if __name__ == "__main__":
    main()
