"""Where does time go between read() and a torch consumer? Each loop renders nothing: it reads a
1024x1024 RGBA8 texture and runs x.float().mean(), with the hand-off varied. GPU diagnostic."""
import os
import time

os.environ.setdefault("PYOPENGL_PLATFORM", "egl")
import gltensor

ctx = gltensor.Context.headless()
from OpenGL import GL  # noqa: E402
import torch  # noqa: E402
import torch.utils.dlpack  # noqa: E402

tex = GL.glGenTextures(1)
GL.glBindTexture(GL.GL_TEXTURE_2D, tex)
GL.glTexImage2D(GL.GL_TEXTURE_2D, 0, GL.GL_RGBA8, 1024, 1024, 0, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, None)
cap = gltensor.Capture(tex)
side = torch.cuda.Stream()
out = torch.empty((1024, 1024, 4), dtype=torch.uint8, device="cuda")


def loops():
    yield "read only", lambda: cap.read()
    yield "from_dlpack(read())", lambda: torch.from_dlpack(cap.read())
    yield "from_dlpack(read()).float().mean()", lambda: torch.from_dlpack(cap.read()).float().mean()
    yield "read(stream=torch cur) + from_dlpack + mean", lambda: torch.from_dlpack(
        cap.read(stream=torch.cuda.current_stream())).float().mean()
    yield "capsule(stream=-1) + from_dlpack + mean", lambda: torch.utils.dlpack.from_dlpack(
        cap.read().__dlpack__(stream=-1)).float().mean()
    yield "read(out=) + mean", lambda: cap.read(out=out).float().mean()
    yield "read(); keep frame; mean of prealloc", lambda: (cap.read(), out.float().mean())


for name, fn in loops():
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    n = 300
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    print(f"{name:50s} {(time.perf_counter() - t0) / n * 1e6:9.1f} us/iter", flush=True)
