"""`python -m gltensor.bench batch`: many cameras, RGBA8: what one training step pays to get N rendered frames
into one torch batch.

One step = render all N cameras + transfer into an (N, H, W, 4) batch + consumer op (`x.float().mean()`
on the batch), as the method in benchmarks/README.md prescribes: warm-up, >= 200 timed steps, one synchronisation at the
end of the timed loop, median of 3 runs, every path in the same process, each path's batch checked
against per-camera glReadPixels before it is timed.

    python -m gltensor.bench batch [--configs 16x256,64x128,256x84] [--steps 200] [--scene] [--json PATH]

Paths: (a) render only (one texture per camera), (a2) render only (atlas tiles), (b) per-camera
cuda-python recipe (register once; per camera map, mapped array, cudaMemcpy2DFromArrayAsync into a
slice of the batch, unmap), (c) per-camera loop of gltensor Capture.read(out=batch[k]), (d) gltensor
Batch.read() (one map for all; (d2) the same with out=), (e) gltensor Atlas.read() (cameras drawn
into tiles of one texture), (f) CPU round trip (glReadPixels per camera into one numpy batch ->
torch.from_numpy(...).cuda()).
"""
import argparse
import datetime
import sys

import numpy as np

from . import MODES
from .measure import CheckFailed, Skip, median, time_steps
from .options import add_run_args, check_failed, gl_torch_sync, open_run, parse_configs, print_start
from .paths import BenchPath, cpu_round_trip, cuda_python_recipe, torch_stream_arg
from .report import fmt_us, print_table, save_json
from .scenes import Cameras


def cuda_python_path(cams, torch, cuda_in_use):
    """(b) The per-camera recipe users write with cuda-python today (the Panda3D forum recipe):
    paths.cuda_python_recipe over the N textures."""
    key, name = "b", "per-camera cuda-python map/copy/unmap"
    try:
        transfer, close = cuda_python_recipe([t.texture for t in cams.targets], cams.w, cams.h, torch,
                                                    cuda_in_use)
    except Skip as e:
        return BenchPath(key, name, None, skipped="skipped: %s" % e)
    return BenchPath(key, name, cams.draw_targets, transfer, flipped=False, close=close,
                     note="GL's bottom-up rows (no flip); %d maps per step" % cams.n)


def build_paths(cams, caps, batch, atlas, torch, device, cuda_in_use):
    n, w, h = cams.n, cams.w, cams.h
    paths = [BenchPath("a", "render only (a texture per camera)", cams.draw_targets),
             BenchPath("a2", "render only (atlas tiles)", cams.draw_atlas)]
    paths.append(cuda_python_path(cams, torch, cuda_in_use))

    out = torch.empty((n, h, w, 4), dtype=torch.uint8, device=device)
    slots = [out[k] for k in range(n)]  # views made once: the loop pays for the reads, not for slicing
    stream = torch_stream_arg(torch) if cuda_in_use else None
    pairs = list(zip(caps, slots))

    def per_capture():
        for cap, slot in pairs:
            cap.read(out=slot, stream=stream)
        return out

    # What a step hands over: CUDA maps (one GL->CUDA switch each), or on the CPU backend readbacks.
    many = ("%d maps per step" % n) if cuda_in_use else ("CPU backend: %d texture readbacks" % n)
    one = "one map per step" if cuda_in_use else "CPU backend: %d texture readbacks" % n
    paths.append(BenchPath("c", "per-camera gltensor Capture.read(out=batch[k])", cams.draw_targets, per_capture,
                           note="flip in the copy; %s%s" % (many, ", copies on torch's stream" if cuda_in_use else "")))
    paths.append(BenchPath("d", "gltensor Batch.read() + torch.from_dlpack", cams.draw_targets,
                           lambda: torch.from_dlpack(batch.read()), note="flip in the copy; " + one))
    out_d2 = torch.empty((n, h, w, 4), dtype=torch.uint8, device=device)
    paths.append(BenchPath("d2", "gltensor Batch.read(out=batch)", cams.draw_targets,
                           lambda: batch.read(out=out_d2, stream=stream),
                           note="flip in the copy; %s%s" % (one, ", copy on torch's stream" if cuda_in_use else "")))
    paths.append(BenchPath("e", "gltensor Atlas.read() + torch.from_dlpack", cams.draw_atlas,
                           lambda: torch.from_dlpack(atlas.read()), atlas=True,
                           note="%d x %d tiles of a %dx%d texture; %s"
                                % (cams.rows, cams.cols, cams.cols * w, cams.rows * h,
                                   "one map per step" if cuda_in_use else "CPU backend: one readback")))

    to_cuda = torch.cuda.is_available()
    round_trip = cpu_round_trip([t.fbo for t in cams.targets], w, h, torch, to_cuda)

    paths.append(BenchPath("f", "CPU round trip: glReadPixels per camera -> numpy -> torch"
                           + (".cuda()" if to_cuda else ""), cams.draw_targets, round_trip, flipped=False,
                           note="no flip; one upload per step" if to_cuda
                           else "no flip; '.cuda()' skipped: no CUDA device"))
    return paths


