"""Ingestion on Spark: a sensor log in, validated events in arrival order out.

:func:`ingest` reads a log (text files: ``.csv``, ``.csv.gz``, a directory of them; or
a table the log's :class:`~specula.pipelines.logs.LogKind` reads, e.g. Parquet), after
looking at each of its files (:mod:`~specula.pipelines.log_files`: a damaged file is
read up to the damage and quarantined as one record, the others are read whole),
numbers its lines per file, checks every row with the kind's checks and for exact
duplicates, splits the rows into a clean table and a quarantine table
(:mod:`~specula.pipelines.spark_quarantine`) that holds each rejected line with its file, line
number, field and reason, turns the clean rows into events, applies the
:class:`~specula.pipelines.delays.DelayModel` per partition (its delays depend only on
the reading) and writes the events as Parquet, hashed by key over Spark's partitions and
sorted by arrival time within each. Spark does all
of it in bounded memory: nothing is collected on the driver but counts and the list
of sensor keys.

:mod:`~specula.pipelines.arrival` then reads that Parquet back, in arrival order, as
NumPy batches for the detector actors, or a source actor per part.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from specula.pipelines.delays import DelayModel
from specula.pipelines.log_files import Damage, log_files
from specula.pipelines.logs import LogError, LogKind
from specula.pipelines.spark_quarantine import (
    damage_rows,
    describe,
    mark_duplicates,
    quarantined_rows,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class Ingested:
    """What :func:`ingest` wrote and counted.

    ``rows`` counts the rows read and the damaged files, ``quarantined`` the rejected
    rows (``duplicates`` of them exact duplicates) and the damaged files;
    ``first_quarantined`` describes the first few records (:func:`describe`).
    """

    events_path: str
    quarantine_path: str
    rows: int
    events: int
    quarantined: int
    sensors: tuple[int, ...]
    first_ts: int
    last_ts: int
    duplicates: int = 0
    first_quarantined: tuple[str, ...] = ()


#: Quarantine records that :attr:`Ingested.first_quarantined` describes.
FIRST_QUARANTINED = 5


def ingest(spark: SparkSession, kind: LogKind, log: str | os.PathLike[str],
           out: str | os.PathLike[str], *, delays: DelayModel | None = None,
           parts: int | None = None) -> Ingested:
    """Validate ``log``, write the arrival-ordered events and the quarantine under ``out``.

    Writes ``out/arrival`` (Parquet, the kind's event columns, hashed by key over its
    part files and sorted by ``ats`` then ``seq`` within each: :mod:`.arrival`) and
    ``out/quarantine`` (Parquet, :data:`~specula.pipelines.logs.QUARANTINE_COLUMNS`:
    rejected rows, exact duplicates and damaged files, see
    :mod:`~specula.pipelines.spark_quarantine`). ``delays=None`` keeps the recorded
    order (``ats = ts``). ``parts``: how many part files ``arrival`` has (default: one
    per shuffle partition). Raises :class:`LogError` for a missing log, a table the
    kind cannot read, or a log in which no row is valid.
    """
    rows, damaged = _read(spark, kind, str(log))
    checked = mark_duplicates(kind.check(spark, rows))
    checked.persist()
    try:
        quarantine = quarantined_rows(checked)
        if damaged:
            quarantine = quarantine.unionByName(damage_rows(spark, damaged))
        quarantine = quarantine.orderBy("file", "line")
        quarantine_path = str(Path(out) / "quarantine")
        quarantine.write.mode("overwrite").parquet(quarantine_path)
        counts = checked.selectExpr("count(*) AS rows", "count(reason) AS bad",
                                    "count_if(duplicate) AS duplicates",
                                    "min(IF(reason IS NULL, ts, NULL)) AS first",
                                    "max(IF(reason IS NULL, ts, NULL)) AS last").first()
        assert counts is not None  # an aggregate without grouping has one row
        first = tuple(describe(r) for r in quarantine.limit(FIRST_QUARANTINED).collect())
        clean = checked.where("reason IS NULL")
        events = kind.events(clean)
        sensors = tuple(r[0] for r in events.select("key").distinct().orderBy("key").collect())
        if not sensors:
            where = f"; first rejected: {first[0]}" if first else ""
            raise LogError(f"{log}: no valid rows; is this a {kind.name}?{where}")
        events = _arrive(events, delays, np.asarray(sensors, np.int64))
        events_path = str(Path(out) / "arrival")
        # a part per partition, each the whole stream of its keys in arrival order
        hashed = events.repartition(parts, "key") if parts else events.repartition("key")
        hashed.sortWithinPartitions("ats", "seq").write.mode(
            "overwrite").parquet(events_path)
    finally:
        checked.unpersist()
    return Ingested(events_path, quarantine_path, rows=counts.rows + len(damaged),
                    events=counts.rows - counts.bad, quarantined=counts.bad + len(damaged),
                    sensors=sensors, first_ts=counts.first, last_ts=counts.last,
                    duplicates=counts.duplicates, first_quarantined=first)


# ----------------------------------------------------------------------------- reading


def _read(spark: SparkSession, kind: LogKind, log: str) -> tuple[DataFrame, tuple[Damage, ...]]:
    """Rows ``file, line, row, text, parts`` of a text log or a Parquet log, and the
    damaged files (:func:`~specula.pipelines.log_files.log_files`): of a damaged text
    file the lines before the damage are read, of a damaged table file nothing."""
    files = log_files(log)
    partial = [d.path for d in files.damaged if d.lines and not files.table]
    if not files.readable and not partial:
        first = files.damaged[0]
        raise LogError(f"{log}: no readable file; {first.path}: {first.reason}")
    if files.table:
        return kind.read_table(spark, log, list(files.readable)), files.damaged
    readers = []
    if files.readable:
        readers.append(spark.read.text(list(files.readable)))
    if partial:  # Spark stops at the damage and keeps the lines before it
        readers.append(spark.read.option("ignoreCorruptFiles", "true").text(partial))
    lines = readers[0] if len(readers) == 1 else readers[0].unionByName(readers[1])
    return text_rows(lines), files.damaged


def text_rows(lines: DataFrame) -> DataFrame:
    """Lines of a text source (column ``value``) as rows ``file, line, row, text, parts``.

    ``line`` counts every line of a file, ``row`` only the non-blank ones, over all files;
    blank lines (empty or ASCII whitespace) are dropped: they are not rows, rejected lines
    are (as in the NumPy readers).
    """
    from pyspark.sql import functions as F

    lines = lines.select(F.input_file_name().alias("file"), F.col("value").alias("text"))
    # blank as in the NumPy readers (bytes.strip): F.trim strips only spaces, so a line
    # of tabs would become a quarantined row here and be skipped there
    lines = number_rows(lines, per_file="line").where(
        ~F.col("text").rlike(r"^[ \t\n\r\x0B\f]*$"))
    return number_rows(lines, overall="row").withColumn("parts", F.split("text", ",", -1))


def number_rows(df: DataFrame, *, per_file: str | None = None, overall: str | None = None
                ) -> DataFrame:
    """Add 1-based row numbers in file order: ``per_file`` (counted from each file's
    first row) and ``overall`` (over all files, file by file), either or both.

    Spark's file splits keep the order of a file across partition ids, and the rows of
    one split are consecutive in its partition, beside other files' splits. A row's
    number is its index in its partition, less the index of its split's first row,
    plus the rows of the earlier splits (of the file, or of all files): counted per
    split, with no shuffle of the rows, and both numberings from the same counts.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    df = df.withColumn("_pid", F.spark_partition_id()).withColumn(
        "_mid", F.monotonically_increasing_id())
    # monotonically_increasing_id = partition id << 33 | index within the partition
    df = df.withColumn("_idx", F.col("_mid") - F.shiftleft(F.col("_pid").cast("long"), 33))
    splits = df.groupBy("file", "_pid").agg(F.count("*").alias("_n"),
                                            F.min("_idx").alias("_first"))
    names = {name: group for name, group in ((per_file, ["file"]), (overall, []))
             if name is not None}
    for name, group in names.items():
        before = Window.partitionBy(*group).orderBy("file", "_pid").rowsBetween(
            Window.unboundedPreceding, -1)
        splits = splits.withColumn(f"_off_{name}", F.coalesce(F.sum("_n").over(before),
                                                              F.lit(0)) - F.col("_first"))
    offsets = [f"_off_{name}" for name in names]
    df = df.join(F.broadcast(splits.select("file", "_pid", *offsets)), ["file", "_pid"])
    for name in names:
        df = df.withColumn(name, F.col(f"_off_{name}") + F.col("_idx") + 1)
    return df.drop("_pid", "_mid", "_idx", *offsets)


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
