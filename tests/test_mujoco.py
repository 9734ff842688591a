"""MuJoCo (gltensor.mujoco): mujoco.Renderer's multisampled offscreen buffer read into torch without
mjr_readPixels must equal the engine's own CPU readback, Renderer.render() (colour) and Renderer.render()
in depth mode, pixel for pixel, upright, at non-power-of-two sizes; per backend.

Depth is compared exactly: RendererCapture reads the window depth (the same DEPTH32F values glReadPixels
gives MuJoCo) and applies Renderer's own formula with the same float32 coefficients and the same float64
operations (an add and a division, or a multiply and a subtraction, each correctly rounded in IEEE double
on the CPU and on CUDA), then rounds to float32 as Renderer does; so no tolerance is needed.
"""

import os
import sys

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from numpy.testing import assert_array_equal  # noqa: E402

mujoco = pytest.importorskip("mujoco")
torch = pytest.importorskip("torch")

import gltensor  # noqa: E402
import gltensor.mujoco as gmj  # noqa: E402
from mujoco_scene import scene_xml  # noqa: E402

if os.environ["MUJOCO_GL"].lower() != "egl":
    pytest.skip("these tests use MuJoCo's EGL renderer (MUJOCO_GL=egl)", allow_module_level=True)


@pytest.fixture
def sim():
    """sim(height, width, offwidth=640, offheight=480) -> (model, data, renderer); renderers closed after."""
    made = []

    def make(height, width, offwidth=640, offheight=480):
        model = mujoco.MjModel.from_xml_string(scene_xml(offwidth, offheight))
        data = mujoco.MjData(model)
        mujoco.mj_forward(model, data)
        renderer = mujoco.Renderer(model, height=height, width=width)
        made.append(renderer)
        return model, data, renderer

    yield make
    for r in made:
        r.close()


@pytest.fixture
def rcap():
    """rcap(renderer, **kw) -> RendererCapture closed after the test (before its renderer)."""
    made = []

    def make(renderer, **kw):
        c = gmj.RendererCapture(renderer, **kw)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def engine_rgb(renderer, data, camera):
    renderer.disable_depth_rendering()
    renderer.update_scene(data, camera=camera)
    return renderer.render()


def engine_depth(renderer, data, camera):
    renderer.enable_depth_rendering()
    renderer.update_scene(data, camera=camera)
    try:
        return renderer.render()
    finally:
        renderer.disable_depth_rendering()


def host(x):
    return x.cpu().numpy()


def check_content(rgb):
    """Test content: several colours, and not symmetric top/bottom (so a flip would be caught)."""
    assert len(np.unique(rgb.reshape(-1, 3), axis=0)) > 20
    assert not np.array_equal(rgb, rgb[::-1])


# (height, width, offwidth, offheight): cropped from the default 640x480 buffer, and the buffer's own size
SIZES = [(97, 131, 640, 480), (75, 203, 203, 75)]
SIZE_IDS = ["97x131-of-640x480", "75x203-whole-buffer"]


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
@pytest.mark.parametrize("camera", [-1, "front", "side"])
def test_rgb_equals_renderer(sim, rcap, backend, size, camera):
    h, w, ow, oh = size
    model, data, renderer = sim(h, w, ow, oh)
    assert renderer._mjr_context.offSamples > 0  # the buffer is multisampled: this rides on the MSAA resolve
    cap = rcap(renderer, backend=backend)
    assert cap.backend == backend
    # only the renderer's bottom-left corner of the offscreen buffer is read (a region, no crop afterwards)
    assert cap.capture.region == (0, 0, w, h) and cap.capture.image_size == (ow, oh)
    for step in range(3):
        for _ in range(20):
            mujoco.mj_step(model, data)
        x = cap.render_and_read(data, camera=camera)
        assert x.dtype == torch.uint8 and tuple(x.shape) == (h, w, 3)
        assert x.device.type == backend
        ref = engine_rgb(renderer, data, camera)
        check_content(ref)
        assert_array_equal(host(x), ref)


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
@pytest.mark.parametrize("camera", [-1, "front", "ortho"])
def test_depth_equals_renderer_depth_mode(sim, rcap, backend, size, camera):
    h, w, ow, oh = size
    model, data, renderer = sim(h, w, ow, oh)
    cap = rcap(renderer, depth=True, backend=backend)
    for _ in range(30):
        mujoco.mj_step(model, data)
    z = cap.render_and_read(data, camera=camera)
    assert z.dtype == torch.float32 and tuple(z.shape) == (h, w)
    ref = engine_depth(renderer, data, camera)
    assert ref.dtype == np.float32
    assert len(np.unique(ref)) > 20 and not np.array_equal(ref, ref[::-1])  # test content
    assert_array_equal(host(z), ref)


