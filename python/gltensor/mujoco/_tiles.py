"""The tile sheet of gltensor.mujoco.BatchRenderer: single-sample renderbuffers holding n tiles, filled from
MuJoCo's offscreen buffer one env at a time (its samples copied into a multisampled sheet that is resolved once,
or, without glCopyImageSubData, a resolve per env; see TileSheet).

Why a sheet and a resolve per env rather than n viewports of one big multisampled buffer: the GPU's rasteriser
does not give bit-equal pixels for the same triangles drawn at another window position (the viewport transform
and the attribute interpolation are evaluated in floating point relative to the window origin; Mesa llvmpipe
and NVIDIA both differ by a few units, and a shadow-map comparison or a multisample coverage decision that
flips turns that into tens). ``mujoco.Renderer`` always draws at (0, 0); drawing every env there too and
copying its resolved pixels into tile k keeps each tile bit-equal to ``Renderer.render()``.

GL entry points come from PyOpenGL, which MuJoCo's EGL and OSMesa contexts import already.
"""

from __future__ import annotations

import math

import numpy as np

import gltensor
from gltensor._gltensor import _copy_samples, _copy_tile, _copy_tiles


def _gl():
    try:
        from OpenGL import GL  # type: ignore
    except Exception as exc:  # pragma: no cover - PyOpenGL comes with MuJoCo's EGL/OSMesa back ends
        raise ImportError("gltensor.mujoco.BatchRenderer needs PyOpenGL (pip install PyOpenGL), as MuJoCo's "
                          "EGL back end does") from exc
    return GL


def _has_copy_image() -> bool:
    """Whether the current GL context has glCopyImageSubData (GL 4.3 core, or ARB_copy_image)."""
    GL = _gl()
    try:
        major = int(GL.glGetIntegerv(GL.GL_MAJOR_VERSION))
        minor = int(GL.glGetIntegerv(GL.GL_MINOR_VERSION))
    except Exception:  # pragma: no cover - a GL before 3.0 has no version integers
        return False
    if (major, minor) >= (4, 3):
        return True
    count = int(GL.glGetIntegerv(GL.GL_NUM_EXTENSIONS))
    return any(GL.glGetStringi(GL.GL_EXTENSIONS, i) == b"GL_ARB_copy_image" for i in range(count))


def max_sizes():
    """(max width, max height) of a renderbuffer / viewport in the current GL context."""
    GL = _gl()
    size = int(GL.glGetIntegerv(GL.GL_MAX_RENDERBUFFER_SIZE))
    dims = [int(v) for v in np.asarray(GL.glGetIntegerv(GL.GL_MAX_VIEWPORT_DIMS)).ravel()]
    return min(size, dims[0]), min(size, dims[1])


def grid_shape(n: int, height: int, width: int, max_width: int, max_height: int):
    """(rows, cols) of a near-square grid of n tiles that fits max_width x max_height, or None if none does."""
    if width > max_width or height > max_height:
        return None
    max_cols = max_width // width
    cols = min(n, max_cols, max(1, math.ceil(math.sqrt(n * height / width))))
    rows = math.ceil(n / cols)
    if rows * height > max_height:  # widen until it fits
        cols = min(n, max_cols)
        rows = math.ceil(n / cols)
        if rows * height > max_height:
            return None
    return rows, cols


