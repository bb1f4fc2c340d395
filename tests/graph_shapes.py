"""Random detector graphs of every shape, and random out-of-order streams for them.

A :class:`Case` is a graph of 2-4 levels of :class:`Spec` nodes over the small generic
detectors below, a raw stream with arrival times, and the step size of the in-process
runtime. Its ``repr`` is Python that rebuilds it, so a case Hypothesis found and shrank
can be pasted into a named test.

The generator draws every decision through a :class:`Chooser`: :class:`RngChooser`
(seeded NumPy, for sweeps and the Ray test) or :class:`DrawChooser` (inside Hypothesis,
so that failing cases shrink). Each choice lists its simplest option first, which is
where shrinking goes: one partition, pure K-slack, full retraction, nothing late.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Protocol, TypeVar

import numpy as np
from hypothesis import strategies as st

from specula.detectors import Detector, Emitter, EventView
from specula.detectors.graph import Alpha, Graph
from specula.events import TypeRegistry

RAW = ("A", "B", "C")
DERIVED = tuple(f"T{i}" for i in range(24))
#: k0 of a node: the first option (above any stream's span) makes nothing late.
K0S = (1000, 0, 2, 6, 20)
BATCH_TICKS = (0, 1, 4, 12)
#: 0: the stream as one array; else raw events per batch of an iterable
BATCH_ROWS = (0, 0, 1, 3)
T = TypeVar("T")


def shape_registry() -> TypeRegistry:
    """Raw types A, B, C and derived types T0, T1, ...; every type carries ``v``."""
    reg = TypeRegistry()
    for name in (*RAW, *DERIVED):
        reg.register(name, v="i8")
    return reg


# ------------------------------------------------------------------ detectors


class Generic(Detector):
    """A detector whose input, output and clock types are chosen per instance.

    ``arity`` bounds its number of inputs and outputs; roles (A, B, C of a pattern) go
    by position in ``inputs``. Its ``repr`` is the call that rebuilds it.
    """

    arity: ClassVar[tuple[int, int, int, int]] = (1, 2, 1, 1)  # inputs min, max; outputs

    def __init__(self, inputs: Sequence[str], outputs: Sequence[str],
                 clock: Sequence[str] | None = None) -> None:
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self.clock = None if clock is None else tuple(clock)

    def params(self) -> dict[str, Any]:
        """Constructor arguments besides the types (for ``repr``)."""
        return {}

    def __repr__(self) -> str:
        args = [repr(self.inputs), repr(self.outputs),
                *(f"{k}={v!r}" for k, v in self.params().items())]
        if self.clock is not None:
            args.append(f"clock={self.clock!r}")
        return f"{type(self).__name__}({', '.join(args)})"


class Echo(Generic):
    """Stateless: every input becomes one output event with its time stamp, key and v."""

    def on_event(self, event: EventView, emit: Emitter) -> None:
        emit(self.outputs[0], event.ts, event.key, v=event["v"])


class Split(Generic):
    """Stateless, vectorised, several outputs: an input goes to ``outputs[v % n]``."""

    arity = (1, 2, 2, 3)

    def on_batch(self, events: np.ndarray, type_names: Sequence[str], emit: Emitter) -> None:
        v = events["v"]
        for i, name in enumerate(self.outputs):
            hit = np.flatnonzero(v % len(self.outputs) == i)
            if len(hit):
                emit.many(name, ts=events["ts"][hit], key=events["key"][hit], cause=hit,
                          v=v[hit])


class Repeat(Generic):
    """Stateless, several emissions per input: ``1 + v % 3`` events, the i-th of type
    ``outputs[i % n]`` with value ``v + i``."""

    arity = (1, 1, 1, 2)

    def on_event(self, event: EventView, emit: Emitter) -> None:
        for i in range(1 + event["v"] % 3):
            emit(self.outputs[i % len(self.outputs)], event.ts, event.key, v=event["v"] + i)


class Count(Generic):
    """A running count of the inputs (mod ``modulo`` when it is > 0, so that replayed
    states meet the recorded ones again). Snapshots are the count itself."""

    def __init__(self, inputs: Sequence[str], outputs: Sequence[str], modulo: int = 0,
                 clock: Sequence[str] | None = None) -> None:
        super().__init__(inputs, outputs, clock)
        self.modulo = modulo
        self.count = 0

    def params(self) -> dict[str, Any]:
        return {"modulo": self.modulo}

    def on_event(self, event: EventView, emit: Emitter) -> None:
        self.count += 1
        if self.modulo:
            self.count %= self.modulo
        emit(self.outputs[0], event.ts, event.key, v=self.count)

    def snapshot(self) -> Any:
        return self.count

    def restore(self, state: Any) -> None:
        self.count = state


class Sum(Generic):
    """A fan-in: the running sum of ``v + 1`` over all inputs, mod 5 (state by pickle)."""

    arity = (2, 3, 1, 1)

    def __init__(self, inputs: Sequence[str], outputs: Sequence[str],
                 clock: Sequence[str] | None = None) -> None:
        super().__init__(inputs, outputs, clock)
        self.total = 0

    def on_event(self, event: EventView, emit: Emitter) -> None:
        self.total = (self.total + event["v"] + 1) % 5
        emit(self.outputs[0], event.ts, event.key, v=self.total)


class NotBetween(Generic):
    """A!BC: ``inputs[0]``, then ``inputs[2]`` with no ``inputs[1]`` between, emits at the
    C's time stamp with v = the gap since the A."""

    arity = (3, 3, 1, 1)

    def __init__(self, inputs: Sequence[str], outputs: Sequence[str],
                 clock: Sequence[str] | None = None) -> None:
        super().__init__(inputs, outputs, clock)
        self.armed_at = -1

    def on_event(self, event: EventView, emit: Emitter) -> None:
        a, b, _ = self.inputs
        if event.type == a:
            self.armed_at = event.ts
        elif event.type == b:
            self.armed_at = -1
        elif self.armed_at >= 0:
            emit(self.outputs[0], event.ts, event.key, v=event.ts - self.armed_at)
            self.armed_at = -1


