"""Declaring a graph of detectors: nodes wired by event type (publish/subscribe).

>>> from specula.events import TypeRegistry
>>> from specula.detectors import Detector
>>> class Copy(Detector):
...     inputs, outputs = ("x",), ("y",)
...     def on_event(self, event, emit):
...         emit("y", event.ts)
>>> reg = TypeRegistry(); _ = reg.register("x"); _ = reg.register("y")
>>> g = Graph(reg, sources=("x",)).add("copy", Copy(), alpha="adaptive")
>>> [n.name for n in g.topological_order()]
['copy']
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, Unpack

import numpy as np

from specula import events as ev
from specula.detectors.base import Detector
from specula.events import TypeRegistry
from specula.options import (
    DEFAULT_K0_SECONDS,
    NODE_OPTIONS,
    MemoryLimit,
    NodeOptions,
    OptionError,
    Shedding,
    check_option,
    node_options,
)
from specula.ordering.adaptation import AlphaController
from specula.ordering.unit import LatePolicy, OrderingUnit, RetractionMode

Alpha = float | Literal["adaptive"]


class GraphError(ValueError):
    """A graph that cannot run; the message says what to change."""


@dataclass(frozen=True)
class Node:
    """One detector of a graph with the settings of its ordering unit and its actors:
    the node options of :data:`specula.options.NODE_OPTIONS`, with ``k0`` and ``gpus``
    resolved (:meth:`Graph.add` makes nodes)."""

    name: str
    detector: Detector
    alpha: Alpha
    retraction: RetractionMode
    late: LatePolicy
    k0: int
    idle_after: int | None
    partitions: int
    shedding: Shedding | None
    cpus: float
    gpus: float
    chain: bool
    memory: MemoryLimit

    @property
    def inputs(self) -> tuple[str, ...]:
        return tuple(self.detector.inputs)

    @property
    def outputs(self) -> tuple[str, ...]:
        return tuple(self.detector.outputs)

    @property
    def clock(self) -> tuple[str, ...]:
        return self.detector.clock_types()


@dataclass(frozen=True)
class Instance:
    """One running copy of a node: partition ``index`` of ``node.partitions``.

    ``channels`` clock the instance's unit: the producer ids of the instances that
    publish any of the node's inputs, and 0 if some clock type is a raw source. With a
    producer among them the unit is clocked by the low watermark of their punctuations
    and of its raw clock events (:class:`~specula.ordering.clock.ChannelClock`); with
    raw ones only, by its clock events, as in the paper.
    """

    node: Node
    index: int
    producer: int
    channels: tuple[int, ...] = ()

    @property
    def label(self) -> str:
        return self.node.name if self.node.partitions == 1 else f"{self.node.name}[{self.index}]"

    def unit(self, registry: TypeRegistry, *, controller: AlphaController | None = None,
             trace: bool = False) -> OrderingUnit:
        """A fresh ordering unit around a copy of the node's detector."""
        node = self.node
        alpha: float | AlphaController = 1.0
        if node.alpha == "adaptive":
            alpha = controller if controller is not None else AlphaController()
        else:
            alpha = float(node.alpha)
        return OrderingUnit(copy.deepcopy(node.detector), registry, producer=self.producer,
                            inputs=node.inputs, outputs=node.outputs, clock=node.clock,
                            alpha=alpha, retraction=node.retraction, late=node.late,
                            k0=node.k0, trace=trace, name=self.label, channels=self.channels,
                            memory=node.memory)

    def warm_up(self, registry: TypeRegistry) -> None:
        """Run throw-away units on zero events, two per input type, and a punctuation of
        each producer channel (and of the raw stream's clock, which a partition or a node
        with ``idle_after`` is handed: :meth:`~specula.actors.routing.Router.piece`), so
        that the unit's and the detector's Numba kernels are loaded before the stream
        starts: the first kernel a process loads costs ~0.7 s, each one after it ~10 ms.
        A cold actor lags its siblings, and on a fast replay that lag turns into
        event-time skew where they meet.

        Numba compiles a kernel once per array type, and a batch's fields differ in two
        ways: Ray hands an actor its pushes read-only, and the fields of a one-row batch
        are contiguous where longer ones are strided. So the probes take the whole batch,
        its first row alone and its last row alone, each writeable and read-only."""
        ids = [registry.id(t) for t in self.node.inputs] * 2  # never a one-row batch
        raw_clock = self.node.partitions > 1 or self.node.idle_after is not None
        producers = [c for c in self.channels if c != 0 or raw_clock]
        probe = self.unit(registry)
        batch = np.zeros(len(ids) + len(producers), probe.in_dtype)
        batch["type"][:len(ids)] = ids
        batch["ts"] = np.arange(len(batch))
        batch["seq"][:len(ids)] = np.arange(len(ids))
        batch["producer"][len(ids):] = producers
        batch["flags"][len(ids):] = ev.PROGRESS
        for part in (batch, batch[:1], batch[-1:]):
            for writeable in (True, False):
                probe = self.unit(registry)
                rows = part.copy()
                rows.flags.writeable = writeable
                try:
                    probe.push(rows)
                    probe.flush()
                except Exception:
                    pass


