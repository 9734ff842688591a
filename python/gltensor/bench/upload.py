"""`python -m gltensor.bench upload` (or `--upload`): tensor -> OpenGL, gltensor against the host round trip.

    python -m gltensor.bench upload [--sizes 256,1024] [--vertices 1000000] [--runs 3] [--json PATH] [--strict]

Cases (one step = produce the data in torch + hand it to GL + the GL draw that uses it):
  texture W²  an RGBA8 uint8 (H, W, 4) tensor changed in place each step (x.add_(1)), written into an RGBA8
              texture, which GL then draws 1:1 into a framebuffer of the same size (a textured quad);
  vertices N  an (N, 4) float32 tensor changed in place each step (pos.add_(1e-3)), written into a vertex
              buffer, which GL then draws as N points into a 256² framebuffer.
Paths:
  host      what GL programs do today: x.cpu().numpy() -> glTexSubImage2D / glBufferSubData (PyOpenGL)
  gltensor  Upload.write(x) (one surface-write kernel) / map_buffer(mode='write') + copy_ (device to device)
  handoff   the same calls moving one texel / one vertex: one GL<->CUDA round trip with (almost) no bytes
  draw      the draw alone (no new data, no CUDA work): the GPU's graphics cost of the step
  nohandoff produce in torch + draw, nothing handed over: CUDA and GL work interleave with no order between
            them, and cost about what the draw costs (no round trip without a dependency)
The floor of a case is handoff + bytes / bandwidth, the bandwidth measured in the same run (a torch copy of
the same bytes on the device); gltensor should sit within 10% of it, and be >= 5x faster than host at 1024²
and at 1M vertices. The handoff is the draw plus the ordering any correct GL<->CUDA handoff needs (the map
waits for GL's earlier work on the data, GL's next draw for the unmap), with no bytes moved; host / handoff
is therefore the ceiling of what any mapped handoff can reach over host. Where the draw itself dominates
the step (1M points on a GPU with little graphics hardware, such as the H100) that ceiling falls below 5x
and the verdict says so; host / nohandoff (no ordering at all) and the cost beyond the draw alone
(step - draw) are reported as well. Before timing, each path's result is checked: the drawn frame
(captured) must equal the tensor, the buffer (read back) must equal the positions. Method as shared/PERF.md: warm-up, timed loop with
one synchronisation at its end (glFinish + torch.cuda.synchronize), median of --runs runs, runs interleaved.
On the CPU backend (no CUDA here) the same code runs with host tensors and the timings only describe the host.
"""
import argparse
import datetime
import json
import sys
import time

from gltensor.scene import _link

from . import MODES
from .measure import median
from .options import arg, parse_sizes, settle_timing_args
from .report import fmt_us, machine_info, print_table, results_path

TARGETS = {"speedup": 5.0, "floor": 1.10}
GPU_SIZES, CPU_SIZES = [(256, 256), (1024, 1024)], [(64, 64), (256, 256)]
GPU_VERTICES, CPU_VERTICES = 1_000_000, 16_384
POINTS_TARGET = 256

QUAD_VS = """#version 330 core
out vec2 v_uv;
void main() {
    vec2 p = vec2(gl_VertexID & 1, gl_VertexID >> 1);
    v_uv = p;
    gl_Position = vec4(p * 2.0 - 1.0, 0.0, 1.0);
}"""
QUAD_FS = """#version 330 core
in vec2 v_uv;
uniform sampler2D u_image;
out vec4 o_color;
void main() { o_color = texture(u_image, v_uv); }"""
POINTS_VS = """#version 330 core
layout(location = 0) in vec4 p;
void main() { gl_Position = vec4(fract(p.xy) * 2.0 - 1.0, 0.0, 1.0); gl_PointSize = 1.0; }"""
POINTS_FS = """#version 330 core
out vec4 o_color;
void main() { o_color = vec4(1.0); }"""


