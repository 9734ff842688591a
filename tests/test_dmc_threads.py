"""DmControlBatch's batched path (gltensor.mujoco._dmc_physics over mjstep.c's dm_control plans): every TimeStep
(observation, reward, discount, step type), every physics state and every pixel must equal what each environment's
own control.Environment.step() gives, across episode ends (dm_control's auto-reset), with action repeats,
legacy_step on and off, RK4 and Euler, flat observations, PhysicsError raised or suppressed, 1 and several threads;
envs it cannot reproduce take the per-env path, saying why. The C plans themselves are checked against MuJoCo's
Python calls without dm_control, so the sanitizer run covers them (dm_control is skipped there: its imports leak at
exit)."""

import os

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from conftest import dm_control_suite_or_skip  # noqa: E402

mujoco = pytest.importorskip("mujoco")

from gltensor import _gltensor  # noqa: E402

H, W = 24, 32
UNDER_SANITIZER = bool(os.environ.get("GLTENSOR_UNDER_SANITIZER"))

# -- the C plans, MuJoCo alone ---------------------------------------------------------------------------------
XML = """<mujoco><option timestep="0.005" integrator="{integrator}"/><worldbody><geom type="plane" size="5 5 .1"/>
<body pos="0 0 1"><freejoint/><geom type="box" size=".1 .2 .3"/></body>
<body pos=".5 0 .3"><joint type="hinge" axis="0 1 0"/><geom type="capsule" size=".05" fromto="0 0 0 .3 0 0"/>
</body></worldbody><actuator><motor joint="{joint}"/></actuator></mujoco>"""


def model(integrator="Euler"):
    """A free box and an actuated hinge on a plane: contacts, a constraint force, a ctrl."""
    xml = XML.replace('<joint type="hinge"', '<joint name="h" type="hinge"').format(integrator=integrator, joint="h")
    return mujoco.MjModel.from_xml_string(xml)


def functions():
    from gltensor.mujoco._dmc_physics import _mujoco_step_functions
    f = _mujoco_step_functions()
    if f is None:
        pytest.skip("libmujoco's symbols were not found next to the bindings")
    return f


def state(d):
    return {f: np.array(getattr(d, f)) for f in ("qpos", "qvel", "qacc", "act", "ctrl", "xpos", "sensordata",
                                                 "qfrc_constraint", "efc_force", "warning", "time")}


def assert_same(a, b, what):
    sa, sb = state(a), state(b)
    for f in sa:
        np.testing.assert_array_equal(sa[f], sb[f], err_msg=f"{what}: {f}")


def python_plan(m, d, plan, nstep):
    """What each mjstep.c plan must do, in MuJoCo's Python calls (dm_control's Physics.step for plans 2-4)."""
    if plan == 2:
        mujoco.mj_step2(m, d)
        if nstep > 1:
            mujoco.mj_step(m, d, nstep - 1)
        mujoco.mj_step1(m, d)
    elif plan == 3:
        mujoco.mj_step(m, d, nstep)
        mujoco.mj_step1(m, d)
    else:
        mujoco.mj_step(m, d, nstep)


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("integrator", ["Euler", "RK4", "implicitfast"])
def test_c_plans_equal_mujocos_calls(integrator, threads):
    f = functions()
    n = 5
    m = model(integrator)
    mine = [mujoco.MjData(m) for _ in range(n)]
    ref = [mujoco.MjData(m) for _ in range(n)]
    for k, (a, b) in enumerate(zip(mine, ref)):
        for d in (a, b):
            d.qvel[:] = np.linspace(-1, 1, m.nv) * (k + 1)
            mujoco.mj_forward(m, d)
    stepper = _gltensor._MujocoStepper(f[0], f[1], [m._address] * n, [d._address for d in mine], [0] * n, 0, 1,
                                       threads, step1=f[2], step2=f[3])
    plans = np.array([2, 3, 4, 0, 2], dtype=np.uint8)
    nsteps = np.array([1, 3, 2, 5, 4], dtype=np.int32)
    rng = np.random.default_rng(0)
    for t in range(6):
        ctrl = rng.uniform(-1, 1, n)
        for k in range(n):
            mine[k].ctrl[:] = ref[k].ctrl[:] = ctrl[k]
        stepper.start(0, plans.ctypes.data, nsteps.ctypes.data)
        got = []
        while (i := stepper.next()) is not None:
            got.append(i)
        stepper.wait()
        assert sorted(got) == [k for k in range(n) if plans[k]]
        for k in range(n):
            if plans[k]:
                python_plan(m, ref[k], int(plans[k]), int(nsteps[k]))
            assert_same(mine[k], ref[k], f"step {t}, env {k}, plan {plans[k]}")
    stepper.close()


