"""A watched directory takes each file by what it is: text lines, or a Parquet table; a
Parquet file it cannot read as the log's table is one quarantine record naming it and
why, never lines of text."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from bad_files import write_cut_gz, write_noise, write_other_parquet

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


@pytest.mark.parametrize("looked_at", [True, False])
def test_bad_files_between_good_ones_are_quarantined_and_the_watch_goes_on(
        tmp_path, spark, monkeypatch, looked_at):
    """A truncated ``.csv.gz``, binary garbage and a Parquet table of other columns land
    between good files, one a micro-batch: the watch ends by its idle timeout, every
    good row comes out once (of the truncated file, the lines before the damage), and
    each bad file is one quarantine record naming it. Not ``looked_at``: the files are
    not looked at before Spark reads them (as for a file damaged after the look), so
    Spark fails on the truncated one, and reading the micro-batch file by file finds
    and quarantines it."""
    from specula.pipelines import spark_stream

    if not looked_at:
        monkeypatch.setattr(spark_stream, "file_damage", lambda path: None)
    match = generate_match(1.0, seed=4)
    good0, good1, cut, good2 = np.array_split(match.events, 4)
    staging, watched, run = tmp_path / "staging", tmp_path / "watched", tmp_path / "run"
    staging.mkdir()
    watched.mkdir()
    write_positions(staging / "a_good.csv", good0, newline="\n")
    write_positions(staging / "b_good.csv.gz", good1, newline="\n")
    cut_lines = write_cut_gz(staging / "c_cut.csv.gz", cut)
    write_noise(staging / "d_noise.bin", 5_000, seed=1)
    write_other_parquet(staging / "e_other.parquet")
    write_positions(staging / "f_good.csv", good2, newline="\n")
    names = ["a_good.csv", "b_good.csv.gz", "c_cut.csv.gz", "d_noise.bin",
             "e_other.parquet", "f_good.csv"]
    for name in names:
        (staging / name).rename(watched / name)  # each file lands whole

    watcher = LogWatcher(spark, PositionLog(), watched, run, idle_timeout=3.0)
    got = np.concatenate(list(watcher.batches()))  # ends by its idle timeout, no error
    read_of_cut = cut[:cut_lines] if looked_at else cut[:0]
    want = np.concatenate([good0, good1, read_of_cut, good2])
    assert len(got) == len(want)  # nothing lost, nothing twice
    for name in ("ts", "key", "x", "y", "z", "v", "a", "player", "team"):
        assert np.array_equal(np.sort(got[name]), np.sort(want[name])), name
    assert watcher.counts.files == len(names)
    quarantine = sorted(spark.read.parquet(str(run / "quarantine")).collect(),
                        key=lambda q: q.file)
    bad = ["c_cut.csv.gz", "d_noise.bin", "e_other.parquet"]
    assert [q.file for q in quarantine] == [(watched / n).as_uri() for n in bad]
    cut_record, noise_record, table_record = quarantine
    if looked_at:
        assert cut_record.line == cut_lines + 1
        assert cut_record.reason.startswith("truncated gzip file")
    else:
        assert cut_record.line == 1 and cut_record.reason.startswith("cannot be read (")
    assert noise_record.line == 1 and noise_record.reason
    assert table_record.reason.startswith("not a DEBS 2013 position table")
