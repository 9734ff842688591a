"""Small environments for the shared-slot integration tests (an importable module, so that spawn and
forkserver workers unpickle them by reference): each 'renders' a seeded pattern into a GL texture of its own
headless context and returns it as a gltensor.GLImage (or as a host array), so every pixel is known."""

import os

os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

import numpy as np  # noqa: E402

H, W = 61, 97  # odd on purpose


def pattern(seed, t, h=H, w=W):
    """The image env `seed` shows at step `t`: (h, w, 4) uint8, top row first."""
    return np.random.default_rng([seed, t]).integers(0, 256, (h, w, 4), dtype=np.uint8)


class GLPattern:
    """A texture in a headless context made lazily, in the process that renders (a GL context never pickles)."""

    def __init__(self, h, w):
        self.h, self.w, self.ctx, self.tex = h, w, None, None

    def show(self, img):
        from OpenGL import GL

        import gltensor

        if self.ctx is None:
            self.ctx = gltensor.Context.headless()
            self.ctx.make_current()
            self.tex = int(GL.glGenTextures(1))
            GL.glBindTexture(GL.GL_TEXTURE_2D, self.tex)
            GL.glTexStorage2D(GL.GL_TEXTURE_2D, 1, GL.GL_RGBA8, self.w, self.h)
        self.ctx.make_current()
        GL.glBindTexture(GL.GL_TEXTURE_2D, self.tex)
        GL.glPixelStorei(GL.GL_UNPACK_ALIGNMENT, 1)
        # GL's first row is the bottom one: upload bottom row first, so a flipped read gives `img`.
        GL.glTexSubImage2D(GL.GL_TEXTURE_2D, 0, 0, 0, self.w, self.h, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE,
                           np.ascontiguousarray(img[::-1]))
        return self.tex

    def close(self):
        if self.ctx is not None:
            from OpenGL import GL

            self.ctx.make_current()
            GL.glDeleteTextures([self.tex])
            self.ctx.close()
            self.ctx = None


try:
    import gymnasium
except ImportError:  # the tests that need it skip
    gymnasium = None

if gymnasium is not None:
    from gltensor.gymnasium import SlotSpace

    class PatternEnv(gymnasium.Env):
        """Observation: the pattern of (seed, step) as a GLImage (host=True: as an (H, W, channels) array)."""

        metadata = {"render_modes": []}

        def __init__(self, height=H, width=W, channels=3, backend="cpu", host=False, read_as="torch",
                     episode=0, box=False, gl=True):
            if box:  # a plain image Box, as SB3 users have
                self.observation_space = gymnasium.spaces.Box(0, 255, (height, width, channels), np.uint8)
            else:
                self.observation_space = SlotSpace(height, width, channels, backend=backend, read_as=read_as)
            self.use_gl = gl or not host
            self.action_space = gymnasium.spaces.Discrete(3)
            self.channels, self.host, self.episode = channels, host, episode
            self.gl = GLPattern(height, width)
            self.seed_, self.t = 0, 0

        def _obs(self):
            img = pattern(self.seed_, self.t, *self.gl_size())
            # An engine's context is current (the CUDA backend's host writes need one); gl=False: none at all.
            tex = self.gl.show(img) if self.use_gl else None
            if self.host:
                return img[..., : self.channels]
            import gltensor

            return gltensor.GLImage(tex)

        def gl_size(self):
            return self.gl.h, self.gl.w

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            if seed is not None:
                self.seed_ = seed
            self.t = 0
            return self._obs(), {"pid": os.getpid()}

        def step(self, action):
            self.t += 1
            truncated = bool(self.episode) and self.t >= self.episode
            return self._obs(), float(action) - 1.0, False, truncated, {}

        def close(self):
            self.gl.close()
