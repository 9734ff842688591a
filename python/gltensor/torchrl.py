"""TorchRL environments over gltensor's one-process MuJoCo batch: pixel batches that never leave the GPU.

    import os; os.environ.setdefault("MUJOCO_GL", "egl")
    from gltensor.torchrl import GymBatchEnv
    env = GymBatchEnv("HalfCheetah-v5", num_envs=16, height=84, width=84)
    rollout = env.rollout(100)            # rollout["next", "pixels"]: (16, 100, 84, 84, 3) uint8 on env.device

TorchRL's pixel recipe, ``ParallelEnv``/``SerialEnv`` of ``GymEnv(id, from_pixels=True)`` or
``DMControlEnv(..., from_pixels=True)``, renders every environment with its own viewer into host memory; TorchRL
stacks the N arrays and copies the batch to the policy's device. Here N environments live in one process
(:class:`gltensor.mujoco.MujocoVectorEnv`, :class:`gltensor.mujoco.DmControlBatch`), one
``BatchRenderer`` draws them and hands the batch over in one read, and the TensorDicts hold that tensor itself: on
the CUDA backend the pixels are born on the GPU and no host copy of them is made.

- :class:`GymBatchEnv`: Gymnasium MuJoCo tasks, keys and specs as TorchRL's ``GymEnv(id, from_pixels=True,
  pixels_only=...)``: ``"pixels"`` ((N, H, W, 3) uint8), ``"observation"`` (the state, with pixels_only=False),
  ``"action"`` (bounded), ``"reward"`` (N, 1), ``"done"``/``"terminated"``/``"truncated"`` (N, 1) bool.
- :class:`DMControlBatchEnv`: dm_control suite tasks, keys and specs as TorchRL's ``DMControlEnv(domain, task,
  from_pixels=True, pixels_only=...)`` (the task's own observation keys, float64 reward, a time limit is
  ``truncated``).

Both have ``batch_size=[N]`` and the device of gltensor's tensors (CUDA on the CUDA backend, else CPU). Finished
environments are reset by TorchRL (``"_reset"``, as its collectors and ``rollout`` do), never inside ``step``;
``set_seed(s)`` resets environment k with seed ``s + k`` (what TorchRL's ``GymEnv(..., num_envs=N)`` gives through
Gymnasium's vector reset) and returns TorchRL's next seed. Actions may be on any device: one copy to the host per
step, for the physics. The step's rewards, its three flags (one array) and the state are the other copies, to the
device.
"""

from __future__ import annotations

import numpy as np

try:
    import torch
    from tensordict import TensorDict
    from torchrl.data import Bounded, Categorical, Composite, Unbounded
    from torchrl.envs import EnvBase
except ImportError as exc:  # pragma: no cover - exercised only without torchrl
    raise ImportError("gltensor.torchrl needs TorchRL and tensordict (>= 0.10): pip install 'gltensor[torchrl]' "
                      "(torchrl, tensordict; with a CPU-only or pinned torch add --no-deps and install their "
                      "small dependencies: cloudpickle, packaging, pyvers, hoptorch, orjson)") from exc

import gltensor

__all__ = ["GymBatchEnv", "DMControlBatchEnv"]


_TORCH_DTYPES = {}


def _torch_dtype(np_dtype):
    np_dtype = np.dtype(np_dtype)
    t = _TORCH_DTYPES.get(np_dtype)
    if t is None:
        t = _TORCH_DTYPES[np_dtype] = torch.from_numpy(np.zeros(0, dtype=np_dtype)).dtype
    return t


def _box_spec(low, high, shape, dtype, device):
    """TorchRL's spec of a box: Bounded where both bounds are finite everywhere, else Unbounded (as GymEnv maps
    a Gymnasium Box)."""
    low, high = np.broadcast_to(low, shape[1:]), np.broadcast_to(high, shape[1:])
    if np.issubdtype(np.asarray(low).dtype, np.floating) and not (np.isfinite(low).all() and np.isfinite(high).all()):
        return Unbounded(shape=shape, dtype=dtype, device=device)
    low = torch.as_tensor(np.broadcast_to(low, shape).copy(), dtype=dtype, device=device)
    high = torch.as_tensor(np.broadcast_to(high, shape).copy(), dtype=dtype, device=device)
    return Bounded(low=low, high=high, shape=shape, dtype=dtype, device=device)


