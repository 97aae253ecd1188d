#!/usr/bin/env python3
"""PyTorch CUDA (eager) side of the device kit's throughput bench; the kit's `run` puts it next to
`meridian train --device cuda` on the same networks, batches and data.

One step is what `meridian train` does on a GPU: gather a shuffled batch on the host (pageable memory),
upload it, forward, softmax cross-entropy, backward, Nesterov SGD (momentum 0.9, constant lr 0.05), and
read the loss back (Meridian checks it is finite every step). Networks: the MLP 784-256-128-10 and the
LeNet-style CNN of models/model_factory.h. fp32 throughout: TF32 is off for matmuls and cuDNN, as
Meridian's cuBLAS and cuDNN calls use FMA math only; cudnn.benchmark picks the fastest convolution
algorithm per shape, as Meridian picks cuDNN's fastest deterministic one.

Epoch 1 warms up (allocator, cuDNN algorithm choice) and is not counted; the figure is the median of the
later epochs' samples/s, as the kit reads Meridian's per-epoch lines. Prints one JSON line per network
and batch: {"side": "pytorch", "model", "batch", "epochs", "epoch_samples_per_second": [...],
"samples_per_second", "torch", "cuda", "cudnn", "device"}.

Usage: torch_cuda_throughput.py --data-dir DIR [--models mlp,cnn] [--batches 64,256,1024] [--epochs 6]
       [--device cuda|cpu]   (cpu only to try the script on a machine without a GPU)
"""
import argparse
import gzip
import json
import math
import os
import statistics
import sys
import time

import numpy as np
import torch
from torch import nn


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def find(data_dir, stem):
    for suffix in (".gz", ""):
        path = os.path.join(data_dir, stem + suffix)
        if os.path.exists(path):
            return path
    sys.exit(f"torch_cuda_throughput: no {stem}(.gz) in {data_dir}")


def make_model(name):
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                             nn.Linear(128, 10))
    if name == "cnn":
        return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                             nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))
    sys.exit(f"torch_cuda_throughput: unknown model {name}")


def run(name, batch, epochs, x_all, y_all, device, synchronize):
    torch.manual_seed(1)
    model = make_model(name).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    loss_fn = nn.CrossEntropyLoss()
    generator = torch.Generator().manual_seed(2)
    rows = x_all.shape[0]
    rates = []
    for _ in range(epochs):
        perm = torch.randperm(rows, generator=generator)
        synchronize()
        start = time.perf_counter()
        for first in range(0, rows, batch):
            idx = perm[first:first + batch]
            x = x_all[idx].to(device)
            y = y_all[idx].to(device)
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            value = loss.item()
            if not math.isfinite(value):
                sys.exit(f"torch_cuda_throughput: {name} batch {batch} diverged (loss {value})")
        synchronize()
        rates.append(rows / (time.perf_counter() - start))
    return rates


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--models", default="mlp,cnn")
    parser.add_argument("--batches", default="64,256,1024")
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    args = parser.parse_args()
    if args.epochs < 2:
        sys.exit("torch_cuda_throughput: --epochs must be at least 2 (the first one warms up)")
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("torch_cuda_throughput: torch sees no CUDA device")

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    cuda = args.device == "cuda"
    device = torch.device("cuda:0" if cuda else "cpu")
    synchronize = torch.cuda.synchronize if cuda else (lambda: None)
    images = read_idx(find(args.data_dir, "train-images-idx3-ubyte"))
    labels = read_idx(find(args.data_dir, "train-labels-idx1-ubyte"))
    x_all = torch.from_numpy(images.astype(np.float32) / 255.0).reshape(-1, 1, 28, 28)
    y_all = torch.from_numpy(labels.astype(np.int64))
    for name in args.models.split(","):
        for batch in (int(b) for b in args.batches.split(",")):
            rates = run(name, batch, args.epochs, x_all, y_all, device, synchronize)
            print(json.dumps({
                "side": "pytorch", "model": name, "batch": batch, "epochs": args.epochs, "rows": int(x_all.shape[0]),
                "epoch_samples_per_second": [round(r, 1) for r in rates],
                "samples_per_second": round(statistics.median(rates[1:]), 1),
                "torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
                "device": torch.cuda.get_device_name(0) if cuda else "cpu"}), flush=True)


if __name__ == "__main__":
    main()