def test_rgb_and_depth_captures_on_one_renderer(sim, rcap, backend):
    model, data, renderer = sim(61, 89)
    rgb, dep = rcap(renderer, backend=backend), rcap(renderer, depth=True, backend=backend)
    renderer.update_scene(data, camera="front")
    rgb.render()
    x = rgb.read()
    dep.render()
    z = dep.read()
    assert_array_equal(host(x), engine_rgb(renderer, data, "front"))
    assert_array_equal(host(z), engine_depth(renderer, data, "front"))


def test_two_cameras_in_one_step(sim, rcap, backend):
    model, data, renderer = sim(97, 131)
    cap = rcap(renderer, backend=backend)
    for _ in range(3):
        mujoco.mj_step(model, data)
        a = cap.render_and_read(data, camera="front")
        b = cap.render_and_read(data, camera="side")
        # a is a frame of its own: the second camera's read did not overwrite it
        ref_a, ref_b = engine_rgb(renderer, data, "front"), engine_rgb(renderer, data, "side")
        assert not np.array_equal(ref_a, ref_b)
        assert_array_equal(host(a), ref_a)
        assert_array_equal(host(b), ref_b)


def test_resize_between_steps(sim, rcap, backend):
    model, data, r1 = sim(97, 131)
    c1 = rcap(r1, backend=backend)
    mujoco.mj_step(model, data)
    x1 = c1.render_and_read(data, camera="front")
    assert_array_equal(host(x1), engine_rgb(r1, data, "front"))
    c1.close()
    r1.close()
    with pytest.raises(gltensor.ClosedError):
        c1.read()
    # a new Renderer of another size on the same model and data, next step
    r2 = mujoco.Renderer(model, height=150, width=222)
    try:
        c2 = rcap(r2, backend=backend)
        d2 = rcap(r2, depth=True, backend=backend)
        for _ in range(2):
            mujoco.mj_step(model, data)
            x2 = c2.render_and_read(data, camera="front")
            z2 = d2.render_and_read(data, camera="front")
            assert tuple(x2.shape) == (150, 222, 3) and tuple(z2.shape) == (150, 222)
            assert_array_equal(host(x2), engine_rgb(r2, data, "front"))
            assert_array_equal(host(z2), engine_depth(r2, data, "front"))
        assert tuple(x1.shape) == (97, 131, 3)  # the old frame is still there
        c2.close()
        d2.close()
    finally:
        r2.close()


@pytest.mark.parametrize("depth", [False, True], ids=["rgb", "depth"])
def test_read_before_first_frame_is_an_error(sim, rcap, backend, depth):
    model, data, renderer = sim(97, 131)
    cap = rcap(renderer, depth=depth, backend=backend)
    with pytest.raises(gmj.NotRenderedError, match="before render"):
        cap.read()
    renderer.update_scene(data)  # a scene update alone draws nothing
    with pytest.raises(gmj.NotRenderedError):
        cap.read()
    cap.render()
    ref = engine_depth(renderer, data, -1) if depth else engine_rgb(renderer, data, -1)
    assert_array_equal(host(cap.read()), ref)


def test_closed_renderer_and_capture(sim, rcap, backend):
    model, data, renderer = sim(33, 47)
    cap = rcap(renderer, backend=backend)
    cap.render_and_read(data)
    cap.close()
    cap.close()  # idempotent
    with pytest.raises(gltensor.ClosedError):
        cap.read()
    cap2 = rcap(renderer, backend=backend)
    renderer.close()
    with pytest.raises(gltensor.ClosedError, match="Renderer"):
        cap2.render()
    with pytest.raises(gltensor.InvalidArgumentError, match="MUJOCO_GL"):
        gmj.RendererCapture(renderer)


def test_missing_mujoco_names_pip_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "mujoco", None)
    with pytest.raises(ImportError, match="pip install mujoco"):
        gmj.RendererCapture(object())
