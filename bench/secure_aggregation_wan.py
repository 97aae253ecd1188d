#!/usr/bin/env python3
"""diloco's efficiency with and without --secure-aggregation at one emulated latency (docs/privacy.md,
"Secure aggregation"): the shape and the efficiency of `make bench-wan`'s latency sweep (bench_wan.py,
experiment 1: E1_MODEL on Fashion-MNIST, diloco's H and overlap chosen from a pilot `local` run,
efficiency = local's steady s/step / diloco's, local measured in the same invocation), but with
CurveZMQ keys, which secure aggregation needs.

Usage: bench/secure_aggregation_wan.py [--build build] [--sites 4] [--latency-ms 100] [--steps 96]
                                       [--out build/bench-secure-aggregation]

Example:
    >>> # bench/secure_aggregation_wan.py --sites 4 --latency-ms 100
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_wan  # noqa: E402


def simulate(program: str, out: str, sites: int, algos: list, extra: list) -> dict:
    """Runs `meridian simulate --json` (with keys) and returns a bench_wan-style record."""
    cmd = [program, "simulate", "--sites", str(sites), "--algo", ",".join(algos), "--json", "--out", out,
           "--timeout", "1500"] + [str(a) for a in extra]
    print("[secure-aggregation] meridian " + " ".join(cmd[1:]), file=sys.stderr, flush=True)
    load_before = bench_wan.load_average()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.exit(f"simulate failed ({proc.returncode}): {proc.stderr[-2000:]}")
    record = {"out_dir": out, "result": json.loads(proc.stdout), "load_before": load_before,
              "load_after": bench_wan.load_average(), "command": "meridian " + " ".join(cmd[1:])}
    record["steady"] = bench_wan.steady_step_seconds(record)
    return record


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--sites", type=int, default=4)
    ap.add_argument("--latency-ms", type=int, default=100)
    ap.add_argument("--steps", type=int, default=96, help="steps of each measured run (at least 2 H)")
    ap.add_argument("--out", default="build/bench-secure-aggregation")
    a = ap.parse_args()
    program = os.path.join(a.build, "meridian")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = bench_wan.E1_MODEL + ["--eval-every", "100000", "--seed", "1"]
    pilot = simulate(program, os.path.join(a.out, stamp, "pilot"), a.sites, ["local"],
                     base + ["--epochs", f"{bench_wan.epochs_for(16, a.sites, bench_wan.E1_BATCH):.4f}"])
    compute = pilot["steady"]["local"]
    h, overlap = bench_wan.choose_diloco(a.latency_ms, compute)
    diloco = bench_wan.diloco_spec(h, overlap)
    steps = max(a.steps, 2 * h)
    wan = ["--wan", f"latency={a.latency_ms}ms", "--epochs", f"{bench_wan.epochs_for(steps, a.sites, bench_wan.E1_BATCH):.4f}"]
    rows = {}
    for label, flags in (("plain", []), ("secure", ["--secure-aggregation"])):
        rec = simulate(program, os.path.join(a.out, stamp, label), a.sites, ["local", diloco], base + wan + flags)
        local, algo = rec["steady"]["local"], rec["steady"][diloco]
        rows[label] = {"efficiency": local / algo, "local_s_per_step": local, "diloco_s_per_step": algo,
                       "load": rec["load_before"], "command": rec["command"]}
        print(json.dumps({label: rows[label]}), flush=True)
    print(json.dumps({"sites": a.sites, "latency_ms": a.latency_ms, "diloco": diloco, "compute_s": compute,
                      "efficiency_difference": rows["plain"]["efficiency"] - rows["secure"]["efficiency"]}))


if __name__ == "__main__":
    main()
