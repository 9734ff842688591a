#!/usr/bin/env python3
"""A vectorised environment: N cameras rendered per step, handed to torch as one (N, H, W, C) batch.

    python examples/vector_env.py --envs 16 --size 128 --mode atlas --steps 100

Each env has its own camera (index k of gltensor.scene's camera circle) and its own state (a clock
running at its own speed, reset at the end of an episode). One GL program and one vertex buffer draw
every env (`Scene.render(t, fbo=..., viewport=..., camera=k)`); what differs between the modes is
where the pixels go and how they reach torch:

  --mode batch : one texture per env (`RenderTarget`), read together by `gltensor.Batch` (one
                 GL->CUDA handoff for all of them on the GPU).
  --mode atlas : one texture holding a grid of tiles, env k drawn into `atlas.viewport(k)`, read and
                 split into (N, h, w, C) by `gltensor.Atlas` (one handoff, one texture).

`step()` returns `torch.from_dlpack(...)` of that read: on the GPU a CUDA tensor with no trip through
host memory; on a machine without a GPU (Mesa llvmpipe) a CPU tensor, same code. The first step is
checked byte for byte against glReadPixels of each camera before anything is timed.
"""
import argparse
import math
import os
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any

os.environ.setdefault("PYOPENGL_PLATFORM", "egl")  # before anything imports OpenGL

import numpy as np  # noqa: E402

try:
    import gltensor  # noqa: E402
except ImportError:  # running from a checkout without installing: use the in-place build
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
    import gltensor  # noqa: E402
from gltensor.scene import RenderTarget, Scene  # noqa: E402
from OpenGL import GL  # noqa: E402


