"""Assignments of ``where`` that would lose information, refused when a rule meets its
registry.

Every numeric expression of a rule is an integer or a double: ``ts``, integer and bool
attributes, integral literals, ``Count`` and ``Sum``/``Min``/``Max`` of integers are
integers; float attributes, fractional literals, ``Avg``, and ``/`` are doubles; ``+``,
``-``, ``*`` are doubles when one side is; a literal beyond int64 is a double. A double
assigned to an ``int`` or ``bool`` attribute of ``define`` would be truncated (3.99 into
3) or wrapped (1e30 into -9.2e18), so :func:`check_assignments` refuses it and names the
assignment; declare the attribute ``double``, or compute an integer. (Integer arithmetic
that overflows int64 at run time wraps, as NumPy's does; the rule cannot know its values.)
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from specula.detectors.rules.ast import (
    AggRef,
    Aggregate,
    AttrRef,
    BinOp,
    Const,
    Expr,
    Fold,
    ParamRef,
    Rule,
    RuleError,
)
from specula.events import TypeRegistry

__all__ = ["check_assignments"]

Kind = Literal["int", "double"]


def check_assignments(rule: Rule, registry: TypeRegistry) -> None:
    """Raise :class:`RuleError` if ``where`` assigns a double to an ``int`` or ``bool``
    attribute of ``define``.

    >>> from specula.detectors.rules.parser import parse_rule
    >>> reg = TypeRegistry(); _ = reg.register("A", open="f8", n="i8")
    >>> check_assignments(parse_rule("define R(i: int) from A() as a where i = a.n * 2"), reg)
    >>> try:
    ...     check_assignments(parse_rule("define R(i: int) from A() as a where i = a.open"), reg)
    ... except RuleError as exc:
    ...     print(exc)  # doctest: +NORMALIZE_WHITESPACE
    rule R: where i = a.open assigns a double to the int attribute 'i', which would drop
    its fraction or overflow; declare i: double, or assign an integer
    """
    declared = dict(rule.attributes)
    for attr, expr in rule.assignments:
        if declared[attr] in ("int", "bool") and _kind(rule, registry, expr) == "double":
            raise RuleError(f"rule {rule.name}: where {attr} = {_text(rule, expr)} assigns a "
                            f"double to the {declared[attr]} attribute {attr!r}, which would "
                            f"drop its fraction or overflow; declare {attr}: double, or "
                            "assign an integer", near=("where", attr))


def _kind(rule: Rule, registry: TypeRegistry, expr: Expr) -> Kind:
    """Whether ``expr`` is an integer or a double (strings count as integers: codes)."""
    if isinstance(expr, Const):  # an integer beyond int64 is computed as a double
        value = expr.value
        if isinstance(value, float):
            return "int" if value.is_integer() and abs(value) < 2**63 else "double"
        return "int" if isinstance(value, str) or -(2**63) <= value < 2**63 else "double"
    if isinstance(expr, AttrRef):
        return _attr_kind(rule, registry, expr.element, expr.attr)
    if isinstance(expr, AggRef):
        return _aggregate_kind(rule, registry, rule.aggregates[expr.index])
    if isinstance(expr, ParamRef):
        for agg in rule.aggregates:
            if agg.name == expr.name:
                return _aggregate_kind(rule, registry, agg)
        element = rule.binder(expr.name)
        attr = next(c.attr for p in rule.chain[element].options() for c in p.constraints
                    if getattr(c.value, "name", None) == expr.name)
        return _attr_kind(rule, registry, element, attr)
    if isinstance(expr, Fold):
        if expr.function == "count" or expr.attr is None:
            return "int"
        return "double" if expr.function == "avg" else _attr_kind(rule, registry,
                                                                   expr.element, expr.attr)
    if isinstance(expr, BinOp):
        if expr.op == "/":
            return "double"
        sides = (_kind(rule, registry, expr.left), _kind(rule, registry, expr.right))
        return "double" if "double" in sides else "int"
    raise TypeError(f"not an expression: {expr!r}")


def _attr_kind(rule: Rule, registry: TypeRegistry, element: int, attr: str) -> Kind:
    """A double if ``attr`` is a float field of any type chain ``element`` may match."""
    if attr == "ts":
        return "int"
    types = [t for t in rule.chain[element].types if t in registry]
    floats = [t for t in types if dict(registry[t].fields).get(attr, _INT).kind == "f"]
    return "double" if floats else "int"


def _aggregate_kind(rule: Rule, registry: TypeRegistry, agg: Aggregate) -> Kind:
    if agg.function == "count" or agg.attr is None:
        return "int"
    if agg.function == "avg" or agg.pattern.type not in registry:
        return "double"
    return "double" if dict(registry[agg.pattern.type].fields)[agg.attr].kind == "f" else "int"


def _text(rule: Rule, expr: Expr) -> str:
    """``expr`` as the rule text would write it (for messages)."""
    if isinstance(expr, Const):
        return repr(expr.value) if isinstance(expr.value, str) else str(expr.value)
    if isinstance(expr, AttrRef):
        item = f"[{expr.item}]" if expr.item else ""
        return f"{rule.chain[expr.element].name}{item}.{expr.attr}"
    if isinstance(expr, ParamRef):
        return f"${expr.name}"
    if isinstance(expr, AggRef):
        return rule.aggregates[expr.index].name
    if isinstance(expr, Fold):
        inner = rule.chain[expr.element].name + (f".{expr.attr}" if expr.attr else "")
        return f"{expr.function.capitalize()}({inner})"
    if isinstance(expr, BinOp):
        if expr.op in ("min", "max"):
            return f"{expr.op}({_text(rule, expr.left)}, {_text(rule, expr.right)})"
        return f"{_text(rule, expr.left)} {expr.op} {_text(rule, expr.right)}"
    return repr(expr)


_INT = np.dtype(np.int64)
