"""`python -m gltensor.bench convert`: fused conversions and depth: what flip + rgb + float32 + CHW costs inside
the copy, against the plain copy and against the torch chain users write; and what a depth capture costs against
a colour capture.

    python -m gltensor.bench convert [--size 1024] [--configs 64x128] [--steps 200] [--json PATH]

Configurations: one camera of --size² through gltensor.Capture (the lit Scene), and for each of --configs
(CAMERASxSIZE) a gltensor.Batch of that many textures and a gltensor.Atlas holding the same cameras as tiles.
Paths, each ending in the same content (float32 (N,) 3, H, W, RGB, top row first) except the copy floor:
  plain        read()                                       uint8 (N,) H, W, 4: the copy floor
  fused        read(channels="rgb", dtype="float32", layout="chw")
  chain        read(flip=False) -> torch.flip(x, dims=[-3])[..., :3].permute(2, 0, 1).float() / 255
               (batches: permute(0, 3, 1, 2)); what users write today
  chain-exact  the same chain dividing by a 0-dim tensor on the frame's device (IEEE division, see below)
Views: (0) the GPU time of the passes over the data alone: kernels and copies per call, from torch.profiler's
CUDA activity records (no GL->CUDA switch in it: that is a wait); (1) the transfer + conversion alone, the frame rendered once and read over and over: GPU time from CUDA
events around each call (the GPU kept busy ahead so that CPU launch gaps do not count), and wall time per call
with one synchronisation per --calls calls; (2) the full step of benchmarks/README.md's method: render + read (+ torch ops)
+ consumer `y.float().mean()`, >= 200 steps, one sync at the end. Median of --runs runs, runs interleaved.
Targets (the project's), judged on view (1): fused <= 1.3x plain, chain >= 2x fused; view (0)'s verdicts beside.
Depth: a --size² DEPTH_COMPONENT24 and a DEPTH32F texture attached to the FBO of the rendered scene;
read() (window depth) and read(depth="linear", near, far) against read() of that FBO's colour texture, per call
(wall, sync per --calls calls) and per full step; target depth <= 2x colour.
Correctness first: every path's output is compared with glReadPixels before any timing (exit 1 on mismatch).

Division: the library computes x / 255 with IEEE float32 division. torch on CUDA computes `t / 255` (a
Python scalar divisor) as t * float32(1/255), which differs in the last bit for about half the byte values;
the literal chain is therefore accepted when it equals either exactly, and the fused output must equal
chain-exact (and x / 255 from glReadPixels) bit for bit.
"""
import argparse
import datetime
import sys

import numpy as np

from . import MODES
from .measure import CheckFailed, median, time_calls, time_steps
from .options import add_run_args, check_failed, gl_torch_sync, open_run, parse_configs, print_start
from .report import fmt_us, print_table, save_json
from .scenes import Cameras, single_draw

NEAR, FAR = 0.1, 50.0           # gltensor.scene's perspective projection
FUSED_OVER_PLAIN_MAX = 1.3      # the project's targets
CHAIN_OVER_FUSED_MIN = 2.0
DEPTH_OVER_COLOUR_MAX = 2.0


# ---------------------------------------------------------------- GL helpers

