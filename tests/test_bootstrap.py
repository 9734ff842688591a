"""tools/torch_index.sh, the bootstrap's choice of where torch comes from: without an NVIDIA driver, PyTorch's
CPU-only index when it answers, else the default index, saying which, and quickly when the index is unreachable.
tools/pip_allowed.sh and the bootstrap's step 0 (tools/choose_python.sh): the clone's virtual environment .venv, made
once and then used by the bootstrap and by tools/python.sh (what the Makefile runs the demo and tests with), unless
PYTHON is given or a virtual or conda environment is active; a PYTHON given that pip may not install into (a
distribution's own Python, PEP 668) gets the .venv too. Whatever it chose, the bootstrap says which and why. These tests stop the bootstrap right after its choice (GLTENSOR_BOOTSTRAP_STOP_AFTER_PYTHON=1) and ask no
index for anything (PIP_NO_INDEX): ensurepip installs pip from the wheel Python ships."""

import http.server
import os
import shutil
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


def test_the_systems_python_is_named_with_the_reason(system_python):
    proc = run_tool(PIP_ALLOWED, system_python)
    assert proc.returncode == 1
    assert f"{system_python} is the system's own Python" in proc.stderr and "PEP 668" in proc.stderr
    assert "tools/bootstrap.sh makes the virtual environment .venv in this clone" in proc.stderr


@pytest.mark.parametrize("how", ["env", "config"])
def test_pips_own_override_is_honoured(system_python, tmp_path, how):
    if how == "env":
        proc = run_tool(PIP_ALLOWED, system_python, PIP_BREAK_SYSTEM_PACKAGES="1")
    else:
        (tmp_path / "pip.conf").write_text("[global]\nbreak-system-packages = true\n")
        proc = run_tool(PIP_ALLOWED, system_python, PIP_CONFIG_FILE=str(tmp_path / "pip.conf"))
    assert (proc.returncode, proc.stderr) == (0, "")


# ---------------------------------------------------------------- PEP 668: the bootstrap's own .venv

BOOTSTRAP_TOOLS = ("bootstrap.sh", "pip_allowed.sh", "python.sh", "choose_python.sh")
MAKING = "making the virtual environment .venv in this clone and installing into it"
USING = "installing into this clone's virtual environment .venv"


@pytest.fixture
def clone(tmp_path):
    """A clone as far as step 0 sees one: the bootstrap runs from its clone's root and makes .venv there."""
    if not all((ROOT / "tools" / t).exists() for t in BOOTSTRAP_TOOLS):
        pytest.skip("no checkout (tools/ absent)")
    (tmp_path / "clone" / "tools").mkdir(parents=True)
    for t in BOOTSTRAP_TOOLS:
        shutil.copy2(ROOT / "tools" / t, tmp_path / "clone" / "tools" / t)
    return tmp_path / "clone"


def base_python():
    """This Python's own interpreter, outside any virtual environment, where it can make one with pip (venv and
    ensurepip present), or None."""
    python = getattr(sys, "_base_executable", None) or sys.executable
    probe = "import sys, venv, ensurepip; sys.exit(sys.prefix != sys.base_prefix)"
    if subprocess.run([python, "-c", probe], capture_output=True, timeout=30).returncode != 0:
        return None
    return python


def fake_system_python(where, apt_flag=None):
    """A stand-in for a distribution's own Python, made without touching the system: a wrapper running this
    machine's base Python with a sitecustomize that shows pip and tools/pip_allowed.sh (sysconfig.get_path('stdlib'))
    a standard library folder holding an EXTERNALLY-MANAGED marker. With apt_flag, ensurepip cannot be imported until
    that file exists (as on Debian before python3.X-venv is installed)."""
    base = base_python()
    if base is None:
        pytest.skip("`python -m venv` cannot work here: no base Python with venv and ensurepip")
    stdlib, site = where / "fake-stdlib", where / "fake-site"
    stdlib.mkdir()
    site.mkdir()
    (stdlib / "EXTERNALLY-MANAGED").write_text("[externally-managed]\nError=a test's stand-in\n")
    (site / "sitecustomize.py").write_text(f"""import os, sys, sysconfig
_get_path = sysconfig.get_path
sysconfig.get_path = lambda name, *a, **k: {str(stdlib)!r} if name == "stdlib" else _get_path(name, *a, **k)
if {str(apt_flag) if apt_flag else None!r} is not None and not os.path.exists({str(apt_flag)!r}):
    sys.modules["ensurepip"] = None
""")
    wrapper = where / "python3"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {base} "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


