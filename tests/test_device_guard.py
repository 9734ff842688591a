"""The rule that keeps every CUDA call on its object's GPU, checked on the source.

v0.1 allocated the frames of a capture on CUDA device 1 with whatever device the calling thread had
current (0), and the copy kernel then wrote into another GPU's memory. The fix is structural: only the CUDA
files of src/cuda/ (cuda_*.c, each compiled only with GLT_WITH_CUDA; cuda_none.c, the build without CUDA,
calls none) call CUDA, and each of their functions that does so enters the object's device with ON_DEVICE first
(or is a helper reached only from such functions: static, or declared in a header only the CUDA files
include, or one of the few device-agnostic queries named below). These tests fail when a change breaks that
rule, on any machine: no GPU needed.
"""
import re

import pytest
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
CUDA_DIR = SRC / "cuda"
NO_CUDA = CUDA_DIR / "cuda_none.c"
CUDA_FILES = tuple(p for p in sorted(CUDA_DIR.glob("cuda_*.c")) if p != NO_CUDA)
GUARD_HEADER = CUDA_DIR / "cuda_device.h"
# What the rest of the core may include: cuda/cuda_api.h. The other CUDA headers carry helpers that run on the
# device their caller entered, for the CUDA files only.
PRIVATE_HEADERS = tuple(p for p in sorted(CUDA_DIR.glob("cuda_*.h")) if p.name != "cuda_api.h")
# CUDA runtime calls, and the kernel launchers of cuda_kernels.cu (which launch on the current device).
CUDA_CALL = re.compile(r"\b(cuda[A-Z]\w*|glt_launch_\w+)\s*\(")
# Queries that have no object and so no device yet; none of them creates a CUDA context.
DEVICE_AGNOSTIC = {
    "glt_device_guard_enter",  # the guard itself
    "glt_device_guard_exit",
    "glt_cuda_probe",  # cudaGetDeviceCount, and an attribute of device 0 (no context) to tell a forked child
    "glt_cuda_device_of_current_context",  # cudaGLGetDevices: which device is this GL context on?
    "glt_cuda_fail",  # cudaGetErrorName/String and clearing the error after a failed call
    "glt_cuda_driver_entry",  # looks up a driver entry point (cudaGetDriverEntryPointByVersion)
    "glt_cuda_device_identity",  # cudaGetDeviceProperties of a named ordinal (UUID, name): no context
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
    """The part of a CUDA file compiled with CUDA (the whole file lies under one #ifdef GLT_WITH_CUDA)."""
    start = src.index("#ifdef GLT_WITH_CUDA")
    return src[start:src.rindex("#endif")]


def _private_helpers():
    """Functions declared in the CUDA files' own headers: they run on the device their caller entered."""
    names = set()
    for h in PRIVATE_HEADERS:
        names |= set(re.findall(r"^[A-Za-z_][\w \t\*]*?\b(glt_\w+)\s*\(", _strip_comments(h.read_text()), flags=re.M))
    return names


def test_the_cuda_files_are_found():
    names = {p.name for p in CUDA_FILES}
    assert {"cuda_device.c", "cuda_resource.c", "cuda_vmm.c"} <= names and NO_CUDA.exists(), names


def test_no_other_core_or_extension_file_calls_cuda():
    offenders = []
    for path in sorted([*SRC.glob("*/*.c"), *(ROOT / "python" / "gltensor" / "_ext").glob("*.c")]):
        if path in CUDA_FILES:
            continue
        src = _strip_comments(path.read_text())
        includes_private = any(f'#include "cuda/{h.name}"' in src or f'#include "{h.name}"' in src
                               for h in PRIVATE_HEADERS)
        if "cuda_runtime" in src or CUDA_CALL.search(src) or includes_private:
            offenders.append(path.relative_to(ROOT).as_posix())
    assert not offenders, (f"{offenders} call CUDA directly; add a function to one of src/cuda/cuda_*.c (declared in "
                           "src/cuda/cuda_api.h) that enters the object's device with ON_DEVICE, and call that")


def test_each_cuda_file_builds_only_with_cuda_and_cuda_none_only_without():
    for path in CUDA_FILES:
        code = _strip_comments(path.read_text())
        assert re.search(r'^#include "cuda/cuda_api.h"\s*#ifdef GLT_WITH_CUDA\b', code, flags=re.M) and "\n#else" not in code, (
            f"{path.name}: everything after its first include must lie under #ifdef GLT_WITH_CUDA (the build without "
            "CUDA gets its stubs from cuda_none.c)")
    none = _strip_comments(NO_CUDA.read_text())
    assert re.search(r'^#include "cuda/cuda_api.h"\s*#ifndef GLT_WITH_CUDA\b', none, flags=re.M), (
        "cuda_none.c must lie wholly under #ifndef GLT_WITH_CUDA")


def test_every_cuda_entry_point_enters_the_device():
    private = _private_helpers()
    funcs = {}  # (file, name) -> (is_helper, body)
    for path in CUDA_FILES:
        for name, (is_static, body) in _functions(_strip_comments(_cuda_section(path.read_text()))).items():
            funcs[(path.name, name)] = (is_static or name in private, is_static, body)
    assert len(funcs) > 60, f"the parser found too few functions in {[p.name for p in CUDA_FILES]}"
    guarded = {key for key, (_, _, body) in funcs.items() if re.search(r"\bON_DEVICE(_OR)?\(", body)}
    # A helper is covered when every function that calls it (in its file when static, in any CUDA file when
    # declared in a private header) is guarded or covered itself.
    covered = guarded | {key for key in funcs if key[1] in DEVICE_AGNOSTIC}
    changed = True
    while changed:
        changed = False
        for key, (is_helper, is_static, _) in funcs.items():
            if key in covered or not is_helper:
                continue
            callers = [k for k, (_, _, b) in funcs.items()
                       if k != key and (not is_static or k[0] == key[0]) and re.search(rf"\b{key[1]}\s*\(", b)]
            if callers and all(c in covered for c in callers):
                covered.add(key)
                changed = True
    unguarded = sorted(f"{f}:{n}" for (f, n), (_, _, body) in funcs.items()
                       if CUDA_CALL.search(body) and (f, n) not in covered)
    assert not unguarded, (f"{unguarded} call CUDA without entering the object's device; start them with "
                           "ON_DEVICE(device) (or list a truly device-agnostic query in DEVICE_AGNOSTIC, saying why)")


def test_the_guard_restores_the_callers_device_on_every_return():
    src = GUARD_HEADER.read_text()
    macro = src[src.index("#define ON_DEVICE_OR"):src.index("#define ON_DEVICE(")]
    assert "cleanup(glt_device_guard_exit)" in macro, "ON_DEVICE must restore the caller's device on every return"
