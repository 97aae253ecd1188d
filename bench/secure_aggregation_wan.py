#!/usr/bin/env python3
"""diloco's efficiency with and without --secure-aggregation at one emulated latency (docs/privacy.md,
"Secure aggregation"): the shape and the efficiency of `make bench-wan`'s latency sweep (bench_wan.py,
experiment 1: E1_MODEL on Fashion-MNIST, diloco's H and overlap chosen from a pilot `local` run,
efficiency = local's steady s/step / diloco's, local measured in the same invocation), but with
CurveZMQ keys, which secure aggregation needs.

With --repeats N the runs without and with the flag alternate N times after the one pilot (the same
shape for all), each printed with the load average before it, and the medians close.

Usage: bench/secure_aggregation_wan.py [--build build] [--sites 4] [--latency-ms 100] [--steps 96]
                                       [--overlap TAU] [--repeats 1] [--out build/bench-secure-aggregation]

Example:
    >>> # bench/secure_aggregation_wan.py --sites 4 --latency-ms 100
"""
import argparse
import json
import os
import statistics
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


def site_figures(out_dir: str, algo: str) -> dict:
    """What separates the causes of a slower run, as means over `algo`'s sites from their result.json:
    the trainer's wait for mixes per step, the process CPU outside the trainer thread (communication and
    transport), and the minor page faults, all over the step loop."""
    rows = []
    algo_dir = os.path.join(out_dir, algo)
    for site in sorted(os.listdir(algo_dir)):
        path = os.path.join(algo_dir, site, "result.json")
        if os.path.exists(path):
            rows.append(json.load(open(path)))
    if not rows:
        return {}
    return {"wait_s_per_step": statistics.mean(r["loop_wait_seconds"] / r["steps"] for r in rows),
            "non_trainer_cpu_s": statistics.mean(r["loop_process_cpu_seconds"] - r["loop_trainer_cpu_seconds"]
                                                 for r in rows),
            "minor_faults": statistics.mean(r["loop_minor_faults"] for r in rows)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--sites", type=int, default=4)
    ap.add_argument("--latency-ms", type=int, default=100)
    ap.add_argument("--steps", type=int, default=96, help="steps of each measured run (at least 2 H)")
    ap.add_argument("--overlap", type=int, default=0,
                    help="diloco's overlap tau in steps (default: chosen from the pilot, as bench_wan.py does)")
    ap.add_argument("--repeats", type=int, default=1, help="alternations of the runs without and with the flag")
    ap.add_argument("--out", default="build/bench-secure-aggregation")
    a = ap.parse_args()
    program = os.path.join(a.build, "meridian")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = bench_wan.E1_MODEL + ["--eval-every", "100000", "--seed", "1"]
    pilot = simulate(program, os.path.join(a.out, stamp, "pilot"), a.sites, ["local"],
                     base + ["--epochs", f"{bench_wan.epochs_for(16, a.sites, bench_wan.E1_BATCH):.4f}"])
    compute = pilot["steady"]["local"]
    h, overlap = bench_wan.choose_diloco(a.latency_ms, compute)
    if a.overlap > 0:
        h, overlap = max(32, a.overlap), a.overlap
    diloco = bench_wan.diloco_spec(h, overlap)
    steps = max(a.steps, 2 * h)
    wan = ["--wan", f"latency={a.latency_ms}ms", "--epochs", f"{bench_wan.epochs_for(steps, a.sites, bench_wan.E1_BATCH):.4f}"]
    rows = {"plain": [], "secure": []}
    for repeat in range(a.repeats):
        for label, flags in (("plain", []), ("secure", ["--secure-aggregation"])):
            rec = simulate(program, os.path.join(a.out, stamp, f"{label}-{repeat}"), a.sites, ["local", diloco],
                           base + wan + flags)
            local, algo = rec["steady"]["local"], rec["steady"][diloco]
            row = {"repeat": repeat, "efficiency": local / algo, "local_s_per_step": local, "diloco_s_per_step": algo,
                   "load": rec["load_before"], "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                   "diloco_sites": site_figures(rec["out_dir"], diloco), "command": rec["command"]}
            rows[label].append(row)
            print(json.dumps({label: row}), flush=True)
    med = {label: statistics.median(r["efficiency"] for r in rows[label]) for label in rows}
    print(json.dumps({"sites": a.sites, "latency_ms": a.latency_ms, "diloco": diloco, "compute_s": compute,
                      "repeats": a.repeats, "median_efficiency": med,
                      "efficiency_difference": med["plain"] - med["secure"]}))


if __name__ == "__main__":
    main()
