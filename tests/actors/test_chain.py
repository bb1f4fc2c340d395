"""Chained instances (:mod:`specula.actors.chain`) give the answers of the in-process
runtime, whatever the grouping; and the chaining policy (:mod:`specula.actors.chaining`)
keeps its rules.

The runs here are the Ray runtime's driver over chain workers in this process, without
Ray: a chain actor is a :class:`ChainWorker` whose Ray calls run on a thread pool (as a
threaded Ray actor runs them, in any order), while its members hand batches to each
other in memory, as on Ray. The graphs come from ``tests/graph_shapes.py`` and the
chain plans are random (any grouping, partitions of one node together included) and "auto"'s.
"""

from __future__ import annotations

import random
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
from graph_shapes import Echo, seeded_case, shape_registry
from naive import canonical, content

from specula import Graph, InProcessRuntime
from specula.actors import channels
from specula.actors.addresses import InstanceHandle, Member
from specula.actors.chain import ChainWorker, LocalHandle
from specula.actors.chaining import chainable, close_chains, plan_chains
from specula.actors.ray_runtime import Delivery, RayRuntime, chain_member
from specula.actors.routing import Router
from specula.actors.sources import Pace
from specula.detectors.graph import Instance
from specula.options import OptionError


class _Call:
    def __init__(self, actor: ThreadedChain) -> None:
        self.actor = actor

    def remote(self, producer: int, method: str, *args: Any) -> Future:
        assert self.actor.worker is not None
        return self.actor.pool.submit(self.actor.worker.call, producer, method, *args)


class ThreadedChain:
    """A chain actor without Ray: ``call.remote(...)`` runs on a thread pool."""

    def __init__(self, pool: ThreadPoolExecutor) -> None:
        self.pool = pool
        self.worker: ChainWorker | None = None

    @property
    def call(self) -> _Call:
        return _Call(self)

    @property
    def push_all(self) -> _PushAll:
        return _PushAll(self)

    @property
    def deliver(self) -> _Deliver:
        return _Deliver(self)


class _PushAll(_Call):
    def remote(self, *args: Any) -> Future:
        assert self.actor.worker is not None
        return self.actor.pool.submit(self.actor.worker.push_all, *args)


class _Deliver(_Call):
    def remote(self, *args: Any) -> Future:
        assert self.actor.worker is not None
        return self.actor.pool.submit(self.actor.worker.deliver, *args)


def random_plan(graph: Graph, rng: random.Random) -> list[list[str]]:
    """Every instance in one of 1..n chains at random (a node that may not share an
    actor alone), the chains then closed (:func:`close_chains`)."""
    chained = [i for i in graph.instances() if chainable(i.node)]
    n = rng.randint(1, max(1, len(chained)))
    groups: list[list[Instance]] = [[] for _ in range(n)]
    for i in chained:
        groups[rng.randrange(n)].append(i)
    alone = [[i] for i in graph.instances() if not chainable(i.node)]
    closed = close_chains(graph, [g for g in groups if g] + alone)
    return [[i.label for i in g] for g in closed]


def chained_run(graph: Graph, raw: Any, plan: Any, monkeypatch: pytest.MonkeyPatch,
                batch_rows: int = 5) -> Any:
    """Run ``graph`` with the Ray runtime's driver over the chains of ``plan``."""
    rt = RayRuntime(graph, chaining=plan, max_in_flight=2)
    router = Router(graph)
    chains = plan_chains(graph, plan, 2)
    names = [f"chain-{k}" for k in range(len(chains))]
    address = {i.producer: Member(name, i.producer)
               for name, chain in zip(names, chains, strict=True) for i in chain}
    pool = ThreadPoolExecutor(256)
    actors = {name: ThreadedChain(pool) for name in names}
    monkeypatch.setattr(channels, "named_actor", actors.__getitem__)
    for name, chain in zip(names, chains, strict=True):
        actors[name].worker = ChainWorker(
            name, name, [chain_member(graph, router, address, i, {}) for i in chain],
            graph.registry, 2, 200_000, router=router, step_events=50, threads=64)
    handles = {p: InstanceHandle(actors[m.chain], p) for p, m in address.items()}
    of_node = {n: [i for i in graph.instances() if i.node.name == n] for n in graph.nodes}
    try:
        fed, wall, _, reports = rt._drive(raw, None, router, of_node, handles, {},
                                          Delivery(None, batch_rows, Pace(None, 1.0)))
    finally:
        for chain in actors.values():
            if chain.worker is not None:
                chain.worker.close()
        pool.shutdown(wait=False, cancel_futures=True)
    return rt._report(reports, fed, wall)


def shape_cases(n: int) -> list:
    found, seed = [], 0
    while len(found) < n:
        case = seeded_case(seed, modes=("full", "on-demand"), max_events=60)
        if len(case.nodes) >= 2:
            found.append(pytest.param(case.nothing_late(), seed, id=f"seed{seed}"))
        seed += 1
    return found


