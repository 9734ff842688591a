"""Runs leave no noise and no litter: no warning about Panda3D's default EGL display from gltensor's Panda3D
path, no SB3-* folder from the suite in the system's temporary folder (torchrun's torchelastic_* folders are
checked where the torchrun tests run them), and MuJoCo's settotalmass deprecation, which Gymnasium's own model
files set off once per environment, dropped while MujocoVectorEnv makes the environments, every other MuJoCo
warning kept."""

import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

EGL_DEFAULT_DISPLAY_WARNING = "Couldn't initialize the default EGL display"


def run(code, **env):
    import gltensor

    pkg = str(Path(gltensor.__file__).resolve().parent.parent)
    full = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "MUJOCO_GL")}
    full["PYTHONPATH"] = os.pathsep.join(p for p in (pkg, full.get("PYTHONPATH")) if p)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full | env, timeout=240)


def test_panda3d_path_prints_no_default_egl_display_warning():
    pytest.importorskip("panda3d")
    pytest.importorskip("torch")
    proc = run("""
        from direct.showbase.ShowBase import ShowBase
        from gltensor import panda3d as gp
        gp.configure()
        base = ShowBase(windowType="offscreen")
        cam = gp.RGBCamera(base, 32, 24)
        base.graphicsEngine.renderFrame()
        print(tuple(cam.read().shape))
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "(24, 32, 3)"
    assert EGL_DEFAULT_DISPLAY_WARNING not in proc.stderr, proc.stderr


def test_sb3_logs_stay_out_of_the_system_temp_folder(tmp_path):
    pytest.importorskip("stable_baselines3")
    system_tmp = Path(tempfile.gettempdir())
    before = set(system_tmp.glob("SB3-*"))
    # What PPO(...).learn() calls: the logger makes its folder at once (SB3_LOGDIR set by the suite's conftest).
    proc = run("from stable_baselines3.common.logger import configure; print(configure().get_dir())")
    assert proc.returncode == 0, proc.stderr
    assert os.environ.get("SB3_LOGDIR") and proc.stdout.strip().splitlines()[-1] == os.environ["SB3_LOGDIR"]
    assert set(system_tmp.glob("SB3-*")) <= before


def test_gymnasiums_settotalmass_deprecation_is_dropped_and_nothing_else():
    mujoco = pytest.importorskip("mujoco")
    if not hasattr(mujoco, "set_mju_user_warning"):
        pytest.skip("these MuJoCo bindings have no warning callback")
    from gltensor.mujoco import _warnings as _mujoco_warnings

    seen = []
    previous = mujoco.get_mju_user_warning()
    mujoco.set_mju_user_warning(seen.append)
    try:
        with _mujoco_warnings.gymnasium_model_deprecations_dropped():
            handler = mujoco.get_mju_user_warning()
            handler("compiler attribute 'settotalmass' is deprecated and will be removed in a future release")
            handler("Nan, Inf or huge value in QACC at DOF 0. The simulation is unstable.")
        assert mujoco.get_mju_user_warning() == seen.append  # put back
    finally:
        mujoco.set_mju_user_warning(previous)
    assert seen == ["Nan, Inf or huge value in QACC at DOF 0. The simulation is unstable."]


def test_mujoco_vector_env_makes_its_envs_quietly():
    pytest.importorskip("mujoco")
    pytest.importorskip("gymnasium")
    pytest.importorskip("torch")
    proc = run("""
        from gltensor.mujoco import MujocoVectorEnv
        envs = MujocoVectorEnv("HalfCheetah-v5", 3, height=32, width=32)
        obs, _ = envs.reset(seed=0)
        print(tuple(obs.shape))
        envs.close()
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "(3, 32, 32, 3)"
    assert "settotalmass" not in proc.stderr + proc.stdout, proc.stderr
