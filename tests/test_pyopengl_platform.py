"""PyOpenGL beside gltensor's headless context (issue 35): `import gltensor` picks EGL for PyOpenGL where the
user chose no platform and no display exists, and warns with the cause and the fix where PyOpenGL already
runs on GLX without a display. Each case runs in a fresh interpreter: PyOpenGL picks its platform once."""

import os
import subprocess
import sys
import textwrap

import pytest

from conftest import require_gltensor

gltensor = require_gltensor()
from gltensor import _pyopengl  # noqa: E402


def run(code, **env_changes):
    env = {k: v for k, v in os.environ.items() if k not in ("PYOPENGL_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY")}
    env.update({k: v for k, v in env_changes.items() if v is not None})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                          timeout=120)


# A texture drawn through PyOpenGL into gltensor's context and read back whole: the proof that PyOpenGL
# talks to that context (with GLX it raises NullFunctionError at glTexStorage2D).
DRAW_AND_READ = """
    ctx = gltensor.Context.headless()
    tex = GL.glGenTextures(1)
    GL.glBindTexture(GL.GL_TEXTURE_2D, tex)
    GL.glTexStorage2D(GL.GL_TEXTURE_2D, 1, GL.GL_RGBA8, 8, 6)
    GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, GL.glGenFramebuffers(1))
    GL.glFramebufferTexture2D(GL.GL_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT0, GL.GL_TEXTURE_2D, tex, 0)
    GL.glClearColor(0, 1, 0, 1); GL.glClear(GL.GL_COLOR_BUFFER_BIT)
    frame = gltensor.Capture(tex, backend="cpu").read()
    import numpy as np
    assert np.array_equal(np.asarray(frame), np.broadcast_to(np.array([0, 255, 0, 255], np.uint8), (6, 8, 4)))
    print("platform", os.environ["PYOPENGL_PLATFORM"], type(OpenGL.platform.PLATFORM).__name__)
"""


def test_import_gltensor_first_picks_egl_and_pyopengl_works():
    r = run("import os, gltensor, OpenGL.platform\nfrom OpenGL import GL\n" + textwrap.dedent(DRAW_AND_READ))
    assert r.returncode == 0, r.stderr
    assert "platform egl EGLPlatform" in r.stdout


def test_bare_import_opengl_before_gltensor_still_gets_egl():
    # `import OpenGL` alone does not pick the platform: gltensor can still choose it.
    r = run("import os, OpenGL, gltensor, OpenGL.platform\nfrom OpenGL import GL\n" + textwrap.dedent(DRAW_AND_READ))
    assert r.returncode == 0, r.stderr
    assert "platform egl EGLPlatform" in r.stdout


@pytest.mark.parametrize("env", [dict(PYOPENGL_PLATFORM="osmesa"), dict(DISPLAY=":99"), dict(WAYLAND_DISPLAY="wayland-9")],
                         ids=["user-choice", "x11-display", "wayland-display"])
def test_a_user_choice_or_a_display_is_left_alone(env):
    r = run("import os, gltensor; print(repr(os.environ.get('PYOPENGL_PLATFORM')))", **env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == repr(env.get("PYOPENGL_PLATFORM"))
    assert "PyOpenGLPlatformWarning" not in r.stderr


def test_pyopengl_on_glx_without_display_warns_with_cause_and_fix():
    code = """
        import warnings
        from OpenGL import GL          # GLX: no platform chosen, PyOpenGL picks it here
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import gltensor
        msgs = [str(w.message) for w in caught if w.category is gltensor.PyOpenGLPlatformWarning]
        assert len(msgs) == 1, [str(w.message) for w in caught]
        print(msgs[0])
        import os; print("env", os.environ.get("PYOPENGL_PLATFORM"))
    """
    r = run(code)
    assert r.returncode == 0, r.stderr
    assert _pyopengl.GLX_WITHOUT_DISPLAY in r.stdout
    for words in ("imported before gltensor", "GLX", "no display", "PYOPENGL_PLATFORM=egl", "import gltensor first"):
        assert words in r.stdout
    assert "env None" in r.stdout  # too late to choose: the variable is not set behind the user's back


def test_warning_can_be_made_an_error():
    r = run("from OpenGL import GL\nimport gltensor")
    assert r.returncode == 0 and "PyOpenGLPlatformWarning" in r.stderr, r.stderr
    r = run("import warnings\nfrom OpenGL import GL\nwarnings.simplefilter('error')\nimport gltensor")
    assert r.returncode != 0 and "PyOpenGLPlatformWarning" in r.stderr and "PYOPENGL_PLATFORM=egl" in r.stderr


class _Platform:
    def __init__(self, name):
        self.PLATFORM = type(name, (), {})()


@pytest.mark.parametrize("environ,modules,chosen", [
    ({}, {}, True),
    ({}, {"OpenGL": object()}, True),                                 # bare `import OpenGL`: not chosen yet
    ({}, {"OpenGL.platform": _Platform("GLXPlatform")}, False),      # too late
    ({"PYOPENGL_PLATFORM": "glx"}, {}, False),
    ({"DISPLAY": ":0"}, {}, False),
    ({"WAYLAND_DISPLAY": "wayland-0"}, {}, False),
])
def test_choose_platform_rules(environ, modules, chosen):
    env = dict(environ)
    assert _pyopengl.choose_platform(env, modules) is chosen
    assert env.get("PYOPENGL_PLATFORM") == ("egl" if chosen else environ.get("PYOPENGL_PLATFORM"))


@pytest.mark.parametrize("environ,platform,bad", [
    ({}, "GLXPlatform", True),
    ({}, "EGLPlatform", False),
    ({"DISPLAY": ":0"}, "GLXPlatform", False),
])
def test_glx_without_display_rules(environ, platform, bad):
    assert _pyopengl.glx_without_display(environ, {"OpenGL.platform": _Platform(platform)}) is bad
    assert _pyopengl.glx_without_display(environ, {}) is False
