"""A watch's whole-run checkpoints: which micro-batches it handed on, its graph's state
and what its output tables hold, taken together at the checkpoint interval, and the
output committed with them in two phases, as Flink's checkpoint barriers and
two-phase-commit sinks do.

A watch on Ray runs its graph in *segments*: at the checkpoint interval, at the end
of a micro-batch, the driver stops feeding and suspends the graph (the actors'
checkpoints then form a cut with nothing in flight: :mod:`specula.actors.recovery`,
"Suspending"), commits checkpoint ``k`` (:func:`commit`) and resumes the graph from
the cut. A checkpoint holds:

* ``checkpoints/<k>/state``: a copy of the suspended graph's state (``out/state``,
  the actors' signed files and ``suspended.json``); none when the graph flushed;
* ``checkpoints/<k>.json``, the record (:class:`WatchCheckpoint`): the last micro-batch
  handed on, the watch's counts and the driver's annotation merge at the cut, the
  output committed so far by every watch on the folder (:class:`Committed`: what a
  watch's summary counts, whole-run, not only what its own graph saw), and the
  manifest: every file the output tables (``complex``, ``emissions``, ``late``) hold
  once ``k`` is committed.

Two phases. The output that became final in a segment is first written to staging
names (``_staging/<k>/<table>/event_type=<type>/part-<k>.parquet``), then the record
is written whole (a rename): that is the commit point. Finishing the commit
(:func:`finish`, idempotent) renames the staged files to their place, removes the
table files the manifest does not hold (those a compaction merged into a new file),
the staging folder and the older checkpoints. A crash leaves either a committed
checkpoint, whose commit the next watch finishes, or staging that no checkpoint
covers, which it drops (:func:`recover`): the tables hold each committed row once.

Compaction. A segment's rows of one type go to one file, merged with that type's
newest file while that is below :data:`COMPACT_BYTES`: a table holds about one file
per type, not one per segment.

Restart. :func:`recover` puts the run folder back to the last committed checkpoint:
the commit finished, staging dropped, ``out/state`` restored from the checkpoint's
copy, the quarantine records of the micro-batches after it removed (they are taken
again). The next watch resumes the graph from there, takes again the micro-batches
the dead watch took after the checkpoint (``checkpoint/specula-taken``; Spark runs
again those it had not committed) and goes on: with what was committed before, its
output is the uninterrupted watch's, each row once, and the files of the committed
checkpoints are not read again.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from specula import events as ev
from specula.actors.settled import Settled
from specula.detectors.graph import Graph, GraphError
from specula.events import TypeRegistry
from specula.pipelines.resume import STATE

#: The tables a watch's checkpoints commit (rows with the watch's ``run``).
LIVE_TABLES = ("complex", "emissions", "late")
#: A type's newest file below this size takes the next segment's rows of that type.
COMPACT_BYTES = 64 * 2**20

_CHECKPOINTS, _STAGING = "checkpoints", "_staging"


@dataclass(frozen=True)
class Committed:
    """The output committed by the watches on a run folder up to a checkpoint: net
    detections per type (``detected``, by type name) and per node (``net_events``),
    and late events (``late``)."""

    detected: dict[str, int] = field(default_factory=dict)
    net_events: dict[str, int] = field(default_factory=dict)
    late: int = 0

    def add(self, rows: dict[str, dict[str, np.ndarray]], registry: TypeRegistry
            ) -> Committed:
        """These counts with the output ``rows`` (per table, per node) added."""
        detected, per_node = dict(self.detected), dict(self.net_events)
        for node, data in rows.get("complex", {}).items():
            per_node[node] = per_node.get(node, 0) + len(data)
            types, counts = np.unique(data["type"], return_counts=True)
            for t, n in zip(types.tolist(), counts.tolist(), strict=True):
                detected[registry.name(t)] = detected.get(registry.name(t), 0) + n
        late = self.late + sum(len(data) for data in rows.get("late", {}).values())
        return Committed(detected, per_node, late)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Committed:
        return cls({str(k): int(v) for k, v in data["detected"].items()},
                   {str(k): int(v) for k, v in data["net_events"].items()}, int(data["late"]))


@dataclass(frozen=True)
class WatchCheckpoint:
    """The record of checkpoint ``id`` of the watches on a run folder (see the module):
    the watch (``run``) that took it, the last micro-batch it handed on (``handed``),
    its counts and the driver's annotation merge (``counts``, ``annotations``: the
    states :class:`~.spark_stream.WatchCounts` and :class:`~.replay.Annotations` save),
    whether the graph was left suspended (``suspended``; else it flushed), the output
    committed so far (``committed``), and the table files: all of them (``files``,
    paths relative to the run folder) and those this checkpoint staged (``staged``)."""

    id: int
    run: int
    handed: int
    counts: dict[str, Any]
    annotations: dict[str, Any]
    suspended: bool
    committed: Committed = field(default_factory=Committed)
    files: list[str] = field(default_factory=list)
    staged: list[str] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WatchCheckpoint:
        return cls(int(data["id"]), int(data["run"]), int(data["handed"]),
                   dict(data["counts"]), dict(data["annotations"]), bool(data["suspended"]),
                   Committed.from_json(data["committed"]),
                   [str(f) for f in data["files"]], [str(f) for f in data["staged"]])


def last_checkpoint(out: Path) -> WatchCheckpoint | None:
    """The last committed checkpoint of the watches on ``out`` (None: none); a record
    that does not read as one is refused (:class:`GraphError` naming it)."""
    records = sorted(Path(out, _CHECKPOINTS).glob("*.json"))
    if not records:
        return None
    try:
        return WatchCheckpoint.from_json(json.loads(records[-1].read_text()))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise GraphError(f"{records[-1]}: not a watch checkpoint ({type(exc).__name__}: "
                         f"{exc}); watch again with a new --out") from None


def state_copy(out: Path, checkpoint: int) -> Path:
    """Where checkpoint ``checkpoint`` keeps its copy of the graph's state."""
    return Path(out, _CHECKPOINTS, f"{checkpoint:06d}", STATE)


