"""gltensor.mujoco: MujocoVectorEnv must give what Gymnasium's SyncVectorEnv of the same environment with
AddRenderObservation gives for the same seeds and actions (whole images, rewards, terminations, truncations,
info keys and masks, final observations), in both autoreset modes; DmControlBatch's pixels must equal each
environment's own physics.render(). Per backend (CUDA tensors on the GPU machine, compared on the host)."""

import os

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from conftest import dm_control_suite_or_skip  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

pytest.importorskip("mujoco")
torch = pytest.importorskip("torch")
gymnasium = pytest.importorskip("gymnasium")

from gymnasium.vector import AutoresetMode, SyncVectorEnv  # noqa: E402
from gymnasium.wrappers import AddRenderObservation  # noqa: E402

import gltensor.mujoco as gmj  # noqa: E402
from gltensor.mujoco._physics import default_physics_threads  # noqa: E402
from gltensor.mujoco import MujocoVectorEnv, as_sb3, merge_infos  # noqa: E402

if os.environ["MUJOCO_GL"].lower() != "egl":
    pytest.skip("these tests use MuJoCo's EGL renderer (MUJOCO_GL=egl)", allow_module_level=True)

H, W = 48, 64


def stock(env_id, n, mode, render_only=True, **kw):
    def make():
        return AddRenderObservation(gymnasium.make(env_id, render_mode="rgb_array", width=W, height=H, **kw),
                                    render_only=render_only)
    return SyncVectorEnv([make] * n, autoreset_mode=mode)


def stock_cameras(ref):
    """The MjvCameras of the stock envs' viewers. AddRenderObservation's constructor renders after an unseeded
    reset, and Gymnasium's free camera (HalfCheetah-v5) looks at that random state; MujocoVectorEnv places it at
    the first seeded reset instead, so the comparison hands it the stock cameras (Hopper-v5's config fixes
    lookat, so there both place it alike: the test without the hand-over covers that)."""
    return [e.unwrapped.mujoco_renderer.viewer.cam for e in ref.envs]


def host(x):
    return x.cpu().numpy() if hasattr(x, "cpu") else np.asarray(x)


def assert_infos_equal(a, b):
    assert sorted(a) == sorted(b)
    for k in a:
        if k in ("final_obs", "final_info"):
            continue
        np.testing.assert_array_equal(np.asarray(a[k]), np.asarray(b[k]), err_msg=k)


@pytest.mark.parametrize("env_id,mode,steps", [("HalfCheetah-v5", AutoresetMode.NEXT_STEP, 16),
                                                ("Hopper-v5", AutoresetMode.SAME_STEP, 16)])
def test_equals_sync_vector_env(env_id, mode, steps):
    n = 3
    ref = stock(env_id, n, mode, max_episode_steps=6)
    cams = stock_cameras(ref) if env_id.startswith("HalfCheetah") else None
    env = MujocoVectorEnv(env_id, n, height=H, width=W, autoreset_mode=mode, threads=2, max_episode_steps=6,
                          camera=cams)
    try:
        assert env.metadata["autoreset_mode"] == mode
        assert env.single_observation_space == ref.single_observation_space
        assert env.observation_space == ref.observation_space
        assert env.single_action_space == ref.single_action_space and env.action_space == ref.action_space
        o1, i1 = ref.reset(seed=7)
        o2, i2 = env.reset(seed=7)
        assert isinstance(o2, torch.Tensor) and o2.dtype == torch.uint8 and tuple(o2.shape) == (n, H, W, 3)
        np.testing.assert_array_equal(o1, host(o2))
        assert_infos_equal(i1, i2)
        assert len({host(o2)[k].tobytes() for k in range(n)}) == n  # three different seeds, three images
        rng = np.random.default_rng(1)
        finals = 0
        for t in range(steps):
            a = rng.uniform(-1, 1, ref.action_space.shape).astype(np.float32)
            r1, r2 = ref.step(a), env.step(torch.from_numpy(a) if t % 2 else a)
            np.testing.assert_array_equal(r1[0], host(r2[0]), err_msg="step %d pixels" % t)
            for k in (1, 2, 3):
                np.testing.assert_array_equal(r1[k], r2[k], err_msg="step %d output %d" % (t, k))
            assert_infos_equal(r1[4], r2[4])
            if "final_obs" in r1[4]:
                for i in np.flatnonzero(r1[4]["_final_obs"]):
                    np.testing.assert_array_equal(r1[4]["final_obs"][i], host(r2[4]["final_obs"][i]))
                    finals += 1
            np.testing.assert_array_equal(host(env.render()), host(r2[0]))
        assert mode != AutoresetMode.SAME_STEP or finals >= n  # episodes of 6 steps ended inside the 16
    finally:
        ref.close()
        env.close()
    assert env.closed


