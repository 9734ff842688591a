#!/usr/bin/env python3
"""Panda3D cameras into torch: the engine's CPU readback versus gltensor.panda3d.

One step = renderFrame() + hand every camera's frame to torch + a consumer op (`x.float().mean()`), as in
bench_single.py: correctness first (each path's frames equal the engine's readback, two different frames),
warm-up, timed steps with one synchronisation at the end, median of 3 runs, all paths in one process.

    python benchmarks/bench_panda3d.py [--cases 84x1,256x1,1024x1,128x16] [--steps 200] [--json PATH]

Paths: (a) render only; (b) the usual way: GraphicsEngine.extractTextureData (Panda's GL readback into
the texture's RAM image) -> getRamImage() (BGRA, bottom-up) -> numpy (flip rows, reorder to RGB) ->
torch -> .cuda() (skipped without CUDA); (c) gltensor.panda3d sensors: RGBCamera.perceive(to_float=False)
per camera (one camera) or CameraBatch.perceive() (several cameras, one gltensor.Batch read).
Without a GPU (Mesa llvmpipe) gltensor runs its CPU backend and '.cuda()' is skipped: the numbers then
compare two host readbacks and say nothing about the GPU path.
"""
import argparse
import datetime
import json
import sys
import types
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
try:
    from gltensor import panda3d as gp
except ImportError:
    sys.path.insert(0, str(HERE.parent / "python"))
    from gltensor import panda3d as gp
sys.path.insert(0, str(HERE))
from bench_single import CheckFailed, fmt_us, machine_info, median, print_table, time_steps  # noqa: E402