def _checked(node: Node) -> Node:
    """``node``, if its options combine: :class:`~specula.options.OptionError` for a
    combination that could not run, saying what to change.

    ``Shedding(strategy="detector")`` needs a detector that sheds inside itself
    (``on_drop_command`` and ``pairs_shed``, as :mod:`specula.shedding` defines them); the
    detector refuses what else it cannot take (:meth:`Detector.check_node_options`)."""
    shedding = node.shedding
    if shedding is not None and shedding.strategy == "detector" and not all(
            callable(getattr(node.detector, m, None)) for m in ("on_drop_command",
                                                               "pairs_shed")):
        raise OptionError(
            f"{node.name}: shedding strategy 'detector' needs a detector that sheds inside "
            f"itself (on_drop_command and pairs_shed, e.g. specula.shedding.WindowDetector); "
            f"{type(node.detector).__name__} has not: use Shedding(strategy='random') or "
            f"another InputShedder")
    options = {name: getattr(node, name) for name in NODE_OPTIONS}
    node.detector.check_node_options(options, where=node.name)
    return node


class Graph:
    """Detectors wired by the event types they declare.

    ``sources`` are the raw event types that come from outside (sensor logs); every
    other input type must be the output of some detector. The unit of the events' time
    stamps is the registry's (:attr:`TypeRegistry.ticks_per_second`).
    """

    def __init__(self, registry: TypeRegistry, *, sources: Iterable[str]) -> None:
        self.registry = registry
        # tuple("ball") would be the four sources b, a, l, l
        try:
            if isinstance(sources, str):
                raise TypeError
            self.sources = tuple(sources)
        except TypeError:  # not iterable (a 0-d array says so only when iterated)
            raise GraphError(f"sources must be a collection of event type names, got "
                             f"{sources!r}; e.g. sources=({sources!r},)") from None
        for t in self.sources:
            if not isinstance(t, str):
                raise GraphError(f"sources must be event type names, got {t!r}")
        self.nodes: dict[str, Node] = {}

    def add(self, name: str, detector: Detector, **options: Unpack[NodeOptions]) -> Graph:
        """Add a detector under a unique ``name``; returns the graph for chaining.

        ``options`` are node options; :data:`specula.options.NODE_OPTIONS` says what
        each means, its default and the values it takes, and checks them (an
        :class:`~specula.options.OptionError` names the node, the option and what it
        can be). In short: ``alpha``, ``retraction`` and ``late`` set the node's
        ordering unit; ``k0`` (the initial K) and ``idle_after`` are in ticks; a node
        clocked by raw events whose clock types have been silent for ``idle_after``
        ticks of the stream's time follows the stream's clock that far behind
        (:mod:`specula.ordering.clock`). ``partitions > 1`` runs that many instances of
        the detector, each on the events whose key hashes to its index
        (:func:`~specula.events.hashing.partition_of`; counter messages reach all of
        them): for detectors whose state is per key, e.g. one per player. ``shedding``
        (a :class:`~specula.options.Shedding`) gives each instance a latency bound that
        it keeps by dropping input when overloaded (:mod:`specula.shedding`).
        ``memory`` (a :class:`~specula.options.MemoryLimit`) bounds what each
        instance's ordering unit holds (:mod:`specula.ordering.memory`). ``cpus`` and
        ``gpus`` are what each instance's actor asks Ray for (``gpus`` by default what
        the detector declares, :attr:`Detector.num_gpus
        <specula.detectors.Detector.num_gpus>`;
        :func:`~specula.actors.placement.check_fits` refuses a graph that asks for more
        than the cluster has). ``chain=False`` keeps each instance in an actor of its
        own when the Ray runtime chains instances (:mod:`~specula.actors.chaining`).
        """
        if not isinstance(name, str) or not name:
            raise GraphError(f"a detector's name must be a non-empty string, got {name!r}")
        if name in self.nodes:
            raise GraphError(f"a detector named {name!r} is already in the graph; "
                             "give each detector its own name")
        if isinstance(detector, type) and issubclass(detector, Detector):
            raise GraphError(f"{name}: got the class {detector.__name__}, not a detector; "
                             f"pass an instance: add({name!r}, {detector.__name__}())")
        if not isinstance(detector, Detector):
            raise GraphError(f"{name}: expected a Detector instance, got "
                             f"{type(detector).__name__}")
        resolved = self._resolve(name, detector, node_options(where=name, **options))
        self.nodes[name] = _checked(Node(name, detector, **resolved))
        return self

    def _resolve(self, name: str, detector: Detector, options: dict[str, Any]
                 ) -> dict[str, Any]:
        """``options`` with the defaults that depend on the graph or the detector filled
        in: ``k0=None`` is :data:`~specula.options.DEFAULT_K0_SECONDS` in the registry's
        ticks, ``gpus=None`` what the detector declares."""
        if "k0" in options and options["k0"] is None:
            options["k0"] = int(DEFAULT_K0_SECONDS * self.ticks_per_second)
        if "gpus" in options and options["gpus"] is None:
            options["gpus"] = float(check_option("gpus", detector.num_gpus, where=name))
        return options

    def with_options(self, nodes: Iterable[str] | None = None,
                     **options: Unpack[NodeOptions]) -> Graph:
        """A copy of the graph whose nodes (all, or those named in ``nodes``) have
        ``options`` instead of their own.

        The options are those of :data:`specula.options.NODE_OPTIONS`, checked there
        with the node's name in the message; ``k0=None`` is the default K and
        ``gpus=None`` what the detector declares, as in :meth:`add`. The copy shares
        the detectors (every run copies them) and leaves this graph as it is.

        >>> from specula.detectors.examples import Threshold, example_registry
        >>> g = Graph(example_registry(), sources=("C",)).add("big_c", Threshold())
        >>> g.with_options(alpha=0.5).nodes["big_c"].alpha, g.nodes["big_c"].alpha
        (0.5, 1.0)
        """
        names = list(self.nodes) if nodes is None else list(nodes)
        for name in names:
            if name not in self.nodes:
                raise GraphError(f"no detector named {name!r} in the graph; it has "
                                 f"{', '.join(self.nodes) or 'none'}")
        out = Graph(self.registry, sources=self.sources)
        out.nodes = dict(self.nodes)
        for name in names:
            given = {o: check_option(o, v, where=name) for o, v in options.items()}
            given = self._resolve(name, self.nodes[name].detector, given)
            out.nodes[name] = _checked(dataclasses.replace(self.nodes[name], **given))
        return out

    def levels(self) -> dict[str, int]:
        """Each node's level: 1 if it hears only sources, else one more than the highest
        level among the producers of its inputs."""
        level: dict[str, int] = {}
        for node in self.topological_order():
            level[node.name] = 1 + max((level[p.name] for t in node.inputs
                                        for p in self.producers_of(t)), default=0)
        return level

    @property
    def ticks_per_second(self) -> float:
        """Time-stamp ticks per second, as the registry declares them."""
        return self.registry.ticks_per_second

    def instances(self) -> list[Instance]:
        """Every detector instance in topological order, with its producer id (from 1) and
        the producers whose progress clocks it."""
        out: list[Instance] = []
        for node in self.topological_order():
            channels = {0} if set(node.clock) & set(self.sources) else set()
            channels |= {i.producer for i in out if set(node.inputs) & set(i.node.outputs)}
            for i in range(node.partitions):
                out.append(Instance(node, i, len(out) + 1, tuple(sorted(channels))))
        return out

    def producers_of(self, type_name: str) -> list[Node]:
        return [n for n in self.nodes.values() if type_name in n.outputs]

    def validate(self) -> None:
        """Raise :class:`GraphError` for unknown types, unproduced inputs, clock types that
        are not inputs, and cycles."""
        for t in self.sources:
            if t not in self.registry:
                raise GraphError(f"source type {t!r} is not registered; register it first")
        for n in self.nodes.values():
            for t in (*n.inputs, *n.outputs):
                if t not in self.registry:
                    raise GraphError(f"{n.name}: event type {t!r} is not registered")
            for t in n.inputs:
                if t not in self.sources and not self.producers_of(t):
                    raise GraphError(f"{n.name}: nobody produces its input {t!r}; add a detector "
                                     f"that outputs it or list it in sources")
            missing = set(n.clock) - set(n.inputs)
            if missing:
                raise GraphError(f"{n.name}: clock types {sorted(missing)} are not among its "
                                 f"inputs {list(n.inputs)}")
            if not n.inputs:
                raise GraphError(f"{n.name}: declares no inputs")
        self.topological_order()

    def topological_order(self) -> list[Node]:
        """Nodes so that every producer comes before its subscribers."""
        order: list[Node] = []
        state: dict[str, int] = {}

        def visit(node: Node, path: list[str]) -> None:
            if state.get(node.name) == 2:
                return
            if state.get(node.name) == 1:
                cycle = " -> ".join([*path[path.index(node.name):], node.name])
                raise GraphError(f"cycle in the graph: {cycle}; a detector cannot consume "
                                 "what it (indirectly) produces")
            state[node.name] = 1
            for t in node.inputs:
                for p in self.producers_of(t):
                    visit(p, [*path, node.name])
            state[node.name] = 2
            order.append(node)

        for node in self.nodes.values():
            visit(node, [])
        return order