def test_state_and_pixels_reset_mask_and_seeds():
    n = 2
    ref = stock("HalfCheetah-v5", n, AutoresetMode.NEXT_STEP, render_only=False)
    env = MujocoVectorEnv("HalfCheetah-v5", n, height=H, width=W, render_only=False, threads=1,
                          camera=stock_cameras(ref))
    try:
        assert env.single_observation_space == ref.single_observation_space
        o1, _ = ref.reset(seed=[3, 11])
        o2, _ = env.reset(seed=[3, 11])
        assert sorted(o2) == ["pixels", "state"]
        np.testing.assert_array_equal(o1["state"], o2["state"])
        np.testing.assert_array_equal(o1["pixels"], host(o2["pixels"]))
        a = np.full(ref.action_space.shape, 0.5, np.float32)
        ref.step(a)
        env.step(a)
        mask = np.array([False, True])
        o1, i1 = ref.reset(seed=[None, 5], options={"reset_mask": mask})
        o2, i2 = env.reset(seed=[None, 5], options={"reset_mask": mask})
        np.testing.assert_array_equal(o1["pixels"], host(o2["pixels"]))
        np.testing.assert_array_equal(o1["state"], o2["state"])
        assert_infos_equal(i1, i2)
        with pytest.raises(ValueError, match="reset_mask"):
            env.reset(options={"reset_mask": np.array([1, 0])})
        with pytest.raises(ValueError, match="3 seeds for 2"):
            env.reset(seed=[1, 2, 3])
    finally:
        ref.close()
        env.close()


def test_env_fns_and_errors():
    env = MujocoVectorEnv([lambda: gymnasium.make("HalfCheetah-v5")] * 2, height=H, width=W)
    try:
        # Gymnasium's own HalfCheetah-v5: the batched physics, a thread per core (at most 16, one per env)
        assert env.num_envs == 2 and env.physics_path == "batched" and env.threads == default_physics_threads(2)
        obs, _ = env.reset(seed=0)
        assert tuple(obs.shape) == (2, H, W, 3)
        assert env.call("frame_skip") == (5, 5)
    finally:
        env.close()
    with pytest.raises(RuntimeError, match="closed"):
        env.step(np.zeros(env.action_space.shape, np.float32))
    with pytest.raises(TypeError, match="not a Gymnasium MujocoEnv"):
        MujocoVectorEnv([lambda: gymnasium.make("CartPole-v1")], height=H, width=W)
    with pytest.raises(ValueError, match="num_envs"):
        MujocoVectorEnv("HalfCheetah-v5", 0)


class _Flaky(gymnasium.Wrapper):
    """Raises from step() when told to: a physics or reward bug in user code, inside the physics thread."""

    fail = False

    def step(self, action):
        if self.fail:
            raise FloatingPointError("user step failed in env " + str(self.index))
        return self.env.step(action)


@pytest.mark.parametrize("threads", [1, 2])
def test_step_exception_reaches_the_caller_and_the_env_goes_on(threads):
    """An exception of an environment's step() (run in a physics thread beside the render) is raised by step()
    in the caller's thread, with its own type; the vector env is usable after a reset, and nothing of the cut
    render is readable."""
    def make(i):
        def f():
            e = _Flaky(gymnasium.make("HalfCheetah-v5"))
            e.index = i
            return e
        return f

    env = MujocoVectorEnv([make(i) for i in range(4)], height=H, width=W, threads=threads)
    try:
        env.reset(seed=0)
        a = np.zeros(env.action_space.shape, np.float32)
        first = host(env.step(a)[0])
        env.envs[2].fail = True
        with pytest.raises(FloatingPointError, match="env 2"):
            env.step(a)
        with pytest.raises(gmj.NotRenderedError):
            env.renderer.read()
        env.envs[2].fail = False
        obs, _ = env.reset(seed=0)
        again = host(env.step(a)[0])
        np.testing.assert_array_equal(again, first)  # same seeds, same actions: the same images as before
    finally:
        env.close()


