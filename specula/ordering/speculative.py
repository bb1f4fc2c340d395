"""The speculative buffer (``alpha < 1`` or adaptive) of an ordering unit (Alg. 1 and 2).

The buffer is three parallel lists sorted by key: keys, one-row records and snapshots.
Its first ``n_emitted`` events have been emitted to the detector (the emitted prefix);
the others wait for eq. (1). Snapshots of the detector are taken in front of the first
event of each emission run that stays buffered; an insertion or removal in the emitted
prefix restores the nearest snapshot at or in front of it and replays the prefix from
there, and with on-demand retraction the replay stops where a new snapshot equals the
recorded one. The purge drops emitted events with ``ts + K <= clk`` but keeps the last
emitted one and the oldest one that carries a snapshot. Control messages are handled by
:class:`~specula.ordering._buffer.Buffer`; see :mod:`specula.ordering.unit` for the
readings of the paper this follows.
"""

from __future__ import annotations

import bisect
import functools
from fractions import Fraction
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from specula.ordering._buffer import Buffer
from specula.ordering._records import MAX_KEY, TIEBREAK_SHIFT, concat_records, fold_max, tiebreak

if TYPE_CHECKING:
    from specula.ordering.unit import OrderingUnit

_FRESH = object()  # marks events inserted into the emitted region until the replay


