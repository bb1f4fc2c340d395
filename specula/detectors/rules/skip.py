"""After-match skip (``skip to next``, ``skip past last event``, ``skip to first x``,
``skip to last x``): which matches a rule keeps, as FlinkCEP's ``AfterMatchSkipStrategy``.

The semantics is in :mod:`~specula.detectors.rules.ast`: the matches the rule has
without the clause, taken in ascending order of start (earliest event), then end (latest
event), then output order; each kept match discards the later starts up to a point.

How it runs, the same for every engine: the engines find every match (as for ``skip
none``); :class:`Skipper` holds the composites with their start, end and *pruning point*
(the position up to which a kept match discards starts: its start, its end, or the
earliest or latest event of the named element) until no match that starts earlier can
still come, that is until the stream has passed the start by the rule's reach; it then
walks them in start order, keeping those whose start no kept match discarded. The walk
keeps one position (the farthest pruning point so far), so the state between batches is
the held composites and that position.
"""

from __future__ import annotations

import numpy as np

from specula.detectors.rules.ast import ATTRIBUTE_TYPES, Rule
from specula.detectors.rules.engine import Matches, order_key
from specula.events import fields_of

__all__ = ["Skipper", "marks", "reach"]

_NO_TS = -(2**63)
_MARKS = [("start_ts", np.int64), ("start_key", np.int64), ("end_ts", np.int64),
          ("end_key", np.int64), ("prune_ts", np.int64), ("prune_key", np.int64),
          ("prunes", np.bool_)]


def reach(rule: Rule, ticks_per_second: float | None) -> int:
    """How far back, in ticks, a rule's match reaches from its terminator: the steps'
    windows added up (a closure's once: its items share its window), capped by the
    pattern window."""
    total = sum(step.within.ticks(ticks_per_second) for step in rule.steps)
    if rule.within is not None:
        total = min(total, rule.within.ticks(ticks_per_second))
    return int(total)


def marks(rule: Rule, matches: Matches, kept: np.ndarray) -> np.ndarray:
    """Start, end and pruning point of the ``kept`` matches of a plain expansion, whose
    ``skip`` names the expansion's element for ``to_first``/``to_last`` (or is ``none``
    where the rule's element chose no event)."""
    out = np.zeros(len(kept), _MARKS)
    ts = [m["ts"][kept] for m in matches.elements]
    keys = [order_key(m[kept]) for m in matches.elements]
    out["start_ts"], out["start_key"] = ts[0], keys[0]
    out["end_ts"], out["end_key"] = ts[0], keys[0]
    for t, k in zip(ts[1:], keys[1:], strict=True):
        earlier = (t < out["start_ts"]) | ((t == out["start_ts"]) & (k < out["start_key"]))
        out["start_ts"][earlier], out["start_key"][earlier] = t[earlier], k[earlier]
        later = (t > out["end_ts"]) | ((t == out["end_ts"]) & (k > out["end_key"]))
        out["end_ts"][later], out["end_key"][later] = t[later], k[later]
    strategy = rule.skip.strategy
    if strategy == "to_next":
        out["prune_ts"], out["prune_key"] = out["start_ts"], out["start_key"]
    elif strategy == "past_last_event":
        out["prune_ts"], out["prune_key"] = out["end_ts"], out["end_key"]
    elif rule.skip.element is not None:
        out["prune_ts"], out["prune_key"] = ts[rule.skip.element], keys[rule.skip.element]
    out["prunes"] = strategy != "none" and (strategy in ("to_next", "past_last_event")
                                            or rule.skip.element is not None)
    return out


