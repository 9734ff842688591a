"""Where a step of MujocoVectorEnv's batched path spends its time, per physics thread count (diagnostics, not a
benchmark: `python -m gltensor.bench mujoco` is that).

    MUJOCO_GL=egl python3 tools/mujoco_batched_phases.py [--envs 16,256] [--threads 2,4,8,16] [--steps 40]
        [--warmup 100] [--rounds 3] [--breakdown] [--why] [--json P]

For each N and thread count (HalfCheetah-v5, 84x84, light visuals as the bench sets them): µs per step of
MujocoVectorEnv.step + the Nature-CNN forward (synchronised), and, summed inside those steps, the task's
`before` (the state gathered before the physics), `start`, the render loop (physics started beside it, each env
drawn as it finishes; the read included) and, within it, the time its thread waited for the next env's physics,
the wait for the physics threads after it, and `finish` (observations, rewards, terminations of the batch). Then
the same step drawn after all of the physics (the trial's "stepped then drawn" way). Beside them, in the same
run, the floors: render + read of the same states with no physics, the same + forward (the bench's `pixels`), the
pixel floor on states that other threads have just rewritten (mj_forward of each env; that alone as
`forward_alone`), and the physics alone (start + wait). Every way is called --warmup times first, then the ways
take turns in --rounds rounds of --steps calls; each figure is the median of its rounds (`rounds_us` has them all).

--why asks why the render runs slower inside the step than in the floor, with three more ways of the same pixel
floor (the same states drawn again): after its thread slept 200 µs (`sleep_alone` apart), beside the physics of N
other envs that are not drawn (`shadow_physics_alone` apart), and after this thread itself ran mj_forward on the
drawn envs (`forward_here_alone` apart). With --breakdown the render's insides are timed in every way that draws.
"""
import argparse
import datetime
import functools
import json
import os
import platform
import time
from statistics import median

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from gltensor.bench.measure import time_calls  # noqa: E402
from gltensor.bench.mujoco import make_gym, nature_cnn  # noqa: E402
from gltensor.mujoco import MujocoVectorEnv  # noqa: E402


class Timed:
    """Wraps obj.name so that its calls' wall time is summed (µs) in self.total; restore() unwraps it."""

    def __init__(self, obj, name):
        self.total, self.calls = 0.0, 0
        inner = getattr(obj, name)
        self._wrapped = (obj, name, inner)

        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.total += (time.perf_counter() - t0) * 1e6
                self.calls += 1
        setattr(obj, name, wrapper)

    def reset(self):
        self.total, self.calls = 0.0, 0

    def restore(self):
        """Puts the wrapped callable back. The render's timers wrap module functions (mujoco's, the extension's,
        PyOpenGL's), which the next probe of the same process would otherwise wrap a second time."""
        obj, name, inner = self._wrapped
        setattr(obj, name, inner)


class Sum:
    """A total (µs) fed by hand, reset as Timed's."""

    def __init__(self):
        self.total = 0.0

    def reset(self):
        self.total = 0.0


def inner_timers(venv):
    """--breakdown: timers inside BatchRenderer.render_and_read (the caller's context saved and put back, our
    context made current, the framebuffer check, mjr_setBuffer, per tile mjv_updateScene / mjr_render / the
    sample copy, the one resolve, the read), summed per call as Timed does. Each wrapper adds about a
    microsecond per call to every way alike."""
    from gltensor.mujoco import batch as batch_module

    r = venv.renderer
    gl = batch_module._gl()
    timers = {"save_ctx": Timed(batch_module._core, "_save_gl_context"),
              "restore_ctx": Timed(batch_module._core, "_restore_or_release_gl_context"),
              "make_current": Timed(r._glc, "make_current"), "is_fbo": Timed(gl, "glIsFramebuffer"),
              "set_buffer": Timed(r._mj, "mjr_setBuffer"), "update_scene": Timed(r._mj, "mjv_updateScene"),
              "mjr_render": Timed(r._mj, "mjr_render"), "read": Timed(r, "_read_current")}
    if r._sheet is not None:
        timers["copy_into"] = Timed(r._sheet, "copy_into")
        timers["sheet_finish"] = Timed(r._sheet, "finish")
    return timers


SLEEP_S = 200e-6  # --why: how long the render thread sleeps before a pixels_after_sleep draw


