"""`python -m gltensor.bench`: the benchmark suite's command line, on a tiny grid, in a subprocess.

Checks the exit status, the JSON report (machine description, raw timings, headline verdicts), the PNG plot,
that no path is silently dropped (each one is timed or listed as skipped with a reason), and that a path
whose output differs from the reference readback fails the run.
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

from gltensor.bench import grid_spec, scenes  # noqa: E402

TINY = ["--quick", "--sizes", "16,24x8", "--cameras", "1,2", "--seconds", "0.02", "--path-budget", "1",
        "--runs", "2", "--min-steps", "5", "--no-progress"]


def run_bench(tmp_path, *extra, timeout=120):
    env = dict(os.environ)
    # The same gltensor as this test process, wherever it was imported from.
    root = str(Path(gltensor.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.setdefault("PYOPENGL_PLATFORM", "egl")
    cmd = [sys.executable, "-m", "gltensor.bench", "--json", str(tmp_path / "suite.json"),
           "--plot", str(tmp_path / "suite.png")] + list(extra)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bench")
    proc = run_bench(tmp, *TINY)
    report = json.loads((tmp / "suite.json").read_text()) if (tmp / "suite.json").exists() else None
    return proc, report, tmp


def test_exit_status_and_outputs(tiny_run):
    proc, report, tmp = tiny_run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert report is not None and report["status"] == "ok"
    for key in ("benchmark", "date", "argv", "machine", "backend", "config", "method", "paths", "skipped_paths",
                "cells", "headlines", "outputs", "elapsed_s"):
        assert key in report, key
    m = report["machine"]
    for key in ("host", "gpu_name", "gpu_driver", "torch", "torch_cuda", "gl_renderer", "gl_version", "gltensor",
                "numpy", "python", "backend", "backend_reason"):
        assert key in m, key
    assert report["backend"] in ("cuda", "cpu")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert report["outputs"]["plot"] is None and "matplotlib" in report["outputs"]["plot_skipped"]
    else:
        png = tmp / "suite.png"
        assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "µs/step" in proc.stdout and "Headline targets" in proc.stdout


def test_grid_and_raw_timings(tiny_run):
    _, report, _ = tiny_run
    cells = {(c["cameras"], tuple(c["size"])) for c in report["cells"]}
    assert cells == {(1, (16, 16)), (1, (24, 8)), (2, (16, 16)), (2, (24, 8))}
    timed = set()
    for cell in report["cells"]:
        assert cell["status"] == "ok", cell
        n = cell["cameras"]
        listed = [r["path"] for r in cell["results"]]
        # every selected path is in every cell (batch and atlas need 2 cameras): never silently dropped
        assert listed == [k for k in grid_spec.PATH_KEYS if not (n == 1 and k in grid_spec.MULTI_ONLY)]
        for r in cell["results"]:
            if r["status"] == "ok":
                timed.add(r["path"])
                assert len(r["runs_us_per_step"]) == 2 and all(v > 0 for v in r["runs_us_per_step"])
                assert r["us_per_step"] > 0 and r["frames_per_s"] > 0 and r["steps_per_run"] >= 3
                assert abs(r["us_per_image"] * n - r["us_per_step"]) < 1e-6 * r["us_per_step"]
                if r["path"] not in ("render", "cpu"):
                    assert r["speedup_vs_cpu_round_trip"] > 0
            else:
                assert r["status"] == "skipped" and r["reason"], r
    # the CPU paths and gltensor's run everywhere (CPU backend without CUDA)
    assert {"render", "cpu", "cpu_usual", "cpu_pinned", "single", "batch", "atlas", "fused"} <= timed


def test_skipped_paths_have_reasons(tiny_run):
    proc, report, _ = tiny_run
    skipped = {s["path"]: s["reason"] for s in report["skipped_paths"]}
    for key, reason in skipped.items():
        assert reason, key
        assert ("skipped path %s" % key) in proc.stdout
        assert report["paths"][key]["skipped"] == reason
    if report["backend"] != "cuda":
        assert "cuda_python" in skipped and "CUDA" in skipped["cuda_python"]
    try:
        import panda3d.core  # noqa: F401
    except ImportError:
        assert "panda3d" in skipped and "panda3d" in skipped["panda3d"]


def test_headlines_reported(tiny_run):
    proc, report, _ = tiny_run
    names = [h["name"] for h in report["headlines"]]
    assert len(names) == len(grid_spec.HEADLINES) == 4
    for h in report["headlines"]:
        # none of the headline cells is in this tiny grid
        assert h["verdict"] == "NOT RUN" and "not in the grid" in h["reason"]


@pytest.mark.parametrize("paths,cameras,bad", [("cpu,batch", 2, "batch"), ("fused", 1, "fused"), ("fused", 3, "fused"),
                                              ("single", 1, "single"), ("atlas", 3, "atlas")])
def test_mismatch_fails_loudly(tmp_path, paths, cameras, bad):
    proc = run_bench(tmp_path, "--sizes", "16", "--cameras", str(cameras), "--paths", paths, "--seconds", "0.02",
                     "--no-progress", "--inject-mismatch", bad)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "CHECK FAILED" in proc.stderr and ("path %s" % bad) in proc.stderr and "differs" in proc.stderr
    report = json.loads((tmp_path / "suite.json").read_text())
    assert report["status"].startswith("check failed")


def test_unknown_path_is_a_usage_error(tmp_path):
    proc = run_bench(tmp_path, "--paths", "cpu,warp-drive")
    assert proc.returncode == 2 and "warp-drive" in proc.stderr


@pytest.mark.parametrize("draw", ["clears", "scene"])
def test_other_draws_pass_the_checks(tmp_path, draw):
    proc = run_bench(tmp_path, "--sizes", "16", "--cameras", "2", "--paths", "cpu,batch,atlas", "--seconds", "0.02",
                     "--min-steps", "3", "--runs", "1", "--no-progress", "--draw", draw)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads((tmp_path / "suite.json").read_text())
    assert report["config"]["draw"] == draw and scenes.DRAWS[draw] in report["method"]
    assert [r["status"] for r in report["cells"][0]["results"]] == ["ok"] * 3
    assert report["cells"][0]["elapsed_s"] > 0


def test_from_json_prints_a_saved_run_and_draws_its_plot(tiny_run, tmp_path):
    _, report, tmp = tiny_run
    proc = run_bench(tmp_path, "--from-json", str(tmp / "suite.json"), "--plot", str(tmp_path / "again.png"))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Headline targets" in proc.stdout and "µs/step" in proc.stdout
    for h in report["headlines"]:
        assert h["name"] in proc.stdout
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    assert (tmp_path / "again.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_from_json_refuses_what_is_not_a_finished_report(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"benchmark": "suite", "status": "running"}))
    proc = run_bench(tmp_path, "--from-json", str(bad))
    assert proc.returncode == 2 and "not a finished suite report" in proc.stderr
    proc = run_bench(tmp_path, "--from-json", str(tmp_path / "missing.json"))
    assert proc.returncode == 2 and "cannot read" in proc.stderr


def test_default_output_goes_to_the_user_cache_not_the_checkout(tmp_path):
    """Without --json/--plot the suite writes under $XDG_CACHE_HOME/gltensor/bench, says where, and leaves the
    checkout (the folder it runs from, and benchmarks/results of the package's checkout) as it was."""
    root = Path(gltensor.__file__).resolve().parent.parent
    checkout = root.parent if (root.parent / "benchmarks").is_dir() else tmp_path / "cwd"
    results = checkout / "benchmarks" / "results"
    before = sorted(p.name for p in results.iterdir()) if results.is_dir() else []
    cwd_before = sorted(p.name for p in checkout.iterdir()) if checkout.is_dir() else []
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.setdefault("PYOPENGL_PLATFORM", "egl")
    env.pop("GLTENSOR_BENCH_DIR", None)
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    tiny = ["--quick", "--sizes", "16", "--cameras", "1", "--seconds", "0.02", "--path-budget", "1", "--runs", "2",
            "--min-steps", "5", "--no-progress"]
    checkout.mkdir(exist_ok=True)
    proc = subprocess.run([sys.executable, "-m", "gltensor.bench", *tiny], capture_output=True, text=True,
                          timeout=120, env=env, cwd=checkout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out_dir = tmp_path / "cache" / "gltensor" / "bench"
    written = sorted(out_dir.glob("suite_*.json"))
    assert len(written) == 1, list(out_dir.iterdir()) if out_dir.is_dir() else "no %s" % out_dir
    assert json.loads(written[0].read_text())["status"] == "ok"
    assert "JSON: %s" % written[0] in proc.stdout
    assert (sorted(p.name for p in results.iterdir()) if results.is_dir() else []) == before
    assert sorted(p.name for p in checkout.iterdir()) == cwd_before


def test_results_path_defaults(monkeypatch, tmp_path):
    from gltensor.bench.report import results_path

    monkeypatch.delenv("GLTENSOR_BENCH_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert results_path("single", "my host") == tmp_path / "xdg" / "gltensor" / "bench" / "single_my_host.json"
    monkeypatch.setenv("GLTENSOR_BENCH_DIR", str(tmp_path / "mine"))
    assert results_path("procs", "h") == tmp_path / "mine" / "procs_h.json"
    assert results_path("procs", "h", "benchmarks/results/x.json") == Path("benchmarks/results/x.json")
