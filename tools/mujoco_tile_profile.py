"""Where the time of one BatchRenderer tile goes (exact tiling against viewport tiling), and what the batched
physics costs per thread count. A probe for docs/mujoco.md's "per-tile floor" figures; run on the GPU machine:

    MUJOCO_GL=egl python tools/mujoco_tile_profile.py --envs 64,256 --json out.json

Per N, µs per tile (median of --rounds rounds of --steps renders of all N tiles), each with a glFinish at the end
of every render so that the GPU's work counts:
  update        mjv_updateScene alone (CPU)
  viewport      update + mjr_render into N viewports of one buffer (tiling="viewport")
  exact         a resolve blit per env (BatchRenderer._sample_copy = False): update + mjr_render at (0, 0) + the resolve blit into the tile
  exact-noblit  update + mjr_render at (0, 0), no blit (nothing kept: the floor of the draws alone)
  blit          the N resolve blits alone
  blit-group    the N resolve blits in one call, the draw framebuffer bound once (_copy_tiles)
  blit-ss       N single-sample blits in one call (the sheet's own tile (0, 0) to the others): what the MSAA
                resolve adds
  exact-groupK  exact tiling, K MjrContexts: K envs drawn (env j of a group into context j's buffer), then their K
                resolves in one call; tiles compared with `exact`'s, every pixel
  exact-copy    exact tiling as BatchRenderer does it where glCopyImageSubData exists: update + mjr_render at
                (0, 0) + the env's samples copied into its tile of a multisampled sheet, resolved once after the
                last env (copy: the N copies alone; copy-resolve: that one resolve); tiles compared with `exact`'s
  exact-rrK     exact tiling with K MjrContexts drawn in turn (env k into context k mod K's offscreen buffer), so
                that one env's blit and the next env's draw touch different buffers; its tiles are compared with
                `exact`'s, every pixel
  *-submit      the same loops' CPU time before the glFinish
Physics: µs per step of N HalfCheetah envs' mj_step x frame_skip + mj_rnePostConstraint in T threads (the batched
path's step_env), and mujoco.rollout with T threads.
"""
import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--envs", default="64,256")
    ap.add_argument("--size", type=int, default=84)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--task", default="HalfCheetah-v5")
    ap.add_argument("--threads", default="1,2,4,8,16")
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true", help="no K-context variants and no physics")
    args = ap.parse_args()
    import gymnasium
    import mujoco
    from OpenGL import GL

    from gltensor.bench.mujoco import apply_visuals
    from gltensor.mujoco import BatchRenderer
    from gltensor.mujoco.batch import _ContextKept
    from gltensor.mujoco.vector import _chunks
    import datetime

    import torch

    import gltensor
    from gltensor.bench.report import machine_info
    out = {"task": args.task, "size": args.size, "tiles": {}, "physics": {},
           "date": datetime.datetime.now().isoformat(timespec="seconds"),
           "machine": machine_info(gltensor.Context.headless(), torch)}
    s = args.size
    for n in [int(x) for x in args.envs.split(",")]:
        envs = [gymnasium.make(args.task).unwrapped for _ in range(n)]
        for k, e in enumerate(envs):
            apply_visuals(e.model, "light")
            e.reset(seed=k)
        models, datas = [e.model for e in envs], [e.data for e in envs]
        BatchRenderer._sample_copy = False  # `exact`: a resolve blit per env
        r = BatchRenderer(models, n, s, s, camera=-1, render_flags={"shadow": False, "reflection": False})
        BatchRenderer._sample_copy = True  # `exact-copy`: samples copied per env, one resolve (the default)
        rc = BatchRenderer(models, n, s, s, camera=-1, render_flags={"shadow": False, "reflection": False})
        rv = BatchRenderer(models, n, s, s, camera=-1, tiling="viewport",
                           render_flags={"shadow": False, "reflection": False})
        opt, cat = r._option, mujoco.mjtCatBit.mjCAT_ALL.value
        cams = r._resolve_cameras(None, "cameras")
        res = {}

        def timed(name, body, renderer):
            subs, tots = [], []
            with _ContextKept(renderer.gl_context):
                mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN.value, renderer.mjr_context)
                body()
                GL.glFinish()
                for _ in range(args.rounds):
                    sub = tot = 0.0
                    for _ in range(args.steps):
                        t0 = time.perf_counter()
                        body()
                        t1 = time.perf_counter()
                        GL.glFinish()
                        t2 = time.perf_counter()
                        sub += t1 - t0
                        tot += t2 - t0
                    subs.append(sub / args.steps / n * 1e6)
                    tots.append(tot / args.steps / n * 1e6)
            res[name] = statistics.median(tots)
            res[name + "-submit"] = statistics.median(subs)

        def update():
            for k in range(n):
                mujoco.mjv_updateScene(models[k], datas[k], opt, None, cams[k], cat, r._scene_of[k])

        def viewport():
            for k in range(n):
                mujoco.mjv_updateScene(models[k], datas[k], opt, None, cams[k], cat, rv._scene_of[k])
                mujoco.mjr_render(rv._rects[k], rv._scene_of[k], rv.mjr_context)

        def exact():
            r._render_current(datas, None, None)

        def noblit():
            for k in range(n):
                mujoco.mjv_updateScene(models[k], datas[k], opt, None, cams[k], cat, r._scene_of[k])
                mujoco.mjr_render(r._origin, r._scene_of[k], r.mjr_context)

        def blit():
            for k in range(n):
                r._sheet.resolve_into(r.mjr_context.offFBO, s, s, r._rects[k].left, r._rects[k].bottom)

        timed("update", update, r)
        timed("viewport", viewport, rv)
        timed("exact", exact, r)
        want = r.read().cpu().numpy().copy()
        timed("exact-copy", lambda: rc._render_current(datas, None, None), rc)
        res["exact-copy-equal"] = bool(np.array_equal(rc.read().cpu().numpy(), want))
        res["exact-copy-samples-copied"] = bool(rc._sheet.samples_copied)
        src = rc.mjr_context.offColor
        timed("copy", lambda: [rc._sheet.copy_into(src, s, s, x.left, x.bottom) for x in rc._rects], rc)
        timed("copy-resolve", lambda: rc._sheet.finish(rc.mjr_context.offFBO), rc)
        timed("exact-noblit", noblit, r)
        timed("blit", blit, r)
        from gltensor import _gltensor as core
        xs = [rc.left for rc in r._rects]
        ys = [rc.bottom for rc in r._rects]
        off = r.mjr_context.offFBO
        timed("blit-group", lambda: core._copy_tiles([off] * n, r._sheet.fbo, s, s, xs, ys, False, off), r)
        others = [(x, y) for x, y in zip(xs, ys) if (x, y) != (0, 0)]
        timed("blit-ss", lambda: core._copy_tiles([r._sheet.fbo] * len(others), r._sheet.fbo, s, s,
                                                  [x for x, _ in others], [y for _, y in others], False, off), r)
        for K in () if args.quick else (4, 16):
            with _ContextKept(r.gl_context):
                cons = [r.mjr_context] + [mujoco.MjrContext(r._models[0], mujoco.mjtFontScale.mjFONTSCALE_150.value)
                                          for _ in range(K - 1)]
            groups = [list(range(g, min(n, g + K))) for g in range(0, n, K)]

            def grouped(cons=cons, groups=groups):
                fb = mujoco.mjtFramebuffer.mjFB_OFFSCREEN.value
                for idx in groups:
                    for j, k in enumerate(idx):
                        mujoco.mjr_setBuffer(fb, cons[j])
                        mujoco.mjv_updateScene(models[k], datas[k], opt, None, cams[k], cat, r._scene_of[k])
                        mujoco.mjr_render(r._origin, r._scene_of[k], cons[j])
                    core._copy_tiles([cons[j].offFBO for j in range(len(idx))], r._sheet.fbo, s, s,
                                     [xs[k] for k in idx], [ys[k] for k in idx], False, cons[0].offFBO)
                mujoco.mjr_setBuffer(fb, cons[0])
                r._rendered = True
            timed("exact-group%d" % K, grouped, r)
            res["exact-group%d-equal" % K] = bool(np.array_equal(r.read().cpu().numpy(), want))
            with _ContextKept(r.gl_context):
                for c in cons[1:]:
                    c.free()
                mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN.value, r.mjr_context)
        for K in () if args.quick else (2, 4):
            with _ContextKept(r.gl_context):
                ctx_model = r._models[0]
                extra = [r.mjr_context] + [mujoco.MjrContext(ctx_model, mujoco.mjtFontScale.mjFONTSCALE_150.value)
                                           for _ in range(K - 1)]
                for c in extra[1:]:
                    mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN.value, c)

            def rr(extra=extra, K=K):
                for k in range(n):
                    c = extra[k % K]
                    mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN.value, c)
                    mujoco.mjv_updateScene(models[k], datas[k], opt, None, cams[k], cat, r._scene_of[k])
                    mujoco.mjr_render(r._origin, r._scene_of[k], c)
                    r._sheet.resolve_into(c.offFBO, s, s, r._rects[k].left, r._rects[k].bottom)
                r._rendered = True
            timed("exact-rr%d" % K, rr, r)
            got = r.read().cpu().numpy()
            res["exact-rr%d-equal" % K] = bool(np.array_equal(got, want))
            with _ContextKept(r.gl_context):
                for c in extra[1:]:
                    c.free()
                mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN.value, r.mjr_context)
        out["tiles"][n] = res
        print("N=%d µs per tile: %s" % (n, ", ".join("%s %s" % (k, ("%.1f" % v) if isinstance(v, float) else v)
                                                      for k, v in res.items())), flush=True)
        r.close()
        rv.close()
        rc.close()
        if args.quick:
            continue

        # physics: the batched path's per-env step in T threads, and mujoco.rollout with T threads
        from concurrent.futures import ThreadPoolExecutor
        from mujoco import rollout
        skip = envs[0].frame_skip
        act = np.random.default_rng(0).uniform(-1, 1, (n, models[0].nu))
        phys = {}
        for T in [int(x) for x in args.threads.split(",")]:
            chunks = _chunks(n, T)
            ex = ThreadPoolExecutor(T)

            def chunk(c):
                for i in c:
                    datas[i].ctrl[:] = act[i]
                    mujoco.mj_step(models[i], datas[i], nstep=skip)
                    mujoco.mj_rnePostConstraint(models[i], datas[i])

            def step():
                list(ex.map(chunk, chunks))
            step()
            t0 = time.perf_counter()
            for _ in range(args.steps):
                step()
            phys["threads-%d" % T] = (time.perf_counter() - t0) / args.steps * 1e6
            ex.shutdown()
            spec = mujoco.mjtState.mjSTATE_FULLPHYSICS.value
            size = mujoco.mj_stateSize(models[0], spec)
            st = np.empty((n, size))
            for i in range(n):
                mujoco.mj_getState(models[i], datas[i], st[i], spec)
            ctrl = np.repeat(act[:, None, :], skip, axis=1)
            rdatas = [mujoco.MjData(models[0]) for _ in range(T)]
            with rollout.Rollout(nthread=T) as ro:
                ro.rollout(models, rdatas, st, ctrl, nstep=skip)
                t0 = time.perf_counter()
                for _ in range(args.steps):
                    ro.rollout(models, rdatas, st, ctrl, nstep=skip)
                phys["rollout-%d" % T] = (time.perf_counter() - t0) / args.steps * 1e6
        out["physics"][n] = phys
        print("N=%d physics µs per step: %s" % (n, ", ".join("%s %.0f" % kv for kv in phys.items())), flush=True)
        for e in envs:
            e.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