def real_system_python():
    python = externally_managed_python()
    if python is None:
        pytest.skip("no externally managed (PEP 668) system Python on this machine")
    if subprocess.run([python, "-c", "import venv, ensurepip"], capture_output=True, timeout=30).returncode != 0:
        pytest.skip(f"`{python} -m venv` cannot work here: its distribution's venv package is not installed")
    return python


def bootstrap_env(python, **env):
    """The environment of a user with no virtual or conda environment active; python None: no PYTHON given."""
    drop = ("PIP_BREAK_SYSTEM_PACKAGES", "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "PYTHONPATH",
            "PYTHONHOME", "PYTHON")
    return {k: v for k, v in os.environ.items() if k not in drop} | ({"PYTHON": python} if python else {}) | {
        "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", "GLTENSOR_BOOTSTRAP_STOP_AFTER_PYTHON": "1"} | env


def step0(clone, python, **env):
    """The bootstrap up to its choice of Python: (process, the Python it chose)."""
    proc = subprocess.run([str(clone / "tools" / "bootstrap.sh")], capture_output=True, text=True,
                          env=bootstrap_env(python, **env), timeout=180)
    chosen = [ln.split(" ", 2)[2] for ln in proc.stdout.splitlines() if ln.startswith("bootstrap: python ")]
    return proc, chosen[0] if len(chosen) == 1 else None


def run_python_sh(clone, python, **env):
    return subprocess.run([str(clone / "tools" / "python.sh"), "-c", "import sys; print(sys.prefix)"],
                          capture_output=True, text=True, env=bootstrap_env(python, **env), timeout=60)


def prefix_run_by_python_sh(clone, python, **env):
    """sys.prefix of the Python that tools/python.sh (the Makefile's runner) runs for this PYTHON."""
    proc = run_python_sh(clone, python, **env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def has_pip(python):
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('pip') is None)"
    return subprocess.run([python, "-c", probe], timeout=30).returncode == 0


@pytest.mark.parametrize("which", ["stand-in", "this machine's"])
def test_a_distributions_python_gets_the_clones_venv_once(clone, tmp_path, which):
    python = fake_system_python(tmp_path) if which == "stand-in" else real_system_python()
    venv_python = str(clone / ".venv" / "bin" / "python")
    before = run_python_sh(clone, python)  # no .venv yet: the runner says to bootstrap first
    assert before.returncode == 1 and "run tools/bootstrap.sh" in before.stderr and "PEP 668" in before.stderr

    proc, chosen = step0(clone, python)
    assert proc.returncode == 0, proc.stderr
    assert chosen == venv_python, proc.stdout
    lines = [ln for ln in proc.stdout.splitlines() if "PEP 668" in ln]
    assert len(lines) == 1 and MAKING in lines[0] and ". .venv/bin/activate" in lines[0], proc.stdout
    assert has_pip(venv_python)  # the rest of the bootstrap pip-installs into it
    assert prefix_run_by_python_sh(clone, python) == str(clone / ".venv")

    # Again (make test after make demo): the same .venv, used as it is, not made anew.
    (clone / ".venv" / "kept").write_text("made by the first run")
    proc, chosen = step0(clone, python)
    assert proc.returncode == 0, proc.stderr
    assert chosen == venv_python
    assert USING in proc.stdout and MAKING not in proc.stdout
    assert (clone / ".venv" / "kept").exists()


def test_the_venv_package_comes_through_apt_where_ensurepip_is_missing(clone, tmp_path):
    installed = tmp_path / "python3-venv-installed"
    python = fake_system_python(tmp_path, apt_flag=installed)
    # apt-get (and sudo, for a user who is not root) stand-ins that log what they were asked and "install".
    fakebin = tmp_path / "bin"
    fakebin.mkdir()
    (fakebin / "apt-get").write_text(f'#!/bin/sh\necho "$*" >> {tmp_path}/apt.log\n'
                                     f'case "$*" in *install*) touch {installed} ;; esac\n')
    (fakebin / "sudo").write_text('#!/bin/sh\nexec "$@"\n')
    for f in fakebin.iterdir():
        f.chmod(0o755)
    version = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=30).stdout.strip()

    proc, chosen = step0(clone, python, PATH=f"{fakebin}:/usr/bin:/bin")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "apt.log").read_text().splitlines() == ["update -qq", f"install -y -qq python{version}-venv"]
    assert f"has no venv/ensurepip: installing python{version}-venv" in proc.stdout
    assert chosen == str(clone / ".venv" / "bin" / "python") and has_pip(chosen)


