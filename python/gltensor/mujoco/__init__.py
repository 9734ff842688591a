"""MuJoCo in gltensor: what MuJoCo draws, on the GPU, for one renderer or N envs in one GL context.

    import gltensor.mujoco as gmj
    cap = gmj.RendererCapture(renderer)                  # one mujoco.Renderer, read without mjr_readPixels
    batch = gmj.BatchRenderer(models, height=84, width=84)  # N envs' tiles, one context, one read
    venv = gmj.MujocoVectorEnv([...])                    # Gymnasium vector env, pixels on the GPU
    dmc = gmj.DmControlBatch([...])                      # dm_control suite envs, same

The package, one concern a module (public first, then private, each calling only those below it):

- ``vector``: ``MujocoVectorEnv``, ``DmControlBatch``, ``as_sb3``, ``merge_infos``, ``default_threads``
  (need Gymnasium; imported when first used, so ``import gltensor.mujoco`` works without it);
- ``capture``: ``RendererCapture`` (one ``mujoco.Renderer``);
- ``batch``: ``BatchRenderer`` (N envs' tiles in one GL context);
- ``_physics`` and ``_tasks``: the batched task physics (C threads without the GIL) and Gymnasium's v5 tasks'
  observations, rewards and terminations in NumPy over N; ``_dmc_physics``: dm_control suite envs' physics in the
  same C threads, their tasks per env in Python;
- ``_tiles`` (the tile sheet), ``_models`` (what a renderer accepts, which envs share one ``MjrContext``),
  ``_gl_backend`` (MUJOCO_GL=egl where there is no display; imported first, before ``mujoco`` is) and
  ``_warnings`` (Gymnasium's model deprecation warnings, dropped where they say nothing to the user).

Before this package, these lived in ``gltensor.mujoco`` (a module), ``gltensor.mujoco_batch`` and
``gltensor.mujoco_vector``; the last two still import, with a DeprecationWarning naming the new place.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import _gl_backend  # noqa: F401,I001  (first: MUJOCO_GL=egl where there is no display, before mujoco is imported)

from .._adapter import NotRenderedError
from .batch import BatchRenderer, grid_shape
from .capture import RendererCapture

__all__ = ["RendererCapture", "BatchRenderer", "NotRenderedError", "grid_shape",
           "MujocoVectorEnv", "DmControlBatch", "as_sb3", "merge_infos", "default_threads"]

if TYPE_CHECKING:  # what type checkers see; at run time Gymnasium's vector API is imported when first asked for
    from .vector import DmControlBatch, MujocoVectorEnv, as_sb3, default_threads, merge_infos  # noqa: F401

_FROM_VECTOR = frozenset({"MujocoVectorEnv", "DmControlBatch", "as_sb3", "merge_infos", "default_threads"})


def __getattr__(name: str) -> Any:
    if name in _FROM_VECTOR:
        from . import vector
        return getattr(vector, name)
    raise AttributeError(f"module 'gltensor.mujoco' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _FROM_VECTOR)
