"""What the prose promises is true and checkable.

Figures: a figure in README.md, docs/*.md or benchmarks/README.md names its source with a marker right after it,

    600 µs<!-- src: single_h200.json results/size=[1024,1024]&path=b/us_per_step -->

a results file under benchmarks/results/ (which records the host, the GPU and the date of the run) and a key path
in it: "/"-separated keys; a segment "k=v&k2=v2" picks the one list element whose fields equal those JSON values.
The figure is the last number before the marker; it must equal the value rounded to the figure's own decimals
(thousands separators allowed). In README.md every speed figure (µs, ms, x, frames/s, env-steps/s) carries one.

Also: no internal issue numbers (#12, issue 12) in README.md, docs/, CHANGELOG.md, benchmarks/README.md or any
string of the package (the benchmark's output included); README.md fits 15,000 characters in the newcomer's
order; the extras bring what each route needs.
"""

import ast
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
if not (RESULTS.is_dir() and (ROOT / "README.md").is_file()):
    pytest.skip("no checkout (README.md and benchmarks/results/ absent)", allow_module_level=True)
MARKER = re.compile(r"<!--\s*src:\s*(\S+)\s+(\S+)\s*-->")
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
SPEED_FIGURE = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?:\s?(?:µs|ms|frames/s|env-steps/s)|x)(?![\w²])")


def prose_files():
    files = [ROOT / "README.md", ROOT / "benchmarks" / "README.md", ROOT / "CHANGELOG.md"]
    files += sorted((ROOT / "docs").glob("*.md"))
    return [f for f in files if f.exists()]


def without_code(text):
    """The text with fenced code blocks blanked (line numbers kept): figures and numbers in code are not prose."""
    out, fence = [], None
    for line in text.splitlines():
        m = re.match(r"\s*(`{3,}|~{3,})", line)
        if m and (fence is None or m.group(1).startswith(fence)):
            fence = None if fence else m.group(1)[:3]
            out.append("")
        else:
            out.append("" if fence else line)
    return out


def markers():
    for path in prose_files():
        for lineno, line in enumerate(without_code(path.read_text(encoding="utf-8")), 1):
            for m in MARKER.finditer(line):
                yield path, lineno, line, m


def _match(element, conditions):
    for cond in conditions.split("&"):
        key, _, want = cond.partition("=")
        try:
            want = json.loads(want)
        except json.JSONDecodeError:
            pass  # a bare word: a string
        if element.get(key) != want:
            return False
    return True


def resolve(data, keypath):
    for seg in keypath.split("/"):
        if isinstance(data, list) and "=" in seg:
            found = [e for e in data if isinstance(e, dict) and _match(e, seg)]
            if len(found) != 1:
                raise KeyError(f"{seg!r} picks {len(found)} elements, not one")
            data = found[0]
        elif isinstance(data, list):
            data = data[int(seg)]
        else:
            data = data[seg]
    return data


def load_source(name):
    path = RESULTS / name
    assert path.is_file(), f"{name}: no such results file under benchmarks/results/"
    return json.loads(path.read_text(encoding="utf-8"))


def records_host_gpu_date(data):
    machine = data.get("machine") or {}
    gpu = machine.get("gpu_name") or machine.get("gl_renderer")
    return bool(machine.get("host") and gpu and data.get("date"))


MARKED = list(markers())


def test_figures_carry_markers():
    readme = [m for m in MARKED if m[0].name == "README.md" and m[0].parent == ROOT]
    assert len(readme) >= 3, "README.md's headline figures name their sources"


@pytest.mark.parametrize("path,lineno,line,m", MARKED,
                         ids=[f"{p.relative_to(ROOT)}:{n}" for p, n, _, _ in MARKED])
