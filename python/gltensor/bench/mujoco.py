"""`python -m gltensor.bench mujoco`: pixel RL on MuJoCo, env-steps/s end to end, stock vector envs against
one process with one batch render.

    python -m gltensor.bench mujoco [--envs 1,4,16,64] [--visuals default,light] [--rounds 3] [--steps 100]
                                    [--size 84] [--paths ...] [--out DIR | --json PATH] [--quick]

One env step of every path = the physics of N environments (each env's own step(): reward, termination) + their
N images as one (N, H, W, 3) batch on the trainer's device (CUDA when torch has it) + a Nature-CNN forward on
it (x.permute(0, 3, 1, 2).float() / 255, no_grad). Figures are env-steps/s (N x steps / seconds), medians of
--rounds rounds, the paths of a case interleaved in each round (in reverse order every other round), each path
warmed up for at least --warmup steps and 0.25 s (the GPU's clocks come up again after CPU-only paths) and, once
before the rounds, for --settle steps (a new batch's first hundred-odd steps run slower than its later ones), one
synchronisation at the end of each timed loop (benchmarks/README.md's method). Ratios of two paths are also given
as the median of the rounds' own ratios (`*_paired` in the JSON).

Paths of a Gymnasium case (HalfCheetah-v5 by default, --task):
  async        Gymnasium's AsyncVectorEnv: N spawned processes, each AddRenderObservation(make(id,
               render_mode="rgb_array")) with its own mujoco.Renderer, pixels through its shared memory, then
               torch.from_numpy(obs).to(device)
  sync         SyncVectorEnv of the same envs in this process (--sync-max: largest N, default 16; above it the
               check of the batch compares its first --sync-max envs with a SyncVectorEnv of that many)
  slots        AsyncVectorEnv + gltensor.gymnasium.SlotSpace: each worker writes its renderer's image into its
               slot, the trainer reads every slot once per step (a torch tensor on the slots' device)
  batch        gltensor.mujoco.MujocoVectorEnv at its defaults: one process; for Gymnasium's own v5 tasks
               the batched task physics (every env's mj_step in a pool of threads, observations and rewards in
               NumPy over N), each env drawn as its physics finishes, one BatchRenderer read per step
  batch-per-env  the same with physics="per-env": each env's own step() in one thread beside the render (the
               path every other env takes; the previous default)
  physics      the floor of the batch's physics: the batched path's C threads and NumPy alone, no render
  rollout      the floor of MuJoCo's own threaded stepping: mujoco.rollout of the N states, frame_skip steps, as
               many threads as the batch uses, no observation, no render (it leaves no MjData a task or the
               renderer could read: a floor, not a path)
  render       the batch's render alone + one trivial op on the device (the floor of the handoff: render, then the
               graphics -> compute switch any handoff pays), no physics
  render+read  the batch's render + read + x.float().mean(), no physics: its ratio to `render` is the handoff's
               overhead (target <= 1.15 on the GPU)
  pixels       the batch's render + read + the same Nature-CNN forward as every path, no physics: the floor of
               the pixel side of a step (the CNN's CUDA work sits between two renders, as in every path)
Paths of a dm_control case (cheetah-run, --dm-task): dm-stock (N suite envs stepped in turn, physics.render per
env, numpy stack, .to(device)) and dm-batch (gltensor.mujoco.DmControlBatch).

After the rounds (--alternate, 12 turns by default), the batch, its pixel floor and the stock vector env (async, or
sync where async is not run) take turns in blocks of 10 steps: `vs_pixels_alternating` and `vs_stock_alternating`
are the medians of their time ratios turn by turn, each turn's blocks timed seconds apart.

Visuals: `default` is each model as shipped (MuJoCo's shadows, reflections, 4x MSAA); `light` sets every light's
castshadow and every material's reflectance to 0 in the model (the same edit on every path). The new paths'
images are checked against the stock ones before they are timed (whole images, same seeds; CheckFailed exits 1).
Output: a table, JSON and a PNG plot, by default under ~/.cache/gltensor/bench (the path is printed); --out DIR
or --json PATH put them elsewhere.
"""
import argparse
import datetime
import functools
import gc
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import gymnasium  # noqa: E402
import numpy as np  # noqa: E402

from . import MODES  # noqa: E402
from .measure import CheckFailed, alternate_blocks, median, paired_ratio, round_order  # noqa: E402
from .options import arg, parse_cameras, paths_and_visuals  # noqa: E402
from .report import machine_info, print_table, save_json  # noqa: E402

GYM_PATHS = ("async", "sync", "slots", "batch", "batch-per-env", "physics", "rollout", "render", "render+read",
             "pixels")
FLOORS = ("physics", "rollout", "render", "render+read", "pixels")
DM_PATHS = ("dm-stock", "dm-batch")


