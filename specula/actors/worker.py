"""The detector actor: one detector instance with its inbox and ordering unit, one process.

``DetectorWorker`` is a plain class (it runs without Ray too); the Ray runtime deploys
it with ``ray.remote`` as a threaded, restartable actor. Its inbox is an
:class:`~.inbox.Inbox`: ``push`` (run by Ray's threads, one per concurrent call)
appends a batch and returns at once, or waits while the inbox is full (backpressure);
one processing thread, started by :meth:`DetectorWorker.start`, takes the batches in
arrival order (all those waiting, up to :data:`STEP_EVENTS` rows, in one step), passes
them through the :class:`~.inbox.Gate` (shedding, for a node with a latency bound), the
ordering unit and the detector, and publishes what was generated to the subscribers'
actors. Only that thread touches the unit, the detector, the net output and the
checkpoints.

A producer has at most ``max_in_flight`` pushes per consumer unanswered; a push is
answered once its batch is in the consumer's inbox, so the window only pipelines the
calls: what bounds the events between two actors is the consumer's inbox. A slow
consumer's full inbox makes its producers wait, and theirs theirs, up to the source.

A threaded Ray actor runs concurrent calls in any order, even those of one caller, so
every push carries its sender and its number among the sender's pushes to this actor:
a push that overtook an earlier one of its sender waits for it, and the inbox holds
each sender's batches in the order they were sent. The actor thus needs a thread for
every push that can be in flight to it, plus a few for a flush, a report, a resend
(:func:`~specula.actors.ray_runtime.actor_concurrency`).

This module is the data path. Everything about recovery (push numbers, epochs,
fences, determinants, checkpoints, a restart) is asked of the worker's
:class:`~.actor_recovery.ActorRecovery`; with :class:`~.recovery.Checkpoints` the actor
checkpoints and recovers after a restart. The protocol and why it is exact are in
:mod:`.recovery`, the producer's side in :mod:`.channels`.
"""

from __future__ import annotations

import functools
import resource
import threading
import time
from collections.abc import Callable, Sequence
from enum import Enum
from typing import Any, NamedTuple, cast

import numpy as np

from specula import events as ev
from specula.actors.actor_recovery import ActorRecovery, LoopPosition, Turn
from specula.actors.channels import Peers, Publisher, Reply, Route
from specula.actors.inbox import Gate, Inbox, Queued
from specula.actors.output_log import ActorOutput
from specula.actors.placement import this_host
from specula.actors.recovery import Checkpoints
from specula.actors.report import CpuTimes, process_memory
from specula.actors.reported_net import ReportedNet
from specula.actors.routing import Router, punctuate, split_by_key
from specula.actors.sources import RawSlice, raw_sender, take_raw
from specula.actors.tally import Tally
from specula.detectors.graph import Instance
from specula.events import TypeRegistry
from specula.options import RUNTIME_OPTIONS
from specula.ordering.samples import SampleLog
from specula.shedding import DropCommand

__all__ = ["DEFAULT_INBOX_EVENTS", "STEP_EVENTS", "DetectorWorker", "Publisher", "Route"]

#: Rows an actor's inbox holds by default before its producers wait (the Ray runtime's
#: ``inbox_events`` option, :data:`~specula.options.RUNTIME_OPTIONS`).
DEFAULT_INBOX_EVENTS: int = RUNTIME_OPTIONS["inbox_events"].default

#: Rows a step takes at most by default (the ``step_events`` option): a node without
#: shedding takes the batches waiting in its inbox up to this many rows (at least one
#: batch) as one push through its unit. A shedding node takes one batch per step: its
#: overload detector and shedder work on batches as they arrived.
STEP_EVENTS: int = RUNTIME_OPTIONS["step_events"].default

#: Seconds between two readings of a sample's memory figures (snapshot estimate, resident
#: memory: a buffer scan or a read of /proc, ~0.1-0.3 ms); samples between repeat them.
_MEMORY_EVERY_S = 0.1


