"""What README.md and docs/*.md cite exists: repository paths, specula modules and their
names, and the attributes of specula's classes.

A doc that names a file that moved, or a module that was renamed, sends a newcomer
looking for something that is not there. Checked, in the docs' inline code and fenced
blocks alike:

- paths under ``specula/``, ``tests/``, ``benchmarks/`` and ``docs/`` (with a
  ``::test_name``: that test exists in the file); a ``name.py`` or ``dir/name.py``
  without a root must be the end of some file's path in the repository. A path at a
  revision, as git writes it (``e832629:benchmarks/...``), is not checked, nor a file
  the docs ask the reader to create (:data:`READERS_FILES`);
- dotted names: ``specula.x.y`` (or ``specula.x:y``) is imported and looked up;
  ``Class.attr`` where ``Class`` is a class defined in specula: the class (or a base
  defined in specula) defines ``attr``; ``module.Name`` or ``module.CONSTANT`` where
  ``module`` is the last part of exactly one specula module's name
  (``geometry.GOALS``): the module has it. A lower-case name after a module's
  (``report.latencies``, ``unit.push``) is not checked: the docs use the same words for
  variables.

Names outside specula (``np.row_stack``, Ray's and Spark's) are not checked.
"""

from __future__ import annotations

import ast
import functools
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
#: Files the docs ask the reader to create.
READERS_FILES = {"stoppages.py"}

_ROOTED = re.compile(r"(?<![\w/.:-])((?:specula|tests|benchmarks|docs)/[\w./-]*[\w/])"
                     r"(?:::(\w+))?")
_CODE = re.compile(r"`([^`\n]+)`")
#: A dotted name, alone or called (``specula.testing.feed(graph, events)``), or a
#: ``module:name`` as the CLI takes a graph.
_DOTTED = re.compile(r"^([A-Za-z_]\w*(?:[.:][A-Za-z_]\w*)+)(?:\(.*)?$")
_PYFILE = re.compile(r"^((?:[\w-]+/)*[\w-]+\.py)(?:::(\w+))?$")


def _text_of(doc: Path) -> str:
    return doc.read_text()


@functools.cache
def _repo_files() -> tuple[str, ...]:
    return tuple(str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py")
                 if ".venv" not in p.parts and ".git" not in p.parts)


def _path_problem(path: str, test: str | None) -> str | None:
    target = ROOT / path.rstrip("/")
    if not target.exists():
        return "no such path"
    if test and not re.search(rf"^\s*(async )?def {test}\(", target.read_text(), re.M):
        return f"{path} defines no {test}"
    return None


def _suffix_problem(path: str, test: str | None) -> str | None:
    found = [f for f in _repo_files() if f == path or f.endswith("/" + path)]
    if not found:
        return "no file in the repository ends with this path"
    if test and not any(_path_problem(f, test) is None for f in found):
        return f"no {path} defines {test}"
    return None


@functools.cache
def _modules() -> dict[str, list[str]]:
    """Last part of each specula module's name -> the full names."""
    out: dict[str, list[str]] = {}
    for p in (ROOT / "specula").rglob("*.py"):
        parts = p.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out.setdefault(parts[-1], []).append(".".join(parts))
    return out


@functools.cache
def _classes() -> dict[str, list[ast.ClassDef]]:
    """Every class defined in specula, by name."""
    out: dict[str, list[ast.ClassDef]] = {}
    for p in (ROOT / "specula").rglob("*.py"):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ClassDef):
                out.setdefault(node.name, []).append(node)
    return out


