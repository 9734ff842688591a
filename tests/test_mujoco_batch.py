"""gltensor.mujoco.BatchRenderer: N MuJoCo envs drawn in one GL context into the tiles of one sheet and read at
once must give, for every env, exactly the image ``mujoco.Renderer(model, H, W)`` gives after
``update_scene(data, camera)`` and ``render()`` -- every pixel of every tile, for MuJoCo's default visuals
(shadows, reflections, 4x MSAA) and light ones, shared and per-env models, fixed and free cameras, depth and
segmentation, dm_control Physics; per backend (CUDA on the GPU machine).

GLTENSOR_MUJOCO_BATCH_BIG=1 (or -m slow) adds N = 256.
"""

import gc
import os
import sys
import weakref

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from conftest import dm_control_suite_or_skip  # noqa: E402
from numpy.testing import assert_array_equal  # noqa: E402

mujoco = pytest.importorskip("mujoco")
torch = pytest.importorskip("torch")

import gltensor  # noqa: E402
import gltensor.mujoco as gmj  # noqa: E402
from gltensor.mujoco import grid_shape  # noqa: E402
from mujoco_scene import scene_xml  # noqa: E402

if os.environ["MUJOCO_GL"].lower() != "egl":
    pytest.skip("these tests use MuJoCo's EGL renderer (MUJOCO_GL=egl)", allow_module_level=True)

XML = scene_xml(extras=True)

LIGHT = {"shadow": False, "reflection": False}
VISUALS = {  # name -> (render flags, offsamples)
    "default": ({}, 4),
    "light": (LIGHT, 4),
    "light-nomsaa": (LIGHT, 0),
}
BIG = os.environ.get("GLTENSOR_MUJOCO_BATCH_BIG") == "1"


def make_model(offsamples=4, rgba=None, light=None, box_size=None):
    m = mujoco.MjModel.from_xml_string(XML)
    m.vis.quality.offsamples = offsamples
    if rgba is not None:  # domain randomisation of what mjv_updateScene reads
        m.geom_rgba[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "box")] = rgba
    if light is not None:
        m.light_diffuse[0] = light
    if box_size is not None:
        m.geom_size[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "box")] = box_size
    return m


def make_datas(models, seed=0, steps=3):
    """One MjData per model, each in its own state (positions moved, a few steps simulated)."""
    rng = np.random.default_rng(seed)
    out = []
    for m in models:
        d = mujoco.MjData(m)
        d.qpos[:3] += rng.uniform(-.3, .3, 3)
        d.qpos[7:10] += rng.uniform(-.3, .3, 3)
        d.qvel[:] = rng.uniform(-1, 1, m.nv)
        for _ in range(steps):
            mujoco.mj_step(m, d)
        out.append(d)
    return out


def reference(models, datas, cameras, h, w, flags=None, mode="rgb", option=None):
    """Each env's image from its own mujoco.Renderer (one per distinct model), as a user renders it."""
    renderers = {}
    images = []
    try:
        for m, d, cam in zip(models, datas, cameras):
            r = renderers.get(id(m))
            if r is None:
                r = renderers[id(m)] = mujoco.Renderer(m, h, w)
                for name, value in (flags or {}).items():
                    r.scene.flags[getattr(mujoco.mjtRndFlag, "mjRND_" + name.upper())] = value
                if mode == "depth":
                    r.enable_depth_rendering()
                elif mode == "segmentation":
                    r.enable_segmentation_rendering()
            r.update_scene(d, camera=cam, scene_option=option)
            images.append(r.render().copy())
    finally:
        for r in renderers.values():
            r.close()
    return np.stack(images)


def host(x):
    return x.cpu().numpy()


def assert_tiles_equal(got, want):
    assert got.shape == want.shape, (got.shape, want.shape)
    bad = [k for k in range(len(want)) if not np.array_equal(got[k], want[k])]
    if bad:
        k = bad[0]
        diff = np.abs(got[k].astype(np.int64) - want[k].astype(np.int64))
        pytest.fail(f"{len(bad)} of {len(want)} tiles differ from Renderer.render() (first: env {k}, "
                    f"{int((diff > 0).sum())} values, max {diff.max()})")


def check_content(images):
    """The scenes are not trivial and not all equal (a tile showing another env's image would be caught)."""
    for img in images:
        assert len(np.unique(img.reshape(-1, img.shape[-1]), axis=0)) > 20
        assert not np.array_equal(img, img[::-1])
    if len(images) > 1:
        assert not np.array_equal(images[0], images[1])


@pytest.fixture
def batch():
    """batch(*args, **kw) -> BatchRenderer closed after the test."""
    made = []

    def make(*args, **kw):
        r = gmj.BatchRenderer(*args, **kw)
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()


