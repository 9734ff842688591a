"""Quick end-to-end check of the CUDA backend on a GPU machine: every format and size against
glGetTexImage, flip on/off, renderbuffers, framework consumption, and per-call CPU time of read().
Prints one line per check and exits non-zero on any mismatch. For diagnosis; the real suite is tests/."""
import os
import sys
import time

os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
import numpy as np

import gltensor

print("cuda_available:", gltensor.cuda_available(), gltensor.cuda_unavailable_reason())
ctx = gltensor.Context.headless()
print("context:", ctx.renderer, ctx.version, "cuda_device", ctx.cuda_device)
import ctypes  # noqa: E402

from OpenGL import GL  # noqa: E402
from OpenGL.raw.GL.VERSION.GL_1_0 import glGetTexImage as raw_get_tex_image  # noqa: E402

FORMATS = {  # internal format: (numpy dtype, channels, GL format, GL type)
    GL.GL_RGBA8: (np.uint8, 4, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE),
    GL.GL_RGB8: (np.uint8, 3, GL.GL_RGB, GL.GL_UNSIGNED_BYTE),
    GL.GL_SRGB8_ALPHA8: (np.uint8, 4, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE),
    GL.GL_R8: (np.uint8, 1, GL.GL_RED, GL.GL_UNSIGNED_BYTE),
    GL.GL_RG8: (np.uint8, 2, GL.GL_RG, GL.GL_UNSIGNED_BYTE),
    GL.GL_R16: (np.uint16, 1, GL.GL_RED, GL.GL_UNSIGNED_SHORT),
    GL.GL_RGBA16: (np.uint16, 4, GL.GL_RGBA, GL.GL_UNSIGNED_SHORT),
    GL.GL_R16F: (np.float16, 1, GL.GL_RED, GL.GL_HALF_FLOAT),
    GL.GL_RGBA16F: (np.float16, 4, GL.GL_RGBA, GL.GL_HALF_FLOAT),
    GL.GL_R32F: (np.float32, 1, GL.GL_RED, GL.GL_FLOAT),
    GL.GL_RG32F: (np.float32, 2, GL.GL_RG, GL.GL_FLOAT),
    GL.GL_RGBA32F: (np.float32, 4, GL.GL_RGBA, GL.GL_FLOAT),
    GL.GL_R32UI: (np.uint32, 1, GL.GL_RED_INTEGER, GL.GL_UNSIGNED_INT),
    GL.GL_RGBA8UI: (np.uint8, 4, GL.GL_RGBA_INTEGER, GL.GL_UNSIGNED_BYTE),
    GL.GL_RGBA32UI: (np.uint32, 4, GL.GL_RGBA_INTEGER, GL.GL_UNSIGNED_INT),
}
rng = np.random.default_rng(0)
failures = 0
import torch  # noqa: E402

GL.glPixelStorei(GL.GL_UNPACK_ALIGNMENT, 1)
GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 1)
for ifmt, (dt, ch, f, t) in FORMATS.items():
    for (w, h) in [(1, 1), (3, 5), (800, 600), (4097, 3)]:
        if dt in (np.float16, np.float32):
            data = (rng.integers(-1000, 1000, (h, w, ch)) / 8).astype(dt)
        else:
            data = rng.integers(0, np.iinfo(dt).max, (h, w, ch), dtype=np.uint64).astype(dt)
        tex = GL.glGenTextures(1)
        GL.glBindTexture(GL.GL_TEXTURE_2D, tex)
        GL.glTexImage2D(GL.GL_TEXTURE_2D, 0, ifmt, w, h, 0, f, t, data)
        ref = np.empty((h, w, ch), dt)
        raw_get_tex_image(GL.GL_TEXTURE_2D, 0, f, t, ref.ctypes.data_as(ctypes.c_void_p))
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
        try:
            cap = gltensor.Capture(tex)
            a = torch.from_dlpack(cap.read(flip=False)).cpu().numpy()
            b = torch.from_dlpack(cap.read(flip=True)).cpu().numpy()
            ok = cap.backend == "cuda" and np.array_equal(a.view(np.uint8), ref.view(np.uint8)) and np.array_equal(
                b.view(np.uint8), ref[::-1].view(np.uint8))
            msg = "" if ok else f"backend={cap.backend} noflip_eq={np.array_equal(a, ref)} flip_eq={np.array_equal(b, ref[::-1])}"
            cap.close()
        except Exception as e:  # noqa: BLE001
            ok, msg = False, f"{type(e).__name__}: {e}"
        failures += not ok
        if not ok or (w, h) == (800, 600):
            print(f"{'OK  ' if ok else 'FAIL'} {gltensor.__name__} {hex(ifmt)} {w}x{h} {msg}")
        GL.glDeleteTextures([tex])

