#!/usr/bin/env bash
# Installs what gltensor's demo, tests and benchmarks need on a fresh Debian/Ubuntu machine, then
# builds gltensor in place. Idempotent: it installs only what is missing, so it also runs on a
# machine without internet that already has the packages (the GPU machine).
#   TORCH_VERSION  torch to install when none is importable (default 2.13.0)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

# 1. EGL + GL loaders and Mesa's software driver (the fallback context when there is no NVIDIA GPU).
missing=()
have_lib() { ldconfig -p | grep -q "$1"; }
have_lib 'libEGL.so.1 ' || missing+=(libegl1)
have_lib 'libOpenGL.so.0 ' || missing+=(libopengl0)
have_lib 'libGL.so.1 ' || missing+=(libgl1)
if ! command -v nvidia-smi >/dev/null 2>&1; then
    have_lib 'libEGL_mesa.so.0 ' || missing+=(libegl-mesa0)
    ls /usr/lib/*/dri/swrast_dri.so >/dev/null 2>&1 || missing+=(libgl1-mesa-dri)
fi
if [ ${#missing[@]} -gt 0 ]; then
    echo "bootstrap: installing ${missing[*]}"
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# 2. Python packages, only those missing (torch pinned: an unpinned one pulls a multi-GB CUDA build).
pip_missing=()
has_mod() { "$PYTHON" -c "import $1" >/dev/null 2>&1; }
has_mod torch || pip_missing+=("torch==${TORCH_VERSION:-2.13.0}")
has_mod numpy || pip_missing+=(numpy)
has_mod OpenGL || pip_missing+=("PyOpenGL>=3.1")
has_mod tqdm || pip_missing+=(tqdm)
has_mod PIL || pip_missing+=(pillow)
has_mod pytest || pip_missing+=("pytest>=7")
"$PYTHON" -c "import setuptools, sys; sys.exit(int(setuptools.__version__.split('.')[0]) < 64)" 2>/dev/null \
    || pip_missing+=("setuptools>=64" wheel)
if [ ${#pip_missing[@]} -gt 0 ]; then
    echo "bootstrap: pip installing ${pip_missing[*]}"
    "$PYTHON" -m pip install -q "${pip_missing[@]}"
fi

# 2b. Engines whose integrations the tests exercise, best effort: a platform without a wheel for one of
# them still gets the rest of the suite (those tests then skip, saying why).
for spec in "moderngl:moderngl>=5.8" "mujoco:mujoco>=3" "panda3d:panda3d>=1.10" "matplotlib:matplotlib"; do
    mod=${spec%%:*}
    has_mod "$mod" || "$PYTHON" -m pip install -q "${spec#*:}" || echo "bootstrap: could not install ${spec#*:}; its tests will be skipped"
done
# The vector-env integrations (gltensor.gymnasium, gltensor.sb3). stable-baselines3 depends on torch: --no-deps,
# with its small dependencies by name, so that it never replaces the CPU or CUDA torch installed above.
has_mod gymnasium || "$PYTHON" -m pip install -q "gymnasium>=1.0,<2" || echo "bootstrap: could not install gymnasium; its tests will be skipped"
if ! has_mod stable_baselines3 && has_mod gymnasium; then
    "$PYTHON" -m pip install -q --no-deps "stable-baselines3>=2.4,<3" && "$PYTHON" -m pip install -q cloudpickle \
        || echo "bootstrap: could not install stable-baselines3; its tests will be skipped"
fi

# 3. gltensor itself (with the CUDA backend when a toolkit is found). The module is an abi3 build
# (_gltensor.abi3.so); a version-specific one left by an older build would shadow it, so it goes first.
rm -f python/gltensor/_gltensor.cpython-*.so
"$PYTHON" -m pip install -q --no-build-isolation --no-deps -e . 2>&1 | grep -v "Running pip as the 'root'" || true
"$PYTHON" -c "import gltensor; print('bootstrap: gltensor', gltensor.__version__, '| CUDA compiled:', gltensor.cuda_compiled(), '| CUDA usable:', gltensor.cuda_available())"
