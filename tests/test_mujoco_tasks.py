"""The batched task physics of MujocoVectorEnv (gltensor.mujoco._tasks, _physics) against Gymnasium's own
envs: for each of the eleven v5 MuJoCo tasks, in both autoreset modes, with seeds and random actions, the batch's
observations, rewards, terminations, truncations and infos (final_info and the final states included) equal a
SyncVectorEnv of the stock envs, bit for bit and dtype for dtype. Then the choice of path: which envs take the
batched path, which keep their own step(), and what is said about it.

GLTENSOR_TASK_STEPS sets the steps per task and mode (default 1000 where CUDA renders, 40 on a CPU-only machine,
20 under the sanitizers)."""

import os

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

pytest.importorskip("mujoco")
pytest.importorskip("torch")
gymnasium = pytest.importorskip("gymnasium")

from gymnasium.vector import AutoresetMode, SyncVectorEnv  # noqa: E402

from gltensor.mujoco._tasks import TASKS  # noqa: E402
from gltensor.mujoco import MujocoVectorEnv  # noqa: E402

if os.environ["MUJOCO_GL"].lower() != "egl":
    pytest.skip("these tests use MuJoCo's EGL renderer (MUJOCO_GL=egl)", allow_module_level=True)


def _default_steps():
    """1,000 steps a task and mode where the GPU renders (the GPU machine: tools/gpu_verify.sh tests); on a machine
    without one, Mesa's software rasteriser takes ~0.3 s a step for the batch's render (2-core CI machine), so 40
    there, with short episodes so that terminations, truncations and resets still come (20 under the sanitizers,
    whose point is gltensor's C: the stepper's threads)."""
    if os.environ.get("GLTENSOR_UNDER_SANITIZER"):
        return 20
    import gltensor
    return 1000 if gltensor.cuda_available() else 40


