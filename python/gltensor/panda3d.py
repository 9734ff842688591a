"""Panda3D (and MetaDrive-style) cameras into tensors with gltensor.

    from gltensor import panda3d as gp
    gp.configure()                                   # before ShowBase(): p3headlessgl, no padding, ...
    base = ShowBase()
    cam = gp.RGBCamera(base, 97, 61)                 # offscreen buffer + camera + render texture
    base.graphicsEngine.renderFrame()
    x = cam.perceive()                               # torch (61, 97, 3) float32 RGB in [0, 1], top row first

What Panda3D needs (found by trying Panda3D 1.10.16 with p3headlessgl on Mesa llvmpipe):

* GL context. gltensor needs Panda's GL context current in the calling thread. With Panda's default
  single-threaded pipeline, each output's begin_frame() calls eglMakeCurrent (glXMakeCurrent on X11) and
  nothing releases it, so right after ``base.graphicsEngine.renderFrame()`` (or ``taskMgr.step()``) Panda's
  context is current in the main thread, also when another context was current before the frame. Panda
  has no Python call to make its context current otherwise; this module therefore remembers the context
  (EGL or GLX handles) that was current while Panda drew (a draw callback on the sensors' display regions,
  or the one current when a capture is made right after a frame) and makes it current again before each
  read if something else was made current in between. A threading model with a separate draw thread
  (``threading-model Cull/Draw``) keeps the context in that thread: refused with an error.
* Native id. A render texture has a GL name only once Panda prepared it, which happens during the first
  frame that renders into it: before that ``NotRenderedError`` is raised (never a stale or empty image).
  The name is ``tex.prepareNow(0, gsg.getPreparedObjects(), gsg).getNativeId()``; the GL target follows
  ``tex.getTextureType()`` (only 2-D textures, GL_TEXTURE_2D).
* Padding. Unless ``textures-power-2 none`` is set (``configure()`` does), Panda may allocate render textures
  padded to powers of two (``tex.getPadXSize()``/``getPadYSize()``); the image then sits in the lower-left
  corner of the GL texture. Captures here crop to ``getXSize() x getYSize()`` (a torch view), so the result
  is right either way; ``none`` avoids reading the padding at all.
* Channel order. Panda's RAM images (``getRamImage()``, screenshots) are BGR(A); the GL texture is RGBA, so
  a capture equals ``getRamImageAs("RGBA")`` with its rows flipped (RAM images are bottom-up).
* Resizing. Panda reallocates the render texture (same GL name, glTexImage2D) when the buffer is resized.
  NVIDIA's GL refuses that while CUDA holds the texture registered: make cameras/captures of resizable
  buffers with ``resizable=True`` (gltensor then registers only during each read).
"""

import ctypes
import ctypes.util

try:
    import gltensor as _gt
except ImportError:  # pragma: no cover - imported as part of the package
    from . import _gltensor as _gt  # type: ignore

__all__ = [
    "PRC", "configure", "require_panda3d", "NotRenderedError", "native_id", "gl_target",
    "TextureCapture", "capture_texture", "capture_output", "capture_display_region", "capture_camera",
    "RGBCamera", "DepthCamera", "CameraBatch",
]

# Offscreen, headless, unpadded, no sRGB conversion of the framebuffer, no vsync, no audio.
PRC = """
load-display p3headlessgl
window-type offscreen
textures-power-2 none
framebuffer-srgb false
sync-video false
audio-library-name null
"""


def require_panda3d():
    """panda3d.core, or an ImportError that says how to install it."""
    try:
        import panda3d.core as core
    except ImportError as exc:
        raise ImportError("gltensor.panda3d needs Panda3D: pip install panda3d  (or pip install gltensor[panda3d]);"
                          " import failed with: %s" % exc) from exc
    return core


def _torch():
    try:
        import torch
    except ImportError as exc:
        raise ImportError("this part of gltensor.panda3d returns torch tensors: pip install torch") from exc
    return torch


