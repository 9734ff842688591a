"""Stable-Baselines3: a ``SubprocVecEnv`` whose observations come through shared slots, not pickles.

SB3's ``SubprocVecEnv`` sends every worker's observation back through its pipe (pickled pixels, N per step)
and stacks them in the trainer. ``SlotVecEnv`` is that class with one change: each worker writes its image
into its slot (GL alone: a ``GLImage``/texture name/moderngl texture, or a host array) and its reply carries
only reward, done and info; the trainer reads every slot at once, one read per step, and hands SB3 the
NumPy batch it expects::

    from gltensor.sb3 import SlotVecEnv
    venv = SlotVecEnv([make_env(i) for i in range(8)])      # what you passed to SubprocVecEnv
    model = stable_baselines3.PPO("CnnPolicy", venv).learn(100_000)

What SB3 gains: no per-worker pickling or pipe transfer of pixels, one batched copy (host slots:
``memcpy`` of the batch; CUDA slots: one device-to-host copy for all workers), and workers that render on the
GPU never read back themselves. What it cannot gain: SB3's rollout buffer stores NumPy on the host and
``obs_as_tensor`` copies the batch to the policy's device again each step, so on the CUDA backend the batch
makes a round trip (device -> host -> device) that a plain PyTorch loop over ``gltensor.gymnasium`` avoids.

The worker protocol is SubprocVecEnv's (step, reset, render, close, get_spaces, env_method, get_attr,
has_attr, set_attr, is_wrapped), so ``get_attr``/``set_attr``/``env_method``/``env_is_wrapped``/
``get_images`` behave as there; ``info['terminal_observation']`` is a host array, read back in the worker
once per episode end. The observation space must be an image ``Box`` (height, width, channels) or
(channels, height, width) with 1 to 4 channels of uint8 (or a ``gltensor.gymnasium.SlotSpace``).
"""

from __future__ import annotations

import multiprocessing as mp

import numpy as np
from gymnasium import spaces
from stable_baselines3.common.vec_env import SubprocVecEnv
from stable_baselines3.common.vec_env.base_vec_env import CloudpickleWrapper

from .gymnasium import host_image_for_slot
from .slots import GLImage, SharedSlots

__all__ = ["SlotVecEnv", "slot_layout", "bench"]

_FORMATS = {1: "r8", 2: "rg8", 3: "rgba8", 4: "rgba8"}
_CHANNELS = {1: "r", 2: "rg", 3: "rgb", 4: "rgba"}


def slot_layout(space):
    """(height, width, channels, layout) of an image observation space, or ValueError saying why not."""
    shape = tuple(getattr(space, "shape", None) or ())
    if not isinstance(space, spaces.Box) or len(shape) != 3 or space.dtype != np.uint8:
        raise ValueError(f"SlotVecEnv needs an image observation space (a uint8 Box of 3 dimensions), not {space}")
    if getattr(space, "layout", None) == "chw" or (shape[-1] not in (1, 2, 3, 4) and shape[0] in (1, 2, 3, 4)):
        c, h, w = shape
        return h, w, c, "chw"
    h, w, c = shape
    if c not in _FORMATS:
        raise ValueError(f"SlotVecEnv: an image of {c} channels ({shape}); slots hold 1 to 4")
    return h, w, c, "hwc"


def _is_host(obs):
    return isinstance(obs, np.ndarray) or (hasattr(obs, "__array__") and not isinstance(obs, GLImage)
                                           and not hasattr(obs, "glo") and not np.isscalar(obs))


class _SlotObs:
    """The worker's side: writes each observation into its slot; returns host copies for terminal ones."""

    def __init__(self, handle, space):
        self.handle, self.space = handle, space
        self.h, self.w, self.c, self.layout = slot_layout(space)

    def write(self, obs):
        if _is_host(obs):
            self.handle.write_host(host_image_for_slot(np.asarray(obs), _FORMATS[self.c], self.layout))
        else:
            self.handle.write(obs)

    def to_host(self, obs):
        """The observation as a host array of the space's shape (GL images read back here, with GL alone)."""
        if _is_host(obs):
            return np.array(obs)
        from . import _gltensor

        name, target, region = (obs.name, obs.target, obs.region) if isinstance(obs, GLImage) else (
            int(getattr(obs, "glo", obs)), _gltensor.GL_TEXTURE_2D, None)
        with _gltensor.Capture(name, target, backend="cpu", region=region) as cap:
            arr = np.array(np.from_dlpack(cap.read(channels=_CHANNELS[self.c],
                                                   layout=self.layout)))
        return arr