def test_pipelined_equals_stepped_before_the_render():
    """The physics beside the render (default) gives what stepping every env first and rendering after gives
    (the path taken for render_mode='human'), step after step, with episodes ending (NEXT_STEP and SAME_STEP)."""
    for mode in (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP):
        envs = [MujocoVectorEnv("Hopper-v5", 3, height=H, width=W, autoreset_mode=mode, max_episode_steps=5,
                                threads=t) for t in (1, 2, 1)]
        envs[2]._in_caller = True  # stepped first (in this thread), then rendered
        try:
            assert [e._pipelined() for e in envs] == [False, False, False]  # the free camera is placed at reset
            outs = [e.reset(seed=3) for e in envs]
            assert [e._pipelined() for e in envs] == [True, True, False]
            rng = np.random.default_rng(0)
            for t in range(12):
                a = rng.uniform(-1, 1, envs[0].action_space.shape).astype(np.float32)
                outs = [e.step(a) for e in envs]
                for o in outs[1:]:
                    np.testing.assert_array_equal(host(o[0]), host(outs[0][0]), err_msg=f"{mode} step {t}")
                    for k in (1, 2, 3):
                        np.testing.assert_array_equal(o[k], outs[0][k])
                    assert_infos_equal(o[4], outs[0][4])
                    for i in np.flatnonzero(o[4].get("_final_obs", [])):
                        np.testing.assert_array_equal(host(o[4]["final_obs"][i]), host(outs[0][4]["final_obs"][i]))
        finally:
            for e in envs:
                e.close()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["a", "b", "c", "d"]),
                                st.one_of(st.floats(-1e6, 1e6), st.integers(-2**40, 2**40), st.booleans(),
                                          st.just(np.float32(1.5)), st.just(np.int16(-3)), st.text(max_size=2),
                                          st.dictionaries(st.sampled_from(["x", "y"]), st.floats(allow_nan=False),
                                                          max_size=2)),
                                max_size=4), min_size=1, max_size=5),
       st.booleans())
def test_merge_infos_equals_gymnasium_add_info(infos, same_keys):
    """merge_infos is VectorEnv._add_info folded over the envs, in its fast path (every env the same keys of one
    scalar type each) and out of it (anything else)."""
    if same_keys:  # the fast path's shape: every env the first env's keys and value types
        def same_type(i, k, v):
            other = infos[i].get(k, v)
            return other if type(other) is type(v) else v
        infos = [{k: same_type(i, k, v) for k, v in infos[0].items()} for i in range(len(infos))]

    class V(gymnasium.vector.VectorEnv):
        num_envs = len(infos)

    want = {}
    try:
        for i, info in enumerate(infos):
            want = V()._add_info(want, info, i)
    except (ValueError, TypeError, OverflowError, AttributeError) as exc:  # e.g. a str where a float was first
        with pytest.raises(type(exc)):
            merge_infos(V(), infos)
        return
    got = merge_infos(V(), infos)

    def same(a, b):
        assert list(a) == list(b)
        for k in b:
            if isinstance(b[k], dict):
                same(a[k], b[k])
            elif not isinstance(b[k], np.ndarray):  # _add_info's own oddities (a dict then a scalar): as they are
                assert a[k] == b[k], k
            else:
                assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
                np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    same(got, want)


def test_sb3_ppo_runs():
    sb3 = pytest.importorskip("stable_baselines3")
    env = MujocoVectorEnv("HalfCheetah-v5", 2, height=36, width=36, autoreset_mode=AutoresetMode.SAME_STEP,
                          max_episode_steps=40)
    with pytest.raises(ValueError, match="SAME_STEP"):
        as_sb3(MujocoVectorEnv("HalfCheetah-v5", 1, height=36, width=36))
    venv = as_sb3(env)
    model = sb3.PPO("CnnPolicy", venv, n_steps=64, batch_size=64, n_epochs=1, device="cpu",
                    policy_kwargs={"normalize_images": True, "features_extractor_kwargs": {"features_dim": 32}})
    model.learn(256)
    assert model.num_timesteps >= 256
    # episodes of 40 steps ended: SB3 saw their last frames as host arrays
    obs = venv.reset()
    assert isinstance(obs, np.ndarray) and obs.shape == (2, 36, 36, 3) and obs.dtype == np.uint8
    venv.close()


def test_dm_control_batch_equals_physics_render():
    dm_control_suite_or_skip("cheetah", "run")
    from gltensor.mujoco import DmControlBatch
    n = 2
    with DmControlBatch("cheetah", "run", n, H, W, camera_id=0, seed=4, threads=2) as batch:
        steps, pixels = batch.reset()
        assert all(s.first() for s in steps) and tuple(pixels.shape) == (n, H, W, 3)
        rng = np.random.default_rng(0)
        spec = batch.action_spec
        for t in range(4):
            if t:
                a = rng.uniform(spec.minimum, spec.maximum, (n,) + spec.shape)
                steps, pixels = batch.step(a)
                assert all(s.reward is not None for s in steps)
            want = np.stack([p.render(H, W, camera_id=0) for p in batch.physics])
            np.testing.assert_array_equal(want, host(pixels), err_msg="step %d" % t)
        assert len({host(pixels)[k].tobytes() for k in range(n)}) == n


def test_ppo_example_runs(tmp_path):
    """examples/mujoco_batch_ppo.py trains end to end at a tiny size (the GPU machine runs it on CUDA tensors)."""
    from test_upload_examples import run_example
    out = run_example("mujoco_batch_ppo.py", "--envs", 2, "--steps", 64, "--rollout", 16, "--size", 48,
                      tmp_path=tmp_path)
    assert "update 2/2: 64 env steps" in out
    assert "trained: 64 env steps of 2 envs" in out
