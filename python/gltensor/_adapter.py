"""What the engine adapters share: one NotRenderedError (re-exported by gltensor.panda3d and gltensor.mujoco) and
the one way an old reading verb is kept for a release.

Every adapter object reads with ``read()``, is released with ``close()`` and names its backend in ``backend``;
the verbs the adapters had before (``perceive()`` of the Panda3D cameras) still work for one release with a
DeprecationWarning.
"""

from __future__ import annotations

import warnings

try:
    import gltensor as _gt
except ImportError:  # pragma: no cover - imported as part of the package
    from . import _gltensor as _gt  # type: ignore

__all__ = ["NotRenderedError", "warn_renamed"]


class NotRenderedError(_gt.GLTensorError):
    """Nothing was rendered yet where a read looks: the texture, camera or renderer has no GL image or no frame was
    drawn into it. Render a frame first (Panda3D: ``base.graphicsEngine.renderFrame()``; MuJoCo: ``render()``)."""


def warn_renamed(obj: object, old: str, new: str) -> None:
    """DeprecationWarning for ``obj.old()``, kept for one release as a second name of ``obj.new()``."""
    warnings.warn("%s.%s() is deprecated and will be removed in the next gltensor release; call %s.%s() (same "
                  "arguments)" % (type(obj).__name__, old, type(obj).__name__, new), DeprecationWarning, stacklevel=3)
