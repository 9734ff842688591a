"""MuJoCo's GL back end beside gltensor: EGL where there is no display.

MuJoCo picks its GL back end once, when ``mujoco`` is first imported, from MUJOCO_GL; unset, it is GLFW, which
needs a display. Where none exists, GLFW only warns ("The DISPLAY environment variable is missing") and MuJoCo's
context then has no GL at all, so a renderer made on it fails far from the cause (a 0x0 renderbuffer limit).
As gltensor does for PyOpenGL (``_pyopengl``), importing any ``gltensor.mujoco*`` module therefore sets
MUJOCO_GL=egl (MuJoCo's headless back end) where the user chose none, no display exists and MuJoCo is not
imported yet; dm_control reads the same variable. Where MuJoCo already runs on GLFW without a display, making a
GL context raises an error that names the fix (:func:`context_class`).
"""

from __future__ import annotations

import atexit
import os
import weakref
from typing import Any, Mapping, MutableMapping

from .._pyopengl import _has_display, egl_unless_chosen

GLFW_WITHOUT_DISPLAY = (
    "MuJoCo runs on GLFW (MUJOCO_GL={chosen}) and there is no display (DISPLAY and WAYLAND_DISPLAY unset): GLFW "
    "cannot make a GL context here. Set MUJOCO_GL=egl before mujoco is imported (or import gltensor.mujoco before "
    "mujoco and leave MUJOCO_GL unset: it then picks EGL itself)."
)


def choose_backend(environ: MutableMapping[str, str] | None = None, modules: Mapping[str, Any] | None = None) -> bool:
    """Sets MUJOCO_GL=egl where the user chose no MuJoCo GL back end, no display exists and MuJoCo has not read
    the variable yet (``mujoco`` not imported). Returns True when it set the variable."""
    return egl_unless_chosen("MUJOCO_GL", "mujoco", environ, modules)


def glfw_without_display(context_cls: Any, environ: Mapping[str, str] | None = None) -> bool:
    """True when MuJoCo's GL context class is GLFW's and there is no display: the case that cannot work."""
    environ = os.environ if environ is None else environ
    module = getattr(context_cls, "__module__", "") or ""
    return module.split(".")[-1] == "glfw" and not _has_display(environ)


def context_class(mj: Any) -> Any:
    """MuJoCo's own GL context class for its MUJOCO_GL (egl / osmesa / glfw), as ``mujoco.Renderer`` uses it;
    raises ``gltensor.UnsupportedError`` naming MUJOCO_GL=egl where it is GLFW's without a display."""
    import gltensor

    try:  # MuJoCo >= 3.3 keeps the classic renderer under mujoco.rendering.classic
        from mujoco.rendering.classic import gl_context  # type: ignore
    except ImportError:
        from mujoco import gl_context  # type: ignore
    cls = getattr(gl_context, "GLContext", None) or getattr(mj, "GLContext", None)
    if cls is None:
        raise gltensor.InvalidArgumentError(
            "MuJoCo has no OpenGL context class for this MUJOCO_GL; set MUJOCO_GL=egl (headless) before "
            "importing mujoco")
    if glfw_without_display(cls):
        raise gltensor.UnsupportedError(GLFW_WITHOUT_DISPLAY.format(chosen=os.environ.get("MUJOCO_GL") or "unset"))
    return cls


_open: "weakref.WeakSet[Any]" = weakref.WeakSet()
_registered = False


def _close_open() -> None:
    for obj in list(_open):
        try:
            obj.close()
        except Exception:  # at exit: one renderer that fails to close must not stop the others
            pass


def close_at_exit(obj: Any) -> None:
    """Closes ``obj`` (a renderer holding one of MuJoCo's GL contexts) at interpreter exit if it is still open.
    Why: MuJoCo's EGL back end terminates its EGL display in an atexit handler, registered when its first context
    is made; a context still alive then is freed later by garbage collection on a terminated display, and prints
    "Exception ignored in GLContext.__del__ ... EGLError". Registered after MuJoCo's (here, once a context
    exists), this handler runs before it (atexit runs last-registered first)."""
    global _registered
    _open.add(obj)
    if not _registered:
        atexit.register(_close_open)
        _registered = True


choose_backend()