class DepthTarget:
    """An FBO with an RGBA8 colour texture and a depth *texture* of `fmt` (what gets captured)."""

    def __init__(self, w, h, fmt_name):
        from OpenGL import GL
        self.GL, self.width, self.height, self.fmt_name = GL, w, h, fmt_name
        fmt, ty = {"GL_DEPTH_COMPONENT24": (GL.GL_DEPTH_COMPONENT24, GL.GL_UNSIGNED_INT),
                   "GL_DEPTH_COMPONENT32F": (GL.GL_DEPTH_COMPONENT32F, GL.GL_FLOAT)}[fmt_name]
        self.color, self.depth = GL.glGenTextures(2)
        for tex, ifmt, f, t in ((self.color, GL.GL_RGBA8, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE),
                                (self.depth, fmt, GL.GL_DEPTH_COMPONENT, ty)):
            GL.glBindTexture(GL.GL_TEXTURE_2D, tex)
            GL.glTexImage2D(GL.GL_TEXTURE_2D, 0, ifmt, w, h, 0, f, t, None)
            GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_MIN_FILTER, GL.GL_NEAREST)
            GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_MAG_FILTER, GL.GL_NEAREST)
        GL.glBindTexture(GL.GL_TEXTURE_2D, 0)
        self.fbo = GL.glGenFramebuffers(1)
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, self.fbo)
        GL.glFramebufferTexture2D(GL.GL_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT0, GL.GL_TEXTURE_2D, self.color, 0)
        GL.glFramebufferTexture2D(GL.GL_FRAMEBUFFER, GL.GL_DEPTH_ATTACHMENT, GL.GL_TEXTURE_2D, self.depth, 0)
        status = GL.glCheckFramebufferStatus(GL.GL_FRAMEBUFFER)
        if status != GL.GL_FRAMEBUFFER_COMPLETE:
            self.close()
            raise RuntimeError("depth framebuffer (%s) incomplete: 0x%04x" % (fmt_name, status))

    def read_depth(self, flip=True):
        """glReadPixels(GL_DEPTH_COMPONENT, GL_FLOAT): (H, W, 1) float32, top row first unless flip=False."""
        GL = self.GL
        GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, self.fbo)
        GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 4)
        out = np.empty((self.height, self.width), np.float32)
        GL.glReadPixels(0, 0, self.width, self.height, GL.GL_DEPTH_COMPONENT, GL.GL_FLOAT, out)
        out = out[::-1] if flip else out
        return np.ascontiguousarray(out)[..., None]

    def read_color(self, flip=True):
        from gltensor.scene import read_pixels
        return read_pixels(self.fbo, (0, 0, self.width, self.height), flip=flip)

    def close(self):
        GL = self.GL
        GL.glDeleteFramebuffers(1, [self.fbo])
        GL.glDeleteTextures([self.color, self.depth])


def upload_random(GL, texture, w, h, rng):
    """Random RGBA8 bytes into `texture` (every byte value occurs): the conversion check's hard input."""
    data = rng.integers(0, 256, size=(h, w, 4), dtype=np.uint8)
    GL.glBindTexture(GL.GL_TEXTURE_2D, texture)
    GL.glPixelStorei(GL.GL_UNPACK_ALIGNMENT, 1)
    GL.glTexSubImage2D(GL.GL_TEXTURE_2D, 0, 0, 0, w, h, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, data)
    GL.glBindTexture(GL.GL_TEXTURE_2D, 0)


# ---------------------------------------------------------------- paths

class ConvPath:
    def __init__(self, key, name, fn, note=""):
        self.key, self.name, self.fn, self.note = key, name, fn, note


def conversion_paths(src, batched, torch, stream, device):
    """The four paths over one reader (Capture, Batch or Atlas)."""
    kw = {} if stream is None else {"stream": stream}
    dl = torch.from_dlpack
    perm = (0, 3, 1, 2) if batched else (2, 0, 1)
    c255 = torch.tensor(255.0, dtype=torch.float32, device=device)

    def plain():
        return dl(src.read(**kw))

    def fused():
        return dl(src.read(channels="rgb", dtype="float32", layout="chw", **kw))

    def chain():
        x = dl(src.read(flip=False, **kw))
        return torch.flip(x, dims=[-3])[..., :3].permute(*perm).float() / 255

    def chain_exact():
        x = dl(src.read(flip=False, **kw))
        return torch.flip(x, dims=[-3])[..., :3].permute(*perm).float().div(c255)

    p = "".join(str(v) for v in perm)
    return [ConvPath("plain", "read()", plain, "uint8 HWC, flipped in the copy: the copy floor"),
            ConvPath("fused", "read(channels='rgb', dtype='float32', layout='chw')", fused, "one pass"),
            ConvPath("chain", "read(flip=False) + flip/slice/permute(%s)/float()/255" % p, chain,
                     "what users write"),
            ConvPath("chain_exact", "chain with .div(0-dim device tensor 255)", chain_exact,
                     "IEEE division, bit-equal to fused")]


# ---------------------------------------------------------------- correctness

def describe_diff(got, ref):
    if got.shape != ref.shape:
        return "shape %s vs %s" % (got.shape, ref.shape)
    bad = got != ref
    return "%d of %d values differ, max |diff| %.3g" % (int(bad.sum()), bad.size,
                                                        float(np.abs(got.astype(np.float64) - ref).max()))


