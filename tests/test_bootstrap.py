"""tools/torch_index.sh, the bootstrap's choice of where torch comes from: without an NVIDIA driver, PyTorch's
CPU-only index when it answers, else the default index, saying which, and quickly when the index is unreachable."""

import http.server
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "torch_index.sh"

pytestmark = pytest.mark.skipif(
    os.path.exists("/proc/driver/nvidia/version") or not SCRIPT.exists(),
    reason="an NVIDIA driver is present (torch then comes from the default index), or no checkout")


def choose(index, timeout="2"):
    env = dict(os.environ, TORCH_CPU_INDEX=index, TORCH_INDEX_TIMEOUT=timeout, PATH="/usr/bin:/bin")
    env["PYTHON"] = os.environ.get("PYTHON", "python3")
    t0 = time.monotonic()
    proc = subprocess.run([str(SCRIPT)], capture_output=True, text=True, env=env, timeout=60)
    return proc, time.monotonic() - t0


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
