"""`python -m gltensor doctor`: what this machine gives gltensor, which backend `auto` picks and why, and
for each known failure its plain cause and the exact fix.

    python -m gltensor doctor           # a readable report
    python -m gltensor doctor --json    # the same facts and diagnosis as JSON

The report is built in two steps so that each can be tested alone: `collect()` probes the machine
(Python, the build, the NVIDIA driver and CUDA devices, EGL vendor files and devices, a headless GL
context per device and a self-test that renders a known pattern and captures it on every backend), and
`diagnose(facts)` turns those facts into findings and a verdict without touching the machine. The table
of known failures (`KNOWN_FAILURES`, in gltensor._hints) is the one place their explanations live: the exceptions
gltensor raises append the same text (`explain_error`, which the extension imports from that small module).

Needs nothing beyond the standard library and gltensor; EGL devices and the caller's GL context come from the
core (the same code the library uses); the self-test's drawing and the vendor-library checks use ctypes.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import glob
import json
import os
import platform
import sys
import time
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ._hints import (  # noqa: F401  (the table of known failures and its wording: one place, shared)
    KNOWN_FAILURES,
    _DRIVER_BRANCH,
    _NVIDIA_VENDOR_CANDIDATES,
    _DEFAULT_VENDOR_DIRS,
    _version_text,
    _finding,
    _hint,
    explain_error,
    _device_fields,
    _explain_cuda_unavailable,
    _driver_fields,
    _has_graphics,
    _vendor_files,
    _vendor_fix,
)

Facts = Dict[str, Any]

# Variables the doctor shows: every one with these prefixes, and these names.
_ENV_PREFIXES = ("GLTENSOR_", "__EGL_", "MESA_", "GALLIUM_", "EGL_", "LIBGL_")
_ENV_NAMES = ("CUDA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "NVIDIA_VISIBLE_DEVICES", "DISPLAY")
# GLTENSOR_ variables the library reads at run time (src/core/env.c), and those of the build and the test suite.
GLTENSOR_RUNTIME = ("GLTENSOR_DEPTH_PATH", "GLTENSOR_TEXTURE_REGION_READ", "GLTENSOR_UPLOAD_PATH",
                    "GLTENSOR_SLOTS_WRITE", "GLTENSOR_SLOTS_COMPRESSION", "GLTENSOR_SLOTS_ALIGN",
                    "GLTENSOR_SLOTS_PACK_INPUT", "GLTENSOR_EGL_DEVICE_UUID")
GLTENSOR_TOOLING = ("GLTENSOR_NO_CUDA", "GLTENSOR_CUDA_ARCHS", "GLTENSOR_SANITIZE", "GLTENSOR_UNDER_SANITIZER",
                    "GLTENSOR_TEST_INSTALLED", "GLTENSOR_SOAK_READS", "GLTENSOR_HYPOTHESIS_EXAMPLES",
                    "GLTENSOR_CYCLES", "GLTENSOR_P3D_PRC")


def environment(environ: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """Every variable that shapes what gltensor, EGL, Mesa and CUDA do in this process, by name."""
    environ = os.environ if environ is None else environ
    return {k: environ[k] for k in sorted(environ) if k.startswith(_ENV_PREFIXES) or k in _ENV_NAMES}


# ---------------------------------------------------------------------------------------- probes



class _GL:
    """glClear-based drawing of the self-test pattern (no shaders, no PyOpenGL), through libOpenGL (glvnd)."""

    TEXTURE_2D, RGBA8, RGBA, UNSIGNED_BYTE = 0x0DE1, 0x8058, 0x1908, 0x1401
    FRAMEBUFFER, COLOR_ATTACHMENT0, FRAMEBUFFER_BINDING, FRAMEBUFFER_COMPLETE = 0x8D40, 0x8CE0, 0x8CA6, 0x8CD5
    SCISSOR_TEST, COLOR_BUFFER_BIT, MIN_FILTER, NEAREST = 0x0C11, 0x4000, 0x2801, 0x2600

    def __init__(self) -> None:
        try:
            self.lib = ctypes.CDLL("libOpenGL.so.0")
        except OSError:
            self.lib = ctypes.CDLL("libGL.so.1")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.lib, name)

    def pattern_texture(self, width: int, height: int, quadrants: List[Tuple[int, int, int, int]]) -> int:
        """A GL_RGBA8 texture whose four quadrants are cleared to `quadrants` (GL order: bottom-left,
        bottom-right, top-left, top-right). Returns its name; the caller deletes it."""
        u = ctypes.c_uint
        tex, fbo, prev = u(0), u(0), ctypes.c_int(0)
        self.glGenTextures(1, ctypes.byref(tex))
        self.glBindTexture(self.TEXTURE_2D, tex)
        self.glTexParameteri(self.TEXTURE_2D, self.MIN_FILTER, self.NEAREST)
        self.glTexImage2D(self.TEXTURE_2D, 0, self.RGBA8, width, height, 0, self.RGBA, self.UNSIGNED_BYTE, None)
        self.glGetIntegerv(self.FRAMEBUFFER_BINDING, ctypes.byref(prev))
        self.glGenFramebuffers(1, ctypes.byref(fbo))
        self.glBindFramebuffer(self.FRAMEBUFFER, fbo)
        self.glFramebufferTexture2D(self.FRAMEBUFFER, self.COLOR_ATTACHMENT0, self.TEXTURE_2D, tex, 0)
        if self.glCheckFramebufferStatus(self.FRAMEBUFFER) != self.FRAMEBUFFER_COMPLETE:
            raise RuntimeError("the self-test framebuffer is incomplete")
        self.glEnable(self.SCISSOR_TEST)
        hw, hh = width // 2, height // 2
        boxes = [(0, 0, hw, hh), (hw, 0, width - hw, hh), (0, hh, hw, height - hh), (hw, hh, width - hw, height - hh)]
        for (x, y, w, h), rgba in zip(boxes, quadrants):
            self.glScissor(x, y, w, h)
            self.glClearColor(*[ctypes.c_float(c / 255.0) for c in rgba])
            self.glClear(self.COLOR_BUFFER_BIT)
        self.glDisable(self.SCISSOR_TEST)
        self.glBindFramebuffer(self.FRAMEBUFFER, prev.value)
        self.glDeleteFramebuffers(1, ctypes.byref(fbo))
        self.glFinish()
        return tex.value

    def delete_texture(self, name: int) -> None:
        t = ctypes.c_uint(name)
        self.glDeleteTextures(1, ctypes.byref(t))


QUADRANTS = [(255, 0, 0, 255), (0, 255, 0, 255), (0, 0, 255, 255), (255, 255, 255, 255)]


def expected_pattern(width: int, height: int) -> bytes:
    """The self-test image as gltensor returns it by default: RGBA8, top row first."""
    bl, br, tl, tr = (bytes(c) for c in QUADRANTS)
    hw, hh = width // 2, height // 2
    top = (tl * hw + tr * (width - hw)) * (height - hh)
    bottom = (bl * hw + br * (width - hw)) * hh
    return top + bottom


def _cuda_to_host(frame: Any) -> Optional[bytes]:
    """A CUDA frame's bytes on the host, through the CUDA driver API (no framework needed)."""
    frame.synchronize()
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    ordinal = int(str(frame.device).split(":")[1])
    dev, ctx = ctypes.c_int(0), ctypes.c_void_p()
    host = ctypes.create_string_buffer(frame.nbytes)
    if cuda.cuInit(0) or cuda.cuDeviceGet(ctypes.byref(dev), ordinal):
        return None
    if cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev):
        return None
    try:
        if cuda.cuCtxPushCurrent_v2(ctx):
            return None
        rc = cuda.cuMemcpyDtoH_v2(host, ctypes.c_uint64(frame.data_ptr), ctypes.c_size_t(frame.nbytes))
        popped = ctypes.c_void_p()
        cuda.cuCtxPopCurrent_v2(ctypes.byref(popped))
        return host.raw if rc == 0 else None
    finally:
        cuda.cuDevicePrimaryCtxRelease_v2(dev)


