"""The C API's bad-input cases (c_bad_input.c), compiled from the core's sources into a program without Python,
with ASan + UBSan (leak detection on) when the compiler has them, so that a refusal that leaks, reads out of
bounds or overflows fails here too. Skipped without a C compiler."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCE = Path(__file__).with_name("c_bad_input.c")
CC = os.environ.get("CC", "cc")

pytestmark = pytest.mark.skipif(shutil.which(CC) is None, reason=f"needs a C compiler ({CC})")


def _build(out, sanitize):
    cmd = [CC, "-std=c11", "-O1", "-g", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Wno-unused-parameter",
           "-Wno-missing-field-initializers", f"-I{ROOT / 'include'}", f"-I{ROOT / 'src'}",
           *sorted(str(p) for p in (ROOT / "src").glob("*/*.c")), str(SOURCE), "-o", str(out), "-ldl", "-lpthread", "-lm"]
    if sanitize:
        cmd[1:1] = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}  # the compiler runs unsanitized
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    out = tmp_path_factory.mktemp("capi") / "c_bad_input"
    r = _build(out, sanitize=True)
    sanitized = r.returncode == 0
    if not sanitized:  # a compiler without the sanitizer runtimes: the cases still run
        r = _build(out, sanitize=False)
    assert r.returncode == 0, f"build failed:\n{r.stderr[-4000:]}"
    return out, sanitized


def test_c_api_bad_input(program):
    binary, sanitized = program
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)  # the program links its own sanitizer runtime
    env["ASAN_OPTIONS"] = "detect_leaks=1:exitcode=86"
    env["LSAN_OPTIONS"] = f"suppressions={ROOT / 'tools' / 'sanitizers' / 'lsan.supp'}"
    env["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"
    r = subprocess.run([str(binary)], capture_output=True, text=True, timeout=300, env=env)
    if r.returncode == 77:
        pytest.skip(r.stdout.strip())
    print(r.stdout)
    assert r.returncode == 0, f"exit {r.returncode} (86: a sanitizer report)\n{r.stdout}\n{r.stderr[-6000:]}"
    m = re.search(r"c-api cases: (\d+), failed: (\d+)", r.stdout)
    assert m and m.group(2) == "0"
    assert int(m.group(1)) >= 100
    print(f"C API bad-input cases: {m.group(1)} ({'ASan+UBSan' if sanitized else 'no sanitizer'})")
