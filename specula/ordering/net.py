"""Net output of a producer: its message stream with retractions and updates resolved."""

from __future__ import annotations

import numpy as np

from specula import events as ev
from specula.ordering.unit import same_event


class NetOutput:
    """Apply a stream of generated events, updates and counter messages; keep the net events.

    This is what a sink sees: an event is live from its emission until a counter message
    revokes it (``RETRACTION``: every event of that producer with ``seq >=`` the message's
    counter; ``REVOKE``: that one event) or an update with a different content replaces
    it. An update equal to the live event changes nothing, not even its emission time, so
    the detection latency of an event is measured from the first emission of its final
    version.

    Batches are kept as they come; the live set maps ``(producer, seq)`` to a row of a
    kept batch and its first emission time.
    """

    def __init__(self, dtype: np.dtype) -> None:
        self.dtype = dtype
        self._chunks: list[np.ndarray] = []
        self._times: list[int] = []  # when each chunk was applied
        self._live: dict[int, dict[int, tuple[int, int, int]]] = {}
        self.applied = 0

    def apply(self, batch: np.ndarray, now: int) -> None:
        """Apply ``batch`` (in order) as received at virtual or wall time ``now``."""
        if not len(batch):
            return
        ci = len(self._chunks)
        self._chunks.append(batch)
        self._times.append(now)
        self.applied += len(batch)
        producers = batch["producer"]
        seqs = batch["seq"].tolist()
        if not batch["flags"].any() and producers[0] == producers[-1] and (
                producers == producers[0]).all():
            live = self._live.setdefault(int(producers[0]), {})
            live.update(zip(seqs, ((ci, i, now) for i in range(len(seqs))), strict=True))
            return
        flags = batch["flags"].tolist()
        for i, (p, s, f) in enumerate(zip(producers.tolist(), seqs, flags, strict=True)):
            live = self._live.setdefault(p, {})
            if f & ev.RETRACTION:
                for gone in [x for x in live if x >= s]:
                    del live[gone]
                continue
            if f & ev.REVOKE:
                live.pop(s, None)
                continue
            held = live.get(s)
            if held is not None and f & ev.UPDATE and same_event(
                    self._chunks[held[0]][held[1]], batch[i]):
                continue
            live[s] = (ci, i, now)

    def absorb(self, other: NetOutput) -> None:
        """Take over the live events of another producer's (or instance's) NetOutput."""
        base = len(self._chunks)
        self._chunks.extend(other._chunks)
        self._times.extend(other._times)
        for producer, events in other._live.items():
            mine = self._live.setdefault(producer, {})
            for s, (c, r, t) in events.items():
                mine[s] = (c + base, r, t)
        self.applied += other.applied

    @property
    def batches(self) -> int:
        """Batches applied so far."""
        return len(self._chunks)

    def log(self, start: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What was applied from the ``start``-th batch on, to apply again elsewhere
        (:meth:`reapply`): the rows, each batch's length and each batch's time."""
        chunks = self._chunks[start:]
        rows = (ev.concat(chunks, self.dtype) if chunks else np.empty(0, self.dtype))
        return (rows, np.array([len(c) for c in chunks], np.int64),
                np.array(self._times[start:], np.int64))

    def reapply(self, rows: np.ndarray, lengths: np.ndarray, times: np.ndarray) -> None:
        """Apply again the batches :meth:`log` returned, in order, at their times."""
        ends = np.cumsum(lengths).tolist()
        for start, end, now in zip([0, *ends[:-1]], ends, times.tolist(), strict=True):
            self.apply(rows[start:end], now)

    def __len__(self) -> int:
        return sum(len(e) for e in self._live.values())

    def emissions(self) -> np.ndarray:
        """Everything received, in the order applied: events, updates and retractions."""
        if not self._chunks:
            return np.empty(0, self.dtype)
        return ev.concat([c if c.dtype == self.dtype else ev.conform(c, self.dtype, drop=True)
                          for c in self._chunks], self.dtype)

    def _gather(self) -> tuple[np.ndarray, np.ndarray]:
        refs = [ref for e in self._live.values() for ref in e.values()]
        if not refs:
            return np.empty(0, self.dtype), np.empty(0, np.int64)
        chunk = np.array([c for c, _, _ in refs])
        row = np.array([r for _, r, _ in refs])
        times = np.array([t for _, _, t in refs], np.int64)
        parts, order = [], []
        for c in np.unique(chunk).tolist():
            sel = np.flatnonzero(chunk == c)
            part = np.take(self._chunks[c], row[sel])
            if part.dtype != self.dtype:
                part = ev.conform(part, self.dtype, drop=True)
            parts.append(part)
            order.append(sel)
        rows = np.concatenate(parts)
        return rows, times[np.concatenate(order)]

    def net(self) -> np.ndarray:
        """The live events in order of (ts, producer, seq); arrival fields zeroed."""
        rows, _ = self._gather()
        rows = rows.copy()
        for f in ("flags", "ats", "kplus", "origin"):
            rows[f] = 0
        return rows[np.lexsort((rows["seq"], rows["producer"], rows["ts"]))]

    def timeline(self) -> tuple[np.ndarray, np.ndarray]:
        """(first emission time, latency) of every live event, in emission order."""
        rows, times = self._gather()
        order = np.argsort(times, kind="stable")
        return times[order], (times - rows["origin"])[order]

    def latencies(self) -> np.ndarray:
        """For every live event: first emission of its final version minus its origin."""
        rows, times = self._gather()
        return times - rows["origin"]