class PendingOutput:
    """What a watch's graph made final since the last checkpoint, kept for the next:
    the ``on_settled`` of :meth:`~specula.actors.ray_runtime.RayRuntime.run` (called
    from a thread of its own). :attr:`committed` counts the net events committed."""

    def __init__(self, graph: Graph) -> None:
        # every node, rows or not: each file then has the columns of all, and a table
        # one schema, which a compaction's merge needs
        self._empty = {
            "complex": {n: np.zeros(0, graph.registry.dtype(node.outputs))
                        for n, node in graph.nodes.items()},
            "late": {n: np.zeros(0, graph.registry.dtype(node.inputs))
                     for n, node in graph.nodes.items()}}
        self._empty["emissions"] = self._empty["complex"]
        self._parts: dict[str, dict[str, list[np.ndarray]]] = {t: {} for t in LIVE_TABLES}
        self._lock = threading.Lock()
        self.committed = 0

    def __call__(self, settled: Settled) -> None:
        with self._lock:
            for table in LIVE_TABLES:
                for node, rows in getattr(settled, table).items():
                    if len(rows):
                        self._parts[table].setdefault(node, []).append(rows)

    def take(self) -> dict[str, dict[str, np.ndarray]]:
        """Per table, per node, the rows kept since the last call (tables with none:
        no entry)."""
        with self._lock:
            parts, self._parts = self._parts, {t: {} for t in LIVE_TABLES}
        return {table: {**self._empty[table],
                        **{n: ev.concat_records(p) for n, p in per_node.items()}}
                for table, per_node in parts.items() if per_node}


def commit(out: Path, run: int, handed: int, counts: dict[str, Any],
           annotations: dict[str, Any], rows: dict[str, dict[str, np.ndarray]],
           registry: TypeRegistry) -> WatchCheckpoint:
    """Take the next checkpoint of watch ``run`` on ``out`` and commit its output
    ``rows`` (per table, per node): stage the files, copy ``out/state`` (present: the
    graph is suspended), write the record, finish (see the module)."""
    out = Path(out)
    before = last_checkpoint(out)
    k = 0 if before is None else before.id + 1
    # the first checkpoint keeps what the tables hold (only a commit writes there)
    files = set(before.files) if before is not None else set(_table_files(out))
    staging = out / _STAGING / f"{k:06d}"
    staged = []
    for table, per_node in rows.items():
        for name, data in _by_type(per_node, registry, run):
            rel = f"{table}/event_type={name}/part-{k:06d}.parquet"
            merge = _compactable(out, files, f"{table}/event_type={name}/")
            if merge is not None:
                data = _concat(_read(out / merge), data)
                files.discard(merge)
            _write(staging / rel, data)
            staged.append(rel)
            files.add(rel)
    copy = state_copy(out, k)
    shutil.rmtree(copy.parent, ignore_errors=True)
    state = out / STATE
    if state.exists():
        shutil.copytree(state, copy)
    committed = (before.committed if before is not None else Committed()).add(rows, registry)
    record = WatchCheckpoint(k, run, handed, counts, annotations, state.exists(), committed,
                             sorted(files), staged)
    _write_record(out, record)
    finish(out, record)
    return record


