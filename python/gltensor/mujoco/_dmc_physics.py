"""N dm_control ``control.Environment`` steps with their physics in C threads that never hold the GIL, each env's
task still run per env in Python: equal, bit for bit, to calling each env's own ``step()``.

What ``control.Environment.step(action)`` does (dm_control's rl/control.py), and where each part runs here:

1. ``if _reset_next_step: return reset()`` -- per env, in the caller's thread (that env is not stepped; a reset
   may use dm_control's own GL context, e.g. quadruped-escape's new terrain, and a GL context is current in one
   thread);
2. ``task.before_step(action, physics)`` -- per env, in the caller's thread (sets ctrl; a task may do more);
3. ``physics.step(n_sub_steps)`` -- ``with check_invalid_state(): _step_with_up_to_date_position_velocity(n)``
   (legacy step: ``mj_step2``, ``mj_step`` x (n - 1), ``mj_step1``; with RK4: ``mj_step`` x n, ``mj_step1``;
   without legacy_step: ``mj_step`` x n). The MuJoCo calls run in ``_gltensor._MujocoStepper``'s threads (the same
   pool and file as the Gymnasium path, mjstep.c), on each env's own ``MjData``; the warning check around them is
   dm_control's own context manager, entered before and left after, per env;
4. ``task.after_step``, ``get_reward``, ``get_observation`` (flattened if asked), the step count, the time limit and
   ``get_termination`` -- per env, in env order, as each env's physics finishes. For dm_control.suite's tasks in
   one Python "finisher" thread, which hands each finished env to the caller's ``ready()``; the caller draws it
   meanwhile. Why a thread: this part is Python (about 15-30 µs an env); in the caller's thread it ran serially
   with the render, and the batched path lost to the per-env path at N = 16 on an H200 host (0.83x,
   benchmarks/results/dmc_threads_h200.json). The render releases the GIL in MuJoCo's calls, so the finisher's
   Python runs beside it, as the per-env path's ``env.step()`` does. Only the suite's tasks: none of them touches
   a GL context in this part, while a task of your own may render in ``get_observation``; yours run in the
   caller's thread. An env is drawn only after its part 4, as after its own ``step()``.

The steps 1, 2 and 4 are dm_control's code called in its order; step 3's C calls are those of the installed
dm_control's ``Physics.step``. Which is why this path takes only envs whose ``step`` is exactly that code: a plain
``control.Environment`` (no wrapper, no subclass, not a composer env) over an ``engine.Physics`` whose ``step``
is not overridden, with the installed dm_control's ``Environment.step``/``Physics.step`` source being the one
reproduced here (checked by hash, so a dm_control that changes them falls back rather than drifting), and no
RandomState shared between envs (their per-env calls run in another interleaving than env-by-env stepping).
Anything else keeps the per-env path: :func:`threaded_or_reason` says why.

A diverging physics: dm_control raises ``PhysicsError`` from that env's ``step()`` (unless inside
``physics.suppress_physics_errors()``, where it logs). Here every env of the batch is stepped; an env whose
physics diverged is left as its own ``step()`` leaves it when it raises (physics stepped, ``after_step`` not run,
step count not advanced); after the batch the first such env's ``PhysicsError`` is raised, with the env's index
in a note and ``timesteps`` (every other env's ``TimeStep``, None for the failed ones) and ``failed`` (their
indices) set on it.
"""

from __future__ import annotations

import hashlib
import inspect
import queue
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ._physics import default_physics_threads, mujoco_functions

__all__ = ["ThreadedDmcPhysics", "threaded_or_reason"]

# The step plans of mjstep.c (its PLAN_* values).
_PLAN_SKIP, _PLAN_LEGACY, _PLAN_LEGACY_RK4, _PLAN_PLAIN = 0, 2, 3, 4

# sha256 (first 16 hex digits) of the dm_control source this module reproduces (dm_control 1.0.x): the C plans
# for Physics.step, the Python of Environment.step in _finish().
_REPRODUCED = {
    "Environment.step": "4fb194f7283d3b7b",
    "Physics.step": "071a803e322b13f5",
    "Physics._step_with_up_to_date_position_velocity": "02fdb54b771d4812",
}


def _source_hash(fn):
    try:
        return hashlib.sha256(inspect.getsource(fn).encode()).hexdigest()[:16]
    except (OSError, TypeError):  # no source shipped: cannot tell, so not reproduced
        return None


def _mujoco_step_functions():
    """(mj_step, mj_rnePostConstraint, mj_step1, mj_step2) addresses in the libmujoco the bindings loaded, or
    None (the lookup the Gymnasium path uses, with dm_control's legacy-step halves added)."""
    import mujoco

    return mujoco_functions(mujoco, ("mj_step", "mj_rnePostConstraint", "mj_step1", "mj_step2"))


