"""`python -m gltensor doctor`: the report on this machine, the diagnosis of simulated environments
(facts injected into `diagnose`, or the environment variables a real run reads), and exceptions that
carry the doctor's explanation."""
import copy
import json
import os
import subprocess
import sys

import pytest

gltensor = pytest.importorskip("gltensor")
from gltensor import doctor  # noqa: E402


def run_doctor(*args, env=None, timeout=120):
    env = dict(os.environ if env is None else env)
    root = os.path.dirname(os.path.dirname(gltensor.__file__))  # the gltensor under test, wherever it lives
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return subprocess.run([sys.executable, "-m", "gltensor", "doctor", *args], capture_output=True, text=True,
                          env=env, timeout=timeout)


def ids(diagnosis):
    return [f["id"] for f in diagnosis["findings"]]


def finding(diagnosis, fid):
    return next(f for f in diagnosis["findings"] if f["id"] == fid)


# ------------------------------------------------------------------ this machine


@pytest.fixture(scope="module")
def here(ctx):
    ctx.make_current()
    facts = doctor.collect()
    assert ctx.renderer  # collect() made its own contexts current, then gave the caller's back
    return facts, doctor.diagnose(facts)


def test_report_names_python_build_and_egl(here):
    facts, _ = here
    assert facts["python"]["version"] == ".".join(map(str, sys.version_info[:3]))
    assert facts["gltensor"]["version"] == gltensor.__version__
    assert facts["gltensor"]["cuda_compiled"] == gltensor.cuda_compiled()
    if gltensor.cuda_compiled():
        assert facts["gltensor"]["cuda_code"].startswith("sm_") and "compute_" in facts["gltensor"]["cuda_code"]
        assert facts["gltensor"]["cudart_version"] >= 11000
    assert facts["egl"]["library"] == "libEGL.so.1"
    assert "EGL_EXT_platform_device" in facts["egl"]["client_extensions"]
    assert facts["egl"]["vendor_files"], "glvnd found no EGL vendor file, yet the suite's GL context exists"
    assert facts["cuda"]["device_count"] == gltensor.cuda_device_count()


def test_cpu_self_test_passes_on_every_context(here):
    facts, _ = here
    cpu = [r for r in facts["selftest"] if r["backend"] == "cpu"]
    assert cpu and all(r["ok"] is True for r in cpu), cpu
    assert all(r["us_per_read"] > 0 for r in cpu)


@pytest.mark.skipif(gltensor.cuda_available(), reason="the machine has a usable CUDA device")
def test_without_cuda_the_report_says_so_and_recommends_the_cpu_backend(here):
    facts, diagnosis = here
    assert facts["cuda"]["device_count"] == 0 and facts["cuda"]["unavailable_reason"]
    assert diagnosis["verdict"]["backend"] == "cpu"
    assert "CPU backend" in diagnosis["verdict"]["recommendation"]
    if facts["cuda"]["driver_version"] == 0 and not facts["cuda"]["kernel_driver"]:
        f = finding(diagnosis, "no_nvidia_driver" if gltensor.cuda_compiled() else "cuda_not_compiled")
        assert f["severity"] == "info"
    assert not [f for f in diagnosis["findings"] if f["severity"] == "error"], diagnosis["findings"]


@pytest.mark.gpu
def test_gpu_self_test_passes_on_every_device_and_auto_uses_cuda(here):
    facts, diagnosis = here
    for k in range(gltensor.cuda_device_count()):
        ctx = next(c for c in facts["contexts"] if c["requested"] == "cuda:%d" % k)
        assert not ctx.get("error") and not ctx["is_software"], ctx
        assert facts["egl_device_of_cuda"][str(k)] is not None
        for backend in ("cpu", "cuda"):
            r = next(r for r in facts["selftest"] if r["context"] == "cuda:%d" % k and r["backend"] == backend)
            assert r["ok"] is True, r
    assert diagnosis["verdict"]["backend"] == "cuda", diagnosis
    assert not [f for f in diagnosis["findings"] if f["severity"] == "error"], diagnosis["findings"]