def _done_spec(n, device):
    flag = Categorical(2, shape=(n, 1), dtype=torch.bool, device=device)
    return Composite(done=flag, terminated=flag.clone(), truncated=flag.clone(), shape=(n,), device=device)


def _flags(terminated, truncated, device):
    """done, terminated, truncated as (N, 1) bool tensors on device: one (3, N, 1) array, one host-to-device copy,
    three views of it (separate arrays would be three synchronous copies of a few bytes each on a GPU)."""
    n = len(terminated)
    host = np.empty((3, n, 1), np.bool_)
    np.logical_or(terminated, truncated, out=host[0, :, 0])
    host[1, :, 0] = terminated
    host[2, :, 0] = truncated
    return torch.from_numpy(host).to(device).unbind(0)


def _tensordict(values, batch_size, device):
    """A TensorDict of values this module made itself (every one of batch_size's leading shape, on device):
    TensorDict._new_unsafe skips the per-entry validation of the public constructor (~30 µs a step at N = 64 on
    the development machine), as TorchRL's own hot paths do; the public constructor where it is missing."""
    new = getattr(TensorDict, "_new_unsafe", None)
    if new is not None:
        return new(values, batch_size=batch_size, device=device)
    return TensorDict(values, batch_size=batch_size, device=device)


class _BatchEnv(EnvBase):
    """What both environments share: the device of the frames, actions to the host, flags to the device, close."""

    _frames_checked = False

    def __init__(self, n, backend, cuda_device):
        if backend == "cuda":
            index = cuda_device if cuda_device is not None else gltensor.default_cuda_device()
            device = torch.device("cuda", 0 if index is None else int(index))
        else:
            device = torch.device("cpu")
        super().__init__(device=device, batch_size=torch.Size([n]))
        self._n = n
        self._frames_device = device  # where the renderer hands frames over; env.to(other) copies them there

    # -- actions -------------------------------------------------------------------------------------------------
    def _host_actions(self, tensordict, np_dtype):
        """The action entry as one host array (one device-to-host copy when it is on the GPU), checked."""
        name = type(self).__name__
        action = tensordict.get("action", None)
        if action is None:
            raise KeyError(f"{name}.step: the tensordict has no 'action' entry (keys: "
                           f"{sorted(map(str, tensordict.keys()))}); set td['action'] to a tensor of shape "
                           f"{tuple(self.action_spec.shape)}, e.g. env.action_spec.rand()")
        if not isinstance(action, torch.Tensor):
            raise TypeError(f"{name}.step: 'action' must be a torch.Tensor, not {type(action).__name__}")
        want = tuple(self.action_spec.shape)
        if tuple(action.shape) != want:
            raise ValueError(f"{name}.step: 'action' has shape {tuple(action.shape)}, this env takes {want} "
                             f"(batch_size {list(self.batch_size)} x the action's {want[1:]})")
        if action.dtype == torch.bool or action.is_complex():
            raise TypeError(f"{name}.step: 'action' has dtype {action.dtype}; this env takes "
                            f"{self.action_spec.dtype} (real numbers)")
        host = action.detach().to("cpu", _torch_dtype(np_dtype)).numpy()
        if not np.isfinite(host).all():
            bad = sorted({int(i) for i in np.argwhere(~np.isfinite(host))[:, 0]})
            raise ValueError(f"{name}.step: 'action' of environment(s) {bad[:8]} is not finite (NaN or inf); MuJoCo "
                             "would reset those simulations silently (mjWARN_BADCTRL). Check the policy's output")
        return host

    def _reset_mask(self, tensordict):
        """The "_reset" entry as a host bool array of shape (N,), or None (reset every environment)."""
        reset = None if tensordict is None else tensordict.get("_reset", None)
        if reset is None:
            return None
        mask = reset.detach().reshape(self._n, -1).any(-1).cpu().numpy()
        return None if mask.all() else mask

    def _pixels(self, pixels):
        """The frames for the TensorDict: the renderer's tensor itself, unless env.to() moved the env elsewhere
        (then one copy, as TorchRL's envs cast their outputs to their device). Checked once: a renderer on another
        GPU than the one the env was made for would otherwise be copied every step."""
        if not self._frames_checked:
            if pixels.device != self._frames_device:
                raise RuntimeError(f"{type(self).__name__}: the renderer hands its frames over on {pixels.device}, "
                                   f"but the env was made for {self._frames_device}: pass cuda_device="
                                   f"{pixels.device.index} (the GPU MuJoCo's EGL context runs on)")
            self._frames_checked = True
        return pixels if pixels.device == self.device else pixels.to(self.device)

    def _check_open(self):
        if self.is_closed:
            raise RuntimeError(f"{type(self).__name__} is closed: make a new one")

    def _td(self, values):
        return _tensordict(values, self.batch_size, self.device)

    def close(self, *, raise_if_closed: bool = True) -> None:
        """Closes the environments and their renderer (idempotent)."""
        if not self.is_closed:
            self.is_closed = True
            self._close_batch()
        super().close(raise_if_closed=raise_if_closed)

    def _close_batch(self):
        raise NotImplementedError