class _TextureCase:
    def __init__(self, GL, gltensor, torch, w, h, device):
        from gltensor.scene import RenderTarget
        self.GL, self.torch, self.w, self.h = GL, torch, w, h
        self.name = "texture %d²" % w if w == h else "texture %dx%d" % (w, h)
        self.nbytes = w * h * 4
        self.tex = GL.glGenTextures(1)
        GL.glBindTexture(GL.GL_TEXTURE_2D, self.tex)
        GL.glTexStorage2D(GL.GL_TEXTURE_2D, 1, GL.GL_RGBA8, w, h)
        GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_MIN_FILTER, GL.GL_NEAREST)
        GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_MAG_FILTER, GL.GL_NEAREST)
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
        self.target = RenderTarget(w, h, depth=False)
        self.prog = _link(QUAD_VS, QUAD_FS)
        self.vao = GL.glGenVertexArrays(1)
        g = torch.Generator().manual_seed(w)
        self.x = torch.randint(0, 256, (h, w, 4), generator=g, dtype=torch.uint8).to(device)
        self.one = self.x[:1, :1].clone()
        self.up = gltensor.Upload(self.tex)
        self.cap = gltensor.Capture(self.target.texture)
        from OpenGL.raw.GL.VERSION import GL_1_1, GL_2_0, GL_3_0
        self._raw = (GL_3_0.glBindFramebuffer, GL_1_1.glViewport, GL_2_0.glUseProgram, GL_3_0.glBindVertexArray,
                     GL_1_1.glBindTexture, GL_1_1.glDrawArrays)

    def produce(self):
        self.x.add_(1)

    def draw(self):
        bind_fb, viewport, use, bind_vao, bind_tex, draw = self._raw
        GL = self.GL
        bind_fb(GL.GL_FRAMEBUFFER, self.target.fbo)
        viewport(0, 0, self.w, self.h)
        use(self.prog)
        bind_vao(self.vao)
        bind_tex(GL.GL_TEXTURE_2D, self.tex)
        draw(GL.GL_TRIANGLE_STRIP, 0, 4)
        bind_tex(GL.GL_TEXTURE_2D, 0)
        bind_vao(0)
        use(0)
        bind_fb(GL.GL_FRAMEBUFFER, 0)

    def host(self):
        self.GL.glBindTexture(self.GL.GL_TEXTURE_2D, self.tex)
        self.GL.glTexSubImage2D(self.GL.GL_TEXTURE_2D, 0, 0, 0, self.w, self.h, self.GL.GL_RGBA,
                                self.GL.GL_UNSIGNED_BYTE, self.x.cpu().numpy())
        self.GL.glBindTexture(self.GL.GL_TEXTURE_2D, 0)

    def gltensor(self):
        self.up.write(self.x, flip=False)  # GL's rows, as glTexSubImage2D takes them

    def handoff(self):
        self.up.write(self.one, flip=False, region=(0, 0, 1, 1))

    def check(self, path):
        """The frame GL drew from the texture equals the tensor (rows as written: GL's, bottom-up)."""
        got = self.torch.from_dlpack(self.cap.read(flip=False))
        if not bool((got == self.x).all()):
            raise AssertionError("%s, path %s: the drawn frame differs from the tensor" % (self.name, path))

    def close(self):
        self.up.close()
        self.cap.close()
        self.GL.glDeleteTextures([self.tex])
        self.GL.glDeleteVertexArrays(1, [self.vao])
        self.GL.glDeleteProgram(self.prog)
        self.target.close()