def test_cli_text_and_json():
    text = run_doctor()
    assert text.returncode in (0, 1), text.stderr
    assert "verdict: backend='auto' uses" in text.stdout and "self-test" in text.stdout
    js = run_doctor("--json", "--no-selftest")
    report = json.loads(js.stdout)
    assert set(report) == {"facts", "findings", "verdict"}
    assert report["facts"]["gltensor"]["version"] == gltensor.__version__
    assert report["facts"]["selftest"] == []


def test_real_run_without_any_egl_vendor_file_explains_it(tmp_path):
    """glvnd pointed at a vendor file that does not exist: no GL context at all, and the report says why."""
    env = dict(os.environ, __EGL_VENDOR_LIBRARY_FILENAMES=str(tmp_path / "missing.json"))
    report = json.loads(run_doctor("--json", env=env).stdout)
    files = report["facts"]["egl"]["vendor_files"]
    assert files == [{"path": str(tmp_path / "missing.json"), "exists": False, "library": None, "loadable": False,
                      "error": files[0]["error"]}]
    assert "__EGL_VENDOR_LIBRARY_FILENAMES" in report["facts"]["egl"]["vendor_source"]
    assert "context_failed" in ids(report)
    assert report["verdict"]["backend"] is None


# ------------------------------------------------------------------ simulated machines

# A healthy NVIDIA machine, as collect() would describe it.
HEALTHY = {
    "python": {"version": "3.12.3", "implementation": "CPython", "executable": "/usr/bin/python3", "platform": "Linux"},
    "env": {"CUDA_VISIBLE_DEVICES": None, "NVIDIA_DRIVER_CAPABILITIES": None, "NVIDIA_VISIBLE_DEVICES": None,
            "__EGL_VENDOR_LIBRARY_FILENAMES": None, "__EGL_VENDOR_LIBRARY_DIRS": None, "EGL_PLATFORM": None,
            "DISPLAY": None},
    "gltensor": {"version": "0.2.0", "file": "/site/gltensor", "cuda_compiled": True, "cuda_code": "sm_90 compute_90",
                 "cudart_version": 13000},
    "cuda": {"driver_version": 13000, "kernel_driver": "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06",
             "physical_gpus": 1, "device_count": 1,
             "devices": [{"index": 0, "name": "NVIDIA H100", "pci_bus_id": "0000:00:05.0",
                          "compute_capability": [9, 0]}],
             "unavailable_reason": None},
    "egl": {"library": "libEGL.so.1", "client_extensions": ["EGL_EXT_platform_device"],
            "vendor_source": "the default directories /etc/glvnd/egl_vendor.d:/usr/share/glvnd/egl_vendor.d",
            "vendor_files": [
                {"path": "/usr/share/glvnd/egl_vendor.d/10_nvidia.json", "exists": True,
                 "library": "libEGL_nvidia.so.0", "loadable": True},
                {"path": "/usr/share/glvnd/egl_vendor.d/50_mesa.json", "exists": True,
                 "library": "libEGL_mesa.so.0", "loadable": True}],
            "devices": [{"index": 0, "extensions": ["EGL_NV_device_cuda"], "drm_node": "/dev/dri/card1",
                         "render_node": "/dev/dri/renderD128", "cuda_device": 0, "renderer": None, "vendor": None}]},
    "egl_device_of_cuda": {"0": 0},
    "contexts": [{"requested": "cuda:0", "vendor": "NVIDIA Corporation", "renderer": "NVIDIA H100/PCIe/SSE2",
                  "version": "4.6.0 NVIDIA 580.65.06", "cuda_device": 0, "is_software": False}],
    "selftest": [{"context": "cuda:0", "backend": "cpu", "ok": True, "us_per_read": 80.0},
                 {"context": "cuda:0", "backend": "cuda", "ok": True, "us_per_read": 20.0}],
    "auto": {"backend": "cuda", "reason": "the context runs on CUDA device 0", "context": "NVIDIA H100/PCIe/SSE2"},
    "slots": [{"context": "cuda:0", "gl": None, "cuda": None, "ok": True}],
    "vendor_fix": "export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/share/glvnd/egl_vendor.d/10_nvidia.json",
}


def machine(**changes):
    """HEALTHY with some facts replaced: changes map 'section.key' (or 'section') to a value."""
    facts = copy.deepcopy(HEALTHY)
    for path, value in changes.items():
        section, _, key = path.partition("__")
        if key:
            facts[section][key] = value
        else:
            facts[section] = value
    return facts


