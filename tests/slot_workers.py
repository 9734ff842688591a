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
    if np.dtype(dtype).kind == "f":  # both signs, magnitudes from 1e-3 to 1e3: every bit of the encoding counts
        return (rng.standard_normal((height, width, channels), dtype=np.float32) * 64).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(0, int(info.max) + 1, (height, width, channels), dtype=dtype)


def source_formats(GL):
    """Source formats by name: (internal format, upload format, upload type, numpy dtype, channels)."""
    u8, u16, u32, f16, f32 = GL.GL_UNSIGNED_BYTE, GL.GL_UNSIGNED_SHORT, GL.GL_UNSIGNED_INT, GL.GL_HALF_FLOAT, GL.GL_FLOAT
    out = {}
    for name, internal, gl_type, dtype in [
        ("8", "8", u8, np.uint8), ("16", "16", u16, np.uint16), ("16F", "16F", f16, np.float16),
        ("32F", "32F", f32, np.float32), ("8UI", "8UI", u8, np.uint8), ("16UI", "16UI", u16, np.uint16),
        ("32UI", "32UI", u32, np.uint32),
    ]:
        integer = name.endswith("UI")
        for prefix, channels, fmt in (("R", 1, "RED"), ("RG", 2, "RG"), ("RGBA", 4, "RGBA")):
            gl_format = getattr(GL, f"GL_{fmt}_INTEGER" if integer else f"GL_{fmt}")
            out[prefix + name] = (getattr(GL, f"GL_{prefix}{internal}"), gl_format, gl_type, dtype, channels)
    out["SRGB8_ALPHA8"] = (GL.GL_SRGB8_ALPHA8, GL.GL_RGBA, u8, np.uint8, 4)
    return out


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


def run(handle, slot, size, conn, kind="texture", source_format="RGBA8", pad=0, slots_write=None):
    """Serve the trainer until it sends None. Commands: ("step", k) shows pattern(slot, k) and writes it;
    ("write_size", w, h) writes an image of another size; ("write_int",) writes an integer texture;
    ("write_host", k) writes pattern(slot, k) from host memory; ("cuda_initialized",) says whether this process
    created a CUDA context (torch, if importable); ("fds",) counts open descriptors; ("attach_cycles", n)
    attaches and closes a writer n times; ("write_path",) says how this worker's writer writes. `slots_write`:
    GLTENSOR_SLOTS_WRITE for this worker (None: unset)."""
    if slots_write is None:
        os.environ.pop("GLTENSOR_SLOTS_WRITE", None)
    else:
        os.environ["GLTENSOR_SLOTS_WRITE"] = slots_write
    try:
        import gltensor

        # On the slots' GPU without a CUDA call (the trainer may use CUDA, and fork copies it: CUDA must not be
        # touched here, and a worker never needs it).
        ctx = handle.headless_context()
        from OpenGL import GL

        formats = source_formats(GL)
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
            elif cmd == "write_path":
                value = handle.client.writer(slot).write_path
            elif cmd == "cuda_initialized":
                import sys

                value = bool("torch" in sys.modules and sys.modules["torch"].cuda.is_initialized())
            elif cmd == "libcuda":  # whether the CUDA driver library is loaded in this process
                with open("/proc/self/maps") as f:
                    value = any("libcuda.so" in line for line in f)
            elif cmd == "fds":
                value = len(os.listdir("/proc/self/fd"))
            elif cmd == "attach_cycles":
                client = handle.client
                for _ in range(msg[1]):
                    client.writer(slot).close()
                client.writer(slot)  # attached again, as when "fds" counted (a writer holds the trainer's pidfd)
                value = len(os.listdir("/proc/self/fd"))
            else:
                raise ValueError(f"unknown command {cmd!r}")
            conn.send(("ok", value))
        except Exception as e:
            conn.send(("error", type(e).__name__, str(e)))
    handle.close()
    ctx.close()
