"""Persisted event tables read back whole, with pyarrow as with Spark."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from specula import Graph, InProcessRuntime
from specula import events as ev
from specula.detectors.examples import ANotBC, example_registry
from specula.pipelines.spark_store import persist
from specula.pipelines.synthetic import abc_stream

pytestmark = [pytest.mark.slow, pytest.mark.cluster]  # Spark


def test_emissions_with_retractions_read_back_whole(tmp_path, spark):
    """Full retraction emits retractions, which name no type: they are persisted under
    ``event_type=retraction``, and the whole emissions table reads back (a nameless
    partition is a null one, which pyarrow cannot merge with the named ones)."""
    graph = Graph(example_registry(), sources=("A", "B", "C"))
    graph.add("a_not_bc", ANotBC(), alpha=0.0, retraction="full", k0=5)
    report = InProcessRuntime(graph).run(abc_stream(graph.registry, 2_000, seed=1))
    emitted = report.detectors["a_not_bc"].net.emissions()
    retractions = int(((emitted["flags"] & ev.RETRACTION) > 0).sum())
    assert retractions > 0
    persist(spark, report, graph.registry, tmp_path, {})
    table = pq.read_table(tmp_path / "emissions").to_pandas()
    assert len(table) == len(emitted)
    assert (table["event_type"] == "retraction").sum() == retractions
    assert spark.read.parquet(str(tmp_path / "emissions")).count() == len(emitted)
