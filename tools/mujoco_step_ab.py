#!/usr/bin/env python3
"""A/B of a setting of MujocoVectorEnv's batched step on the real render (the render thread's spin, or where the
threads run): by default the stepper's next() watching for the next finished env for --spin µs before it sleeps,
against sleeping at once. One batch per N, its
measured choice of path settled first (as `python -m gltensor.bench mujoco` does), then blocks of steps in turns: the
same batch in each --ways setting, and its pixel floor (render, read, the same Nature-CNN forward; no physics). Each
step is followed by the forward, as in the bench and in training. Ratios to the first way are paired (blocks timed
within seconds of each other).

    python tools/mujoco_step_ab.py --envs 4,16,64,256 --turns 16 --ways serial,spin

Four other changes were measured by earlier versions of this tool and did not land (benchmarks/README.md, "Four
changes to the batched step, A/B", and "The task's NumPy while the GPU draws"): the task's NumPy in a finisher thread
(commit 41d1010), the render thread stepping an env no physics thread had claimed (commit 8119579), the physics
threads watching for the next job (commit f6f33ac), and the task's NumPy between the draws and the read (commit
b8e2ee1).

--fake replaces the render with a GIL-free wait of --tail µs (CPU only: whether the thread hand-off costs more
than the overlap saves, without a GPU).

The ways `free` and `pinned` ask whether the physics threads slow the render thread by sharing its core: `pinned`
keeps the calling (render) thread on one CPU and every other thread of the process (the physics threads, the
drivers' and torch's) off that CPU and its hyperthread siblings; `free` lets every thread run anywhere (the
library's behaviour). The affinity changes only when the way changes, outside the timed step."""
import argparse
import json
import os
import sys
import threading
import time
from statistics import median
from types import SimpleNamespace

os.environ.setdefault("MUJOCO_GL", "egl")
import numpy as np  # noqa: E402


def fake_render(venv, tail_s):
    frame = venv._render()

    def drain(order=None):
        if order is not None:
            for _ in order:
                pass
        end = time.perf_counter() + tail_s
        while time.perf_counter() < end:
            time.sleep(0)  # releases the GIL, as the resolve and the read do
        return frame
    venv._render = drain


def cpus_of(path):
    """The CPUs of a sysfs list such as "0-3,8"."""
    out = set()
    for part in open(path).read().strip().split(","):
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out


