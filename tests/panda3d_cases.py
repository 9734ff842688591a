"""Every gltensor.panda3d path under one Panda3D configuration, against Panda's own readback of the same frame.

Run by test_panda3d_prc.py in a subprocess per configuration (Panda reads its PRC when ShowBase opens its
window, and a process hosts one ShowBase), with GLTENSOR_P3D_PRC set to
  default    Panda's defaults as a plain ShowBase or MetaDrive user has them: p3headlessgl, and render textures
             padded to powers of two (97x61 -> 128x64, 84x84 -> 128x128, 320x240 -> 512x256);
  configure  gltensor.panda3d.configure() (textures-power-2 none, ...): no padding;
  metadrive  the lines MetaDrive's EngineCore loads (textures-power-2 none, framebuffer-multisample 1,
             multisamples 8) and its 1x1 main window.
The reference is GraphicsEngine.extractTextureData -> getRamImage(): BGR(A) bytes, rows bottom-up, the full
(padded) texture, which the reference crops to the image at the lower-left corner. It also holds the forum
interop recipe's pitfalls, each a test: context not bound, padding, width/height order, bottom-up rows,
BGRA vs RGBA.
"""

import ctypes
import ctypes.util
import os
import sys

import numpy as np
import pytest

pytest.importorskip("panda3d")
torch = pytest.importorskip("torch")

import gltensor  # noqa: E402
from gltensor import panda3d as gp  # noqa: E402

PRC = os.environ.get("GLTENSOR_P3D_PRC", "configure")
SIZES = [(97, 61), (84, 84), (128, 128), (320, 240)]
SIZE_IDS = ["%dx%d" % s for s in SIZES]
METADRIVE_PRC = "textures-power-2 none\nframebuffer-multisample 1\nmultisamples 8\naudio-library-name null\n"


def pow2(n):
    return 1 << (n - 1).bit_length()


@pytest.fixture(scope="module")
def base():
    from panda3d.core import AmbientLight, DirectionalLight, loadPrcFileData
    if PRC == "configure":
        gp.configure("win-size 32 32\n")
    elif PRC == "metadrive":
        loadPrcFileData("metadrive", METADRIVE_PRC + "win-size 1 1\n")
    elif PRC != "default":
        raise ValueError("GLTENSOR_P3D_PRC=%r: expected default, configure or metadrive" % PRC)
    from direct.showbase.ShowBase import ShowBase

    sb = ShowBase(windowType="offscreen")
    smiley = sb.loader.loadModel("models/smiley")
    smiley.reparentTo(sb.render)
    # A red box above the smiley and a green one to its left: an image upside down, mirrored, transposed or
    # with red and blue swapped shows.
    for pos, color in (((-0.5, 0, 1.6), (1, 0, 0, 1)), ((-3.2, 0, -0.5), (0, 1, 0, 1))):
        box = sb.loader.loadModel("models/box")
        box.reparentTo(sb.render)
        box.setPos(*pos)
        box.setColor(*color)
    sun = sb.render.attachNewNode(DirectionalLight("sun"))
    sun.setHpr(30, -40, 0)
    amb = sb.render.attachNewNode(AmbientLight("amb"))
    amb.node().setColor((0.25, 0.25, 0.25, 1))
    sb.render.setLight(sun)
    sb.render.setLight(amb)
    yield sb
    sb.destroy()


@pytest.fixture
def p3d_backend(backend, base):
    if backend == "cuda" and "nvidia" not in base.win.getGsg().getDriverVendor().lower():
        pytest.skip("Panda3D's GL context runs on %s, not on the CUDA device" % base.win.getGsg().getDriverRenderer())
    return backend


@pytest.fixture
def made(base):
    objs = []
    yield objs
    for o in reversed(objs):  # sensors and captures close; camera NodePaths are removed; buffers go last
        if hasattr(o, "close"):
            o.close()
        elif hasattr(o, "removeNode"):
            o.removeNode()
        else:
            base.graphicsEngine.removeWindow(o)