def configure(extra=""):
    """Load PRC (plus `extra` lines) with loadPrcFileData. Call before ShowBase() opens its window."""
    core = require_panda3d()
    core.loadPrcFileData("gltensor", PRC + "\n" + extra)


class NotRenderedError(_gt.GLTensorError):
    """The texture/camera has not been rendered into yet (no GL texture exists, or no frame was drawn)."""


# ---------------------------------------------------------------- Panda's GL context


class _EGL:
    lib = None

    @classmethod
    def load(cls):
        if cls.lib is None:
            name = ctypes.util.find_library("EGL") or "libEGL.so.1"
            try:
                lib = ctypes.CDLL(name)
            except OSError:
                lib = False
            else:
                for f in ("eglGetCurrentContext", "eglGetCurrentDisplay", "eglGetCurrentSurface"):
                    getattr(lib, f).restype = ctypes.c_void_p
                lib.eglGetCurrentSurface.argtypes = [ctypes.c_int]
                lib.eglMakeCurrent.argtypes = [ctypes.c_void_p] * 4
                lib.eglMakeCurrent.restype = ctypes.c_uint
            cls.lib = lib
        return cls.lib or None


class _GLX:
    lib = None

    @classmethod
    def load(cls):
        if cls.lib is None:
            try:
                lib = ctypes.CDLL(ctypes.util.find_library("GL") or "libGL.so.1")
                for f in ("glXGetCurrentContext", "glXGetCurrentDisplay"):
                    getattr(lib, f).restype = ctypes.c_void_p
                for f in ("glXGetCurrentDrawable", "glXGetCurrentReadDrawable"):
                    getattr(lib, f).restype = ctypes.c_ulong
                lib.glXMakeContextCurrent.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong,
                                                      ctypes.c_void_p]
            except (OSError, AttributeError):
                lib = False
            cls.lib = lib
        return cls.lib or None


class _GLState:
    """The GL context (EGL or GLX handles) current in this thread when it was recorded."""

    __slots__ = ("api", "handles")

    def __init__(self, api, handles):
        self.api, self.handles = api, handles

    @staticmethod
    def current():
        egl = _EGL.load()
        if egl is not None:
            c = egl.eglGetCurrentContext()
            if c:
                return _GLState("egl", (egl.eglGetCurrentDisplay(), egl.eglGetCurrentSurface(0x3059),
                                        egl.eglGetCurrentSurface(0x305A), c))  # EGL_DRAW, EGL_READ
        glx = _GLX.load()
        if glx is not None:
            c = glx.glXGetCurrentContext()
            if c:
                return _GLState("glx", (glx.glXGetCurrentDisplay(), glx.glXGetCurrentDrawable(),
                                        glx.glXGetCurrentReadDrawable(), c))
        return None

    def is_current(self):
        if self.api == "egl":
            return _EGL.load().eglGetCurrentContext() == self.handles[3]
        return _GLX.load().glXGetCurrentContext() == self.handles[3]

    def make_current(self):
        if self.is_current():
            return
        if self.api == "egl":
            ok = _EGL.load().eglMakeCurrent(*self.handles)
        else:
            ok = _GLX.load().glXMakeContextCurrent(*self.handles)
        if not ok:
            raise _gt.NoContextError("gltensor.panda3d: could not make Panda3D's GL context current again (%s); "
                                     "read right after base.graphicsEngine.renderFrame()" % self.api)


def _check_threading(engine):
    if engine is None:
        return
    tm = engine.getThreadingModel()
    if tm.getDrawName():
        raise _gt.GLTensorError(
            "gltensor.panda3d: Panda3D's threading model %r draws in another thread, whose GL context cannot be "
            "current here; use the single-threaded pipeline (threading-model empty, the default)" % str(tm))


# ---------------------------------------------------------------- textures


