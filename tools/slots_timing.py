"""Where does a shared-slot write's time go, per write mode and slot alignment? Run on the GPU machine:

    python3 tools/slots_timing.py [--count 4] [--size 512x512] [--reps 40] [--variants copy:4k,direct:2m]

For each variant (GLTENSOR_SLOTS_WRITE : GLTENSOR_SLOTS_ALIGN) N spawned workers (GL only) write seeded
patterns; the trainer checks every byte of every slot over three steps, then the workers time, all at once
in lockstep (as in a vector env's step: the trainer asks, every worker does one operation and replies), each of:
  write   SlotHandle.write(texture): pack (+ copy into the slot) + fence wait
  pack    glReadPixels into a buffer of the worker's own (immutable storage) + glFinish
  packcp  the same + a glCopyBufferSubData into a second buffer of its own + glFinish
and the trainer times its read of all slots (cuda events around slots.read() of fresh writes). Medians in µs.

Open question (H100, driver 580, 2026-11-25): every operation here, pack alone included, took ~400 ms per
worker (4 workers, 512x512, free-running and in lockstep alike), while the same operations inside
`python -m gltensor.bench procs` (where each worker also draws every step) take ~1-2 ms per step. What this
probe's workers do differently (no draw before the read, a texture filled by glTexSubImage2D) is not yet
known; until it is, its timings are not the slots' cost, only its exactness column is trustworthy.
"""
import argparse
import ctypes
import multiprocessing as mp
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
import slot_workers  # noqa: E402

import gltensor  # noqa: E402


def worker(handle, slot, size, conn):
    os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
    ctx = handle.headless_context()
    from OpenGL import GL

    w, h = size
    tex = int(GL.glGenTextures(1))
    GL.glBindTexture(GL.GL_TEXTURE_2D, tex)
    GL.glTexStorage2D(GL.GL_TEXTURE_2D, 1, GL.GL_RGBA8, w, h)
    fbo = int(GL.glGenFramebuffers(1))
    GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, fbo)
    GL.glFramebufferTexture2D(GL.GL_READ_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT0, GL.GL_TEXTURE_2D, tex, 0)
    GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, 0)
    bufs = [int(b) for b in GL.glGenBuffers(2)]
    for b in bufs:
        GL.glBindBuffer(GL.GL_COPY_WRITE_BUFFER, b)
        GL.glBufferStorage(GL.GL_COPY_WRITE_BUFFER, w * h * 4, None, 0)
    GL.glBindBuffer(GL.GL_COPY_WRITE_BUFFER, 0)

    def show(step):
        img = slot_workers.pattern(slot, step, w, h)
        GL.glPixelStorei(GL.GL_UNPACK_ALIGNMENT, 1)
        GL.glBindTexture(GL.GL_TEXTURE_2D, tex)
        GL.glTexSubImage2D(GL.GL_TEXTURE_2D, 0, 0, 0, w, h, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE,
                           np.ascontiguousarray(img[::-1]))
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)

    def pack(copy):
        GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, fbo)
        GL.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, bufs[0])
        GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 1)
        GL.glReadPixels(0, 0, w, h, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, ctypes.c_void_p(0))
        GL.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, 0)
        GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, 0)
        if copy:
            GL.glCopyNamedBufferSubData(bufs[0], bufs[1], 0, 0, w * h * 4)
        GL.glFinish()

    conn.send("ready")
    while True:
        msg = conn.recv()
        if msg is None:
            break
        if msg[0] == "step":
            show(msg[1])
            handle.write(tex)
            conn.send("ok")
        elif msg[0] == "op":
            # One operation, timed here. Workers run free between the trainer's requests in no real vector env:
            # four free-running workers made every operation take ~409 ms on an H100 (a first version of this
            # probe), so the trainer paces them as a step does.
            t0 = time.perf_counter()
            if msg[1] == "write":
                handle.write(tex)
            else:
                pack(msg[1] == "packcp")
            conn.send((time.perf_counter() - t0) * 1e6)
    handle.close()
    ctx.close()


