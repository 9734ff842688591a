"""`python -m gltensor.bench panda3d`: Panda3D cameras into torch under Panda's default PRC and under
gltensor.panda3d.configure(): getRamImage, MetaDrive's image_on_cuda recipe, and gltensor (one camera; N agents
as a Batch of buffers and as one buffer read as an Atlas), with Panda's render alone as the floor.

    python -m gltensor.bench panda3d [--cases 84x1,256x1,1024x1,128x16] [--prc default,configure]
                                     [--steps 200] [--json PATH] [--quick]

One step = renderFrame() + every camera's frame into torch + a consumer op (x.float().mean()); warm-up, timed
steps with one synchronisation at the end, median of --runs runs, all paths of a configuration in one process.
One process runs one Panda3D configuration (Panda reads its PRC when ShowBase opens its window):
`run_config(prc, cases, ...)` returns the rows of that configuration; main() runs one subprocess per
configuration (this mode again, with --one-config) and prints the table. Each path's frames must equal
Panda's getRamImage readback of the same frames (two different frames) before it is timed.

Besides wall-clock µs per step, each path reports the process's CPU time per step ("CPU us/step": all threads:
Python, Panda, the GL and CUDA drivers), which tells a CPU-bound step (Panda's per-buffer work, Python per
camera) from a GPU-bound one.

Paths of a case (SIZE² x N cameras), each checked against Panda's own readback before it is timed:
  render          renderFrame() alone, cameras in their own buffers (the floor)
  render-atlas    renderFrame() alone, the N cameras as display regions of one buffer (N > 1)
  ram             extractTextureData -> getRamImage() (BGRA, bottom-up, padded) -> numpy crop, flip, BGR->RGB ->
                  torch -> .cuda() (when CUDA is usable)
  metadrive       MetaDrive's image_on_cuda recipe per camera: cuda.bindings cudaGraphicsMapResources,
                  cudaGraphicsSubResourceGetMappedArray, cudaMemcpy2DFromArray of the whole (padded) texture into
                  a cudaMalloc'd buffer, unmap; CuPy [..., :3][..., ::-1][::-1] (flip, RGB->BGR) and astype(uint8,
                  order="C"); here also [:h, :w] so that it is right when Panda padded; N cameras -> cupy.stack
  gltensor        RGBCamera.read(to_float=False) (N = 1), CameraBatch.read() (N > 1)
  gltensor-atlas  CameraAtlas.read() (N > 1): one buffer, one display region per camera, one Atlas read
  round-trip      (N > 1) render + a gltensor read of one tiny (4x4) texture that is not re-rendered + the
                  consumer op on it: minus `render` (timed just before it), it is one GL<->CUDA round trip as
                  this run pays it

Ratios printed: "vs MetaDrive" = MetaDrive recipe µs / path µs (> 1: faster than MetaDrive's recipe).
"vs render+RT" (N > 1) = path µs / (render floor of that layout + one GL<->CUDA round trip). The round trip is
measured in the same run: (render + a gltensor read of one tiny 4x4 texture that Panda does not re-render +
the consumer op on it) minus render alone, timed one after the other in each run: what one hand-off adds to a
step whatever its size (on the GPU the GL->CUDA switch, ~300 us on an H200; on the CPU backend it is noise).
MetaDrive's recipe needs cuda-python (cuda.bindings) and CuPy and a GL context on a CUDA device; otherwise
it is listed as skipped with the reason. On a machine without a GPU gltensor runs its CPU backend and the
numbers compare host readbacks only; there (Mesa llvmpipe) a read also waits for the rasterisation of the
texture it reads, which `render` alone does not, so render floors and ratios say little.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import MODES
from .measure import CheckFailed, Skip, median, time_steps
from .panda3d_paths import metadrive_recipe, ram_rgb
from .report import fmt_us, machine_info, print_table, results_path, save_json

PRCS = ("default", "configure")


def open_showbase(prc):
    from gltensor import panda3d as gp
    from panda3d.core import loadPrcFileData
    # Logging only, under either configuration: no warning about the default EGL display (gltensor.panda3d.PRC).
    loadPrcFileData("gltensor-bench-quiet", "notify-level-egldisplay error\n")
    if prc == "configure":
        gp.configure("win-size 32 32\n")
    elif prc != "default":
        raise ValueError("unknown configuration %r (default, configure)" % prc)
    from direct.showbase.ShowBase import ShowBase
    from panda3d.core import AmbientLight, DirectionalLight
    base = ShowBase(windowType="offscreen")
    model = base.loader.loadModel("models/smiley")
    model.reparentTo(base.render)
    sun = base.render.attachNewNode(DirectionalLight("sun"))
    sun.setHpr(30, -40, 0)
    amb = base.render.attachNewNode(AmbientLight("amb"))
    amb.node().setColor((0.25, 0.25, 0.25, 1))
    base.render.setLight(sun)
    base.render.setLight(amb)
    return base, model


class _Case:
    """The cameras of one case: N per-camera buffers (RGBCamera) and, for N > 1, one CameraAtlas; one layout is
    active at a time so that renderFrame() draws only what the timed path reads."""

    def __init__(self, base, model, size, n, backend):
        from gltensor import panda3d as gp
        self.base, self.model, self.size, self.n = base, model, size, n
        self.cams = [gp.RGBCamera(base, size, size, backend=backend) for _ in range(n)]
        for k, c in enumerate(self.cams):
            c.camera.setPos(-0.3 * (n - 1) + 0.6 * k, -6, 0)
            c.camera.lookAt(0, 0, 0)
        self.batch = gp.CameraBatch(self.cams) if n > 1 else None
        self.atlas = None
        if n > 1:
            self.atlas = gp.CameraAtlas(base, n, size, size, backend=backend)
            for k, c in enumerate(self.atlas.cameras):
                c.setPos(-0.3 * (n - 1) + 0.6 * k, -6, 0)
                c.lookAt(0, 0, 0)
        self.tiny = gp.RGBCamera(base, 4, 4, backend=backend) if n > 1 else None
        base.graphicsEngine.renderFrame()
        base.graphicsEngine.renderFrame()
        if self.tiny is not None:
            self.tiny_read = self.tiny.texture_capture  # made while it renders; then it stops rendering
            self.tiny.buffer.setActive(False)
        self.layout = None
        self.use("buffers")

    def use(self, layout):
        if layout == self.layout:
            return
        for c in self.cams:
            c.buffer.setActive(layout == "buffers")
        if self.atlas is not None:
            self.atlas.buffer.setActive(layout == "atlas")
        self.layout = layout
        self.base.graphicsEngine.renderFrame()

    def render(self, i):
        self.model.setH(i * 2.0)
        self.base.graphicsEngine.renderFrame()

    def close(self):
        for o in [self.batch, self.atlas, self.tiny] + self.cams:
            if o is not None:
                o.close()


def panda_machine_info(base, torch):
    import types

    import panda3d.core as core
    gsg = base.win.getGsg()
    gl = types.SimpleNamespace(vendor=gsg.getDriverVendor(), renderer=gsg.getDriverRenderer(),
                               version=gsg.getDriverVersion(), is_software="llvmpipe" in gsg.getDriverRenderer(),
                               cuda_device=None)
    info = machine_info(gl, torch)
    info["panda3d"] = core.PandaSystem.getVersionString()
    return info


def run_config(prc, cases, steps, warmup, runs, backend, log=print):
    """All cases under one configuration: (machine info, list of result dicts: us_per_step, runs, check,
    skipped)."""
    import torch
    base, model = open_showbase(prc)
    gsg = base.win.getGsg()
    info = panda_machine_info(base, torch)
    results = []
    for size, n in cases:
        case = _Case(base, model, size, n, backend)
        be = case.cams[0].texture_capture.backend
        to_cuda = be == "cuda"
        sync = torch.cuda.synchronize if to_cuda else (lambda: None)
        padded = case.cams[0].texture_capture.padded
        label = "%d²x%d" % (size, n)

        def ref_buffers():
            xs = [ram_rgb(base, c.color_texture, False, torch) for c in case.cams]
            return torch.stack(xs) if n > 1 else xs[0]

        def ref_atlas():
            whole = ram_rgb(base, case.atlas.color_texture, False, torch)
            rows, cols = case.atlas.tiles
            tiles = [divmod(k, cols) for k in range(n)]
            return torch.stack([whole[r * size:(r + 1) * size, c * size:(c + 1) * size] for r, c in tiles])

        paths = [("render", "buffers", None, None)]
        if n > 1:  # the round trip right after its render floor, so that both see the same machine state
            paths.append(("round-trip", "buffers", lambda: torch.from_dlpack(case.tiny_read.read()), None))
            paths.append(("render-atlas", "atlas", None, None))

        def ram():
            xs = [ram_rgb(base, c.color_texture, to_cuda, torch) for c in case.cams]
            return torch.stack(xs) if n > 1 else xs[0]
        paths.append(("ram", "buffers", ram, ref_buffers))
        closers = []
        md_skip = None
        if not to_cuda:
            md_skip = "gltensor runs its %s backend here: no CUDA-GL interop" % be
        else:
            try:
                md_transfer, md_close = metadrive_recipe([c.color_texture for c in case.cams], gsg, torch)
                closers.append(md_close)
                paths.append(("metadrive", "buffers", md_transfer, lambda: ref_buffers().flip(-1)))
            except Skip as e:
                md_skip = str(e)
        if n == 1:
            paths.append(("gltensor", "buffers", lambda: case.cams[0].read(to_float=False), ref_buffers))
        else:
            paths.append(("gltensor", "buffers", lambda: case.batch.read(to_float=False), ref_buffers))
            paths.append(("gltensor-atlas", "atlas", lambda: case.atlas.read(to_float=False), ref_atlas))

        times = {}
        try:
            for key, layout, transfer, ref in paths:  # correctness first: two different frames
                if ref is None:
                    continue
                case.use(layout)
                for i in (3, 40):
                    case.render(i)
                    got, want = transfer().cpu(), ref().cpu()
                    if not torch.equal(got, want):
                        raise CheckFailed("%s %s %s: frame %d differs from getRamImage" % (prc, label, key, i))
            cpu = {}
            for _ in range(runs):
                for key, layout, transfer, _ in paths:
                    case.use(layout)
                    c0 = time.process_time()
                    times.setdefault(key, []).append(time_steps(case.render, transfer, steps, warmup, sync))
                    cpu.setdefault(key, []).append((time.process_time() - c0) / (steps + warmup) * 1e6)
        finally:
            for c in closers:
                c()
            case.close()
        us = {k: median(v) for k, v in times.items()}
        for key, layout, _, ref in paths:
            results.append({"prc": prc, "size": size, "cameras": n, "path": key, "backend": be, "padded": padded,
                            "runs_us_per_step": times[key], "us_per_step": us[key],
                            "cpu_us_per_step": median(cpu[key]),
                            "check": "equal to getRamImage" if ref is not None else "n/a"})
        if md_skip:
            results.append({"prc": prc, "size": size, "cameras": n, "path": "metadrive", "skipped": md_skip})
        log("  %s %s: %s" % (prc, label, ", ".join("%s %.0f us" % (k, v) for k, v in us.items())))
    base.destroy()
    return info, results


def ratios(results):
    """Per row: vs MetaDrive's recipe (same case), and for N > 1 vs (render floor of the path's layout + one
    round trip), the round trip being round-trip minus render of the same case."""
    by = {}
    for r in results:
        if "us_per_step" in r:
            by[(r["prc"], r["size"], r["cameras"], r["path"])] = r["us_per_step"]
    for r in results:
        if "us_per_step" not in r or r["path"].startswith("render") or r["path"] == "round-trip":
            continue
        key = (r["prc"], r["size"], r["cameras"])
        md = by.get(key + ("metadrive",))
        r["vs_metadrive"] = md / r["us_per_step"] if md else None
        rt = by.get(key + ("round-trip",))
        if rt is not None:
            trip = rt - by[key + ("render",)]
            floor = by[key + ("render-atlas" if r["path"] == "gltensor-atlas" else "render",)] + trip
            r["round_trip_us"], r["render_plus_round_trip_us"] = trip, floor
            r["vs_render_plus_round_trip"] = r["us_per_step"] / floor
    return results


def headlines(results):
    """The headline lines: one camera vs MetaDrive's recipe; N agents vs MetaDrive and vs render + one
    round trip, per configuration and layout."""
    lines = []
    for r in results:
        if "us_per_step" not in r or not r["path"].startswith("gltensor"):
            continue
        what = "%s %d²x%d %s: %s us/step" % (r["prc"], r["size"], r["cameras"], r["path"], _fmt(r["us_per_step"]))
        if r.get("vs_metadrive"):
            what += ", %.2fx faster than MetaDrive's recipe" % r["vs_metadrive"]
        if r.get("vs_render_plus_round_trip"):
            what += ", %.2f x (render %s + one round trip %s us)" % (
                r["vs_render_plus_round_trip"], _fmt(r["render_plus_round_trip_us"] - r["round_trip_us"]),
                _fmt(r["round_trip_us"]))
        lines.append(what)
    return lines


def _fmt(v):
    return "%.0f" % v


def parse_cases(s):
    return [tuple(int(v) for v in item.lower().split("x")) for item in s.split(",")]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m gltensor.bench panda3d", description=MODES["panda3d"][1])
    ap.add_argument("--cases", type=parse_cases, default=parse_cases("84x1,256x1,1024x1,128x16"),
                    help="SIZExCAMERAS, comma-separated (default 84x1,256x1,1024x1,128x16)")
    ap.add_argument("--prc", default="default,configure", help="Panda3D configurations: default,configure")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--backend", choices=("auto", "cuda", "cpu"), default="auto")
    ap.add_argument("--quick", action="store_true", help="smoke run: 84x1,64x4, 5 steps, 1 run")
    ap.add_argument("--json", help="output file (default ~/.cache/gltensor/bench/panda3d_<host>.json)")
    ap.add_argument("--one-config", help=argparse.SUPPRESS)  # child: run one configuration, JSON to this file
    args = ap.parse_args(argv)
    if args.quick:
        args.cases, args.steps, args.warmup, args.runs = [(84, 1), (64, 4)], 5, 2, 1

    if args.one_config:
        prc, out = args.one_config.split(":", 1)
        info, results = run_config(prc, args.cases, args.steps, args.warmup, args.runs, args.backend,
                                   log=lambda m: print(m, flush=True))
        Path(out).write_text(json.dumps({"machine": info, "results": results}))
        return 0

    results, machine, failed = [], None, None
    # Each child imports the gltensor this process runs, wherever that was imported from.
    import gltensor
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(gltensor.__file__).resolve().parent.parent)] +
                                        [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    for prc in args.prc.split(","):
        with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
            part = f.name
        cmd = [sys.executable, "-m", "gltensor.bench", "panda3d", "--one-config", "%s:%s" % (prc, part), "--steps", str(args.steps),
               "--warmup", str(args.warmup), "--runs", str(args.runs), "--backend", args.backend,
               "--cases", ",".join("%dx%d" % c for c in args.cases)]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        lines = [l for l in (proc.stdout + proc.stderr).splitlines() if l.startswith(("  ", "FAIL", "Traceback"))
                 or "Error" in l]
        print("\n".join(lines))
        if proc.returncode != 0:
            failed = "%s configuration failed (rc %d):\n%s" % (prc, proc.returncode,
                                                                (proc.stdout + proc.stderr)[-3000:])
            break
        part_report = json.loads(Path(part).read_text())
        os.unlink(part)
        results += part_report["results"]
        machine = machine or part_report["machine"]
    ratios(results)

    import socket
    json_path = results_path("panda3d", socket.gethostname(), args.json)
    report = {"benchmark": "panda3d", "date": datetime.datetime.now().isoformat(timespec="seconds"),
              "argv": sys.argv[1:], "machine": machine,
              "config": {"cases": args.cases, "steps": args.steps, "warmup": args.warmup, "runs": args.runs,
                         "backend": args.backend, "prc": args.prc},
              "results": results, "status": "ok" if failed is None else failed}
    save_json(json_path, report)
    if failed:
        print("FAIL: %s" % failed, file=sys.stderr)
        return 1
    rows = []
    for r in results:
        case = "%s %d² x%d%s" % (r["prc"], r["size"], r["cameras"], " (padded)" if r.get("padded") else "")
        if "skipped" in r:
            rows.append([case, r["path"], "skipped", "-", "-", "-", r["skipped"]])
            continue
        vs_md = "%.2fx" % r["vs_metadrive"] if r.get("vs_metadrive") else "-"
        vs_rt = "%.2f" % r["vs_render_plus_round_trip"] if r.get("vs_render_plus_round_trip") else "-"
        note = "round trip %s us" % fmt_us(r["round_trip_us"]) if r.get("round_trip_us") is not None else ""
        rows.append([case, "%s [%s]" % (r["path"], r["backend"]), fmt_us(r["us_per_step"]),
                     fmt_us(r["cpu_us_per_step"]), vs_md, vs_rt, note])
    print_table("Panda3D cameras, µs per step (renderFrame + frames into torch + x.float().mean()), median of %d "
                "runs of %d steps" % (args.runs, args.steps),
                ["case", "path", "us/step", "CPU us/step", "vs MetaDrive", "vs render+RT", "note"], rows, left=(0, 1))
    print("\nHeadlines (GL: %s):" % (machine or {}).get("gl_renderer"))
    for line in headlines(results):
        print("  " + line)
    print("\nJSON: %s" % json_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
