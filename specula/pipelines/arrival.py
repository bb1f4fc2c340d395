"""The arrival table: a log's validated events as Parquet, in arrival order per part.

:func:`~specula.pipelines.spark_ingest.ingest` writes ``arrival/`` hashed by key over
Spark's partitions, each part sorted by arrival (``ats``, then ``seq``): every part
covers the whole stream for its keys, so each can be read by a source actor of its own
(:func:`arrival_sources`) and the sources stepped through arrival time together
(:mod:`specula.actors.sources`). :func:`arrival_batches` reads the parts merged, in
arrival order, for a reader in one process. Parts are read a batch at a time: memory
stays at a batch per part, whatever the log's size.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from specula.actors.sources import Sources, merge_by_arrival


@dataclass(frozen=True)
class ArrivalPart:
    """One Parquet file of an arrival table, read as batches of ``dtype``."""

    path: str
    dtype: np.dtype

    def batches(self, batch_size: int) -> Iterator[np.ndarray]:
        import pyarrow.parquet as pq

        for record_batch in pq.ParquetFile(self.path).iter_batches(batch_size=batch_size):
            batch = _rows(record_batch, self.dtype)
            batch["origin"] = batch["ats"]
            yield batch


def _rows(record_batch, dtype: np.dtype) -> np.ndarray:
    """A Parquet record batch as a structured array of ``dtype`` (its columns by name)."""
    rows = np.zeros(record_batch.num_rows, dtype)
    for name in record_batch.schema.names:
        rows[name] = record_batch.column(name).to_numpy()
    return rows


def arrival_parts(path: str | os.PathLike[str], dtype: np.dtype) -> list[ArrivalPart]:
    """The parts of the arrival table at ``path`` (empty ones left out)."""
    import pyarrow.parquet as pq

    files = sorted(glob.glob(os.path.join(path, "part-*.parquet")))
    return [ArrivalPart(f, np.dtype(dtype)) for f in files
            if pq.ParquetFile(f).metadata.num_rows]


def arrival_batches(path: str | os.PathLike[str], dtype: np.dtype, batch_size: int = 10_000
                    ) -> Iterator[np.ndarray]:
    """The events of an arrival table, in arrival order (then ``seq``), as batches of
    ``dtype``: its parts merged."""
    return merge_by_arrival([p.batches(batch_size) for p in arrival_parts(path, dtype)])


def arrival_sources(path: str | os.PathLike[str], dtype: np.dtype,
                    extra: list | None = None) -> Sources:
    """The arrival table at ``path`` as :class:`~specula.actors.sources.Sources`, one
    source per part, and one per ``extra`` part (annotations)."""
    return Sources([*arrival_parts(path, dtype), *(extra or [])])


def arrival_columns(path: str | os.PathLike[str], columns: list[str],
                    batch_size: int = 1_000_000) -> Iterator[np.ndarray]:
    """Only ``columns`` of the arrival table at ``path``, as int64 batches part by part
    (not merged into arrival order): for a reader that orders what it takes itself, a
    batch at a time whatever the log's size."""
    import pyarrow.parquet as pq

    dtype = np.dtype([(c, "i8") for c in columns])
    for f in sorted(glob.glob(os.path.join(path, "part-*.parquet"))):
        for record_batch in pq.ParquetFile(f).iter_batches(batch_size=batch_size,
                                                           columns=columns):
            yield _rows(record_batch, dtype)


def count_rows(path: str | os.PathLike[str]) -> int:
    """Rows of a Parquet table from its footers (no data read)."""
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(p).metadata.num_rows
               for p in glob.glob(os.path.join(path, "part-*.parquet")))

