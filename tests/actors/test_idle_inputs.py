"""Inputs that get no events do not stall the graph below them.

A unit above level 1 is clocked by the low watermark of its producers' progress, so a
producer that publishes none holds it back for good. Two places where that starts:

* a partition of a level-1 node that no key reaches has no clock events: every
  partition is handed its node's raw clock with each raw batch (no option needed);
* a level-1 node whose clock types go quiet: with ``idle_after`` its clock follows the
  raw stream's, ``idle_after`` behind, while they are silent.

The property suite over random graphs is ``test_idle_inputs_in_any_graph`` in
``tests/ordering/test_graph_shapes.py``; here are the repros and the edges.
"""

from __future__ import annotations

import numpy as np
import pytest
from graph_shapes import Count, Echo, Sum, shape_registry
from naive import content, reference_graph

from specula import InProcessRuntime
from specula import events as ev
from specula.actors.routing import Router
from specula.detectors.graph import Graph
from specula.events.hashing import partition_of
from specula.options import MemoryLimit, OptionError
from specula.ordering.memory import MemoryLimitError

N = 2_000


def partitioned_echo(partitions: int, memory: MemoryLimit | None = None) -> Graph:
    """Echo(A -> T0) in ``partitions`` -> Count(T0 -> T1), K 2 ticks (``memory``: the
    default MemoryLimit)."""
    limit = {} if memory is None else {"memory": memory}
    g = Graph(shape_registry(), sources=("A",))
    g.add("echo", Echo(("A",), ("T0",)), partitions=partitions, k0=2, **limit)
    g.add("count", Count(("T0",), ("T1",)), k0=2, **limit)
    return g


def ticks(graph: Graph, types: np.ndarray, ts: np.ndarray, key: int | np.ndarray = 0,
          ats: np.ndarray | None = None) -> np.ndarray:
    """Raw events of ``types`` at ``ts``, arriving at ``ats`` (default: on time)."""
    raw = np.zeros(len(ts), graph.registry.dtype())
    raw["type"], raw["ts"], raw["key"] = types, ts, key
    raw["ats"] = ts if ats is None else ats
    raw["seq"] = np.arange(len(ts))
    return raw[np.argsort(raw["ats"], kind="stable")]


def run(graph: Graph, raw: np.ndarray, queueing: bool = False):
    return InProcessRuntime(graph, ticks_per_second=1.0, queueing=queueing).run(
        raw, step_ticks=0)


def assert_in_order(report, graph: Graph, raw: np.ndarray) -> None:
    """Nothing late anywhere, and every net output the in-order graph's."""
    reference = reference_graph(graph, raw)
    for name in graph.nodes:
        assert len(report.late(name)) == 0, name
        assert content(report.net(name)) == content(reference[name]), name


# ------------------------------------------------------------------ idle partitions


@pytest.mark.parametrize("queueing", [False, True])
def test_partitions_no_key_reaches_do_not_stall_the_consumer(queueing):
    # the repro: every key hashes to one of 4 partitions; the three others got
    # no clock and published no progress, and count waited for them until the end
    # (mean latency 1,000 s against 4 s unpartitioned)
    latency = {}
    for partitions in (1, 4):
        graph = partitioned_echo(partitions)
        raw = ticks(graph, graph.registry.id("A"), np.arange(N))
        report = run(graph, raw, queueing)
        assert_in_order(report, graph, raw)
        latency[partitions] = report.detectors["count"].latency_s(1.0)[0]
    assert latency[4] <= 2 * latency[1], latency
    assert latency[1] < 10


@pytest.mark.parametrize("queueing", [False, True])
def test_partitions_no_key_reaches_hold_nothing_back_in_memory(queueing):
    # with everything buffered until the end, 100 events were a MemoryLimitError
    graph = partitioned_echo(4, MemoryLimit(buffered_events=100))
    raw = ticks(graph, graph.registry.id("A"), np.arange(N))
    report = run(graph, raw, queueing)
    assert_in_order(report, graph, raw)
    assert report.detectors["count"].memory["peak_buffered"] < 10


