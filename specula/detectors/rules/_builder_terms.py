"""The terms of the rule builder: parameters, element attributes, aggregates and the
conditions of constraints, with ``+ - * /`` between them (see
:mod:`~specula.detectors.rules.builder`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from specula.detectors.rules.ast import Comparator, Function, Window

__all__ = ["Agg", "Avg", "Cond", "Count", "Ev", "Max", "Min", "Operand", "P", "Sum", "Term",
           "WindowLike", "eq", "ge", "gt", "le", "lt", "ne"]

WindowLike = int | float | str | Window
"""A window: ticks (``100_000``), text (``"5 min"``) or a :class:`Window`."""


# ------------------------------------------------------------------------- terms


class Term:
    """An expression of the builder; ``+ - * /`` with terms or numbers give new terms."""

    __slots__ = ()

    def __add__(self, other: Operand) -> Term:
        return _Bin("+", self, other)

    def __radd__(self, other: Operand) -> Term:
        return _Bin("+", other, self)

    def __sub__(self, other: Operand) -> Term:
        return _Bin("-", self, other)

    def __rsub__(self, other: Operand) -> Term:
        return _Bin("-", other, self)

    def __mul__(self, other: Operand) -> Term:
        return _Bin("*", self, other)

    def __rmul__(self, other: Operand) -> Term:
        return _Bin("*", other, self)

    def __truediv__(self, other: Operand) -> Term:
        return _Bin("/", self, other)

    def __rtruediv__(self, other: Operand) -> Term:
        return _Bin("/", other, self)

    def __neg__(self) -> Term:
        return _Bin("-", 0, self)


Operand = Term | int | float | bool


@dataclass(frozen=True, eq=False)
class _Var(Term):
    name: str

    def __repr__(self) -> str:
        return f"P.{self.name}"


@dataclass(frozen=True, eq=False)
class _Field(Term):
    type: str
    attr: str

    def __repr__(self) -> str:
        return f"Ev.{self.type}.{self.attr}"


@dataclass(frozen=True, eq=False)
class _Bin(Term):
    op: str
    left: Operand
    right: Operand


@dataclass(frozen=True, eq=False)
class Agg(Term):
    """An aggregate, made by :func:`Sum`, :func:`Avg`, :func:`Min`, :func:`Max` or
    :func:`Count`; usable in expressions or bound with :meth:`RuleBuilder.aggregate`."""

    function: Function
    type: str
    attr: str | None
    within: WindowLike
    before: str
    constraints: Mapping[str, Any]


class _Params:
    """``P.x`` is the parameter ``$x``."""

    def __getattr__(self, name: str) -> Term:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Var(name)


class _Type:
    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Term:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Field(self._name, attr)


class _Events:
    """``Ev.Smoke.area`` is the attribute ``area`` of the chain element of type Smoke."""

    def __getattr__(self, name: str) -> _Type:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Type(name)


P = _Params()
Ev = _Events()


def Sum(type: str, attr: str, *, within: WindowLike, before: str,  # noqa: N802
        **constraints: Any) -> Agg:
    """``Sum(type(constraints).attr within W from before)``; 0 over no events."""
    return Agg("sum", type, attr, within, before, constraints)


def Avg(type: str, attr: str, *, within: WindowLike, before: str,  # noqa: N802
        **constraints: Any) -> Agg:
    """``Avg(type(constraints).attr within W from before)``; undefined over no events."""
    return Agg("avg", type, attr, within, before, constraints)


def Min(type: str, attr: str, *, within: WindowLike, before: str,  # noqa: N802
        **constraints: Any) -> Agg:
    """``Min(type(constraints).attr within W from before)``; undefined over no events."""
    return Agg("min", type, attr, within, before, constraints)


def Max(type: str, attr: str, *, within: WindowLike, before: str,  # noqa: N802
        **constraints: Any) -> Agg:
    """``Max(type(constraints).attr within W from before)``; undefined over no events."""
    return Agg("max", type, attr, within, before, constraints)


def Count(type: str, *, within: WindowLike, before: str, **constraints: Any) -> Agg:  # noqa: N802
    """``Count(type(constraints) within W from before)``; 0 over no events."""
    return Agg("count", type, None, within, before, constraints)


# -------------------------------------------------------------------- conditions


@dataclass(frozen=True)
class Cond:
    """A comparison for a constraint: ``value=gt(45)`` is ``value>45``; with an
    expression (``open=gt(Ev.c.open)``, ``ts=ge(Ev.a.ts - 60)``) it is a predicate."""

    op: Comparator
    value: int | float | bool | str | Term


def eq(value: int | float | bool | str | Term) -> Cond:
    """``attr=value`` (the same as passing ``value`` itself)."""
    return Cond("=", value)


def ne(value: int | float | bool | str | Term) -> Cond:
    """``attr!=value``."""
    return Cond("!=", value)


def lt(value: int | float | bool | Term) -> Cond:
    """``attr<value``."""
    return Cond("<", value)


def le(value: int | float | bool | Term) -> Cond:
    """``attr<=value``."""
    return Cond("<=", value)


def gt(value: int | float | bool | Term) -> Cond:
    """``attr>value``."""
    return Cond(">", value)


def ge(value: int | float | bool | Term) -> Cond:
    """``attr>=value``."""
    return Cond(">=", value)
