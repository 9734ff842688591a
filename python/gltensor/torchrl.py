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
step, for the physics. The step's rewards, its three flags and the state go to the device in one copy.

What the layer costs per step beyond the env's own step is kept to TorchRL's contract (see _BatchEnv); python -m
gltensor.bench torchrl measures it (its layer row), docs/torchrl.md says what is left out and why that is exact.
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
_CPU = torch.device("cpu")


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


def _flags(terminated, truncated):
    """done, terminated, truncated as one new (3, N, 1) bool host array (the env's own arrays may be reused)."""
    n = len(terminated)
    host = np.empty((3, n, 1), np.bool_)
    np.logical_or(terminated, truncated, out=host[0, :, 0])
    host[1, :, 0] = terminated
    host[2, :, 0] = truncated
    return host


def _to_device(arrays, device, pack=None):
    """Host arrays made for this step (owned: nothing writes them later) as tensors on device, new memory every
    call: TorchRL's rollouts and collectors keep every step's tensors, so none may be written again.

    On the host the tensors are the arrays themselves (torch.from_numpy, no copy). Elsewhere one host buffer holds
    them all and is copied once, the tensors being views of that copy: each copy from pageable host memory is
    synchronous, some 10 µs on a GPU however few its bytes, and a step has up to three (state, reward, flags).
    pack: force the packed path (None: on any device but the CPU), which the tests check on the host."""
    if pack is None:
        pack = device.type != "cpu"
    if not pack:
        return [torch.from_numpy(a) for a in arrays]
    arrays = [np.ascontiguousarray(a) for a in arrays]
    offsets, total = [], 0
    for a in arrays:
        total = -(-total // 8) * 8  # every array at a multiple of 8 bytes: a view of any dtype up to 8 bytes aligns
        offsets.append(total)
        total += a.nbytes
    buf = np.empty(max(total, 1), np.uint8)
    for a, off in zip(arrays, offsets):
        buf[off:off + a.nbytes] = a.reshape(-1).view(np.uint8)
    dev = torch.from_numpy(buf).to(device)
    return [dev[off:off + a.nbytes].view(_torch_dtype(a.dtype)).view(a.shape) for a, off in zip(arrays, offsets)]


def _tensordict(values, batch_size, device):
    """A TensorDict of values this module made itself (every one of batch_size's leading shape, on device):
    TensorDict._new_unsafe skips the per-entry validation of the public constructor (~30 µs a step at N = 64 on
    the development machine), as TorchRL's own hot paths do; the public constructor where it is missing."""
    new = getattr(TensorDict, "_new_unsafe", None)
    if new is not None:
        return new(values, batch_size=batch_size, device=device)
    return TensorDict(values, batch_size=batch_size, device=device)


class _LastStep:
    """What the env keeps of its latest step, in plain attributes (EnvBase is a torch Module, whose __setattr__
    costs several µs a call): the TensorDict _step made (_step_proc_data has nothing to do on it), its "done"
    tensor and that tensor's host array (any_done needs no device sync), the "_reset" tensor any_done wrote and
    its host mask (neither does _reset), and whether step_and_maybe_reset is running."""

    __slots__ = ("td", "done", "done_host", "any_done", "reset", "reset_host", "in_step_and_reset")

    def __init__(self):
        self.td = self.done = self.done_host = self.reset = self.reset_host = None
        self.any_done = self.in_step_and_reset = False


class _BatchEnv(EnvBase):
    """What both environments share: the device of the frames, actions to the host, the step's TensorDict, close.

    The layer's own cost per step is kept to what TorchRL's contract needs (python -m gltensor.bench torchrl
    reports it against MujocoVectorEnv alone): the action's shape and dtype are checked against values kept at
    construction (not the specs, whose properties cost µs each), the step's host arrays go to the device in one
    copy, the TensorDict is built without per-entry validation, and TorchRL's per-step post-processing and done
    check are skipped where they provably have nothing to do (see _step_proc_data and any_done)."""

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
        self._latest_step = _LastStep()

    def _set_action_spec(self, low, high, shape, np_dtype):
        """The action spec, and what each step checks the action against (the physics takes this shape whatever
        is done to the spec later)."""
        self._act_dtype = _torch_dtype(np_dtype)
        self._act_shape = torch.Size(shape)
        self.action_spec = _box_spec(low, high, self._act_shape, self._act_dtype, self.device)

    # -- actions -------------------------------------------------------------------------------------------------
    def _host_actions(self, tensordict):
        """The action entry as one host array (one device-to-host copy when it is on the GPU), checked."""
        name = type(self).__name__
        partial = tensordict.get("_step", None)
        if partial is not None and not bool(partial.all()):
            # TorchRL's rollout(break_when_all_done=True) steps only the environments not finished yet; these N
            # step together, and a finished one cannot be stepped before its reset
            raise RuntimeError(f"{name}.step: the tensordict's '_step' entry asks to step only some of the "
                               f"{self._n} environments (TorchRL's rollout(break_when_all_done=True) does this once "
                               "one has finished); they step together: use rollout(break_when_any_done=True) or "
                               "rollout(break_when_any_done=False) (finished environments are reset), "
                               "step_and_maybe_reset or a collector")
        action = tensordict.get("action", None)
        want = self._act_shape
        if action is None:
            raise KeyError(f"{name}.step: the tensordict has no 'action' entry (keys: "
                           f"{sorted(map(str, tensordict.keys()))}); set td['action'] to a tensor of shape "
                           f"{tuple(want)}, e.g. env.action_spec.rand()")
        if not isinstance(action, torch.Tensor):
            raise TypeError(f"{name}.step: 'action' must be a torch.Tensor, not {type(action).__name__}")
        if action.shape != want:
            raise ValueError(f"{name}.step: 'action' has shape {tuple(action.shape)}, this env takes {tuple(want)} "
                             f"(batch_size {list(self.batch_size)} x the action's {tuple(want[1:])})")
        if action.dtype == torch.bool or action.is_complex():
            raise TypeError(f"{name}.step: 'action' has dtype {action.dtype}; this env takes "
                            f"{self._act_dtype} (real numbers)")
        if action.requires_grad:
            action = action.detach()
        host = action.to(_CPU, self._act_dtype).numpy()
        if np.count_nonzero(np.isfinite(host)) != host.size:  # count_nonzero: a third of .all()'s cost here
            bad = sorted({int(i) for i in np.argwhere(~np.isfinite(host))[:, 0]})
            raise ValueError(f"{name}.step: 'action' of environment(s) {bad[:8]} is not finite (NaN or inf); MuJoCo "
                             "would reset those simulations silently (mjWARN_BADCTRL). Check the policy's output")
        return host

    # -- the step's TensorDict -------------------------------------------------------------------------------------
    def _output(self, pixels, state, reward, terminated, truncated, step):
        """The TensorDict of a step (step=True) or reset: pixels (the renderer's tensor), the state entries (a dict
        of new host arrays), reward ((N, 1) new host array, None for a reset) and the flags, the host arrays on
        the device in one copy. A step's TensorDict has every reward and done key of the specs at their shapes:
        _step_proc_data returns it as it is."""
        flags = _flags(terminated, truncated)
        keys = list(state)
        arrays = list(state.values())
        if reward is not None:
            keys.append("reward")
            arrays.append(reward)
        arrays.append(flags)
        *tensors, flags_t = _to_device(arrays, self.device)
        done, terminated, truncated = flags_t.unbind(0)
        values = {"pixels": self._pixels(pixels), "done": done, "terminated": terminated, "truncated": truncated}
        values.update(zip(keys, tensors))
        td = _tensordict(values, self.batch_size, self.device)
        if step:
            last = self._latest_step
            last.td, last.done, last.done_host = td, done, flags[0, :, 0]
            last.any_done = np.count_nonzero(last.done_host) > 0
        return td

    def _step_proc_data(self, next_tensordict_out):
        # TorchRL reshapes the rewards and completes the done keys of what _step returned (~20 µs a step): the
        # TensorDict _step made has them all at their specs' shapes, so that is the identity on it. Type checks,
        # when asked for (env.run_type_checks), still run.
        if next_tensordict_out is self._latest_step.td and not self.run_type_checks:
            return next_tensordict_out
        return super()._step_proc_data(next_tensordict_out)

    # -- done and resets -------------------------------------------------------------------------------------------
    def _step_and_maybe_reset(self, tensordict):
        # TorchRL's own, unchanged; between its step and its done check only step_mdp runs (no post-step hook on
        # this env), which moves tensors without writing them: there any_done may read the step's host flags.
        last = self._latest_step
        last.in_step_and_reset = getattr(self, "_post_step_mdp_hooks", None) is None
        try:
            return super()._step_and_maybe_reset(tensordict)
        finally:
            last.in_step_and_reset = False
            last.reset = last.reset_host = None

    def any_done(self, tensordict):
        """EnvBase.any_done; inside step_and_maybe_reset, on this env's own "done" tensor, read from its host copy
        (on a GPU ``done.any()`` then ``if`` would wait for the device every step)."""
        last = self._latest_step
        if last.in_step_and_reset and last.done is not None and self._simple_done \
                and tensordict.get("done", None) is last.done:
            if not last.any_done:
                return False
            last.reset = last.done.clone()
            last.reset_host = last.done_host
            tensordict.set("_reset", last.reset)
            return True
        return super().any_done(tensordict)

    def _reset_mask(self, tensordict):
        """The "_reset" entry as a host bool array of shape (N,), or None (reset every environment)."""
        reset = None if tensordict is None else tensordict.get("_reset", None)
        if reset is None:
            return None
        if reset is self._latest_step.reset:  # any_done's, made of the step's host flags
            mask = self._latest_step.reset_host
        else:
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
            self._set_action_spec(act.low, act.high, (n,) + act.shape, act.dtype)
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
        return self._observation_output(obs, None, no, no, step=False)

    def _step(self, tensordict):
        self._check_open()
        actions = self._host_actions(tensordict)
        obs, reward, terminated, truncated, _ = self.venv.step(actions)
        reward = np.asarray(reward).astype(np.float32).reshape(self._n, 1)  # astype: a new array
        return self._observation_output(obs, reward, terminated, truncated, step=True)

    def _observation_output(self, obs, reward, terminated, truncated, step):
        if self.pixels_only:
            return self._output(obs, {}, reward, terminated, truncated, step)
        # a copy: the vector env may hand out its own state array (NumPy's astype copies by default)
        state = np.asarray(obs["state"]).astype(self._state_dtype)
        return self._output(obs["pixels"], {"observation": state}, reward, terminated, truncated, step)

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
            self._set_action_spec(spec.minimum, spec.maximum, (n,) + tuple(spec.shape), spec.dtype)
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
        return self._observation_output(pixels, None, no, no, step=False)

    def _step(self, tensordict):
        self._check_open()
        actions = self._host_actions(tensordict)
        steps, pixels = self.batch.step(actions)
        n = self._n
        last = np.empty(n, np.bool_)
        discount = np.empty(n, np.float64)
        reward = np.empty((n, 1), np.float64)
        for k, ts in enumerate(steps):  # dm_control hands out one TimeStep per environment
            last[k] = ts.last()
            discount[k] = np.nan if ts.discount is None else ts.discount
            reward[k, 0] = 0.0 if ts.reward is None else ts.reward
            self._last[k] = ts.observation
        discount_one = np.isclose(discount, 1.0)  # no discount (NaN here): not 1
        return self._observation_output(pixels, reward, last & ~discount_one, last & discount_one, step=True)

    def _observation_output(self, pixels, reward, terminated, truncated, step):
        state = {key: np.stack([np.asarray(o[key], dtype=dtype).reshape(shape) for o in self._last])
                 for key, (shape, dtype) in self._obs_keys.items()}
        return self._output(pixels, state, reward, terminated, truncated, step)

    def _close_batch(self):
        self.batch.close()

    def __repr__(self):
        b = self.batch
        return (f"DMControlBatchEnv(batch_size={list(self.batch_size)}, {b.height}x{b.width}, camera_id={b.camera_id}, "
                f"device={self.device}, backend={'closed' if self.is_closed else b.renderer.backend})")
