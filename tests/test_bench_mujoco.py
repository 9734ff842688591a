"""`python -m gltensor.bench mujoco --quick` runs end to end on the CPU backend (the GPU machine runs it fully:
tools/gpu_verify.sh mujoco): every path measured or skipped with a reason, the new paths checked against the
stock ones before they are timed, JSON and plot written where --out says, the table printed."""
import importlib.util
import json
import os
import subprocess
import sys

import pytest

# Looked up, not imported: the benchmark runs in a subprocess, and importing MuJoCo here would fix this process's
# GL backend before the MuJoCo tests choose EGL.
_MISSING = [m for m in ("mujoco", "torch", "gymnasium", "dm_control") if importlib.util.find_spec(m) is None]
pytestmark = pytest.mark.skipif(bool(_MISSING), reason=f"needs {', '.join(_MISSING)}")


def test_bench_mujoco_quick(tmp_path):
    env = dict(os.environ, MUJOCO_GL="egl")
    proc = subprocess.run([sys.executable, "-m", "gltensor.bench", "mujoco", "--quick", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=400, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (js,) = tmp_path.glob("mujoco_*.json")
    report = json.loads(js.read_text())
    assert report["status"] == "ok" and report["config"]["envs"] == [2]
    got = {(r["task"], r["path"]) for r in report["results"] if r.get("env_steps_per_s", 0) > 0}
    gym = {("HalfCheetah-v5", p) for p in ("async", "sync", "slots", "batch", "batch-per-env", "physics", "rollout",
                                           "render", "render+read", "pixels")}
    assert got == gym | {("cheetah-run", "dm-stock"), ("cheetah-run", "dm-batch")}
    batch = [r for r in report["results"] if r["path"] == "batch"][0]
    # Gymnasium's own HalfCheetah-v5: the batched physics, beside both floors
    # its way of stepping measured in the check (physics='auto'): the batched path or, where faster, the per-env one
    assert batch["physics_path"] in ("batched", "per-env") and "kept" in batch["physics_path_reason"]
    assert batch["threads"] >= 1 and batch["vs_stock"] > 0
    assert batch["vs_floor"] > 0 and batch["vs_floor_read"] > 0
    # the blocks after the rounds: the batch, its pixel floor and AsyncVectorEnv took turns
    assert batch["alternating_stock"] == "async" and batch["vs_stock_alternating"] > 0
    assert set(batch["alternating_env_steps_per_s"]) == {"batch", "pixels", "async"}
    assert js.with_suffix(".png").stat().st_size > 10_000
    assert "env-steps/s" in proc.stdout and str(js) in proc.stdout


def test_ratios_pair_the_rounds(monkeypatch):
    """The paired ratios divide paths timed in the same round: a host that is twice as fast in round 2 moves both
    sides of round 2's ratio, and a ratio of medians would mix rounds."""
    monkeypatch.setenv("MUJOCO_GL", "egl")  # the module sets it by default; this test leaves the process as it was
    from gltensor.bench.measure import paired_ratio
    from gltensor.bench.mujoco import ratios

    def row(path, rounds):
        return {"task": "T", "visuals": "light", "n": 64, "path": path, "rounds_env_steps_per_s": rounds,
                "env_steps_per_s": sorted(rounds)[1]}
    results = [row("async", [1.0, 2.0, 1.0]), row("batch", [10.0, 30.0, 9.0]), row("batch-per-env", [5.0, 10.0, 6.0]),
               row("rollout", [100.0, 200.0, 100.0]), row("pixels", [10.0, 20.0, 9.0]),
               row("physics", [100.0, 200.0, 100.0]), row("render+read", [12.0, 24.0, 10.0])]
    batch = {r["path"]: r for r in ratios(results)}["batch"]
    assert batch["vs_floor"] == 10.0 / 10.0  # medians: pixels 10, batch 10
    assert batch["vs_floor_paired"] == sorted([10 / 10, 20 / 30, 9 / 9])[1]
    assert batch["vs_per_env_paired"] == sorted([10 / 5, 30 / 10, 9 / 6])[1]
    assert batch["vs_stock_paired"] == sorted([10.0, 15.0, 9.0])[1]
    assert paired_ratio([1.0], [1.0, 2.0]) is None and paired_ratio([], []) is None


def test_rounds_alternate_their_order_and_warm_up_for_a_time(monkeypatch):
    monkeypatch.setenv("MUJOCO_GL", "egl")
    from gltensor.bench.measure import round_order
    from gltensor.bench.mujoco import time_env_steps

    assert round_order(["a", "b", "c"], 0) == ["a", "b", "c"] and round_order(("a", "b", "c"), 1) == ["c", "b", "a"]
    calls, syncs = [], []
    rate = time_env_steps(calls.append, 4, 5, 2, lambda: syncs.append(len(calls)), warm_s=0.05)
    warm = len(calls) - 5
    assert warm >= 2 and calls == list(range(len(calls)))  # numbered on from the warm-up
    assert syncs[-2] == warm and syncs[-1] == len(calls) and rate > 0  # synced before and after the timed loop
    calls.clear()
    time_env_steps(calls.append, 1, 3, 4, lambda: None, warm_s=0)
    assert len(calls) == 7  # no time asked for: the warm-up's step count alone


def test_every_path_settles_once_before_the_rounds(monkeypatch):
    """--settle: each path takes that many untimed steps once, before the first round (a new batch's first
    hundred-odd steps ran slower than its later ones), then the rounds warm up and time as before."""
    import types

    monkeypatch.setenv("MUJOCO_GL", "egl")
    from gltensor.bench import mujoco as bm

    log = []

    class Case:
        paths, n = ["a", "b"], 4

        def check(self):
            log.append(("check",))

        def step_fn(self, p):
            return lambda k: log.append((p, k))

    monkeypatch.setattr(bm, "time_env_steps", lambda step, n, steps, warmup, sync: log.append(("timed",)) or 1.0)
    args = types.SimpleNamespace(settle=3, rounds=2, steps=5, warmup=1, alternate=4)
    case = Case()
    rates = bm.run_case(case, args, lambda: log.append(("sync",)), print)
    assert rates == {"a": [1.0, 1.0], "b": [1.0, 1.0]}
    assert log[:9] == [("check",), ("a", 0), ("a", 1), ("a", 2), ("sync",), ("b", 0), ("b", 1), ("b", 2), ("sync",)]
    assert log[9:] == [("timed",)] * 4
    assert case.alternating is None  # no batch and pixels among the paths: nothing to alternate


def test_the_batch_its_pixel_floor_and_the_stock_env_take_turns_in_blocks(monkeypatch):
    """--alternate: after the rounds, the batch, the pixel floor and the stock vector env are timed in turns of
    blocks, the order rotated by one each turn, each block after two untimed steps and between two syncs; the ratios
    reported are the medians of the turns' time ratios (the pixel floor's over the batch's time, the stock env's
    over the batch's: its speed-up)."""
    import types

    monkeypatch.setenv("MUJOCO_GL", "egl")
    from gltensor.bench import measure
    from gltensor.bench import mujoco as bm
    from gltensor.bench.measure import alternate_blocks

    log = []
    clock = [0.0]
    cost = {"batch": 3e-6, "pixels": 2e-6, "async": 12e-6}  # seconds per step on a fake clock

    def path(name):
        def step(k):
            log.append((name, k))
            clock[0] += cost[name]
        return step

    monkeypatch.setattr(measure.time, "perf_counter", lambda: clock[0])
    batch_us, pixels_us = alternate_blocks([path("batch"), path("pixels")], 3, 4, lambda: log.append("sync"))
    assert batch_us == pytest.approx([3.0] * 3) and pixels_us == pytest.approx([2.0] * 3)
    names = [e[0] for e in log if e != "sync"]
    assert names == ["batch"] * 6 + ["pixels"] * 12 + ["batch"] * 12 + ["pixels"] * 6  # turns AB, BA, AB
    assert [e[1] for e in log if e != "sync"] == list(range(36))  # the step index runs on across blocks
    assert log[:3] == [("batch", 0), ("batch", 1), "sync"] and log[7] == "sync"  # 2 untimed, sync, 4 timed, sync
    log.clear()
    times = alternate_blocks([path("batch"), path("pixels"), path("async")], 3, 1, lambda: None, warm=0)
    assert [e[0][0] for e in log] == list("bpa" "pab" "abp")  # the order rotated by one each turn
    assert times[2] == pytest.approx([12.0] * 3)
    for bad in (dict(fns=[path("batch")], turns=1), dict(fns=[path("batch"), path("pixels")], turns=0)):
        with pytest.raises(ValueError, match="two or more fns"):
            alternate_blocks(bad["fns"], bad["turns"], 4, lambda: None)

    class Case:
        n = 2

        def __init__(self, paths):
            self.paths = paths

        def check(self):
            pass

        def step_fn(self, p):
            return path(p)

    monkeypatch.setattr(bm, "time_env_steps", lambda step, n, steps, warmup, sync: 1.0)
    args = types.SimpleNamespace(settle=0, rounds=1, steps=1, warmup=0, alternate=2)
    for paths, sides in ((["async", "batch", "pixels"], {"batch", "pixels", "async"}), (["batch", "pixels"],
                                                                                         {"batch", "pixels"})):
        case = Case(paths)
        bm.run_case(case, args, lambda: None, print)
        alt = case.alternating
        assert alt["block_steps"] == bm.ALTERNATE_BLOCK
        assert {k[:-len("_us_per_step")] for k in alt if k != "block_steps"} == sides
        assert all(len(alt[s + "_us_per_step"]) == 2 for s in sides)
    rows = [{"task": "t", "visuals": "v", "n": 2, "path": p, "env_steps_per_s": 1.0, "rounds_env_steps_per_s": [1.0]}
            for p in ("batch", "pixels", "async")]
    rows[0]["alternating"] = {"batch_us_per_step": [3.0, 6.0, 3.3], "pixels_us_per_step": [2.0, 3.0, 3.0],
                              "async_us_per_step": [30.0, 30.0, 30.0]}
    bm.ratios(rows)
    assert rows[0]["vs_pixels_alternating"] == pytest.approx(1.5)  # median of 1.5, 2.0 and 1.1
    assert rows[0]["vs_stock_alternating"] == pytest.approx(30 / 3.3) and rows[0]["alternating_stock"] == "async"
    # each side's pace in its blocks: N = 2 envs over the median µs a step
    assert rows[0]["alternating_env_steps_per_s"] == pytest.approx({"batch": 2e6 / 3.3, "pixels": 2e6 / 3.0,
                                                                     "async": 2e6 / 30.0})


def test_the_trial_steps_with_the_forward(monkeypatch):
    """The batch's measured choice of path runs in check(), each trial step followed by the CNN forward on its
    pixels, as in the timed loop and in training (a trial of bare steps timed the ways without the GPU work that
    follows each step)."""
    import types

    monkeypatch.setenv("MUJOCO_GL", "egl")
    import torch

    from gltensor.bench import mujoco as bm

    class Trial:
        def __init__(self):
            self.steps = 0

        @property
        def settled(self):  # the trial's final choice (after its second run): the bench steps until then
            return self.steps >= 3

    class Batch:
        threads, physics_path, physics_path_reason = 2, "batched", "kept"

        def __init__(self):
            self.physics_trial = Trial()

        def reset(self, seed=None):
            return torch.zeros(2, 8, 8, 3, dtype=torch.uint8), {}

        def step(self, a):
            self.physics_trial.steps += 1
            return torch.full((2, 8, 8, 3), self.physics_trial.steps, dtype=torch.uint8), None, None, None, {}

    case = bm.GymCase.__new__(bm.GymCase)
    seen = []
    case.ref, case.torch, case.device = None, torch, torch.device("cpu")
    case.envs, case.actions = {"batch": Batch()}, [None] * 4
    case.forward = lambda x: seen.append(int(x.flatten()[0]))
    case.check()
    assert seen == [1, 2, 3] and case.threads_stepping == 2 and case.physics_path == "batched"


_STALE_REFERENCE = r'''
import gc, types
import torch, gltensor
from gltensor.bench.mujoco import CheckFailed, GymCase, make_gym, stock_context_current
ctx = gltensor.Context.headless()

def collect():  # the bench's own
    ctx.make_current()
    gc.collect()

args = types.SimpleNamespace(size=48, paths=["sync", "batch"], sync_max=16, async_max=64, backend="cpu", threads=0)
outcome = {}
for name, how in (("bench's collect", collect), ("no collect", lambda: None)):
    gc.collect()
    gc.disable()  # the collector runs where this script says, not by chance
    # A closed stock env that only the collector frees (a cycle holds it), as AsyncVectorEnv's constructor leaves
    # one: its viewer's MjrContext frees its GL names in whatever context is current when it is collected.
    dead = make_gym("HalfCheetah-v5", 48, 48, "light", "render")
    dead.reset(seed=0)
    dead.close()
    junk = [dead]
    junk.append(junk)
    del dead, junk
    case = GymCase(args, torch, torch.device("cpu"), "HalfCheetah-v5", "light", 2, lambda m: None, how)
    stock_context_current(case.ref)  # where Gymnasium leaves it when its envs step
    gc.collect()  # a collection at an unlucky moment
    try:
        case.check()
        outcome[name] = "passed"
    except CheckFailed as e:
        outcome[name] = str(e)
    case.close()
    gc.enable()
print(outcome)
assert outcome["bench's collect"] == "passed", outcome
assert "differ" in outcome["no collect"] and "SyncVectorEnv" in outcome["no collect"], outcome
'''


def test_check_survives_a_stale_stock_reference():
    """A closed stock env's viewer, collected while the stock envs' GL context is current, deletes their framebuffers
    and SyncVectorEnv then returns its previous frames (the check's failures on the GPU machine). The bench collects
    in its own context once a case is built, so the check passes; without that, the same script's check fails (the
    stock images are wrong from the reset on)."""
    env = dict(os.environ, MUJOCO_GL="egl")
    proc = subprocess.run([sys.executable, "-c", _STALE_REFERENCE], capture_output=True, text=True, timeout=400,
                          env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
