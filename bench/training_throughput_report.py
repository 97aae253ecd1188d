#!/usr/bin/env python3
"""Turns the JSON lines of bench/training-throughput into a table: median samples/s of each side per
(model, threads), the ratio Meridian/PyTorch, and which BLAS each side ran on. Prints the table and
replaces the "## Training throughput" section of docs/benchmarks.md, or the section named by the
environment's SECTION (bench/run-all gives resnet8 its own), leaving the other sections as they are.

Usage: training_throughput_report.py RESULTS.jsonl DOCS/benchmarks.md "COMMAND" ["LOAD BEFORE" "LOAD AFTER"]
"""
import datetime
import json
import os
import platform
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from doc_section import replace_section  # noqa: E402


def machine():
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    debian = ""
    try:
        with open("/etc/debian_version") as f:
            debian = "Debian " + f.read().strip()
    except OSError:
        pass
    return f"{os.cpu_count()} cores, {cpu}, {debian or platform.platform()}"


def short_blas(entry, model):
    blas = entry["blas"]
    text = " ".join(blas) if isinstance(blas, list) else blas
    lib = "OpenBLAS " + ("OpenMP" if "openblas-openmp" in text else "pthread" if "openblas-pthread" in text else "?")
    if "libblas.so.3" in text and "openblas" not in text:
        lib = "reference BLAS"
    if entry["side"] == "pytorch" and entry.get("mkldnn") and model in ("cnn", "resnet8"):
        lib += " (+ oneDNN for convolutions)"
    return lib


def main():
    results_path, docs_path, command = sys.argv[1:4]
    title = os.environ.get("SECTION", "Training throughput")
    load = sys.argv[4:6] if len(sys.argv) >= 6 else None
    with open(results_path) as f:
        entries = [json.loads(line) for line in f if line.strip()]
    groups = {}
    for e in entries:
        groups.setdefault((e["model"], e["threads"], e["side"]), []).append(e)
    rows = []
    for model in ("mlp", "cnn", "resnet8"):
        for threads in (1, 2):
            m = groups.get((model, threads, "meridian"), [])
            t = groups.get((model, threads, "pytorch"), [])
            if not m or not t:
                continue
            m_med = statistics.median(e["samples_per_second"] for e in m)
            t_med = statistics.median(e["samples_per_second"] for e in t)
            rows.append((model, threads, m_med, len(m), t_med, len(t), m_med / t_med, short_blas(m[0], model),
                         short_blas(t[0], model), t[0].get("torch", "?")))
    names = {"mlp": "MLP 784-256-128-10", "cnn": "CNN (LeNet-style)", "resnet8": "resnet8 (batch norm, residual)"}
    table = ["| model | threads | Meridian samples/s | PyTorch samples/s | Meridian/PyTorch | Meridian BLAS | PyTorch BLAS |",
             "|---|---|---|---|---|---|---|"]
    for (model, threads, m_med, m_n, t_med, t_n, ratio, m_blas, t_blas, _) in rows:
        table.append(f"| {names[model]} | {threads} | {m_med:,.0f} (median of {m_n}) | {t_med:,.0f} (median of {t_n}) "
                     f"| {ratio:.2f} | {m_blas} | {t_blas} |")
    torch_version = rows[0][9] if rows else "?"
    # When the measurements finished (the results file's last write), not when this report ran.
    finished = datetime.datetime.fromtimestamp(os.path.getmtime(results_path), datetime.timezone.utc)
    date = finished.strftime("%Y-%m-%d %H:%M UTC")
    section = "\n".join([
        "## " + title,
        "",
        f"Command: `make bench` (this table: `{command}`). Date: {date}. Machine: {machine()}.",
        f"Batch 64, SGD with heavy-ball momentum 0.9, synthetic 28x28 inputs; PyTorch {torch_version} (Debian's "
        "python3-torch, CPU) with `torch.set_num_threads` set to the thread count. A step is gather a shuffled "
        "batch, forward, backward, optimizer update. The sides alternate in one run; figures are medians over "
        "the repeats. The machine is shared, so single figures are noisy; compare the two sides of one row. "
        "Meridian's threads (models/thread_policy.h): the CNN and resnet8 split each batch across them with "
        "OpenBLAS single-threaded inside (so resnet8's batch norm sees 32 samples per part at 2 threads, "
        "PyTorch's all 64); the MLP runs OpenBLAS with that many threads. PyTorch's resnet8 is the same "
        "network (bench/torch_train_throughput.py, convolutions with biases as Meridian's). On a CPU with AVX2 "
        "and FMA Meridian's convolutions run on its own kernels, not BLAS (docs/models.md, \"Speed\"), so its "
        "BLAS column then concerns its linear layers.",
        *([f"Load average (1, 5, 15 min) before the run: {load[0]}; after: {load[1]} (other work on this "
           "2-core machine; above 2, threads wait for a core, which hurts the 2-thread rows most)."] if load else []),
        "",
        *table,
        "",
    ])
    print(section)
    replace_section(docs_path, title, section.split("\n", 2)[2])
    print(f"wrote {docs_path}", file=sys.stderr)


if __name__ == "__main__":
    main()
