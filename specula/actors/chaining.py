"""Which instances share a chain actor (:mod:`.chain`): the Ray runtime's ``chaining``.

* ``"none"``: every instance in an actor of its own.
* ``"auto"``: at most as many chains as the CPUs Ray offers (more only where the rules
  below need them), built as Flink chains operators: an instance joins the chain of
  one of its producers (the least loaded), a level-1 instance the least loaded chain,
  and the instances of a partitioned node go to different chains. Closing (below) can
  then merge chains that share nothing but a closed consumer's reach, so each chain is
  split again into its connected groups (instances joined by a stream between them;
  splitting keeps it closed) and the groups packed, largest first, into the least
  loaded chain that stays closed: a group of raw-fed leaves no detector consumes gets a
  CPU of its own instead of sharing the hierarchy's. Last, a head of the largest chain
  whose consumers all wait on the smallest already moves there (:func:`_share_heads`).
  An instance of a node that asks Ray for CPUs or GPUs (``cpus=``, ``gpus``) or says
  ``chain=False`` runs in an actor of its own.
* an explicit plan: a list of chains, each a list of instance labels (``"name"``, or
  ``"name[i]"`` for partition ``i``); every instance in exactly one, those of the nodes
  above alone, and closed (below). Tests use it to try any grouping.

Every chain is *closed*: a member that takes the output of another member hands all
its own output to members. Recovery needs it. A chain restarts as a unit, and each
member's determinants (how it joined batches into steps, its alphas) live at its
consumers and in its mates' checkpoints (:mod:`.recovery`, "Chains"); those it logged
after the chain's last checkpoint are lost with it. Its outputs after that are then
regenerated on another timeline, which is harmless inside the chain (no restored
member holds them) but not where a member's output reached a consumer outside, which
holds pushes the restarted member must regenerate bit for bit.
``"auto"`` closes its chains (merging a consumer's chain in, or, where that would join
two partitions of a node, moving the member to a chain of its own); a plan that is not
closed is refused.
"""

from __future__ import annotations

from collections.abc import Sequence

from specula.detectors.graph import Graph, Instance, Node
from specula.options import OptionError

__all__ = ["chainable", "close_chains", "plan_chains"]


def chainable(node: Node) -> bool:
    """Whether ``node``'s instances may share an actor: no CPU or GPU request, and not
    ``chain=False``."""
    return node.chain and node.cpus == 0 and node.gpus == 0


def plan_chains(graph: Graph, chaining: str | Sequence[Sequence[str]], cpus: int
                ) -> list[list[Instance]]:
    """The chains of ``graph``'s instances under ``chaining`` (``"auto"``, ``"none"`` or
    an explicit plan, checked here) on a cluster of ``cpus`` CPUs; each chain in
    topological order."""
    order = _topological_instances(graph)
    if chaining == "none":
        return [[i] for i in order]
    if chaining == "auto":
        return _auto(graph, order, max(1, cpus))
    if isinstance(chaining, str):
        raise OptionError(f"RayRuntime: chaining must be 'auto', 'none' or a list of "
                          f"chains of instance labels; got {chaining!r}")
    return _explicit(graph, order, chaining)


def _topological_instances(graph: Graph) -> list[Instance]:
    of_node: dict[str, list[Instance]] = {}
    for i in graph.instances():
        of_node.setdefault(i.node.name, []).append(i)
    return [i for node in graph.topological_order() for i in of_node[node.name]]


