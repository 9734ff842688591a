#!/usr/bin/env python3
"""A particle system integrated in torch and drawn by OpenGL straight from the mapped vertex buffer.

    python examples/torch_particles.py                       # 20,000 particles, 24 frames, particles.gif
    python examples/torch_particles.py --million --frames 60 # 1M particles (the GPU machine)

Each step:
  1. torch integrates positions and velocities (a swirl around the centre, gravity, bouncing walls);
  2. `gltensor.map_buffer(vbo, mode="write")` lends the GL vertex buffer to torch as a tensor, and the
     new positions are copied into it (on the GPU: device to device, no host trip);
  3. leaving the block hands the buffer back to GL, which draws the particles as additive points into an
     offscreen RGBA8 texture;
  4. `gltensor.Capture` reads the rendered frame back as a tensor, kept for the animation.
On a machine with an NVIDIA GPU all of it stays on the GPU (CUDA backend); on Mesa (no GPU) the same code
runs on the CPU backend with host tensors. The frames are saved as an animated GIF (Pillow), or as a PNG
strip when Pillow is missing. The last line is `particles: OK ...` when every frame showed particles.
"""
import argparse
import os
import sys
import time
from pathlib import Path
from typing import Sequence

os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

import numpy as np  # noqa: E402
import numpy.typing as npt  # noqa: E402
import torch  # noqa: E402
from OpenGL import GL  # noqa: E402

try:
    import gltensor
except ImportError:  # running from a checkout without installing: use the in-place build
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
    import gltensor
from gltensor.scene import RenderTarget  # noqa: E402

VS = """#version 330 core
layout(location = 0) in vec4 particle;   // x, y in [-1, 1], z unused, w: speed
out vec3 v_color;
void main() {
    float s = clamp(particle.w * 2.0, 0.0, 1.0);
    v_color = mix(vec3(0.15, 0.35, 1.0), vec3(1.0, 0.55, 0.1), s);
    gl_Position = vec4(particle.xy, 0.0, 1.0);
    gl_PointSize = 1.0;
}"""
FS = """#version 330 core
in vec3 v_color;
uniform float u_gain;
out vec4 o_color;
void main() { o_color = vec4(v_color * u_gain, 1.0); }"""


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


class Particles:
    """Positions and velocities in torch, integrated with a semi-implicit Euler step."""

    def __init__(self, n: int, device: str, seed: int = 0) -> None:
        g = torch.Generator(device="cpu").manual_seed(seed)
        r = torch.rand(n, generator=g).sqrt() * 0.6
        a = torch.rand(n, generator=g) * 2 * torch.pi
        self.pos = torch.stack([r * a.cos(), r * a.sin()], 1).to(device)
        self.vel = torch.stack([-a.sin(), a.cos()], 1).to(device) * (0.6 - r.to(device))[:, None]

    def step(self, dt: float) -> None:
        p, v = self.pos, self.vel
        r2 = (p * p).sum(1, keepdim=True) + 0.02
        swirl = torch.stack([-p[:, 1], p[:, 0]], 1) / r2 * 0.02
        v += dt * (swirl - p / r2.sqrt() * 0.35 + torch.tensor([0.0, -0.25], device=p.device))
        p += dt * v
        for k in range(2):  # bounce on the walls, losing a little energy
            out = p[:, k].abs() > 0.98
            v[out, k] *= -0.8
            p[:, k].clamp_(-0.98, 0.98)

    def speed(self) -> torch.Tensor:
        return self.vel.norm(dim=1)


