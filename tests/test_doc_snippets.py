"""Every ```python block of README.md and docs/*.md runs as written, on a headless machine with no MUJOCO_GL,
PYOPENGL_PLATFORM, DISPLAY or WAYLAND_DISPLAY set (what a reader has).

Blocks are collected when the test runs (docs added later are included), each run in a fresh Python
process from an empty temporary directory, the way a reader pastes it into a file. A block preceded by
the line `<!-- fragment -->` is deliberately not a whole program: it is collected and skipped, and it
must be one of FRAGMENTS below, each with the reason it cannot run, so that a new fragment needs a
justification here. Blocks that import an optional package (panda3d, mujoco, moderngl, gymnasium, torch,
cv2) skip where it is missing. Bash blocks are not run (the quick start's are what CI runs).

The blocks choose backend "auto": the CPU backend here, CUDA on the GPU machine
(tools/gpu_verify.sh step `docs`). GLTENSOR_DOCS_BACKEND=cpu|cuda makes the test require that backend:
it is checked in a probe process before any block runs.
"""

import ast
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT_S = 120

# "file:first line of the block's code" -> why it cannot run as written. Keep this short.
FRAGMENTS = {
    'docs/python-api.md:frame = cap.read(channels="bgra")':
        "cv2.cuda over a CUDA frame: needs the CUDA backend and an OpenCV built with CUDA (PyPI's wheels have none)",
}

OPTIONAL = ("panda3d", "direct", "mujoco", "moderngl", "gymnasium", "torch", "cv2", "cupy", "jax", "PIL",
            "stable_baselines3", "dm_control", "torchrl", "tensordict")
_FENCE = re.compile(r"^(`{3,})([^`]*)$")  # CommonMark: a backtick fence's info string has no backtick


def doc_files():
    return [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))


