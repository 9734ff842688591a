"""examples/distributed/train_ddp.py as a user runs it: one process, and two ranks under torchrun.

Here (no CUDA) both ranks render with Mesa and train with the gloo backend; on a machine with two GPUs
the `multigpu` test runs one rank per GPU with NCCL and checks that each rank's GL context is on its GPU.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
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


@pytest.fixture(autouse=True)
def _torchrun_litter_in_the_tests_folder(tmp_path, monkeypatch):
    """torchrun leaves a torchelastic_* folder in the temporary folder of every launch: the launches here get the
    test's own (TMPDIR, inherited through _env), and none may appear in the system's."""
    system_tmp = Path(tempfile.gettempdir())  # resolved before TMPDIR changes (tempfile caches it)
    before = set(system_tmp.glob("torchelastic_*"))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    yield
    assert set(system_tmp.glob("torchelastic_*")) <= before, "a torchrun launch left its folder behind"


def _need_torchrun():
    if shutil.which("torchrun") is None and not Path(sys.executable).with_name("torchrun").exists():
        pytest.skip("torchrun is not installed")


def _torchrun(nproc, tmp_path, *extra):
    _need_torchrun()
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


def _free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _two_nodes(tmp_path, attempt, extra, node_env, timeout=300):
    """Two torchrun launches as two nodes would start them, rendezvousing through c10d on this host."""
    out = tmp_path / f"nodes{attempt}.json"
    port = _free_port()
    procs, logs = [], []
    for node in (0, 1):
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc_per_node=1",
               f"--node_rank={node}", "--rdzv_backend=c10d", f"--rdzv_endpoint=localhost:{port}",
               f"--rdzv_id=gltensor-test-{port}", str(SCRIPT), *SMALL, "--json", str(out), *extra]
        log = tmp_path / f"node{node}_{attempt}.log"
        with open(log, "w") as f:
            procs.append(subprocess.Popen(cmd, env={**_env(), **node_env(node)}, stdout=f, stderr=subprocess.STDOUT,
                                          start_new_session=True))
        logs.append(log)
    deadline = time.monotonic() + timeout
    try:
        codes = [p.wait(timeout=max(1.0, deadline - time.monotonic())) for p in procs]
    except subprocess.TimeoutExpired:
        codes = None
    finally:
        for p in procs:  # our launches and their workers (each launch leads its own session)
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    text = [log.read_text(errors="replace") for log in logs]
    return codes, out, text


def test_two_nodes_rendezvous_on_one_host(tmp_path):
    """`torchrun --nnodes=2 --rdzv_backend=c10d` twice, as two machines would run it (the docstring's command):
    both nodes join, each renders on what it sees (here the CPU; with CUDA its one visible GPU), the report
    lists both."""
    _need_torchrun()
    devices = _cuda_devices()
    extra, node_env = (), (lambda node: {})
    if devices >= 2:  # a node per GPU, as on two machines: each launch sees one
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "0,1").split(",")
        node_env = (lambda node: {"CUDA_VISIBLE_DEVICES": visible[node]})
    elif devices == 1:  # both nodes on the one GPU: NCCL refuses two ranks on one device
        extra = ("--dist-backend", "gloo")
    for attempt in (0, 1):
        codes, out, text = _two_nodes(tmp_path, attempt, extra, node_env)
        assert codes is not None, "the two-node launch did not finish in time:\n" + "\n---\n".join(
            t[-3000:] for t in text)
        failed = any(codes)
        if failed and attempt == 0 and out.exists() and any(TEARDOWN_ABORT in t for t in text):
            # The rare teardown abort of test_two_ranks_under_torchrun (after the report was written): one retry.
            print(f"two-node run aborted at teardown ({TEARDOWN_ABORT!r}); retrying once", file=sys.stderr)
            continue
        assert not failed, f"exit codes {codes}\n" + "\n---\n".join(t[-3000:] for t in text)
        break
    report = json.loads(out.read_text())
    assert report["world"] == 2 and report["nodes"] == 2, report
    ranks = sorted(report["ranks"], key=lambda f: f["rank"])
    assert [f["rank"] for f in ranks] == [0, 1]
    assert sorted(f["node_rank"] for f in ranks) == [0, 1]
    assert all(f["local_rank"] == 0 and f["frames_per_s"] > 0 for f in ranks), ranks
    if devices == 0:
        assert all(f["context_cuda_device"] is None and f["dist_backend"] == "gloo" for f in ranks), ranks
    else:  # each node's context on its visible device 0
        assert all(f["context_cuda_device"] == 0 for f in ranks), ranks
    listing = "".join(text)
    assert "node 0: " in listing and "node 1: " in listing, listing[-3000:]


@pytest.mark.skipif(_cuda_devices() == 1, reason="with CUDA two ranks need two GPUs (tools/gpu_verify.sh scaling)")
def test_scaling_tool_reports_spread_and_phases(tmp_path):
    """tools/ddp_scaling.py at its smallest: one pair of 1- and 2-rank runs and one --profile-phases run per side."""
    _need_torchrun()
    tool = ROOT / "tools" / "ddp_scaling.py"
    r = subprocess.run([sys.executable, str(tool), "--out", str(tmp_path), "--pairs", "1", "--profile-runs", "1",
                        "--cameras", "2", "--size", "16", "--steps", "3", "--warmup", "1", "--time-limit", "400"],
                       env=_env(), capture_output=True, text=True, timeout=500)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    res = json.loads((tmp_path / "scaling.json").read_text())["results"][0]
    assert res["efficiency_per_pair"]["n"] == 1 and res["efficiency_per_pair"]["median"] > 0
    assert set(res["phases_host_us"]["1"]) >= {"render", "read", "targets", "forward", "backward", "optimizer"}
    assert res["phases_profiled_us"]["2"]["allreduce"] > 0, res["phases_profiled_us"]
    assert "efficiency per ABBA pair" in r.stdout and "| 2 - 1 |" in r.stdout
