"""Shared machinery of gltensor's benchmarks: the cameras, the compared paths, the machine description.

Used by `python -m gltensor.bench` (the suite) and by the per-issue scripts in benchmarks/. Not part of the
public API: names and signatures may change with the benchmarks.

Every path is a `BenchPath`: `draw(i)` renders step i (N cameras), `transfer()` hands the N frames to torch
and returns the tensor a consumer op then runs on. `reference(cams, path)` says what that tensor must equal
(from glReadPixels), so that every path is checked before it is timed (the method in benchmarks/README.md).
"""
import ctypes
import math
import os
import platform
import socket
import statistics
import subprocess
import sys
import time

os.environ.setdefault("PYOPENGL_PLATFORM", "egl")  # before anything imports OpenGL

import numpy as np  # noqa: E402

GL_TEXTURE_2D = 0x0DE1


class CheckFailed(Exception):
    """A path's output differs from the reference readback."""


class Skip(Exception):
    """A path that cannot run here; the message is the reason."""


def median(values):
    return statistics.median(values)


def time_calls(fn, calls, sync):
    """CPU µs per call of fn(): `calls` calls, one sync before and one at the end."""
    sync()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    sync()
    return (time.perf_counter() - start) / calls * 1e6


def time_steps(draw, transfer, steps, warmup, sync, first=0):
    """µs per step as the method in benchmarks/README.md prescribes: draw(i), then transfer() and the consumer op
    x.float().mean() (the draw alone when transfer is None); `warmup` steps first, one sync at the end of
    the timed loop. Steps are numbered from `first`, so that consecutive calls can draw new frames."""
    if transfer is None:
        step = draw
    else:
        def step(i):
            draw(i)
            transfer().float().mean()
    for i in range(first, first + warmup):
        step(i)
    sync()
    start = time.perf_counter()
    for i in range(first + warmup, first + warmup + steps):
        step(i)
    sync()
    return (time.perf_counter() - start) / steps * 1e6


def fmt_us(v):
    return "-" if v is None else ("%.1f" % v if v < 1000 else "{:,.0f}".format(v))


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
    import argparse
    configs = []
    for item in text.split(","):
        parts = [int(v) for v in item.strip().lower().split("x")]
        if len(parts) == 2:
            parts.append(parts[1])
        if len(parts) != 3 or min(parts) <= 0:
            raise argparse.ArgumentTypeError("expected NxSIZE or NxWxH, e.g. 16x256, got %r" % item)
        configs.append(tuple(parts))
    return configs


def atlas_grid(n):
    """As square as possible: cols = ceil(sqrt(n)), rows = ceil(n / cols)."""
    cols = math.ceil(math.sqrt(n))
    return math.ceil(n / cols), cols


# ---------------------------------------------------------------- output

def print_table(title, header, rows, left=(0,), file=None):
    """rich table on a terminal; plain aligned text in logs and pipes (rich's wrapped cells read worse)."""
    out = file or sys.stdout
    left = set(left) | {len(header) - 1}  # labels and the trailing note read better left-aligned
    try:
        if not out.isatty():
            raise ImportError
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
        print("\n" + title, file=out)
        fmt = "  ".join("{:<%d}" % w if i in left else "{:>%d}" % w for i, w in enumerate(widths))
        print(fmt.format(*header).rstrip(), file=out)
        print("  ".join("-" * w for w in widths), file=out)
        for r in rows:
            print(fmt.format(*[str(v) for v in r]).rstrip(), file=out)
        return
    table = Table(title=title)
    for i, col in enumerate(header):
        table.add_column(col, justify="left" if i in left else "right")
    for r in rows:
        table.add_row(*[str(v) for v in r])
    Console(file=out).print(table)


# ---------------------------------------------------------------- machine description

