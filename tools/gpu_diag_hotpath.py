"""Which GL call in the per-read path costs a GL->CUDA switch? Times map/copy/unmap (cuda-python)
with one GL call added per iteration. Diagnostic for the GPU machine."""
import ctypes
import os
import time

os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
import gltensor

ctx = gltensor.Context.headless()
from OpenGL import GL  # noqa: E402
from OpenGL import EGL  # noqa: E402
from cuda.bindings import runtime as rt  # noqa: E402
import torch  # noqa: E402

W = H = 1024
tex = GL.glGenTextures(1)
GL.glBindTexture(GL.GL_TEXTURE_2D, tex)
GL.glTexImage2D(GL.GL_TEXTURE_2D, 0, GL.GL_RGBA8, W, H, 0, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, None)
GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
err, res = rt.cudaGraphicsGLRegisterImage(int(tex), GL.GL_TEXTURE_2D, 1)
assert err == 0, err
err, stream = rt.cudaStreamCreateWithFlags(1)
dst = torch.empty((H, W, 4), dtype=torch.uint8, device="cuda")
iv = (ctypes.c_int * 1)()
from OpenGL.raw.GL.VERSION.GL_1_0 import glGetTexLevelParameteriv as raw_gtlp, glGetIntegerv as raw_gi, glGetError as raw_ge  # noqa
from OpenGL.raw.GL.VERSION.GL_1_1 import glBindTexture as raw_bind, glIsTexture as raw_is  # noqa
from OpenGL.raw.GL.VERSION.GL_4_5 import glGetTextureLevelParameteriv as raw_dsa  # noqa


def step(extra):
    rt.cudaGraphicsMapResources(1, res, stream)
    _, arr = rt.cudaGraphicsSubResourceGetMappedArray(res, 0, 0)
    rt.cudaMemcpy2DFromArrayAsync(dst.data_ptr(), W * 4, arr, 0, 0, W * 4, H, rt.cudaMemcpyKind.cudaMemcpyDeviceToDevice, stream)
    rt.cudaGraphicsUnmapResources(1, res, stream)
    extra()


variants = {
    "none": lambda: None,
    "glGetError": lambda: raw_ge(),
    "glGetIntegerv(binding)": lambda: raw_gi(GL.GL_TEXTURE_BINDING_2D, iv),
    "glIsTexture": lambda: raw_is(tex),
    "glBindTexture x2": lambda: (raw_bind(GL.GL_TEXTURE_2D, tex), raw_bind(GL.GL_TEXTURE_2D, 0)),
    "bind+glGetTexLevelParameteriv+unbind": lambda: (raw_bind(GL.GL_TEXTURE_2D, tex), raw_gtlp(GL.GL_TEXTURE_2D, 0, GL.GL_TEXTURE_WIDTH, iv), raw_bind(GL.GL_TEXTURE_2D, 0)),
    "glGetTextureLevelParameteriv (DSA)": lambda: raw_dsa(tex, 0, GL.GL_TEXTURE_WIDTH, iv),
    "eglGetCurrentContext": lambda: EGL.eglGetCurrentContext(),
}
for name, fn in variants.items():
    for _ in range(50):
        step(fn)
    rt.cudaStreamSynchronize(stream)
    n = 500
    t0 = time.perf_counter()
    for _ in range(n):
        step(fn)
    rt.cudaStreamSynchronize(stream)
    print(f"{name:40s} {(time.perf_counter() - t0) / n * 1e6:8.1f} us/iter")
cap = gltensor.Capture(tex)
for flip in (False, True):
    t0 = time.perf_counter()
    for _ in range(500):
        cap.read(flip=flip)
    torch.cuda.synchronize()
    print(f"gltensor read(flip={flip}) {(time.perf_counter() - t0) / 500 * 1e6:8.1f} us/iter")
