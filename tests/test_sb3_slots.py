"""SB3: SlotVecEnv (SubprocVecEnv with the observations in shared slots) gives exactly the observations of the
stock SubprocVecEnv over the same environments, keeps its worker protocol, and trains PPO."""

import functools

import numpy as np
import pytest
from conftest import fork_if_safe, fork_or_skip  # noqa: E402

pytest.importorskip("gymnasium")
pytest.importorskip("torch")
pytest.importorskip("stable_baselines3")

from stable_baselines3.common.vec_env import SubprocVecEnv  # noqa: E402

from gltensor.sb3 import SlotVecEnv, slot_layout  # noqa: E402
from slot_envs import H, W, PatternEnv, pattern  # noqa: E402


def fns(n, **kw):
    return [functools.partial(PatternEnv, box=True, **kw) for _ in range(n)]


def run(venv, steps, n):
    venv.seed(30)
    out = [venv.reset()]
    infos = []
    for _ in range(steps):
        obs, rew, done, info = venv.step(np.arange(n) % 3)
        out.append(obs)
        infos.append((rew, done, info))
    return out, infos


@pytest.mark.parametrize("method", ["forkserver", "spawn", "fork"])
def test_same_observations_as_subprocvecenv(method, backend):
    method = fork_or_skip(method)
    n = 3
    stock = SubprocVecEnv(fns(n, host=True, gl=False, episode=2), start_method=method)
    try:
        want, want_infos = run(stock, 3, n)
    finally:
        stock.close()
    # The slot env renders with GL (GLImage observations); the stock one pickles host arrays of the same pattern.
    venv = SlotVecEnv(fns(n, backend=backend, episode=2), start_method=method, backend=backend)
    try:
        assert venv.slots.backend == backend
        got, got_infos = run(venv, 3, n)
        assert venv.reads == 4
    finally:
        venv.close()
    for t, (w, g) in enumerate(zip(want, got)):
        assert isinstance(g, np.ndarray) and g.shape == (n, H, W, 3) and g.dtype == np.uint8
        np.testing.assert_array_equal(g, w, err_msg=f"step {t}")
    seeds = [30, 31, 32]
    np.testing.assert_array_equal(got[1], np.stack([pattern(s, 1)[..., :3] for s in seeds]))
    np.testing.assert_array_equal(got[2], np.stack([pattern(s, 0)[..., :3] for s in seeds]))  # autoreset
    for (wr, wd, wi), (gr, gd, gi) in zip(want_infos, got_infos):
        np.testing.assert_array_equal(gr, wr)
        np.testing.assert_array_equal(gd, wd)
        for a, b in zip(wi, gi):
            assert a.keys() == b.keys()
            if "terminal_observation" in a:  # read back in the worker, once per episode end
                np.testing.assert_array_equal(b["terminal_observation"], a["terminal_observation"])


def test_host_observations_without_gl():
    """Environments whose observations are arrays and that have no GL context (CPU backend)."""
    n = 2
    venv = SlotVecEnv(fns(n, host=True, gl=False), start_method=fork_if_safe(), backend="cpu")
    try:
        venv.seed(5)
        obs = venv.reset()
        np.testing.assert_array_equal(obs, np.stack([pattern(s, 0)[..., :3] for s in (5, 6)]))
    finally:
        venv.close()


def test_worker_protocol(backend):
    venv = SlotVecEnv(fns(2, backend=backend), start_method=fork_if_safe(), backend=backend)
    try:
        assert venv.get_attr("channels") == [3, 3]
        venv.set_attr("channels", 3, indices=[1])
        assert venv.has_attr("gl") and not venv.has_attr("nope")
        assert venv.env_method("gl_size") == [(H, W), (H, W)]
        import gymnasium

        assert venv.env_is_wrapped(gymnasium.Wrapper) == [False, False]
        assert venv.observation_space.shape == (H, W, 3)
    finally:
        venv.close()
    venv.close()  # idempotent


def test_slot_layout_refuses_non_images():
    import gymnasium

    assert slot_layout(gymnasium.spaces.Box(0, 255, (3, 40, 50), np.uint8)) == (40, 50, 3, "chw")
    with pytest.raises(ValueError, match="image observation space"):
        slot_layout(gymnasium.spaces.Box(0, 1, (4,), np.float32))


def test_ppo_learns_a_few_steps():
    from stable_baselines3 import PPO

    venv = SlotVecEnv(fns(2, height=40, width=40, episode=8), start_method=fork_if_safe(), backend="cpu")
    try:
        model = PPO("CnnPolicy", venv, n_steps=16, batch_size=16, n_epochs=1, seed=0, device="cpu")
        model.learn(total_timesteps=32)
        assert model.num_timesteps >= 32
    finally:
        venv.close()


def test_read_close_backend(backend):
    """The verbs every adapter object has: read() (the observation batch, as reset()/step() return it), close(),
    backend."""
    venv = SlotVecEnv(fns(2, backend=backend), start_method=fork_if_safe(), backend=backend)
    try:
        assert venv.backend == venv.slots.backend and venv.backend in ("cpu", "cuda")
        obs = venv.reset()
        assert obs.shape == (2, H, W, 3)
        import gltensor

        with pytest.raises(gltensor.StaleSlotError):
            venv.read()  # no worker wrote since reset()'s read
    finally:
        venv.close()
    venv.close()
