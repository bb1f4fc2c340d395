"""Bounded memory for an ordering unit: what it does as it nears its
:class:`~specula.options.MemoryLimit`.

A K-slack unit holds every event until ``ts + K <= clk``, about the input rate times K
events, and K is the largest delay seen: disorder alone grows it without bound. A
speculative unit also holds a snapshot of its detector in front of each emission run it
may still replay. After every push the unit's :class:`MemoryGuard`

1. **backs off speculation**: while the buffer or the snapshots are above
   :data:`BACKOFF_SHARE` of their limit the unit runs at alpha 1 (pure K-slack on its
   speculative buffer): nothing more is emitted prematurely, so no new snapshot is
   taken and the held ones go as the purge passes them. It speculates again once both
   are below :data:`RESUME_SHARE`.
2. **caps K**: above the limit of buffered events it lowers K to the delay that brings
   the buffer down to :data:`RELEASE_SHARE` of the limit (the oldest events are emitted
   and purged at once); above the snapshot limit, to the delay that purges every
   emitted event but the last. Events that then arrive behind the horizon are late:
   counted, and in the late side output, like any late event; so are the revisions a
   producer sends of events the capped unit has released. K grows again with the next
   delay measured. ``memory_caps`` and ``memory_released`` count what this did.

   What a cap does below the unit: its net output is the in-order output of what it
   took in time, not of all its input, and every node below computes exactly on that
   output: their answers are the in-order graph's with the capped unit's late input
   left out, which is what the run's ``late`` counts and late side outputs say. The
   capped unit purges what it released, so it revises none of it later. A consumer
   that caps its own K takes the revisions of what it released as late (counted, in its
   late side output), and its net output is, in turn, the in-order output of what it
   took in time.
3. **fails clearly** when the buffer is still above twice its limit: those events are
   ahead of the clock (the unit has no clock yet, or its clock types lag its other
   inputs), so no K releases them, and :class:`MemoryLimitError` says so.

Beyond the unit, a Ray actor's inbox holds back its producers at its own bound
(``RayRuntime(inbox_events=...)``).

The snapshot bytes are an estimate: the snapshots held (positions of the emitted prefix
that carry one) times the pickled size of one, sampled every :data:`SIZE_SAMPLE_EVERY`
snapshots; while a snapshot at every emitted position would stay under the back-off
share, that bound stands in for the count. Every decision depends only on the unit's
input, so a unit restored from a checkpoint decides the same.
"""

from __future__ import annotations

import pickle
from typing import TYPE_CHECKING, Any

import numpy as np

from specula.options import MemoryLimit
from specula.ordering import _kernels
from specula.ordering.clock import ChannelClock

if TYPE_CHECKING:
    from specula.ordering.unit import OrderingUnit

#: Above this share of a limit speculation backs off ...
BACKOFF_SHARE = 0.8
#: ... until both are below this share.
RESUME_SHARE = 0.5
#: A cap of K brings the buffer down to this share of its limit.
RELEASE_SHARE = 0.75
#: A snapshot's pickled size is measured again after this many snapshots.
SIZE_SAMPLE_EVERY = 256
#: Bytes counted per snapshot besides its pickled state (the tuple, counters, slot).
SNAPSHOT_OVERHEAD = 96
#: Far from the snapshot limit, the snapshots held are counted every this many pushes
#: (for the peak figure): the count is a pass over the emitted prefix.
PEAK_SAMPLE_EVERY = 64


class MemoryLimitError(RuntimeError):
    """A unit holds more than its memory limit allows and no K can release it."""


