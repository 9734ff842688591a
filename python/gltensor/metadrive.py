"""MetaDrive camera sensors whose frames go to torch through gltensor (thin, over gltensor.panda3d).

    import gltensor.metadrive as gmd
    env = MetaDriveEnv(dict(image_observation=True, image_on_cuda=True, multi_thread_render=False,
                            sensors={"rgb_camera": (gmd.RGBCamera, 84, 84), "depth_camera": (gmd.DepthCamera, 84, 84)},
                            vehicle_config=dict(image_source="rgb_camera")))

MetaDrive's engine makes each sensor as ``cls(width, height, engine=engine, cuda=image_on_cuda)`` and calls
``perceive(to_float, new_parent_node, position, hpr)``; the classes here keep that interface:

* ``RGBCamera.perceive(to_float=True, ...)`` -> torch (H, W, 3) RGB, float32 in [0, 1] or uint8, top row first.
  MetaDrive's own camera returns BGR: subclass with ``CHANNELS = "bgr"`` to feed a policy trained on it.
* ``DepthCamera.perceive(...)`` -> torch float32 (H, W, 1): eye-space distance along the view axis, in the
  lens' units, from the 32-bit float depth buffer (MetaDrive's own returns an 8-bit log encoding of it).
  ``DEPTH = "window"`` gives the raw depth-buffer value in [0, 1] instead.
* ``cuda`` (MetaDrive's image_on_cuda) picks the backend: True -> frames on the GPU through CUDA-GL interop
  (one map/copy/unmap per read); False -> gltensor's CPU backend (frames in host memory), as MetaDrive's
  flag means. ``backend=`` overrides it.
* Every agent's camera in one hand-off per step: ``AgentCameras(engine, n, w, h)`` mounts one camera per
  agent and renders all of them in one frame into ONE buffer, one display region per agent, read as one
  gltensor.Atlas (``layout="batch"`` uses one sensor buffer per agent read as one gltensor.Batch instead).
  MetaDrive itself shares one camera between agents and renders a whole frame per agent.
* Threading: gltensor reads in the thread that holds Panda's GL context, the main thread with Panda's
  single-threaded pipeline. MetaDrive's default for image observations (``multi_thread_render=True``,
  ``threading-model Cull``) culls and draws in a separate thread: pass ``multi_thread_render=False`` in the env
  config (the sensors refuse to be made otherwise, with an error that says so). Seen here besides: with
  ``threading-model Cull`` Panda 1.10.16's headless EGL display (p3headlessgl, Mesa llvmpipe) makes its GL
  context in the draw thread as OpenGL ES-CM 1.1 (no shaders, no non-power-of-two textures, 16-bit colour),
  where the single-threaded pipeline gets OpenGL 4.5.

With MetaDrive importable, RGBCamera and DepthCamera subclass MetaDrive's own RGBCamera / DepthCamera: the
same buffer, lens, camera mask, shaders and tone mapping; only the readback differs (and DepthCamera skips
MetaDrive's per-frame compute pass that makes its 8-bit image). Without MetaDrive they are
``PlainRGBCamera`` / ``PlainDepthCamera``: Panda3D sensors built the way MetaDrive's ImageBuffer builds them
(makeTextureBuffer with its FrameBufferProperties, a 60-degree lens, its camera masks, its depth buffer
set-up), without MetaDrive's shaders. Both read exactly the rendered size whatever ``textures-power-2`` says.
Importing MetaDrive (this module does, where it is installed) loads MetaDrive's PRC lines (textures-power-2
none, multisampling, ...) into the process, as MetaDrive's engine module does at import.
"""

from . import panda3d as gp
from ._adapter import warn_renamed

try:
    import gltensor as _gt
except ImportError:  # pragma: no cover
    from . import _gltensor as _gt  # type: ignore

try:
    from metadrive.component.sensors.depth_camera import DepthCamera as _MDDepthCamera
    from metadrive.component.sensors.rgb_camera import RGBCamera as _MDRGBCamera
    from metadrive.constants import BKG_COLOR as _BKG, DEFAULT_SENSOR_HPR, DEFAULT_SENSOR_OFFSET, CamMask
    METADRIVE_IMPORT_ERROR = None
