"""Consumption (``consuming a, b``): events a match used leave the rule's state.

The semantics is in :mod:`~specula.detectors.rules.ast`: the events chosen for the
consumed elements of a composite event are gone for the rule's later evaluations, from
the next time stamp on (terminators of one time stamp are evaluated together).

How it runs, the same for every engine: :class:`Consumer` keeps the rule's *history*,
the events of the types it reads no older than its horizon (the farthest back any
element, aggregate or negation reaches from a terminator), and cuts each batch after
every time stamp that holds a terminator, so that one engine call evaluates the
terminators of one time stamp at most. The events the kept matches consumed wait until
the engines have seen a later time stamp; then they are removed from the history, and
every engine is reset to its empty state and replays the history (the matches of that
replay are old and dropped). The engines' state is then exactly what it would be had the
consumed events never arrived. A replay costs the history's events once per time stamp
whose matches consume something: consumption is for rules whose horizon holds few
events, as TESLA's are.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from specula.detectors.rules.ast import Aggregate, Negation, Rule
from specula.detectors.rules.engine import Matches, order_key
from specula.events import TypeRegistry, conform

__all__ = ["Consumer", "horizon"]

_NO_TS = -(2**63)


def horizon(rule: Rule, ticks_per_second: float | None) -> int:
    """How far back, in ticks, a plain rule's match reaches from its terminator: the
    steps' windows added up (capped by the pattern window), and the aggregates' and
    negations' windows beyond their anchors."""
    reach = [0]
    for step in rule.steps:
        reach.append(reach[-1] + step.within.ticks(ticks_per_second))
    if rule.within is not None:
        cap = rule.within.ticks(ticks_per_second)
        reach = [min(r, cap) for r in reach]
    farthest = max(reach)
    reductions: tuple[Aggregate | Negation, ...] = (*rule.aggregates, *rule.negations)
    for reduction in reductions:
        if reduction.within is not None:
            farthest = max(farthest, reach[reduction.anchor]
                           + reduction.within.ticks(ticks_per_second))
    return int(farthest)


class Consumer:
    """The consumption of one rule run as plain ``expansions`` on ``engines``.

    Parameters
    ----------
    rule : Rule
        The rule as written (its ``consuming`` clause).
    expansions : sequence of Rule
        Its plain expansions; ``consuming`` of each names the expansion's elements.
    engines : sequence of Engine
        One per expansion, in their empty state.
    registry, ticks_per_second
        As the engines take them.
    """

    def __init__(self, rule: Rule, expansions: Sequence[Rule], engines: Sequence[Any],
                 registry: TypeRegistry, ticks_per_second: float | None) -> None:
        self.expansions = tuple(expansions)
        self.engines = tuple(engines)
        self._empty = [e.snapshot() for e in engines]
        self._inputs = np.array([registry.id(t) for t in rule.input_types], np.int64)
        self._terminators = np.array(sorted({registry.id(t) for r in expansions
                                             for t in r.terminator.types}), np.int64)
        self.dtype = registry.dtype(rule.input_types)
        self.horizon = max(horizon(r, ticks_per_second) for r in expansions)
        self._history = np.zeros(0, self.dtype)
        self._pending = np.zeros(0, np.int64)  # order keys waiting for a later time stamp
        self._pending_ts = _NO_TS
        self._newest = _NO_TS
        self.replays = 0

    # ------------------------------------------------------------------- batches

    def relevant(self, events: np.ndarray) -> np.ndarray:
        """Indices of the events of types the rule reads."""
        return np.flatnonzero(np.isin(events["type"], self._inputs))

    def segments(self, events: np.ndarray) -> Iterator[tuple[int, int]]:
        """``(start, stop)`` of the parts of a batch of relevant events: each ends after a
        time stamp that holds a terminator, or that matches still wait on."""
        ts = events["ts"]
        cut = np.isin(ts, ts[np.isin(events["type"], self._terminators)])
        cut |= ts == self._pending_ts
        ends = np.flatnonzero(cut[:-1] & (ts[1:] != ts[:-1])) + 1
        bounds = [0, *ends.tolist(), len(events)]
        for start, stop in itertools.pairwise(bounds):
            if stop > start:
                yield start, stop

    def before(self, part: np.ndarray) -> None:
        """Called before the engines process ``part``: apply what waits once ``part``
        goes past its time stamp, and keep ``part`` in the history."""
        if len(self._pending) and int(part["ts"][0]) > self._pending_ts:
            self._apply()
        if part.dtype != self.dtype:
            part = conform(part, self.dtype, drop=True)
        self._history = np.concatenate([self._history, part])
        self._newest = max(self._newest, int(part["ts"][-1]))

    def after(self, found: Sequence[Matches], kept: Sequence[np.ndarray]) -> None:
        """Called with what the engines found for a part and the matches composed into
        events: remember the events those consumed, and apply them once the engines
        have seen a later time stamp."""
        keys = [order_key(m.elements[j][k]) for m, k, rule in
                zip(found, kept, self.expansions, strict=True) if len(k)
                for j in rule.consuming]
        if keys:
            ts = max(int(m.elements[0]["ts"][k].max()) for m, k in zip(found, kept,
                                                                       strict=True) if len(k))
            self._pending = np.concatenate([self._pending, *keys])
            self._pending_ts = max(self._pending_ts, ts)
        if len(self._pending) and self._newest > self._pending_ts:
            self._apply()
        self._prune()

    def _apply(self) -> None:
        """Remove the waiting events from the history and rebuild every engine from it."""
        gone = np.isin(order_key(self._history), self._pending)
        self._pending = self._pending[:0]
        self._pending_ts = _NO_TS
        if not gone.any():
            return
        self._history = self._history[~gone]
        self.replays += 1
        for engine, empty in zip(self.engines, self._empty, strict=True):
            engine.restore(empty)
            if len(self._history):
                engine.process(self._history)

    def _prune(self) -> None:
        """Forget history no future terminator can reach."""
        if len(self._history) and self._newest != _NO_TS:
            k = int(np.searchsorted(self._history["ts"], self._newest - self.horizon, "left"))
            if k:
                self._history = self._history[k:]

    # ----------------------------------------------------------------- snapshots

    def snapshot(self) -> bytes:
        """The history and what waits, as bytes (equal states, equal bytes)."""
        header = np.array([self._pending_ts, self._newest, len(self._pending),
                           len(self._history)], np.int64)
        return b"".join([header.tobytes(), self._pending.tobytes(),
                         self._history.tobytes()])

    def restore(self, state: bytes) -> None:
        """Return to a state produced by :meth:`snapshot`."""
        header = np.frombuffer(state, np.int64, 4)
        n_pending, n_history = int(header[2]), int(header[3])
        self._pending_ts, self._newest = int(header[0]), int(header[1])
        self._pending = np.frombuffer(state, np.int64, n_pending, 32).copy()
        self._history = np.frombuffer(state, self.dtype, n_history,
                                      32 + 8 * n_pending).copy()