def test_a_venv_left_without_pip_is_completed_in_place(clone, tmp_path):
    # What `python3 -m venv .venv` leaves on Debian without python3-venv: a Python, no pip.
    python = fake_system_python(tmp_path)
    subprocess.run([base_python(), "-m", "venv", "--without-pip", str(clone / ".venv")], check=True, timeout=60)
    (clone / ".venv" / "kept").write_text("made before the bootstrap")
    proc, chosen = step0(clone, python)
    assert proc.returncode == 0, proc.stderr
    assert chosen == str(clone / ".venv" / "bin" / "python") and has_pip(chosen)
    assert (clone / ".venv" / "kept").exists()


def test_a_venv_of_another_python_version_stops_with_the_fix(clone, tmp_path):
    python = fake_system_python(tmp_path)
    # A .venv whose Python is another version than PYTHON's (it answers the bootstrap's probe as 3.0 would).
    (clone / ".venv" / "bin").mkdir(parents=True)
    (clone / ".venv" / "bin" / "python").write_text('#!/bin/sh\necho "3.0 pip"\n')
    (clone / ".venv" / "bin" / "python").chmod(0o755)
    proc, chosen = step0(clone, python)
    assert proc.returncode == 1 and chosen is None and proc.stdout == ""
    assert "this clone's .venv holds Python 3.0, but PYTHON=" in proc.stderr and "rm -rf .venv" in proc.stderr
    assert sorted(p.name for p in (clone / ".venv").rglob("*")) == ["bin", "python"]


@pytest.mark.parametrize("which", ["a virtual environment's", "this machine's base"])
def test_a_python_pip_may_install_into_is_used_as_it_is(clone, tmp_path, which):
    if which == "this machine's base":
        python = base_python()
        if python is None or run_tool(PIP_ALLOWED, python).returncode != 0:
            pytest.skip("this machine's base Python is externally managed (or cannot make a venv)")
    else:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "env")], check=True,
                       timeout=60)
        python = str(tmp_path / "env" / "bin" / "python")
    own_prefix = prefix_run_by_python_sh(clone, python)
    proc, chosen = step0(clone, python)
    assert (proc.returncode, proc.stdout) == (0, f"bootstrap: installing into {python} (PYTHON={python}, as given)\n"
                                                 f"bootstrap: python {python}\n"), proc.stderr
    assert chosen == python and not (clone / ".venv").exists()
    # A .venv left in the clone changes nothing for it either.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(clone / ".venv")], check=True, timeout=60)
    assert step0(clone, python)[1] == python
    assert prefix_run_by_python_sh(clone, python) == own_prefix != str(clone / ".venv")


def test_an_active_venv_beside_the_systems_python_stops_with_the_fix(clone, tmp_path):
    python = fake_system_python(tmp_path)
    proc, chosen = step0(clone, python, VIRTUAL_ENV=str(tmp_path / "active"))
    assert proc.returncode == 1 and chosen is None and proc.stdout == ""
    assert "is the system's own Python" in proc.stderr and f"{tmp_path / 'active'} is active" in proc.stderr
    assert not (clone / ".venv").exists()


