"""Machinery of benchmarks/bench_panda3d.py: Panda3D sensors, the compared paths, their checks and timings.

Not public API. One process runs one Panda3D configuration (Panda reads its PRC when ShowBase opens its
window): `run_config(prc, cases, ...)` returns the rows of that configuration; the script runs one
subprocess per configuration and prints the table.

Besides wall-clock µs per step, each path reports the process's CPU time per step (all threads: Python, Panda,
the GL and CUDA drivers), which tells a CPU-bound step (Panda's per-buffer work, Python per camera) from a
GPU-bound one.

Paths of a case (SIZE² x N cameras), each checked against Panda's own readback before it is timed:
  render          renderFrame() alone, cameras in their own buffers (the floor)
  render-atlas    renderFrame() alone, the N cameras as display regions of one buffer (N > 1)
  ram             extractTextureData -> getRamImage() (BGRA, bottom-up, padded) -> numpy crop, flip, BGR->RGB ->
                  torch -> .cuda() (when CUDA is usable)
  metadrive       MetaDrive's image_on_cuda recipe per camera: cuda.bindings cudaGraphicsMapResources,
                  cudaGraphicsSubResourceGetMappedArray, cudaMemcpy2DFromArray of the whole (padded) texture into
                  a cudaMalloc'd buffer, unmap; CuPy [..., :3][..., ::-1][::-1] (flip, RGB->BGR) and astype(uint8,
                  order="C"); here also [:h, :w] so that it is right when Panda padded; N cameras -> cupy.stack
  gltensor        RGBCamera.perceive(to_float=False) (N = 1), CameraBatch.perceive() (N > 1)
  gltensor-atlas  CameraAtlas.perceive() (N > 1): one buffer, one display region per camera, one Atlas read
  round-trip      (N > 1) render + a gltensor read of one tiny (4x4) texture that is not re-rendered + the
                  consumer op on it: minus `render` (timed just before it), it is one GL<->CUDA round trip as
                  this run pays it
"""
import sys
import time

import numpy as np

from ._bench_paths import CheckFailed, Skip, machine_info, median, time_steps

PRCS = ("default", "configure")


def open_showbase(prc):
    from gltensor import panda3d as gp
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


def ram_rgb(base, tex, to_cuda, torch):
    """The usual CPU path, and the reference: RGB uint8, top row first, padding cropped."""
    from gltensor.panda3d import image_size
    base.graphicsEngine.extractTextureData(tex, base.win.getGsg())
    w, h = image_size(tex)
    a = np.frombuffer(tex.getRamImage(), np.uint8).reshape(tex.getYSize(), tex.getXSize(), -1)
    x = torch.from_numpy(np.ascontiguousarray(a[:h, :w][::-1, :, [2, 1, 0]]))
    return x.cuda() if to_cuda else x


def metadrive_recipe(textures, gsg, torch):
    """MetaDrive's BaseCamera image_on_cuda code path, per camera. Returns (transfer, close); raises Skip."""
    try:
        import cupy as cp
        from cuda.bindings import runtime as cudart
    except ImportError as e:
        raise Skip("needs cuda-python (cuda.bindings) and CuPy: %s" % e)
    from gltensor import panda3d as gp

    def check(result, call):
        err = result[0] if isinstance(result, tuple) else result
        if err != cudart.cudaError_t.cudaSuccess:
            raise Skip("%s failed: %s" % (call, err))
        if not isinstance(result, tuple) or len(result) == 1:
            return None
        return result[1] if len(result) == 2 else result[1:]

    flags = cudart.cudaGraphicsRegisterFlags.cudaGraphicsRegisterFlagsReadOnly
    cams = []
    for tex in textures:
        res = check(cudart.cudaGraphicsGLRegisterImage(gp.native_id(tex, gsg), 0x0DE1, flags),
                    "cudaGraphicsGLRegisterImage")
        X, Y = tex.getXSize(), tex.getYSize()
        ptr = check(cudart.cudaMalloc(X * Y * 4), "cudaMalloc")
        arr = cp.ndarray((Y, X, 4), cp.uint8, cp.cuda.MemoryPointer(cp.cuda.UnownedMemory(ptr, X * Y * 4, None), 0))
        cams.append((res, ptr, arr, gp.image_size(tex)))
    d2d = cudart.cudaMemcpyKind.cudaMemcpyDeviceToDevice

    def one(res, ptr, arr, size):
        check(cudart.cudaGraphicsMapResources(1, res, 0), "cudaGraphicsMapResources")
        array = check(cudart.cudaGraphicsSubResourceGetMappedArray(res, 0, 0), "cudaGraphicsSubResourceGetMappedArray")
        _, extent, _ = check(cudart.cudaArrayGetInfo(array), "cudaArrayGetInfo")
        check(cudart.cudaMemcpy2DFromArray(ptr, extent.width * 4, array, 0, 0, extent.width * 4, extent.height, d2d),
              "cudaMemcpy2DFromArray")
        check(cudart.cudaGraphicsUnmapResources(1, res, 0), "cudaGraphicsUnmapResources")
        w, h = size
        return arr[:h, :w][..., :3][..., ::-1][::-1].astype(cp.uint8, copy=False, order="C")

    def transfer():
        imgs = [one(*c) for c in cams]
        return torch.from_dlpack(imgs[0] if len(imgs) == 1 else cp.stack(imgs))

    def close():
        cp.cuda.Device().synchronize()
        for res, ptr, _, _ in cams:
            cudart.cudaGraphicsUnregisterResource(res)
            cudart.cudaFree(ptr)

    return transfer, close


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
            paths.append(("gltensor", "buffers", lambda: case.cams[0].perceive(to_float=False), ref_buffers))
        else:
            paths.append(("gltensor", "buffers", lambda: case.batch.perceive(to_float=False), ref_buffers))
            paths.append(("gltensor-atlas", "atlas", lambda: case.atlas.perceive(to_float=False), ref_atlas))

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
    """The lines the issue asks for: one camera vs MetaDrive's recipe; N agents vs MetaDrive and vs render + one
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


if __name__ == "__main__":  # pragma: no cover
    sys.exit("run benchmarks/bench_panda3d.py")
