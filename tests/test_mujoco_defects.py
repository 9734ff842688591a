"""gltensor.mujoco and gltensor.mujoco against what their users compare them with, where a review found them
wrong: an environment that renders itself inside step() (its own pixels, not black), dm_control's height fields
and default visual options (tiles equal to physics.render()), Stable-Baselines3's VecEnv contract (as DummyVecEnv
keeps it), no physics thread still working when reset() raises, the caller's GL context after close() and garbage
collection, and SyncVectorEnv's reset_mask and np_random_seed. Each test failed before its fix."""

import os

os.environ.setdefault("MUJOCO_GL", "egl")

import gc  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from conftest import dm_control_suite_or_skip  # noqa: E402

pytest.importorskip("mujoco")
torch = pytest.importorskip("torch")
gymnasium = pytest.importorskip("gymnasium")

from gymnasium.vector import AutoresetMode, SyncVectorEnv  # noqa: E402
from gymnasium.wrappers import AddRenderObservation  # noqa: E402

from gltensor.mujoco import MujocoVectorEnv, as_sb3  # noqa: E402

if os.environ["MUJOCO_GL"].lower() != "egl":
    pytest.skip("these tests use MuJoCo's EGL renderer (MUJOCO_GL=egl)", allow_module_level=True)

H, W = 48, 64


def host(x):
    return x.cpu().numpy() if hasattr(x, "cpu") else np.asarray(x)


def assert_trees_equal(a, b, what):
    """Equal nested dicts of arrays (observations), every element."""
    if isinstance(b, dict):
        assert sorted(a) == sorted(b), what
        for k in b:
            assert_trees_equal(a[k], b[k], f"{what}[{k!r}]")
    else:
        np.testing.assert_array_equal(host(a), host(b), err_msg=what)


# ------------------------------------------------------------------ an env that renders inside its own step()

def _hopper_with_its_own_pixels(**kw):
    return AddRenderObservation(gymnasium.make("Hopper-v5", render_mode="rgb_array", width=W, height=H,
                                               max_episode_steps=5, **kw), render_only=False)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_env_rendering_in_its_own_step_sees_its_own_pixels(threads, mode):
    """AddRenderObservation over a render_mode="rgb_array" env renders in the env's step() and reset(). Such an env
    is stepped in the caller's thread (where the GL context its viewer draws into is current), before the batch
    render: its own pixels ("state"["pixels"]) equal the stock SyncVectorEnv's, and so does the batch. Before the
    fix its steps ran in a physics thread with no GL context current: black frames, silently."""
    n = 3
    ref = SyncVectorEnv([_hopper_with_its_own_pixels] * n, autoreset_mode=mode)
    env = MujocoVectorEnv([_hopper_with_its_own_pixels] * n, height=H, width=W, render_only=False,
                          threads=threads, autoreset_mode=mode)
    try:
        o1, _ = ref.reset(seed=5)
        o2, _ = env.reset(seed=5)
        assert_trees_equal(o2["state"], o1, "reset: the envs' own observations")  # their state and pixels
        assert o1["pixels"].sum() > 0
        np.testing.assert_array_equal(host(o2["pixels"]), o1["pixels"])
        rng = np.random.default_rng(0)
        for t in range(8):
            a = rng.uniform(-1, 1, ref.action_space.shape).astype(np.float32)
            r1, r2 = ref.step(a), env.step(a)
            assert_trees_equal(r2[0]["state"], r1[0], f"step {t}: the envs' own observations")
            np.testing.assert_array_equal(host(r2[0]["pixels"]), r1[0]["pixels"], err_msg=f"step {t}")
            for k in (1, 2, 3):
                np.testing.assert_array_equal(r2[k], r1[k])
            if "final_obs" in r1[4]:
                for i in np.flatnonzero(r1[4]["_final_obs"]):
                    np.testing.assert_array_equal(r2[4]["final_obs"][i]["state"]["pixels"],
                                                  r1[4]["final_obs"][i]["pixels"], err_msg=f"step {t} final {i}")
    finally:
        ref.close()
        env.close()