def gl_target(tex):
    """GL target of a Panda3D Texture (only 2-D textures are supported)."""
    core = require_panda3d()
    if tex.getTextureType() != core.Texture.TT2dTexture:
        raise _gt.UnsupportedFormatError(
            "gltensor.panda3d: texture %r has texture type %s; only 2-D textures (GL_TEXTURE_2D) are supported"
            % (tex.getName(), tex.getTextureType()))
    return _gt.GL_TEXTURE_2D


def _gsg_of(obj):
    """A GraphicsStateGuardian from a GSG, GraphicsOutput, ShowBase, DisplayRegion or camera NodePath."""
    core = require_panda3d()
    if isinstance(obj, core.GraphicsStateGuardian):
        return obj
    if hasattr(obj, "win") and hasattr(obj, "graphicsEngine"):  # ShowBase
        obj = obj.win
    if isinstance(obj, core.DisplayRegion):
        obj = obj.getWindow()
    if isinstance(obj, core.GraphicsOutput):
        gsg = obj.getGsg()
        if gsg is None:
            raise NotRenderedError("gltensor.panda3d: output %r has no graphics state guardian yet; render a frame "
                                   "first (base.graphicsEngine.renderFrame())" % obj.getName())
        return gsg
    raise TypeError("expected a GraphicsStateGuardian, GraphicsOutput, DisplayRegion or ShowBase, got %r"
                    % type(obj).__name__)


def native_id(tex, gsg):
    """GL texture name of `tex` in `gsg`'s context; NotRenderedError while Panda has not prepared it."""
    gsg = _gsg_of(gsg)
    po = gsg.getPreparedObjects()
    if not po.isTexturePrepared(tex):
        raise NotRenderedError(
            "gltensor.panda3d: texture %r has no GL texture yet: Panda3D creates it during the first frame that "
            "renders into it; call base.graphicsEngine.renderFrame() first" % tex.getName())
    tc = tex.prepareNow(0, po, gsg)
    name = tc.getNativeId() if tc is not None else 0
    if not name:
        raise NotRenderedError("gltensor.panda3d: texture %r is prepared but has no GL name yet; render a frame first"
                               % tex.getName())
    return int(name)


class TextureCapture:
    """A gltensor.Capture of a Panda3D Texture, cropped to the texture's real size when Panda padded it.

    Make it right after a frame rendered into the texture (Panda's context is then current); reads restore
    that context when another one was made current meanwhile.
    """

    def __init__(self, tex, gsg, *, backend="auto", cuda_device=None, resizable=False, gl_state=None):
        gsg = _gsg_of(gsg)
        _check_threading(gsg.getEngine())
        self.texture, self.gsg = tex, gsg
        self._target = gl_target(tex)
        self._name = native_id(tex, gsg)
        self._state = gl_state
        if self._state is None:
            self._state = _GLState.current()
        if self._state is None:
            raise _gt.NoContextError("gltensor.panda3d: no GL context is current; make the capture right after "
                                     "base.graphicsEngine.renderFrame(), which leaves Panda3D's context current")
        self._state.make_current()
        self._kw = dict(backend=backend, cuda_device=cuda_device, resizable=resizable)
        self.capture = _gt.Capture(self._name, self._target, **self._kw)

    @property
    def backend(self):
        return self.capture.backend

    @property
    def size(self):
        """(width, height) of the image Panda rendered (without power-of-two padding)."""
        return self.texture.getXSize(), self.texture.getYSize()

    @property
    def padded(self):
        return bool(self.texture.getPadXSize() or self.texture.getPadYSize())

    def _refresh(self):
        self._state.make_current()
        name = native_id(self.texture, self.gsg)
        if name != self._name:  # Panda re-created the GL texture: follow it
            self.capture.close()
            self._name = name
            self.capture = _gt.Capture(name, self._target, **self._kw)

    def read(self, **kwargs):
        """gltensor Frame of the whole GL texture (including padding, if any); kwargs as Capture.read."""
        self._refresh()
        return self.capture.read(**kwargs)

    def tensor(self, **kwargs):
        """torch tensor of the image, cropped to the real size; kwargs as Capture.read (flip, channels, dtype,
        layout, depth, near, far, stream, ...). A padded texture gives a view (not contiguous)."""
        torch = _torch()
        x = torch.from_dlpack(self.read(**kwargs))
        if not self.padded:
            return x
        w, h = self.size
        H = x.shape[-2] if kwargs.get("layout") == "chw" else x.shape[-3]
        rows = slice(H - h, H) if kwargs.get("flip", True) else slice(0, h)  # image at GL's lower-left corner
        if kwargs.get("layout") == "chw":
            return x[..., rows, :w]
        return x[..., rows, :w, :]

    def close(self):
        self.capture.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def capture_texture(tex, gsg, **kwargs):
    """TextureCapture of a Texture (e.g. one attached with add_render_texture(..., RTMBindOrCopy, ...))."""
    return TextureCapture(tex, gsg, **kwargs)


