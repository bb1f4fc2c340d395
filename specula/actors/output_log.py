"""What a detector actor generated, kept in memory and on its checkpoint storage: the
net output (every emission applied), the late events, and, in a run that hands its
final detections on as they settle (:mod:`.settled`), a tally of what it handed on and
then forgot, so that an actor of a stream that never ends holds bounded memory.

On storage (the actor's :class:`~.recovery.Store`), every checkpoint writes a
*segment*, ``net-<i>``: the batches the net output applied since the previous one
(rows, lengths, emission times) and the late events the unit set aside meanwhile, as
:mod:`.frames` (each batch's bytes written from where they lie, not joined first).
Segments are immutable and numbered; replaying them in order rebuilds the net output
and the late side output. A reader beside the running actor (the driver's
:class:`~.settled.SettledTail`) follows them.

Forgetting. Once the tail has handed on the net events below a counter and the
segments below an index (emissions and late events), the driver tells the actor
(:meth:`ActorOutput.forget`). At its next checkpoint the actor drops those events from
its net output (keeping their count per type and their latencies in a
:class:`HandedOn`), drops the late events of those segments, and writes a *base*,
``base-<i>``: the net output and late events kept, and the tally, as of segment ``i``.
A restarted actor then reads the base and the segments after it, not the whole run.
Once that base's checkpoint is written, the segments below both the base and the
index handed on are deleted, so storage holds what a restart or the tail can still
read, not the whole stream.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specula import events as ev
from specula.actors.frames import frames, read_frames
from specula.actors.inbox import Histogram
from specula.actors.recovery import Checkpoints, Store, unpack_checkpoint
from specula.ordering.checkpoint import pack_array, unpack_array
from specula.ordering.net import NetOutput

__all__ = ["ActorOutput", "Base", "HandedOn", "Segment", "persisted_net", "read_base",
           "read_segment"]


@dataclass
class HandedOn:
    """What an actor handed on and forgot: net events per type, and their detection
    latencies in a :class:`~.inbox.Histogram` (seconds; mean exact, percentiles to a
    bin's width, ~6 %)."""

    by_type: dict[int, int] = field(default_factory=dict)
    latency: Histogram = field(default_factory=Histogram)

    @property
    def events(self) -> int:
        return sum(self.by_type.values())

    def add(self, rows: np.ndarray, latency_s: np.ndarray) -> None:
        """Count the net events ``rows`` with their latencies in seconds."""
        types, counts = np.unique(rows["type"], return_counts=True)
        for t, n in zip(types.tolist(), counts.tolist(), strict=True):
            self.by_type[t] = self.by_type.get(t, 0) + n
        self.latency.add_all(latency_s)

    def absorb(self, other: HandedOn) -> None:
        for t, n in other.by_type.items():
            self.by_type[t] = self.by_type.get(t, 0) + n
        self.latency.absorb(other.latency)

    @classmethod
    def total(cls, parts: list[HandedOn]) -> HandedOn | None:
        """The instances' tallies added up; None when none handed anything on."""
        if not any(p.events for p in parts):
            return None
        out = cls()
        for p in parts:
            out.absorb(p)
        return out

    def state(self) -> list[Any]:
        h = self.latency
        return [[[t, n] for t, n in self.by_type.items()], pack_array(h.counts), h.count,
                h.total, h.max]

    @classmethod
    def from_state(cls, state: list[Any]) -> HandedOn:
        by_type, counts, count, total, top = state
        out = cls({int(t): int(n) for t, n in by_type})
        out.latency.counts = unpack_array(counts)
        out.latency.count, out.latency.total, out.latency.max = count, total, top
        return out


@dataclass
class Segment:
    """One checkpoint's share of an actor's output: the net output's batches applied
    since the previous checkpoint and the late events set aside meanwhile."""

    rows: np.ndarray
    lengths: np.ndarray
    times: np.ndarray
    late: np.ndarray

    def apply_to(self, net: NetOutput) -> None:
        """Apply the segment's batches to ``net``, at their emission times."""
        net.reapply(self.rows, self.lengths, self.times)


def write_segment(store: Store, index: int, net: NetOutput, start: int,
                  late: np.ndarray) -> None:
    """Segment ``index``: what ``net`` applied from its ``start``-th batch on, and
    ``late``, as :mod:`.frames` (the batches written one by one)."""
    chunks, lengths, times = net.log(start)
    store.write(f"net-{index:06d}", *frames(None, [
        chunks or [np.empty(0, net.dtype)], [lengths], [times], [late]]))


def read_segment(store: Store, index: int) -> Segment:
    """Segment ``index`` of ``store`` (``FileNotFoundError`` if it is missing)."""
    data = store.read(f"net-{index:06d}")
    if data is None:
        raise FileNotFoundError(f"{store.path}: output segment {index} is missing")
    return Segment(*read_frames(data)[1])


class ActorOutput:
    """An actor's net output, late events and what it handed on (see the module).

    ``store`` is the actor's checkpoint storage (None: no checkpoints, nothing is
    written or forgotten).
    """

    def __init__(self, dtype: np.dtype, late_dtype: np.dtype, store: Store | None) -> None:
        self.net = NetOutput(dtype)
        self.handed = HandedOn()
        self.store = store
        self.segments = 0        # segments written
        self.base = 0            # the segment index of the last base (0: none)
        self._late_dtype = late_dtype
        self._late: list[tuple[int, np.ndarray]] = []  # (segment, rows), kept in memory
        self._saved = 0          # net batches the segments hold
        self._forgotten = (0, 0)  # net counter and segment index forgotten below
        self._forget = (0, 0)    # ... asked for
        self._stale: list[int] = []  # bases to remove once a checkpoint names a newer one
        self._swept = 0          # segments below this index are deleted from storage

    def apply(self, out: np.ndarray, now: int) -> None:
        """Apply the unit's output (at emission time ``now``) to the net output."""
        self.net.apply(out, now)

    def late(self) -> np.ndarray:
        """The late events written to segments and still held, in order."""
        parts = [rows for _, rows in self._late]
        return ev.concat_records(parts) if parts else np.empty(0, self._late_dtype)

    def forget(self, seq: int, segments: int) -> None:
        """Ask to drop, at the next :meth:`save`, the net events below ``seq`` and the
        late events of segments below ``segments``: both were handed on for good."""
        self._forget = (max(self._forget[0], seq), max(self._forget[1], segments))

    def save(self, late: np.ndarray) -> None:
        """At a checkpoint: write a segment (if anything is new) of the net output's new
        batches and ``late``, the late events set aside since the last one; then apply
        a pending :meth:`forget` and write a base. Call :meth:`state` after it."""
        if self.net.batches > self._saved or len(late):
            write_segment(self._storage(), self.segments, self.net, self._saved, late)
            if len(late):
                self._late.append((self.segments, late))
            self.segments, self._saved = self.segments + 1, self.net.batches
        asked = self._forget  # one read: forget() may run in another thread
        if asked != self._forgotten:
            self._drop(*asked)

    def _drop(self, seq: int, segments: int) -> None:
        rows, times, self.net = self.net.split_at(seq)
        self.handed.add(rows, (times - rows["origin"]) * 1e-9)
        self._saved = self.net.batches
        self._late = [(i, rows) for i, rows in self._late if i >= segments]
        self._forgotten = (seq, segments)
        self._stale.append(self.base)
        self.base = self.segments
        write_base(self._storage(), Base(self.base, self.net, self._late, self.handed,
                                    self._forgotten))

    def committed(self) -> None:
        """The checkpoint naming the current base is written: remove older bases, and
        the segments below both the base (a restart reads from it) and the index handed
        on (the tail read them)."""
        for old in self._stale:
            if old and old != self.base:
                self._storage().delete(f"base-{old:06d}")
        self._stale.clear()
        end = min(self.base, self._forgotten[1])
        for i in range(self._swept, end):
            self._storage().delete(f"net-{i:06d}")
        self._swept = max(self._swept, end)

    def state(self) -> dict[str, Any]:
        """Where the output stands on storage, for the checkpoint."""
        return {"segments": self.segments, "base": self.base, "swept": self._swept}

    def _storage(self) -> Store:
        """The checkpoint storage, which every call that writes or reads needs."""
        if self.store is None:
            raise RuntimeError("the actor's output has no checkpoint storage")
        return self.store

    def restore(self, state: dict[str, Any]) -> None:
        """Back to a checkpoint's :meth:`state`: the base, then the segments after it."""
        self.segments, self.base = state["segments"], state["base"]
        self._swept = state.get("swept", 0)  # a restart deletes what was left again
        base = read_base(self._storage(), self.base, self.net.dtype)
        self.net, self._late, self.handed = base.net, base.late, base.handed
        self._forgotten = self._forget = base.forgotten
        for i in range(self.base, self.segments):
            seg = read_segment(self._storage(), i)
            seg.apply_to(self.net)
            if len(seg.late):
                self._late.append((i, seg.late))
        self._saved = self.net.batches


@dataclass
class Base:
    """An actor's output as of segment ``index`` after it forgot what was handed on:
    the net output kept, the late events kept (with their segments), the tally, and
    the counter and segment forgotten below."""

    index: int
    net: NetOutput
    late: list[tuple[int, np.ndarray]]
    handed: HandedOn
    forgotten: tuple[int, int]


def write_base(store: Store, base: Base) -> None:
    """Base ``base.index``, as :mod:`.frames`: the net output's batches, lengths and
    times, then each kept segment's late events."""
    chunks, lengths, times = base.net.log()
    store.write(f"base-{base.index:06d}", *frames(
        [[i for i, _ in base.late], base.handed.state(), list(base.forgotten)],
        [chunks or [np.empty(0, base.net.dtype)], [lengths], [times],
         *([r] for _, r in base.late)]))


def read_base(store: Store, index: int, dtype: np.dtype) -> Base:
    """Base ``index`` of ``store`` (0: none, an empty output)."""
    net = NetOutput(dtype)
    if not index:
        return Base(0, net, [], HandedOn(), (0, 0))
    data = store.read(f"base-{index:06d}")
    if data is None:
        raise FileNotFoundError(f"{store.path}: output base {index} is missing")
    (late_at, handed, forgotten), (rows, lengths, times, *late) = read_frames(data)
    net.reapply(rows, lengths, times)
    return Base(index, net, list(zip(late_at, late, strict=True)),
                HandedOn.from_state(handed), (int(forgotten[0]), int(forgotten[1])))


def persisted_net(checkpoints: Checkpoints, label: str, dtype: np.dtype) -> NetOutput:
    """The net output an actor's last checkpoint persisted and it still holds (the
    whole run's once the run is over, if it forgot nothing: every actor checkpoints at
    the end of the stream)."""
    store = checkpoints.store(label)
    data = store.read("checkpoint")
    output = ActorOutput(dtype, dtype, store)
    if data is not None:
        output.restore(unpack_checkpoint(data, label)["output"])
    return output.net
