"""The main job: a sensor log through Spark and Ray on Spark to the detector graph and back.

:func:`replay` runs, in one Spark application:

1. a generated match (when no log is given) written as a Parquet position log;
2. ingestion on Spark (:func:`~specula.pipelines.spark_ingest.ingest`): validation,
   quarantine, metadata, delays, the arrival-ordered stream as Parquet;
   With ``watch``, step 2 is instead a Structured Streaming query over a directory
   (:class:`~specula.pipelines.spark_stream.LogWatcher`) that feeds files as they land;
3. Ray started on the Spark cluster (or a Ray cluster joined at ``ray_address``, or no
   Ray at all with ``in_process``), fed the stream in arrival order, paced and with
   backpressure, through the detector graph;
4. persistence through Spark (:func:`~specula.pipelines.spark_store.persist`), a
   summary and plots, all in one output folder.

Ray and Spark are shut down on success, on errors and on Ctrl-C.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from specula.pipelines.graph import Graph
from specula.pipelines.report import RunReport, format_detectors

PS_PER_S = 10**12


@dataclass
class ReplayConfig:
    """What to replay and how; the defaults are the README's main command."""

    log: str | None = None
    graph: Graph | None = None
    seconds: float = 20.0
    profile: str = "debs2013"
    seed: int = 0
    delays: bool = True
    alpha: float | str = "adaptive"
    retraction: str = "on-demand"
    k0_ms: float = 400.0
    speed: float | None = None
    batch_size: int = 1_000
    out: Path = field(default_factory=lambda: Path("runs") / time.strftime("%Y%m%d-%H%M%S"))
    spark_master: str | None = None
    ray_address: str | None = None
    in_process: bool = False
    plots: bool = True
    progress: bool = False
    watch: bool = False
    idle_timeout: float | None = 30.0


@dataclass
class ReplayResult:
    """The run's report, summary, output paths and, for a generated match, the match."""

    report: RunReport
    summary: dict[str, Any]
    paths: dict[str, str]
    match: Any = None


def replay(config: ReplayConfig) -> ReplayResult:
    """Run the whole job; see the module docstring."""
    from specula.cluster.spark import ray_on_spark, spark_session
    from specula.pipelines.delays import DelayModel
    from specula.pipelines.spark_ingest import arrival_batches, count_rows, ingest
    from specula.pipelines.spark_store import persist

    if config.ray_address and not config.in_process:
        from specula.cluster import check_reachable

        check_reachable(config.ray_address, "Ray cluster")  # before Spark spends a minute
    graph = config.graph or _soccer_graph(config)
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    log, metadata, match = _input(config, out)
    delays = DelayModel(seed=config.seed) if config.delays else None
    with spark_session(config.spark_master) as spark:
        if config.watch:
            from specula.pipelines.spark_stream import LogWatcher, counts_as_ingested

            watcher = LogWatcher(spark, log, out, metadata=metadata,
                                 idle_timeout=config.idle_timeout,
                                 batch_size=config.batch_size)
            batches = watcher.batches()
        else:
            ingested = ingest(spark, log, out, metadata=metadata, delays=delays)
            batches = arrival_batches(ingested.events_path, config.batch_size)
            if config.progress:
                batches = _progress(batches, count_rows(ingested.events_path))
        if config.in_process:
            report = _run_in_process(graph, batches)
        else:
            cluster = (contextlib.nullcontext(config.ray_address) if config.ray_address
                       else ray_on_spark(spark, log=out / "logs" / "ray-on-spark.log"))
            with cluster as address:
                report = _run_on_ray(graph, address, batches, config)
        if config.watch:
            ingested = counts_as_ingested(watcher.counts)
        summary = summarize(report, graph, ingested, config)
        paths = {"quarantine": str(out / "quarantine"),
                 **({"arrival": ingested.events_path} if ingested.events_path else {}),
                 **persist(spark, report, graph.registry, out, summary)}
    if config.plots:
        paths.update(_plots(report, out / "plots", config))
    return ReplayResult(report, summary, paths, match)


