"""``specula replay DIR --watch`` with bad files dropped between good ones: the watch
goes on, ends by its idle timeout with status 0, saves the detections of every good
row and quarantines each bad file in one record naming it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest
from bad_files import write_cut_gz, write_noise, write_other_parquet
from naive import canonical_seq

from specula.actors.inprocess import InProcessRuntime
from specula.soccer.debs2013 import write_positions
from specula.soccer.graph import soccer_graph
from specula.soccer.match import generate_match

# Spark and Ray in a subprocess, one watch of ~100 s: a long run, as the other watches
# of the command (tests/pipelines/test_watch_resume.py); the watcher itself is checked
# on bad files in the default suite (tests/pipelines/test_watch_files.py)
pytestmark = [pytest.mark.slow, pytest.mark.cluster, pytest.mark.skipif(
    os.environ.get("SPECULA_SOAK") != "1", reason="set SPECULA_SOAK=1 for the long runs")]

IGNORED = ("flags", "ats", "kplus", "origin")
REFERENCE_STEP = 100 * 10**9  # ps: nothing is late, so the step changes no answer


def _content(rows: object, names: list[str]) -> list[tuple]:
    """Rows as sorted tuples of the fields ``names``, counters by rank per producer."""
    cols = {n: np.asarray(rows[n].tolist()) for n in names}
    cols["seq"] = canonical_seq(cols["producer"], cols["seq"])
    return sorted(zip(*(cols[n].tolist() for n in names), strict=True))


def test_a_watch_quarantines_bad_files_and_saves_every_good_files_detections(
        tmp_path, ray_address):
    match = generate_match(6.0, seed=11)
    first, middle, second = np.array_split(match.events, 3)
    staging, watched, out = tmp_path / "staging", tmp_path / "watched", tmp_path / "run"
    staging.mkdir()
    watched.mkdir()
    write_positions(staging / "a.csv", first, newline="\n")
    cut_lines = write_cut_gz(staging / "b_cut.csv.gz", middle)
    write_noise(staging / "c_noise.bin", 4_000, seed=2)
    write_other_parquet(staging / "d_other.parquet")
    write_positions(staging / "e.csv", second, newline="\n")
    # the good rows: a.csv, the lines of the cut file before the damage, e.csv
    raw = np.concatenate([first, middle[:cut_lines], second])
    raw["ats"] = raw["ts"]
    names = ["a.csv", "b_cut.csv.gz", "c_noise.bin", "d_other.parquet", "e.csv"]
    for name in names:
        (staging / name).rename(watched / name)

    done = subprocess.run(
        [sys.executable, "-m", "specula.cli", "replay", str(watched), "--watch", "--out",
         str(out), "--no-progress", "--no-plots", "--ray-address", ray_address,
         "--idle-timeout", "5"], capture_output=True, text=True, timeout=400, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["events_in"], summary["quarantined"]) == (len(raw), 3)

    quarantine = sorted(pq.read_table(out / "quarantine").to_pylist(),
                        key=lambda q: q["file"])
    bad = ["b_cut.csv.gz", "c_noise.bin", "d_other.parquet"]
    assert [q["file"] for q in quarantine] == [(watched / n).as_uri() for n in bad]
    assert quarantine[0]["reason"].startswith("truncated gzip file")

    graph = soccer_graph("adaptive", "on-demand", k0_ms=400.0, queries=True)
    reference = InProcessRuntime(graph).run(raw, step_ticks=REFERENCE_STEP)
    assert not (out / "late").exists() or pq.read_table(out / "late").num_rows == 0
    saved = pq.read_table(out / "complex").to_pandas()
    per_node = {name: rows for name, rows in saved.groupby("detector")}
    for name in graph.nodes:
        want = reference.net(name)
        fields = [n for n in want.dtype.names if n not in IGNORED]
        got = per_node.get(name)
        assert _content(want, fields) == ([] if got is None else _content(got, fields)), name