class _VertexCase:
    def __init__(self, GL, gltensor, torch, n, device):
        from gltensor.scene import RenderTarget
        self.GL, self.torch, self.gt, self.n = GL, torch, gltensor, n
        self.name = "vertices %s" % ("%dM" % (n // 1_000_000) if n % 1_000_000 == 0 else "{:,}".format(n))
        self.nbytes = n * 16
        self.vbo = GL.glGenBuffers(1)
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, self.vbo)
        GL.glBufferData(GL.GL_ARRAY_BUFFER, self.nbytes, None, GL.GL_DYNAMIC_DRAW)
        self.vao = GL.glGenVertexArrays(1)
        GL.glBindVertexArray(self.vao)
        GL.glEnableVertexAttribArray(0)
        GL.glVertexAttribPointer(0, 4, GL.GL_FLOAT, GL.GL_FALSE, 16, None)
        GL.glBindVertexArray(0)
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, 0)
        self.target = RenderTarget(POINTS_TARGET, POINTS_TARGET, depth=False)
        self.prog = _link(POINTS_VS, POINTS_FS)
        g = torch.Generator().manual_seed(n)
        self.pos = torch.rand((n, 4), generator=g).to(device)
        self.buf = gltensor.Buffer(self.vbo)
        from OpenGL.raw.GL.VERSION import GL_1_1, GL_2_0, GL_3_0
        self._raw = (GL_3_0.glBindFramebuffer, GL_1_1.glViewport, GL_2_0.glUseProgram, GL_3_0.glBindVertexArray,
                     GL_1_1.glDrawArrays)

    def produce(self):
        self.pos.add_(1e-3)

    def draw(self):
        bind_fb, viewport, use, bind_vao, draw = self._raw
        GL = self.GL
        bind_fb(GL.GL_FRAMEBUFFER, self.target.fbo)
        viewport(0, 0, POINTS_TARGET, POINTS_TARGET)
        use(self.prog)
        bind_vao(self.vao)
        draw(GL.GL_POINTS, 0, self.n)
        bind_vao(0)
        use(0)
        bind_fb(GL.GL_FRAMEBUFFER, 0)

    def host(self):
        GL = self.GL
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, self.vbo)
        GL.glBufferSubData(GL.GL_ARRAY_BUFFER, 0, self.nbytes, self.pos.cpu().numpy())
        GL.glBindBuffer(GL.GL_ARRAY_BUFFER, 0)

    def gltensor(self):
        with self.gt.map_buffer(self.buf, "float32", (self.n, 4), mode="write") as v:
            self.torch.from_dlpack(v).copy_(self.pos)

    def handoff(self):
        with self.gt.map_buffer(self.buf, "float32", (1, 4), mode="write") as v:
            self.torch.from_dlpack(v).copy_(self.pos[:1])

    def check(self, path):
        got = self.torch.from_dlpack(self.buf.read("float32", (self.n, 4)))
        if not bool((got == self.pos).all()):
            raise AssertionError("%s, path %s: the vertex buffer differs from the tensor" % (self.name, path))

    def close(self):
        self.buf.close()
        self.GL.glDeleteBuffers(1, [self.vbo])
        self.GL.glDeleteVertexArrays(1, [self.vao])
        self.GL.glDeleteProgram(self.prog)
        self.target.close()


PATHS = ("host", "gltensor", "handoff", "draw", "nohandoff")


def _bandwidth_us(torch, nbytes, device, sync, reps=20):
    """µs to copy nbytes once on the device (a torch copy_ of the same bytes), median of 3. On CUDA timed with
    events around back-to-back copies (device time: launch overhead left out); on the host with the clock."""
    a = torch.empty(nbytes, dtype=torch.uint8, device=device)
    b = torch.empty_like(a)
    b.copy_(a)
    sync()
    runs = []
    for _ in range(3):
        if a.is_cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(reps):
                b.copy_(a)
            end.record()
            end.synchronize()
            runs.append(start.elapsed_time(end) * 1e3 / reps)
        else:
            t0 = time.perf_counter()
            for _ in range(reps):
                b.copy_(a)
            runs.append((time.perf_counter() - t0) / reps * 1e6)
    return median(runs)


def verdict_of(r):
    """One case's verdict against TARGETS (CUDA backend); says when the speed-up target is out of reach of any
    handoff because producing and drawing the data alone leave too little of the host path to win back."""
    ok_speed = r["speedup"] >= TARGETS["speedup"]
    ok_floor = r["vs_floor"] <= TARGETS["floor"]
    verdict = ("%s: %.2fx vs host (target >= %.0fx) %s; %.2f x floor (target <= %.2f) %s"
               % (r["case"], r["speedup"], TARGETS["speedup"], "PASS" if ok_speed else "FAIL",
                  r["vs_floor"], TARGETS["floor"], "PASS" if ok_floor else "FAIL"))
    if not ok_speed and r["ceiling"] < TARGETS["speedup"]:
        verdict += (" (out of reach of any GL<->CUDA handoff on this GPU: the draw alone takes %s, and the draw plus "
                    "the handoff's ordering with no bytes moved %s, so a handoff of free bytes would be only %.2fx "
                    "host; gltensor reaches %.0f%% of that ceiling, and beyond the draw it is %.1fx faster than host)"
                    % (fmt_us(r["us"]["draw"]), fmt_us(r["us"]["handoff"]), r["ceiling"],
                       100 * r["speedup"] / r["ceiling"], r["beyond_draw_speedup"] or 0.0))
    return verdict


