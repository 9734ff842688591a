"""Panda3D: captures of render textures, sensors, batches, resizing, and the first frame.

One ShowBase for the module (it is a process-wide singleton), offscreen through Panda's EGL display
(p3headlessgl). Every capture is compared pixel for pixel with the engine's own readback of the same
texture (GraphicsEngine.extractTextureData -> getRamImageAs("RGB"), bottom-up rows) and with the
buffer's screenshot (glReadPixels of the framebuffer, BGR(A) RAM image), at a non-power-of-two size.
"""

import numpy as np
import pytest

pytest.importorskip("panda3d")
torch = pytest.importorskip("torch")

import gltensor  # noqa: E402
from gltensor import panda3d as gp  # noqa: E402

W, H = 97, 61  # neither a power of two nor a multiple of 4 (row alignment)


@pytest.fixture(scope="module")
def base():
    gp.configure("win-size 32 32\n")
    from direct.showbase.ShowBase import ShowBase
    from panda3d.core import AmbientLight, DirectionalLight

    sb = ShowBase(windowType="offscreen")
    # A model shipped in the panda3d wheel (panda3d/models/smiley.egg.pz, textured with maps/smiley.rgb), lit,
    # and a red box above it so that an upside-down image shows.
    smiley = sb.loader.loadModel("models/smiley")
    smiley.reparentTo(sb.render)
    box = sb.loader.loadModel("models/box")
    box.reparentTo(sb.render)
    box.setPos(-0.5, 0, 1.6)
    box.setScale(1.0)
    box.setColor(1, 0, 0, 1)
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
def make_camera(base, p3d_backend):
    made = []

    def make(cls=gp.RGBCamera, w=W, h=H, pos=(0, -7, 0.4), **kwargs):
        cam = cls(base, w, h, backend=p3d_backend, **kwargs)
        cam.camera.setPos(*pos)
        cam.camera.lookAt(0, 0, 0.4)
        made.append(cam)
        return cam

    yield make
    for cam in made:
        cam.close()


def engine_rgb(base, tex):
    """The engine's own CPU readback of the texture, top row first, RGB."""
    assert base.graphicsEngine.extractTextureData(tex, base.win.getGsg())
    h, w = tex.getYSize(), tex.getXSize()
    return np.frombuffer(bytes(tex.getRamImageAs("RGB")), np.uint8).reshape(h, w, 3)[::-1]


def screenshot_rgb(output):
    """The framebuffer read back by Panda (RAM image in BGR(A) order, bottom-up), as RGB top row first."""
    shot = output.getScreenshot()
    c = shot.getNumComponents()
    bgr = np.frombuffer(bytes(shot.getRamImage()), np.uint8).reshape(shot.getYSize(), shot.getXSize(), c)
    return bgr[::-1, :, [2, 1, 0]]


def assert_equal(got, ref):
    got = got.cpu().numpy()
    assert got.shape == ref.shape
    diff = int((got != ref).any(axis=-1).sum())
    assert diff == 0, "%d pixels differ" % diff


def test_rgb_camera_equals_engine_readback(base, make_camera):
    cam = make_camera()
    base.graphicsEngine.renderFrame()
    x = cam.read(to_float=False)
    assert x.shape == (H, W, 3) and x.dtype == torch.uint8
    assert x.device.type == cam.texture_capture.backend
    ref = engine_rgb(base, cam.color_texture)
    assert_equal(x, ref)
    assert_equal(x, screenshot_rgb(cam.buffer))
    # lit and textured: many colours, not a flat clear
    assert len(np.unique(ref.reshape(-1, 3), axis=0)) > 50
    # upright: the red box is above the smiley, so red pixels lie in the top half
    r, g, b = (ref[..., i].astype(int) for i in range(3))
    red = (r > 40) & (r > 2 * g) & (r > 2 * b)
    rows = np.nonzero(red)[0]
    assert rows.size > 20 and rows.mean() < H / 2
    f = cam.read()  # float32 in [0, 1], same pixels
    assert f.dtype == torch.float32
    assert torch.equal((f.cpu() * 255).round().to(torch.uint8), x.cpu())


def test_next_frame_is_new(base, make_camera):
    cam = make_camera()
    base.graphicsEngine.renderFrame()
    a = cam.read(to_float=False).cpu().clone()
    cam.camera.setX(1.5)
    base.graphicsEngine.renderFrame()
    b = cam.read(to_float=False)
    assert not torch.equal(a, b.cpu())
    assert_equal(b, engine_rgb(base, cam.color_texture))


def test_capture_texture_and_output(base, p3d_backend):
    from panda3d.core import GraphicsOutput, Texture
    tex = Texture("win_color")
    base.win.addRenderTexture(tex, GraphicsOutput.RTMBindOrCopy, GraphicsOutput.RTPColor)
    try:
        base.graphicsEngine.renderFrame()
        with gp.capture_output(base.win, backend=p3d_backend) as cap:
            assert cap.texture == tex
            x = cap.tensor(channels="rgb")
            assert x.shape == (base.win.getYSize(), base.win.getXSize(), 3)
            assert_equal(x, engine_rgb(base, tex))
        with gp.capture_texture(tex, base.win.getGsg(), backend=p3d_backend) as cap:
            assert cap.capture.name == gp.native_id(tex, base.win.getGsg())
            rgba = cap.tensor()
            assert rgba.shape[-1] == 4
            assert_equal(rgba[..., :3], engine_rgb(base, tex))
        with gp.capture_camera(base.cam, backend=p3d_backend) as cap:
            assert cap.texture == tex
    finally:
        base.win.clearRenderTextures()


