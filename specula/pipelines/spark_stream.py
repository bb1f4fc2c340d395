"""Live operation: sensor logs read as they land in a directory (Structured Streaming).

:class:`LogWatcher` runs a Spark Structured Streaming query with the file source over a
directory. Each micro-batch (one new file at a time by default) is validated exactly as
:func:`~specula.pipelines.spark_ingest.ingest` validates a whole log (each file looked
at first, :func:`~specula.pipelines.log_files.file_damage`; exact duplicates within the
micro-batch included): rejected rows are appended to the quarantine table, valid rows
become position events, sorted by time stamp within the file, numbered across files,
and handed to the caller through a bounded queue. The query lists the new files
(Spark's ``binaryFile`` source, of which only the paths are read) and each is read by
what it is: a ``.parquet`` file as a table (the log kind's
:meth:`~specula.pipelines.logs.LogKind.read_table`), any other as text lines. A file
that cannot be read whole becomes one quarantine record naming it, the first line lost
and why (:class:`~specula.pipelines.log_files.Damage`): a truncated or fake ``.gz`` is
read up to the damage, a Parquet file that is not the kind's table not at all (never as
lines of text). A file Spark still fails on, though it looked whole, is found by
reading the micro-batch's files one by one, and is quarantined the same way: a bad
file never ends a watch. A full queue blocks the query, so a slow detector graph slows
the reading of new files (backpressure) instead of filling memory.

Stopping. :meth:`LogWatcher.request_stop` (what :func:`stop_on_signals` calls on Ctrl-C
or SIGTERM) ends the watch gracefully: no new file is taken, the files already taken
are handed on to the end, and the batches end as at an idle timeout, so the caller
flushes the graph and saves everything; an idle timeout ends the watch the same way.

Checkpoints. :meth:`LogWatcher.batches` given ``seconds`` returns at the end of the
first micro-batch handed on once that time has passed, with the query still running:
the caller takes a checkpoint there (:mod:`~specula.pipelines.watch_checkpoint`) and
calls it again; :attr:`LogWatcher.ended` says when the watch is over instead (stopped,
or idle). :attr:`LogWatcher.handed` (the last micro-batch handed on) and
:attr:`LogWatcher.counts` (of the micro-batches handed on) are what a checkpoint
records.

Restarting. A watch restarted on the same run folder goes on from its last checkpoint
(``handed``, ``counts``): it takes again first the micro-batches taken after it that
Spark committed (``retake``: ``checkpoint/specula-taken`` records which files each
micro-batch holds, before it is read), and Spark runs again, with the same files and
the same batch id, those it had planned but not committed; a micro-batch run again
with an id at or below ``handed`` is skipped (Spark's advice for ``foreachBatch``:
deduplicate by batch id). Events are numbered across files from the checkpoint's row
count on, so a micro-batch taken again is numbered as it was the first time.
"""

from __future__ import annotations

import functools
import json
import os
import queue
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from specula.events import distinct
from specula.pipelines.log_files import Damage, file_damage
from specula.pipelines.logs import LogError, LogKind
from specula.pipelines.spark_ingest import Ingested, number_rows, text_rows
from specula.pipelines.spark_quarantine import damage_rows, mark_duplicates, quarantined_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery


#: The schema of Spark's ``binaryFile`` source, which a streaming source must be given.
_BINARY_FILE = "path string, modificationTime timestamp, length long, content binary"


@dataclass
class WatchCounts:
    """Running totals of a watch, in the shape :func:`replay.summarize` reads."""

    rows: int = 0
    events: int = 0
    quarantined: int = 0
    files: int = 0
    first_ts: int = 0
    last_ts: int = 0
    sensors: set[int] = field(default_factory=set)

    def state(self) -> dict[str, Any]:
        """The counts as JSON holds them (what a checkpoint records)."""
        return {**asdict(self), "sensors": sorted(self.sensors)}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> WatchCounts:
        return cls(**{**state, "sensors": set(state["sensors"])})


