"""Ingestion on Spark: a DEBS 2013 position log in, validated events in arrival order out.

:func:`ingest` reads a log (``.csv``, ``.csv.gz``, a directory of them, or Parquet with
the 13 position columns), checks every row with the rules of
:func:`specula.pipelines.debs2013.read_positions` (field count, integers, known sensor,
time stamp inside the recording, sanity bounds), splits the rows into a clean table and
a quarantine table that holds each rejected line with its line number, field and reason,
joins the sensor metadata, applies the :class:`~specula.pipelines.delays.DelayModel`
per partition (its delays depend only on the reading) and writes the events sorted by
arrival time as Parquet. Spark does all of it in bounded memory: nothing is collected
on the driver but counts and the list of sensor ids.

:func:`arrival_batches` then streams that Parquet back, in arrival order, as NumPy
batches for the detector actors.
"""

from __future__ import annotations

import functools
import glob
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from specula.pipelines.debs2013 import (
    DIRECTION_BOUND,
    POSITION_COLUMNS,
    RECORDING_PS,
    X_BOUNDS,
    Y_BOUNDS,
    Z_BOUNDS,
    Metadata,
    position_dtype,
)
from specula.pipelines.delays import DelayModel

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

#: Columns of the arrival-ordered event table, in the order written.
EVENT_COLUMNS: tuple[str, ...] = (
    "ts", "type", "key", "seq", "ats", "x", "y", "z", "v", "a", "vx", "vy", "vz", "ax", "ay",
    "az", "player", "team", "limb",
)
QUARANTINE_COLUMNS: tuple[str, ...] = ("file", "line", "text", "field", "reason")


class LogError(ValueError):
    """A log that cannot be ingested at all (missing, unreadable, wrong schema)."""


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


def ingest(spark: SparkSession, log: str | os.PathLike[str], out: str | os.PathLike[str], *,
           metadata: Metadata | None = None, delays: DelayModel | None = None) -> Ingested:
    """Validate ``log``, write the arrival-ordered events and the quarantine under ``out``.

    Writes ``out/arrival`` (Parquet, :data:`EVENT_COLUMNS`, sorted by ``ats`` then
    ``seq`` across and within its part files) and ``out/quarantine`` (Parquet,
    :data:`QUARANTINE_COLUMNS`). ``delays=None`` keeps the recorded order (``ats =
    ts``). Raises :class:`LogError` for a missing log, a Parquet log without the
    position columns, or a log in which no row is valid.
    """
    metadata = metadata or Metadata.default()
    rows = _read(spark, str(log))
    checked = check_rows(rows, roles_frame(spark, metadata))
    checked.persist()
    try:
        quarantine = checked.where("reason IS NOT NULL").select(*QUARANTINE_COLUMNS)
        quarantine_path = str(Path(out) / "quarantine")
        quarantine.orderBy("file", "line").write.mode("overwrite").parquet(quarantine_path)
        counts = checked.selectExpr("count(*) AS rows", "count(reason) AS bad",
                                    "min(IF(reason IS NULL, ts, NULL)) AS first",
                                    "max(IF(reason IS NULL, ts, NULL)) AS last").first()
        clean = checked.where("reason IS NULL")
        sensors = tuple(r[0] for r in clean.select("sid").distinct().orderBy("sid").collect())
        if not sensors:
            first_bad = quarantine.orderBy("file", "line").first()
            where = f"; first rejected line: {first_bad.line}: {first_bad.reason}" \
                if first_bad else ""
            raise LogError(f"{log}: no valid position rows; is this a DEBS 2013 position log"
                           f" (13 comma-separated integers per line)?{where}")
        events = _events(clean, delays, np.asarray(sensors, np.int64))
        events_path = str(Path(out) / "arrival")
        events.orderBy("ats", "seq").write.mode("overwrite").parquet(events_path)
    finally:
        checked.unpersist()
    return Ingested(events_path, quarantine_path, rows=counts.rows,
                    events=counts.rows - counts.bad, quarantined=counts.bad,
                    sensors=sensors, first_ts=counts.first, last_ts=counts.last)


def arrival_batches(path: str | os.PathLike[str], batch_size: int = 10_000
                    ) -> Iterator[np.ndarray]:
    """The events of an ``arrival`` table, in arrival order, as position-event batches."""
    import pyarrow.parquet as pq

    dtype = position_dtype()
    for part in sorted(glob.glob(os.path.join(path, "part-*.parquet"))):
        for record_batch in pq.ParquetFile(part).iter_batches(batch_size=batch_size):
            batch = np.zeros(record_batch.num_rows, dtype)
            for name in EVENT_COLUMNS:
                batch[name] = record_batch.column(name).to_numpy()
            batch["origin"] = batch["ats"]
            yield batch


def count_rows(path: str | os.PathLike[str]) -> int:
    """Rows of a Parquet table from its footers (no data read)."""
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(p).metadata.num_rows
               for p in glob.glob(os.path.join(path, "part-*.parquet")))


# ----------------------------------------------------------------------------- reading


def _read(spark: SparkSession, log: str) -> DataFrame:
    """Rows ``file, line, text, parts`` of a text log, or of a Parquet log as text."""

    if not os.path.exists(log):
        raise LogError(f"{log}: no such file or directory")
    if log.endswith(".parquet") or (os.path.isdir(log) and glob.glob(f"{log}/*.parquet")):
        return _read_parquet(spark, log)
    return text_rows(spark.read.text(log))


