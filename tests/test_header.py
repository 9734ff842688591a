"""Compile-only checks: include/gltensor.h is valid, warning-free C11 and C++11 on its own."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

INCLUDE = Path(__file__).resolve().parent.parent / "include"
HEADER = INCLUDE / "gltensor.h"

TU = r"""
#include "gltensor.h"
#include "gltensor.h" /* include guard */

static int use_api(void) {
    glt_context_desc cdesc;
    glt_capture_desc desc;
    glt_read_options opts;
    glt_capture_info info;
    glt_frame_info finfo;
    glt_buffer_view view;
    glt_status st = GLT_OK;
    const char *name = glt_status_name(GLT_NO_CONTEXT);
    unsigned targets[3] = {GLT_TEXTURE_2D, GLT_TEXTURE_RECTANGLE, GLT_RENDERBUFFER};
    (void)info; (void)finfo; (void)view; (void)targets;
    glt_context_desc_init(&cdesc);
    glt_capture_desc_init(&desc);
    glt_read_options_init(&opts);
    desc.backend = GLT_BACKEND_CPU;
    view.memory = GLT_MEMORY_HOST;
    view.dtype = GLT_DTYPE_FLOAT16;
    glt_capture_destroy((glt_capture *)0);
    glt_frame_destroy((glt_frame *)0);
    glt_context_destroy((glt_context *)0);
    if (glt_version_number() != GLT_VERSION_NUMBER) st = GLT_INVALID_ARGUMENT;
    return (int)st + (name != 0) + (int)GLT_STATUS_COUNT_ + (int)sizeof(GLT_VERSION_STRING);
}

int main(void) { return use_api(); }
"""

FLAGS = ["-Wall", "-Wextra", "-Werror", "-pedantic", "-fsyntax-only", f"-I{INCLUDE}"]


def _compile(compiler, std, lang, tmp_path):
    exe = shutil.which(compiler)
    if exe is None:
        pytest.skip(f"{compiler} not installed")
    src = tmp_path / ("tu.c" if lang == "c" else "tu.cpp")
    src.write_text(TU)
    cmd = [exe, f"-std={std}", *FLAGS, "-x", lang, str(src)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout}{proc.stderr}"


def test_header_exists():
    assert HEADER.is_file(), HEADER


@pytest.mark.parametrize("std", ["c11", "c99"])
def test_header_compiles_as_c(std, tmp_path):
    _compile("gcc", std, "c", tmp_path)


@pytest.mark.parametrize("std", ["c++11", "c++17"])
def test_header_compiles_as_cpp(std, tmp_path):
    _compile("g++", std, "c++", tmp_path)


def test_header_compiles_with_clang(tmp_path):
    _compile("clang", "c11", "c", tmp_path)


def test_header_needs_no_gl_or_cuda_headers():
    text = HEADER.read_text()
    includes = re.findall(r"^\s*#\s*include\s*[<\"]([^>\"]+)[>\"]", text, re.MULTILINE)
    for inc in includes:
        assert not re.search(r"(GL|EGL|cuda|KHR)/|cuda", inc), f"gltensor.h includes {inc}"


def test_header_version_matches_package():
    gltensor = pytest.importorskip("gltensor")
    text = HEADER.read_text()
    parts = [re.search(rf"#define GLT_VERSION_{p}\s+(\d+)", text).group(1) for p in ("MAJOR", "MINOR", "PATCH")]
    assert ".".join(parts) == gltensor.__version__