STEPS = int(os.environ.get("GLTENSOR_TASK_STEPS") or _default_steps())
MAX_STEPS = 60 if STEPS >= 200 else max(4, STEPS // 4)  # episodes that end within the run
N = 3
TILE = 8  # the pixels are tested elsewhere (test_mujoco_vector); these tests are about the physics

# Non-default constructor arguments of each task (weights, ranges, flags, frame_skip, noise): the batched task
# must read each one from the env, not assume Gymnasium's defaults.
VARIANTS = {
    "Ant-v5": dict(exclude_current_positions_from_observation=False, include_cfrc_ext_in_observation=False,
                   ctrl_cost_weight=0.3, contact_cost_weight=1e-3, contact_force_range=(-0.5, 0.5),
                   main_body="torso", healthy_z_range=(0.35, 0.9), healthy_reward=2.0, reset_noise_scale=0.2),
    "HalfCheetah-v5": dict(forward_reward_weight=2.0, ctrl_cost_weight=0.2, frame_skip=3, reset_noise_scale=0.3,
                           exclude_current_positions_from_observation=False),
    "Hopper-v5": dict(terminate_when_unhealthy=False, healthy_state_range=(-50.0, 50.0),
                      healthy_angle_range=(-0.1, 0.1), exclude_current_positions_from_observation=False,
                      healthy_reward=0.5),
    "Humanoid-v5": dict(include_cinert_in_observation=False, include_cvel_in_observation=False,
                        include_qfrc_actuator_in_observation=False, contact_cost_weight=1e-6,
                        contact_cost_range=(-1.0, 0.5), healthy_z_range=(1.1, 2.0), forward_reward_weight=2.0),
    "HumanoidStandup-v5": dict(impact_cost_weight=1e-5, impact_cost_range=(-1.0, 0.1), ctrl_cost_weight=0.2,
                               include_cfrc_ext_in_observation=False, exclude_current_positions_from_observation=False),
    "InvertedDoublePendulum-v5": dict(healthy_reward=5.0, reset_noise_scale=0.2),
    "InvertedPendulum-v5": dict(reset_noise_scale=0.1, frame_skip=3),
    "Pusher-v5": dict(reward_near_weight=1.0, reward_dist_weight=0.5, reward_control_weight=0.2),
    "Reacher-v5": dict(reward_dist_weight=2.0, reward_control_weight=0.5),
    "Swimmer-v5": dict(exclude_current_positions_from_observation=False, ctrl_cost_weight=1e-3,
                       forward_reward_weight=0.5),
    "Walker2d-v5": dict(healthy_z_range=(0.9, 2.0), terminate_when_unhealthy=False, frame_skip=2,
                        healthy_angle_range=(-0.5, 0.5)),
}


def bits(x):
    a = np.ascontiguousarray(np.asarray(x))
    return a.dtype.str, a.shape, a.tobytes() if a.dtype != object else repr(a.tolist())


def assert_same(want, got, what):
    """Equal bits and dtypes; on a difference, name the field and its largest difference."""
    if bits(want) != bits(got):
        w, g = np.asarray(want), np.asarray(got)
        diff = ""
        if w.shape == g.shape and w.dtype.kind in "fi" and g.dtype.kind in "fi":
            diff = f", largest difference {np.max(np.abs(w.astype(np.float64) - g.astype(np.float64))):.3g}"
        raise AssertionError(f"{what}: stock {w.dtype}{w.shape} vs batched {g.dtype}{g.shape}{diff}")


def assert_infos_same(want, got, where):
    assert sorted(want) == sorted(got), f"{where}: info keys {sorted(want)} vs {sorted(got)}"
    for k in want:
        if k == "final_obs":  # one object per env (None where not finished): each finished env's state
            for i, (w, g) in enumerate(zip(want[k], got[k])):
                assert (w is None) == (g is None), f"{where}: final_obs[{i}]"
                if w is not None:
                    assert_same(w, g["state"], f"{where}: final_obs[{i}]")
        elif isinstance(want[k], dict):
            assert_infos_same(want[k], got[k], f"{where}.{k}")
        else:
            assert_same(want[k], got[k], f"{where}: info[{k!r}]")


def run_both(env_id, mode, steps, kwargs, seed, threads=None, max_steps=MAX_STEPS):
    make = lambda: gymnasium.make(env_id, max_episode_steps=max_steps, **kwargs)  # noqa: E731
    ref = SyncVectorEnv([make] * N, autoreset_mode=mode)
    env = MujocoVectorEnv([make] * N, height=TILE, width=TILE, autoreset_mode=mode, render_only=False,
                          threads=threads)
    try:
        assert env.physics_path == "batched", env.physics_path_reason
        o1, i1 = ref.reset(seed=seed)
        o2, i2 = env.reset(seed=seed)
        assert_same(o1, o2["state"], "reset obs")
        assert_infos_same(i1, i2, "reset")
        rng = np.random.default_rng(seed)
        low, high = ref.single_action_space.low, ref.single_action_space.high
        ends = 0
        for t in range(steps):
            a = rng.uniform(low, high, (N,) + low.shape).astype(ref.single_action_space.dtype)
            if t % 97 == 0:
                a[0] *= 3  # out of the action box: Gymnasium does not clip, neither may we
            want, got = ref.step(a), env.step(a)
            where = f"{env_id} {mode.name} step {t}"
            assert_same(want[0], got[0]["state"], where + ": obs")
            for k, name in ((1, "reward"), (2, "terminated"), (3, "truncated")):
                assert_same(want[k], got[k], f"{where}: {name}")
            assert_infos_same(want[4], got[4], where)
            ends += int(np.sum(want[2] | want[3]))
        return ends
    finally:
        env.close()
        ref.close()


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP], ids=lambda m: m.name)
@pytest.mark.parametrize("env_id", TASKS)
def test_task_equals_gymnasium(env_id, mode):
    ends = run_both(env_id, mode, STEPS, {}, seed=TASKS.index(env_id))
    assert ends > 0  # episodes end (time limit or termination) and the resets are compared too