except ImportError as _exc:  # MetaDrive (or one of its dependencies) missing: the Plain* classes only
    _MDRGBCamera = _MDDepthCamera = None
    METADRIVE_IMPORT_ERROR = _exc
    DEFAULT_SENSOR_OFFSET, DEFAULT_SENSOR_HPR = (0.0, 0.8, 1.5), (0.0, 0.0, 0.0)  # metadrive.constants
    _BKG = (1, 1, 1)  # metadrive.constants.BKG_COLOR (white)

    class CamMask:  # metadrive.constants.CamMask bits
        RgbCam = 1 << 11
        DepthCam = 1 << 14

__all__ = ["RGBCamera", "DepthCamera", "PlainRGBCamera", "PlainDepthCamera", "AgentCameras",
           "METADRIVE_IMPORT_ERROR", "DEFAULT_SENSOR_OFFSET", "DEFAULT_SENSOR_HPR"]


def _mask(bits):
    core = gp.require_panda3d()
    return bits if isinstance(bits, core.BitMask32) else core.BitMask32(int(bits))


def _backend(cuda, backend):
    return backend if backend is not None else ("cuda" if cuda else "cpu")


class _Sensor:
    """read() (and MetaDrive's own name for it, perceive(), which MetaDrive calls) over a gltensor capture of the
    sensor's render texture; mixed into a MetaDrive-built sensor (self.engine, self.cam, self.buffer, self.lens
    exist)."""

    CHANNELS = "rgb"

    def _gt_setup(self, texture, cuda, backend):
        gp._check_threading(self.engine.graphicsEngine)  # MetaDrive's multi_thread_render draws in another thread
        self._gt_texture, self._gt_backend = texture, _backend(cuda, backend)
        drawn = [dr for dr in self.buffer.getDisplayRegions() if dr.isActive() and not dr.getCamera().isEmpty()]
        if not drawn:
            raise _gt.InvalidArgumentError("gltensor.metadrive: %s's buffer has no active display region"
                                           % type(self).__name__)
        self._gt_watch = gp._DrawWatch(drawn[-1])
        self._gt_capture = None

    @property
    def texture_capture(self):
        """The gltensor.panda3d.TextureCapture (after the first frame)."""
        self._gt_watch.require(type(self).__name__)
        if self._gt_capture is None:
            self._gt_watch.state.make_current()
            self._gt_capture = gp.TextureCapture(self._gt_texture, self.engine.win.getGsg(),
                                                 backend=self._gt_backend, gl_state=self._gt_watch.state)
        return self._gt_capture

    def perceive(self, to_float=True, new_parent_node=None, position=None, hpr=None):
        """The sensor's image, as MetaDrive's BaseCamera.perceive: with new_parent_node the camera is mounted
        there (position, hpr: MetaDrive's defaults when None), one frame is rendered (engine.taskMgr.step()),
        and the camera is put back."""
        return self._gt_mounted(lambda: self._gt_read(to_float), new_parent_node, position, hpr)

    def read(self, to_float=True, new_parent_node=None, position=None, hpr=None):
        """The sensor's image: gltensor's verb for every adapter; the same as perceive() (MetaDrive's verb,
        which MetaDrive calls and which therefore stays without a warning)."""
        return self.perceive(to_float, new_parent_node, position, hpr)

    @property
    def backend(self):
        """The backend reads use ("cuda" or "cpu"), as chosen from MetaDrive's cuda flag or backend=."""
        return self._gt_capture.backend if self._gt_capture is not None else self._gt_backend

    def close(self):
        """MetaDrive's destroy(): releases the capture and the sensor's buffer."""
        self.destroy()

    def perceive_to_slot(self, handle, new_parent_node=None, position=None, hpr=None):
        """perceive(), but the image goes into a shared slot (``SlotHandle``, e.g. a vector env worker's) with GL
        alone, on the GPU, instead of into a tensor; returns once the copy is complete. The slot reads as
        perceive() does with the read options (channels='rgb', or 'bgr' for MetaDrive's own order)."""
        def write():
            self._gt_watch.require(type(self).__name__)
            return gp.write_to_slot(handle, self._gt_texture, self.engine.win.getGsg(), gl_state=self._gt_watch.state)

        return self._gt_mounted(write, new_parent_node, position, hpr)

    def _gt_mounted(self, action, new_parent_node, position, hpr):
        saved = None
        if new_parent_node:
            saved = self.cam.getParent(), self.cam.getPos(), self.cam.getHpr()
        try:
            if saved is not None:
                self.cam.reparentTo(new_parent_node)
                self.cam.setPos(*(position if position is not None else DEFAULT_SENSOR_OFFSET))
                self.cam.setHpr(*(hpr if hpr is not None else DEFAULT_SENSOR_HPR))
                self.engine.taskMgr.step()
            return action()
        finally:
            if saved is not None:
                self.cam.reparentTo(saved[0])
                self.cam.setPos(saved[1])
                self.cam.setHpr(saved[2])

    def _gt_read(self, to_float):
        return self.texture_capture.tensor(channels=self.CHANNELS, dtype="float32" if to_float else "uint8")

    def _gt_close(self):
        if getattr(self, "_gt_capture", None) is not None:
            try:
                self._gt_watch.state.make_current()
            except _gt.GLTensorError:
                pass
            self._gt_capture.close()
            self._gt_capture = None
        if getattr(self, "_gt_watch", None) is not None:
            self._gt_watch.close()
            self._gt_watch = None


