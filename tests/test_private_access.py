"""No module of a checked room reads another object's private attributes.

An attribute whose name starts with one underscore belongs to its object; a module that
reads ``other._x`` depends on how ``other`` keeps its state, and breaks when that
changes. Objects talk through public methods and properties. Checked on the syntax tree
of every module of the rooms in :data:`ROOMS`: an attribute ``._name`` is allowed on
``self`` and ``cls`` only (dunder names, ``__x__``, are public protocol).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "specula"
#: The rooms held to the rule.
ROOMS = ("actors",)


def private_reads(source: str) -> list[tuple[int, str]]:
    """``(line, expression)`` of every ``x._name`` in ``source`` whose ``x`` is not
    ``self`` or ``cls``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute):
            continue
        name = node.attr
        if not name.startswith("_") or (name.startswith("__") and name.endswith("__")):
            continue
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            continue
        found.append((node.lineno, ast.unparse(node)))
    return sorted(found)


@pytest.mark.parametrize("path", sorted(p for room in ROOMS
                                        for p in (PACKAGE / room).rglob("*.py")),
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_reads_another_objects_private_attributes(path: Path):
    assert private_reads(path.read_text()) == []


def test_the_rule_catches_reads_through_any_other_receiver():
    source = """
class A:
    def f(self, other):
        self._own = other._theirs
        return helper()._x, super()._y, type(self).__name__, cls._z
"""
    assert private_reads(source) == [(4, "other._theirs"), (5, "helper()._x"),
                                     (5, "super()._y")]
