"""The benchmark suite: every way of getting rendered OpenGL frames into torch, over sizes and camera counts.

Mode grid, the default of `python -m gltensor.bench` (gltensor/bench/__init__.py lists the other modes):

    python -m gltensor.bench                 # the full grid (meant for < 10 minutes on the GPU machine)
    python -m gltensor.bench --quick         # a subset holding the three headline rows (meant for < 1 minute)
    python -m gltensor.bench --sizes 128,1920x1080 --cameras 1,16 --paths cpu,single,batch

One process run, every path over the grid of image sizes x camera counts (cells), one step = render the N
cameras + hand the frames to torch + a consumer op on the frames' device (`x.float().mean()`), as
the method in benchmarks/README.md prescribes. Before a path is timed in a cell, its output of two different steps must equal
the glReadPixels reference byte for byte (bit for bit for the fused conversion); a mismatch stops the run
with exit status 1. Paths whose library is missing are listed as skipped with the reason; cells that would
not fit in memory, or paths whose steps would take too long, likewise.

Output: a table per camera count on the terminal (us/step, us/image, frames/s, speed-up over the Python CPU
round trip and over the cuda-python recipe), the headline verdicts, a JSON file (machine description and
raw timings) and a PNG plot (us per image against image size, one panel per camera count, one line per path).
"""
import argparse
import datetime
import gc
import json
import sys
import time
from pathlib import Path

import numpy as np

from . import MODES
from .grid_report import Bar, from_json, headlines, plot, summarize
from .grid_spec import (DESCRIPTION, FULL_CAMERAS, FULL_SIZES, LABEL, MULTI_ONLY, PATH_KEYS, PATHS, QUICK_CELLS,
                        cell_label)
from .measure import CheckFailed, Skip, median, time_steps
from .options import arg, parse_cameras, parse_sizes, settle_timing_args
from .panda3d_paths import Panda3DCameras, panda3d_available
from .paths import (BenchPath, cpu_round_trip, cpu_round_trip_as_usually_written, cuda_python_recipe,
                    pinned_pbo_round_trip, torch_stream_arg)
from .report import fmt_us, machine_info, results_path
from .scenes import DRAWS, Cameras, atlas_grid

GIB = 1 << 30
# Device memory a cell may need, in multiples of its pixel bytes (N*W*H*4): the camera textures and the atlas,
# gltensor's frame pools, each path's output tensors, the float32 temporary of the consumer op.
GPU_BYTES_FACTOR = 20
HOST_BYTES_FACTOR = 6   # numpy batch, two pinned buffers, the pixel-pack buffer's shadow, Panda3D's RAM images


def _fmt_bytes(b):
    return "%.1f GB" % (b / 1e9) if b >= 1e8 else "%.1f MB" % (b / 1e6)


def _host_available_bytes():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return None


def _is_oom(e):
    import gltensor
    name = type(e).__name__
    return isinstance(e, (MemoryError, gltensor.OutOfMemoryError)) or name == "OutOfMemoryError" or \
        "out of memory" in str(e).lower()


# ---------------------------------------------------------------- arguments

def _parse_paths(text):
    keys = [k.strip() for k in str(text).split(",") if k.strip()]
    bad = [k for k in keys if k not in PATH_KEYS]
    if bad:
        raise ValueError("unknown path(s) %s; known: %s" % (", ".join(bad), ", ".join(PATH_KEYS)))
    return [k for k in PATH_KEYS if k in keys]  # table order


