"""Repeats `gltensor.bench mujoco`'s check (the batch's reset and first step against SyncVectorEnv of stock pixel
envs) many times, each with freshly built envs, and on a mismatch tells which side is off.

Why: the check failed twice on the GPU machine (N = 4, the first step: every env's image differed, max 255,
rewards equal) and never on the development machine. Per repetition this records, for the batch (physics="auto")
and the per-env path:
  - the first step's image against the stock env's (the check);
  - the same tensor copied again after torch.cuda.synchronize() (differs from the first copy: a stream race);
  - the renderer's tiles read again from GL (right there but wrong in the step's tensor: the read, not the draw);
  - the image against the batch's own reset image (equal: a stale frame).
A failing repetition's images go to --dump as .npz.

    MUJOCO_GL=egl python tools/mujoco_check_repeat.py --reps 20 --envs 4 --async-too --dump /tmp/out
"""
import argparse
import functools
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--envs", type=int, default=4)
    ap.add_argument("--task", default="HalfCheetah-v5")
    ap.add_argument("--async-too", action="store_true", help="build an AsyncVectorEnv beside, as the bench does")
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--collect", action="store_true", help="gc.collect() after each repetition's close, with no GL "
                    "context current (the stock viewers' close released theirs)")
    ap.add_argument("--dump", help="folder for the failing repetitions' images (.npz) and summary.json")
    args = ap.parse_args()

    import torch
    from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv

    from gltensor.bench.mujoco import make_gym, stock_context_current
    from gltensor.mujoco import MujocoVectorEnv

    n, h = args.envs, 84
    if torch.cuda.is_available():  # as the bench: torch's CUDA context and a CNN on the GPU before any env
        from gltensor.bench.mujoco import nature_cnn
        with torch.no_grad():
            nature_cnn(torch, h, "cuda")(torch.zeros(n, 3, h, h, device="cuda")).sum().item()
    stock = functools.partial(make_gym, args.task, h, h, "light", "render")
    raw = functools.partial(make_gym, args.task, h, h, "light", None)
    rows, first_fail = [], None
    for rep in range(args.reps):
        t0 = time.perf_counter()
        ref = SyncVectorEnv([stock] * n)
        extra = AsyncVectorEnv([stock] * n, shared_memory=True, context="spawn") if args.async_too else None
        cams = [e.unwrapped.mujoco_renderer.viewer.cam for e in ref.envs]
        envs = {"batch": MujocoVectorEnv([raw] * n, height=h, width=h, camera=cams, backend=args.backend),
                "batch-per-env": MujocoVectorEnv([raw] * n, height=h, width=h, camera=cams, backend=args.backend,
                                                 physics="per-env")}
        rng = np.random.default_rng(rep)
        a = rng.uniform(-1, 1, (n,) + ref.single_action_space.shape).astype(np.float32)
        stock_context_current(ref)
        r0, _ = ref.reset(seed=11)
        row = {"rep": rep}
        resets = {}
        for key, env in envs.items():
            g0 = env.reset(seed=11)[0].cpu().numpy()
            resets[key] = g0
            row[key + " reset equal"] = bool(np.array_equal(r0, g0))
        stock_context_current(ref)
        r1 = ref.step(a)[0]
        row["stock step == stock reset"] = bool(np.array_equal(r1, r0))
        dumped = {"stock_reset": r0, "stock_step": r1}
        for key, env in envs.items():
            x = env.step(a)[0]
            img = x.cpu().numpy()
            if x.is_cuda:
                torch.cuda.synchronize()
            img2 = x.cpu().numpy()
            again = env.renderer.read().cpu().numpy()
            row[key] = {
                "equal": bool(np.array_equal(img, r1)),
                "envs differing": [i for i in range(n) if not np.array_equal(img[i], r1[i])],
                "max diff": int(np.abs(img.astype(int) - r1).max()),
                "copy after sync equal": bool(np.array_equal(img2, r1)),
                "copy after sync == first copy": bool(np.array_equal(img2, img)),
                "GL re-read equal": bool(np.array_equal(again, r1)),
                "== own reset (stale)": bool(np.array_equal(img, resets[key])),
                "== stock reset": bool(np.array_equal(img, r0)),
                "trial path": getattr(env, "physics_path", None),
            }
            dumped[key + "_step"], dumped[key + "_after_sync"], dumped[key + "_reread"] = img, img2, again
        row["seconds"] = round(time.perf_counter() - t0, 2)
        bad = not (row["batch"]["equal"] and row["batch-per-env"]["equal"])
        print(json.dumps(row), flush=True)
        rows.append(row)
        if bad and args.dump and first_fail is None:
            first_fail = rep
            os.makedirs(args.dump, exist_ok=True)
            np.savez_compressed(os.path.join(args.dump, f"check_fail_rep{rep}.npz"), **dumped)
        for env in envs.values():
            env.close()
        if extra is not None:
            extra.close()
        ref.close()
        if args.collect:
            import gc
            gc.collect()
    fails = [r["rep"] for r in rows if not (r["batch"]["equal"] and r["batch-per-env"]["equal"])]
    print(f"{len(fails)} of {len(rows)} repetitions differ: {fails}")
    if args.dump:
        os.makedirs(args.dump, exist_ok=True)
        with open(os.path.join(args.dump, "check_repeat.json"), "w") as f:
            json.dump({"rows": rows, "fails": fails}, f, indent=1)


if __name__ == "__main__":
    main()