def speculative_slack(alpha: float, k: int) -> int:
    """``ceil(alpha * K)`` of eq. (1) in exact arithmetic, alpha taken as the decimal it
    prints as: 0.55 with K = 100 gives 55 (in floating point, 0.55 * 100 rounds up to 56)."""
    if k <= 0:
        return 0
    a = _exact(alpha)
    return -(-k * a.numerator // a.denominator)


@functools.lru_cache(maxsize=4096)
def _exact(alpha: float) -> Fraction:
    return Fraction(repr(float(alpha)))


class Snapshot(NamedTuple):
    """Detector state plus what the unit piggybacks on it: counter and newest origin."""

    state: Any
    seq: int
    origin: int


def same_state(a: Snapshot, b: Snapshot) -> bool:
    """Snapshot equality for on-demand retraction: detector state and counter."""
    return a.seq == b.seq and a.state == b.state


class SpeculativeBuffer(Buffer):
    """Events sorted by key with an emitted prefix, snapshots, replay and purge."""

    def __init__(self, unit: OrderingUnit) -> None:
        super().__init__(unit)
        self._keys: list[tuple[int, int]] = []
        self._rows: list[np.ndarray] = []
        self._snaps: list[Snapshot | None] = []
        self._n_emitted = 0
        self._last_snap: Snapshot | None = None  # shared when the next one is equal

    def __len__(self) -> int:
        return len(self._keys)

    def flush(self, now: int) -> None:
        """Emit everything, then purge everything, the last emitted event too."""
        self._emit_ready(now, purging=True)
        self._purge(self._n_emitted)

    # ------------------------------------------------------------ arrivals
    def _begin(self, batch: np.ndarray, flags: np.ndarray) -> Any:
        is_clock, clk_after, k_after = self.unit._advance_clock(batch, flags)
        return (batch["ts"].tolist(), tiebreak(batch["producer"], batch["seq"]).tolist(),
                is_clock.tolist(), clk_after.tolist(), k_after.tolist())

    def _run(self, batch: np.ndarray, ctx: Any, start: int, end: int, now: int) -> None:
        """Speculative step per run of data events between control messages: insert the
        whole run, replay once from the earliest disturbed snapshot, then emit and purge
        with the clock and K after the run. A run of one event is exactly one arrival of
        the paper's algorithm; longer runs take the same decisions once per run, so a
        vectorised detector sees runs of events rather than single ones."""
        ts, tb, clocks, clks, ks = ctx
        self._insert_run(batch, ts, tb, start, end, now)
        u = self.unit
        u.clk, u.k = clks[end - 1], ks[end - 1]
        clock_step = any(clocks[start:end])
        self._emit_ready(now, purging=clock_step)
        if clock_step:
            self._purge()

    def _after_control(self, ctx: Any, c: int, now: int) -> None:
        u = self.unit
        u.clk, u.k = ctx[3][c], ctx[4][c]
        clock_step = ctx[2][c]  # a punctuation that moved the clock
        self._emit_ready(now, purging=clock_step)
        if clock_step:
            self._purge()

    def _insert_run(self, batch: np.ndarray, ts: list[int], tb: list[int], start: int,
                    end: int, now: int) -> None:
        """Insert ``batch[start:end]`` (keys ``ts``, ``tb``) and replay once from in front
        of the first insertion into the emitted region; late events are set aside (or,
        with ``late="process"``, processed at once, after replaying what came before)."""
        u = self.unit
        first = last = -1  # span of insertions into the emitted region
        for j in range(start, end):
            key = (ts[j], tb[j])
            if key < self._horizon:
                row = batch[j:j + 1]
                u._to_late(row)
                if u.late_policy == "process":
                    u.stats.late_processed += 1
                    self._settle(first, last, now)
                    first = last = -1
                    self._insert_late(row, now)
                continue
            pos, inside = self._insert(batch[j:j + 1], key)
            if inside:
                if first < 0:
                    first = last = pos
                else:
                    last = last + 1 if pos <= last else last
                    last = max(last, pos)
                    first = min(first, pos)
        self._settle(first, last, now)

    def _insert(self, row: np.ndarray, key: tuple[int, int]) -> tuple[int, bool]:
        """Insertion-sort ``row``; returns its position and whether it landed in the emitted
        region (then it is marked new, and the caller replays)."""
        pos = bisect.bisect_right(self._keys, key)
        inside = pos < self._n_emitted
        self._keys.insert(pos, key)
        self._rows.insert(pos, row)
        self._snaps.insert(pos, _FRESH if inside else None)
        if inside:
            self._n_emitted += 1
        return pos, inside

    def _insert_late(self, row: np.ndarray, now: int) -> None:
        """Process a late event right away, after the last emitted event."""
        pos = self._n_emitted
        key = self._keys[pos - 1] if pos else self._horizon
        self._keys.insert(pos, key)
        self._rows.insert(pos, row)
        self._snaps.insert(pos, None)
        self._emit_range(pos, pos + 1, now, replay=False, keep_from=pos)

    def _settle(self, first: int, last: int, now: int) -> None:
        """After insertions at buffer positions first..last of the emitted region, go back
        to the nearest snapshot at or before ``first`` and replay."""
        if first < 0:
            return
        pos, snap, label = self._anchor(first)
        self._replay(pos, snap, label, now, stop_from=last + 1)

    def _anchor(self, pos: int) -> tuple[int, Snapshot, np.ndarray]:
        """Where to replay from after new events were inserted into the emitted region,
        the first of them at ``pos``: the snapshot of the first old event behind the new
        ones at ``pos`` (the state in front of them), or else the nearest snapshot in
        front of ``pos``; with the event the snapshot was taken for. The oldest emitted
        event always has one. Clears the marks of the new events."""
        j = pos
        while j < self._n_emitted and self._snaps[j] is _FRESH:
            j += 1
        for i in range(pos, j):
            self._snaps[i] = None
        for i in range(j, self._n_emitted):  # further new events, behind old ones
            if self._snaps[i] is _FRESH:
                self._snaps[i] = None
        if j < self._n_emitted and self._snaps[j] is not None:
            return pos, self._snaps[j], self._rows[j]
        i, snap = self._anchor_before(pos)
        return i, snap, self._rows[i]

    def _anchor_before(self, pos: int) -> tuple[int, Snapshot]:
        """The nearest snapshot strictly in front of position ``pos``."""
        i = pos - 1
        while i >= 0 and (self._snaps[i] is None or self._snaps[i] is _FRESH):
            i -= 1
        if i < 0:
            raise AssertionError(f"{self.unit.name}: no snapshot in front of position {pos}")
        return i, self._snaps[i]

    # ------------------------------------------------------------ control messages
    def _find(self, producer: int, seq: int) -> int | None:
        return next((i for i, r in enumerate(self._rows)
                     if int(r["producer"][0]) == producer and int(r["seq"][0]) == seq), None)

    def _held(self, i: int) -> np.void:
        return self._rows[i][0]

    def _remove(self, pos: int) -> Snapshot | None:
        """Remove the event at ``pos``; return its snapshot if it had been emitted."""
        snap = self._snaps[pos] if pos < self._n_emitted else None
        del self._keys[pos], self._rows[pos], self._snaps[pos]
        if pos < self._n_emitted:
            self._n_emitted -= 1
        return snap

    def _revoke(self, producer: int, seq: int, now: int) -> None:
        hit = [i for i, r in enumerate(self._rows)
               if int(r["producer"][0]) == producer and int(r["seq"][0]) >= seq]
        first, snap, label = -1, None, None
        for i in reversed(hit):
            row = self._rows[i]
            was_emitted = i < self._n_emitted
            s = self._remove(i)
            if was_emitted:
                first, snap, label = i, s, row
        self.unit.stats.events_removed += len(hit)
        if first >= 0:
            if snap is None:
                first, snap = self._anchor_before(first)
                label = self._rows[first]
            # the successor of the last removed event is the first place where the new
            # and the recorded timelines can meet again
            self._replay(first, snap, label, now, stop_from=hit[-1] - len(hit) + 1)

    def _drop(self, held: int, now: int) -> None:
        """Remove the event at ``held``; if it was emitted, go back to the state in front
        of it and replay what followed it."""
        if held >= self._n_emitted:
            self._remove(held)
            return
        row = self._rows[held]
        snap = self._remove(held)
        start = held
        if snap is None:
            start, snap = self._anchor_before(held)
            row = self._rows[start]
        self._replay(start, snap, row, now, stop_from=held)

    def _replace(self, held: int, row: np.ndarray, key: tuple[int, int], now: int) -> None:
        old_row = self._rows[held]
        removed_emitted = held < self._n_emitted
        removed_snap = self._remove(held)
        pos, inserted = self._insert(row, key)
        if inserted and (not removed_emitted or pos < held):
            start, snap, label = self._anchor(pos)
            stop_from = pos + 1 if not removed_emitted else held + 1
            self._replay(start, snap, label, now, stop_from=stop_from)
        elif removed_emitted:
            if inserted:
                self._snaps[pos] = None  # replayed from the removed event's place anyway
            stop_from = held if not inserted else pos + 1
            if removed_snap is None:
                start, removed_snap = self._anchor_before(held)
                old_row = self._rows[start]
            else:
                start = held
            self._replay(start, removed_snap, old_row, now, stop_from=stop_from)

    # ------------------------------------------------------------ emission and replay
    def _snapshot(self) -> Snapshot:
        u = self.unit
        u.stats.snapshots += 1
        return Snapshot(u.detector.snapshot(), u._seq, u._origin)

    def _restore(self, snap: Snapshot) -> None:
        u = self.unit
        u.stats.restores += 1
        u.detector.restore(snap.state)
        u._seq = snap.seq
        u._origin = snap.origin

    def _replay(self, pos: int, snap: Snapshot, snap_of: np.ndarray, now: int, *,
                stop_from: int) -> None:
        """Restore ``snap`` (the state before buffer position ``pos``, taken when event
        ``snap_of`` was emitted) and re-emit the emitted region from ``pos`` on
        (Alg. 1 relocation + Alg. 2 replay).

        On-demand retraction may stop the replay at a position ``>= stop_from`` (behind
        every change to the buffer) where the new snapshot equals the recorded one.
        """
        u = self.unit
        u.stats.relocations += 1
        end = self._n_emitted
        current = self._snapshot() if u.retraction == "on-demand" else None
        before_seq = u._seq
        u._note("restore", snap_of)
        self._restore(snap)
        if u.retraction == "full":
            u._send_retraction(u._seq, before_seq, now)
        self._n_emitted = pos
        stopped = self._emit_range(pos, end, now, replay=True, keep_from=pos,
                                   stop_from=stop_from if current is not None else None)
        if stopped is not None:
            u.stats.early_stops += 1
            origin = u._origin
            u.detector.restore(current.state)
            u._seq = current.seq
            u._origin = max(origin, current.origin)
            self._n_emitted = end
        elif current is not None:
            u._send_retraction(u._seq, before_seq, now)

    def _emit_ready(self, now: int, purging: bool) -> None:
        """Emit every event that satisfies eq. (1): ``ts + ceil(alpha*K) <= clk``, as one
        run with one snapshot in front of its first event that stays buffered (events the
        purge right after drops need none; ``purging``: this step advanced the clock).
        """
        if self._n_emitted >= len(self._keys):
            return
        u = self.unit
        slack = speculative_slack(u.alpha, u.k)
        end = bisect.bisect_right(self._keys, (u.clk - slack, MAX_KEY[1]), lo=self._n_emitted)
        if end > self._n_emitted:
            keep_from = self._purge_end(end) if purging else self._n_emitted
            self._emit_range(self._n_emitted, end, now, replay=False, keep_from=keep_from)

    def _purge_end(self, emitted_end: int) -> int:
        """Buffer index up to which emitted events are purged: ``ts + K <= clk``, but never
        the last emitted event."""
        u = self.unit
        ready = bisect.bisect_right(self._keys, (u.clk - u.k, MAX_KEY[1]))
        return min(ready, emitted_end - 1)

    def _emit_range(self, start: int, end: int, now: int, *, replay: bool, keep_from: int,
                    stop_from: int | None = None) -> int | None:
        """Emit buffer positions [start, end) to the detector in as few batches as possible:
        a snapshot is taken in front of the first event that stays buffered (position
        ``keep_from`` or later) and, on a replay, wherever a recorded snapshot is replaced.

        With ``stop_from``, from that position on each new snapshot is compared with the
        recorded one; returns the position where they were equal (the replay stops
        there), else None.
        """
        first_kept = max(start, keep_from)
        stats = self.unit.stats

        def compare(i: int) -> bool:
            return stop_from is not None and i >= stop_from and self._snaps[i] is not None

        def batchable(i: int) -> bool:
            # one snapshot in front of the first event that stays buffered; on a replay
            # also where a recorded snapshot is to be replaced or compared
            return i != first_kept and not (replay and self._snaps[i] is not None)

        i = start
        while i < end:
            if batchable(i):
                j = i + 1
                while j < end and batchable(j):
                    j += 1
                self._emit_run(i, j, now, replay)
                i = j
                continue
            snap = self._snapshot()
            old = self._snaps[i]
            if compare(i):
                stats.snapshot_comparisons += 1
                if same_state(snap, old):
                    return i
            prev = self._last_snap
            if prev is not None and same_state(prev, snap) and prev.origin == snap.origin:
                snap = prev
                stats.snapshots_shared += 1
            self._last_snap = snap
            self._snaps[i] = snap if i >= keep_from else None
            self._emit_run(i, i + 1, now, replay)
            i += 1
        return None

    def _emit_run(self, i: int, j: int, now: int, replay: bool) -> None:
        u = self.unit
        rows = self._rows[i:j]
        events = rows[0] if len(rows) == 1 else concat_records(rows)
        if replay:
            u.stats.replayed += len(events)
        if u.trace is not None:
            for r in events:
                u._note("replay" if replay else "emit", r)
        # K+ (sec. 4.1): how long pure K-slack would still have held each event
        cut = u.clk - u.k
        kplus = None
        if self._keys[j - 1][0] > cut:
            kplus = [max(t - cut, 0) for t, _ in self._keys[i:j]]
        self._n_emitted = j
        u._process(events, kplus, now, update=replay and u.retraction == "on-demand")

    # ------------------------------------------------------------ purge
    def _purge(self, n: int | None = None) -> None:
        """Drop the first ``n`` events (default: what the purge condition allows, keeping
        the last emitted event and the oldest emitted one with a snapshot)."""
        if n is None:
            n = self._purge_end(self._n_emitted) if self._n_emitted else 0
            # the oldest emitted event left must carry a snapshot to replay from
            while 0 < n < self._n_emitted and self._snaps[n] is None:
                n -= 1
        if n <= 0:
            return
        u = self.unit
        if u.trace is not None:
            for r in self._rows[:n]:
                u._note("purge", r)
        for _, tb in self._keys[:n]:
            if tb >> TIEBREAK_SHIFT:
                fold_max(self._purged_seq, tb)
        self._horizon = self._keys[n - 1]
        del self._keys[:n], self._rows[:n], self._snaps[:n]
        self._n_emitted -= n
        u.stats.purged += n
        if u._sent is not None:  # a replay starts at the oldest snapshot left, or later
            oldest = self._snaps[0] if self._n_emitted else None
            if oldest is None or isinstance(oldest, Snapshot):
                u._sent.trim(oldest.seq if oldest is not None else u._seq)