class _RendersWithoutRenderMode(gymnasium.Wrapper):
    """Draws through the env's Gymnasium renderer in step() although the env was made without render_mode: no
    wrapper rule can tell, so the render call itself is caught."""

    def step(self, action):
        out = self.env.step(action)
        self.frame = self.env.unwrapped.mujoco_renderer.render("rgb_array")
        return out


def test_a_render_in_a_physics_thread_raises_instead_of_drawing_black():
    def make():
        return _RendersWithoutRenderMode(gymnasium.make("Hopper-v5", width=W, height=H))

    env = MujocoVectorEnv([make] * 2, height=H, width=W, threads=2)
    try:
        env.reset(seed=0)
        with pytest.raises(RuntimeError, match="environment [01] rendered itself .* physics thread"):
            env.step(np.zeros(env.action_space.shape, np.float32))
    finally:
        env.close()


# ------------------------------------------------------------------ the caller's GL context after close and GC

def test_callers_context_survives_close_and_garbage_collection():
    """A stock Gymnasium pixel env draws into whatever GL context is current (its viewer made its own current once).
    BatchRenderer, MujocoVectorEnv and DmControlBatch put that context back when they are closed or collected:
    the stock env's frame of the same state is the same before and after. Before the fix MuJoCo's GLContext.free()
    (eglReleaseThread) left none current and the stock env drew black."""
    import gltensor.mujoco as gmj

    stock = gymnasium.make("Hopper-v5", render_mode="rgb_array", width=W, height=H)
    try:
        stock.reset(seed=1)
        first = stock.render()
        assert first.sum() > 0

        def same_frame(after):
            np.testing.assert_array_equal(stock.render(), first, err_msg="stock frame after " + after)

        env = MujocoVectorEnv("Hopper-v5", 2, height=H, width=W)
        env.reset(seed=0)
        env.step(np.zeros(env.action_space.shape, np.float32))
        same_frame("a MujocoVectorEnv step")
        env.close()
        same_frame("MujocoVectorEnv.close()")

        env = MujocoVectorEnv("Hopper-v5", 2, height=H, width=W, threads=2)
        env.reset(seed=0)
        del env
        gc.collect()
        same_frame("a MujocoVectorEnv collected")

        r = gmj.BatchRenderer(stock.unwrapped.model, 2, H, W)
        r.render_and_read([stock.unwrapped.data] * 2)
        r.close()
        same_frame("BatchRenderer.close()")
        r = gmj.BatchRenderer(stock.unwrapped.model, 2, H, W)
        r.render_and_read([stock.unwrapped.data] * 2)
        del r
        gc.collect()
        same_frame("a BatchRenderer collected")

        try:
            _dm_control_suite()
        except pytest.skip.Exception:  # no dm_control here (the GPU machine): the rest was checked
            return
        from gltensor.mujoco import DmControlBatch
        batch = DmControlBatch("cartpole", "balance", 2, H, W, seed=0)
        batch.reset()
        batch.close()
        same_frame("DmControlBatch.close()")
        batch = DmControlBatch("cartpole", "balance", 2, H, W, seed=0)
        batch.reset()
        del batch
        gc.collect()
        same_frame("a DmControlBatch collected")
    finally:
        stock.close()


# ------------------------------------------------------------------ dm_control: height fields and visual options

def _dm_control_suite():
    return dm_control_suite_or_skip("cartpole", "balance")


def _assert_tiles_equal_physics_render(batch, pixels, camera_id, what):
    want = np.stack([p.render(H, W, camera_id=camera_id) for p in batch.physics])
    got = host(pixels)
    diff = np.flatnonzero((got != want).any(axis=-1).reshape(len(want), -1).any(axis=1))
    np.testing.assert_array_equal(got, want, err_msg=f"{what}: tiles {diff.tolist()} differ from physics.render()")


