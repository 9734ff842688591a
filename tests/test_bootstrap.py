"""tools/torch_index.sh, the bootstrap's choice of where torch comes from: without an NVIDIA driver, PyTorch's
CPU-only index when it answers, else the default index, saying which, and quickly when the index is unreachable.
tools/pip_allowed.sh, the bootstrap's first step: a distribution's own Python (PEP 668, pip refuses to install into
it) stops the bootstrap before anything is installed, saying how to make a virtual environment."""

import http.server
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "torch_index.sh"
PIP_ALLOWED = ROOT / "tools" / "pip_allowed.sh"

no_driver = pytest.mark.skipif(
    os.path.exists("/proc/driver/nvidia/version") or not SCRIPT.exists(),
    reason="an NVIDIA driver is present (torch then comes from the default index), or no checkout")


def choose(index, timeout="2"):
    env = dict(os.environ, TORCH_CPU_INDEX=index, TORCH_INDEX_TIMEOUT=timeout, PATH="/usr/bin:/bin")
    env["PYTHON"] = os.environ.get("PYTHON", "python3")
    t0 = time.monotonic()
    proc = subprocess.run([str(SCRIPT)], capture_output=True, text=True, env=env, timeout=60)
    return proc, time.monotonic() - t0


@no_driver
def test_cpu_index_when_it_answers(tmp_path):
    (tmp_path / "whl" / "cpu" / "torch").mkdir(parents=True)
    handler = lambda *a, **k: http.server.SimpleHTTPRequestHandler(*a, directory=str(tmp_path), **k)  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = "http://127.0.0.1:%d/whl/cpu" % server.server_port
        proc, _ = choose(url)
    finally:
        server.shutdown()
        server.server_close()
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["--index-url", url]
    assert "no NVIDIA driver: torch's CPU build from " + url in proc.stderr


@no_driver
def test_default_index_when_the_cpu_index_is_unreachable():
    # A port nothing listens on: refused at once; the fallback must not wait for pip's long network timeouts.
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    proc, took = choose("http://127.0.0.1:%d/whl/cpu" % port)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == []
    assert "is unreachable: torch from the default index instead" in proc.stderr
    assert took < 10


# ---------------------------------------------------------------- PEP 668: a distribution's own Python


def externally_managed_python():
    """A Python outside any virtual environment whose distribution marks it EXTERNALLY-MANAGED, or None."""
    probe = ("import os, sys, sysconfig; m = os.path.join(sysconfig.get_path('stdlib'), 'EXTERNALLY-MANAGED'); "
             "sys.exit(0 if sys.prefix == sys.base_prefix and os.path.isfile(m) else 1)")
    for python in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.path.exists(python) and subprocess.run([python, "-c", probe], timeout=30).returncode == 0:
            return python
    return None


def run_tool(tool, python, **env):
    # PIP_CONFIG_FILE=/dev/null: pip reads no configuration (this machine's could allow breaking system packages)
    env = {k: v for k, v in os.environ.items() if k != "PIP_BREAK_SYSTEM_PACKAGES"} | {
        "PYTHON": python, "PIP_CONFIG_FILE": os.devnull} | env
    return subprocess.run([str(tool)], capture_output=True, text=True, env=env, timeout=60)


@pytest.fixture
def system_python():
    if not PIP_ALLOWED.exists():
        pytest.skip("no checkout (tools/ absent)")
    python = externally_managed_python()
    if python is None:
        pytest.skip("no externally managed (PEP 668) system Python on this machine")
    return python


def test_a_virtual_environment_may_be_installed_into(tmp_path):
    if not PIP_ALLOWED.exists():
        pytest.skip("no checkout (tools/ absent)")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "env")], check=True, timeout=120)
    proc = run_tool(PIP_ALLOWED, str(tmp_path / "env" / "bin" / "python"))
    assert (proc.returncode, proc.stderr) == (0, "")


def test_the_systems_python_stops_the_bootstrap_with_the_fix(system_python):
    proc = run_tool(PIP_ALLOWED, system_python)
    assert proc.returncode == 1
    assert f"{system_python} is the system's own Python" in proc.stderr and "PEP 668" in proc.stderr
    assert "python3 -m venv .venv && . .venv/bin/activate" in proc.stderr
    # The bootstrap runs it first: it stops there, before apt or pip is asked for anything.
    proc = run_tool(ROOT / "tools" / "bootstrap.sh", system_python)
    assert proc.returncode == 1
    assert proc.stdout == "" and "PEP 668" in proc.stderr and "installing" not in proc.stderr


@pytest.mark.parametrize("how", ["env", "config"])
def test_pips_own_override_is_honoured(system_python, tmp_path, how):
    if how == "env":
        proc = run_tool(PIP_ALLOWED, system_python, PIP_BREAK_SYSTEM_PACKAGES="1")
    else:
        (tmp_path / "pip.conf").write_text("[global]\nbreak-system-packages = true\n")
        proc = run_tool(PIP_ALLOWED, system_python, PIP_CONFIG_FILE=str(tmp_path / "pip.conf"))
    assert (proc.returncode, proc.stderr) == (0, "")
