#!/usr/bin/env python3
"""PyTorch side of the training-throughput benchmark (bench/training-throughput runs it next to
build/meridian_bench_train_throughput). Trains the same MLP (784-256-128-10), LeNet-style CNN or resnet8 as
Meridian with batch B and SGD with heavy-ball momentum 0.9 on the same kind of synthetic
Fashion-MNIST-shaped data (60000 random 28x28 images, random labels), one step being: gather a
shuffled batch, forward, backward, optimizer step. Prints one JSON line per repeat:
{"side": "pytorch", "model": ..., "threads": ..., "samples_per_second": ..., "blas": ...}.

The BLAS torch uses is whatever libblas.so.3 the dynamic loader finds; run-all points
LD_LIBRARY_PATH at OpenBLAS's OpenMP build and this script reports the library actually mapped
(read from /proc/self/maps), so the table states what ran rather than what was asked for.
"""
import argparse
import json
import sys
import time

import torch
from torch import nn


class BasicBlock(nn.Module):
    """He et al.'s basic block as Meridian's make_basic_block builds it: conv3x3-BN-ReLU-conv3x3-BN plus the
    identity or a 1x1 convolution with stride and BN, then ReLU (Meridian's convolutions have biases, so
    these do too)."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1), nn.BatchNorm2d(cout), nn.ReLU(),
                                  nn.Conv2d(cout, cout, 3, 1, 1), nn.BatchNorm2d(cout))
        self.shortcut = None
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride), nn.BatchNorm2d(cout))

    def forward(self, x):
        return torch.relu(self.body(x) + (x if self.shortcut is None else self.shortcut(x)))


def resnet(blocks_per_stage, channels=1, classes=10):
    layers = [nn.Conv2d(channels, 16, 3, 1, 1), nn.BatchNorm2d(16), nn.ReLU()]
    cin = 16
    for cout in (16, 32, 64):
        for block in range(blocks_per_stage):
            layers.append(BasicBlock(cin, cout, 2 if cout != 16 and block == 0 else 1))
            cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, classes)]
    return nn.Sequential(*layers)


def make_model(name):
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                             nn.Linear(128, 10))
    if name == "cnn":
        return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                             nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))
    if name == "resnet8":
        return resnet(1)
    sys.exit(f"unknown model {name}")


def blas_libraries():
    libs = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if "blas" in path or "libgomp" in path or "mkl" in path:
                libs.add(path)
    return sorted(libs)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", choices=["mlp", "cnn", "resnet8"], required=True)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    x_all = torch.rand(60000, 1, 28, 28)
    y_all = torch.randint(0, 10, (60000,))
    model = make_model(args.model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    generator = torch.Generator().manual_seed(2)
    perm = torch.randperm(x_all.shape[0], generator=generator)
    cursor = 0

    def step():
        nonlocal cursor, perm
        if cursor + args.batch > perm.numel():
            perm = torch.randperm(x_all.shape[0], generator=generator)
            cursor = 0
        idx = perm[cursor:cursor + args.batch]
        cursor += args.batch
        x, y = x_all[idx], y_all[idx]
        opt.zero_grad(set_to_none=False)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(args.warmup):
        step()
    blas = blas_libraries()
    for _ in range(args.repeats):
        start = time.perf_counter()
        for _ in range(args.steps):
            step()
        elapsed = time.perf_counter() - start
        print(json.dumps({"side": "pytorch", "model": args.model, "threads": args.threads,
                          "batch": args.batch, "steps": args.steps,
                          "samples_per_second": args.steps * args.batch / elapsed,
                          "torch": torch.__version__, "threads_used": torch.get_num_threads(),
                          "mkldnn": torch.backends.mkldnn.is_available(), "blas": blas}), flush=True)


if __name__ == "__main__":
    main()
