"""The layers of the C core (src/<folder>/) and of the extension, as tools/check_layers.py declares them.

The tree must keep them (includes on the source; calls on objects compiled here, so no build is needed), and the
checker must catch each way of breaking them: an include or a call to a higher layer or to a sibling, a cycle,
a file left directly in src/, a folder without a layer or a README, a circle between the extension's files, and
its leaf helpers calling back into it (the old args.c <-> module.c circle).
"""
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXT_DIR = ROOT / "python" / "gltensor" / "_ext"

_spec = importlib.util.spec_from_file_location("check_layers", ROOT / "tools" / "check_layers.py")
layers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(layers)

CC = shutil.which("gcc") or shutil.which("cc")
# The compiler runs unsanitized under tools/ci_sanitize.sh, which preloads libasan into the suite.
CC_ENV = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
CUDA_INCLUDE = next((Path(d) / "include" for d in (os.environ.get("CUDA_HOME"), "/usr/local/cuda")
                     if d and (Path(d) / "include" / "cuda_runtime_api.h").exists()), None)


def _copy_tree(tmp_path):
    """src/, include/ and the extension's sources in tmp_path: the checker's view of a repository."""
    shutil.copytree(ROOT / "src", tmp_path / "src")
    shutil.copytree(ROOT / "include", tmp_path / "include")
    shutil.copytree(EXT_DIR, tmp_path / "python" / "gltensor" / "_ext",
                    ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    return tmp_path


def _prepend_include(path, header):
    text = path.read_text()
    path.write_text(f'#include "{header}"\n' + text)


def test_the_tree_keeps_its_layers():
    assert layers.check_tree(ROOT) == []


def test_the_command_line_passes_on_the_tree():
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "check_layers.py")], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "no upward or sideways include" in out.stdout


def test_every_folder_has_a_layer_and_a_readme_naming_it():
    folders = sorted(p.name for p in (ROOT / "src").iterdir() if p.is_dir())
    assert folders == sorted(layers.LAYERS)
    for name in folders:
        first = (ROOT / "src" / name / "README.md").read_text().splitlines()[0]
        assert first == f"# {name}/ (layer {layers.LAYERS[name]})", (name, first)


def test_an_upward_include_fails(tmp_path):
    root = _copy_tree(tmp_path)
    _prepend_include(root / "src" / "core" / "errors.c", "slots/slots.h")
    problems = layers.check_tree(root)
    assert any("src/core/errors.c" in p and "'core' (0) may not use 'slots' (7)" in p for p in problems), problems
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "check_layers.py"), "--root", str(root)],
                         capture_output=True, text=True)
    assert out.returncode == 1 and "src/core/errors.c" in out.stdout, out.stdout


def test_a_sideways_include_fails(tmp_path):
    root = _copy_tree(tmp_path)
    _prepend_include(root / "src" / "cpu" / "cpu_backend.c", "cuda/cuda_api.h")  # cuda/ and cpu/ share layer 3
    problems = layers.check_tree(root)
    assert any("src/cpu/cpu_backend.c" in p and "may not use 'cuda'" in p for p in problems), problems


def test_the_core_may_not_include_the_extension(tmp_path):
    root = _copy_tree(tmp_path)
    (root / "src" / "read" / "batch.c").write_text('#include "../../python/gltensor/_ext/ext.h"\n')
    problems = layers.check_tree(root)
    assert any("src/read/batch.c" in p and "'ext'" in p for p in problems), problems


def test_a_header_named_without_its_folder_or_missing_fails(tmp_path):
    root = _copy_tree(tmp_path)
    _prepend_include(root / "src" / "read" / "atlas.c", "core.h")
    problems = layers.check_tree(root)
    assert any('src/read/atlas.c: #include "core.h" resolves to no file' in p for p in problems), problems


def test_a_file_in_src_or_a_folder_without_layer_or_readme_fails(tmp_path):
    root = _copy_tree(tmp_path)
    (root / "src" / "stray.c").write_text("int stray;\n")
    (root / "src" / "extra").mkdir()
    (root / "src" / "frames" / "README.md").unlink()
    (root / "src" / "upload" / "pool.c").write_text("int pool_twin;\n")
    problems = "\n".join(layers.check_tree(root))
    assert "src/stray.c: a file directly in src/" in problems
    assert "src/extra/: a folder not in tools/check_layers.py's LAYERS" in problems
    assert "src/extra/: no README.md" in problems
    assert "src/frames/: no README.md" in problems
    assert "one object name twice" in problems and "src/upload/pool.c" in problems


