"""N MuJoCo environments in one process: physics in a thread pool, pixels from one batch render.

    from gltensor.mujoco import MujocoVectorEnv
    envs = MujocoVectorEnv("HalfCheetah-v5", num_envs=16, height=84, width=84)    # MUJOCO_GL=egl
    obs, info = envs.reset(seed=0)               # (16, 84, 84, 3) uint8 torch tensor (CUDA on the CUDA backend)
    obs, rew, term, trunc, info = envs.step(envs.action_space.sample())

Gymnasium's pixel recipe, ``SyncVectorEnv``/``AsyncVectorEnv`` of ``AddRenderObservation(make(id,
render_mode="rgb_array"))``, gives every environment its own ``mujoco.Renderer``: its own GL context, its own
``mjr_render`` and ``mjr_readPixels``, then N host arrays stacked and copied to the GPU. ``MujocoVectorEnv``
keeps each environment's own ``step()`` (reward, termination, its proprioceptive observation, its wrappers)
and replaces only the pixels: after the physics of a step, one :class:`gltensor.mujoco.BatchRenderer` draws
the N environments as tiles of one offscreen buffer in one GL context and hands the batch over in one read.

Physics runs beside the render: a physics thread steps the environments in turn while the calling thread (where
the GL context is current) draws each environment as soon as its step returns, so the render of env k overlaps the
physics of env k+1 (``mj_step`` and ``mjr_render`` both release the GIL; the Python around them does not).
``threads`` (default 1, see :func:`default_threads`) physics threads each step a contiguous chunk. An environment
that may render itself in ``step()`` or ``reset()`` (``render_mode="human"``, or a render mode set under a wrapper
other than Gymnasium's TimeLimit/OrderEnforcing/PassiveEnvChecker, e.g. ``AddRenderObservation`` or
``RecordVideo``, or a MuJoCo env class of your own) needs the GL context its viewer draws into, which is current
in your thread only: then every environment is stepped and reset in your thread, before the render, as
``SyncVectorEnv`` does. A render from a physics thread raises instead of drawing black.

Observations are what ``AddRenderObservation(render_only=True)`` of the same environment gives (same camera,
same visuals, same seeds and actions -> the same images, rewards and terminations), as a torch tensor
``(num_envs, height, width, 3)`` uint8: on the GPU with the CUDA backend, in host memory with the CPU backend.
``single_observation_space`` is that wrapper's ``Box(0, 255, (height, width, 3), uint8)`` and
``observation_space`` its batch; the spaces describe shape and dtype, the values are torch tensors, not NumPy
arrays (``numpy.asarray(obs.cpu())`` where NumPy is needed; on the CUDA backend that is a device-to-host copy).
``render_only=False`` gives ``{"state": NumPy batch, "pixels": tensor}``, the wrapper's keys.

Gymnasium 1.x semantics: ``autoreset_mode`` NEXT_STEP (default), SAME_STEP (``info["final_obs"]`` holds the
last frame of each finished environment, ``info["final_info"]`` its info) or DISABLED; ``reset(seed=,
options=)`` with ``options["reset_mask"]``; info dicts merged as ``SyncVectorEnv`` merges them (with ``"_key"``
masks); ``render()`` returns the latest pixel batch. :func:`as_sb3` wraps one for Stable-Baselines3.
"""

from __future__ import annotations

from . import _gl_backend  # noqa: F401,I001  (first: MUJOCO_GL=egl where there is no display, before mujoco is imported)
from ._warnings import gymnasium_model_deprecations_dropped  # noqa: I001

import itertools
import queue
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor, wait

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array

__all__ = ["MujocoVectorEnv", "DmControlBatch", "as_sb3", "default_threads", "merge_infos"]


def default_threads(num_envs):
    """One physics thread, beside the render: the caller's thread draws env k while the physics thread steps env
    k+1 (mj_step and mjr_render both release the GIL); on the GPU machine (H200 host, 16 cores, HalfCheetah-v5,
    shadows off, N = 16) that took a step from 3,869 µs (stepped, then rendered) to 2,953
    (tools/mujoco_step_probe.py). More physics threads lose: min(N, cores) threads gave 0.85x, 0.67x and 0.44x one
    thread's env-steps/s at N = 4, 16 and 64, since a Gymnasium MuJoCo env's step() is Python that holds the GIL
    around short mj_step calls. Pass threads=k for heavier models, where mj_step dominates."""
    return 1


_PHYSICS_THREAD = "gltensor-physics"
# physics="auto": steps on the way the first trial kept before the trial runs once more (_path_trial says why): 50
# turns of a 4-way trial, well past the first ten turns, over which the batched ways ran 4-60% slower than over their
# last fifty on an H200 host (benchmarks/results/mujoco_trial_series_h200.json).
TRIAL_AGAIN_AFTER = 200


def _renders_in_step(env):
    """Whether `env` may render itself inside step() or reset(): its viewer draws into the GL context current in
    the calling thread, which a physics thread does not have. Gymnasium's MuJoCo envs render in step() only in
    "human" mode; without a render mode env.render() raises. With one, any wrapper but the three gymnasium.make
    adds (AddRenderObservation, RecordVideo, HumanRendering, one of your own) or an env class that is not one of
    Gymnasium's may call render() in step()."""
    from gymnasium.wrappers import OrderEnforcing, PassiveEnvChecker, TimeLimit

    u = env.unwrapped
    mode = getattr(u, "render_mode", None)
    if mode is None:
        return False
    if mode == "human":
        return True
    e = env
    while isinstance(e, gymnasium.Wrapper):
        if type(e) not in (TimeLimit, OrderEnforcing, PassiveEnvChecker):
            return True
        e = e.env
    return not type(u).__module__.startswith("gymnasium.envs.mujoco.")


class _RenderGuard:
    """Replaces env k's Gymnasium renderer's render() (on that instance) by one that raises when called in a
    physics thread: there no GL context of the env's viewer is current and its frame would be black, silently.
    Catches what _renders_in_step cannot see (a wrapper calling mujoco_renderer.render() with no render mode)."""

    def __init__(self, renderer, k):
        # A weak reference: no cycle renderer -> guard -> renderer, so the renderer (and the GL objects of its
        # viewers) still goes when its last reference does, not at some later garbage collection.
        self._renderer, self.k = weakref.ref(renderer), k
        self._patched = renderer.__dict__.get("render")  # someone else's instance attribute, put back on remove()
        renderer.render = self

    def __call__(self, *args, **kwargs):
        if threading.current_thread().name.startswith(_PHYSICS_THREAD):
            raise RuntimeError(
                f"MujocoVectorEnv: environment {self.k} rendered itself (its Gymnasium renderer's render()) inside "
                "step() or reset(), in a physics thread, where no GL context of its viewer is current: its pixels "
                "would be black. Make it with a render_mode (e.g. render_mode='rgb_array'): MujocoVectorEnv then "
                "steps it in your thread, before the batch render")
        if self._patched is not None:
            return self._patched(*args, **kwargs)
        renderer = self._renderer()
        return type(renderer).render(renderer, *args, **kwargs)

    def remove(self):
        renderer = self._renderer()
        if renderer is not None and renderer.__dict__.get("render") is self:
            if self._patched is not None:
                renderer.render = self._patched
            else:
                del renderer.render


