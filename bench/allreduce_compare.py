#!/usr/bin/python3
"""All-reduce benchmark: Meridian's ring all-reduce over its ZeroMQ transport against PyTorch's gloo
all_reduce, same float counts, same number of local processes on 127.0.0.1, in the same run
(alternating trials so that neither side gets a quieter machine).

Usage: bench/allreduce_compare.py [--build build] [--procs 4] [--sizes 1000000,10000000]
                                  [--repeats 10] [--warmup 2] [--trials 2] [--piece N] [--chunk-kib K]
                                  [--out docs/benchmarks.md]
Prints the results table; with --out, replaces the "All-reduce" section of that file (or appends it).
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from doc_section import replace_section  # noqa: E402  (bench/doc_section.py: one section per benchmark)

TITLE = "All-reduce"


def run_gloo(args):
    cmd = [sys.executable, os.path.join(HERE, "allreduce_gloo.py"), "--procs", str(args.procs), "--sizes", args.sizes,
           "--repeats", str(args.repeats), "--warmup", str(args.warmup)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=900).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def run_meridian(args, binary):
    common = ["--procs", str(args.procs), "--sizes", args.sizes, "--repeats", str(args.repeats), "--warmup",
              str(args.warmup)]
    if args.piece:
        common += ["--piece", str(args.piece)]
    if args.chunk_kib:
        common += ["--chunk-kib", str(args.chunk_kib)]
    first = subprocess.Popen([binary, "--name", "site0"] + common, stdout=subprocess.PIPE, text=True)
    others = []
    try:
        line = first.stdout.readline()
        while line and not line.startswith("endpoint "):  # log lines may come first
            line = first.stdout.readline()
        if not line:
            raise RuntimeError("meridian_bench_allreduce exited before printing its endpoint")
        endpoint = line.split()[1]
        for r in range(1, args.procs):
            others.append(subprocess.Popen([binary, "--name", f"site{r}", "--bootstrap", endpoint] + common,
                                           stdout=subprocess.DEVNULL))
        out, _ = first.communicate(timeout=900)
        for p in others:
            p.wait(timeout=60)
    finally:
        for p in [first] + others:
            if p.poll() is None:
                p.kill()
    if first.returncode != 0 or any(p.returncode != 0 for p in others):
        raise RuntimeError("a meridian_bench_allreduce process failed")
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--sizes", default="1000000,10000000")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--piece", type=int, help="floats per Meridian ring message (default: the library's)")
    ap.add_argument("--chunk-kib", type=int, help="payload KiB per Meridian wire chunk (default: the library's)")
    ap.add_argument("--out", help="markdown file whose All-reduce section to replace")
    args = ap.parse_args()

    binary = os.path.join(args.build, "meridian_bench_allreduce")
    have_meridian = os.access(binary, os.X_OK)
    if not have_meridian:
        print(f"allreduce_compare: {binary} not built (needs the ZeroMQ transport); timing gloo only",
              file=sys.stderr)
    load = os.getloadavg()[0]  # the machine is shared: say how busy it was
    seconds = {}  # (impl, size) -> every repeat of every trial
    for trial in range(args.trials):
        print(f"allreduce_compare: trial {trial + 1} of {args.trials}", file=sys.stderr)
        batches = []
        if have_meridian:
            batches.append(run_meridian(args, binary))
        batches.append(run_gloo(args))
        for batch in batches:
            for r in batch:
                seconds.setdefault((r["impl"], r["size"]), []).extend(r["seconds"])

    sizes = [int(s) for s in args.sizes.split(",") if s]
    rows = []
    for size in sizes:
        g = statistics.median(seconds[("gloo", size)]) * 1e3
        m = seconds.get(("meridian", size))
        if m:
            m = statistics.median(m) * 1e3
            rows.append(f"| {size:,} | {args.procs} | {m:.1f} | {g:.1f} | {m / g:.2f} |")
        else:
            rows.append(f"| {size:,} | {args.procs} | not measured (ZeroMQ transport not built) | {g:.1f} | — |")
    ratios = [statistics.median(seconds[("meridian", size)]) / statistics.median(seconds[("gloo", size)])
              for size in sizes if seconds.get(("meridian", size))]
    if ratios and max(ratios) <= 1.0:
        verdict = "Met in this run."
    elif ratios:
        verdict = f"Not met in this run (worst ratio {max(ratios):.2f})."
    else:
        verdict = "Not measured."
    count = args.trials * args.repeats
    cmd = (f"bench/allreduce_compare.py --procs {args.procs} --sizes {args.sizes} --repeats {args.repeats} "
           f"--warmup {args.warmup} --trials {args.trials}")
    body = "\n".join([
        f"Sum of float32 vectors among {args.procs} local processes over 127.0.0.1: Meridian's chunked ring "
        "all-reduce (gossip/ring_allreduce.h) on its ZeroMQ transport, insecure mode, against PyTorch "
        "gloo's `all_reduce` (Debian python3-torch, one thread per process). Each repeat starts after a "
        "barrier and lasts as long as its slowest process; the table gives the median over "
        f"{count} repeats ({args.trials} alternating trials of {args.repeats}, after {args.warmup} warm-up "
        "repeats each). Lower is better; the last column below 1 means Meridian is faster.",
        "",
        f"- Command: `make bench` (runs `{cmd}`)",
        f"- Machine: {os.cpu_count()} cores, {platform.platform()}, Debian 12; load average {load:.1f} at the "
        "start (the machine is shared with other builds, so absolute times are noisy; the ratio is the figure)",
        f"- Date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        "",
        "| floats | processes | Meridian median (ms) | gloo median (ms) | Meridian / gloo |",
        "|---:|---:|---:|---:|---:|",
        *rows,
        "",
        f"Target: Meridian no slower than gloo. {verdict}",
        "",
        "What changed to get here (2026-11-22). Before, every ring piece crossed four thread hand-offs "
        "(caller, transport I/O thread, ZeroMQ I/O thread, at each end), and on this oversubscribed "
        "machine each wake-up waits for a core; now a thread that sends and receives runs the transport's "
        "loop itself while it keeps calling (peer/zmq_transport.h, \"Threads\"), which leaves two. "
        "`valgrind --tool=callgrind` on one of the four processes (1M floats) showed the user-space work "
        "to be payload copies, plus 12% of the instructions zero-filling pooled 1 MiB buffers that small "
        "messages had shrunk; the buffer pool now keeps sizes and serves small messages fresh, and the "
        "ring's final add, scale and copy are one pass. The ring's additions are about 6%. What remains "
        "against gloo, and shows most at 10M floats where the tensors no longer fit in cache and the four "
        "processes share the memory bandwidth: two more passes over the received bytes (libzmq 4.3 "
        "allocates its own buffer per message, which the reassembler copies into a pooled buffer while "
        "it checks that every value is finite; the ring then copies each gathered piece into the "
        "tensor), where gloo reads from the socket straight into place; and ZeroMQ's own I/O thread. "
        "Removing them needs payloads that can stay in libzmq's buffer (or a receive into the "
        "destination), a change to the Message type that gossip/ sees. Whole-segment ring pieces with 4 MiB wire chunks "
        "(`--piece`, `--chunk-kib`) were slower in side-by-side runs: they lose the pipelining and save "
        "little. Repeat times are bimodal under load (quiet repeats of 10M floats take about 80-90 ms), "
        "so the ratio moves with the load average noted above.",
    ])
    print(f"## {TITLE}\n\n{body}")
    if args.out:
        replace_section(args.out, TITLE, body)


if __name__ == "__main__":
    main()
