"""The detector actor: one detector instance with its inbox and ordering unit, in one
process.

``DetectorWorker`` is a plain class (it runs without Ray too); the Ray runtime deploys
it with ``ray.remote`` as a threaded actor. Its inbox is an :class:`~.inbox.Inbox`:
``push`` (run by Ray's threads, one per concurrent call) appends a batch and returns at
once, or waits while the inbox is full (backpressure); one processing thread, started by
:meth:`DetectorWorker.connect`, takes the batches in arrival order, passes them through
the :class:`~.inbox.Gate` (shedding, for a node with a latency bound), the ordering unit
and the detector, and publishes what was generated to the subscribers' actors. Only that
thread touches the unit, the detector, the net output and the publisher.

A producer has at most ``max_in_flight`` pushes per consumer unacknowledged; a push is
acknowledged once its batch is in the consumer's inbox, so the window only pipelines
the calls: what bounds the events between two actors is the consumer's inbox. A slow
consumer's full inbox makes its producers wait, and theirs theirs, up to the source.

A threaded Ray actor runs concurrent calls in any order, even those of one caller, so
every push carries its sender and the sender's count of pushes to this actor: a push
that overtook an earlier one of its sender waits for it, and the inbox holds each
sender's batches in the order they were sent. The actor thus needs a thread for every
push that can be in flight to it, plus one for a flush or a report
(:func:`~specula.actors.ray_runtime.actor_concurrency`).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

import numpy as np

from specula.actors.inbox import Gate, Inbox
from specula.actors.routing import Router, punctuate, split_by_key
from specula.detectors.graph import Instance
from specula.events import TypeRegistry
from specula.ordering.net import NetOutput

#: Rows an actor's inbox holds by default before its producers wait. A node with a
#: latency bound should be able to hold more than q_max = LB / l(p) events, or
#: backpressure acts before shedding does.
DEFAULT_INBOX_EVENTS = 200_000


class Route:
    """Where one subscriber node's part of the output goes: its instances' actors."""

    def __init__(self, node: str, partitions: int, actors: list[Any]) -> None:
        self.node = node
        self.partitions = partitions
        self.actors = actors


class Publisher:
    """Pushes batches to actors with a bounded number of unacknowledged pushes per actor,
    numbered per actor so that the actor puts them in its inbox in the order sent.

    ``sender`` names the pushing side: the producer id of an instance, 0 for the source.
    """

    def __init__(self, max_in_flight: int, sender: int = 0) -> None:
        self.max_in_flight = max_in_flight
        self.sender = sender
        self._pending: dict[int, deque] = {}
        self._sent: dict[int, int] = {}  # pushes sent so far, per actor
        self.sent_batches = 0

    def send(self, actor: Any, batch: np.ndarray) -> None:
        import ray

        key = id(actor)
        queue = self._pending.setdefault(key, deque())
        n = self._sent.get(key, 0)
        self._sent[key] = n + 1
        queue.append(actor.push.remote(batch, self.sender, n))
        self.sent_batches += 1
        while len(queue) > self.max_in_flight:
            ray.get(queue.popleft())

    def in_flight(self) -> int:
        return sum(len(q) for q in self._pending.values())

    def drain(self) -> None:
        """Wait until every batch sent so far is in its consumer's inbox."""
        import ray

        for queue in self._pending.values():
            if queue:
                ray.get(list(queue))
                queue.clear()


