"""Shared slots behind Gymnasium's stock AsyncVectorEnv(shared_memory=True): every pixel of every worker's
frame, at an odd size, under spawn, forkserver and fork, on every backend that runs here."""

import copy
import functools
import sys

import numpy as np
import pytest
from conftest import fork_if_safe, fork_or_skip  # noqa: E402

gymnasium = pytest.importorskip("gymnasium")
torch = pytest.importorskip("torch")

import slot_envs  # noqa: E402
from slot_envs import H, W, PatternEnv, pattern  # noqa: E402

from gltensor.gymnasium import SlotBatch, SlotSpace  # noqa: E402

METHODS = ["spawn", "forkserver", "fork"]


def expected(seeds, t, channels=3):
    return np.stack([pattern(s, t)[..., :channels] for s in seeds])


def make_vec(n, method, backend, **env_kwargs):
    fns = [functools.partial(PatternEnv, backend=backend, **env_kwargs) for _ in range(n)]
    return gymnasium.vector.AsyncVectorEnv(fns, shared_memory=True, context=method)


def as_numpy(x):
    if hasattr(x, "__dlpack_device__") and x.__dlpack_device__()[0] == 2:  # a gltensor frame in CUDA memory
        x = torch.from_dlpack(x)
    if isinstance(x, torch.Tensor):
        return x.cpu().numpy()
    return np.asarray(x)


@pytest.mark.parametrize("method", METHODS)
def test_every_pixel_each_step(method, backend):
    method = fork_or_skip(method)
    n = 3 if method != "spawn" else 4
    envs = make_vec(n, method, backend)
    try:
        assert isinstance(envs.observations, SlotBatch)
        assert envs.observation_space.shape == (n, H, W, 3)
        seeds = [100 + i for i in range(n)]
        obs, info = envs.reset(seed=100)
        assert isinstance(obs, torch.Tensor) and obs.dtype == torch.uint8
        assert tuple(obs.shape) == (n, H, W, 3)
        assert obs.device.type == ("cuda" if backend == "cuda" else "cpu")
        kept = [(0, obs)]
        np.testing.assert_array_equal(as_numpy(obs), expected(seeds, 0))
        for t in (1, 2, 3):
            obs, rew, term, trunc, info = envs.step(np.array([0, 1, 2, 1][:n]))
            np.testing.assert_array_equal(as_numpy(obs), expected(seeds, t))
            np.testing.assert_array_equal(rew, [-1.0, 0.0, 1.0, 0.0][:n])
            kept.append((t, obs))
        # A frame handed out is never overwritten by the workers' later steps.
        for t, o in kept:
            np.testing.assert_array_equal(as_numpy(o), expected(seeds, t))
    finally:
        envs.close()


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_host_array_observations(method, backend):
    method = fork_or_skip(method)
    n = 3
    envs = make_vec(n, method, backend, host=True, read_as="numpy")
    try:
        obs, _ = envs.reset(seed=7)
        assert isinstance(obs, np.ndarray) and obs.shape == (n, H, W, 3)
        np.testing.assert_array_equal(obs, expected([7, 8, 9], 0))
        obs, *_ = envs.step(np.zeros(n, dtype=np.int64))
        np.testing.assert_array_equal(obs, expected([7, 8, 9], 1))
    finally:
        envs.close()


def test_copy_false_returns_the_batch(backend):
    n = 3
    fns = [functools.partial(PatternEnv, backend=backend) for _ in range(n)]
    envs = gymnasium.vector.AsyncVectorEnv(fns, shared_memory=True, copy=False, context=fork_if_safe())
    try:
        batch, _ = envs.reset(seed=0)
        assert isinstance(batch, SlotBatch) and batch.shape == (n, H, W, 3)
        first = torch.from_dlpack(batch)  # the read of this step
        again = torch.from_dlpack(batch)  # the same step: the same frame, no second read
        assert first.data_ptr() == again.data_ptr()
        np.testing.assert_array_equal(np.asarray(batch), expected([0, 1, 2], 0))
        batch2, *_ = envs.step(np.zeros(n, dtype=np.int64))
        assert batch2 is batch
        second = torch.from_dlpack(batch2)
        np.testing.assert_array_equal(second.cpu().numpy(), expected([0, 1, 2], 1))
        np.testing.assert_array_equal(first.cpu().numpy(), expected([0, 1, 2], 0))  # not overwritten
        assert batch.slots.reads == 2
    finally:
        envs.close()


