"""Strings in rules: which expressions are strings, the checks against a registry, and
the numbers the engines see instead.

A payload field declared ``str`` in the registry holds int64 codes
(:mod:`specula.events.strings`), and a string literal ``"AAPL"`` in a rule means the
text. Semantics:

* **Kinds.** Every expression is a string or a number. String attributes, string
  literals and parameters bound to string attributes are strings; everything else
  (``ts``, numbers, bools, aggregates, folds, arithmetic) is a number. A parameter is
  bound to attributes of one kind only.
* **Strings are compared, never computed with.** A comparison (constraint, predicate,
  filter) of two strings uses ``=`` or ``!=``: equal texts, character by character.
  Ordering a string, comparing a string with a number, arithmetic on a string and an
  aggregate other than ``Count`` over a string attribute are refused.
* **Composites.** An attribute declared ``string`` in ``define`` must be assigned a
  string (or left unassigned: the empty string); its type is registered with a string
  field, so the composite's texts travel on as texts.

Engines never see a text: :func:`encode` replaces every literal by its code, so a
string comparison is an integer comparison in every kernel (codes are below 2**53, exact
in float64 too), and :func:`check_strings` interns the literals in the registry, so the
codes of composites can be read back as text.
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass, replace
from typing import Any

from specula.detectors.rules.ast import (
    AggRef,
    AttrRef,
    BinOp,
    Comparison,
    Const,
    Constraint,
    Expr,
    Fold,
    Param,
    ParamRef,
    Pattern,
    Rule,
    RuleError,
    quote,
)
from specula.events import TypeRegistry
from specula.events.strings import string_code

__all__ = ["check_strings", "encode"]


def encode(rule: Rule) -> Rule:
    """``rule`` with every string literal replaced by its code (the rule itself when it
    has none).

    >>> from specula.detectors.rules.parser import parse_rule
    >>> rule = encode(parse_rule('define X() from Q(sym = "") as q where q.ex != "A"'))
    >>> rule.terminator.constraints[0].value, rule.filters[0].right.value > 0
    (0, True)
    """
    return _encoded(rule) if rule.texts() else rule


def _encoded(node: Any) -> Any:
    if isinstance(node, Const | Constraint) and isinstance(node.value, str):
        return replace(node, value=string_code(node.value))
    if isinstance(node, tuple):
        return tuple(_encoded(x) for x in node)
    if is_dataclass(node) and not isinstance(node, type):
        return replace(node, **{f.name: _encoded(getattr(node, f.name))
                                for f in fields(node) if f.init})
    return node


def check_strings(rule: Rule, registry: TypeRegistry) -> None:
    """Raise :class:`RuleError` where ``rule`` mixes strings and numbers against the
    registry's string fields; intern its literals in ``registry.strings``."""
    _Kinds(rule, registry).check()
    for text in sorted(rule.texts()):
        registry.strings.intern(text)