def test_depth_camera_equals_engine_readback(base, make_camera):
    cam = make_camera(gp.DepthCamera, near=1.0, far=50.0)
    base.graphicsEngine.renderFrame()
    d = cam.read()
    assert d.shape == (H, W, 1) and d.dtype == torch.float32
    tex = cam.depth_texture
    assert base.graphicsEngine.extractTextureData(tex, base.win.getGsg())
    ref = np.frombuffer(bytes(tex.getRamImage()), np.float32).reshape(H, W, 1)[::-1]
    assert np.array_equal(d.cpu().numpy(), ref)
    assert ref.min() < 0.99 and ref.max() == 1.0  # something in front of the far plane, background at 1
    lin = cam.read(linear=True).cpu().numpy()
    expect = (50.0 * 1.0) / (50.0 - ref.astype(np.float64) * (50.0 - 1.0))
    np.testing.assert_allclose(lin, expect, rtol=1e-5)


def test_resize_between_steps(base, make_camera):
    cam = make_camera(resizable=True)
    for (w, h) in ((W, H), (120, 75), (64, 37), (W, H)):
        cam.set_size(w, h)
        base.graphicsEngine.renderFrame()
        x = cam.read(to_float=False)
        assert x.shape == (h, w, 3)
        assert_equal(x, engine_rgb(base, cam.color_texture))


def test_two_cameras_one_batch(base, make_camera):
    left, right = make_camera(pos=(-3, -7, 0.4)), make_camera(pos=(3, -7, 0.4))
    batch = gp.CameraBatch([left, right])
    try:
        base.graphicsEngine.renderFrame()
        x = batch.read(to_float=False)
        assert x.shape == (2, H, W, 3)
        assert_equal(x[0], engine_rgb(base, left.color_texture))
        assert_equal(x[1], engine_rgb(base, right.color_texture))
        assert not torch.equal(x[0].cpu(), x[1].cpu())
        left.camera.setZ(1.0)  # next step: new frames in the same batch
        base.graphicsEngine.renderFrame()
        y = batch.read(to_float=False)
        assert_equal(y[0], engine_rgb(base, left.color_texture))
        assert not torch.equal(x[0].cpu(), y[0].cpu())
    finally:
        batch.close()


def test_before_first_frame_is_an_error(base, make_camera):
    from panda3d.core import Texture
    cam = make_camera()
    with pytest.raises(gp.NotRenderedError, match="renderFrame"):
        cam.read()
    with pytest.raises(gp.NotRenderedError):
        gp.capture_texture(cam.color_texture, base.win.getGsg())
    with pytest.raises(gltensor.GLTensorError):  # NotRenderedError is a GLTensorError
        gp.capture_texture(Texture("never_rendered"), base.win.getGsg())
    base.graphicsEngine.renderFrame()
    assert_equal(cam.read(to_float=False), engine_rgb(base, cam.color_texture))


def test_another_context_current_between_frames(base, make_camera, ctx):
    """A capture made with Panda's context reads correctly after another GL context was made current."""
    cam = make_camera()
    base.graphicsEngine.renderFrame()
    first = cam.read(to_float=False).cpu().clone()
    ctx.make_current()
    again = cam.read(to_float=False)
    assert torch.equal(first, again.cpu())


def test_import_error_names_pip(monkeypatch):
    import builtins
    real = builtins.__import__

    def fake(name, *a, **k):
        if name.startswith("panda3d"):
            raise ImportError("no panda3d")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", fake)
    with pytest.raises(ImportError, match="pip install panda3d"):
        gp.require_panda3d()


# ---- one set of verbs on every adapter object: read(), close(), backend; perceive() kept one release, deprecated ----


def test_cameras_read_close_backend_and_deprecated_perceive(base, make_camera, p3d_backend):
    rgb = make_camera()
    depth = make_camera(gp.DepthCamera)
    second = make_camera(pos=(0, -6, 0.4))
    assert rgb.backend == p3d_backend and depth.backend == p3d_backend  # asked for: nothing read yet
    base.graphicsEngine.renderFrame()
    x = rgb.read(to_float=False)
    assert_equal(x, engine_rgb(base, rgb.color_texture))
    with pytest.warns(DeprecationWarning, match=r"RGBCamera\.perceive\(\) is deprecated.*RGBCamera\.read\(\)"):
        assert torch.equal(rgb.perceive(to_float=False), x)
    d = depth.read(linear=True)
    with pytest.warns(DeprecationWarning, match="perceive"):
        assert torch.equal(depth.perceive(linear=True), d)
    assert rgb.backend == depth.backend == p3d_backend
    batch = gp.CameraBatch([rgb, second])
    try:
        b = batch.read(to_float=False)
        assert b.shape == (2, H, W, 3) and torch.equal(b[0], x)
        with pytest.warns(DeprecationWarning, match=r"CameraBatch\.perceive"):
            assert torch.equal(batch.perceive(to_float=False), b)
        assert batch.backend == p3d_backend
    finally:
        batch.close()
    atlas = gp.CameraAtlas(base, 2, 32, 24, backend=p3d_backend)
    try:
        assert atlas.backend == p3d_backend
        base.graphicsEngine.renderFrame()
        a = atlas.read(to_float=False)
        assert a.shape == (2, 24, 32, 3)
        with pytest.warns(DeprecationWarning, match=r"CameraAtlas\.perceive"):
            assert torch.equal(atlas.perceive(to_float=False), a)
        assert atlas.backend == p3d_backend
    finally:
        atlas.close()
    rgb.close()
    rgb.close()  # idempotent


def test_not_rendered_error_is_one_class():
    import gltensor.mujoco as gmj
    from gltensor import _adapter

    assert gp.NotRenderedError is gmj.NotRenderedError is _adapter.NotRenderedError
    assert issubclass(gp.NotRenderedError, gltensor.GLTensorError)
