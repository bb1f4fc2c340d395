"""A live watch stopped with Ctrl-C mid-match, or killed, and started again on the same
run folder finds exactly the detections of one uninterrupted run: the first run
commits checkpoints with the detections that became final (and suspends its graph on
Ray at a stop); the second goes on from the last checkpoint and commits the rest.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from naive import canonical_seq

from specula.actors.inprocess import InProcessRuntime
from specula.pipelines.lease import TAG, lease_path
from specula.soccer.debs2013 import write_positions
from specula.soccer.graph import soccer_graph
from specula.soccer.match import generate_match

# Spark and Ray in subprocesses: two watches take ~150 s (Spark's first micro-batch of
# a watch alone ~30 s), so this is one of the long runs; the default suite checks the
# suspension on Ray (tests/actors/test_ray_runtime.py) and the selection of what each
# run persists (tests/pipelines/test_resume.py)
pytestmark = [pytest.mark.slow, pytest.mark.cluster, pytest.mark.skipif(
    os.environ.get("SPECULA_SOAK") != "1", reason="set SPECULA_SOAK=1 for the long runs")]

SPECULA = [sys.executable, "-m", "specula.cli"]
IGNORED = ("flags", "ats", "kplus", "origin")
REFERENCE_STEP = 100 * 10**9  # ps: nothing is late, so the step changes no answer


def _land(staging, watched, name: str, events: np.ndarray) -> None:
    """Write a log file elsewhere, then move it into the watched folder whole."""
    write_positions(staging / name, events, newline="\n")
    (staging / name).rename(watched / name)


def _complex(out) -> dict[str, object]:
    data = pq.read_table(out / "complex").to_pandas()
    return {name: rows for name, rows in data.groupby("detector")}


def _content(rows: object, names: list[str]) -> list[tuple]:
    """Rows (a record array or a data frame) as sorted tuples of the fields ``names``,
    counters by rank per producer (on-demand counters are labels, which depend on how
    the input arrived: ``naive.canonical``)."""
    cols = {n: np.asarray(rows[n].tolist()) for n in names}
    if "seq" in cols:
        cols["seq"] = canonical_seq(cols["producer"], cols["seq"])
    return sorted(zip(*(cols[n].tolist() for n in names), strict=True))


@dataclass
class _Watch:
    """A watch of a generated match's four parts, two of them landed."""

    match: Any
    parts: list[np.ndarray]
    staging: Path
    watched: Path
    out: Path
    command: list[str]
    proc: subprocess.Popen


def _checkpointed(out: Path) -> int:
    """The last micro-batch a committed checkpoint of the watch on ``out`` covers."""
    records = sorted((out / "checkpoints").glob("*.json"))
    return json.loads(records[-1].read_text())["handed"] if records else -1


def _watch_taking_two_files(tmp_path: Path, ray_address: str, seconds: float,
                            seed: int) -> _Watch:
    """Start a watch (idle timeout 300 s, a checkpoint every 2 s) with two of four parts
    landed; return once a checkpoint covers both."""
    match = generate_match(seconds, seed=seed)
    parts = np.array_split(match.events, 4)
    staging, watched, out = tmp_path / "staging", tmp_path / "watched", tmp_path / "run"
    staging.mkdir()
    watched.mkdir()
    for i in (0, 1):
        _land(staging, watched, f"part{i}.csv", parts[i])
    command = [*SPECULA, "replay", str(watched), "--watch", "--out", str(out),
               "--no-progress", "--no-plots", "--ray-address", ray_address,
               "--checkpoint-interval", "2"]
    proc = subprocess.Popen([*command, "--idle-timeout", "300"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.time() + 240
        while _checkpointed(out) < 1:  # micro-batches 0 and 1
            assert proc.poll() is None and time.time() < deadline, proc.stdout.read()
            time.sleep(0.5)
    except BaseException:
        proc.kill()
        raise
    return _Watch(match, parts, staging, watched, out, command, proc)


def test_a_watch_stopped_by_ctrl_c_and_started_again_finds_the_uninterrupted_detections(
        tmp_path, ray_address):
    w = _watch_taking_two_files(tmp_path, ray_address, 8.0, seed=3)
    match, parts, staging, watched, out, watch, proc = (
        w.match, w.parts, w.staging, w.watched, w.out, w.command, w.proc)
    try:
        proc.send_signal(signal.SIGINT)
        first, _ = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, first
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["run"], summary["suspended"], summary["resumed"]) == (1, True, False)
    assert summary["written_live"] > 0 and summary["checkpoints"]
    assert (out / "state" / "suspended.json").exists()

    for i in (2, 3):
        _land(staging, watched, f"part{i}.csv", parts[i])
    second = subprocess.run([*watch, "--idle-timeout", "3"], capture_output=True, text=True,
                            timeout=300, check=False)
    assert second.returncode == 0, second.stdout + second.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["run"], summary["suspended"], summary["resumed"]) == (2, False, True)
    assert not (out / "state").exists()  # the stream ended: nothing left to resume

    graph = soccer_graph("adaptive", "on-demand", k0_ms=400.0, queries=True)
    raw = match.events.copy()
    raw["ats"] = raw["ts"]
    whole = InProcessRuntime(graph).run(raw, step_ticks=REFERENCE_STEP)
    # the stop matters: two runs that each flush at their end find other detections
    cut = len(np.concatenate(parts[:2]))
    halves = [InProcessRuntime(graph).run(half, step_ticks=REFERENCE_STEP)
              for half in (raw[:cut], raw[cut:])]
    persisted = _complex(out)
    assert not (out / "late").exists() or pq.read_table(out / "late").num_rows == 0
    differs = False
    for name in graph.nodes:
        want = whole.net(name)
        names = [n for n in want.dtype.names if n not in IGNORED]
        got = persisted.get(name)
        assert _content(want, names) == ([] if got is None else _content(got, names)), name
        if got is not None:  # each detection once, split over both runs
            assert not got.duplicated(["producer", "seq"]).any(), name
        flushed = sorted(_content(halves[0].net(name), names)
                         + _content(halves[1].net(name), names))
        differs |= flushed != _content(want, names)
    assert differs
    # the summary counts the whole run, the first watch's detections too
    for name in graph.nodes:
        assert summary["detectors"][name]["net_events"] == len(whole.net(name)), name
    found = {t: 0 for t in summary["detected"]}
    for name in graph.nodes:
        for t in whole.net(name)["type"].tolist():
            found[graph.registry.name(t)] += 1
    assert summary["detected"] == found
    runs = pq.read_table(out / "complex").to_pandas()["run"].value_counts()
    assert runs.get(1, 0) > 0 and runs.get(2, 0) > 0
    # the emissions (updates and retractions with them) were written by both runs too
    emitted = pq.read_table(out / "emissions").to_pandas()
    assert set(emitted["run"]) == {1, 2} and len(emitted) >= len(pq.read_table(out / "complex"))


