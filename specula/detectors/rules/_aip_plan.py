"""The plan of the AIP engine: what it computes once per rule, before the first event.

:class:`~specula.detectors.rules.aip.AIPEngine` reads its tables according to a few
frozen descriptions derived from the rule and the registry: how an event of element
``k - 1`` scans the instances of state ``k`` (:class:`Scan`, built by
:func:`plan_scans`), which events each aggregate or negation column keeps and how they
are joined to a match (:class:`Column`, :func:`plan_columns`, :func:`column_spec`), the
vectorised per-event test of a pattern (:class:`Filter`), where each predicate is
decided (:class:`Predicates`, :func:`plan_predicates`) and how long each table is
needed (:func:`plan_horizons`); and a scan packed into the arrays of the kernel
(:class:`ScanCode`, :func:`scan_code`), with the rows of the event store it reads
(:class:`StoreRows`). Keeping them apart from the engine leaves it with what happens
per batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specula.detectors.rules._cdp_kernels import EACH, FIRST, LAST
from specula.detectors.rules._cdp_plan import program
from specula.detectors.rules.ast import (
    AttrRef,
    BinOp,
    Comparison,
    Expr,
    Param,
    Pattern,
    Rule,
    Window,
)
from specula.detectors.rules.engine import predicates_hold, resolved_predicates
from specula.events import TypeRegistry

__all__ = ["Column", "Filter", "Predicates", "Scan", "ScanCode", "StoreRows", "column_spec",
           "mentions_of", "plan_bound", "plan_columns", "plan_horizons", "plan_predicates",
           "plan_scans", "scan_code"]

_COMPARE = {"=": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
            ">": np.greater, ">=": np.greater_equal}


@dataclass(frozen=True)
class Scan:
    """How an event of element ``k - 1`` reads state ``k``.

    ``known``: (attribute of element k, attribute of the anchor, float) for parameters
    the anchor already carries; ``unknown``: (attribute of element k, float) for
    parameters bound by an element the anchor has not seen; ``deeper``: (column,
    attribute of that element, attribute of the anchor, float) for parameters the anchor
    shares with an element after k (the nearest one). ``float``: the parameter's values
    compare as float64 (:func:`~specula.detectors.rules.engine.float_params`).
    ``near``: the predicates of element k decided by the scan (they read element k and
    the anchor). ``inclusive`` (``ties nonstrict``): rows with
    the anchor's time stamp are candidates; ``own``: the columns of an instance (0 for
    element k) whose event may be the anchor itself, which an instance must not repeat.
    ``deferred``: a ``last``/``first`` step whose choice depends on elements the anchor
    has not seen (a predicate reading one through a parameter, or under ``ties
    nonstrict`` an element of the same type that may share the anchor's time stamp);
    the scan keeps every candidate and the choice is checked at the terminator.
    """

    k: int
    window: int
    selection: str
    known: tuple[tuple[str, str, bool], ...]
    unknown: tuple[tuple[str, bool], ...]
    deeper: tuple[tuple[int, str, str, bool], ...]
    dead_ends: bool
    near: tuple[Comparison, ...] = ()
    inclusive: bool = False
    own: tuple[int, ...] = ()
    deferred: bool = False

    @property
    def tested(self) -> bool:
        """Whether a row must be read to know if its event is a candidate."""
        return bool(self.known or self.near or 0 in self.own)


@dataclass(frozen=True)
class Predicates:
    """The resolved predicates of every chain element, by where they are decided:
    ``own`` read only the event itself (part of its pattern's test); ``near`` read the
    event and the element before it (decided by the scan); ``late`` read an element
    further back (decided when the sequence is accepted; only ``each`` steps, and
    deferred ones, have them)."""

    own: tuple[tuple[Comparison, ...], ...]
    near: tuple[tuple[Comparison, ...], ...]
    late: tuple[tuple[Comparison, ...], ...]


def plan_predicates(rule: Rule) -> Predicates:
    """Sort the predicates of ``rule``'s chain elements (parameters resolved)."""
    own, near, late = [], [], []
    for i in range(len(rule.chain)):
        sorted_: tuple[list, list, list] = ([], [], [])
        for c in resolved_predicates(rule, i):
            reads = _reads(c.left) | _reads(c.right)
            sorted_[0 if reads <= {i} else 1 if reads <= {i - 1, i} else 2].append(c)
        own.append(tuple(sorted_[0]))
        near.append(tuple(sorted_[1]))
        late.append(tuple(sorted_[2]))
    return Predicates(tuple(own), tuple(near), tuple(late))


def _refs(expr: Expr) -> list[AttrRef]:
    if isinstance(expr, AttrRef):
        return [expr]
    return _refs(expr.left) + _refs(expr.right) if isinstance(expr, BinOp) else []


def _reads(expr: Expr) -> set[int]:
    return {r.element for r in _refs(expr)}


def plan_horizons(rule: Rule, windows: tuple[int, ...], ticks_per_second: float | None,
                  deferred: bool) -> tuple[tuple[int, ...], int]:
    """How long (ticks before the newest event) each state and the event store are needed.

    State ``k`` serves anchors no older than the newest event, so its step's window
    bounds it; the pattern window ``W`` bounds it too, except for ``first`` steps, whose
    older candidates must stay to be chosen (and drop the match). The store keeps what
    the live instances refer to (everything, when a deferred choice is checked again).
    """
    n = len(windows)
    pattern = None if rule.within is None else rule.within.ticks(ticks_per_second)
    states = [0] + [w if pattern is None or rule.steps[k - 1].selection == "first"
                    else min(w, pattern) for k, w in enumerate(windows) if k]
    if deferred or n == 1:
        return tuple(states), sum(windows)
    return tuple(states), max(states[k] + sum(windows[k + 1:]) for k in range(1, n))


@dataclass(frozen=True)
class Column:
    """An aggregate's or a negation's events: ts, value and parameter attributes; and
    how a match reads them: ``function`` of the events in ``[anchor.ts - window,
    anchor.ts)``, or strictly after element ``after`` when ``window`` is None."""

    pattern: Pattern
    horizon: int
    value: str | None
    params: tuple[tuple[str, int, str, bool], ...]  # (attr, binder, binder attr, float)
    function: str = "count"
    anchor: int = 0
    window: int | None = None
    after: int | None = None


def plan_scans(rule: Rule, mentions: tuple[dict[str, list[str]], ...],
               windows: tuple[int, ...], predicates: Predicates, floats: set[str]
               ) -> tuple[Scan | None, ...]:
    """How each state ``k >= 1`` is scanned (entry 0, the initial state, is None);
    ``floats`` names the parameters compared as float64."""
    n = len(mentions)
    types = [p.type for p in rule.chain]
    ties = rule.ties == "nonstrict"

    def scan(k: int) -> Scan:
        mine, anchor = mentions[k], mentions[k - 1]
        known = tuple((mine[p][0], anchor[p][0], p in floats) for p in mine if p in anchor)
        unknown = tuple((mine[p][0], p in floats) for p in mine
                        if p not in anchor and rule.binder(p) < k - 1)
        deeper = []
        for p, attrs in anchor.items():
            if p in mine:
                continue
            m = next((m for m in range(k + 1, n) if p in mentions[m]), None)
            if m is not None:
                deeper.append((m - k, mentions[m][p][0], attrs[0], p in floats))
        selection = rule.steps[k - 1].selection
        own = tuple(c for c in range(n - k) if ties and types[k + c] == types[k - 1])
        deferred = selection != "each" and bool(
            predicates.late[k] or (ties and types[k] in types[:k - 1]))
        return Scan(k, windows[k], selection, known, unknown, tuple(deeper),
                    dead_ends=selection != "each" and not deferred and k < n - 1,
                    near=predicates.near[k], inclusive=ties, own=own, deferred=deferred)

    return (None, *(scan(k) for k in range(1, n)))


def plan_columns(rule: Rule, mentions: tuple[dict[str, list[str]], ...],
                 offsets: tuple[int, ...], ticks_per_second: float | None, floats: set[str]
                 ) -> tuple[Column, ...]:
    """The columns of the rule's aggregates, then of its negations, in the rule's order."""

    def column(pattern: Pattern, anchor: int, within: Window | None, after: int | None,
               value: str | None, function: str) -> Column:
        window = None if within is None else within.ticks(ticks_per_second)
        if window is not None:
            horizon = offsets[anchor] + window
        else:
            assert after is not None  # Rule checks: a window or an element after
            horizon = max(offsets[anchor], offsets[after])
        params = tuple((attrs[0], rule.binder(p), mentions[rule.binder(p)][p][0], p in floats)
                       for p, attrs in mentions_of(pattern).items())
        return Column(pattern, horizon, value, params, function, anchor, window, after)

    columns = tuple(column(a.pattern, a.anchor, a.within, None, a.attr, a.function)
                    for a in rule.aggregates)
    columns += tuple(column(g.pattern, g.anchor, g.within, g.after, None, "count")
                     for g in rule.negations)
    return columns


def plan_bound(rule: Rule, mentions: tuple[dict[str, list[str]], ...]
               ) -> tuple[tuple[tuple[str, int, str], ...], ...]:
    """Per element k, the parameters bound by an earlier element: (attribute of k,
    binder, binder's attribute)."""
    return tuple(tuple((attrs[0], rule.binder(p), mentions[rule.binder(p)][p][0])
                       for p, attrs in mentions[k].items() if rule.binder(p) < k)
                 for k in range(len(mentions)))


def column_spec(column: Column) -> tuple[tuple[str, np.dtype, int], ...]:
    """The table of a column: time stamps, the aggregated values (one row, 0 without a
    value) and the parameter keys (one row per parameter, at least one), as the CDP
    kernel ``reduce`` reads them."""
    return (("ts", np.dtype(np.int64), 0), ("_num", np.dtype(np.float64), 1),
            ("_key", np.dtype(np.int64), max(1, len(column.params))))


class StoreRows:
    """The rows of parameter keys the event store keeps besides its fields, per
    (attribute, float), numbered as the ``deeper`` checks of the scans ask for them."""

    def __init__(self) -> None:
        self.keys: list[tuple[str, bool]] = []

    def key_row(self, attr: str, is_float: bool) -> int:
        if (attr, is_float) not in self.keys:
            self.keys.append((attr, is_float))
        return self.keys.index((attr, is_float))


@dataclass(frozen=True)
class ScanCode:
    """A :class:`Scan` as the arrays of :func:`~specula.detectors.rules._aip_kernels.scan`,
    and which attributes it reads: of the events of element ``k``, kept with their
    instances, the parameter keys (``state_keys``: attribute, float; the checked ones,
    then the unknown ones) and the values its predicates read (``state_values``); of
    each anchor, the parameter keys (``anchor_keys``: the checked ones, then those of
    the deeper checks) and the values its predicates read (``anchor_values``)."""

    cfg: np.ndarray
    checks: np.ndarray
    nan: np.ndarray
    deeper: np.ndarray
    own: np.ndarray
    ops: np.ndarray
    consts: np.ndarray
    state_keys: tuple[tuple[str, bool], ...]
    state_values: tuple[str, ...]
    anchor_keys: tuple[tuple[str, bool], ...]
    anchor_values: tuple[str, ...]


_SELECTION = {"each": EACH, "last": LAST, "first": FIRST}


def scan_code(scan: Scan, store: StoreRows, out_dead: bool) -> ScanCode:
    """Pack ``scan`` for the kernel, numbering the store rows it reads in ``store``;
    ``out_dead``: an anchor that advances nothing leaves a dead end in its state."""
    anchor_keys = [(theirs, f) for _, theirs, f in scan.known]
    deeper = []
    for column, attr, theirs, f in scan.deeper:
        if (theirs, f) not in anchor_keys:
            anchor_keys.append((theirs, f))
        deeper.append((column, store.key_row(attr, f), anchor_keys.index((theirs, f)), f))
    values: list[str] = []

    def value_row(attr: str) -> int:
        if attr not in values:
            values.append(attr)
        return values.index(attr)

    slots = list(dict.fromkeys((r.element, r.attr) for c in scan.near
                               for r in _refs(c.left) + _refs(c.right) if r.element != scan.k))
    ops, consts = program(list(scan.near), scan.k, slots, value_row)
    every = scan.selection == "each" or bool(scan.unknown) or scan.deferred
    per_value = every and scan.selection != "each" and not scan.deferred
    cfg = (scan.window, _SELECTION[scan.selection], scan.inclusive, every, per_value,
           len(scan.unknown), 0 in scan.own, scan.dead_ends, out_dead)
    return ScanCode(np.array(cfg, np.int64), np.arange(len(scan.known), dtype=np.int64),
                    np.array([f for _, _, f in scan.known], np.bool_),
                    np.array(deeper, np.int64).reshape(-1, 4),
                    np.array([c for c in scan.own if c], np.int64), ops, consts,
                    tuple((mine, f) for mine, _, f in scan.known) + scan.unknown,
                    tuple(values), tuple(anchor_keys), tuple(attr for _, attr in slots))


def mentions_of(pattern: Pattern) -> dict[str, list[str]]:
    """Parameter name -> the attributes of ``pattern`` bound to it."""
    out: dict[str, list[str]] = {}
    for c in pattern.constraints:
        if isinstance(c.value, Param):
            out.setdefault(c.value.name, []).append(c.attr)
    return out


@dataclass(frozen=True)
class Filter:
    """The per-event test of a pattern: type, literal constraints, attributes that must
    be equal because the pattern binds one parameter to all of them, and the predicates
    that read only the event itself."""

    type_id: int
    literals: tuple[tuple[str, str, int | float | bool | str], ...]
    equal: tuple[tuple[str, str], ...]
    predicates: tuple[Comparison, ...] = ()

    @classmethod
    def of(cls, pattern: Pattern, registry: TypeRegistry,
           predicates: tuple[Comparison, ...] = ()) -> Filter:
        return cls(registry.id(pattern.type),
                   tuple((c.attr, c.op, c.value) for c in pattern.constraints
                         if not isinstance(c.value, Param)),  # pattern.literals()
                   tuple((attrs[0], other) for attrs in mentions_of(pattern).values()
                         for other in attrs[1:]), predicates)

    def mask(self, events: np.ndarray, of_type: dict[int, np.ndarray]) -> np.ndarray:
        """Rows of ``events`` that match the pattern; ``of_type`` caches the rows of each
        type id in this batch (filters of one type share them; never modified)."""
        mask = of_type.get(self.type_id)
        if mask is None:
            mask = of_type[self.type_id] = events["type"] == self.type_id
        if not (self.literals or self.equal or self.predicates):
            return mask
        mask = mask.copy()
        for attr, op, value in self.literals:
            mask &= _COMPARE[op](events[attr], value)
        for attr, other in self.equal:
            mask &= events[other] == events[attr]
        if self.predicates and mask.any():
            mask &= predicates_hold(self.predicates, lambda _, attr: events[attr])
        return mask