# -- environments (module level: AsyncVectorEnv pickles the makers under spawn) -----------------------------------
def apply_visuals(model, visuals):
    """`light`: no shadows (every light's castshadow 0), no reflections (every material's reflectance 0)."""
    if visuals == "light":
        model.light_castshadow[:] = 0
        model.mat_reflectance[:] = 0
    elif visuals != "default":
        raise ValueError("visuals must be default or light, not %r" % visuals)


def make_gym(env_id, height, width, visuals, wrap="render"):
    """A stock pixel env: make(render_mode="rgb_array") + AddRenderObservation (wrap="render"), or the raw env
    (wrap=None, for MujocoVectorEnv), or a slot env (wrap="slot")."""
    from gymnasium.wrappers import AddRenderObservation
    env = gymnasium.make(env_id, render_mode="rgb_array" if wrap else None, width=width, height=height)
    apply_visuals(env.unwrapped.model, visuals)
    if wrap == "render":
        return AddRenderObservation(env, render_only=True)
    if wrap == "slot":
        return SlotRenderEnv(env, height, width)
    return env


class SlotRenderEnv(gymnasium.Wrapper):
    """A worker's env of the slots path: observations are its renderer's image, written into its slot."""

    def __init__(self, env, height, width):
        super().__init__(env)
        from gltensor.gymnasium import SlotSpace
        self.observation_space = SlotSpace(height, width, 3)

    def reset(self, **kwargs):
        _, info = self.env.reset(**kwargs)
        return self.env.render(), info

    def step(self, action):
        _, r, te, tr, info = self.env.step(action)
        return self.env.render(), r, te, tr, info


def stock_context_current(venv):
    """Gymnasium's MuJoCo viewers draw into whatever GL context is current: MujocoRenderer makes its own current
    only once it holds two viewers, each new viewer leaves its context current, and AsyncVectorEnv's constructor
    closes a throwaway env whose context, released, leaves none current. A program using only a SyncVectorEnv of
    stock pixel envs has the last one's context current when it steps; put that back before every stock step
    (a few µs), so the stock path draws into a context of its own whatever the other paths did."""
    viewer = venv.envs[-1].unwrapped.mujoco_renderer.viewer
    if viewer is not None:
        viewer.make_context_current()


def nature_cnn(torch, size, device):
    """The Nature-DQN encoder (+ a 6-way head) on size x size RGB, as the small CNN of every path's step."""
    nn = torch.nn
    body = nn.Sequential(nn.Conv2d(3, 32, 8, 4), nn.ReLU(), nn.Conv2d(32, 64, 4, 2), nn.ReLU(),
                         nn.Conv2d(64, 64, 3, 1), nn.ReLU(), nn.Flatten())
    with torch.no_grad():
        flat = body(torch.zeros(1, 3, size, size)).shape[1]
    return nn.Sequential(body, nn.Linear(flat, 512), nn.ReLU(), nn.Linear(512, 6)).to(device).eval()


# -- the timed loops ----------------------------------------------------------------------------------------------
def time_env_steps(step, n, steps, warmup, sync, warm_s=0.25):
    """env-steps/s of `steps` calls of step(k) after a warm-up of at least `warmup` calls and `warm_s` seconds;
    one sync at the end. Why a time as well: a path timed after CPU-only paths (physics, rollout) finds the GPU's
    clocks down, and a few steps (milliseconds) do not bring them up again."""
    k, t0 = 0, time.perf_counter()
    while k < warmup or time.perf_counter() - t0 < warm_s:
        step(k)
        k += 1
        if k >= warmup and k % 8 == 0:
            sync()  # the GPU's own time counts in the warm-up too
    sync()
    t0 = time.perf_counter()
    for k in range(k, k + steps):
        step(k)
    sync()
    return n * steps / (time.perf_counter() - t0)