def check_conversions(label, what, paths, ref_u8, batched):
    """ref_u8: glReadPixels of the same image(s), top row first, (N,) H, W, 4. Returns the check record."""
    perm = (0, 3, 1, 2) if batched else (2, 0, 1)
    rgb = ref_u8[..., :3].astype(np.float32)
    ref_ieee = np.ascontiguousarray((rgb / np.float32(255)).transpose(perm))
    ref_recip = np.ascontiguousarray((rgb * (np.float32(1) / np.float32(255))).transpose(perm))
    out = {}
    for p in paths:
        y = p.fn()
        out[p.key] = (y.cpu().numpy(), bool(y.is_contiguous()))
    got, _ = out["plain"]
    if got.dtype != np.uint8 or not np.array_equal(got, ref_u8):
        raise CheckFailed("%s, %s: plain read() differs from glReadPixels (%s, %s)"
                          % (label, what, got.dtype, describe_diff(got, ref_u8)))
    fused, _ = out["fused"]
    if fused.dtype != np.float32 or not np.array_equal(fused, ref_ieee):
        extra = " (it equals x * float32(1/255) instead)" if np.array_equal(fused, ref_recip) else ""
        raise CheckFailed("%s, %s: fused read differs from glReadPixels / 255 (%s, %s)%s"
                          % (label, what, fused.dtype, describe_diff(fused, ref_ieee), extra))
    exact, _ = out["chain_exact"]
    if exact.dtype != np.float32 or not np.array_equal(exact, fused):
        raise CheckFailed("%s, %s: fused output differs from the torch chain (exact division): %s"
                          % (label, what, describe_diff(exact, fused)))
    chain, _ = out["chain"]
    if chain.dtype == np.float32 and np.array_equal(chain, fused):
        chain_rel = "bit-equal to fused"
    elif chain.dtype == np.float32 and np.array_equal(chain, ref_recip):
        chain_rel = ("equals x * float32(1/255) (torch's division by a Python scalar), %s from fused"
                     % describe_diff(chain, fused))
    else:
        raise CheckFailed("%s, %s: torch chain output differs from both x / 255 and x * (1/255): %s"
                          % (label, what, describe_diff(chain, ref_ieee)))
    return {"input": what, "plain": "equal to glReadPixels", "fused": "equal to glReadPixels / 255 (float32)",
            "chain_exact": "bit-equal to fused", "chain": chain_rel,
            "contiguous": {k: c for k, (_, c) in out.items()}}


# ---------------------------------------------------------------- timers

def sleep_cycles_per_us(torch):
    """Clock of torch.cuda._sleep's spin loop, from CUDA events."""
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    s.record()
    torch.cuda._sleep(20_000_000)
    e.record()
    e.synchronize()
    return 20_000_000 / (s.elapsed_time(e) * 1000.0)


def gpu_time_calls(torch, fn, calls, warmup, cycles_per_us, est_call_us):
    """GPU µs per call: a CUDA event pair around every call, summed. The stream is first given a
    torch.cuda._sleep long enough for the CPU to enqueue all calls, so that the pairs time GPU work only,
    not the CPU's launch gaps. Returns (µs, busy_ahead): busy_ahead False means the GPU caught up with the
    CPU (e.g. a call blocked on the stream) and the figure includes gaps."""
    for _ in range(warmup):
        fn()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(calls)]
    busy_us = max(2000.0, 2.0 * calls * est_call_us)
    ahead = False
    for _ in range(3):
        torch.cuda.synchronize()
        torch.cuda._sleep(int(busy_us * cycles_per_us))
        gate = torch.cuda.Event()
        gate.record()
        for s, e in events:
            s.record()
            fn()
            e.record()
        ahead = not gate.query()  # still sleeping: every call was enqueued before the GPU got to it
        torch.cuda.synchronize()
        if ahead:
            break
        busy_us *= 4
    return sum(s.elapsed_time(e) for s, e in events) * 1000.0 / calls, ahead


