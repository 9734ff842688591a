"""PyOpenGL beside gltensor's headless context.

gltensor's headless contexts are EGL contexts. PyOpenGL picks its platform (GLX, EGL, ...) once, when
`OpenGL.platform` is first imported, from PYOPENGL_PLATFORM or else from the session (GLX on Linux). Where
no display exists, GLX cannot resolve a single GL function, so PyOpenGL next to gltensor's context fails
with `NullFunctionError: ... glTexStorage2D` far from the cause. As MuJoCo does for MUJOCO_GL, importing
gltensor therefore picks EGL for PyOpenGL when the user chose nothing and there is no display; where
PyOpenGL was already loaded with GLX and there is no display, a warning names the cause and the fix.
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any, Mapping, MutableMapping

GLX_WITHOUT_DISPLAY = (
    "PyOpenGL was imported before gltensor with the GLX platform and there is no display "
    "(DISPLAY and WAYLAND_DISPLAY unset): its GL calls cannot reach gltensor's headless EGL context and fail "
    "with NullFunctionError. Set PYOPENGL_PLATFORM=egl before importing OpenGL, or import gltensor first."
)


class PyOpenGLPlatformWarning(RuntimeWarning):
    """PyOpenGL runs on a platform that cannot talk to gltensor's headless context."""


def _has_display(environ: Mapping[str, str]) -> bool:
    return bool(environ.get("DISPLAY") or environ.get("WAYLAND_DISPLAY"))


def choose_platform(environ: MutableMapping[str, str] | None = None, modules: Mapping[str, Any] | None = None) -> bool:
    """Sets PYOPENGL_PLATFORM=egl where the user chose no platform, no display exists and PyOpenGL has not
    picked its platform yet (`OpenGL.platform` not imported: a bare `import OpenGL` still reads the
    variable later). Returns True when it set the variable."""
    return egl_unless_chosen("PYOPENGL_PLATFORM", "OpenGL.platform", environ, modules)


def egl_unless_chosen(variable: str, reader: str, environ: MutableMapping[str, str] | None = None,
                      modules: Mapping[str, Any] | None = None) -> bool:
    """Sets `variable`=egl unless the user set it, a display exists, or the module `reader` that reads it once is
    already imported (then it is too late to choose). Returns True when it set the variable. PyOpenGL's platform
    and MuJoCo's GL back end are chosen this one way."""
    environ = os.environ if environ is None else environ
    modules = sys.modules if modules is None else modules
    if environ.get(variable) or _has_display(environ) or reader in modules:
        return False
    environ[variable] = "egl"
    return True


def glx_without_display(environ: Mapping[str, str] | None = None, modules: Mapping[str, Any] | None = None) -> bool:
    """True when PyOpenGL already runs on GLX and there is no display: the case it cannot work."""
    environ = os.environ if environ is None else environ
    modules = sys.modules if modules is None else modules
    platform = modules.get("OpenGL.platform")
    if platform is None or _has_display(environ):
        return False
    kind = type(getattr(platform, "PLATFORM", None)).__name__
    return kind == "GLXPlatform"


def check_platform(stacklevel: int = 3) -> bool:
    """Warns (PyOpenGLPlatformWarning) with the cause and the fix when glx_without_display()."""
    if glx_without_display():
        warnings.warn(GLX_WITHOUT_DISPLAY, PyOpenGLPlatformWarning, stacklevel=stacklevel)
        return True
    return False