class GymCase:
    """The paths of one (task, visuals, N): built once, timed in interleaved rounds, closed."""

    def __init__(self, args, torch, device, task, visuals, n, log, collect):
        from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv

        from gltensor.mujoco import MujocoVectorEnv
        self.torch, self.device, self.n, self.log = torch, device, n, log
        h = w = args.size
        self.policy = nature_cnn(torch, args.size, device)
        stock = functools.partial(make_gym, task, h, w, visuals, "render")
        self.envs, self.skipped = {}, {}
        want = [p for p in GYM_PATHS if p in args.paths]
        t0 = time.perf_counter()
        self.ref_n = min(n, args.sync_max)  # the check's reference: the first min(N, --sync-max) envs
        if "sync" in want and n <= args.sync_max:
            self.envs["sync"] = SyncVectorEnv([stock] * n)
        elif "sync" in want:
            self.skipped["sync"] = "N > --sync-max %d" % args.sync_max
        self.ref = self.envs.get("sync")
        if self.ref is None and any(p in want for p in ("batch", "batch-per-env")):
            self.ref = SyncVectorEnv([stock] * self.ref_n)
        if "async" in want and n <= args.async_max:
            self.envs["async"] = AsyncVectorEnv([stock] * n, shared_memory=True, context="spawn")
        elif "async" in want:
            self.skipped["async"] = "N > --async-max %d (one spawned process per env)" % args.async_max
        if "slots" in want:
            slot = functools.partial(make_gym, task, h, w, visuals, "slot")
            self.envs["slots"] = AsyncVectorEnv([slot] * n, shared_memory=True, context="spawn")
        raw = functools.partial(make_gym, task, h, w, visuals, None)
        cams = None
        if self.ref is not None:  # the stock viewers' free cameras (placed by AddRenderObservation's first render)
            cams = [e.unwrapped.mujoco_renderer.viewer.cam for e in self.ref.envs]
            cams += [None] * (n - len(cams))
        if any(p in want for p in ("batch",) + FLOORS):
            self.envs["batch"] = MujocoVectorEnv([raw] * n, height=h, width=w, camera=cams, backend=args.backend,
                                                 threads=args.threads or None)
        if "batch-per-env" in want:
            self.envs["batch-per-env"] = MujocoVectorEnv([raw] * n, height=h, width=w, camera=cams,
                                                         backend=args.backend, physics="per-env")
        # AsyncVectorEnv's constructor made and closed a stock env here for its spaces; that env's viewer leaves its
        # MjrContext to the garbage collector, which frees GL names in whatever context is current. Collected later
        # with the stock envs' context current, it deleted their framebuffers: the stock reference then returned its
        # previous frame, and the check failed on the batch (tools/mujoco_check_repeat.py). Collect now, in ours.
        collect()
        log("    built %d paths in %.1f s" % (len(self.envs), time.perf_counter() - t0))
        self.backend = self.envs["batch"].renderer.backend if "batch" in self.envs else None
        self.threads = self.envs["batch"].threads if "batch" in self.envs else None
        self.threads_stepping = self.threads  # of the batch, after its measured choice (check())
        self.envs_reason = self.envs["batch"].physics_path_reason if "batch" in self.envs else None
        self.physics_path = self.envs["batch"].physics_path if "batch" in self.envs else None
        batched = "batch" in self.envs and self.envs["batch"].physics_path == "batched"
        for p in ("physics", "rollout"):
            if p in want and not batched:
                self.skipped[p] = "the batch took the per-env path (%s)" % (
                    self.envs["batch"].physics_path_reason if "batch" in self.envs else "no batch")
        self.paths = [p for p in want if p in self.envs or p in FLOORS and "batch" in self.envs
                      and p not in self.skipped]
        rng = np.random.default_rng(0)
        shape = (n,) + gymnasium.vector.utils.batch_space(self._single_action(), n).shape[1:]
        self.actions = rng.uniform(-1, 1, (64,) + shape).astype(np.float32)

    def _single_action(self):
        return next(iter(self.envs.values())).single_action_space

    def check(self):
        """The batch's images equal SyncVectorEnv's (same seeds, same cameras); the slots' equal async's."""
        if self.ref is not None:
            k = self.ref_n
            stock_context_current(self.ref)
            ref, _ = self.ref.reset(seed=11)
            ref_reset = ref
            for key in ("batch", "batch-per-env"):
                if key in self.envs:
                    got, _ = self.envs[key].reset(seed=11)
                    got = got[:k].cpu().numpy()
                    if not np.array_equal(ref, got):
                        tiles = [i for i in range(k) if not np.array_equal(ref[i], got[i])]
                        raise CheckFailed("%s: reset images of envs %s differ from SyncVectorEnv's (N=%d, max "
                                          "difference %d); if SyncVectorEnv's own images are the stale ones (a "
                                          "Gymnasium viewer collected while its GL context was current deletes its "
                                          "framebuffers), tools/mujoco_check_repeat.py tells which side is off" % (
                                              key, tiles, self.n, int(np.abs(ref.astype(int) - got).max())))
            a = self.actions[0]
            stock_context_current(self.ref)
            ref = self.ref.step(a[:k])
            for key in ("batch", "batch-per-env"):
                if key in self.envs:
                    got = self.envs[key].step(a)
                    images, rewards = got[0][:k].cpu().numpy(), got[1][:k]
                    if not np.array_equal(ref[0], images) or not np.array_equal(ref[1], rewards):
                        tiles = [i for i in range(k) if not np.array_equal(ref[0][i], images[i])]
                        envs = [i for i in range(k) if ref[1][i] != rewards[i]]
                        stale = [i for i in tiles if np.array_equal(ref[0][i], ref_reset[i])]
                        raise CheckFailed("%s: the first step differs from SyncVectorEnv's (N=%d): images of envs %s "
                                          "(max difference %s), rewards of envs %s%s" % (
                                              key, self.n, tiles, int(np.abs(ref[0].astype(int) - images).max()),
                                              envs, "; SyncVectorEnv's own step gave its reset images for envs %s "
                                              "(its GL context lost its framebuffers?)" % stale if stale else ""))
        # The batch measures how it steps fastest over its first steps (MujocoVectorEnv.physics_trial: its
        # batched path with all or a quarter of its threads, its per-env path), and once more after a few hundred:
        # both done here, before anything is timed, so that every timed step is the batch as it then runs; each
        # step followed by the forward, as in the timed loop and in training.
        b = self.envs.get("batch")
        trial = getattr(b, "physics_trial", None)
        if trial is not None:
            b.reset(seed=11)
            k = 0
            while not trial.settled:
                self.forward(self.torch.as_tensor(b.step(self.actions[k % len(self.actions)])[0],
                                                  device=self.device))
                k += 1
            self.threads_stepping = b.threads
            self.envs_reason = b.physics_path_reason
            self.physics_path = b.physics_path
        for key in self.envs:
            self.envs[key].reset(seed=11)

    def forward(self, x):
        torch = self.torch
        with torch.no_grad():
            self.policy(x.permute(0, 3, 1, 2).float().div_(255)).sum()

    def step_fn(self, key):
        torch, dev, envs, acts = self.torch, self.device, self.envs, self.actions
        if key == "sync":
            def step(k):
                stock_context_current(envs[key])
                obs = envs[key].step(acts[k % len(acts)])[0]
                self.forward(torch.from_numpy(obs).to(dev, non_blocking=False))
        elif key == "async":
            def step(k):
                obs = envs[key].step(acts[k % len(acts)])[0]
                self.forward(torch.from_numpy(obs).to(dev, non_blocking=False))
        elif key in ("slots", "batch", "batch-per-env"):
            def step(k):
                obs = envs[key].step(acts[k % len(acts)])[0]
                self.forward(torch.as_tensor(obs, device=dev))
        elif key == "physics":
            venv = envs["batch"]
            ph = venv._batched
            everyone = np.ones(venv.num_envs, dtype=np.bool_)

            def step(k):
                a = acts[k % len(acts)]
                before = ph.before()
                ph.start(a, everyone)
                ph.wait()
                ph.finish(a, before, everyone)
        elif key == "rollout":
            step = self._rollout_step(envs["batch"])
        else:
            venv = envs["batch"]
            datas = [u.data for u in venv.unwrapped_envs]
            r = venv.renderer
            tiny = torch.zeros(1, device=dev)
            if key == "render":
                def step(k):
                    r.render(datas, cameras=venv._cameras())
                    # The GL work must be finished before the CUDA op, or the floor counts only its submission
                    # (an H200 run without this put the floor 10-17x under render+read at MuJoCo's defaults).
                    _glfinish(r)
                    if dev.type == "cuda":
                        tiny.add_(1)  # one trivial CUDA op: the graphics -> compute switch
            elif key == "render+read":
                def step(k):
                    r.render(datas, cameras=venv._cameras())
                    r.read().float().mean()
            else:
                def step(k):
                    r.render(datas, cameras=venv._cameras())
                    self.forward(r.read())
        return step

    def _rollout_step(self, venv):
        """mujoco.rollout of the batch's N states, frame_skip steps of each with one control, in as many threads
        as the batch's physics (one MjData a thread; its persistent pool made once)."""
        import mujoco
        from mujoco import rollout

        models = [u.model for u in venv.unwrapped_envs]
        datas = [mujoco.MjData(models[0]) for _ in range(venv.threads)]
        spec = mujoco.mjtState.mjSTATE_FULLPHYSICS.value
        size = mujoco.mj_stateSize(models[0], spec)
        state0 = np.empty((venv.num_envs, size))
        for i, u in enumerate(venv.unwrapped_envs):
            mujoco.mj_getState(u.model, u.data, state0[i], spec)
        skip = venv.unwrapped_envs[0].frame_skip
        acts = self.actions
        runner = rollout.Rollout(nthread=venv.threads)
        self._closers = getattr(self, "_closers", []) + [runner.close]
        out_state = np.empty((venv.num_envs, skip, size))
        out_sens = np.empty((venv.num_envs, skip, models[0].nsensordata))

        def step(k):
            control = np.repeat(acts[k % len(acts)][:, None, :].astype(np.float64), skip, axis=1)
            runner.rollout(models, datas, state0, control, nstep=skip, state=out_state, sensordata=out_sens)
            state0[:] = out_state[:, -1]
        return step

    def close(self):
        for c in getattr(self, "_closers", []):
            c()
        for e in self.envs.values():
            e.close()
        if self.ref is not None and self.ref is not self.envs.get("sync"):
            self.ref.close()


