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


# ---- struct sizes (gltensor.h, "Struct sizes"): size 0, sizeof, a wrong size, a newer (larger) struct ----

SIZES_TU = r"""
#include "gltensor.h"
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static int failures;
#define EXPECT(cond, what)                                                    \
    do {                                                                      \
        if (!(cond)) {                                                        \
            printf("FAIL %s: %s\n", what, glt_last_error());                  \
            failures++;                                                       \
        }                                                                     \
    } while (0)
#define REFUSED(st, type) ((st) == GLT_INVALID_ARGUMENT && strstr(glt_last_error(), type ".size"))

typedef void (*gen_fn)(int, unsigned *);
typedef void (*bind_fn)(unsigned, unsigned);
typedef void (*image_fn)(unsigned, int, int, int, int, int, unsigned, unsigned, const void *);

/* A newer program's struct: this release's, then one more field. */
typedef struct { glt_read_options base; int newer_field; } newer_read_options;

int main(void) {
    /* old spellings compile (deprecated, one release) next to the new ones */
    glt_order old_order = GLT_ORDER_CHW;
    glt_read_options spelled = GLT_READ_OPTIONS_INIT;
    spelled.order = old_order;
    EXPECT(spelled.layout == GLT_LAYOUT_CHW, "order is a second name of layout");
    EXPECT(GLT_CUDA_DEVICE_ANY == -1, "GLT_CUDA_DEVICE_ANY is the old -1");

    glt_context_desc cd = GLT_CONTEXT_DESC_INIT, cd_init;
    glt_context_desc_init(&cd_init);
    EXPECT(cd.size == sizeof cd && cd_init.size == sizeof cd, "context desc initialisers set size");
    EXPECT(cd_init.cuda_device == cd.cuda_device && cd_init.allow_software == cd.allow_software, "same defaults");
    glt_context *ctx = NULL;
    cd.size = 8; /* not a size of any layout */
    EXPECT(REFUSED(glt_context_create_headless(&cd, &ctx), "glt_context_desc"), "context desc size 8 refused");
    cd.size = 0; /* this release's layout */
    EXPECT(glt_context_create_headless(&cd, &ctx) == GLT_OK, "context desc size 0");
    if (!ctx) return 1;
    glt_context_info ci; /* left unset: callers from before the size field */
    EXPECT(glt_context_get_info(ctx, &ci) == GLT_OK && ci.size == sizeof ci, "info size set by the library");

    /* the caller's context recorded and restored; the EGL device list */
    glt_saved_context sc;
    EXPECT(glt_context_save_current(&sc) == GLT_OK && sc.system == GLT_WINDOW_SYSTEM_EGL && sc.size == sizeof sc &&
           glt_saved_context_is_current(&sc), "save_current records the current EGL context");
    EXPECT(glt_context_restore(&sc) == GLT_OK, "restore of the current context");
    sc.size = 3;
    EXPECT(REFUSED(glt_context_restore(&sc), "glt_saved_context"), "saved context size 3 refused");
    int n_egl = 0;
    EXPECT(glt_egl_device_count(&n_egl) == GLT_OK && n_egl > 0, "EGL devices");
    glt_egl_device_info di = {0};
    EXPECT(glt_egl_device_get_info(0, &di) == GLT_OK && di.size == sizeof di && di.index == 0 && di.extensions,
           "EGL device 0 info");
    EXPECT(glt_egl_device_get_info(n_egl, &di) == GLT_INVALID_ARGUMENT, "EGL device past the end refused");
    EXPECT(glt_egl_client_extensions() != NULL, "EGL client extensions");

    void *gl = dlopen("libOpenGL.so.0", RTLD_NOW);
    if (!gl) gl = dlopen("libGL.so.1", RTLD_NOW);
    if (!gl) return 2;
    unsigned tex = 0;
    ((gen_fn)dlsym(gl, "glGenTextures"))(1, &tex);
    ((bind_fn)dlsym(gl, "glBindTexture"))(GLT_TEXTURE_2D, tex);
    ((image_fn)dlsym(gl, "glTexImage2D"))(GLT_TEXTURE_2D, 0, 0x8058, 4, 4, 0, 0x1908, 0x1401, NULL);

    glt_capture_desc d = GLT_CAPTURE_DESC_INIT, d_init;
    glt_capture_desc_init(&d_init);
    EXPECT(d_init.size == sizeof d && d_init.gl_target == d.gl_target && d_init.cuda_device == d.cuda_device,
           "capture desc initialisers agree");
    d.gl_name = tex;
    d.backend = GLT_BACKEND_CPU;
    glt_capture *cap = NULL;
    d.size = sizeof d - 4;
    EXPECT(REFUSED(glt_capture_create(&d, &cap), "glt_capture_desc"), "capture desc smaller size refused");
    EXPECT(strstr(glt_last_error(), "glt_capture_create"), "message names the call");
    d.size = 0;
    EXPECT(glt_capture_create(&d, &cap) == GLT_OK, "capture desc size 0");
    glt_capture_destroy(cap);
    cap = NULL;
    d.size = sizeof d;
    EXPECT(glt_capture_create(&d, &cap) == GLT_OK, "capture desc size sizeof");
    if (!cap) return 3;

    glt_frame *f = NULL;
    glt_read_options o = GLT_READ_OPTIONS_INIT;
    EXPECT(glt_capture_read(cap, &o, &f) == GLT_OK, "read options sizeof");
    glt_frame_info fi;
    glt_frame_get_info(f, &fi);
    EXPECT(fi.size == sizeof fi && fi.layout == GLT_LAYOUT_HWC && fi.order == GLT_LAYOUT_HWC, "frame info");
    glt_frame_destroy(f);
    f = NULL;
    o.size = 0;
    EXPECT(glt_capture_read(cap, &o, &f) == GLT_OK, "read options size 0");
    glt_frame_destroy(f);
    f = NULL;
    o.size = 1;
    EXPECT(REFUSED(glt_capture_read(cap, &o, &f), "glt_read_options") && !f, "read options size 1 refused");
    o.size = (size_t)1 << 40; /* an uninitialised size: refused before reading past the struct */
    EXPECT(REFUSED(glt_capture_read(cap, &o, &f), "glt_read_options"), "read options huge size refused");
    newer_read_options n;
    memset(&n, 0, sizeof n);
    glt_read_options_init(&n.base);
    n.base.size = sizeof n;
    EXPECT(glt_capture_read(cap, &n.base, &f) == GLT_OK, "newer read options with the new field zero");
    glt_frame_destroy(f);
    f = NULL;
    n.newer_field = 1;
    EXPECT(REFUSED(glt_capture_read(cap, &n.base, &f), "glt_read_options") && strstr(glt_last_error(), "newer"),
           "newer read options with the new field set refused");
    glt_capture_destroy(cap);

    glt_upload_desc ud = GLT_UPLOAD_DESC_INIT;
    ud.gl_name = tex;
    ud.backend = GLT_BACKEND_CPU;
    glt_upload *up = NULL;
    ud.size = 3;
    EXPECT(REFUSED(glt_upload_create(&ud, &up), "glt_upload_desc"), "upload desc size 3 refused");
    ud.size = 0;
    EXPECT(glt_upload_create(&ud, &up) == GLT_OK, "upload desc size 0");
    unsigned char pixels[4 * 4 * 4] = {0};
    glt_buffer_view src = {pixels, GLT_MEMORY_HOST, -1, GLT_DTYPE_UINT8, 3, {4, 4, 4, 0}, {16, 4, 1, 0}, 1};
    glt_write_options w;
    glt_write_options_init(&w);
    EXPECT(w.size == sizeof w, "write options init sets size");
    EXPECT(glt_upload_write(up, &w, &src) == GLT_OK, "write options sizeof");
    w.size = 2;
    EXPECT(REFUSED(glt_upload_write(up, &w, &src), "glt_write_options"), "write options size 2 refused");
    EXPECT(glt_upload_write(up, NULL, &src) == GLT_OK, "write options NULL: the defaults");
    glt_upload_destroy(up);

    glt_buffer_desc bd = GLT_BUFFER_DESC_INIT;
    glt_slots_desc sd = GLT_SLOTS_DESC_INIT;
    glt_slot_writer_desc wd = GLT_SLOT_WRITER_DESC_INIT;
    glt_atlas_desc ad = GLT_ATLAS_DESC_INIT;
    glt_buffer *buf = NULL;
    glt_slots *slots = NULL;
    glt_slot_writer *writer = NULL;
    glt_atlas *atlas = NULL;
    bd.size = sd.size = wd.size = ad.size = 5;
    EXPECT(REFUSED(glt_buffer_create(&bd, &buf), "glt_buffer_desc"), "buffer desc size 5 refused");
    EXPECT(REFUSED(glt_slots_create(&sd, &slots), "glt_slots_desc"), "slots desc size 5 refused");
    EXPECT(REFUSED(glt_slot_writer_create(&wd, &writer), "glt_slot_writer_desc"), "writer desc size 5 refused");
    EXPECT(REFUSED(glt_atlas_create(&ad, &atlas), "glt_atlas_desc"), "atlas desc size 5 refused");
    glt_context_destroy(ctx);
    printf("sizes: %d failures\n", failures);
    return failures ? 4 : 0;
}
"""


def test_struct_sizes_at_run_time(tmp_path):
    """Size 0 and sizeof are accepted, wrong sizes refused naming the struct, a newer struct accepted only when
    its extra fields are zero; info structs come back with their size set."""
    root = INCLUDE.parent
    if shutil.which("make") is None or shutil.which("gcc") is None:
        pytest.skip("needs make and gcc")
    r = subprocess.run(["make", "-C", str(root), "lib"], capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    src, exe = tmp_path / "sizes.c", tmp_path / "sizes"
    src.write_text(SIZES_TU)
    cmd = ["gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", f"-I{INCLUDE}", str(src), "-o", str(exe),
           str(root / "build" / "libgltensor.so"), f"-Wl,-rpath,{root / 'build'}", "-ldl"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stdout}{r.stderr}"
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "sizes: 0 failures" in r.stdout, f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"
