#!/usr/bin/python3
"""PyTorch DDP (gloo) baseline for scripts/bench.sh: the same MLP, optimizer and
per-rank batch as mpiddp, on the same Fashion-MNIST samples held in memory
(PyTorch gets no I/O cost; mpiddp reads its HDF5 shards while training).

usage: bench_torch_ddp.py --world W --batch B --epochs E --hidden 256,128
prints one line: "torch world W batch B samples/s X"
Needs Debian's python3-torch and python3-h5py (run with /usr/bin/python3).
"""
import argparse
import glob
import os
import time

import h5py
import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def load(directory):
    xs, ys = [], []
    for path in sorted(glob.glob(os.path.join(directory, "*.h5"))):
        with h5py.File(path, "r") as f:
            x = f["features"][...]
            scale = f["features"].attrs.get("scale", 1.0)
            xs.append(x.astype(np.float32) * np.float32(scale))
            ys.append(f["labels"][...].astype(np.int64))
    return torch.from_numpy(np.concatenate(xs)), torch.from_numpy(np.concatenate(ys))


def worker(rank, args, x, y, result):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(args.port)
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", rank=rank, world_size=args.world)
    torch.manual_seed(args.seed)
    widths = [x.shape[1]] + [int(w) for w in args.hidden.split(",")]
    layers = []
    for a, b in zip(widths, widths[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    layers.append(torch.nn.Linear(widths[-1], 10))
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(*layers))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    dataset = torch.utils.data.TensorDataset(x, y)
    sampler = torch.utils.data.distributed.DistributedSampler(dataset, args.world, rank, seed=args.seed)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch, sampler=sampler)
    samples = 0
    dist.barrier()
    start = time.perf_counter()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad(set_to_none=True)
            loss_fn(model(xb), yb).backward()
            opt.step()
            samples += xb.shape[0]
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
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--port", type=int, default=29533)
    args = parser.parse_args()
    x, y = load(args.data)
    result = mp.get_context("spawn").SimpleQueue()
    mp.spawn(worker, args=(args, x, y, result), nprocs=args.world, join=True)
    print(f"torch world {args.world} batch {args.batch} samples/s {result.get():.0f}")


if __name__ == "__main__":
    main()
