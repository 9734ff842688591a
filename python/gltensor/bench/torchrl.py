"""`python -m gltensor.bench torchrl`: TorchRL pixel envs, env-steps/s of TorchRL's own ParallelEnv and SerialEnv of
GymEnv(id, from_pixels=True, pixels_only=True) against gltensor.torchrl.GymBatchEnv and MujocoVectorEnv alone.

    python -m gltensor.bench torchrl [--envs 4,16,64] [--visuals light] [--rounds 3] [--steps 100] [--size 84]
                                     [--paths parallel,serial,gltensor,vector,layer] [--json PATH] [--plot PATH]
                                     [--quick]

One env step of every path = N environments' physics + their N frames as one (N, H, W, 3) batch on the policy's
device (CUDA when torch has it) + a Nature-CNN forward on it, as in `python -m gltensor.bench mujoco` (whose
environments, visuals, CNN and timed loop this mode reuses). The TorchRL paths step with
`env.step_and_maybe_reset(td)`, what TorchRL's collectors call (finished environments reset through "_reset").

  parallel  TorchRL's ParallelEnv(N, GymEnv(...)): N spawned workers, each GymEnv rendering through its own
            Gymnasium viewer, the batch stacked in shared memory on the host, then .to(device) in the trainer
            (workers stay CUDA-free: ParallelEnv(device="cuda") would give each worker a CUDA context)
  serial    TorchRL's SerialEnv of the same GymEnvs in this process (--serial-max: largest N, default 16)
  gltensor  gltensor.torchrl.GymBatchEnv: one process, one batch render, the TensorDict holds the renderer's tensor
  vector    gltensor.mujoco.MujocoVectorEnv alone, no TorchRL: the gltensor row's cost over this one is
            what the TorchRL layer costs (target <= 5% at N = 64)
  layer     the TorchRL layer alone, measured directly: the gltensor path's step_and_maybe_reset with
            MujocoVectorEnv.step answered from a cached result of a real step (no physics, render or CNN), in µs per
            batch step, and that as a share of the vector path's step. The gltensor-vs-vector difference above is
            two noisy figures subtracted; this one is the layer's time itself (it needs the gltensor path)

Visuals: `light` (the default) sets every light's castshadow and every material's reflectance to 0 in each model
(the same edit on every path, inside ParallelEnv's workers too); `default` keeps MuJoCo's. Before timing, the
gltensor and vector paths' frames and rewards are checked against the GymEnvs' (reset and one step, the same
seeds, the GymEnvs' cameras handed over as docs/torchrl.md describes; CheckFailed exits 1). Medians of --rounds
rounds, the paths of a case interleaved in each round.
"""
import argparse
import contextlib
import datetime
import functools
import gc
import os
import socket
import sys
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np  # noqa: E402

from . import MODES  # noqa: E402
from .measure import CheckFailed, median, round_order  # noqa: E402
from .mujoco import apply_visuals, default_out, make_gym, nature_cnn, plot, time_env_steps  # noqa: E402
from .options import arg, parse_cameras, paths_and_visuals  # noqa: E402
from .report import machine_info, print_table, save_json  # noqa: E402

PATHS = ("parallel", "serial", "gltensor", "vector", "layer")
CHECK_SEED = 11


def make_stock(task, size, visuals):
    """TorchRL's own pixel env (module level: ParallelEnv's spawned workers unpickle it)."""
    from torchrl.envs import GymEnv
    env = GymEnv(task, from_pixels=True, pixels_only=True, width=size, height=size)
    apply_visuals(env.unwrapped.model, visuals)
    return env


def stock_context_current(envs):
    """Gymnasium's viewers draw into whatever GL context is current (see bench.mujoco.stock_context_current): put
    the last GymEnv's back before each stock step of this process."""
    viewer = envs[-1].unwrapped.mujoco_renderer.viewer
    if viewer is not None:
        viewer.make_context_current()


