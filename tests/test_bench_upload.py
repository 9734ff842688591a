"""`python -m gltensor.bench --upload`: the tensor -> GL benchmark's command line on tiny cases, in a subprocess.

Checks the exit status, the table, the JSON report (every path timed for every case, floors and ratios
derived from the timings) and that the paths were checked against GL before timing (a run that got that
far printed its table). On the GPU machine the same command runs the CUDA backend with the real sizes.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

gltensor = pytest.importorskip("gltensor")
pytest.importorskip("torch")
pytest.importorskip("OpenGL")


def run_bench(tmp_path, *extra, timeout=180):
    env = dict(os.environ)
    root = str(Path(gltensor.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.setdefault("PYOPENGL_PLATFORM", "egl")
    cmd = [sys.executable, "-m", "gltensor.bench", "--upload", "--json", str(tmp_path / "upload.json"), *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


def test_upload_benchmark_tiny(tmp_path):
    proc = run_bench(tmp_path, "--sizes", "16,24x8", "--vertices", "512", "--runs", "2", "--min-steps", "3",
                     "--seconds", "0.01")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "texture 16²" in out and "texture 24x8" in out and "vertices 512" in out
    report = json.loads((tmp_path / "upload.json").read_text())
    assert report["benchmark"] == "upload" and report["backend"] in ("cpu", "cuda")
    assert [r["case"] for r in report["results"]] == ["texture 16²", "texture 24x8", "vertices 512"]
    for r in report["results"]:
        assert set(r["us"]) == {"host", "gltensor", "handoff", "draw"}
        assert all(len(v) == 2 and all(t > 0 for t in v) for v in r["runs"].values())
        assert r["floor_us"] == pytest.approx(r["us"]["handoff"] + r["copy_us"])
        assert r["speedup"] == pytest.approx(r["us"]["host"] / r["us"]["gltensor"])
        assert r["ceiling"] == pytest.approx(r["us"]["host"] / r["us"]["draw"])
        extra = r["us"]["gltensor"] - r["us"]["draw"]
        if r["beyond_draw_speedup"] is not None:
            assert r["beyond_draw_speedup"] == pytest.approx((r["us"]["host"] - r["us"]["draw"]) / extra)
    assert "draw alone" in out and "ceiling (host/draw)" in out
    assert report["results"][0]["bytes"] == 16 * 16 * 4 and report["results"][2]["bytes"] == 512 * 16


def test_upload_benchmark_without_vertex_case(tmp_path):
    proc = run_bench(tmp_path, "--sizes", "8", "--vertices", "0", "--runs", "1", "--min-steps", "2",
                     "--seconds", "0.01")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((tmp_path / "upload.json").read_text())
    assert [r["case"] for r in report["results"]] == ["texture 8²"]
