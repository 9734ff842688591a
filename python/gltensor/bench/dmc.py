"""`python -m gltensor.bench dmc`: dm_control suite steps, each env's own step() against DmControlBatch's
threaded physics, env-steps/s.

    python -m gltensor.bench dmc [--task cheetah-run] [--envs 4,16,64] [--steps 100] [--rounds 3] [--size 84]
                                 [--paths ...] [--threads 0] [--json PATH] [--quick]

Paths (N suite envs loaded with task_kwargs={"random": seed + k}, the same actions on every path):
  per-env        each env's own control.Environment.step() in turn, in one thread (no render): dm_control's loop
  threaded       gltensor.mujoco._dmc_physics.ThreadedDmcPhysics.step (no render): each task per env in Python, every
                 env's MuJoCo step in mjstep.c's C threads, the TimeSteps equal to per-env's (checked first)
  physics        the floor of `threaded`: the same C threads stepping the N envs (dm_control's legacy step) with
                 no task work, no TimeStep, no render
  batch          DmControlBatch on its batched path: the threaded step, each env drawn as its step ends, one read
                 (pixels on the backend's device: CUDA where MuJoCo's EGL runs on it)
  batch-per-env  DmControlBatch(physics="per-env"): each env's own step(), then the batch drawn and read
  batch-auto     DmControlBatch at its default, physics="auto": it times both paths above on its first steps (in the
                 check, before anything is timed here) and keeps the faster; the JSON says which it kept
Episodes end on their own (dm_control's time limit) and every path steps on through the auto-reset, as a training
loop does. Figures: env-steps/s (N x steps / seconds), medians of --rounds rounds, paths interleaved in each
round, one synchronisation at the end of each timed loop. Output: a table and JSON (default under
~/.cache/gltensor/bench).
"""
import argparse
import datetime
import os
import sys
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np  # noqa: E402

from . import MODES  # noqa: E402
from .measure import CheckFailed, median, paired_ratio, round_order  # noqa: E402
from .options import arg, parse_cameras  # noqa: E402
from .report import machine_info, print_table, save_json  # noqa: E402

PATHS = ("per-env", "threaded", "physics", "batch", "batch-per-env", "batch-auto")
PHYSICS_ONLY = ("per-env", "threaded", "physics")


def light(physics):
    """No shadows, no reflections (the `light` visuals of `gltensor.bench mujoco`), on every path alike."""
    model = physics.model.ptr
    model.light_castshadow[:] = 0
    model.mat_reflectance[:] = 0