def build_parser():
    ap = argparse.ArgumentParser(prog="python -m gltensor.bench", description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="paths:\n" + "\n".join("  %-12s %s" % (k, d) for k, _, d in PATHS) +
                                 "\n\nmodes (python -m gltensor.bench MODE [options]; MODE --help for its options):\n" +
                                 "\n".join("  %-12s %s" % (k, d) for k, (_, d) in MODES.items()))
    ap.add_argument("--quick", action="store_true",
                    help="a small subset (%s) with shorter timing; still holds the headline rows"
                         % ", ".join(cell_label(*c) for c in QUICK_CELLS))
    ap.add_argument("--sizes", type=arg(parse_sizes), default=None,
                    help="image sizes, N or WxH, comma-separated (default %s)" % FULL_SIZES)
    ap.add_argument("--cameras", type=arg(parse_cameras), default=None,
                    help="camera counts, comma-separated (default %s); the grid is sizes x cameras" % FULL_CAMERAS)
    ap.add_argument("--paths", type=arg(_parse_paths), default=list(PATH_KEYS),
                    help="paths to run, comma-separated (default all): %s" % ",".join(PATH_KEYS))
    ap.add_argument("--json", help="JSON output (default ~/.cache/gltensor/bench/suite_<host>.json)")
    ap.add_argument("--plot", help="PNG output (default: the JSON's path with .png)")
    ap.add_argument("--from-json", metavar="JSON", default=None,
                    help="run nothing: print the tables and verdicts of a saved report and draw its plot again "
                         "(to --plot, default the report's path with .png)")
    ap.add_argument("--seconds", type=float, default=None,
                    help="timed seconds per path per cell, over all runs (default 0.4; --quick 0.25)")
    ap.add_argument("--path-budget", type=float, default=None,
                    help="at most this many seconds per path per cell, warm-up included: slower paths get fewer "
                         "steps (marked 'capped') or are skipped (default 3; --quick 2.5)")
    ap.add_argument("--runs", type=int, default=3, help="runs per path per cell; the median is reported (default 3)")
    ap.add_argument("--min-steps", type=int, default=20, help="timed steps per run at least (default 20)")
    ap.add_argument("--warmup", type=int, default=10, help="warm-up steps before the first run (at least 10)")
    ap.add_argument("--max-cell-bytes", type=float, default=4.0,
                    help="skip cells whose pixels (N*W*H*4 bytes) exceed this many GiB (default 4)")
    ap.add_argument("--time-limit", type=float, default=None,
                    help="start no new cell after this many seconds; the rest are listed as skipped (0: none; "
                         "default 540 for the full grid, none with --quick or a custom grid)")
    ap.add_argument("--draw", choices=tuple(DRAWS), default="pattern",
                    help="what each camera renders per step (default pattern): " +
                         "; ".join("%s: %s" % (k, v) for k, v in DRAWS.items()))
    ap.add_argument("--backend", choices=("auto", "cuda", "cpu"), default="auto", help="gltensor backend")
    ap.add_argument("--strict", action="store_true", help="exit 3 when a headline verdict is FAIL")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    # For the tests: corrupts one byte of this path's output in the check, which must then fail the run.
    ap.add_argument("--inject-mismatch", metavar="PATH", default=None, help=argparse.SUPPRESS)
    return ap


# ---------------------------------------------------------------- the suite

