"""Build of the _gltensor extension: the C core (src/), the CPython layer (python/gltensor/_ext/)
and, when a CUDA toolkit is found, the CUDA backend with its kernels compiled by nvcc and cudart
linked statically. Without a toolkit the CPU backend is built alone, and the build says so."""

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).parent.resolve()

# Real architectures for the GPUs people run simulators on (Turing..Hopper, Blackwell),
# plus PTX of the newest so that later GPUs JIT-compile it.
CUDA_ARCHS = os.environ.get("GLTENSOR_CUDA_ARCHS", "75;80;86;89;90;100;120").split(";")


def find_cuda():
    """The CUDA toolkit root, or None. GLTENSOR_NO_CUDA=1 forces a CPU-only build."""
    if os.environ.get("GLTENSOR_NO_CUDA") == "1":
        return None
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(str(Path(nvcc).resolve().parent.parent))
    candidates.append("/usr/local/cuda")
    for c in candidates:
        if c and (Path(c) / "bin" / "nvcc").exists() and (Path(c) / "include" / "cuda_runtime_api.h").exists():
            return Path(c)
    return None


def supported_archs(nvcc):
    """Drop architectures this nvcc does not know (older toolkits lack sm_100/sm_120)."""
    try:
        out = subprocess.run([nvcc, "--list-gpu-arch"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return CUDA_ARCHS
    known = {line.strip().replace("compute_", "") for line in out.split()}
    return [a for a in CUDA_ARCHS if a in known] or CUDA_ARCHS[:1]


def kernel_cache(nvcc, flags):
    """Where the kernel object for these inputs lives: build/cuda-kernels/<key>.o, the key a hash of nvcc's path
    and version, nvcc's flag variables, the flags (architectures included) and every file the .cu can include
    (src/*/*.cu, src/*/*.h, include/*.h). Editable installs build in a fresh temporary folder each time, so without
    this every `pip install -e .` recompiled the kernels for every architecture (~95 s on 2 cores) even when only
    a .c file or nothing changed; any change to those inputs gives a new key and a real compile."""
    h = hashlib.sha256()
    try:
        version = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        version = ""
    env = [os.environ.get(v, "") for v in ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "NVCC_CCBIN")]
    for part in [nvcc, version, *env, *flags]:
        h.update(part.encode() + b"\0")
    inputs = sorted(ROOT.glob("src/*/*.cu")) + sorted(ROOT.glob("src/*/*.h")) + sorted(ROOT.glob("include/*.h"))
    for f in inputs:
        h.update(f.relative_to(ROOT).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return ROOT / "build" / "cuda-kernels" / (h.hexdigest()[:24] + ".o")


class BuildExt(build_ext):
    def build_extension(self, ext):
        cuda = find_cuda()
        if cuda:
            lib = cuda / "lib64" if (cuda / "lib64" / "libcudart_static.a").exists() else cuda / "lib"
            obj = Path(self.build_temp) / "src" / "cuda" / "cuda_kernels.o"  # beside the C objects of its folder
            obj.parent.mkdir(parents=True, exist_ok=True)
            nvcc = str(cuda / "bin" / "nvcc")
            archs = supported_archs(nvcc)
            gencode = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs]
            gencode.append(f"-gencode=arch=compute_{archs[-1]},code=compute_{archs[-1]}")
            flags = ["-c", "-O3", "-std=c++17", "-Xcompiler", "-fPIC,-fvisibility=hidden", *gencode]
            cached = kernel_cache(nvcc, flags)
            if cached.exists():
                print(f"gltensor: CUDA kernels unchanged, reusing {cached.relative_to(ROOT)} (sm_"
                      + ", sm_".join(archs) + ")", flush=True)
                cached.touch()  # recently used: kept by the pruning below
            else:
                print("gltensor: compiling CUDA kernels for sm_" + ", sm_".join(archs), flush=True)
                partial = cached.with_suffix(f".{os.getpid()}.tmp")
                cached.parent.mkdir(parents=True, exist_ok=True)
                # -I src: the kernels name their headers from src/ ("cuda/kernels.h"), as the C files do.
                kernels = ROOT / "src" / "cuda" / "cuda_kernels.cu"
                subprocess.run([nvcc, *flags, "-I", str(ROOT / "src"), str(kernels), "-o", str(partial)], check=True)
                os.replace(partial, cached)  # atomic: an interrupted nvcc never leaves a half object under the key
                # Keep the few newest (e.g. the bootstrap's and the wheel's architecture lists), not every edit's.
                for old in sorted(cached.parent.glob("*.o"), key=lambda f: f.stat().st_mtime)[:-4]:
                    old.unlink(missing_ok=True)
            shutil.copyfile(cached, obj)
            ext.extra_objects.append(str(obj))
            ext.define_macros.append(("GLT_WITH_CUDA", "1"))
            # What the doctor reports as the build's kernel architectures (SASS per arch, PTX of the last).
            code = " ".join([f"sm_{a}" for a in archs] + [f"compute_{archs[-1]}"])
            ext.define_macros.append(("GLT_CUDA_CODE", f'"{code}"'))
            ext.include_dirs.append(str(cuda / "include"))
            ext.library_dirs.append(str(lib))
            # Static cudart: no libcudart.so needed at run time; exports.map keeps its symbols private so
            # they never clash with the one PyTorch or CuPy loads. "stdc++" is the C++ runtime of the
            # kernels' host stubs (zig cc, used for wheels, links its own libc++ statically for it).
            ext.libraries += ["cudart_static", "rt", "stdc++"]
            print(f"gltensor: building with the CUDA backend (toolkit {cuda})", flush=True)
        else:
            print("gltensor: no CUDA toolkit found (set CUDA_HOME or put nvcc on PATH); building the CPU "
                  "backend only", flush=True)
        super().build_extension(ext)

    def copy_extensions_to_source(self):
        """In-place builds (build_ext --inplace, pip install -e): a build from before the abi3 switch
        (_gltensor.cpython-311-....so) would shadow the new _gltensor.abi3.so, since Python prefers the
        version-specific name. Remove such leftovers."""
        super().copy_extensions_to_source()
        for ext in self.extensions:
            built = Path(self.get_ext_fullpath(ext.name))
            for old in built.parent.glob(ext.name.rsplit(".", 1)[-1] + ".*.so"):
                if old.name != built.name:
                    print(f"gltensor: removing stale build {old}", flush=True)
                    old.unlink()


def header_version():
    """The version of include/gltensor.h's GLT_VERSION_* macros: the package and the C library share it."""
    text = (ROOT / "include" / "gltensor.h").read_text()
    parts = [re.search(rf"#define GLT_VERSION_{p} (\d+)", text).group(1) for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


# The core: one folder per concern (src/<folder>/, layered: tools/check_layers.py); headers are named from src/
# ("gl/gl.h"), hence -Isrc.
core_sources = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "src").glob("*/*.c"))
ext_sources = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "python" / "gltensor" / "_ext").glob("*.c"))

