#!/usr/bin/env python3
"""MuJoCo camera frames into torch each physics step, without mjr_readPixels.

    MUJOCO_GL=egl python examples/mujoco_camera.py --steps 200 --height 240 --width 320 [--depth]

A small model (floor, lights, a few falling bodies, a fixed camera) is stepped; after each step
`gltensor.mujoco.RendererCapture` renders the camera and reads the renderer's multisampled offscreen
buffer into torch (a CUDA tensor when MuJoCo's EGL context runs on an NVIDIA GPU with the CUDA backend,
else a CPU tensor). The first frame is checked pixel for pixel against `mujoco.Renderer.render()`.
"""
import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")  # before mujoco is imported

import numpy as np  # noqa: E402

try:
    import gltensor.mujoco as gmj  # noqa: E402
except ImportError:  # running from a checkout without installing: use the in-place build
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
    import gltensor.mujoco as gmj  # noqa: E402
import mujoco  # noqa: E402

XML = """
<mujoco model="gltensor-example">
  <visual><global offwidth="{w}" offheight="{h}"/></visual>
  <asset>
    <texture name="grid" type="2d" builtin="checker" rgb1=".2 .3 .4" rgb2=".8 .8 .7" width="64" height="64"/>
    <material name="grid" texture="grid" texrepeat="4 4" reflectance=".2"/>
  </asset>
  <worldbody>
    <light pos="0 0 4" dir="0 0 -1" diffuse=".8 .8 .8"/>
    <light pos="2 -2 3" dir="-1 1 -1.2" diffuse=".4 .3 .3" directional="true"/>
    <geom type="plane" size="3 3 .1" material="grid"/>
    <camera name="cam" pos="0 -3 1.5" xyaxes="1 0 0 0 .45 .9"/>
    <body pos="-.5 0 1" euler="10 20 30"><freejoint/><geom type="box" size=".25 .2 .15" rgba=".9 .2 .2 1"/></body>
    <body pos=".5 .3 1.5"><freejoint/><geom type="sphere" size=".22" rgba=".2 .8 .3 1"/></body>
    <body pos="0 .5 2" euler="40 0 0"><freejoint/><geom type="capsule" size=".08 .3" rgba=".3 .4 .95 1"/></body>
  </worldbody>
</mujoco>"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--height", type=int, default=240)
    p.add_argument("--width", type=int, default=320)
    p.add_argument("--depth", action="store_true", help="read linear depth instead of RGB")
    p.add_argument("--backend", default="auto", choices=["auto", "cuda", "cpu"])
    a = p.parse_args()

    model = mujoco.MjModel.from_xml_string(XML.format(w=a.width, h=a.height))
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    with mujoco.Renderer(model, height=a.height, width=a.width) as renderer:
        with gmj.RendererCapture(renderer, depth=a.depth, backend=a.backend) as cap:
            # check once against MuJoCo's own CPU readback
            frame = cap.render_and_read(data, camera="cam")
            if a.depth:
                renderer.enable_depth_rendering()
            renderer.update_scene(data, camera="cam")
            ref = renderer.render()
            renderer.disable_depth_rendering()
            same = np.array_equal(frame.cpu().numpy(), ref)
            print(f"{'depth' if a.depth else 'rgb'} {tuple(frame.shape)} {frame.dtype} on {frame.device} "
                  f"({cap.backend} backend); equal to Renderer.render(): {same}")
            if not same:
                sys.exit("mismatch against Renderer.render()")

            total = 0.0
            t0 = time.perf_counter()
            for _ in range(a.steps):
                mujoco.mj_step(model, data)
                frame = cap.render_and_read(data, camera="cam")
                total += float(frame.float().mean())  # a consumer op (syncs on the GPU)
            dt = time.perf_counter() - t0
            print(f"{a.steps} steps: {a.steps / dt:.1f} frames/s (step + render + read + mean), mean {total / a.steps:.3f}")

            # the same loop through Renderer.render() (mjr_readPixels into host memory, then torch)
            import torch
            dev = frame.device
            if a.depth:
                renderer.enable_depth_rendering()
            t0 = time.perf_counter()
            for _ in range(a.steps):
                mujoco.mj_step(model, data)
                renderer.update_scene(data, camera="cam")
                x = torch.from_numpy(renderer.render()).to(dev)
                float(x.float().mean())
            dt = time.perf_counter() - t0
            print(f"Renderer.render() -> torch: {a.steps / dt:.1f} frames/s")


if __name__ == "__main__":
    main()
