"""Live operation: sensor logs read as they land in a directory (Structured Streaming).

:class:`LogWatcher` runs a Spark Structured Streaming query with the file source over a
directory. Each micro-batch (one new file at a time by default) is validated exactly as
:func:`~specula.pipelines.spark_ingest.ingest` validates a whole log (exact duplicates
within the micro-batch included): rejected rows are appended to the quarantine table,
valid rows become position events, sorted by time stamp within the file, numbered
across files, and handed to the caller through a bounded queue. A full queue blocks
the query, so a slow detector graph slows the reading of new files (backpressure)
instead of filling memory.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from specula.pipelines.logs import LogKind
from specula.pipelines.spark_ingest import Ingested, text_rows
from specula.pipelines.spark_quarantine import mark_duplicates, quarantined_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass
class WatchCounts:
    """Running totals of a watch, in the shape :func:`replay.summarize` reads."""

    rows: int = 0
    events: int = 0
    quarantined: int = 0
    files: int = 0
    first_ts: int = 0
    last_ts: int = 0
    sensors: set[int] = field(default_factory=set)


class LogWatcher:
    """Stream the logs of one kind that appear in ``directory`` as event batches.

    Parameters
    ----------
    spark
        The session that runs the streaming query.
    kind
        What the files hold and how their rows are checked.
    directory
        Watched folder; files already there are read first. Files must be complete when
        they appear (write elsewhere, then move them in), as for any Spark file source.
    out
        Run folder: the quarantine is appended to ``out/quarantine`` and the query's
        checkpoint kept in ``out/checkpoint``.
    idle_timeout
        Stop after this many seconds without a new file; ``None`` watches until
        interrupted (Ctrl-C).
    batch_size
        Events per batch handed on: a file is cut into batches of this size, as the
        ordering units of fan-ins need (their K must cover the batches in flight).
    """

    def __init__(self, spark: SparkSession, kind: LogKind, directory: str | Path,
                 out: str | Path, *, idle_timeout: float | None = 30.0,
                 files_per_batch: int = 1, queue_size: int = 4,
                 batch_size: int = 1_000) -> None:
        self.spark = spark
        self.kind = kind
        self.directory = str(directory)
        self.out = Path(out)
        self.idle_timeout = idle_timeout
        self.files_per_batch = files_per_batch
        self.batch_size = batch_size
        self.counts = WatchCounts()
        self._queue: queue.Queue[np.ndarray] = queue.Queue(maxsize=queue_size)

    def batches(self) -> Iterator[np.ndarray]:
        """Event batches in the order the files arrived, until idle or interrupted."""
        query = (self.spark.readStream.format("text")
                 .option("maxFilesPerTrigger", self.files_per_batch)
                 .load(self.directory)
                 .writeStream.foreachBatch(self._micro_batch)
                 .option("checkpointLocation", str(self.out / "checkpoint"))
                 .trigger(processingTime="1 second")
                 .start())
        last = time.monotonic()
        try:
            while True:
                try:
                    batch = self._queue.get(timeout=0.5)
                except queue.Empty:
                    if query.exception() is not None:
                        raise RuntimeError(f"watching {self.directory} failed: "
                                           f"{query.exception()}") from None
                    if query.status.get("isTriggerActive"):  # a file is being read
                        last = time.monotonic()
                    elif self.idle_timeout is not None and \
                            time.monotonic() - last > self.idle_timeout:
                        return
                    continue
                last = time.monotonic()
                for start in range(0, len(batch), self.batch_size):
                    yield batch[start:start + self.batch_size]
        finally:
            query.stop()

    def _micro_batch(self, lines: DataFrame, batch_id: int) -> None:
        """Validate one micro-batch; quarantine the bad rows, queue the events."""

        checked = mark_duplicates(self.kind.check(self.spark, text_rows(lines))).persist()
        try:
            bad = quarantined_rows(checked)
            bad.write.mode("append").parquet(str(self.out / "quarantine"))
            clean = checked.where("reason IS NULL")
            table = self.kind.events(clean).orderBy("ts", "seq").toArrow()
            n_rows = checked.count()
        finally:
            checked.unpersist()
        events = np.zeros(table.num_rows, self.kind.event_dtype())
        for name in table.column_names:
            events[name] = table.column(name).to_numpy()
        events["seq"] += self.counts.rows  # numbered across files
        events["origin"] = events["ats"]
        self._count(events, n_rows)
        if len(events):
            self._queue.put(events)

    def _count(self, events: np.ndarray, n_rows: int) -> None:
        c = self.counts
        c.files += 1
        c.rows += n_rows
        c.events += len(events)
        c.quarantined += n_rows - len(events)
        if len(events):
            c.first_ts = int(events["ts"][0]) if not c.first_ts else min(c.first_ts,
                                                                         int(events["ts"][0]))
            c.last_ts = max(c.last_ts, int(events["ts"][-1]))
            c.sensors.update(np.unique(events["key"]).tolist())


def counts_as_ingested(counts: WatchCounts) -> Ingested:
    """The counts of a watch in the shape of :class:`~spark_ingest.Ingested`."""
    return Ingested("", "", rows=counts.rows, events=counts.events,
                    quarantined=counts.quarantined, sensors=tuple(sorted(counts.sensors)),
                    first_ts=counts.first_ts, last_ts=counts.last_ts)
