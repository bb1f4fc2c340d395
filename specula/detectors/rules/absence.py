"""Absence at the end: output fired by the passing of event time.

A rule with ``not T(c) within W after E`` (``E`` its terminator; FlinkCEP's
``notFollowedBy(T).within(W)``, Esper's ``E -> (timer:interval(W) and not T)``) runs the
rest of the rule on its engines as usual (:class:`~specula.detectors.rules.expand.Union`)
and holds each composite it finds until event time decides it; the semantics is written
in :mod:`~specula.detectors.rules.ast`. Event time is the input in stream order, and the
ordering unit's clock: the first event of the rule's input types with ``ts > E.ts + W``
fires the held composite (stamped ``E.ts + W``, caused by that event), and so does the
unit once it has handed every input up to ``E.ts + W`` (:meth:`AbsenceUnion.pass_time`,
:meth:`~specula.detectors.Detector.on_time`: punctuations and idleness move that clock
while the rule's own input is quiet); an event matching ``T(c)`` with ``E.ts < ts <=
E.ts + W`` (the window of a step, seen from its anchor) drops it. The ordering unit
hands the detector its input in stream order, and its clock, speculatively where it
speculates (``clk - ceil(alpha*K)``; pure K-slack: ``clk - K``, final), and restores the
detector's snapshot (which holds what waits here) before it replays: a late ``T`` in
front of the event or the time that fired an absence revokes it like any other output.
The engines need not know about time: every engine (AIP, CDP, GPU CDP) runs absence
rules.

The parameters an absence reads, and under ``partition by`` the terminator's partition
value, are carried as hidden attributes of the held composites (named ``$x`` and
``$partition``, which no attribute of ``define`` can spell).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from specula.detectors.rules.ast import (
    ATTRIBUTE_TYPES,
    AttrRef,
    Constraint,
    Expr,
    Negation,
    Param,
    ParamRef,
    Pattern,
    Rule,
)
from specula.detectors.rules.engine import Engine, float_params, order_key
from specula.detectors.rules.expand import Composites, Union, as_events
from specula.events import TypeRegistry, distinct
from specula.events.strings import string_code

__all__ = ["AbsenceUnion"]

_TERMINATOR = np.dtype([("ts", np.int64), ("key", np.int64), ("producer", np.int32),
                        ("seq", np.int64)])
_NO_CAUSE = -1
_COMPARE = {"=": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
            ">": np.greater, ">=": np.greater_equal}


class AbsenceUnion:
    """A rule with absences at the end: its other part on ``engine_class`` engines,
    and the composites that wait for event time to pass their deadline.

    Parameters are those of :class:`~specula.detectors.rules.expand.Union`; it offers
    the same methods (``process``, ``flush``, ``snapshot``, ``restore``, ``parts``,
    ``engines``), and :meth:`time_hold`.

    Examples
    --------
    >>> from specula.detectors.rules import parse_rule
    >>> from specula.detectors.rules.aip import AIPEngine
    >>> reg = TypeRegistry()
    >>> _ = reg.register("A", p="i8"), reg.register("X", p="i8")
    >>> rule = parse_rule("define Lone(p: int) from A(p=$x) "
    ...                   "and not X(p=$x) within 10 after A where p=$x")
    >>> lone = AbsenceUnion(rule, AIPEngine, reg)
    >>> batch = reg.from_records([{"type": "A", "ts": 0, "p": 1},
    ...                           {"type": "A", "ts": 2, "p": 2},
    ...                           {"type": "X", "ts": 5, "p": 2},    # A(p=2) is followed
    ...                           {"type": "X", "ts": 12, "p": 1}],  # too late for A(p=1)
    ...                          dtype=reg.dtype(["A", "X"]))
    >>> out = lone.process(batch)
    >>> out.terminators["ts"].tolist(), out.columns["p"].tolist(), out.causes.tolist()
    ([10], [1], [3])
    """

    def __init__(self, rule: Rule, engine_class: type, registry: TypeRegistry,
                 ticks_per_second: float | None = None) -> None:
        self.rule = rule
        self.registry = registry
        absences = rule.absences
        params = list(dict.fromkeys(c.value.name for n in absences
                                    for c in n.pattern.constraints
                                    if isinstance(c.value, Param)))
        floats = float_params(rule, registry)
        self._hidden = [(f"${name}", _param_kind(rule, registry, name, floats))
                        for name in params]
        carried: list[tuple[str, Expr]] = [(f"${p}", ParamRef(p)) for p in params]
        if rule.partition:  # an absence takes only events of the terminator's partition
            self._hidden.append((_PARTITION, _attr_kind(registry, rule.terminator,
                                                        rule.partition)))
            carried.append((_PARTITION, AttrRef(0, rule.partition)))
        positive = replace(rule.without_absences(),
                           attributes=(*rule.attributes, *self._hidden),
                           assignments=(*rule.assignments, *carried))
        self.union = Union(positive, engine_class, registry, ticks_per_second)
        self._windows = np.array([n.within.ticks(ticks_per_second) for n in absences
                                  if n.within is not None], np.int64)
        self._absences = [_Forbidden(n, registry, floats, rule.partition) for n in absences]
        self._inputs = np.array([registry.id(t) for t in rule.input_types], np.int64)
        columns = [(a, np.dtype(ATTRIBUTE_TYPES[k])) for a, k in (*rule.attributes,
                                                                  *self._hidden)]
        self._dtype = np.dtype([("t", _TERMINATOR), ("deadline", np.int64),
                                ("c", np.dtype(columns) if columns else np.dtype([]))])
        self._waiting = np.zeros(0, self._dtype)

    @property
    def engines(self) -> list[Engine]:
        """The engines of the rule's other part."""
        return self.union.engines

    @property
    def parts(self) -> int:
        """How many items :meth:`snapshot` returns."""
        return self.union.parts + 1

    def time_hold(self) -> int | None:
        """The earliest deadline of a waiting composite (None: none waits): output may
        still come at that time stamp."""
        return int(self._waiting["deadline"].min()) if len(self._waiting) else None

    def process(self, events: np.ndarray) -> Composites:
        """The composites whose deadline the events of ``events`` pass, each caused by
        the first of them after its deadline; the new matches wait."""
        found = self.union.process(events)
        waiting = np.concatenate([self._waiting, self._wait(found)])
        made = np.concatenate([np.full(len(self._waiting), _NO_CAUSE, np.int64),
                               found.causes])
        if not len(waiting):
            self._waiting = waiting
            return self._composites(waiting, np.zeros(0, np.int64))
        alive = self._not_forbidden(waiting, events)
        rows = np.flatnonzero(np.isin(events["type"], self._inputs))
        times = events["ts"][rows]
        at = np.searchsorted(times, waiting["deadline"], side="right")
        at = np.maximum(at, np.searchsorted(rows, made, side="left"))  # not before the match
        fire = alive & (at < len(rows))
        self._waiting = waiting[alive & ~fire]
        fired, causes = waiting[fire], rows[at[fire]]
        return self._composites(fired, causes)

    def events(self, events: np.ndarray, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`process` with the composites as events of ``dtype`` (see
        :func:`~specula.detectors.rules.expand.as_events`), and their causes."""
        composites = self.process(events)
        return as_events(composites, dtype), composites.causes

    def pass_time(self, now: int) -> Composites:
        """Event time has reached ``now``: every input up to it has been processed, so
        the composites waiting for a deadline at or before ``now`` fire (causes 0, as
        at the end), also when no input of the rule came after them."""
        due = self._waiting["deadline"] <= now
        if not due.any():
            return self._composites(self._waiting[:0], np.zeros(0, np.int64))
        fired, self._waiting = self._waiting[due], self._waiting[~due]
        return self._composites(fired, np.zeros(len(fired), np.int64))

    def flush(self) -> Composites:
        """End of stream: event time reaches its end, so every composite still waiting
        fires (``causes`` 0, as at the end of the engines)."""
        waiting = np.concatenate([self._waiting, self._wait(self.union.flush())])
        self._waiting = waiting[:0]
        return self._composites(waiting, np.zeros(len(waiting), np.int64))

    def snapshot(self) -> list[Any]:
        """The other part's snapshots, then the waiting composites as bytes (equal
        waiting composites, equal bytes)."""
        return [*self.union.snapshot(), np.ascontiguousarray(self._waiting).tobytes()]

    def restore(self, state: list[Any]) -> None:
        """Return to a state made by :meth:`snapshot`."""
        *union, waiting = state
        self.union.restore(union)
        self._waiting = np.frombuffer(waiting, self._dtype).copy()

    # ------------------------------------------------------------------ internals

    def _wait(self, found: Composites) -> np.ndarray:
        """The composites ``found`` as waiting rows, with their deadlines."""
        rows = np.zeros(len(found), self._dtype)
        if not len(found):
            return rows
        for name in _TERMINATOR.names or ():
            rows["t"][name] = found.terminators[name]
        rows["deadline"] = found.terminators["ts"] + self._windows.max()
        for name in self._dtype["c"].names or ():
            rows["c"][name] = found.columns[name]
        return rows

    def _not_forbidden(self, waiting: np.ndarray, events: np.ndarray) -> np.ndarray:
        """Per waiting composite: no event of ``events`` matches an absence in its window."""
        alive = np.ones(len(waiting), bool)
        start = waiting["t"]["ts"]
        for forbidden, window in zip(self._absences, self._windows.tolist(), strict=True):
            rows = forbidden.rows(events)
            if len(rows):
                alive &= ~forbidden.hit(events, rows, waiting, start, start + window)
        return alive

    def _composites(self, rows: np.ndarray, causes: np.ndarray) -> Composites:
        """Fired rows as composites stamped with their deadlines, in the order of their
        causes, then deadlines, then terminators (stable: a terminator's composites
        keep the order of their elements)."""
        order = np.lexsort((order_key(rows["t"]), rows["deadline"], causes))
        rows, causes = rows[order], causes[order]
        terminators = np.zeros(len(rows), _TERMINATOR)
        for name in _TERMINATOR.names or ():
            terminators[name] = rows["t"][name]
        terminators["ts"] = rows["deadline"]
        return Composites(terminators, causes.astype(np.int64),
                          {a: rows["c"][a].copy() for a, _ in self.rule.attributes})


class _Forbidden:
    """The events one absence forbids: its type, its literal constraints, and its
    parameters compared with a waiting composite's (as int64, or float64 where a
    parameter is bound to a float somewhere)."""

    def __init__(self, negation: Negation, registry: TypeRegistry, floats: set[str],
                 partition: str) -> None:
        pattern = negation.pattern
        self.type_id = registry.id(pattern.type)
        self.literals = [(c.attr, c.op, _literal(c)) for c in pattern.literals()]
        self.params = [(c.attr, f"${c.value.name}", c.value.name in floats)
                       for c in pattern.constraints if isinstance(c.value, Param)]
        if partition:
            is_float = _attr_kind(registry, pattern, partition) == "double"
            self.params.append((partition, _PARTITION, is_float))

    def rows(self, events: np.ndarray) -> np.ndarray:
        """Indices of the events of the absence's type whose literal constraints hold."""
        keep = events["type"] == self.type_id
        for attr, op, value in self.literals:
            keep &= _COMPARE[op](events[attr], value)
        return np.flatnonzero(keep)

    def hit(self, events: np.ndarray, rows: np.ndarray, waiting: np.ndarray,
            start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """Per waiting composite, whether one of ``rows`` (time-ordered) carries its
        parameter values with a time stamp after ``start``, up to ``end``.

        Vectorised: every event and composite gets a group id (equal parameter values,
        equal id; NaN equals nothing), time stamps are replaced by their ranks, and
        ``group * ranks + rank`` orders the events so that one search per composite
        finds its first event after ``start`` and its first after ``end``."""
        row_group = np.zeros(len(rows), np.int64)
        own_group = np.zeros(len(waiting), np.int64)
        for attr, hidden, as_float in self.params:
            kind = np.float64 if as_float else np.int64
            theirs = events[attr][rows].astype(kind)
            mine = waiting["c"][hidden].astype(kind)
            values, ids = np.unique(np.concatenate([theirs, mine]), return_inverse=True)
            ids = ids.reshape(-1)
            if as_float:  # NaN equals nothing: a group of its own for each
                ids = np.where(np.isnan(np.concatenate([theirs, mine])),
                               len(values) + np.arange(len(ids)), ids)
            width = len(values) + len(ids)
            row_group = row_group * width + ids[:len(rows)]
            own_group = own_group * width + ids[len(rows):]
            _, dense = np.unique(np.concatenate([row_group, own_group]), return_inverse=True)
            row_group, own_group = dense[:len(rows)], dense[len(rows):]
        times = distinct(np.concatenate([events["ts"][rows], start, end]))
        ranks = len(times) + 1
        keys = np.sort(row_group * ranks + np.searchsorted(times, events["ts"][rows]))
        first = np.searchsorted(keys, own_group * ranks + np.searchsorted(times, start),
                                side="right")
        past = np.searchsorted(keys, own_group * ranks + np.searchsorted(times, end),
                               side="right")
        return past > first


def _literal(constraint: Constraint) -> Any:
    """The value a literal constraint compares with (a text's code)."""
    value = constraint.value
    return string_code(value) if isinstance(value, str) else value


def _param_kind(rule: Rule, registry: TypeRegistry, name: str, floats: set[str]) -> str:
    """The ``define`` type that carries parameter ``name`` without loss."""
    if name in floats:
        return "double"
    element = rule.chain[rule.binder(name)]
    attr = next(c.attr for c in element.constraints if c.value == Param(name))
    return "string" if attr in registry[element.type].strings else "int"


def _attr_kind(registry: TypeRegistry, pattern: Pattern, attr: str) -> str:
    """The ``define`` type that carries ``attr`` of every type ``pattern`` matches."""
    kinds = {dict(registry[t].fields)[attr].kind for t in pattern.types}
    if any(attr in registry[t].strings for t in pattern.types):
        return "string"
    return "double" if "f" in kinds else "int"


_PARTITION = "$partition"
"""The hidden attribute carrying the terminator's partition value (``partition by``)."""
