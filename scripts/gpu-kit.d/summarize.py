#!/usr/bin/env python3
"""Writes DIR/summary.json from what the device kit's `run` left in DIR (stages.tsv, results/, logs/)
and prints the figures docs/cuda.md records: device and driver, the CUDA tests, GPU against CPU accuracy,
Meridian against PyTorch samples/s per network and batch, and the snapshot overlap.
Usage: summarize.py KIT_DIR DIR
"""
import datetime
import json
import os
import re
import statistics
import sys

# GPU and CPU runs of the same seed and data differ only by rounding (docs/cuda.md's parity bounds), which
# after a few epochs moves test accuracy by a few tenths of a percent at most.
ACCURACY_AGREEMENT = 0.01


def read(path, default=""):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def read_json(path):
    text = read(path).strip()
    if not text:
        return None
    try:
        return json.loads(text.splitlines()[-1])
    except ValueError:
        return None


def read_jsonl(path):
    rows = []
    for line in read(path).splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            pass
    return rows


def kit_env(kit):
    env = {}
    for line in read(os.path.join(kit, "kit.env")).splitlines():
        m = re.match(r"^(KIT_\w+)=(.*)$", line)
        if m:
            env[m.group(1)] = m.group(2).strip("'\"")
    return env


def stages(out):
    rows = []
    for line in read(os.path.join(out, "stages.tsv")).splitlines():
        name, status, code, seconds = (line.split("\t") + ["", "", "", ""])[:4]
        rows.append({"name": name, "status": status, "exit": code, "seconds": int(seconds or 0)})
    return rows


def tests(out):
    log = read(os.path.join(out, "logs", "cuda-tests.log"))
    if not log:
        return None
    total = failed = 0
    m = re.findall(r"^All tests passed \(.* in (\d+) test cases?\)", log, re.M)
    if m:
        total = int(m[-1])
    else:
        m = re.findall(r"^test cases: *(\d+).*?(?:\| *(\d+) failed)?\s*$", log, re.M)
        if m:
            total, failed = int(m[-1][0]), int(m[-1][1] or 0)
    skipped = re.findall(r"SKIPPED: (.*)", log)
    return {"test_cases": total, "passed": max(total - failed - len(skipped), 0), "failed": failed,
            "skipped": len(skipped), "skip_reasons": sorted(set(skipped)), "log": "cuda-tests.log"}


def device(out):
    csv = read(os.path.join(out, "results", "nvidia-smi.csv")).strip().splitlines()
    info = {}
    if len(csv) >= 2:
        keys = [k.strip() for k in csv[0].split(",")]
        values = [v.strip() for v in csv[1].split(",")]
        info = dict(zip(keys, values))
    info["meridian_devices"] = read(os.path.join(out, "results", "devices.txt")).strip()
    return info


def accuracy(out):
    rows = []
    for model in ("mlp", "cnn", "resnet8"):
        runs = {d: read_json(os.path.join(out, "results", f"train-{model}-{d}.json")) for d in ("cuda", "cpu")}
        if model == "resnet8" and not any(runs.values()):
            continue  # not in this build
        row = {"model": model}
        for d, run in runs.items():
            if run:
                row[d] = {k: run.get(k) for k in ("test_accuracy", "test_loss", "train_loss", "epochs", "batch",
                                                  "threads", "device", "samples_per_second", "train_seconds")}
        if runs["cuda"] and runs["cpu"]:
            row["difference"] = round(runs["cuda"]["test_accuracy"] - runs["cpu"]["test_accuracy"], 6)
            row["agree"] = abs(row["difference"]) <= ACCURACY_AGREEMENT
        rows.append(row)
    return rows


EPOCH_LINE = re.compile(r"^epoch (\d+)/(\d+) step \d+/\d+ loss \S+ samples/s (\d+) test accuracy", re.M)


