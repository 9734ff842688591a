#!/usr/bin/env python3
"""Capturing raw GL names: textures and renderbuffers made with PyOpenGL, or by another library.

    python examples/pyopengl_raw_names.py

gltensor needs only a GL name and its target, in the GL context current in the calling thread; it does
not care which library made the object. This example, on a gltensor headless context:

  1. uploads a picture drawn with PIL into a texture with PyOpenGL (glGenTextures + glTexImage2D) and
     captures it: flip=True (default) gives the rows as seen on screen, flip=False GL's bottom-up rows;
  2. reads it with conversions fused into the copy: channels="bgr", dtype="float32", layout="chw";
  3. reads into a tensor it owns with out= (a slice of a bigger batch tensor works too: padded rows);
  4. renders with PyOpenGL into a renderbuffer (GL_RENDERBUFFER) and captures that;
  5. captures a texture created by moderngl, through its GL name `tex.glo` (skipped without moderngl).

Every result is checked against what was uploaded or against glReadPixels.
"""
import ctypes
import os
import sys
from typing import Any
from pathlib import Path

os.environ.setdefault("PYOPENGL_PLATFORM", "egl")  # PyOpenGL must talk EGL to gltensor's context

import numpy as np  # noqa: E402

try:
    import gltensor  # noqa: E402
except ImportError:  # running from a checkout without installing: use the in-place build
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
    import gltensor  # noqa: E402
from OpenGL import GL  # noqa: E402


def as_numpy(x: Any) -> "np.ndarray[Any, Any]":
    """A host numpy array of a frame or torch tensor, wherever it lives."""
    import torch

    t = x if isinstance(x, torch.Tensor) else torch.from_dlpack(x)
    result: np.ndarray[Any, Any] = t.cpu().numpy()
    return result


def pil_picture(w: int, h: int) -> "np.ndarray[Any, Any]":
    """An RGBA picture drawn with PIL (top row first, as images are stored)."""
    from PIL import Image, ImageDraw

    img = Image.new("RGBA", (w, h), (30, 40, 60, 255))
    d = ImageDraw.Draw(img)
    d.rectangle([0, 0, w - 1, h // 5], fill=(250, 200, 0, 255))  # a yellow band at the top
    d.ellipse([w // 4, h // 4, 3 * w // 4, 3 * h // 4], fill=(200, 30, 90, 255), outline=(255, 255, 255, 255))
    d.text((4, h - 14), "gltensor", fill=(255, 255, 255, 255))
    return np.asarray(img, dtype=np.uint8)


def upload_texture(pixels: "np.ndarray[Any, Any]") -> int:
    """glTexImage2D of an (H, W, 4) uint8 array. GL's row 0 is the bottom row, so a picture stored top
    row first is uploaded upside down (rows reversed) to look right on screen; gltensor's flip=True then
    gives back the picture as stored."""
    h, w, _ = pixels.shape
    tex = int(GL.glGenTextures(1))
    GL.glBindTexture(GL.GL_TEXTURE_2D, tex)
    GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_MIN_FILTER, GL.GL_NEAREST)
    GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_MAG_FILTER, GL.GL_NEAREST)
    GL.glPixelStorei(GL.GL_UNPACK_ALIGNMENT, 1)
    bottom_up = np.ascontiguousarray(pixels[::-1])
    GL.glTexImage2D(GL.GL_TEXTURE_2D, 0, GL.GL_RGBA8, w, h, 0, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, bottom_up)
    GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
    return tex


def render_to_renderbuffer(w: int, h: int) -> "tuple[int, int, np.ndarray[Any, Any]]":
    """A renderbuffer attached to a framebuffer, painted with scissored clears; returns (rbo, fbo, image
    read back with glReadPixels, bottom-up)."""
    rbo = int(GL.glGenRenderbuffers(1))
    GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, rbo)
    GL.glRenderbufferStorage(GL.GL_RENDERBUFFER, GL.GL_RGBA8, w, h)
    fbo = int(GL.glGenFramebuffers(1))
    GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, fbo)
    GL.glFramebufferRenderbuffer(GL.GL_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT0, GL.GL_RENDERBUFFER, rbo)
    assert GL.glCheckFramebufferStatus(GL.GL_FRAMEBUFFER) == GL.GL_FRAMEBUFFER_COMPLETE
    GL.glViewport(0, 0, w, h)
    GL.glClearColor(0.2, 0.4, 0.6, 1.0)
    GL.glClear(GL.GL_COLOR_BUFFER_BIT)
    GL.glEnable(GL.GL_SCISSOR_TEST)
    GL.glScissor(0, 0, w // 2, h // 3)  # bottom-left block, as GL counts rows
    GL.glClearColor(1.0, 0.0, 0.0, 1.0)
    GL.glClear(GL.GL_COLOR_BUFFER_BIT)
    GL.glDisable(GL.GL_SCISSOR_TEST)
    GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 1)
    buf = (ctypes.c_ubyte * (w * h * 4))()
    GL.glReadPixels(0, 0, w, h, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, buf)
    GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, 0)
    return rbo, fbo, np.frombuffer(memoryview(buf), np.uint8).reshape(h, w, 4).copy()