def test_c_plans_refuse_what_they_cannot_run():
    f = functions()
    m = model()
    d = mujoco.MjData(m)
    no_step12 = _gltensor._MujocoStepper(f[0], f[1], [m._address], [d._address], [0], 0, 1, 1)
    with_step12 = _gltensor._MujocoStepper(f[0], f[1], [m._address], [d._address], [0], 0, 1, 1, step1=f[2],
                                           step2=f[3])
    for stepper, plan, nstep, match in ((no_step12, 2, 1, "step1/step2"), (no_step12, 3, 1, "step1/step2"),
                                        (with_step12, 9, 1, "plan 9 is unknown"),
                                        (with_step12, 4, -2, "negative")):
        plans = np.array([plan], dtype=np.uint8)
        nsteps = np.array([nstep], dtype=np.int32)
        with pytest.raises(ValueError, match=match):
            stepper.start(0, plans.ctypes.data, nsteps.ctypes.data)
    assert d.time == 0  # nothing was stepped
    # Gymnasium's plan on a stepper without actions (nu=0): no ctrl copied, mj_step and mj_rnePostConstraint run
    ref = mujoco.MjData(m)
    with_step12.start(0, np.ones(1, np.uint8).ctypes.data)
    with_step12.wait()
    mujoco.mj_step(m, ref)
    mujoco.mj_rnePostConstraint(m, ref)
    assert_same(d, ref, "Gymnasium's plan with nu=0")
    for s in (no_step12, with_step12):
        s.close()
        with pytest.raises(RuntimeError, match="closed"):
            s.start(0, np.zeros(1, np.uint8).ctypes.data)


def test_c_close_with_physics_in_flight_finishes_the_job():
    """close() while the threads step: it returns after the job, every env stepped in full, none touched after."""
    f = functions()
    n, nstep = 4, 3000
    m = model()
    mine = [mujoco.MjData(m) for _ in range(n)]
    ref = [mujoco.MjData(m) for _ in range(n)]
    stepper = _gltensor._MujocoStepper(f[0], f[1], [m._address] * n, [d._address for d in mine], [0] * n, 0, 1, 2,
                                       step1=f[2], step2=f[3])
    plans = np.full(n, 2, dtype=np.uint8)
    nsteps = np.full(n, nstep, dtype=np.int32)
    stepper.start(0, plans.ctypes.data, nsteps.ctypes.data)
    stepper.close()  # the job is in flight: close waits for it, then stops the threads
    for k in range(n):
        python_plan(m, ref[k], 2, nstep)
        assert_same(mine[k], ref[k], f"env {k}")
    stepper.close()  # idempotent
    stepper.wait()


# -- dm_control ------------------------------------------------------------------------------------------------
def suite_or_skip():
    return dm_control_suite_or_skip("cartpole", "swingup")


def load(suite, name, n, seed=0, task_kwargs=None, environment_kwargs=None):
    domain, task = name.split("-", 1)
    return [suite.load(domain, task, task_kwargs=dict(task_kwargs or {}, random=seed + k),
                       environment_kwargs=environment_kwargs) for k in range(n)]


def assert_timesteps_equal(want, got, what):
    assert len(want) == len(got)
    for k, (w, g) in enumerate(zip(want, got)):
        where = f"{what}, env {k}"
        assert (w is None) == (g is None), where
        if w is None:
            continue
        assert w.step_type == g.step_type, where
        assert w.reward == g.reward and type(w.reward) is type(g.reward), where
        assert w.discount == g.discount and type(w.discount) is type(g.discount), where
        wo, go = w.observation, g.observation
        if isinstance(wo, dict):
            assert list(wo) == list(go), where
            for key in wo:
                np.testing.assert_array_equal(wo[key], go[key], err_msg=f"{where}: {key}")
                assert np.asarray(wo[key]).dtype == np.asarray(go[key]).dtype, where
        else:
            np.testing.assert_array_equal(wo, go, err_msg=where)