class Case:
    """The paths of one N: built once, checked, timed in interleaved rounds, closed."""

    def __init__(self, args, n):
        from dm_control import suite

        from gltensor.mujoco._dmc_physics import ThreadedDmcPhysics
        from gltensor.mujoco import DmControlBatch

        self.n, self.args = n, args
        domain, task = args.task.split("-", 1)
        threads = args.threads or None
        want = [p for p in PATHS if p in args.paths]

        def load():
            return [suite.load(domain, task, task_kwargs={"random": args.seed + k}) for k in range(n)]

        self.envs, self.closers = {}, []
        # per-env is also the reference of the check, so it is always built
        self.envs["per-env"] = load()
        self.closers += [e.close for e in self.envs["per-env"]]
        if "threaded" in want or "physics" in want:
            envs = load()
            self.closers += [e.close for e in envs]
            self.envs["threaded"] = ThreadedDmcPhysics(envs, threads)
            self.closers.insert(0, self.envs["threaded"].close)
        self.threads = self.envs["threaded"].threads if "threaded" in self.envs else None
        for key, mode in (("batch", "batched"), ("batch-per-env", "per-env"), ("batch-auto", "auto")):
            if key in want:
                b = DmControlBatch(domain, task, n, args.size, args.size, camera_id=0, seed=args.seed,
                                   threads=threads if mode == "batched" else None, backend=args.backend,
                                   physics=mode)
                if args.visuals == "light":
                    for p in b.physics:
                        light(p)
                self.envs[key] = b
                self.closers.insert(0, b.close)
        self.backend = next((self.envs[k].renderer.backend for k in ("batch", "batch-per-env") if k in self.envs),
                            None)
        self.paths = want
        spec = self.envs["per-env"][0].action_spec()
        self.actions = np.random.default_rng(0).uniform(spec.minimum, spec.maximum, (64, n) + spec.shape)

    def check(self, steps=12):
        """The threaded TimeSteps must equal each env's own step()'s, and the batch's pixels the per-env
        batch's, before anything is timed. With batch-auto, as many steps as its first trial takes, then steps of
        its own until its second trial has made the choice final: every timed step is the batch as it then runs."""
        ref = self.envs["per-env"]
        if "batch-auto" in self.envs and self.envs["batch-auto"].physics_trial is not None:
            steps = max(steps, self.envs["batch-auto"].physics_trial.length)
        for e in ref:
            e.reset()
        others = {k: v for k, v in self.envs.items() if k in ("threaded", "batch", "batch-per-env", "batch-auto")}
        for key, x in others.items():
            if key == "threaded":
                for e in x.envs:
                    e.reset()
            else:
                x.reset()
        for t in range(steps):
            a = self.actions[t]
            want = [e.step(x) for e, x in zip(ref, a)]
            pixels = {}
            for key, x in others.items():
                got = x.step(a)
                if key != "threaded":
                    got, pixels[key] = got[0], got[1].cpu().numpy()
                for k, (w, g) in enumerate(zip(want, got)):
                    same = w.step_type == g.step_type and w.reward == g.reward and w.discount == g.discount and all(
                        np.array_equal(w.observation[o], g.observation[o]) for o in w.observation)
                    if not same:
                        raise CheckFailed(f"{key}: env {k}'s TimeStep differs from its own step()'s at step {t} "
                                          f"(N={self.n})")
            first = next(iter(pixels), None)
            for key in pixels:
                if not np.array_equal(pixels[key], pixels[first]):
                    raise CheckFailed(f"{key}: pixels differ from {first}'s at step {t} (N={self.n})")
        auto = self.envs.get("batch-auto")
        trial = getattr(auto, "physics_trial", None)
        while trial is not None and not trial.settled:
            auto.step(self.actions[t % len(self.actions)])
            t += 1

    def step_fn(self, key):
        acts = self.actions
        x = self.envs["threaded" if key == "physics" else key]
        if key == "per-env":
            def step(k):
                for e, a in zip(x, acts[k % len(acts)]):
                    e.step(a)
        elif key == "threaded":
            def step(k):
                x.step(acts[k % len(acts)])
        elif key == "physics":
            stepper = x._stepper
            plans = np.array([x._plan(p) for p in x.physics], dtype=np.uint8)  # what Physics.step would run
            nsteps = np.array([e._n_sub_steps for e in x.envs], dtype=np.int32)

            def step(k):
                stepper.start(0, plans.ctypes.data, nsteps.ctypes.data)
                stepper.wait()
        else:
            def step(k):
                x.step(acts[k % len(acts)])
        return step

    def close(self):
        for c in self.closers:
            c()


def dm_control_version():
    from importlib import metadata
    try:
        return metadata.version("dm_control")
    except metadata.PackageNotFoundError:
        return None


