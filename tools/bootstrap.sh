#!/usr/bin/env bash
# Installs what gltensor's demo, tests and benchmarks need on a fresh Debian/Ubuntu machine, then
# builds gltensor in place. Idempotent: it installs only what is missing, so it also runs on a
# machine without internet that already has the packages (the GPU machine).
#   TORCH_VERSION  torch to install when none is importable (default 2.13.0)
#   TORCH_CPU_INDEX  where torch's CPU build comes from without an NVIDIA driver (default PyTorch's CPU-only index)
#   GLTENSOR_CUDA_ARCHS  kernel architectures (default: the GPUs' own, or 75 without a driver; see step 3)
#   PYTHON  the Python to install into (default: the clone's .venv unless a virtual or conda environment is active;
#       step 0, tools/choose_python.sh)
#   GLTENSOR_BOOTSTRAP_STOP_AFTER_PYTHON=1  for tests/test_bootstrap.py only: print the Python chosen in step 0 and
#       stop there, before apt or pip is asked for anything else
set -euo pipefail
cd "$(dirname "$0")/.."
apt_install() {
    local SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
}

# 0. The Python everything is installed into (tools/choose_python.sh, which tools/python.sh asks too): PYTHON as
# given; else an active virtual or conda environment's; else the clone's .venv, made from python3. Nothing goes into
# a global interpreter unless asked for. A .venv is made once (Debian/Ubuntu ship venv's ensurepip apart, in
# python3.X-venv: installed first where it is missing), then used as it is.
choice=$(./tools/choose_python.sh) || exit 1
IFS=$'\t' read -r mode PYTHON why <<< "$choice"
if [ "$mode" = use ]; then
    echo "bootstrap: installing into $("$PYTHON" -c 'import sys; print(sys.executable)') ($why)"
else
    { read -r base_exe; read -r version; } < <("$PYTHON" -c 'import sys; print(sys.executable); print("%d.%d" % sys.version_info[:2])')
    # What the clone's .venv holds: "<version> pip", "<version> nopip" (made where ensurepip was missing: completed
    # in place below, not made anew), or nothing (none yet, or its Python is gone).
    have=$(.venv/bin/python -c 'import importlib.util as u, sys; print("%d.%d" % sys.version_info[:2], "pip" if u.find_spec("pip") else "nopip")' 2>/dev/null || true)
    if [ -n "$have" ] && [ "${have% *}" != "$version" ]; then
        # Installing for one Python and running another would be a silent surprise: say so instead.
        echo "bootstrap: this clone's .venv holds Python ${have% *}, but PYTHON=$PYTHON is Python $version: remove .venv" \
             "(rm -rf .venv) to have it made anew for $version, or run with PYTHON=python${have% *}" >&2
        exit 1
    fi
    how=". .venv/bin/activate to use it from your shell; to install elsewhere, activate an environment or give PYTHON="
    if [ "$have" = "$version pip" ]; then
        echo "bootstrap: $why: installing into this clone's virtual environment .venv ($how)"
    else
        if ! "$PYTHON" -c 'import venv, ensurepip' 2>/dev/null; then
            venv_pkg=python$version-venv
            echo "bootstrap: $base_exe has no venv/ensurepip: installing $venv_pkg"
            apt_install "$venv_pkg" || { echo "bootstrap: could not install $venv_pkg, which $base_exe needs to" \
                "make a virtual environment: install it (sudo apt install $venv_pkg), then run this again" >&2; exit 1; }
        fi
        echo "bootstrap: $why: making the virtual environment .venv in this clone and installing into it (Python" \
             "$version from $base_exe; $how)"
        "$PYTHON" -m venv .venv
    fi
    PYTHON=$PWD/.venv/bin/python
fi
if [ "${GLTENSOR_BOOTSTRAP_STOP_AFTER_PYTHON:-}" = 1 ]; then
    echo "bootstrap: python $PYTHON"
    exit 0
fi

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
    apt_install "${missing[@]}"