def _tagged(tag: str) -> list[int]:
    """The processes of this machine whose environment holds the watch tag ``tag``."""
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{name}/environ", "rb") as environ:
                if f"{TAG}={tag}".encode() in environ.read().split(b"\0"):
                    found.append(int(name))
        except OSError:
            continue
    return found


def _reference(graph, events: np.ndarray):
    raw = events.copy()
    raw["ats"] = raw["ts"]
    return InProcessRuntime(graph).run(raw, step_ticks=REFERENCE_STEP)


@pytest.mark.parametrize("death", ["SIGKILL", "two SIGINTs"])
def test_a_watch_that_died_after_taking_files_is_taken_over_exactly_once(
        tmp_path, ray_address, death):
    """The driver dies once a checkpoint covers two files (SIGKILL: a crash; or the
    second Ctrl-C's abort). The next watch on the folder ends what the dead one left
    running, goes on from that checkpoint without reading its files again, and takes
    the new ones: the detections saved are exactly an uninterrupted watch's, each once."""
    w = _watch_taking_two_files(tmp_path, ray_address, 6.0, seed=8)
    match, parts, staging, watched, out, watch, proc = (
        w.match, w.parts, w.staging, w.watched, w.out, w.command, w.proc)
    try:
        tag = json.loads(lease_path(out, 1).read_text())["tag"]
        assert _tagged(tag)  # Spark's JVM and its workers carry it
        if death == "SIGKILL":
            proc.kill()
        else:
            proc.send_signal(signal.SIGINT)
            # soon after: a stop whose graph is idle at a checkpoint takes about a
            # second, and on a loaded machine this process may sleep far longer
            time.sleep(0.1)
            proc.send_signal(signal.SIGINT)
        first, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode in (-9, 130), first
    assert not (out / "runs" / "1.json").exists()  # nothing saved
    for i in (2, 3):
        _land(staging, watched, f"part{i}.csv", parts[i])
    again = subprocess.run([*watch, "--idle-timeout", "3"], capture_output=True, text=True,
                           timeout=400, check=False)
    assert again.returncode == 0, again.stdout + again.stderr
    gone_on = re.search(r"watch 1 died without saving: watch 1 goes on from checkpoint "
                        r"(\d+) and takes the (\d+) micro-batch", again.stderr)
    assert gone_on is not None, again.stderr
    assert gone_on[2] == "0"  # the files of the committed checkpoints are not read again
    assert _tagged(tag) == []  # nothing of the dead watch runs on
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["run"], summary["events_in"]) == (1, len(match.events))
    assert summary["resumed_from"] == int(gone_on[1]) and summary["resumed"]
    assert not list((out / "runs").glob("*.running"))

    graph = soccer_graph("adaptive", "on-demand", k0_ms=400.0, queries=True)
    whole = _reference(graph, match.events)
    saved = _complex(out)
    for name in graph.nodes:
        want = whole.net(name)
        names = [n for n in want.dtype.names if n not in IGNORED]
        got = saved.get(name)
        assert _content(want, names) == ([] if got is None else _content(got, names)), name
        if got is not None:
            assert not got.duplicated(["producer", "seq"]).any(), name