def assert_envs_equal(want, got, what):
    for k, (a, b) in enumerate(zip(want, got)):
        assert_same(a.physics.data.ptr, b.physics.data.ptr, f"{what}, env {k}")
        assert (a._step_count, a._reset_next_step) == (b._step_count, b._reset_next_step), f"{what}, env {k}"


# name, time limit (s) short enough for episodes to end within the steps, steps, environment_kwargs
TASKS = [
    ("cartpole-swingup", 0.1, 25, None),                          # RK4, 1 sub-step
    ("cheetah-run", 0.08, 20, {"n_sub_steps": 3}),                # Euler, action repeat
    ("walker-walk", 0.2, 24, None),                               # 10 sub-steps
    ("reacher-easy", 0.1, 24, {"flat_observation": True}),
    ("finger-spin", 0.1, 24, {"legacy_step": False}),             # plain mj_step
    ("quadruped-escape", 0.1, 12, None),                          # terrain per reset, 4 sub-steps
]


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("name,limit,steps,env_kw", TASKS, ids=[t[0] for t in TASKS])
def test_threaded_steps_equal_each_envs_own_step(name, limit, steps, env_kw, threads):
    suite = suite_or_skip()
    from gltensor.mujoco._dmc_physics import ThreadedDmcPhysics, threaded_or_reason

    n = 3
    ref = load(suite, name, n, task_kwargs={"time_limit": limit}, environment_kwargs=env_kw)
    envs = load(suite, name, n, task_kwargs={"time_limit": limit}, environment_kwargs=env_kw)
    assert threaded_or_reason(envs) == (True, None)
    physics = ThreadedDmcPhysics(envs, threads)
    assert physics.threads == threads
    try:
        spec = ref[0].action_spec()
        rng = np.random.default_rng(1)
        # Stagger the episodes: env k starts k steps late, so ends, resets and mid-episode steps share batches
        for k in range(n):
            for _ in range(k):
                a = rng.uniform(spec.minimum, spec.maximum, spec.shape)
                ref[k].step(a)
                envs[k].step(a)
        kinds = set()
        for t in range(steps):
            actions = rng.uniform(spec.minimum, spec.maximum, (n,) + spec.shape)
            want = [e.step(a) for e, a in zip(ref, actions)]
            got = physics.step(actions)
            assert_timesteps_equal(want, got, f"{name} step {t}")
            assert_envs_equal(ref, envs, f"{name} step {t}")
            kinds.update(s.step_type.name for s in want)
        assert kinds == {"FIRST", "MID", "LAST"}, kinds  # the run crossed episode ends
    finally:
        physics.close()
        for e in ref + envs:
            e.close()


def test_batch_pixels_and_timesteps_equal_per_env_path_and_physics_render():
    suite_or_skip()
    from gltensor.mujoco import DmControlBatch

    n = 3
    kw = dict(camera_id=0, seed=2, task_kwargs={"time_limit": 0.05})
    with DmControlBatch("cheetah", "run", n, H, W, threads=2, **kw) as batched, \
            DmControlBatch("cheetah", "run", n, H, W, physics="per-env", **kw) as per_env:
        assert batched.physics_path == "batched" and "control.Environment" in batched.physics_path_reason
        assert "first 24 steps" in batched.physics_path_reason and not batched.physics_trial.decided
        assert per_env.physics_path == "per-env" and per_env.physics_path_reason == "physics='per-env' was asked for"
        assert per_env.physics_trial is None
        assert "physics=batched" in repr(batched) and "threads=2" in repr(batched)
        assert "physics=per-env" in repr(per_env)
        sa, pa = batched.reset()
        sb, pb = per_env.reset()
        assert_timesteps_equal(sb, sa, "reset")
        spec = batched.action_spec
        rng = np.random.default_rng(3)
        # 5-step episodes: LAST at 5, the auto-reset's FIRST at 6, ...; 26 steps cross the end of physics='auto''s
        # trial (24 steps, alternating the paths), so both paths and the one kept are compared
        for t in range(26):
            actions = rng.uniform(spec.minimum, spec.maximum, (n,) + spec.shape)
            sa, pa = batched.step(actions)
            sb, pb = per_env.step(actions)
            assert_timesteps_equal(sb, sa, f"step {t}")
            want = np.stack([p.render(H, W, camera_id=0) for p in batched.physics])
            np.testing.assert_array_equal(want, pa.cpu().numpy(), err_msg=f"step {t}")
            np.testing.assert_array_equal(pb.cpu().numpy(), pa.cpu().numpy(), err_msg=f"step {t}")
        assert [s.step_type.name for s in sa] == ["MID"] * n
        trial = batched.physics_trial
        assert trial.decided and batched.physics_path == trial.choice and trial.choice in ("batched", "per-env")
        assert [len(v) for v in trial.times.values()] == [10, 10] and "measured on steps 5-24" in batched.physics_path_reason
    assert "closed" in repr(batched)
    with pytest.raises(RuntimeError, match="closed"):
        batched.step(actions)


