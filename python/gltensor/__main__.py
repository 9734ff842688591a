"""Demo: render a scene headlessly, capture every frame into a tensor, consume it, report the rate.

    python -m gltensor [--size 512x512] [--frames 300] [--backend auto|cuda|cpu] [--out frame.png]
    python -m gltensor doctor [--json]      # what this machine gives gltensor, and how to fix what it lacks

The first frame is checked byte for byte against glReadPixels before anything is timed: a fast
capture of the wrong pixels is worth nothing.
"""
import argparse
import os
import struct
import sys
import time
import zlib

os.environ.setdefault("PYOPENGL_PLATFORM", "egl")  # before anything imports OpenGL

try:  # the demo draws with PyOpenGL and checks with numpy (gltensor[demo]); the doctor needs neither
    import numpy as np
except ImportError:
    np = None
try:  # a progress bar is a nicety: the demo runs without tqdm
    from tqdm import tqdm
except ImportError:
    def tqdm(iterable, **_):
        return iterable

import gltensor  # noqa: E402


# No GL driver allocates images beyond 32768 pixels a side; the context's own limit is checked once it exists.
MAX_SIDE = 32768


def _parse_size(text):
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError("expected WIDTHxHEIGHT, e.g. 512x512, got %r" % text)
    if not (0 < w <= MAX_SIDE and 0 < h <= MAX_SIDE):
        raise argparse.ArgumentTypeError("width and height must be 1 to %d, got %dx%d" % (MAX_SIDE, w, h))
    return w, h


def _count(what):
    def parse(text):
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError("%s must be an int, got %r" % (what, text))
        if n < 0:
            raise argparse.ArgumentTypeError("%s must be >= 0, got %d" % (what, n))
        return n
    return parse


def _consumer_lib():
    """torch when importable (the framework most users hand frames to), else numpy."""
    try:
        import torch
        return "torch", torch
    except ImportError:
        return "numpy", None


def _wrap(frame, torch):
    """The zero-copy hand-off a training loop does: DLPack into the framework."""
    if torch is not None:
        return torch.from_dlpack(frame)
    if frame.device != "cpu":
        raise SystemExit("error: a CUDA frame needs torch (or another CUDA framework) to consume it")
    try:
        return np.from_dlpack(frame)
    except (AttributeError, TypeError, BufferError):
        return np.asarray(frame)  # older numpy: __array_interface__


def _consume(x, torch):
    """The consumer op: a reduction that touches every byte, on the frame's device."""
    return x.float().mean() if torch is not None else x.astype(np.float32).mean()


def _to_host(x):
    """A numpy copy of a wrapped frame, wherever it lives."""
    if hasattr(x, "cpu"):  # torch tensor, CPU or CUDA
        return x.cpu().numpy().copy()
    return np.array(x, copy=True)


def _write_png(path, rgba):
    """Minimal RGBA8 PNG writer (filter 0 on every row), for when pillow is missing."""
    h, w, _ = rgba.shape
    raw = b"".join(b"\x00" + rgba[y].tobytes() for y in range(h))

    def chunk(kind, data):
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", w, h, 8, 6, 0, 0, 0)  # 8 bits per channel, colour type 6 = RGBA
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 6))
                + chunk(b"IEND", b""))