class MemoryGuard:
    """The memory limit of one ordering unit and the state of its back-off."""

    def __init__(self, unit: OrderingUnit, limit: MemoryLimit) -> None:
        self.unit = unit
        self.limit = limit
        self.max_events = int(limit.buffered_events)
        self.max_snapshot_bytes = int(limit.snapshot_mb * 2**20)
        self.backed_off = False
        self._snapshot_size = 0  # pickled bytes of the last sampled snapshot
        self._next_sample = 0  # sample when stats.snapshots reaches this
        # the largest figures seen after a push (they depend on how input is batched,
        # so they are gauges here, not counters of UnitStats)
        self.peak_buffered = 0
        self.peak_snapshot_bytes = 0
        self._pushes = 0

    # ------------------------------------------------------------ figures
    def snapshot_bytes(self) -> int:
        """Estimated bytes of the detector snapshots the unit holds: the positions of
        the emitted prefix that carry one, times a snapshot's sampled pickled size."""
        buf = self.unit._buffer
        n_emitted = getattr(buf, "_n_emitted", 0)
        if not n_emitted:
            return 0
        held = int(np.count_nonzero(np.not_equal(buf._snaps[:n_emitted], None)))
        return held * self._snapshot_size_now() if held else 0

    def _snapshot_size_now(self) -> int:
        """A snapshot's bytes, measured again every :data:`SIZE_SAMPLE_EVERY` snapshots."""
        buf = self.unit._buffer
        if self.unit.stats.snapshots >= self._next_sample and buf._last_snap is not None:
            self._snapshot_size = _pickled_size(buf._last_snap.state)
            self._next_sample = self.unit.stats.snapshots + SIZE_SAMPLE_EVERY
        return self._snapshot_size + SNAPSHOT_OVERHEAD

    def _snapshot_figure(self) -> tuple[int, bool]:
        """:meth:`snapshot_bytes` where it can matter; where even a snapshot at every
        emitted position stays under the back-off share (and speculation is not backed
        off) that bound is returned instead, which decides the same and costs no count
        over the prefix (the count is O(prefix) per push). The count is still taken
        every :data:`PEAK_SAMPLE_EVERY` pushes, for the peak figure. Returns the figure
        and whether it is the count."""
        self._pushes += 1
        bound = self.unit._buffer._n_emitted * self._snapshot_size_now()
        if (bound > BACKOFF_SHARE * self.max_snapshot_bytes or self.backed_off
                or self._pushes % PEAK_SAMPLE_EVERY == 0):
            return self.snapshot_bytes(), True
        return bound, False

    # ------------------------------------------------------------ after a push
    def check(self, now: int) -> None:
        """Back off, cap K or fail, as the figures after a push ask. Far from the limits
        this is a few attribute reads (see :meth:`_snapshot_figure`)."""
        unit = self.unit
        held = len(unit._buffer)
        snap, counted = 0, False
        if unit.speculative:
            snap, counted = self._snapshot_figure()
            self._back_off(held, snap)
        if held > self.max_events or snap > self.max_snapshot_bytes:
            self._cap(self._cut_for_events(held) if held > self.max_events
                      else self._cut_for_snapshots(), now)
            held = len(unit._buffer)
            if unit.speculative:
                snap, counted = self.snapshot_bytes(), True
            if held > 2 * self.max_events:
                raise MemoryLimitError(
                    f"{unit.name}: holds {held:,} events, more than twice its limit of "
                    f"{self.max_events:,} (MemoryLimit.buffered_events), and no K releases "
                    f"them: they are ahead of the unit's clock ({_clock_words(unit)}). "
                    f"Raise the node's memory=MemoryLimit(buffered_events=...), or "
                    f"{_clock_advice(unit)}")
        if held > self.peak_buffered:
            self.peak_buffered = held
        if counted and snap > self.peak_snapshot_bytes:
            self.peak_snapshot_bytes = snap

    def _back_off(self, held: int, snap: int) -> None:
        share = max(held / self.max_events, snap / self.max_snapshot_bytes)
        if not self.backed_off and share > BACKOFF_SHARE:
            self.backed_off = True
            self.unit.stats.memory_backoffs += 1
        elif self.backed_off and share < RESUME_SHARE:
            self.backed_off = False

    def _cut_for_events(self, held: int) -> int | None:
        """The time stamp up to which events must go to bring the buffer down to
        :data:`RELEASE_SHARE` of the limit."""
        keep = int(self.max_events * RELEASE_SHARE)
        return int(self.unit._buffer.time_stamps()[held - keep - 1])

    def _cut_for_snapshots(self) -> int | None:
        """The time stamp up to which events must go so that the purge drops every
        emitted event but the last (and the snapshots in front of them)."""
        buf = self.unit._buffer
        return int(buf.time_stamps()[buf._n_emitted - 1]) if buf._n_emitted else None

    def _cap(self, cut: int | None, now: int) -> None:
        """Lower K to ``clk - cut`` (never below 0, never above K) and release, the
        events a speculative purge keeps back (the last emitted one) included. A
        speculative buffer releases its whole emitted prefix at least: a replay needs a
        snapshot in front of the oldest emitted event it keeps, and only the events
        emitted by the release itself are sure to have one."""
        unit = self.unit
        if cut is None or unit.clk == _kernels.NO_CLOCK:
            return
        if unit.speculative and unit._buffer._n_emitted:
            cut = max(cut, self._cut_for_snapshots())
        k = min(unit.k, max(0, unit.clk - cut))
        lowered = k < unit.k
        before = unit.stats.purged
        unit.k = k
        unit._buffer.release(now)  # with K unchanged: what the purge had kept back
        released = unit.stats.purged - before
        if lowered or released:
            unit.stats.memory_caps += 1
            unit.stats.memory_released += released

    def figures(self) -> dict[str, Any]:
        """The limits, the largest buffer and snapshot estimate seen, and whether
        speculation is backed off now: the ``memory`` entry of a detector's report."""
        return {"limit_events": self.max_events, "limit_snapshot_mb": self.limit.snapshot_mb,
                "peak_buffered": self.peak_buffered,
                "peak_snapshot_kb": self.peak_snapshot_bytes // 1024,
                "backed_off": self.backed_off}

    # ------------------------------------------------------------ checkpoints
    def state(self) -> dict[str, Any]:
        return {"backed_off": self.backed_off, "size": self._snapshot_size,
                "next": self._next_sample, "peaks": [self.peak_buffered,
                                                     self.peak_snapshot_bytes]}

    def load_state(self, state: dict[str, Any]) -> None:
        self.backed_off = bool(state["backed_off"])
        self._snapshot_size, self._next_sample = int(state["size"]), int(state["next"])
        self.peak_buffered, self.peak_snapshot_bytes = (int(v) for v in state["peaks"])