def _find_render_texture(output, plane):
    core = require_panda3d()
    want = {"color": core.GraphicsOutput.RTPColor, "depth": core.GraphicsOutput.RTPDepth,
            "depth_stencil": core.GraphicsOutput.RTPDepthStencil}
    planes = [want[plane]] if plane != "depth" else [want["depth"], want["depth_stencil"]]
    for i in range(output.countTextures()):
        if output.getTexturePlane(i) in planes:
            if output.getRtmMode(i) not in (core.GraphicsOutput.RTMBindOrCopy, core.GraphicsOutput.RTMCopyTexture,
                                            core.GraphicsOutput.RTMBindLayered):
                raise _gt.InvalidArgumentError(
                    "gltensor.panda3d: the %s texture of %r is attached with mode %s; gltensor needs the GL "
                    "texture: attach it with GraphicsOutput.RTMBindOrCopy" % (plane, output.getName(),
                                                                               output.getRtmMode(i)))
            return output.getTexture(i)
    raise _gt.InvalidArgumentError(
        "gltensor.panda3d: %r has no %s render texture; attach one with output.addRenderTexture(tex, "
        "GraphicsOutput.RTMBindOrCopy, GraphicsOutput.RTP%s) and render a frame"
        % (output.getName(), plane, "Color" if plane == "color" else "Depth"))


def capture_output(output, plane="color", **kwargs):
    """TextureCapture of the render texture attached to a GraphicsOutput (window or offscreen buffer) with
    RTMBindOrCopy; plane "color" or "depth"."""
    return TextureCapture(_find_render_texture(output, plane), output.getGsg() or output, **kwargs)


def capture_display_region(region, plane="color", **kwargs):
    return capture_output(region.getWindow(), plane, **kwargs)


def capture_camera(camera, plane="color", **kwargs):
    """TextureCapture for the output a camera (NodePath or Camera node) renders into."""
    node = camera.node() if hasattr(camera, "node") else camera
    if node.getNumDisplayRegions() == 0:
        raise _gt.InvalidArgumentError("gltensor.panda3d: camera %r has no display region" % node.getName())
    return capture_display_region(node.getDisplayRegion(0), plane, **kwargs)


# ---------------------------------------------------------------- sensors