fi

# 2. Python packages, only those missing (torch pinned: an unpinned one pulls a multi-GB CUDA build). One Python
# process finds which modules are missing without importing them (importing torch alone takes seconds).
missing_mods=" $("$PYTHON" - "$@" <<'PY'
import importlib.util
mods = ["torch", "numpy", "OpenGL", "tqdm", "PIL", "pytest", "hypothesis", "cv2", "imageio", "moderngl", "mujoco",
        "dm_control", "panda3d", "matplotlib", "gymnasium", "stable_baselines3", "cloudpickle", "torchrl", "tensordict"]
print(" ".join(m for m in mods if importlib.util.find_spec(m) is None))
PY
) "
has_mod() { [[ "$missing_mods" != *" $1 "* ]]; }
pip_q() { "$PYTHON" -m pip install -q --disable-pip-version-check "$@" 2>&1 | { grep -v "Running pip as the 'root'" || true; }; }
# Best-effort extras: give up quickly where there is no network (the GPU machine) instead of pip's long retries.
pip_try() { pip_q --retries 1 --timeout 10 "$@"; }
TORCH_SPEC="torch==${TORCH_VERSION:-2.13.0}"

# Without an NVIDIA driver, torch's CPU build from PyTorch's CPU-only index, else the default index
# (tools/torch_index.sh chooses, and says which).
install_torch() {
    local index_args
    mapfile -t index_args < <(PYTHON="$PYTHON" ./tools/torch_index.sh)
    echo "bootstrap: pip installing $TORCH_SPEC ${index_args[*]}"
    pip_q "${index_args[@]}" "$TORCH_SPEC"
}
has_mod torch || install_torch

pip_missing=()
has_mod numpy || pip_missing+=(numpy)
has_mod OpenGL || pip_missing+=("PyOpenGL>=3.1")
has_mod tqdm || pip_missing+=(tqdm)
has_mod PIL || pip_missing+=(pillow)
has_mod pytest || pip_missing+=("pytest>=7")
"$PYTHON" -c "import setuptools, sys; sys.exit(int(setuptools.__version__.split('.')[0]) < 64)" 2>/dev/null \
    || pip_missing+=("setuptools>=64" wheel)
