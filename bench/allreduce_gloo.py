#!/usr/bin/python3
"""PyTorch gloo all_reduce (sum) of float32 tensors among local processes over 127.0.0.1.

Usage: bench/allreduce_gloo.py --procs 4 --sizes 1000000,10000000 --repeats 10 --warmup 2
Prints one JSON object per line and size: {"impl": "gloo", "procs": P, "size": N, "seconds": [...]},
where seconds[i] is repeat i's time on its slowest process (each repeat starts after a barrier).
Runs under Debian's /usr/bin/python3, which has python3-torch.
"""
import argparse
import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank, procs, port, sizes, repeats, warmup, out):
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=procs)
    for size in sizes:
        data = torch.empty(size, dtype=torch.float32)
        times = torch.zeros(repeats, dtype=torch.float64)
        for i in range(warmup + repeats):
            data.fill_(rank + 1)  # touches the memory outside the timed region
            dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(data)
            elapsed = time.perf_counter() - start
            if i >= warmup:
                times[i - warmup] = elapsed
        want = procs * (procs + 1) / 2
        if size and (data[0].item() != want or data[-1].item() != want):
            raise SystemExit(f"gloo all_reduce gave {data[0].item()}, expected {want}")
        dist.all_reduce(times, op=dist.ReduceOp.MAX)  # a repeat lasts as long as its slowest process
        if rank == 0:
            out.put({"impl": "gloo", "procs": procs, "size": size, "seconds": times.tolist()})
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--sizes", default="1000000,10000000", help="comma-separated float counts")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=worker, args=(r, args.procs, port, sizes, args.repeats, args.warmup, out))
             for r in range(args.procs)]
    for p in procs:
        p.start()
    results = []
    while len(results) < len(sizes):
        if not any(p.is_alive() for p in procs) and out.empty():
            break
        try:
            results.append(out.get(timeout=1))
        except Exception:
            pass
    for p in procs:
        p.join()
    if len(results) < len(sizes) or any(p.exitcode != 0 for p in procs):
        sys.exit("allreduce_gloo: a worker failed")
    for r in results:
        print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