def _glfinish(renderer):
    """The render's floor must include the rasterisation a read waits for (on both backends): glFinish in the
    renderer's context, put back as the renderer's own calls put it back (no context of ours left current)."""
    from OpenGL import GL

    from gltensor.mujoco.batch import _ContextKept
    with _ContextKept(renderer.gl_context):
        GL.glFinish()


class DmCase:
    def __init__(self, args, torch, device, visuals, n, log):
        from dm_control import suite

        from gltensor.mujoco import DmControlBatch
        domain, task = args.dm_task.split("-", 1)
        self.torch, self.device, self.n, self.size = torch, device, n, args.size
        self.policy = nature_cnn(torch, args.size, device)
        want = [p for p in DM_PATHS if p in args.paths]
        self.envs, self.skipped = {}, {}
        if "dm-stock" in want or "dm-batch" in want:
            self.envs["dm-stock"] = [suite.load(domain, task, task_kwargs={"random": 5 + k}) for k in range(n)]
            for e in self.envs["dm-stock"]:
                apply_visuals(e.physics.model.ptr, visuals)
        if "dm-batch" in want:
            b = DmControlBatch(domain, task, n, args.size, args.size, camera_id=0, seed=5, backend=args.backend)
            for p in b.physics:
                apply_visuals(p.model.ptr, visuals)
            self.envs["dm-batch"] = b
        self.backend = self.envs["dm-batch"].renderer.backend if "dm-batch" in self.envs else None
        self.threads = self.envs["dm-batch"].threads if "dm-batch" in self.envs else None
        self.paths = [p for p in want if p in self.envs]
        spec = self.envs["dm-batch"].action_spec if "dm-batch" in self.envs else \
            self.envs["dm-stock"][0].action_spec()
        rng = np.random.default_rng(0)
        self.actions = rng.uniform(spec.minimum, spec.maximum, (64, n) + spec.shape)

    def check(self):
        if "dm-batch" not in self.envs:
            return
        stock, batch = self.envs["dm-stock"], self.envs["dm-batch"]
        for e in stock:
            e.reset()
        _, pixels = batch.reset()
        _, pixels = batch.step(self.actions[0])
        for e, a in zip(stock, self.actions[0]):
            e.step(a)
        want = np.stack([e.physics.render(self.size, self.size, camera_id=0) for e in batch.envs])
        if not np.array_equal(want, pixels.cpu().numpy()):
            raise CheckFailed("dm-batch: images differ from physics.render() (N=%d)" % self.n)

    def forward(self, x):
        with self.torch.no_grad():
            self.policy(x.permute(0, 3, 1, 2).float().div_(255)).sum()

    def step_fn(self, key):
        torch, dev, acts, s = self.torch, self.device, self.actions, self.size
        if key == "dm-stock":
            envs = self.envs["dm-stock"]

            def step(k):
                frames = []
                for e, a in zip(envs, acts[k % len(acts)]):
                    if e.step(a).last():
                        e.reset()
                    frames.append(e.physics.render(s, s, camera_id=0))
                self.forward(torch.from_numpy(np.stack(frames)).to(dev))
        else:
            b = self.envs["dm-batch"]

            def step(k):
                steps, pixels = b.step(acts[k % len(acts)])
                if steps[0].last():  # every env of the batch runs episodes of the same length
                    _, pixels = b.reset()
                self.forward(torch.as_tensor(pixels, device=dev))
        return step

    def close(self):
        for key, e in self.envs.items():
            if key == "dm-batch":
                e.close()
            else:
                for x in e:
                    x.close()


