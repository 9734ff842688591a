"""examples/c: the C engine example builds against build/libgltensor.a and checks every frame it captures.

Built into a temporary directory (OUT_DIR) with the example's own Makefile, which runs `make lib` at the
repository root first when the library is missing. Skipped without a C compiler or make.
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


def _have_tools():
    cc = os.environ.get("CC", "cc")
    return shutil.which(cc) is not None and shutil.which("make") is not None


pytestmark = pytest.mark.skipif(not _have_tools(), reason="needs a C compiler (cc or $CC) and make")


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    out = tmp_path_factory.mktemp("engine")
    r = subprocess.run(["make", "-C", str(EXAMPLE), f"OUT_DIR={out}"], capture_output=True, text=True,
                       timeout=1200)
    assert r.returncode == 0, f"make failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    binary = out / "engine"
    assert binary.exists()
    return binary


def run(binary, *args):
    r = subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True, timeout=300)
    sys.stdout.write(r.stdout)
    return r


def test_engine_runs_and_frames_match_glreadpixels(engine):
    r = run(engine, 97, 61, 4)
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    out = r.stdout
    assert "engine: OK, 4 frames captured and checked" in out
    backend = re.search(r"backend (cpu|cuda)\b", out).group(1)
    lines = re.findall(r"^frame (\d+): (host|CUDA device) pointer (0x[0-9a-f]+|\(nil\)), shape \((\d+), (\d+), (\d+)\) uint8",
                       out, re.M)
    assert [int(x[0]) for x in lines] == [0, 1, 2, 3]
    for _, memory, ptr, h, w, c in lines:
        assert (int(h), int(w), int(c)) == (61, 97, 4)
        assert memory == ("CUDA device" if backend == "cuda" else "host")
        assert ptr not in ("(nil)", "0x0")
    assert out.count("all rows match") == 4 and "MISMATCH" not in out
    # the region capture (C API glt_capture_desc.region): 97x61 -> (x 32, y 15, width 48, height 30)
    assert "region capture: (x 32, y 15, width 48, height 30) of a 97x61 image, frames 48x30" in out
    assert out.count("region: shape (30, 48, 4); all region rows match") == 4


def test_engine_other_size(engine):
    r = run(engine, 128, 32, 2)
    assert r.returncode == 0, r.stderr
    assert "shape (32, 128, 4)" in r.stdout and "engine: OK, 2 frames" in r.stdout
    assert r.stdout.count("region: shape (16, 64, 4); all region rows match") == 2


def test_engine_bad_arguments(engine):
    r = run(engine, 0, 10)
    assert r.returncode == 1 and "usage" in r.stderr
