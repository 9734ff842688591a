"""gltensor.torchrl: GymBatchEnv must give what TorchRL's own GymEnv(id, from_pixels=True) gives per environment
for the same seeds, actions and cameras (whole frames, rewards, done flags, through TorchRL's partial resets);
DMControlBatchEnv what DMControlEnv(from_pixels=True) gives. Specs pass check_env_specs and follow TorchRL's keys;
the envs work under SyncDataCollector and TorchRL's image transforms on their device. Per backend: CPU here, CUDA
tensors on the GPU machine (tools/gpu_verify.sh step torchrl)."""

import ctypes
import gc
import os

import numpy as np
import pytest

# Under tools/ci_sanitize.sh, Gymnasium's MuJoCo envs leave allocations LeakSanitizer reports at exit (conftest.py
# leaves the MuJoCo test modules out there for the same reason): skip before importing them.
if os.environ.get("GLTENSOR_UNDER_SANITIZER"):
    pytest.skip("Gymnasium's MuJoCo envs leak at exit under LeakSanitizer; run in make test and on the GPU",
                allow_module_level=True)

os.environ.setdefault("MUJOCO_GL", "egl")

import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402


pytest.importorskip("mujoco")
torch = pytest.importorskip("torch")
pytest.importorskip("gymnasium")
pytest.importorskip("tensordict")
pytest.importorskip("torchrl")

from gymnasium.vector import AutoresetMode  # noqa: E402
from tensordict import TensorDict  # noqa: E402
from torchrl.envs import GymEnv, TransformedEnv  # noqa: E402
from torchrl.envs.utils import check_env_specs, step_mdp  # noqa: E402

from gltensor.mujoco import MujocoVectorEnv  # noqa: E402
from gltensor.torchrl import DMControlBatchEnv, GymBatchEnv  # noqa: E402

if os.environ["MUJOCO_GL"].lower() != "egl":
    pytest.skip("these tests use MuJoCo's EGL renderer (MUJOCO_GL=egl)", allow_module_level=True)

ROOT = Path(__file__).resolve().parent.parent
H, W = 48, 64
LIGHT = {"shadow": False, "reflection": False}


def gym_envs(env_id, n, pixels_only=True):
    return [GymEnv(env_id, from_pixels=True, pixels_only=pixels_only, width=W, height=H) for _ in range(n)]


def gym_cameras(envs):
    """The MjvCameras TorchRL's GymEnvs render with. Gymnasium places its free camera (HalfCheetah-v5) at the
    median geom position of the first state its viewer renders: in GymEnv that is the unseeded reset inside
    AddRenderObservation's constructor, a random state; GymBatchEnv places it at its first (seeded) reset. Handing
    over the GymEnvs' cameras makes both render from the same place."""
    return [e.unwrapped.mujoco_renderer.viewer.cam for e in envs]


