"""Panda3D (and MetaDrive-style) cameras into tensors with gltensor.

    from gltensor import panda3d as gp
    gp.configure()                                   # optional, before ShowBase(): p3headlessgl, no padding, ...
    base = ShowBase()
    cam = gp.RGBCamera(base, 97, 61)                 # offscreen buffer + camera + render texture
    base.graphicsEngine.renderFrame()
    x = cam.read()                                   # torch (61, 97, 3) float32 RGB in [0, 1], top row first

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
* Padding. Unless ``textures-power-2 none`` is set (``configure()`` and MetaDrive set it; Panda's default does
  not), Panda allocates render textures padded to powers of two (97x61 -> 128x64; ``tex.getXSize()`` is the
  padded size, ``getPadXSize()`` the padding); the image sits in the lower-left corner of the GL texture.
  Captures here then read only the image through the core's ``region`` (``image_size(tex)``), so every path
  returns exactly the rendered size under any configuration and no padding byte is copied.
* Channel order. Panda's RAM images (``getRamImage()``, screenshots) are BGR(A); the GL texture is RGBA, so
  a capture equals ``getRamImageAs("RGBA")`` with its rows flipped (RAM images are bottom-up).
* Resizing. Panda reallocates the render texture (same GL name, glTexImage2D) when the buffer is resized.
  NVIDIA's GL refuses that while CUDA holds the texture registered: make cameras/captures of resizable
  buffers with ``resizable=True`` (gltensor then registers only during each read).
"""

try:
    import gltensor as _gt
except ImportError:  # pragma: no cover - imported as part of the package
    from . import _gltensor as _gt  # type: ignore
from . import _gltensor as _core

__all__ = [
    "PRC", "configure", "require_panda3d", "NotRenderedError", "native_id", "gl_target",
    "TextureCapture", "capture_texture", "capture_output", "capture_display_region", "capture_camera",
    "RGBCamera", "DepthCamera", "CameraBatch", "CameraAtlas", "image_size", "display_region_rect",
    "gl_image", "write_to_slot",
]