def pass_time_calls(torch, fn, calls, warmup):
    """View (0): GPU µs per call spent in kernels and copies, from the CUDA activity records torch.profiler
    collects (CUPTI sees every kernel in the process, the library's included): the passes over the data
    alone. The GL->CUDA switch is a wait, not a kernel, so it is not in this figure. Returns (µs, {name: µs})
    or (None, {"error": why}) where the profiler cannot record CUDA activity."""
    try:
        from torch.profiler import ProfilerActivity, profile
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                fn()
            torch.cuda.synchronize()
        per_name = {}
        for e in prof.events():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                per_name[e.name] = per_name.get(e.name, 0.0) + e.time_range.elapsed_us() / calls
        if not per_name:
            return None, {"error": "the profiler recorded no CUDA activity"}
        return sum(per_name.values()), per_name
    except Exception as e:  # a profiler that cannot trace must not cost the other views
        return None, {"error": "%s: %s" % (type(e).__name__, e)}


def wall_time_calls(fn, calls, warmup, sync):
    for _ in range(warmup):
        fn()
    return time_calls(fn, calls, sync)


# ---------------------------------------------------------------- output helpers

def fmt_ratio(v):
    return "-" if v is None else "%.2fx" % v


def verdict(ok):
    return "-" if ok is None else ("PASS" if ok else "FAIL")


def ratio(a, b):
    return a / b if (a is not None and b) else None


# ---------------------------------------------------------------- main

