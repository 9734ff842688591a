"""N Gymnasium MuJoCo environments stepped as one batch: physics in threads without the GIL, the task's
observations, rewards and terminations in NumPy over N (``_tasks``), equal to each env's own ``step()``.

Why: a Gymnasium MuJoCo env's ``step()`` is Python around a short ``mj_step``; N of them in one thread cost as much
as rendering N tiles. Here each env's step is only ``data.ctrl[:] = action; mj_step(model, data, nstep=frame_skip);
mj_rnePostConstraint(model, data)`` (Gymnasium's ``do_simulation``), run by C threads that never hold the GIL
(``_gltensor._MujocoStepper``, the loaded libmujoco's own functions on each env's own ``MjData``), and everything
else a step computes is done once for the batch. Python threads calling ``mj_step`` were measured too (H100 host,
HalfCheetah-v5, N = 256): 6.4 ms a step at their best (4 threads) against mujoco.rollout's 2.0 ms with 16, and
they took the GIL from the render thread beside them; they remain the fallback where libmujoco's symbols cannot
be found.

Why not ``mujoco.rollout``: it steps copies of the state in its own per-thread ``MjData``. A task's observation
and reward read what ``mj_step`` leaves in the env's own ``MjData`` (positions of the last forward pass, contact
forces of ``mj_rnePostConstraint``), and so does the renderer; a rollout does not leave them there. The benchmark
measures ``mujoco.rollout`` as the physics floor beside this path (``python -m gltensor.bench mujoco``).

What this path takes over from the env's wrappers: ``TimeLimit`` (the elapsed-step count, kept here and written
back to the wrapper, so ``get_attr`` sees it), ``OrderEnforcing`` (a step before the env's first reset raises
``ResetNeeded``) and ``PassiveEnvChecker`` (which only checks the first step). Resets still run each env's own
``reset()`` through its wrappers (its RNG, its noise, its reset info). An env with any other wrapper, a subclass
of a task, or ``render_mode="human"`` keeps its own ``step()``: :func:`batched_or_reason` says why.
"""

from __future__ import annotations

import ctypes
import glob
import os
from types import SimpleNamespace

import numpy as np

from ._tasks import _Mismatch, task_for

__all__ = ["BatchedPhysics", "batched_or_reason", "default_physics_threads", "mujoco_functions"]

_GATHERED = object()  # before(): the C threads copy what the task reads before each env's step (see finish)


def usable_cores():
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def default_physics_threads(num_envs):
    """Threads for the batched physics: the cores this process may run on, at most 16 and at most one per env.
    The render runs in the caller's thread beside them (``mjr_render`` releases the GIL too)."""
    return max(1, min(usable_cores(), 16, int(num_envs)))


# How long the render thread watches for the next finished env before it sleeps (mjstep.c's next()). A sleeping
# thread woke tens of µs after the physics thread's signal on the GPU hosts; watching instead took about 1% off the
# step (0.958-1.006x over 12 paired cells, N = 4 to 256, three H200 hosts: benchmarks/results/mujoco_knobs_ab_h200.json,
# mujoco_wspin_ab_h200.json, mujoco_spin_ab_h200.json). It costs a core while the render thread waits, so only where
# two cores are left beside the job's physics threads (on a 2-core machine the physics threads need both).
RENDER_SPIN_US = 200


def render_spin_us(active_threads):
    return RENDER_SPIN_US if usable_cores() >= int(active_threads) + 2 else 0


def _wrapper_chain(env):
    import gymnasium

    chain = []
    while isinstance(env, gymnasium.Wrapper):
        chain.append(env)
        env = env.env
    return chain


def batched_or_reason(envs, unwrapped):
    """(task class, None) when the batch can take the batched path, else (None, the reason in words)."""
    from gymnasium.wrappers import OrderEnforcing, PassiveEnvChecker, TimeLimit

    task, why = task_for(unwrapped)
    if task is None:
        return None, why
    allowed = (TimeLimit, OrderEnforcing, PassiveEnvChecker)
    for k, e in enumerate(envs):
        for w in _wrapper_chain(e):
            if type(w) not in allowed:
                return None, (f"environment {k} is wrapped in {type(w).__name__}, whose step() may do more than "
                              "gymnasium.make's wrappers (TimeLimit, OrderEnforcing, PassiveEnvChecker)")
        if getattr(unwrapped[k], "render_mode", None) == "human":
            return None, f"environment {k} has render_mode='human' (it draws a window in its own step())"
    return task, None


