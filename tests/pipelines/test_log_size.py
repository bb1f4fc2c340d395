"""A log's size as text, and the JIT choice it drives for Spark's JVMs."""

from __future__ import annotations

import gzip

import pytest

from specula.cluster.spark import SMALL_INPUT_BYTES
from specula.pipelines.log_files import log_text_bytes
from specula.pipelines.logs import LogError
from specula.soccer.debs2013 import write_positions
from specula.soccer.match import generate_match
from specula.soccer.spark_log import write_position_parquet


def test_text_bytes_count_each_file_by_how_it_is_stored(tmp_path):
    log = tmp_path / "log"
    log.mkdir()
    (log / "a.csv").write_bytes(b"x" * 1000)
    (log / "b.csv.gz").write_bytes(gzip.compress(b"y" * 100_000))
    (log / "_SUCCESS").write_bytes(b"z" * 5000)  # skipped, as Spark skips it
    (log / ".a.csv.crc").write_bytes(b"z" * 5000)
    gz = (log / "b.csv.gz").stat().st_size
    assert log_text_bytes(str(log)) == int(1000 + 4 * gz)
    assert log_text_bytes(str(log / "a.csv")) == 1000
    with pytest.raises(LogError, match="no such file or directory"):
        log_text_bytes(str(tmp_path / "missing"))


def test_a_parquet_log_counts_about_as_its_text_and_the_default_match_is_small(tmp_path):
    match = generate_match(2.0, seed=0)
    write_positions(tmp_path / "match.csv", match.events, newline="\n")
    write_position_parquet(match.events, tmp_path / "match.parquet")
    text = (tmp_path / "match.csv").stat().st_size
    estimate = log_text_bytes(str(tmp_path / "match.parquet"))
    assert 0.7 * text < estimate < 1.3 * text, (estimate, text)
    # `make run` generates 20 s of play: its JVMs compile with C1 only
    assert 10 * estimate < SMALL_INPUT_BYTES


def test_a_small_input_session_compiles_with_c1_only(spark):
    """The ``spark`` fixture's session is started for small logs: both its JVMs' options
    stop at C1 and keep Specula's others."""
    conf = spark.sparkContext.getConf()
    for side in ("driver", "executor"):
        options = conf.get(f"spark.{side}.extraJavaOptions").split()
        assert "-XX:TieredStopAtLevel=1" in options, options
        assert "-Xss8m" in options and "-XX:-DontCompileHugeMethods" in options, options
