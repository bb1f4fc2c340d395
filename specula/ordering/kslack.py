"""The pure K-slack buffer (``alpha = 1``) of an ordering unit: arrays and a Numba kernel.

An event is emitted and purged at once when ``ts + K <= clk``, so nothing emitted stays
buffered and no snapshot is ever taken. Each run of data events goes through one call of
:func:`specula.ordering._kernels.kslack_order`, which also advances the unit's clock and
K event by event; control messages are handled by
:class:`~specula.ordering._buffer.BufferBase`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from specula import events as ev
from specula.ordering import _kernels
from specula.ordering._buffer import BufferBase, Contents, LatePolicy
from specula.ordering._records import TIEBREAK_SHIFT, max_per_producer, tiebreak
from specula.ordering.clock import ClockSource, proposals, punctuate
from specula.ordering.driver import DetectorDriver, Snapshot
from specula.ordering.state import UnitState

_NO_SNAPSHOTS = np.empty(0, object)


class KSlackBuffer(BufferBase):
    """The buffered events: rows in an append-only store, and, sorted by key, their
    store indices, time stamps and tie-breaks as int64 arrays for the kernel.

    Arrivals are written behind the store's last row and emitted rows are copied out by
    index, so a push costs what it adds and emits, not the size of the buffer (with K of
    a few hundred milliseconds and batches of a few milliseconds, copying the whole
    buffer per push cost ~100x the batch). When the store is full, the live rows move to
    the front of one twice their size, in key order. The key arrays likewise: the
    buffer is ``[head:tail]`` of arrays with room behind it, which the kernel fills and
    purges in place; when the room runs out, the buffer moves to the front (or to
    arrays twice its size).
    """

    trace_discarded_updates = False
    refuse_late_updates = False

    def __init__(self, state: UnitState, driver: DetectorDriver, clock: ClockSource, *,
                 in_dtype: np.dtype, late_policy: LatePolicy) -> None:
        super().__init__(state, driver, clock, in_dtype=in_dtype, late_policy=late_policy)
        self._raw = np.dtype((np.void, in_dtype.itemsize))  # rows moved as bytes
        self._load(np.empty(0, in_dtype), np.empty(0, np.int64), np.empty(0, np.int64))

    def __len__(self) -> int:
        return self._tail - self._head

    @property
    def _buf_ix(self) -> np.ndarray:
        """Store indices of the buffered events, in key order (a view)."""
        return self._ix[self._head:self._tail]

    @property
    def _buf_ts(self) -> np.ndarray:
        return self._ts[self._head:self._tail]

    @property
    def _buf_tb(self) -> np.ndarray:
        return self._tb[self._head:self._tail]

    def _hold(self, ix: np.ndarray, ts: np.ndarray, tb: np.ndarray, room: int = 0) -> None:
        """Make ``ix, ts, tb`` the buffer's keys, in arrays with ``room`` to spare and
        at least as much again."""
        cap = max(256, 2 * (len(ix) + room))
        self._ix, self._ts, self._tb = (np.empty(cap, np.int64) for _ in range(3))
        self._head, self._tail = 0, len(ix)
        self._ix[:len(ix)], self._ts[:len(ix)], self._tb[:len(ix)] = ix, ts, tb

    def _make_room(self, n: int) -> None:
        """Room for ``n`` more keys behind the buffer."""
        if self._tail + n <= len(self._ix):
            return
        size = self._tail - self._head
        if size + n <= len(self._ix) // 2:  # move to the front
            for a in (self._ix, self._ts, self._tb):
                a[:size] = a[self._head:self._tail]
            self._head, self._tail = 0, size
        else:
            self._hold(self._buf_ix, self._buf_ts, self._buf_tb, n)  # copied out of the old arrays

    @property
    def rows(self) -> np.ndarray:
        """A copy of the buffered events, in key order."""
        return np.take(self._store, self._buf_ix)

    def _load(self, rows: np.ndarray, ts: np.ndarray, tb: np.ndarray) -> None:
        """Hold ``rows`` (in key order) with their time stamps and tie-breaks."""
        self._store = rows.copy()
        self._used = len(rows)
        self._hold(np.arange(len(rows), dtype=np.int64), ts, tb)

    def _append(self, run: np.ndarray) -> int:
        """Write ``run`` behind the store's rows (compacting the store when it is full);
        returns the store index of its first row."""
        n, raw = len(run), self._raw
        if self._used + n > len(self._store):
            live = np.take(self._store, self._buf_ix)
            store = np.empty(max(256, 2 * (len(live) + n)), self._store.dtype)
            store.view(raw)[:len(live)] = live.view(raw)
            self._store, self._used = store, len(live)
            self._buf_ix[:] = np.arange(len(live), dtype=np.int64)
        first = self._used
        self._store.view(raw)[first:first + n] = np.ascontiguousarray(run).view(raw)
        self._used += n
        return first

    def flush(self, now: int) -> None:
        """Emit and purge every buffered event with ``ts + K <= clk``."""
        self._release(now)

    def release(self, now: int) -> None:
        self._release(now)

    def time_stamps(self) -> np.ndarray:
        return self._buf_ts

    def unhanded(self) -> np.ndarray:
        return self.rows  # pure K-slack hands an event on only as it purges it

    def drop_unhanded(self, keep: np.ndarray) -> None:
        self._keep(keep)

    # nothing handed on stays held, so no emitted prefix and no snapshot
    @property
    def n_emitted(self) -> int:
        return 0

    def snapshots(self) -> np.ndarray:
        return _NO_SNAPSHOTS

    @property
    def last_snapshot(self) -> Snapshot | None:
        return None

    def contents(self) -> Contents:
        return Contents(self.rows, self._buf_ts, self._buf_tb, self._horizon,
                        dict(self._purged_seq))

    def load_contents(self, contents: Contents) -> None:
        if contents.snaps is not None:
            raise ValueError("a speculative buffer's contents do not fit a K-slack buffer")
        self._horizon = contents.horizon
        self._purged_seq = dict(contents.purged_seq)
        self._load(contents.rows, contents.ts, contents.tb)

    def _release(self, now: int) -> None:
        """Emit and purge every buffered event with ``ts + K <= clk``."""
        st = self.state
        if self._tail == self._head:
            return
        ready = int(np.searchsorted(self._buf_ts, st.clk - st.k, side="right"))
        if ready:
            out = np.take(self._store, self._buf_ix[:ready])
            self._head += ready
            last = out[-1]
            self._horizon = (int(last["ts"]), int(tiebreak(last["producer"], last["seq"])))
            st.stats.purged += ready
            max_per_producer(out, self._purged_seq)
            if st.trace is not None:
                for r in out:
                    st.note("emit", r)
            self.driver.process(out, None, now, update=False)

    def _begin(self, batch: np.ndarray, flags: np.ndarray) -> Any:
        return proposals(self.clock, batch, flags), flags

    def _after_control(self, ctx: Any, c: int, now: int) -> None:
        """After a punctuation: a clock update as in the kernel (an event clock measures
        the delays pending against it); release what is ready if the clock moved."""
        proposal, flags = ctx
        if (flags[c] & ev.PROGRESS and proposal[c] != _kernels.NO_CLOCK
                and punctuate(self.clock, self.state, int(proposal[c]))):
            self._release(now)

    # ------------------------------------------------------------ storage
    def _run(self, batch: np.ndarray, ctx: Any, start: int, end: int, now: int) -> None:
        self._order(batch[start:end], ctx[0][start:end], now)

    def _find(self, producer: int, seq: int) -> int | None:
        ix = self._buf_ix
        held = np.flatnonzero((self._store["producer"][ix] == producer)
                              & (self._store["seq"][ix] == seq))
        return int(held[0]) if len(held) else None

    def _held(self, i: int) -> np.void:
        return self._store[self._buf_ix[i]]

    def _revoke(self, producer: int, seq: int, now: int) -> None:
        ix = self._buf_ix
        gone = (self._store["producer"][ix] == producer) & (self._store["seq"][ix] >= seq)
        self.state.stats.events_removed += int(gone.sum())
        self._keep(~gone)

    def _drop(self, i: int, now: int) -> None:
        keep = np.ones(len(self._buf_ix), bool)
        keep[i] = False
        self._keep(keep)

    def _replace(self, i: int, row: np.ndarray, key: tuple[int, int], now: int) -> None:
        self._drop(i, now)
        self._order(row, proposals(self.clock, row, row["flags"]), now)

    def _keep(self, keep: np.ndarray) -> None:
        self._hold(self._buf_ix[keep], self._buf_ts[keep], self._buf_tb[keep])

    # ------------------------------------------------------------ the kernel
    def _order(self, run: np.ndarray, proposal: np.ndarray, now: int) -> None:
        """A run of data events through the kernel: clock (``proposal`` per event), K,
        late events, emission."""
        st = self.state
        first = self._append(run)
        store = self._store
        process_late = self.late_policy == "process"
        self._make_room(len(run))
        # scalars as Python ints: Numba types them as int64 as it does NumPy's, for less
        (emitted, ne, late, nl, head, tail, clk, k, pending, h_ts,
         h_tb) = _kernels.kslack_order(
            self._ix, self._ts, self._tb, self._head, self._tail,
            run["ts"], run["producer"], run["seq"], run["kplus"],
            np.ascontiguousarray(proposal), self.clock.immediate, st.clk, st.k,
            st.pending, self._horizon[0], self._horizon[1],
            process_late, first, TIEBREAK_SHIFT)
        st.clk, st.k, st.pending = clk, k, pending
        self._head, self._tail = head, tail
        self._horizon = (h_ts, h_tb)
        if nl:
            st.to_late(np.take(store, late[:nl]))
            if process_late:
                st.stats.late_processed += nl
        if ne:
            out = store.take(emitted[:ne])
            st.stats.purged += ne - (nl if process_late else 0)
            max_per_producer(out, self._purged_seq)
            if st.trace is not None:
                for r in out:
                    st.note("emit", r)
            self.driver.process(out, None, now, update=False)
