#!/usr/bin/env python3
"""Attach overhead: the same PyTorch loop plain and attached to a Meridian site (python/meridian), for
an MLP of about 2 MB and one of about 40 MB of float32 parameters, under `local` and `allreduce`.

Each measurement is a fresh process running the loop (batch 64 of synthetic 28x28 inputs, SGD with
heavy-ball momentum 0.9, one torch thread); a step is zero_grad, forward, backward and the optimizer's
step, the attached one included. The attached runs are one site (`meridian start --trainer attached
--site-count 1 --insecure`) with no peer, so no latency and no network: what the algorithm costs
natively there is nothing, and the difference to the plain loop is what attaching costs (the channel's
messages, the copies between the tensors and the shared segment, the daemon's side of the step).
Plain, local and allreduce alternate within each repeat; figures are medians of the per-step times
over the measured steps of every repeat. Prints the table and, with --out, replaces the "Attach
overhead" section of docs/benchmarks.md.

Usage: bench/attach_overhead.py [--build build] [--sizes 2,40] [--steps 40] [--warmup 5] [--repeats 3]
                                [--out docs/benchmarks.md]
       bench/attach_overhead.py --loop MB STEPS WARMUP [--attached]   (one measurement; prints JSON)
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
INPUTS, CLASSES, BATCH = 784, 10, 64


def hidden_width(megabytes: float) -> int:
    """The hidden width of an MLP 784-H-10 with about `megabytes` MB of float32 parameters."""
    floats = megabytes * (1 << 20) / 4
    return max(1, round((floats - CLASSES) / (INPUTS + 1 + CLASSES)))


def process_cpu(pid: int) -> float:
    """CPU seconds (user and system) process `pid` has used; 0 for pid 0."""
    if not pid:
        return 0.0
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def loop(megabytes: float, steps: int, warmup: int, attached: bool) -> dict:
    import torch
    from torch import nn

    torch.manual_seed(1)
    torch.set_num_threads(1)
    width = hidden_width(megabytes)
    model = nn.Sequential(nn.Linear(INPUTS, width), nn.ReLU(), nn.Linear(width, CLASSES))
    x = torch.rand(BATCH, INPUTS)
    y = torch.randint(0, CLASSES, (BATCH,))
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    site = None
    if attached:
        sys.path.insert(0, os.path.join(ROOT, "python"))
        import meridian

        site = meridian.attach()
        opt = site.optimizer(model, opt, steps=warmup + steps)
    site_pid = int(os.environ.get("MERIDIAN_BENCH_SITE_PID", "0"))
    times = []
    for i in range(warmup + steps):
        if i == warmup:
            cpu_start = time.process_time() + process_cpu(site_pid)
        start = time.perf_counter()
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        if i >= warmup:
            times.append(time.perf_counter() - start)
    cpu = time.process_time() + process_cpu(site_pid) - cpu_start
    if site:
        site.close()
    parameters = sum(p.numel() for p in model.parameters())
    return {"parameters": parameters, "step_seconds": times, "cpu_per_step": cpu / steps}


def measure(args, megabytes: float, algo: str) -> dict:
    """One process's per-step times and CPU time per step (the trainer's, and its site's when attached):
    the plain loop (algo "plain") or attached to a fresh site."""
    loop_cmd = [sys.executable, os.path.abspath(__file__), "--loop", str(megabytes), str(args.steps), str(args.warmup)]
    if algo == "plain":
        out = subprocess.run(loop_cmd, check=True, capture_output=True, text=True).stdout
        return json.loads(out.strip().splitlines()[-1])
    work = tempfile.mkdtemp(prefix="meridian-attach-bench-")
    run_dir = os.path.join(work, "run")
    site = subprocess.Popen(
        [os.path.join(args.build, "meridian"), "start", "--name", "bench", "--trainer", "attached", "--algo", algo,
         "--site-count", "1", "--insecure", "--listen", "tcp://127.0.0.1:0", "--metrics-address", "off",
         "--threads", "1", "--run-dir", run_dir],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "site.log"), "w"))
    try:
        env = dict(os.environ, MERIDIAN_RUN_DIR=run_dir, MERIDIAN_BENCH_SITE_PID=str(site.pid))
        out = subprocess.run(loop_cmd + ["--attached"], check=True, capture_output=True, text=True, env=env).stdout
        if site.wait(timeout=120) != 0:
            raise RuntimeError(f"the site exited {site.returncode}: {open(os.path.join(work, 'site.log')).read()}")
    finally:
        if site.poll() is None:
            site.kill()
            site.wait()
    shutil.rmtree(work, ignore_errors=True)
    return json.loads(out.strip().splitlines()[-1])


def load_text() -> str:
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loop", nargs=3, metavar=("MB", "STEPS", "WARMUP"), help=argparse.SUPPRESS)
    parser.add_argument("--attached", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--build", default="build")
    parser.add_argument("--sizes", default="2,40", help="model sizes in MB of float32 parameters")
    parser.add_argument("--steps", type=int, default=40, help="measured steps per process")
    parser.add_argument("--warmup", type=int, default=5, help="steps before measuring")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", help="replace the 'Attach overhead' section of this file")
    args = parser.parse_args()
    if args.loop:
        mb, steps, warmup = float(args.loop[0]), int(args.loop[1]), int(args.loop[2])
        print(json.dumps(loop(mb, steps, warmup, args.attached)))
        return 0

    sizes = [float(s) for s in args.sizes.split(",")]
    variants = ["plain", "local", "allreduce"]
    started = datetime.datetime.now(datetime.timezone.utc)
    load_before = load_text()
    times = {(mb, v): [] for mb in sizes for v in variants}
    cpu = {(mb, v): [] for mb in sizes for v in variants}
    for repeat in range(args.repeats):
        for mb in sizes:
            for v in variants:
                result = measure(args, mb, v)
                times[(mb, v)] += result["step_seconds"]
                cpu[(mb, v)].append(result["cpu_per_step"])
                print(f"repeat {repeat + 1}/{args.repeats}  {mb:g} MB  {v:<9}  median so far "
                      f"{statistics.median(times[(mb, v)]) * 1000:.2f} ms, CPU "
                      f"{result['cpu_per_step'] * 1000:.2f} ms a step", flush=True)
    load_after = load_text()

    rows = []
    for mb in sizes:
        plain = statistics.median(times[(mb, "plain")])
        plain_cpu = statistics.median(cpu[(mb, "plain")])
        for algo in ("local", "allreduce"):
            attached = statistics.median(times[(mb, algo)])
            attached_cpu = statistics.median(cpu[(mb, algo)])
            rows.append((mb, algo, plain, attached, (attached - plain) / plain, plain_cpu, attached_cpu,
                         (attached_cpu - plain_cpu) / plain_cpu))
    lines = ["| model | algorithm | plain step (ms) | attached step (ms) | overhead | plain CPU/step (ms) | "
             "attached CPU/step, trainer + site (ms) | CPU overhead |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for mb, algo, plain, attached, share, plain_cpu, attached_cpu, cpu_share in rows:
        floats = hidden_width(mb) * (INPUTS + 1 + CLASSES) + CLASSES
        lines.append(f"| MLP 784-{hidden_width(mb)}-10 ({floats * 4 / (1 << 20):.1f} MB) | {algo} | "
                     f"{plain * 1000:.2f} | {attached * 1000:.2f} | {share * 100:+.1f}% | {plain_cpu * 1000:.2f} | "
                     f"{attached_cpu * 1000:.2f} | {cpu_share * 100:+.1f}% |")
    table = "\n".join(lines)
    print(table)
    if args.out:
        sys.path.insert(0, HERE)
        from doc_section import replace_section

        worst = max(r[4] for r in rows)
        worst_cpu = max(r[7] for r in rows)
        body = f"""The same PyTorch loop plain and attached to a site (python/meridian): an MLP 784-H-10 of about