def test_dm_control_height_fields_followed_after_every_reset():
    """quadruped-escape draws new terrain at every reset, different per env (a height field the task writes into
    model.hfield_data and uploads to its own context). Every tile equals that env's physics.render() after each
    reset, and the envs' terrains differ. Before the fix the batch kept the terrain it was built with."""
    _dm_control_suite()
    from gltensor.mujoco import DmControlBatch
    n, camera = 3, 0
    with DmControlBatch("quadruped", "escape", n, H, W, camera_id=camera, seed=2) as batch:
        for r in range(3):
            steps, pixels = batch.reset()
            terrains = {p.model.hfield_data.tobytes() for p in batch.physics}
            assert len(terrains) == n  # each env its own terrain
            _assert_tiles_equal_physics_render(batch, pixels, camera, f"reset {r}")
            spec = batch.action_spec
            steps, pixels = batch.step(np.zeros((n,) + spec.shape))
            _assert_tiles_equal_physics_render(batch, pixels, camera, f"step after reset {r}")
        # only envs whose terrain was drawn anew: reset(mask) re-uploads env 1's terrain alone
        steps, pixels = batch.reset(np.array([False, True, False]))
        _assert_tiles_equal_physics_render(batch, pixels, camera, "masked reset")


def test_dm_control_default_visual_options_are_dm_controls():
    """dm_control's renderer hides rangefinder rays (its MjvOption turns mjVIS_RANGEFINDER off): with
    scene_option=None the batch draws what physics.render() draws for a model with rangefinders (quadruped-escape,
    before a reset: the terrain the batch was built with); before the fix the rays showed in the tiles."""
    _dm_control_suite()
    import mujoco
    from dm_control.mujoco import wrapper
    from gltensor.mujoco import DmControlBatch
    camera = 1
    with DmControlBatch("quadruped", "escape", 2, H, W, camera_id=camera, seed=0) as batch:
        assert int(mujoco.mjtSensor.mjSENS_RANGEFINDER) in batch.physics[0].model.sensor_type
        for p in batch.physics:
            p.forward()  # the rangefinders' readings, which the rays are drawn from
        pixels = batch.render()
        _assert_tiles_equal_physics_render(batch, pixels, camera, "before a reset")
        # what the default hides: with the rays on, the same tiles differ
        shown = wrapper.MjvOption()
        shown.flags[mujoco.mjtVisFlag.mjVIS_RANGEFINDER] = True
        rays = host(batch.renderer.render_and_read(batch.physics, scene_option=shown))
        assert (rays != host(pixels)).any(axis=-1).sum() > 100


_HFIELD_XML = """
<mujoco>
  <asset>
    <hfield name="terrain" nrow="24" ncol="24" size="1 1 0.4 0.05"/>
  </asset>
  <worldbody>
    <light pos="0 0 3" dir="0 0 -1"/>
    <camera name="top" pos="0 -2.2 2.2" xyaxes="1 0 0 0 0.7 0.7"/>
    <geom type="hfield" hfield="terrain" rgba="0.4 0.6 0.3 1"/>
    <body pos="0 0 0.6"><freejoint/><geom type="sphere" size="0.15" rgba="0.8 0.2 0.2 1"/></body>
  </worldbody>
</mujoco>
"""


def test_batch_renderer_follows_each_envs_height_field():
    """BatchRenderer with one model per env: each env's own height field data, different per env and changed
    between renders, is what its tile shows (equal to mujoco.Renderer made from that env's model as it is then)."""
    import mujoco

    import gltensor.mujoco as gmj
    rng = np.random.default_rng(0)
    models = [mujoco.MjModel.from_xml_string(_HFIELD_XML) for _ in range(3)]
    datas = [mujoco.MjData(m) for m in models]
    for m, d in zip(models, datas):
        mujoco.mj_forward(m, d)

    def reference():
        out = []
        for m, d in zip(models, datas):
            with mujoco.Renderer(m, H, W) as r:  # uploads the model's height field as it is now
                r.update_scene(d, "top")
                out.append(r.render())
        return np.stack(out)

    with gmj.BatchRenderer(models, 3, H, W, camera="top") as batch:
        for r in range(3):
            for k, m in enumerate(models):
                if r == 0 or k == r:  # every env new terrain at first; then one env at a time
                    m.hfield_data[:] = rng.uniform(0, 1, m.hfield_data.shape)
            got = host(batch.render_and_read(datas))
            want = reference()
            np.testing.assert_array_equal(got, want, err_msg=f"render {r}")
            assert len({t.tobytes() for t in got}) == 3


