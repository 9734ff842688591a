"""Shared slots you can trust, the Python side (issue 34): numpy.array() of a SlotBatch copies, SlotVecEnv.close()
survives a killed worker, closing one handle leaves the others working, latest() does not take an exited writer
for new data, 3-channel float SlotSpaces take their own host arrays, and every gltensor exception pickles (so
Gymnasium's AsyncVectorEnv hands a worker's error to the trainer instead of hanging)."""

import functools
import multiprocessing as mp
import os
import pickle
import signal

import numpy as np
import pytest

import gltensor
from gltensor import _gltensor

H, W = 61, 97  # odd on purpose


def pattern(slot, step, channels=4, dtype=np.uint8):
    rng = np.random.default_rng([slot, step])
    if np.dtype(dtype).kind == "f":
        return rng.random((H, W, channels), dtype=np.float32).astype(dtype)
    return rng.integers(0, 256, (H, W, channels), dtype=dtype)


def to_host(x):
    try:
        return np.from_dlpack(x)
    except (BufferError, RuntimeError, TypeError):
        import torch

        return torch.from_dlpack(x).cpu().numpy()


# ------------------------------------------------------------------ exceptions pickle (AsyncVectorEnv's queue)

def _error_classes():
    from gltensor._adapter import NotRenderedError

    classes = {name: getattr(_gltensor, name) for name in dir(_gltensor)
               if name.endswith("Error") and isinstance(getattr(_gltensor, name), type)
               and issubclass(getattr(_gltensor, name), _gltensor.GLTensorError)}
    classes["NotRenderedError"] = NotRenderedError
    return classes


def test_every_error_class_is_listed():
    names = set(_error_classes())
    assert {"GLTensorError", "StaleSlotError", "SlotsBusyError", "ClosedError", "InvalidArgumentError",
            "NotRenderedError", "OutOfMemoryError", "CudaError", "WrongContextError"} <= names
    assert len(names) >= 17


@pytest.mark.parametrize("name", sorted(_error_classes()))
def test_every_gltensor_error_pickles_with_type_message_and_attributes(name):
    cls = _error_classes()[name]
    err = cls("1 of 4 slots not written since the last read: slot 2: its writer (pid 123) has exited")
    err.slot = 2  # an attribute a caller (or a later version) attaches travels too
    back = pickle.loads(pickle.dumps(err, protocol=pickle.HIGHEST_PROTOCOL))
    assert type(back) is cls and str(back) == str(err) and back.args == err.args and back.slot == 2
    assert isinstance(back, gltensor.GLTensorError) and isinstance(back, RuntimeError)
    # The class itself travels by reference (Gymnasium puts the type and the value in its error queue).
    assert pickle.loads(pickle.dumps(cls)) is cls


def _unpickle_in_fresh_process(data, conn):
    try:
        err = pickle.loads(data)
        conn.send((type(err).__module__, type(err).__qualname__, str(err)))
    except BaseException as e:  # noqa: BLE001  (the test reports it)
        conn.send(("failed", repr(e), ""))


def test_a_raised_error_unpickles_in_a_process_that_never_imported_gltensor():
    with pytest.raises(gltensor.StaleSlotError) as info:
        gltensor.SharedSlots(2, (8, 8), backend="cpu").read()
    data = pickle.dumps(info.value)
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    p = ctx.Process(target=_unpickle_in_fresh_process, args=(data, child))
    p.start()
    assert parent.poll(120), "the spawned process did not answer"
    assert parent.recv() == ("gltensor", "StaleSlotError", str(info.value))
    p.join(30)


# Gymnasium logs the worker's error as UserWarnings before raising it in the trainer: expected here, not ours.
@pytest.mark.filterwarnings("ignore::UserWarning:gymnasium.vector.async_vector_env")
def test_async_vector_env_hands_a_workers_gltensor_error_to_the_trainer(backend):
    """A worker's write refused by gltensor (an image of the wrong size) comes back as that error, not a hang."""
    gymnasium = pytest.importorskip("gymnasium")
    import slot_fault_envs

    fns = [functools.partial(slot_fault_envs.WrongSizeEnv, backend=backend, bad_step=1 if i == 1 else None)
           for i in range(2)]
    envs = gymnasium.vector.AsyncVectorEnv(fns, shared_memory=True, context="spawn")
    try:
        envs.reset(seed=0)
        envs.step_async(np.zeros(2, dtype=np.int64))
        with pytest.raises(gltensor.InvalidArgumentError, match=r"\d+x\d+"):
            envs.step_wait(timeout=120)
    finally:
        envs.close(terminate=True)


# ------------------------------------------------------------------ numpy.array(SlotBatch) copies


