"""The environment, the CLI and messages that misled (issue #22, class 7):

- GLTENSOR_* variables with a value gltensor does not know are refused, naming the valid values (a typo such as
  GLTENSOR_DEPTH_PATH=readpixel was ignored); src/core/env.c reads them in one place;
- EGL/Mesa variables that break context creation (__EGL_VENDOR_LIBRARY_FILENAMES/DIRS pointing nowhere,
  MESA_GL_VERSION_OVERRIDE below 3.3, GALLIUM_DRIVER=garbage) are named by Context.headless()'s error and by the
  doctor, which prints every GLTENSOR_*, __EGL_*, MESA_*, GALLIUM_* and CUDA_VISIBLE_DEVICES variable it sees;
- `python -m gltensor` refuses --frames -1, --size 99999x99999 and sizes beyond the GL's limit with one line;
- upload and context messages that said the wrong thing.
"""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from OpenGL import GL

import gltensor

pytestmark = pytest.mark.usefixtures("gl")

RUNTIME = {"GLTENSOR_DEPTH_PATH": ["auto", "readpixels", "compute", ""],
           "GLTENSOR_TEXTURE_REGION_READ": ["auto", "framebuffer", ""],
           "GLTENSOR_UPLOAD_PATH": ["auto", "copy", ""]}
BAD_VALUES = ["readpixel", "Compute", "compute ", "1", "yes", "framebuffers", "auto,copy"]


def run_py(code, env=None, timeout=120):
    full = dict(os.environ, PYOPENGL_PLATFORM="egl", **(env or {}))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full, timeout=timeout)


def make_objects(tex, buf):
    return [lambda: gltensor.Capture(tex, backend="cpu"), lambda: gltensor.Upload(tex, backend="cpu"),
            lambda: gltensor.Buffer(buf, backend="cpu"), lambda: gltensor.Batch([tex], backend="cpu"),
            lambda: gltensor.Atlas(tex, tiles=(1, 1), backend="cpu"), lambda: gltensor.Context.headless()]


@pytest.fixture
def tex_and_buf(make_texture):
    tex = make_texture("RGBA8", 4, 4).name
    buf = GL.glGenBuffers(1)
    GL.glBindBuffer(GL.GL_ARRAY_BUFFER, buf)
    GL.glBufferData(GL.GL_ARRAY_BUFFER, 16, None, GL.GL_DYNAMIC_DRAW)
    GL.glBindBuffer(GL.GL_ARRAY_BUFFER, 0)
    yield tex, int(buf)
    GL.glDeleteBuffers(1, [buf])


@pytest.mark.parametrize("bad", BAD_VALUES)
@pytest.mark.parametrize("var", sorted(RUNTIME))
def test_unknown_gltensor_values_are_refused(var, bad, tex_and_buf, monkeypatch, gl):
    monkeypatch.setenv(var, bad)
    for make in make_objects(*tex_and_buf):
        with pytest.raises(gltensor.InvalidArgumentError) as e:
            make().close()
        msg = str(e.value)
        assert f"{var}={bad}" in msg, msg
        for valid in RUNTIME[var]:
            assert valid in msg, msg
        gl.make_current()


@pytest.mark.parametrize("var", sorted(RUNTIME))
def test_known_gltensor_values_work(var, tex_and_buf, monkeypatch, gl):
    for value in RUNTIME[var]:
        monkeypatch.setenv(var, value)
        for make in make_objects(*tex_and_buf):
            make().close()
            gl.make_current()


BREAKERS = {
    "__EGL_VENDOR_LIBRARY_FILENAMES": "/nonexistent/10_vendor.json",
    "__EGL_VENDOR_LIBRARY_DIRS": "/nonexistent/egl_vendor.d",
    "MESA_GL_VERSION_OVERRIDE": "2.1",
    "GALLIUM_DRIVER": "garbage",
    "MESA_LOADER_DRIVER_OVERRIDE": "garbage",
}


@pytest.mark.parametrize("var", sorted(BREAKERS))
def test_context_error_names_the_variable_that_breaks_it(var):
    """With the variable set the context either still comes up (a driver it does not concern, NVIDIA's) or the
    error names the variable; it no longer says to install Mesa, which is installed."""
    r = run_py("""
        import gltensor
        try:
            gltensor.Context.headless().close()
            print("made")
        except gltensor.GLTensorError as e:
            print("ERROR", type(e).__name__, e)
    """, {var: BREAKERS[var]})
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout
    assert "made" in out or (var in out and "install Mesa" not in out), out


def run_doctor(env, *args):
    return run_py(f"""
        import sys
        from gltensor.doctor import main
        sys.exit(main({list(args) + ['--no-selftest']!r}))
    """, env)


def test_doctor_prints_every_variable_it_should():
    env = {"GLTENSOR_DEPTH_PATH": "compute", "GLTENSOR_SOMETHING": "1", "__EGL_FOO": "bar", "MESA_DEBUG": "silent",
           "GALLIUM_HUD": "fps", "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES", "0"),
           "LIBGL_DEBUG": "quiet"}
    r = run_doctor(env)
    for k, v in env.items():
        assert f"{k}={v}" in r.stdout, (k, r.stdout)
    assert "GLTENSOR_SOMETHING is set, but gltensor reads no variable of that name" in r.stdout


