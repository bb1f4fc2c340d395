"""Where a graph's actors go on a Ray cluster: what each asks for, whether the graph
fits, and how the instances of one node spread.

Every instance of a node runs in one actor that asks Ray for the node's ``cpus`` and
``gpus`` (node options; ``gpus`` by default what its detector declares,
``Detector.num_gpus``). Before any actor starts,
:func:`check_fits` compares the graph's demand with the cluster: the total against the
cluster's resources, and each actor against the largest node (an actor cannot span
nodes); a graph that cannot fit is refused with what it asks for and what there is,
rather than left waiting for resources that never come. The instances of a node with
several partitions are spread over the nodes (Ray's ``SPREAD`` strategy), so that a
partitioned detector uses the cluster instead of one machine. Where each actor ran is
in the run report (``DetectorReport.hosts``).
"""

from __future__ import annotations

import socket
from collections.abc import Mapping, Sequence
from typing import Any

from specula.detectors.graph import Graph, GraphError, Instance

__all__ = ["PlacementError", "actor_options", "chain_options", "check_fits", "demand",
           "this_host"]


class PlacementError(GraphError):
    """A graph whose actors ask for more than the cluster has."""


def demand(instance: Instance) -> dict[str, float]:
    """What the actor of ``instance`` asks Ray for: ``CPU`` and ``GPU`` (zero ones left
    out).

    >>> from specula.detectors.examples import Threshold, example_registry
    >>> g = Graph(example_registry(), sources=("C",)).add("big_c", Threshold(), cpus=0.5)
    >>> demand(g.instances()[0])
    {'CPU': 0.5}
    """
    asked = {"CPU": float(instance.node.cpus), "GPU": float(instance.node.gpus)}
    return {k: v for k, v in asked.items() if v > 0}


def actor_options(instance: Instance) -> dict[str, Any]:
    """Ray options of the actor that runs ``instance``: its demand, and the ``SPREAD``
    strategy for a node of several partitions.

    >>> from specula.detectors.examples import Threshold, example_registry
    >>> g = Graph(example_registry(), sources=("C",)).add("big_c", Threshold())
    >>> actor_options(g.instances()[0])
    {}
    """
    asked = demand(instance)
    options: dict[str, Any] = {}
    if "CPU" in asked:
        options["num_cpus"] = asked["CPU"]
    if "GPU" in asked:
        options["num_gpus"] = asked["GPU"]
    if instance.node.partitions > 1:
        options["scheduling_strategy"] = "SPREAD"
    return options


def chain_options(chain: Sequence[Instance], node: str | None = None) -> dict[str, Any]:
    """Ray options of the actor that runs the instances of ``chain`` (:mod:`.chain`):
    those of its instance if it is alone and asks for something. Otherwise the actor asks
    for nothing (an instance that asks for CPUs or GPUs runs alone, :mod:`.chaining`),
    and Ray would leave it on the node that creates it: it goes to ``node`` (the runtime
    deals the chains over the nodes; soft, so a restart finds another node if that one
    is gone), or spreads where no node is given. The policy forms about one chain per
    CPU of the cluster, so chains belong on different nodes where there are several."""
    options = actor_options(chain[0]) if len(chain) == 1 else {}
    if options:
        return options
    if node is None:
        return {"scheduling_strategy": "SPREAD"}
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node, soft=True)}


def check_fits(graph: Graph, total: Mapping[str, float],
               nodes: Sequence[Mapping[str, float]]) -> None:
    """Raise :class:`PlacementError` unless the actors of ``graph`` fit a cluster whose
    resources are ``total`` and, per node, ``nodes`` (as ``ray.cluster_resources()``
    and the ``Resources`` of ``ray.nodes()`` give them).

    >>> from specula.detectors.examples import Threshold, example_registry
    >>> g = Graph(example_registry(), sources=("C",)).add("big_c", Threshold(), cpus=1.5,
    ...                                                   partitions=2)
    >>> check_fits(g, {"CPU": 2.0}, [{"CPU": 1.0}, {"CPU": 1.0}])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    specula.actors.placement.PlacementError: the graph's actors ask for 3 CPU, the cluster...
    """
    per_node: dict[str, tuple[int, dict[str, float]]] = {}
    for instance in graph.instances():
        count, _ = per_node.get(instance.node.name, (0, demand(instance)))
        per_node[instance.node.name] = (count + 1, demand(instance))
    problems: list[str] = []
    short: list[str] = []
    for resource, option in (("CPU", "cpus="), ("GPU", "gpus=")):
        before = len(problems)
        asked = {name: (n, d[resource]) for name, (n, d) in per_node.items() if resource in d}
        need = sum(n * each for n, each in asked.values())
        have = float(total.get(resource, 0.0))
        if need > have + 1e-9:
            biggest = sorted(asked.items(), key=lambda kv: -kv[1][0] * kv[1][1])[:3]
            listed = ", ".join(f"{name}: {n} x {_num(each)}" for name, (n, each) in biggest)
            problems.append(f"the graph's actors ask for {_num(need)} {resource}, the "
                            f"cluster has {_num(have)} ({listed})")
        largest = max((float(node.get(resource, 0.0)) for node in nodes), default=0.0)
        for name, (_, each) in asked.items():
            if each > largest + 1e-9:
                problems.append(f"an actor of {name} asks for {_num(each)} {resource}, more "
                                f"than any node has ({_num(largest)})")
        short += [option] if len(problems) > before else []
    if problems:
        raise PlacementError("; and ".join(problems) + f"; lower the nodes' "
                             f"{' and '.join(short)} or grow the cluster")


def _num(value: float) -> str:
    return f"{value:g}"


def this_host() -> str:
    """Where the calling actor runs: its node's address and the start of Ray's node id
    (the host name outside Ray)."""
    import ray

    if not ray.is_initialized():
        return socket.gethostname()
    node = ray.get_runtime_context().get_node_id()
    return f"{ray.util.get_node_ip_address()} {node[:8]}"