# renderbuffer, cleared to a colour through an FBO
rb = GL.glGenRenderbuffers(1)
GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, rb)
GL.glRenderbufferStorage(GL.GL_RENDERBUFFER, GL.GL_RGBA8, 37, 19)
fbo = GL.glGenFramebuffers(1)
GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, fbo)
GL.glFramebufferRenderbuffer(GL.GL_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT0, GL.GL_RENDERBUFFER, rb)
GL.glClearColor(0.2, 0.4, 0.6, 1.0)
GL.glClear(GL.GL_COLOR_BUFFER_BIT)
GL.glEnable(GL.GL_SCISSOR_TEST); GL.glScissor(0, 0, 5, 3); GL.glClearColor(1, 0, 0, 1); GL.glClear(GL.GL_COLOR_BUFFER_BIT); GL.glDisable(GL.GL_SCISSOR_TEST)
ref = np.frombuffer(GL.glReadPixels(0, 0, 37, 19, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE), np.uint8).reshape(19, 37, 4)
cap = gltensor.Capture(rb, gltensor.GL_RENDERBUFFER)
x = torch.from_dlpack(cap.read()).cpu().numpy()
ok = np.array_equal(x, ref[::-1]); failures += not ok
print("OK  " if ok else "FAIL", "renderbuffer RGBA8 37x19", cap.backend)

# frameworks
frame = cap.read()
for name, fn in [("torch", lambda fr: torch.from_dlpack(fr).cpu().numpy()),
                 ("cupy", lambda fr: __import__("cupy").from_dlpack(fr).get()),
                 ("cupy-cai", lambda fr: __import__("cupy").asarray(fr).get()),
                 ("jax", lambda fr: np.asarray(__import__("jax").dlpack.from_dlpack(fr))),
                 ("numba", lambda fr: __import__("numba").cuda.as_cuda_array(fr).copy_to_host())]:
    try:
        got = fn(cap.read())
        ok = np.array_equal(got, ref[::-1])
        msg = ""
    except Exception as e:  # noqa: BLE001
        ok, msg = False, f"{type(e).__name__}: {e}"
    failures += not ok
    print("OK  " if ok else "FAIL", "consumer", name, msg)

# out= with torch, streams
out = torch.empty((19, 37, 4), dtype=torch.uint8, device="cuda")
cap.read(out=out); ok = np.array_equal(out.cpu().numpy(), ref[::-1]); failures += not ok; print("OK  " if ok else "FAIL", "out= torch")
s = torch.cuda.Stream()
fr = cap.read(stream=s)
ok = np.array_equal(torch.from_dlpack(fr).cpu().numpy(), ref[::-1]); failures += not ok; print("OK  " if ok else "FAIL", "stream=torch.cuda.Stream")
print("CAI:", fr.__cuda_array_interface__)

# per-call CPU time, no rendering
tex = GL.glGenTextures(1)
GL.glBindTexture(GL.GL_TEXTURE_2D, tex)
GL.glTexImage2D(GL.GL_TEXTURE_2D, 0, GL.GL_RGBA8, 1024, 1024, 0, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, None)
cap = gltensor.Capture(tex)
for flip in (False, True):
    for _ in range(200):
        cap.read(flip=flip)
    torch.cuda.synchronize()
    times = []
    for rep in range(3):
        t0 = time.perf_counter()
        for _ in range(2000):
            cap.read(flip=flip)
        times.append((time.perf_counter() - t0) / 2000 * 1e6)
        torch.cuda.synchronize()
    print(f"read(flip={flip}) CPU time per call: {sorted(times)[1]:.2f} us  (runs {['%.2f' % x for x in times]})")
outt = torch.empty((1024, 1024, 4), dtype=torch.uint8, device="cuda")
t0 = time.perf_counter()
for _ in range(2000):
    cap.read(flip=False, out=outt)
print(f"read(out=) CPU time per call: {(time.perf_counter() - t0) / 2000 * 1e6:.2f} us")
free0 = torch.cuda.mem_get_info()[0]
for _ in range(3000):
    torch.from_dlpack(cap.read()).float().mean()
torch.cuda.synchronize()
print("device free memory change over 3000 reads (MiB):", (torch.cuda.mem_get_info()[0] - free0) / 2**20)
print("GL error:", GL.glGetError())
print("FAILURES:", failures)
sys.exit(1 if failures else 0)