def test_other_envs_take_the_per_env_path_and_say_why():
    suite = suite_or_skip()
    from dm_control.rl import control
    from dm_control.suite.wrappers import action_scale

    from gltensor.mujoco import DmControlBatch

    envs = load(suite, "cartpole-balance", 2)
    wrapped = [action_scale.Wrapper(e, minimum=-0.5, maximum=0.5) for e in envs]
    with DmControlBatch.from_envs(wrapped, H, W) as batch:
        assert batch.physics_path == "per-env"
        assert "action_scale.Wrapper" in batch.physics_path_reason and "environment 0" in batch.physics_path_reason
        assert "physics=per-env" in repr(batch) and batch.threads == 1
        steps, _ = batch.reset()
        steps, _ = batch.step(np.full((2, 1), 0.3))
        assert all(s.mid() for s in steps)
    wrapped = [action_scale.Wrapper(e, minimum=-1, maximum=1) for e in load(suite, "cartpole-balance", 2)]
    with pytest.raises(ValueError, match=r"physics='batched'.*Wrapper"):
        DmControlBatch.from_envs(wrapped, H, W, physics="batched")

    class Mine(control.Environment):
        pass

    base = load(suite, "cartpole-balance", 2)
    mine = [Mine(e.physics, e.task, time_limit=1) for e in base]
    with DmControlBatch.from_envs(mine, H, W) as batch:
        assert batch.physics_path == "per-env" and "Mine" in batch.physics_path_reason

    shared = np.random.RandomState(0)
    with DmControlBatch.from_envs(load(suite, "cartpole-balance", 2, seed=0), H, W) as plain:
        assert plain.physics_path == "batched"
    envs = [suite.load("cartpole", "balance", task_kwargs={"random": shared}) for _ in range(2)]
    with DmControlBatch.from_envs(envs, H, W) as batch:
        assert batch.physics_path == "per-env" and "share one RandomState" in batch.physics_path_reason
    with pytest.raises(ValueError, match="physics must be"):
        DmControlBatch.from_envs(load(suite, "cartpole-balance", 1), H, W, physics="threads")
    with pytest.raises(TypeError, match="has no physics"):
        DmControlBatch.from_envs([object()], H, W)


def test_a_changed_dm_control_step_falls_back(monkeypatch):
    suite_or_skip()
    from gltensor.mujoco import _dmc_physics

    monkeypatch.setitem(_dmc_physics._REPRODUCED, "Environment.step", "0" * 16)
    ok, why = _dmc_physics.threaded_or_reason(load(pytest.importorskip("dm_control.suite"), "cartpole-balance", 1))
    assert not ok and "Environment.step is not the code" in why


def diverge(env):
    """NaN positions: MuJoCo's mj_checkPos resets the data and counts a mjWARN_BADQPOS warning in the next step."""
    env.physics.data.qpos[:] = np.nan