def summarize(report: RunReport, graph: Graph, ingested: Any, config: ReplayConfig
              ) -> dict[str, Any]:
    """Events in, quarantined, late, detections per type, latency and real-time factor."""
    span_s = max(0, ingested.last_ts - ingested.first_ts) / PS_PER_S
    detectors = report.summary()["detectors"]
    detected: dict[str, int] = {}
    for name, node in graph.nodes.items():
        net = report.net(name)
        for t in node.outputs:
            detected[t] = detected.get(t, 0) + int(np.count_nonzero(
                net["type"] == graph.registry.id(t)))
    return {
        "log": config.log or f"generated {config.profile} match, {config.seconds:g} s, "
                             f"seed {config.seed}",
        "runtime": report.runtime,
        "rows": ingested.rows,
        "events_in": ingested.events,
        "quarantined": ingested.quarantined,
        "late": sum(d["late"] for d in detectors.values()),
        "detected": detected,
        "stream_seconds": span_s,
        "wall_seconds": report.wall_seconds,
        # a watch waits for files: its wall time says nothing of speed
        "realtime_factor": span_s / report.wall_seconds
        if report.wall_seconds and not config.watch else None,
        "alpha": config.alpha,
        "retraction": config.retraction,
        "detectors": detectors,
    }


def format_summary(summary: dict[str, Any]) -> str:
    """The table ``specula replay`` prints at the end."""
    rtf = summary["realtime_factor"]
    lines = [
        f"{summary['log']} on {summary['runtime']}",
        f"events in {summary['events_in']:,} of {summary['rows']:,} rows, quarantined "
        f"{summary['quarantined']:,}, late {summary['late']:,}; "
        f"{summary['stream_seconds']:.1f} s of stream in {summary['wall_seconds']:.1f} s "
        f"(real-time factor {'-' if rtf is None else f'{rtf:.1f}'})",
        *format_detectors(summary["detectors"]),
    ]
    return "\n".join(lines)


def _soccer_graph(config: ReplayConfig) -> Graph:
    from specula.detectors.soccer.graph import soccer_graph

    return soccer_graph(config.alpha, config.retraction, k0_ms=config.k0_ms)


def _input(config: ReplayConfig, out: Path) -> tuple[str, Any, Any]:
    """The log to ingest, its metadata, and the generated match (None for a user log)."""
    if config.log:
        return config.log, None, None
    from specula.pipelines.match import generate_match

    match = generate_match(config.seconds, profile=config.profile, seed=config.seed)
    path = out / "input" / "match.parquet"
    write_position_parquet(match.events, path)
    return str(path), match.metadata, match


def write_position_parquet(events: np.ndarray, path: Path) -> None:
    """Write position events as a Parquet log with the 13 DEBS columns, in ``ts`` order."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from specula.pipelines.debs2013 import POSITION_COLUMNS

    columns = {"sid": events["key"], **{c: events[c] for c in POSITION_COLUMNS[1:]}}
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({c: pa.array(v.astype(np.int64)) for c, v in columns.items()}),
                   path)


def _run_in_process(graph: Graph, batches: Iterable[np.ndarray]) -> RunReport:
    from specula.pipelines.inprocess import InProcessRuntime

    parts = list(batches)
    raw = np.concatenate(parts) if parts else np.zeros(0, graph.registry.dtype())
    return InProcessRuntime(graph).run(raw, batch_ticks=5 * 10**9)


def _run_on_ray(graph: Graph, address: str, batches: Iterable[np.ndarray],
                config: ReplayConfig) -> RunReport:
    from specula.pipelines.ray_runtime import RayRuntime

    runtime = RayRuntime(graph, address=address, batch_size=config.batch_size,
                         speed=config.speed)
    return runtime.run(batches)


def _progress(batches: Iterable[np.ndarray], total: int) -> Iterator[np.ndarray]:
    """Pass the batches on, drawing a progress bar on stderr twice a second."""
    done, start, shown = 0, time.perf_counter(), 0.0
    for batch in batches:
        yield batch
        done += len(batch)
        now = time.perf_counter()
        if now - shown >= 0.5 or done == total:
            shown = now
            filled = int(30 * done / max(total, 1))
            sys.stderr.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {done:,}/{total:,} "
                             f"events, {now - start:.0f} s")
            sys.stderr.flush()
    sys.stderr.write("\n")


def _plots(report: RunReport, folder: Path, config: ReplayConfig) -> dict[str, str]:
    from specula.pipelines.plots import plot_alpha, plot_latency

    paths = {}
    for name in ("passes", "hits"):
        if name in report.detectors:
            paths[f"plot_{name}"] = str(plot_latency({str(config.alpha): report}, name,
                                                     folder / f"{name}_latency.png"))
    for name, d in report.detectors.items():
        if d.alpha:
            first = next(iter(d.alpha))
            paths[f"plot_alpha_{name}"] = str(plot_alpha(report, first,
                                                         folder / f"{name}_alpha.png"))
            break
    return paths
