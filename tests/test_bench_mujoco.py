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
    assert batch["physics_path"] == "batched" and batch["threads"] >= 1 and batch["vs_stock"] > 0
    assert batch["vs_floor"] > 0 and batch["vs_floor_read"] > 0
    assert js.with_suffix(".png").stat().st_size > 10_000
    assert "env-steps/s" in proc.stdout and str(js) in proc.stdout