# -- the run ------------------------------------------------------------------------------------------------------
ALTERNATE_BLOCK = 10  # steps a block of --alternate (after 2 untimed ones)
ALTERNATE_STOCK = ("async", "sync", "dm-stock")  # the stock path that joins the blocks: the first of these timed


def run_case(case, args, sync, log):
    """{path: [env-steps/s per round]} of one case, paths interleaved in each round."""
    case.check()
    # Each path's first steps ran slower than its later ones on the GPU hosts, for a hundred-odd steps of a new
    # batch (tools/mujoco_trial_series.py, benchmarks/results/mujoco_trial_series_h200.json): every path takes
    # --settle untimed steps once, before the rounds.
    for p in case.paths:
        fn = case.step_fn(p)
        for k in range(args.settle):
            fn(k)
        sync()
    rates = {p: [] for p in case.paths}
    for r in range(args.rounds):
        for p in round_order(case.paths, r):
            rates[p].append(time_env_steps(case.step_fn(p), case.n, args.steps, args.warmup, sync))
    # The batch against its pixel floor and the stock vector env once more, block by block: the rounds time each
    # path for a few seconds in turn, and a host's pace moved by up to 1.8x between them (measure.alternate_blocks).
    case.alternating = None
    if args.alternate > 0 and "batch" in case.paths and "pixels" in case.paths:
        sides = ["batch", "pixels"] + [p for p in ALTERNATE_STOCK if p in case.paths][:1]
        times = alternate_blocks([case.step_fn(p) for p in sides], args.alternate, ALTERNATE_BLOCK, sync)
        case.alternating = {"block_steps": ALTERNATE_BLOCK, **{f"{p}_us_per_step": t for p, t in zip(sides, times)}}
    return rates