def throughput(out):
    torch_rows = {(r.get("model"), r.get("batch")): r for r in read_jsonl(os.path.join(out, "results", "pytorch.jsonl"))}
    rows = []
    logs = os.path.join(out, "logs")
    for name in sorted(os.listdir(logs)) if os.path.isdir(logs) else []:
        m = re.match(r"^meridian-(\w+)-(\d+)\.log$", name)
        if not m:
            continue
        model, batch = m.group(1), int(m.group(2))
        rates = [float(r) for e, _, r in EPOCH_LINE.findall(read(os.path.join(out, "logs", name))) if int(e) > 1]
        row = {"model": model, "batch": batch,
               "meridian_samples_per_second": round(statistics.median(rates), 1) if rates else None,
               "meridian_epoch_samples_per_second": rates}
        theirs = torch_rows.get((model, batch))
        if theirs:
            row["pytorch_samples_per_second"] = theirs["samples_per_second"]
            row["pytorch_epoch_samples_per_second"] = theirs["epoch_samples_per_second"]
            if rates:
                row["ratio"] = round(row["meridian_samples_per_second"] / theirs["samples_per_second"], 3)
        rows.append(row)
    rows.sort(key=lambda r: (r["model"], r["batch"]))
    versions = next(iter(torch_rows.values()), {})
    return rows, {k: versions.get(k) for k in ("torch", "cuda", "cudnn", "device")}


def main():
    kit, out = sys.argv[1], sys.argv[2]
    stage_rows = stages(out)
    libraries = dict(line.split("\t", 1) for line in read(os.path.join(out, "results", "libraries.tsv")).splitlines()
                     if "\t" in line)
    through, torch_versions = throughput(out)
    summary = {
        "kit": kit_env(kit),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "cpus": os.cpu_count(),
        "device": device(out),
        "libraries": libraries,
        "version": read(os.path.join(out, "results", "version.txt")).strip(),
        "stages": stage_rows,
        "all_stages_ok": all(s["status"] == "ok" for s in stage_rows),
        "cuda_tests": tests(out),
        "accuracy": accuracy(out),
        "throughput": through,
        "pytorch": torch_versions,
        "overlap": read_jsonl(os.path.join(out, "results", "overlap.jsonl")),
        "cuda_bench": read(os.path.join(out, "results", "cuda-bench.txt")).splitlines(),
    }
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")

    d = summary["device"]
    if "name" in d:
        print(f"device: {d['name']}, driver {d.get('driver_version', '?')}; kit {summary['kit'].get('KIT_COMMIT')}")
    else:
        print(f"device: no nvidia-smi figures; {(d['meridian_devices'].splitlines() or ['meridian devices: no output'])[0]}")
    t = summary["cuda_tests"]
    if t:
        print(f"CUDA tests: {t['passed']} passed, {t['failed']} failed, {t['skipped']} skipped of {t['test_cases']}")
    for row in summary["accuracy"]:
        if "cuda" in row and "cpu" in row:
            print(f"accuracy {row['model']}: GPU {row['cuda']['test_accuracy']:.4f}, CPU {row['cpu']['test_accuracy']:.4f}"
                  f" ({'agree' if row['agree'] else 'DIFFER'}, difference {row['difference']:+.4f})")
    for row in summary["throughput"]:
        print(f"throughput {row['model']} batch {row['batch']}: Meridian {row['meridian_samples_per_second']}, "
              f"PyTorch {row.get('pytorch_samples_per_second')} samples/s, ratio {row.get('ratio')}")
    for row in summary["overlap"]:
        if "hidden" in row:
            print(f"overlap {row['model']} {row['parameters']} params batch {row['batch']}: compute {row['compute_ms']:.3f} ms,"
                  f" copy {row['copy_ms']:.3f} ms, both {row['both_ms']:.3f} ms, hidden {row['hidden']:.2f}"
                  f" ({'overlaps' if row['overlaps'] else 'does NOT overlap'}; snapshot exact: {row['snapshot_exact']})")
    bad = [s["name"] + ":" + s["status"] for s in stage_rows if s["status"] != "ok"]
    print("stages not ok: " + (", ".join(bad) if bad else "none"))


if __name__ == "__main__":
    main()
