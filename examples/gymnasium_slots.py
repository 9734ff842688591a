#!/usr/bin/env python3
"""Many engine processes, one batch: Gymnasium's stock AsyncVectorEnv with shared slots, and a CNN policy.

    python examples/gymnasium_slots.py --envs 4 --size 64 --steps 200

Each worker process renders gltensor.scene (a bouncing sphere, a spinning cube) into a texture of its own
headless GL context and returns `gltensor.GLImage(texture)` as its observation; its observation space is a
`gltensor.gymnasium.SlotSpace`, so `AsyncVectorEnv(..., shared_memory=True)` writes the images into shared
slots with GL alone (no CUDA, no pickled pixels) and each step returns all of them as one
(N, H, W, 3) uint8 torch tensor: on the trainer's GPU with the CUDA backend, in host memory on the CPU one.

The task: act 1 while the sphere is in the upper half of its bounce, else 0 (reward 1 for the right action).
A small CNN policy learns it from the expert's action that each env reports in `info` (imitation, a plain
PyTorch loop). The first batch is checked against every worker's own glReadPixels (CRC32) before training.
"""
import argparse
import functools
import math
import os
import sys
import time
import zlib
from pathlib import Path
from typing import Any

os.environ.setdefault("PYOPENGL_PLATFORM", "egl")  # before anything imports OpenGL

import numpy as np  # noqa: E402

try:
    import gltensor  # noqa: E402
except ImportError:  # running from a checkout without installing: use the in-place build
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
    import gltensor  # noqa: E402
import gymnasium  # noqa: E402

from gltensor.gymnasium import SlotSpace  # noqa: E402  (importable: spawn workers resolve it by name)


class BounceEnv(gymnasium.Env):  # type: ignore[type-arg,misc,unused-ignore]
    """One camera on the scene, its own clock; the GL context is made in the worker, at the first reset."""

    def __init__(self, size: int = 64, camera: int = 0, backend: str = "auto", episode: int = 50,
                 check: bool = False) -> None:
        self.observation_space = SlotSpace(size, size, 3, backend=backend)
        self.action_space = gymnasium.spaces.Discrete(2)
        self.size, self.camera, self.episode, self.check = size, camera, episode, check
        self.ctx: Any = None
        self.t, self.steps, self.speed = 0.0, 0, 1.0

    def _render(self) -> gltensor.GLImage:
        from gltensor.scene import RenderTarget, Scene

        if self.ctx is None:  # a GL context never pickles: make it here, in the worker
            self.ctx = gltensor.Context.headless()
            self.ctx.make_current()
            self.scene = Scene(self.size, self.size)
            self.target = RenderTarget(self.size, self.size)
        self.scene.render(self.t, fbo=self.target.fbo, viewport=self.target.viewport, camera=self.camera)
        return gltensor.GLImage(self.target.texture)

    def _expert(self) -> int:
        return int(abs(math.sin(2.0 * self.t)) > 0.5)

    def _info(self) -> dict[str, Any]:
        info: dict[str, Any] = {"expert": self._expert()}
        if self.check:  # what the trainer must see: this worker's own glReadPixels, RGB, top row first
            info["crc"] = zlib.crc32(np.ascontiguousarray(self.target.read_pixels(flip=True)[..., :3]).tobytes())
        return info

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        super().reset(seed=seed)
        self.t, self.steps = float(self.np_random.uniform(0.0, 10.0)), 0
        self.speed = float(self.np_random.uniform(0.5, 1.5))
        obs = self._render()
        return obs, self._info()

    def step(self, action: Any) -> Any:
        reward = float(int(action) == self._expert())
        self.t += self.speed / 15.0
        self.steps += 1
        obs = self._render()
        return obs, reward, False, self.steps >= self.episode, self._info()

    def close(self) -> None:
        if self.ctx is not None:
            self.ctx.make_current()
            self.target.close()
            self.scene.close()
            self.ctx.close()
            self.ctx = None


