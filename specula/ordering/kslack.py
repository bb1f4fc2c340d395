"""The pure K-slack buffer (``alpha = 1``) of an ordering unit: arrays and a Numba kernel.

An event is emitted and purged at once when ``ts + K <= clk``, so nothing emitted stays
buffered and no snapshot is ever taken. Each run of data events goes through one call of
:func:`specula.ordering._kernels.kslack_step` over the rows' bytes, which stores the run,
advances the unit's clock and K event by event and gathers the rows it emits; control
messages are handled by :class:`~specula.ordering._buffer.BufferBase`. A live step's
usual batch, a few data events of the unit's input types clocked by type, is taken
whole by :meth:`KSlackBuffer.push_few` (:func:`~specula.ordering._kernels.kslack_plain`
checks the types), without the base's cut into runs and control messages.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from specula import events as ev
from specula.ordering import _kernels
from specula.ordering._buffer import BufferBase, Contents, LatePolicy
from specula.ordering._records import TIEBREAK_SHIFT, layout, max_per_producer, tiebreak
from specula.ordering.clock import ClockSource, EventClock, proposals, punctuate
from specula.ordering.driver import DetectorDriver, Snapshot
from specula.ordering.state import UnitState

_NO_SNAPSHOTS = np.empty(0, object)
# the kernel's mask of clock types (empty: it takes the proposals given) in uint8: Numba's
# dispatcher types a bool array in Python, ~0.2 us a call
_NO_TYPES = np.zeros(0, np.uint8)
_NO_PROPOSALS = np.zeros(0, np.int64)
# the fields the kernel reads from a row's bytes, then those it stamps with an arrival,
# in its layout's order, and their types
_READ = (("ts", np.int64), ("type", np.int32), ("producer", np.int32), ("seq", np.int64),
         ("kplus", np.int64))
_STAMPED = (("ats", np.int64), ("origin", np.int64))
_NO_CLOCK = int(_kernels.NO_CLOCK)


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
                 in_dtype: np.dtype, late_policy: LatePolicy, input_types: np.ndarray) -> None:
        super().__init__(state, driver, clock, in_dtype=in_dtype, late_policy=late_policy)
        self._raw = np.dtype((np.void, in_dtype.itemsize))  # rows moved as bytes
        self._layout = layout(in_dtype, _READ + _STAMPED)
        # an event clock proposes by type, which the kernel reads itself
        self._by_type = isinstance(clock, EventClock)
        self._clock_types = np.ascontiguousarray(clock.clock_types(), np.uint8)
        # which type ids the unit takes (see push_few), in uint8 as the clock types
        self._input_types = np.ascontiguousarray(input_types, np.uint8)
        self._load(np.empty(0, in_dtype), np.empty(0, np.int64), np.empty(0, np.int64))

    def __len__(self) -> int:
        return self._tail - self._head

    @property
    def _buf_ix(self) -> np.ndarray:
        """Store indices of the buffered events, in key order (a view)."""
        return self._keys[0, self._head:self._tail]

    @property
    def _buf_ts(self) -> np.ndarray:
        return self._keys[1, self._head:self._tail]

    @property
    def _buf_tb(self) -> np.ndarray:
        return self._keys[2, self._head:self._tail]

    def _hold(self, ix: np.ndarray, ts: np.ndarray, tb: np.ndarray, room: int = 0) -> None:
        """Make ``ix, ts, tb`` the buffer's keys, in arrays with ``room`` to spare and
        at least as much again."""
        cap = max(256, 2 * (len(ix) + room))
        # rows: store indices, time stamps, tie-breaks; then the kernel's emitted and
        # late store indices (at most the buffer and the arrivals: within the capacity)
        # and its heap's three arrays (one array, no views of it kept: a copy or a
        # pickle of the buffer would make them arrays of their own)
        self._keys = np.empty((8, cap), np.int64)
        self._head, self._tail = 0, len(ix)
        self._keys[0, :len(ix)], self._keys[1, :len(ix)], self._keys[2, :len(ix)] = ix, ts, tb

    def _make_room(self, n: int) -> None:
        """Room for ``n`` more keys behind the buffer."""
        cap = self._keys.shape[1]
        if self._tail + n <= cap:
            return
        size = self._tail - self._head
        if size + n <= cap // 2:  # move to the front
            keys = self._keys[:3]
            keys[:, :size] = keys[:, self._head:self._tail]
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

    def _reserve(self, n: int) -> int:
        """Room for ``n`` rows behind the store's rows (compacting the store when it is
        full); returns the store index of the first of them."""
        if self._used + n > len(self._store):
            live = np.take(self._store, self._buf_ix)
            store = np.empty(max(256, 2 * (len(live) + n)), self._store.dtype)
            store.view(self._raw)[:len(live)] = live.view(self._raw)
            self._store, self._used = store, len(live)
            self._buf_ix[:] = np.arange(len(live), dtype=np.int64)
        first = self._used
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
        # an event clock's proposals are read in the kernel (data events) or when a
        # punctuation comes; a channel clock's take the batch's punctuations in first
        return batch, flags, None if self._by_type else proposals(self.clock, batch, flags)

    def _after_control(self, ctx: Any, c: int, now: int) -> None:
        """After a punctuation: a clock update as in the kernel (an event clock measures
        the delays pending against it); release what is ready if the clock moved."""
        batch, flags, proposal = ctx
        if not flags[c] & ev.PROGRESS:
            return
        if proposal is None:  # an event clock: the raw stream's clock proposes
            p = int(batch["ts"][c]) if int(batch["producer"][c]) == 0 else _NO_CLOCK
        else:
            p = int(proposal[c])
        if p != _NO_CLOCK and punctuate(self.clock, self.state, p):
            self._release(now)

    # ------------------------------------------------------------ storage
    def _run(self, batch: np.ndarray, ctx: Any, start: int, end: int, now: int,
             arrived: int | None) -> None:
        proposal = ctx[2]
        self._order(batch[start:end], None if proposal is None else proposal[start:end], now,
                    arrived)

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
        self._order(row, None if self._by_type else proposals(self.clock, row, row["flags"]),
                    now)

    def _keep(self, keep: np.ndarray) -> None:
        self._hold(self._buf_ix[keep], self._buf_ts[keep], self._buf_tb[keep])

    # ------------------------------------------------------------ the kernel
    def push_few(self, run: np.ndarray, now: int) -> bool:
        """:meth:`push` of a live step's usual batch, a few data events (no flag set;
        contiguous, in the input dtype), clocked by type: the batch is one run, which
        goes to the kernel without being cut into runs and control messages first.
        The kernel checks that every event is of one of the unit's input types; False,
        with nothing done, when one is not (the unit then takes the general way, which
        leaves it out). Counts the arrivals in."""
        n = len(run)
        first = self._reserve(n)
        self._make_room(n)
        st = self.state
        process_late = self.late_policy == "process"
        rows, ne, nl, head, tail, clk, k, pending, h_ts, h_tb, generated = (
            _kernels.kslack_plain(
                self._keys, self._head, self._tail, np.frombuffer(self._store, np.uint8),
                first, np.frombuffer(run, np.uint8), self._layout, self._clock_types,
                self._input_types, self.clock.immediate, st.clk, st.k, st.pending,
                self._horizon[0], self._horizon[1], process_late, TIEBREAK_SHIFT))
        if ne < 0:
            self._used -= n  # the rows reserved stay unused
            return False
        st.stats.events_in += n
        st.clk, st.k, st.pending = clk, k, pending
        self._ordered(rows, ne, nl, head, tail, h_ts, h_tb, generated, now)
        return True

    def _order(self, run: np.ndarray, proposal: np.ndarray | None, now: int,
               arrived: int | None = None) -> None:
        """A run of data events through the kernel: clock (``proposal`` per event; None:
        an event clock's, read by type in the kernel), K, late events, emission. The
        kernel stores the run, stamped with ``arrived`` if given (raw rows read-only
        where they lie, :meth:`~specula.ordering.unit.OrderingUnit.push`)."""
        st = self.state
        n = len(run)
        if run.dtype is not self.in_dtype and run.dtype != self.in_dtype:
            raise TypeError(f"a run of {run.dtype} for a K-slack buffer of {self.in_dtype}")
        first = self._reserve(n)
        self._make_room(n)
        if not run.flags.c_contiguous:
            run = np.ascontiguousarray(run)
        process_late = self.late_policy == "process"
        # scalars as Python ints: Numba types them as int64 as it does NumPy's, for less
        rows, ne, nl, head, tail, clk, k, pending, h_ts, h_tb = _kernels.kslack_step(
            self._keys, self._head, self._tail, np.frombuffer(self._store, np.uint8), first,
            np.frombuffer(run, np.uint8), self._layout, arrived is not None,
            0 if arrived is None else arrived,
            self._clock_types if proposal is None else _NO_TYPES,
            _NO_PROPOSALS if proposal is None else np.ascontiguousarray(proposal),
            self.clock.immediate, st.clk, st.k, st.pending, self._horizon[0],
            self._horizon[1], process_late, TIEBREAK_SHIFT)
        st.clk, st.k, st.pending = clk, k, pending
        self._ordered(rows, ne, nl, head, tail, h_ts, h_tb, True, now)

    def _ordered(self, rows: np.ndarray, ne: int, nl: int, head: int, tail: int, h_ts: int,
                 h_tb: int, generated: bool, now: int) -> None:
        """After the kernel: the buffer's bounds and horizon it returned, its late events
        set aside, the ``ne`` events it emitted (``rows``, as bytes) counted, their
        counters folded per producer (``generated``: some may be generated events) and
        handed to the detector."""
        st = self.state
        process_late = self.late_policy == "process"
        self._head, self._tail = head, tail
        self._horizon = (h_ts, h_tb)
        if nl:
            st.to_late(np.take(self._store, self._keys[4, :nl]))
            if process_late:
                st.stats.late_processed += nl
        if ne:
            out = np.frombuffer(rows, self.in_dtype)
            st.stats.purged += ne - (nl if process_late else 0)
            if generated:
                max_per_producer(out, self._purged_seq)
            if st.trace is not None:
                for r in out:
                    st.note("emit", r)
            self.driver.process(out, None, now, update=False)