def actions(n, steps, dim, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(steps, n, dim, generator=g) * 2 - 1


def host(x):
    return x.detach().cpu()


def subprocess_env():
    """The environment of a child process: headless MuJoCo and the gltensor this test imported."""
    import gltensor
    pkg_parent = str(Path(gltensor.__file__).resolve().parent.parent)
    return dict(os.environ, MUJOCO_GL="egl",
                PYTHONPATH=os.pathsep.join(p for p in (pkg_parent, os.environ.get("PYTHONPATH")) if p))


def close_all(*envs):
    for e in envs:
        e.close()


@pytest.fixture(autouse=True)
def _viewer_garbage_freed_in_no_context():
    """TorchRL's GymEnvs render through Gymnasium's viewers, which leave their MjrContexts to the garbage collector;
    one collected during a later test frees its GL names in whatever context is current then (another GymEnv's,
    whose frames would then be wrong). Collect after each test with no context current, as conftest.py does for
    the MuJoCo test modules."""
    yield
    try:
        from OpenGL import EGL
    except Exception:  # pragma: no cover - PyOpenGL without EGL
        return
    if ctypes.cast(EGL.eglGetCurrentContext(), ctypes.c_void_p).value:
        EGL.eglMakeCurrent(EGL.eglGetCurrentDisplay(), EGL.EGL_NO_SURFACE, EGL.EGL_NO_SURFACE, EGL.EGL_NO_CONTEXT)
    gc.collect()


@pytest.fixture
def cheetah():
    env = GymBatchEnv("HalfCheetah-v5", 3, height=H, width=W, render_flags=LIGHT)
    yield env
    env.close()


# -- specs and devices ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("pixels_only", [True, False])
def test_check_env_specs_and_gymenv_keys(pixels_only):
    env = GymBatchEnv("HalfCheetah-v5", 2, height=H, width=W, pixels_only=pixels_only, render_flags=LIGHT)
    ref = gym_envs("HalfCheetah-v5", 1, pixels_only)[0]
    try:
        check_env_specs(env)
        # TorchRL's GymEnv is the convention: the same keys, per-env shapes, dtypes and spec classes
        for name in ("full_observation_spec", "full_action_spec", "full_reward_spec", "full_done_spec"):
            ours, theirs = getattr(env, name), getattr(ref, name)
            assert sorted(ours.keys(True, True)) == sorted(theirs.keys(True, True)), name
            for key in theirs.keys(True, True):
                assert ours[key].shape == (2,) + tuple(theirs[key].shape), (name, key)
                assert ours[key].dtype == theirs[key].dtype, (name, key)
                assert type(ours[key]) is type(theirs[key]), (name, key)
                assert ours[key].device == env.device, (name, key)
        low, high = env.action_spec.space.low, env.action_spec.space.high
        assert torch.equal(host(low), ref.action_spec.space.low.expand(2, -1))
        assert torch.equal(host(high), ref.action_spec.space.high.expand(2, -1))
        assert env.batch_size == torch.Size([2])
    finally:
        close_all(env, ref)


def test_device_is_the_renderers_and_frames_are_not_copied(cheetah):
    want = torch.device("cuda", torch.cuda.current_device()) if cheetah.venv.renderer.backend == "cuda" \
        else torch.device("cpu")
    assert cheetah.device == want
    for spec in (cheetah.full_observation_spec, cheetah.full_action_spec, cheetah.full_reward_spec,
                 cheetah.full_done_spec):
        for key in spec.keys(True, True):
            assert spec[key].device == want, key
    td = cheetah.rollout(3)
    for key in td.keys(True, True):
        assert td.get(key).device == want, key
    # the step's pixels are the renderer's own batch (the TensorDict holds that tensor, no copy of it)
    out = cheetah.rand_step(cheetah.reset())
    assert out["next", "pixels"].data_ptr() == cheetah.venv.render().data_ptr()
    # actions on another device (the host, float64) are taken and copied once
    td = cheetah.reset()
    td["action"] = torch.zeros(3, 6, dtype=torch.float64)
    cheetah.step(td)
    # env.to(device) moves the outputs there, as TorchRL's envs do (a copy of the frames when it is not theirs)
    cheetah.to("cpu")
    td = cheetah.rollout(2)
    assert all(td.get(k).device == torch.device("cpu") for k in td.keys(True, True))


# -- exactness against TorchRL's GymEnv ----------------------------------------------------------------------------
def test_equals_torchrl_gymenv_halfcheetah():
    n, steps, seed = 3, 30, 7
    refs = gym_envs("HalfCheetah-v5", n)
    env = GymBatchEnv("HalfCheetah-v5", n, height=H, width=W, camera=gym_cameras(refs))
    try:
        next_seed = env.set_seed(seed)
        assert next_seed == refs[0].set_seed(seed)  # TorchRL's seed chain: set_seed returns the next seed
        td = env.reset(seed=seed)  # environment k: seed + k, as GymEnv(num_envs=N) seeds through Gymnasium
        ref_tds = [r.reset(seed=seed + k) for k, r in enumerate(refs)]
        assert torch.equal(host(td["pixels"]), torch.stack([t["pixels"] for t in ref_tds]))
        for t, a in enumerate(actions(n, steps, 6)):
            td["action"] = a.to(env.device)
            out = env.step(td)
            got = [r.step(TensorDict({"action": a[k]}, [])) for k, r in enumerate(refs)]
            for key in ("pixels", "reward", "done", "terminated", "truncated"):
                assert torch.equal(host(out["next", key]), torch.stack([g["next", key] for g in got])), (t, key)
            td = step_mdp(out)
    finally:
        close_all(env, *refs)


def test_equals_torchrl_gymenv_through_partial_resets():
    """Hopper-v5 falls within a few dozen random steps: TorchRL's step_and_maybe_reset resets the finished
    environments (the "_reset" mask) and each GymEnv resets itself alike; states, frames, rewards and flags equal
    all the way, on both sides of every reset."""
    n, steps, seed = 3, 60, 3
    refs = gym_envs("Hopper-v5", n, pixels_only=False)
    env = GymBatchEnv("Hopper-v5", n, height=H, width=W, pixels_only=False, camera=gym_cameras(refs))
    resets = 0
    try:
        td = env.reset(seed=seed)
        ref_tds = [r.reset(seed=seed + k) for k, r in enumerate(refs)]
        for t, a in enumerate(actions(n, steps, 3, seed=1)):
            td["action"] = a.to(env.device)
            out, td = env.step_and_maybe_reset(td)
            got = []
            for k, r in enumerate(refs):
                ref_tds[k]["action"] = a[k]
                o, ref_tds[k] = r.step_and_maybe_reset(ref_tds[k])
                got.append(o)
            for key in ("pixels", "observation", "reward", "done", "terminated", "truncated"):
                assert torch.equal(host(out["next", key]), torch.stack([g["next", key] for g in got])), (t, key)
            for key in ("pixels", "observation"):  # after the reset: the new episodes' first observations
                assert torch.equal(host(td[key]), torch.stack([r[key] for r in ref_tds])), (t, key)
            resets += int(host(out["next", "done"]).sum())
    finally:
        close_all(env, *refs)
    assert resets >= 2, f"only {resets} episodes ended in {steps} steps: the partial resets were not exercised"


# -- the layer's fast paths ----------------------------------------------------------------------------------------
def _hopper_actions(n, steps, seed=1):
    return actions(n, steps, 3, seed=seed)


def test_fast_paths_equal_torchrls_own_through_partial_resets(monkeypatch):
    """The env skips TorchRL's _step_proc_data on its own step's TensorDict, answers any_done from the step's host
    flags and takes _reset's mask from them (no device sync): a twin env running TorchRL's own EnvBase methods
    instead gives the same tensordicts, every key, every step, through Hopper's partial resets."""
    from torchrl.envs import EnvBase

    from gltensor import torchrl as gtrl

    calls = {}

    def spy(name):
        original = getattr(EnvBase, name)

        def wrapper(self, *args, **kwargs):
            calls[(id(self), name)] = calls.get((id(self), name), 0) + 1
            return original(self, *args, **kwargs)
        return wrapper

    for name in ("_step_proc_data", "any_done"):
        monkeypatch.setattr(EnvBase, name, spy(name))
    n, steps, seed = 3, 60, 3
    fast = GymBatchEnv("Hopper-v5", n, height=H, width=W, pixels_only=False, render_flags=LIGHT)
    ref = GymBatchEnv("Hopper-v5", n, height=H, width=W, pixels_only=False, render_flags=LIGHT)
    for name in ("_step_proc_data", "any_done", "_step_and_maybe_reset"):  # TorchRL's own, on ref only
        monkeypatch.setattr(ref, name, getattr(EnvBase, name).__get__(ref))
    host_masks = []
    fast_reset = fast._reset

    def reset_spy(tensordict=None, **kwargs):
        if tensordict is not None and tensordict.get("_reset", None) is not None:
            host_masks.append(tensordict.get("_reset") is fast._latest_step.reset)
        return fast_reset(tensordict, **kwargs)
    monkeypatch.setattr(fast, "_reset", reset_spy)
    try:
        tds = [fast.reset(seed=seed), ref.reset(seed=seed)]
        resets = 0
        for t, a in enumerate(_hopper_actions(n, steps)):
            outs = []
            for i, env in enumerate((fast, ref)):
                tds[i]["action"] = a.to(env.device)
                out, tds[i] = env.step_and_maybe_reset(tds[i])
                outs.append(out)
            for got, want in ((outs[0], outs[1]), (tds[0], tds[1])):
                assert sorted(map(str, got.keys(True, True))) == sorted(map(str, want.keys(True, True))), t
                for key in want.keys(True, True):
                    assert torch.equal(got.get(key), want.get(key)), (t, key)
                    assert got.get(key).dtype == want.get(key).dtype and got.get(key).device == want.get(key).device
            resets += int(host(outs[0]["next", "done"]).sum())
    finally:
        close_all(fast, ref)
    assert resets >= 2, f"only {resets} episodes ended in {steps} steps: the partial resets were not exercised"
    # the fast paths were taken on fast (TorchRL's methods never ran for it), TorchRL's own on ref
    assert calls.get((id(fast), "_step_proc_data"), 0) == 0 and calls.get((id(fast), "any_done"), 0) == 0
    assert calls[(id(ref), "_step_proc_data")] == steps and calls[(id(ref), "any_done")] == steps
    assert host_masks and all(host_masks), host_masks
    assert gtrl._BatchEnv._step_proc_data is not EnvBase._step_proc_data


def test_returned_tensors_are_never_written_by_later_steps():
    """TorchRL's rollouts and collectors keep every step's tensors by reference: each step must hand out new
    memory. A rollout equals the per-step path, and tensordicts kept from each step still hold, after all later
    steps and partial resets, what they held when returned."""
    n, steps, seed = 3, 50, 3
    acts = _hopper_actions(n, steps)
    a = GymBatchEnv("Hopper-v5", n, height=H, width=W, pixels_only=False, render_flags=LIGHT)
    b = GymBatchEnv("Hopper-v5", n, height=H, width=W, pixels_only=False, render_flags=LIGHT)
    try:
        k = iter(range(steps))

        def policy(td):
            return td.set("action", acts[next(k)].to(a.device))

        a.set_seed(seed)
        rollout = a.rollout(steps, policy, break_when_any_done=False, auto_reset=True)
        b.set_seed(seed)
        td, kept, copies = b.reset(), [], []
        for t in range(steps):
            td["action"] = acts[t].to(b.device)
            if t == steps - 1:
                out = b.step(td)
            else:
                out, td = b.step_and_maybe_reset(td)
            kept.append(out)
            copies.append(out.clone())
        for key in copies[0].keys(True, True):
            now = torch.stack([o.get(key) for o in kept], 1)
            then = torch.stack([c.get(key) for c in copies], 1)
            assert torch.equal(now, then), f"{key}: a later step wrote into a tensor handed out earlier"
            assert torch.equal(rollout.get(key), then), f"{key}: rollout differs from the per-step path"
        assert int(host(rollout["next", "done"]).sum()) >= 2  # partial resets happened on the way
    finally:
        close_all(a, b)


def test_host_arrays_to_device_in_one_copy_are_new_memory():
    """The packed path (one host buffer, one copy, typed views; what a GPU env takes) gives the arrays' values,
    dtypes and shapes, in new memory every call, as the per-array path does on the host."""
    from gltensor.torchrl import _to_device

    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((5, 17)), rng.standard_normal((5, 1)).astype(np.float32),
              rng.integers(0, 2, (3, 5, 1)).astype(np.bool_), np.zeros((5, 0)), rng.standard_normal((5, 2, 3))]
    cpu = torch.device("cpu")
    for pack in (True, False):
        first, second = _to_device(arrays, cpu, pack=pack), _to_device(arrays, cpu, pack=pack)
        for arr, t, u in zip(arrays, first, second):
            assert t.dtype == torch.from_numpy(arr).dtype and tuple(t.shape) == arr.shape, (pack, arr.dtype)
            assert np.array_equal(t.numpy(), arr)
            if arr.size and pack:
                assert t.data_ptr() != u.data_ptr() and t.data_ptr() != arr.ctypes.data
                assert t.data_ptr() % t.element_size() == 0


