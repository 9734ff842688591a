"""Does a process that closes its shared slots and frames leave CUDA allocations behind at exit? Run under
`compute-sanitizer --tool memcheck --leak-check full`: creates CUDA slots, writes and reads them (frames handed to
torch and dropped), closes everything, collects, and exits. A leak report here is ours; a report only under pytest
is objects still alive when the interpreter exits."""

import gc
import os

os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

import numpy as np
import torch
from OpenGL import GL

import gltensor

ctx = gltensor.Context.headless()
slots = gltensor.SharedSlots(count=4, size=(256, 256), backend=os.environ.get("SLOTS_BACKEND", "cuda"))
tex = int(GL.glGenTextures(1))
GL.glBindTexture(GL.GL_TEXTURE_2D, tex)
GL.glTexStorage2D(GL.GL_TEXTURE_2D, 1, GL.GL_RGBA8, 256, 256)
pixels = np.random.default_rng(0).integers(0, 256, (256, 256, 4), dtype=np.uint8)
GL.glTexSubImage2D(GL.GL_TEXTURE_2D, 0, 0, 0, 256, 256, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, pixels)
total = 0.0
for step in range(20):
    for i in range(4):
        slots.write(i, tex)
    x = torch.from_dlpack(slots.read())
    total += float(x.float().mean())
    del x
out = torch.zeros((4, 256, 256, 4), dtype=torch.uint8, device="cuda" if torch.cuda.is_available() else "cpu")
for i in range(4):
    slots.write(i, tex)
slots.read(out=out)
if torch.cuda.is_available():
    torch.cuda.synchronize()
slots.close()
GL.glDeleteTextures(1, [tex])
ctx.close()
del slots, out
gc.collect()
print("done, mean", total / 20)