def test_cycles_are_found():
    assert layers.find_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert layers.find_cycles({"a": {"b"}, "b": set()}) == []
    graph = {"a": {"b", "d"}, "b": {"c"}, "c": {"a"}, "d": {"c"}}
    assert layers.cycle_path(graph, layers.find_cycles(graph)[0]) == ["a", "b", "c", "a"]
    problems = layers.check_edges([("gl", "core", "down"), ("core", "gl", "up")])
    assert any("cycle between folders: core -> gl -> core" in p for p in problems), problems
    assert any("up: layer 'core' (0) may not use 'gl' (1)" in p for p in problems), problems


def test_layers_order():
    assert layers.may_use("slots", "read") and layers.may_use("read", "core") and layers.may_use("ext", "slots")
    assert not layers.may_use("read", "upload")  # siblings
    assert not layers.may_use("cuda", "device")  # upward
    assert not layers.may_use("slots", "ext")    # nothing of src/ uses the extension


def _compile(sources, out_dir):
    """Objects of `sources` under out_dir, at their paths relative to ROOT (so that each keeps its folder)."""
    py_include = sysconfig.get_paths()["include"]
    flags = ["-std=c11", "-O0", "-w", "-D_GNU_SOURCE", "-DPy_LIMITED_API=0x030A0000", f"-I{ROOT / 'include'}",
             f"-I{ROOT / 'src'}", f"-I{py_include}"]
    if CUDA_INCLUDE:  # the CUDA files hold their calls only when built with CUDA (as CI's build is)
        flags += ["-DGLT_WITH_CUDA", f"-I{CUDA_INCLUDE}"]

    def one(src):
        obj = out_dir / src.relative_to(ROOT).with_suffix(".o")
        obj.parent.mkdir(parents=True, exist_ok=True)
        r = subprocess.run([CC, *flags, "-c", str(src), "-o", str(obj)], capture_output=True, text=True, env=CC_ENV)
        assert r.returncode == 0, f"{src}: {r.stderr[-2000:]}"
        return obj

    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(one, sources))


@pytest.fixture(scope="module")
def objects(tmp_path_factory):
    if not CC or not shutil.which("nm"):
        pytest.skip("needs a C compiler and nm")
    out = tmp_path_factory.mktemp("objects")
    return out, _compile(sorted((ROOT / "src").glob("*/*.c")) + sorted(EXT_DIR.glob("*.c")), out)


def test_calls_keep_the_layers(objects):
    _, objs = objects
    assert layers.check_objects(objs) == []


def test_an_upward_call_fails(objects, tmp_path):
    _, objs = objects
    bad = tmp_path / "src" / "core" / "bad.c"  # a core file calling shared slots, declared by hand (no include)
    bad.parent.mkdir(parents=True)
    bad.write_text("int glt_slots_closed_alive_for_testing(void);\nint bad(void) { return "
                   "glt_slots_closed_alive_for_testing(); }\n")
    obj = tmp_path / "objects" / "src" / "core" / "bad.o"
    obj.parent.mkdir(parents=True)
    subprocess.run([CC, "-c", str(bad), "-o", str(obj)], check=True, env=CC_ENV)
    problems = layers.check_objects([*objs, obj])
    assert any("bad.o calls glt_slots_closed_alive_for_testing" in p and "'core' (0) may not use 'slots'" in p
               for p in problems), problems


def test_the_extension_leaves_call_nothing_of_it(objects, tmp_path):
    """The circle the extension had: args.c used module.c's glt_py_type_name while module.c used args.c."""
    _, objs = objects
    args = tmp_path / "_ext" / "args.o"  # an args.o that calls back into module.c
    args.parent.mkdir(parents=True)
    src = tmp_path / "args.c"
    src.write_text("int glt_py_raise(void);\nint glt_py_as_int(void) { return glt_py_raise(); }\n")
    subprocess.run([CC, "-c", str(src), "-o", str(args)], check=True, env=CC_ENV)
    kept = [o for o in objs if not (o.parent.name == "_ext" and o.name == "args.o")]
    problems = layers.check_objects([*kept, args])
    assert any("_ext/args.c calls glt_py_raise of _ext/exceptions.c" in p for p in problems), problems


def test_a_circle_between_the_extensions_files_fails(objects, tmp_path):
    """module.c makes every type and the exception classes; a file below it that called back into it (here an
    exceptions.o using the module's init) closes a circle, named along its files."""
    _, objs = objects
    errors = tmp_path / "_ext" / "exceptions.o"
    errors.parent.mkdir(parents=True)
    src = tmp_path / "exceptions.c"
    src.write_text("void *PyInit__gltensor(void);\nvoid *glt_py_raise(void) { return PyInit__gltensor(); }\n")
    subprocess.run([CC, "-c", str(src), "-o", str(errors)], check=True, env=CC_ENV)
    kept = [o for o in objs if not (o.parent.name == "_ext" and o.name == "exceptions.o")]
    problems = layers.check_objects([*kept, errors])
    assert any(p.startswith("cycle between the extension's files: ") and "module.c" in p and "exceptions.c" in p
               for p in problems), problems