# ------------------------------------------------------------------ Stable-Baselines3's VecEnv contract

class _Options(gymnasium.Wrapper):
    """Records the options of every reset and reports them in the reset info (as a number, so that both vector
    envs' infos can be compared value by value)."""

    def reset(self, *, seed=None, options=None):
        self.get_wrapper_attr("seen").append(options)
        obs, info = self.env.reset(seed=seed, options=options)
        info["option_a"] = -1 if not options else options["a"]
        return obs, info


def _sb3_hopper(pixels, recorded):
    def make():
        e = gymnasium.make("Hopper-v5", max_episode_steps=4, **({"render_mode": "rgb_array", "width": W,
                                                                  "height": H} if pixels else {}))
        if recorded:
            e.unwrapped.seen = []
            e = _Options(e)
        return AddRenderObservation(e, render_only=True) if pixels else e
    return make


@pytest.mark.parametrize("path", ["per-env", "batched"])
def test_as_sb3_equals_dummy_vec_env(path):
    """as_sb3 keeps SB3's VecEnv contract as its DummyVecEnv keeps it: get_attr / env_method reach the inner env
    (get_wrapper_attr), set_options() reaches the next reset, reset_infos holds each env's reset info (at reset
    and at an autoreset), every env's info carries TimeLimit.truncated at every step; observations, rewards,
    dones and infos equal DummyVecEnv's step by step. Per-env path: the envs' wrapper records the options; batched
    path: plain Hopper-v5."""
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.vec_env import DummyVecEnv
    n = 2
    recorded = path == "per-env"
    dummy = DummyVecEnv([_sb3_hopper(True, recorded)] * n)
    venv = as_sb3(MujocoVectorEnv([_sb3_hopper(False, recorded)] * n, height=H, width=W,
                                  autoreset_mode=AutoresetMode.SAME_STEP))
    assert getattr(venv.venv, "physics_path", "per-env") == path

    def both(f):
        return f(dummy), f(venv)

    def infos_equal(a, b, what):
        assert len(a) == len(b) == n
        for i in range(n):
            assert sorted(a[i]) == sorted(b[i]), f"{what} env {i}"
            for k in a[i]:
                np.testing.assert_array_equal(np.asarray(b[i][k]), np.asarray(a[i][k]), err_msg=f"{what} {i} {k}")

    try:
        assert both(lambda v: v.get_attr("frame_skip")) == ([4, 4], [4, 4])  # Hopper's, on the inner env
        for v in (dummy, venv):
            v.seed(3)
            v.set_options([{"a": 1}, {"a": 2}])
        o1, o2 = both(lambda v: v.reset())
        np.testing.assert_array_equal(o2, o1)
        infos_equal(dummy.reset_infos, venv.reset_infos, "reset_infos")
        s1, s2 = both(lambda v: v.env_method("state_vector"))
        np.testing.assert_array_equal(np.stack(s2), np.stack(s1))
        if recorded:
            assert [ri["option_a"] for ri in venv.reset_infos] == [1, 2]
            assert both(lambda v: v.env_method("get_wrapper_attr", "seen", indices=[1])[0][-1]) == ({"a": 2},) * 2
        rng = np.random.default_rng(0)
        dones = 0
        for t in range(10):
            a = rng.uniform(-1, 1, (n,) + dummy.action_space.shape).astype(np.float32)
            r1, r2 = both(lambda v: v.step(a))
            np.testing.assert_array_equal(r2[0], r1[0], err_msg=f"step {t} obs")
            np.testing.assert_array_equal(r2[1], r1[1])
            np.testing.assert_array_equal(r2[2], r1[2])
            assert r2[1].dtype == r1[1].dtype and r2[2].dtype == r1[2].dtype
            infos_equal(r1[3], r2[3], f"step {t} infos")
            if r1[2].any():
                infos_equal(dummy.reset_infos, venv.reset_infos, f"step {t} reset_infos")
                dones += int(r1[2].sum())
        assert dones >= n  # episodes of 4 steps ended: autoresets were compared
        # options are used once, as DummyVecEnv uses them: the next reset passes none
        for v in (dummy, venv):
            v.reset()
        if recorded:
            assert both(lambda v: [s[-1] for s in v.env_method("get_wrapper_attr", "seen")]) == ([None, None],) * 2
    finally:
        dummy.close()
        venv.close()