def machine_info(ctx, torch):
    info = {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "cpu_model": None,
        "gl_vendor": ctx.vendor, "gl_renderer": ctx.renderer, "gl_version": ctx.version,
        "gl_is_software": ctx.is_software, "gl_cuda_device": ctx.cuda_device,
        "numpy": np.__version__,
        "torch": torch.__version__, "torch_cuda": torch.version.cuda,
        "torch_cuda_available": torch.cuda.is_available(),
        "gpu_name": None, "gpu_driver": None, "cuda_driver_api": None, "cuda_bindings": None,
    }
    import gltensor
    info.update(gltensor=gltensor.__version__, gltensor_cuda_compiled=gltensor.cuda_compiled(),
                gltensor_cuda_available=gltensor.cuda_available())
    if not gltensor.cuda_available():
        try:
            info["gltensor_cuda_unavailable_reason"] = gltensor.cuda_unavailable_reason()
        except Exception:
            pass
    try:
        import OpenGL
        info["pyopengl"] = OpenGL.__version__
    except Exception:
        pass
    try:
        with open("/proc/cpuinfo") as f:
            info["cpu_model"] = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), None)
    except OSError:
        pass
    if torch.cuda.is_available():
        info["gpu_name"] = torch.cuda.get_device_name(0)
        try:
            props = torch.cuda.get_device_properties(0)
            info["gpu_memory_bytes"] = props.total_memory
            info["gpu_capability"] = "%d.%d" % (props.major, props.minor)
        except Exception:
            pass
    try:  # the driver version is only told by nvidia-smi (or NVML); absent on CPU-only machines
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        if out.returncode == 0 and out.stdout.strip():
            name, driver = [v.strip() for v in out.stdout.strip().splitlines()[0].split(",", 1)]
            info["gpu_name"] = info["gpu_name"] or name
            info["gpu_driver"] = driver
    except (OSError, subprocess.SubprocessError, ValueError):
        pass
    try:
        import cuda.bindings
        info["cuda_bindings"] = getattr(cuda.bindings, "__version__", "unknown")
        from cuda.bindings import runtime as cudart
        err, v = cudart.cudaDriverGetVersion()
        if err == cudart.cudaError_t.cudaSuccess and v:
            info["cuda_driver_api"] = "%d.%d" % (v // 1000, (v % 1000) // 10)
    except Exception:
        pass
    from importlib import metadata
    for mod, dist in (("matplotlib", "matplotlib"), ("rich", "rich"), ("tqdm", "tqdm"), ("panda3d", "panda3d"),
                      ("cupy", "cupy-cuda13x"), ("cupy", "cupy-cuda12x"), ("cupy", "cupy")):
        if info.get(mod):
            continue
        try:
            info[mod] = metadata.version(dist)
        except Exception:
            info[mod] = None
    return info


# ---------------------------------------------------------------- the cameras

_PATTERN_VS = """
#version 330 core
// Camera k draws vertices 3k..3k+2: one triangle that covers the viewport. The camera index comes from
// gl_VertexID (glDrawArrays' first = 3k counts in it), so a camera costs one draw call and no uniform.
flat out int v_camera;
void main() {
    int k = gl_VertexID / 3;
    int v = gl_VertexID - 3 * k;
    v_camera = k;
    gl_Position = vec4(v == 1 ? 3.0 : -1.0, v == 2 ? 3.0 : -1.0, 0.0, 1.0);
}
"""

_PATTERN_FS = """
#version 330 core
uniform int u_step;
uniform ivec2 u_size;    // one camera's image; atlas tiles start at multiples of it
uniform ivec2 u_corner;  // the bottom-left corner that gets the second colour
flat in int v_camera;
out vec4 o_color;
void main() {
    ivec2 p = ivec2(gl_FragCoord.xy) % u_size;  // the pixel within the camera's image (or atlas tile)
    int r = (u_step + v_camera) % 256;
    // Multiples of 1/255: GL's float -> unorm8 conversion gives these bytes exactly.
    vec4 full = vec4(float(r), 64.0, float((37 * v_camera) % 256), 255.0) / 255.0;
    vec4 corner = vec4(float(255 - r), 204.0, 26.0, 255.0) / 255.0;
    o_color = (p.x < u_corner.x && p.y < u_corner.y) ? corner : full;
}
"""

# What a step draws, per --draw of the suite (and Cameras(draw=...)).
DRAWS = {
    "pattern": "one draw call per camera (an FBO bind, or a viewport for an atlas tile, then a triangle covering the "
               "image): a colour that changes with the step and the camera, and a second colour in the bottom-left "
               "corner (w/2 x h/4), so that a flip, a swapped camera or a stale frame shows",
    "clears": "per camera a full clear and a scissored clear of the bottom-left corner (w/2 x h/4), colours that "
              "change with the step and the camera (7 GL calls per camera)",
    "scene": "the lit demo scene (gltensor.scene: cube, sphere, checkered ground) from camera k, with depth",
}


class Cameras:
    """N render targets (one RGBA8 texture + FBO each) and, when `atlas`, one atlas texture of the same N
    tiles, plus the draw functions of both layouts. Camera k's picture is the same in its own texture and
    in tile k.

    `draw` (see DRAWS): "pattern" (one draw call per camera, the suite's), "clears" (a frame of clears: a clear
    and a scissored clear per camera), "scene" (the lit Scene from camera k). Default: "scene" when
    `use_scene`, else "clears". Calls go through PyOpenGL's raw entry points (no per-call error check), so
    that Python's call overhead stays small next to what is measured."""

    def __init__(self, n, w, h, use_scene=False, atlas=True, draw=None):
        from OpenGL import GL
        from gltensor.scene import RenderTarget, Scene
        draw = draw or ("scene" if use_scene else "clears")
        if draw not in DRAWS:
            raise ValueError("draw must be one of %s, got %r" % (", ".join(DRAWS), draw))
        self.GL, self.n, self.w, self.h, self.draw = GL, n, w, h, draw
        self.targets, self.atlas_target, self.scene, self._pattern = [], None, None, None
        self.rows, self.cols = atlas_grid(n)
        # The bottom-left corner that gets the second colour (clears and pattern); the step only changes red.
        self._corner = (max(w // 2, 1), max(h // 4, 1))
        use_scene = draw == "scene"
        try:
            # Depth only where the lit scene needs it: the clears and the pattern do not.
            self.targets = [RenderTarget(w, h, depth=use_scene) for _ in range(n)]
            if atlas:
                self.atlas_target = RenderTarget(self.cols * w, self.rows * h, depth=use_scene)
            self.scene = Scene(w, h) if use_scene else None  # one program and vertex buffer for all cameras
            if draw == "pattern":
                self._pattern = _PatternProgram(w, h, *self._corner)
        except Exception:
            self.close()
            raise
        # Tile k per docs/python-api.md: the grid anchored at the top-left as seen on screen, tile 0
        # top-left, then left to right, top to bottom. In GL coordinates (origin bottom-left):
        self.tiles = [((k % self.cols) * w, (self.rows - 1 - k // self.cols) * h, w, h) for k in range(n)]
        self.draw_targets = {"scene": self._draw_scene_targets, "clears": self._draw_clear_targets,
                             "pattern": self._draw_pattern_targets}[draw]
        self.draw_atlas = {"scene": self._draw_scene_atlas, "clears": self._draw_clear_atlas,
                           "pattern": self._draw_pattern_atlas}[draw]
        from OpenGL.raw.GL.VERSION import GL_1_0, GL_3_0
        self._raw = (GL_1_0.glScissor, GL_1_0.glClearColor, GL_1_0.glClear, GL_3_0.glBindFramebuffer)
        self._fbos = [t.fbo for t in self.targets]

    @property
    def atlas_size(self):
        return self.cols * self.w, self.rows * self.h

    def _clears(self, i, origins):
        scissor, clear_color, clear, _ = self._raw
        bit = self.GL.GL_COLOR_BUFFER_BIT
        w, h = self.w, self.h
        cw, ch = self._corner
        for k, (x, y) in enumerate(origins):
            r = ((i + k) % 256) / 255.0
            scissor(x, y, w, h)
            clear_color(r, 0.25, ((37 * k) % 256) / 255.0, 1.0)
            clear(bit)
            scissor(x, y, cw, ch)
            clear_color(1.0 - r, 0.8, 0.1, 1.0)
            clear(bit)

    def _draw_clear_targets(self, i):
        GL = self.GL
        scissor, clear_color, clear, bind = self._raw
        bit, fb = GL.GL_COLOR_BUFFER_BIT, GL.GL_FRAMEBUFFER
        w, h = self.w, self.h
        cw, ch = self._corner
        GL.glEnable(GL.GL_SCISSOR_TEST)
        for k, fbo in enumerate(self._fbos):  # inlined _clears: one FBO bind per camera
            bind(fb, fbo)
            r = ((i + k) % 256) / 255.0
            scissor(0, 0, w, h)
            clear_color(r, 0.25, ((37 * k) % 256) / 255.0, 1.0)
            clear(bit)
            scissor(0, 0, cw, ch)
            clear_color(1.0 - r, 0.8, 0.1, 1.0)
            clear(bit)
        GL.glDisable(GL.GL_SCISSOR_TEST)

    def _draw_clear_atlas(self, i):
        GL = self.GL
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, self.atlas_target.fbo)
        GL.glEnable(GL.GL_SCISSOR_TEST)
        self._clears(i, [(x, y) for (x, y, _, _) in self.tiles])
        GL.glDisable(GL.GL_SCISSOR_TEST)

    def _draw_pattern_targets(self, i):
        p = self._pattern
        p.begin(i, (0, 0, self.w, self.h))
        bind, draw, fb, tris = self._raw[3], p.draw_arrays, self.GL.GL_FRAMEBUFFER, self.GL.GL_TRIANGLES
        for k, fbo in enumerate(self._fbos):
            bind(fb, fbo)
            draw(tris, 3 * k, 3)
        p.end()

    def _draw_pattern_atlas(self, i):
        p = self._pattern
        p.begin(i, None)
        self._raw[3](self.GL.GL_FRAMEBUFFER, self.atlas_target.fbo)
        viewport, draw, tris = p.viewport, p.draw_arrays, self.GL.GL_TRIANGLES
        w, h = self.w, self.h
        for k, (x, y, _, _) in enumerate(self.tiles):
            viewport(x, y, w, h)
            draw(tris, 3 * k, 3)
        p.end()

    def _draw_scene_targets(self, i):
        for k, t in enumerate(self.targets):
            self.scene.render((i + k) / 60.0, fbo=t.fbo, viewport=t.viewport, camera=k)

    def _draw_scene_atlas(self, i):
        fbo = self.atlas_target.fbo
        for k, vp in enumerate(self.tiles):
            self.scene.render((i + k) / 60.0, fbo=fbo, viewport=vp, camera=k)

    def reference(self, atlas, flip):
        """Per-camera glReadPixels: (N, H, W, 4), of the camera textures or of the atlas tiles."""
        out = np.empty((self.n, self.h, self.w, 4), np.uint8)
        for k in range(self.n):
            if atlas:
                self.atlas_target.read_pixels(flip=flip, out=out[k], viewport=self.tiles[k])
            else:
                self.targets[k].read_pixels(flip=flip, out=out[k])
        return out

    def close(self):
        for t in self.targets:
            t.close()
        if self.atlas_target is not None:
            self.atlas_target.close()
        if self.scene is not None:
            self.scene.close()
        if self._pattern is not None:
            self._pattern.close()
            self._pattern = None


class _PatternProgram:
    """The "pattern" draw's GL objects: the program (_PATTERN_VS/_FS) and the empty vertex array that a core
    profile needs for an attribute-less draw."""

    def __init__(self, w, h, corner_w, corner_h):
        from OpenGL import GL
        from OpenGL.raw.GL.VERSION import GL_1_0, GL_1_1, GL_2_0, GL_3_0
        from gltensor.scene import _link
        self.GL = GL
        self.program = _link(_PATTERN_VS, _PATTERN_FS)
        self.vao = GL.glGenVertexArrays(1)
        GL.glUseProgram(self.program)
        GL.glUniform2i(GL.glGetUniformLocation(self.program, "u_size"), w, h)
        GL.glUniform2i(GL.glGetUniformLocation(self.program, "u_corner"), corner_w, corner_h)
        GL.glUseProgram(0)
        self._u_step = GL.glGetUniformLocation(self.program, "u_step")
        self._use, self._bind_vao, self._uniform1i = GL_2_0.glUseProgram, GL_3_0.glBindVertexArray, GL_2_0.glUniform1i
        self.viewport, self.draw_arrays = GL_1_0.glViewport, GL_1_1.glDrawArrays

    def begin(self, step, viewport):
        self._use(self.program)
        self._bind_vao(self.vao)
        self._uniform1i(self._u_step, int(step))
        if viewport is not None:
            self.viewport(*viewport)

    def end(self):
        self._bind_vao(0)
        self._use(0)

    def close(self):
        GL = self.GL
        GL.glDeleteVertexArrays(1, [self.vao])
        GL.glDeleteProgram(self.program)


# ---------------------------------------------------------------- the compared paths

class BenchPath:
    """One way of getting the N frames of a step into torch.

    draw(i): render step i; transfer(): the tensor the consumer op runs on; flipped: top row first;
    atlas: the reference is the atlas's tiles; squeeze: transfer() gives one camera's frame without the leading
    camera axis; expect(ref_k): turns camera k's reference readback ((H, W, 4) uint8 torch tensor, on the
    output's device, rows as `flipped` says) into what transfer()[k] must equal (default: ref_k itself);
    skipped: the reason when the path cannot run; close(): releases what the path made."""

    def __init__(self, key, name, draw=None, transfer=None, flipped=True, atlas=False, note="", skipped=None,
                 close=None, expect=None, squeeze=False):
        self.key, self.name, self.draw, self.transfer, self.flipped = key, name, draw, transfer, flipped
        self.atlas, self.note, self.skipped, self.close = atlas, note, skipped, close
        self.expect, self.squeeze = expect, squeeze


def torch_stream_arg(torch):
    """stream= for gltensor that names torch's current stream. Handle 0 (torch's default stream) is
    passed as 1 (cudaStreamLegacy, the same stream): gltensor reads stream=0 as 'no stream given' and
    would copy on its own non-blocking stream, which the consumer op is not ordered after."""
    handle = torch.cuda.current_stream().cuda_stream
    return handle if handle else 1


def cuda_python_recipe(textures, w, h, torch, cuda_in_use):
    """The per-frame recipe users write with cuda-python today (the Panda3D forum recipe): each texture
    registered once (cudaGraphicsGLRegisterImage); per camera per step cudaGraphicsMapResources,
    cudaGraphicsSubResourceGetMappedArray, cudaMemcpy2DFromArrayAsync into slice k of a torch batch,
    cudaGraphicsUnmapResources, all on torch's stream. GL's bottom-up rows.

    Returns (transfer, close); transfer() returns the (N, H, W, 4) CUDA batch. Raises Skip(reason)."""
    if not cuda_in_use:
        raise Skip("the GL context is not on a CUDA device (CUDA interop impossible)")
    try:
        from cuda.bindings import runtime as cudart
    except ImportError as e:
        raise Skip("cuda-python not installed: cuda.bindings not importable (%s)" % e)

    def check(result, call):
        err = result[0]
        if err != cudart.cudaError_t.cudaSuccess:
            raise RuntimeError("%s failed: %s" % (call, err))
        return result[1] if len(result) > 1 else None

    flags = cudart.cudaGraphicsRegisterFlags.cudaGraphicsRegisterFlagsReadOnly
    resources = []
    try:  # each texture registered once, up front
        for tex in textures:
            resources.append(check(cudart.cudaGraphicsGLRegisterImage(tex, GL_TEXTURE_2D, flags),
                                   "cudaGraphicsGLRegisterImage"))
    except RuntimeError as e:
        for r in resources:
            cudart.cudaGraphicsUnregisterResource(r)
        raise Skip(str(e))
    n = len(textures)
    out = torch.empty((n, h, w, 4), dtype=torch.uint8, device="cuda")
    image = w * h * 4
    ptrs = [out.data_ptr() + k * image for k in range(n)]
    d2d = cudart.cudaMemcpyKind.cudaMemcpyDeviceToDevice
    map_, get, copy, unmap = (cudart.cudaGraphicsMapResources, cudart.cudaGraphicsSubResourceGetMappedArray,
                              cudart.cudaMemcpy2DFromArrayAsync, cudart.cudaGraphicsUnmapResources)

    def transfer():
        # On torch's stream, so that the consumer op that follows is ordered after the copies.
        stream = torch.cuda.current_stream().cuda_stream
        for res, ptr in zip(resources, ptrs):
            check(map_(1, res, stream), "cudaGraphicsMapResources")
            array = check(get(res, 0, 0), "cudaGraphicsSubResourceGetMappedArray")
            check(copy(ptr, w * 4, array, 0, 0, w * 4, h, d2d, stream), "cudaMemcpy2DFromArrayAsync")
            check(unmap(1, res, stream), "cudaGraphicsUnmapResources")
        return out

    def close():
        torch.cuda.synchronize()
        for r in resources:
            cudart.cudaGraphicsUnregisterResource(r)

    return transfer, close


def cpu_round_trip(fbos, w, h, torch, to_cuda):
    """glReadPixels (PyOpenGL, into a new numpy array) per camera -> torch.from_numpy -> .cuda(): what most
    simulator code does today. Returns transfer() giving (N, H, W, 4), GL's bottom-up rows."""
    from OpenGL import GL
    n = len(fbos)

    def transfer():
        host = np.empty((n, h, w, 4), np.uint8)
        GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 1)
        for k, fbo in enumerate(fbos):
            GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, fbo)
            GL.glReadPixels(0, 0, w, h, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE, host[k])
        x = torch.from_numpy(host)
        return x.cuda() if to_cuda else x

    return transfer


def cpu_round_trip_as_usually_written(fbos, w, h, torch, to_cuda):
    """The trip as simulator code usually writes it: PyOpenGL's glReadPixels returning a new buffer per camera,
    rows flipped upright with NumPy (np.flipud + np.ascontiguousarray, since torch refuses negative strides),
    torch.from_numpy(...).cuda(), np.stack-ed into one batch for several cameras. Gives (N, H, W, 4) upright,
    the same image gltensor's paths give."""
    from OpenGL import GL

    def transfer():
        GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 1)
        imgs = []
        for fbo in fbos:
            GL.glBindFramebuffer(GL.GL_READ_FRAMEBUFFER, fbo)
            data = GL.glReadPixels(0, 0, w, h, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE)
            imgs.append(np.ascontiguousarray(np.flipud(np.frombuffer(data, np.uint8).reshape(h, w, 4))))
        # One camera: no np.stack (its copy is not what single-camera code pays); [None] is a view.
        x = torch.from_numpy(np.stack(imgs) if len(imgs) > 1 else imgs[0][None])
        return x.cuda() if to_cuda else x

    return transfer


def pinned_pbo_round_trip(fbos, w, h, torch, to_cuda):
    """glReadPixels per camera into one GL_PIXEL_PACK_BUFFER, glMapBufferRange, one memcpy into a pinned
    torch tensor (torch.empty(..., pin_memory=True)), then .cuda(non_blocking=True): the careful CPU round
    trip. Two pinned buffers alternate, each guarded by a CUDA event, so that a step never overwrites host
    memory an earlier upload still reads. Without CUDA: the same into plain host memory, no upload.
    Returns (transfer, close); transfer() gives (N, H, W, 4), GL's bottom-up rows."""
    from OpenGL import GL
    from OpenGL.raw.GL.VERSION import GL_1_0, GL_1_5, GL_3_0
    n = len(fbos)
    image = w * h * 4
    nbytes = n * image
    pbo = int(GL.glGenBuffers(1))
    GL.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, pbo)
    GL.glBufferData(GL.GL_PIXEL_PACK_BUFFER, nbytes, None, GL.GL_STREAM_READ)
    GL.glBindBuffer(GL.GL_PIXEL_PACK_BUFFER, 0)
    host = [torch.empty((n, h, w, 4), dtype=torch.uint8, pin_memory=to_cuda) for _ in range(2 if to_cuda else 1)]
    events = [None] * len(host)
    state = [0]
    read, bind_fb = GL_1_0.glReadPixels, GL_3_0.glBindFramebuffer
    bind_buf, map_range, unmap = GL_1_5.glBindBuffer, GL_3_0.glMapBufferRange, GL_1_5.glUnmapBuffer
    PACK, READ_FB, RGBA, UBYTE = GL.GL_PIXEL_PACK_BUFFER, GL.GL_READ_FRAMEBUFFER, GL.GL_RGBA, GL.GL_UNSIGNED_BYTE
    offsets = [ctypes.c_void_p(k * image) for k in range(n)]

    def transfer():
        GL.glPixelStorei(GL.GL_PACK_ALIGNMENT, 1)
        bind_buf(PACK, pbo)
        for fbo, off in zip(fbos, offsets):
            bind_fb(READ_FB, fbo)
            read(0, 0, w, h, RGBA, UBYTE, off)
        ptr = map_range(PACK, 0, nbytes, GL.GL_MAP_READ_BIT)
        if not ptr:
            bind_buf(PACK, 0)
            raise RuntimeError("glMapBufferRange(GL_PIXEL_PACK_BUFFER) returned NULL (GL error 0x%x)"
                               % GL.glGetError())
        j = state[0]
        state[0] = (j + 1) % len(host)
        if events[j] is not None:
            events[j].synchronize()  # the upload that last read this pinned buffer is done
        ctypes.memmove(host[j].data_ptr(), ptr, nbytes)
        unmap(PACK)
        bind_buf(PACK, 0)
        if not to_cuda:
            return host[j]
        x = host[j].cuda(non_blocking=True)
        ev = torch.cuda.Event()
        ev.record()
        events[j] = ev
        return x

    def close():
        if to_cuda:
            torch.cuda.synchronize()
        GL.glDeleteBuffers(1, [pbo])

    return transfer, close


# ---------------------------------------------------------------- Panda3D

def panda3d_available():
    """None when panda3d can be imported, else the reason it cannot."""
    try:
        import panda3d.core  # noqa: F401  (import check only)
    except ImportError as e:
        return "panda3d not installed (pip install panda3d): %s" % e
    except Exception as e:  # a broken install
        return "panda3d cannot be imported: %s: %s" % (type(e).__name__, e)
    return None


def _u8(v):
    return int(v) % 256


class Panda3DCameras:
    """N offscreen Panda3D buffers (FBOs hosted by one small buffer kept for the process, as a window hosts them
    in a ShowBase program), each rendering into a texture kept in RAM (RTMCopyRam), drawn the
    way the suite's "clears" draw does: a full clear and a clear of the bottom-left corner (display regions with
    clear colours), colours that change with the step and the camera. Panda3D runs its own GL context, made
    current before each Panda3D frame; the caller's is made current again by `restore` after it.

    transfer(): per camera tex.getRamImage() -> numpy -> torch.from_numpy -> .cuda(), then BGRA -> RGBA on
    the device (Panda3D keeps RAM images as BGRA). Rows bottom-up as Panda3D keeps them.
    reference(i): the exact picture of step i, computed from the clear colours (colours are multiples of
    1/255, so GL's float -> unorm8 conversion is exact)."""

    _engine = None  # one Panda3D graphics engine and pipe per process

    def __init__(self, n, w, h, torch, to_cuda, restore):
        from panda3d import core as p3
        self.p3, self.n, self.w, self.h, self.torch, self.to_cuda, self.restore = p3, n, w, h, torch, to_cuda, restore
        if Panda3DCameras._engine is None:
            p3.loadPrcFileData("gltensor-bench", "window-type offscreen\naudio-library-name null\n"
                                                 "load-display p3headlessgl\nsync-video false\n")
            pipe = p3.GraphicsPipeSelection.get_global_ptr().make_module_pipe("p3headlessgl")
            if pipe is None:
                pipe = p3.GraphicsPipeSelection.get_global_ptr().make_default_pipe()
            if pipe is None:
                raise Skip("panda3d: no graphics pipe (p3headlessgl) could be made")
            # One small buffer hosts the cameras' buffers for the whole process, as a ShowBase window hosts
            # makeTextureBuffer's: the cameras' buffers are FBOs of its GL context, made and removed per cell
            # while the context stays. (Standalone buffers, each with its own context, made after earlier ones
            # were removed, set off GL errors in Panda3D on NVIDIA.)
            engine = p3.GraphicsEngine.get_global_ptr()
            hfbp = p3.FrameBufferProperties()
            hfbp.set_rgba_bits(8, 8, 8, 8)
            host = engine.make_output(pipe, "gltensor-bench-host", -100, hfbp, p3.WindowProperties.size(16, 16),
                                      p3.GraphicsPipe.BF_refuse_window)
            if host is None:
                raise Skip("panda3d: could not make an offscreen host buffer")
            engine.open_windows()
            Panda3DCameras._engine = (engine, pipe, host)
        self.engine, self.pipe, self.host = Panda3DCameras._engine
        import warnings  # the RAM image is read-only; torch only reads it (then copies it with .cuda())
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        self.buffers, self.textures, self.regions, self.panda_gl = [], [], [], None
        fbp = p3.FrameBufferProperties()
        fbp.set_rgba_bits(8, 8, 8, 8)
        fbp.set_depth_bits(0)
        props = p3.WindowProperties.size(w, h)
        flags = p3.GraphicsPipe.BF_refuse_window | p3.GraphicsPipe.BF_refuse_parasite
        self.render_np = p3.NodePath("gltensor-bench-empty")
        try:
            for k in range(n):
                buf = self.engine.make_output(self.pipe, "gltensor-bench-%d" % k, 0, fbp, props, flags,
                                              self.host.get_gsg(), self.host)
                if buf is None:
                    raise Skip("panda3d: could not make an offscreen buffer of %dx%d" % (w, h))
                tex = p3.Texture("cam%d" % k)
                buf.add_render_texture(tex, p3.GraphicsOutput.RTM_copy_ram)
                buf.set_clear_color_active(True)
                full = buf.get_display_region(0) if buf.get_num_display_regions() else buf.make_display_region()
                corner = buf.make_display_region(0, 0.5, 0, 0.25)
                for dr in (full, corner):
                    cam = p3.Camera("cam%d" % k)
                    dr.set_camera(self.render_np.attach_new_node(cam))
                    dr.set_clear_color_active(True)
                self.buffers.append(buf)
                self.textures.append(tex)
                self.regions.append((full, corner))
            self.engine.open_windows()
            # Panda3D's context is current after a frame (each buffer's begin_frame makes it current). It is
            # made current again before each later frame: Panda issues some GL calls outside begin_frame (frame
            # start), which would otherwise land in the suite's context (NVIDIA then reports GL errors).
            self.engine.render_frame()
            from gltensor.panda3d import _GLState
            self.panda_gl = _GLState.current()
            self.restore()
            mine = _GLState.current()
            if self.panda_gl is not None and mine is not None and self.panda_gl.handles[3] == mine.handles[3]:
                self.panda_gl = None  # Panda3D drew in the suite's context: nothing to switch to
        except Exception:
            self.close()
            raise
        self.corner_px = None

    def _colours(self, i, k):
        r = (i + k) % 256
        return (r, 64, (37 * k) % 256, 255), (255 - r, 204, 26, 255)

    def draw(self, i):
        p3 = self.p3
        for k, (full, corner) in enumerate(self.regions):
            c1, c2 = self._colours(i, k)
            self.buffers[k].set_clear_color(p3.LColor(*(c / 255.0 for c in c1)))
            full.set_clear_color(p3.LColor(*(c / 255.0 for c in c1)))
            corner.set_clear_color(p3.LColor(*(c / 255.0 for c in c2)))
        if self.panda_gl is not None:
            self.panda_gl.make_current()
        self.engine.render_frame()
        self.restore()

    def transfer(self):
        torch = self.torch
        frames = []
        for tex in self.textures:
            img = tex.get_ram_image()
            c = tex.get_num_components()
            x = torch.from_numpy(np.frombuffer(memoryview(img), np.uint8).reshape(self.h, self.w, c))
            frames.append(x.cuda() if self.to_cuda else x)
        x = torch.stack(frames) if len(frames) > 1 else frames[0].unsqueeze(0)
        return x[..., [2, 1, 0, 3]] if x.shape[-1] == 4 else x[..., [2, 1, 0]]

    def reference(self, i):
        """(N, H, W, 4) RGBA, bottom-up rows, of step i."""
        out = np.empty((self.n, self.h, self.w, 4), np.uint8)
        for k, (full, corner) in enumerate(self.regions):
            c1, c2 = self._colours(i, k)
            out[k] = c1
            # The corner region's left and bottom are 0; rows here are bottom-up like Panda3D's RAM image.
            cw, ch = corner.get_pixel_width(), corner.get_pixel_height()
            out[k, :ch, :cw] = c2
        return out

    def close(self):
        for buf in self.buffers:
            buf.clear_render_textures()
            self.engine.remove_window(buf)
        self.buffers, self.textures, self.regions = [], [], []
        try:
            if self.panda_gl is not None:
                self.panda_gl.make_current()
            self.engine.render_frame()  # lets Panda3D release the buffers' GL objects
        except Exception:
            pass
        self.restore()
