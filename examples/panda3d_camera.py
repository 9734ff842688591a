#!/usr/bin/env python3
"""Panda3D offscreen (p3headlessgl), a lit textured model from the panda3d wheel, an RGB and a depth camera
sensor read into torch each step with gltensor; the first frame is checked against Panda's own CPU
readback (getRamImageAs("RGB"), bottom-up) before frames/s are measured.

    python examples/panda3d_camera.py [--size 97x61] [--steps 200] [--backend auto|cuda|cpu]
"""
import argparse
import sys
import time
from pathlib import Path

try:
    from gltensor import panda3d as gp
except ImportError:  # running from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
    from gltensor import panda3d as gp

import numpy as np


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", default="97x61", help="WxH (default 97x61: not a power of two)")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--backend", default="auto", choices=("auto", "cuda", "cpu"))
    args = ap.parse_args(argv)
    w, h = (int(v) for v in args.size.lower().split("x"))

    gp.configure("win-size 32 32\n")
    import torch
    from direct.showbase.ShowBase import ShowBase
    from panda3d.core import AmbientLight, DirectionalLight

    base = ShowBase(windowType="offscreen")
    gsg = base.win.getGsg()
    print("Panda3D GL: %s | %s" % (gsg.getDriverRenderer(), gsg.getDriverVersion()))
    model = base.loader.loadModel("models/smiley")      # shipped with the wheel, textured
    model.reparentTo(base.render)
    sun = base.render.attachNewNode(DirectionalLight("sun"))
    sun.setHpr(30, -40, 0)
    amb = base.render.attachNewNode(AmbientLight("amb"))
    amb.node().setColor((0.25, 0.25, 0.25, 1))
    base.render.setLight(sun)
    base.render.setLight(amb)

    rgb = gp.RGBCamera(base, w, h, backend=args.backend)
    depth = gp.DepthCamera(base, w, h, backend=args.backend, near=1.0, far=100.0)
    for cam in (rgb, depth):
        cam.camera.setPos(0, -6, 0)
        cam.camera.lookAt(0, 0, 0)

    base.graphicsEngine.renderFrame()
    x = rgb.read(to_float=False)
    assert base.graphicsEngine.extractTextureData(rgb.color_texture, gsg)
    assert rgb.color_texture is not None
    ref = np.frombuffer(bytes(rgb.color_texture.getRamImageAs("RGB")), np.uint8).reshape(h, w, 3)[::-1]
    ok = np.array_equal(x.cpu().numpy(), ref)
    print("backend: %s (%s)" % (rgb.texture_capture.backend, rgb.texture_capture.capture.backend_reason))
    print("check vs getRamImageAs('RGB'): %s" % ("equal" if ok else "DIFFERENT"))
    if not ok:
        return 1

    t0 = time.perf_counter()
    for i in range(args.steps):
        model.setH(i * 3.0)
        base.graphicsEngine.renderFrame()
        obs = rgb.read()                              # (h, w, 3) float32 RGB in [0, 1]
        dist = depth.read(linear=True)                # (h, w, 1) float32 distance
        (obs.mean() + dist.mean()).item()             # a consumer
    dt = time.perf_counter() - t0
    print("%d steps at %dx%d: %.1f frames/s (render + RGB + depth into torch %s)"
          % (args.steps, w, h, args.steps / dt, obs.device))
    rgb.close()
    depth.close()
    base.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
