"""Revisions reach whoever holds what they revise.

The new version of ``(producer, seq)`` may have another type or key than the version a
consumer holds: it routes to another subscriber or partition. When on-demand replays
renumbered what they regenerated, these two cases gave a wrong answer with nothing late
at all; outputs now keep their labels (``specula/ordering/_sent.py``) and a revision
changes type or key only when the same cause's output does
(``tests/ordering/test_on_demand.py``). Both retraction modes must still agree here.
"""

from __future__ import annotations

import numpy as np
import pytest
from naive import canonical, content, reference_graph

from specula import Graph, InProcessRuntime
from specula.detectors import Detector
from specula.events import TypeRegistry


class Split(Detector):
    """``A`` with even ``v`` becomes ``T0``, odd ``v`` becomes ``T1``."""

    inputs, outputs = ("A",), ("T0", "T1")

    def on_event(self, event, emit):
        emit("T1" if event["v"] % 2 else "T0", event.ts, event.key, v=event["v"])


class Echo(Detector):
    """Every ``A`` as a ``T0`` with the same key."""

    inputs, outputs = ("A",), ("T0",)

    def on_event(self, event, emit):
        emit("T0", event.ts, event.key, v=event["v"])


class Count(Detector):
    """A running count of ``T0`` events."""

    inputs, outputs = ("T0",), ("N",)

    def __init__(self) -> None:
        self.n = 0

    def on_event(self, event, emit):
        self.n += 1
        emit("N", event.ts, event.key, v=self.n)


def registry() -> TypeRegistry:
    reg = TypeRegistry()
    for name in ("A", "T0", "T1", "N"):
        reg.register(name, v=np.int64)
    return reg


def arrivals(reg: TypeRegistry, rows: list[tuple[int, int, int]]) -> np.ndarray:
    """Raw ``A`` events ``(ts, key, v)``, arriving in list order."""
    raw = reg.from_records([{"type": "A", "ts": ts, "key": key, "v": v, "seq": i, "ats": i}
                            for i, (ts, key, v) in enumerate(rows)], dtype=reg.dtype(["A"]))
    return raw


def run(graph: Graph, raw: np.ndarray):
    result = InProcessRuntime(graph).run(raw, step_ticks=0)
    reference = reference_graph(graph, raw)
    return result, reference


@pytest.mark.parametrize("retraction", ["on-demand", "full"])
def test_a_revision_that_changes_type_leaves_the_old_subscriber(retraction):
    reg = registry()
    g = Graph(reg, sources=("A",))
    g.add("split", Split(), alpha=0.0, k0=1000, retraction=retraction)
    g.add("count", Count(), alpha=0.0, k0=1000, retraction=retraction)
    result, reference = run(g, arrivals(reg, [(2, 0, 0), (1, 0, 1)]))
    for name in g.nodes:
        assert len(result.late(name)) == 0
        assert content(canonical(result.net(name))) == content(reference[name]), name
    assert [int(r["v"]) for r in result.net("count")] == [1]


@pytest.mark.parametrize("retraction", ["on-demand", "full"])
def test_a_revision_that_changes_key_moves_to_the_other_partition(retraction):
    reg = registry()
    g = Graph(reg, sources=("A",))
    g.add("echo", Echo(), alpha=0.0, k0=1000, retraction=retraction)
    g.add("count", Count(), alpha=0.0, k0=1000, retraction=retraction, partitions=2)
    result = InProcessRuntime(g).run(arrivals(reg, [(2, 0, 0), (1, 1, 0), (3, 1, 0)]),
                                     step_ticks=0)
    assert len(result.late("echo")) == len(result.late("count")) == 0
    # partition 0 counts T0@2 once; partition 1 counts T0@1 and T0@3
    counts = sorted((int(r["key"]), int(r["ts"]), int(r["v"])) for r in result.net("count"))
    assert counts == [(0, 2, 1), (1, 1, 1), (1, 3, 2)]