class _Kinds:
    """The kind (``"string"`` or ``"number"``) of each expression of one rule."""

    def __init__(self, rule: Rule, registry: TypeRegistry) -> None:
        self.rule = rule
        self.strings = {f for t in registry.types() for f in t.strings}
        self.params: dict[str, tuple[str, str]] = {}  # name -> (kind, attribute)
        patterns = [o for p in rule.chain for o in p.options()]
        patterns += [a.pattern for a in rule.aggregates] + [n.pattern for n in rule.negations]
        patterns += rule.until_patterns
        for pattern in patterns:
            for c in pattern.constraints:
                self.constraint(pattern, c)

    def fail(self, reason: str, *near: str) -> RuleError:
        """The error, ``near`` the words of the text it is about (see :class:`RuleError`)."""
        return RuleError(f"rule {self.rule.name}: {reason}", near=near)

    def attribute(self, attr: str) -> str:
        return "string" if attr in self.strings else "number"

    def constraint(self, pattern: Pattern, c: Constraint) -> None:
        kind = self.attribute(c.attr)
        if isinstance(c.value, Param):
            seen = self.params.setdefault(c.value.name, (kind, c.attr))
            if seen[0] != kind:
                raise self.fail(f"{c.value} is bound to the {seen[0]} attribute {seen[1]} "
                                f"and to the {kind} attribute {c.attr}", pattern.type, c.attr)
            return
        value = "string" if isinstance(c.value, str) else "number"
        if value != kind:
            raise self.fail(f"{pattern.type}({c.attr} {c.op} {_show(c.value)}) compares the "
                            f"{kind} attribute {c.attr} with a {value}", pattern.type, c.attr)

    def check(self) -> None:
        rule = self.rule
        for agg in rule.aggregates:
            if agg.attr is not None and self.attribute(agg.attr) == "string":
                raise self.fail(f"{agg.function.capitalize()} over the string attribute "
                                f"{agg.pattern.type}.{agg.attr}; only Count counts strings",
                                agg.pattern.type, agg.attr)
        comparisons = [*rule.filters, *(c for p in rule.chain for o in p.options()
                                        for c in o.predicates)]
        for comparison in comparisons:
            self.comparison(comparison)
        declared = dict(rule.attributes)
        for attr, expr in rule.assignments:
            kind = "string" if declared[attr] == "string" else "number"
            if self.kind(expr) != kind:
                raise self.fail(f"{attr} is declared {declared[attr]} but assigned a "
                                f"{self.kind(expr)} ({self.show(expr)})", "where", attr)

    def comparison(self, c: Comparison) -> None:
        left, right = self.kind(c.left), self.kind(c.right)
        if left != right:
            raise self.fail(f"{self.show(c.left)} {c.op} {self.show(c.right)} compares a "
                            f"{left} with a {right}", *self.near(c.left))
        if left == "string" and c.op not in ("=", "!="):
            raise self.fail(f"{self.show(c.left)} {c.op} {self.show(c.right)}: strings "
                            "compare only with = and !=", *self.near(c.left))

    def kind(self, expr: Expr) -> str:
        if isinstance(expr, Const):
            return "string" if isinstance(expr.value, str) else "number"
        if isinstance(expr, AttrRef):
            return "number" if expr.attr == "ts" else self.attribute(expr.attr)
        if isinstance(expr, ParamRef):
            return self.params.get(expr.name, ("number", ""))[0]
        if isinstance(expr, Fold):
            if expr.attr is not None and self.attribute(expr.attr) == "string":
                raise self.fail(f"{expr.function.capitalize()} over the string attribute "
                                f"{expr.attr}; only Count counts strings")
            return "number"
        if isinstance(expr, BinOp):
            for side in (expr.left, expr.right):
                if self.kind(side) == "string":
                    raise self.fail(f"{self.show(side)} is a string; arithmetic "
                                    f"('{expr.op}') takes numbers", *self.near(side))
            return "number"
        assert isinstance(expr, AggRef)
        return "number"

    def near(self, expr: Expr) -> tuple[str, ...]:
        """Words of the text where ``expr`` is written: an attribute after its element's
        name, else as :meth:`show` writes it."""
        if isinstance(expr, AttrRef):
            return self.rule.chain[expr.element].name, expr.attr
        return (self.show(expr),)

    def show(self, expr: Expr) -> str:
        """How the rule text names ``expr`` (an attribute, a literal, a parameter)."""
        if isinstance(expr, AttrRef):
            item = f"[{expr.item}]" if expr.item in ("first", "last") else ""
            return f"{self.rule.chain[expr.element].name}{item}.{expr.attr}"
        if isinstance(expr, Const):
            return _show(expr.value)
        if isinstance(expr, ParamRef):
            return f"${expr.name}"
        return "an expression"


def _show(value: Any) -> str:
    return quote(value) if isinstance(value, str) else repr(value)