# ---------------------------------------------------------------------------------------------- exactness

CASES = [  # (visuals, n, height, width, camera)
    ("default", 1, 61, 97, "front"),
    ("default", 4, 61, 97, "front"),
    ("default", 16, 84, 84, -1),
    ("light", 1, 61, 97, -1),
    ("light", 4, 61, 97, "side"),
    ("light", 16, 61, 97, "front"),
    ("light", 64, 84, 84, "track"),
    ("light-nomsaa", 4, 61, 97, "front"),
    ("light-nomsaa", 16, 37, 150, "ortho"),
]


@pytest.mark.parametrize("case", CASES, ids=["-".join(map(str, c)) for c in CASES])
def test_every_tile_equals_renderer(batch, backend, case):
    visuals, n, h, w, camera = case
    flags, samples = VISUALS[visuals]
    model = make_model(samples)
    datas = make_datas([model] * n, seed=n)
    r = batch(model, n, h, w, camera=camera, render_flags=flags, backend=backend)
    x = r.render_and_read(datas)
    assert r.backend == backend and x.device.type == backend  # CUDA: the batch is on the GPU
    got = host(x)
    want = reference([model] * n, datas, [camera] * n, h, w, flags)
    assert got.dtype == np.uint8 and got.shape == (n, h, w, 3) == r.shape
    check_content(want)
    assert_tiles_equal(got, want)


@pytest.mark.skipif(not BIG, reason="N = 256 takes minutes on Mesa: set GLTENSOR_MUJOCO_BATCH_BIG=1")
@pytest.mark.parametrize("visuals", ["default", "light"])
def test_256_tiles_equal_renderer(batch, backend, visuals):
    flags, samples = VISUALS[visuals]
    model = make_model(samples)
    n, h, w = 256, 84, 84
    datas = make_datas([model] * n, seed=5, steps=1)
    r = batch(model, n, h, w, camera="front", render_flags=flags, backend=backend)
    got = host(r.render_and_read(datas))
    assert_tiles_equal(got, reference([model] * n, datas, ["front"] * n, h, w, flags))


def test_frames_in_sequence_each_equal_renderer(batch):
    """State left by one render (the previous frame, other envs' draws) does not leak into the next."""
    model = make_model()
    n, h, w = 4, 61, 97
    datas = make_datas([model] * n, seed=1)
    r = batch(model, n, h, w, camera="front", render_flags=LIGHT, backend="cpu")
    for step in range(3):
        got = host(r.render_and_read(datas))
        assert_tiles_equal(got, reference([model] * n, datas, ["front"] * n, h, w, LIGHT))
        for d in datas:
            mujoco.mj_step(model, d)
    # an env with fewer geoms in view after one with many: a tile is the env's alone
    datas[0].qpos[2] = 50.0
    mujoco.mj_forward(model, datas[0])
    assert_tiles_equal(host(r.render_and_read(datas)), reference([model] * n, datas, ["front"] * n, h, w, LIGHT))


def test_per_env_models_domain_randomisation(batch):
    """One model per env: colours, light and a box's size differ per env; each tile shows its own."""
    n, h, w = 4, 61, 97
    models = [make_model(rgba=[.1 + .2 * k, .9 - .2 * k, .5, 1], light=[.3 + .15 * k] * 3,
                         box_size=[.1 + .05 * k, .2, .15]) for k in range(n)]
    datas = make_datas(models, seed=7)
    r = batch(models, n, h, w, camera="front", backend="cpu")
    got = host(r.render_and_read(datas))
    want = reference(models, datas, ["front"] * n, h, w)
    check_content(want)
    assert_tiles_equal(got, want)


def test_per_env_cameras(batch):
    """Cameras per env by name, id, -1 (free), MjvCamera; the constructor's default and a per-call override."""
    model = make_model()
    n, h, w = 5, 61, 97
    datas = make_datas([model] * n, seed=2)
    free = mujoco.MjvCamera()
    mujoco.mjv_defaultFreeCamera(model, free)
    free.azimuth, free.elevation, free.distance = 60.0, -30.0, 4.0
    cams = ["side", 0, -1, free, "ortho"]
    r = batch(model, n, h, w, camera=cams, render_flags=LIGHT, backend="cpu")
    assert_tiles_equal(host(r.render_and_read(datas)), reference([model] * n, datas, cams, h, w, LIGHT))
    cams2 = ["track", "front", 2, -1, 1]
    assert_tiles_equal(host(r.render_and_read(datas, cams2)), reference([model] * n, datas, cams2, h, w, LIGHT))
    assert_tiles_equal(host(r.render_and_read(datas, "side")), reference([model] * n, datas, ["side"] * n, h, w, LIGHT))
    # the constructor's cameras again when render() names none
    assert_tiles_equal(host(r.render_and_read(datas)), reference([model] * n, datas, cams, h, w, LIGHT))


