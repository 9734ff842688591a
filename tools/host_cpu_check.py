"""What this host lets a process have of its CPUs, and whether it throttles: the cgroup's CPU quota (cpu.max), its
throttling counters (cpu.stat) before and after, and k busy threads for a few seconds (CPU seconds got per wall
second: k where k cores are really there). Diagnostics for benchmark runs whose rounds of a second ran slower than
blocks of tens of milliseconds of the same path (benchmarks/README.md, "The batch and its pixel floor, block by
block").

    python3 tools/host_cpu_check.py [--threads 1,4,8,16] [--seconds 3] [--json P]
"""
import argparse
import json
import os
import threading
import time
from pathlib import Path


def read(path):
    try:
        return Path(path).read_text().strip()
    except OSError as exc:
        return f"unreadable: {exc.strerror}"


def cgroup_dir():
    for line in read("/proc/self/cgroup").splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and parts[0] == "0":  # cgroup v2
            return Path("/sys/fs/cgroup") / parts[2].lstrip("/")
    return Path("/sys/fs/cgroup")


def stat(d):
    out = {}
    for line in read(d / "cpu.stat").splitlines():
        k, _, v = line.partition(" ")
        if v.isdigit():
            out[k] = int(v)
    return out


def burn(k, seconds):
    """k threads spinning in C (hashlib over a buffer releases the GIL) for `seconds`: CPU s per wall s."""
    import hashlib
    stop = time.perf_counter() + seconds
    data = b"x" * (1 << 20)
    work = [0] * k

    def spin(i):
        while time.perf_counter() < stop:
            hashlib.sha256(data).digest()
            work[i] += 1
    c0, t0 = time.process_time(), time.perf_counter()
    ts = [threading.Thread(target=spin, args=(i,)) for i in range(k)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return {"threads": k, "cpu_per_wall": (time.process_time() - c0) / (time.perf_counter() - t0),
            "MB_hashed_per_s": sum(work) / (time.perf_counter() - t0)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", default="1,4,8,16")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--json")
    args = ap.parse_args()
    d = cgroup_dir()
    report = {"cgroup": str(d), "cpu.max": read(d / "cpu.max"), "cpu.weight": read(d / "cpu.weight"),
              "cpus": os.cpu_count(), "affinity": len(os.sched_getaffinity(0)), "stat_before": stat(d), "burn": []}
    for k in (int(x) for x in args.threads.split(",")):
        s0 = stat(d)
        row = burn(k, args.seconds)
        s1 = stat(d)
        row["throttled_usec"] = s1.get("throttled_usec", 0) - s0.get("throttled_usec", 0)
        row["nr_throttled"] = s1.get("nr_throttled", 0) - s0.get("nr_throttled", 0)
        report["burn"].append(row)
        print(f"{k:3d} threads: {row['cpu_per_wall']:.2f} CPU s per wall s, {row['MB_hashed_per_s']:.0f} MB/s hashed, "
              f"throttled {row['nr_throttled']} times for {row['throttled_usec'] / 1e3:.0f} ms")
    report["stat_after"] = stat(d)
    print(f"cgroup {d}: cpu.max {report['cpu.max']!r}, cpus {report['cpus']}, affinity {report['affinity']}")
    print("cpu.stat before:", report["stat_before"])
    print("cpu.stat after: ", report["stat_after"])
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