def default_out():
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "gltensor" / "bench"


def plot(results, png):
    """env-steps/s against N, one panel per (task, visuals), one line per path."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    panels = sorted({(r["task"], r["visuals"]) for r in results if "env_steps_per_s" in r})
    if not panels:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.2), squeeze=False)
    for ax, (task, vis) in zip(axes[0], panels):
        rows = [r for r in results if (r["task"], r["visuals"]) == (task, vis) and "env_steps_per_s" in r]
        for path in dict.fromkeys(r["path"] for r in rows):
            pts = sorted((r["n"], r["env_steps_per_s"]) for r in rows if r["path"] == path)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=path)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("N environments")
        ax.set_ylabel("env-steps/s (physics + pixels on device + CNN)")
        ax.set_title("%s, %s visuals" % (task, vis))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)
    plt.close(fig)
    return png


V5_TASKS = ("Ant", "HalfCheetah", "Hopper", "Humanoid", "HumanoidStandup", "InvertedDoublePendulum",
            "InvertedPendulum", "Pusher", "Reacher", "Swimmer", "Walker2d")


def gym_tasks(spec):
    """--task: '' (none), 'v5' (Gymnasium's eleven v5 MuJoCo tasks) or ids, comma-separated."""
    if spec.strip() == "v5":
        return [t + "-v5" for t in V5_TASKS]
    return [t.strip() for t in spec.split(",") if t.strip()]


def ratios(results):
    """Per case: each path's env-steps/s over async's (the stock pixel pipeline), render+read over render; for the
    batch, its time over its floors' and its rate over the per-env path's, as ratios of medians and (``measure.paired_ratio``)
    as medians of each round's ratio."""
    by, rounds = {}, {}
    for r in results:
        if "env_steps_per_s" in r:
            by[(r["task"], r["visuals"], r["n"], r["path"])] = r["env_steps_per_s"]
            rounds[(r["task"], r["visuals"], r["n"], r["path"])] = r.get("rounds_env_steps_per_s") or []
    for r in results:
        if "env_steps_per_s" not in r:
            continue
        key = (r["task"], r["visuals"], r["n"])
        base = by.get(key + ("async",)) or by.get(key + ("dm-stock",))
        if base and r["path"] not in FLOORS + ("async", "dm-stock"):
            r["vs_stock"] = r["env_steps_per_s"] / base
        if r["path"] == "render+read" and by.get(key + ("render",)):
            r["vs_render_floor"] = by[key + ("render",)] / r["env_steps_per_s"]  # time ratio
        if r["path"] == "batch":
            # A step against the larger of its two floors (time ratios): MuJoCo's own C threads (rollout) and
            # the pixel side (render, read, CNN); then against this path's own physics and the render with its read
            mine = rounds[key + ("batch",)]
            for floor, names in (("vs_floor", ("rollout", "pixels")), ("vs_floor_read", ("physics", "render+read"))):
                rates = [by.get(key + (f,)) for f in names]
                if all(rates):
                    r[floor] = min(rates) / r["env_steps_per_s"]
                    slowest = [min(x) for x in zip(*(rounds[key + (f,)] for f in names))]
                    paired = paired_ratio(slowest, mine)
                    if paired is not None:
                        r[floor + "_paired"] = paired
            alt = r.get("alternating")
            if alt:  # its time over the pixel floor's, block by block (run_case)
                r["vs_pixels_alternating"] = median([b / p for b, p in zip(alt["batch_us_per_step"],
                                                                           alt["pixels_us_per_step"])])
                # each side's pace in its blocks (median), beside the rounds' figure: the two differ where the host's
                # pace moved between the rounds and the blocks (benchmarks/README.md, "block by block")
                sides = [k[:-len("_us_per_step")] for k in alt if k.endswith("_us_per_step")]
                r["alternating_env_steps_per_s"] = {side: r["n"] * 1e6 / median(alt[side + "_us_per_step"])
                                                    for side in sides}
                stock = next((p for p in ALTERNATE_STOCK if p in sides), None)
                if stock:  # the stock path's time over the batch's, block by block: the speed-up, free of drift
                    r["vs_stock_alternating"] = median([s / b for s, b in zip(alt[stock + "_us_per_step"],
                                                                              alt["batch_us_per_step"])])
                    r["alternating_stock"] = stock
            # the automatic choice, measured: the batched path against the per-env path it replaces
            if by.get(key + ("batch-per-env",)):
                r["vs_per_env"] = r["env_steps_per_s"] / by[key + ("batch-per-env",)]
                paired = paired_ratio(mine, rounds[key + ("batch-per-env",)])
                if paired is not None:
                    r["vs_per_env_paired"] = paired
        base_rounds = rounds.get(key + ("async",)) or rounds.get(key + ("dm-stock",))
        if r.get("vs_stock") and base_rounds:
            paired = paired_ratio(rounds[key + (r["path"],)], base_rounds)
            if paired is not None:
                r["vs_stock_paired"] = paired
    return results


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m gltensor.bench mujoco", description=MODES["mujoco"][1])
    ap.add_argument("--envs", type=arg(parse_cameras), default=[1, 4, 16, 64], help="N values (default 1,4,16,64)")
    ap.add_argument("--visuals", default="default,light", help="default (MuJoCo's shadows, reflections) and/or "
                    "light (castshadow and reflectance 0)")
    ap.add_argument("--task", default="HalfCheetah-v5", help="Gymnasium MuJoCo task(s), comma-separated; 'v5': all "
                    "eleven v5 tasks ('' skips them)")
    ap.add_argument("--dm-task", default="cheetah-run", help="dm_control domain-task ('' skips it)")
    ap.add_argument("--paths", default=",".join(GYM_PATHS + DM_PATHS), help="paths to run (comma-separated)")
    ap.add_argument("--size", type=int, default=84, help="image height = width (default 84)")
    ap.add_argument("--steps", type=int, default=100, help="timed env steps per round and path")
    ap.add_argument("--warmup", type=int, default=10, help="untimed steps of a path before each of its rounds")
    ap.add_argument("--settle", type=int, default=150, help="untimed steps of every path once, before the rounds")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds; medians reported")
    ap.add_argument("--alternate", type=int, default=12, help="turns of 10-step blocks in which the batch, its pixel "
                    "floor and the stock vector env take turns after the rounds (0: none)")
    ap.add_argument("--sync-max", type=int, default=16, help="largest N for SyncVectorEnv (it renders serially)")
    ap.add_argument("--async-max", type=int, default=64, help="largest N for AsyncVectorEnv (a process per env)")
    ap.add_argument("--backend", choices=("auto", "cuda", "cpu"), default="auto")
    ap.add_argument("--threads", type=int, default=0, help="physics threads of the batch path (0: its default)")
    ap.add_argument("--torch-threads", type=int, default=0, help="torch.set_num_threads(N) first (0: default)")
    ap.add_argument("--out", help="folder for mujoco_<host>.json and .png (default ~/.cache/gltensor/bench)")
    ap.add_argument("--json", help="JSON file (the PNG goes beside it)")
    ap.add_argument("--quick", action="store_true", help="smoke run: N=2, light visuals, 48x48, 1 round of 4 steps")
    args = ap.parse_args(argv)
    if args.quick:
        args.envs, args.visuals, args.size, args.steps, args.warmup, args.rounds = [2], "light", 48, 4, 1, 1
        args.settle, args.alternate = 1, 1
    visuals = paths_and_visuals(ap, args, GYM_PATHS + DM_PATHS)
    import torch
    if args.torch_threads > 0:
        torch.set_num_threads(args.torch_threads)
    import socket

    import gltensor
    host = socket.gethostname()
    if args.json:
        json_path = Path(args.json)
    else:
        json_path = Path(args.out or default_out()) / ("mujoco_%s.json" % "".join(
            c if c.isalnum() or c in "-_." else "_" for c in host))
    device = torch.device("cuda" if torch.cuda.is_available() and args.backend != "cpu" else "cpu")
    ctx = gltensor.Context.headless()
    info = machine_info(ctx, torch)
    import mujoco
    info["mujoco"], info["gymnasium"] = mujoco.__version__, gymnasium.__version__
    print("GL: %s | torch %s | device %s | mujoco %s | gymnasium %s | cores %s" % (
        ctx.renderer, torch.__version__, device, mujoco.__version__, gymnasium.__version__, os.cpu_count()),
        flush=True)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    def log(m):
        print(m, flush=True)

    def collect():
        """Gymnasium's viewers leave their MjrContexts to the garbage collector, which frees their GL names in
        whatever context is current: collect with the bench's own context current, so that no stock env's context
        loses its framebuffers."""
        ctx.make_current()
        gc.collect()
    results, status = [], "ok"
    cases = []
    for vis in visuals:
        for n in args.envs:
            if any(p in GYM_PATHS for p in args.paths):
                cases += [("gym", task, vis, n) for task in gym_tasks(args.task)]
            if args.dm_task and any(p in DM_PATHS for p in args.paths):
                cases.append(("dm", args.dm_task, vis, n))
    try:
        for kind, task, vis, n in cases:
            log("  %s %s N=%d ..." % (task, vis, n))
            try:
                case = GymCase(args, torch, device, task, vis, n, log, collect) if kind == "gym" else \
                    DmCase(args, torch, device, vis, n, log)
            except (ImportError, AttributeError) as e:  # dm_control 1.0.x cannot load tasks on MuJoCo 4
                why = "%s: %s" % (type(e).__name__, e)
                log("    skipped: " + why)
                paths = GYM_PATHS if kind == "gym" else DM_PATHS
                results += [{"task": task, "visuals": vis, "n": n, "path": p, "skipped": why[:300]}
                            for p in paths if p in args.paths]
                continue
            try:
                rates = run_case(case, args, sync, log)
            finally:
                case.close()
            for p, v in rates.items():
                results.append({"task": task, "visuals": vis, "n": n, "path": p, "size": args.size,
                                "backend": case.backend, "threads": case.threads if p in ("batch", "physics", "rollout") else None,
                                "physics_path": case.physics_path if p == "batch" else None,
                                "threads_stepping": case.threads_stepping if p in ("batch", "physics") else None,
                                "physics_path_reason": case.envs_reason if p == "batch" else None,
                                "rounds_env_steps_per_s": v, "env_steps_per_s": median(v),
                                "us_per_env_step": 1e6 / median(v)})
                if p == "batch" and case.alternating:
                    results[-1]["alternating"] = case.alternating
            for p, why in case.skipped.items():
                results.append({"task": task, "visuals": vis, "n": n, "path": p, "skipped": why})
            case = None  # dropped and collected now (collect()), before the next case's stock envs exist
            collect()
            log("    " + ", ".join("%s %.0f" % (p, median(v)) for p, v in rates.items()) + " env-steps/s")
            save_json(json_path, {"benchmark": "mujoco", "status": "partial: killed or still running",
                                  "argv": list(sys.argv[1:] if argv is None else argv), "machine": info,
                                  "results": results})  # a run cut by a time limit keeps its finished cases
    except CheckFailed as e:
        status = "check failed: %s" % e
        print("FAIL: %s" % e, file=sys.stderr)
    ratios(results)
    report = {"benchmark": "mujoco", "date": datetime.datetime.now().isoformat(timespec="seconds"),
              "argv": sys.argv[1:] if argv is None else list(argv), "machine": info,
              "config": {"envs": args.envs, "visuals": visuals, "task": gym_tasks(args.task), "dm_task": args.dm_task,
                         "paths": args.paths, "size": args.size, "steps": args.steps, "warmup": args.warmup,
                         "settle": args.settle, "alternate": args.alternate,
                         "rounds": args.rounds, "sync_max": args.sync_max, "async_max": args.async_max, "backend": args.backend,
                         "device": str(device)},
              "results": results, "status": status}
    save_json(json_path, report)
    png = plot(results, json_path.with_suffix(".png"))
    rows = []
    for r in results:
        if "skipped" in r:
            rows.append([r["task"], r["visuals"], r["n"], r["path"], "skipped", "-", "-", r["skipped"]])
            continue
        note = ""
        if r.get("vs_render_floor"):
            note = "%.2fx the render floor" % r["vs_render_floor"]
        if r.get("vs_floor"):
            note = "%.2fx max(rollout, pixels) (paired %.2fx); %.2fx max(physics, render+read); %s physics, %d threads" % (
                r["vs_floor"], r.get("vs_floor_paired") or float("nan"), r.get("vs_floor_read") or float("nan"),
                r["physics_path"], r.get("threads_stepping") or r["threads"])
        if r.get("vs_pixels_alternating"):
            blocks = r["alternating_env_steps_per_s"]
            note = ("%s; " % note if note else "") + "%.2fx pixels in alternating blocks (%s / %s env-steps/s)" % (
                r["vs_pixels_alternating"], f"{blocks['batch']:,.0f}", f"{blocks['pixels']:,.0f}")
            if r.get("vs_stock_alternating"):
                note += ", %.2fx %s there (%s env-steps/s)" % (r["vs_stock_alternating"], r["alternating_stock"],
                                                              f"{blocks[r['alternating_stock']]:,.0f}")
        if r.get("vs_per_env"):
            note = ("%s; " % note if note else "") + "%.2fx batch-per-env (paired %.2fx)%s" % (
                r["vs_per_env"], r.get("vs_per_env_paired") or float("nan"), " (SLOWER)" if r["vs_per_env"] < 1 else "")
        rows.append([r["task"], r["visuals"], r["n"], "%s%s" % (r["path"], " [%s]" % r["backend"] if r["backend"]
                                                               and r["path"] not in ("async", "sync", "dm-stock") else ""),
                     "{:,.0f}".format(r["env_steps_per_s"]), "{:,.0f}".format(r["us_per_env_step"]),
                     "%.2fx" % r["vs_stock"] if r.get("vs_stock") else "-", note])
    print_table("MuJoCo pixel RL: env-steps/s (physics + N images on %s + Nature-CNN forward), %dx%d, median of "
                "%d rounds of %d steps" % (device, args.size, args.size, args.rounds, args.steps),
                ["task", "visuals", "N", "path", "env-steps/s", "us/env-step", "vs stock", "note"], rows,
                left=(0, 1, 3))
    print("\nJSON: %s" % json_path)
    if png:
        print("plot: %s" % png)
    return 0 if status == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