class DetectorWorker:
    """One detector instance: inbox, gate, ordering unit, detector, net output, publisher,
    and the processing thread between them."""

    def __init__(self, instance: Instance, registry: TypeRegistry, max_in_flight: int = 4,
                 inbox_events: int = DEFAULT_INBOX_EVENTS) -> None:
        self.instance = instance
        self.unit = instance.unit(registry)
        self._warm_up(instance, registry)
        self.net = NetOutput(self.unit.out_dtype)
        self.publisher = Publisher(max_in_flight, instance.producer)
        self.router: Router | None = None
        self.routes: list[Route] = []
        self._published: int | None = None  # the progress last told the subscribers
        self.series: list[dict[str, float]] = []
        self.busy_s = 0.0
        # inbox times are this process's monotonic clock, in ns
        self.inbox = Inbox(inbox_events, 1e-9)
        self.gate = Gate(instance.node.shedding, registry, 1e-9)
        self.gate.attach(self.unit.detector)  # state shedders drop its partial matches
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._taking = False                # the thread is processing a batch
        self._ending = False                # flush asked: drain, flush the unit, stop
        self._ended: int | None = None      # events the final flush generated
        self._error: BaseException | None = None
        self._next: dict[int, int] = {}     # per sender: the count of its next push

    @staticmethod
    def _warm_up(instance: Instance, registry: TypeRegistry) -> None:
        """Run a throw-away copy of the unit on one zero event per input type, so that its
        Numba kernels are loaded before the stream starts: a cold actor lags its siblings,
        and on a fast replay that lag turns into event-time skew where they meet."""
        probe = instance.unit(registry)
        ids = [registry.id(t) for t in instance.node.inputs]
        batch = np.zeros(len(ids), probe.in_dtype)
        batch["type"] = ids
        batch["ts"] = np.arange(len(ids))
        batch["seq"] = np.arange(len(ids))
        try:
            probe.push(batch)
            probe.flush()
        except Exception:
            pass

    def connect(self, router: Router, routes: list[Route]) -> None:
        """Say where the output goes, and start the processing thread."""
        self.router = router
        self.routes = routes
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, daemon=True,
                                            name=f"specula-{self.instance.label}")
            self._thread.start()

    def push(self, batch: np.ndarray, sender: int = 0, n: int | None = None) -> int:
        """Append a batch of arrivals to the inbox, waiting while it is full; returns the
        events in the inbox after it.

        ``n`` counts the pushes of ``sender`` to this actor, from 0: the push waits until
        the sender's earlier ones are in. None: no ordering (a single caller, no Ray).
        """
        with self._cond:
            while self._error is None and not (
                    (n is None or self._next.get(sender, 0) == n)
                    and self.inbox.has_room(len(batch))):
                self._cond.wait()
            self._check()
            now = time.monotonic_ns()
            self.inbox.push(batch, now)
            self.gate.arrived(len(batch), now)
            if n is not None:
                self._next[sender] = n + 1
            self._cond.notify_all()
            return self.inbox.events

    def flush(self) -> int:
        """End of stream: wait until the inbox is empty, emit everything buffered, publish
        it, and wait until it is in the consumers' inboxes; returns the events the
        flush generated. Every producer must have flushed before."""
        with self._cond:
            self._ending = True
            self._cond.notify_all()
            while self._ended is None and self._error is None:
                self._cond.wait()
            self._check()
            return self._ended

    def report(self) -> dict[str, Any]:
        c = self.unit.controller
        return {"producer": self.instance.producer, "label": self.instance.label,
                "net": self.net, "stats": self.unit.stats, "late": self.unit.late_events(),
                "alpha": c.history if c is not None else [], "series": self.series,
                "busy_s": self.busy_s, "k": self.unit.k,
                "inbox": self.gate.report(self.inbox)}

    def _check(self) -> None:
        if self._error is not None:
            raise RuntimeError(f"{self.instance.label}: processing failed: "
                               f"{self._error!r}") from self._error

    def _run(self) -> None:
        """The processing thread: take, shed, process, publish; at the end, flush."""
        try:
            while True:
                with self._cond:
                    while not len(self.inbox) and not self._ending:
                        self._cond.wait()
                    if not len(self.inbox):
                        break  # flush asked and nothing left
                    q_size = self.inbox.events
                    now = time.monotonic_ns()
                    batch, arrival = self.inbox.pop(now)
                    command = self.gate.command(q_size)
                    self._cond.notify_all()  # room for a waiting push
                self._take(batch, arrival, now, command)
            now = time.time_ns()
            out = self.unit.flush(now)
            self._publish(out, now)
            self.publisher.drain()
            with self._cond:
                self._ended = len(out)
                self._cond.notify_all()
        except BaseException as exc:  # surfaced by the next push or flush
            with self._cond:
                self._error = exc
                self._cond.notify_all()

    def _take(self, batch: np.ndarray, arrival: int, start: int, command: Any) -> None:
        kept = self.gate.admit(batch, command)
        t0 = time.perf_counter()
        out = self.unit.push(kept, time.time_ns()) if len(kept) \
            else np.empty(0, self.unit.out_dtype)
        busy = time.perf_counter() - t0
        self.busy_s += busy
        self._publish(out, time.time_ns())
        done = time.monotonic_ns()
        self.gate.done(len(kept), busy, (done - arrival) * 1e-9)
        self._sample((start - arrival) * 1e-9)

    def _publish(self, out: np.ndarray, now: int) -> None:
        if len(out):
            self.net.apply(out, now)
        out, self._published = punctuate(out, self.unit, self._published, now)
        if not len(out):
            return
        name = self.instance.node.name
        for route in self.routes:
            part = self.router.select(route.node, name, out)
            if not len(part):
                continue
            for actor, piece in zip(route.actors, split_by_key(part, route.partitions),
                                    strict=True):
                if len(piece):
                    self.publisher.send(actor, piece)

    def _sample(self, wait_s: float) -> None:
        s = self.unit.stats
        self.series.append({"time_ns": time.time_ns(), "alpha": self.unit.alpha,
                            "events_in": s.events_in, "emitted": s.emitted,
                            "replayed": s.replayed, "late": s.late,
                            "buffered": len(self.unit), "in_flight": self.publisher.in_flight(),
                            "inbox_events": self.inbox.events, "wait_s": wait_s,
                            "shed": self.gate.shed_total,
                            "violations": self.gate.stats.violations})
