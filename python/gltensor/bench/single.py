"""`python -m gltensor.bench single`: one camera, RGBA8: what one training step pays to get a rendered frame
into torch.

One step = render + transfer + consumer op (`x.float().mean()`), as the method in benchmarks/README.md prescribes:
warm-up, >= 200 timed steps, one synchronisation at the end of the timed loop, median of 3 runs,
every path in the same process, each path's frame checked against glReadPixels before it is timed.

    python -m gltensor.bench single [--sizes 84,256,1024] [--steps 200] [--no-scene] [--json PATH]

Paths: (a) render only, (b) gltensor read() + torch.from_dlpack, (c) gltensor read(out=preallocated),
(d) CPU round trip glReadPixels -> numpy -> torch.from_numpy(...).cuda(), (d2) the same as usually written
(new array, np.flipud), (e) the cuda-python recipe (register once; per frame map, mapped array,
cudaMemcpy2DFromArrayAsync, unmap); (d), (d2) and (e) are paths.py's, with one camera.
Also: CPU time of one cap.read() call (no rendering), against a plain C loop when
benchmarks/c/build/raw_read_loop exists.
"""
import argparse
import datetime
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from . import MODES
from .measure import CheckFailed, Skip, median, time_calls, time_steps
from .options import add_run_args, check_failed, gl_torch_sync, open_run, parse_sizes, print_start
from .paths import BenchPath, cpu_round_trip, cpu_round_trip_as_usually_written, cuda_python_recipe
from .report import fmt_us, print_table, save_json
from .scenes import single_draw

# The plain C loop of the checkout this package runs from (an installed package has none: listed as skipped).
RAW_READ_LOOP = Path(__file__).resolve().parents[3] / "benchmarks" / "c" / "build" / "raw_read_loop"


def cuda_python_path(scene, torch, cuda_in_use):
    """(e) The per-frame recipe users write with cuda-python today (paths.cuda_python_recipe with one texture)."""
    key, name = "e", "cuda-python map/copy/unmap per frame"
    try:
        transfer, close = cuda_python_recipe([scene.texture], scene.width, scene.height, torch, cuda_in_use)
    except Skip as e:
        return BenchPath(key, name, skipped="skipped: %s" % e)
    return BenchPath(key, name, transfer=lambda: transfer()[0], flipped=False, note="GL's bottom-up rows (no flip)",
                     close=close)


def build_paths(scene, cap, torch, device, cuda_in_use):
    stream = torch.cuda.current_stream() if cap.backend == "cuda" else None
    paths = [BenchPath("a", "render only")]
    paths.append(BenchPath("b", "gltensor read() + torch.from_dlpack",
                           transfer=lambda: torch.from_dlpack(cap.read()), note="flip in the copy"))
    out = torch.empty(cap.shape, dtype=torch.uint8, device=device)
    # read(out=) returns the torch tensor itself, so no DLPack hand-off orders the consumer after the
    # copy: on CUDA the copy is issued on torch's current stream instead.
    paths.append(BenchPath("c", "gltensor read(out=preallocated)",
                           transfer=lambda: cap.read(out=out, stream=stream),
                           note="flip in the copy" + (", copy on torch's stream" if stream is not None else "")))
    to_cuda = torch.cuda.is_available()
    # paths.py's trips over the one camera, which give (1, H, W, 4): [0] is a view. (d) is the lean trip (one
    # numpy array per step, no flip), the strongest CPU baseline; (d2) the trip as simulator code writes it
    # (a fresh buffer from PyOpenGL, rows flipped upright with NumPy); both are reported.
    lean = cpu_round_trip([scene.fbo], scene.width, scene.height, torch, to_cuda)
    usual = cpu_round_trip_as_usually_written([scene.fbo], scene.width, scene.height, torch, to_cuda)
    paths.append(BenchPath("d", "CPU round trip: glReadPixels -> numpy -> torch" + (".cuda()" if to_cuda else ""),
                           transfer=lambda: lean()[0], flipped=False,
                           note="no flip" + ("" if to_cuda else "; '.cuda()' skipped: no CUDA device")))
    paths.append(BenchPath("d2", "CPU round trip as usually written: new array, np.flipud, torch" +
                           (".cuda()" if to_cuda else ""), transfer=lambda: usual()[0],
                           note="flipped with NumPy" + ("" if to_cuda else "; '.cuda()' skipped: no CUDA device")))
    paths.append(cuda_python_path(scene, torch, cuda_in_use))
    return paths


# ---------------------------------------------------------------- correctness, timing

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
    ap = argparse.ArgumentParser(prog="python -m gltensor.bench single", description=MODES["single"][1])
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
    from gltensor.scene import Scene
    report = {"benchmark": "single_camera", "date": datetime.datetime.now().isoformat(timespec="seconds"),
              "argv": sys.argv[1:], "machine": info,
              "config": {"sizes": args.sizes, "steps": args.steps, "warmup": warmup, "runs": args.runs,
                         "calls": args.calls, "scene": args.scene, "backend": args.backend,
                         "torch_threads": torch.get_num_threads()},
              "results": [], "read_call_cpu_us": [], "raw_read_loop": [], "status": "running"}
    print_start(ctx, torch, info)

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

            sync = gl_torch_sync(torch)

            draw = single_draw(scene, args.scene)
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
        return check_failed(report, json_path, e)
    finally:
        ctx.close()

    report["status"] = "ok"
    save_json(json_path, report)
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
