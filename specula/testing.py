"""Testing your own detectors: feed one (or a small graph) a few events, and check that
it keeps the detector contract.

Two functions, in the spirit of Flink's operator test harnesses, Kafka Streams'
``TopologyTestDriver`` and river's ``check_estimator``:

- :func:`feed` runs a detector, or a :class:`~specula.detectors.Graph`, on events given
  as records (``{"type": ..., "ts": ..., "key": ..., **fields}``) in the in-process
  runtime, in time-stamp order or in an arrival order of your choosing, with the node
  options you want (``alpha``, ``retraction``, ``k0``, ...), and returns what it
  emitted and its net output as plain records;
- :func:`check_detector` runs the checks every detector must pass, yours as well as
  the package's (``tests/detectors/test_contract.py`` calls it on each of them), and
  raises :class:`AssertionError` saying what broke and how to fix it.

Examples
--------
A detector of readings above 10, and three readings:

>>> from specula import Detector, TypeRegistry
>>> class High(Detector):
...     '''A reading above 10.'''
...     inputs, outputs = ("reading",), ("high",)
...     def on_event(self, event, emit):
...         if event["value"] > 10:
...             emit("high", event.ts, event.key, value=event["value"])
>>> reg = TypeRegistry()
>>> _ = reg.register("reading", value="i8"), reg.register("high", value="i8")
>>> readings = [{"type": "reading", "ts": t, "key": 1, "value": v}
...             for t, v in [(1, 5), (2, 12), (3, 20)]]
>>> feed(High(), readings, registry=reg).net
[{'type': 'high', 'ts': 2, 'key': 1, 'value': 12}, {'type': 'high', 'ts': 3, 'key': 1, 'value': 20}]

The reading of time 2 arrives last; K = 1 tick covers its delay, and a unit that
speculates (``alpha=0``) emits at once; when the late reading arrives it replays, and
(with on-demand retraction, the default) sends only what changed, the new detection:

>>> out = feed(High(), readings, registry=reg, order=[0, 2, 1], alpha=0.0, k0=1)
>>> [(e["kind"], e["ts"]) for e in out.emitted]
[('event', 3), ('event', 2)]
>>> full = feed(High(), readings, registry=reg, order=[0, 2, 1], alpha=0.0, k0=1,
...             retraction="full")
>>> [(e["kind"], e.get("ts")) for e in full.emitted]  # a retraction names counters
[('event', 3), ('retract', None), ('event', 2), ('event', 3)]
>>> out.net == feed(High(), readings, registry=reg).net
True
>>> check_detector(High(), readings, reg)  # passes: no news
"""

from __future__ import annotations

import copy
import pickle
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import cloudpickle  # type: ignore[import-untyped]  # ships no types
import numpy as np

from specula import events as ev
from specula.actors import InProcessRuntime, RunReport
from specula.actors.report import DetectorReport
from specula.detectors import Detector, Emitter, Graph
from specula.events import TypeRegistry
from specula.options import CostModel

__all__ = ["NodeResult", "Result", "check_detector", "feed", "records"]

#: Events as a caller gives them: records (mappings) or a batch (structured array).
Events = Iterable[Mapping[str, Any]] | np.ndarray

# ------------------------------------------------------------------------------ feed


