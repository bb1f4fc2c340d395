"""Fuzzing Spark ingestion with a few generated logs, against the NumPy reader.

Spark is slow to start and each ingestion takes seconds, so this test draws only a
couple of logs, each a directory of files that together hold much of what can go
wrong (damaged and noise lines, every line ending, byte order marks, gzip whole and
truncated, a repeated line, an empty file). The oracle is the NumPy reader, which is
itself fuzzed line by line in ``tests/soccer/test_fuzz_debs2013.py``: per file, Spark
quarantines the same lines with the same field, keeps the same number of events, and
nothing is lost: events and quarantine records account for every line that is not
blank (a damaged ``.gz`` for its readable lines and one record).
"""

from __future__ import annotations

import gzip

import pandas as pd
import pytest
from fuzzing import SAMPLE_LINES, budget, debs_lines
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from specula.pipelines.spark_ingest import ingest
from specula.soccer.debs2013 import read_all
from specula.soccer.spark_log import PositionLog

pytestmark = [pytest.mark.slow, pytest.mark.fuzz]  # Spark

@st.composite
def log_files(draw: st.DrawFn) -> dict[str, bytes]:
    """Four to six files of a log: name -> bytes."""
    files = {}
    for i in range(draw(st.integers(4, 6))):
        items = draw(st.lists(debs_lines(), min_size=0, max_size=30))
        newline = draw(st.sampled_from([b"\n", b"\r\n", b"\r"]))
        blob = (b"\xef\xbb\xbf" if draw(st.booleans()) else b"") + newline.join(items)
        blob += newline if items and draw(st.booleans()) else b""
        name = f"f{i}"
        if draw(st.booleans()):
            data = gzip.compress(blob)
            cut = draw(st.sampled_from([len(data), len(data), len(data) // 2, 30]))
            files[f"{name}.csv.gz"] = data[:cut]
        else:
            files[f"{name}.csv"] = blob
    return files


# Without shrinking: each example is an ingestion of seconds, and a failing log is small
# enough to read as it was drawn.
@settings(budget(2), phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(log_files())
def test_fuzz_spark_ingestion_agrees_with_the_numpy_reader(spark, tmp_path_factory, files):
    root = tmp_path_factory.mktemp("fuzz_log")
    log = root / "log"
    log.mkdir()
    for name, data in files.items():
        (log / name).write_bytes(data)
    expected = {name: read_all(log / name) for name in files}
    if not any(len(events) for events, _ in expected.values()):
        with pytest.raises(ValueError):  # LogError: no row of the log is valid
            ingest(spark, PositionLog(), log, root / "out")
        return
    ingested = ingest(spark, PositionLog(), log, root / "out")
    quarantine = pd.read_parquet(ingested.quarantine_path)
    assert ingested.quarantined == len(quarantine)
    total_events = 0
    for name, (events, records) in expected.items():
        rows = quarantine[quarantine["file"].str.endswith("/" + name)]
        got = sorted((int(r.line), r.field) for r in rows.itertuples())
        want = sorted((q.line, q.field) for q in records)
        # Spark finds duplicates across the log; the NumPy reader within a file
        extra = [r for r in rows.itertuples() if r.reason.startswith("exact duplicate")
                 and (int(r.line), r.field) not in want]
        assert sorted(set(got) - {(int(r.line), r.field) for r in extra}) == want, name
        for r in rows.itertuples():  # the line's text, or (a damaged file) none
            assert r.reason and (r.text is not None or r.field is None), (name, r)
        total_events += len(events) - len(extra)
    assert ingested.events == total_events



# ------------------------------------------------------------------ found by fuzzing


def test_a_line_of_tabs_is_blank_on_spark_as_in_the_numpy_reader(spark, tmp_path):
    """A file holding only '\\t \\v' was one quarantined row on Spark (F.trim strips
    spaces only) and no row in the NumPy reader."""
    log = tmp_path / "log"
    log.mkdir()
    good = SAMPLE_LINES[0]
    (log / "a.csv").write_bytes(good + b"\n\t \x0b\n \x0c\r\n")
    (log / "b.csv").write_bytes(b"\t \x0b")
    ingested = ingest(spark, PositionLog(), log, tmp_path / "out")
    assert (ingested.rows, ingested.events, ingested.quarantined) == (1, 1, 0)
    assert len(read_all(log / "a.csv")[0]) == 1 and not read_all(log / "b.csv")[1]
