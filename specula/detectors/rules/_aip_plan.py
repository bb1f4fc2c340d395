"""The plan of the AIP engine: what it computes once per rule, before the first event.

:class:`~specula.detectors.rules.aip.AIPEngine` reads its tables according to a few
frozen descriptions derived from the rule and the registry: how an event of element
``k - 1`` scans the instances of state ``k`` (:class:`Scan`, built by
:func:`plan_scans`), which events each aggregate or negation column keeps and how they
are joined to a match (:class:`Column`, :func:`plan_columns`, :func:`column_spec`), and
the vectorised per-event test of a pattern (:class:`Filter`). Keeping them apart from the
engine leaves it with what happens per event.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specula.detectors.rules.ast import Param, Pattern, Rule, Window
from specula.events import TypeRegistry

__all__ = ["Column", "Filter", "Scan", "column_spec", "mentions_of", "plan_columns",
           "plan_scans"]

_COMPARE = {"=": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
            ">": np.greater, ">=": np.greater_equal}


@dataclass(frozen=True)
class Scan:
    """How an event of element ``k - 1`` reads state ``k``.

    ``known``: (attribute of element k, attribute of the anchor) pairs of parameters the
    anchor already carries; ``unknown``: attributes of element k whose parameters are
    bound by an element the anchor has not seen; ``deeper``: (column, attribute of that
    element, attribute of the anchor) for parameters the anchor shares with an element
    after k (the nearest one).
    """

    k: int
    window: int
    selection: str
    known: tuple[tuple[str, str], ...]
    unknown: tuple[str, ...]
    deeper: tuple[tuple[int, str, str], ...]
    dead_ends: bool


@dataclass(frozen=True)
class Column:
    """An aggregate's or a negation's events: ts, value and parameter attributes."""

    pattern: Pattern
    horizon: int
    value: str | None
    params: tuple[tuple[str, int, str], ...]  # (attr here, binder element, binder attr)


def plan_scans(rule: Rule, mentions: tuple[dict[str, list[str]], ...],
               windows: tuple[int, ...]) -> tuple[Scan | None, ...]:
    """How each state ``k >= 1`` is scanned (entry 0, the initial state, is None)."""
    n = len(mentions)

    def scan(k: int) -> Scan:
        mine, anchor = mentions[k], mentions[k - 1]
        known = tuple((mine[p][0], anchor[p][0]) for p in mine if p in anchor)
        unknown = tuple(mine[p][0] for p in mine
                        if p not in anchor and rule.binder(p) < k - 1)
        deeper = []
        for p, attrs in anchor.items():
            if p in mine:
                continue
            m = next((m for m in range(k + 1, n) if p in mentions[m]), None)
            if m is not None:
                deeper.append((m - k, mentions[m][p][0], attrs[0]))
        selection = rule.steps[k - 1].selection
        return Scan(k, windows[k], selection, known, unknown, tuple(deeper),
                    dead_ends=selection != "each" and k < n - 1)

    return (None, *(scan(k) for k in range(1, n)))


def plan_columns(rule: Rule, mentions: tuple[dict[str, list[str]], ...],
                 offsets: tuple[int, ...], ticks_per_second: float | None
                 ) -> tuple[Column, ...]:
    """The columns of the rule's aggregates, then of its negations, in the rule's order."""

    def column(pattern: Pattern, anchor: int, within: Window | None, after: int | None,
               value: str | None) -> Column:
        if within is not None:
            horizon = offsets[anchor] + within.ticks(ticks_per_second)
        else:
            horizon = max(offsets[anchor], offsets[after])
        params = tuple((attrs[0], rule.binder(p), mentions[rule.binder(p)][p][0])
                       for p, attrs in mentions_of(pattern).items())
        return Column(pattern, horizon, value, params)

    columns = tuple(column(a.pattern, a.anchor, a.within, None, a.attr)
                    for a in rule.aggregates)
    columns += tuple(column(g.pattern, g.anchor, g.within, g.after, None)
                     for g in rule.negations)
    return columns


def column_spec(column: Column, registry: TypeRegistry) -> tuple:
    fields = dict(registry[column.pattern.type].fields)
    spec = [("ts", np.dtype(np.int64), 0)]
    if column.value:
        spec.append(("_value", np.dtype(np.float64), 0))
    spec += [(attr, fields[attr], 0) for attr, _, _ in column.params]
    return tuple(dict((s[0], s) for s in spec).values())  # one column per attribute


def mentions_of(pattern: Pattern) -> dict[str, list[str]]:
    """Parameter name -> the attributes of ``pattern`` bound to it."""
    out: dict[str, list[str]] = {}
    for c in pattern.constraints:
        if isinstance(c.value, Param):
            out.setdefault(c.value.name, []).append(c.attr)
    return out


@dataclass(frozen=True)
class Filter:
    """The per-event test of a pattern: type, literal constraints, and attributes that
    must be equal because the pattern binds one parameter to all of them."""

    type_id: int
    literals: tuple[tuple[str, str, object], ...]
    equal: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, pattern: Pattern, registry: TypeRegistry) -> Filter:
        return cls(registry.id(pattern.type),
                   tuple((c.attr, c.op, c.value) for c in pattern.literals()),
                   tuple((attrs[0], other) for attrs in mentions_of(pattern).values()
                         for other in attrs[1:]))

    def mask(self, events: np.ndarray) -> np.ndarray:
        """Rows of ``events`` that match the pattern."""
        mask = events["type"] == self.type_id
        for attr, op, value in self.literals:
            mask &= _COMPARE[op](events[attr], value)
        for attr, other in self.equal:
            mask &= events[other] == events[attr]
        return mask
