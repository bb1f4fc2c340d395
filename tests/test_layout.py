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
