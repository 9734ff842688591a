"""The tensor -> GL examples run end to end at a small size: examples/torch_particles.py (torch writes a
mapped vertex buffer that GL draws) and examples/torch_texture_viewer.py (a torch image shown through a
texture, checked pixel for pixel by the script itself). On the GPU machine they run on the CUDA backend."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytest.importorskip("torch")
import gltensor  # noqa: E402

# The example runs against the gltensor these tests import: the in-place build, or an installed wheel.
GLTENSOR_HOME = Path(gltensor.__file__).resolve().parent.parent


def run_example(name, *args, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(GLTENSOR_HOME) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, str(ROOT / "examples" / name), *map(str, args)], capture_output=True,
                       text=True, timeout=300, cwd=tmp_path, env=env)
    sys.stdout.write(r.stdout)
    assert r.returncode == 0, f"{name} exited {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr[-4000:]}"
    return r.stdout


def test_particles(tmp_path):
    out = run_example("torch_particles.py", "--particles", 3000, "--frames", 4, "--size", 64, 48, "--out",
                      "p.gif", tmp_path=tmp_path)
    assert "particles: OK, 4 frames of 3,000 particles" in out
    from PIL import Image

    with Image.open(tmp_path / "p.gif") as im:
        assert im.size == (64, 48) and im.n_frames == 4


def test_particles_png_strip(tmp_path):
    out = run_example("torch_particles.py", "--particles", 500, "--frames", 2, "--size", 32, 32, "--out",
                      "strip.png", tmp_path=tmp_path)
    assert "particles: OK" in out
    from PIL import Image

    with Image.open(tmp_path / "strip.png") as im:
        assert im.size == (64, 32)


def test_viewer(tmp_path):
    out = run_example("torch_texture_viewer.py", "--size", 97, 61, "--frames", 3, "--out", "v.png",
                      tmp_path=tmp_path)
    assert "viewer: OK, 3 frames shown exactly as the tensor" in out
    assert (tmp_path / "v.png").exists()
