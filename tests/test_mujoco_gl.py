"""MuJoCo's GL back end beside gltensor (gltensor.mujoco._gl_backend): importing gltensor.mujoco picks EGL where
there is no display and the user chose nothing; where MuJoCo already runs on GLFW without a display, making a BatchRenderer
raises an error naming MUJOCO_GL=egl (never GLFW's missing-context symptom, a 0x0 renderbuffer limit); a renderer
left open at exit closes before MuJoCo terminates its EGL display (no "Exception ignored" traceback)."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gltensor.mujoco import _gl_backend as _mujoco_gl

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("environ,modules,sets", [
    ({}, {}, True),                                        # headless, nothing chosen, mujoco not imported
    ({"MUJOCO_GL": "osmesa"}, {}, False),                  # the user's choice stands
    ({"DISPLAY": ":0"}, {}, False),                        # a display: GLFW works
    ({"WAYLAND_DISPLAY": "wayland-0"}, {}, False),
    ({}, {"mujoco": object()}, False),                     # too late: mujoco read the variable already
])
def test_egl_is_chosen_only_where_nothing_else_can_work(environ, modules, sets):
    env = dict(environ)
    assert _mujoco_gl.choose_backend(env, modules) is sets
    assert env.get("MUJOCO_GL") == ("egl" if sets else environ.get("MUJOCO_GL"))


class _Glfw:
    __module__ = "mujoco.glfw"


class _Egl:
    __module__ = "mujoco.egl"


def test_glfw_without_display_is_recognised():
    assert _mujoco_gl.glfw_without_display(_Glfw, {})
    assert not _mujoco_gl.glfw_without_display(_Glfw, {"DISPLAY": ":0"})
    assert not _mujoco_gl.glfw_without_display(_Egl, {})


def headless_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("MUJOCO_GL", "PYOPENGL_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY")}
    import gltensor

    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(Path(gltensor.__file__).resolve().parent.parent), env.get("PYTHONPATH")) if p)
    return env | extra


def run(code, **extra):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=headless_env(**extra), timeout=180, cwd=ROOT)


SCENE = """
m = mujoco.MjModel.from_xml_string('<mujoco><worldbody><light pos="0 0 3"/><geom type="sphere" size=".3" '
                                   'rgba="1 0 0 1"/></worldbody></mujoco>')
"""


@pytest.mark.parametrize("module", ["gltensor.mujoco", "gltensor.mujoco.vector", "gltensor.mujoco_vector"])
def test_importing_gltensor_mujoco_picks_egl_headless(module):
    pytest.importorskip("mujoco")
    pytest.importorskip("torch")
    if module.endswith("vector"):  # gltensor.mujoco.vector, and the old name that forwards to it
        pytest.importorskip("gymnasium")
    proc = run(f"""
        import os, sys
        import {module}
        print(os.environ.get("MUJOCO_GL"), "mujoco" in sys.modules)
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[0] == "egl"


def test_a_batch_renders_headless_with_no_variable_set_and_exits_quietly():
    pytest.importorskip("mujoco")
    pytest.importorskip("torch")
    proc = run("import gltensor.mujoco as gmj, mujoco\n" + SCENE + """
r = gmj.BatchRenderer(m, 2, 32, 32)
frames = r.render_and_read([mujoco.MjData(m), mujoco.MjData(m)])
print(tuple(frames.shape), type(mujoco.GLContext).__name__, mujoco.GLContext.__module__)
""")  # r is left open on purpose: the interpreter's exit must close it quietly
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["(2,", "32,", "32,", "3)", "type", "mujoco.egl"], proc.stdout
    assert "Exception ignored" not in proc.stderr and "EGLError" not in proc.stderr, proc.stderr


def test_the_users_choice_is_kept():
    pytest.importorskip("mujoco")
    pytest.importorskip("torch")
    proc = run("import os, gltensor.mujoco; print(os.environ['MUJOCO_GL'])", MUJOCO_GL="osmesa")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "osmesa"


def test_mujoco_on_glfw_without_a_display_names_the_fix():
    pytest.importorskip("mujoco")
    pytest.importorskip("torch")
    pytest.importorskip("glfw")
    # mujoco imported before gltensor.mujoco, with no MUJOCO_GL: it chose GLFW, which has no display here.
    proc = run("import warnings; warnings.simplefilter('ignore')\nimport mujoco, gltensor, gltensor.mujoco as gmj\n"
               + SCENE + """
print(mujoco.GLContext.__module__)
try:
    gmj.BatchRenderer(m, 1, 32, 32)
except gltensor.UnsupportedError as exc:
    print("raised:", exc)
""")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "mujoco.glfw"
    assert lines[1].startswith("raised: MuJoCo runs on GLFW (MUJOCO_GL=unset) and there is no display")
    assert "MUJOCO_GL=egl" in lines[1] and "0x0" not in proc.stdout + proc.stderr
