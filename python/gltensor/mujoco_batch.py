"""Moved: ``gltensor.mujoco_batch`` is now ``gltensor.mujoco`` (``from gltensor.mujoco import BatchRenderer``).
This module forwards the old names with a DeprecationWarning and will be removed in the next release."""

from . import mujoco as _mujoco  # noqa: F401  (as before: importing this module picks MuJoCo's GL back end)
from ._moved import forwarder

__all__ = ["BatchRenderer", "grid_shape"]
__getattr__ = forwarder(__name__, "gltensor.mujoco", __all__)