def aim(cam, x=0.0):
    cam.setPos(x, -7, 0.4)
    cam.lookAt(x * 0.5, 0, 0.4)


def pads():
    """Whether Panda pads render textures in this process. Importing MetaDrive (gltensor.metadrive does, where
    it is installed) loads MetaDrive's PRC lines, textures-power-2 none among them, into every ShowBase."""
    from panda3d.core import ConfigVariableString
    value = ConfigVariableString("textures-power-2").getValue()
    if PRC == "default" and "metadrive" not in sys.modules:
        assert value != "none"
    return value != "none"


def padded_as_configured(tex, w, h):
    """The texture is padded exactly as this configuration makes Panda pad it (a test of the setup itself)."""
    if pads():
        assert (tex.getXSize(), tex.getYSize()) == (pow2(w), pow2(h))
    else:
        assert (tex.getXSize(), tex.getYSize()) == (w, h)
    assert gp.image_size(tex) == (w, h)


def ram_image(base, tex):
    """Panda's readback of the texture as stored in RAM: BGR(A) (or one float channel), rows bottom-up,
    cropped to the image (lower-left corner of a padded texture)."""
    assert base.graphicsEngine.extractTextureData(tex, base.win.getGsg())
    X, Y = tex.getXSize(), tex.getYSize()
    w, h = gp.image_size(tex)
    dtype = np.float32 if tex.getComponentType() == tex.TFloat else np.uint8
    a = np.frombuffer(bytes(tex.getRamImage()), dtype).reshape(Y, X, -1)
    return a[:h, :w]


def ram_rgb(base, tex):
    """The reference image as a network wants it: RGB, top row first."""
    a = ram_image(base, tex)
    return a[::-1, :, [2, 1, 0]]


def assert_equal(got, ref):
    got = got.cpu().numpy() if hasattr(got, "cpu") else np.asarray(got)
    assert got.shape == ref.shape, "shape %s, expected %s" % (got.shape, ref.shape)
    diff = int((got != ref).reshape(ref.shape[0], ref.shape[1], -1).any(axis=-1).sum())
    assert diff == 0, "%d of %d pixels differ" % (diff, ref.shape[0] * ref.shape[1])


def rendered(ref):
    """Not a flat clear: the scene is in the picture."""
    assert len(np.unique(ref.reshape(-1, ref.shape[-1]), axis=0)) > 20


