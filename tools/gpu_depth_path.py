"""Depth capture paths on the CUDA backend: the pixel-pack copy (glReadPixels) against the compute
shader, per depth format at 1024x1024: exactness against glReadPixels(GL_DEPTH_COMPONENT, GL_FLOAT) and
CPU time per read() (one sync per 200 calls, median of 3), with a colour read() of the same size for
reference. GPU diagnostic behind the choice in src/gl_stage.c."""
import ctypes
import os
import statistics
import time

os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
import numpy as np

import gltensor

ctx = gltensor.Context.headless()
print("driver check (src/depth_probe.c): compute path exact here:", gltensor._gltensor._depth_compute_exact())
from OpenGL import GL  # noqa: E402
from OpenGL.raw.GL.VERSION.GL_1_0 import glReadPixels as raw_read_pixels  # noqa: E402
import torch  # noqa: E402

W = H = 1024


def timed(cap):
    per = []
    for _ in range(3):
        for _ in range(10):
            cap.read()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(200):
            cap.read()
        torch.cuda.synchronize()
        per.append((time.perf_counter() - t0) / 200 * 1e6)
    return statistics.median(per)


colour = GL.glGenTextures(1)
GL.glBindTexture(GL.GL_TEXTURE_2D, colour)
GL.glTexStorage2D(GL.GL_TEXTURE_2D, 1, GL.GL_RGBA8, W, H)
for name in ("DEPTH_COMPONENT16", "DEPTH_COMPONENT24", "DEPTH24_STENCIL8", "DEPTH_COMPONENT32F"):
    fmt = getattr(GL, "GL_" + name)
    attach = GL.GL_DEPTH_STENCIL_ATTACHMENT if "STENCIL" in name else GL.GL_DEPTH_ATTACHMENT
    for kind in ("texture", "renderbuffer"):
        fbo = GL.glGenFramebuffers(1)
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, fbo)
        GL.glFramebufferTexture2D(GL.GL_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT0, GL.GL_TEXTURE_2D, colour, 0)
        if kind == "texture":
            obj, target = GL.glGenTextures(1), gltensor.GL_TEXTURE_2D
            GL.glBindTexture(GL.GL_TEXTURE_2D, obj)
            GL.glTexStorage2D(GL.GL_TEXTURE_2D, 1, fmt, W, H)
            GL.glFramebufferTexture2D(GL.GL_FRAMEBUFFER, attach, GL.GL_TEXTURE_2D, obj, 0)
        else:
            obj, target = GL.glGenRenderbuffers(1), gltensor.GL_RENDERBUFFER
            GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, obj)
            GL.glRenderbufferStorage(GL.GL_RENDERBUFFER, fmt, W, H)
            GL.glFramebufferRenderbuffer(GL.GL_FRAMEBUFFER, attach, GL.GL_RENDERBUFFER, obj)
        # a depth ramp: many distinct values, so last-bit differences show
        GL.glEnable(GL.GL_SCISSOR_TEST)
        for i in range(64):
            GL.glScissor(i * 16, 0, 16, H)
            GL.glClearDepth(i / 63.0 * 0.999 + 0.0005 * (i % 7))
            GL.glClear(GL.GL_DEPTH_BUFFER_BIT)
        GL.glDisable(GL.GL_SCISSOR_TEST)
        ref = np.empty((H, W), np.float32)
        GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 4)
        raw_read_pixels(0, 0, W, H, GL.GL_DEPTH_COMPONENT, GL.GL_FLOAT, ref.ctypes.data_as(ctypes.c_void_p))
        ccap = gltensor.Capture(colour)
        line = f"{name:20s} {kind:12s} colour read {timed(ccap):7.1f} us"
        ccap.close()
        for path in ("readpixels", "compute"):
            os.environ["GLTENSOR_DEPTH_PATH"] = path
            cap = gltensor.Capture(obj, target)
            got = torch.from_dlpack(cap.read(flip=False)).cpu().numpy()[..., 0]
            diff = int((got.view(np.uint32) != ref.view(np.uint32)).sum())
            line += f" | {path}: {timed(cap):7.1f} us, {diff} values differ from glReadPixels"
            if diff:
                i = np.flatnonzero(got.view(np.uint32) != ref.view(np.uint32))[:: max(1, diff // 4)][:4]
                line += " (e.g. " + ", ".join("%.9g vs %.9g" % (got.flat[k], ref.flat[k]) for k in i) + ")"
            cap.close()
        os.environ.pop("GLTENSOR_DEPTH_PATH")
        print(line, flush=True)
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, 0)
        GL.glDeleteFramebuffers(1, [fbo])
print("GL error:", GL.glGetError())
