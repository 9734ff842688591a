"""The plain cause and exact fix of each known environmental failure, worded once.

The extension appends `explain_error(message, status)` to CudaError, CudaUnavailableError, WrongDeviceError and
EGLError messages, and `python -m gltensor doctor` reports the same findings (`KNOWN_FAILURES`), so an exception
and the doctor say the same thing. This module is imported by the extension's error mapping on every such
exception: it needs the standard library only (no argparse, no probes), which keeps raising cheap.
"""

from __future__ import annotations

import ctypes
import glob
import json
import os
import re
from typing import Any, Dict, List, Mapping, Optional, Tuple

# ---------------------------------------------------------------------------------------- known failures

# id -> (title, plain cause, exact fix). Causes and fixes may name {placeholders} filled from the facts.
KNOWN_FAILURES: Dict[str, Tuple[str, str, str]] = {
    "no_egl": (
        "EGL is not installed",
        "libEGL.so.1 (the GL vendor-neutral dispatch library, glvnd) cannot be loaded, so no OpenGL context "
        "can be made at all.",
        "Install it: `apt-get install libegl1 libopengl0`; for the CPU backend without an NVIDIA GPU also "
        "`apt-get install libegl-mesa0 libgl1-mesa-dri` (Mesa's software renderer).",
    ),
    "cuda_not_compiled": (
        "this gltensor has no CUDA backend",
        "gltensor was built without a CUDA toolkit, so frames are always read back to host memory.",
        "Install the gltensor wheel (it contains the CUDA backend), or rebuild with nvcc on PATH or CUDA_HOME "
        "set (`pip install .` from a checkout). The CPU backend works meanwhile: backend='cpu'.",
    ),
    "no_nvidia_driver": (
        "no NVIDIA driver",
        "No NVIDIA driver is loaded on this machine (no /proc/driver/nvidia, the CUDA driver reports no "
        "version), so CUDA cannot run; gltensor uses the CPU backend (pixel-pack readback into host memory).",
        "Nothing to fix on a machine without an NVIDIA GPU: gltensor already runs on the CPU backend here "
        "(`backend='auto'` picks it). For GPU tensors run on a machine with an NVIDIA GPU and its driver; in a container run it with the GPU attached "
        "(`docker run --gpus all -e NVIDIA_DRIVER_CAPABILITIES=all ...`).",
    ),
    "driver_too_old": (
        "NVIDIA driver older than the build",
        "The NVIDIA driver supports CUDA {driver_cuda}, but this gltensor links the CUDA {runtime_cuda} "
        "runtime, which needs a driver for CUDA {runtime_major}.x.",
        "Upgrade the NVIDIA driver to one for CUDA {runtime_major} ({driver_branch} or newer), or use "
        "backend='cpu'.",
    ),
    "cuda_hidden": (
        "CUDA_VISIBLE_DEVICES hides the GPU",
        "The machine has NVIDIA GPUs, but CUDA_VISIBLE_DEVICES={visible!r} leaves this process none "
        "(an empty value, -1, or indices/UUIDs that do not exist).",
        "Unset it (`unset CUDA_VISIBLE_DEVICES`) or list the GPUs to use by index or UUID "
        "(`export CUDA_VISIBLE_DEVICES=0`; `nvidia-smi -L` lists them).",
    ),
    "container_no_graphics": (
        "container without the graphics capability",
        "NVIDIA_DRIVER_CAPABILITIES={capabilities!r} lacks `graphics`: the NVIDIA container runtime mounted "
        "CUDA but not the driver's EGL/OpenGL libraries (libEGL_nvidia.so.0, its glvnd vendor file), so GL "
        "runs on Mesa's software renderer or not at all, and CUDA cannot share its images.",
        "Start the container with the graphics capability: "
        "`docker run --gpus all -e NVIDIA_DRIVER_CAPABILITIES=compute,utility,graphics ...` (or `=all`; "
        "Kubernetes: set the same variable in the pod spec).",
    ),
    "no_nvidia_egl_vendor": (
        "no NVIDIA EGL vendor file",
        "glvnd reads its EGL drivers from vendor files ({vendor_source}); none of them names the NVIDIA "
        "driver (libEGL_nvidia.so.0), so EGL offers only {vendors} and the GL context cannot run on the "
        "NVIDIA GPU.",
        "{vendor_fix}",
    ),
    "nvidia_egl_unloadable": (
        "NVIDIA EGL library missing",
        "The vendor file {path} names {library}, which cannot be loaded: the driver's GL libraries are not "
        "installed here (a container without the graphics capability, or a driver installed without GL).",
        "Install the driver's GL part (Ubuntu: `apt-get install libnvidia-gl-<branch>`); in a container add "
        "`-e NVIDIA_DRIVER_CAPABILITIES=all`.",
    ),
    "no_egl_device_for_cuda": (
        "no EGL device for a CUDA device",
        "CUDA device {cuda_device} ({name}, {pci}) has no EGL device: EGL lists {egl_devices} device(s) and "
        "none of them is that GPU, so no GL context can run where CUDA reads (habitat-sim's \"unable to "
        "find CUDA device among EGL devices\").",
        "Make the NVIDIA EGL driver see every GPU CUDA sees: the NVIDIA vendor file must be found (see "
        "__EGL_VENDOR_LIBRARY_FILENAMES), the container needs NVIDIA_DRIVER_CAPABILITIES with `graphics`, "
        "and the device nodes /dev/nvidia* of that GPU must be present.",
    ),
    "software_renderer": (
        "software renderer picked instead of the GPU",
        "The headless GL context for CUDA device {cuda_device} came up on {renderer} (Mesa, CPU "
        "rasterisation), so captures cannot stay on the GPU.",
        "{vendor_fix}",
    ),
    "context_failed": (
        "no headless GL context",
        "Creating a headless OpenGL context failed: {error}",
        "{fix}",
    ),
    "environment": (
        "an environment variable breaks gltensor",
        "{problem}",
        "{fix}",
    ),
    "unknown_setting": (
        "a GLTENSOR_ variable gltensor does not read",
        "{name} is set, but gltensor reads no variable of that name at run time (it knows {known}); a typo "
        "leaves the setting you meant at its default.",
        "Rename it to the variable you meant, or unset it.",
    ),
    "slots_cuda_unsupported": (
        "shared slots cannot use CUDA here",
        "On {context}, CUDA shared slots (worker processes writing into the trainer's GPU memory with GL alone) "
        "are not possible: {reason}",
        "Use SharedSlots(..., backend='cpu') (shared host memory: one host->device copy per step for all "
        "workers), or put the cameras in one process (Atlas, Batch).",
    ),
    "selftest_mismatch": (
        "self-test captured wrong pixels",
        "The {backend} backend on {context} returned an image that differs from the pattern rendered "
        "({detail}).",
        "This is a gltensor or driver bug: report it with the output of `python -m gltensor doctor --json`; "
        "use the other backend meanwhile.",
    ),
    "selftest_failed": (
        "self-test capture failed",
        "Capturing on the {backend} backend on {context} raised: {error}",
        "{fix}",
    ),
    # CUDA-GL interop errors seen at register or map time, by CUDA error name.
    "interop_invalid_graphics_context": (
        "cudaErrorInvalidGraphicsContext (219)",
        "CUDA cannot share images with the current GL context: it is not an NVIDIA context on the CUDA "
        "device (Mesa/llvmpipe, a GLX context forwarded by VirtualGL or a remote X server, or another GPU).",
        "Capture in a context made on the NVIDIA EGL device of that GPU (`gltensor.Context.headless()`, or "
        "the engine's EGL device index from `gltensor.egl_device_index()`), or use backend='cpu'.",
    ),
    "interop_operating_system": (
        "cudaErrorOperatingSystem (304)",
        "An OS call inside the CUDA-GL interop failed; in containers this is the driver's GL side missing "
        "(NVIDIA_DRIVER_CAPABILITIES without `graphics`) or /dev/nvidia-modeset absent.",
        "Run with NVIDIA_DRIVER_CAPABILITIES=all and the GPU's device nodes, or use backend='cpu'.",
    ),
    "interop_invalid_resource_handle": (
        "cudaErrorInvalidResourceHandle (400)",
        "The GL object or the CUDA resource registered for it no longer exists in this context: the "
        "texture was deleted or re-created, or the capture is used from another GL context or thread.",
        "Keep the texture alive while its Capture exists, capture in the context that owns it, and make a "
        "new Capture (or use resizable=True) after re-creating the texture.",
    ),
    "interop_not_supported": (
        "cudaErrorNotSupported (801)",
        "The driver does not support CUDA-GL interop for this context or image (GLX through VirtualGL, "
        "a vGPU/MIG profile without graphics, or an image format CUDA cannot register).",
        "Render with a headless EGL context on the GPU (`gltensor.Context.headless()`), check that the "
        "image format is one gltensor lists, or use backend='cpu'.",
    ),
    "interop_unknown": (
        "cudaErrorUnknown (999)",
        "CUDA failed without a reason; with GL interop this is almost always a GL context CUDA cannot "
        "share with, typically a GLX context under VirtualGL (vglrun) or a remote X display.",
        "Render with EGL instead of GLX (`gltensor.Context.headless()`, or the engine's EGL/headless mode), "
        "outside vglrun; or use backend='cpu'.",
    ),
    "devices_unavailable": (
        "GPU busy in exclusive-process mode",
        "The GPU is in exclusive-process compute mode and another process holds it (cudaErrorDevicesUnavailable).",
        "Stop the other process, or switch the mode back: `nvidia-smi -c DEFAULT` (as root).",
    ),
}

