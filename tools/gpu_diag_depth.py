"""How long does GL take to copy a 1024x1024 depth image into a pixel-pack buffer, per depth format
and transfer type? Informs the depth path (gl_stage.c). GPU diagnostic; prints one line per case."""
import os
import time

os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
import gltensor

ctx = gltensor.Context.headless()
from OpenGL import GL  # noqa: E402
from OpenGL.raw.GL.VERSION.GL_1_0 import glReadPixels as raw_read_pixels  # noqa: E402

W = H = 1024
cases = [
    ("DEPTH_COMPONENT24", GL.GL_DEPTH_COMPONENT24, GL.GL_DEPTH_ATTACHMENT, GL.GL_DEPTH_COMPONENT, GL.GL_FLOAT),
    ("DEPTH_COMPONENT24", GL.GL_DEPTH_COMPONENT24, GL.GL_DEPTH_ATTACHMENT, GL.GL_DEPTH_COMPONENT, GL.GL_UNSIGNED_INT),
    ("DEPTH24_STENCIL8", GL.GL_DEPTH24_STENCIL8, GL.GL_DEPTH_STENCIL_ATTACHMENT, GL.GL_DEPTH_COMPONENT, GL.GL_FLOAT),
    ("DEPTH24_STENCIL8", GL.GL_DEPTH24_STENCIL8, GL.GL_DEPTH_STENCIL_ATTACHMENT, GL.GL_DEPTH_STENCIL,
     GL.GL_UNSIGNED_INT_24_8),
    ("DEPTH_COMPONENT32F", GL.GL_DEPTH_COMPONENT32F, GL.GL_DEPTH_ATTACHMENT, GL.GL_DEPTH_COMPONENT, GL.GL_FLOAT),
]
pbo = GL.glGenBuffers(1)
GL.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, pbo)
GL.glBufferData(GL.GL_PIXEL_PACK_BUFFER, W * H * 4, None, GL.GL_STREAM_READ)
for name, fmt, attach, rfmt, rtype in cases:
    for kind in ("texture", "renderbuffer"):
        fbo = GL.glGenFramebuffers(1)
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, fbo)
        if kind == "texture":
            obj = GL.glGenTextures(1)
            GL.glBindTexture(GL.GL_TEXTURE_2D, obj)
            GL.glTexStorage2D(GL.GL_TEXTURE_2D, 1, fmt, W, H)
            GL.glFramebufferTexture2D(GL.GL_FRAMEBUFFER, attach, GL.GL_TEXTURE_2D, obj, 0)
        else:
            obj = GL.glGenRenderbuffers(1)
            GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, obj)
            GL.glRenderbufferStorage(GL.GL_RENDERBUFFER, fmt, W, H)
            GL.glFramebufferRenderbuffer(GL.GL_FRAMEBUFFER, attach, GL.GL_RENDERBUFFER, obj)
        GL.glDrawBuffer(GL.GL_NONE)
        GL.glReadBuffer(GL.GL_NONE)
        GL.glClearDepth(0.37)
        GL.glClear(GL.GL_DEPTH_BUFFER_BIT)
        for _ in range(5):
            raw_read_pixels(0, 0, W, H, rfmt, rtype, None)
        GL.glFinish()
        n = 50
        t0 = time.perf_counter()
        for _ in range(n):
            raw_read_pixels(0, 0, W, H, rfmt, rtype, None)
        GL.glFinish()
        dt = (time.perf_counter() - t0) / n * 1e6
        print(f"{name:20s} {kind:12s} read as {GL.GLenum(rfmt)!s:22s}/{GL.GLenum(rtype)!s:26s} {dt:8.1f} us "
              f"(glError {GL.glGetError()})", flush=True)
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, 0)
        GL.glDeleteFramebuffers(1, [fbo])