# ------------------------------------------------------------------ no physics thread left working after a raise

class _SlowOrFailingReset(gymnasium.Wrapper):
    """reset() raises for the env told to fail; the others take their time and record when they touched the env."""

    fail = False
    delay = 0.0

    def __init__(self, env, log):
        super().__init__(env)
        self.log = log

    def reset(self, **kw):
        if self.fail:
            raise ZeroDivisionError("reset failed in this env")
        time.sleep(self.delay)
        out = self.env.reset(**kw)
        self.log.append(time.monotonic())
        return out


@pytest.mark.parametrize("where", ["reset", "same-step autoreset"])
def test_no_physics_thread_works_after_reset_raised(where):
    """threads=2: env 0's reset raises at once while the other chunk's envs still reset slowly. reset() (and a
    SAME_STEP autoreset in step()) raises only after every thread stopped touching the environments. Before the
    fix it raised at the first failed future and the other thread went on resetting envs."""
    log = []
    fns = [lambda: _SlowOrFailingReset(gymnasium.make("Hopper-v5", max_episode_steps=1), log) for _ in range(4)]
    env = MujocoVectorEnv(fns, height=H, width=W, threads=2, autoreset_mode=AutoresetMode.SAME_STEP)
    try:
        env.reset(seed=0)
        env.envs[0].fail = True
        for e in env.envs[2:]:  # the second chunk: envs 2 and 3
            e.delay = 0.3
        del log[:]
        with pytest.raises(ZeroDivisionError):
            if where == "reset":
                env.reset(seed=1)
            else:
                env.step(np.zeros(env.action_space.shape, np.float32))  # every episode ends: all reset
        raised = time.monotonic()
        time.sleep(0.8)  # time for a thread still at work to reset envs 2 and 3
        assert len(log) == 2, log  # envs 2 and 3 (env 0 raised, env 1 after it in its chunk was not reached)
        assert max(log) <= raised, "a physics thread reset an env after reset() raised"
    finally:
        env.close()


# ------------------------------------------------------------------ SyncVectorEnv's reset_mask and seeds

def test_all_false_reset_mask_raises_and_np_random_seed_is_the_envs_seeds():
    n = 2
    ref = SyncVectorEnv([lambda: gymnasium.make("Hopper-v5")] * n)
    env = MujocoVectorEnv("Hopper-v5", n, height=H, width=W)
    try:
        for v in (ref, env):
            v.reset(seed=[4, 9])
        assert env.np_random_seed == ref.np_random_seed == (4, 9)
        assert all(a.bit_generator.state == b.bit_generator.state for a, b in zip(env.np_random, ref.np_random))
        mask = np.zeros(n, dtype=np.bool_)
        with pytest.raises(ValueError, match="at least one True") as want:
            ref.reset(options={"reset_mask": mask})
        with pytest.raises(ValueError) as got:
            env.reset(options={"reset_mask": mask})
        assert str(got.value) == str(want.value)
    finally:
        ref.close()
        env.close()