@pytest.mark.parametrize("env_id", TASKS)
def test_task_reads_its_constructor_arguments(env_id):
    run_both(env_id, AutoresetMode.NEXT_STEP, max(20, STEPS // 5), VARIANTS[env_id], seed=100, threads=2,
             max_steps=min(25, MAX_STEPS))


def test_threads_do_not_change_results():
    outs = []
    for threads in (1, 3):
        env = MujocoVectorEnv("Hopper-v5", N, height=TILE, width=TILE, render_only=False, threads=threads)
        env.reset(seed=5)
        rng = np.random.default_rng(5)
        seq = []
        for _ in range(20):
            o, r, te, tr, _ = env.step(rng.uniform(-1, 1, (N, 3)).astype(np.float32))
            seq.append((o["state"].tobytes(), r.tobytes(), te.tobytes(), tr.tobytes()))
        env.close()
        outs.append(seq)
    assert outs[0] == outs[1]


@pytest.mark.parametrize("spin_us,active", [(0, 0), (200, 0), (100000, 0), (200, 1)])
def test_the_render_threads_spin_and_sleeping_threads_change_no_result(spin_us, active):
    """The stepper's render-thread spin (mjstep.c: next() watching for the next finished env before it sleeps) and
    threads left asleep (active=1 of 2: start() wakes only the job's threads) change only when and where an env is
    stepped: every observation, reward, termination and info equals SyncVectorEnv's, through episode ends."""
    make = lambda: gymnasium.make("Hopper-v5", max_episode_steps=15)  # noqa: E731
    ref = SyncVectorEnv([make] * N)
    env = MujocoVectorEnv([make] * N, height=TILE, width=TILE, render_only=False, threads=2, physics="batched")
    try:
        stepper = env._batched._runner._stepper
        env._batched._runner.active = active
        stepper.spin_us = spin_us
        assert stepper.spin_us == spin_us
        ref.reset(seed=9)
        env.reset(seed=9)
        rng = np.random.default_rng(9)
        for t in range(40):
            a = rng.uniform(-1, 1, (N, 3)).astype(np.float32)
            want, got = ref.step(a), env.step(a)
            assert_same(want[0], got[0]["state"], f"step {t}: obs")
            for k in (1, 2, 3):
                assert_same(want[k], got[k], f"step {t}: field {k}")
            assert_infos_same(want[4], got[4], f"step {t}")
    finally:
        env.close()
        ref.close()


def test_an_error_in_the_tasks_numpy_leaves_no_thread_working_and_the_callers_context_current():
    """If the task's results (BatchedPhysics.finish) raise, step() raises that error with no physics thread still
    touching an env and the caller's GL context current again, and the next step works."""
    import ctypes
    import time

    from OpenGL import EGL

    def current():
        return ctypes.cast(EGL.eglGetCurrentContext(), ctypes.c_void_p).value

    env = MujocoVectorEnv("Hopper-v5", N, height=TILE, width=TILE, render_only=False, threads=2, physics="batched")
    try:
        env.reset(seed=3)
        ctx = current()
        ph = env._batched
        finish = ph.finish

        def broken(*args):
            raise ZeroDivisionError("the task's results failed")
        ph.finish = broken
        with pytest.raises(ZeroDivisionError, match="task's results failed"):
            env.step(np.ones((N, 3), np.float32))
        assert current() == ctx, "the caller's GL context must be current again"
        states = [d.qpos.copy() for d in ph.datas]
        time.sleep(0.2)  # time for a physics thread still at work to move an env
        for i, (d, q) in enumerate(zip(ph.datas, states)):
            np.testing.assert_array_equal(d.qpos, q, err_msg=f"env {i} moved after step() raised")
        ph.finish = finish
        obs, reward, _, _, _ = env.step(np.ones((N, 3), np.float32))
        assert obs["pixels"].shape == (N, TILE, TILE, 3) and reward.shape == (N,)
    finally:
        env.close()


def test_stepper_knob_arguments():
    env = MujocoVectorEnv("Hopper-v5", 2, height=TILE, width=TILE, render_only=False, physics="batched")
    try:
        stepper = env._batched._runner._stepper
        before = stepper.spin_us
        for bad in (-1, 100001, "200"):
            with pytest.raises((ValueError, TypeError), match="spin_us"):
                stepper.spin_us = bad
        with pytest.raises(AttributeError, match="cannot be deleted"):
            del stepper.spin_us
        assert stepper.spin_us == before
    finally:
        env.close()


def test_the_render_thread_spins_only_where_two_cores_are_left_beside_the_jobs_threads(monkeypatch):
    """The spin costs a core while the render thread waits: with 4 threads it is on from 6 usable cores, off at 5,
    and it follows the threads that take part (use_threads)."""
    from gltensor.mujoco import _physics

    env = MujocoVectorEnv("Hopper-v5", 4, height=TILE, width=TILE, render_only=False, threads=4, physics="batched")
    try:
        ph, stepper = env._batched, env._batched._runner._stepper
        monkeypatch.setattr(_physics, "usable_cores", lambda: 6)
        ph.use_threads(4)
        assert stepper.spin_us == _physics.RENDER_SPIN_US > 0
        monkeypatch.setattr(_physics, "usable_cores", lambda: 5)
        ph.use_threads(4)
        assert stepper.spin_us == 0
        ph.use_threads(3)
        assert stepper.spin_us == _physics.RENDER_SPIN_US
        monkeypatch.setattr(_physics, "usable_cores", lambda: 2)
        ph.use_threads(1)
        assert stepper.spin_us == 0
    finally:
        env.close()


def test_gather_in_the_threads_sees_edits_and_never_reuses_a_block():
    """The C threads copy what the task reads just before and after each env's step (mjstep.c's gather): an edit
    of an env's data between steps is seen as Gymnasium's own step sees it, and arrays a step returned keep their
    values through later steps (each step's blocks are fresh)."""
    make = lambda: gymnasium.make("Ant-v5", max_episode_steps=50)  # noqa: E731  (xpos, cfrc_ext: four fields)
    ref = SyncVectorEnv([make] * N)
    env = MujocoVectorEnv([make] * N, height=TILE, width=TILE, render_only=False)
    try:
        assert env._batched.stepper == "C threads" and env._batched._runner.gathers
        ref.reset(seed=3)
        env.reset(seed=3)
        rng = np.random.default_rng(3)
        kept = []
        for t in range(12):
            if t in (4, 9):  # the user moves env 1 between steps: the next step must start from there
                for e in (ref.envs[1].unwrapped, env.unwrapped_envs[1]):
                    e.data.qpos[0] += 0.25
                    e.data.qvel[:3] = 0.5
            a = rng.uniform(-1, 1, (N, 8)).astype(np.float32)
            want, got = ref.step(a), env.step(a)
            assert_same(want[0], got[0]["state"], f"step {t}: obs")
            assert_same(want[1], got[1], f"step {t}: reward")
            assert_infos_same(want[4], got[4], f"step {t}")
            kept.append((got[0]["state"], got[1], got[4]["x_position"],
                         got[0]["state"].copy(), got[1].copy(), got[4]["x_position"].copy()))
        for t, (obs, reward, x, obs0, reward0, x0) in enumerate(kept):
            assert np.array_equal(obs, obs0) and np.array_equal(reward, reward0) and np.array_equal(x, x0), t
    finally:
        env.close()
        ref.close()


def test_stepper_gather_arguments():
    from gltensor import _gltensor

    env = MujocoVectorEnv("Hopper-v5", 2, height=TILE, width=TILE, render_only=False)
    try:
        ph = env._batched
        from gltensor.mujoco._physics import mujoco_functions
        import mujoco

        fns = mujoco_functions(mujoco)
        st = _gltensor._MujocoStepper(fns[0], fns[1], [m._address for m in ph.models],
                                      [d._address for d in ph.datas], [c.ctypes.data for c in ph._ctrl], ph.nu, 1, 1)
        acts = np.zeros((2, ph.nu))
        mask = np.ones(2, np.uint8)
        block = np.empty(64)
        with pytest.raises(ValueError, match="set_gather"):
            st.start(acts.ctypes.data, mask.ctypes.data, 0, block.ctypes.data, 0)
        with pytest.raises(ValueError, match="1 fields .* need 2 sources, not 1"):
            st.set_gather([ph.datas[0].qpos.ctypes.data], [8])
        with pytest.raises(ValueError, match="size 0"):
            st.set_gather([ph.datas[0].qpos.ctypes.data, ph.datas[1].qpos.ctypes.data], [0])
        with pytest.raises(ValueError, match="null"):
            st.set_gather([ph.datas[0].qpos.ctypes.data, 0], [8])
        assert st.set_gather([d.qpos.ctypes.data for d in ph.datas], [ph.datas[0].qpos.nbytes]) == ph.datas[0].qpos.nbytes
        before, after = np.full((2, ph.datas[0].qpos.size), np.nan), np.full((2, ph.datas[0].qpos.size), np.nan)
        q0 = np.stack([d.qpos.copy() for d in ph.datas])
        st.start(acts.ctypes.data, mask.ctypes.data, 0, before.ctypes.data, after.ctypes.data)
        with pytest.raises(RuntimeError, match="a job is running"):
            st.set_gather([d.qpos.ctypes.data for d in ph.datas], [8])
        while st.next() is not None:
            pass
        st.wait()
        assert np.array_equal(before, q0)
        assert np.array_equal(after, np.stack([d.qpos for d in ph.datas])) and not np.array_equal(after, q0)
        st.close()
        st2 = _gltensor._MujocoStepper(fns[0], fns[1], [m._address for m in ph.models],
                                       [d._address for d in ph.datas], [c.ctypes.data for c in ph._ctrl], ph.nu, 1, 2)
        for bad in (-1, 3):
            with pytest.raises(ValueError, match=f"active={bad} threads, but this stepper has 2"):
                st2.start(acts.ctypes.data, mask.ctypes.data, 0, 0, 0, bad)
        st2.start(acts.ctypes.data, mask.ctypes.data, 0, 0, 0, 1)  # one of the two threads steps both envs
        assert sorted(iter(st2.next, None)) == [0, 1]
        st2.wait()
        st2.close()
        with pytest.raises(ValueError, match="1 to 2"):
            ph.use_threads(3)
    finally:
        env.close()


def test_auto_measures_its_ways_of_stepping_and_changes_no_result(monkeypatch):
    """physics='auto' on a 16-core host: the batched path with all of its threads (8 for 8 envs), with a quarter (2),
    with all of them but drawn after the physics, and the per-env path take turns over the first 48 steps, the
    fastest kept (physics_trial). Every way gives the same results, in both autoreset modes and across episode ends
    and resets inside the trial: each step equals Gymnasium's own SyncVectorEnv."""
    import gltensor.mujoco._physics as physics

    monkeypatch.setattr(physics.os, "sched_getaffinity", lambda pid: set(range(16)))  # a 16-core host
    n = 8
    for mode in (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP):
        make = lambda: gymnasium.make("Hopper-v5", max_episode_steps=7)  # noqa: E731  (episode ends in the trial)
        ref = SyncVectorEnv([make] * n, autoreset_mode=mode)
        env = MujocoVectorEnv([make] * n, height=TILE, width=TILE, render_only=False, autoreset_mode=mode)
        try:
            assert env.threads == 8 and env.physics_path == "batched"
            assert list(env._trial_paths) == ["batched, 8 threads", "batched, 2 threads",
                                              "batched, 8 threads, stepped then drawn", "per-env"]
            assert "over the first 48 steps" in env.physics_path_reason
            taken, drawn = [], []
            use_threads = env._batched.use_threads
            env._batched.use_threads = lambda k: (taken.append(k), use_threads(k))[1]
            render = env._render  # order given: drawn as the physics finishes; None: after it
            env._render = lambda order=None: (drawn.append(order is not None), render(order=order))[1]
            want, got = ref.reset(seed=5), env.reset(seed=5)
            assert_same(want[0], got[0]["state"], "reset")
            rng = np.random.default_rng(5)
            for t in range(52):
                a = rng.uniform(-1, 1, (n, 3))
                want, got = ref.step(a), env.step(a)
                assert_same(want[0], got[0]["state"], f"{mode} step {t}: obs")
                for k, what in ((1, "reward"), (2, "terminated"), (3, "truncated")):
                    assert_same(want[k], got[k], f"{mode} step {t}: {what}")
                assert_infos_same(want[4], got[4], f"{mode} step {t}")
            trial = env.physics_trial
            assert trial.decided and [len(v) for v in trial.times.values()] == [10, 10, 10, 10]
            assert taken[:6] == [8, 2, 8, 8, 2, 8]
            if mode == AutoresetMode.NEXT_STEP:  # (SAME_STEP draws the reset envs' first frames once more)
                assert drawn[1:5] == [True, True, False, True]  # after reset(): the four ways in turn
            kept = {"batched, 8 threads": ("batched", 8), "batched, 2 threads": ("batched", 2),
                    "batched, 8 threads, stepped then drawn": ("batched", 8), "per-env": ("per-env", 1)}
            assert (env.physics_path, env.threads) == kept[trial.choice]
            assert env._overlap == (trial.choice != "batched, 8 threads, stepped then drawn")
            assert f"{trial.choice} kept" in env.physics_path_reason and f"physics={env.physics_path}" in repr(env)
        finally:
            env.close()
            ref.close()


def test_auto_keeps_the_per_env_path_when_it_measured_faster(lag):
    """With the batched path's steps timed a second longer (the `lag` fixture), the per-env path is kept; the steps
    after the switch still equal SyncVectorEnv's, and the batch closes cleanly."""
    make = lambda: gymnasium.make("HalfCheetah-v5", max_episode_steps=9)  # noqa: E731
    ref = SyncVectorEnv([make] * N)
    env = MujocoVectorEnv([make] * N, height=TILE, width=TILE, render_only=False, threads=2)
    try:
        # threads given: no thread-count trial
        assert list(env._trial_paths) == ["batched, 2 threads", "batched, 2 threads, stepped then drawn", "per-env"]
        slow = env._step_batched
        env._step_batched = lambda a: (lag(), slow(a))[1]
        want, got = ref.reset(seed=2), env.reset(seed=2)
        rng = np.random.default_rng(2)
        for t in range(40):
            a = rng.uniform(-1, 1, (N, 6))
            want, got = ref.step(a), env.step(a)
            assert_same(want[0], got[0]["state"], f"step {t}: obs")
            assert_same(want[1], got[1], f"step {t}: reward")
            assert_same(want[3], got[3], f"step {t}: truncated")
        assert env.physics_path == "per-env" and env.threads == 1 and "per-env kept" in env.physics_path_reason
        assert "physics=per-env" in repr(env) and not env.physics_trial.settled  # the trial runs once more later
        assert env._per_env_pool is not None and env._pool is not env._per_env_pool
    finally:
        env.close()
        ref.close()
    with pytest.raises(ValueError, match="two or more distinct paths"):
        __import__("gltensor.mujoco._path_trial", fromlist=["PathTrial"]).PathTrial("a")


def test_auto_measures_once_more_after_warming_up_and_that_choice_is_final(lag):
    """physics='auto' runs its trial again after TRIAL_AGAIN_AFTER steps on the way first kept (here 3), and keeps
    that second choice for good. Made to differ: the batched ways timed a second longer a step in the first trial
    (the `lag` fixture: the per-env path is kept), the per-env path in the second (a batched way is kept). Every step
    equals SyncVectorEnv's, across both switches and episode ends (the batched path takes the per-env steps' episode counts
    back from the envs' TimeLimit wrappers), and once final, the per-env path's threads are closed."""
    make = lambda: gymnasium.make("Hopper-v5", max_episode_steps=11)  # noqa: E731  (episodes end in both trials)
    ref = SyncVectorEnv([make] * N)
    env = MujocoVectorEnv([make] * N, height=TILE, width=TILE, render_only=False, threads=2)
    try:
        trial = env.physics_trial
        assert trial.again_after == 200 and "then once more after 200 steps" in env.physics_path_reason
        trial.again_after = 3
        slow = {"batched": True}
        batched, per_env = env._step_batched, env._step_per_env
        env._step_batched = lambda a: (slow["batched"] and lag(), batched(a))[1]
        env._step_per_env = lambda a, pool: (not slow["batched"] and lag(), per_env(a, pool))[1]
        per_env_pool = env._per_env_pool
        want, got = ref.reset(seed=4), env.reset(seed=4)
        rng = np.random.default_rng(4)
        paths = []
        for t in range(36 + 3 + 36 + 5):
            if t == 36 + 3:
                slow["batched"] = False
            a = rng.uniform(-1, 1, (N, 3))
            want, got = ref.step(a), env.step(a)
            paths.append(env.physics_path)
            assert_same(want[0], got[0]["state"], f"step {t}: obs")
            for k, what in ((1, "reward"), (2, "terminated"), (3, "truncated")):
                assert_same(want[k], got[k], f"step {t}: {what}")
            assert_infos_same(want[4], got[4], f"step {t}")
            if t == 35:
                assert env.physics_path == "per-env" and trial.decided and not trial.settled
                assert "per-env kept; measured again after 3 steps" in env.physics_path_reason
        assert paths[36:39] == ["per-env"] * 3  # between the trials: the way kept
        assert trial.settled and len(trial.rounds) == 2 and trial.choice != "per-env"
        assert [r[:2] for r in trial.rounds] == [(7, 36), (46, 75)]  # each trial's timed steps (1 warm-up turn of 3)
        assert env.physics_path == "batched" and env.threads == 2
        assert per_env_pool._ex is None and env._per_env_pool is None  # the per-env path's threads closed
        assert "per-env kept; measured again on steps 46-75" in env.physics_path_reason
        assert env.physics_path_reason.endswith(f"{trial.choice} kept")
        for t in range(5):  # settled: no more trials
            a = rng.uniform(-1, 1, (N, 3))
            want, got = ref.step(a), env.step(a)
            assert_same(want[0], got[0]["state"], f"after: step {t}")
        assert len(trial.rounds) == 2
    finally:
        env.close()
        ref.close()


def test_which_path_and_why():
    from gymnasium.envs.mujoco.hopper_v5 import HopperEnv
    from gymnasium.wrappers import AddRenderObservation, ClipAction

    env = MujocoVectorEnv("Walker2d-v5", 2, height=TILE, width=TILE)
    assert env.physics_path == "batched" and "Walker2d" in env.physics_path_reason
    assert "physics=batched" in repr(env)
    env.close()

    class MyHopper(HopperEnv):  # a subclass may change step(): its own step() runs
        pass

    env = MujocoVectorEnv([lambda: MyHopper()] * 2, height=TILE, width=TILE)
    assert env.physics_path == "per-env" and "MyHopper" in env.physics_path_reason and "physics=per-env" in repr(env)
    env.close()
    env = MujocoVectorEnv([lambda: ClipAction(gymnasium.make("Hopper-v5"))] * 2, height=TILE, width=TILE)
    assert env.physics_path == "per-env" and "ClipAction" in env.physics_path_reason
    env.close()
    env = MujocoVectorEnv([lambda: gymnasium.make("Hopper-v5"), lambda: gymnasium.make("Hopper-v5", frame_skip=2)],
                          height=TILE, width=TILE)
    assert env.physics_path == "per-env" and "frame_skip" in env.physics_path_reason
    env.close()
    env = MujocoVectorEnv("Hopper-v5", 2, height=TILE, width=TILE, physics="per-env")
    assert env.physics_path == "per-env"
    env.close()
    with pytest.raises(ValueError, match="ClipAction"):
        MujocoVectorEnv([lambda: ClipAction(gymnasium.make("Hopper-v5"))] * 2, height=TILE, width=TILE,
                        physics="batched")
    with pytest.raises(ValueError, match="physics must be"):
        MujocoVectorEnv("Hopper-v5", 2, height=TILE, width=TILE, physics="fast")
    # an env that renders in its own step() keeps its own step()
    env = MujocoVectorEnv([lambda: AddRenderObservation(gymnasium.make("Hopper-v5", render_mode="rgb_array",
                                                                         width=TILE, height=TILE))] * 2,
                          height=TILE, width=TILE)
    assert env.physics_path == "per-env" and "AddRenderObservation" in env.physics_path_reason
    env.close()


def test_errors_and_wrapper_state():
    env = MujocoVectorEnv("HalfCheetah-v5", 2, height=TILE, width=TILE, max_episode_steps=5)
    try:
        with pytest.raises(gymnasium.error.ResetNeeded, match="reset"):
            env.step(np.zeros((2, 6), np.float32))
        env.reset(seed=0)
        with pytest.raises(ValueError, match=r"shape \(2, 5\).*\(2, 6\)"):
            env.step(np.zeros((2, 5), np.float32))
        import torch
        env.step(torch.zeros(2, 6))  # a torch tensor is accepted (copied to the host once)
        assert env.get_attr("_elapsed_steps") == (1, 1)  # TimeLimit's own count follows the batched steps
        for _ in range(4):
            _, _, _, trunc, _ = env.step(np.zeros((2, 6), np.float32))
        assert trunc.all()
    finally:
        env.close()
    env = MujocoVectorEnv("Hopper-v5", 2, height=TILE, width=TILE, autoreset_mode=AutoresetMode.DISABLED)
    try:
        env.reset(seed=0)
        done = np.zeros(2, bool)
        while not done.any():
            _, _, te, tr, _ = env.step(np.ones((2, 3), np.float32))
            done = te | tr
        with pytest.raises(RuntimeError, match="DISABLED"):
            env.step(np.ones((2, 3), np.float32))
        env.reset(options={"reset_mask": done})
        env.step(np.ones((2, 3), np.float32))
    finally:
        env.close()
