"""A plain PyTorch loop on Fashion-MNIST (an MLP 784-256-128-10, or a small CNN) that runs on its own
or attached to a Meridian site. Reads the IDX files Debian's dataset-fashion-mnist installs; nothing is
downloaded.

    python3 examples/pytorch/fashion_mnist.py --native                  # plain PyTorch
    MERIDIAN_RUN_DIR=site-a python3 examples/pytorch/fashion_mnist.py   # attached to `meridian start
                                                                        #   --trainer attached --run-dir site-a`
    MERIDIAN_RUN_DIR=site-a torchrun --nproc_per_node 2 examples/pytorch/fashion_mnist.py
                                                  # the site's part split over two DDP ranks (gloo)
    meridian simulate --sites 4 --algo allreduce,diloco \
        --trainer-command 'python3 examples/pytorch/fashion_mnist.py --eval-every 100'
                                                  # the algorithms compared on this script, emulated WAN

Attached, it reports its test accuracy to the site's run directory (Site.report), which `meridian
simulate` reads; under simulate it trains on its site's part (MERIDIAN_SITE_INDEX of MERIDIAN_SITE_COUNT).

It prints one JSON line at the end: steps run, test accuracy, the loop's wall time, and (with --save)
where the parameters went. docs/pytorch.md walks through it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

DATA_DIR = "/usr/share/datasets/fashion-mnist"


def read_idx(path: str) -> np.ndarray:
    """An IDX file (gzipped or not) as a numpy array."""
    opener = gzip.open if os.path.exists(path + ".gz") else open
    with opener(path + ".gz" if opener is gzip.open else path, "rb") as f:
        data = f.read()
    _, kind, dims = struct.unpack(">HBB", data[:4])
    shape = struct.unpack(">" + "I" * dims, data[4 : 4 + 4 * dims])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(data_dir: str, train: bool, rows: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    stem = "train" if train else "t10k"
    x = read_idx(os.path.join(data_dir, f"{stem}-images-idx3-ubyte")).astype(np.float32) / 255.0
    y = read_idx(os.path.join(data_dir, f"{stem}-labels-idx1-ubyte")).astype(np.int64)
    if rows:
        x, y = x[:rows], y[:rows]
    return torch.from_numpy(x).reshape(-1, 1, 28, 28), torch.from_numpy(y)


def make_model(kind: str) -> nn.Module:
    if kind == "cnn":
        return nn.Sequential(
            nn.Conv2d(1, 8, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(16 * 5 * 5, 64), nn.ReLU(), nn.Linear(64, 10),
        )
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))


def default_part() -> str:
    """The site's part under `meridian simulate`, which names it in the trainer's environment."""
    index, count = os.environ.get("MERIDIAN_SITE_INDEX"), os.environ.get("MERIDIAN_SITE_COUNT")
    return f"{index}/{count}" if index is not None and count is not None else "0/1"


def test_accuracy(model: nn.Module, tx: torch.Tensor, ty: torch.Tensor) -> float:
    with torch.no_grad():
        return (model(tx).argmax(1) == ty).float().mean().item()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--native", action="store_true", help="train without a site")
    parser.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    parser.add_argument("--data-dir", default=DATA_DIR)
    parser.add_argument("--rows", type=int, default=0, help="use the first ROWS training rows (0 = all)")
    parser.add_argument("--part", default=default_part(),
                        help="I/N: train on the I-th of N interleaved parts (default: the site's part under "
                        "meridian simulate, else 0/1)")
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=1, help="initial parameters (the same on every site)")
    parser.add_argument("--test-rows", type=int, default=0, help="evaluate on the first ROWS test rows (0 = all)")
    parser.add_argument("--eval-every", type=int, default=0,
                        help="attached: also evaluate and report the test accuracy every N steps (0 = at the end)")
    parser.add_argument("--save", help="write the final parameters here (torch.save of the state_dict); "
                        "with several ranks, rank R writes FILE.rankR")
    parser.add_argument("--dist-init", default="env://",
                        help="torch.distributed's init_method when WORLD_SIZE > 1 (torchrun sets RANK and WORLD_SIZE)")
    args = parser.parse_args()

    # Several ranks (torchrun, or RANK and WORLD_SIZE set by hand): DDP over gloo, each rank on its
    # share of the site's part.
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        dist.init_process_group("gloo", init_method=args.dist_init, rank=rank, world_size=world)

    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    model = make_model(args.model)
    net = nn.parallel.DistributedDataParallel(model) if world > 1 else model
    x, y = load(args.data_dir, True, args.rows)
    index, parts = (int(v) for v in args.part.split("/"))
    x, y = x[index::parts][rank::world], y[index::parts][rank::world]
    steps = max(1, int(args.epochs * len(x) // args.batch))
    loss_fn = nn.CrossEntropyLoss()
    inner = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    site = None
    if args.native:
        opt = inner
    else:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
        import meridian

        site = meridian.attach()  # with several ranks, rank 0 attaches and the others follow it
        opt = site.optimizer(net, inner, steps=steps)
        steps = opt.steps

    tx, ty = load(args.data_dir, False, args.test_rows)
    order = torch.Generator().manual_seed(args.seed + index + 7919 * rank)
    done = 0
    started = time.perf_counter()
    while done < steps:
        for batch in torch.randperm(len(x), generator=order).split(args.batch):
            if len(batch) < args.batch or done >= steps:
                continue
            opt.zero_grad()
            loss = loss_fn(net(x[batch]), y[batch])
            loss.backward()
            opt.step(loss=loss.item()) if site else opt.step()
            done += 1
            if site and args.eval_every and done % args.eval_every == 0 and done < steps:
                site.report(test_accuracy(model, tx, ty))
            if site and site.finished:
                break
        if site and site.finished:
            break
    loop_seconds = time.perf_counter() - started
    if site:
        site.close()

    accuracy = test_accuracy(model, tx, ty)
    if site:
        site.report(accuracy)
    save = f"{args.save}.rank{rank}" if args.save and world > 1 else args.save
    if save:
        torch.save(model.state_dict(), save)
    print(json.dumps({"steps": done, "test_accuracy": accuracy, "loop_seconds": loop_seconds, "saved": save}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
