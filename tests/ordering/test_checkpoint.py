"""A unit restored from a checkpoint goes on exactly as the unit it was taken from."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest

from specula import events as ev
from specula.detectors.examples import ANotBC, example_registry
from specula.detectors.graph import Graph
from specula.ordering.checkpoint import restore_unit, unit_state
from specula.pipelines.synthetic import abc_stream, example_graph


def unit_of(alpha, retraction):
    g = Graph(example_registry(), sources=("A", "B", "C"))
    g.add("a_not_bc", ANotBC(), alpha=alpha, retraction=retraction, k0=20)
    return g.instances()[0], g.registry


@pytest.mark.parametrize(("alpha", "retraction"), [
    (1.0, "on-demand"), (0.0, "on-demand"), (0.3, "full"), ("adaptive", "on-demand")])
def test_a_restored_unit_emits_what_the_original_emits(alpha, retraction):
    instance, registry = unit_of(alpha, retraction)
    raw = abc_stream(registry, 3_000, seed=3, max_delay=40)
    batches = np.array_split(raw, 60)
    original = instance.unit(registry)
    for b in batches[:25]:
        original.push(b, 1)
    # through msgpack, as a checkpoint travels
    state = msgpack.unpackb(msgpack.packb(unit_state(original)))
    twin = instance.unit(registry)
    restore_unit(twin, state)
    assert len(twin) == len(original) > 0
    assert twin.stats == original.stats
    for b in batches[25:]:
        if original.controller is not None:  # what a recovering actor replays
            twin.controller.force(original.alpha)
        a, t = original.push(b, 2), twin.push(b, 2)
        assert a.tobytes() == t.tobytes()
    assert original.flush(3).tobytes() == twin.flush(3).tobytes()
    assert original.stats == twin.stats
    assert original.late_events().tobytes() == twin.late_events().tobytes()


def test_a_level_two_unit_keeps_its_channel_clocks():
    g = example_graph(0.5)
    inst = next(i for i in g.instances() if i.node.name == "d_then_e")
    unit = inst.unit(g.registry)
    producer = max(inst.channels)
    d = np.zeros(3, unit.in_dtype)
    d["type"] = g.registry.id("D")
    d["producer"] = producer
    d["ts"] = d["seq"] = [5, 7, 9]
    mark = np.zeros(1, unit.in_dtype)
    mark["producer"], mark["ts"], mark["flags"] = producer, 8, ev.PROGRESS
    unit.push(np.concatenate([d, mark]), 1)
    twin = inst.unit(g.registry)
    restore_unit(twin, unit_state(unit))
    assert twin.clock_source.channel_clocks() == unit.clock_source.channel_clocks()
    assert twin.clk == unit.clk and twin.clock_source.channel_clocks()[producer] == 8


@pytest.mark.parametrize(("taken", "restored", "part"), [
    ((0.0, "full"), (1.0, "full"), "a speculative buffer"),
    ((1.0, "full"), (0.0, "full"), "a speculative buffer"),
    ((0.0, "on-demand"), (0.0, "full"), "a log of sent versions"),
    (("adaptive", "full"), (0.0, "full"), "an alpha controller")])
def test_a_checkpoint_of_a_unit_built_otherwise_is_refused(taken, restored, part):
    instance, registry = unit_of(*taken)
    original = instance.unit(registry)
    original.push(abc_stream(registry, 200, seed=1, max_delay=40), 1)
    other, _ = unit_of(*restored)
    twin = other.unit(registry)
    before = unit_state(twin)
    with pytest.raises(ValueError, match=rf"a_not_bc: .*{part}.*built otherwise"):
        restore_unit(twin, unit_state(original))
    after = unit_state(twin)
    assert {k: v for k, v in after.items() if k != "detector"} == {
        k: v for k, v in before.items() if k != "detector"}  # refused before any change
