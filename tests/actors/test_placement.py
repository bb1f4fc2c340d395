"""What a graph's actors ask Ray for, and the refusal of a graph that cannot fit."""

from __future__ import annotations

import pytest

from specula import Graph
from specula.actors.placement import (
    PlacementError,
    actor_options,
    chain_options,
    check_fits,
    demand,
)
from specula.detectors.examples import CountPerKey, Threshold, example_registry
from specula.options import OptionError


def graph(cpus: float = 0.0, partitions: int = 1) -> Graph:
    g = Graph(example_registry(), sources=("C",))
    g.add("big_c", Threshold(), cpus=0.25)
    g.add("per_key", CountPerKey(), cpus=cpus, partitions=partitions)
    return g


def test_actors_ask_for_their_cpus_and_partitions_spread():
    options = {i.label: actor_options(i) for i in graph(1.0, partitions=3).instances()}
    assert options["big_c"] == {"num_cpus": 0.25}
    assert {o["scheduling_strategy"] for k, o in options.items() if k != "big_c"} == {"SPREAD"}
    assert all(o["num_cpus"] == 1.0 for k, o in options.items() if k != "big_c")
    assert demand(graph().instances()[1]) == {}  # 0: not accounted, as Ray's default


def test_a_chain_spreads_unless_it_is_one_instance_that_asks():
    big_c, per_key = graph().instances()
    assert chain_options([big_c, per_key]) == {"scheduling_strategy": "SPREAD"}
    assert chain_options([big_c]) == actor_options(big_c) == {"num_cpus": 0.25}
    assert chain_options([per_key]) == {"scheduling_strategy": "SPREAD"}  # asks for nothing
    dealt = chain_options([big_c, per_key], node="a" * 56)["scheduling_strategy"]
    assert (dealt.node_id, dealt.soft) == ("a" * 56, True)
    assert chain_options([big_c], node="a" * 56) == {"num_cpus": 0.25}


def test_a_graph_that_fits_passes():
    check_fits(graph(1.0, partitions=3), {"CPU": 3.25}, [{"CPU": 2.0}, {"CPU": 1.25}])


@pytest.mark.parametrize(("total", "nodes", "message"), [
    ({"CPU": 3.0}, [{"CPU": 2.0}, {"CPU": 1.0}],
     "the graph's actors ask for 3.25 CPU, the cluster has 3 (per_key: 3 x 1, big_c: 1 x "
     "0.25); lower the nodes' cpus= or grow the cluster"),
    ({"CPU": 8.0}, [{"CPU": 0.5}] * 16,
     "an actor of per_key asks for 1 CPU, more than any node has (0.5); lower"),
])
def test_a_graph_that_cannot_fit_is_refused_with_what_it_asks_for(total, nodes, message):
    with pytest.raises(PlacementError) as info:
        check_fits(graph(1.0, partitions=3), total, nodes)
    assert message in str(info.value)


def test_gpus_count_too():
    g = Graph(example_registry(), sources=("C",)).add("per_key", CountPerKey(), gpus=1.0)
    assert actor_options(g.instances()[0]) == {"num_gpus": 1.0}
    with pytest.raises(PlacementError, match=r"ask for 1 GPU, the cluster has 0 .*; lower "
                                             r"the nodes' gpus= or grow"):
        check_fits(g, {"CPU": 4.0}, [{"CPU": 4.0}])


class NeedsAGpu(CountPerKey):
    num_gpus = 0.5


def test_gpus_default_to_what_the_detector_declares_and_the_node_option_overrides_it():
    g = Graph(example_registry(), sources=("C",))
    g.add("declared", NeedsAGpu()).add("set", NeedsAGpu(), gpus=0).add("plain", CountPerKey())
    assert {n.name: n.gpus for n in g.nodes.values()} == {"declared": 0.5, "set": 0,
                                                          "plain": 0.0}
    assert [demand(i) for i in g.instances()] == [{"GPU": 0.5}, {}, {}]
    assert g.with_options(["plain"], gpus=2).nodes["plain"].gpus == 2
    assert g.with_options(["set"], gpus=None).nodes["set"].gpus == 0.5


@pytest.mark.parametrize("option", ["cpus", "gpus"])
@pytest.mark.parametrize("bad", [-1, "1", float("nan"), 2000])
def test_cpus_and_gpus_are_checked_where_they_are_given(option, bad):
    with pytest.raises(OptionError, match=f"per_key: {option} must be .*number >= 0"):
        Graph(example_registry(), sources=("C",)).add("per_key", CountPerKey(),
                                                      **{option: bad})


def test_a_detector_that_declares_a_bad_gpu_need_is_named():
    class Odd(CountPerKey):
        num_gpus = "1"

    with pytest.raises(OptionError, match="odd: gpus must be None or a number >= 0"):
        Graph(example_registry(), sources=("C",)).add("odd", Odd())
