"""The house rules: imports point down, and the core knows neither Ray nor Spark.

Every module of ``specula`` belongs to a room (its first sub-package, or the module
itself for ``options``, ``cli`` and ``testing``). A room may import only the rooms
listed for it in :data:`MAY_IMPORT`, so that the arrows of the import graph all point
down: the core (``events``, ``options``, ``ordering``, ``detectors``) runs without Ray
or Spark, the runtimes build on it, the Spark pipelines on the runtimes, and the soccer
domain on all of them. ``docs/architecture.md`` draws the same picture.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "specula"

_CORE = {"events", "options"}
MAY_IMPORT: dict[str, set[str]] = {
    "events": set(),
    "options": set(),
    "ordering": _CORE,
    "detectors": _CORE | {"ordering"},
    "shedding": _CORE | {"ordering", "detectors"},
    "cluster": set(),
    "actors": _CORE | {"ordering", "detectors", "shedding", "cluster"},
    "pipelines": _CORE | {"ordering", "detectors", "shedding", "cluster", "actors"},
    "soccer": _CORE | {"ordering", "detectors", "shedding", "cluster", "actors", "pipelines"},
    "cli": _CORE | {"ordering", "detectors", "shedding", "cluster", "actors", "pipelines",
                    "soccer"},
    # users' tests of their detectors, on the in-process runtime
    "testing": _CORE | {"ordering", "detectors", "shedding", "actors"},
}
#: Rooms that must run where neither Ray nor Spark is installed.
NO_CLUSTER = {"events", "options", "ordering", "detectors", "shedding", "testing"}


def _room(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return parts[0]


def _imports(source: str) -> list[tuple[int, str]]:
    """(line, imported module) of every import in ``source``, lazy ones included."""
    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module == "specula":
            found += [(node.lineno, f"specula.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py" or
                 p.parent != PACKAGE)


def test_every_module_has_a_room():
    rooms = {_room(p) for p in MODULES}
    assert rooms <= set(MAY_IMPORT), f"modules outside the known rooms: {rooms - set(MAY_IMPORT)}"


def _violations(room: str, source: str) -> list[str]:
    """What is wrong with the imports of ``source``, a module of ``room``."""
    wrong = []
    for line, module in _imports(source):
        top = module.split(".")
        if top[0] == "specula":
            if len(top) == 1:
                wrong.append(f"line {line}: imports the package root; import the room instead")
                continue
            target = top[1]
            if target != room and target not in MAY_IMPORT[room]:
                wrong.append(f"line {line}: {module} ({target} is not below {room})")
        elif top[0] in ("ray", "pyspark") and room in NO_CLUSTER:
            wrong.append(f"line {line}: {module} (the core runs without Ray and Spark)")
    return wrong


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down(path: Path):
    wrong = _violations(_room(path), path.read_text())
    assert not wrong, f"{path.relative_to(PACKAGE)}: " + "; ".join(wrong)


def test_the_rule_catches_upward_and_cluster_imports():
    source = ("from specula.events import CORE_DTYPE\n"
              "def f():\n    from specula.detectors import Detector\n    import ray\n")
    assert _violations("detectors", source) == ["line 4: ray (the core runs without Ray and "
                                                "Spark)"]
    assert [w.split(":")[0] for w in _violations("ordering", source)] == ["line 3", "line 4"]
    assert _violations("pipelines", "import specula.soccer.graph\n") == [
        "line 1: specula.soccer.graph (soccer is not below pipelines)"]


# ---------------------------------------------------------------- narrow interfaces
#: Rooms whose modules read no other object's private attributes.
PRIVATE_ROOMS = ["ordering", "actors"]


#: Named tuples' public methods, underscored only to stay clear of field names.
NAMEDTUPLE_API = {"_replace", "_asdict", "_fields", "_make", "_field_defaults"}


def _private_reads(source: str) -> list[str]:
    """``X._name`` (one leading underscore, not a dunder) in ``source`` whose receiver is
    not ``self`` or ``cls``: a read (or write) of another object's private attribute."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute):
            continue
        name = node.attr
        if not name.startswith("_") or name.startswith("__") or name in NAMEDTUPLE_API:
            continue
        receiver = node.value
        if isinstance(receiver, ast.Name) and receiver.id in ("self", "cls"):
            continue
        found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


@pytest.mark.parametrize("room", PRIVATE_ROOMS)
def test_no_module_reads_another_objects_private_attributes(room: str):
    wrong = {str(p.relative_to(PACKAGE)): _private_reads(p.read_text())
             for p in sorted((PACKAGE / room).rglob("*.py"))}
    wrong = {path: reads for path, reads in wrong.items() if reads}
    assert not wrong, "private attributes of other objects read: " + "; ".join(
        f"{path} {', '.join(reads)}" for path, reads in wrong.items())


def test_the_private_rule_catches_other_receivers_only():
    source = ("class A:\n    def f(self, other):\n        self._x = other._y\n"
              "        return cls._z, self.__dict__, other.__class__, _kernels._mod,\n"
              "        snap._replace(seq=1),\n"
              "    def g(self):\n        return self.unit._buffer._n\n")
    assert sorted(_private_reads(source)) == ["line 3: other._y", "line 4: _kernels._mod",
                                              "line 7: self.unit._buffer",
                                              "line 7: self.unit._buffer._n"]


def _package_imports(path: Path, package: str) -> set[str]:
    """The modules of ``package`` (dotted) that the module at ``path`` imports, anywhere
    in it (inside functions and ``if TYPE_CHECKING`` too): an import there is still an
    arrow of the graph. ``from package import name`` names a module where one exists,
    else the package's ``__init__``."""
    folder = path.parent
    targets = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
            if node.module == package:
                names = [f"{package}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name == package:
                targets.add("__init__")
            elif name.startswith(package + "."):
                module = name[len(package) + 1:].split(".")[0]
                targets.add(module if (folder / f"{module}.py").exists() else "__init__")
    return targets


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (module -> modules it imports) as a path, or None."""
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return [*path[path.index(node):], node]
        if node in done:
            return None
        for nxt in sorted(graph.get(node, ())):
            found = visit(nxt, [*path, node])
            if found:
                return found
        done.add(node)
        return None

    for start in sorted(graph):
        found = visit(start, [])
        if found:
            return found
    return None


def test_no_import_cycle_inside_ordering():
    folder = PACKAGE / "ordering"
    graph = {p.stem: _package_imports(p, "specula.ordering") - {p.stem}
             for p in folder.glob("*.py")}
    graph["__init__"] = graph.get("__init__", set())
    cycle = _cycle(graph)
    assert cycle is None, "import cycle in specula/ordering: " + " -> ".join(cycle or [])


def test_the_cycle_rule_sees_lazy_imports(tmp_path: Path):
    (tmp_path / "a.py").write_text("from pkg.b import f\n")
    (tmp_path / "b.py").write_text("def f():\n    from pkg import a\n")
    (tmp_path / "c.py").write_text("from pkg import a, b\n")
    graph = {p.stem: _package_imports(p, "pkg") for p in tmp_path.glob("*.py")}
    assert graph == {"a": {"b"}, "b": {"a"}, "c": {"a", "b"}}
    assert _cycle(graph) in (["a", "b", "a"], ["b", "a", "b"])
    assert _cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None
