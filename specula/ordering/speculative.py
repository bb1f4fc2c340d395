"""The speculative buffer (``alpha < 1`` or adaptive) of an ordering unit (Alg. 1 and 2).

The buffer is a record array sorted by key, the keys as two int64 arrays (time stamp,
tie-break) and an object array with the snapshot taken in front of each position (or
None). Its first ``n_emitted`` events have been emitted to the detector (the emitted
prefix); the others wait for eq. (1). Snapshots of the detector are taken in front of the
first event of each emission run that stays buffered; an insertion or removal in the
emitted prefix restores the nearest snapshot at or in front of it and replays the prefix
from there, and with on-demand retraction the replay stops where a new snapshot equals
the recorded one. The purge drops emitted events with ``ts + K <= clk`` but keeps the last
emitted one and the oldest one that carries a snapshot. Control messages are handled by
:class:`~specula.ordering._buffer.BufferBase`; see :mod:`specula.ordering.unit` for the
readings of the paper this follows. Output the detector fires as event time passes (at the
unit's speculative clock: :meth:`SpeculativeBuffer.time_fires`) stays revisable: the state
in front of the firing becomes the snapshot of the first event handed behind it, and an
event at or before the fired time that arrives behind the emitted prefix replays from it.

The work is done per run of events, not per event: a run is sorted and merged into the
buffer at once (:func:`~specula.ordering._kernels.merge_positions`), emitted as slices
of the record array and purged as one slice.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from fractions import Fraction
from typing import Any, NamedTuple

import numpy as np

from specula import events as ev
from specula.ordering import _kernels
from specula.ordering._buffer import AFTER_EVERY_KEY, BufferBase, Contents, LatePolicy
from specula.ordering._records import fold_max, is_set, tiebreak
from specula.ordering.clock import ClockSource, advance
from specula.ordering.driver import DetectorDriver, Snapshot
from specula.ordering.state import UnitState

_FRESH = object()  # marks events inserted into the emitted region until the replay
_FIRST = np.zeros(1, np.int64)  # the order of a single arrival
_NONE = np.empty(0, np.int64)  # no positions


class _TimeFired(NamedTuple):
    """Output fired by the passing of event time up to ``time`` that a replay may still
    revise: the detector's state in front of the first such firing (every event up to
    ``time`` handed, none behind it)."""

    time: int
    snapshot: Snapshot


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


def same_state(a: Snapshot, b: Snapshot) -> bool:
    """Where on-demand retraction stops a replay: equal detector states (labels do not
    shift when an output is inserted in front, :mod:`specula.ordering._sent`)."""
    return a.state == b.state


def _spliced(old: np.ndarray, new: np.ndarray, pos: np.ndarray,
             at_old: np.ndarray) -> np.ndarray:
    """``old`` grown by ``new``, whose elements go to positions ``pos``; ``at_old`` marks
    the other positions, which take the elements of ``old`` in their order."""
    out = np.empty(len(old) + len(new), old.dtype)
    out[pos] = new
    out[at_old] = old
    return out


class SpeculativeBuffer(BufferBase):
    """Events sorted by key with an emitted prefix, snapshots, replay and purge.

    ``alpha`` returns the alpha emission runs with now (the unit's: fixed, adaptive, or
    1 while its memory limit backs speculation off).
    """

    def __init__(self, state: UnitState, driver: DetectorDriver, clock: ClockSource, *,
                 in_dtype: np.dtype, late_policy: LatePolicy, alpha: Callable[[], float],
                 name: str) -> None:
        super().__init__(state, driver, clock, in_dtype=in_dtype, late_policy=late_policy)
        self.alpha = alpha
        self.name = name
        self._raw = np.dtype((np.void, in_dtype.itemsize))  # records moved as bytes
        self._n_emitted = 0
        self._last_snap: Snapshot | None = None  # shared when the next one is equal
        self._fired: _TimeFired | None = None  # time fired in front of the unemitted events
        self._load(np.empty(0, in_dtype), np.empty(0, np.int64), np.empty(0, np.int64),
                   np.empty(0, object))

    # ------------------------------------------------------------ storage
    # The four arrays live in a store with room behind them: ``_rows``, ``_ts``, ``_tb``
    # and ``_snaps`` are views of its positions [lo, lo + n). An insertion moves only the
    # events behind its first position (arrivals land near the end), a purge moves the
    # start, and the store is copied into a larger one only when the room runs out.

    def _load(self, rows: np.ndarray, ts: np.ndarray, tb: np.ndarray, snaps: np.ndarray,
              room: int = 0) -> None:
        """Hold these events (sorted by key) with room for ``room`` more behind them."""
        cap = max(len(ts) + room, 64)
        self._store = [np.empty(cap, self._raw), np.empty(cap, np.int64),
                       np.empty(cap, np.int64), np.full(cap, None, object)]
        for store, a in zip(self._store, (rows.view(self._raw), ts, tb, snaps), strict=True):
            store[:len(a)] = a
        self._lo, self._n = 0, len(ts)
        self._views()

    def _views(self) -> None:
        lo, hi = self._lo, self._lo + self._n
        self._rows = self._store[0][lo:hi].view(self.in_dtype)
        self._ts, self._tb, self._snaps = (a[lo:hi] for a in self._store[1:])

    def __len__(self) -> int:
        return len(self._ts)

    @property
    def n_emitted(self) -> int:
        return self._n_emitted

    def snapshots(self) -> np.ndarray:
        return self._snaps[:self._n_emitted]

    @property
    def last_snapshot(self) -> Snapshot | None:
        return self._last_snap

    def contents(self) -> Contents:
        return Contents(self._rows, self._ts, self._tb, self._horizon, dict(self._purged_seq),
                        self._snaps, self._n_emitted, self._last_snap,
                        None if self._fired is None else (self._fired.time,
                                                          self._fired.snapshot))

    def load_contents(self, contents: Contents) -> None:
        if contents.snaps is None:
            raise ValueError("a K-slack buffer's contents do not fit a speculative buffer")
        self._horizon = contents.horizon
        self._purged_seq = dict(contents.purged_seq)
        self._load(contents.rows, contents.ts, contents.tb, contents.snaps)
        self._n_emitted = contents.n_emitted
        self._last_snap = contents.last_snapshot
        fired = contents.time_fired
        self._fired = None if fired is None else _TimeFired(*fired)

    def settled_seq(self) -> int:
        """Every replay restores a snapshot of the emitted region, the oldest at the
        earliest (the purge keeps the oldest emitted event's), and regenerates from its
        counter on; below it, what was generated is final."""
        fired = self._fired  # what time fired in front of the unemitted events, too
        for snap in self._snaps[:self._n_emitted]:
            if isinstance(snap, Snapshot):
                return snap.seq if fired is None else min(snap.seq, fired.snapshot.seq)
        return self.state.seq if fired is None else fired.snapshot.seq

    def _key(self, i: int) -> tuple[int, int]:
        return int(self._ts[i]), int(self._tb[i])

    def flush(self, now: int) -> None:
        """Emit everything, then purge everything, the last emitted event too."""
        self._emit_ready(now, purging=True)
        self._purge(self._n_emitted)
        self._fired = None

    def time_fires(self, ts: int) -> None:
        """The detector is about to fire what waits for event time up to ``ts``: every
        event up to ``ts`` has been handed to it, none behind. The state in front of the
        first such firing is kept (:class:`_TimeFired`) until an event behind ``ts`` is
        emitted, whose snapshot it then becomes: an event at or before ``ts`` that comes
        later and is not late lands in front of it and replays from there, which revises
        the fired output like any other (the replayed events, or the next passing of
        time, fire what still holds)."""
        if self._fired is None:
            self._fired = _TimeFired(ts, self.driver.snapshot())
        else:
            self._fired = self._fired._replace(time=max(ts, self._fired.time))

    def release(self, now: int) -> None:
        """After K was capped below the emitted prefix (the memory limit): emit what
        eq. (1) allows, then purge every event with ``ts + K <= clk``, the last emitted
        one too. Whatever stays emitted was emitted now, behind the snapshot taken in
        front of the first event that stays, so replays still have their anchor."""
        self._emit_ready(now, purging=True)
        st = self.state
        ready = int(self._ts.searchsorted(st.clk - st.k, "right"))
        self._purge(min(ready, self._n_emitted))
        if self._fired is not None:  # what time fired is final: nothing to replay from
            self._horizon = max(self._horizon, (self._fired.time, AFTER_EVERY_KEY))
            self._fired = None

    def time_stamps(self) -> np.ndarray:
        return self._ts

    # ------------------------------------------------------------ arrivals
    def _begin(self, batch: np.ndarray, flags: np.ndarray) -> Any:
        is_clock, clk_after, k_after = advance(self.clock, self.state, batch, flags)
        return (batch["ts"].astype(np.int64), tiebreak(batch["producer"], batch["seq"]),
                is_clock, clk_after, k_after)

    def _run(self, batch: np.ndarray, ctx: Any, start: int, end: int, now: int,
             arrived: int | None) -> None:
        """Speculative step per run of data events between control messages: insert the
        whole run, replay once from the earliest disturbed snapshot, then emit and purge
        with the clock and K after the run. A run of one event is exactly one arrival of
        the paper's algorithm; longer runs take the same decisions once per run, so a
        vectorised detector sees runs of events rather than single ones. A run to stamp
        (``arrived``) is stamped as a copy first: its rows go several ways from here
        (inserted, set aside late, processed late)."""
        ts, tb, clocks, clks, ks = ctx
        run = batch[start:end]
        if arrived is not None:
            run = run.copy()
            ev.stamp_arrival(run, arrived)
        self._insert_run(run, ts[start:end], tb[start:end], now)
        st = self.state
        st.clk, st.k = int(clks[end - 1]), int(ks[end - 1])
        clock_step = bool(np.count_nonzero(clocks[start:end]))
        self._emit_ready(now, purging=clock_step)
        if clock_step:
            self._purge()

    def _after_control(self, ctx: Any, c: int, now: int) -> None:
        st = self.state
        st.clk, st.k = int(ctx[3][c]), int(ctx[4][c])
        clock_step = bool(ctx[2][c])  # a punctuation that moved the clock
        self._emit_ready(now, purging=clock_step)
        if clock_step:
            self._purge()

    def _insert_run(self, run: np.ndarray, ts: np.ndarray, tb: np.ndarray, now: int) -> None:
        """Insert ``run`` (keys ``ts``, ``tb``) and replay once from in front of the first
        insertion into the emitted region; late events are set aside (or, with
        ``late="process"``, processed at once, after replaying what came before)."""
        st = self.state
        late, n_late = _kernels.keys_behind(ts, tb, *self._horizon)
        if not n_late:
            self._settle(self._merge(run, ts, tb)[1], now)
        elif self.late_policy == "side":
            st.to_late(run[late])
            keep = ~late
            self._settle(self._merge(run[keep], ts[keep], tb[keep])[1], now)
        else:
            start = 0
            for j in np.flatnonzero(late).tolist():
                _, fresh = self._merge(run[start:j], ts[start:j], tb[start:j])
                st.to_late(run[j:j + 1])
                st.stats.late_processed += 1
                self._settle(fresh, now)
                self._insert_late(run[j:j + 1], now)
                start = j + 1
            self._settle(self._merge(run[start:], ts[start:], tb[start:])[1], now)

    def _merge(self, rows: np.ndarray, ts: np.ndarray,
               tb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Insert ``rows`` (keys ``ts``, ``tb``) in key order, each behind buffered events
        with an equal key and behind the rows before it with an equal key. Rows that land
        in the emitted region join it, marked new until the replay. Returns the rows'
        positions and the positions of those in the emitted region."""
        if not len(rows):
            return _NONE, _NONE
        order = np.lexsort((tb, ts)) if len(rows) > 1 else _FIRST
        pos, inside, n_inside, at_tail = _kernels.merge_positions(
            self._ts, self._tb, self._n_emitted, ts, tb, order)
        snaps = np.empty(len(rows), object)
        if n_inside:
            snaps[inside] = _FRESH
            self._n_emitted += n_inside
        self._splice(None if at_tail else pos, rows, ts, tb, snaps)
        return pos, pos[inside] if n_inside else _NONE

    def _splice(self, pos: np.ndarray | None, rows: np.ndarray, ts: np.ndarray,
                tb: np.ndarray, snaps: np.ndarray) -> None:
        """Put new events at positions ``pos`` of the grown buffer (None: at its tail, in
        order); the caller keeps the keys sorted. Only the events behind the first new
        position move."""
        n, k = self._n, len(ts)
        if self._lo + n + k > len(self._store[1]):
            self._load(self._rows, self._ts, self._tb, self._snaps, room=n + k + 64)
        lo = self._lo
        new = (rows.view(self._raw), ts, tb, snaps)
        if pos is None:
            for store, a in zip(self._store, new, strict=True):
                store[lo + n:lo + n + k] = a
        else:
            first = int(pos.min())
            at_old = np.ones(n - first + k, bool)
            at_old[pos - first] = False
            for store, a in zip(self._store, new, strict=True):
                store[lo + first:lo + n + k] = _spliced(store[lo + first:lo + n], a,
                                                        pos - first, at_old)
        self._n = n + k
        self._views()

    def unhanded(self) -> np.ndarray:
        return self._rows[self._n_emitted:].copy()

    def drop_unhanded(self, keep: np.ndarray) -> None:
        """Compact the region behind the emitted prefix (no snapshot lives there)."""
        lo, first, n = self._lo, self._lo + self._n_emitted, self._n
        kept = int(np.count_nonzero(keep))
        for store in self._store:
            store[first:first + kept] = store[first:lo + n][keep]
        self._store[3][first + kept:lo + n] = None
        self._n = self._n_emitted + kept
        self._views()

    def _delete(self, pos: int) -> None:
        """Remove the event at position ``pos`` from the arrays."""
        lo, n = self._lo, self._n
        for store in self._store:
            store[lo + pos:lo + n - 1] = store[lo + pos + 1:lo + n]
        self._store[3][lo + n - 1] = None  # hold no snapshot past the end
        self._n = n - 1
        self._views()

    def _insert(self, row: np.ndarray, key: tuple[int, int]) -> tuple[int, bool]:
        """Insertion-sort ``row``; returns its position and whether it landed in the emitted
        region (then it is marked new, and the caller replays)."""
        pos, fresh = self._merge(row, np.array([key[0]], np.int64),
                                 np.array([key[1]], np.int64))
        return int(pos[0]), len(fresh) > 0

    def _insert_late(self, row: np.ndarray, now: int) -> None:
        """Process a late event right away, after the last emitted event."""
        pos = self._n_emitted
        key = self._key(pos - 1) if pos else self._horizon
        self._splice(np.array([pos]), row, np.array([key[0]], np.int64),
                     np.array([key[1]], np.int64), np.empty(1, object))
        self._emit_range(pos, pos + 1, now, replay=False, keep_from=pos)

    def _settle(self, fresh: np.ndarray, now: int) -> None:
        """After insertions at buffer positions ``fresh`` of the emitted region, go back
        to the nearest snapshot at or before the first of them and replay."""
        if not len(fresh):
            return
        pos, snap, label = self._anchor(int(fresh.min()))
        self._replay(pos, snap, label, now, stop_from=int(fresh.max()) + 1)

    def _anchor(self, pos: int) -> tuple[int, Snapshot, np.void]:
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
            raise AssertionError(f"{self.name}: no snapshot in front of position {pos}")
        return i, self._snaps[i]

    # ------------------------------------------------------------ control messages
    def _find(self, producer: int, seq: int) -> int | None:
        held = np.flatnonzero((self._rows["producer"] == producer) & (self._rows["seq"] == seq))
        return int(held[0]) if len(held) else None

    def _held(self, i: int) -> np.void:
        return self._rows[i]

    def _remove(self, pos: int) -> Snapshot | None:
        """Remove the event at ``pos``; return its snapshot if it had been emitted."""
        snap = self._snaps[pos] if pos < self._n_emitted else None
        self._delete(pos)
        if pos < self._n_emitted:
            self._n_emitted -= 1
        return snap

    def _revoke(self, producer: int, seq: int, now: int) -> None:
        hit = np.flatnonzero((self._rows["producer"] == producer)
                             & (self._rows["seq"] >= seq)).tolist()
        first: int = -1
        snap: Snapshot | None = None
        label: np.void | None = None
        for i in reversed(hit):
            row = self._rows[i]
            was_emitted = i < self._n_emitted
            s = self._remove(i)
            if was_emitted:
                first, snap, label = i, s, row
        self.state.stats.events_removed += len(hit)
        if first >= 0:
            if snap is None or label is None:
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
        st = self.state
        if (removed_emitted and not inserted and pos == self._n_emitted
                and key[0] + speculative_slack(self.alpha(), st.k) <= st.clk):
            # eq. (1) holds: the new version takes the old one's turn in the replay
            self._snaps[pos] = _FRESH
            self._n_emitted += 1
            inserted = True
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
    def _replay(self, pos: int, snap: Snapshot, snap_of: np.void, now: int, *,
                stop_from: int) -> None:
        """Restore ``snap`` (the state before buffer position ``pos``, taken when event
        ``snap_of`` was emitted) and re-emit the emitted region from ``pos`` on
        (Alg. 1 relocation + Alg. 2 replay).

        On-demand retraction may stop the replay at a position ``>= stop_from`` (behind
        every change to the buffer) where the new snapshot equals the recorded one.
        """
        st, driver = self.state, self.driver
        sent = driver.sent
        st.stats.relocations += 1
        end = self._n_emitted
        current = driver.snapshot() if sent is not None else None
        before_seq = st.seq
        st.note("restore", snap_of)
        driver.restore(snap)
        if current is None:
            driver.send_retraction(st.seq, before_seq, now)
            self._fired = None  # the whole emitted region is replayed
        self._n_emitted = pos
        stopped = self._emit_range(pos, end, now, replay=True, keep_from=pos,
                                   stop_from=stop_from if current is not None else None)
        if sent is None or current is None:
            return
        hi = None
        if stopped is not None:
            st.stats.early_stops += 1
            driver.resume(current)
            self._n_emitted = end
            hi = self._snaps[stopped].seq
        else:
            self._fired = None
        rev = sent.revise(snap.seq, hi, now)
        renamed = rev.rename(self._snaps, pos, end if stopped is None else stopped, end)
        self._last_snap = renamed.get(id(self._last_snap), self._last_snap)
        if self._fired is not None:  # behind the emitted region, and unchanged
            held = np.empty(1, object)
            held[0] = self._fired.snapshot
            rev.rename(held, 0, 0, 1)
            self._fired = self._fired._replace(snapshot=held[0])
        st.seq = rev.next_seq(before_seq, stopped is not None)
        driver.send_revision(rev)

    def _emit_ready(self, now: int, purging: bool) -> None:
        """Emit every event that satisfies eq. (1): ``ts + ceil(alpha*K) <= clk``, as one
        run with one snapshot in front of its first event that stays buffered (events the
        purge right after drops need none; ``purging``: this step advanced the clock).
        """
        if self._n_emitted >= len(self):
            return
        fired = self._fired
        if fired is not None and self._ts[self._n_emitted] <= fired.time:
            self._unfire(fired, now)
            fired = None
        st = self.state
        slack = speculative_slack(self.alpha(), st.k)
        end = int(self._ts.searchsorted(st.clk - slack, "right"))
        start = self._n_emitted
        if end > start:
            keep_from = self._purge_end(end) if purging else start
            if fired is None:
                self._emit_range(start, end, now, replay=False, keep_from=keep_from)
                return
            # the first event behind the fired time: the state in front of the firing
            # is its snapshot (replayed from there, it fires again what still holds)
            self._emit_range(start, end, now, replay=False, keep_from=max(keep_from,
                                                                           start + 1))
            if keep_from == start:
                self._snaps[start] = fired.snapshot
            self._fired = None

    def _unfire(self, fired: _TimeFired, now: int) -> None:
        """Events at or before the fired time came behind the emitted region: go back to
        the state in front of the firing (revising what it fired); the events are
        emitted next, and the next passing of time fires again what still holds."""
        pos = self._n_emitted
        self._replay(pos, fired.snapshot, self._rows[pos], now, stop_from=pos)

    def _purge_end(self, emitted_end: int) -> int:
        """Buffer index up to which emitted events are purged: ``ts + K <= clk``, but never
        the last emitted event."""
        st = self.state
        ready = int(self._ts.searchsorted(st.clk - st.k, "right"))
        return min(ready, emitted_end - 1)

    def _emit_range(self, start: int, end: int, now: int, *, replay: bool, keep_from: int,
                    stop_from: int | None = None) -> int | None:
        """Emit buffer positions [start, end) to the detector in as few batches as possible:
        a snapshot is taken in front of the first event that stays buffered (position
        ``keep_from`` or later) and, on a replay, wherever a recorded snapshot is replaced.
        The events between two snapshots go to the detector as one batch.

        With ``stop_from``, from that position on each new snapshot is compared with the
        recorded one; returns the position where they were equal (the replay stops
        there), else None.
        """
        stats = self.state.stats
        i = start
        for p in self._snapshot_points(start, end, max(start, keep_from), replay):
            if p > i:
                self._emit_run(i, p, now, replay)
            snap = self.driver.snapshot()
            old = self._snaps[p]
            if stop_from is not None and p >= stop_from and old is not None:
                stats.snapshot_comparisons += 1
                if same_state(snap, old):
                    return p
            prev = self._last_snap
            if (prev is not None and prev.seq == snap.seq and prev.origin == snap.origin
                    and same_state(prev, snap)):
                snap = prev
                stats.snapshots_shared += 1
            self._last_snap = snap
            self._snaps[p] = snap if p >= keep_from else None
            i = p
        if i < end:
            self._emit_run(i, end, now, replay)
        return None

    def _snapshot_points(self, start: int, end: int, first_kept: int,
                         replay: bool) -> list[int]:
        """Positions in [start, end) that get a snapshot in front: the first event that
        stays buffered and, on a replay, every position that has one recorded (to replace
        or compare)."""
        if not replay:
            return [first_kept] if first_kept < end else []
        points = set((np.flatnonzero(self._has_snap(start, end)) + start).tolist())
        if first_kept < end:
            points.add(first_kept)
        return sorted(points)

    def _has_snap(self, start: int, end: int) -> np.ndarray:
        """Which of the positions [start, end) carry a snapshot (or a new-event mark)."""
        return is_set(self._snaps[start:end])

    def _emit_run(self, i: int, j: int, now: int, replay: bool) -> None:
        st = self.state
        events = self._rows[i:j]
        if replay:
            st.stats.replayed += len(events)
        if st.trace is not None:
            for r in events:
                st.note("replay" if replay else "emit", r)
        # K+ (sec. 4.1): how long pure K-slack would still have held each event
        cut = st.clk - st.k
        kplus = None
        if self._ts[j - 1] > cut:
            kplus = np.maximum(self._ts[i:j] - cut, 0)
        self._n_emitted = j
        # an on-demand replay's output waits in the sent log for the revision
        self.driver.process(events, kplus, now, update=replay and self.driver.sent is not None)

    # ------------------------------------------------------------ purge
    def _purge(self, n: int | None = None) -> None:
        """Drop the first ``n`` events (default: what the purge condition allows, keeping
        the last emitted event and the oldest emitted one with a snapshot)."""
        if n is None:
            n = self._purge_end(self._n_emitted) if self._n_emitted else 0
            # the oldest emitted event left must carry a snapshot to replay from
            if 0 < n < self._n_emitted and self._snaps[n] is None:
                held = np.flatnonzero(self._has_snap(0, n))
                n = int(held[-1]) if len(held) else 0
        if n <= 0:
            return
        st = self.state
        if st.trace is not None:
            for r in self._rows[:n]:
                st.note("purge", r)
        fold_max(self._purged_seq, self._tb[:n])
        self._horizon = self._key(n - 1)
        self._snaps[:n] = None  # the store holds no purged snapshot
        self._lo += n
        self._n -= n
        self._views()
        self._n_emitted -= n
        st.stats.purged += n
        sent = self.driver.sent
        if sent is not None:  # a replay starts at the oldest snapshot left, or later
            oldest = self._snaps[0] if self._n_emitted else None
            if oldest is None or isinstance(oldest, Snapshot):
                sent.trim(oldest.seq if oldest is not None else st.seq)