class _DepthSensor(_Sensor):
    DEPTH = "linear"
    num_channels = 1

    def _gt_read(self, to_float):
        if self.DEPTH == "window":
            return self.texture_capture.tensor(depth="window")
        core = gp.require_panda3d()
        ortho = isinstance(self.lens, core.OrthographicLens)
        return self.texture_capture.tensor(depth="linear", near=self.lens.getNear(), far=self.lens.getFar(),
                                           projection="orthographic" if ortho else "perspective")


# ---------------------------------------------------------------- sensors without MetaDrive


class _PlainBuffer:
    """The parts of MetaDrive's ImageBuffer that make a sensor: buffer, camera (mask, 60-degree lens, clear)."""

    CAM_MASK = None
    BUFFER_W = BUFFER_H = 84
    num_channels = 3

    def __init__(self, width, height, engine, *, cuda=False, backend=None):
        self.BUFFER_W, self.BUFFER_H = width, height
        self.engine = engine
        self._create_buffer(width, height)
        core = gp.require_panda3d()
        self.cam = engine.makeCamera(self.buffer, clearColor=core.LColor(*tuple(_BKG)[:3], 1))
        self.cam.node().setCameraMask(_mask(self.CAM_MASK))
        self.lens = self.cam.node().getLens()
        self.lens.setFov(60)

    def get_cam(self):
        return self.cam

    def get_lens(self):
        return self.lens

    def track(self, new_parent_node, position, hpr):
        self.cam.reparentTo(new_parent_node)
        self.cam.setPos(*position)
        self.cam.setHpr(*hpr)

    def destroy(self):
        self._gt_close()
        if self.buffer is not None:
            self.engine.graphicsEngine.removeWindow(self.buffer)
            self.buffer = None
        self.cam.removeNode()

    close = destroy


class PlainRGBCamera(_Sensor, _PlainBuffer):
    """MetaDrive-style RGB sensor on plain Panda3D: ``makeTextureBuffer(name, w, h, fbp)`` with MetaDrive's
    RGBCamera FrameBufferProperties (8-8-8 colour, no alpha; a 24-bit depth buffer, which MetaDrive's own scene
    pass has), camera mask RgbCam, clear colour white, 60-degree lens. No tone mapping (MetaDrive's shaders)."""

    CAM_MASK = CamMask.RgbCam

    def __init__(self, width, height, engine, *, cuda=False, backend=None):
        super().__init__(width, height, engine, cuda=cuda, backend=backend)
        self._gt_setup(self.buffer.getTexture(), cuda, backend)

    def _create_buffer(self, width, height):
        core = gp.require_panda3d()
        fbp = core.FrameBufferProperties()
        fbp.setRgbaBits(8, 8, 8, 0)
        fbp.setDepthBits(24)
        self.buffer = self.engine.win.makeTextureBuffer(type(self).__name__, width, height, fbp=fbp)


