#!/usr/bin/env python3
"""A/B of MujocoVectorEnv's finisher thread (the task's NumPy, BatchedPhysics.finish, run beside the render's tail)
against the serial finish, on the real render: one batch per N, its measured choice of path settled first (as
`python -m gltensor.bench mujoco` does), then blocks of steps in turns: the batch with the finisher, the same batch
without it, and its pixel floor (render, read, the same Nature-CNN forward; no physics). Each step is followed by
the forward, as in the bench and in training. Block ratios are paired (timed within seconds of each other).

    python tools/mujoco_finisher_ab.py --envs 4,16,64,256 --turns 16 --json out.json

--fake replaces the render with a GIL-free wait of --tail µs (CPU only: whether the thread hand-off costs more
than the overlap saves, without a GPU)."""
import argparse
import json
import os
import sys
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
    out = {"tool": "mujoco_finisher_ab", "argv": sys.argv[1:], "device": str(device),
           "gpu": torch.cuda.get_device_name() if device.type == "cuda" else None, "cores": os.cpu_count(),
           "results": []}
    print("N  threads  finisher µs  serial µs  pixels µs  serial/finisher (paired)  finisher/pixels  serial/pixels",
          flush=True)
    for n in [int(x) for x in args.envs.split(",")]:
        cargs = SimpleNamespace(size=args.size, paths=["batch", "pixels"], sync_max=16, async_max=64,
                                backend=args.backend, threads=0)
        case = bm.GymCase(cargs, torch, device, args.task, "light", n, lambda m: None, collect)
        try:
            case.check()  # the images equal SyncVectorEnv's; the measured choice of path settles
            venv = case.envs["batch"]
            fin = venv._finisher
            if fin is None:
                print(f"{n}: no finisher ({venv.physics_path}, {venv.physics_path_reason})", flush=True)
                continue
            if args.fake:
                fake_render(venv, args.tail * 1e-6)
            batch = case.step_fn("batch")

            def side(on, batch=batch, venv=venv, fin=fin):
                def step(k):
                    venv._finisher = fin if on else None
                    batch(k)
                return step
            sides = [side(True), side(False)] + ([] if args.fake else [case.step_fn("pixels")])
            for fn in sides:
                for k in range(args.settle):
                    fn(k)
            sync()
            times = alternate_blocks(sides, args.turns, args.block, sync)
            venv._finisher = fin
            f, s = times[0], times[1]
            p = times[2] if len(times) > 2 else None
            row = {"n": n, "threads": venv.threads, "physics_path": venv.physics_path,
                   "finisher_us": f, "serial_us": s, "pixels_us": p,
                   "serial_over_finisher_paired": median([b / a for a, b in zip(f, s)]),
                   "finisher_over_pixels_paired": median([a / c for a, c in zip(f, p)]) if p else None,
                   "serial_over_pixels_paired": median([b / c for b, c in zip(s, p)]) if p else None}
            out["results"].append(row)
            print("%-4d %-7d %-12.0f %-10.0f %-10s %-25.3f %-16s %s" % (
                n, venv.threads, median(f), median(s), "%.0f" % median(p) if p else "-",
                row["serial_over_finisher_paired"],
                "%.3f" % row["finisher_over_pixels_paired"] if p else "-",
                "%.3f" % row["serial_over_pixels_paired"] if p else "-"), flush=True)
        finally:
            case.close()
            case = None
            collect()
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