def _auto(graph: Graph, order: list[Instance], cpus: int) -> list[list[Instance]]:
    solo = [[i] for i in order if not chainable(i.node)]
    rest = [i for i in order if chainable(i.node)]
    widest = max((i.node.partitions for i in rest), default=1)
    chains: list[list[Instance]] = [[] for _ in range(max(1, cpus - len(solo), widest))]
    where: dict[int, int] = {}  # producer id -> chain
    placed: dict[str, list[int]] = {}  # node -> the chains its instances went to

    def load(k: int) -> tuple[int, int]:
        return len(chains[k]), k

    for i in rest:
        name = i.node.name
        if i.node.partitions > 1:
            taken = placed.get(name, [])
            k = min((c for c in range(len(chains)) if c not in taken), key=load)
        else:
            ups = sorted({where[j.producer] for j in rest if j.producer in where
                          and _publishes(graph, j.node, i.node)}, key=load)
            k = ups[0] if ups else min(range(len(chains)), key=load)
        chains[k].append(i)
        where[i.producer] = k
        placed.setdefault(name, []).append(k)
    closed = close_chains(graph, [c for c in chains if c] + solo, keep_apart=True)
    shared = [c for c in closed if all(chainable(i.node) for i in c)]
    groups = [g for c in shared for g in _groups(graph, c)]
    packed = _share_heads(graph, _pack(graph, groups, len(chains)))
    return packed + [c for c in closed if c not in shared]


def _groups(graph: Graph, chain: list[Instance]) -> list[list[Instance]]:
    """``chain``'s connected groups: its members joined by a stream from one to another.
    Each is closed if ``chain`` is (a member fed by a chain-mate is in that one's group,
    and so are all its consumers, chain-mates by closure), and keeps its partitions
    apart if ``chain`` does."""
    groups: list[list[Instance]] = []
    left = list(chain)
    while left:
        group, grow = [left.pop(0)], 0
        while grow < len(group):
            m = group[grow]
            joined = [o for o in left if _publishes(graph, m.node, o.node)
                      or _publishes(graph, o.node, m.node)]
            group += joined
            left = [o for o in left if o not in joined]
            grow += 1
        groups.append(group)
    return groups


def _pack(graph: Graph, groups: list[list[Instance]], target: int) -> list[list[Instance]]:
    """``groups`` packed into ``target`` chains (more where no chain can take a group),
    the largest first into the least loaded chain that stays closed and keeps the
    partitions of a node apart."""
    chains: list[list[Instance]] = [[] for _ in range(target)]
    for group in sorted(groups, key=len, reverse=True):
        fits = [k for k in range(len(chains)) if _may_join(graph, chains[k] + group)]
        if fits:
            chains[min(fits, key=lambda k: (len(chains[k]), k))] += group
        else:
            chains.append(list(group))
    order = graph.instances().index
    return [sorted(c, key=order) for c in chains if c]


def _share_heads(graph: Graph, chains: list[list[Instance]]) -> list[list[Instance]]:
    """``chains`` evened out by moving heads: while the largest chain has at least two
    members more than the smallest, a head of it (no chain-mate feeds it) whose consumers
    all wait on the smallest chain already (each takes output of a member there) moves
    there, if that one stays closed and keeps partitions apart. Such a consumer's
    critical path crosses to the smallest chain either way, so the move takes work off
    the largest chain and adds no crossing to a path that had none (ray_graph's
    ``a_not_bc``, beside ``big_c``, both feeding ``d_then_e``); a head whose consumers
    had all their inputs in its chain (the soccer hierarchy's) stays."""
    chains = [list(c) for c in chains]
    order = graph.instances().index
    while len(chains) > 1:
        big = max(range(len(chains)), key=lambda k: (len(chains[k]), -k))
        small = min(range(len(chains)), key=lambda k: (len(chains[k]), k))
        if len(chains[big]) - len(chains[small]) < 2:
            break
        head = next((h for h in chains[big] if _movable_head(graph, h, chains[big],
                                                            chains[small])), None)
        if head is None:
            break
        chains[big].remove(head)
        chains[small] = sorted([*chains[small], head], key=order)
    return chains


def _movable_head(graph: Graph, head: Instance, chain: list[Instance],
                  other: list[Instance]) -> bool:
    """Whether ``head`` of ``chain`` may move to ``other`` (:func:`_share_heads`)."""
    if any(_publishes(graph, p.node, head.node) for p in chain if p is not head):
        return False
    consumers = [c for c in graph.instances() if _publishes(graph, head.node, c.node)]
    return bool(consumers) and all(
        any(_publishes(graph, o.node, c.node) for o in other) for c in consumers
    ) and _may_join(graph, [*other, head])


