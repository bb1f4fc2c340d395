"""What the Spark pipelines need to know about one kind of sensor log.

The pipelines do the generic work: reading text files, numbering rows per file,
splitting valid rows from quarantined ones, applying a delay model, ordering by
arrival, streaming new files, persisting results. A :class:`LogKind` says what is
particular to one format: how a non-text table is read, which checks a row must pass,
how a valid row becomes an event, and, for the replay job, the default detector graph
and a generator of logs with a known truth. The soccer domain's DEBS 2013 position log
(:class:`specula.soccer.spark_log.PositionLog`) is one; the pipelines never import it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from specula.detectors import Graph
from specula.events import TypeRegistry

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: Columns of every quarantine table: the file, the 1-based line, its text, the field
#: that failed (NULL when the line as a whole is malformed) and the reason.
QUARANTINE_COLUMNS: tuple[str, ...] = ("file", "line", "text", "field", "reason")


class LogError(ValueError):
    """A log that cannot be ingested at all (missing, unreadable, wrong schema)."""


@dataclass(frozen=True)
class GeneratedLog:
    """A log written by :meth:`LogKind.generate`, the kind that reads it, and its truth."""

    path: str
    kind: LogKind
    truth: Any


class LogKind(Protocol):
    """One kind of sensor log.

    Rows reach :meth:`check` as ``file, line, row, text, parts``: the file, the line
    number in it, the row number over all files (both from 1), the line's text and its
    comma-separated fields.
    """

    # read-only members (properties), so that a frozen dataclass implements them

    @property
    def name(self) -> str:
        """What the log is, for messages ("DEBS 2013 position log")."""
        ...

    @property
    def registry(self) -> TypeRegistry:
        """The registry its events are made with: their ``type`` column holds its ids. A
        replay hands it to the runtime, which translates the ids by name into the
        graph's registry or refuses a graph whose source types it lacks."""
        ...

    @property
    def event_columns(self) -> tuple[str, ...]:
        """Columns of the arrival table, in the order written; the core fields among them."""
        ...

    def event_dtype(self) -> np.dtype:
        """The dtype of the event batches read back from the arrival table."""
        ...

    def read_table(self, spark: SparkSession, log: str, files: Sequence[str]) -> DataFrame:
        """The ``files`` of the table log ``log`` (Parquet) as rows; raises
        :class:`LogError` for a wrong schema."""
        ...

    def check(self, spark: SparkSession, rows: DataFrame) -> DataFrame:
        """``rows`` with typed value columns, ``field`` and ``reason`` of the first failing
        check (both NULL for a valid row)."""
        ...

    def events(self, clean: DataFrame) -> DataFrame:
        """The valid rows as events: :attr:`event_columns`, ``seq`` = row - 1, ``ats`` =
        ``ts`` (the delay model, if any, sets it later)."""
        ...

    def annotations(self) -> np.ndarray:
        """Raw events that come beside the log's rows (a referee's annotations), of
        :meth:`event_dtype`, in ``ts`` order with ``ats`` = ``ts``: a replay merges them
        into the arrival order where the log reaches them, stamped so that no unit
        measures them as delayed (:class:`~specula.pipelines.replay.Annotations`).
        Empty when there are none."""
        ...

    def default_graph(self, alpha: float | str, retraction: str, k0_ms: float) -> Graph:
        """The detector graph a replay runs when the user names none."""
        ...

    def generate(self, seconds: float, profile: str, seed: int, folder: Path) -> GeneratedLog:
        """Write a generated log of ``seconds`` under ``folder``, with its ground truth."""
        ...