def test_make_passes_the_python_named_to_the_bootstrap_and_the_runner():
    if shutil.which("make") is None or not (ROOT / "Makefile").exists():
        pytest.skip("no make, or no checkout")
    # Under `make test` (CI) this runs inside make: MAKELEVEL/MFLAGS would make the inner make print "Entering
    # directory" lines, so the inner make gets none of the outer one's variables.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHON", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}
    for target, runs in [("demo", "-m gltensor"), ("test", "-m pytest"), ("bench", "-m gltensor.bench single")]:
        out = subprocess.run(["make", "--no-print-directory", "-n", target, "PYTHON=python3.12"], cwd=ROOT, capture_output=True,
                             text=True, env=env, timeout=30).stdout.splitlines()
        assert out == ['PYTHON="python3.12" ./tools/bootstrap.sh', f'PYTHON="python3.12" ./tools/python.sh {runs}']
        default = subprocess.run(["make", "--no-print-directory", "-n", target], cwd=ROOT, capture_output=True, text=True, env=env,
                                 timeout=30).stdout.splitlines()
        # No PYTHON given: none passed, so that the bootstrap and the runner choose (the clone's .venv, or the
        # active environment's Python).
        assert default == ['./tools/bootstrap.sh', f'./tools/python.sh {runs}']


# ---------------------------------------------------------------- no PYTHON given: the clone's .venv by default


def pyenv_style_python3(where):
    """A python3 first on PATH that pip may install into, outside any virtual environment: what pyenv's or
    conda's shims are (a wrapper that runs this machine's base Python)."""
    base = base_python()
    if base is None or run_tool(PIP_ALLOWED, base).returncode != 0:
        pytest.skip("this machine's base Python is externally managed (or cannot make a venv)")
    (where / "shims").mkdir()
    shim = where / "shims" / "python3"
    shim.write_text(f'#!/bin/sh\nexec {base} "$@"\n')
    shim.chmod(0o755)
    return base, f"{where / 'shims'}:/usr/bin:/bin"


NOTHING_ACTIVE = "no virtual or conda environment is active and no PYTHON was given"


def test_a_global_python3_first_on_path_gets_the_clones_venv(clone, tmp_path):
    # Two fresh-clone runs with a pyenv-style python3 first on PATH: everything goes into the clone's .venv, the
    # first run makes it, the second uses it, and each says why.
    base, path = pyenv_style_python3(tmp_path)
    venv_python = str(clone / ".venv" / "bin" / "python")
    proc, chosen = step0(clone, None, PATH=path)
    assert proc.returncode == 0, proc.stderr
    assert chosen == venv_python, proc.stdout
    said = proc.stdout.splitlines()[0]
    assert said.startswith(f"bootstrap: {NOTHING_ACTIVE}: {MAKING} (Python") and f"from {base};" in said
    assert has_pip(venv_python)
    assert prefix_run_by_python_sh(clone, None, PATH=path) == str(clone / ".venv")
    proc, chosen = step0(clone, None, PATH=path)
    assert proc.returncode == 0 and chosen == venv_python
    assert proc.stdout.splitlines()[0].startswith(f"bootstrap: {NOTHING_ACTIVE}: {USING}")


def test_an_active_virtual_environment_is_used_as_it_is(clone, tmp_path):
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "env")], check=True, timeout=60)
    python = str(tmp_path / "env" / "bin" / "python")
    _, path = pyenv_style_python3(tmp_path)
    proc, chosen = step0(clone, None, PATH=path, VIRTUAL_ENV=str(tmp_path / "env"))
    assert proc.returncode == 0, proc.stderr
    assert chosen == python and not (clone / ".venv").exists()
    assert f"(the active virtual environment {tmp_path / 'env'})" in proc.stdout
    assert prefix_run_by_python_sh(clone, None, PATH=path, VIRTUAL_ENV=str(tmp_path / "env")) == str(tmp_path / "env")


@pytest.mark.parametrize("name", ["rl", "base"])
def test_an_active_conda_environment_other_than_base_is_used(clone, tmp_path, name):
    # A conda environment as step 0 sees one: CONDA_PREFIX with bin/python (here a venv's, to keep it small).
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "conda")], check=True, timeout=60)
    _, path = pyenv_style_python3(tmp_path)
    env = {"PATH": path, "CONDA_PREFIX": str(tmp_path / "conda"), "CONDA_DEFAULT_ENV": name}
    proc, chosen = step0(clone, None, **env)
    assert proc.returncode == 0, proc.stderr
    if name == "base":  # conda's installer activates base in every shell: installing there is installing globally
        assert chosen == str(clone / ".venv" / "bin" / "python") and NOTHING_ACTIVE in proc.stdout
    else:
        assert chosen == str(tmp_path / "conda" / "bin" / "python") and not (clone / ".venv").exists()
        assert f"(the active conda environment rl ({tmp_path / 'conda'}))" in proc.stdout