class PlainDepthCamera(_DepthSensor, _PlainBuffer):
    """MetaDrive-style depth sensor on plain Panda3D: a buffer with only a 32-bit float depth buffer, its
    FDepthComponent texture attached with RTMBindOrCopy/RTPDepth, as MetaDrive's DepthCamera makes it."""

    CAM_MASK = CamMask.DepthCam

    def __init__(self, width, height, engine, *, cuda=False, backend=None):
        super().__init__(width, height, engine, cuda=cuda, backend=backend)
        dr = self.cam.node().getDisplayRegion(0)
        dr.setSort(25)
        dr.disableClears()
        dr.setActive(True)
        self._gt_setup(self.depth_tex, cuda, backend)

    def _create_buffer(self, width, height):
        core = gp.require_panda3d()
        self.depth_tex = core.Texture("DepthCameraTexture")
        self.depth_tex.setFormat(core.Texture.FDepthComponent)
        fbp = core.FrameBufferProperties()
        fbp.setRgbaBits(0, 0, 0, 0)
        fbp.setAccumBits(0)
        fbp.setStencilBits(0)
        fbp.setBackBuffers(0)
        fbp.setCoverageSamples(0)
        fbp.setDepthBits(32)
        fbp.setFloatDepth(True)
        fbp.setForceHardware(True)
        fbp.setMultisamples(0)
        fbp.setSrgbColor(False)
        fbp.setStereo(False)
        buffer = self.engine.graphicsEngine.makeOutput(
            self.engine.win.getPipe(), type(self).__name__, 1, fbp, core.WindowProperties.size(width, height),
            core.GraphicsPipe.BFRefuseWindow, self.engine.win.getGsg(), self.engine.win)
        if buffer is None:
            raise _gt.GLTensorError("gltensor.metadrive: Panda3D could not make a %dx%d depth buffer" % (width, height))
        buffer.addRenderTexture(self.depth_tex, core.GraphicsOutput.RTMBindOrCopy, core.GraphicsOutput.RTPDepth)
        buffer.setSort(-1000)
        buffer.disableClears()
        buffer.removeAllDisplayRegions()
        buffer.getDisplayRegion(0).setActive(False)
        buffer.setClearDepth(1)
        buffer.setClearDepthActive(True)
        self.buffer = buffer


# ---------------------------------------------------------------- sensors over MetaDrive's own


if _MDRGBCamera is not None:
    class RGBCamera(_Sensor, _MDRGBCamera):
        """MetaDrive's RGBCamera (same buffer, effects, lens, mask) read through gltensor."""

        def __init__(self, width, height, engine, *, cuda=False, backend=None):
            _MDRGBCamera.__init__(self, width, height, engine, cuda=False)  # no cuda-python set-up: gltensor reads
            self._gt_setup(self.buffer.getTexture(), cuda, backend)

        def destroy(self):
            self._gt_close()
            _MDRGBCamera.destroy(self)

        close = destroy

    class DepthCamera(_DepthSensor, _MDDepthCamera):
        """MetaDrive's DepthCamera (same 32-bit float depth buffer, lens, mask) read through gltensor: float32
        depth, without MetaDrive's per-frame compute pass to an 8-bit image."""

        def __init__(self, width, height, engine, *, cuda=False, backend=None):
            _MDDepthCamera.__init__(self, width, height, engine, cuda=False)
            self._gt_setup(self.depth_tex, cuda, backend)

        def _dispatch_compute(self, task):  # MetaDrive's 8-bit conversion, registered as a task: not needed
            return task.cont

        def destroy(self):
            self._gt_close()
            _MDDepthCamera.destroy(self)

        close = destroy
else:
    RGBCamera, DepthCamera = PlainRGBCamera, PlainDepthCamera


# ---------------------------------------------------------------- every agent, one hand-off


def _metadrive_rgb_tag_states(engine, cameras):
    """The per-camera render states MetaDrive's RGBCamera._setup_effect gives its camera (its terrain shader)."""
    from metadrive.constants import CameraTagStateKey, Semantics
    from metadrive.engine.core.terrain import Terrain
    state = Terrain.make_render_state(engine, "terrain.vert.glsl", "terrain.frag.glsl")
    for cam in cameras:
        cam.node().setTagStateKey(CameraTagStateKey.RGB)
        cam.node().setTagState(Semantics.TERRAIN.label, state)