# Offscreen, headless, unpadded, no sRGB conversion of the framebuffer, no vsync, no audio. Panda's EGL pipe first
# tries the default EGL display, which needs a display server; where there is none it warns "Couldn't initialize
# the default EGL display: EGL_NOT_INITIALIZED" and then picks an EGL device, which is what renders. That warning
# says nothing about the run, so the egldisplay category shows errors only.
PRC = """
load-display p3headlessgl
notify-level-egldisplay error
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


from ._adapter import NotRenderedError, warn_renamed  # noqa: E402  (one class for every adapter)


# ---------------------------------------------------------------- Panda's GL context


class _GLState:
    """The GL context (EGL or GLX) current in this thread when it was recorded: the core's
    glt_context_save_current / glt_context_restore (one place owns GL context save and restore)."""

    __slots__ = ("saved",)

    def __init__(self, saved):
        self.saved = saved

    @staticmethod
    def current():
        saved = _core._save_gl_context()
        return _GLState(saved) if saved[0] else None  # system 0: no context is current

    @property
    def handles(self):
        """(display, draw, read, context) as recorded."""
        return self.saved[1:5]

    def is_current(self):
        return _core._gl_context_is_current(self.saved)

    def make_current(self):
        if self.is_current():
            return
        try:
            _core._restore_gl_context(self.saved)
        except _gt.GLTensorError as err:
            raise _gt.NoContextError("gltensor.panda3d: could not make Panda3D's GL context current again (%s); "
                                     "read right after base.graphicsEngine.renderFrame()" % str(err).split("\n")[0]) \
                from err


def _check_threading(engine):
    if engine is None:
        return
    tm = engine.getThreadingModel()
    if tm.getDrawName():
        raise _gt.GLTensorError(
            "gltensor.panda3d: Panda3D's threading model %r draws in another thread, whose GL context cannot be "
            "current here; use the single-threaded pipeline (threading-model empty, Panda's default; in MetaDrive "
            "pass multi_thread_render=False in the env config: its default, threading-model Cull, culls and draws "
            "in a 'Cull' thread)" % str(tm))


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


def image_size(tex):
    """(width, height) of the image Panda renders into `tex`: the texture's size without its power-of-two
    padding (Panda pads render textures unless ``textures-power-2 none``; the image then sits at GL's
    lower-left corner, and getXSize()/getYSize() are the padded sizes)."""
    return tex.getXSize() - tex.getPadXSize(), tex.getYSize() - tex.getPadYSize()


def _region_of(tex, rect=None):
    """Capture region (x, y, w, h), GL lower-left origin, of `rect` (default: the whole image) in `tex`;
    None when that is the whole GL texture (no padding), so that unpadded textures take the plain path."""
    w, h = image_size(tex)
    x, y, rw, rh = rect if rect is not None else (0, 0, w, h)
    if (x, y, rw, rh) == (0, 0, tex.getXSize(), tex.getYSize()):
        return None
    if x < 0 or y < 0 or rw <= 0 or rh <= 0 or x + rw > w or y + rh > h:
        raise _gt.InvalidArgumentError(
            "gltensor.panda3d: region (x=%d, y=%d, w=%d, h=%d) does not lie inside the %dx%d image of texture %r"
            % (x, y, rw, rh, w, h, tex.getName()))
    return (x, y, rw, rh)


def gl_image(tex, gsg, rect=None):
    """A ``gltensor.GLImage`` of the image Panda rendered into `tex`: its GL name in `gsg`'s context and the
    region inside Panda's power-of-two padding (or `rect`), for ``SlotHandle.write`` / a Gymnasium or SB3
    observation. GL only: nothing is registered with CUDA (a worker process stays without CUDA)."""
    gsg = _gsg_of(gsg)
    return _gt.GLImage(native_id(tex, gsg), gl_target(tex), _region_of(tex, rect))


def write_to_slot(handle, tex, gsg, rect=None, *, gl_state=None):
    """Write the image Panda rendered into `tex` (padding excluded) into a shared slot (``SlotHandle``), on the
    GPU with GL, and return once it is complete. Call it after a frame rendered into `tex`; `gl_state` (a
    sensor's) is made current first, else Panda's context must be current (it is after renderFrame())."""
    if gl_state is not None:
        gl_state.make_current()
    return handle.write(gl_image(tex, gsg, rect))


class TextureCapture:
    """A gltensor.Capture of a Panda3D Texture that reads exactly the image Panda rendered.

    When Panda padded the texture to powers of two, the capture reads only the image rectangle (a core
    region: no padding byte is copied). `rect=(x, y, w, h)` (GL lower-left origin, inside the image) reads
    a part of it instead, e.g. one display region of a buffer.

    Make it right after a frame rendered into the texture (Panda's context is then current); reads restore
    that context when another one was made current meanwhile.
    """

    def __init__(self, tex, gsg, *, backend="auto", cuda_device=None, resizable=False, gl_state=None, rect=None):
        gsg = _gsg_of(gsg)
        _check_threading(gsg.getEngine())
        self.texture, self.gsg = tex, gsg
        self._target = gl_target(tex)
        self._name = native_id(tex, gsg)
        self._rect = None if rect is None else tuple(int(v) for v in rect)
        self._state = gl_state
        if self._state is None:
            self._state = _GLState.current()
        if self._state is None:
            raise _gt.NoContextError("gltensor.panda3d: no GL context is current; make the capture right after "
                                     "base.graphicsEngine.renderFrame(), which leaves Panda3D's context current")
        self._state.make_current()
        self._kw = dict(backend=backend, cuda_device=cuda_device, resizable=resizable)
        self._prepared = gsg.getPreparedObjects()
        self.region = _region_of(tex, self._rect)
        self.capture = self._make_capture()
        self._key = (self._name, tex.getXSize(), tex.getYSize(), tex.getPadXSize(), tex.getPadYSize())

    def _make_capture(self):
        kw = dict(self._kw)
        if self.region is not None:
            kw["region"] = self.region
        return _gt.Capture(self._name, self._target, **kw)

    @property
    def backend(self):
        return self.capture.backend

    @property
    def size(self):
        """(width, height) of what read() returns: the image Panda rendered (without power-of-two padding),
        or the rect asked for."""
        if self._rect is not None:
            return self._rect[2], self._rect[3]
        return image_size(self.texture)

    @property
    def padded(self):
        return bool(self.texture.getPadXSize() or self.texture.getPadYSize())

    def _refresh(self, current=False):
        """Follow the texture if Panda re-created or resized it; current=True: Panda's context is current.

        Runs every read (for CameraBatch, per camera), so the common case is a few Panda calls: the GL name and
        the (padded) size, compared with what the capture was made for."""
        if not current:
            self._state.make_current()
        tex, po = self.texture, self._prepared
        tc = tex.prepareNow(0, po, self.gsg) if po.isTexturePrepared(tex) else None
        key = (tc.getNativeId() if tc is not None else 0, tex.getXSize(), tex.getYSize(), tex.getPadXSize(),
               tex.getPadYSize())
        if key == self._key:
            return
        name = native_id(tex, self.gsg)  # NotRenderedError with what to do when there is no GL texture
        region = _region_of(tex, self._rect)
        if name != self._name or region != self.region:
            self.capture.close()
            self._name, self.region = name, region
            self.capture = self._make_capture()
        self._key = key

    def read(self, **kwargs):
        """gltensor Frame of the image (padding never read); kwargs as Capture.read."""
        self._refresh()
        return self.capture.read(**kwargs)

    def tensor(self, **kwargs):
        """torch tensor of the image; kwargs as Capture.read (flip, channels, dtype, layout, depth, near, far,
        stream, out, ...)."""
        return _torch().from_dlpack(self.read(**kwargs))

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


def display_region_rect(region):
    """(x, y, w, h) in pixels, GL lower-left origin, of a DisplayRegion in its output.

    Panda rounds the region's fractional dimensions to pixels as int(fraction * size + 0.5)
    (DisplayRegion::compute_pixels); the width and height are Panda's own."""
    output = region.getWindow()
    l, _, b, _ = region.getDimensions()
    return (int(l * output.getFbXSize() + 0.5), int(b * output.getFbYSize() + 0.5),
            region.getPixelWidth(), region.getPixelHeight())


def capture_display_region(region, plane="color", **kwargs):
    """TextureCapture of the part of its output's render texture that a DisplayRegion covers (the whole
    image for the output's default full-size region)."""
    output = region.getWindow()
    kwargs.setdefault("rect", display_region_rect(region))
    return TextureCapture(_find_render_texture(output, plane), output.getGsg() or output, **kwargs)


def capture_camera(camera, plane="color", **kwargs):
    """TextureCapture of what a camera (NodePath or Camera node) renders: its first display region's part of
    its output's render texture."""
    node = camera.node() if hasattr(camera, "node") else camera
    if node.getNumDisplayRegions() == 0:
        raise _gt.InvalidArgumentError("gltensor.panda3d: camera %r has no display region" % node.getName())
    return capture_display_region(node.getDisplayRegion(0), plane, **kwargs)


# ---------------------------------------------------------------- sensors


def _make_buffer(base, name, width, height, fbp, depth, sort, resizable):
    """An offscreen buffer (FBO) sharing base.win's GSG: RGBA8 colour, 24-bit depth (32-bit float with depth)."""
    core = require_panda3d()
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
    buffer = base.graphicsEngine.makeOutput(base.pipe, name, sort, fbp, core.WindowProperties.size(width, height),
                                            flags, base.win.getGsg(), base.win)
    if buffer is None:
        raise _gt.GLTensorError("gltensor.panda3d: Panda3D could not make a %dx%d offscreen buffer" % (width, height))
    return buffer


def _default_lens(width, height, lens, fov, near, far):
    core = require_panda3d()
    if lens is None:
        lens = core.PerspectiveLens()
        lens.setFov(fov if fov is not None else 60.0)  # horizontal field of view, degrees
        lens.setAspectRatio(width / height)
    if near is not None or far is not None:
        lens.setNearFar(near if near is not None else lens.getNear(), far if far is not None else lens.getFar())
    return lens


class _DrawWatch:
    """Counts the frames Panda drew into a display region and remembers the GL context that was current while
    it drew (a draw callback), so that reads can make it current again."""

    def __init__(self, region):
        core = require_panda3d()
        self.region, self.frames, self.state = region, 0, None
        region.setDrawCallback(core.PythonCallbackObject(self._on_draw))

    def _on_draw(self, cbdata):
        cbdata.upcall()
        if self.state is None or not self.state.is_current():
            self.state = _GLState.current()
        self.frames += 1

    def require(self, what):
        if self.frames == 0:
            raise NotRenderedError("gltensor.panda3d: camera %r has not been rendered yet; call "
                                   "base.graphicsEngine.renderFrame() (or taskMgr.step()) before read()" % what)

    def close(self):
        self.region.clearDrawCallback()


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
        self.buffer = _make_buffer(base, self.name, width, height, frame_buffer_properties, depth, sort, resizable)
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
        lens = _default_lens(width, height, lens, fov, near, far)
        self.lens = lens
        self.camera = base.makeCamera(self.buffer, lens=lens, camName=self.name)
        self.camera.reparentTo(parent if parent is not None else base.render)
        self.display_region = self.camera.node().getDisplayRegion(0)
        self._watch = _DrawWatch(self.display_region)
        self._kw = dict(backend=backend, cuda_device=cuda_device, resizable=resizable)
        self._captures = {}

    @property
    def frames(self):
        """Frames Panda drew into this camera's buffer."""
        return self._watch.frames

    @property
    def _state(self):
        return self._watch.state

    def _capture(self, plane):
        self._watch.require(self.name)
        cap = self._captures.get(plane)
        if cap is None:
            tex = self.color_texture if plane == "color" else self.depth_texture
            self._state.make_current()
            cap = self._captures[plane] = TextureCapture(tex, self.buffer.getGsg(), gl_state=self._state, **self._kw)
        return cap

    @property
    def size(self):
        return self.buffer.getXSize(), self.buffer.getYSize()

    @property
    def backend(self):
        """The backend reads use ("cuda" or "cpu"); the one asked for ("auto" ...) until the first read."""
        for cap in self._captures.values():
            return cap.backend
        return self._kw["backend"]

    def perceive(self, *args, **kwargs):
        """Deprecated second name of read() (removed in the next release)."""
        warn_renamed(self, "perceive", "read")
        return self.read(*args, **kwargs)

    def set_size(self, width, height):
        """Resize the buffer (takes effect at the next frame); make the camera with resizable=True for CUDA."""
        self.buffer.setSize(width, height)
        if hasattr(self.lens, "setAspectRatio"):
            self.lens.setAspectRatio(width / height)

    def write_to(self, handle, new_parent_node=None, position=None, hpr=None, plane="color"):
        """Write the last rendered image (padding excluded) into a shared slot (``SlotHandle``) with GL alone,
        instead of reading it into a tensor: what a worker process of a vector env does. With new_parent_node
        one frame is rendered from there first, as read()."""
        saved = self._render_at(new_parent_node, position, hpr) if new_parent_node is not None else None
        try:
            self._watch.require(self.name)
            tex = self.color_texture if plane == "color" else self.depth_texture
            return write_to_slot(handle, tex, self.buffer.getGsg(), gl_state=self._state)
        finally:
            if saved is not None:
                self._restore(saved)

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
            self._watch.close()
            self.camera.removeNode()
            self.base.graphicsEngine.removeWindow(self.buffer)
            self.buffer = None


class RGBCamera(_Camera):
    """Colour camera sensor: read() -> torch (H, W, 3) RGB, top row first (float32 in [0, 1] or uint8)."""

    def __init__(self, base, width, height, **kwargs):
        kwargs.setdefault("depth", False)
        super().__init__(base, width, height, color=True, **kwargs)

    @property
    def texture_capture(self):
        return self._capture("color")

    def read(self, to_float=True, new_parent_node=None, position=None, hpr=None, **read_kwargs):
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
    """Depth camera sensor: read() -> torch float32 (H, W, 1), window depth in [0, 1] or, with
    linear=True, eye-space distance from the lens' near/far planes. The buffer has a 32-bit float depth
    texture attached with RTPDepth (RTMBindOrCopy)."""

    def __init__(self, base, width, height, *, color=False, **kwargs):
        super().__init__(base, width, height, color=color, depth=True, **kwargs)

    @property
    def texture_capture(self):
        return self._capture("depth")

    def read(self, linear=False, new_parent_node=None, position=None, hpr=None, **read_kwargs):
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
    """Several colour cameras of one step read as one gltensor.Batch: read() -> torch (N, H, W, 3).

    cameras: RGBCamera objects, or any sensors with a `texture_capture` (a TextureCapture), e.g.
    gltensor.metadrive's.

    All cameras must have the same size; one GL->CUDA hand-off per step on the GPU. Each camera renders into its
    own buffer (one FBO pass each); CameraAtlas renders them all into one buffer instead."""

    def __init__(self, cameras):
        self.cameras = list(cameras)
        if not self.cameras:
            raise _gt.InvalidArgumentError("gltensor.panda3d.CameraBatch: no cameras")
        self._batch, self._names = None, None

    def _ensure(self):
        caps = [c.texture_capture for c in self.cameras]
        caps[0]._state.make_current()  # one GL context for all (the one Panda drew the cameras with)
        for c in caps:
            c._refresh(current=True)  # each capture reads its camera's image only (a region when padded)
        names = tuple(c.capture for c in caps)
        if names != self._names:
            if self._batch is not None:
                self._batch.close()
            self._batch = _gt.Batch(list(names))
            self._names = names
        return self._batch

    @property
    def backend(self):
        """The backend of the cameras' reads ("cuda" or "cpu"; the first camera's request before the first read)."""
        return self._batch.backend if self._batch is not None else self.cameras[0].backend

    def perceive(self, *args, **kwargs):
        """Deprecated second name of read() (removed in the next release)."""
        warn_renamed(self, "perceive", "read")
        return self.read(*args, **kwargs)

    def read(self, to_float=True, **read_kwargs):
        torch = _torch()
        read_kwargs.setdefault("channels", "rgb")
        read_kwargs.setdefault("dtype", "float32" if to_float else "uint8")
        return torch.from_dlpack(self._ensure().read(**read_kwargs))

    def close(self):
        if self._batch is not None:
            self._batch.close()
            self._batch, self._names = None, None


class CameraAtlas:
    """`count` colour cameras rendering into ONE offscreen buffer, one display region (tile) each, read as one
    gltensor.Atlas: read() -> torch (count, H, W, 3), camera k in tile k (left to right, top to bottom).

    One buffer means one FBO bind and one render texture for all cameras (CameraBatch has one buffer per
    camera); the read is one GL->CUDA hand-off. Cameras share nothing but the buffer: each has its own lens
    (a copy of `lens`) and can be moved independently (`atlas.cameras[k]`). When Panda pads the texture to
    powers of two the atlas reads only the tiles' rectangle.
    """

    _count = 0

    def __init__(self, base, count, width, height, *, cols=None, parent=None, lens=None, fov=None, near=None,
                 far=None, sort=-10, backend="auto", cuda_device=None, frame_buffer_properties=None, name=None,
                 camera_mask=None, clear_color=(0, 0, 0, 1)):
        import math
        core = require_panda3d()
        _check_threading(base.graphicsEngine)
        if count < 1:
            raise _gt.InvalidArgumentError("gltensor.panda3d.CameraAtlas: count must be >= 1, got %r" % (count,))
        CameraAtlas._count += 1
        self.base, self.name = base, name or "gltensor_atlas%d" % CameraAtlas._count
        self.count, self.tile_size = count, (height, width)
        cols = cols or int(math.ceil(math.sqrt(count)))
        rows = (count + cols - 1) // cols
        self.tiles = (rows, cols)
        W, H = cols * width, rows * height
        self.buffer = _make_buffer(base, self.name, W, H, frame_buffer_properties, False, sort, False)
        self.buffer.setClearColor(core.LColor(*clear_color))
        self.buffer.setClearColorActive(True)
        self.color_texture = core.Texture(self.name + "_color")
        self.buffer.addRenderTexture(self.color_texture, core.GraphicsOutput.RTMBindOrCopy,
                                     core.GraphicsOutput.RTPColor)
        # Panda places display regions by fractions of the buffer and rounds to pixels (x * size + 0.5): k / W
        # lands exactly on pixel k, so tile k covers exactly the pixels gltensor.Atlas reads as tile k.
        self.buffer.getDisplayRegion(0).setActive(False)  # the buffer's own full-size region draws nothing
        lens = _default_lens(width, height, lens, fov, near, far)
        self.cameras, self.display_regions = [], []
        for k in range(count):
            row, col = divmod(k, cols)  # row 0 is the top row on screen, i.e. the highest GL y
            frame = (col * width / W, (col + 1) * width / W, 1 - (row + 1) * height / H, 1 - row * height / H)
            cam = base.makeCamera(self.buffer, displayRegion=frame, lens=lens.makeCopy(),
                                  camName="%s_cam%d" % (self.name, k))
            if camera_mask is not None:
                cam.node().setCameraMask(camera_mask)
            cam.reparentTo(parent if parent is not None else base.render)
            self.cameras.append(cam)
            self.display_regions.append(cam.node().getDisplayRegion(0))
        self._watch = _DrawWatch(self.display_regions[0])
        self._kw = dict(backend=backend, cuda_device=cuda_device)
        self._atlas = None
        self._key = None

    @property
    def frames(self):
        return self._watch.frames

    def _ensure(self):
        self._watch.require(self.name)
        state = self._watch.state
        state.make_current()
        tex, gsg = self.color_texture, self.buffer.getGsg()
        name = native_id(tex, gsg)
        rows, cols = self.tiles
        h, w = self.tile_size
        region = _region_of(tex, (0, 0, cols * w, rows * h))
        if self._atlas is None or self._key != (name, region):
            if self._atlas is not None:
                self._atlas.close()
            kw = dict(self._kw, tile_size=(h, w), count=self.count)
            if region is not None:
                kw["region"] = region
            self._atlas = _gt.Atlas(name, gl_target(tex), **kw)
            self._key = (name, region)
        return self._atlas

    @property
    def atlas(self):
        """The gltensor.Atlas (after the first frame)."""
        return self._ensure()

    @property
    def backend(self):
        """The backend reads use ("cuda" or "cpu"); the one asked for ("auto" ...) until the first read."""
        return self._atlas.backend if self._atlas is not None else self._kw["backend"]

    def perceive(self, *args, **kwargs):
        """Deprecated second name of read() (removed in the next release)."""
        warn_renamed(self, "perceive", "read")
        return self.read(*args, **kwargs)

    def read(self, to_float=True, **read_kwargs):
        """(count, H, W, 3) RGB of the last frame, each tile upright; read_kwargs as Atlas.read."""
        read_kwargs.setdefault("channels", "rgb")
        read_kwargs.setdefault("dtype", "float32" if to_float else "uint8")
        return _torch().from_dlpack(self._ensure().read(**read_kwargs))

    def close(self):
        if self._atlas is not None:
            try:
                self._watch.state.make_current()
            except _gt.GLTensorError:
                pass
            self._atlas.close()
            self._atlas = None
        if self.buffer is not None:
            self._watch.close()
            for cam in self.cameras:
                cam.removeNode()
            self.base.graphicsEngine.removeWindow(self.buffer)
            self.buffer = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
