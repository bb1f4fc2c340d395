"""The main job: a sensor log through Spark and Ray on Spark to the detector graph and back.

:func:`replay` runs, in one Spark application, for one kind of log
(:class:`~specula.pipelines.logs.LogKind`, e.g. the DEBS 2013 position log of
:mod:`specula.soccer`):

1. a generated log (when none is given), written by the kind with its ground truth;
2. ingestion on Spark (:func:`~specula.pipelines.spark_ingest.ingest`): validation,
   quarantine, delays, the arrival-ordered stream as Parquet;
   With ``watch``, step 2 is instead a Structured Streaming query over a directory
   (:class:`~specula.pipelines.spark_stream.LogWatcher`) that feeds files as they land;
   on Ray, at every checkpoint interval it suspends its graph and commits a checkpoint
   with the output that became final (:mod:`~specula.pipelines.watch_checkpoint`); a
   watch stopped by a signal ends with one, and the next watch on the same folder,
   after a stop or a crash alike, goes on from the last;
3. Ray started on the Spark cluster (or a Ray cluster joined at ``ray_address``, or no
   Ray at all with ``in_process``), fed the stream in arrival order, paced and with
   backpressure, through the detector graph; a replay starts Ray before step 2, and
   the chain hosts of its run with it (:func:`_prestarted`), which load their kernels
   while Spark ingests;
4. persistence through Spark (:func:`~specula.pipelines.spark_store.persist`), a
   summary and plots, all in one output folder.

Ray and Spark are shut down on success, on errors and on Ctrl-C.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from specula.actors.recovery import Suspension
from specula.actors.report import RunReport, format_detectors
from specula.actors.routing import raw_type_table
from specula.actors.sources import ArrayPart, Sources
from specula.detectors.graph import Graph
from specula.events import TypeRegistry
from specula.options import NODE_OPTIONS, MemoryLimit, Shedding, k0_of_ms
from specula.pipelines.kernel_cache import filling
from specula.pipelines.lease import Lease, check, claim, release
from specula.pipelines.logs import LogKind
from specula.pipelines.progress import JobProgress
from specula.pipelines.resume import save_suspension, state_dir, suspended_watch
from specula.pipelines.spark_stream import LogWatcher, TakenBatch
from specula.pipelines.watch_checkpoint import Committed, PendingOutput, WatchCheckpoint

if TYPE_CHECKING:
    from specula.actors.ray_runtime import RayRuntime

#: The driver JVM's heap in a watch: its work is a micro-batch of files at a time, and an
#: unbounded heap (a quarter of the RAM) grows for minutes before the JVM collects.
_WATCH_HEAP = "1g"

#: The options of the kind's default graph where the config leaves them unset.
DEFAULT_OPTIONS: dict[str, Any] = {"alpha": "adaptive", "retraction": "on-demand",
                                   "k0_ms": 400.0}


@dataclass
class ReplayConfig:
    """What to replay and how; the defaults are the README's main command.

    Without ``log``, the log kind generates ``seconds`` of it (``profile``, ``seed``);
    without ``graph``, the kind's default graph runs. ``alpha``, ``retraction`` and
    ``k0_ms`` (initial K in milliseconds of event time) apply to every node of
    the graph that runs; left at None, the default graph gets :data:`DEFAULT_OPTIONS`
    and a given graph keeps its nodes' own (see :func:`replay_graph`).
    """

    log: str | None = None
    graph: Graph | None = None
    seconds: float = 20.0
    profile: str = "debs2013"
    seed: int = 0
    delays: bool = True
    alpha: float | str | None = None
    retraction: str | None = None
    k0_ms: float | None = None
    speed: float | None = None
    #: raw rows a batch: the work of a push is mostly per push, not per row (on Ray,
    #: 20 s of the debs2013 profile cost the actors 3.8 CPU s in batches of 1,000 and
    #: 1.3 s in batches of 5,000, the pass latency 0.06-0.09 s more; 10,000: 1.05 s,
    #: 0.2 s more; docs/measurements.md). A batch is cut from rows at hand, so it adds
    #: no wait for rows to come.
    batch_size: int = 5_000
    out: Path = field(default_factory=lambda: Path("runs") / time.strftime("%Y%m%d-%H%M%S"))
    spark_master: str | None = None
    #: Ray worker nodes started on Spark; None: sized to the Spark cluster
    #: (:func:`~specula.cluster.spark.ray_worker_nodes`).
    ray_workers: int | None = None
    ray_address: str | None = None
    #: Source actors that feed a replay on Ray, each a part of the arrival table cut by
    #: key (:mod:`specula.actors.sources`); 1: the driver feeds.
    sources: int = 1
    in_process: bool = False
    #: Which instances share a Ray actor (RayRuntime's ``chaining``: 'auto' or 'none').
    chaining: Literal["auto", "none"] = "auto"
    plots: bool = True
    #: Detectors whose latency is plotted; None: those at the top of the graph.
    latency_plots: tuple[str, ...] | None = None
    progress: bool = False
    watch: bool = False
    idle_timeout: float | None = 30.0
    #: Seconds between a watch's checkpoints (:mod:`.watch_checkpoint`).
    checkpoint_interval: float = 60.0


@dataclass
class ReplayResult:
    """The run's report, summary, output paths, the graph that ran and, for a generated
    log, its truth."""

    report: RunReport
    summary: dict[str, Any]
    paths: dict[str, str]
    graph: Graph
    truth: Any = None


def replay(config: ReplayConfig, kind: LogKind) -> ReplayResult:
    """Run the whole job over logs of ``kind``; see the module docstring."""
    from specula.cluster.spark import spark_session
    from specula.pipelines.delays import DelayModel
    from specula.pipelines.log_files import is_small_log
    from specula.pipelines.native_memory import steady_allocators

    if config.ray_address and not config.in_process:
        from specula.cluster import check_joinable

        check_joinable(config.ray_address)  # before Spark spends a minute
    if config.watch and config.in_process:
        raise ValueError("a watch runs on Ray: its checkpoints suspend the graph there "
                         "(leave in_process off)")
    graph = replay_graph(config, kind)
    graph.validate()  # refuse what cannot run before Spark starts: the graph,
    raw_type_table(graph, kind.registry)  # and events it cannot read
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    run = next_run(out) if config.watch else None
    if run is not None:  # a long-lived driver: before Spark, Ray and pyarrow start
        steady_allocators()
    with JobProgress(config.progress) as progress, contextlib.ExitStack() as spark_open:
        # before Spark and Ray start, so that every process they start carries its tag
        start = _start_watch(out, run, graph, config.in_process, progress.say) \
            if run is not None else None
        # what runs until the detection starts: the kernels compiled into Numba's cache
        early = spark_open.enter_context(contextlib.ExitStack())
        if start is None and not config.in_process:
            early.enter_context(filling(graph, out / "logs" / "kernel-cache.log"))
        log, truth = config.log, None
        if log is None:
            with progress.phase(f"generating {config.seconds:g} s of {config.profile}"):
                generated = kind.generate(config.seconds, config.profile, config.seed,
                                          out / "input")
            log, kind, truth = generated.path, generated.kind, generated.truth
        delays = DelayModel(seed=config.seed) if config.delays else None
        # a watched log grows: its size now says nothing of what the job will read
        small = not config.watch and is_small_log(log)
        with progress.phase("starting Spark"):
            spark = spark_open.enter_context(spark_session(config.spark_master,
                                                           small_input=small,
                                                           driver_memory=_WATCH_HEAP
                                                           if config.watch else None))
        report, summary, paths = _on_spark(spark, config, kind, graph, log, delays, out,
                                           start, progress, early)
        with progress.phase("stopping Spark"):
            spark_open.close()
        if start is not None:  # the output and summary are saved
            release(out, start.lease)
        if config.plots:
            with progress.phase("plots"):
                paths.update(_plots(report, graph, out / "plots", config))
    return ReplayResult(report, summary, paths, graph, truth)


@dataclass(frozen=True)
class _WatchStart:
    """Where a watch starts: its lease, the checkpoint it goes on from (None: the
    start), the micro-batches it takes again first and the suspended graph it resumes."""

    run: int
    lease: Lease
    checkpoint: WatchCheckpoint | None
    retake: list[TakenBatch]
    resume: Suspension | None


def _start_watch(out: Path, run: int, graph: Graph, in_process: bool,
                 say: Callable[[str], None]) -> _WatchStart:
    """Before Spark and Ray start: refuse while another watch runs on ``out``, end what
    a dead one left (:mod:`~specula.pipelines.lease`), put ``out`` back to its last
    checkpoint (:func:`~specula.pipelines.watch_checkpoint.recover`), check the state
    of the graph suspended there, and claim ``out`` for watch ``run``."""
    from specula.pipelines.spark_stream import committed_batch, taken_batches
    from specula.pipelines.watch_checkpoint import last_checkpoint, recover

    dead = check(out, say)
    last = last_checkpoint(out)
    taken = taken_batches(out, last.handed if last is not None else -1)
    checkpoint = recover(out, [p for t in taken for p in t.paths])
    again = [t for t in taken if t.batch_id <= committed_batch(out)]
    if dead:
        since = f"checkpoint {checkpoint.id}" if checkpoint is not None else "the start"
        say(f"watch {dead[-1].run} died without saving: watch {run} goes on from {since} "
            f"and takes the {len(taken)} micro-batch(es) it took after that again")
    resume = suspended_watch(out, graph, in_process)
    return _WatchStart(run, claim(out, run), checkpoint, again, resume)


def _on_spark(spark: Any, config: ReplayConfig, kind: LogKind, graph: Graph, log: str,
              delays: Any, out: Path, start: _WatchStart | None, progress: JobProgress,
              early: contextlib.ExitStack) -> tuple[RunReport, dict[str, Any], dict[str, str]]:
    """Ingestion, detection and persistence on a running Spark session (``start``: where
    a watch starts, None for a replay); ``early`` is closed as the detection starts."""
    from specula.pipelines.arrival import (
        arrival_batches,
        arrival_sources,
        count_rows,
    )
    from specula.pipelines.spark_ingest import ingest
    from specula.pipelines.spark_store import persist

    annotations = Annotations(kind.annotations())
    extra: dict[str, Any] = {}
    if start is not None:
        report, ingested, extra = _watch(spark, config, kind, graph, log, out, start,
                                         annotations, progress)
    else:
        with contextlib.ExitStack() as on_ray:
            # Ray first: its chain hosts start while Spark ingests (_prestarted)
            address = None if config.in_process else on_ray.enter_context(
                _prestarted(spark, config, out, graph, progress))
            with progress.phase("ingesting (checks, delays)"):
                ingested = ingest(spark, kind, log, out, delays=delays,
                                  parts=config.sources if config.sources > 1 else None)
                total = count_rows(ingested.events_path) if config.progress else None
            path, dtype = ingested.events_path, kind.event_dtype()
            raw = arrival_sources(path, dtype, annotations.arrived_in(
                arrival_batches(path, dtype, config.batch_size))) \
                if config.sources > 1 and not config.in_process else \
                annotations.into(arrival_batches(path, dtype, config.batch_size))
            if address is None:
                assert not isinstance(raw, Sources)  # parts are for source actors (Ray) only
                with progress.phase("detecting (in-process)", total) as advance:
                    report = _run_in_process(graph, progress.events(raw, advance),
                                             kind.registry, config.speed)
            else:
                early.close()  # the run's hosts compile what the cache still lacks
                with progress.phase("detecting (Ray)", total) as advance:
                    report, _ = _run_on_ray(graph, address, raw, kind.registry, config,
                                            None, None, None, advance)
                    if report.startup_s is not None and report.stream_wall_s is not None:
                        advance.note(f"start-up {report.startup_s:.1f} s, "
                                     f"stream {report.stream_wall_s:.1f} s")
    committed = extra.pop("committed", None)
    summary = {**summarize(report, graph, ingested, config), **extra}
    if committed is not None:
        whole_run(summary, committed)
    summary["annotations_in"] = annotations.merged
    summary["annotations_after_log"] = len(annotations.events) - annotations.merged
    run = start.run if start is not None else None
    with progress.phase("persisting"):
        paths = {"quarantine": str(out / "quarantine"),
                 **({"arrival": ingested.events_path} if ingested.events_path else {}),
                 **annotations.save(out / "annotations", kind.event_columns, run),
                 **persist(spark, report, graph.registry, out, summary, run=run,
                           event_tables=start is None)}
    return report, summary, paths


@contextlib.contextmanager
def _ray(spark: Any, config: ReplayConfig, out: Path, progress: JobProgress
         ) -> Iterator[str]:
    """The address of the Ray cluster the run uses: the one joined (``ray_address``) or
    Ray started on Spark for the block."""
    from specula.cluster.spark import ray_on_spark

    if config.ray_address:
        yield config.ray_address
        return
    with contextlib.ExitStack() as ray_open:
        with progress.phase("starting Ray on Spark"):
            address = ray_open.enter_context(ray_on_spark(
                spark, worker_nodes=config.ray_workers, log=out / "logs" / "ray-on-spark.log"))
        yield address


@contextlib.contextmanager
def _prestarted(spark: Any, config: ReplayConfig, out: Path, graph: Graph,
                progress: JobProgress) -> Iterator[str]:
    """Ray for a replay, started before the log is ingested: the cluster (:func:`_ray`;
    its address is yielded), this driver connected to it for the block, and the chain
    hosts of the graph's run started (:meth:`RayRuntime.prestart
    <specula.actors.ray_runtime.RayRuntime.prestart>`), so that they import specula and
    load their kernels while Spark ingests, and the run takes them from the pool. The
    run's start-up still counts from its own start: what the hosts have not done by
    then, it waits for."""
    from specula.actors.ray_runtime import user_modules
    from specula.cluster import ray_session

    with _ray(spark, config, out, progress) as address, contextlib.ExitStack() as joined:
        with progress.phase("starting the chain hosts"):
            joined.enter_context(ray_session(address, modules=user_modules(graph)))
            _ray_runtime(graph, address, config, lasting=False).prestart(
                config.sources if config.sources > 1 else 0)
        yield address


def _watch(spark: Any, config: ReplayConfig, kind: LogKind, graph: Graph, log: str,
           out: Path, start: _WatchStart, annotations: Annotations, progress: JobProgress
           ) -> tuple[RunReport, Any, dict[str, Any]]:
    """A watch of ``log`` from ``start``: segments of the graph's run on Ray, each
    ended by a suspension and a checkpoint at the checkpoint interval, until the watch
    is stopped (a last suspension) or idle (a flush). Returns the last segment's
    report, the counts of the whole watch and the summary's watch entries."""
    from specula.pipelines.spark_stream import WatchCounts, counts_as_ingested, stop_on_signals

    last = start.checkpoint
    if last is not None:
        annotations.restore(last.annotations)
    watcher = LogWatcher(spark, kind, log, out, idle_timeout=config.idle_timeout,
                         batch_size=config.batch_size,
                         handed=last.handed if last is not None else -1,
                         counts=WatchCounts.from_state(last.counts) if last else None,
                         retake=start.retake)
    pending = PendingOutput(graph)
    commits, resume, suspension = [], start.resume, None
    try:
        with stop_on_signals(watcher, progress.say), \
                _ray(spark, config, out, progress) as address, \
                progress.phase("detecting (Ray)") as advance:
            while not watcher.ended:
                segment = annotations.into(watcher.batches(config.checkpoint_interval))
                report, suspension = _run_on_ray(
                    graph, address, segment, kind.registry, config, resume,
                    lambda: watcher.stopping or not watcher.ended, pending, advance)
                save_suspension(out, suspension)
                commits.append(_checkpoint(out, start.run, watcher, annotations, pending,
                                           graph.registry))
                resume = suspension
    finally:
        watcher.close()
    return report, counts_as_ingested(watcher.counts), {
        "resumed": start.resume is not None, "suspended": suspension is not None,
        "resumed_from": last.id if last is not None else None,
        "checkpoints": [c.id for c in commits], "written_live": pending.committed,
        "committed": commits[-1].committed if commits else None}


def _checkpoint(out: Path, run: int, watcher: LogWatcher, annotations: Annotations,
                pending: PendingOutput, registry: TypeRegistry) -> WatchCheckpoint:
    """Commit the next checkpoint of watch ``run``: what ``pending`` holds, where
    ``watcher`` and ``annotations`` stand; the files of the micro-batches it covers are
    never taken again. The segment's memory, freed by then, goes back to the system
    (:func:`~specula.pipelines.native_memory.release_free_memory`): else the driver's
    resident memory grows at every checkpoint."""
    from specula.pipelines.native_memory import release_free_memory
    from specula.pipelines.spark_stream import forget_taken
    from specula.pipelines.watch_checkpoint import commit

    rows = pending.take()
    pending.committed += sum(len(r) for r in rows.get("complex", {}).values())
    record = commit(out, run, watcher.handed, watcher.counts.state(), annotations.state(),
                    rows, registry)
    forget_taken(out, watcher.handed)
    del rows
    release_free_memory()
    return record


def next_run(out: Path) -> int:
    """The number of a watch on ``out``: one more than the runs saved there (1 first)."""
    saved = [int(p.stem) for p in (out / "runs").glob("*.json") if p.stem.isdigit()]
    return max(saved, default=0) + 1


def replay_graph(config: ReplayConfig, kind: LogKind) -> Graph:
    """The graph a replay runs, with the config's options applied.

    Without ``config.graph``: the kind's default graph, with the options the config
    sets and :data:`DEFAULT_OPTIONS` for the others. With it: a copy of that graph in
    which every option the config sets replaces the nodes' own (``k0_ms`` is every
    node's initial K, as in the default graph); the options it leaves at
    None stay as the graph's author set them. Values are checked by
    :mod:`specula.options`.
    """
    if config.graph is None:
        given = {name: default if getattr(config, name) is None else getattr(config, name)
                 for name, default in DEFAULT_OPTIONS.items()}
        return kind.default_graph(given["alpha"], given["retraction"], given["k0_ms"])
    graph = config.graph
    given = {name: getattr(config, name) for name in ("alpha", "retraction")
             if getattr(config, name) is not None}
    if given:
        graph = graph.with_options(**given)
    if config.k0_ms is not None:
        graph = with_k0_ms(graph, config.k0_ms)
    return graph


def with_k0_ms(graph: Graph, k0_ms: float) -> Graph:
    """A copy of ``graph`` whose nodes all start with K = ``k0_ms`` milliseconds of
    event time (levels above the first are clocked by their producers' progress, so
    none needs more for the depth of the graph)."""
    return graph.with_options(k0=k0_of_ms(k0_ms, graph.ticks_per_second))


class Annotations:
    """Merges a log kind's annotations (:meth:`LogKind.annotations`: a referee's
    interruptions, the game's phases; in arrival order) into a stream of arrival-ordered
    batches of the log's events.

    An annotation enters the stream once it has arrived and the log has reached its time
    stamp: right before the first event that arrives no sooner than the annotation and
    whose ``ts`` is at or past the annotation's. It is stamped no earlier than the newest
    ``ts`` before it, nor than 1 tick before that event's (its own where that is later),
    and with that event's arrival (``ats``, ``origin``).

    So an annotation is never behind the clock of a unit it enters, and no time the log
    did not see lies between its time stamp and the event after it: it gates what
    follows without ever being measured as delayed, also where a runtime puts it just
    after that event (source actors merge on ``ats``, then ``seq``). Otherwise one
    stamped before the log's first reading (the wait for the kick-off, sent as a stop
    from 0) would be measured, at the first reading, as hours late, and that would
    become the unit's K; one that arrives late would make its own delay the unit's K.
    The price: a stop starts, and play resumes, up to the gap between the annotated time
    and the next event later (under a millisecond in a match's stream; the annotation's
    own delay where it arrives late).

    Annotations are taken in order: one waits for those before it. Those the log never
    reaches (after its last event) are not delivered; :attr:`merged` counts those that
    were, and :attr:`delivered` holds them as stamped.
    """

    def __init__(self, events: np.ndarray) -> None:
        self.events = events
        self.merged = 0
        self._delivered: list[np.ndarray] = []
        self._clock: int | None = None  # the newest ts of the log's events so far

    @property
    def delivered(self) -> np.ndarray:
        """The annotations delivered so far, as stamped."""
        if not self._delivered:
            return self.events[:0]
        return np.concatenate(self._delivered)

    def state(self) -> dict[str, Any]:
        """Where the merge stands, as JSON holds it (what a watch's checkpoint records):
        the annotations delivered, as stamped, and the log's newest time stamp."""
        arrived = self.delivered
        return {"delivered": [list(row) for row in arrived.tolist()],
                "clock": self._clock}

    def restore(self, state: dict[str, Any]) -> None:
        """Go on from ``state`` (:meth:`state`)."""
        rows = [tuple(row) for row in state["delivered"]]
        self._delivered = [np.array(rows, self.events.dtype)] if rows else []
        self.merged, self._clock = len(rows), state["clock"]

    def into(self, batches: Iterable[np.ndarray]) -> Iterator[np.ndarray]:
        """``batches`` with the annotations merged in, as described above."""
        for batch in batches:
            yield self._merge(batch) if len(batch) else batch

    def _merge(self, batch: np.ndarray) -> np.ndarray:
        """``batch`` with the annotations it takes in, each before its event."""
        pieces: list[np.ndarray] = []
        start = 0  # batch[:start] is placed
        ts, ats = batch["ts"], batch["ats"]
        while self.merged < len(self.events):
            note = self.events[self.merged]
            reached = np.flatnonzero((ats[start:] >= note["ats"]) & (ts[start:] >= note["ts"]))
            if not len(reached):
                break
            at = start + int(reached[0])  # the event the annotation goes before
            stamped = np.zeros(1, batch.dtype)
            for name in set(batch.dtype.names or ()) & set(note.dtype.names or ()):
                stamped[name] = note[name]
            stamped["ts"] = max(int(note["ts"]), self._advance(ts[start:at]), int(ts[at]) - 1)
            stamped["ats"] = stamped["origin"] = ats[at]
            pieces += [batch[start:at], stamped]
            self._delivered.append(stamped.astype(self.events.dtype))
            self.merged += 1
            start = at
        self._advance(ts[start:])
        return np.concatenate([*pieces, batch[start:]]) if pieces else batch

    def _advance(self, ts: np.ndarray) -> int:
        """The newest time stamp of the log so far, after ``ts`` (-1 before any)."""
        if len(ts):
            newest = int(ts.max())
            self._clock = newest if self._clock is None else max(self._clock, newest)
        return -1 if self._clock is None else self._clock

    def arrived_in(self, batches: Iterable[np.ndarray]) -> list[ArrayPart]:
        """The annotations that ``batches`` (the whole arrival-ordered log) take in, as
        stamped by :meth:`into`, as a part for a source actor of their own; none if none
        do. Reads the batches once."""
        for _ in self.into(batches):
            pass
        arrived = self.delivered
        return [ArrayPart(arrived)] if len(arrived) else []

    def save(self, folder: Path, columns: Sequence[str], run: int | None = None
             ) -> dict[str, str]:
        """Write the annotations that arrived, as stamped, as
        ``folder/part-<run>.parquet`` (0 for a replay; ``columns``, as the arrival
        table): with ``arrival/`` they are the whole input of the run. Returns
        ``{"annotations": folder}``, or nothing when none arrived."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        if not self.merged:
            return {}
        arrived = self.delivered
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({c: arrived[c] for c in columns}),
                       folder / f"part-{run or 0}.parquet")
        return {"annotations": str(folder)}


def summarize(report: RunReport, graph: Graph, ingested: Any, config: ReplayConfig
              ) -> dict[str, Any]:
    """Events in, quarantined, late, detections per type, latency and real-time factor.

    The options are read from the nodes of ``graph``, the graph that ran: ``options``
    per node, and ``alpha`` and ``retraction`` where every node has the same (else
    None). The real-time factor is the seconds of event time that hold raw events
    (:attr:`~specula.actors.report.RunReport.played_seconds`) over the wall time of
    the detection.
    """
    span_s = max(0, ingested.last_ts - ingested.first_ts) / graph.ticks_per_second
    played_s = report.played_seconds
    detectors = report.summary()["detectors"]
    detected: dict[str, int] = {}
    for name, node in graph.nodes.items():
        counts = report.detectors[name].detected()
        for t in node.outputs:
            detected[t] = detected.get(t, 0) + counts.get(graph.registry.id(t), 0)
    return {
        "log": config.log or f"generated {config.profile} log, {config.seconds:g} s, "
                             f"seed {config.seed}",
        "runtime": report.runtime,
        "ray_nodes": report.cluster_nodes,
        "sources": report.sources,
        "rows": ingested.rows,
        "events_in": ingested.events,
        "quarantined": ingested.quarantined,
        "duplicates": ingested.duplicates,
        "first_quarantined": list(ingested.first_quarantined),
        "late": sum(d["late"] for d in detectors.values()),
        "detected": detected,
        "first_ts": ingested.first_ts,
        "last_ts": ingested.last_ts,
        "stream_seconds": span_s,
        "played_seconds": played_s,
        "wall_seconds": report.wall_seconds,
        # Ray: from the runtime's start to the first event a detector processed, and from
        # there to the end of the stream (RunReport.startup_s); None in-process
        "startup_s": report.startup_s,
        "stream_wall_s": report.stream_wall_s,
        # a watch waits for files: its wall time says nothing of speed
        "realtime_factor": played_s / report.wall_seconds
        if report.wall_seconds and not config.watch else None,
        "alpha": common_option(graph, "alpha"),
        "retraction": common_option(graph, "retraction"),
        "options": {name: {o: _plain(getattr(node, o)) for o in NODE_OPTIONS}
                    for name, node in graph.nodes.items()},
        "detectors": detectors,
    }


def whole_run(summary: dict[str, Any], committed: Committed) -> None:
    """Make a watch's ``summary`` count the detections and late events of the whole run
    on its folder, every watch on it before this one included: the output its
    checkpoints committed (the graph's report covers only what this watch ran)."""
    summary["detected"] = {t: committed.detected.get(t, 0) for t in summary["detected"]}
    summary["late"] = committed.late
    for name, figures in summary["detectors"].items():
        figures["net_events"] = committed.net_events.get(name, 0)


def _plain(value: Any) -> Any:
    """An option's value as JSON can hold it (a Shedding or MemoryLimit as its settings)."""
    return value.describe() if isinstance(value, Shedding | MemoryLimit) else value


def common_option(graph: Graph, name: str) -> Any:
    """The value of node option ``name`` that every node of ``graph`` has, else None."""
    values = {getattr(node, name) for node in graph.nodes.values()}
    return values.pop() if len(values) == 1 else None


def format_summary(summary: dict[str, Any]) -> str:
    """The table ``specula replay`` prints at the end."""
    rtf = summary["realtime_factor"]
    duplicates = summary.get("duplicates", 0)
    lines = [
        f"{summary['log']} on {summary['runtime']}",
        f"events in {summary['events_in']:,} of {summary['rows']:,} rows, quarantined "
        f"{summary['quarantined']:,}"
        f"{f' ({duplicates:,} exact duplicates)' if duplicates else ''}, "
        f"late {summary['late']:,}; "
        f"{summary.get('played_seconds', summary['stream_seconds']):.1f} s played "
        f"({summary['stream_seconds']:.1f} s first to last) in "
        f"{summary['wall_seconds']:.1f} s (real-time factor "
        f"{'-' if rtf is None else f'{rtf:.1f}'})",
        *format_detectors(summary["detectors"]),
    ]
    first = summary.get("first_quarantined", [])
    if first:
        more = summary["quarantined"] - len(first)
        lines += [f"quarantined: {record}" for record in first]
        lines += [f"quarantined: {more:,} more, all in quarantine/"] if more else []
    return "\n".join(lines)


def _run_in_process(graph: Graph, batches: Iterable[np.ndarray], registry: TypeRegistry,
                    speed: float | None) -> RunReport:
    from specula.actors.inprocess import InProcessRuntime

    return InProcessRuntime(graph).run(batches, registry=registry, speed=speed)


def _run_on_ray(graph: Graph, address: str, raw: Iterable[np.ndarray] | Sources,
                registry: TypeRegistry, config: ReplayConfig, resume: Suspension | None,
                stopped: Callable[[], bool] | None, live: PendingOutput | None,
                on_fed: Callable[[int], None]) -> tuple[RunReport, Suspension | None]:
    """The run on Ray (fed by the driver, or by a source actor per part of the arrival
    table with ``config.sources``); a watch's segment (``stopped``: whether it suspends
    at its end) checkpoints into the run folder, hands its output on as it becomes
    final (``live``) and resumes from ``resume``. Also returns where it suspended, if
    it did."""
    runtime = _ray_runtime(graph, address, config, lasting=stopped is not None)
    # the driver feeds the batches as read; source actors read theirs batch_size at a time
    rows = config.batch_size if isinstance(raw, Sources) else None
    report = runtime.run(raw, registry=registry, batch_rows=rows, speed=config.speed,
                         resume=resume, suspend=stopped or False,
                         on_settled=live, on_fed=on_fed)
    return report, runtime.suspension


def _ray_runtime(graph: Graph, address: str, config: ReplayConfig, lasting: bool
                 ) -> RayRuntime:
    """The Ray runtime of a replay (its hosts prestarted by one, run by another) or of a
    watch's segment (``lasting``: it checkpoints into the run folder)."""
    from specula.actors.ray_runtime import RayRuntime

    return RayRuntime(graph, address=address, chaining=config.chaining,
                      checkpoint_uri=str(state_dir(config.out)) if lasting else None)


def _plots(report: RunReport, graph: Graph, folder: Path, config: ReplayConfig
           ) -> dict[str, str]:
    from specula.pipelines.plots import plot_alpha, plot_latency

    paths = {}
    names = config.latency_plots
    if names is None:  # the top of the graph: detectors whose outputs nobody consumes
        consumed = {t for n in graph.nodes.values() for t in n.inputs}
        names = tuple(n.name for n in graph.nodes.values() if not set(n.outputs) & consumed)
    for name in names:
        if name in report.detectors:
            alpha = common_option(graph, "alpha")
            label = f"alpha {'per node' if alpha is None else alpha}"
            paths[f"plot_{name}"] = str(plot_latency({label: report}, name,
                                                     folder / f"{name}_latency.png"))
    # alpha where speculation had the most to revise: the adaptive node with the most
    # relocations (its first instance)
    adaptive = [d for d in report.detectors.values() if d.alpha]
    if adaptive:
        d = max(adaptive, key=lambda d: d.stats.relocations)
        instance = next(iter(d.alpha))
        paths[f"plot_alpha_{d.name}"] = str(plot_alpha(report, instance,
                                                       folder / f"{d.name}_alpha.png"))
    return paths
