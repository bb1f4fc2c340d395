"""The expressions of the rule model: literals, parameters, attributes of chain elements,
aggregate and fold references, arithmetic, and comparisons of two expressions.

What they mean is written in :mod:`~specula.detectors.rules.ast`, which re-exports every
name defined here; import them from there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Comparator = Literal["=", "!=", "<", "<=", ">", ">="]
Function = Literal["sum", "avg", "min", "max", "count"]
Arith = Literal["+", "-", "*", "/", "min", "max"]
Item = Literal["", "first", "last", "next"]

COMPARATORS: tuple[Comparator, ...] = ("=", "!=", "<", "<=", ">", ">=")
FUNCTIONS: tuple[Function, ...] = ("sum", "avg", "min", "max", "count")


class RuleError(ValueError):
    """A rule that is not well formed; the message says which part and why.

    ``near`` names the place in the rule text, as words that follow each other there
    (``("where", "x")``: the first ``x`` after ``where``), for the line and column of
    :func:`~specula.detectors.rules._lexer.located`; empty: the rule as a whole.
    """

    def __init__(self, message: str = "", *, near: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.near = near


@dataclass(frozen=True)
class Param:
    """A parameter ``$name``."""

    name: str

    def __str__(self) -> str:
        return f"${self.name}"



def quote(text: str) -> str:
    """``text`` as a string literal of the rule syntax.

    >>> print(quote('say "hi"'))
    "say \\"hi\\""
    """
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return '"' + escaped.replace("\t", "\\t").replace("\r", "\\r") + '"'


@dataclass(frozen=True)
class Const:
    """A literal number, bool or string."""

    value: int | float | bool | str


@dataclass(frozen=True)
class ParamRef:
    """A chain parameter (``$x``) or an aggregate bound to one (``$t``)."""

    name: str


@dataclass(frozen=True)
class AttrRef:
    """Attribute ``attr`` of the event chosen for ``chain[element]``; of a closure, of
    its ``first`` or ``last`` item, or (in the closure's own predicates) of the ``next``
    item in time (``bs[i+1].attr``)."""

    element: int
    attr: str
    item: Item = ""


@dataclass(frozen=True)
class Fold:
    """``function(name.attr)`` over the items of the closure ``chain[element]``
    (``Count(bs)``, ``Sum(bs.value)``); ``attr`` is None for ``count``."""

    function: Function
    element: int
    attr: str | None


@dataclass(frozen=True)
class AggRef:
    """The value of ``rule.aggregates[index]``."""

    index: int


@dataclass(frozen=True)
class BinOp:
    """``left op right`` with ``+ - * /`` (true division); ``min`` and ``max`` occur
    only in expanded closures (:mod:`~specula.detectors.rules.expand`)."""

    op: Arith
    left: Expr
    right: Expr


Expr = Const | ParamRef | AttrRef | AggRef | BinOp | Fold


@dataclass(frozen=True)
class Comparison:
    """A filter ``left op right`` that every composite must satisfy."""

    left: Expr
    op: Comparator
    right: Expr
