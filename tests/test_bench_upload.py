"""`python -m gltensor.bench upload` (and its old spelling `--upload`): the tensor -> GL benchmark's command line on tiny cases, in a subprocess.

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


def run_bench(tmp_path, *extra, mode="upload", timeout=180):
    """mode: "upload" (the mode) or "--upload" (the flag that named it before modes existed): both must work."""
    env = dict(os.environ)
    root = str(Path(gltensor.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.setdefault("PYOPENGL_PLATFORM", "egl")
    cmd = [sys.executable, "-m", "gltensor.bench", mode, "--json", str(tmp_path / "upload.json"), *extra]
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
        assert set(r["us"]) == {"host", "gltensor", "handoff", "draw", "nohandoff"}
        assert all(len(v) == 2 and all(t > 0 for t in v) for v in r["runs"].values())
        assert r["floor_us"] == pytest.approx(r["us"]["handoff"] + r["copy_us"])
        assert r["speedup"] == pytest.approx(r["us"]["host"] / r["us"]["gltensor"])
        assert r["ceiling"] == pytest.approx(r["us"]["host"] / r["us"]["handoff"])
        assert r["ceiling_unordered"] == pytest.approx(r["us"]["host"] / r["us"]["nohandoff"])
        extra = r["us"]["gltensor"] - r["us"]["draw"]
        if r["beyond_draw_speedup"] is not None:
            assert r["beyond_draw_speedup"] == pytest.approx((r["us"]["host"] - r["us"]["draw"]) / extra)
    assert "draw alone" in out and "produce+draw" in out
    assert report["results"][0]["bytes"] == 16 * 16 * 4 and report["results"][2]["bytes"] == 512 * 16


def test_upload_benchmark_without_vertex_case(tmp_path):
    proc = run_bench(tmp_path, "--sizes", "8", "--vertices", "0", "--runs", "1", "--min-steps", "2",
                     "--seconds", "0.01", mode="--upload")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((tmp_path / "upload.json").read_text())
    assert [r["case"] for r in report["results"]] == ["texture 8²"]


def _result(case, host, gltensor, handoff, draw, nohandoff, copy_us=16.0):
    from gltensor.bench import upload as b

    us = {"host": host, "gltensor": gltensor, "handoff": handoff, "draw": draw, "nohandoff": nohandoff}
    floor = handoff + copy_us
    return {"case": case, "us": us, "speedup": host / gltensor, "vs_floor": gltensor / floor,
            "ceiling": host / handoff, "beyond_draw_speedup": b._beyond_draw_speedup(us)}


def test_verdicts():
    """PASS/FAIL against the targets, and the out-of-reach explanation only when no handoff could reach 5x
    (the H100's 1M points: the draw and the handoff's ordering alone take ~1.35 ms of a ~5 ms host step)."""
    from gltensor.bench.upload import verdict_of

    v = verdict_of(_result("texture 1024²", 2482, 427.9, 418.7, 80.3, 400.0, copy_us=11.9))
    assert "5.80x vs host (target >= 5x) PASS" in v and "0.99 x floor (target <= 1.10) PASS" in v
    assert "out of reach" not in v
    v = verdict_of(_result("vertices 1M", 5102, 1372, 1350, 1002, 1345))
    assert "3.72x vs host (target >= 5x) FAIL" in v and "1.00 x floor" in v and "PASS" in v
    assert "out of reach of any GL<->CUDA handoff" in v and "only 3.78x host" in v and "98% of that ceiling" in v
    assert "11.1x faster than host" in v
    # a miss that a better handoff could fix is not excused
    v = verdict_of(_result("vertices 1M", 5102, 1372, 450, 100, 120))
    assert "FAIL" in v and "out of reach" not in v
