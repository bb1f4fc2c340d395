"""Raw events made with one registry, run by a graph declared over another."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from specula import Graph, InProcessRuntime, TypeRegistry
from specula.actors.routing import Router
from specula.detectors import Detector
from specula.events import RegistryMismatchError
from specula.soccer.debs2013 import read_all
from specula.soccer.graph import DETECTORS, QUERIES, soccer_graph
from specula.soccer.types import (
    DERIVED_TYPES,
    PICOS_PER_SECOND,
    POSITION_FIELDS,
    REFEREE_TYPES,
    SOURCES,
    WEARER_FIELDS,
    soccer_registry,
)

SAMPLE = Path(__file__).resolve().parents[1] / "data/debs2013/sample-pregame-2000.csv"
IGNORED = ("type", "flags", "ats", "kplus", "origin")


def _registry(raw_order: tuple[str, ...] = ("player", "ball", "referee"), *,
              ticks: int = PICOS_PER_SECOND) -> TypeRegistry:
    """The soccer types with the raw ones in ``raw_order`` (the derived ones after)."""
    reg = TypeRegistry(ticks_per_second=ticks)
    for name in raw_order:
        reg.register(name, **POSITION_FIELDS, **({} if name == "ball" else WEARER_FIELDS))
    for name in REFEREE_TYPES[::-1]:
        reg.register(name)
    for name, fields in DERIVED_TYPES.items():
        reg.register(name, **fields)
    return reg


def _soccer_graph_over(registry: TypeRegistry, sources: tuple[str, ...] = SOURCES) -> Graph:
    """The soccer hierarchy of :func:`soccer_graph` (pure K-slack, without the DEBS 2013
    queries) over ``registry``."""
    g = Graph(registry, sources=sources)
    for name, cls in DETECTORS.items():
        if name in QUERIES:
            continue
        g.add(name, cls(), alpha=1.0, k0=int(400e9),
              late="process" if name == "near_foot" else "side")
    return g


def _by_name(report, graph: Graph, name: str) -> list[tuple]:
    """A detector's net output with its type as a name, so registries compare."""
    net = report.net(name)
    names = [n for n in net.dtype.names if n not in IGNORED]
    return [(graph.registry.name(int(row["type"])), *(row[n].item() for n in names))
            for row in net]


@pytest.fixture(scope="module")
def debs_sample() -> np.ndarray:
    raw, quarantined = read_all(SAMPLE)  # ids of soccer_registry()
    assert not quarantined
    return raw


def test_registry_order_gives_the_canonical_answer(debs_sample):
    step = 100 * 10**9  # 100 ms of arrival per step: the same answers, sooner
    canonical_graph = soccer_graph(alpha=1.0)
    canonical = InProcessRuntime(canonical_graph).run(debs_sample, step_ticks=step)
    graph = _soccer_graph_over(_registry())
    assert graph.registry.id("player") == 1 != soccer_registry().id("player")
    mine = InProcessRuntime(graph).run(debs_sample, registry=soccer_registry(),
                                       step_ticks=step)
    assert len(canonical.net("running_intensity")) > 10
    for name in graph.nodes:
        assert _by_name(mine, graph, name) == _by_name(canonical, canonical_graph, name), name
    # read as if made with the graph's registry, the ball's readings are players' events
    unchecked = InProcessRuntime(graph).run(debs_sample, step_ticks=step)
    assert _by_name(unchecked, graph, "running_intensity") != \
        _by_name(canonical, canonical_graph, "running_intensity")


def test_a_source_the_events_registry_lacks_is_refused(debs_sample):
    made_with = TypeRegistry(ticks_per_second=PICOS_PER_SECOND)
    made_with.register("ball", **POSITION_FIELDS)
    made_with.register("player", **POSITION_FIELDS, **WEARER_FIELDS)
    runtime = InProcessRuntime(_soccer_graph_over(_registry()))
    with pytest.raises(RegistryMismatchError, match=r"the graph takes 'referee' events from "
                       r"outside \(a source\), but the raw events were made with a registry "
                       r"that has no type 'referee' \(ball, player\).*take 'referee' out of "
                       r"the graph's sources"):
        runtime.run(debs_sample[:0], registry=made_with)


def test_a_source_with_other_fields_or_time_unit_is_refused(debs_sample):
    other = TypeRegistry(ticks_per_second=PICOS_PER_SECOND)
    other.register("ball", **{**POSITION_FIELDS, "vx": "i8"})
    for name, fields in DERIVED_TYPES.items():  # a field keeps one dtype in a registry
        other.register(name, **{f: "i8" if f == "vx" else d for f, d in fields.items()})
    graph = Graph(other, sources=("ball",)).add("peaks", DETECTORS["acceleration_peak"]())
    with pytest.raises(RegistryMismatchError, match=r"do not fit the graph's registry: event "
                       r"type 'ball' has fields \(.*vx: int32.*\) where the events were made, "
                       r"but \(.*vx: int64.*\) in the registry they are read with"):
        InProcessRuntime(graph).run(debs_sample, registry=soccer_registry())
    seconds = _soccer_graph_over(_registry(ticks=1))
    with pytest.raises(RegistryMismatchError, match="ticks_per_second=1e"):
        InProcessRuntime(seconds).run(debs_sample, registry=soccer_registry())


class _Count(Detector):
    """Counts its input."""

    inputs, outputs = ("y",), ("n",)

    def on_event(self, event, emit):
        emit("n", event.ts)


def test_the_router_gives_ids_beyond_the_registry_to_nobody():
    reg = TypeRegistry()
    for name in ("n", "x", "y"):  # y, the last id, is what the detector hears
        reg.register(name)
    graph = Graph(reg, sources=("x", "y")).add("count", _Count())
    batch = np.zeros(3, reg.dtype())
    batch["type"] = [reg.id("y"), 7, -2]
    assert len(Router(graph).select("count", None, batch)) == 1
