"""Modules that moved keep their old import paths for one release: every old name is the same object as the new one,
and asking for it warns with a DeprecationWarning that names the new place and points at the caller's line."""

import importlib
import subprocess
import sys
import warnings

import pytest

MOVED = {
    "gltensor.mujoco_vector": ["MujocoVectorEnv", "DmControlBatch", "as_sb3", "default_threads", "merge_infos"],
    "gltensor.mujoco_batch": ["BatchRenderer", "grid_shape"],
}


@pytest.mark.parametrize("old,name", [(old, name) for old, names in MOVED.items() for name in names])
def test_an_old_name_is_the_new_object_and_warns_at_the_callers_line(old, name):
    if old.endswith("vector"):
        pytest.importorskip("gymnasium")
    module = importlib.import_module(old)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        obj = getattr(module, name)
    new = importlib.import_module("gltensor.mujoco")
    assert obj is getattr(new, name)
    assert [w.category for w in caught] == [DeprecationWarning]
    assert f"{old}.{name} has moved to gltensor.mujoco.{name}" in str(caught[0].message)
    assert caught[0].filename == __file__  # the caller's line, not the forwarder's


def test_a_name_that_never_was_there_is_an_attribute_error():
    module = importlib.import_module("gltensor.mujoco_batch")
    with pytest.raises(AttributeError, match="has no attribute 'Renderer'"):
        module.Renderer  # noqa: B018
    with pytest.raises(AttributeError, match="'gltensor.mujoco' has no attribute 'nothing'"):
        importlib.import_module("gltensor.mujoco").nothing  # noqa: B018


def test_from_old_import_warns_in_the_users_script():
    pytest.importorskip("gymnasium")
    code = "from gltensor.mujoco_vector import MujocoVectorEnv\nprint(MujocoVectorEnv.__module__)\n"
    proc = subprocess.run([sys.executable, "-W", "always::DeprecationWarning", "-c", code],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "gltensor.mujoco.vector"
    assert "<string>:1: DeprecationWarning: gltensor.mujoco_vector.MujocoVectorEnv has moved to " \
           "gltensor.mujoco.MujocoVectorEnv" in proc.stderr


def test_gymnasium_is_imported_only_when_a_vector_name_is_asked_for():
    code = ("import sys, gltensor.mujoco as g\nprint('gymnasium' in sys.modules)\n"
            "g.BatchRenderer\nprint('gymnasium' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "False"]
