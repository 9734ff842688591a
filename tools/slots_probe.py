"""Is every pixel of CUDA shared slots exact on this driver? Workers (spawn) write seeded patterns, the trainer
reads and reports, per slot, the fraction of bytes that differ. Run on the GPU machine:

    python3 tools/slots_probe.py [--count 3] [--size 97x61] [--steps 3]

The diagnostics GLTENSOR_SLOTS_COMPRESSION=none (allocate without compression) and GLTENSOR_SLOTS_WRITE=direct
(workers pack straight into the trainer's memory instead of into a buffer of their own that is then copied)
reproduce the two ways found wrong on an H100 with driver 580 (issue #21, docs/shared-slots.md): 1-26% and
99.6% of a slot's bytes wrong."""
import argparse
import multiprocessing as mp
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
import slot_workers  # noqa: E402

import gltensor  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=3)
    ap.add_argument("--size", default="97x61")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--backend", default="cuda")
    a = ap.parse_args()
    w, h = map(int, a.size.split("x"))
    slots = gltensor.SharedSlots(a.count, (w, h), backend=a.backend)
    ctx = mp.get_context("spawn")
    conns, procs = [], []
    for i in range(a.count):
        p, c = ctx.Pipe()
        pr = ctx.Process(target=slot_workers.run, args=(slots.handle(i), i, (w, h), c), daemon=True)
        pr.start()
        msg = p.recv()
        assert msg[0] == "ok", msg
        conns.append(p)
        procs.append(pr)
    knobs = {k: v for k, v in os.environ.items() if k.startswith("GLTENSOR_SLOTS")}
    worst = 0.0
    for step in range(a.steps):
        for p in conns:
            p.send(("step", step))
        for p in conns:
            msg = p.recv()
            assert msg[0] == "ok", msg
        import torch

        got = torch.from_dlpack(slots.read()).cpu().numpy() if a.backend == "cuda" else np.from_dlpack(slots.read())
        fr = [float(np.mean(got[i] != slot_workers.pattern(i, step, w, h))) for i in range(a.count)]
        worst = max(worst, max(fr))
        print(f"{knobs} step {step}: differing bytes per slot " + " ".join(f"{f:.3f}" for f in fr), flush=True)
    for p in conns:
        p.send(None)
    for pr in procs:
        pr.join(30)
    print(f"{knobs}: {'EXACT' if worst == 0 else 'WRONG'} (worst slot {worst:.3f})")


if __name__ == "__main__":
    main()