# ---------------------------------------------------------------- correctness, timing

def check_path(path, cams):
    """Two different frames, each camera equal to its glReadPixels: catches wrong pixels, flips, swapped
    cameras and stale frames."""
    for i in (3, 40):
        path.draw(i)
        got = path.transfer().cpu().numpy()
        ref = cams.reference(path.atlas, path.flipped)
        if got.shape != ref.shape or got.dtype != ref.dtype:
            raise CheckFailed("path (%s) %s: frame %d is %s %s, expected %s uint8"
                              % (path.key, path.name, i, got.shape, got.dtype, ref.shape))
        bad = [k for k in range(cams.n) if not np.array_equal(got[k], ref[k])]
        if bad:
            raise CheckFailed("path (%s) %s: frame %d, camera(s) %s differ from glReadPixels (%d bytes differ)"
                              % (path.key, path.name, i, bad[:8], int((got != ref).sum())))


def time_path(path, steps, warmup, sync):
    return time_steps(path.draw, path.transfer, steps, warmup, sync)


# ---------------------------------------------------------------- main

def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m gltensor.bench batch", description=MODES["batch"][1])
    ap.add_argument("--configs", type=parse_configs, default=parse_configs("16x256,64x128,256x84"),
                    help="comma-separated CAMERASxSIZE or CAMERASxWxH (default 16x256,64x128,256x84)")
    add_run_args(ap, "batch")
    ap.add_argument("--scene", action=argparse.BooleanOptionalAction, default=False,
                    help="render the lit Scene from each camera instead of cheap clears (default off)")
    args = ap.parse_args(argv)
    warmup = max(args.warmup, 10)
    if args.steps < 1 or args.runs < 1:
        ap.error("--steps and --runs must be positive")
    run = open_run("batch", args)
    if run is None:
        return 1
    torch, ctx, info, json_path = run
    import gltensor

    report = {"benchmark": "batch", "date": datetime.datetime.now().isoformat(timespec="seconds"),
              "argv": sys.argv[1:], "machine": info,
              "config": {"configs": args.configs, "steps": args.steps, "warmup": warmup, "runs": args.runs,
                         "scene": args.scene, "backend": args.backend, "torch_threads": torch.get_num_threads()},
              "results": [], "status": "running"}
    print_start(ctx, torch, info)

    sync = gl_torch_sync(torch)

    rows = []
    try:
        for ci, (n, w, h) in enumerate(args.configs):
            label = "%d x %dx%d" % (n, w, h)
            cams = Cameras(n, w, h, args.scene)
            caps, batch, atlas, paths = [], None, None, []
            try:
                caps = [gltensor.Capture(t.texture, gltensor.GL_TEXTURE_2D, backend=args.backend)
                        for t in cams.targets]
                batch = gltensor.Batch(caps)  # the same captures as path (c): one registration per texture
                atlas = gltensor.Atlas(cams.atlas_target.texture, gltensor.GL_TEXTURE_2D,
                                       tiles=(cams.rows, cams.cols), count=n, backend=args.backend)
                cuda_in_use = caps[0].backend == "cuda"
                device = "cuda:%d" % caps[0].cuda_device if cuda_in_use else "cpu"
                if ci == 0:
                    print("backend: %s (%s)" % (caps[0].backend, caps[0].backend_reason))
                    if not cuda_in_use and ctx.is_software and torch.get_num_threads() > 1:
                        print("note: llvmpipe and torch's OpenMP workers share the CPU cores; --torch-threads 1 "
                              "keeps the workers' spinning from slowing the renderer")
                report["machine"].setdefault("backend", caps[0].backend)
                report["machine"].setdefault("backend_reason", caps[0].backend_reason)
                if batch.shape != (n, h, w, 4) or atlas.shape != (n, h, w, 4):
                    raise CheckFailed("%s: Batch.shape %s / Atlas.shape %s, expected %s"
                                      % (label, batch.shape, atlas.shape, (n, h, w, 4)))
                viewports = [tuple(v) for v in atlas.viewports()]
                if viewports != cams.tiles:
                    k = next(k for k in range(n) if viewports[k] != cams.tiles[k])
                    raise CheckFailed("%s: atlas.viewport(%d) is %s, docs/python-api.md's layout (tile 0 top-left) "
                                      "gives %s" % (label, k, viewports[k], cams.tiles[k]))

                paths = build_paths(cams, caps, batch, atlas, torch, device, cuda_in_use)
                for p in paths:  # correctness first, for every path, before any timing
                    if p.transfer is not None and not p.skipped:
                        check_path(p, cams)
                times = {p.key: [] for p in paths if not p.skipped}
                for _ in range(args.runs):  # runs interleaved across paths, so drift hits all alike
                    for p in paths:
                        if not p.skipped:
                            times[p.key].append(time_path(p, args.steps, warmup, sync))
            finally:
                for p in paths:
                    if p.close:
                        p.close()
                for obj in [atlas, batch] + caps:
                    if obj is not None:
                        obj.close()
                cams.close()

            base_b = median(times["b"]) if "b" in times else None
            base_f = median(times["f"]) if "f" in times else None
            for p in paths:
                entry = {"cameras": n, "size": [w, h], "path": p.key, "name": p.name, "note": p.note}
                if p.skipped:
                    entry.update(status="skipped", reason=p.skipped)
                    rows.append([label, "(%s) %s" % (p.key, p.name), "-", "-", "-", "-", "-", p.skipped])
                else:
                    us = median(times[p.key])
                    vs_b = base_b / us if base_b else None
                    vs_f = base_f / us if base_f else None
                    entry.update(status="ok", check="equal to per-camera glReadPixels" if p.transfer else "n/a",
                                 runs_us_per_step=times[p.key], us_per_step=us, us_per_image=us / n,
                                 frames_per_s=n * 1e6 / us, speedup_vs_per_camera_cuda_python=vs_b,
                                 speedup_vs_cpu_round_trip=vs_f)
                    rows.append([label, "(%s) %s" % (p.key, p.name), fmt_us(us), fmt_us(us / n),
                                 "{:,.0f}".format(n * 1e6 / us), "%.2fx" % vs_b if vs_b else "-",
                                 "%.2fx" % vs_f if vs_f else "-", p.note])
                report["results"].append(entry)
    except CheckFailed as e:
        return check_failed(report, json_path, e)
    finally:
        ctx.close()

    report["status"] = "ok"
    save_json(json_path, report)
    mode = "Scene" if args.scene else "clear + scissored clear"
    print_table("N cameras, RGBA8, one step = render N (%s) + transfer + x.float().mean() on the (N, H, W, 4) "
                "batch; median of %d runs of %d steps" % (mode, args.runs, args.steps),
                ["cameras x size", "path", "us/step", "us/image", "frames/s", "vs cuda-python loop",
                 "vs CPU round trip", "note"], rows, left=(0, 1))
    print("\nJSON: %s" % json_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
