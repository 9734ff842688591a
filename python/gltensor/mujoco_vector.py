"""Moved: ``gltensor.mujoco_vector`` is now ``gltensor.mujoco`` (``from gltensor.mujoco import MujocoVectorEnv``).
This module forwards the old names with a DeprecationWarning and will be removed in the next release."""

from . import mujoco as _mujoco  # noqa: F401  (as before: importing this module picks MuJoCo's GL back end)
from ._moved import forwarder

__all__ = ["MujocoVectorEnv", "DmControlBatch", "as_sb3", "default_threads", "merge_infos"]
__getattr__ = forwarder(__name__, "gltensor.mujoco", __all__)
