#!/usr/bin/env python3
"""Single camera, RGBA8: what one training step pays to get a rendered frame into torch.

One step = render + transfer + consumer op (`x.float().mean()`), as the method in benchmarks/README.md prescribes:
warm-up, >= 200 timed steps, one synchronisation at the end of the timed loop, median of 3 runs,
every path in the same process, each path's frame checked against glReadPixels before it is timed.

    python benchmarks/bench_single.py [--sizes 84,256,1024] [--steps 200] [--no-scene] [--json PATH]

Paths: (a) render only, (b) gltensor read() + torch.from_dlpack, (c) gltensor read(out=preallocated),
(d) CPU round trip glReadPixels -> numpy -> torch.from_numpy(...).cuda(), (e) the cuda-python recipe
(register once; per frame map, mapped array, cudaMemcpy2DFromArrayAsync, unmap).
Also: CPU time of one cap.read() call (no rendering), against a plain C loop when
benchmarks/c/build/raw_read_loop exists.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("PYOPENGL_PLATFORM", "egl")  # before anything imports OpenGL

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
RAW_READ_LOOP = HERE / "c" / "build" / "raw_read_loop"


def _shared():
    """gltensor._bench_paths: what `python -m gltensor.bench` (the suite) and the scripts here share. An
    installed gltensor older than this checkout lacks it: then the checkout's file is loaded directly."""
    try:
        from gltensor import _bench_paths
        return _bench_paths
    except ImportError:
        import importlib.util
        spec = importlib.util.spec_from_file_location(
            "gltensor_bench_paths", HERE.parent / "python" / "gltensor" / "_bench_paths.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module


shared = _shared()
# Re-exported: bench_batch.py and bench_convert.py import these from here.
(CheckFailed, Skip, cuda_python_recipe, fmt_us, machine_info, median, parse_sizes, print_table, time_calls,
 time_steps) = (
    shared.CheckFailed, shared.Skip, shared.cuda_python_recipe, shared.fmt_us, shared.machine_info, shared.median,
    shared.parse_sizes, shared.print_table, shared.time_calls, shared.time_steps)


# ---------------------------------------------------------------- the compared paths

class BenchPath:
    """One way of getting the frame into torch. transfer() returns the frame as a tensor."""

    def __init__(self, key, name, transfer=None, flipped=True, note="", skipped=None, close=None):
        self.key, self.name, self.transfer, self.flipped = key, name, transfer, flipped
        self.note, self.skipped, self.close = note, skipped, close


def cuda_python_path(scene, torch, cuda_in_use):
    """(e) The per-frame recipe users write with cuda-python today (gltensor._bench_paths.cuda_python_recipe
    with one texture)."""
    key, name = "e", "cuda-python map/copy/unmap per frame"
    try:
        transfer, close = cuda_python_recipe([scene.texture], scene.width, scene.height, torch, cuda_in_use)
    except Skip as e:
        return BenchPath(key, name, skipped="skipped: %s" % e)
    return BenchPath(key, name, lambda: transfer()[0], flipped=False, note="GL's bottom-up rows (no flip)",
                     close=close)


def add_run_args(ap, kind, warmup_what="steps"):
    """The options every benchmark script shares: --steps, --warmup, --runs, --backend, --torch-threads, --json.
    Script-specific options go before or after; open_run() reads these."""
    ap.add_argument("--steps", type=int, default=200, help="timed steps per run (the method: >= 200)")
    ap.add_argument("--warmup", type=int, default=10, help="warm-up %s before each run (at least 10)" % warmup_what)
    ap.add_argument("--runs", type=int, default=3, help="runs per path; the median is reported")
    ap.add_argument("--backend", choices=("auto", "cuda", "cpu"), default="auto")
    ap.add_argument("--torch-threads", type=int, default=0,
                    help="torch.set_num_threads(N) first; 0 leaves torch's default. On a CPU-only machine "
                         "with llvmpipe, 1 keeps torch's spinning OpenMP workers from starving the renderer")
    ap.add_argument("--json", help="output file (default benchmarks/results/%s_<host>.json)" % kind)


def open_run(kind, args):
    """The start every benchmark script shares: torch (with --torch-threads), a headless GL context, the
    machine description and where the JSON goes. Returns (torch, ctx, info, json_path), or None when torch
    is missing (the message is printed)."""
    if args.steps < 200:
        print("note: --steps %d is below the 200 the method asks for; fine for a smoke test" % args.steps)
    try:
        import torch
    except ImportError:
        print("error: this benchmark needs torch", file=sys.stderr)
        return None
    if args.torch_threads > 0:
        torch.set_num_threads(args.torch_threads)
    import gltensor

    ctx = gltensor.Context.headless()
    info = machine_info(ctx, torch)
    host = "".join(c if c.isalnum() or c in "-_." else "_" for c in info["host"])
    json_path = Path(args.json) if args.json else HERE / "results" / ("%s_%s.json" % (kind, host))
    return torch, ctx, info, json_path


def build_paths(scene, cap, torch, device, cuda_in_use):
    stream = torch.cuda.current_stream() if cap.backend == "cuda" else None
    paths = [BenchPath("a", "render only")]
    paths.append(BenchPath("b", "gltensor read() + torch.from_dlpack",
                       lambda: torch.from_dlpack(cap.read()), note="flip in the copy"))
    out = torch.empty(cap.shape, dtype=torch.uint8, device=device)
    # read(out=) returns the torch tensor itself, so no DLPack hand-off orders the consumer after the
    # copy: on CUDA the copy is issued on torch's current stream instead.
    paths.append(BenchPath("c", "gltensor read(out=preallocated)",
                       lambda: cap.read(out=out, stream=stream),
                       note="flip in the copy" + (", copy on torch's stream" if stream is not None else "")))
    to_cuda = torch.cuda.is_available()

    def round_trip():
        x = torch.from_numpy(scene.read_pixels(flip=False))
        return x.cuda() if to_cuda else x

    paths.append(BenchPath("d", "CPU round trip: glReadPixels -> numpy -> torch" + (".cuda()" if to_cuda else ""),
                       round_trip, flipped=False,
                       note="no flip" + ("" if to_cuda else "; '.cuda()' skipped: no CUDA device")))

    from OpenGL import GL

    def round_trip_as_usually_written():
        # The common pattern in simulator code: PyOpenGL returns a fresh buffer each call, rows are flipped
        # upright with NumPy, and the result is copied to the GPU. (d) is the same trip written lean
        # (a reused array, no flip), the strongest CPU baseline; both are reported.
        scene.bind()
        GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 1)
        w, h = scene.width, scene.height
        data = GL.glReadPixels(0, 0, w, h, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE)
        img = np.flipud(np.frombuffer(data, np.uint8).reshape(h, w, 4))
        x = torch.from_numpy(np.ascontiguousarray(img))
        return x.cuda() if to_cuda else x

    paths.append(BenchPath("d2", "CPU round trip as usually written: new array, np.flipud, torch" +
                           (".cuda()" if to_cuda else ""), round_trip_as_usually_written,
                           note="flipped with NumPy" + ("" if to_cuda else "; '.cuda()' skipped: no CUDA device")))
    paths.append(cuda_python_path(scene, torch, cuda_in_use))
    return paths