class LogWatcher:
    """Stream the logs of one kind that appear in ``directory`` as event batches.

    Parameters
    ----------
    spark
        The session that runs the streaming query.
    kind
        What the files hold and how their rows are checked.
    directory
        Watched folder; files already there are read first. Files must be complete when
        they appear (write elsewhere, then move them in), as for any Spark file source.
    out
        Run folder: the quarantine is appended to ``out/quarantine`` and the query's
        checkpoint kept in ``out/checkpoint``.
    idle_timeout
        Stop after this many seconds without a new file; ``None`` watches until
        interrupted (Ctrl-C).
    batch_size
        Events per batch handed on: a file is cut into batches of this size, as the
        ordering units of fan-ins need (their K must cover the batches in flight).
    handed, counts, retake
        Where a restarted watch goes on from (see the module): the last micro-batch
        handed on, the counts then, and the micro-batches to take again first.
    """

    def __init__(self, spark: SparkSession, kind: LogKind, directory: str | Path,
                 out: str | Path, *, idle_timeout: float | None = 30.0,
                 files_per_batch: int = 1, queue_size: int = 4,
                 batch_size: int = 1_000, handed: int = -1,
                 counts: WatchCounts | None = None,
                 retake: Sequence[TakenBatch] = ()) -> None:
        self.spark = spark
        self.kind = kind
        self.directory = str(directory)
        self.out = Path(out)
        self.idle_timeout = idle_timeout
        self.files_per_batch = files_per_batch
        self.batch_size = batch_size
        self.counts = counts if counts is not None else WatchCounts()
        #: the last micro-batch whose events the caller took
        self.handed = handed
        #: whether the watch is over (stopped, or idle): no more batches
        self.ended = False
        self._numbered = self.counts.rows  # rows of the micro-batches taken
        # micro-batches taken, empty ones too, so the handed-on id advances
        self._queue: queue.Queue[_Taken] = queue.Queue(maxsize=queue_size)
        self._stop = threading.Event()
        self._retake = list(retake)
        self._query: StreamingQuery | None = None
        self._last = time.monotonic()

    def request_stop(self) -> None:
        """End the watch: take no new file, hand on the ones taken (thread-safe)."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        """Whether a stop was requested."""
        return self._stop.is_set()

    def batches(self, seconds: float | None = None) -> Iterator[np.ndarray]:
        """Event batches in the order the files arrived: first those of the
        micro-batches to take again, then the new ones; until the watch is stopped or
        idle (:attr:`ended`), or, with ``seconds``, the end of the first micro-batch
        handed on once ``seconds`` have passed (call again to go on)."""
        began, handed = time.monotonic(), False
        if self._query is None:
            for taken in self._retake:
                events, n_rows = self._take(list(taken.paths))
                self._numbered += n_rows
                yield from self._hand_on(_Taken(taken.batch_id, events, n_rows,
                                                len(taken.paths)))
                handed = True
            self._retake = []
            self._query = self._start()
            self._last = time.monotonic()
        query = self._query
        try:
            while not self.ended:
                if self.stopping:
                    yield from self._drain(query)
                    return
                if handed and seconds is not None and time.monotonic() - began >= seconds:
                    return
                try:
                    item = self._queue.get(timeout=0.5)
                except queue.Empty:
                    if query.exception() is not None:
                        raise RuntimeError(f"watching {self.directory} failed: "
                                           f"{query.exception()}") from None
                    if query.status.get("isTriggerActive"):  # a file is being read
                        self._last = time.monotonic()
                    elif self.idle_timeout is not None and \
                            time.monotonic() - self._last > self.idle_timeout:
                        yield from self._drain(query)
                        return
                    continue
                self._last = time.monotonic()
                yield from self._hand_on(item)
                handed = True
        except BaseException:  # the caller gave up: so does the query
            self.close()
            raise

    def close(self) -> None:
        """Stop the streaming query, if it runs."""
        if self._query is not None:
            self._query.stop()

    def _start(self) -> StreamingQuery:
        return (self.spark.readStream.format("binaryFile").schema(_BINARY_FILE)
                .option("maxFilesPerTrigger", self.files_per_batch)
                .load(self.directory)
                .writeStream.foreachBatch(self._micro_batch)
                .option("checkpointLocation", str(self.out / "checkpoint"))
                .trigger(processingTime="1 second")
                .start())

    def _drain(self, query: StreamingQuery) -> Iterator[np.ndarray]:
        """Stop the query and hand on what its micro-batches queued until it stopped (a
        micro-batch waiting for room in the queue finishes once it has room). The stop
        waits for the trigger under way to end: a micro-batch whose events were queued
        is committed only after ``_micro_batch`` returns, and a stop in between would
        have a restart read its files again and hand them on twice."""

        def stop() -> None:
            while query.isActive and query.status.get("isTriggerActive"):
                time.sleep(0.05)
            query.stop()

        stopper = threading.Thread(target=stop, daemon=True)
        stopper.start()
        while stopper.is_alive() or not self._queue.empty():
            try:
                item = self._queue.get(timeout=0.2)
            except queue.Empty:
                continue
            yield from self._hand_on(item)
        self.ended = True

    def _hand_on(self, taken: _Taken) -> Iterator[np.ndarray]:
        """Yield a micro-batch's events in batches of ``batch_size``; once the caller
        took the last, count it and record its id as handed on."""
        events = taken.events
        for start in range(0, len(events), self.batch_size):
            yield events[start:start + self.batch_size]
        self._count(events, taken.rows, taken.files)
        self.handed = taken.batch_id

    def _micro_batch(self, files: DataFrame, batch_id: int) -> None:
        """Validate the files of one micro-batch; quarantine the bad rows and the files
        that cannot be read, queue the events. A micro-batch handed on before, run
        again after a restart, is skipped."""
        if batch_id <= self.handed:
            return
        paths = sorted(r.path for r in files.select("path").collect())
        record_taken(self.out, TakenBatch(batch_id, tuple(paths)))  # before anything is written
        try:
            events, n_rows = self._take(paths)
        except Exception:  # Spark failed on a file that looked whole: find which
            readable, failed = self._one_by_one(paths)
            events, n_rows = self._take(readable, failed)
        self._numbered += n_rows
        self._queue.put(_Taken(batch_id, events, n_rows, len(paths)))

    def _take(self, paths: list[str], failed: tuple[Damage, ...] = (), *,
              write: bool = True) -> tuple[np.ndarray, int]:
        """The events of the files at ``paths`` sorted by time stamp, and the rows they
        count (damaged files and ``failed`` ones one each); the rejected rows and the
        damaged files appended to the quarantine (unless not ``write``). Everything is
        read before anything is written, so a failure leaves nothing behind."""
        rows, damaged = file_rows(self.spark, self.kind, paths)
        damaged = [*damaged, *failed]
        bad = [damage_rows(self.spark, damaged)] if damaged else []
        events, n_rows = np.zeros(0, self.kind.event_dtype()), len(damaged)
        if rows is None:
            if write:
                self._quarantine(bad)
            return events, n_rows
        checked = mark_duplicates(self.kind.check(self.spark, rows)).persist()
        try:
            n_rows += checked.count()
            table = self.kind.events(checked.where("reason IS NULL")).orderBy(
                "ts", "seq").toArrow()
            if write:
                self._quarantine([quarantined_rows(checked), *bad])
        finally:
            checked.unpersist()
        events = np.zeros(table.num_rows, self.kind.event_dtype())
        for name in table.column_names:
            events[name] = table.column(name).to_numpy()
        events["seq"] += self._numbered  # numbered across files
        events["origin"] = events["ats"]
        return events, n_rows

    def _one_by_one(self, paths: list[str]) -> tuple[list[str], tuple[Damage, ...]]:
        """The files of ``paths`` that can be taken alone, and a :class:`Damage` (its
        error's first line) for each that cannot."""
        readable, failed = [], []
        for path in paths:
            try:
                self._take([path], write=False)
                readable.append(path)
            except Exception as exc:  # Spark's errors, of several types
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
                failed.append(Damage(local_path(path), 0, f"cannot be read ({first})"))
        return readable, tuple(failed)

    def _quarantine(self, frames: list[DataFrame]) -> None:
        """Append the quarantine records of ``frames`` to the run's quarantine table."""
        if frames:
            records = functools.reduce(lambda a, b: a.unionByName(b), frames)
            records.write.mode("append").parquet(str(self.out / "quarantine"))

    def _count(self, events: np.ndarray, n_rows: int, files: int) -> None:
        c = self.counts
        c.files += files
        c.rows += n_rows
        c.events += len(events)
        c.quarantined += n_rows - len(events)
        if len(events):
            c.first_ts = int(events["ts"][0]) if not c.first_ts else min(c.first_ts,
                                                                         int(events["ts"][0]))
            c.last_ts = max(c.last_ts, int(events["ts"][-1]))
            c.sensors.update(distinct(events["key"]).tolist())


@dataclass(frozen=True)
class _Taken:
    """A micro-batch taken: its id, events, rows (quarantined ones too) and files."""

    batch_id: int
    events: np.ndarray
    rows: int
    files: int


@dataclass(frozen=True)
class TakenBatch:
    """A micro-batch a watch took: its id and its files (as Spark names them)."""

    batch_id: int
    paths: tuple[str, ...]


def _taken_dir(out: Path) -> Path:
    return Path(out) / "checkpoint" / "specula-taken"


def record_taken(out: Path, taken: TakenBatch) -> None:
    """Record which files micro-batch ``taken`` holds (written whole: a rename), so that
    a watch that died after taking it can take it again (:func:`taken_batches`)."""
    folder = _taken_dir(out)
    folder.mkdir(parents=True, exist_ok=True)
    scratch = folder / f".{taken.batch_id}.json"
    scratch.write_text(json.dumps(list(taken.paths)))
    os.replace(scratch, folder / f"{taken.batch_id}.json")


def taken_batches(out: Path, after: int) -> list[TakenBatch]:
    """The micro-batches a watch on ``out`` took after ``after``, in order."""
    folder = _taken_dir(out)
    ids = sorted(int(p.stem) for p in folder.glob("*.json") if p.stem.isdigit()) \
        if folder.exists() else []
    return [TakenBatch(i, tuple(json.loads((folder / f"{i}.json").read_text())))
            for i in ids if i > after]


def committed_batch(out: Path) -> int:
    """The id of the last micro-batch the streaming query of a watch on ``out``
    committed (-1: none): Spark runs those after it again when the watch restarts."""
    commits = Path(out) / "checkpoint" / "commits"
    ids = [int(p.name) for p in commits.iterdir() if p.name.isdigit()] \
        if commits.exists() else []
    return max(ids, default=-1)


def forget_taken(out: Path, upto: int) -> None:
    """Drop the records of the micro-batches up to ``upto``: a watch that saved its
    output never takes them again."""
    for taken in taken_batches(out, -1):
        if taken.batch_id <= upto:
            (_taken_dir(out) / f"{taken.batch_id}.json").unlink(missing_ok=True)


def file_rows(spark: SparkSession, kind: LogKind, paths: list[str]
              ) -> tuple[DataFrame | None, list[Damage]]:
    """The rows (``file, line, row, text, parts``, rows numbered over all the files) of
    the files at ``paths`` (Spark's paths), each looked at first
    (:func:`~specula.pipelines.log_files.file_damage`) and read by what it is: a
    ``.parquet`` file as ``kind``'s table, any other as text. A damaged file is a
    :class:`Damage`: of a text file the lines before the damage are read, of a Parquet
    file that is not one, or not a table of ``kind``, nothing; None: no rows."""
    # a local file is looked at here; one on other storage (hdfs://...) only by Spark
    looked = {p: file_damage(local_path(p)) if _islocal_path(p) else None for p in paths}
    damaged = [d for d in looked.values() if d is not None]
    text = [p for p in paths if not p.endswith(".parquet") and looked[p] is None]
    partial = [p for p in paths if not p.endswith(".parquet")
               and (d := looked[p]) is not None and d.lines]
    frames: list[DataFrame] = []
    if text:
        frames.append(text_rows(spark.read.text(text)))
    if partial:  # Spark stops at the damage and keeps the lines before it
        frames.append(text_rows(spark.read.option("ignoreCorruptFiles", "true").text(partial)))
    for path in (p for p in paths if p.endswith(".parquet") and looked[p] is None):
        try:
            frames.append(kind.read_table(spark, path, [path]))
        except LogError as exc:  # a table of other columns
            damaged.append(Damage(local_path(path), 0, str(exc).removeprefix(f"{path}: ")))
        except Exception as exc:  # Spark's errors, of several types: not Parquet
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
            damaged.append(Damage(local_path(path), 0, f"not a readable Parquet file ({first})"))
    if not frames:
        return None, damaged
    if len(frames) == 1:
        return frames[0], damaged
    # each frame numbers its rows from 1: number them again over all the files
    rows = functools.reduce(lambda a, b: a.unionByName(b), frames)
    return number_rows(rows.drop("row"), overall="row"), damaged


def _islocal_path(path: str) -> bool:
    """Is ``path`` (as Spark names it) a file of this machine's file system?"""
    from urllib.parse import urlsplit

    return urlsplit(path).scheme in ("", "file")


def local_path(path: str) -> str:
    """A ``file:`` URI as Spark names a local file, as a path; other URIs as they are."""
    from urllib.parse import urlsplit
    from urllib.request import url2pathname

    parts = urlsplit(path)
    return url2pathname(parts.path) if parts.scheme == "file" else path


@contextmanager
def stop_on_signals(watcher: LogWatcher, say: Callable[[str], None]) -> Iterator[None]:
    """While the block runs, Ctrl-C (SIGINT) and SIGTERM stop ``watcher`` gracefully
    (``say`` tells the user so); a second one aborts at once (``KeyboardInterrupt``).
    Outside the main thread, where no handler can be set, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {s: signal.getsignal(s) for s in signals}

    def restore() -> None:
        for s, handler in previous.items():
            signal.signal(s, handler)

    def handler(signum: int, frame: object) -> None:
        if watcher.stopping:
            restore()
            raise KeyboardInterrupt
        watcher.request_stop()
        say(f"{signal.Signals(signum).name}: stopping the watch; the files taken are "
            "processed and saved (interrupt again to abort: the next watch goes on "
            "from the last checkpoint)")

    for s in signals:
        signal.signal(s, handler)
    try:
        yield
    finally:
        restore()


def counts_as_ingested(counts: WatchCounts) -> Ingested:
    """The counts of a watch in the shape of :class:`~spark_ingest.Ingested`."""
    return Ingested("", "", rows=counts.rows, events=counts.events,
                    quarantined=counts.quarantined, sensors=tuple(sorted(counts.sensors)),
                    first_ts=counts.first_ts, last_ts=counts.last_ts)
