#!/usr/bin/env python3
"""A viewer that shows a torch image tensor through an OpenGL texture, on the headless default context.

    python examples/torch_texture_viewer.py                  # 320x240, 12 frames, viewer.png
    python examples/torch_texture_viewer.py --size 1024 1024 --frames 120

Each frame torch computes an image, a (H, W, 3) float tensor in [0, 1] with row 0 at the top (a plasma
pattern here; a neural renderer's output or a segmentation overlay in practice), and
`gltensor.Upload.write` puts it into an RGBA8 texture in one pass: flipped to GL's bottom-up rows,
converted to unorm8 (round(clamp(x, 0, 1) * 255)) and given alpha 255. GL then draws the texture as a
full-screen quad into the "window" (an offscreen framebuffer: there is no display here), and the window is
captured back with gltensor.Capture and saved. Drawn 1:1 with nearest sampling, the window must equal the
tensor exactly: the script checks it on every frame, and its last line is `viewer: OK ...`.
On an NVIDIA GPU the tensor, the write and the capture stay on the GPU; on Mesa, the CPU backend runs.
"""
import argparse
import os
import sys
import time
from pathlib import Path
from typing import Sequence

os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from OpenGL import GL  # noqa: E402

try:
    import gltensor
except ImportError:  # running from a checkout without installing: use the in-place build
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
    import gltensor
from gltensor.scene import RenderTarget  # noqa: E402

VS = """#version 330 core
out vec2 v_uv;
void main() {
    vec2 p = vec2(gl_VertexID & 1, gl_VertexID >> 1);   // a triangle strip covering the viewport
    v_uv = p;
    gl_Position = vec4(p * 2.0 - 1.0, 0.0, 1.0);
}"""
FS = """#version 330 core
in vec2 v_uv;
uniform sampler2D u_image;
out vec4 o_color;
void main() { o_color = texture(u_image, v_uv); }"""


def link(vs: str, fs: str) -> int:
    prog: int = GL.glCreateProgram()
    for kind, src in ((GL.GL_VERTEX_SHADER, vs), (GL.GL_FRAGMENT_SHADER, fs)):
        sh = GL.glCreateShader(kind)
        GL.glShaderSource(sh, src)
        GL.glCompileShader(sh)
        if not GL.glGetShaderiv(sh, GL.GL_COMPILE_STATUS):
            raise RuntimeError(GL.glGetShaderInfoLog(sh).decode())
        GL.glAttachShader(prog, sh)
        GL.glDeleteShader(sh)
    GL.glLinkProgram(prog)
    if not GL.glGetProgramiv(prog, GL.GL_LINK_STATUS):
        raise RuntimeError(GL.glGetProgramInfoLog(prog).decode())
    return prog


def plasma(h: int, w: int, t: float, device: str) -> torch.Tensor:
    """(h, w, 3) float32 in [0, 1]: a moving plasma with a bright bar in the top rows (orientation check)."""
    y = torch.linspace(0, 1, h, device=device)[:, None]
    x = torch.linspace(0, 1, w, device=device)[None, :]
    v = torch.sin(10 * x + t) + torch.sin(7 * y - 1.3 * t) + torch.sin(9 * (x + y) + 0.7 * t)
    img = torch.stack([0.5 + 0.5 * torch.sin(v + p) for p in (0.0, 2.1, 4.2)], dim=2)
    img[: max(1, h // 16)] = 1.0  # the top of the tensor must be the top of the window
    return img.contiguous()


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, nargs=2, default=(320, 240), metavar=("W", "H"))
    ap.add_argument("--frames", type=int, default=12)
    ap.add_argument("--out", type=Path, default=Path("viewer.png"), help="where the last window frame goes")
    args = ap.parse_args(argv)
    w, h = args.size

    ctx = gltensor.Context.headless()
    device = "cuda" if ctx.cuda_device is not None and torch.cuda.is_available() else "cpu"
    texture = GL.glGenTextures(1)
    GL.glBindTexture(GL.GL_TEXTURE_2D, texture)
    GL.glTexStorage2D(GL.GL_TEXTURE_2D, 1, GL.GL_RGBA8, w, h)
    GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_MIN_FILTER, GL.GL_NEAREST)
    GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_MAG_FILTER, GL.GL_NEAREST)
    GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
    window = RenderTarget(w, h, depth=False)
    prog = link(VS, FS)
    vao = GL.glGenVertexArrays(1)

    image = gltensor.Upload(texture)  # registered once; write() per frame
    screen = gltensor.Capture(window.texture)
    print(f"viewer: {w}x{h} on {device}, upload backend {image.backend}, GL {ctx.renderer}")
    mismatched = 0
    t0 = time.perf_counter()
    for k in range(args.frames):
        x = plasma(h, w, 0.2 * k, device)
        image.write(x)  # float [0, 1] -> RGBA8, flipped, alpha 255, one pass
        window.bind()
        GL.glUseProgram(prog)
        GL.glBindVertexArray(vao)
        GL.glBindTexture(GL.GL_TEXTURE_2D, texture)
        GL.glDrawArrays(GL.GL_TRIANGLE_STRIP, 0, 4)
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
        GL.glBindVertexArray(0)
        GL.glUseProgram(0)
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, 0)
        shown = torch.from_dlpack(screen.read())  # (h, w, 4) uint8, top row first
        want = (x.clamp(0, 1) * 255).round().to(torch.uint8)  # round half to even, as the write does
        mismatched += int((shown[..., :3] != want).any(dim=2).sum()) + int((shown[..., 3] != 255).sum())
    elapsed = time.perf_counter() - t0
    last = shown.cpu().numpy()
    try:
        from PIL import Image

        Image.fromarray(last[..., :3]).save(args.out)
    except ImportError:
        import matplotlib.image

        matplotlib.image.imsave(args.out, last[..., :3])
    print(f"viewer: {args.frames} frames in {elapsed:.2f} s ({args.frames / elapsed:.1f} frames/s), "
          f"saved {args.out}; top rows white: {bool((last[0, :, :3] == 255).all())}")
    image.close()
    screen.close()
    GL.glDeleteVertexArrays(1, [vao])
    GL.glDeleteProgram(prog)
    GL.glDeleteTextures([texture])
    window.close()
    ctx.close()
    if mismatched or not (last[0, :, :3] == 255).all():
        print(f"viewer: FAILED, {mismatched} pixels differ from the tensor")
        return 1
    print(f"viewer: OK, {args.frames} frames shown exactly as the tensor")
    return 0


if __name__ == "__main__":
    sys.exit(main())