def test_scene_option(batch):
    """scene_option= (constructor default and per render) reaches mjv_updateScene as in update_scene()."""
    model = make_model()
    n, h, w = 3, 61, 97
    datas = make_datas([model] * n, seed=4)
    opt = mujoco.MjvOption()
    opt.frame = mujoco.mjtFrame.mjFRAME_BODY
    opt.geomgroup[0] = 0  # the floor and the bodies' default group hidden: only frames stay
    r = batch(model, n, h, w, camera="front", render_flags=LIGHT, scene_option=opt, backend="cpu")
    want = reference([model] * n, datas, ["front"] * n, h, w, LIGHT, option=opt)
    assert_tiles_equal(host(r.render_and_read(datas)), want)
    plain = reference([model] * n, datas, ["front"] * n, h, w, LIGHT)
    assert not np.array_equal(want, plain)
    assert_tiles_equal(host(r.render_and_read(datas, scene_option=mujoco.MjvOption())), plain)


def render_mode_and_reference(batch, mode, cams, seed):
    """A 4-env 61x97 batch on the CPU backend in `mode` ("depth" or "segmentation"), one camera per env:
    (renderer, what its render_and_read gave, Renderer.render()'s images in that mode)."""
    model = make_model()
    n, h, w = len(cams), 61, 97
    datas = make_datas([model] * n, seed=seed)
    r = batch(model, n, h, w, camera=cams, backend="cpu", **{mode: True})
    return r, r.render_and_read(datas), reference([model] * n, datas, cams, h, w, mode=mode)


def test_depth_equals_renderer(batch):
    """Depth: (n, H, W) float32 distances equal to Renderer.render() in depth mode, every value, perspective and
    orthographic cameras in one batch; layout chw, float16 and out= on the same read."""
    r, got, want = render_mode_and_reference(batch, "depth", ["front", "ortho", -1, "side"], seed=6)
    n, h, w = 4, 61, 97
    assert got.dtype == torch.float32 and tuple(got.shape) == (n, h, w) == r.shape
    assert np.unique(want).size > 100
    assert_array_equal(host(got), want)
    assert_array_equal(host(r.read(layout="chw")), want[:, None])
    assert_array_equal(host(r.read(dtype="float16")), want.astype(np.float16))
    out = torch.empty(n, h, w)
    assert r.read(out=out) is out
    assert_array_equal(out.numpy(), want)
    with pytest.raises(gltensor.InvalidArgumentError, match="channels"):
        r.read(channels="rgb")
    with pytest.raises(gltensor.InvalidArgumentError, match="dtype"):
        r.read(dtype="uint8")


def test_segmentation_equals_renderer(batch):
    r, got, want = render_mode_and_reference(batch, "segmentation", ["front", "side", -1, "track"], seed=8)
    n, h, w = 4, 61, 97
    assert got.dtype == torch.int32 and tuple(got.shape) == (n, h, w, 2) == r.shape
    assert len(np.unique(want[..., 0])) >= 4 and (want == -1).any()
    assert_array_equal(host(got), want)


def test_read_options(batch, backend):
    """Every read option through the one Atlas read: channels, dtype, layout, out= (and stream= on CUDA)."""
    model = make_model()
    n, h, w = 4, 61, 97
    datas = make_datas([model] * n, seed=9)
    r = batch(model, n, h, w, camera="front", render_flags=LIGHT, backend=backend)
    r.render(datas)
    want = reference([model] * n, datas, ["front"] * n, h, w, LIGHT)
    assert_tiles_equal(host(r.read()), want)
    assert_array_equal(host(r.read(channels="bgr")), want[..., ::-1])
    assert_array_equal(host(r.read(channels=(2, 0))), want[..., [2, 0]])
    assert_array_equal(host(r.read(dtype="float32")), want.astype(np.float32) / np.float32(255))
    assert_array_equal(host(r.read(dtype=torch.float32, layout="chw")),
                       (want.astype(np.float32) / np.float32(255)).transpose(0, 3, 1, 2))
    assert_array_equal(host(r.read(layout="chw")), want.transpose(0, 3, 1, 2))
    out = torch.empty((n, 3, h, w), dtype=torch.uint8, device=backend)
    assert r.read(layout="chw", out=out) is out
    assert_array_equal(host(out), want.transpose(0, 3, 1, 2))
    if backend == "cuda":
        s = torch.cuda.Stream()
        x = r.read(stream=s)
        s.synchronize()
        assert_tiles_equal(host(x), want)
    else:
        with pytest.raises(gltensor.GLTensorError):
            r.read(stream=1)
    # each read is a new tensor that later renders do not overwrite
    first = r.read()
    datas[0].qpos[2] += .5
    mujoco.mj_forward(model, datas[0])
    r.render(datas)
    assert_tiles_equal(host(first), want)


