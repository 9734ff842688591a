"""The TorchRL layer's own time per step (gltensor.torchrl.GymBatchEnv over MujocoVectorEnv), this tree's against an
earlier revision's, in one process, alternating round by round.

    python3 tools/torchrl_layer_ab.py --before-rev REV [--envs 4,16,64] [--size 16] [--json out.json]

Two measures, each the median over --rounds rounds, the before and after envs (and MujocoVectorEnv alone) timed in
turn within each round:

- layer: MujocoVectorEnv.step answered from a cached result of a real step (no physics, no render), so what is timed
  is the layer alone, in CPU time of the calling thread (time.thread_time: a shared machine's other jobs do not
  count, as they would in wall time): TorchRL's EnvBase wrapper and gltensor's _step around the env. Calls timed: step_and_maybe_reset
  (what TorchRL's collectors call each frame, the bench loop: set "action", step, keep the next tensordict), step on
  a fresh tensordict, the same through TransformedEnv(env, RewardSum()), and rollout (per step, actions from the
  action spec as rollout() draws them without a policy).
- real: the same step_and_maybe_reset loop with the environments' physics and render, against MujocoVectorEnv.step
  alone (its own env, the same N, size and actions): the layer's cost as a fraction of the env's own step, in wall
  time and in CPU time of the process (all its threads: physics, llvmpipe's). On a CPU machine the render is slow
  and the machine may be shared, so this fraction is small and noisy there; the layer measure is the one that
  carries over.

The before revision's torchrl.py (``git show REV:python/gltensor/torchrl.py``) is imported as a module of this
tree's gltensor package, so both sides run over the same MujocoVectorEnv.
"""

import argparse
import datetime
import importlib.util
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

ROOT = Path(__file__).resolve().parent.parent
LIGHT = {"shadow": False, "reflection": False}