class Within(Generic):
    """A time window: ``inputs[1]`` within ``window`` of the last ``inputs[0]`` emits,
    at its own time stamp, with v = the gap."""

    arity = (2, 2, 1, 1)

    def __init__(self, inputs: Sequence[str], outputs: Sequence[str], window: int = 4,
                 clock: Sequence[str] | None = None) -> None:
        super().__init__(inputs, outputs, clock)
        self.window = window
        self.last_a = -(2**40)

    def params(self) -> dict[str, Any]:
        return {"window": self.window}

    def on_event(self, event: EventView, emit: Emitter) -> None:
        if event.type == self.inputs[0]:
            self.last_a = event.ts
        elif event.ts - self.last_a <= self.window:
            emit(self.outputs[0], event.ts, event.key, v=event.ts - self.last_a)


class Recent(Generic):
    """A sliding window: on every input, emits how many inputs fell in the last
    ``window`` time units (the state is the list of their time stamps)."""

    def __init__(self, inputs: Sequence[str], outputs: Sequence[str], window: int = 3,
                 clock: Sequence[str] | None = None) -> None:
        super().__init__(inputs, outputs, clock)
        self.window = window
        self.recent: list[int] = []

    def params(self) -> dict[str, Any]:
        return {"window": self.window}

    def on_event(self, event: EventView, emit: Emitter) -> None:
        self.recent = [t for t in self.recent if t > event.ts - self.window] + [event.ts]
        emit(self.outputs[0], event.ts, event.key, v=len(self.recent))


class Closing(Generic):
    """Stateful with an end: echoes every input and, when the stream ends, emits its first
    input (the earliest in time-stamp order) once more, with ``v + 100`` (a window that
    the end of the stream closes)."""

    def __init__(self, inputs: Sequence[str], outputs: Sequence[str],
                 clock: Sequence[str] | None = None) -> None:
        super().__init__(inputs, outputs, clock)
        self.first: tuple[int, int, int] | None = None

    def on_event(self, event: EventView, emit: Emitter) -> None:
        if self.first is None:
            self.first = (event.ts, event.key, int(event["v"]))
        emit(self.outputs[0], event.ts, event.key, v=event["v"])

    def on_end(self, emit: Emitter) -> None:
        if self.first is not None:
            ts, k, v = self.first
            emit(self.outputs[0], ts, k, v=v + 100)


