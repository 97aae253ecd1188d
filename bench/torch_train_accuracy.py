#!/usr/bin/env python3
"""PyTorch's figure for docs/models.md's accuracy table: trains the same network as
`meridian train --model NAME` on Fashion-MNIST with the same recipe and prints its test accuracy.

The recipe follows `meridian train`: pixels scaled to [0, 1] (no other normalization), a new seeded
shuffle every epoch with a smaller last batch, cross-entropy, SGD with (Nesterov) momentum and coupled
L2 weight decay (torch.optim.SGD's rule, which is Meridian's), and a cosine rate from the base rate
to 0 over every step of the run, set per step. The networks come from bench/torch_train_throughput.py,
so they are the ones the throughput benchmark times. Initialization is PyTorch's own, so the two
figures compare recipes, not bit-identical runs.

Usage: bench/torch_train_accuracy.py --model resnet8 --epochs 5 [--lr 0.05] [--weight-decay 0]
       [--optimizer nesterov|momentum] [--threads 1] [--seed 1] [--data-dir DIR]
Progress goes to stderr (one line per epoch), one JSON object with the result to stdout.
"""
import argparse
import gzip
import json
import math
import os
import sys
import time

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_train_throughput import make_model  # noqa: E402  (the benchmark's networks)


def read_idx(path):
    """An IDX file (gzip or raw) as a numpy array, shaped by its header."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims))
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(data_dir, prefix):
    def find(name):
        for candidate in (os.path.join(data_dir, name + ".gz"), os.path.join(data_dir, name)):
            if os.path.exists(candidate):
                return candidate
        sys.exit(f"torch_train_accuracy: {name} not found in {data_dir}")

    images = read_idx(find(f"{prefix}-images-idx3-ubyte"))
    labels = read_idx(find(f"{prefix}-labels-idx1-ubyte"))
    x = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)
    return x, torch.from_numpy(labels.astype(np.int64))


def accuracy(model, x, y, batch=1000):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, x.shape[0], batch):
            correct += (model(x[i:i + batch]).argmax(1) == y[i:i + batch]).sum().item()
    model.train()
    return correct / x.shape[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=["mlp", "cnn", "resnet8"], required=True)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--weight-decay", type=float, default=0.0)
    parser.add_argument("--optimizer", choices=["nesterov", "momentum"], default="nesterov")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    x_train, y_train = load(args.data_dir, "train")
    x_test, y_test = load(args.data_dir, "t10k")
    model = make_model(args.model)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                          weight_decay=args.weight_decay, nesterov=args.optimizer == "nesterov")
    loss_fn = nn.CrossEntropyLoss()
    generator = torch.Generator().manual_seed(args.seed)
    steps_per_epoch = math.ceil(x_train.shape[0] / args.batch)
    total_steps = steps_per_epoch * args.epochs
    step = 0
    per_epoch = []
    start = time.perf_counter()
    for epoch in range(args.epochs):
        order = torch.randperm(x_train.shape[0], generator=generator)
        loss_sum = 0.0
        for begin in range(0, order.numel(), args.batch):
            for group in opt.param_groups:
                group["lr"] = 0.5 * args.lr * (1.0 + math.cos(math.pi * step / total_steps))
            idx = order[begin:begin + args.batch]
            opt.zero_grad(set_to_none=False)
            loss = loss_fn(model(x_train[idx]), y_train[idx])
            loss.backward()
            opt.step()
            loss_sum += loss.item() * idx.numel()
            step += 1
        per_epoch.append(accuracy(model, x_test, y_test))
        print(f"epoch {epoch + 1}/{args.epochs}: loss {loss_sum / x_train.shape[0]:.4f}, "
              f"test accuracy {100 * per_epoch[-1]:.2f}%, {time.perf_counter() - start:.0f} s", file=sys.stderr,
              flush=True)
    print(json.dumps({"side": "pytorch", "model": args.model, "epochs": args.epochs, "batch": args.batch,
                      "lr": args.lr, "optimizer": args.optimizer, "momentum": args.momentum,
                      "weight_decay": args.weight_decay, "schedule": "cosine", "seed": args.seed,
                      "threads": args.threads, "test_accuracy": per_epoch[-1],
                      "test_accuracy_per_epoch": per_epoch, "seconds": time.perf_counter() - start,
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main()