class Case:
    """The paths of one (task, visuals, N): built once, checked, timed in interleaved rounds, closed."""

    def __init__(self, args, torch, device, visuals, n, log, collect):
        from torchrl.envs import ParallelEnv, SerialEnv

        from gltensor.mujoco import MujocoVectorEnv
        from gltensor.torchrl import GymBatchEnv
        self.torch, self.device, self.n = torch, device, n
        size, task = args.size, args.task
        self.policy = nature_cnn(torch, size, device)
        self.envs, self.skipped, self.tds = {}, {}, {}
        want = [p for p in PATHS if p in args.paths]
        t0 = time.perf_counter()
        # The check's reference: GymEnvs of this process (the first min(N, --serial-max) envs); their cameras are
        # handed to the gltensor and vector paths.
        self.ref_n = min(n, args.serial_max)
        self.refs = [make_stock(task, size, visuals) for _ in range(self.ref_n)]
        cams = [e.unwrapped.mujoco_renderer.viewer.cam for e in self.refs] + [None] * (n - self.ref_n)
        stock = functools.partial(make_stock, task, size, visuals)
        if "serial" in want and n <= args.serial_max:
            self.envs["serial"] = SerialEnv(n, stock)
        elif "serial" in want:
            self.skipped["serial"] = "N > --serial-max %d" % args.serial_max
        if "parallel" in want:
            self.envs["parallel"] = ParallelEnv(n, stock, mp_start_method="spawn")
        # Both constructors made and closed a GymEnv here for TorchRL's metadata; its viewer's MjrContext is left to
        # the garbage collector, which frees GL names in whatever context is current: collect now, in ours.
        collect()
        raw = functools.partial(make_gym, task, size, size, visuals, None)
        if "layer" in want and "gltensor" not in want:
            self.skipped["layer"] = "times the gltensor path's env: add gltensor to --paths"
        if "gltensor" in want:
            self.envs["gltensor"] = GymBatchEnv([raw] * n, height=size, width=size, camera=cams,
                                                backend=args.backend)
        if "vector" in want:
            self.envs["vector"] = MujocoVectorEnv([raw] * n, height=size, width=size, camera=cams,
                                                  backend=args.backend)
        log("    built %d paths in %.1f s" % (len(self.envs), time.perf_counter() - t0))
        first = self.envs.get("gltensor") or self.envs.get("vector")
        self.backend = (first.venv if "gltensor" in self.envs else first).renderer.backend if first else None
        self.paths = [p for p in want if p in self.envs or (p == "layer" and "gltensor" in self.envs)]
        rng = np.random.default_rng(0)
        self.actions = torch.as_tensor(rng.uniform(-1, 1, (64, n, 6)).astype(np.float32))
        self._serial_envs = None

    def check(self):
        """The gltensor and vector paths' reset and first-step frames (and rewards) equal the GymEnvs' (the first
        min(N, --serial-max) envs), for the same seeds, actions and cameras."""
        torch, k, a = self.torch, self.ref_n, self.actions[0]
        from tensordict import TensorDict
        stock_context_current(self.refs)
        ref0 = torch.stack([e.reset(seed=CHECK_SEED + i)["pixels"] for i, e in enumerate(self.refs)])
        stock_context_current(self.refs)
        ref1 = [e.step(TensorDict({"action": a[i]}, []))["next"] for i, e in enumerate(self.refs)]
        ref_pix = torch.stack([r["pixels"] for r in ref1])
        ref_rew = torch.stack([r["reward"] for r in ref1]).double().reshape(-1)
        if "gltensor" in self.envs:
            env = self.envs["gltensor"]
            td = env.reset(seed=CHECK_SEED)
            got0 = td["pixels"][:k].cpu()
            td["action"] = a.to(env.device)
            out = env.step(td)["next"]
            if not torch.equal(ref0, got0) or not torch.equal(ref_pix, out["pixels"][:k].cpu()) \
                    or not torch.equal(ref_rew.float(), out["reward"][:k].reshape(-1).cpu()):
                raise CheckFailed("gltensor: frames or rewards differ from TorchRL's GymEnv (N=%d)" % self.n)
        if "vector" in self.envs:
            got0, _ = self.envs["vector"].reset(seed=CHECK_SEED)
            got1, rew = self.envs["vector"].step(a.numpy())[:2]
            if not torch.equal(ref0, got0[:k].cpu()) or not torch.equal(ref_pix, got1[:k].cpu()) \
                    or not np.array_equal(ref_rew.float().numpy(), rew[:k].astype(np.float32)):
                raise CheckFailed("vector: frames or rewards differ from TorchRL's GymEnv (N=%d)" % self.n)

    def start(self):
        """Every path seeded and reset (ParallelEnv's workers start here)."""
        for key, env in self.envs.items():
            if key == "vector":
                env.reset(seed=CHECK_SEED)
            else:
                env.set_seed(CHECK_SEED)
                self.tds[key] = env.reset()
        if "serial" in self.envs:
            # SerialEnv's GymEnvs exist once it started; TorchRL keeps them in a private list (a benchmark may
            # look): their viewers draw into the current context, put back before each of their steps
            self._serial_envs = self.envs["serial"]._envs

    def forward(self, x):
        torch = self.torch
        with torch.no_grad():
            self.policy(x.permute(0, 3, 1, 2).float().div_(255)).sum()

    @contextlib.contextmanager
    def timing(self, key):
        """Around the timed steps of a path: for layer, the gltensor env's MujocoVectorEnv.step answers with the
        result of one real step (its flags cleared, so that no reset runs), restored afterwards."""
        if key != "layer":
            yield
            return
        venv = self.envs["gltensor"].venv
        obs, rew, term, trunc, info = venv.step(self.actions[0].numpy())
        cached = (obs, rew, np.zeros_like(term), np.zeros_like(trunc), info)
        venv.step = lambda actions: cached
        try:
            yield
        finally:
            del venv.step  # the class's own again

    def step_fn(self, key):
        if key == "layer":
            env, acts = self.envs["gltensor"], self.actions
            acts_env = acts.to(env.device)

            def step(k):  # what the gltensor path does around the env, without the CNN
                td = self.tds["gltensor"]
                td["action"] = acts_env[k % len(acts_env)]
                _, self.tds["gltensor"] = env.step_and_maybe_reset(td)
            return step
        env, dev, acts = self.envs[key], self.device, self.actions
        if key == "vector":
            acts_dev = acts.to(dev)

            def step(k):
                self.forward(env.step(acts_dev[k % len(acts_dev)])[0])
            return step
        # the policy's actions: on its device for gltensor (copied to the host once per step for the physics),
        # on the host for TorchRL's CPU-side batched envs
        acts_env = acts.to(env.device) if env.device is not None else acts
        serial = self._serial_envs if key == "serial" else None

        def step(k):
            td = self.tds[key]
            td["action"] = acts_env[k % len(acts_env)]
            if serial is not None:
                stock_context_current(serial)
            out, self.tds[key] = env.step_and_maybe_reset(td)
            self.forward(out.get(("next", "pixels")).to(dev))
        return step

    def close(self):
        for key, env in self.envs.items():
            if not (key in ("serial", "parallel") and env.is_closed):  # a batched env never started is closed
                env.close()
        for e in self.refs:
            e.close()