#: Simplest first: shrinking tends towards the front.
KINDS: tuple[type[Generic], ...] = (Echo, Split, Count, Repeat, Sum, Within, NotBetween,
                                    Recent, Closing)


# ------------------------------------------------------------------ a case


@dataclass(frozen=True)
class Spec:
    """One node of a generated graph: name, detector and ordering-unit options."""

    name: str
    detector: Generic
    alpha: Alpha = 1.0
    retraction: str = "full"
    k0: int = 1000
    partitions: int = 1
    idle_after: int | None = None


@dataclass(frozen=True)
class Case:
    """A graph, a raw stream of ``(type, ts, key, v, ats)`` in occurrence order, and the
    arrival time one runtime step covers; or, with ``batch_rows``, the number of raw
    events per step of the stream handed over as an iterable of batches."""

    nodes: tuple[Spec, ...]
    events: tuple[tuple[str, int, int, int, int], ...]
    step_ticks: int = 0
    batch_rows: int = 0

    def graph(self) -> Graph:
        g = Graph(shape_registry(), sources=RAW)
        for s in self.nodes:
            g.add(s.name, s.detector, alpha=s.alpha, retraction=s.retraction, k0=s.k0,
                  partitions=s.partitions, idle_after=s.idle_after)
        return g

    def raw(self, registry: TypeRegistry) -> np.ndarray:
        """The stream as a batch in arrival order; ``seq`` numbers it in occurrence order."""
        rows = [{"type": t, "ts": ts, "key": k, "v": v, "ats": a, "seq": i}
                for i, (t, ts, k, v, a) in enumerate(self.events)]
        raw = registry.from_records(rows, dtype=registry.dtype(RAW))
        return raw[np.argsort(raw["ats"], kind="stable")]

    def nothing_late(self) -> Case:
        """The same case with every node's K starting above the stream's span."""
        return replace(self, nodes=tuple(replace(s, k0=K0S[0]) for s in self.nodes))

    def __repr__(self) -> str:
        nodes = "".join(f"\n    {s!r}," for s in self.nodes)
        events = ", ".join(repr(e) for e in self.events)
        return (f"Case(nodes=({nodes}\n), events=({events},), step_ticks={self.step_ticks}, "
                f"batch_rows={self.batch_rows})")


# ------------------------------------------------------------------ choosers


class Chooser(Protocol):
    """Where the generator's decisions come from."""

    def integer(self, lo: int, hi: int) -> int: ...
    def choice(self, options: Sequence[T]) -> T: ...
    def repeat(self, make: Callable[[Chooser], T], lo: int, hi: int) -> list[T]: ...

    def sample(self, options: Sequence[T], k: int) -> list[T]:
        """``k`` distinct options, in the order picked."""
        left, out = list(options), []
        for _ in range(k):
            out.append(left.pop(self.integer(0, len(left) - 1)))
        return out