def make_policy(torch: Any, size: int) -> Any:
    nn = torch.nn
    conv = nn.Sequential(nn.Conv2d(3, 16, 5, stride=2), nn.ReLU(), nn.Conv2d(16, 32, 3, stride=2), nn.ReLU(),
                         nn.Conv2d(32, 32, 3, stride=2), nn.ReLU(), nn.Flatten())
    with torch.no_grad():
        n = conv(torch.zeros(1, 3, size, size)).shape[1]
    return nn.Sequential(conv, nn.Linear(n, 64), nn.ReLU(), nn.Linear(64, 2))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--envs", type=int, default=4, help="worker processes")
    ap.add_argument("--size", type=int, default=64, help="square image size per env")
    ap.add_argument("--steps", type=int, default=300, help="training steps (one batch of all envs each)")
    ap.add_argument("--backend", choices=("auto", "cuda", "cpu"), default="auto", help="the slots' backend")
    ap.add_argument("--context", choices=("spawn", "forkserver", "fork"), default="spawn",
                    help="multiprocessing start method of the workers")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.envs < 1 or args.size < 16 or args.steps < 1:
        ap.error("--envs and --steps must be positive, --size at least 16")
    import torch

    torch.manual_seed(args.seed)
    fns = [functools.partial(BounceEnv, args.size, camera=k, backend=args.backend, check=True)
           for k in range(args.envs)]
    envs = gymnasium.vector.AsyncVectorEnv(fns, shared_memory=True, context=args.context)
    try:
        obs, info = envs.reset(seed=args.seed)
        slots = envs.observations.slots  # the SlotBatch that AsyncVectorEnv keeps owns the SharedSlots
        device = obs.device
        print(f"{args.envs} workers ({args.context}), slots: backend {slots.backend}, batch {tuple(obs.shape)} "
              f"{obs.dtype} on {device}")
        got = [zlib.crc32(np.ascontiguousarray(obs[k].cpu().numpy()).tobytes()) for k in range(args.envs)]
        if got != [int(c) for c in info["crc"]]:
            print(f"FAIL: the batch differs from the workers' glReadPixels: {got} vs {list(info['crc'])}",
                  file=sys.stderr)
            return 1
        print(f"check: the batch equals every worker's glReadPixels exactly ({len(set(got))} distinct images)")
        envs.set_attr("check", False)  # later steps skip the CRC (a readback in every worker)
        if device.type == "cpu":
            torch.set_num_threads(1)  # torch's spinning OpenMP threads would starve the workers' renderers
        policy = make_policy(torch, args.size).to(device)
        opt = torch.optim.Adam(policy.parameters(), lr=1e-3)
        rewards: list[float] = []
        start = time.perf_counter()
        for step in range(args.steps):
            x = obs.permute(0, 3, 1, 2).float().div_(255.0)  # (N, 3, H, W) in [0, 1], on the batch's device
            logits = policy(x)
            target = torch.as_tensor(np.asarray(info["expert"]), device=device, dtype=torch.long)
            loss: Any = torch.nn.functional.cross_entropy(logits, target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            action = logits.argmax(1).cpu().numpy()
            obs, reward, _, _, info = envs.step(action)
            rewards.append(float(np.mean(reward)))
            if (step + 1) % max(1, args.steps // 5) == 0 or step + 1 == args.steps:
                recent = float(np.mean(rewards[-max(1, args.steps // 5):]))
                print(f"step {step + 1:5d}  loss {loss.item():.3f}  reward {recent:.2f}")
        elapsed = time.perf_counter() - start
        print(f"trained: {args.steps} steps of {args.envs} envs in {elapsed:.1f} s "
              f"({args.steps * args.envs / elapsed:.0f} frames/s, render + slots + policy update)")
        print(f"reward: first fifth {np.mean(rewards[:max(1, args.steps // 5)]):.2f}, "
              f"last fifth {np.mean(rewards[-max(1, args.steps // 5):]):.2f}")
    finally:
        envs.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