def feed(target: Detector | Graph, events: Events, *, registry: TypeRegistry | None = None,
         order: Sequence[int] | None = None, step_ticks: int | None = None,
         **options: Any) -> Result:
    """Run a detector, or a small graph, on ``events`` in the in-process runtime.

    Parameters
    ----------
    target
        A detector (run alone, in a graph whose sources are its inputs) or a
        :class:`~specula.detectors.Graph` (``events`` are of its source types). The
        runtime works on copies: ``target`` is not changed.
    events
        Records, as :meth:`~specula.events.TypeRegistry.from_records` reads them
        (``{"type": "ball", "ts": 5, "key": 4, "x": 100}``; fields left out are 0), or a
        batch of the registry's events.
    registry
        The registry of the events' types; a detector needs it, a graph has its own.
    order
        How the events arrive: ``order[i]`` is the index in ``events`` of the ``i``-th
        to arrive. Default: in time-stamp order (ties in the order given). Each arrives
        alone, when the newest time stamp so far occurred (so in-order events arrive
        when they occur), and is numbered, like a source's counter, in time-stamp
        order. An event that arrives
        K or more behind the newest time stamp may be late (``k0`` sets K at the start;
        ties go by the counter).
    step_ticks
        For events that carry arrival times (``ats``, not all 0), which arrive by those
        instead: the arrival time one step of the runtime takes in (``run(step_ticks=)``
        of the runtimes; default: a few ms; 0: one step per arrival time).
    **options
        Node options (:data:`specula.options.NODE_OPTIONS`: ``alpha``, ``retraction``,
        ``late``, ``k0``, ``partitions``, ...), for the detector, or for every node of
        the graph.

    Returns
    -------
    Result
        Per node, its emissions, net output and late events as records. Runs are
        deterministic (alpha-adaptation runs on a :class:`~specula.CostModel`'s virtual
        clock).
    """
    graph, registry = _graph(target, registry, options)
    what = "a source of the graph" if isinstance(target, Graph) \
        else f"an input of {type(target).__name__}"
    raw = _batch(events, registry, graph.sources, what)
    runtime = InProcessRuntime(graph, cost_model=CostModel())
    if raw["ats"].any():
        if order is not None:
            raise ValueError("the events carry arrival times (ats) and arrive in their "
                             "order; give either ats or order=, not both")
        report = runtime.run(raw, step_ticks=step_ticks, registry=registry)
    else:
        if step_ticks is not None:
            raise ValueError("step_ticks groups events by their arrival times; without "
                             "ats each event arrives alone")
        report = runtime.run(_one_by_one(raw, order), registry=registry)
    return Result(report, graph.registry)


def _graph(target: Detector | Graph, registry: TypeRegistry | None,
           options: dict[str, Any]) -> tuple[Graph, TypeRegistry]:
    """The graph to run and the registry of the events."""
    if isinstance(target, Graph):
        graph = target.with_options(**options) if options else target
        return graph, registry if registry is not None else target.registry
    if not isinstance(target, Detector):
        raise TypeError(f"feed runs a Detector or a Graph, got {type(target).__name__}")
    if registry is None:
        raise TypeError(f"feed({type(target).__name__}(), events, registry=...) needs the "
                        "registry its event types are registered on")
    return Graph(registry, sources=target.inputs).add(type(target).__name__, target,
                                                      **options), registry


def _batch(events: Events, registry: TypeRegistry, types: Sequence[str], what: str
           ) -> np.ndarray:
    """``events`` as a new batch of ``registry.dtype(types)``, in the order given; a
    record of another type is an :class:`~specula.events.InvalidEvent` (``what`` says
    what the types are)."""
    batch = events if isinstance(events, np.ndarray) else registry.from_records(events)
    allowed = [registry.id(t) for t in types if t in registry]
    for i in np.flatnonzero(~np.isin(batch["type"], allowed)).tolist()[:1]:
        t = int(batch["type"][i])
        name = registry.name(t) if t in registry else t
        raise ev.InvalidEvent(i, "type", f"{name!r} is not {what} ({', '.join(types)})")
    return ev.conform(batch, registry.dtype([t for t in types if t in registry]), drop=True)


def _one_by_one(raw: np.ndarray, order: Sequence[int] | None) -> list[np.ndarray]:
    """One-event batches in arrival order (``order``, else time-stamp order), each
    arriving at the newest time stamp so far; numbered in time-stamp order unless they
    carry counters."""
    n = len(raw)
    arrival = np.argsort(raw["ts"], kind="stable") if order is None else np.asarray(order)
    if arrival.shape != (n,) or not np.array_equal(np.sort(arrival), np.arange(n)):
        raise ValueError(f"order must list each index of the {n} events once (a "
                         f"permutation of 0..{n - 1}); got {list(arrival.tolist())!r}")
    if not raw["seq"].any():
        raw["seq"][np.argsort(raw["ts"], kind="stable")] = np.arange(n)
    arrived = raw[arrival]
    if n:
        arrived["ats"] = np.maximum.accumulate(arrived["ts"])
    return [arrived[i:i + 1] for i in range(n)]


