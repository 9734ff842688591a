"""The trainer's side of a shared-slot step, alone (no workers: the trainer writes host images into its own slots
between reads, outside the timing): CPU wall time of SharedSlots.read() and of torch.from_dlpack on its frame,
against a Batch read of N textures of the same size in the same process. Run on the GPU machine:

    python3 tools/slots_read_cost.py [--count 16] [--size 512] [--reps 300]

Medians in µs. Where bench procs shows the slots' read phase at ~100 µs per step, this says whether that is the
read's own CPU cost (here too) or something the workers' GL work makes it wait for (here not)."""
import argparse
import os
import statistics
import time

import numpy as np

os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

import gltensor  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=16)
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--reps", type=int, default=300)
    a = ap.parse_args()
    import torch
    from OpenGL import GL

    ctx = gltensor.Context.headless()
    ctx.make_current()
    n, s = a.count, a.size
    slots = gltensor.SharedSlots(n, (s, s), backend="cuda")
    img = np.zeros((s, s, 4), np.uint8)
    texs = [int(t) for t in np.atleast_1d(GL.glGenTextures(n))]
    for t in texs:
        GL.glBindTexture(GL.GL_TEXTURE_2D, t)
        GL.glTexStorage2D(GL.GL_TEXTURE_2D, 1, GL.GL_RGBA8, s, s)
    batch = gltensor.Batch(texs)
    rows = {}

    def timed(name, fn):
        ts = []
        for _ in range(a.reps):
            t0 = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t0) * 1e6)
        rows[name] = statistics.median(ts)

    def slots_read_only():
        for i in range(n):
            slots.write_host(i, img)  # outside the timing below
    parts = {"slots.read()": [], "frame.__dlpack__(stream)": [], "torch.utils.dlpack capsule -> tensor": [],
             "torch.from_dlpack(frame), GPU idle": []}
    for _ in range(a.reps):
        slots_read_only()
        t0 = time.perf_counter()
        f = slots.read()
        t1 = time.perf_counter()
        stream = torch.cuda.current_stream().cuda_stream or 1
        cap = f.__dlpack__(stream=stream, max_version=(1, 0))
        t2 = time.perf_counter()
        x = torch.utils.dlpack.from_dlpack(cap)
        t3 = time.perf_counter()
        x.float().mean()
        del x, cap, f
        slots_read_only()
        f = slots.read()
        torch.cuda.synchronize()
        t4 = time.perf_counter()
        x = torch.from_dlpack(f)
        t5 = time.perf_counter()
        del x, f
        for k, v in zip(parts, (t1 - t0, t2 - t1, t3 - t2, t5 - t4)):
            parts[k].append(v * 1e6)
    rows.update({k: statistics.median(v) for k, v in parts.items()})
    # Which part of the hand-over is the stream wait: no wait at all (stream=-1, the DLPack spec's "no sync"), the
    # legacy default stream (what torch's default stream asks for), and a stream of torch's own.
    side = torch.cuda.Stream()

    def after_idle_read(fn):
        """Median µs of fn(frame) on a fresh read, timed once the GPU is idle."""
        ts = []
        for _ in range(a.reps):
            slots_read_only()
            f = slots.read()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            out = fn(f)
            ts.append((time.perf_counter() - t0) * 1e6)
            del out, f
        return statistics.median(ts)

    for label, stream in (("__dlpack__(stream=-1), no wait", -1), ("__dlpack__(stream=1), legacy default", 1),
                          ("__dlpack__(side stream)", side.cuda_stream)):
        rows[label] = after_idle_read(lambda f: f.__dlpack__(stream=stream, max_version=(1, 0)))
    with torch.cuda.stream(side):
        rows["torch.from_dlpack(frame), side stream"] = after_idle_read(torch.from_dlpack)
    timed("batch.read()", lambda: batch.read())
    timed("torch.from_dlpack(batch.read())", lambda: torch.from_dlpack(batch.read()))
    torch.cuda.synchronize()
    print(f"{n} x {s}x{s}, medians of {a.reps} (µs, CPU wall); read waits {slots.read_waits}")
    for k, v in rows.items():
        print(f"  {k:36} {v:8.1f}")
    batch.close()
    slots.close()
    ctx.close()


if __name__ == "__main__":
    main()