def _may_join(graph: Graph, chain: list[Instance]) -> bool:
    """Whether ``chain`` is closed and holds no two partitions of one node."""
    names = [i.node.name for i in chain if i.node.partitions > 1]
    if len(names) != len(set(names)):
        return False
    inside = {i.producer for i in chain}
    for m in chain:
        if any(_publishes(graph, p.node, m.node) for p in chain if p is not m) and any(
                c.producer not in inside and _publishes(graph, m.node, c.node)
                for c in graph.instances()):
            return False
    return True


def close_chains(graph: Graph, chains: list[list[Instance]], keep_apart: bool = False
                 ) -> list[list[Instance]]:
    """``chains`` made closed (the module's docstring): while a member with a producer
    in its chain has a consumer outside, the consumer's chain is merged in, or (if that
    would join two partitions of a node and ``keep_apart``, or join a node that must run
    alone) the member goes to a chain of its own."""
    chains = [list(c) for c in chains]
    alone: set[int] = set()  # moved out: never merged again (the loop ends)
    while (found := _open_member(graph, chains)) is not None:
        k, member, other = found
        merged = chains[k] + chains[other]
        names = [i.node.name for i in merged if i.node.partitions > 1]
        if all(chainable(i.node) and i.producer not in alone for i in merged) and not (
                keep_apart and len(names) != len(set(names))):
            chains[k] = merged
            del chains[other]
        else:
            chains[k].remove(member)
            chains.append([member])
            alone.add(member.producer)
    return [sorted(c, key=graph.instances().index) for c in chains]


def _open_member(graph: Graph, chains: list[list[Instance]]
                 ) -> tuple[int, Instance, int] | None:
    """A chain (its index), a member of it that takes another member's output and
    hands some of its own to an instance outside, and that instance's chain; None if
    every chain is closed."""
    where = {i.producer: k for k, c in enumerate(chains) for i in c}
    for k, chain in enumerate(chains):
        for m in chain:
            if not any(_publishes(graph, p.node, m.node) for p in chain if p is not m):
                continue
            for c in graph.instances():
                if where[c.producer] != k and _publishes(graph, m.node, c.node):
                    return k, m, where[c.producer]
    return None


def _publishes(graph: Graph, producer: Node, consumer: Node) -> bool:
    """Whether ``consumer`` subscribes to one of ``producer``'s outputs."""
    return bool(set(producer.outputs) & set(consumer.inputs))


def _explicit(graph: Graph, order: list[Instance], plan: Sequence[Sequence[str]]
              ) -> list[list[Instance]]:
    by_label = {i.label: i for i in order}
    seen: set[str] = set()
    chains: list[list[Instance]] = []
    for group in plan:
        if isinstance(group, str) or not group:
            raise OptionError(f"RayRuntime: each chain of chaining must be a non-empty list "
                              f"of instance labels; got {group!r}")
        for label in group:
            if label not in by_label:
                raise OptionError(f"RayRuntime: chaining names {label!r}, which is no "
                                  f"instance of the graph; they are {', '.join(by_label)}")
            if label in seen:
                raise OptionError(f"RayRuntime: chaining puts {label!r} in two chains")
            seen.add(label)
            node = by_label[label].node
            if len(group) > 1 and not chainable(node):
                raise OptionError(f"RayRuntime: chaining puts {label!r} in a chain with "
                                  "others, but its node asks for CPUs or GPUs or says "
                                  "chain=False: it runs in an actor of its own")
        rank = {label: n for n, label in enumerate(by_label)}
        chains.append([by_label[label] for label in sorted(group, key=rank.__getitem__)])
    missing = [label for label in by_label if label not in seen]
    if missing:
        raise OptionError(f"RayRuntime: chaining leaves out {', '.join(missing)}; every "
                          "instance must be in one chain")
    found = _open_member(graph, chains)
    if found is not None:
        _, member, other = found
        raise OptionError(
            f"RayRuntime: chaining puts {member.label} in a chain with a producer of its, "
            f"but it also hands output to {', '.join(i.label for i in chains[other])} "
            "outside that chain: a crash of the chain could not regenerate what that one "
            "holds (specula.actors.chaining); put them in one chain, or "
            f"{member.label} in another")
    return chains