def test_healthy_machine_has_no_findings_and_uses_cuda():
    d = doctor.diagnose(machine())
    assert d["findings"] == []
    assert d["verdict"]["backend"] == "cuda"
    assert "frames stay on the GPU" in d["verdict"]["recommendation"]


def test_missing_nvidia_vendor_file():
    """Only Mesa's vendor file: the context comes up on llvmpipe; cause and fix name the vendor file."""
    mesa_only = [HEALTHY["egl"]["vendor_files"][1]]
    software = [dict(HEALTHY["contexts"][0], vendor="Mesa", renderer="llvmpipe (LLVM 15.0.6, 256 bits)",
                     cuda_device=None, is_software=True)]
    d = doctor.diagnose(machine(egl__vendor_files=mesa_only, contexts=software, egl_device_of_cuda={"0": None},
                                auto={"backend": "cpu", "reason": "the context runs on no CUDA device"}))
    assert ids(d)[:2] == ["no_nvidia_egl_vendor", "software_renderer"], ids(d)
    f = finding(d, "no_nvidia_egl_vendor")
    assert "50_mesa.json" in f["cause"] and "libEGL_nvidia.so.0" in f["cause"]
    assert f["fix"] == HEALTHY["vendor_fix"]
    assert "__EGL_VENDOR_LIBRARY_FILENAMES" in finding(d, "software_renderer")["fix"]
    assert d["verdict"]["backend"] == "cpu" and "fix the errors" in d["verdict"]["recommendation"]


def test_cuda_visible_devices_hiding_the_gpu():
    d = doctor.diagnose(machine(env__CUDA_VISIBLE_DEVICES="", cuda__device_count=0, cuda__devices=[],
                                cuda__unavailable_reason="CUDA is unavailable: no CUDA device is visible",
                                egl_device_of_cuda={}, contexts=[{"requested": "default", "vendor": "NVIDIA",
                                                                  "renderer": "NVIDIA H100", "version": "4.6",
                                                                  "cuda_device": None, "is_software": False}],
                                auto={"backend": "cpu", "reason": "CUDA is unavailable"}))
    assert ids(d) == ["cuda_hidden"]
    f = finding(d, "cuda_hidden")
    assert "CUDA_VISIBLE_DEVICES=''" in f["cause"]
    assert "unset CUDA_VISIBLE_DEVICES" in f["fix"]


def test_container_without_graphics_capability():
    no_nvidia_gl = [dict(HEALTHY["egl"]["vendor_files"][0], loadable=False,
                         error="libEGL_nvidia.so.0: cannot open shared object file")]
    d = doctor.diagnose(machine(env__NVIDIA_DRIVER_CAPABILITIES="compute,utility", egl__vendor_files=no_nvidia_gl,
                                egl_device_of_cuda={"0": None}))
    assert ids(d)[:2] == ["container_no_graphics", "nvidia_egl_unloadable"], ids(d)
    assert finding(d, "container_no_graphics")["severity"] == "error"
    assert "NVIDIA_DRIVER_CAPABILITIES=compute,utility,graphics" in finding(d, "container_no_graphics")["fix"]
    # "all" and "graphics" are both fine
    for caps in ("all", "compute,graphics"):
        assert "container_no_graphics" not in ids(doctor.diagnose(machine(env__NVIDIA_DRIVER_CAPABILITIES=caps)))


def test_compute_only_capability_with_the_gl_side_still_present_is_a_warning():
    """The variable only matters when the container starts: here NVIDIA's EGL is loaded and every CUDA
    device has its EGL device, so the report warns instead of failing."""
    d = doctor.diagnose(machine(env__NVIDIA_DRIVER_CAPABILITIES="compute"))
    assert ids(d) == ["container_no_graphics"] and d["findings"][0]["severity"] == "warning"
    assert "NVIDIA_DRIVER_CAPABILITIES='compute'" in d["findings"][0]["cause"]


def test_driver_older_than_the_build():
    d = doctor.diagnose(machine(cuda__driver_version=12040, cuda__device_count=0, cuda__devices=[],
                                egl_device_of_cuda={}))
    f = finding(d, "driver_too_old")
    assert "CUDA 12.4" in f["cause"] and "CUDA 13.0" in f["cause"]
    assert "r580" in f["fix"]
    assert "cuda_hidden" not in ids(d)


