"""A live run stopped and started again on one run folder: where the suspended graph's
state lives, and how a watch's output reaches the run folder while it runs.

A watch stopped by Ctrl-C or SIGTERM suspends its graph instead of flushing it
(:meth:`~specula.actors.ray_runtime.RayRuntime.run` with ``suspend``): the actors'
checkpoints stay in ``out/state/`` and ``out/state/suspended.json`` says where the run
stopped (a :class:`~specula.actors.recovery.Suspension`). The next watch on ``out``
resumes from there, so a detection that spans the stop is found as if the watch had
never stopped. A watch that ends by its idle timeout flushes (the stream is over) and
removes the state.

The actors' files in ``out/state/`` are signed (:mod:`specula.actors.signing`): a resume
checks every one against the key derived from the user's key file and the suspended
run, before Spark or Ray start, and refuses a folder altered by anyone without the key.

While a watch runs on Ray, its output is appended to ``out/complex``, ``out/emissions``
and ``out/late`` as it becomes final (:class:`LiveOutput`, fed from the actors'
checkpoints: :class:`~specula.actors.settled.SettledTail`), and the actors forget what
was written. Each run hands on the net events from its resume's settled counters up to
its own at the end (all of them if it flushes) and the emissions and late events of
its own segments, so the runs' rows together are the output of one uninterrupted run,
each row once; at its end a run writes only its metrics and summary.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from specula.actors.recovery import Checkpoints, Suspension, verify_run
from specula.actors.settled import Settled
from specula.actors.signing import run_key
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
    """Where the last watch on ``out`` suspended, or None (it flushed, or none ran);
    a record that does not read as one is refused (``GraphError`` naming it)."""
    record = state_dir(out) / _RECORD
    if not record.exists():
        return None
    try:
        return Suspension.from_json(json.loads(record.read_text()))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise GraphError(f"{record}: not a suspension record ({type(exc).__name__}: {exc}); "
                         f"remove {state_dir(out)} to start afresh") from None


def suspended_watch(out: Path, graph: Graph, in_process: bool = False) -> Suspension | None:
    """The suspended watch a watch on ``out`` resumes, or None; refused (``GraphError``
    naming the folder and why) when ``graph`` is not the suspended one or the watch
    runs in-process, which cannot resume, and (``UntrustedCheckpointError`` naming the file)
    when an actor's file in it is not signed with the run's key."""
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
    verify_run(Checkpoints(str(state_dir(out)), suspension.run, key=run_key(suspension.run)),
               graph)
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


#: The tables a watch appends to while it runs (rows with its ``run``).
LIVE_TABLES = ("complex", "emissions", "late")


def drop_run_output(out: Path, run: int, files: list[str]) -> int:
    """Remove what watch ``run``, which died without saving, wrote to ``out``: the
    parts of the live tables that hold its rows, the parts of the quarantine that hold
    only records of ``files`` (as Spark names them: the files it took, which are taken
    again),
    and its actors' checkpoints (it started afresh: no suspended graph is there).
    Each append wrote parts of its own, so a part is one run's, or one micro-batch's.
    Returns the parts removed."""
    import pyarrow.parquet as pq

    from specula.pipelines.spark_stream import local_path

    def real(name: str) -> str:
        return os.path.realpath(local_path(name))

    taken = {real(f) for f in files}
    removed = 0
    for table in (*LIVE_TABLES, "quarantine"):  # what an aborted append left unfinished
        shutil.rmtree(Path(out, table, "_temporary"), ignore_errors=True)
    for table in LIVE_TABLES:
        for part in sorted(Path(out, table).rglob("*.parquet")):
            runs = pq.read_table(part, columns=["run"]).column("run").to_pylist()
            if runs and set(runs) == {run}:
                part.unlink()
                removed += 1
    for part in sorted(Path(out, "quarantine").rglob("*.parquet")):
        named = pq.read_table(part, columns=["file"]).column("file").to_pylist()
        if named and {real(f) for f in named} <= taken:
            part.unlink()
            removed += 1
    shutil.rmtree(state_dir(out), ignore_errors=True)
    Path(out, "runs", f"{run}.json").unlink(missing_ok=True)  # a summary, if it got so far
    return removed


class LiveOutput:
    """Appends a watch's output to ``out/complex``, ``out/emissions`` and ``out/late``
    as it becomes final, while the watch runs (the ``on_settled`` of
    :meth:`~specula.actors.ray_runtime.RayRuntime.run`;
    :func:`~specula.pipelines.spark_store.append_events`). :attr:`written` counts the
    net events written."""

    def __init__(self, spark: SparkSession, graph: Graph, out: Path, run: int) -> None:
        self.spark, self.registry, self.out, self.run = spark, graph.registry, out, run
        # every node, events or not: each part then has the columns of all, as
        # persist writes them, and each table one schema
        self.empty = {
            "complex": {n: np.zeros(0, graph.registry.dtype(node.outputs))
                        for n, node in graph.nodes.items()},
            "late": {n: np.zeros(0, graph.registry.dtype(node.inputs))
                     for n, node in graph.nodes.items()}}
        self.empty["emissions"] = self.empty["complex"]
        self.written = 0

    def __call__(self, settled: Settled) -> None:
        from specula.pipelines.spark_store import append_events

        for table in ("complex", "emissions", "late"):
            found = getattr(settled, table)
            if any(len(rows) for rows in found.values()):
                n = append_events(self.spark, table, {**self.empty[table], **found},
                                  self.registry, self.out, self.run)
                self.written += n if table == "complex" else 0
