#!/usr/bin/env bash
# CI step: gltensor as a pip user gets it. Builds the sdist and the wheel (tools/build_wheel.sh), installs
# the wheel with its [test] extra alone into a fresh venv with no compiler on PATH, and from a directory
# outside the source tree runs the demo, the doctor and the test suite against the installed package;
# then checks the type stubs (stubtest) and the examples against them (mypy --strict).
#   SKIP_BUILD=1   reuse dist/ (the wheel must be there)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PYTHON=${PYTHON:-python3}
VENV=$ROOT/build/wheel-venv
step() { printf '\n== ci_wheel: %s (%ss)\n' "$1" "$SECONDS"; }

step "build sdist + wheel"
[ "${SKIP_BUILD:-0}" = 1 ] || tools/build_wheel.sh
wheel=$(ls "$ROOT"/dist/gltensor-*.whl)

step "fresh venv, no compiler on PATH"
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
# PATH = the venv + every tool of the usual PATH except compilers (gcc, cc, c++, clang, nvcc, ...).
nocc=$ROOT/build/path-without-compilers
rm -rf "$nocc"
mkdir -p "$nocc"
IFS=: read -ra dirs <<< "$PATH"
for d in "${dirs[@]}"; do
    for f in "$d"/*; do
        name=$(basename "$f")
        case "$name" in
        gcc* | g++* | cc | c++ | c89* | c99* | cpp* | clang* | nvcc* | tcc | *-gcc* | *-g++* | *-cc | *-c++ | ld | ld.* | zig*) continue ;;
        esac
        [ -e "$nocc/$name" ] || ln -s "$f" "$nocc/$name"
    done
done
export PATH="$VENV/bin:$nocc"
for c in gcc cc c++ nvcc clang; do
    if command -v "$c" >/dev/null; then echo "ci_wheel: $c is still on PATH" >&2; exit 1; fi
done
# --only-binary: pip may not build anything; the wheel and the [test] extra's dependencies come as wheels
# (and a compiler that setuptools would call is `false`).
CC=false CXX=false LDSHARED=false python -m pip install -q --only-binary=:all: "$wheel[test]"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
python - "$VENV" <<'EOF'
import sys, gltensor
where = gltensor.__file__
print("ci_wheel: gltensor", gltensor.__version__, "from", where, "| CUDA compiled:", gltensor.cuda_compiled())
assert where.startswith(sys.argv[1]), "the installed wheel must be the gltensor imported, not the source tree"
EOF

step "python -m gltensor (demo)"
python -m gltensor --frames 30 --out "$work/frame.png"

step "python -m gltensor doctor"
python -m gltensor doctor
python -m gltensor doctor --json > "$work/doctor.json"
python -c "import json, sys; r = json.load(open(sys.argv[1])); print('ci_wheel: doctor --json verdict:', r['verdict']['backend'])" "$work/doctor.json"

step "test suite against the installed wheel"
# -c/--rootdir: the repository's pytest settings; the tests import gltensor from the venv (conftest checks
# it with GLTENSOR_TEST_INSTALLED=1); cwd is outside the tree, so python/ is never on sys.path.
GLTENSOR_TEST_INSTALLED=1 python -m pytest -q -p no:cacheprovider -c "$ROOT/pyproject.toml" --rootdir "$ROOT" \
    "$ROOT/tests"

step "type stubs: stubtest + mypy --strict over the examples"
CC=false CXX=false python -m pip install -q --only-binary=:all: "mypy==2.4.1"
python -m mypy.stubtest gltensor._gltensor
(cd "$ROOT" && python -m mypy --config-file pyproject.toml examples)

step "done"