class Placement:
    """Thread affinity for the `pinned` and `free` ways (Linux: os.sched_setaffinity on a thread id)."""

    def __init__(self):
        self.all = os.sched_getaffinity(0)
        self.render_cpu = min(self.all)
        siblings = cpus_of(f"/sys/devices/system/cpu/cpu{self.render_cpu}/topology/thread_siblings_list")
        self.others = self.all - siblings - {self.render_cpu}
        self.main = threading.get_native_id()
        self.state = None

    def set(self, way):
        if way == self.state:
            return
        for tid in (int(t) for t in os.listdir("/proc/self/task")):
            cpus = self.all if way == "free" else ({self.render_cpu} if tid == self.main else self.others)
            try:
                os.sched_setaffinity(tid, cpus)
            except (ProcessLookupError, PermissionError):
                pass  # a thread that ended meanwhile
        self.state = way


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", default="HalfCheetah-v5")
    ap.add_argument("--envs", default="4,16,64,256")
    ap.add_argument("--size", type=int, default=84)
    ap.add_argument("--turns", type=int, default=16)
    ap.add_argument("--block", type=int, default=10)
    ap.add_argument("--settle", type=int, default=150, help="untimed steps of each side before the turns")
    ap.add_argument("--backend", default="auto", choices=("auto", "cuda", "cpu"))
    ap.add_argument("--fake", action="store_true", help="no render: a GIL-free wait of --tail µs instead")
    ap.add_argument("--tail", type=float, default=300.0)
    ap.add_argument("--ways", default="serial,spin", help="settings, comma-separated: serial (the render thread "
                    "sleeps at once), spin (it watches first), free, pinned (thread placement, above); the first is the "
                    "reference of the ratios")
    ap.add_argument("--spin", type=int, default=200, help="µs the spin way's render thread watches before it sleeps")
    ap.add_argument("--json")
    args = ap.parse_args()

    import torch

    from gltensor.bench import mujoco as bm
    from gltensor.bench.measure import alternate_blocks
    device = torch.device("cuda" if torch.cuda.is_available() and args.backend != "cpu" else "cpu")

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()
    import gc

    import gltensor
    ctx = gltensor.Context.headless()

    def collect():
        ctx.make_current()
        gc.collect()
    import datetime
    import socket
    out = {"tool": "mujoco_step_ab", "argv": sys.argv[1:], "device": str(device), "host": socket.gethostname(),
           "date": datetime.datetime.now().isoformat(timespec="seconds"),
           "gpu": torch.cuda.get_device_name() if device.type == "cuda" else None, "cores": os.cpu_count(),
           "results": []}
    ways = args.ways.split(",")
    unknown = set(ways) - {"serial", "spin", "free", "pinned"}
    if unknown or len(ways) < 1:
        ap.error(f"--ways: unknown {sorted(unknown)}")
    if {"free", "pinned"} & set(ways) and {"serial", "spin"} & set(ways):
        ap.error("--ways: compare the spin (serial, spin) or the placement (free, pinned), not both in one run")
    print("N     threads  " + "  ".join(f"{w:>14} µs" for w in ways) + "   pixels µs   " +
          "  ".join(f"{w}/{ways[0]}" for w in ways[1:]) + "   " + "  ".join(f"{w}/pixels" for w in ways), flush=True)
    for n in [int(x) for x in args.envs.split(",")]:
        cargs = SimpleNamespace(size=args.size, paths=["batch", "pixels"], sync_max=16, async_max=64,
                                backend=args.backend, threads=0)
        case = bm.GymCase(cargs, torch, device, args.task, "light", n, lambda m: None, collect)
        try:
            case.check()  # the images equal SyncVectorEnv's; the measured choice of path settles
            venv = case.envs["batch"]
            runner = getattr(venv._batched, "_runner", None)
            stepper = getattr(runner, "_stepper", None)
            if venv.physics_path != "batched" or stepper is None:
                print(f"{n}: not the C threads' batched path ({venv.physics_path_reason})", flush=True)
                continue
            spin0 = stepper.spin_us  # the default for this batch's threads (render_spin_us)
            if args.fake:
                fake_render(venv, args.tail * 1e-6)
            batch = case.step_fn("batch")

            placement = Placement() if {"free", "pinned"} & set(ways) else None
            if placement is not None:
                out["placement"] = {"render_cpu": placement.render_cpu, "others": sorted(placement.others),
                                    "all": sorted(placement.all)}

            def side(way, batch=batch, stepper=stepper):
                def step(k):
                    if placement is not None:
                        placement.set(way)
                    else:
                        stepper.spin_us = args.spin if way == "spin" else 0
                    batch(k)
                return step

            def floor_side(fn):
                def step(k):
                    if placement is not None:
                        placement.set("free")
                    fn(k)
                return step
            sides = [side(w) for w in ways] + ([] if args.fake else [floor_side(case.step_fn("pixels"))])
            for fn in sides:
                for k in range(args.settle):
                    fn(k)
            sync()
            times = alternate_blocks(sides, args.turns, args.block, sync)
            stepper.spin_us = spin0
            if placement is not None:
                placement.set("free")
            pixels = times[len(ways)] if len(times) > len(ways) else None
            row = {"n": n, "threads": venv.threads, "physics_path": venv.physics_path, "spin_us": args.spin,
                   "default_spin_us": spin0, "pixels_us": pixels, "ways": {}}
            for w, t in zip(ways, times):
                row["ways"][w] = {"us": t, "over_first_paired": median([b / a for a, b in zip(times[0], t)]),
                                  "over_pixels_paired": median([a / c for a, c in zip(t, pixels)]) if pixels else None}
            out["results"].append(row)
            print("%-5d %-8d " % (n, venv.threads) + "  ".join("%17.0f" % median(t) for t in times[:len(ways)]) +
                  "   %9s   " % ("%.0f" % median(pixels) if pixels else "-") +
                  "  ".join("%.3f" % row["ways"][w]["over_first_paired"] for w in ways[1:]) + "   " +
                  "  ".join("%.3f" % row["ways"][w]["over_pixels_paired"] if pixels else "-" for w in ways),
                  flush=True)
        finally:
            case.close()
            case = None
            collect()
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
