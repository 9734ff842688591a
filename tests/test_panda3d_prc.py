"""gltensor.panda3d under each Panda3D configuration a user may have: Panda's defaults (render textures padded
to powers of two), gltensor.panda3d.configure(), and MetaDrive's PRC lines.

Panda reads its PRC when ShowBase opens its window and a process hosts one ShowBase, so each configuration
runs panda3d_cases.py (every path at 97x61, 84x84, 128x128 and 320x240, the forum recipe's pitfalls) in its
own pytest subprocess; a failure shows that run's report.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("panda3d")
pytest.importorskip("torch")

HERE = Path(__file__).resolve().parent


def run_cases(casefile, prc, timeout=600):
    env = dict(os.environ, GLTENSOR_P3D_PRC=prc)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEs", str(HERE / casefile)]
    proc = subprocess.run(cmd, cwd=str(HERE.parent), env=env, capture_output=True, text=True, timeout=timeout)
    out = proc.stdout + proc.stderr
    summary = [line for line in out.splitlines() if " passed" in line or " failed" in line or " error" in line]
    assert proc.returncode == 0, "%s under %s PRC failed:\n%s" % (casefile, prc, out[-12000:])
    assert summary and " passed" in summary[-1], out[-4000:]
    import gltensor
    if gltensor.cuda_available():  # on a GPU machine the CUDA paths must have run in the child too
        for reason in ("gpu test:", "not on the CUDA device"):
            assert reason not in out, "CUDA tests skipped under %s PRC:\n%s" % (prc, out[-6000:])
    return summary[-1]


@pytest.mark.parametrize("prc", ["default", "configure", "metadrive"])
def test_panda3d_paths_under(prc):
    print(run_cases("panda3d_cases.py", prc))


THREADED = r"""
import sys
from panda3d.core import loadPrcFileData
loadPrcFileData("", "threading-model %s\n")
from direct.showbase.ShowBase import ShowBase
import gltensor
from gltensor import panda3d as gp, metadrive as gmd
base = ShowBase(windowType="offscreen")
for make in (lambda: gp.RGBCamera(base, 97, 61), lambda: gmd.PlainRGBCamera(97, 61, base),
             lambda: gmd.AgentCameras(base, 4, 64, 64)):
    try:
        make()
    except gltensor.GLTensorError as e:
        print("REFUSED:", e)
    else:
        print("ACCEPTED")
"""


@pytest.mark.parametrize("model", ["Cull", "Cull/Draw"])
def test_draw_thread_is_refused_with_what_to_do(model):
    """MetaDrive's image observations default to threading-model Cull (cull and draw in a 'Cull' thread): the GL
    context lives there, so sensors refuse to be made, saying how to switch it off."""
    proc = subprocess.run([sys.executable, "-c", THREADED % model], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ))
    out = proc.stdout + proc.stderr
    refusals = [l for l in proc.stdout.splitlines() if l.startswith("REFUSED")]
    assert len(refusals) == 3, out[-3000:]
    for line in refusals:
        assert "multi_thread_render=False" in line and "threading model" in line