def test_partial_steps_are_refused_with_the_way_out():
    """TorchRL's rollout(break_when_all_done=True) steps only the unfinished environments (a "_step" mask); the
    N environments step together, so the env says so and what to use instead."""
    env = GymBatchEnv("Hopper-v5", 3, height=H, width=W, render_flags=LIGHT)
    try:
        env.set_seed(3)
        with pytest.raises(RuntimeError, match=r"'_step' entry asks to step only some of the 3 environments"):
            env.rollout(300, break_when_any_done=False, break_when_all_done=True)
        td = env.reset()
        td["action"] = env.action_spec.rand()
        td["_step"] = torch.ones(3, dtype=torch.bool, device=env.device)  # every environment: a normal step
        assert host(env.step(td)["next", "pixels"]).shape == (3, H, W, 3)
    finally:
        env.close()


# -- partial resets, seeding, close, errors -------------------------------------------------------------------------
def test_partial_reset_touches_only_the_masked_environments():
    a = GymBatchEnv("HalfCheetah-v5", 3, height=H, width=W, render_flags=LIGHT)
    b = GymBatchEnv("HalfCheetah-v5", 3, height=H, width=W, render_flags=LIGHT)
    try:
        acts = actions(3, 6, 6)
        tds = [a.reset(seed=1), b.reset(seed=1)]
        for act in acts[:5]:
            for i, e in enumerate((a, b)):
                tds[i]["action"] = act.to(e.device)
                tds[i] = step_mdp(e.step(tds[i]))
        before = host(tds[0]["pixels"]).clone()
        tds[0]["_reset"] = torch.tensor([[False], [True], [False]], device=a.device)
        tds[0] = a.reset(tds[0])
        pix = host(tds[0]["pixels"])
        assert torch.equal(pix[[0, 2]], before[[0, 2]])  # the others keep their current frames
        assert not torch.equal(pix[1], before[1])
        assert not host(tds[0]["done"]).any()
        for i, e in enumerate((a, b)):
            tds[i]["action"] = acts[5].to(e.device)
            tds[i] = e.step(tds[i])
        pa, pb = host(tds[0]["next", "pixels"]), host(tds[1]["next", "pixels"])
        assert torch.equal(pa[[0, 2]], pb[[0, 2]])  # untouched environments go on exactly as without the reset
        assert not torch.equal(pa[1], pb[1])
    finally:
        close_all(a, b)