def load_before(rev):
    src = subprocess.run(["git", "-C", str(ROOT), "show", "%s:python/gltensor/torchrl.py" % rev], check=True,
                         capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "torchrl_before.py"
    path.write_text(src)
    import gltensor  # noqa: F401  (the package the module's relative imports resolve in)
    spec = importlib.util.spec_from_file_location("gltensor._torchrl_before", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


class Side:
    """One GymBatchEnv (before or after) and its timed loops; stub() swaps its vector env's step for a cached one."""

    def __init__(self, module, n, size, task, pixels_only):
        import torch
        self.torch = torch
        self.env = module.GymBatchEnv(task, n, height=size, width=size, render_flags=LIGHT, pixels_only=pixels_only)
        self.venv = self.env.venv
        self.real_step = self.venv.step
        self.td = self.env.reset(seed=0)

    def stub(self, acts):
        cached = self.real_step(acts[0].numpy())
        self.venv.step = lambda a: cached

    def unstub(self):
        self.venv.step = self.real_step
        self.td = self.env.reset(seed=0)

    def loop_samr(self, acts, steps, clocks=(time.thread_time,)):
        env, td = self.env, self.td
        t0 = [c() for c in clocks]
        for k in range(steps):
            td["action"] = acts[k % len(acts)]
            _, td = env.step_and_maybe_reset(td)
        dt = [c() - t for c, t in zip(clocks, t0)]
        self.td = td
        return dt[0] / steps * 1e6 if len(dt) == 1 else [d / steps * 1e6 for d in dt]

    def loop_step(self, acts, steps):
        env, base = self.env, self.td.exclude("next")
        t0 = time.thread_time()
        for k in range(steps):
            td = base.copy()
            td["action"] = acts[k % len(acts)]
            env.step(td)
        return (time.thread_time() - t0) / steps * 1e6

    def close(self):
        self.env.close()


def med(values):
    return statistics.median(values)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before-rev", required=True, help="git revision of the 'before' torchrl.py")
    ap.add_argument("--envs", default="4,16,64")
    ap.add_argument("--size", type=int, default=16, help="frame height = width (default 16: a cheap render)")
    ap.add_argument("--task", default="HalfCheetah-v5")
    ap.add_argument("--state", action="store_true", help="pixels_only=False (the state entry too)")
    ap.add_argument("--steps", type=int, default=1000, help="layer measure: steps per round and call")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--real-steps", type=int, default=60, help="real measure: steps per round")
    ap.add_argument("--real-rounds", type=int, default=7)
    ap.add_argument("--json")
    args = ap.parse_args()

    import tensordict
    import torch
    import torchrl
    from torchrl.envs import RewardSum, TransformedEnv

    import gltensor.torchrl as after
    from gltensor.mujoco import MujocoVectorEnv
    torch.set_num_threads(1)
    before = load_before(args.before_rev)
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "python/gltensor/torchrl.py"],
                                capture_output=True, text=True).stdout.strip())
    import gltensor
    machine = {"host": socket.gethostname(), "gpu_name": None, "cpu": cpu_model(), "cores": os.cpu_count(),
               "gl_renderer": gltensor.Context.headless().renderer,
               "load_average_at_start": os.getloadavg(), "python": platform.python_version(),
               "torch": torch.__version__, "torchrl": torchrl.__version__, "tensordict": tensordict.__version__,
               "device": "cpu (no GPU: the CPU backend, Mesa llvmpipe)"}
    print("before: %s | after: %s%s | %s, %d cores, load %.1f | torch %s torchrl %s tensordict %s" % (
        args.before_rev, head, " + working tree" if dirty else "", machine["cpu"], machine["cores"],
        os.getloadavg()[0], torch.__version__, torchrl.__version__, tensordict.__version__), flush=True)
    results = []
    for n in [int(x) for x in args.envs.split(",")]:
        g = torch.Generator().manual_seed(0)
        sides = {"before": Side(before, n, args.size, args.task, not args.state),
                 "after": Side(after, n, args.size, args.task, not args.state)}
        acts = torch.rand(64, n, sides["after"].env.action_spec.shape[-1], generator=g) * 2 - 1
        try:
            # -- layer: the vector env's step answered from a cached result -------------------------------------
            for s in sides.values():
                s.stub(acts)
            tenv = {k: TransformedEnv(s.env, RewardSum()) for k, s in sides.items()}
            ttd = {k: e.reset() for k, e in tenv.items()}

            def transformed(k, steps):
                env, td = tenv[k], ttd[k]
                t0 = time.thread_time()
                for i in range(steps):
                    td["action"] = acts[i % len(acts)]
                    _, td = env.step_and_maybe_reset(td)
                ttd[k] = td
                return (time.thread_time() - t0) / steps * 1e6

            def rollout(k, steps):
                t0 = time.thread_time()
                sides[k].env.rollout(steps, break_when_any_done=False)
                return (time.thread_time() - t0) / steps * 1e6

            calls = {"step_and_maybe_reset": lambda k, st: sides[k].loop_samr(acts, st),
                     "step (fresh tensordict)": lambda k, st: sides[k].loop_step(acts, st),
                     "TransformedEnv(RewardSum).step_and_maybe_reset": transformed,
                     "rollout (per step)": lambda k, st: rollout(k, max(st // 4, 50))}
            layer = {(c, k): [] for c in calls for k in sides}
            for c, f in calls.items():  # warm-up
                for k in sides:
                    f(k, 50)
            for _ in range(args.rounds):
                for c, f in calls.items():
                    for k in sides:
                        layer[(c, k)].append(f(k, args.steps))
            for c in calls:
                b, a = med(layer[(c, "before")]), med(layer[(c, "after")])
                results.append({"n": n, "measure": "layer", "call": c, "before_us": b, "after_us": a,
                                "before_rounds_us": layer[(c, "before")], "after_rounds_us": layer[(c, "after")],
                                "saved_us": b - a, "after_over_before": a / b})
                print("  N=%-3d layer  %-48s before %7.1f us  after %7.1f us  (%.2fx)" % (n, c, b, a, a / b),
                      flush=True)
            for s in sides.values():
                s.unstub()
            # -- real: physics and render, against MujocoVectorEnv alone ----------------------------------------
            venv = MujocoVectorEnv(args.task, n, height=args.size, width=args.size, render_flags=LIGHT,
                                   render_only=not args.state)
            try:
                venv.reset(seed=0)

                clocks = (time.perf_counter, time.process_time)

                def alone(steps):
                    t0 = [c() for c in clocks]
                    for k in range(steps):
                        venv.step(acts[k % len(acts)])
                    return [(c() - t) / steps * 1e6 for c, t in zip(clocks, t0)]
                real = {"vector alone": [], "before": [], "after": []}
                alone(5)
                for s in sides.values():
                    s.loop_samr(acts, 5, clocks)
                for _ in range(args.real_rounds):
                    real["vector alone"].append(alone(args.real_steps))
                    for k, s in sides.items():
                        real[k].append(s.loop_samr(acts, args.real_steps, clocks))
            finally:
                venv.close()
            for i, clock in enumerate(("wall", "process_cpu")):
                rounds = {k: [r[i] for r in v] for k, v in real.items()}
                v = med(rounds["vector alone"])
                row = {"n": n, "measure": "real", "clock": clock,
                       "call": "step_and_maybe_reset vs MujocoVectorEnv.step", "vector_us": v,
                       "vector_rounds_us": rounds["vector alone"]}
                for k in ("before", "after"):
                    row[k + "_us"] = med(rounds[k])
                    row[k + "_rounds_us"] = rounds[k]
                    row[k + "_layer_fraction"] = med(rounds[k]) / v - 1
                results.append(row)
                print("  N=%-3d real (%s) vector alone %8.1f us | through TorchRL: before %8.1f us (%+.1f%%), after "
                      "%8.1f us (%+.1f%%)" % (n, clock, v, row["before_us"], 100 * row["before_layer_fraction"],
                                              row["after_us"], 100 * row["after_layer_fraction"]), flush=True)
        finally:
            for s in sides.values():
                s.close()
    machine["load_average_at_end"] = os.getloadavg()
    report = {"tool": "tools/torchrl_layer_ab.py", "date": datetime.datetime.now().isoformat(timespec="seconds"),
              "argv": sys.argv[1:], "before_rev": args.before_rev, "after": head + (" + working tree" if dirty else ""),
              "config": {"task": args.task, "size": args.size, "pixels_only": not args.state, "steps": args.steps,
                         "rounds": args.rounds, "real_steps": args.real_steps, "real_rounds": args.real_rounds,
                         "torch_threads": 1},
              "machine": machine, "results": results,
              "note": "CPU machine, CPU backend: these are not GPU figures. us are per batch step (N envs); the layer "
                      "measure in CPU time of the calling thread, the real one in wall time."}
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
        print("JSON: %s" % args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