if [ ${#pip_missing[@]} -gt 0 ]; then
    echo "bootstrap: pip installing ${pip_missing[*]}"
    pip_q "${pip_missing[@]}"
fi

# 2b. What the tests exercise beyond the core, best effort: a platform without a wheel for one of them still gets
# the rest of the suite (those tests then skip, saying why). mujoco stays below 4: dm_control 1.0.50 fails on
# mujoco 4.0 ("MjModel has no attribute flex_vertedge"); imageio is what Gymnasium's MuJoCo envs import.
for spec in "hypothesis:hypothesis" "cv2:opencv-python-headless" "imageio:imageio" "moderngl:moderngl>=5.8" \
            "mujoco:mujoco>=3,<4" "panda3d:panda3d>=1.10" "matplotlib:matplotlib"; do
    mod=${spec%%:*}
    has_mod "$mod" || pip_try "${spec#*:}" || echo "bootstrap: could not install ${spec#*:}; its tests will be skipped"
done
has_mod dm_control || pip_try "dm_control" "mujoco>=3,<4" || echo "bootstrap: could not install dm_control; its tests will be skipped"
# The vector-env integrations (gltensor.gymnasium, gltensor.sb3). stable-baselines3 depends on torch: --no-deps,
# with its small dependencies by name, so that it never replaces the CPU or CUDA torch installed above.
has_mod gymnasium || pip_try "gymnasium>=1.0,<2" || echo "bootstrap: could not install gymnasium; its tests will be skipped"
if ! has_mod stable_baselines3; then
    pip_try --no-deps "stable-baselines3>=2.4,<3" && pip_try cloudpickle \
        || echo "bootstrap: could not install stable-baselines3; its tests will be skipped"
fi
# gltensor.torchrl: TorchRL and tensordict with --no-deps (both require torch, which pip would otherwise replace),
# their small dependencies by name. torchrl 0.14.1 requires tensordict >= 0.14.3, < 0.15 and torch >= 2.11 (its
# optional C++ extension, used by prioritised replay buffers only, does not load on torch 2.13; the envs, specs,
# transforms, collectors and losses are Python). Resize needs torchvision, which is left out: PyPI's wheels are
# CUDA builds that fail to import beside torch's CPU build (those tests skip).
if ! has_mod torchrl || ! has_mod tensordict; then
    pip_try --no-deps "torchrl==0.14.1" "tensordict==0.14.3" "pyvers>=0.2.3,<0.3" "hoptorch>=0.1.4" \
        && pip_try cloudpickle packaging orjson \
        || echo "bootstrap: could not install torchrl; its tests will be skipped"
fi

# 3. gltensor itself (with the CUDA backend when a toolkit is found), only when something it is built from
# changed: the fingerprint covers every file of the build (C, CUDA, headers, setup.py, pyproject.toml), the build
# settings and the Python it is installed for; the install must also still point at this checkout. So `make test`
# right after `make demo` starts pytest within seconds, and any edit to a .c/.cu/.h or setup.py rebuilds.
# Kernel architectures: those of the GPUs here (nvidia-smi), or, without a driver (CUDA cannot run, the kernels
# are only compiled), one (sm_75 + its PTX) instead of the wheel's seven: minutes less on a small machine.
# GLTENSOR_CUDA_ARCHS set by the caller wins; tools/build_wheel.sh keeps the full list (setup.py's default).
if [ -z "${GLTENSOR_CUDA_ARCHS:-}" ]; then
    archs=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | tr -d '. ' | sort -u | paste -sd';' || true)
    [[ "$archs" =~ ^[0-9]+(\;[0-9]+)*$ ]] || archs=75
    export GLTENSOR_CUDA_ARCHS=$archs
fi
fingerprint() {
    { "$PYTHON" -c "import sys; print(sys.executable, sys.version)"
      env | grep -E '^(GLTENSOR_CUDA_ARCHS|GLTENSOR_NO_CUDA|GLTENSOR_SANITIZE|CUDA_HOME|CUDA_PATH|CC|CFLAGS|LDFLAGS)=' | sort
      command -v nvcc || true
      find src include python/gltensor/_ext setup.py pyproject.toml -type f ! -name '*.pyc' -print0 | sort -z | xargs -0 sha256sum
    } | sha256sum | cut -d' ' -f1
}
stamp=build/bootstrap.stamp
want=$(fingerprint)
installed_here() {
    "$PYTHON" - "$PWD/python/gltensor" <<'PY'
import importlib.util, os, sys
spec = importlib.util.find_spec("gltensor")
ok = spec is not None and spec.origin and os.path.dirname(os.path.realpath(spec.origin)) == os.path.realpath(sys.argv[1])
sys.exit(0 if ok and any(f.startswith("_gltensor") and f.endswith(".so") for f in os.listdir(sys.argv[1])) else 1)
PY
}
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && installed_here; then
    echo "bootstrap: gltensor is built and installed from this checkout, nothing changed since: no rebuild"
else
    # The module is an abi3 build (_gltensor.abi3.so); a version-specific one left by an older build would shadow
    # it, so it goes first.
    rm -f python/gltensor/_gltensor.cpython-*.so "$stamp"
    echo "bootstrap: building gltensor (CUDA kernels, if a toolkit is found, for sm_${GLTENSOR_CUDA_ARCHS//;/, sm_})"
    pip_q --no-build-isolation --no-deps -e .
    mkdir -p build && echo "$want" > "$stamp"
fi
"$PYTHON" -c "import gltensor; print('bootstrap: gltensor', gltensor.__version__, '| CUDA compiled:', gltensor.cuda_compiled(), '| CUDA usable:', gltensor.cuda_available())"
