"""Bad input on the Spark path: every rejected record is found, and the good rows flow.

One directory log holds a little of everything that went wrong for new users (small
files sharing a partition, a large file split over several, a truncated ``.gz``, UTF-16
and binary text, physically impossible values, a byte order mark, CR-only line ends,
exact duplicates); it is ingested once, and each test reads its part of the outcome:
the quarantine records and the message a user sees for them.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from specula.pipelines.arrival import arrival_batches
from specula.pipelines.logs import LogError
from specula.pipelines.spark_ingest import Ingested, ingest
from specula.pipelines.spark_quarantine import describe
from specula.soccer.debs2013 import position_dtype, read_all
from specula.soccer.spark_log import PositionLog

pytestmark = [pytest.mark.slow, pytest.mark.cluster]  # Spark

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "debs2013" / "sample-pregame-2000.csv"
MAX_INT64 = 2**63 - 1


def _lines(first: int, last: int) -> list[bytes]:
    return SAMPLE.read_bytes().splitlines()[first:last]


def _field(line: bytes, index: int, value: bytes) -> bytes:
    parts = line.split(b",")
    parts[index] = value
    return b",".join(parts)


def _truncated_gzip(lines: list[bytes]) -> tuple[bytes, int]:
    """``lines`` gzip-compressed and cut in the middle, and how many whole lines decode."""
    import zlib

    data = gzip.compress(b"\n".join(lines) + b"\n")
    cut = data[: len(data) // 2]
    decoded = zlib.decompressobj(31).decompress(cut)
    return cut, decoded.count(b"\n")


@dataclass
class Outcome:
    log: Path
    ingested: Ingested
    quarantine: pd.DataFrame  # read back with pandas
    events: np.ndarray
    whole_lines: int  # whole lines before the damage of damaged.csv.gz

    def records(self, name: str) -> list[tuple[int, str | None, str]]:
        rows = self.quarantine[self.quarantine["file"].str.endswith("/" + name)]
        return [(int(r.line), r.field, r.reason) for r in rows.itertuples()]

    def messages(self, name: str) -> list[str]:
        rows = self.quarantine[self.quarantine["file"].str.endswith("/" + name)]
        return [describe(r) for r in rows.itertuples()]


@pytest.fixture(scope="module")
def outcome(spark, tmp_path_factory) -> Outcome:
    root = tmp_path_factory.mktemp("bad_input")
    log = root / "log"
    log.mkdir()
    for i in range(10):  # small files: several share a Spark partition
        lines = _lines(100 * i, 100 * i + 100)
        lines[50] = _field(lines[50], 1, b"12x")  # line 51 of each file
        (log / f"a{i:02}.csv").write_bytes(b"\n".join(lines) + b"\n")
    big = _lines(1000, 1600)  # ~50 kB, split over partitions of 16 kB
    big[450] = _field(big[450], 1, b"12x")
    (log / "big.csv").write_bytes(b"\n".join(big) + b"\n")
    cut, whole = _truncated_gzip(_lines(1600, 1900))
    (log / "damaged.csv.gz").write_bytes(cut)
    (log / "bom.csv").write_bytes(b"\xef\xbb\xbf" + b"\n".join(_lines(1900, 1920)) + b"\n")
    (log / "cr.csv").write_bytes(b"\r".join(_lines(1920, 1940)) + b"\r")
    dups = _lines(1940, 1950)
    (log / "dups.csv").write_bytes(b"\n".join([*dups, dups[2], _lines(0, 1)[0]]) + b"\n")
    extremes = _lines(1950, 1960)
    extremes[3] = _field(extremes[3], 6, str(MAX_INT64).encode())
    extremes[4] = _field(extremes[4], 5, b"200000000")
    (log / "extremes.csv").write_bytes(b"\n".join(extremes) + b"\n")
    (log / "utf16.csv").write_bytes("\n".join(
        line.decode() for line in _lines(1960, 1962)).encode("utf-16"))
    (log / "binary.csv").write_bytes(b"\xff\xfe\x00,1,2\n" + b"\n".join(_lines(1962, 1970)))

    conf = spark.conf
    saved = {k: conf.get(k) for k in ("spark.sql.files.maxPartitionBytes",
                                      "spark.sql.files.openCostInBytes")}
    conf.set("spark.sql.files.maxPartitionBytes", "16k")
    conf.set("spark.sql.files.openCostInBytes", "0")
    try:
        ingested = ingest(spark, PositionLog(), log, root / "out")
    finally:
        for key, value in saved.items():
            conf.set(key, value)
    quarantine = pd.read_parquet(ingested.quarantine_path)
    events = np.concatenate(list(arrival_batches(ingested.events_path, position_dtype())))
    return Outcome(log, ingested, quarantine, events, whole)


def test_a_directory_quarantine_names_file_and_line_exactly(outcome):
    for i in range(10):
        assert outcome.records(f"a{i:02}.csv") == [(51, "ts", "not an integer ('12x')")]
    assert outcome.records("big.csv") == [(451, "ts", "not an integer ('12x')")]
    assert outcome.messages("a07.csv") == [
        f"{outcome.log}/a07.csv line 51, field 'ts': not an integer ('12x')"]
    seq = np.sort(outcome.events["seq"])
    assert len(np.unique(seq)) == len(seq)  # rows numbered once over all files


def test_a_truncated_gzip_file_is_quarantined_whole_and_its_readable_rows_kept(outcome):
    whole = outcome.whole_lines
    reason = (f"truncated gzip file: the compressed data ends early; the {whole:,} complete "
              "lines before it were read, the rest of the file is lost")
    assert outcome.records("damaged.csv.gz") == [(whole + 1, None, reason)]
    kept = [int(line.split(b",")[1]) for line in _lines(1600, 1600 + whole)]
    assert whole > 50 and np.isin(kept, outcome.events["ts"]).all()
    assert outcome.messages("damaged.csv.gz") == [
        f"{outcome.log}/damaged.csv.gz line {whole + 1}: {reason}"]


def test_the_quarantine_reads_back_with_text_that_is_not_utf8_escaped(outcome):
    texts = outcome.quarantine.loc[outcome.quarantine["file"].str.endswith("/binary.csv"),
                                   "text"].tolist()
    assert texts == ["\\xff\\xfe\x00,1,2"]
    utf16 = outcome.records("utf16.csv")
    assert [line for line, _, _ in utf16] == [1, 2]
    assert utf16[0][2] == "not an integer ('\ufffd\ufffd6\x002\x00')"
    assert not outcome.quarantine["text"].fillna("").str.contains("\ufffd").any()
    assert pq.read_table(outcome.ingested.quarantine_path).num_rows == len(outcome.quarantine)


def test_physically_impossible_speed_and_acceleration_are_rejected(outcome):
    assert outcome.records("extremes.csv") == [
        (4, "a", "above 100000000000 um/s^2 (100,000 m/s^2), not physically possible "
                 f"({MAX_INT64})"),
        (5, "v", "above 150000000 um/s (150 m/s), not physically possible (200000000)")]
    assert outcome.events["a"].max() < 10**11


def test_a_byte_order_mark_and_cr_line_ends_cost_no_row(outcome):
    assert outcome.records("bom.csv") == [] and outcome.records("cr.csv") == []
    for first, last in ((1900, 1920), (1920, 1940)):
        ts = [int(line.split(b",")[1]) for line in _lines(first, last)]
        assert np.isin(ts, outcome.events["ts"]).all()


def test_exact_duplicates_are_quarantined_and_counted(outcome):
    assert outcome.records("dups.csv") == [
        (11, None, "exact duplicate of line 3"),
        (12, None, f"exact duplicate of line 1 of {(outcome.log / 'a00.csv').as_uri()}")]
    ingested = outcome.ingested
    assert ingested.duplicates == 2
    assert ingested.quarantined == len(outcome.quarantine)
    assert ingested.events == len(outcome.events)
    assert ingested.rows == ingested.events + ingested.quarantined
    assert len(ingested.first_quarantined) == 5


def test_a_lone_truncated_gzip_log_keeps_its_readable_rows(spark, tmp_path):
    cut, whole = _truncated_gzip(_lines(0, 400))
    log = tmp_path / "match.csv.gz"
    log.write_bytes(cut)
    ingested = ingest(spark, PositionLog(), log, tmp_path / "out")
    assert (ingested.events, ingested.quarantined) == (whole, 1)
    assert ingested.first_quarantined[0].startswith(f"{log} line {whole + 1}: truncated gzip")


def test_a_stray_file_in_a_parquet_log_is_quarantined_whole(spark, tmp_path):
    from specula.soccer.spark_log import write_position_parquet

    events, _ = read_all(SAMPLE)
    log = tmp_path / "table"
    write_position_parquet(events[:300], log / "part-0.parquet")
    (log / "notes.csv").write_bytes(SAMPLE.read_bytes()[:500])
    (log / "broken.parquet").write_bytes(b"PAR1 not really")
    ingested = ingest(spark, PositionLog(), log, tmp_path / "out")
    assert (ingested.events, ingested.quarantined) == (300, 2)
    assert ingested.first_quarantined[1] == (
        f"{log}/notes.csv line 1: not a Parquet file: in a directory of Parquet files only "
        "the .parquet files are read")
    assert ingested.first_quarantined[0].startswith(
        f"{log}/broken.parquet line 1: not a readable Parquet file (")
    (log / "part-0.parquet").unlink()
    with pytest.raises(LogError, match=r"no readable file; .*broken\.parquet: not a readable"):
        ingest(spark, PositionLog(), log, tmp_path / "out2")