def save_animation(frames: Sequence[npt.NDArray[np.uint8]], path: Path) -> Path:
    """frames: list of (H, W, 4) uint8 numpy arrays (top row first). GIF with Pillow, else a PNG strip."""
    try:
        from PIL import Image
    except ImportError:
        import matplotlib.image

        path = path.with_suffix(".png")
        matplotlib.image.imsave(path, np.concatenate([f[..., :3] for f in frames], axis=1))
        return path
    images = [Image.fromarray(f[..., :3]) for f in frames]
    if path.suffix.lower() == ".gif":
        images[0].save(path, save_all=True, append_images=images[1:], duration=50, loop=0)
    else:
        Image.fromarray(np.concatenate([f[..., :3] for f in frames], axis=1)).save(path)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--particles", type=int, default=20_000)
    ap.add_argument("--million", action="store_true", help="1,000,000 particles (overrides --particles)")
    ap.add_argument("--size", type=int, nargs=2, default=(256, 256), metavar=("W", "H"))
    ap.add_argument("--frames", type=int, default=24)
    ap.add_argument("--substeps", type=int, default=2, help="integration steps per frame")
    ap.add_argument("--out", type=Path, default=Path("particles.gif"), help=".gif (animated) or .png (strip)")
    args = ap.parse_args(argv)
    n = 1_000_000 if args.million else args.particles
    w, h = args.size

    ctx = gltensor.Context.headless()
    device = "cuda" if ctx.cuda_device is not None and torch.cuda.is_available() else "cpu"
    target = RenderTarget(w, h, depth=False)
    prog = link(VS, FS)
    vbo = GL.glGenBuffers(1)
    GL.glBindBuffer(GL.GL_ARRAY_BUFFER, vbo)
    GL.glBufferData(GL.GL_ARRAY_BUFFER, n * 16, None, GL.GL_DYNAMIC_DRAW)
    vao = GL.glGenVertexArrays(1)
    GL.glBindVertexArray(vao)
    GL.glEnableVertexAttribArray(0)
    GL.glVertexAttribPointer(0, 4, GL.GL_FLOAT, GL.GL_FALSE, 16, None)
    GL.glBindVertexArray(0)
    GL.glBindBuffer(GL.GL_ARRAY_BUFFER, 0)

    buf = gltensor.Buffer(vbo)  # registered once
    cap = gltensor.Capture(target.texture)
    print(f"particles: {n:,} on {device}, buffer backend {buf.backend}, {w}x{h}, GL {ctx.renderer}")
    sim = Particles(n, device)
    gain = min(1.0, 2.0 * w * h / n)  # keep the additive glow from saturating with many particles
    frames: list[npt.NDArray[np.uint8]] = []
    lit: list[int] = []
    t0 = time.perf_counter()
    for _ in range(args.frames):
        for _ in range(args.substeps):
            sim.step(1 / 60)
        with gltensor.map_buffer(buf, "float32", (n, 4), mode="write") as v:
            vertices = torch.from_dlpack(v)  # the GL buffer's memory, on the same device as sim
            vertices[:, :2] = sim.pos
            vertices[:, 2] = 0
            vertices[:, 3] = sim.speed()
        # the block's exit handed the buffer back: GL's draw below sees the new vertices
        target.bind()
        GL.glClearColor(0.0, 0.0, 0.02, 1.0)
        GL.glClear(GL.GL_COLOR_BUFFER_BIT)
        GL.glEnable(GL.GL_BLEND)
        GL.glBlendFunc(GL.GL_ONE, GL.GL_ONE)
        GL.glUseProgram(prog)
        GL.glUniform1f(GL.glGetUniformLocation(prog, "u_gain"), gain)
        GL.glBindVertexArray(vao)
        GL.glDrawArrays(GL.GL_POINTS, 0, n)
        GL.glBindVertexArray(0)
        GL.glUseProgram(0)
        GL.glDisable(GL.GL_BLEND)
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, 0)
        frame = torch.from_dlpack(cap.read())  # (H, W, 4) uint8, top row first
        lit.append(int((frame[..., :3].amax(dim=2) > 20).sum()))
        frames.append(frame.cpu().numpy())
    elapsed = time.perf_counter() - t0
    path = save_animation(frames, args.out)
    print(f"particles: {args.frames} frames in {elapsed:.2f} s ({args.frames / elapsed:.1f} frames/s), "
          f"lit pixels per frame {min(lit)}..{max(lit)}, saved {path}")
    cap.close()
    buf.close()
    GL.glDeleteVertexArrays(1, [vao])
    GL.glDeleteBuffers(1, [vbo])
    GL.glDeleteProgram(prog)
    target.close()
    ctx.close()
    if min(lit) == 0:
        print("particles: FAILED, a frame showed no particles")
        return 1
    print(f"particles: OK, {args.frames} frames of {n:,} particles")
    return 0


if __name__ == "__main__":
    sys.exit(main())