@pytest.mark.parametrize(("case", "seed"), shape_cases(12))
def test_any_chain_plan_gives_the_in_process_answer(case, seed, monkeypatch):
    graph = case.graph()
    raw = case.raw(graph.registry)
    here = InProcessRuntime(graph).run(raw, step_ticks=case.step_ticks)
    rng = random.Random(seed)
    auto = [[i.label for i in c] for c in plan_chains(graph, "auto", rng.randint(2, 4))]
    for plan in (random_plan(graph, rng), random_plan(graph, rng), auto):
        chained = chained_run(graph, raw, plan, monkeypatch)
        for name in graph.nodes:
            assert len(chained.late(name)) == len(here.late(name)) == 0, name
            assert content(canonical(chained.net(name))) == \
                content(canonical(here.net(name))), (name, plan, case)
        members = {label: f"chain-{k}" for k, g in enumerate(plan_chains(graph, plan, 2))
                   for label in (i.label for i in g)}
        for name, det in chained.detectors.items():
            labels = [i.label for i in graph.instances() if i.node.name == name]
            assert det.chains == [members[label] for label in labels]


def shaped_graph(partitions: int = 3, cpus: float = 0.0, chain: bool = True) -> Graph:
    """first (raw) -> parted (partitioned) and apart; asks (raw, with a CPU request)."""
    g = Graph(shape_registry(), sources=("A", "B", "C"))
    g.add("first", Echo(("A",), ("T0",)))
    g.add("parted", Echo(("T0",), ("T1",)), partitions=partitions)
    g.add("asks", Echo(("B",), ("T2",)), cpus=cpus)
    g.add("apart", Echo(("T0",), ("T3",)), chain=chain)
    return g


def test_a_chain_hands_batches_over_in_memory(monkeypatch):
    """Inside a chain a consumer is reached by a local handle (its push on the chain's
    pool, the batch read-only), never by the chain actor's Ray call."""
    graph = shaped_graph(partitions=1)
    router = Router(graph)
    address = {i.producer: Member("c", i.producer) for i in graph.instances()}
    worker = ChainWorker("c", "c", [chain_member(graph, router, address, i, {})
                                    for i in graph.instances()],
                         graph.registry, 2, 1_000, router=router, step_events=50, threads=4)
    first, parted = graph.instances()[:2]
    route = worker.worker(first.producer).routes[0]
    handle = worker.worker(first.producer).peers(route.actors[0])
    assert isinstance(handle, LocalHandle) and handle.producer == parted.producer
    seen = []

    def push(self, batch, *args, wait=True):
        seen.append((batch.flags.writeable, wait, threading.current_thread()))
        return channels.Reply(0, 0, 1)

    monkeypatch.setattr(type(worker.worker(parted.producer)), "push", push)
    reply = handle.push.remote(np.zeros(3, graph.registry.dtype(("T0",))), 1, 0).result()
    # taken at once, in the caller's thread: no push waits in the inbox's way
    assert reply == (0, 0, 1) and seen == [(False, False, threading.current_thread())]


class _Chain:
    """A chain actor that answers ``push_all`` at once and records its calls."""

    def __init__(self, pool: ThreadPoolExecutor) -> None:
        self.pool, self.calls = pool, []

    @property
    def push_all(self) -> _Chain:
        return self

    def remote(self, members: list, batch: Any, sender: int, incarnation: int) -> Future:
        self.calls.append([(p, n) for p, n, _ in members])
        return self.pool.submit(lambda: [channels.Reply(0, 0, n + 1) for _, n, _ in members])


def test_a_raw_batch_enters_a_chain_once_for_all_its_members_that_take_it():
    """Publisher.send_all: one call per chain actor, each member's push numbered as its
    own would be, the window kept per member."""
    with ThreadPoolExecutor(4) as pool:
        one, other = _Chain(pool), _Chain(pool)
        publisher = channels.Publisher(2)
        chs = [publisher.channel(p, InstanceHandle(one, p)) for p in (1, 2, 3)]
        chs.append(publisher.channel(4, InstanceHandle(other, 4)))
        for _ in range(5):
            publisher.send_all(chs, np.zeros(3))
        publisher.drain()
    assert one.calls == [[(1, n), (2, n), (3, n)] for n in range(5)]
    assert other.calls == [[(4, n)] for n in range(5)]
    assert [ch.sent for ch in chs] == [5] * 4 and publisher.sent_batches == 20
    assert publisher.in_flight() == 0


@pytest.mark.parametrize("cpus", [1, 2, 3, 8])
def test_auto_forms_at_most_a_chain_per_cpu_and_keeps_its_rules(cpus):
    g = shaped_graph(partitions=2, cpus=0.5, chain=False)
    chains = plan_chains(g, "auto", cpus)
    labels = sorted(i.label for c in chains for i in c)
    assert labels == sorted(i.label for i in g.instances())  # each once
    alone = [c for c in chains if any(not chainable(i.node) for i in c)]
    assert all(len(c) == 1 for c in alone) and len(alone) == 2  # asks, apart
    shared = [c for c in chains if c not in alone]
    assert len(shared) <= max(cpus - len(alone), 2)  # 2: the partitions of "parted"
    for c in chains:  # the partitions of a node in different chains
        names = [i.node.name for i in c]
        assert len(names) == len(set(names))