class _Signal(Enum):
    """What the processing thread takes instead of a step."""

    CHECKPOINT = "checkpoint"  # a checkpoint is asked
    SUSPEND = "suspend"        # the inbox is empty and a suspension is asked
    END = "end"                # the inbox is empty and the flush is asked


class Step(NamedTuple):
    """The batches of one step, as the processing thread took them from the inbox."""

    #: each batch (its arrival in ns), in the order taken
    taken: list[Queued]
    #: when the step was taken, ns of this process's monotonic clock
    start: int
    #: the gate's drop command for the step (shedding)
    command: DropCommand
    #: the alpha a replayed step runs under (None: the unit's own)
    alpha: float | None


class DetectorWorker:
    """One detector instance: inbox, gate, ordering unit, detector, net output, publisher,
    and the processing thread between them; its :class:`~.actor_recovery.ActorRecovery`
    (:attr:`recovery`) keeps the recovery protocol.

    ``routes`` say where the output goes (one per subscriber node) and ``producers``
    which actors publish to this one (producer id and actor), for resend requests after
    a restart. With ``checkpoints`` the worker checkpoints, and a worker made again for
    the same instance (a restarted actor: Ray runs the constructor again) restores the
    last checkpoint and starts on its own. ``peers`` resolves the addresses in
    ``routes`` and ``producers`` (default :class:`~.channels.Peers`; a chain's resolves
    its own members to in-memory handles, :mod:`.chain`), ``chain`` names the chain
    the worker runs in, for the report, ``mates`` gives the recovery of the other
    members of a chain of several, downstream first (:class:`~.actor_recovery.ActorRecovery`),
    and ``stepping`` is told when each step begins (True) and ends (False).
    """

    def __init__(self, instance: Instance, registry: TypeRegistry, max_in_flight: int = 4,
                 inbox_events: int = DEFAULT_INBOX_EVENTS, *, router: Router | None = None,
                 routes: list[Route] | None = None,
                 producers: list[tuple[int, Any]] | None = None,
                 checkpoints: Checkpoints | None = None,
                 step_events: int = STEP_EVENTS, peers: Peers | None = None,
                 chain: str | None = None,
                 mates: Callable[[], Sequence[ActorRecovery]] | None = None,
                 stepping: Callable[[bool], None] | None = None) -> None:
        self.instance = instance
        self.step_events = step_events if instance.node.shedding is None else 0
        self.unit = instance.unit(registry)
        instance.warm_up(registry)
        if routes and router is None:
            raise ValueError(f"{instance.label}: routes need the graph's router")
        self.router = router
        self.routes = routes or []
        self.producers = producers or []
        self.series: SampleLog[dict[str, float]] = SampleLog()
        self.cpu = CpuTimes()
        # inbox times are this process's monotonic clock, in ns
        self.inbox = Inbox(inbox_events, 1e-9)
        self.gate = Gate(instance.node.shedding, registry, 1e-9, self.unit.detector, self.unit)
        # a consumer's or producer's actor, by its address
        self.peers = peers if peers is not None else Peers()
        self.chain = chain
        self._stepping = stepping
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._ending = False                # flush asked: drain, flush the unit, stop
        self._ended: int | None = None      # events the final flush generated
        self._suspending = self._suspended = False  # suspend asked: drain, checkpoint, stop
        self._want_checkpoint = False       # a checkpoint asked, at the next batch boundary
        self._error: BaseException | None = None
        self._published: int | None = None  # the progress last told the subscribers
        self._clock = (0, 0)                # this host's clock minus the driver's, error
        self._memory: tuple[float, dict[str, float]] = (float("-inf"), {})  # when, what
        self._first_event_ns: int | None = None  # when the unit took its first event
        store = checkpoints.store(instance.label) if checkpoints else None
        self.output = ActorOutput(self.unit.out_dtype, self.unit.in_dtype, store)
        incarnation = store.next_incarnation() if store else 0
        tally = Tally(store, incarnation)  # dropped and resent pushes, over all processes
        self.publisher = Publisher(max_in_flight, instance.producer, incarnation, tally)
        self.recovery = ActorRecovery(instance.label, instance.producer, self.unit, self.output,
                                      self.publisher, self._cond, checkpoints=checkpoints,
                                      store=store, incarnation=incarnation, tally=tally,
                                      mates=mates)
        if incarnation > 0:
            restored = self.recovery.restore(lambda c: self.peers(self._consumers()[c]))
            if restored is not None:
                self._published, self._ended, self._clock = restored[:3]
                self.gate.restore_counts(restored.shed)
            self.start()

    def start(self, clock: tuple[int, int] | None = None) -> None:
        """Start the processing thread (once; every actor must exist by then); ``clock``:
        this host's offset from the driver's clock and its error, ns (:mod:`.clocks`)."""
        with self._cond:
            if clock is not None:
                self._clock = (clock[0], clock[1])
            if self._thread is None:
                self.cpu.start()
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name=f"specula-{self.instance.label}")
                self._thread.start()

    # ------------------------------------------------------------------ calls
    def push(self, batch: np.ndarray | RawSlice, sender: int = 0, n: int | None = None,
             incarnation: int = 0, epoch: int = 0, dets: Any = None,
             resend: bool = False, *, wait: bool = True) -> Reply | None:
        """Append a batch of arrivals to the inbox, waiting while it is full; returns a
        :class:`~.channels.Reply`. Without ``wait``, a push that would wait (for room,
        or for an earlier push of its sender) is not made and None is returned: a chain
        hands a batch over in the producer's thread when it can (:mod:`.chain`).

        ``n`` numbers the pushes of ``sender`` to this actor, from 0: the push waits
        until the sender's earlier ones are in, and one below those held is a duplicate
        (dropped). None: no ordering (a single caller, no Ray). ``incarnation`` is the
        sender's, ``epoch`` this actor's as the sender knows it: a push of a fenced-off
        sender process is dropped, one with a stale epoch is answered at once (the
        sender then resends). ``dets`` are the sender's determinants; a ``resend`` does
        not wait for room. A raw feeder's batch comes whole (or as a
        :class:`~.sources.RawSlice` of the driver's stream): the instance takes its part.
        """
        stamp = None  # the arrival a raw piece left where it lies is still to be stamped with
        if raw_sender(sender) and self.router is not None:
            rows, stamp = take_raw(batch, functools.partial(self.router.piece, self.instance,
                                                            None))
        else:
            rows = cast(np.ndarray, batch)  # a slice comes only from the driver
        rec = self.recovery
        with self._cond:
            while True:
                self._check()
                turn = rec.turn(sender, n, incarnation, epoch, rows)
                if turn is Turn.DROP:
                    reply = rec.reply(sender)
                    break
                if turn is Turn.READY and (resend or self.inbox.has_room(len(rows))):
                    now = time.monotonic_ns()
                    self.inbox.push(rows, now, sender, force=resend, stamp=stamp)
                    self.gate.arrived(len(rows), now)
                    rec.received(sender, n, rows, dets)
                    self._cond.notify_all()
                    return rec.reply(sender)
                if not wait:
                    return None
                self._cond.wait()
        rec.tally.persist()  # the drop's count is stored before it is answered
        return reply

    def flush(self, expected: dict[int, int] | None = None) -> dict[str, Any]:
        """End of stream: wait until the inbox is empty, emit everything buffered, publish
        it, and wait until it is in the consumers' inboxes. Every producer must have
        flushed before; ``expected`` gives the pushes each sent here.

        Returns ``{"generated": events the flush generated, "sent": pushes sent per
        consumer}``; or, if pushes are missing (lost with a restart of this actor),
        ``{"missing": position held per sender, "epoch": incarnation}``: the caller has
        them resent and flushes again.
        """
        with self._cond:
            missing = self.recovery.missing(expected)
            if missing and self._ended is None:
                return {"missing": missing, "epoch": self.recovery.incarnation}
            self._ending = True
            self._cond.notify_all()
            while self._ended is None and self._error is None:
                self._cond.wait()
            self._check()
        return {"generated": self._ended,
                "sent": {c: ch.sent for c, ch in self.publisher.channels.items()}}

    def suspend(self, expected: dict[int, int] | None = None) -> dict[str, Any]:
        """Pause for a later run (:mod:`.recovery`): as :meth:`flush`, but nothing is
        flushed; the actor checkpoints and stops. Returns ``{"sent", "settled"}`` (the
        unit's settled counter), or ``{"missing", "epoch"}`` as :meth:`flush` does."""
        with self._cond:
            missing = self.recovery.missing(expected)
            if missing:
                return {"missing": missing, "epoch": self.recovery.incarnation}
            self._suspending = True
            self._cond.notify_all()
            while not self._suspended and self._error is None:
                self._cond.wait()
            self._check()
        return {"sent": {c: ch.sent for c, ch in self.publisher.channels.items()},
                "settled": self.unit.settled_seq, "segments": self.output.segments}

    def resend(self, consumer: int, epoch: int, position: int) -> int:
        """Resend to ``consumer`` (incarnation ``epoch``, holding ``position`` of ours)
        what its checkpoint does not cover; returns the pushes resent."""
        return self.publisher.resend(consumer, epoch, position)

    def recover_producer(self, producer: int, incarnation: int) -> list[Any]:
        """Producer ``producer`` restarted as ``incarnation``: fence off its old pushes;
        returns its determinants held here (base step, senders, alphas), its pushes held
        and taken by the last checkpoint, and this actor's incarnation."""
        with self._cond:
            return self.recovery.fence(producer, incarnation)

    def forget(self, seq: int, segments: int) -> None:
        """Drop net events below ``seq``, segments below ``segments``, handed on for good."""
        self.output.forget(seq, segments)

    def checkpoint(self) -> int:
        """Checkpoint at the next batch boundary (now, if idle); returns the checkpoints
        taken so far."""
        stats = self.recovery.stats
        if not self.recovery.enabled:
            raise RuntimeError(f"{self.instance.label}: no checkpoint storage configured")
        with self._cond:
            target = stats.count + 1
            self._want_checkpoint = True
            self._cond.notify_all()
            while (stats.count < target and self._ended is None
                   and not self._suspended and self._error is None):
                self._cond.wait()
            self._check()
            return stats.count

    def status(self) -> dict[str, Any]:
        """Incarnation, batches taken, whether it ended, its host and the host's wall
        clock (for the driver's estimate of its offset, :mod:`.clocks`)."""
        return {"incarnation": self.recovery.incarnation, "step": self.recovery.step,
                "ended": self._ended is not None, "clock_ns": time.time_ns(),
                "host": this_host()}

    def report(self) -> dict[str, Any]:
        c, rec = self.unit.controller, self.recovery
        return {"producer": self.instance.producer, "label": self.instance.label,
                "net": ReportedNet.of(self.output.net), "handed_on": self.output.handed,
                "stats": self.unit.stats,
                "late": ev.concat_records([self.output.late(), self.unit.late_events()]),
                "memory": self.unit.memory.figures(),
                "alpha": c.history if c is not None else [], "series": list(self.series),
                "cpu": self.cpu.summary(), "k": self.unit.k,
                "inbox": self.gate.report(self.inbox), "restarts": rec.incarnation,
                **rec.tally.totals(),
                "checkpoints": rec.stats.as_dict(), "host": this_host(),
                "clock": self._clock, "chain": self.chain,
                "first_event_ns": self._first_event_ns,
                "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}

    def halt(self) -> None:
        """Stop processing after the batch in hand, as a crash would (tests model a
        restart with it, without Ray): once it returns, the worker writes nothing more;
        pushes and flushes then fail."""
        with self._cond:
            self._error = self._error or RuntimeError("halted")
            self._cond.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(60)
            if self._thread.is_alive():
                raise RuntimeError(f"{self.instance.label}: the processing thread did not "
                                   f"stop within 60 s of a halt")

    def _check(self) -> None:
        """Raise, in the caller's thread, the error the processing thread stopped on:
        the original exception (a DetectorError names the node and the event), so that
        the driver sees the same error as in-process."""
        if self._error is not None:
            raise self._error

    def _consumers(self) -> dict[int, Any]:
        """Every consumer's actor (a handle or a name), by its producer id."""
        return {c: a for r in self.routes for c, a in zip(r.consumers, r.actors, strict=True)}

    def _now(self) -> int:
        """The driver's wall clock, ns, as this host reads it."""
        return time.time_ns() - self._clock[0]

    # ------------------------------------------------------------ processing thread
    def _run(self) -> None:
        """The processing thread: (after a restart, recover;) take, shed, process,
        publish, checkpoint now and then; at the end, flush and checkpoint."""
        try:
            if self.recovery.incarnation > 0:
                self.recovery.recover(
                    [(c, self.peers(a)) for c, a in self._consumers().items()],
                    [(p, self.peers(a)) for p, a in self.producers])
            while self._ended is None and not self._suspended:
                with self._cond:
                    took = self._next_batch()
                if isinstance(took, Step):
                    self._step(took)
                    if self.recovery.batch_done() and self._error is None:  # not halted
                        self._checkpoint()
                elif took is _Signal.END:
                    self._finish()
                elif took is _Signal.SUSPEND:
                    self._suspend()
                else:
                    self._checkpoint()
        except BaseException as exc:  # surfaced by the next push or flush
            with self._cond:
                self._error = exc
                self._cond.notify_all()

    def _next_batch(self) -> Step | _Signal:
        """Under the lock: wait for the next step (the plan's, while one is left) and
        take it, or for a :class:`_Signal` (a checkpoint asked, a suspension, the end of
        the stream)."""
        while True:
            if self._error is not None:
                raise self._error
            if self._want_checkpoint:
                self._want_checkpoint = False
                return _Signal.CHECKPOINT
            step = self.recovery.planned_step()
            if step:
                if self.inbox.holds(step):
                    return self._pop(step, self.recovery.planned_alpha())
            elif len(self.inbox):
                return self._pop(None, None)
            elif self._ending:
                return _Signal.END
            elif self._suspending:
                return _Signal.SUSPEND
            self._cond.wait()

    def _pop(self, senders: list[int] | None, alpha: float | None) -> Step:
        q_size, now = self.inbox.events, time.monotonic_ns()
        taken = self.inbox.take(now, senders, self.step_events)
        command = self.gate.command(q_size)
        self._cond.notify_all()  # room for a waiting push
        return Step(taken, now, command, alpha)

    def _step(self, step: Step) -> None:
        """Take a step, telling ``stepping`` (a chain's outboxes wait for the pushes of
        a member in a step, :mod:`.outbox`) when it begins and ends."""
        if self._stepping is None:
            self._take(step)
            return
        self._stepping(True)
        try:
            self._take(step)
        finally:
            self._stepping(False)

    def _take(self, step: Step) -> None:
        """Run a step through the gate, the unit and the publisher."""
        taken = step.taken
        for i, q in enumerate(taken):
            self.recovery.log_step(q.sender, step.alpha, joined=i > 0)
        kept = [self.gate.admit(q.batch, step.command) for q in taken]
        batch, arrived = joined(kept, [q.stamp for q in taken], self.unit.in_dtype)
        first = self.unit.stats.handed()
        t0, c0 = time.perf_counter(), time.thread_time()
        out = self.unit.push(batch, self._now(), arrived) if len(batch) \
            else np.empty(0, self.unit.out_dtype)
        busy, c1 = time.perf_counter() - t0, time.thread_time()
        if self._first_event_ns is None and len(batch):
            self._first_event_ns = self._now()
        handed = self.unit.stats.handed() - first
        self._publish(out, self._now())
        self.cpu.add(unit=c1 - c0, publish=time.thread_time() - c1)
        done = time.monotonic_ns()
        for q, k in zip(taken, kept, strict=True):
            self.recovery.took(q.sender)
            share = len(k) / max(1, len(batch))
            self.gate.done(len(k), busy * share, (done - q.arrival) * 1e-9, handed * share)
        self._sample((step.start - taken[0].arrival) * 1e-9)

    def _finish(self) -> None:
        """End of stream: flush the unit, publish, wait for the answers, checkpoint."""
        self.recovery.log_step(-1, None)
        now = self._now()
        out = self.unit.flush(now)
        self._publish(out, now)
        self.publisher.drain()
        if self.recovery.enabled:
            self._checkpoint(ended=len(out))
        with self._cond:
            self._ended = len(out)
            self._cond.notify_all()

    def _suspend(self) -> None:
        """Checkpoint once what was published is in the consumers' inboxes."""
        self.publisher.drain()
        self._checkpoint()
        with self._cond:
            self._suspended = True
            self._cond.notify_all()

    def _publish(self, out: np.ndarray, now: int) -> None:
        """Apply ``out`` to the net output and send it, with a progress punctuation if
        the unit's progress moved, to the subscribers' instances its rows are for."""
        if len(out):
            self.output.apply(out, now)
        out, self._published = punctuate(out, self.unit, self._published, now)
        if not len(out) or self.router is None:  # no router: no routes (the constructor)
            return
        name = self.instance.node.name
        for route in self.routes:
            part = self.router.select(route.node, name, out)
            if not len(part):
                continue
            pieces = split_by_key(part, route.partitions)
            for consumer, actor, piece in zip(route.consumers, route.actors, pieces,
                                              strict=True):
                if len(piece):
                    ch = self.publisher.channel(consumer, self.peers(actor))
                    self.publisher.send(ch, piece, self.recovery.dets_for(ch))

    def _sample(self, wait_s: float) -> None:
        s, now = self.unit.stats, time.monotonic()
        if now - self._memory[0] >= _MEMORY_EVERY_S:
            self._memory = (now, {"snapshot_kb": self.unit.memory.snapshot_bytes() // 1024,
                                  **process_memory(_MEMORY_EVERY_S)})
        self.series.append({
            "time_ns": self._now(), "alpha": self.unit.alpha, "events_in": s.events_in,
            "emitted": s.emitted, "replayed": s.replayed, "late": s.late,
            "buffered": len(self.unit), "in_flight": self.publisher.in_flight(),
            "inbox_events": self.inbox.events, "wait_s": wait_s, "shed": self.gate.shed_total,
            "violations": self.gate.stats.violations, "kept_events": self.publisher.kept_events(),
            **self._memory[1]})

    def _checkpoint(self, ended: int | None = None) -> None:
        """Checkpoint (:meth:`.ActorRecovery.checkpoint`), counting its processor time."""
        c0 = time.thread_time()
        self.recovery.checkpoint(LoopPosition(self._published, ended, self._clock,
                                              self.gate.counts()))
        self.cpu.add(checkpoint=time.thread_time() - c0)


def joined(kept: list[np.ndarray], stamps: list[int | None], dtype: np.dtype
           ) -> tuple[np.ndarray, int | None]:
    """A step's batches (``kept``, each with the arrival its raw rows are still to be
    stamped with, or None) as one batch of ``dtype`` for the ordering unit, and the
    arrival still to stamp it with: one batch goes as it is, its stamp to the unit,
    which stamps the rows as it copies them
    (:meth:`~specula.ordering.unit.OrderingUnit.push`); several are copied into one,
    each stamped there."""
    if len(kept) == 1:
        return kept[0], stamps[0]
    batch = ev.concat_records(
        [b if b.dtype == dtype else ev.conform(b, dtype, drop=True) for b in kept])
    at = 0
    for b, stamp in zip(kept, stamps, strict=True):
        if stamp is not None:
            ev.stamp_arrival(batch[at:at + len(b)], stamp)
        at += len(b)
    return batch, None