# ---------------------------------------------------------------------------------------------- dm_control


def test_dm_control_physics_batch(batch):
    suite = dm_control_suite_or_skip("cheetah", "run")
    n, h, w = 4, 61, 97
    envs = [suite.load("cheetah", "run", task_kwargs={"random": k}) for k in range(n)]
    rng = np.random.default_rng(0)
    for env in envs:
        env.reset()
        spec = env.action_spec()
        for _ in range(k_steps := 4):
            env.step(rng.uniform(spec.minimum, spec.maximum, spec.shape))
        assert k_steps == 4
    physics = [env.physics for env in envs]
    for cam in (0, 1, -1):
        r = batch(physics, n, h, w, camera=cam, backend="cpu")
        got = host(r.render_and_read(physics))
        want = np.stack([p.render(h, w, camera_id=cam) for p in physics])
        check_content(want)
        assert_tiles_equal(got, want)
    # per-env cameras as dm_control names them, and the physics' model objects instead of the Physics
    cams = ["side", "back", 0, -1]
    r = batch([p.model for p in physics], n, h, w, camera=cams, backend="cpu")
    got = host(r.render_and_read(physics))
    assert_tiles_equal(got, np.stack([p.render(h, w, camera_id=c) for p, c in zip(physics, cams)]))


def test_gymnasium_half_cheetah_batch(batch):
    """Gymnasium's MuJoCo envs render through their own OffScreenViewer (a free camera it keeps): passing each
    env's model, data and that camera gives env.render() per env, frame after frame."""
    gym = pytest.importorskip("gymnasium")
    n, h, w = 3, 84, 84
    envs = [gym.make("HalfCheetah-v5", render_mode="rgb_array", width=w, height=h) for _ in range(n)]
    try:
        for k, env in enumerate(envs):
            env.reset(seed=k)
            env.action_space.seed(k)
            env.render()  # makes the env's viewer and its camera
        u = [env.unwrapped for env in envs]
        r = batch([x.model for x in u], n, h, w, backend="cpu")
        for _ in range(3):
            for env in envs:
                env.step(env.action_space.sample())
            want = np.stack([env.render() for env in envs])
            got = host(r.render_and_read([x.data for x in u], [x.mujoco_renderer.viewer.cam for x in u]))
            check_content(want)
            assert_tiles_equal(got, want)
    finally:
        for env in envs:
            env.close()


# ---------------------------------------------------------------------------------------------- viewport tiling


def test_viewport_tiling_equals_renderer_drawn_at_the_same_position(batch):
    """tiling="viewport" (n viewports of one multisampled buffer, one resolve) equals mujoco.Renderer only where
    Renderer draws at the same window position: the rasteriser's result depends on it (see docs). Pinned here:
    each tile equals a Renderer's own mjr_render at that tile's rectangle, and the tile at (0, 0) equals
    Renderer.render()."""
    model = make_model()
    n, h, w = 4, 61, 97
    datas = make_datas([model] * n, seed=10)
    r = batch(model, n, h, w, camera="front", tiling="viewport", backend="cpu")
    got = host(r.render_and_read(datas))
    ref = mujoco.Renderer(model, h, w)
    try:
        for k, (x, y, tw, th) in enumerate(r.viewports):
            ref.update_scene(datas[k], "front")
            rect = mujoco.MjrRect(x, y, tw, th)
            mujoco.mjr_render(rect, ref.scene, ref._mjr_context)
            img = np.empty((th, tw, 3), np.uint8)
            mujoco.mjr_readPixels(img, None, rect, ref._mjr_context)
            assert_array_equal(got[k], img[::-1], err_msg=f"tile {k} at {(x, y)}")
            if (x, y) == (0, 0):
                assert_array_equal(got[k], ref.render())
    finally:
        ref.close()


