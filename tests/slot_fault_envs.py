"""Environments for the fault tests of shared slots (an importable module: spawn and forkserver workers
unpickle them by reference)."""

import os

os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

import gymnasium  # noqa: E402
import numpy as np  # noqa: E402

import gltensor  # noqa: E402
from gltensor.gymnasium import SlotSpace  # noqa: E402
from slot_envs import H, W, GLPattern, pattern  # noqa: E402


class WrongSizeEnv(gymnasium.Env):
    """Writes the pattern as a GLImage; at step `bad_step` a texture one pixel wider than its slot, which the
    worker's write refuses (InvalidArgumentError, raised in the worker)."""

    metadata = {"render_modes": []}

    def __init__(self, backend="cpu", bad_step=None):
        self.observation_space = SlotSpace(H, W, 3, backend=backend, read_as="numpy")
        self.action_space = gymnasium.spaces.Discrete(3)
        self.bad_step, self.t = bad_step, 0
        self.gl, self.wide = GLPattern(H, W), GLPattern(H, W + 1)

    def _obs(self):
        if self.bad_step is not None and self.t == self.bad_step:
            return gltensor.GLImage(self.wide.show(np.zeros((H, W + 1, 4), np.uint8)))
        return gltensor.GLImage(self.gl.show(pattern(0, self.t)))

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), 0.0, False, False, {}

    def close(self):
        self.wide.close()
        self.gl.close()
