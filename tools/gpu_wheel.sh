#!/usr/bin/env bash
# Runs on the GPU machine (the device tool), from the repository root: the release wheel as a user installs
# it, no build. Carry the wheel in `.wheelhouse/` (an ignored folder; tools/build_wheel.sh writes it to
# dist/, copy it there) and the GL loader packages in `.gl` as for tools/gpu_verify.sh.
#   bash tools/gpu_wheel.sh      -> doctor (text + JSON) before and after pointing glvnd at NVIDIA's EGL
#                                   vendor file, then the whole suite (GPU tests included) against the wheel
set -u
cd "$(dirname "$0")/.."
ROOT=$(pwd)
OUT=${OUT:-/tmp/gltensor-out}
mkdir -p "$OUT"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export PYTHONUNBUFFERED=1
wheel=$(ls .wheelhouse/gltensor-*.whl | head -1)
[ -n "$wheel" ] || { echo "gpu_wheel: no wheel in .wheelhouse/"; exit 1; }
ls -l "$wheel"
# Nothing of the checkout may be imported: no in-place build, no editable install from gpu_verify.sh.
rm -f python/gltensor/_gltensor*.so
python3 -m pip uninstall -y -q gltensor >/dev/null 2>&1
rm -rf /tmp/wheelsite
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/wheelsite "$wheel" || exit 1
export PYTHONPATH=/tmp/wheelsite${PYTHONPATH:+:$PYTHONPATH}  # engines carried as wheels (/tmp/site) stay importable
work=$(mktemp -d)
cd "$work"
python3 -c "import gltensor, sys; print('gltensor', gltensor.__version__, 'from', gltensor.__file__); \
sys.exit(0 if gltensor.__file__.startswith('/tmp/wheelsite/') else 1)" || exit 1
python3 -X importtime -c "import gltensor" 2> "$OUT/importtime.txt"; tail -1 "$OUT/importtime.txt"

echo "== doctor, environment as the machine has it"
python3 -m gltensor doctor | tee "$OUT/doctor_plain.txt"
echo "== doctor with __EGL_VENDOR_LIBRARY_FILENAMES (what tools/gpu_verify.sh sets)"
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
python3 -m gltensor doctor | tee "$OUT/doctor.txt"
python3 -m gltensor doctor --json > "$OUT/doctor.json"
echo "== doctor, simulated: CUDA_VISIBLE_DEVICES= and NVIDIA_DRIVER_CAPABILITIES=compute"
CUDA_VISIBLE_DEVICES= python3 -m gltensor doctor --no-selftest | tail -8
NVIDIA_DRIVER_CAPABILITIES=compute python3 -m gltensor doctor --no-selftest | tail -8

echo "== suite against the installed wheel"
GLTENSOR_TEST_INSTALLED=1 timeout 420 python3 -m pytest -q -p no:cacheprovider -n 1 --max-worker-restart 20 -rfEs \
    -c "$ROOT/pyproject.toml" --rootdir "$ROOT" "$ROOT/tests" > "$OUT/pytest_wheel.log" 2>&1
head -5 "$OUT/pytest_wheel.log" | grep -i "gltensor"
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/pytest_wheel.log" | tail -40