def merge_figures(figures: list[dict[str, Any]]) -> dict[str, Any]:
    """The :meth:`MemoryGuard.figures` of a node's instances as one: the largest peaks,
    backed off if any instance is."""
    out = dict(figures[0])
    for f in figures[1:]:
        out["peak_buffered"] = max(out["peak_buffered"], f["peak_buffered"])
        out["peak_snapshot_kb"] = max(out["peak_snapshot_kb"], f["peak_snapshot_kb"])
        out["backed_off"] = out["backed_off"] or f["backed_off"]
    return out


def _pickled_size(state: Any) -> int:
    try:
        return len(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception:  # the contract asks for picklable state; estimate the rest
        return 1024


def _clock_types(unit: OrderingUnit) -> list[str]:
    names = unit._type_names
    return [names[i] for i in np.flatnonzero(unit.clock_source.clock_types())
            if i < len(names)]


def _clock_words(unit: OrderingUnit) -> str:
    where = "it has no clock yet" if unit.clk == _kernels.NO_CLOCK \
        else f"its clock is at {unit.clk}"
    source = unit.clock_source
    if isinstance(source, ChannelClock):
        return (f"{where}: the low watermark of its producers' progress, held back by "
                f"{', '.join(source.holding_back())}")
    return where


def _clock_advice(unit: OrderingUnit) -> str:
    """What moves the clock: a unit clocked by its producers waits for the slowest, and
    a producer's progress stops where a level-1 node's clock events stop coming; a
    level-1 unit waits for its own clock events."""
    idle = ("idle_after=... (ticks of event time: when its clock types have sent nothing "
            "for that long, its clock follows the raw stream's; "
            "specula.options.NODE_OPTIONS)")
    if isinstance(unit.clock_source, ChannelClock):
        return (f"if the producer that holds it back has stopped, give the level-1 node "
                f"above it whose clock types get no events {idle}")
    return (f"send its clock types ({', '.join(_clock_types(unit))}) with the other "
            f"inputs, or give the node {idle}")
