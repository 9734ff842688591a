"""Where a MujocoVectorEnv step spends its time (issue 33 diagnostics; not a benchmark: bench mujoco is that).

    MUJOCO_GL=egl python3 tools/mujoco_step_probe.py [--envs 4,16,64] [--steps 150] [--json PATH]

For each N (HalfCheetah-v5, 84x84, light visuals as `bench mujoco` sets them): µs per step of the whole step
(MujocoVectorEnv.step + the Nature-CNN forward, synchronised), then of its parts timed alone: the N env.step()
calls, the info merge, the render's CPU submission, glFinish after it, the read, the forward; per tile:
mjv_updateScene, mjr_render, the tile resolve; then cProfile's top functions of the whole step.
"""
import argparse
import cProfile
import io
import json
import os
import pstats

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from gltensor.bench.measure import time_calls  # noqa: E402
from gltensor.bench.mujoco import apply_visuals, make_gym, nature_cnn  # noqa: E402
from gltensor.mujoco import MujocoVectorEnv  # noqa: E402


def per_step(fn, steps, sync):
    """µs per call of fn() after one warm-up call (the bench's timer)."""
    fn()
    return time_calls(fn, steps, sync)


def probe(n, steps, threads, device):
    import functools

    import mujoco
    from OpenGL import GL
    venv = MujocoVectorEnv([functools.partial(make_gym, "HalfCheetah-v5", 84, 84, "light", None)] * n,
                           height=84, width=84, threads=threads)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    policy = nature_cnn(torch, 84, device)
    venv.reset(seed=0)
    rng = np.random.default_rng(0)
    acts = rng.uniform(-1, 1, (steps + 2, n, 6)).astype(np.float32)
    k = [0]

    def forward(x):
        with torch.no_grad():
            policy(x.permute(0, 3, 1, 2).float().div_(255)).sum()

    def whole():
        k[0] += 1
        forward(torch.as_tensor(venv.step(acts[k[0] % len(acts)])[0], device=device))

    r = venv.renderer
    datas = [u.data for u in venv.unwrapped_envs]
    cams = venv._cameras()
    envs = venv.envs
    out = [e.step(a) for e, a in zip(envs, acts[0])]

    def merge():
        infos = {}
        for i in range(n):
            infos = venv._add_info(infos, out[i][4], i)

    def finish():
        r.gl_context.make_current()
        GL.glFinish()

    res = {"n": n, "threads": venv.threads}
    res["whole_step"] = per_step(whole, steps, sync)
    venv._in_caller = True  # the serial path: every env stepped (in this thread), then the render
    res["whole_step_serial"] = per_step(whole, steps, sync)
    venv._in_caller = False
    res["physics_env_steps"] = per_step(lambda: [e.step(a) for e, a in zip(envs, acts[1])], steps, sync)
    res["info_merge"] = per_step(merge, steps, sync)
    res["render_submit"] = per_step(lambda: r.render(datas, cameras=cams), steps, lambda: None)
    finish()
    res["render_then_finish"] = per_step(lambda: (r.render(datas, cameras=cams), finish()), steps, sync)
    res["read_after_render"] = per_step(lambda: (r.render(datas, cameras=cams), finish(), r.read().float().mean()),
                                        steps, sync) - res["render_then_finish"]
    x = r.read()
    res["forward"] = per_step(lambda: forward(x), steps, sync)
    # per tile, in the renderer's own context
    r.gl_context.make_current()
    scene, con, opt = r.scenes[0], r.mjr_context, mujoco.MjvOption()
    m = venv.unwrapped_envs[0].model
    d = datas[0]
    cat = mujoco.mjtCatBit.mjCAT_ALL.value
    cam = cams[0]
    res["tile_updateScene"] = per_step(lambda: mujoco.mjv_updateScene(m, d, opt, None, cam, cat, scene), steps * 4,
                                       lambda: None)
    rect = mujoco.MjrRect(0, 0, 84, 84)
    mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN.value, con)
    res["tile_mjr_render"] = per_step(lambda: mujoco.mjr_render(rect, scene, con), steps * 4, lambda: None)
    GL.glFinish()
    sheet = r._sheet
    if sheet is not None:
        res["tile_resolve"] = per_step(lambda: sheet.resolve_into(con.offFBO, 84, 84, 0, 0), steps * 4, lambda: None)
    GL.glFinish()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(steps):
        whole()
    sync()
    prof.disable()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(22)
    res["profile"] = s.getvalue()
    venv.close()
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--envs", default="4,16,64")
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--threads", default="1")
    ap.add_argument("--json")
    a = ap.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    rows = []
    for n in [int(v) for v in a.envs.split(",")]:
        for t in [int(v) for v in a.threads.split(",")]:
            res = probe(n, a.steps, t, device)
            rows.append(res)
            print(f"\nN={n} threads={t}: " + ", ".join(f"{k} {v:.0f}" for k, v in res.items()
                                                     if isinstance(v, float)) + "  (µs per step / per tile call)")
            print(res["profile"][:4000])
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
