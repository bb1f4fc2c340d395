"""The rule model: what a parsed TESLA-style rule is, and what it means.

Both front ends (the text syntax in :mod:`~specula.detectors.rules.parser` and the
Python builder in :mod:`~specula.detectors.rules.builder`) produce a :class:`Rule`; all
engines (AIP, CDP on CPU, CDP on GPU) execute one. This module is the single place where
the semantics is written down; the engines and the brute-force reference in the tests
follow it.

Shape of a rule
---------------
::

    define CE(att1: int, att2: int)
    from   C(att=$x)                                  <- element 0, the terminator
       and last B(att=$x) within 100000 from C        <- element 1, anchored at element 0
       and last A(att=$x) within 100000 from B        <- element 2, anchored at element 1
    where  att1=$x and att2=Sum(A(att=$x).value within 100000 from B)

The *chain* is the terminator followed by the sequence steps, each anchored at the
element just before it (TESLA allows trees; the paper and this project use linear
chains, and ``from`` must name the previous element). Element ``i`` of a match is the
event chosen for ``chain[i]``.

Semantics
---------
Engines consume events in stream order: ascending ``(ts, producer << 40 | seq)``, the
order an ordering unit delivers. That order key is an event's *position*.

* **Patterns.** An event matches ``T(c1 and c2 ...)`` when its type is ``T`` and every
  constraint holds. A constraint compares a payload attribute with a literal
  (``=, !=, <, <=, >, >=``) or binds it to a parameter (``attr=$x``, equality only).
* **Parameters.** ``$x`` stands for one value per match: every element, aggregate and
  negation that mentions ``$x`` must carry that value in the named attribute. The value
  is *bound* by the first chain element that mentions it (the terminator, or the
  earliest listed step); every parameter must be mentioned in the chain. A pattern
  that names one parameter twice (``A(x=$p and y=$p)``) only matches events whose two
  attributes are equal, the terminator included. Parameters compare exactly: as int64
  when all attributes bound to one are integers or bools, otherwise as float64.
* **Terminator.** Every event matching ``chain[0]`` (type and literal constraints; its
  own parameters are free) starts one evaluation; composite events get the
  terminator's ``ts`` and ``key``. No other event produces output.
* **Steps.** Given the chosen anchor ``a = element[i-1]`` and the parameters bound by
  elements ``0..i-1``, the *candidates* of step ``i`` are the events ``e`` matching its
  pattern (literal constraints, and parameters already bound) with
  ``a.ts - window <= e.ts < a.ts`` (strictly earlier in time; equal time stamps never
  form a sequence). ``each`` takes every candidate, ``last`` the candidate with the
  greatest position, ``first`` the one with the smallest. Selection is local: ``last``
  picks the latest candidate even if no event for a later step exists behind it (then
  that partial sequence yields nothing; the engine does not fall back to an earlier
  candidate). No candidate: no match from that partial sequence. (A step may depend on
  a parameter bound by an element *before* it in the chain but *later* in time than
  its own candidates' successors; AIP then keeps the newest candidate per parameter
  value, so all engines still select the same event.)
* **Aggregates.** ``Sum | Avg | Min | Max (T(constraints).attr within W from E)`` and
  ``Count(T(constraints) within W from E)`` range over the events ``e`` matching the
  pattern (parameters bound by the match) with ``E.ts - W <= e.ts < E.ts`` where ``E``
  is the matched chain element named. ``Sum`` and ``Count`` of nothing are 0. ``Avg``,
  ``Min`` and ``Max`` of nothing are undefined, and a match with an undefined aggregate
  produces no composite event; so does ``Min``/``Max`` over a NaN value. Values are
  float64 (Count too); sums run in stream order on the CPU, in a tree on the GPU, so
  float sums may differ in the last bits between the two.
* **Negations** (an extension of the paper's subset). ``not T(c) within W from E``:
  no event matching ``T(c)`` with ``E.ts - W <= e.ts < E.ts``. ``not T(c) between D
  and E``: none with ``D.ts < e.ts < E.ts`` (``D`` is the later chain element, the
  earlier in time; the parser refuses the reverse order). They are Count aggregates
  that must be 0.
* **Filters.** ``45 < $t`` and other comparisons of expressions must all hold.
* **Where.** Each composite attribute is assigned an expression over literals,
  parameters, aggregate values, payload attributes of chain elements (``Type.attr``,
  the type naming a chain element, which must then be unique in the chain; core fields
  such as ``ts`` are not attributes) and ``+ - * /``. Aggregates written inline in
  ``where`` are named ``<function>#<index>`` (``sum#0``), a name no ``$x`` can spell.
  Attributes not assigned are 0. The composite's type is registered with the
  attributes of ``define`` (``int`` -> int64, ``float``/``double`` -> float64,
  ``bool`` -> bool, ``string`` -> int64 category codes: payload columns are numeric).
* **Output order.** The composites of one terminator come in ascending order of the
  positions of elements 1, 2, ... (lexicographically); terminators in stream order.

Windows are written as a number of ticks (``within 100000``) or with a unit
(``within 5 min.``, ``ms``, ``s``, ``min``, ``h``) that :meth:`Window.ticks` converts
with the graph's ticks per second.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

Selection = Literal["each", "last", "first"]
Comparator = Literal["=", "!=", "<", "<=", ">", ">="]
Function = Literal["sum", "avg", "min", "max", "count"]
Arith = Literal["+", "-", "*", "/"]

SELECTIONS: tuple[Selection, ...] = ("each", "last", "first")
COMPARATORS: tuple[Comparator, ...] = ("=", "!=", "<", "<=", ">", ">=")
FUNCTIONS: tuple[Function, ...] = ("sum", "avg", "min", "max", "count")
ATTRIBUTE_TYPES: dict[str, str] = {
    "int": "i8", "float": "f8", "double": "f8", "bool": "?", "string": "i8",
}
UNIT_SECONDS: dict[str, float] = {"ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0}


class RuleError(ValueError):
    """A rule that is not well formed; the message says which part and why."""


@dataclass(frozen=True)
class Param:
    """A parameter ``$name``."""

    name: str

    def __str__(self) -> str:
        return f"${self.name}"


Value = int | float | bool | Param


@dataclass(frozen=True)
class Constraint:
    """``attr op value``; a :class:`Param` value is only allowed with ``=``."""

    attr: str
    op: Comparator
    value: Value

    def __post_init__(self) -> None:
        if self.op not in COMPARATORS:
            raise RuleError(f"unknown comparator {self.op!r} on attribute {self.attr!r}")
        if isinstance(self.value, Param) and self.op != "=":
            raise RuleError(f"parameter {self.value} on {self.attr!r} must use '=', "
                            f"got {self.op!r}")


@dataclass(frozen=True)
class Pattern:
    """An event type with content constraints (``Temp(area=$a and value>45)``)."""

    type: str
    constraints: tuple[Constraint, ...] = ()

    def params(self) -> tuple[Param, ...]:
        return tuple(c.value for c in self.constraints if isinstance(c.value, Param))

    def literals(self) -> tuple[Constraint, ...]:
        return tuple(c for c in self.constraints if not isinstance(c.value, Param))


@dataclass(frozen=True)
class Window:
    """A window length: ticks when ``unit`` is empty, else a time in that unit."""

    value: float
    unit: str = ""

    def __post_init__(self) -> None:
        if self.unit and self.unit not in UNIT_SECONDS:
            raise RuleError(f"unknown time unit {self.unit!r}; use ms, s, min or h")
        if not self.value >= 0 or math.isinf(self.value):
            raise RuleError(f"a window must be a finite length >= 0, got {self.value}")

    def ticks(self, ticks_per_second: float | None = None) -> int:
        """The window in ticks; a window with a unit needs ``ticks_per_second``."""
        if not self.unit:
            return round(self.value)
        if ticks_per_second is None:
            raise RuleError(f"window '{self.value} {self.unit}' needs the ticks per second "
                            "of the graph")
        return round(float(self.value * UNIT_SECONDS[self.unit] * ticks_per_second))


@dataclass(frozen=True)
class Step:
    """Chain element ``i >= 1``: ``<selection> <pattern> within <window> from <i-1>``."""

    selection: Selection
    pattern: Pattern
    within: Window


@dataclass(frozen=True)
class Aggregate:
    """``function(pattern.attr within window from chain[anchor])``; ``attr`` is None
    for ``count``. ``name`` is the parameter it is bound to (``$t=Avg(...)``) or a
    generated name for aggregates written inline in ``where``."""

    name: str
    function: Function
    pattern: Pattern
    attr: str | None
    within: Window
    anchor: int


@dataclass(frozen=True)
class Negation:
    """No event matches ``pattern`` within ``window`` before ``chain[anchor]`` or, when
    ``after`` is set, strictly between ``chain[after]`` and ``chain[anchor]``."""

    pattern: Pattern
    anchor: int
    within: Window | None = None
    after: int | None = None


@dataclass(frozen=True)
class Const:
    """A literal number or bool."""

    value: int | float | bool


@dataclass(frozen=True)
class ParamRef:
    """A chain parameter (``$x``) or an aggregate bound to one (``$t``)."""

    name: str


@dataclass(frozen=True)
class AttrRef:
    """Attribute ``attr`` of the event chosen for ``chain[element]``."""

    element: int
    attr: str


@dataclass(frozen=True)
class AggRef:
    """The value of ``rule.aggregates[index]``."""

    index: int


@dataclass(frozen=True)
class BinOp:
    """``left op right`` with ``+ - * /`` (true division)."""

    op: Arith
    left: Expr
    right: Expr


Expr = Const | ParamRef | AttrRef | AggRef | BinOp


@dataclass(frozen=True)
class Comparison:
    """A filter ``left op right`` that every composite must satisfy."""

    left: Expr
    op: Comparator
    right: Expr


@dataclass(frozen=True)
class Rule:
    """A rule: the composite type it defines and how to detect and fill it."""

    name: str
    attributes: tuple[tuple[str, str], ...]
    terminator: Pattern
    steps: tuple[Step, ...] = ()
    aggregates: tuple[Aggregate, ...] = ()
    negations: tuple[Negation, ...] = ()
    filters: tuple[Comparison, ...] = ()
    assignments: tuple[tuple[str, Expr], ...] = ()
    source: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        self.check()

    @property
    def chain(self) -> tuple[Pattern, ...]:
        """Element patterns: the terminator, then the steps' patterns."""
        return (self.terminator, *(s.pattern for s in self.steps))

    @property
    def input_types(self) -> tuple[str, ...]:
        """Every event type the rule reads, in first-mention order."""
        names = [p.type for p in self.chain]
        names += [a.pattern.type for a in self.aggregates]
        names += [n.pattern.type for n in self.negations]
        return tuple(dict.fromkeys(names))

    def binder(self, name: str) -> int:
        """Index of the chain element that binds parameter ``name``."""
        for i, pattern in enumerate(self.chain):
            if any(p.name == name for p in pattern.params()):
                return i
        raise RuleError(f"rule {self.name}: parameter ${name} is not bound by any element "
                        "of the sequence")

    def check(self) -> None:
        """Raise :class:`RuleError` if the rule is inconsistent."""
        if not self.name.isidentifier():
            raise RuleError(f"composite type name {self.name!r} is not an identifier")
        names = [a for a, _ in self.attributes]
        if len(set(names)) != len(names):
            raise RuleError(f"rule {self.name}: duplicate attribute in define")
        for attr, kind in self.attributes:
            if kind not in ATTRIBUTE_TYPES:
                raise RuleError(f"rule {self.name}: attribute {attr!r} has unknown type "
                                f"{kind!r}; use one of {', '.join(ATTRIBUTE_TYPES)}")
        n = len(self.chain)
        for agg in self.aggregates:
            if not 0 <= agg.anchor < n:
                raise RuleError(f"rule {self.name}: aggregate {agg.name} is anchored at "
                                f"element {agg.anchor}, which does not exist")
            if (agg.attr is None) != (agg.function == "count"):
                raise RuleError(f"rule {self.name}: aggregate {agg.name}: Count takes no "
                                "attribute, the other functions need one")
        for neg in self.negations:
            if not 0 <= neg.anchor < n or (neg.after is not None and not 0 <= neg.after < n):
                raise RuleError(f"rule {self.name}: negation of {neg.pattern.type} refers to "
                                "an element that does not exist")
            if (neg.within is None) == (neg.after is None):
                raise RuleError(f"rule {self.name}: negation of {neg.pattern.type} needs "
                                "either 'within' or 'between'")
        mentioned = {p.name for pat in self.chain for p in pat.params()}
        used = {p.name for a in self.aggregates for p in a.pattern.params()}
        used |= {p.name for g in self.negations for p in g.pattern.params()}
        for name in sorted(used - mentioned):
            raise RuleError(f"rule {self.name}: parameter ${name} is used by an aggregate or "
                            "negation but not bound by any element of the sequence")
        assigned = [a for a, _ in self.assignments]
        for attr in assigned:
            if attr not in names:
                raise RuleError(f"rule {self.name}: where assigns {attr!r}, which define "
                                "does not declare")
        agg_names = {a.name for a in self.aggregates}
        for expr in [e for _, e in self.assignments] + [x for f in self.filters
                                                        for x in (f.left, f.right)]:
            _check_expr(self, expr, mentioned | agg_names)

    def __str__(self) -> str:
        return self.source or repr(self)


def _check_expr(rule: Rule, expr: Expr, known: set[str]) -> None:
    if isinstance(expr, BinOp):
        _check_expr(rule, expr.left, known)
        _check_expr(rule, expr.right, known)
    elif isinstance(expr, ParamRef) and expr.name not in known:
        raise RuleError(f"rule {rule.name}: ${expr.name} is neither a parameter of the "
                        "sequence nor an aggregate")
    elif isinstance(expr, AttrRef) and not 0 <= expr.element < len(rule.chain):
        raise RuleError(f"rule {rule.name}: attribute {expr.attr!r} refers to element "
                        f"{expr.element}, which does not exist")
    elif isinstance(expr, AggRef) and not 0 <= expr.index < len(rule.aggregates):
        raise RuleError(f"rule {rule.name}: aggregate #{expr.index} does not exist")
