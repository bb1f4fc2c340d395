"""The in-process runtime: a whole detector graph in one process, on a virtual clock.

It is the reference the distributed runtime is checked against. A stream in memory is
delivered in the order of its arrival time stamps ``ats`` (stable for equal ones), in
steps of a few milliseconds of arrival time; a stream read as it comes (an iterable of
batches, a log read a chunk at a time) is delivered a batch per step, in the order it
comes, as the Ray runtime's driver feeds it. Each delivery step runs every detector
instance once, in topological order, and hands what it generated to its subscribers in
the same step (no network delay). Generated events are stamped with the step's time,
so a detection's latency in virtual time is the time of the first emission of its
final version minus the arrival of the newest raw event it depends on.

With ``cost_model`` the busy time of each unit is not measured but computed from the
work it did (events processed, snapshots, restores, comparisons), and alpha-adaptation
runs on the virtual clock: runs are deterministic.

With ``queueing`` (on by default when a node sheds) processing takes virtual time: each
instance has an inbox on the virtual clock, a busy instance's arrivals wait in it, and
latencies include the waits (:mod:`specula.actors.queueing`).
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Unpack

import numpy as np

from specula import events as ev
from specula.actors.inbox import InboxStats
from specula.actors.queueing import Station, queued_step
from specula.actors.report import DetectorReport, RunReport, merge_nets, sum_stats
from specula.actors.routing import Router, punctuate, raw_type_table
from specula.actors.sources import (
    Pace,
    Sources,
    arrival_steps,
    check_batching,
    played_seconds,
    union,
)
from specula.detectors.graph import Graph, Instance
from specula.options import CostModel, InProcessOptions, runtime_options
from specula.ordering.adaptation import AlphaController, ManualClock
from specula.ordering.memory import merge_figures
from specula.ordering.net import NetOutput
from specula.ordering.unit import OrderingUnit

#: Arrival time a step of :meth:`InProcessRuntime.run` covers by default, in seconds.
DEFAULT_STEP_SECONDS = 0.005


class InProcessRuntime:
    """Run a :class:`~specula.detectors.graph.Graph` deterministically in one process.

    Every run works on fresh copies of the graph's detectors; the graph is not changed.
    ``graph`` is validated here; ``options`` are those
    ``specula.options.RUNTIME_ARGUMENTS["InProcessRuntime"]`` names (``ticks_per_second``,
    ``cost_model``, ``trace``, ``keep_messages``, ``queueing``), checked, with their
    meanings and defaults, in :data:`specula.options.RUNTIME_OPTIONS`.
    """

    def __init__(self, graph: Graph, **options: Unpack[InProcessOptions]) -> None:
        graph.validate()
        given = runtime_options("InProcessRuntime", **options)
        self.graph = graph
        self.ticks_per_second: float = given["ticks_per_second"] or graph.ticks_per_second
        self.cost_model: CostModel | None = given["cost_model"]
        queueing = given["queueing"]
        if queueing is None:
            queueing = any(n.shedding is not None for n in graph.nodes.values())
        self.queueing: bool = queueing
        self.trace: bool = given["trace"]
        self.keep_messages: bool = given["keep_messages"]
        self.instances = graph.instances()
        self.router = Router(graph)
        # the nodes some node subscribes to: only their output is routed on, with its
        # progress punctuations (a sink's output goes to its net output alone)
        self._heard = {n for n in graph.nodes if any(self.router.hears(o, n) for o in graph.nodes)}
        self.messages: dict[str, list[np.ndarray]] = {}
        self._published: dict[int, int | None] = {}  # per instance: progress published

    def run(self, raw: np.ndarray | Sources | Iterable[np.ndarray], *,
            registry: ev.TypeRegistry | None = None, step_ticks: int | None = None,
            batch_rows: int | None = None, speed: float | None = None) -> RunReport:
        """Deliver ``raw``, then flush level by level. The arguments are those of
        :meth:`RayRuntime.run <specula.actors.ray_runtime.RayRuntime.run>`, checked alike
        (:data:`specula.options.RUNTIME_OPTIONS`).

        An array (with ``ats`` set) is delivered in arrival order, in steps
        (:func:`~.sources.arrival_steps`): the raw events whose arrival falls within
        ``step_ticks`` of the first event of a step are delivered together in that
        step, at most ``batch_rows`` of them; the default is
        :data:`DEFAULT_STEP_SECONDS` of arrival time and no bound on rows, as a source
        that ships batches every few milliseconds would (0: one step per arrival time,
        the slowest). :class:`~.sources.Sources` are read merged, as one array.

        An iterable of batches is read as it comes, so memory holds one batch of it: each
        batch is one step, its order within and across batches is the arrival order,
        and the step's time is the newest ``ats`` so far (a log read a chunk at a time,
        delivered as the Ray runtime's driver feeds it); ``step_ticks`` and
        ``batch_rows`` are refused for it.

        ``speed`` paces the steps to that many times real time, by the time stamps of
        their events, as the Ray runtime's driver paces its batches (None: as fast as
        the detectors take them); the virtual clock does not depend on it.

        ``registry`` is the one the raw events were made with (default: the graph's).
        When it is another, their type ids are translated by name into the graph's,
        and a source type of the graph that it lacks, or declares with other fields or
        another time unit, is refused (:class:`~specula.events.RegistryMismatchError`).

        Raw events should carry their source's counter in ``seq`` (it orders events with
        equal time stamps); if no event has one, they are numbered in time-stamp order
        (of a batch, after the batches before it). Their ``producer`` and ``flags`` must
        be 0 (:func:`~specula.events.validate_raw`); a batch with a row that breaks this
        is refused with :class:`~specula.events.InvalidEvent`.
        """
        check_batching(raw, step_ticks, batch_rows, speed)
        table = raw_type_table(self.graph, registry)
        t0 = time.perf_counter()
        clock = ManualClock()
        units = {i.producer: self._unit(i, clock) for i in self.instances}
        self._published = {}
        nets = {i.producer: NetOutput(units[i.producer].out_dtype) for i in self.instances}
        self.messages = {n: [] for n in self.graph.nodes}
        if isinstance(raw, Sources):
            parts = list(raw.merged())
            raw = ev.concat_records(parts) if parts else np.zeros(0, self.graph.registry.dtype())
        # the seconds played: of an array at once, of an iterable batch by batch
        seconds: list[np.ndarray] = []
        if isinstance(raw, np.ndarray):
            if step_ticks is None:
                step_ticks = int(DEFAULT_STEP_SECONDS * self.ticks_per_second)
            seconds = [played_seconds(raw, self.ticks_per_second)]
            steps: Iterable[tuple[np.ndarray, int]] = _steps(
                self._own_dtype(prepare_raw(raw, table)), step_ticks, batch_rows)
        else:
            steps = ((self._own_dtype(b), now) for b, now in _batch_steps(raw, table))
        stations = {i.producer: Station(i, self, units[i.producer]) for i in self.instances} \
            if self.queueing else None

        def step(batch: np.ndarray, now: int, flush: bool) -> None:
            if stations is None:
                self._step(units, nets, clock, batch, now, flush)
            else:
                queued_step(self, stations, units, nets, clock, batch, now, flush)

        n_raw, now, by_batch = 0, 0, not isinstance(raw, np.ndarray)
        pace = Pace(speed, self.ticks_per_second)
        with _frozen_heap():
            for batch, now in steps:
                if speed is not None:
                    pace.wait(int(batch["ts"].min()))
                step(batch, now, flush=False)
                n_raw += len(batch)
                if by_batch:
                    seconds.append(played_seconds(batch, self.ticks_per_second))
            step(np.zeros(0, self.graph.registry.dtype()), now, flush=True)
        report = self._report(units, nets, n_raw, time.perf_counter() - t0, stations)
        report.played_seconds = len(union(seconds))
        return report

    def _own_dtype(self, raw: np.ndarray) -> np.ndarray:
        """``raw`` viewed with the graph registry's own dtype of its sources when that is
        the same layout, as events made with another registry often have: the units'
        checks then find the dtype they take by identity, not field by field."""
        dtype = self.graph.registry.dtype(self.graph.sources)
        return raw.view(dtype) if raw.dtype is not dtype and raw.dtype == dtype else raw

    def _unit(self, instance: Instance, clock: ManualClock) -> OrderingUnit:
        controller = None
        if instance.node.alpha == "adaptive":
            controller = AlphaController(clock=clock if self.cost_model else time.perf_counter)
        return instance.unit(self.graph.registry, controller=controller, trace=self.trace)

    def _step(self, units: dict[int, OrderingUnit], nets: dict[int, NetOutput],
              clock: ManualClock, raw: np.ndarray, now: int, flush: bool) -> None:
        if self.cost_model:
            clock.advance(max(0.0, now / self.ticks_per_second - clock()))
        produced: list[tuple[str | None, np.ndarray]] = [(None, raw)] if len(raw) else []
        for inst in self.instances:
            unit = units[inst.producer]
            inbox = self._inbox(inst, unit, produced)
            before = unit.stats.work() if self.cost_model else ()
            out = unit.push(inbox, now) if inbox is not None else unit.driver.take_output()
            if flush:
                end = unit.flush(now)
                if len(end):
                    out = ev.concat_records([out, end]) if len(out) else end
            if self.cost_model and unit.controller is not None:
                unit.controller.add_busy(self.cost_model.busy(before, unit.stats.work(),
                                                              inst.node.name))
            out = self.hand_on(inst, unit, nets[inst.producer], out, now)
            if len(out) and inst.node.name in self._heard:
                produced.append((inst.node.name, out))

    def _inbox(self, inst: Instance, unit: OrderingUnit,
               produced: list[tuple[str | None, np.ndarray]]) -> np.ndarray | None:
        """What ``inst`` takes of the batches ``produced`` so far in a step (None:
        nothing), in the unit's input dtype, as one batch."""
        pieces = []
        for source, batch in produced:
            piece = self.router.piece(inst, source, batch)
            if len(piece):
                same = piece.dtype is unit.in_dtype or piece.dtype == unit.in_dtype
                pieces.append(piece if same else ev.conform(piece, unit.in_dtype, drop=True))
        if len(pieces) > 1:
            return ev.concat_records(pieces)
        return pieces[0] if pieces else None

    def hand_on(self, inst: Instance, unit: OrderingUnit, net: NetOutput, out: np.ndarray,
                now: int) -> np.ndarray:
        """Record what ``unit`` (of ``inst``) generated at ``now`` in its ``net`` output
        (and in :attr:`messages`, if kept); return it as the subscribers get it, with a
        progress punctuation if the unit's progress moved past what it last published
        (none for a node that no node subscribes to)."""
        if len(out):
            net.apply(out, now)
            if self.keep_messages:
                self.messages[inst.node.name].append(out)
        if inst.node.name not in self._heard:
            return out
        out, self._published[inst.producer] = punctuate(
            out, unit, self._published.get(inst.producer), now)
        return out

    def _report(self, units: dict[int, OrderingUnit], nets: dict[int, NetOutput], n_raw: int,
                wall: float, stations: dict[int, Station] | None) -> RunReport:
        detectors, by_node = {}, {}
        levels = self.graph.levels()
        for name in self.graph.nodes:
            insts = [i for i in self.instances if i.node.name == name]
            us = [units[i.producer] for i in insts]
            by_node[name] = us
            detectors[name] = DetectorReport(
                name=name,
                net=merge_nets([nets[i.producer] for i in insts]),
                stats=sum_stats([u.stats for u in us]),
                late=ev.concat([u.late_events() for u in us], us[0].in_dtype),
                alpha={i.label: u.controller.history for i, u in zip(insts, us, strict=True)
                       if u.controller is not None},
                k_s=max(u.k for u in us) / self.graph.ticks_per_second,
                level=levels[name],
                memory=merge_figures([u.memory.figures() for u in us]),
                series=[{**s, "instance": i.label} for i in insts
                        for s in stations[i.producer].series] if stations else [],
                inbox=InboxStats.merge([stations[i.producer].gate.report(
                    stations[i.producer].inbox) for i in insts]) if stations else None)
        return RunReport("in-process", detectors, n_raw, wall, 1.0 / self.ticks_per_second,
                         units=by_node)