class VectorEnv:
    """N envs, one camera each; `step()` -> torch uint8 tensor (N, size, size, 4), top row first.

    Needs a GL context current in this thread (e.g. `gltensor.Context.headless()`); everything here
    lives in that context. backend: "auto" | "cuda" | "cpu" (see gltensor.Capture).
    """

    def __init__(self, n_envs: int, size: int, mode: str = "batch", *, backend: str = "auto",
                 episode_steps: int = 200, dt: float = 1 / 30, seed: int = 0,
                 read_options: dict[str, Any] | None = None) -> None:
        import torch
        if mode not in ("batch", "atlas"):
            raise ValueError("mode must be 'batch' or 'atlas', got %r" % (mode,))
        self.torch = torch
        self.n, self.size, self.mode = int(n_envs), int(size), mode
        self.episode_steps, self.dt = episode_steps, dt
        # Conversions for the one read (e.g. channels="rgb", dtype="float32", layout="chw"): done in the copy.
        self.read_options = dict(read_options or {})
        self.rng = np.random.default_rng(seed)
        # Per-env state: a clock, its speed, the step within the episode.
        self.t = np.zeros(self.n)
        self.speed = self.rng.uniform(0.5, 1.5, self.n)
        self.steps = np.zeros(self.n, np.int64)
        self.scene = Scene(self.size, self.size)  # the program and meshes, shared by every env
        self.targets: list[RenderTarget] = []
        self.batch: gltensor.Batch | None = None
        self.atlas: gltensor.Atlas | None = None
        self.atlas_target: RenderTarget | None = None
        self.viewports: list[tuple[int, int, int, int]] = []
        self.reader: gltensor.Batch | gltensor.Atlas | None
        if mode == "batch":
            self.targets = [RenderTarget(self.size, self.size) for _ in range(self.n)]
            self.batch = gltensor.Batch([t.texture for t in self.targets], gltensor.GL_TEXTURE_2D,
                                        backend=backend)  # type: ignore[arg-type]  # a checked str
            self.reader, self.backend = self.batch, self.batch.backend
        else:
            cols = math.ceil(math.sqrt(self.n))
            rows = math.ceil(self.n / cols)
            self.atlas_target = RenderTarget(cols * self.size, rows * self.size)
            self.atlas = gltensor.Atlas(self.atlas_target.texture, gltensor.GL_TEXTURE_2D, tiles=(rows, cols),
                                        count=self.n, backend=backend)  # type: ignore[arg-type]
            self.viewports = self.atlas.viewports()
            self.reader, self.backend = self.atlas, self.atlas.backend
        self.reset()

    def reset(self) -> Any:
        """Starts every env at a random time; returns the first observation batch."""
        self.t[:] = self.rng.uniform(0.0, 10.0, self.n)
        self.steps[:] = 0
        return self._observe()

    def render(self) -> None:
        """Draws every env's current state into its texture (or tile); issues GL work, reads nothing."""
        for k in range(self.n):
            if self.mode == "batch":
                self.scene.render(self.t[k], fbo=self.targets[k].fbo, viewport=self.targets[k].viewport, camera=k)
            else:
                assert self.atlas_target is not None
                self.scene.render(self.t[k], fbo=self.atlas_target.fbo, viewport=self.viewports[k], camera=k)

    def read(self) -> Any:
        """ONE read of what render() drew, for all envs, as a torch tensor (no host copy on CUDA)."""
        # DLPack makes torch's stream wait for the copy (CUDA) before using it.
        assert self.reader is not None, "the env was closed"
        return self.torch.from_dlpack(self.reader.read(**self.read_options))

    def _observe(self) -> Any:
        self.render()
        return self.read()

    def step(self) -> Any:
        """Advances every env's clock (an env whose episode ends restarts at a random time) and
        returns the new observations, (N, H, W, 4) uint8 (or as read_options convert them).
        The same as advance(), render(), read() in turn (a caller that times the phases calls those)."""
        self.advance()
        return self._observe()

    def advance(self) -> None:
        """Advances every env's clock by one step; an env whose episode ends restarts at a random time."""
        self.t += self.dt * self.speed
        self.steps += 1
        done = self.steps >= self.episode_steps
        if done.any():
            self.t[done] = self.rng.uniform(0.0, 10.0, int(done.sum()))
            self.steps[done] = 0

    def reference(self, k: int) -> "np.ndarray[Any, Any]":
        """glReadPixels of env k's current image, top row first: what obs[k] must equal."""
        image: np.ndarray[Any, Any]
        if self.mode == "batch":
            image = self.targets[k].read_pixels(flip=True)
        else:
            assert self.atlas_target is not None
            image = self.atlas_target.read_pixels(flip=True, viewport=self.viewports[k])
        return image

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()
            self.reader = None
        for t in self.targets:
            t.close()
        if self.atlas_target is not None:
            self.atlas_target.close()
        self.scene.close()

    def __enter__(self) -> "VectorEnv":
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--envs", type=int, default=16, help="number of envs (cameras)")
    ap.add_argument("--size", type=int, default=128, help="square image size per env")
    ap.add_argument("--mode", choices=("batch", "atlas"), default="batch")
    ap.add_argument("--steps", type=int, default=100, help="timed steps")
    ap.add_argument("--backend", choices=("auto", "cuda", "cpu"), default="auto")
    ap.add_argument("--torch-threads", type=int, default=0,
                    help="torch.set_num_threads(N); 0: 1 on a CPU backend with a software renderer (torch's "
                         "spinning OpenMP workers would starve llvmpipe), else torch's default")
    args = ap.parse_args(argv)
    if args.envs < 1 or args.size < 1 or args.steps < 1:
        ap.error("--envs, --size and --steps must be positive")
    import torch

    with gltensor.Context.headless() as ctx, VectorEnv(args.envs, args.size, args.mode,
                                                       backend=args.backend) as env:
        if args.torch_threads > 0:
            torch.set_num_threads(args.torch_threads)
        elif env.backend == "cpu" and ctx.is_software:
            torch.set_num_threads(1)
        print("GL: %s | backend: %s | mode: %s | %d envs of %dx%d%s" % (
            ctx.renderer, env.backend, args.mode, env.n, env.size, env.size,
            " | atlas %dx%d, %d x %d tiles" % (env.atlas.image_size + env.atlas.tiles) if env.atlas else ""))

        # Correctness first: one observation against glReadPixels of every camera.
        obs = env.step()
        if obs.shape != (env.n, env.size, env.size, 4) or obs.dtype != torch.uint8:
            print("FAIL: observation is %s %s, expected (%d, %d, %d, 4) uint8"
                  % (tuple(obs.shape), obs.dtype, env.n, env.size, env.size), file=sys.stderr)
            return 1
        got = obs.cpu().numpy()
        bad = [k for k in range(env.n) if not np.array_equal(got[k], env.reference(k))]
        if bad:
            print("FAIL: env(s) %s differ from glReadPixels" % bad[:10], file=sys.stderr)
            return 1
        distinct = len({got[k].tobytes() for k in range(env.n)})
        print("check: the (%d, %d, %d, 4) batch on %s equals glReadPixels of every camera exactly "
              "(%d distinct images)" % (env.n, env.size, env.size, obs.device, distinct))

        def sync() -> None:
            GL.glFinish()
            if obs.is_cuda:
                torch.cuda.synchronize()

        for _ in range(10):  # warm-up: frame pools, driver state
            env.step().float().mean()
        sync()
        start = time.perf_counter()
        for _ in range(args.steps):
            obs = env.step()
            obs.float().mean()  # stand-in for the policy: a consumer op on the batch's device
        sync()
        elapsed = time.perf_counter() - start
        print("%d steps: %.1f steps/s, %.0f frames/s, %.1f us/step (render %d cameras + read + consumer op)"
              % (args.steps, args.steps / elapsed, args.steps * env.n / elapsed, elapsed / args.steps * 1e6, env.n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