def mujoco_functions(mujoco, names=("mj_step", "mj_rnePostConstraint")):
    """Addresses of the named functions in the libmujoco the bindings loaded (for the C threads of mjstep.c), or
    None. The Gymnasium path needs mj_step and mj_rnePostConstraint; dm_control's (_dmc_physics) mj_step1/2 too."""
    libs = sorted(glob.glob(os.path.join(os.path.dirname(mujoco.__file__), "libmujoco.so*")))
    if not libs:
        return None
    try:
        lib = ctypes.CDLL(libs[-1])  # already loaded by the bindings: the same handle, the same functions
        return tuple(ctypes.cast(getattr(lib, name), ctypes.c_void_p).value for name in names)
    except (OSError, AttributeError):
        return None


class _PythonThreads:
    """The fallback stepper: step_env in the vector env's pool of Python threads (mj_step releases the GIL)."""

    gathers = False  # the caller stacks the task's fields itself (BatchedPhysics.gather)

    def __init__(self, physics, pool):
        self._ph, self._pool, self._stream = physics, pool, None

    def start(self, actions, stepped):
        ph, idx = self._ph, np.flatnonzero(stepped)
        todo = set(idx.tolist())
        self._stream = self._pool.stream(lambda i: ph.step_env(i, actions[i]) if i in todo else None)
        self._stream.__enter__()
        self._todo = todo

    def finished(self):
        for i in self._stream:
            if i in self._todo:
                yield i

    def wait(self):
        if self._stream is not None:
            stream, self._stream = self._stream, None
            stream.__exit__(None, None, None)

    def close(self):
        self.wait()


class _CThreads:
    """The batch's physics in C threads (_gltensor._MujocoStepper); holds the job's arrays until it is waited for.
    With ``gather`` (the fields' per-env views, all float64 and C-contiguous), each env's thread also copies those
    fields into two fresh blocks, just before and just after the env's step (see mjstep.c): ``start`` then returns
    the (before, after) namespaces of (N, ...) arrays, filled once the job is waited for."""

    def __init__(self, physics, functions, threads, gather=None):
        from .. import _gltensor

        ph = physics
        self._stepper = _gltensor._MujocoStepper(
            functions[0], functions[1], [m._address for m in ph.models], [d._address for d in ph.datas],
            [c.ctypes.data for c in ph._ctrl], ph.nu, ph.frame_skip, threads)
        self._keep = (ph.models, ph.datas, ph._ctrl, gather)  # the addresses given stay valid while this lives
        self._job = None
        self.active = 0  # how many of the threads take part in a job (0: all; see BatchedPhysics.use_threads)
        self._layout = None
        self.gathers = bool(gather)
        if gather:
            names = list(gather)
            n = len(ph.datas)
            sizes = [gather[f][0].nbytes for f in names]
            self._stepper.set_gather([gather[f][i].ctypes.data for i in range(n) for f in names], sizes)
            self._layout = [(f, gather[f][0].shape, n * gather[f][0].size) for f in names]
            self._block_len = sum(n * gather[f][0].size for f in names)

    @property
    def active(self):
        return self._active

    @active.setter
    def active(self, k):
        """How many of the threads take part in the next jobs (0: all); the render thread's spin follows it."""
        self._active = int(k)
        self._stepper.spin_us = render_spin_us(self._active or self._stepper.threads)

    def _namespace(self, block):
        fields, at = {}, 0
        for name, shape, count in self._layout:
            fields[name] = block[at:at + count].reshape((-1,) + shape)
            at += count
        return SimpleNamespace(**fields)

    def start(self, actions, stepped):
        job = (np.ascontiguousarray(actions, dtype=np.float64), np.ascontiguousarray(stepped, dtype=np.uint8))
        if not self.gathers:
            self._stepper.start(job[0].ctypes.data, job[1].ctypes.data, 0, 0, 0, self.active)
            self._job = job
            return None
        # Fresh blocks every step: the task's results may be views of them, and a caller may keep those.
        before, after = np.empty(self._block_len), np.empty(self._block_len)
        self._stepper.start(job[0].ctypes.data, job[1].ctypes.data, 0, before.ctypes.data, after.ctypes.data,
                            self.active)
        self._job = job + (before, after)
        return self._namespace(before), self._namespace(after)

    def finished(self):
        nxt = self._stepper.next
        i = nxt()
        while i is not None:
            yield i
            i = nxt()

    def wait(self):
        self._stepper.wait()
        self._job = None  # the blocks live on in the namespaces start() returned

    def close(self):
        self._stepper.close()