def text_rows(lines: DataFrame) -> DataFrame:
    """Lines of a text source (column ``value``) as rows ``file, line, row, text, parts``.

    ``line`` counts every line of a file, ``row`` only the non-empty ones, over all files;
    empty lines are dropped: they are not rows, rejected lines are (as in
    :func:`~specula.pipelines.debs2013.read_positions`).
    """
    from pyspark.sql import functions as F

    lines = lines.select(F.input_file_name().alias("file"), F.col("value").alias("text"))
    lines = number_rows(lines, "line").where(F.trim("text") != "")
    return number_rows(lines, "row", per_file=False).withColumn("parts",
                                                                F.split("text", ",", -1))


def _read_parquet(spark: SparkSession, log: str) -> DataFrame:
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegralType

    df = spark.read.parquet(log)
    types = {f.name: f.dataType for f in df.schema.fields}
    missing = [c for c in POSITION_COLUMNS if c not in types]
    wrong = [f"{c} ({types[c].simpleString()})" for c in POSITION_COLUMNS
             if c in types and not isinstance(types[c], IntegralType)]
    if missing or wrong:
        raise LogError(f"{log}: not a DEBS 2013 position table: "
                       + "; ".join(filter(None, [
                           f"missing columns {', '.join(missing)}" if missing else "",
                           f"columns not integers: {', '.join(wrong)}" if wrong else ""]))
                       + f". Expected integer columns {', '.join(POSITION_COLUMNS)}")
    strings = [F.coalesce(F.col(c).cast("string"), F.lit("")) for c in POSITION_COLUMNS]
    rows = df.select(F.input_file_name().alias("file"), F.array(*strings).alias("parts"))
    rows = rows.withColumn("text", F.array_join("parts", ","))
    return number_rows(number_rows(rows, "line"), "row", per_file=False)


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


# -------------------------------------------------------------------------- validation


def roles_frame(spark: SparkSession, metadata: Metadata) -> DataFrame:
    """Sensor id -> event type id and wearer columns, as :func:`read_positions` sets them
    (zero for balls; the referee is player and team -1)."""
    from specula.detectors.soccer.types import soccer_registry

    registry = soccer_registry()
    rows = [(sid, registry.id(kind), *((0, 0, 0) if kind == "ball" else (player, team, limb)))
            for sid, (kind, player, team, limb) in metadata.sensor_roles().items()]
    return spark.createDataFrame(rows, "sid long, type int, player int, team byte, limb byte")


def check_rows(rows: DataFrame, roles: DataFrame) -> DataFrame:
    """``rows`` with the 13 values (long), the role columns and ``field``/``reason`` of
    the first failing check (both NULL for a valid row)."""
    from pyspark.sql import functions as F

    n = F.size("parts")
    values = {c: F.get("parts", i) for i, c in enumerate(POSITION_COLUMNS)}
    df = rows.select("file", "line", "row", "text", "parts",
                     *[F.when(n == len(POSITION_COLUMNS), v.try_cast("long")).alias(c)
                       for c, v in values.items()])
    df = df.join(F.broadcast(roles), "sid", "left")
    checks: list[tuple[Column, Column | None, Column]] = [
        (n != len(POSITION_COLUMNS), None,
         F.format_string(f"expected {len(POSITION_COLUMNS)} fields, got %d", n))]
    for c, v in values.items():
        checks.append((~v.rlike("^-?[0-9]+$"), F.lit(c),
                       F.format_string("not an integer ('%s')", v)))
        checks.append((F.col(c).isNull(), F.lit(c),
                       F.format_string("out of the int64 range (%s)", v)))
    checks.append((F.col("type").isNull(), F.lit("sid"),
                   F.format_string("unknown sensor id %d", F.col("sid"))))
    checks.append((F.col("ts") <= 0, F.lit("ts"),
                   F.format_string("not positive (%d)", F.col("ts"))))
    low, high = RECORDING_PS
    checks.append(((F.col("ts") < low) | (F.col("ts") > high), F.lit("ts"),
                   F.format_string(f"outside the recording [{low}, {high}] (%d)", F.col("ts"))))
    for c, (lo, hi) in zip("xyz", (X_BOUNDS, Y_BOUNDS, Z_BOUNDS), strict=True):
        checks.append(((F.col(c) < lo) | (F.col(c) > hi), F.lit(c), F.format_string(
            f"outside the sanity bounds [{lo}, {hi}] mm (%d)", F.col(c))))
    for c in ("v", "a"):
        checks.append((F.col(c) < 0, F.lit(c), F.format_string("negative (%d)", F.col(c))))
    for c in POSITION_COLUMNS[7:]:
        checks.append((F.abs(c) > DIRECTION_BOUND, F.lit(c), F.format_string(
            f"direction component outside [{-DIRECTION_BOUND}, {DIRECTION_BOUND}] (%d)",
            F.col(c))))
    field = functools.reduce(lambda acc, chk: acc.when(chk[0], chk[1]),
                             checks[1:], F.when(checks[0][0], checks[0][1]))
    reason = functools.reduce(lambda acc, chk: acc.when(chk[0], chk[2]),
                              checks[1:], F.when(checks[0][0], checks[0][2]))
    return df.withColumn("field", field.cast("string")).withColumn("reason", reason)


# ------------------------------------------------------------------------------ events


def _events(clean: DataFrame, delays: DelayModel | None, sensors: np.ndarray) -> DataFrame:
    """Position events of the clean rows, with ``seq`` (row number) and ``ats``."""
    from pyspark.sql import functions as F

    df = clean.select(
        F.col("ts"), F.col("type"), F.col("sid").alias("key"),
        (F.col("row") - 1).alias("seq"), F.col("ts").alias("ats"),
        *[F.col(c) for c in ("x", "y", "z", "v", "a")],
        *[F.col(c).cast("int") for c in POSITION_COLUMNS[7:]],
        F.col("player"), F.col("team"), F.col("limb"))
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