def run_variant(count, size, reps, write, align, torch, backend):
    os.environ["GLTENSOR_SLOTS_WRITE"], os.environ["GLTENSOR_SLOTS_ALIGN"] = write, align
    slots = gltensor.SharedSlots(count, size, backend=backend)
    cuda = backend == "cuda"
    ctx = mp.get_context("spawn")
    conns, procs = [], []
    for i in range(count):
        a, b = ctx.Pipe()
        p = ctx.Process(target=worker, args=(slots.handle(i), i, size, b), daemon=True)
        p.start()
        conns.append(a)
        procs.append(p)
    for c in conns:
        assert c.recv() == "ready"
    w, h = size
    worst = 0.0
    for step in range(3):
        for c in conns:
            c.send(("step", step))
        for c in conns:
            assert c.recv() == "ok"
        got = torch.from_dlpack(slots.read()).cpu().numpy()
        for i in range(count):
            worst = max(worst, float(np.mean(got[i] != slot_workers.pattern(i, step, w, h))))
    out = {"exact": worst == 0, "worst_slot_wrong": worst}
    for mode in ("write", "pack", "packcp"):
        ts = []
        for _ in range(reps):
            for c in conns:
                c.send(("op", mode))
            ts += [c.recv() for c in conns]
        out[mode] = statistics.median(ts)
    reads = []
    for step in range(reps):
        for c in conns:
            c.send(("step", 3 + step))
        for c in conns:
            c.recv()
        t0 = time.perf_counter()
        if cuda:
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
        x = torch.from_dlpack(slots.read())
        if cuda:
            e1.record()
            e1.synchronize()
        reads.append(((time.perf_counter() - t0) * 1e6, e0.elapsed_time(e1) * 1e3 if cuda else 0.0))
        del x
    out["read_wall"] = statistics.median(r[0] for r in reads)
    out["read_gpu"] = statistics.median(r[1] for r in reads)
    for c in conns:
        c.send(None)
    for p in procs:
        p.join(30)
    slots.close()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=4)
    ap.add_argument("--size", default="512x512")
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--best-env", help="write here the exports of the fastest exact variant, where its write is at "
                                       "least 15%% faster than the first variant's (else leave the file empty)")
    ap.add_argument("--variants", default="copy:4k,copy:64k,copy:2m,direct:4k,direct:2m")
    a = ap.parse_args()
    import torch

    size = tuple(int(v) for v in a.size.split("x"))
    print(f"{a.count} workers x {a.size}, medians in µs (write/pack/packcp: one operation per worker, in lockstep)")
    print(f"{'variant':16} {'exact':6} {'worst':>6} {'write':>8} {'pack':>8} {'packcp':>8} {'read wall':>9} {'read gpu':>9}")
    results = {}
    for v in a.variants.split(","):
        write, align = v.split(":")
        try:
            r = run_variant(a.count, size, a.reps, write, align, torch, a.backend)
        except Exception as e:
            print(f"{v:16} failed: {type(e).__name__}: {e}")
            continue
        results[v] = r
        print(f"{v:16} {str(r['exact']):6} {r['worst_slot_wrong']:6.3f} {r['write']:8.0f} {r['pack']:8.0f} "
              f"{r['packcp']:8.0f} {r['read_wall']:9.0f} {r['read_gpu']:9.0f}", flush=True)
    if a.best_env:
        first = a.variants.split(",")[0]
        exact = {v: r for v, r in results.items() if r["exact"]}
        best = min(exact, key=lambda v: exact[v]["write"]) if exact else None
        with open(a.best_env, "w") as f:
            if best and first in results and exact[best]["write"] <= 0.85 * results[first]["write"]:
                write, align = best.split(":")
                f.write(f"export GLTENSOR_SLOTS_WRITE={write} GLTENSOR_SLOTS_ALIGN={align}\n")
                print(f"best exact variant: {best}")


if __name__ == "__main__":
    main()