def test_seeding_is_deterministic(cheetah):
    other = GymBatchEnv("HalfCheetah-v5", 3, height=H, width=W, render_flags=LIGHT)

    def run(env, seed):
        env.set_seed(seed)
        td, frames = env.reset(), []
        for act in actions(3, 5, 6):
            td["action"] = act.to(env.device)
            out = env.step(td)
            frames.append(host(out["next", "pixels"]))
            td = step_mdp(out)
        return torch.stack(frames)

    try:
        first = run(cheetah, 11)
        assert torch.equal(first, run(other, 11))
        assert torch.equal(first, run(cheetah, 11))  # seeding again restarts the same episodes
        assert not torch.equal(first, run(other, 12))
    finally:
        other.close()


def test_close_is_idempotent_and_a_closed_env_says_so():
    env = GymBatchEnv("HalfCheetah-v5", 2, height=H, width=W, render_flags=LIGHT)
    td = env.reset()
    env.close()
    env.close()
    assert env.is_closed and env.venv.closed
    td["action"] = env.action_spec.rand()
    with pytest.raises(RuntimeError, match="GymBatchEnv is closed"):
        env.step(td)
    with pytest.raises(RuntimeError, match="GymBatchEnv is closed"):
        env.reset()


def test_bad_actions_get_clear_errors(cheetah):
    td = cheetah.reset()
    with pytest.raises(KeyError, match="no 'action' entry"):
        cheetah.step(td.exclude("action"))
    td["action"] = torch.zeros(3, 5, device=cheetah.device)
    with pytest.raises(ValueError, match=r"shape \(3, 5\), this env takes \(3, 6\)"):
        cheetah.step(td)
    td["action"] = torch.zeros(3, 6, dtype=torch.bool, device=cheetah.device)
    with pytest.raises(TypeError, match="dtype torch.bool"):
        cheetah.step(td)
    bad = torch.zeros(3, 6, device=cheetah.device)
    bad[1, 2] = float("nan")
    td["action"] = bad
    with pytest.raises(ValueError, match=r"environment\(s\) \[1\] is not finite"):
        cheetah.step(td)
    td["action"] = torch.zeros(3, 6, device=cheetah.device)  # the env is still usable after the refusals
    assert host(cheetah.step(td)["next", "pixels"]).shape == (3, H, W, 3)