@dataclass(frozen=True)
class NodeResult:
    """What one node of a run produced, as records (see :func:`records`)."""

    report: DetectorReport
    registry: TypeRegistry

    @property
    def net(self) -> list[dict[str, Any]]:
        """Its net output: what it emitted, less what it retracted, updates applied; in
        time-stamp order."""
        return records(self.report.net.net(), self.registry)

    @property
    def emitted(self) -> list[dict[str, Any]]:
        """Everything it sent, in order, each with ``kind``: ``"event"``, ``"update"``
        (replaces the event of the same ``producer`` and ``seq``), ``"revoke"``
        (withdraws that one event) or ``"retract"`` (withdraws its events from ``seq``
        on; it names no type)."""
        sent = self.report.net.emissions()
        out = []
        for row, record in zip(sent, records(sent, self.registry), strict=True):
            flags = int(row["flags"])
            kind = ("retract" if flags & ev.RETRACTION else "revoke" if flags & ev.REVOKE
                    else "update" if flags & ev.UPDATE else "event")
            out.append({"kind": kind, **record, "producer": int(row["producer"]),
                        "seq": int(row["seq"])})
        return out

    @property
    def late(self) -> list[dict[str, Any]]:
        """The input events that arrived too late for its K (counted, not processed
        unless ``late="process"``)."""
        return records(self.report.late, self.registry)


@dataclass(frozen=True)
class Result:
    """What :func:`feed` produced: ``result[node]`` per node, or ``net``, ``emitted`` and
    ``late`` directly when there is one node (a detector fed alone). ``report`` is the
    runtime's :class:`~specula.RunReport`, with arrays, counters and latencies."""

    report: RunReport
    registry: TypeRegistry

    def __getitem__(self, node: str) -> NodeResult:
        if node not in self.report.detectors:
            raise KeyError(f"no node {node!r}; the nodes are {', '.join(self.report.detectors)}")
        return NodeResult(self.report.detectors[node], self.registry)

    def _only(self) -> NodeResult:
        nodes = list(self.report.detectors)
        if len(nodes) != 1:
            raise ValueError(f"the graph has the nodes {', '.join(nodes)}: read one as "
                             f"result[{nodes[0]!r}]")
        return self[nodes[0]]

    @property
    def net(self) -> list[dict[str, Any]]:
        """The net output of the one node."""
        return self._only().net

    @property
    def emitted(self) -> list[dict[str, Any]]:
        """What the one node sent (:attr:`NodeResult.emitted`)."""
        return self._only().emitted

    @property
    def late(self) -> list[dict[str, Any]]:
        """The late input events of the one node."""
        return self._only().late


def records(batch: np.ndarray, registry: TypeRegistry) -> list[dict[str, Any]]:
    """Events as plain records: ``type`` (its name), ``ts``, ``key`` and the fields of its
    own type (string fields as text), as Python values; ``{}`` for a row of no type (a
    range retraction).

    >>> reg = TypeRegistry()
    >>> _ = reg.register("goal", team="i1", scorer=str)
    >>> records(reg.batch("goal", ts=[7], key=3, team=1, scorer="Zoff"), reg)
    [{'type': 'goal', 'ts': 7, 'key': 3, 'team': 1, 'scorer': 'Zoff'}]
    """
    out: list[dict[str, Any]] = [{} for _ in range(len(batch))]
    types = batch["type"]
    for t in ev.distinct(types).tolist():
        if t not in registry:
            continue
        etype = registry[registry.name(t)]
        rows = np.flatnonzero(types == t)
        columns = {f: batch[f][rows].tolist() for f in ("ts", "key", *etype.field_names)}
        for f in etype.strings:
            columns[f] = [registry.strings.text(c) for c in columns[f]]
        for j, i in enumerate(rows.tolist()):
            out[i] = {"type": etype.name, **{f: c[j] for f, c in columns.items()}}
    return out


# ------------------------------------------------------------------ check_detector


