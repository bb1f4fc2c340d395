"""A watched directory takes each file by what it is: text lines, or a Parquet table; a
Parquet file it cannot read as the log's table is one quarantine record naming it and
why, never lines of text."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from specula.pipelines.spark_stream import LogWatcher
from specula.soccer.debs2013 import write_positions
from specula.soccer.match import generate_match
from specula.soccer.spark_log import PositionLog, write_position_parquet


@pytest.mark.parametrize("files_per_batch", [1, 4])
def test_a_watch_reads_parquet_as_a_table_and_quarantines_what_is_not_one(
        tmp_path, spark, files_per_batch):
    """A text log and a Parquet log of one match, a file named .parquet that holds text
    and a Parquet table of other columns land in the watched folder (one file a
    micro-batch, or all four in one): every event of the match comes out once, and the
    two other files are one quarantine record each."""
    match = generate_match(1.0, seed=9)
    text, table = np.array_split(match.events, 2)
    staging, watched, run = tmp_path / "staging", tmp_path / "watched", tmp_path / "run"
    staging.mkdir()
    watched.mkdir()
    write_positions(staging / "part0.csv", text, newline="\n")
    write_position_parquet(table, staging / "part1.parquet")
    (staging / "notes.parquet").write_text("10,1,2,3\nnot a table\n")
    pq.write_table(pa.table({"sid": [1], "when": [2]}), staging / "other.parquet")
    for name in ("part0.csv", "part1.parquet", "notes.parquet", "other.parquet"):
        (staging / name).rename(watched / name)  # each file lands whole

    watcher = LogWatcher(spark, PositionLog(), watched, run, idle_timeout=2.0,
                         files_per_batch=files_per_batch)
    got = np.concatenate(list(watcher.batches()))
    assert len(got) == len(match.events)  # nothing lost, nothing twice
    for name in ("ts", "key", "x", "y", "z", "v", "a", "az", "player", "team"):
        assert np.array_equal(np.sort(got[name]), np.sort(match.events[name])), name
    assert len(np.unique(got["seq"])) == len(got)  # numbered across files
    c = watcher.counts
    assert (c.files, c.rows, c.events, c.quarantined) == (4, len(got) + 2, len(got), 2)

    quarantine = sorted(spark.read.parquet(str(run / "quarantine")).collect(),
                        key=lambda q: q.file)
    assert [(q.file, q.line, q.text, q.field) for q in quarantine] == [
        ((watched / "notes.parquet").as_uri(), 1, None, None),
        ((watched / "other.parquet").as_uri(), 1, None, None)]
    assert quarantine[0].reason.startswith("not a readable Parquet file (")
    assert quarantine[1].reason.startswith(
        "not a DEBS 2013 position table: missing columns ts, x, y, z")
