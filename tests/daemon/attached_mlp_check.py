"""The PyTorch twin of Meridian's built-in MLP 784-256-128-10 on Fashion-MNIST, attached to a site, for
tests/daemon/attached_native_match_test.cc: it starts from the parameters and visits the rows that the
test took from the native model (Meridian's own initializer, partition and batch order), and trains
them as the built-in trainer does (heavy-ball SGD, cross-entropy, pixels scaled by 1/255).

    attached_mlp_check.py RUN_DIR --init FILE --order FILE --steps N [--lr 0.05] [--momentum 0.9]
                          [--batch 64] [--data-dir DIR]

--init holds the native model's parameters, float32 in its order (each layer's weight (out, in), then
its bias: PyTorch's order and layout); --order the rows of the steps, int32, `batch` per step. Prints
one JSON line: the steps run and the accuracy on the whole test set.
"""

import argparse
import gzip
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import torch  # noqa: E402
from torch import nn  # noqa: E402

import meridian  # noqa: E402


def read_idx(path: str) -> np.ndarray:
    with gzip.open(path + ".gz") if os.path.exists(path + ".gz") else open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(dims))
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def pixels(images: np.ndarray) -> torch.Tensor:
    """(n, 784) float32, each byte times 1/255 in float32 as the IDX reader scales it."""
    return torch.from_numpy(images.reshape(len(images), -1).astype(np.float32) * np.float32(1.0 / 255.0))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("run_dir")
    parser.add_argument("--init", required=True)
    parser.add_argument("--order", required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    args = parser.parse_args()
    torch.set_num_threads(1)

    model = nn.Sequential(
        nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10)
    )
    flat = torch.from_numpy(np.fromfile(args.init, dtype=np.float32))
    total = sum(p.numel() for p in model.parameters())
    if flat.numel() != total:
        raise SystemExit(f"{args.init}: {flat.numel()} values, the MLP has {total} parameters")
    with torch.no_grad():
        offset = 0
        for p in model.parameters():
            p.copy_(flat[offset : offset + p.numel()].view(p.shape))
            offset += p.numel()
    order = np.fromfile(args.order, dtype=np.int32).reshape(-1, args.batch)
    images = read_idx(os.path.join(args.data_dir, "train-images-idx3-ubyte"))
    labels = read_idx(os.path.join(args.data_dir, "train-labels-idx1-ubyte")).astype(np.int64)
    # Only the rows the steps visit, renumbered in ascending order.
    rows, visits = np.unique(order, return_inverse=True)
    order = visits.reshape(order.shape)
    x, y = pixels(images[rows]), torch.from_numpy(labels[rows])

    site = meridian.attach(args.run_dir)
    opt = site.optimizer(model, torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum),
                         steps=args.steps)
    loss_fn = nn.CrossEntropyLoss()
    done = 0
    while not site.finished:
        batch = torch.from_numpy(order[done].astype(np.int64))
        opt.zero_grad()
        loss = loss_fn(model(x[batch]), y[batch])
        loss.backward()
        opt.step(loss=loss.item())
        done += 1
    site.close()

    tx = pixels(read_idx(os.path.join(args.data_dir, "t10k-images-idx3-ubyte")))
    ty = torch.from_numpy(read_idx(os.path.join(args.data_dir, "t10k-labels-idx1-ubyte")).astype(np.int64))
    with torch.no_grad():
        accuracy = (model(tx).argmax(1) == ty).double().mean().item()
    print(json.dumps({"steps": done, "test_accuracy": accuracy}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