def check_detector(detector: Detector, events: Events, registry: TypeRegistry) -> None:
    """Check that ``detector`` keeps the detector contract on ``events``.

    An ordering unit hands a detector time-ordered batches cut wherever arrivals fall,
    snapshots it before it speculates and restores it when a late event proves the
    speculation wrong; checkpoints pickle its snapshots, and the Ray runtime pickles the
    detector into its actor. So it must

    - declare its inputs and outputs (registered types), a clock among its inputs, and
      say what it detects (a docstring of its own);
    - emit only its declared output types, with their registered fields;
    - not change its input batches;
    - give the same output for the same input, however the input is cut into batches;
    - after snapshot -> more input -> restore, continue exactly as if uninterrupted, and
      so must a fresh copy restored from the snapshot, pickled and read back; snapshots
      must compare with ``==`` (on-demand retraction compares them);
    - survive a pickle round trip mid-stream and continue identically;
    - behind a unit that speculates while its events arrive out of order within K, give
      the net output it gives in time-stamp order.

    Parameters
    ----------
    detector
        A fresh detector; the checks work on copies of it.
    events
        Records or a batch of its input types on which it detects something (the
        checks compare outputs); put in time-stamp order here, as a unit would.
    registry
        The registry its types are registered on.

    Raises
    ------
    AssertionError
        Naming the detector, what it broke and how to fix it.
    ValueError
        If it detects nothing on ``events``; :class:`~specula.events.InvalidEvent` (a
        ValueError) names a record that is not one of its inputs.

    Examples
    --------
    A detector whose snapshot shares the list it keeps appending to, so that restoring
    the snapshot does not bring back the list as it was:

    >>> from specula import Detector, TypeRegistry
    >>> class Rising(Detector):
    ...     '''A value above every value before it.'''
    ...     inputs, outputs = ("reading",), ("record",)
    ...     def __init__(self):
    ...         self.seen = []
    ...     def on_event(self, event, emit):
    ...         if all(event["value"] > v for v in self.seen):
    ...             emit("record", event.ts, value=event["value"])
    ...         self.seen.append(event["value"])
    ...     def snapshot(self):
    ...         return self.seen  # should be a copy: list(self.seen)
    ...     def restore(self, state):
    ...         self.seen = state
    >>> reg = TypeRegistry()
    >>> _ = reg.register("reading", value="i8"), reg.register("record", value="i8")
    >>> check_detector(Rising(), [{"type": "reading", "ts": t, "value": v}
    ...     for t, v in enumerate([3, 1, 4, 1, 5, 9, 2, 6])], reg)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: Rising: snapshot -> more input -> restore -> continue differs from an...
    """
    name = type(detector).__name__
    _check_declaration(detector, registry)
    batch = _contract_input(detector, events, registry)
    run = _Runner(detector, registry)

    frozen = batch.copy()
    whole = run(_copy(detector), [batch])
    if not whole:
        raise ValueError(f"{name} detects nothing on the events given: the checks compare "
                         "outputs, give it events on which it emits something")
    _expect(np.array_equal(batch, frozen), name, "changed the batch it was given",
            "a detector reads its input and never writes to it: copy what it must change")
    _expect_same(run(_copy(detector), [batch]), whole, name,
                 "gave different output for the same input",
                 "do not read the wall clock, draw random numbers without a fixed seed, or "
                 "depend on the iteration order of sets of strings")
    cuts = _cuts(len(batch))
    _expect_same(run(_copy(detector), np.split(batch, cuts)), whole, name,
                 f"gives other output when its input is cut into batches at {cuts}",
                 "keep what one batch leaves unfinished in state, for the next one")
    _check_snapshots(detector, batch, whole, run)
    _check_speculation(detector, batch, registry)


def _check_declaration(detector: Detector, registry: TypeRegistry) -> None:
    cls, name = type(detector), type(detector).__name__
    _expect(bool(cls.__dict__.get("__doc__")), name, "has no docstring of its own",
            "say what it detects in the class docstring")
    for attr in ("inputs", "outputs"):
        types = getattr(detector, attr)
        _expect(isinstance(types, tuple) and bool(types), name, f"declares no {attr}",
                f"set the class attribute {attr} = ('type', ...)")
        for t in types:
            _expect(t in registry, name, f"has {attr[:-1]} type {t!r}, which the registry "
                    "does not know", f"register it first: registry.register({t!r}, ...)")
    clock = set(detector.clock_types())
    _expect(clock <= set(detector.inputs), name, f"has clock types "
            f"{sorted(clock - set(detector.inputs))} that are not among its inputs",
            "clock names the input types whose time stamps advance its unit's clock")


def _contract_input(detector: Detector, events: Events, registry: TypeRegistry
                    ) -> np.ndarray:
    """``events`` as a batch of ``detector``'s inputs in time-stamp order, with the core
    fields a unit sets afresh: raw events of one source, numbered in that order."""
    batch = _batch(events, registry, detector.inputs, f"an input of {type(detector).__name__}")
    batch = batch[np.lexsort((batch["seq"], batch["producer"], batch["ts"]))]
    for f in ("producer", "flags", "kplus", "ats", "origin"):
        batch[f] = 0
    batch["seq"] = np.arange(len(batch))
    return batch