class Skipper:
    """The after-match skip of one rule.

    Parameters
    ----------
    rule : Rule
        The rule as written (its ``skip`` clause and attributes).
    terminator_dtype : numpy.dtype
        The dtype of the composites' terminators.
    ticks_per_second : float or None
        Converts windows written with a unit.
    """

    def __init__(self, rule: Rule, terminator_dtype: np.dtype,
                 ticks_per_second: float | None) -> None:
        self.inclusive = rule.skip.strategy in ("to_next", "past_last_event")
        self.reach = reach(rule, ticks_per_second)
        self.attributes = [a for a, _ in rule.attributes]
        fields = [*_MARKS, ("order", np.int64),
                  *((f"t_{name}", terminator_dtype[name]) for name in fields_of(terminator_dtype)),
                  *((f"c_{a}", np.dtype(ATTRIBUTE_TYPES[k])) for a, k in rule.attributes)]
        self.dtype = np.dtype(fields)
        self.terminator_dtype = terminator_dtype
        self._held = np.zeros(0, self.dtype)
        self._bound = (_NO_TS, 0)  # the farthest pruning point of a kept match
        self._count = 0  # composites seen: their output order

    def hold(self, terminators: np.ndarray, columns: dict[str, np.ndarray],
             found: np.ndarray) -> None:
        """Hold composites (in output order) with their :func:`marks`."""
        rows = np.zeros(len(found), self.dtype)
        for name in fields_of(found.dtype):
            rows[name] = found[name]
        rows["order"] = np.arange(self._count, self._count + len(rows))
        self._count += len(rows)
        for name in fields_of(self.terminator_dtype):
            rows[f"t_{name}"] = terminators[name]
        for attr in self.attributes:
            rows[f"c_{attr}"] = columns[attr]
        self._held = np.concatenate([self._held, rows])

    def release(self, batch_ts: np.ndarray | None
                ) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]:
        """The held composites decided after a batch with time stamps ``batch_ts`` (all
        of them at the end of the stream, ``None``) that the strategy keeps: their
        terminators, columns and causes (the batch's first event past their start by the
        reach), in the order of the walk (start, end, output order): every match decided
        later starts later, so the order does not depend on how the stream is cut."""
        if batch_ts is None:
            ready = np.ones(len(self._held), bool)
        elif len(batch_ts):
            ready = self._held["start_ts"] < int(batch_ts[-1]) - self.reach
        else:
            ready = np.zeros(len(self._held), bool)
        decided, self._held = self._held[ready], self._held[~ready]
        walk = decided[np.lexsort((decided["order"], decided["end_key"], decided["end_ts"],
                                   decided["start_key"], decided["start_ts"]))]
        keep = np.zeros(len(walk), bool)
        for i, row in enumerate(walk):
            start = (int(row["start_ts"]), int(row["start_key"]))
            if start < self._bound or (self.inclusive and start == self._bound):
                continue
            keep[i] = True
            if row["prunes"]:
                self._bound = max(self._bound, (int(row["prune_ts"]), int(row["prune_key"])))
        kept = walk[keep]
        terminators = np.zeros(len(kept), self.terminator_dtype)
        for name in fields_of(self.terminator_dtype):
            terminators[name] = kept[f"t_{name}"]
        columns = {a: kept[f"c_{a}"].copy() for a in self.attributes}
        if batch_ts is None or not len(batch_ts):
            causes = np.zeros(len(kept), np.int64)
        else:  # the first event that decided them, never earlier than the one before
            first = np.searchsorted(batch_ts, kept["start_ts"] + self.reach, "right")
            causes = np.maximum.accumulate(np.minimum(first, len(batch_ts) - 1)
                                           ).astype(np.int64)
        return terminators, columns, causes

    def snapshot(self) -> bytes:
        """The held composites, the pruning point and the count, as bytes."""
        header = np.array([self._bound[0], self._bound[1], self._count, len(self._held)],
                          np.int64)
        return header.tobytes() + self._held.tobytes()

    def restore(self, state: bytes) -> None:
        """Return to a state produced by :meth:`snapshot`."""
        header = np.frombuffer(state, np.int64, 4)
        self._bound = (int(header[0]), int(header[1]))
        self._count = int(header[2])
        self._held = np.frombuffer(state, self.dtype, int(header[3]), 32).copy()