def _worker(remote, parent_remote, env_fn_wrapper):
    """SB3's SubprocVecEnv worker, observations written into the slot instead of sent through the pipe."""
    from stable_baselines3.common.env_util import is_wrapped
    from stable_baselines3.common.vec_env.patch_gym import _patch_env

    parent_remote.close()
    env = _patch_env(env_fn_wrapper.var())
    out = None  # _SlotObs, once the trainer sent the handle
    while True:
        try:
            cmd, data = remote.recv()
            if cmd == "step":
                observation, reward, terminated, truncated, info = env.step(data)
                done = terminated or truncated
                info["TimeLimit.truncated"] = truncated and not terminated
                reset_info = {}
                if done:
                    info["terminal_observation"] = out.to_host(observation)
                    observation, reset_info = env.reset()
                out.write(observation)
                remote.send((None, reward, done, info, reset_info))
            elif cmd == "reset":
                maybe_options = {"options": data[1]} if data[1] else {}
                observation, reset_info = env.reset(seed=data[0], **maybe_options)
                out.write(observation)
                remote.send((None, reset_info))
            elif cmd == "attach":
                out = _SlotObs(data, env.observation_space)
                remote.send(None)
            elif cmd == "render":
                remote.send(env.render())
            elif cmd == "close":
                env.close()
                if out is not None:
                    out.handle.close()
                remote.close()
                break
            elif cmd == "get_spaces":
                remote.send((env.observation_space, env.action_space))
            elif cmd == "env_method":
                method = env.get_wrapper_attr(data[0])
                remote.send(method(*data[1], **data[2]))
            elif cmd == "get_attr":
                remote.send(env.get_wrapper_attr(data))
            elif cmd == "has_attr":
                try:
                    env.get_wrapper_attr(data)
                    remote.send(True)
                except AttributeError:
                    remote.send(False)
            elif cmd == "set_attr":
                remote.send(setattr(env, data[0], data[1]))
            elif cmd == "is_wrapped":
                remote.send(is_wrapped(env, data))
            else:
                raise NotImplementedError(f"`{cmd}` is not implemented in the worker")
        except EOFError:
            break
        except KeyboardInterrupt:
            break


class SlotVecEnv(SubprocVecEnv):
    """``SubprocVecEnv`` with the observations in shared slots: same arguments, same methods.

    ``backend``: the slots' ('auto': CUDA when this process can use it; 'cpu': shared host memory).
    ``observation_space``: the workers' (default: asked of worker 0, as SubprocVecEnv does)."""

    def __init__(self, env_fns, start_method=None, *, backend="auto", observation_space=None):
        self.waiting = False
        self.closed = False
        if start_method is None:
            start_method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
        ctx = mp.get_context(start_method)
        n_envs = len(env_fns)
        self.remotes, self.work_remotes = zip(*[ctx.Pipe() for _ in range(n_envs)], strict=True)
        self.processes = []
        for work_remote, remote, env_fn in zip(self.work_remotes, self.remotes, env_fns, strict=True):
            process = ctx.Process(target=_worker, args=(work_remote, remote, CloudpickleWrapper(env_fn)),
                                  daemon=True)
            process.start()
            self.processes.append(process)
            work_remote.close()
        try:
            self.remotes[0].send(("get_spaces", None))
            space, action_space = self.remotes[0].recv()
            if observation_space is not None:
                space = observation_space
            h, w, c, self.layout = slot_layout(space)
            # The handles travel through the pipes (by descriptor), after the workers started: the slots'
            # size comes from the workers' own observation space.
            self.slots = SharedSlots(n_envs, (w, h), format=_FORMATS[c], backend=backend)
            for k, remote in enumerate(self.remotes):
                remote.send(("attach", self.slots.handle(k)))
            for remote in self.remotes:
                remote.recv()
        except BaseException:
            # close() never raises (a worker that died here must not hide why __init__ failed).
            self.close()
            raise
        self._read_options = {"channels": _CHANNELS[c], "layout": self.layout}
        self.reads = 0
        super(SubprocVecEnv, self).__init__(n_envs, space, action_space)

    @property
    def backend(self):
        """The slots' backend ("cuda" or "cpu")."""
        return self.slots.backend

    def read(self):
        """Every worker's observation as one host array (N, *obs_shape): one read of all slots (what step() and
        reset() return; call it again only after the workers wrote, else StaleSlotError)."""
        frame = self.slots.read(**self._read_options)
        self.reads += 1
        if frame.device == "cpu":
            return np.from_dlpack(frame)
        import torch

        return torch.from_dlpack(frame).cpu().numpy()  # one device->host copy of the batch

    def step_wait(self):
        results = [remote.recv() for remote in self.remotes]
        self.waiting = False
        _, rews, dones, infos, self.reset_infos = zip(*results, strict=True)
        return self.read(), np.stack(rews), np.stack(dones), infos

    def reset(self):
        for env_idx, remote in enumerate(self.remotes):
            remote.send(("reset", (self._seeds[env_idx], self._options[env_idx])))
        results = [remote.recv() for remote in self.remotes]
        _, self.reset_infos = zip(*results, strict=True)
        self._reset_seeds()
        self._reset_options()
        return self.read()

    def close(self):
        """Stop the workers and free the slots; never raises for a worker that died (SIGKILL, crash), and
        later calls do nothing. SB3's own close() sends each worker "close" and fails on the first dead one
        (BrokenPipeError), leaving the others running and the slots (GPU memory) held: this one tells every
        worker it can reach, waits for each a bounded time, kills those that do not exit, then closes the
        slots."""
        if self.closed:
            return
        self.closed = True
        remotes, processes = getattr(self, "remotes", ()), getattr(self, "processes", ())
        try:
            if self.waiting:  # a step_async without its step_wait: the workers' replies are still in the pipes
                for remote in remotes:
                    try:
                        if remote.poll(5):
                            remote.recv()
                    except (EOFError, OSError):
                        pass
                self.waiting = False
            for remote in remotes:
                try:
                    remote.send(("close", None))
                except (BrokenPipeError, EOFError, OSError):
                    pass  # that worker is gone
            for process in processes:
                process.join(10)
                if process.is_alive():
                    process.kill()
                    process.join(5)
            for remote in remotes:
                remote.close()
        finally:
            slots = getattr(self, "slots", None)
            if slots is not None:
                slots.close()