def _save_png(path, rgba):
    try:
        from PIL import Image
    except ImportError:
        _write_png(path, rgba)
        return "zlib writer"
    Image.fromarray(rgba, "RGBA").save(path)
    return "pillow"


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["doctor"]:
        from gltensor.doctor import main as doctor
        return doctor(argv[1:])
    if np is None:
        print("error: the demo needs numpy and PyOpenGL: pip install 'gltensor[demo]' "
              "(`python -m gltensor doctor` runs without them)", file=sys.stderr)
        return 2
    parser = argparse.ArgumentParser(prog="python -m gltensor", description=__doc__.split("\n")[0],
                                     epilog="python -m gltensor doctor [--json]: diagnose this machine")
    parser.add_argument("--size", type=_parse_size, default=(512, 512), help="WIDTHxHEIGHT (default 512x512)")
    parser.add_argument("--frames", type=_count("--frames"), default=300,
                        help="frames to time (default 300; 0: only check and save one frame)")
    parser.add_argument("--backend", choices=("auto", "cuda", "cpu"), default="auto")
    parser.add_argument("--camera", type=_count("--camera"), default=0, help="camera index of the scene")
    parser.add_argument("--out", default="frame.png", help="where to save one captured frame (PNG)")
    args = parser.parse_args(argv)

    from gltensor.scene import Scene  # imports OpenGL, after the platform was chosen above

    from OpenGL import GL, error as gl_error

    lib, torch = _consumer_lib()
    try:
        with gltensor.Context.headless() as ctx:
            limit = min(int(GL.glGetIntegerv(GL.GL_MAX_TEXTURE_SIZE)), int(GL.glGetIntegerv(GL.GL_MAX_RENDERBUFFER_SIZE)))
            if max(args.size) > limit:
                print("error: --size %dx%d: this GL (%s) allocates images of at most %d pixels a side; pick a "
                      "smaller --size" % (*args.size, ctx.renderer, limit), file=sys.stderr)
                return 2
            try:
                scene = Scene(*args.size, camera=args.camera)
            except (gl_error.GLError, MemoryError) as e:
                print("error: --size %dx%d: the scene's images could not be allocated (%s); pick a smaller --size"
                      % (*args.size, getattr(e, "description", None) or type(e).__name__), file=sys.stderr)
                return 2
            with scene, gltensor.Capture(scene.texture, gltensor.GL_TEXTURE_2D, backend=args.backend) as cap:
                # Scene and capture close before the context (with exits in reverse order), as GL needs.
                return _run(args, ctx, scene, cap, lib, torch)
    except gltensor.GLTensorError as e:
        print("error: %s: %s" % (type(e).__name__, e), file=sys.stderr)
        return 2


def _run(args, ctx, scene, cap, lib, torch):
    width, height = args.size
    print("gltensor %s | GL: %s (%s) | consumer: %s" % (gltensor.__version__, ctx.renderer, ctx.version, lib))
    print("backend: %s (%s)" % (cap.backend, cap.backend_reason))
    cuda = cap.backend == "cuda"
    if torch is not None and not cuda and ctx.is_software and torch.get_num_threads() > 1:
        # llvmpipe rasterises on every core; torch's OpenMP workers spin after each op and
        # starve it (10x slower steps on 2 cores). One torch thread is the fair CPU-only setup.
        torch.set_num_threads(1)
        print("note: CPU frames on a software renderer: torch.set_num_threads(1)")

    # Correctness first: the captured frame must be exactly what glReadPixels returns.
    scene.render(0.25)
    captured = _to_host(_wrap(cap.read(), torch))
    reference = scene.read_pixels()
    if captured.shape != reference.shape or not np.array_equal(captured, reference):
        bad = np.argwhere(captured != reference) if captured.shape == reference.shape else []
        where = "first difference at (y, x, c) = %s" % (tuple(bad[0]),) if len(bad) else "shape differs"
        print("FAIL: captured frame %s != glReadPixels %s: %d bytes differ, %s"
              % (captured.shape, reference.shape, len(bad), where), file=sys.stderr)
        return 1
    print("check: captured frame equals glReadPixels exactly (%dx%d RGBA8, top row first)" % (width, height))
    how = _save_png(args.out, captured)
    print("saved %s (%s)" % (args.out, how))
    if args.frames <= 0:
        return 0

    # The loop a training step runs: render, hand over, consume. Sync once, at the end.
    for i in range(10):  # warm-up: first-use allocations, shader caches
        scene.render(i / 60.0)
        _consume(_wrap(cap.read(), torch), torch)
    if cuda:
        torch.cuda.synchronize()
    start = time.perf_counter()
    for i in tqdm(range(args.frames), desc="frames", unit="f", leave=False, disable=None):
        scene.render(i / 60.0)
        y = _consume(_wrap(cap.read(), torch), torch)
    if cuda:
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    n = args.frames
    print("%d frames of %dx%d: %.1f frames/s, %.1f us/frame (render + read + %s consumer op)"
          % (n, width, height, n / elapsed, elapsed / n * 1e6, lib))
    print("last frame mean: %.3f" % float(y))
    return 0


if __name__ == "__main__":
    sys.exit(main())
