"""Stopping a watch (live mode) and starting it again on the same run folder: no file is
lost or read twice, Ctrl-C and SIGTERM stop gracefully, and a restarted watch appends
its results beside the earlier run's."""

from __future__ import annotations

import json
import os
import signal
import threading

import numpy as np
import pyarrow.parquet as pq
import pytest

from specula.actors.inprocess import InProcessRuntime
from specula.pipelines.spark_store import persist
from specula.pipelines.spark_stream import LogWatcher, WatchCounts, stop_on_signals
from specula.soccer.debs2013 import write_positions
from specula.soccer.graph import soccer_graph
from specula.soccer.match import generate_match
from specula.soccer.spark_log import PositionLog


def _land(staging, watched, name: str, events: np.ndarray, broken: bool = False) -> None:
    """Write a log file elsewhere, then move it into the watched folder whole;
    ``broken``: with a line whose time stamp is no integer after the first."""
    write_positions(staging / name, events, newline="\n")
    if broken:
        text = (staging / name).read_bytes()
        (staging / name).write_bytes(text.replace(b"\n", b"\n4,oops,1,2,3,4,5,6,7,8,9,10,11\n",
                                                  1))
    (staging / name).rename(watched / name)


def test_a_watch_reads_files_as_they_land_stops_and_a_restart_reads_the_rest(tmp_path,
                                                                              spark):
    """A bad line is quarantined and rows are numbered across the files a watch takes;
    a stop requested as another file lands hands on every file taken; a watch started
    again on the run folder from where the first stood (a checkpoint's ``handed`` and
    ``counts``) reads exactly the files not taken."""
    match = generate_match(1.5, seed=5)
    parts = np.array_split(match.events, 4)
    staging, watched, run = tmp_path / "staging", tmp_path / "watched", tmp_path / "run"
    staging.mkdir()
    watched.mkdir()
    _land(staging, watched, "part0.csv", parts[0], broken=True)
    _land(staging, watched, "part1.csv", parts[1])
    first = LogWatcher(spark, PositionLog(), watched, run, idle_timeout=30.0,
                       batch_size=1_000)
    got: list[np.ndarray] = []
    for batch in first.batches():
        got.append(batch)
        # the first two files handed on (a file is counted once the caller took it all)
        if sum(map(len, got)) == len(parts[0]) + len(parts[1]) and not first.stopping:
            _land(staging, watched, "part2.csv", parts[2])  # lands, and the stop at once
            first.request_stop()
    taken = first.counts.files
    assert taken in (2, 3) and max(map(len, got)) == 1_000
    assert sum(map(len, got)) == first.counts.events  # every file taken is handed on
    # rows numbered across files; the quarantined line 2 of the first file keeps its number
    head = np.concatenate(got)
    assert np.array_equal(head["seq"], np.r_[0, np.arange(2, len(head) + 1)])
    quarantine = spark.read.parquet(str(run / "quarantine")).collect()
    assert [(q.line, q.field, q.reason) for q in quarantine] == [
        (2, "ts", "not an integer ('oops')")]
    assert (first.counts.rows, first.counts.quarantined) == (len(head) + 1, 1)
    _land(staging, watched, "part3.csv", parts[3])  # lands while nothing watches
    second = LogWatcher(spark, PositionLog(), watched, run, idle_timeout=2.0,
                        handed=first.handed, counts=WatchCounts.from_state(first.counts.state()))
    rest = list(second.batches())
    assert second.counts.files == 4  # the restart reads only what was not taken
    both = np.concatenate(got + rest)
    assert len(both) == len(match.events)  # nothing lost, nothing twice
    for name in ("ts", "key", "x", "y", "z", "v", "a", "az", "player", "team"):
        assert np.array_equal(np.sort(both[name]), np.sort(match.events[name])), name


def test_a_micro_batch_handed_on_but_not_recorded_is_not_handed_on_again(tmp_path, spark):
    """A stop between the hand-on of a micro-batch and Spark's record of it (emulated:
    the record of the last one removed) makes Spark run it again on restart, with the
    same files and batch id; the restarted watch skips it and reads only the new file.
    With ``seconds``, the batches end at the end of each micro-batch (a checkpoint's
    cut) and go on at the next call."""
    match = generate_match(1.0, seed=7)
    parts = np.array_split(match.events, 3)
    staging, watched, run = tmp_path / "staging", tmp_path / "watched", tmp_path / "run"
    staging.mkdir()
    watched.mkdir()
    _land(staging, watched, "part0.csv", parts[0])
    _land(staging, watched, "part1.csv", parts[1])
    first = LogWatcher(spark, PositionLog(), watched, run, idle_timeout=2.0)
    segments = []
    while not first.ended:
        segments.append(list(first.batches(0.0)))
    got = [b for s in segments for b in s]
    assert sorted(sum(map(len, s)) for s in segments if s) == sorted(map(len, parts[:2]))
    assert first.counts.files == 2 and sum(map(len, got)) == len(parts[0]) + len(parts[1])
    commits = run / "checkpoint" / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    for path in (commits / str(last), commits / f".{last}.crc"):
        path.unlink(missing_ok=True)
    _land(staging, watched, "part2.csv", parts[2])
    second = LogWatcher(spark, PositionLog(), watched, run, idle_timeout=2.0,
                        handed=first.handed)
    rest = list(second.batches())
    assert second.counts.files == 1
    both = np.concatenate(got + rest)
    assert len(both) == len(match.events)  # nothing lost, nothing twice
    assert np.array_equal(np.sort(both["ts"]), np.sort(match.events["ts"]))


class _Watch:
    """What stop_on_signals needs of a watcher."""

    def __init__(self) -> None:
        self.stopping = False

    def request_stop(self) -> None:
        self.stopping = True


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_the_first_signal_stops_gracefully_and_the_second_aborts(signum):
    watch, said = _Watch(), []
    before = signal.getsignal(signum)
    with stop_on_signals(watch, said.append):  # type: ignore[arg-type]
        os.kill(os.getpid(), signum)
        assert watch.stopping and "stopping the watch" in said[0]
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signum)
    assert signal.getsignal(signum) is before


def test_no_handler_outside_the_main_thread():
    watch = _Watch()
    handlers = []

    def run() -> None:
        with stop_on_signals(watch, print):  # type: ignore[arg-type]
            handlers.append(signal.getsignal(signal.SIGINT))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert handlers == [signal.getsignal(signal.SIGINT)]


def test_runs_of_a_watch_are_appended_beside_each_other(tmp_path, spark):
    match = generate_match(1.0, seed=4)
    graph = soccer_graph(1.0)
    report = InProcessRuntime(graph).run(match.events[:20_000])
    for run in (1, 2):
        persist(spark, report, graph.registry, tmp_path, {"detected": {}}, run=run)
    complex_ = pq.read_table(tmp_path / "complex").to_pandas()
    per_run = complex_.groupby("run").size()
    assert list(per_run.index) == [1, 2] and per_run[1] == per_run[2] > 0
    assert json.loads((tmp_path / "summary.json").read_text())["run"] == 2
    assert json.loads((tmp_path / "runs" / "1.json").read_text())["run"] == 1
