"""A small attached trainer for the process tests of `meridian start --trainer attached`
(tests/daemon/attached_trainer_test.cc): a linear model on random data, with ways to misbehave.

    attached_trainer_check.py RUN_DIR STEPS [--nan-at K] [--silent-at K] [--reshape-at K]
                              [--bad-dtype] [--width N] [--hold-until FILE] [--save FILE]
                              [--interrupt-at K] [--pause-at K --pause-file FILE] [--dist-init URL]
                              [--raise-at K [--raise-rank R]]

With WORLD_SIZE > 1 in the environment (and RANK), the ranks form a gloo group through --dist-init and
train the model under DistributedDataParallel; rank R saves to FILE.rankR.

Prints one JSON line: what happened ("finished", "refused", "error") with the site's message.
"""

import argparse
import json
import os
import signal
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import torch  # noqa: E402

import meridian  # noqa: E402


def report(**fields):
    print(json.dumps(fields), flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("run_dir")
    parser.add_argument("steps", type=int)
    parser.add_argument("--nan-at", type=int, default=-1)
    parser.add_argument("--silent-at", type=int, default=-1)
    parser.add_argument("--reshape-at", type=int, default=-1)
    parser.add_argument("--bad-dtype", action="store_true")
    parser.add_argument("--width", type=int, default=2, help="the model's outputs")
    parser.add_argument("--hold-until", help="before the first step, wait until this file exists")
    parser.add_argument("--save")
    parser.add_argument("--pause-at", type=int, default=-1, help="at step K, wait until --pause-file exists")
    parser.add_argument("--pause-file", default="")
    parser.add_argument("--interrupt-at", type=int, default=-1, help="Ctrl-C (SIGINT) to itself at step K")
    parser.add_argument("--raise-at", type=int, default=-1,
                        help="at step K, raise an exception the script does not catch (a bug in the loop)")
    parser.add_argument("--raise-rank", type=int, default=0, help="the rank that raises at --raise-at")
    parser.add_argument("--dist-init", default="env://", help="the ranks' init_method when WORLD_SIZE > 1")
    args = parser.parse_args()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        torch.distributed.init_process_group("gloo", init_method=args.dist_init, rank=rank, world_size=world)

    if args.bad_dtype:
        # A hello no PyTorch model sends: an integer parameter tensor.
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sock.connect(os.path.join(args.run_dir, "trainer.sock"))
        sock.send(json.dumps({"op": "hello", "version": 1, "steps": 5,
                              "tensors": [{"name": "w", "shape": [2, 2], "dtype": "int8"}]}).encode())
        report(outcome="refused", error=json.loads(sock.recv(1 << 16).decode())["error"])
        return 0

    torch.manual_seed(7)
    model = torch.nn.Linear(4, args.width)
    generator = torch.Generator().manual_seed(11 + rank)
    initial = [p.detach().clone() for p in model.parameters()]
    net = torch.nn.parallel.DistributedDataParallel(model) if world > 1 else model
    try:
        site = meridian.attach(args.run_dir)
        report(connected=True)
        opt = site.optimizer(net, torch.optim.SGD(model.parameters(), lr=0.1), steps=args.steps)
    except meridian.SiteError as e:
        report(outcome="refused", error=str(e))
        return 0
    # Whether the site handed this trainer parameters other than its own initial ones (a resumed site).
    resumed = any(not torch.equal(a, b) for a, b in zip(initial, model.parameters()))
    report(attached=True, steps=opt.steps, resumed=resumed)
    while args.hold_until and not os.path.exists(args.hold_until):
        time.sleep(0.05)
    refused = []
    step = 0
    try:
        while not site.finished:
            x = torch.randn(8, 4, generator=generator)
            loss = net(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            if step == args.nan_at and not refused:
                model.weight.grad[0, 0] = float("nan")
            if step == args.pause_at:
                report(paused=step)
                while not os.path.exists(args.pause_file):
                    time.sleep(0.05)
            if step == args.interrupt_at:
                os.kill(os.getpid(), signal.SIGINT)  # as Ctrl-C in a terminal: KeyboardInterrupt, uncaught
            if step == args.raise_at and rank == args.raise_rank:
                raise RuntimeError(f"the training loop failed at step {step}")  # uncaught: sys.excepthook
            if step == args.silent_at:
                time.sleep(3600)
            if step == args.reshape_at:
                model.weight.data = torch.zeros(3, 4)
            try:
                opt.step(loss=loss.item())
            except meridian.StepRefused as e:
                refused.append(str(e))
                continue
            step += 1
    except (meridian.SiteError, ValueError) as e:
        report(outcome="error", error=str(e), steps=step, refused=refused)
        return 0
    site.close()
    if args.save:
        torch.save(model.state_dict(), f"{args.save}.rank{rank}" if world > 1 else args.save)
    report(outcome="finished", steps=step, refused=refused)
    return 0


if __name__ == "__main__":
    sys.exit(main())
