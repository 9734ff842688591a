"""examples/distributed/train_ddp.py as a user runs it: one process, and two ranks under torchrun.

Here (no CUDA) both ranks render with Mesa and train with the gloo backend; on a machine with two GPUs
the `multigpu` test runs one rank per GPU with NCCL and checks that each rank's GL context is on its GPU.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the example trains with torch")
pytest.importorskip("OpenGL", reason="the example's scene draws with PyOpenGL")
import gltensor  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "examples" / "distributed" / "train_ddp.py"
SMALL = ["--cameras", "4", "--size", "32", "--steps", "5", "--warmup", "2"]
TEARDOWN_ABORT = "terminate called without an active exception"


def _env():
    env = dict(os.environ)
    for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    return env


def _torchrun(nproc, tmp_path, *extra):
    if shutil.which("torchrun") is None and not Path(sys.executable).with_name("torchrun").exists():
        pytest.skip("torchrun is not installed")
    out = tmp_path / "ranks.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}", "--standalone", str(SCRIPT),
           *SMALL, "--json", str(out), *extra]
    r = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=600)
    if r.returncode != 0 and TEARDOWN_ABORT in r.stderr and out.exists():
        # Seen about once in ten two-rank runs on the 2-core CI machine: a rank aborts in C++ teardown after
        # every figure was gathered and written (cause not established; not reproduced with faulthandler on).
        # One retry, reported; a second abort fails the test.
        print(f"two-rank run aborted at teardown ({TEARDOWN_ABORT!r}); retrying once", file=sys.stderr)
        out.unlink()
        r = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    return json.loads(out.read_text()), r.stdout


def test_single_process(tmp_path):
    out = tmp_path / "one.json"
    r = subprocess.run([sys.executable, str(SCRIPT), *SMALL, "--json", str(out)], env=_env(), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    report = json.loads(out.read_text())
    assert report["world"] == 1 and report["ranks"][0]["frames_per_s"] > 0
    assert "total:" in r.stdout


def _cuda_devices():
    return gltensor.cuda_device_count() if gltensor.cuda_available() else 0


@pytest.mark.skipif(_cuda_devices() == 1, reason="with CUDA the example runs one rank per GPU: two ranks need two GPUs "
                    "(test_more_ranks_than_gpus_is_refused_clearly runs here instead)")
def test_two_ranks_under_torchrun(tmp_path):
    report, stdout = _torchrun(2, tmp_path)
    assert report["world"] == 2
    assert sorted(f["rank"] for f in report["ranks"]) == [0, 1]
    assert all(f["frames_per_s"] > 0 and f["final_loss"] >= 0 for f in report["ranks"])
    if not gltensor.cuda_available():
        assert all(f["context_cuda_device"] is None for f in report["ranks"]), report


@pytest.mark.multigpu
@pytest.mark.gpu
def test_each_rank_renders_on_its_own_gpu(tmp_path):
    report, _ = _torchrun(2, tmp_path, "--mode", "batch")
    by_rank = {f["local_rank"]: f["context_cuda_device"] for f in report["ranks"]}
    assert by_rank == {0: 0, 1: 1}, by_rank


@pytest.mark.gpu
@pytest.mark.skipif(_cuda_devices() != 1, reason="needs exactly one visible CUDA device")
def test_more_ranks_than_gpus_is_refused_clearly(tmp_path):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--standalone", str(SCRIPT), *SMALL]
    r = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=600)
    assert r.returncode != 0
    assert "LOCAL_RANK 1, but 1 CUDA device(s) are visible" in r.stdout + r.stderr
    assert "invalid device ordinal" not in r.stdout + r.stderr
