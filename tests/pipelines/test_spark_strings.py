"""String payload fields persist as text through the Spark store and read back as codes."""

from __future__ import annotations

from specula.events import TypeRegistry
from specula.pipelines.spark_store import _events_frame, read_events


def test_string_fields_persist_as_text_and_read_back_as_codes(spark, tmp_path):
    registry = TypeRegistry()
    registry.register("Pair", sym=str, n="i8")
    registry.register("Tick", n="i8")
    pairs = registry.from_records([{"type": "Pair", "ts": 1, "sym": 'naïve "q"', "n": 1},
                                   {"type": "Pair", "ts": 2, "sym": "", "n": 2}],
                                  dtype=registry.dtype())
    ticks = registry.batch("Tick", ts=3, n=3)
    path = str(tmp_path / "complex")
    frame = _events_frame(spark, {"pairs": pairs, "ticks": ticks}, registry)
    frame.write.mode("overwrite").partitionBy("event_type").parquet(path)
    texts = sorted(r["sym"] for r in spark.read.parquet(path).collect())
    assert texts == ["", "", 'naïve "q"']  # the Tick row has no sym: empty
    back = read_events(spark, path, "Pair", registry)
    assert sorted(back["sym"].tolist()) == sorted(pairs["sym"].tolist())
