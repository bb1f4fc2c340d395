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
from collections.abc import Sequence
from typing import Any

import numpy as np

from specula.options import MemoryLimit
from specula.ordering import _kernels
from specula.ordering._buffer import Buffer
from specula.ordering._records import is_set
from specula.ordering.clock import ChannelClock, ClockSource
from specula.ordering.state import UnitState

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
    """The memory limit of one ordering unit and the state of its back-off.

    It reads the unit's ``buffer`` and ``state`` and lowers K in the state; ``clock``,
    ``type_names`` and ``name`` say in an error what holds the clock back.
    """

    def __init__(self, limit: MemoryLimit, state: UnitState, buffer: Buffer,
                 clock: ClockSource, *, speculative: bool, name: str,
                 type_names: Sequence[str]) -> None:
        self.unit_state = state
        self.buffer = buffer
        self.clock = clock
        self.speculative = speculative
        self.name = name
        self.type_names = type_names
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
        if not self.buffer.n_emitted:
            return 0
        held = int(np.count_nonzero(is_set(self.buffer.snapshots())))
        return held * self._snapshot_size_now() if held else 0

    def _snapshot_size_now(self) -> int:
        """A snapshot's bytes, measured again every :data:`SIZE_SAMPLE_EVERY` snapshots."""
        last, taken = self.buffer.last_snapshot, self.unit_state.stats.snapshots
        if taken >= self._next_sample and last is not None:
            self._snapshot_size = _pickled_size(last.state)
            self._next_sample = taken + SIZE_SAMPLE_EVERY
        return self._snapshot_size + SNAPSHOT_OVERHEAD

    def _snapshot_figure(self) -> tuple[int, bool]:
        """:meth:`snapshot_bytes` where it can matter; where even a snapshot at every
        emitted position stays under the back-off share (and speculation is not backed
        off) that bound is returned instead, which decides the same and costs no count
        over the prefix (the count is O(prefix) per push). The count is still taken
        every :data:`PEAK_SAMPLE_EVERY` pushes, for the peak figure. Returns the figure
        and whether it is the count."""
        self._pushes += 1
        bound = self.buffer.n_emitted * self._snapshot_size_now()
        if (bound > BACKOFF_SHARE * self.max_snapshot_bytes or self.backed_off
                or self._pushes % PEAK_SAMPLE_EVERY == 0):
            return self.snapshot_bytes(), True
        return bound, False

    # ------------------------------------------------------------ after a push
    def check(self, now: int) -> None:
        """Back off, cap K or fail, as the figures after a push ask. Far from the limits
        this is a few attribute reads (see :meth:`_snapshot_figure`)."""
        held = len(self.buffer)
        snap, counted = 0, False
        if self.speculative:
            snap, counted = self._snapshot_figure()
            self._back_off(held, snap)
        if held > self.max_events or snap > self.max_snapshot_bytes:
            self._cap(self._cut_for_events(held) if held > self.max_events
                      else self._cut_for_snapshots(), now)
            held = len(self.buffer)
            if self.speculative:
                snap, counted = self.snapshot_bytes(), True
            if held > 2 * self.max_events:
                raise MemoryLimitError(
                    f"{self.name}: holds {held:,} events, more than twice its limit of "
                    f"{self.max_events:,} (MemoryLimit.buffered_events), and no K releases "
                    f"them: they are ahead of the unit's clock ({self._clock_words()}). "
                    f"Raise the node's memory=MemoryLimit(buffered_events=...), or "
                    f"{self._clock_advice()}")
        if held > self.peak_buffered:
            self.peak_buffered = held
        if counted and snap > self.peak_snapshot_bytes:
            self.peak_snapshot_bytes = snap

    def _back_off(self, held: int, snap: int) -> None:
        share = max(held / self.max_events, snap / self.max_snapshot_bytes)
        if not self.backed_off and share > BACKOFF_SHARE:
            self.backed_off = True
            self.unit_state.stats.memory_backoffs += 1
        elif self.backed_off and share < RESUME_SHARE:
            self.backed_off = False

    def _cut_for_events(self, held: int) -> int | None:
        """The time stamp up to which events must go to bring the buffer down to
        :data:`RELEASE_SHARE` of the limit."""
        keep = int(self.max_events * RELEASE_SHARE)
        return int(self.buffer.time_stamps()[held - keep - 1])

    def _cut_for_snapshots(self) -> int | None:
        """The time stamp up to which events must go so that the purge drops every
        emitted event but the last (and the snapshots in front of them)."""
        n = self.buffer.n_emitted
        return int(self.buffer.time_stamps()[n - 1]) if n else None

    def _cap(self, cut: int | None, now: int) -> None:
        """Lower K to ``clk - cut`` (never below 0, never above K) and release, the
        events a speculative purge keeps back (the last emitted one) included. A
        speculative buffer releases its whole emitted prefix at least: a replay needs a
        snapshot in front of the oldest emitted event it keeps, and only the events
        emitted by the release itself are sure to have one."""
        st = self.unit_state
        if cut is None or st.clk == _kernels.NO_CLOCK:
            return
        if self.speculative and self.buffer.n_emitted:
            cut = max(cut, int(self.buffer.time_stamps()[self.buffer.n_emitted - 1]))
        k = min(st.k, max(0, st.clk - cut))
        lowered = k < st.k
        before = st.stats.purged
        st.k = k
        self.buffer.release(now)  # with K unchanged: what the purge had kept back
        released = st.stats.purged - before
        if lowered or released:
            st.stats.memory_caps += 1
            st.stats.memory_released += released

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


    # ------------------------------------------------------------ the error's words
    def _clock_types(self) -> list[str]:
        names = self.type_names
        return [names[i] for i in np.flatnonzero(self.clock.clock_types()).tolist()
                if i < len(names)]

    def _clock_words(self) -> str:
        clk = self.unit_state.clk
        where = "it has no clock yet" if clk == _kernels.NO_CLOCK else f"its clock is at {clk}"
        if isinstance(self.clock, ChannelClock):
            return (f"{where}: the low watermark of its producers' progress, held back by "
                    f"{', '.join(self.clock.holding_back())}")
        return where

    def _clock_advice(self) -> str:
        """What moves the clock: a unit clocked by its producers waits for the slowest,
        and a producer's progress stops where a level-1 node's clock events stop coming;
        a level-1 unit waits for its own clock events."""
        idle = ("idle_after=... (ticks of event time: when its clock types have sent "
                "nothing for that long, its clock follows the raw stream's; "
                "specula.options.NODE_OPTIONS)")
        if isinstance(self.clock, ChannelClock):
            return (f"if the producer that holds it back has stopped, give the level-1 node "
                    f"above it whose clock types get no events {idle}")
        return (f"send its clock types ({', '.join(self._clock_types())}) with the other "
                f"inputs, or give the node {idle}")


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