@pytest.mark.parametrize("threads", [1, 2])
def test_physics_error_as_each_envs_own_step(threads):
    suite = suite_or_skip()
    from dm_control.rl.control import PhysicsError

    from gltensor.mujoco._dmc_physics import ThreadedDmcPhysics

    n = 4
    ref = load(suite, "cheetah-run", n)
    envs = load(suite, "cheetah-run", n)
    physics = ThreadedDmcPhysics(envs, threads)
    try:
        for e in ref + envs:
            e.reset()
        spec = ref[0].action_spec()
        actions = np.random.default_rng(0).uniform(spec.minimum, spec.maximum, (n,) + spec.shape)
        for k in (1, 2):
            diverge(ref[k])
            diverge(envs[k])
        want, messages = [], []
        for e, a in zip(ref, actions):
            try:
                want.append(e.step(a))
            except PhysicsError as exc:
                want.append(None)
                messages.append(str(exc))
        with pytest.raises(PhysicsError) as info:
            physics.step(actions)
        exc = info.value
        assert str(exc) == messages[0] and "BADQPOS" in str(exc)
        assert exc.failed == [1, 2]
        assert any("environment 1's physics" in note for note in exc.__notes__)
        assert_timesteps_equal(want, exc.timesteps, "the step that raised")
        assert_envs_equal(ref, envs, "after the PhysicsError")
        # The next step goes on from there for every env, as each env's own step() does
        want = [e.step(a) for e, a in zip(ref, actions)]
        assert_timesteps_equal(want, physics.step(actions), "the step after")
        assert_envs_equal(ref, envs, "the step after")

        # Inside suppress_physics_errors(): logged, not raised, by dm_control's own check (both sides)
        diverge(ref[3])
        diverge(envs[3])
        with ref[3].physics.suppress_physics_errors(), envs[3].physics.suppress_physics_errors():
            want = [e.step(a) for e, a in zip(ref, actions)]
            got = physics.step(actions)
        assert_timesteps_equal(want, got, "suppressed")
        assert_envs_equal(ref, envs, "suppressed")
    finally:
        physics.close()
        for e in ref + envs:
            e.close()


def test_errors_of_the_batch():
    suite_or_skip()
    from gltensor.mujoco import DmControlBatch

    with DmControlBatch("cartpole", "balance", 2, H, W, seed=0) as batch:
        batch.reset()
        with pytest.raises(ValueError, match="3 actions for 2 environments"):
            batch.step(np.zeros((3, 1)))
        with pytest.raises(ValueError):  # numpy's copyto into ctrl, as the env's own step() raises it
            batch.step(np.zeros((2, 5)))
        steps, _ = batch.step(np.zeros((2, 1)))  # still usable: nothing was stepped by the refused calls
        assert all(s.mid() for s in steps)
        assert all(e._step_count == 1 for e in batch.envs)


def test_part4_beside_the_render_for_suite_tasks_only_and_its_errors_in_your_thread():
    """Part 4 (after_step .. get_termination) runs in the finisher thread for dm_control.suite's tasks, beside the
    render; a task of your own (it may render in get_observation) keeps it in your thread, and a suite task that
    raises there raises from step() in yours, with its own type, the batch still usable."""
    import threading

    suite = suite_or_skip()
    from dm_control.suite import cartpole

    from gltensor.mujoco import DmControlBatch

    threads_seen = []

    class MyBalance(cartpole.Balance):  # defined here, not in dm_control.suite
        def get_observation(self, physics):
            threads_seen.append(threading.current_thread())
            return super().get_observation(physics)

    base = load(suite, "cartpole-balance", 2)
    mine = [type(e)(e.physics, MyBalance(swing_up=False, sparse=False, random=k)) for k, e in enumerate(base)]
    with DmControlBatch.from_envs(mine, H, W) as batch:
        assert batch.physics_path == "batched" and not batch._threaded.finish_in_thread
        batch.reset()
        threads_seen.clear()
        batch.step(np.zeros((2, 1)))
        assert threads_seen == [threading.current_thread()] * 2
    with DmControlBatch("cartpole", "balance", 3, H, W, seed=0) as batch:
        assert batch._threaded.finish_in_thread
        batch.reset()
        task = batch.envs[1]._task

        def seen(physics, _orig=task.get_observation):
            threads_seen.append(threading.current_thread().name)
            return _orig(physics)

        task.get_observation = seen
        threads_seen.clear()
        batch.step(np.zeros((3, 1)))  # drawn meanwhile: the finisher thread
        batch._threaded.step(np.zeros((3, 1)))  # nothing drawn: your thread
        assert threads_seen[0].startswith("gltensor-dmc-finish") and threads_seen[1] == threading.current_thread().name
        del task.get_observation
        calls = {"n": 0}

        def broken(physics, _orig=task.get_reward):
            calls["n"] += 1
            if calls["n"] == 1:
                raise KeyError("a task's own bug")
            return _orig(physics)

        task.get_reward = broken
        with pytest.raises(KeyError, match="a task's own bug"):
            batch.step(np.zeros((3, 1)))
        assert not batch._threaded._in_flight  # waited for: no thread touches an env
        steps, pixels = batch.step(np.zeros((3, 1)))  # usable again
        assert [s.step_type.name for s in steps] == ["MID"] * 3 and tuple(pixels.shape) == (3, H, W, 3)