class _Camera:
    """An offscreen buffer (FBO sharing base.win's GSG) with a camera and RTMBindOrCopy render textures."""

    _count = 0

    def __init__(self, base, width, height, *, parent=None, lens=None, fov=None, near=None, far=None,
                 color=True, depth=False, sort=-10, backend="auto", cuda_device=None, resizable=False,
                 frame_buffer_properties=None, name=None):
        core = require_panda3d()
        _check_threading(base.graphicsEngine)
        _Camera._count += 1
        self.base, self.name = base, name or "gltensor_cam%d" % _Camera._count
        fbp = frame_buffer_properties
        if fbp is None:
            fbp = core.FrameBufferProperties()
            fbp.setRgbColor(True)
            fbp.setRgbaBits(8, 8, 8, 8)
            if depth:
                fbp.setDepthBits(32)
                fbp.setFloatDepth(True)
            else:
                fbp.setDepthBits(24)
        flags = core.GraphicsPipe.BFRefuseWindow | (core.GraphicsPipe.BFResizeable if resizable else 0)
        self.buffer = base.graphicsEngine.makeOutput(base.pipe, self.name, sort, fbp,
                                                     core.WindowProperties.size(width, height), flags,
                                                     base.win.getGsg(), base.win)
        if self.buffer is None:
            raise _gt.GLTensorError("gltensor.panda3d: Panda3D could not make a %dx%d offscreen buffer"
                                    % (width, height))
        self.buffer.setClearColor(core.LColor(0, 0, 0, 1))
        self.color_texture = self.depth_texture = None
        if color:
            self.color_texture = core.Texture(self.name + "_color")
            self.buffer.addRenderTexture(self.color_texture, core.GraphicsOutput.RTMBindOrCopy,
                                         core.GraphicsOutput.RTPColor)
        if depth:
            t = core.Texture(self.name + "_depth")
            t.setFormat(core.Texture.FDepthComponent32)
            t.setComponentType(core.Texture.TFloat)
            self.buffer.addRenderTexture(t, core.GraphicsOutput.RTMBindOrCopy, core.GraphicsOutput.RTPDepth)
            self.depth_texture = t
        if lens is None:
            lens = core.PerspectiveLens()
            lens.setFov(fov if fov is not None else 60.0)  # horizontal field of view, degrees
            lens.setAspectRatio(width / height)
        if near is not None or far is not None:
            lens.setNearFar(near if near is not None else lens.getNear(), far if far is not None else lens.getFar())
        self.lens = lens
        self.camera = base.makeCamera(self.buffer, lens=lens, camName=self.name)
        self.camera.reparentTo(parent if parent is not None else base.render)
        self.display_region = self.camera.node().getDisplayRegion(0)
        self.frames = 0           # frames drawn into this camera's buffer (draw callback)
        self._state = None        # the GL context current while Panda drew
        self._kw = dict(backend=backend, cuda_device=cuda_device, resizable=resizable)
        self._captures = {}
        self.display_region.setDrawCallback(core.PythonCallbackObject(self._on_draw))

    def _on_draw(self, cbdata):
        cbdata.upcall()
        if self._state is None or not self._state.is_current():
            self._state = _GLState.current()
        self.frames += 1

    def _capture(self, plane):
        if self.frames == 0:
            raise NotRenderedError("gltensor.panda3d: camera %r has not been rendered yet; call "
                                   "base.graphicsEngine.renderFrame() (or taskMgr.step()) before perceive()"
                                   % self.name)
        cap = self._captures.get(plane)
        if cap is None:
            tex = self.color_texture if plane == "color" else self.depth_texture
            self._state.make_current()
            cap = self._captures[plane] = TextureCapture(tex, self.buffer.getGsg(), gl_state=self._state, **self._kw)
        return cap

    @property
    def size(self):
        return self.buffer.getXSize(), self.buffer.getYSize()

    def set_size(self, width, height):
        """Resize the buffer (takes effect at the next frame); make the camera with resizable=True for CUDA."""
        self.buffer.setSize(width, height)
        if hasattr(self.lens, "setAspectRatio"):
            self.lens.setAspectRatio(width / height)

    def _render_at(self, new_parent_node, position, hpr):
        old_parent, old_pos, old_hpr = self.camera.getParent(), self.camera.getPos(), self.camera.getHpr()
        self.camera.reparentTo(new_parent_node)
        self.camera.setPos(*(position if position is not None else (0, 0, 0)))
        self.camera.setHpr(*(hpr if hpr is not None else (0, 0, 0)))
        self.base.graphicsEngine.renderFrame()
        return old_parent, old_pos, old_hpr

    def _restore(self, saved):
        parent, pos, hpr = saved
        self.camera.reparentTo(parent)
        self.camera.setPos(pos)
        self.camera.setHpr(hpr)

    def close(self):
        for cap in self._captures.values():
            if self._state is not None:
                try:
                    self._state.make_current()
                except _gt.GLTensorError:
                    pass
            cap.close()
        self._captures.clear()
        if self.buffer is not None:
            self.display_region.clearDrawCallback()
            self.camera.removeNode()
            self.base.graphicsEngine.removeWindow(self.buffer)
            self.buffer = None