def _beyond_draw_speedup(us):
    """(host - draw) / (gltensor - draw): what each path costs on top of the draw it feeds; None where the
    noise of the timings leaves gltensor no measurable cost beyond the draw."""
    extra = us["gltensor"] - us["draw"]
    return (us["host"] - us["draw"]) / extra if extra > 0.02 * us["gltensor"] else None


def _time_path(case, path, steps, sync):
    t0 = time.perf_counter()
    if path == "draw":  # the draw alone: no new data, so no CUDA work and no GL<->CUDA switch either
        for _ in range(steps):
            case.draw()
    elif path == "nohandoff":  # new data each step, GL draws without it: no interop, no ordering
        for _ in range(steps):
            case.produce()
            case.draw()
    else:
        step_fn = getattr(case, path)
        for _ in range(steps):
            case.produce()
            step_fn()
            case.draw()
    sync()
    return (time.perf_counter() - t0) / steps * 1e6


def build_parser():
    ap = argparse.ArgumentParser(prog="python -m gltensor.bench upload", description=MODES["upload"][1])
    ap.add_argument("--sizes", type=arg(parse_sizes), default=None,
                    help="texture sizes, N or WxH, comma-separated (default %s; CPU backend %s)"
                         % (",".join("%dx%d" % s for s in GPU_SIZES), ",".join("%dx%d" % s for s in CPU_SIZES)))
    ap.add_argument("--vertices", type=int, default=None,
                    help="float4 vertices of the vertex-buffer case (default {:,}; CPU backend {:,}; 0: no vertex "
                         "case)".format(GPU_VERTICES, CPU_VERTICES))
    ap.add_argument("--seconds", type=float, default=None,
                    help="timed seconds per path per case, over all runs (default 0.6; CPU backend 0.2)")
    ap.add_argument("--runs", type=int, default=3, help="runs per path per case; the median is reported (default 3)")
    ap.add_argument("--min-steps", type=int, default=20, help="timed steps per run at least (default 20)")
    ap.add_argument("--warmup", type=int, default=10, help="warm-up steps before the first run (at least 10)")
    ap.add_argument("--json", help="JSON output (default ~/.cache/gltensor/bench/upload_<host>.json)")
    ap.add_argument("--strict", action="store_true", help="exit 3 when a verdict is FAIL")
    return ap


def main(argv=None):
    ap = build_parser()
    args = ap.parse_args(argv)
    settle_timing_args(ap, args)
    try:
        import torch
    except ImportError:
        print("error: the upload benchmark needs torch (pip install torch)", file=sys.stderr)
        return 2
    from OpenGL import GL

    import gltensor

    ctx = gltensor.Context.headless()
    try:
        return _run(args, torch, GL, gltensor, ctx)
    finally:
        ctx.close()