def threads_note(threads):
    return "" if threads is None else f"{threads} thread" + ("" if threads == 1 else "s")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m gltensor.bench dmc", description=MODES["dmc"][1])
    ap.add_argument("--task", default="cheetah-run", help="dm_control domain-task (default cheetah-run)")
    ap.add_argument("--envs", type=arg(parse_cameras), default=[4, 16, 64], help="N values (default 4,16,64)")
    ap.add_argument("--paths", default=",".join(PATHS), help="paths to run (comma-separated): " + ", ".join(PATHS))
    ap.add_argument("--steps", type=int, default=100, help="timed env steps per round and path")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds; medians reported")
    ap.add_argument("--size", type=int, default=84, help="image height = width of the batch paths (default 84)")
    ap.add_argument("--visuals", choices=("default", "light"), default="light",
                    help="the batch paths' visuals: light (default: no shadows, no reflections) or MuJoCo's default")
    ap.add_argument("--threads", type=int, default=0, help="physics threads (0: the batched path's default)")
    ap.add_argument("--backend", choices=("auto", "cuda", "cpu"), default="auto")
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--json", help="JSON file (default ~/.cache/gltensor/bench/dmc_<host>.json)")
    ap.add_argument("--quick", action="store_true", help="smoke run: N=2, 32x32, 1 round of 4 steps")
    args = ap.parse_args(argv)
    if args.quick:
        args.envs, args.size, args.steps, args.warmup, args.rounds = [2], 32, 4, 1, 1
    args.paths = [p for p in args.paths.split(",") if p]
    unknown = sorted(set(args.paths) - set(PATHS))
    if unknown:
        ap.error(f"unknown paths {unknown}; choose from {', '.join(PATHS)}")
    import socket

    import mujoco
    import torch

    import gltensor
    from gltensor.bench.mujoco import default_out, time_env_steps
    try:
        import dm_control  # noqa: F401 (installed?)
    except ImportError as exc:
        print(f"dm_control is not installed ({exc}): pip install dm_control", file=sys.stderr)
        return 2
    host = socket.gethostname()
    json_path = Path(args.json) if args.json else default_out() / ("dmc_%s.json" % "".join(
        c if c.isalnum() or c in "-_." else "_" for c in host))
    ctx = gltensor.Context.headless()
    info = machine_info(ctx, torch)
    info["mujoco"], info["dm_control"] = mujoco.__version__, dm_control_version()
    print("GL: %s | mujoco %s | dm_control %s | cores %s" % (ctx.renderer, mujoco.__version__, info["dm_control"],
                                                             os.cpu_count()), flush=True)

    def sync():
        if torch.cuda.is_available():
            torch.cuda.synchronize()

    results, status = [], "ok"
    try:
        for n in args.envs:
            print(f"  {args.task} N={n} ...", flush=True)
            case = Case(args, n)
            try:
                case.check()
                rates = {p: [] for p in case.paths}
                for r in range(args.rounds):
                    for p in round_order(case.paths, r):
                        rates[p].append(time_env_steps(case.step_fn(p), n, args.steps, args.warmup, sync))
            finally:
                case.close()
            auto = case.envs.get("batch-auto")
            for p, v in rates.items():
                results.append({"task": args.task, "n": n, "path": p, "threads": case.threads
                                if p in ("threaded", "physics", "batch") else (None if p == "per-env" else
                                                                               auto.threads if p == "batch-auto" else 1),
                                "physics_path": auto.physics_path if p == "batch-auto" else None,
                                "physics_path_reason": auto.physics_path_reason if p == "batch-auto" else None,
                                "size": None if p in PHYSICS_ONLY else args.size,
                                "backend": None if p in PHYSICS_ONLY else case.backend,
                                "rounds_env_steps_per_s": v, "env_steps_per_s": median(v),
                                "us_per_env_step": 1e6 / median(v)})
            print("    " + ", ".join("%s %.0f" % (p, median(v)) for p, v in rates.items()) + " env-steps/s",
                  flush=True)
    except CheckFailed as e:
        status = "check failed: %s" % e
        print("FAIL: %s" % e, file=sys.stderr)
    # the batch paths' renderer backend (CUDA tensors where MuJoCo's EGL runs on a CUDA device)
    info["backend"] = next((r["backend"] for r in results if r["backend"]), "cpu")
    base = {(r["n"], r["path"]): r for r in results}
    for r in results:  # physics paths against each env's own step(); the batch against the per-env batch
        ref = ("per-env" if r["path"] in PHYSICS_ONLY else "batch-per-env")
        if (r["n"], ref) in base and r["path"] != ref:
            other = base[(r["n"], ref)]
            r["vs_" + ref.replace("-", "_")] = r["env_steps_per_s"] / other["env_steps_per_s"]
            # and as the median of each round's ratio (paths timed in the same round: measure.paired_ratio)
            paired = paired_ratio(r["rounds_env_steps_per_s"], other["rounds_env_steps_per_s"])
            if paired is not None:
                r["vs_" + ref.replace("-", "_") + "_paired"] = paired
    report = {"benchmark": "dmc", "date": datetime.datetime.now().isoformat(timespec="seconds"),
              "argv": sys.argv[1:] if argv is None else list(argv), "machine": info,
              "config": {k: getattr(args, k) for k in ("task", "envs", "paths", "steps", "warmup", "rounds", "size",
                                                       "visuals", "threads", "backend", "seed")},
              "results": results, "status": status}
    save_json(json_path, report)
    rows = []
    for r in results:
        ratio = r.get("vs_per_env") or r.get("vs_batch_per_env")
        rows.append([r["n"], r["path"] + (f" [{r['backend']}]" if r["backend"] else ""),
                     "{:,.0f}".format(r["env_steps_per_s"]), "{:,.0f}".format(r["us_per_env_step"]),
                     "%.2fx" % ratio if ratio else "-",
                     threads_note(r["threads"]) + (f", kept {r['physics_path']}" if r.get("physics_path") else "")])
    print_table(f"dm_control {args.task}: env-steps/s, median of {args.rounds} rounds of {args.steps} steps "
                f"(physics paths: no render; batch paths: {args.size}x{args.size}, {args.visuals} visuals)",
                ["N", "path", "env-steps/s", "us/env-step", "vs its per-env path", "note"], rows, left=(1,))
    print("\nJSON: %s" % json_path)
    return 0 if status == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
