"""The command-line pieces the modes share: parsers of sizes, camera counts and configurations, and the options
and start of the fixed-step modes (single, batch, convert)."""
import argparse
import sys

from .report import machine_info, results_path, save_json


def parse_sizes(text):
    """'84,1920x1080' -> [(84, 84), (1920, 1080)] (N or WxH)."""
    sizes = []
    for item in str(text).split(","):
        item = item.strip().lower()
        if not item:
            continue
        w, _, h = item.partition("x")
        try:
            w, h = int(w), int(h or w)
        except ValueError:
            raise ValueError("expected N or WxH, e.g. 256 or 1920x1080, got %r" % item)
        if w <= 0 or h <= 0:
            raise ValueError("sizes must be positive, got %r" % item)
        sizes.append((w, h))
    if not sizes:
        raise ValueError("no size given")
    return sizes


def parse_configs(text):
    """'16x256,64x128' -> [(16, 256, 256), (64, 128, 128)]; NxWxH for non-square images."""
    configs = []
    for item in text.split(","):
        parts = [int(v) for v in item.strip().lower().split("x")]
        if len(parts) == 2:
            parts.append(parts[1])
        if len(parts) != 3 or min(parts) <= 0:
            raise argparse.ArgumentTypeError("expected NxSIZE or NxWxH, e.g. 16x256, got %r" % item)
        configs.append(tuple(parts))
    return configs


def parse_cameras(text):
    out = []
    for item in str(text).split(","):
        item = item.strip()
        if item:
            v = int(item)
            if v <= 0:
                raise ValueError("camera counts must be positive")
            out.append(v)
    if not out:
        raise ValueError("no camera count given")
    return out


def arg(parse):
    """An argparse type of parse(): its ValueError becomes a usage error with the message."""
    def f(text):
        try:
            return parse(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e))
    return f


def settle_timing_args(ap, args):
    """The adaptive modes' (grid, upload) timing options: --runs and --min-steps positive (a usage error
    otherwise), --warmup at least 10 (the method)."""
    if args.runs < 1 or args.min_steps < 1:
        ap.error("--runs and --min-steps must be positive")
    args.warmup = max(args.warmup, 10)


def add_run_args(ap, kind, warmup_what="steps"):
    """The options every fixed-step mode shares: --steps, --warmup, --runs, --backend, --torch-threads, --json.
    Mode-specific options go before or after; open_run() reads these."""
    ap.add_argument("--steps", type=int, default=200, help="timed steps per run (the method: >= 200)")
    ap.add_argument("--warmup", type=int, default=10, help="warm-up %s before each run (at least 10)" % warmup_what)
    ap.add_argument("--runs", type=int, default=3, help="runs per path; the median is reported")
    ap.add_argument("--backend", choices=("auto", "cuda", "cpu"), default="auto")
    ap.add_argument("--torch-threads", type=int, default=0,
                    help="torch.set_num_threads(N) first; 0 leaves torch's default. On a CPU-only machine "
                         "with llvmpipe, 1 keeps torch's spinning OpenMP workers from starving the renderer")
    ap.add_argument("--json", help="output file (default ~/.cache/gltensor/bench/%s_<host>.json)" % kind)


def open_run(kind, args):
    """The start every fixed-step mode shares: torch (with --torch-threads), a headless GL context, the
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
    json_path = results_path(kind, info["host"], args.json)
    return torch, ctx, info, json_path




def print_start(ctx, torch, info):
    """The first line of a fixed-step mode's output: what renders, what torch, what GPU."""
    print("GL: %s | %s | torch %s | GPU: %s" % (ctx.renderer, ctx.version, torch.__version__,
                                                info["gpu_name"] or "none"))


def gl_torch_sync(torch):
    """sync() for the end of a timed loop: glFinish, then torch's device when it has one."""
    from OpenGL import GL

    def sync():
        GL.glFinish()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    return sync


def check_failed(report, json_path, e):
    """A path's check failed: say so, keep the report with that status, exit status 1 (the method)."""
    print("FAIL: %s" % e, file=sys.stderr)
    report["status"] = "check failed: %s" % e
    save_json(json_path, report)
    return 1


def paths_and_visuals(ap, args, known):
    """The --paths and --visuals lists of a pixel-RL mode (mujoco, torchrl), checked: an unknown path or visuals
    value is a usage error naming what is known."""
    args.paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    unknown = [p for p in args.paths if p not in known]
    if unknown:
        ap.error("unknown paths %s (known: %s)" % (unknown, ", ".join(known)))
    visuals = [v.strip() for v in args.visuals.split(",") if v.strip()]
    if not visuals or any(v not in ("default", "light") for v in visuals):
        ap.error("--visuals takes default and/or light")
    return visuals