def test_none_is_an_actor_per_instance_and_a_plan_is_checked():
    g = shaped_graph()
    assert [len(c) for c in plan_chains(g, "none", 2)] == [1] * len(g.instances())
    everyone = [i.label for i in g.instances()]
    assert len(plan_chains(g, [everyone], 2)) == 1
    with pytest.raises(OptionError, match="leaves out"):
        plan_chains(g, [everyone[:-1]], 2)
    with pytest.raises(OptionError, match="in two chains"):
        plan_chains(g, [everyone, everyone[:1]], 2)
    with pytest.raises(OptionError, match="no instance"):
        plan_chains(g, [[*everyone, "nobody"]], 2)
    asks = shaped_graph(cpus=0.5)
    with pytest.raises(OptionError, match="asks for CPUs"):
        RayRuntime(asks, chaining=[everyone])
    with pytest.raises(OptionError, match="chaining must be"):
        RayRuntime(g, chaining="some")


def test_a_chain_that_is_not_closed_is_refused_and_auto_closes_its_chains():
    """A member taking a chain-mate's output must hand all its output to chain-mates:
    else a crash of the chain loses determinants a consumer outside depends on."""
    g = Graph(shape_registry(), sources=("A",))
    g.add("first", Echo(("A",), ("T0",))).add("mid", Echo(("T0",), ("T1",)))
    g.add("last", Echo(("T1",), ("T2",)))
    with pytest.raises(OptionError, match="could not regenerate"):
        plan_chains(g, [["first", "mid"], ["last"]], 2)
    assert len(plan_chains(g, [["first"], ["mid", "last"]], 2)) == 2
    assert len(plan_chains(g, "auto", 3)) == 1  # a pipeline: one closed chain
    rng = random.Random(5)
    for seed in range(40):
        case = seeded_case(seed, modes=("on-demand",), max_events=10)
        graph = case.graph()
        for chains in (plan_chains(graph, "auto", rng.randint(1, 4)),
                       plan_chains(graph, random_plan(graph, rng), 2)):
            where = {i.producer: k for k, c in enumerate(chains) for i in c}
            for k, chain in enumerate(chains):
                for m in chain:
                    fed_inside = any(set(p.node.outputs) & set(m.node.inputs)
                                     for p in chain if p is not m)
                    outside = [c for c in graph.instances() if where[c.producer] != k
                               and set(m.node.outputs) & set(c.node.inputs)]
                    assert not (fed_inside and outside), (chains, m.label)


def test_auto_gives_raw_fed_leaves_a_chain_of_their_own():
    """The placement puts ``mid`` with ``left`` and ``top`` with ``right``; closing then
    merges the two (``mid``, fed by a chain-mate, hands on to ``top``), leaves and all,
    as the soccer hierarchy's ``hits`` merged everything into one chain. The leaves no
    detector consumes, fed by sources only, are closed groups of their own and get the
    second CPU rather than the hierarchy's."""
    g = Graph(shape_registry(), sources=("A", "B"))
    g.add("left", Echo(("A",), ("T0",))).add("right", Echo(("B",), ("T1",)))
    g.add("leaf", Echo(("A",), ("T2",))).add("other_leaf", Echo(("B",), ("T3",)))
    g.add("mid", Echo(("T0",), ("T4",))).add("top", Echo(("T4", "T1"), ("T5",)))
    labels = [[i.label for i in c] for c in plan_chains(g, "auto", 2)]
    assert labels == [["left", "right", "mid", "top"], ["leaf", "other_leaf"]]
    assert sorted([i.label for i in c] for c in plan_chains(g, "auto", 3)) == [
        ["leaf"], ["left", "right", "mid", "top"], ["other_leaf"]]
    assert len(plan_chains(g, "auto", 1)) == 1


def test_auto_moves_a_head_to_the_chain_its_consumers_wait_on_already():
    """``mid`` takes ``left``'s and ``right``'s output: placed with ``left``, it waits on
    ``right``'s chain anyway, so ``left`` joins ``right`` there and the chain of ``mid``
    and ``top`` loses a member (benchmarks/ray_graph.py's graph). A head whose
    consumers take nothing from the other chain stays (the previous test's)."""
    g = Graph(shape_registry(), sources=("A", "B"))
    g.add("left", Echo(("A",), ("T0",))).add("right", Echo(("B",), ("T1",)))
    g.add("mid", Echo(("T0", "T1"), ("T2",))).add("top", Echo(("T2",), ("T3",)))
    labels = [[i.label for i in c] for c in plan_chains(g, "auto", 2)]
    assert labels == [["mid", "top"], ["left", "right"]]
    assert len(plan_chains(g, "auto", 1)) == 1