class BatchedPhysics:
    """The batched step of N envs of one task (see the module docstring). ``step_env(i, action)`` is what one
    physics thread runs per env; ``gather()`` stacks the data fields the task reads; ``finish()`` gives the
    batch's observation, reward, terminated, truncated and info for the stepped envs."""

    def __init__(self, envs, unwrapped, task_cls, threads=None, pool=None):
        import gymnasium
        import mujoco
        from gymnasium.wrappers import OrderEnforcing, TimeLimit

        self._mj_step = mujoco.mj_step
        self._mj_rne = mujoco.mj_rnePostConstraint
        self._reset_needed = gymnasium.error.ResetNeeded
        try:
            self.task = task_cls(unwrapped)
        except _Mismatch as exc:
            raise ValueError(str(exc)) from None
        self.n = len(envs)
        self.models = [u.model for u in unwrapped]
        self.datas = [u.data for u in unwrapped]
        self.frame_skip = int(unwrapped[0].frame_skip)
        fields = dict.fromkeys(("qpos", "qvel") + tuple(self.task.fields))
        # Views of each env's MjData arrays, made once: an MjData never moves its buffers.
        self._views = {f: [getattr(d, f) for d in self.datas] for f in fields}
        self._ctrl = [d.ctrl for d in self.datas]
        self._limits = []
        self._order = []
        for e in envs:
            chain = _wrapper_chain(e)
            self._limits.append(next((w for w in chain if isinstance(w, TimeLimit)), None))
            self._order.append(next((w for w in chain if isinstance(w, OrderEnforcing)), None))
        self.max_steps = np.array([w._max_episode_steps if w is not None and w._max_episode_steps is not None
                                   else np.iinfo(np.int64).max for w in self._limits], dtype=np.int64)
        self.elapsed = np.zeros(self.n, dtype=np.int64)
        self._all_reset = False  # check_reset()
        self._limited = [(i, w) for i, w in enumerate(self._limits) if w is not None]
        self.nu = self.task.nu
        threads = default_physics_threads(self.n) if threads is None else max(1, int(threads))
        functions = None if os.environ.get("GLTENSOR_MUJOCO_PYTHON_THREADS") == "1" else mujoco_functions(mujoco)
        if functions is not None and all(hasattr(x, "_address") for x in self.models[:1] + self.datas[:1]):
            self._runner = _CThreads(self, functions, threads, self._views if self._c_gather_fits() else None)
            self.stepper = "C threads"
            threads = self._runner._stepper.threads  # at most one per env
        else:
            if pool is None:
                raise ValueError("the batched physics found no libmujoco symbols and was given no thread pool")
            self._runner = _PythonThreads(self, pool)
            self.stepper = "Python threads"
        self.threads = threads
        self._gathered = None

    def _c_gather_fits(self):
        """Whether the C threads can gather the task's fields: each a float64 C-contiguous array of one shape in
        every env (else np.stack in this thread, which also says what differs)."""
        for views in self._views.values():
            v0 = views[0]
            if not all(v.dtype == np.float64 and v.flags.c_contiguous and v.shape == v0.shape and v.size
                       for v in views):
                return False
        return True

    # -- the physics of one step, in the stepper's threads
    def start(self, actions, stepped):
        """Starts the physics of the envs in the bool mask `stepped`; returns at once."""
        self._gathered = self._runner.start(actions, stepped)

    def finished(self):
        """The indices of the envs started, each as its physics finishes (blocks in between)."""
        return self._runner.finished()

    def wait(self):
        """Until no thread touches any env (also after an error in between)."""
        self._runner.wait()

    def close(self):
        self._runner.close()

    def use_threads(self, k):
        """Steps the next jobs with k of the C threads (1 <= k <= self.threads); the others sleep through them.
        Results do not depend on k: each env is stepped by one thread, the same calls in the same order."""
        if not isinstance(self._runner, _CThreads):
            raise ValueError("BatchedPhysics.use_threads: only the C threads can step with fewer threads")
        if not 1 <= int(k) <= self.threads:
            raise ValueError(f"BatchedPhysics.use_threads: {k} threads, this batch has 1 to {self.threads}")
        self._runner.active = 0 if int(k) == self.threads else int(k)

    # -- per env, in the fallback's Python threads
    def step_env(self, i, action):
        """Gymnasium's do_simulation for env i (the GIL is released inside mj_step)."""
        m, d = self.models[i], self.datas[i]
        self._ctrl[i][:] = action
        self._mj_step(m, d, nstep=self.frame_skip)
        self._mj_rne(m, d)

    # -- the batch, in the caller's thread
    def actions(self, actions):
        """The batch of actions as a C-contiguous (N, nu) array of the dtype the caller gave (Gymnasium computes
        control costs in that dtype), with the shape check of Gymnasium's do_simulation."""
        if hasattr(actions, "detach"):  # a torch tensor, possibly on the GPU: one copy to the host
            actions = actions.detach().cpu().numpy()
        a = np.ascontiguousarray(actions)
        if a.shape != (self.n, self.nu):
            raise ValueError(f"step() got actions of shape {a.shape}; this batch of {self.n} environments takes "
                             f"({self.n}, {self.nu})")
        return a

    def check_reset(self, stepped):
        """OrderEnforcing's check, for the envs about to be stepped. Once every env was reset it holds for good
        (OrderEnforcing never unsets has_reset), so it is not repeated per step."""
        if self._all_reset:
            return
        if all(w is None or w.has_reset for w in self._order):
            self._all_reset = True
            return
        for i in np.flatnonzero(stepped):
            w = self._order[i]
            if w is not None and not w.has_reset:
                raise self._reset_needed(f"environment {i}: cannot call step() before reset() (MujocoVectorEnv."
                                         "reset() resets every environment, or those in options['reset_mask'])")

    def sync_elapsed(self):
        """The episode counts from the envs' TimeLimit wrappers, after steps of their own step() (the per-env
        path, in physics='auto''s trial) counted there instead of here."""
        for i, w in self._limited:
            if w._elapsed_steps is not None:  # None before the env's first reset (its step then raises ResetNeeded)
                self.elapsed[i] = w._elapsed_steps

    def reset_done(self, indices):
        """The envs in `indices` were reset through their own wrappers: their episode counts start again."""
        self.elapsed[indices] = 0

    def gather(self):
        return SimpleNamespace(**{f: np.stack(v) for f, v in self._views.items()})

    def before(self):
        """What the task reads before the step (call it before start()); with the C threads' gather, a marker:
        their copy of the fields just before each env's step, read in finish()."""
        if self._runner.gathers:
            return _GATHERED
        return self.task.before(self.gather())

    def finish(self, action, before, stepped):
        """(obs, reward, terminated, truncated, info arrays) of the batch after the physics of the envs in the
        bool mask `stepped` (call it after wait()); rows of envs not stepped are to be replaced by the caller."""
        if before is _GATHERED:
            if self._gathered is None:
                raise RuntimeError("BatchedPhysics.finish: no step was started since the last finish()")
            g_before, g = self._gathered
            self._gathered = None
            before = self.task.before(g_before)
        else:
            g = self.gather()
        obs, reward, terminated, info = self.task.after(g, action, before)
        if terminated is None:
            terminated = np.zeros(self.n, dtype=np.bool_)
        self.elapsed[stepped] += 1
        truncated = self.elapsed >= self.max_steps
        counts = self.elapsed.tolist()
        mask = stepped.tolist()
        for i, w in self._limited:  # TimeLimit's own count, for get_attr and a later per-env step
            if mask[i]:
                w._elapsed_steps = counts[i]
        # Each info value an array of its own (the caller zeroes rows of envs not stepped; some terms are
        # columns of one array here)
        info = {k: np.array(v, order="C") for k, v in info.items()}
        return obs, np.asarray(reward, dtype=np.float64), np.asarray(terminated, dtype=np.bool_), truncated, info