def test_no_egl_device_for_the_cuda_device():
    d = doctor.diagnose(machine(egl_device_of_cuda={"0": None}, egl__devices=[]))
    f = finding(d, "no_egl_device_for_cuda")
    assert "CUDA device 0 (NVIDIA H100, 0000:00:05.0)" in f["cause"]


def test_self_test_mismatch_is_reported():
    bad = [dict(HEALTHY["selftest"][1], ok=False, detail="first wrong pixel (row 0, column 0)")]
    d = doctor.diagnose(machine(selftest=bad))
    assert ids(d) == ["selftest_mismatch"] and "row 0, column 0" in d["findings"][0]["cause"]


def test_shared_slots_that_cannot_use_cuda_are_a_warning_with_the_fallback():
    no_compression = [{"context": "cuda:0", "gl": None, "ok": False,
                       "cuda": "GLT_UNSUPPORTED: CUDA device 0 cannot allocate compressible memory (...)"}]
    facts = machine(slots=no_compression)
    d = doctor.diagnose(facts)
    f = finding(d, "slots_cuda_unsupported")
    assert f["severity"] == "warning" and "compressible memory" in f["cause"] and "backend='cpu'" in f["fix"]
    assert "slots       cuda:0: CPU slots only (GLT_UNSUPPORTED: CUDA device 0 cannot allocate" in \
        doctor.format_report(facts, d)
    no_extension = [{"context": "cuda:0", "cuda": None, "ok": False,
                     "gl": "GLT_UNSUPPORTED: this GL driver (X) lacks GL_EXT_memory_object_fd (extension missing)"}]
    assert "GL_EXT_memory_object_fd" in finding(doctor.diagnose(machine(slots=no_extension)),
                                                 "slots_cuda_unsupported")["cause"]
    # a context on no CUDA device (Mesa) is not a finding: CPU slots are what it can have
    mesa = [{"context": "default", "gl": None, "cuda": "this context runs on no CUDA device", "ok": False}]
    assert "slots_cuda_unsupported" not in ids(doctor.diagnose(machine(slots=mesa)))


def test_this_machine_reports_shared_slots_per_context(here):
    facts, _ = here
    assert [r["context"] for r in facts["slots"]] == [c["requested"] for c in facts["contexts"] if not c.get("error")]
    for r in facts["slots"]:
        assert r["ok"] == (r["gl"] is None and r["cuda"] is None)
        if r["context"].startswith("cuda:"):
            assert r["ok"], r  # NVIDIA GPUs of this project's machines (H100, H200) hold CUDA slots
        else:
            assert r["cuda"] == "this context runs on no CUDA device"


def test_report_text_of_a_simulated_machine():
    facts = machine(env__NVIDIA_DRIVER_CAPABILITIES="compute")
    text = doctor.format_report(facts, doctor.diagnose(facts))
    assert "cuda:0     NVIDIA H100, 0000:00:05.0, sm_90" in text
    assert "* /usr/share/glvnd/egl_vendor.d/10_nvidia.json -> libEGL_nvidia.so.0" in text
    assert "EGL device 0: unnamed, DRM /dev/dri/renderD128, CUDA device 0" in text
    assert "[warning] container without the graphics capability" in text
    assert "slots       cuda:0: CUDA shared slots possible" in text


# ------------------------------------------------------------------ exceptions carry the same explanation


@pytest.mark.parametrize("name,fid", [
    ("cudaErrorInvalidGraphicsContext", "interop_invalid_graphics_context"),
    ("cudaErrorOperatingSystem", "interop_operating_system"),
    ("cudaErrorInvalidResourceHandle", "interop_invalid_resource_handle"),
    ("cudaErrorNotSupported", "interop_not_supported"),
    ("cudaErrorUnknown", "interop_unknown"),
])
def test_interop_error_names_are_explained(name, fid):
    hint = doctor.explain_error("cudaGraphicsGLRegisterImage failed (%s: ...): texture 3" % name)
    _, cause, fix = doctor.KNOWN_FAILURES[fid]
    assert hint.startswith("gltensor doctor: ") and cause.rstrip(".") in hint and fix in hint


