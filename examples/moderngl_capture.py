#!/usr/bin/env python3
"""moderngl renders a lit, depth-tested mesh; gltensor hands each frame to torch.

    python examples/moderngl_capture.py --size 256 192 --steps 200

moderngl is attached to a gltensor headless context (`gltensor.moderngl.headless_context()`), so on a
machine with an NVIDIA GPU it renders on the EGL device of CUDA device 0 and every frame reaches torch as
a CUDA tensor without a trip through host memory; on Mesa (no GPU) the same code gives CPU tensors.

The first frame is checked against moderngl's own CPU readback, `Framebuffer.read()`, which returns GL's
bottom-up rows, each padded to `alignment` bytes (1 by default; 4 is GL's own default): reversing the
rows and dropping the padding gives the upright image gltensor returns.
"""
import argparse
import math
import sys
from typing import Any
import time
from pathlib import Path

import numpy as np

try:
    import gltensor
except ImportError:  # running from a checkout without installing: use the in-place build
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
    import gltensor
import gltensor.moderngl as gm  # noqa: E402

VS = """
#version 330
uniform mat4 mvp;
uniform mat3 nrm;
in vec3 in_pos;
in vec3 in_normal;
out vec3 v_normal;
out vec3 v_pos;
void main() {
    v_normal = nrm * in_normal;
    v_pos = in_pos;
    gl_Position = mvp * vec4(in_pos, 1.0);
}
"""
FS = """
#version 330
in vec3 v_normal;
in vec3 v_pos;
out vec4 f_color;
void main() {
    vec3 n = normalize(v_normal);
    float diffuse = max(dot(n, normalize(vec3(0.4, 0.8, 0.6))), 0.0);
    vec3 base = 0.5 + 0.5 * sin(v_pos * 3.0 + vec3(0.0, 2.0, 4.0));
    f_color = vec4(base * (0.2 + 0.8 * diffuse), 1.0);
}
"""


def torus(R: float = 1.0, r: float = 0.4, n_major: int = 48, n_minor: int = 24) -> "np.ndarray[Any, Any]":
    """Interleaved (position, normal) float32 triangles of a torus around the y axis."""
    def point(u: float, v: float) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
        cu, su, cv, sv = math.cos(u), math.sin(u), math.cos(v), math.sin(v)
        return ((R + r * cv) * cu, r * sv, (R + r * cv) * su), (cv * cu, sv, cv * su)

    out: list[float] = []
    for i in range(n_major):
        for j in range(n_minor):
            u0, u1 = 2 * math.pi * i / n_major, 2 * math.pi * (i + 1) / n_major
            v0, v1 = 2 * math.pi * j / n_minor, 2 * math.pi * (j + 1) / n_minor
            for u, v in ((u0, v0), (u1, v0), (u1, v1), (u0, v0), (u1, v1), (u0, v1)):
                p, n = point(u, v)
                out.extend(p + n)
    return np.array(out, "f4")


def perspective(fovy: float, aspect: float, near: float, far: float) -> "np.ndarray[Any, Any]":
    f = 1.0 / math.tan(fovy / 2)
    m = np.zeros((4, 4), "f4")
    m[0, 0], m[1, 1] = f / aspect, f
    m[2, 2], m[2, 3], m[3, 2] = (far + near) / (near - far), 2 * far * near / (near - far), -1
    return m


def model_view(t: float) -> "np.ndarray[Any, Any]":
    """The torus tumbling in front of the camera, 3.5 units away."""
    a, b = 0.9 * t, 0.6 * t
    ry = np.array([[math.cos(a), 0, math.sin(a), 0], [0, 1, 0, 0], [-math.sin(a), 0, math.cos(a), 0], [0, 0, 0, 1]], "f4")
    rx = np.array([[1, 0, 0, 0], [0, math.cos(b), -math.sin(b), 0], [0, math.sin(b), math.cos(b), 0], [0, 0, 0, 1]], "f4")
    tr = np.eye(4, dtype="f4")
    tr[2, 3] = -3.5
    result: np.ndarray[Any, Any] = tr @ rx @ ry
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, nargs=2, default=(256, 192), metavar=("W", "H"))
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--backend", default="auto", choices=["auto", "cuda", "cpu"])
    args = ap.parse_args()
    import torch

    w, h = args.size
    gl_ctx, ctx = gm.headless_context()
    print(f"GL: {gl_ctx.renderer} ({gl_ctx.version}); cuda_device={gl_ctx.cuda_device}")

    prog = ctx.program(vertex_shader=VS, fragment_shader=FS)
    vbo = ctx.buffer(torus().tobytes())
    vao = ctx.vertex_array(prog, [(vbo, "3f 3f", "in_pos", "in_normal")])
    color = ctx.texture((w, h), 4)
    depth = ctx.depth_renderbuffer((w, h))
    fbo = ctx.framebuffer([color], depth)
    proj = perspective(math.radians(50), w / h, 0.1, 20.0)

    def render(t: float) -> None:
        mv = model_view(t)
        prog["mvp"].write((proj @ mv).T.astype("f4").tobytes())  # column-major for GLSL
        prog["nrm"].write(np.ascontiguousarray(mv[:3, :3].T).astype("f4").tobytes())
        fbo.use()
        ctx.enable_only(ctx.DEPTH_TEST)
        fbo.clear(0.05, 0.07, 0.1, 1.0, depth=1.0)
        vao.render()

    cap = gm.capture(fbo, backend=args.backend)  # colour attachment 0: GL_TEXTURE_2D color.glo
    print(f"capture: {cap.target} {cap.format} {cap.shape}, backend {cap.backend} ({cap.backend_reason})")

    # One check against moderngl's own readback, with GL's default 4-byte row alignment on RGB rows
    # (w * 3 bytes rounded up to a multiple of 4): bottom-up rows, padding dropped.
    render(0.0)
    x = torch.from_dlpack(cap.read(channels="rgb"))
    raw = fbo.read(components=3, alignment=4)
    stride = (w * 3 + 3) // 4 * 4
    ref = np.frombuffer(raw, np.uint8).reshape(h, stride)[:, : w * 3].reshape(h, w, 3)[::-1]
    if not np.array_equal(x.cpu().numpy(), ref):
        sys.exit("capture differs from Framebuffer.read()")
    print(f"step 0 matches Framebuffer.read() byte for byte: {tuple(x.shape)} {x.dtype} on {x.device}")

    # The loop: render, hand to torch, a consumer op (mean brightness) so the work is really done.
    obs: Any = None
    for step in range(5):  # warm-up
        render(step / 30)
        obs = torch.from_dlpack(cap.read(channels="rgb", dtype="float32", layout="chw"))
    sync = torch.cuda.synchronize if obs.is_cuda else (lambda: None)
    sync()
    total = torch.zeros((), device=obs.device)
    t0 = time.perf_counter()
    for step in range(args.steps):
        render(step / 30)
        obs = torch.from_dlpack(cap.read(channels="rgb", dtype="float32", layout="chw"))  # (3, H, W) in [0, 1]
        total += obs.mean()
    sync()
    dt = time.perf_counter() - t0
    print(f"{args.steps} steps of render + capture -> torch {tuple(obs.shape)} {obs.dtype} on {obs.device}: "
          f"{args.steps / dt:.1f} frames/s ({dt / args.steps * 1e6:.0f} us/step); mean brightness "
          f"{float(total) / args.steps:.3f}")

    cap.close()  # before the texture it registered goes
    for o in (vao, vbo, prog, fbo, depth, color):
        o.release()
    ctx.release()
    gl_ctx.close()


if __name__ == "__main__":
    main()