def threaded_or_reason(envs):
    """(True, None) when every env can take the threaded path, else (False, the reason in words)."""
    try:
        from dm_control.mujoco import engine
        from dm_control.rl import control
    except ImportError as exc:  # pragma: no cover - DmControlBatch imports dm_control first
        return False, f"dm_control is not importable ({exc})"
    for name, want in _REPRODUCED.items():
        owner, attr = name.split(".", 1)
        fn = getattr(control.Environment if owner == "Environment" else engine.Physics, attr, None)
        if fn is None or _source_hash(fn) != want:
            from importlib import metadata
            try:
                version = metadata.version("dm_control")
            except metadata.PackageNotFoundError:
                version = "?"
            return False, (f"dm_control {version}'s {name} is not the code the threaded path reproduces (that of "
                           "dm_control 1.0.x); each env keeps its own step()")
    seen_random, seen_physics = {}, {}
    for k, env in enumerate(envs):
        if type(env) is not control.Environment:
            return False, (f"environment {k} is a {type(env).__module__}.{type(env).__qualname__}, not a plain "
                           "dm_control.rl.control.Environment (a wrapper, a subclass or a composer env has a step() "
                           "of its own)")
        physics = env.physics
        if not isinstance(physics, engine.Physics):
            return False, f"environment {k}'s physics is a {type(physics).__qualname__}, not a dm_control Physics"
        for attr in ("step", "_step_with_up_to_date_position_velocity", "check_invalid_state"):
            if getattr(type(physics), attr) is not getattr(engine.Physics, attr):
                return False, (f"environment {k}'s physics ({type(physics).__qualname__}) overrides {attr}(); "
                               "its own step() runs it")
        for obj, seen, what in ((physics, seen_physics, "Physics"),
                                (getattr(env.task, "random", None), seen_random, "RandomState")):
            if obj is None:
                continue
            if id(obj) in seen:
                return False, (f"environments {seen[id(obj)]} and {k} share one {what} object; stepped together "
                               "their per-env calls would draw from it in another order than env by env")
            seen[id(obj)] = k
        if not all(hasattr(x, "_address") for x in (physics.model.ptr, physics.data.ptr)):
            return False, "this MuJoCo's MjModel/MjData give no _address for the C threads"
    if _mujoco_step_functions() is None:
        return False, "the loaded libmujoco's mj_step/mj_step1/mj_step2 were not found for the C threads"
    return True, None


class ThreadedDmcPhysics:
    """The threaded step of N plain ``control.Environment``s (see the module docstring).

    ``step(actions)`` -> N ``dm_env.TimeStep``. ``start(actions)`` -> a job whose ``ready()`` yields each env index
    as soon as that env's step is complete (env order), for ``BatchRenderer.render(order=...)``: the caller draws
    env k while the threads step the others; then ``wait()`` and ``result()``."""

    def __init__(self, envs, threads=None):
        from dm_control.rl import control

        from .. import _gltensor

        self._flatten = control.flatten_observation
        self._dm_env = __import__("dm_env")
        self.envs = list(envs)
        self.n = len(self.envs)
        self.physics = [e.physics for e in self.envs]
        self.threads = default_physics_threads(self.n) if threads is None else max(1, int(threads))
        step, rne, step1, step2 = _mujoco_step_functions()
        models = [p.model.ptr for p in self.physics]
        datas = [p.data.ptr for p in self.physics]
        self._stepper = _gltensor._MujocoStepper(step, rne, [m._address for m in models],
                                                 [d._address for d in datas], [0] * self.n, 0, 1, self.threads,
                                                 step1=step1, step2=step2)
        self._keep = (models, datas)  # the addresses above stay valid while this lives
        self._rk4 = __import__("mujoco").mjtIntegrator.mjINT_RK4.value
        self._plans = np.zeros(self.n, dtype=np.uint8)
        self._nsteps = np.zeros(self.n, dtype=np.int32)
        self._in_flight = False
        # part 4 beside the render only for the suite's own tasks (see the module docstring)
        self.finish_in_thread = all(type(e._task).__module__.startswith("dm_control.suite.") for e in self.envs)
        self._finisher = ThreadPoolExecutor(1, thread_name_prefix="gltensor-dmc-finish")
        self.closed = False

    def _plan(self, physics):
        """What Physics.step runs now for this physics (read per step, as Physics.step reads it)."""
        if not physics.legacy_step:
            return _PLAN_PLAIN
        return _PLAN_LEGACY if physics.model.opt.integrator != self._rk4 else _PLAN_LEGACY_RK4

    def start(self, actions):
        """Begins the batch's step: parts 1 and 2 per env, part 3 started in the threads. Returns the _Job whose
        ready() runs part 4 env by env; its wait() must follow, whatever happens in between."""
        if self.closed:
            raise RuntimeError("DmControlBatch: the threaded physics is closed")
        if self._in_flight:
            raise RuntimeError("DmControlBatch: the previous step's physics is still in flight")
        job = _Job(self)
        envs, plans, nsteps = self.envs, self._plans, self._nsteps
        plans[:] = _PLAN_SKIP
        # 1, 2: per env, as Environment.step begins; then Physics.step's warning snapshot
        for k, env in enumerate(envs):
            if env._reset_next_step:
                job.resets.append(k)
                continue
            env._task.before_step(actions[k], env._physics)
            physics = env._physics
            check = physics.check_invalid_state()
            check.__enter__()
            job.checks[k] = check
            plans[k] = self._plan(physics)
            nsteps[k] = env._n_sub_steps
        # 3: the MuJoCo calls of every stepped env, in the threads
        self._stepper.start(0, plans.ctypes.data, nsteps.ctypes.data)
        self._in_flight = True
        return job

    def step(self, actions):
        """N TimeSteps, as [env.step(a) for env, a in zip(envs, actions)] gives them (no render)."""
        job = self.start(actions)
        try:
            for _ in job.ready(beside_render=False):  # nothing to overlap: the finisher thread would only cost
                pass
        finally:
            job.wait()
        return job.result()

    def _wait(self):
        self._stepper.wait()
        self._in_flight = False

    def _finish(self, env):
        """The rest of control.Environment.step after self._physics.step(...), line for line."""
        task, physics, dm_env = env._task, env._physics, self._dm_env
        task.after_step(physics)
        reward = task.get_reward(physics)
        observation = task.get_observation(physics)
        if env._flat_observation:
            observation = self._flatten(observation)
        env._step_count += 1
        if env._step_count >= env._step_limit:
            discount = 1.0
        else:
            discount = task.get_termination(physics)
        if discount is not None:
            env._reset_next_step = True
            return dm_env.TimeStep(dm_env.StepType.LAST, reward, discount, observation)
        return dm_env.TimeStep(dm_env.StepType.MID, reward, 1.0, observation)

    def close(self):
        """Stops the threads (after any physics in flight: none may touch an env being closed); idempotent."""
        if not self.closed:
            self.closed = True
            self._stepper.close()
            self._finisher.shutdown(wait=True)