# ---------------------------------------------------------------- every path, every size


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_rgb_camera(base, made, p3d_backend, size):
    w, h = size
    cam = gp.RGBCamera(base, w, h, backend=p3d_backend)
    made.append(cam)
    aim(cam.camera)
    base.graphicsEngine.renderFrame()
    x = cam.read(to_float=False)
    padded_as_configured(cam.color_texture, w, h)
    assert x.shape == (h, w, 3) and x.dtype == torch.uint8
    assert cam.texture_capture.size == (w, h)
    ref = ram_rgb(base, cam.color_texture)
    rendered(ref)
    assert_equal(x, ref)
    f = cam.read()
    assert f.shape == (h, w, 3) and f.dtype == torch.float32
    assert torch.equal((f.cpu() * 255).round().to(torch.uint8), x.cpu())
    chw = cam.read(to_float=False, layout="chw")
    assert torch.equal(chw.cpu(), x.cpu().permute(2, 0, 1))


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_depth_camera(base, made, p3d_backend, size):
    w, h = size
    cam = gp.DepthCamera(base, w, h, near=1.0, far=50.0, backend=p3d_backend)
    made.append(cam)
    aim(cam.camera)
    base.graphicsEngine.renderFrame()
    d = cam.read()
    padded_as_configured(cam.depth_texture, w, h)
    assert d.shape == (h, w, 1) and d.dtype == torch.float32
    ref = ram_image(base, cam.depth_texture)[::-1]
    assert ref.min() < 0.99 and ref.max() == 1.0
    assert np.array_equal(d.cpu().numpy(), ref)
    lin = cam.read(linear=True).cpu().numpy()
    np.testing.assert_allclose(lin, 50.0 / (50.0 - ref.astype(np.float64) * 49.0), rtol=1e-5)


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_camera_batch(base, made, p3d_backend, size):
    w, h = size
    cams = [gp.RGBCamera(base, w, h, backend=p3d_backend) for _ in range(3)]
    made.extend(cams)
    for k, c in enumerate(cams):
        aim(c.camera, 1.5 * (k - 1))
    batch = gp.CameraBatch(cams)
    made.append(batch)
    base.graphicsEngine.renderFrame()
    x = batch.read(to_float=False)
    assert x.shape == (3, h, w, 3)
    for k, c in enumerate(cams):
        assert_equal(x[k], ram_rgb(base, c.color_texture))
    assert not torch.equal(x[0].cpu(), x[2].cpu())


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_camera_atlas(base, made, p3d_backend, size):
    w, h = size
    n = 5  # a 2x3 grid with one tile unused: rows and columns both matter
    atlas = gp.CameraAtlas(base, n, w, h, backend=p3d_backend)
    made.append(atlas)
    for k, c in enumerate(atlas.cameras):
        aim(c, 0.8 * (k - 2))
    base.graphicsEngine.renderFrame()
    x = atlas.read(to_float=False)
    assert x.shape == (n, h, w, 3) and atlas.tiles == (2, 3)
    whole = ram_rgb(base, atlas.color_texture)  # (2h, 3w, 3), top row first
    assert whole.shape == (2 * h, 3 * w, 3)
    for k in range(n):
        row, col = divmod(k, 3)
        assert_equal(x[k], whole[row * h:(row + 1) * h, col * w:(col + 1) * w])
        rendered(whole[row * h:(row + 1) * h, col * w:(col + 1) * w])
    assert not torch.equal(x[0].cpu(), x[4].cpu())
    # each tile is what that camera sees alone: the display region's capture equals its tile
    with gp.capture_display_region(atlas.display_regions[4], backend=p3d_backend) as cap:
        assert cap.size == (w, h)
        assert_equal(cap.tensor(channels="rgb"), x[4].cpu().numpy())


def texture_buffer(base, made, w, h, rgb_only=False):
    """A buffer made the way most Panda programs (and MetaDrive's ImageBuffer) make one: makeTextureBuffer."""
    from panda3d.core import FrameBufferProperties
    fbp = None
    if rgb_only:
        fbp = FrameBufferProperties()
        fbp.setRgbaBits(8, 8, 8, 0)  # MetaDrive's RGBCamera: no alpha
    buf = base.win.makeTextureBuffer("tb%dx%d" % (w, h), w, h, fbp=fbp) if fbp else \
        base.win.makeTextureBuffer("tb%dx%d" % (w, h), w, h)
    made.append(buf)
    cam = base.makeCamera(buf)
    aim(cam)
    made.append(cam)
    return buf, cam


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
@pytest.mark.parametrize("rgb_only", [False, True], ids=["rgba8", "rgb8"])
def test_capture_functions(base, made, p3d_backend, size, rgb_only):
    w, h = size
    buf, cam = texture_buffer(base, made, w, h, rgb_only)
    base.graphicsEngine.renderFrame()
    tex = buf.getTexture()
    padded_as_configured(tex, w, h)
    ref = ram_rgb(base, tex)
    rendered(ref)
    gsg = base.win.getGsg()
    for make in (lambda: gp.capture_texture(tex, gsg, backend=p3d_backend),
                 lambda: gp.capture_output(buf, backend=p3d_backend),
                 lambda: gp.capture_display_region(buf.getDisplayRegion(1), backend=p3d_backend),
                 lambda: gp.capture_camera(cam, backend=p3d_backend)):
        with make() as cap:
            assert cap.texture == tex and cap.size == (w, h)
            x = cap.tensor(channels="rgb")
            assert x.shape == (h, w, 3)
            assert_equal(x, ref)
            assert cap.tensor().shape == (h, w, 4 if not rgb_only or cap.capture.channels == 4 else 3)