def test_egl_side_messages_are_explained():
    hint = doctor.explain_error("no NVIDIA EGL device found among 1 EGL devices; install ...", "GLT_EGL_ERROR")
    assert "none of them names the NVIDIA driver" in hint and "Fix: " in hint
    hint = doctor.explain_error("no NVIDIA EGL device runs on CUDA device 3 (tried 0, 1)", "GLT_WRONG_DEVICE")
    assert "CUDA device 3 (" in hint and "NVIDIA_DRIVER_CAPABILITIES" in hint


def test_unknown_messages_get_no_explanation():
    assert doctor.explain_error("glTexImage2D: GL_INVALID_VALUE") is None


@pytest.mark.skipif(gltensor.cuda_available(), reason="the machine has a usable CUDA device")
def test_cuda_unavailable_error_carries_the_doctor_explanation(gl):
    gl = doctor._GL()
    tex = gl.pattern_texture(8, 8, doctor.QUADRANTS)
    try:
        with pytest.raises(gltensor.CudaUnavailableError) as e:
            gltensor.Capture(tex, gltensor.GL_TEXTURE_2D, backend="cuda")
    finally:
        gl.delete_texture(tex)
    message = str(e.value)
    first, _, hint = message.partition("\n")
    assert "gltensor doctor: " not in first
    assert hint == doctor.explain_error(first, "GLT_CUDA_UNAVAILABLE"), message
    assert hint.startswith("gltensor doctor: ")


@pytest.mark.skipif(gltensor.cuda_available(), reason="the machine has a usable CUDA device")
def test_context_on_a_cuda_device_without_cuda_explains_why():
    """CudaUnavailableError from the EGL side carries the doctor's reading of the environment too."""
    with pytest.raises(gltensor.CudaUnavailableError) as e:
        gltensor.Context.headless(cuda_device=0)
    hint = str(e.value).partition("\n")[2]
    assert hint == doctor._explain_cuda_unavailable() and hint.startswith("gltensor doctor: "), str(e.value)


# ------------------------------------------------------------------ the advice fits the machine

NO_DRIVER = not os.path.exists("/proc/driver/nvidia/version")


@pytest.mark.skipif(not (NO_DRIVER and gltensor.cuda_compiled()), reason="needs a CUDA build on a machine without "
                    "an NVIDIA driver")
def test_without_a_driver_no_line_advises_the_cpu_backend_already_in_use(gl, tmp_path):
    """Where backend='auto' is already on the CPU backend, its reason says why (no NVIDIA driver) and what gives GPU
    tensors, never "use the CPU backend"; only a backend='cuda' request is told that 'auto'/'cpu' works here."""
    import numpy as np
    from OpenGL import GL

    tex = int(GL.glGenTextures(1))
    try:
        GL.glBindTexture(GL.GL_TEXTURE_2D, tex)
        GL.glTexStorage2D(GL.GL_TEXTURE_2D, 1, GL.GL_RGBA8, 8, 4)
        cap = gltensor.Capture(tex)
        assert cap.backend == "cpu"
        assert "no NVIDIA driver is loaded on this machine" in cap.backend_reason, cap.backend_reason
        assert "for GPU tensors use a machine with an NVIDIA GPU" in cap.backend_reason
        assert "use the CPU backend" not in cap.backend_reason
        assert np.asarray(cap.read()).shape == (4, 8, 4)
        cap.close()
        with pytest.raises(gltensor.CudaUnavailableError) as e:
            gltensor.Capture(tex, backend="cuda")
        assert "backend='cuda' was requested" in str(e.value)
        assert "pass backend='auto' or 'cpu' to run here on the CPU backend" in str(e.value)
    finally:
        GL.glDeleteTextures(1, [tex])
    text = run_doctor("--no-selftest").stdout
    assert "no NVIDIA driver is loaded on this machine" in text and "use the CPU backend" not in text, text
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(gltensor.__file__))]
                                        + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    demo = subprocess.run([sys.executable, "-m", "gltensor", "--frames", "2", "--size", "32x32", "--out",
                           str(tmp_path / "frame.png")], capture_output=True, text=True, timeout=120, env=env)
    line = [ln for ln in demo.stdout.splitlines() if ln.startswith("backend: ")]
    assert demo.returncode == 0 and line, demo.stdout + demo.stderr
    assert line[0].startswith("backend: cpu (") and "no NVIDIA driver is loaded" in line[0]
    assert "use the CPU backend" not in demo.stdout