class TileSheet:
    """A framebuffer with one single-sample renderbuffer of ``width x height`` in the current GL context, of the
    internal format of ``like`` (MuJoCo's offColor / offDepthStencil: a depth blit needs equal formats, and an
    equal colour format keeps the resolve a copy), else RGBA8 / DEPTH32F_STENCIL8.

    How a tile gets there (``sample_copy``): with glCopyImageSubData (GL 4.3), every sample of the env's draw is
    copied as it is into its tile of a second, multisampled sheet of ``like``'s format and sample count, and the
    whole sheet is resolved once, in one blit, after the last env (``finish``). A resolve is each pixel's own
    samples averaged, wherever the pixel lies, so every tile is the same as from a resolve per env; what goes away
    are the two framebuffer switches and the blit between one env's draw and the next's (14 of a tile's 46 µs on
    an H100 host, benchmarks/results/mujoco_tile_profile_h100.json). Without the entry point, or where the driver
    gives the multisampled sheet another sample count than ``like`` has (a copy needs equal counts), each env is
    resolved into its tile right after its draw (``resolve_into``)."""

    def __init__(self, width: int, height: int, depth: bool, like: int = 0, sample_copy: bool = True):
        GL = self._GL = _gl()
        self.width, self.height, self.depth = int(width), int(height), bool(depth)
        self.msaa_fbo = self.msaa_rb = 0
        self.like = int(like)
        self.samples_copied = False  # True: copy_into + finish; False: resolve_into per env
        self.fbo = int(GL.glGenFramebuffers(1))
        self.rb = int(GL.glGenRenderbuffers(1))
        fmt = GL.GL_DEPTH32F_STENCIL8 if self.depth else GL.GL_RGBA8
        if like:  # the format of the renderbuffer resolved into (a depth blit needs equal depth formats)
            GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, like)
            fmt = int(GL.glGetRenderbufferParameteriv(GL.GL_RENDERBUFFER, GL.GL_RENDERBUFFER_INTERNAL_FORMAT))
        self.format = fmt
        GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, self.rb)
        GL.glRenderbufferStorage(GL.GL_RENDERBUFFER, fmt, self.width, self.height)
        GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, 0)
        status = self._attach(self.fbo, self.rb)
        if status != int(GL.GL_FRAMEBUFFER_COMPLETE):
            self.close()
            raise gltensor.GLError(f"BatchRenderer: the {width}x{height} tile sheet's framebuffer is incomplete "
                                   f"(status 0x{status:04x}); try fewer or smaller tiles")
        if sample_copy and like and _has_copy_image():
            self._make_sample_sheet(fmt)

    def _attach(self, fbo: int, rb: int) -> int:
        """Renderbuffer rb attached to framebuffer fbo (colour, or depth-stencil for a depth sheet); its status."""
        GL = self._GL
        previous = int(GL.glGetIntegerv(GL.GL_DRAW_FRAMEBUFFER_BINDING))
        GL.glBindFramebuffer(GL.GL_DRAW_FRAMEBUFFER, fbo)
        attach = GL.GL_DEPTH_STENCIL_ATTACHMENT if self.depth else GL.GL_COLOR_ATTACHMENT0
        GL.glFramebufferRenderbuffer(GL.GL_DRAW_FRAMEBUFFER, attach, GL.GL_RENDERBUFFER, rb)
        status = int(GL.glCheckFramebufferStatus(GL.GL_DRAW_FRAMEBUFFER))
        GL.glBindFramebuffer(GL.GL_DRAW_FRAMEBUFFER, previous)
        return status

    def _make_sample_sheet(self, fmt: int) -> None:
        """The multisampled sheet that copy_into fills, where the driver makes it with like's sample count (a
        sample copy needs equal counts) and memory allows; else none, and each env is resolved on its own."""
        GL = self._GL
        GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, self.like)
        samples = int(GL.glGetRenderbufferParameteriv(GL.GL_RENDERBUFFER, GL.GL_RENDERBUFFER_SAMPLES))
        if samples == 0:  # a single-sample source (vis.quality.offsamples = 0): copied straight into the sheet
            GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, 0)
            self.samples_copied = self._copy_works()
            return
        self.msaa_rb = int(GL.glGenRenderbuffers(1))
        GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, self.msaa_rb)
        try:
            GL.glRenderbufferStorageMultisample(GL.GL_RENDERBUFFER, samples, fmt, self.width, self.height)
            got = int(GL.glGetRenderbufferParameteriv(GL.GL_RENDERBUFFER, GL.GL_RENDERBUFFER_SAMPLES))
        except GL.GLError:  # e.g. GL_OUT_OF_MEMORY for a big sheet
            got = -1
        GL.glBindRenderbuffer(GL.GL_RENDERBUFFER, 0)
        if got == samples:
            self.msaa_fbo = int(GL.glGenFramebuffers(1))
            if self._attach(self.msaa_fbo, self.msaa_rb) == int(GL.GL_FRAMEBUFFER_COMPLETE) and self._copy_works():
                self.samples_copied = True
                return
        self._free_sample_sheet()

    def _copy_works(self) -> bool:
        """One pixel copied from ``like`` into the sheet copy_into fills (overwritten by the first frame): the
        extension's own glCopyImageSubData entry point is there and the driver takes the copy. Decided here, once,
        so that a render never meets a copy that cannot run; else each env is resolved on its own."""
        try:
            _copy_samples(self.like, self.msaa_rb or self.rb, 1, 1, 0, 0)
        except (RuntimeError, gltensor.GLError):
            return False
        return True

    def copy_into(self, src_rb: int, width: int, height: int, x: int, y: int) -> None:
        """Every sample of (0, 0, width, height) of renderbuffer ``src_rb`` (``like``) to (x, y) of the
        multisampled sheet (or of the sheet itself for a single-sample source); binds no framebuffer."""
        _copy_samples(src_rb, self.msaa_rb or self.rb, width, height, x, y)

    def finish(self, rebind_fbo: int) -> None:
        """After the last copy_into of a frame: the multisampled sheet resolved into the sheet in one blit (as
        mjr_readPixels resolves, GL_NEAREST), then ``rebind_fbo`` bound (mjr_render draws into what is bound)."""
        if self.msaa_fbo:
            _copy_tiles([self.msaa_fbo], self.fbo, self.width, self.height, [0], [0], self.depth, rebind_fbo)

    def resolve_into(self, src_fbo: int, width: int, height: int, x: int, y: int) -> None:
        """Copy (0, 0, width, height) of ``src_fbo`` (resolving its samples) to (x, y) of the sheet, exactly as
        mjr_readPixels' GL_NEAREST blit into offFBO_r resolves it, then bind ``src_fbo`` again (mjr_render draws
        into what is bound). The scissor test would clip a blit to another position: mjr_render switches it on for
        its clear and off again, and it is switched off here too. This runs once per env per frame, so it is one
        call into the extension (gltiles.c): the same five GL calls through PyOpenGL cost ~30 µs a tile on an
        H200 host, PyOpenGL checking glGetError after each."""
        _copy_tile(src_fbo, self.fbo, width, height, x, y, self.depth)

    def _free_sample_sheet(self) -> None:
        self.msaa_fbo, self.msaa_rb = self._free(self.msaa_fbo, self.msaa_rb)

    def close(self) -> None:
        self._free_sample_sheet()
        self.fbo, self.rb = self._free(self.fbo, self.rb)

    def _free(self, fbo: int, rb: int):
        """Deletes a framebuffer and a renderbuffer (0: none); returns (0, 0) for the caller's fields."""
        GL = self._GL
        if fbo:
            GL.glDeleteFramebuffers(1, [fbo])
        if rb:
            GL.glDeleteRenderbuffers(1, [rb])
        return 0, 0
