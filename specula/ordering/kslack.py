"""The pure K-slack buffer (``alpha = 1``) of an ordering unit: arrays and a Numba kernel.

An event is emitted and purged at once when ``ts + K <= clk``, so nothing emitted stays
buffered and no snapshot is ever taken. Each run of data events goes through one call of
:func:`specula.ordering._kernels.kslack_order`, which also advances the unit's clock and
K event by event; control messages are handled by :class:`~specula.ordering._buffer.Buffer`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from specula import events as ev
from specula.events import concat_records
from specula.ordering import _kernels
from specula.ordering._buffer import Buffer
from specula.ordering._records import TIEBREAK_SHIFT, max_per_producer, tiebreak

if TYPE_CHECKING:
    from specula.ordering.unit import OrderingUnit


class KSlackBuffer(Buffer):
    """The buffered events as a record array sorted by key, with their time stamps and
    tie-breaks as int64 arrays for the kernel."""

    trace_discarded_updates = False
    refuse_late_updates = False

    def __init__(self, unit: OrderingUnit) -> None:
        super().__init__(unit)
        self._buf = np.empty(0, unit.in_dtype)
        self._buf_ts = np.empty(0, np.int64)
        self._buf_tb = np.empty(0, np.int64)

    def __len__(self) -> int:
        return len(self._buf)

    def flush(self, now: int) -> None:
        """Emit and purge every buffered event with ``ts + K <= clk``."""
        self._release(now)

    def release(self, now: int) -> None:
        self._release(now)

    def time_stamps(self) -> np.ndarray:
        return self._buf_ts

    def _release(self, now: int) -> None:
        """Emit and purge every buffered event with ``ts + K <= clk``."""
        u = self.unit
        ready = int(np.searchsorted(self._buf_ts, u.clk - u.k, side="right"))
        if ready:
            out, self._buf = self._buf[:ready], self._buf[ready:]
            self._buf_ts, self._buf_tb = self._buf_ts[ready:], self._buf_tb[ready:]
            last = out[-1]
            self._horizon = (int(last["ts"]), int(tiebreak(last["producer"], last["seq"])))
            u.stats.purged += ready
            max_per_producer(out, self._purged_seq)
            if u.trace is not None:
                for r in out:
                    u._note("emit", r)
            u._process(out, None, now, update=False)

    def _begin(self, batch: np.ndarray, flags: np.ndarray) -> Any:
        return self.unit._proposals(batch, flags), flags

    def _after_control(self, ctx: Any, c: int, now: int) -> None:
        """After a punctuation that moved the clock: release what is ready."""
        proposal, flags = ctx
        u = self.unit
        if flags[c] & ev.PROGRESS and proposal[c] > u.clk:
            u.clk = int(proposal[c])
            self._release(now)

    # ------------------------------------------------------------ storage
    def _run(self, batch: np.ndarray, ctx: Any, start: int, end: int, now: int) -> None:
        self._order(batch[start:end], ctx[0][start:end], now)

    def _find(self, producer: int, seq: int) -> int | None:
        held = np.flatnonzero((self._buf["producer"] == producer) & (self._buf["seq"] == seq))
        return int(held[0]) if len(held) else None

    def _held(self, i: int) -> np.void:
        return self._buf[i]

    def _revoke(self, producer: int, seq: int, now: int) -> None:
        gone = (self._buf["producer"] == producer) & (self._buf["seq"] >= seq)
        self.unit.stats.events_removed += int(gone.sum())
        self._keep(~gone)

    def _drop(self, i: int, now: int) -> None:
        keep = np.ones(len(self._buf), bool)
        keep[i] = False
        self._keep(keep)

    def _replace(self, i: int, row: np.ndarray, key: tuple[int, int], now: int) -> None:
        self._drop(i, now)
        self._order(row, self.unit._proposals(row, row["flags"]), now)

    def _keep(self, keep: np.ndarray) -> None:
        self._buf = self._buf[keep]
        self._buf_ts = self._buf_ts[keep]
        self._buf_tb = self._buf_tb[keep]

    # ------------------------------------------------------------ the kernel
    def _order(self, run: np.ndarray, proposal: np.ndarray, now: int) -> None:
        """A run of data events through the kernel: clock (``proposal`` per event), K,
        late events, emission."""
        u = self.unit
        store = concat_records([self._buf, run]) if len(self._buf) else run
        process_late = u.late_policy == "process"
        (emitted, ne, late, nl, remaining, self._buf_ts, self._buf_tb, clk, k, pending,
         h_ts, h_tb) = _kernels.kslack_order(
            self._buf_ts, self._buf_tb, run["ts"], run["producer"], run["seq"], run["kplus"],
            np.ascontiguousarray(proposal), u.clock_source.immediate, np.int64(u.clk),
            np.int64(u.k),
            np.int64(u._pending), np.int64(self._horizon[0]), np.int64(self._horizon[1]),
            process_late, np.int64(len(self._buf)), TIEBREAK_SHIFT)
        u.clk, u.k, u._pending = int(clk), int(k), int(pending)
        self._horizon = (int(h_ts), int(h_tb))
        if nl:
            u._to_late(np.take(store, late[:nl]))
            if process_late:
                u.stats.late_processed += nl
        self._buf = np.take(store, remaining)
        if ne:
            out = np.take(store, emitted[:ne])
            u.stats.purged += ne - (nl if process_late else 0)
            max_per_producer(out, self._purged_seq)
            if u.trace is not None:
                for r in out:
                    u._note("emit", r)
            u._process(out, None, now, update=False)