def test_rect_of_the_image(base, made, p3d_backend):
    """rect= reads a part of the image (GL lower-left origin); outside the image is refused."""
    buf, _ = texture_buffer(base, made, 97, 61)
    base.graphicsEngine.renderFrame()
    tex = buf.getTexture()
    ref = ram_image(base, tex)  # bottom-up BGRA
    with gp.capture_texture(tex, base.win.getGsg(), backend=p3d_backend, rect=(10, 5, 40, 30)) as cap:
        assert cap.size == (40, 30)
        assert_equal(cap.tensor(channels="bgr", flip=False), ref[5:35, 10:50, :3])
    with pytest.raises(gltensor.InvalidArgumentError, match="97x61"):
        gp.capture_texture(tex, base.win.getGsg(), backend=p3d_backend, rect=(60, 0, 40, 61))


def test_resize_follows_padding(base, made, p3d_backend):
    """A resized buffer gets a new (differently padded) texture; the next read follows it."""
    cam = gp.RGBCamera(base, 97, 61, backend=p3d_backend, resizable=True)
    made.append(cam)
    aim(cam.camera)
    for (w, h) in ((97, 61), (130, 75), (64, 64), (97, 61)):
        cam.set_size(w, h)
        base.graphicsEngine.renderFrame()
        x = cam.read(to_float=False)
        assert x.shape == (h, w, 3)
        assert_equal(x, ram_rgb(base, cam.color_texture))


# ---------------------------------------------------------------- the forum recipe's pitfalls


class _NoContext:
    """Leaves no GL context current in this thread (as after another library released its own)."""

    def __enter__(self):
        egl = ctypes.CDLL(ctypes.util.find_library("EGL") or "libEGL.so.1")
        egl.eglGetCurrentDisplay.restype = ctypes.c_void_p
        egl.eglMakeCurrent.argtypes = [ctypes.c_void_p] * 4
        dpy = egl.eglGetCurrentDisplay()
        assert dpy, "Panda's EGL context should be current after renderFrame()"
        assert egl.eglMakeCurrent(dpy, None, None, None)
        egl.eglGetCurrentContext.restype = ctypes.c_void_p
        assert not egl.eglGetCurrentContext()
        return self

    def __exit__(self, *exc):
        return False


def test_pitfall_context_draw_callback_route(base, made, p3d_backend):
    """The sensors remember Panda's context in a draw callback: with no context current (or another one) at
    read time, the read makes Panda's current again and is right."""
    cam = gp.RGBCamera(base, 97, 61, backend=p3d_backend)
    made.append(cam)
    aim(cam.camera)
    base.graphicsEngine.renderFrame()
    ref = ram_rgb(base, cam.color_texture)
    with _NoContext():
        assert_equal(cam.read(to_float=False), ref)
    assert cam.frames >= 1


def test_pitfall_context_after_render_frame_route(base, made, p3d_backend):
    """A capture made right after renderFrame() (Panda's context current) keeps working after the context
    was released; made with no context current it is refused with what to do."""
    buf, _ = texture_buffer(base, made, 97, 61)
    base.graphicsEngine.renderFrame()
    tex = buf.getTexture()
    ref = ram_rgb(base, tex)
    cap = gp.capture_texture(tex, base.win.getGsg(), backend=p3d_backend)
    made.append(cap)
    with _NoContext():
        assert_equal(cap.tensor(channels="rgb"), ref)
    with _NoContext():
        with pytest.raises(gltensor.NoContextError, match="renderFrame"):
            gp.capture_texture(tex, base.win.getGsg(), backend=p3d_backend)


