"""A live run stopped and started again on one run folder: where the suspended graph's
state lives, and which of a run's outputs are its own to persist.

A watch stopped by Ctrl-C or SIGTERM suspends its graph instead of flushing it
(:meth:`~specula.actors.ray_runtime.RayRuntime.run` with ``suspend``): the actors'
checkpoints stay in ``out/state/`` and ``out/state/suspended.json`` says where the run
stopped (a :class:`~specula.actors.recovery.Suspension`). The next watch on ``out``
resumes from there, so a detection that spans the stop is found as if the watch had
never stopped. A watch that ends by its idle timeout flushes (the stream is over) and
removes the state.

While a watch runs, its detections are appended to ``out/complex`` as they become
final (:class:`LiveOutput`, fed from the actors' checkpoints:
:class:`~specula.actors.settled.SettledTail`). At its end each run persists only what
is its own and not yet written (:class:`OwnOutput`): of the net output, the events from
where the live writing (or the previous run's persisting) stopped up to this run's
settled counters if it suspends, or all of them if it flushes; the emissions and late
events of its own time. The runs' rows together are the net output of one
uninterrupted run, each detection once.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from specula.actors.recovery import Suspension
from specula.detectors.graph import Graph, GraphError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: The folder of a run folder that holds a suspended graph's checkpoints.
STATE = "state"
_RECORD = "suspended.json"


def state_dir(out: Path) -> Path:
    """Where the actors of a watch on ``out`` checkpoint (absolute: actors resolve it)."""
    return (Path(out) / STATE).resolve()


def read_suspension(out: Path) -> Suspension | None:
    """Where the last watch on ``out`` suspended, or None (it flushed, or none ran)."""
    record = state_dir(out) / _RECORD
    return Suspension.from_json(json.loads(record.read_text())) if record.exists() else None


def suspended_watch(out: Path, graph: Graph, in_process: bool = False) -> Suspension | None:
    """The suspended watch a watch on ``out`` resumes, or None; refused (``GraphError``
    naming the folder and why) when ``graph`` is not the suspended one or the watch
    runs in-process, which cannot resume."""
    suspension = read_suspension(out)
    if suspension is None:
        return None
    if in_process:
        raise GraphError(f"{state_dir(out)} holds a watch stopped mid-stream, which only "
                         "the Ray runtime resumes: run without --in-process to go on from "
                         "it, or remove that folder to start afresh")
    try:
        suspension.check(graph)
    except ValueError as exc:
        raise GraphError(f"{state_dir(out)}: {exc} (remove that folder)") from None
    return suspension


def save_suspension(out: Path, suspension: Suspension | None) -> None:
    """Record ``suspension`` for the next watch, or (None: the run flushed) remove the
    state, which no run needs any more. Call it once the run's output is persisted."""
    state = state_dir(out)
    if suspension is None:
        shutil.rmtree(state, ignore_errors=True)
        return
    tmp = state / f".{_RECORD}"
    tmp.write_text(json.dumps(suspension.to_json()) + "\n")
    tmp.replace(state / _RECORD)


@dataclass
class OwnOutput:
    """Which rows of a run's report the run persists (see the module).

    ``since``: per producer, the counter the earlier runs persisted up to (their last
    suspension's settled counters); ``upto``: per producer, this run's settled counters
    if it suspends, None if it flushed; ``start_ns``: when the run started (wall clock),
    before which every emission and late event belongs to an earlier run.
    """

    since: dict[int, int] = field(default_factory=dict)
    upto: dict[int, int] | None = None
    start_ns: int = field(default_factory=time.time_ns)

    def complex(self, net: np.ndarray) -> np.ndarray:
        """The net events that are this run's to persist."""
        if not self.since and self.upto is None:
            return net
        producers, seqs = net["producer"].astype(np.int64), net["seq"].astype(np.int64)
        lo = _per_producer(producers, self.since, 0)
        hi = _per_producer(producers, self.upto or {}, np.iinfo(np.int64).max)
        return net[(seqs >= lo) & (seqs < hi)]

    def late(self, rows: np.ndarray) -> np.ndarray:
        """The late events that reached their unit in this run."""
        return rows[rows["ats"] >= self.start_ns] if self.since else rows


class LiveOutput:
    """Appends a watch's detections to ``out/complex`` as they become final, while the
    watch runs (the ``on_settled`` of :meth:`~specula.actors.ray_runtime.RayRuntime.run`;
    :func:`~specula.pipelines.spark_store.append_complex`)."""

    def __init__(self, spark: SparkSession, graph: Graph, out: Path, run: int) -> None:
        self.spark, self.registry, self.out, self.run = spark, graph.registry, out, run
        # every node, events or not: each part then has the columns of all, as
        # persist writes them, and the table one schema
        self.empty = {name: np.zeros(0, graph.registry.dtype(node.outputs))
                      for name, node in graph.nodes.items()}
        self.written = 0

    def __call__(self, found: dict[str, np.ndarray]) -> None:
        from specula.pipelines.spark_store import append_complex

        if any(len(rows) for rows in found.values()):
            self.written += append_complex(self.spark, {**self.empty, **found},
                                           self.registry, self.out, self.run)


def _per_producer(producers: np.ndarray, bound: dict[int, int], default: int) -> np.ndarray:
    out = np.full(len(producers), default, np.int64)
    for p, b in bound.items():
        out[producers == p] = b
    return out
