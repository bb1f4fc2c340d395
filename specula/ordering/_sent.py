"""What a speculative unit with on-demand retraction has sent and may still revise.

A replay renumbers what it regenerates from the counter of the snapshot it restored, so
the new version of ``(producer, seq)`` can differ from the version sent before in type
or key, and then it routes to another subscriber or partition than the one holding the
old version. To send each revision where it applies, the unit remembers the last version
it sent under each counter that a replay can still reach (from the counter of its oldest
snapshot on) and turns every regenerated event into one of:

* an ``UPDATE`` when the old version had the same type and key: it routes to exactly
  the consumer that holds the old version, which discards it if nothing changed;
* a ``REVOKE`` of the old version followed by the new version as a plain event when type
  or key changed: the revocation routes like the old version, the event like a new one;
* a plain event when nothing was sent under its counter before.
"""

from __future__ import annotations

import numpy as np

from specula import events as ev


class SentLog:
    """The last version sent under each counter in ``[base, base + len)``, in a growable
    array (amortised appends)."""

    def __init__(self, dtype: np.dtype) -> None:
        self._rows = np.empty(64, dtype)
        self._n = 0
        self._base = 0

    @property
    def end(self) -> int:
        """One past the highest counter logged."""
        return self._base + self._n

    def __len__(self) -> int:
        return self._n

    def record(self, out: np.ndarray) -> None:
        """Log ``out`` (consecutive counters) as the versions sent under its counters."""
        if not len(out):
            return
        first = int(out["seq"][0])
        start = first - self._base
        if not self._n or not 0 <= start <= self._n:
            self._n, self._base, start = 0, first, 0
        n = start + len(out)
        if n > len(self._rows):
            grown = np.empty(max(n, 2 * len(self._rows)), self._rows.dtype)
            grown[:self._n] = self._rows[:self._n]
            self._rows = grown
        self._rows[start:n] = out
        self._n = max(self._n, n)

    def revise(self, out: np.ndarray, now: int) -> tuple[np.ndarray, int, int]:
        """Turn the regenerated events ``out`` (consecutive counters) into the messages
        to send, in order, and log them as the versions sent.

        Returns the messages, how many of them are updates and how many revocations.
        """
        first = int(out["seq"][0]) if len(out) else self.end
        if self._n and first < self._base:
            raise AssertionError(f"a replay regenerated counter {first}, below the oldest "
                                 f"one kept for revisions ({self._base})")
        n_old = max(0, min(first + len(out), self.end) - first) if self._n else 0
        old = self._rows[first - self._base:first - self._base + n_old].copy()
        self.record(out)
        if not n_old:
            return out, 0, 0
        moved = np.flatnonzero((old["type"] != out["type"][:n_old])
                               | (old["key"] != out["key"][:n_old]))
        out["flags"][:n_old] = ev.UPDATE
        if not len(moved):
            return out, n_old, 0
        out["flags"][moved] = 0
        revoke = old[moved]
        revoke["flags"] = ev.REVOKE
        revoke["ats"] = now
        # each revocation goes right in front of the event that replaces it
        at = moved + np.arange(len(moved))
        messages = np.empty(len(out) + len(moved), out.dtype)
        messages[at] = revoke
        rest = np.ones(len(messages), bool)
        rest[at] = False
        messages[rest] = out
        return messages, n_old - len(moved), len(moved)

    def truncate(self, seq: int) -> None:
        """Forget counters from ``seq`` on (they were retracted)."""
        self._n = min(self._n, max(0, seq - self._base))

    def trim(self, seq: int) -> None:
        """Forget counters below ``seq``: no replay can regenerate them any more. Moves
        the rest only once the forgotten part is at least half of the log."""
        dead = min(seq - self._base, self._n)
        if dead > 0 and 2 * dead >= self._n:
            self._rows[:self._n - dead] = self._rows[dead:self._n]
            self._n -= dead
            self._base += dead
