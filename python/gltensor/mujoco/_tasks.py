"""Gymnasium's v5 MuJoCo tasks for N environments at once: observations, rewards, terminations and infos in
NumPy over the batch, equal to each environment's own ``step()``.

Each task class below mirrors one Gymnasium env's ``step()`` (gymnasium/envs/mujoco/*_v5.py) line for line, with
the per-env scalars replaced by (N,) arrays and the per-env vectors by (N, k) rows. The arithmetic is the same
operations in the same order on the same dtypes (NumPy 2's promotion: a Python float weight times a float32
control cost stays float32, as in Gymnasium), so the results are bitwise equal. Three kinds of per-env calls have
no batched form whose bits are guaranteed on every NumPy/BLAS build: ``np.linalg.norm`` of a vector (a BLAS dot),
``np.sum`` of a row and Humanoid's ``np.einsum`` mass centre. For those, :func:`rowwise` compares a batched form
with the per-env call on random rows once per process and uses the batched form only where every bit agreed,
else it calls the per-env form row by row. The per-task equality tests (tests/test_mujoco_tasks.py) hold it to
Gymnasium's own envs.

A task reads each env's constructor arguments from the unwrapped env (the attributes its ``__init__`` set);
environments of one batch must agree on them (else MujocoVectorEnv keeps the per-env path and says why).
"""

from __future__ import annotations

import numpy as np

__all__ = ["TASKS", "task_for", "rowwise"]


# -- batched forms checked against the per-env call ---------------------------------------------------------
_ROWWISE_CACHE: dict = {}


def rowwise(name, per_row, batched, width, dtype=np.float64):
    """A function of an (N, width) array giving per_row(row) for every row: `batched` where it gave the same bits
    as `per_row` on 512 random rows of this width (magnitudes from 1e-3 to 1e3, signs mixed), else a loop of
    `per_row`. The check runs once per (name, width, dtype) per process."""
    key = (name, width, np.dtype(dtype).str)
    fn = _ROWWISE_CACHE.get(key)
    if fn is None:
        rng = np.random.default_rng(12345)
        sample = (rng.standard_normal((512, width)) * 10.0 ** rng.uniform(-3, 3, (512, 1))).astype(dtype)
        want = np.array([per_row(r) for r in sample])
        got = np.asarray(batched(sample))
        same = got.shape == want.shape and got.dtype == want.dtype and np.array_equal(got.view(np.uint8),
                                                                                      want.view(np.uint8))
        if same:
            fn = batched
        else:
            def fn(a, _f=per_row):
                return np.array([_f(r) for r in a])
        _ROWWISE_CACHE[key] = fn
    return fn


def _norm_rows(width):
    """np.linalg.norm(v, ord=2) of each row (Gymnasium's distance terms): sqrt of a BLAS dot per vector; np.vecdot
    calls the same dot kernel row by row."""
    return rowwise("norm", lambda r: np.linalg.norm(r, ord=2), lambda a: np.sqrt(np.vecdot(a, a)), width)


def _sumsq_rows(width, dtype):
    """np.sum(np.square(v)) of each row (control and contact costs)."""
    return rowwise("sumsq", lambda r: np.sum(np.square(r)), lambda a: np.sum(np.square(a), axis=1), width, dtype)


def _pow2(v):
    """Each element squared as ``np.float64(x) ** 2`` squares it: C's pow(x, 2.0), which is not always x * x (glibc's
    pow is within 0.52 ulp, not correctly rounded) and which NumPy's array power replaces by x * x or a SIMD pow.
    Python's float ** 2 is the same pow call."""
    return np.fromiter((x ** 2 for x in v.tolist()), dtype=np.float64, count=len(v))