def test_figure_equals_its_source(path, lineno, line, m):
    where = f"{path.relative_to(ROOT)}:{lineno}"
    data = load_source(m.group(1))
    assert records_host_gpu_date(data), f"{where}: {m.group(1)} does not record the host, the GPU and the date"
    try:
        value = resolve(data, m.group(2))
    except (KeyError, IndexError, ValueError, TypeError) as exc:
        pytest.fail(f"{where}: {m.group(1)} has no {m.group(2)}: {exc}")
    before = MARKER.sub("", line[:m.start()])
    numbers = NUMBER.findall(before)
    assert numbers, f"{where}: no figure before the marker"
    shown = numbers[-1]
    decimals = len(shown.split(".")[1]) if "." in shown else 0
    want = f"{float(value):,.{decimals}f}"
    assert shown.replace(",", "") == want.replace(",", ""), (
        f"{where}: the text says {shown}, {m.group(1)} {m.group(2)} is {value} (shown to {decimals} decimals: {want})")


def test_every_speed_figure_in_the_readme_names_its_source():
    unsourced = []
    for lineno, line in enumerate(without_code((ROOT / "README.md").read_text(encoding="utf-8")), 1):
        for f in SPEED_FIGURE.finditer(line):
            if not re.match(r"\s*<!--\s*src:", line[f.end():]):
                unsourced.append(f"README.md:{lineno}: {f.group(0)!r}")
    assert not unsourced, "figures without a source marker right after them:\n" + "\n".join(unsourced)


def test_the_marker_check_catches_a_wrong_figure():
    data = {"results": [{"size": [8, 8], "path": "b", "us": 600.4}, {"size": [8, 8], "path": "c", "us": 7}]}
    assert resolve(data, "results/size=[8,8]&path=b/us") == 600.4
    with pytest.raises(KeyError):
        resolve(data, "results/size=[8,8]/us")  # two elements match: ambiguous
    assert f"{600.4:,.0f}" == "600" and f"{600.4:,.1f}" != "600.5"


# ---------------------------------------------------------------- no internal issue numbers

ISSUE_NUMBER = re.compile(r"(?<![\w&/])#\d+\b|\bissues?\s+#?\d+", re.IGNORECASE)


def test_no_issue_numbers_in_the_prose():
    found = []
    for path in prose_files():
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            found += [f"{path.relative_to(ROOT)}:{lineno}: {m.group(0)}" for m in ISSUE_NUMBER.finditer(line)]
    assert not found, "internal issue numbers a reader cannot look up:\n" + "\n".join(found)


def test_no_issue_numbers_in_the_package_strings():
    # Every string literal of the package: docstrings, messages, the benchmark's printed tables.
    found = []
    for path in sorted((ROOT / "python" / "gltensor").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found += [f"{path.relative_to(ROOT)}:{node.lineno}: {m.group(0)}"
                          for m in ISSUE_NUMBER.finditer(node.value)]
    assert not found, "internal issue numbers in the package's strings:\n" + "\n".join(found)


# ---------------------------------------------------------------- the README a newcomer reads to the end

README_ORDER = ["## Install", "## First frame", "## Your way in", "## Which backend", "## Links"]


def test_readme_is_short_and_in_the_newcomers_order():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text) <= 15_000, f"README.md is {len(text):,} characters; at most 15,000"
    positions = [text.find("\n" + h + "\n") for h in README_ORDER]
    assert all(p > 0 for p in positions) and positions == sorted(positions), (
        f"README.md's sections must be, in this order: {README_ORDER}")
    intro = text[:positions[0]]
    assert MARKER.search(intro), "the opening names one headline figure with its source"


# ---------------------------------------------------------------- the extras bring what each route needs


def extras():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return {k: " ".join(v) for k, v in data["project"]["optional-dependencies"].items()}


def test_the_mujoco_extra_brings_the_vector_envs_needs():
    mujoco = extras()["mujoco"]
    for need in ("mujoco", "gymnasium", "imageio"):
        assert need in mujoco, f"the mujoco extra lacks {need} (MujocoVectorEnv needs it)"


def test_the_dm_control_extra_keeps_mujoco_below_4():
    dm = extras()["dm_control"]
    assert "dm_control" in dm and re.search(r"mujoco[^ ]*<4", dm), dm


def test_the_mujoco_page_opens_with_its_install_line():
    text = (ROOT / "docs" / "mujoco.md").read_text(encoding="utf-8")
    first_block = text.split("```")[1]
    assert first_block.startswith("bash\npip install \".[torch,mujoco]\"")
    assert "dm_control" in first_block