def test_each_partition_is_handed_its_nodes_clock_with_a_raw_batch():
    graph = partitioned_echo(3)
    router = Router(graph)
    raw = ticks(graph, graph.registry.id("A"), np.array([5, 9, 7]), key=np.array([0, 1, 2]))
    taken = 0
    for inst in graph.instances():
        if inst.node.name != "echo":
            continue
        piece = router.piece(inst, None, raw)
        data, mark = piece[piece["flags"] == 0], piece[piece["flags"] == ev.PROGRESS]
        assert len(data) + len(mark) == len(piece)
        assert (partition_of(data["key"], 3) == inst.index).all()
        taken += len(data)
        # a partition whose keys hold the batch's newest clock event needs no mark
        assert mark["ts"].tolist() == ([] if 9 in data["ts"] else [9]), inst.label
        assert (mark["producer"] == 0).all()
    assert taken == len(raw)


# ------------------------------------------------------------------ quiet sources


def fan_in(idle_after: int | None) -> Graph:
    """Echo(A -> T0) and Echo(B -> T1), both with ``idle_after``, into Sum(T0, T1)."""
    g = Graph(shape_registry(), sources=("A", "B"))
    g.add("ea", Echo(("A",), ("T0",)), k0=2, idle_after=idle_after)
    g.add("eb", Echo(("B",), ("T1",)), k0=2, idle_after=idle_after)
    g.add("sum", Sum(("T0", "T1"), ("T2",)), k0=2)
    return g


def alternating(graph: Graph, quiet: tuple[int, int]) -> np.ndarray:
    """A at even, B at odd ticks, on time, B silent in ``quiet`` (ts)."""
    reg = graph.registry
    ts = np.arange(N)
    is_b = ts % 2 == 1
    keep = ~(is_b & (ts >= quiet[0]) & (ts < quiet[1]))
    ts, is_b = ts[keep], is_b[keep]
    return ticks(graph, np.where(is_b, reg.id("B"), reg.id("A")), ts, key=ts % 5)


@pytest.mark.parametrize("queueing", [False, True])
def test_a_source_that_goes_quiet_stalls_its_consumer_unless_idle_after(queueing):
    latency = {}
    for idle_after in (None, 50):
        graph = fan_in(idle_after)
        raw = alternating(graph, (500, 1500))
        report = run(graph, raw, queueing)
        # B's events after the silence are newer than the stream's clock less
        # idle_after: none is late, and the answer is the in-order one
        assert_in_order(report, graph, raw)
        latency[idle_after] = report.detectors["sum"].latency_s(1.0)
        assert report.detectors["sum"].k_s == 2  # no delay measured from the silence
    # while B is silent, sum waits for it: up to its return (1,000 ticks), or idle_after
    assert latency[None][1] > 900
    assert latency[50][1] <= 50 + 2 * 2 + 2


@pytest.mark.parametrize("queueing", [False, True])
def test_a_source_held_up_longer_than_idle_after_is_late_downstream_and_counted(queueing):
    # B's events of ticks 500-999 are held up and arrive together at tick 1000: not a
    # quiet source but a slow one. With idle_after 50, eb's clock ran on 50 behind the
    # stream, and so did sum's: B's held events reach sum behind its horizon. They are
    # late there, counted and in the late side output, none lost (each raw event is
    # one of sum's outputs or one of its late events); eb itself has them in time.
    reg = shape_registry()
    for idle_after, late in ((None, False), (50, True)):
        graph = fan_in(idle_after)
        raw = alternating(graph, (N, N))
        held = (raw["type"] == reg.id("B")) & (raw["ts"] >= 500) & (raw["ts"] < 1000)
        raw["ats"][held] = 1000
        raw = raw[np.argsort(raw["ats"], kind="stable")]
        report = run(graph, raw, queueing)
        assert len(report.late("eb")) == 0
        assert len(report.net("eb")) == int(np.count_nonzero(raw["type"] == reg.id("B")))
        n_late = len(report.late("sum"))
        assert (n_late > 0) == late, idle_after
        assert len(report.net("sum")) + n_late == len(raw)
        assert report.stats("sum").late == n_late


def test_without_its_clock_types_a_node_with_idle_after_follows_the_stream():
    # eb never gets a B: its clock is the stream's less idle_after, so sum is not held
    graph = fan_in(10)
    raw = alternating(graph, (0, N))
    report = run(graph, raw)
    assert_in_order(report, graph, raw)
    assert report.detectors["sum"].latency_s(1.0)[1] <= 10 + 2 * 2 + 2


