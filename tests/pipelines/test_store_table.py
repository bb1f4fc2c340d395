"""The table a run's events are persisted as, without Spark: every value exactly."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from specula import events as ev
from specula.pipelines.spark_store import events_table
from specula.soccer.types import soccer_registry

REG = soccer_registry()


def test_picosecond_fields_survive_where_other_detectors_lack_them():
    """``since`` is a time stamp in ps (~1e16): through float64 it would become even."""
    poss = np.zeros(2, REG.dtype(["possession"]))
    poss["type"] = REG.id("possession")
    poss["ts"] = poss["since"] = [2**53 + 1, 10_630_772_567_730_261]
    peaks = np.zeros(3, REG.dtype(["peak"]))
    peaks["type"] = REG.id("peak")
    table, schema = events_table({"possession": poss, "acceleration_peak": peaks}, REG)
    assert table["since"].tolist() == [2**53 + 1, 10_630_772_567_730_261, 0, 0, 0]
    assert table["ts"].tolist()[:2] == [2**53 + 1, 10_630_772_567_730_261]
    assert table["detector"].tolist() == ["possession"] * 2 + ["acceleration_peak"] * 3
    assert table["event_type"].tolist() == ["possession"] * 2 + ["peak"] * 3
    assert "since long" in schema and "az int" in schema


@settings(max_examples=50, deadline=None)
@given(types=st.lists(st.sampled_from(["possession", "hit", "pass", "peak", "shot"]),
                      min_size=1, max_size=4, unique=True),
       n=st.integers(0, 5), seed=st.integers(0, 2**32 - 1))
def test_any_mix_of_types_keeps_every_integer(types, n, seed):
    rng = np.random.default_rng(seed)
    per_detector, want = {}, []
    for t in types:
        batch = np.zeros(n, REG.dtype([t]))
        batch["type"] = REG.id(t)
        for name in batch.dtype.names:
            if batch.dtype[name].kind == "i" and name != "type":
                info = np.iinfo(batch.dtype[name])
                batch[name] = rng.integers(info.min, info.max, n, endpoint=True)
        per_detector[t] = batch
        want.append(batch)
    table, _ = events_table(per_detector, REG)
    for batch, start in zip(want, np.cumsum([0] + [len(b) for b in want]), strict=False):
        rows = table.iloc[start:start + len(batch)]
        for name in batch.dtype.names:
            assert rows[name].tolist() == batch[name].tolist(), name


def test_a_retraction_is_named_after_its_kind():
    """A retraction carries no type: its ``event_type`` says what it is, never the empty
    name Spark would write as a null partition (which pyarrow cannot read back beside
    the named ones)."""
    hits = np.zeros(3, REG.dtype(["hit"]))
    hits["type"] = [REG.id("hit"), 0, 0]
    hits["flags"] = [0, ev.RETRACTION, ev.PROGRESS]
    table, _ = events_table({"hits": hits}, REG)
    assert table["event_type"].tolist() == ["hit", "retraction", "progress"]
