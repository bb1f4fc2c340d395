"""What a detector emits at the end of the stream reaches its consumers in time, on every
runtime.

A unit above level 1 is clocked by its producers' punctuations. When every producer has
ended, the unit's clock reaches the end of time in an ordinary push: it must then hand
its detector everything and let it end (``on_end``) *before* it publishes its own
progress as the end of time, or its consumers take the end's output as late. The plain
in-process runtime flushes level by level in one step; its queueing model and Ray flush
each actor after its inbox has drained, so these are the runtimes at risk.
"""

from __future__ import annotations

import pytest
from graph_shapes import Case, Closing, Count, Echo, Spec, cases
from hypothesis import HealthCheck, given, settings
from naive import canonical, content, reference_instances

from specula import CostModel, InProcessRuntime
from specula.actors.routing import punctuate

#: Echo -> a detector that emits at the end -> a running count; nothing can be late.
CHAIN = Case(nodes=(Spec("echo", Echo(("A",), ("T0",))),
                    Spec("closing", Closing(("T0",), ("T1",))),
                    Spec("count", Count(("T1",), ("T2",)))),
             events=(("A", 1, 0, 0, 1), ("A", 2, 0, 0, 2)))
#: count's net output (ts, v): the closing event (ts 1, the second of its counters)
#: goes between the two echoes.
EXPECTED = [(1, 1), (1, 2), (2, 3)]


def count_net(report) -> list[tuple[int, int]]:
    net = report.net("count")
    return sorted(zip(net["ts"].tolist(), net["v"].tolist(), strict=True))


@pytest.mark.parametrize("queueing", [False, True])
def test_the_end_of_a_middle_detector_is_not_late_in_process(queueing):
    graph = CHAIN.graph()
    report = InProcessRuntime(graph, queueing=queueing).run(CHAIN.raw(graph.registry))
    assert count_net(report) == EXPECTED
    for name in graph.nodes:
        assert len(report.late(name)) == 0, name
        assert report.detectors[name].k_s == 1000, name  # K stays at k0


def test_a_unit_ends_when_every_producer_has_ended():
    graph = CHAIN.graph()
    inst = {i.node.name: i for i in graph.instances()}
    echo = inst["echo"].unit(graph.registry)
    closing = inst["closing"].unit(graph.registry)
    published, _ = punctuate(echo.push(CHAIN.raw(graph.registry), 2), echo, None, 2)
    closing.push(published, 2)
    end, _ = punctuate(echo.flush(3), echo, None, 3)
    assert echo.ended and end["ts"][-1] == echo.progress == 2**62
    generated = closing.push(end, 3)
    assert closing.ended and closing.progress == 2**62
    # the echoes, then the end's event: all before its caller publishes its progress
    assert generated["ts"].tolist() == [1, 2, 1]
    assert generated["v"].tolist() == [0, 0, 100]
    assert len(closing.flush(4)) == 0  # the end ran once
    assert closing.stats.late == 0


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(cases(max_events=30))
def test_queueing_runtime_equals_the_in_order_graph(case):
    # Any graph shape (detectors that emit at the end included), with nothing late: the
    # inbox model flushes each instance after its inbox drained, and must still give the
    # in-order answer everywhere.
    case = case.nothing_late()
    graph = case.graph()
    raw = case.raw(graph.registry)
    report = InProcessRuntime(graph, queueing=True, ticks_per_second=1.0,
                              cost_model=CostModel(per_event=0.02)).run(
        raw, step_ticks=case.step_ticks)
    reference = reference_instances(graph, raw)
    for name, node in graph.nodes.items():
        assert len(report.late(name)) == 0, (name, case)
        for index in range(node.partitions):
            producer = report.units[name][index].producer
            net = report.net(name)
            got = net[net["producer"] == producer]
            assert content(canonical(got)) == content(canonical(reference[name, index])), (
                name, index, case)


@pytest.mark.slow
@pytest.mark.cluster
def test_the_end_of_a_middle_detector_is_not_late_on_ray(local_ray):
    from specula.actors.ray_runtime import RayRuntime

    graph = CHAIN.graph()
    report = RayRuntime(graph).run(CHAIN.raw(graph.registry), batch_rows=1)
    assert count_net(report) == EXPECTED
    for name in graph.nodes:
        assert len(report.late(name)) == 0, name
        assert report.detectors[name].k_s == 1000, name
