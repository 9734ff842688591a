"""Packaging: without a CUDA toolkit the build makes the CPU backend alone and says so."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(shutil.which("gcc") is None and shutil.which("cc") is None, reason="no C compiler")
def test_build_without_cuda_toolkit_is_cpu_only(tmp_path):
    env = dict(os.environ, GLTENSOR_NO_CUDA="1")
    build = subprocess.run(
        [sys.executable, "setup.py", "build_ext", "--build-lib", str(tmp_path / "lib"),
         "--build-temp", str(tmp_path / "tmp")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-2000:]
    assert "building the CPU backend only" in build.stdout + build.stderr
    pkg = tmp_path / "lib" / "gltensor"
    for py in (ROOT / "python" / "gltensor").glob("*.py"):
        shutil.copy(py, pkg / py.name)
    probe = subprocess.run(
        [sys.executable, "-c", "import gltensor; print(gltensor.__file__); print(gltensor.cuda_compiled()); "
         "print(gltensor.cuda_available()); print(gltensor.cuda_unavailable_reason())"],
        cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(tmp_path / "lib")), capture_output=True, text=True,
        timeout=120)
    assert probe.returncode == 0, probe.stderr
    where, compiled, available, reason = probe.stdout.strip().splitlines()[:4]
    assert where.startswith(str(tmp_path)), "the freshly built package must be the one imported"
    assert compiled == "False" and available == "False"
    assert "built without CUDA" in reason and "nvcc" in reason, reason