def test_wrapping_a_vector_env_and_constructor_errors():
    venv = MujocoVectorEnv("HalfCheetah-v5", 2, height=H, width=W, render_only=False, render_flags=LIGHT,
                           autoreset_mode=AutoresetMode.DISABLED)
    env = GymBatchEnv(venv)
    try:
        assert not env.pixels_only and "observation" in env.observation_spec.keys()
        check_env_specs(env)
    finally:
        env.close()
    assert venv.closed
    same_step = MujocoVectorEnv("HalfCheetah-v5", 2, height=H, width=W, autoreset_mode=AutoresetMode.SAME_STEP)
    try:
        with pytest.raises(ValueError, match="SAME_STEP"):
            GymBatchEnv(same_step)
        with pytest.raises(TypeError, match="wrapped as it is"):
            GymBatchEnv(same_step, 2)
    finally:
        same_step.close()
    with pytest.raises(TypeError, match="not a Gymnasium MujocoEnv"):
        GymBatchEnv("CartPole-v1", 2)


# -- collectors and transforms -------------------------------------------------------------------------------------
def _tv_usable():
    try:
        import torchvision.transforms.functional  # noqa: F401
        return True
    except Exception:  # a torchvision built for another torch fails at import with various errors
        return False


def _transforms(resize):
    from torchrl.envs.transforms import CatFrames, Compose, GrayScale, Resize, RewardSum, ToTensorImage
    ts = [ToTensorImage(in_keys=["pixels"], out_keys=["pixels_t"])]
    if resize:
        ts.append(Resize(32, 32, in_keys=["pixels_t"], out_keys=["pixels_t"]))
    ts += [GrayScale(in_keys=["pixels_t"], out_keys=["pixels_t"]),
           CatFrames(N=4, dim=-3, in_keys=["pixels_t"], out_keys=["pixels_t"]), RewardSum()]
    return Compose(*ts)