@pytest.mark.parametrize("visuals", ["default", "light-nomsaa"])
@pytest.mark.parametrize("mode", ["rgb", "depth", "segmentation"])
@pytest.mark.parametrize("sample_copy", [True, False], ids=["samples-copied", "resolve-per-env"])
def test_both_ways_to_the_sheet_equal_renderer(batch, backend, monkeypatch, visuals, mode, sample_copy):
    """Exact tiling's two ways into the sheet: every env's samples copied into a multisampled sheet that is
    resolved once (the default where glCopyImageSubData exists; a single-sample source straight into the sheet),
    and a resolve blit per env. Each tile equals Renderer.render() either way, in every mode, with MSAA and
    without; and the way asked for is the one taken (Mesa and NVIDIA have GL 4.3)."""
    monkeypatch.setattr(gmj.BatchRenderer, "_sample_copy", sample_copy)
    flags, samples = VISUALS[visuals]
    model = make_model(samples)
    n, h, w = 7, 45, 71
    cams = ["front", "side", -1, "track", "ortho", "front", -1]
    datas = make_datas([model] * n, seed=12)
    kw = {"depth": True} if mode == "depth" else {"segmentation": True} if mode == "segmentation" else {}
    r = batch(model, n, h, w, camera=cams, render_flags=flags, backend=backend, **kw)
    assert r._sheet.samples_copied is sample_copy
    assert ("samples copied, one resolve" if sample_copy else "a resolve per env") in repr(r)
    assert bool(r._sheet.msaa_rb) is (sample_copy and samples > 0)  # no second sheet for a single-sample source
    want = reference([model] * n, datas, cams, h, w, flags, mode=mode)
    for _ in range(2):  # the second frame over the first one's sheets
        assert_tiles_equal(host(r.render_and_read(datas)), want)
    if mode == "rgb":
        check_content(want)


def test_without_copy_image_each_env_is_resolved(batch, monkeypatch):
    """A GL without glCopyImageSubData (before 4.3, no ARB_copy_image) takes the resolve per env, still exact."""
    import gltensor.mujoco._tiles as tiles
    monkeypatch.setattr(tiles, "_has_copy_image", lambda: False)
    model = make_model()
    n, h, w = 3, 45, 71
    datas = make_datas([model] * n, seed=13)
    r = batch(model, n, h, w, camera="front", backend="cpu")
    assert not r._sheet.samples_copied and not r._sheet.msaa_rb
    assert_tiles_equal(host(r.render_and_read(datas)), reference([model] * n, datas, ["front"] * n, h, w))


@pytest.mark.parametrize("samples", [4, 0])
def test_a_copy_the_driver_refuses_at_construction_means_a_resolve_per_env(batch, monkeypatch, samples):
    """Where the extension cannot copy (its loader found no glCopyImageSubData, or the driver refused), the renderer
    finds out when it is made and resolves per env, still exact: no render ever meets a copy that cannot run."""
    import gltensor.mujoco._tiles as tiles

    def refuse(*args):
        raise RuntimeError("_copy_samples: this GL has no glCopyImageSubData (GL 4.3 / ARB_copy_image)")
    monkeypatch.setattr(tiles, "_copy_samples", refuse)
    model = make_model(samples)
    n, h, w = 3, 45, 71
    datas = make_datas([model] * n, seed=14)
    r = batch(model, n, h, w, camera="side", backend="cpu")
    assert not r._sheet.samples_copied and not r._sheet.msaa_rb and "a resolve per env" in repr(r)
    assert_tiles_equal(host(r.render_and_read(datas)), reference([model] * n, datas, ["side"] * n, h, w))


def test_sample_copy_errors():
    """The private sample copy refuses what is not a tile, and names a copy GL refused."""
    from gltensor._gltensor import _copy_samples
    with pytest.raises(ValueError, match="not a tile"):
        _copy_samples(1, 2, 0, 5, 0, 0)
    with pytest.raises(ValueError, match="not a tile"):
        _copy_samples(0, 2, 5, 5, 0, 0)
    ctx = gltensor.Context.headless()
    with ctx:
        with pytest.raises(gltensor.GLError, match="renderbuffer 4001 .* renderbuffer 4002"):
            _copy_samples(4001, 4002, 8, 8, 0, 0)  # names no renderbuffer made in this context


# ---------------------------------------------------------------------------------------------- API and errors


def test_attributes_and_lifetime():
    model = make_model()
    with gmj.BatchRenderer(model, 6, 61, 97, backend="cpu") as r:
        assert (r.n, r.height, r.width, r.backend, r.shape) == (6, 61, 97, "cpu", (6, 61, 97, 3))
        assert r.grid[0] * r.grid[1] >= 6 and r.tiling == "exact" and not r.closed
        assert "BatchRenderer" in repr(r) and "6" in repr(r)
        assert len(set(r.viewports)) == 6
        with pytest.raises(gmj.NotRenderedError):
            r.read()
    assert r.closed and "closed" in repr(r)
    r.close()  # idempotent
    with pytest.raises(gltensor.ClosedError):
        r.render(make_datas([model] * 6))
    with pytest.raises(gltensor.ClosedError):
        r.read()