@pytest.mark.parametrize("var,value", [("GLTENSOR_DEPTH_PATH", "readpixel"), ("GLTENSOR_UPLOAD_PATH", "linear"),
                                       *sorted(BREAKERS.items())])
def test_doctor_flags_variables_that_break_the_context(var, value):
    r = run_doctor({var: value}, "--json")
    report = json.loads(r.stdout)
    env_findings = [f for f in report["findings"] if f["id"] == "environment"]
    if var.startswith("GLTENSOR_") or var.startswith("__EGL") or var == "MESA_GL_VERSION_OVERRIDE":
        assert any(f["evidence"]["variable"] == var for f in env_findings), report["findings"]
    context_failed = any(c.get("error") for c in report["facts"].get("contexts", []))
    for f in env_findings:  # an error where a context failed, a warning where the driver ignored it
        assert f["severity"] == ("error" if context_failed else "warning"), f
    if context_failed:
        assert r.returncode == 1
    for f in report["findings"]:
        if f["id"] == "context_failed":
            assert var in f["fix"] or var in f["cause"], f
            assert "see the findings above" not in f["fix"].lower() or env_findings
    text = run_doctor({var: value}).stdout
    assert f"{var}={value}   <- see below" in text or not env_findings, text


# ---------------------------------------------------------------- the CLI


@pytest.mark.parametrize("args,words", [
    (["--frames", "-1"], "--frames must be >= 0"),
    (["--frames", "x"], "--frames must be an int"),
    (["--size", "99999x99999"], "width and height must be 1 to 32768"),
    (["--size", "0x4"], "width and height must be 1 to"),
    (["--size=-4x4"], "width and height must be 1 to"),
    (["--size", "LIMIT", "--frames", "0"], "pick a smaller --size"),
    (["--camera", "-1"], "--camera must be >= 0"),
])
def test_cli_refuses_bad_arguments_in_one_line(args, words, tmp_path, gl):
    if "LIMIT" in args:  # one pixel beyond this GL's limit, where that is below the CLI's own 32768
        limit = min(int(GL.glGetIntegerv(GL.GL_MAX_TEXTURE_SIZE)), int(GL.glGetIntegerv(GL.GL_MAX_RENDERBUFFER_SIZE)))
        if limit >= 32768:
            pytest.skip(f"this GL allocates {limit} pixels a side, the CLI's own bound")
        args = [a.replace("LIMIT", f"{limit + 1}x64") for a in args]
    r = subprocess.run([sys.executable, "-m", "gltensor", *args, "--out", str(tmp_path / "f.png")],
                       capture_output=True, text=True, timeout=300, env=dict(os.environ, PYOPENGL_PLATFORM="egl"))
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert words in r.stderr, r.stderr
    assert "Traceback" not in r.stderr, r.stderr[-3000:]


# ---------------------------------------------------------------- messages


BACKENDS = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fmt,dtype,accepted,not_listed", [
    ("RGBA8", "float64", "uint8, uint16 (16-bit unorm), float16 or float32", "uint32"),
    ("RGBA8", "int64", "uint8, uint16 (16-bit unorm), float16 or float32", "uint32"),
    ("RGBA8UI", "float64", "uint8, uint16 or uint32", "float32"),
    ("RGBA8UI", "int8", "uint8, uint16 or uint32", "float16"),
])
def test_upload_dtype_message_lists_what_the_texture_takes(backend, fmt, dtype, accepted, not_listed, make_texture, gl):
    if backend == "cuda" and gl.cuda_device is None:
        pytest.skip("the session context runs on no CUDA device")
    img = make_texture(fmt, 4, 4)
    x = np.zeros((4, 4, 4), dtype)
    if backend == "cuda":
        torch = pytest.importorskip("torch")
        x = torch.from_numpy(x).cuda()
    with gltensor.Upload(img.name, backend=backend) as up:
        with pytest.raises(gltensor.InvalidArgumentError) as e:
            up.write(x)
    msg = str(e.value)
    assert accepted in msg and not_listed not in msg, msg
    assert str(img.name) in msg


def test_upload_null_source_message(make_texture):
    class Null:
        __array_interface__ = {"shape": (4, 4, 4), "typestr": "|u1", "data": (0, False), "version": 3}

    img = make_texture("RGBA8", 4, 4)
    with gltensor.Upload(img.name, backend="cpu") as up:
        with pytest.raises(gltensor.InvalidArgumentError) as e:
            up.write(Null())
    msg = str(e.value)
    assert "glt_upload_write" not in msg and "data pointer is NULL" in msg and "pass a tensor" in msg


def test_context_of_an_exited_thread_says_so():
    r = run_py("""
        import threading, gltensor
        box = []
        t = threading.Thread(target=lambda: box.append(gltensor.Context.headless()))
        t.start(); t.join()
        try:
            box[0].make_current()
            print("made current")
        except gltensor.EGLError as e:
            print(e)
        c = gltensor.Context.headless()  # a new context works
        c.close()
        print("new ok")
    """)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "new ok" in r.stdout
    if "made current" not in r.stdout:  # EGL drivers that do not release on thread exit
        assert "ended without releasing it" in r.stdout and "release it in the other thread" not in r.stdout, r.stdout