def _batch(backend, n=2, channels=4, **kw):
    from gltensor.gymnasium import SlotBatch, SlotSpace

    space = SlotSpace(H, W, channels, backend=backend, read_as="numpy", **kw)
    slots = gltensor.SharedSlots(n, (W, H), format=space.slot_format, backend=backend)
    return SlotBatch(space, slots), slots


def test_numpy_array_of_a_slot_batch_is_a_copy_that_holds_no_set(backend, gl):
    pytest.importorskip("gymnasium")
    batch, slots = _batch(backend)
    assert batch.zero_copy
    kept = []
    for step in range(6):  # three sets: keeping every step's copy must never make a step busy
        for k in range(2):
            slots.write_host(k, pattern(k, step))
        arr = np.array(batch)  # copy=True (before: the view itself, holding a set: step 2 raised SlotsBusyError)
        arr2 = np.array(batch, copy=True)
        kept.append((step, arr))
        # CUDA slots: the array is the host copy torch made (its base is that tensor's memory, not the slots')
        assert (arr.flags.owndata or backend == "cuda") and arr.flags.writeable and not np.shares_memory(arr, arr2)
    for step, arr in kept:  # none was overwritten by a later write
        np.testing.assert_array_equal(arr, np.stack([pattern(k, step) for k in range(2)]))
    batch.close()


def test_numpy_copy_false_refuses_where_a_copy_is_needed(backend, gl):
    pytest.importorskip("gymnasium")
    batch, slots = _batch(backend)
    for k in range(2):
        slots.write_host(k, pattern(k, 0))
    with pytest.raises(ValueError):
        np.asarray(batch, dtype=np.float32, copy=False)
    if backend == "cpu":  # host slots, the stored dtype: the frame itself, no copy
        view = np.asarray(batch, copy=False)
        np.testing.assert_array_equal(view, np.stack([pattern(k, 0) for k in range(2)]))
        del view
    else:
        with pytest.raises(ValueError, match="needs a copy"):
            np.asarray(batch, copy=False)
    np.testing.assert_array_equal(np.asarray(batch, dtype=np.float32),
                                  np.stack([pattern(k, 0) for k in range(2)]).astype(np.float32))
    batch.close()


# ------------------------------------------------------------------ 3-channel float SlotSpaces


@pytest.mark.parametrize("fmt", ["rgba16f", "rgba32f"])
@pytest.mark.parametrize("dtype", ["float32", "uint8"])
def test_three_channel_float_space_takes_its_own_host_arrays(backend, gl, fmt, dtype):
    pytest.importorskip("gymnasium")
    from gltensor.gymnasium import SlotBatch, SlotSpace, _write_slot  # noqa: F401

    space = SlotSpace(H, W, 3, format=fmt, dtype=dtype, backend=backend, read_as="numpy")
    slots = gltensor.SharedSlots(2, (W, H), format=fmt, backend=backend)
    try:
        want = []
        for k in range(2):
            img = pattern(k, 3, 3, np.uint8)
            value = img if dtype == "uint8" else img.astype(np.float32) / 255.0
            assert space.contains(value.astype(space.dtype))
            _write_slot(space, k, value.astype(space.dtype), slots)  # what the worker's step does
            want.append(img)
        got = to_host(SlotBatch(space, slots).read())
        if dtype == "uint8":
            np.testing.assert_array_equal(got, np.stack(want))
        else:  # a float16 slot keeps 11 bits of mantissa
            np.testing.assert_allclose(got, np.stack(want).astype(np.float32) / 255.0,
                                       atol=1e-3 if fmt == "rgba16f" else 1e-7)
        _write_slot(space, 0, value.astype(space.dtype), slots)
        _write_slot(space, 1, value.astype(space.dtype), slots)
        alpha = to_host(slots.read(channels="rgba", dtype="float32"))[..., 3]
        np.testing.assert_array_equal(alpha, np.ones_like(alpha))  # the padded channel is opaque
    finally:
        slots.close()


# ------------------------------------------------------------------ one handle's close leaves the others


