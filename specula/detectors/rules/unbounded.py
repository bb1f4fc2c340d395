"""Unbounded closures (``B()+``, ``B()*``, ``B(){n,}``): how long they must be allowed
to grow.

An unbounded closure means what a bounded one means (:mod:`~specula.detectors.rules.expand`)
with no upper bound on its length; its items lie in its window, so a match of length
``k`` needs ``k`` events of the closure's type within the rule's reach of its
terminator. :class:`Growth` keeps the events of the rule's types back to its horizon and
says, before each batch, the most events of the closure's type any terminator of the
batch can see; the union then runs the expansions up to that length, starting the new
ones on the kept history (so they hold what they would have held from the start: no
earlier terminator could have had a longer match).
"""

from __future__ import annotations

import numpy as np

from specula.detectors.rules.ast import Rule
from specula.detectors.rules.consumption import horizon
from specula.events import TypeRegistry, conform

__all__ = ["Growth"]


class Growth:
    """The history and the length bound of a rule's unbounded closure.

    Parameters
    ----------
    rule : Rule
        A rule whose chain element ``rule.unbounded()`` is an unbounded closure.
    registry, ticks_per_second
        As the engines take them.
    """

    def __init__(self, rule: Rule, registry: TypeRegistry,
                 ticks_per_second: float | None) -> None:
        element = rule.unbounded()
        assert element is not None
        self._types = np.array([registry.id(t) for t in rule.chain[element].types], np.int64)
        self._inputs = np.array([registry.id(t) for t in rule.input_types], np.int64)
        span = sum(s.within.ticks(ticks_per_second) for s in rule.steps[:element])
        if rule.within is not None:
            span = min(span, rule.within.ticks(ticks_per_second))
        self.span = int(span)  # a terminator's items lie at most this far back
        self.horizon = horizon(rule, ticks_per_second)
        self.dtype = registry.dtype(rule.input_types)
        self.history = np.zeros(0, self.dtype)

    def needed(self, events: np.ndarray) -> int:
        """The most events of the closure's type in the span before (and at) any event
        of ``events``, counting the history."""
        if not len(events):
            return 0
        mine = lambda rows: rows["ts"][np.isin(rows["type"], self._types)]  # noqa: E731
        ts = np.concatenate([mine(self.history), mine(events)])
        ends = events["ts"]
        counts = (np.searchsorted(ts, ends, "right")
                  - np.searchsorted(ts, ends - self.span, "left"))
        return int(counts.max())

    def add(self, events: np.ndarray) -> None:
        """Keep the batch's events of the rule's types; forget what no future terminator
        can reach."""
        rows = events[np.isin(events["type"], self._inputs)]
        if len(rows):
            if rows.dtype != self.dtype:
                rows = conform(rows, self.dtype, drop=True)
            self.history = np.concatenate([self.history, rows])
        if len(self.history):
            newest = int(self.history["ts"][-1])
            k = int(np.searchsorted(self.history["ts"], newest - self.horizon, "left"))
            self.history = self.history[k:]

    def snapshot(self) -> bytes:
        return np.int64(len(self.history)).tobytes() + self.history.tobytes()

    def restore(self, state: bytes) -> None:
        n = int(np.frombuffer(state, np.int64, 1)[0])
        self.history = np.frombuffer(state, self.dtype, n, 8).copy()