class RGBCamera(_Camera):
    """Colour camera sensor: perceive() -> torch (H, W, 3) RGB, top row first (float32 in [0, 1] or uint8)."""

    def __init__(self, base, width, height, **kwargs):
        kwargs.setdefault("depth", False)
        super().__init__(base, width, height, color=True, **kwargs)

    @property
    def texture_capture(self):
        return self._capture("color")

    def perceive(self, to_float=True, new_parent_node=None, position=None, hpr=None, **read_kwargs):
        """The last rendered image. With new_parent_node the camera is moved there (position, hpr), one frame is
        rendered, and the camera is put back (as MetaDrive's sensors do). read_kwargs go to Capture.read."""
        saved = self._render_at(new_parent_node, position, hpr) if new_parent_node is not None else None
        try:
            read_kwargs.setdefault("channels", "rgb")
            read_kwargs.setdefault("dtype", "float32" if to_float else "uint8")
            return self._capture("color").tensor(**read_kwargs)
        finally:
            if saved is not None:
                self._restore(saved)


class DepthCamera(_Camera):
    """Depth camera sensor: perceive() -> torch float32 (H, W, 1), window depth in [0, 1] or, with
    linear=True, eye-space distance from the lens' near/far planes. The buffer has a 32-bit float depth
    texture attached with RTPDepth (RTMBindOrCopy)."""

    def __init__(self, base, width, height, *, color=False, **kwargs):
        super().__init__(base, width, height, color=color, depth=True, **kwargs)

    @property
    def texture_capture(self):
        return self._capture("depth")

    def perceive(self, linear=False, new_parent_node=None, position=None, hpr=None, **read_kwargs):
        saved = self._render_at(new_parent_node, position, hpr) if new_parent_node is not None else None
        try:
            if linear:
                core = require_panda3d()
                read_kwargs.update(depth="linear", near=self.lens.getNear(), far=self.lens.getFar(),
                                   projection="orthographic" if isinstance(self.lens, core.OrthographicLens)
                                   else "perspective")
            return self._capture("depth").tensor(**read_kwargs)
        finally:
            if saved is not None:
                self._restore(saved)


class CameraBatch:
    """Several colour cameras of one step read as one gltensor.Batch: perceive() -> torch (N, H, W, 3).

    All cameras must have the same size; one GL->CUDA hand-off per step on the GPU."""

    def __init__(self, cameras):
        self.cameras = list(cameras)
        if not self.cameras:
            raise _gt.InvalidArgumentError("gltensor.panda3d.CameraBatch: no cameras")
        self._batch = None

    def _ensure(self):
        caps = [c._capture("color") for c in self.cameras]
        for c in caps:
            c._refresh()
            if c.padded:
                raise _gt.InvalidArgumentError("gltensor.panda3d.CameraBatch: padded textures; set textures-power-2 "
                                               "none (gltensor.panda3d.configure())")
        names = tuple(c.capture for c in caps)
        if self._batch is None or self._batch.captures != names:
            if self._batch is not None:
                self._batch.close()
            self._batch = _gt.Batch(list(names))
        self.cameras[0]._state.make_current()
        return self._batch

    def perceive(self, to_float=True, **read_kwargs):
        torch = _torch()
        read_kwargs.setdefault("channels", "rgb")
        read_kwargs.setdefault("dtype", "float32" if to_float else "uint8")
        return torch.from_dlpack(self._ensure().read(**read_kwargs))

    def close(self):
        if self._batch is not None:
            self._batch.close()
            self._batch = None