def test_closing_one_handle_leaves_the_other_handles_and_the_trainer_working(backend, gl):
    slots = gltensor.SharedSlots(3, (W, H), backend=backend)
    h0, h1, h2 = slots.handles()
    h0.close()
    h0.close()  # idempotent
    with pytest.raises(gltensor.ClosedError, match="slot handle 0 was closed"):
        h0.write_host(pattern(0, 0))
    with pytest.raises(gltensor.ClosedError):
        pickle.dumps(h0)
    back = pickle.loads(pickle.dumps(h1))  # works: its client is open
    assert back.slot == 1
    back.close()
    pickle.loads(pickle.dumps(slots)).close()
    slots.write_host(0, pattern(0, 1))  # the trainer's own write
    h1.write_host(pattern(1, 1))
    h2.write_host(pattern(2, 1))
    np.testing.assert_array_equal(to_host(slots.read()), np.stack([pattern(k, 1) for k in (0, 1, 2)]))
    h1.close(), h2.close()
    slots.write_host(0, pattern(0, 2))  # the SharedSlots owns the client: still open after every handle closed
    slots.close()
    with pytest.raises(gltensor.ClosedError):
        h1.client.write_host(1, pattern(1, 2))


def test_handles_unpickled_together_share_a_client_closed_with_the_last(backend):
    slots = gltensor.SharedSlots(2, (W, H), backend=backend)
    a, b = pickle.loads(pickle.dumps(slots.handles()))
    assert a.client is b.client
    fd = a.client._fds.control_fd
    os.fstat(fd)
    a.close()
    os.fstat(fd)  # b still uses it
    b.close()
    assert a.client.closed
    with pytest.raises(OSError):
        os.fstat(fd)
    slots.close()


# ------------------------------------------------------------------ SlotBatch.latest() and exited writers


def _write_and_exit(handle, step):
    ctx = handle.headless_context() if handle.client.backend == "cuda" else None  # CUDA host writes need GL
    handle.write_host(pattern(handle.slot, step))
    if ctx is not None:
        ctx.close()


def test_latest_returns_the_same_frame_after_the_writer_exited(backend, gl):
    pytest.importorskip("gymnasium")
    batch, slots = _batch(backend)
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_write_and_exit, args=(slots.handle(k), 4)) for k in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    first = np.array(batch)
    assert slots.states() == ["writer_gone", "writer_gone"]
    second = np.array(batch)  # the same step: the same frame (before: StaleSlotError, the exit taken for a write)
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(second, np.stack([pattern(k, 4) for k in range(2)]))
    batch.close()


def test_copy_false_batch_survives_async_vector_env_close(backend):
    gymnasium = pytest.importorskip("gymnasium")
    from slot_envs import PatternEnv
    from slot_envs import pattern as env_pattern

    fns = [functools.partial(PatternEnv, backend=backend, read_as="numpy") for _ in range(2)]
    envs = gymnasium.vector.AsyncVectorEnv(fns, shared_memory=True, context="spawn", copy=False)
    batch = None
    try:
        batch, _ = envs.reset(seed=3)
        first = np.array(batch)
        np.testing.assert_array_equal(first, np.stack([env_pattern(s, 0)[..., :3] for s in (3, 4)]))
    finally:
        envs.close()
    np.testing.assert_array_equal(np.array(batch), first)  # the workers exited: the same frame


# ------------------------------------------------------------------ SlotVecEnv.close() with a dead worker


def _sb3_fns(n, backend):
    from slot_envs import PatternEnv

    return [functools.partial(PatternEnv, box=True, backend=backend) for _ in range(n)]


def test_slot_vec_env_close_with_a_killed_worker(backend):
    pytest.importorskip("stable_baselines3")
    from gltensor.sb3 import SlotVecEnv

    venv = SlotVecEnv(_sb3_fns(3, backend), start_method="spawn", backend=backend)
    venv.reset()
    os.kill(venv.processes[1].pid, signal.SIGKILL)
    venv.processes[1].join(30)
    venv.close()  # before: BrokenPipeError from SB3's close, the slots left open
    assert venv.slots._core.closed
    assert not any(p.is_alive() for p in venv.processes)
    venv.close()  # later calls do nothing


def test_slot_vec_env_init_error_is_not_hidden_by_a_dead_worker(backend, monkeypatch):
    pytest.importorskip("stable_baselines3")
    import gltensor.sb3 as sb3

    made = {}

    class Failing(gltensor.SharedSlots):
        def __init__(self, *args, **kwargs):
            for p in made["venv"].processes:  # every worker dies before the handles go out
                os.kill(p.pid, signal.SIGKILL)
                p.join(30)
            raise RuntimeError("the original error")

    original_layout = sb3.slot_layout

    def layout_and_note(space):
        import inspect

        made["venv"] = inspect.currentframe().f_back.f_locals["self"]
        return original_layout(space)

    monkeypatch.setattr(sb3, "SharedSlots", Failing)
    monkeypatch.setattr(sb3, "slot_layout", layout_and_note)
    with pytest.raises(RuntimeError, match="the original error"):
        sb3.SlotVecEnv(_sb3_fns(2, backend), start_method="spawn", backend=backend)
    assert not any(p.is_alive() for p in made["venv"].processes)