def test_close_with_physics_in_flight():
    """Closing while the threads step (a step's job started, not waited for): close() waits for them before the
    envs are freed, and the batch refuses to step afterwards."""
    suite_or_skip()
    from gltensor.mujoco import DmControlBatch

    batch = DmControlBatch("walker", "walk", 4, H, W, seed=0, threads=2)
    batch.reset()
    spec = batch.action_spec
    job = batch._threaded.start(np.zeros((4,) + spec.shape))
    batch.close()
    assert batch._threaded.closed
    job.wait()  # nothing left to wait for
    with pytest.raises(RuntimeError, match="closed"):
        batch.step(np.zeros((4,) + spec.shape))
    batch.close()


def test_bench_dmc_quick(tmp_path):
    """python -m gltensor.bench dmc --quick: every path timed after the check (TimeSteps and pixels equal)."""
    suite_or_skip()
    from test_bench_modes import run_mode

    proc, report = run_mode(tmp_path, "dmc", "--quick", "--threads", "2")
    assert report["benchmark"] == "dmc" and report["status"] == "ok"
    got = {r["path"]: r for r in report["results"]}
    assert set(got) == {"per-env", "threaded", "physics", "batch", "batch-per-env", "batch-auto"}
    assert got["batch-auto"]["physics_path"] in ("batched", "per-env")
    # both of its trials ended before the timing (in the check and the steps after it)
    assert "measured again on steps 229-248" in got["batch-auto"]["physics_path_reason"]
    assert "vs_batch_per_env_paired" in got["batch-auto"]
    assert all(r["env_steps_per_s"] > 0 and r["n"] == 2 for r in got.values())
    assert got["threaded"]["threads"] == 2 and "vs_per_env" in got["threaded"]
    assert "vs_batch_per_env" in got["batch"]
    assert "dm_control cheetah-run: env-steps/s" in proc.stdout


@pytest.mark.parametrize("second", ["per-env", "batched"])
def test_auto_keeps_the_path_measured_faster_and_measures_it_once_more(second, lag):
    """physics='auto' keeps the path whose steps were faster, measures the two again after again_after steps on it
    (here 3), and keeps that second choice for good. The batched path's steps are timed a second longer in the first
    trial (the `lag` fixture), so the per-env path is kept (the C threads stay, for the second trial); in the second
    trial the slowed path is the batched one again (per-env final: the C threads closed) or the per-env one (batched
    final: the same C threads step on). Every step, across both switches and the episode ends, equals each env's own step() and
    physics.render()."""
    suite = suite_or_skip()
    from gltensor.mujoco import DmControlBatch

    n = 2
    with DmControlBatch("cartpole", "swingup", n, H, W, seed=1, threads=2,
                        task_kwargs={"time_limit": 0.3}) as batch:  # 30-step episodes: ends in both trials
        ref = load(suite, "cartpole-swingup", n, seed=1, task_kwargs={"time_limit": 0.3})
        trial = batch.physics_trial
        assert trial.again_after == 200 and "then once more after 200 steps" in batch.physics_path_reason
        trial.again_after = 3
        slow = {"path": "batched"}
        step_batched, step_per_env = batch._step_batched, batch._step_per_env

        def slowed(path, step):
            def run(actions):
                if slow["path"] == path:
                    lag()
                return step(actions)
            return run
        batch._step_batched = slowed("batched", step_batched)
        batch._step_per_env = slowed("per-env", step_per_env)
        threaded = batch._threaded
        batch.reset()
        for e in ref:
            e.reset()
        rng = np.random.default_rng(0)
        taken, paths, kinds = [], [], []
        for t in range(24 + 3 + 24 + 4):
            if t == 24 + 3:
                slow["path"] = "batched" if second == "per-env" else "per-env"
            taken.append(trial.next_path())
            actions = rng.uniform(-1, 1, (n, 1))
            got, pixels = batch.step(actions)
            paths.append(batch.physics_path)
            want = [e.step(a) for e, a in zip(ref, actions)]
            assert_timesteps_equal(want, got, f"step {t}")
            np.testing.assert_array_equal(np.stack([e.physics.render(H, W, camera_id=0) for e in ref]),
                                          pixels.cpu().numpy(), err_msg=f"step {t}")
            if t == 23:
                assert batch.physics_path == "per-env" and trial.decided and not trial.settled
                assert batch._threaded is threaded and not threaded.closed and batch.threads == 1
                assert batch.physics_path_reason.endswith("per-env kept; measured again after 3 steps")
            kinds.append(want[0].step_type.name)
        assert kinds.count("LAST") == 1 and kinds[kinds.index("LAST") + 1] == "FIRST"  # an episode ended in between
        assert taken[:4] == ["batched", "per-env", "batched", "per-env"] and taken[24:27] == ["per-env"] * 3
        assert taken[27:31] == ["batched", "per-env", "batched", "per-env"] and taken[-4:] == [second] * 4
        assert paths[24:27] == ["per-env"] * 3 and paths[-4:] == [second] * 4
        assert trial.settled and [r[:2] for r in trial.rounds] == [(5, 24), (32, 51)]
        assert "per-env kept; measured again on steps 32-51" in batch.physics_path_reason
        assert batch.physics_path_reason.endswith(f"{second} kept") and f"physics={second}" in repr(batch)
        if second == "per-env":
            assert batch._threaded is None and threaded.closed and batch.threads == 1
        else:
            assert batch._threaded is threaded and not threaded.closed and batch.threads == 2
        for e in ref:
            e.close()