def _copy(detector: Detector) -> Detector:
    """A deep copy, as every run of a runtime makes."""
    try:
        return copy.deepcopy(detector)
    except Exception as exc:  # copying raises what pickling would
        raise AssertionError(f"{type(detector).__name__}: cannot be copied ({exc}); every "
                             "run works on a copy of it: keep no locks, open files or "
                             "generators in its attributes") from exc


def _cuts(n: int) -> list[int]:
    """Up to 7 places to cut a batch of ``n`` events, fixed by ``n``."""
    rng = np.random.default_rng(n)
    return sorted(rng.choice(np.arange(1, n), size=min(7, n - 1), replace=False).tolist()) \
        if n > 1 else []


def _check_snapshots(detector: Detector, batch: np.ndarray, whole: list[tuple],
                     run: _Runner) -> None:
    """Snapshot half way, then: continue, restore and continue again; a fresh copy
    restored from the pickled snapshot; a copy pickled as Ray ships it."""
    name = type(detector).__name__
    half = len(batch) // 2
    live, fresh = _copy(detector), _copy(detector)
    first = run(live, [batch[:half]], end=False)
    try:
        state = live.snapshot()
    except Exception as exc:
        raise AssertionError(f"{name}: snapshot() failed ({exc!r}); the default pickles its "
                             "attributes: keep them picklable, or override snapshot() and "
                             "restore() together") from exc
    _check_comparable(name, state, live.snapshot())
    try:
        stored = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # pickle raises several types
        raise AssertionError(f"{name}: its snapshot cannot be pickled ({exc}); checkpoints "
                             "pickle snapshots, so keep its state picklable") from exc
    try:
        shipped = cloudpickle.loads(cloudpickle.dumps(live))
    except Exception as exc:
        raise AssertionError(f"{name}: cannot be pickled ({exc}); the Ray runtime pickles "
                             "a detector into its actor: keep no open files, locks or "
                             "generators in its attributes") from exc
    run(live, [batch[half:]], end=False)
    live.restore(state)
    _expect_same(first + run(live, [batch[half:]]), whole, name,
                 "snapshot -> more input -> restore -> continue differs from an "
                 "uninterrupted run",
                 "snapshot() must capture all of its state, in a value later input does "
                 "not change (copy mutable state; the default pickles __dict__), and "
                 "restore() must bring all of it back")
    fresh.restore(pickle.loads(stored))
    _expect_same(first + run(fresh, [batch[half:]]), whole, name,
                 "a fresh copy restored from a (pickled) snapshot does not continue where "
                 "the snapshot was taken",
                 "restore() must set all of its state from the snapshot alone")
    _expect_same(first + run(shipped, [batch[half:]]), whole, name,
                 "a copy pickled mid-stream does not continue where it was",
                 "keep all of its state in attributes that pickle (no caches rebuilt "
                 "differently, no state in class attributes or globals)")


def _check_comparable(name: str, state: Any, again: Any) -> None:
    """On-demand retraction compares snapshots with ``==``: it must give a truth value."""
    try:
        bool(state == again)
    except Exception as exc:  # e.g. NumPy's "truth value of an array is ambiguous"
        raise AssertionError(f"{name}: its snapshots cannot be compared with == ({exc}); "
                             "a speculative unit compares them to stop a replay early: "
                             "return bytes (the default pickles __dict__) or plain values, "
                             "not arrays or objects that hold them") from exc


