"""Whether a BatchRenderer read's frame dies with its tensor, read by read, in the ways a caller consumes it: run it
plainly and under compute-sanitizer (tools/gpu_verify.sh memcheck-mujoco says why). Each line: how the frame was
read and consumed, and how many of three frames are still alive once their tensors were dropped and gc ran.

    MUJOCO_GL=egl python tools/mujoco_frame_lifetime.py [--backend cuda|cpu]
"""

import argparse
import gc
import os
import sys
import weakref

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

import torch  # noqa: E402

import gltensor.mujoco as gmj  # noqa: E402
from gltensor.mujoco.batch import _ContextKept  # noqa: E402
from test_mujoco_batch import LIGHT, _FramesSeen, make_datas, make_model  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="cuda", choices=("cuda", "cpu"))
    args = ap.parse_args()
    model, n = make_model(), 3
    datas = make_datas([model] * n, seed=2)
    r = gmj.BatchRenderer(model, n, 24, 32, camera="front", render_flags=LIGHT, backend=args.backend)
    r.render(datas)
    reader = r._reader

    def alive_after(take):
        refs = []
        for _ in range(3):
            frame, tensor = take()
            refs.append(weakref.ref(frame))
            del frame, tensor
        gc.collect()
        return sum(w() is not None for w in refs)

    def read_then(consume, inside):
        def take():
            with _ContextKept(r._glc, r._own_context):
                frame = reader.read()
                tensor = consume(frame) if inside else None
            return frame, tensor if inside else consume(frame)
        return take

    ways = {
        "read, torch.from_dlpack with the batch's GL context current": read_then(torch.from_dlpack, True),
        "read, torch.from_dlpack after the caller's context is back": read_then(torch.from_dlpack, False),
        "read, a capsule never consumed": read_then(lambda f: f.__dlpack__(), True),
    }
    for name, take in ways.items():
        print(f"{name:70s} alive {alive_after(take)} of 3")
    seen = r._reader = _FramesSeen(reader)  # render_and_read: the renderer's own read, after each render
    for _ in range(3):
        tensor = r.render_and_read(datas)
        del tensor
    print(f"{'render_and_read (render, then the renderer reads)':70s} alive {seen.alive()} of 3")
    r.close()


if __name__ == "__main__":
    main()