def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m gltensor.bench convert", description=MODES["convert"][1])
    ap.add_argument("--size", type=int, default=1024, help="single camera and depth image size (default 1024)")
    ap.add_argument("--configs", type=parse_configs, default=parse_configs("64x128"),
                    help="comma-separated CAMERASxSIZE for Batch and Atlas (default 64x128)")
    add_run_args(ap, "convert", warmup_what="steps/calls")
    ap.add_argument("--calls", type=int, default=None, help="read calls per run in view (1) (default: --steps)")
    ap.add_argument("--scene", action=argparse.BooleanOptionalAction, default=True,
                    help="single camera: render the lit Scene (default) or a cheap scissored clear")
    ap.add_argument("--batch-scene", action=argparse.BooleanOptionalAction, default=False,
                    help="Batch/Atlas: render the lit Scene per camera instead of cheap clears (default off)")
    ap.add_argument("--depth", action=argparse.BooleanOptionalAction, default=True, help="run the depth part")
    args = ap.parse_args(argv)
    warmup = max(args.warmup, 10)
    calls = args.calls or args.steps
    if args.steps < 1 or args.runs < 1 or calls < 1:
        ap.error("--steps, --calls and --runs must be positive")
    run = open_run("convert", args)
    if run is None:
        return 1
    torch, ctx, info, json_path = run
    import gltensor
    from OpenGL import GL
    from gltensor.scene import Scene

    report = {"benchmark": "convert", "date": datetime.datetime.now().isoformat(timespec="seconds"),
              "argv": sys.argv[1:], "machine": info,
              "config": {"size": args.size, "configs": args.configs, "steps": args.steps, "calls": calls,
                         "warmup": warmup, "runs": args.runs, "scene": args.scene, "batch_scene": args.batch_scene,
                         "depth": args.depth, "backend": args.backend, "torch_threads": torch.get_num_threads(),
                         "near": NEAR, "far": FAR,
                         "targets": {"fused_over_plain_max": FUSED_OVER_PLAIN_MAX,
                                     "chain_over_fused_min": CHAIN_OVER_FUSED_MIN,
                                     "depth_over_colour_max": DEPTH_OVER_COLOUR_MAX}},
              "timers": None, "conversions": [], "conversion_ratios": [], "depth": [], "depth_ratios": [],
              "status": "running"}
    print_start(ctx, torch, info)

    state = {"cycles": None}

    sync = gl_torch_sync(torch)

    def timer_setup(backend):
        """The view (1) timers for this backend; told once."""
        cuda = backend == "cuda"
        if report["timers"] is None:
            print("backend: %s (%s)" % (backend, reason_of[0]))
            if cuda:
                state["cycles"] = sleep_cycles_per_us(torch)
                report["timers"] = {"view1": "CUDA events around each call, GPU kept busy ahead (torch.cuda._sleep)"
                                             " + perf_counter wall time per call, one sync per N calls",
                                    "sleep_cycles_per_us": state["cycles"]}
            else:
                report["timers"] = {"view1": "CPU backend: perf_counter wall time per call, one sync per N calls "
                                             "(no CUDA events; the figures say nothing about the GPU targets)"}
                print("note: CPU backend: view (1) uses CPU timers (perf_counter, one sync per %d calls), no CUDA "
                      "events; the timings say nothing about the GPU targets" % calls)
                if ctx.is_software and torch.get_num_threads() > 1:
                    print("note: llvmpipe and torch's OpenMP workers share the CPU cores; --torch-threads 1 "
                          "keeps the workers' spinning from slowing the renderer")
        return cuda

    reason_of = [""]  # the backend_reason timer_setup() prints
    conv_rows, ratio_rows, depth_rows, depth_ratio_rows = [], [], [], []
    rng = np.random.default_rng(1234)
    try:
        # ------------------------------------------------ conversion configurations
        configs = [("single", 1, args.size, args.size)] + \
                  [(kind, n, w, h) for (n, w, h) in args.configs for kind in ("batch", "atlas")]
        for kind, n, w, h in configs:
            label = ("1 x %dx%d Capture" % (w, h)) if kind == "single" else \
                    ("%d x %dx%d %s" % (n, w, h, "Batch" if kind == "batch" else "Atlas"))
            src = scene = cams = None
            extra = []
            try:
                if kind == "single":
                    scene = Scene(w, h)
                    src = gltensor.Capture(scene.texture, gltensor.GL_TEXTURE_2D, backend=args.backend)
                    backend, reason = src.backend, src.backend_reason
                    draw = single_draw(scene, args.scene)
                    reference = lambda: scene.read_pixels(flip=True)  # noqa: E731
                    textures = [(scene.texture, w, h)]
                    batched = False
                else:
                    cams = Cameras(n, w, h, args.batch_scene)
                    if kind == "batch":
                        caps = [gltensor.Capture(t.texture, gltensor.GL_TEXTURE_2D, backend=args.backend)
                                for t in cams.targets]
                        extra = caps
                        src = gltensor.Batch(caps)
                        backend, reason = caps[0].backend, caps[0].backend_reason
                        draw, textures = cams.draw_targets, [(t.texture, w, h) for t in cams.targets]
                        reference = lambda: cams.reference(False, True)  # noqa: E731
                    else:
                        src = gltensor.Atlas(cams.atlas_target.texture, gltensor.GL_TEXTURE_2D,
                                             tiles=(cams.rows, cams.cols), count=n, backend=args.backend)
                        backend, reason = src.backend, src.backend_reason
                        draw = cams.draw_atlas
                        textures = [(cams.atlas_target.texture, cams.cols * w, cams.rows * h)]
                        reference = lambda: cams.reference(True, True)  # noqa: E731
                        viewports = [tuple(v) for v in src.viewports()]
                        if viewports != cams.tiles:
                            raise CheckFailed("%s: atlas.viewports() differ from docs/python-api.md's layout" % label)
                    batched = True
                reason_of[0] = reason
                cuda = timer_setup(backend)
                device = src.read().device  # "cuda:N" or "cpu" (an Atlas has no .cuda_device)
                stream = torch.cuda.current_stream() if cuda else None
                report["machine"].setdefault("backend", backend)
                report["machine"].setdefault("backend_reason", reason)
                paths = conversion_paths(src, batched, torch, stream, device)

                # Correctness first: random bytes (every value), then two rendered frames.
                checks = []
                for tex, tw, th in textures:
                    upload_random(GL, tex, tw, th, rng)
                checks.append(check_conversions(label, "random bytes", paths, reference(), batched))
                for i in (3, 40):
                    draw(i)
                    checks.append(check_conversions(label, "rendered frame %d" % i, paths, reference(), batched))

                # Timing: view (1) on one rendered frame, view (2) full steps; runs interleaved across paths.
                draw(7)
                sync()
                t = {p.key: {"wall": [], "gpu": [], "busy_ahead": [], "step": [], "pass": []} for p in paths}
                kernels = {}
                if cuda:  # view (0): once, outside the interleaved runs (the profiler slows the calls it traces)
                    for p in paths:
                        us, kernels[p.key] = pass_time_calls(torch, p.fn, min(calls, 50), warmup)
                        if us is not None:
                            t[p.key]["pass"].append(us)
                for _ in range(args.runs):
                    for p in paths:
                        t[p.key]["wall"].append(wall_time_calls(p.fn, calls, warmup, sync))
                    if cuda:
                        for p in paths:
                            us, ahead = gpu_time_calls(torch, p.fn, calls, warmup, state["cycles"],
                                                       median(t[p.key]["wall"]))
                            t[p.key]["gpu"].append(us)
                            t[p.key]["busy_ahead"].append(ahead)
                    for p in paths:
                        t[p.key]["step"].append(time_steps(draw, p.fn, args.steps, warmup, sync))
            finally:
                for obj in [src] + extra:
                    if obj is not None:
                        obj.close()
                if scene is not None:
                    scene.close()
                if cams is not None:
                    cams.close()

            med = {k: {v: (median(r[v]) if r[v] and v != "busy_ahead" else None)
                       for v in ("wall", "gpu", "step", "pass")} for k, r in t.items()}
            view1 = "gpu" if cuda else "wall"
            for p in paths:
                m, r = med[p.key], t[p.key]
                gaps = cuda and not all(r["busy_ahead"])
                note = p.note + ("; GPU time includes launch gaps (GPU not kept busy ahead)" if gaps else "")
                report["conversions"].append({
                    "config": label, "kind": kind, "cameras": n, "size": [w, h], "path": p.key, "name": p.name,
                    "backend": backend, "checks": checks, "view1_gpu_us_runs": r["gpu"],
                    "view1_gpu_busy_ahead": r["busy_ahead"], "view1_gpu_us": m["gpu"],
                    "view1_wall_us_runs": r["wall"], "view1_wall_us": m["wall"],
                    "step_us_runs": r["step"], "step_us": m["step"], "frames_per_s": n * 1e6 / m["step"],
                    "view0_pass_us": m["pass"], "view0_kernels_us": kernels.get(p.key)})
                conv_rows.append([label, p.key, p.name, fmt_us(m["pass"]), fmt_us(m["gpu"]), fmt_us(m["wall"]),
                                  fmt_us(m["step"]),
                                  "{:,.0f}".format(n * 1e6 / m["step"]), note])
            chain_rel = checks[0]["chain"]  # the random bytes hold every value
            for name, num, den, target, kind_t in (
                    ("fused / plain", "fused", "plain", FUSED_OVER_PLAIN_MAX, "max"),
                    ("chain / fused", "chain", "fused", CHAIN_OVER_FUSED_MIN, "min"),
                    ("chain-exact / fused", "chain_exact", "fused", None, None)):
                r0 = ratio(med[num]["pass"], med[den]["pass"])
                r1 = ratio(med[num][view1], med[den][view1])
                r2 = ratio(med[num]["step"], med[den]["step"])
                ok0 = None if target is None or r0 is None else (r0 <= target if kind_t == "max" else r0 >= target)
                ok = None if target is None or r1 is None else (r1 <= target if kind_t == "max" else r1 >= target)
                report["conversion_ratios"].append({
                    "config": label, "ratio": name, "view0_ratio": r0, "view0_pass": ok0,
                    "view1": view1, "view1_ratio": r1, "step_ratio": r2,
                    "target": None if target is None else ("<= %g" % target if kind_t == "max" else ">= %g" % target),
                    "pass": ok})
                ratio_rows.append([label, name, fmt_ratio(r1),
                                   "-" if target is None else ("<= %.2fx" % target if kind_t == "max"
                                                               else ">= %.2fx" % target),
                                   verdict(ok), fmt_ratio(r0), verdict(ok0), fmt_ratio(r2)])
            report["conversion_ratios"][-1]["chain_check"] = chain_rel

        # ------------------------------------------------ depth
        if args.depth:
            w = h = args.size
            scene = Scene(w, h)
            try:
                for fmt_name in ("GL_DEPTH_COMPONENT24", "GL_DEPTH_COMPONENT32F"):
                    target = DepthTarget(w, h, fmt_name)
                    ccap = dcap = None
                    try:
                        ccap = gltensor.Capture(target.color, gltensor.GL_TEXTURE_2D, backend=args.backend)
                        dcap = gltensor.Capture(target.depth, gltensor.GL_TEXTURE_2D, backend=args.backend)
                        reason_of[0], dbackend = dcap.backend_reason, dcap.backend
                        cuda = timer_setup(dbackend)
                        if dcap.format != fmt_name or dcap.shape != (h, w, 1) or dcap.dtype != "float32":
                            raise CheckFailed("depth %s: capture reports %s %s %s, expected %s (%d, %d, 1) float32"
                                              % (fmt_name, dcap.format, dcap.shape, dcap.dtype, fmt_name, h, w))
                        kw = {"stream": torch.cuda.current_stream()} if cuda else {}
                        dl = torch.from_dlpack
                        paths = [ConvPath("colour", "colour read()", lambda: dl(ccap.read(**kw)),
                                          "RGBA8 colour texture of the same FBO"),
                                 ConvPath("depth", "depth read()", lambda: dl(dcap.read(**kw)),
                                          "window depth, float32 (H, W, 1)"),
                                 ConvPath("linear", "depth read(depth='linear', near=%g, far=%g)" % (NEAR, FAR),
                                          lambda: dl(dcap.read(depth="linear", near=NEAR, far=FAR, **kw)),
                                          "eye-space distance, float32")]

                        def draw(i, fbo=target.fbo):
                            scene.render(i / 60.0, fbo=fbo)

                        checks = []
                        for i in (3, 40):  # correctness first
                            draw(i)
                            ref_c = target.read_color(flip=True)
                            ref_d = target.read_depth(flip=True)
                            got = paths[0].fn().cpu().numpy()
                            if not np.array_equal(got, ref_c):
                                raise CheckFailed("depth %s, frame %d: colour read() differs from glReadPixels: %s"
                                                  % (fmt_name, i, describe_diff(got, ref_c)))
                            got = paths[1].fn().cpu().numpy()
                            if got.dtype != np.float32 or not np.array_equal(got, ref_d):
                                raise CheckFailed("depth %s, frame %d: depth read() differs from "
                                                  "glReadPixels(GL_DEPTH_COMPONENT, GL_FLOAT): %s"
                                                  % (fmt_name, i, describe_diff(got, ref_d)))
                            d = ref_d.astype(np.float64)
                            ref_l = (FAR * NEAR / (FAR - d * (FAR - NEAR))).astype(np.float32)
                            got = paths[2].fn().cpu().numpy()
                            # computed in double then rounded: allow one float32 ulp (FMA contraction)
                            ulps = np.abs(got.view(np.int32).astype(np.int64) - ref_l.view(np.int32))
                            if got.shape != ref_l.shape or not np.all(np.isfinite(got)) or ulps.max() > 1:
                                raise CheckFailed("depth %s, frame %d: linear depth differs from f*n/(f-d*(f-n)) "
                                                  "by more than 1 ulp: %s" % (fmt_name, i, describe_diff(got, ref_l)))
                            checks.append({"frame": i, "colour": "equal to glReadPixels",
                                           "depth": "equal to glReadPixels(GL_DEPTH_COMPONENT, GL_FLOAT)",
                                           "linear": "within %d ulp of f*n/(f-d*(f-n)) (%d values not exact)"
                                                     % (int(ulps.max()), int((ulps > 0).sum())),
                                           "depth_range": [float(ref_d.min()), float(ref_d.max())]})

                        draw(7)
                        sync()
                        t = {p.key: {"wall": [], "step": []} for p in paths}
                        for _ in range(args.runs):
                            for p in paths:
                                t[p.key]["wall"].append(wall_time_calls(p.fn, calls, warmup, sync))
                            for p in paths:
                                t[p.key]["step"].append(time_steps(draw, p.fn, args.steps, warmup, sync))
                    finally:
                        for obj in (ccap, dcap):
                            if obj is not None:
                                obj.close()
                        target.close()
                    med = {k: {v: median(r[v]) for v in ("wall", "step")} for k, r in t.items()}
                    short = fmt_name.replace("GL_DEPTH_COMPONENT", "DEPTH")
                    for p in paths:
                        m = med[p.key]
                        rc, rs = ratio(m["wall"], med["colour"]["wall"]), ratio(m["step"], med["colour"]["step"])
                        report["depth"].append({"format": fmt_name, "size": [w, h], "path": p.key, "name": p.name,
                                                "backend": dbackend, "checks": checks,
                                                "call_wall_us_runs": t[p.key]["wall"], "call_wall_us": m["wall"],
                                                "step_us_runs": t[p.key]["step"], "step_us": m["step"],
                                                "over_colour_call": rc, "over_colour_step": rs})
                        depth_rows.append(["%s %dx%d" % (short, w, h), p.name, fmt_us(m["wall"]), fmt_us(m["step"]),
                                           fmt_ratio(rc), fmt_ratio(rs), p.note])
                        if p.key != "colour":
                            okc = rc <= DEPTH_OVER_COLOUR_MAX
                            oks = rs <= DEPTH_OVER_COLOUR_MAX
                            report["depth_ratios"].append({"format": fmt_name, "path": p.key, "call_ratio": rc,
                                                           "call_pass": okc, "step_ratio": rs, "step_pass": oks,
                                                           "target": "<= %g" % DEPTH_OVER_COLOUR_MAX})
                            depth_ratio_rows.append(["%s %dx%d" % (short, w, h), "%s / colour" % p.key,
                                                     fmt_ratio(rc), verdict(okc), fmt_ratio(rs), verdict(oks),
                                                     "<= %.2fx" % DEPTH_OVER_COLOUR_MAX])
            finally:
                scene.close()
    except CheckFailed as e:
        return check_failed(report, json_path, e)
    finally:
        ctx.close()

    report["status"] = "ok"
    save_json(json_path, report)
    cuda_timers = report["timers"] and "sleep_cycles_per_us" in report["timers"]
    v1 = "GPU us/call (CUDA events)" if cuda_timers else "wall us/call (CPU timers)"
    print_table("Conversions: view (1) = the read (+ torch ops) alone, frame rendered once, %d calls per run; "
                "view (2) = render + read + y.float().mean(), %d steps per run; median of %d runs"
                % (calls, args.steps, args.runs),
                ["config", "path", "what", "(0) kernels us/call", "(1) GPU us/call", "(1) wall us/call", "(2) us/step",
                 "frames/s", "note"],
                conv_rows, left=(0, 1, 2))
    print_table("Targets, judged on view (1) %s; view (0) (kernel and copy time, no switch) and view (2) beside" % v1,
                ["config", "ratio", "view (1)", "target", "verdict", "view (0)", "verdict (0)", "view (2) step"],
                ratio_rows, left=(0, 1))
    print("note: view (0) is the GPU time of the passes over the data (kernels and copies from the profiler's CUDA "
          "activity records, without the GL->CUDA switch, which is a wait): what fusing the conversion saves.")
    print("note: the targets are judged on view (1): in a full step the GL->CUDA switch (~300 us per step on the "
          "H200) dominates, so the full-step ratios approach 1 and say little about the conversion.")
    if not cuda_timers:
        print("note: CPU backend: view (1) is CPU wall time (perf_counter), no CUDA events; "
              "the ratios say nothing about the GPU targets.")
    chain_notes = sorted({r["chain_check"] for r in report["conversion_ratios"] if "chain_check" in r})
    for c in chain_notes:
        print("check: torch chain (/255): %s" % c)
    if args.depth:
        print_table("Depth vs colour, %dx%d, rendered Scene: per call (wall, one sync per %d calls) and per step "
                    "(render + read + float().mean()); median of %d runs" % (args.size, args.size, calls, args.runs),
                    ["image", "path", "wall us/call", "us/step", "vs colour (call)", "vs colour (step)", "note"],
                    depth_rows, left=(0, 1))
        print_table("Depth target: depth <= %.1fx colour" % DEPTH_OVER_COLOUR_MAX,
                    ["image", "ratio", "per call", "verdict", "per step", "verdict", "target"],
                    depth_ratio_rows, left=(0, 1))
        print("note: a depth read() has GL copy the depth into a pixel-pack buffer that CUDA then maps, so in the "
              "per-call loop (no rendering) every depth call puts GL work before its CUDA work (a GL->CUDA switch) "
              "where a colour call need not; in the full step every path follows the render.")
    print("\nJSON: %s" % json_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
