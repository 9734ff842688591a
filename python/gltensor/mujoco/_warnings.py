"""MuJoCo's warnings while gltensor makes Gymnasium's MuJoCo environments.

Gymnasium's MuJoCo model files (HalfCheetah-v5's half_cheetah.xml, among others) set the compiler attribute
``settotalmass``, which MuJoCo 3.x deprecates: loading such a model prints "WARNING: compiler attribute
'settotalmass' is deprecated ..." to stderr, once per environment, so N environments print it N times. The model
files are Gymnasium's, not the user's, and the deprecation changes nothing in the simulation; while gltensor makes
the environments (``MujocoVectorEnv``) that one message is dropped. Every other MuJoCo warning passes through,
to the handler that was installed before, or printed as MuJoCo prints it.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any, Iterator

SETTOTALMASS = "compiler attribute 'settotalmass' is deprecated"


def _pass_through(previous: Any, message: str) -> None:
    if previous is not None:
        previous(message)
    else:
        print(f"WARNING: {message}\n", file=sys.stderr, flush=True)


@contextlib.contextmanager
def gymnasium_model_deprecations_dropped() -> Iterator[None]:
    """MuJoCo's settotalmass deprecation dropped while the block runs; other warnings pass through."""
    mujoco = sys.modules.get("mujoco")
    if mujoco is None:
        import mujoco  # type: ignore[no-redef]
    if not hasattr(mujoco, "set_mju_user_warning"):  # bindings without the callback: nothing to filter with
        yield
        return
    previous = mujoco.get_mju_user_warning()

    def warning(message: str) -> None:
        if SETTOTALMASS not in message:
            _pass_through(previous, message)

    mujoco.set_mju_user_warning(warning)
    try:
        yield
    finally:
        mujoco.set_mju_user_warning(previous)
