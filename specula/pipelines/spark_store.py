"""Persisting a run through Spark: one folder per run, Parquet tables and a summary.

Layout of ``out`` after :func:`persist` (``quarantine`` and ``arrival`` are written by
:func:`specula.pipelines.spark_ingest.ingest`)::

    complex/event_type=<type>/   net complex events: retractions applied, updates resolved
    emissions/event_type=<type>/ every emission in the order received, with its flags
                                 (1 retraction, 2 update) -- the raw log of the run
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

from specula.actors.report import RunReport
from specula.events import TypeRegistry

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def persist(spark: SparkSession, report: RunReport, registry: TypeRegistry,
            out: str | os.PathLike[str], summary: dict[str, Any]) -> dict[str, str]:
    """Write the run's event tables, metrics and summary under ``out``; return the paths."""
    out = Path(out)
    tables = {
        "complex": {n: d.net.net() for n, d in report.detectors.items()},
        "emissions": {n: d.net.emissions() for n, d in report.detectors.items()},
        "late": {n: d.late for n, d in report.detectors.items()},
    }
    paths = {}
    for name, per_detector in tables.items():
        paths[name] = str(out / name)
        frame = _events_frame(spark, per_detector, registry)
        frame.write.mode("overwrite").partitionBy("event_type").parquet(paths[name])
    paths["metrics"] = str(out / "metrics")
    _metrics_frame(spark, report).write.mode("overwrite").parquet(paths["metrics"])
    paths["summary"] = str(out / "summary.json")
    Path(paths["summary"]).write_text(json.dumps(summary, indent=2, default=float) + "\n")
    return paths


def read_events(spark: SparkSession, path: str | os.PathLike[str], event_type: str,
                registry: TypeRegistry) -> np.ndarray:
    """Read one event type of a persisted event table back as a batch of that type."""
    dtype = registry.dtype([event_type])
    rows = spark.read.parquet(str(path)).where(f"event_type = '{event_type}'")
    table = rows.select(*dtype.names).toArrow() if rows.take(1) else None
    batch = np.zeros(0 if table is None else table.num_rows, dtype)
    strings = registry[event_type].strings
    for name in dtype.names if table is not None else ():
        column = table.column(name)
        batch[name] = (registry.strings.codes(column.to_pylist()) if name in strings
                       else column.to_numpy())
    return batch


def _events_frame(spark: SparkSession, per_detector: dict[str, np.ndarray],
                  registry: TypeRegistry) -> DataFrame:
    import pandas as pd

    # type id -> name, looked up once per table instead of once per event
    type_names = np.array(["", *(t.name for t in registry.types())], dtype=object)
    frames = []
    for detector, batch in per_detector.items():
        frame = pd.DataFrame({name: batch[name] for name in batch.dtype.names})
        frame.insert(0, "detector", detector)
        frame.insert(1, "event_type", type_names[batch["type"]])
        frames.append(frame)
    merged = pd.concat(frames, ignore_index=True)
    fields = [c for c in merged.columns if c not in ("detector", "event_type")]
    merged[fields] = merged[fields].fillna(0)
    strings = {f for t in registry.types() for f in t.strings}
    schema = ["detector string", "event_type string"]
    for column in fields:  # concat turns int columns that some frames lack into float
        dtype = np.result_type(*{f[column].dtype for f in frames if column in f})
        merged[column] = merged[column].astype(dtype)
        if column in strings:
            merged[column] = [registry.strings.text(c) for c in merged[column]]
            schema.append(f"{column} string")
            continue
        schema.append(f"{column} {_SPARK_TYPES[dtype.str[1:]]}")
    return spark.createDataFrame(merged, ", ".join(schema))


_SPARK_TYPES = {"i8": "long", "i4": "int", "i2": "short", "i1": "byte", "u1": "short",
                "u2": "int", "u4": "long", "f8": "double", "f4": "float", "b1": "boolean"}


def _metrics_frame(spark: SparkSession, report: RunReport) -> DataFrame:
    """One row per (instance, series, step): the long form of ``report.time_series()``."""
    rows = [(label, key, i, float(value))
            for label, series in report.time_series().items()
            for key, values in series.items()
            for i, value in enumerate(values)]
    return spark.createDataFrame(rows, "instance string, series string, step long, value double")