def _run(args, torch, GL, gltensor, ctx):
    cuda = ctx.cuda_device is not None and gltensor.cuda_available() and torch.cuda.is_available()
    device = "cuda:%d" % ctx.cuda_device if cuda else "cpu"
    if not cuda and ctx.is_software and torch.get_num_threads() > 1:
        torch.set_num_threads(1)  # llvmpipe rasterises on every core; torch's spinning workers starve it
    sizes = args.sizes or (GPU_SIZES if cuda else CPU_SIZES)
    n_vertices = args.vertices if args.vertices is not None else (GPU_VERTICES if cuda else CPU_VERTICES)
    seconds = args.seconds if args.seconds is not None else (0.6 if cuda else 0.2)

    def sync():
        GL.glFinish()
        if cuda:
            torch.cuda.synchronize()

    info = machine_info(ctx, torch)
    print("gltensor upload benchmark: %s, GL %s, backend %s, torch %s"
          % (info.get("gpu_name") or info.get("cpu_model") or "?", ctx.renderer, "cuda" if cuda else "cpu",
             torch.__version__))
    cases = []
    results = []
    try:
        for w, h in sizes:
            cases.append(_TextureCase(GL, gltensor, torch, w, h, device))
        if n_vertices:
            cases.append(_VertexCase(GL, gltensor, torch, n_vertices, device))
        for case in cases:
            # correctness first: every path's result must be what GL then uses
            for path in PATHS[:2]:
                case.produce()
                getattr(case, path)()
                case.draw()
                sync()
                case.check(path)
            # warm-up, a probe for the step count, then runs interleaved across paths
            steps = {}
            for path in PATHS:
                _time_path(case, path, args.warmup, sync)
                probe = _time_path(case, path, 3, sync)
                steps[path] = int(max(args.min_steps, min(2000, seconds / args.runs / max(probe, 1.0) * 1e6)))
            runs = {p: [] for p in PATHS}
            for _ in range(args.runs):
                for path in PATHS:
                    runs[path].append(_time_path(case, path, steps[path], sync))
            copy_us = _bandwidth_us(torch, case.nbytes, device, sync)
            us = {p: median(v) for p, v in runs.items()}
            floor = us["handoff"] + copy_us
            results.append({"case": case.name, "bytes": case.nbytes, "us": us, "runs": runs, "steps": steps,
                            "copy_us": copy_us, "bandwidth_gbs": case.nbytes / copy_us / 1e3, "floor_us": floor,
                            "speedup": us["host"] / us["gltensor"], "vs_floor": us["gltensor"] / floor,
                            "ceiling": us["host"] / us["handoff"], "ceiling_unordered": us["host"] / us["nohandoff"],
                            "beyond_draw_speedup": _beyond_draw_speedup(us)})
    finally:
        for case in cases:
            case.close()

    rows = []
    for r in results:
        beyond = r["beyond_draw_speedup"]
        rows.append([r["case"], "%.1f MB" % (r["bytes"] / 1e6), fmt_us(r["us"]["host"]), fmt_us(r["us"]["gltensor"]),
                     "%.2fx" % r["speedup"], fmt_us(r["us"]["handoff"]), "%s (%.0f GB/s)" % (fmt_us(r["copy_us"]),
                     r["bandwidth_gbs"]), fmt_us(r["floor_us"]), "%.2f" % r["vs_floor"], fmt_us(r["us"]["draw"]),
                     fmt_us(r["us"]["nohandoff"]), "%.2fx" % r["ceiling"], "-" if beyond is None else "%.1fx" % beyond])
    print_table("µs per step (produce in torch + hand to GL + the draw that uses it), median of %d runs" % args.runs,
                ["case", "bytes", "host (numpy->GL)", "gltensor", "speed-up", "handoff", "bytes/bandwidth",
                 "floor", "gltensor/floor", "draw alone",
                 "produce+draw", "ceiling (host/handoff)", "speed-up beyond the draw"], rows)
    verdicts = []
    for r in results:
        big = r["case"] in ("texture 1024²", "vertices 1M")
        if not big:
            continue
        if not cuda:
            verdicts.append("%s: n/a on the CPU backend (targets are for the CUDA backend)" % r["case"])
            continue
        verdicts.append(verdict_of(r))
    print("\nVerdicts:")
    for v in verdicts or ["(no 1024² texture or 1M-vertex case in this run)"]:
        print("  " + v)
    if not cuda:
        print("\nNote: no CUDA here (%s): gltensor ran on its CPU backend (glTexSubImage2D / glMapBufferRange) and "
              "the timings describe host work only." % (gltensor.cuda_unavailable_reason() or "CPU backend"))
    report = {"benchmark": "upload", "version": 1, "date": datetime.datetime.now().isoformat(timespec="seconds"),
              "argv": sys.argv[1:], "machine": info, "backend": "cuda" if cuda else "cpu", "targets": TARGETS,
              "config": {"sizes": [list(s) for s in sizes], "vertices": n_vertices, "runs": args.runs,
                         "min_steps": args.min_steps, "warmup": args.warmup, "seconds_per_path": seconds},
              "results": results, "verdicts": verdicts}
    path = results_path("upload", info["host"], args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1))
    print("\nJSON: %s" % path)
    if args.strict and any("FAIL" in v for v in verdicts):
        return 3
    return 0
