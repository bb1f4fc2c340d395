"""The window-based operator eSPICE sheds for: windows opened by events, a pattern per window.

eSPICE (sec. 2) assumes a window operator that splits the input into windows, possibly
overlapping, and a black-box process function that matches a pattern in each window and
reveals the complex events it detects. This module is that operator, as the paper's queries
need it:

- :class:`WindowAssigner` opens a window at every event of an opener type (soccer Q1: a
  striker's possession; stock Q2/Q3: a leading symbol's quote) or every ``slide`` events
  (stock Q4), of ``size`` events (count-based) or time-stamp ticks (time-based). A window is
  a contiguous stretch of the stream starting at its opener, and an event's *position* in
  it counts the events that arrived in it before, dropped ones included (the load shedder
  sees arrivals, and UT is learned on the same positions).
- :class:`Sequence` and :class:`AnyOf` are the patterns: ``seq(T1; ...; Tk)`` (Q3, and Q4
  with repeated types) and ``any(n, T1, ..., Tm)`` of ``n`` distinct types (Q1, Q2), each
  under the ``first`` or ``last`` selection policy with skip-till-next-match, one complex
  event per window at most (the paper's set-up: "the number of complex events per window
  is one").
- :class:`WindowOperator` runs them over time-ordered batches, optionally with a shedder
  deciding per (event, window) pair, and returns each closed window with its content and
  the positions of its complex event's constituents: what trains UT
  (:meth:`ClosedWindows.observe_into`).

The operator is a plain class rather than a :class:`~specula.detectors.Detector`: its output
for training is per (event, window) pair, not an event stream.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from specula.shedding._espice_tables import UtilityModel, UtilityTable

__all__ = ["AnyOf", "ClosedWindows", "PairShedder", "Sequence", "WindowAssigner",
           "WindowOperator", "WindowPairs"]

SELECTIONS = ("first", "last")


@dataclass(frozen=True)
class WindowPairs:
    """The (event, window) pairs of one batch, grouped by window, in position order.

    ``event`` indexes the batch; ``window`` is the window's id (its opener's index in the
    whole stream); ``position`` the event's position in it; ``expected`` the window size
    the shedder should assume (count-based: the size; time-based: the assigner's estimate).
    """

    event: np.ndarray
    window: np.ndarray
    position: np.ndarray
    expected: np.ndarray


class WindowAssigner:
    """Opens windows and tells, for each arriving event, the windows it falls in.

    Parameters
    ----------
    size : int
        ``ws``: events (``unit="count"``) or time-stamp ticks (``unit="time"``); a window
        opened at time ``t`` holds the events with ``ts < t + size``.
    openers : sequence of int, optional
        Event types that open a window (the opener is position 0 of its window).
    slide : int, optional
        Instead of openers: a window opens at every ``slide``-th event of the stream.
    unit : {"count", "time"}
    expected_size : int, optional
        Time-based windows: the window size in events to assume before any window has
        closed (the reference size N, say). Afterwards an event's estimate is the mean
        size of the windows closed before it arrived (the paper leaves the prediction
        open, sec. 3.6).
    """

    def __init__(self, size: int, *, openers: tuple[int, ...] | list[int] | None = None,
                 slide: int | None = None, unit: str = "count",
                 expected_size: int | None = None) -> None:
        if (openers is None) == (slide is None):
            raise ValueError("give exactly one of openers and slide")
        if unit not in ("count", "time"):
            raise ValueError(f"unit must be 'count' or 'time', got {unit!r}")
        if size < 1 or (slide is not None and slide < 1):
            raise ValueError("size and slide must be >= 1")
        self.size = int(size)
        self.openers = None if openers is None else np.asarray(sorted(openers), np.int64)
        self.slide = slide
        self.unit = unit
        self.expected_size = int(expected_size if expected_size is not None else
                                 (size if unit == "count" else 1))
        self.seen = 0  # events assigned so far: the stream index of the next one
        self.open_at = np.zeros(0, np.int64)  # stream index of each open window's opener
        self.open_ts = np.zeros(0, np.int64)
        self.closed_sizes = 0  # sum and count of closed windows' sizes: the estimate
        self.closed_count = 0

    def estimate(self) -> int:
        """The window size in events the shedder assumes for an open window."""
        if self.unit == "count":
            return self.size
        return int(_mean_size(np.int64(self.closed_sizes), np.int64(self.closed_count),
                              self.expected_size))

    def openings(self, types: np.ndarray, index: np.ndarray) -> np.ndarray:
        """Which events (their ``types`` and their ``index`` in the stream) open a window."""
        if self.openers is not None:
            return np.isin(types, self.openers)
        assert self.slide is not None  # __init__ takes exactly one of openers and slide
        return index % self.slide == 0

    def assign(self, ts: np.ndarray, types: np.ndarray) -> tuple[WindowPairs, np.ndarray,
                                                                  np.ndarray]:
        """Assign a time-ordered batch to windows.

        Returns the pairs, and the ids and sizes (in events) of the windows that closed:
        a count-based window when it is full, a time-based one at the first event at or
        past its end (or at :meth:`close_all`).
        """
        ts = np.asarray(ts, dtype=np.int64)
        types = np.asarray(types, dtype=np.int64)
        n = len(ts)
        base = self.seen
        index = base + np.arange(n, dtype=np.int64)
        opens = np.flatnonzero(self.openings(types, index))
        open_at = np.concatenate([self.open_at, base + opens])
        open_ts = np.concatenate([self.open_ts, ts[opens]])
        start = np.maximum(open_at - base, 0)
        if self.unit == "count":
            end = np.minimum(open_at + self.size - base, n)
            closed = open_at + self.size <= base + n
        else:
            # The first event at or past the window's end closes it; the running maximum
            # keeps the search valid should the batch not be perfectly ordered.
            end = np.searchsorted(np.maximum.accumulate(ts) if n else ts,
                                  open_ts + self.size, side="left")
            end = np.maximum(end, start)
            closed = end < n
        lengths = end - start
        rows = np.repeat(np.arange(len(open_at)), lengths)
        offsets = np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        event = start[rows] + offsets
        closed_sizes = end[closed] + base - open_at[closed]
        if self.unit == "count":
            expected = np.full(len(event), self.size, np.int64)
        else:
            # The estimate an event sees is the mean size of the windows closed before it
            # (a window closes at the first event past its end, ``end``), so that it does
            # not depend on where the stream is cut into batches.
            before = np.searchsorted(end[closed], event, side="right")
            sums = np.r_[0, np.cumsum(closed_sizes)]
            expected = _mean_size(self.closed_sizes + sums[before],
                                  self.closed_count + before, self.expected_size)
        pairs = WindowPairs(event=event, window=open_at[rows],
                            position=base + event - open_at[rows], expected=expected)
        self.closed_sizes += int(closed_sizes.sum())
        self.closed_count += int(closed.sum())
        self.open_at, self.open_ts = open_at[~closed], open_ts[~closed]
        self.seen = base + n
        return pairs, open_at[closed], closed_sizes

    def close_all(self) -> tuple[np.ndarray, np.ndarray]:
        """End of stream: close every open window; returns their ids and sizes."""
        ids, sizes = self.open_at, self.seen - self.open_at
        self.open_at = self.open_ts = np.zeros(0, np.int64)
        return ids, sizes


def _mean_size(total: npt.ArrayLike, count: npt.ArrayLike, default: int) -> np.ndarray:
    """Mean window size rounded half up (exact, in integers), ``default`` before any."""
    count = np.asarray(count, np.int64)
    mean = (2 * np.asarray(total, np.int64) + count) // np.maximum(2 * count, 1)
    return np.where(count > 0, np.maximum(mean, 1), default).astype(np.int64)


#: How a pattern names event types: a type's index (the operator's input) or its name
#: (a :class:`~specula.shedding.window_detector.WindowDetector`'s argument).
T = TypeVar("T", bound=Hashable)
U = TypeVar("U", bound=Hashable)


@dataclass(frozen=True)
class Sequence(Generic[T]):
    """``seq(T1; T2; ...; Tk)`` within a window, skip-till-next-match, one match per window.

    ``first`` takes the earliest T1 after the opener, then the earliest T2 after it, and so
    on; ``last`` takes the latest Tk, then the latest T(k-1) before it, and so on. With
    ``with_opener`` the opener (position 0) is the pattern's first element and must be kept.
    """

    types: tuple[T, ...]
    selection: str = "first"
    with_opener: bool = False

    def __post_init__(self) -> None:
        _check_selection(self.selection)
        if not self.types:
            raise ValueError("a sequence needs at least one type")

    def relabel(self, label: Mapping[T, U]) -> Sequence[U]:
        """The same pattern with each type ``t`` named ``label[t]``."""
        return Sequence(tuple(label[t] for t in self.types), self.selection, self.with_opener)

    def repetitions(self) -> dict[T, int]:
        """How often each type occurs among the pattern's elements (the opener aside)."""
        return dict(Counter(self.types))

    def match(self: Sequence[int], types: np.ndarray, positions: np.ndarray
              ) -> np.ndarray | None:
        """Indices (into ``types``) of the constituents, or None; input in position order
        (of a pattern that names types by index, as ``types`` does)."""
        body = np.flatnonzero(positions > 0)
        chosen: list[int] = []
        if self.selection == "first":
            prev = -1
            for t in self.types:
                hits = body[types[body] == t]
                j = np.searchsorted(hits, prev, side="right")
                if j == len(hits):
                    return None
                prev = int(hits[j])
                chosen.append(prev)
        else:
            nxt = len(types)
            for t in reversed(self.types):
                hits = body[types[body] == t]
                j = np.searchsorted(hits, nxt, side="left") - 1
                if j < 0:
                    return None
                nxt = int(hits[j])
                chosen.append(nxt)
            chosen.reverse()
        return _with_opener(self.with_opener, positions, chosen)


@dataclass(frozen=True)
class AnyOf(Generic[T]):
    """``any(n, T1, ..., Tm)``: ``n`` events of distinct types among ``types`` in a window.

    Soccer Q1 (``seq(STR; any(n, DF1, ..., DFn))``, the striker's event opens the window and
    is its first element: ``with_opener=True``) and stock Q2. ``first`` takes the first event
    of each type and keeps the ``n`` earliest of those; ``last`` the last event of each type
    and the ``n`` latest: the events greedy first/last selection picks when each type may
    be used once.

    ``per_opener`` narrows the types that count to those of the window's opener: pairs
    ``(opener type, types)``, e.g. Q1's "defenders of the *other* team than the striker
    who opened the window". A window whose opener type is not listed counts all ``types``.
    It needs ``with_opener`` (the opener is the window's first element, and a window
    whose opener was dropped matches nothing).
    """

    n: int
    types: tuple[T, ...]
    selection: str = "first"
    with_opener: bool = False
    per_opener: tuple[tuple[T, tuple[T, ...]], ...] = ()

    def __post_init__(self) -> None:
        _check_selection(self.selection)
        if not 1 <= self.n <= len(set(self.types)):
            raise ValueError(f"any(n, ...) needs 1 <= n <= {len(set(self.types))} distinct "
                             f"types, got n={self.n}")
        if self.per_opener and not self.with_opener:
            raise ValueError("per_opener needs with_opener=True: the opener decides the types")
        for opener, types in self.per_opener:
            if not set(types) <= set(self.types) or len(set(types)) < self.n:
                raise ValueError(f"per_opener: the types of opener {opener!r} must be at "
                                 f"least n={self.n} distinct ones among types")

    def relabel(self, label: Mapping[T, U]) -> AnyOf[U]:
        """The same pattern with each type ``t`` named ``label[t]``."""
        per = tuple((label[o], tuple(label[t] for t in ts)) for o, ts in self.per_opener)
        return AnyOf(self.n, tuple(label[t] for t in self.types), self.selection,
                     self.with_opener, per)

    def repetitions(self) -> dict[T, int]:
        """How often each type occurs among the pattern's elements (the opener aside): once
        for every type listed."""
        return dict.fromkeys(self.types, 1)

    def match(self: AnyOf[int], types: np.ndarray, positions: np.ndarray) -> np.ndarray | None:
        """Indices (into ``types``) of the constituents, or None; input in position order
        (of a pattern that names types by index, as ``types`` does)."""
        allowed: tuple[int, ...] = self.types
        if self.per_opener:
            if len(positions) == 0 or positions[0] != 0:
                return None
            allowed = dict(self.per_opener).get(int(types[0]), self.types)
        cand = np.flatnonzero((positions > 0) & np.isin(types, allowed))
        if self.selection == "first":
            _, first = np.unique(types[cand], return_index=True)
            picks = np.sort(cand[first])[: self.n]
        else:
            _, last = np.unique(types[cand][::-1], return_index=True)
            picks = np.sort(cand[len(cand) - 1 - last])[-self.n:]
        if len(picks) < self.n:
            return None
        return _with_opener(self.with_opener, positions, [int(i) for i in picks])


def _check_selection(selection: str) -> None:
    if selection not in SELECTIONS:
        raise ValueError(f"selection must be one of {SELECTIONS}, got {selection!r}")


def _with_opener(with_opener: bool, positions: np.ndarray,
                 chosen: list[int]) -> np.ndarray | None:
    """Prefix the opener (position 0) when the pattern starts with it; None if it was dropped."""
    if not with_opener:
        return np.asarray(chosen, np.int64)
    if len(positions) == 0 or positions[0] != 0:
        return None
    return np.asarray([0, *chosen], np.int64)


class PairShedder(Protocol):
    """What the operator asks a shedder: drop these (event, window) pairs? (True: drop)."""

    def drop_pairs(self, types: np.ndarray, positions: np.ndarray, expected: np.ndarray,
                   events: np.ndarray, windows: np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True)
class ClosedWindows:
    """Windows that closed, with every (event, window) pair they received.

    Pair arrays are grouped by window (``row`` indexes ``window``/``size``/``detected``), in
    position order. ``event`` is the stream index of the event, ``kept`` whether the shedder
    left it in this window, ``matched`` whether it is a constituent of the window's complex
    event.
    """

    window: np.ndarray
    size: np.ndarray
    detected: np.ndarray
    row: np.ndarray
    event: np.ndarray
    type: np.ndarray
    position: np.ndarray
    kept: np.ndarray
    matched: np.ndarray

    def complex_events(self) -> set[tuple[int, ...]]:
        """Each detected complex event as ``(window id, constituent stream indices...)``."""
        out = set()
        rows = self.row[self.matched]
        events = self.event[self.matched]
        for w in np.flatnonzero(self.detected):
            out.add((int(self.window[w]), *(int(e) for e in events[rows == w])))
        return out

    def whole(self) -> np.ndarray:
        """Per window: True when no pair of it was dropped."""
        out = np.ones(len(self.window), bool)
        out[self.row[~self.kept]] = False
        return out

    def observe_into(self, model: UtilityModel) -> UtilityTable | None:
        """Feed the windows received whole to a :class:`UtilityModel` (the new table if it
        retrained).

        A window with a dropped pair is left out: the dropped events could not take part
        in its complex event, and counting them as seen and not matched would lower the
        utility of the very cells being dropped, so that retraining under shedding would
        drop them ever more (and a window that lost its match would lower its kept cells
        too). The whole windows are a sample of the stream that shedding does not bias
        towards its own decisions.
        """
        whole = self.whole()
        pick = whole[self.row]
        return model.observe(self.type[pick], self.position[pick], self.size[self.row[pick]],
                             self.matched[pick], windows=int(whole.sum()))

    @staticmethod
    def concat(parts: list[ClosedWindows]) -> ClosedWindows:
        """One record of several, rows renumbered."""
        offsets = np.cumsum([0] + [len(p.window) for p in parts[:-1]])
        cat = {name: np.concatenate([getattr(p, name) for p in parts]) if parts else
               np.zeros(0, np.int64) for name in ClosedWindows.__dataclass_fields__}
        if parts:
            cat["row"] = np.concatenate([p.row + o for p, o in zip(parts, offsets, strict=True)])
        return ClosedWindows(**cat)


class WindowOperator:
    """Windows from a :class:`WindowAssigner`, a pattern matched in each when it closes.

    :meth:`push` takes a time-ordered batch (a structured array with ``ts`` and ``type``);
    with a ``shedder`` set, each (event, window) pair it decides to drop is left out of that
    window only (eSPICE, sec. 3.5: "an event might be dropped from one window while it is
    still there in other windows"). ``work`` counts the pairs processed, the operator's
    cost. :meth:`flush` closes what is still open.
    """

    def __init__(self, assigner: WindowAssigner, pattern: Sequence[int] | AnyOf[int],
                 shedder: PairShedder | None = None) -> None:
        self.assigner = assigner
        self.pattern = pattern
        self.shedder = shedder
        self.work = 0
        # Per open window id: chunks of (stream index, type, position, kept).
        self._content: dict[int, list[tuple[np.ndarray, ...]]] = {}

    def push(self, batch: np.ndarray) -> ClosedWindows:
        """Process a batch; returns the windows it closed."""
        types = np.asarray(batch["type"], dtype=np.int64)
        pairs, closed, sizes = self.assigner.assign(batch["ts"], types)
        base = self.assigner.seen - len(batch)
        pair_types = types[pairs.event]
        stream = base + pairs.event
        if self.shedder is None or len(pairs.event) == 0:
            kept = np.ones(len(pairs.event), bool)
        else:
            kept = ~np.asarray(self.shedder.drop_pairs(pair_types, pairs.position,
                                                       pairs.expected, stream, pairs.window),
                               dtype=bool)
        self.work += int(kept.sum())
        # Pairs come grouped by window: one chunk per window of this batch.
        cuts = np.flatnonzero(np.diff(pairs.window)) + 1
        for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, len(pairs.window)], strict=True):
            if hi > lo:
                self._content.setdefault(int(pairs.window[lo]), []).append(
                    (stream[lo:hi], pair_types[lo:hi], pairs.position[lo:hi], kept[lo:hi]))
        return self._close(closed, sizes)

    def flush(self) -> ClosedWindows:
        """End of stream: close and match every open window."""
        ids, sizes = self.assigner.close_all()
        return self._close(ids, sizes)

    def _close(self, ids: np.ndarray, sizes: np.ndarray) -> ClosedWindows:
        """Match the pattern in each window of ``ids`` on the events kept in it."""
        rows, parts, matches = [], [], []
        detected = np.zeros(len(ids), bool)
        for r, w in enumerate(ids):
            # A window always holds its opener, so it has at least one chunk.
            event, typ, pos, kept = (np.concatenate(c) for c in
                                     zip(*self._content.pop(int(w)), strict=True))
            matched = np.zeros(len(event), bool)
            keep_idx = np.flatnonzero(kept)
            hit = self.pattern.match(typ[keep_idx], pos[keep_idx])
            if hit is not None:
                matched[keep_idx[hit]] = True
                detected[r] = True
            rows.append(np.full(len(event), r, np.int64))
            parts.append((event, typ, pos, kept))
            matches.append(matched)
        empty = np.zeros(0, np.int64)
        event, typ, pos, kept = (np.concatenate(c) for c in zip(*parts, strict=True)) \
            if parts else (empty, empty, empty, np.zeros(0, bool))
        return ClosedWindows(window=np.asarray(ids, np.int64), size=np.asarray(sizes, np.int64),
                             detected=detected,
                             row=np.concatenate(rows) if rows else empty,
                             event=event, type=typ, position=pos, kept=kept,
                             matched=np.concatenate(matches) if matches else np.zeros(0, bool))