# The module uses CPython's stable ABI (3.10+), so one abi3 wheel installs on every CPython from 3.10 on.
LIMITED_API = ("Py_LIMITED_API", "0x030A0000")

extension = Extension(
    "gltensor._gltensor",
    sources=core_sources + ext_sources,
    include_dirs=["include", "src"],
    define_macros=[("_GNU_SOURCE", "1"), LIMITED_API],
    py_limited_api=True,
    # -Werror=implicit-function-declaration: a call is declared by the header of the folder that owns it, so a call
    # that skips the include (and with it the layer check) does not build.
    extra_compile_args=["-std=c11", "-O2", "-fvisibility=hidden", "-Wall", "-Wextra", "-Wno-unused-parameter",
                        "-Wno-missing-field-initializers", "-Wno-cast-function-type",
                        "-Werror=implicit-function-declaration"],
    libraries=["dl", "pthread", "m"],  # m: nearbyintf (convert/convert.c)
    extra_link_args=["-Wl,-Bsymbolic", "-Wl,--version-script=" + str(ROOT / "python" / "gltensor" / "_ext" / "exports.map")],
)

# GLTENSOR_SANITIZE=address,undefined builds the C core and the extension with ASan/UBSan (CI's sanitizer run,
# tools/ci_sanitize.sh). Python is not instrumented, so the run preloads libasan (LD_PRELOAD). UBSan stops at its
# first report, so a finding fails the run instead of scrolling by.
SANITIZE = os.environ.get("GLTENSOR_SANITIZE", "").strip()
if SANITIZE:
    extension.extra_compile_args = [a for a in extension.extra_compile_args if a != "-O2"] + [
        "-O1", "-g", "-fno-omit-frame-pointer", f"-fsanitize={SANITIZE}", "-fno-sanitize-recover=all"]
    extension.extra_link_args += [f"-fsanitize={SANITIZE}"]
    print(f"gltensor: building with -fsanitize={SANITIZE}", flush=True)

setup(version=header_version(), ext_modules=[extension], cmdclass={"build_ext": BuildExt}, options={"bdist_wheel": {"py_limited_api": "cp310"}})