def summarise(results):
    """Per case: each path over parallel's env-steps/s; the gltensor row's cost over vector (the TorchRL layer);
    the layer row's time as a share of vector's step."""
    by = {(r["visuals"], r["n"], r["path"]): r["env_steps_per_s"] for r in results if "env_steps_per_s" in r}
    for r in results:
        vec = by.get((r["visuals"], r["n"], "vector"))
        if r["path"] == "layer" and "us_per_step" in r and vec:
            r["vector_us_per_step"] = 1e6 * r["n"] / vec
            r["layer_share"] = r["us_per_step"] / r["vector_us_per_step"]
        if "env_steps_per_s" not in r:
            continue
        base = by.get((r["visuals"], r["n"], "parallel"))
        if base and r["path"] != "parallel":
            r["vs_parallel"] = r["env_steps_per_s"] / base
        if r["path"] == "gltensor" and vec:
            r["layer_cost"] = vec / r["env_steps_per_s"] - 1  # extra time per step, a fraction of vector's
    return results


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m gltensor.bench torchrl", description=MODES["torchrl"][1])
    ap.add_argument("--envs", type=arg(parse_cameras), default=[4, 16, 64], help="N values (default 4,16,64)")
    ap.add_argument("--visuals", default="light", help="light (castshadow and reflectance 0, default) and/or "
                    "default (MuJoCo's shadows and reflections)")
    ap.add_argument("--task", default="HalfCheetah-v5", help="Gymnasium MuJoCo task")
    ap.add_argument("--paths", default=",".join(PATHS), help="paths to run (comma-separated)")
    ap.add_argument("--size", type=int, default=84, help="frame height = width (default 84)")
    ap.add_argument("--steps", type=int, default=100, help="timed env steps per round and path")
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds; medians reported")
    ap.add_argument("--serial-max", type=int, default=16, help="largest N for SerialEnv (it renders serially)")
    ap.add_argument("--backend", choices=("auto", "cuda", "cpu"), default="auto")
    ap.add_argument("--torch-threads", type=int, default=0, help="torch.set_num_threads(N) first (0: default)")
    ap.add_argument("--json", help="JSON file (default ~/.cache/gltensor/bench/torchrl_<host>.json)")
    ap.add_argument("--plot", help="PNG file (default: beside the JSON)")
    ap.add_argument("--quick", action="store_true", help="smoke run: N=2, 48x48, 1 round of 4 steps")
    args = ap.parse_args(argv)
    if args.quick:
        args.envs, args.size, args.steps, args.warmup, args.rounds = [2], 48, 4, 1, 1
    visuals = paths_and_visuals(ap, args, PATHS)
    import torch
    if args.torch_threads > 0:
        torch.set_num_threads(args.torch_threads)
    import gymnasium
    import mujoco
    import tensordict
    import torchrl

    import gltensor
    host = socket.gethostname()
    json_path = Path(args.json) if args.json else default_out() / ("torchrl_%s.json" % "".join(
        c if c.isalnum() or c in "-_." else "_" for c in host))
    png_path = Path(args.plot) if args.plot else json_path.with_suffix(".png")
    device = torch.device("cuda" if torch.cuda.is_available() and args.backend != "cpu" else "cpu")
    ctx = gltensor.Context.headless()
    info = machine_info(ctx, torch)
    info.update(mujoco=mujoco.__version__, gymnasium=gymnasium.__version__, torchrl=torchrl.__version__,
                tensordict=tensordict.__version__)
    print("GL: %s | torch %s | torchrl %s | device %s | mujoco %s | cores %s" % (
        ctx.renderer, torch.__version__, torchrl.__version__, device, mujoco.__version__, os.cpu_count()), flush=True)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    def log(m):
        print(m, flush=True)

    def collect():
        ctx.make_current()
        gc.collect()
    argv_list = list(sys.argv[1:] if argv is None else argv)
    results, status = [], "ok"
    try:
        for vis in visuals:
            for n in args.envs:
                log("  %s %s N=%d ..." % (args.task, vis, n))
                case = Case(args, torch, device, vis, n, log, collect)
                try:
                    case.check()
                    case.start()
                    rates = {p: [] for p in case.paths}
                    for r in range(args.rounds):
                        for p in round_order(case.paths, r):
                            with case.timing(p):
                                rates[p].append(time_env_steps(case.step_fn(p), n, args.steps, args.warmup, sync))
                finally:
                    case.close()
                for p, v in rates.items():
                    row = {"task": args.task, "visuals": vis, "n": n, "path": p, "size": args.size,
                           "backend": case.backend if p in ("gltensor", "vector", "layer") else None}
                    if p == "layer":  # not an env: its time per batch step, no env-steps/s (nor a point in the plot)
                        row.update(rounds_us_per_step=[1e6 * n / r for r in v], us_per_step=1e6 * n / median(v))
                    else:
                        row.update(rounds_env_steps_per_s=v, env_steps_per_s=median(v),
                                   us_per_env_step=1e6 / median(v))
                    results.append(row)
                for p, why in case.skipped.items():
                    results.append({"task": args.task, "visuals": vis, "n": n, "path": p, "skipped": why})
                # Gymnasium's viewers leave their MjrContexts to the garbage collector: collect with the bench's
                # own context current (bench.mujoco does the same between cases)
                case = None
                collect()
                log("    " + ", ".join("%s %.0f" % (p, median(v)) for p, v in rates.items() if p != "layer")
                    + " env-steps/s" + ("; the TorchRL layer alone %.0f us per batch step" % (1e6 * n / median(
                        rates["layer"])) if "layer" in rates else ""))
                save_json(json_path, {"benchmark": "torchrl", "status": "partial: killed or still running",
                                      "argv": argv_list, "machine": info, "results": results})
    except CheckFailed as e:
        status = "check failed: %s" % e
        print("FAIL: %s" % e, file=sys.stderr)
    summarise(results)
    report = {"benchmark": "torchrl", "date": datetime.datetime.now().isoformat(timespec="seconds"),
              "argv": argv_list, "machine": info,
              "config": {"envs": args.envs, "visuals": visuals, "task": args.task, "paths": args.paths,
                         "size": args.size, "steps": args.steps, "warmup": args.warmup, "rounds": args.rounds,
                         "serial_max": args.serial_max, "backend": args.backend, "device": str(device)},
              "results": results, "status": status}
    save_json(json_path, report)
    png = plot(results, png_path)
    rows = []
    for r in results:
        if "skipped" in r:
            rows.append([r["visuals"], r["n"], r["path"], "skipped", "-", "-", r["skipped"]])
            continue
        if r["path"] == "layer":
            note = "the layer alone: %.0f us per batch step" % r["us_per_step"]
            if "layer_share" in r:
                note += " = %.1f%% of vector's step" % (100 * r["layer_share"])
            rows.append([r["visuals"], r["n"], "layer [%s]" % r["backend"], "-", "{:,.1f}".format(
                r["us_per_step"] / r["n"]), "-", note])
            continue
        note = "TorchRL layer: %+.1f%% of vector's step" % (100 * r["layer_cost"]) if "layer_cost" in r else ""
        rows.append([r["visuals"], r["n"], r["path"] + (" [%s]" % r["backend"] if r["backend"] else ""),
                     "{:,.0f}".format(r["env_steps_per_s"]), "{:,.0f}".format(r["us_per_env_step"]),
                     "%.2fx" % r["vs_parallel"] if r.get("vs_parallel") else "-", note])
    print_table("TorchRL pixel envs, %s: env-steps/s (physics + N frames on %s + Nature-CNN forward), %dx%d, median "
                "of %d rounds of %d steps" % (args.task, device, args.size, args.size, args.rounds, args.steps),
                ["visuals", "N", "path", "env-steps/s", "us/env-step", "vs parallel", "note"], rows, left=(0, 2))
    print("\nJSON: %s" % json_path)
    if png:
        print("plot: %s" % png)
    return 0 if status == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
