"""The speculative K-slack ordering unit that wraps every detector.

Mutschler & Philippsen, "Reliable Speculative Processing of Out-of-Order Event Streams
in Generic Publish/Subscribe Middlewares" (DEBS 2013), sec. 3 and 4. The unit takes the
detector's input stream in arrival order, extracts a local clock from the clock event
types, learns K (the largest delay seen), and emits events to the detector in
occurrence-time order:

* **pure K-slack** (``alpha=1.0``, fixed): an event is emitted and purged once
  ``ts + K <= clk``. Nothing is ever processed prematurely, so no snapshot is taken and
  the fast path runs in a Numba kernel per batch.
* **speculative** (``alpha < 1`` or an :class:`AlphaController`): an event is emitted
  once ``ts + alpha*K <= clk`` (eq. 1) but purged only when pure K-slack would purge it.
  Before each emission of an event that stays in the buffer a snapshot of the detector is
  taken; when an event arrives (or is retracted) in front of an already emitted one, the
  detector is restored to the snapshot taken before the first affected event and the
  emitted part of the buffer is replayed (Alg. 1 and 2).

Readings chosen where the paper is ambiguous (each one pinned by a test):

* Order. Events are ordered by the key ``(ts, producer << 40 | seq)``: time stamp first,
  then the producer and its event counter. Ties in ``ts`` therefore have one order that
  does not depend on arrival, which is what makes "equal to the in-order output" a
  well-defined promise. A new event goes after buffered events with an equal key.
* K. The delay of an event is measured at the next clock update against the new clock,
  plus its K+ (``advance_clock``); K never shrinks.
* Purge. An emitted event is purged when ``ts + K <= clk`` (the ``<=`` of sec. 3.2 and of
  the Fig. 7 walkthrough, not the ``<`` of Alg. 2). A speculative unit never purges its
  last emitted event (the paper's AEP), so an event that arrives just behind it can still
  be replayed (Fig. 7: C1 after A2 with K = 0). The speculative buffer purges when the
  clock advances (sec. 3.2: "whenever clk is updated ... purge"), which is when the purge
  condition changes; Fig. 7 purges C1 at A3, not at its own arrival. The paper's text
  purges B4 at A6 although B4 is the last emitted event then; here B4 goes at A11.
* Snapshots are taken per emission run, not per event: in front of the first event of a
  run that stays buffered (so with one event per arrival, as in the paper's figures,
  every premature event gets one). A replay restores the nearest snapshot at or in front
  of the first disturbed position and re-emits from there. The purge keeps the oldest
  emitted event that carries a snapshot: it may keep a few events that K-slack would
  drop (never more purged, so never more late events).
* Decisions are taken per run of data events in a pushed batch (between control
  messages): the run is inserted, replayed once, then emitted and purged with the clock
  and K after the run. A one-event push is one arrival of Alg. 1 and 2; longer runs let a
  vectorised detector see runs of events instead of single ones.
* Replays are atomic: when the emitted region is disturbed, all of it is re-emitted at
  once, so outside :meth:`OrderingUnit.push` the emitted events are always a prefix of the
  buffer.
* Late events are those whose key is below the horizon (the key of the last purged event,
  which for pure K-slack is the last emitted one). They are counted and go to the late
  side output; with ``late="process"`` they are also handed to the detector at once,
  out of order (in the speculative buffer they are placed right after the last emitted
  event, so later replays keep them). Retractions and updates of events behind the horizon
  are late as well.

Retraction (sec. 4.3). Generated events carry ``(producer, seq)``; the counter is part of
every snapshot. With ``retraction="full"`` a relocation immediately sends one counter
message ``RETRACTION(producer, seq)`` that revokes every event the unit generated from
``seq`` on, and replays regenerate them, numbered by position. With
``retraction="on-demand"`` an output's counter is a *label* that an insertion in front
does not shift (:mod:`specula.ordering._sent`: labels increase in output order with free
ones between), so the replay stops at the first snapshot whose detector state equals the
recorded one, and only what changed is sent, never more than full retraction's messages.

Revisions reach whoever holds what they revise. Consumers subscribe by type and are
partitioned by key, so an event reaches one instance of each subscribing node, chosen by
its type and key. A ``RETRACTION`` names a range of counters, not an event, so it goes to
every instance of every subscriber. A regenerated output may differ in type or key from
the version sent, held at another subscriber or partition; the unit logs what it sent,
with causes (:class:`~specula.ordering._sent.SentLog`, from its oldest snapshot on),
and sends for a regenerated output nothing if it equals the logged one of its cause, an
``UPDATE`` if type and key are unchanged (it routes where the old version went), else a
``REVOKE`` carrying the old version and the new one as a plain event; a new cause's
output goes out plain, a logged one no cause claims is revoked. A consumer thus receives
a revision only for an event it was sent; one for an event it no longer holds (purged,
or late itself) is late. With full retraction no version is kept: the range retraction
reaches everybody and the regenerated events are plain.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np

from specula import events as ev
from specula.events import concat_records
from specula.events.batches import FEW_ROWS
from specula.options import DEFAULT_K0_SECONDS, MemoryLimit, check_option
from specula.ordering import _kernels
from specula.ordering._buffer import Buffer, LatePolicy
from specula.ordering._records import TIEBREAK_SHIFT, same_event, tiebreak
from specula.ordering._sent import SentLog
from specula.ordering.adaptation import AlphaController
from specula.ordering.clock import ChannelClock, EventClock
from specula.ordering.driver import DetectorDriver, DetectorError, DrivenDetector
from specula.ordering.kslack import KSlackBuffer
from specula.ordering.memory import MemoryGuard
from specula.ordering.speculative import SpeculativeBuffer, speculative_slack
from specula.ordering.state import Trace, TraceEntry, UnitState, UnitStats

__all__ = [
    "TIEBREAK_SHIFT",
    "DetectorError",
    "DrivenDetector",
    "LatePolicy",
    "OrderingUnit",
    "RetractionMode",
    "TraceEntry",
    "UnitStats",
    "concat_records",
    "same_event",
    "tiebreak",
]

RetractionMode = Literal["full", "on-demand"]

# the kernels' markers as Python ints: a comparison with a NumPy scalar costs more
_NO_CLOCK = int(_kernels.NO_CLOCK)
_END_OF_TIME = int(_kernels.END_OF_TIME)


class OrderingUnit:
    """A K-slack ordering unit, speculative when ``alpha`` allows, around one detector.

    Parameters
    ----------
    detector
        The wrapped detector (see :class:`specula.detectors.Detector`).
    registry
        The event type registry; input and output types are resolved with it.
    producer
        This unit's producer id (> 0), stamped on every generated event.
    alpha
        ``1.0`` for pure K-slack, a float in ``[0, 1)`` for fixed speculation, or an
        :class:`~specula.ordering.adaptation.AlphaController` (``"adaptive"``: a fresh
        one) for runtime adaptation.
    retraction
        ``"on-demand"`` (default) or ``"full"``.
    late
        ``"side"`` (default): late events go to the side output only; ``"process"``:
        they are also processed out of order.
    k0
        Initial K (default 0, as in the paper; None: the node default,
        :data:`~specula.options.DEFAULT_K0_SECONDS`).

    The node options among these are checked by :data:`specula.options.NODE_OPTIONS`
    (:class:`~specula.options.OptionError` naming the unit).
    trace
        Record a :class:`TraceEntry` for every step (for tests and demos; slow).
    name
        The detector's name in error messages (default: its class name).
    channels
        The producers whose punctuations clock this unit (0: raw clock events), when it
        subscribes to other detectors; empty (default): clocked by its clock events
        (see :mod:`specula.ordering.clock`).
    memory
        What the unit may hold (default: :class:`~specula.options.MemoryLimit`'s
        defaults); see :mod:`specula.ordering.memory`.

    The events wait in one of two buffers: :class:`~specula.ordering.kslack.KSlackBuffer`
    for pure K-slack, :class:`~specula.ordering.speculative.SpeculativeBuffer` otherwise;
    both implement :class:`~specula.ordering._buffer.Buffer`. The unit's clock, K,
    counters and late side output are one :class:`~specula.ordering.state.UnitState`
    (:attr:`state`), which it hands to the buffer, the
    :class:`~specula.ordering.driver.DetectorDriver` (:attr:`driver`) and the
    :class:`~specula.ordering.memory.MemoryGuard` (:attr:`memory`).
    """

    def __init__(self, detector: DrivenDetector, registry: ev.TypeRegistry, *, producer: int,
                 inputs: Sequence[str], outputs: Sequence[str], clock: Sequence[str],
                 alpha: float | AlphaController = 1.0, retraction: RetractionMode = "on-demand",
                 late: LatePolicy = "side", k0: int = 0, trace: bool = False,
                 name: str | None = None, channels: Sequence[int] = (),
                 memory: MemoryLimit | None = None) -> None:
        if producer <= 0:
            raise ValueError(f"producer must be > 0 (0 marks external sources), got {producer}")
        alpha, k0 = _checked_options(name or type(detector).__name__, registry, alpha,
                                     retraction, late, k0, memory)
        if not set(clock) <= set(inputs):
            raise ValueError(f"clock types {sorted(set(clock) - set(inputs))} are not inputs")
        self.controller = alpha if isinstance(alpha, AlphaController) else None
        self._fixed_alpha = 1.0 if isinstance(alpha, AlphaController) else float(alpha)
        self.speculative = self.controller is not None or self._fixed_alpha < 1.0
        self.name = name or type(detector).__name__
        self.registry = registry
        self.producer = producer
        self.retraction = retraction
        self.late_policy = late
        self.in_dtype = registry.dtype(inputs)
        self._is_in_dtype = ev.SameDtype(self.in_dtype)
        self.out_dtype = registry.dtype(outputs)
        type_names = ["?"] * (max(t.id for t in registry.types()) + 1)
        for t in registry.types():
            type_names[t.id] = t.name
        self._is_input = np.zeros(len(type_names), bool)
        self._is_input[[registry.id(n) for n in inputs]] = True
        self._input_ids = frozenset(registry.id(n) for n in inputs)
        is_clock = np.zeros(len(type_names), bool)
        is_clock[[registry.id(n) for n in clock]] = True
        self.clock_source: EventClock | ChannelClock = (
            ChannelClock(channels, is_clock) if any(c != 0 for c in channels)
            else EventClock(is_clock))
        #: clock, K, counters and the late side output: what the collaborators share
        self.state = UnitState(k=int(k0), trace=Trace(type_names) if trace else None)
        # what a replay may revise, so that each revision goes where it applies
        sent = (SentLog(self.out_dtype) if self.speculative and retraction == "on-demand"
                else None)
        self.driver = DetectorDriver(
            detector, self.state, name=self.name, producer=producer,
            out_dtype=self.out_dtype, outputs={n: registry.id(n) for n in outputs},
            type_names=type_names, sent=sent)
        self.buffer: Buffer = (
            SpeculativeBuffer(self.state, self.driver, self.clock_source,
                              in_dtype=self.in_dtype, late_policy=late,
                              alpha=self._alpha, name=self.name)
            if self.speculative else
            KSlackBuffer(self.state, self.driver, self.clock_source,
                         in_dtype=self.in_dtype, late_policy=late, input_types=self._is_input))
        # the buffer that takes a live step's few data events in one call (push_few): a
        # pure K-slack one clocked by type
        self._few_buffer = (self.buffer if isinstance(self.buffer, KSlackBuffer)
                            and isinstance(self.clock_source, EventClock) else None)
        self.memory = MemoryGuard(MemoryLimit() if memory is None else memory, self.state,
                                  self.buffer, self.clock_source,
                                  speculative=self.speculative, name=self.name,
                                  type_names=type_names)

    # ------------------------------------------------------------------ public
    @property
    def detector(self) -> DrivenDetector:
        """The wrapped detector."""
        return self.driver.detector

    @property
    def stats(self) -> UnitStats:
        """The unit's counters (see :class:`UnitStats`)."""
        return self.state.stats

    @property
    def clk(self) -> int:
        """The unit's clock (``NO_CLOCK`` before the first clock update)."""
        return self.state.clk

    @property
    def k(self) -> int:
        """The unit's K: the largest delay measured (or capped by the memory limit)."""
        return self.state.k

    @property
    def trace(self) -> list[TraceEntry] | None:
        """Every step so far, when the unit was built with ``trace=True``."""
        return None if self.state.trace is None else self.state.trace.entries

    @property
    def alpha(self) -> float:
        """The alpha emission runs with: 1 while the memory limit backs speculation off."""
        return self._alpha()

    def _alpha(self) -> float:
        if self.memory.backed_off:
            return 1.0
        return self.controller.alpha if self.controller else self._fixed_alpha

    @property
    def progress(self) -> int | None:
        """The time stamp up to which every input has been handed to the detector
        (``clk - ceil(alpha*K)`` with the alpha the last push emitted with, not the one
        an adaptation chose after it; None before the first clock): what the unit sends
        later stems from later input, or revises what it sent. Runtimes publish it to
        the subscribers as a ``PROGRESS`` punctuation. It stays below the detector's
        :meth:`~specula.detectors.Detector.time_hold`, where output fired by the passing
        of event time may still come."""
        if self.state.clk == _NO_CLOCK:
            return None
        if self.ended:
            return _END_OF_TIME
        hold = self.detector.time_hold()
        handed = self.state.handed  # set by every push that moved the clock
        if hold is None or handed is None:
            return handed
        return min(handed, hold - 1)

    @property
    def ended(self) -> bool:
        """Has the stream ended: every input is in, the buffer is flushed and the detector's
        ``on_end`` has run? That happens at :meth:`flush`, or in a push once every channel
        of a :class:`~.clock.ChannelClock` has reached the end of time (all producers
        ended): as Flink's operators do on the final watermark, the unit then emits what
        the end generates *before* it reports its progress as the end of time, so its
        consumers never see its end-of-stream output behind its own punctuation."""
        return self.state.clk >= _END_OF_TIME

    @property
    def settled_seq(self) -> int:
        """The counter below which the events this unit generated are final: no replay
        regenerates, updates or retracts them (a speculative unit's oldest snapshot's
        counter; everything for pure K-slack). A sink may persist them for good."""
        return self.buffer.settled_seq()

    def __len__(self) -> int:
        """Events held in the buffer."""
        return len(self.buffer)

    def late_events(self) -> np.ndarray:
        """The late side output: every late event and late control message, flagged LATE."""
        if not self.state.late:
            return np.empty(0, self.in_dtype)
        out = np.concatenate(self.state.late)
        out["flags"] |= ev.LATE
        return out

    def take_late(self) -> np.ndarray:
        """The late side output so far, as :meth:`late_events`, handed over: the unit
        holds none of it afterwards (its holder keeps or spills it)."""
        out = self.late_events()
        self.state.late = []
        return out

    def push(self, batch: np.ndarray, now: int = 0, arrived: int | None = None) -> np.ndarray:
        """Take a batch of arrivals (in arrival order) and return what the detector generated.

        The returned batch holds generated events, updates and counter messages, in the
        order the consumers must apply them, with ``ats = now``.

        ``arrived``: raw rows that do not carry their arrival yet (a push of the Ray
        runtime's driver, read where it lies in Ray's object store, read-only,
        :class:`~specula.actors.sources.RawSlice`) arrived then; the unit stamps their
        ``ats`` and ``origin`` with it where it copies them (into its buffer, or the
        copy its selection of input types makes), so that they are copied once. The
        caller's batch is never written to.
        """
        few = self._few_buffer
        # a live step's few data events (no flag, none to stamp; in the input dtype, one
        # contiguous block, the stream open) go to the kernel at once, which checks
        # their types
        if (few is not None and arrived is None and 0 < len(batch) <= FEW_ROWS
                and self._is_in_dtype(batch.dtype)
                and not any(batch["flags"].tolist())
                and batch.flags.c_contiguous and self.state.clk < _END_OF_TIME
                and few.push_few(batch, now)):
            if self.ended:  # its time stamps reached the end of time
                self._finish(now)
            self._pushed(now)
            return self.driver.take_output()
        accepted = self._accept(batch)
        if arrived is not None and accepted is not batch and len(accepted):
            ev.stamp_arrival(accepted, arrived)  # the selection's copy
            arrived = None
        batch = accepted
        if len(batch):
            was_open = not self.ended
            if self.controller is not None:
                with self.controller.busy():
                    self._push(batch, now, arrived)
            else:
                self._push(batch, now, arrived)
            if was_open and self.ended:
                self._finish(now)
            self._pushed(now)
        return self.driver.take_output()

    def _pushed(self, now: int) -> None:
        """After a push that took events: the memory limit's check, the progress handed
        on, the passing of event time, and alpha's adaptation."""
        self.memory.check(now)
        # what this push handed on, by the alpha it emitted with: the controller may
        # change alpha now, for the next push
        self.state.handed = self._emission_bound()
        self._time_passed(now)
        if self.controller is not None:
            self.controller.poll()

    def shed_held(self, keep: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """Drop the held events not yet handed to the detector where ``keep(rows)`` (their
        keep-mask, in buffer order) is False; return them. The detector has seen nothing
        of them: it is dropping them at the inbox, only later, so a node that holds
        events for K sheds the work it already took in at once, not K later."""
        rows = self.buffer.unhanded()
        kept = np.asarray(keep(rows), bool) | (rows["flags"] != 0)
        if kept.all():
            return rows[:0]
        self.buffer.drop_unhanded(kept)
        self.stats.events_shed += int(np.count_nonzero(~kept))
        return rows[~kept]

    def _time_passed(self, now: int) -> None:
        """Let the detector fire what waits for event time (its ``time_hold``) once the
        unit has handed every input up to it (:attr:`UnitState.handed`), whether input,
        punctuations or idleness moved the clock
        (:meth:`~specula.detectors.Detector.on_time`). Pure K-slack hands only what is
        final (``clk - K``): from then on an input at or before that time is late, as a
        watermark's timers fire in Flink. A speculative unit fires at its speculative
        clock (``clk - ceil(alpha*K)``) and its buffer keeps the state in front of the
        firing, so an input at or before that time that is not late (a late ``X`` of an
        absence) replays from there and revises the output like any other."""
        hold = self.detector.time_hold()
        handed = self.state.handed
        if hold is None or handed is None or self.ended:
            return
        if hold <= handed:
            self.buffer.time_fires(handed)
            self.driver.time_passed(handed, now)

    def _emission_bound(self) -> int:
        """The time stamp up to which the buffer hands events on at the present clock, K
        and alpha (``clk - ceil(alpha*K)``, or ``clk - K`` for pure K-slack)."""
        st = self.state
        return st.clk - (speculative_slack(self.alpha, st.k) if self.speculative else st.k)

    def flush(self, now: int = 0) -> np.ndarray:
        """End of stream: emit and purge everything still buffered, then let the detector
        emit what it still holds (``on_end``). A unit that has :attr:`ended` already (its
        producers' end reached it in a push) has nothing left to do."""
        if not self.ended:
            self.state.clk = _END_OF_TIME
            self._finish(now)
        return self.driver.take_output()

    # --------------------------------------------------------------- plumbing
    def _accept(self, batch: np.ndarray) -> np.ndarray:
        if not self._is_in_dtype(batch.dtype):
            batch = ev.conform(batch, self.in_dtype, drop=True)
        if len(batch) <= FEW_ROWS:  # a live step's few rows: Python ints cost less
            types = batch["type"].tolist()
            if self._input_ids.issuperset(types):  # the usual case
                return batch
            if len(types) == 1:  # often a punctuation alone
                last = len(self._is_input) - 1
                if (self._is_input[min(max(types[0], 0), last)]
                        or int(batch["flags"][0]) & (ev.CONTROL | ev.PROGRESS)):
                    return batch
                return batch[:0]
        # count_nonzero, not all(): a step's batch is a few rows, where all() costs
        # five times as much
        keep = self._is_input.take(batch["type"], mode="clip")
        if np.count_nonzero(keep) < len(keep):
            keep |= (batch["flags"] & (ev.CONTROL | ev.PROGRESS)) > 0
            if np.count_nonzero(keep) < len(keep):
                batch = ev.select_records(batch, keep)
        return batch

    def _push(self, batch: np.ndarray, now: int, arrived: int | None) -> None:
        flags = batch["flags"]
        n_control = n_progress = 0
        if len(flags) == 1:
            n_control = int((int(flags[0]) & ev.CONTROL) != 0)
            n_progress = int((int(flags[0]) & ev.PROGRESS) != 0)
        elif np.count_nonzero(flags):
            n_control = int(np.count_nonzero(flags & ev.CONTROL))
            n_progress = int(np.count_nonzero(flags & ev.PROGRESS))
        stats = self.state.stats
        stats.events_in += len(batch) - n_control - n_progress
        stats.control_in += n_control
        stats.progress_in += n_progress
        self.buffer.push(batch, flags, now, arrived)

    def _finish(self, now: int) -> None:
        """The clock is at the end of time: hand the detector everything, then its end."""
        self.buffer.flush(now)
        self.driver.end(now)


def _checked_options(where: str, registry: ev.TypeRegistry, alpha: Any, retraction: Any,
                     late: Any, k0: Any, memory: Any) -> tuple[float | AlphaController, int]:
    """The unit's node options checked by :data:`~specula.options.NODE_OPTIONS` (an
    :class:`~specula.options.OptionError` naming ``where``), as the unit takes them:
    ``alpha="adaptive"`` a fresh :class:`AlphaController`, ``k0=None`` the default K."""
    for option, value in (("retraction", retraction), ("late", late), ("k0", k0)):
        check_option(option, value, where=where)
    if memory is not None:
        check_option("memory", memory, where=where)
    if not isinstance(alpha, AlphaController):
        check_option("alpha", alpha, where=where)
        alpha = AlphaController() if alpha == "adaptive" else float(alpha)
    k0 = int(DEFAULT_K0_SECONDS * registry.ticks_per_second) if k0 is None else int(k0)
    return alpha, k0