class GymBatchEnv(_BatchEnv):
    """N Gymnasium MuJoCo environments as one TorchRL env, batch_size [N], pixels rendered in one batch.

    env: a registered id (``gymnasium.make(env, **make_kwargs)`` num_envs times), a list of callables returning
    environments or a list of environments (as :class:`~gltensor.mujoco.MujocoVectorEnv` takes), or a
    ``MujocoVectorEnv`` to wrap (its ``autoreset_mode`` NEXT_STEP or DISABLED; this env closes it).
    pixels_only: False adds ``"observation"``, each environment's own observation (TorchRL's ``GymEnv`` key).
    height, width: the frames (default 84; TorchRL's ``GymEnv`` renders at the task's own size, 480x480 for
    Gymnasium's MuJoCo tasks, unless given width=/height=). camera: as ``MujocoVectorEnv`` (None: each
    environment's own; a list of ``MjvCamera``, e.g. the cameras of TorchRL ``GymEnv``s, reproduces their
    frames: see docs/torchrl.md). threads, backend, cuda_device, render_flags, scene_option, max_geom: as
    ``MujocoVectorEnv``.

    Keys and specs are those of TorchRL's ``GymEnv(id, from_pixels=True, pixels_only=pixels_only)``: pixels
    (N, H, W, 3) uint8, observation (N, obs_dim) of the task's dtype, action bounded (N, act_dim) of the action
    space's dtype, reward (N, 1) float32, done/terminated/truncated (N, 1) bool.
    """

    def __init__(self, env, num_envs=None, *, pixels_only=True, height=84, width=84, camera=None, threads=None,
                 backend="auto", cuda_device=None, render_flags=None, scene_option=None, max_geom=None,
                 **make_kwargs):
        from gymnasium import spaces
        from gymnasium.vector import AutoresetMode

        from .mujoco import MujocoVectorEnv

        if isinstance(env, MujocoVectorEnv):
            if num_envs is not None or make_kwargs:
                raise TypeError("GymBatchEnv: num_envs and gymnasium.make arguments make new environments; a "
                                f"MujocoVectorEnv is wrapped as it is (got num_envs={num_envs!r}, "
                                f"{sorted(make_kwargs)})")
            if env.autoreset_mode == AutoresetMode.SAME_STEP:
                raise ValueError("GymBatchEnv: the MujocoVectorEnv has autoreset_mode SAME_STEP, which returns the "
                                 "next episode's first frame from step(); TorchRL resets finished environments "
                                 "itself: make it with AutoresetMode.DISABLED (or NEXT_STEP)")
            self.venv, pixels_only = env, env.render_only
        else:
            self.venv = MujocoVectorEnv(env, num_envs, height=height, width=width, camera=camera, threads=threads,
                                        backend=backend, cuda_device=cuda_device,
                                        autoreset_mode=AutoresetMode.DISABLED, render_only=bool(pixels_only),
                                        scene_option=scene_option, render_flags=render_flags, max_geom=max_geom,
                                        **make_kwargs)
        try:
            venv = self.venv
            n = venv.num_envs
            super().__init__(n, venv.renderer.backend, cuda_device)
            self.pixels_only = bool(pixels_only)
            dev = self.device
            act = venv.single_action_space
            if not isinstance(act, spaces.Box):
                raise TypeError(f"GymBatchEnv: the action space {act} is not a Box (MuJoCo tasks have Box actions)")
            self._act_dtype = act.dtype
            self.action_spec = _box_spec(act.low, act.high, (n,) + act.shape, _torch_dtype(act.dtype), dev)
            obs = {"pixels": Unbounded(shape=(n, venv.height, venv.width, 3), dtype=torch.uint8, device=dev)}
            if not self.pixels_only:
                state = venv.single_observation_space["state"]
                if not isinstance(state, spaces.Box):
                    raise TypeError(f"GymBatchEnv: the environments' observation space {state} is not a Box; use "
                                    "pixels_only=True")
                self._state_dtype = state.dtype
                obs["observation"] = _box_spec(state.low, state.high, (n,) + state.shape, _torch_dtype(state.dtype),
                                               dev)
            self.observation_spec = Composite(obs, shape=(n,), device=dev)
            self.reward_spec = Unbounded(shape=(n, 1), dtype=torch.float32, device=dev)
            self.done_spec = _done_spec(n, dev)
        except BaseException:
            self.venv.close()
            raise
        self.is_closed = False

    def _set_seed(self, seed: int | None) -> None:
        # TorchRL's GymEnv convention: seeding is a seeded reset (Gymnasium's vector reset: env k gets seed + k)
        self.reset(seed=seed)

    def _reset(self, tensordict=None, **kwargs):
        self._check_open()
        seed = kwargs.pop("seed", None)
        options = dict(kwargs.pop("options", None) or {})  # passed to every environment's reset, as GymEnv does
        if kwargs:
            raise TypeError(f"GymBatchEnv.reset: unexpected arguments {sorted(kwargs)} (it takes seed= and options=)")
        mask = self._reset_mask(tensordict)
        if mask is not None:
            options["reset_mask"] = mask
        obs, _ = self.venv.reset(seed=seed, options=options or None)
        no = np.zeros(self._n, np.bool_)
        return self._observation_td(obs, None, *_flags(no, no, self.device))

    def _step(self, tensordict):
        self._check_open()
        actions = self._host_actions(tensordict, self._act_dtype)
        obs, reward, terminated, truncated, _ = self.venv.step(actions)
        reward = torch.from_numpy(reward.astype(np.float32).reshape(self._n, 1)).to(self.device)
        return self._observation_td(obs, reward, *_flags(terminated, truncated, self.device))

    def _observation_td(self, obs, reward, done, terminated, truncated):
        pixels = self._pixels(obs if self.pixels_only else obs["pixels"])
        values = {"pixels": pixels, "done": done, "terminated": terminated, "truncated": truncated}
        if reward is not None:
            values["reward"] = reward
        if not self.pixels_only:
            state = np.asarray(obs["state"], dtype=self._state_dtype)
            values["observation"] = torch.from_numpy(state).to(self.device)
        return self._td(values)

    def _close_batch(self):
        self.venv.close()

    def __repr__(self):
        v = self.venv
        task = v.spec.id if v.spec else "?"
        return (f"GymBatchEnv(env={task}, batch_size={list(self.batch_size)}, {v.height}x{v.width}, "
                f"device={self.device}, backend={'closed' if self.is_closed else v.renderer.backend})")