def test_errors_name_the_env(batch):
    model = make_model()
    n = 3
    datas = make_datas([model] * n)
    r = batch(model, n, 61, 97, backend="cpu")
    with pytest.raises(gltensor.InvalidArgumentError, match="2 datas .* n=3"):
        r.render(datas[:2])
    other = make_model()
    with pytest.raises(gltensor.InvalidArgumentError, match=r"datas\[1\]"):
        r.render([datas[0], mujoco.MjData(other), datas[2]])
    with pytest.raises(gltensor.InvalidArgumentError, match="env 2.*'nope'.*front"):
        r.render(datas, ["front", "side", "nope"])
    with pytest.raises(gltensor.InvalidArgumentError, match="env 1.*out of range"):
        r.render(datas, [0, 99, 0])
    with pytest.raises(gltensor.InvalidArgumentError, match="2 cameras for 3"):
        r.render(datas, ["front", "side"])
    with pytest.raises(TypeError, match=r"datas\[0\]"):
        r.render([object()] * n)
    with pytest.raises(gltensor.InvalidArgumentError, match="'nope'"):
        batch(model, n, 61, 97, camera="nope")
    with pytest.raises(gltensor.InvalidArgumentError, match="n must be"):
        batch(model, 0, 61, 97)
    with pytest.raises(gltensor.InvalidArgumentError, match="cannot both"):
        batch(model, 2, 61, 97, depth=True, segmentation=True)
    with pytest.raises(gltensor.InvalidArgumentError, match="3 models for n=2"):
        batch([model] * 3, 2, 61, 97)
    with pytest.raises(gltensor.InvalidArgumentError, match="render flag"):
        batch(model, 2, 61, 97, render_flags={"shadows_please": False})
    with pytest.raises(gltensor.InvalidArgumentError, match="tiling"):
        batch(model, 2, 61, 97, tiling="mosaic")
    # per-env models must agree on what the one MjrContext uploads
    odd = make_model()
    odd.tex_data[:10] = 255 - odd.tex_data[:10]
    with pytest.raises(gltensor.InvalidArgumentError, match="env 1.*tex_data"):
        batch([model, odd], 2, 61, 97)
    odd = make_model()
    odd.vis.quality.shadowsize = 1024
    with pytest.raises(gltensor.InvalidArgumentError, match="env 1.*vis.quality.shadowsize"):
        batch([model, odd], 2, 61, 97)
    # the state of r is untouched by the failed calls
    assert_tiles_equal(host(r.render_and_read(datas)), reference([model] * n, datas, [-1] * n, 61, 97))


def test_models_and_datas_as_given_or_wrapped():
    """What BatchRenderer takes as a model or a data: the struct, a dm_control wrapper (.ptr), a Physics (.model /
    .data, wrapped or not); anything else, an MjData given as a model included (it has a .model), a TypeError."""
    from types import SimpleNamespace as Obj

    from gltensor.mujoco._models import as_data, as_model

    m = make_model()
    d = mujoco.MjData(m)
    for obj in (m, Obj(ptr=m), Obj(model=Obj(ptr=m)), Obj(model=m)):
        assert as_model(mujoco, obj, "model") is m
    for obj in (d, Obj(ptr=d), Obj(data=Obj(ptr=d)), Obj(data=d)):
        assert as_data(mujoco, obj, 0) is d
    for obj in (d, Obj(ptr=d), Obj(model=None), Obj(model=Obj(ptr=d)), object()):
        with pytest.raises(TypeError, match=r"model\[2\]: expected a mujoco.MjModel"):
            as_model(mujoco, obj, "model[2]")
    for obj in (m, Obj(ptr=m), Obj(data=None), Obj(data=Obj(ptr=m)), object()):
        with pytest.raises(TypeError, match=r"datas\[3\]: expected a mujoco.MjData"):
            as_data(mujoco, obj, 3)


def test_grid_limits(batch):
    assert grid_shape(1, 84, 84, 16384, 16384) == (1, 1)
    assert grid_shape(16, 84, 84, 16384, 16384) == (4, 4)
    rows, cols = grid_shape(256, 61, 97, 16384, 16384)
    assert rows * cols >= 256 and cols * 97 <= 16384 and rows * 61 <= 16384
    assert grid_shape(10, 100, 100, 250, 16384) == (5, 2)  # narrow limit: fewer columns, more rows
    assert grid_shape(10, 100, 100, 250, 400) is None
    model = make_model()
    with pytest.raises(gltensor.InvalidArgumentError, match="do not fit"):
        batch(model, 4, 40000, 8, backend="cpu")


