"""The patterns of the rule model: constraints, element patterns, windows, sequence
steps, aggregates and negations.

What they mean is written in :mod:`~specula.detectors.rules.ast`, which re-exports every
name defined here; import them from there.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Literal

from specula.detectors.rules._ast_exprs import (
    COMPARATORS,
    Comparator,
    Comparison,
    Function,
    Param,
    RuleError,
    quote,
)

Selection = Literal["each", "last", "first"]
Ties = Literal["strict", "nonstrict"]
Contiguity = Literal["relaxed", "strict"]
Greed = Literal["all", "greedy", "reluctant"]
Strategy = Literal["none", "to_next", "past_last_event", "to_first", "to_last"]

SELECTIONS: tuple[Selection, ...] = ("each", "last", "first")
TIES: tuple[Ties, ...] = ("strict", "nonstrict")
CONTIGUITIES: tuple[Contiguity, ...] = ("relaxed", "strict")
GREEDS: tuple[Greed, ...] = ("all", "greedy", "reluctant")
STRATEGIES: tuple[Strategy, ...] = ("none", "to_next", "past_last_event", "to_first",
                                    "to_last")
UNIT_SECONDS: dict[str, float] = {"ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0}
MAX_WINDOW_TICKS = 2**62
"""Windows span fewer ticks than this, so that a time stamp plus or minus a window stays
an int64 on every engine."""

Value = int | float | bool | str | Param


@dataclass(frozen=True)
class Constraint:
    """``attr op value``; a :class:`Param` value is only allowed with ``=``, a string
    only with ``=`` and ``!=``."""

    attr: str
    op: Comparator
    value: Value

    def __post_init__(self) -> None:
        if self.op not in COMPARATORS:
            raise RuleError(f"unknown comparator {self.op!r} on attribute {self.attr!r}")
        if isinstance(self.value, Param) and self.op != "=":
            raise RuleError(f"parameter {self.value} on {self.attr!r} must use '=', "
                            f"got {self.op!r}")
        if isinstance(self.value, str) and self.op not in ("=", "!="):
            raise RuleError(f"{self.attr} {self.op} {quote(self.value)}: strings compare "
                            "only with = and !=")


@dataclass(frozen=True)
class Pattern:
    """An event type with content constraints (``Temp(area=$a and value>45)``).

    ``predicates`` are comparisons of expressions over the event itself and over chain
    elements before it (``AMZN(open < c.open)``), checked while matching; ``alias`` is
    the name the rule gives the element (``AMZN() as b``), empty when it has none.
    """

    type: str
    constraints: tuple[Constraint, ...] = ()
    predicates: tuple[Comparison, ...] = ()
    alias: str = ""
    alternatives: tuple[Pattern, ...] = ()

    @property
    def name(self) -> str:
        """How the rule names this element: its alias, else its type."""
        return self.alias or self.type

    @property
    def types(self) -> tuple[str, ...]:
        """The event types the element may match: its type, then its alternatives'."""
        return (self.type, *(a.type for a in self.alternatives))

    def options(self) -> tuple[Pattern, ...]:
        """The plain patterns of a disjunction ``(A(...) | B(...)) as x``, each named
        ``x``; ``(self,)`` for a pattern without alternatives."""
        first = Pattern(self.type, self.constraints, self.predicates, self.alias)
        return (first, *(Pattern(a.type, a.constraints, a.predicates, self.alias)
                         for a in self.alternatives))

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
        if not 0 <= self.value <= sys.float_info.max:  # exact for ints beyond any float
            raise RuleError(f"a window must be a finite length >= 0, got {self.value}")

    def ticks(self, ticks_per_second: float | None = None) -> int:
        """The window in ticks; a window with a unit needs ``ticks_per_second``. A
        window spans fewer than :data:`MAX_WINDOW_TICKS` ticks, on every engine."""
        if not self.unit:
            ticks = round(self.value)
        elif ticks_per_second is None:
            raise RuleError(f"window '{self.value} {self.unit}' needs the ticks per second "
                            "of the graph")
        else:
            ticks = round(float(self.value * UNIT_SECONDS[self.unit] * ticks_per_second))
        if ticks >= MAX_WINDOW_TICKS:
            value = f"{self.value:g}" if isinstance(self.value, float) else str(self.value)
            shown = f"{value} {self.unit}".strip()
            raise RuleError(f"window '{shown}' is {ticks} ticks, more than a window may span "
                            f"(2**62 ticks: time stamps are int64 ticks and the engines add "
                            "windows to them); use a shorter window")
        return ticks


@dataclass(frozen=True)
class Step:
    """Chain element ``i >= 1``: ``<selection> <pattern> within <window> from <i-1>``;
    ``times = (n, m)`` makes it a closure ``<pattern>{n,m}`` of ``n`` to ``m`` events
    (``n = 0``: optional; ``m = None``: unbounded, ``{n,}``). Consecutive steps with
    the same ``group`` are the members of one unordered conjunction ``(A(...) as a &
    B(...) as b) as group``, in the order written. ``contiguity`` is ``relaxed``
    (``from`` or ``followedBy``: other events may come between the element and the one
    it follows) or ``strict`` (``next``: none). ``until`` (closures only) is a pattern
    no event between the first and the last item may match; ``greed`` (closures only)
    keeps every choice of items (``all``), the maximal ones (``greedy``) or the minimal
    ones (``reluctant``); ``runs`` (closures only) takes only items that follow each
    other among the closure's candidates."""

    selection: Selection
    pattern: Pattern
    within: Window
    times: tuple[int, int | None] | None = None
    group: str = ""
    contiguity: Contiguity = "relaxed"
    until: Pattern | None = None
    greed: Greed = "all"
    runs: bool = False


@dataclass(frozen=True)
class Skip:
    """The after-match skip strategy (``skip ...`` after ``where``), as FlinkCEP's
    ``AfterMatchSkipStrategy``; ``element`` is the chain element of ``to_first`` and
    ``to_last``, else None."""

    strategy: Strategy = "none"
    element: int | None = None

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise RuleError(f"unknown skip strategy {self.strategy!r}; use one of "
                            f"{', '.join(STRATEGIES)}")
        if (self.element is None) != (self.strategy not in ("to_first", "to_last")):
            raise RuleError(f"skip {self.strategy}: an element is named by 'to first' and "
                            "'to last' only, and they need one")


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
    ``after`` is set, strictly between ``chain[after]`` and ``chain[anchor]``; when
    ``ahead`` is set, within ``window`` *after* ``chain[anchor]`` (absence at the end,
    decided when event time passes the window)."""

    pattern: Pattern
    anchor: int
    within: Window | None = None
    after: int | None = None
    ahead: bool = False
