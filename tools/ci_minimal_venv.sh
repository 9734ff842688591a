#!/usr/bin/env bash
# The suite as a new user runs it: a fresh virtual environment holding only gltensor and its [test] extra
# (no torch, no engines, no matplotlib). Every test that needs something else must skip, saying why; any
# failure or error fails this script.
#   tools/ci_minimal_venv.sh [WHAT [PYTEST ARGS...]]
#   WHAT: what pip installs, the source tree by default (.); e.g. dist/gltensor-0.1.0-*.whl for a built wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-.}
label=$what
shift || true
venv=$(mktemp -d "${TMPDIR:-/tmp}/gltensor-minimal.XXXXXX")
trap 'rm -rf "$venv"' EXIT
python3 -m venv "$venv/env"
start=$(date +%s)
if [ -d "$what" ]; then
    # pip builds a source tree in place (its build/ folder): build a copy, so the tree's own build stays as it is.
    mkdir "$venv/src"
    tar -C "$what" --exclude=./build --exclude=./.venv --exclude='*.so' --exclude=./.git -cf - . | tar -C "$venv/src" -xf -
    what="$venv/src"
fi
"$venv/env/bin/python" -m pip install -q --disable-pip-version-check "${what}[test]"
echo "minimal venv: installed ${label}[test] in $(( $(date +%s) - start )) s"
# The suite must test the installed package, not the source tree (python/ is never on sys.path here).
"$venv/env/bin/python" - "$venv/env" <<'PY'
import importlib.util, sys
import gltensor
assert gltensor.__file__.startswith(sys.argv[1]), f"gltensor imported from {gltensor.__file__}, not the venv"
present = [m for m in ("torch", "panda3d", "mujoco", "moderngl", "matplotlib", "cupy", "jax") if importlib.util.find_spec(m)]
assert not present, f"the minimal venv should not hold {present}"
print("minimal venv: gltensor", gltensor.__version__, "from", gltensor.__file__, "| optional packages absent")
PY
# -rs lists each skip's reason: the run proves that missing packages skip rather than fail.
"$venv/env/bin/python" -m pytest -q -p no:cacheprovider -rs "$@" tests | tail -n 25