@contextlib.contextmanager
def _frozen_heap() -> Iterator[None]:
    """Keep the objects alive before a run out of the collector's full collections
    while it runs (:func:`gc.freeze`), and hand them back after it (:func:`gc.unfreeze`).

    A full collection scans every object tracked, and a run triggers several as its net
    outputs grow: the imports, loaded kernels, the graph and the stream, scanned again
    each time, cost the 4-level graph of ``benchmarks/ray_graph.py`` about a quarter of
    its processor time in-process (docs/measurements.md, "the step around the
    detector"); the Ray chain hosts freeze likewise (:mod:`specula.actors.pool`).
    Nothing is frozen for good: where objects are frozen already (a host that freezes
    its own), this leaves the collector as it is."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def prepare_raw(raw: np.ndarray, table: np.ndarray | None = None) -> np.ndarray:
    """Raw events in arrival order, numbered if they carry no counter, with their origin
    (the arrival of the newest raw event a detection depends on) set to their arrival,
    and their type ids read through ``table`` (:func:`~specula.events.type_table`)."""
    raw = ev.translate_types(raw, table)
    ev.check_raw(raw)
    if not _counted(raw):
        _number(raw, 0)
    ats = raw["ats"]
    if len(ats) > 1 and not bool((ats[1:] >= ats[:-1]).all()):  # else in order: no copy
        raw = raw[np.argsort(ats, kind="stable")]
    raw["origin"] = raw["ats"]
    return raw


def _counted(raw: np.ndarray) -> bool:
    """Does some event of ``raw`` carry a counter?"""
    return bool(raw["seq"].any())


def _number(raw: np.ndarray, first: int) -> None:
    """Number ``raw``'s ``seq`` from ``first`` in time-stamp order, in place."""
    raw["seq"][np.argsort(raw["ts"], kind="stable")] = np.arange(first, first + len(raw))