def test_leaves_the_callers_context_current_and_survives_a_dying_mjrcontext():
    """An MjrContext that dies by garbage collection frees its GL names in whatever context is current (Gymnasium's
    OffScreenViewer leaves its MjrContext to the GC, and draws into whatever context is current): the batch puts
    the caller's context back after each call, so such a death lands there, not in the batch's context. Before the
    fix, the batch's offscreen framebuffer was deleted (GL_INVALID_OPERATION at the next render, on an H200)."""
    import ctypes
    import gc

    from OpenGL import EGL

    def current():
        return ctypes.cast(EGL.eglGetCurrentContext(), ctypes.c_void_p).value

    H, W = 48, 64
    model = make_model()
    datas = make_datas([model, model])
    other = mujoco.Renderer(model, H, W)        # the caller's renderer: its context is current from here on
    other.update_scene(datas[0])
    other.render()
    callers = current()
    assert callers
    with gmj.BatchRenderer(model, 2, height=H, width=W) as r:
        assert current() == callers
        first = r.render_and_read(datas).clone()
        assert current() == callers
        con = other._mjr_context
        other._mjr_context = None                  # as Gymnasium's viewer: the MjrContext left to the GC
        del con
        gc.collect()
        again = r.render_and_read(datas)
        assert torch.equal(again, first)
        assert current() == callers
    other._gl_context.free()


def test_leaves_no_context_current_where_none_was():
    """With no context current before a call, none is current after it (not the batch's): a garbage collection in
    the caller's code between two steps must find no context of ours to free a dead MjrContext's names in. Before
    the fix the batch's context stayed current and an H200 run lost the offscreen framebuffer mid-benchmark."""
    import ctypes
    import gc

    from OpenGL import EGL

    def current():
        return ctypes.cast(EGL.eglGetCurrentContext(), ctypes.c_void_p).value

    H, W = 48, 64
    model = make_model()
    datas = make_datas([model, model])
    gc.collect()
    if current():  # a test before left one current: release it, as a fresh program starts
        EGL.eglMakeCurrent(EGL.eglGetCurrentDisplay(), EGL.EGL_NO_SURFACE, EGL.EGL_NO_SURFACE, EGL.EGL_NO_CONTEXT)
    assert not current()
    with gmj.BatchRenderer(model, 2, height=H, width=W) as r:
        assert not current()
        first = r.render_and_read(datas).clone()
        assert not current()
        other = mujoco.Renderer(model, H, W)    # made and dropped while none is current: freed in its own context
        other.update_scene(datas[0])
        other.render()
        if current():
            EGL.eglMakeCurrent(EGL.eglGetCurrentDisplay(), EGL.EGL_NO_SURFACE, EGL.EGL_NO_SURFACE,
                               EGL.EGL_NO_CONTEXT)
        other._mjr_context = None                # the MjrContext left to the GC, no context current
        del other
        gc.collect()
        assert torch.equal(r.render_and_read(datas), first)
        assert not current()


def test_our_context_made_current_by_the_core_draws_what_mujocos_make_current_draws(batch, monkeypatch):
    """On EGL each call makes the batch's context current through the core (a record taken with it current at
    construction) instead of MuJoCo's GLContext.make_current through PyOpenGL: the same context, the same tiles,
    and the caller's context (here a mujoco.Renderer's) current again after every call."""
    import ctypes

    from OpenGL import EGL

    def current():
        return ctypes.cast(EGL.eglGetCurrentContext(), ctypes.c_void_p).value

    H, W, n = 48, 64, 3
    model = make_model()
    datas = make_datas([model] * n, seed=3)
    want = reference([model] * n, datas, [-1] * n, H, W, None)
    other = mujoco.Renderer(model, H, W)
    other.update_scene(datas[0])
    other.render()
    callers = current()
    r = batch(model, n, H, W)
    assert r._own_context is not None and r._own_context[0] == 1  # an EGL record (MUJOCO_GL=egl here)

    def refused():
        raise AssertionError("MuJoCo's make_current was called although the core's record exists")

    monkeypatch.setattr(r._glc, "make_current", refused)
    assert_tiles_equal(host(r.render_and_read(datas)), want)
    assert current() == callers
    r.render(datas)
    assert_tiles_equal(host(r.read()), want)
    assert current() == callers
    monkeypatch.undo()
    r._own_context = None  # MuJoCo's make_current again (a GLX or OSMesa context takes this way)
    assert_tiles_equal(host(r.render_and_read(datas)), want)
    assert current() == callers
    other.close()


# ---------------------------------------------------------------------------------------------- render order

class _Ready:
    """An iterator of env indices that blocks on another thread, as MujocoVectorEnv's physics stream does."""

    def __init__(self, order):
        import queue
        import threading
        self.q = queue.SimpleQueue()
        self.t = threading.Thread(target=lambda: [self.q.put(k) for k in order])
        self.n = len(order)
        self.t.start()

    def __iter__(self):
        for _ in range(self.n):
            yield self.q.get()
        self.t.join()


