"""What an ordering unit asks of its buffer (:class:`Buffer`), and what the two buffers
share (:class:`BufferBase`): the horizon, the counters seen and purged per producer, the
cut of a pushed batch into runs of data events and control messages, and the one
handling of incoming retractions and updates (sec. 4.3).

:class:`~specula.ordering.kslack.KSlackBuffer` and
:class:`~specula.ordering.speculative.SpeculativeBuffer` store the events; the base
decides what a control message does and calls their storage operations. A buffer gets
what it works with when it is built: the unit's
:class:`~specula.ordering.state.UnitState`, the
:class:`~specula.ordering.driver.DetectorDriver` it hands events to, and the unit's
clock source; it knows nothing of the unit itself.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np

from specula import events as ev
from specula.ordering import _kernels
from specula.ordering._records import same_event, tiebreak
from specula.ordering.clock import ClockSource
from specula.ordering.driver import DetectorDriver, Snapshot
from specula.ordering.state import UnitState

LatePolicy = Literal["side", "process"]

_CUT = ev.CONTROL | ev.UPDATE | ev.PROGRESS  # the flags of a message handled on its own
AFTER_EVERY_KEY = int(np.iinfo(np.int64).max)  # a tie-break above every event's


@dataclass
class Contents:
    """What a buffer holds between two pushes, as a checkpoint saves it: the events in
    key order with their keys (``ts``, tie-break ``tb``), the horizon, the largest
    counter purged per producer and, for a speculative buffer (``snaps`` not None), the
    snapshot in front of each position (or None), the emitted prefix, the last
    snapshot taken (shared when the next one is equal) and, while output fired by the
    passing of event time may still be revised, that time and the snapshot taken in
    front of it."""

    rows: np.ndarray
    ts: np.ndarray
    tb: np.ndarray
    horizon: tuple[int, int]
    purged_seq: dict[int, int] = field(default_factory=dict)
    snaps: np.ndarray | None = None
    n_emitted: int = 0
    last_snapshot: Snapshot | None = None
    time_fired: tuple[int, Snapshot] | None = None


class Buffer(Protocol):
    """The events an ordering unit holds, sorted by key ``(ts, producer << 40 | seq)``:
    what the unit, its memory guard and checkpoints use of them."""

    def __len__(self) -> int:
        """Events held."""

    def push(self, batch: np.ndarray, flags: np.ndarray, now: int,
             arrived: int | None = None) -> None:
        """Take accepted arrivals (their ``flags``), in arrival order; ``arrived``: the
        arrival to stamp them with as they are stored (None: they carry theirs)."""

    def flush(self, now: int) -> None:
        """End of stream (the unit's clock is already at its end): emit and purge."""

    def release(self, now: int) -> None:
        """Emit and purge what the unit's clock and K allow now (after K was capped)."""

    def settled_seq(self) -> int:
        """The unit's counter below which nothing it generated can change any more."""

    def time_stamps(self) -> np.ndarray:
        """The time stamps of the held events, in buffer order (ascending)."""

    def unhanded(self) -> np.ndarray:
        """A copy of the held events not yet handed to the detector, in buffer order."""

    def drop_unhanded(self, keep: np.ndarray) -> None:
        """Remove the events of :meth:`unhanded` where ``keep`` is False."""

    def time_fires(self, ts: int) -> None:
        """The detector is about to fire what waits for event time up to ``ts``."""

    @property
    def n_emitted(self) -> int:
        """Held events already handed to the detector (the emitted prefix)."""

    def snapshots(self) -> np.ndarray:
        """The snapshot in front of each event of the emitted prefix (None: none)."""

    @property
    def last_snapshot(self) -> Snapshot | None:
        """The snapshot taken last (None: none yet)."""

    def contents(self) -> Contents:
        """What the buffer holds, for a checkpoint."""

    def load_contents(self, contents: Contents) -> None:
        """Hold what :meth:`contents` returned (of a buffer of the same kind)."""


class BufferBase(ABC):
    """The part of both buffers that does not depend on how they store events.

    Subclasses provide the storage operations (the abstract methods below).

    Two differences between the buffers are as they have always been: the pure K-slack
    buffer does not trace a discarded update, and it applies an update that moves a held
    event behind the horizon (the new version is then late), where the speculative
    buffer keeps the held version and calls the update late.
    """

    trace_discarded_updates = True
    refuse_late_updates = True

    def __init__(self, state: UnitState, driver: DetectorDriver, clock: ClockSource, *,
                 in_dtype: np.dtype, late_policy: LatePolicy) -> None:
        self.state = state
        self.driver = driver
        self.clock = clock
        self.in_dtype = in_dtype
        self.late_policy = late_policy
        # key of the last purged event: anything below it is late
        self._horizon: tuple[int, int] = (int(_kernels.NO_CLOCK), 0)
        # per producer: highest counter purged
        self._purged_seq: dict[int, int] = {}

    @abstractmethod
    def __len__(self) -> int:
        """Events held."""

    def settled_seq(self) -> int:
        """The unit's counter below which nothing it generated can change any more:
        pure K-slack emits only what is final, so everything so far."""
        return self.state.seq

    def push(self, batch: np.ndarray, flags: np.ndarray, now: int,
             arrived: int | None = None) -> None:
        """Take accepted arrivals: each run of data events between control messages goes
        to the storage at once, each control message is handled on its own. With
        ``arrived``, the rows (read-only, unstamped) are stamped with it as they are
        stored: a run by the storage, a control message as a copy of its row."""
        ctx = self._begin(batch, flags)
        n = len(batch)
        if n == 1:  # a step's batch is often one row, a punctuation alone among them
            cuts = [0] if int(flags[0]) & _CUT else []
        else:
            cuts = np.flatnonzero(flags & _CUT).tolist() if np.count_nonzero(flags) else []
        start = 0
        for c in [*cuts, n]:
            if c > start:
                self._run(batch, ctx, start, c, now, arrived)
            if c < n:
                msg = batch[c:c + 1]
                if arrived is not None:
                    msg = msg.copy()
                    ev.stamp_arrival(msg, arrived)
                kind = msg["flags"][0]
                if kind & ev.RETRACTION:
                    self._on_retraction(msg, now)
                elif kind & ev.REVOKE:
                    self._on_revoke(msg, now)
                elif kind & ev.UPDATE:
                    self._on_update(msg, now)
                # a punctuation only moves the clock, which _after_control applies
                self._after_control(ctx, c, now)
            start = c + 1

    def time_fires(self, ts: int) -> None:
        """The detector is about to fire what waits for event time up to ``ts``, every
        input up to it handed. Pure K-slack hands only what is final, so the output is
        final too: the horizon moves behind every key of that time stamp, and an
        arrival at or before it is late, as behind a purged event. (The speculative
        buffer keeps the output revisable instead.)"""
        self._horizon = max(self._horizon, (ts, AFTER_EVERY_KEY))

    @abstractmethod
    def flush(self, now: int) -> None:
        """End of stream (the unit's clock is already at its end): emit and purge."""

    @abstractmethod
    def release(self, now: int) -> None:
        """Emit and purge what the unit's clock and K allow now (after K was capped)."""

    @abstractmethod
    def time_stamps(self) -> np.ndarray:
        """The time stamps of the held events, in buffer order (ascending)."""

    @abstractmethod
    def unhanded(self) -> np.ndarray:
        """A copy of the held events not yet handed to the detector, in buffer order."""

    @abstractmethod
    def drop_unhanded(self, keep: np.ndarray) -> None:
        """Remove the events of :meth:`unhanded` where ``keep`` is False."""

    # ------------------------------------------------------------ control messages
    # A producer sends each revision to the consumer that holds what it revises (see
    # :mod:`specula.ordering._sent`): an UPDATE only where the old version went, a REVOKE
    # routed like the version it revokes. So a revision of an event that is not held here
    # was meant for an event this unit already purged (or called late): it is late.

    def _on_retraction(self, msg: np.ndarray, now: int) -> None:
        """``RETRACTION(producer, seq)``: remove every event of ``producer`` from ``seq``
        on; late if some of them were already purged."""
        st = self.state
        st.stats.retractions_received += 1
        producer, seq = int(msg["producer"][0]), int(msg["seq"][0])
        if self._purged_seq.get(producer, -1) >= seq:
            st.to_late(msg)
        self._revoke(producer, seq, now)

    def _on_revoke(self, msg: np.ndarray, now: int) -> None:
        """``REVOKE(producer, seq)``: remove that one event; late if it is not held."""
        st = self.state
        st.stats.revocations_received += 1
        held = self._find(int(msg["producer"][0]), int(msg["seq"][0]))
        if held is None:
            st.to_late(msg)
            return
        st.stats.events_removed += 1
        self._drop(held, now)

    def _on_update(self, row: np.ndarray, now: int) -> None:
        """A new version of a held event: discarded if equal to it, else it replaces it;
        late if the event is not held."""
        st = self.state
        producer, seq = int(row["producer"][0]), int(row["seq"][0])
        key = (int(row["ts"][0]), int(tiebreak(row["producer"], row["seq"])[0]))
        held = self._find(producer, seq)
        if held is None:
            st.to_late(row)
            return
        if same_event(self._held(held), row[0]):
            st.stats.updates_discarded += 1
            if self.trace_discarded_updates:
                st.note("update", row)
            return
        if self.refuse_late_updates and (key < self._horizon or (
                key == self._horizon and key[1] >= _kernels.GENERATED_TB)):
            st.to_late(row)
            return
        st.stats.updates_applied += 1
        plain = row.copy()
        plain["flags"] &= np.uint8(0xFF ^ ev.UPDATE)
        self._replace(held, plain, key, now)

    # ------------------------------------------------------------ storage
    def _begin(self, batch: np.ndarray, flags: np.ndarray) -> Any:
        """Per pushed batch, before anything else; what it returns goes to ``_run`` and
        ``_after_control``."""
        return None

    @abstractmethod
    def _run(self, batch: np.ndarray, ctx: Any, start: int, end: int, now: int,
             arrived: int | None) -> None:
        """Take the run of data events ``batch[start:end]``, stamped with ``arrived`` if
        given: insert, emit, purge."""

    def _after_control(self, ctx: Any, c: int, now: int) -> None:
        """After the control message or punctuation ``batch[c]`` was handled."""
        return None

    @abstractmethod
    def _find(self, producer: int, seq: int) -> int | None:
        """Position of the buffered event ``(producer, seq)``, or None."""

    @abstractmethod
    def _held(self, i: int) -> np.void:
        """The buffered event at position ``i``."""

    @abstractmethod
    def _revoke(self, producer: int, seq: int, now: int) -> None:
        """Remove (and count) the buffered events of ``producer`` from ``seq`` on."""

    @abstractmethod
    def _drop(self, i: int, now: int) -> None:
        """Remove the buffered event at position ``i``."""

    @abstractmethod
    def _replace(self, i: int, row: np.ndarray, key: tuple[int, int], now: int) -> None:
        """Put ``row`` (key ``key``) in place of the buffered event at position ``i``."""
