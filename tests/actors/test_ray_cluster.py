"""A graph on a Ray cluster of three nodes (``ray.cluster_utils.Cluster``, one CPU each):
actors go where their CPUs are, and the answer is the in-process one."""

from __future__ import annotations

import pytest
from naive import canonical, content

from specula import Graph, InProcessRuntime
from specula.actors.ray_runtime import RayRuntime
from specula.detectors.examples import CountPerKey, Threshold, example_registry
from specula.pipelines.synthetic import abc_stream

pytestmark = [pytest.mark.slow, pytest.mark.cluster]  # starts three Ray nodes

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def three_nodes():
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, connect=False,
                      head_node_args={"num_cpus": 1, "include_dashboard": False})
    for _ in range(2):
        cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, configure_logging=False, log_to_driver=False)
    yield cluster
    ray.shutdown()
    cluster.shutdown()


def test_four_partitions_spread_over_three_nodes_with_the_in_process_answer(three_nodes):
    graph = Graph(example_registry(), sources=("C",))
    graph.add("per_key", CountPerKey(), partitions=4, cpus=0.5, k0=3_000, alpha=0.0)
    graph.add("big_c", Threshold(), k0=3_000)  # asks for nothing: fits beside them
    raw = abc_stream(example_registry(), 4_000, seed=5, max_delay=20, keys=9)
    report = RayRuntime(graph).run(raw, batch_rows=400)
    hosts = report.detectors["per_key"].hosts
    assert len(hosts) == 4 and len(set(hosts)) == 3, hosts  # SPREAD: every node has one
    reference = InProcessRuntime(graph).run(raw, step_ticks=50)
    for name in graph.nodes:
        assert len(report.late(name)) == len(reference.late(name)) == 0
        assert content(canonical(report.net(name))) == content(
            canonical(reference.net(name))), name
    assert len(report.net("per_key")) > 100


def test_a_fourth_cpu_is_refused_on_three(three_nodes):
    from specula.actors.placement import PlacementError

    graph = Graph(example_registry(), sources=("C",))
    graph.add("per_key", CountPerKey(), partitions=4, cpus=1.0)
    with pytest.raises(PlacementError, match="ask for 4 CPU, the cluster has 3"):
        RayRuntime(graph).run(abc_stream(example_registry(), 100, seed=1))


def test_the_soccer_hierarchy_on_three_nodes_gives_the_in_process_answer(three_nodes):
    from specula.pipelines.delays import DelayModel
    from specula.soccer.graph import soccer_graph
    from specula.soccer.match import generate_match

    match = generate_match(2.0, seed=7)
    raw = DelayModel(seed=7).arrival(match.events)
    graph = soccer_graph(0.0, k0_ms=400.0)
    report = RayRuntime(graph).run(raw, batch_rows=2_000)
    assert all(d.hosts for d in report.detectors.values())
    reference = InProcessRuntime(graph).run(raw, step_ticks=100 * 10**9)
    for name in graph.nodes:
        assert len(report.late(name)) == len(reference.late(name)) == 0, name
        assert content(canonical(report.net(name))) == content(
            canonical(reference.net(name))), name
    assert len(report.net("near_foot")) > 0


USER_MODULE = '''
from specula.detectors import Detector


class Doubled(Detector):
    """Every C becomes a D with twice its value (a detector only this file defines)."""

    inputs, outputs = ("C",), ("D",)

    def on_event(self, event, emit):
        emit("D", event.ts, event.key, a_ts=event.ts)
'''


def _user_module(folder):
    """Import a detector module from ``folder``, then take ``folder`` off the path: only
    this process can import it now, as on a laptop whose files a cluster lacks."""
    import importlib
    import sys

    (folder / "specula_user_detectors.py").write_text(USER_MODULE)
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module("specula_user_detectors")
    finally:
        sys.path.remove(str(folder))


def test_user_modules_are_the_files_of_the_graphs_own_detectors(tmp_path):
    from specula.actors.ray_runtime import user_modules
    from specula.shedding import Shedding

    mine = _user_module(tmp_path)
    graph = Graph(example_registry(), sources=("C",))
    graph.add("doubled", mine.Doubled(), shedding=Shedding(latency_bound_s=1.0))
    graph.add("big_c", Threshold())
    assert user_modules(graph) == [mine]  # not specula's, not the standard library's


def test_a_joined_cluster_gets_the_modules_of_the_detectors_shipped(three_nodes, tmp_path):
    # the driver joins the cluster itself (ray_session), as `specula replay --ray-address`
    # does; without py_modules the actors could not unpickle Doubled
    mine = _user_module(tmp_path)
    graph = Graph(example_registry(), sources=("C",))
    graph.add("doubled", mine.Doubled(), k0=3_000)
    raw = abc_stream(example_registry(), 1_000, seed=2, max_delay=20)
    ray.shutdown()  # leave the fixture's connection: the run connects on its own
    try:
        report = RayRuntime(graph, address=three_nodes.address).run(raw, batch_rows=200)
    finally:
        ray.init(address=three_nodes.address, configure_logging=False, log_to_driver=False)
    reference = InProcessRuntime(graph).run(raw, step_ticks=50)
    assert content(canonical(report.net("doubled"))) == content(
        canonical(reference.net("doubled")))
    assert len(report.net("doubled")) > 100
