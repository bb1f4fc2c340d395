"""Ingestion on Spark: a sensor log in, validated events in arrival order out.

:func:`ingest` reads a log (text files: ``.csv``, ``.csv.gz``, a directory of them; or
a table the log's :class:`~specula.pipelines.logs.LogKind` reads, e.g. Parquet), numbers
its lines per file, checks every row with the kind's checks, splits the rows into a
clean table and a quarantine table that holds each rejected line with its line number,
field and reason, turns the clean rows into events, applies the
:class:`~specula.pipelines.delays.DelayModel` per partition (its delays depend only on
the reading) and writes the events sorted by arrival time as Parquet. Spark does all
of it in bounded memory: nothing is collected on the driver but counts and the list
of sensor keys.

:func:`arrival_batches` then streams that Parquet back, in arrival order, as NumPy
batches for the detector actors.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from specula.pipelines.delays import DelayModel
from specula.pipelines.logs import QUARANTINE_COLUMNS, LogError, LogKind

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class Ingested:
    """What :func:`ingest` wrote and counted."""

    events_path: str
    quarantine_path: str
    rows: int
    events: int
    quarantined: int
    sensors: tuple[int, ...]
    first_ts: int
    last_ts: int


def ingest(spark: SparkSession, kind: LogKind, log: str | os.PathLike[str],
           out: str | os.PathLike[str], *, delays: DelayModel | None = None) -> Ingested:
    """Validate ``log``, write the arrival-ordered events and the quarantine under ``out``.

    Writes ``out/arrival`` (Parquet, the kind's event columns, sorted by ``ats`` then
    ``seq`` across and within its part files) and ``out/quarantine`` (Parquet,
    :data:`~specula.pipelines.logs.QUARANTINE_COLUMNS`). ``delays=None`` keeps the
    recorded order (``ats = ts``). Raises :class:`LogError` for a missing log, a table
    the kind cannot read, or a log in which no row is valid.
    """
    rows = _read(spark, kind, str(log))
    checked = kind.check(spark, rows)
    checked.persist()
    try:
        quarantine = checked.where("reason IS NOT NULL").select(*QUARANTINE_COLUMNS)
        quarantine_path = str(Path(out) / "quarantine")
        quarantine.orderBy("file", "line").write.mode("overwrite").parquet(quarantine_path)
        counts = checked.selectExpr("count(*) AS rows", "count(reason) AS bad",
                                    "min(IF(reason IS NULL, ts, NULL)) AS first",
                                    "max(IF(reason IS NULL, ts, NULL)) AS last").first()
        clean = checked.where("reason IS NULL")
        events = kind.events(clean)
        sensors = tuple(r[0] for r in events.select("key").distinct().orderBy("key").collect())
        if not sensors:
            first_bad = quarantine.orderBy("file", "line").first()
            where = f"; first rejected line: {first_bad.line}: {first_bad.reason}" \
                if first_bad else ""
            raise LogError(f"{log}: no valid rows; is this a {kind.name}?{where}")
        events = _arrive(events, delays, np.asarray(sensors, np.int64))
        events_path = str(Path(out) / "arrival")
        events.orderBy("ats", "seq").write.mode("overwrite").parquet(events_path)
    finally:
        checked.unpersist()
    return Ingested(events_path, quarantine_path, rows=counts.rows,
                    events=counts.rows - counts.bad, quarantined=counts.bad,
                    sensors=sensors, first_ts=counts.first, last_ts=counts.last)


def arrival_batches(path: str | os.PathLike[str], dtype: np.dtype, batch_size: int = 10_000
                    ) -> Iterator[np.ndarray]:
    """The events of an ``arrival`` table, in arrival order, as batches of ``dtype``."""
    import pyarrow.parquet as pq

    for part in sorted(glob.glob(os.path.join(path, "part-*.parquet"))):
        for record_batch in pq.ParquetFile(part).iter_batches(batch_size=batch_size):
            batch = np.zeros(record_batch.num_rows, dtype)
            for name in record_batch.schema.names:
                batch[name] = record_batch.column(name).to_numpy()
            batch["origin"] = batch["ats"]
            yield batch


def count_rows(path: str | os.PathLike[str]) -> int:
    """Rows of a Parquet table from its footers (no data read)."""
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(p).metadata.num_rows
               for p in glob.glob(os.path.join(path, "part-*.parquet")))


# ----------------------------------------------------------------------------- reading


def _read(spark: SparkSession, kind: LogKind, log: str) -> DataFrame:
    """Rows ``file, line, row, text, parts`` of a text log, or of a Parquet log."""

    if not os.path.exists(log):
        raise LogError(f"{log}: no such file or directory")
    if log.endswith(".parquet") or (os.path.isdir(log) and glob.glob(f"{log}/*.parquet")):
        return kind.read_table(spark, log)
    return text_rows(spark.read.text(log))


def text_rows(lines: DataFrame) -> DataFrame:
    """Lines of a text source (column ``value``) as rows ``file, line, row, text, parts``.

    ``line`` counts every line of a file, ``row`` only the non-empty ones, over all files;
    empty lines are dropped: they are not rows, rejected lines are (as in the NumPy
    readers).
    """
    from pyspark.sql import functions as F

    lines = lines.select(F.input_file_name().alias("file"), F.col("value").alias("text"))
    lines = number_rows(lines, "line").where(F.trim("text") != "")
    return number_rows(lines, "row", per_file=False).withColumn("parts",
                                                                F.split("text", ",", -1))


def number_rows(df: DataFrame, name: str, *, per_file: bool = True) -> DataFrame:
    """Add ``name``: 1-based row number per file (or over all files), in file order.

    Spark's file splits keep the order of a file across partition ids; the number is
    the row's index in its partition plus the rows (of the file) in earlier partitions,
    computed from per-partition counts (no shuffle of the rows).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    df = df.withColumn("_pid", F.spark_partition_id()).withColumn(
        "_mid", F.monotonically_increasing_id())
    # monotonically_increasing_id = partition id << 33 | index within the partition
    df = df.withColumn("_idx", F.col("_mid") - F.shiftleft(F.col("_pid").cast("long"), 33))
    counts = df.groupBy("file", "_pid").agg(F.count("*").alias("_n"))
    group = ["file"] if per_file else []
    before = Window.partitionBy(*group).orderBy("_pid", "file").rowsBetween(
        Window.unboundedPreceding, -1)
    counts = counts.withColumn("_off", F.coalesce(F.sum("_n").over(before), F.lit(0)))
    df = df.join(F.broadcast(counts.select("file", "_pid", "_off")), ["file", "_pid"])
    return df.withColumn(name, F.col("_off") + F.col("_idx") + 1).drop("_pid", "_mid", "_idx",
                                                                       "_off")


# ------------------------------------------------------------------------------ events


def _arrive(df: DataFrame, delays: DelayModel | None, sensors: np.ndarray) -> DataFrame:
    """``df`` with ``ats`` = ``ts`` + the delay model's delay of each event."""
    if delays is None:
        return df

    def arrive(batches: Iterator) -> Iterator:
        import pyarrow as pa

        for batch in batches:
            events = {"ts": batch.column("ts").to_numpy(), "key": batch.column("key").to_numpy()}
            ats = events["ts"] + delays.delays(events, sensors)
            index = batch.schema.get_field_index("ats")
            yield batch.set_column(index, "ats", pa.array(ats, pa.int64()))

    return df.mapInArrow(arrive, df.schema)
