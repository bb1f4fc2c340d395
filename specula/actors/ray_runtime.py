"""The Ray runtime: every detector instance in its own Ray actor.

The driver is the source: it feeds raw batches in arrival order to the actors that
subscribe to raw types, stamping each batch's arrival (and origin) with the wall clock
at injection. Each actor is a threaded Ray actor with a bounded inbox that its
processing thread drains (:mod:`specula.actors.worker`); actors push to each other
directly, and a full inbox makes its producers wait. At the end of the stream the
driver flushes the actors level by level (a flush returns once the actor's inbox is
empty and what it generated is in its consumers' inboxes), collects the reports and
kills the actors.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import numpy as np

from specula import events as ev
from specula.actors.inbox import InboxStats
from specula.actors.inprocess import prepare_raw
from specula.actors.report import DetectorReport, RunReport, merge_nets, sum_stats
from specula.actors.routing import Router, raw_type_table, split_by_key
from specula.actors.worker import DEFAULT_INBOX_EVENTS, DetectorWorker, Publisher, Route
from specula.cluster import ray_session
from specula.detectors.graph import Graph, Instance


class RayRuntime:
    """Run a graph on Ray: embedded on this machine, or on the cluster at ``address``.

    Parameters
    ----------
    graph
        The graph; validated here.
    address
        A Ray cluster to join; ``None`` starts Ray on this machine (or uses the Ray this
        process is already connected to).
    batch_size
        Raw events per batch sent by the source.
    max_in_flight
        Pushes a sender may have unacknowledged per consumer before it waits (a push is
        acknowledged once its batch is in the consumer's inbox).
    inbox_events
        Rows an actor's inbox holds before its producers wait (backpressure). A node with
        a latency bound should hold more than it allows (LB / l(p) events).
    speed
        Pace of the source: ``None`` as fast as the actors take the batches, ``1.0`` real
        time (by the raw events' time stamps and the graph's ``ticks_per_second``),
        ``10.0`` ten times faster.
    """

    def __init__(self, graph: Graph, *, address: str | None = None, batch_size: int = 10_000,
                 max_in_flight: int = 4, speed: float | None = None,
                 inbox_events: int = DEFAULT_INBOX_EVENTS) -> None:
        graph.validate()
        if speed is not None and speed <= 0:
            raise ValueError(f"speed must be > 0 (a multiple of real time), got {speed}")
        self.graph = graph
        self.address = address
        self.batch_size = batch_size
        self.max_in_flight = max_in_flight
        self.speed = speed
        self.inbox_events = inbox_events

    def run(self, raw: np.ndarray | Iterable[np.ndarray], *,
            registry: ev.TypeRegistry | None = None) -> RunReport:
        """Feed raw events (one array in arrival order by ``ats``, or an iterable of
        batches already in arrival order) through the graph and report.

        ``registry`` is the one the raw events were made with (default: the graph's);
        it is checked before Ray starts, as :meth:`InProcessRuntime.run
        <specula.actors.inprocess.InProcessRuntime.run>` checks it, and the type ids of
        every batch are translated by name when it differs from the graph's.
        """
        table = raw_type_table(self.graph, registry)
        with ray_session(self.address):
            return self._run(raw, table)

    def _run(self, raw: np.ndarray | Iterable[np.ndarray], table: np.ndarray | None
             ) -> RunReport:
        import ray

        graph, router = self.graph, Router(self.graph)
        instances = graph.instances()
        actor_cls = ray.remote(num_cpus=0)(DetectorWorker)
        actors = {i.producer: actor_cls.options(
                      max_concurrency=actor_concurrency(graph, router, i, self.max_in_flight),
                      **actor_options(i)).remote(
                      i, graph.registry, self.max_in_flight, self.inbox_events)
                  for i in instances}
        try:
            of_node = {n: [actors[i.producer] for i in instances if i.node.name == n]
                       for n in graph.nodes}
            ray.get([actors[i.producer].connect.remote(router, [
                Route(n.name, n.partitions, of_node[n.name])
                for n in graph.nodes.values() if router.hears(n.name, i.node.name)])
                for i in instances])
            t0 = time.perf_counter()
            n_raw = self._feed(raw, table, router, of_node)
            for node in graph.topological_order():
                ray.get([a.flush.remote() for a in of_node[node.name]])
            wall = time.perf_counter() - t0
            reports = ray.get([actors[i.producer].report.remote() for i in instances])
        finally:
            for a in actors.values():
                ray.kill(a)
        return self._report(reports, n_raw, wall)

    def _feed(self, raw: np.ndarray | Iterable[np.ndarray], table: np.ndarray | None,
              router: Router, of_node: dict[str, list]) -> int:
        """Send raw batches to their subscribers; returns the number of raw events."""
        publisher = Publisher(self.max_in_flight)
        subscribers = [n for n in self.graph.nodes.values() if router.hears(n.name, None)]
        n_raw = 0
        start, ts0 = time.perf_counter(), None
        for batch in _batches(raw, self.batch_size):
            if self.speed and len(batch):
                ts0 = int(batch["ts"].min()) if ts0 is None else ts0
                due = (int(batch["ts"].min()) - ts0) / self.graph.ticks_per_second / self.speed
                time.sleep(max(0.0, start + due - time.perf_counter()))
            batch = ev.translate_types(batch, table)  # a copy
            batch["ats"] = batch["origin"] = time.time_ns()
            n_raw += len(batch)
            for node in subscribers:
                part = router.select(node.name, None, batch)
                for actor, piece in zip(of_node[node.name],
                                        split_by_key(part, node.partitions), strict=True):
                    if len(piece):
                        publisher.send(actor, piece)
        publisher.drain()
        return n_raw

    def _report(self, reports: list[dict], n_raw: int, wall: float) -> RunReport:
        detectors = {}
        levels = self.graph.levels()
        for name, node in self.graph.nodes.items():
            mine = [r for r in reports if r["label"].split("[")[0] == name]
            dtype = self.graph.registry.dtype(node.inputs)
            detectors[name] = DetectorReport(
                name=name,
                net=merge_nets([r["net"] for r in mine]),
                stats=sum_stats([r["stats"] for r in mine]),
                late=ev.concat([r["late"] for r in mine], dtype),
                alpha={r["label"]: r["alpha"] for r in mine if r["alpha"]},
                series=[dict(s, instance=r["label"]) for r in mine for s in r["series"]],
                k_s=max(r["k"] for r in mine) / self.graph.ticks_per_second,
                level=levels[name],
                inbox=InboxStats.merge([r["inbox"] for r in mine]))
        return RunReport("ray", detectors, n_raw, wall, 1e-9)


def actor_options(instance: Instance) -> dict[str, float]:
    """Ray options of the actor that runs ``instance``: the GPUs its detector asks for
    (:attr:`~specula.detectors.base.Detector.num_gpus`), if any.

    >>> from specula.detectors.examples import Threshold, example_registry
    >>> g = Graph(example_registry(), sources=("C",)).add("big_c", Threshold())
    >>> actor_options(g.instances()[0])
    {}
    """
    gpus = float(getattr(instance.node.detector, "num_gpus", 0.0) or 0.0)
    return {"num_gpus": gpus} if gpus > 0 else {}


def actor_concurrency(graph: Graph, router: Router, instance: Instance,
                      max_in_flight: int) -> int:
    """Threads the actor of ``instance`` needs: one for every push that can be in flight
    to it (``max_in_flight`` from each instance that publishes to it, and from the
    source if it hears raw types), since a push may wait in its thread for an earlier
    one or for room in the inbox; and two more, for a flush or a report."""
    name = instance.node.name
    senders = sum(n.partitions for n in graph.nodes.values()
                  if n.name != name and router.hears(name, n.name))
    senders += 1 if router.hears(name, None) else 0
    return max_in_flight * senders + 2


def _batches(raw: np.ndarray | Iterable[np.ndarray], size: int) -> Iterable[np.ndarray]:
    if isinstance(raw, np.ndarray):
        raw = prepare_raw(raw)
        for i in range(0, len(raw), size):
            yield raw[i:i + size]
    else:
        yield from raw