def _check_speculation(detector: Detector, batch: np.ndarray, registry: TypeRegistry
                       ) -> None:
    """Behind a unit that speculates on everything (alpha 0) while its events arrive out
    of order, but within K, its net output is its output in time-stamp order."""
    name = type(detector).__name__
    ts = batch["ts"]
    span = int(ts[-1] - ts[0])
    # delays of up to ~20 events' worth of time, so that a late arrival replays about as
    # many; K above every delay (an event K behind is late if it ties with one purged);
    # steps of that much arrival time, so that long inputs take few steps
    delay = max(1, 20 * span // len(batch))
    ordered, shuffled = batch.copy(), batch.copy()
    ordered["ats"] = ts - ts[0] + 1
    shuffled["ats"] = ordered["ats"] + np.random.default_rng(len(batch)).integers(
        0, delay + 1, len(batch))
    want = feed(detector, ordered, registry=registry, alpha=1.0, k0=delay + 1,
                step_ticks=delay)
    got = feed(detector, shuffled, registry=registry, alpha=0.0, k0=delay + 1,
               step_ticks=delay)
    _expect(not got.late, name, "had late events behind a unit whose K covers every delay",
            "this is a bug in specula.testing or the unit; please report it")
    _expect_same(_tuples(got.net), _tuples(want.net), name,
                 "gives another net output behind a speculative unit when its events "
                 "arrive out of order within K",
                 "let its output depend only on its events' types, time stamps, keys and "
                 "fields in time-stamp order (not on ats, seq or how they were delivered)")


def _tuples(rows: list[dict[str, Any]]) -> list[tuple]:
    """Records as the sorted tuples the checks compare."""
    return sorted((r["type"], r["ts"], r["key"], tuple(sorted(
        (f, v) for f, v in r.items() if f not in ("type", "ts", "key")))) for r in rows)


class _Runner:
    """Feeds a detector batches directly, as a unit does, and returns what it emitted
    (on_end included at the end) as sorted tuples, checking each emission's type and
    fields against its declaration."""

    def __init__(self, detector: Detector, registry: TypeRegistry) -> None:
        self.name = type(detector).__name__
        self.registry = registry
        self.outputs = set(detector.outputs)
        self.names = [""] + [t.name for t in registry.types()]

    def __call__(self, detector: Detector, batches: Iterable[np.ndarray], end: bool = True
                 ) -> list[tuple]:
        out: list[tuple] = []
        for batch in batches:
            emit = Emitter()
            detector.on_batch(batch, self.names, emit)
            out += self._emitted(emit)
        if end:
            emit = Emitter()
            detector.on_end(emit)
            out += self._emitted(emit)
        return sorted(out)  # vectorised detectors emit grouped (e.g. by sensor), not by time

    def _emitted(self, emit: Emitter) -> list[tuple]:
        out = []
        for t, ts, key, payload in emit.rows:
            out.append((self._checked(t, payload), ts, key,
                        tuple(sorted((f, _plain(v)) for f, v in payload.items()))))
        for t, cols, _ in emit.column_batches:
            fields = {f: v for f, v in cols.items() if f not in ("ts", "key")}
            self._checked(t, fields)
            for i in range(len(cols["ts"])):
                out.append((t, int(cols["ts"][i]), int(cols["key"][i]), tuple(sorted(
                    (f, _plain(np.asarray(v)[i])) for f, v in fields.items()))))
        return out

    def _checked(self, type_name: str, payload: Mapping[str, Any]) -> str:
        _expect(type_name in self.outputs, self.name, f"emitted {type_name!r}, which is not "
                f"among its outputs {tuple(sorted(self.outputs))}",
                "declare it in outputs, or emit a declared type")
        unknown = set(payload) - set(self.registry[type_name].field_names)
        _expect(not unknown, self.name, f"emitted {type_name!r} with fields "
                f"{sorted(unknown)} that the type does not have",
                f"emit only its fields {self.registry[type_name].field_names}, or register "
                "them")
        return type_name


def _plain(value: object) -> object:
    return value.item() if isinstance(value, np.generic | np.ndarray) else value


def _expect(ok: bool, name: str, broke: str, fix: str) -> None:
    if not ok:
        raise AssertionError(f"{name}: {broke}; {fix}")


def _expect_same(got: list[tuple], want: list[tuple], name: str, broke: str, fix: str
                 ) -> None:
    """Raise if ``got`` (sorted emissions) differs from ``want``, showing a few of the
    emissions only one of them has."""
    if sorted(got) == want:
        return
    extra, missing = _difference(sorted(got), want)
    raise AssertionError(f"{name}: {broke}; {fix}. Emitted only then: {_show(extra)}; "
                         f"only in the uninterrupted run: {_show(missing)}")


def _difference(a: list[tuple], b: list[tuple]) -> tuple[list[tuple], list[tuple]]:
    """What is in ``a`` but not ``b`` and in ``b`` but not ``a``, as multisets, sorted."""
    ca, cb = Counter(a), Counter(b)
    return sorted((ca - cb).elements()), sorted((cb - ca).elements())


def _show(emissions: list[tuple], most: int = 3) -> str:
    shown = ", ".join(f"{t}(ts={ts}, key={k}{''.join(f', {f}={v!r}' for f, v in p)})"
                      for t, ts, k, p in emissions[:most])
    more = f" and {len(emissions) - most} more" if len(emissions) > most else ""
    return (shown + more) or "none"

