"""Per-second sums behind the DEBS 2013 aggregates, kept for sliding windows.

Queries 1-3 report, once per second, sums over the last 1, 5, 10 or 20 minutes and over
the whole game. :class:`SecondSums` keeps what each second added as a small sparse
chunk (rows ``(origin second, slot, value...)``), so that a window's sums are the rows
of its seconds, and folds the chunks no sliding window reaches any more into a dense
whole-game base.

Closed chunks and the base are immutable ``bytes``. :class:`_Aggregate` (the base class
of the query detectors) snapshots them by reference: a snapshot costs the pickle of the
small mutable state plus a tuple of references, not a copy of minutes of history, which
matters because a speculative ordering unit snapshots its detector at every step.
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np

from specula.detectors import Detector


class SecondSums:
    """Sums of ``m`` values per slot (a dense vector of slots), per second of the stream.

    Parameters
    ----------
    m : int
        Values per row (e.g. 2: time and distance).
    keep_s : int
        The longest sliding window, s: chunks whose every row is older than that are
        folded into the whole-game base.
    """

    def __init__(self, m: int, keep_s: int) -> None:
        self.m = m
        self.keep_s = keep_s
        self.base = b""  # whole-game sums of the folded chunks, float64 (n, m), C order
        self.chunks: tuple[bytes, ...] = ()  # one per closed second: rows (2 + m) float64
        self.newest: tuple[int, ...] = ()  # the newest origin second of each chunk
        self.open = np.zeros((0, 2 + m))  # rows added since the last close, aggregated

    def add(self, rows: np.ndarray) -> None:
        """Add rows ``(origin second, slot, value...)`` to the open second."""
        if len(rows):
            self.open = _aggregate(np.concatenate([self.open, rows]))

    def close(self, now_s: int) -> np.ndarray:
        """Close the open second (the report at the start of second ``now_s`` follows) and
        return its rows; fold what no sliding window reaches any more into the base."""
        rows, self.open = self.open, np.zeros((0, 2 + self.m))
        if len(rows):
            self.chunks += (rows.tobytes(),)
            self.newest += (int(rows[:, 0].max()),)
        old = 0
        while old < len(self.newest) and self.newest[old] < now_s - self.keep_s - 1:
            old += 1
        if old:
            folded = np.concatenate([self._rows(c) for c in self.chunks[:old]])
            n = max(self.slots(), int(folded[:, 1].max()) + 1)
            base = self._base(n)
            for j in range(self.m):
                base[:, j] += np.bincount(folded[:, 1].astype(np.int64),
                                          weights=folded[:, 2 + j], minlength=n)
            self.base = base.tobytes()
            self.chunks, self.newest = self.chunks[old:], self.newest[old:]
        return rows

    def slots(self) -> int:
        """Number of slots of the base."""
        return len(self.base) // (8 * self.m)

    def rows(self, since_s: int | None = None) -> np.ndarray:
        """Rows of the closed chunks (all, or those that may hold a second >= ``since_s``)."""
        start = 0
        if since_s is not None:
            while start < len(self.newest) and self.newest[start] < since_s:
                start += 1
        parts = [self._rows(c) for c in self.chunks[start:]]
        return np.concatenate(parts) if parts else np.zeros((0, 2 + self.m))

    def sums(self, n: int, end_s: int, windows_s: tuple[int, ...]) -> list[np.ndarray]:
        """Dense sums, ``(max(n, slots), m)`` per window, of the seconds ``[end_s - w,
        end_s)`` (``w`` = 0: the whole game, base included) of the closed chunks."""
        n = max(n, self.slots())
        longest = max((w for w in windows_s if w), default=0)
        rows = self.rows(None if 0 in windows_s else end_s - longest)
        slot = rows[:, 1].astype(np.int64)
        out = []
        for w in windows_s:
            sel = slice(None) if w == 0 else (rows[:, 0] >= end_s - w) & (rows[:, 0] < end_s)
            s = np.zeros((n, self.m)) if w else self._base(n)
            for j in range(self.m):
                s[:, j] += np.bincount(slot[sel], weights=rows[sel, 2 + j], minlength=n)[:n]
            out.append(s)
        return out

    def _base(self, n: int) -> np.ndarray:
        have = np.frombuffer(self.base, np.float64).reshape(-1, self.m)
        base = np.zeros((max(n, len(have)), self.m))
        base[:len(have)] = have
        return base

    def _rows(self, chunk: bytes) -> np.ndarray:
        return np.frombuffer(chunk, np.float64).reshape(-1, 2 + self.m)

    def frozen(self) -> tuple:
        """The state as immutable parts (the open rows pickled, the rest by reference)."""
        return (self.m, self.keep_s, self.base, self.chunks, self.newest,
                self.open.tobytes())

    @classmethod
    def thawed(cls, frozen: tuple) -> SecondSums:
        """The sums a :meth:`frozen` tuple stands for."""
        m, keep_s, base, chunks, newest, open_ = frozen
        out = cls(m, keep_s)
        out.base, out.chunks, out.newest = base, chunks, newest
        out.open = np.frombuffer(open_, np.float64).reshape(-1, 2 + m).copy()
        return out


def _aggregate(rows: np.ndarray) -> np.ndarray:
    """One row per (origin second, slot), values summed; sorted by second and slot."""
    if len(rows) < 2:
        return rows
    order = np.lexsort((rows[:, 1], rows[:, 0]))
    rows = rows[order]
    new = np.ones(len(rows), bool)
    new[1:] = (rows[1:, 0] != rows[:-1, 0]) | (rows[1:, 1] != rows[:-1, 1])
    starts = np.flatnonzero(new)
    out = rows[starts].copy()
    out[:, 2:] = np.add.reduceat(rows[:, 2:], starts, axis=0)
    return out


class _Aggregate(Detector):
    """A detector whose history lives in ``self.sums`` (a :class:`SecondSums`): its
    snapshot pickles the other attributes and keeps the history's immutable parts by
    reference. Two snapshots compare equal exactly when both parts do."""

    sums: SecondSums

    def snapshot(self) -> Any:
        rest = {k: v for k, v in self.__dict__.items() if k != "sums"}
        return pickle.dumps(rest, protocol=pickle.HIGHEST_PROTOCOL), self.sums.frozen()

    def restore(self, state: Any) -> None:
        rest, frozen = state
        self.__dict__.clear()
        self.__dict__.update(pickle.loads(rest))
        self.sums = SecondSums.thawed(frozen)