def test_pitfall_padding(base, made, p3d_backend):
    """Under Panda's default PRC a 97x61 buffer has a 128x64 texture; the image is the lower-left 97x61 and
    no padding column or row is handed out."""
    buf, _ = texture_buffer(base, made, 97, 61)
    base.graphicsEngine.renderFrame()
    tex = buf.getTexture()
    padded_as_configured(tex, 97, 61)
    with gp.capture_output(buf, backend=p3d_backend) as cap:
        assert cap.padded == pads()
        assert cap.capture.shape == (61, 97, 4)  # the core capture reads the image only
        assert_equal(cap.tensor(channels="rgb"), ram_rgb(base, tex))


def test_pitfall_width_height_order(base, made, p3d_backend):
    """(H, W, C): 97 wide, 61 high; the green box on the left lies in the left columns."""
    cam = gp.RGBCamera(base, 97, 61, backend=p3d_backend, fov=75)
    made.append(cam)
    aim(cam.camera)
    base.graphicsEngine.renderFrame()
    x = cam.read(to_float=False).cpu().numpy().astype(int)
    assert x.shape == (61, 97, 3)
    green = (x[..., 1] > 40) & (x[..., 1] > 2 * x[..., 0]) & (x[..., 1] > 2 * x[..., 2])
    cols = np.nonzero(green)[1]
    assert cols.size > 10 and cols.mean() < 97 / 2


def test_pitfall_bottom_up_rows(base, made, p3d_backend):
    """GL (and getRamImage) rows are bottom-up; read() is top row first (the red box on top), flip=False
    gives GL's order."""
    cam = gp.RGBCamera(base, 97, 61, backend=p3d_backend)
    made.append(cam)
    aim(cam.camera)
    base.graphicsEngine.renderFrame()
    x = cam.read(to_float=False).cpu().numpy().astype(int)
    red = (x[..., 0] > 40) & (x[..., 0] > 2 * x[..., 1]) & (x[..., 0] > 2 * x[..., 2])
    rows = np.nonzero(red)[0]
    assert rows.size > 20 and rows.mean() < 61 / 2
    up = cam.read(to_float=False, flip=False)
    assert_equal(up, ram_image(base, cam.color_texture)[..., [2, 1, 0]])


def test_pitfall_bgra_vs_rgba(base, made, p3d_backend):
    """Panda's RAM image is BGRA; the GL texture (and read()) is RGBA. The red box is red, not blue."""
    cam = gp.RGBCamera(base, 97, 61, backend=p3d_backend)
    made.append(cam)
    aim(cam.camera)
    base.graphicsEngine.renderFrame()
    ram = ram_image(base, cam.color_texture)[::-1]  # top row first, BGRA
    x = cam.read(to_float=False, channels="rgba").cpu().numpy()
    assert_equal(x, ram[..., [2, 1, 0, 3]])
    assert not np.array_equal(x[..., :3], ram[..., :3])  # the scene has colour: the orders differ
    assert_equal(cam.read(to_float=False, channels="bgr"), ram[..., :3])


# ---------------------------------------------------------------- gltensor.metadrive sensors


def md_classes(kind):
    """The sensor classes to test: the Plain* ones always; MetaDrive's subclasses too where MetaDrive imports and
    can build its own sensor here (its RGBCamera asks for 16x multisampling, which Mesa's llvmpipe lacks)."""
    from gltensor import metadrive as gmd
    plain = gmd.PlainRGBCamera if kind == "rgb" else gmd.PlainDepthCamera
    classes = [pytest.param(plain, id="plain")]
    real = gmd.RGBCamera if kind == "rgb" else gmd.DepthCamera
    reason = "MetaDrive does not import here (%s)" % gmd.METADRIVE_IMPORT_ERROR
    classes.append(pytest.param(real, id="metadrive", marks=[] if real is not plain else
                                pytest.mark.skip(reason=reason)))
    return classes