def finish(out: Path, record: WatchCheckpoint) -> None:
    """Finish committing checkpoint ``record`` (again, after a crash: idempotent): its
    staged files to their place, the table files it does not hold removed, and the
    staging and the other checkpoints too."""
    out = Path(out)
    staging = out / _STAGING / f"{record.id:06d}"
    for rel in record.staged:
        if (staging / rel).exists():
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            os.replace(staging / rel, out / rel)
    held = set(record.files)
    for table in LIVE_TABLES:
        shutil.rmtree(out / table / "_temporary", ignore_errors=True)
    for rel in _table_files(out):
        if rel not in held:
            (out / rel).unlink()
    shutil.rmtree(out / _STAGING, ignore_errors=True)
    for other in Path(out, _CHECKPOINTS).iterdir():
        if other.name.split(".")[0] != f"{record.id:06d}":
            (shutil.rmtree(other) if other.is_dir() else other.unlink())


def _table_files(out: Path) -> list[str]:
    """The files of the output tables, relative to ``out``."""
    return [p.relative_to(out).as_posix() for table in LIVE_TABLES
            for p in Path(out, table).rglob("*.parquet")]


def recover(out: Path, taken_after: list[str]) -> WatchCheckpoint | None:
    """Put ``out`` back to its last committed checkpoint (see the module; ``taken_after``:
    the files, as Spark names them, of the micro-batches taken after it, which the
    next watch takes again) and return it (None: no checkpoint, the folder as at the
    start)."""
    out = Path(out)
    record = last_checkpoint(out)
    state = out / STATE
    if record is None:
        shutil.rmtree(out / _STAGING, ignore_errors=True)
        shutil.rmtree(out / _CHECKPOINTS, ignore_errors=True)
        shutil.rmtree(state, ignore_errors=True)
    else:
        finish(out, record)
        shutil.rmtree(state, ignore_errors=True)
        if record.suspended:
            shutil.copytree(state_copy(out, record.id), state)
    _drop_quarantine(out, taken_after)
    return record


def _drop_quarantine(out: Path, files: list[str]) -> None:
    """Remove the parts of the quarantine that hold only records of ``files``: each
    append wrote parts of its own, so a part is one micro-batch's."""
    import pyarrow.parquet as pq

    from specula.pipelines.spark_stream import local_path

    def real(name: str) -> str:
        return os.path.realpath(local_path(name))

    taken = {real(f) for f in files}
    shutil.rmtree(Path(out, "quarantine", "_temporary"), ignore_errors=True)
    for part in sorted(Path(out, "quarantine").rglob("*.parquet")):
        named = pq.read_table(part, columns=["file"]).column("file").to_pylist()
        if named and {real(f) for f in named} <= taken:
            part.unlink()


def _by_type(per_node: dict[str, np.ndarray], registry: TypeRegistry, run: int
             ) -> list[tuple[str, Any]]:
    """The rows of ``per_node`` as Arrow tables in the schema Spark writes them in
    (:func:`~.spark_store.events_table`), with the ``run`` column, one per type."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from specula.pipelines.spark_store import events_arrow

    table = events_arrow(per_node, registry)
    table = table.append_column("run", pa.array(np.full(table.num_rows, run, np.int32)))
    names = table.column("event_type")
    rest = table.drop_columns(["event_type"])
    return [(name, rest.filter(pc.equal(names, name)))
            for name in sorted(set(names.to_pylist()))]


def _compactable(out: Path, files: set[str], prefix: str) -> str | None:
    """The newest file of ``files`` under ``prefix`` if it is small enough to take
    more rows."""
    mine = sorted(f for f in files if f.startswith(prefix))
    if mine and (out / mine[-1]).stat().st_size < COMPACT_BYTES:
        return mine[-1]
    return None


def _read(path: Path) -> Any:
    import pyarrow.parquet as pq

    return pq.ParquetFile(path).read()  # the file alone: no partition column added


def _concat(old: Any, new: Any) -> Any:
    import pyarrow as pa

    return pa.concat_tables([old, new.select(old.column_names).cast(old.schema)])


def _write(path: Path, data: Any) -> None:
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(data, path)


def _write_record(out: Path, record: WatchCheckpoint) -> None:
    """Write ``record`` whole (a rename, after the bytes reached the disk)."""
    folder = Path(out, _CHECKPOINTS)
    folder.mkdir(parents=True, exist_ok=True)
    scratch = folder / f".{record.id:06d}.json"
    with open(scratch, "w") as f:
        f.write(json.dumps(asdict(record)) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(scratch, folder / f"{record.id:06d}.json")