class _Job:
    """One batch step in flight: ready() finishes the envs in env order as their physics ends, yielding each index;
    result() gives the TimeSteps or raises the first env's PhysicsError (see the module docstring)."""

    def __init__(self, owner):
        self._owner = owner
        n = owner.n
        self.resets = []
        self.checks = [None] * n
        self.timesteps = [None] * n
        self.errors = {}
        self._done = False
        self._finishing = None
        self._error = None

    def ready(self, beside_render=True):
        """Each env index in env order once its step is complete (part 1 here; part 4 in the finisher thread when
        the caller renders meanwhile and the tasks are the suite's, else here)."""
        owner = self._owner
        for k in self.resets:  # 1: these envs start a new episode instead (the threads step the others meanwhile)
            self.timesteps[k] = owner.envs[k].reset()
        if not (beside_render and owner.finish_in_thread):
            yield from self._finish_in_order()
            self._done = True
            return
        done = queue.SimpleQueue()
        self._finishing = owner._finisher.submit(self._hand_over, done)
        for k in iter(done.get, None):
            yield k
        error, self._error = self._error, None
        if error is not None:  # e.g. a bug in a task's Python: raised here, as its own step() would raise it
            raise error
        self._done = True

    def _hand_over(self, done):
        """In the finisher thread: each env index into `done` once finished; None last, also after an error (kept
        for ready() to raise)."""
        try:
            for k in self._finish_in_order():
                done.put(k)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            self._error = exc
        finally:
            done.put(None)

    def _finish_in_order(self):
        """Part 4 of each env in env order as its physics ends, yielding its index (reset envs pass through)."""
        from dm_control.rl.control import PhysicsError

        owner = self._owner
        envs, plans, n = owner.envs, owner._plans, owner.n
        ready = np.zeros(n, dtype=np.bool_)
        ready[self.resets] = True
        nxt = owner._stepper.next
        for k in range(n):
            while not ready[k]:
                i = nxt()
                if i is None:  # pragma: no cover - every stepped env is handed back exactly once
                    raise RuntimeError(f"DmControlBatch: environment {k}'s physics was never handed back")
                ready[i] = True
            if plans[k] != _PLAN_SKIP:
                try:
                    self.checks[k].__exit__(None, None, None)  # dm_control's own warning check of Physics.step
                except PhysicsError as exc:
                    self.errors[k] = exc
                else:
                    self.timesteps[k] = owner._finish(envs[k])
            yield k

    def wait(self):
        """Until no thread touches any env (also after an error in between): the finisher, then the physics."""
        if self._finishing is not None:
            self._finishing.result()  # it ends by itself: the physics hands every env back
        self._owner._wait()

    def result(self):
        if self.errors:
            failed = sorted(self.errors)
            exc = self.errors[failed[0]]
            others = f" (and environments {failed[1:]}'s)" if len(failed) > 1 else ""
            exc.add_note(f"DmControlBatch: raised for environment {failed[0]}'s physics{others}; the other "
                         "environments were stepped: their TimeSteps are in this exception's .timesteps (None for "
                         "the failed ones, whose indices are in .failed)")
            exc.timesteps, exc.failed = self.timesteps, failed
            raise exc
        if not self._done:  # pragma: no cover - callers run ready() to its end first
            raise RuntimeError("DmControlBatch: the step's results were asked for before every env was finished")
        return self.timesteps