# Driver branch that first supports each CUDA major version (CUDA's minor-version compatibility).
_DRIVER_BRANCH = {11: "r450", 12: "r525", 13: "r580"}
_NVIDIA_VENDOR_CANDIDATES = (
    "/usr/share/glvnd/egl_vendor.d/10_nvidia.json",
    "/etc/glvnd/egl_vendor.d/10_nvidia.json",
    "/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json",
    "/usr/local/share/glvnd/egl_vendor.d/10_nvidia.json",
)
_DEFAULT_VENDOR_DIRS = ("/etc/glvnd/egl_vendor.d", "/usr/share/glvnd/egl_vendor.d")

def _version_text(v: int) -> str:
    return "%d.%d" % (v // 1000, (v % 1000) // 10) if v else "none"


def _finding(fid: str, severity: str, **fields: Any) -> Dict[str, Any]:
    title, cause, fix = KNOWN_FAILURES[fid]

    class _Keep(Dict[str, Any]):  # a field the facts lack stays visible as {name} instead of raising
        def __missing__(self, key: str) -> str:
            return "{" + key + "}"

    keep = _Keep(fields)
    return {"id": fid, "severity": severity, "title": title, "cause": cause.format_map(keep),
            "fix": fix.format_map(keep), "evidence": {k: v for k, v in fields.items() if k not in ("fix",)}}


def _hint(fid: str, **fields: Any) -> str:
    f = _finding(fid, "error", **fields)
    return "gltensor doctor: %s. Fix: %s" % (f["cause"].rstrip("."), f["fix"])


def explain_error(message: str, status: str = "") -> Optional[str]:
    """The cause and fix of a known environmental failure named in an error message, or None.

    The extension appends this to CudaError, CudaUnavailableError, WrongDeviceError and EGLError messages,
    so the exception and `python -m gltensor doctor` give the same explanation. `status` is the C status
    name (GLT_CUDA_UNAVAILABLE, ...): for CUDA being unavailable the cause is read from the environment.

        >>> explain_error("cudaGraphicsGLRegisterImage failed (cudaErrorUnknown: unknown error): ...")
        'gltensor doctor: CUDA failed without a reason; ... Fix: Render with EGL instead of GLX ...'
    """
    by_name = {
        "cudaErrorInvalidGraphicsContext": "interop_invalid_graphics_context",
        "cudaErrorOperatingSystem": "interop_operating_system",
        "cudaErrorInvalidResourceHandle": "interop_invalid_resource_handle",
        "cudaErrorNotSupported": "interop_not_supported",
        "cudaErrorUnknown": "interop_unknown",
        "cudaErrorDevicesUnavailable": "devices_unavailable",
    }
    for name, fid in by_name.items():
        if name in message:
            return _hint(fid)
    if "built without CUDA" in message:
        return _hint("cuda_not_compiled")
    if "cudaErrorInsufficientDriver" in message or "cudaErrorNoDevice" in message or "no CUDA device is visible" in message:
        return _explain_cuda_unavailable()
    if "does not run on a CUDA device" in message:
        return _hint("software_renderer", cuda_device="-", renderer="a renderer that is not the NVIDIA GPU",
                     vendor_fix=_vendor_fix(_vendor_files()[0]))
    if "no NVIDIA EGL device found" in message or "no NVIDIA EGL device is visible" in message:
        files, source = _vendor_files()
        return _hint("no_nvidia_egl_vendor", vendor_source=source, vendor_fix=_vendor_fix(files),
                     vendors=", ".join(os.path.basename(f["path"]) for f in files) or "no vendor at all")
    m = re.search(r"no NVIDIA EGL device runs on CUDA device (\d+)", message)
    if m:
        return _hint("no_egl_device_for_cuda", **_device_fields(int(m.group(1))))
    if status == "GLT_CUDA_UNAVAILABLE":
        return _explain_cuda_unavailable()
    if "libEGL" in message and ("cannot" in message or "not found" in message or "failed to load" in message):
        return _hint("no_egl")
    return None


def _device_fields(cuda_device: int) -> Dict[str, Any]:
    """Name and PCI bus id of a CUDA device for a message, "?" where CUDA cannot say."""
    from . import _gltensor

    fields: Dict[str, Any] = {"cuda_device": cuda_device, "name": "?", "pci": "?", "egl_devices": "?"}
    try:
        info = _gltensor._cuda_device_info(cuda_device)
        fields.update(name=info["name"], pci=info["pci_bus_id"])
    except Exception:  # noqa: BLE001 - the explanation must not fail
        pass
    try:
        fields["egl_devices"] = len(_gltensor._egl_devices())
    except Exception:  # noqa: BLE001 - the explanation must not fail
        pass
    return fields


def _explain_cuda_unavailable() -> Optional[str]:
    """Why CUDA is unusable here, from what the driver and the environment say."""
    from . import _gltensor

    if not _gltensor.cuda_compiled():  # the first reason: no driver or environment could make it work
        return _hint("cuda_not_compiled")
    driver = _gltensor._cuda_driver_version()
    runtime = _gltensor._build_info()["cudart_version"]
    caps = os.environ.get("NVIDIA_DRIVER_CAPABILITIES")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if driver == 0:
        return _hint("no_nvidia_driver")
    if runtime and driver // 1000 < runtime // 1000:
        return _hint("driver_too_old", **_driver_fields(driver, runtime))
    if visible is not None:
        return _hint("cuda_hidden", visible=visible)
    if caps is not None and not _has_graphics(caps):
        return _hint("container_no_graphics", capabilities=caps)
    return None


def _driver_fields(driver: int, runtime: int) -> Dict[str, Any]:
    major = runtime // 1000
    return {"driver_cuda": _version_text(driver), "runtime_cuda": _version_text(runtime), "runtime_major": major,
            "driver_branch": _DRIVER_BRANCH.get(major, "a recent driver")}


def _has_graphics(capabilities: str) -> bool:
    caps = {c.strip().lower() for c in capabilities.split(",")}
    return "graphics" in caps or "all" in caps


def _vendor_files(environ: Optional[Mapping[str, str]] = None) -> Tuple[List[Dict[str, Any]], str]:
    """(files in glvnd's order, where glvnd looks): each file with its library and whether it loads."""
    env: Mapping[str, str] = os.environ if environ is None else environ
    if env.get("__EGL_VENDOR_LIBRARY_FILENAMES"):
        paths = [p for p in env["__EGL_VENDOR_LIBRARY_FILENAMES"].split(":") if p]
        source = "__EGL_VENDOR_LIBRARY_FILENAMES=" + env["__EGL_VENDOR_LIBRARY_FILENAMES"]
    else:
        dirs = [d for d in env.get("__EGL_VENDOR_LIBRARY_DIRS", "").split(":") if d] or list(_DEFAULT_VENDOR_DIRS)
        source = ("__EGL_VENDOR_LIBRARY_DIRS=" if env.get("__EGL_VENDOR_LIBRARY_DIRS") else "the default directories ") \
            + ":".join(dirs)
        paths = [p for d in dirs for p in sorted(glob.glob(os.path.join(d, "*.json")))]
    files = []
    for p in paths:
        entry: Dict[str, Any] = {"path": p, "exists": os.path.isfile(p), "library": None, "loadable": False}
        try:
            with open(p) as f:
                entry["library"] = json.load(f)["ICD"]["library_path"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            entry["error"] = "%s: %s" % (type(e).__name__, e)
        if entry["library"]:
            try:
                ctypes.CDLL(entry["library"])
                entry["loadable"] = True
            except OSError as e:
                entry["error"] = str(e)
        files.append(entry)
    return files, source


def _vendor_fix(files: List[Dict[str, Any]]) -> str:
    """The exact fix for a missing NVIDIA vendor file: point glvnd at one that exists, or write one."""
    listed = {f["path"] for f in files}
    for cand in _NVIDIA_VENDOR_CANDIDATES:
        if os.path.isfile(cand) and cand not in listed:
            return "Point glvnd at the NVIDIA vendor file that exists here: `export __EGL_VENDOR_LIBRARY_FILENAMES=%s`." % cand
    try:
        ctypes.CDLL("libEGL_nvidia.so.0")
        return ("libEGL_nvidia.so.0 is installed but no vendor file names it: write "
                "`{\"file_format_version\": \"1.0.0\", \"ICD\": {\"library_path\": \"libEGL_nvidia.so.0\"}}` to "
                "/usr/share/glvnd/egl_vendor.d/10_nvidia.json (or any file, then "
                "`export __EGL_VENDOR_LIBRARY_FILENAMES=<that file>`).")
    except OSError:
        return ("Install the NVIDIA driver's GL libraries (they bring libEGL_nvidia.so.0 and "
                "/usr/share/glvnd/egl_vendor.d/10_nvidia.json; Ubuntu: `apt-get install libnvidia-gl-<branch>`), "
                "and in a container add `-e NVIDIA_DRIVER_CAPABILITIES=all`; then, if glvnd still misses it, "
                "`export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/share/glvnd/egl_vendor.d/10_nvidia.json`.")