@pytest.mark.parametrize("resize", [False, pytest.param(True, marks=pytest.mark.skipif(
    not _tv_usable(), reason="TorchRL's Resize needs a torchvision built for this torch"))])
def test_collector_and_image_transforms_on_the_envs_device(resize):
    try:  # TorchRL 0.14's name; SyncDataCollector in 0.10-0.13
        from torchrl.collectors import Collector as SyncDataCollector
    except ImportError:
        from torchrl.collectors import SyncDataCollector

    n, per_batch = 2, 2 * 6
    base = GymBatchEnv("HalfCheetah-v5", n, height=H, width=W, render_flags=LIGHT)
    env = TransformedEnv(base, _transforms(resize))
    side = 32 if resize else None
    try:
        env.set_seed(0)
        collector = SyncDataCollector(env, None, frames_per_batch=per_batch, total_frames=2 * per_batch,
                                      device=base.device)
        batches = []
        for batch in collector:
            batches.append(batch)
        collector.shutdown()
        assert len(batches) == 2
        b = batches[-1]
        assert b.batch_size == (n, per_batch // n)
        px = b["next", "pixels_t"]
        assert px.device == base.device and px.dtype == torch.float32
        assert px.shape == (n, per_batch // n, 4, side or H, side or W)
        assert b["next", "episode_reward"].shape == (n, per_batch // n, 1)
        # the transforms' frames are those of the raw pixels, converted as TorchRL documents: [0, 1] floats,
        # ITU-R 601 luma, the latest frame last in the stack
        if not resize:
            raw = b["next", "pixels"].float().div(255)
            gray = 0.2989 * raw[..., 0] + 0.587 * raw[..., 1] + 0.114 * raw[..., 2]
            torch.testing.assert_close(px[:, :, -1], gray, atol=1e-5, rtol=0)
        assert torch.equal(px[:, 1:, :-1], px[:, :-1, 1:])  # CatFrames: each step shifts the stack by one
    finally:
        env.close()
    assert base.is_closed


# -- dm_control ----------------------------------------------------------------------------------------------------
def _dm_loads():
    try:
        from dm_control import suite
        suite.load("cheetah", "run").close()
        return None
    except Exception as e:  # ImportError, or dm_control 1.0.x on MuJoCo 4 ("MjModel has no attribute ...")
        return f"dm_control unusable here: {type(e).__name__}: {e}"


@pytest.fixture(scope="module")
def dm_control():
    why = _dm_loads()
    if why:
        pytest.skip(why)


def test_dm_control_equals_torchrl_dmcontrolenv(dm_control):
    # DMControlEnv("cheetah", "run", from_pixels=True) itself renders 240x320 (its other keyword arguments go to the
    # task), so the reference at this size is its base class over the same suite task, DMControlWrapper, whose
    # render_kwargs set the size; seeding, keys and steps are the same code.
    from dm_control import suite
    from torchrl.envs import DMControlWrapper

    n, seed = 2, 4
    env = DMControlBatchEnv("cheetah", "run", n, pixels_only=False, height=H, width=W, camera_id=0)
    refs = [DMControlWrapper(suite.load("cheetah", "run"), from_pixels=True, pixels_only=False,
                             render_kwargs={"height": H, "width": W, "camera_id": 0}) for _ in range(n)]
    try:
        check_env_specs(env)
        for name in ("full_observation_spec", "full_action_spec", "full_reward_spec", "full_done_spec"):
            ours, theirs = getattr(env, name), getattr(refs[0], name)
            assert sorted(ours.keys(True, True)) == sorted(theirs.keys(True, True)), name
            for key in theirs.keys(True, True):
                assert ours[key].shape == (n,) + tuple(theirs[key].shape) and ours[key].dtype == theirs[key].dtype
        env.set_seed(seed)
        for k, r in enumerate(refs):
            r.set_seed(seed + k)
        td = env.reset()
        ref_tds = [r.reset() for r in refs]
        for key in ("pixels", "position", "velocity"):
            assert torch.equal(host(td[key]), torch.stack([t[key] for t in ref_tds])), key
        for t, a in enumerate(actions(n, 8, 6).double()):
            td["action"] = a.to(env.device)
            out = env.step(td)
            got = [r.step(TensorDict({"action": a[k]}, [])) for k, r in enumerate(refs)]
            for key in ("pixels", "position", "velocity", "reward", "done", "terminated", "truncated"):
                assert torch.equal(host(out["next", key]), torch.stack([g["next", key] for g in got])), (t, key)
            td = step_mdp(out)
    finally:
        close_all(env, *refs)


def test_dm_control_partial_reset_and_close(dm_control):
    env = DMControlBatchEnv("cheetah", "run", 2, height=H, width=W, render_flags=LIGHT)
    try:
        td = env.rollout(3, break_when_any_done=False)
        assert td["next", "pixels"].shape == (2, 3, H, W, 3) and td["next", "reward"].dtype == torch.float64
        td = env.reset()
        td["action"] = env.action_spec.rand()
        td = step_mdp(env.step(td))
        before = host(td["pixels"]).clone()
        td["_reset"] = torch.tensor([[True], [False]], device=env.device)
        td = env.reset(td)
        assert torch.equal(host(td["pixels"])[1], before[1])
        td["action"] = torch.zeros(2, 5, dtype=torch.float64)
        with pytest.raises(ValueError, match="shape"):
            env.step(td)
    finally:
        env.close()
    env.close()
    with pytest.raises(RuntimeError, match="DMControlBatchEnv is closed"):
        env.reset()


# -- the example -----------------------------------------------------------------------------------------------------
def test_ppo_example_runs():
    cmd = [sys.executable, str(ROOT / "examples" / "torchrl_ppo_pixels.py"), "--envs", "2", "--steps", "16",
           "--iterations", "2", "--size", "48", "--epochs", "1", "--minibatches", "2"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=subprocess_env(), cwd=ROOT)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("iteration")]
    assert len(lines) == 2, out.stdout
    assert all("loss" in ln for ln in lines)


# -- the benchmark mode ----------------------------------------------------------------------------------------------
def test_bench_torchrl_quick_checks_and_reports(tmp_path):
    """`python -m gltensor.bench torchrl --quick` without ParallelEnv (its spawned workers take a minute on two
    cores): the gltensor and vector paths are checked against GymEnvs before they are timed, and the JSON holds
    every path's figure, the TorchRL layer's cost (gltensor over vector) and the layer's own time measured alone."""
    import json

    out = tmp_path / "torchrl.json"
    cmd = [sys.executable, "-m", "gltensor.bench", "torchrl", "--quick", "--paths", "serial,gltensor,vector,layer",
           "--json", str(out)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=subprocess_env())
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-5000:]
    report = json.loads(out.read_text())
    assert report["status"] == "ok"
    rows = {r["path"]: r for r in report["results"]}
    assert sorted(rows) == ["gltensor", "layer", "serial", "vector"]
    assert all(r["env_steps_per_s"] > 0 for p, r in rows.items() if p != "layer")
    assert "layer_cost" in rows["gltensor"]
    layer = rows["layer"]
    assert layer["us_per_step"] > 0 and "env_steps_per_s" not in layer
    assert layer["layer_share"] == pytest.approx(layer["us_per_step"] / (1e6 * 2 / rows["vector"]["env_steps_per_s"]))
    assert "TorchRL layer" in run.stdout and "the layer alone" in run.stdout and (tmp_path / "torchrl.png").exists()
