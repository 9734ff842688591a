"""The type stubs (python/gltensor/_gltensor.pyi) against what the C extension accepts.

Every function and method of gltensor._gltensor parses its arguments from one table (python/gltensor/_ext/params.h),
which `_gltensor._signatures()` shows. Here each is compared with its stub: the same keywords, each passed the same
way (positional, keyword-only, positional-only) and with the same default where the stub writes one; a keyword the
C takes that the stub lacks fails, and the reverse. Needs no GL context and no GPU.
"""

import ast
import pathlib

import pytest

from conftest import require_gltensor

STUB = pathlib.Path(__file__).resolve().parents[1] / "python" / "gltensor" / "_gltensor.pyi"
NOT_METHODS = {"__len__"}  # slots (sq_length), not entries of a method table


def _stub_functions():
    """{qualname: [FunctionDef, ...]} of the stub's functions and methods (overloads together), properties left out."""
    tree = ast.parse(STUB.read_text())
    out = {}

    def is_property(fn):
        return any((isinstance(d, ast.Name) and d.id == "property") or (isinstance(d, ast.Attribute) and d.attr in
                   ("setter", "deleter")) for d in fn.decorator_list)

    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            out.setdefault(node.name, []).append(node)
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and not is_property(item):
                    out.setdefault("%s.%s" % (node.name, item.name), []).append(item)
    return out


def _stub_rows(fn, is_method):
    """[(name, pass, default text or None)] of a stub function, as _signatures() writes them."""
    a = fn.args
    positional = a.posonlyargs + a.args
    if is_method:
        positional = positional[1:]  # self / cls
    defaults = [None] * (len(a.posonlyargs) + len(a.args) - len(a.defaults)) + list(a.defaults)
    if is_method:
        defaults = defaults[1:]
    n_only = len(a.posonlyargs) - (1 if is_method and a.posonlyargs else 0)
    rows = []
    for i, (arg, default) in enumerate(zip(positional, defaults)):
        rows.append((arg.arg, "positional_only" if i < n_only else "positional",
                     None if default is None else ast.unparse(default)))
    for arg, default in zip(a.kwonlyargs, a.kw_defaults):
        rows.append((arg.arg, "keyword", None if default is None else ast.unparse(default)))
    return rows


def _same_default(c, stub):
    if stub is None:
        return True  # required here (an overload may require what the C defaults, e.g. read(*, out: T) -> T)
    if c is None:
        return False  # the C requires what the stub lets callers leave out
    return "..." in (c, stub) or ast.literal_eval(c) == ast.literal_eval(stub)


def _compare(qualname, c_rows, stub_fns):
    problems = []
    for fn in stub_fns:
        rows = _stub_rows(fn, "." in qualname)
        if c_rows and c_rows[0][1] == "var_positional":
            continue  # __exit__(*args): any positional the stub names
        c_names = [(n if p != "positional_only" else "/", p) for n, p, _ in c_rows]
        s_names = [(n if p != "positional_only" else "/", p) for n, p, _ in rows]
        if c_names != s_names:
            missing = sorted({n for n, _ in c_names} - {n for n, _ in s_names})
            extra = sorted({n for n, _ in s_names} - {n for n, _ in c_names})
            problems.append("%s: the C takes %s, the stub (line %d) says %s%s%s" % (
                qualname, c_names, fn.lineno, s_names, "; missing from the stub: %s" % missing if missing else "",
                "; not taken by the C: %s" % extra if extra else ""))
            continue
        for (name, _, c_default), (_, _, s_default) in zip(c_rows, rows):
            if not _same_default(c_default, s_default):
                problems.append("%s: %s defaults to %s in the C, %s in the stub (line %d)" % (
                    qualname, name, c_default, s_default, fn.lineno))
    return problems


def test_every_function_and_method_matches_its_stub():
    gt = require_gltensor()
    signatures = gt._gltensor._signatures()
    stub = _stub_functions()
    problems = []
    no_table = sorted(q for q, rows in signatures.items() if rows is None)
    if no_table:
        problems.append("without a parameter table (params.h): %s" % no_table)
    for qualname, rows in sorted(signatures.items()):
        if rows is None:
            continue
        if qualname not in stub:
            problems.append("%s: the C defines it, the stub does not" % qualname)
            continue
        problems += _compare(qualname, rows, stub[qualname])
    c_types = {q.split(".")[0] for q in signatures if "." in q}
    for qualname in sorted(stub):
        owner, _, name = qualname.rpartition(".")
        if (owner in c_types or not owner) and name not in NOT_METHODS and qualname not in signatures:
            problems.append("%s: the stub (line %d) declares it, the C does not" % (qualname, stub[qualname][0].lineno))
    assert not problems, "\n".join(problems)


def test_the_check_sees_a_missing_keyword():
    """The comparison itself: a keyword dropped from a stub is reported, as is one the C lacks."""
    gt = require_gltensor()
    rows = gt._gltensor._signatures()["Batch.read"]
    fn = ast.parse("def read(self, flip=True, *, stream=None): ...").body[0]
    problems = _compare("Batch.read", rows, [fn])
    assert problems and "missing from the stub" in problems[0] and "depth" in problems[0]
    fn = ast.parse("def read(self, flip=True, *, " + ", ".join("%s=None" % n for n, _, _ in rows[1:]) + ", extra=None): ...").body[0]
    assert "not taken by the C: ['extra']" in _compare("Batch.read", rows, [fn])[0]


@pytest.mark.parametrize("qualname", ["Capture.read", "Batch.read", "Atlas.read", "_Slots.read", "Batch.read_list"])
def test_reads_take_the_same_options(qualname):
    gt = require_gltensor()
    names = [n for n, _, _ in gt._gltensor._signatures()[qualname]]
    for option in ("flip", "stream", "channels", "dtype", "layout", "depth", "near", "far", "projection"):
        assert option in names
