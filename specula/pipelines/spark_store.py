"""Persisting a run through Spark: one folder per run, Parquet tables and a summary.

Layout of ``out`` after :func:`persist` (``quarantine`` and ``arrival`` are written by
:func:`specula.pipelines.spark_ingest.ingest`)::

    complex/event_type=<type>/   net complex events: retractions applied, updates resolved
    emissions/event_type=<type>/ every emission in the order received, with its flags
                                 (1 retraction, 2 update) -- the raw log of the run;
                                 retractions (they name no type) under ``retraction``
    late/event_type=<type>/      events that arrived behind a unit's purge horizon
    metrics/                     alpha, busy factor and per-batch counters over time
    summary.json                 the run summary (also printed by ``specula replay``)

Every event table has the core fields, a ``detector`` column (which node produced or,
for ``late``, received it), ``event_type`` and the payload fields of all its types
(zero where a type has no such field). String fields are written as their texts (read
through the registry's string table, ``""`` where a type has no such field) and read
back as codes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from specula import events as ev
from specula.actors.report import RunReport
from specula.events import TypeRegistry

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def persist(spark: SparkSession, report: RunReport, registry: TypeRegistry,
            out: str | os.PathLike[str], summary: dict[str, Any], *,
            run: int | None = None, event_tables: bool = True) -> dict[str, str]:
    """Write the run's event tables, metrics and summary under ``out``; return the paths.

    With ``run`` (a watch, which may be stopped and started again on one ``out``), the
    tables and metrics are appended with a ``run`` column, so earlier runs' rows stay,
    and the summary is also kept as ``runs/<run>.json``; without, they replace what
    ``out`` held. Without ``event_tables`` the event tables are not written: a watch on
    Ray committed them with its checkpoints (:mod:`~specula.pipelines.watch_checkpoint`).
    """
    out = Path(out)
    mode = "overwrite" if run is None else "append"
    paths = {name: str(out / name) for name in ("complex", "emissions", "late")}
    tables = {
        "complex": {n: d.net.net() for n, d in report.detectors.items()},
        "emissions": {n: d.net.emissions() for n, d in report.detectors.items()},
        "late": {n: d.late for n, d in report.detectors.items()},
    } if event_tables else {}
    for name, per_detector in tables.items():
        frame = _numbered(_events_frame(spark, per_detector, registry), run)
        frame.write.mode(mode).partitionBy("event_type").parquet(paths[name])
    paths["metrics"] = str(out / "metrics")
    _numbered(_metrics_frame(spark, report), run).write.mode(mode).parquet(paths["metrics"])
    text = json.dumps(summary if run is None else {"run": run, **summary}, indent=2,
                      default=float) + "\n"
    paths["summary"] = str(out / "summary.json")
    Path(paths["summary"]).write_text(text)
    if run is not None:
        (out / "runs").mkdir(exist_ok=True)
        (out / "runs" / f"{run}.json").write_text(text)
    return paths


def _numbered(frame: DataFrame, run: int | None) -> DataFrame:
    """``frame`` with a ``run`` column (a watch's number), or as it is."""
    if run is None:
        return frame
    from pyspark.sql import functions as F

    return frame.withColumn("run", F.lit(run).cast("int"))


def read_events(spark: SparkSession, path: str | os.PathLike[str], event_type: str,
                registry: TypeRegistry) -> np.ndarray:
    """Read one event type of a persisted event table back as a batch of that type."""
    dtype = registry.dtype([event_type])
    names = ev.fields_of(dtype)
    rows = spark.read.parquet(str(path)).where(f"event_type = '{event_type}'")
    if not rows.take(1):
        return np.zeros(0, dtype)
    table = rows.select(*names).toArrow()
    batch = np.zeros(table.num_rows, dtype)
    strings = registry[event_type].strings
    for name in names:
        column = table.column(name)
        batch[name] = (registry.strings.codes(column.to_pylist()) if name in strings
                       else column.to_numpy())
    return batch


def _events_frame(spark: SparkSession, per_detector: dict[str, np.ndarray],
                  registry: TypeRegistry) -> DataFrame:
    return spark.createDataFrame(*events_table(per_detector, registry))


def events_table(per_detector: dict[str, np.ndarray], registry: TypeRegistry
                 ) -> tuple[Any, str]:
    """The detectors' events as one pandas table (``detector``, ``event_type``, then every
    field of any of them; zero where a detector's events lack it) and its Spark schema.

    Columns are put together as NumPy arrays of their own dtype: a pandas concat of
    frames that lack a column would pass it through float64, which cannot hold
    picosecond time stamps exactly (above 2**53 it rounds to even numbers)."""
    import pandas as pd

    # type id -> name, looked up once per table instead of once per event
    type_names = np.array(["", *(t.name for t in registry.types())], dtype=object)
    batches = list(per_detector.items())
    fields: dict[str, np.dtype] = {}
    for _, batch in batches:
        for name in ev.fields_of(batch.dtype):
            fields[name] = (np.result_type(fields[name], batch.dtype[name]) if name in fields
                            else batch.dtype[name])
    columns: dict[str, Any] = {
        "detector": np.concatenate([np.full(len(b), d, dtype=object) for d, b in batches]
                                   or [np.empty(0, object)]),
        "event_type": np.concatenate([_event_types(b, type_names) for _, b in batches]
                                     or [np.empty(0, object)]),
    }
    strings = {f for t in registry.types() for f in t.strings}
    schema = ["detector string", "event_type string"]
    for name, dtype in fields.items():
        values = np.concatenate([b[name].astype(dtype) if name in ev.fields_of(b.dtype)
                                 else np.zeros(len(b), dtype) for _, b in batches])
        if name in strings:
            columns[name] = [registry.strings.text(c) for c in values.tolist()]
            schema.append(f"{name} string")
        else:
            columns[name] = values
            schema.append(f"{name} {_SPARK_TYPES[dtype.str[1:]]}")
    return pd.DataFrame(columns), ", ".join(schema)


def events_arrow(per_detector: dict[str, np.ndarray], registry: TypeRegistry) -> Any:
    """The detectors' events as an Arrow table of the types Spark writes for them
    (:func:`events_table`): a watch's checkpoints write them without Spark."""
    import pyarrow as pa

    frame, schema = events_table(per_detector, registry)
    fields = []
    for column in schema.split(", "):
        name, kind = column.split(" ")
        fields.append(pa.field(name, getattr(pa, _ARROW_TYPES[kind])()))
    return pa.Table.from_pandas(frame, schema=pa.schema(fields), preserve_index=False)


def _event_types(batch: np.ndarray, type_names: np.ndarray) -> np.ndarray:
    """Each row's type name. A retraction names no type (it withdraws a range of its
    producer's counters): it is named ``retraction``, so that no partition of a table is
    left without a name (Spark would write it as a null partition, which readers of
    the whole table, pyarrow among them, cannot merge with the named ones)."""
    names = type_names[batch["type"]]
    untyped = batch["type"] == 0
    if untyped.any():
        names = names.copy()
        kind = np.where(batch["flags"][untyped] & ev.PROGRESS, "progress", "retraction")
        names[untyped] = kind
    return names


_SPARK_TYPES = {"i8": "long", "i4": "int", "i2": "short", "i1": "byte", "u1": "short",
                "u2": "int", "u4": "long", "f8": "double", "f4": "float", "b1": "boolean"}


#: Spark's type names (:func:`events_table`) as pyarrow's type factories.
_ARROW_TYPES = {"string": "string", "long": "int64", "int": "int32", "short": "int16",
                "byte": "int8", "double": "float64", "float": "float32", "boolean": "bool_"}


def _metrics_frame(spark: SparkSession, report: RunReport) -> DataFrame:
    """One row per (instance, series, step): the long form of ``report.time_series()``."""
    rows = [(label, key, i, float(value))
            for label, series in report.time_series().items()
            for key, values in series.items()
            for i, value in enumerate(values)]
    return spark.createDataFrame(rows, "instance string, series string, step long, value double")