class DMControlBatchEnv(_BatchEnv):
    """N dm_control suite environments as one TorchRL env, batch_size [N], pixels rendered in one batch.

    env_name, task_name: the suite's domain and task (``"cheetah", "run"``). num_envs: N. pixels_only: False adds
    the task's own observation entries (``"position"``, ``"velocity"``, ...), as TorchRL's ``DMControlEnv``.
    height, width, camera_id: the frames (TorchRL's ``DMControlEnv`` renders 240x320 from camera 0 unless given
    ``render_kwargs``). seed: environment k is loaded with ``task_kwargs={"random": seed + k}``; ``set_seed(s)``
    later gives environment k ``np.random.RandomState(s + k)``, as ``DMControlEnv.set_seed`` gives its one
    environment ``RandomState(s)``. threads, backend, cuda_device, task_kwargs, environment_kwargs, scene_option,
    render_flags, max_geom: as :class:`~gltensor.mujoco.DmControlBatch`.

    Specs as ``DMControlEnv``'s: pixels (N, H, W, 3) uint8, each observation (N, *shape) (scalars (N, 1)),
    action bounded (N, act_dim) float64, reward (N, 1) float64, done/terminated/truncated (N, 1) bool (a last
    step with discount 1, the suite's time limit, is truncated; with discount 0, terminated).
    """

    def __init__(self, env_name, task_name, num_envs, *, pixels_only=True, height=84, width=84, camera_id=0,
                 seed=None, threads=None, backend="auto", cuda_device=None, task_kwargs=None,
                 environment_kwargs=None, scene_option=None, render_flags=None, max_geom=10000):
        from .mujoco import DmControlBatch

        self.batch = DmControlBatch(env_name, task_name, num_envs, height, width, camera_id, seed=seed,
                                    threads=threads, backend=backend, cuda_device=cuda_device,
                                    task_kwargs=task_kwargs, environment_kwargs=environment_kwargs,
                                    scene_option=scene_option, render_flags=render_flags, max_geom=max_geom)
        try:
            b = self.batch
            n = b.num_envs
            super().__init__(n, b.renderer.backend, cuda_device)
            self.pixels_only = bool(pixels_only)
            dev = self.device
            spec = b.action_spec
            self._act_dtype = spec.dtype
            self.action_spec = _box_spec(spec.minimum, spec.maximum, (n,) + tuple(spec.shape),
                                         _torch_dtype(spec.dtype), dev)
            obs = {"pixels": Unbounded(shape=(n, b.height, b.width, 3), dtype=torch.uint8, device=dev)}
            self._obs_keys = {}
            if not self.pixels_only:
                for key, s in b.observation_spec.items():
                    shape = tuple(s.shape) or (1,)  # DMControlEnv's convention: a scalar is shape (1,)
                    self._obs_keys[key] = (shape, s.dtype)
                    obs[key] = Unbounded(shape=(n,) + shape, dtype=_torch_dtype(s.dtype), device=dev)
            self.observation_spec = Composite(obs, shape=(n,), device=dev)
            self.reward_spec = Unbounded(shape=(n, 1), dtype=torch.float64, device=dev)
            self.done_spec = _done_spec(n, dev)
            self._last = [None] * n  # each env's latest observation: what a partial reset returns for the others
        except BaseException:
            self.batch.close()
            raise
        self.is_closed = False

    def _set_seed(self, seed: int | None) -> None:
        if seed is None:
            return
        for k, e in enumerate(self.batch.envs):
            # what DMControlEnv._set_seed does to its one environment, with seed + k for environment k
            e.task._random = np.random.RandomState(int(seed) + k)
        self.reset()

    def _reset(self, tensordict=None, **kwargs):
        self._check_open()
        if kwargs:
            raise TypeError(f"DMControlBatchEnv.reset: unexpected arguments {sorted(kwargs)}; seed with set_seed()")
        mask = self._reset_mask(tensordict)
        steps, pixels = self.batch.reset(mask)
        for k, ts in enumerate(steps):
            if ts is not None:
                self._last[k] = ts.observation
        no = np.zeros(self._n, np.bool_)
        return self._observation_td(pixels, None, *_flags(no, no, self.device))

    def _step(self, tensordict):
        self._check_open()
        actions = self._host_actions(tensordict, self._act_dtype)
        steps, pixels = self.batch.step(actions)
        n = self._n
        last = np.array([ts.last() for ts in steps], np.bool_)
        discount_one = np.array([ts.discount is not None and np.isclose(ts.discount, 1.0) for ts in steps], np.bool_)
        for k, ts in enumerate(steps):
            self._last[k] = ts.observation
        reward = np.array([0.0 if ts.reward is None else ts.reward for ts in steps], np.float64).reshape(n, 1)
        return self._observation_td(pixels, torch.from_numpy(reward).to(self.device),
                                    *_flags(last & ~discount_one, last & discount_one, self.device))

    def _observation_td(self, pixels, reward, done, terminated, truncated):
        values = {"pixels": self._pixels(pixels), "done": done, "terminated": terminated, "truncated": truncated}
        if reward is not None:
            values["reward"] = reward
        for key, (shape, dtype) in self._obs_keys.items():
            state = np.stack([np.asarray(o[key], dtype=dtype).reshape(shape) for o in self._last])
            values[key] = torch.from_numpy(state).to(self.device)
        return self._td(values)

    def _close_batch(self):
        self.batch.close()

    def __repr__(self):
        b = self.batch
        return (f"DMControlBatchEnv(batch_size={list(self.batch_size)}, {b.height}x{b.width}, camera_id={b.camera_id}, "
                f"device={self.device}, backend={'closed' if self.is_closed else b.renderer.backend})")