def _steps(raw: np.ndarray, step_ticks: int, batch_rows: int | None
           ) -> Sequence[tuple[np.ndarray, int]]:
    """``raw`` (in arrival order) in steps, each at the arrival of its newest event."""
    ats = np.ascontiguousarray(raw["ats"])
    arrivals = ats.tolist()  # Python ints: read one by one
    return [(raw[i:j], arrivals[j - 1]) for i, j in arrival_steps(ats, step_ticks, batch_rows)]


def _batch_steps(batches: Iterable[np.ndarray], table: np.ndarray | None
                 ) -> Iterator[tuple[np.ndarray, int]]:
    """A step per non-empty batch, in the order given, at the newest arrival so far; its
    origin set to its arrival and its type ids read through ``table``. Until a batch
    carries a counter, each is numbered after those before it: a lone event with
    ``seq`` 0 is the first of a stream with counters or one more of a stream without."""
    count, now, counted = 0, None, False
    for batch in batches:
        if not len(batch):
            continue
        batch = ev.translate_types(batch, table)  # a copy
        ev.check_raw(batch)
        counted = counted or _counted(batch)
        if not counted:
            _number(batch, count)
        batch["origin"] = batch["ats"]
        count += len(batch)
        newest = int(batch["ats"].max())
        now = newest if now is None else max(now, newest)
        yield batch, now
