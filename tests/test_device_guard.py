"""The rule that keeps every CUDA call on its object's GPU, checked on the source.

v0.1 allocated the frames of a capture on CUDA device 1 with whatever device the calling thread had
current (0), and the copy kernel then wrote into another GPU's memory. The fix is structural: only
src/cuda_backend.c (and src/cuda_vmm.c, the shared slots' exportable memory) calls CUDA, and each of their functions that does so enters the object's device with
ON_DEVICE first (or is a static helper reached only from such functions, or one of the few
device-agnostic queries named below). These tests fail when a change breaks that rule, on any
machine: no GPU needed.
"""
import re

import pytest
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BACKEND = ROOT / "src" / "cuda_backend.c"
VMM = ROOT / "src" / "cuda_vmm.c"
CUDA_FILES = (BACKEND, VMM)
GUARD_HEADER = ROOT / "src" / "cuda_device.h"
# CUDA runtime calls, and the kernel launchers of cuda_kernels.cu (which launch on the current device).
CUDA_CALL = re.compile(r"\b(cuda[A-Z]\w*|glt_launch_\w+)\s*\(")
# Queries that have no object and so no device yet; none of them creates a CUDA context.
DEVICE_AGNOSTIC = {
    "glt_device_guard_enter",  # the guard itself
    "glt_device_guard_exit",
    "glt_cuda_probe",  # cudaGetDeviceCount
    "glt_cuda_device_of_current_context",  # cudaGLGetDevices: which device is this GL context on?
    "glt_cuda_fail",  # cudaGetErrorName/String and clearing the error after a failed call
    "load_vmm_entries",  # looks up the driver's virtual-memory entry points (cudaGetDriverEntryPointByVersion)
    "glt_cuda_device_identity",  # cudaGetDeviceProperties of a named ordinal (UUID, name): no context
    "load_driver_entries",  # looks up two driver entry points (cudaGetDriverEntryPointByVersion)
    "glt_cuda_driver_version",  # cudaDriverGetVersion, for the doctor: no device, no context
    "glt_cuda_describe_device",  # cudaGetDeviceProperties + cudaDeviceGetPCIBusId, for the doctor: attribute
                                 # queries of a named ordinal, which create no context (unlike cudaSetDevice)
}


def _strip_comments(src):
    src = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), src, flags=re.S)
    return re.sub(r"//[^\n]*", "", src)


def _functions(src):
    """{name: (is_static, body)} for the top-level function definitions of a C file."""
    out = {}
    for m in re.finditer(r"^(static\s+)?[A-Za-z_][\w \t\*]*?\b(\w+)\s*\(([^;{]*?)\)\s*\{", src, flags=re.M | re.S):
        depth, i = 1, m.end()
        while depth and i < len(src):
            depth += {"{": 1, "}": -1}.get(src[i], 0)
            i += 1
        out[m.group(2)] = (bool(m.group(1)), src[m.end():i])
    return out


def _cuda_section(src):
    """The part of cuda_backend.c compiled with CUDA (before the no-CUDA stubs)."""
    start = src.index("#ifdef GLT_WITH_CUDA")
    return src[start:src.index("\n#else", start)]


def test_no_other_core_or_extension_file_calls_cuda():
    offenders = []
    for path in sorted([*(ROOT / "src").glob("*.c"), *(ROOT / "python" / "gltensor" / "_ext").glob("*.c")]):
        if path in CUDA_FILES:
            continue
        src = _strip_comments(path.read_text())
        if "cuda_runtime" in src or CUDA_CALL.search(src):
            offenders.append(path.relative_to(ROOT).as_posix())
    assert not offenders, (f"{offenders} call CUDA directly; add a function to src/cuda_backend.c that enters the "
                           "object's device with ON_DEVICE, and call that")


@pytest.mark.parametrize("path", CUDA_FILES, ids=lambda p: p.name)
def test_every_cuda_entry_point_enters_the_device(path):
    funcs = _functions(_strip_comments(_cuda_section(path.read_text())))
    assert len(funcs) > (20 if path == BACKEND else 8), f"the parser found too few functions in {path.name}"
    guarded = {name for name, (_, body) in funcs.items() if re.search(r"\bON_DEVICE(_OR)?\(", body)}
    # A static helper is covered when every function that calls it is guarded or covered itself.
    covered = set(guarded) | DEVICE_AGNOSTIC
    changed = True
    while changed:
        changed = False
        for name, (is_static, _) in funcs.items():
            if name in covered or not is_static:
                continue
            callers = [n for n, (_, b) in funcs.items() if n != name and re.search(rf"\b{name}\s*\(", b)]
            if callers and all(c in covered for c in callers):
                covered.add(name)
                changed = True
    unguarded = sorted(name for name, (_, body) in funcs.items() if CUDA_CALL.search(body) and name not in covered)
    assert not unguarded, (f"{unguarded} call CUDA without entering the object's device; start them with "
                           "ON_DEVICE(device) (or list a truly device-agnostic query in DEVICE_AGNOSTIC, saying why)")


def test_the_guard_restores_the_callers_device_on_every_return():
    src = GUARD_HEADER.read_text()
    macro = src[src.index("#define ON_DEVICE_OR"):src.index("#define ON_DEVICE(")]
    assert "cleanup(glt_device_guard_exit)" in macro, "ON_DEVICE must restore the caller's device on every return"