def build_md(base, made, cls, w, h, backend):
    if not hasattr(base, "mode"):
        base.mode = "offscreen"  # MetaDrive's engine attribute, read by ImageBuffer.destroy()
    try:
        s = cls(w, h, base, backend=backend)
    except Exception as exc:  # MetaDrive's own set-up failing here is not gltensor's to test
        if cls.__module__ == "gltensor.metadrive" and cls.__name__.startswith("Plain"):
            raise
        pytest.skip("MetaDrive's %s cannot be built on %s: %s" % (cls.__bases__[-1].__name__,
                                                                  base.win.getGsg().getDriverRenderer(), exc))
    made.append(s)
    s.cam.reparentTo(base.render)
    aim(s.cam)
    return s


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
@pytest.mark.parametrize("cls", md_classes("rgb"))
def test_metadrive_rgb_camera(base, made, p3d_backend, size, cls):
    w, h = size
    s = build_md(base, made, cls, w, h, p3d_backend)
    base.graphicsEngine.renderFrame()
    x = s.perceive(to_float=False)
    tex = s.buffer.getTexture()
    padded_as_configured(tex, w, h)
    assert x.shape == (h, w, 3) and x.dtype == torch.uint8 and x.device.type == p3d_backend
    ref = ram_rgb(base, tex)
    rendered(ref)
    assert_equal(x, ref)
    f = s.perceive()
    assert f.dtype == torch.float32 and torch.equal((f.cpu() * 255).round().to(torch.uint8), x.cpu())
    assert s.lens.getFov()[0] == pytest.approx(60)
    assert s.cam.node().getCameraMask().getWord() == 1 << 11  # MetaDrive's CamMask.RgbCam


@pytest.mark.parametrize("cls", md_classes("rgb"))
def test_metadrive_perceive_new_parent_node(base, made, p3d_backend, cls):
    """perceive(to_float, new_parent_node, position, hpr) renders one frame from there and puts the camera back."""
    s = build_md(base, made, cls, 97, 61, p3d_backend)
    agent = base.render.attachNewNode("agent")
    made.append(agent)
    agent.setPos(0.5, -8, 0)
    base.graphicsEngine.renderFrame()
    before = s.perceive(to_float=False).cpu().clone()
    parent, pos = s.cam.getParent(), s.cam.getPos()
    x = s.perceive(False, agent, (0.0, 0.8, 1.0), (0.0, -5.0, 0.0))
    assert_equal(x, ram_rgb(base, s.buffer.getTexture()))
    assert not torch.equal(before, x.cpu())
    assert s.cam.getParent() == parent and s.cam.getPos() == pos


@pytest.mark.parametrize("size", [(97, 61), (84, 84)], ids=["97x61", "84x84"])
@pytest.mark.parametrize("cls", md_classes("depth"))
def test_metadrive_depth_camera(base, made, p3d_backend, size, cls):
    w, h = size
    s = build_md(base, made, cls, w, h, p3d_backend)
    s.lens.setNearFar(1.0, 50.0)
    base.graphicsEngine.renderFrame()
    d = s.perceive()
    padded_as_configured(s.depth_tex, w, h)
    assert d.shape == (h, w, 1) and d.dtype == torch.float32
    ref = ram_image(base, s.depth_tex)[::-1].astype(np.float64)
    assert ref.min() < 0.99 and ref.max() == 1.0
    off_grid = np.abs(ref * 255 - np.round(ref * 255)) > 1e-3  # a float depth buffer, not an 8-bit encoding
    assert off_grid.sum() > 100
    np.testing.assert_allclose(d.cpu().numpy(), 50.0 / (50.0 - ref * 49.0), rtol=1e-5)


