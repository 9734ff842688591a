"""`python -m gltensor.bench panda3d` runs end to end (--quick): both Panda3D configurations, every path checked
against getRamImage before it is timed, the table and the JSON written."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("panda3d")
pytest.importorskip("torch")

gltensor = pytest.importorskip("gltensor")


def test_bench_panda3d_quick(tmp_path):
    out = tmp_path / "p3.json"
    env = dict(os.environ)
    # The same gltensor as this test process, wherever it was imported from.
    root = str(Path(gltensor.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    proc = subprocess.run([sys.executable, "-m", "gltensor.bench", "panda3d", "--quick", "--json", str(out)],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    report = json.loads(out.read_text())
    assert report["status"] == "ok"
    rows = report["results"]
    for prc in ("default", "configure"):
        one = {r["path"]: r for r in rows if r["prc"] == prc and r["cameras"] == 1}
        many = {r["path"]: r for r in rows if r["prc"] == prc and r["cameras"] == 4}
        assert {"render", "ram", "gltensor", "metadrive"} <= set(one)
        assert {"render", "render-atlas", "ram", "gltensor", "gltensor-atlas", "round-trip", "metadrive"} <= set(many)
        for r in list(one.values()) + list(many.values()):
            if r["path"] == "metadrive" and "skipped" in r:
                assert r["skipped"]  # says why
                continue
            assert r["us_per_step"] > 0 and r["cpu_us_per_step"] >= 0
            assert r["check"] == ("n/a" if r["path"] in ("render", "render-atlas", "round-trip")
                                  else "equal to getRamImage")
        assert "round_trip_us" in many["gltensor"] and "vs_render_plus_round_trip" in many["gltensor-atlas"]
    # Panda pads 84x84 under its defaults, not under configure()
    assert [r["padded"] for r in rows if r["size"] == 84 and r["path"] == "gltensor"] == [True, False]
    assert "vs MetaDrive" in proc.stdout and "vs render+RT" in proc.stdout and "Headlines" in proc.stdout
    assert report["machine"]["gl_renderer"] and report["machine"]["panda3d"]