class AgentCameras:
    """One RGB camera per agent, all rendered in the same frame and read in ONE hand-off per step:
    read() -> torch (N, H, W, 3), camera k on agent k.

    layout="atlas" (default): one offscreen buffer, one display region per agent (MetaDrive's camera mask,
    60-degree lens, white clear, 8-8-8 colour and, with MetaDrive installed, its RGB camera's terrain shader),
    read as one gltensor.Atlas: one FBO for all agents. MetaDrive's RGBCamera also tone-maps its picture in a
    post-processing pass (FilterManager, one per buffer), which this layout does not have.
    layout="batch": one `sensor_class` sensor per agent (default RGBCamera: MetaDrive's own buffers and
    effects when MetaDrive is installed), read as one gltensor.Batch.
    """

    def __init__(self, engine, count, width, height, *, layout="atlas", cuda=False, backend=None, cols=None,
                 sensor_class=None):
        self.engine, self.count, self.layout = engine, count, layout
        gp._check_threading(engine.graphicsEngine)  # reads in this thread: a separate draw thread is refused
        backend = _backend(cuda, backend)
        self.CHANNELS = (sensor_class or RGBCamera).CHANNELS
        if layout == "atlas":
            core = gp.require_panda3d()
            fbp = core.FrameBufferProperties()
            fbp.setRgbaBits(8, 8, 8, 0)
            fbp.setDepthBits(24)
            self._atlas = gp.CameraAtlas(engine, count, width, height, cols=cols, fov=60, backend=backend,
                                         frame_buffer_properties=fbp, camera_mask=_mask(CamMask.RgbCam),
                                         clear_color=tuple(_BKG)[:3] + (1,), name="gltensor_agents")
            self.cameras = list(self._atlas.cameras)
            self.sensors = []
            if _MDRGBCamera is not None:
                _metadrive_rgb_tag_states(engine, self.cameras)
        elif layout == "batch":
            cls = sensor_class or RGBCamera
            self.sensors = [cls(width, height, engine, cuda=cuda, backend=backend) for _ in range(count)]
            self.cameras = [s.cam for s in self.sensors]
            self._batch = gp.CameraBatch(self.sensors)
        else:
            raise _gt.InvalidArgumentError("gltensor.metadrive.AgentCameras: layout must be 'atlas' or 'batch', "
                                           "got %r" % (layout,))

    def track(self, nodes, position=None, hpr=None):
        """Mount camera k on nodes[k] (e.g. vehicle.origin) at position/hpr (MetaDrive's defaults when None)."""
        if len(nodes) != self.count:
            raise _gt.InvalidArgumentError("gltensor.metadrive.AgentCameras: %d nodes for %d cameras"
                                           % (len(nodes), self.count))
        for cam, node in zip(self.cameras, nodes):
            cam.reparentTo(node)
            cam.setPos(*(position if position is not None else DEFAULT_SENSOR_OFFSET))
            cam.setHpr(*(hpr if hpr is not None else DEFAULT_SENSOR_HPR))

    def _read(self, kwargs):
        if self.layout == "atlas":
            return self._atlas.read(**kwargs)
        return self._batch.read(**kwargs)

    @property
    def backend(self):
        """The backend reads use ("cuda" or "cpu"); the one asked for until the first read."""
        return (self._atlas if self.layout == "atlas" else self._batch).backend

    def perceive(self, *args, **kwargs):
        """Deprecated second name of read() (removed in the next release)."""
        warn_renamed(self, "perceive", "read")
        return self.read(*args, **kwargs)

    def read(self, to_float=True, new_parent_nodes=None, position=None, hpr=None, **read_kwargs):
        """Every agent's image of the last frame; with new_parent_nodes the cameras are mounted there (as
        track()) and ONE frame is rendered for all (engine.taskMgr.step()) first."""
        if new_parent_nodes is not None:
            self.track(new_parent_nodes, position, hpr)
            self.engine.taskMgr.step()
        read_kwargs.setdefault("channels", self.CHANNELS)
        return self._read(dict(read_kwargs, to_float=to_float))

    def destroy(self):
        if self.layout == "atlas":
            self._atlas.close()
        else:
            self._batch.close()
            for s in self.sensors:
                s.destroy()

    close = destroy