def main() -> None:
    import torch

    with gltensor.Context.headless() as ctx:
        print(f"GL: {ctx.renderer}; cuda_device={ctx.cuda_device}")

        # 1. a PIL picture uploaded with PyOpenGL
        pic = pil_picture(150, 90)
        tex = upload_texture(pic)
        with gltensor.Capture(tex) as cap:  # GL_TEXTURE_2D is the default target
            print(f"texture {tex}: {cap.format} {cap.shape} -> backend {cap.backend}")
            upright = as_numpy(cap.read())  # flip=True: top row first, as stored in the PIL image
            assert np.array_equal(upright, pic)
            bottom_up = as_numpy(cap.read(flip=False))  # GL's order: row 0 is the bottom row
            assert np.array_equal(bottom_up, pic[::-1])
            print("  flip=True equals the PIL picture; flip=False equals it upside down")

            # 2. conversions in the copy pass: what a network wants, in one kernel (one loop on CPU)
            x = torch.from_dlpack(cap.read(channels="bgr", dtype="float32", layout="chw"))
            want = pic[..., [2, 1, 0]].transpose(2, 0, 1).astype(np.float32) / np.float32(255)
            assert x.shape == (3, 90, 150) and x.dtype == torch.float32
            assert np.array_equal(as_numpy(x), want)
            print(f"  channels='bgr', dtype='float32', layout='chw' -> {tuple(x.shape)} {x.dtype} in [0, 1]")

            # 3. out=: into tensors we own, on the capture's device
            device = f"cuda:{cap.cuda_device}" if cap.backend == "cuda" else "cpu"
            obs = torch.empty((90, 150, 4), dtype=torch.uint8, device=device)
            assert cap.read(out=obs) is obs
            assert np.array_equal(as_numpy(obs), pic)
            batch = torch.zeros((4, 3, 90, 150), dtype=torch.float32, device=device)
            cap.read(out=batch[2], channels="rgb", dtype="float32", layout="chw")  # one slot of a batch
            assert np.array_equal(as_numpy(batch[2]), want[::-1]) and float(batch[1].abs().sum()) == 0
            print("  out= wrote into a (90, 150, 4) tensor and into slot 2 of a (4, 3, 90, 150) batch")
        GL.glDeleteTextures([tex])

        # 4. a renderbuffer painted with PyOpenGL
        rbo, fbo, ref = render_to_renderbuffer(64, 48)
        with gltensor.Capture(rbo, gltensor.GL_RENDERBUFFER) as cap:
            img = as_numpy(cap.read())
            assert np.array_equal(img, ref[::-1])
            assert tuple(img[-1, 0]) == (255, 0, 0, 255) and tuple(img[0, -1]) == (51, 102, 153, 255)
            print(f"renderbuffer {rbo}: {cap.format} {cap.shape}, equals glReadPixels (red block bottom-left)")
        GL.glDeleteFramebuffers(1, [fbo])
        GL.glDeleteRenderbuffers(1, [rbo])

        # 5. a texture another library created: moderngl, through its GL name
        try:
            import moderngl  # noqa: F401
        except ImportError:
            print("moderngl not installed: skipping its texture (pip install moderngl)")
        else:
            import gltensor.moderngl as gm

            mctx = gm.attach()  # moderngl on the context that is current now (ctx)
            mtex = mctx.texture((33, 21), 4, data=np.arange(33 * 21 * 4, dtype=np.uint32).astype(np.uint8).tobytes())
            with gltensor.Capture(mtex.glo, gltensor.GL_TEXTURE_2D) as cap:  # same as gm.capture(mtex)
                got = as_numpy(cap.read(flip=False))  # moderngl's data is bottom-up, like GL's
                own = np.frombuffer(mtex.read(), np.uint8).reshape(21, 33, 4)
                assert np.array_equal(got, own)
                print(f"moderngl texture glo={mtex.glo}: {cap.format} {cap.shape}, equals Texture.read()")
            mtex.release()
            mctx.release()
        print("all checks passed")


if __name__ == "__main__":
    main()