2 MB and about 40 MB of float32 parameters, batch 64 of synthetic inputs, SGD with heavy-ball momentum
0.9, one torch thread; a step is zero_grad, forward, backward and the optimizer's step. Attached, the
site is alone (`--site-count 1`, no peer), so there is no latency and no network: what remains of the
algorithm is `local`'s nothing and `allreduce`'s mix over one site (the mixer's copies, which a
built-in allreduce site pays too), and the rest of the difference is what attaching costs. `local`
exchanges one message each way per step (the parameters cross only when a checkpoint is due);
`allreduce` also copies the gradients into the shared segment, where the site checks them for NaN and
Inf, and the averaged ones back. Each figure is the median per-step
time over {args.repeats} repeats of {args.steps} measured steps (after {args.warmup}), each repeat a
fresh process (and a fresh site), plain, local and allreduce alternating. Wall time on a loaded machine
mostly measures the scheduler, so the CPU time per step is given too: the trainer process's, plus the
site daemon's over the same steps (median over the repeats). Target: at most 3% of a step.

- Command: `make bench` (runs `bench/attach_overhead.py --build BUILD --repeats {args.repeats} --steps {args.steps}`)
- Machine: 2 cores, {platform.platform()}, Python {platform.python_version()}, niceness {os.nice(0)}; load average {load_before}
  at the start, {load_after} at the end (the machine is shared with other work)
- Date: {started:%Y-%m-%d %H:%M} UTC

{table}

Worst overhead in this run: {worst * 100:+.1f}% of a plain step's wall time, {worst_cpu * 100:+.1f}% of its CPU time."""
        replace_section(args.out, "Attach overhead", body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