def test_a_node_with_idle_after_takes_the_stream_clock_of_batches_it_has_no_type_of():
    graph = fan_in(10)
    router = Router(graph)
    eb = next(i for i in graph.instances() if i.node.name == "eb")
    only_a = ticks(graph, graph.registry.id("A"), np.array([30, 40]))
    assert router.takes_any("eb", np.unique(only_a["type"]))
    piece = router.piece(eb, None, only_a)
    assert piece["flags"].tolist() == [ev.PROGRESS] and piece["ts"].tolist() == [30]
    # without idle_after a node takes nothing of it
    plain = fan_in(None)
    assert not Router(plain).takes_any("eb", np.unique(only_a["type"]))


# ------------------------------------------------------------------ what is said


def test_memory_limit_error_names_the_silent_producer_and_idle_after():
    # B never comes and eb has no idle_after: sum's clock waits for eb, and its buffer
    # fills; the error names eb's channel and the option that lets it go
    graph = fan_in(None).with_options(["sum"], memory=MemoryLimit(buffered_events=100))
    raw = alternating(graph, (0, N))
    eb = next(i for i in graph.instances() if i.node.name == "eb")
    with pytest.raises(MemoryLimitError) as err:
        run(graph, raw)
    text = str(err.value)
    assert f"producer {eb.producer} (no progress yet)" in text
    assert "idle_after" in text and "level-1" in text
    # and it is the way out
    graph = fan_in(20).with_options(["sum"], memory=MemoryLimit(buffered_events=100))
    assert_in_order(run(graph, raw), graph, raw)


def test_memory_limit_error_of_a_level_1_node_names_its_clock_types():
    g = Graph(shape_registry(), sources=("A", "B"))
    g.add("ab", Echo(("A", "B"), ("T0",), clock=("B",)), k0=2,
          memory=MemoryLimit(buffered_events=100))
    raw = ticks(g, g.registry.id("A"), np.arange(N))
    with pytest.raises(MemoryLimitError, match=r"clock types \(B\).*idle_after"):
        run(g, raw)


def test_idle_after_is_a_number_of_ticks_or_none():
    g = Graph(shape_registry(), sources=("A",))
    for bad in (-1, 1.5, "1s", True):
        with pytest.raises(OptionError, match="idle_after must be None or an integer"):
            g.add(f"e{bad}", Echo(("A",), ("T0",)), idle_after=bad)
    assert g.add("e", Echo(("A",), ("T0",)), idle_after=0).nodes["e"].idle_after == 0


# ------------------------------------------------------------------ on Ray


#: The memory limit of the Ray tests: a stalled clock holds all N events, beyond twice it.
RAY_LIMIT = 400


def on_ray(graph: Graph, raw: np.ndarray):
    from specula.actors.ray_runtime import RayRuntime

    return RayRuntime(graph, max_in_flight=2).run(raw, batch_rows=20)


@pytest.mark.slow
@pytest.mark.cluster
def test_partitions_no_key_reaches_do_not_stall_the_consumer_on_ray(local_ray):
    # the repro on Ray: each actor of echo takes its piece of every raw batch, the raw
    # clock with it; count held all 2,000 events before, a MemoryLimitError here. What
    # it holds now is the producers' lag behind one another on the actors, which a
    # loaded machine stretches to a few batches: the limit leaves room for that
    graph = partitioned_echo(4, MemoryLimit(buffered_events=RAY_LIMIT))
    raw = ticks(graph, graph.registry.id("A"), np.arange(N))
    report = on_ray(graph, raw)
    assert_in_order(report, graph, raw)
    assert report.detectors["count"].memory["peak_buffered"] < 2 * RAY_LIMIT


@pytest.mark.slow
@pytest.mark.cluster
def test_a_node_with_idle_after_is_fed_the_batches_it_has_no_type_of_on_ray(local_ray):
    # B never comes: the driver pushes eb the A batches too, for their clock, so sum
    # is not held back (else it holds every A and fails with a MemoryLimitError)
    graph = fan_in(20).with_options(["sum"], memory=MemoryLimit(buffered_events=RAY_LIMIT))
    raw = alternating(graph, (0, N))
    report = on_ray(graph, raw)
    assert_in_order(report, graph, raw)
    assert report.stats("eb").progress_in > 0 and report.stats("eb").events_in == 0
