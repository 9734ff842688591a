#!/usr/bin/env python3
"""Stable-Baselines3 PPO on rendering workers whose observations come through shared slots (SlotVecEnv).

    python examples/sb3_slots.py --envs 4 --size 64 --timesteps 2048        # train PPO a little
    python examples/sb3_slots.py --bench --envs 4 --size 84 --steps 200 --json out.json
                                 # stock SubprocVecEnv vs SlotVecEnv on host slots and on CUDA slots
                                 # (--backend picks one), same envs, same run: table + JSON

The workers render gltensor.scene with GL in their own headless contexts (examples/gymnasium_slots.py's
BounceEnv, made with a plain image Box so that the stock SubprocVecEnv runs them too: there each worker
reads its frame back with glReadPixels and the pipe pickles it; with SlotVecEnv the frame goes into the
worker's slot with GL alone, and the trainer reads all slots once per step).
"""
import argparse
import functools
import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

import numpy as np  # noqa: E402

try:
    import gltensor  # noqa: E402
except ImportError:  # running from a checkout without installing: use the in-place build
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
    import gltensor  # noqa: E402
import gymnasium  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gymnasium_slots import BounceEnv  # noqa: E402  (importable by the spawn/forkserver workers)


class HostBounceEnv(BounceEnv):
    """BounceEnv with a plain image Box; `host=True`: observations read back with glReadPixels (what
    SubprocVecEnv needs), else a GLImage (what SlotVecEnv writes into the slot on the GPU)."""

    def __init__(self, size: int = 64, camera: int = 0, host: bool = False, episode: int = 50) -> None:
        super().__init__(size, camera, episode=episode)
        self.observation_space = gymnasium.spaces.Box(0, 255, (size, size, 3), np.uint8)
        self.host = host

    def _obs(self, obs: Any) -> Any:
        return np.ascontiguousarray(self.target.read_pixels(flip=True)[..., :3]) if self.host else obs

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        obs, info = super().reset(seed=seed, options=options)
        return self._obs(obs), info

    def step(self, action: Any) -> Any:
        obs, *rest = super().step(action)
        return (self._obs(obs), *rest)


def make_env(size: int, host: bool, k: int) -> Any:
    return functools.partial(HostBounceEnv, size, camera=k, host=host)


def bench_main(args: argparse.Namespace) -> int:
    from gltensor.sb3 import bench

    # The stock path gets host observations (glReadPixels in each worker, pickled through the pipe), the slot
    # path GL images: the same scene, cameras and seeds either way.
    backends = ("cpu", "cuda") if args.backend == "auto" else (args.backend,)
    results = []
    for n in args.envs_list or [args.envs]:
        r = bench(functools.partial(make_env, args.size, True), n, args.steps,
                  make_slot_env=functools.partial(make_env, args.size, False), start_method=args.start_method,
                  backends=backends, repeats=args.repeats)
        r["size"] = args.size
        results.append(r)
    slot_paths = [p for p in results[0]["speedup"]]
    print("| N | size | SubprocVecEnv (µs/step) | " + " | ".join(f"{p}: µs/step, speed-up" for p in slot_paths)
          + " | exact |")
    print("| --- | --- | --- | " + " | ".join("---" for _ in slot_paths) + " | --- |")
    for r in results:
        cells = [f"{r[p]['us_per_step']:,.0f}, {r['speedup'][p]:.2f}x" for p in slot_paths]
        print(f"| {r['n_envs']} | {r['size']}² | {r['SubprocVecEnv']['us_per_step']:,.0f} | " + " | ".join(cells)
              + f" | {all(r['exact'].values())} |")
    for backend, why in results[0]["skipped"].items():
        print(f"SlotVecEnv[{backend}] not measured: {why}")
    print("JSON " + json.dumps(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
        print(f"wrote {args.json}")
    return 0 if all(all(r["exact"].values()) for r in results) else 1


def train_main(args: argparse.Namespace) -> int:
    import torch
    from stable_baselines3 import PPO

    from gltensor.sb3 import SlotVecEnv

    torch.manual_seed(0)
    venv = SlotVecEnv([make_env(args.size, False, k) for k in range(args.envs)], start_method=args.start_method,
                      backend=args.backend)
    try:
        print(f"SlotVecEnv: {args.envs} workers, slots {venv.slots!r}")
        n_steps = max(8, args.timesteps // (2 * args.envs))
        model = PPO("CnnPolicy", venv, n_steps=n_steps, batch_size=min(64, n_steps * args.envs), n_epochs=2,
                    seed=0, verbose=0, device="auto")
        model.learn(total_timesteps=args.timesteps)
        print(f"PPO: {model.num_timesteps} timesteps on {model.device}, {venv.reads} slot reads "
              f"(one per step for all {args.envs} workers)")
    finally:
        venv.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--envs", type=int, default=4)
    ap.add_argument("--envs-list", type=int, nargs="*", help="--bench: several N in one run")
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--timesteps", type=int, default=256, help="PPO timesteps")
    ap.add_argument("--backend", choices=("auto", "cuda", "cpu"), default="auto")
    ap.add_argument("--start-method", choices=("spawn", "forkserver", "fork"), default="forkserver")
    ap.add_argument("--bench", action="store_true", help="time stock SubprocVecEnv vs SlotVecEnv")
    ap.add_argument("--steps", type=int, default=200, help="--bench: timed steps per run")
    ap.add_argument("--repeats", type=int, default=3, help="--bench: runs (the median is reported)")
    ap.add_argument("--json", help="--bench: write the raw figures here")
    args = ap.parse_args(argv)
    if args.envs < 1 or args.size < 36:
        ap.error("--envs must be positive and --size at least 36 (SB3's CNN)")
    return bench_main(args) if args.bench else train_main(args)


if __name__ == "__main__":
    sys.exit(main())