def test_path_trial_alternates_then_keeps_the_faster():
    from gltensor.mujoco._path_trial import PathTrial

    trial = PathTrial("a", "b", warmup=1, pairs=2)
    assert trial.length == 6 and not trial.decided
    order = []
    for seconds in (9.0, 9.0, 3.0, 2.0, 3.0, 2.0):
        order.append(trial.next_path())
        trial.record(order[-1], seconds)
    assert order == ["a", "b", "a", "b", "a", "b"] and trial.choice == "b" and trial.next_path() == "b"
    assert trial.times == {"a": [3.0, 3.0], "b": [2.0, 2.0]}  # the warm-up pair is not counted
    assert "b kept" in trial.summary() and "steps 3-6" in trial.summary()
    trial.record("b", 100.0)  # after the choice: ignored
    assert trial.choice == "b"
    tie = PathTrial("a", "b", warmup=0, pairs=1)
    tie.record("a", 1.0)
    with pytest.raises(ValueError, match="'b' was due"):
        tie.record("a", 1.0)
    tie.record("b", 1.0)
    assert tie.choice == "a"  # a tie keeps the first
    with pytest.raises(ValueError, match="pairs"):
        PathTrial("a", "b", pairs=0)


def test_path_trial_runs_once_more_after_again_after_steps_and_then_keeps_its_choice():
    from gltensor.mujoco._path_trial import PathTrial

    trial = PathTrial("a", "b", warmup=1, pairs=2, again_after=3)
    for seconds in (9.0, 9.0, 3.0, 2.0, 3.0, 2.0):  # the first trial: b is faster
        trial.record(trial.next_path(), seconds)
    assert trial.choice == "b" and trial.decided and not trial.timing and not trial.settled
    assert trial.summary().endswith("b kept; measured again after 3 steps")
    ran = [trial.step(lambda path: path) for _ in range(3)]  # between the trials: the path kept, not timed
    assert ran == ["b", "b", "b"] and trial.timing and trial.times == {"a": [], "b": []}
    order = []
    for seconds in (1.0, 1.0, 1.0, 4.0, 1.0, 4.0):  # the second trial: a is faster
        order.append(trial.next_path())
        trial.record(order[-1], seconds)
    assert order == ["a", "b"] * 3 and trial.choice == "a" and trial.settled
    assert [r[:2] for r in trial.rounds] == [(3, 6), (12, 15)] and trial.rounds[1][3] == "a"
    assert "b kept; measured again on steps 12-15" in trial.summary() and trial.summary().endswith("a kept")
    trial.record("a", 100.0)  # settled: nothing changes
    assert trial.step(lambda path: path) == "a" and len(trial.rounds) == 2 and not trial.timing
    never = PathTrial("a", "b", warmup=0, pairs=1)  # again_after=0: the first choice is final
    never.record("a", 2.0)
    never.record("b", 1.0)
    assert never.settled and never.choice == "b" and "again" not in never.summary()
    with pytest.raises(ValueError, match="again_after"):
        PathTrial("a", "b", again_after=-1)