class RngChooser(Chooser):
    """Decisions from a seeded NumPy generator."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def integer(self, lo: int, hi: int) -> int:
        return int(self.rng.integers(lo, hi + 1))

    def choice(self, options: Sequence[T]) -> T:
        return options[int(self.rng.integers(len(options)))]

    def repeat(self, make: Callable[[Chooser], T], lo: int, hi: int) -> list[T]:
        return [make(self) for _ in range(self.integer(lo, hi))]


@functools.lru_cache
def _integers(lo: int, hi: int) -> st.SearchStrategy[int]:
    return st.integers(lo, hi)


class DrawChooser(Chooser):
    """Decisions drawn inside a Hypothesis test, so that they shrink. A repeated part
    draws a minimum size (up to half the maximum) and then, per further element, whether
    there is one more: the shrinker can drop elements from the end and, by deleting
    their draws, from anywhere."""

    def __init__(self, draw: Callable[[st.SearchStrategy], Any]) -> None:
        self.draw = draw

    def integer(self, lo: int, hi: int) -> int:
        return self.draw(_integers(lo, hi))

    def choice(self, options: Sequence[T]) -> T:
        return options[self.draw(_integers(0, len(options) - 1))]

    def repeat(self, make: Callable[[Chooser], T], lo: int, hi: int) -> list[T]:
        floor = self.integer(lo, max(lo, hi // 2))
        out: list[T] = []
        while len(out) < hi and (len(out) < floor or self.integer(0, 1)):
            out.append(make(self))
        return out


# ------------------------------------------------------------------ generation


def random_case(ch: Chooser, *, modes: Sequence[str] = ("full", "on-demand"),
                max_events: int = 40) -> Case:
    """A graph over ``modes`` of retraction, a stream of up to ``max_events`` raw events
    and a step size (of arrival time, or of raw events delivered as batches)."""
    nodes = random_graph(ch, modes)
    events = random_stream(ch, max_events)
    return Case(nodes, events, ch.choice(BATCH_TICKS), ch.choice(BATCH_ROWS))


def random_graph(ch: Chooser, modes: Sequence[str]) -> tuple[Spec, ...]:
    """2-4 levels of 1-2 nodes. A node of level L subscribes to at least one type of
    level L-1 and to any types below; an output may reuse a type another node of its
    level publishes (a type with several producers)."""
    below: list[str] = list(RAW)  # every type published under the current level
    previous: list[str] = list(RAW)  # the types of the level right below
    fresh = iter(DERIVED)
    specs: list[Spec] = []
    for level in range(1, ch.integer(2, 4) + 1):
        nodes, published = random_level(ch, previous, below, fresh, modes)
        specs += [replace(s, name=f"n{level}{'ab'[j]}") for j, s in enumerate(nodes)]
        below += [t for t in published if t not in below]
        previous = published
    return tuple(specs)


def random_level(ch: Chooser, previous: list[str], below: list[str], fresh: Any,
                 modes: Sequence[str]) -> tuple[list[Spec], list[str]]:
    """The 1-2 nodes of one level (not yet named) and the types they publish."""
    published: list[str] = []

    def node(c: Chooser) -> Spec:
        detector = random_detector(c, previous, below, published, fresh)
        published.extend(t for t in detector.outputs if t not in published)
        return random_options(c, "", detector, modes)

    return ch.repeat(node, 1, 2), published


def random_detector(ch: Chooser, previous: list[str], below: list[str], published: list[str],
                    fresh: Any) -> Generic:
    """A detector of a random kind on one type of the level below plus others from
    anywhere below, with new (or this level's) output types and a random clock."""
    kind = ch.choice(KINDS)
    lo_in, hi_in, lo_out, hi_out = kind.arity
    first = ch.choice(previous)
    others = [t for t in below if t != first]
    if len(others) < lo_in - 1:
        kind, lo_in, hi_in, lo_out, hi_out = Echo, 1, 1, 1, 1
    n_in = ch.integer(lo_in, min(hi_in, len(others) + 1))
    inputs = ch.sample(others, n_in - 1)
    inputs.insert(ch.integer(0, n_in - 1), first)
    outputs: list[str] = []
    for _ in range(ch.integer(lo_out, hi_out)):
        shared = [t for t in published if t not in outputs]
        if shared and ch.choice((False, True)):
            outputs.append(ch.choice(shared))
        else:
            outputs.append(next(fresh))
    clock = None
    if ch.choice((False, True)):
        clock = ch.sample(inputs, ch.integer(1, len(inputs)))
    extra: dict[str, int] = {}
    if kind is Count:
        extra["modulo"] = ch.choice((0, 2, 3))
    elif kind in (Within, Recent):
        extra["window"] = ch.choice((4, 1, 10))
    return kind(inputs, outputs, clock=clock, **extra)


def random_options(ch: Chooser, name: str, detector: Generic, modes: Sequence[str]) -> Spec:
    """Alpha (pure, 0, a fraction, adaptive), retraction mode, k0 and partitions."""
    alpha: Alpha = ch.choice((1.0, 0.0, "fraction", "adaptive"))
    if alpha == "fraction":
        alpha = ch.integer(1, 9) / 10
    return Spec(name, detector, alpha=alpha, retraction=ch.choice(tuple(modes)),
                k0=ch.choice(K0S), partitions=ch.integer(1, 3))


def random_stream(ch: Chooser, max_events: int) -> tuple[tuple[str, int, int, int, int], ...]:
    """Raw events in occurrence order: time stamps step by 0-3 (ties), 4 keys, v in 0..9,
    each delayed by up to a random maximum, and up to two bursts: runs of events held
    back and delivered together (equal arrival times)."""
    max_delay = ch.choice((0, 3, 10, 30))

    def event(c: Chooser) -> tuple[str, int, int, int, int]:
        # one draw per event (cheap to generate, shrinks towards A, +1, key 0, v 0, on time)
        n = c.integer(0, 3 * 4 * 4 * 10 * (max_delay + 1) - 1)
        n, kind = divmod(n, 3)
        n, step = divmod(n, 4)
        n, k = divmod(n, 4)
        delay, v = divmod(n, 10)
        return RAW[kind], (1, 0, 2, 3)[step], k, v, delay

    ts, events = 0, []
    for kind, step, k, v, delay in ch.repeat(event, 1, max_events):
        ts += step
        events.append([kind, ts, k, v, ts + delay])
    for _ in range(ch.integer(0, 2)):
        start = ch.integer(0, len(events) - 1)
        run = events[start:start + ch.integer(1, 8)]
        arrive = max(e[4] for e in run) + ch.integer(0, 40)
        for e in run:
            e[4] = arrive
    return tuple(tuple(e) for e in events)


#: idle_after of the nodes of an idle case (no idleness first: shrinking goes there).
IDLE_AFTERS = (None, 0, 3, 10)


def random_idle_case(ch: Chooser, *, modes: Sequence[str] = ("full", "on-demand"),
                     max_events: int = 60) -> Case:
    """A case of :func:`random_case` whose inputs go idle: keys folded so that one
    partition of a node gets every event (or two share them) and the others none, raw
    types silent for 1-3 spells of event time (a source that goes quiet mid-stream and
    comes back, or for good), and every node given the same ``idle_after``."""
    case = random_case(ch, modes=modes, max_events=max_events)
    keys = ch.choice((4, 1, 2))  # key % keys: 4 leaves the keys as they are
    end = case.events[-1][1] + 1

    def spell(c: Chooser) -> tuple[str, int, int]:
        start = c.integer(0, end)
        return c.choice(RAW), start, start + c.choice((end, 4, 12, 30))

    spells = ch.repeat(spell, 1, 3)
    events = [(t, ts, k % keys, v, a) for t, ts, k, v, a in case.events
              if not any(t == q and lo <= ts < hi for q, lo, hi in spells)]
    idle = ch.choice(IDLE_AFTERS)
    return replace(case, nodes=tuple(replace(s, idle_after=idle) for s in case.nodes),
                   events=tuple(events) or case.events[:1])


def seeded_case(seed: int, **kwargs: Any) -> Case:
    """The case a seed stands for (see :func:`random_case` for the options)."""
    return random_case(RngChooser(seed), **kwargs)


@st.composite
def cases(draw: Callable[[st.SearchStrategy], Any], **kwargs: Any) -> Case:
    """Hypothesis strategy of cases (see :func:`random_case` for the options)."""
    return random_case(DrawChooser(draw), **kwargs)


@st.composite
def idle_cases(draw: Callable[[st.SearchStrategy], Any], **kwargs: Any) -> Case:
    """Hypothesis strategy of cases whose inputs go idle (:func:`random_idle_case`)."""
    return random_idle_case(DrawChooser(draw), **kwargs)