def test_metadrive_engine_construction(base, made, p3d_backend):
    """MetaDrive's engine makes image sensors as cls(*args, engine=engine, cuda=image_on_cuda); cuda picks the
    backend (MetaDrive's flag: frames on the GPU or in host memory)."""
    from gltensor import metadrive as gmd
    cpu = gmd.PlainRGBCamera(97, 61, engine=base, cuda=False)
    made.append(cpu)
    base.graphicsEngine.renderFrame()
    assert cpu.perceive(to_float=False).device.type == "cpu"
    if p3d_backend == "cuda":
        gpu = gmd.PlainRGBCamera(97, 61, engine=base, cuda=True)
        made.append(gpu)
        base.graphicsEngine.renderFrame()
        assert gpu.perceive(to_float=False).device.type == "cuda"


@pytest.mark.parametrize("cls", md_classes("rgb"))
def test_metadrive_read_close_backend(base, made, p3d_backend, cls):
    """The verbs every adapter object has: read() (the same as MetaDrive's perceive(), which stays without a
    warning because MetaDrive calls it), close() and backend."""
    s = build_md(base, made, cls, 97, 61, p3d_backend)
    assert s.backend == p3d_backend
    base.graphicsEngine.renderFrame()
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        assert torch.equal(s.read(to_float=False), s.perceive(to_float=False))
    assert s.backend == p3d_backend
    made.remove(s)
    s.close()
    assert s.buffer is None


def test_metadrive_agent_cameras_read_and_deprecated_perceive(base, made, p3d_backend):
    from gltensor import metadrive as gmd
    agents = gmd.AgentCameras(base, 2, 32, 24, backend=p3d_backend)
    made.append(agents)
    assert agents.backend == p3d_backend
    base.graphicsEngine.renderFrame()
    a = agents.read(to_float=False)
    assert a.shape == (2, 24, 32, 3)
    with pytest.warns(DeprecationWarning, match=r"AgentCameras\.perceive\(\) is deprecated"):
        assert torch.equal(agents.perceive(to_float=False), a)
    assert agents.backend == p3d_backend