class Suite:
    def __init__(self, args, torch, ctx):
        from OpenGL import GL
        import gltensor
        self.args, self.torch, self.ctx, self.GL, self.gltensor = args, torch, ctx, GL, gltensor
        self.cuda = False           # gltensor captures on CUDA (the GL context is on a CUDA device)
        self.to_cuda = torch.cuda.is_available()
        self.backend_reason = ""
        self.max_texture = int(GL.glGetIntegerv(GL.GL_MAX_TEXTURE_SIZE))
        self.step_counter = 1000    # frames differ between runs and paths
        self.errors = []

    def sync(self):
        self.GL.glFinish()
        if self.to_cuda:
            self.torch.cuda.synchronize()

    # ---------------------------------------------------------- what can run here

    def probe_backend(self):
        from gltensor.scene import RenderTarget
        t = RenderTarget(4, 4, depth=False)
        try:
            cap = self.gltensor.Capture(t.texture, self.gltensor.GL_TEXTURE_2D, backend=self.args.backend)
            self.cuda, self.backend_reason = cap.backend == "cuda", cap.backend_reason
            cap.close()
        finally:
            t.close()

    def global_skips(self):
        """{path: reason} for paths that cannot run at all here (a library or the GPU is missing)."""
        skips = {}
        if "cuda_python" in self.args.paths:
            if not self.cuda:
                why = self.gltensor.cuda_unavailable_reason() if not self.gltensor.cuda_available() else \
                    self.backend_reason
                skips["cuda_python"] = "needs CUDA-GL interop, not possible here: %s" % why
            else:
                try:
                    import cuda.bindings.runtime  # noqa: F401  (the recipe's import)
                except ImportError as e:
                    skips["cuda_python"] = "cuda-python not installed (pip install cuda-python): %s" % e
        if "panda3d" in self.args.paths:
            reason = panda3d_available()
            if reason:
                skips["panda3d"] = reason
        return skips

    def cell_skip(self, n, w, h):
        """The reason a cell cannot run (memory, texture size), or None."""
        b = n * w * h * 4
        limit = self.args.max_cell_bytes * GIB
        if b > limit:
            return "memory: %s of pixels per step (N*W*H*4) > --max-cell-bytes %g GiB" % (_fmt_bytes(b),
                                                                                       self.args.max_cell_bytes)
        if max(w, h) > self.max_texture:
            return "size: %dx%d exceeds GL_MAX_TEXTURE_SIZE %d" % (w, h, self.max_texture)
        if self.to_cuda:
            free, _ = self.torch.cuda.mem_get_info()
            if GPU_BYTES_FACTOR * b > free:
                return "memory: needs ~%s of GPU memory (%dx its %s of pixels), %s free" % (
                    _fmt_bytes(GPU_BYTES_FACTOR * b), GPU_BYTES_FACTOR, _fmt_bytes(b), _fmt_bytes(free))
        avail = _host_available_bytes()
        factor = HOST_BYTES_FACTOR if self.cuda else GPU_BYTES_FACTOR
        if avail is not None and factor * b > avail:
            return "memory: needs ~%s of host memory, %s available" % (_fmt_bytes(factor * b), _fmt_bytes(avail))
        return None

    def expected_paths(self, n, skips):
        """Paths a cell of n cameras runs unless something is skipped there (for the progress bar)."""
        return len([k for k in self.args.paths if k not in skips and not (n == 1 and k in MULTI_ONLY)])

    # ---------------------------------------------------------- paths of one cell

    def build_paths(self, n, w, h, res, skips):
        """BenchPaths of this cell in table order; res collects what must be closed."""
        torch, gltensor, args = self.torch, self.gltensor, self.args
        want = [k for k in args.paths if not (n == 1 and k in MULTI_ONLY)]
        atlas_w, atlas_h = _atlas_size(n, w, h)
        atlas_reason = None
        if "atlas" in want and max(atlas_w, atlas_h) > self.max_texture:
            atlas_reason = "size: the atlas texture would be %dx%d > GL_MAX_TEXTURE_SIZE %d" % (
                atlas_w, atlas_h, self.max_texture)
        cams = res["cams"] = Cameras(n, w, h, atlas=("atlas" in want and atlas_reason is None), draw=args.draw)
        caps = res["caps"] = [gltensor.Capture(t.texture, gltensor.GL_TEXTURE_2D, backend=args.backend)
                              for t in cams.targets]
        device = "cuda:%d" % caps[0].cuda_device if caps[0].backend == "cuda" else "cpu"
        stream = torch_stream_arg(torch) if caps[0].backend == "cuda" else None
        if n > 1 and {"batch", "fused"} & set(want):
            res["batch"] = gltensor.Batch(caps)  # the same captures as "single": one registration per texture
        draw = cams.draw_targets
        fbos = [t.fbo for t in cams.targets]
        paths = []

        def add(key, transfer=None, **kw):
            kw.setdefault("draw", draw)
            paths.append(BenchPath(key, LABEL[key], transfer=transfer, **kw))

        for key in want:
            if key in skips:
                paths.append(BenchPath(key, LABEL[key], skipped=skips[key]))
                continue
            try:
                if key == "render":
                    add("render")
                elif key == "cpu":
                    add("cpu", cpu_round_trip(fbos, w, h, torch, self.to_cuda), flipped=False,
                        note="no flip" + ("" if self.to_cuda else "; no CUDA: '.cuda()' left out"))
                elif key == "cpu_usual":
                    add("cpu_usual", cpu_round_trip_as_usually_written(fbos, w, h, torch, self.to_cuda),
                        note="flipped with NumPy" + ("" if self.to_cuda else "; no CUDA: '.cuda()' left out"))
                elif key == "cpu_pinned":
                    transfer, close = pinned_pbo_round_trip(fbos, w, h, torch, self.to_cuda)
                    add("cpu_pinned", transfer, flipped=False, close=close,
                        note="no flip" + ("" if self.to_cuda else "; no CUDA: plain host memory, no upload"))
                elif key == "cuda_python":
                    transfer, close = cuda_python_recipe([t.texture for t in cams.targets], w, h, torch, self.cuda)
                    add("cuda_python", transfer, flipped=False, close=close,
                        note="no flip; %d map(s) per step" % n)
                elif key == "panda3d":
                    p3 = res["panda3d"] = Panda3DCameras(n, w, h, torch, self.to_cuda, self.ctx.make_current)
                    path = BenchPath("panda3d", LABEL["panda3d"], draw=p3.draw, transfer=p3.transfer,
                                     flipped=False, note="no flip; Panda3D's own GL context")
                    path.reference = p3.reference
                    paths.append(path)
                elif key == "single":
                    if n == 1:
                        cap = caps[0]
                        add("single", lambda: torch.from_dlpack(cap.read()), squeeze=True,
                            note="flip in the copy")
                    else:
                        out = torch.empty((n, h, w, 4), dtype=torch.uint8, device=device)
                        pairs = list(zip(caps, [out[k] for k in range(n)]))

                        def per_capture(pairs=pairs, out=out):
                            for cap, slot in pairs:
                                cap.read(out=slot, stream=stream)
                            return out
                        add("single", per_capture, note="flip in the copy; %d reads per step" % n)
                elif key == "batch":
                    batch = res["batch"]
                    add("batch", lambda: torch.from_dlpack(batch.read()), note="flip in the copy; one map")
                elif key == "atlas":
                    if atlas_reason:
                        paths.append(BenchPath("atlas", LABEL["atlas"], skipped=atlas_reason))
                        continue
                    atlas = res["atlas"] = gltensor.Atlas(cams.atlas_target.texture, gltensor.GL_TEXTURE_2D,
                                                          tiles=(cams.rows, cams.cols), count=n,
                                                          backend=args.backend)
                    viewports = [tuple(v) for v in atlas.viewports()]
                    if viewports != cams.tiles:
                        k = next(k for k in range(n) if viewports[k] != cams.tiles[k])
                        raise CheckFailed("%s: atlas.viewport(%d) is %s, docs/python-api.md's layout (tile 0 "
                                          "top-left) gives %s" % (cell_label(n, w, h), k, viewports[k],
                                                                  cams.tiles[k]))
                    add("atlas", lambda: torch.from_dlpack(atlas.read()), draw=cams.draw_atlas, atlas=True,
                        note="%d x %d tiles of a %dx%d texture; one map" % (cams.rows, cams.cols, atlas_w, atlas_h))
                elif key == "fused":
                    src = caps[0] if n == 1 else res["batch"]
                    # NumPy's float32 v / 255 for every byte v: the expected value of each channel, by lookup.
                    lut = torch.from_numpy(np.arange(256, dtype=np.float32) / np.float32(255)).to(device)

                    def expect(ref_k, lut=lut):  # (H, W, 4) uint8 -> (3, H, W) float32
                        return lut[ref_k[..., :3].long()].permute(2, 0, 1)
                    add("fused", lambda: torch.from_dlpack(src.read(channels="rgb", dtype="float32", layout="chw")),
                        expect=expect, squeeze=(n == 1),
                        note="float32 %s RGB /255, flipped, one pass" % ("CHW" if n == 1 else "NCHW"))
            except Skip as e:
                paths.append(BenchPath(key, LABEL[key], skipped=str(e)))
            except CheckFailed:
                raise
            except Exception as e:
                if _is_oom(e):
                    paths.append(BenchPath(key, LABEL[key], skipped="memory: %s" % e))
                else:
                    raise
        return paths

    # ---------------------------------------------------------- check, time

    def check(self, path, cams, label):
        """Two different steps, each equal to the reference readback: wrong pixels, flips, swapped cameras and
        stale frames all fail. Compared camera by camera where the output lives (on the GPU for CUDA outputs), so
        that a check of gigabytes does not cost a host copy of them."""
        torch = self.torch
        for i in (3, 40):
            path.draw(i)
            got = path.transfer()
            if path.key == self.args.inject_mismatch:
                got = got.clone().contiguous()
                got.view(-1)[got.numel() // 2] += 1
            if path.squeeze:
                got = got.unsqueeze(0)
            ref = self._reference(path, cams, i, got.device)
            if got.shape[0] != ref.shape[0]:
                raise CheckFailed("%s, path %s: step %d gives %s, %d camera(s) expected"
                                  % (label, path.key, i, tuple(got.shape), ref.shape[0]))
            for k in range(ref.shape[0]):
                exp = path.expect(ref[k]) if path.expect else ref[k]
                g = got[k]
                if g.shape != exp.shape or g.dtype != exp.dtype:
                    raise CheckFailed("%s, path %s: step %d, camera %d gives %s %s, the reference is %s %s"
                                      % (label, path.key, i, k, tuple(g.shape), g.dtype, tuple(exp.shape), exp.dtype))
                if not torch.equal(g, exp):
                    g, e = g.cpu().numpy(), exp.cpu().numpy()
                    bad = np.argwhere(g != e)
                    raise CheckFailed("%s, path %s: step %d, camera %d differs from the reference readback: %d of %d "
                                      "values, first at index %s (got %s, expected %s)"
                                      % (label, path.key, i, k, len(bad), g.size, tuple(int(v) for v in bad[0]),
                                         g[tuple(bad[0])], e[tuple(bad[0])]))
        err = self.GL.glGetError()
        if err:
            raise RuntimeError("%s, path %s: GL error 0x%x after the check" % (label, path.key, err))

    def _reference(self, path, cams, i, device):
        """(N, H, W, 4) uint8 torch tensor on `device`: what step i must give, rows as the path promises."""
        torch = self.torch
        if getattr(path, "reference", None) is not None:  # a path with its own picture (Panda3D)
            return torch.from_numpy(path.reference(i)).to(device)
        # The draw is deterministic in i: step i is read back once per cell, layout and device (GL's rows; the
        # upright reference is its row-reversed copy).
        key = (path.atlas, i, str(device))
        ref = self.ref_cache.get(key)
        if ref is None:
            ref = self.ref_cache[key] = torch.from_numpy(cams.reference(path.atlas, flip=False)).to(device)
        if path.flipped:
            fkey = key + ("flipped",)
            if fkey not in self.ref_cache:
                self.ref_cache[fkey] = ref.flip(1)
            ref = self.ref_cache[fkey]
        return ref

    def timed(self, path, steps, warmup):
        """us per step: warm-up, then `steps` steps, one sync at the end (the method); each call draws new frames."""
        i0 = self.step_counter
        self.step_counter += warmup + steps
        return time_steps(path.draw, path.transfer, steps, warmup, self.sync, first=i0)

    def slowest_step_us(self):
        """The slowest step (µs) that plan() still accepts: 3 capped runs of 3 steps within --path-budget."""
        a = self.args
        return a.path_budget / (3 + (a.runs - 1) + 3 * a.runs) * 1e6

    def plan(self, est_us):
        """(warmup, rewarm, steps, capped) for a path whose step takes about est_us; None: over the budget."""
        a = self.args
        t = max(est_us, 1.0) / 1e6
        runs = a.runs
        warm, rewarm = max(a.warmup, 10), 3
        steps = int(min(max(a.seconds / runs / t, a.min_steps), 100000))
        if t * (warm + rewarm * (runs - 1) + runs * steps) <= a.path_budget:
            return warm, rewarm, steps, False
        warm, rewarm = 3, 1
        steps = int((a.path_budget / t - warm - rewarm * (runs - 1)) / runs)
        if steps < 3:
            return None
        return warm, rewarm, min(steps, a.min_steps), True

    # ---------------------------------------------------------- one cell

    def run_cell(self, n, w, h, skips, bar):
        label = cell_label(n, w, h)
        cell = {"cameras": n, "size": [w, h], "label": label, "pixel_bytes": n * w * h * 4, "results": []}
        res = {}
        paths = []
        self.ref_cache = {}
        phases = cell["phases_s"] = {}
        clock = [time.perf_counter()]

        def phase(name):  # where a cell's time goes: setup, check, probe, timed, close
            now = time.perf_counter()
            phases[name] = phases.get(name, 0.0) + now - clock[0]
            clock[0] = now
        try:
            paths = self.build_paths(n, w, h, res, skips)
            cams = res["cams"]
            active = [p for p in paths if not p.skipped]
            phase("setup")
            for p in active:  # correctness first, every path of the cell, before any timing
                if p.transfer is not None:
                    self.ctx.make_current()
                    self.check(p, cams, label)
            self.ref_cache = {}  # the references' memory is not held while timing
            phase("check")
            plans = {}
            for p in active:  # one probe step (after the check's two) sizes the runs
                self.ctx.make_current()
                try:
                    est = self.timed(p, 1, 0)
                except Exception as e:
                    if not _is_oom(e):
                        raise
                    p.skipped = "memory: %s" % e
                    continue
                pl = self.plan(est)
                for _ in range(2):  # a first step can carry one-time costs (allocations, lazy init): look again,
                    if pl is not None or est > 3 * self.slowest_step_us():  # unless far too slow for that
                        break
                    est = min(est, self.timed(p, 1, 0))
                    pl = self.plan(est)
                if pl is None:
                    p.skipped = "time: one step takes ~%s us; --path-budget %g s allows no 3 runs of 3 steps" % (
                        fmt_us(est), self.args.path_budget)
                else:
                    plans[p.key] = pl + (est,)
            active = [p for p in active if not p.skipped]
            phase("probe")
            bar.add((len(active) - self.expected_paths(n, skips)) * self.args.runs)
            times = {p.key: [] for p in active}
            for r in range(self.args.runs):  # runs interleaved across paths, so that drift hits all alike
                for p in active:
                    warm, rewarm, steps, _, _ = plans[p.key]
                    self.ctx.make_current()
                    bar.describe("%s, %s, run %d" % (label, p.key, r + 1))
                    times[p.key].append(self.timed(p, steps, warm if r == 0 else rewarm))
                    bar.update()
            phase("timed")
        except (CheckFailed, KeyboardInterrupt):
            raise
        except Exception as e:
            if not _is_oom(e):
                raise
            cell["status"] = "skipped"
            cell["reason"] = "memory: %s: %s" % (type(e).__name__, e)
            return cell
        finally:
            self.ref_cache = {}
            self._close(paths, res)
            phase("close")

        cell["status"] = "ok"
        base_cpu = median(times["cpu"]) if "cpu" in times else None
        base_cp = median(times["cuda_python"]) if "cuda_python" in times else None
        base_usual = median(times["cpu_usual"]) if "cpu_usual" in times else None
        for p in paths:
            entry = {"path": p.key, "name": p.name, "cameras": n, "size": [w, h], "note": p.note}
            if p.skipped:
                entry.update(status="skipped", reason=p.skipped)
            else:
                us = median(times[p.key])
                warm, rewarm, steps, capped, est = plans[p.key]
                entry.update(status="ok", check="n/a (nothing handed over)" if p.transfer is None else
                             ("equal to the computed picture" if p.key == "panda3d" else
                              "equal to glReadPixels" + (" / 255 (float32, RGB, CHW)" if p.key == "fused" else "")),
                             runs_us_per_step=times[p.key], us_per_step=us, us_per_image=us / n,
                             frames_per_s=n * 1e6 / us, steps_per_run=steps, runs=len(times[p.key]),
                             warmup_first=warm, warmup_later=rewarm, capped=capped, probe_us_per_step=est,
                             speedup_vs_cpu_round_trip=(base_cpu / us if base_cpu and p.key != "render" else None),
                             speedup_vs_cpu_usual=(base_usual / us if base_usual and p.key != "render" else None),
                             speedup_vs_cuda_python=(base_cp / us if base_cp and p.key != "render" else None))
            cell["results"].append(entry)
        return cell

    def _close(self, paths, res):
        self.ctx.make_current()
        for p in paths:
            if p.close:
                try:
                    p.close()
                except Exception as e:  # closing must not hide what happened before
                    print("warning: closing path %s: %s" % (p.key, e), file=sys.stderr)
        if "panda3d" in res:
            res["panda3d"].close()
        for key in ("atlas", "batch"):
            if key in res:
                res[key].close()
        for cap in res.get("caps", []):
            cap.close()
        if "cams" in res:
            res["cams"].close()
        gc.collect()
        if self.to_cuda:
            self.torch.cuda.synchronize()
            self.torch.cuda.empty_cache()


def _atlas_size(n, w, h):
    rows, cols = atlas_grid(n)
    return cols * w, rows * h


# ---------------------------------------------------------------- main

def main(argv=None):
    ap = build_parser()
    args = ap.parse_args(argv)
    settle_timing_args(ap, args)
    if args.from_json:
        return from_json(args.from_json, args.plot)
    if args.seconds is None:
        args.seconds = 0.25 if args.quick else 0.4
    if args.path_budget is None:
        args.path_budget = 2.5 if args.quick else 3.0
    if args.time_limit is None:
        args.time_limit = 540.0 if not args.quick and args.sizes is None and args.cameras is None else 0.0
    if args.sizes is None and args.cameras is None:
        cells = list(QUICK_CELLS) if args.quick else \
            [(n, w, h) for n in parse_cameras(FULL_CAMERAS) for (w, h) in parse_sizes(FULL_SIZES)]
    else:
        sizes = args.sizes or parse_sizes(FULL_SIZES)
        cameras = args.cameras or parse_cameras(FULL_CAMERAS)
        cells = [(n, w, h) for n in cameras for (w, h) in sizes]

    try:
        import torch
    except ImportError:
        print("error: the benchmark suite needs torch (pip install torch)", file=sys.stderr)
        return 2
    import gltensor

    started = time.perf_counter()
    ctx = gltensor.Context.headless()
    try:
        return _run(args, cells, torch, gltensor, ctx, started)
    finally:
        ctx.close()


def _run(args, cells, torch, gltensor, ctx, started):
    suite = Suite(args, torch, ctx)
    info = machine_info(ctx, torch)
    suite.probe_backend()
    info["backend"], info["backend_reason"] = ("cuda" if suite.cuda else "cpu"), suite.backend_reason
    info["gl_max_texture_size"] = suite.max_texture
    notes = []
    if not suite.cuda and ctx.is_software and torch.get_num_threads() > 1:
        torch.set_num_threads(1)  # llvmpipe rasterises on every core; torch's spinning OpenMP workers starve it
        notes.append("software GL and no CUDA: torch.set_num_threads(1), so that torch's OpenMP workers do not "
                     "starve llvmpipe")
    json_path = results_path("suite", info["host"], args.json)
    plot_path = Path(args.plot) if args.plot else json_path.with_suffix(".png")
    skips = suite.global_skips()
    method = ("one step = render N cameras (%s) + transfer + x.float().mean(); "
              "wall clock (time.perf_counter), one glFinish%s at the end of each timed loop; steps per run sized "
              "from a probe step so that a path takes ~%g s per cell (at least %d steps per run, %d warm-up steps "
              "before the first run, 3 before later ones), median of %d runs, runs interleaved across paths; paths "
              "slower than --path-budget %g s per cell get fewer steps ('capped', 3 warm-up) or are skipped"
              % (DRAWS[args.draw], " + torch.cuda.synchronize()" if suite.to_cuda else "", args.seconds, args.min_steps, args.warmup,
                 args.runs, args.path_budget))
    if not suite.cuda:
        notes.append("no CUDA (%s): gltensor runs on its CPU backend, CUDA-only paths are skipped, '.cuda()' is left "
                     "out, and all timings are CPU timers on host work: they say nothing about the GPU hand-off"
                     % suite.backend_reason)
    report = {"benchmark": "suite", "version": 1, "date": datetime.datetime.now().isoformat(timespec="seconds"),
              "argv": sys.argv[1:], "machine": info, "backend": "cuda" if suite.cuda else "cpu",
              "config": {"quick": args.quick, "cells": [[n, w, h] for n, w, h in cells], "paths": args.paths,
                         "seconds_per_path": args.seconds, "path_budget_s": args.path_budget, "runs": args.runs,
                         "min_steps": args.min_steps, "warmup": args.warmup, "max_cell_bytes_gib": args.max_cell_bytes,
                         "time_limit_s": args.time_limit, "backend": args.backend, "draw": args.draw,
                         "torch_threads": torch.get_num_threads()},
              "method": method, "notes": notes,
              "paths": {k: {"label": LABEL[k], "description": DESCRIPTION[k], "selected": k in args.paths,
                            "skipped": skips.get(k)} for k in PATH_KEYS},
              "skipped_paths": [{"path": k, "reason": r} for k, r in skips.items()],
              "cells": [], "headlines": [], "status": "running",
              "outputs": {"json": str(json_path), "plot": str(plot_path)}}

    def save():
        json_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = json_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(report, indent=1))
        tmp.replace(json_path)

    print("gltensor %s | GL: %s | %s | torch %s | GPU: %s | backend: %s"
          % (gltensor.__version__, ctx.renderer, ctx.version, torch.__version__, info["gpu_name"] or "none",
             report["backend"]))
    print("method: " + method)
    for n in notes:
        print("note: " + n)
    for k, r in skips.items():
        print("skipped path %s (%s): %s" % (k, LABEL[k], r))
    print("grid: %d cells (%s); paths: %s" % (len(cells), ", ".join(cell_label(*c) for c in cells),
                                             ", ".join(args.paths)))
    sys.stdout.flush()

    bar = Bar(sum(suite.expected_paths(n, skips) for n, _, _ in cells) * args.runs, enabled=not args.no_progress)
    status = 0
    try:
        for ci, (n, w, h) in enumerate(cells):
            label = cell_label(n, w, h)
            reason = suite.cell_skip(n, w, h)
            if reason is None and args.time_limit and time.perf_counter() - started > args.time_limit:
                reason = "time: --time-limit %g s reached before this cell" % args.time_limit
            if reason:
                report["cells"].append({"cameras": n, "size": [w, h], "label": label, "status": "skipped",
                                        "reason": reason, "pixel_bytes": n * w * h * 4, "results": []})
                bar.add(-suite.expected_paths(n, skips) * args.runs)
                bar.write("[%d/%d] skipped %s: %s" % (ci + 1, len(cells), label, reason))
                continue
            bar.describe(label)
            t0 = time.perf_counter()
            cell = suite.run_cell(n, w, h, skips, bar)
            cell["elapsed_s"] = time.perf_counter() - t0
            report["cells"].append(cell)
            bar.cell_done("[%d/%d] %s: %.1f s (%.0f s in all)" % (ci + 1, len(cells), label, cell["elapsed_s"],
                                                             time.perf_counter() - started))
            save()
    except CheckFailed as e:
        bar.close()
        report["status"] = "check failed: %s" % e
        save()
        print("\n" + "!" * 78, file=sys.stderr)
        print("CHECK FAILED, nothing of this cell was timed:\n  %s" % e, file=sys.stderr)
        print("!" * 78, file=sys.stderr)
        return 1
    except Exception as e:
        bar.close()
        report["status"] = "error: %s: %s" % (type(e).__name__, e)
        save()
        raise
    bar.close()

    report["elapsed_s"] = time.perf_counter() - started
    report["headlines"] = headlines(report, suite.cuda)
    report["status"] = "ok"
    why_no_plot = plot(report, plot_path)
    if why_no_plot:
        report["outputs"]["plot"] = None
        report["outputs"]["plot_skipped"] = why_no_plot
    save()

    summarize(report, json_path, plot_path, why_no_plot)
    if args.strict and any(h["verdict"] == "FAIL" for h in report["headlines"]):
        status = 3
    return status


if __name__ == "__main__":
    sys.exit(main())
