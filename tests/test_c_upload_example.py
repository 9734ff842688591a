"""examples/c/upload.c: the C API of uploads and buffer maps (glt_upload_*, glt_buffer_*) checked against GL.

Built with the examples' Makefile into a temporary directory, like tests/test_c_example.py. On the GPU
machine the library has the CUDA backend and the example writes from CUDA memory; here, from the host.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "c"

pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("CC", "cc")) is None or shutil.which("make") is None,
                                reason="needs a C compiler (cc or $CC) and make")


@pytest.fixture(scope="module")
def upload_binary(tmp_path_factory):
    out = tmp_path_factory.mktemp("upload")
    r = subprocess.run(["make", "-C", str(EXAMPLE), f"OUT_DIR={out}", f"{out}/upload"], capture_output=True,
                       text=True, timeout=1200)
    assert r.returncode == 0, f"make failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    return out / "upload"


def run(binary, *args):
    r = subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True, timeout=300)
    sys.stdout.write(r.stdout)
    return r


@pytest.mark.parametrize("size", [(97, 61, 50), (64, 64, 64), (1, 1, 1)])
def test_upload_example_matches_gl(upload_binary, size):
    r = run(upload_binary, *size)
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    w, h, n = size
    out = r.stdout
    assert re.search(rf"GL_RGBA8 {w}x{h} written from a \({h}, {w}, 3\) uint8 (host|CUDA) image", out)
    assert "every texel matches" in out and "each point is on its pixel" in out
    assert f"glt_buffer_read: {n * 16} bytes, equal to the positions" in out
    assert "MISMATCH" not in out and out.rstrip().endswith("upload: OK")
    backend = re.search(r"backend (cpu|cuda)\)", out).group(1)
    assert ("CUDA device memory" in out) == (backend == "cuda")


def test_upload_example_bad_arguments(upload_binary):
    r = run(upload_binary, 10, 10, 11)
    assert r.returncode == 1 and "usage" in r.stderr
