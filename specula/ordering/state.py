"""The state of one ordering unit as one value: clock, K, counters, the late side output.

An :class:`~specula.ordering.unit.OrderingUnit` owns one :class:`UnitState` and hands
it to its collaborators (the buffers, the detector driver, the memory guard, the clock
functions), which read and write it through its fields; a checkpoint
(:mod:`specula.ordering.checkpoint`) saves it as plain data. What the buffers hold
(events, keys, snapshots) is theirs, and reaches checkpoints as
:class:`~specula.ordering._buffer.Contents`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import NamedTuple

import numpy as np

from specula.ordering import _kernels


class TraceEntry(NamedTuple):
    """One step of a unit, recorded when tracing is on.

    ``kind`` is one of ``emit``, ``replay`` (an emission during a replay), ``restore``
    (the detector went back to the snapshot taken before event ``type``/``ts``),
    ``purge``, ``late``, ``retract`` (a counter message sent) and ``update`` (a
    received update discarded as equal).
    """

    kind: str
    type: str
    ts: int


@dataclass
class UnitStats:
    """Counters of one ordering unit. No event leaves the unit without one of them."""

    events_in: int = 0
    control_in: int = 0
    emitted: int = 0
    replayed: int = 0
    relocations: int = 0
    snapshots: int = 0
    snapshots_shared: int = 0
    restores: int = 0
    snapshot_comparisons: int = 0
    early_stops: int = 0
    purged: int = 0
    late: int = 0
    late_processed: int = 0
    generated: int = 0
    retractions_sent: int = 0
    events_retracted: int = 0
    updates_sent: int = 0
    revocations_sent: int = 0
    retractions_received: int = 0
    revocations_received: int = 0
    progress_in: int = 0
    events_removed: int = 0
    #: held events the node's input shedder dropped before the detector saw them
    events_shed: int = 0
    updates_applied: int = 0
    updates_discarded: int = 0
    #: the memory limit (:mod:`specula.ordering.memory`): times speculation backed off,
    #: times K was capped, and the events those caps emitted and purged early
    memory_backoffs: int = 0
    memory_caps: int = 0
    memory_released: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

    def work(self) -> tuple[int, int, int, int]:
        """The counters a cost model charges: emitted, snapshots, restores, snapshot
        comparisons (cheaper to read before and after a push than a copy of all)."""
        return self.emitted, self.snapshots, self.restores, self.snapshot_comparisons

    def handed(self) -> int:
        """Events handed to the detector for the first time (replays not counted)."""
        return self.emitted - self.replayed


class Trace:
    """The steps of a unit as :class:`TraceEntry` rows (for tests and demos; slow)."""

    def __init__(self, type_names: Sequence[str]) -> None:
        self.entries: list[TraceEntry] = []
        self.type_names = type_names

    def note(self, kind: str, row: np.ndarray | np.void) -> None:
        """Record step ``kind`` for the event ``row`` (or the first of ``rows``)."""
        r = row[0] if isinstance(row, np.ndarray) else row
        self.entries.append(TraceEntry(kind, self.type_names[int(r["type"])], int(r["ts"])))

    def add(self, kind: str, type_name: str, ts: int) -> None:
        self.entries.append(TraceEntry(kind, type_name, ts))


@dataclass
class UnitState:
    """What an ordering unit knows between two pushes, besides its buffer and detector.

    ``clk`` and ``k`` are the clock and K; ``pending`` the delay an event clock measures
    at its next update (``NO_DELAY``: none); ``handed`` the progress of the last push
    that moved the clock; ``seq`` the next output's counter (or label) and ``origin``
    the largest origin handed to the detector, both piggybacked on snapshots; ``late``
    the late side output not yet taken; ``trace`` the steps, when tracing is on.
    """

    clk: int = int(_kernels.NO_CLOCK)
    k: int = 0
    pending: int = int(_kernels.NO_DELAY)
    handed: int | None = None
    seq: int = 0
    origin: int = 0
    late: list[np.ndarray] = field(default_factory=list)
    stats: UnitStats = field(default_factory=UnitStats)
    trace: Trace | None = None

    def to_late(self, rows: np.ndarray) -> None:
        """Count ``rows`` as late and keep a copy for the late side output."""
        self.stats.late += len(rows)
        self.late.append(rows.copy())
        if self.trace is not None:
            for r in rows:
                self.trace.note("late", r)

    def note(self, kind: str, row: np.ndarray | np.void) -> None:
        """Trace step ``kind`` for ``row`` when tracing is on."""
        if self.trace is not None:
            self.trace.note(kind, row)
