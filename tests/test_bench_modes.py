"""The benchmark package's shape: one command line for every mode, and a library that never imports it.

The modes' own runs are smoke-tested here on tiny cases (the grid, upload and Panda3D modes have their own
test files); their figures come from the GPU machine (tools/gpu_verify.sh).
"""
import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

gltensor = pytest.importorskip("gltensor")

from gltensor.bench import MODES  # noqa: E402
from gltensor.bench.__main__ import split_mode  # noqa: E402

PACKAGE = Path(gltensor.__file__).resolve().parent


def test_the_mode_is_the_first_word_or_the_old_flag():
    assert split_mode([]) == ("grid", [])
    assert split_mode(["--quick", "--sizes", "16"]) == ("grid", ["--quick", "--sizes", "16"])
    assert split_mode(["single", "--sizes", "16"]) == ("single", ["--sizes", "16"])
    assert split_mode(["--sizes", "16", "--upload"]) == ("upload", ["--sizes", "16"])
    for mode, (module, what) in MODES.items():
        assert module == "gltensor.bench." + mode and what


def test_the_library_never_imports_the_benchmark():
    """Every module of the package outside gltensor/bench/: no import of gltensor.bench (absolute or relative)."""
    for path in PACKAGE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = ("." * node.level) + (node.module or "")
                names = [base] + [base.rstrip(".") + "." + a.name if node.module else base + a.name
                                  for a in node.names]
            else:
                continue
            for name in names:
                assert not name.startswith(("gltensor.bench", ".bench")), "%s:%d imports %s" % (
                    path.name, node.lineno, name)


def run_mode(tmp_path, mode, *extra, timeout=240):
    pytest.importorskip("torch")
    pytest.importorskip("OpenGL")
    env = dict(os.environ)
    # The same gltensor as this test process, wherever it was imported from.
    env["PYTHONPATH"] = os.pathsep.join([str(PACKAGE.parent)] +
                                        [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.setdefault("PYOPENGL_PLATFORM", "egl")
    out = tmp_path / ("%s.json" % mode)
    proc = subprocess.run([sys.executable, "-m", "gltensor.bench", mode, "--json", str(out), *extra],
                          capture_output=True, text=True, timeout=timeout, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["status"] == "ok" and report["machine"]["backend"] in ("cpu", "cuda")
    return proc, report


def test_single_mode_tiny(tmp_path):
    proc, report = run_mode(tmp_path, "single", "--sizes", "16", "--steps", "3", "--runs", "1", "--calls", "5",
                            "--no-scene", "--torch-threads", "1")
    assert report["benchmark"] == "single_camera"
    timed = {r["path"] for r in report["results"] if r["status"] == "ok"}
    assert {"a", "b", "c", "d", "d2"} <= timed
    assert all(r["check"] == "equal to glReadPixels" for r in report["results"] if r["path"] in "b c d d2".split())
    assert "CPU time of one call" in proc.stdout


def test_batch_mode_tiny(tmp_path):
    proc, report = run_mode(tmp_path, "batch", "--configs", "3x8x4", "--steps", "3", "--runs", "1",
                            "--torch-threads", "1")
    assert report["benchmark"] == "batch"
    timed = {r["path"] for r in report["results"] if r["status"] == "ok"}
    assert {"a", "a2", "c", "d", "d2", "e", "f"} <= timed


def test_convert_mode_tiny(tmp_path):
    proc, report = run_mode(tmp_path, "convert", "--size", "16", "--configs", "2x8", "--steps", "3", "--runs", "1",
                            "--no-scene", "--torch-threads", "1")
    assert report["benchmark"] == "convert"
    assert {c["kind"] for c in report["conversions"]} == {"single", "batch", "atlas"}
    assert {d["format"] for d in report["depth"]} == {"GL_DEPTH_COMPONENT24", "GL_DEPTH_COMPONENT32F"}


def test_procs_mode_quick(tmp_path):
    """Worker processes (spawn) on every path this machine runs, each checked against the workers' glReadPixels."""
    proc, report = run_mode(tmp_path, "procs", "--quick", timeout=300)
    assert report["benchmark"] == "procs"
    cells = report["cells"]
    assert [(c["workers"], c["width"], c["height"]) for c in cells] == [(1, 32, 24), (2, 32, 24)]
    expected = {"host", "slots", "slots_out", "slots_view", "floor", "atlas"} | ({"per_worker"} if report["machine"]["backend"] == "cuda" else set())
    for c in cells:
        assert set(c["us_per_step"]) == expected and all(v > 0 for v in c["us_per_step"].values())
        # where each path's step goes: the trainer's phases, and every worker path's render and hand-over
        assert set(c["phase_us"]) == expected - {"atlas"}
        assert set(c["worker_phase_us"]) == expected - {"atlas"}
        for phases in c["worker_phase_us"].values():
            assert set(phases) == {"render", "handover"} and all(v["median"] > 0 for v in phases.values())
    assert "host/slots" in proc.stdout and "host/slots_out" in proc.stdout and "host/slots_view" in proc.stdout