# ---------------------------------------------------------------- correctness, timing

def make_draw(scene, use_scene):
    from OpenGL import GL
    if use_scene:
        return lambda i: scene.render(i / 60.0)
    w, h = scene.width, scene.height

    def clear_draw(i):
        # A cheap frame of clears, plus a scissored clear so that the image is not symmetric (a
        # wrong flip or a stale frame shows in the correctness check).
        scene.bind()
        GL.glClearColor((i % 256) / 255.0, 0.25, 0.5, 1.0)
        GL.glClear(GL.GL_COLOR_BUFFER_BIT)
        GL.glEnable(GL.GL_SCISSOR_TEST)
        GL.glScissor(0, 0, max(w // 2, 1), max(h // 4, 1))
        GL.glClearColor(1.0 - (i % 256) / 255.0, 0.8, 0.1, 1.0)
        GL.glClear(GL.GL_COLOR_BUFFER_BIT)
        GL.glDisable(GL.GL_SCISSOR_TEST)
    return clear_draw


def check_path(path, scene, draw):
    """Two different frames, each equal to glReadPixels: catches wrong pixels, flips and stale frames."""
    for i in (3, 40):
        draw(i)
        got = path.transfer()
        got = got.cpu().numpy()
        ref = scene.read_pixels(flip=path.flipped)
        if got.shape != ref.shape or not np.array_equal(got, ref):
            n = int((got != ref).sum()) if got.shape == ref.shape else -1
            raise CheckFailed("path (%s) %s: frame %d differs from glReadPixels (%s vs %s, %d bytes differ)"
                              % (path.key, path.name, i, got.shape, ref.shape, n))


def time_path(path, draw, steps, warmup, sync):
    return time_steps(draw, path.transfer, steps, warmup, sync)


def run_raw_read_loop(w, h, calls):
    if not RAW_READ_LOOP.exists():
        return {"status": "skipped", "reason": "not built (make -C benchmarks/c)"}
    try:
        proc = subprocess.run([str(RAW_READ_LOOP), str(w), str(h), str(calls)],
                              capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.SubprocessError) as e:
        return {"status": "skipped", "reason": "could not run: %s" % e}
    try:  # one JSON object on one line; anything else printed before it is ignored
        data = json.loads([l for l in proc.stdout.splitlines() if l.startswith("{")][-1])
    except (IndexError, ValueError):
        return {"status": "skipped", "reason": "exit %d, no JSON: %s" % (proc.returncode, proc.stderr.strip()[-300:])}
    if proc.returncode != 0:
        return {"status": "skipped", "reason": "exit %d: %s" % (proc.returncode, data.get("error", "?")), "raw": data}
    return {"status": "ok", "raw": data}


# ---------------------------------------------------------------- main

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=parse_sizes, default=parse_sizes("84,256,1024"),
                    help="comma-separated sizes, N or WxH (default 84,256,1024)")
    add_run_args(ap, "single")
    ap.add_argument("--calls", type=int, default=2000, help="read() calls for the per-call CPU time")
    ap.add_argument("--scene", action=argparse.BooleanOptionalAction, default=True,
                    help="render the lit Scene (default) or, with --no-scene, a cheap scissored clear")
    args = ap.parse_args(argv)
    warmup = max(args.warmup, 10)
    run = open_run("single", args)
    if run is None:
        return 1
    torch, ctx, info, json_path = run
    import gltensor
    from OpenGL import GL
    from gltensor.scene import Scene
    report = {"benchmark": "single_camera", "date": datetime.datetime.now().isoformat(timespec="seconds"),
              "argv": sys.argv[1:], "machine": info,
              "config": {"sizes": args.sizes, "steps": args.steps, "warmup": warmup, "runs": args.runs,
                         "calls": args.calls, "scene": args.scene, "backend": args.backend,
                         "torch_threads": torch.get_num_threads()},
              "results": [], "read_call_cpu_us": [], "raw_read_loop": [], "status": "running"}
    print("GL: %s | %s | torch %s | GPU: %s" % (ctx.renderer, ctx.version, torch.__version__,
                                                info["gpu_name"] or "none"))

    def save():
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(report, indent=1))

    main_rows, call_rows = [], []
    try:
        for (w, h) in args.sizes:
            scene = Scene(w, h)
            cap = gltensor.Capture(scene.texture, gltensor.GL_TEXTURE_2D, backend=args.backend)
            cuda_in_use = cap.backend == "cuda"
            device = "cuda:%d" % cap.cuda_device if cuda_in_use else "cpu"
            if w == args.sizes[0][0] and h == args.sizes[0][1]:
                print("backend: %s (%s)" % (cap.backend, cap.backend_reason))
                if not cuda_in_use and ctx.is_software and torch.get_num_threads() > 1:
                    print("note: llvmpipe and torch's OpenMP workers share the CPU cores; --torch-threads 1 "
                          "keeps the workers' spinning from slowing the renderer")
            report["machine"].setdefault("backend", cap.backend)
            report["machine"].setdefault("backend_reason", cap.backend_reason)

            def sync():
                GL.glFinish()
                if torch.cuda.is_available():
                    torch.cuda.synchronize()

            draw = make_draw(scene, args.scene)
            paths = build_paths(scene, cap, torch, device, cuda_in_use)
            try:
                for p in paths:  # correctness first, for every path, before any timing
                    if p.transfer is not None and not p.skipped:
                        check_path(p, scene, draw)
                times = {p.key: [] for p in paths if not p.skipped}
                for _ in range(args.runs):  # runs interleaved across paths, so drift hits all alike
                    for p in paths:
                        if not p.skipped:
                            times[p.key].append(time_path(p, draw, args.steps, warmup, sync))

                # Per-call CPU time of read() itself: no rendering, one sync at the end.
                out = torch.empty(cap.shape, dtype=torch.uint8, device=device)
                stream = torch.cuda.current_stream() if cuda_in_use else None
                variants = [("read(flip=False)", lambda: cap.read(flip=False)),
                            ("read(flip=True)", lambda: cap.read(flip=True)),
                            ("read(out=, flip=False)", lambda: cap.read(flip=False, out=out, stream=stream)),
                            ("read(out=, flip=True)", lambda: cap.read(flip=True, out=out, stream=stream))]
                call_times = {}
                for name, fn in variants:
                    for _ in range(3):
                        fn()  # warm the frame pool
                    runs = [time_calls(fn, args.calls, sync) for _ in range(3)]
                    call_times[name] = median(runs)
                    report["read_call_cpu_us"].append({"size": [w, h], "call": name, "calls": args.calls,
                                                       "runs_us": runs, "median_us": median(runs)})
            finally:
                for p in paths:
                    if p.close:
                        p.close()
                cap.close()
                scene.close()

            raw = run_raw_read_loop(w, h, args.calls)
            report["raw_read_loop"].append(dict(size=[w, h], **raw))

            base = median(times["d"]) if "d" in times else None
            base_usual = median(times["d2"]) if "d2" in times else None
            for p in paths:
                entry = {"size": [w, h], "path": p.key, "name": p.name, "note": p.note}
                if p.skipped:
                    entry.update(status="skipped", reason=p.skipped)
                    main_rows.append(["%dx%d" % (w, h), "(%s) %s" % (p.key, p.name), "-", "-", "-", "-", p.skipped])
                else:
                    us = median(times[p.key])
                    speedup = base / us if base else None
                    speedup_usual = base_usual / us if base_usual else None
                    entry.update(status="ok", check="equal to glReadPixels" if p.transfer else "n/a",
                                 runs_us_per_step=times[p.key], us_per_step=us, frames_per_s=1e6 / us,
                                 speedup_vs_cpu_round_trip=speedup,
                                 speedup_vs_cpu_round_trip_as_usually_written=speedup_usual)
                    main_rows.append(["%dx%d" % (w, h), "(%s) %s" % (p.key, p.name), fmt_us(us),
                                      "%.0f" % (1e6 / us), "%.2fx" % speedup if speedup else "-",
                                      "%.2fx" % speedup_usual if speedup_usual else "-", p.note])
                report["results"].append(entry)
            c = raw.get("raw", {}) if raw["status"] == "ok" else {}
            row = ["%dx%d" % (w, h)] + [fmt_us(call_times[n]) for n, _ in variants]
            row += [fmt_us(c.get("raw_cuda_us")), fmt_us(c.get("read_into_flip0_us")),
                    fmt_us(c.get("read_into_flip1_us"))]
            reason = raw.get("reason", "")  # in full in the JSON; the table gets its start
            reason = reason[:70] + "..." if len(reason) > 73 else reason
            row.append("" if raw["status"] == "ok" else "C skipped: " + reason)
            call_rows.append(row)
    except CheckFailed as e:
        print("FAIL: %s" % e, file=sys.stderr)
        report["status"] = "check failed: %s" % e
        save()
        return 1
    finally:
        ctx.close()

    report["status"] = "ok"
    save()
    mode = "Scene" if args.scene else "scissored clear"
    print_table("Single camera, RGBA8, one step = render (%s) + transfer + x.float().mean(); median of %d runs "
                "of %d steps" % (mode, args.runs, args.steps),
                ["size", "path", "us/step", "frames/s", "vs (d) lean CPU trip", "vs (d2) usual CPU trip", "note"],
                main_rows, left=(0, 1))
    print_table("CPU time of one call, us (no rendering, %d calls, median of 3)" % args.calls,
                ["size", "py read(flip=F)", "py read(flip=T)", "py read(out,F)", "py read(out,T)",
                 "C raw CUDA calls", "C read_into F", "C read_into T", "note"], call_rows)
    print("\nJSON: %s" % json_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