def parse_cases(s):
    out = []
    for item in s.split(","):
        size, n = item.lower().split("x")
        out.append((int(size), int(n)))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=parse_cases, default=parse_cases("84x1,256x1,1024x1,128x16"),
                    help="SIZExCAMERAS, comma-separated (default 84x1,256x1,1024x1,128x16)")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--backend", choices=("auto", "cuda", "cpu"), default="auto")
    ap.add_argument("--json", help="output file (default benchmarks/results/panda3d_<host>.json)")
    args = ap.parse_args(argv)

    import torch
    gp.configure("win-size 32 32\n")
    from direct.showbase.ShowBase import ShowBase
    from panda3d.core import AmbientLight, DirectionalLight

    base = ShowBase(windowType="offscreen")
    gsg = base.win.getGsg()
    model = base.loader.loadModel("models/smiley")
    model.reparentTo(base.render)
    sun = base.render.attachNewNode(DirectionalLight("sun"))
    sun.setHpr(30, -40, 0)
    amb = base.render.attachNewNode(AmbientLight("amb"))
    amb.node().setColor((0.25, 0.25, 0.25, 1))
    base.render.setLight(sun)
    base.render.setLight(amb)

    glinfo = types.SimpleNamespace(vendor=gsg.getDriverVendor(), renderer=gsg.getDriverRenderer(),
                                   version=gsg.getDriverVersion(), is_software="llvmpipe" in gsg.getDriverRenderer(),
                                   cuda_device=None)
    info = machine_info(glinfo, torch)
    import panda3d
    info["panda3d"] = getattr(panda3d, "__version__", None) or __import__("panda3d.core").core.PandaSystem.getVersionString()
    host = "".join(c if c.isalnum() or c in "-_." else "_" for c in info["host"])
    json_path = Path(args.json) if args.json else HERE / "results" / ("panda3d_%s.json" % host)
    to_cuda = torch.cuda.is_available()
    report = {"benchmark": "panda3d", "date": datetime.datetime.now().isoformat(timespec="seconds"),
              "argv": sys.argv[1:], "machine": info,
              "config": {"cases": args.cases, "steps": args.steps, "warmup": args.warmup, "runs": args.runs,
                         "backend": args.backend},
              "results": [], "status": "running"}
    print("Panda3D GL: %s | %s | torch %s | CUDA: %s" % (glinfo.renderer, glinfo.version, torch.__version__, to_cuda))

    def sync():
        if to_cuda:
            torch.cuda.synchronize()

    rows = []
    try:
        for size, n in args.cases:
            cams = [gp.RGBCamera(base, size, size, backend=args.backend) for _ in range(n)]
            for k, c in enumerate(cams):
                c.camera.setPos(-0.3 * (n - 1) + 0.6 * k, -6, 0)
                c.camera.lookAt(0, 0, 0)
            batch = gp.CameraBatch(cams) if n > 1 else None
            base.graphicsEngine.renderFrame()
            backend = cams[0].texture_capture.backend
            report["machine"].setdefault("backend", backend)
            report["machine"].setdefault("backend_reason", cams[0].texture_capture.capture.backend_reason)

            def ram_path():
                out = []
                for c in cams:
                    base.graphicsEngine.extractTextureData(c.color_texture, gsg)
                    t = c.color_texture
                    a = np.frombuffer(t.getRamImage(), np.uint8).reshape(t.getYSize(), t.getXSize(), -1)
                    x = torch.from_numpy(np.ascontiguousarray(a[::-1, :, [2, 1, 0]]))
                    out.append(x.cuda() if to_cuda else x)
                return torch.stack(out) if n > 1 else out[0]

            if batch is not None:
                def gt_path():
                    return batch.perceive(to_float=False)
            else:
                def gt_path():
                    return cams[0].perceive(to_float=False)

            paths = [("a", "render only", None),
                     ("b", "extractTextureData -> getRamImage -> numpy flip/BGR->RGB -> torch" +
                      (".cuda()" if to_cuda else " ('.cuda()' skipped: no CUDA)"), ram_path),
                     ("c", "gltensor.panda3d " + ("CameraBatch.perceive()" if n > 1 else "RGBCamera.perceive()") +
                      " [%s backend]" % backend, gt_path)]

            def render(i):
                model.setH(i * 2.0)
                base.graphicsEngine.renderFrame()

            for i in (3, 40):  # correctness first: two different frames, both paths equal to each other
                render(i)
                ref = ram_path().cpu()
                got = gt_path().cpu()
                if not torch.equal(ref, got):
                    raise CheckFailed("%dx%d x%d: gltensor frame %d differs from getRamImage" % (size, size, n, i))

            times = {k: [] for k, _, _ in paths}
            for _ in range(args.runs):
                for key, _, fn in paths:
                    times[key].append(time_steps(render, fn, args.steps, args.warmup, sync))
            base_us = median(times["b"])
            for key, name, _ in paths:
                us = median(times[key])
                report["results"].append({"size": [size, size], "cameras": n, "path": key, "name": name,
                                          "check": "equal to getRamImage" if key != "a" else "n/a",
                                          "runs_us_per_step": times[key], "us_per_step": us,
                                          "frames_per_s": 1e6 / us,
                                          "speedup_vs_ram_image": base_us / us if key == "c" else None})
                rows.append(["%d² x%d" % (size, n), "(%s) %s" % (key, name), fmt_us(us), "%.0f" % (1e6 / us),
                             "%.2fx" % (base_us / us) if key == "c" else "-"])
            if batch is not None:
                batch.close()
            for c in cams:
                c.close()
    except CheckFailed as e:
        print("FAIL: %s" % e, file=sys.stderr)
        report["status"] = "check failed: %s" % e
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(report, indent=1))
        return 1
    report["status"] = "ok"
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(report, indent=1))
    print_table("Panda3D cameras, one step = renderFrame + frames into torch + x.float().mean(); median of %d runs "
                "of %d steps" % (args.runs, args.steps),
                ["case", "path", "us/step", "frames/s", "vs (b)"], rows, left=(0, 1))
    print("\nJSON: %s" % json_path)
    base.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