def _same(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype and \
            np.array_equal(a, b)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and (a == b or (a != a and b != b))  # NaN equals NaN here


class Task:
    """One Gymnasium MuJoCo task over N envs. Subclasses name the data fields they read (``fields``), the
    constructor arguments they use (``params``: attributes of the unwrapped env) and implement ``before`` (what
    ``step()`` reads before the simulation) and ``after`` (observation, reward, terminated, info after it)."""

    fields: tuple = ("qpos", "qvel")
    params: tuple = ()

    def __init__(self, envs):
        e0 = envs[0]
        for name in self.params + ("frame_skip",):
            v0 = getattr(e0, name)
            for k, e in enumerate(envs[1:], 1):
                if not _same(v0, getattr(e, name)):
                    raise _Mismatch(f"environment {k}'s {name.lstrip('_')} ({getattr(e, name)!r}) differs from "
                                    f"environment 0's ({v0!r})")
        dts = {float(e.dt) for e in envs}
        if len(dts) != 1:
            raise _Mismatch(f"the environments' dt differ ({sorted(dts)})")
        self.p = {name.lstrip("_"): getattr(e0, name) for name in self.params}
        self.dt = e0.dt
        self.model = e0.model
        self.n = len(envs)
        self.init_qpos = np.stack([e.init_qpos for e in envs])
        self.nu = e0.model.nu

    def body_id(self, name):
        return self.model.body(name).id

    def before(self, g):
        return None

    def after(self, g, action, before):
        raise NotImplementedError

    def ctrl_cost(self, action, weight):
        return weight * _sumsq_rows(action.shape[1], action.dtype)(action)


class _Mismatch(ValueError):
    """The envs of one batch differ in a constructor argument the batched task reads."""


def _concat(*parts):
    return np.concatenate([p.reshape(p.shape[0], -1) for p in parts], axis=1)


class HalfCheetah(Task):
    params = ("_forward_reward_weight", "_ctrl_cost_weight", "_exclude_current_positions_from_observation")

    def before(self, g):
        return g.qpos[:, 0].copy()

    def after(self, g, action, x_before):
        p = self.p
        x_after = g.qpos[:, 0]
        x_velocity = (x_after - x_before) / self.dt
        position = g.qpos[:, 1:] if p["exclude_current_positions_from_observation"] else g.qpos
        obs = _concat(position, g.qvel)
        forward_reward = p["forward_reward_weight"] * x_velocity
        ctrl_cost = self.ctrl_cost(action, p["ctrl_cost_weight"])
        reward = forward_reward - ctrl_cost
        info = {"x_position": x_after.copy(), "x_velocity": x_velocity,
                "reward_forward": forward_reward, "reward_ctrl": -ctrl_cost}
        return obs, reward, None, info


class _Legged2D(Task):
    """Hopper and Walker2d: x velocity, a survive bonus while healthy, velocities clipped in the observation."""

    params = ("_forward_reward_weight", "_ctrl_cost_weight", "_healthy_reward", "_terminate_when_unhealthy",
              "_healthy_z_range", "_healthy_angle_range", "_exclude_current_positions_from_observation")

    def before(self, g):
        return g.qpos[:, 0].copy()

    def healthy(self, g):
        z, angle = g.qpos[:, 1], g.qpos[:, 2]
        min_z, max_z = self.p["healthy_z_range"]
        min_angle, max_angle = self.p["healthy_angle_range"]
        return (min_z < z) & (z < max_z) & (min_angle < angle) & (angle < max_angle)

    def after(self, g, action, x_before):
        p = self.p
        x_after = g.qpos[:, 0]
        x_velocity = (x_after - x_before) / self.dt
        position = g.qpos[:, 1:] if p["exclude_current_positions_from_observation"] else g.qpos
        obs = _concat(position, np.clip(g.qvel, -10, 10))
        forward_reward = p["forward_reward_weight"] * x_velocity
        healthy = self.healthy(g)
        healthy_reward = healthy * p["healthy_reward"]
        rewards = forward_reward + healthy_reward
        ctrl_cost = self.ctrl_cost(action, p["ctrl_cost_weight"])
        reward = rewards - ctrl_cost
        terminated = ~healthy & bool(p["terminate_when_unhealthy"])
        info = {"x_position": x_after.copy(), "z_distance_from_origin": g.qpos[:, 1] - self.init_qpos[:, 1],
                "x_velocity": x_velocity, "reward_forward": forward_reward, "reward_ctrl": -ctrl_cost,
                "reward_survive": healthy_reward}
        return obs, reward, terminated, info


class Hopper(_Legged2D):
    params = _Legged2D.params + ("_healthy_state_range",)

    def healthy(self, g):
        min_state, max_state = self.p["healthy_state_range"]
        state = _concat(g.qpos, g.qvel)[:, 2:]
        healthy_state = np.all(np.logical_and(min_state < state, state < max_state), axis=1)
        return healthy_state & super().healthy(g)


class Walker2d(_Legged2D):
    pass


class Ant(Task):
    fields = ("qpos", "qvel", "xpos", "cfrc_ext")
    params = ("_forward_reward_weight", "_ctrl_cost_weight", "_contact_cost_weight", "_healthy_reward",
              "_terminate_when_unhealthy", "_healthy_z_range", "_contact_force_range", "_main_body",
              "_exclude_current_positions_from_observation", "_include_cfrc_ext_in_observation")

    def __init__(self, envs):
        super().__init__(envs)
        self.main = self.body_id(self.p["main_body"])

    def before(self, g):
        return g.xpos[:, self.main, :2].copy()

    def after(self, g, action, xy_before):
        p = self.p
        xy_after = g.xpos[:, self.main, :2]
        xy_velocity = (xy_after - xy_before) / self.dt
        x_velocity, y_velocity = xy_velocity[:, 0], xy_velocity[:, 1]
        contact_forces = np.clip(g.cfrc_ext, *p["contact_force_range"])
        position = g.qpos[:, 2:] if p["exclude_current_positions_from_observation"] else g.qpos
        if p["include_cfrc_ext_in_observation"]:
            obs = _concat(position, g.qvel, contact_forces[:, 1:])
        else:
            obs = _concat(position, g.qvel)
        state = _concat(g.qpos, g.qvel)
        min_z, max_z = p["healthy_z_range"]
        healthy = np.isfinite(state).all(axis=1) & (min_z <= state[:, 2]) & (state[:, 2] <= max_z)
        forward_reward = x_velocity * p["forward_reward_weight"]
        healthy_reward = healthy * p["healthy_reward"]
        rewards = forward_reward + healthy_reward
        ctrl_cost = self.ctrl_cost(action, p["ctrl_cost_weight"])
        flat = contact_forces.reshape(self.n, -1)
        contact_cost = p["contact_cost_weight"] * _sumsq_rows(flat.shape[1], flat.dtype)(flat)
        costs = ctrl_cost + contact_cost
        reward = rewards - costs
        terminated = ~healthy & bool(p["terminate_when_unhealthy"])
        info = {"x_position": g.qpos[:, 0].copy(), "y_position": g.qpos[:, 1].copy(),
                "distance_from_origin": _norm_rows(2)(np.ascontiguousarray(g.qpos[:, 0:2])),
                "x_velocity": x_velocity, "y_velocity": y_velocity, "reward_forward": forward_reward,
                "reward_ctrl": -ctrl_cost, "reward_contact": -contact_cost, "reward_survive": healthy_reward}
        return obs, reward, terminated, info


class _HumanoidBase(Task):
    fields = ("qpos", "qvel", "cinert", "cvel", "qfrc_actuator", "cfrc_ext", "ctrl", "ten_length", "ten_velocity")
    params = ("_ctrl_cost_weight", "_exclude_current_positions_from_observation", "_include_cinert_in_observation",
              "_include_cvel_in_observation", "_include_qfrc_actuator_in_observation",
              "_include_cfrc_ext_in_observation")

    def obs(self, g):
        p = self.p
        parts = [g.qpos[:, 2:] if p["exclude_current_positions_from_observation"] else g.qpos, g.qvel]
        # Gymnasium tests these flags with `is True`: a truthy non-True value leaves the part out there too.
        if p["include_cinert_in_observation"] is True:
            parts.append(g.cinert[:, 1:])
        if p["include_cvel_in_observation"] is True:
            parts.append(g.cvel[:, 1:])
        if p["include_qfrc_actuator_in_observation"] is True:
            parts.append(g.qfrc_actuator[:, 6:])
        if p["include_cfrc_ext_in_observation"] is True:
            parts.append(g.cfrc_ext[:, 1:])
        return _concat(*parts)

    def sumsq(self, a):
        flat = a.reshape(self.n, -1)
        return _sumsq_rows(flat.shape[1], flat.dtype)(flat)

    def tendons(self, g):
        return {"tendon_length": g.ten_length.copy(), "tendon_velocity": g.ten_velocity.copy()}


class Humanoid(_HumanoidBase):
    fields = _HumanoidBase.fields + ("xipos",)
    params = _HumanoidBase.params + ("_forward_reward_weight", "_contact_cost_weight", "_contact_cost_range",
                                     "_healthy_reward", "_terminate_when_unhealthy", "_healthy_z_range")

    def __init__(self, envs):
        super().__init__(envs)
        mass = self.model.body_mass
        nbody = self.model.nbody
        # Gymnasium's mass_center: np.einsum("b,bj->j", body_mass, xipos) / body_mass.sum(), first two
        self._denom = mass.sum()
        self._num = rowwise("mass_center", lambda r: np.einsum("b,bj->j", mass, r.reshape(nbody, 3)),
                            lambda a: np.einsum("b,nbj->nj", mass, a.reshape(len(a), nbody, 3)), nbody * 3)

    def mass_center(self, g):
        return (self._num(g.xipos.reshape(self.n, -1)) / self._denom)[:, 0:2].copy()

    def before(self, g):
        return self.mass_center(g)

    def after(self, g, action, xy_before):
        p = self.p
        xy_after = self.mass_center(g)
        xy_velocity = (xy_after - xy_before) / self.dt
        x_velocity, y_velocity = xy_velocity[:, 0], xy_velocity[:, 1]
        obs = self.obs(g)
        forward_reward = p["forward_reward_weight"] * x_velocity
        min_z, max_z = p["healthy_z_range"]
        healthy = (min_z < g.qpos[:, 2]) & (g.qpos[:, 2] < max_z)
        healthy_reward = healthy * p["healthy_reward"]
        rewards = forward_reward + healthy_reward
        ctrl_cost = p["ctrl_cost_weight"] * self.sumsq(g.ctrl)
        contact_cost = np.clip(p["contact_cost_weight"] * self.sumsq(g.cfrc_ext), *p["contact_cost_range"])
        costs = ctrl_cost + contact_cost
        reward = rewards - costs
        terminated = ~healthy & bool(p["terminate_when_unhealthy"])
        info = {"x_position": g.qpos[:, 0].copy(), "y_position": g.qpos[:, 1].copy(), **self.tendons(g),
                "distance_from_origin": _norm_rows(2)(np.ascontiguousarray(g.qpos[:, 0:2])),
                "x_velocity": x_velocity, "y_velocity": y_velocity, "reward_survive": healthy_reward,
                "reward_forward": forward_reward, "reward_ctrl": -ctrl_cost, "reward_contact": -contact_cost}
        return obs, reward, terminated, info


class HumanoidStandup(_HumanoidBase):
    params = _HumanoidBase.params + ("_uph_cost_weight", "_impact_cost_weight", "_impact_cost_range")

    def after(self, g, action, before):
        p = self.p
        pos_after = g.qpos[:, 2]
        uph_cost = (pos_after - 0) / self.model.opt.timestep
        quad_ctrl_cost = p["ctrl_cost_weight"] * self.sumsq(g.ctrl)
        quad_impact_cost = np.clip(p["impact_cost_weight"] * self.sumsq(g.cfrc_ext), *p["impact_cost_range"])
        reward = uph_cost - quad_ctrl_cost - quad_impact_cost + 1
        info = {"x_position": g.qpos[:, 0].copy(), "y_position": g.qpos[:, 1].copy(),
                "z_distance_from_origin": g.qpos[:, 2] - self.init_qpos[:, 2], **self.tendons(g),
                "reward_linup": uph_cost, "reward_quadctrl": -quad_ctrl_cost, "reward_impact": -quad_impact_cost}
        return self.obs(g), reward, None, info


class InvertedDoublePendulum(Task):
    fields = ("qpos", "qvel", "site_xpos", "qfrc_constraint")
    params = ("_healthy_reward",)

    def after(self, g, action, before):
        x, y = g.site_xpos[:, 0, 0], g.site_xpos[:, 0, 2]
        obs = _concat(g.qpos[:, :1], np.sin(g.qpos[:, 1:]), np.cos(g.qpos[:, 1:]), np.clip(g.qvel, -10, 10),
                      np.clip(g.qfrc_constraint, -10, 10)[:, :1])
        terminated = y <= 1
        v1, v2 = g.qvel[:, 1], g.qvel[:, 2]
        dist_penalty = 0.01 * _pow2(x) + _pow2(y - 2)
        vel_penalty = 1e-3 * _pow2(v1) + 5e-3 * _pow2(v2)
        alive_bonus = self.p["healthy_reward"] * (~terminated).astype(np.int64)
        reward = alive_bonus - dist_penalty - vel_penalty
        info = {"reward_survive": alive_bonus, "distance_penalty": -dist_penalty, "velocity_penalty": -vel_penalty}
        return obs, reward, terminated, info


class InvertedPendulum(Task):
    def after(self, g, action, before):
        obs = _concat(g.qpos, g.qvel)
        terminated = ~np.isfinite(obs).all(axis=1) | (np.abs(obs[:, 1]) > 0.2)
        reward = (~terminated).astype(np.int64)
        return obs, reward, terminated, {"reward_survive": reward}


class Pusher(Task):
    fields = ("qpos", "qvel", "xpos")
    params = ("_reward_near_weight", "_reward_dist_weight", "_reward_control_weight")

    def __init__(self, envs):
        super().__init__(envs)
        self.tips, self.obj, self.goal = (self.body_id(b) for b in ("tips_arm", "object", "goal"))

    def after(self, g, action, before):
        p = self.p
        tips, obj, goal = g.xpos[:, self.tips], g.xpos[:, self.obj], g.xpos[:, self.goal]
        obs = _concat(g.qpos[:, :7], g.qvel[:, :7], tips, obj, goal)
        norm = _norm_rows(3)
        reward_near = -norm(obj - tips) * p["reward_near_weight"]
        reward_dist = -norm(obj - goal) * p["reward_dist_weight"]
        reward_ctrl = -_sumsq_rows(action.shape[1], action.dtype)(action) * p["reward_control_weight"]
        reward = reward_dist + reward_ctrl + reward_near
        info = {"reward_dist": reward_dist, "reward_ctrl": reward_ctrl, "reward_near": reward_near}
        return obs, reward, None, info


class Reacher(Task):
    fields = ("qpos", "qvel", "xpos")
    params = ("_reward_dist_weight", "_reward_control_weight")

    def __init__(self, envs):
        super().__init__(envs)
        self.tip, self.target = self.body_id("fingertip"), self.body_id("target")

    def after(self, g, action, before):
        p = self.p
        theta = g.qpos[:, :2]
        vec = g.xpos[:, self.tip] - g.xpos[:, self.target]
        obs = _concat(np.cos(theta), np.sin(theta), g.qpos[:, 2:], g.qvel[:, :2], vec[:, :2])
        reward_dist = -_norm_rows(3)(vec) * p["reward_dist_weight"]
        reward_ctrl = -_sumsq_rows(action.shape[1], action.dtype)(action) * p["reward_control_weight"]
        reward = reward_dist + reward_ctrl
        return obs, reward, None, {"reward_dist": reward_dist, "reward_ctrl": reward_ctrl}


class Swimmer(Task):
    params = ("_forward_reward_weight", "_ctrl_cost_weight", "_exclude_current_positions_from_observation")

    def before(self, g):
        return g.qpos[:, 0:2].copy()

    def after(self, g, action, xy_before):
        p = self.p
        xy_after = g.qpos[:, 0:2].copy()
        xy_velocity = (xy_after - xy_before) / self.dt
        x_velocity, y_velocity = xy_velocity[:, 0], xy_velocity[:, 1]
        position = g.qpos[:, 2:] if p["exclude_current_positions_from_observation"] else g.qpos
        obs = _concat(position, g.qvel)
        forward_reward = p["forward_reward_weight"] * x_velocity
        ctrl_cost = self.ctrl_cost(action, p["ctrl_cost_weight"])
        reward = forward_reward - ctrl_cost
        info = {"x_position": xy_after[:, 0], "y_position": xy_after[:, 1],
                "distance_from_origin": _norm_rows(2)(xy_after), "x_velocity": x_velocity,
                "y_velocity": y_velocity, "reward_forward": forward_reward, "reward_ctrl": -ctrl_cost}
        return obs, reward, None, info


def _gym_classes():
    from gymnasium.envs.mujoco import (ant_v5, half_cheetah_v5, hopper_v5, humanoid_v5, humanoidstandup_v5,
                                       inverted_double_pendulum_v5, inverted_pendulum_v5, pusher_v5, reacher_v5,
                                       swimmer_v5, walker2d_v5)
    return {ant_v5.AntEnv: Ant, half_cheetah_v5.HalfCheetahEnv: HalfCheetah, hopper_v5.HopperEnv: Hopper,
            humanoid_v5.HumanoidEnv: Humanoid, humanoidstandup_v5.HumanoidStandupEnv: HumanoidStandup,
            inverted_double_pendulum_v5.InvertedDoublePendulumEnv: InvertedDoublePendulum,
            inverted_pendulum_v5.InvertedPendulumEnv: InvertedPendulum, pusher_v5.PusherEnv: Pusher,
            reacher_v5.ReacherEnv: Reacher, swimmer_v5.SwimmerEnv: Swimmer, walker2d_v5.Walker2dEnv: Walker2d}


TASKS = ("Ant-v5", "HalfCheetah-v5", "Hopper-v5", "Humanoid-v5", "HumanoidStandup-v5", "InvertedDoublePendulum-v5",
         "InvertedPendulum-v5", "Pusher-v5", "Reacher-v5", "Swimmer-v5", "Walker2d-v5")


def task_for(unwrapped_envs):
    """(task class, None) when every env is one v5 task that a batched task mirrors, else (None, why not)."""
    try:
        classes = _gym_classes()
    except ImportError as exc:  # an older Gymnasium without the v5 envs
        return None, f"this Gymnasium has no v5 MuJoCo envs ({exc})"
    types = {type(u) for u in unwrapped_envs}
    if len(types) != 1:
        return None, f"the environments are of {len(types)} classes ({', '.join(sorted(t.__name__ for t in types))})"
    t = types.pop()
    task = classes.get(t)
    if task is None:
        return None, (f"{t.__module__}.{t.__name__} is not one of Gymnasium's v5 MuJoCo tasks (a subclass or "
                      "another env may change step(), so it keeps its own step())")
    if int(np.__version__.split(".")[0]) < 2:
        return None, f"NumPy {np.__version__} (the batched tasks need NumPy 2's type promotion to match step())"
    return task, None