@pytest.mark.parametrize("layout", ["atlas", "batch"])
def test_metadrive_agent_cameras(base, made, p3d_backend, layout):
    """Every agent's camera in one frame and one read: (N, H, W, 3), camera k mounted on agent k."""
    from gltensor import metadrive as gmd
    n, w, h = 4, 97, 61
    agents = []
    for k in range(n):
        a = base.render.attachNewNode("agent%d" % k)
        a.setPos(-1.5 + k, -8, -0.5)
        agents.append(a)
        made.append(a)
    cams = gmd.AgentCameras(base, n, w, h, layout=layout, backend=p3d_backend,
                            sensor_class=gmd.PlainRGBCamera if layout == "batch" else None)
    made.append(cams)
    x = cams.read(False, agents, (0.0, 0.8, 1.0), (0.0, -5.0, 0.0))
    assert x.shape == (n, h, w, 3) and x.device.type == p3d_backend
    if layout == "atlas":
        whole = ram_rgb(base, cams._atlas.color_texture)
        tiles = [whole[(k // 2) * h:(k // 2 + 1) * h, (k % 2) * w:(k % 2 + 1) * w] for k in range(n)]
    else:
        tiles = [ram_rgb(base, s.buffer.getTexture()) for s in cams.sensors]
    for k in range(n):
        assert_equal(x[k], tiles[k])
        rendered(tiles[k])
    assert not torch.equal(x[0].cpu(), x[3].cpu())
    # one camera per agent, the same view as a lone MetaDrive-style sensor mounted on that agent
    lone = gmd.PlainRGBCamera(w, h, base, backend=p3d_backend)
    made.append(lone)
    y = lone.perceive(False, agents[2], (0.0, 0.8, 1.0), (0.0, -5.0, 0.0))
    assert_equal(x[2], y.cpu().numpy())


def test_metadrive_real_interfaces(base, made):
    """Where MetaDrive imports: its engine's own setup_sensors() builds the sensors from an env-style config,
    and its ImageObservation's checks accept them."""
    md = pytest.importorskip("metadrive", reason="MetaDrive is not installed")
    import types

    from metadrive.component.sensors.base_camera import BaseCamera
    from metadrive.engine.core.engine_core import EngineCore

    from gltensor import metadrive as gmd
    assert issubclass(gmd.DepthCamera, BaseCamera) and gmd.DepthCamera.num_channels == 1
    assert issubclass(gmd.RGBCamera, BaseCamera) and gmd.RGBCamera.num_channels == 3
    base.mode = "offscreen"
    base.global_config = {"sensors": {"depth": (gmd.DepthCamera, 97, 61)}, "image_on_cuda": False}
    base.sensors = {}
    base.add_image_sensor = types.MethodType(EngineCore.add_image_sensor, base)
    EngineCore.setup_sensors(base)
    s = base.sensors["depth"]
    made.append(s)
    s.cam.reparentTo(base.render)
    aim(s.cam)
    base.taskMgr.step()  # MetaDrive steps its task manager; the skipped 8-bit compute task must not fail
    d = s.perceive()
    assert d.shape == (61, 97, 1) and d.device.type == "cpu"
    np.testing.assert_array_equal(d.cpu().numpy() > 0, True)
    assert md.__name__ == "metadrive"

    # MetaDrive's own ImageObservation stacks the sensor's frames (image_on_cuda=False: a numpy stack)
    from metadrive.obs.image_obs import ImageObservation

    class Obs(ImageObservation):
        engine = property(lambda self: base)  # MetaDrive's global engine is this ShowBase here

    base.get_sensor = types.MethodType(EngineCore.get_sensor, base)
    obs = Obs(dict(base.global_config, stack_size=3), "depth", True)
    assert obs.observation_space.shape == (61, 97, 1, 3)
    base.taskMgr.step()
    stacked = obs.observe()
    np.testing.assert_array_equal(stacked[..., -1], s.perceive().numpy())


# ---------------------------------------------------------------- shared slots (a vector env worker's write)


@pytest.mark.parametrize("size", [(97, 61), (84, 84)], ids=["97x61", "84x84"])
def test_camera_write_to_slot(base, made, p3d_backend, size):
    """A camera writes its image (inside Panda's padding) into a shared slot with GL; the slot reads exactly
    what Panda rendered. Two cameras, two slots, one read."""
    w, h = size
    cams = [gp.RGBCamera(base, w, h, backend=p3d_backend) for _ in range(2)]
    made.extend(cams)
    for k, cam in enumerate(cams):
        aim(cam.camera, x=0.6 * k)
    slots = gltensor.SharedSlots(2, (w, h), backend=p3d_backend)
    made.append(slots)
    base.graphicsEngine.renderFrame()
    for k, cam in enumerate(cams):
        cam.write_to(slots.handle(k))
    x = torch.from_dlpack(slots.read(channels="rgb"))
    assert x.shape == (2, h, w, 3) and x.device.type == p3d_backend
    refs = [ram_rgb(base, cam.color_texture) for cam in cams]
    padded_as_configured(cams[0].color_texture, w, h)
    for k in range(2):
        rendered(refs[k])
        assert_equal(x[k], refs[k])
    assert not np.array_equal(refs[0], refs[1])
    img = gp.gl_image(cams[0].color_texture, base.win)
    assert img.region == (None if not pads() else (0, 0, w, h))


@pytest.mark.parametrize("cls", md_classes("rgb"))
def test_metadrive_perceive_to_slot(base, made, p3d_backend, cls):
    s = build_md(base, made, cls, 97, 61, p3d_backend)
    slots = gltensor.SharedSlots(1, (97, 61), backend=p3d_backend)
    made.append(slots)
    base.graphicsEngine.renderFrame()
    s.perceive_to_slot(slots.handle(0))
    x = torch.from_dlpack(slots.read(channels="rgb"))[0]
    assert_equal(x, ram_rgb(base, s.buffer.getTexture()))
    assert_equal(x, s.perceive(to_float=False).cpu().numpy())