def _chunks(n, parts):
    """Contiguous index ranges that split range(n) into `parts` near-equal pieces."""
    parts = max(1, min(parts, n))
    bounds = [n * k // parts for k in range(parts + 1)]
    return [range(bounds[k], bounds[k + 1]) for k in range(parts)]


class _Pool:
    """Runs fn(i) for environment indices in `threads` threads, each a contiguous chunk of the environments."""

    def __init__(self, n, threads):
        self.chunks = _chunks(n, threads)
        self._ex = ThreadPoolExecutor(len(self.chunks), thread_name_prefix=_PHYSICS_THREAD)

    def map(self, fn, indices=None):
        """[fn(i) for i in indices] (default: every index), in index order; inline with one chunk."""
        if indices is None:
            chunks = self.chunks
        else:
            chunks = _chunks(len(indices), len(self.chunks))
            chunks = [[indices[j] for j in c] for c in chunks]
        if len(chunks) == 1:
            return [fn(i) for c in chunks for i in c]
        self._check_open()
        futures = [self._ex.submit(lambda c=c: [fn(i) for i in c]) for c in chunks]
        wait(futures)  # every thread done with the envs before a worker's exception is raised here
        return [r for f in futures for r in f.result()]  # result() re-raises a worker's exception

    def stream(self, fn):
        """Starts results[i] = fn(i) for every index in the pool's threads; returns a _Stream whose iteration
        gives the indices as they finish (for BatchRenderer.render(order=...))."""
        self._check_open()
        return _Stream(self._ex, self.chunks, fn)

    def _check_open(self):
        if self._ex is None:
            raise RuntimeError("MujocoVectorEnv is closed")

    def close(self):
        if self._ex is not None:
            self._ex.shutdown(wait=True)
            self._ex = None


class _Stream:
    """fn(i) for every index, run by the pool's threads; iterating gives each index once its fn returned (an
    exception of fn is raised there, in the caller's thread, with its traceback). Use as a context manager: on
    exit it waits until every thread has stopped touching the environments, whatever happened."""

    def __init__(self, ex, chunks, fn):
        self.n = sum(len(c) for c in chunks)
        self.results = [None] * self.n
        self._done = queue.SimpleQueue()
        self._stop = False
        self._futures = [ex.submit(self._run, fn, c) for c in chunks]

    def _run(self, fn, chunk):
        for i in chunk:
            if self._stop:  # the consumer gave up (an error elsewhere): leave the rest unstepped
                return
            try:
                self.results[i] = fn(i)
            except BaseException as exc:  # noqa: B036 - handed to the caller's thread, re-raised there
                self._done.put((i, exc))
                return
            self._done.put((i, None))

    def __iter__(self):
        for _ in range(self.n):
            i, exc = self._done.get()
            if exc is not None:
                raise exc
            yield i

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        if exc_type is not None:
            self._stop = True
        for f in self._futures:
            f.result()
        return False


def _close_all(pool, renderer, envs, physics=None, guards=()):
    """The physics threads stopped first (none may step an env being closed), then the render, then the envs; the
    caller's GL context (or none) current afterwards, as before (an env's viewer frees with eglReleaseThread)."""
    from .batch import _CallersContextKept

    with _CallersContextKept():
        if physics is not None:
            physics.close()
        pool.close()
        for g in guards:
            g.remove()
        renderer.close()
        for e in envs:
            e.close()


def _free_camera(mujoco, renderer, data):
    """The MjvCamera Gymnasium's OffScreenViewer renders with for camera_id -1: a free camera looking at the
    median geom position of the first rendered state, at the model's extent, then default_cam_config."""
    cam = mujoco.MjvCamera()
    cam.type = mujoco.mjtCamera.mjCAMERA_FREE
    cam.fixedcamid = -1
    for i in range(3):
        cam.lookat[i] = np.median(data.geom_xpos[:, i])
    cam.distance = renderer.model.stat.extent
    for key, value in (renderer.default_cam_config or {}).items():
        if isinstance(value, np.ndarray):
            getattr(cam, key)[:] = value
        else:
            setattr(cam, key, value)
    return cam


class MujocoVectorEnv(VectorEnv):
    """N Gymnasium MuJoCo environments stepped by a thread pool and rendered by one BatchRenderer.

    env: a registered id (``gymnasium.make(env, **make_kwargs)`` num_envs times), a sequence of callables
    returning environments, a sequence of environments, or one environment (num_envs=1). Every environment
    must be (or wrap) a ``gymnasium.envs.mujoco.MujocoEnv``; its wrappers stay (TimeLimit, the checkers).
    height, width: the pixels of each observation. camera: None renders what each environment's own
    ``render()`` would (its ``camera_id``/``camera_name``/``default_camera_config``); else a camera id or
    name for every environment (-1: MuJoCo's default free camera), an ``MjvCamera``, or a sequence of one per
    environment (None entries: that environment's own camera). Gymnasium's free camera (camera_id -1, e.g. HalfCheetah-v5) looks at the median geom
    position of the first state its viewer renders; here that is the state after the first reset (seeded:
    reproducible). ``AddRenderObservation``'s constructor renders after an unseeded ``reset()``, so the stock
    recipe's free camera looks at a random state; pass ``camera=[its viewer's cam, ...]`` to reproduce it. threads: physics threads (default
    :func:`default_threads`). backend, cuda_device, scene_option: the BatchRenderer's (scene_option None: each
    environment's ``visual_options`` as Gymnasium's viewer sets them), render_flags (e.g. ``{"shadow": False,
    "reflection": False}``: MuJoCo's shadow pass dominates the GPU time of a render, see docs/mujoco.md).
    render_only: False adds the environments' own observations ("state") beside "pixels". Every environment's
    own model renders it (randomised colours, sizes, lights stay per environment).
    physics: "auto" (default) steps Gymnasium's own v5 tasks (Ant, HalfCheetah, Hopper, Humanoid, HumanoidStandup,
    InvertedDoublePendulum, InvertedPendulum, Pusher, Reacher, Swimmer, Walker2d, each under gymnasium.make's
    wrappers only, the same constructor arguments in every env) on the batched path: every env's ``mj_step`` in
    a pool of ``threads`` C threads (default: the cores, at most 16) and the task's observations, rewards,
    terminations and infos in NumPy over the batch, bitwise equal to each env's own ``step()``. Any other env
    (a subclass, another wrapper, ``render_mode="human"``, differing arguments) takes the per-env path: its own
    ``step()``. With "auto" the batch then measures which way of stepping is fastest here: the batched path with
    all of its threads drawn beside the physics, with a quarter of them (when ``threads`` is not given), with all
    of them but drawn after the physics, and the per-env path take turns over the first 12 steps of each (48 in
    all, 36 with ``threads`` given), and the lowest median step time is kept; after 200 more steps the trial runs
    once more, on a warmed-up batch, and its choice is final (``physics_trial``; every way gives the same
    results). ``physics_path`` says which path steps now ("batched" or "per-env"), ``threads`` how many threads,
    ``physics_path_reason`` why; "batched" raises where the batch cannot take it (and measures only the thread
    count), "per-env" forces the per-env path.
    """

    metadata = {"render_modes": ["rgb_array"], "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, env, num_envs=None, *, height=84, width=84, camera=None, threads=None, backend="auto",
                 cuda_device=None, autoreset_mode=AutoresetMode.NEXT_STEP, render_only=True, scene_option=None,
                 render_flags=None, max_geom=None, physics="auto", **make_kwargs):
        import mujoco

        from ._physics import BatchedPhysics, batched_or_reason, default_physics_threads
        from .batch import BatchRenderer

        self._mj = mujoco
        with gymnasium_model_deprecations_dropped():  # Gymnasium's models print MuJoCo's settotalmass deprecation
            self.envs = self._make_envs(env, num_envs, make_kwargs)
        self.num_envs = len(self.envs)
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        self.metadata = dict(self.metadata, autoreset_mode=self.autoreset_mode)
        self.render_mode = "rgb_array"
        self.render_only = bool(render_only)
        self.height, self.width = int(height), int(width)
        self.unwrapped_envs = []
        for k, e in enumerate(self.envs):
            u = e.unwrapped
            if not all(hasattr(u, a) for a in ("model", "data", "mujoco_renderer")):
                raise TypeError(f"environment {k} ({u!r}) is not a Gymnasium MujocoEnv (no model/data/"
                                "mujoco_renderer); MujocoVectorEnv renders MuJoCo environments only")
            self.unwrapped_envs.append(u)
        self.spec = self.envs[0].spec

        pixels = spaces.Box(0, 255, (self.height, self.width, 3), np.uint8)
        self.single_action_space = self.envs[0].action_space
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        if self.render_only:
            self.single_observation_space = pixels
        else:
            self.single_observation_space = spaces.Dict(
                {"state": self.envs[0].observation_space, "pixels": pixels})
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self._state_space = self.envs[0].observation_space

        # What each environment's own renderer would draw: Gymnasium's MujocoRenderer resolved camera_id
        # (-1 for its free camera, set up at the first render) and its viewer's options.
        r0 = self.unwrapped_envs[0].mujoco_renderer
        cams = list(camera) if isinstance(camera, (list, tuple)) else [camera] * self.num_envs
        if len(cams) != self.num_envs:
            raise ValueError(f"camera: {len(cams)} cameras for {self.num_envs} environments")
        # None: the environment's own camera; its -1 is Gymnasium's free camera, placed as its viewer places it
        self._gym_camera = [c is None for c in cams]
        self._camera_ids = [e.mujoco_renderer.camera_id if c is None else c for e, c in zip(self.unwrapped_envs, cams)]
        self._cams = [None] * self.num_envs
        self._camera_list = None  # _cameras(), once fixed
        self._gym_free = [g and isinstance(c, (int, np.integer)) and c == -1
                          for g, c in zip(self._gym_camera, self._camera_ids)]
        # Environments that render themselves in step()/reset(): then all are stepped in this thread (see above)
        self._renders_in_step = [_renders_in_step(e) for e in self.envs]
        self._in_caller = any(self._renders_in_step)
        self._guards = [_RenderGuard(u.mujoco_renderer, k) for k, u in enumerate(self.unwrapped_envs)]
        if scene_option is None:
            scene_option = mujoco.MjvOption()
            for flag, value in (getattr(r0, "_vopt", None) or {}).items():
                scene_option.flags[flag] = value
        # Every env's own model: the renderer checks once that they share what MjrContext uploads, and
        # mjv_updateScene reads each env's (randomised colours, sizes, lights stay per env).
        self.renderer = BatchRenderer([u.model for u in self.unwrapped_envs], self.num_envs, self.height, self.width,
                                      camera=-1, backend=backend,
                                      cuda_device=cuda_device,
                                      max_geom=max_geom or getattr(r0, "max_geom", 1000),
                                      scene_option=scene_option, render_flags=render_flags)
        # The physics: every env's own step() (per-env), or the batched task physics where the envs are
        # Gymnasium's own v5 tasks under gymnasium.make's wrappers (_physics says what it takes over).
        if physics not in ("auto", "batched", "per-env"):
            raise ValueError(f"physics must be 'auto', 'batched' or 'per-env', not {physics!r}")
        self._batched = None
        self.physics_trial = None  # the measured choice of path and thread count (_setup_trial)
        self._overlap = True  # the batched path draws each env as its physics finishes (else after all of them)
        task = None
        if physics == "per-env":
            self.physics_path, self.physics_path_reason = "per-env", "physics='per-env' was asked for"
        else:
            task, why = batched_or_reason(self.envs, self.unwrapped_envs)
            if task is None and physics == "batched":
                raise ValueError(f"MujocoVectorEnv(physics='batched'): {why}")
            if task is None:
                self.physics_path, self.physics_path_reason = "per-env", why
        if threads is not None:
            self.threads = max(1, int(threads))
        elif task is not None:
            self.threads = default_physics_threads(self.num_envs)
        else:
            self.threads = default_threads(self.num_envs)
        self._pool = _Pool(self.num_envs, self.threads)
        if task is not None:
            try:
                self._batched = BatchedPhysics(self.envs, self.unwrapped_envs, task, self.threads, self._pool)
            except ValueError as exc:
                if physics == "batched":
                    raise ValueError(f"MujocoVectorEnv(physics='batched'): {exc}") from None
                self.physics_path, self.physics_path_reason = "per-env", str(exc)
            else:
                self.physics_path = "batched"
                self.physics_path_reason = (f"every environment is Gymnasium's {task.__name__}-v5 under "
                                            f"gymnasium.make's wrappers; physics in {self._batched.stepper}")
                self.threads = self._batched.threads
                self._setup_trial(physics, threads is None, default_threads(self.num_envs))
        self._autoreset = np.zeros(self.num_envs, dtype=np.bool_)
        if self._batched is not None and not self.render_only:
            self._state = np.zeros((self.num_envs,) + self._state_space.shape, dtype=self._state_space.dtype)
        else:
            self._state = [None] * self.num_envs
        self._pixels = None
        self.closed = False

    @staticmethod
    def _make_envs(env, num_envs, make_kwargs):
        if isinstance(env, str):
            if num_envs is None or int(num_envs) < 1:
                raise ValueError(f"MujocoVectorEnv({env!r}): num_envs must be a positive int, not {num_envs!r}")
            return [gymnasium.make(env, **make_kwargs) for _ in range(int(num_envs))]
        if make_kwargs:
            raise TypeError(f"make keyword arguments {sorted(make_kwargs)} apply to an environment id only")
        items = [env] if isinstance(env, gymnasium.Env) else list(env)
        if not items:
            raise ValueError("MujocoVectorEnv: no environment given")
        envs = [e if isinstance(e, gymnasium.Env) else e() for e in items]
        if num_envs is not None and int(num_envs) != len(envs):
            raise ValueError(f"num_envs={num_envs} but {len(envs)} environments were given")
        return envs

    # -- pixels ------------------------------------------------------------------------------------------
    def _cameras(self):
        if self._camera_list is not None:
            return self._camera_list
        cams = []
        for i, cid in enumerate(self._camera_ids):
            if self._gym_camera[i] and isinstance(cid, (int, np.integer)) and cid == -1:
                if self._cams[i] is None:  # as Gymnasium's viewer: placed at the first render, then kept
                    u = self.unwrapped_envs[i]
                    self._cams[i] = _free_camera(self._mj, u.mujoco_renderer, u.data)
                cams.append(self._cams[i])
            else:
                cams.append(cid)
        if all(c is not None or not g for c, g in zip(self._cams, self._gym_free)):
            self._camera_list = cams  # every free camera placed: the list is fixed from now on (made once, not per step)
        return cams

    def _render(self, order=None):
        # The batched path's envs are Gymnasium's own tasks, whose MjData is made once: its list is kept (a user's
        # env on the per-env path might replace its data, so that list is made per render)
        datas = self._batched.datas if self._batched is not None else [u.data for u in self.unwrapped_envs]
        self._pixels = self.renderer.render_and_read(datas, cameras=self._cameras(),
                                                     order=order)
        return self._pixels

    def _obs(self, pixels):
        if self.render_only:
            return pixels
        if isinstance(self._state, np.ndarray):  # the batched path's (N, ...) state
            return {"state": self._state.copy(), "pixels": pixels}
        if not isinstance(self._state_space, spaces.Box):  # e.g. AddRenderObservation's Dict: as SyncVectorEnv
            state = concatenate(self._state_space, self._state, create_empty_array(self._state_space, self.num_envs))
        else:
            state = np.stack([np.asarray(s) for s in self._state]).astype(self._state_space.dtype, copy=False)
        return {"state": state, "pixels": pixels}

    def _map(self, fn, indices=None, pool=None):
        """[fn(i) for i in indices] (default: every index) in the physics threads (of `pool`, default the env's),
        or in this thread when an environment renders itself in step()/reset()."""
        if self._in_caller:
            return [fn(i) for i in (range(self.num_envs) if indices is None else indices)]
        return (pool or self._pool).map(fn, indices)

    # -- the VectorEnv API -------------------------------------------------------------------------------
    def reset(self, *, seed=None, options=None):
        self._check_open()
        if seed is None:
            seeds = [None] * self.num_envs
        elif isinstance(seed, (int, np.integer)):
            seeds = [int(seed) + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(f"reset(seed=...) got {len(seeds)} seeds for {self.num_envs} environments")
        options = dict(options or {})
        mask = options.pop("reset_mask", None)
        if mask is not None:
            mask = np.asarray(mask)
            if mask.shape != (self.num_envs,) or mask.dtype != np.bool_:
                raise ValueError(f"options['reset_mask'] must be a bool array of shape ({self.num_envs},), "
                                 f"not {mask.dtype} {mask.shape}")
            if not mask.any():  # SyncVectorEnv's check and message
                raise ValueError("`options['reset_mask']` must contain a boolean array with at least one True value, "
                                 f"got reset_mask={mask}")
            indices = [i for i in range(self.num_envs) if mask[i]]
        else:
            indices = list(range(self.num_envs))
        out = self._map(lambda i: self.envs[i].reset(seed=seeds[i], options=options or None), indices)
        infos = {}
        for i, (obs, info) in zip(indices, out):
            if not self.render_only:
                self._state[i] = obs
            infos = self._add_info(infos, info, i)
        self._autoreset[indices] = False
        if self._batched is not None:
            self._batched.reset_done(indices)
        return self._obs(self._render()), infos

    def _setup_trial(self, physics, threads_free, per_env_threads):
        """physics="auto" on the batched path: which way of stepping is fastest here is measured on the first
        steps (_path_trial): the batched path with all of its C threads, with a quarter of them (at least 2; only
        when threads= was not given), with all of them but drawn after the physics, and the per-env path (these
        two only with physics="auto"). Why: the physics threads
        take cores from the render thread beside them (for HalfCheetah on H200 hosts a quarter of 16 often left
        more of the step to the render, while a heavier task needs them all:
        benchmarks/results/mujoco_batched_phases_threads_h200.json), and at N = 16 the per-env path was the
        faster one on one host and the slower on others (benchmarks/README.md, "The batched physics")."""
        from ._path_trial import PathTrial

        paths = {f"batched, {self.threads} threads": (self.threads, True)}
        few = max(2, self.threads // 4)
        if threads_free and self._batched.stepper == "C threads" and few < self.threads:
            paths[f"batched, {few} threads"] = (few, True)
        if physics == "auto":
            # Stepped with all threads, then drawn: no overlap, but no physics thread beside the render either. Timed
            # because on one H200 host the overlapped step at N = 64 cost 1.52x the pixel floor
            # (benchmarks/results/mujoco_round_h200.json). The trials of the next two calls never kept it
            # (mujoco_round2_h200.json, mujoco_round3_h200.json), while on another host it beat the overlapped step
            # at N = 256 with 16 threads (mujoco_phases_fresh_h200.json): it depends on the host, so it is timed.
            paths[f"batched, {self.threads} threads, stepped then drawn"] = (self.threads, False)
            paths["per-env"] = (None, True)
        if len(paths) < 2:
            return
        self._trial_paths = paths
        self._per_env_pool = _Pool(self.num_envs, per_env_threads) if physics == "auto" else None
        self.physics_trial = PathTrial(*paths, again_after=TRIAL_AGAIN_AFTER)
        self._reason_before_trial = self.physics_path_reason  # each choice says its trials after it (_keep)
        self.physics_path_reason += (f"; physics='auto' times {', '.join(paths)} in turn over the first "
                                     f"{self.physics_trial.length} steps and keeps the fastest, then once more after "
                                     f"{TRIAL_AGAIN_AFTER} steps")

    def step(self, actions):
        self._check_open()
        trial = self.physics_trial
        if trial is not None and not trial.settled:
            return self._step_timed(actions, trial)
        if self.physics_path == "batched":
            return self._step_batched(actions)
        return self._step_per_env(actions, self._pool)

    def _step_timed(self, actions, trial):
        """A step while the choice is not final (_setup_trial): in a trial, the way due, timed, and after its last
        step the fastest kept; between the two trials, the way kept."""
        if not trial.timing:
            out = self._step_per_env(actions, self._per_env_pool) if self.physics_path == "per-env" \
                else self._step_batched(actions)
            trial.tick()
            return out
        rounds = len(trial.rounds)
        out = trial.step(lambda name: self._step_way(actions, self._trial_paths[name]))
        if len(trial.rounds) != rounds:
            self._keep(trial)
        return out

    def _keep(self, trial):
        """Steps the way the trial chose from now on; once the choice is final, the other path's threads go."""
        k, self._overlap = self._trial_paths[trial.choice]
        if k is None:
            self.physics_path = "per-env"
            self.threads = len(self._per_env_pool.chunks)
        else:
            self.physics_path = "batched"
            self._batched.sync_elapsed()  # the trial's last per-env steps counted in the envs' own wrappers
            self._batched.use_threads(k)
            self.threads = k
        if trial.settled and self._per_env_pool is not None:
            if k is None:
                old, self._pool = self._pool, self._per_env_pool
                old.close()
            else:
                self._per_env_pool.close()
            self._per_env_pool = None
        self.physics_path_reason = f"{self._reason_before_trial}; physics='auto' {trial.summary()}"

    def _step_way(self, actions, way):
        """One trial step: the per-env path (k None) or the batched path with k threads, drawn beside the physics
        (overlap) or after it. A per-env step counts in the envs' TimeLimit wrappers, so the batched path takes its
        episode counts from them first."""
        k, self._overlap = way
        if k is None:
            return self._step_per_env(actions, self._per_env_pool)
        self._batched.sync_elapsed()
        self._batched.use_threads(k)
        return self._step_batched(actions)

    def _step_per_env(self, actions, pool):
        """step() on the per-env path: each env's own step() in `pool`'s threads, drawn as it finishes."""
        if hasattr(actions, "detach"):  # a torch tensor (possibly on the GPU)
            actions = actions.detach().cpu().numpy()
        actions = list(gymnasium.vector.utils.iterate(self.action_space, actions))
        if len(actions) != self.num_envs:
            raise ValueError(f"step() got {len(actions)} actions for {self.num_envs} environments")
        mode = self.autoreset_mode

        def one(i):
            if mode == AutoresetMode.NEXT_STEP and self._autoreset[i]:
                obs, info = self.envs[i].reset()
                return obs, 0.0, False, False, info
            if mode == AutoresetMode.DISABLED and self._autoreset[i]:
                raise RuntimeError(f"environment {i} finished and autoreset_mode is DISABLED: "
                                   "reset it (options={'reset_mask': ...}) before stepping it again")
            return self.envs[i].step(actions[i])

        if self._pipelined():
            # The physics thread steps the environments in turn while this thread draws each one it finished.
            with pool.stream(one) as stepped:
                pixels = self._render(order=stepped)
            out = stepped.results
        else:
            out = self._map(one, pool=pool)
            pixels = None
        rewards = np.array([o[1] for o in out], dtype=np.float64)
        terms = np.array([o[2] for o in out], dtype=np.bool_)
        truncs = np.array([o[3] for o in out], dtype=np.bool_)
        if not self.render_only:
            for i, o in enumerate(out):
                self._state[i] = o[0]
        done = np.logical_or(terms, truncs)
        if mode == AutoresetMode.SAME_STEP and done.any():
            finished = [i for i in range(self.num_envs) if done[i]]
            # the finished environments' last frames, before they reset
            final_obs = self._obs(pixels if pixels is not None else self._render())
            final_obs = final_obs.clone() if self.render_only else dict(final_obs, pixels=final_obs["pixels"].clone())
            resets = self._map(lambda i: self.envs[i].reset(), finished, pool=pool)
            infos_per_env = [o[4] for o in out]
            for i, (state, info) in zip(finished, resets):
                if self.render_only:
                    one_final = final_obs[i]
                else:
                    last = final_obs["state"][i] if isinstance(self._state_space, spaces.Box) else out[i][0]
                    one_final = {"state": last, "pixels": final_obs["pixels"][i]}
                infos_per_env[i] = (info, {"final_obs": one_final, "final_info": infos_per_env[i]})
                self._state[i] = state
            infos = {}
            for i, info in enumerate(infos_per_env):
                if isinstance(info, tuple):  # a finished env: its final_obs/final_info first, as before
                    infos = self._add_info(infos, info[1], i)
                    info = info[0]
                infos = self._add_info(infos, info, i)
            pixels = None  # the reset environments' first frames are drawn below
        else:
            infos = merge_infos(self, [o[4] for o in out])
        self._autoreset = done
        return self._obs(pixels if pixels is not None else self._render()), rewards, terms, truncs, infos

    def _step_batched(self, actions):
        """step() on the batched path: each env's physics in the pool's threads, drawn as it finishes; then the
        task's observations, rewards and terminations for the batch at once (_physics)."""
        ph = self._batched
        a = ph.actions(actions)
        mode = self.autoreset_mode
        if mode == AutoresetMode.DISABLED and self._autoreset.any():
            i = int(np.flatnonzero(self._autoreset)[0])
            raise RuntimeError(f"environment {i} finished and autoreset_mode is DISABLED: "
                               "reset it (options={'reset_mask': ...}) before stepping it again")
        resets = self._autoreset.copy() if mode == AutoresetMode.NEXT_STEP else np.zeros(self.num_envs, np.bool_)
        stepped = ~resets
        ph.check_reset(stepped)
        envs = self.envs
        reset_idx = np.flatnonzero(resets)
        out = dict(zip(reset_idx.tolist(), self._pool.map(lambda i: envs[i].reset(), reset_idx.tolist()))) \
            if reset_idx.size else {}
        before = ph.before()
        ph.start(a, stepped)
        try:
            # Drawn as they finish: the reset envs first, then each stepped env once its physics is done.
            pixels = self._render(order=itertools.chain(out, ph.finished())) \
                if self._overlap and self._pipelined() else None
        finally:
            ph.wait()  # no physics thread may be left touching an env, whatever the render did
        ph.reset_done(reset_idx)
        state, rewards, terms, truncs, info = ph.finish(a, before, stepped)
        infos = {}
        if stepped.any():  # a key no env gave is absent, as in SyncVectorEnv
            for key, value in info.items():
                infos[key], infos["_" + key] = value, stepped.copy()
        if reset_idx.size:  # NEXT_STEP: these envs were reset instead of stepped, as SyncVectorEnv does it
            rewards[reset_idx] = 0.0
            terms[reset_idx] = False
            truncs[reset_idx] = False
            for value in info.values():
                value[reset_idx] = 0
            for i in reset_idx:
                state[i] = out[i][0]
                infos = self._add_info(infos, out[i][1], int(i))
        done = np.logical_or(terms, truncs)
        if not self.render_only:
            self._state = state.astype(self._state_space.dtype, copy=False)
        if mode == AutoresetMode.SAME_STEP and done.any():
            finished = [int(i) for i in np.flatnonzero(done)]
            final_obs = self._obs(pixels if pixels is not None else self._render())
            final_obs = final_obs.clone() if self.render_only else dict(final_obs, pixels=final_obs["pixels"].clone())
            resets_out = self._pool.map(lambda i: envs[i].reset(), finished)
            ph.reset_done(finished)
            per_env = [{k: v[i] for k, v in info.items()} for i in range(self.num_envs)]
            infos = {}
            for i in range(self.num_envs):
                if done[i]:
                    one_final = final_obs[i] if self.render_only else {"state": final_obs["state"][i],
                                                                        "pixels": final_obs["pixels"][i]}
                    infos = self._add_info(infos, {"final_obs": one_final, "final_info": per_env[i]}, i)
            for i, (obs_i, info_i) in zip(finished, resets_out):
                per_env[i] = info_i
                if not self.render_only:
                    self._state[i] = obs_i
            for i in range(self.num_envs):
                infos = self._add_info(infos, per_env[i], i)
            pixels = None  # the reset environments' first frames are drawn below
        self._autoreset = done
        return self._obs(pixels if pixels is not None else self._render()), rewards, terms, truncs, infos

    def _pipelined(self):
        """Physics beside the render, unless an environment renders itself in step() (then all are stepped in
        this thread first) or a Gymnasium free camera is not placed yet (it is placed from the state of its first
        render, before a step)."""
        return not self._in_caller and self._cameras_placed()

    def _cameras_placed(self):
        return self._camera_list is not None or all(c is not None or not g for c, g in zip(self._cams, self._gym_free))

    @property
    def np_random_seed(self):
        """The environments' own seeds, as SyncVectorEnv gives them (a tuple, one per environment)."""
        return self.get_attr("np_random_seed")

    @property
    def np_random(self):
        """The environments' own random generators, as SyncVectorEnv gives them."""
        return self.get_attr("np_random")

    def render(self):
        """The latest pixel batch (what the last reset/step observed); None before the first reset."""
        return self._pixels

    def call(self, name, *args, **kwargs):
        """Calls `name` on every environment (or reads it, when not callable), as SyncVectorEnv.call."""
        out = []
        for e in self.envs:
            f = e.get_wrapper_attr(name)
            out.append(f(*args, **kwargs) if callable(f) else f)
        return tuple(out)

    def get_attr(self, name):
        return self.call(name)

    def set_attr(self, name, values):
        if not isinstance(values, (list, tuple)):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ValueError(f"set_attr got {len(values)} values for {self.num_envs} environments")
        for e, v in zip(self.envs, values):
            e.set_wrapper_attr(name, v)

    def close_extras(self, **kwargs):
        if not self.closed:
            self.closed = True
            if getattr(self, "_per_env_pool", None) is not None:  # a trial still running (_setup_trial)
                self._per_env_pool.close()
            _close_all(self._pool, self.renderer, self.envs, self._batched, self._guards)
            self._pixels = None  # its frame goes back now, unless the caller still holds the tensor

    def _check_open(self):
        if self.closed:
            raise RuntimeError("MujocoVectorEnv is closed")

    def __del__(self):
        # Gymnasium says close() runs when a vector env is collected; its VectorEnv has no __del__ to do it
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self):
        return (f"MujocoVectorEnv({self.spec.id if self.spec else '?'}, num_envs={self.num_envs}, "
                f"{self.height}x{self.width}, physics={self.physics_path}, threads={self.threads}, "
                f"backend={self.renderer.backend})")


class DmControlBatch:
    """N dm_control suite environments stepped as one batch and rendered in one BatchRenderer call.

        batch = DmControlBatch("cheetah", "run", num_envs=8, height=84, width=84, camera_id=0, seed=0)
        timesteps, pixels = batch.reset()        # N dm_env.TimeStep, (N, 84, 84, 3) uint8 tensor
        timesteps, pixels = batch.step(actions)  # actions: (N, action_dim)

    Each tile equals ``env.physics.render(height, width, camera_id=camera_id)`` of that environment (the
    visuals are dm_control's: its Physics' model; scene_option None: dm_control's default ``MjvOption``, which hides
    rangefinder rays). Environment k is loaded with
    ``task_kwargs={"random": seed + k}`` (seed None: unseeded). Each TimeStep is what that environment's own
    ``step()`` returns: a step after a ``last()`` one starts a new episode (dm_control's own auto-reset), or call
    ``reset()`` (or ``reset(mask)``) yourself, as dm_env asks. :meth:`from_envs` batches environments you made.

    physics: plain ``control.Environment``s (every suite task as ``suite.load`` makes it) can take the batched path:
    each env's task (``before_step``, ``after_step``, reward, observation, termination) runs per env in Python,
    every env's MuJoCo step in a pool of ``threads`` C threads that never hold the GIL (default: the cores, at most
    16), each env drawn as soon as its step is done; TimeSteps, PhysicsError and pixels equal to each env's own
    ``step()`` (``gltensor.mujoco._dmc_physics`` says how). The per-env path calls each env's own ``step()`` in
    turn, then draws the batch. "auto" (default) measures the two on these envs: they alternate step by step for
    the first 24 steps (4 not timed, then 10 timed each), and the one with the lower median step time is kept
    (``_path_trial``); after 200 more steps on it the two are measured once more, on a warmed-up batch, and that
    choice is final. Both are exact, so which one took a step changes no result. "batched" and "per-env" force
    one ("batched" raises where the envs cannot take it). Any other env (a wrapper, a composer env, a subclass)
    takes the per-env path: its own ``step()`` in ``threads`` Python threads (default 1). ``physics_path`` says
    which path steps now ("batched" or "per-env"), ``physics_path_reason`` why, ``physics_trial`` the
    measurement (None where none is made).
    """

    def __init__(self, domain, task, num_envs, height=84, width=84, camera_id=0, *, seed=None, threads=None,
                 backend="auto", cuda_device=None, task_kwargs=None, environment_kwargs=None, scene_option=None,
                 render_flags=None, max_geom=10000, physics="auto"):
        from dm_control import suite

        if int(num_envs) < 1:
            raise ValueError(f"DmControlBatch: num_envs must be positive, not {num_envs!r}")
        envs = []
        for k in range(int(num_envs)):
            kw = dict(task_kwargs or {})
            if seed is not None:
                kw["random"] = int(seed) + k
            envs.append(suite.load(domain, task, task_kwargs=kw, environment_kwargs=environment_kwargs))
        self._setup(envs, height, width, camera_id, threads, backend, cuda_device, scene_option, render_flags,
                    max_geom, physics)

    @classmethod
    def from_envs(cls, envs, height=84, width=84, camera_id=0, *, threads=None, backend="auto", cuda_device=None,
                  scene_option=None, render_flags=None, max_geom=10000, physics="auto"):
        """A batch of dm_env environments you made (each with a ``physics``: suite or composer environments,
        wrapped or not); the batch closes them when it is closed. Arguments as for the constructor."""
        envs = list(envs)
        if not envs:
            raise ValueError("DmControlBatch.from_envs: no environments given")
        for k, e in enumerate(envs):
            if getattr(e, "physics", None) is None:
                raise TypeError(f"DmControlBatch.from_envs: environment {k} ({type(e).__qualname__}) has no physics; "
                                "give dm_control environments (suite.load, composer.Environment, their wrappers)")
        self = cls.__new__(cls)
        self._setup(envs, height, width, camera_id, threads, backend, cuda_device, scene_option, render_flags,
                    max_geom, physics)
        return self

    def _setup(self, envs, height, width, camera_id, threads, backend, cuda_device, scene_option, render_flags,
               max_geom, physics):
        from ._dmc_physics import ThreadedDmcPhysics, threaded_or_reason
        from ._path_trial import PathTrial
        from ._physics import default_physics_threads
        from .batch import BatchRenderer

        self.closed = True  # until everything below exists
        self._threaded = None
        self.physics_trial = None
        self.envs = envs
        self.num_envs, self.height, self.width, self.camera_id = len(envs), int(height), int(width), camera_id
        if physics not in ("auto", "batched", "per-env"):
            raise ValueError(f"DmControlBatch: physics must be 'auto', 'batched' or 'per-env', not {physics!r}")
        if physics == "per-env":
            ok, why = False, "physics='per-env' was asked for"
        else:
            ok, why = threaded_or_reason(envs)
            if not ok and physics == "batched":
                raise ValueError(f"DmControlBatch(physics='batched'): {why}")
        if threads is not None:
            self.threads = max(1, int(threads))
        else:
            self.threads = default_physics_threads(self.num_envs) if ok else default_threads(self.num_envs)
        self.physics = [e.physics for e in self.envs]
        if scene_option is None:  # what Physics.render() draws with: dm_control's MjvOption, not MuJoCo's default
            from dm_control.mujoco import wrapper
            scene_option = wrapper.MjvOption()
        self.renderer = BatchRenderer([p.model.ptr for p in self.physics], self.num_envs, self.height, self.width,
                                      camera=camera_id, backend=backend, cuda_device=cuda_device, max_geom=max_geom,
                                      scene_option=scene_option, render_flags=render_flags)
        self._pool = _Pool(self.num_envs, 1 if ok else self.threads)
        if ok:
            try:
                self._threaded = ThreadedDmcPhysics(self.envs, self.threads)
            except BaseException:
                self._pool.close()
                self.renderer.close()
                raise
            self.physics_path = "batched"
            self.physics_path_reason = ("every environment is a plain dm_control control.Environment; each task per "
                                        "env in Python, the MuJoCo steps in C threads")
            if physics == "auto":
                self.physics_trial = PathTrial("batched", "per-env", again_after=TRIAL_AGAIN_AFTER)
                self._reason_before_trial = self.physics_path_reason  # each choice says its trials after it (step)
                self.physics_path_reason += (f"; physics='auto' times it against the per-env path over the first "
                                             f"{self.physics_trial.length} steps and keeps the faster, then once "
                                             f"more after {TRIAL_AGAIN_AFTER} steps")
        else:
            self.physics_path, self.physics_path_reason = "per-env", why
        self.action_spec = self.envs[0].action_spec()
        self.observation_spec = self.envs[0].observation_spec()
        self.closed = False

    def render(self):
        """The pixel batch of the current states, one render and one read."""
        return self.renderer.render_and_read(self.physics)

    def reset(self, mask=None):
        """Resets every environment (or those where mask is true); returns (timesteps, pixels). The timesteps of
        environments not reset are None."""
        self._check_open()
        idx = [i for i in range(self.num_envs) if mask is None or mask[i]]
        out = self._pool.map(lambda i: self.envs[i].reset(), idx)
        steps = [None] * self.num_envs
        for i, ts in zip(idx, out):
            steps[i] = ts
        return steps, self.render()

    def step(self, actions):
        """(N TimeSteps, pixels): each env's ``step(actions[k])``, then the batch drawn. On the batched path each
        env is drawn as soon as its step is done. A PhysicsError is raised after every env was stepped (see
        gltensor.mujoco._dmc_physics: its ``timesteps`` hold the other envs')."""
        self._check_open()
        if hasattr(actions, "detach"):
            actions = actions.detach().cpu().numpy()
        actions = np.asarray(actions)
        if len(actions) != self.num_envs:
            raise ValueError(f"step() got {len(actions)} actions for {self.num_envs} environments")
        trial = self.physics_trial
        if trial is None or trial.settled:
            return self._step_batched(actions) if self.physics_path == "batched" else self._step_per_env(actions)
        rounds = len(trial.rounds)
        # In a trial the paths take turns; between the two trials the one kept steps (PathTrial.step ticks it)
        out = trial.step(lambda path: self._step_batched(actions) if path == "batched" else self._step_per_env(actions))
        if len(trial.rounds) != rounds:
            self._keep(trial)
        return out

    def _keep(self, trial):
        """Steps the path the trial chose from now on. The C threads stay until the choice is final (the second
        trial times the batched path again); once per-env is final, they go."""
        self.physics_path_reason = self._reason_before_trial + "; " + trial.summary()
        self.physics_path = trial.choice
        # what steps: the C threads, or each env's step() in turn in this thread
        self.threads = self._threaded.threads if trial.choice == "batched" else len(self._pool.chunks)
        if trial.settled and trial.choice == "per-env":
            threaded, self._threaded = self._threaded, None
            threaded.close()

    def _step_per_env(self, actions):
        steps = self._pool.map(lambda i: self.envs[i].step(actions[i]))
        return steps, self.render()

    def _step_batched(self, actions):
        job = self._threaded.start(actions)
        try:
            pixels = self.renderer.render_and_read(self.physics, order=job.ready())
        finally:
            job.wait()
        return job.result(), pixels

    def _check_open(self):
        if self.closed:
            raise RuntimeError("DmControlBatch is closed")

    def close(self):
        if not self.closed:
            self.closed = True
            _close_all(self._pool, self.renderer, self.envs, self._threaded)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self):
        if not hasattr(self, "physics_path"):  # its construction failed
            return "DmControlBatch(not constructed)"
        state = "closed" if self.closed else f"backend={self.renderer.backend}"
        return (f"DmControlBatch(num_envs={self.num_envs}, {self.height}x{self.width}, physics={self.physics_path}, "
                f"threads={self.threads}, {state})")


_SCALARS = (int, float, bool)


def merge_infos(venv, infos):
    """The vector info of the environments' info dicts, equal to folding ``venv._add_info`` over them (Gymnasium's
    merge: per key an array typed by the first env that has it, and a ``"_key"`` mask). That fold costs ~5 µs per
    key per environment; when every env gives the same keys of one scalar type each (a MuJoCo task's reward
    terms), each key is one array here. Anything else (nested dicts, arrays, objects, differing keys or types)
    goes through ``_add_info`` itself."""
    n = len(infos)
    if n == 0 or not isinstance(infos[0], dict):
        return _fold_infos(venv, infos)
    keys = list(infos[0])
    types = [type(v) for v in infos[0].values()]
    for t in types:
        if not (t in _SCALARS or issubclass(t, np.number)):
            return _fold_infos(venv, infos)
    for info in infos:
        if type(info) is not dict or list(info) != keys or [type(v) for v in info.values()] != types:
            return _fold_infos(venv, infos)
    out = {}
    for key, t in zip(keys, types):
        out[key] = np.array([info[key] for info in infos], dtype=t)
        out["_" + key] = np.ones(n, dtype=np.bool_)
    return out


def _fold_infos(venv, infos):
    out = {}
    for i, info in enumerate(infos):
        out = venv._add_info(out, info, i)
    return out


def _info_at(info, i, skip=()):
    """Environment i's info out of a vector info dict (the inverse of VectorEnv._add_info): each key whose
    "_key" mask is set for i, nested dicts likewise."""
    out = {}
    for k, v in info.items():
        if k.startswith("_") or k in skip:
            continue
        mask = info.get("_" + k)
        if mask is not None and not mask[i]:
            continue
        out[k] = _info_at(v, i) if isinstance(v, dict) else v[i]
    return out


def _option_groups(options):
    """[(options, [env indices])] of equal per-env reset options (SB3's set_options gives one dict per env), in
    env order of first appearance; one group when all are equal."""
    def same(a, b):
        if a is b:
            return True
        try:
            return bool(a == b)
        except (ValueError, TypeError):  # e.g. NumPy arrays inside: compared as different, reset apart
            return False

    groups = []
    for i, o in enumerate(options):
        for g in groups:
            if same(g[0], o):
                g[1].append(i)
                break
        else:
            groups.append((o or {}, [i]))
    return groups


def as_sb3(venv):
    """A Stable-Baselines3 ``VecEnv`` over a MujocoVectorEnv made with ``autoreset_mode=SAME_STEP`` (SB3's own
    autoreset: the observation after a finished episode is the new episode's, the last one is in
    ``info["terminal_observation"]``).

    SB3 keeps its rollout buffer in NumPy on the host and its policy copies each batch to its device again, so
    every step copies the pixel batch to the host (``tensor.cpu().numpy()``: a device-to-host copy on the CUDA
    backend, none on the CPU backend) and SB3 copies it back when its policy runs on the GPU. A plain PyTorch
    loop on the MujocoVectorEnv itself keeps the batch on the GPU."""
    from stable_baselines3.common.vec_env import VecEnv

    if venv.autoreset_mode != AutoresetMode.SAME_STEP:
        raise ValueError("as_sb3 needs MujocoVectorEnv(..., autoreset_mode=AutoresetMode.SAME_STEP): SB3 resets "
                         f"finished environments in the same step, this one uses {venv.autoreset_mode}")

    def host(x):
        if isinstance(x, dict):
            return {k: host(v) for k, v in x.items()}
        return x.cpu().numpy() if hasattr(x, "cpu") else np.asarray(x)

    class _SB3(VecEnv):
        def __init__(self):
            super().__init__(venv.num_envs, venv.single_observation_space, venv.single_action_space)
            self.venv = venv
            self._actions = None
            self.render_mode = "rgb_array"

        def reset(self):
            # As DummyVecEnv: each env's seed and options (set_options) go to this reset only; reset_infos holds
            # each env's reset info. Envs given different options are reset in groups of equal options (masks).
            seeds = [s for s in self._seeds]
            seed = None if all(s is None for s in seeds) else seeds
            groups = _option_groups(self._options)
            for options, envs in groups:
                if len(groups) > 1:
                    options = dict(options, reset_mask=np.isin(np.arange(self.num_envs), envs))
                obs, info = venv.reset(seed=seed, options=options or None)
                for i in envs:
                    self.reset_infos[i] = _info_at(info, i)
            self._reset_seeds()
            self._reset_options()
            return host(obs)

        def step_async(self, actions):
            self._actions = actions

        def step_wait(self):
            obs, rew, term, trunc, info = venv.step(self._actions)
            # As DummyVecEnv: every env's step info with TimeLimit.truncated; a finished env's also with its last
            # observation, and its reset info in reset_infos (SAME_STEP: the top-level keys are the reset's).
            infos = []
            final = info.get("final_obs")
            for i in range(self.num_envs):
                done = term[i] or trunc[i]
                if done:
                    d = _info_at(info.get("final_info", {}), i)
                    self.reset_infos[i] = _info_at(info, i, skip=("final_obs", "final_info"))
                else:
                    d = _info_at(info, i)
                d["TimeLimit.truncated"] = bool(trunc[i] and not term[i])
                if done:
                    d["terminal_observation"] = host(final[i])
                infos.append(d)
            return host(obs), rew.astype(np.float32), np.logical_or(term, trunc), infos

        def close(self):
            venv.close()

        def get_images(self):
            return list(host(venv.render()))

        def get_attr(self, name, indices=None):  # as DummyVecEnv: through the wrappers to the inner env
            return [venv.envs[i].get_wrapper_attr(name) for i in self._get_indices(indices)]

        def set_attr(self, name, value, indices=None):
            for i in self._get_indices(indices):
                setattr(venv.envs[i], name, value)

        def env_method(self, name, *args, indices=None, **kwargs):
            return [venv.envs[i].get_wrapper_attr(name)(*args, **kwargs) for i in self._get_indices(indices)]

        def env_is_wrapped(self, wrapper_class, indices=None):
            from stable_baselines3.common import env_util
            return [env_util.is_wrapped(venv.envs[i], wrapper_class) for i in self._get_indices(indices)]

    return _SB3()
