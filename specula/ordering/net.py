"""Net output of a producer: its message stream with retractions and updates resolved."""

from __future__ import annotations

import numpy as np

from specula import events as ev
from specula.ordering.unit import same_event


class NetOutput:
    """Apply a stream of generated events, updates and counter messages; keep the net events.

    This is what a sink sees: an event is live from its emission until a counter message
    revokes it (``RETRACTION``: every event of that producer with ``seq >=`` the message's
    counter) or an update with a different content replaces it. An update equal to the
    live event changes nothing, not even its emission time, so the detection latency of
    an event is measured from the first emission of its final version.
    """

    def __init__(self, dtype: np.dtype) -> None:
        self.dtype = dtype
        self._live: dict[int, dict[int, tuple[np.void, int]]] = {}
        self.applied = 0

    def apply(self, batch: np.ndarray, now: int) -> None:
        """Apply ``batch`` (in order) as received at virtual or wall time ``now``."""
        for row in batch:
            self.applied += 1
            producer, seq, flags = int(row["producer"]), int(row["seq"]), int(row["flags"])
            events = self._live.setdefault(producer, {})
            if flags & ev.RETRACTION:
                for s in [s for s in events if s >= seq]:
                    del events[s]
                continue
            held = events.get(seq)
            if held is not None and flags & ev.UPDATE and same_event(held[0], row):
                continue
            clean = row.copy()
            clean["flags"] = 0
            events[seq] = (clean, now)

    def absorb(self, other: NetOutput) -> None:
        """Take over the live events of another producer's (or instance's) NetOutput."""
        for producer, events in other._live.items():
            self._live.setdefault(producer, {}).update(events)
        self.applied += other.applied

    def __len__(self) -> int:
        return sum(len(e) for e in self._live.values())

    def net(self) -> np.ndarray:
        """The live events in order of (ts, producer, seq); arrival fields zeroed."""
        rows = [r for e in self._live.values() for r, _ in e.values()]
        if not rows:
            return np.empty(0, self.dtype)
        out = np.array(rows, dtype=self.dtype)
        out["ats"] = 0
        out["kplus"] = 0
        out["origin"] = 0
        return out[np.lexsort((out["seq"], out["producer"], out["ts"]))]

    def latencies(self) -> np.ndarray:
        """For every live event: first emission of its final version minus its origin."""
        return np.array([t - int(r["origin"]) for e in self._live.values() for r, t in e.values()],
                        dtype=np.int64)

