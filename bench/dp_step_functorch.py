#!/usr/bin/env python3
"""PyTorch side of the DP-SGD step benchmark (docs/privacy.md, "DP-SGD"), next to
build/meridian_bench_dp_step: the same GroupNorm CNN for 28x28 images and the same batch of random
images and labels, timed two ways.

- plain: forward + backward of the mean loss (``loss.backward()``);
- dp: functorch's per-sample gradients, ``vmap(grad(loss of one sample))`` over the batch, then each
  sample's gradient clipped to norm C, summed, Gaussian noise N(0, (sigma*C)^2) added and the sum divided
  by the batch: the DP-SGD step as Opacus computes it with functorch.

The optimizer's update is left out of both, as on Meridian's side. Prints one JSON line with the median
milliseconds of each kind of step and their ratio.

Example::

    $ /usr/bin/python3 bench/dp_step_functorch.py --batch 256 --steps 30 --threads 1
    {"side": "pytorch", "batch": 256, "threads": 1, "plain_ms": ..., "dp_ms": ..., "ratio": ...}
"""
import argparse
import json
import statistics
import time
from typing import Callable, Dict

import torch
from functorch import grad, make_functional, vmap
from torch import nn


def group_norm_cnn() -> nn.Module:
    """Meridian's benchmark network: conv 1->16 k3 p1, GroupNorm(4), ReLU, max pool 2; conv 16->32 k3 p1,
    GroupNorm(4), ReLU, max pool 2; linear 1568->10 (20,586 parameters)."""
    return nn.Sequential(nn.Conv2d(1, 16, 3, 1, 1), nn.GroupNorm(4, 16), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, 1, 1), nn.GroupNorm(4, 32), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(32 * 7 * 7, 10))


def median_ms(steps: int, step: Callable[[], None]) -> float:
    """The median wall time of ``steps`` calls of ``step`` in milliseconds, after three untimed ones."""
    for _ in range(3):
        step()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main() -> Dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--clip", type=float, default=1.0)
    parser.add_argument("--noise-multiplier", type=float, default=1.0)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(3)
    model = group_norm_cnn()
    x = torch.rand(args.batch, 1, 28, 28)
    y = torch.arange(args.batch) % 10
    loss_fn = nn.CrossEntropyLoss()

    def plain() -> None:
        model.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()

    fmodel, params = make_functional(model)

    def sample_loss(p, xi: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
        return loss_fn(fmodel(p, xi.unsqueeze(0)), yi.unsqueeze(0))

    per_sample_grads = vmap(grad(sample_loss), in_dims=(None, 0, 0))

    def dp() -> None:
        grads = per_sample_grads(params, x, y)
        norms = torch.sqrt(sum(g.reshape(args.batch, -1).pow(2).sum(1) for g in grads))
        factors = (args.clip / (norms + 1e-6)).clamp(max=1.0)
        for g in grads:
            clipped = torch.einsum("i,i...->...", factors, g)
            noisy = clipped + torch.normal(0.0, args.noise_multiplier * args.clip, size=clipped.shape)
            noisy.div_(args.batch)

    result = {"side": "pytorch", "torch": torch.__version__, "batch": args.batch, "threads": args.threads,
              "steps": args.steps, "plain_ms": median_ms(args.steps, plain), "dp_ms": median_ms(args.steps, dp)}
    result["ratio"] = result["dp_ms"] / result["plain_ms"]
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