def probe(n, threads, steps, device, warmup=100, rounds=3, breakdown=False, why=False):  # physics="batched": the batched path itself, at `threads` threads
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    venv = MujocoVectorEnv([functools.partial(make_gym, "HalfCheetah-v5", 84, 84, "light", None)] * n,
                           height=84, width=84, threads=threads, physics="batched")
    inner = {}
    try:
        net = nature_cnn(torch, 84, device)

        def cnn(x):  # as the bench's forward
            with torch.no_grad():
                net(torch.as_tensor(x, device=device).permute(0, 3, 1, 2).float().div_(255)).sum()
        venv.reset(seed=0)
        acts = [np.random.default_rng(k).uniform(-1, 1, (n, venv.single_action_space.shape[0])) for k in range(8)]
        ph = venv._batched
        phases = {"before": Timed(ph, "before"), "start": Timed(ph, "start"), "render": Timed(venv, "_render"),
                  "wait": Timed(ph, "wait"), "finish": Timed(ph, "finish")}
        # Inside the render: the time its thread waited for the next env's physics (the rest of it is drawing and
        # the read): tells a render slowed by the physics threads beside it from one starved by them.
        blocked = Sum()
        finished = ph.finished

        def timed_finished():
            it = finished()
            while True:
                t0 = time.perf_counter()
                try:
                    i = next(it)
                except StopIteration:
                    blocked.total += (time.perf_counter() - t0) * 1e6
                    return
                blocked.total += (time.perf_counter() - t0) * 1e6
                yield i
        ph.finished = timed_finished
        phases["physics_wait_in_render"] = blocked
        if breakdown:
            inner = inner_timers(venv)
        k = iter(range(10 ** 9))
        datas = [u.data for u in venv.unwrapped_envs]
        r = venv.renderer
        everyone = np.ones(n, dtype=np.bool_)

        def step():
            obs = venv.step(acts[next(k) % len(acts)])[0]
            cnn(obs["pixels"] if isinstance(obs, dict) else obs)

        def step_then_drawn():  # the trial's "stepped then drawn" way: all physics first, then the render
            venv._overlap = False
            try:
                step()
            finally:
                venv._overlap = True

        def pixels():
            r.render(datas, cameras=venv._cameras())
            cnn(r.read())

        def render_read():
            r.render(datas, cameras=venv._cameras())
            r.read()

        def physics():
            ph.start(acts[0], everyone)
            ph.wait()

        # The pixel floor on states that other cores have just written (mj_forward of every env in `threads` Python
        # threads first, the GIL released inside; not overlapped with the render): the cost of drawing fresh states,
        # apart from any physics running beside the render.
        import mujoco
        from concurrent.futures import ThreadPoolExecutor
        models = [u.model for u in venv.unwrapped_envs]
        ex = ThreadPoolExecutor(threads)

        def refresh():
            list(ex.map(lambda i: mujoco.mj_forward(models[i], datas[i]), range(n)))

        def pixels_fresh():
            refresh()
            pixels()

        ways = {"step": step, "step_then_drawn": step_then_drawn, "pixels_floor": pixels,
                "render_read_floor": render_read, "physics_alone": physics, "forward_alone": refresh,
                "pixels_fresh_floor": pixels_fresh}
        shadow = None
        if why:
            # Why the render is slower inside the step than in the floor: the same pixel floor (the same states
            # drawn again) after its thread slept (as a thread that waits for the physics may), beside the physics
            # of N other envs that are not drawn (the cores the physics threads take, nothing of the drawn envs
            # rewritten), and after this thread itself rewrote the drawn envs' data (mj_forward here: no other
            # core wrote it, no sleep).
            shadow = MujocoVectorEnv([functools.partial(make_gym, "HalfCheetah-v5", 84, 84, "light", None)] * n,
                                     height=84, width=84, threads=threads, physics="batched")
            shadow.reset(seed=1)
            sph = shadow._batched

            def sleep_alone():
                time.sleep(SLEEP_S)

            def pixels_after_sleep():
                time.sleep(SLEEP_S)
                pixels()

            def shadow_physics_alone():
                sph.start(acts[1], everyone)
                sph.wait()

            def pixels_beside_physics():
                sph.start(acts[1], everyone)
                try:
                    pixels()
                finally:
                    sph.wait()

            def forward_here_alone():
                for i in range(n):
                    mujoco.mj_forward(models[i], datas[i])

            def pixels_fresh_here():
                forward_here_alone()
                pixels()
            ways.update({"sleep_alone": sleep_alone, "pixels_after_sleep": pixels_after_sleep,
                         "shadow_physics_alone": shadow_physics_alone, "pixels_beside_physics": pixels_beside_physics,
                         "forward_here_alone": forward_here_alone, "pixels_fresh_here": pixels_fresh_here})
        drawn = [w for w in ways if w == "step" or "pixels" in w or w == "render_read_floor"]
        try:
            # A fresh batch's first hundred-odd steps ran slower than its later ones on the GPU hosts (the bench's
            # first rounds, mujoco_samplecopy*_h200.json): every way warms up first, then the ways take turns in
            # rounds (in reverse order every other round, as the bench), and each reports its median round.
            for fn in ways.values():
                for _ in range(warmup):
                    fn()
            times = {name: [] for name in ways}
            phase_rounds = {name: [] for name in phases}
            # the render's insides, in the step and in the render+read floor (--breakdown)
            inner_rounds = {f"{way}.{name}": [] for way in drawn for name in inner}
            names = list(ways)
            for rnd in range(rounds):
                for name in (names if rnd % 2 == 0 else names[::-1]):
                    for p in list(phases.values()) + list(inner.values()):
                        p.reset()
                    times[name].append(time_calls(ways[name], steps, sync))
                    if name == "step":
                        for pname, p in phases.items():
                            phase_rounds[pname].append(p.total / steps)
                    if name in drawn:
                        for iname, p in inner.items():
                            inner_rounds[f"{name}.{iname}"].append(p.total / steps)
        finally:
            ex.shutdown()
            if shadow is not None:
                shadow.close()
        row = {"N": n, "threads": venv.threads, "warmup": warmup, "rounds": rounds}
        row.update({name + "_us": median(v) for name, v in times.items()})
        row.update({name + "_us": median(v) for name, v in phase_rounds.items()})
        if inner:
            row["breakdown_us"] = {name: median(v) for name, v in inner_rounds.items()}
        row["rounds_us"] = {name: v for name, v in times.items()}
        return row
    finally:
        for t in inner.values():
            t.restore()
        venv.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--envs", default="16,256")
    ap.add_argument("--threads", default="2,4,8,16")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=100, help="untimed calls of every way first")
    ap.add_argument("--rounds", type=int, default=3, help="rounds in which the ways take turns; medians reported")
    ap.add_argument("--breakdown", action="store_true",
                    help="also time the render's insides, in the step and in the render+read floor")
    ap.add_argument("--why", action="store_true",
                    help="also the pixel floor after a 200 µs sleep, beside the physics of N envs not drawn, and after "
                         "this thread rewrote the drawn envs' data (with --breakdown: the render's insides in each)")
    ap.add_argument("--json")
    args = ap.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    rows = []
    cols = ("N", "threads", "step_us", "start_us", "render_us", "physics_wait_in_render_us", "wait_us", "finish_us",
            "step_then_drawn_us", "render_read_floor_us", "pixels_floor_us", "pixels_fresh_floor_us", "forward_alone_us",
            "physics_alone_us")
    print("  ".join("%10s" % c.replace("_us", "")[:10] for c in cols), flush=True)
    for n in [int(x) for x in args.envs.split(",")]:
        for t in [int(x) for x in args.threads.split(",")]:
            row = probe(n, t, args.steps, device, args.warmup, args.rounds, args.breakdown, args.why)
            rows.append(row)
            print("  ".join("%10.0f" % row[c] for c in cols), flush=True)
            if args.why:
                print("    " + "  ".join(f"{k[:-3]} {row[k]:.0f}" for k in (
                    "sleep_alone_us", "pixels_after_sleep_us", "shadow_physics_alone_us", "pixels_beside_physics_us",
                    "forward_here_alone_us", "pixels_fresh_here_us")), flush=True)
            if args.breakdown:
                b = row["breakdown_us"]
                for way in sorted({k.split(".", 1)[0] for k in b}):
                    parts = {k.split(".", 1)[1]: v for k, v in b.items() if k.startswith(way + ".")}
                    print(f"    {way:18s} " + "  ".join(f"{k} {v:.0f}" for k, v in parts.items()), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"tool": "tools/mujoco_batched_phases.py", "host": platform.node(), "device": str(device),
                       "gpu": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
                       "date": datetime.date.today().isoformat(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