def _defines(cls: ast.ClassDef, attr: str, seen: frozenset[str] = frozenset()) -> bool:
    """Whether ``cls`` (or a base class defined in specula) defines ``attr``: a method,
    a class-level name, or ``self.attr = ...`` in a method."""
    for node in ast.walk(cls):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == attr:
            return True
        targets = (node.targets if isinstance(node, ast.Assign) else
                   [node.target] if isinstance(node, ast.AnnAssign) else [])
        for t in targets:
            if isinstance(t, ast.Name) and t.id == attr:
                return True
            if isinstance(t, ast.Attribute) and t.attr == attr and \
                    isinstance(t.value, ast.Name) and t.value.id == "self":
                return True
    bases = {b.id if isinstance(b, ast.Name) else b.attr for b in cls.bases
             if isinstance(b, ast.Name | ast.Attribute)} - seen
    return any(_defines(base, attr, seen | bases) for name in bases
               for base in _classes().get(name, []))


def _lookup(module: str, names: list[str]) -> str | None:
    obj, path = importlib.import_module(module), module
    for name in names:
        if not hasattr(obj, name):
            return f"{path} has no {name}"
        obj, path = getattr(obj, name), f"{path}.{name}"
    return None


def _dotted_problem(name: str) -> str | None:
    parts = name.split(".")
    if parts[0] == "specula":
        for i in range(len(parts), 0, -1):
            module = ".".join(parts[:i])
            try:
                importlib.import_module(module)
            except ModuleNotFoundError as e:
                if e.name and module.startswith(e.name):
                    continue
                raise
            return _lookup(module, parts[i:])
    if parts[0] in _classes() and parts[0][0].isupper():
        if not any(_defines(c, parts[1]) for c in _classes()[parts[0]]):
            return f"no class {parts[0]} in specula defines {parts[1]}"
        return None
    modules = _modules().get(parts[0], [])
    if len(modules) == 1 and parts[1][0].isupper():
        return _dotted_problem(f"{modules[0]}.{'.'.join(parts[1:])}")
    return None


def _citations(text: str) -> list[tuple[str, str | None]]:
    """(what, problem) for everything ``text`` cites that this test checks."""
    out = []
    for m in _ROOTED.finditer(text):
        out.append((m.group(0), _path_problem(m.group(1), m.group(2))))
    for code in _CODE.findall(text):
        code = code.strip()
        py = _PYFILE.match(code)
        if py and not _ROOTED.match(code) and code not in READERS_FILES:
            out.append((code, _suffix_problem(py.group(1), py.group(2))))
        dotted = _DOTTED.match(code)
        if dotted and not py:
            out.append((code, _dotted_problem(dotted.group(1).replace(":", "."))))
    return out


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_citation_exists(doc):
    wrong = [f"{what}: {problem}" for what, problem in _citations(_text_of(doc)) if problem]
    assert not wrong, f"{doc.relative_to(ROOT)} cites what does not exist:\n" + \
        "\n".join(wrong)


def test_the_check_finds_what_is_missing():
    """The check itself: stale paths, modules and names are found, real ones pass."""
    text = ("`tests/test_paper_examples.py`, `specula/shedding/operator.py`, "
            "`specula.shedding.operator`, `ordering/nothing.py`, `geometry.NO_SUCH`, "
            "`OrderingUnit.no_such_method`, `tests/test_layout.py::test_no_such_test`, "
            "see benchmarks/nothing.py. Real, or not checked: `tests/test_layout.py`, "
            "`docs/`, `e832629:benchmarks/aip_python_loop/`, `unit.push`, "
            "`specula.options.NODE_OPTIONS`, `specula.soccer.graph:soccer_graph`, "
            "`geometry.GOALS`, `OrderingUnit.push`, `ordering/unit.py`, "
            "`specula.testing.feed(graph, events)`, `match.truth.out_of_play`, "
            "`np.row_stack`, `tests/test_layout.py::test_every_module_has_a_room`")
    found = {what for what, problem in _citations(text) if problem}
    assert found == {"tests/test_paper_examples.py", "specula/shedding/operator.py",
                     "specula.shedding.operator", "ordering/nothing.py", "geometry.NO_SUCH",
                     "OrderingUnit.no_such_method",
                     "tests/test_layout.py::test_no_such_test", "benchmarks/nothing.py"}
