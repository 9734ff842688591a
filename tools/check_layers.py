#!/usr/bin/env python3
"""The layers of the C core (src/<folder>/) and of the CPython extension, checked.

src/ holds one folder per concern, each on a layer (LAYERS below; each folder's README.md says the same in
words). A folder may include the headers of, and call, only folders on a lower layer, and itself: folders that
share a layer (cuda/ and cpu/, ...) know nothing of each other. The extension (python/gltensor/_ext/) sits above
every folder, and nothing in src/ includes it. What is checked:

  the tree      no source file directly in src/; every folder is in LAYERS and has a README.md; no two sources
                share a file name (libgltensor.a keeps names only)
  includes      every #include "..." of src/ and the extension resolves, and none runs to a higher layer, to a
                sibling on the same layer, or from src/ into the extension; no cycle between folders
  calls         (--objects DIR: compiled objects, paths ending in src/<folder>/<file>.o or _ext/<file>.o) every
                symbol an object uses from another folder is defined on a lower layer; the extension's files call
                each other without a cycle (module.c -> the types -> exceptions.c, args.c, params.c: no circle such
                as the old args.c <-> module.c), and its leaf helpers (EXT_LEAVES) call no other file of it

Exit status 1 with one line per problem, 0 when the tree keeps its layers. tests/test_layers.py runs it.
"""
import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# folder: layer. Lower layers know nothing of higher ones; README.md of each folder says why it sits where it does.
LAYERS = {
    "core": 0,     # errors, struct sizes, the environment: no GL, no CUDA
    "gl": 1,       # GL entry points, contexts' identity and switching, EGL devices, formats, GL object helpers
    "convert": 2,  # what a read makes of a format, and the arithmetic of every conversion (CPU; codes for CUDA)
    "cuda": 3,     # every CUDA call and the kernels (cuda_none.c without a toolkit)
    "cpu": 3,      # the CPU backend's readback
    "device": 4,   # which GPU and backend: headless EGL contexts on a CUDA device, the backend choice
    "frames": 4,   # memory handed to callers: the pool, frames, checks of caller-owned destinations
    "objects": 5,  # what every object over one GL object shares
    "read": 6,     # the read direction: captures, batches, atlases, the read path, the GL-side stage
    "upload": 6,   # tensors written into textures
    "buffer": 6,   # buffer objects mapped or copied
    "slots": 7,    # shared slots: the trainer's side and the workers'
}
EXT = "ext"  # the CPython extension's layer name: above every folder of src/
EXT_DIR = Path("python") / "gltensor" / "_ext"
# Helpers of the extension that every other file calls, and that therefore call no other file of it.
EXT_LEAVES = ("args", "params")
SOURCE_SUFFIXES = (".c", ".h", ".cu")
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.M)


def _strip_comments(text):
    return re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)


def rank(layer):
    return len(LAYERS) if layer == EXT else LAYERS.get(layer)


def may_use(user, used):
    """Whether layer `user` may include or call layer `used`: itself, or any lower layer."""
    if user == used:
        return True
    if used == EXT or rank(used) is None or rank(user) is None:
        return False
    return rank(used) < rank(user)