@pytest.mark.parametrize("kind", ["color", "depth", "segmentation"])
def test_render_in_any_order_equals_renderer(batch, kind):
    """order= draws each env as it becomes ready; every tile (and depth's / segmentation's per-env tables) is the
    env's own whatever the order."""
    model = make_model()
    n, h, w = 6, 61, 97
    datas = make_datas([model] * n, seed=3)
    kw = {"depth": kind == "depth", "segmentation": kind == "segmentation"}
    r = batch(model, n, h, w, camera="front", render_flags=LIGHT, backend="cpu", **kw)
    want = host(r.render_and_read(datas))
    if kind == "color":
        assert_tiles_equal(want, reference([model] * n, datas, ["front"] * n, h, w, LIGHT))
    for order in ([5, 4, 3, 2, 1, 0], [2, 0, 5, 1, 4, 3]):
        got = host(r.render_and_read(datas, order=_Ready(order)))
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(host(r.render_and_read(datas, order=np.array(order))), want)


def test_render_order_errors_leave_nothing_readable(batch):
    model = make_model()
    n = 4
    datas = make_datas([model] * n, seed=2)
    r = batch(model, n, 32, 40, camera="front", backend="cpu")
    r.render(datas)
    r.read()
    for order, match in (([0, 1, 1, 3], "repeated"), ([0, 1, 2, 4], "not an env index"), ([0, 1, 2], "3 of the 4"),
                         ([0, 1.0, 2, 3], "not an env index"), ([True, 1, 2, 3], "not an env index")):
        with pytest.raises(gltensor.InvalidArgumentError, match=match):
            r.render(datas, order=order)
        with pytest.raises(gmj.NotRenderedError):  # a render cut short: the sheet holds tiles of two frames
            r.read()

    def failing():
        yield 0
        raise KeyError("physics of env 1 failed")

    with pytest.raises(KeyError, match="env 1"):
        r.render_and_read(datas, order=failing())
    with pytest.raises(gmj.NotRenderedError):
        r.read()
    r.render(datas, order=range(n))
    assert host(r.read()).shape == (n, 32, 40, 3)


class _FramesSeen:
    """Stands in for a BatchRenderer's reader: every frame it reads is recorded by weak reference."""

    def __init__(self, reader):
        self._reader, self.frames = reader, []

    def read(self, *args, **kwargs):
        frame = self._reader.read(*args, **kwargs)
        self.frames.append(weakref.ref(frame))
        return frame

    def close(self):
        self._reader.close()

    @property
    def backend(self):
        return self._reader.backend

    def alive(self):
        gc.collect()
        return sum(f() is not None for f in self.frames)

    def holders(self):
        """What refers to the first frame still alive (for the failure message)."""
        frame = next((f() for f in self.frames if f() is not None), None)
        if frame is None:
            return "none alive"
        return f"{sys.getrefcount(frame) - 2} references, from Python objects " + \
            repr([type(r).__name__ for r in gc.get_referrers(frame) if r is not self.frames])


@pytest.mark.sanitizer_distorts("under compute-sanitizer a read's frame outlives its tensor: the Python function that "
                                "bound it was on the stack at a CUDA allocation, and such functions' locals stay "
                                "referenced (benchmarks/results/gpu_round_tests_h200.txt)")
@pytest.mark.parametrize("how", ["render_and_read", "vector_env"])
def test_frames_are_given_back_when_their_tensors_die(backend, how):
    """A read's frame lives as long as its tensor, no longer: a loop that drops each step's tensor holds one frame at
    a time (the vector env also keeps its last pixels), whatever the backend. Under compute-sanitizer the frames of
    these loops stayed alive (see the marker) and its leak check reported their buffers; without it, this test says
    whether gltensor keeps any."""
    n, h, w = 3, 24, 32
    if how == "vector_env":
        from gltensor.mujoco import MujocoVectorEnv

        env = MujocoVectorEnv("Hopper-v5", n, height=h, width=w, backend=backend, max_episode_steps=5)
        seen = env.renderer._reader = _FramesSeen(env.renderer._reader)
        env.reset(seed=0)
        actions = np.zeros((n, 3))
        step = lambda: env.step(actions)[0]  # noqa: E731
        close = env.close
    else:
        model = make_model()
        datas = make_datas([model] * n, seed=2)
        r = gmj.BatchRenderer(model, n, h, w, camera="front", render_flags=LIGHT, backend=backend)
        seen = r._reader = _FramesSeen(r._reader)
        step = lambda: r.render_and_read(datas)  # noqa: E731
        close = r.close
    try:
        for _ in range(3):
            step()
        held = seen.alive()
        for k in range(40):
            pixels = step()
            assert tuple(pixels.shape) == (n, h, w, 3)
            del pixels
        assert len(seen.frames) == 43 + (how == "vector_env")
        assert seen.alive() == held <= 1, \
            f"{seen.alive()} frames alive after 40 more reads whose tensors died; the first: {seen.holders()}"
    finally:
        close()
    assert seen.alive() == 0
