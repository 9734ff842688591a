"""Worker processes for tests/test_slots.py: each makes its own headless GL context, draws a seeded pattern
into a texture or renderbuffer, and writes it into its shared slot. An importable module, so that every
multiprocessing start method (spawn and forkserver pickle the target by name) finds it.

The protocol is the one vector environments follow: the trainer sends a command, the worker does it and
replies; ("ok", value) or ("error", exception class name, message).
"""
import os
import traceback

os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

import numpy as np  # noqa: E402


def pattern(slot, step, width, height, channels=4, dtype=np.uint8):
    """The image (top row first) worker `slot` shows at `step`: every pixel differs between slots and steps."""
    rng = np.random.default_rng(slot * 100003 + step * 7 + 11)
    if np.dtype(dtype).kind == "f":
        return rng.random((height, width, channels), dtype=np.float32).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(0, int(info.max) + 1, (height, width, channels), dtype=dtype)


class _Source:
    """A GL image the worker renders into: a texture, a renderbuffer or a multisampled renderbuffer, possibly
    larger than the slot (then written through region=)."""

    def __init__(self, kind, internal, width, height, pad):
        from OpenGL import GL

        self.GL, self.kind, self.internal = GL, kind, internal
        self.width, self.height = width + pad, height + pad
        self.region = (pad // 2, pad // 3, width, height) if pad else None
        self.tex = int(GL.glGenTextures(1))
        GL.glBindTexture(GL.GL_TEXTURE_2D, self.tex)
        GL.glTexStorage2D(GL.GL_TEXTURE_2D, 1, internal, self.width, self.height)
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
        self.name, self.target = self.tex, GL.GL_TEXTURE_2D
        if kind in ("renderbuffer", "msaa"):
            self.fbo = [int(GL.glGenFramebuffers(1)), int(GL.glGenFramebuffers(1))]
            self.rb = int(GL.glGenRenderbuffers(1))
            GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, self.rb)
            if kind == "msaa":
                GL.glRenderbufferStorageMultisample(GL.GL_RENDERBUFFER, 4, internal, self.width, self.height)
            else:
                GL.glRenderbufferStorage(GL.GL_RENDERBUFFER, internal, self.width, self.height)
            GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, 0)
            self.name, self.target = self.rb, GL.GL_RENDERBUFFER

    def show(self, image, gl_format, gl_type):
        """Puts `image` (top row first) into the source's region (or whole image)."""
        GL = self.GL
        x, y = (self.region[0], self.region[1]) if self.region else (0, 0)
        h, w = image.shape[:2]
        GL.glPixelStorei(GL.GL_UNPACK_ALIGNMENT, 1)
        GL.glBindTexture(GL.GL_TEXTURE_2D, self.tex)
        GL.glTexSubImage2D(GL.GL_TEXTURE_2D, 0, x, y, w, h, gl_format, gl_type, np.ascontiguousarray(image[::-1]))
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
        if self.kind != "texture":
            # The renderbuffer gets the texture's pixels by a blit (a multisampled one stores them per sample).
            GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, self.fbo[0])
            GL.glFramebufferTexture2D(GL.GL_READ_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT0, GL.GL_TEXTURE_2D, self.tex, 0)
            GL.glBindFramebuffer(GL.GL_DRAW_FRAMEBUFFER, self.fbo[1])
            GL.glFramebufferRenderbuffer(GL.GL_DRAW_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT0, GL.GL_RENDERBUFFER, self.rb)
            GL.glBlitFramebuffer(0, 0, self.width, self.height, 0, 0, self.width, self.height,
                                 GL.GL_COLOR_BUFFER_BIT, GL.GL_NEAREST)
            GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, 0)


def run(handle, slot, size, conn, kind="texture", source_format="RGBA8", pad=0):
    """Serve the trainer until it sends None. Commands: ("step", k) shows pattern(slot, k) and writes it;
    ("write_size", w, h) writes an image of another size; ("write_int",) writes an integer texture;
    ("write_host", k) writes pattern(slot, k) from host memory; ("cuda_initialized",) says whether this process
    created a CUDA context (torch, if importable); ("fds",) counts open descriptors; ("attach_cycles", n)
    attaches and closes a writer n times."""
    try:
        import gltensor

        # On the slots' GPU without a CUDA call (the trainer may use CUDA, and fork copies it: CUDA must not be
        # touched here, and a worker never needs it).
        ctx = handle.headless_context()
        from OpenGL import GL

        formats = {
            "RGBA8": (GL.GL_RGBA8, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, np.uint8, 4),
            "RGBA32F": (GL.GL_RGBA32F, GL.GL_RGBA, GL.GL_FLOAT, np.float32, 4),
            "R8": (GL.GL_R8, GL.GL_RED, GL.GL_UNSIGNED_BYTE, np.uint8, 1),
        }
        internal, gl_format, gl_type, dtype, channels = formats[source_format]
        width, height = size
        source = _Source(kind, internal, width, height, pad)
        conn.send(("ok", os.getpid()))
    except Exception as e:  # the trainer reports what went wrong in the worker
        conn.send(("error", type(e).__name__, f"{e}\n{traceback.format_exc()}"))
        return
    while True:
        msg = conn.recv()
        if msg is None:
            break
        try:
            cmd = msg[0]
            if cmd == "step":
                source.show(pattern(slot, msg[1], width, height, channels, dtype), gl_format, gl_type)
                handle.write(source.name, source.target, region=source.region)
                value = None
            elif cmd == "write_size":
                other = _Source("texture", internal, msg[1], msg[2], 0)
                handle.write(other.name, other.target)
                value = None
            elif cmd == "write_int":
                tex = int(GL.glGenTextures(1))
                GL.glBindTexture(GL.GL_TEXTURE_2D, tex)
                GL.glTexStorage2D(GL.GL_TEXTURE_2D, 1, GL.GL_RGBA8UI, width, height)
                handle.write(tex)
                value = None
            elif cmd == "write_host":
                handle.write_host(pattern(slot, msg[1], width, height, channels, dtype))
                value = None
            elif cmd == "cuda_initialized":
                import sys

                value = bool("torch" in sys.modules and sys.modules["torch"].cuda.is_initialized())
            elif cmd == "fds":
                value = len(os.listdir("/proc/self/fd"))
            elif cmd == "attach_cycles":
                client = handle.client
                for _ in range(msg[1]):
                    client.writer(slot).close()
                value = len(os.listdir("/proc/self/fd"))
            else:
                raise ValueError(f"unknown command {cmd!r}")
            conn.send(("ok", value))
        except Exception as e:
            conn.send(("error", type(e).__name__, str(e)))
    handle.close()
    ctx.close()