def test_copy_false_with_the_stored_layout_hands_out_the_slots(backend):
    """copy=False and a space asking for the slots as stored (4 channels of 'rgba8', uint8, HWC, top row first):
    each step's frame is a zero-copy view of the slots; the previous step's stays intact while the loop keeps it."""
    n = 3
    fns = [functools.partial(PatternEnv, backend=backend, channels=4) for _ in range(n)]
    envs = gymnasium.vector.AsyncVectorEnv(fns, shared_memory=True, copy=False, context=fork_if_safe())
    try:
        batch, _ = envs.reset(seed=0)
        assert batch.zero_copy and batch.shape == (n, H, W, 4)
        prev = None
        for t in range(5):
            if t:
                batch, *_ = envs.step(np.zeros(n, dtype=np.int64))
            x = torch.from_dlpack(batch)
            # The slots themselves: strides of the padded slots (97 x 4 bytes per row in 512).
            assert x.stride() == (batch.slots.slot_bytes, batch.slots.row_pitch, 4, 1)
            np.testing.assert_array_equal(x.cpu().numpy(), expected([0, 1, 2], t, 4), err_msg=f"step {t}")
            if prev is not None:
                np.testing.assert_array_equal(prev.cpu().numpy(), expected([0, 1, 2], t - 1, 4))
            prev = x
        del prev, x
    finally:
        envs.close()


def test_autoreset_next_step(backend):
    """An episode of 2 steps: the autoreset step's frame is the reset's (t = 0) in that worker."""
    envs = make_vec(3, fork_if_safe(), backend, episode=2)
    try:
        obs, _ = envs.reset(seed=50)
        seeds = [50, 51, 52]
        for t in (1, 2, 0, 1):
            obs, *_ = envs.step(np.zeros(3, dtype=np.int64))
            np.testing.assert_array_equal(as_numpy(obs), expected(seeds, t))
    finally:
        envs.close()


def test_space_is_a_box():
    space = SlotSpace(H, W, 3, backend="cpu")
    assert isinstance(space, gymnasium.spaces.Box)
    assert space.shape == (H, W, 3) and space.dtype == np.uint8
    assert space.contains(space.sample())
    import gltensor

    assert space.contains(gltensor.GLImage(5))
    chw = SlotSpace(H, W, 1, dtype="float32", layout="chw")
    assert chw.shape == (1, H, W) and chw.dtype == np.float32 and chw.high.max() == 1.0
    assert chw.read_options == {"channels": "r", "dtype": "float32", "layout": "chw", "flip": True}
    assert copy.deepcopy(space) == space  # a space deep-copies as a Box (only the batch reads)
    with pytest.raises(ValueError, match="channels"):
        SlotSpace(H, W, 5)


def test_without_shared_memory_says_why():
    fns = [functools.partial(PatternEnv, backend="cpu") for _ in range(2)]
    envs = gymnasium.vector.SyncVectorEnv(fns)
    try:
        with pytest.raises(TypeError, match="shared_memory=True"):
            envs.reset(seed=0)
    finally:
        envs.close()


def test_gltensor_does_not_import_gymnasium():
    import subprocess

    code = "import sys, gltensor; assert 'gymnasium' not in sys.modules, 'gymnasium imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_batch_read_close_backend(backend):
    """The verbs every adapter object has: read(), close(), backend."""
    fns = [functools.partial(PatternEnv, backend=backend) for _ in range(2)]
    envs = gymnasium.vector.AsyncVectorEnv(fns, shared_memory=True, copy=False, context=fork_if_safe())
    try:
        batch, _ = envs.reset(seed=0)
        assert batch.backend == batch.slots.backend and batch.backend in ("cpu", "cuda")
        np.testing.assert_array_equal(as_numpy(batch.latest()), expected([0, 1], 0))
        assert callable(batch.read) and callable(batch.close)
    finally:
        envs.close()