def _frame_bytes(frame: Any) -> Optional[bytes]:
    if frame.device == "cpu":
        return ctypes.string_at(frame.data_ptr, frame.nbytes)
    return _cuda_to_host(frame)


def _self_test(gltensor: Any, ctx: Any, label: str, width: int = 256, height: int = 192,
               reads: int = 30) -> List[Dict[str, Any]]:
    """Renders the pattern in ctx, captures it on every backend, compares, times `reads` reads."""
    gl = _GL()
    results = []
    ctx.make_current()
    tex = gl.pattern_texture(width, height, QUADRANTS)
    want = expected_pattern(width, height)
    try:
        for backend in ("cpu", "cuda"):
            r: Dict[str, Any] = {"context": label, "backend": backend, "size": [width, height]}
            if backend == "cuda" and ctx.cuda_device is None:
                r.update(ok=None, detail="skipped: this context runs on no CUDA device")
                results.append(r)
                continue
            try:
                with gltensor.Capture(tex, gltensor.GL_TEXTURE_2D, backend=backend) as cap:
                    frame = cap.read()
                    got = _frame_bytes(frame)
                    if got is None:
                        r.update(ok=None, detail="captured, but the CUDA driver API could not copy it back to compare")
                    elif got == want:
                        r.update(ok=True, detail="equal to the rendered pattern")
                    else:
                        bad = next(i for i in range(len(want)) if i >= len(got) or got[i] != want[i]) // 4
                        r.update(ok=False, detail="%d bytes, first wrong pixel (row %d, column %d)"
                                 % (len(got), bad // width, bad % width))
                    start = time.perf_counter()
                    for _ in range(reads):
                        f = cap.read()
                    f.synchronize()
                    r["us_per_read"] = round((time.perf_counter() - start) / reads * 1e6, 1)
            except Exception as e:  # noqa: BLE001 - a failing backend is what the report is for
                r.update(ok=False, error="%s: %s" % (type(e).__name__, str(e).split("\n")[0]))
            results.append(r)
    finally:
        gl.delete_texture(tex)
    return results


def collect(run_selftest: bool = True) -> Facts:
    """Probes this machine and process; returns the facts `diagnose` reads (JSON-serialisable)."""
    facts: Facts = {
        "python": {"version": platform.python_version(), "implementation": platform.python_implementation(),
                   "executable": sys.executable, "platform": platform.platform()},
        "env": {**{k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
                                                 "NVIDIA_VISIBLE_DEVICES", "__EGL_VENDOR_LIBRARY_FILENAMES",
                                                 "__EGL_VENDOR_LIBRARY_DIRS", "EGL_PLATFORM", "DISPLAY")},
                **environment()},
    }
    try:
        import gltensor
        from . import _gltensor
    except ImportError as e:
        facts["gltensor"] = {"error": str(e)}
        return facts
    facts["env_problems"] = _gltensor._environment_problems()
    build = _gltensor._build_info()
    facts["gltensor"] = {"version": gltensor.__version__, "file": os.path.dirname(gltensor.__file__), **build}

    nvidia_proc = "/proc/driver/nvidia/version"
    kernel_driver = None
    if os.path.exists(nvidia_proc):
        with open(nvidia_proc) as f:
            kernel_driver = f.readline().strip()
    physical = len(glob.glob("/proc/driver/nvidia/gpus/*")) if os.path.isdir("/proc/driver/nvidia/gpus") else 0
    count = gltensor.cuda_device_count()
    devices = []
    for k in range(count):
        try:
            devices.append({"index": k, **_gltensor._cuda_device_info(k)})
        except gltensor.GLTensorError as e:
            devices.append({"index": k, "error": str(e).split("\n")[0]})
    facts["cuda"] = {"driver_version": _gltensor._cuda_driver_version(), "kernel_driver": kernel_driver,
                     "physical_gpus": physical, "device_count": count, "devices": devices,
                     "unavailable_reason": (gltensor.cuda_unavailable_reason() or "").split("\n")[0] or None}

    files, source = _vendor_files()
    egl: Dict[str, Any] = {"vendor_files": files, "vendor_source": source, "library": None}
    try:  # the core's EGL (glt_egl_device_get_info): the doctor loads libEGL no second way
        egl.update(library="libEGL.so.1", client_extensions=_gltensor._egl_client_extensions(),
                   devices=_gltensor._egl_devices())
    except gltensor.GLTensorError as err:
        egl["error"] = str(err).split("\n")[0]
    facts["egl"] = egl
    restore = _gltensor._save_gl_context()
    try:
        _probe_contexts(gltensor, facts, count, run_selftest)
    finally:
        if restore[0]:  # the caller's current context, if it had one, is current again
            _gltensor._restore_gl_context(restore)
    return facts


def _probe_contexts(gltensor: Any, facts: Facts, count: int, run_selftest: bool) -> None:
    facts["egl_device_of_cuda"] = {}
    for dev in range(count):
        try:
            facts["egl_device_of_cuda"][str(dev)] = gltensor.egl_device_index(dev)
        except gltensor.GLTensorError as err:
            facts["egl_device_of_cuda"][str(dev)] = None
            facts.setdefault("egl_device_errors", {})[str(dev)] = str(err).split("\n")[0]

    # One headless context per CUDA device, else the default one (Mesa's software renderer on CPU machines).
    facts["contexts"], facts["selftest"] = [], []
    requests: List[Optional[int]] = list(range(count)) if count else [None]
    for k in requests:
        label = "cuda:%d" % k if k is not None else "default"
        c: Dict[str, Any] = {"requested": label}
        try:
            ctx = gltensor.Context.headless(cuda_device=k) if k is not None else gltensor.Context.headless()
        except Exception as err:  # noqa: BLE001
            c["error"] = "%s: %s" % (type(err).__name__, str(err).split("\n")[0])
            facts["contexts"].append(c)
            continue
        with ctx:
            c.update(vendor=ctx.vendor, renderer=ctx.renderer, version=ctx.version, cuda_device=ctx.cuda_device,
                     is_software=bool(ctx.is_software))
            if run_selftest:
                try:
                    facts["selftest"] += _self_test(gltensor, ctx, label)
                except Exception as err:  # noqa: BLE001
                    facts["selftest"].append({"context": label, "backend": "-", "ok": False,
                                              "error": "%s: %s" % (type(err).__name__, err)})
            if k == requests[0]:
                facts["auto"] = _auto_backend(gltensor, ctx)
            facts.setdefault("slots", []).append(_slots_support(gltensor, ctx, label))
        facts["contexts"].append(c)


def _slots_support(gltensor: Any, ctx: Any, label: str) -> Dict[str, Any]:
    """Whether shared slots can use CUDA in ctx: the GPU's side (exportable, compressible memory) and GL's
    (GL_EXT_memory_object_fd). Slots on the CPU backend work wherever a capture does."""
    from . import _gltensor

    ctx.make_current()
    r: Dict[str, Any] = {"context": label, "gl": _gltensor._slots_gl_support()}
    r["cuda"] = (_gltensor._slots_cuda_support(ctx.cuda_device) if ctx.cuda_device is not None
                 else "this context runs on no CUDA device")
    r["ok"] = r["gl"] is None and r["cuda"] is None
    return r


def _auto_backend(gltensor: Any, ctx: Any) -> Dict[str, Any]:
    """What backend='auto' picks in ctx, asked of the library itself."""
    gl = _GL()
    ctx.make_current()
    tex = gl.pattern_texture(8, 8, QUADRANTS)
    try:
        with gltensor.Capture(tex, gltensor.GL_TEXTURE_2D) as cap:
            return {"backend": cap.backend, "reason": cap.backend_reason, "context": ctx.renderer}
    except Exception as err:  # noqa: BLE001
        return {"backend": None, "reason": "%s: %s" % (type(err).__name__, str(err).split("\n")[0])}
    finally:
        gl.delete_texture(tex)


# ---------------------------------------------------------------------------------------- diagnosis


def diagnose(facts: Facts) -> Dict[str, Any]:
    """Findings (known failures that apply, with cause and fix) and the verdict, from `collect()`'s facts."""
    findings: List[Dict[str, Any]] = []
    g = facts.get("gltensor", {})
    cuda = facts.get("cuda", {})
    egl = facts.get("egl", {})
    env = facts.get("env", {})
    files = egl.get("vendor_files", [])
    vendor_fix = facts.get("vendor_fix") or _vendor_fix(files)
    driver, runtime = cuda.get("driver_version", 0), g.get("cudart_version", 0)
    gpus_exist = bool(cuda.get("physical_gpus") or cuda.get("kernel_driver") or driver)
    count = cuda.get("device_count", 0)
    caps = env.get("NVIDIA_DRIVER_CAPABILITIES")

    # An error where it broke something (a context failed); a warning where this machine's driver ignores it
    # (MESA_* on an NVIDIA-only machine), so that the doctor's exit status stays about what fails.
    env_severity = "error" if any(c.get("error") for c in facts.get("contexts", [])) or not facts.get(
        "contexts") else "warning"
    for problem in facts.get("env_problems", []):
        # The core's own reading of the variable (src/core/env.c): "NAME=value <cause>; <fix>".
        cause, _, fix = problem.rpartition("; ")
        findings.append(_finding("environment", env_severity, problem=(cause or problem) + ".",
                                 fix=(fix[:1].upper() + fix[1:] + ".") if cause else "Unset it.",
                                 variable=problem.split("=", 1)[0]))
    for name in env:
        if name.startswith("GLTENSOR_") and env[name] is not None and name not in GLTENSOR_RUNTIME + GLTENSOR_TOOLING:
            findings.append(_finding("unknown_setting", "warning", name=name, known=", ".join(GLTENSOR_RUNTIME)))
    if egl.get("library") is None:
        findings.append(_finding("no_egl", "error", error=egl.get("error")))
    if not g.get("cuda_compiled"):
        findings.append(_finding("cuda_not_compiled", "warning" if gpus_exist else "info"))
    elif not gpus_exist:
        findings.append(_finding("no_nvidia_driver", "info"))
    elif runtime and driver and driver // 1000 < runtime // 1000:
        findings.append(_finding("driver_too_old", "error", **_driver_fields(driver, runtime)))
    if gpus_exist and count == 0 and env.get("CUDA_VISIBLE_DEVICES") is not None and not (
            runtime and driver and driver // 1000 < runtime // 1000):
        findings.append(_finding("cuda_hidden", "error", visible=env["CUDA_VISIBLE_DEVICES"]))
    nvidia_files = [f for f in files if f.get("library") and "nvidia" in f["library"].lower()]
    if gpus_exist and caps is not None and not _has_graphics(caps):
        # The variable is read when the container starts: an error when the GL side is visibly missing, else
        # a warning (the libraries are there now, but a restart with this value would lose them).
        gl_missing = not any(f.get("loadable") for f in nvidia_files) or any(
            facts.get("egl_device_of_cuda", {}).get(str(d["index"])) is None for d in cuda.get("devices", []))
        findings.append(_finding("container_no_graphics", "error" if gl_missing else "warning", capabilities=caps))
    if gpus_exist and egl.get("library") is not None:
        if not nvidia_files:
            vendors = ", ".join(os.path.basename(f["path"]) for f in files) or "no vendor at all"
            findings.append(_finding("no_nvidia_egl_vendor", "error", vendor_source=egl.get("vendor_source"),
                                     vendors=vendors, vendor_fix=vendor_fix))
        for f in nvidia_files:
            if not f.get("loadable"):
                findings.append(_finding("nvidia_egl_unloadable", "error", path=f["path"], library=f["library"]))
        if nvidia_files and any(f.get("loadable") for f in nvidia_files):
            mapping = facts.get("egl_device_of_cuda", {})
            for dev in cuda.get("devices", []):
                if mapping.get(str(dev["index"])) is None:
                    findings.append(_finding("no_egl_device_for_cuda", "error", cuda_device=dev["index"],
                                             name=dev.get("name"), pci=dev.get("pci_bus_id"),
                                             egl_devices=len(egl.get("devices", []))))
    for c in facts.get("contexts", []):
        if c.get("error"):
            hint = explain_error(c["error"]) if "gltensor doctor" not in c["error"] else None
            env_names = [f["evidence"]["variable"] for f in findings if f["id"] == "environment"]
            fix = hint.split("Fix: ", 1)[1] if hint else (
                "Fix or unset %s (see the environment findings: each says what the variable breaks)."
                % ", ".join(env_names) if env_names else
                "See the findings above; `python -m gltensor doctor --json` has the details." if findings
                else "Check that libEGL.so.1 and a driver (NVIDIA, or Mesa's libegl-mesa0) are installed.")
            findings.append(_finding("context_failed", "error", error=c["error"], fix=fix, context=c["requested"]))
        elif c["requested"].startswith("cuda:") and c.get("is_software"):
            findings.append(_finding("software_renderer", "error", cuda_device=c["requested"][5:],
                                     renderer=c.get("renderer"), vendor_fix=vendor_fix))
    for r in facts.get("slots", []):
        if r["context"].startswith("cuda:") and not r["ok"]:
            findings.append(_finding("slots_cuda_unsupported", "warning", context=r["context"],
                                     reason=(r["cuda"] or r["gl"] or "").split("\n")[0]))
    for r in facts.get("selftest", []):
        if r.get("error"):
            hint = explain_error(r["error"])
            fix = hint.split("Fix: ", 1)[1] if hint else "Report it with the output of `python -m gltensor doctor --json`."
            findings.append(_finding("selftest_failed", "error", backend=r["backend"], context=r["context"],
                                     error=r["error"], fix=fix))
        elif r.get("ok") is False:
            findings.append(_finding("selftest_mismatch", "error", backend=r["backend"], context=r["context"],
                                     detail=r.get("detail")))
    return {"findings": _dedupe(findings), "verdict": _verdict(facts, findings)}


def _dedupe(findings: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    seen, out = set(), []
    for f in findings:
        key = (f["id"], f["cause"])
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def _verdict(facts: Facts, findings: List[Dict[str, Any]]) -> Dict[str, Any]:
    auto = facts.get("auto") or {}
    errors = [f for f in findings if f["severity"] == "error"]
    backend = auto.get("backend")
    if backend is None:
        why = auto.get("reason") or (errors[0]["cause"] if errors else "no headless GL context could be made")
        return {"backend": None, "why": why, "recommendation": errors[0]["fix"] if errors else None}
    why = auto.get("reason", "")
    if backend == "cuda":
        rec = "backend='auto' (it uses CUDA here: frames stay on the GPU)."
    elif any(f["id"] in ("no_nvidia_driver", "cuda_not_compiled") for f in findings) and not errors:
        rec = ("the CPU backend: this machine has no usable NVIDIA GPU, so backend='auto' reads frames back to host "
               "memory (pixel-pack); that is the right backend here.")
    else:
        rec = ("fix the errors above to get the CUDA backend; until then backend='auto' uses the CPU backend."
               if errors else "backend='auto' (the CPU backend here).")
    return {"backend": backend, "why": why, "recommendation": rec}


# ---------------------------------------------------------------------------------------- report


def format_report(facts: Facts, diagnosis: Dict[str, Any]) -> str:
    out: List[str] = []
    add = out.append
    p, g = facts["python"], facts.get("gltensor", {})
    add("gltensor doctor")
    add("  Python      %s (%s) %s" % (p["version"], p["executable"], p["platform"]))
    if "error" in g:
        add("  gltensor    cannot be imported: %s" % g["error"])
        return "\n".join(out)
    add("  gltensor    %s at %s" % (g["version"], g["file"]))
    add("  build       CUDA backend: %s%s; CUDA runtime %s (static)" % (
        "yes" if g["cuda_compiled"] else "no", ", kernels " + g["cuda_code"] if g.get("cuda_code") else "",
        _version_text(g.get("cudart_version", 0))))
    cuda = facts["cuda"]
    add("  driver      %s; CUDA driver API %s" % (cuda["kernel_driver"] or "no NVIDIA kernel driver loaded",
                                                  _version_text(cuda["driver_version"])))
    add("  CUDA        %d device(s) visible (CUDA_VISIBLE_DEVICES=%s)%s" % (
        cuda["device_count"], facts["env"].get("CUDA_VISIBLE_DEVICES") or "<unset>",
        "" if cuda["device_count"] else ": " + (cuda.get("unavailable_reason") or "")))
    for d in cuda["devices"]:
        add("    cuda:%d     %s" % (d["index"], d.get("error") or "%s, %s, sm_%d%d" % (
            d["name"], d["pci_bus_id"], *d["compute_capability"])))
    shown = {k: v for k, v in facts["env"].items() if v is not None}
    flagged = {f["evidence"].get("variable") or f["evidence"].get("name") for f in diagnosis["findings"]
               if f["id"] in ("environment", "unknown_setting")}
    add("  environment %s" % ("%d variable(s) that shape gltensor, EGL, Mesa or CUDA:" % len(shown) if shown
                              else "no GLTENSOR_, __EGL_, MESA_, GALLIUM_ or CUDA variable is set"))
    for k, v in shown.items():
        add("    %s=%s%s" % (k, v, "   <- see below" if k in flagged else ""))
    egl = facts["egl"]
    add("  EGL         %s" % (egl.get("library") or "not loadable: %s" % egl.get("error")))
    if egl.get("client_extensions") is not None:
        add("    client extensions: %s" % " ".join(egl["client_extensions"]))
    add("    vendor files (%s), in the order glvnd tries them:" % egl["vendor_source"])
    for i, f in enumerate(egl["vendor_files"]):
        add("      %s %s -> %s%s" % ("*" if i == 0 else "-", f["path"], f["library"],
                                   "" if f["loadable"] else " (cannot be loaded)"))
    if not egl["vendor_files"]:
        add("      none")
    elif egl["vendor_files"]:
        add("      (* the default display's vendor; EGL devices come from every loadable vendor)")
    for d in egl.get("devices", []):
        name = " ".join(x for x in (d.get("vendor"), d.get("renderer")) if x) or (
            "Mesa software device" if "EGL_MESA_device_software" in d["extensions"] else "unnamed")
        add("    EGL device %d: %s, DRM %s, CUDA device %s" % (
            d["index"], name,
            d.get("render_node") or d.get("drm_node") or "none",
            d["cuda_device"] if d["cuda_device"] is not None else "none"))
    for k, idx in facts.get("egl_device_of_cuda", {}).items():
        add("    cuda:%s renders on EGL device %s" % (k, idx if idx is not None else "NONE"))
    for c in facts.get("contexts", []):
        if c.get("error"):
            add("  GL context  %s: failed: %s" % (c["requested"], c["error"]))
        else:
            add("  GL context  %s: %s | %s | %s%s" % (c["requested"], c["vendor"], c["renderer"], c["version"],
                                                   " (software)" if c["is_software"] else ""))
    for r in facts.get("selftest", []):
        status = {True: "PASS", False: "FAIL", None: "----"}[r.get("ok")]
        timing = " %.0f us/read" % r["us_per_read"] if "us_per_read" in r else ""
        add("  self-test   %s %s on %s: %s%s" % (status, r["backend"], r["context"],
                                                r.get("error") or r.get("detail"), timing))
    for r in facts.get("slots", []):
        add("  slots       %s: %s" % (r["context"], "CUDA shared slots possible (exportable compressible memory, "
                                       "GL_EXT_memory_object_fd)" if r["ok"] else "CPU slots only (%s)"
                                       % (r["cuda"] or r["gl"] or "").split("\n")[0]))
    v = diagnosis["verdict"]
    add("")
    add("verdict: backend='auto' uses %s here: %s" % (v["backend"] or "nothing (no capture possible)", v["why"]))
    if v.get("recommendation"):
        add("recommended: %s" % v["recommendation"])
    for f in diagnosis["findings"]:
        add("")
        add("[%s] %s" % (f["severity"], f["title"]))
        add("  cause: %s" % f["cause"])
        add("  fix:   %s" % f["fix"])
    return "\n".join(out)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gltensor doctor",
                                     description="What this machine gives gltensor, and how to fix what it lacks.")
    parser.add_argument("--json", action="store_true", help="print the facts and the diagnosis as JSON")
    parser.add_argument("--no-selftest", action="store_true", help="skip rendering and capturing the test pattern")
    args = parser.parse_args(argv)
    facts = collect(run_selftest=not args.no_selftest)
    diagnosis = diagnose(facts)
    if args.json:
        print(json.dumps({"facts": facts, **diagnosis}, indent=2, default=str))
    else:
        print(format_report(facts, diagnosis))
    failed = any(f["severity"] == "error" for f in diagnosis["findings"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