def find_cycles(edges):
    """The strongly connected groups of more than one node (Tarjan) in {node: {node, ...}}, each sorted."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(set(edges) | {w for ws in edges.values() for w in ws}):
        if v not in index:
            visit(v)
    return sorted(groups)


def check_edges(uses):
    """Problems with a list of (user_layer, used_layer, what) uses: upward or sideways ones, and cycles."""
    problems, graph = [], {}
    for user, used, what in uses:
        if user == used:
            continue
        graph.setdefault(user, set()).add(used)
        if not may_use(user, used):
            problems.append(f"{what}: layer {user!r} ({rank(user)}) may not use {used!r} ({rank(used)}); "
                            "move the code to the lower layer, or split the header that forces it")
    for group in find_cycles(graph):
        problems.append("cycle between folders: " + " -> ".join(cycle_path(graph, group)))
    return problems


def cycle_path(edges, group):
    """One cycle through group[0] along real edges of `edges` inside `group` (a strongly connected group), as a list
    of nodes that starts and ends with group[0]: the shortest, found breadth first."""
    start, members = group[0], set(group)
    came_from, frontier = {}, [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(edges.get(v, ())):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [start, *reversed(path[:-1]), start] if v != start else [start, start]
                if w in members and w not in came_from:
                    came_from[w] = v
                    nxt.append(w)
        frontier = nxt
    return group + group[:1]


def _layer_of_source(path, root):
    rel = path.relative_to(root)
    if rel.parts[0] == "src" and len(rel.parts) >= 3:
        return rel.parts[1]
    if rel.parts[:len(EXT_DIR.parts)] == EXT_DIR.parts:
        return EXT
    if rel.parts[0] == "include":
        return "public"
    return None


def _resolve(name, including, root):
    for base in (root / "src", including.parent, root / "include"):
        if (base / name).is_file():
            return (base / name).resolve()
    return None


def check_tree(root=ROOT):
    """Problems with the folders of root/src and with every quoted #include of src/ and the extension."""
    root = Path(root).resolve()
    src = root / "src"
    problems = []
    for p in sorted(src.iterdir()):
        if p.is_file() and p.name != "README.md":
            problems.append(f"src/{p.name}: a file directly in src/; put it in the folder of its concern")
        elif p.is_dir():
            if p.name not in LAYERS:
                problems.append(f"src/{p.name}/: a folder not in tools/check_layers.py's LAYERS; give it a layer")
            if not (p / "README.md").is_file():
                problems.append(f"src/{p.name}/: no README.md saying what the folder owns and what it may call")
    for name in LAYERS:
        if not (src / name).is_dir():
            problems.append(f"src/{name}/: in LAYERS but missing")
    seen = {}
    for p in sorted(src.glob("*/*")):
        if p.suffix in (".c", ".cu"):
            if p.stem in seen:
                problems.append(f"src/{p.parent.name}/{p.name} and {seen[p.stem]}: one object name twice (the Makefile's "
                                "libgltensor.a keeps object names only); rename one")
            seen[p.stem] = f"src/{p.parent.name}/{p.name}"
    uses = []
    files = [p for p in sorted(src.rglob("*")) if p.suffix in SOURCE_SUFFIXES]
    files += [p for p in sorted((root / EXT_DIR).glob("*")) if p.suffix in SOURCE_SUFFIXES]
    for path in files:
        rel = path.relative_to(root).as_posix()
        user = _layer_of_source(path, root)
        for name in INCLUDE.findall(_strip_comments(path.read_text())):
            target = _resolve(name, path, root)
            if target is None:
                problems.append(f'{rel}: #include "{name}" resolves to no file of src/, its own folder or include/')
                continue
            used = _layer_of_source(target, root)
            if used == "public" or used is None:
                continue
            if used != user and name != f"{used}/{target.name}":
                problems.append(f'{rel}: #include "{name}": name headers of other folders as "{used}/{target.name}"')
            uses.append((user, used, f'{rel}: #include "{name}"'))
    return problems + check_edges(uses)


def _symbols(obj):
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}  # nm runs unsanitized (tools/ci_sanitize.sh)
    out = subprocess.run(["nm", "-P", str(obj)], capture_output=True, text=True, check=True, env=env).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            (undefined if parts[1] == "U" else defined if parts[1] in "TDBRVWG" else set()).add(parts[0])
    return defined, undefined


def _layer_of_object(path):
    parts = Path(path).parts
    if "_ext" in parts:
        return EXT
    if "src" in parts:
        i = len(parts) - 1 - parts[::-1].index("src")
        if i + 2 < len(parts):
            return parts[i + 1]
    return None


def check_objects(objects):
    """Problems with the calls between compiled objects: each .o's layer from its path (src/<folder>/ or _ext/)."""
    defined_in, uses, problems = {}, {}, []
    for obj in sorted(Path(o) for o in objects):
        layer = _layer_of_object(obj)
        if layer is None:
            problems.append(f"{obj}: not under src/<folder>/ or _ext/: its layer is unknown")
            continue
        defined, undefined = _symbols(obj)
        for s in defined:
            defined_in.setdefault(s, set()).add((layer, obj))
        uses[obj] = (layer, undefined)
    edges, ext_calls = [], {}
    for obj, (layer, undefined) in uses.items():
        for s in sorted(undefined):
            for used, where in sorted(defined_in.get(s, ())):
                edges.append((layer, used, f"{obj.name} calls {s} ({where.name})"))
                if layer == EXT and used == EXT and where != obj:
                    ext_calls.setdefault(obj.stem, set()).add(where.stem)
                    if obj.stem in EXT_LEAVES:
                        problems.append(f"_ext/{obj.stem}.c calls {s} of _ext/{where.stem}.c: the extension's leaf "
                                        f"helpers ({', '.join(EXT_LEAVES)}) call no other file of it; move {s} into "
                                        "the leaf")
    for group in find_cycles(ext_calls):
        problems.append("cycle between the extension's files: " + " -> ".join(
            f"{f}.c" for f in cycle_path(ext_calls, group)))
    return problems + check_edges(edges)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=str(ROOT), help="repository root (default: this checkout)")
    ap.add_argument("--objects", metavar="DIR", help="also check the calls between the objects (*.o) under DIR")
    args = ap.parse_args(argv)
    problems = check_tree(args.root)
    if args.objects:
        objs = sorted(Path(args.objects).rglob("*.o"))
        if not objs:
            problems.append(f"{args.objects}: no objects found")
        problems += check_objects(objs)
    for p in problems:
        print(p)
    if not problems:
        print("layers: " + ", ".join(f"{n} ({r})" for n, r in sorted(LAYERS.items(), key=lambda kv: (kv[1], kv[0])))
              + "; no upward or sideways include" + (" or call" if args.objects else "") + ", no cycle")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
