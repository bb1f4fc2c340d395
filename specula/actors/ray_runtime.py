"""The Ray runtime: every detector instance in a Ray actor, its own or a chain's.

Raw events enter from the driver, which feeds a stream it is given in arrival order to
the actors that subscribe to raw types, or from source actors, one per part of a
:class:`~.sources.Sources`, which the driver steps through arrival time together
(:mod:`.sources`); either stamps each batch's arrival (and origin) with the wall clock
at injection. Each actor is a threaded Ray actor with a bounded inbox that its
processing thread drains (:mod:`specula.actors.worker`); actors push to each other
directly, and a full inbox makes its producers wait. At the end of the stream the
driver flushes the actors level by level (a flush returns once the actor's inbox is
empty and what it generated is in its consumers' inboxes), collects the reports and
kills the actors.

Actors are named (``specula-<run>-<label>``), restartable (``max_restarts``) and every
call to them is retried on the restarted process (``max_task_retries=-1``: Ray retries
the calls that had not completed; a threaded actor runs them in any order). They
checkpoint to ``checkpoint_uri`` and recover as :mod:`specula.actors.recovery`
describes: a restarted actor finds its peers by name and its state in storage, the
driver resends what a restarted level-1 actor lost (on the stale epoch of its next
push, or when a flush says pushes are missing) and the report counts the restarts.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Unpack

import numpy as np

from specula import events as ev
from specula.actors.addresses import InstanceHandle, Member
from specula.actors.chain import ChainMember, local_edges
from specula.actors.chaining import plan_chains
from specula.actors.channels import Publisher, Route, answer
from specula.actors.clocks import estimate_offset, same_clock
from specula.actors.inbox import InboxStats
from specula.actors.inprocess import prepare_raw
from specula.actors.output_log import HandedOn
from specula.actors.placement import chain_options, check_fits, this_host
from specula.actors.pool import POOL, ChainHost, pool_key
from specula.actors.recovery import Checkpoints, Suspension, graph_shape, verify_run
from specula.actors.report import CpuTimes, DetectorReport, RunReport, sum_stats
from specula.actors.reported_net import ReportedNet
from specula.actors.routing import Router, raw_type_table
from specula.actors.settled import Settled, SettledTail
from specula.actors.signing import random_key, run_key
from specula.actors.source_worker import SourceWorker
from specula.actors.sources import (
    DEFAULT_SOURCE_STEP_SECONDS,
    DRIVER,
    SOURCE_SENDERS,
    Feeder,
    Pace,
    PreparedStream,
    Sources,
    arrival_steps,
    check_batching,
    restartable,
    union,
)
from specula.actors.tally import COUNTS
from specula.cluster import ray_session
from specula.detectors.graph import Graph, Instance
from specula.options import RayOptions, runtime_options
from specula.ordering.memory import merge_figures

#: Rows the driver feeds in one batch at most when ``run()`` gives no ``batch_rows``.
DEFAULT_BATCH_ROWS = 10_000


class RayRuntime:
    """Run a graph on Ray: embedded on this machine, or on the cluster at ``address``.

    ``graph`` is validated here; ``options`` are those
    ``specula.options.RUNTIME_ARGUMENTS["RayRuntime"]`` names, checked, with their
    meanings and defaults, in :data:`specula.options.RUNTIME_OPTIONS`: ``address`` (a
    cluster to join; None starts Ray here), ``max_in_flight`` (pushes unacknowledged per
    consumer), ``inbox_events`` and ``step_events`` (an actor's inbox and step, in rows),
    ``checkpoint_uri``, ``checkpoint_every_batches`` and ``checkpoint_every_s`` (where
    and how often actors checkpoint; what they store there is signed with a key derived
    from the user's, :mod:`.signing`, and checked before it is read; a resume checks
    every actor's files before Ray starts), and ``max_restarts`` (restarts of an actor
    after a crash), and ``chaining`` (which instances share an actor process: "none",
    one actor each; "auto"; or an explicit plan, :mod:`.chaining`; inside a chain
    batches are handed over in memory, :mod:`.chain`), and ``buffer_timeout_s`` (how
    long a push to another chain waits for its chain-mates' pushes, :mod:`.outbox`).
    """

    def __init__(self, graph: Graph, **options: Unpack[RayOptions]) -> None:
        graph.validate()
        given = runtime_options("RayRuntime", **options)
        self.graph = graph
        self.address: str | None = given["address"]
        self.max_in_flight: int = given["max_in_flight"]
        self.inbox_events: int = given["inbox_events"]
        self.step_events: int = given["step_events"]
        self.checkpoint_uri: str | None = given["checkpoint_uri"]
        self.checkpoint_every_batches: int = given["checkpoint_every_batches"]
        self.checkpoint_every_s: float = given["checkpoint_every_s"]
        self.max_restarts: int = given["max_restarts"]
        self.chaining: str | list[list[str]] = given["chaining"]
        self.buffer_timeout_s: float = given["buffer_timeout_s"]
        if not isinstance(self.chaining, str):  # an explicit plan: checked now
            plan_chains(graph, self.chaining, 1)
        #: the last run's checkpoint settings (its folder: ``checkpoints.run``)
        self.checkpoints: Checkpoints | None = None
        #: where the last run stopped, if it ended suspended (``run(suspend=True)``)
        self.suspension: Suspension | None = None
        #: the actors of the run in progress: by instance label the chain actor that runs
        #: it, by ``source-<j>`` each source actor (for tests that kill them)
        self.actors: dict[str, Any] = {}

    def run(self, raw: np.ndarray | Iterable[np.ndarray] | Sources, *,
            registry: ev.TypeRegistry | None = None, step_ticks: int | None = None,
            batch_rows: int | None = None, speed: float | None = None,
            suspend: bool | Callable[[], bool] = False,
            resume: Suspension | None = None,
            on_settled: Callable[[Settled], None] | None = None,
            on_fed: Callable[[int], None] | None = None) -> RunReport:
        """Feed raw events (one array in arrival order by ``ats``, or an iterable of
        batches already in arrival order, fed by the driver; or :class:`~.sources.Sources`,
        each part fed by a source actor of its own) through the graph and report.
        ``on_fed`` is called with the raw events fed, after every batch (or step of the
        sources).

        ``step_ticks``, ``batch_rows`` and ``speed`` are those of
        :meth:`InProcessRuntime.run <specula.actors.inprocess.InProcessRuntime.run>`,
        checked alike (:data:`specula.options.RUNTIME_OPTIONS`). The driver feeds an
        array in steps of the events that arrived within ``step_ticks`` of the step's
        first (default: no bound), at most ``batch_rows`` each (default
        :data:`DEFAULT_BATCH_ROWS`), and an iterable a batch at a time, as it comes.
        Source actors step through arrival time together, ``step_ticks`` at a time
        (default :data:`~.sources.DEFAULT_SOURCE_STEP_SECONDS`), in pushes of at most
        ``batch_rows``. ``speed`` paces the stream: 1.0 real time (by the raw events'
        time stamps and the graph's ``ticks_per_second``), 10.0 ten times faster; None
        as fast as the actors take it.

        ``registry`` is the one the raw events were made with (default: the graph's);
        it is checked before Ray starts, as :meth:`InProcessRuntime.run
        <specula.actors.inprocess.InProcessRuntime.run>` checks it, and the type ids of
        every batch are translated by name when it differs from the graph's.

        With ``suspend`` the run ends without flushing: the actors checkpoint where
        they are (:mod:`.recovery`, "Suspending") and :attr:`suspension` says where, for
        a later run's ``resume``, which starts them from there and goes on with the
        events that come after. Both need a ``checkpoint_uri`` that outlives the run.
        ``suspend`` may be a function, asked when the raw events end (a live source
        that was stopped suspends; one that ran dry flushes).

        ``on_settled`` is called, from a thread of its own, with what became final
        (:class:`~.settled.Settled`: per node the net events, emissions and late events;
        :class:`~.settled.SettledTail`) after every checkpoint interval while the raw
        events flow, and once at the end: together, every net event of the run from
        ``resume``'s settled counters on, and every emission and late event of the run,
        each once. The actors then forget what it was handed (:mod:`.output_log`), so
        that their memory stays bounded however long the stream: the report's net
        outputs and late events hold only what was not handed on, and its
        ``handed_on`` counts the rest.
        """
        started_ns = time.time_ns()  # the start-up counts from here (RunReport.startup_s)
        check_batching(raw, step_ticks, batch_rows, speed)
        if suspend or resume is not None:
            self._lasting_uri()
        if (suspend or resume is not None) and isinstance(raw, Sources):
            raise ValueError("a run fed by source actors cannot be suspended or resumed; "
                             "a live watch is fed by the driver")
        if resume is not None:
            resume.check(self.graph)
            verify_run(self._checkpoints(self._lasting_uri(), resume.run), self.graph)
        table = raw_type_table(self.graph, registry)
        tps = self.graph.ticks_per_second
        if isinstance(raw, Sources):  # sources step at its multiples: 0 is 1, each arrival
            step_ticks = max(1, int(DEFAULT_SOURCE_STEP_SECONDS * tps) if step_ticks is None
                             else step_ticks)
        delivery = Delivery(step_ticks, batch_rows or DEFAULT_BATCH_ROWS, Pace(speed, tps))
        with ray_session(self.address, modules=user_modules(self.graph)):
            return self._run(raw, table, delivery, started_ns, suspend, resume, on_settled,
                             on_fed)

    def _run(self, raw: np.ndarray | Iterable[np.ndarray] | Sources, table: np.ndarray | None,
             delivery: Delivery, started_ns: int, suspend: bool | Callable[[], bool] = False,
             resume: Suspension | None = None,
             on_settled: Callable[[Settled], None] | None = None,
             on_fed: Callable[[int], None] | None = None) -> RunReport:
        import ray

        graph, router = self.graph, Router(self.graph)
        instances = graph.instances()
        run = uuid.uuid4().hex[:12]
        temp: str | None = None
        if self.checkpoint_uri:
            uri = self.checkpoint_uri
        else:
            uri = temp = tempfile.mkdtemp(prefix="specula-checkpoints-")
        self.checkpoints = self._checkpoints(uri, resume.run if resume is not None else run)
        self.suspension = None
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        # held until the run ends: a restarted source reads its part again (restartable)
        parts = [restartable(p) for p in raw.parts] if isinstance(raw, Sources) else []
        sources = {SOURCE_SENDERS + j: f"specula-{run}-source-{j}" for j in range(len(parts))}
        chains, host_options = self._hosts(router, nodes, len(parts))
        chain_names = [c[0].label if len(c) == 1 else f"chain-{k}" for k, c in enumerate(chains)]
        of_node = {n: [i for i in instances if i.node.name == n] for n in graph.nodes}
        # a host per chain, idle from an earlier run where one fits (:mod:`.pool`)
        hosts = []
        for chain, options in zip(chains, host_options, strict=True):
            key = pool_key(chain, options)
            hosts.append((key, *POOL.take(key), options))
        address = {i.producer: Member(host[1], i.producer)
                   for host, chain in zip(hosts, chains, strict=True) for i in chain}
        started: list[tuple[Any, str, Any]] = []  # (pool key, name, handle) per host
        actors: dict[int, Any] = {}   # Ray's types do not follow ray.remote's handles
        feeders: dict[int, Any] = {}
        clean = False
        try:
            opening = []
            for (key, name, handle, options), cname, chain in zip(hosts, chain_names, chains,
                                                                  strict=True):
                handle, ready = POOL.start(
                    name, handle, self._chain_arguments(cname, chain, address, sources,
                                                        router, len(parts)),
                    functools.partial(new_host, options))
                started.append((key, name, handle))
                opening += [ready] if ready is not None else []
                actors |= {i.producer: InstanceHandle(handle, i.producer) for i in chain}
            ray.get(opening)
            source_cls = remote_class(SourceWorker)
            for (sender, name), part in zip(sources.items(), parts, strict=True):
                feeders[sender] = source_cls.options(
                    name=name, max_restarts=self.max_restarts, max_task_retries=-1,
                    max_concurrency=3, scheduling_strategy="SPREAD").remote(
                    part, sender - SOURCE_SENDERS, routes_to(graph, router, address, None),
                    router, table,
                    graph.ticks_per_second, delivery.step_ticks, delivery.batch_rows,
                    self.max_in_flight, self.checkpoints)
            self.actors = {i.label: actors[i.producer].actor for i in instances}
            self.actors |= {name.split("-", 2)[2]: feeders[s] for s, name in sources.items()}
            with self._tail(on_settled, resume, actors):
                fed, wall, ended_ns, reports = self._drive(
                    raw, table, router, of_node, actors, feeders, delivery, suspend, resume,
                    on_fed)
            clean = True
        finally:
            POOL.release(started, clean)
            for a in feeders.values():
                ray.kill(a)
            self.actors = {}
            if temp is not None:
                shutil.rmtree(temp, ignore_errors=True)
        return self._report(reports, fed, wall, len(nodes), (started_ns, ended_ns))

    def prestart(self, sources: int = 0) -> list[str]:
        """Start the chain hosts that a run of the graph fed by ``sources`` source actors
        (0: fed by the driver) will ask for, now, on the Ray cluster this process is
        connected to (:func:`~specula.cluster.ray_session`, which the run then uses as
        it is); returns their names. They load their chains' kernels and wait in the
        pool (:meth:`~.pool.HostPool.prestart`), and the run takes them if Ray's nodes
        are the same then: a job starts them while its earlier phases run. A chain whose
        instances ask for resources gets a host of its own at the run, as always."""
        import ray

        nodes = [n for n in ray.nodes() if n.get("Alive")]
        chains, host_options = self._hosts(Router(self.graph), nodes, sources)
        registry = self.graph.registry
        return POOL.prestart([
            (key, functools.partial(new_host, options, warm=(chain, registry)))
            for chain, options in zip(chains, host_options, strict=True)
            if (key := pool_key(chain, options)) is not None])

    def _hosts(self, router: Router, nodes: list[dict[str, Any]], sources: int
               ) -> tuple[list[list[Instance]], list[dict[str, Any]]]:
        """The chains of a run on the live Ray ``nodes`` fed by ``sources`` source
        actors (0: the driver), and the Ray options of each one's host. The graph is
        checked against the cluster first (:func:`~.placement.check_fits`)."""
        import ray

        graph = self.graph
        resources = ray.cluster_resources()
        check_fits(graph, resources, [n["Resources"] for n in nodes])
        # the chains are dealt over the nodes with CPUs, one after another
        deal = [n["NodeID"] for n in nodes if n["Resources"].get("CPU", 0) > 0]
        chains = plan_chains(graph, self.chaining, int(resources.get("CPU", 1)))
        options = []
        for k, chain in enumerate(chains):
            given = chain_options(chain, deal[k % len(deal)] if len(deal) > 1 else None)
            options.append(given | {
                "max_restarts": self.max_restarts, "max_task_retries": -1,
                "max_concurrency": sum(actor_concurrency(
                    graph, router, i, self.max_in_flight, max(1, sources)) for i in chain)})
        return chains, options

    def _chain_arguments(self, name: str, chain: list[Instance], address: dict[int, Member],
                         sources: dict[int, str], router: Router, parts: int
                         ) -> dict[str, Any]:
        """The arguments of the :class:`~.chain.ChainWorker` that runs ``chain`` (called
        ``name`` in the report), but its address (its host's name)."""
        graph = self.graph
        # per hand-over inside the chain: its window of pushes, a resend and a
        # recover_producer call of a restarted member; per member that hears raw types,
        # the window of each raw sender's push_all; per instance of another chain that
        # publishes to a member, the window of its pushes delivered (threads start as
        # needed)
        hear_raw = sum(1 for i in chain if router.hears(i.node.name, None))
        others = [i for i in graph.instances() if i not in chain]
        delivered = sum(1 for c in chain for p in others if router.hears(c.node.name,
                                                                          p.node.name))
        threads = (self.max_in_flight + 2) * local_edges(chain, router.hears) + 4 \
            + self.max_in_flight * (max(1, parts) * hear_raw + delivered)
        return {"name": name,
                "members": [chain_member(graph, router, address, i, sources) for i in chain],
                "registry": graph.registry, "max_in_flight": self.max_in_flight,
                "inbox_events": self.inbox_events, "router": router,
                "checkpoints": self.checkpoints, "step_events": self.step_events,
                "buffer_timeout_s": self.buffer_timeout_s, "threads": threads}

    def _lasting_uri(self) -> str:
        """The checkpoint URI that outlives a run, which suspending or resuming needs."""
        if not self.checkpoint_uri:
            raise ValueError("suspending or resuming a run needs a checkpoint_uri that "
                             "outlives it")
        return self.checkpoint_uri

    def _run_checkpoints(self) -> Checkpoints:
        """The checkpoint settings of the run in progress (:meth:`_run` sets them)."""
        if self.checkpoints is None:
            raise RuntimeError("no run in progress")
        return self.checkpoints

    def _checkpoints(self, uri: str, run: str) -> Checkpoints:
        """Where and how the actors of run ``run`` checkpoint, and the key that signs it:
        the run's own, derived from the user's, if ``uri`` outlives the run (a later run
        may resume it), else a random one."""
        key = run_key(run) if uri == self.checkpoint_uri else random_key()
        return Checkpoints(uri, run, self.checkpoint_every_batches, self.checkpoint_every_s,
                           key=key)

    @contextlib.contextmanager
    def _tail(self, on_settled: Callable[[Settled], None] | None,
              resume: Suspension | None, actors: dict[int, Any]) -> Iterator[None]:
        """While the block runs, hand ``on_settled`` what became final after every
        checkpoint interval, and once more at the end (:mod:`.settled`); after each
        hand-on but the last, tell the actors what they may forget."""
        if on_settled is None:
            yield
            return
        tail = SettledTail(self._run_checkpoints(), self.graph, resume)
        stop, failed = threading.Event(), []

        def follow() -> None:
            try:
                while not stop.wait(self.checkpoint_every_s):
                    on_settled(tail.take())
                    for p, actor in actors.items():
                        actor.forget.remote(tail.since.get(p, 0), tail.segments[p])
                on_settled(tail.take())
            except BaseException as exc:  # raised in the driver's thread below
                failed.append(exc)

        thread = threading.Thread(target=follow, name="specula-settled", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
        if failed:
            raise failed[0]

    def _drive(self, raw: np.ndarray | Iterable[np.ndarray] | Sources,
               table: np.ndarray | None, router: Router, of_node: dict[str, list[Instance]],
               actors: dict[int, Any], feeders: dict[int, Any], delivery: Delivery,
               suspend: bool | Callable[[], bool] = False, resume: Suspension | None = None,
               on_fed: Callable[[int], None] | None = None
               ) -> tuple[list[dict], float, int, list[dict]]:
        """Start the actors, feed them (from the driver, or step the source actors),
        flush (or suspend) them level by level and collect their reports; returns what
        each source fed, the seconds it took from the actors' start, when it ended (ns of
        the wall clock) and the reports."""
        everyone = {**actors, **feeders}

        def clock_of(actor: Any) -> Callable[[], int]:
            return lambda: int(answer(actor.status.remote())["clock_ns"])

        # a clock per process: the instances of a chain share their actor's; a process
        # on the driver's host reads the driver's clock (:func:`~.clocks.same_clock`)
        here = this_host()
        offsets: dict[int, tuple[int, int]] = {}
        for a in everyone.values():
            process = a.actor if isinstance(a, InstanceHandle) else a
            if id(process) not in offsets:
                offsets[id(process)] = same_clock(answer(a.status.remote())["host"], here) \
                    or estimate_offset(clock_of(a))
        clocks = {p: offsets[id(a.actor if isinstance(a, InstanceHandle) else a)]
                  for p, a in everyone.items()}
        for ref in [a.start.remote(clocks[p]) for p, a in everyone.items()]:
            answer(ref)
        t0 = time.perf_counter()
        if isinstance(raw, Sources):  # fed by the source actors, the feeders
            fed = self._feed_sources(feeders, delivery, on_fed)
        else:
            publisher = Publisher(self.max_in_flight)
            for c, sent in (resume.sent if resume is not None else {}).items():
                publisher.channel(c, actors[c]).sent = sent  # numbered on from the suspension
            fed = [self._feed(raw, table, router, of_node, actors, publisher, delivery, on_fed)]
        suspend = suspend() if callable(suspend) else suspend
        # pushes each actor was sent, per sender: a restarted one may have lost some
        expected: dict[int, dict[int, int]] = {}
        for source in fed:
            for c, sent in source["sent"].items():
                expected.setdefault(c, {})[source["sender"]] = sent
        flushed = self._flush_all(router, everyone, expected, fed[0].get("publisher"), suspend)
        if suspend:
            settled = {p: flushed[p]["settled"] for p in sorted(flushed)}
            segments = {p: flushed[p]["segments"] for p in sorted(flushed)}
            self.suspension = Suspension(self._run_checkpoints().run,
                                         {c: e[0] for c, e in expected.items() if 0 in e},
                                         settled, graph_shape(self.graph), segments)
        wall, ended_ns = time.perf_counter() - t0, time.time_ns()
        refs = [a.report.remote() for a in actors.values()]
        return fed, wall, ended_ns, [answer(r) for r in refs]

    def _flush_all(self, router: Router, actors: dict[int, Any],
                   expected: dict[int, dict[int, int]], publisher: Publisher | None,
                   suspend: bool) -> dict[int, dict[str, Any]]:
        """Flush (or suspend) every instance (:meth:`_flush`), each once every instance
        that publishes to it has: those of a level, and of branches apart, at once (a
        flush waits for its actor's inbox to drain, its last output to be taken and its
        last checkpoint; one after another, they added up). ``expected`` (pushes sent
        to each instance, per sender) gains what each flush says it sent. Returns each
        flush's answer, by producer id."""
        instances = {i.producer: i for i in self.graph.instances()}
        producers = {p: {j for j, other in instances.items()
                         if router.hears(i.node.name, other.node.name)}
                     for p, i in instances.items()}
        done: dict[int, dict[str, Any]] = {}
        running: dict[Future, int] = {}
        pool = ThreadPoolExecutor(len(instances), thread_name_prefix="specula-flush")
        try:
            while len(done) < len(instances):
                for p, waits in producers.items():
                    if p not in done and p not in running.values() and waits <= done.keys():
                        running[pool.submit(self._flush, instances[p], actors,
                                            {p: dict(expected.get(p, {}))}, publisher,
                                            suspend)] = p
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    p = running.pop(future)
                    done[p] = future.result()
                    for c, sent in done[p]["sent"].items():
                        expected.setdefault(c, {})[p] = sent
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        return done

    @staticmethod
    def _flush(instance: Instance, actors: dict[int, Any], expected: dict[int, dict[int, int]],
               publisher: Publisher | None, suspend: bool = False) -> dict[str, Any]:
        """Flush (or suspend) one actor; if it restarted and lost pushes, have them
        resent (by the driver's ``publisher``, or by the producer's actor: a source or
        an instance) and flush again. Returns what the actor's flush returns: the pushes
        it sent to each consumer (``"sent"``)."""
        me, actor = instance.producer, actors[instance.producer]
        while True:
            call = actor.suspend if suspend else actor.flush
            done = answer(call.remote(expected.get(me, {})))
            if "missing" not in done:
                return done
            for sender, position in done["missing"].items():
                if sender == DRIVER:
                    if publisher is None:
                        raise RuntimeError(f"{instance.label} lost pushes of the driver, "
                                           "which did not feed this run")
                    publisher.resend(me, done["epoch"], position)
                else:
                    answer(actors[sender].resend.remote(me, done["epoch"], position))

    def _feed(self, raw: np.ndarray | Iterable[np.ndarray], table: np.ndarray | None,
              router: Router, of_node: dict[str, list[Instance]], actors: dict[int, Any],
              publisher: Publisher, delivery: Delivery, on_fed: Callable[[int], None] | None
              ) -> dict[str, Any]:
        """The driver as the source: send raw batches to their subscribers, paced by
        their time stamps; returns what it fed (as a source actor's report says)."""
        routes = [Route(n.name, n.partitions, [i.producer for i in of_node[n.name]],
                        [actors[i.producer] for i in of_node[n.name]])
                  for n in self.graph.nodes.values() if router.hears(n.name, None)]
        feeder = Feeder(router, routes, publisher, table, self.graph.ticks_per_second)
        for batch, fed in _batches(raw, table, delivery, feeder):
            if delivery.pace.speed is not None and len(batch):
                delivery.pace.wait(int(batch["ts"].min()))
            fed()
            if on_fed is not None:
                on_fed(len(batch))
        publisher.drain()
        return {"sender": 0, "sent": {c: ch.sent for c, ch in publisher.channels.items()},
                "events": feeder.events, "seconds": feeder.played_seconds,
                "publisher": publisher}

    def _feed_sources(self, feeders: dict[int, Any], delivery: Delivery,
                      on_fed: Callable[[int], None] | None) -> list[dict[str, Any]]:
        """Step the source actors through arrival time together (:mod:`.sources`): each
        step, every source with events left sends those that arrived before its end, and
        the next starts when all are done. Returns the sources' reports."""
        nexts = {s: answer(a.next_arrival.remote()) for s, a in feeders.items()}
        nexts = {s: n for s, n in nexts.items() if n is not None}
        delivery.pace.wait(min(nexts.values(), default=0))  # the pace counts from here
        step_ticks = delivery.step_ticks or 1  # run() sets it for sources
        since: dict[int, int] = {}  # per source: where its last step ended
        while nexts:
            until = (min(nexts.values()) // step_ticks + 1) * step_ticks
            delivery.pace.wait(until - step_ticks)
            refs = {s: feeders[s].feed.remote(until, since.get(s)) for s in nexts}
            nexts = {}
            for s, ref in refs.items():
                n, after = answer(ref)
                since[s] = until
                if on_fed is not None:
                    on_fed(n)
                if after is not None:
                    nexts[s] = after
        return [answer(a.finish.remote()) for a in feeders.values()]

    def _report(self, reports: list[dict], fed: list[dict], wall: float,
                nodes: int | None = None, span_ns: tuple[int, int] | None = None
                ) -> RunReport:
        """The run's report from the actors' ``reports`` and the sources' (``fed``);
        ``span_ns``: when the run started and when its stream ended (wall clock, ns),
        which split it into start-up and stream (:attr:`RunReport.startup_s`)."""
        detectors = {}
        levels = self.graph.levels()
        by_chain: dict[str, list[dict]] = {}
        for r in reports:
            by_chain.setdefault(r["chain"], []).append(r)
        for members in by_chain.values():  # a chain's process time, counted once
            for r, cpu in zip(members, CpuTimes.shared([r["cpu"] for r in members]),
                              strict=True):
                r["cpu"] = cpu
        for name, node in self.graph.nodes.items():
            mine = [r for r in reports if r["label"].split("[")[0] == name]
            dtype = self.graph.registry.dtype(node.inputs)
            detectors[name] = DetectorReport(
                name=name,
                net=ReportedNet.merge([r["net"] for r in mine]),
                handed_on=HandedOn.total([r["handed_on"] for r in mine]),
                stats=sum_stats([r["stats"] for r in mine]),
                late=ev.concat([r["late"] for r in mine], dtype),
                alpha={r["label"]: r["alpha"] for r in mine if r["alpha"]},
                series=[dict(s, instance=r["label"]) for r in mine for s in r["series"]],
                k_s=max(r["k"] for r in mine) / self.graph.ticks_per_second,
                level=levels[name],
                memory=merge_figures([r["memory"] for r in mine]),
                inbox=InboxStats.merge([r["inbox"] for r in mine]),
                recovery=recovery_summary(mine),
                cpu_s=CpuTimes.total([r["cpu"] for r in mine]),
                hosts=[r["host"] for r in sorted(mine, key=lambda r: r["producer"])],
                clocks_ms=[(r["clock"][0] / 1e6, r["clock"][1] / 1e6)
                           for r in sorted(mine, key=lambda r: r["producer"])],
                chains=[r["chain"] for r in sorted(mine, key=lambda r: r["producer"])])
        n_raw = sum(f["events"] for f in fed)
        played = len(union(f["seconds"] for f in fed))
        sources = [{k: f[k] for k in ("index", "events", "restarts", "resent", "host")}
                   for f in fed if f["sender"] != 0]
        first = min((r["first_event_ns"] for r in reports
                     if r["first_event_ns"] is not None), default=None)
        startup = stream = None
        if span_ns is not None and first is not None:
            startup, stream = (first - span_ns[0]) / 1e9, (span_ns[1] - first) / 1e9
        return RunReport("ray", detectors, n_raw, wall, 1e-9, cluster_nodes=nodes,
                         played_seconds=played, sources=sources, startup_s=startup,
                         stream_wall_s=stream)


@functools.cache
def remote_class(cls: type) -> Any:
    """``cls`` as a Ray actor class that asks for no CPU, made once per process: Ray
    pickles and exports an actor class once per cluster it is used on, so a class made
    again for every run would be pickled again at every run's start."""
    import ray

    return ray.remote(num_cpus=0)(cls)


def new_host(options: dict[str, Any], name: str,
             warm: tuple[list[Instance], ev.TypeRegistry] | None = None) -> Any:
    """A new chain host (:class:`~.pool.ChainHost`) called ``name``, made with the Ray
    ``options``; ``warm``: started before its run, for a chain of these instances."""
    return remote_class(ChainHost).options(name=name, **options).remote(name, warm)


def routes_to(graph: Graph, router: Router, address: dict[int, Member], source: str | None
              ) -> list[Route]:
    """Where the output of ``source`` (a node's name; None: raw) goes: a route per
    subscriber node, to its instances' addresses."""
    of_node = {n: [i for i in graph.instances() if i.node.name == n] for n in graph.nodes}
    return [Route(n.name, n.partitions, [j.producer for j in of_node[n.name]],
                  [address[j.producer] for j in of_node[n.name]])
            for n in graph.nodes.values() if router.hears(n.name, source)]


def chain_member(graph: Graph, router: Router, address: dict[int, Member], instance: Instance,
                 sources: dict[int, str]) -> ChainMember:
    """``instance`` as its chain actor takes it: where its output goes, and which
    instances and ``sources`` (sender id: source actor's name) publish to it."""
    name = instance.node.name
    producers: list[tuple[int, Any]] = [(j.producer, address[j.producer])
                                        for j in graph.instances()
                                        if router.hears(name, j.node.name)]
    producers += list(sources.items()) if router.hears(name, None) else []
    return ChainMember(instance, routes_to(graph, router, address, name), producers)


def user_modules(graph: Graph) -> list[ModuleType]:
    """The top-level modules and packages the graph's detectors (and shedding
    strategies) are defined in, other than specula, the standard library and installed
    distributions, which every host has: the user's files, for Ray to ship to hosts
    that lack them. A class defined in ``__main__`` travels by value anyway."""
    found: dict[str, ModuleType] = {}
    for node in graph.nodes.values():
        strategy = node.shedding.strategy if node.shedding is not None else None
        for obj in (node.detector, strategy):
            top = type(obj).__module__.split(".")[0]
            module = sys.modules.get(top)
            where = getattr(module, "__file__", None) or ""
            if (module is None or top in ("specula", "__main__", "builtins")
                    or top in sys.stdlib_module_names or not where
                    or any(part in ("site-packages", "dist-packages")
                           for part in Path(where).parts)):
                continue
            found[top] = module
    return list(found.values())


def actor_concurrency(graph: Graph, router: Router, instance: Instance,
                      max_in_flight: int, sources: int = 1) -> int:
    """Threads the actor of ``instance`` needs: one for every push that can be in flight
    to it (``max_in_flight`` from each instance that publishes to it, and from each of
    the ``sources`` if it hears raw types), since a push may wait in its thread for an earlier
    one or for room in the inbox; and six more, for a flush, a report, a checkpoint and
    the requests of restarted neighbours (resends, determinants)."""
    name = instance.node.name
    senders = sum(n.partitions for n in graph.nodes.values()
                  if n.name != name and router.hears(name, n.name))
    senders += sources if router.hears(name, None) else 0
    return max_in_flight * senders + 6


@dataclass(frozen=True)
class Delivery:
    """How a run cuts and paces its stream: ``run()``'s ``step_ticks`` (None: an array
    fed by the driver is not cut by arrival time; at least 1 for source actors, which
    step at its multiples), ``batch_rows`` and ``speed`` (as a :class:`~.sources.Pace`)."""

    step_ticks: int | None
    batch_rows: int
    pace: Pace


def _batches(raw: np.ndarray | Iterable[np.ndarray], table: np.ndarray | None,
             delivery: Delivery, feeder: Feeder
             ) -> Iterator[tuple[np.ndarray, Callable[[], None]]]:
    """What the driver feeds, each batch with the call that feeds it: an array
    (:func:`_fed_rows`) in arrival order cut into steps (:func:`~.sources.arrival_steps`),
    fed as ranges of it (:meth:`~.sources.Feeder.feed_range`); an iterable's batches as
    they come."""
    if isinstance(raw, np.ndarray):
        stream = PreparedStream(_fed_rows(raw, table))
        ats = np.ascontiguousarray(stream.rows["ats"])
        for i, j in arrival_steps(ats, delivery.step_ticks, delivery.batch_rows):
            yield stream.rows[i:j], functools.partial(feeder.feed_range, stream, i, j)
    else:
        for batch in raw:
            yield batch, functools.partial(feeder.feed, batch)


def _fed_rows(raw: np.ndarray, table: np.ndarray | None) -> np.ndarray:
    """The rows the driver feeds from the array ``raw``, never written to: ``raw``
    itself, checked, when :func:`~.inprocess.prepare_raw` would change nothing a push
    carries (its type ids are the graph's, it carries counters, it is in arrival order;
    arrival and origin are stamped as it is fed); else that function's copy. The copy of
    a 1M-event stream cost the driver ~35 ms of a ~1 s run, more with fresh pages."""
    ats = raw["ats"]
    if table is None and raw["seq"].any() and bool((ats[1:] >= ats[:-1]).all()):
        ev.check_raw(raw)
        return raw
    return prepare_raw(raw, table)


def recovery_summary(reports: list[dict]) -> dict[str, Any]:
    """What one node's instances say about restarts and checkpoints: restarts, the
    pushes they dropped and resent over all their processes (:data:`~.tally.COUNTS`:
    duplicates, of them divergent, i.e. unlike the push held: 0 unless a restarted
    producer regenerated another timeline; fenced off, stale), checkpoints written
    (count, seconds, last size in bytes) and the largest resident memory of an
    instance's process, in MB."""
    cps = [r["checkpoints"] for r in reports]
    return {"restarts": sum(r["restarts"] for r in reports),
            **{name: sum(r[name] for r in reports) for name in COUNTS},
            "checkpoints": sum(c["count"] for c in cps),
            "checkpoint_s": sum(c["seconds"] for c in cps),
            "checkpoint_bytes": max((c["bytes"] for c in cps), default=0),
            "peak_rss_mb": max(r["peak_rss_mb"] for r in reports)}