def bench(make_env, n_envs=4, steps=200, *, make_slot_env=None, start_method=None, backends=("cpu", "cuda"),
          warmup=10, repeats=3):
    """µs per step of the stock SubprocVecEnv and of SlotVecEnv on each of `backends`, over the same
    environments, in this run.

    `make_env(k)` returns env k's constructor (a picklable callable) for SubprocVecEnv (host observations);
    `make_slot_env(k)` the same environment for SlotVecEnv (e.g. returning GLImages; default: `make_env`). A
    step: the same actions for every env, step, and the observation batch as NumPy (what SB3's rollout
    collection does). All vector envs live at once and their timed runs alternate (stock, then each backend,
    `repeats` times), so a drift of the machine moves every path alike. A backend this process cannot use
    (CUDA without a usable device) is listed in ``skipped`` with the reason. Returns a dict: per path
    ("SubprocVecEnv", "SlotVecEnv[cpu]", "SlotVecEnv[cuda]") the median µs per step of `repeats` runs of
    `steps` steps; ``speedup`` (stock / slots, per backend); ``exact`` (every path's first and last
    observations equal the stock class's)."""
    import statistics
    import time

    from . import cuda_available

    venvs, skipped = {}, {}
    try:
        venvs["SubprocVecEnv"] = SubprocVecEnv([make_env(k) for k in range(n_envs)], start_method=start_method)
        for backend in backends:
            if backend == "cuda" and not cuda_available():
                skipped[backend] = "no usable CUDA device in this process"
                continue
            make = make_slot_env if make_slot_env is not None else make_env
            venvs[f"SlotVecEnv[{backend}]"] = SlotVecEnv([make(k) for k in range(n_envs)], start_method=start_method,
                                                         backend=backend)
        actions = None
        first, last, runs = {}, {}, {name: [] for name in venvs}
        for name, venv in venvs.items():
            venv.seed(0)
            venv.action_space.seed(0)
            first[name] = np.array(venv.reset())
            if actions is None:  # the same actions for every path
                actions = [np.stack([venv.action_space.sample() for _ in range(n_envs)]) for _ in range(16)]
            for i in range(warmup):
                venv.step(actions[i % 16])
        for _ in range(repeats):
            for name, venv in venvs.items():
                start = time.perf_counter()
                for i in range(steps):
                    obs, *_ = venv.step(actions[(warmup + i) % 16])
                runs[name].append((time.perf_counter() - start) / steps * 1e6)
                last[name] = np.array(obs)
        results = {}
        for name, venv in venvs.items():
            results[name] = {"us_per_step": statistics.median(runs[name]), "runs_us": runs[name],
                             "obs_shape": list(last[name].shape), "obs_bytes": int(last[name].nbytes)}
            if isinstance(venv, SlotVecEnv):
                results[name]["backend"] = venv.backend
    finally:
        for venv in venvs.values():
            venv.close()
    stock = results["SubprocVecEnv"]["us_per_step"]
    slot_paths = [name for name in results if name != "SubprocVecEnv"]
    return {"n_envs": n_envs, "steps": steps, "repeats": repeats, "start_method": start_method or "forkserver",
            "exact": {name: bool(np.array_equal(first["SubprocVecEnv"], first[name])
                                 and np.array_equal(last["SubprocVecEnv"], last[name])) for name in slot_paths},
            "speedup": {name: stock / results[name]["us_per_step"] for name in slot_paths},
            "skipped": skipped, **results}