def blocks(path):
    """(line of the opening fence, language, code, marked as fragment) of every fenced block."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out, i = [], 0
    while i < len(lines):
        m = _FENCE.match(lines[i].strip())
        if not m:
            i += 1
            continue
        fence, lang, start = m.group(1), m.group(2).strip().lower(), i
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            j += 1
        prev = next((lines[k].strip() for k in range(start - 1, -1, -1) if lines[k].strip()), "")
        out.append((start + 1, lang, "\n".join(lines[start + 1:j]) + "\n", prev == "<!-- fragment -->"))
        i = j + 1
    return out


def block_id(path, code):
    first = next((ln.strip() for ln in code.splitlines() if ln.strip()), "")
    return f"{path.relative_to(ROOT)}:{first[:60].rstrip()}"


def python_blocks():
    for path in doc_files():
        for line, lang, code, fragment in blocks(path):
            if lang in ("python", "py", "python3"):
                yield path, line, code, fragment


# gltensor modules that import an optional package themselves: a block using them needs it too.
NEEDS = {
    "gltensor.mujoco": ("mujoco", "torch"),
    "gltensor.mujoco.vector": ("gymnasium",),
    "gltensor.mujoco:MujocoVectorEnv": ("gymnasium",),
    "gltensor.mujoco:as_sb3": ("gymnasium",),
    "gltensor.mujoco:merge_infos": ("gymnasium",),
    "gltensor.mujoco:default_threads": ("gymnasium",),
    "gltensor.moderngl": ("moderngl",),
    "gltensor.panda3d": ("panda3d",),
    "gltensor.gymnasium": ("gymnasium",),
    "gltensor.sb3": ("stable_baselines3", "gymnasium"),
    "gltensor.torchrl": ("torchrl", "tensordict", "mujoco", "torch", "gymnasium"),
    "gltensor.mujoco:DmControlBatch": ("dm_control", "gymnasium"),
    "gltensor.torchrl:DMControlBatchEnv": ("dm_control",),
}


def imported_modules(code):
    """Top-level modules a block imports (ast: every `import a as b, c` and `from a.b import c` form), plus the
    optional packages of the gltensor modules it imports."""
    names = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            full = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            full = [node.module]
            # a name imported from a gltensor module that needs an engine of its own
            full += [f"{node.module}:{alias.name}" for alias in node.names]
        else:
            continue
        for name in full:
            names.add(name.split(".")[0].split(":")[0])
            for prefix, needs in NEEDS.items():
                if name == prefix or name.startswith(prefix + "."):
                    names.update(needs)
    return names


def _params():
    params = []
    for path, line, code, fragment in python_blocks():
        ident = f"{path.relative_to(ROOT)}:{line}"
        params.append(pytest.param(path, code, fragment, id=ident))
    return params


USERS_CHOICES = ("MUJOCO_GL", "PYOPENGL_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY")


def _env():
    # What a reader on a headless machine has: no display and no GL platform chosen. gltensor picks EGL for
    # PyOpenGL (PYOPENGL_PLATFORM) and gltensor.mujoco* picks it for MuJoCo (MUJOCO_GL); a block must not need
    # either variable set by hand.
    env = {k: v for k, v in os.environ.items() if k not in USERS_CHOICES}
    env["PYTHONUNBUFFERED"] = "1"
    # The blocks import the gltensor this test imports (a source checkout or the installed wheel).
    import gltensor

    pkg_parent = str(Path(gltensor.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_parent, env.get("PYTHONPATH")) if p)
    return env


def test_blocks_run_with_none_of_the_users_choices_set(monkeypatch):
    for name in USERS_CHOICES:
        monkeypatch.setenv(name, "set-by-the-caller")
    assert not set(USERS_CHOICES) & set(_env())


def test_fragments_are_few_and_justified():
    found = {block_id(path, code) for path, _, code, fragment in python_blocks() if fragment}
    assert found == set(FRAGMENTS), (
        "blocks marked <!-- fragment --> must be listed in FRAGMENTS with the reason they cannot run: "
        f"unlisted {sorted(found - set(FRAGMENTS))}, listed but not found {sorted(set(FRAGMENTS) - found)}")
    assert len(FRAGMENTS) <= 3, "fragments must stay rare: make the block run instead"


def test_blocks_are_collected():
    # README's first example and the per-engine blocks: a collector that finds nothing cannot pass quietly.
    readme = [code for path, _, code, _ in python_blocks() if path.name == "README.md"]
    assert len(readme) >= 6
    assert any("Context.headless" in code for code in readme)


@pytest.fixture(scope="module")
def required_backend():
    want = os.environ.get("GLTENSOR_DOCS_BACKEND")
    if not want:
        return None
    probe = ("import gltensor; ctx = gltensor.Context.headless(); "
             "from OpenGL import GL; t = GL.glGenTextures(1); GL.glBindTexture(GL.GL_TEXTURE_2D, t); "
             "GL.glTexStorage2D(GL.GL_TEXTURE_2D, 1, GL.GL_RGBA8, 4, 4); "
             "print(gltensor.Capture(t).backend)")
    out = subprocess.run([sys.executable, "-c", probe], env=_env(), capture_output=True, text=True, timeout=TIMEOUT_S)
    got = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else out.stderr[-2000:]
    assert got == want, f"GLTENSOR_DOCS_BACKEND={want} but the blocks' backend='auto' gives {got!r}"
    return want


@pytest.mark.parametrize("path,code,fragment", _params())
def test_block_runs(path, code, fragment, required_backend):
    if fragment:
        ident = block_id(path, code)
        pytest.skip(f"fragment: {FRAGMENTS.get(ident, 'not listed in FRAGMENTS')}")
    missing = sorted(m for m in imported_modules(code) & set(OPTIONAL) if importlib.util.find_spec(m) is None)
    if missing:
        pytest.skip(f"needs {', '.join(missing)}, not installed")
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "block.py"
        script.write_text(code, encoding="utf-8")
        try:
            out = subprocess.run([sys.executable, str(script)], cwd=tmp, env=_env(), capture_output=True, text=True,
                                 timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            pytest.fail(f"{path.name} block ran past {TIMEOUT_S} s:\n{code}\n{exc.stdout}\n{exc.stderr}")
    assert out.returncode == 0, (f"{path.relative_to(ROOT)} block exited {out.returncode}:\n{code}\n"
                                 f"--- stdout\n{out.stdout[-3000:]}\n--- stderr\n{out.stderr[-5000:]}")
