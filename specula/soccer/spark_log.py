"""The DEBS 2013 position log as a kind of log for the Spark pipelines.

:class:`PositionLog` tells :mod:`specula.pipelines` how a position row is read (13
comma-separated integers, or a Parquet table with the 13 integer columns), which checks
it must pass (the same checks, in the same order and with the same reasons, as
:func:`~specula.soccer.debs2013.read_positions`), how a valid row becomes a ``ball``,
``player`` or ``referee`` event (the wearer joined from the sensor metadata), and what a
replay runs by default: the soccer hierarchy, over a generated match when no log is
given.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from specula.detectors import Graph
from specula.events import TypeRegistry
from specula.pipelines.logs import GeneratedLog, LogError
from specula.pipelines.spark_ingest import number_rows
from specula.soccer.debs2013 import (
    DIRECTION_BOUND,
    MOTION_BOUNDS,
    POSITION_COLUMNS,
    RECORDING_PS,
    X_BOUNDS,
    Y_BOUNDS,
    Z_BOUNDS,
    Metadata,
    position_dtype,
)
from specula.soccer.types import PLAY_STOP_DTYPE, interruption_events, soccer_registry

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

#: Columns of the arrival-ordered event table, in the order written.
EVENT_COLUMNS: tuple[str, ...] = (
    "ts", "type", "key", "seq", "ats", "x", "y", "z", "v", "a", "vx", "vy", "vz", "ax", "ay",
    "az", "player", "team", "limb",
)


@dataclass(frozen=True)
class PositionLog:
    """A DEBS 2013 position log whose sensors are described by ``metadata``."""

    metadata: Metadata = field(default_factory=Metadata.default)
    name: str = "DEBS 2013 position log (13 comma-separated integers per line)"
    registry: TypeRegistry = field(default_factory=soccer_registry)
    event_columns: tuple[str, ...] = EVENT_COLUMNS
    #: The referee's interruptions of play (``begin_ts``, ``end_ts``; -1: not ended),
    #: sent beside the readings as ``interruption_begin``/``interruption_end`` events;
    #: None: no annotations (all the log is play).
    interruptions: np.ndarray | None = field(default=None, compare=False, repr=False)

    def event_dtype(self) -> np.dtype:
        return position_dtype()

    def annotations(self) -> np.ndarray:
        """The interruptions as raw events, numbered after any log row."""
        if self.interruptions is None:
            return np.zeros(0, position_dtype())
        return interruption_events(self.interruptions, position_dtype(),
                                   first_seq=ANNOTATION_SEQ)

    def with_referee(self, directory: str | Path) -> PositionLog:
        """This log with the DEBS 2013 game's interruptions from the referee's
        ``game-interruption`` files, and the time outside the two halves (before the
        kick-off, half time, after the final whistle) as interruptions too: play is only
        within the halves.

        The referee's clock was not synchronised with the sensors': each half's file
        opens with an interruption from 0, the wait for the kick-off, which ends when
        the kick-off is whistled (3.092 s into the first half's file, 0.455 s into the
        second's). Its end is put at the half's kick-off on the sensor clock
        (:func:`~specula.soccer.debs2013.kickoff_aligned`), so that the kick-off kick is
        play; the rest of the half keeps its offsets from there."""
        from specula.soccer.debs2013 import kickoff_aligned, read_referee_events

        stops = kickoff_aligned(read_referee_events(directory, self.metadata)).interruptions
        return replace(self, interruptions=game_interruptions(stops))

    def read_table(self, spark: SparkSession, log: str, files: Sequence[str]) -> DataFrame:
        """The Parquet ``files`` of ``log``, with the 13 integer position columns, as rows."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import IntegralType

        df = spark.read.parquet(*files)
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
        return number_rows(rows, per_file="line", overall="row")

    def check(self, spark: SparkSession, rows: DataFrame) -> DataFrame:
        """``rows`` with the 13 values (long), the wearer columns and ``field``/``reason``
        of the first failing check (both NULL for a valid row)."""
        return check_rows(rows, roles_frame(spark, self.metadata, self.registry))

    def events(self, clean: DataFrame) -> DataFrame:
        from pyspark.sql import functions as F

        return clean.select(
            F.col("ts"), F.col("type"), F.col("sid").alias("key"),
            (F.col("row") - 1).alias("seq"), F.col("ts").alias("ats"),
            *[F.col(c) for c in ("x", "y", "z", "v", "a")],
            *[F.col(c).cast("int") for c in POSITION_COLUMNS[7:]],
            F.col("player"), F.col("team"), F.col("limb"))

    def default_graph(self, alpha: float | str, retraction: str, k0_ms: float) -> Graph:
        """The soccer hierarchy (:func:`~specula.soccer.graph.soccer_graph`) with the
        DEBS 2013 queries and these options for every unit."""
        from specula.soccer.graph import soccer_graph

        return soccer_graph(alpha, retraction, k0_ms=k0_ms,  # type: ignore[arg-type]
                            queries=True, metadata=self.metadata)

    def generate(self, seconds: float, profile: str, seed: int, folder: Path) -> GeneratedLog:
        """A generated match written as a Parquet position log; its truth is the match."""
        from specula.soccer.match import generate_match

        match = generate_match(seconds, profile=profile, seed=seed)
        path = folder / "match.parquet"
        write_position_parquet(match.events, path)
        return GeneratedLog(str(path), replace(self, metadata=match.metadata,
                                               interruptions=match.truth.interruptions),
                            match)


def write_position_parquet(events: np.ndarray, path: Path) -> None:
    """Write position events as a Parquet log with the 13 DEBS columns, in ``ts`` order."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = {"sid": events["key"], **{c: events[c] for c in POSITION_COLUMNS[1:]}}
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({c: pa.array(v.astype(np.int64)) for c, v in columns.items()}),
                   path)


def roles_frame(spark: SparkSession, metadata: Metadata,
                registry: TypeRegistry | None = None) -> DataFrame:
    """Sensor id -> event type id in ``registry`` (default: :func:`soccer_registry`) and
    wearer columns, as :func:`read_positions` sets them (zero for balls; the referee is
    player and team -1)."""
    registry = soccer_registry() if registry is None else registry
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
    checks: list[tuple[Column, str | None, Column]] = [
        (n != len(POSITION_COLUMNS), None,
         F.format_string(f"expected {len(POSITION_COLUMNS)} fields, got %d", n))]
    for c, v in values.items():
        # The regex runs only where the value does not print back as itself (a sign,
        # spaces, leading zeros, not a number): most rows never pay for it.
        printed = F.coalesce(F.col(c).cast("string") == v, F.lit(False))
        checks.append((~printed & ~v.rlike("^-?[0-9]+$"), c,
                       F.format_string("not an integer ('%s')", v)))
        checks.append((F.col(c).isNull(), c,
                       F.format_string("out of the int64 range (%s)", v)))
    checks.append((F.col("type").isNull(), "sid",
                   F.format_string("unknown sensor id %d", F.col("sid"))))
    checks.append((F.col("ts") <= 0, "ts",
                   F.format_string("not positive (%d)", F.col("ts"))))
    low, high = RECORDING_PS
    checks.append(((F.col("ts") < low) | (F.col("ts") > high), "ts",
                   F.format_string(f"outside the recording [{low}, {high}] (%d)", F.col("ts"))))
    for c, (lo, hi) in zip("xyz", (X_BOUNDS, Y_BOUNDS, Z_BOUNDS), strict=True):
        checks.append(((F.col(c) < lo) | (F.col(c) > hi), c, F.format_string(
            f"outside the sanity bounds [{lo}, {hi}] mm (%d)", F.col(c))))
    for c in ("v", "a"):
        checks.append((F.col(c) < 0, c, F.format_string("negative (%d)", F.col(c))))
    for c, (bound, what) in MOTION_BOUNDS.items():
        checks.append((F.col(c) > bound, c, F.format_string(
            f"above {bound} {what}, not physically possible (%d)", F.col(c))))
    for c in POSITION_COLUMNS[7:]:
        checks.append((F.abs(c) > DIRECTION_BOUND, c, F.format_string(
            f"direction component outside [{-DIRECTION_BOUND}, {DIRECTION_BOUND}] (%d)",
            F.col(c))))
    return first_failing(df, checks)


def first_failing(df: DataFrame, checks: Sequence[tuple[Column, str | None, Column]]
                  ) -> DataFrame:
    """``df`` with ``field`` and ``reason`` of the first of ``checks`` (condition, field,
    reason) whose condition holds; both NULL where none does.

    One ``CASE`` over the conditions yields both as a struct, so only the failing
    check's reason is formatted (a CASE per column took ~1.6x as long).
    """
    from pyspark.sql import functions as F

    def failure(field: str | None, reason: Column) -> Column:
        return F.struct(F.lit(field).cast("string").alias("field"), reason.alias("reason"))

    first = functools.reduce(lambda acc, chk: acc.when(chk[0], failure(chk[1], chk[2])),
                             checks[1:], F.when(checks[0][0], failure(*checks[0][1:])))
    return (df.withColumn("_failure", first)
            .withColumn("field", F.col("_failure.field"))
            .withColumn("reason", F.col("_failure.reason")).drop("_failure"))


#: ``seq`` of the first annotation event: after any row a log can hold.
ANNOTATION_SEQ = 1 << 40


def game_interruptions(annotated: np.ndarray) -> np.ndarray:
    """``begin_ts``/``end_ts`` records: the referee's annotated interruptions of the DEBS
    2013 game (:data:`~specula.soccer.debs2013.INTERRUPTION_DTYPE`, on the sensor clock)
    and the time outside its halves, overlapping ones joined, in time order."""
    from specula.soccer.debs2013._common import HALF_END_PS, HALF_START_PS

    never = 1 << 62
    outside = [(0, HALF_START_PS[1]), (HALF_END_PS[1], HALF_START_PS[2]),
               (HALF_END_PS[2], never)]
    rows = [(b, never if e < 0 else e) for b, e in zip(
        annotated["begin_ts"].tolist(), annotated["end_ts"].tolist(), strict=True)]
    merged: list[list[int]] = []  # overlapping ones as one: begins and ends alternate
    for b, e in sorted(rows + outside):
        if merged and b <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([b, e])
    return np.array([(b, -1 if e == never else e) for b, e in merged], PLAY_STOP_DTYPE)
