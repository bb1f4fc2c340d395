"""The detector actor: one detector instance with its ordering unit, in one process.

``DetectorWorker`` is a plain class (testable without Ray); the Ray runtime deploys it
with ``ray.remote``. Its inbox is the actor's call queue: ``push`` takes a batch, runs
it through the ordering unit and the detector, and publishes what was generated to the
subscribers' actors, with at most ``max_in_flight`` unacknowledged calls per edge: a
slow consumer blocks its producer (backpressure), all the way up to the source.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

import numpy as np

from specula.actors.routing import Router, punctuate, split_by_key
from specula.detectors.graph import Instance
from specula.events import TypeRegistry
from specula.ordering.net import NetOutput


class Route:
    """Where one subscriber node's part of the output goes: its instances' actors."""

    def __init__(self, node: str, partitions: int, actors: list[Any]) -> None:
        self.node = node
        self.partitions = partitions
        self.actors = actors


class Publisher:
    """Sends batches to actors with a bounded number of calls in flight per actor."""

    def __init__(self, max_in_flight: int) -> None:
        self.max_in_flight = max_in_flight
        self._pending: dict[int, deque] = {}
        self.sent_batches = 0

    def send(self, actor: Any, batch: np.ndarray) -> None:
        import ray

        queue = self._pending.setdefault(id(actor), deque())
        queue.append(actor.push.remote(batch))
        self.sent_batches += 1
        while len(queue) > self.max_in_flight:
            ray.get(queue.popleft())

    def in_flight(self) -> int:
        return sum(len(q) for q in self._pending.values())

    def drain(self) -> None:
        """Wait until every call sent so far has been processed."""
        import ray

        for queue in self._pending.values():
            if queue:
                ray.get(list(queue))
                queue.clear()


class DetectorWorker:
    """One detector instance: ordering unit, detector, net output, publisher, metrics."""

    def __init__(self, instance: Instance, registry: TypeRegistry, max_in_flight: int = 4
                 ) -> None:
        self.instance = instance
        self.unit = instance.unit(registry)
        self._warm_up(instance, registry)
        self.net = NetOutput(self.unit.out_dtype)
        self.publisher = Publisher(max_in_flight)
        self.router: Router | None = None
        self.routes: list[Route] = []
        self._published: int | None = None  # the progress last told the subscribers
        self.series: list[dict[str, float]] = []
        self.busy_s = 0.0

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
        self.router = router
        self.routes = routes

    def push(self, batch: np.ndarray) -> int:
        """Take a batch of arrivals; returns the number of events generated."""
        t0 = time.perf_counter()
        now = time.time_ns()
        out = self.unit.push(batch, now)
        self._publish(out, now)
        self.busy_s += time.perf_counter() - t0
        self._sample(now)
        return len(out)

    def flush(self) -> int:
        """End of stream: emit everything buffered, publish it, wait for the consumers."""
        now = time.time_ns()
        out = self.unit.flush(now)
        self._publish(out, now)
        self.publisher.drain()
        return len(out)

    def report(self) -> dict[str, Any]:
        c = self.unit.controller
        return {"producer": self.instance.producer, "label": self.instance.label,
                "net": self.net, "stats": self.unit.stats, "late": self.unit.late_events(),
                "alpha": c.history if c is not None else [], "series": self.series,
                "busy_s": self.busy_s, "k": self.unit.k}

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

    def _sample(self, now: int) -> None:
        s = self.unit.stats
        self.series.append({"time_ns": now, "alpha": self.unit.alpha,
                            "events_in": s.events_in, "emitted": s.emitted,
                            "replayed": s.replayed, "late": s.late,
                            "buffered": len(self.unit), "in_flight": self.publisher.in_flight()})
